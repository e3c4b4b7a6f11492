"""``criterion="auto"`` of the Lasso's path search where rows of high
leverage make the risk estimate optimistic: the exact leave-one-out error of
the converged fit at the risk estimate's choice against that estimate
(:func:`~skacv.model_selection._alpha_path.loo_over_risk`).

References: brute-force refits of scikit-learn's ``Lasso`` (each sample left
out), and the searches with ``criterion="loo"`` / ``"risk"`` given.
"""

import warnings

import numpy as np
import pytest
from sklearn.linear_model import Lasso

from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso, risk_alpha_path
from skacv._statistics import statistics_context
from skacv._trace import record
from skacv.exceptions import UnreliableEstimateWarning
from skacv.model_selection._alpha_path import loo_over_risk


def _far_pairs(seed=0, n=100, p=10, far=25.0, noise=15.0):
    """Gaussian rows, then two pairs of rows far out along a feature without
    effect, each pair with opposite noise: the fit bends to them, leaving one
    out the other pins the slope."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X[:, :5] @ np.ones(5) + rng.standard_normal(n)
    Xf = rng.standard_normal((4, p))
    Xf[:, -1] = [far, far, -far, -far]
    yf = Xf[:, :5] @ np.ones(5) + noise * np.array([1.0, -1.0, 1.0, -1.0])
    return np.vstack([X, Xf]), np.r_[y, yf]


def _refit_loo(X, y, alpha):
    """Mean squared left-out residual of ``Lasso(alpha)`` refits."""
    res = []
    for i in range(X.shape[0]):
        keep = np.arange(X.shape[0]) != i
        fit = Lasso(alpha=alpha, tol=1e-12, max_iter=100000).fit(X[keep], y[keep])
        res.append(y[i] - fit.predict(X[i:i + 1])[0])
    return float(np.mean(np.square(res)))


def test_loo_over_risk_is_the_refits_leave_one_out_over_the_estimate():
    X, y = _far_pairs()
    path = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas_no_change=3, tol=1e-10)
    ratio, row = loo_over_risk(TrajectoryLasso(), X, y, None, path)
    assert row == int(np.nanargmin(path.risk))
    brute = _refit_loo(X, y, path.alphas[row]) / path.risk[row]
    assert ratio == pytest.approx(brute, rel=1e-6)
    assert ratio > 1.3  # the far rows: leave-one-out sees them, the estimate their mean


def test_auto_moves_to_leave_one_out_above_the_ratio_and_says_so_once():
    """Above ``lasso_auto_loo_ratio`` the whole search is ``criterion="loo"``'s
    (alpha path and trajectories), with one warning at the user's call;
    below it the search is ``criterion="risk"``'s, silent."""
    X, y = _far_pairs()
    path = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas_no_change=3)
    ratio, _ = loo_over_risk(TrajectoryLasso(), X, y, None, path)
    with statistics_context(lasso_auto_loo_ratio=0.9 * ratio), record() as paths, \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        moved = TrajectoryEarlyStoppingCV(TrajectoryLasso(), random_state=0).fit(X, y)
    assert paths.details("lasso_leverage_check")[0]["ratio"] == pytest.approx(ratio)
    said = [w for w in caught if issubclass(w.category, UnreliableEstimateWarning)
            and "uses leave-one-out" in str(w.message)]
    assert len(said) == 1 and said[0].filename == __file__
    assert moved.criterion_ == "loo" and "path_loo" in moved.cv_results_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo = TrajectoryEarlyStoppingCV(TrajectoryLasso(), criterion="loo",
                                        random_state=0).fit(X, y)
    assert loo.best_params_ == moved.best_params_
    assert loo.best_iteration_ == moved.best_iteration_
    with statistics_context(lasso_auto_loo_ratio=1.1 * ratio), warnings.catch_warnings():
        warnings.simplefilter("error", UnreliableEstimateWarning)
        kept = TrajectoryEarlyStoppingCV(TrajectoryLasso(), random_state=0).fit(X, y)
    risk = TrajectoryEarlyStoppingCV(TrajectoryLasso(), criterion="risk",
                                     random_state=0).fit(X, y)
    assert kept.criterion_ == "risk" and kept.best_params_ == risk.best_params_
    assert kept.best_iteration_ == risk.best_iteration_


def test_auto_keeps_the_risk_estimate_without_far_rows():
    """An isotropic design: leave-one-out within a few percent of the estimate
    at its choice, below the default ratio: nothing moves, nothing said; a
    design with more features than samples is not checked."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((120, 15))
    y = X[:, :5] @ np.ones(5) + rng.standard_normal(120)
    with record() as paths, warnings.catch_warnings():
        warnings.simplefilter("error", UnreliableEstimateWarning)
        search = TrajectoryEarlyStoppingCV(TrajectoryLasso(), random_state=0).fit(X, y)
    assert paths.details("lasso_leverage_check")[0]["ratio"] < 1.2
    assert search.criterion_ == "risk"
    Xw = rng.standard_normal((120, 200))
    with record() as paths, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        TrajectoryEarlyStoppingCV(TrajectoryLasso(), random_state=0).fit(Xw, Xw[:, 0])
    assert "lasso_leverage_check" not in paths
