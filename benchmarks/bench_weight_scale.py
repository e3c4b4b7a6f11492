"""The scale of non-integer sample weights and the search's choice.

skacv reads sample weights as frequency weights: the estimates count
``sum(sample_weight)`` samples. This script fits the natural search
``TrajectoryEarlyStoppingCV(TrajectoryLasso(), random_state=0)`` on the same
data and the same relative weights at several scales (summing to the rows,
to ten times the rows, to a "population" of a million, to one) and prints
each scale's test error over the error at the rows' scale, the
measurement behind :class:`~skacv.exceptions.WeightScaleWarning`
(docs/benchmarks.rst)::

    python benchmarks/bench_weight_scale.py --seeds 8
"""

import argparse
import warnings

import numpy as np

from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="training rows (and test rows)")
    parser.add_argument("--p", type=int, default=300, help="features")
    parser.add_argument("--s", type=int, default=20, help="nonzero coefficients")
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args(argv)
    n, p = args.n, args.p
    scales = {"rows": lambda w: w * n / w.sum(), "10 x rows": lambda w: 10 * n * w / w.sum(),
              "1e6": lambda w: 1e6 * w / w.sum(), "one": lambda w: w / w.sum()}
    errors = {name: [] for name in scales}
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((2 * n, p))
        beta = np.zeros(p)
        beta[:args.s] = rng.standard_normal(args.s)
        y = X @ beta + 2.0 * rng.standard_normal(2 * n)
        w = rng.uniform(0.5, 2.0, n)
        for name, scale in scales.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    search = TrajectoryEarlyStoppingCV(TrajectoryLasso(), random_state=0)
                    search.fit(X[:n], y[:n], sample_weight=scale(w))
                    errors[name].append(np.mean((search.predict(X[n:]) - y[n:]) ** 2))
                except ValueError:
                    errors[name].append(np.nan)
    base = np.asarray(errors["rows"])
    print(f"{n} x {p}, {args.s} nonzero, noise 2, weights uniform(0.5, 2) rescaled; "
          f"test mse over the rows' scale, seeds 0-{args.seeds - 1}")
    for name, values in errors.items():
        ratio = np.asarray(values) / base
        shown = " ".join("error" if np.isnan(r) else f"{r:.3f}" for r in ratio)
        median = "error" if np.isnan(ratio).all() else f"{np.nanmedian(ratio):.3f}"
        print(f"  sum = {name:10s} {shown}   median {median}")


if __name__ == "__main__":
    main()
