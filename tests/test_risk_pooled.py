"""The pooled probes (``probe_scheme="pooled"``, ``"auto"``'s,
:mod:`skacv.estimates.risk._pooled`).

* with identity probes the chain's readouts are the exact row sums of the
  memory matrices (against exact traces), and lag 0 is exact;
* the split's template is the memory matrix of the linear counterpart:
  it reproduces the exact matrices where the supports are full (closed
  form), is the spectral form for a linear iteration, and keeps the split's
  bias small where the rows are sharply peaked in the lag (the row's
  average does not);
* Hutchinson's probes are unbiased: the mean over 200 seeds is within 4
  standard errors of the exact row sums split by the template (what the
  estimate targets);
* ``risk_path_`` is close to the exact-trace one (ISTA and FISTA), within
  tolerances set from the measured spread over seeds;
* a warm start continues the chain; more probes are one chain of all of
  them; the jackknife measures the probes' noise and grows them.
"""

import dataclasses
import functools

import numpy as np
import pytest
from sklearn.base import clone
from test_reliability import _design

import skacv.estimates.risk._engine as engine
import skacv.estimates.risk._estimate as risk_module
import skacv.estimates.risk._pooled as pooled
import skacv.estimates.risk._probes as probes
from skacv import TrajectoryLasso
from skacv._statistics import get_statistics
from skacv._trace import Paths, record
from skacv.estimates.risk._propagate import design_columns
from skacv.estimates.risk._readout import source_residuals
from skacv.iterations._iterations import FISTA

SOLVERS = {
    "ista": lambda: "ista",
    "fista": lambda: "fista",
    "fista_plain": lambda: FISTA(extrapolation="plain"),
}


def _equicorrelated(n, p, seed=0, rho=0.5):
    """The design of ``benchmarks/bench_vs_cv.py`` (equicorrelated, ``n / 10``
    non-zero coefficients)."""
    rng = np.random.default_rng(seed)
    X = np.sqrt(1 - rho) * rng.standard_normal((n, p)) + np.sqrt(rho) * rng.standard_normal(
        (n, 1))
    beta = np.zeros(p)
    s = n // 10
    beta[:s] = rng.standard_normal(s) / np.sqrt(s) * 2.0
    return X, X @ beta + rng.standard_normal(n)


@functools.cache
def _exact_risk_path_300x450(solver):
    """The exact-trace ``risk_path_`` of :func:`_equicorrelated` at 300 x 450,
    lam = 0.1 sqrt(log p / n), 60 steps of ``solver``: the reference of
    several tests, computed once (3 s each), read-only."""
    n, p = 300, 450
    X, y = _equicorrelated(n, p)
    path = TrajectoryLasso(alpha=0.1 * np.sqrt(np.log(p) / n), solver=solver, max_iter=60,
                           n_probes=None).fit(X, y).risk_path_
    path.setflags(write=False)
    return path


def _exact(X, y, solver, T, alpha=0.05):
    est = TrajectoryLasso(alpha, solver=SOLVERS[solver](), max_iter=T, n_probes=None,
                          risk_options={"chain_dtype": "float64"}).fit(X, y)
    prob = est._problem(X, y)
    A, Av = risk_module.memory_matrix(prob.design, prob.iteration, est.coef_path_,
                                      n_probes=None, chain_dtype=np.float64)
    return est, prob, A, Av


def _template(design, iteration, path):
    """The template of the union of the path's supports, from its exact
    eigenvalues (supports of at most ``template_exact_support`` columns)."""
    support = np.flatnonzero(np.any(path != 0, axis=1))
    Xs = design_columns(design, support, np.float64)
    T = path.shape[1] - 1
    return pooled.template_matrices(iteration, T,
                                    pooled.template_nodes(design, Xs, None, iteration, T))


def _identity_sums(prob, coef_path):
    """Row sums with identity probes (``m = n``): summed over the probes,
    the exact traces."""
    n = prob.design.n_samples
    run = pooled.run_pooled_chain(prob.design, prob.iteration, coef_path, n, None, np.float64,
                                  draw=lambda n, m: np.eye(n))
    return run.SA.sum(axis=2), run.SV.sum(axis=2), run.lag0


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_identity_probes_give_the_exact_row_sums(solver):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 120))
    y = X[:, :8] @ np.ones(8) + rng.standard_normal(80)
    T = 30
    est, prob, A, Av = _exact(X, y, solver, T)
    sA, sV, lag0 = _identity_sums(prob, est.coef_path_)
    scale = np.abs(A).max()
    for t in range(2, T + 1):  # the sources older than lag 0
        assert abs(sA[t, 0] - A[t, :t - 1].sum()) <= 1e-10 * scale, t
        assert abs(sV[t, 0] - Av[t, :t - 1].sum()) <= 1e-10 * scale, t
    k = np.arange(1, T + 1)
    np.testing.assert_allclose(lag0[1:, 0], A[k, k - 1], rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(lag0[1:, 1], Av[k, k - 1], rtol=1e-12, atol=1e-12 * scale)
    # the rows without a template: the row's average, lag 0 exact
    Ab, Avb = pooled.rows_from_sums(sA, sV, lag0)
    for t in (5, 17, T):
        np.testing.assert_allclose(Ab[t, :t - 1], A[t, :t - 1].mean(), atol=1e-10 * scale)
        np.testing.assert_allclose(Avb[t, :t - 1], Av[t, :t - 1].mean(), atol=1e-10 * scale)
        assert Ab[t, t - 1] == lag0[t, 0] and not Ab[t, t:].any()


def test_the_split_keeps_every_row_sum():
    """Each row's entries older than lag 0 sum to the row's sum, rows the
    template leaves empty (their sum spread evenly) included; lag 0 is
    written as given."""
    rng = np.random.default_rng(3)
    for T1 in (2, 3, 40, 301):
        template = [np.tril(rng.standard_normal((T1, T1)), -1) for _ in range(2)]
        template[0][min(5, T1 - 1)] = 0.0
        template[1][T1 // 2, : max(T1 // 2 - 1, 0)] = 0.0
        sums = rng.standard_normal((T1, 1)), rng.standard_normal((T1, 1))
        lag0 = rng.standard_normal((T1, 2))
        split = pooled.rows_from_sums(*sums, lag0, template)
        for i, (M, S) in enumerate(zip(split, sums, strict=True)):
            older = np.tril(M, -2).sum(axis=1)
            np.testing.assert_allclose(older[2:], S[2:, 0], rtol=1e-10, atol=1e-12)
            k = np.arange(1, T1)
            np.testing.assert_array_equal(M[k, k - 1], lag0[1:, i])
            assert not np.triu(M).any()
        # the split formed once, in place on the (strictly lower) template, for
        # every readout of the path: the same operations, the same matrices
        once = pooled.split_template([M.copy() for M in template], own=True)
        for M, N in zip(split, pooled.rows_from_sums(*sums, lag0, once), strict=True):
            np.testing.assert_array_equal(M, N)
        A, none = pooled.rows_from_sums(*sums, lag0, once, sources=False)
        np.testing.assert_array_equal(A, split[0])
        assert none is None


@pytest.mark.parametrize("solver", ["ista", "fista_plain"])
def test_the_template_is_exact_on_full_supports(solver):
    """With a penalty so small that every coefficient is non-zero from the
    first step on, the prox Jacobians are the identity: the memory matrices
    are the linear counterpart's (the template), so the exact row sums
    split by the template give back the exact matrices, entry by entry."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((90, 30))
    y = X @ rng.standard_normal(30) + rng.standard_normal(90)
    T = 25
    est, prob, A, Av = _exact(X, y, solver, T, alpha=1e-9)
    assert np.all(est.coef_path_[:, 1:] != 0)
    template = _template(prob.design, prob.iteration, est.coef_path_)
    sums = _identity_sums(prob, est.coef_path_)
    Ab, Avb = pooled.rows_from_sums(*sums, template)
    scale = np.abs(A).max()
    np.testing.assert_allclose(Ab, A, atol=1e-9 * scale)
    np.testing.assert_allclose(Avb, Av, atol=1e-9 * scale)
    np.testing.assert_allclose(template[0][:, :T], A[:, :T], atol=1e-9 * scale)
    # and the row's average is not exact here (the rows decay with the lag)
    Au, _ = pooled.rows_from_sums(*sums)
    assert np.abs(Au - A).max() > 1e-3 * scale


def test_the_template_of_a_linear_iteration_is_its_spectral_form():
    from skacv.estimates.risk._spectral import counterpart_memory_matrix, spectral_memory_matrix
    from skacv.iterations._iterations import GradientDescent, Nesterov

    lam = np.random.default_rng(0).uniform(0.1, 2.0, 40)
    for it in (GradientDescent(0.4), Nesterov(0.4)):
        np.testing.assert_allclose(counterpart_memory_matrix(it, lam, 30),
                                   spectral_memory_matrix(it, lam, 30, return_sources=True),
                                   rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("solver", ["ista", "fista"])
def test_the_template_keeps_a_peaked_row_where_the_average_does_not(solver):
    """Isotropic 120 x 180, alpha = 0.05, 40 steps: the rows are sharply
    peaked in the lag (short memory). With the exact row sums the
    template's split moves ``risk_path_`` from the exact traces' by far
    less than the row's average."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 180))
    beta = np.zeros(180)
    beta[:12] = rng.standard_normal(12) / np.sqrt(12) * 2.0
    y = X @ beta + rng.standard_normal(120)
    T = 40
    est, prob, A, Av = _exact(X, y, solver, T)
    design, iteration, path = prob.design, prob.iteration, est.coef_path_
    F = risk_module.residual_matrix(design, est._fit_target(design, y)[1], path)
    Fv = source_residuals(design, iteration, F, path) if solver == "fista" else None

    def risk(A_, Av_):
        return risk_module.risk_from_memory(F, A_, design.n_eff, design.fit_intercept,
                                            A_sources=Av_ if solver == "fista" else None,
                                            iteration=iteration, F_sources=Fv)[0]

    exact = risk(A, Av)
    np.testing.assert_allclose(exact, est.risk_path_, rtol=1e-8)  # the estimator's readout
    sums = _identity_sums(prob, path)
    template = _template(design, iteration, path)

    def rms(template):
        r = risk(*pooled.rows_from_sums(*sums, template))
        return np.sqrt(np.mean((r[1:] / exact[1:] - 1) ** 2))

    with_template, average = rms(template), rms(None)
    assert average >= 5 * with_template, (with_template, average)


@pytest.mark.parametrize("solver", ["ista", "fista"])
def test_probes_are_unbiased_for_the_split_exact_row_sums(solver):
    """The mean of 200 draws (2 probes) is within 4 standard errors of the
    exact row sums split by the same template, every entry (the split is
    linear in the row sums); the exact lag-0 entries carry only rounding."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 90))
    y = X[:, :6] @ np.ones(6) + rng.standard_normal(60)
    T = 30
    est, prob, A, Av = _exact(X, y, solver, T)
    template = _template(prob.design, prob.iteration, est.coef_path_)
    target = np.stack(pooled.rows_from_sums(*_identity_sums(prob, est.coef_path_), template))

    def draw(seed):
        run = pooled.run_pooled_chain(prob.design, prob.iteration, est.coef_path_, 2,
                                      np.random.RandomState(seed), np.float64, by_samples=False)
        return np.stack(pooled.rows_from_sums(run.SA.mean(axis=2), run.SV.mean(axis=2),
                                              run.lag0, template))

    draws = np.array([draw(seed) for seed in range(200)])
    mean = draws.mean(axis=0)
    se = draws.std(axis=0, ddof=1) / np.sqrt(len(draws))
    assert np.all(np.abs(mean - target) <= 4 * se + 1e-10 * np.abs(target).max())
    # not trivially: the probes do fluctuate (the rows' sums carry the noise)
    older = np.broadcast_to(np.tril(np.ones((T + 1, T + 1), dtype=bool), -2), se.shape)
    assert np.max(se[older]) > 1e-3 * np.abs(target).max()


def test_a_removed_scheme_is_refused():
    X, y = _equicorrelated(60, 90, seed=2)
    est = TrajectoryLasso(0.05, max_iter=10, n_probes=4, random_state=0).fit(X, y)
    prob, path = est._problem(X, y), est.coef_path_
    plan = engine.plan_estimate(prob.design, prob.iteration, path, 4, "pooled")
    assert plan.form == "pooled" and plan.n_probes == 4
    for scheme in ("grouped", "per_group"):
        with pytest.raises(ValueError, match="probe_scheme must be"):
            engine.plan_estimate(prob.design, prob.iteration, path, 4, scheme)
        with pytest.raises(ValueError, match="'probe_scheme' parameter"):
            clone(est).set_params(risk_options={"probe_scheme": scheme}).fit(X, y)


@pytest.mark.parametrize("exact_support", [300, 10])
def test_pooled_probes_give_the_exact_row_sums_and_continue_a_warm_start(
        statistical_policy, exact_support):
    """The pooled probes (``"auto"``'s): with identity
    probes the one chain reads every row's exact sum over the sources older
    than lag 0; a warm start continues the chain from the shorter path's last
    step (the steps run: 25, then 26..60) and gives the cold fit's numbers,
    also with the template's Lanczos nodes (``template_exact_support=10``:
    its probes follow the features, not the chains' row order, which
    changes with the path)."""
    statistical_policy(template_exact_support=exact_support)
    rng = np.random.default_rng(3)
    X = rng.standard_normal((70, 100))
    y = X[:, :6] @ np.ones(6) + rng.standard_normal(70)
    T = 30
    est, prob, A, Av = _exact(X, y, "fista", T)
    run = pooled.run_pooled_chain(prob.design, prob.iteration, est.coef_path_, 70, None,
                                  np.float64, draw=lambda n, m: np.eye(n))
    SA, SV = run.SA, run.SV
    assert SA.shape[1] == 1
    older = np.tril(np.ones((T + 1, T + 1), dtype=bool), -2)
    scale = np.abs(A).max()
    np.testing.assert_allclose(SA.sum(axis=2)[:, 0], np.where(older, A, 0).sum(axis=1),
                               atol=1e-10 * scale)
    np.testing.assert_allclose(SV.sum(axis=2)[:, 0], np.where(older, Av, 0).sum(axis=1),
                               atol=1e-10 * scale)
    X, y = _equicorrelated(80, 120, seed=4)
    kw = dict(random_state=1, risk_options={"chain_dtype": "float64"}, n_probes=6)
    cold = TrajectoryLasso(0.02, max_iter=60, **kw).fit(X, y)
    with record() as paths:
        warm = TrajectoryLasso(0.02, max_iter=25, warm_start=True, **kw).fit(X, y)
        warm.set_params(max_iter=60).fit(X, y)
    assert [(d["k0"], d["k_end"]) for d in paths.details("forward_chains")] == [(0, 25), (25, 60)]
    np.testing.assert_allclose(warm.risk_path_, cold.risk_path_, rtol=1e-10)
    np.testing.assert_allclose(warm.memory_matrix_, cold.memory_matrix_, rtol=1e-10,
                               atol=1e-12 * np.abs(cold.memory_matrix_).max())


@pytest.mark.parametrize("solver, tol", [("ista", 0.01), ("fista", 0.03)])
def test_pooled_risk_path_is_close_to_exact_traces(solver, tol):
    """``bench_vs_cv``'s equicorrelated design at 300 x 450, lam = 0.1
    sqrt(log p / n), 60 steps, the default probes (32 in one chain): the
    rms relative error of ``risk_path_`` against exact traces, over the
    seeds 0-11, measured 0.17 % median, 0.62 % max (ISTA) and 0.59 %
    median, 2.3 % max (FISTA); asserted for seed 0 (0.27 % and 0.72 %)
    with the largest seen as the bound."""
    n, p, T = 300, 450, 60
    X, y = _equicorrelated(n, p)
    kw = dict(alpha=0.1 * np.sqrt(np.log(p) / n), solver=solver, max_iter=T)
    exact = _exact_risk_path_300x450(solver)
    est = TrajectoryLasso(random_state=0, **kw).fit(X, y)
    err = (est.risk_path_ - exact) / exact
    assert np.sqrt(np.mean(err ** 2)) <= tol


def _pooled_state(dtype):
    """A fitted path's design, iteration and path, and the state of a pooled
    chain of 4 probes on it (kept, to be extended)."""
    X, y = _equicorrelated(80, 120, seed=5)
    est = TrajectoryLasso(0.02, max_iter=40, estimate_risk=False).fit(X, y)
    prob = est._problem(X, y)
    design, iteration, path = prob.design, prob.iteration, est.coef_path_
    _, _, state = pooled.pooled_memory_matrix(design, iteration, path, 4,
                                              np.random.RandomState(0), dtype,
                                              keep_state=True)
    return design, iteration, path, state


def test_more_pooled_probes_are_one_chain_of_all_of_them():
    """``extend_pooled`` appends a chain of new probes to a pooled state:
    its rows' sums and its saved chains (what a warm start continues) are
    those of one chain run with all the probes from the start (the same
    signs, given by ``draw``)."""
    design, iteration, path, state = _pooled_state(np.float64)
    more = pooled.extend_pooled(design, iteration, path, state, 6)
    assert more.m == 10 and more.Z.shape == (80, 10)
    np.testing.assert_array_equal(more.Z[:, :4], state.Z)
    assert not np.array_equal(more.Z[:, 4:8], state.Z)  # new signs
    one = pooled.run_pooled_chain(design, iteration, path, 10, None, np.float64,
                                  draw=lambda n, m: more.Z, keep_state=True).state
    scale = np.abs(one.SA).max()
    np.testing.assert_allclose(more.SA, one.SA, atol=1e-12 * scale)
    np.testing.assert_allclose(more.SV, one.SV, atol=1e-12 * scale)
    np.testing.assert_array_equal(more.lag0, one.lag0)
    for name in ("dv", "dx1"):
        (c1, v1), (c2, v2) = more.chains.get(name), one.chains.get(name)
        np.testing.assert_array_equal(c1, c2)
        np.testing.assert_allclose(v1, v2, atol=1e-12 * np.abs(v2).max())


def test_more_probes_on_a_continued_chain_are_one_chain_of_all_of_them():
    """``extend_pooled`` on the state of a chain continued by a warm start,
    whose saved rows follow the columns it kept (not the order a new chain
    takes: other coordinates): the merged chains, on the union of the
    coordinates, are those of one chain of all the probes, and so are the
    rows' sums."""
    X, y = _equicorrelated(80, 120, seed=0)
    kw = dict(random_state=1, risk_options={"chain_dtype": "float64"}, n_probes=4,
              solver="ista", warm_start=True)
    est = TrajectoryLasso(0.025, max_iter=20, **kw).fit(X, y)
    est.set_params(max_iter=40).fit(X, y)
    prob, path, state = est._problem(X, y), est.coef_path_, est._risk_state
    one_new = pooled.run_pooled_chain(prob.design, prob.iteration, path, 2, None, np.float64,
                                      draw=lambda n, m: np.ones((n, m)), keep_state=True)
    assert not np.array_equal(state.chains.dv[0], one_new.state.chains.dv[0])
    more = pooled.extend_pooled(prob.design, prob.iteration, path, state, 2)
    assert more.m == 6
    one = pooled.run_pooled_chain(prob.design, prob.iteration, path, 6, None, np.float64,
                                  draw=lambda n, m: more.Z, keep_state=True).state
    scale = np.abs(one.SA).max()
    np.testing.assert_allclose(more.SA, one.SA, atol=1e-12 * scale)
    np.testing.assert_allclose(more.SV, one.SV, atol=1e-12 * scale)
    for name in ("dv", "dx1"):
        (c1, v1), (c2, v2) = more.chains.get(name), one.chains.get(name)
        full1, full2 = np.zeros((120, 6)), np.zeros((120, 6))
        full1[c1], full2[c2] = v1, v2
        np.testing.assert_allclose(full1, full2, atol=1e-12 * np.abs(v2).max())


def test_more_pooled_probes_reuse_the_state_columns():
    """``extend_pooled`` runs its new probes' chain on the state's restricted
    copy of ``X~`` (the same columns in the same order) instead of gathering
    it again: the same state, bit for bit, as with a new gather."""
    design, iteration, path, state = _pooled_state(np.float32)
    assert state.columns is not None
    out = []
    for columns in (state.columns, None):
        with record() as paths:
            out.append(pooled.extend_pooled(design, iteration, path,
                                            dataclasses.replace(state, columns=columns), 3))
        assert paths.count("chain_columns_reused") == (columns is not None)
        assert paths.count("design_columns") == (columns is None)
    for name in ("Z", "SA", "SV", "lag0"):
        np.testing.assert_array_equal(getattr(out[0], name), getattr(out[1], name))
    for name in ("dv", "dx1"):
        for a, b in zip(out[0].chains.get(name), out[1].chains.get(name), strict=True):
            np.testing.assert_array_equal(a, b)

def _one_probe_run(prob, path, z, state=None):
    return pooled.run_pooled_chain(prob.design, prob.iteration, path, 1,
                                   np.random.RandomState(0), np.float64,
                                   draw=lambda n, m: z[:, None], state=state, keep_state=True)


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_one_probe_reads_its_traces_by_groups_of_samples(solver):
    """A pooled chain of one probe ``z`` also reads its traces by groups of
    samples (``by_samples``: ``z_g^T B z`` for the row sums ``z^T B z``).
    Brute force by polarisation: with ``z'`` (``z``'s signs flipped outside
    group ``g``), ``z_g^T B z + z_g^T B z' = 2 z_g^T B z_g``, the readout of a
    chain of the probe ``z_g`` alone (zero outside ``g``), for every group
    and both memory matrices; the groups sum to the probe's readout; a
    continued chain (a warm start's state) continues them; ``extend_pooled``
    gives a chain of all the probes without them."""
    X, y = _equicorrelated(80, 120, seed=5)
    est = TrajectoryLasso(0.02, solver=SOLVERS[solver](), max_iter=40,
                          estimate_risk=False).fit(X, y)
    prob, path = est._problem(X, y), est.coef_path_
    z = np.random.default_rng(3).choice([-1.0, 1.0], size=80)
    run = _one_probe_run(prob, path, z)
    by_A, by_V = run.by_samples
    H = get_statistics().noise_groups
    assert by_A.shape == (41, H)
    scale = np.abs(run.SA).max()
    np.testing.assert_allclose(by_A.sum(axis=1), run.SA[:, 0, 0], atol=1e-12 * scale)
    np.testing.assert_allclose(by_V.sum(axis=1), run.SV[:, 0, 0], atol=1e-12 * scale)
    groups = probes.sample_groups(80, H)
    for g in range(H):
        inside = groups == g
        flipped = _one_probe_run(prob, path, np.where(inside, z, -z)).by_samples
        alone = _one_probe_run(prob, path, np.where(inside, z, 0.0))
        np.testing.assert_allclose(by_A[:, g] + flipped[0][:, g], 2 * alone.SA[:, 0, 0],
                                   atol=1e-10 * scale)
        np.testing.assert_allclose(by_V[:, g] + flipped[1][:, g], 2 * alone.SV[:, 0, 0],
                                   atol=1e-10 * scale)
        assert np.all(np.delete(alone.by_samples[0], g, axis=1) == 0)
    head = _one_probe_run(prob, path[:, :26], z).state
    warm = _one_probe_run(prob, path, z, state=head)
    assert warm.continued is head
    np.testing.assert_allclose(warm.by_samples[0], by_A, atol=1e-12 * scale)
    np.testing.assert_allclose(warm.by_samples[1], by_V, atol=1e-12 * scale)
    more = pooled.extend_pooled(prob.design, prob.iteration, path, run.state, 3)
    assert more.m == 4 and more.by_samples is None and more.images[1].shape[1] == 4
    four = pooled.run_pooled_chain(prob.design, prob.iteration, path, 4, None, np.float64,
                                   draw=lambda n, m: more.Z)
    np.testing.assert_allclose(more.SA, four.SA, atol=1e-12 * scale)
    np.testing.assert_allclose(more.SV, four.SV, atol=1e-12 * scale)


def test_a_continued_pooled_chain_computes_only_its_new_columns_images():
    """``_pooled_images`` reads the probes' images and column norms of the
    columns a continued state has and computes the others: equal to
    computing all of them, and the known columns are not read (NaN there in
    the design changes nothing). A warm start's state keeps them for every
    column, as a cold fit's, and ``extend_pooled`` appends the new probes'."""
    rng = np.random.default_rng(7)
    Xs = rng.standard_normal((50, 9))
    Z = rng.choice([-1, 1], size=(50, 3)).astype(np.int8)
    coords = np.array([12, 3, 40, 7, 5, 22, 0, 31, 9])
    W, colnorm, images = pooled._pooled_images(Xs, coords, Z)
    np.testing.assert_allclose(W, Xs.T @ Z, rtol=1e-12)
    np.testing.assert_allclose(colnorm, (Xs ** 2).sum(axis=0), rtol=1e-12)
    assert np.array_equal(images[0], np.sort(coords))
    # a later stage: new columns 18 and 2, column 40 gone, another order
    later = np.array([7, 18, 0, 3, 31, 2, 12, 22, 5, 9])
    Xl = rng.standard_normal((50, 10))
    Xl[:, np.isin(later, coords)] = Xs[:, [list(coords).index(c) for c in later
                                           if c in coords]]
    full, full_norm, _ = pooled._pooled_images(Xl, later, Z)
    hidden = Xl.copy()
    hidden[:, np.isin(later, coords)] = np.nan
    part, part_norm, kept = pooled._pooled_images(hidden, later, Z, images)
    np.testing.assert_allclose(part, full, rtol=1e-12)
    np.testing.assert_allclose(part_norm, full_norm, rtol=1e-12)
    assert np.array_equal(kept[0], np.sort(later))
    X, y = _equicorrelated(80, 120, seed=5)
    kw = dict(random_state=1, risk_options={"chain_dtype": "float64"}, n_probes=4)
    cold = TrajectoryLasso(0.02, max_iter=60, warm_start=True, **kw).fit(X, y)  # keeps its state
    warm = TrajectoryLasso(0.02, max_iter=25, warm_start=True, **kw).fit(X, y)
    warm.set_params(max_iter=60).fit(X, y)
    a, b = cold._risk_state.images, warm._risk_state.images
    assert np.array_equal(a[0], b[0])
    np.testing.assert_allclose(b[1], a[1], rtol=1e-10)
    prob = cold._problem(X, y)
    more = pooled.extend_pooled(prob.design, prob.iteration, cold.coef_path_,
                                 cold._risk_state, 2)
    assert more.images[1].shape == (a[0].size, 6)
    np.testing.assert_array_equal(more.images[1][:, :4], a[1])
    prefix = pooled._pooled_images(np.asarray(prob.design.columns(a[0])), a[0], more.Z)[2]
    np.testing.assert_allclose(more.images[1], prefix[1], rtol=1e-10)


@pytest.mark.parametrize("m", [8, 32])
def test_probe_noise_is_the_jackknife_of_the_probes(m):
    """For a statistic linear in the probes (their mean), the
    delete-one-group jackknife of ``probe_noise`` is the standard error of
    the mean of the groups' means (closed form): ``m = 8`` groups of one
    probe, ``m = 32`` groups of four."""
    rng = np.random.default_rng(0)
    x = 1.0 + 0.1 * rng.standard_normal((m, 20))
    groups = get_statistics().noise_groups
    replicates = [x[kept].mean(axis=0) for kept in probes.jackknife_probes(m, groups)]
    K = len(replicates)
    assert K == min(m, groups)
    means = x.reshape(K, m // K, 20).mean(axis=1)
    se = means.std(axis=0, ddof=1) / np.sqrt(K)
    r = x.mean(axis=0)
    expected = np.sqrt(np.mean((se[1:] / r[1:]) ** 2))
    assert probes.probe_noise(r, replicates) == pytest.approx(expected, rel=1e-12)
    assert probes.probe_noise(r, replicates[:1]) == 0.0  # one replicate: no spread


@pytest.mark.parametrize("start", [1, 2, 4, 8])
def test_the_pooled_probes_grow_while_the_jackknife_finds_them_noisy(statistical_policy, start):
    """``n_probes="auto"`` with the pooled probes: the chain starts with
    ``pooled_start_probes`` (here ``start`` on 300 samples:
    ``pooled_start_probes`` set so) and grows while the jackknife's probe
    noise is above the target. Equicorrelated 300 x 450, FISTA, 60 steps,
    12 probe draws:

    * never growing (target 1): the estimate is the explicit ``start``-probe
      one (the same probes), and the jackknife's noise follows the spread of
      the draws (measured, 8 probes: mean 2.03 % against a spread of 1.51 %,
      the single draws 1.31-2.91 %; 4 probes, one a group of the jackknife
      and the chain's products by matrix-vector products: mean 3.01 %
      against 3.17 %, the single draws 1.32-5.86 %; 2 probes, two groups:
      mean 3.96 % against 3.10 %, the single draws 1.18-7.48 %; 1 probe,
      the jackknife over its groups of samples times
      ``SAMPLE_GROUPS_NOISE_FACTOR``: mean 6.69 % against 5.71 %, the single draws
      4.14-9.35 %): asserted within a factor of 2 either way;
    * always growing (target ~0): 32 probes, and the rms error against
      exact traces falls (measured: mean 0.82 % against 1.27 % with 8
      probes, smaller in 9 of 12 draws; 2.77 % with 4, 2.57 % with 2):
      asserted at most 0.8 times."""
    statistical_policy(pooled_start_probes=((0, start),),
                       pooled_start_probes_no_momentum=((0, start),))
    n, p, T = 300, 450, 60
    X, y = _equicorrelated(n, p)
    kw = dict(alpha=0.1 * np.sqrt(np.log(p) / n), max_iter=T)
    exact = _exact_risk_path_300x450("fista")[1:]  # FISTA: the estimator's default

    def error(path):
        return np.sqrt(np.mean(((path[1:] - exact) / exact) ** 2))

    statistical_policy(pooled_noise_target=1.0)
    few = [TrajectoryLasso(random_state=s, **kw).fit(X, y) for s in range(12)]
    assert all(e.risk_diagnostics_.n_probes == start for e in few)
    same = TrajectoryLasso(random_state=0, n_probes=start,
                           risk_options={"probe_scheme": "pooled"}, **kw).fit(X, y)
    np.testing.assert_array_equal(few[0].risk_path_, same.risk_path_)
    assert same.risk_diagnostics_.probe_noise is None  # measured with "auto" only
    P = np.array([e.risk_path_[1:] for e in few])
    spread = np.sqrt(np.mean((P.std(axis=0, ddof=1) / P.mean(axis=0)) ** 2))
    jackknife = np.mean([e.risk_diagnostics_.probe_noise for e in few])
    assert spread / 2 <= jackknife <= 2 * spread
    most = statistical_policy(pooled_noise_target=1e-9).pooled_probes
    grown = [TrajectoryLasso(random_state=s, **kw).fit(X, y) for s in range(12)]
    assert all(e.risk_diagnostics_.n_probes == most for e in grown)
    assert all(e.risk_diagnostics_.probe_noise is None for e in grown)  # at the cap
    assert np.mean([error(e.risk_path_) for e in grown]) <= 0.8 * np.mean(
        [error(e.risk_path_) for e in few])


@pytest.mark.parametrize("solver", ["ista", "fista", "fista_plain"])
def test_the_jackknife_replicates_read_the_risk_from_inner_products(solver,
                                                                   statistical_policy):
    """The jackknife's replicates take the risk from the residuals' inner
    products (``risk_at_iterates`` with ``F^T F``, and ``F^T F_v``,
    ``F_v^T F_v`` for a clipped extrapolation): the same numbers as the
    residuals' readout (``risk_from_memory``) for the same memory matrices,
    at every iterate and at a few."""
    seen = []
    statistical_policy(pooled_start_probes=((0, 16),), pooled_start_probes_no_momentum=((0, 16),))
    X, y = _equicorrelated(120, 180, seed=6)
    with record() as paths:  # the grown chain's matrices and readouts
        TrajectoryLasso(0.02, solver=SOLVERS[solver](), max_iter=40, random_state=0).fit(X, y)
    for grown in paths.details("grow_pooled"):
        A, Av, readout, replicate_risk = (grown[k] for k in ("A", "Av", "readout",
                                                             "replicate_risk"))
        seen.append((readout(A, Av)[0], replicate_risk(A, Av)))
        few = np.array([1, 7, 23, 40])
        np.testing.assert_allclose(replicate_risk(A, Av, few), seen[-1][0][few], rtol=1e-9)
    (full, replicate), = seen
    np.testing.assert_allclose(replicate, full, rtol=1e-9)


def test_the_pooled_chain_starts_with_fewer_probes_on_more_samples():
    """``pooled_start_probes`` never asks for more probes on more samples
    (the probe noise falls with the samples), starts below the smallest
    sample count with all of them, and ``probes_for_noise`` grows a chain
    by multiples of its probes, at least doubling, never past the cap."""
    counts = [10, 500, 999, 1000, 1999, 2000, 3999, 4000, 7999, 8000, 10**6]
    seen = set()
    stats = get_statistics()
    most = stats.pooled_probes
    for momentum in (True, False):
        starts = [probes.pooled_start_probes(n, stats, momentum) for n in counts]
        assert starts[0] == most
        assert all(a >= b for a, b in zip(starts[:-1], starts[1:], strict=True))
        assert starts[-1] < starts[0]
        seen.update(starts)
    # no momentum (shorter memory, less noise): never more probes
    assert all(probes.pooled_start_probes(n, stats, False)
               <= probes.pooled_start_probes(n, stats, True) for n in counts)
    target = stats.pooled_noise_target
    for m in sorted(seen):
        assert probes.probes_for_noise(m, target, stats) == m
        for noise in (1.01 * target, 1.5 * target, 3 * target, 100 * target):
            grown = probes.probes_for_noise(m, noise, stats)
            assert grown == most or (grown % m == 0 and grown >= 2 * m)
            assert m <= grown <= most
            if m < most:
                assert grown >= min(most, m * (noise / target) ** 2)


def test_the_counterpart_response_is_the_first_source_of_its_memory_matrix():
    """``counterpart_response``: the first columns of the counterpart's
    ``A`` and ``A_sources`` (FISTA's momentum schedule: not Toeplitz)."""
    from skacv.estimates.risk._spectral import counterpart_memory_matrix, counterpart_response

    X, y = _equicorrelated(120, 180)
    est = TrajectoryLasso(0.05, max_iter=30, estimate_risk=False).fit(X, y)
    iteration = est._problem(X, y).iteration
    lam = np.linspace(0.01, 3.0, 9)
    w = np.linspace(1.0, 2.0, 9)
    A, Av = counterpart_memory_matrix(iteration, lam, 30, weights=w)
    np.testing.assert_allclose(counterpart_response(iteration, lam, 30, w),
                               np.r_[A[:, 0], Av[:, 0]], rtol=1e-12, atol=1e-15)


def test_the_template_quadrature_runs_until_the_response_converges(statistical_policy):
    """On a spectrum that reaches far down (AR(1) features with rho = 0.95,
    300 x 450, 30 non-zero coefficients, FISTA, alpha = 0.001, 150 steps, the
    union of the supports all 450 features) the template's Lanczos
    quadrature runs past 20 steps until the counterpart's response
    converges. Against the template on the exact eigenvalues of the union's
    Gram matrix (what the quadrature approximates), measured on two designs:
    0.50 and 0.61 % rms for the converged quadrature, 3.1 and 2.6 % for 20
    steps; asserted at most 1.2 % and at least 2 %. On the equicorrelated
    design the quadrature stops early."""
    X, y, *_ = _design("ar1", 300, 450, 0.95, 7, s=30, sigma=1.0, random_support=True)
    paths = Paths()

    def depths():  # of the templates' Lanczos quadratures
        return [d["depth"] for d in paths.details("template_quadrature")]

    def risk():
        with record(paths):
            est = TrajectoryLasso(alpha=0.001, max_iter=150, random_state=0).fit(X, y)
        assert np.count_nonzero(np.any(est.coef_path_ != 0, axis=1)) > 300  # quadrature
        return est.risk_path_[1:]

    def rms(r, ref):
        return np.sqrt(np.mean((r / ref - 1) ** 2))

    converged = risk()
    assert depths()[-1] > 20
    default = get_statistics()
    statistical_policy(template_exact_support=10**6)
    exact = risk()
    statistical_policy(template_exact_support=default.template_exact_support,
                       template_check_depths=(20,))
    twenty = risk()
    assert rms(converged, exact) <= 0.012
    assert rms(twenty, exact) >= 0.02
    statistical_policy(template_check_depths=default.template_check_depths)
    X, y = _equicorrelated(300, 450)
    with record(paths):
        TrajectoryLasso(alpha=0.001, max_iter=60, random_state=0).fit(X, y)
    assert depths()[-1] <= 20


def test_choice_noise_is_the_jackknife_of_the_differences():
    """For a statistic linear in the probes (their mean), ``choice_noise``
    is the largest, over the rivals, closed-form standard error of the mean
    of the groups' means of ``x_t - x_best``, relative to the best's
    estimate; ``choice_iterates`` are the iterates ``t >= 1`` within
    ``choice_near`` of the smallest estimate (iterate 0 and non-finite ones
    never), at most ``noise_iterates`` of them with the best among them."""
    stats = get_statistics()
    rng = np.random.default_rng(1)
    m, T1 = 16, 40
    level = np.r_[5.0, 2.0 - np.linspace(0, 1, T1 - 1) + 0.8 * np.linspace(0, 1, T1 - 1) ** 2]
    x = level + 0.02 * rng.standard_normal((m, T1))
    r = x.mean(axis=0)
    rivals = probes.choice_iterates(r, stats)
    best = int(np.argmin(r[1:])) + 1
    assert best in rivals and 0 not in rivals
    np.testing.assert_array_equal(
        rivals, np.flatnonzero(r[1:] <= r[best] * (1 + stats.choice_near)) + 1)
    assert 3 <= rivals.size < T1 - 1
    replicates = [x[kept][:, rivals].mean(axis=0)
                  for kept in probes.jackknife_probes(m, stats.noise_groups)]
    K = len(replicates)
    means = x.reshape(K, m // K, T1).mean(axis=1)
    diff = means[:, rivals] - means[:, [best]]
    expected = (diff.std(axis=0, ddof=1) / np.sqrt(K)).max() / r[best]
    assert probes.choice_noise(r, replicates, rivals) == pytest.approx(expected, rel=1e-10)
    assert probes.choice_noise(r, replicates[:1], rivals) == 0.0  # no spread
    assert probes.choice_noise(r, [rep[:1] for rep in replicates], rivals[:1]) == 0.0
    # a flat path: every iterate is a rival, evenly thinned, the best kept
    flat = np.r_[9.0, np.full(300, 1.0)]
    flat[211] = 0.999
    many = probes.choice_iterates(flat, stats)
    assert many.size <= stats.noise_iterates + 1 and 211 in many
    assert many[0] == 1 and many[-1] == 300
    bad = flat.copy()
    bad[1:] = np.nan
    assert probes.choice_iterates(bad, stats).size == 0


def test_the_choice_noise_follows_the_spread_of_the_probe_draws(statistical_policy):
    """The jackknife's choice noise against the spread of 12 probe draws of
    the same path (8 pooled probes, never grown; equicorrelated 300 x 450,
    FISTA, 60 steps): the largest, over the rivals of the mean path, standard
    deviation of ``(r_t - r_best) / r_best`` between the draws. Measured on
    six designs: the mean jackknife 0.65-1.89 times the spread (0.29-1.02 %
    against 0.36-0.66 %; both rough with 12 draws and a handful of rivals);
    asserted within a factor of 2 either way on this design (1.31)."""
    from skacv.estimators._setup import FitPlan

    stats = statistical_policy(choice_start_probes=(0, 8),
                               choice_noise_target=1.0)  # never grows
    n, p, T = 300, 450, 60
    X, y = _equicorrelated(n, p)
    paths, noise = [], []
    for seed in range(12):
        est = TrajectoryLasso(alpha=0.1 * np.sqrt(np.log(p) / n), max_iter=T,
                              random_state=seed)
        with est.planned(FitPlan(probe_goal="choice")):
            est.fit(X, y)
        assert est.risk_diagnostics_.n_probes == 8
        assert est.risk_diagnostics_.probe_noise > 0  # the level's, measured as well
        paths.append(est.risk_path_)
        noise.append(est.risk_diagnostics_.choice_noise)
    P = np.array(paths)
    mean = P.mean(axis=0)
    rivals = probes.choice_iterates(mean, stats)
    best = rivals[np.argmin(mean[rivals])]
    spread = ((P[:, rivals] - P[:, [best]]).std(axis=0, ddof=1) / mean[best]).max()
    assert spread / 2 <= np.mean(noise) <= 2 * spread


@pytest.mark.filterwarnings("ignore::skacv.exceptions.SelectionBoundaryWarning")
def test_a_search_of_one_path_grows_its_probes_for_the_choice(statistical_policy):
    """``TrajectoryEarlyStoppingCV`` of one grid point fits with
    ``FitPlan(probe_goal="choice")``: from 1000 samples its pooled chain
    starts with ``choice_start_probes``' probes (4, where a plain fit
    starts FISTA with 32), measures the choice's noise and grows while it
    is above ``choice_noise_target`` (all the probes with a target of ~0,
    none with 1). Two grid points, or a plain fit: the level's probes
    (``choice_noise`` None)."""
    from skacv import TrajectoryEarlyStoppingCV

    X, y = _equicorrelated(1000, 120, seed=2)
    est = TrajectoryLasso(alpha=0.02, max_iter=40, random_state=0)
    plain = clone(est).fit(X, y)
    stats = get_statistics()
    start = probes.pooled_start_probes
    assert plain.risk_diagnostics_.n_probes == start(1000, stats, True) == 32
    assert plain.risk_diagnostics_.choice_noise is None
    assert start(1000, stats, True, "choice") == 4
    assert start(999, stats, True, "choice") == 32
    assert start(10**6, stats, True, "choice") == start(10**6, stats, True)  # fewer already

    def search(grid=None):
        return TrajectoryEarlyStoppingCV(est, criterion="risk", param_grid=grid, search="grid",
                                         n_iter_no_change=None).fit(X, y).estimator_

    statistical_policy(choice_noise_target=1.0)
    kept = search().risk_diagnostics_
    assert kept.n_probes == 4 and 0 < kept.choice_noise < kept.probe_noise
    statistical_policy(choice_noise_target=1e-9)
    grown = search().risk_diagnostics_
    assert grown.n_probes == stats.pooled_probes
    two = search({"alpha": [0.02, 0.03]}).risk_diagnostics_
    assert two.n_probes == 32 and two.choice_noise is None


@pytest.mark.parametrize("n,p,expected", [(150, 80, 64), (999, 128, 64), (1000, 20, 32),
                                            (150, 129, 32)])
def test_small_designs_take_more_pooled_probes(n, p, expected):
    """Below ``small_design`` (samples, features) the pooled chain takes
    ``small_probes`` probes (their cost there is the per-step overhead):
    the default estimate is then the explicit 64-probe one, draw for draw;
    elsewhere the default stays ``pooled_probes``. (Narrower designs take
    the exact probes: ``test_risk_exact_probes.py``.)"""
    stats = get_statistics()
    assert probes.pooled_probes(n, p, stats) == expected
    assert probes.pooled_start_probes(n, stats, True, "level", p) == (
        expected if n < 2000 else probes.pooled_start_probes(n, stats, True))
    if n > 200:
        return
    X, y = _equicorrelated(n, p, seed=1)
    kw = dict(solver="fista", alpha=0.05, max_iter=30, random_state=3)
    auto = TrajectoryLasso(**kw).fit(X, y)
    assert auto.risk_diagnostics_.n_probes == expected
    np.testing.assert_array_equal(
        auto.risk_path_, TrajectoryLasso(n_probes=expected, **kw).fit(X, y).risk_path_)


@pytest.mark.parametrize("solver,momentum", [("ista", False), ("fista", True)])
def test_the_adaptive_chain_starts_by_its_momentum_and_samples(solver, momentum):
    """``n_probes="auto"`` in the risk estimate: the pooled chain starts
    with ``pooled_start_probes(n, momentum)`` probes, adaptive (it may grow)
    below the cap; ISTA (no momentum) with fewer than FISTA on 1000 samples."""
    X, y = _equicorrelated(1000, 120)
    est = TrajectoryLasso(0.05, solver=solver, max_iter=20, estimate_risk=False).fit(X, y)
    prob, path = est._problem(X, y), est.coef_path_
    assert prob.iteration.extrapolates(20) is momentum
    strategy = engine.plan_estimate(prob.design, prob.iteration, path, "auto", adaptive=True)
    assert strategy.form == "pooled"
    stats = get_statistics()
    assert strategy.n_probes == probes.pooled_start_probes(1000, stats, momentum)
    assert strategy.adaptive is (strategy.n_probes < stats.pooled_probes)  # room to grow
    if not momentum:
        assert strategy.n_probes < probes.pooled_start_probes(1000, stats, True)


@pytest.mark.parametrize("solver", ["ista", "fista"])
def test_a_continued_chain_reads_the_columns_the_shorter_fit_kept(solver, speed_policy):
    """A warm-started refit's pooled chain reads the restricted copy of
    ``X~`` the shorter fit kept (:func:`kept_order`) instead of gathering
    its own: one gather for three fits (three without the reuse), and the
    estimates of fresh gathers (float64 chains; the row order changes only
    the order of the sums)."""
    X, y = _equicorrelated(120, 60, seed=5)  # every coordinate active early on
    kw = dict(solver=solver, random_state=0, n_probes=4, risk_options={"chain_dtype": "float64"})
    runs = {}
    for steps in (4.0, -1.0):  # -1: never reuse
        speed_policy(chain_columns_reuse_steps=steps)
        est = TrajectoryLasso(0.002, max_iter=20, warm_start=True, **kw)
        with record() as paths:
            for T in (20, 40, 70):
                est.set_params(max_iter=T).fit(X, y)
        runs[steps] = (paths.count("design_columns"), est.risk_path_.copy())
    assert runs[4.0][0] == 1 and runs[-1.0][0] == 3
    np.testing.assert_allclose(runs[4.0][1], runs[-1.0][1], rtol=1e-10)


def test_kept_order_covers_every_later_support():
    """:func:`kept_order`'s prefixes cover every coordinate active at a step
    ``>= k`` and end on one (no row more than needed in the kept order); it
    refuses columns that miss one, and an order costing the new steps more
    than ``chain_columns_reuse_steps`` times the columns in extra rows."""
    from skacv._policy import get_policy
    from skacv.estimates.risk._propagate import chain_order, kept_order

    rng = np.random.default_rng(0)
    p, T = 40, 30
    path = np.where(rng.random((p, T + 1)) < 0.2, 1.0, 0.0)
    path[:, 0] = 0.0
    path[:5] = 0.0  # never active
    masks, order, prefix = chain_order(path)
    coords = rng.permutation(np.arange(5, p))  # every active one, in another order
    policy = get_policy()
    new, new_prefix = kept_order(order, prefix, coords, 0, policy)
    np.testing.assert_array_equal(np.sort(new), np.arange(p))
    np.testing.assert_array_equal(new[:coords.size], coords)
    position = np.empty(p, dtype=int)
    position[new] = np.arange(p)
    for k in range(1, T + 2):
        later = masks[:, k:].any(axis=1)
        assert new_prefix[k] == (position[later].max() + 1 if later.any() else 0)
    assert np.all(new_prefix >= prefix)
    assert kept_order(order, prefix, coords[1:], 0, policy) is None  # one active missing
    extra = int(np.sum(new_prefix[1:-1] - prefix[1:-1]))
    tight = dataclasses.replace(policy, chain_columns_reuse_steps=(extra - 1) / coords.size)
    assert kept_order(order, prefix, coords, 0, tight) is None
    enough = dataclasses.replace(policy, chain_columns_reuse_steps=extra / coords.size)
    assert kept_order(order, prefix, coords, 0, enough) is not None


def test_a_continued_chain_keeps_its_template_while_the_union_barely_grows(statistical_policy):
    """A warm-started refit whose union of supports grew by at most
    ``template_reuse_growth`` of its columns keeps the template's nodes
    (isotropic 300 x 600, FISTA, 10 then 20 then 40 steps: the union grows
    from 596 to 598 columns; one quadrature instead of two). ``k`` more
    columns move the spectral measure by at most ``k / width``
    (interlacing): the two unions' exact responses differ by 0.12 % of
    their largest, the two-probe quadrature's draws by 1.5-14 %. The
    ``risk_path_`` with the kept nodes against the exact eigenvalues'
    template: 0.79 % rms (0.18 % with this draw's fresh nodes, 1.01 and
    0.32 % from 15 steps); asserted at most the converged quadrature's
    1.2 % (:func:`test_the_template_quadrature_runs_until_the_response_converges`)."""
    X, y = _equicorrelated(300, 600, seed=1, rho=0.0)

    def refits(**changes):
        statistical_policy(**{"template_exact_support": 10, **changes})
        est = TrajectoryLasso(0.01, max_iter=10, warm_start=True, random_state=0, n_probes=8)
        with record() as paths:
            for T in (10, 20, 40):
                est.set_params(max_iter=T).fit(X, y)
        return est.risk_path_[1:], paths

    kept, paths = refits()
    assert max(d["grown"] for d in paths.details("template_reused")) > 0
    fresh = refits(template_reuse_growth=0.0)[1]
    assert paths.count("template_quadrature") < fresh.count("template_quadrature")
    exact = refits(template_exact_support=10**6, template_reuse_growth=0.0)[0]
    assert np.sqrt(np.mean((kept / exact - 1) ** 2)) <= 0.012


def test_a_continued_chain_keeps_exact_template_nodes_past_the_checked_lags(
        statistical_policy):
    """Exact nodes (the eigenvalues of a union no wider than
    ``template_exact_support``) need no quadrature check at longer lags: a
    warm-started path continued past ``template_check_lags`` keeps them and
    continues the template's recursion instead of running it from step 0
    again, with the same ``risk_path_`` as the recursion run again on
    nodes computed again (100 x 15, FISTA, 150 then 300 then 600 steps)."""
    X, y = _equicorrelated(100, 15, seed=2, rho=0.5)
    assert get_statistics().template_check_lags < 300

    def staged():
        est = TrajectoryLasso(0.002, max_iter=150, warm_start=True, random_state=0,
                              n_probes=8)
        with record() as paths:
            for T in (150, 300, 600):
                est.set_params(max_iter=T).fit(X, y)
        assert est.n_iter_ == 600
        return est.risk_path_, paths

    kept, paths = staged()
    assert [d["grown"] for d in paths.details("template_reused")] == [0, 0]
    statistical_policy(template_reuse_growth=-1.0)  # never kept
    again, paths = staged()
    assert paths.count("template_reused") == 0
    np.testing.assert_allclose(kept, again, rtol=1e-12)


@pytest.mark.filterwarnings("ignore::skacv.exceptions.UnreliableEstimateWarning")
def test_the_template_leaves_out_negligible_nodes(statistical_policy):
    """A design of rank 6 (40 columns, 1e-6 noise: 34 eigenvalues of
    ``X~^T X~ / n`` within 3e-14 of the top) gives the template 6 nodes, not
    40. A node ``theta`` moves the counterpart's entries by at most ``eta
    theta (T + 1)``: the template without them is the template of all the
    nodes within the 34 nodes' bound (measured 1e-11 of its largest entry,
    the bound 1.4e-6), and ``risk_path_`` is the one of all the nodes
    (measured 9e-11, asserted 1e-8)."""
    from skacv.estimates.risk._spectral import counterpart_memory_matrix, significant_nodes

    rng = np.random.default_rng(3)
    n, p, T = 120, 40, 400
    X = rng.standard_normal((n, 6)) @ rng.standard_normal((6, p))
    X += 1e-6 * rng.standard_normal((n, p))
    y = X[:, :3].sum(axis=1) + rng.standard_normal(n)
    Xc = X - X.mean(axis=0)
    lam = np.clip(np.linalg.eigvalsh(Xc.T @ Xc / n), 0.0, None)
    stats = get_statistics()
    kept, weights = significant_nodes(lam, None, stats)
    assert kept.size == 6 and weights is None
    np.testing.assert_array_equal(kept, lam[lam >= stats.template_node_floor * lam.max()])
    iteration = TrajectoryLasso(0.01, max_iter=T).fit(X, y)._problem(X, y).iteration
    A, Av = counterpart_memory_matrix(iteration, lam, T)
    B, Bv = counterpart_memory_matrix(iteration, kept, T)
    bound = iteration.step_size * lam[lam < kept.min()].sum() * (T + 1)
    assert np.abs(A - B).max() <= bound and np.abs(Av - Bv).max() <= bound
    # quadrature nodes: weight times eigenvalue against the largest
    lq, wq = significant_nodes(np.array([1e-13, 1.0, 2.0]), np.array([1.0, 1e-11, 1.0]), stats)
    np.testing.assert_array_equal(lq, [2.0])
    np.testing.assert_array_equal(wq, [1.0])

    def risk(floor):
        statistical_policy(template_node_floor=floor)
        with record() as paths:
            est = TrajectoryLasso(alpha=0.01, max_iter=T, random_state=0).fit(X, y)
        return est.risk_path_, [d["dropped"] for d in paths.details("template_nodes_dropped")]

    default, dropped = risk(stats.template_node_floor)
    every, none = risk(0.0)
    assert dropped and max(dropped) >= 30 and not none
    np.testing.assert_allclose(default, every, rtol=1e-8)
