"""Non-negative Lasso: the search's literal default against ``LassoCV(positive=True)``.

On isotropic Gaussian designs with a sparse non-negative truth (and, with
``--mixed``, a truth of both signs, where the constraint biases every
fit), compares ``TrajectoryEarlyStoppingCV(TrajectoryLasso(positive=True))``
(no converged alpha path: it walks ``auto_alpha_grid``) with
``LassoCV(positive=True, cv=5)``: wall time and true risk ``||b - b*||^2 +
sigma^2`` (identity covariance), per seed, then the median ratios.

    python benchmarks/bench_positive.py --blas-threads 1
"""

import argparse
import os
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--p", type=int, default=1000)
    parser.add_argument("--s", type=int, default=20)
    parser.add_argument("--sigma", type=float, default=1.0)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--mixed", action="store_true", help="a truth of both signs")
    parser.add_argument("--blas-threads", type=int, default=None)
    args = parser.parse_args()
    if args.blas_threads:
        os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
    import numpy as np
    from sklearn.linear_model import LassoCV

    from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso

    time_ratios, risk_ratios = [], []
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((args.n, args.p))
        beta = np.zeros(args.p)
        beta[:args.s] = rng.uniform(0.5, 2.0, args.s)
        if args.mixed:
            beta[: args.s // 2] *= -1
        y = X @ beta + args.sigma * rng.standard_normal(args.n)
        rows = []
        for name, make in (
            ("LassoCV(positive=True)", lambda: LassoCV(positive=True, cv=5)),
            ("TrajectoryEarlyStoppingCV", lambda: TrajectoryEarlyStoppingCV(
                TrajectoryLasso(positive=True, random_state=0), random_state=0)),
        ):
            tic = time.perf_counter()
            est = make().fit(X, y)
            elapsed = time.perf_counter() - tic
            coef = est.coef_ if hasattr(est, "alpha_") else est.best_estimator_.coef_
            risk = float(np.sum((coef - beta) ** 2)) + args.sigma ** 2
            alpha = est.alpha_ if hasattr(est, "alpha_") else est.best_params_["alpha"]
            extra = "" if hasattr(est, "alpha_") else f"  iteration {est.best_iteration_}"
            print(f"seed {seed}  {name:27s} {elapsed:7.2f} s  risk {risk:8.4f}  "
                  f"alpha {alpha:.4g}  support {np.count_nonzero(coef)}{extra}")
            rows.append((elapsed, risk))
        time_ratios.append(rows[1][0] / rows[0][0])
        risk_ratios.append(rows[1][1] / rows[0][1])
    print(f"skacv / LassoCV(positive=True): time ratio median {np.median(time_ratios):.3f} "
          f"({min(time_ratios):.3f}-{max(time_ratios):.3f}), true-risk ratio median "
          f"{np.median(risk_ratios):.4f} ({min(risk_ratios):.4f}-{max(risk_ratios):.4f})")


if __name__ == "__main__":
    main()
