"""Sample weights that are not counts: the estimates read frequency weights,
so the scale of non-integer weights moves them; a ``WeightScaleWarning``
says so and names the fix, whose claims these tests check."""

import warnings

import numpy as np
import pytest
from sklearn.linear_model import Lasso, Ridge

from skacv import (
    IterativeRidge,
    TrajectoryEarlyStoppingCV,
    TrajectoryLasso,
    TrajectoryLogisticRegression,
    risk_alpha_path,
)
from skacv.exceptions import WeightScaleWarning


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n, p = 120, 15
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:4] = [2.0, -1.5, 1.0, 0.5]
    y = X @ beta + rng.standard_normal(n)
    w = rng.uniform(0.5, 2.0, n)
    return X, y, w


def _scale_warnings(fit):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit()
    return [w for w in caught if issubclass(w.category, WeightScaleWarning)]


def test_relative_weights_off_their_row_count_warn_with_the_fix(data):
    X, y, w = data
    w = w / w.sum()  # normalised weights: read as one sample in all
    ridge = IterativeRidge(alpha=1.0, estimate_risk=False, estimate_loo=True)
    found = _scale_warnings(lambda: ridge.fit(X, y, sample_weight=w))
    assert len(found) == 1
    message = str(found[0].message)
    assert "sums to 1 over the 120 rows" in message
    assert "sample_weight * 120 / sample_weight.sum()" in message
    assert "multiply alpha by the same factor" in message  # ridge's alpha is sum-form
    assert found[0].filename == __file__  # at the user's call


@pytest.mark.parametrize("case", ["integer", "summing to the rows", "no estimate", "zeros"])
def test_counts_and_weights_on_the_row_count_do_not_warn(data, case):
    X, y, w = data
    est = TrajectoryLasso(alpha=0.1, max_iter=50)
    if case == "integer":
        w = np.round(3 * w)
    elif case == "summing to the rows":
        w = w * X.shape[0] / w.sum()
    elif case == "no estimate":
        est.set_params(estimate_risk=False)
    else:  # rows of zero weight are not data: the others sum to their count
        w = w.copy()
        w[:20] = 0.0
        w[20:] *= (X.shape[0] - 20) / w[20:].sum()
    assert not _scale_warnings(lambda: est.fit(X, y, sample_weight=w))


def test_the_fix_makes_the_estimates_scale_free_and_keeps_the_fits(data):
    """What the message claims: weights rescaled to sum to the rows give the
    same risk_path_ and loo_path_ whatever the scale they came in; the Lasso's
    fit does not move with the scale (scikit-learn's ``Lasso`` neither), and
    ridge's moves back with alpha multiplied by the factor (``Ridge``)."""
    X, y, w = data
    n = X.shape[0]
    kw = dict(alpha=0.05, max_iter=60, estimate_loo=True)
    fixed = [TrajectoryLasso(**kw).fit(X, y, sample_weight=v * n / v.sum())
             for v in (w, 7.3 * w)]
    np.testing.assert_allclose(fixed[0].risk_path_, fixed[1].risk_path_, rtol=1e-9)
    np.testing.assert_allclose(fixed[0].loo_path_, fixed[1].loo_path_, rtol=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeightScaleWarning)
        raw = TrajectoryLasso(**kw).fit(X, y, sample_weight=7.3 * w)
        # without the fix the estimates move with the scale (7.3 times the samples)
        assert not np.allclose(raw.risk_path_, fixed[0].risk_path_, rtol=1e-3)
        np.testing.assert_allclose(raw.coef_path_, fixed[0].coef_path_, rtol=1e-9, atol=1e-12)
        lasso = [Lasso(alpha=0.05, tol=1e-12, max_iter=10000).fit(X, y, sample_weight=v).coef_
                 for v in (w, 7.3 * w)]
        np.testing.assert_allclose(lasso[0], lasso[1], atol=1e-9)
        c = n / (7.3 * w).sum()
        ridge = IterativeRidge(alpha=2.0, max_iter=3000).fit(X, y, sample_weight=7.3 * w)
    moved = IterativeRidge(alpha=2.0 * c, max_iter=3000).fit(X, y, sample_weight=7.3 * w * c)
    np.testing.assert_allclose(moved.coef_, ridge.coef_, atol=1e-8)
    np.testing.assert_allclose(ridge.coef_, Ridge(alpha=2.0).fit(
        X, y, sample_weight=7.3 * w).coef_, atol=1e-6)


def test_the_search_warns_once_and_not_for_kfold(data):
    X, y, w = data
    w = 10.0 * w
    found = _scale_warnings(lambda: TrajectoryEarlyStoppingCV(
        TrajectoryLasso(), random_state=0).fit(X, y, sample_weight=w))
    assert len(found) == 1  # its inner fits' warnings of the kind dropped
    assert found[0].filename == __file__
    assert not _scale_warnings(lambda: TrajectoryEarlyStoppingCV(
        TrajectoryLasso(), criterion="kfold", random_state=0).fit(X, y, sample_weight=w))


def test_risk_alpha_path_and_class_weights_warn(data):
    X, y, w = data
    found = _scale_warnings(lambda: risk_alpha_path(TrajectoryLasso(), X, y, sample_weight=w))
    assert len(found) == 1 and "TrajectoryLasso's fit does not depend" in str(found[0].message)
    labels = (y > 0).astype(int)
    found = _scale_warnings(lambda: TrajectoryLogisticRegression(
        class_weight={0: 0.3, 1: 0.7}, estimate_loo=True, max_iter=20).fit(X, labels))
    assert len(found) == 1 and "(times class_weight)" in str(found[0].message)
    # "balanced" weights sum to the rows: no warning
    assert not _scale_warnings(lambda: TrajectoryLogisticRegression(
        class_weight="balanced", estimate_loo=True, max_iter=20).fit(X, labels))


def test_weights_summing_to_one_sample_say_so_in_the_error(data):
    X, y, w = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeightScaleWarning)
        with pytest.raises(ValueError, match="with sample weights, their sum"):
            TrajectoryLasso(alpha=0.1, max_iter=20).fit(X, y, sample_weight=w / w.sum())


def test_a_subset_of_normalised_weights_does_not_warn(data):
    """Cross-validation hands a fit a subset of weights normalised on all
    rows: its sum is off the subset's count by the sampling noise of a mean
    (``weight_sum_sigmas`` standard errors); weights off by their scale warn
    at the same size."""
    X, y, w = data
    w = w * X.shape[0] / w.sum()
    rng = np.random.default_rng(1)
    est = TrajectoryLasso(alpha=0.1, max_iter=30)
    for _ in range(5):
        half = rng.permutation(X.shape[0])[:60]
        assert abs(w[half].sum() - 60) > 1e-3 * 60  # off by more than the rtol alone
        Xh, yh, wh = X[half], y[half], w[half]
        assert not _scale_warnings(lambda: est.fit(Xh, yh, sample_weight=wh))  # noqa: B023
        assert _scale_warnings(lambda: est.fit(Xh, yh, sample_weight=1.3 * wh))  # noqa: B023


def test_a_dask_input_warns_of_its_rows_weights(data):
    """The fit on a Dask input runs on a compressed sample whose weights
    aggregate rows: the warning reads the rows' weights (and is silent for
    weights normalised on them)."""
    da = pytest.importorskip("dask.array")
    X, y, w = data
    Xd, yd = da.from_array(X, chunks=40), da.from_array(y, chunks=40)
    est = TrajectoryLasso(alpha=0.1, max_iter=30)
    normalised = da.from_array(w * X.shape[0] / w.sum(), chunks=40)
    assert not _scale_warnings(lambda: est.fit(Xd, yd, sample_weight=normalised))
    found = _scale_warnings(lambda: est.fit(Xd, yd, sample_weight=10 * normalised))
    assert len(found) == 1 and "over the 120 rows" in str(found[0].message)
    found = _scale_warnings(lambda: TrajectoryEarlyStoppingCV(
        TrajectoryLasso(), random_state=0).fit(Xd, yd, sample_weight=10 * normalised))
    assert len(found) == 1 and "over the 120 rows" in str(found[0].message)


def test_eigenpro_epochs_of_weights_summing_past_memory_are_refused(data):
    """EigenPro reads the weights as frequencies: an epoch draws their sum
    (rounded) rows with replacement where they are not integers. Weights
    summing to 2.6e11 asked NumPy for 1.9 TiB (``MemoryError``), to 2.6e22
    raised ``OverflowError: Python int too large to convert to C long``;
    now the sampler refuses before the fit with the number, the limit and
    the fix. Weights summing to three times the rows still fit: an epoch
    of three times the draws."""
    from skacv import EigenProClassifier, EigenProRegressor

    X, y = data[0], data[1]
    w = np.random.default_rng(0).uniform(0.5, 2.0, X.shape[0])
    for scale in (1e9, 1e20):
        with pytest.raises(ValueError, match=r"An epoch's draws .* frequencies.*"
                                             r"path_memory_limit.*sample_weight \* n"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", WeightScaleWarning)
                EigenProRegressor(max_iter=2, random_state=0).fit(X, y, sample_weight=scale * w)
    with pytest.raises(ValueError, match="An epoch's draws"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", WeightScaleWarning)
            EigenProClassifier(max_iter=2, random_state=0).fit(X, y > np.median(y),
                                                               sample_weight=1e12 * w)
    wide = 3.0 * X.shape[0] * w / w.sum()
    est = EigenProRegressor(max_iter=2, random_state=0).fit(X, y, sample_weight=wide)
    assert est.n_steps_ >= 2 * -(-round(wide.sum()) // est.batch_size_)
