"""The grouped parameters ``risk_options`` and ``loo_options``.

* every key's documented default is the default: an empty dict, ``None`` and
  the dict of the defaults fit the same path bit for bit;
* a key reaches the estimate (``set_params`` included), ``clone`` carries
  the dict, scikit-learn's ``GridSearchCV`` searches over it;
* an unknown key or a value outside a key's constraint is refused with an
  error naming the key (and, for an unknown key, the allowed keys, values
  and defaults); a value of the wrong type by scikit-learn's own message;
* the search merges its leave-one-out subsample into the estimator's
  ``loo_options`` instead of replacing them.
"""

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold

from skacv import (
    IterativeRidge,
    TrajectoryHuberRegressor,
    TrajectoryLasso,
    TrajectoryLogisticRegression,
)
from skacv.model_selection._criteria import switch_estimates


def _data(n=60, p=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    return X, X[:, :4] @ np.ones(4) + rng.standard_normal(n)


@pytest.mark.parametrize("options", [
    {}, {"probe_scheme": "auto", "chain_dtype": "auto"}])
def test_the_documented_defaults_are_the_defaults(options):
    X, y = _data()
    kw = dict(alpha=0.05, max_iter=20, n_probes=4, random_state=0, estimate_loo=True)
    ref = TrajectoryLasso(**kw).fit(X, y)
    loo = {} if not options else {"batch_size": None, "subsample": None,
                                  "store_predictions": False}
    est = TrajectoryLasso(**kw, risk_options=options, loo_options=loo).fit(X, y)
    assert_array_equal(est.risk_path_, ref.risk_path_)
    assert_array_equal(est.loo_path_, ref.loo_path_)
    assert not hasattr(est, "loo_predictions_")


@pytest.mark.parametrize("before, after", [
    (None, {}), ({}, {"probe_scheme": "auto"}), ({"chain_dtype": "auto"}, None)])
def test_a_warm_start_continues_across_the_same_options_spelled_otherwise(before, after):
    """``None``, ``{}`` and the defaults given are one setting: a warm start
    continues (bit for bit the path fitted in one go); a real change of a key
    is still refused."""
    X, y = _data()
    kw = dict(alpha=0.05, n_probes=4, random_state=0)
    cold = TrajectoryLasso(max_iter=30, risk_options=before, **kw).fit(X, y)
    warm = TrajectoryLasso(max_iter=15, warm_start=True, risk_options=before, **kw).fit(X, y)
    warm.set_params(max_iter=30, risk_options=after).fit(X, y)
    assert_array_equal(warm.coef_path_, cold.coef_path_)
    warm.set_params(max_iter=40, risk_options={"probe_scheme": "shared"})
    with pytest.raises(ValueError, match="risk_options"):
        warm.fit(X, y)


def test_a_key_reaches_the_estimate_and_set_params_sets_it():
    """float64 chains differ from the default float32 ones by rounding only;
    the constructor and ``set_params`` give the same fit; ``clone`` carries
    the dict; a subsample and kept predictions reach leave-one-out."""
    X, y = _data()
    base = TrajectoryLasso(alpha=0.05, max_iter=20, n_probes=4, random_state=0)
    f32 = clone(base).fit(X, y).risk_path_
    made = TrajectoryLasso(alpha=0.05, max_iter=20, n_probes=4, random_state=0,
                           risk_options={"chain_dtype": "float64"}).fit(X, y)
    set_ = clone(base).set_params(risk_options={"chain_dtype": "float64"})
    assert clone(set_).get_params()["risk_options"] == {"chain_dtype": "float64"}
    assert_array_equal(clone(set_).fit(X, y).risk_path_, made.risk_path_)
    assert 0 < np.abs(made.risk_path_ / f32 - 1).max() < 1e-4
    loo = clone(base).set_params(estimate_risk=False, estimate_loo=True,
                                 loo_options={"subsample": 15, "store_predictions": True})
    fitted = loo.fit(X, y)
    assert fitted.loo_indices_.shape == (15,) and fitted.loo_predictions_.shape == (15, 21)
    assert fitted.loo_std_error_path_.shape == (21,)


def test_grid_search_over_the_options():
    X, y = _data(80)
    grid = [{"subsample": 10, "store_predictions": True},
            {"subsample": 30, "store_predictions": True}]
    est = TrajectoryLasso(alpha=0.05, max_iter=15, estimate_risk=False, estimate_loo=True,
                          random_state=0)
    search = GridSearchCV(est, {"loo_options": grid}, cv=KFold(2)).fit(X, y)
    assert list(search.cv_results_["param_loo_options"]) == grid
    best = search.best_estimator_
    assert best.loo_options in grid
    assert best.loo_indices_.shape == (best.loo_options["subsample"],)
    chains = GridSearchCV(TrajectoryLasso(alpha=0.05, max_iter=15, n_probes=4, random_state=0),
                          {"risk_options": [None, {"probe_scheme": "shared"}]},
                          cv=KFold(2)).fit(X, y)
    assert chains.cv_results_["params"] == [{"risk_options": None},
                                            {"risk_options": {"probe_scheme": "shared"}}]


@pytest.mark.parametrize("make, param, key, allowed", [
    (TrajectoryLasso, "risk_options", "probe_shceme",
     ["'probe_scheme': a str among", "'chain_dtype': a str among", "(default 'auto')"]),
    (IterativeRidge, "risk_options", "probe_scheme", ["'chain_dtype': a str among"]),
    (TrajectoryHuberRegressor, "loo_options", "subsamples",
     ["'batch_size': an int in the range [1, inf) or None (default None)",
      "'subsample'", "'store_predictions'", "(default False)"]),
    (TrajectoryLogisticRegression, "loo_options", "batchsize", ["'batch_size'"]),
])
def test_an_unknown_key_is_named_with_the_allowed_ones(make, param, key, allowed):
    X, y = _data()
    if make is TrajectoryLogisticRegression:
        y = (y > 0).astype(int)
    with pytest.raises(ValueError, match=f"'{param}' parameter of {make.__name__} has the "
                                         f"unknown key '{key}'") as info:
        make(**{param: {key: 1}}).fit(X, y)
    for text in allowed:
        assert text in str(info.value)
    if make is IterativeRidge:  # the Lasso's key is not the ridge's
        assert "probe_scheme':" not in str(info.value).split("Its keys are")[1]


@pytest.mark.parametrize("param, options, message", [
    ("risk_options", {"chain_dtype": "float16"},
     "The 'chain_dtype' parameter of TrajectoryLasso's risk_options must be a str among"),
    ("risk_options", {"probe_scheme": "grouped"},
     "The 'probe_scheme' parameter of TrajectoryLasso's risk_options must be a str among"),
    ("loo_options", {"subsample": 0},
     r"The 'subsample' parameter of TrajectoryLasso's loo_options must be an int in the "
     r"range \[1, inf\) or None. Got 0 instead."),
    ("loo_options", {"batch_size": 2.5}, "'batch_size' parameter of TrajectoryLasso's"),
    ("loo_options", {"store_predictions": "yes"}, "'store_predictions' parameter"),
    ("loo_options", "subsample=10",
     "The 'loo_options' parameter of TrajectoryLasso must be None or an instance of 'dict'"),
])
def test_a_bad_value_names_its_key(param, options, message):
    X, y = _data()
    with pytest.raises(ValueError, match=message):
        TrajectoryLasso(max_iter=5, estimate_loo=True, **{param: options}).fit(X, y)


def test_the_search_adds_its_subsample_to_the_estimators_options():
    est = TrajectoryLasso(solver="sgd", loo_options={"batch_size": 7})
    own = est.get_params(deep=False)
    switch_estimates(clone(est), own, "loo", True, loo_subsample=50)  # on the clone only
    assert est.loo_options == {"batch_size": 7}
    out = switch_estimates(clone(est), own, "loo", True, loo_subsample=50)
    assert out.loo_options == {"batch_size": 7, "subsample": 50}
    assert out.estimate_loo
