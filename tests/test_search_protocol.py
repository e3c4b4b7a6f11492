"""Conditional parameters of :class:`~skacv.TrajectoryEarlyStoppingCV`
say when they are ignored: ``path_neighbors``, ``path_params``, ``cv``,
``fold_alignment`` and ``fold_dtype`` set and ignored warn, and are indeed
ignored (the same choice as at their default); set and read, they do not
warn.
"""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from skacv import (
    IterativeRidge,
    TrajectoryEarlyStoppingCV,
    TrajectoryLasso,
    TrajectoryLogisticRegression,
)


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
