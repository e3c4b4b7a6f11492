"""The pooled probes: one chain of probes shared by every source.

The memory matrix of Bellec & Tan (2024), ``A[t, s] = tr(X~ dx^t / dy^(s))``,
is estimated from its rows' sums. Every source injects the same images
``g X~^T Z`` of ``m`` Rademacher probes ``Z`` into one chain of ``m``
columns, which then holds ``F_t = sum_s J_{t,s} X~^T Z``; its readout
``(1/m) tr(Z^T X~ F_t)`` is Hutchinson's estimate of the row's sum. A heavy
ball takes the shared probes instead.

* ``m`` columns a step whatever the path's length; a warm start continues
  the chain.
* Lag 0 is exact: the readout of step ``t``'s own injection is subtracted
  and ``A[t, t - 1] = g sum_{j in S_t} ||x~_j||^2`` (through the step's
  tangent) takes its place.
* The other entries of a row split its sum by a *template*
  (:func:`rows_from_sums`): the memory matrix of the iteration's linear
  counterpart on the spectrum of the union of the path's supports,
  scaled to the row's sum (a bias where the supports shrink far below
  their union: FISTA's first steps on a wide design).
* A row reads only its own step: a ``k``-step prefix's row sums are the
  whole path's first ``k + 1``.

Why it pays: the per-source traces oscillate (FISTA) or decay smoothly
(ISTA) with the lag, so a row sum's noise grows far slower than the number
of sources (``docs/internals.rst``).
"""

import copy
from dataclasses import dataclass

import numpy as np
from scipy.linalg.blas import dtrmm
from sklearn.utils import check_random_state

from ..._trace import taken
from ...linalg._linalg import lanczos, quadrature
from ._probes import (
    SAMPLE_GROUPS_NOISE_FACTOR,
    draw_probes,
    jackknife_probes,
    probe_images,
    sample_groups,
)
from ._propagate import (
    ChainProbes,
    design_columns,
    gram_to_keep,
    kept_order,
    primal_product,
)
from ._spectral import (
    counterpart_memory_matrix,
    counterpart_response,
    counterpart_responses,
    significant_nodes,
)
from ._start import ChainStart
from ._state import PooledState, SavedChains


class PooledProbes(ChainProbes):
    """One chain of ``m`` columns; the first step writes its injection, the later
    ones add theirs (:meth:`before_tangent`). ``SA``, ``SV`` (T + 1, 1, m): the
    per-probe row sums without lag 0; ``lag0`` (T + 1, 2): the exact lag 0;
    ``colnorm``: the squared norms of the chains' columns of ``X~``. Two
    columns beside the chain (:attr:`extra`) carry the lag 0 through the
    step's own tangent (:meth:`_lag0`)."""

    label = "traces (pooled probes)"
    extra = 2

    def __init__(self, m, W, SA, SV, lag0, colnorm, by_samples=None):
        self.m, self.W, self.colnorm = m, W, colnorm
        self.SA, self.SV, self.lag0 = SA, SV, lag0
        # (W_samples, SA_samples, SV_samples): one probe's readouts by groups of samples
        self.by_samples = by_samples
        self._fixed = None  # (inj, W inj, z0) on all the rows, formed once

    def _step_blocks(self, chains):
        """The injection ``g W``, ``W * g W`` and the lag 0's tangent input
        ``[g colnorm, 1]`` on all the chain's rows, formed once (a step reads
        their first ``rows`` rows: the same values)."""
        if self._fixed is None:
            inj = self.W * chains.dtype.type(chains.g)
            z0 = np.empty((self.W.shape[0], 2), dtype=chains.dtype, order="F")
            z0[:, 0] = chains.g * self.colnorm
            z0[:, 1] = 1.0
            self._fixed = inj, np.multiply(self.W, inj), z0
        return self._fixed

    def open_columns(self, k):
        return (0 if k == 1 else self.m), self.m

    def injection(self, k, rows):
        W = self.W[:rows]
        return W if k == 1 else W[:, :0]  # added to the chain in before_tangent

    def before_tangent(self, k, chains, rows, c_old, c_new):
        dv, dx1 = chains.dv, chains.dx1
        if chains.dv_rows < rows and dx1 is not dv:
            dx1[chains.dv_rows:rows, :c_new] = 0
        m, z0 = self.m, self._step_blocks(chains)[2]
        if k == 1:  # the chain starts from zero
            dv[:, :m] = 0
            if dx1 is not dv:
                dx1[:, :m] = 0
        else:
            chains.dz[:rows, :m] += self._fixed[0][:rows]
        # the lag 0's columns: [g colnorm, 1] from a zero state
        chains.dz[:rows, m:m + 2] = z0[:rows]
        dv[:rows, m:m + 2] = 0
        if dx1 is not dv:
            dx1[:rows, m:m + 2] = 0

    def _lag0(self, chains, rows):
        """Step ``k``'s injection alone through its tangent: the readout per probe
        (to subtract) and the exact lag-0 entries. From a zero state the
        tangent is diagonal (the prox's mask, the step and the extrapolation's
        coefficients, per coordinate): its diagonal ``d``, the tangent of a
        column of ones (the chain's extra columns: ``[g colnorm, 1]``
        advanced with it), gives the readouts ``sum_r W[r, c] d[r] inj[r,
        c]`` without the tangent of the ``m`` columns. Returns ``(lag0,
        (readouts of dx, of dv), by samples or None)``."""
        m = self.m
        dx0 = chains.dz[:rows, m:m + 2]
        dv0 = dx0 if chains.dv is chains.dx1 else chains.dv[:rows, m:m + 2]
        same = dv0 is dx0  # no extrapolation: each read once
        lag_x = float(dx0[:, 0].sum())
        lag0 = lag_x, (lag_x if same else float(dv0[:, 0].sum()))
        dx, dv = dx0[:, 1], dv0[:, 1]
        samples = None
        if self.by_samples is not None:
            Ws, inj = self.by_samples[0][:rows], self._fixed[0][:rows, 0]
            samples = Ws.T @ (dx * inj), Ws.T @ (dv * inj)
        W_inj = self._fixed[1][:rows]  # W[r, c] inj[r, c]
        read_x = W_inj.T @ dx
        return lag0, (read_x, read_x if same else W_inj.T @ dv), samples

    def _sums(self, W, block, c_new):
        return np.einsum("rc,rc->c", W[:, :c_new], block).reshape(c_new // self.m, self.m)

    def read_step(self, k, chains, rows, c_new):
        W = self.W[:rows]
        self.lag0[k], l0, l0_samples = self._lag0(chains, rows)
        self.SA[k, :1] = self._sums(W, chains.dz[:rows, :c_new], c_new)
        self.SA[k, 0] -= l0[0]
        if chains.extrapolates:
            self.SV[k, :1] = self._sums(W, chains.dv[:rows, :c_new], c_new)
            self.SV[k, 0] -= l0[1]
        else:
            self.SV[k] = self.SA[k]
        if self.by_samples is not None:
            Ws, SA_samples, SV_samples = self.by_samples
            SA_samples[k] = Ws[:rows].T @ chains.dz[:rows, 0] - l0_samples[0]
            if chains.extrapolates:
                SV_samples[k] = Ws[:rows].T @ chains.dv[:rows, 0] - l0_samples[1]
            else:
                SV_samples[k] = SA_samples[k]

    def read_tail(self, k, rows, rows_prev, tail_v):
        c_new = tail_v.shape[1]
        self.SV[k, :c_new // self.m] += self._sums(self.W[rows:rows_prev], tail_v, c_new)
        if self.by_samples is not None:
            self.by_samples[2][k] += self.by_samples[0][rows:rows_prev].T @ tail_v[:, 0]


def _pooled_images(Xs, coords, Z, cached=None):
    """``(W, colnorm, images)``: ``X~^T Z`` of the chains' columns ``coords``
    (Fortran order) and their squared norms, reusing a continued state's
    ``cached`` images; ``images`` (coordinates sorted) for the next one."""
    width, m = Xs.shape[1], Z.shape[1]
    W = np.empty((width, m), dtype=Xs.dtype, order="F")
    colnorm = np.empty(width, dtype=Xs.dtype)
    new = np.arange(width)
    if cached is not None and cached[1].shape[1] == m and cached[1].dtype == Xs.dtype:
        known, known_W, known_norm = cached
        at = np.minimum(np.searchsorted(known, coords), max(known.size - 1, 0))
        found = (known[at] == coords) if known.size else np.zeros(width, dtype=bool)
        W[found], colnorm[found] = known_W[at[found]], known_norm[at[found]]
        new = np.flatnonzero(~found)
    if new.size:
        Xn = Xs if new.size == width else Xs[:, new]
        W[new] = probe_images(Xn, coords[new], Z, Xs.dtype)
        colnorm[new] = np.einsum("ij,ij->j", Xn, Xn)
    by_coord = np.argsort(coords, kind="stable")
    return W, colnorm, (coords[by_coord], W[by_coord], colnorm[by_coord])


def sample_group_probes(Z, n_groups):
    """A probe ``Z`` (n, 1) beside its ``n_groups`` groups of samples: column
    ``1 + g`` the signs of ``Z`` on group ``g``, zero elsewhere."""
    n = Z.shape[0]
    out = np.zeros((n, 1 + n_groups), dtype=Z.dtype)
    out[:, 0] = Z[:, 0]
    out[np.arange(n), 1 + sample_groups(n, n_groups)] = Z[:, 0]
    return out


def _replicate_sums(state, n_groups):
    """The rows' sums ``(SA, SV)`` (T + 1, 1) of the pooled chain's
    delete-one-group jackknife replicates (a generator) and the factor on its
    standard error: without each group of probes (factor 1), or for a chain
    of one probe without each group of samples, scaled to all the samples
    (factor :data:`~skacv.estimates.risk._probes.SAMPLE_GROUPS_NOISE_FACTOR`)."""
    if state.by_samples is None:
        return (((state.SA[..., kept].mean(axis=2), state.SV[..., kept].mean(axis=2))
                 for kept in jackknife_probes(state.m, n_groups)), 1.0)
    SA, SV = state.SA[:, :, 0], state.SV[:, :, 0]  # (T + 1, 1): one probe, one group
    by_A, by_V = state.by_samples
    H = by_A.shape[1]
    return ((((SA - by_A[:, [g]]) * (H / (H - 1)), (SV - by_V[:, [g]]) * (H / (H - 1)))
             for g in range(H)), SAMPLE_GROUPS_NOISE_FACTOR)


def jackknife_matrices(state, template, n_groups, sources=True):
    """The memory matrices of the jackknife replicates of
    :func:`_replicate_sums` and the factor on the standard error.
    ``sources``: as :func:`rows_from_sums`; the matrices' strictly lower
    triangles only (``lower``: what the replicates' readouts read), formed
    one replicate at a time (a generator: each read before the next)."""
    template = split_template(template)
    sums, factor = _replicate_sums(state, n_groups)
    return ((rows_from_sums(SA, SV, state.lag0, template, sources, lower=True)
             for SA, SV in sums), factor)


def jackknife_sums(state, n_groups):
    """The rows' sums of ``A`` of the replicates of :func:`_replicate_sums`
    minus the state's own, shape (replicates, T + 1), and the factor on the
    standard error: what the replicates' matrices differ by, through
    :func:`rows_from_sums`."""
    full = state.SA.mean(axis=2)[:, 0]
    sums, factor = _replicate_sums(state, n_groups)
    return np.array([SA[:, 0] - full for SA, _ in sums]), factor


def template_rows_times(template, W):
    """``Q W`` for ``Q[t, s] = dA[t, s] / dS_t`` of :func:`rows_from_sums` (its
    entries ``s < t - 1`` are linear in the row's sum ``S_t``): the template's
    row over its sum, or ``1 / (t - 1)`` (the even split) where that sum is
    zero. The template's strictly lower triangle times ``W`` (``trmm``), its
    rows scaled; an even row sums ``W``'s rows ``s < t - 1``."""
    T1 = W.shape[0]
    W = np.asfortranarray(W, dtype=np.float64)
    even = np.zeros_like(W)
    even[2:] = np.cumsum(W, axis=0)[:-2] / np.arange(1, T1 - 1)[:, None]
    if template is None:
        return even
    low, TB = split_template(template)[0]
    split = TB * TB > 0
    out = dtrmm(1.0, low.T, W, side=0, lower=0, trans_a=1)  # low @ W, low C-ordered
    out /= np.where(split, TB, 1.0)[:, None]
    out[~split] = even[~split]
    return out


@dataclass
class PooledRun:
    """What :func:`run_pooled_chain` computed: ``SA``, ``SV`` (T + 1, 1, m) the
    per-probe row sums without lag 0; ``lag0`` (T + 1, 2); ``columns`` the
    chains' columns of ``X~`` (``None``: empty) and ``coords`` their features;
    ``template_seed`` (drawn after the chains' probes); ``state`` kept with
    ``keep_state``, ``continued`` the state continued."""

    SA: np.ndarray
    SV: np.ndarray
    lag0: np.ndarray
    columns: np.ndarray | None = None
    coords: np.ndarray | None = None
    template_seed: int | None = None
    state: PooledState | None = None
    continued: PooledState | None = None
    by_samples: tuple | None = None


def run_pooled_chain(design, iteration, coef_path, n_probes, rng, chain_dtype, verbose=0,
                     draw=None, state=None, keep_state=False, gram=None, by_samples=True,
                     own_rng=False, columns=None, probes=None):
    """The pooled chain and what the rows' split needs (:class:`PooledRun`).

    ``state`` / ``keep_state``: continue a shorter prefix's
    :class:`~skacv.estimates.risk._state.PooledState` and keep the new one;
    ``gram``, ``columns``: a :class:`~skacv.estimates.risk._state.GramCache`
    and a state's ``(coords, Xs)`` of the same path, without a state;
    ``by_samples``: a chain of one probe also reads its traces by groups
    of samples (for :func:`jackknife_matrices`); ``own_rng``: ``rng`` was made
    for this call, kept without a copy; ``draw(n, m) -> Z`` replaces the
    Rademacher draw (tests: the identity gives exact row sums); ``probes``:
    the exact :class:`~skacv.estimates.risk._probes.RangeProbes` instead
    (``n_probes`` their number; nothing drawn).
    """
    m = int(n_probes)
    start = ChainStart(design, iteration, coef_path, state, PooledState, m, chain_dtype,
                       exact=probes is not None)
    n, T, dtype, state, k0 = start.n, start.T, start.dtype, start.state, start.k0
    run = PooledRun(np.zeros((T + 1, 1, m)), np.zeros((T + 1, 1, m)), np.zeros((T + 1, 2)),
                    continued=state)
    SA, SV, lag0 = run.SA, run.SV, run.lag0
    by_samples = (by_samples and m == 1 and probes is None
                  and (state is None or state.by_samples is not None))
    if by_samples:
        groups = design.statistics.noise_groups
        run.by_samples = (np.zeros((T + 1, groups)), np.zeros((T + 1, groups)))
    Z, after = None, rng
    if state is not None:
        SA[:k0 + 1], SV[:k0 + 1], lag0[:k0 + 1] = state.SA, state.SV, state.lag0
        if by_samples:
            run.by_samples[0][:k0 + 1], run.by_samples[1][:k0 + 1] = state.by_samples
        # the state's generator, never advanced in place: copied before a draw
        Z, after = state.Z, state.rng
        run.template_seed = state.template_seed
    if Z is None:
        Z = (probes if probes is not None else draw_probes(after, (n, m), np.int8)
             if draw is None else draw(n, m))
    # the state's generator, not drawn from, or one made for this call: no copy kept
    kept = (state is not None and after is state.rng) or (state is None and own_rng)
    if int(start.prefix[1]) == 0:  # every iterate after x^0 is zero: nothing depends on y
        if keep_state:
            run.state = _pooled_state(T, m, dtype, Z, after, run, SavedChains(), None,
                                      kept=kept)
        return run
    order, prefix, Xs = _chain_columns(design, start.order, start.prefix, dtype, state, k0,
                                       columns)
    width = Xs.shape[1]
    chains = start.chains(Xs, m + PooledProbes.extra, 3 + iteration.extrapolates(T),
                          order=order, prefix=prefix)
    # the images of the probe's groups of samples beside its own: (width, 1 + groups)
    probes = sample_group_probes(Z, design.statistics.noise_groups) if by_samples else Z
    W, colnorm, images = _pooled_images(Xs, order[:width], probes,
                                        None if state is None else state.images)
    W, W_samples = (W[:, :m], W[:, m:]) if by_samples else (W, None)
    if run.template_seed is None and after is not None:  # drawn once, after Z
        if kept and state is not None:
            after, kept = copy.deepcopy(after), False
        run.template_seed = int(after.randint(2**31 - 1))
    reads = PooledProbes(m, W, SA, SV, lag0, colnorm,
                         None if W_samples is None else (W_samples, *run.by_samples))
    start.run(chains, reads, T, np.full(T + 1, m), verbose, gram=gram)
    run.columns, run.coords = Xs, order[:width]
    if keep_state:
        cached = gram_to_keep(chains.gram, order, -chains.g, chains.policy,
                              None if state is None else state.gram)
        run.state = _pooled_state(T, m, dtype, Z, after, run, chains.saved(m), cached, images,
                                  kept)
        run.state.columns = (order[:width], Xs)
    return run


def _chain_columns(design, order, prefix, dtype, state, k0, columns=None):
    """``(order, prefix, Xs)``: the restricted copy of ``X~`` a state kept where
    it covers the supports (:func:`~skacv.estimates.risk._propagate.kept_order`),
    or ``columns`` (a state's, without it) where they are the very gather this
    path makes (same features in the same order, C order: the same bytes);
    else a new gather (the kept copy dropped first, its memory reusable)."""
    width = int(prefix[1])
    if state is None and columns is not None:
        coords, Xs = columns
        if (Xs.dtype == dtype and Xs.shape[1] == width and Xs.flags.c_contiguous
                and np.array_equal(coords, order[:width])):
            taken("chain_columns_reused")
            return order, prefix, Xs
    kept = None if state is None else state.columns
    if kept is not None:
        coords, Xs = kept
        layout = (kept_order(order, prefix, coords, k0, design.policy) if Xs.dtype == dtype
                  else None)
        if layout is not None:
            order, prefix = layout
            return order, prefix, Xs[:, :int(prefix[1])]
        state.columns = None  # dropped before the gather: its memory can be reused
        del kept, coords, Xs
    return order, prefix, design_columns(design, order[:width], dtype)


def _pooled_state(k, m, dtype, Z, rng, run, chains, gram, images=None, kept=False):
    """The :class:`~skacv.estimates.risk._state.PooledState` after step ``k``;
    ``kept``: ``rng`` is kept as it is (a state's generator is only ever
    copied, never drawn from), else a copy."""
    by_samples = None if run.by_samples is None else tuple(a.copy() for a in run.by_samples)
    rng = rng if kept else copy.deepcopy(rng)
    return PooledState(k=k, m=m, dtype=dtype, Z=Z, rng=rng, SA=run.SA.copy(),
                       SV=run.SV.copy(), lag0=run.lag0.copy(), chains=chains, gram=gram,
                       template_seed=run.template_seed, images=images, by_samples=by_samples)


class SplitTemplate(tuple):
    """:func:`split_template`'s ``((T_low, TB), ...)``."""


def split_template(template, own=False):
    """The template's parts that :func:`rows_from_sums` reads, formed once for
    the readouts of one path (its own and the jackknife's): per matrix the
    entries ``s < t - 1`` and their rows' sums. ``own``: the template's
    matrices (strictly lower triangular, as :func:`template_matrices` makes
    them) are overwritten instead of copied."""
    if template is None or isinstance(template, SplitTemplate):
        return template
    parts = []
    for M in template:
        if parts and M is template[0]:  # A_sources is A (no extrapolation)
            parts.append(parts[0])
            continue
        if own:  # zero the lag 0: s < t - 1 is what remains
            low = M
            k = np.arange(1, M.shape[0])
            low[k, k - 1] = 0.0
        else:
            low = np.tril(M, -2)  # s < t - 1
        parts.append((low, np.add.reduceat(low, [0], axis=1)[:, 0]))
    return SplitTemplate(parts)


def rows_from_sums(SA, SV, lag0, template=None, sources=True, lower=False):
    """The memory matrices from the rows' sums ``SA``, ``SV`` (averaged over the
    probes); ``(t, t - 1)`` is the exact lag 0.

    Entry ``(t, s)``, ``s <= t - 2``, splits the row's sum: evenly without a
    template; with ``template=(T_A, T_sources)`` (:func:`template_matrices`,
    or its :func:`split_template`) row ``t`` is the template's row scaled by
    ``c_t = S_t / sum T[t, .]``, the remainder spread evenly. The sums are
    kept exactly; the template carries a peak in the lag that the average
    would flatten. ``sources=False``: ``A_sources`` is ``None`` (not read);
    ``lower``: the entries ``s >= t`` are left unspecified (for readers of the
    strictly lower triangle only: one pass fewer).
    """
    SA, SV = np.reshape(SA, -1), np.reshape(SV, -1)
    T1 = SA.shape[0]
    n_in = np.maximum(np.arange(T1) - 1, 1)  # sources older than lag 0 in row t
    below = None if lower else np.tri(T1, T1, -2, dtype=bool)  # s < t - 1
    k = np.arange(1, T1)
    template = split_template(template)
    out = [None, None]
    for i, S in enumerate((SA, SV)[:1 + bool(sources)]):
        low, TB = (np.zeros((T1, T1)), np.zeros(T1)) if template is None else template[i]
        den = TB * TB
        c = TB * S / np.where(den > 0, den, 1.0)
        rest = (S - c * TB) / n_in
        M = np.multiply(low, c[:, None])
        # the row's remainder, evenly (rounding): each entry s < t - 1 of row t
        # plus rest[t] (zero on many rows), the others untouched
        np.add(M, rest[:, None], out=M, where=True if lower else below)
        M[k, k - 1] = lag0[1:, i]
        out[i] = M
    return out[0], out[1]


def template_matrices(iteration, n_iter, nodes, resume=None, keep=False):
    """The split's template: the memory matrices ``(T_A, T_sources)`` (each
    (n_iter + 1, n_iter + 1)) of ``iteration`` with its prox replaced by the
    identity, on ``nodes`` (the nodes and weights of :func:`template_nodes`)
    of the spectrum of ``X~_U^T X~_U / n_eff``, ``U`` the union of the
    path's supports (it moved ``risk_path_`` less than the final support's:
    ``docs/internals.rst``). ``keep``: also the recursion
    (:class:`~skacv.estimates.risk._spectral.CounterpartChain`, ``None`` on no
    nodes) that ``resume`` continues, bit for bit."""
    T = int(n_iter)
    if nodes[0].size == 0:
        out = np.zeros((T + 1, T + 1)), np.zeros((T + 1, T + 1))
        return (*out, None) if keep else out
    return counterpart_memory_matrix(iteration, nodes[0], T, weights=nodes[1], resume=resume,
                                     keep=keep)


def template_lags(n_iter, statistics):
    """The lags the template's quadrature is checked on: at least
    ``template_check_lags`` (the nodes serve the later stages of a search)."""
    return max(int(n_iter), statistics.template_check_lags)


def template_nodes(design, Xs, rng, iteration, n_iter, coords=None, hint=None):
    """Nodes and weights (``None``: unit) of ``Xs^T Xs / n_eff``: its eigenvalues
    up to ``template_exact_support`` columns, else Lanczos' Gauss quadrature
    of ``template_probes`` probes from ``rng``, to the first of
    ``template_check_depths`` where the linear counterpart's response has
    converged (``template_rtol``); ``coords``: the probes follow the features'
    order (``docs/speed_policy.rst``). ``hint``: the depth a shorter path's
    nodes took: the checks up to it read one chain (the same depths)."""
    width = Xs.shape[1]
    if width == 0:
        return np.zeros(0), None
    inv_n = 1.0 / design.n_eff
    stats = design.statistics
    depths, n_probes = stats.template_check_depths, stats.template_probes
    if width <= stats.template_exact_support:
        # the nonzero spectrum, from the smaller Gram matrix (the larger one's
        # other eigenvalues are zero: nothing in the template)
        Xd = np.asarray(Xs, dtype=np.float64)
        gram = Xd.T @ Xd if width <= Xd.shape[0] else Xd @ Xd.T
        return significant_nodes(np.clip(np.linalg.eigvalsh(gram * inv_n), 0.0, None), None, stats)
    Z = draw_probes(check_random_state(rng), (width, n_probes)).astype(Xs.dtype)
    if coords is not None:  # row i of Z goes to the i-th smallest feature
        Z = Z[np.argsort(np.argsort(coords, kind="stable"))]

    def gram_times(Q):  # Xs^T Xs Q / n_eff, one read of Xs (blocks of rows)
        out = np.empty((width, Q.shape[1]), dtype=Xs.dtype)
        primal_product(Xs, width, width, Q.astype(Xs.dtype), out, Xs.dtype.type(inv_n),
                       design.policy)
        return out

    lags, seen = template_lags(n_iter, stats), []  # (depth, nodes, response) at the checks

    def settled():
        if len(seen) < 2:
            return False
        new, old = seen[-1][2], seen[-2][2]
        return np.abs(new - old).max() <= stats.template_rtol * max(np.abs(new).max(), 1e-300)

    def converged(state):
        if state.j not in depths:
            return False
        lam, w = quadrature(state)
        seen.append((state.j, (lam, w), counterpart_response(iteration, lam, lags, w)))
        return settled()

    top, state = min(depths[-1], width), None
    ahead = [d for d in depths if d <= min(hint or 0, top)]
    if len(ahead) > 1:  # the hint's depths in one go, checked in turn as below
        state = lanczos(gram_times, Z, ahead[-1])
        ahead = [d for d in ahead if d <= state.j]
        quads = [quadrature(state, d) for d in ahead]
        for d, q, r in zip(ahead, quads, counterpart_responses(iteration, quads, lags),
                           strict=True):
            seen.append((d, q, r))
            if settled():
                taken("template_quadrature", depth=d)
                return significant_nodes(q[0], q[1] / n_probes, stats)
    if state is None or (state.j < top and not state.exhausted):
        state = lanczos(gram_times, Z, top, until=converged, resume=state)
    taken("template_quadrature", depth=state.j)
    lam, w = seen[-1][1] if seen and seen[-1][0] == state.j else quadrature(state)
    return significant_nodes(lam, w / n_probes, stats)


def pooled_memory_matrix(design, iteration, coef_path, n_probes, rng, chain_dtype, verbose=0,
                         state=None, keep_state=False, own_rng=False, probes=None):
    """``(A, A_sources, state)`` of a proximal trajectory by the pooled probes
    (``A``, ``A_sources`` of shape (T + 1, T + 1); ``state``: a
    :class:`~skacv.estimates.risk._state.PooledState` with ``keep_state``,
    else ``None``):
    :func:`run_pooled_chain`'s row sums (``probes``: exact, as there) split by
    :func:`rows_from_sums`.
    ``state`` continues the chain of a shorter prefix of the same
    trajectory, which keeps the template's nodes while the union of the
    supports is as wide as the nodes' or wider by at most the statistical
    policy's ``template_reuse_growth`` of their columns."""
    T = coef_path.shape[1] - 1
    run = run_pooled_chain(design, iteration, coef_path, n_probes, rng, chain_dtype, verbose,
                           state=state, keep_state=keep_state, own_rng=own_rng, probes=probes)
    if run.columns is None:
        return np.zeros((T + 1, T + 1)), np.zeros((T + 1, T + 1)), run.state
    # the union of the supports, hence the template's nodes, often stops
    # growing early: a continued chain reuses them while it is as wide (a
    # longer path's union contains the shorter one's: the same features),
    # or wider by at most template_reuse_growth of the nodes' columns: k
    # more columns move the spectral measure by at most k / width
    # (interlacing), below the spread of the nodes' own probes
    width = run.columns.shape[1]
    nodes = resume = None
    kept = run.continued
    if (kept is not None and (kept.nodes_lags >= T or kept.nodes[1] is None)
            and 0 <= width - kept.nodes_width
            <= design.statistics.template_reuse_growth * kept.nodes_width):
        # the same nodes: the template's recursion continues too
        nodes, resume, nodes_width = kept.nodes, kept.template, kept.nodes_width
        taken("template_reused", grown=width - kept.nodes_width)
    if nodes is None:
        nodes_width = width
        # a kept chain's nodes (of fewer lags) took this depth
        hint = (None if kept is None or kept.nodes is None or kept.nodes[1] is None
                else kept.nodes[0].size // design.statistics.template_probes)
        nodes = template_nodes(design, run.columns, run.template_seed or 0, iteration, T,
                               run.coords, hint)
    *template, chain = template_matrices(iteration, T, nodes, resume, keep=True)
    template = split_template(template, own=True)
    if run.state is not None:
        run.state.nodes, run.state.nodes_width = nodes, nodes_width
        run.state.nodes_lags = template_lags(T, design.statistics)
        run.state.template, run.state.split = chain, template
    # without extrapolation the gradient points are the outputs: A_sources is A
    sources = iteration.extrapolates(T)
    A, Av = rows_from_sums(run.SA.mean(axis=2), run.SV.mean(axis=2), run.lag0, template,
                           sources)
    return A, (Av if sources else A), run.state


def pooled_matrices(state, template, probes=slice(None), sources=True):
    """The memory matrices of a pooled state's probes ``probes`` (``sources``:
    as :func:`rows_from_sums`)."""
    return rows_from_sums(state.SA[..., probes].mean(axis=2),
                          state.SV[..., probes].mean(axis=2), state.lag0, template, sources)


def _merge_saved(a, b):
    """Two :class:`SavedChains` of the same path, their columns side by side,
    on the union of their coordinates (a continued chain's rows follow the
    columns it kept, a new chain's its own order: a coordinate one of them
    does not hold has a zero tangent there)."""
    out = SavedChains()
    for name in ("dv", "dx1", "dx2"):
        ca, va = a.get(name)
        cb, vb = b.get(name)
        if ca is None or cb is None:
            continue
        if np.array_equal(ca, cb):
            setattr(out, name, (ca, np.hstack([va, vb])))
            continue
        coords = np.union1d(ca, cb)
        values = np.zeros((coords.size, va.shape[1] + vb.shape[1]),
                          dtype=np.result_type(va, vb))
        values[np.searchsorted(coords, ca), :va.shape[1]] = va
        values[np.searchsorted(coords, cb), va.shape[1]:] = vb
        setattr(out, name, (coords, values))
    return out


def extend_pooled(design, iteration, coef_path, state, extra, verbose=0):
    """``state`` with ``extra`` more probes: a chain of new probes from the
    state's generator over the whole path, its columns appended. The chain is
    linear in its probes: the state of a chain that had them all from the
    start."""
    rng = copy.deepcopy(state.rng)
    run = run_pooled_chain(design, iteration, coef_path, extra, rng, state.dtype, verbose,
                           keep_state=True, gram=state.gram, by_samples=False,
                           own_rng=True, columns=state.columns)  # its own copy
    new = run.state
    images = state.images
    if images is not None and state.by_samples is not None:  # without its groups of samples
        images = images[0], images[1][:, :state.m], images[2]
    return PooledState(
        k=state.k, m=state.m + extra, dtype=state.dtype, Z=np.hstack([state.Z, new.Z]),
        rng=new.rng, SA=np.concatenate([state.SA, new.SA], axis=2),
        SV=np.concatenate([state.SV, new.SV], axis=2), lag0=state.lag0,
        chains=_merge_saved(state.chains, new.chains), gram=state.gram or new.gram,
        nodes=state.nodes, nodes_width=state.nodes_width, nodes_lags=state.nodes_lags,
        template=state.template,
        template_seed=state.template_seed,
        images=_merge_images(images, new.images))


def _merge_images(a, b):
    """Two states' ``images``, their probes side by side (``None`` unless on the
    same columns)."""
    if a is None or b is None or not np.array_equal(a[0], b[0]):
        return None
    return a[0], np.hstack([a[1], b[1]]), a[2]
