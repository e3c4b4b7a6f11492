"""``search="path"``: the joint argmin of the criterion over (alpha,
iteration), the converged fits included (the steps: the user guide's "How
the choice is made").

The alpha path is solved and scored at convergence (:func:`score_alpha_path`),
the trajectories are fitted from the converged choice outwards
(:func:`widen_rows`, then :func:`promising_rows`), each stopped knowing its
limit, and the converged fit competes with every iterate
(:func:`converged_choice`).
"""

import contextlib
import dataclasses
import re
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import Bunch

from .._trace import taken
from ..estimators._setup import SharedChecks
from ..exceptions import SelectionBoundaryWarning, UnreliableEstimateWarning
from ..linalg._design import forget_shared, make_design, release_shared
from ..utils._compat import _num_samples
from ..utils._parallel import effective_n_jobs
from ..utils._validation import check_sample_weight, user_stacklevel
from ._alpha_path import (
    alpha_path_fits,
    held_out_sse,
    lasso_alpha_grid,
    path_option,
    ridge_loo_falls,
    ridge_path_of,
    risk_alpha_path,
    supports_alpha_path,
)
from ._candidates import fit_candidates
from ._converged_risk import support_loo_ratio
from ._criteria import CRITERIA
from ._kfold_search import full_fit, stacks_grid
from ._results import UndefinedEstimate, cv_results, select
from ._stages import finite_min, selectable


@dataclasses.dataclass
class AlphaScores:
    """The criterion at convergence along the alpha grid."""

    path: Bunch  # the result of skacv.risk_alpha_path (its first m alphas)
    values: list  # every alpha of the grid, decreasing (the path's order), as given
    score: np.ndarray  # (n_grid,) the criterion at convergence (NaN: not scored)
    path_risk: np.ndarray  # (n_grid,) the converged risk estimate (NaN beyond the path)
    reason: np.ndarray  # (n_grid,) object: why an alpha has no score ("" for a scored one)
    time: float  # seconds taken
    criterion: str = "risk"  # the criterion of ``score`` (auto's risk may move to "loo")

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
                     alpha_path=risk_alpha_path, auto_statistics=None):
    """Solve and score the alpha path of ``param_grid`` (``{"alpha": [...]}``
    or ``None``: the path's own grid) with ``path_params``
    (:class:`AlphaScores`); ``splits``: the folds of
    ``"kfold"``; ``alpha_path``: the signature of
    :func:`skacv.risk_alpha_path`; ``auto_statistics``: the statistical
    policy of ``criterion="auto"``, which may move a ridge path from the
    risk estimate to leave-one-out (:func:`_ridge_auto_path`; ``None``:
    the criterion as given)."""
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
    spread = (criterion == "risk" and auto_statistics is not None
              and ridge_path_of(estimator))  # the risk's path with its leave-one-out
    # every alpha of the grid, decreasing (the path's order), as given
    order = None if given is None else np.argsort(-alphas, kind="stable")
    if criterion == "kfold" and not ridge_path_of(estimator):
        path, score = _kfold_lasso_path(estimator, X, y, sw, alphas, splits, options)
        values = ([float(a) for a in path.alphas] if given is None
                  else [given[i] for i in order])
    else:
        with _alpha_path_advice():
            path = alpha_path(clone(estimator), X, y, alphas=alphas, sample_weight=sw,
                              criterion="loo" if criterion == "loo" or spread else "risk",
                              **{**options, **({"n_alphas_no_change": None} if spread else {})})
        if spread:
            criterion, path = _ridge_auto_path(alpha_path, estimator, X, y, alphas, sw, options,
                                               path, auto_statistics)
        elif criterion == "risk" and auto_statistics is not None:
            _check_far_rows(estimator, X, y, sw, path, auto_statistics)
        if given is None:
            n_alphas = path_option(options, "n_alphas")
            full = (path.alphas if path.alphas.shape[0] >= n_alphas else np.geomspace(
                path.alphas[0], path.alphas[0] * path_option(options, "eps"), num=n_alphas))
            values = [float(a) for a in full]
        else:
            full, values = alphas[order], [given[i] for i in order]
        if criterion == "kfold":
            with _alpha_path_advice():
                score = kfold_alpha_path(estimator, X, y, sw, splits, full, options)
        else:
            score = np.full(len(values), np.nan)
            score[:path.alphas.shape[0]] = path.loo if criterion == "loo" else path.risk
    m, n_grid = path.alphas.shape[0], len(values)
    path_risk = np.full(n_grid, np.nan)
    path_risk[:m] = path.risk
    path_time = time.perf_counter() - tic
    finite = np.isfinite(score)
    why = ("undefined: a sample has leverage 1 or its left-out problem stayed unsolved "
           "(the trace's lasso_loo_unfinished, lasso_loo_descent_limit)" if criterion == "loo"
           else "undefined: the fit (nearly) interpolates (df >= 0.99 n_samples) or a sample "
           "has leverage 1")
    reason = np.array(["" if ok else why for ok in finite], dtype=object)
    if criterion != "kfold":
        reason[m:] = (f"not solved: the alpha path stopped after n_alphas_no_change="
                      f"{options['n_alphas_no_change']} alphas without a new minimum of "
                      f"the {criterion} estimate, at fits whose df reached the statistical "
                      f"policy's path_walk_df of the samples (df {path.df[m - 1]:.4g} at the "
                      "last solved alpha)")
    if not finite.any():
        weights = None if sw is None else float(np.sum(np.asarray(sw, dtype=np.float64)))
        raise ValueError(too_few_message(n, criterion, path.df, weights))
    return AlphaScores(path, values, score, path_risk, reason, path_time, criterion)


def _kfold_lasso_path(estimator, X, y, sw, alphas, splits, options):
    """K-fold CV of a Lasso or elastic-net path: ``(path, score)``, the
    path over the whole grid, decreasing.
    The folds come first, on the full data's grid; the full data's path
    is then solved to ``tol`` times each alpha's K-fold CV error, the
    precision the folds' paths were solved to (the risk estimate's, the
    training residuals' and the violators' cut, costs several times the
    steps on p > n designs for a column the choice does not read: the
    ``path_risk`` of ``cv_results_`` is the estimate at these solutions)."""
    grid = {k: path_option(options, k) for k in ("n_alphas", "eps")}
    full = lasso_alpha_grid(estimator, X, y, alphas=alphas, sample_weight=sw, **grid)
    with _alpha_path_advice():
        score = kfold_alpha_path(estimator, X, y, sw, splits, full, options)
        path = alpha_path_fits(clone(estimator), X, y, alphas=full, sample_weight=sw,
                               precisions=score, **{**options, "n_alphas_no_change": None})
    return path, score


def _ridge_auto_path(alpha_path, estimator, X, y, alphas, sw, options, path, statistics):
    """``criterion="auto"``'s ridge path: ``(criterion, path)``, ``path``
    the risk's path with its leave-one-out (which it loses).

    **The grid's end.** Where leave-one-out still falls at the automatic
    grid's end, the grid continues while it falls (``ridge_grid_extends``,
    :func:`~._alpha_path.ridge_loo_falls`); where the risk estimate also
    still falls there, it is read on the continued grid too. Both falling
    says the grid ends above the penalty the data want (columns nearly
    collinear, least squares with ``n >> p``: modeldata's meats, loans,
    cigarette demand by state; ``RidgeCV``'s alphas lie decades below
    the grid's end). The risk estimate reads the continued grid down to
    leave-one-out's minimum, no further: there both agree the penalty
    should be smaller; past it only the risk estimate, which reads one mean
    leverage, may keep falling into near-interpolation (the grid continued
    on the risk estimate alone made that fall the choice: docs/benchmarks.rst).

    **The switch.** ``"loo"`` on the continued path where leave-one-out at
    the risk estimate's converged choice is more than
    ``ridge_auto_loo_ratio`` times its minimum: far rows spread the
    leverages and the risk estimate, which reads their mean (as GCV), is
    optimistic there (Ecdat's Crime, world_pop; Rad & Maleki 2020 for the
    diagonal). On NIR spectra (the largest leverage 0.96-0.99 against a
    mean 0.34-0.50 at small alphas) it fired at the 30-point grid's end;
    read on the continued grid, the risk estimate agrees with leave-one-out
    there."""
    loo = path.pop("loo")
    risk = np.where(np.isfinite(path.risk), path.risk, np.inf)
    if not np.isfinite(risk).any():
        return "risk", path
    chosen, longer = int(np.argmin(risk)), None
    scores = np.where(np.isfinite(loo), loo, np.inf)
    patience = options.get("n_alphas_no_change")
    if (alphas is None and patience is not None and ridge_loo_falls(loo, patience, statistics)
            and statistics.ridge_grid_extends):  # the grid continued where it still falls
        longer = alpha_path(clone(estimator), X, y, alphas=None, sample_weight=sw,
                            criterion="loo", **options)
        scores = np.where(np.isfinite(longer.loo), longer.loo, np.inf)
    # the risk estimate read on the continued grid where it falls at the end too,
    # down to leave-one-out's minimum (past it, the grid's patience)
    extended = (longer is not None and ridge_loo_falls(risk, patience, statistics)
                and int(np.argmin(scores)) >= risk.shape[0])
    if extended:
        read = _first_alphas(longer, int(np.argmin(scores)) + 1)
        risk = np.where(np.isfinite(read.risk), read.risk, np.inf)
        chosen = int(np.argmin(risk))
    best = float(scores.min())
    taken("ridge_leverage_spread", ratio=scores[chosen] / best if best > 0 else np.inf,
          continued=longer is not None, risk_continued=extended)
    if not (np.isfinite(best) and scores[chosen] > statistics.ridge_auto_loo_ratio * best):
        if extended:
            read.pop("loo")
            return "risk", read
        return "risk", path
    warnings.warn(  # user -> _fit_context's wrapper -> fit -> ... -> here
        f"criterion='auto' uses leave-one-out (criterion_='loo'): at the risk estimate's "
        f"choice alpha={(read if extended else path).alphas[chosen]:.4g} the exact "
        f"leave-one-out error of the converged ridge fits is {scores[chosen] / best:.3g} "
        f"times its minimum (more than {statistics.ridge_auto_loo_ratio:g}): the leverages "
        "spread and the risk estimate, which reads their mean, falls into "
        "near-interpolation. Set criterion='risk' to use it anyway.",
        UnreliableEstimateWarning, stacklevel=user_stacklevel())
    if longer is not None:
        return "loo", longer
    path.loo = loo
    return "loo", path


def _first_alphas(path, m):
    """The alpha path ``path`` (a Bunch of per-alpha arrays, ``coefs`` of
    shape ``(n_features, n_alphas)``) cut to its first ``m`` alphas."""
    return Bunch(**{key: (value[:, :m] if key == "coefs" else value[:m])
                    for key, value in path.items()})


def _check_far_rows(estimator, X, y, sw, path, statistics):
    """``criterion="auto"``'s check of the Lasso's risk estimate at its
    converged choice: where leave-one-out of the support's least squares,
    by its leverages (:func:`~._converged_risk.support_loo_ratio`), is
    more than ``auto_alo_ratio`` times the estimate, far rows carry the
    fit and the estimate, which reads their mean leverage, is optimistic:
    raise :class:`~._results.UndefinedEstimate`, which moves the search
    to K-fold CV with a warning that says why. On 533 splits of 106
    public real designs (docs/benchmarks.rst) it fired on the 20
    where the risk estimate's choice had more than 1.2 times
    ``LassoCV``'s test error and K-fold CV did better, on 46 of the 415
    where it was within 5 %, on none of the default suite's.
    ``search="grid"`` runs it at its choice (:func:`check_far_rows_at`)."""
    if not _far_rows_apply(estimator, X):
        return
    risk = np.where(np.isfinite(path.risk), path.risk, np.inf)
    if not np.isfinite(risk).any():
        return
    i = int(np.argmin(risk))
    # (inside the search: the alpha path's own design of X, shared)
    design = make_design(X, check_sample_weight(sw, X, X.dtype), estimator.fit_intercept)
    ratio = support_loo_ratio(design, y, path.coefs[:, i], risk[i])
    taken("far_rows", ratio=ratio)
    if ratio > statistics.auto_alo_ratio:
        raise UndefinedEstimate(
            f"at its converged choice alpha={path.alphas[i]:.4g} the leave-one-out error of "
            f"the support's least squares (by its leverages) is {ratio:.3g} times the risk "
            f"estimate (more than {statistics.auto_alo_ratio:g}): far rows (heavy-tailed "
            "columns, rare levels, an outlying target) carry the fit, and the estimate, "
            "which reads their mean leverage, is optimistic.")


def _far_rows_apply(estimator, X):
    """Whether the far-rows check reads this search: a Lasso's alpha path
    (``l1_ratio`` 1, not the ridge's) on an in-memory ``X``."""
    return (getattr(estimator, "l1_ratio", 1.0) == 1.0 and not ridge_path_of(estimator)
            and (isinstance(X, np.ndarray) or sp.issparse(X)))


def check_far_rows_at(estimator, params, X, y, sw, statistics):
    """``search="grid"``'s far-rows check (``criterion="auto"``, the risk
    estimate chosen): :func:`_check_far_rows` on the converged fit at the
    chosen candidate's ``params`` (one alpha, solved as the alpha path
    solves it), where the estimator has a Lasso's alpha path; the grid's
    trajectories are the choice, the converged fit only the check's point.
    Raises :class:`~._results.UndefinedEstimate` as the path search does."""
    est = clone(estimator).set_params(**params)
    if not supports_alpha_path(est):
        return
    X, y = est.validate_fit_data(X, y)  # (as the path search: an array from here on)
    if not _far_rows_apply(est, X):
        return
    with warnings.catch_warnings():  # (the trajectories' fit says what it says)
        warnings.simplefilter("ignore", ConvergenceWarning)
        path = risk_alpha_path(est, X, y, alphas=[float(est.alpha)], sample_weight=sw)
    _check_far_rows(est, X, y, sw, path, statistics)


@contextlib.contextmanager
def _alpha_path_advice():
    """The alpha path's ConvergenceWarning with the search's advice: its
    ``max_iter`` and ``tol`` are the search's ``path_params`` (twice the
    ``max_iter`` the message names)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        message = str(w.message)
        used = re.search(r"within max_iter=(\d+) ", message)
        if (issubclass(w.category, ConvergenceWarning) and used
                and "Increase max_iter or tol" in message):
            message = message.replace(
                "Increase max_iter or tol",
                f"Set 'max_iter': {2 * int(used.group(1))} (or a larger 'tol') in the search's "
                "path_params (the solver of the converged fits along alpha; the estimator's "
                "own max_iter bounds its trajectories)")
        warnings.warn_explicit(message, w.category, w.filename, w.lineno)


def kfold_alpha_path(estimator, X, y, sample_weight, splits, alphas, options):
    """K-fold CV of the converged fits of every alpha (``alphas`` decreasing):
    the weighted mean squared error over all held-out samples. Each fold's
    path is solved to the precision its held-out errors need
    (:func:`~skacv.model_selection._alpha_path.alpha_path_fits`)."""
    kw = {k: v for k, v in options.items() if k in ("tol", "max_iter", "eps")}
    Xr = X.tocsr() if sp.issparse(X) else np.asarray(X)
    y = np.asarray(y, dtype=np.float64)
    sw = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    total, weight = np.zeros(len(alphas)), 0.0
    for train, test in splits:
        rows, held = Xr[train], Xr[test]
        w = np.ones(len(test)) if sw is None else sw[test]
        fold = alpha_path_fits(clone(estimator), rows, y[train], alphas=alphas,
                               sample_weight=None if sw is None else sw[train],
                               n_alphas_no_change=None, held_out=(held, y[test], w), **kw)
        # a fold's rows are a new array, its shared design a new one that no
        # later path reads: it goes now with its caches (centred copy, Gram
        # matrix, working-set buffer), not at the search's end (K at once)
        forget_shared(rows)
        del rows
        total += held_out_sse(held, y[test], w, fold.coefs, fold.intercepts)
        weight += float(w.sum())
    return total / weight


@dataclasses.dataclass
class ConvergedChoice:
    """The converged fit of the chosen alpha, selected over the iterates of
    its trajectory (:func:`converged_choice`)."""

    coef: np.ndarray  # (n_features,) the alpha path's solution
    intercept: float
    score: float  # the criterion at convergence (best_risk_)
    trajectory_min: float  # the smallest criterion along the trajectory
    trajectory_iteration: int  # where the trajectory reached it


def converged_choice(scores, row, joint_min, trajectory_min, trajectory_iteration, rtol):
    """The converged fit of row ``row`` (:class:`ConvergedChoice`) when it
    scores lower than ``joint_min``, the smallest criterion of every
    trajectory (``trajectory_min`` and ``trajectory_iteration``: row
    ``row``'s own), else ``None``: the limit of the trajectory's criterion,
    one more candidate of the same criterion. Ties (within ``rtol``) go to
    the iterate."""
    score = float(scores.score[row])
    if (row >= scores.path.alphas.shape[0] or not np.isfinite(score)
            or not score < joint_min - rtol * abs(joint_min)):
        return None
    return ConvergedChoice(np.array(scores.path.coefs[:, row]),
                           float(scores.path.intercepts[row]), score, float(trajectory_min),
                           int(trajectory_iteration))


@dataclasses.dataclass
class PathChoice:
    """The joint argmin of :func:`joint_argmin`."""

    rows: list  # the rows of the grid whose trajectories were fitted, increasing
    paths: list  # their estimate paths
    times: list  # and fit times
    mins: np.ndarray  # (len(rows),) the smallest selectable criterion of each
    best_iters: np.ndarray  # (len(rows),) and where
    row: int  # the chosen row
    iteration: object  # the chosen iteration (None: the converged fit)
    converged: object  # ConvergedChoice or None
    estimator: object  # the fitted trajectory of the chosen row


def joint_argmin(scores, criterion, neighbors, fit, rtol, floor=0.0, walk_rtol=0.0):
    """The joint argmin of ``criterion`` over (alpha, iteration) and the
    converged fits (:class:`PathChoice`).

    ``fit(rows, limits, bar)`` fits the trajectories of the grid's
    ``rows``, each knowing its limit (``inf``: none) and the smallest
    criterion known so far (``bar``: the converged fits' and the fitted
    paths' minima), and returns their estimate paths, fit times and
    ``{index: estimator}``. The rows widen by
    :func:`widen_rows`, then by :func:`promising_rows` (``floor``,
    ``walk_rtol``); ``rtol``: ties. Fits that can no longer be chosen are
    freed as the walk goes.
    """
    limits = np.where(np.isfinite(scores.score), scores.score, np.inf)
    a = int(np.argmin(limits))  # the converged fits' choice
    n_grid = len(scores.values)
    fitted = {}  # row -> [paths, fit time, estimator or None]
    attr = CRITERIA[criterion][0]
    rows = widen_rows({}, a, n_grid, neighbors)
    bar = float(np.min(limits))
    while rows:
        paths, times, kept = fit(rows, [float(limits[r]) for r in rows], bar)
        for j, r in enumerate(rows):
            fitted[r] = [paths[j], times[j], kept[j]]
        mins = {r: finite_min(selectable(entry[0], attr)) for r, entry in fitted.items()}
        best = min(mins.values())
        bar = min(bar, best)
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
    """``max(1 - min_r / limit_r, 0)`` over the fitted rows ``mins`` (``{row:
    smallest criterion}``) with finite, positive values."""
    gains = [1.0 - v / limits[r] for r, v in mins.items()
             if np.isfinite(v) and np.isfinite(limits[r]) and limits[r] > 0]
    return min(max([0.0, *gains]), 1.0)


def promising_rows(limits, mins, best, floor=0.0, walk_rtol=0.0):
    """The rows not fitted yet that could still hold the joint argmin: a
    converged score (``limits``) that the largest early-stopping gain seen
    (:func:`early_stopping_gain`) would take below ``best``, the smallest
    criterion found, or that a gain of ``floor`` (:func:`gain_floor`) would
    take more than ``walk_rtol`` below it. Converged scores need not be
    unimodal in alpha, and the gain seen underestimates the others' (why:
    ``walk_gain_df`` in docs/speed_policy.rst)."""
    gain = early_stopping_gain(limits, mins)
    return [r for r in range(len(limits))
            if r not in mins and np.isfinite(limits[r])
            and (limits[r] * (1.0 - gain) < best
                 or limits[r] * (1.0 - floor) < best * (1.0 - walk_rtol))]


def gain_floor(scores, n_eff, statistics):
    """The early-stopping gain assumed at least of a trajectory not fitted:
    ``walk_gain_df`` times the converged choice's df over ``n_eff`` (0 where
    unknown)."""
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
    """The rows not fitted yet within ``neighbors`` of the best trajectory's
    (``mins``: ``{row: smallest criterion}`` of the fitted ones; none yet:
    of ``start``, the converged choice). Empty once the best has
    ``neighbors`` fitted rows on each side: a local minimum of the
    trajectories' minima over the grid."""
    if mins:
        finite = {r: v for r, v in mins.items() if np.isfinite(v)}
        center = min(finite, key=lambda r: (finite[r], r)) if finite else start
    else:
        center = start
    lo, hi = max(0, center - neighbors), min(n_grid - 1, center + neighbors)
    return [r for r in range(lo, hi + 1) if r not in mins]


def warn_converged(choice, alpha, max_iter, criterion, rtol, last, ended_converged):
    """Say that the converged fit was selected over an iterate cut off at
    ``max_iter``: the trajectory's smallest criterion at its last iteration
    ``last``, past ``max_iter``, where it ended at its step budget. Nothing
    when its minimum lies before its end (its iterates never went below the
    converged fit), when it ended by convergence (``ended_converged``: its
    duality gap; more steps cannot help) or came within ``rtol`` of its
    limit."""
    if (choice is None or max_iter is None or choice.trajectory_iteration < max(max_iter, last)
            or ended_converged
            or choice.trajectory_min <= choice.score + rtol * abs(choice.score)):
        return
    end = choice.trajectory_iteration
    grown = f", grown past max_iter={max_iter}" if end > max_iter else ""
    warnings.warn(
        f"The trajectory of alpha={alpha:.6g} was still improving at its last iteration, "
        f"{end}{grown} (estimated {criterion} {choice.trajectory_min:.6g}), above the "
        f"converged fit of that alpha ({choice.score:.6g}): the converged fit is selected "
        f"(best_iteration_ is None). Raise max_iter (e.g. to {2 * end}) to select an "
        "early-stopped iterate.", SelectionBoundaryWarning, stacklevel=user_stacklevel())


def too_few_message(n_samples, criterion, df, weight_sum=None):
    """The error of an alpha path on which ``criterion`` is undefined at every alpha
    (``weight_sum``: the sample weights' sum, the estimates' number of samples)."""
    df = np.asarray(df, dtype=np.float64)
    df = df[np.isfinite(df)]
    need = int(np.ceil(df.min())) + 2 if df.size else 3
    what = {"risk": "the converged risk estimate", "loo": "the converged leave-one-out",
            "kfold": "K-fold CV"}[criterion]
    counted = ("" if weight_sum is None else
               f" (the estimates count the sample weights' sum, {weight_sum:.6g}: frequency "
               "weights)")
    return (f"n_samples={n_samples}{counted} is too few for {what} along this alpha grid: every "
            f"alpha's solution fits the data exactly (degrees of freedom >= n_samples), "
            f"where the estimate is undefined. At least {max(need, n_samples + 1)} samples "
            "are needed for these penalties; give more samples or larger alphas.")


def fit_path_search(search, X, y, fit_params):
    """``search="path"`` over alpha: set ``search``'s selection and ``cv_results_``."""
    statistics = search._policies[1]
    # every alpha's converged fit scored by the criterion; the trajectories
    # are fitted on X as given (feature names). "auto"'s risk estimate of a
    # ridge path may move to leave-one-out (the leverages spread)
    scores = score_alpha_path(
        search.estimator, X, y, fit_params, search.criterion_, search.param_grid,
        search.path_params, search._splits, search._alpha_path,
        statistics if getattr(search, "_auto_risk", False) else None)
    search.criterion_ = crit = scores.criterion
    release_shared("path_columns")  # (the paths' working sets: the trajectories copy their own)

    checks = SharedChecks()  # the candidates of every round validate the same X once
    # K-fold CV of every alpha at once, one pass a step for all, where the
    # folds' block allows it: the exhaustive search (the whole grid's rows)
    n_grid = len(scores.values)
    stack = (crit == "kfold" and search.path_neighbors > 0 and n_grid > 1
             and effective_n_jobs(search.n_jobs) == 1
             and stacks_grid(search._prepared({"alpha": scores.values[0]}), X, search._splits,
                             search.n_iter_no_change, search._fold_dtype, search._policies))

    def fit(rows, limits, bar):
        cands = [{"alpha": scores.values[r]} for r in rows]
        return fit_candidates(search, cands, X, y, fit_params, limits, prune=False,
                              checks=checks, stack=stack, bar=bar)

    n_eff = effective_samples(X, fit_params)
    floor = gain_floor(scores, n_eff, statistics)
    taken("walk_gain_floor", n_eff=n_eff, floor=floor)
    choice = joint_argmin(scores, crit, n_grid if stack else search.path_neighbors, fit,
                          statistics.tie_rtol, floor, statistics.walk_rtol)
    results = cv_results([{"alpha": v} for v in scores.values], crit, choice.paths,
                         choice.mins, choice.best_iters, choice.times, rows=choice.rows,
                         n_rows=len(scores.values))
    results.update(scores.columns(crit))
    set_choice(search, choice, choice.estimator, choice.row,
               {"alpha": scores.values[choice.row]}, scores.path, results)


def set_choice(search, choice, estimator, index, params, alpha_path, results):
    """Set ``search``'s selection from a :class:`PathChoice` and its fitted
    ``estimator`` (a deferred full fit runs now)."""
    search._converged = choice.converged
    search._selected_paths = choice.paths[choice.rows.index(choice.row)]
    search.estimator_ = full_fit(estimator)
    search.best_index_ = index
    search.best_iteration_ = choice.iteration
    search.best_params_ = params
    search.alpha_path_ = alpha_path
    search.cv_results_ = results
