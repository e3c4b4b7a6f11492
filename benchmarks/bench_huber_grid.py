"""The Huber literal default against ``GridSearchCV(HuberRegressor)``.

Real designs with gross outliers injected into the training targets (10 %
of the rows moved by 5 standard deviations of ``y``, either sign); the
held-out rows are clean; or synthetic designs ``student<n>x<p>`` (Gaussian
``X`` of ``n`` training and ``n`` test rows, five unit coefficients, Student
t noise with 2 degrees of freedom, no injected outliers; the test targets
are the noiseless signal, so the test MSE is the excess error). For each of
``--splits`` random 70/30 splits (synthetic: draws)
(features standardised on the training rows) it fits
``TrajectoryEarlyStoppingCV(TrajectoryHuberRegressor())`` (the literal
default: it chooses alpha on ``auto_alpha_grid`` since issue #60, and the
iteration), ``GridSearchCV(HuberRegressor(max_iter=1000))`` over 17 alphas
``1e-4 .. 1e4`` (5 folds) and ``HuberRegressor()``, and prints the median
test MSE and MAE of each relative to the grid search's, the alpha chosen
and the fit times. ``--level L`` adds ``L`` to every target, training and
test (a level far from zero in the noise's units: a year, a temperature).

    python benchmarks/bench_huber_grid.py
    python benchmarks/bench_huber_grid.py --designs student300x100 --level 1000
    python benchmarks/bench_huber_grid.py --designs diabetes --splits 10
    python benchmarks/bench_huber_grid.py --designs student300x100,student2000x500,student5000x50
"""

import argparse
import time
import warnings

import bench_real_data as brd
import numpy as np
from sklearn.linear_model import HuberRegressor
from sklearn.model_selection import GridSearchCV, train_test_split

from skacv import TrajectoryEarlyStoppingCV, TrajectoryHuberRegressor


def contaminate(y, rng, fraction=0.1, shift=5.0):
    y = y.copy()
    rows = rng.choice(y.shape[0], int(fraction * y.shape[0]), replace=False)
    y[rows] += rng.choice([-1.0, 1.0], rows.shape[0]) * shift * y.std()
    return y


def student(n, p, seed):
    """``(X_tr, X_te, y_tr, signal_te)``: Gaussian rows, five unit
    coefficients, Student t noise (2 degrees of freedom) on the training
    targets; the test targets noiseless."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((2 * n, p))
    beta = np.zeros(p)
    beta[:5] = 1.0
    y = X @ beta + rng.standard_t(2, 2 * n)
    return X[:n], X[n:], y[:n], X[n:] @ beta


def run(X, y, seed, synthetic=None, level=0.0):
    if synthetic is not None:
        X_tr, X_te, y_tr, y_te = student(*synthetic, seed)
        y_tr, y_te = y_tr + level, y_te + level
    else:
        y = y + level
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, random_state=seed)
        mu, sd = X_tr.mean(0), X_tr.std(0)
        sd[sd == 0] = 1.0
        X_tr, X_te = (X_tr - mu) / sd, (X_te - mu) / sd
        y_tr = contaminate(y_tr, np.random.default_rng(seed))
    models = {
        "skacv": TrajectoryEarlyStoppingCV(TrajectoryHuberRegressor(), random_state=seed),
        "gridcv": GridSearchCV(HuberRegressor(max_iter=1000),
                               {"alpha": np.logspace(-4, 4, 17)}),
        "huber": HuberRegressor(max_iter=1000),
    }
    out = {}
    for name, model in models.items():
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X_tr, y_tr)
        seconds = time.perf_counter() - start
        r = model.predict(X_te) - y_te
        alpha = model.best_params_.get("alpha", np.nan) if name != "huber" else model.alpha
        out[name] = (np.mean(r**2), np.mean(np.abs(r)), seconds, alpha)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", default="diabetes,hitters,boston")
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--level", type=float, default=0.0)
    args = parser.parse_args()
    for name in args.designs.split(","):
        synthetic = None
        if name.startswith("student"):
            synthetic = tuple(int(v) for v in name[len("student"):].split("x"))
            X = np.empty(synthetic)  # (the shape printed)
            y = None
        else:
            try:
                X, y, _ = getattr(brd, f"design_{name}")()
            except brd.MissingDataset as exc:
                print(f"{name}: skipped ({exc})")
                continue
        runs = [run(X, y, seed, synthetic, args.level) for seed in range(args.splits)]
        ref = np.array([[r["gridcv"][0], r["gridcv"][1]] for r in runs])
        line = f"{name:10s} {X.shape[0]}x{X.shape[1]}" if synthetic is None else f"{name:18s}"
        for m in ("skacv", "huber"):
            ratio = np.array([[r[m][0], r[m][1]] for r in runs]) / ref
            line += (f" | {m} MSE {np.median(ratio[:, 0]):.3f} [{ratio[:, 0].min():.2f}-"
                     f"{ratio[:, 0].max():.2f}] MAE {np.median(ratio[:, 1]):.3f}")
        alphas = [r["skacv"][3] for r in runs]
        times = {m: np.median([r[m][2] for r in runs]) for m in ("skacv", "gridcv")}
        line += (f" | alpha skacv {np.median(alphas):.3g} gridcv "
                 f"{np.median([r['gridcv'][3] for r in runs]):.3g} | time skacv "
                 f"{times['skacv']:.2f}s gridcv {times['gridcv']:.2f}s")
        print(line, flush=True)


if __name__ == "__main__":
    main()
