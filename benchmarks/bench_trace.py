"""The cost of skacv's record of paths taken (:mod:`skacv._trace`) when
nothing records, in the same run.

Part 1 times ``taken(name, k=...)`` outside any record against a function of
the same signature that does nothing (the best of 7 interleaved runs of
``--calls`` calls each): the cost of the context-variable lookup. Part 2
fits a few estimators (the best of 5 runs each, nothing recording), counts
the events one fit takes (one more fit, recorded) and prints their cost
(events times the cost of a call) as a share of the fit's time: the
overhead of the branch points on that fit.

    python benchmarks/bench_trace.py
    python benchmarks/bench_trace.py --calls 2000000
"""

import argparse
import time
import warnings

import numpy as np

from skacv import IterativeRidge, TrajectoryEarlyStoppingCV, TrajectoryLasso
from skacv._trace import record, taken


def noop(name, /, **details):
    return None


def per_call(function, calls):
    tic = time.perf_counter()
    for k in range(calls):
        function("event", k=k)
    return (time.perf_counter() - tic) / calls


def best_time(fit, repeats=5):
    times = []
    for _ in range(repeats):
        tic = time.perf_counter()
        fit()
        times.append(time.perf_counter() - tic)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    args = parser.parse_args()
    best = {"taken": np.inf, "noop": np.inf}
    for _ in range(7):
        for name, function in (("taken", taken), ("noop", noop)):
            best[name] = min(best[name], per_call(function, args.calls))
    cost = best["taken"]
    print(f"taken() outside a record: {1e9 * cost:.0f} ns a call; an empty function of "
          f"the same signature: {1e9 * best['noop']:.0f} ns (ratio "
          f"{best['taken'] / best['noop']:.2f})")

    rng = np.random.default_rng(0)
    cases = {}
    for n, p in ((200, 50), (500, 1000), (2000, 200)):
        X = rng.standard_normal((n, p)) + 0.3 * rng.standard_normal((n, 1))
        y = X[:, :10] @ np.ones(10) + rng.standard_normal(n)
        cases[f"TrajectoryLasso FISTA {n}x{p}, 200 steps"] = (
            lambda X=X, y=y: TrajectoryLasso(alpha=0.05, max_iter=200, random_state=0).fit(X, y))
        cases[f"IterativeRidge GD {n}x{p}, 200 steps"] = (
            lambda X=X, y=y: IterativeRidge(alpha=1.0, max_iter=200, random_state=0).fit(X, y))
    X = rng.standard_normal((300, 100))
    y = X[:, :5] @ np.ones(5) + rng.standard_normal(300)
    cases["TrajectoryEarlyStoppingCV (kfold) 300x100"] = (
        lambda: TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=100), search="grid",
                                          criterion="kfold", random_state=0).fit(X, y))
    print(f"{'fit':55s} {'seconds':>8s} {'events':>7s} {'overhead':>9s}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fit in cases.items():
            seconds = best_time(fit)
            with record() as paths:
                fit()
            print(f"{name:55s} {seconds:8.4f} {len(paths):7d} "
                  f"{100 * len(paths) * cost / seconds:8.3f}%")


if __name__ == "__main__":
    main()
