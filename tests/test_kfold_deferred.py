"""K-fold CV's deferred full fits (skacv.model_selection._kfold_search.DeferredFull):
a candidate's full-data fit runs only once the search has selected it, and the
search's results are those of the eager fits, bit for bit."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from skacv import IterativeRidge, TrajectoryEarlyStoppingCV, TrajectoryLasso
from skacv._policy import current_policies, policy_context
from skacv._trace import record
from skacv.model_selection._kfold_search import DeferredFull, KFoldPath


def _wide(n=40, p=120, seed=0):
    """Few samples, many features (where criterion="auto" moves to K-fold CV)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + 0.3 * rng.standard_normal((n, 1))
    y = X[:, :4] @ np.array([2.0, -1.5, 1.0, 0.5]) + rng.standard_normal(n)
    return X, y


def _fit(make, X, y, eager, **fit_params):
    """The search fitted with deferred full fits, or (``eager``, the speed
    policy's ``defer_full_fit=False``) without; returns it and the number
    of full fits deferred and of deferred fits run. One block of folds a
    grid point either way (``stack_grid=False``; an eager search cannot
    stack the grid's: test_kfold_grid_block.py)."""
    with policy_context(defer_full_fit=not eager, stack_grid=False), record() as paths:
        search = make().fit(X, y, **fit_params)
    return search, {"deferred": paths.count("defer_full_fit"),
                    "run": paths.count("deferred_full_fit")}


def _assert_same(a, b, X):
    assert a.best_index_ == b.best_index_
    assert a.best_iteration_ == b.best_iteration_
    assert a.best_score_ == b.best_score_
    assert_array_equal(a.predict(X), b.predict(X))
    assert_array_equal(a.estimator_.coef_path_, b.estimator_.coef_path_)
    assert_array_equal(a.estimator_.intercept_path_, b.estimator_.intercept_path_)
    assert a.estimator_.get_params() == b.estimator_.get_params()
    assert a.estimator_.n_iter_ == b.estimator_.n_iter_
    assert a.estimator_.step_size_ == b.estimator_.step_size_
    ra, rb = a.cv_results_, b.cv_results_
    assert set(ra) == set(rb)
    for key in ra:
        if key in ("fit_time", "path_time"):
            continue
        for u, v in zip(ra[key], rb[key], strict=True):
            # np.ma.masked is an ndarray that NumPy 1.24's assert_array_equal
            # cannot compare with itself
            if u is np.ma.masked or v is np.ma.masked:
                assert u is v, key
            elif isinstance(u, np.ndarray) or isinstance(v, np.ndarray):
                assert_array_equal(u, v, err_msg=key)
            else:
                assert (u == v) or (u != u and v != v), key


PATH_GRID = {"alpha": list(np.geomspace(1.0, 1e-3, 8))}


@pytest.mark.parametrize("make", [
    # the natural call on a wide design: K-fold CV along the path, search="path"
    lambda: TrajectoryEarlyStoppingCV(TrajectoryLasso(solver="fista", max_iter=60),
                                      param_grid=PATH_GRID, criterion="kfold",
                                      random_state=0),
    # whole paths (no early stopping), ISTA without intercept
    lambda: TrajectoryEarlyStoppingCV(
        TrajectoryLasso(solver="ista", max_iter=40, fit_intercept=False),
        param_grid=PATH_GRID, criterion="kfold", n_iter_no_change=None, random_state=0),
    # the grid search
    lambda: TrajectoryEarlyStoppingCV(TrajectoryLasso(solver="fista", max_iter=60),
                                      param_grid=PATH_GRID, criterion="kfold", search="grid",
                                      random_state=0),
    lambda: TrajectoryEarlyStoppingCV(IterativeRidge(solver="nesterov", max_iter=50),
                                      param_grid={"alpha": [10.0, 1.0, 0.1]}, criterion="kfold",
                                      random_state=0),
])
@pytest.mark.parametrize("weighted", [False, True])
def test_deferred_full_fits_equal_the_eager_ones(make, weighted):
    X, y = _wide()
    fit_params = {}
    if weighted:
        fit_params["sample_weight"] = np.random.default_rng(1).integers(1, 4, len(y)).astype(float)
    lazy, counts = _fit(make, X, y, False, **fit_params)
    eager, none = _fit(make, X, y, True, **fit_params)
    _assert_same(lazy, eager, X)
    assert none == {"deferred": 0, "run": 0}
    # every fitted candidate deferred its full fit; only the selection's ran
    n_fitted = int(np.sum(~np.ma.getmaskarray(lazy.cv_results_["n_iter"])))
    assert counts == {"deferred": n_fitted, "run": 1}
    assert n_fitted > 1


def test_a_deferred_fit_is_cut_where_the_early_stopping_stops():
    """Where the stopping rule cuts the path (the converged fit's limit
    above the trajectory's minimum), the deferred fit runs to that length,
    as the eager one is refitted to it."""
    X, y = _wide(seed=3)

    def make():
        return TrajectoryEarlyStoppingCV(TrajectoryLasso(solver="fista", max_iter=150),
                                         param_grid=PATH_GRID, criterion="kfold",
                                         search="grid", n_iter_no_change=5, random_state=0)

    lazy, _ = _fit(make, X, y, False)
    eager, _ = _fit(make, X, y, True)
    _assert_same(lazy, eager, X)
    n_iter = lazy.cv_results_["n_iter"]
    assert lazy.estimator_.n_iter_ == n_iter[lazy.best_index_] < 150
    assert np.ma.min(n_iter) < 150


@pytest.mark.parametrize("beside", [False, True])
def test_staged_paths_defer_their_full_fits_unless_beside(beside):
    """Where the paths grow in stages, the stages grow the folds only and
    the full fit waits for the selection: the eager search's results, bit
    for bit; where the full path's stages would run beside the folds' (a
    thread of their own: no wall time), they run there, undeferred."""
    X, y = _wide(seed=3)

    def make():
        return TrajectoryEarlyStoppingCV(TrajectoryLasso(solver="fista", max_iter=150),
                                         param_grid=PATH_GRID, criterion="kfold",
                                         search="grid", n_iter_no_change=5, random_state=0)

    with policy_context(stage_min_flops=0, stage_min_flops_linear=0, fit_beside=beside):
        with policy_context(defer_full_fit=True, stack_grid=False), record() as paths:
            lazy = make().fit(X, y)
        eager, _ = _fit(make, X, y, True)
    counts = {"deferred": paths.count("defer_full_fit"), "run": paths.count("deferred_full_fit")}
    staged = paths.details("kfold_stages")
    assert staged and all(d["deferred"] != beside for d in staged)
    _assert_same(lazy, eager, X)
    n_fitted = int(np.sum(~np.ma.getmaskarray(lazy.cv_results_["n_iter"])))
    expected = {"deferred": 0, "run": 0} if beside else {"deferred": n_fitted, "run": 1}
    assert counts == expected and n_fitted > 1


def test_no_deferral_where_the_full_fit_has_its_own_estimates_or_stages():
    """The full fit runs at once where it reports an estimate of its own
    (loo_path_ in cv_results_, switched on against the class default) or
    takes a given step size; nor where the caller does not resolve it
    (staged paths: test_staged_paths_defer_their_full_fits_unless_beside)."""
    X, y = _wide()
    for est in (TrajectoryLasso(max_iter=30, estimate_loo=True),
                TrajectoryLasso(max_iter=30, step_size=0.01)):
        with record() as paths:
            search = TrajectoryEarlyStoppingCV(est, param_grid={"alpha": [0.3, 0.1]},
                                               criterion="kfold", search="grid",
                                               random_state=0).fit(X, y)
        assert "defer_full_fit" not in paths and "deferred_full_fit" not in paths
        assert paths.count("stacked_folds") == 2
        assert not isinstance(search.estimator_, DeferredFull)
    path = KFoldPath(TrajectoryLasso(max_iter=30, estimate_risk=False), X, y, {}, [], "time",
                     "auto", current_policies(), defer_full=True)
    assert path.defers_full(True) and not path.defers_full(False)
    assert not KFoldPath(TrajectoryLasso(max_iter=30, estimate_risk=False), X, y, {}, [],
                         "time", "auto", current_policies()).defers_full(True)
    with policy_context(defer_full_fit=False):
        assert not KFoldPath(TrajectoryLasso(max_iter=30, estimate_risk=False), X, y, {}, [],
                             "time", "auto", current_policies(),
                             defer_full=True).defers_full(True)
