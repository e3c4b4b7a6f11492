"""Fit + risk_path_ against the seed notebook's all-pairs estimator, same run.

Part 1 (ISTA, the seed's experiment): the seed generator with seed 2025,
``lam = 0.01``, step ``(1 + sqrt(p/n))^-2``, T columns (T - 1 steps), m
Rademacher probes. The baseline is a straightforward implementation of the
seed notebook's algorithm (dense ``R_t`` with every source, products with the
whole X); skacv runs ``TrajectoryLasso(...).fit`` with ``estimate_risk=True``
and its default probe scheme with the seed's number of probes ``m``
(``probe_scheme="auto"``: the pooled probes, one chain of ``m`` probes for
every source whose rows' sums are split by the solver's linear
counterpart; not the seed's algorithm's estimate with the same probes;
``--scheme`` for another). Prints both
times and the ratio; then, at the seed's printed rows, the true risk, both
estimates, skacv's estimate with the seed's own probes (the shared probes:
equal to the seed's algorithm, the last column but one), and both estimates
against a reference: the shared probes with 200 other probes (default), or
exact traces (``--reference exact``).

Part 2 (``--linear``): GD, ridge GD and heavy ball at T=200: time of the fit
with ``estimate_risk=False`` and with ``estimate_risk=True``; the ratio of
the extra time to the fit time (goal <= 0.5).

    python benchmarks/bench_risk_path.py                 # seed size, ~6 min
    python benchmarks/bench_risk_path.py --n 2000 --p 3000 --s 200 --repeat 3
    python benchmarks/bench_risk_path.py --n 2000 --p 3000 --s 200 --reference exact
    python benchmarks/bench_risk_path.py --linear --T 200
    python benchmarks/bench_risk_path.py --float32       # X in float32 (chains too)
    python benchmarks/bench_risk_path.py --chains x      # chains in X's precision
"""

import argparse
import contextlib
import time

import numpy as np
from sklearn.base import clone

from skacv import IterativeRidge, TrajectoryLasso, config_context


def chain_settings(est, **params):
    """``(estimator, context)`` fitting ``clone(est)`` with the chains'
    ``probe_scheme`` / ``chain_dtype`` (keys of ``risk_options``, merged into
    the estimator's), or, on an older checkout (a side-by-side run), the
    separate estimator parameters or configuration keys of that version."""
    est = clone(est)
    names = est.get_params()
    if "risk_options" in names:
        options = {**(names["risk_options"] or {}), **params}
        return est.set_params(risk_options=options), contextlib.nullcontext()
    if "probe_scheme" in names:
        return est.set_params(**params), contextlib.nullcontext()
    keys = {"probe_scheme": "risk_probe_scheme", "chain_dtype": "risk_chain_dtype"}
    return est, config_context(**{keys[k]: v for k, v in params.items()})


def seed_data(n, p, s, sigma, seed):
    beta = 15 * np.hstack([np.ones(s), np.zeros(p - s)]) / np.sqrt(n)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal(size=(n, p))
    y = X @ beta + sigma * rng.standard_normal(size=(n,))
    return X, y, beta, rng


def soft(x, t):
    return np.sign(x) * np.clip(np.abs(x) - t, 0, None)


def seed_all_pairs(X, y, beta, sigma, T, m, lam, Z):
    """The seed notebook's estimator (all pairs, dense products)."""
    n, p = X.shape
    eta = (1 + np.sqrt(p / n)) ** -2
    r = Z / np.sqrt(m)
    F = np.zeros((n, T))
    H = np.zeros((p, T))
    bt = np.zeros(p)
    F[:, 0] = y
    H[:, 0] = -beta
    A = np.zeros((T, T))
    XTr = X.T @ r
    Rt = None
    for t in range(1, T):
        bt = soft(bt + eta * X.T @ (y - X @ bt) / n, lam * eta)
        Dt = (bt != 0)[:, None]
        if t == 1:
            Rt = Dt * XTr
        else:
            Rt = np.hstack([Dt * (Rt - (eta / n) * X.T @ (X @ Rt)), Dt * XTr])
        A[t, :t] = np.trace((eta * XTr.T @ Rt / n).reshape((m, t, m)), axis1=0, axis2=2)
        F[:, t] = y - X @ bt
        H[:, t] = bt - beta
    M = np.linalg.solve(np.eye(T) - A / n, F.T).T
    return np.diag(M.T @ M / n), (H**2).sum(0) + sigma**2


def part_ista(args):
    n, p, s, T, m = args.n, args.p, args.s, args.T, args.m
    X, y, beta, _ = seed_data(n, p, s, args.sigma, 2025)
    Z = np.random.RandomState(args.probe_seed).choice([-1.0, 1.0], size=(n, m))
    eta = (1 + np.sqrt(p / n)) ** -2
    Xs = X.astype(np.float32) if args.float32 else X
    est = TrajectoryLasso(args.lam, solver="ista", max_iter=T - 1, step_size=eta,
                          fit_intercept=False, n_probes=m, random_state=args.probe_seed,
                          verbose=args.verbose)
    chains = Xs.dtype.name if args.chains == "x" else args.chains
    print(f"n={n} p={p} s={s} T={T} m={m} lam={args.lam} dtype={Xs.dtype} "
          f"chains={args.chains} probes={args.scheme}")
    # the two sides alternate; with --repeat R > 1 each ratio is printed and
    # the last line takes the best time of each side (the host's noise and
    # the first touch of fresh memory inflate single runs)
    times_skacv, times_seed, est_seed = [], [], None
    for _ in range(args.repeat):
        est, context = chain_settings(est, chain_dtype=chains, probe_scheme=args.scheme)
        tic = time.perf_counter()
        with context:
            est.fit(Xs, y)
        times_skacv.append(time.perf_counter() - tic)
        print(f"skacv fit + risk_path_: {times_skacv[-1]:.2f}s   "
              f"support_last={int((est.coef_ != 0).sum())}")
        if args.skip_seed:
            print("(seed all-pairs baseline skipped)")
            continue
        tic = time.perf_counter()
        est_seed, _ = seed_all_pairs(X, y, beta, args.sigma, T, m, args.lam, Z)
        times_seed.append(time.perf_counter() - tic)
        print(f"seed all-pairs estimator: {times_seed[-1]:.2f}s")
        print(f"RATIO seed / skacv = {times_seed[-1] / times_skacv[-1]:.2f}x")
    if args.repeat > 1 and times_seed:
        print(f"RATIO best of {args.repeat}: {min(times_seed):.2f}s / {min(times_skacv):.2f}s "
              f"= {min(times_seed) / min(times_skacv):.2f}x")
    print(f"peak resident memory of this process so far: {_peak_mib():.0f} MiB")
    risk = est.risk_path_
    # the same probes as the seed's algorithm: skacv's shared-probe chains
    shared = risk
    if args.scheme != "shared":
        tic = time.perf_counter()
        seed_probes, context = chain_settings(est, chain_dtype=chains, probe_scheme="shared")
        with context:
            shared = seed_probes.fit(Xs, y).risk_path_
        print(f"skacv with the seed's probes (risk_options probe_scheme='shared'): "
              f"{time.perf_counter() - tic:.2f}s")
    # the reference: exact traces, or the shared probes' estimate with many
    # other probes (its own error ~ the 10-probe error times sqrt(10 / M))
    ref, ref_name = None, None
    if args.reference == "exact":
        tic = time.perf_counter()
        exact, context = chain_settings(est, probe_scheme="shared", chain_dtype="float32")
        with context:
            ref = exact.set_params(n_probes=None).fit(Xs, y).risk_path_
        ref_name = "exact"
        print(f"exact traces: {time.perf_counter() - tic:.1f}s")
    elif args.reference == "probes":
        M = args.reference_probes
        tic = time.perf_counter()
        many, context = chain_settings(est, probe_scheme="shared")
        with context, config_context(path_memory_limit=65536, working_memory=4096):
            ref = many.set_params(n_probes=M, random_state=args.probe_seed + 1).fit(
                Xs, y).risk_path_
        ref_name = f"{M} probes"
        print(f"reference ({M} other probes, shared): {time.perf_counter() - tic:.1f}s")
    true = ((est.coef_path_ - beta[:, None]) ** 2).sum(0) + args.sigma**2
    rows = list(range(5)) + list(range(T - 5, T))
    print(f"{'t':>3} {'true':>8} {'skacv':>8} {'seed-alg':>9} {'shared':>8} "
          f"{'ref':>8} {'skacv/ref':>9} {'seed/ref':>9} {'shared/seed':>11} {'vs-table':>9}")
    seed_table = {0: 25.175, 1: 18.599, 2: 16.064, 3: 14.534, 4: 13.421,
                  T - 5: 3.941, T - 4: 3.935, T - 3: 3.923, T - 2: 3.919, T - 1: 3.913}
    full = (n, p, s, T, m) == (10000, 15000, 1000, 100, 10)
    sd = est_seed if est_seed is not None else np.full(T, np.nan)
    rf = ref if ref is not None else np.full(T, np.nan)
    for t in rows:
        tab = seed_table[t] if full else np.nan
        print(f"{t:3d} {true[t]:8.3f} {risk[t]:8.3f} {sd[t]:9.3f} {shared[t]:8.3f} "
              f"{rf[t]:8.3f} {risk[t] / rf[t] - 1:+9.4f} {sd[t] / rf[t] - 1:+9.4f} "
              f"{shared[t] / sd[t] - 1:+11.4f} {risk[t] / tab - 1:+9.4f}")
    if ref is not None:
        for name, r in (("skacv (these settings)", risk), ("seed's algorithm", sd)):
            e = np.abs(r / ref - 1)
            if np.all(np.isnan(e)):
                continue
            print(f"{name} against the reference ({ref_name}): max |rel. diff| "
                  f"{np.nanmax(e[rows]):.4f} at the printed rows, {np.nanmax(e):.4f} over all "
                  f"{T} iterates, root mean square {np.sqrt(np.nanmean(e**2)):.4f}")
    if est_seed is not None:
        print(f"skacv with the seed's probes against the seed's algorithm: max |rel. diff| "
              f"{np.max(np.abs(shared / est_seed - 1)):.2e}")


def _peak_mib():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def part_linear(args):
    n, p, T = args.n, args.p, args.T
    X, y, beta, _ = seed_data(n, p, args.s, args.sigma, 2025)
    if args.float32:
        X = X.astype(np.float32)
    for name, kw in [("gd", dict(alpha=0.0)), ("ridge gd", dict(alpha=0.1 * n)),
                     ("heavy ball", dict(alpha=0.1 * n, solver="heavy_ball", momentum=0.5))]:
        base = IterativeRidge(max_iter=T, estimate_risk=False, fit_intercept=False, **kw)
        tic = time.perf_counter()
        base.fit(X, y)
        t_fit = time.perf_counter() - tic
        est = IterativeRidge(max_iter=T, estimate_risk=True, n_probes=args.m,
                             fit_intercept=False, random_state=0, **kw)
        tic = time.perf_counter()
        est.fit(X, y)
        t_both = time.perf_counter() - tic
        true = ((est.coef_path_ - beta[:, None]) ** 2).sum(0) + args.sigma**2
        err = np.max(np.abs(est.risk_path_ - true) / true)
        print(f"{name:10s} fit {t_fit:6.2f}s  fit+risk {t_both:6.2f}s  "
              f"RATIO extra/fit = {(t_both - t_fit) / t_fit:.2f}  max rel err vs truth {err:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--p", type=int, default=15000)
    ap.add_argument("--s", type=int, default=1000)
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--m", type=int, default=10)
    ap.add_argument("--lam", type=float, default=0.01)
    ap.add_argument("--sigma", type=float, default=1.5)
    ap.add_argument("--probe-seed", type=int, default=0)
    ap.add_argument("--float32", action="store_true")
    ap.add_argument("--chains", choices=["auto", "x", "float32", "float64"], default="auto",
                    help="chain_dtype: auto (default: float32 with probes), x (X's dtype)")
    ap.add_argument("--scheme", choices=["auto", "pooled", "shared"], default="auto",
                    help="probe_scheme (default auto: the pooled probes)")
    ap.add_argument("--reference", choices=["probes", "exact", "none"], default="probes",
                    help="what the estimates are compared with: the shared probes' estimate "
                         "with --reference-probes other probes (default), exact traces "
                         "(minutes and GBs at 2000 x 3000), or nothing")
    ap.add_argument("--reference-probes", type=int, default=200)
    ap.add_argument("--linear", action="store_true", help="GD / ridge GD / heavy ball part")
    ap.add_argument("--skip-seed", action="store_true", help="skip the all-pairs baseline")
    ap.add_argument("--verbose", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1,
                    help="alternate both sides R times; also print the ratio of the best times")
    args = ap.parse_args()
    if args.linear:
        part_linear(args)
    else:
        part_ista(args)


if __name__ == "__main__":
    main()
