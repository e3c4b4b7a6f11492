"""K-fold CV along the path on a working set of features, against every feature.

The natural call of ``bench_real_data.py`` (a 12-point alpha grid from
LassoCV's ``alpha_max``, ``TrajectoryEarlyStoppingCV(TrajectoryLasso(
solver="fista", max_iter=200))`` on standardised data) is fitted twice on
each 50/50 split, with the speed policy's ``fold_screening`` on (the
default) and off, in alternating order; the script prints both times, their
ratio and whether the two fits made the same choice (their K-fold paths
agree within the float32 blocks' rounding, so the choice may differ only
where two iterates tie to that rounding). Designs: ISLP's gene-expression
sets (``nci60``, ``khan``; ``pip install --no-deps ISLP``) and synthetic
``ar<n>x<p>`` (AR(1) features, rho 0.9, 10 nonzero coefficients, noise 1)::

    python benchmarks/bench_fold_screening.py --designs nci60,khan,ar64x20000 --splits 3

On ``p >> n`` gene designs with ``n < 100`` the natural call's ``"auto"``
runs K-fold CV; ``--criterion kfold`` makes every design do so.
``--field trajectory_screening`` switches the fit loop's working set
(``skacv.iterations._screening``: the full-data fits) instead of the
folds'; ``"working set in"`` then counts the fits where it was taken::

    python benchmarks/bench_fold_screening.py --field trajectory_screening
"""

import argparse
import time
import warnings

import numpy as np
from bench_real_data import MissingDataset, NaturalLassoSearch, design_khan, design_nci60
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from skacv._policy import policy_context
from skacv._trace import record


def design_ar(n, p, seed=0):
    """AR(1) features (rho 0.9), 10 equal nonzero coefficients, noise 1."""
    rng = np.random.default_rng(seed)
    X = np.empty((n, p))
    X[:, 0] = rng.standard_normal(n)
    e = rng.standard_normal((n, p)) * np.sqrt(1 - 0.81)
    for j in range(1, p):
        X[:, j] = 0.9 * X[:, j - 1] + e[:, j]
    beta = np.zeros(p)
    beta[rng.choice(p, 10, replace=False)] = 1.0
    return X, X @ beta + rng.standard_normal(n), f"ar{n}x{p}"


def load(name):
    if name == "nci60":
        return design_nci60()
    if name == "khan":
        return design_khan()
    if name.startswith("ar") and "x" in name:
        n, p = (int(v) for v in name[2:].split("x"))
        return design_ar(n, p)
    raise ValueError(f"unknown design {name!r}")


def fit(Xtr, ytr, screening, criterion, field="fold_screening"):
    with policy_context(**{field: screening}), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make_pipeline(StandardScaler(), NaturalLassoSearch())
        if criterion != "auto":
            model.set_params(naturallassosearch__criterion=criterion)
        with record() as paths:
            tic = time.perf_counter()
            model.fit(Xtr, ytr)
            elapsed = time.perf_counter() - tic
    return model, elapsed, field in paths


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--designs", default="nci60,khan,ar64x20000")
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--criterion", default="auto", choices=["auto", "kfold"])
    parser.add_argument("--field", default="fold_screening",
                        choices=["fold_screening", "trajectory_screening"],
                        help="the speed policy's switch compared")
    args = parser.parse_args(argv)
    print(f"the natural call, {args.field} off / on, {args.splits} 50/50 splits "
          f"(alternating order), criterion {args.criterion!r}, BLAS on one thread")
    print(f"{'design':14s} {'n x p':>11s} {'off s':>7s} {'on s':>7s} {'off/on':>7s} "
          f"{'same':>5s} {'mse on/off':>10s}  criterion_ (the ratio farthest from 1)")
    for name in args.designs.split(","):
        try:
            X, y, _ = load(name)
        except MissingDataset as exc:
            print(f"{name:14s} skipped: {exc}")
            continue
        off_t, on_t, same, mse, crit, used = [], [], 0, [], set(), 0
        for seed in range(args.splits):
            Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, random_state=seed)
            runs = {}
            for screening in ((False, True) if seed % 2 == 0 else (True, False)):
                runs[screening] = fit(Xtr, ytr, screening, args.criterion, args.field)
            (m_off, t_off, _), (m_on, t_on, took) = runs[False], runs[True]
            off_t.append(t_off)
            on_t.append(t_on)
            used += took
            s_off, s_on = m_off[-1].search_, m_on[-1].search_
            crit.add(s_on.criterion_)
            same += (s_off.best_params_ == s_on.best_params_
                     and s_off.best_iteration_ == s_on.best_iteration_)
            err = [np.mean((m.predict(Xte) - yte) ** 2) for m in (m_on, m_off)]
            mse.append(err[0] / err[1])
        ratio = np.median(np.array(off_t) / np.array(on_t))
        print(f"{name:14s} {X.shape[0] // 2:>5d} x {X.shape[1]:<5d} {np.median(off_t):7.2f} "
              f"{np.median(on_t):7.2f} {ratio:7.2f} {same:>2d}/{args.splits:<2d} "
              f"{max(mse, key=lambda r: abs(r - 1)):10.4f}  "
              f"{','.join(sorted(crit))} (working set in {used}/{args.splits})", flush=True)


if __name__ == "__main__":
    with threadpool_limits(limits=1):
        main()
