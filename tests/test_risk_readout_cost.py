"""The cheaper forms of two steps of the risk estimate on long paths
(:mod:`skacv.estimates.risk._readout`, :mod:`skacv.estimates.risk._pooled`).

* the clipped extrapolation's correction of the gradient points' residuals
  multiplies ``X~`` by a sparse matrix (``subtract_correction``): the same
  numbers as the dense product with ``X~`` formed by hand (centred,
  weighted), dense and sparse ``X``, by blocks of columns; and
  ``source_residuals`` gives ``y~ - X~ v^t`` for the clipped gradient points
  of real FISTA paths;
* the risk at a few iterates (``risk_at_iterates``, the jackknife's
  replicates) is the whole readout's (``risk_from_products``) at those
  iterates: ISTA, clipped and plain FISTA, with and without an intercept,
  from ``F^T F`` or from the residuals' basis;
* the jackknife reads its replicates at evenly spaced iterates
  (``noise_iterates``): they equal the full replicates there, and the
  probe noise agrees with the one over every iterate within 2 % of itself
  (measured: at most 0.5 % on 300 x 450, 1.1 % on 2000 x 3000, against a
  spread of 10-25 % between probe draws);
* without extrapolation the replicates are read to first order in their
  memory matrices: within 5 % of the exact replicates' distance to the
  estimate, the probe noise within 1 %, the choice noise within 3 %.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils import Bunch

import skacv.estimates.risk._estimate as risk_module
import skacv.estimates.risk._pooled as pooled
import skacv.estimates.risk._probes as probes
from skacv import TrajectoryLasso
from skacv._statistics import get_statistics
from skacv._trace import record
from skacv.estimates.risk._readout import (
    residual_matrix,
    residual_products,
    risk_at_iterates,
    risk_from_memory,
    risk_from_products,
    source_points,
    source_residuals,
    subtract_correction,
)
from skacv.iterations._iterations import FISTA
from skacv.linalg._design import Design


def _data(n, p, seed=0, rho=0.5):
    """Equicorrelated features (FISTA clips many steps on them), ``n / 10``
    non-zero coefficients, positive integer weights."""
    rng = np.random.default_rng(seed)
    X = np.sqrt(1 - rho) * rng.standard_normal((n, p)) + np.sqrt(rho) * rng.standard_normal(
        (n, 1))
    beta = np.zeros(p)
    beta[:n // 10] = rng.standard_normal(n // 10) / np.sqrt(n // 10) * 2.0
    y = X @ beta + rng.standard_normal(n) + 1.0
    return X, y, rng.integers(1, 4, n).astype(float)


def _by_hand(X, w, fit_intercept):
    """``X~ = sqrt(w) (X - 1 xbar_w^T)`` (``xbar_w`` the weighted mean), dense."""
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    w = np.ones(X.shape[0]) if w is None else w
    Xt = X - (w @ X) / w.sum() if fit_intercept else X
    return np.sqrt(w)[:, None] * Xt


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_the_sparse_correction_is_the_dense_product(speed_policy, sparse, fit_intercept,
                                                    weighted):
    """``out -= X~ C`` for a random sparse ``C`` (a few entries a column,
    columns without any) equals the dense product with ``X~`` formed by hand,
    in one block and in blocks of 8 columns of ``X~``."""
    rng = np.random.default_rng(1)
    n, p, k = 60, 90, 25
    X, _, w = _data(n, p)
    X[rng.random(X.shape) < 0.6] = 0.0
    Xin = sp.csr_matrix(X) if sparse else X
    w = w if weighted else None
    design = Design(Xin, w, fit_intercept)
    coords, steps = [], []
    for t in range(k):
        J = rng.choice(p, rng.integers(0, 5), replace=False)
        coords.append(J)
        steps.append(np.full(J.size, t))
    coords, steps = np.concatenate(coords), np.concatenate(steps)
    values = rng.standard_normal(coords.size)
    C = np.zeros((p, k))
    C[coords, steps] = values
    start = rng.standard_normal((n, k))
    expected = start - _by_hand(X, w, fit_intercept) @ C
    for block_bytes in (2**26, 8 * 8 * n):
        speed_policy(correction_block_bytes=block_bytes)
        out = start.copy()
        subtract_correction(design, out, coords, steps, values)
        np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_source_residuals_are_the_residuals_of_the_clipped_gradient_points(
        speed_policy, sparse, fit_intercept, weighted):
    """``source_residuals`` of a clipped FISTA path (40 x 60 equicorrelated,
    80 steps, many clipped steps) is ``y~ 1^T - X~ V`` with ``V`` the
    clipped gradient points (``source_points``) and ``X~``, ``y~`` formed
    by hand; in blocks of 8 columns too."""
    n, p = 40, 60
    X, y, w = _data(n, p, seed=2)
    Xin = sp.csr_matrix(X) if sparse else X
    w = w if weighted else None
    est = TrajectoryLasso(0.02, max_iter=80, fit_intercept=fit_intercept,
                          estimate_risk=False).fit(Xin, y, sample_weight=w)
    prob = est._problem(Xin, y, sample_weight=w)
    design, iteration, path = prob.design, prob.iteration, est.coef_path_
    columns = [iteration.extrapolation_columns(t, path[:, t], path[:, t - 1])
               for t in range(1, path.shape[1])]
    clipped = sum(c[0].size for c in columns if c is not None)
    assert clipped >= 20  # the correction is not empty
    ww = np.ones(n) if w is None else w
    y_tilde = np.sqrt(ww) * (y - (ww @ y) / ww.sum() if fit_intercept else y)
    expected = y_tilde[:, None] - _by_hand(X, w, fit_intercept) @ source_points(iteration, path)
    F = residual_matrix(design, est._fit_target(design, y)[1], path)
    for block_bytes in (2**26, 8 * 8 * n):
        speed_policy(correction_block_bytes=block_bytes)
        np.testing.assert_allclose(source_residuals(design, iteration, F, path), expected,
                                   rtol=1e-10, atol=1e-10 * np.abs(expected).max())
    # the estimators' fit loop records X~ v^t instead: both loops (two
    # products a step, one pass over row panels) give the same residuals
    for fuse_min_bytes in (2**62, 0):
        speed_policy(fuse_min_bytes=fuse_min_bytes)
        fit = TrajectoryLasso(0.02, max_iter=80, fit_intercept=fit_intercept,
                              n_probes=2).fit(Xin, y, sample_weight=w)
        np.testing.assert_allclose(fit.coef_path_, path, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(y_tilde[:, None] - fit._source_path, expected, rtol=1e-10,
                                   atol=1e-10 * np.abs(expected).max())


def test_a_staged_fit_reads_the_loops_gradient_points(speed_policy):
    """A fit and its warm-started continuations (the staged search's
    stages) read the gradient points' residuals from the loop's record, and
    their ``risk_path_`` is the one from :func:`source_residuals`'s
    products (the record withheld: the policy's ``loop_records``)."""
    X, y, _ = _data(120, 180, seed=3)
    kw = dict(alpha=0.02, max_iter=30, random_state=0)
    warm = TrajectoryLasso(warm_start=True, **kw)
    with record() as paths:
        warm.fit(X, y)
        warm.set_params(max_iter=60).fit(X, y)
        cold = TrajectoryLasso(**{**kw, "max_iter": 60}).fit(X, y)
    assert paths.count("fit") == 3 and "source_residuals" not in paths
    assert warm._source_path.shape == (120, 61)
    # the continued chain's template moves the split a little (as before the record)
    np.testing.assert_allclose(warm.risk_path_, cold.risk_path_, rtol=1e-6)
    speed_policy(loop_records=False)
    with record() as paths:
        products = TrajectoryLasso(**{**kw, "max_iter": 60}).fit(X, y)
    assert "source_residuals" in paths and products._source_path is None
    np.testing.assert_allclose(cold.risk_path_, products.risk_path_, rtol=1e-10)


SOLVERS = {"ista": "ista", "fista": "fista", "fista_plain": FISTA(extrapolation="plain")}


@pytest.mark.parametrize("solver", list(SOLVERS))
@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("form", ["gram", "basis"])
def test_the_risk_at_a_few_iterates_is_the_whole_readouts(solver, fit_intercept, form):
    """``risk_at_iterates`` (triangular solves for the columns it reads) is
    ``risk_from_products``'s risk (the whole correction) at those iterates,
    and at every iterate with ``iterates=None``: exact memory matrices of a
    120 x 20 (the residuals' basis, 21 < 61 iterates) or 120 x 180 path."""
    p = 20 if form == "basis" else 180
    X, y, _ = _data(120, p, seed=3)
    est = TrajectoryLasso(0.02, solver=SOLVERS[solver], max_iter=60, n_probes=None,
                          risk_options={"chain_dtype": "float64"},
                          fit_intercept=fit_intercept).fit(X, y)
    prob = est._problem(X, y)
    design, iteration, path = prob.design, prob.iteration, est.coef_path_
    A, Av = risk_module.memory_matrix(design, iteration, path, n_probes=None,
                                      chain_dtype=np.float64)
    y_tilde = est._fit_target(design, y)[1]
    clipped = solver == "fista"
    momentum = solver != "ista"
    if form == "basis":
        prods = residual_products(design, y_tilde, path,
                                  source_points(iteration, path) if clipped else None)
    else:
        F = residual_matrix(design, y_tilde, path)
        prods = Bunch(FF=F.T @ F)
        if clipped:
            Fv = source_residuals(design, iteration, F, path)
            prods.update(FFv=F.T @ Fv, FvFv=Fv.T @ Fv)
    args = (prods, A, design.n_eff, fit_intercept, Av if momentum else None, iteration)
    whole = risk_from_products(*args)[0]
    np.testing.assert_allclose(est.risk_path_, whole, rtol=1e-9)  # the estimator's readout
    S = np.array([1, 2, 17, 30, 59, 60])
    np.testing.assert_allclose(risk_at_iterates(*args, iterates=S), whole[S], rtol=1e-10)
    np.testing.assert_allclose(risk_at_iterates(*args), whole, rtol=1e-10)
    if form == "basis":  # FF, formed when first read (after the readouts): F^T F
        F = residual_matrix(design, y_tilde, path)
        FF = F.T @ F
        np.testing.assert_allclose(prods.FF, FF, rtol=1e-9, atol=1e-12 * np.abs(FF).max())


@pytest.mark.parametrize("solver", ["fista", "fista_plain"])
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_the_momentum_readout_is_the_dense_correction(solver, fit_intercept):
    """With extrapolation the readout never forms ``P`` or ``Q`` (two
    products with triangular matrices, of the basis or of ``F_v``): its risk
    matrix, ``M Gam`` (whose rows after the first are ``X~^T R``) and
    :func:`risk_from_memory`'s residuals equal the dense formula ``R = (F +
    F_v L^{-T} tril(A, -1)^T / n) / s`` with ``L = s I - tril(A_src, -1) /
    n`` inverted by NumPy, on exact memory matrices of a 120 x 20 FISTA path
    of 60 steps (the basis, 21 < 61 iterates; without it, 120 rows and 40:
    the two orders of the products)."""
    X, y, _ = _data(120, 20, seed=4)
    est = TrajectoryLasso(0.02, solver=SOLVERS[solver], max_iter=60, n_probes=None,
                          fit_intercept=fit_intercept).fit(X, y)
    prob = est._problem(X, y)
    design, iteration, path = prob.design, prob.iteration, est.coef_path_
    A, Av = risk_module.memory_matrix(design, iteration, path, n_probes=None,
                                      chain_dtype=np.float64)
    assert (np.tril(Av, -1) < 0).any()  # L^{-1} is not a Neumann series of a nonnegative A
    y_tilde = est._fit_target(design, y)[1]
    clipped = solver == "fista"
    F = residual_matrix(design, y_tilde, path)
    Fv = source_residuals(design, iteration, F, path)
    n, T1 = design.n_eff, path.shape[1]
    s = 1.0 - (1.0 if fit_intercept else 0.0) / n
    L = s * np.eye(T1) - np.tril(Av, -1) / n
    R = (F + Fv @ np.linalg.inv(L).T @ np.tril(A, -1).T / n) / s
    G = R.T @ R / n
    prods = residual_products(design, y_tilde, path,
                              source_points(iteration, path) if clipped else None)
    risk, G_basis, P, Q, K, l1 = risk_from_products(prods, A, n, fit_intercept, Av, iteration)
    assert P is None and Q is None and K is None
    scale = np.abs(G).max()
    np.testing.assert_allclose(G_basis, G, rtol=1e-9, atol=1e-12 * scale)
    np.testing.assert_allclose(risk, np.diag(G), rtol=1e-9)
    np.testing.assert_allclose(l1, np.abs(np.linalg.inv(L)).sum(axis=1), rtol=1e-10)
    XR = _by_hand(X, None, fit_intercept).T @ R
    np.testing.assert_allclose(prods.MGam[1:], XR, rtol=1e-8, atol=1e-11 * np.abs(XR).max())
    np.testing.assert_allclose(prods.MGam[0], y_tilde @ R, rtol=1e-8,
                               atol=1e-11 * np.abs(y_tilde @ R).max())
    if clipped:  # the clipped gradient points' own residuals, without the basis
        risk_F, _, R_F = risk_from_memory(F, A, n, fit_intercept, Av, iteration,
                                          return_residuals=True, F_sources=Fv)[:3]
        np.testing.assert_allclose(R_F, R, rtol=1e-9, atol=1e-12 * np.abs(R).max())
        np.testing.assert_allclose(risk_F, np.diag(G), rtol=1e-9)
        # fewer rows than iterates (p > n): the products in the other order,
        # the same rows (R is F's and F_v's row by row)
        rows = slice(0, 40)
        R_rows = risk_from_memory(F[rows], A, n, fit_intercept, Av, iteration,
                                  return_residuals=True, F_sources=Fv[rows])[2]
        np.testing.assert_allclose(R_rows, R[rows], rtol=1e-9,
                                   atol=1e-12 * np.abs(R).max())


def test_noise_iterates_spread_evenly_from_the_first_to_the_last():
    """Every iterate ``t >= 1`` up to ``noise_iterates``; beyond, that many,
    increasing, from 1 to ``T``, with gaps that differ by at most one."""
    stats = get_statistics()
    K = stats.noise_iterates
    np.testing.assert_array_equal(probes.noise_iterates(K + 1, stats), np.arange(1, K + 1))
    np.testing.assert_array_equal(probes.noise_iterates(11, stats), np.arange(1, 11))
    for T in (K + 1, 150, 817, 5000):
        S = probes.noise_iterates(T + 1, stats)
        gaps = np.diff(S)
        assert S.size == K and S[0] == 1 and S[-1] == T
        assert gaps.min() >= 1 and gaps.max() - gaps.min() <= 1


def test_probe_noise_at_iterates_reads_the_risk_there():
    """``probe_noise(risk, replicates at S, S)`` is the rms over ``S`` only:
    the full replicates' noise restricted to ``S`` by hand, and with ``S``
    every iterate ``t >= 1`` the noise of the full replicates."""
    rng = np.random.default_rng(0)
    x = 1.0 + 0.1 * rng.standard_normal((16, 200))
    stats = get_statistics()
    replicates = [x[kept].mean(axis=0)
                  for kept in probes.jackknife_probes(16, stats.noise_groups)]
    r = x.mean(axis=0)
    S = probes.noise_iterates(200, stats)
    K = len(replicates)
    R = np.array(replicates)[:, S]
    var = (K - 1) / K * np.sum((R - R.mean(axis=0)) ** 2, axis=0)
    expected = np.sqrt(np.mean(var / r[S] ** 2))
    sub = probes.probe_noise(r, [rep[S] for rep in replicates], S)
    assert sub == pytest.approx(expected, rel=1e-12)
    every = np.arange(1, 200)
    assert probes.probe_noise(r, [rep[every] for rep in replicates], every) == pytest.approx(
        probes.probe_noise(r, replicates), rel=1e-12)


@pytest.mark.parametrize("solver,T", [("fista", 150), ("ista", 300)])
def test_the_jackknife_at_noise_iterates_agrees_with_every_iterate(solver, T,
                                                                  statistical_policy):
    """In the growth loop of the pooled probes (300 x 450, 16 probes, 2
    draws): the replicates at ``noise_iterates`` are the full replicates
    there (and the residuals' readout of the same matrices), and the probe
    noise over them is within 2 % of itself of the noise over every
    iterate (measured at most 0.5 % here; 10-25 % between draws)."""
    seen = []

    def check(design, iteration, coef_path, state, A, Av, readout, replicate_risk, **_):
        T1 = coef_path.shape[1]
        S = probes.noise_iterates(T1, design.statistics)
        template = (None if state.nodes is None else pooled.template_matrices(
            iteration, T1 - 1, state.nodes))
        risk = readout(A, Av)[0]
        sub, full = [], []
        for kept in probes.jackknife_probes(state.m, design.statistics.noise_groups):
            Ak, Avk = pooled.pooled_matrices(state, template, kept)
            sub.append(replicate_risk(Ak, Avk, S))
            full.append(replicate_risk(Ak, Avk))
            np.testing.assert_allclose(sub[-1], full[-1][S], rtol=1e-10)
            np.testing.assert_allclose(full[-1], readout(Ak, Avk)[0], rtol=1e-9)
        seen.append((probes.probe_noise(risk, sub, S), probes.probe_noise(risk, full)))

    stats = statistical_policy(pooled_start_probes=((0, 16),),
                               pooled_start_probes_no_momentum=((0, 16),))
    n, p = 300, 450
    X, y, _ = _data(n, p)
    for seed in range(2):
        with record() as paths:  # the grown chain and its readouts
            TrajectoryLasso(0.1 * np.sqrt(np.log(p) / n), solver=solver, max_iter=T,
                            random_state=seed).fit(X, y)
        for grown in paths.details("grow_pooled"):
            check(**grown)
    assert len(seen) == 2 and T + 1 > stats.noise_iterates
    for sub, full in seen:
        assert full > 0 and abs(sub / full - 1) <= 0.02


@pytest.mark.parametrize("start,n,p", [(8, 300, 450), (1, 300, 450), (4, 400, 100)])
def test_the_jackknife_without_extrapolation_is_its_replicates_first_order(
        start, n, p, statistical_policy):
    """Without extrapolation (ISTA) the growth loop of the pooled probes
    reads the jackknife's replicates to first order in their memory
    matrices (``risk_sensitivity`` of the estimate's ``A``, times the rows'
    sums by which the replicates' matrices differ, ``jackknife_sums``,
    through ``template_rows_times``): within 5 % of the exact replicates'
    own distance to the estimate (measured at most 1.4 % on
    ``bench_vs_cv.py``'s designs, here 0.4-0.9 %), with groups of probes
    (8 and 4 probes; the readout from ``F^T F`` and, on 400 x 100, from the
    residuals' basis) and of samples (one probe); the probe noise within 1
    % of the exact jackknife's, the choice noise (the largest over a few
    rivals) within 3 % (measured at most 0.2 % and 1.1 % there, 0.15 % and
    0.7 % here). The noise the fit reports is the first order's."""
    statistical_policy(pooled_start_probes_no_momentum=((0, start),),
                       pooled_noise_target=1.0)  # never grows
    X, y, _ = _data(n, p)
    with record() as paths:
        est = TrajectoryLasso(0.1 * np.sqrt(np.log(p) / n), solver="ista", max_iter=150,
                              random_state=0).fit(X, y)
    assert est.risk_diagnostics_.n_probes == start
    grown = paths.details("grow_pooled")
    assert len(grown) == 1
    g = grown[0]
    design, state, coef_path = g["design"], g["state"], g["coef_path"]
    stats, T1 = design.statistics, coef_path.shape[1]
    template = (None if state.nodes is None else pooled.template_matrices(
        g["iteration"], T1 - 1, state.nodes))
    risk = g["readout"](g["A"], g["Av"])[0]
    level = probes.noise_iterates(T1, stats)
    rivals = probes.choice_iterates(risk, stats)
    S = np.union1d(level, rivals)
    matrices, factor = pooled.jackknife_matrices(state, template, stats.noise_groups, False)
    exact = np.array([g["replicate_risk"](*AAv, S) for AAv in matrices])
    sums, lin_factor = pooled.jackknife_sums(state, stats.noise_groups)
    assert lin_factor == factor and sums.shape == exact.shape[:1] + (T1,)
    P, W = g["sensitivity"](g["A"], S)
    lin = risk[S] + 2.0 / design.n_eff ** 2 * (sums @ (P * pooled.template_rows_times(
        template, W)))
    assert np.abs(lin - exact).max() <= 0.05 * np.abs(exact - risk[S]).max()
    at_level, at_rivals = np.isin(S, level), np.isin(S, rivals)
    noise = factor * probes.probe_noise(risk, lin[:, at_level], level)
    assert noise == pytest.approx(
        factor * probes.probe_noise(risk, exact[:, at_level], level), rel=0.01)
    assert probes.choice_noise(risk, lin[:, at_rivals], rivals) == pytest.approx(
        probes.choice_noise(risk, exact[:, at_rivals], rivals), rel=0.03)
    assert est.risk_diagnostics_.probe_noise == pytest.approx(noise, rel=1e-6)
