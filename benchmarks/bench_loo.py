"""IACV (``loo_path_``) against brute-force leave-one-out refits, in one run.

Part (a): time of ``exact_loo_path`` (one refit per sample) against the
leave-one-out estimate of ``fit(estimate_loo=True)``:

* ridge gradient descent, n=2000, p=200, T=200 (goal: ratio >= 100);
* ISTA (Lasso), n=1000, p=200, T=200 (goal: ratio >= 20).

The refits are timed on ``--n-refits`` random samples and extrapolated
linearly to all n (every refit is the same full fit); ``--full`` runs
``exact_loo_path`` itself on every sample. IACV is timed as the extra time
of ``fit(estimate_loo=True)`` over ``fit()`` (median of 3), and the ratio is
also given against the whole ``fit(estimate_loo=True)``. The largest
difference between the two leave-one-out predictions (exact for least
squares) is printed on the refitted samples. BLAS runs single-threaded on
both sides (``--threads``) so that a shared machine does not skew the ratio.

Part (c), ``--part c``: wide l1 paths, where the left-out runs differ from the
fit on few coordinates: the extra time of ``fit(estimate_loo=True)`` (CPU time,
least of ``--reps``) with the runs stepped on those rows (the default, speed
policy ``loo_live_rows_min_features``) against every row (the dense block of
before, the policy's field raised), alternated in one process, with the
largest relative difference of the two ``loo_path_``; and the brute-force
refits extrapolated from ``--n-refits`` samples. Cases: FISTA Lasso and
logistic l1 at 100 x 5000 (200 steps, a large and a small penalty), and the
gene-expression design NCI60 (64 x 6829 in ISLP; its first 50/50 split,
standardised, FISTA at alpha 0.0205 for 2000 steps, where the natural
search's K-fold CV stops) when ISLP is installed.

Part (b): the logistic setting of Luo, Ren & Barber (2023): p = 20 with 5
non-zero N(0, 1) coefficients, n = 250, no intercept, gradient descent with
step 0.5 on the mean loss (0.5 / n in their sum scaling), ridge penalty
alpha = 1e-6 (mean form), T = 2000 iterations (converged). Prints, per
repetition, the median over samples of ``||theta~_{-i} - theta_{-i}||`` at
the last iterate for IACV and for the naive baseline (``theta~_{-i} = theta``),
and the median error of the left-out probabilities of IACV, NS, IJ and ALO
(:func:`skacv.approximate_loo`) and the naive in-sample probability.

    python benchmarks/bench_loo.py                  # ~3 min on one core
    python benchmarks/bench_loo.py --full --n-jobs 2
    python benchmarks/bench_loo.py --part b --reps 5 --n 1000
    python benchmarks/bench_loo.py --part c --reps 2       # ~3 min
"""

import argparse
import time

import numpy as np
from scipy.special import expit
from threadpoolctl import threadpool_limits

from skacv import (
    IterativeRidge,
    TrajectoryLasso,
    TrajectoryLogisticRegression,
    approximate_loo,
    exact_loo_path,
)
from skacv._policy import policy_context
from skacv.estimates.loo._iacv import iacv_path
from skacv.estimates.loo._refit import exact_refits


def regression(n, p, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[: p // 10] = rng.standard_normal(p // 10)
    y = X @ beta + rng.standard_normal(n) + 1.0
    return X, y


def median_time(f, repeat=3):
    times = []
    for _ in range(repeat):
        tic = time.perf_counter()
        f()
        times.append(time.perf_counter() - tic)
    return float(np.median(times))


def part_a(args):
    cases = [
        ("ridge GD", IterativeRidge(alpha=10.0, solver="gd", max_iter=200,
                                    estimate_risk=False), 2000, 200, 100),
        ("ISTA", TrajectoryLasso(alpha=0.05, solver="ista", max_iter=200,
                                 estimate_risk=False), 1000, 200, 20),
    ]
    print("(a) exact_loo_path (brute-force refits) against IACV loo_path_, T = 200")
    header = (f"{'method':<9} {'n':>5} {'p':>4} {'fit':>7} {'fit+loo':>8} {'loo':>7} "
              f"{'exact':>9} {'ratio':>7} {'ratio(fit+loo)':>15} {'goal':>5} "
              f"{'max|diff|':>10}")
    print(header)
    for name, est, n, p, goal in cases:
        X, y = regression(n, p, seed=0)
        est.set_params(estimate_loo=False)
        t_fit = median_time(lambda est=est, X=X, y=y: est.fit(X, y))
        est.set_params(estimate_loo=True, loo_options={"store_predictions": True})
        t_loo_fit = median_time(lambda est=est, X=X, y=y: est.fit(X, y))
        t_loo = max(t_loo_fit - t_fit, 1e-9)
        rng = np.random.default_rng(1)
        if args.full:
            tic = time.perf_counter()
            _, P = exact_loo_path(est, X, y, n_jobs=args.n_jobs, return_predictions=True)
            t_exact = time.perf_counter() - tic
            idx, label = np.arange(n), "all refits"
            exact = P
        else:
            idx = np.sort(rng.choice(n, args.n_refits, replace=False))
            tic = time.perf_counter()
            fits = exact_refits(est, X, y, indices=idx, n_jobs=args.n_jobs)[-1]
            t_exact = (time.perf_counter() - tic) * n / idx.shape[0]
            exact = np.array([fits[i] for i in idx])
            label = f"extrapolated from {idx.shape[0]} refits"
        diff = np.abs(est.loo_predictions_[idx] - exact).max()
        print(f"{name:<9} {n:>5} {p:>4} {t_fit:>6.2f}s {t_loo_fit:>7.2f}s {t_loo:>6.2f}s "
              f"{t_exact:>8.1f}s {t_exact / t_loo:>6.0f}x {t_exact / t_loo_fit:>14.0f}x "
              f"{goal:>4}x {diff:>10.1e}   ({label})")


def classification(n, p, s, rng):
    theta = np.zeros(p)
    theta[rng.choice(p, s, replace=False)] = rng.standard_normal(s)
    X = rng.standard_normal((n, p))
    y = (rng.random(n) < expit(X @ theta)).astype(int)
    return X, y


def part_b(args):
    n, T = args.n, args.T
    print(f"\n(b) logistic, p = 20 (5 non-zero), n = {n}, GD step 0.5 (mean loss), "
          f"alpha = 1e-6, T = {T}")
    print("    err = ||theta~_{-i} - theta_{-i}|| at t = T: mean over i (the paper's "
          "err_approx) and median over i;")
    print("    then median_i |p~_i - p_i| of the left-out probabilities")
    print(f"{'rep':>3} {'IACV mean':>9} {'naive mean':>10} {'IACV med':>9} {'naive med':>9} | "
          f"{'p:IACV':>9} {'p:NS':>9} {'p:IJ':>9} {'p:ALO':>9} {'p:naive':>9} | "
          f"{'iacv s':>7} {'exact s':>8}")
    rows = []
    for rep in range(args.reps):
        rng = np.random.default_rng(2030 + rep)
        X, y = classification(n, 20, 5, rng)
        est = TrajectoryLogisticRegression(alpha=1e-6, solver="gd", step_size=0.5, max_iter=T,
                                           fit_intercept=False).fit(X, y)
        tic = time.perf_counter()
        prob = est._problem(X, y)
        design, it = prob.design, prob.iteration
        y01 = y.astype(float)
        res = iacv_path(design, y01, it, est._fit_coef_path(), y01,
                        datafit=prob.datafit, coef_at=[T], store_predictions=True)
        t_iacv = time.perf_counter() - tic
        tic = time.perf_counter()
        fits = exact_refits(est, X, y, n_jobs=args.n_jobs, return_coef=True)[-1]
        t_exact = time.perf_counter() - tic
        theta_exact = np.array([fits[i][1][:, T] for i in range(n)])
        p_exact = np.array([fits[i][0][T] for i in range(n)])
        e_iacv = np.linalg.norm(res.coef[0] - theta_exact, axis=1)
        e_naive = np.linalg.norm(est.coef_path_[:, T] - theta_exact, axis=1)
        pe = {"IACV": res.predictions[:, T]}
        for m in ("ns", "ij", "alo"):
            pe[m] = approximate_loo(est, X, y, method=m).predictions
        pe["naive"] = est.predict_proba(X)[:, 1]
        perr = {k: np.median(np.abs(v - p_exact)) for k, v in pe.items()}
        rows.append((e_iacv.mean(), e_naive.mean(), np.median(e_iacv), np.median(e_naive)))
        print(f"{rep:>3} {e_iacv.mean():>9.2e} {e_naive.mean():>10.2e} "
              f"{np.median(e_iacv):>9.2e} {np.median(e_naive):>9.2e} | "
              f"{perr['IACV']:>9.2e} {perr['ns']:>9.2e} {perr['ij']:>9.2e} "
              f"{perr['alo']:>9.2e} {perr['naive']:>9.2e} | {t_iacv:>6.2f}s {t_exact:>7.1f}s")
    rows = np.array(rows)
    med = np.median(rows, axis=0)
    print(f"median over {args.reps} repetitions of the mean over i: IACV {med[0]:.2e}, naive "
          f"{med[1]:.2e} (ratio {med[1] / med[0]:.0f}; the research notes' reproduction at "
          "n = 250: 1.04e-3 and 4.3e-2)")
    print(f"                                 of the median over i: IACV {med[2]:.2e}, "
          f"naive {med[3]:.2e}")


def _wide_cases():
    rng = np.random.default_rng(0)
    n, p = 100, 5000
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:10] = 1.0
    y = X @ beta + rng.standard_normal(n)
    y01 = (y > np.median(y)).astype(int)
    cases = []
    for alpha in (0.05, 0.005):
        cases.append((f"FISTA Lasso {alpha:g}", TrajectoryLasso(alpha=alpha, max_iter=200), X, y))
    for alpha in (0.02, 0.002):
        cases.append((f"logistic l1 {alpha:g}",
                      TrajectoryLogisticRegression(alpha=alpha, penalty="l1", max_iter=200),
                      X, y01))
    try:
        from bench_real_data import design_nci60
        from sklearn.model_selection import train_test_split
        from sklearn.preprocessing import StandardScaler
        Xg, yg, _ = design_nci60()
        Xtr, _, ytr, _ = train_test_split(Xg, yg, test_size=0.5, random_state=0)
        cases.append(("NCI60 FISTA", TrajectoryLasso(alpha=0.0205, max_iter=2000),
                      StandardScaler().fit_transform(Xtr), ytr))
    except Exception as exc:  # ISLP not installed
        print(f"NCI60 skipped: {exc}")
    return cases


def part_c(args):
    print("\n(c) wide l1 paths: the left-out runs on the rows where they differ from the fit "
          "(live) against every row (dense); CPU seconds of loo over the fit, least of "
          f"{args.reps}")
    print(f"{'case':<20} {'n x p':>10} {'T':>5} {'fit':>7} {'live':>7} {'dense':>7} "
          f"{'live/dense':>10} {'max rel diff':>12} {'refits':>9} {'refits/live':>11}")

    def cpu(est, X, y):
        best = np.inf
        for _ in range(args.reps):
            tic = time.process_time()
            est.fit(X, y)
            best = min(best, time.process_time() - tic)
        return best

    for name, est, X, y in _wide_cases():
        extra = {"estimate_risk": False} if "estimate_risk" in est.get_params() else {}
        est.set_params(estimate_loo=False, **extra)
        t_fit = cpu(est, X, y)
        est.set_params(estimate_loo=True)
        live = dense = np.inf
        for _ in range(2):  # alternated
            live = min(live, cpu(est, X, y) - t_fit)
            path_live = est.loo_path_.copy()
            with policy_context(loo_live_rows_min_features=np.iinfo(np.int64).max):
                dense = min(dense, cpu(est, X, y) - t_fit)
                path_dense = est.loo_path_.copy()
        diff = float(np.max(np.abs(path_live / path_dense - 1)))
        n = X.shape[0]
        idx = np.sort(np.random.default_rng(1).choice(n, min(args.n_refits, n), replace=False))
        est.set_params(estimate_loo=False)
        tic = time.process_time()
        exact_refits(est, X, y, indices=idx)
        t_exact = (time.process_time() - tic) * n / idx.size
        print(f"{name:<20} {X.shape[0]:>4} x {X.shape[1]:<5} {est.max_iter:>5} {t_fit:>6.2f}s "
              f"{live:>6.2f}s {dense:>6.2f}s {live / dense:>10.2f} {diff:>12.1e} "
              f"{t_exact:>8.1f}s {t_exact / live:>10.1f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=["a", "b", "c", "all"], default="all")
    parser.add_argument("--full", action="store_true", help="refit on every sample")
    parser.add_argument("--n-refits", type=int, default=100)
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--n", type=int, default=250)
    parser.add_argument("--T", type=int, default=2000)
    args = parser.parse_args()
    with threadpool_limits(args.threads):
        if args.part in ("a", "all"):
            part_a(args)
        if args.part in ("b", "all"):
            part_b(args)
        if args.part == "c":
            part_c(args)


if __name__ == "__main__":
    main()
