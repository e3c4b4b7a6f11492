"""The Jacobian chains' primal products by blocks of rows (``chain_fused_bytes``)
against two products over all the rows, in the same run.

Part 1 times the product ``X~_S^T (X~_S V)`` itself (float32, ``m`` columns,
the best of 7 interleaved runs); part 2 the fit + ``risk_path_`` of a default
``TrajectoryLasso`` on ``bench_vs_cv.py``'s equicorrelated design (the best of
3 interleaved runs each), in fits. Both print the ratio blocked / plain.
Part 1 runs without the thin panels of part 3 (``chain_panel_max_columns=0``).
Part 3 times the product of a few columns (``--vector-columns``, at most the
policy's ``chain_panel_max_columns``) by thin panels of rows in the transposed
layout against blocked matrix products (``chain_panel_max_columns=0``), and
against one column by thin panels (the memory-bound floor); with fewer columns
than the policy's ``chain_panel_min_columns``, also by matrix-vector products
on the thin panels (the default there). Part 4 times the
restricted Gram matrix's product with a few columns (``G[:s, :s] V``, float32)
by panels of its rows (``chain_gram_panel_min_columns``) against matrix-vector
products on blocks of rows (the policy's value 99: never panels), and the fit
+ ``risk_path_`` of ``--gram-fits`` both ways, in fits.

    python benchmarks/bench_chain_fused.py
    python benchmarks/bench_chain_fused.py --shapes 4000x6000 10000x8000 --T 300
    python benchmarks/bench_chain_fused.py --parts 4
"""

import argparse
import time
import warnings

import numpy as np
from bench_vs_cv import data
from threadpoolctl import threadpool_limits

from skacv import TrajectoryLasso
from skacv._policy import get_policy, policy_context
from skacv.estimates.risk._propagate import gram_product, primal_product


def best_of(fn, runs):
    out = float("inf")
    for _ in range(runs):
        tic = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - tic)
    return out


def product_times(n, p, m, key, values, runs=7, **fixed):
    """The best time of ``primal_product`` with the policy's ``key`` at each
    of ``values`` (interleaved runs; ``fixed``: other policy values)."""
    rng = np.random.default_rng(0)
    Xs = rng.standard_normal((n, p)).astype(np.float32)
    V = rng.standard_normal((p, m)).astype(np.float32)
    out = np.empty((p, m), dtype=np.float32)
    times = {}
    for _ in range(runs):  # interleaved
        for policy in values:
            with policy_context(**fixed, **{key: policy}) as pol:
                t = best_of(lambda: primal_product(Xs, p, p, V, out, -1.0, pol), 1)
            times[policy] = min(times.get(policy, t), t)
    return [times[v] for v in values]


def gram_times(s, m, values, runs=15):
    """The best time of ``gram_product`` on a restricted Gram matrix of order
    ``s`` with ``m`` columns at each ``chain_gram_panel_min_columns`` of
    ``values`` (interleaved runs)."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((s + 50, s + 50)).astype(np.float32)
    G = (A + A.T) / 2  # the chains read a prefix of a larger cached matrix
    V = np.asfortranarray(rng.standard_normal((s, m)).astype(np.float32))
    out = np.empty((s, m), dtype=np.float32)
    times = {}
    for _ in range(runs):
        for value in values:
            with policy_context(chain_gram_panel_min_columns=value) as pol:
                t = best_of(lambda: gram_product(None, G, s, s, V, out, -1.0, pol), 3)
            times[value] = min(times.get(value, t), t)
    return [times[v] for v in values]


def fit_times_policy(n, p, T, solver, key, values, runs=3):
    """Fit + ``risk_path_`` in fits with the policy's ``key`` at each of ``values``."""
    X, y, _, _ = data(n, p, n + p)
    kw = dict(alpha=0.1 * np.sqrt(np.log(p) / n), max_iter=T, solver=solver, random_state=0)
    fit = best_of(lambda: TrajectoryLasso(estimate_risk=False, **kw).fit(X, y), 3)
    times = {}
    for _ in range(runs):
        for value in values:
            with policy_context(**{key: value}):
                t = best_of(lambda: TrajectoryLasso(**kw).fit(X, y), 1)
            times[value] = min(times.get(value, t), t)
    return [times[v] / fit for v in values]


def fit_times(n, p, T, solver, budget, runs=3):
    X, y, _, _ = data(n, p, n + p)
    kw = dict(alpha=0.1 * np.sqrt(np.log(p) / n), max_iter=T, solver=solver, random_state=0)
    fit = best_of(lambda: TrajectoryLasso(estimate_risk=False, **kw).fit(X, y), 2)
    times = {}
    for _ in range(runs):
        for policy in (None, budget):
            with policy_context(chain_fused_bytes=policy):
                t = best_of(lambda: TrajectoryLasso(**kw).fit(X, y), 1)
            times[policy] = min(times.get(policy, t), t)
    return fit, times[None], times[budget]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=["2000x3000", "4000x6000"])
    ap.add_argument("--T", type=int, default=300)
    ap.add_argument("--columns", type=int, nargs="+", default=[8, 16, 32])
    ap.add_argument("--solvers", nargs="+", default=["ista", "fista"])
    ap.add_argument("--vector-shapes", nargs="+", default=["2000x2500", "10000x9000"])
    ap.add_argument("--vector-columns", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--gram-orders", type=int, nargs="+", default=[500, 1000, 1500, 2000, 2500])
    ap.add_argument("--gram-columns", type=int, nargs="+", default=[2, 3, 4])
    ap.add_argument("--gram-fits", nargs="+", default=["1000x1500:ista", "2000x1000:fista"])
    ap.add_argument("--parts", type=int, nargs="+", default=[1, 2, 3, 4])
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    budget = get_policy().chain_fused_bytes or 2 * 2**20
    with threadpool_limits(1, user_api="blas"):
        if 4 in args.parts:
            gram_part(args)
        if args.parts == [4]:
            return
        print(f"part 1: X~_S^T (X~_S V), float32, blocks of {budget} bytes of rows against plain")
        for shape in args.shapes:
            n, p = (int(v) for v in shape.split("x"))
            for m in args.columns:
                plain, blocked = product_times(n, p, m, "chain_fused_bytes", (None, budget),
                                               chain_panel_max_columns=0)
                print(f"  {n:6d} x {p:<6d} m={m:<3d} plain {plain * 1e3:7.1f} ms  blocked "
                      f"{blocked * 1e3:7.1f} ms  ratio {blocked / plain:.2f}", flush=True)
        print(f"part 2: fit + risk_path_ (T = {args.T}) in fits")
        for shape in args.shapes:
            n, p = (int(v) for v in shape.split("x"))
            for solver in args.solvers:
                fit, plain, blocked = fit_times(n, p, args.T, solver, budget)
                print(f"  {n:6d} x {p:<6d} {solver:5s} fit {fit:6.2f} s  plain {plain / fit:5.2f} "
                      f"fits  blocked {blocked / fit:5.2f} fits  ratio {blocked / plain:.2f}",
                      flush=True)
        thin = max(args.vector_columns)
        low = get_policy().chain_panel_min_columns
        print(f"part 3: a few columns by thin panels (chain_panel_max_columns={thin}) against "
              "matrix products (0), blocked; 'vectors': fewer columns than "
              f"chain_panel_min_columns={low} by matrix-vector products on the thin panels")
        for shape in args.vector_shapes:
            n, p = (int(v) for v in shape.split("x"))
            one = product_times(n, p, 1, "chain_panel_max_columns", (thin,))[0]
            for m in args.vector_columns:
                matrix = product_times(n, p, m, "chain_panel_max_columns", (0,))[0]
                panels, vectors = product_times(n, p, m, "chain_panel_min_columns", (0, low),
                                                chain_panel_max_columns=thin)
                line = (f"  {n:6d} x {p:<6d} m={m:<3d} matrix {matrix * 1e3:7.1f} ms  panels "
                        f"{panels * 1e3:7.1f} ms  ratio {panels / matrix:.2f}")
                if m < low:
                    line += f"  vectors {vectors * 1e3:7.1f} ms  ratio {vectors / matrix:.2f}"
                print(line + f"  (one column {one * 1e3:.1f} ms)", flush=True)


def gram_part(args):
    """Part 4 (printed first): the restricted Gram matrix's panels."""
    on = get_policy().chain_gram_panel_min_columns
    print(f"part 4: G[:s, :s] V by panels of rows (chain_gram_panel_min_columns={on}) "
          "against matrix-vector products (99)")
    for s in args.gram_orders:
        for m in args.gram_columns:
            vector, panels = gram_times(s, m, (99, on))
            print(f"  s={s:<5d} m={m}  vectors {vector * 1e3:6.3f} ms  panels "
                  f"{panels * 1e3:6.3f} ms  ratio {panels / vector:.2f}", flush=True)
    for item in args.gram_fits:
        shape, solver = item.split(":")
        n, p = (int(v) for v in shape.split("x"))
        vector, panels = fit_times_policy(n, p, args.T, solver, "chain_gram_panel_min_columns",
                                          (99, on))
        print(f"  fit + risk_path_ {n} x {p} {solver} T={args.T}: vectors {vector:.2f} fits, "
              f"panels {panels:.2f} fits", flush=True)


if __name__ == "__main__":
    main()
