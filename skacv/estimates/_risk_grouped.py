"""Block-shared ("grouped") Hutchinson probes for the proximal chains.

The memory matrix of Bellec & Tan (2024), ``A[t, s] = tr(X~ dx^t / dy^(s))``,
is estimated here by probes shared within groups of :data:`GROUP_SOURCES`
consecutive sources (``probe_scheme="grouped"``, opt-in). Source ``s``
belongs to group ``b = s // G``; the group draws its own probes ``Z_b`` (``n
x m`` Rademacher signs) when it opens, and every source of the group
injects the same images ``g X~^T Z_b`` into the group's single chain of
``m`` columns, so that the chain holds ``F_{t,b} = sum_{s in b} J_{t,s}
X~^T Z_b``. Its readout ``(1/m) tr(Z_b^T X~ F_{t,b})`` (and the same with the
gradient points' tangents for ``A_sources``) is Hutchinson's unbiased
estimate of the block's row sum ``sum_{s in b} A[t, s]``, with no cross
terms between sources of different groups (independent probes).

* Lag 0 is exact: the readout of the injection of step ``t`` through the
  step's own tangent is subtracted, and ``A[t, t - 1] = g sum_{j in S_t}
  ||x~_j||^2`` (through the same tangent: the mask and the extrapolation's
  coefficients) takes its place.
* The other entries of a row are its block sums split by the block average
  (each source of the block older than lag 0 gets the block's mean): with
  ``G <= 16`` this changes the risk estimate by at most 0.3 % (rms 0.1-0.3 %
  on six equicorrelated FISTA and ISTA problems, 300 x 450 to 600 x 900,
  ``lam = 0.1 sqrt(log p / n)``, with exact block sums), far less than the
  probes' own noise. It is a bias where a row is sharply peaked in the lag
  (short memory: a strong penalty, a short path): on an isotropic 120 x 180
  design with ``alpha = 0.05`` and 40 steps the split alone moved FISTA's
  ``risk_path_`` by 13 % rms (ISTA 4.6 %; groups of 8: 4.3 % and 1.8 %),
  hence an opt-in scheme, not ``"auto"``'s choice.
* Cost: at step ``k`` the chains have ``m ceil(k / G)`` columns (no mergers,
  no proxies); one probe image ``X~^T Z_b`` per group.
* The probes of group ``b`` are drawn from ``random_state`` in the order of
  the groups and a row uses only its own step's readout: a ``k``-step prefix
  of a path gives the first ``k + 1`` rows of the whole path's matrices.
  No warm-start state is kept (a warm start recomputes the estimate cold).

Why it pays (FISTA): the per-source traces oscillate with the lag and partly
cancel in a block sum, so a block sum's Hutchinson noise grows far slower
than the block; at equal chain time it had 1.6-2.6 times less error than
independent blocks of four probes capped at four blocks.
"""

import numpy as np

from .._config import check_memory
from ..linalg._sampling import rademacher
from ._risk_propagate import ChainProbes, ForwardChains, chain_order, design_columns

#: sources sharing one chain of probes (the block-average split of a row's
#: block sums is within 0.3 % of the exact split's risk up to 16 sources)
GROUP_SOURCES = 16


def group_columns(m, T, G=GROUP_SOURCES):
    """Chain columns advanced at step ``k = 0..T``: ``m`` per group opened
    by sources ``0..k-1``."""
    k = np.arange(T + 1)
    return m * (np.maximum(k - 1, 0) // G + 1)


class GroupedProbes(ChainProbes):
    """The hooks of the grouped probes: group ``b`` holds columns ``b m ..
    (b + 1) m``; the source opening a group writes its injection into new
    columns (the propagator's own injection), the others add theirs to the
    group's columns (:meth:`before_tangent`). ``SA``, ``SV`` (``T + 1``,
    groups, ``m``): the per-probe block sums of the rows without lag 0;
    ``lag0`` (``T + 1``, 2): the exact lag-0 entries; ``colnorm``: the
    squared norms of the chains' columns of ``X~``."""

    label = "traces (grouped probes)"

    def __init__(self, m, G, W, SA, SV, lag0, colnorm):
        self.m, self.G, self.W, self.colnorm = m, G, W, colnorm
        self.SA, self.SV, self.lag0 = SA, SV, lag0
        self._l0 = None

    def _group(self, k):
        b = (k - 1) // self.G
        return b, slice(b * self.m, (b + 1) * self.m), (k - 1) % self.G == 0

    def open_columns(self, k):
        b, _, opens = self._group(k)
        c_new = self.m * (b + 1)
        return (c_new - self.m if opens else c_new), c_new

    def injection(self, k, rows):
        _, blk, opens = self._group(k)
        W = self.W[:rows, blk]
        return W if opens else W[:, :0]  # added to the group's chain in before_tangent

    def before_tangent(self, k, chains, rows, c_old, c_new):
        _, blk, opens = self._group(k)
        dv, dx1 = chains.dv, chains.dx1
        if chains.dv_rows < rows and dx1 is not dv:
            dx1[chains.dv_rows:rows, :c_new] = 0
        inj = self.W[:rows, blk] * chains.dtype.type(chains.g)
        if opens:  # a new group: its chain starts from zero
            dv[:, blk] = 0
            if dx1 is not dv:
                dx1[:, blk] = 0
        else:
            chains.dz[:rows, blk] += inj
        self._l0 = self._lag0(k, chains, rows, inj)

    def _lag0(self, k, chains, rows, inj):
        """The injection of step ``k`` alone through the step's tangent:
        its readout per probe (to subtract) and the exact lag-0 entries."""
        m = self.m
        coef, _ = chains._coefficients(k, rows)
        z0 = np.empty((rows, m + 1), dtype=chains.dtype)
        z0[:, :m] = inj
        z0[:, m] = chains.g * self.colnorm[:rows]
        zero = np.zeros_like(z0)
        dx0, dv0 = chains.iteration.tangent(k, zero, zero, None, z0, chains.masks_s[:rows, k],
                                            coef, None, dz_scaled=chains.fold)
        _, blk, _ = self._group(k)
        W = self.W[:rows, blk]
        self.lag0[k] = float(dx0[:, m].sum()), float(dv0[:, m].sum())
        return np.einsum("rc,rc->c", W, dx0[:, :m]), np.einsum("rc,rc->c", W, dv0[:, :m])

    def _sums(self, W, block, c_new):
        return np.einsum("rc,rc->c", W[:, :c_new], block).reshape(c_new // self.m, self.m)

    def read_step(self, k, chains, rows, c_new):
        b = (k - 1) // self.G
        nb = c_new // self.m
        W = self.W[:rows]
        self.SA[k, :nb] = self._sums(W, chains.dz[:rows, :c_new], c_new)
        self.SA[k, b] -= self._l0[0]
        if chains.extrapolates:
            self.SV[k, :nb] = self._sums(W, chains.dv[:rows, :c_new], c_new)
            self.SV[k, b] -= self._l0[1]
        else:
            self.SV[k] = self.SA[k]

    def read_tail(self, k, rows, rows_prev, tail_v):
        c_new = tail_v.shape[1]
        self.SV[k, :c_new // self.m] += self._sums(self.W[rows:rows_prev], tail_v, c_new)


def _probe_images(Xs, n, m, n_groups, prefix, G, rng, draw):
    """``X~^T Z_b`` of every group in the chains' rows, shape (width, m
    groups), Fortran order; ``Z_b`` drawn group by group from ``rng`` (or by
    ``draw(n, m)``), on the rows the group's sources may read
    (``prefix[b G]``; the rest zero)."""
    width = Xs.shape[1]
    W = np.zeros((width, m * n_groups), dtype=Xs.dtype, order="F")
    for b in range(n_groups):
        Z = rademacher(rng, (n, m), np.int8) if draw is None else draw(n, m)
        rows = min(int(prefix[b * G]), width)
        W[:rows, b * m:(b + 1) * m] = Xs[:, :rows].T @ np.asarray(Z, dtype=Xs.dtype)
    return W


def grouped_block_sums(design, iteration, coef_path, n_probes, rng, chain_dtype, verbose=0,
                       group_sources=GROUP_SOURCES, draw=None):
    """The per-probe block sums of the grouped chains (see the module's
    docstring).

    ``draw``: private, ``draw(n, m) -> Z`` replaces the Rademacher draw (the
    tests pass the identity, ``m = n``: the sums over the probes are then
    the exact block sums).

    Returns
    -------
    SA, SV : ndarrays of shape (T + 1, n_groups, n_probes)
        ``tr(Z_b^T X~ F)`` per probe of row ``t`` and group ``b``, over the
        sources of ``b`` older than lag 0 (``SV``: the gradient points).
    lag0 : ndarray of shape (T + 1, 2)
        The exact ``A[t, t - 1]`` and ``A_sources[t, t - 1]``.
    """
    n = design.n_samples
    T = coef_path.shape[1] - 1
    m, G = int(n_probes), int(group_sources)
    dtype = np.dtype(chain_dtype)
    if iteration.uses_heavy_ball(T):
        raise ValueError(
            f"Grouped probes need an iteration without a heavy ball ({iteration.name}); "
            "use probe_scheme='shared'.")
    n_groups = max(1, -(-T // G))
    SA = np.zeros((T + 1, n_groups, m))
    SV = np.zeros_like(SA)
    lag0 = np.zeros((T + 1, 2))
    masks, order, prefix = chain_order(coef_path)
    width = int(prefix[1])
    if width == 0:  # every iterate after x^0 is zero: nothing depends on y
        return SA, SV, lag0
    Xs = design_columns(design, order[:width], dtype)
    n_cols = m * n_groups
    n_blocks = 3 + iteration.extrapolates(T)
    check_memory(n_blocks * width * n_cols * dtype.itemsize,
                 f"the grouped Jacobian chains ({width} x {n_cols}, {n_blocks} blocks)",
                 "Use fewer probes (n_probes) or fewer iterations. ")
    W = _probe_images(Xs, n, m, n_groups, prefix, G, rng, draw)
    masks_s = np.asfortranarray(masks[order[:width]], dtype=dtype)
    chains = ForwardChains(design, iteration, coef_path, Xs, order, prefix, masks_s, n_cols)
    colnorm = np.einsum("ij,ij->j", Xs, Xs)  # ||x~_j||^2: the exact lag 0
    chains.run(GroupedProbes(m, G, W, SA, SV, lag0, colnorm), 0, T, group_columns(m, T, G),
               verbose=verbose)
    return SA, SV, lag0


def rows_from_block_sums(SA, SV, lag0, G=GROUP_SOURCES):
    """The memory matrices from block sums (``SA``, ``SV``: (T + 1, groups),
    already averaged over the probes): entry ``(t, s)``, ``s <= t - 2``, is
    the block sum of ``s``'s group over the number of its sources older than
    lag 0 in row ``t``; ``(t, t - 1)`` the exact lag 0."""
    T1 = SA.shape[0]
    t = np.arange(T1)[:, None]
    s = np.arange(T1)[None, :]
    b = np.broadcast_to(np.minimum(s // G, SA.shape[1] - 1), (T1, T1))
    n_in = np.clip(np.minimum((s // G + 1) * G, t - 1) - (s // G) * G, 1, None)
    inside = s < t - 1
    A = np.where(inside, np.take_along_axis(SA, b, 1) / n_in, 0.0)
    Av = np.where(inside, np.take_along_axis(SV, b, 1) / n_in, 0.0)
    k = np.arange(1, T1)
    A[k, k - 1] = lag0[1:, 0]
    Av[k, k - 1] = lag0[1:, 1]
    return A, Av


def grouped_memory_matrix(design, iteration, coef_path, n_probes, rng, chain_dtype, verbose=0,
                          state=None, keep_state=False, group_sources=GROUP_SOURCES):
    """Hutchinson memory matrices of a proximal trajectory with ``n_probes``
    probes shared by each group of ``group_sources`` consecutive sources
    (:func:`grouped_block_sums`, split by :func:`rows_from_block_sums`).

    ``state`` and ``keep_state`` are accepted for the engine's interface but
    no state is kept or continued: a warm start recomputes the estimate of
    the whole path (the same numbers: the prefix property).

    Returns
    -------
    A, A_sources : ndarrays of shape (T + 1, T + 1)
    state : None
    """
    SA, SV, lag0 = grouped_block_sums(design, iteration, coef_path, n_probes, rng, chain_dtype,
                                      verbose, group_sources)
    A, Av = rows_from_block_sums(SA.mean(axis=2), SV.mean(axis=2), lag0, group_sources)
    return A, Av, None
