""":class:`~skacv.TrajectoryEarlyStoppingCV` on a Dask input: the criterion
and the folds resolved on the rows, then one pass over them
(:mod:`skacv.linalg._dask`: the row statistics of every fold and their
compressed sample), the folds as blocks of rows of that sample."""

import numpy as np

from ..estimators._advice import warn_weight_scale
from ..estimators._dask_fit import check_dask_solver
from ..linalg._dask import (
    RowSource,
    as_frame,
    check_gram_limit,
    compressed_sample,
    dask_rows,
    fold_labels,
    row_statistics,
)


def check_dask_search(estimator, criterion):
    """Refuse (ValueError) a search on a Dask input whose estimator needs
    single rows (:func:`~skacv.estimators._dask_fit.check_dask_solver`) or
    whose criterion is leave-one-out."""
    check_dask_solver(estimator)
    if criterion == "loo" or estimator.get_params(deep=False).get("estimate_loo"):
        raise ValueError(
            f"TrajectoryEarlyStoppingCV({type(estimator).__name__}): leave-one-out "
            "(criterion='loo', estimate_loo=True) is not available in a search on a Dask "
            "input. Use criterion='risk' or 'kfold' with estimate_loo=False, fit the "
            "estimator alone with estimate_loo=True and loo_options={'subsample': <int>}, "
            "or fit on an in-memory array (X.compute())."
        )


def sufficient_search(search, X, y, params, groups=None):
    """``TrajectoryEarlyStoppingCV.fit``'s data on a Dask input: resolves the
    criterion and the folds on the rows, then one pass gives every fold's
    moments and their compressed sample. Returns ``X, y, params, splits``
    (the compressed sample, ``params["sample_weight"]`` its weights, and the
    folds as its blocks of rows, ``None`` without K-fold) and ``source``, the
    rows behind the sample (``rows_behind(source)`` while the candidates are
    fitted: their Hutchinson probes are then those of the rows).
    """
    X, y, w, names = dask_rows(X, y, params.get("sample_weight"))
    search._resolve(X)
    check_dask_search(search.estimator, search.criterion_)
    if search.criterion_ != "kfold":  # (K-fold reads the weights' ratios)
        warn_weight_scale(search.estimator, w, search._policies[1])
    if y is None:
        raise ValueError("TrajectoryEarlyStoppingCV requires y to be passed, but the target y "
                         "is None.")
    check_gram_limit(X.shape[1])
    splits = search._folds(X, y, groups)
    labels = None if splits is None else fold_labels(splits, X.shape[0])
    stats = row_statistics(X, y, w, labels, 1 if splits is None else len(splits))
    fit_intercept = search.estimator.get_params()["fit_intercept"]
    Xc, yc, wc, groups = compressed_sample(stats, fit_intercept, X.dtype)
    if splits is not None:
        splits = [(np.concatenate([g for k, g in enumerate(groups) if k != j]), groups[j])
                  for j in range(len(groups))]
    source = RowSource(X, w, Xc, wc, fit_intercept)
    return as_frame(Xc, names), yc, {**params, "sample_weight": wc}, splits, source
