"""The centred, weighted design matrix as a linear operator.

Every trajectory works on the transformed problem

    X~ = diag(sqrt(w)) (X - 1 x_offset^T),   y~ = sqrt(w) (y - y_offset),

with ``w`` the sample weights (ones by default), ``x_offset``/``y_offset``
their weighted means when ``fit_intercept=True`` (zeros otherwise, or the
offsets given: a design whose intercept is a column of its own, centred
about the other columns' means) and ``n_eff = sum(w)``. The least-squares
data fit is ``||y~ - X~ b||^2 / (2 n_eff)``, which is scikit-learn's
weighted objective, and the intercept is recovered as ``y_offset -
x_offset @ b`` (weighted centring).

Dense inputs are centred once (a copy, like scikit-learn's ``copy_X=True``);
sparse inputs are never densified: the centring is applied implicitly in
every product. Inside :func:`shared_designs` the fits of one search (the
alpha path and its candidates) share the design of the same data
(:func:`make_design`): one copy of ``X~``, one Gram matrix.
"""

import contextlib
import contextvars
import hashlib
import threading

import numpy as np
import scipy.sparse as sp
from scipy import linalg

from .._policy import current_policies
from .._trace import taken
from ..utils._parallel import blas_threads, factorization_blas, kept_workers
from ..utils._validation import overflow_error
from ._linalg import top_eigenvalue
from ._step_bound import identity_residual, lanczos_top_of


def _sum_in_order(sums):
    """``sums[0] + sums[1] + ...`` in that order (into ``sums[0]``)."""
    total = sums[0]
    for other in sums[1:]:
        total += other
    return total


# the designs shared inside shared_designs() (None outside): per context, so
# that the threads of joblib workers (which start from an empty context)
# never share one
_SHARED = contextvars.ContextVar("skacv_shared_designs", default=None)


@contextlib.contextmanager
def shared_designs():
    """Inside, :func:`make_design` returns one :class:`Design` per data
    (the same ``X`` object, weights and intercept), with its caches (the
    Gram matrix and ``C`` of the covariance form, the step size): the fits
    of a search run one after the other on it. Nested uses share the
    outermost's. The designs are dropped on exit."""
    if _SHARED.get() is not None:
        yield
        return
    token = _SHARED.set({"thread": threading.get_ident()})
    try:
        yield
    finally:
        _SHARED.reset(token)


def release_shared(name):
    """Drop the cache entry ``name`` of every design shared in the current
    :func:`shared_designs` block (a search's stage that no longer needs it;
    nothing outside a block)."""
    shared = _SHARED.get()
    if shared is None or shared["thread"] != threading.get_ident():
        return
    for key, entry in shared.items():
        if key != "thread":
            entry[1].cache.pop(name, None)


def forget_shared(X):
    """Drop every design shared in the current :func:`shared_designs` block
    on the array ``X`` (the same object), its caches with it: data a search
    made for one stage (a fold's rows) that no later fit reads. Nothing
    outside a block."""
    shared = _SHARED.get()
    if shared is None or shared["thread"] != threading.get_ident():
        return
    for key in [k for k, entry in shared.items() if k != "thread" and entry[0] is X]:
        del shared[key]


def make_design(X, sample_weight=None, fit_intercept=True):
    """``Design(X, sample_weight, fit_intercept)``, or inside
    :func:`shared_designs` the one already made for the same ``X`` (the
    same object, shape and dtype), the same weights (by value) and
    intercept."""
    taken("make_design")
    shared = _SHARED.get()
    if shared is None or shared["thread"] != threading.get_ident():
        # (a thread that inherited the context, as Python 3.14's may, does
        # not share: the fits of a search's joblib workers run at once)
        return Design(X, sample_weight, fit_intercept)
    weight = None
    if sample_weight is not None:
        w = np.ascontiguousarray(sample_weight)
        weight = (w.dtype.str, hashlib.blake2b(w.view(np.uint8), digest_size=16).digest())
    key = (id(X), X.shape, X.dtype.str, bool(fit_intercept), weight)
    hit = shared.get(key)
    if hit is not None and hit[0] is X:
        return hit[1]
    design = Design(X, sample_weight, fit_intercept)
    design.shared = True
    shared[key] = (X, design)  # X kept: its id stays its own while shared
    return design


class Design:
    """Centred and weighted design ``X~`` with fast products.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
    sample_weight : ndarray of shape (n_samples,) or None
    fit_intercept : bool
    copy : bool, default=True
        ``False``: a dense ``X`` (C-contiguous, writable, the caller's own
        copy) is centred and weighted in place instead of copied.
    policies : (SpeedPolicy, StatisticalPolicy), default=None
        The policies of the computation (a derived design's: its parent's);
        ``None``: those in force, captured here (a fit starts with its design).
    x_offset : ndarray of shape (n_features,), default=None
        Offsets subtracted from the columns of a design without intercept
        (``fit_intercept=False``): the intercept is then a column of ``X``
        (:class:`~skacv.estimators._intercept_column.InterceptColumnMixin`),
        the other columns centred about their means. Not read with an
        intercept.

    Attributes
    ----------
    n_samples, n_features : int
    n_eff : float
        ``sum(sample_weight)`` (``n_samples`` without weights).
    x_offset : ndarray of shape (n_features,)
    shifted : bool
        Whether ``x_offset`` is subtracted (an intercept, or offsets given).
    sqrt_weight : ndarray of shape (n_samples,) or None
    dtype : numpy dtype
    policy, statistics : SpeedPolicy, StatisticalPolicy
        The policies every product, spectrum and estimate on this design reads.
    """

    # the threads of the panel groups inside a fit loop (:meth:`panel_workers`)
    _panel_run = None

    def __init__(self, X, sample_weight=None, fit_intercept=True, copy=True, policies=None,
                 x_offset=None):
        p = X.shape[1]
        self._start(X, sample_weight, fit_intercept, policies)
        if x_offset is not None and not fit_intercept:
            self.x_offset = np.asarray(x_offset, dtype=X.dtype).ravel()
            self.shifted = True
        elif fit_intercept:
            if self.weight is None:
                self.x_offset = np.asarray(X.mean(axis=0), dtype=X.dtype).ravel()
            else:
                self.x_offset = np.asarray(
                    X.T @ self.weight / self.n_eff, dtype=X.dtype
                ).ravel()
        else:
            self.x_offset = np.zeros(p, dtype=X.dtype)
        if self.sparse:
            self.X = X.tocsr() if X.format not in ("csr", "csc") else X
        elif self.shifted or self.weight is not None:
            in_place = not copy and X.flags.c_contiguous and X.flags.writeable
            self.X = X if in_place else np.array(X, dtype=X.dtype, order="K", copy=True)
            if self.shifted:
                self.X -= self.x_offset
            if self.sqrt_weight is not None:
                self.X *= self.sqrt_weight[:, None]
        else:
            self.X = X

    def _start(self, X, sample_weight, fit_intercept, policies, sqrt_weight=None):
        """The attributes of a design on ``X`` that do not read its values
        (``sqrt_weight``: ``sqrt(sample_weight)`` if known)."""
        n, p = X.shape
        self.policy, self.statistics = current_policies() if policies is None else policies
        # spectral decompositions of this design (a warm-started refit on the
        # same data reuses the whole design, these included)
        self.cache = {}
        self.shared = False  # a search's, made by make_design inside shared_designs
        self.n_samples, self.n_features = n, p
        self.dtype = X.dtype
        self.fit_intercept = fit_intercept
        self.shifted = fit_intercept
        self.sparse = sp.issparse(X)
        if sample_weight is None:
            self.weight = None
            self.sqrt_weight = None
            self.n_eff = float(n)
        else:
            self.weight = np.asarray(sample_weight, dtype=X.dtype)
            self.sqrt_weight = np.sqrt(self.weight) if sqrt_weight is None else sqrt_weight
            self.n_eff = float(self.weight.sum(dtype=np.float64))

    @classmethod
    def centred(cls, Xt, x_offset, sample_weight=None, fit_intercept=True, policies=None):
        """The design whose ``X~`` is ``Xt`` (dense), already centred by
        ``x_offset`` and weighted (``sqrt(w) (X - 1 x_offset^T)``): no copy
        and no pass over it (the stacked folds' copy of the full fit's
        ``X~``, :class:`~skacv.model_selection._kfold.StackedFolds`)."""
        design = cls.__new__(cls)
        design._start(Xt, sample_weight, fit_intercept, policies)
        design.x_offset = np.asarray(x_offset, dtype=Xt.dtype).ravel()
        design.shifted = fit_intercept or bool(np.any(design.x_offset))
        design.X = Xt
        return design

    def center_y(self, y):
        """Return ``(y_offset, y~)`` for a target ``y`` of shape (n_samples,)."""
        y = np.asarray(y, dtype=self.dtype)
        if self.fit_intercept:
            if self.weight is None:
                y_offset = y.mean()
            else:
                y_offset = (self.weight @ y) / self.n_eff
        else:
            y_offset = self.dtype.type(0)
        yt = y - y_offset
        if self.sqrt_weight is not None:
            yt = yt * self.sqrt_weight
        return self.dtype.type(y_offset), np.ascontiguousarray(yt)

    def rows(self, idx, X_csr=None):
        """The rows ``idx`` of ``X~`` as a design of their own (a mini-batch).

        Same centring and weights (the sub-design's ``n_eff`` is the weight
        of the rows); sparse rows stay sparse (``X_csr``: a CSR copy of a
        sparse ``X``, made if not given). ``idx`` is kept as ``.idx``.
        """
        sub = object.__new__(Design)
        if self.sparse:
            sub.X = (self.X.tocsr() if X_csr is None else X_csr)[idx]
        else:
            sub.X = self.X[idx]
        weighted = self.weight is not None
        sub._start(sub.X, self.weight[idx] if weighted else None, self.fit_intercept,
                   self.policies, self.sqrt_weight[idx] if weighted else None)
        sub.idx, sub.x_offset, sub.shifted = idx, self.x_offset, self.shifted
        return sub

    @property
    def policies(self):
        """``(policy, statistics)``, for a design derived from this one."""
        return self.policy, self.statistics

    def matvec(self, b):
        """``X~ @ b`` for b of shape (n_features,) or (n_features, k)."""
        taken("matvec")
        if not self.sparse:
            return self.X @ b
        out = self.X @ b
        out = out - (self.x_offset @ b)
        if self.sqrt_weight is not None:
            out *= self.sqrt_weight if out.ndim == 1 else self.sqrt_weight[:, None]
        return out

    def rmatvec(self, r):
        """``X~.T @ r`` for r of shape (n_samples,) or (n_samples, k)."""
        taken("rmatvec")
        if not self.sparse:
            return self.X.T @ r
        if self.sqrt_weight is not None:
            r = r * (self.sqrt_weight if r.ndim == 1 else self.sqrt_weight[:, None])
        # the transposed view (CSC of a CSR: the same arrays) formed once, not at
        # every product (its constructor's checks cost more than a small product)
        XT = self.cache.get("sparse_transposed")
        if XT is None:
            XT = self.cache["sparse_transposed"] = self.X.T
        out = XT @ r
        if self.shifted:
            out = out - np.multiply.outer(self.x_offset, r.sum(axis=0))
        return np.asarray(out)

    @property
    def fuses(self):
        """The fit loop reads ``X~`` by row panels (dense, C-ordered, at least
        the speed policy's ``fuse_min_bytes``, at most ``fuse_groups`` BLAS
        threads: docs/speed_policy.rst); the groups of panels are fixed, so
        the iterates do not depend on the number of threads."""
        policy = self.policy
        return (not self.sparse and self.X.nbytes >= policy.fuse_min_bytes
                and self.X.flags.c_contiguous and blas_threads() <= policy.fuse_groups)

    def panel_workers(self):
        """Keep the threads of the panel groups for every one-pass product
        inside (a fit loop); a product outside starts its own
        (:func:`~skacv.utils._parallel.kept_workers`, BLAS limited to one thread)."""
        return kept_workers(self, self.policy.fuse_groups, "_panel_run")

    def _sum_panel_groups(self, work, groups, sums):
        """``work(panels, Z)`` for each group and its sum ``Z``, in the panel
        workers; the sums then added in order."""
        with self.panel_workers() as run:
            run(work, list(zip(groups, sums, strict=True)))
        return _sum_in_order(sums)

    def _panel_groups(self, max_rows=None):
        """The panels (slices of rows) in ``fuse_groups`` groups of consecutive
        ones (formed once per ``max_rows``: the policy is the design's own)."""
        groups = self.__dict__.setdefault("_groups", {})
        if max_rows not in groups:
            panels = self._panels(max_rows)
            g = max(1, min(self.policy.fuse_groups, len(panels)))
            bounds = np.linspace(0, len(panels), g + 1).round().astype(int)
            groups[max_rows] = [panels[bounds[i]:bounds[i + 1]] for i in range(g)]
        return groups[max_rows]

    def _panels(self, max_rows=None):
        """The panels of :meth:`panel_products`: slices of the policy's
        ``panel_bytes`` of ``X~`` (at least 8 rows, at most ``max_rows``)."""
        X = self.X
        rows = max(8, self.policy.panel_bytes // max(1, X.shape[1] * X.itemsize))
        rows = rows if max_rows is None else min(rows, max_rows)
        return [slice(a, a + rows) for a in range(0, X.shape[0], rows)]

    def panel_products(self, b, residual, also=None):
        """``(X~ b, X~^T r)`` in one pass over a dense ``X~``: ``r[rows] =
        residual(rows, (X~ b)[rows])`` is formed while the panel of rows is
        in cache. Each group of panels sums its share of ``X~^T r`` (in
        :meth:`panel_rmatvec`'s order for a vector ``b``), the shares added
        in order after the pass; ``residual`` is called from the groups'
        threads, on disjoint rows. ``also`` (a vector ``b`` only): a second
        residual ``also(rows, (X~ b)[rows])``, whose ``X~^T s`` is returned
        third, summed in the same order (``X~^T r`` is unchanged by it).

        A block ``b`` of ``K`` columns is held transposed: ``residual(rows,
        P)`` receives and returns shape ``(K, len(rows))``, the first
        returned array is ``(X~ b)^T``, and ``X~^T r`` is accumulated in
        place by the BLAS ``gemm`` (no temporary, no separate sum), by panels
        of at most the speed policy's ``block_panel_rows_for(n_features)``
        rows.
        """
        taken("panel_products")
        X = self.X
        n, p = X.shape
        if b.ndim == 1:
            P = np.empty(n, dtype=self.dtype)
            groups = self._panel_groups()
            sums = [np.zeros(p, dtype=self.dtype) for _ in groups]
            # each group's second sum, by its first's identity
            second = {id(Z): np.zeros(p, dtype=self.dtype) for Z in sums} if also else None

            def work(panels, Z):
                taken("panel_group", thread=threading.get_ident())
                S = second[id(Z)] if also else None
                for rows in panels:
                    Xa = X[rows]
                    # NumPy's dot releases the GIL around the BLAS call
                    # (matmul keeps it on products of a panel's size)
                    np.dot(Xa, b, out=P[rows])
                    Z += np.dot(Xa.T, residual(rows, P[rows]))
                    if also:
                        S += np.dot(Xa.T, also(rows, P[rows]))

            z = self._sum_panel_groups(work, groups, sums)
            return (P, z, _sum_in_order([second[id(Z)] for Z in sums])) if also else (P, z)
        Bt = np.ascontiguousarray(b.T, dtype=self.dtype)
        K = b.shape[1]
        Pt = np.empty((K, n), dtype=self.dtype)
        gemm = linalg.get_blas_funcs("gemm", dtype=self.dtype)
        groups = self._panel_groups(self.policy.block_panel_rows_for(p))
        # Z in Fortran order: (X~^T r) of shape (p, K) is the row-major r^T X~
        sums = [np.zeros((p, K), dtype=self.dtype, order="F") for _ in groups]

        def work_block(panels, Z):
            for rows in panels:
                Xa = X[rows]
                np.matmul(Bt, Xa.T, out=Pt[:, rows])
                # Z += Xa^T r[rows]: Xa^T is a Fortran view, written in place
                gemm(1.0, Xa.T, residual(rows, Pt[:, rows]).T, beta=1.0, c=Z, overwrite_c=True)

        return Pt, self._sum_panel_groups(work_block, groups, sums)

    def operator_workers(self):
        """Context for many :meth:`normal_matvec` (a Krylov method): the panel
        groups' threads kept throughout on a design read by panels
        (:attr:`fuses`; starting them costs milliseconds a product), nothing
        otherwise (products with multithreaded BLAS)."""
        return self.panel_workers() if self.fuses else contextlib.nullcontext()

    def normal_matvec(self, B):
        """``X~^T X~ B`` (a vector or a block of columns): one pass over the
        row panels of a design the fit loop reads by panels (:attr:`fuses`;
        a third less time than two products on a large dense ``X~``), else
        :meth:`rmatvec` of :meth:`matvec`."""
        if self.fuses:
            return self.panel_products(B, identity_residual)[1]
        return self.rmatvec(self.matvec(B))

    def panel_rmatvec(self, r):
        """``X~^T r`` summed by the panels and groups of :meth:`panel_products`
        (the same rounding, so that a continued fit repeats it bit for bit)."""
        X = self.X
        groups = self._panel_groups()
        sums = [np.zeros(X.shape[1], dtype=self.dtype) for _ in groups]

        def work(panels, Z):
            for rows in panels:
                Z += np.dot(X[rows].T, r[rows])

        return self._sum_panel_groups(work, groups, sums)

    def columns_product(self, idx, c):
        """``X~[:, idx] @ c`` for a few columns ``idx`` (sorted, distinct)
        and ``c`` of shape (len(idx),): the dense columns times ``c``, or
        :meth:`matvec` of ``c`` scattered into a vector of zeros when there
        are many (the policy's ``columns_gather_share``)."""
        taken("columns_product", size=len(idx))
        idx = np.asarray(idx)
        policy = self.policy
        if idx.size > max(policy.columns_gather_min, policy.columns_gather_share * self.n_features):
            full = np.zeros(self.n_features, dtype=np.result_type(self.dtype, c))
            full[idx] = c
            return self.matvec(full)
        return self.columns(idx) @ c

    def columns(self, idx, out=None):
        """Dense ``X~[:, idx]`` (used by the risk estimator on supports);
        ``out``: where a dense ``X~``'s columns go (shape (n_samples,
        len(idx)), its dtype)."""
        taken("columns")
        if not self.sparse:
            if out is None:
                return self.X[:, idx]
            # mode="clip" (valid indices): "raise" buffers out in a temporary
            return np.take(self.X, idx, axis=1, out=out, mode="clip")
        sub = self.X[:, idx].toarray()
        if self.shifted:
            sub -= self.x_offset[idx]
        if self.sqrt_weight is not None:
            sub *= self.sqrt_weight[:, None]
        return sub

    def column_sq_norms(self):
        """``||x~_j||^2`` of every column of ``X~`` (float64, read-only),
        computed once (the design's cache: a search's fits share it)."""
        norms = self.cache.get("column_sq_norms")
        if norms is None:
            if self.sparse:  # sum w (x - m)^2 = sum w x^2 - 2 m sum w x + m^2 sum w
                X = sp.csc_array(self.X)
                w = np.ones(self.n_samples) if self.weight is None else self.weight
                m = np.asarray(self.x_offset, dtype=np.float64)
                norms = (np.asarray(X.multiply(X).T @ w, dtype=np.float64)
                         - 2.0 * m * np.asarray(X.T @ w, dtype=np.float64) + m * m * w.sum())
                np.maximum(norms, 0.0, out=norms)
            else:
                norms = np.einsum("ij,ij->j", self.X, self.X, dtype=np.float64)
            norms.flags.writeable = False
            self.cache["column_sq_norms"] = norms
        return norms

    def dense(self):
        """Dense ``X~`` (only for small problems)."""
        if not self.sparse:
            return self.X
        return self.columns(np.arange(self.n_features))

    def lipschitz(self):
        """Largest eigenvalue of ``X~^T X~ / n_eff`` (the data Hessian), once
        per design: from the Gram eigenvalues when known, LAPACK on the
        smaller Gram matrix when it is small, else Lanczos
        (:func:`~skacv.linalg._step_bound.lanczos_top_of`) on the held
        ``X~^T X~`` or the smaller operator, its top Ritz value inflated into
        an upper bound."""
        n, p = self.n_samples, self.n_features
        if "eigvalsh" in self.cache or ("eigh", self._auto_side()) in self.cache:
            lam = self.gram_eigenvalues()
            return max(float(lam[-1]) if lam.size else 0.0, 0.0)
        if min(n, p) <= self.policy.dense_eig_size:  # LAPACK on the smaller Gram matrix
            if "dense_lipschitz" not in self.cache:  # once: the fits of a search share it
                taken("dense_lipschitz")
                G = self.gram(side="auto")
                if not np.isfinite(G).all():
                    raise overflow_error(self.dtype)
                self.cache["dense_lipschitz"] = top_eigenvalue(G, policy=self.policy)
            return self.cache["dense_lipschitz"]
        if "lanczos_lipschitz" in self.cache:  # the fits of a search share the design
            return self.cache["lanczos_lipschitz"]
        G = self.cache.get(("gram", "features")) if p <= n else None
        theta = lanczos_top_of(self, G)
        tol = self.statistics.lipschitz_tol
        self.cache["lanczos_lipschitz"] = theta * (1.0 + tol) / self.n_eff
        return self.cache["lanczos_lipschitz"]

    def _auto_side(self):
        return "features" if self.n_features <= self.n_samples else "samples"

    def gram_eigenvalues(self):
        """Ascending eigenvalues of the smaller Gram matrix (``gram("auto")``),
        computed once per design; from the speed policy's
        ``eigvalsh_float32_min_order`` on in single precision (LAPACK's
        ``ssyev`` on a float32 Gram matrix)."""
        cache = self.cache
        if "eigvalsh" not in cache:
            side = self._auto_side()
            eigh = cache.get(("eigh", side))
            m = self.n_features if side == "features" else self.n_samples
            if eigh is not None:
                cache["eigvalsh"] = eigh[0]
            elif m >= self.policy.eigvalsh_float32_min_order:
                G = cache.get(("gram", side))
                G = self._gram(side, np.float32) if G is None else G.astype(np.float32)
                taken("eigvalsh_float32")
                with factorization_blas("eigvalsh", m, self.policy):
                    lam = linalg.eigh(G, eigvals_only=True, driver="ev", overwrite_a=True,
                                      check_finite=False)
                cache["eigvalsh"] = lam.astype(np.float64)
            else:
                G = self.gram(side="auto")
                with factorization_blas("eigvalsh", G.shape[0], self.policy):
                    cache["eigvalsh"] = np.linalg.eigvalsh(G) if G.size else np.zeros(0)
        return cache["eigvalsh"]

    def gram_eigh(self, side):
        """``scipy.linalg.eigh(gram(side))``, computed once per design."""
        key = ("eigh", side)
        if key not in self.cache:
            G = self.gram(side=side)
            with factorization_blas("eigh", G.shape[0], self.policy):
                self.cache[key] = linalg.eigh(G)
        return self.cache[key]

    def gram(self, side="auto"):
        """``X~^T X~ / n_eff`` (side='features') or ``X~ X~^T / n_eff``.

        ``side='auto'`` picks the smaller of the two.
        """
        taken("gram", side=side)
        n, p = self.n_samples, self.n_features
        if side == "auto":
            side = "features" if p <= n else "samples"
        dim = p if side == "features" else n
        if dim > self.policy.gram_cache_size:
            return self._gram(side)
        key = ("gram", side)
        if key not in self.cache:  # the step size, exact traces and the debiasing share it
            self.cache[key] = self._gram(side)
            self.cache[key].flags.writeable = False
        return self.cache[key]

    def _gram(self, side, dtype=np.float64):
        """The Gram matrix of ``side`` (float64; a dense ``X~`` also in ``dtype``)."""
        if not self.sparse:
            Xd = self.X.astype(dtype, copy=False)
            G = Xd.T @ Xd if side == "features" else Xd @ Xd.T
            G /= G.dtype.type(self.n_eff)
            return G
        # sparse: expand the centring instead of densifying X
        X = self.X.astype(np.float64)
        xo = self.x_offset.astype(np.float64)
        w = None if self.weight is None else self.weight.astype(np.float64)
        if side == "features":
            XW = X if w is None else sp.diags(w) @ X
            G = np.asarray((X.T @ XW).toarray())
            if self.fit_intercept:  # (x_offset = X^T w / n_eff)
                G -= self.n_eff * np.outer(xo, xo)
            else:  # offsets given: - m u^T - u m^T + n_eff m m^T, u = X^T w
                u = np.asarray(XW.sum(axis=0), dtype=np.float64).ravel()
                G -= np.outer(xo, u) + np.outer(u, xo) - self.n_eff * np.outer(xo, xo)
        else:
            G = np.asarray((X @ X.T).toarray())
            u = X @ xo
            G -= u[:, None] + u[None, :] - xo @ xo
            if w is not None:
                sw = np.sqrt(w)
                G *= np.outer(sw, sw)
        return G / self.n_eff


def design_rows(design, idx):
    """Dense rows ``X~[idx]`` (centred and weighted) of shape (len(idx), n_features)."""
    return design.rows(np.asarray(idx)).dense()


def max_row_norm2(design):
    """``max_i ||x~_i||^2 / w_i`` over rows of positive weight (unweighted rows)."""
    if not design.sparse:
        sq = np.einsum("ij,ij->i", design.X, design.X, dtype=np.float64)
    else:  # the rows of a sparse X are not weighted
        X = design.X.tocsr()
        sq = np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel()
        if design.shifted:
            xo = design.x_offset.astype(np.float64)
            sq += xo @ xo - 2.0 * np.asarray(X @ xo).ravel()
    if design.weight is not None:
        pos = design.weight > 0
        sq = sq[pos] if design.sparse else sq[pos] / design.weight[pos]
    return float(sq.max()) if sq.size else 0.0
