"""The search calls estimators through a declared protocol, and its
conditional parameters say when they are ignored.

* an estimator written here, outside the package, subclassing
  :class:`skacv.SearchProtocol` (no skacv fit shell), is searched by
  :class:`~skacv.TrajectoryEarlyStoppingCV`: its choice is the brute-force
  argmin of its own risk paths over (alpha, iteration), whole or grown in
  warm-started stages (the stages' protocol calls recorded);
* an object that does not offer the protocol is refused with a clear error;
* a conditional parameter (``path_neighbors``, ``path_params``, ``cv``,
  ``fold_alignment``, ``fold_dtype``) set and ignored warns, and is indeed
  ignored (the same choice as at its default); set and read, it does not warn.

The source checks (no private estimator attribute read by the search, no
call from ``linalg`` into the search) are in ``tests/test_architecture.py``.
"""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.linear_model import Lasso
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skacv import (
    IterativeRidge,
    SearchProtocol,
    TrajectoryEarlyStoppingCV,
    TrajectoryLasso,
    TrajectoryLogisticRegression,
)


class Calls(list):
    """The protocol calls of every clone of an estimator (shared by clones)."""

    def __deepcopy__(self, memo):
        return self


class HeldOutRidge(SearchProtocol, RegressorMixin, BaseEstimator):
    """Gradient descent on the ridge objective ``||y - X w - b||^2 / (2 n) +
    alpha ||w||^2 / 2`` from zero, keeping the path; its ``risk_path_`` is
    the error on a validation set given as a parameter. Written against
    the public protocol only: warm starts continue the stored path."""

    def __init__(self, alpha=1.0, max_iter=50, warm_start=False, estimate_risk=True,
                 X_val=None, y_val=None, calls=None):
        self.alpha = alpha
        self.max_iter = max_iter
        self.warm_start = warm_start
        self.estimate_risk = estimate_risk
        self.X_val = X_val
        self.y_val = y_val
        self.calls = calls

    def _log(self, name):
        if self.calls is not None:
            self.calls.append(name)

    def fit(self, X, y, sample_weight=None):
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
        n, p = X.shape
        xm, ym = X.mean(axis=0), y.mean()
        Xc, yc = X - xm, y - ym
        step = 1.0 / (np.linalg.norm(Xc, 2) ** 2 / n + self.alpha)
        if self.warm_start and hasattr(self, "coef_path_"):
            path = list(self.coef_path_.T)
        else:
            path = [np.zeros(p)]
        while len(path) < self.max_iter + 1:
            w = path[-1]
            path.append(w - step * (Xc.T @ (Xc @ w - yc) / n + self.alpha * w))
        self.coef_path_ = np.array(path[: self.max_iter + 1]).T
        self.intercept_path_ = ym - xm @ self.coef_path_
        self.n_iter_ = self.max_iter
        if self.estimate_risk:
            pred = self.X_val @ self.coef_path_ + self.intercept_path_
            self.risk_path_ = np.mean((self.y_val[:, None] - pred) ** 2, axis=0)
        self.coef_, self.intercept_ = self.coef_path_[:, -1], self.intercept_path_[-1]
        self.n_features_in_ = p
        return self

    def predict(self, X):
        return np.asarray(X) @ self.coef_ + self.intercept_

    def predict_path(self, X):
        return np.asarray(X) @ self.coef_path_ + self.intercept_path_

    # the protocol: record what the stages ask for
    def planned(self, plan):
        self._log("planned")
        return super().planned(plan)

    def finish_deferred(self):
        self._log("finish_deferred")

    def release_warm_state(self):
        self._log("release_warm_state")

    def record_iterate(self, iteration):
        self._log(("record_iterate", iteration))


def _problem(seed=1, n=80, p=30, n_val=400):
    rng = np.random.default_rng(seed)
    beta = rng.standard_normal(p) * (rng.random(p) < 0.3)
    X, X_val = rng.standard_normal((n, p)), rng.standard_normal((n_val, p))
    y = X @ beta + 1.5 * rng.standard_normal(n) + 0.7
    y_val = X_val @ beta + 1.5 * rng.standard_normal(n_val) + 0.7
    return X, y, X_val, y_val


ALPHAS = [0.3, 0.1, 0.03, 0.01, 0.003, 0.0]


def _brute_force(X, y, X_val, y_val, lengths):
    """The argmin over (alpha, iteration) of the risk paths of from-zero
    fits of the lengths ``lengths``: first alpha, then earliest iteration
    within the search's tie tolerance of the minimum."""
    paths = [HeldOutRidge(alpha=a, max_iter=T, X_val=X_val, y_val=y_val).fit(X, y).risk_path_
             for a, T in zip(ALPHAS, lengths, strict=True)]
    m = min(float(r.min()) for r in paths)
    for i, r in enumerate(paths):
        hits = np.flatnonzero(r <= m + 1e-9 * abs(m))
        if hits.size:
            return i, int(hits[0]), float(r[hits[0]])
    raise AssertionError("no minimum")


def test_an_estimator_written_outside_the_package_is_searched_by_its_own_risk():
    X, y, X_val, y_val = _problem()
    calls = Calls()
    est = HeldOutRidge(max_iter=60, X_val=X_val, y_val=y_val, calls=calls)
    search = TrajectoryEarlyStoppingCV(est, param_grid={"alpha": ALPHAS}, search="grid",
                                       criterion="risk", n_iter_no_change=None).fit(X, y)
    i, t, risk = _brute_force(X, y, X_val, y_val, [60] * len(ALPHAS))
    assert search.best_params_ == {"alpha": ALPHAS[i]}
    assert search.best_iteration_ == t
    assert search.best_risk_ == risk
    assert 0 < i < len(ALPHAS) - 1 and 0 < t < 60  # inside the grid and the path
    # the kept fit predicts with the selected iterate, and was told which one
    ref = HeldOutRidge(alpha=ALPHAS[i], max_iter=60, X_val=X_val, y_val=y_val).fit(X, y)
    assert_allclose(search.predict(X_val), X_val @ ref.coef_path_[:, t] + ref.intercept_path_[t],
                    rtol=1e-12)
    assert ("record_iterate", t) in calls


def test_criterion_auto_and_search_auto_take_the_protocol_defaults():
    """The defaults say: no alpha path (path_problem undeclared), no block
    of folds, no linear spectral risk: "auto" is the risk over a grid."""
    X, y, X_val, y_val = _problem()
    est = HeldOutRidge(max_iter=40, X_val=X_val, y_val=y_val)
    search = TrajectoryEarlyStoppingCV(est, param_grid={"alpha": ALPHAS},
                                       n_iter_no_change=None).fit(X, y)
    assert (search.criterion_, search.search_) == ("risk", "grid")
    i, t, risk = _brute_force(X, y, X_val, y_val, [40] * len(ALPHAS))
    assert (search.best_params_["alpha"], search.best_iteration_, search.best_risk_) == (
        ALPHAS[i], t, risk)


def test_the_stages_grow_an_outside_estimator_by_its_warm_start(speed_policy):
    """Stages (``n_iter_no_change``) on the protocol: every grid point's path
    stops before ``max_iter``, its plan is entered and its warm state
    released; the deferred work of the selected one only is finished; the
    choice is the brute-force argmin over the prefixes fitted (from zero,
    the same numbers)."""
    speed_policy(stage_min_flops=0, stage_min_flops_linear=0, stage_min_flops_chains=0)
    X, y, X_val, y_val = _problem()
    calls = Calls()
    est = HeldOutRidge(max_iter=400, X_val=X_val, y_val=y_val, calls=calls)
    search = TrajectoryEarlyStoppingCV(est, param_grid={"alpha": ALPHAS}, search="grid",
                                       criterion="risk", n_iter_no_change=5).fit(X, y)
    lengths = [int(n) for n in search.cv_results_["n_iter"]]
    assert max(lengths) < 400  # the stages stopped every path
    for name in ("planned", "release_warm_state"):
        assert calls.count(name) == len(ALPHAS), name
    assert calls.count("finish_deferred") == 1
    i, t, risk = _brute_force(X, y, X_val, y_val, lengths)
    assert (search.best_params_["alpha"], search.best_iteration_, search.best_risk_) == (
        ALPHAS[i], t, risk)
    ref = HeldOutRidge(alpha=ALPHAS[i], max_iter=lengths[i], estimate_risk=False).fit(X, y)
    assert_allclose(search.estimator_.coef_path_, ref.coef_path_, rtol=1e-12, atol=1e-14)


class HeldOutLooRidge(HeldOutRidge):
    """:class:`HeldOutRidge` whose only estimate is ``loo_path_`` (the same
    validation error), with no ``loo_options`` parameter."""

    def __init__(self, alpha=1.0, max_iter=50, warm_start=False, estimate_loo=True,
                 X_val=None, y_val=None, calls=None):
        self.alpha = alpha
        self.max_iter = max_iter
        self.warm_start = warm_start
        self.estimate_loo = estimate_loo
        self.X_val = X_val
        self.y_val = y_val
        self.calls = calls

    def fit(self, X, y, sample_weight=None):
        self.estimate_risk = self.estimate_loo
        try:
            super().fit(X, y, sample_weight)
        finally:
            del self.estimate_risk
        if self.estimate_loo:
            self.loo_path_ = self.risk_path_
            del self.risk_path_
        return self


def test_leave_one_out_of_many_samples_takes_an_estimator_without_loo_options(
        statistical_policy):
    """With more samples than ``auto_loo_samples``, ``criterion="auto"``
    chooses a subsampled leave-one-out; an estimator without
    ``loo_options`` sizes its own leave-one-out and is searched by its
    ``loo_path_`` (the brute-force argmin), not refused."""
    statistical_policy(auto_loo_samples=20, auto_loo_samples_max=30)
    X, y, X_val, y_val = _problem(n=80)
    est = HeldOutLooRidge(max_iter=40, X_val=X_val, y_val=y_val)
    search = TrajectoryEarlyStoppingCV(est, param_grid={"alpha": ALPHAS}, search="grid",
                                       n_iter_no_change=None).fit(X, y)
    assert search.criterion_ == "loo" and search._loo_subsample is not None
    i, t, loo = _brute_force(X, y, X_val, y_val, [40] * len(ALPHAS))
    assert (search.best_params_["alpha"], search.best_iteration_, search.best_risk_) == (
        ALPHAS[i], t, loo)


def test_too_few_samples_for_the_folds_keep_a_risk_only_estimate():
    """criterion="auto" below cv samples with more features than samples
    takes leave-one-out along the path where the estimator tracks it
    (tests/test_selection.py); one with the risk estimate only keeps it,
    with a warning that says the folds need more samples."""
    X, y, X_val, y_val = _problem(n=4, p=8)
    with pytest.warns(UserWarning, match="uses the risk estimate.*needs at least 5"):
        search = TrajectoryEarlyStoppingCV(HeldOutRidge(X_val=X_val, y_val=y_val),
                                           param_grid={"alpha": ALPHAS}).fit(X, y)
    assert search.criterion_ == "risk"


def test_an_object_without_the_protocol_is_refused():
    X, y, _, _ = _problem()
    assert not isinstance(Lasso(), SearchProtocol)
    assert isinstance(TrajectoryLasso(), SearchProtocol)
    for est in (Lasso(), make_pipeline(StandardScaler(), TrajectoryLasso())):
        with pytest.raises(TypeError, match="not a trajectory estimator.*SearchProtocol"):
            TrajectoryEarlyStoppingCV(est).fit(X, y)


# ----------------------------------------------------------------------------
# conditional parameters
# ----------------------------------------------------------------------------


def _lasso_data():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((60, 20))
    y = X[:, :3] @ np.array([2.0, -1.0, 1.0]) + rng.standard_normal(60)
    return X, y


def _fit_quietly(search, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return search.fit(X, y)


def _ignored_warnings(search, X, y):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search.fit(X, y)
    return [str(w.message) for w in caught if " is ignored" in str(w.message)]


@pytest.mark.parametrize("setting, reason", [
    (dict(search="grid", path_neighbors=2), "search='grid'"),
    (dict(search="grid", path_params={"n_alphas": 5}), "search='grid'"),
    (dict(param_grid={"alpha": [0.1]}, path_neighbors=0),
     "search='auto' resolved to search_='grid'"),
    (dict(criterion="risk", cv=3), "criterion='risk'"),
    (dict(criterion="risk", fold_alignment="iteration"), "criterion='risk'"),
    (dict(criterion="loo", fold_dtype="float64"), "criterion='loo'"),
])
def test_a_conditional_parameter_set_and_ignored_warns_and_is_ignored(setting, reason):
    X, y = _lasso_data()
    base = dict(param_grid={"alpha": [0.3, 0.1]}, n_iter_no_change=None, random_state=0)
    base.update(setting)
    name = next(k for k in setting if k not in ("search", "criterion", "param_grid"))
    est = TrajectoryLasso(max_iter=30, estimate_loo=base.get("criterion") == "loo")
    search = TrajectoryEarlyStoppingCV(est, **base)
    messages = _ignored_warnings(search, X, y)
    assert len(messages) == 1 and messages[0].startswith(f"{name}=")
    assert reason in messages[0]
    # ignored indeed: the choice at the parameter's default is the same
    plain = {k: v for k, v in base.items() if k != name}
    ref = _fit_quietly(TrajectoryEarlyStoppingCV(est, **plain), X, y)
    assert (search.best_params_, search.best_iteration_, search.best_risk_) == (
        ref.best_params_, ref.best_iteration_, ref.best_risk_)


def test_fold_dtype_warns_where_the_folds_are_fitted_one_by_one():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((60, 5))
    y = (X[:, 0] + 0.5 * rng.standard_normal(60) > 0).astype(int)
    search = TrajectoryEarlyStoppingCV(TrajectoryLogisticRegression(max_iter=20),
                                       criterion="kfold", cv=3, fold_dtype="float64",
                                       n_iter_no_change=None)
    messages = _ignored_warnings(search, X, y)
    assert len(messages) == 1 and "fold_dtype='float64'" in messages[0]
    assert "fitted one by one" in messages[0]


@pytest.mark.parametrize("setting", [
    dict(),  # every default
    dict(search="path", path_neighbors=2, path_params={"n_alphas": 8}),
    dict(criterion="kfold", cv=3, fold_alignment="iteration", fold_dtype="float64"),
    dict(criterion="auto", cv=3, fold_alignment="iteration"),  # "auto" may use the folds
    dict(search="grid", param_grid={"alpha": [0.1]}, path_neighbors=1, cv=5),  # defaults
])
def test_a_conditional_parameter_read_or_at_its_default_does_not_warn(setting):
    X, y = _lasso_data()
    est = IterativeRidge(max_iter=30) if setting.get("criterion") == "kfold" else \
        TrajectoryLasso(max_iter=30)
    search = TrajectoryEarlyStoppingCV(est, n_iter_no_change=None, random_state=0, **setting)
    assert _ignored_warnings(search, X, y) == []
    assert_array_equal(search.predict(X), search.estimator_.predict(X))
