"""The no-refit search along one path: the path grown in stages by
warm-started refits and stopped on its own estimate (``risk_path_``,
``loo_path_``, or K-fold CV along it), and the first-minimum rule shared by
the stages and the final choice. The stages' fits follow a
:class:`~skacv.estimators._setup.FitPlan` (the estimator's ``planned``
block); ``policy``, ``statistics``: the search's policies.
"""

import time

import numpy as np

from ..estimators._setup import FitPlan
from ..utils._compat import _num_features, _num_samples
from ._criteria import loo_cost_in_fits


def argmin_first(path, tie_rtol):
    """First iterate within ``tie_rtol`` (relative) of the smallest finite
    value (``None`` when no value is finite)."""
    path = np.where(np.isfinite(path), path, np.inf)
    m = path.min() if path.size else np.inf
    if not np.isfinite(m):
        return None
    return int(np.flatnonzero(path <= m + tie_rtol * abs(m))[0])


def finite_min(path):
    """The smallest finite value of ``path`` (``inf`` when there is none)."""
    path = np.where(np.isfinite(path), path, np.inf)
    return float(path.min()) if path.size else np.inf


def estimate_paths(estimator, attrs):
    """``{name: float64 path}`` of the attributes ``attrs`` the estimator has."""
    return {a: np.asarray(getattr(estimator, a), dtype=np.float64)
            for a in attrs if hasattr(estimator, a)}


def selectable(paths, attr):
    """The criterion path with the iterates flagged by ``risk_reliable_`` set
    to +inf (never selected)."""
    path = np.asarray(paths[attr], dtype=np.float64)
    if attr == "risk_path_" and "risk_reliable_" in paths:
        path = np.where(paths["risk_reliable_"] > 0, path, np.inf)
    return path


def can_stage(estimator, policy, X=None):
    """Whether ``estimator``'s path grows in stages (it has ``max_iter`` and
    ``warm_start``) and, given ``X``, whether stopping early pays (the speed
    policy's ``stage_min_flops*``: docs/speed_policy.rst)."""
    params = estimator.get_params(deep=False)
    if not ("max_iter" in params and "warm_start" in params):
        return False
    if X is None:
        return True
    try:
        n, p = _num_samples(X), _num_features(X)
    except (TypeError, ValueError):
        return True
    T = int(params["max_iter"] or 1)
    flops = 4.0 * n * p * T  # the fit
    linear = estimator.linear_iterations()
    if params.get("estimate_risk") and not linear:
        # probe chains: stages pay beyond a path whose fit costs
        # stage_min_flops_chains (each stage pays the chains' set-up again)
        return flops > policy.stage_min_flops_chains
    if params.get("estimate_loo"):
        sub = (params.get("loo_options") or {}).get("subsample")
        flops += loo_cost_in_fits(estimator, n, p, min(n, sub or n), policy)[1]
    elif params.get("estimate_risk"):
        return flops > policy.stage_min_flops_linear
    return flops > policy.stage_min_flops


def rippled(path, best, rtol):
    """Whether the criterion ``path`` rose (by more than ``rtol``, relative)
    on its way down to its minimum at ``best``: a ripple, which momentum
    leaves in the criterion (below)."""
    head = np.asarray(path[: best + 1], dtype=np.float64)
    if head.size < 3:
        return False
    low = np.minimum.accumulate(head)
    return bool(np.any(head[1:] > low[:-1] + rtol * np.abs(low[:-1])))


def patience(best, n_iter_no_change, statistics, path=None, bar=None):
    """Iterations without improvement after ``best`` that stop the path:
    ``relative_patience`` times ``best``, or ``ripple_patience`` times it
    where the criterion ``path`` rippled before its minimum
    (:func:`rippled`) and that minimum is within reach of ``bar``
    (:func:`within_reach`), at least ``n_iter_no_change``.

    Under momentum (FISTA, Nesterov) an iterate's deviation along a slow
    direction follows ``J_1(w k) / (w k)`` (Su, Boyd & Candes 2016): a
    minimum at that mode's first extremum (``w k = 1.84``) can be followed
    by a lower one at its next (``5.33``), 2.9 times later, which
    ``ripple_patience = 2`` waits for. Which paths wait is empirical: a
    criterion that rose on its way down (several modes, or folds, out of
    phase) did so on the real designs where a deeper minimum followed a
    bump (``docs/speed_policy.rst``); a path that fell smoothly to its
    minimum keeps the shorter patience, which every path took before. So
    does a path whose minimum lies more than ``ripple_reach`` above the
    smallest criterion known elsewhere (``bar``): the deepest later dip
    measured was 3.3 % below the minimum before it, so such a path would
    not be chosen after it (``docs/speed_policy.rst``)."""
    factor = (statistics.ripple_patience
              if path is not None and rippled(path, best, statistics.ripple_rtol)
              and within_reach(path[best], bar, statistics)
              else statistics.relative_patience)
    return max(n_iter_no_change, int(factor * best))


def within_reach(value, bar, statistics):
    """Whether a path's minimum ``value`` lies within ``ripple_reach``
    (relative) of ``bar``, the smallest criterion known elsewhere (other
    grid points' converged fits and paths; ``None`` or not finite: no
    other, always)."""
    if bar is None or not np.isfinite(bar) or not np.isfinite(value):
        return True
    return bool(value <= bar + statistics.ripple_reach * abs(bar))


def next_stage(n_iter, best, n_iter_no_change, growth, statistics, path=None, bar=None):
    """Length of the next stage of an early-stopped path: while the estimate
    still improves at its end, ``growth`` times longer (a stage pays a fixed
    overhead, which geometric growth keeps to a few stages); once the
    minimum lies behind, the first length where :func:`stops` can hold, but
    at least ``n_iter // 8`` more."""
    if best is None or best >= n_iter:
        return n_iter + max(n_iter_no_change, int(growth * n_iter))
    return max(best + patience(best, n_iter_no_change, statistics, path, bar),
               n_iter + max(1, n_iter // 8))


def stage_growth(estimator, attr, policy):
    """The growth of :func:`next_stage` for a path stopped on ``attr``:
    ``stage_growth_chains`` for the risk of an estimator that runs Jacobian
    chains (each stage pays their set-up again), else ``stage_growth``."""
    linear = estimator.linear_iterations()
    if attr == "risk_path_" and not linear:
        return policy.stage_growth_chains
    return policy.stage_growth


def stops(path, n_iter, n_iter_no_change, statistics, limit=None, bar=None):
    """The rule of the stages: ``(stop, best)`` on the criterion ``path`` of a
    path ``n_iter`` long: stop once the first minimum lies ``patience`` back,
    unless ``limit`` (the criterion of the converged fit, where known and
    :func:`pursued_limit`) lies more than ``limit_rtol`` below that minimum
    (``bar``: :func:`patience`'s)."""
    best = argmin_first(path, statistics.tie_rtol)
    if best is None or n_iter - best < patience(best, n_iter_no_change, statistics, path, bar):
        return False, best
    limit = pursued_limit(path, limit, n_iter_no_change)
    return not limit_far_below(path[best], limit, statistics), best


def pursued_limit(path, limit, window):
    """``limit`` (its alpha's converged criterion), or ``None`` where the
    selectable criterion ``path`` (:func:`selectable`) ends in ``window``
    (at least 1) iterates flagged by ``risk_reliable_`` (none finite): a
    path that falls to its limit through iterates it cannot select gains
    nothing by going on for it (the converged fit is a candidate of its
    own). Such a path is ruled by its selectable iterates alone: it stops
    as one without a limit does, and does not grow past ``max_iter``.

    On ``p > n`` designs of high signal, FISTA's paths at the alphas below
    the choice spread over thousands of columns in their first steps and
    come back slowly, their iterates flagged (degrees of freedom near
    ``n``) from a few dozen steps on; their limits, far below the
    flagged head's minimum, kept them going to ``max_iter_growth`` times
    ``max_iter``, the search's time 2-20 times what it is without, for the
    same choice (``docs/benchmarks.rst``)."""
    if limit is None:
        return None
    tail = np.asarray(path[-max(int(window or 1), 1):], dtype=np.float64)
    return None if tail.size and not np.isfinite(tail).any() else limit


def limit_far_below(value, limit, statistics):
    """Whether a finite ``limit`` (its alpha's converged criterion) lies more
    than ``limit_rtol`` below the criterion's minimum ``value``: a path that
    converges must still fall to it."""
    return bool(limit is not None and np.isfinite(limit)
                and limit < value - statistics.limit_rtol * abs(value))


def _growth_best(path, n_iter, n_iter_no_change, best, statistics, bar=None):
    """The ``best`` that :func:`next_stage` grows from: the path's end where
    only the limit keeps the path going, so that the stages grow
    geometrically instead of by the patience's small steps."""
    return n_iter if stops(path, n_iter, n_iter_no_change, statistics, bar=bar)[0] else best


def within_limit(value, limit, statistics):
    """Whether a criterion ``value`` lies within ``reached_rtol`` of a finite
    ``limit`` (its alpha's converged criterion), above or below it: the path
    that reached it has converged."""
    return bool(limit is not None and np.isfinite(limit)
                and abs(value - limit) <= statistics.reached_rtol * abs(limit))


def trend_end(path, window):
    """Where the end of ``path`` heads at its own pace: Aitken's
    extrapolation from its falls over its last two ``window``-long spans
    (``-inf`` while the fall does not slow down, ``path[-1]`` once it does
    not fall)."""
    last = len(path) - 1
    if last < 2 * window:
        return -np.inf
    a, b, c = path[last - 2 * window], path[last - window], path[last]
    if not np.isfinite(a + b + c) or c >= b:
        return float(c)
    ratio = (b - c) / (a - b) if a > b else np.inf
    return float(c - (b - c) * ratio / (1.0 - ratio)) if ratio < 1.0 else -np.inf


def at_boundary(path, n_iter, max_iter, statistics, limit=None, n_iter_no_change=None,
                own_limit=True, bar=None):
    """Whether the criterion ``path`` (``n_iter`` long), on or past ``max_iter``,
    may still fall below its minimum later.

    It does where its ``limit`` (its alpha's converged criterion) lies more
    than ``limit_rtol`` below that minimum (:func:`pursued_limit`) and is
    the path's ``own_limit`` (K-fold CV or the risk estimate of the
    converged fit; not leave-one-out's, whose path may read a subsample of
    the samples, ``criterion="auto"``, and costs a trajectory a sample):
    converging, the path must still fall to it (as :func:`stops` reads it).

    Otherwise it may while its first minimum is recent: at ``max_iter``
    among the last ``n_iter_no_change`` iterates (the stopping's own
    window: an estimate that rises by a bump just before ``max_iter`` is
    still falling there); past ``max_iter``, less than the stages'
    :func:`patience` back (the path grown past ``max_iter`` stops as a stage
    does); without ``n_iter_no_change``, its last iterate. A recent minimum
    within ``reached_rtol`` of the ``limit`` has converged unless the path's
    own pace carries it more than ``reached_rtol`` below the ``limit``
    (:func:`trend_end` over 1, 2 and 4 times ``n_iter_no_change`` iterates,
    the lowest: FISTA's ripple makes one span's pace erratic, and a path
    settling onto its limit, geometrically or as a power of ``t``,
    extrapolates above it over every span): a path that dips below its
    converged score passes through it without slowing down. Without a
    finite ``limit`` (the converged score undefined) a path with a recent
    minimum grows. ``bar``: :func:`patience`'s.
    """
    best = argmin_first(path, statistics.tie_rtol) if n_iter >= max_iter else None
    if best is None:
        return False
    limit = pursued_limit(path, limit, n_iter_no_change)
    if own_limit and limit_far_below(path[best], limit, statistics):
        return True
    window = 1
    if n_iter_no_change is not None:
        window = (n_iter_no_change if n_iter == max_iter
                  else patience(best, n_iter_no_change, statistics, path, bar))
    if n_iter - best >= window:
        return False
    if not within_limit(path[best], limit, statistics):
        return True
    path, span = np.asarray(path, dtype=np.float64), n_iter_no_change or 1
    spans = [span] + [w for w in (2 * span, 4 * span) if 2 * w < len(path)]
    heads = min(trend_end(path, w) for w in spans)
    return bool(heads < limit - statistics.reached_rtol * abs(limit))


def planned(estimator, plan):
    """The estimator's block of fits that follow ``plan`` (a
    :class:`~skacv.estimators._setup.FitPlan`)."""
    return estimator.planned(plan)


def release_warm_state(estimators):
    """Free what a warm-started refit of each estimator would continue from."""
    for est in estimators:
        est.release_warm_state()


def grow_in_stages(estimator, fitted, stage, n_iter_no_change, growth, statistics,
                   probe_goal="level", limit=None, first=None, grow_past=True, end_tol=None,
                   finish=True, checks=None, own_limit=True, bar=None):
    """Grow ``estimator``'s path in stages (:func:`next_stage`):
    ``stage(max_iter=n, warm_start=True)`` fits to ``n`` iterations and
    returns the criterion path (``None``: stop, the caller says why). Stops
    once :func:`stops` holds or at ``max_iter``; a path whose criterion
    still falls there (:func:`at_boundary`) grows on while it may still fall, up to
    ``max_iter_growth`` times ``max_iter`` (unless ``grow_past`` is false).
    Then restores ``warm_start`` and frees the warm state of every
    estimator of ``fitted()``. Returns the last path.

    ``own_limit``: :func:`at_boundary`'s; ``bar``: :func:`patience`'s.
    ``probe_goal``, ``end_tol``, ``checks``: the
    :class:`~skacv.estimators._setup.FitPlan`'s (whose first stage chooses
    the loop's form for the whole ``max_iter``; the debiasing statistics
    are the last stage's). ``first``: the first stage's length (default
    ``2 * n_iter_no_change``).
    """
    max_iter, warm_start = estimator.max_iter, estimator.warm_start
    cap = statistics.max_iter_growth * max_iter if grow_past else max_iter
    n_iter = min(max_iter, 2 * n_iter_no_change) if first is None else first
    try:
        with planned(estimator, FitPlan(horizon=max_iter, defer_uq=True,
                                        keep_deferred=not finish, probe_goal=probe_goal,
                                        same_data=True, end_tol=end_tol, checks=checks)):
            while True:
                path = stage(max_iter=n_iter, warm_start=True)
                if path is None:
                    return None
                converged = len(path) - 1 < n_iter  # the path ended at convergence
                stop = stops(path, n_iter, n_iter_no_change, statistics, limit, bar)[0]
                ended = (n_iter >= max_iter
                         and not at_boundary(path, n_iter, max_iter, statistics, limit,
                                             n_iter_no_change, own_limit, bar))
                if stop or ended or converged or n_iter >= cap:
                    if finish:
                        estimator.finish_deferred()
                    return path
                n_iter = grown_length(path, n_iter, max_iter, cap, n_iter_no_change, growth,
                                      statistics, limit, own_limit, bar)
    finally:
        estimator.set_params(warm_start=warm_start)
        release_warm_state(fitted())


def grown_length(path, n_iter, max_iter, cap, n_iter_no_change, growth, statistics,
                 limit=None, own_limit=True, bar=None):
    """The next stage's length (at most ``cap``) of a path whose criterion
    ``path`` is ``n_iter`` long: :func:`next_stage`'s, within ``max_iter``
    until the path reaches it. Past ``max_iter`` (where each stage of a
    risk path reads its whole estimate again), a path grown because its
    own ``limit`` lies far below its minimum (:func:`at_boundary`) grows
    ``growth`` times longer from its end, whatever the ripple that left its
    minimum a few steps back; and a stage that would leave at most half its
    own step to ``cap`` goes to ``cap`` (``bar``: :func:`patience`'s)."""
    best = argmin_first(path, statistics.tie_rtol)
    past = n_iter >= max_iter
    limit = pursued_limit(path, limit, n_iter_no_change)
    if (past and own_limit and best is not None
            and limit_far_below(path[best], limit, statistics)):
        grown = n_iter + max(n_iter_no_change, int(growth * n_iter))
    else:
        grown = next_stage(n_iter, _growth_best(path, n_iter, n_iter_no_change, best,
                                                statistics, bar),
                           n_iter_no_change, growth, statistics, path, bar)
    if not past:
        return min(max_iter, grown)
    return cap if cap - grown <= (grown - n_iter) // 2 else min(cap, grown)


def stop_length(path, n_iter_no_change, growth, statistics, limit=None, bar=None):
    """Where the stages of :func:`grow_in_stages` (with ``growth``, ``limit``
    and ``bar``) stop on a criterion path computed in one go (its last index
    when the rule never holds)."""
    T = len(path) - 1
    n = min(T, 2 * n_iter_no_change)
    while True:
        stop, best = stops(path[: n + 1], n, n_iter_no_change, statistics, limit, bar)
        if n >= T or stop:
            return n
        best = _growth_best(path[: n + 1], n, n_iter_no_change, best, statistics, bar)
        n = min(T, next_stage(n, best, n_iter_no_change, growth, statistics, path[: n + 1],
                              bar))


def refit_shorter(estimator, X, y, fit_params, n_iter):
    """Refit ``estimator`` from zero to ``n_iter`` iterations (a prefix of its
    path: a path fitted in one go, cut where the early stopping stops)."""
    warm_start = estimator.warm_start
    try:
        estimator.set_params(max_iter=n_iter, warm_start=False).fit(X, y, **fit_params)
    finally:
        estimator.set_params(warm_start=warm_start)


def stage_path(estimator, attrs, attr):
    """The selectable criterion path ``attr`` of a fitted estimator."""
    return selectable(estimate_paths(estimator, attrs), attr)


def fit_stages(estimator, X, y, fit_params, attrs, attr, n_iter_no_change, probe_goal, limit,
               policies, defer_uq=False, checks=None, bar=None):
    """Fit one grid point for the criterion path ``attr`` (``risk_path_`` or
    ``loo_path_``): in one go, or, with ``n_iter_no_change`` and where it
    pays (:func:`can_stage`), in stages stopped on ``attr`` (``limit``,
    ``bar``: :func:`stops`'). A path stopped on ``risk_path_`` also ends where it has
    converged (``converged_tol``). With ``defer_uq``, the debiasing
    statistics wait for the estimator's ``finish_deferred``. Returns the
    estimator, its estimate paths ``attrs`` and the fit time."""
    tic = time.perf_counter()
    policy, statistics = policies
    growth = stage_growth(estimator, attr, policy)
    end_tol = (statistics.converged_tol if attr == "risk_path_" and n_iter_no_change is not None
               else None)
    own = attr != "loo_path_"  # leave-one-out's path is not grown for its limit

    def stage(**params):
        estimator.set_params(**params).fit(X, y, **fit_params)
        if not hasattr(estimator, attr):
            return None  # the caller says what is missing
        return stage_path(estimator, attrs, attr)

    staged = n_iter_no_change is not None and can_stage(estimator, policy, X)
    first = None
    if not staged:
        # a cheap path is fitted whole (the stages' fixed cost would exceed
        # what stopping saves), and its choice is the whole path's argmin
        with planned(estimator, FitPlan(probe_goal=probe_goal, end_tol=end_tol,
                                        defer_uq=defer_uq, keep_deferred=defer_uq,
                                        checks=checks)):
            estimator.fit(X, y, **fit_params)
        n = getattr(estimator, "n_iter_", None)
        path = stage_path(estimator, attrs, attr) if hasattr(estimator, attr) else None
        staged = (n_iter_no_change is not None and can_stage(estimator, policy)
                  and path is not None
                  and at_boundary(path, n, estimator.max_iter, statistics, limit,
                                  n_iter_no_change, own, bar))
        if staged:  # still falling at max_iter (and above its limit): on in stages
            first = grown_length(path, n, estimator.max_iter, statistics.max_iter_growth * n,
                                 n_iter_no_change, growth, statistics, limit, own, bar)
    if staged:
        grow_in_stages(estimator, lambda: [estimator], stage, n_iter_no_change, growth,
                       statistics, probe_goal, limit, first, end_tol=end_tol,
                       finish=not defer_uq, checks=checks, own_limit=own, bar=bar)
    fit_time = time.perf_counter() - tic
    return estimator, estimate_paths(estimator, attrs), fit_time
