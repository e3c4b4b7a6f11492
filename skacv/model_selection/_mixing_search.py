"""``search="path"`` over the elastic net's mixing: the joint argmin of the
criterion over (``l1_ratio``, alpha, iteration), the converged fits included,
as ``ElasticNetCV(l1_ratio=[...])`` searches it, with one alpha path per
``l1_ratio`` (values taken increasing):

1. *Converged fits.* Every ``l1_ratio``'s alpha path is solved and scored
   (:func:`~skacv.model_selection._path_search.score_alpha_path`); all of
   them, since converged scores can be flat or noisy along ``l1_ratio``.
2. *Trajectories.* The ``l1_ratio`` of the best converged fit gets the
   Lasso's search (:func:`~skacv.model_selection._path_search.joint_argmin`);
   each of its ``path_neighbors`` neighbours on each side gets the
   trajectory of its own converged choice, and a neighbour that scores
   lowest gets the whole search in turn (its fitted trajectories reused),
   until the best ``l1_ratio`` had the whole search and its neighbours
   scored higher.

The selection is the lowest of the searched minima (ties: the smaller
``l1_ratio``).
"""

import numpy as np
from sklearn.base import clone

from ..estimators._setup import SharedChecks
from ..linalg._design import release_shared
from ._candidates import fit_candidates
from ._path_search import joint_argmin, score_alpha_path, set_choice
from ._results import cv_results
from ._stages import finite_min


def mixing_grid(param_grid):
    """``(l1_ratios sorted increasing, {"alpha": [...]} or None)`` of a grid
    searched over the mixing, else ``None``."""
    if not isinstance(param_grid, dict) or "l1_ratio" not in param_grid:
        return None
    if not set(param_grid) <= {"alpha", "l1_ratio"}:
        return None
    ratios = list(param_grid["l1_ratio"])
    if not ratios:
        raise ValueError("param_grid['l1_ratio'] is empty: give at least one value.")
    order = sorted(range(len(ratios)), key=lambda i: float(ratios[i]))
    ratios = [ratios[i] for i in order]
    alphas = param_grid.get("alpha")
    return ratios, (None if alphas is None else {"alpha": list(alphas)})


def searches_path(param_grid):
    """Whether ``search="auto"`` runs ``"path"`` on this grid."""
    if param_grid is None:
        return True
    if not isinstance(param_grid, dict):
        return False
    if set(param_grid) == {"alpha"}:
        return len(param_grid["alpha"]) > 1
    mixing = mixing_grid(param_grid)
    return mixing is not None and (mixing[1] is None or len(mixing[1]["alpha"]) > 1)


def _joint_min(choice):
    """The criterion at a :class:`~skacv.model_selection._path_search.PathChoice`:
    its converged fit's score, or its best iterate's."""
    if choice.converged is not None:
        return choice.converged.score
    return float(choice.mins[choice.rows.index(choice.row)])


class _Walk:
    """The alpha paths (``scores[k]``) and trajectories by row
    (``fitted[k]``) of each ``l1_ratio`` ``k``, computed on demand and kept."""

    def __init__(self, search, X, y, fit_params, ratios, alpha_grid):
        self.search, self.X, self.y, self.fit_params = search, X, y, fit_params
        self.ratios, self.alpha_grid = ratios, alpha_grid
        self.scores, self.fitted = {}, {}
        self.checks = SharedChecks()  # every ratio's candidates validate the same X once

    def score(self, k):
        if k not in self.scores:
            s = self.search
            est = clone(s.estimator).set_params(l1_ratio=self.ratios[k])
            self.scores[k] = score_alpha_path(est, self.X, self.y, self.fit_params,
                                              s.criterion_, self.alpha_grid, s.path_params,
                                              s._splits)
        return self.scores[k]

    def best_converged(self, k):
        return finite_min(self.score(k).score)

    def fit(self, k):
        """``fit(rows, limits, bar)`` of :func:`joint_argmin` for ``l1_ratio`` ``k``,
        reusing the trajectories fitted before."""
        cache = self.fitted.setdefault(k, {})

        def fit(rows, limits, bar):
            new = [(r, lim) for r, lim in zip(rows, limits, strict=True) if r not in cache]
            if new:
                cands = [{"alpha": self.scores[k].values[r], "l1_ratio": self.ratios[k]}
                         for r, _ in new]
                paths, times, kept = fit_candidates(
                    self.search, cands, self.X, self.y, self.fit_params, [lim for _, lim in new],
                    prune=False, checks=self.checks, bar=bar)
                for j, (r, _) in enumerate(new):
                    cache[r] = (paths[j], times[j], kept[j])
            return ([cache[r][0] for r in rows], [cache[r][1] for r in rows],
                    {j: cache[r][2] for j, r in enumerate(rows)})

        return fit

    def release(self, keep):
        """Free the fitted estimators of every ``l1_ratio`` but ``keep``."""
        for k, cache in self.fitted.items():
            if k != keep:
                for r, (paths, t, _) in list(cache.items()):
                    cache[r] = (paths, t, None)


def fit_mixing_search(search, X, y, fit_params):
    """``search="path"`` over ``l1_ratio``: sets the search's selection."""
    crit = search.criterion_
    ratios, alpha_grid = mixing_grid(search.param_grid)
    if "l1_ratio" not in search.estimator.get_params(deep=False):
        raise ValueError(
            f"param_grid searches 'l1_ratio' but {type(search.estimator).__name__} has no "
            "such parameter: use TrajectoryElasticNet (TrajectoryLasso is its l1_ratio=1).")
    walk = _Walk(search, X, y, fit_params, ratios, alpha_grid)
    converged = {k: walk.best_converged(k) for k in range(len(ratios))}
    # the paths' shared Gram matrix of the supports' columns and spectrum
    # (RidgeSupportDF), transposed copy of X~ and working-set columns are not
    # read by the trajectories
    for name in ("support_gram", "support_spectrum", "path_transposed", "path_columns"):
        release_shared(name)
    start = min(converged, key=lambda k: (converged[k], k))
    nb = search.path_neighbors
    choices, values, whole = {}, {}, set()
    tie_rtol = search._policies[1].tie_rtol

    def probe(k, neighbors):
        choices[k] = joint_argmin(walk.score(k), crit, neighbors, walk.fit(k), tie_rtol)
        values[k] = _joint_min(choices[k])
        if neighbors == nb:
            whole.add(k)

    probe(start, nb)
    while True:
        m = min(values.values())
        best = min(k for k, v in values.items() if v <= m + tie_rtol * abs(m))
        walk.release(best)
        if best not in whole:
            probe(best, nb)
            continue
        todo = [k for k in range(max(0, best - nb), min(len(ratios), best + nb + 1))
                if k not in values]
        if not todo:
            break
        for k in todo:
            probe(k, 0)
    choice = choices[best]
    table = [walk.scores[k] for k in range(len(ratios))]
    offsets = np.cumsum([0] + [len(s.values) for s in table])
    set_choice(search, choice, walk.fitted[best][choice.row][2],
               int(offsets[best] + choice.row),
               {"alpha": walk.scores[best].values[choice.row], "l1_ratio": ratios[best]},
               walk.scores[best].path, _results(crit, ratios, table, choices, offsets))


def _results(crit, ratios, scores, choices, offsets):
    """``cv_results_``: one row per (``l1_ratio`` increasing, alpha decreasing)."""
    cands = [{"alpha": v, "l1_ratio": r} for r, s in zip(ratios, scores, strict=True)
             for v in s.values]
    rows, paths, times, mins, iters = [], [], [], [], []
    for k in sorted(choices):
        c = choices[k]
        rows += [int(offsets[k] + r) for r in c.rows]
        paths += list(c.paths)
        times += list(c.times)
        mins += list(c.mins)
        iters += list(c.best_iters)
    results = cv_results(cands, crit, paths, np.asarray(mins), np.asarray(iters), times,
                         rows=rows, n_rows=len(cands))
    columns = [s.columns(crit) for s in scores]
    for name in columns[0]:
        parts = [col[name] for col in columns]
        if name == "path_time":
            results[name] = float(sum(parts))
        elif isinstance(parts[0], np.ma.MaskedArray):
            results[name] = np.ma.concatenate(parts)
        else:
            results[name] = np.concatenate(parts)
    return results
