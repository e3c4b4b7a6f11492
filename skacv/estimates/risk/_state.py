"""What a warm-started risk estimate continues from: the engines' states.

A fit with ``warm_start=True`` keeps its risk estimate's state; a longer
fit of the same trajectory continues from a state of its engine's kind,
the same probes and precision (anything else starts afresh).
"""

from dataclasses import dataclass, field

import numpy as np


@dataclass
class SavedChains:
    """Chains after a step in coordinates, each ``(coords, values)`` or ``None``:
    ``dv`` (gradient point), ``dx1`` (iterate), ``dx2`` (the iterate before,
    heavy ball only)."""

    dv: tuple | None = None
    dx1: tuple | None = None
    dx2: tuple | None = None

    def get(self, name):
        """``(coords, values)`` of the chain ``name`` or ``(None, None)``."""
        value = getattr(self, name)
        return (None, None) if value is None else value


@dataclass
class GramCache:
    """``gram = factor X~[:, coords]^T X~[:, coords]``, kept for the next stage."""

    coords: np.ndarray
    gram: np.ndarray
    factor: float


@dataclass
class ChainState:
    """Shared-probe chains after step ``k`` (also the settled form's head)."""

    k: int
    Z: np.ndarray  # (n, m) probes
    dtype: np.dtype
    A: np.ndarray  # (k + 1, k + 1)
    Av: np.ndarray
    chains: SavedChains
    gram: GramCache | None = None

    @property
    def m(self):
        """Number of probes."""
        return self.Z.shape[1]


@dataclass
class PooledState:
    """The pooled probes' chain after step ``k``."""

    k: int
    m: int
    dtype: np.dtype
    Z: np.ndarray  # (n, m) int8 signs, or RangeProbes (skacv.estimates.risk._probes)
    rng: object  # the generator after the draw of Z (states may share it: copied before a draw)
    SA: np.ndarray  # (k + 1, 1, m) the rows' sums per probe, lag 0 excluded
    SV: np.ndarray
    lag0: np.ndarray  # (k + 1, 2)
    chains: SavedChains = field(default_factory=SavedChains)
    gram: GramCache | None = None
    nodes: tuple | None = None  # the template's spectral nodes and weights
    nodes_width: int = -1  # of the union of this many supports' columns
    nodes_lags: int = -1  # the lags their quadrature was checked on
    template: object = None  # the template's CounterpartChain on ``nodes`` after step k
    split: tuple | None = None  # its split_template at step k, until this path's readouts
    template_seed: int | None = None  # the template's probes (drawn after Z)
    # (coords, W, colnorm): X~^T Z and the squared norms of the columns ``coords`` (sorted)
    images: tuple | None = None
    columns: tuple | None = None  # (coords, Xs): the chains' restricted copy of X~
    # (SA, SV) of shape (k + 1, noise_groups): one probe's readouts by groups of samples
    by_samples: tuple | None = None


@dataclass
class CurvatureState:
    """Chains of the robust / mini-batch estimate after step ``k``."""

    k: int
    Z: np.ndarray  # (n, m) probes
    dtype: np.dtype
    A: np.ndarray
    K: np.ndarray
    chains: np.ndarray  # (p, m k)

    @property
    def m(self):
        """Number of probes."""
        return self.Z.shape[1]


@dataclass
class QuadratureState:
    """The probes and Lanczos process of a linear iteration's quadrature."""

    Z: np.ndarray  # (min(n, p), m)
    lanczos: object  # skacv.linalg._linalg.LanczosState


def usable_state(state, kind, n_probes, dtype, T, n, exact=False):
    """``state`` if a ``kind`` that chains of ``n_probes`` probes (not exact
    traces; ``exact``: the exact probes of
    :class:`~skacv.estimates.risk._probes.RangeProbes`, else Rademacher's)
    in ``dtype`` on ``n`` samples continue over a path of ``T`` steps, else
    ``None``."""
    if (isinstance(state, kind) and n_probes is not None and state.m == int(n_probes)
            and state.dtype == dtype and state.k <= T and state.Z.shape[0] == n
            and getattr(state.Z, "exact", False) == exact):
        return state
    return None


def first_live(lo, hx, hv, peak, negligible):
    """``(lo, peak)``: the first column of ``|hx|``, ``|hv|`` above
    ``negligible`` times the largest state seen. A stable recursion's columns
    decay geometrically, so the settled form's row norms cost ``O(r T w)``
    instead of ``O(r T^2)``, and so do the curvature chains' steps."""
    size = hx.max(axis=0, initial=0.0)
    np.maximum(size, hv.max(axis=0, initial=0.0), out=size)
    if not np.all(np.isfinite(size)):  # a diverging recursion: nothing is negligible
        return lo, peak
    peak = max(peak, float(size.max(initial=0.0)))
    above = np.flatnonzero(size > negligible * peak)
    return lo + (int(above[0]) if above.size else size.size), peak
