"""The search's criteria on wide synthetic designs (p = 4 n) against ``LassoCV``.

For each size ``n`` (``p = 4 n``), design (isotropic, or AR(1) with rho 0.9)
and truth (10 nonzero coefficients, or dense N(0, 1/p)), noise 1 and
``--seeds`` draws, it fits ``TrajectoryEarlyStoppingCV(TrajectoryLasso(),
criterion=c, random_state=0)`` for ``c`` in risk, loo, kfold and auto, and
``LassoCV(cv=5)``, and prints each criterion's excess test error over
``LassoCV``'s (2 n test rows' noiseless targets; median and geometric
mean) and the median CPU times (one BLAS thread) of the search and of
``LassoCV``::

    python benchmarks/bench_criteria_wide.py --sizes 100 200 400 --seeds 6
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.linear_model import LassoCV
from threadpoolctl import threadpool_limits

from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso

CRITERIA = ("risk", "loo", "kfold", "auto")


def design(kind, truth, n, p, rng):
    """Training rows, test rows, training targets, noiseless test targets."""
    Z = rng.standard_normal((2 * n, p))
    if kind == "iso":
        X = Z
    else:  # AR(1), rho 0.9, unit variances
        X = np.empty_like(Z)
        X[:, 0] = Z[:, 0]
        for j in range(1, p):
            X[:, j] = 0.9 * X[:, j - 1] + np.sqrt(1 - 0.81) * Z[:, j]
    if truth == "dense":
        beta = rng.standard_normal(p) / np.sqrt(p)
    else:
        values = rng.standard_normal(10) / np.sqrt(10)
        beta = np.zeros(p)
        beta[rng.choice(p, 10, replace=False)] = values
    y = X @ beta + rng.standard_normal(2 * n)
    return X[:n], X[n:], y[:n], X[n:] @ beta


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 200])
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--criteria", nargs="+", default=list(CRITERIA), choices=CRITERIA)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    with threadpool_limits(1):
        for n in args.sizes:
            p = 4 * n
            for kind in ("iso", "ar09"):
                for truth in ("sparse", "dense"):
                    ratios = {c: [] for c in args.criteria}
                    cpu = {c: [] for c in [*args.criteria, "LassoCV"]}
                    for seed in range(args.seeds):
                        X, X_test, y, signal = design(kind, truth, n, p,
                                                      np.random.default_rng(seed))
                        start = time.process_time()
                        ref = LassoCV(cv=5).fit(X, y)
                        cpu["LassoCV"].append(time.process_time() - start)
                        ref_error = np.mean((ref.predict(X_test) - signal) ** 2)
                        for c in args.criteria:
                            start = time.process_time()
                            search = TrajectoryEarlyStoppingCV(
                                TrajectoryLasso(), criterion=c, random_state=0).fit(X, y)
                            cpu[c].append(time.process_time() - start)
                            error = np.mean((search.predict(X_test) - signal) ** 2)
                            ratios[c].append(error / ref_error)
                    line = f"{n}x{p} {kind} {truth}"
                    for c in args.criteria:
                        r = np.asarray(ratios[c])
                        line += (f" | {c}: med {np.median(r):.3f} geo "
                                 f"{np.exp(np.mean(np.log(r))):.3f} cpu "
                                 f"{np.median(cpu[c]):.2f}s")
                    line += f" | LassoCV cpu {np.median(cpu['LassoCV']):.2f}s"
                    print(line, flush=True)


if __name__ == "__main__":
    main()
