"""Fitting a search's candidates: every grid point's trajectory, in parallel,
grown in stages on its own estimate or run as K-fold CV along its path,
keeping only the fits that can still win.
"""

import warnings

import numpy as np
import sklearn

from .._config import get_config
from ..estimators._setup import SharedChecks
from ..exceptions import UnreliableEstimateWarning
from ..utils._parallel import blas_threads_per_worker, delayed, effective_n_jobs, parallel
from ._criteria import CRITERIA, PATH_ATTRS
from ._kfold_search import DeferredFull, fit_kfold, fit_kfold_block
from ._search_params import path_not_stored
from ._stages import finite_min, fit_stages, selectable


def fit_candidate(estimator, X, y, fit_params, attrs, policies, attr=None,
                  n_iter_no_change=None, splits=None, fold_alignment="time", fold_dtype="auto",
                  probe_goal="level", limit=None, defer_uq=False, checks=None, bar=None):
    """Fit one grid point (K-fold CV along the path, or its estimate grown in
    stages: :func:`~skacv.model_selection._stages.fit_stages`); return it
    (with ``defer_uq``, K-fold CV's full fit may wait: a
    :class:`~skacv.model_selection._kfold_search.DeferredFull`), its
    estimate paths and fit time."""
    with warnings.catch_warnings():
        if attr != "risk_path_":
            # the risk is only reported (cv_results_, with risk_reliable): its
            # flags do not concern the selection
            warnings.simplefilter("ignore", UnreliableEstimateWarning)
        if attr == "kfold_path_":
            return fit_kfold(estimator, X, y, fit_params, attrs, splits, n_iter_no_change,
                             fold_alignment, fold_dtype, limit, policies, defer_uq, bar)
        return fit_stages(estimator, X, y, fit_params, attrs, attr, n_iter_no_change,
                          probe_goal, limit, policies, defer_uq, checks, bar)


def fit_candidates(search, candidates, X, y, fit_params, limits=None, prune=True,
                   checks=None, stack=False, goal=None, bar=None):
    """Fit every candidate of ``search`` (``limits``: the criterion of each
    one's converged fit, or ``None``); return their estimate paths, fit
    times and ``{index: fitted estimator}``, with ``prune`` only of those
    that can still win (a ``DeferredFull`` is resolved by ``full_fit``).
    ``stack``: K-fold CV of every candidate in one block
    (:func:`~skacv.model_selection._kfold_search.stacks_grid`); ``goal``:
    what the risk's probes are for (default: from the candidates); ``bar``:
    the smallest criterion known elsewhere, which a path's minimum must be
    within reach of to wait for a ripple
    (:func:`~skacv.model_selection._stages.patience`)."""
    attr = CRITERIA[search.criterion_][0]
    attrs = PATH_ATTRS
    limits = [None] * len(candidates) if limits is None else limits
    # the caller's configuration and a share of the BLAS threads in every
    # worker (captured here, in the caller's thread)
    config, sklearn_config = get_config(), sklearn.get_config()
    threads = blas_threads_per_worker(search.n_jobs) if len(candidates) > 1 else None
    # one path compared with itself only: probes to order its iterates
    if goal is None:
        goal = "choice" if len(candidates) == 1 and search.search_ == "grid" else "level"
    # the debiasing statistics of the selected candidate only, where the
    # candidates come back as the objects fitted (a process worker's copy
    # would drop what waits: it does not pickle)
    defer_uq = effective_n_jobs(search.n_jobs) == 1
    # the candidates' first fits validate the same objects: the first one's
    # serves (``checks``: the caller's, shared with its other rounds of candidates)
    checks = SharedChecks() if checks is None else checks
    jobs = (delayed(fit_candidate, config, threads, sklearn_config)(
        search._prepared(params), X, y, fit_params, attrs, search._policies, attr,
        search.n_iter_no_change, search._splits, search.fold_alignment, search._fold_dtype, goal,
        limit, defer_uq, checks, bar)
        for params, limit in zip(candidates, limits, strict=True))
    paths, times, mins, kept = [], [], [], {}
    best = np.inf
    if stack and len(candidates) > 1:
        with warnings.catch_warnings():  # (as fit_candidate's)
            warnings.simplefilter("ignore", UnreliableEstimateWarning)
            results = fit_kfold_block(
                [search._prepared(params) for params in candidates], X, y, fit_params, attrs,
                search._splits, search.n_iter_no_change, search.fold_alignment,
                search._fold_dtype, limits, search._policies, checks, bar)
    else:  # in order, as a generator so that discarded fits are freed early
        results = parallel(search.n_jobs, search.verbose, generator=True)(jobs)
    for i, (est, est_paths, fit_time) in enumerate(results):
        fitted = est.estimator if isinstance(est, DeferredFull) else est
        if not (hasattr(fitted, "coef_path_") and hasattr(fitted, "intercept_path_")):
            raise TypeError(path_not_stored(fitted))
        if attr not in est_paths:
            raise ValueError(
                f"criterion={search.criterion_!r} reads {attr} but "
                f"{type(fitted).__name__} did not set it in fit. Use an estimator "
                f"that estimates it (parameter {CRITERIA[search.criterion_][1]})."
            )
        paths.append(est_paths)
        times.append(fit_time)
        mins.append(finite_min(selectable(est_paths, attr)))
        best = min(best, mins[-1])
        # keep only the fits that can still win (ties included); the others
        # are freed as soon as they arrive
        kept[i] = est
        if prune:
            kept = {j: e for j, e in kept.items()
                    if mins[j] <= best + search._policies[1].tie_rtol * abs(best)}
    return paths, np.array(times), kept


def walk_grid(search, candidates, X, y, fit_params):
    """Fit the automatic grid's candidates (alpha decreasing) in turn,
    ``n_jobs`` at a time, until the statistical policy's
    ``auto_grid_no_change`` alphas in a row have not lowered the smallest
    criterion; returns :func:`fit_candidates`' results of the fitted ones."""
    attr = CRITERIA[search.criterion_][0]
    statistics = search._policies[1]
    step = max(1, effective_n_jobs(search.n_jobs))
    paths, times, mins, kept, checks = [], [], [], {}, SharedChecks()
    since = 0
    while len(paths) < len(candidates) and since < statistics.auto_grid_no_change:
        start = len(paths)
        new, new_times, new_kept = fit_candidates(search, candidates[start:start + step], X, y,
                                                  fit_params, checks=checks, goal="level")
        for est_paths in new:
            mins.append(finite_min(selectable(est_paths, attr)))
            since = 0 if mins[-1] < min(mins[:-1], default=np.inf) else since + 1
        paths += new
        times.append(new_times)
        kept.update({start + j: est for j, est in new_kept.items()})
        best = min(mins)
        kept = {j: e for j, e in kept.items() if mins[j] <= best + statistics.tie_rtol * abs(best)}
    return paths, np.concatenate(times), kept
