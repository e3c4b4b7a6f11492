"""Cost of ``risk_path_`` for mini-batch SGD and the Huber loss, relative to the fit.

Tan & Bellec's (2024) estimate propagates one Jacobian chain per source
(step) with ``n_probes`` Rademacher probes through the batches: about
``n_probes * T / 2`` products with the batch rows per step (SGD) or with
``X`` (full-batch Huber), against one for the fit. For every case the same
run times the fit alone (``estimate_risk=False``), the fit with
``risk_path_`` and the fit with ``loo_path_`` (IACV, the default criterion
of ``TrajectoryEarlyStoppingCV`` for these solvers, on ``loo_options["subsample"]``
samples as ``criterion="auto"`` does above 500 samples), and prints the
extra time of each estimate over the fit time. It also prints the
accuracy of ``risk_path_`` against the truth ``||b^t - beta||^2 +
(b0^t)^2 + ||eps||^2 / n`` (Sigma = I, Student-t noise with 3 degrees of
freedom).

The chains stop advancing the sources whose chains have decayed below
``negligible_state`` (``skacv.estimates.risk._curvature``); ``--every-chain``
also times ``risk_path_`` with every chain stepped to the end (speed policy
``settled_drop_check=None``, the route before) and prints the ratio.

    python benchmarks/bench_sgd_huber.py                       # two sizes
    python benchmarks/bench_sgd_huber.py --sizes 4000x2000 --T 200
    python benchmarks/bench_sgd_huber.py --sizes 2000x200 --T 2000 --every-chain
"""

import argparse
import time

import numpy as np

from skacv import IterativeRidge, TrajectoryHuberRegressor
from skacv._policy import policy_context


def problem(n, p, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    k = max(1, p // 20)
    beta[:k] = np.sqrt(5.0 / k)
    eps = rng.standard_t(3, n)
    return X, X @ beta + eps, beta, eps


def timed(est, X, y, repeat):
    best = np.inf
    for _ in range(repeat):
        tic = time.perf_counter()
        est.fit(X, y)
        best = min(best, time.perf_counter() - tic)
    return est, best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000x500,3000x1500",
                        help="comma-separated n x p (default: %(default)s)")
    parser.add_argument("--T", type=int, default=100, help="iterations (default: %(default)s)")
    parser.add_argument("--probes", type=int, default=10)
    parser.add_argument("--loo-subsample", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=1, help="best of this many runs")
    parser.add_argument("--every-chain", action="store_true",
                        help="also time risk_path_ with every chain stepped to the end")
    args = parser.parse_args(argv)
    T, m = args.T, args.probes
    print(f"T = {T} iterations, {m} probes, t_3 noise; times are the best of {args.repeat}")
    print(f"{'case':24s} {'n':>6s} {'p':>6s} {'fit':>8s} {'+risk':>8s} {'ratio':>7s} "
          f"{'+loo':>8s} {'ratio':>7s}  risk error mean / max")
    for size in args.sizes.split(","):
        n, p = (int(v) for v in size.lower().split("x"))
        X, y, beta, eps = problem(n, p)
        cases = {
            "ridge SGD, batch n/5": IterativeRidge(alpha=0.0, solver="sgd", batch_size=n // 5),
            "ridge SGD, batch n/10": IterativeRidge(alpha=0.0, solver="sgd",
                                                    batch_size=n // 10),
            "huber GD": TrajectoryHuberRegressor(epsilon=1.0, scale=1.0, alpha=0.0),
            "huber SGD, batch n/5": TrajectoryHuberRegressor(epsilon=1.0, scale=1.0, alpha=0.0,
                                                             solver="sgd",
                                                             batch_size=n // 5),
        }
        for name, est in cases.items():
            common = dict(max_iter=T, random_state=0, n_probes=m)
            sub = args.loo_subsample if args.loo_subsample < n else None
            _, t_fit = timed(est.set_params(estimate_risk=False, estimate_loo=False, **common),
                             X, y, args.repeat)
            fitted, t_risk = timed(est.set_params(estimate_risk=True, **common), X, y,
                                   args.repeat)
            risk_path = fitted.risk_path_.copy()
            truth = (((fitted.coef_path_ - beta[:, None]) ** 2).sum(axis=0)
                     + fitted.intercept_path_**2 + np.mean(eps**2))
            rel = np.abs(fitted.risk_path_ / truth - 1.0)
            _, t_loo = timed(est.set_params(estimate_risk=False, estimate_loo=True,
                                            loo_options={"subsample": sub}, **common),
                             X, y, args.repeat)
            line = (f"{name:24s} {n:6d} {p:6d} {t_fit:7.2f}s {t_risk:7.2f}s "
                    f"{(t_risk - t_fit) / t_fit:7.1f} {t_loo:7.2f}s "
                    f"{(t_loo - t_fit) / t_fit:7.1f}  {rel.mean():.3f} / {rel.max():.3f}")
            if args.every_chain:
                with policy_context(settled_drop_check=None):
                    every, t_every = timed(est.set_params(estimate_risk=True, estimate_loo=False,
                                                          **common), X, y, args.repeat)
                diff = np.max(np.abs(every.risk_path_ / risk_path - 1.0))
                line += (f"  | every chain {t_every:7.2f}s, {t_every / t_risk:5.1f}x "
                         f"(risk_path_ within {diff:.0e})")
            print(line)


if __name__ == "__main__":
    main()
