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
over groups of samples, :data:`SAMPLE_GROUPS`): of the estimate's
level at every iterate (:func:`probe_noise`), or, for a search that compares
a path with itself only, of the order of the iterates near its minimum
(:func:`choice_iterates`, :func:`choice_noise`).
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

#: probes of the pooled chain (``probe_scheme="pooled"`` with
#: ``n_probes="auto"``): at most this many; see
#: :mod:`skacv.estimates.risk._pooled`'s docstring for the measurements
POOLED_PROBES = 32
#: ... and :data:`SMALL_PROBES` on designs below ``SMALL_DESIGN[0]`` samples
#: with at most ``SMALL_DESIGN[1]`` features (:func:`pooled_probes`), where
#: the chains cost their per-step overheads, not their products: on Hitters,
#: diabetes and College (131-388 x 10-19, FISTA, 4 alphas, 4 splits) 64
#: probes halved the rms relative error of ``risk_path_`` against exact
#: traces (1.03 % -> 0.43 %, 0.37 % -> 0.16 %, 0.18 % -> 0.11 %; 128
#: probes: no better, the split of the rows' sums is then the error) in the
#: same fit time; at 500 x 2000 (a support of 460) they cost 1.36x
SMALL_PROBES = 64
SMALL_DESIGN = (1000, 128)
#: ``n_probes="auto"`` in :func:`~skacv.estimates.risk._estimate.trajectory_risk`:
#: the pooled chain starts with the probes of the first ``(samples,
#: probes)`` pair whose sample count the data reach (else with
#: :data:`POOLED_PROBES`) and grows (to at most :data:`POOLED_PROBES`)
#: while the probe noise of ``risk_path_`` (:func:`probe_noise`) is above
#: :data:`POOLED_NOISE_TARGET`. The noise falls faster than ``1 / n``
#: with the samples and as ``1 / sqrt(m)`` with the probes: 8 probes gave
#: 1.9 %, 0.9 % and 0.2 % rms relative standard error at 1000 x 1500, 2000
#: x 3000 and 4000 x 6000 (``bench_vs_cv.py``'s equicorrelated FISTA
#: paths, T = 150, 6 draws); 16 probes 0.27 % at 4000 x 6000 and 0.09 %
#: at 10000 x 15000 (the jackknife, one draw). Each start is chosen so that
#: the noise its law predicts is at most half the target (a growth is a
#: second pass of the chain over the path): 8 probes from 4000 samples
#: (0.2-0.4 %), 1 from 8000, its noise measured over groups of samples
#: (:data:`SAMPLE_GROUPS`; with 2 probes the jackknife's two groups made
#: it rough): 0.22-0.29 % at 10000 x 15000, 0.22-0.43 % at 8000 x 12000
#: and 0.47-0.75 % at 8000 x 4000 (T = 150, two draws each), where a
#: growth is a pass of one column. At 2000 samples 8 probes grew to 24-32 on T = 300 paths, a
#: second pass; at 4000 x 6000 (T = 300) 4 probes grew to 8-16 in two draws
#: of three (8 probes: 0.42-0.63 %). The costs of the chains by their
#: columns (products of a few columns by thin panels of rows, the
#: speed policy's ``chain_panel_max_columns``): ``docs/benchmarks.rst``
POOLED_START_PROBES = ((8000, 1), (4000, 8), (2000, 16))
#: :data:`POOLED_START_PROBES` of an iteration without momentum (ISTA),
#: whose memory is short and noise lower, but by far more design-dependent:
#: 4 probes gave 0.15 % (equicorrelated 2000 x 3000, T = 150), 0.66 % and
#: 0.78 % (equicorrelated 1000 x 1500 and 1000 x 500, T = 300) and 3.5 %
#: (isotropic 2000 x 3000, where 16 probes gave 1.3 % and the chain grows
#: to 32 from either start); 1 probe 0.015-0.022 % at 10000 x 15000 and
#: 0.04-0.06 % at 8000 x 4000 (equicorrelated, T = 150). A chain of
#: 4 probes costs about half one of 16, so a growth from 4 costs about what
#: one from 16 does
POOLED_START_PROBES_NO_MOMENTUM = ((8000, 1), (1000, 4))
#: the root-mean-square relative standard error of ``risk_path_`` over the
#: iterates that the adaptive pooled chain aims at: what 32 probes gave on
#: the equicorrelated 1000 x 1500 FISTA path of ``bench_vs_cv.py`` (0.77 %
#: over 6 draws), where the default was validated
POOLED_NOISE_TARGET = 0.008
#: a search that compares a path with itself only (one grid point;
#: ``FitPlan.probe_goal="choice"``) needs the estimate to order the iterates
#: near its minimum, not its level: there the pooled chain grows while the
#: noise of that order (:func:`choice_noise`) is above this, so that the
#: probes move the chosen iterate's estimated excess risk by about this much
CHOICE_NOISE_TARGET = 0.01
#: :func:`choice_iterates`: the iterates within this relative excess of the
#: estimate's minimum compete with it (several times
#: :data:`CHOICE_NOISE_TARGET`: farther ones are not chosen by the probes'
#: noise)
CHOICE_NEAR = 0.02
#: a chain for a choice (``probe_goal="choice"``) starts with at most this
#: many probes from this many samples on (fewer where
#: :func:`pooled_start_probes` starts with fewer). Below, the level's start
#: (all the probes): a chain of 32 probes cost about what one of 4 does at
#: 200 x 300 and 500 x 250 (per-step overheads), and growing from 4 was a
#: second or third pass (FISTA 200 x 300: 0.18 s against 0.10 s)
CHOICE_START_PROBES = (1000, 4)


def pooled_probes(n_samples, n_features):
    """The pooled chain's probes with ``n_probes="auto"`` (at most; the
    adaptive chain starts with :func:`pooled_start_probes`):
    :data:`SMALL_PROBES` on small designs, else :data:`POOLED_PROBES`."""
    samples, features = SMALL_DESIGN
    return SMALL_PROBES if n_samples < samples and n_features <= features else POOLED_PROBES


def pooled_start_probes(n_samples, momentum=True, goal="level", n_features=None):
    """The probes the adaptive pooled chain starts with on ``n_samples``
    samples (:data:`POOLED_START_PROBES`, or
    :data:`POOLED_START_PROBES_NO_MOMENTUM` for an iteration without
    momentum, else all of :func:`pooled_probes`; for ``goal="choice"`` at
    most :data:`CHOICE_START_PROBES`'s)."""
    table = POOLED_START_PROBES if momentum else POOLED_START_PROBES_NO_MOMENTUM
    start = next((probes for samples, probes in table if n_samples >= samples),
                 POOLED_PROBES if n_features is None else pooled_probes(n_samples, n_features))
    samples, probes = CHOICE_START_PROBES
    return min(start, probes) if goal == "choice" and n_samples >= samples else start


#: groups of probes deleted in turn by the jackknife of :func:`probe_noise`
NOISE_GROUPS = 8


#: a pooled chain of one probe (:data:`POOLED_START_PROBES`) measures its
#: noise by the delete-one-group jackknife over this many groups of samples
#: instead of probes (:func:`sample_groups`,
#: :func:`~skacv.estimates.risk._pooled.jackknife_matrices`): the probe
#: ``z``'s readout ``z^T A z`` of a trace is the sum of its groups' ``z_g^T
#: A z``, and ``H z_g^T A z`` is itself an unbiased estimate of ``tr A``
#: (``H`` groups)
SAMPLE_GROUPS = NOISE_GROUPS
#: the factor on the standard error of :data:`SAMPLE_GROUPS`'s jackknife.
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


def sample_groups(n_samples):
    """The group of each sample in :data:`SAMPLE_GROUPS`'s jackknife: its
    index modulo the number of groups (fixed, drawn from nothing: the
    probe's signs alone are random)."""
    return np.arange(n_samples) % SAMPLE_GROUPS


def jackknife_probes(m):
    """The probes kept by each delete-one-group replicate of
    :func:`probe_noise`: ``min(m, NOISE_GROUPS)`` groups of consecutive
    probes, one deleted at a time."""
    groups = np.array_split(np.arange(m), min(m, NOISE_GROUPS))
    return [np.setdiff1d(np.arange(m), g) for g in groups]


#: iterates at which :func:`probe_noise` reads the replicates on a longer path
NOISE_ITERATES = 64


def noise_iterates(n_iterates):
    """The iterates ``t >= 1`` of a path of ``n_iterates`` at which
    :func:`probe_noise` reads the jackknife's replicates: all of them up to
    :data:`NOISE_ITERATES`, else that many evenly spaced from the first to
    the last. The noise is a root-mean-square over the iterates of a
    relative standard error that changes slowly along the path (the
    replicates share their probes from one iterate to the next), so evenly
    spaced iterates give the rms of all of them up to a small sampling
    error, and the replicates cost ``O(T^2)`` flops an iterate
    (:func:`~skacv.estimates.risk._readout.risk_at_iterates`) instead of
    ``O(T^3)`` for the whole path. Measured against the rms over every
    iterate (the same replicates), at every decision of the growth: on the
    equicorrelated designs of ``benchmarks/bench_vs_cv.py`` (2000 x 1000
    and 2000 x 3000, FISTA and ISTA, T = 150 and 300, 3 probe draws each)
    the noise moved by at most 0.9 % of itself, on the stages of the
    staged search up to T = 727 (FISTA, the seed generator's
    equicorrelated 2000 x 3000, 3 draws) by at most 1.1 %, against a spread
    of about 20 % between probe draws; no decision of
    :func:`probes_for_noise` changed."""
    T = int(n_iterates) - 1
    if T <= NOISE_ITERATES:
        return np.arange(1, T + 1)
    return np.unique(np.linspace(1, T, NOISE_ITERATES).round().astype(int))


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


def choice_iterates(risk, near=None):
    """The iterates that compete for the choice of a search on ``risk``
    (:func:`choice_noise`): the iterate ``t >= 1`` of the smallest positive
    finite estimate and those within ``near`` (relative; default
    :data:`CHOICE_NEAR`) of it, at most :data:`NOISE_ITERATES` of them
    evenly spaced (the best always in). Empty when no iterate qualifies."""
    near = CHOICE_NEAR if near is None else near
    r = np.asarray(risk, dtype=np.float64)[1:]
    ok = np.isfinite(r) & (r > 0)
    if not ok.any():
        return np.arange(0)
    best = float(np.min(r[ok]))
    close = np.flatnonzero(ok & (r <= best * (1 + near))) + 1
    if close.size > NOISE_ITERATES:
        keep = np.unique(np.linspace(0, close.size - 1, NOISE_ITERATES).round().astype(int))
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


def probes_for_noise(m, noise, goal="level"):
    """The probes the pooled chain should have: ``m`` when ``noise`` is at
    most the ``goal``'s target (:data:`POOLED_NOISE_TARGET` for the level's
    noise, :data:`CHOICE_NOISE_TARGET` for the choice's; or ``m`` is
    already :data:`POOLED_PROBES`), else the noise's ``1 / sqrt(m)`` law's
    answer and at least twice ``m`` (each growth is a pass of the chain over
    the whole path), in multiples of ``m``, at most :data:`POOLED_PROBES`."""
    target = CHOICE_NOISE_TARGET if goal == "choice" else POOLED_NOISE_TARGET
    if noise <= target or m >= POOLED_PROBES:
        return m
    # the law's m (noise / target)^2 > m, rounded up to a multiple of m: >= 2 m
    factor = int(np.ceil((noise / target) ** 2))
    return int(min(POOLED_PROBES, m * factor))
