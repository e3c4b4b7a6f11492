"""The out-of-sample risk estimate at a converged fit: Bellec's (2020) formula
and the degrees of freedom of a Lasso or an elastic-net solution.

At a solution ``b`` of a penalised least-squares problem the estimate of
``E[(y_new - x_new^T b - b_0)^2]`` is (Bellec 2020)

    R = (||y~ - X~ b||^2 / n_eff) / (1 - df / n_eff)^2

(:func:`converged_risk`), the limit of the memory-matrix estimate of a
converging trajectory (Bellec & Tan 2024). For the Lasso ``df`` is the rank of
the support's columns (Tibshirani & Taylor 2012), which :class:`SupportDF`
takes along a path of solutions: the support size unless the support holds
linearly dependent columns (duplicates up to sign, :func:`duplicate_labels`;
every level of a one-hot encoded feature beside an intercept, found among the
indicator columns, :func:`binary_columns`).
"""

import numpy as np
import scipy.sparse as sp
from scipy import linalg

from .._config import check_memory
from .._trace import taken
from ..linalg._copies import gather
from ..linalg._linalg import independent_columns
from ..utils._parallel import factorization_blas


def converged_risk(train_mse, df, n_eff, statistics):
    """``train_mse / (1 - df / n_eff)^2`` (float or shape (n_alphas,);
    ``train_mse = ||y~ - X~ b||^2 / n_eff``), ``inf`` where ``df >= df_high *
    n_eff``: the fit nearly interpolates and the estimate divides vanishing
    residuals by a vanishing ``1 - df / n_eff`` (as ``risk_reliable_`` flags
    such iterates along a trajectory)."""
    train_mse, df = np.asarray(train_mse, dtype=np.float64), np.asarray(df, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(df < statistics.df_high * n_eff, train_mse / (1.0 - df / n_eff) ** 2,
                        np.inf)


def duplicate_labels(design):
    """Labels of the columns of ``X~``: columns equal up to sign share one
    (the smallest index of the group), every other column has its own index.

    A Lasso solution may split a coefficient between duplicate columns
    (``x`` twice, or ``x`` and ``-x``: one column with a centred binary
    feature and its complement): its support then holds both, but its
    fitted values have the divergence of one, ``rank(X~_S)`` (Tibshirani &
    Taylor 2012). Candidates are the columns with equal projections on two
    random directions (one product with ``X~^T``), checked column against
    column (the statistical policy's ``duplicate_tol``). Returns an int
    array of shape (n_features,) (kept in the design's cache: the path and
    its df read them).
    """
    cache = getattr(design, "cache", None)
    if cache is not None and "duplicate_labels" in cache:
        return cache["duplicate_labels"].copy()
    labels = _duplicate_labels(design)
    if cache is not None:
        cache["duplicate_labels"] = labels.copy()
    return labels


def _duplicate_labels(design):
    p = design.n_features
    labels = np.arange(p)
    if p < 2 or design.n_samples < 1:
        return labels
    tol = design.statistics.duplicate_tol
    if tol is None:
        tol = min(1e-5, float(np.sqrt(np.finfo(design.dtype).resolution)))
    Z = np.random.default_rng(0).standard_normal((design.n_samples, 2)).astype(design.dtype)
    S = np.asarray(design.rmatvec(Z), dtype=np.float64)
    sign = np.where(S[:, 0] < 0, -1.0, 1.0)
    S *= sign[:, None]
    order = np.lexsort((S[:, 1], S[:, 0]))
    a = S[order]
    # the projections of duplicates agree to the rounding of the product: far
    # below tol; a candidate run is checked column against column below
    close = np.all(np.abs(np.diff(a, axis=0))
                   <= tol * (np.abs(a[1:]) + np.abs(a[:-1]) + np.finfo(np.float64).tiny),
                   axis=1)
    if not close.any():
        return labels
    starts = np.flatnonzero(np.diff(np.concatenate([[False], close, [False]]).astype(np.int8)))
    for lo, hi in zip(starts[::2], starts[1::2], strict=True):  # run order[lo .. hi]
        run = np.sort(order[lo:hi + 1])
        cols = np.asarray(design.columns(run), dtype=np.float64) * sign[run]
        free = np.ones(run.size, dtype=bool)
        for k in range(run.size):  # group the run's columns (a run is a few columns)
            if not free[k]:
                continue
            ref = cols[:, k]
            dist = np.linalg.norm(cols[:, k:] - ref[:, None], axis=0)
            same = free[k:] & (dist <= tol * max(float(np.linalg.norm(ref)),
                                                 np.finfo(np.float64).tiny))
            labels[run[k:][same]] = run[k]
            free[k:] &= ~same
    return labels


def binary_columns(X, policy):
    """Indices of the columns of ``X`` (dense or sparse) that take exactly
    two distinct values: indicators, such as the levels of a one-hot
    encoded feature (an implicit zero of a sparse column is a value;
    ``policy``: the speed policy, blocks of rows)."""
    n, p = X.shape
    if n == 0 or p == 0:
        return np.zeros(0, dtype=np.intp)
    if sp.issparse(X):
        Xc = sp.csc_matrix(X)
        Xc.sum_duplicates()
        nnz = np.diff(Xc.indptr)
        has = nnz > 0
        starts = Xc.indptr[:-1][has]
        lo = np.zeros(p)
        hi = np.zeros(p)
        lo[has] = np.minimum.reduceat(Xc.data, starts)
        hi[has] = np.maximum.reduceat(Xc.data, starts)
        implicit = nnz < n
        lo = np.where(implicit, np.minimum(lo, 0.0), lo)
        hi = np.where(implicit, np.maximum(hi, 0.0), hi)
        col = np.repeat(np.arange(p), nnz)
        other = (Xc.data != lo[col]) & (Xc.data != hi[col])
        bad = np.bincount(col[other], minlength=p) > 0
        return np.flatnonzero((lo < hi) & ~bad)
    X = np.asarray(X)
    # candidates: two distinct values among the first rows, then checked on
    # the others by blocks (continuous columns drop out at the first block)
    first = X[:min(n, 64)]
    lo, hi = first.min(axis=0), first.max(axis=0)
    cand = np.flatnonzero(np.all((first == lo) | (first == hi), axis=0))
    r0 = first.shape[0]
    block_bytes = policy.gram_block_bytes
    while cand.size and r0 < n:
        step = max(1, block_bytes // (cand.size * X.itemsize))
        block = X[r0:r0 + step, cand]
        c_lo, c_hi = lo[cand], hi[cand]
        # a column constant so far takes its second value in this block
        b_lo, b_hi = block.min(axis=0), block.max(axis=0)
        same = c_lo == c_hi
        c_lo = np.where(same, np.minimum(c_lo, b_lo), c_lo)
        c_hi = np.where(same, np.maximum(c_hi, b_hi), c_hi)
        lo[cand], hi[cand] = c_lo, c_hi
        cand = cand[np.all((block == c_lo) | (block == c_hi), axis=0)]
        r0 += step
    return cand[lo[cand] < hi[cand]]


def _column_blocks(design, cols):
    """``(rows, X~[rows][:, cols])`` in float64 by blocks of rows (the speed
    policy's ``gram_block_bytes``; ``rows``: a slice)."""
    n = design.n_samples
    step = max(1, design.policy.gram_block_bytes // max(1, 8 * cols.size))
    for r0 in range(0, n, step):
        rows = slice(r0, min(n, r0 + step))
        block = (design.rows(np.arange(rows.start, rows.stop)).columns(cols) if design.sparse
                 else design.X[rows, cols])  # a dense X~ is held centred and weighted
        yield rows, np.asarray(block, dtype=np.float64)


def _columns_gram(design, cols):
    """``X~_cols^T X~_cols`` in float64, by blocks of rows."""
    G = np.zeros((cols.size, cols.size))
    for _, block in _column_blocks(design, cols):
        G += block.T @ block
    return G


class SupportDF:
    """The Lasso path's df: ``rank(X~_S)`` of each support ``S`` (Tibshirani
    & Taylor 2012), called on a solution ``coef`` (an int, without the
    intercept). A solution may keep linearly dependent columns: a
    coefficient split between duplicates, or every level of a one-hot
    encoded feature beside the intercept (the L1 norm is flat along that
    shift when half of the levels' coefficients lie on each side).

    With ``covariance`` (``C = X~^T X~``, the covariance form) ``C`` is
    factorised once: when ``X~`` has full column rank so has every
    ``X~_S`` (``df = |S|``); else the rank of ``C_SS`` is taken for every
    new support. Otherwise (``p > n``: a factorisation per support would
    cost more than the path) the relations looked for are those of real
    designs: among the indicator columns of ``X`` (:func:`binary_columns`,
    at most ``binary_relations_max``; their Gram matrix factorised once)
    and duplicates up to sign (:func:`duplicate_labels`); an exact relation
    among other columns (a total beside its parts) is missed. df is at most
    the rows of ``X~`` (``design``) of positive weight, less one with an
    intercept.
    """

    def __init__(self, design, X, covariance=None):
        self.policy = design.policy
        self.gram = None  # Gram matrix whose restriction to a support gives its rank
        self.cols = None  # its columns (None: all of X~)
        self.labels = None  # duplicate labels of the other columns
        if covariance is not None:
            if independent_columns(covariance, self.policy).size < covariance.shape[0]:
                self.gram = covariance
        else:
            B = binary_columns(X, self.policy)
            if 1 < B.size <= design.statistics.binary_relations_max:
                G = _columns_gram(design, B)
                if independent_columns(G, self.policy).size < B.size:
                    self.gram, self.cols = G, B
            labels = duplicate_labels(design)
            if not np.array_equal(labels, np.arange(labels.size)):
                self.labels = labels
        self.key, self.value = None, 0
        # no support has a larger rank than the rows of X~ (centred: one less)
        rows = design.n_samples if design.weight is None else int(np.count_nonzero(design.weight))
        self.max_rank = max(0, rows - int(design.fit_intercept))

    def _rank(self, idx):
        """Rank of the columns ``idx`` of :attr:`gram` (cached for the last
        ``idx``: the support often stays from one penalty to the next)."""
        if self.key is None or not np.array_equal(idx, self.key):
            self.key = idx
            self.value = int(independent_columns(self.gram[np.ix_(idx, idx)], self.policy).size)
        return self.value

    def __call__(self, coef):
        active = np.flatnonzero(coef)
        if self.gram is not None and self.cols is None:
            return self._rank(active)
        rank = 0
        if self.gram is not None:  # the support's indicators, then the others
            inside = np.isin(active, self.cols)
            rank = self._rank(np.searchsorted(self.cols, active[inside]))
            active = active[~inside]
        if self.labels is not None:
            active = np.unique(self.labels[active])
        return min(self.max_rank, rank + int(active.size))


class RidgeSupportDF:
    """The elastic net's df: at a solution with support ``S`` and ridge part
    ``l2`` (mean form), the fitted values are a smooth function of ``y~``
    where the support and the signs are locally constant, of divergence

        df = tr(X~_S (G_S + c I)^{-1} X~_S^T) = |S| - c tr((G_S + c I)^{-1}),

    ``G_S = X~_S^T X~_S``, ``c = n_eff l2`` (Zou, Hastie & Tibshirani 2007 for
    the elastic net's degrees of freedom, Tibshirani & Taylor 2012 for the
    support's local constancy), called on ``(coef, l2)`` (a float, without
    the intercept). ``G_S + c I`` is positive definite: its Cholesky factor
    ``L`` gives the trace, ``||L^{-1}||_F^2``. ``G_S`` is read from
    ``covariance`` (``C = X~^T X~``) in the covariance form, else from the
    Gram matrix of every column of a support so far, grown by the new
    columns' products (a path's supports mostly grow) and kept in the
    design's cache for the other mixings' paths. A support wider than the
    rows is counted on the rows' side when that costs fewer flops: ``df =
    n - c tr((K_S + c I)^{-1})``, ``K_S = X~_S X~_S^T`` (the cached ``X~ X~^T``
    less the columns outside ``S``, or the support's columns). A support
    held at several penalties in a row (only ``c`` changes) has its
    eigenvalues ``lam`` computed once, ``df = sum(lam / (lam + c))`` at each
    (the speed policy's ``ridge_df_spectrum_repeats``; kept in the design's
    cache, as the Gram matrix).
    """

    def __init__(self, design, covariance=None):
        self.design, self.covariance = design, covariance
        self.last, self.repeats = None, 0  # the last support, at this many penalties in a row

    def _columns_gram(self):
        """The design's shared ``(cols, pos, gram, copies, work)``: ``cols`` in
        the order they came (``pos[j]`` the place of column ``j``, ``-1`` if
        absent), buffers whose leading blocks are ``X~_cols^T X~_cols`` and
        ``X~_cols`` (float64, Fortran order: no gather for a new column), and
        the flat float64 buffer that holds ``G_S + c I`` and its factor at
        every penalty (fresh memory of that size pays its page faults)."""
        cache = self.design.cache
        if "support_gram" not in cache:
            cache["support_gram"] = (np.zeros(0, dtype=np.intp),
                                     np.full(self.design.n_features, -1, dtype=np.intp),
                                     np.zeros((0, 0)), np.zeros((self.design.n_samples, 0)),
                                     np.zeros(0))
        return cache["support_gram"]

    def _work(self, size):
        """The square array of order ``size`` (C order) in the shared work buffer."""
        entry = self._columns_gram()
        work = entry[4]
        if work.size < size * size:
            cap = min(self.design.n_features, size + size // 2)
            check_memory(8 * cap * cap, f"the support's Gram matrix ({cap} x {cap})")
            work = np.empty(cap * cap)
            self.design.cache["support_gram"] = (*entry[:4], work)
        return work[:size * size].reshape(size, size)

    def _support_gram(self, S):
        if self.covariance is not None:
            # the support's block first, then float64 (a float32 C is not
            # converted whole at every penalty)
            C = self.covariance
            return C.take(S, axis=0).take(S, axis=1).astype(np.float64, copy=False)
        cols, pos, gram, copies, work = self._columns_gram()
        new = S[pos[S] < 0]
        if new.size:
            m, u = cols.size, cols.size + new.size
            if u > gram.shape[0]:  # larger buffers (by half), their blocks copied
                cap = min(self.design.n_features, u + u // 2)
                n = self.design.n_samples
                check_memory(8 * cap * (cap + n),
                             f"the Gram matrix of the supports' columns ({cap} x {cap}) "
                             f"and their copies ({n} x {cap})")
                grown, more = np.empty((cap, cap)), np.empty((n, cap), order="F")
                grown[:m, :m], more[:, :m] = gram[:m, :m], copies[:, :m]
                gram, copies = grown, more
            A = copies[:, m:u]
            XT = self.design.cache.get("path_transposed")  # (the path's transposed X~)
            if XT is not None and XT.dtype == np.float64:  # each column one contiguous row
                np.take(XT, new, axis=0, out=A.T, mode="clip")
            else:
                A[...] = np.asarray(self.design.columns(new), dtype=np.float64)
            if m:
                cross = copies[:, :m].T @ A
                gram[:m, m:u] = cross
                gram[m:u, :m] = cross.T
            gram[m:u, m:u] = A.T @ A
            pos[new] = np.arange(m, u)
            cols = np.concatenate([cols, new])
            self.design.cache["support_gram"] = (cols, pos, gram, copies, work)
        idx = pos[S]
        return gather(gram, np.float64, self.design.policy, rows=idx, cols=idx,
                      out=self._work(S.size))

    def _rows_plan(self, S):
        """How to form ``K_S = X~_S X~_S^T`` when the ``n x n`` side costs
        fewer flops: ``"rest"`` (the cached ``X~ X~^T`` less the columns
        outside ``S``), ``"support"`` (its columns), or ``None`` (the
        support's side). A Cholesky factor and its inverse cost ``2 m^3 / 3``,
        a Gram matrix of ``k`` columns ``n^2 k``."""
        d = self.design
        n, s = d.n_samples, S.size
        if self.covariance is not None or s <= n:
            return None
        rest = d.n_features - s
        cached = n <= d.policy.gram_cache_size and rest < s
        form = n * n * (rest if cached else s)
        if 2 * n**3 / 3 + form >= 2 * s**3 / 3:
            return None
        return "rest" if cached else "support"

    def _rows_gram(self, S, plan):
        """``K_S = X~_S X~_S^T`` (float64, C order) by ``plan`` (:meth:`_rows_plan`)."""
        d = self.design
        if plan == "support":
            A = np.asarray(d.columns(S), dtype=np.float64)
            return A @ A.T
        K = self._work(d.n_samples)
        K[...] = d.gram(side="samples")
        K *= d.n_eff
        outside = np.ones(d.n_features, dtype=bool)
        outside[S] = False
        if outside.any():
            A = np.asarray(d.columns(np.flatnonzero(outside)), dtype=np.float64)
            K -= A @ A.T
        return K

    def __call__(self, coef, l2):
        S = np.flatnonzero(coef)
        shift = self.design.n_eff * float(l2)
        if S.size == 0:
            return 0.0
        plan = self._rows_plan(S) if shift > 0 else None
        if plan is None:
            gram, size = (lambda: self._support_gram(S)), S.size
        else:
            # the rows' side: tr(X~_S (G_S + c I)^{-1} X~_S^T) = tr(K_S (K_S + c I)^{-1})
            # = n - c tr((K_S + c I)^{-1})
            gram, size = (lambda: self._rows_gram(S, plan)), self.design.n_samples
        kept = self.design.cache.get("support_spectrum")
        if shift > 0 and kept is not None and np.array_equal(kept[0], S):
            return float(np.sum(kept[1] / (kept[1] + shift)))
        # the same support at the speed policy's ridge_df_spectrum_repeats
        # penalties in a row: its eigenvalues, kept for the next ones
        self.repeats = self.repeats + 1 if np.array_equal(self.last, S) else 1
        self.last = S
        repeats = self.design.policy.ridge_df_spectrum_repeats
        M = gram()  # (symmetric, C order: overwritten by its factor)
        if shift <= 0:  # (no ridge part: the rank)
            return float(independent_columns(M, self.design.policy).size)
        if repeats is not None and self.repeats >= repeats:
            taken("ridge_df_spectrum", size=M.shape[0])
            lam = np.clip(np.linalg.eigvalsh(M), 0.0, None)
            self.design.cache["support_spectrum"] = (S, lam)
            return float(np.sum(lam / (lam + shift)))
        M[np.diag_indices_from(M)] += shift
        # M.T: the same matrix in Fortran order, factorised in place
        L, info = linalg.lapack.dpotrf(M.T, lower=1, clean=1, overwrite_a=1)
        if info == 0:
            Linv, info = linalg.lapack.dtrtri(L, lower=1, overwrite_c=1)
        if info != 0:  # (rounding: G_S + c I is positive definite)
            lam = np.clip(np.linalg.eigvalsh(gram()), 0.0, None)
            return float(np.sum(lam / (lam + shift)))
        return float(size - shift * np.einsum("ij,ij->", Linv, Linv))


class _GramSolver:
    """The pseudo-inverse of a Gram matrix ``G`` (of order ``s``) through a
    whitening ``W`` (``W W^T = G^+``): a row ``x`` becomes ``P = x W``, its
    leverage ``|P|^2``; ``v = G^+ x`` has ``v^T b = P (W^T b)`` and ``v^T v =
    |W P^T|^2``. By Cholesky's factor ``G = L L^T`` (``W = L^{-T}``) where
    LAPACK's estimate of its reciprocal condition number lies above
    ``1e3 s eps`` (``G`` then has no eigenvalue the eigendecomposition
    would drop, so the two agree to rounding), else by the
    eigendecomposition ``G = V diag(lam) V^T`` (``W = V diag(lam)^{-1/2}`` on
    the eigenvalues above ``s eps`` times the largest), which costs more
    (docs/benchmarks.rst, "The far-rows check's factor")."""

    def __init__(self, G, policy):
        s = G.shape[0]
        eps = np.finfo(np.float64).eps
        self.factor = None
        try:
            with factorization_blas("cholesky", s, policy):
                factor = linalg.cholesky(G, lower=True)
            rcond = linalg.lapack.dpocon(factor, np.abs(G).sum(axis=0).max(), uplo="L")[0]
            if rcond > 1e3 * s * eps:
                self.factor = factor
        except linalg.LinAlgError:
            pass
        if self.factor is None:
            with factorization_blas("eigh", s, policy):
                lam, vecs = linalg.eigh(G)
            live = lam > lam[-1] * s * eps
            self.scale = vecs[:, live] / np.sqrt(lam[live])
            self.inv_lam = 1.0 / lam[live]
        taken("gram_solver", cholesky=self.factor is not None, order=s)

    def whiten_rows(self, A):
        """``P = A W`` (one row of ``P`` a row of ``A``)."""
        if self.factor is None:
            return A @ self.scale
        return linalg.solve_triangular(self.factor, A.T, lower=True).T

    def whiten_vector(self, b):
        """``W^T b``."""
        if self.factor is None:
            return self.scale.T @ b
        return linalg.solve_triangular(self.factor, b, lower=True)

    def inverse_sq_norms(self, P):
        """``|G^+ x|^2`` of the rows ``x`` whitened in ``P``."""
        if self.factor is None:
            return (P * P) @ self.inv_lam
        V = linalg.solve_triangular(self.factor, P.T, lower=True, trans="T")
        return np.einsum("ij,ij->j", V, V)


def support_loo_ratio(design, y, coef, risk):
    """Leave-one-out of the least squares on a Lasso solution's support, by
    its leverages, over the converged risk estimate ``risk`` at that
    solution (``coef`` on the ``X`` of ``design``, a
    :class:`~skacv.linalg._design.Design`): ``sum w_i e_i^2 / sum w_i``
    over the rows of positive weight, divided by ``risk``; ``e_i`` leaves
    out one unit of the row's weight (one copy of a row repeated ``w_i``
    times: integer weights and repeated rows give the same ratio). The risk
    estimate reads the mean leverage, as GCV does; where far rows carry the
    fit (heavy-tailed columns, rare levels, an outlying target) it is
    optimistic and this ratio exceeds 1 (``auto_alo_ratio``). ``1.0`` for
    an empty support or a non-finite ``risk``.

    ``h_i`` is the leverage of row ``i`` on the support's columns of ``X~``
    plus ``w_i / sum w`` for the intercept, ``r_i`` its residual; one unit
    of its weight has leverage ``u_i = h_i / w_i``. Below the statistical
    policy's ``alo_leverage_trim``, ``e_i = r_i / (1 - u_i)``, the exact
    leave-one-out residual. At or above it the unit alone sets a direction
    of the fit (a level of one row, a column of one row; exactly at ``u_i
    = 1`` the formula is ``0 / 0``): ``e_i`` is the leave-one-out residual
    of the minimum-norm least squares without it, which drops that
    direction, ``v = G^+ x_i`` (``x_i`` the row of the centred ``X``, ``G
    = X~_S^T X~_S``), from the coefficients: ``e_i = r_i + u_i (v^T b) /
    (v^T v)``. Exact at ``u_i = 1`` (a one-hot level of one row: its
    coefficient leaves, as a fold without the row would drop it); between
    the trim and 1, the penalised refit's shrinkage of a direction the
    other rows barely determine, in place of the least squares' ``r_i /
    (1 - u_i)``. ``O(n s^2)`` flops, by blocks of rows (the Gram matrix of
    the ``s`` support columns factored once: :class:`_GramSolver`)."""
    S = np.flatnonzero(np.asarray(coef))
    if S.size == 0 or not np.isfinite(risk) or risk <= 0:
        return 1.0
    w = (np.ones(design.n_samples) if design.weight is None
         else np.asarray(design.weight, dtype=np.float64))
    gram = _GramSolver(_columns_gram(design, S), design.policy)
    b = np.asarray(coef, dtype=np.float64)[S]
    b_scaled = gram.whiten_vector(b)
    # y~ - X~ b = sqrt(w) (y - X b - b_0), the intercept b_0 = y_offset - x_offset^T b
    y_tilde = np.asarray(design.center_y(y)[1], dtype=np.float64)
    num = den = 0.0
    trim = design.statistics.alo_leverage_trim
    for rows, block in _column_blocks(design, S):
        P = gram.whiten_rows(block)
        h = np.einsum("ij,ij->i", P, P)
        if design.fit_intercept:
            h += w[rows] / design.n_eff
        r = y_tilde[rows] - block @ b
        live_rows = w[rows] > 0
        # one unit of a row's weight left out (a copy of a repeated row): leverage h / w
        unit = np.divide(h, w[rows], out=np.zeros_like(h), where=live_rows)
        near = live_rows & (unit < trim)
        far = live_rows & ~near
        num += float(np.sum((r[near] / (1.0 - unit[near])) ** 2))
        if far.any():
            Pf = P[far]
            vb, vv = Pf @ b_scaled, gram.inverse_sq_norms(Pf)
            drop = np.divide(vb, vv, out=np.zeros_like(vb), where=vv > 0)
            num += float(np.sum((r[far] + h[far] * drop) ** 2))
        den += float(np.sum(w[rows][live_rows]))
    if den <= 0:
        return 1.0
    return num / den / float(risk)
