"""
=============================================================================
Early stopping: estimated risk vs 5-fold cross-validation vs a held-out split
=============================================================================

Three ways of choosing the number of gradient-descent iterations of least
squares on a Gaussian design with ``p > n``. Run to convergence, gradient
descent from zero reaches the minimum-norm interpolator, which overfits:
the number of iterations is the regularisation parameter.

* :class:`~skacv.TrajectoryEarlyStoppingCV`: one path on all the data, the
  iterate of smallest estimated out-of-sample risk (Bellec & Tan 2024), no
  refit;
* :class:`~sklearn.model_selection.GridSearchCV` over ``max_iter`` with 5
  folds (the usual recipe: 5 paths per candidate, then a refit);
* a held-out split: one path on 80 % of the data, the iterate with the
  smallest validation error (20 % of the data never trains the model).

We compare the test error (on a large independent test set) and the time.
"""

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.metrics import mean_squared_error
from sklearn.model_selection import GridSearchCV, KFold, train_test_split

from skacv import IterativeRidge, RiskPathDisplay, TrajectoryEarlyStoppingCV

rng = np.random.default_rng(0)
n, p, n_test, n_steps = 500, 750, 5000, 150
# sphinx_gallery_start_ignore
import os  # noqa: E402

if os.environ.get("SKACV_EXAMPLE_QUICK"):  # smaller sizes for the test suite
    n, p, n_test, n_steps = 150, 225, 1000, 60
# sphinx_gallery_end_ignore
beta = rng.standard_normal(p) * np.sqrt(4 / p)  # signal-to-noise ratio 4
X = rng.standard_normal((n, p))
y = X @ beta + rng.standard_normal(n)
X_test = rng.standard_normal((n_test, p))
y_test = X_test @ beta + rng.standard_normal(n_test)

# plain gradient descent (no penalty), step 1/L, 150 steps
gd = IterativeRidge(alpha=0.0, solver="gd", max_iter=n_steps, random_state=0)

# %%
# The three strategies
# --------------------
results = {}

tic = time.perf_counter()
search = TrajectoryEarlyStoppingCV(gd, search="grid").fit(X, y)  # gd's own alpha
results["estimated risk (1 path)"] = (
    time.perf_counter() - tic, mean_squared_error(y_test, search.predict(X_test)),
    search.best_iteration_)

tic = time.perf_counter()
grid = np.unique(np.geomspace(1, n_steps, 8).astype(int))
gs = GridSearchCV(clone(gd).set_params(estimate_risk=False), {"max_iter": grid},
                  cv=KFold(5, shuffle=True, random_state=0),
                  scoring="neg_mean_squared_error").fit(X, y)
results["5-fold GridSearchCV over max_iter"] = (
    time.perf_counter() - tic, mean_squared_error(y_test, gs.predict(X_test)),
    gs.best_params_["max_iter"])

tic = time.perf_counter()
X_tr, X_val, y_tr, y_val = train_test_split(X, y, test_size=0.2, random_state=0)
held = clone(gd).set_params(estimate_risk=False).fit(X_tr, y_tr)
val_error = ((y_val[:, None] - held.predict_path(X_val)) ** 2).mean(axis=0)
t_val = int(np.argmin(val_error))
results["held-out split (80/20)"] = (
    time.perf_counter() - tic,
    mean_squared_error(y_test, held.predict_path(X_test)[:, t_val]), t_val)

table = pd.DataFrame(results, index=["time (s)", "test MSE", "iteration"]).T
# the oracle: the best iterate of the whole path by test error (the
# search stopped its path 10 iterations after the estimated minimum)
whole = clone(gd).set_params(estimate_risk=False).fit(X, y)
best_path = ((y_test[:, None] - whole.predict_path(X_test)) ** 2).mean(axis=0)
print(table.round(3))
print(f"best test MSE on the full-data path (oracle): {best_path.min():.3f}")

# %%
# Side by side
# ------------
# Both axes start at zero: the bars compare the errors and the times
# themselves. The noise variance (1 here) is a floor that no iterate goes
# below, the oracle iterate's error the best any choice of the iteration
# can do.
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
bars = ax0.barh(table.index, table["test MSE"], color="C0")
ax0.bar_label(bars, fmt="%.3f", padding=3)
ax0.axvline(best_path.min(), color="k", linestyle=":", label="oracle iterate")
ax0.axvline(1.0, color="gray", linestyle="--", label="noise variance")
ax0.set_xlim(0, 1.25 * table["test MSE"].max())
ax0.set_xlabel("test mean squared error (squared units of y)")
ax0.set_title("Test error of the chosen iterate")
ax0.invert_yaxis()
ax0.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, frameon=False)
bars = ax1.barh(table.index, table["time (s)"], color="C1")
ax1.bar_label(bars, fmt="%.2f s", padding=3)
ax1.set_xlim(0, 1.25 * table["time (s)"].max())
ax1.set_xlabel("fit time (seconds)")
ax1.set_title("Time to choose")
ax1.invert_yaxis()
ax1.set_yticklabels([])
fig.suptitle(f"Choosing the number of gradient-descent steps (n={n}, p={p})")
plt.show()

# %%
# The estimated risk of every iterate, the test error of the same iterates,
# and the selected iteration:
RiskPathDisplay.from_estimator(search, X_test, y_test)
plt.show()
