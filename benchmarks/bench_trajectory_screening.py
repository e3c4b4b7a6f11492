"""The fit loop on a working set of features against the loop over every feature.

``run_trajectory(screen=True)`` (``skacv.iterations._screening``) steps an
l1-penalised fit on the features that move or may leave the penalty's zero
band, the others certified zero before every step. This script fits the same
estimator with the speed policy's ``trajectory_screening`` on and off, in
the same process, alternating (``--repeats`` times each; medians), and prints
both times, their ratio, the largest difference of the two paths (relative to
the path's largest coefficient) and the working set's events. One BLAS thread
by default (``--blas-threads``). Fits:

``nci60``
    ``TrajectoryLasso(alpha=0.0205, solver="fista", max_iter=2000,
    estimate_risk=False)`` on ISLP's NCI60 (one gene from the 6829 others,
    split 0's 32 training rows, standardised): the deferred full fit of the
    natural call's K-fold choice on that split (``bench_real_data.py``).
    Needs ``ISLP`` (skipped when absent).
``ar1``
    AR(1) features (rho 0.95), n = 100, p = 5000, 10 true coefficients:
    ``TrajectoryLasso(alpha=0.02, max_iter=1000)`` with its risk estimate.
``ar1-enet``
    The same data, ``TrajectoryElasticNet(alpha=0.04, l1_ratio=0.5,
    max_iter=1000)`` with its risk estimate.
``equi``
    The seed generator's equicorrelated design (rho 0.5, n = 2000, p =
    3000, s = 200, seed 2025; ``bench_vs_lassocv.py``):
    ``TrajectoryLasso(alpha=0.066, max_iter=800)`` with its risk estimate, a
    candidate of the natural call's choice there.

    python benchmarks/bench_trajectory_screening.py
    python benchmarks/bench_trajectory_screening.py --fits nci60,ar1 --repeats 5
"""

import argparse
import statistics
import sys
import time
import warnings

import numpy as np
from scipy.signal import lfilter
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from skacv import TrajectoryElasticNet, TrajectoryLasso
from skacv._policy import policy_context
from skacv._trace import record


def ar1(n, p, rho, seed=0):
    """AR(1) features along the columns (``x_j = rho x_{j-1} + sqrt(1 -
    rho^2) z_j``, as a linear filter), 10 coefficients +-1, noise 1."""
    rng = np.random.default_rng(seed)
    X = lfilter([np.sqrt(1 - rho**2)], [1.0, -rho], rng.standard_normal((n, p)), axis=1)
    beta = np.zeros(p)
    beta[rng.choice(p, 10, replace=False)] = rng.choice([-1.0, 1.0], 10)
    return X, X @ beta + rng.standard_normal(n)


def nci60():
    try:
        from ISLP import load_data
    except ImportError:
        return None
    from sklearn.model_selection import train_test_split

    expr = load_data("NCI60")["data"]
    expr = np.asarray(expr, dtype=np.float64)
    target = int(np.argmax(expr.var(axis=0)))
    X, y = np.delete(expr, target, axis=1), expr[:, target]
    X_train, _, y_train, _ = train_test_split(X, y, test_size=0.5, random_state=0)
    return StandardScaler().fit_transform(X_train), y_train


def equi():
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from bench_vs_lassocv import seed_data

    X, y, _ = seed_data(2000, 3000, 200, 1.5, 2025, rho=0.5)
    return X, y


FITS = {
    "nci60": (nci60, lambda: TrajectoryLasso(alpha=0.0205, solver="fista", max_iter=2000,
                                              estimate_risk=False)),
    "ar1": (lambda: ar1(100, 5000, 0.95), lambda: TrajectoryLasso(alpha=0.02, max_iter=1000,
                                                                   random_state=0)),
    "ar1-enet": (lambda: ar1(100, 5000, 0.95),
                 lambda: TrajectoryElasticNet(alpha=0.04, l1_ratio=0.5, max_iter=1000,
                                              random_state=0)),
    "equi": (equi, lambda: TrajectoryLasso(alpha=0.066, max_iter=800, random_state=0)),
}


def run(name, repeats):
    data, make = FITS[name]
    data = data()
    if data is None:
        print(f"{name}: skipped (pip install ISLP)")
        return
    X, y = data
    times = {True: [], False: []}
    paths = {}
    for _ in range(repeats):
        for on in (False, True):
            with policy_context(trajectory_screening=on), record() as events:
                tic = time.perf_counter()
                est = make().fit(X, y)
                times[on].append(time.perf_counter() - tic)
            paths[on] = est.coef_path_
            if on:
                counts = {k.replace("trajectory_screening_", ""): v
                          for k, v in events.counts().items()
                          if k.startswith("trajectory_screening_")}
    scale = float(np.max(np.abs(paths[False])))
    diff = float(np.max(np.abs(paths[True] - paths[False]))) / scale
    off, on = statistics.median(times[False]), statistics.median(times[True])
    print(f"{name:<9} {X.shape[0]:>5} x {X.shape[1]:<5} steps {paths[True].shape[1] - 1:>5}  "
          f"all features {off:7.3f} s  working set {on:7.3f} s  ratio {on / off:5.2f}  "
          f"path difference {diff:.1e}  {counts}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fits", default=",".join(FITS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--blas-threads", type=int, default=1)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    with threadpool_limits(args.blas_threads):
        for name in args.fits.split(","):
            run(name, args.repeats)


if __name__ == "__main__":
    main()
