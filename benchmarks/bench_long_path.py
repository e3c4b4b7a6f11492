"""Long paths: fit + risk_path_ against the fit alone, and the fitted size.

``TrajectoryLasso(max_iter=T)`` (defaults otherwise: FISTA, alpha=1; ``--alpha``) on the
diabetes data with degree-2 features (442 x 65, ``PolynomialFeatures(2,
include_bias=False)``): the fit with ``estimate_risk=False`` and with the
estimate (the default), timed in the same run (best of ``--repeat``), their
ratio (goal: <= 10), and the pickle of the fitted estimator against
``coef_path_.nbytes`` (goal for T = 1000 on 10 features: <= 3). Once the
supports settle the estimate runs in the settled form
(:class:`skacv.estimates.risk._settled.SettledMemory`), linear in T.

    python benchmarks/bench_long_path.py                  # T = 3000, FISTA and ISTA
    python benchmarks/bench_long_path.py --T 1000 3000 10000
    python benchmarks/bench_long_path.py --small          # 60 x 5 synthetic, T = 20000
    python benchmarks/bench_long_path.py --ridge          # IterativeRidge, GD and Nesterov
    python benchmarks/bench_long_path.py --alpha 0.001    # a path that does not settle

``--ridge`` times ``IterativeRidge`` (alpha=1) the same way: linear
iterations take the settled form from the start.
"""

import argparse
import pickle
import time
import warnings

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.preprocessing import PolynomialFeatures

from skacv import IterativeRidge, TrajectoryLasso
from skacv.exceptions import UnreliableEstimateWarning


def diabetes2():
    X, y = load_diabetes(return_X_y=True)
    return PolynomialFeatures(2, include_bias=False).fit_transform(X), y


def small():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 5))
    return X, X @ np.array([1.0, -1.0, 0.5, 0.0, 0.0]) + 0.5 * rng.standard_normal(60)


def best_time(cls, params, X, y, repeat):
    best, est = np.inf, None
    for _ in range(repeat):
        tic = time.perf_counter()
        est = cls(**params).fit(X, y)
        best = min(best, time.perf_counter() - tic)
    return best, est


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--T", type=int, nargs="+", default=[3000])
    parser.add_argument("--solvers", nargs="+", default=None,
                        help="default: fista ista (Lasso), gd nesterov (--ridge)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--small", action="store_true",
                        help="60 x 5 synthetic data instead of diabetes degree 2")
    parser.add_argument("--ridge", action="store_true", help="IterativeRidge instead")
    parser.add_argument("--alpha", type=float, default=1.0,
                        help="the penalty (0.001 on diabetes: a support that changes "
                             "until near the end, the dense route)")
    args = parser.parse_args()
    cls = IterativeRidge if args.ridge else TrajectoryLasso
    solvers = args.solvers or (["gd", "nesterov"] if args.ridge else ["fista", "ista"])
    X, y = small() if args.small else diabetes2()
    print(f"{cls.__name__} on {X.shape[0]} x {X.shape[1]}")
    print(f"{'solver':>8} {'T':>6} {'fit (s)':>9} {'fit+risk (s)':>13} {'ratio':>6} "
          f"{'last change':>11} {'pickle (B)':>11} {'coef_path_ (B)':>14} {'ratio':>6}")
    warnings.simplefilter("ignore", UnreliableEstimateWarning)
    for solver in solvers:
        for T in args.T:
            params = dict(max_iter=T, solver=solver, alpha=args.alpha, random_state=0)
            t_fit, _ = best_time(cls, dict(params, estimate_risk=False), X, y, args.repeat)
            t_risk, est = best_time(cls, params, X, y, args.repeat)
            masks = est.coef_path_ != 0
            changed = np.flatnonzero(np.any(masks[:, 1:] != masks[:, :-1], axis=0))
            last = int(changed[-1]) + 1 if changed.size else 0
            size = len(pickle.dumps(est))
            print(f"{solver:>8} {T:>6} {t_fit:>9.3f} {t_risk:>13.3f} {t_risk / t_fit:>6.2f} "
                  f"{last:>11} {size:>11} {est.coef_path_.nbytes:>14} "
                  f"{size / est.coef_path_.nbytes:>6.2f}")


if __name__ == "__main__":
    main()
