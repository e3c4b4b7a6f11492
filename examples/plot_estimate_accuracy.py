"""
==========================================================
How accurate is the risk estimate? Many seeds, three sizes
==========================================================

The estimate ``risk_path_`` of an ISTA path (Bellec & Tan 2024) against the
true out-of-sample risk, over many simulated data sets at three sizes, for a
Gaussian design with identity covariance and for a correlated (AR(1)) design.
The truth is known because we simulate the data: for an iterate ``b`` and a
design of covariance ``Sigma``, ``R(b) = (b - beta)^T Sigma (b - beta) +
sigma^2``.

Three different errors are separated:

* **the estimator's own error**: the estimate with (nearly) exact traces
  against the truth. It is a finite-sample error of order ``n^-1/2``: at
  ``t = 0`` the estimate is ``||y||^2 / n``, whose relative standard
  deviation is ``sqrt(2 / n)`` for Gaussian data. Here the "infinite-probe"
  estimate uses ``M = 100`` Hutchinson probes (its own probe noise is about
  ``sqrt(10 / 100) = 0.32`` times that of 10 probes);
* **the probe noise** of 10 Hutchinson probes (``n_probes=10``; the
  default ``n_probes="auto"`` uses more below 2000 samples): that estimate
  minus the many-probe estimate, on the same data;
* **the regret of the choice**: the true risk at the iterate of smallest
  estimate over the smallest true risk on the path, minus one; also for
  5-fold CV along the path (``criterion="kfold"``).

The setting has a true risk with a minimum along the path (a small penalty
and noise ``sigma = 2.5``, signal ``||beta||^2 = 22.5``, ``p = 1.5 n``,
``s = n / 10``): early stopping matters. The measured numbers are quoted in
the user guide (section "What the estimate is worth"), from a run with more
seeds (30, 24 and 16); this page runs 12, 8 and 6 to stay under a minute,
so its numbers are noisier.
"""

# %%
# The experiment
# --------------
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy.linalg import toeplitz
from scipy.signal import lfilter

from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso
from skacv.exceptions import SelectionBoundaryWarning

SIZES = [200, 400, 800]
SEEDS = {200: 12, 400: 8, 800: 6}
DESIGNS = ["gaussian", "ar1"]
RHO, SIGMA, ALPHA, T, MANY = 0.5, 2.5, 0.001, 60, 100
# sphinx_gallery_start_ignore
import os  # noqa: E402

if os.environ.get("SKACV_EXAMPLE_QUICK"):  # smaller sizes for the test suite
    SIZES, SEEDS, T, MANY = [100, 150], {100: 2, 150: 2}, 20, 20
if os.environ.get("SKACV_ACCURACY_SIZES"):  # e.g. "2000:8" for the demo's size
    SEEDS = dict(tuple(int(v) for v in item.split(":"))
                 for item in os.environ["SKACV_ACCURACY_SIZES"].split(","))
    SIZES = sorted(SEEDS)
if os.environ.get("SKACV_ACCURACY_DESIGNS"):
    DESIGNS = os.environ["SKACV_ACCURACY_DESIGNS"].split(",")
# sphinx_gallery_end_ignore


def simulate(n, design, seed):
    """Design, response, coefficients and covariance of one data set."""
    p, s = int(1.5 * n), n // 10
    rng = np.random.default_rng(seed)
    beta = np.zeros(p)
    beta[np.arange(s) * (p // s)] = 15 / np.sqrt(n)  # spread support, ||beta||^2 = 22.5
    Z = rng.standard_normal((n, p))
    if design == "gaussian":
        X, cov = Z, None
    else:  # AR(1): x_j = rho x_{j-1} + sqrt(1 - rho^2) z_j, unit variances
        Z[:, 0] /= np.sqrt(1 - RHO**2)
        X = lfilter([np.sqrt(1 - RHO**2)], [1.0, -RHO], Z, axis=1)
        cov = toeplitz(RHO ** np.arange(p))
    y = X @ beta + SIGMA * rng.standard_normal(n)
    return X, y, beta, cov


def true_risk(coef_path, beta, cov):
    D = coef_path - beta[:, None]
    SD = D if cov is None else cov @ D
    return np.einsum("jt,jt->t", D, SD) + SIGMA**2


def one_run(n, design, seed):
    X, y, beta, cov = simulate(n, design, seed)
    lasso = dict(alpha=ALPHA, solver="ista", fit_intercept=False, max_iter=T - 1)
    default = TrajectoryLasso(**lasso, n_probes=10, random_state=seed).fit(X, y)
    many = TrajectoryLasso(**lasso, n_probes=MANY, random_state=seed + 1).fit(X, y)
    with warnings.catch_warnings():
        # a seed whose folds choose the last iterate warns so; the regret counts it
        warnings.simplefilter("ignore", SelectionBoundaryWarning)
        kfold = TrajectoryEarlyStoppingCV(TrajectoryLasso(**lasso, estimate_risk=False),
                                          criterion="kfold", n_iter_no_change=None,
                                          search="grid", random_state=seed).fit(X, y)
    R = true_risk(default.coef_path_, beta, cov)
    r, rM = default.risk_path_, many.risk_path_
    o = int(np.argmin(R))
    return {
        "n": n, "design": design, "seed": seed, "oracle t": o,
        "estimator error": rM[o] / R[o] - 1,
        "probe noise": (r[o] - rM[o]) / R[o],
        "total error": r[o] / R[o] - 1,
        "worst over t": np.max(np.abs(r / R - 1)),
        "error at t=0": rM[0] / R[0] - 1,
        "regret, estimate": R[np.argmin(r)] / R[o] - 1,
        "regret, many probes": R[np.argmin(rM)] / R[o] - 1,
        "regret, 5-fold": R[kfold.best_iteration_] / R[o] - 1,
    }


tic = time.perf_counter()
rows = [one_run(n, design, 1000 * k + n) for design in DESIGNS for n in SIZES
        for k in range(SEEDS[n])]
results = pd.DataFrame(rows)
print(f"{len(rows)} data sets in {time.perf_counter() - tic:.0f} s")

# %%
# The table
# ---------
# Standard deviations over the seeds of the relative errors at the oracle
# iterate (the estimator's own error next to ``sqrt(2 / n)``, the relative
# standard deviation of ``||y||^2 / n``), the worst relative error over the
# path (median over seeds), and the mean and largest regret of each choice.
summary = results.groupby(["design", "n"]).agg(
    seeds=("seed", "size"),
    oracle_t=("oracle t", "median"),
    estimator_sd=("estimator error", "std"),
    estimator_mean=("estimator error", "mean"),
    probe_sd=("probe noise", "std"),
    total_sd=("total error", "std"),
    worst_over_t=("worst over t", "median"),
    regret_mean=("regret, estimate", "mean"),
    regret_max=("regret, estimate", "max"),
    regret_many_mean=("regret, many probes", "mean"),
    kfold_mean=("regret, 5-fold", "mean"),
    kfold_max=("regret, 5-fold", "max"),
)
summary.insert(3, "sqrt(2/n)", np.sqrt(2 / summary.index.get_level_values("n")))
percent = (100 * summary.drop(columns=["seeds", "oracle_t"])).round(2)
errors = ["estimator_sd", "sqrt(2/n)", "estimator_mean", "probe_sd", "total_sd",
          "worst_over_t"]
print("Relative errors (%) at the oracle iterate, and the worst over the path:")
print(percent[errors].assign(seeds=summary["seeds"]).to_string())
print("\nRegret of the choice (%): the estimate, many probes, 5-fold CV:")
print(percent.drop(columns=errors).assign(oracle_t=summary["oracle_t"]).to_string())

# %%
# The figure
# ----------
# Left: the estimator's own error at the oracle iterate (many probes against
# the truth), with ``+- 2 sqrt(2 / n)``. Middle: the probe noise of 10
# probes at the same iterate. Right: the regret of stopping at the argmin of
# the 10-probe estimate and of 5-fold CV along the path.
fig, axes = plt.subplots(1, 3, figsize=(11, 3.8), layout="constrained")
offsets = {"gaussian": -0.15, "ar1": 0.15}
labels = {"gaussian": "Gaussian, identity", "ar1": f"AR(1), rho = {RHO}"}
positions = np.arange(len(SIZES))
for design in DESIGNS:
    part = results[results["design"] == design]
    groups = [part[part["n"] == n] for n in SIZES]
    for ax, column in zip(axes[:2], ["estimator error", "probe noise"], strict=True):
        ax.boxplot([100 * g[column] for g in groups], positions=positions + offsets[design],
                   widths=0.25, patch_artist=True,
                   boxprops={"facecolor": "C0" if design == "gaussian" else "C1"})
    for column, marker in (("regret, estimate", "o"), ("regret, 5-fold", "x")):
        axes[2].plot(np.repeat(positions, [len(g) for g in groups]) + offsets[design],
                     100 * np.concatenate([g[column] for g in groups]), marker,
                     color="C0" if design == "gaussian" else "C1", alpha=0.6,
                     label=f"{labels[design]}: {column.split(', ')[1]}")
ref = 200 * np.sqrt(2 / np.array(SIZES))
axes[0].plot(positions, ref, "k--", label="+- 2 sqrt(2/n)")
axes[0].plot(positions, -ref, "k--")
for ax, title in zip(axes, ["estimator's own error (many probes)",
                            "probe noise (10 probes - many)",
                            "regret of the choice"], strict=True):
    ax.set_xticks(positions, [f"n = {n}\np = {int(1.5 * n)}" for n in SIZES])
    ax.set_title(title)
    ax.axhline(0, color="grey", linewidth=0.8)
axes[0].set_ylabel("estimate / true risk - 1 (%)")
axes[1].set_ylabel("(estimate - many-probe) / true risk (%)")
axes[2].set_ylabel("true risk at choice / oracle - 1 (%)")
colors = {"gaussian": "C0", "ar1": "C1"}
axes[0].legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colors[d]) for d in DESIGNS]
               + axes[0].lines[:1], labels=[labels[d] for d in DESIGNS] + ["+- 2 sqrt(2/n)"],
               fontsize=8)
axes[2].legend(fontsize=7)
fig.suptitle(f"ISTA Lasso, alpha = {ALPHA}, sigma = {SIGMA}, T = {T} iterates, "
             "relative errors at the oracle iterate over seeds")
plt.show()
