"""The Huber ``risk_path_`` on long paths: its cost against the fit, against
its chain steps alone, and against K-fold CV along the path.

Tan & Bellec's (2024) estimate for a robust loss propagates one Jacobian
chain per step, ``(4 n p + n) m T^2 / 2`` flops over ``T`` steps. While
gradient descent's inliers and its prox mask do not change, every chain
advances by one fixed linear map, and the rows of such a stretch come from
that map's eigendecomposition (``skacv.estimates.risk._curvature``). For
each case the same run times:

* the fit alone (``estimate_risk=False``);
* the fit with ``risk_path_`` (the default route: chain steps where an
  inlier or the support changes, the stretches between in one map's
  eigenbasis; ``runs``: their number, ``last``: where the last one starts);
* the fit with ``risk_path_`` on chain steps alone (the route before the
  stretches; where it would exceed ``--dense-budget`` seconds, its time is
  extrapolated from 100 steps, quadratically, and marked ``~``);
* 5-fold CV along the path: five fits of the same path on the folds, every
  iterate scored on its held-out fold (what a user runs instead), and its
  choice refitted on all rows is not counted.

It prints the ratios and the test MSE (5000 fresh rows) at the iterate each
choice picks, over the best iterate's (the oracle). Designs: isotropic and
AR(1) (rho 0.9) Gaussian features, Student-t (3) noise plus 10 % gross
outliers in the training responses.

``--real`` times instead the defaults, ``TrajectoryHuberRegressor()`` (100
steps) with and without its ``risk_path_``, beside ``HuberRegressor()``, on
scikit-learn's diabetes and ISLP's Hitters, Boston, College and Credit
(standardised; ``bench_real_data.py``'s designs, the ``bench`` extra), CPU
time, the least of ``--repeat`` runs.

    python benchmarks/bench_huber_risk.py
    python benchmarks/bench_huber_risk.py --sizes 2000x200 --T 1000
    python benchmarks/bench_huber_risk.py --real
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.model_selection import KFold
from threadpoolctl import threadpool_limits

from skacv import TrajectoryHuberRegressor
from skacv._policy import policy_context
from skacv._trace import record


def problem(n, p, design, seed=0, n_test=5000):
    rng = np.random.default_rng(seed)
    m = n + n_test
    if design == "ar1":
        rho = 0.9
        X = np.empty((m, p))
        X[:, 0] = rng.standard_normal(m)
        for j in range(1, p):
            X[:, j] = rho * X[:, j - 1] + np.sqrt(1 - rho**2) * rng.standard_normal(m)
    else:
        X = rng.standard_normal((m, p))
    beta = np.zeros(p)
    k = max(1, p // 10)
    beta[rng.choice(p, k, replace=False)] = rng.choice([-1.0, 1.0], k) * np.sqrt(5.0 / k)
    y = X @ beta + 1.0 + rng.standard_t(3, m)
    bad = rng.choice(n, n // 10, replace=False)
    y[bad] += rng.choice([-1.0, 1.0], bad.size) * rng.uniform(10, 30, bad.size)
    return X[:n], y[:n], X[n:], y[n:]


def timed(fn):
    tic = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - tic


def kfold_path(est, X, y, K=5, seed=0):
    """The weighted mean held-out squared error of every iterate over K folds."""
    err = 0.0
    for train, test in KFold(K, shuffle=True, random_state=seed).split(X):
        fold = clone(est).set_params(estimate_risk=False).fit(X[train], y[train])
        err = err + ((y[test, None] - fold.predict_path(X[test])) ** 2).sum(axis=0)
    return err / X.shape[0]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500x50,2000x200",
                        help="comma-separated n x p (default: %(default)s)")
    parser.add_argument("--T", default="300,1000", help="path lengths (default: %(default)s)")
    parser.add_argument("--designs", default="iso,ar1")
    parser.add_argument("--dense-budget", type=float, default=60.0,
                        help="longest chains-only run, seconds (else extrapolated)")
    parser.add_argument("--blas-threads", type=int, default=1)
    parser.add_argument("--real", action="store_true",
                        help="the defaults on five real designs instead")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if args.real:
        with threadpool_limits(args.blas_threads):
            real_defaults(args.repeat)
        return
    print("Huber GD (epsilon 1.35, alpha 1e-4, scale 'auto'), t_3 noise + 10 % outliers; "
          f"one BLAS thread: {args.blas_threads == 1}")
    print(f"{'design':7s} {'n':>5s} {'p':>4s} {'T':>5s} {'fit':>7s} {'+risk':>7s} "
          f"{'risk/fit':>8s} {'chains':>9s} {'chains/risk':>11s} {'5-fold':>7s} "
          f"{'risk/5fold':>10s} {'runs':>4s} {'last':>5s}  test MSE / oracle: risk, 5-fold")
    with threadpool_limits(args.blas_threads):
        for size in args.sizes.split(","):
            n, p = (int(v) for v in size.lower().split("x"))
            for design in args.designs.split(","):
                X, y, Xt, yt = problem(n, p, design)
                for T in (int(t) for t in args.T.split(",")):
                    _run(args, design, X, y, Xt, yt, T)


def real_defaults(repeat):
    """``TrajectoryHuberRegressor()`` with and without ``risk_path_`` and
    ``HuberRegressor()`` on five real designs: CPU time, the least of
    ``repeat`` runs, and the estimate's cost over the fit."""
    from bench_real_data import DESIGNS
    from sklearn.linear_model import HuberRegressor
    from sklearn.preprocessing import StandardScaler

    def least(make, X, y):
        times = []
        for _ in range(repeat):
            with warnings.catch_warnings():  # HuberRegressor's lbfgs at its max_iter
                warnings.simplefilter("ignore")
                tic = time.process_time()
                make().fit(X, y)
                times.append(time.process_time() - tic)
        return min(times)

    print(f"{'design':10s} {'n':>5s} {'p':>4s} {'fit':>7s} {'+risk':>7s} {'risk/fit':>8s} "
          f"{'HuberRegressor':>14s}")
    for name in ("diabetes", "hitters", "boston", "college", "credit"):
        X, y = DESIGNS[name]()[:2]
        X = StandardScaler().fit_transform(np.asarray(X, dtype=np.float64))
        y = np.asarray(y, dtype=np.float64)
        fit = least(lambda: TrajectoryHuberRegressor(estimate_risk=False, random_state=0), X, y)
        risk = least(lambda: TrajectoryHuberRegressor(random_state=0), X, y)
        peer = least(HuberRegressor, X, y)
        print(f"{name:10s} {X.shape[0]:5d} {X.shape[1]:4d} {fit:6.3f}s {risk:6.3f}s "
              f"{risk / fit:8.1f} {peer:13.3f}s")


def _run(args, design, X, y, Xt, yt, T):
    n, p = X.shape
    base = TrajectoryHuberRegressor(max_iter=T, random_state=0)
    _, t_fit = timed(lambda: clone(base).set_params(estimate_risk=False).fit(X, y))
    with record() as paths:
        est, t_risk = timed(lambda: clone(base).fit(X, y))
    stretches = paths.details("curvature_stretch")
    # the chains alone: timed on a prefix whose cost fits the budget, quadratic beyond
    est_short = min(T, 100)
    with policy_context(curvature_stretches=False):
        _, t_short = timed(lambda: clone(base).set_params(max_iter=est_short).fit(X, y))
        guess = t_short * (T / est_short) ** 2
        if guess <= args.dense_budget:
            _, t_dense = timed(lambda: clone(base).fit(X, y))
            dense = f"{t_dense:8.2f}s"
        else:
            t_dense = guess
            dense = f"~{guess:7.0f}s"
    folds, t_cv = timed(lambda: kfold_path(base, X, y))
    test = np.mean((yt[:, None] - est.predict_path(Xt)) ** 2, axis=0)
    best = test.min()
    pick_risk, pick_cv = int(np.argmin(est.risk_path_)), int(np.argmin(folds))
    last = stretches[-1]["start"] if stretches else "-"
    print(f"{design:7s} {n:5d} {p:4d} {T:5d} {t_fit:6.2f}s {t_risk:6.2f}s "
          f"{t_risk / t_fit:8.1f} {dense} {t_dense / t_risk:11.1f} {t_cv:6.2f}s "
          f"{t_risk / t_cv:10.2f} {len(stretches):4d} {last!s:>5s}  "
          f"{test[pick_risk] / best:.4f} (t={pick_risk}), {test[pick_cv] / best:.4f} (t={pick_cv})")


if __name__ == "__main__":
    main()
