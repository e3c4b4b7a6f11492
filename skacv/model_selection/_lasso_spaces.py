"""The products of the Lasso path's working sets (:mod:`skacv.model_selection._lasso_path`):
on copies of their columns of ``X~`` (:class:`_SampleSpace`) or in the
covariance form (:class:`_FeatureSpace`, :func:`covariance_path_pays`),
with the step bound and the rank-one metric of
:mod:`skacv.iterations._metric` of each working set.
"""

import numpy as np
import scipy.sparse as sp

from .._config import check_memory
from .._trace import taken
from ..iterations._datafits import NormalEquations
from ..iterations._metric import rank_one_metric, spike_possible
from ..linalg._copies import design_transposed
from ..linalg._covariance import CovarianceForm
from ..linalg._design import Design
from ..linalg._linalg import lanczos_top


class _WorkingColumns:
    """Designs of working sets of columns (same centring, weights, ``n_eff``).

    Dense: the columns of ``X~`` copied into one reused buffer (a fresh
    array per working set would pay its page faults every time), kept in
    the design's cache: the other mixings' paths of a search, which run one
    after another, reuse it (each path's working sets grow from a few
    columns: a buffer per path grew by reallocations, each paying its page
    faults again), C-ordered
    or, with ``fortran`` (scikit-learn's coordinate descent), Fortran-ordered
    from the rows of :meth:`_transposed`, in a ``Design`` without intercept
    and weights. Sparse: the column slice of ``X`` with the same weights
    and centring.
    """

    def __init__(self, design, X, sample_weight):
        self.design, self.X, self.sample_weight = design, X, sample_weight
        self.XT = None  # X~^T, C-ordered (_transposed)

    def _transposed(self):
        """``X~^T`` as a C-ordered copy kept for the path (a working set's
        column is one contiguous row of it) in the design's cache (the other
        mixings' paths of a search share it), where ``X~`` holds at most the
        speed policy's ``path_transposed_max_bytes``; else ``None``."""
        d = self.design
        if self.XT is None and d.X.nbytes <= d.policy.path_transposed_max_bytes:
            self.XT = design_transposed(d)
        return self.XT

    def dense_pays(self, idx):
        """Whether a sparse design's working set ``idx`` is solved on a dense
        copy of its columns ``X~[:, idx]`` (the speed policy's
        ``path_sparse_dense_bytes`` and ``path_sparse_dense_density``)."""
        d = self.design
        n, m = d.n_samples, idx.shape[0]
        if n * m * d.dtype.itemsize > d.policy.path_sparse_dense_bytes:
            return False
        counts = d.cache.get("column_nonzeros")
        if counts is None:  # nonzeros of every column, once for the path
            X = d.X
            counts = (np.bincount(X.indices, minlength=d.n_features) if X.format == "csr"
                      else np.diff(sp.csc_matrix(X).indptr))
            d.cache["column_nonzeros"] = counts
        return m > 0 and counts[idx].sum() >= d.policy.path_sparse_dense_density * n * m

    def __call__(self, idx, fortran=False):
        d = self.design
        if d.sparse:
            if not self.dense_pays(idx):
                return Design(self.X[:, idx], self.sample_weight, d.fit_intercept,
                              policies=d.policies)
            # X~'s columns (centred, weighted), dense: as a dense design's
            taken("sparse_dense_columns", size=idx.shape[0])
            cols = d.columns(idx)
            sub = Design(np.asfortranarray(cols) if fortran else cols, None, False,
                         policies=d.policies)
            sub.n_eff = d.n_eff
            return sub
        n, m = d.n_samples, idx.shape[0]
        if m == d.n_features:  # every column (idx sorted, distinct): X~, or X~^T's transpose
            XT = self._transposed() if fortran else None
            if not fortran or XT is not None:
                if XT is not None:
                    taken("transposed_all_columns")
                sub = Design(d.X if XT is None else XT.T, None, False, policies=d.policies)
                sub.n_eff = d.n_eff
                return sub
        buffer = d.cache.get("path_columns")
        if buffer is None or buffer.size < n * m:
            d.cache.pop("path_columns", None)
            buffer = None
            cap = min(d.n_features, m + m // 2 + 64)
            check_memory(n * cap * d.dtype.itemsize, f"the working-set columns ({n} x {cap})")
            buffer = d.cache["path_columns"] = np.empty(n * cap, dtype=d.dtype)
            taken("path_columns", columns=cap)
        if fortran:
            rows = buffer[: n * m].reshape(m, n)
            XT = self._transposed()
            if XT is not None:  # the rows idx of X~^T: one contiguous copy each
                np.take(XT, idx, axis=0, out=rows, mode="clip")
            else:  # blocks of rows of X~, their columns idx transposed into (m, n)
                block = max(1, min(d.policy.gather_bytes // (m * d.dtype.itemsize), n // 8))
                for a in range(0, n, block):
                    rows[:, a:a + block] = d.X[a:a + block].take(idx, axis=1).T
            cols = rows.T
        else:
            # C-ordered: np.take writes into it without a temporary
            cols = buffer[: n * m].reshape(n, m)
            np.take(d.X, idx, axis=1, out=cols, mode="clip")
        sub = Design(cols, None, False, policies=d.policies)
        sub.n_eff = d.n_eff
        return sub


def _top_eigenvalue(design, u0=None):
    """``(L, u, second)``: an upper estimate of the largest eigenvalue of
    ``X~^T X~ / n_eff``, its direction in sample space and the second Ritz
    value, by :func:`skacv.linalg._linalg.lanczos_top` on the smaller side,
    warm-started from ``u0`` (the speed policy's ``path_lanczos_steps``)."""
    n_steps = design.policy.path_lanczos_steps
    n, p = design.n_samples, design.n_features
    inv_n = 1.0 / design.n_eff
    dt = design.dtype
    if p < n:  # feature side
        def op(v):
            return np.asarray(design.rmatvec(design.matvec(v.astype(dt))),
                              dtype=np.float64) * inv_n
        start = None if u0 is None else np.asarray(design.rmatvec(u0.astype(dt)), np.float64)
        L, top, second = lanczos_top(op, p, start, n_steps)
        return L, np.asarray(design.matvec(top.astype(dt)), dtype=np.float64), second

    def op(v):
        return np.asarray(design.matvec(design.rmatvec(v.astype(dt))), dtype=np.float64) * inv_n

    return lanczos_top(op, n, u0, n_steps)


class _KeptSpectrum:
    """A space's step bound and rank-one metric, kept while the working set
    stays the same; the spaces compute the step bound in ``_new_step_bound``
    and the metric's operator in ``_metric_operator``."""

    _kept_work = None  # the working set of the kept step bound
    _kept_metric = None  # (working set, metric)
    top = second = None  # step_bound's top and second Ritz values
    rest = None  # the metric's second direction (features), its warm start
    finish = None  # the path's _SupportFinish, set by lasso_path

    def step_bound(self, sub, work):
        if self._kept_work is not None and np.array_equal(self._kept_work, work):
            return self.top
        self._kept_work = self._kept_metric = None
        L = self._new_step_bound(sub, work)
        self._kept_work = np.array(work)
        return L

    def metric(self, sub, work):
        kept = self._kept_metric
        if kept is not None and np.array_equal(kept[0], work):
            return kept[1]
        metric = self._new_metric(sub, work)
        self._kept_metric = (np.array(work), metric)
        return metric

    def forget_metric(self):
        """The metric's solve stalled or diverged: the next call makes a new one."""
        self._kept_metric = None

    def _new_metric(self, sub, work):
        """The :class:`~skacv.iterations._metric.RankOneMetric` of the working
        set from the top direction of :meth:`step_bound`, or ``None``."""
        if not spike_possible(self.top, self.second, self.design.policy):
            return None
        op, top = self._metric_operator(sub, work)
        metric, rest = rank_one_metric(op, work.size, top, self.design.policy,
                                       None if self.rest is None else self.rest[work])
        self.rest = None  # the second direction on all features: the next one's warm start
        if rest is not None:
            self.rest = np.zeros(self.design.n_features)
            self.rest[work] = rest
        return metric


class _SampleSpace(_KeptSpectrum):
    """The Lasso path's products with copies of the working set's columns
    of ``X~`` (:class:`_WorkingColumns`). It and :class:`_FeatureSpace`
    give a working set ``W`` its design (``sub(W)``), the fit loop's target
    and datafit, the residual's statistics ``(||r||^2, r^T y~, X~^T r /
    n_eff)`` (``stats``), the step bound and ``gram`` (``X~^T X~`` where
    formed: the supports' ranks).
    """

    datafit = None  # least squares
    gram = None  # X~^T X~ is not formed

    def __init__(self, design, X, sample_weight, y_tilde):
        self.design, self.y = design, y_tilde
        self.y64 = np.asarray(y_tilde, dtype=np.float64)
        self.columns = _WorkingColumns(design, X, sample_weight)
        self.u = None  # top singular direction (samples), warm start of the step sizes
        self.colnorm = None  # ||x~_j||^2 / n_eff of every column (spike_ruled_out)

    def sub(self, work, fortran=False):
        return self.columns(work, fortran)

    def target(self, work):
        return self.y

    def stats(self, sub, work, coef_w, fitted, full=False):
        """``(||r||^2, r^T y~, X~^T r / n_eff)`` of ``r = y~ - fitted``
        (``X~_W^T r`` unless ``full``)."""
        r = self.y - fitted
        r64 = np.asarray(r, dtype=np.float64)
        corr = (self.design if full else sub).rmatvec(r)
        return float(r64 @ r64), float(r64 @ self.y64), corr / self.design.n_eff

    def _new_step_bound(self, sub, work):
        L, self.u, self.second = _top_eigenvalue(sub, self.u)
        self.top = L
        return L

    def spike_ruled_out(self, work):
        """Whether bounds rule out, without a product, a top eigenvalue of
        ``work`` far above the rest (:func:`~skacv.iterations._metric.spike_possible`
        false). The top eigenvalue is at most the kept one plus the new
        columns' squared norms over ``n_eff`` where ``work`` holds the kept
        working set (its new columns ``A`` add ``A A^T`` to ``X~_W X~_W^T``:
        Weyl), and at most the design's (Cauchy's interlacing), read where
        the design is a search's (its fits compute it anyway); the second is
        at least the kept one (a superset) and at least the trace less the
        top over the rank less one. ``False`` when it cannot tell."""
        d = self.design
        if self.colnorm is None:
            self.colnorm = d.column_sq_norms() / d.n_eff
        top, second = np.inf, 0.0
        kept = self._kept_work
        if kept is not None and self.top is not None and work.size >= kept.size:
            added = np.setdiff1d(work, kept, assume_unique=True)
            if added.size + kept.size == work.size:  # a superset of the kept set
                top, second = self.top + float(self.colnorm[added].sum()), self.second
        if d.shared:
            top = min(top, d.lipschitz())
            rank = min(d.n_samples, work.size)
            if rank > 1:
                second = max(second, (float(self.colnorm[work].sum()) - top) / (rank - 1))
        return bool(top < np.inf and not spike_possible(top, second, d.policy))

    def _metric_operator(self, sub, work):
        """``X~_W^T X~_W / n_eff`` and the top direction on the features."""
        dt = sub.dtype
        inv_n = 1.0 / self.design.n_eff

        def op(v):
            return np.asarray(sub.rmatvec(sub.matvec(v.astype(dt))), dtype=np.float64) * inv_n

        return op, np.asarray(sub.rmatvec(self.u.astype(dt)), dtype=np.float64)

    def support_system(self, sub, work, S):
        """``(v -> X~_S^T X~_S v, X~_S^T y~)`` of the columns ``S`` of the
        working set (positions in ``work``), in float64."""
        if S.size == work.size:
            part = sub
        elif sub.sparse:
            part = self.columns(work[S])
        else:  # a copy of the columns: sub's buffer stays the working set's
            part = Design(sub.X[:, S], None, False, policies=sub.policies)
        dt = part.dtype

        def normal(v):
            return np.asarray(part.rmatvec(part.matvec(v.astype(dt))), dtype=np.float64)

        return normal, np.asarray(part.rmatvec(self.y), dtype=np.float64)


class _FeatureSpace(_KeptSpectrum):
    """The Lasso path in the covariance form (scikit-learn's ``precompute``,
    :class:`~skacv.linalg._covariance.CovarianceForm`): with ``C = X~^T X~`` and
    ``c = X~^T y~``, the working set's loop multiplies by ``C_WW`` and its
    "fitted values" are ``g = C_WW b_W``; the residual enters through
    ``||r||^2 = y~^T y~ - 2 c_W^T b_W + b_W^T g``, ``r^T y~ = y~^T y~ - c_W^T
    b_W`` and ``X~^T r = c - C_{:,W} b_W``: no product with the n rows of
    ``X~`` after ``C`` (float64 designs: in float32 the quadratic forms lose
    the digits the duality gap needs)."""

    datafit = NormalEquations()
    gram_form = True  # C and c at hand: the path may solve by coordinate descent

    def __init__(self, design, c, yy):
        """``c = X~^T y~`` (float64) and ``yy = y~^T y~``."""
        self.design, self.c, self.yy = design, c, yy
        self.full = CovarianceForm(design)
        self.u = np.zeros(design.n_features)  # top eigenvector, warm start of the step sizes

    @property
    def gram(self):
        """``C = X~^T X~`` (the ranks of the supports are read from it)."""
        return self.full.C

    def sub(self, work, fortran=False):
        return CovarianceForm(self.design, work)

    def target(self, work):
        return self.c[work].astype(self.design.dtype)

    def stats(self, sub, work, coef_w, fitted, full=False):
        b = np.asarray(coef_w, dtype=np.float64)
        cb = float(self.c[work] @ b)
        rr = self.yy - 2.0 * cb + float(b @ np.asarray(fitted, dtype=np.float64))
        if full:
            corr = self.c - (b @ self.full.C[work] if work.size else 0.0)
        else:
            corr = self.c[work] - fitted
        return max(rr, 0.0), self.yy - cb, corr / self.design.n_eff

    def _new_step_bound(self, sub, work):
        inv_n = 1.0 / self.design.n_eff
        L, top, self.second = lanczos_top(lambda v: (sub.C @ v) * inv_n, work.size,
                                           self.u[work], self.design.policy.path_lanczos_steps)
        self.top = L
        self.u[:] = 0.0
        self.u[work] = top
        return L

    def _metric_operator(self, sub, work):
        inv_n = 1.0 / self.design.n_eff
        return (lambda v: np.asarray(sub.C @ v.astype(sub.C.dtype), dtype=np.float64) * inv_n,
                self.u[work])

    def support_system(self, sub, work, S):
        """``(v -> C_SS v, c_S)`` of the columns ``S`` of the working set
        (positions in ``work``), in float64."""
        C = np.asarray(sub.C[np.ix_(S, S)], dtype=np.float64)
        return C.__matmul__, self.c[work[S]]


def covariance_path_pays(design, tol, n_alphas):
    """Whether the Lasso path of ``n_alphas`` penalties runs in the
    covariance form (:class:`_FeatureSpace`, the speed policy's
    ``covariance_path``): float64, at most ``covariance_max_features``
    features and fewer than the samples, a tolerance of at least
    ``covariance_path_min_tol`` (the rounding of the quadratic forms of
    ``||r||^2`` would stall finer gaps), and the Gram matrix (``p /
    covariance_gemm_advantage`` products with ``X~``) below
    ``path_products_per_alpha`` products per penalty."""
    n, p = design.n_samples, design.n_features
    policy = design.policy
    if not (policy.covariance_path and design.dtype == np.float64
            and tol >= policy.covariance_path_min_tol
            and p <= min(n, policy.covariance_max_features)):
        return False
    gram = 0.0 if ("gram", "features") in design.cache else (
        p / policy.covariance_gemm_advantage)
    return gram <= policy.path_products_per_alpha * n_alphas
