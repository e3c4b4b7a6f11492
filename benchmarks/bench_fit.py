"""Per-iteration time of the fit loop against its two matrix-vector products.

One step of ISTA, FISTA or gradient descent on least squares needs two
products with the data, ``X @ b`` and ``X.T @ r``; everything else is O(n + p).
This benchmark times ``TrajectoryLasso(solver="ista" | "fista")`` and
``IterativeRidge(alpha=0, solver="gd")`` (``estimate_risk=False``, a given
float step, ``fit_intercept=False`` as in the seed notebook) and, in the same
run and the same dtype, the two bare numpy products on the same ``X``. It
prints the time per iteration of each fit (whole ``fit`` divided by
``max_iter``: validation and setup included) and of the two products, and
their ratio. Target: ratio <= 1.3.

Data: the seed notebook's generator (Gaussian ``X``, ``s`` nonzeros equal to
``15 / sqrt(n)``, noise 1.5, seed 2025), in float64 and float32.

    python benchmarks/bench_fit.py                        # n=10000, p=15000 (~2 min)
    python benchmarks/bench_fit.py --n 2000 --p 3000      # a few seconds
    python benchmarks/bench_fit.py --dtype float32 --T 50
    python benchmarks/bench_fit.py --n 2000 --p 3000 --block 4 --repeat 5

``--block K`` times instead one pass of the fit loop's panel products
(:meth:`skacv.linalg._design.Design.panel_products`, the fused ``X~ b`` and
``X~^T r``, float64) for ``k = 1 .. K`` columns, the several trajectories of a
round of a search read together: as one block (the stacked folds' BLAS
``gemm`` on each panel) and as ``k`` matrix-vector products on each panel
while it is in cache, against ``k`` separate passes (CPU time, median of
``--repeat``; run with one BLAS thread).
"""

import argparse
import time

import numpy as np

from skacv import IterativeRidge, TrajectoryLasso

SOLVERS = {
    "ista": lambda eta, T: TrajectoryLasso(0.01, solver="ista", step_size=eta, max_iter=T,
                                           fit_intercept=False, estimate_risk=False),
    "fista": lambda eta, T: TrajectoryLasso(0.01, solver="fista", step_size=eta, max_iter=T,
                                            fit_intercept=False, estimate_risk=False),
    "gd": lambda eta, T: IterativeRidge(0.0, solver="gd", step_size=eta, max_iter=T,
                                        fit_intercept=False, estimate_risk=False),
}


def seed_data(n, p, s, sigma=1.5, seed=2025):
    beta = 15 * np.hstack([np.ones(s), np.zeros(p - s)]) / np.sqrt(n)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal(size=(n, p))
    y = X @ beta + sigma * rng.standard_normal(size=(n,))
    return X, y


def time_products(X, b, r, T):
    """Mean time of ``X @ b`` plus ``X.T @ r`` over T repetitions."""
    tic = time.perf_counter()
    for _ in range(T):
        u = X @ b
        v = X.T @ r
    elapsed = time.perf_counter() - tic
    assert u.dtype == v.dtype == X.dtype
    return elapsed / T


def time_block(X, K, repeat):
    """CPU ms of one panel pass for 1..K columns: separate, gemm block, gemv panels."""
    from skacv.linalg._design import Design

    d = Design(X)
    rng = np.random.default_rng(0)
    panels = [rows for group in d._panel_groups() for rows in group]

    def cpu(f):
        times = []
        for _ in range(repeat):
            tic = time.process_time()
            f()
            times.append(time.process_time() - tic)
        return 1e3 * float(np.median(times))

    def gemv_panels(B):  # k products of each panel while it is in cache
        P, Z = np.empty((B.shape[1], X.shape[0])), np.zeros((B.shape[1], X.shape[1]))
        for rows in panels:
            Xa = d.X[rows]
            for j in range(B.shape[1]):
                np.dot(Xa, B[:, j], out=P[j, rows])
                Z[j] += np.dot(Xa.T, 1.0 - P[j, rows])

    one = cpu(lambda: d.panel_products(rng.standard_normal(X.shape[1]), lambda r, P: 1.0 - P))
    print(f"{'columns':>7s} {'separate ms':>12s} {'gemm block ms':>14s} {'gemv panels ms':>15s}")
    for k in range(1, K + 1):
        B = rng.standard_normal((X.shape[1], k))
        block = cpu(lambda B=B: d.panel_products(B, lambda r, P: 1.0 - P))
        print(f"{k:7d} {k * one:12.2f} {block:14.2f} {cpu(lambda B=B: gemv_panels(B)):15.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--p", type=int, default=15000)
    parser.add_argument("--s", type=int, default=None, help="nonzeros (default p/15)")
    parser.add_argument("--T", type=int, default=30, help="iterations per fit")
    parser.add_argument("--repeat", type=int, default=1,
                        help="repetitions; the fastest of each is kept")
    parser.add_argument("--dtype", choices=("float64", "float32", "both"), default="both")
    parser.add_argument("--solvers", nargs="+", choices=list(SOLVERS), default=list(SOLVERS))
    parser.add_argument("--block", type=int, default=0,
                        help="time the panel pass of 1..BLOCK columns instead")
    args = parser.parse_args()
    n, p, T = args.n, args.p, args.T
    s = args.s if args.s is not None else max(1, p // 15)
    dtypes = ["float64", "float32"] if args.dtype == "both" else [args.dtype]

    tic = time.perf_counter()
    X64, y = seed_data(n, p, s)
    if args.block:
        return time_block(X64, args.block, args.repeat)
    print(f"data n={n} p={p} s={s}: {time.perf_counter() - tic:.1f} s; T={T} iterations "
          f"per fit, best of {args.repeat}")
    eta = (1 + np.sqrt(p / n)) ** -2
    header = (f"{'dtype':8s} {'solver':6s} {'fit/iter ms':>12s} {'2 matvecs ms':>13s} "
              f"{'ratio':>6s}  support")
    print(header)
    print("-" * len(header))
    ratios = {}
    for dtype in dtypes:
        X = X64 if dtype == "float64" else X64.astype(np.float32)
        rng = np.random.default_rng(0)
        b = rng.standard_normal(p).astype(dtype)
        r = rng.standard_normal(n).astype(dtype)
        for name in args.solvers:
            fit_t, prod_t = np.inf, np.inf
            for _ in range(args.repeat):
                # the products right before the fit: same machine state
                prod_t = min(prod_t, time_products(X, b, r, T))
                est = SOLVERS[name](eta, T)
                tic = time.perf_counter()
                est.fit(X, y)
                fit_t = min(fit_t, (time.perf_counter() - tic) / T)
            assert est.coef_path_.dtype == X.dtype
            ratio = fit_t / prod_t
            ratios[dtype, name] = ratio
            print(f"{dtype:8s} {name:6s} {1e3 * fit_t:12.2f} {1e3 * prod_t:13.2f} "
                  f"{ratio:6.2f}  {np.count_nonzero(est.coef_)}")
        del X
    worst = max(ratios.values())
    print(f"worst ratio {worst:.2f} (target <= 1.3): {'OK' if worst <= 1.3 else 'ABOVE'}")


if __name__ == "__main__":
    main()
