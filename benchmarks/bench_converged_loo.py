"""The converged fit's leave-one-out (``criterion="loo"`` along alpha)
against brute-force refits and the trajectory's ``loo_path_``.

For each design (Gaussian rows, isotropic or AR(1) rho 0.9 columns; y from
the first 10 columns plus N(0, 1) noise; with and without integer weights
1-3) and alpha: exact leave-one-out by scikit-learn's ``Lasso(tol=1e-12)``
refitted without each sample (one unit of weight removed), the path's
``loo`` (:func:`skacv.risk_alpha_path`, default ``tol``), the trajectory's
``loo_path_`` (IACV) at ``--steps`` FISTA steps, and how many refits kept
the full fit's support and signs (where the leverage formula on the
support alone is exact). Then the time of ``risk_alpha_path(criterion=
"loo")`` on its 30-alpha grid.

With ``--timing``, the time (CPU, one BLAS thread) of ``risk_alpha_path(
criterion="loo")`` on 15 alphas with the speed policy's batched rounds
(``loo_batch_rounds``), without them (each moved sample solved alone), and
with the samples the rounds leave solved by feature-sign steps, not from
their left-out Lasso's exact path (``loo_homotopy_min_aspect=None``),
beside ``LassoCV(cv=5)`` in the same run, their ratios, and the largest
relative difference of the leave-one-out paths::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_converged_loo.py   # ~2 min
    python benchmarks/bench_converged_loo.py --timing --sizes iso:5000x200 ar:2000x300 iso:100x1000
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.linear_model import Lasso, LassoCV
from threadpoolctl import threadpool_limits

from skacv import TrajectoryLasso, risk_alpha_path
from skacv._policy import policy_context
from skacv._trace import record


def design(n, p, kind, seed=1):
    r = np.random.default_rng(seed)
    X = r.standard_normal((n, p))
    if kind == "ar":
        for j in range(1, p):
            X[:, j] = 0.9 * X[:, j - 1] + np.sqrt(1 - 0.81) * X[:, j]
    b = np.zeros(p)
    b[:10] = 1.0
    return X, X @ b + r.standard_normal(n)


def brute(X, y, alpha, sw):
    n = X.shape[0]
    w = np.ones(n) if sw is None else sw
    full = Lasso(alpha=alpha, tol=1e-12, max_iter=10**6).fit(X, y, sample_weight=sw)
    res, kept = np.empty(n), 0
    for i in range(n):
        wi = w.copy()
        wi[i] = max(wi[i] - 1.0, 0.0)
        k = wi > 0
        fit = Lasso(alpha=alpha, tol=1e-12, max_iter=10**6).fit(X[k], y[k], sample_weight=wi[k])
        res[i] = y[i] - fit.predict(X[i:i + 1])[0]
        kept += np.array_equal(np.sign(fit.coef_), np.sign(full.coef_))
    return float(w @ res**2 / w.sum()), kept


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--timing", action="store_true",
                    help="time the batched rounds against one-by-one solves and LassoCV")
    ap.add_argument("--sizes", nargs="+", default=["iso:5000x200", "ar:2000x300",
                                                    "iso:100x1000"],
                    help="kind:NxP designs of --timing (kind: iso or ar)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    if args.timing:
        with threadpool_limits(1):
            timing(args.sizes)
        return
    print("design        w   alpha   exact     path loo  (rel)      loo_path_ (rel)    kept")
    for kind, n, p in [("iso", 150, 100), ("ar", 80, 200), ("iso", 80, 200), ("ar", 200, 50)]:
        X, y = design(n, p, kind)
        for weighted in (False, True):
            sw = np.random.default_rng(5).integers(1, 4, n).astype(float) if weighted else None
            for a in (0.1, 0.03):
                ex, kept = brute(X, y, a, sw)
                pl = risk_alpha_path(TrajectoryLasso(), X, y, alphas=[a], criterion="loo",
                                     sample_weight=sw).loo[0]
                traj = TrajectoryLasso(alpha=a, max_iter=args.steps, estimate_loo=True,
                                       estimate_risk=False).fit(X, y, sample_weight=sw)
                lp = traj.loo_path_[-1]
                print(f"{kind} {n}x{p:<4} {'w' if weighted else '-'}  {a:<6}  {ex:.5f}  "
                      f"{pl:.5f}  ({pl / ex - 1:+.2%})  {lp:.5f}  ({lp / ex - 1:+.2%})  "
                      f"{kept}/{n}", flush=True)
        tic = time.perf_counter()
        risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=30, criterion="loo")
        print(f"{kind} {n}x{p}: risk_alpha_path(criterion='loo'), 30 alphas: "
              f"{time.perf_counter() - tic:.2f} s", flush=True)


def timing(sizes):
    """``--timing``: see the module docstring."""
    print("design           LassoCV   rounds  (x LassoCV)  alone  (x LassoCV)  "
          "alone/rounds   steps  steps/rounds  moved  solved alone  max rel diff")
    configs = (("rounds", {}), ("alone", {"loo_batch_rounds": 0}),
               ("steps", {"loo_homotopy_min_aspect": None}))
    for size in sizes:
        kind, shape = size.split(":")
        n, p = map(int, shape.split("x"))
        X, y = design(n, p, kind)
        tic = time.process_time()
        LassoCV(cv=5).fit(X, y)
        t_cv = time.process_time() - tic
        out = {}
        for name, changes in configs:
            with record() as paths, policy_context(**changes):
                tic = time.process_time()
                path = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=15, criterion="loo")
                out[name] = (time.process_time() - tic, path.loo,
                             paths.details("lasso_loo"))
        (t_r, loo_r, d_r), (t_a, loo_a, _), (t_s, loo_s, _) = (out[c] for c, _ in configs)
        diff = np.nan
        for other in (loo_a, loo_s):
            both = np.isfinite(loo_r) & np.isfinite(other)
            if both.any():
                diff = np.nanmax([diff, float(np.max(np.abs(loo_r[both] / other[both] - 1)))])
        print(f"{kind} {n}x{p:<8} {t_cv:7.2f}  {t_r:7.2f}  ({t_r / t_cv:7.1f})  {t_a:6.2f}  "
              f"({t_a / t_cv:7.1f})  {t_a / t_r:12.2f}  {t_s:6.2f}  {t_s / t_r:12.2f}  "
              f"{sum(d['moved'] for d in d_r):5d}  "
              f"{sum(d['refits'] for d in d_r):12d}  {diff:.1e}", flush=True)


if __name__ == "__main__":
    main()
