"""scikit-learn's estimator checks over every public estimator of skacv.

The list is built from ``skacv.__all__`` so that estimators added later are
covered automatically. Estimators whose constructor needs an argument (the
meta-estimators: ``estimator=...``) get a small inner trajectory estimator of
the matching kind, following scikit-learn's own test suite.
"""

import inspect

import pytest
from sklearn.base import BaseEstimator, is_classifier
from sklearn_versions import expected_failed_checks, parametrize_with_checks

import skacv

pytest.importorskip("pandas")  # the DataFrame checks must run

# small inner estimators for meta-estimators (keep the checks fast)
_INNER = {
    "regressor": [
        lambda: skacv.TrajectoryLasso(alpha=0.01, max_iter=20, random_state=0),
        lambda: skacv.IterativeRidge(solver="nesterov", max_iter=20, random_state=0),
    ],
    "classifier": [],
}
if hasattr(skacv, "TrajectoryLogisticRegression"):
    _INNER["classifier"].append(
        lambda: skacv.TrajectoryLogisticRegression(max_iter=20, random_state=0)
    )

# parameters a meta-estimator needs with an inner estimator of a given kind
# (classifiers have no risk_path_: select by leave-one-out)
_META_PARAMS = {
    ("TrajectoryEarlyStoppingCV", "classifier"): {"criterion": "loo"},
    # the default search may select a converged fit of its alpha path: solved
    # far below the weight checks' rtol (two solves of weighted and repeated
    # rows agree to the duality-gap tolerance, 1e-4 by default)
    ("TrajectoryEarlyStoppingCV", "regressor"): {"path_params": {"tol": 1e-12}},
}


def _public_estimator_classes():
    out = []
    for name in skacv.__all__:
        obj = getattr(skacv, name)
        if inspect.isclass(obj) and issubclass(obj, BaseEstimator):
            out.append(obj)
    return out


def _required_params(cls):
    sig = inspect.signature(cls.__init__)
    return [
        p.name for p in list(sig.parameters.values())[1:]
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]


def _instances():
    instances = []
    for cls in _public_estimator_classes():
        required = _required_params(cls)
        if not required:
            instances.append(cls())
            continue
        if required != ["estimator"]:
            raise AssertionError(
                f"{cls.__name__} needs {required}: teach tests/test_common.py how to "
                "build it."
            )
        for kind in ("regressor", "classifier"):
            for make in _INNER[kind]:
                instances.append(cls(make(), **_META_PARAMS.get((cls.__name__, kind), {})))
    return instances


ESTIMATORS = _instances()
# K-fold CV along the path (what criterion="auto" chooses on large problems)
ESTIMATORS.append(skacv.TrajectoryEarlyStoppingCV(
    skacv.TrajectoryLasso(alpha=0.01, max_iter=20, random_state=0),
    search="grid", criterion="kfold", cv=3,
    random_state=0))
# the parameters scikit-learn users reach for: non-negative coefficients, class weights
ESTIMATORS += [skacv.TrajectoryElasticNet(positive=True),
               skacv.TrajectoryLogisticRegression(class_weight="balanced")]


def test_every_public_estimator_is_checked():
    """The list covers every estimator class of ``skacv.__all__``."""
    checked = {type(e) for e in ESTIMATORS}
    assert set(_public_estimator_classes()) <= checked
    assert {skacv.TrajectoryLasso, skacv.IterativeRidge} <= checked
    # meta-estimators are checked with a regressor and (if any) a classifier
    for est in ESTIMATORS:
        if "estimator" in est.get_params(deep=False):
            assert is_classifier(est) == is_classifier(est.estimator)


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
