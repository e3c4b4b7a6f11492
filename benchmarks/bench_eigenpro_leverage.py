"""EigenPro's risk estimate against the test error, with its leverage spread and flag, per epoch.

Per problem (``--problems``), ``EigenProRegressor(random_state=seed)`` with its
defaults over ``--seeds`` fits; per epoch over the fits: the mean of the
estimate over the test mse, the mean ``risk_leverage_spread_`` and how many
fits flag the epoch (``risk_reliable_``); and at the chosen epochs the same,
with the regret. Problems: ``digits`` (one-hot regression, X / 16, 70/30
splits by the seed; ``EigenProClassifier()`` runs the same fit),
``synthetic:<n>`` (:func:`bench_eigenpro.synthetic`, data seeds) and
``bikeshare`` (its fixed split, EigenPro's seeds).

    python benchmarks/bench_eigenpro_leverage.py --problems digits --seeds 20
    python benchmarks/bench_eigenpro_leverage.py --problems synthetic:5000 bikeshare --seeds 5
"""

import argparse
import os
import sys
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_eigenpro import bikeshare, synthetic  # noqa: E402

from skacv import EigenProRegressor  # noqa: E402


def data(problem, seed):
    if problem == "digits":
        X, y = load_digits(return_X_y=True)
        Xa, Xb, ya, yb = train_test_split(X / 16, y, test_size=0.3, random_state=seed)
        return Xa, np.eye(10)[ya], Xb, np.eye(10)[yb]
    if problem == "bikeshare":
        X, y, Xt, yt = bikeshare()
        return X, y[:, None], Xt, yt[:, None]
    X, y, Xt, yt = synthetic(int(problem.split(":")[1]), seed)
    return X, y[:, None], Xt, yt[:, None]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", nargs="+", default=["digits"])
    ap.add_argument("--seeds", type=int, default=20)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    for problem in args.problems:
        fits = []
        for seed in range(args.seeds):
            X, Y, Xt, Yt = data(problem, seed)
            est = EigenProRegressor(random_state=seed).fit(X, Y)
            test = ((est._decision_path(Xt) - Yt[:, :, None]) ** 2).mean((0, 1))
            fits.append((est.risk_path_ / test, est.risk_leverage_spread_, est.risk_reliable_,
                         est.selected_iter_, test))
        print(f"\n== {problem}: {len(fits)} fits, epochs run "
              f"{sorted(len(f[0]) - 1 for f in fits)}")
        print("epoch  estimate/test  spread  flagged")
        for t in range(1, max(len(f[0]) for f in fits)):
            at = [f for f in fits if len(f[0]) > t]
            flagged = sum(not f[2][t] for f in at)
            print(f"{t:5d}  {np.mean([f[0][t] for f in at]):13.3f}  "
                  f"{np.mean([f[1][t] for f in at]):6.3f}  {flagged}/{len(at)}")
        c = [(f[0][f[3]], f[1][f[3]], not f[2][f[3]], f[4][f[3]] / f[4].min() - 1) for f in fits]
        r, s, flag, regret = map(np.array, zip(*c, strict=True))
        print(f"chosen epochs: estimate/test {r.min():.3f}-{r.max():.3f}, spread "
              f"{s.min():.3f}-{s.max():.3f}, flagged {flag.sum()}/{len(c)}, regret "
              f"{regret.min():.2%}-{regret.max():.2%}")


if __name__ == "__main__":
    main()
