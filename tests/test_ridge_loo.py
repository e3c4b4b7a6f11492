"""The ridge path's exact leave-one-out in closed form, and the default
search of ``IterativeRidge`` where the leverages spread.

References: brute-force refits of scikit-learn's ``Ridge`` (one copy of a
sample removed: frequency weights), ``RidgeCV``'s own leave-one-out errors,
held-out errors of new draws.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import Ridge, RidgeCV
from threadpoolctl import threadpool_limits

from skacv import IterativeRidge, TrajectoryEarlyStoppingCV, risk_alpha_path
from skacv._statistics import statistics_context
from skacv._trace import record
from skacv.exceptions import UnreliableEstimateWarning


@pytest.fixture(autouse=True)
def _one_blas_thread():
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _refit_loo(X, y, alpha, fit_intercept, sample_weight):
    """Weighted mean squared left-out residual: each sample's weight lowered
    by ``min(w_i, 1)`` (one copy removed), Ridge refitted."""
    w = np.ones(X.shape[0]) if sample_weight is None else sample_weight
    total = 0.0
    for i in np.flatnonzero(w > 0):
        wi = w.copy()
        wi[i] -= min(w[i], 1.0)
        fit = Ridge(alpha=alpha, fit_intercept=fit_intercept, solver="cholesky").fit(
            X, y, sample_weight=wi)
        total += w[i] * (y[i] - fit.predict(X[i: i + 1])[0]) ** 2
    return total / w.sum()


@pytest.mark.parametrize("n, p", [(40, 12), (18, 45)])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
def test_closed_form_loo_is_the_refits(n, p, fit_intercept, weighted, sparse):
    """``criterion="loo"`` of the ridge path (the diagonal of each alpha's
    hat matrix from the path's one eigendecomposition, either side of the
    Gram) against brute-force refits: the same to 1e-10 at every alpha,
    with integer and fractional weights (zeros included), dense and sparse
    (centred implicitly); without weights also against RidgeCV's
    leave-one-out (its alpha is Ridge's, as IterativeRidge's)."""
    rng = np.random.default_rng(n + p)
    X = rng.standard_normal((n, p)) * rng.uniform(0.2, 3.0, p) + 0.5
    y = X[:, :3] @ [2.0, -1.0, 1.5] + rng.standard_normal(n) + 3.0
    sw = None
    if weighted:
        sw = rng.integers(0, 4, n).astype(float)
        sw[:3] = [0.5, 2.5, 0.0]
    path = risk_alpha_path(IterativeRidge(fit_intercept=fit_intercept),
                           sp.csr_matrix(X) if sparse else X, y,
                           sample_weight=sw, criterion="loo", n_alphas=6, eps=1e-2)
    ref = [_refit_loo(X, y, a, fit_intercept, sw) for a in path.alphas]
    np.testing.assert_allclose(path.loo, ref, rtol=1e-10)
    if not weighted:
        cv = RidgeCV(alphas=path.alphas, fit_intercept=fit_intercept,
                     store_cv_results=True).fit(X, y)
        np.testing.assert_allclose(path.loo, cv.cv_results_.mean(axis=0), rtol=1e-10)


def _nir_like(rng, n, p=60):
    """A decaying spectrum (singular values from 1 to 1e-5, the signal in
    every direction, as NIR spectra) and a draw of ``n`` rows."""
    rotation, _ = np.linalg.qr(rng.normal(size=(p, p)))
    w = rng.normal(size=p) * np.geomspace(1, 0.1, p)

    def draw(m):
        Z = rng.normal(size=(m, p))
        return Z * np.geomspace(1, 1e-5, p) @ rotation, Z @ w + 0.3 * rng.normal(size=m)

    return draw


def test_default_ridge_search_continues_its_grid_where_both_estimates_fall():
    """``TrajectoryEarlyStoppingCV(IterativeRidge())`` on a decaying
    spectrum: the risk estimate and leave-one-out both still fall at the
    automatic grid's end (30 alphas), so ``"auto"`` reads the risk estimate
    on the grid continued while leave-one-out falls, down to leave-one-out's
    minimum: the choice lies inside the continued grid (no edge warning: its
    end is leave-one-out's choice, not ``eps``), its held-out error
    (new draws) a fraction of the 30-point grid's choice and within 10 % of
    ``criterion="loo"``'s. Without the continuation (``ridge_grid_extends``
    off) the search stays at the 30-point grid's end and says so."""
    rng = np.random.default_rng(0)
    draw = _nir_like(rng, 80)
    X, y = draw(80)
    X_new, y_new = draw(4000)
    with record() as paths, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search = TrajectoryEarlyStoppingCV(IterativeRidge(), random_state=0).fit(X, y)
    event = paths.details("ridge_leverage_spread")[0]
    assert event["continued"] and event["risk_continued"]
    assert search.criterion_ == "risk" and "loo" not in search.alpha_path_
    # the continued grid, read down to leave-one-out's minimum (its last alpha)
    loo_path = risk_alpha_path(IterativeRidge(), X, y, criterion="loo", n_alphas_no_change=3)
    n_path = search.alpha_path_.alphas.size
    assert n_path == int(np.argmin(loo_path.loo)) + 1 > 30
    np.testing.assert_allclose(search.alpha_path_.alphas, loo_path.alphas[:n_path])
    assert 30 <= search.best_index_ < n_path
    assert not [w for w in caught if "smallest of the automatic grid" in str(w.message)]
    with statistics_context(ridge_grid_extends=False), warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        short = TrajectoryEarlyStoppingCV(IterativeRidge(), random_state=0).fit(X, y)
    assert short.best_index_ == 29 == short.alpha_path_.alphas.size - 1
    assert [w for w in said if "smallest of the automatic grid" in str(w.message)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo = TrajectoryEarlyStoppingCV(IterativeRidge(), criterion="loo",
                                        random_state=0).fit(X, y)
    held_out = [np.mean((s.predict(X_new) - y_new) ** 2) for s in (search, short, loo)]
    assert held_out[0] < 0.2 * held_out[1]
    assert held_out[0] < 1.1 * held_out[2]


def test_default_ridge_search_keeps_the_risk_estimate_where_leverages_agree():
    """An isotropic design: leave-one-out at the risk estimate's choice is
    within a few percent of its minimum, the risk estimate stays and the
    search is that of ``criterion="risk"``, number for number."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((120, 30))
    y = X @ rng.standard_normal(30) + 2.0 * rng.standard_normal(120)
    with record() as paths, warnings.catch_warnings():
        warnings.simplefilter("error", UnreliableEstimateWarning)  # no switch, nothing said
        search = TrajectoryEarlyStoppingCV(IterativeRidge(), random_state=0).fit(X, y)
    assert paths.details("ridge_leverage_spread")[0]["ratio"] < 1.1
    risk = TrajectoryEarlyStoppingCV(IterativeRidge(), criterion="risk", random_state=0).fit(X, y)
    assert search.criterion_ == "risk" and "loo" not in search.alpha_path_
    assert search.best_params_ == risk.best_params_
    assert search.best_iteration_ == risk.best_iteration_
    np.testing.assert_array_equal(search.coef_, risk.coef_)
