"""
============================================================================
Real features, known signal: skacv's defaults vs LassoCV vs k-fold vs split
============================================================================

A *semi-synthetic* benchmark: the features are real (scikit-learn's bundled
breast cancer measurements, 569 tumours, 30 variables, with all their
degree-2 products: 495 strongly correlated, skewed features), the response
is synthetic, ``y = X beta + noise`` with a sparse ``beta`` that we choose.
Because ``beta`` and the noise level are known, the out-of-sample risk of
any fitted model on new tumours is known too, up to the sampling of those
tumours: on held-out rows ``X_test``,

.. math::

   R(\\hat f) = \\sigma^2 + \\frac{1}{n_{test}} \\sum_i
   \\big(x_i^\\top \\beta - \\hat f(x_i)\\big)^2,

the mean squared error against fresh noise, with the noise averaged out
exactly.

We choose the Lasso penalty and the number of FISTA iterations four ways,
over the same penalties where there is a choice:

* :class:`~skacv.TrajectoryEarlyStoppingCV` on
  :class:`~skacv.TrajectoryLasso` with its defaults, on these penalties: the
  (penalty, iteration) pair of smallest *estimated* risk (Bellec & Tan
  2024), the converged fits included, from fits on all the training rows;
  no refit (:ref:`how_the_choice_is_made`);
* :class:`~sklearn.linear_model.LassoCV`: 5 folds, coordinate descent to
  convergence at each penalty, then a refit;
* 5-fold cross-validation *along the path*, written below: each fold's path
  is fitted once per penalty, every iterate is scored on the held-out fold
  with ``predict_path``, the fold errors are averaged and the (penalty,
  iteration) pair of smallest error is refitted on all the training rows;
* a held-out split: the paths fitted on 80 % of the training rows, the
  (penalty, iteration) of smallest error on the other 20 %, no refit.

Real features are far from the Gaussian designs for which the risk estimate
is derived (see :ref:`user_guide`): this example shows how it fares
anyway, with the truth to check it.
"""

# %%
# The design and the signal
# --------------------------
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LassoCV
from sklearn.model_selection import KFold, train_test_split
from sklearn.preprocessing import PolynomialFeatures, StandardScaler

from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso

n_steps, n_alphas, n_folds = 200, 6, 5
# sphinx_gallery_start_ignore
import os  # noqa: E402

if os.environ.get("SKACV_EXAMPLE_QUICK"):  # smaller sizes for the test suite
    n_steps, n_alphas = 40, 3
# sphinx_gallery_end_ignore

X_real, _ = load_breast_cancer(return_X_y=True)
# the design: degree-2 features, standardised (a fixed transformation of the
# features, learned without the response)
X = StandardScaler().fit_transform(PolynomialFeatures(2, include_bias=False)
                                   .fit_transform(X_real))
n_samples, n_features = X.shape

rng = np.random.default_rng(0)
sigma, n_informative, snr = 1.0, 20, 4.0
beta = np.zeros(n_features)
support = rng.choice(n_features, n_informative, replace=False)
beta[support] = rng.choice([-1.0, 1.0], n_informative) * rng.uniform(0.5, 1.5, n_informative)
beta *= np.sqrt(snr) * sigma / np.std(X @ beta)  # Var(x^T beta) = snr * sigma^2
y = X @ beta + sigma * rng.standard_normal(n_samples)

X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
signal_test = X_test @ beta  # the noise-free response of the test tumours


def true_risk(predictions):
    """Out-of-sample risk of predictions of the test rows (noise averaged out);
    one value per column of a ``(n_test, n_iterates)`` array of paths."""
    error = predictions - signal_test.reshape(-1, *[1] * (np.ndim(predictions) - 1))
    return sigma**2 + np.mean(error**2, axis=0)


alpha_max = np.max(np.abs(X_train.T @ (y_train - y_train.mean()))) / X_train.shape[0]
alphas = alpha_max * np.geomspace(0.3, 0.003, n_alphas)
lasso = TrajectoryLasso(max_iter=n_steps, random_state=0)
print(f"{X_train.shape[0]} training and {X_test.shape[0]} test tumours, "
      f"{n_features} features, {n_informative} of them in the signal")

# %%
# The four choices
# ----------------
results = {}

tic = time.perf_counter()
# the alpha path solved to a tighter budget than its default 1000 FISTA steps:
# these correlated features converge slowly at the small penalties
search = TrajectoryEarlyStoppingCV(lasso, param_grid={"alpha": alphas},
                                   path_params={"max_iter": 5000}).fit(X_train, y_train)
skacv_name = f"skacv defaults\n(smallest {search.criterion_} estimate, no refit)"
results[skacv_name] = dict(
    seconds=time.perf_counter() - tic, risk=true_risk(search.predict(X_test)),
    alpha=search.best_params_["alpha"], iteration=search.best_iteration_)

tic = time.perf_counter()
lasso_cv = LassoCV(alphas=alphas, cv=KFold(n_folds, shuffle=True, random_state=0),
                   max_iter=10_000).fit(X_train, y_train)
results[f"LassoCV\n({n_folds} folds, to convergence)"] = dict(
    seconds=time.perf_counter() - tic, risk=true_risk(lasso_cv.predict(X_test)),
    alpha=lasso_cv.alpha_, iteration=np.nan)  # coordinate descent, to convergence

# k-fold cross-validation along the path: one path per (fold, alpha), every
# iterate scored on the held-out fold
tic = time.perf_counter()
plain = clone(lasso).set_params(estimate_risk=False)  # no estimate needed here
cv_error = np.zeros((n_alphas, n_steps + 1))
for fit_rows, val_rows in KFold(n_folds, shuffle=True, random_state=0).split(X_train):
    for a, alpha in enumerate(alphas):
        fold = plain.set_params(alpha=alpha).fit(X_train[fit_rows], y_train[fit_rows])
        residuals = y_train[val_rows, None] - fold.predict_path(X_train[val_rows])
        cv_error[a] += np.mean(residuals**2, axis=0) / n_folds
a, t = np.unravel_index(np.argmin(cv_error), cv_error.shape)
refit = plain.set_params(alpha=alphas[a], max_iter=max(int(t), 1)).fit(X_train, y_train)
prediction = refit.predict_path(X_test)[:, t]  # t = 0 is the starting point
results[f"{n_folds}-fold CV along the path\n(then a refit)"] = dict(
    seconds=time.perf_counter() - tic, risk=true_risk(prediction), alpha=alphas[a],
    iteration=int(t))

tic = time.perf_counter()
X_fit, X_val, y_fit, y_val = train_test_split(X_train, y_train, test_size=0.2,
                                              random_state=0)
best = (np.inf, None, None)
for alpha in alphas:
    path = plain.set_params(alpha=alpha, max_iter=n_steps).fit(X_fit, y_fit)
    val_error = np.mean((y_val[:, None] - path.predict_path(X_val)) ** 2, axis=0)
    t = int(np.argmin(val_error))
    if val_error[t] < best[0]:
        best = (val_error[t], alpha, path.predict_path(X_test)[:, t], t)
results["held-out split\n(80/20, no refit)"] = dict(
    seconds=time.perf_counter() - tic, risk=true_risk(best[2]), alpha=best[1],
    iteration=best[3])

table = pd.DataFrame(results).T
table["iteration"] = table["iteration"].astype("Int64")  # none for LassoCV
print(table.rename(index=lambda s: s.replace("\n", " ")).to_string(
    float_format="{:.4g}".format))

# %%
# The best any choice could do on these paths: the smallest true risk over
# the penalties and iterations of the full-data paths (an oracle: it reads
# ``beta``).
oracle = min(true_risk(plain.set_params(alpha=alpha).fit(X_train, y_train)
                       .predict_path(X_test)).min() for alpha in alphas)
print(f"oracle (best penalty and iteration by the true risk): {oracle:.3f}; "
      f"noise floor sigma^2 = {sigma**2:.3f}")
print(f"skacv's choice: estimated ({search.criterion_}) {search.best_risk_:.3f}, true risk "
      f"{results[skacv_name]['risk']:.3f}")

# %%
# Side by side
# ------------
# Both axes start at zero. The dashed line is the noise variance, which no
# predictor goes below; the dotted line the oracle choice.
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.5), layout="constrained")
names = list(table.index)
bars = ax0.barh(names, table["risk"], color="C0")
ax0.bar_label(bars, fmt="%.3f", padding=3)
ax0.axvline(sigma**2, color="gray", linestyle="--", label="noise variance")
ax0.axvline(oracle, color="k", linestyle=":", label="oracle choice")
ax0.set_xlim(0, 1.3 * table["risk"].max())
ax0.set_xlabel("out-of-sample risk (mean squared error, squared units of y)")
ax0.set_title("True risk of the chosen model")
ax0.invert_yaxis()
ax0.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, frameon=False)
bars = ax1.barh(names, table["seconds"], color="C1")
ax1.bar_label(bars, fmt="%.2f s", padding=3)
ax1.set_xlim(0, 1.3 * table["seconds"].max())
ax1.set_xlabel("time to choose and fit (seconds)")
ax1.set_title("Fit time")
ax1.invert_yaxis()
ax1.set_yticklabels([])
fig.suptitle(f"Breast cancer features (degree 2, p = {n_features}), "
             f"n = {X_train.shape[0]}, known sparse signal")
plt.show()
