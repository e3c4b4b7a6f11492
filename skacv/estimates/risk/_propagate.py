"""The forward Jacobian chains of a proximal iteration: one propagator.

The memory matrix of Bellec & Tan (2024) reads traces of the Jacobians of
the iterates with respect to the response entering every step's gradient
(the *sources*). With a 0/1 prox Jacobian (ISTA, FISTA) the tangents of
``x^k`` live on the support of ``x^k``: the chains of all sources advance
as one block, rows in :func:`chain_order` (every support a prefix), the
products by ``X~`` restricted to those prefixes. A step
(:meth:`ForwardChains.run`): the gradient tangents ``-g X~^T X~ dv``, the
new source's injection, the iteration's :meth:`~skacv.Iteration.tangent`
by cache-sized groups of columns, the traces, and the extrapolation's rows
beyond the step's prefix. The probe schemes differ only in the
:class:`ChainProbes` that drives it.
"""

import time

import numpy as np

from ..._config import check_memory
from ..._trace import taken
from ...iterations._iterations import Iteration
from ...linalg._copies import gather, scratch
from ...utils._parallel import blas_threads, cache_bytes, last_level_share
from ._state import GramCache, SavedChains


def folds_step(iteration):
    """A constant step is folded into the chains' products (``-eta / n`` in the
    Gram matrix): a step's combination then only adds. Not with a schedule or a
    combine of its own (a preconditioner)."""
    return iteration.schedule is None and type(iteration).combine is Iteration.combine


def chain_factor(design, iteration):
    """``(g, fold)``: ``eta / n`` if :func:`folds_step`, else ``1 / n``."""
    fold = folds_step(iteration)
    inv_n = 1.0 / design.n_eff
    return (inv_n * iteration.step_size if fold else inv_n), fold


def resolve_chain_dtype(design, n_probes, dtype=None):
    """Precision of the Jacobian chains: ``"auto"`` or ``None`` is float32 with
    Hutchinson probes (their own error, ~1e-2, dwarfs float32 rounding) and
    the dtype of ``X`` for exact traces."""
    if dtype is None or (isinstance(dtype, str) and dtype == "auto"):
        dtype = np.float32 if n_probes is not None else None
    return np.dtype(dtype or design.dtype)


def design_columns(design, idx, dtype):
    """``X~[:, idx]`` in ``dtype``, C order; a dense design gathered by blocks of
    rows, without a full-size copy."""
    taken("design_columns")
    if design.sparse:
        return np.asarray(design.columns(idx), dtype=dtype)
    policy = design.policy
    return gather(design.dense(), dtype, policy, cols=idx,
                  out=scratch((design.n_samples, len(idx)), dtype, policy))


def chain_order(coef_path):
    """``(masks, order, prefix)``: ``masks`` (p, T + 1) the supports; ``order``
    the coordinates by the last step they are active, so that every support is
    a prefix; ``prefix[k]`` (``k = 0..T + 1``) the prefix covering every
    coordinate active at a step ``>= k``.
    """
    masks = coef_path != 0
    T = coef_path.shape[1] - 1
    steps = np.arange(T + 1)
    last = np.where(masks.any(axis=1), np.max(np.where(masks, steps, -1), axis=1), -1)
    order = np.argsort(-last, kind="stable")
    prefix = np.searchsorted(-last[order], -np.arange(T + 2), side="right")
    return masks, order, prefix


def kept_order(order, prefix, coords, k0, policy):
    """:func:`chain_order`'s ``(order, prefix)`` with ``coords`` first (the
    columns of a restricted copy of ``X~`` a continued chain keeps), or
    ``None`` when ``coords`` misses a coordinate active after ``x^0`` or the
    steps after ``k0`` would read more than ``chain_columns_reuse_steps`` times
    the copy's columns in extra rows (what a new gather costs)."""
    width = int(prefix[1])
    if coords is None or width == 0:
        return None
    p = order.size
    kept = np.zeros(p, dtype=bool)
    kept[coords] = True
    if not kept[order[:width]].all():
        return None
    new = np.concatenate([coords, order[~kept[order]]])
    position = np.empty(p, dtype=np.intp)
    position[new] = np.arange(p)
    ever = np.arange(int(prefix[0]))  # chain_order's positions of the coordinates ever active
    last = np.searchsorted(-prefix, -ever, side="left") - 1
    top = np.full(prefix.size, -1, dtype=np.intp)
    np.maximum.at(top, last, position[order[ever]])
    new_prefix = np.maximum.accumulate(top[::-1])[::-1] + 1
    extra = int(np.sum(new_prefix[k0 + 1:-1] - prefix[k0 + 1:-1]))
    if extra > policy.chain_columns_reuse_steps * len(coords):
        return None
    return new, new_prefix


def chunk_columns(rows, m, itemsize, policy):
    """Columns (a multiple of ``m``) of a cache-sized group of chains."""
    return m * max(1, policy.chain_chunk_bytes // (max(rows, 1) * m * itemsize))


def gram_product(Xs, gram, rows, cols, block, out, factor, policy):
    """``out = factor X~[:, :rows]^T X~[:, :cols] block``: from the restricted
    Gram matrix (which holds the factor) when it covers both prefixes, else by
    :func:`primal_product`; a block of few columns by Gram panels or
    matrix-vector products."""
    taken("gram_product", factor=factor)
    if gram is not None and gram.shape[0] >= max(rows, cols):
        if block.shape[1] <= policy.chain_gemv_max_columns:
            # G symmetric: G[:rows, :cols] block = (block^T G[:cols, :rows])^T
            panel = _gram_panel_rows(gram, rows, cols, block.shape[1], policy)
            gram_rows = gram[:cols, :rows]
            _gram_products(gram_rows, block, out, panel or _row_block(gram_rows, rows, policy),
                           vectors=not panel)
        else:
            np.matmul(gram[:rows, :cols], block, out=out)
    else:
        primal_product(Xs, rows, cols, block, out, factor, policy)


def _gram_panel_rows(gram, rows, cols, k, policy):
    """Rows of a panel of :func:`_gram_products`, or 0 where the
    matrix-vector products win (few columns, or a block too large for the
    last-level cache share)."""
    if (k < policy.chain_gram_panel_min_columns
            or rows * cols * gram.itemsize > policy.chain_gram_panel_llc_share
            * last_level_share(policy)):
        return 0
    return max(8, int(policy.chain_gram_panel_cache_share * cache_bytes(2, policy))
               // (gram.itemsize * max(rows, 1)))


def _gram_products(gram_rows, block, out, b, vectors=False):
    """``out = gram_rows^T block`` by blocks of ``b`` rows of ``gram_rows`` while
    they are in cache: each block's product with all the columns (``G`` read
    once for them, ``benchmarks/bench_chain_fused.py``, part 4) or
    (``vectors``) a matrix-vector product a column, as a matrix product with so
    few columns runs far below peak (part 3)."""
    rows = out.shape[0]
    Vt = np.ascontiguousarray(block.T, dtype=gram_rows.dtype)
    total = np.zeros((Vt.shape[0], rows), dtype=out.dtype)
    if vectors:
        taken("vector_products")
        part = np.empty(rows, dtype=out.dtype)
    else:
        taken("gram_panel_products")
        part = np.empty_like(total)
    for i in range(0, gram_rows.shape[0], b):
        if not vectors:
            total += np.matmul(Vt[:, i:i + b], gram_rows[i:i + b], out=part)
            continue
        for j in range(Vt.shape[0]):
            total[j] += np.matmul(Vt[j, i:i + b], gram_rows[i:i + b], out=part)
    out[...] = total.T


def _row_block(A, width, policy):
    """Rows of ``A`` in a block of about ``chain_fused_bytes`` (all if ``None``)."""
    budget = policy.chain_fused_bytes
    n = A.shape[0]
    return n if budget is None else max(8, budget // (A.itemsize * max(width, 1)))


def _thin_panel_rows(Xs, k, policy):
    """Rows of a thin panel of ``Xs`` for ``k`` columns, or 0 where thin panels
    do not pay (too many columns, no blocks, panels below 4 rows, or several
    BLAS threads on a small design)."""
    if k > policy.chain_panel_max_columns or policy.chain_fused_bytes is None:
        return 0
    rows = policy.chain_panel_bytes // (k * Xs.itemsize * max(Xs.shape[1], 1))
    if rows < 4 or (Xs.nbytes < policy.chain_panel_threads_min_bytes and blas_threads() > 1):
        return 0
    return int(rows)


def _panel_products(Xs, rows, cols, block, out, factor, panel, vectors=False):
    """:func:`primal_product` by thin panels of ``X~``, each panel's two products
    one after the other while it is in cache: ``P = V^T X~_panel^T`` then ``P
    X~_panel`` in the transposed layout, or (``vectors``: very few columns) a
    column's two matrix-vector products at a time, as the BLAS's small-matrix
    kernel for two columns can cost more than twice one column
    (``benchmarks/bench_chain_fused.py``, part 3)."""
    k = block.shape[1]
    n = Xs.shape[0]
    dtype = Xs.dtype
    # a new C-ordered array (block is left as it is): a transposed Vt (block in C
    # order, the template's Lanczos basis) costs the products 1.6 times more
    Vt = np.multiply(block.T, factor, dtype=dtype, order="C")
    total = np.zeros((k, rows), dtype=dtype)
    if vectors:
        taken("vector_panel_products")
        part, fitted = np.empty(rows, dtype=dtype), np.empty(min(panel, n), dtype=dtype)
    else:
        taken("thin_panel_products")
        part = np.empty((k, rows), dtype=dtype)
        fitted = np.empty((k, min(panel, n)), dtype=dtype)
    for i in range(0, n, panel):
        Xp = Xs[i:i + panel]
        # matmul, not dot: dot copies a panel's column prefix (a strided view)
        if not vectors:
            P = np.matmul(Vt, Xp[:, :cols].T, out=fitted[:, :Xp.shape[0]])
            total += np.matmul(P, Xp[:, :rows], out=part)
            continue
        f = fitted[:Xp.shape[0]]
        for j in range(k):
            np.matmul(Xp[:, :cols], Vt[j], out=f)
            total[j] += np.matmul(f, Xp[:, :rows], out=part)
    out[...] = total.T


def primal_product(Xs, rows, cols, block, out, factor, policy):
    """``out = factor X~[:, :rows]^T (X~[:, :cols] block)`` by blocks of rows
    of about ``chain_fused_bytes``, so that ``X~`` is read from memory once
    instead of twice; thin panels or matrix-vector panels for few columns."""
    taken("primal_product")
    panel = _thin_panel_rows(Xs, block.shape[1], policy)
    if panel and block.shape[1] < policy.chain_panel_min_columns:
        _panel_products(Xs, rows, cols, block, out, factor, _thin_panel_rows(Xs, 1, policy),
                        vectors=True)
        return
    if panel:
        _panel_products(Xs, rows, cols, block, out, factor, panel)
        return
    n = Xs.shape[0]
    b = _row_block(Xs, max(rows, cols), policy)
    if b >= n:
        fitted = Xs[:, :cols] @ block
        fitted *= factor
        np.matmul(Xs[:, :rows].T, fitted, out=out)
        return
    # C-ordered operands and sums (``block`` and ``out`` are often column
    # views of the chains: strided sums a block of rows would cost as much
    # as the products)
    taken("primal_blocks")
    block = np.ascontiguousarray(block)
    fitted = np.empty((b, block.shape[1]), dtype=np.result_type(Xs, block))
    total, part = np.zeros(out.shape, dtype=out.dtype), np.empty(out.shape, dtype=out.dtype)
    for i in range(0, n, b):
        Xb = Xs[i:i + b]
        f = np.matmul(Xb[:, :cols], block, out=fitted[:Xb.shape[0]])
        f *= factor
        total += np.matmul(Xb[:, :rows].T, f, out=part)
    out[...] = total


def _cached_gram(cached, order, best_w, Xs, factor):
    """The prefix ``order[:best_w]`` of a :class:`GramCache`, or ``None``."""
    coords = cached.coords
    position = np.full(max(int(coords.max(initial=-1)), int(order.max())) + 1, -1)
    position[coords] = np.arange(coords.size)
    idx = position[order[:best_w]]
    if (np.all(idx >= 0) and cached.gram.dtype == Xs.dtype
            and cached.factor == factor):
        return cached.gram[np.ix_(idx, idx)]
    return None


def product_columns(c, policy):
    """The columns a chain product of ``c`` columns costs like: ``2 c`` up to
    ``chain_gemv_max_columns``, else at least ``chain_min_columns``."""
    c = np.asarray(c, dtype=np.int64)
    return np.where(c <= policy.chain_gemv_max_columns, 2 * c,
                    np.maximum(c, policy.chain_min_columns))


def maybe_gram(Xs, gram, k, k_first, prefix, columns, n, factor, policy, cached=None, order=None,
               full=None):
    """Decide once (at step ``k_first``) whether to precompute the Gram matrix
    of a late prefix of columns, by the flop model ``primal: 2 n (u + r) c``
    against ``gram: 2 r u c`` plus ``n w^2`` (``c``: :func:`product_columns`);
    it is returned times ``factor``. ``cached``: a :class:`GramCache` of a
    previous stage; ``full``: ``(C, n_eff)``, the design's Gram matrix when
    formed, whose block is then taken."""
    T = columns.shape[0] - 1
    if gram is None and policy.chain_gram == "always":
        return (Xs.T @ Xs) * Xs.dtype.type(factor)
    if gram is not None or k != k_first or T < k_first + 1 or policy.chain_gram == "never":
        return gram
    # save[start] = sum over kk >= start of the per-step saving, minus the
    # Gram matrix of the prefix w = prefix[start - 1] (integers: exact in int64)
    kk = np.arange(k_first, T + 1)
    r, u = prefix[kk].astype(np.int64), prefix[kk - 1].astype(np.int64)
    c = product_columns(np.asarray(columns, dtype=np.int64)[kk], policy)
    step_save = 2 * int(n) * (u + r) * c - 2 * r * u * c
    save = np.cumsum(step_save[::-1])[::-1] - (int(n) if full is None else 1) * u * u
    best = int(np.argmax(save))  # the first of the largest savings
    if save[best] <= 0:
        return None
    best_w = int(u[best])
    if cached is not None:
        out = _cached_gram(cached, order, best_w, Xs, factor)
        if out is not None:
            return out
    check_memory(best_w * best_w * Xs.dtype.itemsize, "the restricted Gram matrix")
    if full is not None:
        taken("restricted_gram", from_full=True)
        C, n_eff = full
        idx = order[:best_w]
        gram = np.asarray(C[np.ix_(idx, idx)], dtype=Xs.dtype)
        gram *= Xs.dtype.type(n_eff * factor)
        return gram
    Xw = Xs[:, :best_w]
    gram = Xw.T @ Xw
    gram *= Xs.dtype.type(factor)
    return gram


def gram_to_keep(gram, order, factor, policy, previous=None):
    """``gram`` as a :class:`GramCache` if within ``chain_gram_cache_bytes``, else ``previous``."""
    if gram is not None and gram.nbytes <= policy.chain_gram_cache_bytes:
        return GramCache(order[: gram.shape[0]], gram, factor)
    return previous


class ChainProbes:
    """What a probe scheme tells :class:`ForwardChains`: ``m`` columns a probe
    block, the columns and injection of step ``k``, and the traces read by
    chunks or once a step.
    """

    label = "traces"
    m = 1
    #: columns after the ``c_new`` open ones that the step's tangent advances
    #: too (inputs of the scheme's own, set in :meth:`before_tangent`, read in
    #: :meth:`read_step`; no Gram product, no tail)
    extra = 0

    def open_columns(self, k):
        """``(c_old, c_new)``: open columns before step ``k`` and with the new source."""
        raise NotImplementedError

    def injection(self, k, rows):
        """The new source's probes' images ``X~^T z`` on ``rows`` rows."""
        raise NotImplementedError

    def before_tangent(self, k, chains, rows, c_old, c_new):
        """After the injection, before the tangent."""

    def read_chunk(self, k, cols, dx, dv):
        """Traces of the columns ``cols`` (``dx``, ``dv``: their new tangents)."""

    def read_step(self, k, chains, rows, c_new):
        """Traces after the whole step (the new ``dx`` in ``chains.dz``)."""

    def read_tail(self, k, rows, rows_prev, tail_v):
        """Traces of the gradient points' rows beyond the step's prefix."""


class ForwardChains:
    """The forward tangents of every open chain, advanced step by step.

    Blocks (Fortran order, rows in :func:`chain_order`): ``dv`` (gradient
    points), ``dz`` (gradient tangents; the new ``dx`` are written here),
    ``dx1`` (iterates; ``dv`` itself without extrapolation), ``dx2`` (heavy
    ball only). Without a heavy ball the tangent writes in place and the blocks
    rotate; ``dv_rows``: rows of ``dv`` that may be non-zero.
    """

    def __init__(self, design, iteration, coef_path, Xs, order, prefix, masks_s, n_cols,
                 heavy_ball=False):
        T = coef_path.shape[1] - 1
        self.iteration, self.coef_path, self.Xs = iteration, coef_path, Xs
        self.order, self.prefix, self.masks_s = order, prefix, masks_s
        self.n = design.n_samples
        self.policy = design.policy
        self.g, self.fold = chain_factor(design, iteration)
        self.dtype = Xs.dtype
        self.extrapolates = iteration.extrapolates(T)
        width = Xs.shape[1]
        self.dv = np.zeros((width, n_cols), dtype=self.dtype, order="F")
        self.dz = np.zeros_like(self.dv)
        self.dx1 = np.zeros_like(self.dv) if self.extrapolates else self.dv
        self.dx2 = np.zeros_like(self.dv) if heavy_ball else None
        self.dv_rows = self.rows_k = self.rows_prev = 0
        self.gram = None
        # the design's X~^T X~ / n_eff when formed (the covariance form):
        # the restricted Gram matrix is its block (maybe_gram)
        C = getattr(design, "cache", {}).get(("gram", "features"))
        self.design_gram = None if C is None else (C, design.n_eff)
        self._coef_cache = None  # (k, rows) -> this step's coefficients, kept for one step

    def restore(self, saved):
        """Scatter :class:`SavedChains` into this row order (all their columns)."""
        position = np.empty(self.coef_path.shape[0], dtype=np.intp)
        position[self.order] = np.arange(self.order.size)
        for name in ("dv", "dx1", "dx2"):
            block = getattr(self, name)
            coords, values = saved.get(name)
            if block is None or coords is None or coords.size == 0 or (
                    name == "dx1" and block is self.dv):
                continue
            rows = position[coords]
            block[rows, :values.shape[1]] = values
            if name == "dv":
                self.dv_rows = int(rows.max()) + 1

    def saved(self, c):
        """The chains' first ``c`` columns in coordinates (:class:`SavedChains`)."""
        order = self.order
        out = SavedChains(dv=(order[:self.dv_rows], self.dv[:self.dv_rows, :c].copy()),
                          dx1=(order[:self.rows_k], self.dx1[:self.rows_k, :c].copy()))
        if self.dx2 is not None:
            out.dx2 = (order[:self.rows_prev], self.dx2[:self.rows_prev, :c].copy())
        return out

    def _coefficients(self, k, rows):
        """The clipped extrapolation's and heavy ball's coefficients of step ``k`` on
        the first ``rows`` rows (``None``: not clipped)."""
        if self._coef_cache is not None and self._coef_cache[0] == (k, rows):
            return self._coef_cache[1]  # read again by the probes' lag-0 step
        it, path, idx = self.iteration, self.coef_path, self.order[:rows]
        coef = it.extrapolation_coefficients(k, path[:, k], path[:, k - 1])
        if coef is not None:
            coef = (coef[0][idx], coef[1][idx])
        mcoef = None
        if self.dx2 is not None and k >= 2:
            mcoef = it.momentum_coefficients(k, path[:, k - 1], path[:, k - 2])
            if mcoef is not None:
                mcoef = (mcoef[0][idx], mcoef[1][idx])
        self._coef_cache = ((k, rows), (coef, mcoef))
        return coef, mcoef

    def _gradient(self, k, probes, c_old, c_new, k_first, columns, cached):
        """Steps 1 and 2: ``dz`` of the open chains and the new source's injection."""
        rows, g = self.rows_k, self.g
        dz_k = self.dz[:rows, :c_new + probes.extra]
        if c_old and self.dv_rows:
            u = self.dv_rows
            if k == k_first or self.gram is None:  # decided once (maybe_gram)
                self.gram = maybe_gram(self.Xs, self.gram, k, k_first, self.prefix, columns,
                                       self.n, -g, self.policy, cached=cached,
                                       order=self.order, full=self.design_gram)
            gram_product(self.Xs, self.gram, rows, u, self.dv[:u, :c_old], dz_k[:, :c_old], -g,
                         self.policy)
        elif c_old:  # the chains are zero
            dz_k[:, :c_old] = 0
        if c_new > c_old:  # no new source's columns: nothing to inject here
            np.multiply(probes.injection(k, rows), g, out=dz_k[:, c_old:c_new])
        if self.dv_rows < rows:
            self.dv[self.dv_rows:rows, :c_new] = 0
        return dz_k

    def _tangents(self, k, probes, dz_k, c_new, coef, mcoef):
        """Step 3: the iteration's tangent by cache-sized groups of columns."""
        rows, rows_prev = self.rows_k, self.rows_prev
        dv, dx1, dx2 = self.dv, self.dx1, self.dx2
        swap = dx2 is None
        mask_k = self.masks_s[:rows, k]
        step = chunk_columns(rows, probes.m, self.dtype.itemsize, self.policy)
        c_all = c_new + probes.extra
        for j0 in range(0, c_all, step):
            cols = slice(j0, min(j0 + step, c_all))
            dx, dvn = self.iteration.tangent(
                k, dv[:rows, cols], dx1[:rows, cols],
                None if dx2 is None else dx2[:rows, cols], dz_k[:, cols], mask_k, coef, mcoef,
                overwrite_dz=True, out_v=dv[:rows, cols] if swap and dv is not dx1 else None,
                dz_scaled=self.fold)
            probes.read_chunk(k, cols, dx, dvn)
            if swap:
                continue  # dx is in dz, dv in place
            dx2[:rows_prev, cols] = dx1[:rows_prev, cols]
            dx1[:rows, cols] = dx
            if dv is not dx1:
                dv[:rows, cols] = dvn

    def _tail(self, k, probes, c_new, coef):
        """Step 5: rows beyond the prefix, ``dv = extrapolate(0, dx1)`` (zero when
        clipped: those coordinates are zero at ``x^k``)."""
        rows, rows_prev = self.rows_k, self.rows_prev
        if self.iteration.extrapolates(k, first=k) and rows_prev > rows and coef is None:
            tail_v = self.dv[rows:rows_prev, :c_new]
            np.multiply(self.dx1[rows:rows_prev, :c_new],
                        self.iteration.extrapolation_factors(k, None, 2, self.dtype)[1],
                        out=tail_v)
            probes.read_tail(k, rows, rows_prev, tail_v)
            self.dv_rows = rows_prev

    def _rotate(self):
        """The new tangents ``dx`` are rows ``:rows_k`` of ``dz``."""
        if self.dx2 is not None:
            return
        if self.dv is self.dx1:
            self.dv, self.dz = self.dz, self.dv
            self.dx1 = self.dv
        else:
            self.dx1, self.dz = self.dz, self.dx1

    def run(self, probes, k0, k_end, columns, cached=None, verbose=0):
        """Steps ``k0 + 1 .. k_end`` of every chain, driven by ``probes``."""
        taken("forward_chains", k0=k0, k_end=k_end)
        T = self.coef_path.shape[1] - 1
        width = self.Xs.shape[1]
        k_first = max(2, k0 + 1)  # first step with chains to propagate
        # without extrapolation nor heavy ball no step has per-coordinate coefficients
        plain = not self.extrapolates and self.dx2 is None
        prefix = self.prefix.tolist()
        tic = time.perf_counter()
        for k in range(k0 + 1, k_end + 1):
            c_old, c_new = probes.open_columns(k)
            self.rows_k = prefix[k]  # supports of steps >= k live in this prefix
            self.rows_prev = min(prefix[k - 1], width) if k >= 2 else 0
            dz_k = self._gradient(k, probes, c_old, c_new, k_first, columns, cached)
            probes.before_tangent(k, self, self.rows_k, c_old, c_new)
            coef, mcoef = (None, None) if plain else self._coefficients(k, self.rows_k)
            self._coef_cache = None  # (computed once a step)
            self._tangents(k, probes, dz_k, c_new, coef, mcoef)
            probes.read_step(k, self, self.rows_k, c_new)
            self.dv_rows = self.rows_k
            self._tail(k, probes, c_new, coef)
            self._rotate()
            if verbose and (k % max(1, T // 10) == 0 or k == T):
                print(f"[risk] {self.iteration.name} {probes.label}: step {k}/{T}, support "
                      f"prefix {self.rows_k}, "
                      f"{time.perf_counter() - tic:.1f}s")
