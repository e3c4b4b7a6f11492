"""Tests of the walk of ``search="path"`` beyond its window: which alphas
:func:`promising_rows` fits (the largest early-stopping gain seen, and the
gain floor on the larger alphas), and the floor's effective sample size.

References: the rule's inequalities by hand, the exhaustive search (every
alpha's whole trajectory and converged fit) on built risk paths, and the
expanded data of frequency weights.
"""

import numpy as np
import pytest
from sklearn.utils import Bunch
from test_selection import _data, _GainRidge, assert_walk_finds, walk_searches

import skacv.model_selection._path_search as path_search_module
from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso
from skacv._statistics import get_statistics
from skacv._trace import record


def _brute_promising(limits, mins, best, floor, walk_rtol):
    """The rule written out row by row."""
    gains = [1 - v / limits[r] for r, v in mins.items()]
    gain = min(max([0.0, *gains]), 1.0)
    return [r for r, lim in enumerate(limits)
            if r not in mins and np.isfinite(lim)
            and (lim * (1 - gain) < best or lim * (1 - floor) < best * (1 - walk_rtol))]


def test_promising_rows_against_the_rule_by_hand():
    """The converged choice is row 4 (limit 2.0), its window 3-5 gains 0.5 %
    at most. Rows 2 and 6 lie within a 3 % floor of the best (2.03 * 0.97 <
    1.99 * 0.99): both are fitted, on either side of the window; rows 0, 1
    are beyond it, row 7 has no converged score. Then random cases."""
    limits = np.array([5.0, 3.0, 2.03, 2.2, 2.0, 2.1, 2.03, np.inf])
    mins = {3: 2.189, 4: 1.99, 5: 2.0895}
    got = path_search_module.promising_rows(limits, mins, 1.99, 0.03, 0.01)
    assert got == [2, 6] == _brute_promising(limits, mins, 1.99, 0.03, 0.01)
    # no floor: the gain seen (0.5 %) reaches neither
    assert path_search_module.promising_rows(limits, mins, 1.99, 0.0, 0.01) == []
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(3, 12))
        lim = 1 + rng.uniform(0, 0.1, n)
        lim[rng.random(n) < 0.1] = np.inf
        start = int(rng.integers(n))
        fitted = {r: float(lim[r] * (1 - rng.uniform(-0.02, 0.03)))
                  for r in range(max(0, start - 1), min(n, start + 2)) if np.isfinite(lim[r])}
        if not fitted:
            continue
        b = min(fitted.values())
        f, w = rng.uniform(0, 0.05), rng.uniform(0, 0.02)
        assert (path_search_module.promising_rows(lim, fitted, b, f, w)
                == _brute_promising(lim, fitted, b, f, w))


class _SmallerGainRidge(_GainRidge):
    """:class:`_GainRidge` where the early-stopping gain lies on the side of
    the smaller alphas: the window's rows (3, 4, 5) gain 0.5 % or less (row
    5's trajectory does not reach its limit), row 6, one step past the
    window, gains 4.4 % and holds the exhaustive argmin (as on credit's
    split 19, whose window's staged paths showed no gain and the two
    smallest alphas gained 2 %)."""

    LIMITS = (5.0, 3.0, 2.5, 2.2, 2.0, 2.1, 2.03)
    MINS = (4.9, 2.9, 2.45, 2.189, 1.99, 2.11, 1.94)


@pytest.mark.filterwarnings("ignore::skacv.exceptions.SelectionBoundaryWarning")
@pytest.mark.parametrize("staged", [True, False])
def test_the_walk_floors_the_smaller_alphas_too(speed_policy, statistical_policy, staged):
    """Row 6 (a smaller alpha than the converged choice, row 4) lies within
    the floor (``walk_gain_df`` times the converged choice's df / n: 0.5 * 4
    / 60) of the window's best, and the gain seen (0.5 %) does not reach
    it: the floor fits it and the search returns the exhaustive argmin.
    Without a floor on that side (or with none) the walk stops at the
    window, 2.6 % above."""
    exhaustive, search, former = walk_searches(_SmallerGainRidge, staged, speed_policy,
                                               statistical_policy)
    assert_walk_finds(exhaustive, search, former, 6,
                      [False, False, False, True, True, True, True], 1.02)


def test_gain_floor_divides_by_the_effective_sample_size():
    """Frequency weights and the expanded rows have the same Lasso path
    (the same df) and the same converged risk, whose ``df / n_eff`` divides
    by the weights' sum: the floor too (``n_samples`` would make it the
    expanded data's times its growth)."""
    rng = np.random.default_rng(3)
    n, p = 40, 6
    X = rng.standard_normal((n, p))
    y = X @ np.r_[1.0, -0.5, np.zeros(p - 2)] + rng.standard_normal(n)
    w = rng.integers(1, 4, n).astype(float)
    Xe, ye = np.repeat(X, w.astype(int), axis=0), np.repeat(y, w.astype(int))
    est = TrajectoryLasso()
    grid = {"alpha": list(np.geomspace(0.5, 0.005, 8))}
    kw = dict(criterion="risk", param_grid=grid, splits=None,
              path_params={"tol": 1e-10, "n_alphas_no_change": None})
    weighted = path_search_module.score_alpha_path(est, X, y, {"sample_weight": w}, **kw)
    expanded = path_search_module.score_alpha_path(est, Xe, ye, {}, **kw)
    np.testing.assert_allclose(weighted.score, expanded.score, rtol=1e-6)
    np.testing.assert_array_equal(weighted.path.df, expanded.path.df)
    st = get_statistics()
    n_eff = path_search_module.effective_samples(X, {"sample_weight": list(w)})
    assert n_eff == w.sum() == Xe.shape[0]
    assert path_search_module.effective_samples(X, {}) == n
    f_weighted = path_search_module.gain_floor(weighted, n_eff, st)
    f_expanded = path_search_module.gain_floor(expanded, Xe.shape[0], st)
    assert f_weighted == pytest.approx(f_expanded, rel=1e-12) and f_weighted > 0
    a = int(np.nanargmin(weighted.score))
    assert f_weighted == pytest.approx(st.walk_gain_df * weighted.path.df[a] / w.sum())
    # unknown df: no floor
    none = Bunch(score=np.array([1.0, 2.0]), path=Bunch(df=np.array([np.nan, 1.0])))
    assert path_search_module.gain_floor(none, 10.0, st) == 0.0


@pytest.mark.filterwarnings("ignore::skacv.exceptions.SelectionBoundaryWarning")
def test_the_search_passes_the_effective_sample_size():
    """``fit_path_search`` gives ``gain_floor`` the weights' sum."""
    X, y = _data(n=50, p=8)
    w = np.full(50, 3.0)
    with record() as paths:
        TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=20), criterion="risk", search="path",
                                  param_grid={"alpha": [0.5, 0.1, 0.02]}).fit(
            X, y, sample_weight=w)
    (details,) = paths.details("walk_gain_floor")
    assert details["n_eff"] == 150.0
    assert details["floor"] > 0


def _suppressor_data(n, seed):
    """``y = 10 (x_0 - x_1) + e`` with ``x_0``, ``x_1`` correlated 0.99 and 18
    noise features: alone, each of ``x_0``, ``x_1`` barely correlates with
    ``y``, so noise features enter the Lasso path first and the pair only at
    small penalties, together."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 20))
    X[:, 1] = 0.99 * X[:, 0] + np.sqrt(1 - 0.99**2) * X[:, 1]
    return X, 10.0 * (X[:, 0] - X[:, 1]) + rng.standard_normal(n)


def test_the_alpha_path_walks_past_a_bump_of_the_converged_estimate(statistical_policy):
    """The converged estimate along alpha rises for several alphas (noise
    features entering) before the pair enters and it falls far below its
    first minimum. The default search walks past the bump (its fits stay
    below ``path_walk_df`` of the 60 samples: every alpha solved) and
    reaches the exhaustive search's criterion (every alpha's whole
    trajectory to ``max_iter`` and converged fit; the default grows its
    paths past ``max_iter``, so it may go lower); the former walk (ended
    three alphas past the minimum, ``path_walk_df=0``) stops at the
    bump, more than twice as high, and its choice's held-out error on
    20000 fresh rows (noise variance 1; sampling error about 1 %) is more
    than 1.6 times the default's."""
    X, y = _suppressor_data(60, seed=2)
    X_new, y_new = _suppressor_data(20000, seed=102)
    search = TrajectoryEarlyStoppingCV(TrajectoryLasso(), random_state=0).fit(X, y)
    exhaustive = TrajectoryEarlyStoppingCV(
        TrajectoryLasso(), random_state=0, path_neighbors=30, n_iter_no_change=None,
        path_params={"n_alphas_no_change": None}).fit(X, y)
    assert search.search_ == "path" and search.criterion_ == "risk"
    assert np.all(np.isfinite(search.cv_results_["path_risk"]))
    assert search.best_risk_ <= 1.01 * exhaustive.best_risk_
    statistical_policy(path_walk_df=0.0)
    former = TrajectoryEarlyStoppingCV(TrajectoryLasso(), random_state=0).fit(X, y)
    assert np.isnan(former.cv_results_["path_risk"][-1])
    assert former.best_risk_ > 2.0 * search.best_risk_

    def held_out(s):
        return np.mean((s.predict(X_new) - y_new) ** 2)
    assert held_out(former) > 1.6 * held_out(search)
