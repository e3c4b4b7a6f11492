"""Leave-one-out along trajectories: IACV (``loo_path_``), the brute-force
reference ``exact_loo_path`` and the closed forms ``approximate_loo``.

References: an independent numpy loop of gradient descent without each
sample (re-centred), scikit-learn's ``Ridge`` / ``RidgeCV`` closed forms, and
brute-force refits. Least squares is quadratic, so IACV is exact there (also
through the prox of ISTA/FISTA and for SGD); logistic IACV is first-order
accurate: the tests assert its error against the naive baseline and the
``1/n^2`` trend of Luo, Ren & Barber (2023).
"""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit
from sklearn.base import clone
from sklearn.linear_model import RidgeCV

from skacv import (
    FISTA,
    HeavyBall,
    IterativeRidge,
    TrajectoryLasso,
    TrajectoryLogisticRegression,
    approximate_loo,
    config_context,
    exact_loo_path,
)
from skacv._trace import record
from skacv.estimates.loo._iacv import iacv_path
from skacv.estimates.loo._refit import exact_refits


def _regression(n=30, p=6, seed=0, offset=2.0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, p) + 0.5
    y = X @ rng.randn(p) + rng.randn(n) + offset
    return X, y


def _classification(n, p=20, s=5, seed=0, intercept=0.0):
    """The IACV paper's logistic design: p = 20, 5 non-zero N(0, 1) entries."""
    rng = np.random.RandomState(seed)
    theta = np.zeros(p)
    theta[rng.choice(p, s, replace=False)] = rng.randn(s)
    X = rng.randn(n, p)
    y = (rng.rand(n) < expit(X @ theta + intercept)).astype(int)
    return X, y


def _weights(n, seed=1):
    sw = np.random.RandomState(seed).randint(0, 4, n).astype(float)
    sw[:3] = [0.5, 2.5, 0.0]  # fractional, non-integer above one, zero
    return sw


def _loo(est, X, y, sw=None):
    est.set_params(estimate_loo=True, loo_options={"store_predictions": True})
    est.fit(X, y, sample_weight=sw)
    return est.loo_path_, est.loo_predictions_


LEAST_SQUARES = {
    "gd": lambda: IterativeRidge(0.0, max_iter=25),
    "ridge": lambda: IterativeRidge(3.0, max_iter=25),
    "schedule": lambda: IterativeRidge(3.0, max_iter=25, step_schedule=lambda k: 1 / np.sqrt(k)),
    "nesterov": lambda: IterativeRidge(3.0, solver="nesterov", max_iter=25),
    "nesterov_const": lambda: IterativeRidge(3.0, solver="nesterov", momentum=0.5, max_iter=25),
    "heavy_ball": lambda: IterativeRidge(3.0, solver="heavy_ball", momentum=0.5, max_iter=25),
    "sgd": lambda: IterativeRidge(1.0, solver="sgd", batch_size=7, max_iter=25, step_size=0.05,
                                  random_state=0),
    "ista": lambda: TrajectoryLasso(0.1, solver="ista", max_iter=25),
    "fista": lambda: TrajectoryLasso(0.1, solver="fista", max_iter=25),
    "fista_plain": lambda: TrajectoryLasso(0.1, solver=FISTA(extrapolation="plain"),
                                           max_iter=25),
    "heavy_ball_l1": lambda: TrajectoryLasso(0.1, solver=HeavyBall(momentum=0.6), max_iter=25),
}


# ----------------------------------------------------------------------------
# the reference itself
# ----------------------------------------------------------------------------


def test_exact_loo_path_matches_an_independent_loop():
    """Plain numpy ridge GD without sample i, re-centred, same step."""
    X, y = _regression()
    n, T, alpha = X.shape[0], 15, 3.0
    est = IterativeRidge(alpha, max_iter=T, estimate_risk=False).fit(X, y)
    eta = est.step_size_
    path, preds = exact_loo_path(est, X, y, return_predictions=True)
    ref = np.empty((n, T + 1))
    for i in range(n):
        keep = np.arange(n) != i
        Xi, yi = X[keep], y[keep]
        xm, ym = Xi.mean(0), yi.mean()
        Xc, yc = Xi - xm, yi - ym
        b = np.zeros(X.shape[1])
        ref[i, 0] = ym
        for t in range(1, T + 1):
            b = b - eta * (Xc.T @ (Xc @ b - yc) / (n - 1) + alpha / (n - 1) * b)
            ref[i, t] = ym + (X[i] - xm) @ b
    np.testing.assert_allclose(preds, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(path, ((y[:, None] - ref) ** 2).mean(0), rtol=1e-12)


def test_exact_loo_path_parallel_and_weighted_rows():
    X, y = _regression(n=12)
    sw = _weights(12)
    est = TrajectoryLasso(0.1, max_iter=10, estimate_risk=False).fit(X, y, sample_weight=sw)
    a, pa = exact_loo_path(est, X, y, sample_weight=sw, return_predictions=True)
    b = exact_loo_path(est, X, y, sample_weight=sw, n_jobs=2)
    np.testing.assert_allclose(a, b, rtol=1e-13)
    # a row of zero weight is not data: its "left-out" prediction is the full fit's
    np.testing.assert_allclose(pa[2], est.predict_path(X[2:3])[0], rtol=1e-13)
    # an unfitted estimator is fitted first
    c = exact_loo_path(TrajectoryLasso(0.1, max_iter=10), X, y, sample_weight=sw)
    np.testing.assert_allclose(a, c, rtol=1e-13)


# ----------------------------------------------------------------------------
# least squares: IACV is exact leave-one-out
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(LEAST_SQUARES))
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("shape", [(30, 6), (14, 25)])
def test_least_squares_iacv_equals_exact_loo(name, fit_intercept, shape):
    X, y = _regression(*shape)
    sw = _weights(shape[0])
    for weights in (None, sw):
        est = LEAST_SQUARES[name]().set_params(fit_intercept=fit_intercept, estimate_risk=False)
        path, preds = _loo(est, X, y, weights)
        ref, ref_preds = exact_loo_path(est, X, y, sample_weight=weights,
                                        return_predictions=True)
        np.testing.assert_allclose(path, ref, rtol=1e-8)
        np.testing.assert_allclose(preds, ref_preds, rtol=1e-8, atol=1e-10 * np.abs(y).max())
        # the first step is exact for any method
        np.testing.assert_allclose(preds[:, 1], ref_preds[:, 1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["ridge", "nesterov_const", "heavy_ball"])
def test_spectral_forms_agree_with_the_plain_recursion(name):
    """Toeplitz (eigenbasis) form, eigenbasis recursion and primal recursion."""
    X, y = _regression(40, 8)
    sw = np.random.RandomState(3).randint(1, 4, 40).astype(float)
    est = LEAST_SQUARES[name]().set_params(estimate_risk=False).fit(X, y, sample_weight=sw)
    prob = est._problem(X, y, sw)
    design, it = prob.design, prob.iteration
    _, yt = design.center_y(y)
    kw = dict(store_predictions=True, coef_at=[1, 7, 25])
    toeplitz = iacv_path(design, yt, it, est.coef_path_, y, **kw)
    primal = iacv_path(design, yt, it, est.coef_path_, y, spectral=False, **kw)
    np.testing.assert_allclose(toeplitz.predictions, primal.predictions, rtol=1e-10)
    order = np.argsort(toeplitz.coef_indices)
    np.testing.assert_allclose(toeplitz.coef[:, order], primal.coef, rtol=1e-9, atol=1e-12)
    fits = exact_refits(est, X, y, sw, indices=[0, 5], return_coef=True)[-1]
    for i in (0, 5):
        np.testing.assert_allclose(primal.coef[:, i], fits[i][1][:, [1, 7, 25]].T, rtol=1e-9)


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_ridge_converged_equals_closed_form_and_ridgecv(fit_intercept):
    X, y = _regression(40, 6)
    alpha = 5.0
    est = IterativeRidge(alpha, max_iter=2000, fit_intercept=fit_intercept, estimate_risk=False)
    _, preds = _loo(est, X, y)
    # closed form: the hat matrix of [X, 1] with an unpenalised intercept column
    Z = np.hstack([X, np.ones((40, 1))]) if fit_intercept else X
    P = np.eye(Z.shape[1]) * alpha
    if fit_intercept:
        P[-1, -1] = 0.0
    S = Z @ np.linalg.solve(Z.T @ Z + P, Z.T)
    resid = y - S @ y
    loo_resid = resid / (1.0 - np.diag(S))
    np.testing.assert_allclose(y - preds[:, -1], loo_resid, rtol=1e-8)
    # RidgeCV's efficient leave-one-out (squared errors), re-centred like ours
    rcv = RidgeCV(alphas=[alpha], fit_intercept=fit_intercept, store_cv_results=True).fit(X, y)
    np.testing.assert_allclose(rcv.cv_results_[:, 0], loo_resid**2, rtol=1e-8)
    np.testing.assert_allclose(est.loo_path_[-1], np.mean(loo_resid**2), rtol=1e-8)
    for method in ("alo", "ns"):
        res = approximate_loo(est, X, y, method=method)
        np.testing.assert_allclose(res.predictions, preds[:, -1], rtol=1e-8)


def test_integer_weights_equal_repeated_rows():
    """Leaving one copy out of a repeated row: the weights remove one unit."""
    X, y = _regression(20, 5)
    sw = np.random.RandomState(2).randint(0, 4, 20)
    Xr, yr = np.repeat(X, sw, axis=0), np.repeat(y, sw)
    yc = (y > np.median(y)).astype(int)
    cases = [(TrajectoryLasso(0.1, max_iter=20, estimate_risk=False), y, yr),
             (IterativeRidge(2.0, max_iter=20, estimate_risk=False), y, yr),
             (TrajectoryLogisticRegression(0.01, max_iter=20), yc, np.repeat(yc, sw))]
    for est, target, target_r in cases:
        est.set_params(estimate_loo=True)
        a = est.fit(X, target, sample_weight=sw.astype(float)).loo_path_
        b = est.fit(Xr, target_r).loo_path_
        np.testing.assert_allclose(a, b, rtol=1e-9)
    lasso = clone(cases[0][0])  # (unfitted: each call fits its own data first)
    np.testing.assert_allclose(exact_loo_path(lasso, X, y, sample_weight=sw.astype(float)),
                               exact_loo_path(lasso, Xr, yr), rtol=1e-9)


def test_blocks_subsample_sparse_float32():
    X, y = _regression(30, 6)
    est = TrajectoryLasso(0.1, max_iter=20, estimate_risk=False, estimate_loo=True,
                          loo_options={"store_predictions": True})
    full = est.fit(X, y)
    path, preds = full.loo_path_.copy(), full.loo_predictions_.copy()
    est.set_params(loo_options={"batch_size": 4, "store_predictions": True})
    np.testing.assert_allclose(est.fit(X, y).loo_path_, path, rtol=1e-12)
    np.testing.assert_allclose(est.fit(sp.csr_matrix(X), y).loo_path_, path, rtol=1e-12)
    est.set_params(loo_options={"store_predictions": True})
    # float32 data: the fit runs in float32, the path agrees to float32 precision
    np.testing.assert_allclose(est.fit(X.astype(np.float32), y).loo_path_, path, rtol=1e-4)
    # subsample: difference estimate, in-sample losses of every sample as
    # control variate (brute force: the full fit's predictions of its rows)
    est.set_params(loo_options={"subsample": 5, "store_predictions": True}, random_state=0)
    sub = est.fit(X, y)
    idx = sub.loo_indices_
    assert idx.shape == (5,)
    np.testing.assert_allclose(sub.loo_predictions_, preds[idx], rtol=1e-12)
    L = (y[:, None] - preds) ** 2
    R = (y[:, None] - full.predict_path(X)) ** 2
    np.testing.assert_allclose(sub.loo_path_, _difference_estimate(L, R, idx, 30 / 5),
                               rtol=1e-10)
    # ... far closer to the full path than the subsample mean of the same draws
    ratio, plain = [], []
    for s in range(200):
        e = est.set_params(random_state=s).fit(X, y)
        ratio.append(e.loo_path_ / path - 1)
        plain.append(L[e.loo_indices_].mean(0) / path - 1)
    rms = [np.sqrt(np.mean(np.square(d))) for d in (ratio, plain)]
    assert rms[0] < 0.5 * rms[1], rms


def _difference_estimate(L, R, idx, scale, W=None):
    """sum_all(L) / W estimated from the rows ``idx`` with the control
    variate ``R``: the subsample least-squares slope ``beta`` per column."""
    a, b = L[idx], R[idx]
    ac, bc = a - a.mean(0), b - b.mean(0)
    var = (bc * bc).sum(0)
    beta = np.divide((ac * bc).sum(0), var, out=np.zeros_like(var), where=var > 0)
    W = L.shape[0] if W is None else W
    return (scale * (a.sum(0) - beta * b.sum(0)) + beta * R.sum(0)) / W


def test_subsample_difference_estimate_weights_and_logistic():
    rng = np.random.default_rng(3)
    X, y = _regression(60, 8)
    sw = rng.integers(0, 3, 60).astype(float)
    Xc = rng.standard_normal((80, 5))
    yc = (Xc[:, 0] + rng.standard_normal(80) > 0).astype(int)
    cases = [(TrajectoryLasso(0.05, max_iter=25), X, y, sw),
             (TrajectoryLogisticRegression(max_iter=25), Xc, yc, None)]
    for est, Xe, ye, w in cases:
        if "estimate_risk" in est.get_params():
            est.set_params(estimate_risk=False)
        est.set_params(estimate_loo=True, loo_options={"store_predictions": True}, random_state=0)
        full = est.fit(Xe, ye, sample_weight=w)
        P = full.loo_predictions_
        ww = np.ones(ye.shape[0]) if w is None else w
        if isinstance(est, TrajectoryLogisticRegression):
            Pin = np.stack([p[:, 1] for p in full.staged_predict_proba(Xe)], axis=1)
            L = -(ye[:, None] * np.log(P) + (1 - ye[:, None]) * np.log1p(-P))
            R = -(ye[:, None] * np.log(Pin) + (1 - ye[:, None]) * np.log1p(-Pin))
        else:
            L = (ye[:, None] - P) ** 2
            R = (ye[:, None] - full.predict_path(Xe)) ** 2
        L, R = ww[:, None] * L, ww[:, None] * R
        np.testing.assert_allclose(L.sum(0) / ww.sum(), full.loo_path_, rtol=1e-10)
        est.set_params(loo_options={"subsample": 20, "store_predictions": True})
        sub = est.fit(Xe, ye, sample_weight=w)
        idx = sub.loo_indices_
        tracked = idx[ww[idx] > 0]
        np.testing.assert_allclose(
            sub.loo_path_, _difference_estimate(L, R, tracked, ye.shape[0] / 20, ww.sum()),
            rtol=1e-10)


def test_memory_is_bounded_or_refused():
    X, y = _regression(30, 6)
    est = TrajectoryLasso(0.1, max_iter=20, estimate_risk=False, estimate_loo=True,
                          loo_options={"batch_size": 30})
    with config_context(path_memory_limit=5000 / 2**20):  # the path fits (1008 bytes)
        with pytest.raises(ValueError, match=r"GiB.*loo_options\['batch_size'\]"):
            est.fit(X, y)
        est.set_params(loo_options={"batch_size": None, "store_predictions": True})
        with pytest.raises(ValueError, match=r"loo_predictions_.*GiB"):
            est.fit(X, y)
    ref = est.set_params(loo_options={"store_predictions": False}).fit(X, y).loo_path_
    with config_context(working_memory=1 / 2**20):  # one left-out run per block
        np.testing.assert_allclose(est.fit(X, y).loo_path_, ref, rtol=1e-12)


def test_warm_start_and_bad_input():
    X, y = _regression(30, 6)
    cold = IterativeRidge(1.0, solver="nesterov", max_iter=40, estimate_loo=True).fit(X, y)
    warm = IterativeRidge(1.0, solver="nesterov", max_iter=20, estimate_loo=True,
                          warm_start=True).fit(X, y)
    warm.set_params(max_iter=40).fit(X, y)
    np.testing.assert_allclose(warm.loo_path_, cold.loo_path_, rtol=1e-12)
    with pytest.raises(ValueError, match="more than one sample"):
        IterativeRidge(1.0, estimate_loo=True, estimate_risk=False).fit(X[:2], y[:2],
                                                                       sample_weight=[1, 0])
    # mini-batch SGD has a risk estimate (Tan & Bellec 2024; tests/test_risk_sgd.py)
    assert IterativeRidge(solver="sgd", max_iter=5).fit(X, y).risk_path_.shape == (6,)
    with pytest.raises(ValueError, match="diverge.*smaller step_size"):
        IterativeRidge(solver="sgd", step_size=50.0, max_iter=100, estimate_risk=False,
                       random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="method"):
        approximate_loo(cold, X, y, method="gcv")
    with pytest.raises(ValueError, match="not positive definite"):
        wide = IterativeRidge(0.0, max_iter=5, estimate_risk=False).fit(X[:5], y[:5])
        approximate_loo(wide, X[:5], y[:5], method="ns")
    with pytest.raises(ValueError, match="'batch_size' parameter of IterativeRidge's loo_options"):
        IterativeRidge(loo_options={"batch_size": 0}).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        exact_loo_path(cold, X[:, :3], y)
    # estimators without a leave-one-out path: a TypeError that names the
    # ones with it (were AttributeErrors from inside the refits)
    from skacv import EigenProRegressor, TrajectoryEarlyStoppingCV
    kernel = EigenProRegressor(max_iter=2, random_state=0)
    search = TrajectoryEarlyStoppingCV(IterativeRidge(max_iter=5))
    for est in (kernel, search):
        with pytest.raises(TypeError, match="linear trajectory estimator"):
            exact_loo_path(est, X, y)
        with pytest.raises(TypeError, match="linear trajectory estimator"):
            approximate_loo(est.fit(X, y), X, y)


def test_leave_one_out_of_a_fit_takes_its_training_data():
    """exact_loo_path and approximate_loo of a fitted estimator refuse other
    data (they gave a number for the path of other data: the fit's path is
    the full-data reference), and take its data in any format."""
    X, y = _regression(30, 6)
    sw = np.random.default_rng(0).integers(1, 3, 30).astype(float)
    est = IterativeRidge(1.0, solver="nesterov", max_iter=20, estimate_risk=False)
    est.fit(X, y, sample_weight=sw)
    ref = exact_loo_path(est, X, y, sample_weight=sw)
    np.testing.assert_allclose(exact_loo_path(est, sp.csr_matrix(X), y, sample_weight=sw), ref,
                               rtol=1e-10)
    np.testing.assert_allclose(exact_loo_path(clone(est), X, y, sample_weight=sw), ref,
                               rtol=1e-10)
    approximate_loo(est, X, y, sample_weight=sw)
    for other in ((X[::-1], y, sw), (X, y + 1.0, sw), (X, y, None)):
        with pytest.raises(ValueError, match="fitted on other data"):
            exact_loo_path(est, *other[:2], sample_weight=other[2])
        with pytest.raises(ValueError, match="fitted on other data"):
            approximate_loo(est, *other[:2], sample_weight=other[2])


def test_ridge_approximate_loo_closed_forms():
    """At the ridge minimiser ALO and NS are exact, ``r_i / (1 - h_i)``;
    IJ is its first-order expansion ``r_i (1 + h_i)`` (the hat matrix by
    brute force)."""
    X, y = _regression(40, 8)
    lam = 3.0
    est = IterativeRidge(lam, fit_intercept=False, solver="nesterov", max_iter=3000,
                         estimate_risk=False).fit(X, y)
    hat = X @ np.linalg.solve(X.T @ X + lam * np.eye(8), X.T)
    r, h = y - hat @ y, np.diag(hat)
    for method, expected in (("alo", r / (1 - h)), ("ns", r / (1 - h)), ("ij", r * (1 + h))):
        res = approximate_loo(est, X, y, method=method)
        np.testing.assert_allclose(y - res.predictions, expected, rtol=1e-9, atol=1e-12)


# ----------------------------------------------------------------------------
# logistic regression: first-order accurate
# ----------------------------------------------------------------------------

LOGISTIC = {
    "gd": dict(solver="gd", penalty="l2", alpha=1e-6),
    "ista": dict(solver="gd", penalty="l1", alpha=1e-3),
    "fista": dict(solver="fista", penalty="l2", alpha=1e-6),
    "sgd": dict(solver="sgd", penalty="l2", alpha=1e-6, batch_size=25,
                step_schedule=lambda k: 1.0 / (1.0 + k / 50.0)),
}


def _errors(n, params, T=60, ts=(5, 20, 60), n_check=25):
    """Median parameter distances to brute force: IACV and the naive baseline."""
    X, y = _classification(n)
    est = TrajectoryLogisticRegression(step_size=0.5, max_iter=T, fit_intercept=False,
                                       random_state=0, **params).fit(X, y)
    prob = est._problem(X, y)
    y01 = y.astype(float)
    res = iacv_path(prob.design, y01, prob.iteration, est._fit_coef_path(), y01,
                    datafit=prob.datafit, coef_at=[1, *ts])
    idx = np.linspace(0, n - 1, n_check).astype(int)
    fits = exact_refits(est, X, y, indices=idx, return_coef=True)[-1]
    exact = np.array([fits[i][1] for i in idx])  # (n_check, p, T + 1)
    first = np.abs(res.coef[0][idx] - exact[:, :, 1]).max()
    iacv, naive = [], []
    for j, t in enumerate(ts, start=1):
        iacv.append(np.median(np.linalg.norm(res.coef[j][idx] - exact[:, :, t], axis=1)))
        naive.append(np.median(np.linalg.norm(est.coef_path_[:, t] - exact[:, :, t], axis=1)))
    return first, np.array(iacv), np.array(naive)


@pytest.mark.parametrize("name", sorted(LOGISTIC))
def test_logistic_iacv_far_below_naive(name):
    first, iacv, naive = _errors(100, LOGISTIC[name])
    assert first < 1e-12  # t = 1 is exact
    # measured naive / IACV at n = 100 (p = 20) and t = 5, 20, 60: GD 906, 138, 59;
    # ISTA 912, 140, 66; FISTA 540, 42, 21; SGD 557, 123, 77 (n = 400: 116 to 4876)
    assert np.all(iacv < naive / 10), (iacv, naive)


@pytest.mark.parametrize("name", ["gd", "ista"])
def test_logistic_iacv_error_shrinks_like_one_over_n_squared(name):
    """n = 100 -> 400: IACV error / ~16, the naive baseline / ~4 (1/n)."""
    _, iacv_s, naive_s = _errors(100, LOGISTIC[name])
    _, iacv_l, naive_l = _errors(400, LOGISTIC[name])
    # measured ratios at t = 5, 20, 60: IACV 17.9, 13.6, 12.5 (GD) and 18.8, 13.4,
    # 11.4 (ISTA); baseline 3.5 to 3.9
    assert np.all(iacv_s / iacv_l > 8), iacv_s / iacv_l
    assert np.all(naive_s / naive_l < 6), naive_s / naive_l


def test_logistic_loo_path_and_error_path():
    X, y = _classification(60, p=5, intercept=0.5)
    sw = np.random.RandomState(0).randint(1, 3, 60).astype(float)
    est = TrajectoryLogisticRegression(alpha=0.01, max_iter=40, estimate_loo=True,
                                       loo_options={"store_predictions": True})
    est.fit(X, y, sample_weight=sw)
    ref, P = exact_loo_path(est, X, y, sample_weight=sw, return_predictions=True)
    np.testing.assert_allclose(est.loo_predictions_[:, 1], P[:, 1], rtol=1e-12)
    # n = 60, p = 6: IACV is within ~1% of the loss; the naive in-sample loss is
    # much further from the leave-one-out loss
    Pin = est.predict_proba_path(X)
    naive = sw @ -np.log(np.where(y[:, None] == 1, Pin, 1 - Pin)) / sw.sum()
    gap = np.abs(est.loo_path_ - ref)[5:]
    assert np.all(gap < 0.1 * np.abs(naive - ref)[5:])
    err = sw @ ((P > 0.5) != (y[:, None] == 1)) / sw.sum()
    assert np.abs(est.loo_error_path_ - err).max() <= 2 * sw.max() / sw.sum()
    assert est.loo_error_path_[0] == pytest.approx(sw @ (y == 1) / sw.sum())


def test_logistic_converged_iacv_equals_newton_step():
    """At convergence the IACV fixed point is the NS / ALO approximation."""
    X, y = _classification(80, p=5, intercept=0.3)
    est = TrajectoryLogisticRegression(alpha=0.01, solver="fista", max_iter=600,
                                       estimate_loo=True,
                                       loo_options={"store_predictions": True}).fit(X, y)
    ns = approximate_loo(est, X, y, method="ns")
    alo = approximate_loo(est, X, y, method="alo")
    ij = approximate_loo(est, X, y, method="ij")
    np.testing.assert_allclose(ns.predictions, est.loo_predictions_[:, -1], atol=1e-9)
    np.testing.assert_allclose(alo.predictions, ns.predictions, atol=1e-9)
    np.testing.assert_allclose(ns.loss, est.loo_path_[-1], rtol=1e-9)
    _, P = exact_loo_path(est, X, y, return_predictions=True)
    e_ns, e_ij = np.abs(ns.predictions - P[:, -1]), np.abs(ij.predictions - P[:, -1])
    e_naive = np.abs(est.predict_proba(X)[:, 1] - P[:, -1])
    assert np.median(e_ns) < np.median(e_ij) < np.median(e_naive)


def test_lasso_alo_on_a_stable_support():
    """ALO on the active set is exact for least squares when no sample moves the support."""
    rng = np.random.RandomState(0)
    X = rng.randn(60, 8)
    y = X[:, :3] @ [3.0, -2.0, 2.5] + 0.3 * rng.randn(60)
    est = TrajectoryLasso(0.2, max_iter=400, estimate_risk=False).fit(X, y)
    fits = exact_refits(est, X, y, return_coef=True)[-1]
    P = np.array([fits[i][0][-1] for i in range(60)])
    support = est.coef_ != 0
    assert all(np.array_equal(f[1][:, -1] != 0, support) for f in fits.values())
    for method in ("alo", "ns"):
        res = approximate_loo(est, X, y, method=method)
        np.testing.assert_allclose(res.predictions, P, rtol=1e-8)
        np.testing.assert_array_equal(res.active_set, np.flatnonzero(support))


@pytest.mark.parametrize("kind", ["lasso", "logistic"])
def test_approximate_loo_with_duplicate_columns(kind):
    """Duplicated and negated columns in the active set: the Hessian on it is
    singular (this raised "not positive definite"), but the left-out
    predictions depend on the span of its columns only, so NS, IJ and ALO
    equal those of the fit without the duplicates (the same minimiser's
    predictions), on a basis of the active set."""
    rng = np.random.RandomState(0)
    if kind == "lasso":
        X = rng.randn(80, 10)
        y = X[:, :4] @ [2.0, -1.5, 1.0, 1.0] + 0.5 * rng.randn(80)
        make = lambda: TrajectoryLasso(0.05, solver="fista", max_iter=5000,  # noqa: E731
                                       estimate_risk=False)
    else:
        X, y = _classification(120, p=10, intercept=0.3)
        make = lambda: TrajectoryLogisticRegression(  # noqa: E731
            0.02, penalty="l1", solver="fista", max_iter=5000)
    Xd = np.hstack([X, X[:, :3], -X[:, 3:5]])
    ref, dup = make().fit(X, y), make().fit(Xd, y)
    assert np.sum(dup.coef_.ravel()[10:] != 0) >= 3  # duplicates in the active set
    for method in ("alo", "ns", "ij"):
        a = approximate_loo(ref, X, y, method=method)
        b = approximate_loo(dup, Xd, y, method=method)
        np.testing.assert_allclose(b.predictions, a.predictions, rtol=1e-6, atol=1e-8)
        assert b.active_set.size == a.active_set.size


@pytest.mark.parametrize("shape", [(40, 12), (25, 60)])
def test_warm_start_reuses_the_eigendecomposition(shape):
    """A warm refit reuses the design's spectral decompositions (one Gram
    matrix for the whole staged path) and gives the cold leave-one-out path."""
    n, p = shape
    X, y = _regression(n=n, p=p, seed=3)
    est = IterativeRidge(alpha=0.5, solver="gd", estimate_risk=False, estimate_loo=True,
                         )
    cold = est.set_params(max_iter=30).fit(X, y)
    cold_loo = cold.loo_path_.copy()
    with record() as paths:
        warm = IterativeRidge(alpha=0.5, solver="gd", estimate_risk=False, estimate_loo=True,
                              warm_start=True, max_iter=10).fit(X, y)
    assert paths.count("gram") >= 1
    with record() as paths:
        for total in (20, 30):
            warm.set_params(max_iter=total).fit(X, y)
    assert paths.count("fit") == 2 and "gram" not in paths  # nothing recomputed by the refits
    np.testing.assert_allclose(warm.loo_path_, cold_loo, rtol=1e-10)


@pytest.mark.parametrize("kind", ["lasso", "ista-subsample", "sgd", "logistic"])
def test_warm_start_continues_the_left_out_runs(kind):
    # warm 15 + 10 + 15 steps == cold 40: the left-out runs are continued,
    # not restarted (same subsample, same blocks), also with sample weights
    rng = np.random.default_rng(0)
    X = rng.standard_normal((90, 60))
    y = X[:, :5] @ np.ones(5) + rng.standard_normal(90)
    w = rng.integers(0, 3, 90).astype(float)
    est = {
        "lasso": TrajectoryLasso(0.05, estimate_risk=False,
                                 loo_options={"store_predictions": True}),
        "ista-subsample": TrajectoryLasso(0.05, solver="ista", loo_options={"subsample": 30}),
        "sgd": IterativeRidge(1.0, solver="sgd", batch_size=30, estimate_risk=False),
        "logistic": TrajectoryLogisticRegression(loo_options={"subsample": 40}),
    }[kind]
    if kind == "logistic":
        y = (y > 0).astype(int)
    est.set_params(max_iter=40, estimate_loo=True, random_state=0)
    for sw in (None, w):
        cold = clone(est).fit(X, y, sample_weight=sw)
        warm = clone(est).set_params(max_iter=15, warm_start=True).fit(X, y, sample_weight=sw)
        assert warm._loo_state is not None
        warm.set_params(max_iter=25).fit(X, y, sample_weight=sw)
        warm.set_params(max_iter=40).fit(X, y, sample_weight=sw)
        np.testing.assert_allclose(warm.loo_path_, cold.loo_path_, rtol=1e-12)
        if kind == "lasso":
            np.testing.assert_allclose(warm.loo_predictions_, cold.loo_predictions_,
                                       rtol=1e-12)
        # a cold refit starts the runs again
        warm.set_params(warm_start=False, max_iter=20).fit(X, y, sample_weight=sw)
        ref = clone(est).set_params(max_iter=20).fit(X, y, sample_weight=sw)
        np.testing.assert_allclose(warm.loo_path_, ref.loo_path_, rtol=1e-12)
