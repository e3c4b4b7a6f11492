"""The joint argmin of ``search="path"``: the default window against the exhaustive search.

``TrajectoryEarlyStoppingCV(TrajectoryLasso(...), param_grid={"alpha": [...]})``
(``search="path"``, the default for alpha grids) returns the argmin of its
criterion over (alpha, iteration), the converged fits included. It scores the
converged fits along the alpha grid, fits the from-zero trajectory at the
converged choice and ``path_neighbors`` (default 1) alphas on each side, and
widens the window towards the best trajectory until that one has
``path_neighbors`` fitted alphas on each side. This script measures what that
window costs and misses. For every design it runs, in the same process and
under the same BLAS thread limit, three calls of the same search
(``random_state=0``):

``default``
    the call as users write it (``path_neighbors=1``, ``n_iter_no_change=10``,
    the alpha path stopped after 3 alphas without a new minimum, at fits of
    df at least half the samples);
``exhaustive``
    every grid alpha's whole trajectory and every converged alpha:
    ``path_neighbors=len(grid)``, ``n_iter_no_change=None``,
    ``path_params={"n_alphas_no_change": None}`` (the reference joint argmin);
``shortcut``
    ``path_neighbors=0``: the converged fits' alpha only, then its iteration
    (the behaviour before the joint argmin).

Per call it prints the chosen alpha (``#index`` in the decreasing grid),
``best_iteration_`` (``None``: the converged fit was selected), ``best_risk_``
(the criterion at the choice; ``criterion_`` says which), the wall-clock fit
time and the test MSE of the chosen model on the held-out half. Per design it
prints the ratios default / exhaustive of ``best_risk_`` (goal <= 1.01) and of
the time, shortcut / exhaustive of ``best_risk_``, and whether *early stopping
beats every converged fit* there: the exhaustive choice is an iterate
(``best_iteration_`` not None) whose ``best_risk_`` is below the best converged
score ``min(cv_results_["path_<criterion_>"])`` (``path_risk`` for the risk
estimate). The summary says PASS when the default is within 1 % of the
exhaustive search on every design run. ``criterion="auto"`` may resolve
differently in the two calls (the exhaustive search runs whole trajectories,
whose late iterates can flag the risk estimate as unreliable and switch it to
K-fold CV): their ``best_risk_`` then measure different things, the design
counts as a miss, and both calls are rerun with each of the two criteria fixed
(printed as a diagnostic).

``--blas-threads`` limits BLAS around every call, but skacv fits the
trajectories of several alphas (``fit_candidates``) with
``os.cpu_count() // n_jobs`` BLAS threads each, whatever the caller's limit;
the header prints that number. Times are wall-clock (``time.perf_counter``)
and move with the load of a shared machine; the three calls of a design run
back to back so that their ratios share it.

Designs (train on one half, test on the other):

``readme``, ``readme_p1500``
    the README example, ``make_regression(n_samples=1000, n_features=800,
    n_informative=80, noise=10.0, random_state=0)`` fitted on ``X[:500]``
    (tested on ``X[500:]``), grid ``{"alpha": [3.0, 1.0, 0.3, 0.1]}``,
    ``TrajectoryLasso(max_iter=200)``; the same with ``n_features=1500,
    n_informative=50``.
Gaussian designs (``n`` train + ``n`` test rows, ``k`` nonzeros at random
positions, noise sd such that ``var(X beta) / sigma^2 = snr``)
    ``equi*``: equicorrelated, ``x = sqrt(1 - rho) z + sqrt(rho) w 1`` with
    ``rho = 0.5``, ``n = 400``, ``p = 600``, ``k = 40`` (``equi``: Gaussian
    nonzeros, snr 2; its variants change the snr, the seed, or the nonzeros:
    ``ones`` all equal to 1, ``rad`` random signs); ``ar1``: AR(1) columns,
    ``corr(x_j, x_l) = 0.9^|j - l|``, ``n = 400``, ``p = 600``, ``k = 40``;
    ``wide_iid`` / ``wide_ar1``: ``p >> n``, ``n = 200``, ``p = 2000``,
    ``k = 20``, independent or AR(1) 0.9 columns; ``wide_iid_k10_snr20`` /
    ``wide_ar1_k10_snr100``: the same with ``k = 10`` at snr 20 / 100,
    where FISTA's paths below the choice are flagged for hundreds of steps
    (``pursued_limit`` in ``skacv/model_selection/_stages.py``).
Real designs (``train_test_split(test_size=0.5, random_state=0)``, then
``PolynomialFeatures(degree, include_bias=False)`` and ``StandardScaler``
fitted on the training half)
    ``diabetes_poly2`` / ``diabetes_poly3``: scikit-learn's ``load_diabetes``
    (442 x 10, 65 / 285 features); ``hitters`` / ``hitters_poly2``: ISLP
    Hitters (NA rows dropped, target log(Salary), League / Division /
    NewLeague one-hot, 263 x 19 / 209 features); ``college`` /
    ``college_poly2``: ISLP College (target Grad.Rate, Private one-hot,
    777 x 17 / 170 features). The ISLP designs need ``pip install --no-deps
    ISLP`` (its data sets only) and are skipped without it.

All but the README designs use the natural 12-alpha grid
``np.geomspace(alpha_max, alpha_max * 1e-3, 12)``, ``alpha_max = max |Xc^T yc| / n``
on the training half, and ``TrajectoryLasso(solver="fista", max_iter=200)``;
the ``*_ista`` rows use ``solver="ista"``. Every design that was tried while
looking for ones where early stopping beats every converged fit is kept in the
list (the ``equi`` variants), whatever the outcome.

    python benchmarks/bench_joint_argmin.py                       # every design (3-8 min)
    python benchmarks/bench_joint_argmin.py --quick               # 4 small designs
    python benchmarks/bench_joint_argmin.py --designs readme,ar1 --blas-threads 2
"""

import argparse
import os
import time
import warnings
from collections import Counter

import numpy as np
import sklearn
from sklearn.datasets import load_diabetes, make_regression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import PolynomialFeatures, StandardScaler
from threadpoolctl import threadpool_info, threadpool_limits

import skacv
from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso
from skacv.utils._parallel import blas_threads_per_worker

GOAL_RISK = 1.01
README_GRID = [3.0, 1.0, 0.3, 0.1]
QUICK = ("readme", "ar1", "diabetes_poly2", "hitters")
CALLS = ("default", "exhaustive", "shortcut")


class MissingDataset(RuntimeError):
    """A design whose data package is not installed."""


# ---------------------------------------------------------------------------
# designs: each returns (X_train, y_train, X_test, y_test, grid, estimator, label)
# ---------------------------------------------------------------------------


def natural_grid(X, y, n_alphas=12):
    """``np.geomspace(alpha_max, alpha_max * 1e-3, n_alphas)`` of the training data."""
    Xc, yc = X - X.mean(axis=0), y - y.mean()
    alpha_max = float(np.max(np.abs(Xc.T @ yc)) / X.shape[0])
    return [float(a) for a in np.geomspace(alpha_max, alpha_max * 1e-3, n_alphas)]


def readme_design(n_features, n_informative):
    """``make_regression`` of the README, train ``X[:500]``, test ``X[500:]``."""
    X, y = make_regression(n_samples=1000, n_features=n_features, n_informative=n_informative,
                           noise=10.0, random_state=0)
    label = (f"make_regression 500+500 x {n_features} (n_informative={n_informative}, "
             "noise=10), README grid, TrajectoryLasso(max_iter=200)")
    return X[:500], y[:500], X[500:], y[500:], README_GRID, TrajectoryLasso(max_iter=200), label


def gaussian_design(n, p, k, kind, snr, seed=0, coef="gauss", rho=None, solver="fista"):
    """``n`` train and ``n`` test rows of a Gaussian design.

    Parameters
    ----------
    n, p, k : int
        Training rows (as many test rows), features, nonzeros.
    kind : {"iid", "equi", "ar1"}
        Independent, equicorrelated (``rho``) or AR(1) (``rho``) columns.
    snr : float
        ``var(X beta) / sigma^2``.
    seed : int
        Seed of ``numpy.random.default_rng``.
    coef : {"gauss", "ones", "rad"}
        The nonzeros: standard Gaussian, all 1, random signs.
    rho : float or None
        Correlation of ``kind``.
    solver : {"fista", "ista"}
    """
    rng = np.random.default_rng(seed)
    m = 2 * n
    if kind == "equi":
        X = np.sqrt(1 - rho) * rng.standard_normal((m, p))
        X += np.sqrt(rho) * rng.standard_normal((m, 1))
    elif kind == "ar1":
        Z = rng.standard_normal((m, p))
        X = np.empty_like(Z)
        X[:, 0] = Z[:, 0]
        for j in range(1, p):
            X[:, j] = rho * X[:, j - 1] + np.sqrt(1 - rho ** 2) * Z[:, j]
    else:
        X = rng.standard_normal((m, p))
    beta = np.zeros(p)
    support = rng.choice(p, k, replace=False)
    if coef == "gauss":
        beta[support] = rng.standard_normal(k)
    elif coef == "ones":
        beta[support] = 1.0
    else:
        beta[support] = rng.choice([-1.0, 1.0], k)
    signal = X @ beta
    y = signal + np.std(signal) / np.sqrt(snr) * rng.standard_normal(m)
    grid = natural_grid(X[:n], y[:n])
    corr = "" if kind == "iid" else f" rho={rho}"
    label = (f"{kind}{corr} Gaussian {n}+{n} x {p}, k={k} {coef} nonzeros, snr={snr}, "
             f"seed={seed}, 12-alpha grid, {solver}")
    est = TrajectoryLasso(solver=solver, max_iter=200)
    return X[:n], y[:n], X[n:], y[n:], grid, est, label


def _islp_frame(name, target, categorical, log_target=False):
    """Float64 ``X`` (``categorical`` one-hot, first level dropped) and ``y`` of ISLP's ``name``."""
    try:
        import pandas as pd
        from ISLP import load_data
    except ImportError as exc:
        raise MissingDataset("ISLP is not installed (pip install --no-deps ISLP)") from exc
    df = load_data(name).dropna()
    y = df[target].to_numpy(dtype=np.float64)
    if log_target:
        y = np.log(y)
    X = pd.get_dummies(df.drop(columns=[target]), columns=list(categorical), drop_first=True,
                       dtype=np.float64)
    return X.to_numpy(dtype=np.float64), y


def real_design(name, degree, solver="fista"):
    """A real design, split 50/50, polynomial features, standardised on the training half."""
    if name == "diabetes":
        X, y = load_diabetes(return_X_y=True)
    elif name == "hitters":
        X, y = _islp_frame("Hitters", "Salary", ["League", "Division", "NewLeague"], True)
    else:
        X, y = _islp_frame("College", "Grad.Rate", ["Private"])
    Xtr, Xte, ytr, yte = train_test_split(X.astype(np.float64), y.astype(np.float64),
                                          test_size=0.5, random_state=0)
    poly = PolynomialFeatures(degree, include_bias=False).fit(Xtr)
    scaler = StandardScaler().fit(poly.transform(Xtr))
    Xtr, Xte = scaler.transform(poly.transform(Xtr)), scaler.transform(poly.transform(Xte))
    label = (f"{name} {len(ytr)}+{len(yte)} x {Xtr.shape[1]} (PolynomialFeatures({degree}), "
             f"standardised), 12-alpha grid, {solver}")
    est = TrajectoryLasso(solver=solver, max_iter=200)
    return Xtr, ytr, Xte, yte, natural_grid(Xtr, ytr), est, label


def _gauss(**kw):
    return lambda: gaussian_design(**kw)


EQUI = {"n": 400, "p": 600, "k": 40, "kind": "equi", "rho": 0.5}
AR1 = {"n": 400, "p": 600, "k": 40, "kind": "ar1", "rho": 0.9, "snr": 2.0}
DESIGNS = {
    "readme": lambda: readme_design(800, 80),
    "readme_p1500": lambda: readme_design(1500, 50),
    "equi": _gauss(**EQUI, snr=2.0),
    "equi_snr1": _gauss(**EQUI, snr=1.0),
    "equi_snr5": _gauss(**EQUI, snr=5.0),
    "equi_snr05": _gauss(**EQUI, snr=0.5),
    "equi_seed1": _gauss(**EQUI, snr=2.0, seed=1),
    "equi_ones": _gauss(**EQUI, snr=2.0, coef="ones"),
    "equi_rad": _gauss(**EQUI, snr=2.0, coef="rad"),
    "equi_rad_snr1": _gauss(**EQUI, snr=1.0, coef="rad"),
    "ar1": _gauss(**AR1),
    "ar1_ista": _gauss(**AR1, solver="ista"),
    "wide_iid": _gauss(n=200, p=2000, k=20, kind="iid", snr=2.0),
    "wide_ar1": _gauss(n=200, p=2000, k=20, kind="ar1", rho=0.9, snr=2.0),
    "wide_iid_k10_snr20": _gauss(n=200, p=2000, k=10, kind="iid", snr=20.0),
    "wide_ar1_k10_snr100": _gauss(n=200, p=2000, k=10, kind="ar1", rho=0.9, snr=100.0),
    "diabetes_poly2": lambda: real_design("diabetes", 2),
    "diabetes_poly3": lambda: real_design("diabetes", 3),
    "diabetes_poly3_ista": lambda: real_design("diabetes", 3, solver="ista"),
    "hitters": lambda: real_design("hitters", 1),
    "hitters_poly2": lambda: real_design("hitters", 2),
    "college": lambda: real_design("college", 1),
    "college_poly2": lambda: real_design("college", 2),
}


# ---------------------------------------------------------------------------
# the three calls
# ---------------------------------------------------------------------------


def call_params(call, n_grid):
    """Keyword arguments of ``TrajectoryEarlyStoppingCV`` for ``call``."""
    if call == "exhaustive":
        return {"path_neighbors": n_grid, "n_iter_no_change": None,
                "path_params": {"n_alphas_no_change": None}}
    if call == "shortcut":
        return {"path_neighbors": 0}
    return {}


def run_call(call, Xtr, ytr, Xte, yte, grid, estimator, criterion="auto"):
    """Fit one call; its choice, time, test MSE and warnings."""
    search = TrajectoryEarlyStoppingCV(estimator, param_grid={"alpha": grid}, random_state=0,
                                       criterion=criterion, **call_params(call, len(grid)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tic = time.perf_counter()
        search.fit(Xtr, ytr)
        fit_time = time.perf_counter() - tic
    alpha = search.best_params_["alpha"]
    crit = search.criterion_
    converged = np.asarray(search.cv_results_[f"path_{crit}"], dtype=np.float64)
    return {
        "alpha": alpha,
        "index": sorted(grid, reverse=True).index(alpha),
        "iteration": search.best_iteration_,
        "risk": float(search.best_risk_),
        "criterion": crit,
        "time": fit_time,
        "test_mse": float(np.mean((yte - search.predict(Xte)) ** 2)),
        "best_converged": float(np.nanmin(converged)),
        "warnings": Counter(type(w.message).__name__ if isinstance(w.message, Warning)
                            else w.category.__name__ for w in caught),
    }


def run_design(name):
    """The three calls on design ``name``; the per-design summary."""
    Xtr, ytr, Xte, yte, grid, estimator, label = DESIGNS[name]()
    print(f"\n[{name}] {label}", flush=True)
    print(f"  {'call':<11}{'alpha':>14}{'iter':>6}{'best_risk_':>13}{'crit':>7}"
          f"{'time s':>9}{'test MSE':>12}  warnings", flush=True)
    res = {}
    for call in CALLS:
        r = res[call] = run_call(call, Xtr, ytr, Xte, yte, grid, estimator)
        warned = ", ".join(f"{k} x{v}" for k, v in sorted(r["warnings"].items())) or "-"
        alpha = f"{r['alpha']:.4g} #{r['index']}"
        print(f"  {call:<11}{alpha:>14}{r['iteration']!s:>6}{r['risk']:>13.6g}"
              f"{r['criterion']:>7}{r['time']:>9.2f}{r['test_mse']:>12.6g}  {warned}",
              flush=True)
    d, e, s = res["default"], res["exhaustive"], res["shortcut"]
    row = {
        "name": name,
        "risk_ratio": d["risk"] / e["risk"],
        "time_ratio": d["time"] / e["time"],
        "shortcut_ratio": s["risk"] / e["risk"],
        "same_criterion": d["criterion"] == e["criterion"],
        "es_wins": e["iteration"] is not None and e["risk"] < e["best_converged"],
        "best_converged": e["best_converged"],
        "exhaustive": e,
    }
    row["ok"] = row["risk_ratio"] <= GOAL_RISK and row["same_criterion"]
    print(f"  default/exhaustive: best_risk_ {row['risk_ratio']:.4f} "
          f"(goal <= {GOAL_RISK}: {'ok' if row['ok'] else 'MISSED'}), time "
          f"{row['time_ratio']:.3f}; shortcut/exhaustive best_risk_ "
          f"{row['shortcut_ratio']:.4f}"
          + ("" if row["same_criterion"] else "; criterion_ differs: not comparable"))
    print(f"  early stopping beats every converged fit: {'yes' if row['es_wins'] else 'no'} "
          f"(exhaustive iteration {e['iteration']}, best_risk_ {e['risk']:.6g}; best converged "
          f"path_{e['criterion']} {row['best_converged']:.6g})", flush=True)
    if not row["same_criterion"]:
        row["fixed"] = fixed_criteria(sorted({d["criterion"], e["criterion"]}),
                                      Xtr, ytr, Xte, yte, grid, estimator)
    return row


def fixed_criteria(criteria, Xtr, ytr, Xte, yte, grid, estimator):
    """Where ``criterion="auto"`` resolved differently in the default and the
    exhaustive call, their ``best_risk_`` are not comparable: both calls again
    with each of those criteria fixed (a diagnostic, not part of the goal)."""
    ratios = {}
    for crit in criteria:
        d, e = (run_call(call, Xtr, ytr, Xte, yte, grid, estimator, crit)
                for call in ("default", "exhaustive"))
        ratios[crit] = d["risk"] / e["risk"]
        print(f"  criterion={crit!r} in both calls: default {d['alpha']:.4g} #{d['index']} "
              f"it {d['iteration']} {d['risk']:.6g} ({d['time']:.2f} s, test MSE "
              f"{d['test_mse']:.6g}); exhaustive {e['alpha']:.4g} #{e['index']} it "
              f"{e['iteration']} {e['risk']:.6g} ({e['time']:.2f} s, test MSE "
              f"{e['test_mse']:.6g}); ratio {ratios[crit]:.4f}", flush=True)
    return ratios


def print_summary(rows, skipped, total):
    """The per-design ratios and PASS / FAIL."""
    print("\nSummary (ratios to the exhaustive search)")
    print(f"  {'design':<21}{'default risk':>13}{'default time':>13}{'shortcut risk':>14}"
          f"{'ES beats conv.':>16}  within 1 %")
    for r in rows:
        print(f"  {r['name']:<21}{r['risk_ratio']:>13.4f}{r['time_ratio']:>13.3f}"
              f"{r['shortcut_ratio']:>14.4f}{'yes' if r['es_wins'] else 'no':>16}  "
              f"{'yes' if r['ok'] else 'NO'}")
    for r in rows:
        if "fixed" in r:
            fixed = ", ".join(f"{c} {v:.4f}" for c, v in r["fixed"].items())
            print(f"  {r['name']}: criterion_ differs between default and exhaustive (not "
                  f"comparable, counted as a miss); with the criterion fixed: {fixed}")
    for name, why in skipped:
        print(f"  {name:<21}skipped: {why}")
    wins = [r["name"] for r in rows if r["es_wins"]]
    print(f"  early stopping beats every converged fit on {len(wins)} of {len(rows)} designs: "
          f"{', '.join(wins) or '-'}")
    if rows:
        worst = max(rows, key=lambda r: r["risk_ratio"])
        times = np.array([r["time_ratio"] for r in rows])
        print(f"  worst default/exhaustive best_risk_ {worst['risk_ratio']:.4f} ({worst['name']});"
              f" time ratio median {np.median(times):.3f}, max {times.max():.3f}")
    passed = bool(rows) and all(r["ok"] for r in rows)
    print(f"{'PASS' if passed else 'FAIL'}: default within 1 % of the exhaustive search's "
          f"best_risk_ on every design ({sum(r['ok'] for r in rows)} of {len(rows)})")
    print(f"total runtime {total:.1f} s")
    return passed


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--designs", default=None,
                        help="comma-separated names (default: all): " + ", ".join(DESIGNS))
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="BLAS threads (threadpoolctl), default 1")
    parser.add_argument("--quick", action="store_true",
                        help="only " + ", ".join(QUICK) + " (unless --designs is given)")
    args = parser.parse_args(argv)
    names = (args.designs.split(",") if args.designs else list(QUICK if args.quick else DESIGNS))
    unknown = [n for n in names if n not in DESIGNS]
    if unknown:
        parser.error(f"unknown designs {unknown}; choose from {', '.join(DESIGNS)}")
    return args, names


def main(argv=None):
    args, names = parse_args(argv)
    tic = time.perf_counter()
    with threadpool_limits(limits=args.blas_threads):
        apis = sorted({f"{i['internal_api']} {i['num_threads']}" for i in threadpool_info()})
        print(f"skacv {skacv.__version__} ({skacv.__file__}), scikit-learn {sklearn.__version__},"
              f" numpy {np.__version__}; threads: {', '.join(apis)}")
        print(f"trajectory fits of several alphas use {blas_threads_per_worker(None)} BLAS "
              f"threads (skacv: os.cpu_count() // n_jobs = {os.cpu_count()} // 1)")
        # one small fit first: imports and first-call costs are not timed in a design
        X, y = make_regression(n_samples=60, n_features=40, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=20),
                                      param_grid={"alpha": [1.0, 0.1]}, random_state=0).fit(X, y)
        rows, skipped = [], []
        for name in names:
            try:
                rows.append(run_design(name))
            except MissingDataset as exc:
                print(f"\n[{name}] skipped: {exc}")
                skipped.append((name, str(exc)))
    passed = print_summary(rows, skipped, time.perf_counter() - tic)
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
