"""EigenPro against plain kernel SGD and against scikit-learn's KernelRidge.

Part 1, same run: epochs and wall time until the training mean squared
error falls below ``--target`` (a fraction of Var(y)), for

* ``EigenProRegressor()`` with its defaults (Nystrom preconditioner, critical
  batch, Ma-Bassily-Belkin step);
* plain kernel SGD, ``EigenProRegressor(n_components=0)``: no
  preconditioner, with its own optimal step for the batch size (Ma, Bassily
  & Belkin 2018), (a) at EigenPro's batch size, where that step saturates at
  about ``2 / lambda_1``, and (b) at its own critical batch ``m* = beta /
  lambda_1 + 1`` (a few rows), where the step is ``m / beta``.

In epochs, (b) is the strongest baseline: with batches below the critical
size the progress per epoch is set by the per-row step ``1 / beta``, and
EigenPro only improves it to ``1 / beta_P``; EigenPro's gain is that it keeps
that per-epoch progress with batches ``lambda_1 / lambda_P`` times larger
(large matrix products instead of thousands of tiny steps).

Both are advanced one epoch at a time (``warm_start``); wall time includes
the set-up (eigendecomposition). Goal: >= 10x fewer epochs.

Part 2: ``KernelRidge(kernel="rbf")`` (exact solve, O(n^3) time, O(n^2)
memory) against ``EigenProRegressor`` on ``--n`` synthetic points: fit time
and test mean squared error. KernelRidge's ``alpha`` is the best of a small
grid on a validation split of (at most 4000 of) the training rows; its time
is that of the one fit on all rows at that alpha.

    python benchmarks/bench_eigenpro.py                  # n = 20000 (KernelRidge ~ minutes, 7 GB)
    python benchmarks/bench_eigenpro.py --n 4000                 # quick
    python benchmarks/bench_eigenpro.py --data synthetic --n-sgd 3000 --skip-part2
"""

import argparse
import time

import numpy as np
from sklearn.kernel_ridge import KernelRidge

from skacv import EigenProRegressor


def make_data(n, d, seed, noise=0.1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.5 * np.cos(X[:, 3:].sum(1))
    return X, y + noise * rng.standard_normal(n)


def epochs_to_target(est, X, y, target, max_epochs):
    """Advance one epoch at a time; (epochs, seconds) when mse <= target."""
    est.set_params(warm_start=True)
    tic = time.perf_counter()
    for e in range(1, max_epochs + 1):
        est.set_params(max_iter=e).fit(X, y)
        if est.train_mse_path_[-1] <= target:
            return e, time.perf_counter() - tic
    return np.inf, time.perf_counter() - tic


def part1(args):
    if args.data == "digits":  # one-hot regression of the 10 classes, X / 16
        from sklearn.datasets import load_digits

        X, labels = load_digits(return_X_y=True)
        X, y = X / 16, np.eye(10)[labels]
        bw, what = np.sqrt(10), "digits (one-hot)"
    else:
        X, y = make_data(args.n_sgd, args.d, 0)
        bw, what = args.bandwidth, f"synthetic d={args.d}"
    target = args.target * y.var(axis=0).mean()
    print(f"== Part 1: {what}, n={X.shape[0]}, Gaussian kernel, bandwidth {bw:.4g}, "
          f"target training mse {target:.4g} ({args.target} Var(y)), budget {args.max_epochs} "
          "epochs")
    ep = EigenProRegressor(bandwidth=bw, random_state=0)
    runs = [("EigenPro (defaults)", ep)]
    res = {}
    e0, t0 = epochs_to_target(ep, X, y, target, args.max_epochs)
    res[runs[0][0]] = (e0, t0)
    m = ep.batch_size_
    runs += [
        (f"plain SGD, same batch {m}",
         EigenProRegressor(bandwidth=bw, n_components=0, batch_size=m, random_state=0)),
        ("plain SGD, its batch m*", EigenProRegressor(bandwidth=bw, n_components=0,
                                                      random_state=0)),
    ]
    for name, est in runs:
        if name not in res:
            res[name] = epochs_to_target(est, X, y, target, args.max_epochs)
        e, t = res[name]
        print(f"{name:26s} q={est.n_components_:4d} batch={est.batch_size_:5d} "
              f"step={est.step_size_:10.4g}  epochs={e:>4}  time={t:7.2f}s  "
              f"(last mse {est.train_mse_path_[-1]:.4g})")
    e0, t0 = res[runs[0][0]]
    for name, _ in runs[1:]:
        e, t = res[name]
        if np.isfinite(e):
            print(f"  {name}: {e / e0:.1f}x the epochs of EigenPro, wall-time ratio "
                  f"{t / t0:.2f}")
        else:
            print(f"  {name}: target not reached in {args.max_epochs} epochs "
                  f"(> {args.max_epochs / e0:.0f}x the epochs of EigenPro), "
                  f"wall-time ratio > {t / t0:.2f}")


def part2(args):
    n_test = 5000
    X, y = make_data(args.n + n_test, args.d, 1)
    Xtr, ytr, Xte, yte = X[: args.n], y[: args.n], X[args.n:], y[args.n:]
    bw = args.bandwidth
    gamma = 0.5 / bw**2
    print(f"\n== Part 2: n={args.n} train, {n_test} test, d={args.d}, Gaussian kernel "
          f"(bandwidth {bw}); noise variance 0.01")
    # alpha of KernelRidge on a validation split of at most 4000 rows (not timed)
    n_sel = min(args.n, 4000)
    n_val = n_sel // 5
    best = None
    for alpha in (1e-4, 1e-3, 1e-2, 1e-1):
        kr = KernelRidge(alpha=alpha, kernel="rbf", gamma=gamma).fit(Xtr[n_val:n_sel],
                                                                     ytr[n_val:n_sel])
        err = np.mean((kr.predict(Xtr[:n_val]) - ytr[:n_val]) ** 2)
        if best is None or err < best[1]:
            best = (alpha, err)
    tic = time.perf_counter()
    kr = KernelRidge(alpha=best[0], kernel="rbf", gamma=gamma).fit(Xtr, ytr)
    t_kr = time.perf_counter() - tic
    tic = time.perf_counter()
    mse_kr = np.mean((kr.predict(Xte) - yte) ** 2)
    p_kr = time.perf_counter() - tic
    print(f"KernelRidge(alpha={best[0]:g})      fit {t_kr:7.2f}s  predict {p_kr:6.2f}s  "
          f"test mse {mse_kr:.5f}")
    for epochs in args.epochs:
        tic = time.perf_counter()
        ep = EigenProRegressor(bandwidth=bw, max_iter=epochs, random_state=0).fit(Xtr, ytr)
        t_ep = time.perf_counter() - tic
        tic = time.perf_counter()
        mse_ep = np.mean((ep.predict(Xte) - yte) ** 2)
        p_ep = time.perf_counter() - tic
        print(f"EigenPro, {epochs:2d} epochs (q={ep.n_components_}, batch {ep.batch_size_}) "
              f"fit {t_ep:7.2f}s  predict {p_ep:6.2f}s  test mse {mse_ep:.5f}  "
              f"time ratio KernelRidge/EigenPro {t_kr / t_ep:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000, help="training size of part 2")
    ap.add_argument("--n-sgd", type=int, default=5000, help="training size of part 1")
    ap.add_argument("--d", type=int, default=8)
    ap.add_argument("--bandwidth", type=float, default=2.0)
    ap.add_argument("--target", type=float, default=0.02, help="fraction of Var(y)")
    ap.add_argument("--max-epochs", type=int, default=100)
    ap.add_argument("--epochs", type=int, nargs="+", default=[2, 10, 30])
    ap.add_argument("--data", choices=["digits", "synthetic"], default="digits",
                    help="data of part 1")
    ap.add_argument("--skip-part1", action="store_true")
    ap.add_argument("--skip-part2", action="store_true")
    args = ap.parse_args()
    if not args.skip_part1:
        part1(args)
    if not args.skip_part2:
        part2(args)


if __name__ == "__main__":
    main()
