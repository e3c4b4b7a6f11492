"""Known defects of old scikit-learn versions that the tests must work around."""

import inspect

import pytest
from sklearn.base import is_classifier
from sklearn.utils import estimator_checks


def sklearn_labels_by_first_sample():
    """True when scikit-learn's checks binarise labels by ``y.flat[0]`` (1.6)."""
    source = inspect.getsource(estimator_checks._enforce_estimator_tags_y)
    return "y.flat[0]" in source


def expected_failed_checks(estimator):
    """Checks that are wrong in the installed scikit-learn, not in skacv.

    scikit-learn 1.6 binarises the labels of ``check_sample_weight_equivalence``
    by the first label of each data set (``y.flat[0]``), which differs between
    the shuffled weighted data and the repeated data, so a binary-only
    classifier gets different labels in its two fits (later versions use
    ``y.min()``). With the newest scikit-learn this returns nothing: every
    check must pass.
    """
    if not sklearn_labels_by_first_sample() or not is_classifier(estimator):
        return {}
    why = "scikit-learn 1.6 gives the two fits different binary labels"
    return {"check_sample_weight_equivalence_on_dense_data": why,
            "check_sample_weight_equivalence_on_sparse_data": why}


def parametrize_with_checks(estimators, **kwargs):
    """scikit-learn's ``parametrize_with_checks`` with the checks as a list:
    1.6 passes pytest a generator, which pytest deprecates (a removal in
    pytest 10 would break the tests against the oldest supported version)."""
    mark = estimator_checks.parametrize_with_checks(estimators, **kwargs)
    names, values = mark.args
    return pytest.mark.parametrize(names, list(values), **mark.kwargs)
