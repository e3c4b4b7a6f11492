"""The intercept column of the Huber and logistic estimators
(``skacv.estimators._intercept_column``): their steps run on ``[X - 1 m^T,
s 1]`` (``m`` the weighted column means, ``s`` the largest centred root
mean square), so the path does not depend on where the features' origin
lies. Checked against gradient descent written out on that design, against
the same fits on shifted, sparse and repeated-row data, and the left-out
refits of ``exact_loo_path`` against gradient descent on the design with
the full fit's frame."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from skacv import (
    TrajectoryEarlyStoppingCV,
    TrajectoryHuberRegressor,
    TrajectoryLogisticRegression,
    exact_loo_path,
)

#: feature means of a new user's raw columns (a year, a count, a price)
SHIFT = np.array([50.0, -2000.0, 3.0, 1e4])


def _data(n=150, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4)) * [1.0, 2.0, 0.5, 3.0]
    beta = np.array([1.0, -1.0, 2.0, 0.5])
    y = X @ beta + 1.0 + rng.standard_t(3, n)
    labels = (rng.random(n) < expit(0.5 * X @ beta)).astype(int)
    return X, y, labels


def _frame(X, w=None):
    m = np.average(X, axis=0, weights=w)
    s = np.sqrt(np.average((X - m) ** 2, axis=0, weights=w).max())
    return m, s


def _gd_logistic(A, y, alpha, eta, T):
    """Gradient descent on the mean log-loss plus ``alpha ||w||^2 / 2`` (the
    last coordinate, the intercept's, unpenalised)."""
    theta, path = np.zeros(A.shape[1]), [np.zeros(A.shape[1])]
    for _ in range(T):
        grad = A.T @ (expit(A @ theta) - y) / A.shape[0]
        grad[:-1] += alpha * theta[:-1]
        theta = theta - eta * grad
        path.append(theta)
    return np.array(path).T


def test_the_steps_are_gradient_descent_on_the_centred_design():
    X, _, y = _data()
    X = X + SHIFT
    alpha, T = 0.01, 30
    est = TrajectoryLogisticRegression(alpha=alpha, solver="gd", max_iter=T).fit(X, y)
    m, s = _frame(X)
    A = np.column_stack([X - m, np.full(X.shape[0], s)])
    path = _gd_logistic(A, y, alpha, est.step_size_, T)
    np.testing.assert_allclose(est.coef_path_, path[:-1], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.intercept_path_, s * path[-1] - m @ path[:-1],
                               rtol=1e-9, atol=1e-10)
    # the step size 1 / L is the centred design's, whatever the shift
    unshifted = TrajectoryLogisticRegression(alpha=alpha, solver="gd", max_iter=T)
    np.testing.assert_allclose(unshifted.fit(X - SHIFT, y).step_size_, est.step_size_,
                               rtol=1e-9)


CASES = [
    lambda: TrajectoryHuberRegressor(alpha=1e-3, max_iter=40),
    lambda: TrajectoryHuberRegressor(alpha=1e-3, penalty="l1", max_iter=40),
    lambda: TrajectoryLogisticRegression(alpha=1e-3, solver="gd", max_iter=40),
    lambda: TrajectoryLogisticRegression(alpha=1e-3, penalty="l1", solver="fista", max_iter=40),
    lambda: TrajectoryLogisticRegression(alpha=1e-3, solver="sgd", batch_size=16,
                                         random_state=0, max_iter=40),
]


def _target(est, y, labels):
    return labels if isinstance(est, TrajectoryLogisticRegression) else y


@pytest.mark.parametrize("make", CASES)
@pytest.mark.parametrize("weighted", [False, True])
def test_a_shift_of_the_features_leaves_the_path(make, weighted):
    """The same path on ``X`` and ``X + c`` (the intercept moved by ``-c @
    coef``); on ``[X, 1]`` a shift like this one left the intercept, and the
    literal default's choice, at zero."""
    X, y, labels = _data()
    w = np.random.default_rng(1).integers(1, 4, X.shape[0]).astype(float) if weighted else None
    target = _target(make(), y, labels)
    base = make().fit(X, target, sample_weight=w)
    moved = make().fit(X + SHIFT, target, sample_weight=w)
    scale = np.abs(base.coef_path_).max()
    np.testing.assert_allclose(moved.coef_path_, base.coef_path_, atol=1e-9 * scale)
    np.testing.assert_allclose(moved.intercept_path_ + SHIFT @ moved.coef_path_,
                               base.intercept_path_, atol=1e-8 * max(scale, 1.0) * 1e4)
    Xt = _data(seed=5)[0]
    if hasattr(base, "predict_proba"):
        np.testing.assert_allclose(moved.predict_proba(Xt + SHIFT), base.predict_proba(Xt),
                                   atol=1e-9)
    else:
        np.testing.assert_allclose(moved.predict(Xt + SHIFT), base.predict(Xt),
                                   rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("make", CASES)
def test_sparse_centred_in_its_products_equals_dense(make):
    """A sparse ``X`` is centred implicitly (never densified): the path of
    non-negative, uncentred columns with zeros equals the dense one's,
    weighted too. (The Huber regressor's automatic scale comes from a pilot
    ``HuberRegressor`` fitted on centred dense columns and on the sparse
    ones as they are: the same minimiser, to L-BFGS's tolerance; the paths
    are compared at one scale.)"""
    X, y, labels = _data()
    X = np.where(np.abs(X) < 0.8, 0.0, np.abs(X))  # counts-like, means 0.3-1.3
    w = np.random.default_rng(2).integers(1, 3, X.shape[0]).astype(float)
    target = _target(make(), y, labels)
    dense = make().fit(X, target, sample_weight=w)
    sparse = make().fit(sp.csr_matrix(X), target, sample_weight=w)
    if isinstance(dense, TrajectoryHuberRegressor):
        np.testing.assert_allclose(sparse.scale_, dense.scale_, rtol=1e-4)
        sparse = make().set_params(scale=dense.scale_).fit(sp.csr_matrix(X), target,
                                                          sample_weight=w)
    np.testing.assert_allclose(sparse.coef_path_, dense.coef_path_, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(sparse.intercept_path_, dense.intercept_path_,
                               rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("make", CASES[:4])
def test_integer_weights_are_repeated_rows(make):
    """The frame's means and size are weighted: weights 1-3 give the path of
    the rows repeated."""
    X, y, labels = _data(n=60)
    w = np.random.default_rng(3).integers(1, 4, X.shape[0])
    target = _target(make(), y, labels)
    X = X + SHIFT
    weighted = make().fit(X, target, sample_weight=w.astype(float))
    repeated = make().fit(np.repeat(X, w, axis=0), np.repeat(target, w))
    np.testing.assert_allclose(weighted.coef_path_, repeated.coef_path_, rtol=1e-8, atol=1e-11)
    np.testing.assert_allclose(weighted.intercept_path_, repeated.intercept_path_,
                               rtol=1e-8, atol=1e-7)


def test_left_out_refits_hold_the_frame_fixed():
    """``exact_loo_path``'s refits run gradient descent on the rows of the
    full fit's design (its ``m`` and ``s``, as its step size), not on a
    frame of their own."""
    X, _, y = _data(n=40)
    X = X + SHIFT
    alpha, T = 0.02, 15
    est = TrajectoryLogisticRegression(alpha=alpha, solver="gd", max_iter=T).fit(X, y)
    _, pred = exact_loo_path(est, X, y, return_predictions=True)
    m, s = _frame(X)
    A = np.column_stack([X - m, np.full(X.shape[0], s)])
    for i in (0, 17, 39):
        keep = np.arange(X.shape[0]) != i
        path = _gd_logistic(A[keep], y[keep], alpha, est.step_size_, T)
        np.testing.assert_allclose(pred[i], expit(A[i] @ path), rtol=1e-9, atol=1e-12)


def test_converged_on_shifted_features_is_sklearns_solution():
    X, _, y = _data()
    alpha = 0.01
    est = TrajectoryLogisticRegression(alpha=alpha, solver="fista", max_iter=2000)
    est.fit(X + SHIFT, y)
    ref = LogisticRegression(C=1.0 / (alpha * X.shape[0]), tol=1e-12, max_iter=10_000).fit(X, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-6)
    np.testing.assert_allclose(est.intercept_ + SHIFT @ est.coef_.ravel(), ref.intercept_,
                               atol=1e-5)


@pytest.mark.parametrize("make, classify", [(TrajectoryHuberRegressor, False),
                                            (TrajectoryLogisticRegression, True)])
def test_the_literal_default_chooses_the_same_on_shifted_features(make, classify):
    """``TrajectoryEarlyStoppingCV(est())`` on ``X + c`` chooses what it
    chooses on ``X``. On ``[X, 1]`` with these means it chose the largest
    alpha of its grid and the first iterate: the intercept alone (the
    logistic) or a 15-fold test error (the Huber regressor at means of 10)."""
    X, y, labels = _data(n=120)
    target = labels if classify else y
    base = TrajectoryEarlyStoppingCV(make()).fit(X, target)
    moved = TrajectoryEarlyStoppingCV(make()).fit(X + SHIFT, target)
    assert moved.best_iteration_ == base.best_iteration_
    np.testing.assert_allclose(moved.best_params_["alpha"], base.best_params_["alpha"],
                               rtol=1e-9)
    Xt = _data(seed=7)[0]
    if classify:
        np.testing.assert_allclose(moved.predict_proba(Xt + SHIFT), base.predict_proba(Xt),
                                   atol=1e-8)
    else:
        np.testing.assert_allclose(moved.predict(Xt + SHIFT), base.predict(Xt), rtol=1e-7)


@pytest.mark.parametrize("weighted", [False, True])
def test_a_design_with_offsets_given_is_its_centred_matrix(weighted):
    """``Design(X, w, fit_intercept=False, x_offset=o)``: every product,
    column, norm and Gram matrix of a sparse ``X`` is the dense
    ``sqrt(w) (X - 1 o^T)``'s (its offsets are not the column means: the
    intercept column keeps its size)."""
    from skacv.linalg._design import Design, max_row_norm2

    X, _, _ = _data(n=50)
    X = np.column_stack([np.where(np.abs(X) < 0.8, 0.0, X), np.full(50, 2.5)])
    w = np.random.default_rng(4).integers(1, 4, 50).astype(float) if weighted else None
    offset = np.append(np.average(X[:, :-1], axis=0, weights=w), 0.0)
    dense = np.sqrt(np.ones(50) if w is None else w)[:, None] * (X - offset)
    rng = np.random.default_rng(5)
    b, r = rng.standard_normal(5), rng.standard_normal((50, 2))
    for design in (Design(sp.csr_matrix(X), w, fit_intercept=False, x_offset=offset),
                   Design(X, w, fit_intercept=False, x_offset=offset)):
        assert design.shifted
        np.testing.assert_allclose(design.matvec(b), dense @ b, atol=1e-12)
        np.testing.assert_allclose(design.rmatvec(r), dense.T @ r, atol=1e-12)
        np.testing.assert_allclose(design.columns([1, 4]), dense[:, [1, 4]], atol=1e-12)
        np.testing.assert_allclose(design.column_sq_norms(), (dense ** 2).sum(axis=0),
                                   rtol=1e-12)
        n_eff = 50.0 if w is None else w.sum()
        np.testing.assert_allclose(design.gram("features"), dense.T @ dense / n_eff,
                                   atol=1e-12)
        np.testing.assert_allclose(design.gram("samples"), dense @ dense.T / n_eff,
                                   atol=1e-12)
        rows = (dense ** 2).sum(axis=1) / (1.0 if w is None else w)
        np.testing.assert_allclose(max_row_norm2(design), rows.max(), rtol=1e-12)
        sub = design.rows(np.array([3, 7, 11]))
        np.testing.assert_allclose(sub.matvec(b), dense[[3, 7, 11]] @ b, atol=1e-12)


def test_the_intercept_columns_size_and_norms():
    """The intercept column's size is read from the design's centred column
    norms (dense; no centred copy) or their expansion (sparse): both the
    weighted frame, and the design's cached norms include the column."""
    X, y, _ = _data()
    X = X + SHIFT
    w = np.random.default_rng(6).integers(0, 3, X.shape[0]).astype(float)
    m, s = _frame(X, w)
    for Xf in (X, sp.csr_matrix(X), X.astype(np.float32)):
        est = TrajectoryHuberRegressor(alpha=1e-3, scale=1.0, max_iter=5)
        design = est._make_design(Xf, w)
        offset, size = design.intercept_frame
        # sparse: sum w x^2 - n m^2 loses (m^2 / var) eps, 1e-8 at means of 1e4;
        # float32: X rounded near its means of 1e4, eps32 1e4 / 3 = 2e-4 of a spread
        tol = 1e-4 if Xf.dtype == np.float32 else 1e-7 if sp.issparse(Xf) else 1e-12
        np.testing.assert_allclose(offset, m, rtol=tol)
        np.testing.assert_allclose(size, s, rtol=tol)
        dense = np.sqrt(w)[:, None] * np.column_stack([X - m, np.full(X.shape[0], s)])
        np.testing.assert_allclose(design.column_sq_norms(), (dense**2).sum(axis=0), rtol=tol)
        np.testing.assert_allclose(design.dense(), dense, rtol=tol, atol=tol * 1e4)


def test_the_huber_path_starts_at_the_null_models_intercept():
    """The Huber path starts at zero coefficients and the intercept that
    minimises the weighted Huber loss alone (the null model, brute force by
    ``minimize_scalar``), so a shift of ``y`` shifts the intercept path and
    leaves the coefficients (from zero the intercept moves at most
    ``epsilon * scale`` a step: a level of 1000 at scale 0.7 took over 1000
    steps, beyond the default 100, and the search chose garbage). The
    left-out refits start where the full fit does."""
    from scipy.optimize import minimize_scalar

    from skacv.estimates.loo._refit import exact_refits

    X, y, _ = _data(n=60)
    w = np.random.default_rng(7).integers(0, 3, X.shape[0]).astype(float)
    est = TrajectoryHuberRegressor(alpha=1e-3, scale=1.0, max_iter=30)
    base = est.fit(X, y, sample_weight=w)
    delta = base.epsilon * base.scale_

    def loss(b):
        r = np.abs(y - b)
        return w @ np.where(r <= delta, 0.5 * r * r, delta * r - 0.5 * delta * delta)

    null = minimize_scalar(loss, bounds=(y.min(), y.max()), method="bounded",
                           options={"xatol": 1e-12}).x
    assert np.all(base.coef_path_[:, 0] == 0)
    np.testing.assert_allclose(base.intercept_path_[0], null, atol=1e-8)
    moved = TrajectoryHuberRegressor(alpha=1e-3, scale=1.0, max_iter=30).fit(
        X, y + 1e3, sample_weight=w)
    np.testing.assert_allclose(moved.coef_path_, base.coef_path_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(moved.intercept_path_ - 1e3, base.intercept_path_, atol=1e-9)
    *_, refits = exact_refits(base, X, y, sample_weight=w, indices=[0, 5], return_coef=True)
    for _, _, intercepts in refits.values():
        assert intercepts[0] == base.intercept_path_[0]
