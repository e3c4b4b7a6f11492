"""
==========================================================
Iterative approximate leave-one-out vs exact leave-one-out
==========================================================

For logistic regression fitted by gradient descent, the leave-one-out
log-loss of every iterate (the same algorithm, same steps, run without one
sample) is tracked along the trajectory by iterative approximate
cross-validation (IACV, Luo, Ren & Barber 2023) at the cost of a few fits,
instead of one refit per sample. We compare it with the brute-force
definition, :func:`skacv.exact_loo_path`, and with the log-loss on a large
test set, then use it to stop early.
"""

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from skacv import (
    RiskPathDisplay,
    TrajectoryEarlyStoppingCV,
    TrajectoryLogisticRegression,
    exact_loo_path,
)

rng = np.random.default_rng(0)
n, p, n_test, n_steps = 300, 150, 5000, 60
# sphinx_gallery_start_ignore
import os  # noqa: E402

if os.environ.get("SKACV_EXAMPLE_QUICK"):  # smaller sizes for the test suite
    n, p, n_test, n_steps = 60, 30, 500, 20
# sphinx_gallery_end_ignore
beta = rng.standard_normal(p) * np.sqrt(10 / p)


def sample(m):
    X = rng.standard_normal((m, p))
    y = (rng.random(m) < 1 / (1 + np.exp(-X @ beta))).astype(int)
    return X, y


X, y = sample(n)
X_test, y_test = sample(n_test)

# %%
# IACV along the path, and the exact leave-one-out
# ------------------------------------------------
# A nearly unpenalised logistic regression (``alpha=1e-3``) fitted by
# gradient descent: with ``p / n = 0.5`` it overfits after a few steps.
clf = TrajectoryLogisticRegression(alpha=1e-3, solver="gd", max_iter=n_steps, estimate_loo=True)
tic = time.perf_counter()
clf.fit(X, y)
t_iacv = time.perf_counter() - tic
tic = time.perf_counter()
exact = exact_loo_path(clf, X, y, n_jobs=2)
t_exact = time.perf_counter() - tic
print(f"fit + IACV: {t_iacv:.2f} s; exact leave-one-out ({n} refits): {t_exact:.2f} s")
print(f"largest difference along the path: {np.abs(clf.loo_path_ - exact).max():.4f} "
      f"(log-loss about {exact.min():.3f})")

disp = RiskPathDisplay.from_estimator(clf, X_test, y_test, name="gradient descent")
disp.ax_.plot(exact, color="k", linewidth=0.8, label="exact leave-one-out")
disp.ax_.legend()
plt.show()

# %%
# Early stopping by IACV
# ----------------------
# :class:`~skacv.TrajectoryEarlyStoppingCV` with ``criterion="loo"``: one
# path per penalty, the iterate of smallest leave-one-out log-loss, no refit.
search = TrajectoryEarlyStoppingCV(
    TrajectoryLogisticRegression(solver="gd", max_iter=n_steps),
    criterion="loo",
    param_grid={"alpha": [1.0, 3e-1, 1e-1, 3e-2, 1e-2, 1e-3]},
).fit(X, y)
proba = search.predict_proba(X_test)[:, 1]
test_loss = -np.mean(y_test * np.log(proba) + (1 - y_test) * np.log1p(-proba))
print(f"selected {search.best_params_} at iteration {search.best_iteration_}")
print(f"leave-one-out log-loss {search.best_risk_:.3f}, test log-loss {test_loss:.3f}, "
      f"test accuracy {search.score(X_test, y_test):.3f}")
RiskPathDisplay.from_estimator(search, X_test, y_test)
plt.show()
