"""
======================================================
Out-of-sample risk along an ISTA trajectory (the seed)
======================================================

The experiment that started skacv, at a smaller size: proximal gradient
descent (ISTA) on a Lasso problem with a Gaussian design, ``p > n``, and the
estimate of the out-of-sample risk of *every* iterate (Bellec & Tan 2024)
against the truth, which is known here because we simulate the data.

For an isotropic design the out-of-sample risk of an iterate ``b`` is
``E[(y_new - x_new^T b)^2] = ||b - beta||^2 + sigma^2``.
"""

# %%
# Data: the seed notebook's generator
# -----------------------------------
# ``n`` samples, ``p`` features, ``s`` non-zero coefficients, noise level
# ``sigma``. The notebook used ``n=10000, p=15000, s=1000``; we divide every
# size by 10.
import time

import matplotlib.pyplot as plt
import numpy as np

from skacv import RiskPathDisplay, TrajectoryEarlyStoppingCV, TrajectoryLasso

n, p, s, sigma, T = 1000, 1500, 100, 1.5, 100
# sphinx_gallery_start_ignore
import os  # noqa: E402

if os.environ.get("SKACV_EXAMPLE_QUICK"):  # smaller sizes for the test suite
    n, p, s, T = 200, 300, 20, 30
# sphinx_gallery_end_ignore
beta = 15 * np.hstack([np.ones(s), np.zeros(p - s)]) / np.sqrt(n)
rng = np.random.default_rng(2025)
X = rng.standard_normal(size=(n, p))
y = X @ beta + sigma * rng.standard_normal(size=n)

# %%
# One ISTA path with its risk estimate
# ------------------------------------
# The notebook's step ``(1 + sqrt(p/n))^-2`` and penalty ``lam = 0.01``;
# Hutchinson traces with 10 Rademacher probes. ``fit_intercept=False`` as in
# the notebook (the data are centred by construction).
eta = (1 + np.sqrt(p / n)) ** -2
est = TrajectoryLasso(alpha=0.01, solver="ista", max_iter=T, step_size=eta,
                      fit_intercept=False, n_probes=10, random_state=0)
tic = time.perf_counter()
est.fit(X, y)
print(f"fit + risk path: {time.perf_counter() - tic:.1f} s")

true_risk = ((est.coef_path_ - beta[:, None]) ** 2).sum(axis=0) + sigma**2
for t in (0, 1, 2, 5, 10, T // 2, T):
    print(f"iteration {t:3d}: estimate {est.risk_path_[t]:6.3f}   truth {true_risk[t]:6.3f}")

# %%
# The estimate follows the true risk along the whole trajectory. The display
# draws it with the true risk in place of a test error, and marks the
# iteration of smallest *estimated* risk.
disp = RiskPathDisplay(risk=est.risk_path_, test_error=true_risk,
                       estimator_name="ISTA, lam = 0.01")
disp.plot(test_kw={"label": "true risk"})
disp.ax_.set_yscale("log")
plt.show()

# %%
# Early stopping without held-out data
# ------------------------------------
# :class:`~skacv.TrajectoryEarlyStoppingCV` picks the pair (penalty, iterate)
# of smallest estimated risk: the converged fits along the alpha path and the
# FISTA paths of the penalties around their choice, scored by the same
# memory-matrix estimate, and keeps it (no refit, no held-out data).
search = TrajectoryEarlyStoppingCV(
    TrajectoryLasso(solver="fista", max_iter=T, fit_intercept=False, random_state=0),
    param_grid={"alpha": [0.1, 0.05, 0.02, 0.01]},
)
tic = time.perf_counter()
search.fit(X, y)
elapsed = time.perf_counter() - tic
chosen_true = ((search.coef_ - beta) ** 2).sum() + sigma**2
print(f"selected {search.best_params_} at iteration {search.best_iteration_} in {elapsed:.1f} s")
print(f"estimate ({search.criterion_}) {search.best_risk_:.3f}, true risk {chosen_true:.3f} "
      f"(last ISTA iterate above: {true_risk[-1]:.3f})")
