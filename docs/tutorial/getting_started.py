"""
Getting started
===============

Ten minutes from a fresh clone to an early-stopped Lasso whose number of
iterations and penalty were chosen without a validation set. The code below
runs as it is, in order, in one Python session; the outputs and the figure
are those it produced when this page was built.

Install
-------

skacv needs Python 3.10 or later, NumPy, SciPy, scikit-learn and joblib;
matplotlib (the ``plot`` extra) draws the figures. It is not on PyPI: from a
clone of the repository, in a fresh virtual environment,

.. code-block:: bash

    python -m venv .venv && . .venv/bin/activate
    pip install ".[plot]"
    python -m skacv demo

The demo runs in well under a minute: on simulated data, where the truth is
known, it prints the estimate against the true error along a path and marks
three choices of the iteration in ``skacv_demo.png``.
"""

# %%
# Fit a trajectory estimator
# --------------------------
#
# :class:`~skacv.TrajectoryLasso` minimises scikit-learn's Lasso objective by
# FISTA from zero and keeps **every iterate**. It is a scikit-learn
# regressor: ``fit``, ``predict``, ``score``, pipelines and grid searches work
# as usual. Here ``p = 800`` features for 500 training samples.

import numpy as np
from sklearn.datasets import make_regression
from sklearn.model_selection import train_test_split

from skacv import TrajectoryLasso

X, y = make_regression(n_samples=1000, n_features=800, n_informative=40,
                       noise=10.0, random_state=0)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.5,
                                                    random_state=0)

est = TrajectoryLasso(alpha=0.5, max_iter=60, random_state=0).fit(X_train, y_train)
print(est.coef_path_.shape)              # one column per iterate; 0 is the start
print(est.predict_path(X_test).shape)    # predictions of every iterate

# %%
# Read the risk estimate
# ----------------------
#
# ``risk_path_[t]`` estimates the mean squared error of iterate ``t`` on new
# data, from the training data alone (Bellec & Tan 2024). The held-out half
# measures the same quantity, so we can compare:

test_mse = ((y_test[:, None] - est.predict_path(X_test)) ** 2).mean(axis=0)
train_mse = ((y_train[:, None] - est.predict_path(X_train)) ** 2).mean(axis=0)
t = int(np.argmin(est.risk_path_))
print(f"stop at iteration {t}: estimated risk {est.risk_path_[t]:.0f}, "
      f"test MSE {test_mse[t]:.0f}, training MSE {train_mse[t]:.0f}")

# %%
# The training error, half of the others, is no estimate of the error on new
# data in this regime; the estimate follows the test error up to a few
# percent (:ref:`estimate_accuracy`). ``estimate_loo=True`` adds
# ``loo_path_``, the leave-one-out error of every iterate (Luo, Ren & Barber
# 2023), which assumes nothing about the distribution of the features.

est_loo = TrajectoryLasso(alpha=0.5, max_iter=60, estimate_loo=True,
                          random_state=0).fit(X_train, y_train)
print(f"iteration {t}: leave-one-out {est_loo.loo_path_[t]:.0f}, "
      f"estimated risk {est_loo.risk_path_[t]:.0f}, test MSE {test_mse[t]:.0f}")

# %%
# Choose the penalty and the iteration, in a pipeline
# ---------------------------------------------------
#
# :class:`~skacv.TrajectoryEarlyStoppingCV` chooses both from fits on all
# the training data and never refits. With its defaults it takes ``alpha``
# from an automatic grid, as :class:`~sklearn.linear_model.LassoCV` does, and
# returns the smallest estimated risk over every (``alpha``, iteration) pair
# (:ref:`how_the_choice_is_made`). Preprocessing goes in a pipeline around it.

from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skacv import TrajectoryEarlyStoppingCV

search = TrajectoryEarlyStoppingCV(TrajectoryLasso(random_state=0))
model = make_pipeline(StandardScaler(), search).fit(X_train, y_train)

fitted = model[-1]
print(f"search_={fitted.search_!r}, criterion_={fitted.criterion_!r}")
print(f"alpha={fitted.best_params_['alpha']:.3g}, iteration {fitted.best_iteration_}")
mse = ((y_test - model.predict(X_test)) ** 2).mean()
print(f"estimated risk {fitted.best_risk_:.0f}, test MSE {mse:.0f}")

# %%
# ``best_risk_`` is the estimate at the choice (lower is better).
# ``fitted.estimator_`` is the fitted :class:`~skacv.TrajectoryLasso` of the
# chosen ``alpha`` with its whole path; its ``coef_`` is the chosen iterate,
# which ``model.predict`` uses. ``cv_results_`` has one row per ``alpha``:
# ``path_risk`` scores the converged fits, and the few trajectories fitted
# from zero near the best ``alpha`` have their best iteration and estimate.

import pandas as pd

res = pd.DataFrame(fitted.cv_results_)
columns = ["param_alpha", "path_risk", "trajectory_fitted", "best_iteration", "min_risk"]
print(res.loc[res["trajectory_fitted"], columns].to_string(float_format="{:.3g}".format))

# %%
# ``min_risk`` is the smallest estimate over the iterates that
# ``risk_reliable_`` trusts: where the trusted part of a trajectory ends
# before its estimate has come down (the smallest alphas here), that alpha
# scores high and loses.
#
# To search your own values pass ``param_grid={"alpha": [2.0, 1.0, 0.5]}``;
# ``search="grid"`` keeps the estimator's own ``alpha`` and chooses the
# iteration only.
#
# Plot the path
# -------------
#
# :class:`~skacv.RiskPathDisplay` draws the estimates along the path of the
# chosen ``alpha``, the test error when given held-out data (it goes
# through the pipeline's scaler first), and marks the choice.

from skacv import RiskPathDisplay

disp = RiskPathDisplay.from_estimator(model, X_test, y_test)
disp.figure_.set_size_inches(9, 4.5)

# %%
# The estimate follows the test error down to its minimum, where the marker
# sits. The first iterates, far above, leave the top of the axes
# (``ylim=None`` shows them all).
#
# Next
# ----
#
# * :ref:`how_the_choice_is_made`: the defaults, in one page.
# * The :ref:`user_guide`: choosing the iteration and the penalty, the
#   estimate's diagnostics, confidence intervals, Dask, EigenPro.
# * The :ref:`examples` and the :ref:`api`.
