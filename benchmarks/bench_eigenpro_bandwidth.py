"""EigenPro's bandwidth: multiples of the median against tuned KernelRidge, and
what a subsample's exact leave-one-out of kernel ridge would choose.

Problems of ``bench_eigenpro.py`` (issue 64's synthetic problem by data seed,
Bikeshare's split) and digits' 70/30 splits. Parts (``--parts``):

* ``factors``: ``EigenProRegressor(bandwidth=c * median, random_state=0)``, the
  rest default, for ``c`` in ``--factors``: test mse over tuned
  ``KernelRidge``'s (``bench_eigenpro.tune``, fitted in this process up to
  10000 rows), the epochs run (chosen), ``precision_``, the gain ``lambda_1 /
  lambda_P`` (float32 needs ``gain * eps32 <= eigenpro_rounding_tol``) and
  the fit's CPU time; per ``precision`` in ``--precisions`` (float32 against
  float64 as the gain grows);
* ``digits``: ``EigenProClassifier(bandwidth=c * median)`` per split: accuracy,
  epochs, CPU time;
* ``loo``: the closed-form leave-one-out mse of kernel ridge on ``s`` draws
  (``--loo-sizes``; the eigensystem of the float64 kernel matrix per
  bandwidth) over the factors and ridges ``s * 10^-10 .. 10``: the factor and
  ridge of the smallest, and each factor's best over the smallest (``--digits``:
  also digits' one-hot targets, split 0);
* ``frontier``: kernel ridge's test mse on all ``n`` rows over the factors and
  the ridges ``10^-10 .. 10^-2`` (one eigensystem of the ``n x n`` kernel
  matrix per factor), over tuned ``KernelRidge``'s.

    python benchmarks/bench_eigenpro_bandwidth.py --sizes 5000 --seeds 0 1 2 3
    python benchmarks/bench_eigenpro_bandwidth.py --parts loo --sizes 5000 --loo-sizes 1000 2000
"""

import argparse
import itertools
import os
import sys
import time
import warnings

import numpy as np
import scipy.linalg as sl
from sklearn.datasets import load_digits
from sklearn.kernel_ridge import KernelRidge
from sklearn.model_selection import train_test_split

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_eigenpro import bikeshare, mse, synthetic, tune  # noqa: E402

from skacv import EigenProClassifier, EigenProRegressor  # noqa: E402


def median(est, X, y):
    """The default's median bandwidth (its own random stream: no fit needed)."""
    return est(random_state=0, max_iter=1, estimate_risk=False, n_components=0,
               subsample_size=10, batch_size=X.shape[0]).fit(X, y).bandwidth_


def sq_dist(A, B):
    return np.maximum((A * A).sum(1)[:, None] + (B * B).sum(1)[None] - 2 * A @ B.T, 0)


def problems(args, digits=False):
    if digits:  # one-hot targets of split 0
        X, y = load_digits(return_X_y=True)
        Xa, Xb, ya, yb = train_test_split(X / 16, y, test_size=0.3, random_state=0)
        yield "digits one-hot", (Xa, np.eye(10)[ya], Xb, np.eye(10)[yb])
    for n in args.sizes:
        for seed in args.seeds:
            yield f"synthetic {n} seed {seed}", synthetic(n, seed)
    if args.bikeshare:
        yield "bikeshare", bikeshare()


def factors(args):
    for name, (X, y, Xt, yt) in problems(args):
        bw, a, _ = tune(X, y)
        kr = (mse(KernelRidge(alpha=a, kernel="rbf", gamma=0.5 / bw**2).fit(X, y).predict(Xt),
                  yt) if X.shape[0] <= 10000 else np.nan)
        med = median(EigenProRegressor, X, y)
        print(f"== {name}: median {med:.4g}, KernelRidge (bandwidth {bw:.3g}, alpha {a:g}) "
              f"test mse {kr:.5f}", flush=True)
        for c, prec in itertools.product(args.factors, args.precisions):
            tic = time.process_time()
            ep = EigenProRegressor(bandwidth=c * med, precision=prec, random_state=0).fit(X, y)
            t = time.process_time() - tic
            path = ((ep.predict_path(Xt) - yt[:, None]) ** 2).mean(0)
            gain = ep.preconditioner_.eigenvalues_[0] / ep.top_eigenvalue_
            print(f"  c {c:4.2f}  mse {path[ep.selected_iter_]:.5f}, over KR "
                  f"{path[ep.selected_iter_] / kr:.3f} (best epoch "
                  f"{path.min() / kr:.3f})  epochs {ep.n_iter_} ({ep.selected_iter_})  q "
                  f"{ep.n_components_}  {ep.precision_}  gain {gain:.3g}  cpu {t:.2f} s",
                  flush=True)


def digits(args):
    X, y = load_digits(return_X_y=True)
    for split in args.seeds:
        Xa, Xb, ya, yb = train_test_split(X / 16, y, test_size=0.3, random_state=split)
        med = median(EigenProClassifier, Xa, ya)
        out = []
        for c in args.factors:
            tic = time.process_time()
            clf = EigenProClassifier(bandwidth=c * med, random_state=0).fit(Xa, ya)
            t = time.process_time() - tic
            out.append(f"c {c:g}: {clf.score(Xb, yb):.4f} {clf.n_iter_} ep {t * 1e3:.0f} ms")
        print(f"digits split {split}: " + " | ".join(out), flush=True)


def loo(args):
    ridges = 10.0 ** np.arange(-10, 1.5)
    for name, (X, y, *_) in problems(args, args.digits):
        med = median(EigenProRegressor, X, y)
        for s in args.loo_sizes:
            rows = np.random.default_rng(0).choice(X.shape[0], min(s, X.shape[0]), replace=False)
            Z, v = X[rows], y[rows].reshape(len(rows), -1)
            D = sq_dist(Z, Z)
            table = np.empty((len(args.factors), len(ridges)))
            tic = time.process_time()
            for i, c in enumerate(args.factors):
                d, V = sl.eigh(np.exp(-D / (2 * (c * med) ** 2)), check_finite=False,
                               driver="evd")
                Vy, V2 = V.T @ v, V * V
                for j, lam in enumerate(ridges * len(rows)):
                    g = lam / (np.maximum(d, 0) + lam)  # I - H in the eigenbasis
                    table[i, j] = np.mean(((V @ (g[:, None] * Vy)) / (V2 @ g)[:, None]) ** 2)
            t = time.process_time() - tic
            i, j = np.unravel_index(np.argmin(table), table.shape)
            rel = " ".join(f"{b:.3f}" for b in table.min(1) / table.min())
            print(f"{name} s {len(rows)}: factor {args.factors[i]:g}, ridge {ridges[j]:g} s, "
                  f"loo mse {table.min():.4f}; each factor's best / smallest: {rel}  "
                  f"({t:.1f} s cpu)", flush=True)


def frontier(args):
    alphas = 10.0 ** np.arange(-10, -1.5)
    for name, (X, y, Xt, yt) in problems(args):
        bw, a, _ = tune(X, y)
        kr = mse(KernelRidge(alpha=a, kernel="rbf", gamma=0.5 / bw**2).fit(X, y).predict(Xt), yt)
        med = median(EigenProRegressor, X, y)
        D, Dt = sq_dist(X, X), sq_dist(Xt, X)
        print(f"== {name}: kernel ridge's test mse / tuned KernelRidge's, alpha "
              f"{alphas[0]:g} .. {alphas[-1]:g}", flush=True)
        for c in args.factors:
            d, V = sl.eigh(np.exp(-D / (2 * (c * med) ** 2)), check_finite=False, driver="evd")
            KtV, Vy = np.exp(-Dt / (2 * (c * med) ** 2)) @ V, V.T @ y
            errs = [mse(KtV @ (Vy / (np.maximum(d, 0) + al)), yt) / kr for al in alphas]
            print(f"  c {c:4.2f}  " + " ".join(f"{e:.3f}" for e in errs)
                  + f"  best {min(errs):.3f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", nargs="+", default=["factors", "digits"],
                    choices=["factors", "digits", "loo", "frontier"])
    ap.add_argument("--sizes", type=int, nargs="*", default=[5000])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--factors", type=float, nargs="+", default=[1.0, 1.2, 1.3, 1.41, 2.0])
    ap.add_argument("--precisions", nargs="+", default=["auto"],
                    choices=["auto", "float32", "float64"], help="factors: precision of each fit")
    ap.add_argument("--loo-sizes", type=int, nargs="+", default=[500, 1000, 2000])
    ap.add_argument("--bikeshare", action="store_true")
    ap.add_argument("--digits", action="store_true", help="digits' one-hot targets in loo")
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # the leverage flag's warnings
    for part in args.parts:
        globals()[part](args)


if __name__ == "__main__":
    main()
