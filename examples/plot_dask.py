"""
An early-stopped Lasso on a Dask array
======================================

When the rows of ``X`` live in a Dask array (chunked by rows, possibly larger
than one machine's memory), ``fit`` reads them once: one pass over the
chunks computes the weighted means and the Gram matrix of ``[X, y]`` (per
held-out fold for K-fold CV), and the path, ``risk_path_`` and the search
run on ``p x p`` in memory; ``loo_path_`` tracks a subsample of rows fetched
in the same pass. The results equal those of a fit on the same rows in
memory. Predictions on a Dask array stay lazy and ``score`` is reduced over
the chunks.

The array here is generated lazily, chunk by chunk from a fixed seed, with
independent standard normal features: the true out-of-sample risk of every
iterate is then ``||b_t - beta||^2 + sigma^2``. The threaded scheduler runs
the pass; under a ``distributed.Client`` the same code runs on the cluster.
"""

# %%
import os

import dask
import dask.array as da
import matplotlib.pyplot as plt
import numpy as np

from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso

quick = os.environ.get("SKACV_EXAMPLE_QUICK") == "1"
n, p, s, sigma, chunk = (20_000, 100, 10, 3.0, 2_500) if quick else \
    (200_000, 200, 20, 3.0, 25_000)
T = 40
beta = np.zeros(p)
beta[:s] = np.random.default_rng(1).standard_normal(s)


def rows(block_info=None, seed=0):
    """The rows ``[X, y]`` of one chunk, from the chunk's own seed."""
    (start, stop), _ = block_info[None]["array-location"]
    rng = np.random.default_rng([seed, start])
    X = rng.standard_normal((stop - start, p))
    return np.column_stack([X, X @ beta + sigma * rng.standard_normal(stop - start)])


def lazy(n_rows, seed):
    Z = da.map_blocks(rows, seed=seed, dtype=np.float64, meta=np.empty((0, 0)),
                      chunks=((chunk,) * (n_rows // chunk), (p + 1,)))
    return Z[:, :p], Z[:, p]


X, y = lazy(n, seed=0)
X_test, y_test = lazy(n // 4, seed=1)
print(f"X: {X.shape}, {X.numblocks[0]} chunks of {chunk} rows, {X.nbytes / 2**20:.0f} MiB")

# %%
# One pass, then the path and its risk estimate
# ---------------------------------------------
with dask.config.set(scheduler="threads"):
    est = TrajectoryLasso(alpha=0.05, max_iter=T, n_probes=None, estimate_loo=True,
                          loo_options={"subsample": 500}, random_state=0).fit(X, y)
    truth = ((est.coef_path_ - beta[:, None]) ** 2).sum(axis=0) + sigma**2
    pred = est.predict_path(X_test)  # a lazy Dask array of shape (n_test, T + 1)
    test_mse = ((y_test[:, None] - pred) ** 2).mean(axis=0).compute()
print(type(pred).__name__, pred.shape)
t_risk = int(np.argmin(est.risk_path_))
print(f"risk_path_ chooses iteration {t_risk}: estimated {est.risk_path_[t_risk]:.3f}, "
      f"true {truth[t_risk]:.3f}, held-out {test_mse[t_risk]:.3f}; loo_path_ (500 rows) "
      f"{est.loo_path_[t_risk]:.3f}")
with dask.config.set(scheduler="threads"):
    print(f"held-out R^2 of the last iterate: {est.score(X_test, y_test):.3f}")

# %%
# K-fold CV along the path over a grid of alpha: one pass for every fold
# ----------------------------------------------------------------------
# (the search stops a grid point's path once its error has not improved for
# ``n_iter_no_change`` iterations, and grows one still improving at T past it:
# ``kfold_path_`` can be shorter or longer than T + 1)
with dask.config.set(scheduler="threads"):
    search = TrajectoryEarlyStoppingCV(
        TrajectoryLasso(max_iter=T), param_grid={"alpha": [0.3, 0.1, 0.03, 0.01, 0.003]},
        criterion="kfold", cv=5, random_state=0).fit(X, y)
print(f"criterion {search.criterion_!r}: alpha={search.best_params_['alpha']}, "
      f"iteration {search.best_iteration_}, K-fold error {search.best_risk_:.3f}")

# %%
fig, ax = plt.subplots(figsize=(7, 4))
it = np.arange(T + 1)
ax.plot(it, truth, color="black", label="true risk (alpha=0.05)")
ax.plot(it, est.risk_path_, color="tab:green", ls="--", label="risk_path_ (alpha=0.05)")
ax.plot(it, est.loo_path_, color="tab:red", lw=0.8, label="loo_path_ (500 rows)")
ax.plot(it, test_mse, color="tab:orange", ls=":", label="held-out error (lazy predict_path)")
ax.plot(np.arange(len(search.kfold_path_)), search.kfold_path_, color="tab:blue", lw=0.8,
        label=f"kfold_path_ (alpha={search.best_params_['alpha']})")
ax.axvline(t_risk, color="tab:green", lw=0.8, label=f"risk_path_ choice ({t_risk})")
ax.set_ylim(0.9 * sigma**2, 1.6 * sigma**2)
ax.set_xlabel("iteration")
ax.set_ylabel("out-of-sample squared error")
ax.set_title(f"TrajectoryLasso on a Dask array, n={n}, p={p}")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
