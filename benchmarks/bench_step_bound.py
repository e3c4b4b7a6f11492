"""The step size's bound from a float32 copy of ``X~`` against the float64 Lanczos.

``Design.lipschitz`` on a dense float64 design too large for LAPACK runs
Lanczos on ``X~^T X~``; from the speed policy's ``lipschitz_single_min_bytes``
on, the steps that have not settled after ``lipschitz_single_after`` go on
with a float32 copy, certified in float64 (``skacv.linalg._step_bound``). For
each design (the seed generator of ``bench_vs_lassocv.py``: ``rho = 0``
isotropic, a flat top of the spectrum; ``rho > 0`` equicorrelated, a
separated top eigenvalue) the script times, in the same process and
alternating, the bound with the default policy and with
``lipschitz_single_min_bytes=None`` (the float64 Lanczos alone), and a short
FISTA fit (``TrajectoryLasso(max_iter=24, estimate_risk=False)``, the
bound included) both ways; CPU time, the least of ``--repeat`` pairs::

    python benchmarks/bench_step_bound.py
    python benchmarks/bench_step_bound.py --sizes 2000x3000 10000x3000 --rho 0 0.5
"""

import argparse
import time

import numpy as np
from bench_vs_lassocv import seed_data
from threadpoolctl import threadpool_limits

from skacv import TrajectoryLasso
from skacv._policy import policy_context
from skacv._trace import record
from skacv.linalg._design import Design


def _timed(fn):
    tic = time.process_time()
    out = fn()
    return time.process_time() - tic, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+",
                    default=["1000x3000", "2000x3000", "5000x1000", "10000x3000"])
    ap.add_argument("--rho", type=float, nargs="+", default=[0.0, 0.5])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--blas-threads", type=int, default=1)
    args = ap.parse_args()
    print(f"{'design':<22} {'bound f64':>9} {'f32 copy':>9} {'ratio':>6} {'steps':>5}  "
          f"{'fit f64':>8} {'fit':>8} {'ratio':>6}  bound moved")
    with threadpool_limits(args.blas_threads):
        for size in args.sizes:
            n, p = (int(v) for v in size.split("x"))
            for rho in args.rho:
                X, y, _ = seed_data(n, p, 50, 1.5, 2025, rho)
                best = {"b64": np.inf, "b32": np.inf, "f64": np.inf, "f32": np.inf}
                for _ in range(args.repeat):
                    for key, floor in (("64", None), ("32", "default")):
                        changes = {} if floor == "default" else {"lipschitz_single_min_bytes": None}
                        with policy_context(**changes):
                            with record() as paths:
                                t, lip = _timed(lambda X=X: Design(X, None, True).lipschitz())
                            best["b" + key] = min(best["b" + key], t)
                            if key == "32":
                                lip32, events = lip, paths.details("lipschitz_single")
                            else:
                                lip64 = lip
                            est = TrajectoryLasso(alpha=0.05, max_iter=24, estimate_risk=False)
                            t, _ = _timed(lambda est=est, X=X, y=y: est.fit(X, y))
                            best["f" + key] = min(best["f" + key], t)
                steps = events[0]["steps"] if events else "-"
                single = events[0]["single"] if events else False
                print(f"{size + f' rho={rho:g}':<22} {best['b64']:9.3f} {best['b32']:9.3f} "
                      f"{best['b32'] / best['b64']:6.2f} {steps!s:>5}  {best['f64']:8.3f} "
                      f"{best['f32']:8.3f} {best['f32'] / best['f64']:6.2f}  "
                      f"{lip32 / lip64 - 1:+.1e}{'' if single else ' (settled in float64)'}",
                      flush=True)


if __name__ == "__main__":
    main()
