"""Memory matrices of proximal iterations by propagating Jacobian actions.

For ISTA/FISTA (any iteration whose prox Jacobian is a 0/1 mask) the tangent
of ``x^k`` with respect to the copy ``y^(s)`` of the response that enters
the gradient at ``v^s`` lives on the support of ``x^k``. All sources are
propagated together as one block (BLAS-3), with the products by ``X~``
restricted to the columns of the supports (prefix views of a copy of ``X~``
whose columns are sorted by the last step they are active) and Gram-restricted
products where a flop model says they are cheaper. Traces use Hutchinson
probes, or identity probes for exact traces (``n_probes=None``). Without
a heavy ball the sources before a step ``r`` go forward to it and the
outputs after it go backward by the transposed steps
(:func:`_backward_chains`, :func:`_backward_chains_extrapolated`):
``m T^2 / 4`` chain-steps (``m T^2 / 3`` with extrapolation) instead of
``m T^2 / 2``.
"""

import time

import numpy as np

from .._config import check_memory, get_config
from ..iterations._iterations import Iteration
from ..linalg._design import gather
from ..linalg._linalg import block_trace as _block_trace
from ._risk_core_space import core_space_memory_matrix, core_space_plan


def masked_memory_matrix(design, iteration, coef_path, n_probes, rng, chain_dtype, verbose=0,
                         state=None, keep_state=False, probes=None):
    """Hutchinson (or exact) memory matrices of a proximal trajectory.

    For source ``s`` the tangent of ``x^k`` lives on the support of ``x^k``.
    All sources are propagated together as one block, with products by
    ``X~`` restricted to the columns of the supports (prefix views of a copy
    of ``X~`` whose columns are sorted by the last step they are active).

    ``state`` (returned with ``keep_state=True``, Hutchinson probes only)
    holds the chains after the last step of a shorter prefix of the same
    trajectory: the computation continues from there, so that extending a
    path by warm start costs only the new rows of the memory matrices.

    Without a state to keep or continue, Hutchinson chains switch to a
    diagonalised core (:mod:`skacv.estimates._risk_core_space`) at the step where a
    flop model says so: supports that are wide or settle. ``probes``: the
    Rademacher probes to use (default: drawn from ``rng``).

    Returns
    -------
    A, A_sources : ndarrays of shape (T + 1, T + 1)
    state : dict or None
    """
    n = design.n_samples
    T = coef_path.shape[1] - 1
    inv_n = 1.0 / design.n_eff
    # a constant step is folded into the products (the Gram matrix holds
    # -eta / n, the injections eta / n): a step's combination then only adds
    # (Iteration.combine's z_scaled), one pass over the chains fewer
    fold = iteration.schedule is None and type(iteration).combine is Iteration.combine
    g = inv_n * iteration.step_size if fold else inv_n
    dtype = np.dtype(chain_dtype)
    keep_state = keep_state and n_probes is not None
    if state is not None and not (
        state.get("kind") == "chains" and n_probes is not None
        and state["m"] == int(n_probes) and state["dtype"] == dtype and state["k"] <= T
        and state["Z"].shape[0] == n
    ):
        state = None
    k0 = 0 if state is None else state["k"]
    masks, order, prefix = chain_order(coef_path)
    width = int(prefix[max(k0 - 1, 1)]) if T >= 1 else 0
    A = np.zeros((T + 1, T + 1))
    Av = np.zeros((T + 1, T + 1))
    if state is not None:
        A[: k0 + 1, : k0 + 1] = state["A"]
        Av[: k0 + 1, : k0 + 1] = state["Av"]
    Z = None  # Rademacher probes (the saved ones when continuing)
    if n_probes is not None:
        Z = state["Z"] if state is not None else probes if probes is not None else (
            rng.choice([-1.0, 1.0], size=(n, int(n_probes))).astype(dtype))
    if width == 0:  # every iterate after x^0 is zero: nothing depends on y
        return A, Av, (_chain_state(T, Z, dtype, A, Av, {}) if keep_state else None)
    # the tangents of x^{k-1} and v^{k-1} are one block without extrapolation
    extrapolates = any(iteration.beta(k) != 0.0 for k in range(1, T + 1))
    hb = uses_heavy_ball(iteration, T)
    # without a heavy ball, sources 0..r-1 go forward to step r and the
    # outputs r+1..T go backward to it (the transposed steps), met by inner
    # products (a warm start continues the forward chains instead)
    split = T
    if state is None and not keep_state and not hb:
        split = split_step(n, prefix, T, 2 if extrapolates else 1)
    if n_probes is not None and state is None and not keep_state:
        step_cost = chain_step_cost(n, prefix, int(n_probes), T)
        plan = core_space_plan(iteration, coef_path, n, int(n_probes), step_cost,
                               dtype.itemsize,
                               total=chain_step_cost(n, prefix, int(n_probes), T, split,
                                                       2 if extrapolates else 1).sum(),
                               split=split < T)
        if plan is not None:
            head = None
            if plan.start > 1:  # the first steps in coordinates
                head = masked_memory_matrix(design, iteration, coef_path[:, :plan.start],
                                            n_probes, rng, dtype, verbose, keep_state=True,
                                            probes=Z)[2]
            A, Av = core_space_memory_matrix(
                lambda idx, dt: design_columns(design, idx, dt), iteration, coef_path, Z,
                inv_n, plan, dtype, head=head, verbose=verbose)
            return A, Av, None
    Xs = design_columns(design, order[:width], dtype)
    if n_probes is None:  # exact traces: identity probes on the smaller side
        if n <= width:
            probes = Xs.T  # X~^T Z with Z = I_n
            trace_wt = Xs
            m, scale = n, 1.0
        else:
            probes = np.eye(width, dtype=dtype)  # inject e_j, trace with X~^T X~
            trace_wt = (Xs.T @ Xs).astype(dtype)
            m, scale = width, 1.0
    else:
        m = int(n_probes)
        trace_wt = Z.T @ Xs  # (X~^T Z)^T, read by the traces
        probes = trace_wt.T
        scale = 1.0 / m
    k_end = split
    cols_max = m * k_end
    n_blocks = 2 + extrapolates + hb
    check_memory(
        n_blocks * width * cols_max * dtype.itemsize,
        f"the Jacobian chains ({width} x {cols_max}, {n_blocks} blocks)",
        "Use fewer probes (n_probes) or fewer iterations. ",
    )
    # Fortran order: the chains of one step are a prefix of columns, and the
    # transposed blocks are row-major operands of the products
    dv = np.zeros((width, cols_max), dtype=dtype, order="F")
    # gradient tangents of the current step; without a heavy ball the new
    # tangents dx are written into this block, which then swaps with dx1 (and
    # dv is written in place): zeros, so that a column is zero until a step
    # writes it (the next source's columns of dx1 and dv)
    dz = np.zeros_like(dv)
    dx1 = np.zeros_like(dv) if extrapolates else dv
    dx2 = np.zeros_like(dv) if hb else None
    dv_rows = 0  # rows of dv that may be non-zero
    if state is not None:  # scatter the saved chains into this column order
        position = np.empty(coef_path.shape[0], dtype=np.intp)
        position[order] = np.arange(order.size)
        c0 = m * k0
        for name, block in (("dv", dv), ("dx1", dx1), ("dx2", dx2)):
            coords, values = state["chains"].get(name, (None, None))
            if block is None or coords is None or coords.size == 0:
                continue
            rows = position[coords]
            block[rows, :c0] = values
            if name == "dv":
                dv_rows = int(rows.max()) + 1
    # the masks in the chains' precision, a column per step (a boolean factor
    # would be cast element by element)
    masks_s = np.asfortranarray(masks[order[:width]], dtype=dtype)
    gram = None
    k_first = max(2, k0 + 1)  # first step with chains to propagate
    tic = time.perf_counter()
    rows_k = rows_prev = 0
    columns = _chain_columns(m, T, split, 2 if extrapolates else 1)
    swap = dx2 is None
    for k in range(k0 + 1, k_end + 1):
        c_old = m * (k - 1)  # chains of sources 0..k-2 (source k-1 is new)
        c_new = m * k
        rows_k = int(prefix[k])  # supports of steps >= k live in this prefix
        rows_prev = min(int(prefix[k - 1]), width) if k >= 2 else 0
        mask_k = masks_s[:rows_k, k]
        dz_k = dz[:rows_k, :c_new]
        if c_old and dv_rows:
            u = dv_rows
            gram = maybe_gram(Xs, gram, k, k_first, prefix, columns, n, -g,
                               cached=None if state is None else state.get("gram"),
                               order=order)
            gram_product(Xs, gram, rows_k, u, dv[:u, :c_old], dz_k[:, :c_old], -g)
        elif c_old:
            dz_k[:, :c_old] = 0
        np.multiply(probes[:rows_k], g, out=dz_k[:, c_old:c_new])
        if dv_rows < rows_k:
            dv[dv_rows:rows_k, :c_new] = 0
        coef = iteration.extrapolation_coefficients(k, coef_path[:, k], coef_path[:, k - 1])
        if coef is not None:  # clipped: in the chains' row order
            rows = order[:rows_k]
            coef = (coef[0][rows], coef[1][rows])
        mcoef = None
        if dx2 is not None and k >= 2:
            mcoef = iteration.momentum_coefficients(k, coef_path[:, k - 1], coef_path[:, k - 2])
            if mcoef is not None:  # clipped heavy ball: in the chains' row order
                rows = order[:rows_k]
                mcoef = (mcoef[0][rows], mcoef[1][rows])
        # the chains are independent columns: advance them by cache-sized
        # groups of sources (tangent, traces and store in one pass)
        step = m * max(1, CHUNK_BYTES // (max(rows_k, 1) * m * dtype.itemsize))
        w_k = trace_wt[:, :rows_k]
        for j0 in range(0, c_new, step):
            cols = slice(j0, min(j0 + step, c_new))
            sources = slice(j0 // m, cols.stop // m)
            dx, dvn = iteration.tangent(
                k, dv[:rows_k, cols], dx1[:rows_k, cols],
                None if dx2 is None else dx2[:rows_k, cols], dz_k[:, cols], mask_k, coef, mcoef,
                overwrite_dz=True,
                out_v=dv[:rows_k, cols] if swap and dv is not dx1 else None, dz_scaled=fold,
            )
            A[k, sources] = scale * _block_trace(w_k, dx, m)
            Av[k, sources] = A[k, sources] if dvn is dx else scale * _block_trace(w_k, dvn, m)
            if swap:
                continue  # dx is in dz, dv in place
            dx2[:rows_prev, cols] = dx1[:rows_prev, cols]
            dx1[:rows_k, cols] = dx
            if dv is not dx1:
                dv[:rows_k, cols] = dvn
        dv_rows = rows_k
        # rows beyond the prefix: dx = 0 there, dv = extrapolate(0, dx1) (zero
        # when clipped: those coordinates are zero at x^k), from x^{k-1}'s
        # tangents on these rows (still in dx1)
        if iteration.beta(k) != 0.0 and rows_prev > rows_k and coef is None:
            tail_v = dv[rows_k:rows_prev, :c_new]
            np.multiply(dx1[rows_k:rows_prev, :c_new],
                        iteration.extrapolation_factors(k, None, 2, dtype)[1], out=tail_v)
            Av[k, :k] += scale * _block_trace(trace_wt[:, rows_k:rows_prev], tail_v, m)
            dv_rows = rows_prev
        if swap:  # the new tangents dx are rows :rows_k of dz
            if dv is dx1:
                dv, dz = dz, dv
                dx1 = dv
            else:
                dx1, dz = dz, dx1
        if verbose and (k % max(1, T // 10) == 0 or k == T):
            print(f"[risk] {iteration.name} traces: step {k}/{T}, support prefix "
                  f"{rows_k}, {time.perf_counter() - tic:.1f}s")
    if split < T:
        if gram is None:  # the backward steps may still pay for a Gram matrix
            gram = maybe_gram(Xs, None, split + 1, split + 1, prefix, columns, n, -g)
        if extrapolates:
            _backward_chains_extrapolated(
                iteration, Xs, gram, probes, trace_wt, masks_s, prefix, split,
                dx1[:rows_k, :m * split], dv[:dv_rows, :m * split], m, scale, g, A, Av,
                coef_path, order, fold)
        else:
            _backward_chains(iteration, Xs, gram, probes, trace_wt, masks_s, prefix, split,
                             dx1[:rows_k, :m * split], m, scale, g, A, fold)
            Av[:] = A
        if verbose:
            print(f"[risk] {iteration.name} traces: outputs {split + 1}..{T} backward to "
                  f"step {split}, {time.perf_counter() - tic:.1f}s")
    new_state = None
    if keep_state:
        c = m * T
        if k0 < T:  # chains after step T, in coordinates (see the loop's invariants)
            chains = {"dv": (order[:dv_rows], dv[:dv_rows, :c].copy()),
                      "dx1": (order[:rows_k], dx1[:rows_k, :c].copy())}
            if dx2 is not None:
                chains["dx2"] = (order[:rows_prev], dx2[:rows_prev, :c].copy())
        else:
            chains = state["chains"]
        new_state = _chain_state(T, Z, dtype, A, Av, chains)
        if gram is not None and gram.nbytes <= GRAM_CACHE_BYTES:
            new_state["gram"] = (order[: gram.shape[0]], gram, -g)
        elif state is not None and "gram" in state:
            new_state["gram"] = state["gram"]
    return A, Av, new_state


# largest restricted Gram matrix kept with the chains for a warm-started refit
GRAM_CACHE_BYTES = 256 * 2**20
# the chains are advanced by groups of columns of about this size (in cache)
CHUNK_BYTES = 2**20


def design_columns(design, idx, dtype):
    """``X~[:, idx]`` in ``dtype``, C order (the restricted products read
    prefixes of its columns as BLAS views); a dense design is gathered by
    blocks of rows, without a full-size copy in its own precision."""
    if design.sparse:
        return np.asarray(design.columns(idx), dtype=dtype)
    return gather(design.dense(), dtype, cols=idx)


def chain_order(coef_path):
    """The row order of the chains: ``(masks, order, prefix)``.

    ``masks`` (p, T + 1): the support of every iterate; ``order``: the
    coordinates sorted by the last step at which they are in a support, so
    that every support (and every union of consecutive ones) is a prefix;
    ``prefix[k]`` (``k = 0..T + 1``): the length of the prefix that covers
    every coordinate active at a step ``>= k``.
    """
    masks = coef_path != 0
    T = coef_path.shape[1] - 1
    steps = np.arange(T + 1)
    last = np.where(masks.any(axis=1), np.max(np.where(masks, steps, -1), axis=1), -1)
    order = np.argsort(-last, kind="stable")
    prefix = np.searchsorted(-last[order], -np.arange(T + 2), side="right")
    return masks, order, prefix


def _chain_state(k, Z, dtype, A, Av, chains):
    return {"kind": "chains", "k": k, "m": Z.shape[1], "Z": Z, "dtype": dtype, "A": A.copy(),
            "Av": Av.copy(), "chains": chains}


def uses_heavy_ball(iteration, T):
    """Some step of the first ``T`` has a heavy ball."""
    return any(iteration.hb(k) != 0.0 for k in range(1, T + 1))


def chain_step_cost(n, prefix, m, T, split=None, per_output=1):
    """Flops of every step ``k = 0..T`` of the coefficient-space chains (the
    cheaper of the primal and the Gram products, as :func:`maybe_gram`
    weighs them; the Gram matrix's own cost spread over the steps), forward
    only, or split at step ``split`` (:func:`_chain_columns`)."""
    cost = np.zeros(T + 1)
    k = np.arange(2, T + 1)
    r = prefix[k].astype(float)
    u = prefix[k - 1].astype(float)
    c = _chain_columns(m, T, T if split is None else split, per_output)[2:].astype(float)
    cost[2:] = np.minimum(2 * n * (u + r) * c, 2 * r * u * c + 2.0 * n * r * u / (T - 1))
    return cost


def _chain_columns(m, T, split, per_output=1):
    """Chain columns advanced by step ``k = 0..T``: ``m (k - 1)`` forward up
    to ``split``, ``per_output m (T - k + 1)`` backward after it (two chains
    an output with extrapolation: the iterate's and the gradient point's)."""
    k = np.arange(T + 1)
    return np.where(k <= split, m * np.maximum(k - 1, 0), per_output * m * (T - k + 1))


def split_step(n, prefix, T, per_output=1):
    """The step ``r`` where forward chains (sources ``0..r-1``, steps
    ``2..r``) and backward chains (outputs ``r+1..T``, steps ``T..r+1``)
    meet at the least flops: step ``k`` costs ``min(2 n (u + r), 2 r u)``
    per column (:func:`maybe_gram`'s model, ``r``, ``u`` the prefixes of
    steps ``k``, ``k - 1``), times ``k - 1`` columns forward and ``T - k + 1``
    backward, so ``r`` is about ``T / 2`` whatever the supports. ``T`` (no
    backward chains) unless the split is cheaper by ``_MIN_SPLIT_GAIN``: the
    transposed steps read the chains twice more. The forward-only cost is
    ``m T^2 / 2`` chain-steps, the split's ``m T^2 / 4``: pairs ``(s, t)``
    on either side of ``r`` meet there by one inner product. With
    ``per_output = 2`` (extrapolation: an output reads both ``x^t`` and
    ``v^t``) the backward steps cost twice as much: ``r ~ 2 T / 3``, ``m T^2
    / 3`` chain-steps."""
    if T < 4:
        return T
    k = np.arange(2, T + 1)
    r = prefix[k].astype(float)
    u = prefix[k - 1].astype(float)
    unit = np.zeros(T + 1)
    unit[2:] = np.minimum(2 * n * (u + r), 2 * r * u)
    steps = np.arange(T + 1)
    forward = np.cumsum(unit * np.maximum(steps - 1, 0))  # steps 2..r
    backward = np.cumsum((unit * per_output * (T - steps + 1))[::-1])[::-1]  # steps r..T
    total = forward[1:T] + backward[2:T + 1]  # split at r = 1..T-1
    r_best = int(np.argmin(total)) + 1
    if _MIN_SPLIT_GAIN * total[r_best - 1] >= forward[T]:
        return T
    return r_best


# a split must save this factor of the chains' flops (the backward steps mask,
# combine and read the block out in separate passes)
_MIN_SPLIT_GAIN = 1.2


def _backward_chains(iteration, Xs, gram, probes, trace_wt, masks_s, prefix, split, forward,
                     m, scale, g, A, folded=False):
    """Rows ``split+1..T`` of the memory matrix by transposed chains.

    For an iteration without momentum step ``k`` maps a tangent ``d`` to
    ``L_k d = D_k combine_k(d, -X~^T X~ d / n)`` (``D_k`` the prox mask,
    ``combine`` diagonal in ``d``), so ``L_k^T b = combine_k(D_k b,
    -X~^T X~ D_k b / n)``: the same linear part, masked first. With
    ``b_{t,t} = X~^T z`` (the readout) and ``b_{t,k-1} = L_k^T b_{t,k}``,

        A[t, s] = b_{t,s+1}^T e_s          (source s >= split, e_s its injection),
        A[t, s] = b_{t,split}^T x_{s,split}  (source s < split, ``forward``).

    All outputs are advanced together as one block; output ``t`` holds
    columns ``m (T - t) .. m (T - t + 1)``. ``g``: the products' factor,
    ``1 / n``, or ``eta / n`` when the step is ``folded`` into them (the
    combinations then only add: :meth:`~skacv.Iteration.combine`'s
    ``z_scaled``).
    """
    T = masks_s.shape[1] - 1
    dtype = forward.dtype
    rows_max = int(prefix[split])
    n_out = T - split
    check_memory(3 * rows_max * m * n_out * dtype.itemsize,
                 f"the backward Jacobian chains ({rows_max} x {m * n_out}, 3 blocks)",
                 "Use fewer probes (n_probes) or fewer iterations. ")
    b = np.zeros((rows_max, m * n_out), dtype=dtype, order="F")
    # the next step's b (the two blocks swap; both zero on the rows beyond
    # prefix[k - 1] before step k and on the columns of outputs not started)
    dz = np.zeros_like(b)
    inject = np.zeros((rows_max, m), dtype=dtype)
    traces = np.empty(n_out)
    for k in range(T, split, -1):
        c = m * (T - k + 1)
        rk, rp = int(prefix[k]), int(prefix[k - 1])
        b[:rk, c - m:c] = trace_wt[:, :rk].T  # output k starts from its readout
        mask = masks_s[:rp, k][:, None]
        # source k - 1 enters at step k: e = L_k-part of the injection alone
        np.multiply(probes[:rk], g, out=inject[:rk])
        et = iteration.tangent(k, np.zeros_like(inject[:rk]), None, None, inject[:rk],
                               mask[:rk, 0], dz_scaled=folded)[0].T
        # element-wise work by cache-sized groups of outputs
        step = m * max(1, CHUNK_BYTES // (rp * m * dtype.itemsize))
        groups = [slice(j, min(j + step, c)) for j in range(0, c, step)]
        for cols in groups:
            u = b[:rp, cols]
            u *= mask  # D_k b: zero beyond the prefix of step k
            traces[cols.start // m:cols.stop // m] = _block_trace(et, u[:rk], m)
        A[k:T + 1, k - 1][::-1] = scale * traces[:c // m]
        gram_product(Xs, gram, rp, rk, b[:rk, :c], dz[:rp, :c], -g)
        for cols in groups:
            iteration.combine(k, b[:rp, cols], None, dz[:rp, cols], overwrite_z=True,
                              z_scaled=folded)
        b, dz = dz, b
    # outputs after the split meet the sources before it
    A[split + 1:, :split] = scale * _meet(b, forward, m)[::-1]


def _backward_chains_extrapolated(iteration, Xs, gram, probes, trace_wt, masks_s, prefix, split,
                                  fw_x, fw_v, m, scale, g, A, Av, coef_path, order,
                                  folded=False):
    """Rows ``split+1..T`` of both memory matrices of an extrapolating
    iteration (FISTA, Nesterov's prox-gradient) by transposed chains.

    Step ``k`` maps the tangents ``(dx^{k-1}, dv^{k-1})`` to ``dx^k = D_k
    combine_k(dv^{k-1}, -X~^T X~ dv^{k-1} / n)`` and ``dv^k = a_k dx^k + b_k
    dx^{k-1}`` (``a, b`` of :meth:`Iteration.extrapolate`, per coordinate
    when clipped). A functional ``lam^T dx^k + rho^T dv^k`` is therefore
    ``lam'^T dx^{k-1} + rho'^T dv^{k-1}`` with ``lam' = b_k rho`` and
    ``rho' = combine_k(q, -X~^T X~ q / n)``, ``q = D_k (lam + a_k rho)``;
    source ``k - 1``, injected at step ``k`` as ``e`` (``dx^{k-1} = 0``),
    reads ``q^T e``. Output ``t`` starts as ``(lam, rho) = (w, 0)`` for
    ``A`` and ``(0, w)`` for ``A_sources`` (``w = X~^T z``, the readout);
    the sources before the split meet them through the forward chains'
    ``(dx^split, dv^split)``. Output ``t`` holds columns ``2 m (T - t) ..
    2 m (T - t + 1)``: ``m`` for ``A``, then ``m`` for ``A_sources``.
    ``g`` and ``folded`` as in :func:`_backward_chains`.
    """
    T = masks_s.shape[1] - 1
    dtype = fw_x.dtype
    width = Xs.shape[1]  # coordinates active only at x^0 carry no tangent
    rows_max = min(int(prefix[split - 1]), width)
    n_out = T - split
    check_memory(4 * rows_max * 2 * m * n_out * dtype.itemsize,
                 f"the backward Jacobian chains ({rows_max} x {2 * m * n_out}, 4 blocks)",
                 "Use fewer probes (n_probes) or fewer iterations. ")
    lam = np.zeros((rows_max, 2 * m * n_out), dtype=dtype, order="F")
    rho = np.zeros_like(lam)
    # the three blocks rotate (lam, rho, dz = rho, dz, lam after a step; all
    # zero on the rows and columns no step has written yet)
    dz = np.zeros_like(lam)
    inject = np.zeros((rows_max, m), dtype=dtype)
    zeros = np.zeros((rows_max, m), dtype=dtype)
    traces = np.empty(2 * n_out)
    for k in range(T, split, -1):
        c = 2 * m * (T - k + 1)
        rk, r1, r2 = (min(int(prefix[j]), width) for j in (k, k - 1, k - 2))
        lam[:rk, c - 2 * m:c - m] = trace_wt[:, :rk].T  # A: (w, 0)
        rho[:r1, c - m:c] = trace_wt[:, :r1].T  # A_sources: (0, w)
        coef = iteration.extrapolation_coefficients(k, coef_path[:, k], coef_path[:, k - 1])
        if coef is not None:  # clipped: in the chains' row order
            coef = (coef[0][order[:r1]], coef[1][order[:r1]])
        mask = masks_s[:r1, k][:, None]
        np.multiply(probes[:rk], g, out=inject[:rk])
        et = iteration.tangent(k, zeros[:rk], zeros[:rk], None, inject[:rk], mask[:rk, 0],
                               dz_scaled=folded)[0].T
        step = 2 * m * max(1, CHUNK_BYTES // (r1 * 2 * m * dtype.itemsize))
        groups = [slice(j, min(j + step, c)) for j in range(0, c, step)]
        a, b = iteration.extrapolation_factors(k, coef, 2, dtype)
        for cols in groups:
            rho_c, q = rho[:r1, cols], lam[:r1, cols]
            q += a * rho_c  # q = D_k (lam + a_k rho), in lam's block
            q *= mask
            rho_c *= b  # lam' = b_k rho, in rho's block
            traces[cols.start // m:cols.stop // m] = _block_trace(et, q[:rk], m)
        lam, rho = rho, lam  # rho holds q
        values = scale * traces[:c // m].reshape(-1, 2)  # (output T, T-1, ..., k; A / A_src)
        A[k:T + 1, k - 1] = values[::-1, 0]
        Av[k:T + 1, k - 1] = values[::-1, 1]
        gram_product(Xs, gram, r2, rk, rho[:rk, :c], dz[:r2, :c], -g)
        for cols in groups:
            iteration.combine(k, rho[:r2, cols], None, dz[:r2, cols], overwrite_z=True,
                              z_scaled=folded)
        rho, dz = dz, rho
    # outputs after the split meet the sources before it: lam . dx + rho . dv
    cross = scale * (_meet(lam, fw_x, m) + _meet(rho, fw_v, m)).reshape(n_out, 2, split)[::-1]
    A[split + 1:, :split] = cross[:, 0]
    Av[split + 1:, :split] = cross[:, 1]


def gram_product(Xs, gram, rows, cols, block, out, factor):
    """``out = factor X~[:, :rows]^T X~[:, :cols] block`` (``block`` of
    ``cols`` rows): from the restricted Gram matrix (:func:`maybe_gram`,
    which holds the factor) when it covers both prefixes, else by the two
    primal products."""
    if gram is not None and gram.shape[0] >= max(rows, cols):
        np.matmul(gram[:rows, :cols], block, out=out)
    else:
        fitted = Xs[:, :cols] @ block
        fitted *= factor
        np.matmul(Xs[:, :rows].T, fitted, out=out)


def _meet(back, forward, m):
    """``[sum_j <back[:, i m + j], forward[:, s m + j]>]`` of shape (i, s):
    the probes' inner products of backward chains (blocks of ``m`` columns)
    with forward chains on the forward chains' rows: one product a probe in
    the chains' precision (as :func:`~skacv.linalg._linalg.block_trace` reads the
    traces), summed over the probes in float64."""
    rows = forward.shape[0]
    back = back[:rows]
    out = np.zeros((back.shape[1] // m, forward.shape[1] // m))
    for j in range(m):
        out += back[:, j::m].T @ forward[:, j::m]
    return out


def maybe_gram(Xs, gram, k, k_first, prefix, columns, n, factor, cached=None, order=None):
    """Decide once (at the first step with chains, ``k_first``) whether to
    precompute the Gram matrix of a late prefix of columns, using the flop
    model ``primal: 2 n (u + r) c`` against ``gram: 2 r u c`` plus ``n w^2``
    (``c = columns[k]``, see :func:`_chain_columns`); it is returned times
    ``factor`` (``-1/n`` for the chains: the products are then the gradient
    tangents). ``cached = (coordinates, gram, factor)`` from a previous
    stage is reused when it covers the prefix (columns ``order[:w]``)."""
    T = columns.shape[0] - 1
    if gram is not None or k != k_first or T < k_first + 1:
        return gram
    # save[start] = sum over kk >= start of the per-step saving, minus the
    # Gram matrix of the prefix w = prefix[start - 1] (integers: exact in int64)
    kk = np.arange(k_first, T + 1)
    r, u = prefix[kk].astype(np.int64), prefix[kk - 1].astype(np.int64)
    c = np.asarray(columns, dtype=np.int64)[kk]
    step_save = 2 * int(n) * (u + r) * c - 2 * r * u * c
    save = np.cumsum(step_save[::-1])[::-1] - int(n) * u * u
    best = int(np.argmax(save))  # the first of the largest savings
    if save[best] <= 0:
        return None
    best_w = int(u[best])
    if cached is not None:
        coords, cached_gram, cached_factor = cached
        position = np.full(max(int(coords.max(initial=-1)), int(order.max())) + 1, -1)
        position[coords] = np.arange(coords.size)
        idx = position[order[:best_w]]
        if np.all(idx >= 0) and cached_gram.dtype == Xs.dtype and cached_factor == factor:
            return cached_gram[np.ix_(idx, idx)]
    check_memory(best_w * best_w * Xs.dtype.itemsize, "the restricted Gram matrix")
    Xw = Xs[:, :best_w]
    gram = Xw.T @ Xw
    gram *= Xs.dtype.type(factor)
    return gram


def resolve_chain_dtype(design, n_probes, dtype=None):
    """Precision of the Jacobian chains: ``dtype``, else the configured
    ``risk_chain_dtype``; ``"auto"`` is float32 with Hutchinson probes (whose
    own relative error, ~1e-2, dwarfs float32 rounding, ~1e-6) and the dtype
    of ``X`` for exact traces; ``None`` is the dtype of ``X``."""
    if dtype is None:
        dtype = get_config().get("risk_chain_dtype")
    if dtype == "auto":
        dtype = np.float32 if n_probes is not None else None
    return np.dtype(dtype or design.dtype)


# ----------------------------------------------------------------------------
# robust losses and mini-batches (Tan & Bellec 2024)
# ----------------------------------------------------------------------------


def curvature_memory_matrices(design, iteration, coef_path, curvature, n_probes, rng,
                              chain_dtype, verbose=0, state=None, keep_state=False):
    """Traces of the robust / mini-batch risk estimate (Tan & Bellec 2024).

    Step ``k`` uses the gradient input ``z = X~_S^T r_S / N_k`` on the batch
    ``S = S_k`` (``iteration.sampler(k)``; every row for full-batch methods)
    of weight ``N_k``, with ``r = sqrt(w) psi(y - eta)``. The Jacobian chain
    ``J_{t,s}`` of ``x^t`` with respect to a vector added to ``X~^T S psi``
    in step ``s + 1`` (source ``s``) is advanced by the iteration's own
    :meth:`~skacv.Iteration.tangent` with the gradient tangent
    ``dz = (injection - X~_S^T diag(c) X~_S dx) / N_k``, ``c`` the
    curvature ``psi'`` at ``x^{k-1}``. The traces are

        A[t, s] = tr(D_t X~ J_{t,s} X~^T),
        K[t, s] = tr(D_t X~ J_{t,s} X~^T S_s D_s),

    ``D_t = diag(curvature[:, t])`` and ``S_s`` the batch of step ``s + 1``
    (both diagonal, so that one chain per source gives both traces: the
    second reads the same products on the rows of ``S_s`` only). With sample
    weights, ``X~`` carries ``sqrt(w)``: these are the traces over repeated
    rows when a batch holds every copy of its rows.

    Parameters
    ----------
    design : Design
    iteration : Iteration
        Without momentum (``hb = beta = 0``).
    coef_path : ndarray of shape (n_coef, T + 1)
    curvature : ndarray of shape (n_samples, T + 1) or None
        ``psi'`` of every sample at every iterate (unweighted); ``None``: ones
        (least squares).
    n_probes : int or None
        Rademacher probes; ``None``: exact traces (identity probes).
    rng : RandomState
    chain_dtype : dtype
    state : dict, default=None
        Returned with ``keep_state=True`` (probes only): the chains after the
        last step of a shorter prefix of the same trajectory.

    Returns
    -------
    A, K : ndarrays of shape (T + 1, T + 1), strictly lower triangular
    state : dict or None
    """
    n = design.n_samples
    T = coef_path.shape[1] - 1
    dtype = np.dtype(chain_dtype)
    keep_state = keep_state and n_probes is not None
    if any(iteration.hb(k) != 0.0 or iteration.beta(k) != 0.0 for k in range(1, T + 1)):
        raise ValueError(
            f"The robust / mini-batch risk estimate needs an iteration without momentum; "
            f"{iteration.name} extrapolates. Use solver='gd' or 'sgd', or "
            "estimate_risk=False and estimate_loo=True."
        )
    if state is not None and not (
        state.get("kind") == "curvature_chains" and n_probes is not None
        and state["m"] == int(n_probes) and state["dtype"] == dtype and state["k"] <= T
        and state["Z"].shape[0] == n
    ):
        state = None
    k0 = 0 if state is None else state["k"]
    A = np.zeros((T + 1, T + 1))
    K = np.zeros((T + 1, T + 1))
    if state is not None:
        A[: k0 + 1, : k0 + 1] = state["A"]
        K[: k0 + 1, : k0 + 1] = state["K"]
    if T == 0:
        return A, K, None
    p = coef_path.shape[0]
    check_memory(n * p * dtype.itemsize, f"the dense design for the risk chains ({n} x {p})")
    Xd = np.asarray(design.dense(), dtype=dtype, order="C")
    if n_probes is None:
        Z = np.eye(n, dtype=dtype)
        m, scale = n, 1.0
    else:
        m = int(n_probes)
        Z = state["Z"] if state is not None else (
            rng.choice([-1.0, 1.0], size=(n, m)).astype(dtype))
        scale = 1.0 / m
    check_memory(2 * p * m * T * dtype.itemsize, f"the Jacobian chains ({p} x {m * T}, 2 blocks)",
                 "Use fewer probes (n_probes) or fewer iterations. ")
    weight = None if design.weight is None else np.asarray(design.weight, dtype=np.float64)
    curv = None if curvature is None else np.asarray(curvature, dtype=dtype)
    injection = Xd.T @ Z  # X~^T Z, (p, m)
    sampler = iteration.sampler
    chains = np.zeros((p, m * T), dtype=dtype, order="F")
    if state is not None:
        chains[:, : m * k0] = state["chains"]
    batches = [None] * (T + 1)  # batches[s]: rows of step s + 1 (None: all)
    if sampler is not None:
        for s in range(T):
            batches[s] = np.asarray(sampler(s + 1))

    def batch_weight(S):
        if S is None:
            return float(design.n_eff)
        return float(S.shape[0]) if weight is None else float(weight[S].sum())

    batch_probes = None
    if sampler is not None:
        # B_s = X~_S^T (Z D_s)_S for the batch S of every source s: then
        # K[t, s] = <B_s, J_{t,s}> + sum_{i in S} (d^t_i - 1) z_i d^s_i x~_i^T J_{t,s},
        # the sum over the few rows whose curvature at x^t is not 1 (none for
        # least squares, the outliers of the Huber loss)
        batch_probes = np.empty((p, m * T), dtype=dtype, order="F")
        for s in range(T):
            S = batches[s]
            ZS = Z[S] if curv is None else Z[S] * curv[S, s][:, None]
            batch_probes[:, s * m:(s + 1) * m] = Xd[S].T @ ZS
    tic = time.perf_counter()
    fitted_chains = None  # X~ @ chains after the last step (full batch: reused)
    for k in range(k0 + 1, T + 1):
        c_old, c_new = m * (k - 1), m * k
        S = batches[k - 1]
        N = batch_weight(S)
        inv_N = dtype.type(1.0 / N) if N > 0 else dtype.type(0.0)
        dz = np.empty((p, c_new), dtype=dtype, order="F")
        if c_old:
            XS = Xd if S is None else Xd[S]
            if S is None and fitted_chains is not None:
                Y = fitted_chains
            else:
                Y = XS @ chains[:, :c_old]
            if curv is not None:
                Y = Y * (curv[:, k - 1][:, None] if S is None else curv[S, k - 1][:, None])
            np.multiply(XS.T @ Y, -inv_N, out=dz[:, :c_old])
        np.multiply(injection, inv_N, out=dz[:, c_old:c_new])
        dv = chains[:, :c_new]
        if c_old < c_new:
            dv[:, c_old:c_new] = 0
        mask = iteration.prox_jacobian(k, coef_path[:, k])
        dx, _ = iteration.tangent(k, dv, dv, None, dz, mask)
        chains[:, :c_new] = dx
        # readout: A with D_k on every row, K with D_k D_s on the rows of S_s
        dk = None if curv is None else curv[:, k]
        if sampler is None:
            Y = Xd @ dx  # (n, m k)
            fitted_chains = Y
            W = Z if dk is None else Z * dk[:, None]
            A[k, :k] = scale * _shared_block_trace(W, Y, m)
            if curv is None:
                K[k, :k] = A[k, :k]
            else:
                K[k, :k] = scale * np.einsum("nm,ns,nsm->s", W, curv[:, :k],
                                             Y.reshape(n, k, m), dtype=np.float64,
                                             optimize=True)
        else:
            P = Xd.T @ (Z if dk is None else Z * dk[:, None])
            A[k, :k] = scale * _shared_block_trace(P, dx, m)
            K[k, :k] = scale * np.einsum("ij,ij->j", batch_probes[:, :c_new], dx,
                                         dtype=np.float64).reshape(k, m).sum(axis=1)
            if curv is not None:
                for s in range(k):
                    Ss = batches[s]
                    coef = (dk[Ss] - 1) * curv[Ss, s]
                    Ss, coef = Ss[coef != 0], coef[coef != 0]
                    if Ss.size:
                        Ys = Xd[Ss] @ dx[:, s * m:(s + 1) * m]
                        K[k, s] += scale * float(np.einsum("nm,nm->", Z[Ss] * coef[:, None],
                                                           Ys, dtype=np.float64))
        if verbose and (k % max(1, T // 10) == 0 or k == T):
            print(f"[risk] {iteration.name} robust traces: step {k}/{T}, "
                  f"{time.perf_counter() - tic:.1f}s")
    new_state = None
    if keep_state:
        new_state = {"kind": "curvature_chains", "k": T, "m": m, "Z": Z, "dtype": dtype,
                     "A": A.copy(), "K": K.copy(), "chains": chains[:, : m * T].copy()}
    return A, K, new_state


def _shared_block_trace(W, D, m):
    """``[sum(W * D[:, s*m:(s+1)*m]) for s]`` for W (r, m), D (r, m*k), as the
    diagonal blocks of one product ``W^T D`` (BLAS-3)."""
    k = D.shape[1] // m
    G = (W.T @ D).reshape(m, k, m)
    return np.einsum("iki->k", G).astype(np.float64)
