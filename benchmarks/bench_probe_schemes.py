"""The risk estimate's probe schemes against exact traces: error and cost.

For each design and solver, ``TrajectoryLasso`` is fitted once with exact
traces (``n_probes=None``, the reference) and once without the estimate
(the fit's time); then, for every probe scheme and several probe draws
(``random_state``), with the estimate. Printed per scheme: the fit +
``risk_path_`` time over the fit's (median over the draws; the
``(T + 1) x (T + 1)`` readout included), the root mean square relative
error of ``risk_path_`` against exact traces over the iterates and draws,
its largest value, and the mean regret of the estimate's argmin (true risk
of the chosen iterate over the smallest true risk on the path, minus one;
the exact traces' own regret is printed with the reference).

Designs: ``equi`` (equicorrelated, rho = 0.5, ``n / 10`` non-zero
coefficients; ``benchmarks/bench_vs_cv.py``'s), ``iso`` (the same, rho = 0)
and ``seed`` (the seed notebook's generator, ``p / 15`` ones); ``alpha`` is
``0.1 sqrt(log p / n)`` (``equi``, ``iso``) or 0.01 (``seed``).

    python benchmarks/bench_probe_schemes.py --shapes 300x450 --T 150
    python benchmarks/bench_probe_schemes.py --design iso --shapes 1000x1500 --draws 8
    python benchmarks/bench_probe_schemes.py --design seed --solver ista --shapes 1000x1500 --T 100

Exact traces take a chain for every sample: minutes from n = 1000 on.
"""

import argparse
import time
import warnings

import numpy as np
from bench_risk_path import seed_data
from bench_vs_cv import data, true_risk

from skacv import TrajectoryLasso

SCHEMES = {  # label: (probe_scheme, n_probes)
    "pooled": ("pooled", "auto"),
    "pooled m=10": ("pooled", 10),
    "shared m=10": ("shared", 10),
}


def problem(design, n, p, seed):
    if design == "seed":
        X, y, beta, _ = seed_data(n, p, max(1, p // 15), 1.0, seed)
        return X, y, beta, 0.0, 0.01
    X, y, beta, rho = data(n, p, seed, rho=0.5 if design == "equi" else 0.0)
    return X, y, beta, rho, 0.1 * np.sqrt(np.log(p) / n)


def timed_fit(est, X, y):
    tic = time.perf_counter()
    est.fit(X, y)
    return est, time.perf_counter() - tic


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--design", choices=["equi", "iso", "seed"], default="equi")
    ap.add_argument("--shapes", nargs="+", default=["300x450"])
    ap.add_argument("--T", type=int, default=150)
    ap.add_argument("--solver", default="fista")
    ap.add_argument("--draws", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--schemes", nargs="+", default=list(SCHEMES), choices=list(SCHEMES))
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    for shape in args.shapes:
        n, p = map(int, shape.split("x"))
        X, y, beta, rho, alpha = problem(args.design, n, p, args.seed)
        kw = dict(alpha=alpha, max_iter=args.T, solver=args.solver)
        exact, t_exact = timed_fit(TrajectoryLasso(n_probes=None, **kw), X, y)
        truth = true_risk(exact.coef_path_, exact.intercept_path_, beta, rho)
        reg0 = truth[np.argmin(exact.risk_path_)] / truth.min() - 1
        fits = [timed_fit(TrajectoryLasso(estimate_risk=False, **kw), X, y)[1]
                for _ in range(3)]
        t_fit = min(fits)
        print(f"== {args.design} {n}x{p} {args.solver} T={args.T} alpha={alpha:.4g}: fit "
              f"{t_fit:.3f}s, exact traces {t_exact:.1f}s (their argmin's regret "
              f"{100 * reg0:.2f} %), union support "
              f"{np.count_nonzero(np.any(exact.coef_path_ != 0, axis=1))}")
        print(f"  {'scheme':18s} {'fits':>6s} {'rms %':>7s} {'max %':>7s} {'regret %':>9s}")
        for label in args.schemes:
            scheme, m = SCHEMES[label]
            errs, times, regrets = [], [], []
            for draw in range(args.draws):
                est, t = timed_fit(TrajectoryLasso(risk_options={"probe_scheme": scheme},
                                                   n_probes=m, random_state=draw, **kw), X, y)
                rel = est.risk_path_[1:] / exact.risk_path_[1:] - 1
                errs.append(rel)
                times.append(t)
                regrets.append(truth[np.argmin(est.risk_path_)] / truth.min() - 1)
            errs = np.array(errs)
            print(f"  {label:18s} {np.median(times) / t_fit:6.1f} "
                  f"{100 * np.sqrt(np.mean(errs ** 2)):7.2f} {100 * np.abs(errs).max():7.2f} "
                  f"{100 * np.mean(regrets):9.2f}", flush=True)


if __name__ == "__main__":
    main()
