"""TrajectoryLogisticRegression: the fit (against scikit-learn), its methods and
the scikit-learn contract. The leave-one-out estimates are tested in
test_loo.py."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn
from scipy.special import expit
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.utils.fixes import parse_version
from sklearn_versions import expected_failed_checks, parametrize_with_checks

from skacv import TrajectoryLogisticRegression


def _data(n=120, p=5, seed=0, offset=0.4):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, p)
    theta = rng.randn(p)
    y = (rng.rand(n) < expit(X @ theta + offset)).astype(int)
    return X, np.where(y == 1, "yes", "no")


def _sklearn(alpha, penalty, fit_intercept, X, y, sample_weight=None):
    """LogisticRegression with C = 1 / (alpha sum(w)) (our mean-form objective)."""
    W = X.shape[0] if sample_weight is None else sample_weight.sum()
    kw = dict(solver="lbfgs", l1_ratio=0.0) if penalty == "l2" else dict(
        solver="saga", l1_ratio=1.0)
    if parse_version(sklearn.__version__) < parse_version("1.8"):
        kw = {"penalty": penalty, "solver": kw["solver"]}  # before l1_ratio replaced it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return LogisticRegression(C=1.0 / (alpha * W), fit_intercept=fit_intercept, tol=1e-12,
                                  max_iter=100_000, **kw).fit(X, y, sample_weight=sample_weight)


@pytest.mark.parametrize("penalty, alpha", [("l2", 0.02), ("l1", 0.02)])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_converges_to_sklearn(penalty, alpha, fit_intercept, weighted):
    X, y = _data()
    sw = np.random.RandomState(1).randint(1, 4, X.shape[0]).astype(float) if weighted else None
    est = TrajectoryLogisticRegression(alpha=alpha, penalty=penalty, solver="fista",
                                       max_iter=2500, fit_intercept=fit_intercept)
    est.fit(X, y, sample_weight=sw)
    ref = _sklearn(alpha, penalty, fit_intercept, X, y, sw)
    # lbfgs stops at ~1e-8 on the coefficients; FISTA is converged far below
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-6)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, atol=1e-6)
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    np.testing.assert_array_equal(est.predict(X), ref.predict(X))
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(X), atol=1e-6)


def test_gd_and_sgd_reach_the_same_minimiser():
    X, y = _data(n=200)
    ref = _sklearn(0.05, "l2", True, X, y)
    gd = TrajectoryLogisticRegression(alpha=0.05, solver="gd", max_iter=1500).fit(X, y)
    np.testing.assert_allclose(gd.coef_, ref.coef_, atol=1e-6)
    # SGD with a decreasing step: close to the minimiser, not exactly on it
    sgd = TrajectoryLogisticRegression(alpha=0.05, solver="sgd", batch_size=20, max_iter=4000,
                                       step_schedule=lambda k: 1.0 / (1.0 + k / 200.0),
                                       random_state=0).fit(X, y)
    err_sgd = np.abs(sgd.coef_ - ref.coef_).max()
    err_zero = np.abs(ref.coef_).max()
    assert err_sgd < 0.02 * err_zero


def test_methods_are_consistent():
    X, y = _data()
    est = TrajectoryLogisticRegression(alpha=0.01, max_iter=30).fit(X, y)
    d = est.decision_function(X)
    np.testing.assert_allclose(d, X @ est.coef_[0] + est.intercept_[0])
    P = est.predict_proba(X)
    np.testing.assert_allclose(P[:, 1], expit(d))
    np.testing.assert_allclose(np.exp(est.predict_log_proba(X)), P)
    np.testing.assert_array_equal(est.predict(X), est.classes_[(d > 0).astype(int)])
    D = est.decision_function_path(X)
    assert D.shape == (X.shape[0], 31)
    np.testing.assert_allclose(D[:, -1], d)
    np.testing.assert_allclose(D[:, 0], 0.0)  # the start is zero
    np.testing.assert_array_equal(est.predict_path(X)[:, -1], est.predict(X))
    np.testing.assert_allclose(est.predict_proba_path(X), expit(D))
    staged = list(est.staged_predict_proba(X))
    assert len(staged) == 31
    np.testing.assert_allclose(staged[7][:, 1], expit(D[:, 7]))
    # staged_predict (README: every estimator has it): the labels of each
    # iterate, iterate t that of the fit stopped after t steps
    labels = list(est.staged_predict(X))
    assert len(labels) == 31
    np.testing.assert_array_equal(np.column_stack(labels), est.predict_path(X))
    short = TrajectoryLogisticRegression(alpha=0.01, max_iter=7).fit(X, y)
    np.testing.assert_array_equal(labels[7], short.predict(X))
    assert est.coef_path_.shape == (X.shape[1], 31)
    assert est.coef_.shape == (1, X.shape[1]) and est.intercept_.shape == (1,)


def test_sparse_equals_dense():
    X, y = _data()
    X[np.abs(X) < 0.7] = 0.0
    for solver in ("gd", "sgd"):
        est = TrajectoryLogisticRegression(alpha=0.01, solver=solver, max_iter=40,
                                           random_state=0)
        a = est.fit(X, y).coef_path_
        b = est.fit(sp.csr_matrix(X), y).coef_path_
        np.testing.assert_allclose(a, b, atol=1e-12)


@pytest.mark.parametrize("solver, penalty", [("gd", "l2"), ("fista", "l1"), ("sgd", "l2")])
def test_warm_start_continues_the_path(solver, penalty):
    X, y = _data()
    kw = dict(alpha=0.01, solver=solver, penalty=penalty, batch_size=16, random_state=3)
    cold = TrajectoryLogisticRegression(max_iter=100, **kw).fit(X, y)
    warm = TrajectoryLogisticRegression(max_iter=50, warm_start=True, **kw).fit(X, y)
    warm.set_params(max_iter=100).fit(X, y)
    np.testing.assert_array_equal(warm.coef_path_, cold.coef_path_)
    np.testing.assert_array_equal(warm.intercept_path_, cold.intercept_path_)
    with pytest.raises(ValueError, match="other training data"):
        warm.set_params(max_iter=120).fit(X[::-1], y[::-1])
    with pytest.raises(ValueError, match="must be larger"):
        warm.set_params(max_iter=10).fit(X, y)


def test_bad_input():
    X, y = _data()
    y3 = np.arange(X.shape[0]) % 3
    with pytest.raises(ValueError, match="Only binary classification"):
        TrajectoryLogisticRegression().fit(X, y3)
    with pytest.raises(ValueError, match="1 class"):
        TrajectoryLogisticRegression().fit(X, np.zeros(X.shape[0]))
    with pytest.raises(ValueError, match="Unknown label type"):
        TrajectoryLogisticRegression().fit(X, np.linspace(0, 1, X.shape[0]))
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        TrajectoryLogisticRegression().fit(Xn, y)
    with pytest.raises(ValueError, match="penalty"):
        TrajectoryLogisticRegression(penalty="elasticnet").fit(X, y)
    assert "estimate_risk" not in TrajectoryLogisticRegression().get_params()


@parametrize_with_checks([
    TrajectoryLogisticRegression(penalty="l1", solver="fista", estimate_loo=True,
                                 loo_options={"store_predictions": True}),
], expected_failed_checks=expected_failed_checks)
def test_sklearn_contract_with_loo(estimator, check):
    check(estimator)
