"""Closed-form approximate leave-one-out at the last iterate: NS, IJ, ALO.

Newton step (Beirami et al. 2017; Rad & Maleki 2020), infinitesimal
jackknife (Giordano et al. 2019) and approximate leave-one-out (Rad & Maleki
2020), on the active set of an ``l1`` penalty (Stephenson & Broderick 2020),
for the same left-out target as :mod:`skacv.estimates.loo._iacv` (frequency weights, the
left-out objective's own penalty and re-centring). Only the predictions are
formed (Sherman-Morrison: one Cholesky factorisation, ``O(n |E|^2)``).
"""

import warnings

import numpy as np
from scipy import linalg
from scipy.special import expit
from sklearn.utils import Bunch
from sklearn.utils.validation import check_is_fitted

from ..._config import check_memory, working_memory_bytes
from ...linalg._linalg import independent_columns
from ...utils._parallel import factorization_blas
from ...utils._validation import user_stacklevel
from ._refit import check_loo_estimator
from ._track import removed_weights

_METHODS = ("alo", "ns", "ij")


def approximate_loo_at(design, datafit, iteration, theta, U, target, method="alo"):
    """NS / IJ / ALO left-out linear predictors at the iterate ``theta``.

    Parameters
    ----------
    design : Design
        The fit's design (weights, ``n_eff``, intercept handling).
    datafit : datafit of :mod:`skacv.iterations._datafits`
    iteration : Iteration
        The fit's iteration (its penalty defines the left-out objective).
    theta : ndarray of shape (n_coef,)
        Iterate in the fit's coordinates.
    U : ndarray of shape (n_samples, n_coef)
        Unweighted rows in the fit's coordinates (centred for least squares
        with an intercept; ``[x_i, 1]`` for the logistic intercept column).
    target : ndarray of shape (n_samples,)
        Unweighted target of the fit (centred ``y``, or labels in {0, 1}).
    method : {"alo", "ns", "ij"}

    Returns
    -------
    eta_loo : ndarray of shape (n_samples,)
        Left-out linear predictors (``inf`` at leverage 1).
    scale : ndarray of shape (n_samples,)
        ``1 + eps_i``: the left-out residual of least squares with an
        intercept is ``scale * (target - eta_loo)`` (re-centring).
    active_set : ndarray of int
    """
    w, rho, W_minus = removed_weights(design)
    W, m = float(design.n_eff), theta.shape[0]
    penalty = iteration.penalty
    l1 = penalty.l1_
    pen = penalty.penalized(m)
    E = np.arange(m) if penalty.is_smooth else np.flatnonzero((theta != 0) | ~pen)
    eta = U @ theta
    g, curv = datafit.derivatives(eta, target)
    if datafit.quadratic and design.fit_intercept:
        eps = rho / W_minus
    else:
        eps = np.zeros_like(rho)
    kappa = rho * (1.0 + eps)
    l2 = float(iteration.l2)
    beta_i = W_minus * penalty.l2_at(np.where(W_minus > 0, W_minus, 1.0))  # sum form
    l1_i = W_minus * penalty.l1_at(np.where(W_minus > 0, W_minus, 1.0))  # sum form
    beta_ref = float(np.mean(beta_i[rho > 0])) if np.any(rho > 0) else W * l2
    UE = U[:, E]
    penE = pen[E].astype(np.float64)
    A = UE.T @ (UE * (w * curv)[:, None]) + np.diag(beta_ref * penE)
    if l1 > 0 and E.size:
        # the active set's columns may be dependent (duplicates, every level
        # of a one-hot feature beside the intercept): the predictions depend
        # on their span only; on a basis of it the Newton step is the
        # minimum-norm one (the same at a solution, where the l1
        # sub-gradient on E lies in the span of the rows)
        basis = independent_columns(A, design.policy)
        if basis.size < E.size:
            E, UE, penE = E[basis], UE[:, basis], penE[basis]
            A = A[np.ix_(basis, basis)]
    try:
        with factorization_blas("cholesky", A.shape[0], design.policy):
            cf = linalg.cho_factor(A, lower=True)
    except linalg.LinAlgError as exc:
        raise ValueError(
            f"The Hessian on the active set ({E.size} coordinates) is not positive "
            f"definite, so {method.upper()} is undefined (p > n without penalty, or "
            "collinear features). Use estimate_loo=True (IACV) instead."
        ) from exc
    rhs = np.column_stack([
        -(UE.T @ (w * g)),                 # gradient of the data fit
        penE * theta[E],                   # P theta
        penE * np.sign(theta[E]),          # l1 sub-gradient on E
    ])
    proj = UE @ linalg.cho_solve(cf, rhs)
    h = np.empty(U.shape[0])
    L = np.tril(cf[0])
    step = max(1, int(working_memory_bytes() // (8 * max(E.size, 1))))
    for s in range(0, U.shape[0], step):
        Z = linalg.solve_triangular(L, UE[s: s + step].T, lower=True)
        h[s: s + step] = np.einsum("ij,ij->j", Z, Z)
    if method == "alo":
        num = kappa * g * h + (beta_i - W * l2) * proj[:, 1] + (l1_i - W * l1) * proj[:, 2]
    else:
        num = proj[:, 0] + beta_i * proj[:, 1] + l1_i * proj[:, 2] + kappa * g * h
    if method == "ij":
        denom = np.ones_like(h)
    else:
        denom = 1.0 - kappa * curv * h
        if np.any(denom <= 1e-12):
            warnings.warn(
                f"{int(np.sum(denom <= 1e-12))} samples have leverage 1 on the active "
                "set: their left-out prediction is undefined (infinite).", RuntimeWarning,
                stacklevel=user_stacklevel())
    with np.errstate(divide="ignore", invalid="ignore"):
        eta_loo = eta - np.where(denom > 1e-12, num / denom, np.inf)
    return eta_loo, 1.0 + eps, E


def approximate_loo(estimator, X, y, sample_weight=None, method="alo"):
    """Closed-form approximate leave-one-out at the last iterate.

    With ``theta`` the last iterate, ``F_{-i}`` the left-out objective
    (sum form; see :func:`exact_loo_path` for the definition) and ``H_{-i}``
    its Hessian on the active set ``E`` (every coordinate for smooth
    penalties; the non-zero penalised coordinates and the intercept for
    ``l1``, as in Rad & Maleki 2020 and Stephenson & Broderick 2020):

    * ``"ns"`` (Newton step; Beirami et al. 2017, Rad & Maleki 2020):
      ``theta_{-i} = theta - H_{-i}^{-1} grad F_{-i}(theta)``;
    * ``"ij"`` (infinitesimal jackknife; Giordano et al. 2019): the same
      with the Hessian that keeps sample ``i``;
    * ``"alo"`` (Rad & Maleki 2020): the Newton step assuming ``theta`` is
      the minimiser (``grad F(theta) = 0`` on ``E``), which is the leverage
      formula ``eta_i + ell'_i h_i / (1 - ell''_i h_i)``.

    ``"ns"`` and ``"ij"`` keep the gradient of ``F`` at ``theta``, so they
    target the left-out *minimiser* even before convergence (Luo, Ren &
    Barber 2023 compare IACV with them along the path). ALO and NS are
    exact leave-one-out for ridge least squares at the minimiser (left-out
    residual ``r_i / (1 - h_i)``), NS for any quadratic objective; IJ is
    their first-order expansion (``r_i (1 + h_i)``). With ``l1``, linearly dependent columns in
    ``E`` (duplicates; every level of a one-hot encoded feature beside the
    intercept) are reduced to a basis of their span (pivoted Cholesky),
    which leaves the predictions unchanged at a minimiser; ``active_set``
    is then that basis.

    Parameters
    ----------
    estimator : fitted TrajectoryLasso, IterativeRidge, TrajectoryHuberRegressor or
        TrajectoryLogisticRegression
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        Training data of the fit.
    y : array-like of shape (n_samples,)
    sample_weight : array-like of shape (n_samples,), default=None
        The fit's weights (frequency weights; one unit is left out).
    method : {"alo", "ns", "ij"}, default="alo"

    Returns
    -------
    result : Bunch
        ``predictions`` (n_samples,): left-out predictions (probabilities of
        ``classes_[1]`` for a classifier); ``loss``: their weighted mean
        squared error (log-loss); ``error``: misclassification rate
        (classifier only); ``active_set`` the coordinates ``E``.
    """
    check_loo_estimator(estimator, "approximate_loo")
    check_is_fitted(estimator)
    if method not in _METHODS:
        raise ValueError(f"method must be 'alo', 'ns' or 'ij'; got {method!r}.")
    prob = estimator._problem(X, y, sample_weight)
    design, datafit = prob.design, prob.datafit
    theta = np.asarray(estimator._fit_coef_path()[:, -1], dtype=np.float64)
    check_memory(8 * design.n_samples * theta.shape[0],
                 f"the dense rows for {method.upper()} ({design.n_samples} x {theta.shape[0]})")
    eta_loo, scale, E = approximate_loo_at(design, datafit, prob.iteration, theta, prob.rows,
                                           prob.target_rows, method)
    w = np.ones(design.n_samples) if design.weight is None else np.asarray(
        design.weight, dtype=np.float64)
    W = float(design.n_eff)
    target = prob.target_rows
    if datafit.classifier:
        loss = w @ datafit.loss_terms(eta_loo, target) / W
        err = w @ ((eta_loo > 0) != (target > 0.5)) / W
        return Bunch(predictions=expit(eta_loo), loss=float(loss), error=float(err),
                     active_set=E)
    res = scale * (target - eta_loo)
    pred = np.asarray(prob.y, dtype=np.float64) - res
    return Bunch(predictions=pred, loss=float(w @ (res * res) / W), active_set=E)
