"""A 2-D ``y`` (several targets) for ``TrajectoryLasso`` and ``IterativeRidge``.

One path per target, the attributes stacked along a leading target axis:

* at convergence the stacked coefficients are scikit-learn's ``Lasso`` and
  ``Ridge`` on the same 2-D ``y`` (with and without sample weights);
* each target's paths and estimates are, bit for bit, the 1-D fit on its
  column;
* the shapes of every attribute and prediction, one column included;
* a warm start continues every target (50 + 50 steps equal 100), and
  refuses what it cannot continue;
* a pickled fit predicts the same and keeps one copy of the paths.
"""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.linear_model import Lasso, Ridge

from skacv import IterativeRidge, TrajectoryLasso
from skacv._trace import record

# the small designs flag late FISTA iterates: the estimates are compared, not read
pytestmark = pytest.mark.filterwarnings("ignore::skacv.exceptions.UnreliableEstimateWarning")


def _data(n=60, p=8, k=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    B = rng.standard_normal((p, k)) * (rng.random((p, k)) < 0.6)
    Y = X @ B + 0.5 * rng.standard_normal((n, k)) + np.arange(k)
    w = rng.integers(0, 4, n).astype(float)
    return X, Y, w


#: the 1-D attributes that gain a leading target axis, and their 1-D ndim
PATH_ATTRIBUTES = {"coef_path_": 2, "intercept_path_": 1, "coef_": 1, "intercept_": 0,
                   "step_size_": 0, "risk_path_": 1, "risk_reliable_": 1, "risk_matrix_": 2,
                   "memory_matrix_": 2, "loo_path_": 1, "loo_predictions_": 2,
                   "loo_indices_": 1}


def _estimators(**params):
    return [TrajectoryLasso(alpha=0.1, random_state=0, **params),
            IterativeRidge(alpha=2.0, solver="nesterov", random_state=0, **params)]


@pytest.mark.parametrize("weighted", [False, True])
def test_lasso_at_convergence_is_sklearn_lasso(weighted):
    X, Y, w = _data()
    sw = w if weighted else None
    est = TrajectoryLasso(alpha=0.1, max_iter=300, estimate_risk=False).fit(X, Y, sw)
    ref = Lasso(alpha=0.1, tol=1e-14, max_iter=100000).fit(X, Y, sample_weight=sw)
    assert est.coef_.shape == ref.coef_.shape == (3, 8)
    assert_allclose(est.coef_, ref.coef_, atol=1e-6)
    assert_allclose(est.intercept_, ref.intercept_, atol=1e-6)
    assert_allclose(est.predict(X), ref.predict(X), atol=1e-6)
    assert (ref.coef_ == 0).any()  # the penalty is active on some coordinates


@pytest.mark.parametrize("weighted", [False, True])
def test_ridge_at_convergence_is_sklearn_ridge(weighted):
    X, Y, w = _data()
    sw = w if weighted else None
    est = IterativeRidge(alpha=5.0, solver="nesterov", max_iter=200,
                         estimate_risk=False).fit(X, Y, sw)
    ref = Ridge(alpha=5.0, solver="cholesky").fit(X, Y, sample_weight=sw)
    assert est.coef_.shape == ref.coef_.shape == (3, 8)
    assert_allclose(est.coef_, ref.coef_, atol=1e-6)
    assert_allclose(est.intercept_, ref.intercept_, atol=1e-6)


@pytest.mark.parametrize("make", range(2))
@pytest.mark.parametrize("weighted", [False, True])
def test_each_target_is_its_one_dimensional_fit(make, weighted):
    X, Y, w = _data()
    sw = w if weighted else None
    params = dict(max_iter=30, estimate_loo=True, loo_options={"store_predictions": True})
    est = _estimators(**params)[make].fit(X, Y, sw)
    assert len(est.estimators_) == 3
    for k in range(3):
        one = _estimators(**params)[make].fit(X, Y[:, k].copy(), sw)
        for attr in ("coef_path_", "intercept_path_", "coef_", "intercept_", "risk_path_",
                     "risk_reliable_", "loo_path_", "loo_predictions_",
                     "noise_variance_path_", "excess_risk_path_"):
            assert_array_equal(getattr(est, attr)[k], getattr(one, attr), err_msg=attr)
        assert_array_equal(est.risk_diagnostics_.df_fraction[k],
                           one.risk_diagnostics_.df_fraction)
        # the fit of target k is the 1-D fit, its debiasing included
        assert_array_equal(est.estimators_[k].debiased_coef(), one.debiased_coef())
        assert_array_equal(est.estimators_[k].predict(X), one.predict(X))


def test_shapes():
    X, Y, _ = _data(k=3)
    T = 12
    for est in _estimators(max_iter=T, estimate_loo=True, loo_options={"store_predictions": True}):
        est.fit(X, Y)
        one = type(est)(**est.get_params()).fit(X, Y[:, 0])
        for attr, ndim in PATH_ATTRIBUTES.items():
            assert np.ndim(getattr(one, attr)) == ndim, attr
            assert np.shape(getattr(est, attr)) == (3,) + np.shape(getattr(one, attr)), attr
        assert est.coef_path_.shape == (3, 8, T + 1)
        assert est.intercept_path_.shape == est.risk_path_.shape == (3, T + 1)
        assert est.coef_.shape == (3, 8) and est.intercept_.shape == (3,)
        assert isinstance(est.n_iter_, int) and est.n_iter_ == T
        assert est.risk_diagnostics_.amplification.shape == (3, T + 1)
        assert est.predict(X).shape == (60, 3)
        path = est.predict_path(X[:5])
        assert path.shape == (5, 3, T + 1)
        stages = list(est.staged_predict(X[:5]))
        assert len(stages) == T + 1 and stages[0].shape == (5, 3)
        for t in (0, 5, T):
            assert_allclose(path[:, :, t], stages[t], rtol=1e-12, atol=1e-12)
            assert_allclose(path[:, :, t], X[:5] @ est.coef_path_[:, :, t].T
                            + est.intercept_path_[:, t], rtol=1e-12, atol=1e-12)
        assert_allclose(path[:, :, -1], est.predict(X[:5]), rtol=1e-12, atol=1e-12)
        assert 0.0 < est.score(X, Y) <= 1.0


def test_one_column_is_two_dimensional_and_1d_is_unchanged():
    X, Y, _ = _data()
    for est in _estimators(max_iter=20):
        est.fit(X, Y[:, :1])
        assert est.coef_.shape == (1, 8) and est.intercept_.shape == (1,)
        assert est.coef_path_.shape == (1, 8, 21) and est.risk_path_.shape == (1, 21)
        assert est.predict(X).shape == (60, 1)
        col = est.coef_path_[0].copy()
        est.fit(X, Y[:, 0])  # 1-D again: today's shapes, no target estimators
        assert est.coef_.shape == (8,) and np.ndim(est.intercept_) == 0
        assert est.coef_path_.shape == (8, 21) and est.predict(X).shape == (60,)
        assert not hasattr(est, "estimators_")
        assert_array_equal(est.coef_path_, col)


def test_sparse_and_float32_inputs():
    X, Y, _ = _data()
    dense = TrajectoryLasso(alpha=0.1, max_iter=25, random_state=0).fit(X, Y)
    sparse = TrajectoryLasso(alpha=0.1, max_iter=25, random_state=0).fit(sp.csr_matrix(X), Y)
    assert_allclose(sparse.coef_path_, dense.coef_path_, rtol=1e-10, atol=1e-12)
    assert_allclose(sparse.predict(sp.csr_matrix(X)), dense.predict(X), rtol=1e-10)
    single = IterativeRidge(max_iter=25).fit(X.astype(np.float32), Y)
    assert single.coef_path_.dtype == np.float32
    assert single.predict(X.astype(np.float32)).shape == (60, 3)


@pytest.mark.parametrize("make", range(2))
def test_warm_start_continues_every_target(make):
    X, Y, w = _data()
    cold = _estimators(max_iter=100)[make].fit(X, Y, w)
    warm = _estimators(max_iter=50, warm_start=True)[make].fit(X, Y, w)
    first = warm.estimators_
    with record() as paths:
        warm.set_params(max_iter=100).fit(X, Y, w)
    # the fit loop runs only the 50 new steps of each target
    assert [d["steps"] for d in paths.details("run_trajectory")] == [50, 50, 50]
    assert all(a is b for a, b in zip(warm.estimators_, first, strict=True))  # continued
    assert warm.n_iter_ == 100
    for attr in ("coef_path_", "intercept_path_", "coef_", "intercept_", "risk_path_"):
        assert_array_equal(getattr(warm, attr), getattr(cold, attr), err_msg=attr)


def test_warm_start_refuses_what_it_cannot_continue():
    X, Y, _ = _data()
    est = TrajectoryLasso(alpha=0.1, max_iter=10, warm_start=True).fit(X, Y)
    with pytest.raises(ValueError, match="paths of 3 targets, but y has 2 columns"):
        est.set_params(max_iter=20).fit(X, Y[:, :2])
    with pytest.raises(ValueError, match=r"2-D y \(3 targets\), but y is 1-D"):
        est.fit(X, Y[:, 0])
    with pytest.raises(ValueError, match="other training data"):
        est.fit(X, Y + 1.0)
    with pytest.raises(ValueError, match="'alpha'"):  # a protected parameter
        est.set_params(alpha=0.2).fit(X, Y)
    one = TrajectoryLasso(alpha=0.1, max_iter=10, warm_start=True).fit(X, Y[:, 0])
    with pytest.raises(ValueError, match="fitted on a 1-D y, but y is 2-D"):
        one.set_params(max_iter=20).fit(X, Y)


def test_pickle_keeps_one_copy_of_the_paths():
    X, Y, _ = _data()
    est = TrajectoryLasso(alpha=0.1, max_iter=40, random_state=0).fit(X, Y)
    for target in est.estimators_:  # the targets' attributes are views of the stack
        assert np.shares_memory(target.coef_path_, est.coef_path_)
    blob = pickle.dumps(est)
    assert len(blob) < 1.5 * sum(getattr(est, a).nbytes for a in
                                 ("coef_path_", "risk_matrix_", "memory_matrix_"))
    back = pickle.loads(blob)
    assert_array_equal(back.predict(X), est.predict(X))
    for k, target in enumerate(back.estimators_):
        assert np.shares_memory(target.coef_path_, back.coef_path_)
        assert_array_equal(target.risk_path_, est.risk_path_[k])


def test_debiasing_is_for_one_target():
    X, Y, _ = _data()
    est = IterativeRidge(max_iter=20).fit(X, Y)
    assert est.noise_variance_path_.shape == (3, 21)  # the targets' attributes, stacked
    for method in ("debiased_coef", "coef_confidence_interval", "noise_variance_path",
                   "excess_risk_path"):
        with pytest.raises(ValueError, match=r"estimators_\[k\]"):
            getattr(est, method)()
    assert est.estimators_[1].coef_confidence_interval().shape == (8, 2)


def test_integer_weights_equal_repeated_rows():
    X, Y, w = _data()
    idx = np.repeat(np.arange(X.shape[0]), w.astype(int))
    params = dict(alpha=0.1, max_iter=30, n_probes=None)
    weighted = TrajectoryLasso(**params).fit(X, Y, w)
    repeated = TrajectoryLasso(**params).fit(X[idx], Y[idx])
    assert_allclose(weighted.coef_path_, repeated.coef_path_, rtol=1e-9, atol=1e-12)
    assert_allclose(weighted.risk_path_, repeated.risk_path_, rtol=1e-8)


def test_dataframes_and_switched_estimates():
    pd = pytest.importorskip("pandas")
    X, Y, _ = _data()
    df = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    est = IterativeRidge(max_iter=10, warm_start=True).fit(df, pd.DataFrame(Y[:, :2]))
    assert_array_equal(est.feature_names_in_, df.columns)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no feature-name warnings, fitted or continued
        assert est.estimators_[1].predict(df).shape == (60,)
        est.set_params(max_iter=20, estimate_risk=False).fit(df, pd.DataFrame(Y[:, :2]))
    # a continued fit without the estimate drops it (and its diagnostics)
    assert not hasattr(est, "risk_path_") and not hasattr(est, "risk_diagnostics_")
    assert est.coef_path_.shape == (2, 8, 21)
