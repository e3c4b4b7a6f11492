"""``search="path"``: the joint argmin of the criterion over (alpha,
iteration), the converged fits included.

The whole alpha path is solved to convergence with warm starts
(:func:`skacv.risk_alpha_path`) and scored there (the converged risk, the
converged leave-one-out, or K-fold CV of each fold's converged path).
:class:`~skacv.TrajectoryEarlyStoppingCV` then fits the from-zero
trajectories of the alpha that the converged fits choose and of its
neighbours, and widens that window (:func:`widen_rows`) until the alpha of
the best trajectory has ``path_neighbors`` fitted alphas on each side whose
trajectories score higher, then fits every other alpha whose converged score
an early-stopping gain could take below the best (:func:`promising_rows`:
the largest gain seen, or at least the statistical policy's
``walk_gain_df`` times the converged choice's degrees of freedom over the
effective sample size ``n_eff``, the sum of the sample weights). Each
trajectory is stopped knowing its limit, the criterion of its alpha's
converged fit
(:func:`~skacv.model_selection._stages.stops`). The converged fit of the
converged choice is the limit of its trajectory and competes with every
iterate by the same criterion (:func:`converged_choice`): it is selected when
it scores lower than all of them, as where a trajectory stops at
``max_iter`` while its estimate still falls.

The converged path comes from the search's ``_alpha_path``
(:func:`skacv.risk_alpha_path`; a test double of the search gives known
risk curves by it).
"""

import dataclasses
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils import Bunch

from .._trace import taken
from ..estimators._setup import SharedChecks
from ..exceptions import SelectionBoundaryWarning
from ..utils._compat import _num_samples
from ._alpha_path import risk_alpha_path
from ._candidates import fit_candidates
from ._criteria import CRITERIA
from ._kfold_search import full_fit
from ._results import cv_results, select
from ._stages import finite_min, selectable


@dataclasses.dataclass
class AlphaScores:
    """The criterion at convergence along the alpha grid.

    Attributes
    ----------
    path : Bunch
        The result of :func:`skacv.risk_alpha_path` (its first ``m`` alphas).
    values : list
        Every alpha of the grid, decreasing (the path's order), as given.
    score : ndarray of shape (n_grid,)
        The criterion at convergence (NaN: not scored).
    path_risk : ndarray of shape (n_grid,)
        The converged risk estimate (NaN beyond the path).
    reason : ndarray of object, shape (n_grid,)
        Why an alpha has no score (``""`` for a scored one).
    time : float
        Seconds taken.
    """

    path: Bunch
    values: list
    score: np.ndarray
    path_risk: np.ndarray
    reason: np.ndarray
    time: float

    def columns(self, criterion):
        """The ``cv_results_`` columns of the alpha path."""
        n_grid, m = len(self.values), self.path.alphas.shape[0]
        return {
            f"path_{criterion}": np.where(np.isfinite(self.score), self.score, np.nan),
            "path_risk": self.path_risk,
            "path_df": np.concatenate([np.asarray(self.path.df, dtype=np.float64),
                                       np.full(n_grid - m, np.nan)]),
            "path_n_iter": np.ma.MaskedArray(
                np.concatenate([np.asarray(self.path.n_iter), np.zeros(n_grid - m, dtype=int)]),
                mask=np.arange(n_grid) >= m),
            "reason": self.reason,
            "path_time": self.time,
        }


def check_path_search(param_grid, fit_params):
    """The grid's alphas as given (``None``: the path's own grid), or a
    ValueError for what ``search="path"`` cannot search."""
    if param_grid is not None and (not isinstance(param_grid, dict)
                                   or set(param_grid) != {"alpha"}):
        raise ValueError(
            "search='path' searches the penalty only: param_grid must be None or "
            f"{{'alpha': [...]}}, got {param_grid!r}. Use search='grid' for other parameters."
        )
    extra = set(fit_params) - {"sample_weight"}
    if extra:
        raise ValueError(f"search='path' supports sample_weight only, got {sorted(extra)}.")
    return None if param_grid is None else list(param_grid["alpha"])


def score_alpha_path(estimator, X, y, fit_params, criterion, param_grid, path_params, splits,
                     alpha_path=risk_alpha_path):
    """Solve and score the alpha path (:class:`AlphaScores`).

    Parameters
    ----------
    estimator : trajectory estimator
        Cloned here.
    X, y, fit_params : the data and ``sample_weight``
    criterion : {"risk", "loo", "kfold"}
    param_grid : dict or None
        ``{"alpha": [...]}`` or ``None`` (the path's own grid).
    path_params : dict or None
        Keyword arguments of :func:`skacv.risk_alpha_path`.
    splits : list of (train, test) or None
        The folds of ``criterion="kfold"``.
    alpha_path : callable, default=risk_alpha_path
        The converged path (the signature of :func:`skacv.risk_alpha_path`).
    """
    given = check_path_search(param_grid, fit_params)
    alphas = None if given is None else np.asarray(given, dtype=np.float64)
    # the estimator's own input checks and messages (y=None, NaN, empty data)
    X, y = clone(estimator).validate_fit_data(X, y)
    n = _num_samples(X)
    if n < 2:
        raise ValueError(f"search='path' needs at least 2 samples, got {n} "
                         "sample (n_samples = 1).")
    sw = fit_params.get("sample_weight")
    # K-fold CV scores every alpha of the grid: the full data's path too, so
    # that the converged fit of any alpha can be chosen (stopped on the risk
    # estimate, it left the K-fold choice's converged fit unsolved)
    options = {"n_alphas_no_change": None if criterion == "kfold" else 3,
               **(path_params or {})}
    tic = time.perf_counter()
    path = alpha_path(clone(estimator), X, y, alphas=alphas, sample_weight=sw,
                      criterion="loo" if criterion == "loo" else "risk", **options)
    # every alpha of the grid, decreasing (the path's order), as given
    if given is None:
        n_alphas = options.get("n_alphas", 30)
        full = (path.alphas if path.alphas.shape[0] == n_alphas else np.geomspace(
            path.alphas[0], path.alphas[0] * options.get("eps", 1e-3), num=n_alphas))
        values = [float(a) for a in full]
    else:
        order = np.argsort(-alphas, kind="stable")
        full, values = alphas[order], [given[i] for i in order]
    m, n_grid = path.alphas.shape[0], len(values)
    path_risk = np.full(n_grid, np.nan)
    path_risk[:m] = path.risk
    if criterion == "kfold":
        score = kfold_alpha_path(estimator, X, y, sw, splits, full, options, alpha_path)
    else:
        score = np.full(n_grid, np.nan)
        score[:m] = path.loo if criterion == "loo" else path.risk
    path_time = time.perf_counter() - tic
    finite = np.isfinite(score)
    reason = np.array(["" if ok else "undefined: the fit (nearly) interpolates (df >= 0.99 "
                       "n_samples) or a sample has leverage 1" for ok in finite], dtype=object)
    if criterion != "kfold":
        reason[m:] = (f"not solved: the alpha path stopped after n_alphas_no_change="
                      f"{options['n_alphas_no_change']} alphas without a new minimum of "
                      f"the {criterion} estimate")
    if not finite.any():
        raise ValueError(too_few_message(n, criterion, path.df))
    return AlphaScores(path, values, score, path_risk, reason, path_time)


def kfold_alpha_path(estimator, X, y, sample_weight, splits, alphas, options,
                     alpha_path=risk_alpha_path):
    """K-fold CV along the alpha path: the converged fits of every alpha on
    each fold's training rows (:func:`skacv.risk_alpha_path`, warm-started
    along ``alphas``, the ``tol`` and ``max_iter`` of ``options``) scored on
    its held-out rows; the weighted mean squared error over all held-out
    samples, one value per alpha (``alphas`` decreasing)."""
    kw = {k: v for k, v in options.items() if k in ("tol", "max_iter", "eps")}
    Xr = X.tocsr() if sp.issparse(X) else np.asarray(X)
    y = np.asarray(y, dtype=np.float64)
    sw = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    total, weight = np.zeros(len(alphas)), 0.0
    for train, test in splits:
        fold = alpha_path(clone(estimator), Xr[train], y[train], alphas=alphas,
                          sample_weight=None if sw is None else sw[train],
                          n_alphas_no_change=None, **kw)
        pred = np.asarray(Xr[test] @ fold.coefs, dtype=np.float64) + fold.intercepts
        w = np.ones(len(test)) if sw is None else sw[test]
        total += w @ (y[test, None] - pred) ** 2
        weight += float(w.sum())
    return total / weight


@dataclasses.dataclass
class ConvergedChoice:
    """The converged fit of the chosen alpha, selected over the iterates of
    its trajectory (:func:`converged_choice`).

    Attributes
    ----------
    coef : ndarray of shape (n_features,)
        The alpha path's solution.
    intercept : float
        Its intercept.
    score : float
        The criterion at convergence (``best_risk_``).
    trajectory_min : float
        The smallest value of the criterion along the trajectory.
    trajectory_iteration : int
        Where the trajectory reached it.
    """

    coef: np.ndarray
    intercept: float
    score: float
    trajectory_min: float
    trajectory_iteration: int


def converged_choice(scores, row, joint_min, trajectory_min, trajectory_iteration, rtol):
    """The converged fit of the grid's row ``row`` (:class:`ConvergedChoice`)
    when it scores lower than every fitted iterate (``joint_min``: the
    smallest criterion over every trajectory; ``trajectory_min`` and
    ``trajectory_iteration``: row ``row``'s own), else ``None``.

    The criterion at convergence (the converged risk, the converged
    leave-one-out, K-fold CV of the folds' converged fits) is the limit of
    the criterion along the trajectory (``risk_path_``, ``loo_path_``,
    ``kfold_path_``), so the converged fit is one more candidate of the same
    criterion: the trajectory's limit. It wins where the trajectories stop
    (at ``max_iter``) before their estimate reaches that limit; ties (within
    ``rtol`` relatively) go to the iterate (the early-stopped model).
    """
    score = float(scores.score[row])
    if (row >= scores.path.alphas.shape[0] or not np.isfinite(score)
            or not score < joint_min - rtol * abs(joint_min)):
        return None
    return ConvergedChoice(np.array(scores.path.coefs[:, row]),
                           float(scores.path.intercepts[row]), score, float(trajectory_min),
                           int(trajectory_iteration))


def trajectory_mins(fitted, criterion):
    """``{row: the smallest selectable criterion of its trajectory}`` of the
    fitted rows (``fitted``: ``{row: [paths, ...]}``)."""
    attr = CRITERIA[criterion][0]
    return {r: finite_min(selectable(entry[0], attr)) for r, entry in fitted.items()}


@dataclasses.dataclass
class PathChoice:
    """The joint argmin of :func:`joint_argmin`.

    Attributes
    ----------
    rows : list of int
        The rows of the grid whose trajectories were fitted, increasing.
    paths, times : lists
        Their estimate paths and fit times.
    mins, best_iters : ndarray of shape (len(rows),)
        The smallest selectable criterion of each, and where.
    row : int
        The chosen row.
    iteration : int or None
        The chosen iteration (``None``: the converged fit).
    converged : ConvergedChoice or None
    estimator : estimator
        The fitted trajectory of the chosen row.
    """

    rows: list
    paths: list
    times: list
    mins: np.ndarray
    best_iters: np.ndarray
    row: int
    iteration: object
    converged: object
    estimator: object


def joint_argmin(scores, criterion, neighbors, fit, rtol, floor=0.0, walk_rtol=0.0):
    """The joint argmin of ``criterion`` over (alpha, iteration) and the
    converged fits (:class:`PathChoice`).

    ``fit(rows, limits)`` fits the trajectories of the grid's ``rows``,
    each knowing its limit (its converged score; ``inf`` where there is
    none: the patience only), and returns their estimate paths, fit times
    and ``{index: estimator}``. The rows start at the converged fits'
    choice and widen by :func:`widen_rows`, then by :func:`promising_rows`
    (``floor``: the smallest early-stopping gain assumed of a trajectory not
    fitted, ``walk_rtol``: the excess it skips; ``neighbors=0``: that
    choice's row only); the converged fit of that choice competes with
    every iterate (:func:`converged_choice`; ``rtol``: ties). Fits that can
    no longer be chosen are freed as the walk goes.
    """
    limits = np.where(np.isfinite(scores.score), scores.score, np.inf)
    a = int(np.argmin(limits))  # the converged fits' choice
    n_grid = len(scores.values)
    fitted = {}  # row -> [paths, fit time, estimator or None]
    rows = widen_rows({}, a, n_grid, neighbors)
    while rows:
        paths, times, kept = fit(rows, [float(limits[r]) for r in rows])
        for j, r in enumerate(rows):
            fitted[r] = [paths[j], times[j], kept[j]]
        mins = trajectory_mins(fitted, criterion)
        best = min(mins.values())
        for r, entry in fitted.items():
            if r != a and mins[r] > best + rtol * abs(best):
                entry[2] = None  # (row a's converged fit competes: kept)
        rows = widen_rows(mins, a, n_grid, neighbors)
        if not rows and neighbors:
            rows = promising_rows(limits, mins, min(best, limits[a]), floor, walk_rtol)
    rows = sorted(fitted)
    paths = [fitted[r][0] for r in rows]
    i, t, mins, best_iters = select(paths, criterion, rtol)
    j = rows.index(a)
    converged = converged_choice(scores, a, mins[i], mins[j], best_iters[j], rtol)
    if converged is not None:
        i, t = j, None
    return PathChoice(rows, paths, [fitted[r][1] for r in rows], mins, best_iters, rows[i], t,
                      converged, fitted[rows[i]][2])


def early_stopping_gain(limits, mins):
    """The largest relative gain of a fitted trajectory's best iterate over
    its own converged fit, ``max(1 - min_r / limit_r, 0)`` over the fitted
    rows ``mins`` (``{row: smallest criterion}``) with finite, positive
    values: how far below its limit this data's trajectories have reached."""
    gains = [1.0 - v / limits[r] for r, v in mins.items()
             if np.isfinite(v) and np.isfinite(limits[r]) and limits[r] > 0]
    return min(max([0.0, *gains]), 1.0)


def promising_rows(limits, mins, best, floor=0.0, walk_rtol=0.0):
    """The rows not fitted yet that could still hold the joint argmin: a
    converged score (``limits``) that the largest early-stopping gain seen
    so far (:func:`early_stopping_gain`) would take below ``best``, the
    smallest criterion found (iterates and the converged choice), or that a
    gain of ``floor`` would take more than ``walk_rtol`` (relative) below it.

    The walk of :func:`widen_rows` finds a local minimum of the
    trajectories' minima over the grid; a trajectory reaches below its own
    limit by its early-stopping gain, so a row elsewhere on the grid whose
    limit is within that gain of ``best`` may hold a lower iterate (a
    converged score that is not unimodal in alpha, e.g. near interpolation
    with more features than samples): those rows are fitted too, and the
    walk goes on from the best of all. The gain seen underestimates the
    gains of the rows not fitted: the walk's rows lie next to the converged
    fits' choice, where early stopping gains least (on real designs the
    alphas a few steps larger gain several times more), and a path stopped
    in stages at a bump of its estimate shows less than its whole
    trajectory. ``floor`` (the search's ``walk_gain_df`` times the converged
    choice's degrees of freedom over ``n_eff``: about the share of the
    variance in a fit's risk, the most early stopping could take off) is
    the gain assumed at least; ``walk_rtol`` the excess over ``best`` the
    search gives up (``docs/speed_policy.rst``). Rows whose limit stands
    further above are not fitted: their trajectories would have to gain
    more than any fitted one did and more than ``floor``."""
    gain = early_stopping_gain(limits, mins)
    return [r for r in range(len(limits))
            if r not in mins and np.isfinite(limits[r])
            and (limits[r] * (1.0 - gain) < best
                 or limits[r] * (1.0 - floor) < best * (1.0 - walk_rtol))]


def gain_floor(scores, n_eff, statistics):
    """The early-stopping gain the walk assumes at least of a trajectory it
    has not fitted (:func:`promising_rows`): the statistical policy's
    ``walk_gain_df`` times the degrees of freedom of the converged fits'
    choice over ``n_eff``, the effective sample size (the sum of the sample
    weights, ``n_samples`` without: the denominator of the converged risk's
    ``df / n_eff``, :func:`skacv.risk_alpha_path`), 0 where they are
    unknown."""
    limits = np.where(np.isfinite(scores.score), scores.score, np.inf)
    a = int(np.argmin(limits))
    df = np.asarray(scores.path.df, dtype=np.float64)
    if a >= df.shape[0] or not np.isfinite(df[a]) or not n_eff > 0:
        return 0.0
    return max(statistics.walk_gain_df * float(df[a]) / n_eff, 0.0)


def effective_samples(X, fit_params):
    """``n_eff``: the sum of ``fit_params``' ``sample_weight``, or the number
    of samples of ``X`` without weights."""
    sw = fit_params.get("sample_weight")
    if sw is None:
        return float(_num_samples(X))
    return float(np.sum(np.asarray(sw, dtype=np.float64)))


def widen_rows(mins, start, n_grid, neighbors):
    """The rows of the alpha grid whose trajectories are still to be fitted.

    The search starts at ``start`` (the converged fits' choice) and its
    ``neighbors`` rows on each side; then, with ``mins`` the smallest
    criterion of every fitted trajectory (``{row: value}``), the rows within
    ``neighbors`` of the best trajectory's that are not fitted yet. The
    window stays contiguous, and the search ends when the best trajectory
    has ``neighbors`` fitted rows on each side (or the grid's end) that
    score higher: a local minimum over the grid of the trajectories'
    minima, found by a walk that widens towards any edge that improves.
    ``neighbors=0`` fits the converged choice's trajectory only.
    """
    if mins:
        finite = {r: v for r, v in mins.items() if np.isfinite(v)}
        center = min(finite, key=lambda r: (finite[r], r)) if finite else start
    else:
        center = start
    lo, hi = max(0, center - neighbors), min(n_grid - 1, center + neighbors)
    return [r for r in range(lo, hi + 1) if r not in mins]


def warn_converged(choice, alpha, max_iter, criterion, rtol):
    """Say that the converged fit was selected over an iterate cut off at
    ``max_iter`` (the fix: raise it); nothing when the trajectory reached
    its own minimum before, or came within ``rtol`` (the statistical
    policy's ``limit_rtol``) of its limit (the
    converged fit then scores as well as what the trajectory could reach)."""
    if (choice is None or max_iter is None or choice.trajectory_iteration < max_iter
            or choice.trajectory_min <= choice.score + rtol * abs(choice.score)):
        return
    end = choice.trajectory_iteration
    grown = f", grown past max_iter={max_iter}" if end > max_iter else ""
    warnings.warn(
        f"The trajectory of alpha={alpha!r} was still improving at its last iteration, "
        f"{end}{grown} (estimated {criterion} {choice.trajectory_min:.6g}), above the "
        f"converged fit of that alpha ({choice.score:.6g}): the converged fit is selected "
        f"(best_iteration_ is None). Raise max_iter (e.g. to {2 * end}) to select an "
        "early-stopped iterate.", SelectionBoundaryWarning, stacklevel=5)


def too_few_message(n_samples, criterion, df):
    """The error of an alpha path on which ``criterion`` is undefined at every alpha."""
    df = np.asarray(df, dtype=np.float64)
    df = df[np.isfinite(df)]
    need = int(np.ceil(df.min())) + 2 if df.size else 3
    what = {"risk": "the converged risk estimate", "loo": "the converged leave-one-out",
            "kfold": "K-fold CV"}[criterion]
    return (f"n_samples={n_samples} is too few for {what} along this alpha grid: every "
            f"alpha's solution fits the data exactly (degrees of freedom >= n_samples), "
            f"where the estimate is undefined. At least {max(need, n_samples + 1)} samples "
            "are needed for these penalties; give more samples or larger alphas.")


def fit_path_search(search, X, y, fit_params):
    """``search="path"`` over alpha: score the converged fits, fit the
    trajectories around their choice (:func:`joint_argmin`) and set
    ``search``'s selection and ``cv_results_``."""
    crit = search.criterion_
    # every alpha's converged fit scored by the criterion; the trajectories
    # are fitted on X as given (feature names)
    scores = score_alpha_path(search.estimator, X, y, fit_params, crit, search.param_grid,
                              search.path_params, search._splits, search._alpha_path)

    checks = SharedChecks()  # the candidates of every round validate the same X once

    def fit(rows, limits):
        cands = [{"alpha": scores.values[r]} for r in rows]
        return fit_candidates(search, cands, X, y, fit_params, limits, prune=False,
                              checks=checks)

    statistics = search._policies[1]
    n_eff = effective_samples(X, fit_params)
    floor = gain_floor(scores, n_eff, statistics)
    taken("walk_gain_floor", n_eff=n_eff, floor=floor)
    choice = joint_argmin(scores, crit, search.path_neighbors, fit, statistics.tie_rtol,
                          floor, statistics.walk_rtol)
    results = cv_results([{"alpha": v} for v in scores.values], crit, choice.paths,
                         choice.mins, choice.best_iters, choice.times, rows=choice.rows,
                         n_rows=len(scores.values))
    results.update(scores.columns(crit))
    set_choice(search, choice, choice.estimator, choice.row,
               {"alpha": scores.values[choice.row]}, scores.path, results)


def set_choice(search, choice, estimator, index, params, alpha_path, results):
    """Set ``search``'s selection (``estimator_``, ``best_*``,
    ``alpha_path_``, ``cv_results_``, ``_converged``, ``_selected_paths``)
    from a :class:`PathChoice` and its fitted ``estimator`` (a deferred
    full fit is run now, :func:`~skacv.model_selection._kfold_search.full_fit`)."""
    search._converged = choice.converged
    search._selected_paths = choice.paths[choice.rows.index(choice.row)]
    search.estimator_ = full_fit(estimator)
    search.best_index_ = index
    search.best_iteration_ = choice.iteration
    search.best_params_ = params
    search.alpha_path_ = alpha_path
    search.cv_results_ = results
