"""Early stopping by the estimated risk against the oracle and 5-fold CV.

Simulated Gaussian designs ``x ~ N(0, Sigma)``, ``Sigma_ij = rho^|i-j|``,
``y = x^T beta + N(0, 1)``, ``s`` non-zero coefficients of equal size scaled
so that ``beta^T Sigma beta = snr``. The true risk of an iterate ``(b, b0)`` is
known in closed form, ``1 + (b - beta)^T Sigma (b - beta) + b0^2``, so no test
set is needed.

Part 1 (iteration), for each scenario and repetition, one estimator at a
fixed penalty:

* ``TrajectoryEarlyStoppingCV`` (one fit, risk_path_, no refit), with its
  default early stopping of the path (``n_iter_no_change=10``) and over the
  whole path (``n_iter_no_change=None``, columns ``full``);
* the oracle: the iterate of the same path with the smallest true risk;
* ``GridSearchCV(estimator(estimate_risk=False), {"max_iter": grid}, cv=5)``
  (with its refit), timed in the same run.

Printed per scenario: medians of true risk ratios ``selected / oracle`` and
``selected / 5-fold CV``, and the time ratio ``CV / selection``
(goals: median within 2 % of the oracle, not worse than CV by more than noise,
time ratio >= 5).

Part 2 (joint alpha x iteration, Lasso): ``param_grid={"alpha": grid}`` against
the best (alpha, iteration) pair by true risk over the same paths (goal:
median within 2 %), and 5-fold ``GridSearchCV`` over ``alpha x max_iter``
(timed in the same run).

    python benchmarks/bench_selection.py --quick         # small, ~1-2 min
    python benchmarks/bench_selection.py --n 1000 --reps 5
"""

import argparse
import time

import numpy as np
from scipy.linalg import toeplitz
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold

from skacv import IterativeRidge, TrajectoryEarlyStoppingCV, TrajectoryLasso


def make_data(n, p, s, snr, rho, rng):
    cov = toeplitz(rho ** np.arange(p))
    chol = np.linalg.cholesky(cov)
    X = rng.standard_normal((n, p)) @ chol.T
    beta = np.zeros(p)
    beta[rng.choice(p, s, replace=False)] = 1.0
    beta *= np.sqrt(snr / (beta @ cov @ beta))
    y = X @ beta + rng.standard_normal(n)
    return X, y, beta, cov


def true_risk(coef_path, intercept_path, beta, cov):
    D = coef_path - beta[:, None]
    return 1.0 + np.einsum("it,ij,jt->t", D, cov, D) + intercept_path**2


def scenarios(n):
    # name, p, s, snr, rho
    return [
        ("p<n  sparse   snr=1  rho=0  ", n // 2, 10, 1.0, 0.0),
        ("p<n  dense    snr=5  rho=0.5", n // 2, n // 4, 5.0, 0.5),
        ("p>n  sparse   snr=5  rho=0  ", 2 * n, 20, 5.0, 0.0),
        ("p>n  sparse   snr=1  rho=0.5", 2 * n, 20, 1.0, 0.5),
        ("p>n  dense    snr=5  rho=0.5", 2 * n, n // 2, 5.0, 0.5),
    ]


def estimators(n, p, T):
    lam = np.sqrt(2 * np.log(p) / n)
    return {
        # under-regularised Lasso: early stopping matters
        "lasso": TrajectoryLasso(alpha=0.1 * lam, solver="fista", max_iter=T, random_state=0),
        # plain gradient descent on least squares (early stopping is the regulariser)
        "gd": IterativeRidge(alpha=0.0, solver="gd", max_iter=T, random_state=0),
    }


def part_iteration(args):
    rows = []
    print("Part 1: choice of the iteration (true risk ratios, medians over repetitions)")
    print(f"{'scenario':32s} {'est':6s} {'sel/oracle':>10s} {'sel/cv5':>8s} "
          f"{'cv5/oracle':>10s} {'t_sel':>7s} {'t_cv5':>7s} {'speedup':>8s} "
          f"{'full/oracle':>11s} {'t_full':>7s} {'speedup':>8s}")
    for name, p, s, snr, rho in scenarios(args.n):
        for est_name, est in estimators(args.n, p, args.T).items():
            r_or, r_cv, r_cvo, t_sel, t_cv, r_full, t_full = [], [], [], [], [], [], []
            for rep in range(args.reps):
                rng = np.random.default_rng(1000 * rep + 7)
                X, y, beta, cov = make_data(args.n, p, s, snr, rho, rng)
                tic = time.perf_counter()
                full = TrajectoryEarlyStoppingCV(clone(est), n_iter_no_change=None).fit(X, y)
                t_full.append(time.perf_counter() - tic)
                tic = time.perf_counter()
                sel = TrajectoryEarlyStoppingCV(clone(est)).fit(X, y)
                t_sel.append(time.perf_counter() - tic)
                # the oracle: the best iterate of the whole path, by true risk
                path = full.estimator_
                risk = true_risk(path.coef_path_, path.intercept_path_, beta, cov)
                chosen = risk[sel.best_iteration_]
                r_full.append(risk[full.best_iteration_] / risk.min())
                grid = np.unique(np.geomspace(1, args.T, args.cv_grid).astype(int))
                tic = time.perf_counter()
                gs = GridSearchCV(clone(est).set_params(estimate_risk=False),
                                  {"max_iter": grid}, cv=KFold(5, shuffle=True, random_state=rep),
                                  scoring="neg_mean_squared_error").fit(X, y)
                t_cv.append(time.perf_counter() - tic)
                b = gs.best_estimator_
                cv_risk = true_risk(b.coef_[:, None], np.atleast_1d(b.intercept_), beta, cov)[0]
                r_or.append(chosen / risk.min())
                r_cv.append(chosen / cv_risk)
                r_cvo.append(cv_risk / risk.min())
            row = (name, est_name, np.median(r_or), np.median(r_cv), np.median(r_cvo),
                   np.median(t_sel), np.median(t_cv), np.median(r_full), np.median(t_full))
            rows.append(row)
            print(f"{name:32s} {est_name:6s} {row[2]:10.4f} {row[3]:8.4f} {row[4]:10.4f} "
                  f"{row[5]:7.2f} {row[6]:7.2f} {row[6] / row[5]:7.1f}x "
                  f"{row[7]:11.4f} {row[8]:7.2f} {row[6] / row[8]:7.1f}x")
    r = np.array([row[2:] for row in rows], dtype=float)
    print(f"{'all (median over scenarios)':39s} {np.median(r[:, 0]):10.4f} "
          f"{np.median(r[:, 1]):8.4f} {np.median(r[:, 2]):10.4f} {np.median(r[:, 3]):7.2f} "
          f"{np.median(r[:, 4]):7.2f} {np.median(r[:, 4] / r[:, 3]):7.1f}x "
          f"{np.median(r[:, 5]):11.4f} {np.median(r[:, 6]):7.2f} "
          f"{np.median(r[:, 4] / r[:, 6]):7.1f}x")
    print(f"worst scenario: sel/oracle {r[:, 0].max():.4f}, sel/cv5 {r[:, 1].max():.4f}, "
          f"speedup {np.min(r[:, 4] / r[:, 3]):.1f}x (whole path: sel/oracle "
          f"{r[:, 5].max():.4f}, speedup {np.min(r[:, 4] / r[:, 6]):.1f}x)")


def part_joint(args):
    print("\nPart 2: joint choice of (alpha, iteration), Lasso "
          "(true risk ratio chosen / best pair, medians over repetitions)")
    print(f"{'scenario':32s} {'chosen/best':>11s} {'alpha chosen/best':>18s} {'t_sel':>7s} "
          f"{'cv5/best':>9s} {'t_cv5':>7s} {'speedup':>8s}")
    ratios, cv_ratios, speedups = [], [], []
    for name, p, s, snr, rho in scenarios(args.n):
        lam = np.sqrt(2 * np.log(p) / args.n)
        alphas = lam * np.geomspace(1.0, 0.03, args.n_alphas)
        base = TrajectoryLasso(solver="fista", max_iter=args.T, random_state=0)
        grid = np.unique(np.geomspace(1, args.T, args.cv_grid).astype(int))
        r, a_ratio, t_sel, r_cv, t_cv = [], [], [], [], []
        for rep in range(args.reps):
            rng = np.random.default_rng(1000 * rep + 11)
            X, y, beta, cov = make_data(args.n, p, s, snr, rho, rng)
            tic = time.perf_counter()
            sel = TrajectoryEarlyStoppingCV(base, param_grid={"alpha": alphas}).fit(X, y)
            t_sel.append(time.perf_counter() - tic)
            best, best_alpha = np.inf, None
            for a in alphas:  # oracle: every path, true risk
                fit = clone(base).set_params(alpha=a, estimate_risk=False).fit(X, y)
                tr = true_risk(fit.coef_path_, fit.intercept_path_, beta, cov)
                if tr.min() < best:
                    best, best_alpha = tr.min(), a
            chosen = true_risk(sel.coef_[:, None], np.atleast_1d(sel.intercept_), beta, cov)[0]
            r.append(chosen / best)
            a_ratio.append(sel.best_params_["alpha"] / best_alpha)
            # 5-fold GridSearchCV over (alpha, max_iter), with its refit
            tic = time.perf_counter()
            gs = GridSearchCV(clone(base).set_params(estimate_risk=False),
                              {"alpha": alphas, "max_iter": grid},
                              cv=KFold(5, shuffle=True, random_state=rep),
                              scoring="neg_mean_squared_error").fit(X, y)
            t_cv.append(time.perf_counter() - tic)
            b = gs.best_estimator_
            r_cv.append(true_risk(b.coef_[:, None], np.atleast_1d(b.intercept_), beta, cov)[0]
                        / best)
        ratios.append(np.median(r))
        cv_ratios.append(np.median(r_cv))
        speedups.append(np.median(t_cv) / np.median(t_sel))
        print(f"{name:32s} {np.median(r):11.4f} {np.median(a_ratio):18.3f} "
              f"{np.median(t_sel):7.2f} {np.median(r_cv):9.4f} {np.median(t_cv):7.2f} "
              f"{speedups[-1]:7.1f}x")
    print(f"{'all (median over scenarios)':32s} {np.median(ratios):11.4f}; "
          f"worst {np.max(ratios):.4f}; 5-fold CV median {np.median(cv_ratios):.4f}, worst "
          f"{np.max(cv_ratios):.4f}; speedup median {np.median(speedups):.1f}x, "
          f"min {np.min(speedups):.1f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--T", type=int, default=100, help="path length (max_iter)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cv-grid", type=int, default=12, help="max_iter values of GridSearchCV")
    ap.add_argument("--n-alphas", type=int, default=6)
    ap.add_argument("--quick", action="store_true", help="n=300, T=60, 2 repetitions")
    ap.add_argument("--part", choices=["both", "iteration", "joint"], default="both")
    args = ap.parse_args()
    if args.quick:
        args.n, args.T, args.reps = 300, 60, 2
    print(f"n={args.n} T={args.T} reps={args.reps}; GridSearchCV: 5 folds x {args.cv_grid} "
          "max_iter values + refit")
    if args.part in ("both", "iteration"):
        part_iteration(args)
    if args.part in ("both", "joint"):
        part_joint(args)


if __name__ == "__main__":
    main()
