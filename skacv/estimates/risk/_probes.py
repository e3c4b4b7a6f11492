"""The probes of the risk estimate: every Hutchinson probe is drawn by
:func:`draw_probes`; and how many probes the pooled chain takes
(``n_probes="auto"``): where it starts, how noisy its estimate is and when
it grows.

The pooled chain (:mod:`skacv.estimates.risk._pooled`) starts with
:func:`pooled_start_probes` probes and grows
(:func:`~skacv.estimates.risk._estimate._grow_pooled`, by a second pass over the
path with new probes) while the probes' noise asks for more
(:func:`probes_for_noise`). The noise is measured by a delete-one-group
jackknife over the probes (:func:`jackknife_probes`; a chain of one probe:
over groups of samples, :func:`sample_groups`): of the estimate's
level at every iterate (:func:`probe_noise`), or, for a search that compares
a path with itself only, of the order of the iterates near its minimum
(:func:`choice_iterates`, :func:`choice_noise`). The sizes, targets and
groups are the statistical policy's (``StatisticalPolicy.pooled_probes``
and the fields after it; measurements in ``docs/speed_policy.rst``).
"""

import numpy as np

from ...linalg._sampling import rademacher


def draw_probes(rng, shape, dtype=np.float64):
    """Rademacher probes of ``shape`` drawn from ``rng``: the one draw of
    every probe of the risk estimate (the chains', Lanczos', the
    template's, the SGD tracker's). The same signs in every dtype for the
    same ``rng`` state; while the sample stands for rows out of memory, the
    rows' own probes mapped onto it
    (:func:`~skacv.linalg._sampling.rademacher`)."""
    return rademacher(rng, shape, dtype)

def pooled_probes(n_samples, n_features, statistics):
    """The pooled chain's probes with ``n_probes="auto"`` (at most; the
    adaptive chain starts with :func:`pooled_start_probes`): the
    ``statistics`` policy's ``small_probes`` on designs below
    ``small_design``, else its ``pooled_probes``."""
    samples, features = statistics.small_design
    small = n_samples < samples and n_features <= features
    return statistics.small_probes if small else statistics.pooled_probes


def pooled_start_probes(n_samples, statistics, momentum=True, goal="level", n_features=None):
    """The probes the adaptive pooled chain starts with on ``n_samples``
    samples (the ``statistics`` policy's ``pooled_start_probes``, or
    ``pooled_start_probes_no_momentum`` for an iteration without
    momentum, else all of :func:`pooled_probes`; for ``goal="choice"`` at
    most ``choice_start_probes``')."""
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
    """The group of each sample in the jackknife over ``n_groups`` groups of
    samples (the statistical policy's ``noise_groups``): its index modulo
    ``n_groups`` (fixed, drawn from nothing: the probe's signs alone are
    random). A probe ``z``'s readout ``z^T A z`` of a trace is the sum of
    its groups' ``z_g^T A z``, and ``H z_g^T A z`` is itself an unbiased
    estimate of ``tr A`` (``H`` groups)."""
    return np.arange(n_samples) % n_groups


def jackknife_probes(m, n_groups):
    """The probes kept by each delete-one-group replicate of
    :func:`probe_noise`: ``min(m, n_groups)`` groups of consecutive probes
    (the statistical policy's ``noise_groups``), one deleted at a time."""
    groups = np.array_split(np.arange(m), min(m, n_groups))
    return [np.setdiff1d(np.arange(m), g) for g in groups]


def noise_iterates(n_iterates, statistics):
    """The iterates ``t >= 1`` of a path of ``n_iterates`` at which
    :func:`probe_noise` reads the jackknife's replicates: all of them up to
    the ``statistics`` policy's ``noise_iterates``, else that many evenly
    spaced from the first to the last. The noise is a root-mean-square over the iterates of a
    relative standard error that changes slowly along the path (the
    replicates share their probes from one iterate to the next), so evenly
    spaced iterates give the rms of all of them up to a small sampling
    error, and the replicates cost ``O(T^2)`` flops an iterate
    (:func:`~skacv.estimates.risk._readout.risk_at_iterates`) instead of
    ``O(T^3)`` for the whole path (the measurements: ``docs/speed_policy.rst``)."""
    T, K = int(n_iterates) - 1, statistics.noise_iterates
    if T <= K:
        return np.arange(1, T + 1)
    return np.unique(np.linspace(1, T, K).round().astype(int))


def probe_noise(risk, replicates, iterates=None):
    """Root-mean-square, over the iterates ``t >= 1`` with a positive finite
    estimate, of the relative standard error of ``risk`` (the estimate of
    all the probes): the delete-one-group jackknife (Efron & Stein 1981)
    over ``replicates``, the estimates without each group of probes
    (:func:`jackknife_probes`); it follows the estimate's nonlinearity in
    the memory matrix, which a formula for the traces' variance would not.
    ``iterates``: the replicates are at these iterates only (``t >= 1``,
    :func:`noise_iterates`), the rms over them; ``None``: at every iterate.
    ``0.0`` when no iterate qualifies."""
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
    """The iterates that compete for the choice of a search on ``risk``
    (:func:`choice_noise`): the iterate ``t >= 1`` of the smallest positive
    finite estimate and those within the ``statistics`` policy's
    ``choice_near`` (relative) of it, at most its ``noise_iterates`` of them
    evenly spaced (the best always in). Empty when no iterate qualifies."""
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
    """The probe noise of a choice among ``iterates`` (:func:`choice_iterates`):
    the largest, over the competitors ``t``, delete-one-group jackknife
    standard error of ``(risk[t] - risk[t*]) / risk[t*]``, ``t*`` the best of
    them; ``replicates`` hold the estimates without each group of probes at
    ``iterates`` (:func:`probe_noise`'s). The probes move the estimate of
    neighbouring iterates together (they share their probes), so this noise
    is a fraction of the level's (:func:`probe_noise`): 0.3-0.5 of it on
    ``bench_vs_cv.py``'s FISTA paths of 500 and 1000 samples. ``0.0`` with
    fewer than two replicates or competitors."""
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
    """The probes the pooled chain should have: ``m`` when ``noise`` is at
    most the ``goal``'s target (the ``statistics`` policy's
    ``pooled_noise_target`` for the level's noise, ``choice_noise_target``
    for the choice's; or ``m`` is already its ``pooled_probes``), else the
    noise's ``1 / sqrt(m)`` law's answer and at least twice ``m`` (each
    growth is a pass of the chain over the whole path), in multiples of
    ``m``, at most ``pooled_probes``."""
    most = statistics.pooled_probes
    target = (statistics.choice_noise_target if goal == "choice"
              else statistics.pooled_noise_target)
    if noise <= target or m >= most:
        return m
    # the law's m (noise / target)^2 > m, rounded up to a multiple of m: >= 2 m
    factor = int(np.ceil((noise / target) ** 2))
    return int(min(most, m * factor))
