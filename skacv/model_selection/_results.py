"""What a search of :class:`~skacv.TrajectoryEarlyStoppingCV` reports: the
joint argmin over (grid point, iteration), the ``cv_results_`` table, and
the warnings on the choice (on the grid's edge or at ``max_iter``; a risk
estimate flagged where the choice lies)."""

import warnings
from collections import defaultdict
from numbers import Integral, Real

import numpy as np
from sklearn.utils.validation import column_or_1d

from ..exceptions import (
    SelectionBoundaryWarning,
    UnreliableEstimateWarning,
    WeightScaleWarning,
)
from ..utils._validation import user_stacklevel
from ._alpha_path import path_option
from ._criteria import CRITERIA, PATH_ATTRS
from ._stages import finite_min, selectable


class UndefinedEstimate(ValueError):
    """The criterion is undefined at every iterate of the grid."""


def select(paths, criterion, tie_rtol):
    """Joint argmin ``(index, iteration, mins, best_iterations)`` over (grid
    point, iteration) of the ``criterion``'s ``paths`` (one dict per grid
    point; flagged iterates excluded), ties (within ``tie_rtol``) to the
    first grid point, then the earliest iteration; ``mins`` and
    ``best_iterations``: each path's smallest estimate and argmin."""
    attr = CRITERIA[criterion][0]
    paths = [selectable(p, attr) for p in paths]
    mins = np.array([finite_min(p) for p in paths])
    m = mins.min()
    if not np.isfinite(m):
        raise UndefinedEstimate(
            f"Every {attr} of the grid is NaN, infinite or flagged as unreliable "
            "(risk_reliable_): the estimate is undefined (e.g. a diverging path or "
            "degenerate data). Try criterion='loo'."
        )
    threshold = m + tie_rtol * abs(m)
    i = int(np.flatnonzero(mins <= threshold)[0])
    path = np.where(np.isfinite(paths[i]), paths[i], np.inf)
    best_iters = [int(np.argmin(np.where(np.isfinite(p), p, np.inf))) for p in paths]
    best_iters[i] = int(np.flatnonzero(path <= threshold)[0])
    return i, best_iters[i], mins, np.array(best_iters)


def _masked(n, rows, values, fill, dtype):
    """A masked column of ``n`` rows with ``values`` at ``rows`` (the others masked)."""
    col = np.ma.MaskedArray(np.full(n, fill, dtype=dtype), mask=np.ones(n, dtype=bool))
    col[rows] = values
    return col


def cv_results(candidates, criterion, paths, mins, best_iters, times, rows=None, n_rows=None):
    """``cv_results_``: one row per candidate (``n_rows`` of them, then with
    a ``trajectory_fitted`` column), the fitted ones (``paths``, ``mins``,
    ``best_iters``, ``times``) at ``rows`` (default: all)."""
    n = len(candidates) if n_rows is None else n_rows
    rows = np.arange(n) if rows is None else np.asarray(rows)
    results = {"params": list(candidates)}
    results.update(param_columns(candidates))
    fitted = np.zeros(n, dtype=bool)
    fitted[rows] = True
    results["best_iteration"] = _masked(n, rows, best_iters, 0, int)
    results[f"min_{criterion}"] = _masked(n, rows, mins, np.nan, np.float64)
    # rank like scipy's "min" method (ties share the smallest rank)
    order = np.asarray(mins)
    results[f"rank_{criterion}"] = _masked(
        n, rows, 1 + np.searchsorted(np.sort(order), order, side="left"), 0, np.int32)
    for attr in (*PATH_ATTRS, "kfold_path_"):
        if any(attr in p for p in paths):
            col = np.empty(n, dtype=object)
            for r, p in zip(rows, paths, strict=True):
                col[r] = p.get(attr)
            results[attr[:-1]] = col
    results["n_iter"] = _masked(n, rows, [len(p[CRITERIA[criterion][0]]) - 1 for p in paths],
                                0, int)
    results["fit_time"] = _masked(n, rows, times, np.nan, np.float64)
    if n_rows is not None:
        results["trajectory_fitted"] = fitted
    return results


def param_columns(candidates):
    """``param_<name>`` masked arrays (numeric dtype when every value is)."""
    n = len(candidates)
    values = defaultdict(dict)
    for i, params in enumerate(candidates):
        for name, value in params.items():
            values[name][i] = value
    out = {}
    for name, col in values.items():
        mask = np.ones(n, dtype=bool)
        mask[list(col)] = False
        if all(map(_is_number, col.values())):
            data = np.array([col.get(i, 0) for i in range(n)])
        else:
            data = np.empty(n, dtype=object)
            for i, v in col.items():
                data[i] = v
        out[f"param_{name}"] = np.ma.MaskedArray(data, mask=mask)
    return out


class GatheredWarnings:
    """The warnings of a search's fits, recorded (``with``) and reissued at
    most one of each kind (:meth:`reissue`), from the user's call. A fit's
    flags (:class:`~skacv.exceptions.UnreliableEstimateWarning`) are
    reissued without their advice, and only when the selected path of the
    risk has flagged iterates (flagged iterates are never selected).
    """

    def __enter__(self):
        self._recorder = warnings.catch_warnings(record=True)
        self.caught = self._recorder.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        return self._recorder.__exit__(*exc)

    def reissue(self, criterion, flagged=True):
        """Warn once per category (the first message, with the count of
        the others), at the user's call; ``flagged``: the selected path has
        flagged iterates."""
        kinds = defaultdict(list)
        for w in self.caught:
            if issubclass(w.category, WeightScaleWarning):
                continue  # the search's own, before its fits (where the criterion reads them)
            # a fit's flags (warn_unreliable's message) apart from the search's own
            flags = (issubclass(w.category, UnreliableEstimateWarning)
                     and "is unreliable from iteration" in str(w.message))
            kinds[w.category, flags].append(str(w.message))
        for (category, flags), messages in kinds.items():
            first = messages[0]
            if flags:
                if criterion != "risk" or not flagged:
                    continue
                first = (first[: first.rindex(" Use ")] + " Flagged iterates are never "
                         "selected (risk_reliable in cv_results_).")
            more = len(messages) - 1
            if more:
                first += f" ({more} more warning{'s' if more > 1 else ''} of this kind in " \
                         "this search.)"
            warnings.warn(first, category, stacklevel=user_stacklevel())


def one_target(y):
    """``y`` as one target: a column raveled (with scikit-learn's
    DataConversionWarning); several columns refused."""
    if y is None:
        return y
    shape = getattr(y, "shape", None)
    shape = np.asarray(y).shape if shape is None else shape
    if len(shape) != 2:
        return y
    if shape[1] != 1:
        raise ValueError(
            f"y has {shape[1]} columns: TrajectoryEarlyStoppingCV selects one iterate "
            "for one target. Search each target on its own, e.g. "
            "sklearn.multioutput.MultiOutputRegressor(TrajectoryEarlyStoppingCV(...)); the "
            "estimators themselves fit a path per column of a 2-D y.")
    return column_or_1d(y, warn=True)


def unreliable_risk(flags, best_iteration, n_iter_no_change):
    """Why a risk estimate chosen by ``"auto"`` cannot be trusted (``None``
    when it can): ``flags`` (``risk_reliable_`` of the chosen path) flags an
    iterate up to ``best_iteration + n_iter_no_change``, where the minimum
    may lie."""
    if flags is None:
        return None
    window = best_iteration + (n_iter_no_change or len(flags))
    flagged = np.flatnonzero(~(np.asarray(flags[: window + 1]) > 0))
    if flagged.size == 0:
        return None
    return (f"risk_reliable_ flags {flagged.size} iterates of the chosen path from "
            f"iteration {flagged[0]} on (the chosen iteration is "
            f"{best_iteration}), so its minimum is not trustworthy.")


def _is_number(v):
    return isinstance(v, (Real, np.number)) and not isinstance(v, (bool, np.bool_))


def warn_boundary(grids, best_params, best_iteration, max_iter, criterion, n_iter=None,
                  reached=False, flat=()):
    """A :class:`~skacv.exceptions.SelectionBoundaryWarning` for a choice on
    the edge of what was searched: the first or last value of a numeric
    parameter with at least 3 values in one of ``grids`` (a list of dicts),
    unless it is in ``flat`` (the criterion no longer moves there:
    :func:`flat_edge`), or the last iteration of a path that reached
    ``max_iter`` (``n_iter``: its length, ``max_iter`` or more where the
    search grew it), unless it ``reached`` its limit there (the rule that
    ended it: :func:`~skacv.model_selection._stages.at_boundary`)."""
    for name, chosen in best_params.items():
        for grid in grids:
            vals = (grid or {}).get(name)
            if (vals is None or len(vals) < 3 or not all(map(_is_number, vals))
                    or chosen not in vals or name in flat):
                continue
            if chosen in (min(vals), max(vals)):
                side = "smallest" if chosen == min(vals) else "largest"
                shown = (str(int(chosen)) if isinstance(chosen, Integral)
                         else f"{float(chosen):.6g}")
                warnings.warn(
                    f"The chosen {name}={shown} is the {side} value of the grid: the "
                    f"best {name} may lie outside it. Widen the grid of {name!r} "
                    f"(param_grid) beyond {shown}.", SelectionBoundaryWarning,
                    stacklevel=user_stacklevel())
            break
    if not isinstance(max_iter, Integral) or best_iteration is None or reached:
        return
    end = max_iter if n_iter is None else n_iter
    if best_iteration >= max(end, max_iter):
        grown = (f" (the search grew the path past max_iter={max_iter}, up to its budget "
                 f"of {end} steps)" if end > max_iter else "")
        warnings.warn(
            f"The chosen iteration is the last one, {end}{grown}: the {criterion} "
            f"estimate was still decreasing there. Raise max_iter (e.g. to {2 * end}).",
            SelectionBoundaryWarning, stacklevel=user_stacklevel())


def flat_edge(results, criterion, best_index, rtol):
    """The names of a one-parameter grid whose choice, on the grid's edge,
    scores within ``rtol`` (relative) of the best of the next value inward:
    the criterion has stopped moving there, and a wider grid would gain less
    than the automatic grid's own edge rule asks for (``limit_rtol``). A grid
    point scores its best ``criterion`` in ``results`` (``cv_results_``):
    over its trajectory (``min_*``) and its converged fit (``path_*``,
    ``search="path"``), ``NaN`` where not fitted. Empty where the
    neighbour was not scored."""
    columns = [np.ma.filled(np.ma.asarray(results[key], dtype=np.float64), np.nan)
               for key in (f"min_{criterion}", f"path_{criterion}") if key in results]
    if not columns:
        return set()
    values = np.fmin.reduce(columns) if len(columns) > 1 else columns[0]
    params = results["params"]
    names = {name for p in params for name in p}
    if len(names) != 1:
        return set()
    name = names.pop()
    grid = [p.get(name) for p in params]
    if len(set(grid)) < 3 or not all(map(_is_number, grid)):
        return set()
    chosen, ordered = grid[best_index], sorted(set(grid))
    if chosen not in (ordered[0], ordered[-1]):
        return set()
    inward = ordered[1] if chosen == ordered[0] else ordered[-2]
    near = values[[i for i, v in enumerate(grid) if v == inward]]
    near = near[np.isfinite(near)]
    best = values[best_index]
    if not (near.size and np.isfinite(best)):
        return set()
    return {name} if best >= near.min() - rtol * abs(near.min()) else set()


def set_iterate(estimator, iteration, coef=None, intercept=None):
    """Make ``coef_`` / ``intercept_`` of a fitted trajectory estimator the
    iterate ``iteration`` of its stored path (in place; the path is kept),
    or, with ``iteration=None``, the given ``coef`` and ``intercept`` (the
    converged fit that ``search="path"`` selected). Returns ``estimator``."""
    coef_shape = np.shape(estimator.coef_)
    if iteration is None:
        estimator.coef_ = np.asarray(coef, dtype=estimator.coef_path_.dtype).reshape(coef_shape)
        estimator.intercept_ = intercept
    else:
        n_path = estimator.coef_path_.shape[-1]
        if not 0 <= iteration < n_path:
            raise ValueError(f"iteration must be in [0, {n_path - 1}], got {iteration}.")
        estimator.coef_ = np.array(estimator.coef_path_[..., iteration]).reshape(coef_shape)
        intercept = estimator.intercept_path_[..., iteration]
        if np.ndim(estimator.intercept_):
            intercept = np.array(intercept).reshape(np.shape(estimator.intercept_))
        estimator.intercept_ = intercept
    # the methods that default to the iterate of coef_ (debiased_coef, ...)
    estimator.record_iterate(iteration)
    return estimator


def warn_grid_edge(search):
    """A :class:`~skacv.exceptions.SelectionBoundaryWarning` where the chosen
    alpha of the fitted ``search`` is the smallest of an automatic grid,
    which is not always negligible: the criterion still falls more than
    ``limit_rtol`` there. ``search="path"``: one grid per ``l1_ratio``
    over the mixing, its converged criterion; an estimator's own grid walked to its end
    (``_walked``): the trajectories' minima. A ridge grid continued past
    ``eps`` ends where leave-one-out chose (``criterion="auto"`` reads the
    risk estimate down to its minimum) or at the rounding of the Gram's
    eigenvalues: no warning."""
    params, crit = search.cv_results_["params"], search.criterion_
    if search.search_ == "path":
        if "alpha" in (search.param_grid or {}):
            return
        ratio = search.best_params_.get("l1_ratio")
        grid = [i for i, p in enumerate(params) if p.get("l1_ratio") == ratio]  # contiguous
        values = search.cv_results_[f"path_{crit}"]
        eps = path_option(search.path_params, "eps")
        fix = f"path_params={{'eps': {eps / 100:g}}}"
    elif len(params) == len(search._walked["alpha"]):
        ratio, grid, values = None, list(range(len(params))), search.cv_results_[f"min_{crit}"]
        eps, top = search._policies[1].auto_grid_eps, params[0]["alpha"]
        fix = (f"param_grid={{'alpha': np.geomspace({top:.3g}, {top * eps / 100:.3g}, "
               f"{len(params) + 3})}}")
    else:
        return
    end = np.asarray(values, dtype=float)[grid[-2:]]
    if (search.best_index_ != grid[-1] or len(grid) < 2
            or not end[-1] < (1 - search._policies[1].limit_rtol) * end[0]):
        return
    of = "" if ratio is None else f" of l1_ratio={ratio:g}"
    if search.search_ == "path" and len(grid) > path_option(search.path_params, "n_alphas"):
        # a ridge grid continued past eps (criterion "loo", or "auto" reading the
        # risk estimate down to leave-one-out's minimum): its end is leave-one-out's
        # choice or the rounding of the Gram's eigenvalues, not eps
        return
    warnings.warn(
        f"The chosen alpha={search.best_params_['alpha']:.6g} is the smallest of the "
        f"automatic grid{of} (eps={eps:g} times its largest), where the "
        f"{crit} estimate was still falling: the best alpha may be smaller. "
        f"Lower it, e.g. {fix}.", SelectionBoundaryWarning, stacklevel=user_stacklevel())
