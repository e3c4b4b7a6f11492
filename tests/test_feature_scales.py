"""The fit's warning on features of very different scales
(:class:`~skacv.exceptions.FeatureScaleWarning`,
``skacv.estimators._advice.warn_feature_scales``).

A step of ``1 / L`` moves a coordinate of scale ``s`` at the rate ``(s /
s_max)^2``: past the statistical policy's ``feature_scale_ratio`` (100) in
root mean square a fit warns once, at the user's call, naming the two
columns; the scales are those of the centred features the steps run on
(the Huber and logistic estimators' intercept column has the largest
one's size and is not compared).
"""

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from skacv import (
    IterativeRidge,
    TrajectoryEarlyStoppingCV,
    TrajectoryHuberRegressor,
    TrajectoryLasso,
    TrajectoryLogisticRegression,
)
from skacv._statistics import get_statistics
from skacv.estimators._advice import feature_scales
from skacv.exceptions import FeatureScaleWarning
from skacv.linalg._design import Design


def _caught(fit):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit()
    return [w for w in caught if issubclass(w.category, FeatureScaleWarning)]


def _data(scale, n=200, seed=0, offset=0.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    X[:, 2] = X[:, 2] * scale + offset
    y = X[:, 0] - X[:, 1] + rng.standard_normal(n)
    return X, y


@pytest.mark.parametrize("make", [lambda: TrajectoryLasso(alpha=0.01, max_iter=30),
                                  lambda: IterativeRidge(max_iter=30),
                                  lambda: TrajectoryHuberRegressor(max_iter=30)])
def test_a_fit_warns_past_the_ratio_and_not_below(make):
    """Scales 1, 1 and 500: one warning, at this file, naming the feature
    by its column name; scales 1, 1 and 50 (or the ratio just above 100
    with ``feature_scale_ratio`` raised): none."""
    assert get_statistics().feature_scale_ratio == 100.0
    X, y = _data(500.0)
    frame = pd.DataFrame(X, columns=["a", "b", "large"])
    found = _caught(lambda: make().fit(frame, y))
    assert len(found) == 1 and found[0].filename == __file__
    message = str(found[0].message)
    assert "feature 2 ('large')" in message and "StandardScaler" in message
    assert not _caught(lambda: make().fit(*_data(50.0)))


def test_the_ratio_is_the_statistical_policys(statistical_policy):
    X, y = _data(150.0)
    assert _caught(lambda: TrajectoryLasso(alpha=0.01, max_iter=5).fit(X, y))
    statistical_policy(feature_scale_ratio=200.0)
    assert not _caught(lambda: TrajectoryLasso(alpha=0.01, max_iter=5).fit(X, y))


def test_an_offset_column_beside_an_intercept_coordinate():
    """Columns of spread 10, one of mean 2000 (a year): every estimator's
    steps run on centred columns (the Huber and logistic estimators' intercept
    a column of the largest one's size beside them), so none warns; they did
    on ``[X, 1]``, where the year's column was 2000 times the intercept's."""
    X, y = _data(1.0, offset=2000.0)
    X *= 10.0
    X[:, 2] -= 18000.0  # spread 10, mean 2000
    for est, target in ((TrajectoryLasso(alpha=0.01, max_iter=5), y),
                        (TrajectoryHuberRegressor(max_iter=5), y),
                        (TrajectoryLogisticRegression(max_iter=5), y > 0)):
        assert not _caught(lambda est=est, target=target: est.fit(X, target))
    wide = X.copy()
    wide[:, 0] /= 500.0  # spreads 0.02, 10 and 10 (mean 2000): one warning
    found = _caught(lambda: TrajectoryHuberRegressor(max_iter=5).fit(wide, y))
    assert len(found) == 1 and "feature 0 0.02" in str(found[0].message)


def test_constant_columns_do_not_count():
    X, y = _data(1.0)
    X = np.column_stack([X, np.zeros(X.shape[0]), np.full(X.shape[0], 7.0)])
    assert not _caught(lambda: TrajectoryLasso(alpha=0.01, max_iter=5).fit(X, y))


@pytest.mark.parametrize("make", [lambda: TrajectoryHuberRegressor(max_iter=5, scale=1e-20),
                                  lambda: TrajectoryLogisticRegression(max_iter=5)])
def test_features_in_tiny_units_beside_the_intercept(make):
    """Every feature in units of 1e-20: the intercept's column has their
    size, so nothing warns (beside a column of ones, a ratio of 1e20, the
    fit returned the intercept alone). Constant columns are those whose
    spread is a rounding's share of their own size, not of the largest
    column's: a centred constant column in units of 1e6 does not count."""
    X, y = _data(1.0)
    target = (y > 0).astype(int) if "Logistic" in type(make()).__name__ else 1e-20 * y
    assert not _caught(lambda: make().fit(1e-20 * X, target))
    assert not _caught(lambda: TrajectoryLasso(alpha=1e-21, max_iter=5).fit(1e-20 * X, y))
    wide = np.column_stack([X, np.full(X.shape[0], 3e6)])
    assert not _caught(lambda: TrajectoryLasso(alpha=0.01, max_iter=5).fit(wide, y))
    tiny = np.column_stack([X, 1e-13 * X[:, 0]])  # spread 1e-13 beside 1: counts
    assert len(_caught(lambda: make().fit(tiny, target))) == 1


def test_huber_automatic_scale_that_fails_says_why():
    """Columns in units of 1e20 beside the intercept's column of ones stall
    the pilot ``HuberRegressor`` of ``scale="auto"``: its ``ValueError``
    comes back with the fix."""
    X, y = _data(1.0)
    with pytest.raises(ValueError, match="Standardise X .* or give scale a number"):
        TrajectoryHuberRegressor(max_iter=5).fit(1e20 * X, y)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("rows", [None, 40])
def test_the_scales_are_the_weighted_root_mean_squares(fit_intercept, sparse, rows,
                                                       statistical_policy):
    """``feature_scales`` of a design: the weighted root mean square of each
    column about its weighted mean (about 0 without intercept), by hand; on
    ``feature_scale_rows`` evenly spaced rows of a longer design. All rows:
    from the design's column norms, computed once."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((150, 6)) * [1, 2, 3, 10, 0.1, 5] + [0, 1, -2, 30, 0, 4]
    X[rng.random(X.shape) < 0.3] = 0.0
    w = rng.uniform(0.5, 3.0, 150)
    idx = np.arange(150)
    if rows is not None:  # (a design reads the policies in force where it is made)
        statistical_policy(feature_scale_rows=rows)
        idx = np.unique(np.linspace(0, 149, rows).astype(np.intp))
    design = Design(sp.csr_matrix(X) if sparse else X, w, fit_intercept)
    m = w @ X / w.sum() if fit_intercept else np.zeros(6)
    expected = np.sqrt(w[idx] @ (X[idx] - m) ** 2 / w[idx].sum())
    np.testing.assert_allclose(feature_scales(design), expected, rtol=1e-12)
    norms = design.column_sq_norms()
    np.testing.assert_allclose(norms, w @ (X - m) ** 2, rtol=1e-12)
    assert design.column_sq_norms() is norms and not norms.flags.writeable


def test_a_search_warns_once_at_the_users_call():
    X, y = _data(1000.0)
    found = _caught(lambda: TrajectoryEarlyStoppingCV(
        TrajectoryLasso(max_iter=20), param_grid={"alpha": [0.1, 0.01]}).fit(X, y))
    assert len(found) == 1 and found[0].filename == __file__


def test_several_targets_warn_once():
    X, y = _data(1000.0)
    found = _caught(lambda: TrajectoryLasso(alpha=0.01, max_iter=5).fit(
        X, np.column_stack([y, -y])))
    assert len(found) == 1 and found[0].filename == __file__
