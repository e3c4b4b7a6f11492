"""
=====================================
EigenPro against plain kernel SGD
=====================================

Kernel regression by stochastic gradient descent fits the top eigendirections
of the kernel operator quickly and the others very slowly: with step ``eta``,
after ``t`` steps only the directions with eigenvalue ``lambda_i >~ 1/(eta t)``
are fitted, and the step is capped by the top eigenvalue, ``eta < 2 /
lambda_1``. EigenPro (Ma & Belkin 2017, 2019) flattens the top ``q``
eigenvalues, estimated on a Nystrom subsample, down to ``lambda_{q+1}``; the
step can grow by ``lambda_1 / lambda_{q+1}`` and so can the critical batch
size of Ma, Bassily & Belkin (2018).

On scikit-learn's digits (one-hot regression, Gaussian kernel) we compare, by
epoch, the training error and the test error of

* EigenPro with its automatic batch and step;
* plain kernel SGD with the same batch size and its own optimal step;
* plain kernel SGD at its own critical batch size ``m* = beta / lambda_1 + 1``.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from skacv import EigenProClassifier

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X / 16, y, test_size=0.3, random_state=0)
bandwidth = np.sqrt(10.0)  # k(x, z) = exp(-0.05 ||x - z||^2)

# %%
# Training, one epoch at a time
# ------------------------------
# ``warm_start=True`` continues the same path (same preconditioner, step and
# random batches), so we can score the test set after every epoch. A Nystrom
# subsample of 500 of the 1257 training rows (the default draws 300 at this
# size) and its automatic batch make EigenPro a mini-batch method.

n_epochs = 20
# sphinx_gallery_start_ignore
import os  # noqa: E402

if os.environ.get("SKACV_EXAMPLE_QUICK"):  # smaller sizes for the test suite
    n_epochs = 5
# sphinx_gallery_end_ignore


def run(**params):
    clf = EigenProClassifier(bandwidth=bandwidth, warm_start=True, random_state=0, **params)
    test_error = []
    for epoch in range(1, n_epochs + 1):
        clf.set_params(max_iter=epoch).fit(X_train, y_train)
        test_error.append(1 - clf.score(X_test, y_test))
    return clf, np.array(test_error)


eigenpro, err_ep = run(subsample_size=500)
m = eigenpro.batch_size_
same_batch, err_same = run(n_components=0, batch_size=m)
critical, err_crit = run(n_components=0)

for name, clf in [("EigenPro", eigenpro), (f"plain SGD, batch {m}", same_batch),
                  ("plain SGD, critical batch", critical)]:
    print(f"{name:25s} q={clf.n_components_:2d} m*={clf.critical_batch_size_:5.1f} "
          f"batch={clf.batch_size_:2d} step={clf.step_size_:6.4g}  mse 1/5/{n_epochs}: "
          + " / ".join(f"{clf.train_mse_path_[e]:.4f}" for e in (1, 5, n_epochs)))

# %%
# Epochs to a training error
# --------------------------
# The mean squared error of the one-hot scores that plain SGD at EigenPro's
# batch reaches after 20 epochs is reached by EigenPro after:

target = same_batch.train_mse_path_[-1]
for name, clf in [("EigenPro", eigenpro), ("plain SGD, critical batch", critical)]:
    below = np.flatnonzero(clf.train_mse_path_ <= target)
    print(f"{name}: {below[0] if below.size else f'> {n_epochs}'} epochs")

# %%
# With batches below the critical size, the progress of an epoch is set by the
# per-row step ``1 / beta`` (``beta = max k(x, x)``, and ``max k_P(x, x)`` for
# the EigenPro kernel), so plain SGD at its tiny critical batch is a strong
# baseline per epoch; it needs hundreds of small steps per epoch where EigenPro
# takes a few large matrix products, and its noise keeps it from the small
# training errors that EigenPro reaches.

epochs = np.arange(n_epochs + 1)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
for name, clf, err, style in [
    ("EigenPro", eigenpro, err_ep, "-o"),
    (f"plain SGD, batch {m}", same_batch, err_same, "-s"),
    (f"plain SGD, batch {critical.batch_size_}", critical, err_crit, "-^"),
]:
    axes[0].semilogy(epochs, clf.train_mse_path_, style, ms=3, label=name)
    axes[1].plot(epochs[1:], 100 * err, style, ms=3, label=name)
axes[0].set(xlabel="epoch", ylabel="training mse (one-hot)", title="Training error")
axes[1].set(xlabel="epoch", ylabel="test error (%)", title="Test error", ylim=(0, 10))
axes[0].legend()
plt.show()

# %%
# The flattened spectrum
# ----------------------
# The preconditioner's eigenvalues (Nystrom estimates of the kernel
# operator's) before and after flattening: the top ``q`` are brought down to
# ``lambda_1^(1-a) lambda_{q+1}^a`` (``a = 0.95``), which sets the step.

P = eigenpro.preconditioner_
i = np.arange(1, P.eigenvalues_.shape[0] + 1)
fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
ax.loglog(i, P.eigenvalues_, "o", ms=3, label="kernel operator")
ax.loglog(i, P.flattened_spectrum_, "o", ms=3, label="after preconditioning")
ax.set(xlabel="index i", ylabel="eigenvalue",
       title=f"Preconditioned spectrum: gain lambda_1 / lambda_P = {P.gain_:.0f}")
ax.legend()
plt.show()
