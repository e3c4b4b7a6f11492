""":class:`ChainStart`: the set-up every proximal chain engine (shared or
pooled probes) starts from.
"""

import numpy as np

from ..._config import check_memory
from ._propagate import ForwardChains, chain_order, design_columns
from ._state import usable_state

CHAIN_HINT = "Use fewer probes (n_probes) or fewer iterations. "


class ChainStart:
    """The set-up of a proximal chain engine on ``coef_path``: the ``kind`` of
    state continued (else ``None``; ``exact``: of the exact probes) from its
    step ``k0``, and the chains' ``masks``, ``order`` and ``prefix``."""

    def __init__(self, design, iteration, coef_path, state, kind, n_probes, dtype, exact=False):
        self.design, self.iteration, self.coef_path = design, iteration, coef_path
        self.n = design.n_samples
        self.T = T = coef_path.shape[1] - 1
        self.dtype = np.dtype(dtype)
        self.state = usable_state(state, kind, n_probes, self.dtype, T, self.n, exact)
        self.k0 = 0 if self.state is None else self.state.k
        self.masks, self.order, self.prefix = chain_order(coef_path)

    def matrices(self, *names):
        """Zero ``(T + 1) x (T + 1)`` matrices, the state's ``names`` restored."""
        T1, k1 = self.T + 1, self.k0 + 1
        out = [np.zeros((T1, T1)) for _ in names]
        if self.state is not None:
            for M, name in zip(out, names, strict=True):
                M[:k1, :k1] = getattr(self.state, name)
        return out

    def columns(self, width):
        """The chains' first ``width`` columns of ``X~`` in their precision."""
        return design_columns(self.design, self.order[:width], self.dtype)

    def chains(self, Xs, n_cols, n_blocks, heavy_ball=False, order=None, prefix=None):
        """:class:`~skacv.estimates.risk._propagate.ForwardChains` of ``n_cols``
        columns on the rows of ``Xs``, memory checked first, the state's chains
        scattered into it."""
        width, dtype = Xs.shape[1], self.dtype
        order = self.order if order is None else order
        prefix = self.prefix if prefix is None else prefix
        check_memory(n_blocks * width * n_cols * dtype.itemsize,
                     f"the Jacobian chains ({width} x {n_cols}, {n_blocks} blocks)", CHAIN_HINT)
        # the masks in the chains' precision, a column per step (a boolean
        # factor would be cast element by element)
        masks_s = np.asfortranarray(self.masks[order[:width]], dtype=dtype)
        chains = ForwardChains(self.design, self.iteration, self.coef_path, Xs, order, prefix,
                               masks_s, n_cols, heavy_ball=heavy_ball)
        if self.state is not None:  # scatter the saved chains into this row order
            chains.restore(self.state.chains)
        return chains

    def run(self, chains, reads, k_end, columns, verbose=0, gram=None):
        """Steps ``k0 + 1 .. k_end``, with the state's Gram matrix (else ``gram``)."""
        chains.run(reads, self.k0, k_end, columns,
                   cached=gram if self.state is None else self.state.gram, verbose=verbose)
