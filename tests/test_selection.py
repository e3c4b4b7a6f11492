"""Tests of TrajectoryEarlyStoppingCV.

The reference for every selection is brute force: the same clones fitted one
by one (same ``random_state``, hence the same estimates), and the joint
argmin of their paths taken by hand.
"""


import warnings
from functools import partial
from types import SimpleNamespace

import joblib
import numpy as np
import pytest
import sklearn
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context as sk_config_context
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.exceptions import DataConversionWarning, NotFittedError, UnsetMetadataPassedError
from sklearn.linear_model import Lasso
from sklearn.model_selection import GridSearchCV, KFold, ParameterGrid, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import Bunch
from sklearn_versions import parametrize_with_checks

import skacv.model_selection._criteria as criteria_module
import skacv.model_selection._path_search as path_search_module
import skacv.model_selection._selection as selection_module
import skacv.model_selection._stages as stages_module
from skacv import (
    IterativeRidge,
    TrajectoryEarlyStoppingCV,
    TrajectoryHuberRegressor,
    TrajectoryLasso,
    risk_alpha_path,
)
from skacv._policy import current_policies, get_policy
from skacv._statistics import get_statistics
from skacv._trace import record
from skacv.exceptions import SelectionBoundaryWarning
from skacv.model_selection._selection import set_iterate
from skacv.utils._validation import same_param


def _pinned(estimator, search_class=TrajectoryEarlyStoppingCV, **kwargs):
    """TrajectoryEarlyStoppingCV (or ``search_class``) with the criterion and
    the search these tests pin ("risk", "grid") unless given: the "auto"
    choices have their own tests."""
    kwargs.setdefault("criterion", "risk")
    kwargs.setdefault("search", "grid")
    return search_class(estimator, **kwargs)


def _data(n=120, p=150, s=15, sigma=1.0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:s] = 0.5
    y = X @ beta + sigma * rng.standard_normal(n) + 3.0
    return X, y


class _LooFromTruth(IterativeRidge):
    """Test double: a trajectory estimator whose ``loo_path_`` is a known
    function of the iteration, ``(t - target)^2 + offset``, set only when
    ``estimate_loo=True``; ``flat=True`` makes it constant (ties)."""

    def __init__(self, alpha=1.0, *, max_iter=30, warm_start=False, estimate_risk=False,
                 estimate_loo=False, target=7, offset=0.0, flat=False):
        super().__init__(alpha, max_iter=max_iter, warm_start=warm_start,
                         estimate_risk=estimate_risk, estimate_loo=estimate_loo)
        self.target = target
        self.offset = offset
        self.flat = flat

    def _set_estimates(self, design, datafit, target, iteration, X, y, fitted, risk_plan=None):
        for name in ("risk_path_", "loo_path_"):
            if hasattr(self, name):
                delattr(self, name)
        t = np.arange(self.n_iter_ + 1, dtype=float)
        if self.estimate_loo:
            self.loo_path_ = (np.zeros_like(t) if self.flat else (t - self.target) ** 2) \
                + self.offset


class _CountingLasso(TrajectoryLasso):
    """TrajectoryLasso counting its fits (to check that nothing is refitted)."""

    n_fits = 0

    def fit(self, X, y, sample_weight=None):
        type(self).n_fits += 1
        return super().fit(X, y, sample_weight=sample_weight)


GRID = {"alpha": [0.3, 0.1, 0.03], "solver": ["ista", "fista"]}


def _brute_force(estimator, grid, X, y, attr="risk_path_", **fit_params):
    fits = []
    for params in ([{}] if grid is None else ParameterGrid(grid)):
        est = clone(estimator).set_params(**params).fit(X, y, **fit_params)
        fits.append((params, est))
    stacked = [getattr(est, attr) for _, est in fits]
    i = int(np.argmin([p.min() for p in stacked]))
    return fits, i, int(np.argmin(stacked[i]))


def test_selects_joint_argmin_of_separate_fits():
    X, y = _data()
    base = TrajectoryLasso(max_iter=40, random_state=0)
    search = _pinned(base, param_grid=GRID, n_iter_no_change=None).fit(X, y)
    fits, i, t = _brute_force(base, GRID, X, y)
    params, ref = fits[i]
    assert search.best_params_ == params
    assert search.best_iteration_ == t
    assert search.best_index_ == i
    # the same estimates up to the float32 rounding of the probe chains
    # (identical under OpenBLAS's SkylakeX kernels, 1e-7 apart under its
    # Haswell kernels, whose rounding depends on the arrays' alignment, and
    # 2e-7 apart with the oldest NumPy / OpenBLAS; the chains switch to a core
    # diagonalised in float32 here, which takes those 2e-7 to 1.5e-6)
    assert search.best_risk_ == pytest.approx(ref.risk_path_[t], rel=1e-5)
    assert_allclose(search.risk_path_, ref.risk_path_, rtol=1e-5)
    assert_allclose(search.coef_, ref.coef_path_[:, t], rtol=1e-12, atol=1e-14)
    assert search.intercept_ == pytest.approx(ref.intercept_path_[t], rel=1e-12)
    assert_allclose(search.predict(X), X @ ref.coef_path_[:, t] + ref.intercept_path_[t],
                    rtol=1e-10)
    # the chosen iterate is an early-stopped one here, not the last
    assert t < 40
    # cv_results_: one row per grid point, in ParameterGrid order
    res = search.cv_results_
    assert res["params"] == [p for p, _ in fits]
    assert_array_equal(res["param_alpha"], [p["alpha"] for p, _ in fits])
    assert list(res["param_solver"]) == [p["solver"] for p, _ in fits]
    for row, (_, est) in enumerate(fits):  # float32 chains, as above
        assert_allclose(res["risk_path"][row], est.risk_path_, rtol=1e-5)
        assert res["min_risk"][row] == pytest.approx(est.risk_path_.min(), rel=1e-5)
        assert res["best_iteration"][row] == int(np.argmin(est.risk_path_))
        assert res["n_iter"][row] == 40
    assert res["rank_risk"][i] == 1
    assert sorted(res["rank_risk"]) == list(range(1, len(fits) + 1))
    pd = pytest.importorskip("pandas")
    assert pd.DataFrame(res).shape[0] == len(fits)


def test_no_refit_and_full_path_kept():
    X, y = _data()
    _CountingLasso.n_fits = 0
    search = _pinned(_CountingLasso(max_iter=30, random_state=0),
                                       param_grid={"alpha": [0.2, 0.05]},
                                       n_iter_no_change=None).fit(X, y)
    assert _CountingLasso.n_fits == 2
    est = search.estimator_
    assert est.coef_path_.shape == (X.shape[1], 31)
    assert est.risk_path_.shape == (31,)
    t = search.best_iteration_
    assert_allclose(est.predict_path(X)[:, t], search.predict(X), rtol=1e-12)
    assert search.n_features_in_ == X.shape[1]


@pytest.mark.parametrize("target, patience, expected_stop", [
    (7, 10, 20),    # first stage 2 * 10 = 20: the minimum at 7 is 13 back -> stop
    (25, 10, 35),   # 20 (still improving) -> 20 + max(10, 5) = 30 (best 25,
                    # 5 back) -> max(25 + 10, 30 + 3) = 35 (10 back) -> stop
    (45, 10, 60),   # 20 -> 30 -> 45 -> 60 = max_iter: the minimum 15 back -> stop
    (55, 10, 67),   # 20 -> 30 -> 45 -> 60 = max_iter with the minimum 5 back, within
                    # n_iter_no_change: past max_iter to max(55 + 10, 60 + 7) = 67 -> stop
    (3, 1, 4),      # 2 (improving) -> 3 (improving) -> 4: the minimum at 3 is 1 back
])
def test_n_iter_no_change_stops_each_path_on_its_estimate(target, patience, expected_stop,
                                                           speed_policy, statistical_policy):
    speed_policy(stage_min_flops=0)  # stage even tiny paths
    statistical_policy(relative_patience=0)  # n_iter_no_change only
    X, y = _data()
    search = _pinned(
        _LooFromTruth(max_iter=60, target=target), criterion="loo",
        n_iter_no_change=patience).fit(X, y)
    est = search.estimator_
    assert search.best_iteration_ == min(target, 60)
    assert est.n_iter_ == expected_stop
    assert est.coef_path_.shape[1] == expected_stop + 1
    assert search.cv_results_["n_iter"][0] == expected_stop
    # the staged path is the cold path's prefix, and warm_start is restored
    cold = clone(est).set_params(max_iter=expected_stop, warm_start=False).fit(X, y)
    assert_allclose(est.coef_path_, cold.coef_path_, rtol=1e-12, atol=1e-14)
    assert est.warm_start is False


def _rose_before(path, best, rtol):
    """Whether ``path`` rose by more than ``rtol`` above its running minimum
    before ``best`` (the ripple rule, by hand)."""
    return any(path[i] > min(path[:i]) * (1 + rtol) for i in range(1, best + 1))


@pytest.mark.parametrize("relative, ripple", [(0.0, 0.0), (0.5, 0.5), (0.5, 2.0)])
def test_n_iter_no_change_on_a_real_risk_path(relative, ripple, statistical_policy,
                                              speed_policy):
    """Early-stopped search == the rule applied by hand to the cold full path:
    the staged paths (warm starts, continued chains) are prefixes of it; the
    patience is at least ``relative_patience`` times the best iteration, or
    ``ripple_patience`` times it where the estimate rose on its way down
    (FISTA's ripple)."""
    statistical_policy(relative_patience=relative, ripple_patience=ripple)
    rtol = get_statistics().ripple_rtol
    speed_policy(stage_min_flops_chains=0)  # stages, not one go, at this size
    X, y = _data(n=100, p=160)
    base = TrajectoryLasso(alpha=0.02, solver="fista", max_iter=80, random_state=0,
                           risk_options={"chain_dtype": "float64"})
    full = clone(base).fit(X, y).risk_path_
    growth = get_policy().stage_growth_chains
    assert stages_module.stage_growth(base, "risk_path_", get_policy()) == growth
    for patience in (3, 10):
        search = _pinned(base, n_iter_no_change=patience).fit(X, y)
        n = 2 * patience  # the documented stage schedule, replayed
        while True:
            best = int(np.argmin(full[: n + 1]))
            factor = ripple if _rose_before(full, best, rtol) else relative
            wait = max(patience, int(factor * best))
            if n >= 80 or n - best >= wait:
                break
            if best == n:  # still improving: grow by the chains' growth (at least patience)
                n = min(80, n + max(patience, int(growth * n)))
            else:  # first length where the rule can hold (at least n // 8 more)
                n = min(80, max(best + wait, n + max(1, n // 8)))
        assert search.estimator_.n_iter_ == n
        assert search.best_iteration_ == best
        assert_allclose(search.risk_path_, full[: n + 1], rtol=1e-10)
        assert n - best >= wait or n == 80
        assert n - best >= int(factor * best) or n == 80
    # without the ripple's longer patience the first rule that can hold stops
    # short of the whole path here (FISTA's estimate ripples on this design)
    assert (search.estimator_.n_iter_ < 80) is (ripple == relative)


def test_stages_of_the_chains_grow_faster(speed_policy):
    # a stage of risk_path_ restarts the Jacobian chains (a fixed cost of
    # several steps): those paths grow by stage_growth_chains while they
    # improve, the others (folds, leave-one-out, a linear method's spectral
    # risk, continued at no fixed cost) by stage_growth; once the minimum
    # lies behind, both go to where the rule can hold
    policy = speed_policy(stage_growth=0.5, stage_growth_chains=1.0)
    stats = get_statistics()
    lasso, ridge = TrajectoryLasso(alpha=0.1), IterativeRidge(alpha=1.0)
    assert stages_module.stage_growth(lasso, "risk_path_", policy) == 1.0
    assert stages_module.stage_growth(lasso, "loo_path_", policy) == 0.5
    assert stages_module.stage_growth(ridge, "risk_path_", policy) == 0.5
    assert [stages_module.next_stage(40, 40, 10, g, stats) for g in (0.5, 1.0)] == [60, 80]
    assert [stages_module.next_stage(12, 12, 10, g, stats) for g in (0.5, 1.0)] == [22, 24]
    assert [stages_module.next_stage(80, 50, 10, g, stats) for g in (0.5, 1.0)] == [90, 90]
    # the one-go path is cut where the same stages would stop
    path = np.r_[np.linspace(2.0, 1.0, 51), np.linspace(1.0, 1.5, 150)[1:]]
    assert stages_module.stop_length(path, 10, 0.5, stats) == 75  # 20, 30, 45, 67, 75
    assert stages_module.stop_length(path, 10, 1.0, stats) == 80  # 20, 40, 80


def test_paths_grown_for_their_limit_grow_from_their_end(statistical_policy):
    # past max_iter, a path grown because its own limit lies far below its
    # minimum grows geometrically from its end, whatever the ripple that
    # left its minimum a few steps back (each stage of a risk path reads
    # its whole estimate again), and to the cap when at most half a step
    # would remain; otherwise the stages' patience steps, as before (the
    # patience after a ripple: test_a_ripple_before_the_minimum_...)
    statistical_policy(ripple_patience=get_statistics().relative_patience)
    stats = get_statistics()
    t = np.arange(801.0)
    ripple = 1.0 + 1.0 / (1.0 + t / 50) + 0.002 * np.sin(t / 3.0)  # falling, FISTA-like ripple
    best = stages_module.argmin_first(ripple, stats.tie_rtol)
    assert 780 < best < 800
    grown = partial(stages_module.grown_length, max_iter=200, cap=2000, n_iter_no_change=10,
                    statistics=stats)
    far = 0.5
    assert grown(ripple[:401], 400, growth=1.0, limit=far) == 800
    assert grown(ripple, 800, growth=1.0, limit=far) == 2000  # 1600 would leave 400
    assert grown(ripple, 800, growth=0.5, limit=far) == 1200
    patience_step = stages_module.next_stage(800, best, 10, 1.0, stats)
    assert 800 < patience_step < 1600
    near = ripple[best] * (1.0 - 0.5 * stats.limit_rtol)
    for limit, own in ((far, False), (near, True), (None, True)):  # leave-one-out's; within
        assert grown(ripple, 800, growth=1.0, limit=limit, own_limit=own) == patience_step
    assert grown(ripple[:101], 100, growth=1.0, limit=far) == 200  # within max_iter first
    # still falling at its end without a limit: geometric, and the last short step skipped
    falling = 1.0 + 1.0 / (1.0 + t / 50)
    assert grown(falling[:401], 400, growth=1.0) == 800
    assert grown(falling, 800, growth=1.0) == 2000
    assert grown(falling, 800, growth=0.5) == 1200


def test_set_iterate_writes_the_path_column():
    X, y = _data()
    est = TrajectoryLasso(alpha=0.1, max_iter=20, estimate_risk=False).fit(X, y)
    set_iterate(est, 7)
    assert_array_equal(est.coef_, est.coef_path_[:, 7])
    assert est.intercept_ == est.intercept_path_[7]
    assert_allclose(est.predict(X), est.predict_path(X)[:, 7], rtol=1e-12)
    with pytest.raises(ValueError, match="iteration must be in"):
        set_iterate(est, 21)


def test_loo_criterion_reads_loo_path_and_switches_it_on():
    X, y = _data()
    grid = {"target": [12, 5, 9], "offset": [1.0, 0.5]}
    search = _pinned(_LooFromTruth(), criterion="loo", param_grid=grid,
                                       n_iter_no_change=None)
    search.fit(X, y)
    # estimate_loo was False in the prototype: the clones had it switched on
    assert search.best_params_ == {"offset": 0.5, "target": 12}
    assert search.best_iteration_ == 12
    assert search.best_risk_ == 0.5
    assert not hasattr(search, "risk_path_")
    assert_allclose(search.loo_path_, (np.arange(31) - 12.0) ** 2 + 0.5)
    assert "min_loo" in search.cv_results_ and "loo_path" in search.cv_results_
    # the risk criterion needs risk_path_, which this estimator never sets
    with pytest.raises(ValueError, match="reads risk_path_ but _LooFromTruth did not set it"):
        _pinned(_LooFromTruth(), criterion="risk").fit(X, y)


def test_ties_go_to_the_first_grid_point_and_earliest_iteration():
    X, y = _data()
    search = _pinned(_LooFromTruth(flat=True), criterion="loo",
                                       param_grid={"alpha": [3.0, 1.0, 0.1]}).fit(X, y)
    assert search.best_params_ == {"alpha": 3.0}
    assert search.best_iteration_ == 0
    # a difference far above rounding is not a tie
    search = _pinned(_LooFromTruth(flat=True), criterion="loo",
                                       param_grid={"offset": [1e-6, 0.0]}).fit(X, y)
    assert search.best_params_ == {"offset": 0.0}


def test_real_loo_criterion():
    pytest.importorskip("skacv.estimates.loo._iacv")
    X, y = _data()
    base = TrajectoryLasso(max_iter=30, random_state=0, estimate_risk=False)
    search = _pinned(base, criterion="loo",
                                       param_grid={"alpha": [0.2, 0.05]}).fit(X, y)
    fits, i, t = _brute_force(base.set_params(estimate_loo=True), {"alpha": [0.2, 0.05]}, X, y,
                              attr="loo_path_")
    assert (search.best_params_, search.best_iteration_) == (fits[i][0], t)
    # the 30-step fit's path is the search's prefix; the search grew it past
    # max_iter only if its minimum lay among the last n_iter_no_change (10) iterates
    T = fits[i][1].loo_path_.size - 1
    assert_allclose(search.loo_path_[:T + 1], fits[i][1].loo_path_, rtol=1e-10)
    assert (search.loo_path_.size == T + 1) == (T - t >= 10)


def test_sample_weight_reaches_the_fit_and_the_estimates():
    X, y = _data(n=60, p=40)
    w = np.random.default_rng(3).integers(0, 4, X.shape[0])
    base = TrajectoryLasso(max_iter=40, n_probes=None)
    grid = {"alpha": [0.2, 0.05, 0.01]}
    weighted = _pinned(base, param_grid=grid).fit(X, y, sample_weight=w)
    repeated = _pinned(base, param_grid=grid).fit(
        np.repeat(X, w, axis=0), np.repeat(y, w))
    unweighted = _pinned(base, param_grid=grid).fit(X, y)
    # exact traces: weights == repeated rows, for the estimates and the choice
    assert_allclose(weighted.risk_path_, repeated.risk_path_, rtol=1e-9)
    assert weighted.best_params_ == repeated.best_params_
    assert weighted.best_iteration_ == repeated.best_iteration_
    assert_allclose(weighted.predict(X), repeated.predict(X), rtol=1e-8)
    # and the weights did change the estimates (on the iterates both paths have:
    # a path still falling at max_iter grows past it)
    m = min(weighted.risk_path_.size, unweighted.risk_path_.size)
    assert np.max(np.abs(weighted.risk_path_[:m] / unweighted.risk_path_[:m] - 1)) > 0.05


def test_metadata_routing():
    X, y = _data(n=60, p=40)
    w = np.random.default_rng(3).integers(1, 4, X.shape[0]).astype(float)
    base = TrajectoryLasso(alpha=0.05, max_iter=30, n_probes=None)
    direct = _pinned(base).fit(X, y, sample_weight=w)
    direct_score = direct.score(X, y, sample_weight=w)
    with sk_config_context(enable_metadata_routing=True):
        routed = _pinned(
            clone(base).set_fit_request(sample_weight=True).set_score_request(sample_weight=True)
        ).fit(X, y, sample_weight=w)
        assert_allclose(routed.risk_path_, direct.risk_path_, rtol=1e-12)
        assert routed.score(X, y, sample_weight=w) == pytest.approx(direct_score)
        with pytest.raises(UnsetMetadataPassedError):
            _pinned(clone(base)).fit(X, y, sample_weight=w)
        # routed through GridSearchCV (fit and score requested)
        inner = _pinned(clone(base).set_fit_request(sample_weight=True)
                                          .set_score_request(sample_weight=True))
        if hasattr(inner, "set_score_request"):  # scikit-learn < 1.7 asks the router too
            inner.set_score_request(sample_weight=True)
        gs = GridSearchCV(inner, {"criterion": ["risk"]}, cv=3).fit(X, y, sample_weight=w)
        assert np.isfinite(gs.best_score_)
    with pytest.raises(ValueError, match="enable_metadata_routing"):
        _pinned(base).fit(X, y, other=w)


def test_groups_reach_the_folds():
    """``fit(X, y, groups=...)`` hands the groups to ``cv.split``, as
    ``GridSearchCV.fit`` does, with metadata routing or without (it was
    refused either way, so that GroupKFold could not be used): the search
    equals the one given GroupKFold's folds as a list."""
    from sklearn.model_selection import GroupKFold

    X, y = _data(n=90, p=40)
    groups = np.repeat(np.arange(9), 10)
    make = lambda cv: TrajectoryEarlyStoppingCV(  # noqa: E731
        TrajectoryLasso(max_iter=30), criterion="kfold", cv=cv,
        param_grid={"alpha": [0.3, 0.1, 0.03, 0.01, 0.003]}, random_state=0)
    ref = make(list(GroupKFold(3).split(X, y, groups))).fit(X, y)
    with pytest.raises(ValueError, match="groups"):  # GroupKFold needs them
        make(GroupKFold(3)).fit(X, y)
    for routing in (False, True):
        with sk_config_context(enable_metadata_routing=routing):
            got = make(GroupKFold(3)).fit(X, y, groups=groups)
        assert got.n_splits_ == 3
        assert (got.best_params_, got.best_iteration_) == (ref.best_params_,
                                                           ref.best_iteration_)
        assert_array_equal(got.kfold_path_, ref.kfold_path_)


@pytest.mark.parametrize("backend", ["loky", "threading"])
def test_parallel_backends_give_the_sequential_result(backend):
    X, y = _data()
    base = TrajectoryLasso(max_iter=30, random_state=0, risk_options={"chain_dtype": "float64"})
    grid = {"alpha": [0.3, 0.1, 0.03]}
    seq = _pinned(base, param_grid=grid).fit(X, y)
    with joblib.parallel_backend(backend, n_jobs=2):
        par = _pinned(base, param_grid=grid).fit(X, y)
    explicit = _pinned(base, param_grid=grid, n_jobs=2).fit(X, y)
    for other in (par, explicit):
        assert (other.best_params_, other.best_iteration_) == (seq.best_params_,
                                                              seq.best_iteration_)
        for a, b in zip(other.cv_results_["risk_path"], seq.cv_results_["risk_path"],
                        strict=True):
            # workers use fewer BLAS threads: rounding-level differences only
            assert_allclose(a, b, rtol=1e-10)
        assert_allclose(other.coef_, seq.coef_, rtol=1e-10, atol=1e-14)


def _configurations(_):
    import sklearn

    from skacv import get_config
    return sklearn.get_config()["working_memory"], get_config()["path_memory_limit"]


@pytest.mark.parametrize("backend", ["loky", "threading"])
def test_workers_run_under_the_callers_configurations(backend):
    """skacv.utils._parallel.delayed carries the caller's scikit-learn
    configuration (metadata routing, working memory, ...) as well as
    skacv's into joblib workers (other processes or threads, which start
    from the defaults), captured in the caller's thread."""
    import sklearn

    from skacv import config_context
    from skacv.utils import _parallel

    with (sklearn.config_context(working_memory=123), config_context(path_memory_limit=77),
          joblib.parallel_backend(backend, n_jobs=2)):
        config, theirs = _parallel.get_config(), sklearn.get_config()
        jobs = [_parallel.delayed(_configurations, config, None, theirs)(i) for i in range(4)]
        implicit = [_parallel.delayed(_configurations)(i) for i in range(4)]
    # run outside the contexts: only what the calls carry counts
    with joblib.parallel_backend(backend, n_jobs=2):
        assert _parallel.parallel(2)(jobs) == [(123, 77.0)] * 4
        assert _parallel.parallel(2)(implicit) == [(123, 77.0)] * 4
    assert sklearn.get_config()["working_memory"] != 123


def _blas_threads_now(_):
    from skacv.utils._parallel import blas_threads
    return blas_threads()


def test_workers_keep_the_callers_blas_limit():
    """A worker's BLAS thread limit never exceeds the caller's: with one
    thread set by the caller, a sequential search's candidates (one worker,
    no limit of their own) and every worker of a parallel one run on one
    thread (``cores // workers`` is the most a worker gets)."""
    from threadpoolctl import threadpool_limits

    from skacv.utils import _parallel

    with threadpool_limits(limits=1, user_api="blas"):
        assert _parallel.blas_threads_per_worker(1) is None
        for n_jobs in (1, 2, -1):
            threads = _parallel.blas_threads_per_worker(n_jobs)
            assert threads in (None, 1)
            jobs = [_parallel.delayed(_blas_threads_now, None, threads)(i) for i in range(2)]
            assert _parallel.parallel(1)(jobs) == [1, 1]


def test_pipeline_grid_search_and_cross_val_score():
    X, y = _data()
    X = X * np.linspace(0.5, 3.0, X.shape[1])
    w = np.random.default_rng(0).integers(1, 3, X.shape[0])
    search = _pinned(TrajectoryLasso(max_iter=30, random_state=0),
                                       param_grid={"alpha": [0.2, 0.05]})
    pipe = make_pipeline(StandardScaler(), search).fit(
        X, y, trajectoryearlystoppingcv__sample_weight=w)
    Xs = StandardScaler().fit_transform(X)
    alone = clone(search).fit(Xs, y, sample_weight=w)
    assert_allclose(pipe.predict(X), alone.predict(Xs), rtol=1e-10)
    scores = cross_val_score(clone(pipe), X, y, cv=KFold(3))
    by_hand = [clone(pipe).fit(X[tr], y[tr]).score(X[te], y[te]) for tr, te in KFold(3).split(X)]
    assert_allclose(scores, by_hand, rtol=1e-12)
    assert scores.shape == (3,) and scores.mean() > 0.2  # better than the mean (R^2 0)
    gs = GridSearchCV(search, {"estimator__max_iter": [5, 30]}, cv=KFold(3)).fit(X, y)
    for i, max_iter in enumerate([5, 30]):
        ref = cross_val_score(clone(search).set_params(estimator__max_iter=max_iter), X, y,
                              cv=KFold(3))
        assert gs.cv_results_["mean_test_score"][i] == pytest.approx(ref.mean(), rel=1e-12)
    assert gs.best_estimator_.best_iteration_ <= gs.best_params_["estimator__max_iter"]


def test_tags_and_delegation():
    reg = _pinned(TrajectoryLasso())
    assert is_regressor(reg) and not is_classifier(reg)
    assert not hasattr(reg, "predict_proba")
    assert not hasattr(reg, "decision_function")
    X, y = _data()
    reg.set_params(estimator__max_iter=10).fit(X, y)
    assert reg.score(X, y) == pytest.approx(reg.estimator_.score(X, y))
    with pytest.raises(AttributeError):
        reg.classes_  # noqa: B018


def test_classifier_delegation():
    logistic = pytest.importorskip("skacv.estimators._logistic")
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=150, n_features=20, random_state=0)
    clf = _pinned(logistic.TrajectoryLogisticRegression(max_iter=30),
                                    criterion="loo").fit(X, y)
    assert is_classifier(clf)
    assert_array_equal(clf.classes_, np.unique(y))
    proba = clf.predict_proba(X)
    assert_allclose(proba, clf.estimator_.predict_proba(X))
    assert_allclose(proba.sum(1), 1.0)
    assert_array_equal(clf.predict(X), clf.classes_[proba.argmax(1)])


def test_bad_parameters():
    X, y = _data()
    with pytest.raises(ValueError, match="param_grid is empty"):
        _pinned(TrajectoryLasso(), param_grid=[]).fit(X, y)
    with pytest.raises(ValueError, match="criterion"):
        _pinned(TrajectoryLasso(), criterion="aic").fit(X, y)
    with pytest.raises(ValueError, match="search='path' searches the penalty only"):
        _pinned(TrajectoryLasso(), search="path",
                                  param_grid={"max_iter": [5]}).fit(X, y)
    # a bare value: scikit-learn's message (GridSearchCV's), not a TypeError of len()
    for search in ("auto", "grid"):
        with pytest.raises(TypeError, match="Single values need to be wrapped in a list"):
            _pinned(TrajectoryLasso(), search=search, param_grid={"alpha": 0.1}).fit(X, y)


def test_estimator_without_a_stored_path_is_refused():
    """EigenPro keeps its epochs in the dual (stores_path() is False): the
    search refuses it before any fit, its default max_iter='auto' as an
    integer one (the default was a ValueError of int('auto') in the
    stages, an integer one a TypeError after the first fit)."""
    eigenpro = pytest.importorskip("skacv.kernel_methods._eigenpro")

    class Counted(eigenpro.EigenProRegressor):
        fits = 0

        def fit(self, X, y, sample_weight=None):
            type(self).fits += 1
            return super().fit(X, y, sample_weight)

    X, y = _data(n=60, p=5)
    assert not Counted().stores_path() and TrajectoryLasso().stores_path()
    for est in (Counted(), Counted(max_iter=2, estimate_risk=True, random_state=0)):
        for kw in ({}, {"criterion": "kfold"}, {"param_grid": {"bandwidth": [1.0, 2.0]}}):
            with pytest.raises(TypeError, match="does not store its path.*max_iter='auto' keeps"):
                _pinned(est, **kw).fit(X, y)
    assert Counted.fits == 0


def _fake_alpha_path(risk_of_alpha):
    """``(calls, Search)``: a test double of TrajectoryEarlyStoppingCV whose
    converged path (the search's ``_alpha_path``) has a known risk curve,
    and the list of the calls it gets."""
    calls = []

    def risk_alpha_path(estimator, X, y, *, alphas=None, sample_weight=None, **kw):
        calls.append(Bunch(alphas=alphas, sample_weight=sample_weight, kw=kw))
        a = np.sort(np.asarray(alphas if alphas is not None else np.geomspace(1, 1e-2, 7)))[::-1]
        return Bunch(alphas=a, coefs=np.zeros((X.shape[1], a.size)), intercepts=np.zeros(a.size),
                     df=np.arange(a.size, dtype=float), risk=risk_of_alpha(a),
                     n_iter=np.full(a.size, 3))

    class Search(TrajectoryEarlyStoppingCV):
        def _alpha_path(self, estimator, X, y, **kwargs):
            return risk_alpha_path(estimator, X, y, **kwargs)

    return calls, Search


@pytest.mark.parametrize("neighbors", [0, 1])
def test_path_search_logic(neighbors):
    X, y = _data()
    alphas = [0.4, 0.2, 0.1, 0.05, 0.025]
    # the fake converged risk is smallest at alpha = 0.1 (row 2), and above
    # every iterate's risk (the trajectory's limit does not compete)
    calls, Search = _fake_alpha_path(lambda a: 1e6 + (np.log(a) - np.log(0.1)) ** 2)
    w = np.ones(X.shape[0])
    base = TrajectoryLasso(max_iter=30, random_state=0)
    search = _pinned(base, search_class=Search, search="path", param_grid={"alpha": alphas},
                                       path_neighbors=neighbors, path_params={"tol": 1e-6})
    search.fit(X, y, sample_weight=w)
    assert calls[0].kw == {"n_alphas_no_change": 3, "tol": 1e-6, "criterion": "risk"}
    assert calls[0].sample_weight is w
    assert_allclose(calls[0].alphas, alphas)
    rows = [2] if neighbors == 0 else [1, 2, 3]
    fits = {r: clone(base).set_params(alpha=alphas[r]).fit(X, y, sample_weight=w) for r in rows}
    r_best = min(rows, key=lambda r: fits[r].risk_path_.min())
    assert search.best_params_ == {"alpha": alphas[r_best]}
    assert search.best_index_ == r_best
    assert search.best_iteration_ == int(np.argmin(fits[r_best].risk_path_))
    res = search.cv_results_
    assert_array_equal(res["trajectory_fitted"], [r in rows for r in range(5)])
    assert_allclose(res["path_risk"], 1e6 + (np.log(alphas) - np.log(0.1)) ** 2)
    assert res["best_iteration"].mask.tolist() == [r not in rows for r in range(5)]
    assert [r for r in range(5) if res["risk_path"][r] is not None] == rows


class _BumpRidge(IterativeRidge):
    """Test double: ``risk_path_`` with an early local minimum (5.9 at
    iteration 15), a bump, then a deeper minimum (0.9 from iteration
    ``deep`` on, 0.89 at ``deep`` itself): the shape of the estimate of FISTA on
    p >> n gene-expression designs."""

    def __init__(self, alpha=1.0, *, max_iter=400, warm_start=False, estimate_risk=True,
                 deep=298):
        super().__init__(alpha, max_iter=max_iter, warm_start=warm_start,
                         estimate_risk=estimate_risk)
        self.deep = deep

    def _set_estimates(self, design, datafit, target, iteration, X, y, fitted, risk_plan=None):
        t = np.arange(self.n_iter_ + 1, dtype=float)
        early = 5.9 + 0.01 * (t - 15) ** 2
        late = 0.9 + 7.0 * np.clip((self.deep - t) / (self.deep - 40), 0, 1)
        self.risk_path_ = np.minimum(early, late)
        if self.deep <= self.n_iter_:
            self.risk_path_[int(self.deep)] = 0.89


def test_stops_waits_for_a_limit_below_the_minimum():
    path = np.array([5.0, 3.0, 2.0, 2.5, 2.6, 2.7, 2.8])
    stats = get_statistics()
    assert stages_module.stops(path, 6, 2, stats) == (True, 2)  # no limit: patience only
    assert stages_module.stops(path, 6, 2, stats, limit=2.5) == (True, 2)  # limit above
    # the limit within limit_rtol of the minimum: nothing more to gain
    assert stages_module.stops(path, 6, 2, stats, limit=2.0 * (1 - 0.5 * stats.limit_rtol))[0]
    # a limit below the minimum: the estimate must still come down to it
    assert stages_module.stops(path, 6, 2, stats, limit=1.0) == (False, 2)
    assert stages_module.stops(path, 3, 2, stats, limit=None) == (False, 2)  # patience first


@pytest.mark.parametrize("staged", [True, False])
def test_the_search_does_not_stop_at_an_early_bump(speed_policy, staged):
    """A path with an early bump and a deeper minimum later: the path search
    knows the trajectory's limit (its alpha's converged score) and does not
    stop at the bump; the grid search (no limit known) stops there."""
    # (a linear method with the spectral risk stages from stage_min_flops_linear)
    speed_policy(stage_min_flops_linear=0 if staged else np.inf)
    X, y = _data(n=60, p=30)
    # the converged scores (the trajectories' limits): 0.9 at the first alpha
    _, Search = _fake_alpha_path(lambda a: np.where(a == a.max(), 0.9, 5.0))
    grid = {"alpha": [1.0, 0.1]}
    search = Search(_BumpRidge(), criterion="risk", param_grid=grid,
                                       random_state=0).fit(X, y)
    assert search.search_ == "path"
    assert search.best_params_ == {"alpha": 1.0}
    assert search.best_iteration_ == 298 and search.best_risk_ == pytest.approx(0.89)
    whole = _BumpRidge(alpha=1.0).fit(X, y).risk_path_
    assert search.best_iteration_ == int(np.argmin(whole))
    # without the limit, the patience alone ends a staged path at the bump; a
    # cheap path fitted whole sees the deeper minimum
    bumped = TrajectoryEarlyStoppingCV(_BumpRidge(alpha=1.0), criterion="risk", search="grid",
                                       random_state=0).fit(X, y)
    if staged:
        assert bumped.best_iteration_ == 15 and bumped.estimator_.n_iter_ < 40
    else:
        assert bumped.best_iteration_ == 298 and bumped.estimator_.n_iter_ == 400


class _RippleRidge(IterativeRidge):
    """Test double: a piecewise-linear ``risk_path_`` through ``knots``, the
    shape of FISTA's K-fold curve on Khan's split 12 (``bench_real_data.py``):
    a ripple on the way down (a local minimum at 150, a rise of 2 %), a first
    minimum at 190, a bump to 332, and a deeper minimum at 550."""

    RIPPLE = ((0, 8.0), (150, 1.0), (170, 1.02), (190, 0.99), (332, 1.05), (550, 0.97),
              (800, 1.0))
    SMOOTH = ((0, 8.0), (190, 0.99), (332, 1.05), (550, 0.97), (800, 1.0))

    def __init__(self, alpha=1.0, *, max_iter=800, warm_start=False, estimate_risk=True,
                 knots=RIPPLE):
        super().__init__(alpha, max_iter=max_iter, warm_start=warm_start,
                         estimate_risk=estimate_risk)
        self.knots = knots

    def _set_estimates(self, design, datafit, target, iteration, X, y, fitted, risk_plan=None):
        t_k, r_k = np.array(self.knots).T
        self.risk_path_ = np.interp(np.arange(self.n_iter_ + 1.0), t_k, r_k)


def test_rippled_reads_a_rise_on_the_way_down():
    rippled = stages_module.rippled
    path = np.array([5.0, 3.0, 3.3, 2.0, 2.5])
    assert rippled(path, 3, 1e-3)  # 3.0 -> 3.3 before the minimum at 3
    assert not rippled(path, 1, 1e-3)  # the rise after the minimum is not a ripple
    assert not rippled(path, 3, 0.2)  # a rise of 10 % under a 20 % tolerance
    assert not rippled(np.array([5.0, 4.0, 4.0, 3.0]), 3, 0.0)  # flat is not a rise
    assert not rippled(np.array([5.0, 4.0]), 1, 0.0)


@pytest.mark.parametrize("knots, ripple_patience, best, stopped_at_bump", [
    (_RippleRidge.RIPPLE, None, 550, False),  # the default: waits past the bump
    (_RippleRidge.RIPPLE, 0.5, 190, True),  # the rule without the ripple's patience
    (_RippleRidge.SMOOTH, None, 190, True),  # no ripple before the minimum: 0.5 x best
])
def test_a_ripple_before_the_minimum_waits_for_the_next_one(speed_policy, statistical_policy,
                                                              knots, ripple_patience, best,
                                                              stopped_at_bump):
    """A path whose estimate rippled on its way down to its minimum (FISTA's
    momentum) waits ``ripple_patience`` (2) times the minimum's iteration and
    finds the deeper minimum after a bump, the whole path's argmin; a path
    that fell smoothly to its minimum waits ``relative_patience`` (0.5)
    times it, and stops at the bump (the same as the rule without the
    ripple's patience)."""
    speed_policy(stage_min_flops_linear=0)  # stages
    if ripple_patience is not None:
        statistical_policy(ripple_patience=ripple_patience)
    X, y = _data(n=60, p=30)
    search = TrajectoryEarlyStoppingCV(_RippleRidge(knots=knots), criterion="risk",
                                       search="grid", random_state=0).fit(X, y)
    assert search.best_iteration_ == best
    n_iter = search.estimator_.n_iter_
    assert (n_iter < 332) is stopped_at_bump
    if not stopped_at_bump:
        whole = _RippleRidge(knots=knots).fit(X, y).risk_path_
        assert best == int(np.argmin(whole))
        assert n_iter >= 190 + 2 * 190  # the patience: 2 x the first minimum
    else:
        assert 190 + 95 <= n_iter < 332


def test_a_ripple_far_above_the_bar_keeps_the_short_patience():
    """A rippled path waits ``ripple_patience`` times its minimum's iteration
    only where that minimum lies within ``ripple_reach`` of the bar (the
    smallest criterion known elsewhere); far above it, the path stops as a
    smooth one does, ``relative_patience`` after its minimum."""
    stats = get_statistics()
    t_k, r_k = np.array(_RippleRidge.RIPPLE).T
    path = np.interp(np.arange(801.0), t_k, r_k)  # rippled, first minimum 0.99 at 190
    reach = stats.ripple_reach
    short = 190 + int(stats.relative_patience * 190)
    long = 190 + int(stats.ripple_patience * 190)
    assert stages_module.rippled(path, 190, stats.ripple_rtol)
    for bar, waits in [(None, True), (np.inf, True), (0.99, True),
                       (0.99 / (1 + 0.5 * reach), True),  # within reach
                       (0.99 / (1 + 2 * reach), False),  # beyond reach: the bump wins
                       (0.5, False)]:
        assert not stages_module.stops(path[:short], short - 1, 10, stats, bar=bar)[0]
        assert stages_module.stops(path[: short + 1], short, 10, stats, bar=bar)[0] is not waits
        assert (stages_module.next_stage(200, 190, 10, 1.0, stats, path[:201], bar)
                == (long if waits else short))
    # the stages replayed on the whole path: stopped at the bump, or past it
    assert stages_module.stop_length(path, 10, 1.0, stats, bar=0.5) < 332
    assert stages_module.stop_length(path, 10, 1.0, stats, bar=0.99) >= long


@pytest.mark.parametrize("bar, best", [(None, 550), (0.98, 550), (0.5, 190)])
def test_fit_stages_reads_the_bar(speed_policy, bar, best):
    """The bar reaches the stages of a fitted path (``fit_stages``): the
    Khan-shaped ripple waits past its bump for the deeper minimum unless its
    minimum is far above the bar."""
    speed_policy(stage_min_flops_linear=0)  # stages
    X, y = _data(n=60, p=30)
    policies = current_policies()
    est, paths, _ = stages_module.fit_stages(
        _RippleRidge(), X, y, {}, ("risk_path_",), "risk_path_", 10, "level", None, policies,
        bar=bar)
    assert int(np.argmin(paths["risk_path_"])) == best
    assert (est.n_iter_ < 332) is (best == 190)


class _BoundaryBumpRidge(IterativeRidge):
    """Test double: ``risk_path_`` ``(t - 60)^2 / 100 + 1`` (its minimum at 60)
    raised by 10 on ``bump`` (a half-open range of iterations): with ``max_iter
    = 40`` and the bump from 38 on, the path's minimum up to ``max_iter`` lies
    at 37, a bump just before ``max_iter``. ``settling``: ``5 + 0.01 (40 /
    (t + 1))^2`` instead, falling onto 5 as ``1 / t^2``."""

    def __init__(self, alpha=1.0, *, max_iter=40, warm_start=False, estimate_risk=True,
                 bump=(38, 46), settling=False):
        super().__init__(alpha, max_iter=max_iter, warm_start=warm_start,
                         estimate_risk=estimate_risk)
        self.bump = bump
        self.settling = settling

    def _set_estimates(self, design, datafit, target, iteration, X, y, fitted, risk_plan=None):
        t = np.arange(self.n_iter_ + 1, dtype=float)
        self.risk_path_ = (5.0 + 0.01 * (40.0 / (t + 1.0)) ** 2 if self.settling
                           else (t - 60.0) ** 2 / 100.0 + 1.0)
        self.risk_path_[(t >= self.bump[0]) & (t < self.bump[1])] += 10.0


@pytest.mark.parametrize("staged", [True, False])
@pytest.mark.parametrize("bump, best", [((38, 46), 60), ((28, 46), 27)])
def test_a_bump_just_before_max_iter_does_not_end_the_path(speed_policy, staged, bump, best):
    """At ``max_iter`` a path whose minimum lies among the last
    ``n_iter_no_change`` (10) iterates still falls there and grows past it
    (then stops as a stage does: its minimum ``patience`` back); a minimum
    further back ends it at ``max_iter``."""
    speed_policy(stage_min_flops_linear=0 if staged else np.inf)
    X, y = _data(n=60, p=30)
    search = TrajectoryEarlyStoppingCV(_BoundaryBumpRidge(bump=bump), criterion="risk",
                                       search="grid", random_state=0).fit(X, y)
    assert search.best_iteration_ == best
    n_iter = search.estimator_.n_iter_
    if best == 60:
        # grown past max_iter until the minimum at 60 lay patience back: the
        # bump before it is a ripple, so ripple_patience times 60
        wait = int(get_statistics().ripple_patience * 60)
        assert 60 + wait <= n_iter <= 60 + 2 * wait
    else:
        assert n_iter == 40
    whole = _BoundaryBumpRidge(bump=bump, max_iter=n_iter).fit(X, y).risk_path_
    assert best == int(np.argmin(whole))


@pytest.mark.parametrize("staged", [True, False])
@pytest.mark.parametrize("settling, limit, best, n_iter", [
    (False, 8.0, 60, (90, 120)),  # far below its limit at max_iter, still falling: grows
    (False, 3.0, 60, (90, 120)),  # above its limit, still falling: grows
    (False, 5.01, 60, (90, 120)),  # within reached_rtol of its limit there, falling through it
    (True, 5.0, None, (40, 40)),  # within reached_rtol, settling onto it: ends
])
def test_a_path_falling_at_max_iter_grows_unless_it_reached_its_limit(speed_policy, staged,
                                                                      settling, limit, best,
                                                                      n_iter):
    """``search="path"``: a trajectory whose estimate still falls at
    ``max_iter`` (40; the bowl: 5.0 there, its minimum 1.0 at 60) grows past
    it whether it lies above or below its alpha's converged estimate (the
    limit), also within ``reached_rtol`` (0.25 %) of it, which it passes through
    at an undiminished pace. A trajectory settling onto the limit ends at
    ``max_iter`` once within ``reached_rtol`` of it (the converged fit is the
    choice). Neither raises a ``SelectionBoundaryWarning`` telling the user
    to raise ``max_iter`` (the search's own rule ended the path)."""
    from skacv.exceptions import SelectionBoundaryWarning

    speed_policy(stage_min_flops_linear=0 if staged else np.inf)
    X, y = _data(n=60, p=30)
    alphas = [1.0, 0.5, 0.25]
    # converged estimates: the same limit at every alpha (the smallest alpha's choice)
    _, Search = _fake_alpha_path(lambda a: limit + 1e-6 * a)
    base = _BoundaryBumpRidge(bump=(0, 0), settling=settling)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search = _pinned(base, search_class=Search, search="path",
                         param_grid={"alpha": alphas}).fit(X, y)
    assert not [w for w in caught if issubclass(w.category, SelectionBoundaryWarning)
                and "max_iter" in str(w.message)]
    assert search.best_iteration_ == best
    assert n_iter[0] <= search.estimator_.n_iter_ <= n_iter[1]
    if best is not None:
        whole = clone(base).set_params(max_iter=search.estimator_.n_iter_).fit(X, y).risk_path_
        assert best == int(np.argmin(whole))


@pytest.mark.parametrize("staged", [False, True])
def test_default_path_search_is_the_joint_argmin(staged):
    """The converged fits choose the smallest alpha, far from the alpha of
    the best trajectory: the default search walks the grid to the joint
    argmin over every alpha's whole trajectory (brute force), where the
    converged-alpha choice (path_neighbors=0) stays at the smallest alpha."""
    X, y = _data()
    alphas = list(np.geomspace(0.5, 0.005, 7))
    # converged scores above every iterate, smallest at the smallest alpha
    _, Search = _fake_alpha_path(lambda a: 1e6 * (1 + np.log(a / a.min()) ** 2))
    base = TrajectoryLasso(max_iter=60, random_state=0)
    stop = {} if staged else {"n_iter_no_change": None}
    search = _pinned(base, search_class=Search, search="path", param_grid={"alpha": alphas},
                     **stop).fit(X, y)
    fits = [clone(base).set_params(alpha=a).fit(X, y) for a in alphas]
    mins = [f.risk_path_.min() for f in fits]
    r = int(np.argmin(mins))
    assert r < len(alphas) - 2  # outside the first window: the walk had to widen
    assert search.best_params_ == {"alpha": alphas[r]} and search.best_index_ == r
    if staged:  # stopped paths: the same choice, within the estimate's 1 %
        assert search.best_risk_ <= 1.01 * mins[r]
    else:
        assert search.best_iteration_ == int(np.argmin(fits[r].risk_path_))
        assert search.best_risk_ == pytest.approx(mins[r], rel=1e-12)
    fitted = search.cv_results_["trajectory_fitted"]
    assert fitted[r] and fitted[r - 1] and fitted[r + 1] and not fitted[:r - 1].any()
    shortcut = _pinned(base, search_class=Search, search="path", param_grid={"alpha": alphas},
                       path_neighbors=0, **stop).fit(X, y)
    assert shortcut.best_index_ == len(alphas) - 1
    assert shortcut.best_risk_ > 1.05 * search.best_risk_


def test_joint_argmin_fits_a_distant_alpha_within_the_early_stopping_gain():
    """Converged scores that are not unimodal in alpha: the walk from the
    converged choice (row 5) stops at a local minimum of the trajectories'
    minima (rows 4-6), while row 2, whose limit is within the early-stopping
    gain seen on row 4 (12.5 %) of the best, holds a lower iterate. The
    search fits it and returns the exhaustive argmin (brute force over every
    row's trajectory and converged fit); rows whose limits no fitted
    trajectory's gain could bring below the best are never fitted."""
    limits = np.array([5.0, 3.0, 2.2, 2.5, 2.4, 2.0, 2.6, 4.0])
    # each row's trajectory: starts high, reaches its minimum at iteration
    # 3 + row, then rises towards its limit
    mins = np.array([4.6, 2.9, 1.9, 2.4, 2.1, 2.05, 2.5, 3.9])
    paths = [np.r_[10.0, np.linspace(8.0, m, 2 + r), np.linspace(m + 0.01, lim, 5)]
             for r, (m, lim) in enumerate(zip(mins, limits, strict=True))]
    n = len(limits)
    scores = SimpleNamespace(score=limits, values=list(np.geomspace(1.0, 0.01, n)),
                             path=Bunch(alphas=np.geomspace(1.0, 0.01, n),
                                        coefs=np.zeros((3, n)), intercepts=np.zeros(n)))
    calls = []

    def fit(rows, row_limits, bar):
        # the bar: the smallest converged score, or a fitted path's minimum below it
        fitted_mins = [paths[r].min() for rows_before in calls for r in rows_before]
        assert bar == min([limits.min(), *fitted_mins])
        calls.append(list(rows))
        assert_array_equal(row_limits, limits[rows])
        return ([{"risk_path_": paths[r]} for r in rows], [0.0] * len(rows),
                [f"estimator {r}" for r in rows])

    choice = path_search_module.joint_argmin(scores, "risk", 1, fit, 1e-12)
    # brute force: every trajectory's iterates and every converged fit
    best_row = int(np.argmin([p.min() for p in paths]))
    assert min(p.min() for p in paths) < limits.min()  # an iterate wins
    assert choice.row == best_row == 2 and choice.converged is None
    assert choice.iteration == int(np.argmin(paths[2]))
    assert choice.estimator == "estimator 2"
    fitted = sorted(r for rows in calls for r in rows)
    assert calls[0] == [4, 5, 6] and 2 in calls[1]
    assert 0 not in fitted and 7 not in fitted and len(fitted) == len(set(fitted))
    # the walk alone (no early-stopping gain above 4 %) keeps the converged
    # choice's row (its trajectory ends at its limit, a tie the iterate wins)
    flat = mins.copy()
    flat[4] = 2.3
    paths[4] = np.r_[10.0, np.linspace(8.0, flat[4], 6), np.linspace(2.31, 2.4, 5)]
    calls.clear()
    walk = path_search_module.joint_argmin(scores, "risk", 1, fit, 1e-12)
    assert walk.row == 5 and calls == [[4, 5, 6]]


class _GainRidge(IterativeRidge):
    """Test double: ``risk_path_`` known by alpha: from 10 down to
    ``MINS[alpha]`` at iteration 5, up to ``LIMITS[alpha]`` (the fake
    converged score of that alpha) at iteration 20, flat after: an
    early-stopping gain of ``1 - MINS / LIMITS``."""

    ALPHAS = tuple(np.geomspace(1.0, 1e-3, 7))
    LIMITS = (5.0, 3.0, 2.03, 2.2, 2.0, 2.1, 2.5)
    # the walk's rows (3, 4, 5) gain 0.5 %; row 2, two steps away, 6.4 %
    MINS = (4.9, 2.9, 1.9, 2.189, 1.99, 2.0895, 2.4)

    def __init__(self, alpha=1.0, *, max_iter=60, warm_start=False, estimate_risk=True):
        super().__init__(alpha, max_iter=max_iter, warm_start=warm_start,
                         estimate_risk=estimate_risk)

    def _set_estimates(self, design, datafit, target, iteration, X, y, fitted, risk_plan=None):
        r = int(np.argmin(np.abs(np.log(np.array(self.ALPHAS) / self.alpha))))
        t = np.arange(self.n_iter_ + 1, dtype=float)
        down = 10.0 + (self.MINS[r] - 10.0) * np.clip(t / 5, 0, 1)
        up = self.MINS[r] + (self.LIMITS[r] - self.MINS[r]) * np.clip((t - 5) / 15, 0, 1)
        self.risk_path_ = np.where(t <= 5, down, up)


@pytest.mark.parametrize("staged", [True, False])
def test_the_walk_fits_an_alpha_whose_gain_it_underestimated(statistical_policy, speed_policy,
                                                               staged):
    """The converged fits choose row 4; its neighbours' trajectories (rows 3
    and 5) gain 0.5 % below their limits, so the largest gain seen (0.5 %)
    cannot take row 2's limit (2.03) below the best iterate (1.99): the walk
    of the former rule stops there, 4.7 % above the exhaustive search
    (every alpha's whole trajectory and converged fit), which finds row 2's
    trajectory at 1.9. The search assumes a gain of at least
    ``walk_gain_df`` times the converged choice's degrees of freedom over
    ``n_samples`` (0.5 * 4 / 60 = 3.3 %): row 2's limit could then fall
    more than ``walk_rtol`` (1 %) below the best, so it is fitted and the
    search returns the exhaustive argmin (the walk goes on from row 2: row 1
    is its neighbour). Rows 0 and 6, out of reach of that gain, are not
    fitted."""
    exhaustive, search, former = walk_searches(_GainRidge, staged, speed_policy,
                                               statistical_policy)
    assert exhaustive.best_risk_ == pytest.approx(1.9)
    # the former rule (no gain assumed beyond the largest seen) skips row 2
    assert_walk_finds(exhaustive, search, former, 2, [False, True, True, True, True, True, False],
                      1.04)


def assert_walk_finds(exhaustive, search, former, row, fitted, margin):
    """The exhaustive and default searches choose iteration 5 of ``row``
    (the default fitting the trajectories ``fitted``); the former rule
    stays at the converged choice (row 4), without fitting ``row``, more than
    ``margin`` times the exhaustive criterion."""
    assert exhaustive.best_index_ == row and exhaustive.best_iteration_ == 5
    assert search.search_ == "path"
    assert search.best_index_ == row and search.best_iteration_ == 5
    assert search.best_risk_ == pytest.approx(exhaustive.best_risk_, rel=1e-12)
    assert_array_equal(search.cv_results_["trajectory_fitted"], fitted)
    assert former.best_index_ == 4 and not former.cv_results_["trajectory_fitted"][row]
    assert former.best_risk_ > margin * exhaustive.best_risk_


def walk_searches(ridge, staged, speed_policy, statistical_policy):
    """``(exhaustive, search, former)`` on ``ridge``'s alpha path, whose
    converged scores are ``ridge.LIMITS`` (one per ``ridge.ALPHAS``; df
    ``0, 1, ...`` by row), 60 x 30 data: the exhaustive search (every alpha's
    whole trajectory and converged fit), the default search (staged paths or
    whole ones) and the same under the former rule (``walk_gain_df=0``)."""
    speed_policy(stage_min_flops_linear=0 if staged else np.inf)
    X, y = _data(n=60, p=30)
    limits = dict(zip(ridge.ALPHAS, ridge.LIMITS, strict=True))
    _, Search = _fake_alpha_path(lambda a: np.array([limits[min(limits, key=lambda b: abs(
        np.log(b / v)))] for v in a]))
    grid = {"alpha": list(ridge.ALPHAS)}
    exhaustive = Search(ridge(), criterion="risk", param_grid=grid, random_state=0,
                        path_neighbors=len(grid["alpha"]), n_iter_no_change=None).fit(X, y)
    stop = {} if staged else {"n_iter_no_change": None}
    search = Search(ridge(), criterion="risk", param_grid=grid, random_state=0,
                    **stop).fit(X, y)
    statistical_policy(walk_gain_df=0.0)
    former = Search(ridge(), criterion="risk", param_grid=grid, random_state=0,
                    **stop).fit(X, y)
    return exhaustive, search, former


def test_kfold_path_search_can_select_the_converged_fit_of_any_alpha():
    """With K-fold CV the alpha path covers the whole grid: the converged fit
    that K-fold CV scores best is selectable although the risk estimate's
    own path would have stopped before it (three alphas past its minimum).
    Trajectories of 3 steps cannot compete, so the choice is that converged
    fit, equal to scikit-learn's Lasso at its alpha."""
    rng = np.random.default_rng(2)
    n, p = 40, 300
    X = rng.standard_normal((n, p)) + 0.7 * rng.standard_normal((n, 1))
    beta = np.zeros(p)
    beta[:15] = rng.standard_normal(15)
    y = X @ beta + 0.5 * rng.standard_normal(n)
    search = TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=3), criterion="kfold",
                                       random_state=0).fit(X, y)
    kfold = np.asarray(search.cv_results_["path_kfold"], dtype=np.float64)
    best = int(np.nanargmin(kfold))
    stopped = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas_no_change=3)
    assert stopped.alphas.shape[0] <= best  # the risk's stop leaves it unsolved
    assert search.search_ == "path" and search.best_index_ == best
    assert search.best_iteration_ is None and search.best_risk_ == kfold[best]
    alpha = search.best_params_["alpha"]
    ref = Lasso(alpha=alpha, tol=1e-12, max_iter=100_000).fit(X, y)

    def objective(coef, intercept):
        return np.sum((y - X @ coef - intercept) ** 2) / (2 * n) + alpha * np.abs(coef).sum()

    # a converged fit: within the path's duality gap (tol=1e-4 of ||y~||^2 / n)
    gap = objective(search.coef_, search.intercept_) - objective(ref.coef_, ref.intercept_)
    assert 0 <= gap <= 1e-4 * np.sum((y - y.mean()) ** 2) / n


def test_path_search_selects_the_converged_fit_when_it_scores_lower():
    X, y = _data()
    alphas = [0.4, 0.2, 0.1, 0.05]
    # converged risks far below any iterate's: the trajectory's limit wins
    _, Search = _fake_alpha_path(lambda a: 1e-3 * (1 + (np.log(a) - np.log(0.2)) ** 2))
    base = TrajectoryLasso(max_iter=20, random_state=0)
    search = _pinned(base, search_class=Search, search="path",
                     param_grid={"alpha": alphas}).fit(X, y)
    traj = clone(base).set_params(alpha=0.2).fit(X, y)
    assert search.best_params_ == {"alpha": 0.2}
    assert search.best_iteration_ is None
    assert search.best_risk_ == pytest.approx(1e-3)
    assert search.best_score_ == -search.best_risk_
    # the fake path's solution (zeros) is the model; the trajectory is kept
    assert_array_equal(search.coef_, np.zeros(X.shape[1]))
    assert_allclose(search.predict(X), np.zeros(X.shape[0]))
    # the 20-step trajectory is the search's prefix (grown past max_iter while
    # its minimum lay among the last n_iter_no_change iterates)
    assert_allclose(search.risk_path_[:21], traj.risk_path_)
    assert search.cv_results_["best_iteration"][1] == int(np.argmin(search.risk_path_))
    # methods that read "the selected iterate" refuse to guess one
    with pytest.raises(ValueError, match="converged fit"):
        search.estimator_.debiased_coef()
    whole = clone(base).set_params(alpha=0.2, max_iter=search.estimator_.n_iter_).fit(X, y)
    assert_allclose(search.estimator_.debiased_coef(iteration=-1),
                    whole.debiased_coef(iteration=-1))


def _equicorrelated(n, p, rho, s=10, seed=0):
    rng = np.random.default_rng(seed)
    X = np.sqrt(1 - rho) * rng.standard_normal((n, p)) + np.sqrt(rho) * rng.standard_normal((n, 1))
    beta = np.zeros(p)
    beta[:s] = 1.0
    return X, X @ beta + rng.standard_normal(n) + 2.0, beta


def test_converged_fit_competes_with_the_iterates_by_the_same_criterion():
    """A trajectory cut off at max_iter loses to its limit, the converged
    fit: its true risk is lower than every iterate's (closed form, Sigma
    known); with room to run, the early-stopped iterate wins."""
    rho = 0.5
    X, y, beta = _equicorrelated(200, 300, rho)
    alpha_max = np.abs((X - X.mean(0)).T @ (y - y.mean())).max() / X.shape[0]
    grid = {"alpha": np.geomspace(alpha_max, alpha_max * 1e-2, 8)}

    def true_risk(coef, intercept):
        h = coef - beta.reshape(-1, *[1] * (np.ndim(coef) - 1))
        return (1 - rho) * (h**2).sum(0) + rho * h.sum(0) ** 2 + (intercept - 2.0) ** 2 + 1

    # (a trajectory still falling at max_iter grows past it, up to max_iter_growth
    # times: 1 step, grown to 10)
    short = TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=1), param_grid=grid,
                                      random_state=0, path_params={"tol": 1e-10})
    with pytest.warns(SelectionBoundaryWarning,
                      match="still improving at its last iteration, 10, grown past max_iter=1"):
        short.fit(X, y)
    assert short.criterion_ == "risk" and short.best_iteration_ is None
    row = short.best_index_
    assert short.best_risk_ == short.cv_results_["path_risk"][row]
    assert short.best_risk_ < np.min(short.risk_path_)
    lasso = Lasso(alpha=short.best_params_["alpha"], tol=1e-12, max_iter=100_000).fit(X, y)
    assert_allclose(short.coef_, lasso.coef_, atol=1e-8)
    assert_allclose(short.intercept_, lasso.intercept_, atol=1e-8)
    est = short.estimator_
    path_truth = true_risk(est.coef_path_, est.intercept_path_)
    assert true_risk(short.coef_, short.intercept_) < 0.5 * path_truth.min()
    long = TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=1000), param_grid=grid,
                                     random_state=0, path_params={"tol": 1e-10}).fit(X, y)
    assert isinstance(long.best_iteration_, int)
    assert long.best_risk_ < long.cv_results_["path_risk"][long.best_index_]
    assert_allclose(long.coef_, long.estimator_.coef_path_[:, long.best_iteration_])


def test_path_search_with_the_real_alpha_path():
    alpha_path = pytest.importorskip("skacv.model_selection._alpha_path")
    X, y = _data(n=100, p=60)
    base = TrajectoryLasso(max_iter=150, random_state=0)
    search = _pinned(base, search="path", path_params={"n_alphas": 8}).fit(X, y)
    # the default stops the path after 3 alphas without a new minimum
    ref = alpha_path.risk_alpha_path(base, X, y, n_alphas=8, n_alphas_no_change=3)
    a = int(np.argmin(ref.risk))
    assert_allclose(search.alpha_path_.alphas, ref.alphas)
    assert search.best_params_ == {"alpha": pytest.approx(ref.alphas[a])}
    traj = clone(base).set_params(alpha=ref.alphas[a]).fit(X, y)
    assert search.best_iteration_ == int(np.argmin(traj.risk_path_))


@parametrize_with_checks([
    TrajectoryEarlyStoppingCV(IterativeRidge(max_iter=30, n_probes=None),
                              param_grid={"alpha": [0.1, 10.0]}),
    # path_params: the converged fit, when selected, solved far below the
    # weight checks' rtol (the default gap tolerance, 1e-4, is a solver's)
    TrajectoryEarlyStoppingCV(TrajectoryLasso(alpha=0.01, max_iter=30, n_probes=None),
                              param_grid={"alpha": [0.01, 0.001]},
                              path_params={"tol": 1e-12}),
    TrajectoryEarlyStoppingCV(IterativeRidge(solver="nesterov", max_iter=30, random_state=0),
                              search="grid"),
    # every default, as a new user writes it (criterion, search and n_probes "auto")
    # (exact traces: Hutchinson probes over weighted and repeated rows differ)
    TrajectoryEarlyStoppingCV(TrajectoryLasso(alpha=0.01, n_probes=None), search="grid"),
    # the literal default: alpha chosen on its automatic grid
    TrajectoryEarlyStoppingCV(TrajectoryLasso()),
])
def test_sklearn_compatible(estimator, check):
    check(estimator)


# --------------------------------------------------------------------- kfold
def _kfold_by_hand(est, X, y, splits, sw=None, classifier=False, alignment="time"):
    """K-fold CV along the path, written out: each fold fitted once; iterate
    ``t`` of the full path is matched with fold ``j``'s point
    ``s = t * step_full / step_j`` ("time", linear interpolation between its
    iterates, each fold fitted as far as that needs) or ``s = t``."""
    off = {k: False for k in ("estimate_risk", "estimate_loo") if k in est.get_params()}
    fit = {} if sw is None else {"sample_weight": sw}
    full = clone(est).set_params(**off).fit(X, y, **fit)
    T = full.coef_path_.shape[-1] - 1
    total, weight = np.zeros(T + 1), 0.0
    for tr, te in splits:
        params = {} if sw is None else {"sample_weight": sw[tr]}
        f = clone(est).set_params(**off).fit(X[tr], y[tr], **params)
        r = full.step_size_ / f.step_size_ if alignment == "time" else 1.0
        if r > 1:
            f = clone(est).set_params(**off, max_iter=int(np.ceil(T * r))).fit(
                X[tr], y[tr], **params)
        if classifier:
            P = f.predict_proba_path(X[te])
            loss = -np.where((y[te] == f.classes_[1])[:, None], np.log(P), np.log1p(-P))
        else:
            loss = (y[te, None] - f.predict_path(X[te])) ** 2
        w = np.ones(len(te)) if sw is None else sw[te]
        e = w @ loss
        for t in range(T + 1):
            s = min(t * r, len(e) - 1)
            i = int(np.floor(s))
            frac = s - i
            total[t] += e[i] if frac == 0 else (1 - frac) * e[i] + frac * e[i + 1]
        weight += w.sum()
    return total / weight


@pytest.mark.parametrize("layout", ["folds", "rotated"])
def test_kfold_criterion_is_kfold_cv_along_the_path(speed_policy, layout):
    from skacv import TrajectoryLogisticRegression

    # the stacked folds' rows in either layout (skacv.model_selection._kfold.FoldDesigns)
    speed_policy(rotated_min_bytes=0 if layout == "rotated" else np.inf)
    speed_policy(rotated_min_features=0)
    X, y = _data(n=100, p=60)
    sw = np.random.default_rng(1).integers(0, 3, 100).astype(float)
    est = TrajectoryLasso(alpha=0.05, max_iter=30)
    # whole paths (n_iter_no_change=None), compared with the folds by hand
    search = TrajectoryEarlyStoppingCV(est,
                                       search="grid",
                                       criterion="kfold", n_iter_no_change=None, cv=4,
                                       random_state=0, fold_dtype="float64")
    search.fit(X, y, sample_weight=sw)
    splits = list(KFold(4, shuffle=True, random_state=search._seed).split(X))
    expected = _kfold_by_hand(est, X, y, splits, sw)
    assert_allclose(search.kfold_path_, expected, rtol=1e-12)
    assert search.best_iteration_ == int(np.argmin(expected))
    assert search.criterion_ == "kfold"
    assert_allclose(search.best_risk_, expected.min(), rtol=1e-12)
    # the selected iterate is that of the fit on all the data, estimates off
    full = clone(est).set_params(estimate_risk=False).fit(X, y, sample_weight=sw)
    assert_allclose(search.coef_, full.coef_path_[:, search.best_iteration_], rtol=1e-12)
    assert not hasattr(search.estimator_, "risk_path_")
    assert_allclose(search.cv_results_["kfold_path"][0], expected, rtol=1e-12)
    # textbook K-fold CV along the path: the folds' iterates at the same index
    by_index = TrajectoryEarlyStoppingCV(est,
                                         search="grid",
                                         criterion="kfold", n_iter_no_change=None, cv=4,
                                         random_state=0, fold_alignment="iteration",
                                         fold_dtype="float64")
    by_index.fit(X, y, sample_weight=sw)
    assert_allclose(by_index.kfold_path_,
                    _kfold_by_hand(est, X, y, splits, sw, alignment="iteration"), rtol=1e-12)
    assert np.abs(by_index.kfold_path_ - expected).max() > 1e-3 * expected.max()
    # mini-batches and step-size schedules: matched by index whatever fold_alignment says
    for other in (TrajectoryLasso(alpha=0.05, max_iter=15, solver="sgd", batch_size=20,
                                  random_state=0),
                  IterativeRidge(alpha=1.0, max_iter=15, step_schedule=1.0 / np.arange(1, 16))):
        paths = [TrajectoryEarlyStoppingCV(other,
                                           search="grid", criterion="kfold", n_iter_no_change=None,
                                           cv=3, fold_alignment=a, random_state=0,
                                           # (read where the folds run as one block)
                                           fold_dtype="float64" if other.solver != "sgd"
                                           else "auto").fit(X, y).kfold_path_
                 for a in ("time", "iteration")]
        assert_array_equal(paths[0], paths[1])
    # a splitter object, and a classifier (log loss, stratified by check_cv)
    splitter = KFold(3)
    s2 = TrajectoryEarlyStoppingCV(est, search="grid", criterion="kfold", n_iter_no_change=None,
                                   cv=splitter, fold_dtype="float64").fit(X, y)
    assert_allclose(s2.kfold_path_, _kfold_by_hand(est, X, y, list(splitter.split(X))),
                    rtol=1e-12)
    yc = (y > np.median(y)).astype(int)
    clf = TrajectoryLogisticRegression(max_iter=20)
    s3 = TrajectoryEarlyStoppingCV(clf, search="grid", criterion="kfold", n_iter_no_change=None,
                                   cv=splitter).fit(X, yc)
    assert_allclose(s3.kfold_path_,
                    _kfold_by_hand(clf, X, yc, list(splitter.split(X)), classifier=True),
                    rtol=1e-12)


def test_auto_chooses_an_estimate_without_refits():
    from skacv import TrajectoryLogisticRegression

    def auto(est, n, p):
        return criteria_module.auto_criterion(est, n, p, 5, current_policies())
    est = TrajectoryLasso(alpha=0.01, max_iter=150)
    # ISTA / FISTA: the memory-matrix risk at every size (no folds, no refit)
    for n, p in ((9, 40), (60, 40), (300, 400), (1000, 500), (2000, 3000)):
        assert auto(est, n, p) == ("risk", None)
        assert auto(clone(est).set_params(solver="ista"), n, p) == ("risk", None)
    # their exact leave-one-out costs a Gram product per tracked run and step
    fits, _ = criteria_module.loo_cost_in_fits(est, 2000, 3000, 100, get_policy())
    assert fits > 4
    # proximal SGD: leave-one-out, every sample while few
    sgd_lasso = TrajectoryLasso(alpha=0.01, max_iter=150, solver="sgd")
    assert auto(sgd_lasso, 60, 40) == ("loo", None)
    # Huber: as many tracked samples as the budget allows, never the folds
    huber = TrajectoryHuberRegressor(max_iter=150)
    crit, sub = auto(huber, 1000, 500)
    assert crit == "loo" and 100 < sub < 500
    for k, fits in ((sub, True), (sub + 2, False)):
        flops = criteria_module.loo_cost_in_fits(huber, 1000, 500, k, get_policy())[1]
        assert (flops <= get_policy().auto_cheap_flops) is fits
    assert auto(huber, 50000, 2000)[0] == "loo"
    # logistic regression (leave-one-out only): a subsample sized by the same
    # budget, not every sample (digits 3-vs-rest, 1797 x 64, 1000 steps)
    crit, sub = auto(TrajectoryLogisticRegression(max_iter=1000), 1797, 64)
    assert crit == "loo" and sub == get_statistics().auto_loo_samples
    assert auto(TrajectoryLogisticRegression(max_iter=1000), 90, 64) == ("loo", None)
    # the linear least-squares solvers: their spectral risk, long paths included
    for ridge in (IterativeRidge(), IterativeRidge(max_iter=150, solver="heavy_ball"),
                  IterativeRidge(solver="eigenpro", max_iter=150)):
        for n, p in ((2000, 3000), (20000, 8), (9, 8)):
            assert auto(ridge, n, p) == ("risk", None)
    X, y = _data(n=300, p=400)
    search = TrajectoryEarlyStoppingCV(TrajectoryLasso(alpha=0.05, max_iter=40), search="grid",
                                       random_state=0).fit(X, y)
    assert search.criterion_ == "risk" and search.search_ == "grid"
    assert hasattr(search, "risk_path_") and not hasattr(search, "kfold_path_")
    assert not hasattr(search, "loo_path_") and not hasattr(search, "n_splits_")
    assert search.best_risk_ == search.risk_path_[search.best_iteration_]
    kfold = TrajectoryEarlyStoppingCV(search.estimator, search="grid", criterion="kfold").fit(X, y)
    assert kfold.n_splits_ == 5
    assert TrajectoryEarlyStoppingCV(search.estimator, search="grid", criterion="kfold",
                                     cv=4).fit(X, y).n_splits_ == 4
    # an estimate the estimator asks for (against its default) is kept beside
    asked = TrajectoryEarlyStoppingCV(TrajectoryLasso(alpha=0.05, max_iter=40,
                                                      estimate_loo=True), search="grid").fit(X, y)
    assert asked.criterion_ == "risk" and "loo_path" in asked.cv_results_
    assert_allclose(asked.loo_path_, TrajectoryLasso(alpha=0.05, max_iter=asked.estimator_.n_iter_,
                                                     estimate_loo=True).fit(X, y).loo_path_)


class _FlaggedLasso(TrajectoryLasso):
    """Test double: ``risk_reliable_`` flags every iterate from the 5th on."""

    def fit(self, X, y, sample_weight=None):
        super().fit(X, y, sample_weight=sample_weight)
        if hasattr(self, "risk_reliable_"):
            self.risk_reliable_ = np.arange(self.risk_reliable_.size) < 5
        return self


def test_auto_falls_back_to_kfold_with_a_warning_when_the_risk_is_flagged():
    """K-fold CV only where the no-refit estimate says it is unreliable
    (risk_reliable_ flags an iterate the choice looked at), with the reason."""
    X, y = _data(n=200, p=60)
    est = TrajectoryLasso(alpha=0.02, max_iter=60, random_state=0)
    flagged = _FlaggedLasso(alpha=0.02, max_iter=60, random_state=0)
    with pytest.warns(selection_module.UnreliableEstimateWarning,
                      match="instead of the risk estimate: risk_reliable_ flags"):
        search = TrajectoryEarlyStoppingCV(flagged, search="grid", random_state=0).fit(X, y)
    assert search.criterion_ == "kfold" and hasattr(search, "kfold_path_")
    ref = TrajectoryEarlyStoppingCV(est, search="grid", criterion="kfold", random_state=0).fit(X, y)
    assert_allclose(search.kfold_path_, ref.kfold_path_, rtol=1e-12)
    assert search.best_iteration_ == ref.best_iteration_
    with warnings.catch_warnings():
        warnings.simplefilter("error", selection_module.UnreliableEstimateWarning)
        assert TrajectoryEarlyStoppingCV(est,
                                         search="grid",
                                         random_state=0).fit(X, y).criterion_ == "risk"


def test_cheap_paths_are_fitted_in_one_go(speed_policy):
    # a fit and estimates of a few milliseconds: no stages (their fixed cost
    # would exceed what stopping saves); the choice is the argmin of the
    # whole path (the estimate's; K-fold's path is cut where the stages
    # would have stopped, a refit to that length)
    X, y = _data(n=60, p=20)
    est = IterativeRidge(alpha=1e-3, max_iter=150, random_state=0)
    for criterion, attr in (("risk", "risk_path_"), ("kfold", "kfold_path_")):
        whole = TrajectoryEarlyStoppingCV(est,
                                          search="grid", criterion=criterion, n_iter_no_change=None)
        whole = getattr(whole.fit(X, y), attr)
        assert whole.shape == (151,)
        search = TrajectoryEarlyStoppingCV(est, search="grid", criterion=criterion).fit(X, y)
        stop = (stages_module.stop_length(whole, 10, get_policy().stage_growth, get_statistics())
                if criterion == "kfold" else 150)
        assert search.estimator_.n_iter_ == stop
        assert_allclose(getattr(search, attr), whole[: stop + 1], rtol=1e-10)
        assert search.best_iteration_ == int(np.argmin(whole[: stop + 1]))
    assert not stages_module.can_stage(est, get_policy(), np.zeros((60, 20)))
    # a linear method's spectral risk costs the same at any length: stages
    # only save fit steps, so they start at STAGE_MIN_FLOPS_LINEAR (ridge GD,
    # 150 steps at 2000 x 1000: 0.33 s in one go, 0.49 s in stages)
    shape = (2000, 1000)  # 4 n p T = 1.2e9 flops
    assert est.get_params()["estimate_risk"]
    assert not stages_module.can_stage(est, get_policy(), np.empty(shape))
    assert stages_module.can_stage(est.set_params(max_iter=1000), get_policy(), np.empty(shape))
    # the Jacobian chains' risk: stages from stage_min_flops_chains of fit on,
    # every path at its default (0: the chains continue from stage to stage)
    lasso = TrajectoryLasso(max_iter=150, estimate_risk=True)
    assert stages_module.can_stage(lasso, get_policy(), np.zeros((60, 20)))
    speed_policy(stage_min_flops_chains=2e9)  # 1.2e9 flops of fit: one go
    assert not stages_module.can_stage(lasso, get_policy(), np.empty(shape))
    assert stages_module.can_stage(lasso.set_params(max_iter=1000), get_policy(), np.empty(shape))
    assert stages_module.can_stage(lasso.set_params(max_iter=150), get_policy(),
                                   np.empty((2000, 3000)))


@pytest.mark.parametrize("n, p, alpha, max_iter", [(200, 300, 0.05, 300), (300, 200, 0.02, 400)])
def test_a_lasso_path_in_one_go_chooses_as_its_stages(n, p, alpha, max_iter, speed_policy):
    """A Lasso path cheap enough to be fitted in one go (whole) gives the
    staged search's choice and risk path on the iterates both have (the
    same probes; the chains' float32 rounding), and its own choice is the
    whole path's argmin."""
    X, y = _data(n=n, p=p)
    est = TrajectoryLasso(alpha=alpha, max_iter=max_iter, random_state=0)
    speed_policy(stage_min_flops_chains=2e9)
    assert not stages_module.can_stage(est, get_policy(), X)
    one = TrajectoryEarlyStoppingCV(est, search="grid").fit(X, y)
    # in one go up to max_iter, or to where the path converged
    assert one.estimator_.n_iter_ <= max_iter
    assert one.best_iteration_ == int(np.argmin(one.risk_path_))
    speed_policy(stage_min_flops_chains=0)
    assert stages_module.can_stage(est, get_policy(), X)
    staged = TrajectoryEarlyStoppingCV(est, search="grid").fit(X, y)
    m = staged.estimator_.n_iter_
    assert_allclose(one.risk_path_[: m + 1], staged.risk_path_, rtol=1e-6)
    if one.best_iteration_ <= m:
        assert staged.best_iteration_ == one.best_iteration_


@pytest.mark.parametrize("beside", [False, True])
def test_kfold_criterion_reports_bad_input_as_the_estimator_does(speed_policy, beside):
    # the full fit validates X first, also when the folds' block is set up
    # beside it (the block's own checks do not speak first)
    speed_policy(stage_min_flops=0, fit_beside=beside)
    X, y = _data(n=200, p=60)
    X[3, 7] = np.nan
    est = TrajectoryLasso(alpha=0.02, max_iter=50)
    with pytest.raises(ValueError) as own:
        clone(est).fit(X, y)
    with pytest.raises(ValueError) as searched:
        TrajectoryEarlyStoppingCV(est, search="grid", criterion="kfold", random_state=0).fit(X, y)
    assert str(searched.value) == str(own.value)
    assert "TrajectoryLasso" in str(own.value)


@pytest.mark.parametrize("beside", [False, True])
@pytest.mark.parametrize("layout", ["folds", "rotated"])
def test_kfold_paths_grow_in_stages(speed_policy, statistical_policy, layout, beside):
    # the full and fold paths grow together (warm starts) and stop by the
    # n_iter_no_change rule on kfold_path_, a prefix of the unstaged one;
    # the full path's stages beside the folds' set-up and passes (a thread
    # of their own, skacv.model_selection._kfold.fit_beside) or after them: the same paths
    speed_policy(stage_min_flops=0, fit_beside=beside)
    statistical_policy(relative_patience=0)  # n_iter_no_change only
    speed_policy(rotated_min_bytes=0 if layout == "rotated" else np.inf)
    speed_policy(rotated_min_features=0)
    X, y = _data(n=200, p=60)  # three stages: 10, 15, 22 iterations
    est = TrajectoryLasso(alpha=0.02, solver="fista", max_iter=120)
    with record() as paths:
        staged = TrajectoryEarlyStoppingCV(est, search="grid", criterion="kfold", cv=4,
                                           n_iter_no_change=5, random_state=0,
                                           fold_dtype="float64").fit(X, y)
    splits = list(KFold(4, shuffle=True, random_state=staged._seed).split(X))
    full = _kfold_by_hand(est, X, y, splits)
    n = staged.estimator_.n_iter_
    assert n < 120
    assert_allclose(staged.kfold_path_, full[: n + 1], rtol=1e-10)
    best = int(np.argmin(full[: n + 1]))
    assert staged.best_iteration_ == best and n - best >= 5
    assert staged.estimator_.warm_start is False
    # the block's set-up beside the first stage, then the second and third stages
    assert paths.count("overlapped") == (3 if beside else 0)
    # the full path is the estimator's own path to where the folds stopped
    alone = clone(est).set_params(max_iter=n, estimate_risk=False).fit(X, y)
    assert_allclose(staged.estimator_.coef_path_, alone.coef_path_, rtol=1e-12, atol=1e-14)


def test_staged_search_debiases_the_last_stage_only(speed_policy):
    """The stages of an early-stopped search each refit the estimates; the
    debiasing statistics (products with X~^T of the whole path) are those of
    the last stage only: computed once, equal to a single fit's to that
    length (they were computed at every stage)."""
    X, y = _data(n=150, p=140, sigma=0.5)  # stages of 20, 30, 45, 67, 100 steps
    speed_policy(stage_min_flops_linear=0)  # stage this size
    est = IterativeRidge(alpha=1e-3, max_iter=400, random_state=0)
    with record() as paths:
        search = _pinned(est, n_iter_no_change=10).fit(X, y)
    fitted = search.estimator_
    n_iter = fitted.n_iter_
    assert n_iter < 400 and paths.count("fit") > 2 and paths.count("debias_statistics") == 1
    assert not hasattr(fitted, "_uq_pending") and not hasattr(fitted, "_defer_uq")
    single = clone(est).set_params(max_iter=n_iter).fit(X, y)
    assert_allclose(fitted.risk_path_, single.risk_path_, rtol=1e-10)
    assert_allclose(fitted.excess_risk_path_, single.excess_risk_path_, rtol=1e-8)
    assert_allclose(fitted.noise_variance_path_, single.noise_variance_path_, rtol=1e-8)
    t = search.best_iteration_
    assert_allclose(fitted.debiased_coef(t), single.debiased_coef(t), rtol=1e-8)


def test_the_stages_check_the_data_once(speed_policy, monkeypatch):
    """The stages of a search refit the data of the first (the plan's
    ``same_data``): one data fingerprint, one finiteness check and one
    validation for the whole search (one a stage before: the later stages,
    given the same objects, take the first one's validated data), and the
    fingerprint kept is the data's, so that a later warm refit of
    ``estimator_`` on other data is still refused."""
    import sklearn.utils.validation as sk_validation

    X, y = _data(n=150, p=140, sigma=0.5)
    speed_policy(stage_min_flops_linear=0)  # stage this size
    finite, check = [], sk_validation._assert_all_finite

    def watched(*args, **kwargs):  # scikit-learn's finiteness check
        finite.append((args[0].shape, sklearn.get_config()["assume_finite"]))
        return check(*args, **kwargs)

    monkeypatch.setattr(sk_validation, "_assert_all_finite", watched)
    with record() as paths:
        search = _pinned(IterativeRidge(alpha=1e-3, max_iter=400, random_state=0),
                         n_iter_no_change=10).fit(X, y)
    fitted = search.estimator_
    assert fitted.n_iter_ < 400 and paths.count("fit") > 2
    assert paths.count("data_fingerprint") == 1
    # checked by the first stage's validation only (its result held by the block)
    assert finite.count((X.shape, False)) == 1 and finite.count((X.shape, True)) == 0
    assert paths.details("validate") == [{"reset": True}]
    assert paths.count("validate_params") == 1  # the later stages' are the first's
    assert "_plan_data" not in fitted.__dict__  # nothing of it outlives the block
    single = IterativeRidge(alpha=1e-3, max_iter=fitted.n_iter_, random_state=0).fit(X, y)
    assert_allclose(fitted.risk_path_, single.risk_path_, rtol=1e-10)
    fitted.set_params(warm_start=True, max_iter=fitted.n_iter_ + 5)
    with pytest.raises(ValueError, match="other training data"):
        fitted.fit(X, y + 1.0)


@pytest.mark.parametrize("criterion", ["risk", "kfold"])
def test_a_staged_search_leaves_no_channel_on_the_estimators(speed_policy, criterion):
    """The stages pass what the fits need by argument (a FitPlan, held by the
    estimator's own ``planned`` block): after an early-stopped search the
    selected estimator has the attributes of a plain fit to the same length
    and the record of its selected iterate, nothing else; the user's
    estimator is untouched, and clone / get_params see parameters only."""
    speed_policy(stage_min_flops=0, stage_min_flops_linear=0)  # stages at this size
    X, y = _data(n=150, p=140, sigma=0.5)
    est = IterativeRidge(alpha=1e-3, max_iter=400, random_state=0)
    params, names = est.get_params(), set(est.__dict__)
    search = _pinned(est, criterion=criterion, n_iter_no_change=10).fit(X, y)
    fitted = search.estimator_
    assert fitted.n_iter_ < 400  # stopped early, in stages
    for channel in ("_horizon", "_defer_uq", "_selected_iterate", "_uq_pending", "_plan",
                    "_plan_data"):
        assert channel not in fitted.__dict__
    plain = clone(fitted).fit(X, y)
    assert plain.n_iter_ == fitted.n_iter_
    assert set(fitted.__dict__) - set(plain.__dict__) == {"_coef_iterate"}
    assert set(plain.__dict__) <= set(fitted.__dict__)
    # the user's estimator: the same parameters and nothing more
    assert set(est.__dict__) == names
    assert all(same_param(v, params[k]) for k, v in est.get_params().items())
    # clone and get_params carry the parameters only (max_iter: where it stopped)
    again = clone(fitted)
    assert set(again.__dict__) == set(fitted.get_params(deep=False))
    assert again.get_params() == {**params, **{k: v for k, v in fitted.get_params().items()
                                               if k in ("max_iter", "estimate_risk",
                                                        "estimate_loo")}}
    assert again.get_params()["max_iter"] == fitted.n_iter_
    # the selected iterate is the default of the debiasing (risk: its estimate kept)
    if criterion == "risk":
        t = search.best_iteration_
        assert t < fitted.n_iter_
        assert_allclose(fitted.debiased_coef(), fitted.debiased_coef(t), rtol=1e-15)
        assert_allclose(again.fit(X, y).debiased_coef(), fitted.debiased_coef(-1),
                        rtol=1e-10)


# ------------------------------------------- one criterion for alpha and iteration
def _disagreeing_design():
    """40 x 30 with a common factor: the converged risk, leave-one-out and
    4-fold CV choose three different alphas of the grid below."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, 30)) + 0.5 * rng.standard_normal((40, 1))
    beta = np.zeros(30)
    beta[:6] = rng.standard_normal(6)
    y = X @ beta + 1.5 * rng.standard_normal(40)
    alphas = [float(a) for a in np.geomspace(0.5, 0.01, 15)[[1, 3, 5, 7, 9, 11]]]
    return X, y, alphas


def test_each_criterion_chooses_alpha_and_iteration_by_its_own_quantity():
    from sklearn.linear_model import Lasso

    X, y, alphas = _disagreeing_design()
    n = X.shape[0]
    cv = KFold(4)
    exact = {"n_alphas_no_change": None, "tol": 1e-10, "max_iter": 100000}
    # each quantity by brute force with scikit-learn's Lasso: the converged
    # risk (Bellec 2020, df = support + intercept), leave-one-out refits,
    # 4-fold refits scored on their held-out rows
    risk, loo, kfold = [], [], []
    for a in alphas:
        def lasso(a=a):
            return Lasso(alpha=a, tol=1e-12, max_iter=100000)
        f = lasso().fit(X, y)
        df = np.count_nonzero(f.coef_) + 1
        risk.append(np.mean((y - f.predict(X)) ** 2) / (1 - df / n) ** 2)
        loo.append(np.mean([(y[i] - lasso().fit(np.delete(X, i, 0), np.delete(y, i))
                             .predict(X[i: i + 1])[0]) ** 2 for i in range(n)]))
        kfold.append(sum(np.sum((y[te] - lasso().fit(X[tr], y[tr]).predict(X[te])) ** 2)
                         for tr, te in cv.split(X)) / n)
    chosen = {}
    for crit, truth in (("risk", risk), ("loo", loo), ("kfold", kfold)):
        # path_neighbors=0: the alpha of the converged fits, then its iteration
        search = TrajectoryEarlyStoppingCV(
            TrajectoryLasso(max_iter=300, random_state=0), criterion=crit,
            cv=cv if crit == "kfold" else 5,  # (read by K-fold only)
            param_grid={"alpha": alphas}, path_params=exact, path_neighbors=0).fit(X, y)
        assert search.search_ == "path" and search.criterion_ == crit
        res = search.cv_results_
        # the alpha: the argmin of the criterion's own quantity along the grid
        if crit != "loo":  # the same quantity: equal values
            assert_allclose(res[f"path_{crit}"], truth, rtol=1e-4)
        assert search.best_params_ == {"alpha": alphas[int(np.argmin(truth))]}
        chosen[crit] = search.best_params_["alpha"]
        # the iteration: the argmin of the same criterion along the trajectory,
        # or its limit, the converged fit, where that scores lower
        path = getattr(search, f"{crit}_path_")
        converged = res[f"path_{crit}"][search.best_index_]
        if converged < path.min():
            assert search.best_iteration_ is None and search.best_risk_ == converged
            lasso = Lasso(alpha=search.best_params_["alpha"], tol=1e-12, max_iter=100000)
            assert_allclose(search.coef_, lasso.fit(X, y).coef_, atol=1e-7)
        else:
            assert search.best_iteration_ == int(np.argmin(path))
            assert search.best_risk_ == path[search.best_iteration_]
        assert len(res["params"]) == len(alphas)
        for other in {"risk", "loo", "kfold"} - {crit}:
            assert f"path_{other}" not in res or other == "risk"
    assert len(set(chosen.values())) == 3  # the three criteria disagree here


@pytest.mark.parametrize("search", ["grid", "path"])
def test_cv_results_has_a_row_per_grid_point_and_best_params_keep_their_type(search):
    X, y = _data(n=60, p=30)
    as_floats = [float(a) for a in np.geomspace(1.0, 1e-3, 12)]
    for grid in (as_floats, [np.float64(a) for a in as_floats]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SelectionBoundaryWarning)
            found = TrajectoryEarlyStoppingCV(
                TrajectoryLasso(max_iter=30, random_state=0), criterion="risk", search=search,
                param_grid={"alpha": grid}).fit(X, y)
        res = found.cv_results_
        assert len(res["params"]) == 12 and sorted(p["alpha"] for p in res["params"]) == \
            sorted(grid)
        assert type(found.best_params_["alpha"]) is type(grid[0])
        assert res["params"][found.best_index_] == found.best_params_
        if search == "path":  # the path stopped early: unscored rows say why
            unscored = np.isnan(res["path_risk"])
            assert unscored.any() and not unscored.all()
            assert all(r.startswith("not solved") for r in res["reason"][unscored])
            assert all(r == "" for r in res["reason"][~unscored])
            assert res["best_iteration"].mask[unscored].all()


@pytest.mark.parametrize("kwargs", [
    {},
    {"param_grid": {"alpha": [0.3, 0.1, 0.03]}, "search": "grid"},
    {"param_grid": {"alpha": [0.3, 0.1, 0.03]}, "search": "path"},
    {"param_grid": {"alpha": [0.3, 0.1, 0.03]}, "search": "path", "criterion": "kfold"},
])
def test_dataframe_feature_names_survive_every_search(kwargs):
    pd = pytest.importorskip("pandas")
    X, y = _data(n=80, p=20)
    df = pd.DataFrame(X, columns=[f"x{j}" for j in range(20)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SelectionBoundaryWarning)
        search = TrajectoryEarlyStoppingCV(TrajectoryLasso(alpha=0.1, max_iter=40,
                                                           random_state=0),
                                           **kwargs).fit(df, y)
    assert_array_equal(search.feature_names_in_, df.columns)
    assert_array_equal(search.estimator_.feature_names_in_, df.columns)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "X has feature names, but ..." warning
        pred = search.predict(df)
    assert_allclose(pred, X @ search.coef_ + search.intercept_, rtol=1e-10)


def test_a_choice_on_the_edge_of_the_search_warns_with_the_fix():
    X, y = _data(n=100, p=60)
    base = TrajectoryLasso(max_iter=300, random_state=0)
    for search in ("grid", "path"):
        # penalties all too large: the smallest one wins
        with pytest.warns(SelectionBoundaryWarning,
                          match=r"alpha=0.5 is the smallest value of the grid.*Widen"):
            TrajectoryEarlyStoppingCV(base, criterion="risk", search=search,
                                      param_grid={"alpha": [2.0, 1.0, 0.5]}).fit(X, y)
    # a path too short: it grows past max_iter while its estimate falls, up to
    # max_iter_growth times max_iter; its last iterate wins at that budget
    # (exact traces: no probe noise can move the minimum off the last step)
    short = TrajectoryLasso(alpha=0.05, max_iter=1, n_probes=None)
    with pytest.warns(SelectionBoundaryWarning,
                      match=r"last one, 10 \(the search grew the path past max_iter=1.*"
                            r"Raise max_iter"):
        found = TrajectoryEarlyStoppingCV(short, search="grid", criterion="risk",
                                          random_state=0).fit(X, y)
    assert found.best_iteration_ == found.estimator_.n_iter_ == 10
    # with room to grow, the path reaches its minimum past max_iter: no warning,
    # and the choice is that of the whole path fitted to the budget
    with warnings.catch_warnings():
        warnings.simplefilter("error", SelectionBoundaryWarning)
        found = TrajectoryEarlyStoppingCV(short.set_params(max_iter=5), search="grid",
                                          criterion="risk", random_state=0).fit(X, y)
    whole = clone(short).set_params(max_iter=50).fit(X, y)
    assert found.best_iteration_ > 5
    assert found.best_iteration_ == int(np.argmin(whole.risk_path_[: found.estimator_.n_iter_ + 1]))
    # an interior choice: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", SelectionBoundaryWarning)
        found = TrajectoryEarlyStoppingCV(base, criterion="risk", search="path",
                                          param_grid={"alpha": [1.0, 0.1, 0.01, 0.001]}).fit(X, y)
    assert found.best_params_["alpha"] in (0.1, 0.01) and found.best_iteration_ < 300


def test_the_automatic_grids_small_end_is_an_edge_where_the_estimate_still_falls():
    """Without param_grid the search warns when it chooses the smallest alpha
    of the automatic grid while the criterion at convergence still falls
    there (eps times the largest was not negligible: on a high
    signal-to-noise design the elastic net kept 8 times the true risk of
    the grid that reaches alpha / 100, as ElasticNetCV does), and not once
    the grid reaches far enough."""
    from sklearn.datasets import make_regression

    from skacv import TrajectoryElasticNet

    X, y, coef = make_regression(1000, 8, noise=5.0, coef=True, random_state=0)

    def true_risk(search):  # X ~ N(0, I): ||b - beta||^2 + b0^2 + sigma^2
        return np.sum((search.coef_ - coef) ** 2) + search.intercept_ ** 2 + 25.0

    with pytest.warns(SelectionBoundaryWarning, match=r"smallest of the automatic grid.*'eps'"):
        short = TrajectoryEarlyStoppingCV(TrajectoryElasticNet(), random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SelectionBoundaryWarning)
        wide = TrajectoryEarlyStoppingCV(TrajectoryElasticNet(), random_state=0,
                                         path_params={"eps": 1e-5}).fit(X, y)
    assert true_risk(short) > 4 * true_risk(wide)


def test_too_few_samples_say_how_many_are_needed():
    X, y = _data(n=60, p=300)
    with pytest.raises(ValueError, match=r"n_samples=4 is too few .* At least \d+ samples"):
        TrajectoryEarlyStoppingCV(TrajectoryLasso(), criterion="risk",
                                  param_grid={"alpha": [0.01, 0.001]}).fit(X[:4], y[:4])
    with pytest.raises(ValueError, match=r"n_samples=4 is too few for K-fold CV with cv=5"):
        TrajectoryEarlyStoppingCV(TrajectoryLasso(),
                                  search="grid", criterion="kfold").fit(X[:4], y[:4])


def test_the_search_takes_one_target():
    X, y = _data(n=60, p=20)
    search = TrajectoryEarlyStoppingCV(TrajectoryLasso(alpha=0.05, max_iter=30),
                                       search="grid", random_state=0)
    flat = clone(search).fit(X, y)
    with pytest.warns(DataConversionWarning):
        column = clone(search).fit(X, y[:, None])
    assert_allclose(column.coef_, flat.coef_)
    assert column.best_iteration_ == flat.best_iteration_
    with pytest.raises(ValueError, match="y has 2 columns.*MultiOutputRegressor"):
        clone(search).fit(X, np.c_[y, y])


def test_the_search_gathers_its_fits_warnings():
    """Every fit's warnings, once per kind, from the user's call; a fit's
    flags without the advice to run the search it runs in."""
    from sklearn.exceptions import ConvergenceWarning

    from skacv.exceptions import UnreliableEstimateWarning

    flag = [True]

    class NoisyLasso(TrajectoryLasso):  # test double: a fit that warns
        def fit(self, X, y, sample_weight=None):
            super().fit(X, y, sample_weight=sample_weight)
            noisy(self)
            return self

    def noisy(self):
        if flag[0] and hasattr(self, "risk_reliable_"):  # what the message says
            self.risk_reliable_ = self.risk_reliable_.copy()
            self.risk_reliable_[3:] = False
        warnings.warn("TrajectoryLasso: risk_path_ is unreliable from iteration 3 on (...). "
                      "The Jacobian amplifies. Use solver='ista' or "
                      "TrajectoryEarlyStoppingCV(criterion='auto').", UnreliableEstimateWarning,
                      stacklevel=3)
        warnings.warn("did not converge", ConvergenceWarning, stacklevel=3)

    X, y = _data(n=60, p=20)
    grid = {"alpha": [0.2, 0.1, 0.05]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _pinned(NoisyLasso(max_iter=20), param_grid=grid, n_iter_no_change=None).fit(X, y)
    kinds = [w.category for w in caught if w.category is not SelectionBoundaryWarning]
    assert sorted(k.__name__ for k in kinds) == ["ConvergenceWarning",
                                                 "UnreliableEstimateWarning"]
    assert all(w.filename == __file__ for w in caught)
    flags = next(str(w.message) for w in caught if w.category is UnreliableEstimateWarning)
    assert "criterion='auto'" not in flags and "never selected" in flags
    assert "(2 more warnings of this kind in this search.)" in flags
    # flags on paths the choice does not lie on (here: flagged nowhere) are
    # not reissued; the fits' other warnings are
    flag[0] = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _pinned(NoisyLasso(max_iter=20), param_grid=grid, n_iter_no_change=None).fit(X, y)
    kinds = [w.category for w in caught if w.category is not SelectionBoundaryWarning]
    assert [k.__name__ for k in kinds] == ["ConvergenceWarning"]
    flag[0] = True
    # the flags of a criterion that is not the risk do not concern the choice
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _pinned(NoisyLasso(max_iter=20, estimate_loo=True), criterion="loo",
                param_grid=grid, n_iter_no_change=None).fit(X, y)
    assert UnreliableEstimateWarning not in [w.category for w in caught]


def _gap_path(X, y, coef_path, alpha, sample_weight=None):
    """Brute-force duality gaps of every iterate (weighted, centred Lasso)."""
    w = np.ones(len(y)) if sample_weight is None else sample_weight
    Xc = X - np.average(X, axis=0, weights=w)
    yc = y - np.average(y, weights=w)
    sw = np.sqrt(w)
    Xt, yt, n_eff = Xc * sw[:, None], yc * sw, w.sum()
    R = yt[:, None] - Xt @ coef_path
    corr = Xt.T @ R / n_eff
    c = np.minimum(1.0, alpha / np.max(np.abs(corr), axis=0))
    primal = (R**2).sum(axis=0) / (2 * n_eff) + alpha * np.abs(coef_path).sum(axis=0)
    dual = (yt @ yt - ((yt[:, None] - c * R) ** 2).sum(axis=0)) / (2 * n_eff)
    return primal - dual, yt @ yt / n_eff


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n, p", [(300, 40), (80, 200)])
def test_a_candidate_path_ends_where_it_has_converged(n, p, weighted, speed_policy,
                                                      statistical_policy):
    """With ``n_iter_no_change``, a Lasso candidate of the search fitted in
    one go ends at the first check (every ``end_check`` steps) where its
    duality gap, computed by brute force on the full path, is at most
    ``converged_tol`` times ``||y~||^2 / n_eff`` (in stages, the default,
    there or before, where the stages stop); its iterates and risk path are
    the full path's prefix; without ``n_iter_no_change`` (the exhaustive
    search) it runs to ``max_iter``. (``converged_tol=1e-4``: the p > n
    path reaches the default's 1e-5 after its 400 steps.)"""
    statistical_policy(converged_tol=1e-4)
    X, y = _data(n=n, p=p)
    sw = np.random.default_rng(1).uniform(0.5, 2.0, n) if weighted else None
    alpha = 0.05
    est = TrajectoryLasso(alpha=alpha, max_iter=400, random_state=0)
    full = clone(est).fit(X, y, sample_weight=sw)
    gaps, scale = _gap_path(X, y, full.coef_path_, alpha, sw)
    checks = np.arange(10, 401, 10)
    converged = checks[gaps[checks] <= get_statistics().converged_tol * scale]
    assert converged.size and converged[0] < 400  # the case under test
    staged = TrajectoryEarlyStoppingCV(est, search="grid", criterion="risk",
                                       random_state=0).fit(X, y, sample_weight=sw)
    assert staged.estimator_.n_iter_ <= converged[0]
    speed_policy(stage_min_flops_chains=2e9)  # in one go at these sizes
    search = TrajectoryEarlyStoppingCV(est, search="grid", criterion="risk",
                                       random_state=0).fit(X, y, sample_weight=sw)
    k = search.estimator_.n_iter_
    assert k == converged[0]
    assert_allclose(search.estimator_.coef_path_, full.coef_path_[:, : k + 1], rtol=0, atol=0)
    # the same probes; the chains' float32 rounding differs with the length
    assert_allclose(search.risk_path_, full.risk_path_[: k + 1], rtol=1e-6)
    whole = TrajectoryEarlyStoppingCV(est, search="grid", criterion="risk",
                                      n_iter_no_change=None, random_state=0).fit(
        X, y, sample_weight=sw)
    assert whole.estimator_.n_iter_ == 400


def test_auto_uses_kfold_below_100_samples_with_more_features():
    """criterion="auto" with fewer than 100 samples and more features than
    samples is K-fold CV along the path (the same choice as
    ``criterion="kfold"``), with one warning from the user's call that says
    why; with 100 samples, fewer features, or criterion="risk" it stays the
    risk estimate."""
    X, y = _data(n=60, p=300)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        auto = TrajectoryEarlyStoppingCV(TrajectoryLasso()).fit(X, y)
    mine = [w for w in caught
            if issubclass(w.category, selection_module.UnreliableEstimateWarning)]
    assert len(mine) == 1 and mine[0].filename == __file__
    assert "K-fold" in str(mine[0].message) and "criterion='risk'" in str(mine[0].message)
    kfold = TrajectoryEarlyStoppingCV(TrajectoryLasso(), criterion="kfold").fit(X, y)
    assert auto.criterion_ == "kfold" and auto.search_ == "path"
    assert auto.best_params_ == kfold.best_params_
    assert auto.best_iteration_ == kfold.best_iteration_
    assert auto.best_risk_ == kfold.best_risk_
    risk = TrajectoryEarlyStoppingCV(TrajectoryLasso(), criterion="risk").fit(X, y)
    assert risk.criterion_ == "risk"
    for n, p in [(100, 300), (60, 40)]:
        X, y = _data(n=n, p=p)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert TrajectoryEarlyStoppingCV(TrajectoryLasso()).fit(X, y).criterion_ == "risk"
    # too few samples for the folds: leave-one-out along the path (criterion="loo"'s
    # choice), with a warning that says why (it was the flagged risk estimate;
    # at 3 samples its far-rows check then refused the fit)
    for n in (3, 4):
        X, y = _data(n=n, p=8)
        with pytest.warns(selection_module.UnreliableEstimateWarning,
                          match="leave-one-out.*needs at least 5"):
            auto = TrajectoryEarlyStoppingCV(TrajectoryLasso()).fit(X, y)
        loo = TrajectoryEarlyStoppingCV(TrajectoryLasso(), criterion="loo").fit(X, y)
        assert auto.criterion_ == "loo"
        assert (auto.best_params_, auto.best_iteration_, auto.best_risk_) == (
            loo.best_params_, loo.best_iteration_, loo.best_risk_)
    # a splitter's own number of folds (it counted as 5): two folds fit 4 samples
    X, y = _data(n=4, p=8)
    for cv in (KFold(2), list(KFold(2).split(X))):
        with pytest.warns(selection_module.UnreliableEstimateWarning, match="K-fold CV"):
            auto = TrajectoryEarlyStoppingCV(TrajectoryLasso(), cv=cv).fit(X, y)
        assert auto.criterion_ == "kfold" and auto.n_splits_ == 2


def test_path_search_advises_its_own_path_params_when_the_alpha_path_stops_short(
        speed_policy):
    """The alpha path's ConvergenceWarning, inside the search, names the
    search's ``path_params`` (its ``max_iter`` and ``tol``), from the user's
    call, once; the alpha of a boundary warning reads as a number (the
    working sets: the homotopy path of a small p > n design is exact)."""
    from sklearn.exceptions import ConvergenceWarning

    speed_policy(path_lars_max_samples=None)

    X, y = _data(n=60, p=100)
    for criterion in ("risk", "kfold"):
        search = _pinned(TrajectoryLasso(max_iter=30), search="path", criterion=criterion,
                         path_params={"n_alphas": 6, "tol": 1e-14, "max_iter": 3})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            search.fit(X, y)
        conv = [w for w in caught if w.category is ConvergenceWarning]
        assert len(conv) == 1 and conv[0].filename == __file__
        message = str(conv[0].message)
        assert "within max_iter=3 steps" in message
        assert "Set 'max_iter': 6 (or a larger 'tol') in the search's path_params" in message
        # not the estimator's max_iter (30), which the user set for the trajectories
        assert "the estimator's own max_iter bounds its trajectories" in message
        assert "Increase" not in message
        assert all("np.float" not in str(w.message) for w in caught)
    # the function itself keeps its own advice
    with pytest.warns(ConvergenceWarning, match="Increase max_iter or tol"):
        risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=5, tol=1e-15, max_iter=2)


def test_boundary_warning_prints_the_grid_values_as_numbers():
    """An integer grid value as an integer, a float (NumPy's included) to six
    digits: never ``np.float64(...)`` nor ``1.23457e+06`` for an integer."""
    from skacv.model_selection._results import warn_boundary

    with pytest.warns(SelectionBoundaryWarning, match=r"n_x=1234567 is the largest value"):
        warn_boundary([{"n_x": [1, 2, 1234567]}], {"n_x": 1234567}, None, None, "risk")
    with pytest.warns(SelectionBoundaryWarning,
                      match=r"alpha=0.003293 is the smallest value.*beyond 0.003293\."):
        grid = list(np.geomspace(0.1, 0.0032930003042688496, 4))
        warn_boundary([{"alpha": grid}], {"alpha": grid[-1]}, None, None, "risk")


def test_flat_edge_reads_each_grid_points_best_against_the_next_value():
    """``flat_edge``: the edge's best criterion (over ``min_*`` and
    ``path_*``) within ``rtol`` of the next value's best silences the grid's
    edge; a larger fall, an unscored neighbour, a choice inside the grid or a
    grid of two parameters never does."""
    from skacv.model_selection._results import flat_edge

    params = [{"alpha": a} for a in (1.0, 0.5, 0.25)]

    def res(mins, paths=None):
        out = {"params": params, "min_risk": np.array(mins, dtype=float)}
        if paths is not None:
            out["path_risk"] = np.array(paths, dtype=float)
        return out

    assert flat_edge(res([10.0, 9.0, 8.95]), "risk", 2, 0.01) == {"alpha"}
    assert flat_edge(res([10.0, 9.0, 8.85]), "risk", 2, 0.01) == set()
    assert flat_edge(res([8.95, 9.0, 10.0]), "risk", 0, 0.01) == {"alpha"}  # the largest
    # the neighbour's best is its converged fit (path search), its trajectory unfitted
    assert flat_edge(res([10.0, np.nan, 8.95], [10.0, 9.0, 9.5]), "risk", 2, 0.01) == {"alpha"}
    assert flat_edge(res([10.0, np.nan, 8.95], [10.0, 9.5, 9.5]), "risk", 2, 0.01) == set()
    assert flat_edge(res([10.0, np.nan, 8.95]), "risk", 2, 0.01) == set()  # not scored
    assert flat_edge(res([10.0, 8.0, 9.0]), "risk", 1, 0.01) == set()  # inside
    two = {"params": [{"alpha": a, "l1_ratio": 0.5} for a in (1.0, 0.5, 0.25)],
           "min_risk": np.array([10.0, 9.0, 8.95])}
    assert flat_edge(two, "risk", 2, 0.01) == set()
    assert flat_edge(res([10.0, 9.0, 8.95]), "kfold", 2, 0.01) == set()  # no such column


def test_a_grid_edge_where_the_criterion_stopped_falling_does_not_warn(statistical_policy):
    """Many samples and few features: the criterion flattens towards least
    squares, and the grid's smallest alpha wins by a hair. Its edge warns only
    where it still falls by ``limit_rtol`` (as the automatic grid's edge)."""
    X, y = _data(n=1000, p=5, s=5, seed=3)
    grid = {"alpha": [0.3, 0.03, 0.003, 0.0003]}
    base = TrajectoryLasso(max_iter=300, random_state=0)
    for search in ("grid", "path"):
        with warnings.catch_warnings():
            warnings.simplefilter("error", SelectionBoundaryWarning)
            found = TrajectoryEarlyStoppingCV(base, criterion="risk", search=search,
                                              param_grid=grid).fit(X, y)
        assert found.best_params_["alpha"] == 0.0003  # on the edge, silently
        best = np.fmin.reduce([np.ma.filled(np.ma.asarray(found.cv_results_[k], dtype=float),
                                            np.nan)
                               for k in ("min_risk", "path_risk") if k in found.cv_results_])
        assert 0 <= best[2] - best[3] <= 0.01 * best[2]  # a fall within limit_rtol
    statistical_policy(limit_rtol=0.0)
    with pytest.warns(SelectionBoundaryWarning, match="smallest value of the grid"):
        TrajectoryEarlyStoppingCV(base, criterion="risk", search="grid",
                                  param_grid=grid).fit(X, y)


def test_best_estimator_is_the_selected_fit_under_grid_search_cvs_name():
    """``best_estimator_`` (GridSearchCV's name) is ``estimator_`` itself:
    absent before ``fit`` (as GridSearchCV's), the fitted clone after, whose
    predictions are the search's."""
    X, y = _data(n=80, p=40)
    search = _pinned(TrajectoryLasso(alpha=0.05, max_iter=30, random_state=0))
    assert not hasattr(search, "best_estimator_")
    search.fit(X, y)
    assert search.best_estimator_ is search.estimator_
    np.testing.assert_array_equal(search.best_estimator_.predict(X), search.predict(X))
    assert "best_estimator_" not in search.get_params()


def test_at_boundary_grows_a_falling_path_without_a_known_limit():
    """``at_boundary`` at ``max_iter`` (40). A path still falling there at an
    undiminished pace (the bowl ``(t - 60)^2 / 100 + 1``, 5.0 at 40, its
    minimum 1.0 at 60) grows without a limit, with an undefined one
    (``inf``: the converged score of an interpolating alpha), with a limit
    more than ``limit_rtol`` away on either side, and within ``reached_rtol``
    of it too: its pace carries it through. A path settling onto its limit
    (``1 / t^2`` or geometrically) ends within ``reached_rtol`` of it, and
    grows while the limit lies more than ``limit_rtol`` below it. A path
    rising at ``max_iter`` (its minimum 20 iterates back) ends, unless its
    own limit lies more than ``limit_rtol`` below that minimum: converging,
    it must still fall to it."""
    from skacv._statistics import get_statistics
    from skacv.model_selection._stages import at_boundary, trend_end

    t = np.arange(41.0)
    bowl = (t - 60.0) ** 2 / 100.0 + 1.0
    stats = get_statistics()
    rtol = stats.reached_rtol
    within = [5.0 * (1 + 0.6 * rtol), 5.0 * (1 - 0.6 * rtol)]
    for limit in [None, np.inf, 8.0, 3.0, *within]:
        assert at_boundary(bowl, 40, 40, stats, limit, 10), limit
    # settling onto 5.0, within 0.76 x and 0.37 x reached_rtol of it at 40
    for settling in [5.0 + 4 * rtol * (40.0 / (t + 1.0)) ** 2,
                     5.0 + 100 * rtol * np.exp(-t / 10.0)]:
        assert abs(settling[-1] - 5.0) < rtol * 5.0
        for w in (5, 10, 20):  # Aitken: where it heads, between its limit and its end
            assert 5.0 * (1 - 1e-12) <= trend_end(settling, w) <= settling[-1]
        assert trend_end(settling, 10) < (1 + 0.5 * rtol) * 5.0
        assert not at_boundary(settling, 40, 40, stats, 5.0, 10)
        assert at_boundary(settling, 40, 40, stats, 4.9, 10)
        assert at_boundary(settling, 40, 40, stats, None, 10)
    rising = (t - 20.0) ** 2 / 100.0 + 1.0  # its minimum 1.0 at 20, 5.0 at 40
    for limit, grows in [(None, False), (1.005, False), (0.9, True), (np.inf, False)]:
        assert at_boundary(rising, 40, 40, stats, limit, 10) is grows, limit
    # a limit that is not the path's own (the converged leave-one-out of a
    # leave-one-out path) does not keep a rising path going
    assert not at_boundary(rising, 40, 40, stats, 0.9, 10, own_limit=False)


def test_a_limit_is_not_pursued_through_flagged_iterates():
    """A path whose last ``n_iter_no_change`` iterates are flagged (``+inf``
    in its selectable criterion) is not kept going for its limit: it stops
    as a path without a limit does and does not grow past ``max_iter``.
    A tail shorter than the window, or no flag, keeps the limit."""
    from skacv.model_selection._stages import at_boundary, grown_length, pursued_limit, stops

    stats = get_statistics()
    head = np.array([5.0, 3.0, 2.0, 2.5, 2.6])
    flagged = np.concatenate([head, np.full(36, np.inf)])  # 41 iterates, the last 36 flagged
    finite = np.concatenate([head, np.linspace(2.7, 2.2, 36)])
    assert pursued_limit(flagged, 1.0, 10) is None
    assert pursued_limit(finite, 1.0, 10) == 1.0
    assert pursued_limit(flagged, None, 10) is None
    one = finite.copy()
    one[-1] = np.inf  # one flagged iterate, a window of 2: the limit holds
    assert pursued_limit(one, 1.0, 2) == 1.0
    # within max_iter (50): the flagged path stops (its minimum 38 back), the finite one goes on
    assert stops(flagged, 40, 10, stats, limit=1.0) == (True, 2)
    assert stops(finite, 40, 10, stats, limit=1.0) == (False, 2)
    # at max_iter (40): the flagged path ends, the finite one grows for its limit
    assert not at_boundary(flagged, 40, 40, stats, 1.0, 10)
    assert at_boundary(finite, 40, 40, stats, 1.0, 10)
    # past max_iter: the finite one grows from its end, the flagged one as without a limit
    assert grown_length(finite, 40, 40, 400, 10, 2.0, stats, 1.0) == 120
    assert (grown_length(flagged, 40, 40, 400, 10, 2.0, stats, 1.0)
            == grown_length(flagged, 40, 40, 400, 10, 2.0, stats, None))


def test_flagged_paths_do_not_grow_for_their_limits():
    """High signal with ``p >> n``: FISTA's paths below the chosen alpha
    spread over most columns in their first steps and are flagged (degrees
    of freedom near ``n``) for hundreds of steps. The default search does
    not grow those paths past ``max_iter`` for their limits, and its choice
    is within 1 % of the whole paths' argmin (every iterate to ``max_iter``
    and every converged fit)."""
    from sklearn.datasets import make_regression

    X, y = make_regression(100, 1000, n_informative=10, noise=1.0, random_state=0)
    staged = TrajectoryEarlyStoppingCV(TrajectoryLasso(), random_state=0).fit(X, y)
    whole = TrajectoryEarlyStoppingCV(TrajectoryLasso(), n_iter_no_change=None,
                                      random_state=0).fit(X, y)
    cv, max_iter = staged.cv_results_, staged.estimator.max_iter
    tails = [(int(cv["n_iter"][i]), np.asarray(cv["risk_reliable"][i]))
             for i in range(len(cv["params"])) if cv["trajectory_fitted"][i]]
    flagged = [n for n, ok in tails if not ok[-staged.n_iter_no_change:].any()]
    assert flagged  # (the case this test is about)
    assert max(flagged) <= max_iter
    assert -staged.best_score_ <= -whole.best_score_ * (1 + 0.01)


def test_path_predictions_delegate_to_the_fitted_path():
    # the search's predict_path / staged_predict are the fitted estimator_'s
    # path, whose column best_iteration_ is the search's predict
    X, y = _data()
    reg = _pinned(TrajectoryLasso(max_iter=30)).fit(X, y)
    assert reg.best_iteration_ is not None
    P = reg.predict_path(X)
    assert_allclose(P, reg.estimator_.predict_path(X))
    assert P.shape == (X.shape[0], reg.estimator_.n_iter_ + 1)
    assert_allclose(P[:, reg.best_iteration_], reg.predict(X), rtol=1e-12)
    staged = list(reg.staged_predict(X))
    assert len(staged) == P.shape[1]
    assert_allclose(np.column_stack(staged), P, rtol=1e-12)
    # the classifiers' paths; a regressor has none of theirs
    assert not hasattr(reg, "predict_proba_path") and not hasattr(reg, "decision_function_path")
    with pytest.raises(NotFittedError):
        _pinned(TrajectoryLasso()).predict_path(X)


def test_classifier_path_predictions_delegate():
    logistic = pytest.importorskip("skacv.estimators._logistic")
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=150, n_features=20, random_state=0)
    clf = _pinned(logistic.TrajectoryLogisticRegression(max_iter=30), criterion="loo").fit(X, y)
    t = clf.best_iteration_
    proba = clf.predict_proba_path(X)
    assert_allclose(proba, clf.estimator_.predict_proba_path(X))
    assert_allclose(proba[:, t], clf.predict_proba(X)[:, 1], rtol=1e-12)
    assert_allclose(clf.decision_function_path(X)[:, t], clf.decision_function(X), rtol=1e-12)
    assert_array_equal(clf.predict_path(X)[:, t], clf.predict(X))
    staged = list(clf.staged_predict_proba(X))
    assert_allclose(staged[t], clf.predict_proba(X), rtol=1e-12)
