"""EigenPro with its defaults against tuned KernelRidge, Nystroem + Ridge and SVC.

Regression problems (``--problems``):

* ``synthetic``: X uniform on [0, 1]^10, ``y = sin(2 pi x1) cos(pi x2) + 0.5
  x3^2 + N(0, 0.1^2)``, ``n`` training rows (``--sizes``) and 5000 test rows;
* ``bikeshare``: ISLP's Bikeshare (bundled with the package, ``pip install
  --no-deps ISLP``), target ``log(1 + bikers)``, mnth / hr / weathersit
  one-hot and the rest numeric, standardised on the training rows (8645 x
  46), split 70/30 (``random_state=0``).

Per problem, all in the same run:

* ``EigenProRegressor()`` with its defaults (median bandwidth, automatic
  number of components and batch, epochs chosen by the risk estimate):
  fit time, test MSE, the epochs run and chosen; the regret of the chosen
  epoch against the best epoch on the test rows; and the cost of the risk
  estimate: the same number of epochs without it (``estimate_risk=False``)
  against with it (``--repeat`` alternating pairs, the fastest of each).
* ``KernelRidge(kernel="rbf")`` tuned on a grid of bandwidths x alphas on a
  4:1 validation split of (at most 5000 of) the training rows, then fitted on
  all of them **in a subprocess** (at n = 20000 SciPy's solve can crash or run
  out of memory: reported, not fatal). Its fit time is that one fit.
* ``Nystroem(n_components=m) + Ridge`` at the same bandwidth, for m in
  ``--nystroem``; Ridge's alpha tuned for the smallest m on the same
  validation split (not timed) and kept for the others.

Ratios: EigenPro's test MSE to KernelRidge's (to the best peer where
KernelRidge did not finish), EigenPro's fit time to KernelRidge's and to the
fastest Nystroem + Ridge whose test MSE is at most EigenPro's.

Classification: ``EigenProClassifier()`` against ``SVC()`` (both defaults) on
scikit-learn's digits (X / 16, 70/30 split), accuracy and fit time; and the
risk estimate of the one-hot regression against the test error, with its
leverage spread and flag (``risk_leverage_spread_``, ``risk_reliable_``).

    python benchmarks/bench_eigenpro.py                       # everything (n=20000: minutes)
    python benchmarks/bench_eigenpro.py --sizes 5000 --problems synthetic --skip-digits
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.kernel_approximation import Nystroem
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import Ridge
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.svm import SVC

from skacv import EigenProClassifier, EigenProRegressor

BANDWIDTHS = (0.5, 1.0, 1.5, 2.0, 3.0)  # multiples of the median distance
ALPHAS = (1e-8, 1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)


def synthetic(n, seed=0, n_test=5000):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n + n_test, 10))
    y = (np.sin(2 * np.pi * X[:, 0]) * np.cos(np.pi * X[:, 1]) + 0.5 * X[:, 2] ** 2
         + 0.1 * rng.standard_normal(n + n_test))
    return X[:n], y[:n], X[n:], y[n:]


def bikeshare():
    import pandas as pd
    from ISLP import load_data

    df = load_data("Bikeshare")
    y = np.log1p(df["bikers"].to_numpy(dtype=np.float64))
    X = df.drop(columns=["bikers", "casual", "registered"])
    X = pd.get_dummies(X, columns=["mnth", "hr", "weathersit"], drop_first=True,
                       dtype=np.float64).to_numpy(dtype=np.float64)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    mu, sd = Xtr.mean(0), Xtr.std(0)
    sd[sd == 0] = 1.0
    return (Xtr - mu) / sd, ytr, (Xte - mu) / sd, yte


def mse(a, b):
    return float(np.mean((a - b) ** 2))


def median_distance(X, rng):
    idx = rng.choice(X.shape[0], min(X.shape[0], 1000), replace=False)
    Z = X[idx]
    d2 = (Z * Z).sum(1)[:, None] + (Z * Z).sum(1)[None, :] - 2 * Z @ Z.T
    return float(np.sqrt(np.median(np.maximum(d2[np.triu_indices(len(Z), 1)], 0))))


def tune(X, y):
    """(bandwidth, KernelRidge alpha) by a 4:1 validation split of <= 5000 rows."""
    rng = np.random.default_rng(0)
    idx = rng.permutation(X.shape[0])[:5000]
    n_val = len(idx) // 5
    va, tr = idx[:n_val], idx[n_val:]
    med = median_distance(X, rng)
    best = (np.inf, None, None)
    for f in BANDWIDTHS:
        gamma = 0.5 / (f * med) ** 2
        for a in ALPHAS:
            try:
                kr = KernelRidge(alpha=a, kernel="rbf", gamma=gamma).fit(X[tr], y[tr])
            except Exception:  # singular at the smallest alphas
                continue
            err = mse(kr.predict(X[va]), y[va])
            if err < best[0]:
                best = (err, f * med, a)
    return best[1], best[2], (tr, va)


def krr_child(path):
    """Fit KernelRidge on the saved data; write the result as JSON."""
    d = np.load(path)
    tic = time.perf_counter()
    kr = KernelRidge(alpha=float(d["alpha"]), kernel="rbf", gamma=float(d["gamma"]))
    kr.fit(d["X"], d["y"])
    t = time.perf_counter() - tic
    out = {"fit": t, "mse": mse(kr.predict(d["Xt"]), d["yt"])}
    with open(path + ".json", "w") as fh:
        json.dump(out, fh)


def krr_subprocess(X, y, Xt, yt, bw, alpha):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.npz")
        np.savez(path, X=X, y=y, Xt=Xt, yt=yt, alpha=alpha, gamma=0.5 / bw**2)
        proc = subprocess.run([sys.executable, __file__, "--krr-child", path],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no message"])[-1]
            return None, f"failed (exit code {proc.returncode}: {tail[:120]})"
        with open(path + ".json") as fh:
            return json.load(fh), None


def ridge_alpha(X, y, bw, m, split):
    """Ridge's alpha for Nystroem(m) features on the validation split."""
    tr, va = split
    best = (np.inf, None)
    for a in ALPHAS:
        model = make_pipeline(Nystroem(gamma=0.5 / bw**2, n_components=min(m, len(tr)),
                                       random_state=0), Ridge(alpha=a))
        err = mse(model.fit(X[tr], y[tr]).predict(X[va]), y[va])
        if err < best[0]:
            best = (err, a)
    return best[1]


def nystroem_ridge(X, y, Xt, yt, bw, m, alpha):
    """One timed fit of Nystroem(m) + Ridge(alpha)."""
    model = make_pipeline(Nystroem(gamma=0.5 / bw**2, n_components=m, random_state=0),
                          Ridge(alpha=alpha))
    tic = time.perf_counter()
    model.fit(X, y)
    return time.perf_counter() - tic, mse(model.predict(Xt), yt)


def run_problem(name, X, y, Xt, yt, args):
    n = X.shape[0]
    print(f"\n== {name}: n={n} train, {Xt.shape[0]} test, d={X.shape[1]}", flush=True)
    tic = time.perf_counter()
    ep = EigenProRegressor(random_state=0).fit(X, y)
    t_ep = time.perf_counter() - tic
    path = ((ep.predict_path(Xt) - yt[:, None]) ** 2).mean(0)
    e_ep = float(path[ep.selected_iter_])
    print(f"EigenProRegressor()   fit {t_ep:8.2f}s (set-up {ep._setup_time:.2f}s: bandwidth, "
          f"eigensystem, eigenfunctions, probes' injection)  test mse {e_ep:.5f}  bandwidth "
          f"{ep.bandwidth_:.3g}  q={ep.n_components_} batch {ep.batch_size_} "
          f"{ep.precision_}  epochs run {ep.n_iter_}, chosen {ep.selected_iter_} "
          f"(best on test: {int(np.argmin(path))}, regret "
          f"{path[ep.selected_iter_] / path.min() - 1:.2%}); risk estimate at the "
          f"choice {ep.risk_path_[ep.selected_iter_]:.5f} (/ test "
          f"{ep.risk_path_[ep.selected_iter_] / e_ep:.3f}, leverage spread "
          f"{ep.risk_leverage_spread_[ep.selected_iter_]:.3f}, reliable "
          f"{bool(ep.risk_reliable_[ep.selected_iter_])})", flush=True)
    # the cost of the risk estimate: the same epochs with and without it
    times = {}
    for _ in range(args.repeat):  # alternating, the fastest of each
        for risk in (False, True):
            tic = time.perf_counter()
            EigenProRegressor(max_iter=ep.n_iter_, estimate_risk=risk, random_state=0).fit(X, y)
            times.setdefault(risk, []).append(time.perf_counter() - tic)
    t0, t1 = min(times[False]), min(times[True])
    print(f"  {ep.n_iter_} epochs: fit {t0:.2f}s, fit + risk_path_ {t1:.2f}s: ratio "
          f"{t1 / t0:.2f} (fastest of {args.repeat})", flush=True)
    if args.skip_peers:
        return
    bw, alpha, split = tune(X, y)
    res, err = krr_subprocess(X, y, Xt, yt, bw, alpha)
    if res is None:
        print(f"KernelRidge(bandwidth {bw:.3g}, alpha {alpha:g})  {err}")
    else:
        print(f"KernelRidge(bandwidth {bw:.3g}, alpha {alpha:g})  fit {res['fit']:8.2f}s  "
              f"test mse {res['mse']:.5f}", flush=True)
    nys = []
    sizes = [m for m in args.nystroem if m < n]
    a = ridge_alpha(X, y, bw, sizes[0], split) if sizes else None
    for m in sizes:
        t, e = nystroem_ridge(X, y, Xt, yt, bw, m, a)
        nys.append((m, t, e))
        print(f"Nystroem({m}) + Ridge(alpha {a:g})  fit {t:8.2f}s  test mse {e:.5f}",
              flush=True)
    ref = res["mse"] if res is not None else min(e for _, _, e in nys)
    what = "KernelRidge" if res is not None else "the best peer"
    print(f"  EigenPro's test mse / {what}'s: {e_ep / ref:.3f} (goal <= 1.05)")
    if res is not None:
        print(f"  EigenPro's fit time / KernelRidge's: {t_ep / res['fit']:.2f} (goal <= 0.5)")
    equal = [t for _, t, e in nys if e <= e_ep]
    if equal:
        print(f"  EigenPro's fit time / Nystroem + Ridge's at equal error: "
              f"{t_ep / min(equal):.2f} (goal <= 1)")
    else:
        print("  no Nystroem + Ridge reached EigenPro's error")


def digits(args):
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16, y, test_size=0.3, random_state=0)
    print(f"\n== digits: {Xtr.shape[0]} train, {Xte.shape[0]} test", flush=True)
    ts, te = [], []
    for _ in range(3):
        tic = time.perf_counter()
        svc = SVC().fit(Xtr, ytr)
        ts.append(time.perf_counter() - tic)
        tic = time.perf_counter()
        clf = EigenProClassifier(random_state=0).fit(Xtr, ytr)
        te.append(time.perf_counter() - tic)
    a_s, a_e = svc.score(Xte, yte), clf.score(Xte, yte)
    print(f"SVC()                 fit {min(ts):.3f}s  accuracy {a_s:.4f}")
    print(f"EigenProClassifier()  fit {min(te):.3f}s  accuracy {a_e:.4f}  (epochs "
          f"{clf.n_iter_}, chosen {clf.selected_iter_})")
    print(f"  accuracy difference {a_e - a_s:+.4f} (goal >= 0), time ratio "
          f"{min(te) / min(ts):.2f} (goal <= 1)")
    Y, Yte = np.eye(10)[ytr], np.eye(10)[yte]
    reg = EigenProRegressor(random_state=0).fit(Xtr, Y)
    path = ((reg.predict_path(Xte) - Yte[:, :, None]) ** 2).mean((0, 1))
    print("one-hot regression, per epoch: risk estimate / test mse, leverage spread, reliable:")
    for t in range(reg.n_iter_ + 1):
        print(f"  epoch {t:3d}  {reg.risk_path_[t]:.5f} / {path[t]:.5f}  ratio "
              f"{reg.risk_path_[t] / path[t]:.2f}  {reg.risk_leverage_spread_[t]:.3f}  "
              f"{bool(reg.risk_reliable_[t])}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 10000, 20000])
    ap.add_argument("--problems", default="synthetic,bikeshare")
    ap.add_argument("--nystroem", type=int, nargs="+", default=[1000, 2000, 4000])
    ap.add_argument("--skip-digits", action="store_true")
    ap.add_argument("--skip-peers", action="store_true",
                    help="EigenPro alone (its fit, regret and risk/fit): no KernelRidge, Nystroem")
    ap.add_argument("--repeat", type=int, default=2,
                    help="fits with and without the risk estimate, alternating")
    ap.add_argument("--krr-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.krr_child:
        krr_child(args.krr_child)
        return
    problems = args.problems.split(",")
    if "synthetic" in problems:
        for n in args.sizes:
            run_problem("synthetic", *synthetic(n), args)
    if "bikeshare" in problems:
        try:
            data = bikeshare()
        except ImportError:
            print("\n== bikeshare: skipped (pip install --no-deps ISLP)")
        else:
            run_problem("bikeshare", *data, args)
    if not args.skip_digits:
        digits(args)


if __name__ == "__main__":
    main()
