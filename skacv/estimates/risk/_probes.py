"""The probes of the risk estimate: every Hutchinson probe is drawn by
:func:`draw_probes`; and how many probes the pooled chain takes with
``n_probes="auto"``: its start (:func:`pooled_start_probes`), its noise by
a delete-one-group jackknife over the probes (or over groups of samples
for one probe) of the level (:func:`probe_noise`) or of the choice near the
minimum (:func:`choice_noise`), and its growth (:func:`probes_for_noise`);
on a narrow design the exact probes of :class:`RangeProbes` instead.
The sizes and targets are the statistical policy's
(``docs/speed_policy.rst``).
"""

import numpy as np
from scipy import linalg

from ..._trace import taken
from ...linalg._sampling import rademacher
from ...utils._parallel import factorization_blas


def draw_probes(rng, shape, dtype=np.float64):
    """Rademacher probes of ``shape`` from ``rng``: the one draw of every probe
    of the risk estimate (the same signs in every dtype; the rows' own probes
    while the sample stands for rows out of memory)."""
    return rademacher(rng, shape, dtype)


class RangeProbes:
    """Exact probes ``Z = sqrt(r) Q``, ``Q`` an orthonormal basis (n, r) of the
    range of ``X~``: ``Z Z^T / r`` projects on that range, where the chains'
    traces ``tr(X~_S J X~_S^T)`` live, so Hutchinson's readout ``(1/r) tr(Z^T
    X~_S J X~_S^T Z)`` is the trace itself. ``Z`` is never formed: the images
    ``X~[:, j]^T Z`` are ``sqrt(r)`` times row ``j`` of a factor ``R^T`` (p,
    r) with ``R^T R = X~^T X~`` (:func:`range_probes`)."""

    exact = True  # a state's probes tell their kind (usable_state)

    def __init__(self, factor, n_samples):
        self.factor = factor  # sqrt(r) R^T, (n_features, r)
        self.shape = (int(n_samples), factor.shape[1])

    def images(self, coords, dtype):
        """``X~[:, coords]^T Z`` in ``dtype``."""
        return np.asarray(self.factor[coords], dtype=dtype)


def probe_images(Xs, coords, Z, dtype):
    """``Xs^T Z`` of the probes ``Z`` (``Xs`` the columns ``coords`` of ``X~``),
    read from the factor of :class:`RangeProbes`."""
    if isinstance(Z, RangeProbes):
        return Z.images(coords, dtype)
    return Xs.T @ np.asarray(Z, dtype=dtype)


def range_probes(design):
    """The :class:`RangeProbes` of ``design``, once per design: from the
    eigendecomposition of the smaller Gram matrix, its numerical null space
    dropped. Features' side: ``R^T = V sqrt(n_eff lam)``; samples' side:
    ``Q = U``, ``R^T = X~^T U``."""
    if "range_probes" not in design.cache:
        taken("range_probes")
        features = design.n_features <= design.n_samples
        G = design.gram("features" if features else "samples")
        with factorization_blas("eigh", G.shape[0], design.policy):
            lam, V = linalg.eigh(G, check_finite=False)
        top = max(float(lam[-1]), 0.0) if lam.size else 0.0
        keep = lam > top * G.shape[0] * np.finfo(np.float64).eps
        lam, V = lam[keep], V[:, keep]
        factor = (V * np.sqrt(design.n_eff * lam) if features
                  else np.asarray(design.rmatvec(V.astype(design.dtype)), dtype=np.float64))
        if factor.shape[1] == 0:  # X~ = 0: one probe of zero images
            factor = np.zeros((design.n_features, 1))
        factor *= np.sqrt(factor.shape[1])
        design.cache["range_probes"] = RangeProbes(factor, design.n_samples)
    return design.cache["range_probes"]


def pooled_probes(n_samples, n_features, statistics):
    """The pooled chain's most probes: ``small_probes`` below ``small_design``,
    else ``pooled_probes``."""
    samples, features = statistics.small_design
    small = n_samples < samples and n_features <= features
    return statistics.small_probes if small else statistics.pooled_probes


def pooled_start_probes(n_samples, statistics, momentum=True, goal="level", n_features=None):
    """The probes the adaptive pooled chain starts with (by ``n_samples``, with
    or without momentum; at most ``choice_start_probes`` for
    ``goal="choice"``)."""
    table = (statistics.pooled_start_probes if momentum
             else statistics.pooled_start_probes_no_momentum)
    start = next((probes for samples, probes in table if n_samples >= samples),
                 statistics.pooled_probes if n_features is None
                 else pooled_probes(n_samples, n_features, statistics))
    samples, probes = statistics.choice_start_probes
    return min(start, probes) if goal == "choice" and n_samples >= samples else start


#: the factor on the standard error of the samples' jackknife (the statistical
#: policy's ``noise_groups`` groups of samples, a chain of one probe; pooled
#: chain's ``jackknife_matrices``).
#: For a linear statistic ``z^T A z`` (Rademacher ``z``), the jackknife's
#: variance has expectation ``sum_{i != j} A_ij^2`` plus the spread of the
#: groups' diagonal sums, plus ``(H c_in - c) / (H - 1)`` where ``c =
#: sum_{i != j} A_ij A_ji`` and ``c_in`` its pairs within a group (about
#: ``c / H`` for groups the matrix does not single out: the samples by
#: their index modulo ``H``); the variance of ``z^T A z`` is ``sum_{i !=
#: j} (A_ij^2 + A_ij A_ji) <= 2 sum_{i != j} A_ij^2`` (Cauchy-Schwarz).
#: So twice the jackknife's variance bounds it, reached for a symmetric
#: ``A`` (``tests/test_risk_pooled.py`` checks both against the spread
#: of probe draws)
SAMPLE_GROUPS_NOISE_FACTOR = float(np.sqrt(2.0))


def sample_groups(n_samples, n_groups):
    """The group of each sample in the jackknife over groups of samples: its
    index modulo ``n_groups`` (``H z_g^T A z`` is itself an unbiased estimate
    of ``tr A``)."""
    return np.arange(n_samples) % n_groups


def jackknife_probes(m, n_groups):
    """The probes kept by each delete-one-group replicate (groups of consecutive probes)."""
    groups = np.array_split(np.arange(m), min(m, n_groups))
    return [np.setdiff1d(np.arange(m), g) for g in groups]


def noise_iterates(n_iterates, statistics):
    """The iterates ``t >= 1`` at which :func:`probe_noise` reads the replicates:
    all up to ``noise_iterates``, else that many evenly spaced (the relative
    error changes slowly along the path)."""
    T, K = int(n_iterates) - 1, statistics.noise_iterates
    if T <= K:
        return np.arange(1, T + 1)
    return np.unique(np.linspace(1, T, K).round().astype(int))


def probe_noise(risk, replicates, iterates=None):
    """Root-mean-square over the iterates ``t >= 1`` with a positive finite
    estimate of the relative standard error of ``risk`` by the delete-one-group
    jackknife (Efron & Stein 1981) over ``replicates``; ``iterates``: the
    replicates' iterates (``None``: all). ``0.0`` when none qualifies."""
    if iterates is None:
        r = np.asarray(risk)[1:]
        R = np.array([np.asarray(x)[1:] for x in replicates])
    else:
        r = np.asarray(risk)[np.asarray(iterates)]
        R = np.array([np.asarray(x) for x in replicates])
    K = R.shape[0]
    if K < 2 or r.size == 0:
        return 0.0
    ok = np.isfinite(r) & (r > 0) & np.all(np.isfinite(R), axis=0)
    if not ok.any():
        return 0.0
    R = R[:, ok]
    var = (K - 1) / K * np.sum((R - R.mean(axis=0)) ** 2, axis=0)
    return float(np.sqrt(np.mean(var / r[ok] ** 2)))


def choice_iterates(risk, statistics):
    """The iterates that compete for a search's choice: the best ``t >= 1`` and
    those within ``choice_near`` of it, at most ``noise_iterates`` of them
    evenly spaced (the best always in)."""
    near, K = statistics.choice_near, statistics.noise_iterates
    r = np.asarray(risk, dtype=np.float64)[1:]
    ok = np.isfinite(r) & (r > 0)
    if not ok.any():
        return np.arange(0)
    best = float(np.min(r[ok]))
    close = np.flatnonzero(ok & (r <= best * (1 + near))) + 1
    if close.size > K:
        keep = np.unique(np.linspace(0, close.size - 1, K).round().astype(int))
        close = np.union1d(close[keep], [int(np.flatnonzero(ok & (r == best))[0]) + 1])
    return close


def choice_noise(risk, replicates, iterates):
    """The largest jackknife standard error over the competitors ``t`` of
    ``(risk[t] - risk[t*]) / risk[t*]``, ``t*`` the best. The probes move
    neighbouring iterates together, so this is a fraction (0.3-0.5 on
    ``bench_vs_cv.py``'s FISTA paths) of :func:`probe_noise`."""
    iterates = np.asarray(iterates)
    R = np.array([np.asarray(x, dtype=np.float64) for x in replicates])
    if R.shape[0] < 2 or iterates.size < 2:
        return 0.0
    r = np.asarray(risk, dtype=np.float64)[iterates]
    b = int(np.argmin(r))
    D = R - R[:, [b]]
    K = R.shape[0]
    var = (K - 1) / K * np.sum((D - D.mean(axis=0)) ** 2, axis=0)
    var = var[np.isfinite(var)]
    return float(np.sqrt(var.max()) / r[b]) if var.size else 0.0


def probes_for_noise(m, noise, statistics, goal="level"):
    """The probes the pooled chain should have: ``m`` when ``noise`` is within the
    ``goal``'s target, else the ``1 / sqrt(m)`` law's answer, at least twice
    ``m`` (a growth is a pass over the path), a multiple of ``m``, at most
    ``pooled_probes``."""
    most = statistics.pooled_probes
    target = (statistics.choice_noise_target if goal == "choice"
              else statistics.pooled_noise_target)
    if noise <= target or m >= most:
        return m
    # the law's m (noise / target)^2 > m, rounded up to a multiple of m: >= 2 m
    factor = int(np.ceil((noise / target) ** 2))
    return int(min(most, m * factor))
