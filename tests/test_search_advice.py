"""The search's boundary advice says what would help.

* ``warn_converged``: "Raise max_iter" only for a trajectory cut off at its
  step budget while still improving; not for one whose minimum lies before
  its end (grown past ``max_iter``, then rising: its iterates never went
  below the converged fit) nor for one that ended by its duality gap.
* The automatic grid's edge: a chosen alpha at the smallest of the automatic
  grid where the converged criterion still falls says to lower ``eps``, in
  the mixing search (one grid per ``l1_ratio``) as in the Lasso's.
"""

import warnings

import numpy as np
import pytest

from skacv import TrajectoryEarlyStoppingCV, TrajectoryElasticNet, TrajectoryLasso
from skacv._statistics import statistics_context
from skacv.exceptions import SelectionBoundaryWarning
from skacv.model_selection._path_search import ConvergedChoice, warn_converged


def _spectra(seed, n=80, p=40):
    """Smooth, strongly correlated columns (like NIR spectra): slow paths."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, p)
    basis = np.array([np.cos(np.pi * k * t) for k in range(6)])
    X = rng.standard_normal((n, 6)) @ basis + 0.01 * rng.standard_normal((n, p))
    X = (X - X.mean(0)) / X.std(0)
    beta = rng.standard_normal(p) * (rng.random(p) < 0.2)
    return X, X @ beta + 0.5 * rng.standard_normal(n)


def test_converged_fit_over_an_interior_minimum_gives_no_max_iter_advice():
    """The path grows past max_iter=10 to its budget (``max_iter_growth`` 2:
    20 steps; its converged score lies far below, so it would grow on),
    reaches its minimum at 12 and rises; the converged fit scores lower and
    is selected. Raising max_iter cannot change that: no "still improving"
    warning (it said so before)."""
    X, y = _spectra(14)
    with warnings.catch_warnings(record=True) as record, \
            statistics_context(max_iter_growth=2):
        warnings.simplefilter("always")
        search = TrajectoryEarlyStoppingCV(TrajectoryLasso(solver="fista", max_iter=10),
                                           random_state=0).fit(X, y)
    res, i = search.cv_results_, search.best_index_
    # the situation: the converged fit chosen over a trajectory whose minimum
    # lies past max_iter but before its last iteration
    assert search.best_iteration_ is None
    assert 10 < res["best_iteration"][i] < res["n_iter"][i]
    assert res["min_risk"][i] > search.best_risk_
    assert not [w for w in record if issubclass(w.category, SelectionBoundaryWarning)
                and "still improving" in str(w.message)]


@pytest.mark.parametrize("iteration, last, ended, warns", [
    (40, 40, False, True),    # cut off at its budget while improving: more steps may help
    (25, 40, False, False),   # its minimum before its end: it rose after
    (40, 40, True, False),    # ended by its duality gap: more steps change nothing
    (8, 8, False, False),     # within max_iter
])
def test_warn_converged_cases(iteration, last, ended, warns):
    choice = ConvergedChoice(np.zeros(3), 0.0, score=1.0, trajectory_min=1.2,
                             trajectory_iteration=iteration)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        warn_converged(choice, 0.1, 10, "risk", 0.01, last, ended)
    assert bool(record) is warns
    if warns:
        assert "Raise max_iter" in str(record[0].message)


@pytest.mark.parametrize("mixing", [False, True])
def test_smallest_alpha_of_the_automatic_grid_warns(mixing):
    """eps=0.1 cuts the grid where the risk at convergence still falls fast
    (a dense signal, little noise): both searches choose its smallest alpha
    and say to lower eps (the mixing search said nothing)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 10))
    y = X @ rng.standard_normal(10) + 0.1 * rng.standard_normal(200)
    est, grid = ((TrajectoryElasticNet(), {"l1_ratio": [0.5, 1.0]}) if mixing
                 else (TrajectoryLasso(), None))
    with pytest.warns(SelectionBoundaryWarning, match=r"smallest of the automatic grid") as rec:
        search = TrajectoryEarlyStoppingCV(est, param_grid=grid, random_state=0,
                                           path_params={"eps": 0.1}).fit(X, y)
    ratio = search.best_params_.get("l1_ratio")
    rows = [i for i, p in enumerate(search.cv_results_["params"]) if p.get("l1_ratio") == ratio]
    assert search.best_index_ == rows[-1]  # the smallest alpha of its grid
    risk = search.cv_results_["path_risk"][rows]
    assert risk[-1] < 0.9 * risk[-2]  # still falling there
    message = next(str(w.message) for w in rec if "automatic grid" in str(w.message))
    assert "path_params={'eps': 0.001}" in message
    assert ("l1_ratio=" in message) is mixing
