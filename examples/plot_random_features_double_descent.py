"""
====================================================
Double descent of random-feature regression, tracked
====================================================

Least squares on ``p`` random ReLU features ``max(W x / sqrt(d), 0)`` of
``n`` samples shows *double descent* in ``p``: the test risk of the
(near-)interpolating fit rises as ``p`` approaches ``n``, peaks at the
interpolation threshold ``p = n`` and decreases again for ``p > n`` (Belkin,
Hsu, Ma & Mandal 2019; Mei & Montanari 2022).

We fit each model by gradient descent preconditioned with EigenPro
(``IterativeRidge(solver="eigenpro", alpha=0)``), whose rank-``q``
preconditioner is estimated on *unlabelled* rows independent of the training
set: the path is then plain gradient descent in whitened coordinates, and the
memory-matrix estimate of the out-of-sample risk along the path (Bellec &
Tan 2024) keeps its guarantee (Gaussian designs, ``p`` proportional to
``n``; random features of Gaussian inputs with ``d`` proportional to ``n``
behave like them, which the plot checks).

For every ``p`` we record

* the test risk and the estimated risk of the last iterate (200 steps, close
  to the minimum-norm interpolant once ``p`` is away from ``n``);
* the test risk of the iterate chosen by the *estimated* risk (early stopping
  without a validation set), which removes the peak.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np

from skacv import IterativeRidge

rng = np.random.default_rng(0)
d, n, n_test, n_unlabelled, sigma = 200, 400, 4000, 1000, 0.5
widths = [50, 100, 200, 300, 350, 400, 450, 500, 600, 800, 1200, 2400]
# sphinx_gallery_start_ignore
import os  # noqa: E402

if os.environ.get("SKACV_EXAMPLE_QUICK"):  # smaller sizes for the test suite
    d, n, n_test, n_unlabelled = 50, 100, 500, 200
    widths = [25, 100, 200, 600]
# sphinx_gallery_end_ignore
beta = rng.standard_normal(d) / np.sqrt(d)


def target(X):
    # a linear part and a quadratic part that ReLU features can only approximate
    quad = (np.linalg.norm(X, axis=1) ** 2 / X.shape[1] - 1) * np.sqrt(X.shape[1])
    return X @ beta + 0.5 * quad


X = rng.standard_normal((n, d))
y = target(X) + sigma * rng.standard_normal(n)
X_test = rng.standard_normal((n_test, d))
y_test = target(X_test) + sigma * rng.standard_normal(n_test)
X_unlabelled = rng.standard_normal((n_unlabelled, d))
W = rng.standard_normal((d, max(widths)))


def features(A, p):
    return np.maximum(A @ W[:, :p] / np.sqrt(d), 0)


# %%
# Paths for a range of widths
# ---------------------------

last_test, last_est, chosen_test, best_test = [], [], [], []
for p in widths:
    F, F_test = features(X, p), features(X_test, p)
    est = IterativeRidge(alpha=0.0, solver="eigenpro", n_components=min(50, p - 1),
                         subsample_size=features(X_unlabelled, p), max_iter=200,
                         n_probes=None, random_state=0).fit(F, y)
    test = np.mean((est.predict_path(F_test) - y_test[:, None]) ** 2, axis=0)
    t_hat = int(np.argmin(est.risk_path_))
    last_test.append(test[-1])
    last_est.append(est.risk_path_[-1])
    chosen_test.append(test[t_hat])
    best_test.append(test.min())
    print(f"p={p:5d}  last iterate: test {test[-1]:.3f}, estimated {est.risk_path_[-1]:.3f}"
          f"  | stopped at t={t_hat:3d}: test {test[t_hat]:.3f} "
          f"(best t={int(test.argmin()):3d}: {test.min():.3f})")

# %%
# The estimated risk follows the test risk through the peak at ``p = n``;
# stopping where the estimate is smallest gives a risk close to the best
# early-stopped one at every width, without the peak.

fig, ax = plt.subplots(figsize=(6.5, 4.5), layout="constrained")
ax.semilogx(widths, last_test, "o-", label="test risk, last iterate")
ax.semilogx(widths, last_est, "s--", label="estimated risk, last iterate")
ax.semilogx(widths, chosen_test, "^-", label="test risk, stopped by the estimate")
ax.semilogx(widths, best_test, ":", color="gray", label="test risk, best iterate")
ax.axvline(n, color="k", lw=0.8)
ax.set(xlabel="number of random features p", ylabel="squared error",
       title=f"Double descent (n = {n}, d = {d})")
ax.legend(fontsize=8, loc="lower left")
plt.show()

# %%
# One path near the threshold: the estimate along all the iterates.

p = n + n // 8  # 450
F, F_test = features(X, p), features(X_test, p)
est = IterativeRidge(alpha=0.0, solver="eigenpro", n_components=50,
                     subsample_size=features(X_unlabelled, p), max_iter=200,
                     n_probes=None, random_state=0).fit(F, y)
test = np.mean((est.predict_path(F_test) - y_test[:, None]) ** 2, axis=0)
fig, ax = plt.subplots(figsize=(6.5, 4.5), layout="constrained")
ax.plot(test, label="test risk")
ax.plot(est.risk_path_, "--", label="estimated risk (risk_path_)")
ax.set(xlabel="iteration", ylabel="squared error", title=f"Along the path, p = {p}")
ax.legend()
plt.show()
