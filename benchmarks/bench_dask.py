"""An early-stopped Lasso on a Dask array larger than the workers' memory.

A row-chunked ``n x p`` float64 array is generated lazily, chunk by chunk
from a fixed seed (``map_blocks``: ``X`` standard normal, ``y = X beta +
noise`` with ``p / 10`` nonzero coefficients), on a ``distributed.LocalCluster``
whose workers' memory limit is below the data's size. In the same run:

* skacv ``TrajectoryLasso`` (FISTA, ``risk_path_`` with exact traces): one
  pass over the rows for the sufficient statistics, then the path and the
  risk on ``p x p`` (``skacv.linalg._dask``);
* skacv ``TrajectoryEarlyStoppingCV`` (K-fold CV along the path over a grid
  of ``alpha``): one pass for every fold's statistics;
* dask-ml's ``LinearRegression(penalty="l1", solver="proximal_grad")``
  (dask-glm's proximal gradient with backtracking; several passes over the
  rows per step), at the same objective: ``C = 1 / (2 n alpha)`` makes
  dask-glm's ``||y - X b||^2 + |b|_1 / C`` equal ``2 n`` times the Lasso's
  ``||y - X b||^2 / (2 n) + alpha |b|_1`` (no intercept: dask-glm would
  penalise it).

Printed: time, the objective reached (its gap to a reference optimum, the
Lasso of scikit-learn on the statistics to ``tol=1e-12``), the coefficients'
agreement, each phase's peak worker memory (resident set, sampled) against
the limit, and at equal tolerance:

* dask-glm stops when the relative decrease of its loss ``||y - X b||^2``
  over a step falls below ``--glm-tol`` (or after ``--glm-max-iter``
  steps); the same rule applied to skacv's path gives skacv's stopping
  iterate at that tolerance, and both objectives are printed;
* the first skacv iterate whose objective is at most dask-glm's final one,
  and the time of a skacv fit of that many steps (timed, ``risk_path_``
  off: what reaching dask-glm's objective costs), against dask-glm's time.

The objectives are evaluated exactly from the statistics of one more pass
(not timed).

    python benchmarks/bench_dask.py --gb 3 --p 100 500 --memory-limit 1GB
    python benchmarks/bench_dask.py --gb 0.2 --p 50 --glm-max-iter 10   # a quick look
"""

import argparse
import logging
import os
import threading
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # the workers inherit it: one BLAS thread each

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402
from sklearn.linear_model import Lasso  # noqa: E402

from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso  # noqa: E402
from skacv.linalg import _dask  # noqa: E402


def _block(block_info=None, p=100, seed=0):
    """Rows of ``[X, y]`` of one chunk, from the chunk's own seed."""
    info = block_info[None]
    (start, stop), _ = info["array-location"]
    rng = np.random.default_rng([seed, info["chunk-location"][0]])
    X = rng.standard_normal((stop - start, p))
    beta = np.zeros(p)
    s = max(1, p // 10)
    beta[:s] = np.random.default_rng([seed, 10**9]).standard_normal(s)
    out = np.empty((stop - start, p + 1))
    out[:, :p] = X
    out[:, p] = X @ beta + rng.standard_normal(stop - start)
    return out


def lazy_data(n, p, chunk_rows, seed=0):
    chunks = ((chunk_rows,) * (n // chunk_rows) + ((n % chunk_rows,) if n % chunk_rows else ()),
              (p + 1,))
    Z = da.map_blocks(_block, chunks=chunks, dtype=np.float64, p=p, seed=seed,
                      meta=np.empty((0, 0)))
    return Z[:, :p], Z[:, p]


class PeakMemory:
    """Largest resident set of any worker, sampled in a thread."""

    def __init__(self, client, every=0.25):
        self.client, self.every = client, every

    def __enter__(self):
        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            try:
                rss = self.client.run(_rss)
                self.peak = max(self.peak, *rss.values())
            except Exception:  # a worker restarting: sample again later
                pass
            self._stop.wait(self.every)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _rss():
    import psutil

    return psutil.Process().memory_info().rss


def objective(stats, n, alpha, B, smooth=False):
    """``||y - X b||^2 / (2 n) + alpha |b|_1`` of the columns of ``B``, from
    the raw moments of ``[X, y]`` (no intercept); ``smooth``: the loss
    ``||y - X b||^2`` alone (dask-glm's stopping rule reads it)."""
    W, mean, M = stats["W"][0], stats["mean"][0], stats["M"][0]
    S = M + W * np.outer(mean, mean)  # the raw [X, y]^T [X, y]
    p = S.shape[0] - 1
    B = np.atleast_2d(np.asarray(B, dtype=np.float64).T).T
    XX, Xy, yy = S[:p, :p], S[:p, p], S[p, p]
    quad = yy - 2 * Xy @ B + np.einsum("it,it->t", B, XX @ B)
    if smooth:
        return quad
    return quad / (2 * n) + alpha * np.abs(B).sum(axis=0)


def tolerance_stop(loss, tol):
    """The first iterate ``t >= 1`` where dask-glm's rule stops: the relative
    decrease ``(loss[t-1] - loss[t]) / max(loss[t-1], loss[t])`` below
    ``tol`` (the last iterate if none)."""
    dec = (loss[:-1] - loss[1:]) / np.maximum(loss[:-1], loss[1:])
    hit = np.flatnonzero(dec < tol)
    return int(hit[0]) + 1 if hit.size else len(loss) - 1


def run(client, n, p, chunk_rows, alpha_frac, T, glm_max_iter, glm_tol, limit, gb):
    X, y = lazy_data(n, p, chunk_rows)
    print(f"\n== n={n}, p={p}: {X.nbytes / 2**30:.2f} GiB of X in {X.numblocks[0]} chunks of "
          f"{chunk_rows} rows ({chunk_rows * (p + 1) * 8 / 2**20:.0f} MiB), 2 workers of "
          f"{limit / 2**30:.2f} GiB")
    tic = time.perf_counter()
    stats = _dask.row_statistics(X, y)  # the objective's exact reference (not timed below)
    t_stats = time.perf_counter() - tic
    S = stats["M"][0] + n * np.outer(stats["mean"][0], stats["mean"][0])
    alpha_max = np.max(np.abs(S[:p, p])) / n
    alpha = alpha_frac * alpha_max
    Xc, yc, wc, _ = _dask.compressed_sample(stats, fit_intercept=False)
    ref = Lasso(alpha=alpha, fit_intercept=False, tol=1e-12, max_iter=100000).fit(
        Xc, yc, sample_weight=wc)
    f_star = float(objective(stats, n, alpha, ref.coef_)[0])
    print(f"one pass for the reference statistics: {t_stats:.1f} s; alpha = {alpha_frac} "
          f"alpha_max = {alpha:.4g}; reference objective {f_star:.10g}")
    rows = {}

    with PeakMemory(client) as mem:
        tic = time.perf_counter()
        est = TrajectoryLasso(alpha=alpha, fit_intercept=False, max_iter=T, n_probes=None,
                              random_state=0).fit(X, y)
        t_sk = time.perf_counter() - tic
    f_path = objective(stats, n, alpha, est.coef_path_)
    rows["skacv TrajectoryLasso + risk_path_"] = (t_sk, f_path[-1], est.coef_, mem.peak)
    t_best = int(np.argmin(est.risk_path_))

    with PeakMemory(client) as mem:
        tic = time.perf_counter()
        grid = {"alpha": list(alpha * np.array([4.0, 2.0, 1.0, 0.5, 0.25]))}
        search = TrajectoryEarlyStoppingCV(TrajectoryLasso(fit_intercept=False, max_iter=T),
                                           param_grid=grid).fit(X, y)
        t_cv = time.perf_counter() - tic
    rows[f"skacv TrajectoryEarlyStoppingCV ({len(grid['alpha'])} alphas)"] = (
        t_cv, np.nan, search.coef_, mem.peak)

    glm = None
    try:
        from dask_ml.linear_model import LinearRegression
    except ImportError as exc:  # pragma: no cover - the baseline is optional
        print(f"dask-ml is not importable ({exc}); no baseline")
    else:
        with PeakMemory(client) as mem:
            tic = time.perf_counter()
            glm = LinearRegression(penalty="l1", C=1.0 / (2 * n * alpha),
                                   solver="proximal_grad", fit_intercept=False,
                                   max_iter=glm_max_iter, tol=glm_tol).fit(X, y)
            t_glm = time.perf_counter() - tic
        f_glm = float(objective(stats, n, alpha, glm.coef_)[0])
        rows[f"dask-ml LinearRegression l1 (dask-glm, {glm_max_iter} steps)"] = (
            t_glm, f_glm, glm.coef_, mem.peak)

    print(f"{'method':52s} {'time s':>8s} {'objective - ref':>16s} {'peak worker':>12s}")
    for name, (t, f, _, peak) in rows.items():
        gap = "" if not np.isfinite(f) else f"{f - f_star:16.3e}"
        print(f"{name:52s} {t:8.1f} {gap:>16s} {peak / 2**30:9.2f} GiB"
              f"{'  OVER LIMIT' if peak > limit else ''}")
    print(f"skacv: risk_path_ selects iteration {t_best} (estimated risk "
          f"{est.risk_path_[t_best]:.4g}); the search selects alpha="
          f"{search.best_params_['alpha']:.4g} at iteration {search.best_iteration_} "
          f"(criterion_={search.criterion_!r}, best_risk_ {search.best_risk_:.4g})")
    scale = np.linalg.norm(ref.coef_)
    print(f"||coef_skacv(T) - coef_ref|| / ||coef_ref|| = "
          f"{np.linalg.norm(est.coef_ - ref.coef_) / scale:.2e}")
    if glm is not None:
        reach = np.flatnonzero(f_path <= f_glm)
        first = int(reach[0]) if reach.size else None
        print(f"||coef_glm - coef_ref|| / ||coef_ref|| = "
              f"{np.linalg.norm(glm.coef_ - ref.coef_) / scale:.2e}; "
              f"||coef_skacv(T) - coef_glm|| / ||coef_glm|| = "
              f"{np.linalg.norm(est.coef_ - glm.coef_) / np.linalg.norm(glm.coef_):.2e}")
        t_tol = tolerance_stop(objective(stats, n, alpha, est.coef_path_, smooth=True),
                               glm_tol)
        print(f"equal tolerance (relative loss decrease < {glm_tol:g}): skacv stops at "
              f"iteration {t_tol}, objective - ref {f_path[t_tol] - f_star:.3e}; dask-glm "
              f"(at most {glm_max_iter} steps) {f_glm - f_star:.3e}")
        if first is None:
            print(f"skacv's {T} iterates stay above dask-glm's objective; time ratio "
                  f"dask-glm / skacv (its whole fit, risk_path_ included): {t_glm / t_sk:.1f}x")
        else:
            tic = time.perf_counter()
            TrajectoryLasso(alpha=alpha, fit_intercept=False, max_iter=max(first, 1),
                            estimate_risk=False).fit(X, y)
            t_reach = time.perf_counter() - tic
            print(f"skacv reaches dask-glm's objective at iteration {first}: a fit of "
                  f"{max(first, 1)} steps takes {t_reach:.1f} s (dask-glm {t_glm:.1f} s): "
                  f"{t_glm / t_reach:.1f}x; with {T} steps and risk_path_ {t_sk:.1f} s: "
                  f"{t_glm / t_sk:.1f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=3.0, help="size of X in GiB (float64)")
    ap.add_argument("--p", type=int, nargs="+", default=[100, 500])
    ap.add_argument("--chunk-mib", type=float, default=64.0)
    ap.add_argument("--memory-limit", default="1GB", help="per worker")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--T", type=int, default=200, help="skacv's path length")
    ap.add_argument("--alpha-frac", type=float, default=0.05, help="alpha / alpha_max")
    ap.add_argument("--glm-max-iter", type=int, default=30)
    ap.add_argument("--glm-tol", type=float, default=1e-8)
    args = ap.parse_args()
    # dask-glm resubmits keys with other task specs at every step; the
    # scheduler's warning about it would bury the output
    logging.getLogger("distributed.scheduler").setLevel(logging.ERROR)
    with LocalCluster(n_workers=args.workers, threads_per_worker=1,
                      memory_limit=args.memory_limit, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        limit = min(w["memory_limit"] for w in client.scheduler_info()["workers"].values())
        print(f"dask {dask.__version__}; LocalCluster: {args.workers} worker processes, "
              f"1 thread each, memory_limit={args.memory_limit}; os.cpu_count()={os.cpu_count()}"
              f", load average {os.getloadavg()[0]:.1f} (a shared machine)")
        for p in args.p:
            n = int(args.gb * 2**30 / (8 * p))
            chunk_rows = max(1, int(args.chunk_mib * 2**20 / (8 * (p + 1))))
            run(client, n, p, chunk_rows, args.alpha_frac, args.T, args.glm_max_iter,
                args.glm_tol, limit, args.gb)


if __name__ == "__main__":
    main()
