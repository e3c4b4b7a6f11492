"""
Robust regression: early-stopped Huber against least squares
============================================================

Heavy-tailed noise (Student t with 3 degrees of freedom) and 5 % gross
outliers in the response. Least squares gradient descent
(:class:`~skacv.IterativeRidge`) and Huber gradient descent
(:class:`~skacv.TrajectoryHuberRegressor`) are both early-stopped by their own
estimates with :class:`~skacv.TrajectoryEarlyStoppingCV`, without folds or
held-out data: the spectral memory-matrix estimate for least squares,
leave-one-out (IACV) for the Huber loss, whose ``risk_path_`` (the estimate
of Tan & Bellec 2024, weighted by the inliers) is drawn too. A large test set
gives the truth.
"""

# %%
import os

import matplotlib.pyplot as plt
import numpy as np
from sklearn.base import clone
from sklearn.linear_model import HuberRegressor

from skacv import IterativeRidge, TrajectoryEarlyStoppingCV, TrajectoryHuberRegressor

quick = os.environ.get("SKACV_EXAMPLE_QUICK") == "1"
n, p, T = (300, 150, 150) if quick else (600, 300, 300)
rng = np.random.default_rng(0)
X = rng.standard_normal((n, p))
beta = np.zeros(p)
beta[:20] = 1.0
noise = rng.standard_t(3, n)
outliers = rng.random(n) < 0.05
noise[outliers] += rng.choice([-1.0, 1.0], outliers.sum()) * 20.0
y = X @ beta + noise


def excess(coef, intercept):
    """Test error on noiseless targets, ||b - beta||^2 + b0^2 (exact: the
    rows of X are standard Gaussian), of one fit or of every iterate."""
    if coef.ndim == 2:
        return ((coef - beta[:, None]) ** 2).sum(axis=0) + intercept**2
    return ((coef - beta) ** 2).sum() + intercept**2


# %%
# The scale of the Huber loss
# ---------------------------
# :class:`~skacv.TrajectoryHuberRegressor` minimises
# :class:`~sklearn.linear_model.HuberRegressor`'s objective with its scale held
# fixed (outliers are residuals beyond ``epsilon * scale``). The default,
# ``scale="auto"``, is the scale ``HuberRegressor`` estimates jointly with its
# coefficients at the same ``epsilon`` and ``alpha`` (here ``p < n``; with as
# many coefficients as rows that scale collapses to zero and the default is
# the median absolute deviation of ``y``). The MAD of ``y`` contains the
# signal, so a loss at that scale clips only the gross outliers: both are
# drawn below.
pilot = HuberRegressor().fit(X, y)
mad = 1.4826 * np.median(np.abs(y - np.median(y)))
print(f"scale: auto {TrajectoryHuberRegressor(max_iter=1).fit(X, y).scale_:.2f} "
      f"(HuberRegressor's {pilot.scale_:.2f}), MAD of y {mad:.2f}")

# %%
# Early stopping by the estimates
# -------------------------------
# One path per estimator; ``n_iter_no_change=None`` runs it to ``max_iter`` so
# that the whole path can be drawn. ``criterion="auto"`` selects least squares
# on its (spectral) ``risk_path_`` and the Huber paths on leave-one-out (IACV).
searches = {
    "least squares": IterativeRidge(alpha=0.0, max_iter=T),
    "Huber, scale auto": TrajectoryHuberRegressor(max_iter=T),
    "Huber, MAD of y": TrajectoryHuberRegressor(max_iter=T, scale=mad),
}
errors = {}
for name, est in searches.items():
    search = TrajectoryEarlyStoppingCV(est, search="grid", n_iter_no_change=None,
                                       random_state=0).fit(X, y)  # each its own alpha
    searches[name] = search
    path = excess(search.estimator_.coef_path_, search.estimator_.intercept_path_)
    t = search.best_iteration_
    errors[name] = path[t]
    print(f"{name:19s} {search.criterion_:4s}: iteration {t:3d}, excess test error "
          f"{path[t]:.2f} (best {path.min():.2f} at {path.argmin()}, last {path[-1]:.2f})")
errors["HuberRegressor\n(converged)"] = excess(pilot.coef_, pilot.intercept_)

# %%
# The estimates along the paths
# -----------------------------
# The estimates target the squared prediction error on new data, which
# includes the noise: the truth drawn with them is the excess error plus the
# mean squared noise of the training sample, ``||eps||^2 / n`` (the target of
# Tan & Bellec 2024; the outliers make it large). Dashed: the criterion of the
# selection; dotted: the Huber ``risk_path_``. Vertical lines: the selections.
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4.5))
it = np.arange(T + 1)
level = np.mean(noise**2)
colors = {"least squares": "tab:red", "Huber, scale auto": "tab:blue",
          "Huber, MAD of y": "tab:orange"}
for name, search in searches.items():
    est, c = search.estimator_, colors[name]
    truth = excess(est.coef_path_, est.intercept_path_) + level
    ax0.plot(it, truth, color=c, label=f"{name}: truth")
    crit = est.risk_path_ if search.criterion_ == "risk" else est.loo_path_
    ax0.plot(it, crit, color=c, ls="--", label=f"{name}: {search.criterion_} estimate")
    if search.criterion_ == "loo":  # (the search's estimates: leave-one-out alone)
        risk = clone(est).set_params(estimate_risk=True, estimate_loo=False).fit(X, y)
        ax0.plot(it, risk.risk_path_, color=c, ls=":", lw=1)
    ax0.axvline(search.best_iteration_, color=c, lw=0.8)
ax0.set_ylim(level - 16, level + 32)
ax0.set_xlabel("iteration")
ax0.set_ylabel("squared prediction error")
ax0.set_title(f"t_3 noise and 5 % outliers (n={n}, p={p})")
ax0.legend(fontsize=7, loc="lower right", ncol=2)
names = list(errors)
ax1.bar(range(len(names)), [errors[k] for k in names],
        color=["tab:red", "tab:blue", "tab:orange", "gray"])
ax1.set_xticks(range(len(names)), names, fontsize=8)
ax1.set_ylabel("excess test error ||b - beta||^2 + b0^2")
ax1.set_title("The selected iterates on new data")
fig.tight_layout()
plt.show()
