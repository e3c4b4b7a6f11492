"""The fit loop in the covariance form against the products with ``X``.

Full-batch least squares (``TrajectoryLasso``, ``IterativeRidge``) with
fewer features than samples runs its loop on ``C = X~^T X~`` (one p x p
product a step) when that costs less than two products with the n x p
``X~`` a step plus the Gram matrix (``skacv.linalg._covariance.covariance_form_pays``).
This benchmark times, in the same run, each fit with the form the rule
picks and with the products with ``X`` forced
(``policy_context(covariance_max_features=0)``), prints the ratio and the largest
difference of the two paths (relative to the largest coefficient).
Equicorrelated Gaussian designs (rho = 0.5), ``s = p / 10`` nonzeros.

    python benchmarks/bench_covariance.py
    python benchmarks/bench_covariance.py --shapes 2000x1000 --T 150 --repeat 3
"""

import argparse
import time

import numpy as np

from skacv import IterativeRidge, TrajectoryLasso
from skacv._policy import policy_context

ESTIMATORS = {
    "lasso fista": lambda T: TrajectoryLasso(alpha=0.01, max_iter=T, estimate_risk=False),
    "lasso ista": lambda T: TrajectoryLasso(alpha=0.01, solver="ista", max_iter=T,
                                            estimate_risk=False),
    "ridge gd": lambda T: IterativeRidge(alpha=1e-3, max_iter=T, estimate_risk=False),
    "ridge gd + risk": lambda T: IterativeRidge(alpha=1e-3, max_iter=T, estimate_risk=True),
}


def data(n, p, seed=0, rho=0.5):
    rng = np.random.default_rng(seed)
    X = np.sqrt(1 - rho) * rng.standard_normal((n, p)) + np.sqrt(rho) * rng.standard_normal((n, 1))
    beta = np.zeros(p)
    s = max(1, p // 10)
    beta[:s] = rng.standard_normal(s) / np.sqrt(s) * 2.0
    return X, X @ beta + rng.standard_normal(n)


def timed(make, X, y, repeat):
    best, est = np.inf, None
    for _ in range(repeat):
        est = make()
        tic = time.perf_counter()
        est.fit(X, y)
        best = min(best, time.perf_counter() - tic)
    return best, est


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+",
                    default=["20000x50", "20000x200", "5000x500", "2000x1000", "10000x1000",
                             "10000x2000"])
    ap.add_argument("--T", type=int, default=150)
    ap.add_argument("--repeat", type=int, default=2, help="best of this many fits")
    ap.add_argument("--estimators", nargs="+", default=list(ESTIMATORS))
    args = ap.parse_args()
    print(f"{'shape':12s} {'estimator':16s} {'form':10s} {'auto s':>8s} {'X s':>8s} "
          f"{'X/auto':>7s} {'path diff':>10s}")
    for shape in args.shapes:
        n, p = (int(v) for v in shape.lower().split("x"))
        X, y = data(n, p)
        for name in args.estimators:
            make = lambda name=name: ESTIMATORS[name](args.T)  # noqa: E731
            t_auto, auto = timed(make, X, y, args.repeat)
            with policy_context(covariance_max_features=0):
                t_x, plain = timed(make, X, y, args.repeat)
            diff = (np.abs(auto.coef_path_ - plain.coef_path_).max()
                    / max(np.abs(plain.coef_path_).max(), 1e-300))
            print(f"{shape:12s} {name:16s} {auto._solver_state.form:10s} {t_auto:8.3f} "
                  f"{t_x:8.3f} {t_x / t_auto:7.2f} {diff:10.1e}", flush=True)


if __name__ == "__main__":
    main()
