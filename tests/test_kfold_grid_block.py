"""K-fold CV of a whole alpha grid in one block (a group of K columns per
alpha, skacv.model_selection._kfold.StackedFolds(estimators=...)): each
group's held-out errors are those of its alpha's own block, and the path
search that runs it returns the exhaustive search's choice."""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose
from sklearn.base import clone
from sklearn.model_selection import KFold, ShuffleSplit

from skacv import IterativeRidge, TrajectoryEarlyStoppingCV, TrajectoryLasso
from skacv._policy import current_policies
from skacv._trace import record
from skacv.model_selection import _fold_designs
from skacv.model_selection._kfold import StackedFolds

ALPHAS = [0.5, 0.1, 0.02, 0.004]


def _wide(n=48, p=150, seed=0):
    """Few samples, many features, a common offset (centring matters)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + 0.4 * rng.standard_normal((n, 1)) + 2.0
    y = X[:, :5] @ np.array([2.0, -1.5, 1.0, 0.5, 0.5]) + rng.standard_normal(n)
    return X, y


@pytest.mark.parametrize("est", [
    TrajectoryLasso(max_iter=60, estimate_risk=False),  # FISTA: the kept iterates
    TrajectoryLasso(solver="ista", max_iter=60, estimate_risk=False, fit_intercept=False),
    IterativeRidge(solver="nesterov", max_iter=60, estimate_risk=False),
], ids=["fista", "ista", "ridge"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("splitter", [KFold(4, shuffle=True, random_state=0),
                                      ShuffleSplit(3, test_size=0.3, random_state=0)],
                         ids=["partition", "any"])
def test_grid_block_equals_a_block_per_alpha(speed_policy, est, weighted, splitter):
    """Group a's held-out errors (every fold, every iterate) and step sizes
    are those of alpha a's own block: in float64 to 1e-10 (the products of
    a wider block round differently), in float32 to 1e-4 relative (the
    measured spread of a 241-step FISTA path on Khan's design, 2e-5),
    against the float64 errors within the float32 block's own rounding."""
    speed_policy(fold_covariance=False)  # (a block of one alpha may take it)
    X, y = _wide()
    sw = np.random.default_rng(2).integers(1, 4, len(y)).astype(float) if weighted else None
    splits = list(splitter.split(X))
    ests = [clone(est).set_params(alpha=a) for a in ALPHAS]
    K = len(splits)
    for dtype, rtol in ((np.float64, 1e-10), (np.float32, 1e-4)):
        block = StackedFolds(ests[0], X, y, sw, splits, np.dtype(dtype), current_policies(),
                             estimators=ests)
        assert block.designs.layout == "folds" and block.designs.n_folds == K * len(ALPHAS)
        losses = block.advance(60)
        assert losses.shape == (61, K * len(ALPHAS))
        for a, e in enumerate(ests):
            alone = StackedFolds(e, X, y, sw, splits, np.dtype(dtype), current_policies())
            assert_allclose(block.step_sizes[a * K:(a + 1) * K], alone.step_sizes, rtol=1e-12)
            assert block.test_weight == alone.test_weight
            ref = alone.advance(60)
            assert_allclose(losses[:, a * K:(a + 1) * K], ref, rtol=rtol)
            if dtype == np.float32:  # and the float64 errors within the float32 rounding
                exact = StackedFolds(e, X, y, sw, splits, np.dtype(np.float64),
                                     current_policies()).advance(60)
                assert_allclose(losses[:, a * K:(a + 1) * K], exact, rtol=1e-4)


@pytest.mark.parametrize("est", [
    TrajectoryLasso(max_iter=60, estimate_risk=False),
    IterativeRidge(solver="nesterov", max_iter=60, estimate_risk=False),
], ids=["fista", "ridge"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("splitter", [KFold(4, shuffle=True, random_state=0),
                                      ShuffleSplit(3, test_size=0.3, random_state=0)],
                         ids=["partition", "any"])
def test_retired_groups_leave_the_others_as_they_were(speed_policy, est, weighted, splitter):
    """A block whose first alphas' paths have ended advances only the
    others (retire): their held-out errors stay those of the whole block
    (every iterate, in float64 to 1e-10: the products of a narrower block
    round differently), the retired ones keep theirs up to where they were
    (NaN past), and retiring every group, or groups retired already,
    leaves the block as it is."""
    speed_policy(fold_covariance=False)
    X, y = _wide()
    sw = np.random.default_rng(2).integers(1, 4, len(y)).astype(float) if weighted else None
    splits = list(splitter.split(X))
    ests = [clone(est).set_params(alpha=a) for a in ALPHAS]
    K = len(splits)

    def block():
        return StackedFolds(ests[0], X, y, sw, splits, np.dtype(np.float64), current_policies(),
                            estimators=ests)

    whole = block().advance(60)
    part = block()
    part.advance(20)
    part.retire(K)  # the first alpha's path ended at 20 steps
    part.advance(35)
    with record() as paths:
        part.retire(3 * K)  # then the second's and third's at 35
        part.retire(4 * K)  # (nothing is left to advance: kept)
        part.retire(2 * K)  # (retired already)
    assert paths.count("retire_grid_groups") == 1
    losses = part.advance(60)
    assert part.designs.n_folds == K and part.state.x.shape[1] == K
    assert_allclose(losses[:, 3 * K:], whole[:, 3 * K:], rtol=1e-10)
    assert_allclose(losses[:21, :K], whole[:21, :K], rtol=1e-10)
    assert np.isnan(losses[21:, :K]).all()
    assert_allclose(losses[:36, K:3 * K], whole[:36, K:3 * K], rtol=1e-10)
    assert np.isnan(losses[36:, K:3 * K]).all()


def test_a_wide_block_takes_the_cache_panels(speed_policy):
    """A grid block's products are never small (8 rows of 60 columns of
    2307 features pass FOLD_PANEL_MAX_PRODUCT): its panels are the cache's."""
    policy = speed_policy(cpu_caches={2: 2**20, 3: 32 * 2**20})
    rows = _fold_designs.fold_panel_rows
    cache = int(0.75 * 2**20) // (2307 * 4)
    assert rows(2307, policy, 4, n_columns=60) == cache == 85
    assert rows(2307, policy, 4, n_columns=5) == min(cache, 10**6 // (5 * 2307)) == 85
    assert rows(6829, policy, 4, n_columns=60) == int(0.75 * 2**20) // (6829 * 4) == 28
    # a cap that 8 rows can meet still holds
    assert rows(2307, policy, 4, n_columns=40) == 10**6 // (40 * 2307) == 10


def _search(X, y, grid, sample_weight=None, **kw):
    return TrajectoryEarlyStoppingCV(TrajectoryLasso(solver="fista", max_iter=100),
                                     param_grid={"alpha": grid}, criterion="kfold",
                                     random_state=0, **kw).fit(X, y, sample_weight=sample_weight)


@pytest.mark.parametrize("seed, kind", [(0, "dense"), (11, "dense"), (9, "dense"),
                                        (1, "weighted"), (1, "sparse")])
def test_grid_block_search_is_the_exhaustive_search(speed_policy, seed, kind):
    """p >> n, K-fold CV along the paths (the criterion="auto" fallback): the
    path search runs every alpha's folds in one block, and returns the
    exhaustive search's choice (every alpha's trajectory fitted, a block
    per alpha, stack_grid=False with path_neighbors covering the grid); the
    K-fold paths of every alpha agree to the float32 blocks' rounding.
    Seeds: an iterate of a path grown past max_iter (0), one within it (11),
    the converged fit (9)."""
    X, y = _wide(n=40, p=300, seed=seed)
    amax = np.max(np.abs((X - X.mean(0)).T @ (y - y.mean()))) / len(y)
    grid = list(np.geomspace(amax, amax * 1e-3, 10))
    sw = None
    if kind == "weighted":
        sw = np.random.default_rng(3).integers(1, 4, len(y)).astype(float)
    elif kind == "sparse":
        X = sp.csr_matrix(np.where(np.abs(X - 2.0) > 0.5, X, 0.0))
    # (float64 folds: the paths grown past max_iter run up to 1000 steps, where
    # float32 blocks of other widths part by 3e-4 and may stop a step apart)
    with record() as paths:
        stacked = _search(X, y, grid, sw, fold_dtype="float64")
    assert paths.count("grid_fold_block") == 1
    assert paths.details("grid_fold_block")[0]["n_grid"] == len(grid)
    speed_policy(stack_grid=False)
    with record() as paths:
        exhaustive = _search(X, y, grid, sw, path_neighbors=len(grid), fold_dtype="float64")
    assert "grid_fold_block" not in paths
    rs, re_ = stacked.cv_results_, exhaustive.cv_results_
    assert rs["trajectory_fitted"].all() and re_["trajectory_fitted"].all()
    assert stacked.best_params_ == exhaustive.best_params_
    assert stacked.best_iteration_ == exhaustive.best_iteration_
    assert_allclose(stacked.best_risk_, exhaustive.best_risk_, rtol=1e-9)
    for a, b in zip(rs["kfold_path"], re_["kfold_path"], strict=True):
        assert_allclose(a, b, rtol=1e-9)
    assert_allclose(stacked.predict(X), exhaustive.predict(X), rtol=1e-9,
                    atol=1e-9 * np.abs(y).max())


def test_grid_block_only_where_it_may(speed_policy):
    """The grid's block needs deferred full fits in one go (no stages) and a
    block in the folds layout without the covariance form; elsewhere the
    search fits a block per alpha as before."""
    X, y = _wide(n=40, p=300)
    grid = [0.3, 0.1, 0.03]

    def blocks(**kw):
        with record() as paths:
            _search(X, y, grid, **kw)
        return paths.count("grid_fold_block")

    assert blocks() == 1
    assert blocks(path_neighbors=0) == 0  # the converged fits' choice only
    assert blocks(n_jobs=2) == 0
    speed_policy(stage_min_flops=0)  # paths grown in stages
    assert blocks() == 0
    speed_policy(stage_min_flops=np.inf, defer_full_fit=False)
    assert blocks() == 0
    speed_policy(defer_full_fit=True, rotated_min_bytes=0, rotated_min_features=0)
    assert blocks() == 0
