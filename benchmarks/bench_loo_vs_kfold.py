"""``criterion="loo"`` chosen explicitly against ``criterion="kfold"`` (and
``"risk"`` for reference): time and oracle regret, in the same run.

``TrajectoryEarlyStoppingCV(TrajectoryLasso(alpha, solver, max_iter=T),
criterion=c, random_state=0)`` for ``c`` in loo / kfold / risk, one alpha
(``0.1 * sqrt(log(p) / n)``, as in ``bench_vs_cv.py``), ISTA and FISTA, on the
equicorrelated (``rho = 0.5``) and isotropic (``rho = 0``) designs of
``bench_vs_cv.py`` (its generator and true risk are imported, not copied).

Regret = true risk of the chosen iterate / smallest true risk on the
full-data path (``max_iter`` iterations) - 1. The criteria are timed
interleaved in one process (loo, kfold, risk, then the next repetition in a
rotated order) and the best of ``--repeat`` runs is kept (a criterion whose
run took more than ``--long`` seconds is not run again: at tens of seconds
the host's noise does not matter); every run gives the same choice (fixed
seeds). ``loo/kfold`` is the ratio of the best times.
``t`` are the chosen iterations.

``--subsample K`` adds ``loo-K``: ``criterion="loo"`` on
``TrajectoryLasso(loo_options={"subsample": K})``, the control-variate estimate from K
tracked samples (its relative standard error at the chosen iterate,
``loo_std_error_path_``, in ``se``), timed with the others.

    python benchmarks/bench_loo_vs_kfold.py
    python benchmarks/bench_loo_vs_kfold.py --shapes 500x750 --T 150 --repeat 1
    python benchmarks/bench_loo_vs_kfold.py --shapes 1000x1500 --subsample 50 --no-risk
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso
from skacv.exceptions import SelectionBoundaryWarning, UnreliableEstimateWarning

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_vs_cv import data, true_risk  # noqa: E402

DESIGNS = {"equi": 0.5, "iso": 0.0}


def search(est, column, X, y):
    """One fit of the search of a column (a criterion, or ``loo-K``) and its time."""
    est = clone(est)
    criterion = column
    if column.startswith("loo-"):
        criterion = "loo"
        est.set_params(loo_options={"subsample": int(column[4:])})
    tic = time.perf_counter()
    s = TrajectoryEarlyStoppingCV(est, criterion=criterion, random_state=0).fit(X, y)
    return s, time.perf_counter() - tic


def relative_se(s):
    """Standard error of the subsampled leave-one-out at the chosen iterate,
    relative to the estimate (0 when every sample was tracked)."""
    se = getattr(s.estimator_, "loo_std_error_path_", None)
    if se is None:
        return 0.0
    return float(se[s.best_iteration_] / s.loo_path_[s.best_iteration_])


def run(est, X, y, beta, rho, criteria, repeat, long=10.0):
    base = clone(est).set_params(estimate_risk=False, estimate_loo=False).fit(X, y)
    truth = true_risk(base.coef_path_, base.intercept_path_, beta, rho)
    oracle = truth.min()
    best, fits = {c: np.inf for c in criteria}, {}
    for r in range(repeat):
        k = r % len(criteria)
        for c in criteria[k:] + criteria[:k]:  # interleaved, rotated
            if r and best[c] > long:
                continue
            fits[c], t = search(est, c, X, y)
            best[c] = min(best[c], t)
    regret = {c: truth[s.best_iteration_] / oracle - 1 for c, s in fits.items()}
    return best, regret, fits


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="+", default=["1000x1500", "2000x3000"])
    ap.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    ap.add_argument("--solvers", nargs="+", default=["ista", "fista"])
    ap.add_argument("--T", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--long", type=float, default=10.0,
                    help="a run longer than this (seconds) is not repeated")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0],
                    help="offsets added to the generator's seed n + p")
    ap.add_argument("--no-risk", action="store_true", help="skip criterion='risk'")
    ap.add_argument("--no-full-loo", action="store_true",
                    help="skip criterion='loo' over every sample (e.g. with --subsample)")
    ap.add_argument("--subsample", type=int, nargs="*", default=[],
                    help="also criterion='loo' with loo_options={'subsample': K} "
                         "(column loo-K)")
    args = ap.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    warnings.simplefilter("ignore", SelectionBoundaryWarning)
    warnings.simplefilter("ignore", UnreliableEstimateWarning)
    cols = (([] if args.no_full_loo else ["loo"]) + ["kfold"]
            + ([] if args.no_risk else ["risk"]) + [f"loo-{k}" for k in args.subsample])
    # the ratio column: the first leave-one-out column, else the first other
    first = next((c for c in cols if c.startswith("loo")), cols[-1])
    print(f"{'setting':30s} " + " ".join(f"{c + ' s':>9s}" for c in cols)
          + f" {first + '/kf':>9s} " + " ".join(f"{'reg ' + c:>11s}" for c in cols)
          + "".join(f" {'se ' + c:>9s}" for c in cols if c.startswith("loo-"))
          + " " + " ".join(f"{'t ' + c:>7s}" for c in cols))
    rows = []
    for shape in args.shapes:
        n, p = (int(v) for v in shape.lower().split("x"))
        for design in args.designs:
            for seed in args.seeds:
                X, y, beta, rho = data(n, p, seed=n + p + seed, rho=DESIGNS[design])
                lam = 0.1 * np.sqrt(np.log(p) / n)
                for solver in args.solvers:
                    est = TrajectoryLasso(alpha=lam, solver=solver, max_iter=args.T)
                    t, reg, fits = run(est, X, y, beta, rho, cols, args.repeat, args.long)
                    rows.append({c: (t[c] / t["kfold"], reg[c]) for c in cols})
                    name = f"{solver} {design} {n}x{p}" + (f" s{seed}" if seed else "")
                    print(f"{name:30s} " + " ".join(f"{t[c]:9.2f}" for c in cols)
                          + f" {t[first] / t['kfold']:9.2f} "
                          + " ".join(f"{reg[c]:11.3%}" for c in cols)
                          + "".join(f" {relative_se(fits[c]):9.2%}" for c in cols
                                    if c.startswith("loo-"))
                          + " " + " ".join(f"{fits[c].best_iteration_:7d}" for c in cols),
                          flush=True)
    rk = np.array([r["kfold"][1] for r in rows])
    print(f"{len(rows)} rows; kfold regret median {np.median(rk):.3%} worst {rk.max():.3%}")
    for c in cols:
        if c == "kfold":
            continue
        ratio, rc = np.array([r[c] for r in rows]).T
        print(f"  {c:8s} time / kfold: median {np.median(ratio):.2f} worst {ratio.max():.2f}; "
              f"regret median {np.median(rc):.3%} worst {rc.max():.3%}; no worse than "
              f"kfold in {(rc <= rk + 1e-12).sum()}/{len(rows)} rows")


if __name__ == "__main__":
    main()
