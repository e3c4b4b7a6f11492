"""Memory matrices of proximal iterations with the probes shared by every source.

For ISTA/FISTA (any iteration whose prox Jacobian is a 0/1 mask) every
source ``s`` (the response entering the gradient at ``v^s``) is propagated
with the same ``m`` probes: the forward chains of
:class:`~skacv.estimates.risk._propagate.ForwardChains` (one block, the
products restricted to the supports), read out by :class:`SharedProbes`.
Traces use Hutchinson probes, or identity probes for exact traces
(``n_probes=None``)."""

import numpy as np

from ...linalg._linalg import block_trace as _block_trace
from ._probes import draw_probes
from ._propagate import ChainProbes, gram_to_keep
from ._start import ChainStart
from ._state import ChainState, SavedChains


class SharedProbes(ChainProbes):
    """The hooks of the shared probes: source ``s`` holds columns ``s m ..
    (s + 1) m``; it injects ``probes`` (``X~^T Z``, or the identity probes),
    and the traces read ``trace_wt`` (``(X~^T Z)^T``) chunk by chunk."""

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


def _trace_probes(Xs, Z, n, dtype):
    """``(probes, trace_wt, m, scale)``: the injections ``X~^T Z`` (width, m)
    and the readout's ``(X~^T Z)^T``; exact traces (``Z`` None): identity
    probes on the smaller side."""
    width = Xs.shape[1]
    if Z is not None:
        trace_wt = Z.T @ Xs  # (X~^T Z)^T, read by the traces
        return trace_wt.T, trace_wt, Z.shape[1], 1.0 / Z.shape[1]
    if n <= width:
        return Xs.T, Xs, n, 1.0  # X~^T Z with Z = I_n
    # inject e_j, trace with X~^T X~
    return np.eye(width, dtype=dtype), (Xs.T @ Xs).astype(dtype), width, 1.0


def masked_memory_matrix(design, iteration, coef_path, n_probes, rng, chain_dtype, verbose=0,
                         state=None, keep_state=False, probes=None):
    """Hutchinson (or exact) memory matrices of a proximal trajectory.

    For source ``s`` the tangent of ``x^k`` lives on the support of ``x^k``.
    All sources are propagated together as one block
    (:class:`~skacv.estimates.risk._propagate.ForwardChains`), with products
    by ``X~`` restricted to the columns of the supports.

    ``state`` (returned with ``keep_state=True``, Hutchinson probes only, a
    :class:`~skacv.estimates.risk._state.ChainState`) holds the chains after
    the last step of a shorter prefix of the same trajectory: the
    computation continues from there, so that extending a path by warm
    start costs only the new rows of the memory matrices. ``probes``: the
    Rademacher probes to use (default: drawn from ``rng``).

    Returns
    -------
    A, A_sources : ndarrays of shape (T + 1, T + 1)
    state : ChainState or None
    """
    start = ChainStart(design, iteration, coef_path, state, ChainState, n_probes, chain_dtype)
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
    hb = iteration.uses_heavy_ball(T)
    Xs = start.columns(width)
    probes, trace_wt, m, scale = _trace_probes(Xs, Z, n, dtype)
    chains = start.chains(Xs, m * T, 2 + iteration.extrapolates(T) + hb, heavy_ball=hb)
    columns = m * np.maximum(np.arange(T + 1) - 1, 0)  # step k advances sources 0..k-1
    start.run(chains, SharedProbes(m, probes, trace_wt, scale, A, Av), T, columns, verbose)
    if not keep_state:
        return A, Av, None
    # chains after step T, in coordinates (see the loop's invariants)
    saved = chains.saved(m * T) if k0 < T else state.chains
    gram = gram_to_keep(chains.gram, start.order, -chains.g, chains.policy,
                        None if state is None else state.gram)
    return A, Av, _chain_state(T, Z, dtype, A, Av, saved, gram)


def _chain_state(k, Z, dtype, A, Av, chains, gram=None):
    return ChainState(k=k, Z=Z, dtype=dtype, A=A.copy(), Av=Av.copy(),
                      chains=chains if chains is not None else SavedChains(), gram=gram)
