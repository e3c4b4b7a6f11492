"""Probe chains of proximal iterations on a diagonalised core.

The chains of :mod:`skacv.estimates.risk._chains` advance one tangent per source and
probe in coefficient space; each step multiplies them by the Gram matrix of
the supports, ``|S|^2`` per chain. Most of that work is on the *core* ``C``:
the coordinates that stay in every support from some step on, where the
extrapolation and the heavy ball are not clipped. There the step is the
plain linear map of the iteration, with scalar coefficients, so it also
advances any linear image of the tangent. The image used here is
``w = U^T X~_C dx_C`` in the eigenbasis ``U`` of ``X~_C X~_C^T`` (the
nonzero part, ``d = rank <= min(n, |C|)``), where the core's product is
diagonal:

    U^T X~_C dz_C = Lambda U^T q / n_eff,    q = injection - X~ dv,

``q`` the tangent of the residual. The other coordinates ever active
(``E``: the support changes) keep their tangents in coordinates and enter
through ``X~_E``: ``U^T q = U^T z - w - (U^T X~_E) dx_E`` and
``X~_E^T q = (U^T X~_E)^T U^T q + (X~_E^T z)_perp - G_perp dx_E``, with
``G_perp = X~_E^T (I - U U^T) X~_E`` (zero when ``U`` spans ``R^n``). A step
costs ``4 d |E_k| + 2 |E_k|^2 + O(d)`` per chain instead of ``|S_k|^2``,
``E_k`` the coordinates of ``E`` still active at step ``k`` or later. The
traces are ``z^T X~ dx = (U^T z)^T w + (X~_E^T z)^T dx_E``.

``U`` comes from the smaller Gram matrix: ``X~_C X~_C^T`` when the core is
wider than the sample (*sample form*: the Lasso with a small penalty and
``p > n``, early iterates), else ``X~_C^T X~_C = V Lambda V^T`` with
``U = X~_C V Lambda^{-1/2}`` (*coefficient form*: supports that settle,
long paths). Directions with eigenvalues below the rounding of the largest
are left to ``G_perp``.

The tangents come from the iteration's own :meth:`~skacv.Iteration.tangent`:
with the masks, the clipping coefficients and the momentum coefficients on
``E``, and on the images ``w`` with none of them (``n_free=0``: every row
decays). The probes and the traces are those of
:func:`~skacv.estimates.risk._chains.masked_memory_matrix`: the two give the same
memory matrices up to rounding.
"""


import time

import numpy as np
from scipy import linalg

from ..._config import path_memory_bytes
from ...linalg._linalg import block_trace as _block_trace
from ...utils._parallel import column_groups, column_workers, factorization_blas

# the precision of the coefficient form's set-up (core_space_memory_matrix);
# the flop model's constants are the speed policy's core_* fields
_SETUP_DTYPE = np.float64


def free_steps(iteration, coef_path):
    """Boolean ``(p, T)``: coordinate ``j`` is free at step ``k`` (column
    ``k - 1``): in the support of ``x^k``, penalised like every other row
    (no trailing unpenalised coordinate when the penalty has a ridge part),
    with the plain extrapolation of step ``k`` and heavy ball of step ``k``."""
    T = coef_path.shape[1] - 1
    free = coef_path[:, 1:] != 0
    pen = iteration.penalty
    if pen.n_unpenalized and np.any(pen.l2_):
        free[coef_path.shape[0] - pen.n_unpenalized:] = False
    for k in range(1, T + 1):
        beta = float(iteration.beta(k))
        coef = iteration.extrapolation_coefficients(k, coef_path[:, k], coef_path[:, k - 1])
        if coef is not None:
            free[:, k - 1] &= (coef[0] == 1.0 + beta) & (coef[1] == -beta)
        if k >= 2:
            mcoef = iteration.momentum_coefficients(k, coef_path[:, k - 1], coef_path[:, k - 2])
            if mcoef is not None:
                free[:, k - 1] &= (mcoef[0] == 1.0) & (mcoef[1] == -1.0)
    return free


class CorePlan:
    """Where the chains switch to the diagonalised core and on which coordinates.

    Attributes
    ----------
    start : int
        First step advanced on the core (the steps before it run in
        coordinates; ``1``: none).
    core : ndarray of shape (n_features,), dtype bool
        Free at every step ``>= start``.
    explicit : ndarray of int
        The other coordinates active at a step ``>= start - lag`` (``lag``: 2
        with momentum, else 1), ordered by the last step they are active.
    prefix : ndarray of shape (T + 2,)
        ``prefix[j]``: explicit coordinates active at a step ``>= j``.
    form : {"samples", "coefficients"}
        The Gram matrix diagonalised: ``X~_C X~_C^T`` or ``X~_C^T X~_C``.
    collapse : int or None
        First step without explicit coordinates (``>= start``): from there
        the probes of every chain are summed (``None``: never).
    cost, masked_cost : float
        Flops of the plan and of the chains in coordinates.
    """

    def __init__(self, start, core, explicit, prefix, form, collapse, cost, masked_cost):
        self.start, self.core, self.explicit, self.prefix = start, core, explicit, prefix
        self.form, self.collapse, self.cost, self.masked_cost = form, collapse, cost, masked_cost


def core_space_plan(iteration, coef_path, n, m, masked_step_cost, itemsize, policy, start=None,
                    total=None, split=False):
    """The cheapest switch step by the flop model, or ``None`` when the
    chains in coordinates are cheaper.

    ``masked_step_cost[k]`` (``k = 0..T``): flops of step ``k`` of the
    forward chains in coordinates (zero for ``k < 2``); ``total``: flops of
    the chains in coordinates without a switch (default: the sum; less when
    they meet backward chains, ``split=True``: then the core must be
    predicted the policy's ``core_min_gain_split`` times cheaper instead of
    ``core_min_gain``).
    ``start``: switch at this step whatever the model says (default: the
    ``policy``'s ``core_space_start``); none unless the policy's ``core_space``.
    """
    if not policy.core_space:
        return None
    start = policy.core_space_start if start is None else start
    T = coef_path.shape[1] - 1
    if T < 2 or n < 1:
        return None
    lag = 2 if iteration.has_momentum(T) else 1
    free = free_steps(iteration, coef_path)
    act = coef_path[:, 1:] != 0
    steps = np.arange(1, T + 1)
    last = np.max(np.where(act, steps, 0), axis=1)  # 0: never active
    n_last = np.bincount(last, minlength=T + 1)
    # active[j]: coordinates active at a step >= j (j = 0..T + 1)
    active = np.concatenate([np.cumsum(n_last[::-1])[::-1], [0]])
    active[0] = active[1]
    # n_core[k]: free at every step >= k (k = 1..T)
    suffix = np.logical_and.accumulate(free[:, ::-1], axis=1)[:, ::-1]
    n_core = np.concatenate([[0], suffix.sum(axis=0)]).astype(float)
    k = np.arange(T + 1)
    rows = active[np.maximum(k - lag, 1)].astype(float)  # explicit + core rows of step k
    mk = (m * k).astype(float)
    mk[0] = 0.0

    def tail(a):  # tail(a)[s] = sum of a[k] over k >= s
        return np.cumsum(a[::-1])[::-1]

    S0, S1, S2 = tail(mk), tail(mk * rows), tail(mk * rows * rows)
    S0 = np.append(S0, 0.0)
    head = np.concatenate([[0.0], np.cumsum(np.asarray(masked_step_cost, dtype=float))])
    coordinates = float(head[T + 1] if total is None else total)
    best, best_cost = None, coordinates
    n_blocks = 1 + (lag == 2)
    eigh_cost, elementwise_cost = policy.core_eigh_cost, policy.core_elementwise_cost
    setup_cost = policy.core_wide_setup_cost if itemsize < 8 else 1.0
    for s in range(1, T) if start is None else [int(start)]:
        c = n_core[s]
        if c == 0 and start is None:
            continue
        e = active[max(s - lag, 1)] - c
        d = min(n, c)
        sum_r = S1[s] - c * S0[s]  # sum over steps of m k |E_k|
        # from the step where no explicit coordinate is left, the probes collapse
        k_r = max(s, int(np.searchsorted(-rows, -c, side="left")))
        columns = S0[s] - S0[k_r] * (1.0 - 1.0 / m)
        cost = head[s] + 4.0 * d * sum_r + elementwise_cost * d * columns
        if c >= n:  # X~_C X~_C^T, U^T X~_E; w = U^T X~_C dx_C at the switch
            cost += (eigh_cost * d**3 + 2.0 * n * n * (c + e)
                     + 2.0 * n * (c + n) * m * (s - 1) * n_blocks)
        else:  # X~_C^T X~_C, X~_C^T X~_E, G_perp; w = Lambda^1/2 V^T dx_C; 2 |E_k|^2 per chain
            cost += (setup_cost * (eigh_cost * d**3 + 2.0 * n * c * (c + e) + 2.0 * n * e * e)
                     + 2.0 * c * c * m * (s - 1) * n_blocks
                     + 2.0 * (S2[s] - 2 * c * S1[s] + c * c * S0[s]))
        if cost < best_cost or start is not None:
            best, best_cost = s, cost
    min_gain = policy.core_min_gain_split if split else policy.core_min_gain
    if best is None or (start is None and min_gain * best_cost >= coordinates):
        return None
    core = suffix[:, best - 1].copy()
    c = int(core.sum())
    explicit = np.flatnonzero((last >= max(best - lag, 1)) & ~core)
    explicit = explicit[np.argsort(-last[explicit], kind="stable")]
    prefix = np.searchsorted(-last[explicit], -np.arange(T + 2), side="right")
    d = min(n, c)
    setup_item = itemsize if c >= n else 8  # the coefficient form's set-up in float64
    need = (setup_item * (d * d + n * (c + explicit.size) + explicit.size**2)
            + itemsize * 4 * (d + explicit.size) * m * T)
    if need > path_memory_bytes():
        return None  # the chains in coordinates check their own memory
    ks = np.arange(best, T + 1)
    empty = ks[prefix[np.maximum(ks - lag, 0)] == 0]
    collapse = int(empty[0]) if empty.size else None
    return CorePlan(best, core, explicit, prefix, "samples" if c >= n else "coefficients",
                    collapse, best_cost, coordinates)


def _core_basis(form, XC, XE, Zw, wide, dtype, policy):
    """The core's eigenbasis: ``(lam, XEt, Zt, G_perp, Z_perp, to_core)``,
    the eigenvalues, ``U^T X~_E``, ``U^T Z`` (in the set-up's precision
    ``wide``), ``G_perp`` and its probes' part (coefficient form; ``None`` in
    the sample form) and the map of core tangents to their images ``w``."""
    G_perp = Z_perp = None
    if form == "samples":
        G = XC @ XC.T  # the product on every thread, the factorisation on one
        with factorization_blas("eigh", G.shape[0], policy):
            lam, U = linalg.eigh(G, overwrite_a=True, check_finite=False, driver="evd")
        del G  # overwritten by LAPACK
        lam = np.clip(lam, 0, None)
        XEt = U.T @ XE  # X~_E in the eigenbasis (d, |E|)
        Zt = U.T @ Zw  # probes in the eigenbasis (d, m)

        def to_core(dx_core, U=U, XC=XC):
            return U.T @ (XC @ dx_core)
        return lam, XEt, Zt, G_perp, Z_perp, to_core
    G = XC.T @ XC
    with factorization_blas("eigh", G.shape[0], policy):
        lam, V = linalg.eigh(G, overwrite_a=True, check_finite=False, driver="evd")
    del G  # overwritten by LAPACK
    keep = lam > max(lam[-1], 0.0) * lam.size * np.finfo(wide).eps
    lam, V = lam[keep], V[:, keep]
    root = np.sqrt(lam)[:, None]
    XEt = (V.T @ (XC.T @ XE)) / root  # U^T X~_E with U = X~_C V Lambda^-1/2
    Zt = (V.T @ (XC.T @ Zw)) / root
    # X~_E^T (I - U U^T) X~_E and its probes' part
    G_perp = np.asfortranarray(XE.T @ XE - XEt.T @ XEt, dtype=dtype)
    Z_perp = (XE.T @ Zw - XEt.T @ Zt).astype(dtype)
    V, root = V.astype(dtype), root.astype(dtype)

    def to_core(dx_core, V=V, root=root):
        return root * (V.T @ dx_core)
    return lam, XEt, Zt, G_perp, Z_perp, to_core


def _scatter_head(saved, c0, core_idx, E, p, to_core, dtype, blocks):
    """The head's chains in coordinates (:class:`~skacv.estimates.risk._state.SavedChains`,
    ``c0`` columns) into the core's images and the explicit rows:
    ``blocks`` of ``(name, w, e)``."""
    in_core = np.full(p, -1)
    in_core[core_idx] = np.arange(core_idx.size)
    in_e = np.full(p, -1)
    in_e[E] = np.arange(E.size)
    for name, w, e in blocks:
        coords, values = saved.get(name)
        if w is None or coords is None or coords.size == 0:
            continue
        values = np.asarray(values, dtype=dtype)
        at_core, at_e = in_core[coords], in_e[coords]
        dense = np.zeros((core_idx.size, c0), dtype=dtype)
        dense[at_core[at_core >= 0]] = values[at_core >= 0]
        w[:, :c0] = to_core(dense)
        e[at_e[at_e >= 0], :c0] = values[at_e >= 0]


def core_space_memory_matrix(Xd, iteration, coef_path, Z, inv_n, plan, dtype, policy, head=None,
                             verbose=0):
    """Memory matrices ``A``, ``A_sources`` with Hutchinson probes ``Z``
    (``n x m``, the scale ``1/m`` applied), the chains on the diagonalised
    core from step ``plan.start`` on.

    ``Xd(idx, dt)`` gives the columns ``X~[:, idx]`` as a dense ``dt`` array.
    In the coefficient form the eigenbasis and the products that enter the
    chains (``U^T X~_E``, ``G_perp``, the probes' images) are computed in
    float64 whatever ``dtype``, then rounded to it: ``G_perp`` is a
    difference of two Gram matrices that nearly cancel when ``X~_E`` lies
    mostly in the span of ``X~_C`` (correlated designs), and in float32 its
    rounding moved the risk estimate by 2.4 % (FISTA, 1000 x 1500 and 3000 x
    2000 equicorrelated, rho = 0.5; 1e-7 in float64), far above the
    Hutchinson error it should be negligible against. The sample form has
    no such difference (float32 within 2e-6 of float64 on the same designs).
    ``head``: the state of :func:`~skacv.estimates.risk._chains.masked_memory_matrix`
    after step ``plan.start - 1`` (its memory matrices and its chains in
    coordinates), with the same probes; ``None`` when ``plan.start == 1``.
    """
    n, m = Z.shape
    T = coef_path.shape[1] - 1
    dtype = np.dtype(dtype)
    core, E, prefix, k_start = plan.core, plan.explicit, plan.prefix, plan.start
    extrapolates = iteration.extrapolates(T)
    hb = iteration.uses_heavy_ball(T)
    momentum = extrapolates or hb
    tic = time.perf_counter()
    core_idx = np.flatnonzero(core)
    wide = _SETUP_DTYPE if plan.form == "coefficients" else dtype  # see the docstring
    XC = Xd(core_idx, wide)
    XE = Xd(E, wide)
    Zw = np.asarray(Z, dtype=wide)  # the probes in the set-up's precision
    ZE = np.ascontiguousarray(Zw.T @ XE, dtype=dtype)  # (m, |E|): the traces' explicit part
    lam, XEt, Zt, G_perp, Z_perp, to_core = _core_basis(plan.form, XC, XE, Zw, wide, dtype, policy)
    d = lam.size
    lam_n = (lam * inv_n).astype(dtype)[:, None]
    XEt = np.asfortranarray(XEt, dtype=dtype)
    Zt = np.ascontiguousarray(Zt.T, dtype=dtype)  # (m, d)
    zt = Zt.T
    del XE
    if verbose:
        print(f"[risk] {iteration.name} chains on the core from step {k_start}: core "
              f"{core_idx.size} ({plan.form}, rank {d}), explicit {E.size}, eigenbasis in "
              f"{time.perf_counter() - tic:.1f}s")
    cols_max = m * T
    shape_w, shape_e = (d, cols_max), (E.size, cols_max)
    wx1 = np.zeros(shape_w, dtype=dtype, order="F")
    wv = np.zeros_like(wx1) if extrapolates else wx1
    wx2 = np.zeros_like(wx1) if hb else None
    ex1 = np.zeros(shape_e, dtype=dtype, order="F")
    ev = np.zeros_like(ex1) if extrapolates else ex1
    ex2 = np.zeros_like(ex1) if hb else None
    A = np.zeros((T + 1, T + 1))
    Av = np.zeros((T + 1, T + 1))
    if head is not None:  # the chains in coordinates after step k_start - 1
        A[:k_start, :k_start] = head.A
        Av[:k_start, :k_start] = head.Av
        _scatter_head(head.chains, m * (k_start - 1), core_idx, E, coef_path.shape[0], to_core,
                      dtype, (("dv", wv, ev), ("dx1", wx1, ex1), ("dx2", wx2, ex2)))
    del XC, to_core
    masks_e = coef_path[E] != 0
    neg_lam = -lam_n
    # the chains' current form: per probe, or collapsed (one column per
    # source holding the probe-weighted sum (1/m) sum_j z~_ij w_ij) once no
    # explicit coordinate is left: each eigen-coordinate then evolves on its
    # own, linearly, so the sum evolves as the chains do and its entries
    # add up to the traces
    cur = {"m": m, "scale": 1.0 / m, "Zt": Zt, "zt": zt, "wv": wv, "wx1": wx1, "wx2": wx2}

    def advance(k, cols, XEk, ZEk, mask, coef, mcoef, c_old):
        """Step ``k`` of the chains in columns ``cols`` (independent of the
        other columns: groups of columns run in parallel threads)."""
        r = XEk.shape[1]
        mm, wv, wx1, wx2 = cur["m"], cur["wv"], cur["wx1"], cur["wx2"]
        sources = slice(cols.start // mm, cols.stop // mm)
        # minus the tangent of the residual in the eigenbasis: U^T X~ dv, minus
        # the new source's probes
        new = slice(max(c_old - cols.start, 0), None) if cols.stop > c_old else None
        # in Fortran order, as the tangents: the traces read them as one product
        q = (np.matmul(ev[:r, cols].T, XEk.T).T if r
             else np.zeros((d, cols.stop - cols.start), dtype, order="F"))
        q += wv[:, cols]
        if new is not None:
            q[:, new] -= cur["zt"]
        dz_e = np.matmul(XEk.T, q)
        if G_perp is not None and r:  # the part of X~_E^T q outside U
            dz_e += np.matmul(G_perp[:r, :r], ev[:r, cols])
            if new is not None:
                dz_e[:, new] -= Z_perp[:r]
        dz_e *= dtype.type(-inv_n)
        q *= neg_lam  # U^T X~_C dz_C
        dx_e, dv_e = iteration.tangent(
            k, ev[:r, cols], ex1[:r, cols], None if ex2 is None else ex2[:r, cols], dz_e,
            mask, coef, mcoef)
        dx_w, dv_w = iteration.tangent(
            k, wv[:, cols], wx1[:, cols], None if wx2 is None else wx2[:, cols], q, None,
            n_free=0)
        scale, Zk = cur["scale"], cur["Zt"]
        A[k, sources] = scale * (_block_trace(Zk, dx_w, mm) + _block_trace(ZEk, dx_e, mm))
        if dv_w is dx_w:
            Av[k, sources] = A[k, sources]
        else:
            Av[k, sources] = scale * (_block_trace(Zk, dv_w, mm) + _block_trace(ZEk, dv_e, mm))
        if wx2 is not None:
            wx2[:, cols] = wx1[:, cols]
            ex2[:r, cols] = ex1[:r, cols]
        wx1[:, cols] = dx_w
        ex1[:r, cols] = dx_e
        if wv is not wx1:
            wv[:, cols] = dv_w
            ev[:r, cols] = dv_e

    def collapse(k):
        """Sum the probes of the chains of sources ``0..k-2`` (before step k)."""
        n_src = k - 1
        out = {}
        for name in ("wv", "wx1", "wx2"):
            b = cur[name]
            if b is None:
                out[name] = None
            elif name == "wv" and b is cur["wx1"]:
                out[name] = None  # shared with wx1: set below
            else:
                c = np.zeros((d, T), dtype=dtype, order="F")
                blocks = b[:, :m * n_src].reshape(d, n_src, m)
                c[:, :n_src] = np.einsum("isj,ji->is", blocks, Zt) / dtype.type(m)
                out[name] = c
        if out["wv"] is None:
            out["wv"] = out["wx1"]
        omega = np.mean(Zt.astype(np.float64) ** 2, axis=0)  # weights of new sources
        cur.update(out, m=1, scale=1.0, Zt=np.ones((1, d), dtype=dtype),
                   zt=omega.astype(dtype)[:, None])

    chunk = policy.chain_chunk_bytes
    with column_workers(policy.core_space_threads) as run:
        for k in range(k_start, T + 1):
            r = int(prefix[max(k - 2 if momentum else k - 1, 0)])
            if k == plan.collapse and m > 1:
                collapse(k)
            mm = cur["m"]
            c_old, c_new = mm * (k - 1), mm * k
            group = max(mm, chunk // (max(d, 1) * dtype.itemsize))  # in cache
            Ek = E[:r]
            coef = iteration.extrapolation_coefficients(k, coef_path[Ek, k],
                                                        coef_path[Ek, k - 1])
            mcoef = None
            if hb and k >= 2:
                mcoef = iteration.momentum_coefficients(k, coef_path[Ek, k - 1],
                                                        coef_path[Ek, k - 2])
            run(advance, [(k, cols, XEt[:, :r], ZE[:mm, :r], masks_e[:r, k], coef, mcoef,
                           c_old) for cols in column_groups(c_new, mm, group)])
            if verbose and (k % max(1, T // 10) == 0 or k == T):
                print(f"[risk] {iteration.name} traces: step {k}/{T}, explicit rows {r}, "
                      f"{'probes summed, ' if mm == 1 < m else ''}"
                      f"{time.perf_counter() - tic:.1f}s")
    return A, Av
