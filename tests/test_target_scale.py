"""Choices that do not depend on the target's units.

A target in units of 1e20 (a currency's smallest unit over a country, the
physical constants of ``gt/constants`` in R's ``gt`` package) or of 1e-20
is the same regression: the Lasso's penalty scales with it, ridge's does
not, and the iterate chosen is the same. Two places ran a fixed precision
or a solver that is not: the stacked folds of K-fold CV in float32 (their
sums of squares overflow at 1e17 and sink into the subnormals at 1e-17:
``fold_dtype="auto"`` now runs float64 there,
:func:`skacv.model_selection._kfold.resolve_fold_dtype`), and the Huber
estimator's automatic scale, a pilot ``HuberRegressor`` whose L-BFGS
stalls from targets of about 1e6 (the pilot now runs on the target over
its robust scale).
"""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose
from sklearn.datasets import make_regression

from skacv import IterativeRidge, TrajectoryEarlyStoppingCV, TrajectoryLasso
from skacv._policy import get_policy
from skacv._trace import record
from skacv.model_selection._kfold import resolve_fold_dtype
from skacv.utils._validation import single_precision_holds as _holds

SCALES = (1e20, 1e-20)


def single_precision_holds(X, y, sample_weight=None):
    """The rule under the speed policy in force."""
    return _holds(X, y, sample_weight, get_policy())


def resolve(fold_dtype, X, y):
    """``resolve_fold_dtype`` under the speed policy in force."""
    return resolve_fold_dtype(fold_dtype, X, y, None, get_policy())


@pytest.fixture(scope="module")
def data():
    X, y = make_regression(120, 20, n_informative=5, noise=5.0, random_state=0)
    return X, y


def test_single_precision_holds_the_sums_of_squares_within_its_range():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 4))
    y = rng.standard_normal(50)
    assert single_precision_holds(X, y)
    assert single_precision_holds(X, np.zeros(50))  # (nothing to hold)
    factors, single = get_policy().single_sums_range, np.finfo(np.float32)
    low, high = factors[0] * float(single.tiny), factors[1] * float(single.max)
    # ||y||^2 just inside and just outside the range (50 rows of equal size)
    for bound, inside, outside in ((high, 0.9, 1.1), (low, 1.1, 0.9)):
        assert single_precision_holds(X, np.full(50, np.sqrt(inside * bound / 50)))
        assert not single_precision_holds(X, np.full(50, np.sqrt(outside * bound / 50)))
    # the coefficients' scale: y over the smallest nonzero column of X
    tiny = X.copy()
    tiny[:, 2] *= 1e-18
    assert not single_precision_holds(tiny, y)
    tiny[:, 2] = 0.0  # (a zero column has no coefficient to hold)
    assert single_precision_holds(tiny, y)
    assert not single_precision_holds(X * 1e15, y)
    # weights count each row's square: the same as repeated rows
    w = np.r_[np.full(25, 2.0), np.zeros(25)]
    big = np.r_[np.full(25, np.sqrt(0.6 * high / 50)), np.full(25, 1e30)]
    assert not single_precision_holds(X, big)
    assert single_precision_holds(X, big, w) == single_precision_holds(
        np.r_[X[:25], X[:25]], np.r_[big[:25], big[:25]])
    assert single_precision_holds(X, big, w)
    # sparse as dense; not finite or not numbers: float64 says why
    assert single_precision_holds(sp.csr_matrix(X * 1e15), y) is False
    assert single_precision_holds(sp.csr_matrix(X), y)
    y_nan = y.copy()
    y_nan[3] = np.nan
    assert not single_precision_holds(X, y_nan)
    assert not single_precision_holds(np.array([["a", "b"]] * 50), y)


def test_resolve_fold_dtype_keeps_what_is_asked(data):
    X, y = data
    assert resolve("auto", X, y) == "float32"
    assert resolve("auto", X, 1e20 * y) == "float64"
    assert resolve("float32", X, 1e20 * y) == "float32"  # (the user's)
    assert resolve("float64", X, y) == "float64"
    # a float32 X fits in float32 whatever the folds' precision
    assert resolve("auto", X.astype(np.float32), 1e20 * y) == "auto"


@pytest.mark.parametrize("scale", SCALES)
def test_kfold_lasso_choice_does_not_depend_on_the_target_units(data, scale):
    """The stacked folds of a target in units of 1e20 overflowed float32
    (``ValueError``, the overflow's advice to rescale); in units of 1e-20
    their squared residuals sank into its subnormals. ``"auto"`` runs them
    in float64 there: the choice and the K-fold path (scaled back) are
    those of the same data in units of 1, run in float64."""
    X, y = data
    grid = np.array([2.0, 0.5, 0.1])

    def search(s, fold_dtype):
        return TrajectoryEarlyStoppingCV(
            TrajectoryLasso(max_iter=60), criterion="kfold", param_grid={"alpha": s * grid},
            fold_dtype=fold_dtype, random_state=0).fit(X, s * y)

    base = search(1.0, "float64")
    with record() as paths:
        est = search(scale, "auto")
    assert "fold_dtype_float64" in paths
    assert est.best_params_["alpha"] == pytest.approx(scale * base.best_params_["alpha"])
    assert est.best_iteration_ == base.best_iteration_
    assert_allclose(est.kfold_path_ / scale**2, base.kfold_path_, rtol=1e-9)
    assert_allclose(est.coef_ / scale, base.coef_, rtol=1e-9, atol=1e-12)
    with record() as paths:  # units of 1: float32, as before
        search(1.0, "auto")
    assert "fold_dtype_float64" not in paths


@pytest.mark.parametrize("scale", SCALES)
def test_kfold_ridge_choice_does_not_depend_on_the_target_units(data, scale):
    """Ridge's penalty does not scale with the target: the same alpha,
    iteration and path."""
    X, y = data
    grid = {"alpha": [10.0, 1.0]}

    def search(s, fold_dtype):
        return TrajectoryEarlyStoppingCV(IterativeRidge(max_iter=80), criterion="kfold",
                                         param_grid=grid, fold_dtype=fold_dtype,
                                         random_state=0).fit(X, s * y)

    base, est = search(1.0, "float64"), search(scale, "auto")
    assert est.best_params_ == base.best_params_
    assert est.best_iteration_ == base.best_iteration_
    assert_allclose(est.kfold_path_ / scale**2, base.kfold_path_, rtol=1e-9)


@pytest.mark.parametrize("scale", [1e10, 1e-10])
def test_huber_joint_scale_follows_the_target_units(data, scale):
    """The pilot ``HuberRegressor`` of ``scale="auto"``: with ``y = s y'``
    and ``alpha = alpha' / s`` the joint minimiser is ``s`` times the one
    of ``y'`` (the objective is ``s`` times the other). Fitted on ``y``
    itself its L-BFGS stalled from units of about 1e6: at 1e10 its scale
    came back 165 instead of 5e10, and the path at that scale was the zero
    model. On ``y`` in units of 1 it is scikit-learn's."""
    from sklearn.linear_model import HuberRegressor

    from skacv.estimators._huber import joint_scale

    X, y = data
    unit = joint_scale(X, y, None, 1.35, 1e-4, True)
    assert unit == pytest.approx(HuberRegressor().fit(X, y).scale_, rel=1e-3)
    assert joint_scale(X, scale * y, None, 1.35, 1e-4 / scale, True) == pytest.approx(
        scale * unit, rel=1e-9)


@pytest.mark.parametrize("scale", [1e10, 1e-10])
def test_huber_literal_default_does_not_depend_on_the_target_units(data, scale):
    """``TrajectoryEarlyStoppingCV(TrajectoryHuberRegressor())``: its grid is
    anchored at the unpenalised joint scale (the noise's), so it scales as
    the penalty's units do (``1 / s``); the choice, the iteration and the
    scale are those of the target in units of 1."""
    from skacv import TrajectoryHuberRegressor

    X, y = data
    rng = np.random.default_rng(1)
    y = y + 20.0 * (rng.uniform(size=y.shape) < 0.05)  # (a few outliers)
    base = TrajectoryEarlyStoppingCV(TrajectoryHuberRegressor(max_iter=150),
                                     random_state=0).fit(X, y)
    est = TrajectoryEarlyStoppingCV(TrajectoryHuberRegressor(max_iter=150),
                                    random_state=0).fit(X, scale * y)
    assert_allclose(np.array(est.cv_results_["param_alpha"], dtype=float) * scale,
                    np.array(base.cv_results_["param_alpha"], dtype=float), rtol=1e-9)
    assert est.best_params_["alpha"] * scale == pytest.approx(base.best_params_["alpha"],
                                                              rel=1e-9)
    assert est.best_iteration_ == base.best_iteration_
    assert est.best_estimator_.scale_ == pytest.approx(scale * base.best_estimator_.scale_,
                                                       rel=1e-9)
    assert_allclose(est.predict(X) / scale, base.predict(X), rtol=1e-7, atol=1e-9)
