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
n, p = 500, 750
beta = rng.standard_normal(p) * np.sqrt(4 / p)  # signal-to-noise ratio 4
X = rng.standard_normal((n, p))
y = X @ beta + rng.standard_normal(n)
X_test = rng.standard_normal((5000, p))
y_test = X_test @ beta + rng.standard_normal(5000)

# plain gradient descent (no penalty), step 1/L, 150 steps
gd = IterativeRidge(alpha=0.0, solver="gd", max_iter=150, random_state=0)

# %%
# The three strategies
# --------------------
results = {}

tic = time.perf_counter()
search = TrajectoryEarlyStoppingCV(gd).fit(X, y)
results["estimated risk (1 path)"] = (
    time.perf_counter() - tic, mean_squared_error(y_test, search.predict(X_test)),
    search.best_iteration_)

tic = time.perf_counter()
grid = np.unique(np.geomspace(1, 150, 8).astype(int))
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
# the oracle: the best iterate of the whole 150-step path by test error (the
# search stopped its path 10 iterations after the estimated minimum)
whole = clone(gd).set_params(estimate_risk=False).fit(X, y)
best_path = ((y_test[:, None] - whole.predict_path(X_test)) ** 2).mean(axis=0)
print(table.round(3))
print(f"best test MSE on the full-data path (oracle): {best_path.min():.3f}")

# %%
# Side by side
# ------------
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 4))
table["test MSE"].plot.barh(ax=ax0)
ax0.axvline(best_path.min(), color="k", linestyle=":", label="oracle iterate")
ax0.set_xlim(0.9 * table["test MSE"].min(), 1.05 * table["test MSE"].max())
ax0.set_xlabel("test MSE")
ax0.legend()
table["time (s)"].plot.barh(ax=ax1, color="C1")
ax1.set_xlabel("time (s)")
ax1.set_yticklabels([])
fig.tight_layout()

# %%
# The estimated risk of every iterate, the test error of the same iterates,
# and the selected iteration:
RiskPathDisplay.from_estimator(search, X_test, y_test)
plt.show()
