"""The risk estimate against the true risk on correlated Gaussian designs:
the default against the seed's estimator.

Rows ``x ~ N(0, Sigma)`` with ``Sigma`` AR(1) (``Sigma_jk = rho^|j - k|``) or
equicorrelated (``(1 - rho) I + rho 1 1^T``), the seed notebook's signal
(``p / 15`` coefficients ``15 / sqrt(n)``, noise 1.5) and Lasso penalty
(0.01), no intercept. For every data seed and probe seed,
``TrajectoryLasso`` is fitted with each scheme and its ``risk_path_`` compared
with the true risk of every iterate, ``1.5^2 + (b^t - beta)^T Sigma (b^t -
beta)``. Printed per scheme: the root mean square relative error over the
iterates and draws, the largest, the mean signed error, and the median fit
+ estimate time. ``default`` is the estimator's default; ``seed's (m=10)``
is the seed notebook's estimator (``risk_options={"probe_scheme":
"shared"}``, 10 probes: equal to it up to float32 rounding of the chains);
``exact`` (``--exact``: a chain per sample, minutes) removes the probes'
noise, leaving the estimate's own error.

    python benchmarks/bench_risk_truth.py --design ar1 --shape 1500x2000 --rho 0.5
    python benchmarks/bench_risk_truth.py --design equi --shape 1500x2000 --rho 0.5
    python benchmarks/bench_risk_truth.py --design ar1 --shape 600x900 --rho 0.9 \
        --solver fista --T 150 --exact
"""

import argparse
import time
import warnings

import numpy as np
from scipy.linalg import cholesky, toeplitz

from skacv import TrajectoryLasso

SCHEMES = {
    "default": {},
    "seed's (m=10)": {"n_probes": 10, "risk_options": {"probe_scheme": "shared"}},
    "pooled m=10": {"n_probes": 10, "risk_options": {"probe_scheme": "pooled"}},
}


def design(kind, n, p, rho, seed):
    rng = np.random.default_rng(seed)
    if kind == "ar1":
        Sigma = toeplitz(rho ** np.arange(p))
        X = rng.standard_normal((n, p)) @ cholesky(Sigma, lower=True).T
    else:
        Sigma = (1 - rho) * np.eye(p) + rho
        X = (np.sqrt(1 - rho) * rng.standard_normal((n, p))
             + np.sqrt(rho) * rng.standard_normal((n, 1)))
    s = max(1, p // 15)
    beta = 15 * np.r_[np.ones(s), np.zeros(p - s)] / np.sqrt(n)
    y = X @ beta + 1.5 * rng.standard_normal(n)
    return X, y, beta, Sigma


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--design", choices=["ar1", "equi"], default="ar1")
    ap.add_argument("--shape", default="1500x2000")
    ap.add_argument("--rho", type=float, default=0.5)
    ap.add_argument("--solver", default="ista")
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--data-seeds", type=int, default=3)
    ap.add_argument("--probe-seeds", type=int, default=4)
    ap.add_argument("--exact", action="store_true")
    args = ap.parse_args()
    n, p = map(int, args.shape.split("x"))
    schemes = dict(SCHEMES, **({"exact": {"n_probes": None}} if args.exact else {}))
    errors = {name: [] for name in schemes}
    times = {name: [] for name in schemes}
    for data_seed in range(args.data_seeds):
        X, y, beta, Sigma = design(args.design, n, p, args.rho, 100 + data_seed)
        for name, kw in schemes.items():
            for probe_seed in range(1 if name == "exact" else args.probe_seeds):
                est = TrajectoryLasso(alpha=0.01, solver=args.solver, max_iter=args.T,
                                      fit_intercept=False, random_state=probe_seed, **kw)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    tic = time.perf_counter()
                    est.fit(X, y)
                    times[name].append(time.perf_counter() - tic)
                H = est.coef_path_.T - beta
                truth = 1.5**2 + np.einsum("tj,jk,tk->t", H, Sigma, H)
                errors[name].append(est.risk_path_[: truth.size] / truth - 1.0)
    print(f"== {args.design} rho={args.rho} {n}x{p} {args.solver} T={args.T}: "
          f"{args.data_seeds} data seeds x {args.probe_seeds} probe seeds")
    print(f"{'scheme':16s} {'rms %':>7s} {'max %':>7s} {'mean %':>7s} {'time':>8s}")
    for name, errs in errors.items():
        e = np.concatenate(errs)
        print(f"{name:16s} {100 * np.sqrt(np.mean(e**2)):7.2f} {100 * np.abs(e).max():7.2f} "
              f"{100 * e.mean():+7.2f} {np.median(times[name]):7.2f}s")


if __name__ == "__main__":
    main()
