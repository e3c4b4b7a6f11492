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


def _factor_design(seed, n=100, p=200, n_test=4000):
    """Correlated features (4 factors) and 80 % of one class: the
    intercept lags along the early iterates of a small alpha, so that
    the best penalty is far above 1e-3 (measured: LogisticRegressionCV
    chooses alpha = 1.7 to 100)."""
    rng = np.random.default_rng(seed)
    F = rng.normal(size=(n + n_test, 4))
    X = F @ rng.normal(size=(4, p)) + 0.5 * rng.normal(size=(n + n_test, p))
    X = (X - X[:n].mean(0)) / X[:n].std(0)
    y = (rng.random(n + n_test) < expit(1.5 + F @ [0.5, -0.3, 0.2, 0.0])).astype(int)
    return X[:n], y[:n], X[n:], y[n:]


def test_literal_default_chooses_alpha():
    """TrajectoryEarlyStoppingCV(TrajectoryLogisticRegression()) chooses
    alpha on its automatic grid (search="grid" keeps the estimator's).
    Held-out log-loss on 4000 rows, seeds 0-2: literal / LogisticRegressionCV
    0.980 / 0.996 / 0.996, kept alpha / literal 1.038 / 1.050 / 1.076 (over
    seeds 0-11: 0.958-1.109 and 1.010-1.146): a default that kept alpha=1e-3
    has the ratio 1."""
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.metrics import log_loss

    from skacv import TrajectoryEarlyStoppingCV

    to_cv, kept = [], []
    for seed in range(3):
        X, y, X_test, y_test = _factor_design(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            auto = TrajectoryEarlyStoppingCV(TrajectoryLogisticRegression()).fit(X, y)
            fixed = TrajectoryEarlyStoppingCV(TrajectoryLogisticRegression(),
                                              search="grid").fit(X, y)
            ref = LogisticRegressionCV().fit(X, y)
        assert fixed.best_params_ == {} and auto.best_params_["alpha"] > 1.0
        grid = auto.cv_results_["param_alpha"]
        assert np.all(np.diff(grid) < 0) and np.allclose(grid[:-1] / grid[1:], grid[0] / grid[1])
        loss = {name: log_loss(y_test, m.predict_proba(X_test))
                for name, m in [("auto", auto), ("fixed", fixed), ("ref", ref)]}
        to_cv.append(loss["auto"] / loss["ref"])
        kept.append(loss["fixed"] / loss["auto"])
    assert np.median(to_cv) < 1.05 and np.median(kept) > 1.03, (to_cv, kept)


@pytest.mark.parametrize("penalty", ["l2", "l1"])
def test_auto_alpha_grid_scale(penalty):
    """The grid's top: for "l1" the smallest alpha with a zero solution
    (converged FISTA just above and below it), for "l2" the step size's
    curvature bound L (``1 / step_size_ - alpha``)."""
    X, y = _data(n=150, p=6)
    sw = np.random.RandomState(2).randint(1, 4, X.shape[0]).astype(float)
    grid = TrajectoryLogisticRegression(penalty=penalty).auto_alpha_grid(X, y, sw)
    assert grid.shape == (7,) and np.isclose(grid[-1], 1e-4 * grid[0])
    if penalty == "l2":
        est = TrajectoryLogisticRegression(alpha=0.5).fit(X, y, sample_weight=sw)
        assert np.isclose(grid[0], 1.0 / est.step_size_ - 0.5, rtol=1e-6)
        return
    for factor, zero in [(1.001, True), (0.99, False)]:
        est = TrajectoryLogisticRegression(alpha=factor * grid[0], penalty="l1",
                                           max_iter=3000).fit(X, y, sample_weight=sw)
        assert np.all(est.coef_ == 0) == zero


def test_auto_grid_edge_warning(statistical_policy):
    """A choice at the automatic grid's smallest alpha where the criterion
    still falls warns (a grid ended at a tenth of its top); the same
    choice on the default grid, whose end is flat, does not."""
    from skacv import TrajectoryEarlyStoppingCV
    from skacv.exceptions import SelectionBoundaryWarning

    X, y = _data(n=200, p=5, offset=0.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search = TrajectoryEarlyStoppingCV(TrajectoryLogisticRegression()).fit(X, y)
    assert not [w for w in caught if w.category is SelectionBoundaryWarning]
    assert search.best_index_ < len(search.cv_results_["params"]) - 1 or (
        search.cv_results_["min_loo"][-1] >= 0.99 * search.cv_results_["min_loo"][-2])
    statistical_policy(auto_grid_eps=0.1, auto_grid_alphas=3)
    with pytest.warns(SelectionBoundaryWarning, match="smallest of the automatic grid"):
        short = TrajectoryEarlyStoppingCV(TrajectoryLogisticRegression()).fit(X, y)
    assert short.best_index_ == 2
