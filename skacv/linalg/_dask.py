"""Dask input: one distributed pass over the row chunks computes the
weight, weighted mean and centred Gram matrix of ``[X, y]`` of every group
of rows (the whole data, or each held-out fold), merged along a tree (the
pairwise update of Chan, Golub & LeVeque 1979), then a *compressed sample*
with the same moments (``p + 2`` rows of equal weight per group). What the
moments do not give is read from the rows (:class:`RowSource`): the images
``X~^T Z`` of the Hutchinson probes and the rows a leave-one-out subsample
tracks. ``docs/internals.rst`` ("Dask: one pass, then everything on p x p")
has why and where the results equal the in-memory ones; fitting on the
sample is :mod:`skacv.estimators._dask_fit`'s.
"""

import sys
import threading

import numpy as np
from scipy import linalg

from .._config import get_config
from .._trace import taken
from ._sampling import signs


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


def _chunk_moments(Xb, yb, wb, lb, n_groups, take=None):
    """Weight, weighted mean and centred Gram matrix of ``[X, y]`` per group
    of the rows of one chunk (float64), with the chunk's count of rows and of
    bad values (not finite, negative weights); ``take`` (local row indices):
    those rows are returned as they are (``rows``, ``row_weight``) and left
    out of every group."""
    n, p = Xb.shape
    Z = np.empty((n, p + 1))
    Z[:, :p] = Xb
    Z[:, p] = yb
    w = np.ones(n) if wb is None else np.asarray(wb, dtype=np.float64)
    bad = int(n - np.isfinite(Z).all(axis=1).sum())
    if wb is not None:
        bad += int(np.sum(~np.isfinite(w) | (w < 0)))
    out = dict(W=np.zeros(n_groups), mean=np.zeros((n_groups, p + 1)),
               M=np.zeros((n_groups, p + 1, p + 1)), n=n, bad=bad)
    if take is not None:
        out["rows"], out["row_weight"] = Z[take], w[take]
        lb = np.zeros(n, dtype=np.int16) if lb is None else np.array(lb, dtype=np.int16)
        lb[take] = -1  # in no group
    if bad:
        return out
    W, mean, M = out["W"], out["mean"], out["M"]
    for g in range(n_groups):
        # one group: the chunk's copy Z centred in place (no other n x p temporary)
        Zg, wg = (Z, w) if lb is None else (Z[np.asarray(lb) == g], w[np.asarray(lb) == g])
        W[g] = wg.sum()
        if W[g] > 0:
            mean[g] = wg @ Zg / W[g]
            Zg -= mean[g]
            M[g] = Zg.T @ (Zg if wb is None else Zg * wg[:, None])
    return out


def _merge(a, b):
    """The moments of the union of two sets of rows (Chan, Golub & LeVeque
    1979): means moved by the weighted difference, Gram matrices summed
    with ``W_a W_b / W`` times the outer product of the difference; the
    rows taken as they are, in order."""
    W = a["W"] + b["W"]
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(W > 0, b["W"] / np.where(W > 0, W, 1.0), 0.0)
    delta = b["mean"] - a["mean"]
    mean = a["mean"] + f[:, None] * delta
    M = a["M"] + b["M"] + (a["W"] * f)[:, None, None] * (delta[:, :, None] * delta[:, None, :])
    out = dict(W=W, mean=mean, M=M, n=a["n"] + b["n"], bad=a["bad"] + b["bad"])
    if "rows" in a:
        out["rows"] = np.vstack([a["rows"], b["rows"]])
        out["row_weight"] = np.concatenate([a["row_weight"], b["row_weight"]])
    return out


def _tree(parts, merge):
    """The delayed ``merge`` of ``parts`` along a balanced binary tree."""
    import dask

    while len(parts) > 1:
        parts = [dask.delayed(merge, pure=True)(parts[i], parts[i + 1]) if i + 1 < len(parts)
                 else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def row_statistics(X, y, sample_weight=None, labels=None, n_groups=1, take=None):
    """One pass over the row chunks: the moments of ``[X, y]`` per group.

    Parameters
    ----------
    X : dask array of shape (n_samples, n_features), chunked by rows
    y, sample_weight : dask arrays of shape (n_samples,), chunked like ``X``
    labels : ndarray of int of shape (n_samples,), default=None
        The group (held-out fold) of every row; ``None``: one group.
    n_groups : int
    take : ndarray of int of shape (k,), default=None
        Sorted rows fetched as they are in the same pass (``rows``,
        ``row_weight``) and left out of the groups.

    Returns
    -------
    stats : dict
        ``W`` (n_groups,) the groups' weights, ``mean`` (n_groups,
        n_features + 1) their weighted means of ``[X, y]``, ``M`` (n_groups,
        n_features + 1, n_features + 1) their centred weighted Gram matrices,
        ``n`` the number of rows, all in float64; with ``take``, ``rows``
        (k, n_features + 1) the rows ``[X, y]`` and ``row_weight`` (k,) their
        weights. Computed with Dask's current scheduler (a
        ``distributed.Client`` if one is active).

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
    tb = [None] * len(xb)
    if take is not None:
        bounds = np.concatenate([[0], np.cumsum(rows)])
        cut = np.searchsorted(take, bounds)
        tb = [take[cut[i]:cut[i + 1]] - bounds[i] for i in range(len(xb))]
    parts = [dask.delayed(_chunk_moments, pure=True)(xc, yc, wc, lc, n_groups, tc)
             for xc, yc, wc, lc, tc in zip(xb, yb, wb, lb, tb, strict=True)]
    (stats,) = dask.compute(_tree(parts, _merge))
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


def as_frame(Xc, names):
    if names is None:
        return Xc
    import pandas as pd

    return pd.DataFrame(Xc, columns=names)


def _chunk_probe_products(Xb, wb, state, m, offset):
    """``X~_b^T Z_b`` (n_features, m) of one chunk: ``Z_b`` its rows of the
    probes, from the generator's ``state`` at the chunk's first row."""
    rng = np.random.RandomState()
    rng.set_state(state)
    Z = signs(rng, (Xb.shape[0], m))
    D = np.asarray(Xb, dtype=np.float64) - offset
    if wb is not None:
        D *= np.sqrt(np.asarray(wb, dtype=np.float64))[:, None]
    return D.T @ Z


class RowSource:
    """The Dask rows behind an in-memory sample (:func:`sample_with_rows`), for the
    draws its moments do not give (:data:`~skacv.linalg._sampling.ROW_SOURCE`
    while the sample is fitted, in this thread).

    Parameters
    ----------
    X : dask array of shape (n_samples, n_features)
    sample_weight : dask array of shape (n_samples,) or None
    Xs, ws : ndarrays of shape (n_rows, n_features) and (n_rows,)
        The in-memory sample and its weights.
    fit_intercept : bool
    loo : tuple or None
        ``(positions, scale)``: the rows of the sample that ``loo_path_``
        tracks and ``n_samples / len(positions)``.

    Notes
    -----
    The probes mapped onto the sample are kept per state of the generator
    and number of probes: fits that draw them from the same state (the grid
    points and the stages of a search, seeded alike) make one pass.
    """

    def __init__(self, X, sample_weight, Xs, ws, fit_intercept, loo=None):
        self.X, self.w, self.loo = X, sample_weight, loo
        self.n_rows = Xs.shape[0]
        ws = np.asarray(ws, dtype=np.float64)
        Xs = np.asarray(Xs, dtype=np.float64)
        # X~ of the sample (as skacv.linalg._design.Design centres and weights it)
        self.offset = ws @ Xs / ws.sum() if fit_intercept else np.zeros(Xs.shape[1])
        self.design = (Xs - self.offset) * np.sqrt(ws)[:, None]
        self.thread = threading.get_ident()
        self._mapped = {}  # (generator state, m) -> (Z_c float64, state after the draw)

    def _ours(self, n_rows):
        return threading.get_ident() == self.thread and n_rows == self.n_rows

    @staticmethod
    def _key(state, m):
        name, keys, pos, has_gauss, gauss = state
        return name, np.asarray(keys).tobytes(), int(pos), int(has_gauss), float(gauss), m

    def probes(self, rng, shape, dtype):
        """Probes ``Z_c`` (n_rows, m) of the sample with ``X~_c^T Z_c = X~^T Z``
        for the Rademacher probes ``Z`` an in-memory fit of the rows draws,
        ``rademacher(rng, (n_samples, m))`` (``rng`` left where that draw
        leaves it; docs/internals.rst, "Hutchinson probes"): ``Z`` drawn
        chunk by chunk, ``X~^T Z`` in one pass over the rows, ``Z_c`` the
        least-norm solution; a state already mapped is reused without a
        pass. ``None`` for a draw of another shape, integer signs or a
        ``Generator`` (whose state a chunk cannot resume).
        """
        if (len(shape) != 2 or not self._ours(shape[0]) or np.dtype(dtype).kind != "f"
                or not isinstance(rng, np.random.RandomState)):
            return None
        m = int(shape[1])
        key = self._key(rng.get_state(), m)
        if key not in self._mapped:
            Zc = self._map(rng, m)
            self._mapped[key] = (Zc, rng.get_state())
        Zc, after = self._mapped[key]
        rng.set_state(after)
        return Zc.astype(dtype)

    def _map(self, rng, m):
        """``Z_c`` (float64) of the draw of ``rng`` (advanced past it): one pass."""
        taken("row_source_pass", probes=m)
        import dask

        states = []
        for rows in self.X.chunks[0]:
            states.append(rng.get_state())
            signs(rng, (rows, m))  # the in-memory draw (advances rng)
        xb = self.X.to_delayed(optimize_graph=False).ravel()
        wb = ([None] * len(xb) if self.w is None
              else self.w.to_delayed(optimize_graph=False).ravel())
        parts = [dask.delayed(_chunk_probe_products, pure=True)(xc, wc, st, m, self.offset)
                 for xc, wc, st in zip(xb, wb, states, strict=True)]
        (images,) = dask.compute(_tree(parts, np.add))
        return linalg.lstsq(self.design.T, images)[0]

    def subsample(self, n_rows, size):
        """``(positions, scale)`` of the fetched rows in the sample, or ``None``."""
        return self.loo if self.loo is not None and self._ours(n_rows) else None


def sample_with_rows(X, y, sample_weight, fit_intercept, take=None):
    """``(X, y, sample_weight, loo)`` of the in-memory sample of Dask rows:
    one pass (:func:`row_statistics`), the compressed sample of the rows
    followed by the rows ``take`` (sorted indices, fetched as they are in
    the pass), in the dtype of ``X``; ``loo`` (for :class:`RowSource`) the
    ``(positions, scale)`` of those rows in the sample, or ``None``."""
    n = X.shape[0]
    stats = row_statistics(X, y, sample_weight, take=take)
    blocks = []
    if take is None or stats["W"][0] > 0:  # the other rows (all without ``take``)
        blocks.append(compressed_sample(stats, fit_intercept, np.float64)[:3])
    elif take.shape[0] < n:  # other rows of zero weight: one such row keeps their count
        blocks.append((np.zeros((1, X.shape[1])), np.zeros(1), np.zeros(1)))
    loo = None
    if take is not None:
        rows = stats["rows"]
        blocks.append((rows[:, :-1], rows[:, -1], stats["row_weight"]))
        first = sum(b[0].shape[0] for b in blocks[:-1])
        loo = (first + np.arange(take.shape[0]), n / take.shape[0])
    Xs, ys, ws = (np.concatenate(parts).astype(X.dtype, copy=False)
                  for parts in zip(*blocks, strict=True))
    return Xs, ys, ws, loo
