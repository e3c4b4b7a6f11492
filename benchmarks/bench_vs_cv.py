"""TrajectoryEarlyStoppingCV defaults against K-fold CV along the path and
GridSearchCV over max_iter: time and oracle regret, in the same run.

Equicorrelated Gaussian designs (rho = 0.5, one common factor per row),
``s = min(n / 10, p / 5)`` nonzero coefficients, sigma = 1; the true risk of an iterate
``(b, b0)`` is ``(b - beta)^T Sigma (b - beta) + b0^2 + sigma^2``. For each
size and estimator:

(a) ``TrajectoryEarlyStoppingCV(estimator, param_grid={"alpha": [alpha]})``
    with every other default (criterion, n_probes "auto"; early stopping of
    the path on its estimate; a path whose estimate still falls at
    ``max_iter`` grows past it, up to 10 times: ``T`` is where it stopped);
(b) 5-fold CV along the path, written here: each fold fitted once to
    ``T`` with the estimates off, every stored iterate scored on the
    held-out fold, the argmin of the mean fold error; then one full fit
    (its path is the one whose iterate is selected);
(c) 5-fold ``GridSearchCV`` over 6 values of ``max_iter`` up to ``T`` (and its refit);
(d) ``TrajectoryEarlyStoppingCV(estimator, criterion="kfold",
    n_iter_no_change=None)``: K-fold CV along the path run by skacv (the
    folds as one block) over the same ``T`` steps (its own stopping would
    grow a path still falling at ``T`` past it), the non-default refit
    criterion that (a) is compared with.

The columns print ``criterion_`` of (a) (``risk`` or ``loo``: no refit; a
K-fold fallback is flagged by a warning), the times, the ratios (a)/(d),
(b)/(a) and (c)/(a), the regrets of (a), (b), (c), (d), ``T`` and the true
risk of (a)'s choice (the regrets are over a path of ``T`` steps, which
differs between versions of the search; the risk does not).

Regret = true risk of the choice / smallest true risk on the full-data path
of the same estimator (``T`` steps) - 1 (for (c), the refit at the chosen
max_iter; for a search that selects the converged fit, that fit's: it can be
negative).
Each of (a), (b), (c), (d) that takes less than a second is timed up to three
times and its best time kept (the host's noise is of the order of those
times); longer ones once. A summary line gives the median and worst regrets
of (a) and (d) over the rows.

    python benchmarks/bench_vs_cv.py --quick
    python benchmarks/bench_vs_cv.py --sizes 200 1000 5000 10000
    python benchmarks/bench_vs_cv.py --sizes 10000 --ratios 1.5 --skip-grid
    python benchmarks/bench_vs_cv.py --shapes 20000x8 50000x20 20000x50   # n >> p
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold

from skacv import IterativeRidge, TrajectoryEarlyStoppingCV, TrajectoryLasso
from skacv.exceptions import SelectionBoundaryWarning, UnreliableEstimateWarning


def data(n, p, seed, rho=0.5):
    rng = np.random.default_rng(seed)
    X = np.sqrt(1 - rho) * rng.standard_normal((n, p)) + np.sqrt(rho) * rng.standard_normal((n, 1))
    beta = np.zeros(p)
    s = max(1, min(n // 10, p // 5))
    beta[:s] = rng.standard_normal(s) / np.sqrt(s) * 2.0
    y = X @ beta + rng.standard_normal(n)
    return X, y, beta, rho


def true_risk(coef_path, intercept_path, beta, rho):
    H = coef_path - beta[:, None]
    # Sigma = (1 - rho) I + rho 1 1^T
    quad = (1 - rho) * (H**2).sum(0) + rho * H.sum(0) ** 2
    return quad + intercept_path**2 + 1.0


def cv_along_path(est, X, y, k=5):
    """(b): each fold fitted once; every iterate scored on its held-out fold."""
    err = 0.0
    for tr, te in KFold(k, shuffle=True, random_state=0).split(X):
        f = clone(est).fit(X[tr], y[tr])
        err = err + ((y[te, None] - f.predict_path(X[te])) ** 2).mean(axis=0)
    t = int(np.argmin(err))
    full = clone(est).fit(X, y)
    return full, t


#: a computation that takes less than this (seconds) is timed up to
#: REPEAT times and its best time kept (milliseconds on a noisy host)
SHORT = 1.0
REPEAT = 3


def timed(fn):
    """``(result, seconds)``: the best of up to REPEAT runs while a run takes
    less than SHORT seconds (every run gives the same result)."""
    times = []
    while True:
        tic = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - tic)
        if len(times) >= REPEAT or times[-1] >= SHORT:
            return result, min(times)


def regret(t, truth):
    """Relative excess true risk of iterate ``t`` over the path's best."""
    return truth[t] / truth.min() - 1


def search_regret(search, truth, beta, rho):
    """The search's selected model (an iterate or the converged fit, whose
    ``best_iteration_`` is None) against the same path's best iterate."""
    risk = true_risk(search.coef_[:, None], np.atleast_1d(search.intercept_), beta, rho)
    return float(risk[0]) / truth.min() - 1


def run(name, est, X, y, beta, rho, grid_search=True):
    out = {}
    # the penalty stays the estimator's (one grid value): the search chooses the
    # iteration (or the converged fit); a path still falling at max_iter grows on
    fixed = {"alpha": [est.alpha]}
    search, out["a"] = timed(
        lambda: TrajectoryEarlyStoppingCV(clone(est), param_grid=fixed,
                                          random_state=0).fit(X, y))
    # (b), (c), (d) and the oracle see the path as far as (a) grew it
    horizon = max(est.max_iter, search.estimator_.n_iter_)
    est = clone(est).set_params(max_iter=horizon)
    base = clone(est).set_params(estimate_risk=False, estimate_loo=False)
    (full, t_b), out["b"] = timed(lambda: cv_along_path(base, X, y))
    truth = true_risk(full.coef_path_, full.intercept_path_, beta, rho)
    reg_a, reg_b = search_regret(search, truth, beta, rho), regret(t_b, truth)
    kfold, out["d"] = timed(
        lambda: TrajectoryEarlyStoppingCV(clone(est), criterion="kfold", param_grid=fixed,
                                          n_iter_no_change=None, random_state=0).fit(X, y))
    reg_d = search_regret(kfold, truth, beta, rho)
    risk_a = truth.min() * (1 + reg_a)  # comparable across runs whose T differ
    if not grid_search:
        return (out | {"c": np.nan}, (reg_a, reg_b, np.nan, reg_d), search.criterion_, horizon,
                risk_a)
    grid = sorted({max(1, int(round(horizon * f)))
                   for f in (1 / 6, 2 / 6, 3 / 6, 4 / 6, 5 / 6, 1)})
    gs, out["c"] = timed(lambda: GridSearchCV(base, {"max_iter": grid}, cv=5,
                                              scoring="neg_mean_squared_error").fit(X, y))
    reg_c = regret(gs.best_params_["max_iter"], truth)
    return out, (reg_a, reg_b, reg_c, reg_d), search.criterion_, horizon, risk_a


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 500, 1000, 2000])
    ap.add_argument("--ratios", type=float, nargs="+", default=[0.5, 1.5])
    ap.add_argument("--shapes", nargs="+", default=None,
                    help="n x p shapes instead of sizes and ratios, e.g. 20000x8")
    ap.add_argument("--T", type=int, default=150)
    ap.add_argument("--quick", action="store_true", help="sizes 200 500, T 100")
    ap.add_argument("--skip-grid", action="store_true",
                    help="skip (c), GridSearchCV (about 10x (a); for the largest sizes)")
    ap.add_argument("--estimators", nargs="+", default=["lasso fista", "lasso ista", "ridge gd"])
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.T = [200, 500], 100
    warnings.simplefilter("ignore", ConvergenceWarning)
    warnings.simplefilter("ignore", SelectionBoundaryWarning)  # a choice at max_iter
    print(f"{'setting':34s} {'crit':4s} {'(a) s':>7s} {'(b) s':>7s} {'(c) s':>7s} "
          f"{'(d) s':>7s} {'a/d':>5s} {'b/a':>6s} {'c/a':>6s} {'regret a':>9s} {'b':>7s} "
          f"{'c':>7s} {'d':>7s} {'T':>5s} {'risk a':>7s}")
    regrets = []
    shapes = [(n, int(round(r * n))) for n in args.sizes for r in args.ratios]
    if args.shapes:
        shapes = [tuple(int(v) for v in shape.lower().split("x")) for shape in args.shapes]
    for n, p in shapes:
        X, y, beta, rho = data(n, p, seed=n + p)
        lam = 0.1 * np.sqrt(np.log(p) / n)
        for name, est in [
            ("lasso fista", TrajectoryLasso(alpha=lam, max_iter=args.T)),
            ("lasso ista", TrajectoryLasso(alpha=lam, solver="ista", max_iter=args.T)),
            ("ridge gd", IterativeRidge(alpha=1e-3, max_iter=args.T)),
        ]:
            if name not in args.estimators:
                continue
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", UnreliableEstimateWarning)
                t, reg, crit, horizon, risk_a = run(name, est, X, y, beta, rho,
                                                    not args.skip_grid)
            fallback = any("instead of the risk estimate" in str(w.message) for w in caught)
            regrets.append((reg[0], reg[3]))
            print(f"{name:12s} n={n:<6d} p={p:<6d}      {crit:4s} {t['a']:7.2f} "
                  f"{t['b']:7.2f} {t['c']:7.2f} {t['d']:7.2f} {t['a'] / t['d']:5.2f} "
                  f"{t['b'] / t['a']:6.2f} {t['c'] / t['a']:6.2f} {reg[0]:9.2%} "
                  f"{reg[1]:7.2%} {reg[2]:7.2%} {reg[3]:7.2%} {horizon:5d} {risk_a:7.4f}"
                  + ("  (K-fold fallback)" if fallback else ""), flush=True)
    a, d = np.array(regrets).T
    print(f"regret over {len(a)} rows: (a) median {np.nanmedian(a):.2%} worst "
          f"{np.nanmax(a):.2%}; (d) median {np.nanmedian(d):.2%} worst {np.nanmax(d):.2%}")


if __name__ == "__main__":
    main()
