"""The candidates of a search share the first validation of its data
(``FitPlan.checks``, :class:`skacv.estimators._setup.SharedChecks`): one
validation and one data fingerprint for the search, the same fits; and
their shared design's Lipschitz constant."""

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_array_equal

from skacv import (
    TrajectoryEarlyStoppingCV,
    TrajectoryElasticNet,
    TrajectoryLasso,
    TrajectoryLogisticRegression,
)
from skacv._trace import record
from skacv.estimators._setup import FitPlan, SharedChecks


def _data(n=90, p=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:5] = 1.0
    return X, X @ beta + rng.standard_normal(n)


def test_a_first_fit_takes_the_checks_of_the_same_objects_only():
    """A first fit given the objects another one validated takes its
    validated data, fingerprint and ``n_features_in_`` /
    ``feature_names_in_``; given a copy it validates; a warm refit on other
    data is still refused (the fingerprint kept is the data's)."""
    X, y = _data()
    Xf = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    checks = SharedChecks()
    plan = FitPlan(checks=checks)
    first, second, third = (TrajectoryLasso(a, max_iter=30, random_state=0)
                            for a in (0.05, 0.1, 0.2))
    with record() as paths:
        with first.planned(plan):
            first.fit(Xf, y)
        with second.planned(plan):
            second.fit(Xf, y)
        with third.planned(plan):
            third.fit(Xf.copy(), y)
    assert paths.details("validate") == [{"reset": True}, {"reset": True}]
    assert paths.count("shared_checks") == 1 and paths.count("data_fingerprint") == 2
    assert second.n_features_in_ == X.shape[1]
    assert_array_equal(second.feature_names_in_, Xf.columns)
    alone = TrajectoryLasso(0.1, max_iter=30, random_state=0).fit(Xf, y)
    for attr in ("coef_path_", "intercept_path_", "risk_path_", "risk_reliable_"):
        assert_array_equal(getattr(second, attr), getattr(alone, attr))
    second.set_params(warm_start=True, max_iter=40)
    with pytest.raises(ValueError, match="other training data"):
        second.fit(Xf.to_numpy() + 1.0, y)


def test_a_search_validates_its_data_once():
    """The candidates of a search over alpha (every round of its walk) and
    of a grid search take the first candidate's validation; the selected
    fit is the same bits as a fit of its own."""
    X, y = _data()
    grid = np.geomspace(0.5, 0.005, 8)
    with record() as paths:
        search = TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=200),
                                           param_grid={"alpha": grid}, random_state=0).fit(X, y)
    first_fits = paths.count("validate") + paths.count("shared_checks")
    assert paths.count("validate") == 1 and first_fits > 2
    assert paths.count("data_fingerprint") == 1
    assert paths.count("dense_lipschitz") == 1  # the candidates share their design
    est = search.estimator_
    alone = TrajectoryLasso(max_iter=est.n_iter_, random_state=0,
                            alpha=search.best_params_["alpha"]).fit(X, y)
    assert_array_equal(est.coef_path_, alone.coef_path_)
    with record() as paths:
        TrajectoryEarlyStoppingCV(TrajectoryElasticNet(max_iter=100),
                                  param_grid={"l1_ratio": [0.2, 0.5, 0.9]},
                                  random_state=0).fit(X, y)
    assert paths.count("validate") == 1 and paths.count("shared_checks") >= 2


def test_an_estimator_with_checks_of_its_own_validates_each_time():
    """The logistic regression encodes its classes in its checks: every
    candidate validates its data."""
    X, y = _data()
    with record() as paths:
        TrajectoryEarlyStoppingCV(TrajectoryLogisticRegression(max_iter=50),
                                  param_grid={"alpha": [0.1, 0.01]},
                                  random_state=0).fit(X, (y > 0).astype(int))
    assert paths.count("shared_checks") == 0
    assert [d["reset"] for d in paths.details("validate")].count(True) >= 2


def test_a_design_computes_its_dense_lipschitz_constant_once():
    """LAPACK's top eigenvalue of the smaller Gram matrix, once a design:
    the same number at every call."""
    from skacv._policy import get_policy
    from skacv.linalg._design import make_design
    from skacv.linalg._linalg import top_eigenvalue

    X, _ = _data()
    design = make_design(X)
    with record() as paths:
        first, again = design.lipschitz(), design.lipschitz()
    assert paths.count("dense_lipschitz") == 1
    fresh = make_design(X)
    assert first == again == top_eigenvalue(fresh.gram(side="auto"), policy=get_policy())
