"""The risk estimate's memory: refused before it is spent, and not kept.

A long path's estimate may need ``(T + 1) x (T + 1)`` matrices: their bytes
are computed before anything is allocated (before the fit when the method
says so, else before the matrices) and refused above ``path_memory_limit``
with the bytes, the limit and the fixes. A fitted estimator keeps its
``risk_matrix_`` and ``memory_matrix_`` only within ``risk_matrix_limit``.
"""

import pickle
import re
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from skacv import IterativeRidge, TrajectoryLasso, config_context
from skacv._policy import get_policy
from skacv._statistics import get_statistics
from skacv._trace import record
from skacv.estimates.risk._estimate import memory_matrix
from skacv.exceptions import UnreliableEstimateWarning


def _problem(n, p, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X[:, :3] @ np.array([1.0, -1.0, 0.5]) + 0.5 * rng.standard_normal(n)
    return X, y


def _bytes(message):
    """The byte counts a message names (``1,234,567 bytes``)."""
    return [int(b.replace(",", "")) for b in re.findall(r"([\d,]+) bytes", message)]


def test_a_long_lasso_path_is_refused_before_the_fit():
    """max_iter=200000 on 60 x 5: coef_path_ fits in the limit, the estimate
    does not: a ValueError before the path is run (nothing is fitted), with
    the bytes, the limit and the fixes; never a MemoryError."""
    X, y = _problem(60, 5)
    est = TrajectoryLasso(max_iter=200_000)
    with config_context(path_memory_limit=32):
        with pytest.raises(ValueError) as info:
            est.fit(X, y)
    message = str(info.value)
    assert "risk estimate of 200001 iterates" in message
    assert "path_memory_limit=" in message and "32 MiB" in message
    assert "Lower max_iter or set estimate_risk=False" in message
    # at least the settled form's O(q T) floats, q = 6 (covariance form) or 60
    need = _bytes(message)[0]
    assert need > 32 * 2**20 and need >= 8 * 200_001 * 6
    assert not hasattr(est, "coef_path_")  # refused before the fit
    # without the estimate the same path is within the limit
    with config_context(path_memory_limit=32):
        est.set_params(estimate_risk=False, max_iter=20).fit(X, y)


@pytest.mark.parametrize("est", [IterativeRidge(max_iter=200_000, solver="heavy_ball"),
                                 TrajectoryLasso(max_iter=200_000, warm_start=True)],
                         ids=["heavy_ball", "warm_start"])
def test_dense_estimates_are_refused_before_the_fit(est):
    """Estimates that hold (T + 1) x (T + 1) matrices whatever the supports
    (a heavy ball; a warm start, which keeps its chains) are refused under
    the default limit with their exact size."""
    X, y = _problem(60, 5)
    with pytest.raises(ValueError, match=r"8 matrices of 200001 x 200001 floats") as info:
        est.fit(X, y)
    assert _bytes(str(info.value)) == [8 * 8 * 200_001**2]
    assert "estimate_risk=False" in str(info.value)
    assert not hasattr(est, "coef_path_")


def test_memory_matrix_is_refused_before_it_is_allocated():
    X, y = _problem(30, 8)
    est = TrajectoryLasso(alpha=0.1, max_iter=300, n_probes=None).fit(X, y)
    prob = est._problem(X, y)
    with config_context(path_memory_limit=1):  # 4 matrices of 301^2 floats: 2.8 MiB
        with pytest.raises(ValueError, match=r"4 matrices of 301 x 301 floats"):
            memory_matrix(prob.design, prob.iteration, est.coef_path_, n_probes=None)
    A = memory_matrix(prob.design, prob.iteration, est.coef_path_, n_probes=None)[0]
    np.testing.assert_allclose(A, est.memory_matrix_, rtol=1e-12, atol=1e-14)


def test_a_long_fit_keeps_no_square_matrix_and_pickles_small():
    """T = 1000 on 10 features: risk_matrix_ and memory_matrix_ (8 MB each)
    are not kept by default, the pickle weighs at most 3 times coef_path_;
    asked for (risk_matrix_limit), they are, with the same risk path."""
    X, y = _problem(100, 10, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableEstimateWarning)
        est = TrajectoryLasso(alpha=0.1, max_iter=1000, random_state=0).fit(X, y)
        assert not hasattr(est, "risk_matrix_") and not hasattr(est, "memory_matrix_")
        with pytest.raises(AttributeError, match=r"risk_matrix_limit.*config_context"):
            _ = est.memory_matrix_
        size = len(pickle.dumps(est))
        assert size <= 3 * est.coef_path_.nbytes, (size, est.coef_path_.nbytes)
        restored = pickle.loads(pickle.dumps(est))
        np.testing.assert_array_equal(restored.risk_path_, est.risk_path_)
        np.testing.assert_array_equal(restored.predict(X), est.predict(X))
        with config_context(risk_matrix_limit=16):
            kept = clone(est).fit(X, y)
    assert kept.risk_matrix_.shape == kept.memory_matrix_.shape == (1001, 1001)
    np.testing.assert_allclose(np.diag(kept.risk_matrix_), kept.risk_path_, rtol=1e-10)
    np.testing.assert_allclose(kept.risk_path_, est.risk_path_, rtol=1e-10)


def test_warm_start_is_exact_without_the_kept_matrices():
    """50 + 50 steps equal 100 when no matrix is kept (risk_matrix_limit=0):
    the continuation reads the chains' state, not the fitted attributes."""
    X, y = _problem(40, 60, seed=2)
    kw = dict(alpha=0.05, random_state=3)
    with config_context(risk_matrix_limit=0):
        cold = TrajectoryLasso(max_iter=100, **kw).fit(X, y)
        warm = TrajectoryLasso(max_iter=50, warm_start=True, **kw).fit(X, y)
        warm.set_params(max_iter=100).fit(X, y)
    assert not hasattr(warm, "memory_matrix_")
    np.testing.assert_allclose(warm.risk_path_, cold.risk_path_, rtol=1e-10)
    np.testing.assert_array_equal(warm.risk_reliable_, cold.risk_reliable_)


def test_risk_time_budget_refuses_costly_chains_before_they_run(speed_policy):
    """Under ``risk_time_budget`` an ISTA/FISTA estimate (the pooled probes
    of ``"auto"``) whose chains are predicted to cost
    more fits than the budget raises EstimateBudgetError before any chain
    runs; the prediction grows with the support and with the columns the
    scheme advances, and is zero without probes."""
    from skacv import TrajectoryLasso, config_context
    from skacv.estimates.risk._engine import chain_cost_in_fits
    from skacv.exceptions import EstimateBudgetError

    rng = np.random.default_rng(0)
    X = rng.standard_normal((1000, 60))
    y = X[:, :5].sum(axis=1) + rng.standard_normal(1000)
    est = TrajectoryLasso(alpha=1e-3, max_iter=30, estimate_risk=False).fit(X, y)
    sparse = TrajectoryLasso(alpha=0.5, max_iter=30, estimate_risk=False).fit(X, y)

    class Sizes:
        n_samples, n_features = 1000, 60
        policy = get_policy()

    pooled = get_statistics().pooled_probes

    wide, flops = chain_cost_in_fits(Sizes, est.coef_path_, pooled)
    narrow, _ = chain_cost_in_fits(Sizes, sparse.coef_path_, pooled)
    assert wide > narrow > 0 and flops > 0
    assert chain_cost_in_fits(Sizes, est.coef_path_, None) == (0.0, 0.0)
    assert chain_cost_in_fits(Sizes, est.coef_path_, 2 * pooled)[0] == pytest.approx(2 * wide)
    speed_policy(risk_cheap_flops=0.0)  # no absolute floor at this small size
    with (config_context(risk_time_budget=wide / 2), record() as paths,
          pytest.raises(EstimateBudgetError, match="would cost about")):
        TrajectoryLasso(alpha=1e-3, max_iter=30, random_state=0).fit(X, y)
    assert "run_trajectory" in paths and "memory_matrices" not in paths
    # within the budget (or without one) the estimate runs
    with config_context(risk_time_budget=2 * wide), record() as paths:
        TrajectoryLasso(alpha=1e-3, max_iter=30, random_state=0).fit(X, y)
    assert [d["form"] for d in paths.details("memory_matrices")] == ["pooled"]


@pytest.mark.parametrize("criterion", ["auto", "risk"])
def test_the_budget_refuses_and_never_chooses(speed_policy, criterion):
    """The configuration changes resources only: under a risk_time_budget
    the search's estimate that would exceed it is refused (the error
    reaches the user, whatever the criterion: "auto" does not switch to
    K-fold CV), and within it (or without one) the search selects what it
    selects without a budget."""
    from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso
    from skacv.exceptions import EstimateBudgetError

    rng = np.random.default_rng(1)
    X = rng.standard_normal((1000, 60))
    y = X[:, :5].sum(axis=1) + rng.standard_normal(1000)
    search = TrajectoryEarlyStoppingCV(TrajectoryLasso(alpha=1e-3, max_iter=30),
                                       criterion=criterion, search="grid", random_state=0)
    free = clone(search).fit(X, y)
    assert free.criterion_ == "risk"
    speed_policy(risk_cheap_flops=0.0)
    with config_context(risk_time_budget=0.0), pytest.raises(EstimateBudgetError,
                                                             match="would cost about"):
        clone(search).fit(X, y)
    with config_context(risk_time_budget=1e9):
        within = clone(search).fit(X, y)
    assert within.criterion_ == "risk" and within.best_iteration_ == free.best_iteration_
    np.testing.assert_array_equal(within.risk_path_, free.risk_path_)
