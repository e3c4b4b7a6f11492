"""Leave-one-out's fast paths and its subsample: the float32 Gram products
of the left-out runs against brute-force refits, the control-variate
estimate of ``loo_options["subsample"]`` unbiased and its standard error
(``loo_std_error_path_``) calibrated, in a seeded Monte Carlo over the
subsamples; and ``criterion="loo"`` chosen explicitly computes leave-one-out
only (the risk, only reported, is not computed unless asked for).
"""

import numpy as np
import pytest

from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso, exact_loo_path
from skacv._policy import get_policy, policy_context
from skacv._trace import record


def _lasso_data(n, p, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + 0.3 * rng.standard_normal((n, 1))
    beta = np.zeros(p)
    beta[:5] = 1.0
    y = X @ beta + rng.standard_normal(n) + 1.0
    return X, y


@pytest.mark.parametrize("solver", ["ista", "fista"])
def test_float32_gram_products_match_refits(solver):
    # the left-out runs' Gram products in float32 from
    # loo_float32_min_features on (the default takes them at p = 300): still
    # the leave-one-out of brute-force refits, to float32 rounding of the
    # differences (measured: 1.8e-8 for ISTA, 9.6e-8 for FISTA at most; in
    # float64 3e-15)
    X, y = _lasso_data(40, 300)
    assert X.shape[1] >= get_policy().loo_float32_min_features
    est = TrajectoryLasso(alpha=0.05, solver=solver, max_iter=60, estimate_risk=False,
                          estimate_loo=True)
    ref = exact_loo_path(est, X, y)
    with policy_context(loo_gram_max_columns=np.inf):  # (the Gram's columns at every step)
        fast = est.fit(X, y).loo_path_.copy()
        with policy_context(loo_float32_min_features=10**9):
            exact = est.fit(X, y).loo_path_.copy()
    np.testing.assert_allclose(exact, ref, rtol=1e-8)
    np.testing.assert_allclose(fast, ref, rtol=1e-6)
    assert not np.array_equal(fast, exact)  # the float32 products were taken


@pytest.mark.parametrize("solver", ["ista", "fista"])
def test_wide_designs_multiply_by_x_not_the_gram(solver):
    """Where p >> n the left-out runs' differences are non-zero on many more
    coordinates than there are samples for most of the path (on the 32 x
    6829 gene design, 6829 down to 751 in 200 FISTA steps): their products
    go through ``X~`` and ``X~^T`` (``loo_gram_max_aspect``,
    ``loo_gram_max_columns``), 25 times faster there than gathering the
    Gram matrix's columns, with the same leave-one-out as the refits; with
    the Gram matrix forced, the same to its float32 rounding."""
    X, y = _lasso_data(20, 400)
    est = TrajectoryLasso(alpha=0.05, solver=solver, max_iter=40, estimate_risk=False,
                          estimate_loo=True)
    ref = exact_loo_path(est, X, y)
    with record() as products:
        wide = est.fit(X, y).loo_path_.copy()
    assert products.count("loo_gram_dtype") == 0  # no Gram matrix built
    np.testing.assert_allclose(wide, ref, rtol=1e-9)
    with policy_context(loo_gram_max_aspect=np.inf, loo_gram_max_columns=np.inf), \
            record() as gram:
        forced = est.fit(X, y).loo_path_.copy()
    assert gram.count("loo_gram_dtype") == 1
    np.testing.assert_allclose(forced, ref, rtol=1e-6)
    assert not np.array_equal(forced, wide)


def test_float32_gram_products_small_problem_forced():
    # the same fast path forced on a small problem with an intercept and weights
    X, y = _lasso_data(30, 12, seed=1)
    sw = np.random.default_rng(2).integers(1, 4, 30).astype(float)
    est = TrajectoryLasso(alpha=0.02, solver="fista", max_iter=40, estimate_risk=False,
                          estimate_loo=True)
    ref = exact_loo_path(est, X, y, sample_weight=sw)
    with policy_context(loo_float32_min_features=0):
        fast = est.fit(X, y, sample_weight=sw).loo_path_
    np.testing.assert_allclose(fast, ref, rtol=1e-6)  # measured: 1.9e-8
    assert not np.allclose(fast, ref, rtol=1e-12, atol=0)


def test_subsample_estimate_unbiased_and_standard_error_calibrated():
    # seeded Monte Carlo over 300 subsamples of 40 of 200 samples: the mean of
    # the control-variate estimate is the full leave-one-out path within 4
    # Monte Carlo standard errors, its O(1 / n_sub) bias included (measured:
    # at most 2.7 along the path), and the reported (jackknife) standard
    # error is the spread of the draws (measured ratio 1.00-1.05 along the
    # path, where the linearised variance gave 0.84-0.90; 300 draws give the
    # spread to about 4 %)
    X, y = _lasso_data(200, 50, seed=3)
    est = TrajectoryLasso(alpha=0.05, solver="ista", max_iter=30, estimate_risk=False,
                          estimate_loo=True)
    full = est.fit(X, y).loo_path_.copy()
    assert not hasattr(est, "loo_std_error_path_")  # every sample: no sampling error
    draws, ses = [], []
    for seed in range(300):
        e = est.set_params(loo_options={"subsample": 40}, random_state=seed).fit(X, y)
        draws.append(e.loo_path_.copy())
        ses.append(e.loo_std_error_path_.copy())
    draws, ses = np.array(draws), np.array(ses)
    spread = draws.std(axis=0, ddof=1)
    mc = spread / np.sqrt(draws.shape[0])
    t = slice(1, None)  # iterate 0 predicts the mean: every estimate is exact there
    np.testing.assert_allclose(draws[:, 0], full[0], rtol=1e-10)
    assert np.all(np.abs(draws.mean(axis=0)[t] - full[t]) <= 4 * mc[t])
    ratio = ses.mean(axis=0)[t] / spread[t]
    assert np.all((ratio > 0.9) & (ratio < 1.15)), ratio


def test_explicit_loo_computes_leave_one_out_only():
    X, y = _lasso_data(60, 20, seed=4)
    s = TrajectoryEarlyStoppingCV(TrajectoryLasso(alpha=0.05, max_iter=40), search="grid",
                                  criterion="loo").fit(X, y)
    assert s.criterion_ == "loo"
    assert hasattr(s.estimator_, "loo_path_") and not hasattr(s.estimator_, "risk_path_")
    # every sample tracked: the leave-one-out of brute-force refits
    ref = exact_loo_path(TrajectoryLasso(alpha=0.05, max_iter=s.estimator_.n_iter_), X, y)
    np.testing.assert_allclose(s.loo_path_, ref, rtol=1e-8)
