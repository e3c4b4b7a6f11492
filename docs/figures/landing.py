"""The landing page's figure: along a Lasso path fitted by ISTA on simulated
data (so the true out-of-sample error of every iterate is known), the
estimate skacv computes from the training data against that truth, with
three choices of the iteration marked."""

import warnings

import matplotlib.pyplot as plt
import numpy as np

from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso

rng = np.random.default_rng(2025)
n, p, s, sigma = 1000, 1500, 100, 2.5
beta = np.zeros(p)
beta[:s] = 15 / np.sqrt(n)
X = rng.standard_normal((n, p))
y = X @ beta + sigma * rng.standard_normal(n)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    est = TrajectoryLasso(alpha=0.001, solver="ista", max_iter=60, fit_intercept=False,
                          random_state=0).fit(X, y)
    kfold = TrajectoryEarlyStoppingCV(
        TrajectoryLasso(alpha=0.001, solver="ista", max_iter=60, fit_intercept=False),
        criterion="kfold", search="grid", n_iter_no_change=None).fit(X, y)

# features ~ N(0, I): the error of iterate t on new data is known exactly
truth = ((est.coef_path_ - beta[:, None]) ** 2).sum(axis=0) + sigma**2
t = np.arange(truth.size)
choices = {"smallest estimate (skacv)": (int(np.argmin(est.risk_path_)), "C0", "o"),
           "best possible (oracle)": (int(np.argmin(truth)), "k", "*"),
           "5-fold cross-validation": (kfold.best_iteration_, "C2", "s")}

fig, ax = plt.subplots(figsize=(9, 4.2), layout="constrained")
ax.plot(t, truth, color="k", lw=2, label="true error on new data")
ax.plot(t, est.risk_path_, color="C0", lw=2, ls="--",
        label="estimate from the training data")
for label, (it, color, marker) in choices.items():
    ax.plot(it, truth[it], marker=marker, color=color, ms=14 if marker == "o" else 11,
            mfc="none" if marker == "o" else color, mew=2, ls="none",
            label=f"{label}: iteration {it}")
ax.set_ylim(0.9 * truth.min(), 1.05 * max(truth[0], est.risk_path_[0]))
ax.set_xlabel("iteration of the solver")
ax.set_ylabel("mean squared error")
ax.set_title("Where to stop: the estimate follows the true error along the path")
ax.legend(loc="upper right", fontsize=10)
