"""``positive=True`` of TrajectoryLasso and TrajectoryElasticNet: the prox
``max(0, soft-threshold)``, its Jacobian the mask of the positive coordinates.

* at convergence, scikit-learn's ``Lasso(positive=True)`` and
  ``ElasticNet(positive=True)`` (dense, sparse, weighted, ``l1_ratio=0``);
* the memory matrix and ``risk_path_`` against explicit Jacobians,
  ``loo_path_`` against brute-force leave-one-out refits, the stacked K folds
  against separate fold fits;
* the search: no converged alpha path (a clear error), the literal default
  walks ``auto_alpha_grid``, whose largest alpha is the smallest with a zero
  solution (scikit-learn's KKT conditions);
* the one-sided duality gap.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose
from sklearn.linear_model import ElasticNet, Lasso
from sklearn.model_selection import KFold
from test_elastic_net import _brute_force_loo
from test_kfold import _by_hand
from test_uq import _brute_force, _data

from skacv import TrajectoryEarlyStoppingCV, TrajectoryElasticNet, TrajectoryLasso, risk_alpha_path
from skacv._policy import current_policies
from skacv.iterations._penalties import L1, soft_threshold
from skacv.model_selection._alpha_path import supports_alpha_path
from skacv.model_selection._kfold import StackedFolds


def _problem(n=60, p=30, seed=0):
    """Half of the true coefficients negative: the constraint binds."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + 0.3 * rng.standard_normal((n, 1)) + 1.0
    beta = np.zeros(p)
    beta[:8] = [2.0, -1.5, 1.0, -1.0, 0.8, -0.7, 0.5, -0.4]
    y = X @ beta + 0.5 * rng.standard_normal(n) + 2.0
    return X, y


def _sklearn(X, y, alpha, l1_ratio, sample_weight=None, positive=True):
    kw = dict(alpha=alpha, fit_intercept=True, tol=1e-14, max_iter=200_000, positive=positive)
    est = Lasso(**kw) if l1_ratio == 1.0 else ElasticNet(l1_ratio=l1_ratio, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (l1_ratio=0: coordinate descent's advice)
        return est.fit(X, y, sample_weight=sample_weight)


def test_prox_is_the_positive_part_of_the_soft_threshold():
    rng = np.random.default_rng(0)
    pre = rng.standard_normal((7, 3))
    assert_allclose(L1(0.5, positive=True).prox(pre, 0.4), np.maximum(soft_threshold(pre, 0.2), 0))
    out = L1(0.5, positive=True, n_unpenalized=1).prox(pre, 0.4)
    assert_allclose(out[:-1], np.maximum(pre[:-1] - 0.2, 0))
    assert_allclose(out[-1], pre[-1])  # the intercept is neither thresholded nor clipped
    assert not L1(0.0, positive=True).is_smooth


@pytest.mark.parametrize("l1_ratio", [1.0, 0.5, 0.0])
@pytest.mark.parametrize("kind", ["dense", "sparse", "weighted"])
def test_converged_path_equals_sklearn_positive(kind, l1_ratio):
    X, y = _problem(seed=1)
    sw = np.random.default_rng(3).uniform(0.2, 3.0, X.shape[0]) if kind == "weighted" else None
    if kind == "sparse":
        X = np.where(np.random.default_rng(4).uniform(size=X.shape) < 0.5, 0.0, X)
    alpha = 0.05
    ref = _sklearn(X, y, alpha, l1_ratio, sw)
    free = _sklearn(X, y, alpha, l1_ratio, sw, positive=False)
    assert free.coef_.min() < -0.1  # the constraint binds
    Xfit = sp.csr_matrix(X) if kind == "sparse" else X
    for solver in ("fista", "ista"):
        est = TrajectoryElasticNet(alpha, l1_ratio=l1_ratio, positive=True, solver=solver,
                                   max_iter=4000 if solver == "fista" else 30000,
                                   estimate_risk=False).fit(Xfit, y, sample_weight=sw)
        assert est.coef_path_.min() >= 0
        assert_allclose(est.coef_, ref.coef_, rtol=0, atol=1e-6)
        assert_allclose(est.intercept_, ref.intercept_, rtol=0, atol=1e-6)
    lasso = TrajectoryLasso(alpha, positive=True, max_iter=4000, estimate_risk=False)
    if l1_ratio == 1.0:
        assert_allclose(lasso.fit(Xfit, y, sample_weight=sw).coef_, ref.coef_, atol=1e-6)


def test_sgd_iterates_stay_non_negative():
    X, y = _problem(seed=2)
    est = TrajectoryLasso(0.05, positive=True, solver="sgd", max_iter=50, random_state=0).fit(X, y)
    assert est.coef_path_.min() >= 0 and np.count_nonzero(est.coef_) > 0
    assert np.all(np.isfinite(est.risk_path_))


@pytest.mark.parametrize("l1_ratio", [1.0, 0.5])
@pytest.mark.parametrize("kind", ["ista", "fista"])
def test_memory_matrix_and_risk_against_explicit_jacobians(kind, l1_ratio):
    X, y, _, _ = _data(30, 40, 5, 1, rho=0.4)
    y = y - 2.0 * X[:, 0] - 1.5 * X[:, 6]  # negative coefficients to clip
    n = X.shape[0]
    alpha = 0.1
    est = TrajectoryElasticNet(alpha, l1_ratio=l1_ratio, positive=True, solver=kind,
                               max_iter=8, fit_intercept=False, n_probes=None).fit(X, y)
    free = TrajectoryElasticNet(alpha, l1_ratio=l1_ratio, solver=kind, max_iter=8,
                                fit_intercept=False, estimate_risk=False).fit(X, y)
    assert free.coef_path_.min() < 0 and 0 < np.count_nonzero(est.coef_) < X.shape[1]
    Rx, Ax = _brute_force(X, y, est.coef_path_, est.step_size_, kind,
                          l2=alpha * (1 - l1_ratio))
    assert_allclose(est.memory_matrix_, Ax, atol=1e-10 * np.abs(Ax).max())
    assert_allclose(est.risk_path_, np.diag(Rx.T @ Rx / n), rtol=1e-9)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("solver", ["ista", "fista"])
def test_loo_path_equals_brute_force_leave_one_out(solver, weighted):
    X, y = _problem(25, 35, seed=7)
    sw = np.random.default_rng(8).uniform(0.5, 2.0, 25) if weighted else None
    est = TrajectoryElasticNet(0.1, l1_ratio=0.7, positive=True, solver=solver, max_iter=30,
                               estimate_risk=False, estimate_loo=True).fit(X, y,
                                                                           sample_weight=sw)
    assert_allclose(est.loo_path_, _brute_force_loo(est, X, y, sw), rtol=1e-10)


@pytest.mark.parametrize("weighted", [False, True])
def test_stacked_folds_equal_separate_fold_fits(weighted):
    X, y = _problem(80, 40, seed=9)
    sw = np.random.default_rng(1).integers(0, 3, 80).astype(float) if weighted else None
    est = TrajectoryLasso(alpha=0.05, positive=True, max_iter=40, estimate_risk=False)
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    expected, steps = _by_hand(est, X, y, sw, splits)
    folds = StackedFolds(est, X, y, sw, splits, np.dtype(np.float64), current_policies())
    assert_allclose(folds.step_sizes, steps, rtol=1e-12)
    assert_allclose(folds.advance(40), expected, rtol=1e-11)


def test_search_walks_the_positive_grid_without_an_alpha_path():
    X, y = _problem(80, 30, seed=5)
    est = TrajectoryLasso(positive=True, max_iter=60)
    assert not supports_alpha_path(est, X.shape[0])
    with pytest.raises(ValueError, match="positive=True"):
        risk_alpha_path(est, X, y)
    with pytest.raises(ValueError, match="positive=True"):
        TrajectoryEarlyStoppingCV(est, search="path").fit(X, y)
    # the grid's top: the smallest alpha of a zero solution (the positive correlations)
    alphas = est.auto_alpha_grid(X, y)
    assert TrajectoryLasso().auto_alpha_grid(X, y) is None  # (the alpha path instead)
    assert np.all(np.diff(alphas) < 0)
    assert np.count_nonzero(_sklearn(X, y, alphas[0] * 1.001, 1.0).coef_) == 0
    assert np.count_nonzero(_sklearn(X, y, alphas[0] * 0.99, 1.0).coef_) > 0
    sw = np.random.default_rng(6).uniform(0.5, 2.0, X.shape[0])  # weighted, sparse
    top = est.auto_alpha_grid(sp.csr_matrix(X), y, sw)[0]
    assert np.count_nonzero(_sklearn(X, y, top * 1.001, 1.0, sw).coef_) == 0
    assert np.count_nonzero(_sklearn(X, y, top * 0.99, 1.0, sw).coef_) > 0
    search = TrajectoryEarlyStoppingCV(est).fit(X, y)
    assert search.search_ == "grid"
    walked = [p["alpha"] for p in search.cv_results_["params"]]
    assert_allclose(walked, alphas[:len(walked)])
    best = search.best_params_["alpha"]
    refit = TrajectoryLasso(best, positive=True, max_iter=search.estimator_.max_iter).fit(X, y)
    assert_allclose(search.estimator_.coef_path_, refit.coef_path_, rtol=1e-12, atol=1e-14)
    assert search.estimator_.coef_.min() >= 0
    # the chosen iterate against the unconstrained truth of this design: a useful fit
    assert np.count_nonzero(search.best_estimator_.coef_) > 0


def test_duality_gap_is_one_sided():
    """At scikit-learn's positive solution the one-sided gap vanishes; the
    two-sided one does not (features that would take negative coefficients)."""
    X, y = _problem(seed=11)
    alpha = 0.05
    ref = _sklearn(X, y, alpha, 1.0)
    Xc, yc = X - X.mean(0), y - y.mean()
    n = X.shape[0]
    r = yc - Xc @ ref.coef_
    args = (float(r @ r), float(r @ yc), Xc.T @ r / n, ref.coef_, float(n))
    assert abs(L1(alpha, positive=True).duality_gap(*args)) < 1e-10
    assert L1(alpha).duality_gap(*args) > 1e-3


def test_auto_alpha_grid_leaves_the_estimator_unfitted():
    """The public ``auto_alpha_grid`` of every estimator that has one reads
    the data without fitting the estimator (no ``n_features_in_``)."""
    from skacv import TrajectoryHuberRegressor, TrajectoryLogisticRegression

    X, y = _problem(30, 8, seed=3)
    for est, target in [(TrajectoryElasticNet(positive=True), y),
                        (TrajectoryHuberRegressor(), y),
                        (TrajectoryLogisticRegression(), (y > np.median(y)).astype(int))]:
        assert est.auto_alpha_grid(X, target).shape[0] > 1
        assert not hasattr(est, "n_features_in_"), type(est).__name__
