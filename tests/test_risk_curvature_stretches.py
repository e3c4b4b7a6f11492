"""The robust risk estimate over stretches of one map (Tan & Bellec 2024's
traces while the inliers do not change).

While the Huber loss's inliers ``D_k`` and the prox mask do not change,
every Jacobian chain advances by one fixed linear map, so the rows of ``A``
and ``K`` of such a stretch come from that map's eigendecomposition instead
of one chain step per source. These tests pin that the two routes give the
same matrices (the same probes: equal up to rounding), that the stretches
are exactly the runs of an unchanged curvature and mask, and that a long
path is read against brute force (finite-difference Jacobians of a plain
numpy loop, ``test_risk_sgd``'s).
"""

import numpy as np
import pytest
from sklearn.base import clone
from test_risk_sgd import _batches, _tiny, intercept_design, reference_risk, reference_traces

from skacv import IterativeRidge, TrajectoryHuberRegressor, config_context
from skacv._policy import policy_context
from skacv._trace import record
from skacv.estimates.risk._curvature import constant_runs
from skacv.estimates.risk._estimate import trajectory_risk
from skacv.estimators._huber import robust_scale


def _problem(n, p, seed, outliers=0.1, ar1=False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    if ar1:  # AR(1) features, rho 0.9
        for j in range(1, p):
            X[:, j] = 0.9 * X[:, j - 1] + np.sqrt(1 - 0.81) * X[:, j]
    y = X[:, : min(5, p)].sum(axis=1) + 2.0 + 0.5 * rng.standard_normal(n)
    bad = rng.choice(n, int(outliers * n), replace=False)
    y[bad] += rng.choice([-1.0, 1.0], bad.size) * rng.uniform(5, 15, bad.size)
    return X, y, rng.uniform(0.5, 2.0, n)


def _curvature(est, X, y):
    """``D_t`` of every iterate (the Huber loss's inliers), from the path."""
    fitted = X @ est.coef_path_ + est.intercept_path_
    return (np.abs(y[:, None] - fitted) <= est.epsilon * est.scale_).astype(float)


def _risk(est, X, y, sample_weight, stretches):
    """``trajectory_risk`` of the fitted path, with or without the stretches."""
    with policy_context(curvature_stretches=stretches), record() as paths:
        prob = est._problem(X, y, sample_weight)
        res = trajectory_risk(prob.design, prob.target_rows, prob.iteration,
                              est._fit_coef_path(), datafit=prob.datafit,
                              n_probes=est.n_probes, random_state=0, chain_dtype="float64")
    return res, paths


CASES = {
    # (n, p, T, estimator parameters, weighted, design): AR(1) features make
    # inliers flip late, one at a time (several stretches with chain steps between)
    "l2_intercept": (120, 15, 80, dict(alpha=1.0), False, "iso"),
    "l2_weighted": (120, 15, 80, dict(alpha=1.0), True, "iso"),
    "l1_support_moves": (150, 30, 90, dict(alpha=20.0, penalty="l1"), True, "iso"),
    "wide_l2": (60, 90, 70, dict(alpha=2.0), False, "iso"),
    "no_intercept_probes": (300, 20, 60, dict(alpha=0.1, fit_intercept=False,
                                              n_probes=7), True, "iso"),
    "ar1_late_flips": (200, 30, 200, dict(alpha=0.1), True, "ar1"),
    "ar1_l1": (200, 30, 150, dict(alpha=3.0, penalty="l1"), False, "ar1"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_stretches_equal_the_chains(case):
    n, p, T, params, weighted, design = CASES[case]
    X, y, w = _problem(n, p, seed=len(case), ar1=design == "ar1")
    sw = w if weighted else None
    est = TrajectoryHuberRegressor(max_iter=T, estimate_risk=False, **params).fit(
        X, y, sample_weight=sw)
    chains, none = _risk(est, X, y, sw, False)
    fast, paths = _risk(est, X, y, sw, True)
    assert not none.details("curvature_stretch")
    stretches = [(d["start"], d["stop"]) for d in paths.details("curvature_stretch")]
    # stretches after a head of chain steps (its sources read out in the eigenbasis)
    assert stretches and stretches[0][0] >= 2 and stretches[-1][1] == T
    if design == "ar1":
        assert len(stretches) >= 3
    for name in ("memory_matrix", "memory_matrix_sources"):
        a, b = getattr(chains, name), getattr(fast, name)
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-11 * np.abs(a).max())
    np.testing.assert_allclose(fast.risk, chains.risk, rtol=1e-9)


def test_stretch_readout_in_blocks_equals_the_chains():
    """A stretch reads its earlier sources on the rows whose curvature differs
    from the stretch's in groups of rows alike and blocks of sources (the
    speed policy's ``curvature_block_entries``, ``curvature_row_group``):
    groups of 9 rows and blocks of 9 sources (3000 entries over 31
    directions and 10 probes, against up to 146 rows and 191 sources here)
    give the chains' matrices as one block does."""
    n, p, T, params, weighted, design = CASES["ar1_late_flips"]
    X, y, w = _problem(n, p, seed=len("ar1_late_flips"), ar1=True)
    est = TrajectoryHuberRegressor(max_iter=T, estimate_risk=False, **params).fit(
        X, y, sample_weight=w)
    chains, _ = _risk(est, X, y, w, False)
    with policy_context(curvature_block_entries=3000):
        fast, paths = _risk(est, X, y, w, True)
    assert len(paths.details("curvature_stretch")) >= 3
    for name in ("memory_matrix", "memory_matrix_sources"):
        a, b = getattr(chains, name), getattr(fast, name)
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-11 * np.abs(a).max())
    np.testing.assert_allclose(fast.risk, chains.risk, rtol=1e-9)


def test_runs_are_the_stretches_of_one_map():
    X, y, _ = _problem(150, 30, seed=3, ar1=True)
    est = TrajectoryHuberRegressor(max_iter=120, alpha=3.0, penalty="l1",
                                   estimate_risk=False).fit(X, y)
    iteration, path = est._problem(X, y).iteration, est._fit_coef_path()
    D = _curvature(est, X, y)
    support = est.coef_path_ != 0
    runs = constant_runs(iteration, path, D)
    assert len(runs) >= 3
    T = D.shape[1] - 1
    # step k reads the inliers at x^(k-1) and the support at x^k
    step = {k: (D[:, k - 1].tobytes(), support[:, k].tobytes()) for k in range(1, T + 1)}
    covered = set()
    for a, b in runs:
        assert a < b and not covered & set(range(a + 1, b + 1))
        covered |= set(range(a + 1, b + 1))
        assert len({step[k] for k in range(a + 1, b + 1)}) == 1
        # the chains after step a live on the stretch's support
        assert a == 0 or (support[:, a] == support[:, b]).all()
        assert b == T or step[b + 1] != step[b]  # maximal
    # a step outside every run takes the chains onto another support
    outside = set(range(1, T + 1)) - covered
    assert outside and 1 not in outside
    for k in outside:
        assert not (support[:, k - 1] == support[:, k]).all()


def test_long_path_equals_brute_force():
    """The stretches against finite-difference Jacobians (exact traces)."""
    X, y = _tiny(n=16, p=5, seed=2)
    T = 60
    est = TrajectoryHuberRegressor(epsilon=1.0, scale=1.0, alpha=0.5, max_iter=T,
                                   n_probes=None, random_state=0,
                                   risk_options={"chain_dtype": "float64"})
    with record() as paths:
        est.fit(X, y)
    stretches = [(d["start"], d["stop"]) for d in paths.details("curvature_stretch")]
    assert stretches and stretches[-1] [1] == T and stretches[-1][0] < T - 20
    X1 = intercept_design(X)[0]
    batches = _batches(est, X, y, T)
    y = y - est.intercept_path_[0]  # (the path starts at the Huber location of y)
    path, A, K, D = reference_traces(X1, y, est.step_size_, T, batches, delta=1.0, free=1,
                                     l2=est.alpha * est.scale_ / X.shape[0])
    assert 0 < D[:, 1:].sum() < D[:, 1:].size  # outliers
    scale = np.abs(A).max()
    np.testing.assert_allclose(est.memory_matrix_, A, atol=1e-5 * scale)
    np.testing.assert_allclose(est.risk_path_, reference_risk(X1, y, path, A, K, D, batches,
                                                              1.0), rtol=1e-6)


def test_warm_start_continues_over_stretches():
    """A warm path of 40 + 80 steps gives the cold path's estimate: the chains
    written back after a stretch that ends the first fit are its state."""
    X, y, _ = _problem(200, 30, seed=5, ar1=True)
    est = TrajectoryHuberRegressor(max_iter=120, alpha=0.1, n_probes=6, random_state=0)
    cold = clone(est).fit(X, y)
    warm = clone(est).set_params(max_iter=40, warm_start=True).fit(X, y)
    with record() as paths:
        warm.set_params(max_iter=120).fit(X, y)
    assert paths.details("curvature_stretch")
    np.testing.assert_allclose(warm.coef_path_, cold.coef_path_, rtol=1e-12)
    np.testing.assert_allclose(warm.risk_path_, cold.risk_path_, rtol=1e-6)


def test_memory_refusal_names_the_chains():
    """Above ``path_memory_limit`` the estimate is refused with the size of
    its smaller route; between the two routes' needs the stretches give way
    to the chain steps (which hold no float64 states)."""
    X, y, _ = _problem(60, 600, seed=6)  # the chains (p x 5 T) outweigh the T x T matrices
    est = TrajectoryHuberRegressor(max_iter=100, alpha=300.0, n_probes=5, random_state=0)
    fits = {}
    for limit in (1.5, 3.0, 20.0):
        for stretches in (False, True):
            with policy_context(curvature_stretches=stretches), \
                    config_context(path_memory_limit=limit), record() as paths:
                if limit == 1.5:  # below both: the chain steps' size, 2 x 601 x 500 float32
                    with pytest.raises(ValueError, match=r"chains \(601 x 500, 2 blocks\)"):
                        clone(est).fit(X, y)
                    continue
                fits[limit, stretches] = (clone(est).fit(X, y).risk_path_,
                                          len(paths.details("curvature_stretch")))
    assert fits[3.0, True][1] == 0 and fits[20.0, True][1] >= 1  # 3 MiB: chain steps
    for risk, _ in fits.values():
        np.testing.assert_allclose(risk, fits[20.0, False][0], rtol=1e-6)


# ----------------------------------------------------------------------------
# decayed sources (the window of live chains)
# ----------------------------------------------------------------------------

# float64 chains: the comparison sees the retirement, not the products' float32
# rounding (which differs with the number of columns on other BLAS kernels)
F64 = {"chain_dtype": "float64"}
WINDOW_CASES = {
    "ridge_sgd": lambda: IterativeRidge(solver="sgd", batch_size=20, n_probes=4,
                                        risk_options=F64),
    "huber_sgd": lambda: TrajectoryHuberRegressor(solver="sgd", batch_size=20, n_probes=4,
                                                  risk_options=F64),
    "huber_gd": lambda: TrajectoryHuberRegressor(n_probes=4, alpha=1.0, risk_options=F64),
}


def _window_fit(make, X, y, every, stretches=True):
    """The fit and its trace: (est, the first live source at each retirement, paths)."""
    est = make().set_params(max_iter=400, random_state=0)
    if isinstance(est, TrajectoryHuberRegressor):  # y's MAD: chains that decay within the path
        est.set_params(scale=robust_scale(y))
    with policy_context(settled_drop_check=every, curvature_stretches=stretches), \
            config_context(risk_matrix_limit=50), record() as paths:
        est = est.fit(X, y)
    return est, [d["first"] for d in paths.details("curvature_window")], paths


@pytest.mark.parametrize("case", sorted(WINDOW_CASES))
def test_retired_sources_change_nothing_but_rounding(case):
    """Sources whose chains decayed below ``negligible_state`` of the largest
    stop advancing; the traces are those of every chain advanced to the end."""
    X, y, _ = _problem(200, 20, seed=7)
    every_chain, none, _ = _window_fit(WINDOW_CASES[case], X, y, None, stretches=False)
    windowed, firsts, _ = _window_fit(WINDOW_CASES[case], X, y, 32, stretches=False)
    assert not none
    # sources retired, in order, well before the end
    assert firsts and firsts == sorted(firsts) and 100 <= firsts[-1] < 400
    a, b = every_chain.memory_matrix_, windowed.memory_matrix_
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-12 * np.abs(a).max())
    np.testing.assert_allclose(windowed.risk_path_, every_chain.risk_path_, rtol=1e-12)


def test_a_stretch_after_retired_sources(statistical_policy):
    """A stretch that starts with retired sources (their chains zero) reads
    the traces the chain steps read with the same sources retired. A coarse
    ``negligible_state`` retires sources 0-2 at step 15, the only look of
    both routes (``settled_drop_check=15``, 29 steps): the stretch 15-29
    starts there."""
    statistical_policy(negligible_state=1e-2)
    X, y, _ = _problem(150, 30, seed=22)

    def make():  # the l1 support moves until step 15 (at y's MAD): a chain step there
        return TrajectoryHuberRegressor(n_probes=4, alpha=8.0, penalty="l1",
                                        scale=robust_scale(y),
                                        risk_options={"chain_dtype": "float64"})

    runs = {}
    for stretches in (False, True):
        with policy_context(settled_drop_check=15, curvature_stretches=stretches), \
                record() as paths:
            est = make().set_params(max_iter=29, random_state=0).fit(X, y)
        runs[stretches] = (est, [(d["first"], d["step"]) for d in
                                 paths.details("curvature_window")],
                           [(d["start"], d["stop"]) for d in paths.details("curvature_stretch")])
    (plain, retired, _), (fast, retired_fast, stretches) = runs[False], runs[True]
    assert retired == retired_fast and retired[0][0] >= 1 and retired[0][1] == 15
    assert (15, 29) in stretches
    a = plain.memory_matrix_
    np.testing.assert_allclose(fast.memory_matrix_, a, rtol=0, atol=1e-12 * np.abs(a).max())
    np.testing.assert_allclose(fast.risk_path_, plain.risk_path_, rtol=1e-12)
