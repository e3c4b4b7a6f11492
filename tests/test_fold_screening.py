"""The stacked folds on a certified working set of features
(skacv.model_selection._fold_screening): the same paths as separate fold
fits and as the block over all features, whichever way the working set
changes (refreshes, features entering between them, hand-backs), and the
penalty's zero band that the certificate rests on."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.base import clone
from sklearn.model_selection import KFold, ShuffleSplit
from test_kfold import _by_hand

from skacv import TrajectoryEarlyStoppingCV, TrajectoryElasticNet, TrajectoryLasso
from skacv._policy import current_policies
from skacv._trace import record
from skacv.iterations._penalties import L1, L2, ElasticNet, Penalty
from skacv.model_selection._kfold import StackedFolds


def _wide(n=48, p=400, seed=0):
    """Few samples, many correlated features with a common offset: FISTA's
    iterates at a small alpha take in most features, then drop them."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + 0.4 * rng.standard_normal((n, 1)) + 2.0
    y = X[:, :5] @ np.array([2.0, -1.5, 1.0, 0.5, 0.5]) + rng.standard_normal(n)
    return X, y


def _screened(speed_policy, refresh=None, share=1e9, retry=1):
    """Every block of at least one feature on a working set from its first
    step on (``retry``) that never gives up (``share``), refreshed as the
    policy's default or ``refresh``."""
    speed_policy(fold_screening=True, screening_min_features=1, fold_covariance=False,
                 screening_max_share=share, screening_retry_steps=retry)
    if refresh is not None:
        speed_policy(screening_refresh_passes=refresh)


ESTIMATORS = [
    TrajectoryLasso(alpha=0.3, max_iter=80, estimate_risk=False),
    # (on centred data: without an intercept the offset puts every feature in)
    TrajectoryLasso(alpha=0.3, solver="ista", max_iter=80, estimate_risk=False,
                    fit_intercept=False),
    TrajectoryLasso(alpha=0.1, max_iter=80, estimate_risk=False, positive=True),
    TrajectoryElasticNet(alpha=0.5, l1_ratio=0.5, max_iter=80, estimate_risk=False),
]


@pytest.mark.parametrize("est", ESTIMATORS, ids=["fista", "ista", "positive", "enet"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("refresh", ["often", "never"])
def test_screened_folds_equal_separate_fold_fits(speed_policy, est, weighted, refresh):
    """Every held-out error of every iterate of the screened block is the
    separate fold fit's (float64, 1e-10: the products of a narrower block
    round differently). With no refresh after the first, every feature that
    enters goes through the certificate: a missed one would change the
    path from there on; refreshed often, the prefix changes at many steps."""
    _screened(speed_policy, refresh=0.05 if refresh == "often" else 1e12)
    X, y = _wide()
    if not est.fit_intercept:
        X, y = X - X.mean(axis=0), y - y.mean()
    sw = np.random.default_rng(2).integers(0, 4, len(y)).astype(float) if weighted else None
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    expected, _ = _by_hand(est, X, y, sw, splits)
    with record() as paths:
        block = StackedFolds(est, X, y, sw, splits, np.dtype(np.float64), current_policies())
        losses = block.advance(80)
    assert paths.count("fold_screening") == 1
    assert_allclose(losses, expected, rtol=1e-10)
    grown = sum(d["columns"] for d in paths.details("fold_screening_grow"))
    if refresh == "never":
        assert paths.count("fold_screening_refresh") == 1 and grown > 0
    else:
        assert paths.count("fold_screening_refresh") > 1
    # the steps ran on part of the features (what it is for)
    assert block._screen.width < X.shape[1]


@pytest.mark.parametrize("weighted", [False, True])
def test_a_rotated_block_screens_in_the_folds_layout(speed_policy, weighted):
    """A block in the rotated layout (folds that partition a dense X from a
    size on) takes its working set in the "folds" layout of the same copy
    of X~: the separate fold fits' errors (float64, 1e-10)."""
    _screened(speed_policy, share=0.5, retry=4)
    speed_policy(rotated_min_bytes=0, rotated_min_features=0, screening_step_overhead=0)
    X, y = _wide()
    sw = np.random.default_rng(2).integers(0, 4, len(y)).astype(float) if weighted else None
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    est = TrajectoryLasso(alpha=0.1, max_iter=200, estimate_risk=False)
    expected, _ = _by_hand(est, X, y, sw, splits)
    with record() as paths:
        block = StackedFolds(est, X, y, sw, splits, np.dtype(np.float64), current_policies())
        losses = block.advance(200)
    assert block.designs.layout == "rotated" and paths.count("fold_screening") == 1
    assert_allclose(losses, expected, rtol=1e-10)


@pytest.mark.parametrize("splitter", [KFold(4, shuffle=True, random_state=0),
                                      ShuffleSplit(3, test_size=0.3, random_state=0)],
                         ids=["partition", "any"])
def test_screened_grid_block_in_pieces_with_retired_groups(speed_policy, splitter):
    """A grid block (a group of folds per alpha) advanced in pieces, its
    first groups retired on the way, gives the unscreened block's errors
    (float64, 1e-10) and, retired, keeps them up to where they ended."""
    X, y = _wide()
    splits = list(splitter.split(X))
    ests = [TrajectoryLasso(alpha=a, max_iter=90, estimate_risk=False)
            for a in (0.5, 0.1, 0.02, 0.004)]
    K = len(splits)

    def run():
        block = StackedFolds(ests[0], X, y, None, splits, np.dtype(np.float64),
                             current_policies(), estimators=ests)
        block.advance(25)
        block.retire(K)
        block.advance(50)
        block.retire(2 * K)
        return block.advance(90)

    speed_policy(fold_screening=False, fold_covariance=False)
    whole = run()
    _screened(speed_policy)
    with record() as paths:
        losses = run()
    # a working set at each change of columns (the retired groups' leave with their state)
    assert paths.count("fold_screening") == 3
    assert_allclose(losses, whole, rtol=1e-10, equal_nan=True)
    assert np.isnan(losses[26:, :K]).all() and not np.isnan(losses[:26, :K]).any()


def test_screening_hands_back_and_takes_the_working_set_again(speed_policy):
    """A small alpha's working set first takes in most features' steps once
    few move: when its steps cost more than the policy's share of a step
    over all features it hands the block back, and takes it again once few
    move; the errors are the unscreened block's throughout (float64,
    1e-10)."""
    X, y = _wide(p=1000)
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    est = TrajectoryLasso(alpha=0.02, max_iter=300, estimate_risk=False)
    speed_policy(fold_screening=False, fold_covariance=False)
    whole = StackedFolds(est, X, y, None, splits, np.dtype(np.float64),
                         current_policies()).advance(300)
    _screened(speed_policy, share=0.5)
    speed_policy(screening_step_overhead=0)
    with record() as paths:
        losses = StackedFolds(est, X, y, None, splits, np.dtype(np.float64),
                              current_policies()).advance(300)
    # taken, handed back, taken again
    assert paths.count("fold_screening_left") >= 1 and paths.count("fold_screening") >= 2
    assert_allclose(losses, whole, rtol=1e-10)


def test_screened_float32_block_within_its_rounding(speed_policy):
    """In the block's default float32, the screened errors are within the
    float32 block's own measured spread of the exact (float64) ones, 1e-4
    relative, as the unscreened block's (tests/test_kfold_grid_block.py)."""
    _screened(speed_policy)
    X, y = _wide()
    splits = list(KFold(5, shuffle=True, random_state=1).split(X))
    est = TrajectoryLasso(alpha=0.02, max_iter=120, estimate_risk=False)
    exact, _ = _by_hand(est, X, y, None, splits)
    losses = StackedFolds(est, X, y, None, splits, np.dtype(np.float32),
                          current_policies()).advance(120)
    assert_allclose(losses, exact, rtol=1e-4)


def test_search_chooses_the_same_with_and_without_the_working_set(speed_policy):
    """K-fold CV along the path of a whole alpha grid on a p > n design: the
    same choice, and K-fold paths within the float32 blocks' rounding."""
    X, y = _wide(n=60, p=500, seed=3)
    grid = {"alpha": [1.0, 0.3, 0.1, 0.03, 0.01]}
    results = []
    for screening in (False, True):
        speed_policy(fold_screening=screening, screening_min_features=1,
                     screening_step_overhead=0, screening_retry_steps=1,
                     screening_max_share=1e9)
        search = TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=100), param_grid=grid,
                                           criterion="kfold", random_state=0)
        with record() as paths:
            search.fit(X, y)
        assert ("fold_screening" in paths) == screening
        results.append(search)
    off, on = results
    assert on.best_params_ == off.best_params_ and on.best_iteration_ == off.best_iteration_
    for a, b in zip(off.cv_results_["kfold_path"], on.cv_results_["kfold_path"], strict=True):
        assert_allclose(b, a, rtol=1e-4)


@pytest.mark.parametrize("penalty, band", [
    (L1(0.3), 0.3), (L1(0.3, positive=True), 0.3), (ElasticNet(0.2, 0.5), 0.2),
    (L2(1.0), 0.0), (L1(0.3, n_unpenalized=1), None),
])
def test_zero_band_keeps_a_zero_at_zero(penalty, band):
    """Penalty.zero_band is the largest |z| for which a step from a zero
    point keeps the coordinate at zero: the prox of ``eta z`` is zero within
    it and not just beyond it (each sign; one-sided for ``positive``)."""
    assert penalty.zero_band() == band
    if not band:
        return
    eta = 0.7
    inside = np.array([band, -band, 0.999 * band, -0.999 * band])
    assert not np.any(penalty.prox(eta * inside, eta))
    outside = np.array([1.001 * band] if penalty.positive else [1.001 * band, -1.001 * band])
    assert np.all(penalty.prox(eta * outside, eta) != 0)


def test_zero_band_of_a_subclass_prox_is_not_assumed():
    """A penalty with its own prox declares no band (the certificate does
    not apply to it)."""
    class Shrunk(Penalty):
        def prox(self, pre, step, scale=None):
            return 0.5 * pre

    assert Shrunk(l1=0.3).zero_band() is None
    assert clone(TrajectoryLasso()).get_params()["alpha"] == 1.0  # (the estimators' default)


@pytest.mark.parametrize("change", [dict(screening_max_bytes=0), dict(fold_covariance_always=True,
                                                                          fold_covariance=True)],
                         ids=["memory", "covariance"])
def test_no_working_set_beyond_its_memory_or_on_the_covariance_form(speed_policy, change):
    """A block whose copy of X exceeds the policy's screening_max_bytes (the
    working set would keep another) or that runs in the covariance form
    steps over every feature, with the same errors."""
    _screened(speed_policy)
    X, y = _wide(n=320, p=300)  # (the covariance form: fewer features than samples)
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    est = TrajectoryLasso(alpha=0.1, max_iter=40, estimate_risk=False)
    expected, _ = _by_hand(est, X, y, None, splits)
    with record() as paths:  # (without the change: a working set)
        StackedFolds(est, X, y, None, splits, np.dtype(np.float64),
                     current_policies()).advance(40)
    assert "fold_screening" in paths
    speed_policy(**change)
    with record() as paths:
        losses = StackedFolds(est, X, y, None, splits, np.dtype(np.float64),
                              current_policies()).advance(40)
    assert "fold_screening" not in paths and "stacked_folds" in paths
    assert_allclose(losses, expected, rtol=1e-10)


def test_every_feature_array_follows_the_permutation(speed_policy):
    """After refreshes and features taken in between (the positions past the
    prefix reordered), the working set's copy of X~, its offsets and the
    inverse column norms its slacks read are the block's in the order of its
    permutation (a per-feature array left behind would give its feature
    another's slack at the next refresh)."""
    from skacv.model_selection._fold_screening import _training_column_norms

    _screened(speed_policy, refresh=0.5)
    X, y = _wide()
    X = X * np.exp(np.random.default_rng(5).uniform(-2, 2, X.shape[1]))
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    est = TrajectoryLasso(alpha=0.1, max_iter=80, estimate_risk=False)
    block = StackedFolds(est, X, y, None, splits, np.dtype(np.float64), current_policies())
    with record() as paths:
        block.advance(80)
    assert paths.count("fold_screening_grow") > 0 and paths.count("fold_screening_refresh") > 1
    screen, d = block._screen, block.designs
    order = screen.order
    assert sorted(order) == list(range(X.shape[1]))
    assert_allclose(screen.XT, d.base.X.T[order], rtol=0, atol=0)
    assert_allclose(screen.delta, d.delta[order], rtol=0, atol=0)
    assert_allclose(screen.offset, d.base.x_offset[order], rtol=0, atol=0)
    # (held a row per column, as the slacks)
    assert_allclose(screen.inv_norms, 1.0 / _training_column_norms(d)[order].T, rtol=1e-12)


def test_verbose_reports_the_working_set(speed_policy, capsys):
    """With the estimator's verbose, the working set's steps print their
    progress with its size, as the steps over every feature do."""
    _screened(speed_policy)
    X, y = _wide()
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    est = TrajectoryLasso(alpha=0.3, max_iter=40, estimate_risk=False, verbose=1)
    StackedFolds(est, X, y, None, splits, np.dtype(np.float64), current_policies()).advance(40)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "features" in ln]
    assert lines and all(" of 400 features" in ln for ln in lines)
    widths = [int(ln.split(" on ")[1].split()[0]) for ln in lines]
    assert all(0 < w <= 400 for w in widths) and min(widths) < 400
