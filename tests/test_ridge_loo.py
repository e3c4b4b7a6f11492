"""The ridge path's exact leave-one-out in closed form, and the default
search of ``IterativeRidge`` where the leverages spread.

References: brute-force refits of scikit-learn's ``Ridge`` (one copy of a
sample removed: frequency weights), ``RidgeCV``'s own leave-one-out errors,
held-out errors of new draws.
"""

import numpy as np
import pytest
from sklearn.linear_model import Ridge, RidgeCV
from threadpoolctl import threadpool_limits

from skacv import IterativeRidge, risk_alpha_path


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
def test_closed_form_loo_is_the_refits(n, p, fit_intercept, weighted):
    """``criterion="loo"`` of the ridge path (the diagonal of each alpha's
    hat matrix from the path's one eigendecomposition, either side of the
    Gram) against brute-force refits: the same to 1e-10 at every alpha,
    with integer and fractional weights (zeros included); without weights
    also against RidgeCV's leave-one-out (its alpha is Ridge's, as
    IterativeRidge's)."""
    rng = np.random.default_rng(n + p)
    X = rng.standard_normal((n, p)) * rng.uniform(0.2, 3.0, p) + 0.5
    y = X[:, :3] @ [2.0, -1.0, 1.5] + rng.standard_normal(n) + 3.0
    sw = None
    if weighted:
        sw = rng.integers(0, 4, n).astype(float)
        sw[:3] = [0.5, 2.5, 0.0]
    path = risk_alpha_path(IterativeRidge(fit_intercept=fit_intercept), X, y,
                           sample_weight=sw, criterion="loo", n_alphas=6, eps=1e-2)
    ref = [_refit_loo(X, y, a, fit_intercept, sw) for a in path.alphas]
    np.testing.assert_allclose(path.loo, ref, rtol=1e-10)
    if not weighted:
        cv = RidgeCV(alphas=path.alphas, fit_intercept=fit_intercept,
                     store_cv_results=True).fit(X, y)
        np.testing.assert_allclose(path.loo, cv.cv_results_.mean(axis=0), rtol=1e-10)
