"""K-fold CV where ``criterion="auto"`` falls back to it, against ``LassoCV``: time and memory.

On an isotropic ``p >> n`` design with ``n`` in the hundreds to thousands
(``y`` = the sum of the first 20 features plus noise of sd 3; at the
default 1000 x 8000, seed 0, the estimate's ``risk_reliable_`` flags
iterates just after its choice, so the literal default
``TrajectoryEarlyStoppingCV(TrajectoryLasso())`` redoes its search with
K-fold CV; at other seeds it may keep the estimate, as its ``criterion``
column says) this times, in the same run and one BLAS
thread, ``LassoCV(cv=5)``, the literal default and
``TrajectoryEarlyStoppingCV(TrajectoryLasso(), criterion="kfold")``, and
prints each one's CPU time and its ratio to ``LassoCV``'s, its test MSE on 5000 fresh
rows, the criterion it used and, with ``--memory``, its peak memory
(``tracemalloc``: NumPy's arrays, not BLAS's buffers) as a multiple of
``X``'s size (a separate, untimed fit)::

    python benchmarks/bench_kfold_paths.py --n 1000 --p 8000 --memory

What it exercises: K-fold CV of the converged fits (each fold's Lasso
path, solved to ``tol`` times its held-out error, then the full data's
path to ``tol`` times each alpha's K-fold CV error) and along the path,
and each fold's data dropped after its path.
"""

import argparse
import time
import tracemalloc
import warnings

import numpy as np
from sklearn.linear_model import LassoCV
from threadpoolctl import threadpool_limits

from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso


def data(n, p, n_test=5000, seed=0):
    """Isotropic Gaussian features, 20 unit coefficients, noise of sd 3."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X[:, :20].sum(1) + 3.0 * rng.standard_normal(n)
    X_test = rng.standard_normal((n_test, p))
    y_test = X_test[:, :20].sum(1) + 3.0 * rng.standard_normal(n_test)
    return X, y, X_test, y_test


METHODS = {
    "LassoCV(cv=5)": lambda: LassoCV(cv=5),
    "literal default": lambda: TrajectoryEarlyStoppingCV(TrajectoryLasso(), random_state=0),
    "criterion='kfold'": lambda: TrajectoryEarlyStoppingCV(TrajectoryLasso(), criterion="kfold",
                                                           random_state=0),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--p", type=int, default=8000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--memory", action="store_true",
                        help="also each method's peak memory (a second, untimed fit)")
    args = parser.parse_args()
    X, y, X_test, y_test = data(args.n, args.p, seed=args.seed)
    print(f"isotropic {args.n} x {args.p}, X {X.nbytes / 2**20:.0f} MiB, one BLAS thread")
    print(f"{'method':<20} {'CPU (s)':>9} {'ratio':>7} {'test MSE':>9}  criterion  "
          f"{'peak / X' if args.memory else ''}")
    base = None
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, make in METHODS.items():
            tic = time.process_time()
            model = make().fit(X, y)
            seconds = time.process_time() - tic
            base = seconds if base is None else base
            mse = float(np.mean((model.predict(X_test) - y_test) ** 2))
            peak = ""
            if args.memory:
                tracemalloc.start()
                make().fit(X, y)
                peak = f"{tracemalloc.get_traced_memory()[1] / X.nbytes:.2f}x"
                tracemalloc.stop()
            print(f"{name:<20} {seconds:9.1f} {seconds / base:6.2f}x {mse:9.4f}  "
                  f"{getattr(model, 'criterion_', 'kfold'):<9}  {peak}", flush=True)


if __name__ == "__main__":
    main()
