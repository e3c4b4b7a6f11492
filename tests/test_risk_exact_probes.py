"""The exact probes of a narrow design (:class:`RangeProbes`, ``n_probes="auto"``).

Where the rank of ``X~`` (at most ``min(n, p)``) is at most the probes the
pooled chain starts with, ``Z = sqrt(r) Q`` (``Q`` an orthonormal basis of
the range of ``X~``) makes Hutchinson's readout the trace itself:

* the pooled chain's row sums equal the exact memory matrices' (exact
  traces by the shared chains, ``n_probes=None``) to rounding, with and
  without an intercept, weighted, ISTA and FISTA, more samples than
  features and fewer;
* ``risk_path_`` is then the exact one up to the template's split (its
  bias measured below), the settled form's (long paths) up to rounding,
  and neither depends on ``random_state``;
* a warm start continues the exact chain; an explicit ``n_probes`` keeps
  Hutchinson's probes.
"""

import warnings

import numpy as np
import pytest

import skacv.estimates.risk._engine as engine
import skacv.estimates.risk._pooled as pooled
from skacv import TrajectoryElasticNet, TrajectoryLasso
from skacv._statistics import get_statistics
from skacv._trace import record
from skacv.estimates.risk._estimate import memory_matrix
from skacv.estimates.risk._probes import RangeProbes, pooled_start_probes, range_probes
from skacv.exceptions import UnreliableEstimateWarning

F64 = {"chain_dtype": "float64"}


def _data(n, p, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + 0.7 * rng.standard_normal((n, 1))
    X[:, 1] = X[:, 0] + 0.1 * X[:, 1]  # strongly correlated columns
    beta = np.zeros(p)
    beta[:5] = rng.standard_normal(5)
    return X, X @ beta + rng.standard_normal(n)


def _fit(X, y, sw=None, make=TrajectoryLasso, **kw):
    with warnings.catch_warnings(), record() as run:
        warnings.simplefilter("ignore", UnreliableEstimateWarning)
        est = make(**kw).fit(X, y, sample_weight=sw)
    return est, run


CASES = [  # (n, p, solver, fit_intercept, weighted)
    (120, 15, "fista", True, False),
    (120, 15, "ista", False, True),
    (90, 40, "fista", False, True),
    (50, 90, "fista", True, False),  # fewer samples than features: Q = I on the rank
    (50, 90, "ista", True, True),
]


@pytest.mark.parametrize("n, p, solver, fit_intercept, weighted", CASES)
def test_exact_probes_give_the_exact_row_sums(n, p, solver, fit_intercept, weighted):
    X, y = _data(n, p)
    sw = np.random.default_rng(1).uniform(0.5, 2.0, n) if weighted else None
    T = 40
    est, _ = _fit(X, y, sw, alpha=0.05, solver=solver, max_iter=T, n_probes=None,
                  fit_intercept=fit_intercept, risk_options=F64)
    prob = est._problem(X, y, sw)
    path = est.coef_path_
    A, Av = memory_matrix(prob.design, prob.iteration, path, n_probes=None,
                          chain_dtype=np.float64)
    Z = range_probes(prob.design)
    # R^T R = X~^T X~: the images' Gram matrix is r times the design's
    Xd = prob.design.dense()
    scale_gram = np.abs(Xd.T @ Xd).max()
    np.testing.assert_allclose(Z.factor @ Z.factor.T / Z.shape[1], Xd.T @ Xd,
                               atol=1e-12 * scale_gram)
    assert Z.shape[1] <= min(n - fit_intercept, p)
    run = pooled.run_pooled_chain(prob.design, prob.iteration, path, Z.shape[1], None,
                                  np.float64, probes=Z)
    older = np.tril(np.ones((T + 1, T + 1), dtype=bool), -2)
    scale = np.abs(A).max()
    np.testing.assert_allclose(run.SA.mean(axis=2)[:, 0], np.where(older, A, 0).sum(axis=1),
                               atol=1e-10 * scale)
    np.testing.assert_allclose(run.SV.mean(axis=2)[:, 0], np.where(older, Av, 0).sum(axis=1),
                               atol=1e-10 * scale)
    k = np.arange(1, T + 1)
    np.testing.assert_allclose(run.lag0[1:, 0], A[k, k - 1], rtol=1e-12, atol=1e-12 * scale)


@pytest.mark.parametrize("solver, enet", [("fista", False), ("ista", False), ("fista", True)])
def test_default_risk_path_is_exact_up_to_the_split(solver, enet):
    """The default estimate on 150 x 12 takes the exact probes, in float64:
    against exact traces the only error left is the template's split (max
    relative 4.4e-4 for FISTA, 9.8e-4 for ISTA, 1.1e-3 for the elastic
    net's FISTA measured on these paths; 64 Rademacher probes left 0.7-2.3
    % and 0.4-0.7 % over 4 seeds); no draw is made, so ``random_state``
    changes nothing."""
    tol = 2e-3
    X, y = _data(150, 12, seed=3)
    kw = dict(alpha=0.02, solver=solver, max_iter=200)
    if enet:
        kw.update(make=TrajectoryElasticNet, l1_ratio=0.5)
    exact, _ = _fit(X, y, n_probes=None, **kw)
    auto, run = _fit(X, y, random_state=0, **kw)
    assert [d["exact"] for d in run.details("risk_plan")] == [True]
    assert [d["form"] for d in run.details("risk_plan")] == ["pooled"]
    assert auto.risk_diagnostics_.n_probes is None
    assert auto.risk_diagnostics_.probe_noise == 0.0
    rel = np.abs(auto.risk_path_ / exact.risk_path_ - 1)
    assert rel.max() <= tol, rel.max()
    other, _ = _fit(X, y, random_state=1, **kw)
    np.testing.assert_allclose(other.risk_path_, auto.risk_path_, rtol=1e-12)
    # Hutchinson's probes, asked for: random
    hutch = [_fit(X, y, n_probes=8, random_state=s, **kw)[0].risk_path_ for s in (0, 1)]
    assert np.abs(hutch[0] / hutch[1] - 1).max() > 10 * tol
    assert np.abs(hutch[0] / exact.risk_path_ - 1).max() > rel.max()


def test_settled_form_takes_the_exact_probes(speed_policy):
    """A long path that settles: the settled form's head runs the exact
    probes, and the whole ``risk_path_`` is the exact traces' to rounding
    (the settled form has no split), whatever ``random_state``."""
    X, y = _data(120, 15, seed=2)
    kw = dict(alpha=0.05, solver="fista", max_iter=300)
    speed_policy(settled_min_tail=10**9)  # the exact traces of the canonical chains
    exact, _ = _fit(X, y, n_probes=None, **kw)
    speed_policy(settled_min_tail=100)
    paths = []
    for seed in (0, 1):
        est, run = _fit(X, y, random_state=seed, **kw)
        assert [(d["form"], d["exact"]) for d in run.details("risk_plan")] == [
            ("settled", True)]
        assert run.details("settled_risk")  # the settled form ran
        paths.append(est.risk_path_)
    np.testing.assert_allclose(paths[0], exact.risk_path_, rtol=1e-9)
    np.testing.assert_allclose(paths[1], paths[0], rtol=1e-12)


@pytest.mark.parametrize("n, p, solver, fit_intercept, weighted, alpha", [
    (30, 20, "fista", True, False, 0.1),  # at most 40 samples "auto" is exact traces
    (30, 20, "ista", False, True, 0.1),
    (80, 30, "fista", True, True, 0.1),  # n_probes=None, asked for
    (35, 60, "fista", False, False, 0.3),  # fewer samples than features
])
def test_exact_traces_take_the_settled_form(speed_policy, n, p, solver, fit_intercept,
                                            weighted, alpha):
    """Exact traces (``n_probes=None``, and ``"auto"`` at 40 samples or
    fewer) on a path that settles take the settled form on the range's exact
    probes: the canonical chains' ``risk_path_`` to rounding, in ``O(T)``
    instead of their ``O(T^2)``; so does a warm start (the canonical chains
    keep no state to continue)."""
    X, y = _data(n, p, seed=7)
    sw = np.random.default_rng(2).integers(1, 4, n).astype(float) if weighted else None
    kw = dict(alpha=alpha, solver=solver, max_iter=300, fit_intercept=fit_intercept,
              n_probes="auto" if n <= 40 else None, risk_options=F64)
    speed_policy(settled_min_tail=10**9)
    ref, run = _fit(X, y, sw, **kw)
    assert [(d["form"], d["exact"]) for d in run.details("risk_plan")] == [("shared", False)]
    speed_policy(settled_min_tail=100)
    est, run = _fit(X, y, sw, **kw)
    assert [(d["form"], d["exact"]) for d in run.details("risk_plan")] == [("settled", True)]
    assert run.details("settled_risk")[0]["settled_step"] <= 200
    np.testing.assert_allclose(est.risk_path_, ref.risk_path_, rtol=1e-9)
    np.testing.assert_array_equal(est.risk_reliable_, ref.risk_reliable_)
    np.testing.assert_allclose(est.excess_risk_path_, ref.excess_risk_path_, rtol=1e-8,
                               atol=1e-12 * np.abs(ref.excess_risk_path_).max())
    # the memory matrices themselves, asked for on the same path, are not the settled form's
    prob = est._problem(X, y, sw)
    A, _ = memory_matrix(prob.design, prob.iteration, est.coef_path_, n_probes=None,
                         chain_dtype=np.float64)
    np.testing.assert_allclose(A, ref.memory_matrix_, rtol=1e-9,
                               atol=1e-12 * np.abs(ref.memory_matrix_).max())
    warm = TrajectoryLasso(warm_start=True, **dict(kw, max_iter=150))
    with warnings.catch_warnings(), record() as run:
        warnings.simplefilter("ignore", UnreliableEstimateWarning)
        warm.fit(X, y, sample_weight=sw)
        warm.set_params(max_iter=300).fit(X, y, sample_weight=sw)
    assert run.details("risk_plan")[-1]["form"] == "settled"
    np.testing.assert_allclose(warm.risk_path_, ref.risk_path_, rtol=1e-9)


@pytest.mark.parametrize("solver", ["fista", "ista"])
def test_a_warm_start_continues_the_exact_chain(solver):
    X, y = _data(150, 12, seed=4)
    kw = dict(alpha=0.02, solver=solver, risk_options=F64)
    cold, _ = _fit(X, y, max_iter=100, **kw)
    warm = TrajectoryLasso(max_iter=50, warm_start=True, **kw)
    with warnings.catch_warnings(), record() as run:
        warnings.simplefilter("ignore", UnreliableEstimateWarning)
        warm.fit(X, y)
        warm.set_params(max_iter=100).fit(X, y)
    assert [d["exact"] for d in run.details("risk_plan")] == [True, True]
    assert [(d["k0"], d["k_end"]) for d in run.details("forward_chains")] == [(0, 50), (50, 100)]
    assert isinstance(warm._risk_state.Z, RangeProbes)
    np.testing.assert_allclose(warm.risk_path_, cold.risk_path_, rtol=1e-10)
    scale = np.abs(cold.memory_matrix_).max()
    np.testing.assert_allclose(warm.memory_matrix_, cold.memory_matrix_, rtol=1e-10,
                               atol=1e-12 * scale)


def test_the_exact_probes_where_they_cost_no_more_columns():
    """``min(n, p)`` at most the probes the pooled chain starts with: 64 on
    a small design, 16 from 2000 samples (FISTA); never with explicit
    probes, a heavy ball or the linear iterations."""
    stats = get_statistics()
    X, y = _data(150, 70, seed=5)
    for p, expected in ((64, True), (65, False)):
        est, _ = _fit(X[:, :p], y, alpha=0.05, max_iter=20, estimate_risk=False)
        prob = est._problem(X[:, :p], y)
        assert pooled_start_probes(150, stats, True, "level", p) == 64
        assert engine.takes_exact_probes(prob.design, prob.iteration, 20) is expected
        plan = engine.plan_estimate(prob.design, prob.iteration, est.coef_path_, "auto",
                                    adaptive=True)
        assert plan.exact is expected and plan.form == "pooled"
        assert plan.adaptive is False or not expected
        explicit = engine.plan_estimate(prob.design, prob.iteration, est.coef_path_, 64,
                                        adaptive=True)
        assert not explicit.exact
    Xb, yb = _data(2000, 17, seed=6)
    for p, expected in ((16, True), (17, False)):
        est, _ = _fit(Xb[:, :p], yb, alpha=0.05, max_iter=10, estimate_risk=False)
        prob = est._problem(Xb[:, :p], yb)
        assert engine.takes_exact_probes(prob.design, prob.iteration, 10) is expected
