"""
=====================================
A real data set: diabetes progression
=====================================

The diabetes data shipped with scikit-learn (442 patients, 10 baseline
variables) with all degree-2 products of the variables: 65 correlated,
non-Gaussian features for 309 training patients. We choose the Lasso penalty
and the number of FISTA iterations on the training data, together, by the
smallest estimated risk (Bellec & Tan 2024; the default, see
:ref:`how_the_choice_is_made`), and also show approximate leave-one-out (Luo,
Ren & Barber 2023); we compare with :class:`~sklearn.linear_model.LassoCV` (5 folds) on
the 133 held-out patients.

The risk estimate is derived for Gaussian-like designs; leave-one-out makes
no assumption on the design. Real features are neither Gaussian nor
independent, so this example also shows how far the estimates can be
trusted here.
"""

# %%
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.datasets import load_diabetes
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LassoCV
from sklearn.metrics import mean_squared_error
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures, StandardScaler

from skacv import RiskPathDisplay, TrajectoryEarlyStoppingCV, TrajectoryLasso

X, y = load_diabetes(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
n_steps, n_alphas = 100, 6
# sphinx_gallery_start_ignore
import os  # noqa: E402

if os.environ.get("SKACV_EXAMPLE_QUICK"):  # smaller sizes for the test suite
    n_steps, n_alphas = 20, 3
# sphinx_gallery_end_ignore


def features():
    return [PolynomialFeatures(2, include_bias=False), StandardScaler()]


# %%
# Penalty and iteration, three ways
# ---------------------------------
# The trajectory searches run one FISTA path per penalty (6 penalties, 100
# iterations each) on all the training data; LassoCV runs 5 folds and a refit
# for each of its 100 penalties.
alphas = np.geomspace(10.0, 0.3, n_alphas)
lasso = TrajectoryLasso(max_iter=n_steps, random_state=0)
models = {
    # defaults: the smallest estimated risk over (alpha, iteration), converged
    # fits included
    "defaults (auto)": TrajectoryEarlyStoppingCV(lasso, param_grid={"alpha": alphas}),
    # one trajectory per penalty from zero, no alpha path
    "memory-matrix risk": TrajectoryEarlyStoppingCV(lasso, criterion="risk", search="grid",
                                                    param_grid={"alpha": alphas}),
    "LassoCV (5 folds)": LassoCV(cv=5, max_iter=10_000),
}
rows = {}
for name, model in models.items():
    pipe = make_pipeline(*features(), model)
    tic = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pipe.fit(X_train, y_train)
    elapsed = time.perf_counter() - tic
    step = pipe[-1]
    alpha = step.alpha_ if hasattr(step, "alpha_") else step.best_params_["alpha"]
    estimate = getattr(step, "best_risk_", np.nan)
    rows[name] = (elapsed, alpha, estimate, mean_squared_error(y_test, pipe.predict(X_test)))
table = pd.DataFrame(rows, index=["time (s)", "alpha", "estimated MSE", "test MSE"]).T
print(table.round(3))

# %%
# The test set has 133 patients: its MSE itself fluctuates by about
# ``MSE * sqrt(2 / 133)``, some 10 %, so the three choices are equivalent
# here.
print(f"standard error of the test MSE: about {table['test MSE'].mean() * np.sqrt(2 / 133):.0f}")

# %%
# Along the selected path
# -----------------------
# The estimated risk along the path (the default criterion for FISTA), the
# approximate leave-one-out error (asked for with ``estimate_loo=True``) and
# the test error of every iterate of the selected penalty
# (``n_iter_no_change=None``: whole paths, not stopped after the estimated
# minimum).
prep = make_pipeline(*features()).fit(X_train)
P_train, P_test = prep.transform(X_train), prep.transform(X_test)
search = TrajectoryEarlyStoppingCV(
    TrajectoryLasso(max_iter=n_steps, random_state=0, estimate_loo=True),
    param_grid={"alpha": alphas}, n_iter_no_change=None,
).fit(P_train, y_train)
RiskPathDisplay.from_estimator(search, P_test, y_test)
plt.show()

# %%
# Where not to trust the risk estimate
# ------------------------------------
# With a tiny penalty the ISTA path approaches least squares with 65
# heavy-tailed features for 309 samples. The risk estimate, whose derivation
# assumes Gaussian-like rows, becomes optimistic; leave-one-out, which makes
# no such assumption, stays closer to the test error (both are within the
# noise of the test error early on).
tiny = TrajectoryLasso(alpha=0.1, solver="ista", max_iter=2 * n_steps, random_state=0,
                       estimate_loo=True)
tiny.fit(P_train, y_train)
disp = RiskPathDisplay.from_estimator(tiny, P_test, y_test, name="ISTA, alpha=0.1")
disp.ax_.set_ylim(2500, 5000)
plt.show()
