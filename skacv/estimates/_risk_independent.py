"""Memory matrices of proximal iterations with independent probes per source.

The memory matrix of Bellec & Tan (2024) holds the traces ``A[t, s] = tr(X~
J_{t,s} X~^T)`` of the Jacobians of the iterate ``x^t`` with respect to the
response that enters the gradient of step ``s + 1`` (source ``s``). The seed
notebook estimates every entry with the same ``m`` Hutchinson probes, one
chain per source and probe: ``m T^2 / 2`` chain-steps (``m T^2 / 4`` when the
chains meet in the middle, :mod:`skacv.estimates._risk_chains`).

Here every source ``s`` has ``m`` probes of its own, ``Z_s`` (``n x m``,
Rademacher), and the chains ``J_{t,s} X~^T Z_s`` of consecutive sources are
summed into *blocks*: a block ``b`` of sources ``S_b`` is one chain of ``m``
columns, ``F_{t,b} = sum_{s in S_b} J_{t,s} X~^T Z_s``, advanced once a step
whatever the number of its sources. A source reads its entries from its
block::

    A[t, s] = (1/m) tr(Z_s^T X~ F_{t,b})
            = (1/m) tr(Z_s^T B_{t,s} Z_s) + (1/m) sum_{j in S_b, j != s} tr(Z_s^T B_{t,j} Z_j),

``B_{t,j} = X~ J_{t,j} X~^T``. The first term is Hutchinson's estimate of
``tr(B_{t,s})``; the cross terms of independent probes have mean zero, so the
entry is unbiased, with the extra variance ``sum_{j in S_b, j != s}
||B_{t,j}||_F^2 / m``. A new source starts a block of its own; after every
step the adjacent blocks whose merger adds the least cross variance are
merged while the cross variance of the row stays within
``CROSS_NOISE_BUDGET`` of its Hutchinson variance::

    sum_b (|S_b| - 1) nu_b  <=  CROSS_NOISE_BUDGET * 2 sum_b nu_b,

where ``nu_b`` estimates ``sum_{j in S_b} ||B_{t,j}||_F^2`` up to a common
factor: ``(D_k dv)^T X~^T X~ dv`` of the block's chain (``D_k`` the support
of step ``k``), read on the product that every step takes anyway (merging
``a`` and ``b`` adds ``|S_a| nu_b + |S_b| nu_a``). The norms fall fast
with the age ``t - j``, so the young sources stay alone and the old ones
gather in a few large blocks. The blocks are at most
``k // 2 + 1`` after step ``k`` (the cheapest mergers are forced beyond), so
a path never takes more chain-steps than the shared probes' meet-in-the-middle
(``m T^2 / 4``); typically a quarter to a half of them.

With independent probes the errors of different sources are independent,
whereas the shared probes' errors add up coherently along a row, so the
estimate is closer to the exact traces. Root-mean-square relative error of
``risk_path_`` over the iterates and 6 to 16 probe draws, 10 probes,
independent against shared: the seed generator (2000 x 3000, ISTA, T = 100,
against 400 other probes) 0.84 % against 1.84 % (largest 2.6 % against 4.5
%); 300 x 450 with an intercept (T = 60, against exact traces) ISTA 1.8 %
against 5.2 %, FISTA 3.3 % against 6.9 %; isotropic 1000 x 1500 FISTA T =
100: 2.0 % against 5.4 %; 500 x 750, T = 300, FISTA: 4.5 % against 5.6 %
(isotropic), 1.5 % against 3.6 % (AR(1), rho = 0.9); isotropic 500 x 750
ISTA T = 100: 2.9 % both. The price: the estimates of different iterates
carry independent noise, so where the iterates have converged the curve is
not flat but moves by a fraction of a percent from step to step (see
:data:`AUTO_MIN_SAMPLES`), where the shared probes' is flat with a larger
common error.

The probes are drawn source by source from ``random_state`` and the mergers
read the chains on the support of each step only, so a prefix of a path has
the estimates of the whole path: a warm start continues the same draw and
equals the cold fit of the whole path.
"""

import copy
import time

import numpy as np

from .._config import check_memory, get_config
from ..iterations._iterations import Iteration
from ._risk_chains import (
    CHUNK_BYTES,
    GRAM_CACHE_BYTES,
    chain_order,
    design_columns,
    gram_product,
    maybe_gram,
    uses_heavy_ball,
)

#: adjacent blocks merge while the cross terms of the row stay within this
#: fraction of its Hutchinson variance (0.25 gave 10-25 % more error than the
#: shared probes on isotropic 500 x 750 designs; 0.1 less error than them on
#: every design tried: isotropic, AR(1) and equicorrelated, 500 x 750 to
#: 2000 x 3000, T = 100 and 300, ISTA and FISTA)
CROSS_NOISE_BUDGET = 0.1
#: ``"auto"`` takes independent probes from this many samples on. Their
#: estimates of different iterates carry independent noise: on a converged
#: plateau the estimate moves from step to step by about 1 % of the risk at
#: n = 200, 0.5 % at 500, 0.3 % at 1000 and 0.2 % at 2000 (Lasso, p = 1.5 n;
#: the shared probes' estimate is flat there, with a common error of 5 to 10
#: % against the truth at these sizes, as large as the independent probes');
#: below this size the chains are cheap and the flat curve is kept
AUTO_MIN_SAMPLES = 1000
#: the blocks :func:`~skacv.estimates._risk_chains.maybe_gram`'s flop model assumes
#: (at most ``k // 2 + 1`` after step ``k``)
WINDOW_GUESS = 16


def window_columns(m, T):
    """Chain columns advanced at step ``k = 0..T`` by the cost model:
    :data:`WINDOW_GUESS` blocks (at most one a source, at most ``k // 2 +
    1``)."""
    k = np.arange(T + 1)
    return m * np.minimum(np.maximum(k - 1, 0), np.minimum(WINDOW_GUESS, k // 2 + 1))


def probe_scheme(iteration, n_probes, T, n_samples):
    """``"independent"`` or ``"shared"`` probes for the chains of a path of
    ``T`` steps (``risk_probe_scheme`` of :func:`skacv.get_config`).

    ``"auto"``: independent probes with Hutchinson probes, no heavy ball and
    at least :data:`AUTO_MIN_SAMPLES` samples; else the shared probes (exact
    traces, ``n_probes=None``, are always shared). The choice does not
    depend on the path or its length, so that every prefix of a path (a
    warm start, a stage of the early stopping) has the estimates of the
    whole path.
    """
    scheme = get_config()["risk_probe_scheme"]
    if n_probes is None or T < 1 or scheme == "shared" or uses_heavy_ball(iteration, T):
        return "shared"
    if scheme == "independent" or n_samples >= AUTO_MIN_SAMPLES:
        return "independent"
    return "shared"


def independent_memory_matrix(design, iteration, coef_path, n_probes, rng, chain_dtype,
                              verbose=0, state=None, keep_state=False):
    """Hutchinson memory matrices of a proximal trajectory with ``n_probes``
    independent probes per source, the chains of consecutive sources summed
    into blocks (see the module's docstring).

    The chains are those of :func:`~skacv.estimates._risk_chains.masked_memory_matrix`
    (rows in :func:`~skacv.estimates._risk_chains.chain_order`, the iteration's own
    :meth:`~skacv.Iteration.tangent`, restricted Gram products); block ``i``
    holds columns ``i m .. (i + 1) m``, the oldest sources first.

    ``state`` (returned with ``keep_state=True``) holds the chains after the
    last step of a shorter prefix of the same trajectory, the probes drawn
    so far and the random generator after them: the computation continues
    from there.

    Returns
    -------
    A, A_sources : ndarrays of shape (T + 1, T + 1)
    state : dict or None
    """
    n = design.n_samples
    T = coef_path.shape[1] - 1
    m = int(n_probes)
    dtype = np.dtype(chain_dtype)
    if uses_heavy_ball(iteration, T):
        raise ValueError(
            f"Independent probes need an iteration without a heavy ball ({iteration.name}); "
            "use skacv.config_context(risk_probe_scheme='shared')."
        )
    fold = iteration.schedule is None and type(iteration).combine is Iteration.combine
    g = (1.0 / design.n_eff) * (iteration.step_size if fold else 1.0)
    if state is not None and not (
        state.get("kind") == "independent" and state["m"] == m and state["dtype"] == dtype
        and state["k"] <= T and state["Z"].shape[0] == n
    ):
        state = None
    k0 = 0 if state is None else state["k"]
    masks, order, prefix = chain_order(coef_path)
    width = int(prefix[max(k0 - 1, 1)])
    A = np.zeros((T + 1, T + 1))
    Av = np.zeros((T + 1, T + 1))
    # the probes, source by source from one stream (signs in int8)
    check_memory(n * m * T, f"the probes ({n} x {m * T} signs)")
    Z = np.empty((n, m * T), dtype=np.int8)
    draw = rng
    blocks, nu = [], []  # [first source, number of sources] of every block; proxies
    if state is not None:
        A[: k0 + 1, : k0 + 1] = state["A"]
        Av[: k0 + 1, : k0 + 1] = state["Av"]
        Z[:, : m * k0] = state["Z"]
        draw = copy.deepcopy(state["rng"])
        blocks = [list(b) for b in state["blocks"]]
        nu = list(state["nu"])
    signs = np.array([-1, 1], dtype=np.int8)
    for s in range(k0, T):
        Z[:, s * m:(s + 1) * m] = draw.choice(signs, size=(n, m))
    if width == 0:  # every iterate after x^0 is zero: nothing depends on y
        new = None
        if keep_state:
            new = _state(T, m, dtype, Z, draw, A, Av, [], [], {}, None)
        return A, Av, new
    Xs = design_columns(design, order[:width], dtype)
    check_memory(width * m * T * dtype.itemsize, f"the probes' images ({width} x {m * T})",
                 "Use fewer probes (n_probes) or fewer iterations. ")
    W = _probe_images(Xs, Z, m, prefix, dtype)  # X~^T Z_s in the chains' rows, (width, m T)
    extrapolates = any(iteration.beta(k) != 0.0 for k in range(1, T + 1))
    # at most max_blocks(k) blocks after step k, and a new source
    n_cols = m * (min(max_blocks(T), T) + 1)
    n_blocks = 2 + extrapolates
    check_memory(n_blocks * width * n_cols * dtype.itemsize,
                 f"the Jacobian chains ({width} x {n_cols}, {n_blocks} blocks)",
                 "Use fewer probes (n_probes) or fewer iterations. ")
    dv = np.zeros((width, n_cols), dtype=dtype, order="F")
    dz = np.zeros_like(dv)  # the gradient tangents; the new dx are written here
    dx1 = np.zeros_like(dv) if extrapolates else dv
    dv_rows = 0  # rows of dv that may be non-zero
    if state is not None:  # scatter the saved chains into this row order
        position = np.empty(coef_path.shape[0], dtype=np.intp)
        position[order] = np.arange(order.size)
        for name, block in (("dv", dv), ("dx1", dx1)):
            coords, values = state["chains"].get(name, (None, None))
            if coords is None or coords.size == 0 or (name == "dx1" and block is dv):
                continue
            rows = position[coords]
            block[rows, : values.shape[1]] = values
            if name == "dv":
                dv_rows = int(rows.max()) + 1
    masks_s = np.asfortranarray(masks[order[:width]], dtype=dtype)
    columns = window_columns(m, T)
    gram, scale = None, 1.0 / m
    k_first = max(2, k0 + 1)
    rows_k = 0
    tic = time.perf_counter()
    for k in range(k0 + 1, T + 1):
        rows_k = int(prefix[k])  # supports of steps >= k live in this prefix
        rows_prev = min(int(prefix[k - 1]), width) if k >= 2 else 0
        c_old = m * len(blocks)  # the blocks of sources 0..k-2
        c_new = c_old + m  # ... and source k - 1, a block of its own
        dz_k = dz[:rows_k, :c_new]
        if c_old and dv_rows:
            u = dv_rows
            gram = maybe_gram(Xs, gram, k, k_first, prefix, columns, n, -g,
                              cached=None if state is None else state.get("gram"), order=order)
            gram_product(Xs, gram, rows_k, u, dv[:u, :c_old], dz_k[:, :c_old], -g)
            # (D_k dv)^T X~^T X~ dv of every chain: the blocks' ||B||_F^2 up
            # to a common factor, for the mergers (on the support of step k,
            # which does not depend on the path's length: a prefix of a path
            # merges as the whole path does)
            r = min(u, rows_k)
            q = np.einsum("r,rc,rc->c", masks_s[:r, k], dv[:r, :c_old], dz_k[:r, :c_old])
            nu = list(np.maximum(-q.astype(float) / g, 0.0).reshape(-1, m).mean(axis=1))
        elif c_old:  # the chains are zero
            dz_k[:, :c_old] = 0
            nu = [0.0] * len(blocks)
        np.multiply(W[:rows_k, (k - 1) * m:k * m], g, out=dz_k[:, c_old:c_new])
        blocks.append([k - 1, 1])
        if dv_rows < rows_k:
            dv[dv_rows:rows_k, :c_new] = 0
            if dx1 is not dv:
                dx1[dv_rows:rows_k, :c_new] = 0
        # the new source starts from zero tangents (a merger may have left a
        # shifted column there; the extrapolation below reads rows up to
        # prefix[k - 1])
        dv[:, c_old:c_new] = 0
        if dx1 is not dv:
            dx1[:, c_old:c_new] = 0
        coef = iteration.extrapolation_coefficients(k, coef_path[:, k], coef_path[:, k - 1])
        if coef is not None:  # clipped: in the chains' row order
            coef = (coef[0][order[:rows_k]], coef[1][order[:rows_k]])
        mask_k = masks_s[:rows_k, k]
        step = m * max(1, CHUNK_BYTES // (max(rows_k, 1) * m * dtype.itemsize))
        for j0 in range(0, c_new, step):
            cols = slice(j0, min(j0 + step, c_new))
            iteration.tangent(k, dv[:rows_k, cols], dx1[:rows_k, cols], None, dz_k[:, cols],
                              mask_k, coef, None, overwrite_dz=True,
                              out_v=dv[:rows_k, cols] if dv is not dx1 else None,
                              dz_scaled=fold)
        # the new tangents dx are in dz, the gradient points' in dv
        A[k, :k] = scale * _readout(W[:rows_k], dz_k, blocks, k, m)
        if extrapolates:
            Av[k, :k] = scale * _readout(W[:rows_k], dv[:rows_k, :c_new], blocks, k, m)
        else:
            Av[k, :k] = A[k, :k]
        dv_rows = rows_k
        # rows beyond the prefix: dx = 0 there, dv = extrapolate(0, dx1) (zero
        # when clipped: those coordinates are zero at x^k)
        if iteration.beta(k) != 0.0 and rows_prev > rows_k and coef is None:
            tail_v = dv[rows_k:rows_prev, :c_new]
            np.multiply(dx1[rows_k:rows_prev, :c_new],
                        iteration.extrapolation_factors(k, None, 2, dtype)[1], out=tail_v)
            Av[k, :k] += scale * _readout(W[rows_k:rows_prev], tail_v, blocks, k, m)
            dv_rows = rows_prev
        if dv is dx1:
            dv, dz = dz, dv
            dx1 = dv
        else:
            dx1, dz = dz, dx1
        _merge_blocks(blocks, nu, k, m, ((dv, dv_rows),) if dx1 is dv
                      else ((dv, dv_rows), (dx1, rows_k)))
        if verbose and (k % max(1, T // 10) == 0 or k == T):
            print(f"[risk] {iteration.name} traces (independent probes): step {k}/{T}, "
                  f"support prefix {rows_k}, {len(blocks)} blocks, "
                  f"{time.perf_counter() - tic:.1f}s")
    new_state = None
    if keep_state:
        c = m * len(blocks)
        chains = {"dv": (order[:dv_rows], dv[:dv_rows, :c].copy())}
        if dx1 is not dv:
            chains["dx1"] = (order[:rows_k], dx1[:rows_k, :c].copy())
        cached = None
        if gram is not None and gram.nbytes <= GRAM_CACHE_BYTES:
            cached = (order[: gram.shape[0]], gram, -g)
        elif state is not None:
            cached = state.get("gram")
        new_state = _state(T, m, dtype, Z, draw, A, Av, blocks, nu, chains, cached)
    return A, Av, new_state


def max_blocks(k):
    """The most blocks after step ``k`` (sources ``0..k-1``): ``k // 2 + 1``,
    so that the chain-steps of a path stay below the shared probes'
    ``m T^2 / 4``; non-decreasing in ``k`` (the chains' arrays are sized by
    ``max_blocks(T)``)."""
    return k // 2 + 1


def _merge_blocks(blocks, nu, k, m, chains):
    """After step ``k``: merge adjacent blocks, the pair that adds the least
    cross variance first, while the row's cross variance stays within the
    budget (and while the blocks are more than ``k // 2 + 1``, whatever it
    costs). ``nu``: the proxies of every block but the newest (the last);
    ``chains``: ``(block, valid rows)`` of the chains' arrays, whose
    columns follow ``blocks``. ``blocks`` and ``nu`` are updated in place."""
    cap = max_blocks(k)
    total = float(sum(nu))
    cross = float(sum((b[1] - 1) * v for b, v in zip(blocks[:-1], nu, strict=True)))
    while len(blocks) > 2:
        size = np.array([b[1] for b in blocks[:-1]], dtype=float)
        v = np.asarray(nu, dtype=float)
        added = size[:-1] * v[1:] + size[1:] * v[:-1]  # merging i and i + 1
        i = int(np.argmin(added))
        if len(blocks) <= cap and cross + added[i] > CROSS_NOISE_BUDGET * 2.0 * total:
            break
        c_end = m * len(blocks)
        for arr, rows in chains:
            a = arr[:rows]
            a[:, i * m:(i + 1) * m] += a[:, (i + 1) * m:(i + 2) * m]
            a[:, (i + 1) * m:c_end - m] = a[:, (i + 2) * m:c_end]
        cross += added[i]
        blocks[i][1] += blocks[i + 1][1]
        del blocks[i + 1]
        nu[i] += nu[i + 1]
        del nu[i + 1]


def _probe_images(Xs, Z, m, prefix, dtype):
    """``X~^T Z_s`` of every source in the chains' rows, shape (width, m T),
    Fortran order (source ``s``: columns ``s m .. (s + 1) m``), on the rows a
    source may read (``prefix[s]``: its steps are ``s + 1`` and later, and
    the extrapolation's rows beyond the prefix of step ``s + 1`` reach
    ``prefix[s]``; the rest is left unset), in four groups of sources (wide
    products, and two thirds of the rows on the seed generator)."""
    width = Xs.shape[1]
    T = Z.shape[1] // m
    W = np.empty((width, Z.shape[1]), dtype=dtype, order="F")
    per = max(-(-T // 4), -(-128 // m))  # four groups, of 128 columns at least
    for s0 in range(0, T, per):
        cols = slice(s0 * m, min(s0 + per, T) * m)
        rows = min(int(prefix[s0]), width)
        W[:rows, cols] = Xs[:, :rows].T @ Z[:, cols].astype(dtype)
    return W


def _readout(W, chains, blocks, k, m):
    """``sum_{r, i} W[r, s m + i] * F_b[r, i]`` of every source ``s < k``,
    ``F_b`` the chain of its block (columns ``b m .. (b + 1) m`` of
    ``chains``): runs of blocks of one source by one element-wise pass, a
    block of several by one product (``(|S_b| m) x m``, its diagonal
    blocks)."""
    out = np.zeros(k)
    i, n_blocks = 0, len(blocks)
    while i < n_blocks:
        s0, size = blocks[i]
        if size == 1:
            j = i
            while j < n_blocks and blocks[j][1] == 1:
                j += 1
            prod = np.einsum("rc,rc->c", W[:, s0 * m:(s0 + j - i) * m], chains[:, i * m:j * m])
            out[s0:s0 + j - i] = prod.reshape(-1, m).sum(axis=1)
            i = j
        else:
            cross = W[:, s0 * m:(s0 + size) * m].T @ chains[:, i * m:(i + 1) * m]
            out[s0:s0 + size] = np.einsum("sii->s", cross.reshape(size, m, m))
            i += 1
    return out


def _state(k, m, dtype, Z, rng, A, Av, blocks, nu, chains, gram):
    state = {"kind": "independent", "k": k, "m": m, "dtype": dtype, "Z": Z[:, :m * k].copy(),
             "rng": copy.deepcopy(rng), "A": A.copy(), "Av": Av.copy(),
             "blocks": [list(b) for b in blocks], "nu": list(nu), "chains": chains}
    if gram is not None:
        state["gram"] = gram
    return state
