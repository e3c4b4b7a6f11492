"""Memory matrices of proximal iterations with the probes shared by every source.

Every source ``s`` is propagated with the same ``m`` probes (or identity
probes: exact traces, ``n_probes=None``) by the forward chains of
:class:`~skacv.estimates.risk._propagate.ForwardChains`, read out by
:class:`SharedProbes`. Without a heavy ball the sources before a step ``r``
go forward to it and the outputs after it go backward by the transposed
steps: ``m T^2 / 4`` chain-steps (``m T^2 / 3`` with extrapolation) instead
of ``m T^2 / 2``; :func:`shared_plan` chooses ``r``.
"""

import numpy as np

from ..._config import check_memory
from ..._trace import taken
from ...linalg._linalg import block_trace as _block_trace
from ._probes import RangeProbes, draw_probes
from ._propagate import (
    ChainProbes,
    chain_order,
    chunk_columns,
    gram_product,
    gram_to_keep,
    maybe_gram,
)
from ._start import ChainStart
from ._state import ChainState, SavedChains, usable_state


class SharedProbes(ChainProbes):
    """Source ``s`` holds columns ``s m .. (s + 1) m``; it injects ``probes``
    (``X~^T Z``) and the traces read ``trace_wt = (X~^T Z)^T``."""

    def __init__(self, m, probes, trace_wt, scale, A, Av):
        self.m, self.probes, self.trace_wt, self.scale = m, probes, trace_wt, scale
        self.A, self.Av = A, Av

    def open_columns(self, k):
        return self.m * (k - 1), self.m * k

    def injection(self, k, rows):
        return self.probes[:rows]

    def read_chunk(self, k, cols, dx, dv):
        m = self.m
        sources = slice(cols.start // m, cols.stop // m)
        w_k = self.trace_wt[:, :dx.shape[0]]
        self.A[k, sources] = self.scale * _block_trace(w_k, dx, m)
        self.Av[k, sources] = (self.A[k, sources] if dv is dx
                               else self.scale * _block_trace(w_k, dv, m))

    def read_tail(self, k, rows, rows_prev, tail_v):
        self.Av[k, :k] += self.scale * _block_trace(self.trace_wt[:, rows:rows_prev], tail_v,
                                                    self.m)


def shared_plan(design, iteration, coef_path, n_probes, dtype, state=None, keep_state=False):
    """The step where forward and backward chains meet (:func:`split_step`;
    ``T``: forward only, with a heavy ball or a state to keep or continue)."""
    n = design.n_samples
    T = coef_path.shape[1] - 1
    keep_state = keep_state and n_probes is not None
    state = usable_state(state, ChainState, n_probes, np.dtype(dtype), T, n)
    _, _, prefix = chain_order(coef_path)
    if T < 1 or state is not None or keep_state or int(prefix[1]) == 0:
        return T
    if iteration.uses_heavy_ball(T):
        return T
    return split_step(n, prefix, T, design.policy, 2 if iteration.extrapolates(T) else 1)


def _trace_probes(Xs, Z, n, dtype, coords):
    """``(probes, trace_wt, m, scale)`` of the chains' columns ``Xs`` (features
    ``coords``); exact traces (``Z`` None): identity probes on the smaller
    side."""
    width = Xs.shape[1]
    if Z is not None:  # (X~^T Z)^T, read by the traces
        trace_wt = (np.ascontiguousarray(Z.images(coords, dtype).T)
                    if isinstance(Z, RangeProbes) else Z.T @ Xs)
        return trace_wt.T, trace_wt, Z.shape[1], 1.0 / Z.shape[1]
    if n <= width:
        return Xs.T, Xs, n, 1.0  # X~^T Z with Z = I_n
    # inject e_j, trace with X~^T X~
    return np.eye(width, dtype=dtype), (Xs.T @ Xs).astype(dtype), width, 1.0


def masked_memory_matrix(design, iteration, coef_path, n_probes, rng, chain_dtype, verbose=0,
                         state=None, keep_state=False, probes=None, split=None):
    """Hutchinson (or exact) memory matrices ``(A, A_sources, state)`` of a
    proximal trajectory by the shared probes (``A``, ``A_sources`` of shape
    (T + 1, T + 1); ``state``: ``None`` unless ``keep_state``).

    ``state`` (a :class:`~skacv.estimates.risk._state.ChainState`, kept with
    ``keep_state=True``, Hutchinson probes only) continues the chains of a
    shorter prefix of the same trajectory. ``probes``: the Rademacher probes
    (default: drawn from ``rng``) or the exact
    :class:`~skacv.estimates.risk._probes.RangeProbes`; ``split``: the step where backward chains
    take over (default ``T``, forward only).
    """
    start = ChainStart(design, iteration, coef_path, state, ChainState, n_probes, chain_dtype,
                       exact=isinstance(probes, RangeProbes))
    n, T, dtype, state, k0 = start.n, start.T, start.dtype, start.state, start.k0
    keep_state = keep_state and n_probes is not None
    width = int(start.prefix[max(k0 - 1, 1)]) if T >= 1 else 0
    A, Av = start.matrices("A", "Av")
    Z = None  # Rademacher probes (the saved ones when continuing)
    if n_probes is not None:
        Z = state.Z if state is not None else probes if probes is not None else (
            draw_probes(rng, (n, int(n_probes)), dtype))
    if width == 0:  # every iterate after x^0 is zero: nothing depends on y
        return A, Av, (_chain_state(T, Z, dtype, A, Av, None) if keep_state else None)
    split = T if split is None or state is not None or keep_state else split
    extrapolates = iteration.extrapolates(T)
    hb = iteration.uses_heavy_ball(T)
    Xs = start.columns(width)
    probes, trace_wt, m, scale = _trace_probes(Xs, Z, n, dtype, start.order[:width])
    chains = start.chains(Xs, m * split, 2 + extrapolates + hb, heavy_ball=hb)
    columns = _chain_columns(m, T, split, 2 if extrapolates else 1)
    start.run(chains, SharedProbes(m, probes, trace_wt, scale, A, Av), split, columns, verbose)
    if split < T:
        _backward(iteration, chains, probes, trace_wt, split, columns, m, scale, A, Av,
                  verbose)
    if not keep_state:
        return A, Av, None
    # chains after step T, in coordinates (see the loop's invariants)
    saved = chains.saved(m * T) if k0 < T else state.chains
    gram = gram_to_keep(chains.gram, start.order, -chains.g, chains.policy,
                        None if state is None else state.gram)
    return A, Av, _chain_state(T, Z, dtype, A, Av, saved, gram)


def _backward(iteration, chains, probes, trace_wt, split, columns, m, scale, A, Av, verbose):
    """The outputs after ``split`` by transposed chains, met by the forward ones."""
    T = chains.coef_path.shape[1] - 1
    g, Xs, prefix = chains.g, chains.Xs, chains.prefix
    gram = chains.gram
    if gram is None:  # the backward steps may still pay for a Gram matrix
        gram = maybe_gram(Xs, None, split + 1, split + 1, prefix, columns, chains.n, -g,
                          chains.policy)
    rows_k, dv_rows = chains.rows_k, chains.dv_rows
    if chains.extrapolates:
        _backward_chains_extrapolated(
            iteration, Xs, gram, probes, trace_wt, chains.masks_s, prefix, split,
            chains.dx1[:rows_k, :m * split], chains.dv[:dv_rows, :m * split], m, scale, g, A,
            Av, chains.coef_path, chains.order, chains.policy, chains.fold)
    else:
        _backward_chains(iteration, Xs, gram, probes, trace_wt, chains.masks_s, prefix, split,
                         chains.dx1[:rows_k, :m * split], m, scale, g, A, chains.policy,
                         chains.fold)
        Av[:] = A
    if verbose:
        print(f"[risk] {iteration.name} traces: outputs {split + 1}..{T} backward to "
              f"step {split}")


def _chain_state(k, Z, dtype, A, Av, chains, gram=None):
    return ChainState(k=k, Z=Z, dtype=dtype, A=A.copy(), Av=Av.copy(),
                      chains=chains if chains is not None else SavedChains(), gram=gram)


def _chain_columns(m, T, split, per_output=1):
    """Chain columns advanced by step ``k = 0..T``: ``m (k - 1)`` forward up to
    ``split``, ``per_output m (T - k + 1)`` backward after it."""
    k = np.arange(T + 1)
    return np.where(k <= split, m * np.maximum(k - 1, 0), per_output * m * (T - k + 1))


def column_step_flops(n, prefix, T):
    """Flops of one chain column at each step ``k`` (entries ``0`` and ``1``
    zero: no tangent before step 2): the cheaper of the product by ``X~``
    and ``X~^T`` and the one by the Gram matrix of the prefixes
    (:func:`~skacv.estimates.risk._propagate.chain_order`)."""
    k = np.arange(2, T + 1)
    r = prefix[k].astype(float)
    u = prefix[k - 1].astype(float)
    unit = np.zeros(T + 1)
    unit[2:] = np.minimum(2 * n * (u + r), 2 * r * u)
    return unit


def split_step(n, prefix, T, policy, per_output=1):
    """The step ``r`` where forward chains (sources ``0..r-1``) and backward
    chains (outputs ``r+1..T``) meet at the least flops, by :func:`maybe_gram`'s
    per-column cost of a step; ``T`` (no backward chains) unless the split is
    cheaper by ``chain_split_min_gain`` (the transposed steps make more
    passes). ``per_output = 2`` with extrapolation (an output reads ``x^t``
    and ``v^t``): ``r ~ 2 T / 3``."""
    taken("split_step", T=T, per_output=per_output)
    if policy.chain_split is not None:
        return min(policy.chain_split, T)
    if T < 4:
        return T
    unit = column_step_flops(n, prefix, T)
    steps = np.arange(T + 1)
    forward = np.cumsum(unit * np.maximum(steps - 1, 0))  # steps 2..r
    backward = np.cumsum((unit * per_output * (T - steps + 1))[::-1])[::-1]  # steps r..T
    total = forward[1:T] + backward[2:T + 1]  # split at r = 1..T-1
    r_best = int(np.argmin(total)) + 1
    if policy.chain_split_min_gain * total[r_best - 1] >= forward[T]:
        return T
    return r_best


def _backward_chains(iteration, Xs, gram, probes, trace_wt, masks_s, prefix, split, forward,
                     m, scale, g, A, policy, folded=False):
    """Rows ``split+1..T`` of the memory matrix by transposed chains.

    Without momentum step ``k`` maps a tangent ``d`` to ``L_k d = D_k
    combine_k(d, -X~^T X~ d / n)`` (``D_k`` the prox mask), so ``L_k^T b =
    combine_k(D_k b, -X~^T X~ D_k b / n)``. With ``b_{t,t} = X~^T z`` and
    ``b_{t,k-1} = L_k^T b_{t,k}``,

        A[t, s] = b_{t,s+1}^T e_s          (source s >= split, e_s its injection),
        A[t, s] = b_{t,split}^T x_{s,split}  (source s < split, ``forward``).

    Output ``t`` holds columns ``m (T - t) .. m (T - t + 1)``; ``g`` and
    ``folded`` as in :func:`~skacv.estimates.risk._propagate.chain_factor`.
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
        step = chunk_columns(rp, m, dtype.itemsize, policy)
        groups = [slice(j, min(j + step, c)) for j in range(0, c, step)]
        for cols in groups:
            u = b[:rp, cols]
            u *= mask  # D_k b: zero beyond the prefix of step k
            traces[cols.start // m:cols.stop // m] = _block_trace(et, u[:rk], m)
        A[k:T + 1, k - 1][::-1] = scale * traces[:c // m]
        gram_product(Xs, gram, rp, rk, b[:rk, :c], dz[:rp, :c], -g, policy)
        for cols in groups:
            iteration.combine(k, b[:rp, cols], None, dz[:rp, cols], overwrite_z=True,
                              z_scaled=folded)
        b, dz = dz, b
    # outputs after the split meet the sources before it
    A[split + 1:, :split] = scale * _meet(b, forward, m)[::-1]


def _backward_chains_extrapolated(iteration, Xs, gram, probes, trace_wt, masks_s, prefix, split,
                                  fw_x, fw_v, m, scale, g, A, Av, coef_path, order, policy,
                                  folded=False):
    """Rows ``split+1..T`` of both memory matrices of an extrapolating iteration
    by transposed chains.

    Step ``k`` maps ``(dx^{k-1}, dv^{k-1})`` to ``dx^k = D_k
    combine_k(dv^{k-1}, -X~^T X~ dv^{k-1} / n)`` and ``dv^k = a_k dx^k + b_k
    dx^{k-1}``. A functional ``lam^T dx^k + rho^T dv^k`` is therefore
    ``lam'^T dx^{k-1} + rho'^T dv^{k-1}`` with ``lam' = b_k rho`` and
    ``rho' = combine_k(q, -X~^T X~ q / n)``, ``q = D_k (lam + a_k rho)``;
    source ``k - 1`` (injected at step ``k`` as ``e``) reads ``q^T e``.
    Output ``t`` starts as ``(w, 0)`` for ``A`` and ``(0, w)`` for
    ``A_sources`` (``w = X~^T z``) and holds columns ``2 m (T - t) .. 2 m (T -
    t + 1)``.
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
        step = chunk_columns(r1, 2 * m, dtype.itemsize, policy)
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
        gram_product(Xs, gram, r2, rk, rho[:rk, :c], dz[:r2, :c], -g, policy)
        for cols in groups:
            iteration.combine(k, rho[:r2, cols], None, dz[:r2, cols], overwrite_z=True,
                              z_scaled=folded)
        rho, dz = dz, rho
    # outputs after the split meet the sources before it: lam . dx + rho . dv
    cross = scale * (_meet(lam, fw_x, m) + _meet(rho, fw_v, m)).reshape(n_out, 2, split)[::-1]
    A[split + 1:, :split] = cross[:, 0]
    Av[split + 1:, :split] = cross[:, 1]


def _meet(back, forward, m):
    """``[sum_j <back[:, i m + j], forward[:, s m + j]>]`` of shape (i, s): one
    product a probe in the chains' precision, summed in float64."""
    rows = forward.shape[0]
    back = back[:rows]
    out = np.zeros((back.shape[1] // m, forward.shape[1] // m))
    for j in range(m):
        out += back[:, j::m].T @ forward[:, j::m]
    return out

