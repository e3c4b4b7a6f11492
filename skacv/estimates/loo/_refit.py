"""Brute-force leave-one-out along a trajectory: the reference of IACV.

Every left-out run is a refit of the estimator on the data without one
sample with the *same* algorithm: the step size, the preconditioner and the
mini-batch sequence of the full fit are held fixed (the fit shell's
``frozen`` set-up), so that :func:`exact_loo_path` is the exact target of
``loo_path_`` (see :mod:`skacv.estimates.loo._iacv` for the definition with weights).
"""

import numpy as np
import sklearn
from sklearn.base import clone, is_classifier
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted, validate_data

from ..._config import get_config
from ...utils._parallel import blas_threads_per_worker, delayed, parallel
from ...utils._validation import check_sample_weight

_ESTIMATE_SWITCHES = ("estimate_risk", "estimate_loo")


def check_loo_estimator(estimator, function):
    """Raise a ``TypeError`` unless ``estimator`` has a leave-one-out path
    (its parameter ``estimate_loo``): the linear trajectory estimators."""
    get_params = getattr(estimator, "get_params", None)
    if get_params is None or "estimate_loo" not in get_params(deep=False):
        hint = (" Pass its fitted estimator_ (the whole path is kept)."
                if hasattr(estimator, "estimator") else "")
        raise TypeError(
            f"{function} takes a linear trajectory estimator with a leave-one-out path "
            "(TrajectoryLasso, TrajectoryElasticNet, IterativeRidge, "
            f"TrajectoryHuberRegressor, TrajectoryLogisticRegression); got "
            f"{type(estimator).__name__}.{hint}")


def reference_fit(estimator, X, y, sample_weight):
    """The fitted full-data estimator whose path the leave-one-out follows."""
    check_loo_estimator(estimator, "exact_loo_path")
    try:
        check_is_fitted(estimator)
        return estimator
    except NotFittedError:
        return _without_estimates(estimator).fit(X, y, sample_weight=sample_weight)


def _without_estimates(estimator, **params):
    """Unfitted clone of ``estimator`` without estimates (and ``params``)."""
    est = clone(estimator)
    switches = est.get_params()
    est.set_params(**params, **{k: False for k in _ESTIMATE_SWITCHES if k in switches})
    return est


def _refit_one(est, full, X, y, sample_weight, i, return_coef):
    """Refit without one unit of weight of sample ``i``; its prediction path."""
    n = X.shape[0]
    if sample_weight is None or sample_weight[i] <= 1:
        keep = np.arange(n) != i
        Xi, yi = X[keep], y[keep]
        swi = None if sample_weight is None else sample_weight[keep]
        frozen = full._frozen_setup(left_out=i)
    else:  # one unit of a repeated row: the same rows and batches
        Xi, yi = X, y
        swi = sample_weight.copy()
        swi[i] -= 1.0
        frozen = full._frozen_setup()
    est._fit(Xi, yi, swi, frozen=frozen)
    pred = est._path_predictions(X[i: i + 1])[0]
    if return_coef:
        return pred, est.coef_path_, est.intercept_path_
    return pred


def exact_refits(estimator, X, y, sample_weight=None, n_jobs=None, indices=None,
                 return_coef=False):
    """Refits of :func:`exact_loo_path` for the samples ``indices``.

    Returns the full fit, the validated data and ``{i: prediction path}``
    (with the left-out coefficient paths when ``return_coef``).
    """
    full = reference_fit(estimator, X, y, sample_weight)
    X, y = validate_data(full, X, y, accept_sparse=("csr", "csc"),
                         dtype=[np.float64, np.float32], reset=False)
    sw = check_sample_weight(full._fit_weights(y, sample_weight), X, np.float64)
    full._check_fitted_on(X, full._encode_target(y, sw)[0], sw)
    n = X.shape[0]
    if indices is None:
        indices = np.arange(n)
    template = _without_estimates(full, warm_start=False)
    w = np.ones(n) if sw is None else sw
    todo = [i for i in indices if w[i] > 0]
    threads = blas_threads_per_worker(n_jobs)
    # the configurations captured here: joblib may consume the generator of
    # calls in another thread
    config, sklearn_config = get_config(), sklearn.get_config()
    out = parallel(n_jobs)(
        delayed(_refit_one, config, threads, sklearn_config)(
            clone(template), full, X, y, sw, i, return_coef)
        for i in todo
    )
    return full, X, y, sw, dict(zip(todo, out, strict=True))


def _pointwise_loss(full, y, pred):
    """Loss of predictions ``pred`` (n, ...) of targets ``y`` (n,)."""
    if is_classifier(full):
        t = (y == full.classes_[1]).astype(np.float64)
        t = t.reshape(t.shape + (1,) * (pred.ndim - 1))
        p = np.clip(pred, 1e-300, 1.0)
        q = np.clip(1.0 - pred, 1e-300, 1.0)
        return -(t * np.log(p) + (1.0 - t) * np.log(q))
    r = np.asarray(y, dtype=np.float64).reshape(y.shape + (1,) * (pred.ndim - 1)) - pred
    return r * r


def exact_loo_path(estimator, X, y, sample_weight=None, n_jobs=None, return_predictions=False):
    """Brute-force leave-one-out error of every iterate (the reference).

    Refits ``clone(estimator)`` once per sample, without the sample, with
    the data-dependent parts of the full fit's algorithm held fixed (the
    step size ``step_size_``, EigenPro's ``preconditioner_``, the Huber
    and logistic estimators' intercept column and column means, and for
    ``solver="sgd"`` the mini-batches with the sample deleted) and no
    estimates; the prediction of every iterate of the refit at the left-out
    sample gives the loss. With ``sample_weight`` (frequency weights) one
    unit of weight is removed (``w_i - 1``, or the whole row when
    ``w_i <= 1``) and the mean is weighted by ``w_i``; with integer weights
    this is the leave-one-out of the data with repeated rows. Cost:
    ``n_samples`` full fits (in parallel with ``n_jobs``).

    Parameters
    ----------
    estimator : TrajectoryLasso, IterativeRidge, TrajectoryHuberRegressor or
        TrajectoryLogisticRegression
        Fitted (its path is the one left out) or not (a clone is fitted first).
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    sample_weight : array-like of shape (n_samples,), default=None
    n_jobs : int, default=None
        Parallel refits (joblib; BLAS threads are shared out between workers).
    return_predictions : bool, default=False
        Also return the left-out predictions (probabilities of ``classes_[1]``
        for a classifier).

    Returns
    -------
    loo_path : ndarray of shape (n_iter_ + 1,)
        Weighted mean leave-one-out loss (squared error; log-loss for a
        classifier) of every iterate.
    predictions : ndarray of shape (n_samples, n_iter_ + 1)
        Only if ``return_predictions``. Rows of zero weight hold the
        full-data predictions.
    """
    full, X, y, sw, fits = exact_refits(estimator, X, y, sample_weight, n_jobs)
    n = X.shape[0]
    w = np.ones(n) if sw is None else sw
    preds = np.empty((n, full.n_iter_ + 1))
    for i in range(n):
        preds[i] = fits[i] if i in fits else full._path_predictions(X[i: i + 1])[0]
    path = w @ _pointwise_loss(full, y, preds) / w.sum()
    return (path, preds) if return_predictions else path
