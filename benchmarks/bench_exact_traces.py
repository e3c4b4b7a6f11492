"""Exact traces on long paths: the settled form against the canonical chains.

``n_probes=None`` (and ``"auto"`` at 40 samples or fewer) asks the
memory-matrix estimate for exact traces. The canonical chains compute them
with ``n`` columns for every source, ``O(T^2)`` in the path's length; a path
whose support settles after a step ``k0`` takes the settled form instead
(``skacv.estimates.risk._settled``), its head on the exact probes of the
range of ``X~`` and its tail in the support's eigenbasis, ``O(T)``. For each
design (Gaussian rows with a shared factor, correlated columns; a Lasso by
FISTA or ISTA) the script times, in the same process and alternating, the fit
with its ``risk_path_`` by the default policy and with ``settled_min_tail``
out of reach (the canonical chains alone), and prints the ratio and the
largest relative gap of the two ``risk_path_``; CPU time, the least of
``--repeat`` pairs::

    python benchmarks/bench_exact_traces.py
"""

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from skacv import TrajectoryLasso
from skacv._policy import policy_context
from skacv._trace import record

#: (n, p, max_iter, alpha, solver, n_probes)
CASES = [
    (33, 23, 1200, 0.05, "fista", "auto"),
    (40, 80, 1000, 0.3, "fista", "auto"),
    (300, 100, 1000, 0.05, "fista", None),
    (300, 100, 1000, 0.05, "ista", None),
    (1000, 200, 1500, 0.05, "fista", None),
]


def design(n, p, seed=0):
    """Rows with a shared factor, the first two columns nearly collinear, a
    5-sparse signal."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + 0.7 * rng.standard_normal((n, 1))
    X[:, 1] = X[:, 0] + 0.1 * X[:, 1]
    beta = np.zeros(p)
    beta[:5] = rng.standard_normal(5)
    return X, X @ beta + rng.standard_normal(n)


def fit(X, y, kw, canonical):
    """``(seconds, estimator, form, settled step)`` of one fit."""
    changes = {"settled_min_tail": 10**9} if canonical else {}
    with policy_context(**changes), record() as paths:
        tic = time.process_time()
        est = TrajectoryLasso(**kw).fit(X, y)
        elapsed = time.process_time() - tic
    form = paths.details("risk_plan")[-1]["form"]
    steps = [d["settled_step"] for d in paths.details("settled_risk")]
    return elapsed, est, form, steps[-1] if steps else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--blas-threads", type=int, default=1)
    args = ap.parse_args()
    print(f"{'n x p, T, solver, n_probes':<32} {'canonical':>9} {'settled':>8} {'ratio':>6} "
          f"{'k0':>5}  {'max rel gap':>11}")
    with threadpool_limits(args.blas_threads):
        for n, p, T, alpha, solver, n_probes in CASES:
            X, y = design(n, p)
            kw = dict(alpha=alpha, solver=solver, max_iter=T, n_probes=n_probes)
            best = {True: np.inf, False: np.inf}
            out = {}
            for _ in range(args.repeat):
                for canonical in (True, False):
                    t, est, form, k0 = fit(X, y, kw, canonical)
                    best[canonical] = min(best[canonical], t)
                    out[canonical] = (est.risk_path_, form, k0)
            gap = np.max(np.abs(out[False][0] / out[True][0] - 1))
            label = f"{n}x{p}, {T}, {solver}, {n_probes}"
            print(f"{label:<32} {best[True]:>8.2f}s {best[False]:>7.2f}s "
                  f"{best[False] / best[True]:>6.2f} {str(out[False][2]):>5}  {gap:>11.1e}"
                  + ("" if out[False][1] == "settled" else f"  ({out[False][1]}: not settled)"))


if __name__ == "__main__":
    main()
