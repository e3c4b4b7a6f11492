"""Dask input: one distributed pass over the rows, then the in-memory code.

For least squares with many samples and few features, everything skacv
computes after reading the data lives in the features' space: the path runs
in the covariance form (:class:`~skacv.linalg._design.CovarianceForm`, on
``X~^T X~`` and ``X~^T y~``), the residual norms are ``y~^T y~ - 2 b^T X~^T
y~ + b^T X~^T X~ b``, the exact traces of the memory matrix are traces
against ``X~^T X~``, and K-fold CV along the path reads each fold's own
statistics. This module computes those statistics in one pass over the row
chunks of a Dask array -- per chunk the weight, the weighted mean and the
centred Gram matrix of ``[X, y]`` of every group of rows (the whole data, or
each held-out fold), merged pairwise along a tree (the pairwise update of
Chan, Golub & LeVeque 1979) -- and turns them into a *compressed sample*:
``p + 2`` rows of equal weight per group with the same total weight,
weighted mean and centred Gram matrix of ``[X, y]`` as the group's rows.
Every weighted first and second moment of any union of groups (a fold's
training rows, its held-out rows, all rows) is then that of the original
rows, so the estimators, ``risk_path_`` with exact traces, the uncertainty
quantification, K-fold CV along the path and the alpha path run unchanged on
the compressed sample and give the in-memory results up to rounding.

What depends on single rows is refused with a clear error: leave-one-out
(``loo_path_``), mini-batches (SGD) and losses that are not quadratic
(Huber, logistic). Hutchinson probes of ``risk_path_`` (``n_probes`` an
integer) are drawn in the compressed sample's ``p + 2`` coordinates: an
unbiased estimate of the same traces, with other random draws than an
in-memory fit (exact traces, ``n_probes=None``, are identical).
"""

import sys

import numpy as np
from scipy import linalg
from sklearn.base import is_regressor
from sklearn.utils.validation import check_is_fitted

from .._config import get_config

#: the solvers whose fit runs on the sufficient statistics (one full batch
#: of least squares, no preconditioner)
DASK_SOLVERS = ("fista", "ista", "gd", "nesterov", "heavy_ball")


def is_dask(*objs):
    """Whether any of ``objs`` is a Dask collection (array, DataFrame, Series);
    ``False`` without importing Dask when it is not loaded."""
    dask = sys.modules.get("dask")
    if dask is None:
        return False
    return any(obj is not None and dask.is_dask_collection(obj) for obj in objs)


def check_gram_limit(n_features):
    """Refuse more features than ``skacv.get_config()['dask_max_features']``.

    Raises
    ------
    ValueError
        Naming the number of features, the limit and the fix.
    """
    limit = int(get_config()["dask_max_features"])
    if n_features > limit:
        raise ValueError(
            f"A Dask input with {n_features} features is above the limit "
            f"dask_max_features={limit}: its fit runs on (n_features + 1)^2 Gram "
            f"matrices ({8 * (n_features + 1) ** 2 / 2**20:.0f} MiB each, one per fold "
            "and chunk in flight). Raise the limit with "
            "skacv.set_config(dask_max_features=<n>) if the workers' memory allows, select "
            "fewer features, or fit on an in-memory array (X.compute())."
        )


def check_dask_estimator(estimator, criterion=None):
    """Refuse an estimator (or a search criterion) that needs single rows.

    Raises
    ------
    ValueError
        What is not supported on a Dask input and what to use instead.
    """
    name = type(estimator).__name__
    params = estimator.get_params(deep=False)
    solver = params.get("solver")
    # estimators with an intercept column (InterceptColumnMixin: logistic,
    # Huber) have losses that are not quadratic
    least_squares = is_regressor(estimator) and not hasattr(estimator, "_augment")
    if not (least_squares and isinstance(solver, str) and solver in DASK_SOLVERS):
        raise ValueError(
            f"{name}(solver={solver!r}) cannot fit a Dask input: only full-batch least "
            "squares runs on the sufficient statistics (TrajectoryLasso with solver 'ista' "
            "or 'fista', IterativeRidge with 'gd', 'nesterov' or 'heavy_ball'). Use one of "
            "those or fit on an in-memory array (X.compute())."
        )
    if criterion == "loo" or params.get("estimate_loo"):
        raise ValueError(
            f"{name}: leave-one-out (loo_path_, criterion='loo') needs single rows and is "
            "not available on a Dask input. Use estimate_loo=False with risk_path_ "
            "(criterion='risk') or K-fold CV along the path (criterion='kfold'), or fit on "
            "an in-memory array (X.compute())."
        )


def dask_rows(X, y=None, sample_weight=None, lengths=True):
    """``(X, y, sample_weight, feature_names)`` as Dask arrays chunked alike.

    A Dask DataFrame becomes an array (its partitions' lengths are computed
    first with ``lengths=True``: one pass); ``X`` is chunked by rows only,
    in float32 or float64 (other types become float64); ``y`` and
    ``sample_weight`` (Dask, or in memory) follow ``X``'s row chunks.

    Returns
    -------
    X : dask array of shape (n_samples, n_features)
    y, sample_weight : dask arrays of shape (n_samples,) or None
    feature_names : ndarray of str or None
        The DataFrame's column names.
    """
    import dask.array as da

    names = None
    if hasattr(X, "to_dask_array"):  # a Dask DataFrame
        names = np.asarray(X.columns, dtype=object)
        X = X.to_dask_array(lengths=True if lengths else None)
    elif not is_dask(X):
        X = da.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"Expected a 2-D Dask array X, got {X.ndim} dimension(s) of shape "
                         f"{X.shape}. Reshape it, e.g. X.reshape(-1, 1) for one feature.")
    if lengths and any(np.isnan(c) for c in X.chunks[0]):
        X = X.compute_chunk_sizes()
    if X.numblocks[1] > 1:
        X = X.rechunk({1: -1})
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    if y is None and sample_weight is None:
        return X, None, None, names
    rows = X.chunks[0]

    def like(v, what):
        if v is None:
            return None
        if hasattr(v, "to_dask_array"):
            v = v.to_dask_array(lengths=True)
        elif not is_dask(v):
            v = np.asarray(v)
            v = da.from_array(v, chunks=(rows,) + (-1,) * (v.ndim - 1)) if (
                v.ndim and len(v) == X.shape[0]) else da.from_array(v)
        if v.ndim == 2 and v.shape[1] == 1:
            v = v[:, 0]
        if v.ndim != 1 or v.shape[0] != X.shape[0]:
            raise ValueError(f"{what} must have shape ({X.shape[0]},) like the rows of X, got "
                             f"shape {v.shape}.")
        if any(np.isnan(c) for c in v.chunks[0]):
            v = v.compute_chunk_sizes()
        return v.rechunk((rows,))

    return X, like(y, "y"), like(sample_weight, "sample_weight"), names


def fold_labels(splits, n_samples):
    """The held-out fold of every row, from ``(train, test)`` index pairs
    that partition the rows (K-fold); int16 of shape (n_samples,)."""
    labels = np.full(n_samples, -1, dtype=np.int16)
    for j, (train, test) in enumerate(splits):
        test = np.asarray(test)
        if np.any(labels[test] >= 0) or len(train) + len(test) != n_samples:
            raise ValueError(
                "On a Dask input the folds must partition the rows (each row held out "
                "once, trained on otherwise), as KFold's do; got a split that does not. "
                "Use cv=<int> or a KFold.")
        labels[test] = j
    if np.any(labels < 0):
        raise ValueError(f"{int(np.sum(labels < 0))} rows are in no held-out fold; on a Dask "
                         "input the folds must partition the rows (cv=<int> or a KFold).")
    return labels


def _chunk_moments(Xb, yb, wb, lb, n_groups):
    """Weight, weighted mean and centred Gram matrix of ``[X, y]`` per group
    of the rows of one chunk (float64), with the chunk's count of rows and of
    bad values (not finite, negative weights)."""
    n, p = Xb.shape
    Z = np.empty((n, p + 1))
    Z[:, :p] = Xb
    Z[:, p] = yb
    w = np.ones(n) if wb is None else np.asarray(wb, dtype=np.float64)
    bad = int(n - np.isfinite(Z).all(axis=1).sum())
    if wb is not None:
        bad += int(np.sum(~np.isfinite(w) | (w < 0)))
    W = np.zeros(n_groups)
    mean = np.zeros((n_groups, p + 1))
    M = np.zeros((n_groups, p + 1, p + 1))
    if bad:
        return dict(W=W, mean=mean, M=M, n=n, bad=bad)
    for g in range(n_groups):
        # one group: the chunk's copy Z centred in place (no other n x p temporary)
        Zg, wg = (Z, w) if lb is None else (Z[np.asarray(lb) == g], w[np.asarray(lb) == g])
        W[g] = wg.sum()
        if W[g] > 0:
            mean[g] = wg @ Zg / W[g]
            Zg -= mean[g]
            M[g] = Zg.T @ (Zg if wb is None else Zg * wg[:, None])
    return dict(W=W, mean=mean, M=M, n=n, bad=bad)


def _merge(a, b):
    """The moments of the union of two sets of rows (Chan, Golub & LeVeque
    1979): means moved by the weighted difference, Gram matrices summed
    with ``W_a W_b / W`` times the outer product of the difference."""
    W = a["W"] + b["W"]
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(W > 0, b["W"] / np.where(W > 0, W, 1.0), 0.0)
    delta = b["mean"] - a["mean"]
    mean = a["mean"] + f[:, None] * delta
    M = a["M"] + b["M"] + (a["W"] * f)[:, None, None] * (delta[:, :, None] * delta[:, None, :])
    return dict(W=W, mean=mean, M=M, n=a["n"] + b["n"], bad=a["bad"] + b["bad"])


def row_statistics(X, y, sample_weight=None, labels=None, n_groups=1):
    """One pass over the row chunks: the moments of ``[X, y]`` per group.

    Parameters
    ----------
    X : dask array of shape (n_samples, n_features), chunked by rows
    y, sample_weight : dask arrays of shape (n_samples,), chunked like ``X``
    labels : ndarray of int of shape (n_samples,), default=None
        The group (held-out fold) of every row; ``None``: one group.
    n_groups : int

    Returns
    -------
    stats : dict
        ``W`` (n_groups,) the groups' weights, ``mean`` (n_groups,
        n_features + 1) their weighted means of ``[X, y]``, ``M`` (n_groups,
        n_features + 1, n_features + 1) their centred weighted Gram matrices,
        ``n`` the number of rows, all in float64. Computed with Dask's current
        scheduler (a ``distributed.Client`` if one is active).

    Raises
    ------
    ValueError
        When ``X`` or ``y`` holds NaN or infinity, or a weight is negative.
    """
    import dask
    import dask.array as da

    rows = X.chunks[0]
    # the graphs not optimised apart: X and y sliced from one array share its chunks
    xb = X.to_delayed(optimize_graph=False).ravel()
    yb = y.to_delayed(optimize_graph=False).ravel()
    wb = ([None] * len(xb) if sample_weight is None
          else sample_weight.to_delayed(optimize_graph=False).ravel())
    lb = ([None] * len(xb) if labels is None
          else da.from_array(labels, chunks=(rows,)).to_delayed().ravel())
    parts = [dask.delayed(_chunk_moments, pure=True)(*args, n_groups)
             for args in zip(xb, yb, wb, lb, strict=True)]
    while len(parts) > 1:  # a balanced tree of pairwise merges
        parts = [dask.delayed(_merge, pure=True)(parts[i], parts[i + 1]) if i + 1 < len(parts)
                 else parts[i] for i in range(0, len(parts), 2)]
    (stats,) = dask.compute(parts[0])
    if stats["bad"]:
        raise ValueError(
            f"The Dask input holds {stats['bad']} rows with NaN or infinite values in X or y "
            "(or a NaN, infinite or negative sample_weight). Drop or impute them first, "
            "e.g. with dask_ml.impute or X[da.isfinite(X).all(axis=1)].")
    return stats


def _orthogonal_to_ones(m):
    """``m x (m - 1)`` orthonormal columns orthogonal to the vector of ones:
    the Householder reflection taking ``e_1`` to ``1 / sqrt(m)``, without its
    first column."""
    u = np.full(m, -1.0 / np.sqrt(m))
    u[0] += 1.0
    H = np.eye(m) - np.outer(u, u) * (2.0 / (u @ u))
    return H[:, 1:]


def compressed_sample(stats, fit_intercept, dtype=np.float64):
    """``p + 2`` weighted rows per group with the group's moments.

    Per group ``g`` of weight ``W``, weighted mean ``m`` and centred Gram
    matrix ``S`` of ``[X, y]`` (``S + W m m^T``, the raw one, without
    intercept; ``m`` then taken as zero): ``S = R^T R`` (eigendecomposition,
    robust to a singular ``S``), and the rows ``m + Q R / sqrt(W / (p + 2))``
    with ``Q`` orthonormal columns orthogonal to the ones, each of weight
    ``W / (p + 2)``: their weight is ``W``, their weighted mean ``m`` and
    their centred weighted Gram matrix ``R^T R = S``.

    Returns
    -------
    X : ndarray of shape (n_groups * (n_features + 2), n_features)
    y, sample_weight : ndarrays of shape (n_groups * (n_features + 2),)
    groups : list of ndarray
        The rows of every group.
    """
    G, q = stats["mean"].shape
    m = q + 1
    Q = _orthogonal_to_ones(m)
    blocks = []
    for g in range(G):
        W, mean, S = float(stats["W"][g]), stats["mean"][g], stats["M"][g]
        if not W > 0:
            raise ValueError(f"Group {g} of the rows (a held-out fold) has total sample weight "
                             f"{W}: every fold needs rows of positive weight. Use fewer folds "
                             "or shuffle the rows (cv=KFold(shuffle=True)).")
        if not fit_intercept:
            S = S + W * np.outer(mean, mean)
            mean = np.zeros_like(mean)
        lam, V = linalg.eigh(S)
        R = np.sqrt(np.clip(lam, 0.0, None))[:, None] * V.T
        blocks.append(mean + (Q @ R) / np.sqrt(W / m))
    Z = np.vstack(blocks)
    weight = np.repeat(stats["W"] / m, m)
    groups = [np.arange(g * m, (g + 1) * m) for g in range(G)]
    return (np.ascontiguousarray(Z[:, :-1], dtype=dtype), Z[:, -1].astype(dtype),
            weight.astype(dtype), groups)


def _as_frame(Xc, names):
    if names is None:
        return Xc
    import pandas as pd

    return pd.DataFrame(Xc, columns=names)


def sufficient_rows(estimator, X, y, sample_weight=None):
    """The compressed sample of a Dask input for ``estimator.fit``.

    Parameters
    ----------
    estimator : TrajectoryLasso or IterativeRidge
        Full-batch least squares (:func:`check_dask_estimator`).
    X : dask array or DataFrame of shape (n_samples, n_features)
    y : dask array or Series of shape (n_samples,)
    sample_weight : dask array of shape (n_samples,), default=None

    Returns
    -------
    X : ndarray (a pandas DataFrame for a Dask DataFrame) of shape (n_features + 2, n_features)
    y, sample_weight : ndarrays of shape (n_features + 2,)
        In-memory data with the same weighted moments of ``[X, y]``.
    """
    check_dask_estimator(estimator)
    if y is None:
        raise ValueError(f"{type(estimator).__name__} requires y to be passed, but the target "
                         "y is None.")
    X, y, w, names = dask_rows(X, y, sample_weight)
    check_gram_limit(X.shape[1])
    stats = row_statistics(X, y, w)
    Xc, yc, wc, _ = compressed_sample(stats, estimator.get_params()["fit_intercept"], X.dtype)
    return _as_frame(Xc, names), yc, wc


def sufficient_search(search, X, y, params):
    """``TrajectoryEarlyStoppingCV.fit``'s data on a Dask input: resolves the
    criterion and the folds on the rows (``search._resolve``,
    ``search._folds``), then one pass gives every fold's moments and their
    compressed sample, the folds as its blocks of rows.

    Returns
    -------
    X, y, params, splits
        The compressed sample (``params["sample_weight"]`` its weights) and
        the folds on its rows (``None`` without K-fold).
    """
    X, y, w, names = dask_rows(X, y, params.get("sample_weight"))
    search._resolve(X)
    check_dask_estimator(search.estimator, search.criterion_)
    if y is None:
        raise ValueError("TrajectoryEarlyStoppingCV requires y to be passed, but the target y "
                         "is None.")
    check_gram_limit(X.shape[1])
    splits = search._folds(X, y)
    labels = None if splits is None else fold_labels(splits, X.shape[0])
    stats = row_statistics(X, y, w, labels, 1 if splits is None else len(splits))
    fit_intercept = search.estimator.get_params()["fit_intercept"]
    Xc, yc, wc, groups = compressed_sample(stats, fit_intercept, X.dtype)
    if splits is not None:
        splits = [(np.concatenate([g for k, g in enumerate(groups) if k != j]), groups[j])
                  for j in range(len(groups))]
    return _as_frame(Xc, names), yc, {**params, "sample_weight": wc}, splits


def lazy_predictor(estimator, X, coef, intercept):
    """``X @ coef + intercept`` on a Dask input, lazily (a Dask array).

    Parameters
    ----------
    estimator : fitted estimator (its ``n_features_in_`` is checked)
    X : dask array or DataFrame of shape (n_samples, n_features)
    coef : ndarray of shape (n_features,) or (n_features, k)
    intercept : float or ndarray of shape (k,)

    Returns
    -------
    y : dask array of shape (n_samples,) or (n_samples, k)
    """
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
    return X @ np.asarray(coef, dtype=X.dtype) + np.asarray(intercept, dtype=X.dtype)
