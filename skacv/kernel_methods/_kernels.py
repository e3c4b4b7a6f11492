"""Kernels of the kernel machines (EigenPro), as Ma & Belkin (2017) define
them with the Euclidean distance ``d`` and the bandwidth ``sigma`` (the
public ``kernel`` parameter), and blockwise kernel products. The Matern
kernel ``2^(1-nu) / Gamma(nu) (sqrt(2 nu) d / sigma)^nu K_nu(...)`` has
closed forms for ``nu`` = 0.5, 1.5, 2.5 and ``inf`` (the Gaussian)."""

import numpy as np
import scipy.sparse as sp
from scipy.special import gamma as gamma_fn
from scipy.special import kv
from sklearn.utils.extmath import row_norms, safe_sparse_dot
from sklearn.utils.sparsefuncs import mean_variance_axis

from .._config import check_memory, working_memory_bytes
from ..linalg._sampling import draw_rows

KERNELS = ("gaussian", "laplacian", "matern")


def _matern_from_distance(D, sigma, nu):
    r = D / sigma
    if nu == 0.5:
        return np.exp(-r, out=r)
    if nu == 1.5:
        s = np.sqrt(3.0) * r
        return (1.0 + s) * np.exp(-s)
    if nu == 2.5:
        s = np.sqrt(5.0) * r
        return (1.0 + s + s * s / 3.0) * np.exp(-s)
    if np.isinf(nu):
        return np.exp(-0.5 * r * r)
    s = np.sqrt(2.0 * nu) * r
    s[s == 0] = np.finfo(np.float64).eps
    K = (2.0 ** (1.0 - nu) / gamma_fn(nu)) * s**nu * kv(nu, s)
    K[D == 0] = 1.0
    return K


def _from_distance(kernel, D):
    """The Laplacian or Matern kernel of the distances ``D`` (in place)."""
    if kernel.kernel == "laplacian":
        D *= -1.0 / kernel.bandwidth
        return np.exp(D, out=D)
    return _matern_from_distance(D, kernel.bandwidth, kernel.nu)


class Kernel:
    """A kernel function with its bandwidth, evaluated by blocks.

    Parameters
    ----------
    kernel : {"gaussian", "laplacian", "matern"} or callable
    bandwidth : float
        ``sigma`` (ignored by callables).
    kernel_params : dict or None
        ``{"nu": float}`` for ``"matern"``; keyword arguments of a callable.
    """

    def __init__(self, kernel, bandwidth, kernel_params=None):
        self.kernel = kernel
        self.bandwidth = float(bandwidth)
        self.kernel_params = dict(kernel_params or {})
        if kernel == "matern":
            unknown = set(self.kernel_params) - {"nu"}
            if unknown:
                raise ValueError(
                    f"kernel='matern' accepts kernel_params={{'nu': float}}; got the "
                    f"unknown keys {sorted(unknown)}."
                )
            self.nu = float(self.kernel_params.get("nu", 1.5))
            if not self.nu > 0:
                raise ValueError(f"The Matern smoothness nu must be > 0; got {self.nu}.")
        elif isinstance(kernel, str) and self.kernel_params:
            raise ValueError(
                f"kernel={kernel!r} takes no kernel_params; got {self.kernel_params}."
            )

    def __call__(self, X, Y, Y_norm_squared=None):
        """Kernel matrix ``k(X, Y)`` of shape (len(X), len(Y)), float64."""
        if callable(self.kernel):
            K = np.asarray(self.kernel(X, Y, **self.kernel_params), dtype=np.float64)
            if K.shape != (X.shape[0], Y.shape[0]):
                raise ValueError(
                    f"The kernel callable returned shape {K.shape} for inputs of "
                    f"{X.shape[0]} and {Y.shape[0]} rows; expected "
                    f"({X.shape[0]}, {Y.shape[0]})."
                )
            return K
        D = squared_distances(X, Y, Y_norm_squared)
        if self.kernel == "gaussian":
            D *= -0.5 / self.bandwidth**2
            return np.exp(D, out=D)
        return _from_distance(self, np.sqrt(D, out=D))

    def diagonal(self, X, block=256):
        """``k(x_i, x_i)`` for every row, shape (n,)."""
        if isinstance(self.kernel, str):  # the built-in kernels: k(x, x) = 1
            return np.ones(X.shape[0])
        out = np.empty(X.shape[0])
        for start in range(0, X.shape[0], block):
            sl = slice(start, start + block)
            out[sl] = np.diag(self(X[sl], X[sl]))
        return out


def squared_norms(X):
    """``|x_i|^2`` of the rows of a float64 array or sparse matrix."""
    if sp.issparse(X):
        return row_norms(X, squared=True)
    return np.einsum("ij,ij->i", X, X)


#: bytes a stored entry of a sparse row costs as a token of
#: :func:`row_value_order` (a tuple of Python objects: 175 measured)
_TOKEN_BYTES = 200


def row_value_order(X):
    """``np.lexsort(X.T[::-1])``, the rows of ``X`` in lexicographic order
    (equal rows adjacent, by index). A sparse ``X`` is ordered from its
    entries: each row becomes the sequence of its nonzero entries ``(j, v)``,
    in the order of their columns, as tokens ``(0, j, v)`` for ``v < 0`` and
    ``(2, -j, v)`` for ``v > 0``, closed by ``(1,)``; two such sequences
    compare as the dense rows do (at the first entry where they differ, a
    negative value sorts before the zero of the other row and a positive one
    after it). The tokens are Python objects, about ``_TOKEN_BYTES`` an
    entry, refused above ``path_memory_limit``; where the dense copy takes
    less (a density above about 4 %) and fits in ``working_memory``, its
    ``lexsort`` instead, which takes a pass a column (docs/benchmarks.rst,
    "EigenPro on a sparse X")."""
    if not sp.issparse(X):
        return np.lexsort(X.T[::-1])
    dense_bytes = 8 * X.shape[0] * X.shape[1]
    if dense_bytes < _TOKEN_BYTES * X.nnz and dense_bytes <= working_memory_bytes():
        return np.lexsort(X.toarray().T[::-1])
    X = sp.csr_matrix(X, copy=True)
    X.sum_duplicates()  # (sorts the indices)
    X.eliminate_zeros()
    copy = (f"Raise working_memory to {dense_bytes / 2**20:.4g} MiB (the rows' dense copy), "
            "or set" if dense_bytes < _TOKEN_BYTES * X.nnz else "Set")
    check_memory(_TOKEN_BYTES * X.nnz, f"the order of {X.shape[0]} sparse rows by their "
                 f"{X.nnz} entries", f"{copy} n_components (the split rule that orders them "
                 "runs for n_components='auto'). ")
    ptr, cols, vals = X.indptr, X.indices.tolist(), X.data.tolist()

    def key(i):
        return tuple((0, j, v) if v < 0 else (2, -j, v)
                     for j, v in zip(cols[ptr[i]: ptr[i + 1]], vals[ptr[i]: ptr[i + 1]],
                                     strict=True)) + ((1,),)

    return np.array(sorted(range(X.shape[0]), key=key), dtype=np.intp)


def squared_distances(X, Y, Y_norm_squared=None):
    """``||x - y||^2`` of the rows of two float64 arrays (or sparse
    matrices), by scikit-learn's ``euclidean_distances`` operations (``|x|^2 -
    2 x.y + |y|^2``, clipped at 0, zero on the diagonal of ``X`` with itself)
    without its input checks, a third of the time of the set-up's small
    kernel matrices (docs/benchmarks.rst)."""
    same = Y is X
    sparse = sp.issparse(X) or sp.issparse(Y)
    if not sparse:
        X = np.asarray(X, dtype=np.float64)
        Y = X if same else np.asarray(Y, dtype=np.float64)
    XX = squared_norms(X)[:, None]
    if same:
        YY = XX.T
    elif Y_norm_squared is None:
        YY = squared_norms(Y)[None, :]
    else:
        YY = None
    D = (np.asarray(safe_sparse_dot(X, Y.T, dense_output=True), dtype=np.float64) if sparse
         else X @ Y.T)
    D *= -2
    return _finish_distances(D, XX, YY, Y_norm_squared, same)


def _finish_distances(D, XX, YY, Y_norm_squared, same):
    """``D = -2 X Y^T`` plus the squared norms (``YY`` from ``Y_norm_squared``
    where ``None``), clipped at 0, zero on the diagonal of ``X`` with itself."""
    if YY is None:
        YY = np.asarray(Y_norm_squared, dtype=np.float64).reshape(1, -1)
        if YY.shape[1] != D.shape[1]:
            raise ValueError(f"Y_norm_squared has {YY.shape[1]} values for {D.shape[1]} rows "
                             "of Y.")
    D += XX
    D += YY
    np.maximum(D, 0.0, out=D)
    if same:
        np.fill_diagonal(D, 0.0)
    return D


def distance_factors(kernel, X, sq):
    """``(L, R)`` of shape (n, d + 2) with ``L_a . R_b`` the exponent of the
    Gaussian kernel in base 2, ``-log2(e) ||a - b||^2 / (2 sigma^2)`` (other
    kernels: the squared distance): ``L = [a c, -|a|^2 c / 2, -c / 2]``,
    ``R = [b, 1, |b|^2]``, ``c = log2(e) / sigma^2`` (``[-2 a, |a|^2, 1]`` and
    ``R``), in the dtype of ``X``. The squared norms enter the matrix product
    itself: a block is one product and the kernel's passes in place; base 2
    because NumPy's ``exp2`` is faster than ``exp`` (docs/benchmarks.rst,
    EigenPro's section; the factor's rounding is the same)."""
    one = np.ones((X.shape[0], 1), dtype=X.dtype)
    sq = sq.astype(X.dtype, copy=False)[:, None]
    R = np.hstack([X, one, sq])
    if kernel.kernel == "gaussian":
        c = np.log2(np.e) / kernel.bandwidth**2
        L = np.hstack([c * X, (-0.5 * c) * sq, (-0.5 * c) * one])
    else:
        L = np.hstack([-2.0 * X, sq, one])
    return L.astype(X.dtype, copy=False), R


def factor_block(kernel, LA, RB, out=None):
    """``k(A, B)`` from the factors of :func:`distance_factors` (the rows
    centred: the cancellation is about ``eps (|a|^2 + |b|^2)``), in ``out``
    if given (an array of shape (len(LA), len(RB)), reused across blocks).
    A squared distance that rounding puts below 0 is clipped; the Gaussian
    exponent is not (``exp2`` of a rounding error, ``1 + O(eps)``)."""
    K = np.matmul(LA, RB.T, out=out)
    if kernel.kernel == "gaussian":
        return np.exp2(K, out=K)
    np.maximum(K, 0.0, out=K)
    return _from_distance(kernel, np.sqrt(K, out=K))


def kernel_product(kernel, A, B, G, B_sq=None):
    """``kernel(A, B) @ G`` (float64) by row chunks of ``A`` within the
    working memory; ``B_sq`` the squared row norms of ``B``."""
    out = np.empty((A.shape[0], G.shape[1]))
    chunk = max(1, int(working_memory_bytes() // (16 * max(B.shape[0], 1))))
    for s in range(0, A.shape[0], chunk):
        out[s: s + chunk] = kernel(A[s: s + chunk], B, Y_norm_squared=B_sq) @ G
    return out


def median_bandwidth(X, sample_weight, size, random_state, statistics):
    """Median distance between two draws of ``size`` from the weighted rows.

    ``size`` draws of the multiset of rows (:func:`draw_rows`: every row when
    ``size`` reaches ``n_eff``), repeated by their counts; the median of
    ``||x_i - x_j||`` over their pairs ``i < j`` (the median heuristic,
    e.g. Gretton et al. 2012). Integer weights give the bandwidth of the
    repeated rows.
    """
    rows, counts, _ = draw_rows(sample_weight, size, random_state, X.shape[0], statistics)
    repeats = np.round(counts).astype(np.int64)
    if sp.issparse(X):  # not centred (the rows stay sparse)
        Z = X[np.repeat(rows, repeats)]
    else:
        Z = np.repeat(X[rows], repeats, axis=0)
    k = Z.shape[0]
    if k < 2:
        return 1.0
    if not sp.issparse(Z):
        Z = Z - Z.mean(axis=0)
    sq = squared_norms(Z)
    D2 = np.asarray(safe_sparse_dot(Z, Z.T, dense_output=True), dtype=np.float64)
    D2 *= -2.0
    D2 += sq[:, None]
    D2 += sq[None, :]
    # the median over the pairs i < j by one selection on the whole matrix:
    # the k diagonal entries (set below every distance) come first, then
    # every pair twice, so that its entries k + N - 1 and k + N (N pairs)
    # are the middle pairs' (the square root is monotone)
    np.maximum(D2, 0.0, out=D2)
    np.fill_diagonal(D2, -1.0)
    flat = D2.reshape(-1)
    n_pairs = k * (k - 1) // 2
    hi = k + n_pairs
    flat.partition(hi)
    lo = flat[:hi].max()
    med = float(np.sqrt(flat[hi]) + np.sqrt(lo)) / 2.0
    return med if med > 0 else 1.0


def scale_bandwidth(X, sample_weight=None):
    """``sqrt(n_features * Var(X))``: the typical distance between two rows.

    ``Var`` is the (frequency-weighted) variance of all entries of ``X``
    around the column means, so that ``E ||x - z||^2 = 2 sigma^2`` for two
    independent rows.
    """
    if sp.issparse(X):
        weights = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        var = mean_variance_axis(sp.csr_matrix(X), axis=0, weights=weights)[1].sum()
    else:
        mean = np.average(X, axis=0, weights=sample_weight)
        var = np.average((X - mean) ** 2, axis=0, weights=sample_weight).sum()
    return float(np.sqrt(var)) if var > 0 else 1.0


def padded_columns(k, policy):
    """The columns a blocked product of ``k`` right-hand sides runs with: ``k``
    rounded up to the speed policy's ``kernel_rhs_multiple`` (BLAS's kernels
    take the columns by groups; a remainder can cost more than a full group)."""
    mult = policy.kernel_rhs_multiple
    return -(-k // mult) * mult


def vector_columns(k, policy):
    """The last columns of ``k`` that run as matrix-vector products on the
    block: at most ``kernel_gemv_tail`` past a multiple of ``kernel_gemm_block``
    (at least one such multiple; 0 otherwise)."""
    block, tail = policy.kernel_gemm_block, policy.kernel_gemv_tail
    r = k % block
    return r if k > block and r <= tail else 0


class KernelOperator:
    """Products with the kernel matrix of the training rows, by row chunks.

    The Gaussian kernel's blocks are computed and multiplied from centred
    rows in one fused pass per cache panel (:func:`factor_block`), in
    float64 or, after :meth:`to_single`, in float32; the products come back
    in float64. Other kernels, and a sparse ``X`` (CSR), go through
    :class:`Kernel` by chunks of ``working_memory``, in float64; ``policy``:
    the speed policy (the panels' size).
    The kernel matrix is kept (:meth:`ensure`, :meth:`release`), the whole
    of it or its leading rows (:meth:`_kept_rows`), within the speed
    policy's ``kernel_matrix_share`` of ``working_memory``; the products
    read the kept rows by panels (:meth:`_kept_product`) and compute the
    others' blocks (:meth:`_block_product`).
    """

    def __init__(self, kernel, X, policy):
        self.kernel, self.X, self.policy = kernel, X, policy
        self.sq = squared_norms(X)
        self.single = False
        # the fused blocks read centred dense rows: a sparse X goes by chunks
        self.fused = kernel.kernel == "gaussian" and not sp.issparse(X)
        if self.fused:
            Xf = X - X.mean(axis=0)
            self.left, self.right = distance_factors(kernel, Xf, np.einsum("ij,ij->i", Xf, Xf))
        self.kept = self._kept_rows(8)
        self.full = None

    @property
    def use_full(self):
        """Whether the whole kernel matrix is kept."""
        return self.kept == self.X.shape[0]

    def _kept_rows(self, itemsize):
        """The leading rows of the kernel matrix that :meth:`ensure` keeps
        (``itemsize`` bytes an entry): all ``n`` where the matrix takes at
        most the speed policy's ``kernel_matrix_share`` of ``working_memory``;
        else, for the fused Gaussian blocks, as many as that share holds
        where they are at least ``kernel_rows_min_share`` of them; else 0."""
        n = self.X.shape[0]
        rows = int(self.policy.kernel_matrix_share * working_memory_bytes()
                   // (itemsize * max(n, 1)))
        if rows >= n:
            return n
        return rows if self.fused and rows >= self.policy.kernel_rows_min_share * n else 0

    def to_single(self):
        """Single-precision products from now on (the Gaussian kernel); the
        kernel matrix is kept up to twice as many entries."""
        self.single = True
        self.left = self.left.astype(np.float32)
        self.right = self.right.astype(np.float32)
        self.kept = self._kept_rows(4)
        if self.full is not None:  # (a longer one is computed again)
            self.full = (self.full.astype(np.float32) if self.full.shape[0] == self.kept
                         else None)

    def ensure(self):
        """Compute the kept rows of the kernel matrix (:meth:`_kept_rows`)."""
        if self.kept and self.full is None:
            n = self.X.shape[0]
            if self.fused:  # from the centred rows, in their precision, by cache panels
                full = np.empty((self.kept, n), dtype=self.left.dtype)
                step = self._panel_rows(full.itemsize)
                for s in range(0, self.kept, step):
                    e = min(s + step, self.kept)
                    factor_block(self.kernel, self.left[s:e], self.right, out=full[s:e])
                self.full = full
            else:  # (the whole matrix: no leading rows alone)
                K = self.kernel(self.X, self.X, Y_norm_squared=self.sq)
                self.full = K.astype(np.float32) if self.single else K

    def release(self):
        """Drop the kept kernel matrix (a fitted model does not keep it)."""
        self.full = None

    def _panel_rows(self, itemsize):
        """Rows of the kernel matrix (``itemsize`` bytes an entry) in a panel
        of at most the speed policy's ``panel_bytes``: how :meth:`ensure`
        computes the kept rows and :meth:`_kept_product` reads them."""
        return max(1, int(self.policy.panel_bytes // (itemsize * max(self.X.shape[0], 1))))

    def _kept_product(self, rows, G):
        """``k(X, X[rows]) @ G`` for kept ``rows`` (symmetric: ``(G^T
        K[rows])^T``, where more columns cost little more than one): one
        product where the sorted rows are consecutive (full batch, the
        probes), else by panels of rows of ``K`` of at most ``panel_bytes``,
        each gathered into cache and its product added (no copy of the
        whole ``K[rows]``). In float64, C-ordered (the steps gather its rows)."""
        n, K = self.X.shape[0], self.full
        order = np.argsort(rows, kind="stable")
        rows, Gt = rows[order], np.ascontiguousarray(G[order].T)
        if rows.shape[0] and np.all(np.diff(rows) == 1):  # a view of K (no repeat)
            return np.ascontiguousarray((Gt @ K[rows[0]:rows[-1] + 1]).T, dtype=np.float64)
        step = self._panel_rows(K.itemsize)
        if step >= rows.shape[0]:
            return np.ascontiguousarray((Gt @ K[rows]).T, dtype=np.float64)
        out = np.zeros((Gt.shape[0], n), dtype=K.dtype)
        part = np.empty_like(out)
        for s in range(0, rows.shape[0], step):
            # (a fancy-indexed panel: faster here than np.take into a buffer)
            out += np.matmul(Gt[:, s:s + step], K[rows[s:s + step]], out=part)
        return np.ascontiguousarray(out.T, dtype=np.float64)

    def matmul(self, rows, G):
        """``k(X, X[rows]) @ G`` for G of shape (len(rows), k), in float64."""
        if self.full is None:
            return self._block_product(rows, G)
        G = G.astype(np.float32 if self.single else np.float64, copy=False)
        if self.use_full:
            return self._kept_product(rows, G)
        kept = rows < self.kept
        if kept.all():
            return self._kept_product(rows, G)
        out = self._block_product(rows[~kept], G[~kept])
        if kept.any():
            out += self._kept_product(rows[kept], G[kept])
        return out

    def _block_product(self, rows, G):
        """``k(X, X[rows]) @ G``, its blocks computed (float64)."""
        dt = np.float32 if self.single else np.float64
        n = self.X.shape[0]
        block = self.policy.kernel_column_block
        if self.fused and len(rows) > block:
            # k(X, X[rows]) @ G by blocks of rows: a cache panel of the whole
            # width holds too few rows of X for an efficient block product
            out = np.zeros((n, G.shape[1]))
            for s in range(0, len(rows), block):
                out += self._block_product(rows[s:s + block], G[s:s + block])
            return out
        if self.fused:
            out = np.empty((n, G.shape[1]))
            RB, Gd = self.right[rows], G.astype(dt, copy=False)
            k = G.shape[1]
            tail = vector_columns(k, self.policy)
            k -= tail
            Gv, Gd = Gd[:, k:].T.copy(), (np.ascontiguousarray(Gd[:, :k]) if tail else Gd)
            pad = padded_columns(k, self.policy) - k if k > 1 else 0
            if pad:  # BLAS's kernels: fewer columns can cost more
                Gd = np.hstack([Gd, np.zeros((Gd.shape[0], pad), dtype=dt)])
            # blocks of a cache panel (the passes over a block are memory-bound)
            width = np.dtype(dt).itemsize * max(len(rows), 1)
            chunk = max(1, int(min(working_memory_bytes(), self.policy.panel_bytes) // width))
            buf = np.empty((min(chunk, n), len(rows)), dtype=dt)
            prod = np.empty((min(chunk, n), Gd.shape[1]), dtype=dt)
            vec = np.empty(min(chunk, n), dtype=dt)
            for s in range(0, n, chunk):
                e = min(s + chunk, n)
                B = factor_block(self.kernel, self.left[s:e], RB, buf[: e - s])
                np.matmul(B, Gd, out=prod[: e - s])
                out[s:e, :k] = prod[: e - s, :k]
                for j in range(tail):  # the block is in cache
                    out[s:e, k + j] = np.matmul(B, Gv[j], out=vec[: e - s])
            return out
        return kernel_product(self.kernel, self.X, self.X[rows], G, self.sq[rows])
