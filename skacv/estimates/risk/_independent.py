"""Memory matrices of proximal iterations with independent probes per source.

The memory matrix of Bellec & Tan (2024) holds the traces ``A[t, s] = tr(X~
J_{t,s} X~^T)`` of the Jacobians of the iterate ``x^t`` with respect to the
response that enters the gradient of step ``s + 1`` (source ``s``). The seed
notebook estimates every entry with the same ``m`` Hutchinson probes, one
chain per source and probe: ``m T^2 / 2`` chain-steps (``m T^2 / 4`` when the
chains meet in the middle, :mod:`skacv.estimates.risk._chains`).

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
not flat but moves by a fraction of a percent from step to step (about 1 %
of the risk at n = 200, 0.5 % at 500, 0.3 % at 1000 and 0.2 % at 2000,
Lasso, p = 1.5 n), where the shared probes' is flat with a larger common
error. Opt-in (``probe_scheme="independent"``): ``"auto"`` takes the pooled
probes of :mod:`skacv.estimates.risk._pooled`.

The probes are drawn source by source from ``random_state`` and the mergers
read the chains on the support of each step only, so a prefix of a path has
the estimates of the whole path: a warm start continues the same draw and
equals the cold fit of the whole path.
"""


import copy

import numpy as np

from ..._config import check_memory
from ._probes import draw_probes
from ._propagate import (
    ChainProbes,
    gram_to_keep,
)
from ._start import CHAIN_HINT, ChainStart
from ._state import IndependentState, SavedChains

#: adjacent blocks merge while the cross terms of the row stay within this
#: fraction of its Hutchinson variance (0.25 gave 10-25 % more error than the
#: shared probes on isotropic 500 x 750 designs; 0.1 less error than them on
#: every design tried: isotropic, AR(1) and equicorrelated, 500 x 750 to
#: 2000 x 3000, T = 100 and 300, ISTA and FISTA)
CROSS_NOISE_BUDGET = 0.1
#: the blocks :func:`~skacv.estimates.risk._propagate.maybe_gram`'s flop model assumes
#: (at most ``k // 2 + 1`` after step ``k``)
WINDOW_GUESS = 16


def window_columns(m, T):
    """Chain columns advanced at step ``k = 0..T`` by the cost model:
    :data:`WINDOW_GUESS` blocks (at most one a source, at most ``k // 2 +
    1``)."""
    k = np.arange(T + 1)
    return m * np.minimum(np.maximum(k - 1, 0), np.minimum(WINDOW_GUESS, k // 2 + 1))


class IndependentBlocks(ChainProbes):
    """The hooks of the independent probes: block ``i`` of ``blocks`` holds
    columns ``i m .. (i + 1) m`` (the oldest sources first); a new source
    injects its own probes' images ``W[:, s m:(s + 1) m]`` as a block of its
    own; the traces read every source from its block (:func:`_readout`);
    after a step the adjacent blocks merge (:func:`_merge_blocks`)."""

    label = "traces (independent probes)"

    def __init__(self, m, W, blocks, nu, A, Av):
        self.m, self.W, self.blocks, self.nu, self.A, self.Av = m, W, blocks, nu, A, Av
        self.scale = 1.0 / m

    def open_columns(self, k):
        c_old = self.m * len(self.blocks)  # the blocks of sources 0..k-2
        return c_old, c_old + self.m  # ... and source k - 1, a block of its own

    def after_gradient(self, k, chains, u, rows, c_old):
        if not u:  # the chains are zero
            self.nu[:] = [0.0] * len(self.blocks)
            return
        # (D_k dv)^T X~^T X~ dv of every chain: the blocks' ||B||_F^2 up to a
        # common factor, for the mergers (on the support of step k, which does
        # not depend on the path's length: a prefix of a path merges as the
        # whole path does)
        r = min(u, rows)
        q = np.einsum("r,rc,rc->c", chains.masks_s[:r, k], chains.dv[:r, :c_old],
                      chains.dz[:r, :c_old])
        self.nu[:] = list(np.maximum(-q.astype(float) / chains.g, 0.0)
                          .reshape(-1, self.m).mean(axis=1))

    def injection(self, k, rows):
        return self.W[:rows, (k - 1) * self.m:k * self.m]

    def before_tangent(self, k, chains, rows, c_old, c_new):
        self.blocks.append([k - 1, 1])
        dv, dx1 = chains.dv, chains.dx1
        if chains.dv_rows < rows and dx1 is not dv:
            dx1[chains.dv_rows:rows, :c_new] = 0
        # the new source starts from zero tangents (a merger may have left a
        # shifted column there; the extrapolation reads rows up to prefix[k - 1])
        dv[:, c_old:c_new] = 0
        if dx1 is not dv:
            dx1[:, c_old:c_new] = 0

    def read_step(self, k, chains, rows, c_new):
        # the new tangents dx are in dz, the gradient points' in dv
        W = self.W[:rows]
        self.A[k, :k] = self.scale * _readout(W, chains.dz[:rows, :c_new], self.blocks, k,
                                              self.m)
        if chains.extrapolates:
            self.Av[k, :k] = self.scale * _readout(W, chains.dv[:rows, :c_new], self.blocks, k,
                                                   self.m)
        else:
            self.Av[k, :k] = self.A[k, :k]

    def read_tail(self, k, rows, rows_prev, tail_v):
        self.Av[k, :k] += self.scale * _readout(self.W[rows:rows_prev], tail_v, self.blocks, k,
                                                self.m)

    def after_step(self, k, chains):
        dv, dx1 = chains.dv, chains.dx1
        _merge_blocks(self.blocks, self.nu, k, self.m,
                      ((dv, chains.dv_rows),) if dx1 is dv
                      else ((dv, chains.dv_rows), (dx1, chains.rows_k)))

    def progress(self):
        return f", {len(self.blocks)} blocks"


def _draw_probes(state, rng, n, m, T, k0):
    """The signs of every source's probes (int8, ``(n, m T)``), source by
    source from one stream, continuing the state's; and the stream after."""
    check_memory(n * m * T, f"the probes ({n} x {m * T} signs)")
    Z = np.empty((n, m * T), dtype=np.int8)
    draw = rng
    if state is not None:
        Z[:, : m * k0] = state.Z
        draw = copy.deepcopy(state.rng)
    for s in range(k0, T):
        Z[:, s * m:(s + 1) * m] = draw_probes(draw, (n, m), np.int8)
    return Z, draw


def independent_memory_matrix(design, iteration, coef_path, n_probes, rng, chain_dtype,
                              verbose=0, state=None, keep_state=False):
    """Hutchinson memory matrices of a proximal trajectory with ``n_probes``
    independent probes per source, the chains of consecutive sources summed
    into blocks (see the module's docstring).

    The chains are the forward chains of
    :class:`~skacv.estimates.risk._propagate.ForwardChains` (rows in
    :func:`~skacv.estimates.risk._propagate.chain_order`, the iteration's own
    :meth:`~skacv.Iteration.tangent`, restricted Gram products), driven by
    :class:`IndependentBlocks`.

    ``state`` (returned with ``keep_state=True``, an
    :class:`~skacv.estimates.risk._state.IndependentState`) holds the chains
    after the last step of a shorter prefix of the same trajectory, the
    probes drawn so far and the random generator after them: the
    computation continues from there.

    Returns
    -------
    A, A_sources : ndarrays of shape (T + 1, T + 1)
    state : IndependentState or None
    """
    m = int(n_probes)
    start = ChainStart(design, iteration, coef_path, state, IndependentState, m, chain_dtype,
                       heavy_ball=False)
    n, T, dtype, state, k0, prefix = start.n, start.T, start.dtype, start.state, start.k0, \
        start.prefix
    width = int(prefix[max(k0 - 1, 1)])
    A, Av = start.matrices("A", "Av")
    blocks, nu = [], []  # [first source, number of sources] of every block; proxies
    if state is not None:
        blocks = [list(b) for b in state.blocks]
        nu = list(state.nu)
    Z, draw = _draw_probes(state, rng, n, m, T, k0)
    if width == 0:  # every iterate after x^0 is zero: nothing depends on y
        new = None
        if keep_state:
            new = _state(T, m, dtype, Z, draw, A, Av, [], [], SavedChains(), None)
        return A, Av, new
    Xs = start.columns(width)
    check_memory(width * m * T * dtype.itemsize, f"the probes' images ({width} x {m * T})",
                 CHAIN_HINT)
    W = _probe_images(Xs, Z, m, prefix, dtype)  # X~^T Z_s in the chains' rows, (width, m T)
    # at most max_blocks(k) blocks after step k, and a new source
    n_cols = m * (min(max_blocks(T), T) + 1)
    chains = start.chains(Xs, n_cols, 2 + iteration.extrapolates(T))
    start.run(chains, IndependentBlocks(m, W, blocks, nu, A, Av), T, window_columns(m, T),
              verbose)
    if not keep_state:
        return A, Av, None
    cached = gram_to_keep(chains.gram, start.order, -chains.g,
                          None if state is None else state.gram)
    return A, Av, _state(T, m, dtype, Z, draw, A, Av, blocks, nu,
                         chains.saved(m * len(blocks), iterates=False), cached)


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
    return IndependentState(k=k, m=m, dtype=dtype, Z=Z[:, :m * k].copy(),
                            rng=copy.deepcopy(rng), A=A.copy(), Av=Av.copy(),
                            blocks=[list(b) for b in blocks], nu=list(nu), chains=chains,
                            gram=gram)
