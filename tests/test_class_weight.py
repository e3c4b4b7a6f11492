"""``class_weight`` of TrajectoryLogisticRegression: scikit-learn's meaning,
multiplied into ``sample_weight``.

* at convergence, ``LogisticRegression(class_weight=...)`` with ``C = 1 /
  (alpha * sum of the class-weighted sample weights)`` on an unbalanced design;
* a dict equals the same sample weights passed by hand (path and
  ``loo_path_``);
* ``loo_path_`` against brute-force leave-one-out refits on the weighted
  data, and :func:`skacv.exact_loo_path` / :func:`skacv.approximate_loo`
  take the class weights;
* the search with ``class_weight`` on the estimator and in ``param_grid``.
"""

import inspect
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.special import expit
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.utils.class_weight import compute_class_weight

from skacv import (
    TrajectoryEarlyStoppingCV,
    TrajectoryLogisticRegression,
    approximate_loo,
    exact_loo_path,
)


def _unbalanced(n=150, p=5, seed=0):
    """About one sample in six of the class "yes"."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n, p)
    y = rng.rand(n) < expit(X @ rng.randn(p) - 2.0)
    return X, np.where(y, "yes", "no")


#: scikit-learn 1.7 on: "balanced" of the weighted class counts, l1_ratio for l1
_SKLEARN_17 = "sample_weight" in inspect.signature(compute_class_weight).parameters


def _class_weights(class_weight, y, sw=None):
    """``{class: weight}``: "balanced" of the weighted class counts (scikit-learn
    1.7's meaning, by hand where scikit-learn is older), a dict as given."""
    classes, index = np.unique(y, return_inverse=True)
    if not isinstance(class_weight, str):
        return {c: class_weight.get(c, 1.0) for c in classes}
    counts = np.bincount(index, weights=sw)
    return dict(zip(classes, counts.sum() / (classes.size * counts), strict=True))


def _weights(class_weight, y, sw=None):
    cw = _class_weights(class_weight, y, sw)
    w = np.array([cw[c] for c in y])
    return w if sw is None else w * sw


def _sklearn(alpha, penalty, class_weight, X, y, sw):
    W = _weights(class_weight, y, sw).sum()  # the mean form's total weight
    if _SKLEARN_17:
        kw = dict(solver="lbfgs", l1_ratio=0.0) if penalty == "l2" else dict(
            solver="saga", l1_ratio=1.0)
    else:  # its "balanced" ignores the sample weights: the weights themselves
        class_weight = _class_weights(class_weight, y, sw)
        kw = dict(solver="lbfgs") if penalty == "l2" else dict(solver="saga", penalty="l1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return LogisticRegression(C=1.0 / (alpha * W), class_weight=class_weight, tol=1e-12,
                                  max_iter=100_000, **kw).fit(X, y, sample_weight=sw)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("penalty", ["l2", "l1"])
@pytest.mark.parametrize("class_weight", ["balanced", {"yes": 4.0, "no": 0.5}, {"yes": 3.0}])
def test_converges_to_sklearn(class_weight, penalty, weighted):
    X, y = _unbalanced()
    sw = np.random.RandomState(1).uniform(0.3, 2.0, X.shape[0]) if weighted else None
    ref = _sklearn(0.01, penalty, class_weight, X, y, sw)
    est = TrajectoryLogisticRegression(0.01, penalty=penalty, class_weight=class_weight,
                                       max_iter=3000).fit(X, y, sample_weight=sw)
    assert_allclose(est.coef_, ref.coef_, atol=1e-6)
    assert_allclose(est.intercept_, ref.intercept_, atol=1e-6)
    # the weights matter: without them another minimiser
    plain = TrajectoryLogisticRegression(0.01, penalty=penalty, max_iter=3000).fit(
        X, y, sample_weight=sw)
    assert np.abs(plain.intercept_ - est.intercept_).max() > 0.1


def test_dict_equals_the_sample_weights_by_hand():
    X, y = _unbalanced(60, seed=2)
    cw = {"yes": 3.0, "no": 0.7}
    sw = np.random.RandomState(3).uniform(0.5, 2.0, X.shape[0])
    kw = dict(alpha=0.02, max_iter=40, estimate_loo=True)
    a = TrajectoryLogisticRegression(class_weight=cw, **kw).fit(X, y, sample_weight=sw)
    b = TrajectoryLogisticRegression(**kw).fit(X, y, sample_weight=sw * np.where(
        y == "yes", 3.0, 0.7))
    for name in ("coef_path_", "intercept_path_", "loo_path_", "loo_error_path_"):
        assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("class_weight", ["balanced", {"yes": 2.5, "no": 0.6}])
def test_loo_path_equals_brute_force_leave_one_out(class_weight):
    """Frequency weights: one unit of the class-weighted weight left out (the
    whole row at most 1), the mean weighted by them; the step size and the
    intercept column's frame (the full fit's set-up) held."""
    n = 60
    X, y = _unbalanced(n, 5, seed=4)
    est = TrajectoryLogisticRegression(0.01, class_weight=class_weight, max_iter=40,
                                       estimate_loo=True).fit(X, y)
    w = _weights(class_weight, y)
    assert w.max() > 1.0 and w.min() < 1.0  # both kinds of removal
    t = (y == "yes").astype(float)
    losses = np.empty((n, est.n_iter_ + 1))
    for i in range(n):
        left = w.copy()
        left[i] -= min(w[i], 1.0)
        fit = TrajectoryLogisticRegression(0.01, max_iter=40)
        fit._fit(X, y, left, frozen=est._frozen_setup())
        p = fit.predict_proba_path(X[i:i + 1])[0]
        losses[i] = -(t[i] * np.log(p) + (1 - t[i]) * np.log(1 - p))
    brute = w @ losses / w.sum()
    # IACV is first-order accurate (test_loo's tolerance at n = 60): far closer
    # to leave-one-out than the in-sample loss, which the class weights move
    P = est.predict_proba_path(X)
    naive = w @ -np.log(np.where(t[:, None] == 1, P, 1 - P)) / w.sum()
    assert np.all(np.abs(est.loo_path_ - brute)[5:] < 0.1 * np.abs(naive - brute)[5:])
    # the library's brute force takes the class weights (the same refits)
    assert_allclose(exact_loo_path(est, X, y), brute, rtol=1e-10)
    assert np.isfinite(approximate_loo(est, X, y).loss)


def test_search_with_class_weight():
    X, y = _unbalanced(120, seed=5)
    est = TrajectoryLogisticRegression(0.01, max_iter=40)
    grid = {"class_weight": [None, "balanced"]}
    for criterion in ("loo", "kfold"):
        cv = {"cv": 3} if criterion == "kfold" else {}
        search = TrajectoryEarlyStoppingCV(est, param_grid=grid, criterion=criterion,
                                           **cv).fit(X, y)
        assert search.search_ == "grid"
        best = search.best_params_["class_weight"]
        assert search.best_estimator_.class_weight == best
        refit = TrajectoryLogisticRegression(0.01, max_iter=search.best_estimator_.max_iter,
                                             class_weight=best).fit(X, y)
        assert_allclose(search.best_estimator_.coef_path_, refit.coef_path_, rtol=1e-12,
                        atol=1e-15)
    # on the estimator: the literal default search walks a grid of class-weighted fits
    search = TrajectoryEarlyStoppingCV(
        TrajectoryLogisticRegression(class_weight="balanced", max_iter=40),
        criterion="loo").fit(X, y)
    alpha = search.best_params_["alpha"]
    refit = TrajectoryLogisticRegression(alpha, class_weight="balanced",
                                         max_iter=search.best_estimator_.max_iter).fit(X, y)
    assert_allclose(search.best_estimator_.coef_path_, refit.coef_path_, rtol=1e-12,
                    atol=1e-15)
    # the grid's scale from the class-weighted data
    top = TrajectoryLogisticRegression(penalty="l1", class_weight="balanced").auto_alpha_grid(
        X, y)[0]
    w = _weights("balanced", y)
    t = (y == "yes").astype(float)
    assert_allclose(top, np.abs(X.T @ (w * (t - w @ t / w.sum()))).max() / w.sum())


def test_bad_class_weight():
    X, y = _unbalanced(40)
    with pytest.raises(ValueError, match="class_weight"):
        TrajectoryLogisticRegression(class_weight="auto").fit(X, y)
