"""The configuration keeps resources only; the knobs that change the numbers
are estimator parameters (issue 43).

* ``risk_options["probe_scheme"]`` (TrajectoryLasso): shared or pooled
  Hutchinson probes of the ISTA/FISTA chains: different estimates with the
  same seed, both close to exact traces;
* ``risk_options["chain_dtype"]`` (TrajectoryLasso, TrajectoryHuberRegressor,
  IterativeRidge): the precision of the Jacobian chains: float64 equals a
  plain float64 computation of the same Hutchinson estimate to rounding,
  float32 only to float32 rounding;
* ``fold_dtype`` (TrajectoryEarlyStoppingCV): the precision of the stacked
  folds: float64 equals separate fold fits to rounding, float32 agrees to
  float32 rounding;
* ``clone`` carries each of them, and so does the search when it refits
  and grows the estimator in stages.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.model_selection import KFold

import skacv
from skacv import (
    IterativeRidge,
    TrajectoryEarlyStoppingCV,
    TrajectoryHuberRegressor,
    TrajectoryLasso,
)
from skacv._trace import record

MOVED = {"risk_probe_scheme": "probe_scheme", "risk_chain_dtype": "chain_dtype",
         "kfold_dtype": "fold_dtype"}


def _sparse_problem(n, p, s=15, seed=2025, sigma=1.5):
    """The seed notebook's generator: ``s`` equal coefficients, unit noise."""
    rng = np.random.default_rng(seed)
    beta = 15 * np.hstack([np.ones(s), np.zeros(p - s)]) / np.sqrt(n)
    X = rng.standard_normal((n, p))
    return X, X @ beta + sigma * rng.standard_normal(n)


# ----------------------------------------------------------------------------
# the configuration
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(MOVED))
def test_statistics_knobs_left_the_configuration(key):
    assert key not in skacv.get_config()
    with pytest.raises(TypeError, match=f"no longer takes '{key}'.*{MOVED[key]}"):
        skacv.set_config(**{key: "float64"})
    with pytest.raises(TypeError, match=MOVED[key]):
        with skacv.config_context(**{key: "auto"}):
            pass
    assert key not in skacv.get_config()  # nothing was set


def test_unknown_configuration_keys_are_refused():
    with pytest.raises(TypeError, match="unexpected keyword argument 'chain_dtype'"):
        skacv.set_config(chain_dtype="float64")
    before = skacv.get_config()
    with skacv.config_context(working_memory=64):
        assert skacv.get_config()["working_memory"] == 64.0
    assert skacv.get_config() == before



@pytest.mark.parametrize("key", ["path_memory_limit", "working_memory", "risk_matrix_limit",
                                 "risk_time_budget"])
@pytest.mark.parametrize("value", ["1GB", -1.0, float("nan")])
def test_bad_configuration_values_are_refused_by_name(key, value):
    """A value that is not a number (a string of units) is refused as a
    negative one is, by the key's name (it was a TypeError of ``>``)."""
    before = skacv.get_config()
    with pytest.raises(ValueError, match=f"{key} is in"):
        skacv.set_config(**{key: value})
    assert skacv.get_config() == before


@pytest.mark.parametrize("est, params", [
    (TrajectoryLasso(), {"risk_options": {"probe_scheme": "shared", "chain_dtype": "float64"}}),
    (TrajectoryHuberRegressor(), {"risk_options": {"chain_dtype": "float32"}}),
    (IterativeRidge(), {"risk_options": {"chain_dtype": "float64"}}),
    (TrajectoryEarlyStoppingCV(TrajectoryLasso(), search="grid"), {"fold_dtype": "float64"}),
])
def test_knobs_are_parameters_that_clone_carries(est, params):
    for name in params:
        assert est.get_params()[name] in ("auto", None)  # the documented default
    cloned = clone(clone(est).set_params(**params))
    assert {k: cloned.get_params()[k] for k in params} == params
    for name in params:  # validated like every parameter
        with pytest.raises(ValueError, match=f"'{name}' parameter of {type(est).__name__}"):
            clone(est).set_params(**{name: "float16"}).fit(np.ones((10, 2)), np.arange(10.0))


def test_logistic_regression_has_no_chain_parameters():
    """No risk estimate, no chains: nothing to choose."""
    params = skacv.TrajectoryLogisticRegression().get_params()
    assert not {"risk_options", "probe_scheme", "chain_dtype"} & set(params)


# ----------------------------------------------------------------------------
# probe_scheme
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("solver", ["ista", "fista"])
def test_probe_scheme_changes_the_probes_not_the_target(solver):
    """Shared and pooled probes are Hutchinson estimates of the same traces:
    with the same seed they differ, and both are close to the estimate with
    exact traces (here, 40 probes, pooled: 0.4 % rms, 0.8 % at most for
    ISTA). At 300 x 450 with 10 probes the root mean square relative error
    of the shared probes over the iterates measured 5.2-6.9 % over 16 seeds,
    with per-seed standard deviations of 2.4-2.7 points; with 40 probes the
    errors halve. Asserted: root mean square below 6 % and the largest
    error below 15 % for this seed. ``"auto"`` takes the pooled probes on
    this 40-step path: bit for bit the same estimate."""
    X, y = _sparse_problem(300, 450)
    est = TrajectoryLasso(0.02, solver=solver, max_iter=40, n_probes=40, random_state=0)
    exact = clone(est).set_params(n_probes=None).fit(X, y).risk_path_
    shared = clone(est).set_params(risk_options={"probe_scheme": "shared"}).fit(X, y).risk_path_
    pooled = clone(est).set_params(risk_options={"probe_scheme": "pooled"}).fit(X, y).risk_path_
    assert_array_equal(clone(est).fit(X, y).risk_path_, pooled)
    assert np.abs(pooled / shared - 1).max() > 1e-3
    for risk in (shared, pooled):
        err = risk / exact - 1
        assert np.sqrt(np.mean(err**2)) < 0.06
        assert np.abs(err).max() < 0.15
    # the parameter travels with the estimator: a clone repeats the estimate
    again = clone(clone(est).set_params(risk_options={"probe_scheme": "shared"})).fit(X, y)
    assert_array_equal(again.risk_path_, shared)


def test_probe_scheme_reaches_the_memory_check():
    """The check before the fit (the settled form's smaller memory exists
    only with shared probes) is told the estimator's scheme."""
    X, y = _sparse_problem(60, 40)
    with record() as paths:
        for scheme in ("pooled", "shared", "auto"):
            TrajectoryLasso(0.05, max_iter=5, risk_options={"probe_scheme": scheme},
                            random_state=0).fit(X, y)
    seen = [d["probe_scheme"] for d in paths.details("check_risk_memory")]
    assert seen == ["pooled", "shared", "auto"]


# ----------------------------------------------------------------------------
# chain_dtype
# ----------------------------------------------------------------------------


def _soft(x, t):
    return np.sign(x) * np.maximum(np.abs(x) - t, 0.0)


def _seed_memory_matrix(X, y, eta, lam, T, Z):
    """The seed notebook's Hutchinson memory matrix of ISTA (no intercept),
    all in float64: dense chains ``R_t`` of every source with the probes
    ``Z / sqrt(m)``."""
    n, m = Z.shape
    r = Z / np.sqrt(m)
    XTr = X.T @ r
    b = np.zeros(X.shape[1])
    A = np.zeros((T, T))
    R = None
    for t in range(1, T):
        b = _soft(b + eta * X.T @ (y - X @ b) / n, lam * eta)
        D = (b != 0)[:, None]
        R = D * XTr if t == 1 else np.hstack([D * (R - (eta / n) * X.T @ (X @ R)), D * XTr])
        A[t, :t] = np.trace((eta * XTr.T @ R / n).reshape((m, t, m)), axis1=0, axis2=2)
    return A


def test_chain_dtype_sets_the_precision_of_the_chains():
    """With the same probes, float64 chains give the seed algorithm's
    float64 memory matrix to rounding (1e-10); float32 chains differ from
    it by float32 rounding (above 1e-9, below 1e-4 relative to the largest
    entry); ``"auto"`` with probes is float32."""
    n, p, T, m, lam, seed = 150, 220, 12, 5, 0.01, 3
    X, y = _sparse_problem(n, p)
    eta = (1 + np.sqrt(p / n)) ** -2
    est = TrajectoryLasso(lam, solver="ista", max_iter=T - 1, step_size=eta,
                          fit_intercept=False, n_probes=m, random_state=seed,
                          risk_options={"probe_scheme": "shared"})
    Z = np.random.RandomState(seed).choice([-1.0, 1.0], size=(n, m))
    ref = _seed_memory_matrix(X, y, eta, lam, T, Z)
    scale = np.abs(ref).max()
    fitted = {dt: clone(est).set_params(risk_options={"probe_scheme": "shared", "chain_dtype": dt})
              .fit(X, y).memory_matrix_ for dt in ("float64", "float32", "auto")}
    err64 = np.abs(fitted["float64"] - ref).max() / scale
    err32 = np.abs(fitted["float32"] - ref).max() / scale
    assert err64 < 1e-10
    assert 1e-9 < err32 < 1e-4
    assert_array_equal(fitted["auto"], fitted["float32"])


@pytest.mark.parametrize("make", [
    lambda: TrajectoryHuberRegressor(epsilon=1.0, scale=1.0, alpha=0.5),
    lambda: IterativeRidge(alpha=2.0, solver="sgd", batch_size=8, random_state=0),
    lambda: TrajectoryLasso(alpha=0.05, solver="sgd", batch_size=8, random_state=0),
], ids=["huber_gd", "ridge_sgd", "lasso_sgd"])
def test_chain_dtype_of_the_robust_and_minibatch_chains(make):
    """The chains of Tan & Bellec's (2024) estimate: with exact traces
    ``"auto"`` keeps ``X``'s float64 (bit for bit ``"float64"``, whose
    agreement with finite differences ``test_risk_sgd.py`` checks);
    ``"float32"`` moves the estimate by float32 rounding only."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((60, 8))
    y = X[:, :3] @ np.array([1.0, -2.0, 0.5]) + rng.standard_t(3, 60)
    est = make().set_params(max_iter=15, n_probes=None)
    auto = clone(est).fit(X, y).risk_path_
    f64 = clone(est).set_params(risk_options={"chain_dtype": "float64"}).fit(X, y).risk_path_
    f32 = clone(est).set_params(risk_options={"chain_dtype": "float32"}).fit(X, y).risk_path_
    assert_array_equal(auto, f64)
    assert 0 < np.abs(f32 / f64 - 1).max() < 1e-4


# ----------------------------------------------------------------------------
# fold_dtype
# ----------------------------------------------------------------------------


def _kfold_by_index(est, X, y, splits):
    """K-fold CV along the path by separate fold fits (float64), the folds'
    iterate ``t`` scored at the full path's iterate ``t``."""
    total = 0.0
    for train, test in splits:
        fold = clone(est).set_params(estimate_risk=False).fit(X[train], y[train])
        total = total + ((y[test, None] - fold.predict_path(X[test])) ** 2).sum(axis=0)
    return total / len(y)


def test_fold_dtype_sets_the_precision_of_the_stacked_folds():
    """``"float64"``: the stacked folds equal separate fold fits to rounding;
    ``"float32"`` (what ``"auto"`` is) agrees with them to float32 rounding,
    far below the sampling noise of a held-out error."""
    X, y = _sparse_problem(120, 60, s=5)
    est = TrajectoryLasso(alpha=0.05, solver="ista", max_iter=30)
    search = TrajectoryEarlyStoppingCV(est,
                                       search="grid",
                                       criterion="kfold", cv=4, n_iter_no_change=None,
                                       fold_alignment="iteration", random_state=0)
    paths = {dt: clone(search).set_params(fold_dtype=dt).fit(X, y).kfold_path_
             for dt in ("float64", "float32", "auto")}
    splits = list(KFold(4, shuffle=True, random_state=search.fit(X, y)._seed).split(X))
    expected = _kfold_by_index(est, X, y, splits)
    assert_allclose(paths["float64"], expected, rtol=1e-10)
    rel = np.abs(paths["float32"] / expected - 1).max()
    assert 1e-10 < rel < 1e-5
    assert_array_equal(paths["auto"], paths["float32"])


# ----------------------------------------------------------------------------
# the search refits and grows the estimator with its parameters
# ----------------------------------------------------------------------------


def test_search_keeps_the_chain_parameters_in_its_stages():
    """An early-stopped search grows a clone of the estimator in stages
    (warm starts continuing the chains): its estimator carries the chain
    parameters, and its risk path is the cold fit's with the same
    parameters; with the other probe scheme it is another estimate."""
    X, y = _sparse_problem(100, 160, s=8)
    base = TrajectoryLasso(alpha=0.02, solver="fista", max_iter=80, random_state=0,
                           risk_options={"probe_scheme": "shared", "chain_dtype": "float64"})
    search = TrajectoryEarlyStoppingCV(base,
                                       search="grid",
                                       criterion="risk", n_iter_no_change=5).fit(X, y)
    assert search.estimator_.get_params()["risk_options"] == {"probe_scheme": "shared",
                                                              "chain_dtype": "float64"}
    n = search.estimator_.n_iter_
    cold = clone(base).set_params(max_iter=n).fit(X, y)
    assert_allclose(search.risk_path_, cold.risk_path_, rtol=1e-10)
    pooled = clone(base).set_params(risk_options={"probe_scheme": "pooled",
                                                  "chain_dtype": "float64"})
    pooled = TrajectoryEarlyStoppingCV(pooled, search="grid", criterion="risk",
                                       n_iter_no_change=None).fit(X, y)
    k = min(pooled.risk_path_.size, n + 1)  # the paths' common iterates
    assert np.abs(pooled.risk_path_[:k] / cold.risk_path_[:k] - 1).max() > 1e-3
