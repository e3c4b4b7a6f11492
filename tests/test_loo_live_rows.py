"""The left-out runs of wide l1 paths stepped on the rows where they differ
from the fit (``skacv.estimates.loo._live_rows``): the same ``loo_path_``
as the block of every row (the speed policy's ``loo_live_rows_min_features``
raised) and as brute-force refits, on fewer rows.

The two blocks differ only in the order of the sums in their products
(columns of ``X~`` on the live rows, results in Fortran order), which 60
steps of FISTA's clipped extrapolation amplify to at most 4.3e-9 relatively
in ``loo_path_`` and 1.7e-7 in a left-out prediction on these designs with
OpenBLAS's SkylakeX kernels (measured over every case below), to 1.1e-7 in
``loo_path_`` with its Haswell kernels, and to 3.5e-8 absolutely in a
prediction of 0.015 with NumPy 1.24's BLAS; the block of every row and
brute-force refits differ by up to 1.7e-7 themselves. So ``loo_path_`` to
``rtol`` 1e-6 and the predictions (of order 1) to ``atol`` 1e-6. A row
wrongly left out moves them by far more (the band's threshold doubled:
26 of the 43 cases fail).
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from skacv import (
    FISTA,
    HeavyBall,
    TrajectoryElasticNet,
    TrajectoryHuberRegressor,
    TrajectoryLasso,
    TrajectoryLogisticRegression,
    exact_loo_path,
)
from skacv._policy import policy_context
from skacv._trace import record
from skacv.estimates.loo._iacv import iacv_path
from skacv.exceptions import WeightScaleWarning

DENSE = {"loo_live_rows_min_features": np.iinfo(np.int64).max}


def _wide(n=40, p=300, seed=0, classify=False):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, p) + 0.3
    beta = np.zeros(p)
    beta[:8] = rng.randn(8)
    y = X @ beta + rng.randn(n) + 1.0
    if classify:
        y = (y > np.median(y)).astype(int)
    return X, y


def _weights(n):
    w = np.random.RandomState(3).randint(0, 4, n).astype(float)
    w[:3] = [0.5, 2.5, 0.0]  # fractional, above one, zero
    return w


ESTIMATORS = {
    "fista": lambda: TrajectoryLasso(0.05, max_iter=60),
    "fista_plain": lambda: TrajectoryLasso(0.05, solver=FISTA(extrapolation="plain"),
                                           max_iter=60),
    "ista": lambda: TrajectoryLasso(0.05, solver="ista", max_iter=60),
    "heavy_ball": lambda: TrajectoryLasso(0.05, solver=HeavyBall(momentum=0.6), max_iter=60),
    "no_intercept": lambda: TrajectoryLasso(0.05, fit_intercept=False, max_iter=60),
    "positive": lambda: TrajectoryLasso(0.05, positive=True, max_iter=60),
    "elastic_net": lambda: TrajectoryElasticNet(0.05, l1_ratio=0.5, max_iter=60),
    # an unpenalised intercept coordinate, log-loss curvatures
    "logistic": lambda: TrajectoryLogisticRegression(alpha=0.02, penalty="l1", max_iter=60),
    # every coefficient at zero, the intercept too on balanced classes: only
    # the free row moves, by less than the band
    "logistic_null": lambda: TrajectoryLogisticRegression(alpha=1.0, penalty="l1",
                                                          max_iter=60),
    # a sum-form l1 penalty: the runs' strengths scaled column by column
    "huber": lambda: TrajectoryHuberRegressor(alpha=0.5, penalty="l1", max_iter=60),
}


def _loo(name, X, y, sw, **policy):
    est = ESTIMATORS[name]()
    params = {"estimate_loo": True, "loo_options": {"store_predictions": True}}
    if "estimate_risk" in est.get_params():
        params["estimate_risk"] = False
    est.set_params(**params)
    with policy_context(**policy), record() as trace, warnings.catch_warnings():
        warnings.simplefilter("ignore", WeightScaleWarning)  # (fractional weights)
        est.fit(X, y, sample_weight=sw)
    return est.loo_path_.copy(), est.loo_predictions_.copy(), trace


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_live_rows_equal_every_row(name, weighted, sparse):
    X, y = _wide(classify=name.startswith("logistic"))
    sw = _weights(X.shape[0]) if weighted else None
    Xf = sp.csr_matrix(X) if sparse else X
    live, live_pred, trace = _loo(name, Xf, y, sw)
    (event,) = trace.details("loo_live_rows")
    assert event["steps"] == 60
    dense, dense_pred, dense_trace = _loo(name, Xf, y, sw, **DENSE)
    assert dense_trace.count("loo_live_rows") == 0
    np.testing.assert_allclose(live, dense, rtol=1e-6)
    np.testing.assert_allclose(live_pred, dense_pred, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("solver", ["fista", "ista"])
def test_live_rows_equal_refits_on_a_few_rows(solver):
    """Where ``p >> n`` the runs step on a small share of the rows once the
    path leaves its first steps (each step's rows counted by the trace),
    with brute-force refits' leave-one-out."""
    X, y = _wide(30, 1000, seed=1)
    est = TrajectoryLasso(0.3, solver=solver, max_iter=150, estimate_risk=False,
                          estimate_loo=True)
    ref = exact_loo_path(est, X, y)
    with record() as trace:
        loo = est.fit(X, y).loo_path_
    (event,) = trace.details("loo_live_rows")
    assert event["rows"] < 0.5 * event["steps"] * X.shape[1]
    np.testing.assert_allclose(loo, ref, rtol=1e-7)


def test_live_rows_warm_start_and_left_out_coefficients():
    """A path continued (40 + 40 steps) equals the path of 80; the left-out
    coefficients at an iterate equal those of the block of every row."""
    X, y = _wide(30, 400, seed=2)
    est = TrajectoryLasso(0.08, max_iter=80, estimate_risk=False, estimate_loo=True)
    whole = est.fit(X, y).loo_path_.copy()
    est.set_params(max_iter=40).fit(X, y)
    cont = est.set_params(max_iter=80, warm_start=True).fit(X, y).loo_path_
    np.testing.assert_allclose(cont, whole, rtol=1e-9)
    est = TrajectoryLasso(0.08, max_iter=50, estimate_risk=False).fit(X, y)
    prob = est._problem(X, y)
    _, yt = prob.design.center_y(y)

    def coefs(**policy):
        with policy_context(**policy):
            return iacv_path(prob.design, yt, prob.iteration, est.coef_path_, y,
                             coef_at=[25, 50]).coef
    live = coefs()
    assert np.count_nonzero(live[1] - est.coef_path_[:, 50]) > 0  # (the runs do differ)
    np.testing.assert_allclose(live, coefs(**DENSE), rtol=1e-7, atol=1e-12)
