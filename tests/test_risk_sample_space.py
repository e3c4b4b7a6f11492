"""Probe chains in sample space (supports wider than the sample).

The sample-space chains must give the memory matrices of the
coefficient-space chains with the same probes, whatever step they start at
and whatever the iteration (plain, extrapolated or heavy ball, clipped or
not), with weights, on sparse designs and in parallel column groups.
"""

import functools

import numpy as np
import pytest
import scipy.sparse as sp

import skacv._risk_chains as chains
import skacv._risk_sample_space as sample_space
from skacv import FISTA, HeavyBall, TrajectoryLasso, config_context
from skacv._iterations import ISTA
from skacv._penalties import Penalty
from skacv.exceptions import UnreliableEstimateWarning

# p > n with momentum: the reliability checks flag the late iterates; the
# memory matrices compared here are what those checks read
pytestmark = pytest.mark.filterwarnings(f"ignore::{UnreliableEstimateWarning.__module__}."
                                        f"{UnreliableEstimateWarning.__name__}")


def _wide_problem(seed=0, n=40, p=90):
    """p > n with a small penalty: supports of 60-85 coordinates, wider than
    the sample, that still change along the path."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n, p)
    X[:, 1::2] += 0.6 * X[:, ::2]  # correlated pairs
    beta = np.zeros(p)
    beta[:15] = 1.0
    return X, X @ beta + 0.5 * rng.randn(n)


SOLVERS = {
    "ista": lambda: "ista",
    "fista": lambda: "fista",
    "fista_plain": lambda: FISTA(extrapolation="plain"),
    "heavy_ball": lambda: HeavyBall(momentum=0.5),
}


def _fit(X, y, solver, plan, workers=None, **kw):
    """Fit with the sample-space chains forced to start at ``plan`` (an
    int), or disabled (``None``); also returns the starts used."""
    used = []
    fit = kw.pop("fit", {})
    real = sample_space.sample_space_plan

    def spy(*args, **kwargs):
        if plan is None:
            return None
        out = real(*args, start=plan, **kwargs)
        used.append(out.start)
        return out

    mp = pytest.MonkeyPatch()
    mp.setattr(chains, "sample_space_plan", spy)
    if workers is not None:
        mp.setattr(sample_space, "column_workers",
                   functools.partial(sample_space.column_workers, workers))
    try:
        with config_context(risk_chain_dtype="float64"):
            est = TrajectoryLasso(0.02, solver=SOLVERS[solver](), max_iter=30, n_probes=4,
                                  random_state=0, **kw).fit(X, y, **fit)
    finally:
        mp.undo()
    return est, used


@pytest.mark.parametrize("solver", list(SOLVERS))
@pytest.mark.parametrize("start", [1, 2, 9, 29])
def test_sample_space_chains_equal_coefficient_space_chains(solver, start):
    X, y = _wide_problem()
    ref, _ = _fit(X, y, solver, None)
    est, used = _fit(X, y, solver, start)
    assert used == [start]
    np.testing.assert_array_equal(est.coef_path_, ref.coef_path_)
    scale = np.abs(ref.memory_matrix_).max()
    np.testing.assert_allclose(est.memory_matrix_, ref.memory_matrix_, rtol=1e-9,
                               atol=1e-11 * scale)
    np.testing.assert_allclose(est.risk_path_, ref.risk_path_, rtol=1e-9)


@pytest.mark.parametrize("kind", ["weighted", "sparse_weighted", "intercept"])
def test_sample_space_chains_with_weights_sparse_and_intercept(kind):
    X, y = _wide_problem(1)
    w = np.random.RandomState(2).rand(X.shape[0]) + 0.5
    Xk = sp.csr_matrix(X) if kind.startswith("sparse") else X
    kw = {"fit_intercept": kind == "intercept"}
    fit = {} if kind == "intercept" else {"sample_weight": w}
    ref = _fit(Xk, y, "fista", None, **kw, fit=fit)[0]
    est, used = _fit(Xk, y, "fista", 6, **kw, fit=fit)
    assert used == [6]
    np.testing.assert_allclose(est.memory_matrix_, ref.memory_matrix_, rtol=1e-9,
                               atol=1e-11 * np.abs(ref.memory_matrix_).max())


def test_sample_space_chains_in_parallel_column_groups(monkeypatch):
    """Groups of one source in two threads: the same matrices as one thread."""
    X, y = _wide_problem(3)
    monkeypatch.setattr(sample_space, "_CHUNK_BYTES", 1)
    one, _ = _fit(X, y, "heavy_ball", 4, workers=1)
    two, _ = _fit(X, y, "heavy_ball", 4, workers=2)
    np.testing.assert_allclose(two.memory_matrix_, one.memory_matrix_, rtol=1e-12,
                               atol=1e-14 * np.abs(one.memory_matrix_).max())


def test_the_flop_model_chooses_sample_space_for_wide_supports():
    """The seed's generator scaled down (p > n, lam = 0.01): supports wider
    than the sample, so the default fit switches; a large penalty (narrow
    supports) or p < n keeps the coefficient space. Both give the seed
    algorithm's matrices (here: each other's, to float32 rounding)."""
    rng = np.random.default_rng(2025)
    n, p, s = 200, 300, 100
    X = rng.standard_normal((n, p))
    y = X @ (15 * np.r_[np.ones(s), np.zeros(p - s)] / np.sqrt(n)) + 1.5 * rng.standard_normal(n)
    eta = (1 + np.sqrt(p / n)) ** -2
    starts = []
    real = sample_space.sample_space_plan

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        starts.append(None if out is None else out.start)
        return out

    mp = pytest.MonkeyPatch()
    mp.setattr(chains, "sample_space_plan", spy)
    try:
        kw = dict(solver="ista", max_iter=60, step_size=eta, fit_intercept=False, n_probes=5,
                  random_state=0)
        wide = TrajectoryLasso(0.01, **kw).fit(X, y)
        narrow = TrajectoryLasso(0.5, **kw).fit(X, y)
        TrajectoryLasso(0.01, **kw).fit(X[:, :100], y)  # p < n
    finally:
        mp.undo()
    assert starts[0] is not None and starts[1:] == [None, None]
    assert (wide.coef_ != 0).sum() > n and (narrow.coef_ != 0).sum() < n / 2
    ref = _fit_masked(X, y, kw)
    np.testing.assert_allclose(wide.risk_path_, ref.risk_path_, rtol=1e-4)


def _fit_masked(X, y, kw):
    mp = pytest.MonkeyPatch()
    mp.setattr(chains, "sample_space_plan", lambda *a, **k: None)
    try:
        return TrajectoryLasso(0.01, **kw).fit(X, y)
    finally:
        mp.undo()


def test_warm_start_keeps_the_coefficient_space_chains():
    """A warm-started fit keeps its chains for the next stage, in
    coordinates: no sample-space plan is made."""
    X, y = _wide_problem()
    calls = []
    mp = pytest.MonkeyPatch()
    mp.setattr(chains, "sample_space_plan", lambda *a, **k: calls.append(1))
    try:
        TrajectoryLasso(0.02, solver="ista", max_iter=20, n_probes=3, random_state=0,
                        warm_start=True).fit(X, y)
    finally:
        mp.undo()
    assert calls == []


def test_free_steps_exclude_clipped_unpenalised_and_inactive_coordinates():
    path = np.array([[1.0, 1.0, 0.0, 1.0],  # inactive at step 2
                     [0.5, 0.5, 0.5, -0.1],  # a sign change at step 3: clipped
                     [1.0, 1.1, 1.2, 1.3],
                     [-2.0, -2.1, -2.2, -2.3],
                     [3.0, 3.0, 3.0, 3.0]])  # unpenalised
    it = FISTA(1.0, penalty=Penalty(l1=0.1, l2=0.3, n_unpenalized=1))
    free = sample_space.free_steps(it, path)
    coef = it.extrapolation_coefficients(3, path[:, 3], path[:, 2])
    assert free.shape == (5, 3)
    assert not free[0, 1] and not free[4].any()  # inactive; unpenalised with a ridge part
    assert not free[1, 2] and coef[1][1] == 0.0
    assert free[2:4].all()
    # without the ridge part the unpenalised coordinate is free where active
    it = ISTA(1.0, penalty=Penalty(l1=0.1, n_unpenalized=1))
    assert sample_space.free_steps(it, path)[4].all()
