"""
=====================================================
The elastic net on correlated real features
=====================================================

The 30 features of the breast cancer data shipped with scikit-learn are
measurements of the same cell nuclei: the radius, perimeter and area of a
nucleus, their means, standard errors and worst values, correlate up to
0.998. On such designs the Lasso keeps one feature of a correlated group
and drops the others, while the elastic net (Zou & Hastie 2005) spreads the
weight over the group. When every measurement carries a little of the
signal, the spread pays.

The response here is synthetic so that the truth is known: every
standardised feature gets the coefficient 0.3 and the noise has standard
deviation 1; 100 patients train, the other 469 test. We choose the mixing
``l1_ratio``, the penalty and the FISTA iteration with
:class:`~skacv.TrajectoryEarlyStoppingCV` (the natural call,
``param_grid={"l1_ratio": [...]}``, as ``ElasticNetCV``: one alpha path per
mixing scored by the converged risk estimate, then the trajectories around
the best one, chosen by their memory-matrix risk estimate, Bellec & Tan
2024) and compare it with the Lasso's search, ``LassoCV`` and
``ElasticNetCV`` (5 folds each) on the held-out patients, over a few random
draws of the noise and the split.
"""

# %%
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.datasets import load_breast_cancer
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import ElasticNetCV, LassoCV
from sklearn.preprocessing import StandardScaler

from skacv import TrajectoryEarlyStoppingCV, TrajectoryElasticNet, TrajectoryLasso

X = StandardScaler().fit_transform(load_breast_cancer().data)
n_train, sigma, n_draws, n_steps = 100, 1.0, 6, 200
l1_ratios = [0.1, 0.5, 0.7, 0.9, 0.95, 1.0]
# sphinx_gallery_start_ignore
import os  # noqa: E402

if os.environ.get("SKACV_EXAMPLE_QUICK"):  # smaller sizes for the test suite
    n_draws, n_steps, l1_ratios = 2, 40, [0.1, 0.5, 1.0]
# sphinx_gallery_end_ignore
beta = np.full(X.shape[1], 0.3)
corr = np.corrcoef(X.T)
print(f"{X.shape[0]} patients, {X.shape[1]} features; |correlation| above 0.9 for "
      f"{int((np.abs(corr[np.triu_indices_from(corr, 1)]) > 0.9).sum())} pairs of features")


def draw(seed):
    """The synthetic response and a random split of the patients."""
    rng = np.random.default_rng(seed)
    y = X @ beta + sigma * rng.standard_normal(X.shape[0])
    order = rng.permutation(X.shape[0])
    return y, order[:n_train], order[n_train:]


# %%
# Four ways to choose the model
# -----------------------------
# The elastic-net search and the Lasso's run on the training patients only,
# without folds; ``LassoCV`` and ``ElasticNetCV`` refit 5 folds per penalty
# (and per mixing). The excess test error (test MSE minus the noise variance
# ``sigma^2``) measures how far each model is from the truth.
def models():
    return {
        "elastic net (skacv)": TrajectoryEarlyStoppingCV(
            TrajectoryElasticNet(max_iter=n_steps, random_state=0),
            param_grid={"l1_ratio": l1_ratios}, random_state=0),
        "Lasso (skacv)": TrajectoryEarlyStoppingCV(
            TrajectoryLasso(max_iter=n_steps, random_state=0), random_state=0),
        "ElasticNetCV": ElasticNetCV(cv=5, l1_ratio=l1_ratios),
        "LassoCV": LassoCV(cv=5),
    }


rows = []
for seed in range(n_draws):
    y, train, test = draw(seed)
    for name, model in models().items():
        tic = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X[train], y[train])
        elapsed = time.perf_counter() - tic
        params = getattr(model, "best_params_", {})
        ratio = params.get("l1_ratio", getattr(model, "l1_ratio_", 1.0))
        excess = np.mean((y[test] - model.predict(X[test])) ** 2) - sigma**2
        rows.append({"draw": seed, "method": name, "l1_ratio": float(np.ravel(ratio)[0]),
                     "excess test MSE": excess, "time (s)": elapsed})
table = pd.DataFrame(rows)
summary = table.groupby("method", sort=False)[["excess test MSE", "l1_ratio", "time (s)"]]
print(summary.median().round(3).to_string())

fig, ax = plt.subplots(figsize=(7, 3.5))
medians = summary.median()["excess test MSE"]
ax.barh(medians.index, medians.values, color=["C0", "C1", "C2", "C3"])
for k, method in enumerate(medians.index):
    values = table.loc[table["method"] == method, "excess test MSE"]
    ax.plot(values, np.full(values.size, k), "k.", alpha=0.6)
ax.set_xlim(0, None)
ax.set_xlabel("excess test MSE (test MSE - sigma^2; bars: median, dots: draws)")
ax.set_title(f"Held-out error over {n_draws} draws: the elastic net against the Lasso")
fig.tight_layout()

# %%
# The risk path of each mixing
# ----------------------------
# On the first draw: for every ``l1_ratio``, the FISTA trajectory at the
# alpha its converged fits choose, with its estimated risk (solid, from the
# training data alone) and the test error of every iterate (dashed). The
# smallest mixing reaches the lowest error, and the estimate, which never
# sees the test patients, ranks the mixings as the test error does.
y, train, test = draw(0)
search = TrajectoryEarlyStoppingCV(TrajectoryElasticNet(max_iter=n_steps, random_state=0),
                                   param_grid={"l1_ratio": l1_ratios},
                                   random_state=0).fit(X[train], y[train])
results = pd.DataFrame({"l1_ratio": search.cv_results_["param_l1_ratio"],
                        "alpha": search.cv_results_["param_alpha"],
                        "converged risk": search.cv_results_["path_risk"]})
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for k, (ratio, rows_r) in enumerate(results.groupby("l1_ratio")):
    axes[0].loglog(rows_r["alpha"], rows_r["converged risk"], color=f"C{k}",
                   label=f"l1_ratio={ratio:g}")
    best = rows_r.loc[rows_r["converged risk"].idxmin()]
    est = TrajectoryElasticNet(alpha=best["alpha"], l1_ratio=ratio, max_iter=n_steps,
                               random_state=0).fit(X[train], y[train])
    test_path = np.mean((y[test, None] - est.predict_path(X[test])) ** 2, axis=0)
    axes[1].plot(est.risk_path_, color=f"C{k}", label=f"l1_ratio={ratio:g}")
    axes[1].plot(test_path, color=f"C{k}", ls="--")
axes[0].set_xlabel("alpha")
axes[0].set_ylabel("estimated risk at convergence")
axes[0].set_title("Converged fits along each alpha path")
axes[0].legend(fontsize=8)
axes[1].set_xlabel("FISTA iteration")
axes[1].set_ylabel("risk (solid: estimate; dashed: test MSE)")
axes[1].set_ylim(sigma**2 * 0.8, np.percentile(test_path, 90) * 1.5)
axes[1].set_title("Trajectory at each mixing's converged choice")
axes[1].legend(fontsize=8)
fig.suptitle(f"Chosen: l1_ratio={search.best_params_['l1_ratio']:g}, "
             f"alpha={search.best_params_['alpha']:.3g}, iteration {search.best_iteration_}")
fig.tight_layout()
plt.show()
