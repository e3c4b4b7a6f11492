"""Uncertainty quantification along the trajectory (Bellec & Tan 2024):
debiased iterates, confidence intervals, noise variance and excess risk.

* closed forms at ``t = 0`` and a brute-force computation (explicit
  Jacobians of ISTA, gradient descent and FISTA, the notes' recursions for
  the corrected residuals) of the debiased coefficients and the excess risk;
* invariances: intercept (translation), sample weights (repeated rows),
  sparse input, warm start, pickling, the iterate selected by
  :class:`TrajectoryEarlyStoppingCV`;
* Monte Carlo coverage of the intervals and accuracy of the noise variance
  for ISTA, FISTA and gradient descent, isotropic and AR(1) designs;
* input validation.
"""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose
from scipy.stats import norm
from sklearn.exceptions import NotFittedError

from skacv import FISTA, IterativeRidge, TrajectoryEarlyStoppingCV, TrajectoryLasso
from skacv.exceptions import UnreliableEstimateWarning


def _ar1(p, rho):
    i = np.arange(p)
    return rho ** np.abs(i[:, None] - i[None, :])


def _data(n, p, s, seed, rho=0.0, sigma=1.0, shift=0.0):
    rng = np.random.default_rng(seed)
    Sigma = _ar1(p, rho)
    X = rng.standard_normal((n, p)) @ np.linalg.cholesky(Sigma).T + shift
    beta = np.zeros(p)
    beta[rng.choice(p, s, replace=False)] = rng.standard_normal(s)
    beta *= np.sqrt(5.0 / (beta @ Sigma @ beta))
    y = X @ beta + sigma * rng.standard_normal(n) + shift
    return X, y, beta, Sigma


# ----------------------------------------------------------------------------
# closed forms and brute force
# ----------------------------------------------------------------------------


def test_first_iterate_closed_forms():
    # b^0 = 0, F[:, 0] = y, A[0, :] = 0: with Sigma = I and no intercept the
    # debiased start is X^T y / n, the excess risk (||X^T y||^2 - p ||y||^2) / n^2
    # and the noise variance Dicker's ((n + p) ||y||^2 - ||X^T y||^2) / n^2
    X, y, _, _ = _data(120, 150, 10, 0)
    n, p = X.shape
    est = TrajectoryLasso(alpha=0.1, solver="ista", max_iter=5, fit_intercept=False,
                          random_state=0).fit(X, y)
    Xty, yy = X.T @ y, y @ y
    assert_allclose(est.debiased_coef(0), Xty / n, rtol=1e-12)
    assert_allclose(est.excess_risk_path()[0], (Xty @ Xty - p * yy) / n**2, rtol=1e-12)
    assert_allclose(est.noise_variance_path()[0], ((n + p) * yy - Xty @ Xty) / n**2,
                    rtol=1e-10)
    half = norm.ppf(0.95) * np.sqrt(yy / n / n)
    assert_allclose(est.coef_confidence_interval(0, level=0.9),
                    np.column_stack([Xty / n - half, Xty / n + half]), rtol=1e-12)


def _brute_force(X, y, path, step, kind, l2=0.0):
    """Debiasing by explicit Jacobians (no intercept, exact traces).

    ``J^x[t][s] = d x^t / d y^(s)`` (p x n), ``y^(s)`` entering through the
    gradient at the gradient point ``v^s``; masks of the prox from the path;
    the corrected residuals of the gradient points and of the outputs by
    forward substitution (notes, section 2.4: outputs that are not tracked).
    Returns the corrected residuals of the outputs and the memory matrix of
    the outputs.
    """
    n, p = X.shape
    T1 = path.shape[1]
    if kind in ("fista", "fista_plain"):
        tau = [1.0]
        for _ in range(T1):
            tau.append((1 + np.sqrt(1 + 4 * tau[-1] ** 2)) / 2)
        beta = [0.0] + [(tau[k - 1] - 1) / tau[k] for k in range(1, T1)]
    else:
        beta = [0.0] * T1
    V = path.copy()
    # v^k = a x^k + b x^{k-1}, coordinate-wise; clipped (the default FISTA): the
    # step x^k - x^{k-1} is clipped to [-|x^k|, |x^k|], i.e. a = 1 +/- beta, b = 0
    # where it is clipped (a = 0 where x^k = 0)
    a = [np.full(p, 1 + beta[k]) for k in range(T1)]
    b = [np.full(p, -beta[k]) for k in range(T1)]
    for k in range(1, T1):
        if kind == "fista":
            x, d = path[:, k], path[:, k] - path[:, k - 1]
            clipped = np.abs(d) > np.abs(x)
            a[k] = np.where(clipped, 1 + beta[k] * np.sign(d) * np.sign(x), 1 + beta[k])
            b[k] = np.where(clipped, 0.0, -beta[k])
        V[:, k] = a[k] * path[:, k] + b[k] * path[:, k - 1]
    S = X.T @ X / n
    Jx = [[np.zeros((p, n)) for _ in range(T1)] for _ in range(T1)]
    Jv = [[np.zeros((p, n)) for _ in range(T1)] for _ in range(T1)]
    for t in range(1, T1):
        mask = (path[:, t] != 0)[:, None] if kind != "gd" else 1.0
        for s in range(t):
            inj = step * X.T / n if s == t - 1 else 0.0
            Jx[t][s] = mask * ((1 - step * l2) * Jv[t - 1][s] - step * S @ Jv[t - 1][s] + inj)
            Jv[t][s] = a[t][:, None] * Jx[t][s] + b[t][:, None] * Jx[t - 1][s]
    Ax = np.array([[np.trace(X @ Jx[t][s]) for s in range(T1)] for t in range(T1)])
    Av = np.array([[np.trace(X @ Jv[t][s]) for s in range(T1)] for t in range(T1)])
    Fx, Fv = y[:, None] - X @ path, y[:, None] - X @ V
    Rv, Rx = np.zeros_like(Fv), np.zeros_like(Fx)
    for t in range(T1):
        Rv[:, t] = Fv[:, t] + Rv[:, :t] @ Av[t, :t] / n
        Rx[:, t] = Fx[:, t] + Rv[:, :t] @ Ax[t, :t] / n
    return Rx, Ax


@pytest.mark.parametrize("one_pass", [False, True])
@pytest.mark.parametrize("kind", ["ista", "fista", "fista_plain", "gd"])
def test_debiased_coef_and_excess_risk_against_brute_force(kind, one_pass, speed_policy):
    """With the fit loop's two products a step and its one pass
    (``fuse_min_bytes=0``); ISTA's and gradient descent's ``X~^T R`` is
    ``(X~^T F) K^T`` from the loop's gradients (checked to be used)."""
    X, y, _, Sigma = _data(30, 40, 5, 1, rho=0.4)
    n, p = X.shape
    Omega = np.linalg.inv(Sigma)
    if one_pass:
        speed_policy(fuse_min_bytes=0)
    if kind == "gd":
        est = IterativeRidge(alpha=3.0, max_iter=8, fit_intercept=False, n_probes=None)
    else:
        solver = FISTA(extrapolation="plain") if kind == "fista_plain" else kind
        est = TrajectoryLasso(alpha=0.05, solver=solver, max_iter=8, fit_intercept=False,
                              n_probes=None)
    est.fit(X, y)
    # the loop's gradients are the iterates' only without extrapolation; the
    # loop's fitted gradient points give the clipped extrapolation's residuals
    assert (est._gradient_path is not None) == (kind in ("ista", "gd"))
    assert (est._source_path is not None) == (kind == "fista")
    l2 = est.alpha / n if kind == "gd" else 0.0
    Rx, Ax = _brute_force(X, y, est.coef_path_, est.step_size_, kind, l2)
    G = Rx.T @ Rx / n
    assert_allclose(est.risk_path_, np.diag(G), rtol=1e-9)
    deb = est.coef_path_ + Omega @ X.T @ Rx / n
    for t in range(9):
        assert_allclose(est.debiased_coef(t, precision=Omega), deb[:, t], rtol=1e-9,
                        atol=1e-12)
    if kind == "fista":
        # the clipping happened, and the sources are not combinations of the outputs
        T1 = est.coef_path_.shape[1]
        assert any(np.any((np.abs(np.diff(est.coef_path_, axis=1)[:, k - 1])
                           > np.abs(est.coef_path_[:, k])) & (est.coef_path_[:, k - 1] != 0))
                   for k in range(2, T1))
    if kind in ("ista", "gd"):
        # the noise-free error matrix of Bellec & Tan's code, with Sigma^{-1}
        F = y[:, None] - X @ est.coef_path_
        Q = np.linalg.inv(np.eye(9) - Ax / n)
        FF = F.T @ F
        N = Q @ (F.T @ X @ Omega @ X.T @ F + Ax @ FF + FF @ Ax.T - p * FF) @ Q.T / n**2
        assert_allclose(est.excess_risk_path(Omega), np.diag(N), rtol=1e-9)
        assert_allclose(est.noise_variance_path(Omega), np.diag(G - N), rtol=1e-8)


def test_sparse_precision_and_sparse_input_match_dense():
    X, y, _, Sigma = _data(60, 50, 5, 2, rho=0.5)
    Omega = np.linalg.inv(Sigma)  # tridiagonal for AR(1)
    Omega[np.abs(Omega) < 1e-12] = 0.0
    est = IterativeRidge(alpha=1.0, max_iter=10, n_probes=None).fit(X, y)
    sparse = IterativeRidge(alpha=1.0, max_iter=10, n_probes=None).fit(sp.csr_matrix(X), y)
    for e in (est, sparse):
        assert_allclose(e.debiased_coef(4, sp.csr_matrix(Omega)),
                        est.debiased_coef(4, Omega), rtol=1e-9)
        assert_allclose(e.coef_confidence_interval(-1, precision=sp.csc_matrix(Omega)),
                        est.coef_confidence_interval(10, precision=Omega), rtol=1e-9)
        assert_allclose(e.noise_variance_path(sp.csr_matrix(Omega)),
                        est.noise_variance_path(Omega), rtol=1e-9)


# ----------------------------------------------------------------------------
# invariances
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("solver", ["ista", "fista"])
def test_intercept_makes_the_results_translation_invariant(solver):
    X, y, _, _ = _data(50, 60, 5, 3)
    a = TrajectoryLasso(alpha=0.05, solver=solver, max_iter=12, n_probes=None).fit(X, y)
    b = TrajectoryLasso(alpha=0.05, solver=solver, max_iter=12, n_probes=None).fit(
        X + np.linspace(-3, 5, X.shape[1]), y - 7.0)
    for t in (0, 3, 12):
        assert_allclose(a.debiased_coef(t), b.debiased_coef(t), rtol=1e-7, atol=1e-9)
        assert_allclose(a.coef_confidence_interval(t), b.coef_confidence_interval(t),
                        rtol=1e-7, atol=1e-9)
    assert_allclose(a.noise_variance_path(), b.noise_variance_path(), rtol=1e-7)


@pytest.mark.parametrize("make", [
    lambda: TrajectoryLasso(alpha=0.05, solver="ista", max_iter=10, n_probes=None),
    lambda: TrajectoryLasso(alpha=0.05, solver="fista", max_iter=10, n_probes=None),
    lambda: IterativeRidge(alpha=2.0, solver="nesterov", max_iter=10, n_probes=None),
], ids=["ista", "fista", "nesterov"])
def test_integer_weights_equal_repeated_rows(make):
    X, y, _, Sigma = _data(40, 30, 5, 4, rho=0.3)
    Omega = np.linalg.inv(Sigma)
    w = np.random.default_rng(0).integers(0, 4, X.shape[0])
    rows = np.repeat(np.arange(X.shape[0]), w)
    weighted = make().fit(X, y, sample_weight=w)
    repeated = make().fit(X[rows], y[rows])
    for t in (0, 4, 10):
        assert_allclose(weighted.debiased_coef(t, Omega), repeated.debiased_coef(t, Omega),
                        rtol=1e-8, atol=1e-10)
        assert_allclose(weighted.coef_confidence_interval(t, 0.8, Omega),
                        repeated.coef_confidence_interval(t, 0.8, Omega), rtol=1e-8,
                        atol=1e-10)
    assert_allclose(weighted.noise_variance_path(Omega), repeated.noise_variance_path(Omega),
                    rtol=1e-8)


@pytest.mark.parametrize("solver", ["ista", "fista"])
@pytest.mark.parametrize("one_pass", [False, True])
def test_warm_start_and_pickle(one_pass, solver, speed_policy):
    """Both loops (``one_pass``), with the loop's gradients (ISTA) and its
    fitted gradient points (FISTA's clipped extrapolation): a warm start
    continues them, and a warm start from a pickled fit (which drops them)
    falls back to the products with ``X~``."""
    if one_pass:
        speed_policy(fuse_min_bytes=0)
    X, y, _, _ = _data(50, 70, 5, 5)
    full = TrajectoryLasso(alpha=0.05, solver=solver, max_iter=30, n_probes=None).fit(X, y)
    warm = TrajectoryLasso(alpha=0.05, solver=solver, max_iter=15, n_probes=None,
                           warm_start=True).fit(X, y)
    warm.set_params(max_iter=30).fit(X, y)
    assert (warm._gradient_path is not None) == (solver == "ista")
    assert (warm._source_path is not None) == (solver == "fista")
    assert_allclose(warm.risk_path_, full.risk_path_, rtol=1e-9)
    assert_allclose(warm.coef_confidence_interval(), full.coef_confidence_interval(),
                    rtol=1e-9, atol=1e-12)
    half = TrajectoryLasso(alpha=0.05, solver=solver, max_iter=15, n_probes=None,
                           warm_start=True).fit(X, y)
    half = pickle.loads(pickle.dumps(half)).set_params(max_iter=30).fit(X, y)
    assert half._gradient_path is None and half._source_path is None
    assert_allclose(half.risk_path_, full.risk_path_, rtol=1e-9)
    assert_allclose(half.coef_confidence_interval(), full.coef_confidence_interval(),
                    rtol=1e-9, atol=1e-12)
    copy = pickle.loads(pickle.dumps(full))
    assert_allclose(copy.debiased_coef(7), full.debiased_coef(7))
    assert_allclose(copy.excess_risk_path(), full.excess_risk_path())


def test_default_iterate_is_the_one_selected_by_the_search():
    # gradient descent with p > n overfits: the estimated risk is U-shaped
    X, y, _, _ = _data(60, 90, 10, 6, sigma=2.0)
    search = TrajectoryEarlyStoppingCV(IterativeRidge(alpha=0.0, max_iter=200), search="grid",
                                       criterion="risk", n_iter_no_change=None).fit(X, y)
    est, t = search.estimator_, search.best_iteration_
    assert 0 < t < est.n_iter_
    assert_allclose(est.debiased_coef(), est.debiased_coef(t))
    assert_allclose(est.coef_confidence_interval(), est.coef_confidence_interval(t))
    assert_allclose(pickle.loads(pickle.dumps(est)).debiased_coef(), est.debiased_coef(t))
    est.fit(X, y)  # a new fit: coef_ is the last iterate again
    assert_allclose(est.debiased_coef(), est.debiased_coef(-1))


# ----------------------------------------------------------------------------
# Monte Carlo: coverage and noise variance
# ----------------------------------------------------------------------------

MC_N, MC_P, MC_S, MC_REPS, MC_T = 400, 600, 200, 16, 40
MC_ITERATIONS = (1, 5, 15, 40)


def _make_mc(kind, seed):
    if kind == "gd":
        return IterativeRidge(alpha=0.0, max_iter=MC_T)
    if kind == "ridge_sgd":
        return IterativeRidge(alpha=0.0, solver="sgd", batch_size=MC_N // 5, max_iter=MC_T,
                              random_state=seed)
    if kind == "sgd":  # proximal SGD, batches of n / 10
        return TrajectoryLasso(alpha=0.1, solver="sgd", batch_size=MC_N // 10, max_iter=MC_T,
                               random_state=seed)
    return TrajectoryLasso(alpha=0.1, solver=kind, max_iter=MC_T, random_state=seed)


@pytest.mark.parametrize("rho", [0.0, 0.5], ids=["isotropic", "ar1"])
@pytest.mark.parametrize("kind", ["ista", "fista", "gd", "sgd", "ridge_sgd"])
def test_coverage_and_noise_variance_monte_carlo(kind, rho):
    """Coverage of 95% intervals and accuracy of sigma^2_t (sigma = 1).

    n = 400, p = 600, 200 nonzero coefficients (||beta||_Sigma^2 = 5), 16
    replicates, the true precision for the AR(1) design (rho = 0.5). In 40
    replicates of each of these six settings (measured offline with the same
    code), the coverage of one replicate had a standard deviation of at most
    0.013 over the 400 null coordinates and 0.023 over the 200 non-null ones
    (binomial: 0.011 and 0.015; gradient descent adds a common-mode part at
    late iterates), with means between 0.947 and 0.954. Over 16 replicates
    the standard deviations are 0.0033 and 0.0058, so [0.93, 0.97] is at
    least 3.1 standard deviations from every measured mean.

    sigma^2_t of one replicate had a standard deviation of at most 0.56 at
    t = 0 (the moment estimator) and 0.42 at t >= 1, and a mean within
    0.09 of 1 at every t. The tolerance is four standard deviations of the
    mean of 16 replicates: 4 * 0.6 / 4 = 0.6 at t = 0 and 4 * 0.45 / 4 =
    0.45 after.

    Mini-batch SGD (least squares, proximal or not; the corrected residuals
    of Tan & Bellec's estimate debias the iterate the same way), 40
    replicates (batches n/5 and n/10): coverage means 0.942-0.952, standard
    deviations per replicate at most 0.014 (null) and 0.021 (non-null),
    i.e. 0.0035 and 0.0053 for 16 replicates: [0.93, 0.97] is 2.3 of them
    from the lowest mean (these seeds pass). sigma^2_t: means 0.85-1.01
    (AR(1): biased down by up to 0.15), standard deviation 0.58 at t = 0
    and 0.55 after.
    """
    Omega = np.linalg.inv(_ar1(MC_P, rho)) if rho else None
    null, nonnull, s2 = [], [], []
    for rep in range(MC_REPS):
        X, y, beta, _ = _data(MC_N, MC_P, MC_S, 1000 + rep, rho=rho)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UnreliableEstimateWarning)
            est = _make_mc(kind, rep).fit(X, y)
            ci = np.stack([est.coef_confidence_interval(t, precision=Omega)
                           for t in MC_ITERATIONS])
        covered = (ci[..., 0] <= beta) & (beta <= ci[..., 1])
        null.append(covered[:, beta == 0].mean(axis=1))
        nonnull.append(covered[:, beta != 0].mean(axis=1))
        s2.append(est.noise_variance_path(Omega))
    null, nonnull, s2 = np.mean(null, axis=0), np.mean(nonnull, axis=0), np.mean(s2, axis=0)
    assert np.all((0.93 <= null) & (null <= 0.97)), null
    assert np.all((0.93 <= nonnull) & (nonnull <= 0.97)), nonnull
    tol = np.r_[0.6, np.full(MC_T, 0.45)]
    assert np.all(np.abs(s2 - 1.0) <= tol), s2


def test_identity_precision_is_biased_on_a_correlated_design():
    # the documented failure of precision=None: AR(1) with rho = 0.5, sigma = 1;
    # with the identity, sigma^2_0 estimates sigma^2 + beta^T (Sigma - Sigma^2) beta
    # (~ -2 here), with the true precision it is within its noise of 1
    X, y, beta, Sigma = _data(400, 600, 40, 7, rho=0.5)
    est = TrajectoryLasso(alpha=0.1, solver="ista", max_iter=10, random_state=0).fit(X, y)
    good = est.noise_variance_path(np.linalg.inv(Sigma))[0]
    bad = est.noise_variance_path()[0]
    assert abs(good - 1) < 0.6 and bad < -0.5


# ----------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fitted():
    X, y, _, _ = _data(40, 30, 5, 8)
    return TrajectoryLasso(alpha=0.05, max_iter=10, random_state=0).fit(X, y)


@pytest.mark.parametrize("precision, match", [
    (np.eye(29), r"shape \(n_features, n_features\) = \(30, 30\)"),
    (np.ones(30), r"shape \(n_features, n_features\)"),
    (np.diag(np.r_[np.nan, np.ones(29)]), "NaN or infinite"),
    (np.eye(30) + np.triu(np.ones((30, 30)), 1), "symmetric"),
    (np.diag(np.r_[0.0, np.ones(29)]), "positive diagonal"),
    ("identity", "got the string 'identity'"),
])
def test_bad_precision(fitted, precision, match):
    with pytest.raises(ValueError, match=match):
        fitted.debiased_coef(precision=precision)
    with pytest.raises(ValueError, match=match):
        fitted.noise_variance_path(precision)


def _least_squares_intervals(X, y, w, level):
    """Brute force: weighted least squares as repeated rows, Student-t intervals."""
    from scipy.stats import t as student_t
    reps = w.astype(int)
    Xr = np.repeat(np.column_stack([np.ones(len(y)), X]), reps, axis=0)
    yr = np.repeat(y, reps)
    b, rss, _, _ = np.linalg.lstsq(Xr, yr, rcond=None)
    dof = len(yr) - Xr.shape[1]
    s2 = rss[0] / dof
    half = student_t.ppf(0.5 + level / 2, dof) * np.sqrt(s2 * np.diag(np.linalg.inv(Xr.T @ Xr)))
    return b[1:], np.column_stack([b - half, b + half])[1:], s2


@pytest.mark.parametrize("make", [
    lambda: TrajectoryLasso(alpha=0.05, solver="fista", max_iter=15, random_state=0),
    lambda: IterativeRidge(alpha=0.1, max_iter=15),  # reuses the spectral decomposition
])
@pytest.mark.parametrize("sparse", [False, True])
def test_empirical_precision_is_least_squares_with_repeated_rows(make, sparse):
    X, y, _, _ = _data(60, 20, 5, 9, rho=0.5, shift=1.0)
    w = np.random.default_rng(0).integers(1, 4, 60).astype(float)
    coef, ref, s2 = _least_squares_intervals(X, y, w, 0.9)
    Xf = sp.csr_matrix(X) if sparse else X
    est = make().fit(Xf, y, sample_weight=w)
    assert_allclose(est.coef_confidence_interval(precision="empirical", level=0.9), ref,
                    rtol=1e-9, atol=1e-12)
    assert_allclose(est.noise_variance_path("empirical"), s2, rtol=1e-9)
    assert_allclose(est.excess_risk_path("empirical"), est.risk_path_ - s2, rtol=1e-9)
    # b^t + Omega^ X~^T (y~ - X~ b^t) / n is the least-squares fit at every t
    for t in (0, 7, -1):
        assert_allclose(est.debiased_coef(t, precision="empirical"), coef, rtol=1e-9)


def test_empirical_precision_intervals_cover():
    # exact Student-t intervals under Gaussian noise, whatever the design:
    # AR(1) rho = 0.6, 300 data sets x 40 coefficients; the mean coverage has
    # a standard deviation of 0.0026 (measured), the tolerance is 4 of them
    cover = []
    for seed in range(300):
        X, y, beta, _ = _data(120, 40, 5, 1000 + seed, rho=0.6)
        ci = IterativeRidge(max_iter=10, fit_intercept=False).fit(X, y) \
            .coef_confidence_interval(precision="empirical")
        cover.append(np.mean((ci[:, 0] <= beta) & (beta <= ci[:, 1])))
    assert abs(np.mean(cover) - 0.95) < 0.0105


@pytest.mark.parametrize("n, p, intercept", [(30, 40, True), (40, 40, False), (40, 39, True)])
def test_empirical_precision_is_refused_without_more_samples_than_features(n, p, intercept):
    X, y, _, _ = _data(n, p, 5, 9)
    est = IterativeRidge(max_iter=5, fit_intercept=intercept).fit(X, y)
    for method in (est.debiased_coef, est.coef_confidence_interval, est.noise_variance_path):
        with pytest.raises(ValueError, match=r"precision='empirical' is not available.*"
                           r"more samples than features.*independent rows.*or None"):
            method(precision="empirical")


def test_empirical_precision_is_refused_above_the_size_limit(speed_policy):
    speed_policy(empirical_max_features=10)
    X, y, _, _ = _data(40, 20, 5, 9)
    est = IterativeRidge(max_iter=5).fit(X, y)
    with pytest.raises(ValueError, match=r"only up to 10 features \(a 20 x 20 Gram"):
        est.debiased_coef(precision="empirical")


def test_noise_and_excess_risk_attributes_use_the_identity():
    X, y, _, _ = _data(80, 120, 5, 3)
    est = TrajectoryLasso(alpha=0.05, solver="ista", max_iter=12, random_state=0).fit(X, y)
    assert_allclose(est.noise_variance_path_, est.noise_variance_path(), rtol=1e-12)
    assert_allclose(est.excess_risk_path_, est.excess_risk_path(np.eye(120)), rtol=1e-12)
    assert est.noise_variance_path_.shape == (est.n_iter_ + 1,)
    # a warm continuation refreshes them
    est.set_params(warm_start=True, max_iter=20).fit(X, y)
    assert est.noise_variance_path_.shape == (21,)
    assert_allclose(est.noise_variance_path_, est.noise_variance_path(), rtol=1e-12)
    assert not hasattr(est.set_params(warm_start=False, estimate_risk=False).fit(X, y),
                       "noise_variance_path_")


@pytest.mark.parametrize("iteration", [11, -12, 2.0, True, "last"])
def test_bad_iteration(fitted, iteration):
    with pytest.raises(ValueError, match=r"iteration must be"):
        fitted.debiased_coef(iteration)


def test_negative_iteration_counts_from_the_end(fitted):
    assert_allclose(fitted.debiased_coef(-1), fitted.debiased_coef(10))
    assert_allclose(fitted.coef_confidence_interval(-11), fitted.coef_confidence_interval(0))


@pytest.mark.parametrize("level", [0, 1, 1.5, -0.1, True, "95%", np.nan])
def test_bad_level(fitted, level):
    with pytest.raises(ValueError, match=r"level must be a number in \(0, 1\)"):
        fitted.coef_confidence_interval(level=level)


def test_interval_shape_and_nesting(fitted):
    wide, narrow = fitted.coef_confidence_interval(level=0.99), \
        fitted.coef_confidence_interval(level=0.5)
    assert wide.shape == (30, 2)
    assert np.all(wide[:, 0] < narrow[:, 0]) and np.all(narrow[:, 1] < wide[:, 1])
    assert_allclose(wide.mean(axis=1), fitted.debiased_coef())


def test_not_fitted_and_no_risk_estimate():
    from skacv import TrajectoryHuberRegressor
    X, y, _, _ = _data(40, 30, 5, 10)
    huber = TrajectoryHuberRegressor(max_iter=5).fit(X, y)  # robust loss: no debiasing
    for name in ("debiased_coef", "coef_confidence_interval", "noise_variance_path",
                 "excess_risk_path"):  # absent, as scikit-learn hides what does not apply
        assert not hasattr(huber, name) and not hasattr(TrajectoryHuberRegressor(), name)
        with pytest.raises(AttributeError):
            getattr(huber, name)()
        assert callable(getattr(TrajectoryLasso(), name))
    assert not hasattr(huber, "noise_variance_path_")
    with pytest.raises(NotFittedError):
        TrajectoryLasso().debiased_coef()
    for est in (TrajectoryLasso(max_iter=5, estimate_risk=False),
                IterativeRidge(solver="sgd", max_iter=5, estimate_risk=False,
                               random_state=0)):
        est.fit(X, y)
        for call in (est.debiased_coef, est.coef_confidence_interval,
                     est.noise_variance_path, est.excess_risk_path):
            with pytest.raises(NotFittedError, match="estimate_risk=True"):
                call()
    # a refit without the estimate forgets the previous one
    est = TrajectoryLasso(max_iter=5).fit(X, y)
    est.set_params(estimate_risk=False).fit(X, y)
    with pytest.raises(NotFittedError, match="estimate_risk=True"):
        est.debiased_coef()


def test_flagged_iterate_warns(fitted):
    est = pickle.loads(pickle.dumps(fitted))
    est.risk_reliable_ = est.risk_reliable_.copy()
    est.risk_reliable_[6:] = False
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnreliableEstimateWarning)
        est.coef_confidence_interval(5)
    with pytest.warns(UnreliableEstimateWarning, match="iterate 6 is flagged"):
        est.debiased_coef(6)
    with pytest.warns(UnreliableEstimateWarning, match="iterate 10 is flagged"):
        est.coef_confidence_interval()


def test_a_search_keeps_what_the_intervals_need_with_the_risk_criterion():
    # K-fold switches the risk estimate off in the selected estimator: the
    # message says how to keep it
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 60))
    y = X[:, :5] @ np.ones(5) + rng.standard_normal(120)
    lasso = TrajectoryLasso(alpha=0.05, solver="ista", max_iter=40)
    default = TrajectoryEarlyStoppingCV(lasso, search="grid", criterion="kfold").fit(X, y)
    assert default.criterion_ == "kfold"
    with pytest.raises(NotFittedError, match="criterion='risk'"):
        default.estimator_.coef_confidence_interval()
    risk = TrajectoryEarlyStoppingCV(lasso, search="grid", criterion="risk").fit(X, y)
    t = risk.best_iteration_
    alone = TrajectoryLasso(alpha=0.05, solver="ista", max_iter=risk.estimator_.n_iter_,
                            random_state=risk.estimator_.random_state).fit(X, y)
    # the same intervals as a fit of its own at the selected iterate, up to
    # the float32 rounding of the chains (grown in stages by the search). That
    # rounding enters through the standard error, so it is measured against
    # each interval's width, not against an endpoint (which can be near zero:
    # CI measured a relative error of 1.4e-6 on an endpoint of 3e-3; against
    # the widths: 1e-9 here, 2e-3 or more for the neighbouring iterates)
    searched = risk.estimator_.coef_confidence_interval()
    own = alone.coef_confidence_interval(iteration=t)
    width = own[:, 1] - own[:, 0]
    assert np.all(width > 0)
    assert np.all(np.abs(searched - own) <= 1e-6 * width[:, None])


def test_small_factorisations_run_on_one_blas_thread(monkeypatch, speed_policy):
    """The Cholesky factor behind precision="empirical" runs on one BLAS
    thread up to the speed policy's ``one_thread_order["cholesky"]`` (LAPACK's threaded
    Cholesky of order 1000 took 48-76 ms with two OpenBLAS threads right
    after a fit, 12 ms with one), on every thread above; the intervals are
    the same."""
    import scipy.linalg
    from sklearn.base import clone
    from threadpoolctl import threadpool_limits

    import skacv.utils._parallel as parallel

    seen = []
    cho_factor = scipy.linalg.cho_factor

    def spy(*args, **kwargs):
        seen.append(parallel.blas_threads())
        return cho_factor(*args, **kwargs)

    monkeypatch.setattr(scipy.linalg, "cho_factor", spy)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 20))
    y = X[:, 0] + rng.standard_normal(80)
    est = IterativeRidge(alpha=1.0, max_iter=20)
    with threadpool_limits(2, user_api="blas"):
        if parallel.blas_threads() < 2:
            pytest.skip("the BLAS runs one thread only")
        small = est.fit(X, y).coef_confidence_interval(precision="empirical")
        speed_policy(one_thread_order={"cholesky": 0})
        large = clone(est).fit(X, y).coef_confidence_interval(precision="empirical")
    assert seen == [1, 2]
    assert_allclose(small, large, rtol=1e-12)
    # the diagonal of the inverse (LAPACK trtri on the factor) is that of inv()
    Xc = X - X.mean(axis=0)
    G = Xc.T @ Xc / X.shape[0]
    ls = est._uq_stats.least_squares
    assert_allclose(ls.precision_diagonal, np.diag(np.linalg.inv(G)), rtol=1e-10)


@pytest.mark.parametrize("n_jobs", [None, 2])
def test_a_grid_search_gives_its_selected_candidate_the_intervals_of_its_own_fit(n_jobs):
    # the candidates' debiasing statistics wait for the selection (in one
    # process) or come computed from the workers: the selected estimator has
    # them, equal to those of a fit of its own, whichever way it was fitted
    rng = np.random.default_rng(1)
    X = rng.standard_normal((120, 60))
    y = X[:, :5] @ np.ones(5) + rng.standard_normal(120)
    lasso = TrajectoryLasso(solver="ista", max_iter=40)
    search = TrajectoryEarlyStoppingCV(lasso, param_grid={"alpha": [0.2, 0.05, 0.01]},
                                       search="grid", criterion="risk", n_iter_no_change=None,
                                       n_jobs=n_jobs).fit(X, y)
    est, t = search.estimator_, search.best_iteration_
    alone = TrajectoryLasso(solver="ista", alpha=search.best_params_["alpha"],
                            max_iter=est.n_iter_, random_state=est.random_state).fit(X, y)
    assert_allclose(est.excess_risk_path_, alone.excess_risk_path_, rtol=1e-10)
    assert_allclose(est.noise_variance_path_, alone.noise_variance_path_, rtol=1e-10)
    assert_allclose(est.debiased_coef(), alone.debiased_coef(t), rtol=1e-10)
