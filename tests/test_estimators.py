"""TrajectoryLasso and IterativeRidge: the fit, the path and the estimator contract.

References are independent of skacv: scikit-learn's Lasso and Ridge solved to
high precision, the seed notebook's ISTA loop re-implemented in numpy, numpy's
``eigvalsh`` for the step size, and repeated rows for integer weights.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.linear_model import Lasso, Ridge
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import skacv.linalg._linalg as linalg_module
from skacv import IterativeRidge, TrajectoryLasso, config_context
from skacv._policy import get_policy
from skacv._statistics import get_statistics
from skacv._trace import record
from skacv.exceptions import DivergenceError

# ----------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------


def _problem(seed=0, n=60, p=15, sparsity=0.5, offset=1.0):
    """Well-conditioned data (condition number of the weighted centred
    Hessian ~ 15) with an offset (the intercept matters), half the entries
    zero (sparse formats are meaningful) and integer weights including zeros."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + offset
    X[rng.random((n, p)) < sparsity] = 0.0
    coef = rng.standard_normal(p)
    y = X @ coef + rng.standard_normal(n) + 3.0
    sw = rng.integers(0, 4, n).astype(np.float64)
    return X, y, sw


def _as_format(X, fmt):
    return {"dense": X, "csr": sp.csr_matrix(X), "csc": sp.csc_matrix(X)}[fmt]


def _seed_data(n, p, s, sigma, seed):
    """The seed notebook's generator (000): identity covariance, s equal
    nonzero coefficients 15 / sqrt(n)."""
    beta = 15 * np.hstack([np.ones(s), np.zeros(p - s)]) / np.sqrt(n)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal(size=(n, p))
    y = X @ beta + sigma * rng.standard_normal(size=(n,))
    return X, y, beta


def _soft(x, t):
    return np.sign(x) * np.clip(np.abs(x) - t, 0, None)


# Every solver of the two estimators (used by the warm start and path tests).
SOLVERS = {
    "ista": lambda: TrajectoryLasso(alpha=0.05, solver="ista"),
    "fista": lambda: TrajectoryLasso(alpha=0.05, solver="fista"),
    "gd": lambda: IterativeRidge(alpha=0.0, solver="gd"),
    "ridge_gd": lambda: IterativeRidge(alpha=2.0, solver="gd"),
    "gd_schedule_callable": lambda: IterativeRidge(
        alpha=0.0, solver="gd", step_schedule=lambda k: 1.5 / np.sqrt(k)
    ),
    "gd_schedule_array": lambda: IterativeRidge(
        alpha=1.0, solver="gd", step_schedule=np.linspace(1.5, 0.5, 100)
    ),
    "nesterov_auto": lambda: IterativeRidge(alpha=1.0, solver="nesterov"),
    "nesterov_constant": lambda: IterativeRidge(alpha=1.0, solver="nesterov", momentum=0.6),
    "heavy_ball": lambda: IterativeRidge(alpha=1.0, solver="heavy_ball", momentum=0.7),
    "sgd": lambda: IterativeRidge(
        alpha=1.0, solver="sgd", batch_size=8, random_state=0,
        step_schedule=lambda k: 1.0 / np.sqrt(k),
    ),
}


# ----------------------------------------------------------------------------
# convergence to scikit-learn's solutions
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["dense", "csr", "csc"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("solver", ["fista", "ista"])
def test_lasso_converges_to_sklearn(solver, fit_intercept, weighted, fmt):
    X, y, sw = _problem()
    sw = sw if weighted else None
    ref = Lasso(alpha=0.1, fit_intercept=fit_intercept, tol=1e-14, max_iter=100_000)
    ref.fit(X, y, sample_weight=sw)
    est = TrajectoryLasso(alpha=0.1, solver=solver, fit_intercept=fit_intercept,
                          max_iter=600, estimate_risk=False)
    est.fit(_as_format(X, fmt), y, sample_weight=sw)
    assert_allclose(est.coef_, ref.coef_, rtol=0, atol=1e-6)
    assert_allclose(est.intercept_, ref.intercept_, rtol=0, atol=1e-6)
    # the penalty is active: some coefficients are exactly zero, others not
    assert 0 < np.sum(ref.coef_ == 0) < X.shape[1]
    assert_array_equal(est.coef_ == 0, ref.coef_ == 0)


@pytest.mark.parametrize("fmt", ["dense", "csr", "csc"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("solver", ["gd", "nesterov", "heavy_ball"])
def test_ridge_converges_to_sklearn(solver, fit_intercept, weighted, fmt):
    X, y, sw = _problem()
    sw = sw if weighted else None
    ref = Ridge(alpha=3.0, fit_intercept=fit_intercept, solver="cholesky")
    ref.fit(X, y, sample_weight=sw)
    est = IterativeRidge(alpha=3.0, solver=solver, fit_intercept=fit_intercept,
                         max_iter=600, estimate_risk=False)
    est.fit(_as_format(X, fmt), y, sample_weight=sw)
    assert_allclose(est.coef_, ref.coef_, rtol=0, atol=1e-6)
    assert_allclose(est.intercept_, ref.intercept_, rtol=0, atol=1e-6)
    # the penalty matters: the unpenalised least-squares solution is far away
    ols = Ridge(alpha=0.0, fit_intercept=fit_intercept).fit(X, y, sample_weight=sw)
    assert np.max(np.abs(ols.coef_ - ref.coef_)) > 1e-2


def test_intercept_path_is_weighted_centring():
    X, y, sw = _problem(1)
    est = TrajectoryLasso(alpha=0.05, max_iter=30, estimate_risk=False).fit(X, y, sw)
    x_mean = np.average(X, axis=0, weights=sw)
    y_mean = np.average(y, weights=sw)
    assert_allclose(est.intercept_path_, y_mean - x_mean @ est.coef_path_, rtol=1e-12)
    assert est.intercept_path_[0] == pytest.approx(y_mean)


# ----------------------------------------------------------------------------
# the seed notebook (000): plain ISTA iterates
# ----------------------------------------------------------------------------


def test_path_equals_seed_notebook_ista():
    n, p, s, T, sigma, lam = 200, 300, 20, 30, 1.5, 0.01
    X, y, _ = _seed_data(n, p, s, sigma, seed=2025)
    eta = (1 + np.sqrt(p / n)) ** -2
    # the seed's loop: T columns, the starting point and T - 1 steps
    ref = np.zeros((p, T))
    bt = np.zeros(p)
    for t in range(1, T):
        bt = _soft(bt + eta * X.T @ (y - X @ bt) / n, lam * eta)
        ref[:, t] = bt
    est = TrajectoryLasso(alpha=lam, solver="ista", fit_intercept=False, step_size=eta,
                          max_iter=T - 1, estimate_risk=False).fit(X, y)
    assert est.coef_path_.shape == (p, T)
    assert_allclose(est.coef_path_, ref, rtol=0, atol=1e-10)
    assert_array_equal(est.intercept_path_, np.zeros(T))
    # the thresholding acts: a nontrivial support along the path
    assert 0 < np.count_nonzero(ref[:, -1]) < p


# ----------------------------------------------------------------------------
# warm start
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SOLVERS))
def test_warm_start_equals_cold_bit_for_bit(name):
    X, y, _ = _problem(2, n=40, p=30, offset=0.5)
    cold = SOLVERS[name]().set_params(max_iter=100, estimate_risk=False).fit(X, y)
    warm = SOLVERS[name]().set_params(max_iter=50, warm_start=True, estimate_risk=False)
    warm.fit(X, y)
    assert warm.n_iter_ == 50
    first_half = warm.coef_path_.copy()
    warm.set_params(max_iter=100).fit(X, y)
    assert warm.n_iter_ == 100
    assert warm.coef_path_.shape == (30, 101)
    assert_array_equal(warm.coef_path_, cold.coef_path_)
    assert_array_equal(warm.intercept_path_, cold.intercept_path_)
    assert_array_equal(warm.coef_path_[:, :51], first_half)
    assert warm.step_size_ == cold.step_size_
    # the path still moves at the junction (the comparison is not trivial)
    assert not np.array_equal(cold.coef_path_[:, 50], cold.coef_path_[:, 51])
    # a refit with the same max_iter is a no-op
    warm.fit(X, y)
    assert_array_equal(warm.coef_path_, cold.coef_path_)


def test_warm_start_keeps_momentum_state():
    """Restarting FISTA/Nesterov at x^50 without momentum gives another path:
    the warm path must not."""
    X, y, _ = _problem(2, n=40, p=30, offset=0.5)
    cold = TrajectoryLasso(alpha=0.05, max_iter=60, estimate_risk=False).fit(X, y)
    half = TrajectoryLasso(alpha=0.05, max_iter=50, estimate_risk=False).fit(X, y)
    # ten plain FISTA steps from x^50 with tau reset: a different point
    from skacv.iterations._iterations import FISTA
    from skacv.iterations._path import init_state, run_trajectory
    from skacv.linalg._design import Design

    d = Design(X, None, True)
    _, yt = d.center_y(y)
    state = init_state(d, coef_init=half.coef_)
    out = np.zeros((30, 11))
    run_trajectory(d, yt, FISTA(half.step_size_, 0.05), 10, state, out)
    assert np.max(np.abs(out[:, 10] - cold.coef_)) > 1e-8


def test_warm_start_errors():
    X, y, sw = _problem(3, n=40, p=20)
    est = TrajectoryLasso(alpha=0.05, max_iter=20, warm_start=True, estimate_risk=False)
    est.fit(X, y)
    with pytest.raises(ValueError, match="max_iter=10 must be larger than or equal to n_iter_=20"):
        est.set_params(max_iter=10).fit(X, y)
    est.set_params(max_iter=30)
    with pytest.raises(ValueError, match=r"shape \(40, 20\).*shape \(30, 20\)"):
        est.fit(X[:30], y[:30])
    with pytest.raises(ValueError, match="20 features"):
        est.fit(X[:, :10], y)
    X2 = X.copy()
    X2[17, 3] += 0.5  # one entry, away from the first rows
    with pytest.raises(ValueError, match="other training data"):
        est.fit(X2, y)
    y2 = y.copy()
    y2[[5, 6]] = y2[[6, 5]]  # same sum, other order
    with pytest.raises(ValueError, match="other training data"):
        est.fit(X, y2)
    with pytest.raises(ValueError, match="other training data"):
        est.fit(X, y, sample_weight=sw)
    with pytest.raises(ValueError, match=r"\['alpha'\] changed"):
        est.set_params(alpha=0.1).fit(X, y)
    est.set_params(alpha=0.05)
    with pytest.raises(ValueError, match=r"\['solver'\] changed"):
        est.set_params(solver="ista").fit(X, y)
    est.set_params(solver="fista")
    with pytest.raises(ValueError, match=r"\['step_size'\] changed"):
        est.set_params(step_size=0.01).fit(X, y)
    est.set_params(step_size="auto")
    # none of the failed calls touched the path; the same data continues it
    assert est.n_iter_ == 20
    est.fit(X, y)
    cold = TrajectoryLasso(alpha=0.05, max_iter=30, estimate_risk=False).fit(X, y)
    assert_array_equal(est.coef_path_, cold.coef_path_)

    ridge = IterativeRidge(alpha=1.0, max_iter=10, warm_start=True, estimate_risk=False)
    ridge.fit(X, y, sample_weight=sw)
    sw2 = sw.copy()
    i, j = np.argmin(sw), np.argmax(sw)
    sw2[[i, j]] = sw[[j, i]]  # same total weight, other weights
    with pytest.raises(ValueError, match="other training data"):
        ridge.set_params(max_iter=20).fit(X, y, sample_weight=sw2)
    with pytest.raises(ValueError, match=r"\['solver'\] changed"):
        ridge.set_params(solver="heavy_ball").fit(X, y, sample_weight=sw)
    with pytest.raises(ValueError, match=r"\['momentum'\] changed"):
        ridge.set_params(solver="gd", momentum=0.5).fit(X, y, sample_weight=sw)

    # an array schedule: an equal copy continues, another schedule raises
    sched = np.linspace(1.0, 0.5, 30)
    ridge = IterativeRidge(max_iter=10, warm_start=True, estimate_risk=False,
                           step_schedule=sched).fit(X, y)
    ridge.set_params(max_iter=20, step_schedule=sched.copy()).fit(X, y)
    assert ridge.n_iter_ == 20
    with pytest.raises(ValueError, match=r"\['step_schedule'\] changed"):
        ridge.set_params(max_iter=30, step_schedule=np.ones(30)).fit(X, y)


# ----------------------------------------------------------------------------
# bad input
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("Est", [TrajectoryLasso, IterativeRidge])
@pytest.mark.parametrize("where", ["X", "y", "sample_weight"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input_raises(Est, where, bad):
    X, y, sw = _problem(4, n=20, p=5)
    arrays = {"X": X.copy(), "y": y.copy(), "sample_weight": sw.copy()}
    arrays[where][(3, 2) if where == "X" else 3] = bad
    with pytest.raises(ValueError, match="NaN|infinity|finite"):
        Est(max_iter=5, estimate_risk=False).fit(arrays["X"], arrays["y"],
                                                 sample_weight=arrays["sample_weight"])


@pytest.mark.parametrize("Est", [TrajectoryLasso, IterativeRidge])
@pytest.mark.parametrize("where", ["X", "y", "sample_weight"])
@pytest.mark.parametrize("p", [5, 400])  # LAPACK's top eigenvalue and Lanczos's
def test_finite_input_whose_squares_overflow_raises_with_the_fix(Est, where, p):
    """Finite values whose squares overflow: the data's error, with the fix
    (it was LAPACK's "Internal Error", or a divergence "at step 1")."""
    X, y, sw = _problem(4, n=20, p=p)
    arrays = {"X": X.copy(), "y": y.copy(), "sample_weight": sw.copy()}
    # (weights enter the squares once: 1e200 fits on the samples' side)
    arrays[where] *= 1e307 if where == "sample_weight" else 1e200
    with pytest.raises(ValueError, match="The data overflow float64.*Rescale them"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # numpy's own, on the way
            Est(max_iter=5).fit(arrays["X"], arrays["y"], sample_weight=arrays["sample_weight"])


@pytest.mark.parametrize("schedule", [lambda k: -1.0, lambda k: np.inf,
                                      lambda k: 1.0 if k < 3 else -0.5, [1.0, -1.0, 1.0]])
def test_negative_or_non_finite_step_schedule_raises(schedule):
    """A callable schedule is checked as an array one is (a negative factor
    ran gradient ascent without a word)."""
    X, y, _ = _problem(4, n=20, p=5)
    with pytest.raises(ValueError, match="step_schedule must"):
        IterativeRidge(max_iter=3, step_schedule=schedule).fit(X, y)


@pytest.mark.parametrize("Est", [TrajectoryLasso, IterativeRidge])
def test_empty_and_mismatched_input_raises(Est):
    X, y, _ = _problem(4, n=20, p=5)
    with pytest.raises(ValueError):
        Est(max_iter=5).fit(X[:0], y[:0])
    with pytest.raises(ValueError):
        Est(max_iter=5).fit(X, y[:-1])
    with pytest.raises(ValueError, match="non-zero"):
        Est(max_iter=5, estimate_risk=False).fit(X, y, sample_weight=np.zeros(20))


@pytest.fixture(params=["covariance", "design"])
def loop_form(speed_policy, request, monkeypatch):
    """The fit loop's products: X~^T X~ (which these small tall designs
    take) or X~ (the covariance form switched off)."""

    if request.param == "design":
        speed_policy(covariance_max_features=0)
    return request.param


@pytest.mark.parametrize("name", ["ista", "fista", "gd", "nesterov_auto", "heavy_ball"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_too_large_step_raises_with_the_fix(name, dtype, loop_form):
    X, y, _ = _problem(5, n=40, p=20)
    est = SOLVERS[name]().set_params(max_iter=200, estimate_risk=False)
    L = 1.0 / est.fit(X, y).step_size_  # the auto step 1/L
    assert est._solver_state.form == loop_form
    # beyond every method's stability limit (heavy ball: 2 (1 + momentum) / L)
    est.set_params(step_size=5.0 / L)
    with pytest.raises(DivergenceError, match="step_size='auto'") as info:
        est.fit(X.astype(dtype), y)
    assert isinstance(info.value, ValueError)
    assert "diverge" in str(info.value)


def test_largest_safe_step_does_not_raise():
    """Just below 2/L gradient descent converges: no false alarm."""
    X, y, _ = _problem(5, n=40, p=20)
    est = IterativeRidge(alpha=0.0, max_iter=300, estimate_risk=False).fit(X, y)
    est.set_params(step_size=1.9 * est.step_size_).fit(X, y)
    assert np.all(np.isfinite(est.coef_path_))


def test_memory_refusal_reports_the_size():
    X, y, _ = _problem(6, n=30, p=40)
    est = TrajectoryLasso(max_iter=1000, estimate_risk=False)
    n_bytes = 40 * 1001 * 8
    mib = n_bytes / 2**20  # the limit is in MiB, like scikit-learn's working_memory
    with config_context(path_memory_limit=mib * (1 - 1e-9)):
        with pytest.raises(ValueError, match=rf"coef_path_ .*\({mib:.6g} MiB\)"):
            est.fit(X, y)
    with config_context(path_memory_limit=mib):
        est.fit(X, y)
    assert est.coef_path_.nbytes == n_bytes
    # the float32 path needs half
    with config_context(path_memory_limit=mib / 2):
        est.fit(X.astype(np.float32), y)


# ----------------------------------------------------------------------------
# formats, dtypes and weights
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ista", "fista", "ridge_gd", "nesterov_auto", "heavy_ball"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_sparse_equals_dense(name, fit_intercept, fmt):
    X, y, sw = _problem(7, n=50, p=30)
    kw = dict(max_iter=40, fit_intercept=fit_intercept, estimate_risk=False)
    for weights in (None, sw):
        dense = SOLVERS[name]().set_params(**kw).fit(X, y, sample_weight=weights)
        sparse = SOLVERS[name]().set_params(**kw).fit(_as_format(X, fmt), y,
                                                      sample_weight=weights)
        assert_allclose(sparse.step_size_, dense.step_size_, rtol=1e-12)
        assert_allclose(sparse.coef_path_, dense.coef_path_, rtol=0, atol=1e-10)
        assert_allclose(sparse.intercept_path_, dense.intercept_path_, rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", ["ista", "fista", "ridge_gd", "nesterov_auto"])
def test_float32_stays_float32(name):
    X, y, _ = _problem(8, n=50, p=30)
    est64 = SOLVERS[name]().set_params(max_iter=30, estimate_risk=False).fit(X, y)
    for X32 in (X.astype(np.float32), sp.csr_matrix(X.astype(np.float32))):
        est = SOLVERS[name]().set_params(max_iter=30, estimate_risk=False).fit(X32, y)
        assert est.coef_path_.dtype == np.float32
        assert est.intercept_path_.dtype == np.float32
        assert est.coef_.dtype == np.float32
        assert est.predict(X32).dtype == np.float32
        assert est.predict_path(X32).dtype == np.float32
        assert next(est.staged_predict(X32)).dtype == np.float32
        scale = np.abs(est64.coef_path_).max()
        assert_allclose(est.coef_path_, est64.coef_path_, rtol=0, atol=1e-4 * scale)


@pytest.mark.parametrize("name", ["ista", "fista", "ridge_gd", "nesterov_auto", "heavy_ball"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_integer_weights_equal_repeated_rows(name, fit_intercept):
    X, y, sw = _problem(9, n=40, p=25)
    idx = np.repeat(np.arange(40), sw.astype(int))
    kw = dict(max_iter=40, fit_intercept=fit_intercept, estimate_risk=False)
    weighted = SOLVERS[name]().set_params(**kw).fit(X, y, sample_weight=sw)
    repeated = SOLVERS[name]().set_params(**kw).fit(X[idx], y[idx])
    assert_allclose(weighted.step_size_, repeated.step_size_, rtol=1e-10)
    assert_allclose(weighted.coef_path_, repeated.coef_path_, rtol=0, atol=1e-10)
    assert_allclose(weighted.intercept_path_, repeated.intercept_path_, rtol=0, atol=1e-10)


# ----------------------------------------------------------------------------
# paths and predictions
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fista", "heavy_ball"])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_predict_path_staged_predict_predict_agree(name, fmt):
    X, y, sw = _problem(10, n=50, p=20)
    est = SOLVERS[name]().set_params(max_iter=25, estimate_risk=False).fit(X, y, sw)
    X_new = _as_format(np.random.default_rng(1).standard_normal((7, 20)), fmt)
    Xd = X_new.toarray() if sp.issparse(X_new) else X_new
    P = est.predict_path(X_new)
    assert P.shape == (7, 26)
    assert_allclose(P, Xd @ est.coef_path_ + est.intercept_path_, rtol=1e-12, atol=1e-12)
    staged = np.column_stack(list(est.staged_predict(X_new)))
    assert_allclose(staged, P, rtol=1e-12, atol=1e-12)
    assert_allclose(est.predict(X_new), P[:, -1], rtol=1e-12, atol=1e-12)
    assert_allclose(P[:, 0], est.intercept_path_[0])  # the zero start
    # fitted attributes
    assert est.coef_path_.flags.f_contiguous
    assert_array_equal(est.coef_path_[:, 0], 0.0)
    assert_array_equal(est.coef_, est.coef_path_[:, -1])
    assert est.intercept_ == est.intercept_path_[-1]
    assert est.n_iter_ == 25


def test_pipeline_with_standard_scaler():
    X, y, _ = _problem(11, n=80, p=10)
    X = X * np.arange(1, 11)  # unequal column scales
    pipe = make_pipeline(StandardScaler(), TrajectoryLasso(alpha=0.05, max_iter=50,
                                                           random_state=0)).fit(X, y)
    Z = StandardScaler().fit_transform(X)
    direct = TrajectoryLasso(alpha=0.05, max_iter=50, random_state=0).fit(Z, y)
    assert_allclose(pipe.predict(X), direct.predict(Z), rtol=1e-12)
    assert_allclose(pipe[-1].coef_path_, direct.coef_path_, rtol=1e-12, atol=1e-14)


def test_grid_search_cv_over_alpha():
    X, y, _ = _problem(12, n=80, p=10)
    alphas = [0.01, 0.3, 3.0]
    cv = KFold(4, shuffle=True, random_state=0)
    base = TrajectoryLasso(max_iter=200, estimate_risk=False)
    search = GridSearchCV(base, {"alpha": alphas}, cv=cv).fit(X, y)
    manual = [cross_val_score(TrajectoryLasso(alpha=a, max_iter=200, estimate_risk=False),
                              X, y, cv=cv).mean() for a in alphas]
    assert_allclose(search.cv_results_["mean_test_score"], manual, rtol=1e-12)
    assert search.best_params_ == {"alpha": alphas[int(np.argmax(manual))]}
    assert search.best_estimator_.coef_path_.shape == (10, 201)


# ----------------------------------------------------------------------------
# the automatic step size
# ----------------------------------------------------------------------------


def _top_eigenvalue(X, sw, fit_intercept):
    w = np.ones(X.shape[0]) if sw is None else sw
    Xc = X - np.average(X, axis=0, weights=w) if fit_intercept else X
    return np.linalg.eigvalsh(Xc.T @ (w[:, None] * Xc) / w.sum())[-1]


@pytest.mark.parametrize("shape", [(60, 15), (15, 60)])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
def test_auto_step_is_inverse_top_eigenvalue(shape, fit_intercept, weighted):
    X, y, sw = _problem(13, *shape)
    sw = sw if weighted else None
    L = _top_eigenvalue(X, sw, fit_intercept)
    kw = dict(max_iter=1, fit_intercept=fit_intercept, estimate_risk=False)
    lasso = TrajectoryLasso(**kw).fit(X, y, sw)
    assert_allclose(lasso.step_size_, 1.0 / L, rtol=1e-12)
    ridge = IterativeRidge(alpha=2.0, **kw).fit(sp.csr_matrix(X), y, sw)
    n_eff = shape[0] if sw is None else sw.sum()
    assert_allclose(ridge.step_size_, 1.0 / (L + 2.0 / n_eff), rtol=1e-12)
    # a float is used as given
    assert TrajectoryLasso(step_size=0.123, **kw).fit(X, y).step_size_ == 0.123


@pytest.mark.parametrize("fmt", ["dense", "csr"])
@pytest.mark.parametrize("shape", [(300, 120), (120, 300)])
def test_auto_step_lanczos_branch(speed_policy, fmt, shape):
    """Above the dense size (one threshold, the speed policy's
    ``dense_eig_size``, for the design and for ``top_eigenvalue``): Lanczos
    on the implicit operator, without forming the Gram matrix, its Ritz value
    inflated into an upper bound; and ``top_eigenvalue`` of a formed matrix
    above that size is ARPACK's (eigsh). Forced here on a small problem."""
    X, y, sw = _problem(14, *shape, sparsity=0.3)
    L = _top_eigenvalue(X, sw, True)
    speed_policy(dense_eig_size=50)
    with record() as paths:
        est = TrajectoryLasso(max_iter=1, estimate_risk=False).fit(_as_format(X, fmt), y, sw)
    assert paths.count("lanczos_top_eigenvalues") == 1, "the Lanczos branch was not used"
    assert "eigsh" not in paths  # (converged: ARPACK not needed)
    tol = get_statistics().lipschitz_tol
    assert L <= 1.0 / est.step_size_ <= L * (1 + 2 * tol)
    # top_eigenvalue of a formed matrix above the dense size: ARPACK, exact to its tol
    w = sw / sw.sum()
    Xc = X - w @ X
    G = Xc.T @ (w[:, None] * Xc)
    with record() as paths:
        assert_allclose(linalg_module.top_eigenvalue(G, policy=get_policy()), L, rtol=1e-6)
    assert paths.names() == ["eigsh"]


@pytest.mark.parametrize("name", ["fista", "nesterov_auto"])
def test_warm_start_risk_path_equals_cold(name):
    """The estimates of a warm-started path are those of the cold path."""
    X, y, _ = _problem(2, n=40, p=30, offset=0.5)
    kw = dict(random_state=0, n_probes=5, risk_options={"chain_dtype": "float64"})
    cold = SOLVERS[name]().set_params(max_iter=40, **kw).fit(X, y)
    warm = SOLVERS[name]().set_params(max_iter=20, warm_start=True, **kw).fit(X, y)
    warm.set_params(max_iter=40).fit(X, y)
    assert warm.risk_path_.shape == (41,)
    assert_allclose(warm.risk_path_, cold.risk_path_, rtol=1e-10)


@pytest.mark.parametrize("name", ["gd", "ista", "ridge"])
def test_step_just_above_the_stability_limit_warns(name, loop_form):
    """2.05/L diverges too slowly to reach the error threshold in 100 steps;
    the growth of ||x^k - x^(k-1)|| (impossible for a nonexpansive step)
    gives it away. 1.99/L stays silent."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    X, y, _ = _problem(5, n=60, p=30)
    make = {"gd": lambda: IterativeRidge(alpha=0.0, solver="gd"),
            "ridge": lambda: IterativeRidge(alpha=3.0, solver="gd"),
            "ista": lambda: TrajectoryLasso(alpha=0.01, solver="ista")}[name]
    est = make().set_params(max_iter=100, estimate_risk=False)
    L = 1.0 / est.fit(X, y).step_size_
    assert est._solver_state.form == loop_form
    with pytest.warns(ConvergenceWarning, match="stability limit 2/L"):
        est.set_params(step_size=2.05 / L).fit(X, y)
    assert np.all(np.isfinite(est.coef_path_))  # not caught by the divergence error
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est.set_params(step_size=1.99 / L, max_iter=400).fit(X, y)
        # and a warm continuation checks across the boundary of the two fits
        est.set_params(warm_start=True, max_iter=500).fit(X, y)


def test_auto_step_by_lanczos_is_never_too_long():
    # above dense_eig_size the top eigenvalue comes from Lanczos with a loose
    # tolerance, inflated by it: the step is at most 1 / L and within 2e-3 of it
    from skacv._policy import get_policy

    LIPSCHITZ_TOL = get_statistics().lipschitz_tol

    dense_eig_size = get_policy().dense_eig_size

    rng = np.random.default_rng(0)
    n = dense_eig_size + 50
    for p in (n // 2 + dense_eig_size, n + 100):
        X = rng.standard_normal((n, p))
        X[:, 1] = X[:, 0] + 0.01 * X[:, 1]  # a near-collinear pair: a separated top
        y = rng.standard_normal(n)
        L = _top_eigenvalue(X, None, True)
        step = TrajectoryLasso(max_iter=1, estimate_risk=False).fit(X, y).step_size_
        assert step <= 1.0 / L
        assert step >= (1.0 - 2 * LIPSCHITZ_TOL) / L


def test_top_eigenvalue_by_lanczos_stops_at_its_tolerance():
    # lanczos_top_eigenvalues: every process stops at the first step where its
    # top Ritz value has a relative residual <= tol; then theta <= lambda_max
    # <= theta (1 + tol). Checked on a known spectrum, three starts at once
    from skacv.linalg._linalg import lanczos, lanczos_top_eigenvalues, top_ritz

    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.standard_normal((400, 400)))
    lam = np.concatenate([[50.0], rng.uniform(0.0, 10.0, 399)])  # a separated top
    A = (Q * lam) @ Q.T
    calls = []

    def op(V):
        calls.append(1)
        return A @ V

    W0 = rng.standard_normal((400, 3))
    tol = 1e-3
    theta = lanczos_top_eigenvalues(op, W0, tol, np.inf)
    assert np.all(theta <= 50.0 * (1 + 1e-12)) and np.all(50.0 <= theta * (1 + tol))
    # the stopping step is the first where the rule holds, for the slowest start
    first = []
    for i in range(3):
        for k in range(2, 40):
            theta_k, res, _ = top_ritz(lanczos(lambda V, i=i: A @ V, W0[:, [i]], k), 0)
            if res <= tol * theta_k:
                first.append(k)
                break
    assert len(calls) == max(first) <= 12
    # a flat top needs more steps than allowed: nan, not an unconverged value
    flat = np.linspace(9.0, 10.0, 400)
    B = (Q * flat) @ Q.T
    assert np.isnan(lanczos_top_eigenvalues(lambda V: B @ V, W0[:, :1], 1e-9, np.inf,
                                            max_steps=5)).all()
    # the whole space explored: exact
    small = rng.standard_normal((6, 6))
    S = small @ small.T
    exact = np.linalg.eigvalsh(S)[-1]
    assert_allclose(lanczos_top_eigenvalues(lambda V: S @ V, W0[:6, :2], 1e-14, np.inf), exact,
                    rtol=1e-10)


def test_top_eigenvalue_by_lanczos_caps_its_basis(speed_policy, monkeypatch):
    # the basis kept for re-orthogonalisation is capped (the policy's lanczos_basis_bytes): a
    # process that would need more steps than the cap allows returns nan (the
    # callers then fall back to ARPACK or the fold's own design)
    from skacv.linalg._linalg import lanczos_top_eigenvalues

    rng = np.random.default_rng(2)
    d = np.linspace(1.0, 2.0, 500)  # a flat top: tens of steps at 1e-3
    calls = []

    def op(V):
        calls.append(1)
        return d[:, None] * V

    W0 = rng.standard_normal((500, 1))
    cap = get_policy().lanczos_basis_bytes
    theta = lanczos_top_eigenvalues(op, W0, 1e-3, cap)
    needed = len(calls)
    assert 10 < needed < 128 and 2.0 <= theta[0] * (1 + 1e-3)
    calls.clear()
    assert np.isnan(lanczos_top_eigenvalues(op, W0, 1e-3, 8 * 500 * (needed - 1))).all()
    assert len(calls) == needed - 1
    # np.inf: no cap (the folds' block, whose fallback costs more memory)
    calls.clear()
    assert_allclose(lanczos_top_eigenvalues(op, W0, 1e-3, np.inf), theta)
    assert len(calls) == needed


def test_lanczos_stopped_by_until_resumes_as_a_fresh_run():
    from skacv.linalg._linalg import lanczos

    rng = np.random.default_rng(1)
    B = rng.standard_normal((80, 120))
    K = B @ B.T / 120
    W0 = rng.standard_normal((80, 2))
    stopped = lanczos(lambda V: K @ V, W0, 30, until=lambda state: state.j >= 5)
    assert stopped.j == 5 and stopped.alphas.shape[0] == 5
    resumed = lanczos(lambda V: K @ V, W0, 12, resume=stopped)
    fresh = lanczos(lambda V: K @ V, W0, 12)
    assert_allclose(resumed.alphas, fresh.alphas, rtol=1e-12)
    assert_allclose(resumed.betas, fresh.betas, rtol=1e-12)


@pytest.mark.parametrize("fuse", [False, True])
def test_auto_step_of_a_design_with_a_common_factor_takes_a_few_passes(speed_policy, fuse):
    # a common factor gives a well-separated top eigenvalue: the step size
    # takes a handful of passes over X (ARPACK's eigsh took 21), and is
    # still an upper bound within LIPSCHITZ_TOL. If Lanczos does not
    # converge, ARPACK takes over.
    import skacv.linalg._design as design_module

    LIPSCHITZ_TOL = get_statistics().lipschitz_tol

    if fuse:
        speed_policy(fuse_min_bytes=0)
    rng = np.random.default_rng(4)
    n, p = 420, 360
    X = rng.standard_normal((n, p)) + rng.standard_normal((n, 1))
    sw = rng.uniform(0.5, 2.0, n)
    d = design_module.Design(X, sw, True)
    assert d.fuses == fuse
    L = _top_eigenvalue(X, sw, True)
    name = "panel_products" if fuse else "rmatvec"  # the passes over X
    with record() as paths:
        lip = d.lipschitz()
    assert L <= lip <= L * (1 + 2 * LIPSCHITZ_TOL)
    assert 2 <= paths.count(name) <= 6 and "eigsh" not in paths
    # once per design: the fits of a search share it (shared_designs)
    with record() as paths:
        assert d.lipschitz() == lip
    assert not paths.count(name)
    # a Lanczos basis of two vectors (the policy's lanczos_basis_bytes): not
    # converged in its two steps, ARPACK takes over
    speed_policy(lanczos_basis_bytes=0)
    with record() as paths:
        fallback = design_module.Design(X, sw, True).lipschitz()
    assert L <= fallback <= L * (1 + 2 * LIPSCHITZ_TOL)
    assert "lanczos_top_eigenvalues" in paths and "eigsh" in paths
    assert paths.count(name) >= 20  # eigsh's


def test_warm_refit_reuses_the_design():
    """A warm refit continues on the centred design of the previous fit
    (built once); it is not pickled and a cold fit releases it."""
    import pickle

    X, y, _ = _problem(3, n=40, p=30, offset=0.5)
    with record() as paths:
        warm = TrajectoryLasso(alpha=0.05, max_iter=10, warm_start=True, n_probes=3,
                               random_state=0).fit(X, y)
        warm.set_params(max_iter=25).fit(X, y)
        warm.set_params(max_iter=30).fit(X, y)
    assert paths.count("fit") == 3 and paths.count("make_design") == 1
    cold = TrajectoryLasso(alpha=0.05, max_iter=30, n_probes=3, random_state=0).fit(X, y)
    assert_array_equal(warm.coef_path_, cold.coef_path_)
    assert_allclose(warm.risk_path_, cold.risk_path_, rtol=1e-6)
    assert "_warm_design" not in pickle.loads(pickle.dumps(warm)).__dict__
    warm.set_params(warm_start=False).fit(X, y)
    assert warm._warm_design is None
