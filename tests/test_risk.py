"""Tests of the memory-matrix risk estimate (Bellec & Tan 2024).

The references are written here independently of skacv's iteration objects:
plain numpy loops of every algorithm in which the gradient of step ``s + 1``
sees its own copy ``y^(s)`` of the response. Finite differences of those
loops give the Jacobians ``d b^t / d y^(s)`` (exactly, for the linear
algorithms, since the maps are linear), hence the exact memory matrix.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

from skacv import FISTA, HeavyBall, IterativeRidge, TrajectoryLasso, config_context
from skacv._trace import record
from skacv.estimates.risk._estimate import memory_matrix, risk_from_memory

# ----------------------------------------------------------------------------
# independent reference implementations
# ----------------------------------------------------------------------------


def _soft(x, t):
    return np.sign(x) * np.maximum(np.abs(x) - t, 0)


def reference_path(X, Y, solver, eta, T, alpha=0.0, mu=0.0, momentum=0.5, schedule=None):
    """Iterates b^0..b^T; the gradient of step k uses the column Y[:, k-1]."""
    n, p = X.shape
    b_prev = np.zeros(p)
    b = np.zeros(p)
    v = np.zeros(p)
    tau = 1.0
    out = [b.copy()]
    for k in range(1, T + 1):
        ek = eta * (schedule(k) if schedule is not None else 1.0)
        y = Y[:, k - 1]
        if solver in ("gd", "ridge"):
            b_new = (1 - ek * mu) * b + ek * X.T @ (y - X @ b) / n
        elif solver == "heavy_ball":
            b_new = (1 - ek * mu) * b + ek * X.T @ (y - X @ b) / n + momentum * (b - b_prev)
        elif solver == "nesterov":
            b_new = (1 - ek * mu) * v + ek * X.T @ (y - X @ v) / n
        elif solver == "heavy_ball_l1":  # clipped: no momentum from or across zero
            m = np.clip(b - b_prev, -np.abs(b), np.abs(b))
            b_new = _soft(b + ek * X.T @ (y - X @ b) / n + momentum * m, ek * alpha)
        elif solver == "ista":
            b_new = _soft(b + ek * X.T @ (y - X @ b) / n, ek * alpha)
        elif solver in ("fista", "fista_plain"):
            b_new = _soft(v + ek * X.T @ (y - X @ v) / n, ek * alpha)
        if solver == "nesterov":
            v = b_new + (k - 1) / (k + 2) * (b_new - b)
        elif solver in ("fista", "fista_plain"):
            tau_new = (1 + np.sqrt(1 + 4 * tau**2)) / 2
            step = b_new - b
            if solver == "fista":  # clipped: no coordinate leaves zero or crosses it
                step = np.clip(step, -np.abs(b_new), np.abs(b_new))
            v = b_new + (tau - 1) / tau_new * step
            tau = tau_new
        b_prev, b = b, b_new
        out.append(b.copy())
    return np.array(out).T


def reference_memory(X, y, solver, eta, T, delta, **kw):
    """Exact memory matrix A[t, s] = tr(X d b^t / d y^(s)) by differences."""
    n = X.shape[0]
    Y = np.repeat(y[:, None], T, axis=1)
    A = np.zeros((T + 1, T + 1))
    for s in range(T):
        for i in range(n):
            Yp, Ym = Y.copy(), Y.copy()
            Yp[i, s] += delta
            Ym[i, s] -= delta
            dB = (reference_path(X, Yp, solver, eta, T, **kw)
                  - reference_path(X, Ym, solver, eta, T, **kw)) / (2 * delta)
            A[:, s] += X[i] @ dB
    return A


SOLVERS = {
    "gd": (lambda: IterativeRidge(0.0, solver="gd"), {}),
    "gd_schedule": (lambda: IterativeRidge(0.0, solver="gd",
                                           step_schedule=lambda k: 1 / np.sqrt(k)),
                    {"schedule": lambda k: 1 / np.sqrt(k)}),
    "ridge": (lambda: IterativeRidge(3.0, solver="gd"), {}),
    "heavy_ball": (lambda: IterativeRidge(3.0, solver="heavy_ball", momentum=0.5), {}),
    "nesterov": (lambda: IterativeRidge(3.0, solver="nesterov"), {}),
    "ista": (lambda: TrajectoryLasso(0.05, solver="ista"), {}),
    "fista": (lambda: TrajectoryLasso(0.05, solver="fista"), {}),
    "fista_plain": (lambda: TrajectoryLasso(0.05, solver=FISTA(extrapolation="plain")), {}),
    "heavy_ball_l1": (lambda: TrajectoryLasso(0.05, solver=HeavyBall(momentum=0.5)), {}),
}


def _small_problem(seed=0, n=20, p=30):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, p)
    beta = np.zeros(p)
    beta[:5] = 1.0
    return X, X @ beta + 0.5 * rng.randn(n)


@pytest.mark.parametrize("name", list(SOLVERS))
def test_exact_memory_matrix_equals_finite_differences(name):
    make, kw = SOLVERS[name]
    X, y = _small_problem()
    n, T = X.shape[0], 6
    est = make().set_params(max_iter=T, fit_intercept=False, n_probes=None).fit(X, y)
    solver = {"gd_schedule": "gd", "ridge": "gd"}.get(name, name)
    alpha = getattr(est, "alpha", 0.0)
    params = dict(kw)
    if name in ("ista", "fista", "fista_plain", "heavy_ball_l1"):
        params["alpha"] = alpha
    else:
        params["mu"] = alpha / n
    # the reference loop reproduces the fitted path
    ref_path = reference_path(X, np.repeat(y[:, None], T, 1), solver, est.step_size_, T,
                              **params)
    np.testing.assert_allclose(est.coef_path_, ref_path, atol=1e-12)
    linear = name not in ("ista", "fista", "fista_plain", "heavy_ball_l1")
    A_ref = reference_memory(X, y, solver, est.step_size_, T, 1.0 if linear else 1e-6,
                             **params)
    tol = 1e-10 if linear else 1e-6  # linear maps: differences are exact
    np.testing.assert_allclose(est.memory_matrix_, A_ref, atol=tol * np.abs(A_ref).max())
    assert np.abs(np.triu(est.memory_matrix_)).max() == 0  # strictly lower triangular


@pytest.mark.parametrize("name", ["gd", "ridge", "heavy_ball"])
def test_constant_step_memory_is_toeplitz(name):
    X, y = _small_problem(1, n=40, p=25)
    est = SOLVERS[name][0]().set_params(max_iter=12, n_probes=None).fit(X, y)
    A = est.memory_matrix_
    for d in range(1, 12):
        diag = np.diagonal(A, -d)
        np.testing.assert_allclose(diag, diag[0], rtol=1e-12, atol=1e-14)


def test_hutchinson_converges_to_exact_traces():
    """Lanczos/Hutchinson A -> exact A at the Monte Carlo rate 1/sqrt(m)."""
    X, y = _small_problem(2, n=80, p=120)
    kw = dict(max_iter=10, fit_intercept=False)
    exact = IterativeRidge(0.0, n_probes=None, **kw).fit(X, y).memory_matrix_
    lower = np.tril_indices(11, -1)
    errs = {}
    for m in (4, 400):
        e = [np.abs(IterativeRidge(0.0, n_probes=m, random_state=s, **kw).fit(X, y)
                    .memory_matrix_ - exact)[lower].max() for s in range(5)]
        errs[m] = np.mean(e)
    scale = np.abs(exact).max()
    # 100x more probes: the error must shrink by ~10x (allow a factor 3 of slack)
    assert errs[400] < errs[4] / 3
    assert errs[400] < 0.05 * scale


def test_lanczos_quadrature_is_hutchinson_with_the_same_probes():
    """With enough Lanczos steps the quadrature equals (1/m) sum z^T f(K) z."""
    X, y = _small_problem(3, n=30, p=50)
    T, m, seed = 8, 6, 7
    est = IterativeRidge(0.0, max_iter=T, fit_intercept=False, n_probes=m,
                         random_state=seed).fit(X, y)
    n = X.shape[0]
    Z = np.random.RandomState(seed).choice([-1.0, 1.0], size=(n, m))  # n <= p: n-side
    eta = est.step_size_
    K = X @ X.T / n
    # GD: A[t, s] = eta tr(K (I - eta K)^(t-s-1)); Hutchinson with the same Z
    for d in range(1, T + 1):
        M = eta * K @ np.linalg.matrix_power(np.eye(n) - eta * K, d - 1)
        hutch = np.mean(np.einsum("im,ij,jm->m", Z, M, Z))
        np.testing.assert_allclose(est.memory_matrix_[d, 0], hutch, rtol=1e-9)


def test_masked_chains_equal_the_seed_algorithm_with_the_same_probes():
    """ISTA: skacv's restricted chains == the seed notebook's dense R_t loop."""
    rng = np.random.default_rng(2025)
    n, p, s, T, m, lam, sigma = 150, 220, 15, 12, 5, 0.01, 1.5
    beta = 15 * np.hstack([np.ones(s), np.zeros(p - s)]) / np.sqrt(n)
    X = rng.standard_normal((n, p))
    y = X @ beta + sigma * rng.standard_normal(n)
    eta = (1 + np.sqrt(p / n)) ** -2
    est = TrajectoryLasso(lam, solver="ista", max_iter=T - 1, step_size=eta,
                          fit_intercept=False, n_probes=m, random_state=3,
                          risk_options={"chain_dtype": "float64", "probe_scheme": "shared"})
    est.fit(X, y)
    r = np.random.RandomState(3).choice([-1.0, 1.0], size=(n, m)) / np.sqrt(m)
    XTr = X.T @ r
    bt = np.zeros(p)
    F = np.zeros((n, T))
    F[:, 0] = y
    A = np.zeros((T, T))
    for t in range(1, T):
        bt = _soft(bt + eta * X.T @ (y - X @ bt) / n, lam * eta)
        Dt = (bt != 0)[:, None]
        Rt = Dt * XTr if t == 1 else np.hstack(
            [Dt * (Rt - (eta / n) * X.T @ (X @ Rt)), Dt * XTr])  # noqa: F821
        A[t, :t] = np.trace((eta * XTr.T @ Rt / n).reshape((m, t, m)), axis1=0, axis2=2)
        F[:, t] = y - X @ bt
    Mq = np.linalg.solve(np.eye(T) - A / n, F.T).T
    seed_est = np.diag(Mq.T @ Mq / n)
    np.testing.assert_allclose(est.memory_matrix_, A, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(est.risk_path_, seed_est, rtol=1e-10)


# ----------------------------------------------------------------------------
# Monte Carlo truth
# ----------------------------------------------------------------------------


def _gaussian(seed, n, p, rho, mean=0.0, s=20, sigma=1.0, intercept=0.0):
    rng = np.random.RandomState(seed)
    G = rng.randn(n, p)
    if rho:  # AR(1) covariance through its Cholesky factor
        idx = np.arange(p)
        Sigma = rho ** np.abs(idx[:, None] - idx[None, :])
        C = np.linalg.cholesky(Sigma)
        G = G @ C.T
    else:
        Sigma = np.eye(p)
    beta = np.zeros(p)
    beta[rng.choice(p, s, replace=False)] = np.sqrt(5.0 / s)
    X = G + mean
    y = G @ beta + sigma * rng.randn(n) + intercept
    return X, y, beta, Sigma


def _true_risk(est, beta, Sigma, mean, intercept, sigma):
    H = est.coef_path_ - beta[:, None]
    quad = np.einsum("jt,jk,kt->t", H, Sigma, H)
    # E[x] = mean * 1: the intercept error adds its square
    bias = intercept - est.intercept_path_ - mean * est.coef_path_.sum(0)
    return quad + bias**2 + sigma**2


MC_ESTIMATORS = {
    "gd": IterativeRidge(0.0, max_iter=25),
    "gd_schedule": IterativeRidge(0.0, max_iter=25, step_schedule=lambda k: 2 / (1 + k**0.5)),
    "ridge": IterativeRidge(100.0, max_iter=25),
    "heavy_ball": IterativeRidge(100.0, solver="heavy_ball", momentum=0.5, max_iter=25),
    "nesterov": IterativeRidge(100.0, solver="nesterov", max_iter=25),
    "ista": TrajectoryLasso(0.1, solver="ista", max_iter=25),
    "fista": TrajectoryLasso(0.1, solver="fista", max_iter=25),
}


@pytest.mark.parametrize("rho", [0.0, 0.5])
@pytest.mark.parametrize("name", list(MC_ESTIMATORS))
def test_risk_path_matches_monte_carlo_truth(name, rho):
    """est - truth is centred, within the fluctuation measured at this size.

    At n=300, p=450 (Gaussian design, ||beta||^2 = 5, sigma = 1, 10 probes,
    mean 1.5 and intercept 2) the per-seed sd of est - truth measured over 30
    other seeds is <= 0.58 at every t for every solver (the largest part is
    the common-mode term of t = 0, ||y - ybar||^2/n - E), and the measured
    |mean| <= 0.065. With 8 seeds, |mean error| <= 4 * 0.6 / sqrt(8) = 0.85.
    The uncorrected training error misses the truth by 1.47 to 3.8 at its
    worst iterate (asserted below), so the test separates a working estimate
    from a broken one.
    """
    n, p, reps, mean, b0 = 300, 450, 8, 1.5, 2.0
    errs, naive = [], []
    for seed in range(reps):
        X, y, beta, Sigma = _gaussian(seed, n, p, rho, mean=mean, intercept=b0)
        est = MC_ESTIMATORS[name].set_params(random_state=seed).fit(X, y)
        truth = _true_risk(est, beta, Sigma, mean, b0, 1.0)
        errs.append(est.risk_path_ - truth)
        train = np.mean((y[:, None] - est.predict_path(X)) ** 2, axis=0)
        naive.append(train - truth)
    errs, naive = np.array(errs), np.array(naive)
    tol = 4 * 0.6 / np.sqrt(reps)
    assert np.all(np.abs(errs.mean(0)) < tol), errs.mean(0)
    assert np.abs(naive.mean(0)).max() > tol  # the uncorrected error is biased


def test_sample_weight_equals_repeated_rows():
    X, y = _small_problem(4, n=30, p=40)
    w = np.random.RandomState(0).randint(0, 3, size=30).astype(float)
    w[0] = 1
    Xr, yr = np.repeat(X, w.astype(int), axis=0), np.repeat(y, w.astype(int))
    for est in (TrajectoryLasso(0.05, max_iter=15, n_probes=None),
                IterativeRidge(2.0, solver="nesterov", max_iter=15, n_probes=None)):
        a = est.fit(X, y, sample_weight=w).risk_path_
        b = est.fit(Xr, yr).risk_path_
        np.testing.assert_allclose(a, b, rtol=1e-8)


@pytest.mark.parametrize("make", [lambda: TrajectoryLasso(0.05, solver="fista"),
                                  lambda: IterativeRidge(1.0, solver="heavy_ball")])
def test_warm_start_extends_risk_path(make):
    X, y = _small_problem(5, n=50, p=70)
    kw = dict(random_state=1, risk_options={"chain_dtype": "float64"})
    cold = make().set_params(max_iter=30, **kw).fit(X, y)
    warm = make().set_params(max_iter=15, warm_start=True, **kw).fit(X, y)
    warm.set_params(max_iter=30).fit(X, y)
    np.testing.assert_allclose(warm.risk_path_, cold.risk_path_, rtol=1e-12)


@pytest.mark.parametrize("scheme", ["shared"])
@pytest.mark.parametrize("solver", ["ista", "fista"])
@pytest.mark.parametrize("kind", ["dense", "sparse_weighted", "float32"])
def test_warm_start_continues_the_chains(solver, kind, scheme):
    """A warm-started refit continues the saved Jacobian chains: only the new
    steps are propagated, and the result equals the cold fit of the whole
    path (same probes)."""
    import pickle


    X, y = _small_problem(7, n=60, p=90)
    w = None
    if kind == "sparse_weighted":
        X = sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0))
        w = np.random.RandomState(1).uniform(0.2, 3.0, X.shape[0])
    elif kind == "float32":
        X = X.astype(np.float32)
    est = TrajectoryLasso(0.03, solver=solver, random_state=3,
                          risk_options={"probe_scheme": scheme, "chain_dtype": "float64"})
    cold = clone(est).set_params(max_iter=40).fit(X, y, sample_weight=w)

    with record() as paths:
        warm = clone(est).set_params(max_iter=11, warm_start=True).fit(X, y, sample_weight=w)
        for total in (12, 25, 40):
            warm.set_params(max_iter=total).fit(X, y, sample_weight=w)
    engines = paths.details("memory_matrices")
    assert {d["form"] for d in engines} == {"shared"}
    assert [d["steps"] for d in engines] == [11, 1, 13, 15]  # only the new steps
    rtol = 1e-4 if kind == "float32" else 1e-10
    np.testing.assert_allclose(warm.memory_matrix_, cold.memory_matrix_, rtol=rtol,
                               atol=rtol * np.abs(cold.memory_matrix_).max())
    np.testing.assert_allclose(warm.risk_path_, cold.risk_path_, rtol=rtol)
    # a pickled estimator drops the chains; its warm refit recomputes them
    restored = pickle.loads(pickle.dumps(
        clone(est).set_params(max_iter=20, warm_start=True).fit(X, y, sample_weight=w)))
    assert getattr(restored, "_risk_state", None) is None
    with record() as paths:
        restored.set_params(max_iter=40).fit(X, y, sample_weight=w)
    assert [d["steps"] for d in paths.details("memory_matrices")] == [40]
    np.testing.assert_allclose(restored.risk_path_, cold.risk_path_, rtol=rtol)
    # without warm_start nothing is kept
    assert clone(est).set_params(max_iter=5).fit(X, y)._risk_state is None


def test_sparse_and_float32():
    X, y = _small_problem(6, n=60, p=80)
    dense = TrajectoryLasso(0.05, max_iter=20, random_state=0).fit(X, y)
    csr = TrajectoryLasso(0.05, max_iter=20, random_state=0).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(csr.risk_path_, dense.risk_path_, rtol=1e-8)
    f32 = TrajectoryLasso(0.05, max_iter=20, random_state=0).fit(X.astype(np.float32), y)
    np.testing.assert_allclose(f32.risk_path_, dense.risk_path_, rtol=1e-3)


def test_estimate_refuses_exact_traces_above_memory_limit():
    X, y = _small_problem(7, n=60, p=80)
    with config_context(path_memory_limit=10_000 / 2**20):
        with pytest.raises(ValueError, match="GiB"):
            TrajectoryLasso(0.05, max_iter=5, n_probes=None).fit(X, y)


def test_risk_from_memory_matches_direct_solve():
    rng = np.random.RandomState(0)
    n, T1 = 50, 6
    F = rng.randn(n, T1)
    A = np.tril(rng.rand(T1, T1), -1) * 5
    risk, G = risk_from_memory(F, A, n)
    M = np.linalg.solve(np.eye(T1) - A / n, F.T).T
    np.testing.assert_allclose(G, M.T @ M / n, rtol=1e-12)
    np.testing.assert_allclose(risk, np.diag(G))


def test_memory_matrix_public_function_on_design():
    X, y = _small_problem(8, n=25, p=35)
    est = TrajectoryLasso(0.05, solver=FISTA(extrapolation="plain"), max_iter=8,
                          fit_intercept=False, n_probes=None).fit(X, y)
    prob = est._problem(X, y)
    design, it = prob.design, prob.iteration
    A, Av = memory_matrix(design, it, est.coef_path_, n_probes=None)
    np.testing.assert_allclose(A, est.memory_matrix_)
    # sources v^t = x^t + beta_t (x^t - x^{t-1}) row-wise
    k = 5
    np.testing.assert_allclose(Av[k], (1 + it.beta(k)) * A[k] - it.beta(k) * A[k - 1])


def test_auto_chain_precision():
    """Default ``risk_options["chain_dtype"]="auto"``: float32 chains with Hutchinson
    probes (rounding far below the probe noise), X's precision with exact
    traces (bit for bit the float64 result)."""
    X, y = _small_problem(8, n=80, p=120)
    for solver in ("ista", "fista"):
        est = TrajectoryLasso(0.03, solver=solver, max_iter=30, random_state=0)
        auto = clone(est).fit(X, y).risk_path_
        f64 = clone(est).set_params(risk_options={"chain_dtype": "float64"}).fit(X, y).risk_path_
        f64_other_probes = clone(est).set_params(risk_options={"chain_dtype": "float64"},
                                                 random_state=1).fit(X, y).risk_path_
        rel = np.abs(auto / f64 - 1).max()
        assert 0 < rel < 1e-5  # float32 was used, and its error is tiny ...
        assert np.abs(f64_other_probes / f64 - 1).max() > 100 * rel  # ... next to the probes'
        exact = clone(est).set_params(n_probes=None)
        exact64 = clone(exact).set_params(risk_options={"chain_dtype": "float64"}).fit(X, y)
        exact64 = exact64.risk_path_
        np.testing.assert_array_equal(clone(exact).fit(X, y).risk_path_, exact64)
    with pytest.raises(ValueError,
                       match="'chain_dtype' parameter of TrajectoryLasso's risk_options must be"):
        clone(est).set_params(risk_options={"chain_dtype": "float16"}).fit(X, y)


def test_lanczos_resume_equals_a_fresh_run():
    """A resumed Lanczos process (warm-started linear paths) performs only the
    new steps and gives the quadrature of a fresh run to the larger depth."""
    from skacv.linalg._linalg import lanczos_quadrature

    rng = np.random.default_rng(0)
    B = rng.standard_normal((60, 80))
    K = B @ B.T / 80
    W0 = rng.choice([-1.0, 1.0], size=(60, 3))
    calls = []

    def op(Q):
        calls.append(1)
        return K @ Q

    _, k1, state = lanczos_quadrature(op, W0, 8, return_state=True)
    assert k1 == 8 and len(calls) == 8
    calls.clear()
    (nodes, weights), k2 = lanczos_quadrature(op, W0, 20, resume=state)
    assert k2 == 20 and len(calls) == 12
    (fresh_nodes, fresh_weights), _ = lanczos_quadrature(op, W0, 20)
    np.testing.assert_allclose(nodes, fresh_nodes, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights, fresh_weights, rtol=1e-10, atol=1e-12)
    # the quadrature is exact for low degrees: sum w theta^2 = sum_i z_i^T K^2 z_i
    np.testing.assert_allclose(weights @ nodes**2, np.einsum("im,im->", W0, K @ K @ W0),
                               rtol=1e-10)


@pytest.mark.parametrize("first_depth", [None, 15, 16, 17])
def test_resumed_lanczos_stops_where_a_fresh_run_stops(first_depth):
    """With a convergence check, a resumed process (a path grown in stages)
    stops at the step where a fresh run with the new check stops (here 17),
    whether the first run converged for its own check (None: at 9) or ended
    by its depth on a check step (15, 17) or between two (16); it gives the
    fresh run's quadrature, with only the missing steps."""
    from skacv.linalg._linalg import lanczos

    rng = np.random.default_rng(1)
    B = rng.standard_normal((300, 200))
    K = B @ B.T / 200
    W0 = rng.choice([-1.0, 1.0], size=(300, 2))
    top = np.linalg.eigvalsh(K)[-1]
    calls = []

    def op(Q):
        calls.append(1)
        return K @ Q

    def check(T):
        d = np.arange(T + 1)
        return lambda lam, w: (w * lam) @ (1.0 - lam[:, None] / top) ** d[None, :]

    fresh = lanczos(op, W0, 60, check=check(40), rtol=1e-9)
    assert fresh.j == 17
    if first_depth is None:
        first = lanczos(op, W0, 60, check=check(10), rtol=1e-9)
    else:
        first = lanczos(op, W0, first_depth)
    calls.clear()
    resumed = lanczos(op, W0, 60, check=check(40), rtol=1e-9, resume=first)
    assert resumed.j == 17 and len(calls) == 17 - first.j
    np.testing.assert_allclose(resumed.alphas, fresh.alphas, rtol=1e-10)
    np.testing.assert_allclose(resumed.betas, fresh.betas, rtol=1e-10)


def test_warm_start_resumes_lanczos():
    """IterativeRidge with probes: the warm refit resumes the Lanczos process
    (fewer operator products than a cold estimate) and equals the cold path."""

    X, y = _small_problem(9, n=70, p=50)
    est = IterativeRidge(0.0, solver="gd", random_state=0, n_probes=4)
    cold = clone(est).set_params(max_iter=60).fit(X, y)
    with record() as paths:
        warm = clone(est).set_params(max_iter=20, warm_start=True).fit(X, y)
        warm.set_params(max_iter=60).fit(X, y)
    np.testing.assert_allclose(warm.risk_path_, cold.risk_path_, rtol=1e-8)
    # first fit: a fresh process to its full depth 20 // 2 + 2; the refit resumes it
    first, second = ((d["resumed"], d["depth"]) for d in paths.details("lanczos_quadrature"))
    assert first == (False, 12)
    assert second[0] and 0 < second[1] - 12 <= 60 // 2 + 2 - 12


@pytest.mark.parametrize("kind", ["dense", "dense_weighted", "sparse_weighted"])
def test_design_columns_of_the_chains(speed_policy, kind):
    """The restricted design of the chains is ``X~[:, idx]`` in the chains'
    precision, C order, gathered by blocks of rows (here several)."""
    import skacv.estimates.risk._propagate as chains
    from skacv.linalg._design import Design

    rng = np.random.RandomState(0)
    X = rng.randn(23, 17)
    w = None if kind == "dense" else rng.rand(23) + 0.5
    design = Design(sp.csr_matrix(X) if kind.startswith("sparse") else X, w,
                    fit_intercept=kind != "dense")
    idx = rng.permutation(17)[:11]
    speed_policy(gather_bytes=3 * 11 * 8)  # blocks of 3 rows
    Xs = chains.design_columns(design, idx, np.float32)
    assert Xs.dtype == np.float32 and Xs.flags.c_contiguous
    np.testing.assert_array_equal(Xs, np.asarray(design.columns(idx), dtype=np.float32))


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("rows", [None, "permuted"])
def test_gather_in_threads(speed_policy, workers, rows):
    """Large copies are split into ``workers`` ranges of rows, each copied by
    blocks in a thread of its own: the same array as NumPy's indexing."""
    import skacv.linalg._copies as copies_module

    rng = np.random.RandomState(1)
    X = rng.randn(41, 13)
    idx = None if rows is None else rng.permutation(41)[:37]
    cols = rng.permutation(13)[:9]
    policy = speed_policy(gather_bytes=2 * 13 * 8,  # blocks of 2 rows
                          gather_threads_min_bytes=0, gather_threads=workers)
    with record() as paths:
        out = copies_module.gather(X, np.float32, policy, rows=idx, cols=cols)
    ref = (X if idx is None else X[idx])[:, cols].astype(np.float32)
    assert paths.details("gather_threads") == [{"workers": workers}] and out.flags.c_contiguous
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mapped", [False, True])
def test_transposed_copy_by_blocks(speed_policy, dtype, mapped):
    """``transposed``: ``X^T`` C-ordered, by square blocks that do not divide
    the shape (blocks of 4 on 41 x 13), in fresh memory or a mapping."""
    import skacv.linalg._copies as copies_module

    X = np.random.RandomState(2).randn(41, 13).astype(dtype)
    policy = speed_policy(transpose_block=4, transpose_mmap_min_bytes=0 if mapped else 2**62)
    out = copies_module.transposed(X, policy)
    assert out.flags.c_contiguous and out.dtype == dtype and out.shape == (13, 41)
    np.testing.assert_array_equal(out, X.T)


@pytest.mark.parametrize("order", ["C", "F"])
def test_block_trace_of_column_blocks(order):
    """``_block_trace`` reads the transposed blocks as views, in either
    memory order and from a slice of a larger block."""
    from skacv.estimates.risk._chains import _block_trace

    rng = np.random.RandomState(1)
    r, m, k = 13, 3, 4
    W = rng.randn(r, m)
    big = np.asarray(rng.randn(r + 5, m * k + 6), order=order)
    D = big[:r, : m * k]
    expected = [np.sum(W * D[:, s * m:(s + 1) * m]) for s in range(k)]
    np.testing.assert_allclose(_block_trace(W.T, D, m), expected, rtol=1e-12)
    np.testing.assert_array_equal(_block_trace(W[:0].T, D[:0], m), np.zeros(k))


@pytest.mark.parametrize("solver", ["ista", "fista", "heavy_ball"])
def test_chains_do_not_depend_on_the_chunk_size(solver, speed_policy):
    """The chains are advanced by groups of sources: one source per group
    gives the memory matrices of the default groups."""
    X, y = _small_problem(10, n=50, p=70)
    it = HeavyBall(momentum=0.5) if solver == "heavy_ball" else solver
    est = TrajectoryLasso(0.05, solver=it, max_iter=25, random_state=0).fit(X, y)
    speed_policy(chain_chunk_bytes=1)
    small = clone(est).fit(X, y)
    np.testing.assert_allclose(small.memory_matrix_, est.memory_matrix_, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(small.risk_path_, est.risk_path_, rtol=1e-6)


@pytest.mark.parametrize("form", ["design", "covariance"])
def test_small_corrections_run_on_one_blas_thread(speed_policy, form):
    """The T x T corrections of a small path run on one BLAS thread (a
    multithreaded BLAS wakes its threads at every small call: the triangular
    solves of a 151 x 151 memory matrix took 5 ms with two OpenBLAS threads,
    under 1 ms with one), a large one on every thread; the estimate is the
    same. From the residual matrices (a loop on X~) or from their products
    (after the covariance form)."""
    from threadpoolctl import threadpool_limits

    import skacv.utils._parallel as parallel

    if form == "design":
        speed_policy(covariance_max_features=0)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 30))
    y = X[:, 0] + rng.standard_normal(50)
    est = IterativeRidge(alpha=1.0, max_iter=20, random_state=0)
    with threadpool_limits(2, user_api="blas"), record() as paths:
        if parallel.blas_threads() < 2:
            pytest.skip("the BLAS runs one thread only")
        small = est.fit(X, y).risk_path_
        speed_policy(small_blas_flops=0)
        large = clone(est).fit(X, y).risk_path_
    # the readout (from the residuals, or from their products after the
    # covariance form) inside the BLAS limit of one thread, then outside it
    assert [d["one_thread"] for d in paths.details("small_blas")] == [True, False]
    assert paths.count("risk_from_memory") == (2 if form == "design" else 0)
    np.testing.assert_allclose(small, large, rtol=1e-12)
