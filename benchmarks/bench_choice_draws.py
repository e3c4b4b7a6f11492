"""The default search's choice over probe draws: regret and time of
``TrajectoryEarlyStoppingCV(TrajectoryLasso(...))`` (column (a) of
``bench_vs_cv.py``) over ``random_state`` 0..draws-1, and the probes its
chain ended with, on bench_vs_cv's equicorrelated rows from 1000 samples,
AR(1) designs with rho = 0.95 and the digits design with a synthetic signal
(alpha = 0.1 sqrt(log p / n), T = 150, ISTA and FISTA). The regret is the
true risk of the chosen iterate over the smallest true risk along the path,
minus one. bench_vs_cv.py reads one probe draw; this shows how much the
choice moves with the probes.

    python benchmarks/bench_choice_draws.py            # 5 draws
    python benchmarks/bench_choice_draws.py 10

``--vs-cv``: bench_vs_cv.py's column (a) itself on its ISTA rows below 1000
samples and at 1000 x 500 (``param_grid={"alpha": [alpha]}``, the path
grown past ``max_iter`` while its estimate still falls), CPU time, the
regret against the best iterate of the path to where it stopped (``T``,
bench_vs_cv.py's) and of a path of 1500 steps (what stopping early missed);
``--start-probes m``: the choice's chain starts with ``m`` probes at every
size (``choice_start_probes = (0, m)``; the default starts the rows below
1000 samples with all 32, or 64)::

    python benchmarks/bench_choice_draws.py 20 --vs-cv
    python benchmarks/bench_choice_draws.py 20 --vs-cv --start-probes 8
"""

import pathlib
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from threadpoolctl import threadpool_limits

from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso
from skacv._statistics import statistics_context

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from bench_vs_cv import data, true_risk  # noqa: E402


def ar1(n, p, seed, rho=0.95):
    """AR(1) features, ``min(n / 10, p / 5)`` non-zero coefficients at random
    places; returns ``X, y, beta, Sigma``."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, p))
    X = np.empty((n, p))
    X[:, 0] = Z[:, 0]
    for j in range(1, p):
        X[:, j] = rho * X[:, j - 1] + np.sqrt(1 - rho**2) * Z[:, j]
    beta = np.zeros(p)
    s = max(1, min(n // 10, p // 5))
    idx = rng.choice(p, s, replace=False)  # drawn before the values
    beta[idx] = rng.standard_normal(s) / np.sqrt(s) * 2
    j = np.arange(p)
    return X, X @ beta + rng.standard_normal(n), beta, rho ** np.abs(j[:, None] - j[None, :])


def sigma_risk(beta, Sigma, noise):
    """The true risk of every iterate of a fit under covariance ``Sigma``."""
    def risk(fit):
        H = fit.coef_path_ - beta[:, None]
        return np.einsum("it,ij,jt->t", H, Sigma, H) + fit.intercept_path_**2 + noise
    return risk


def problems():
    for n, p in [(1000, 500), (1000, 1500), (2000, 1000), (2000, 3000)]:
        X, y, beta, rho = data(n, p, n + p)
        yield (f"equi {n}x{p}", X, y, lambda f, b=beta, r=rho:
               true_risk(f.coef_path_, f.intercept_path_, b, r))
    for n, p in [(1000, 1500), (1500, 500)]:
        X, y, beta, Sigma = ar1(n, p, 7)
        yield f"ar1 {n}x{p}", X, y, sigma_risk(beta, Sigma, 1.0)
    X = load_digits().data
    X = (X - X.mean(0)) / (X.std(0) + 1e-9)
    rng = np.random.default_rng(3)
    beta = np.zeros(64)
    beta[rng.choice(64, 8, replace=False)] = 1.0
    y = X @ beta + 2.0 * rng.standard_normal(len(X))
    yield "digits 1797x64", X, y, sigma_risk(beta, np.cov(X.T, bias=True), 4.0)


def main(draws):
    warnings.simplefilter("ignore")
    for name, X, y, truth_of in problems():
        n, p = X.shape
        lam = 0.1 * np.sqrt(np.log(p) / n)
        for solver in ["fista", "ista"]:
            est = TrajectoryLasso(alpha=lam, max_iter=150, solver=solver)
            truth = truth_of(TrajectoryLasso(alpha=lam, max_iter=150, solver=solver,
                                             estimate_risk=False).fit(X, y))
            regrets, times, used = [], [], []
            for seed in range(draws):
                tic = time.perf_counter()
                search = TrajectoryEarlyStoppingCV(est, random_state=seed).fit(X, y)
                times.append(time.perf_counter() - tic)
                t = search.best_iteration_
                regrets.append(np.nan if t is None else truth[t] / truth.min() - 1)
                used.append(search.estimator_.risk_diagnostics_["n_probes"])
            print(f"{name:16s} {solver:5s} time med {np.median(times):6.3f} regret med "
                  f"{np.median(regrets):6.2%} max {np.max(regrets):6.2%} probes {used}",
                  flush=True)


def vs_cv(draws):
    """bench_vs_cv.py's (a) over probe draws (``--vs-cv``)."""
    warnings.simplefilter("ignore")
    for n, p in [(500, 250), (200, 300), (500, 750), (200, 100), (1000, 500)]:
        X, y, beta, rho = data(n, p, seed=n + p)
        lam = 0.1 * np.sqrt(np.log(p) / n)
        est = TrajectoryLasso(alpha=lam, solver="ista", max_iter=150)
        far = TrajectoryLasso(alpha=lam, solver="ista", max_iter=1500,
                              estimate_risk=False).fit(X, y)
        truth = true_risk(far.coef_path_, far.intercept_path_, beta, rho)
        regrets, longer, times, used, lengths = [], [], [], [], []
        for seed in range(draws):
            tic = time.process_time()
            search = TrajectoryEarlyStoppingCV(est, param_grid={"alpha": [lam]},
                                               random_state=seed).fit(X, y)
            times.append(time.process_time() - tic)
            t, T = search.best_iteration_, search.estimator_.n_iter_
            regrets.append(np.nan if t is None else truth[t] / truth[:T + 1].min() - 1)
            longer.append(np.nan if t is None else truth[t] / truth.min() - 1)
            used.append(search.estimator_.risk_diagnostics_["n_probes"])
            lengths.append(T)
        print(f"ista {n}x{p}: cpu med {1e3 * np.median(times):6.1f} ms regret med "
              f"{np.nanmedian(regrets):6.2%} max {np.nanmax(regrets):6.2%} (1500 steps: med "
              f"{np.nanmedian(longer):6.2%} max {np.nanmax(longer):6.2%}) probes "
              f"{sorted(set(used))} T {sorted(set(lengths))}", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    start = None
    if "--start-probes" in args:
        i = args.index("--start-probes")
        start = int(args[i + 1])
        del args[i:i + 2]
    run = vs_cv if "--vs-cv" in args else main
    args = [a for a in args if a != "--vs-cv"]
    changes = {} if start is None else {"choice_start_probes": (0, start)}
    with threadpool_limits(1), statistics_context(**changes):
        run(int(args[0]) if args else 5)
