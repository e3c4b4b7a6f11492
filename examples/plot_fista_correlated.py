"""
FISTA on a correlated design: ghost coordinates, the clipped extrapolation and the diagnostic
=============================================================================================

On an equicorrelated Gaussian design (every row shares one common factor)
the memory-matrix risk estimate of Beck & Teboulle's FISTA breaks down
along the path: a coordinate that leaves the support keeps the extrapolated
value ``-beta_k x^{k-1}_j`` ("ghost"), and these ghosts make the Jacobian of
the iterates, on which the estimate rests, explode. skacv's FISTA clips the
extrapolation instead (``FISTA(extrapolation="clipped")``, the default): a
coordinate at zero stays at zero and none crosses zero. It converges as
fast, and its ``risk_path_`` follows the true risk.

``risk_reliable_`` flags the iterates where an estimate cannot be trusted
(here: every late iterate of the plain FISTA), the fit warns, and
:class:`~skacv.TrajectoryEarlyStoppingCV` never selects a flagged iterate.
"""

# %%
import os
import textwrap
import warnings

import matplotlib.pyplot as plt
import numpy as np

from skacv import FISTA, TrajectoryEarlyStoppingCV, TrajectoryLasso
from skacv.exceptions import UnreliableEstimateWarning

quick = os.environ.get("SKACV_EXAMPLE_QUICK") == "1"
n, p, s, rho, sigma, alpha = (150, 300, 15, 0.5, 0.5, 0.05) if quick else \
    (200, 400, 20, 0.5, 0.5, 0.05)
T = 150 if quick else 250
rng = np.random.default_rng(0)
X = np.sqrt(1 - rho) * rng.standard_normal((n, p)) + np.sqrt(rho) * rng.standard_normal((n, 1))
beta = np.zeros(p)
beta[:s] = rng.standard_normal(s)
y = X @ beta + sigma * rng.standard_normal(n)
Sigma = (1 - rho) * np.eye(p) + rho


def true_risk(est):
    """(b_t - beta)^T Sigma (b_t - beta) + sigma^2 for every iterate."""
    H = est.coef_path_ - beta[:, None]
    return np.einsum("it,ij,jt->t", H, Sigma, H) + sigma**2


# %%
# Beck & Teboulle's extrapolation: the memory matrix explodes, the fit says so
# ----------------------------------------------------------------------------
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", UnreliableEstimateWarning)
    plain = TrajectoryLasso(alpha=alpha, solver=FISTA(extrapolation="plain"), max_iter=T,
                            fit_intercept=False, random_state=0).fit(X, y)
for w in caught:  # the warning this example is about, wrapped to the page
    print(textwrap.fill(str(w.message)[:200] + " ...", width=88))
flagged = ~plain.risk_reliable_
print(f"plain FISTA: {flagged.sum()} of {flagged.size} iterates flagged, the first at "
      f"{np.argmax(flagged) if flagged.any() else None}")

# %%
# The default FISTA clips the extrapolation: same speed, a right estimate
# -----------------------------------------------------------------------
fista = TrajectoryLasso(alpha=alpha, max_iter=T, fit_intercept=False, estimate_loo=True,
                        random_state=0).fit(X, y)
ista = TrajectoryLasso(alpha=alpha, solver="ista", max_iter=T, fit_intercept=False,
                       random_state=0).fit(X, y)
for name, est in [("plain FISTA", plain), ("clipped FISTA", fista), ("ISTA", ista)]:
    truth = true_risk(est)
    ok = est.risk_reliable_
    err = np.abs(est.risk_path_ / truth - 1)
    print(f"{name:14s} best true risk {truth.min():.3f} at iteration {truth.argmin():3d}; "
          f"reliable on {ok.mean():4.0%}, mean error there {err[ok].mean():.1%}")

# %%
# The default choice
# ------------------
# ``criterion="auto"`` takes the memory-matrix risk for FISTA
# (:ref:`how_the_choice_is_made`): with the clipped extrapolation its choice
# is close to the oracle's.
truth = true_risk(fista)
for criterion in ("auto", "risk"):
    search = TrajectoryEarlyStoppingCV(
        TrajectoryLasso(alpha=alpha, max_iter=T, fit_intercept=False), criterion=criterion,
        search="grid", random_state=0, n_iter_no_change=None).fit(X, y)
    t = search.best_iteration_
    print(f"criterion={criterion!r} ({search.criterion_!r}): iteration {t}, true risk "
          f"{truth[t]:.3f}, oracle {truth.min():.3f} at {truth.argmin()} "
          f"(regret {truth[t] / truth.min() - 1:.2%})")

# %%
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
it = np.arange(T + 1)
ax0.plot(it, true_risk(plain), color="gray", label="plain FISTA, true risk")
ax0.plot(it, plain.risk_path_, color="tab:red", lw=0.8, label="plain FISTA, risk_path_")
ax0.plot(it, truth, color="black", label="clipped FISTA (default), true risk")
ax0.plot(it, fista.risk_path_, color="tab:green", ls="--",
         label="clipped FISTA, risk_path_")
ax0.plot(it, fista.loo_path_, color="tab:blue", ls=":", label="clipped FISTA, loo_path_")
if flagged.any():
    ax0.axvspan(np.argmax(flagged), T, color="tab:red", alpha=0.08,
                label="plain FISTA flagged")
ax0.axvline(t, color="tab:green", lw=0.8, label=f"choice on risk_path_ ({t})")
ax0.set_ylim(0, 1.5 * truth.max())
ax0.set_xlabel("iteration")
ax0.set_ylabel("out-of-sample squared error")
ax0.set_title(f"Equicorrelated design (rho={rho}), n={n}, p={p}")
ax0.legend(fontsize=7)
ax1.plot(it, plain.risk_diagnostics_.df_fraction, color="tab:red", label="plain FISTA")
ax1.plot(it, fista.risk_diagnostics_.df_fraction, color="tab:green", label="clipped FISTA")
ax1.plot(it, ista.risk_diagnostics_.df_fraction, color="gray", label="ISTA")
ax1.axhspan(0, 1, color="tab:green", alpha=0.08, label="admissible [0, 1)")
ax1.set_ylim(-2, 3)
ax1.set_xlabel("iteration")
ax1.set_ylabel("df_t = (sum_s A[t, s]) / n")
ax1.set_title("Degrees-of-freedom fraction (behind risk_reliable_)")
ax1.legend(fontsize=7)
fig.tight_layout()
plt.show()
