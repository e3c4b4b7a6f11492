"""Estimators on a Dask input: the fit on the in-memory sample of the rows
(:mod:`skacv.linalg._dask`: one pass for their moments, the rows that
leave-one-out tracks fetched in it) and lazy predictions. Only full-batch
least squares on the plain design runs on the moments (mini-batches and
losses that are not quadratic are refused)."""

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..linalg._dask import (
    RowSource,
    as_frame,
    check_gram_limit,
    dask_rows,
    sample_with_rows,
)
from ..linalg._sampling import rows_behind, subsample_rows
from ._options import resolve_options


def check_dask_solver(estimator):
    """Refuse (``ValueError``, naming what to use instead) an estimator whose
    fit needs single rows: only full-batch least squares on the plain design
    (:meth:`~skacv.estimators.SearchProtocol.stacks_folds`, the condition
    of K-fold CV's stacked folds) runs on the sufficient statistics."""
    if not estimator.stacks_folds():
        solver = estimator.get_params(deep=False).get("solver")
        raise ValueError(
            f"{type(estimator).__name__}(solver={solver!r}) cannot fit a Dask input: only "
            "full-batch least squares runs on the sufficient statistics (TrajectoryLasso "
            "with solver 'ista' or 'fista', IterativeRidge with 'gd', 'nesterov' or "
            "'heavy_ball'). Use one of those or fit on an in-memory array (X.compute())."
        )


def dask_fit(estimator, X, y, sample_weight=None, frozen=None):
    """``estimator._fit`` on a Dask input (docs/internals.rst, the Dask
    section): one pass for the moments (and the rows leave-one-out tracks),
    then the in-memory fit on the compressed sample
    (:func:`~skacv.linalg._dask.sample_with_rows`) with the
    :class:`~skacv.linalg._dask.RowSource` active (the rows' own probes:
    the probe scheme ``"auto"`` takes ``"shared"``)."""
    check_dask_solver(estimator)
    name = type(estimator).__name__
    params = estimator.get_params(deep=False)
    size = resolve_options(estimator, "loo_options").get("subsample")
    if params.get("estimate_loo") and size is None:
        raise ValueError(
            f"{name}: leave-one-out (estimate_loo=True) on a Dask input tracks a subsample "
            "of rows fetched to this machine: set loo_options={'subsample': <int>} (e.g. "
            "1000; loo_path_ is then the control-variate estimate of the subsample), or "
            "fit on an in-memory array (X.compute())."
        )
    if y is None:
        raise ValueError(f"{name} requires y to be passed, but the target y is None.")
    X, y, w, names = dask_rows(X, y, sample_weight)
    check_gram_limit(X.shape[1])
    n, take = X.shape[0], None
    if params.get("estimate_loo"):  # the rows an in-memory fit tracks (the same draw)
        take = np.arange(n) if size >= n else subsample_rows(n, size, params["random_state"])[0]
    Xs, ys, ws, loo = sample_with_rows(X, y, w, params["fit_intercept"], take)
    with rows_behind(RowSource(X, w, Xs, ws, params["fit_intercept"], loo)):
        estimator._fit(as_frame(Xs, names), ys, ws, frozen)
    if take is not None and hasattr(estimator, "loo_indices_"):
        estimator.loo_indices_ = take  # the rows of X, not of the in-memory sample
    return estimator


def _lazy_rows(estimator, X):
    """A Dask ``X`` for the predictions of a fitted ``estimator``: chunked by
    rows, its number of features and names checked against the fit's."""
    check_is_fitted(estimator)
    X, _, _, names = dask_rows(X, lengths=False)
    expected = estimator.n_features_in_
    if X.shape[1] != expected:
        raise ValueError(f"X has {X.shape[1]} features, but {type(estimator).__name__} is "
                         f"expecting {expected} features as input.")
    fitted_names = getattr(estimator, "feature_names_in_", None)
    if names is not None and fitted_names is not None and not np.array_equal(
            names, fitted_names):
        raise ValueError("The feature names of X should match those that were passed during "
                         f"fit: got {list(names)}, fitted on {list(fitted_names)}.")
    return X


def lazy_predictor(estimator, X, coef, intercept):
    """``X @ coef + intercept`` on a Dask input, lazily (a Dask array of
    shape (n_samples,) or (n_samples, k) for ``coef`` of shape (n_features,)
    or (n_features, k)); ``X`` is checked against the fit."""
    X = _lazy_rows(estimator, X)
    return X @ np.asarray(coef, dtype=X.dtype) + np.asarray(intercept, dtype=X.dtype)


def lazy_score(estimator, X, y, sample_weight=None):
    """``R^2`` of ``predict`` on Dask rows, as scikit-learn's ``r2_score``
    (weighted), from sums reduced over the row chunks in one computation."""
    import dask

    X, y, w, _ = dask_rows(X, y, sample_weight)
    pred = lazy_predictor(estimator, X, estimator.coef_, estimator.intercept_)
    y = y.astype(np.float64)
    wt = 1.0 if w is None else w.astype(np.float64)
    total = X.shape[0] * 1.0 if w is None else wt.sum()
    mean = (wt * y).sum() / total
    ss_res, ss_tot = dask.compute((wt * (y - pred) ** 2).sum(), (wt * (y - mean) ** 2).sum())
    if ss_tot == 0:
        return 1.0 if ss_res == 0 else 0.0
    return float(1.0 - ss_res / ss_tot)
