"""Dask input: the fit on one pass of sufficient statistics equals the NumPy fit.

On data that fit in memory, every estimate computed from a Dask array (the
path, ``risk_path_`` with exact traces and with the same Hutchinson probes,
``loo_path_`` with the same subsample, the uncertainty quantification, the
K-fold choice with the same folds, the alpha path) must equal the in-memory
fit's up to rounding, under Dask's synchronous and threaded schedulers and
a ``distributed.LocalCluster``; predictions on a Dask array stay lazy and
``score`` never gathers a Dask array.
"""

import numpy as np
import pytest
from sklearn.model_selection import KFold

import skacv
from skacv import IterativeRidge, TrajectoryEarlyStoppingCV, TrajectoryLasso
from skacv._trace import record

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

from skacv.linalg import _dask  # noqa: E402

N, P, CHUNK = 300, 30, 70  # five row chunks, the last one short


def _data(seed=0, n=N, p=P):
    rng = np.random.RandomState(seed)
    X = rng.standard_normal((n, p)) + 0.5  # non-centred columns: the intercept matters
    coef = np.zeros(p)
    coef[:4] = [2.0, -1.5, 1.0, 0.5]
    y = X @ coef + 2.5 * rng.standard_normal(n) + 3.0
    w = rng.uniform(0.5, 2.0, n)
    return X, y, w


def _lazy(*arrays):
    return [None if a is None else da.from_array(a, chunks=(CHUNK,) + a.shape[1:])
            for a in arrays]


def _rel(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)


ESTIMATORS = [
    TrajectoryLasso(alpha=0.05, max_iter=40, n_probes=None),
    TrajectoryLasso(alpha=0.05, solver="ista", max_iter=40, n_probes=None,
                    fit_intercept=False),
    IterativeRidge(alpha=10.0, solver="nesterov", max_iter=30, n_probes=None),
]


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
@pytest.mark.parametrize("est", ESTIMATORS, ids=["fista", "ista-nointercept", "ridge"])
@pytest.mark.parametrize("weighted", [False, True])
def test_fit_equals_numpy(scheduler, est, weighted):
    X, y, w = _data()
    sw = w if weighted else None
    ref = est.fit(X, y, sample_weight=sw)
    expected = {name: np.copy(getattr(ref, name)) for name in (
        "coef_path_", "intercept_path_", "risk_path_", "risk_matrix_", "memory_matrix_",
        "noise_variance_path_", "excess_risk_path_")}
    step = ref.step_size_
    Xd, yd, wd = _lazy(X, y, sw)
    with dask.config.set(scheduler=scheduler):
        got = est.fit(Xd, yd, sample_weight=wd)
    assert got.n_features_in_ == P
    assert abs(got.step_size_ - step) <= 1e-12 * step
    for name, value in expected.items():
        # float64 paths computed the same way agree to rounding; an exact
        # zero intercept (fit_intercept=False) stays zero
        assert _rel(getattr(got, name), value) <= 1e-10 or np.all(value == 0), name
    # the debiasing of the UQ reads the statistics too
    np.testing.assert_allclose(got.debiased_coef(), ref.fit(X, y, sample_weight=sw)
                               .debiased_coef(), rtol=1e-9, atol=1e-12)


def test_dataframe_input_keeps_feature_names():
    pd = pytest.importorskip("pandas")
    # dask's DataFrames convert strings with pyarrow, whose current wheels need
    # NumPy 2 (they raise ImportError beside the oldest supported NumPy): skipped there
    try:
        import dask.dataframe as dd
        import pyarrow as pa

        pa.array(np.zeros(2))
    except ImportError as exc:
        pytest.skip(f"dask.dataframe cannot run here: {exc}")
    X, y, _ = _data(1)
    names = [f"f{j}" for j in range(P)]
    frame = pd.DataFrame(X, columns=names)
    ddf = dd.from_pandas(frame, npartitions=4)
    dy = dd.from_pandas(pd.Series(y), npartitions=4)
    est = TrajectoryLasso(alpha=0.05, max_iter=30, n_probes=None)
    ref = np.copy(est.fit(frame, y).coef_path_)
    with dask.config.set(scheduler="synchronous"):
        est.fit(ddf, dy)
    assert list(est.feature_names_in_) == names
    assert _rel(est.coef_path_, ref) <= 1e-10
    pred = est.predict(ddf)
    assert isinstance(pred, da.Array)
    np.testing.assert_allclose(pred.compute(), X @ est.coef_ + est.intercept_, rtol=1e-12)


def test_compressed_sample_keeps_every_fold_moment():
    # brute force: the weight, weighted mean and centred weighted Gram matrix
    # of [X, y] over each fold and over each fold's training rows
    X, y, w = _data(2)
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    labels = _dask.fold_labels(splits, N)
    Xd, yd, wd = _lazy(X, y, w)
    with dask.config.set(scheduler="synchronous"):
        stats = _dask.row_statistics(Xd, yd, wd, labels, 4)
    Xc, yc, wc, groups = _dask.compressed_sample(stats, fit_intercept=True)
    assert Xc.shape == (4 * (P + 2), P)

    def moments(Z, weight):
        W = weight.sum()
        mean = weight @ Z / W
        D = Z - mean
        return W, mean, (D * weight[:, None]).T @ D

    Z, Zc = np.column_stack([X, y]), np.column_stack([Xc, yc])
    for j, (train, test) in enumerate(splits):
        train_c = np.concatenate([g for k, g in enumerate(groups) if k != j])
        for rows, rows_c in ((test, groups[j]), (train, train_c)):
            for a, b in zip(moments(Z[rows], w[rows]), moments(Zc[rows_c], wc[rows_c]),
                            strict=True):
                assert _rel(b, a) <= 1e-12


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
def test_kfold_search_equals_numpy(scheduler):
    X, y, w = _data(3)
    grid = {"alpha": [1.0, 0.3, 0.1, 0.03, 0.01]}
    # the folds in float64: rounding only
    kwargs = dict(param_grid=grid, criterion="kfold", cv=4, random_state=0, fold_dtype="float64")
    ref = TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=60), **kwargs).fit(
        X, y, sample_weight=w)
    Xd, yd, wd = _lazy(X, y, w)
    with dask.config.set(scheduler=scheduler):
        got = TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=60), **kwargs).fit(
            Xd, yd, sample_weight=wd)
    assert got.n_splits_ == ref.n_splits_ == 4
    assert 0.01 < got.best_params_["alpha"] < 1.0  # an interior choice
    assert got.best_params_ == ref.best_params_
    assert got.best_iteration_ == ref.best_iteration_
    assert _rel(got.kfold_path_, ref.kfold_path_) <= 1e-9
    assert _rel(got.estimator_.coef_path_, ref.estimator_.coef_path_) <= 1e-10
    pred = got.predict(Xd)
    assert isinstance(pred, da.Array)
    np.testing.assert_allclose(pred.compute(), ref.predict(X), rtol=1e-9)


def test_alpha_path_search_equals_numpy():
    X, y, _ = _data(4)
    grid = {"alpha": list(np.geomspace(0.003, 3.0, 10))}
    est = TrajectoryLasso(max_iter=60, n_probes=None)
    ref = TrajectoryEarlyStoppingCV(est, param_grid=grid, criterion="risk").fit(X, y)
    Xd, yd = _lazy(X, y)
    with dask.config.set(scheduler="threads"):
        got = TrajectoryEarlyStoppingCV(est, param_grid=grid, criterion="risk").fit(Xd, yd)
    assert ref.search_ == got.search_ == "path"
    np.testing.assert_array_equal(got.alpha_path_.alphas, ref.alpha_path_.alphas)
    np.testing.assert_allclose(got.cv_results_["path_risk"], ref.cv_results_["path_risk"],
                               rtol=1e-10)  # NaN where the converged estimate is undefined
    assert 0.003 < got.best_params_["alpha"] < 3.0  # an interior choice
    assert got.best_params_ == ref.best_params_
    assert got.best_iteration_ == ref.best_iteration_
    assert _rel(got.risk_path_, ref.risk_path_) <= 1e-10


def test_predict_path_is_lazy():
    X, y, _ = _data(5)
    est = IterativeRidge(alpha=1.0, max_iter=20).fit(X, y)
    (Xd,) = _lazy(X)
    path = est.predict_path(Xd)
    assert isinstance(path, da.Array) and path.shape == (N, 21)
    np.testing.assert_allclose(path.compute(), est.predict_path(X), rtol=1e-12)
    pred = est.predict(Xd)
    assert isinstance(pred, da.Array) and pred.shape == (N,)
    np.testing.assert_allclose(pred.compute(), est.predict(X), rtol=1e-12)
    with pytest.raises(ValueError, match="X has 3 features"):
        est.predict(Xd[:, :3])


def test_gram_limit_error():
    X, y, _ = _data(6)
    Xd, yd = _lazy(X, y)
    with skacv.config_context(dask_max_features=P - 1):
        with pytest.raises(ValueError, match=rf"{P} features.*dask_max_features={P - 1}.*"
                                             r"set_config\(dask_max_features"):
            TrajectoryLasso(max_iter=5).fit(Xd, yd)
        with pytest.raises(ValueError, match=f"dask_max_features={P - 1}"):
            TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=5), search="grid", cv=3).fit(Xd, yd)


def test_rows_the_statistics_cannot_serve_are_refused():
    X, y, _ = _data(7)
    Xd, yd = _lazy(X, y)
    with pytest.raises(ValueError, match="full-batch least squares"):
        TrajectoryLasso(solver="sgd", max_iter=5).fit(Xd, yd)
    with pytest.raises(ValueError, match=r"leave-one-out.*set loo_options=\{'subsample': <int>\}"):
        TrajectoryLasso(max_iter=5, estimate_loo=True).fit(Xd, yd)
    for criterion, loo in (("loo", False), ("kfold", True)):
        with pytest.raises(ValueError, match="leave-one-out"):
            TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=5, estimate_loo=loo), search="grid",
                                      criterion=criterion).fit(Xd, yd)
    bad = X.copy()
    bad[5, 2] = np.nan
    with pytest.raises(ValueError, match="1 rows with NaN"):
        TrajectoryLasso(max_iter=5).fit(_lazy(bad)[0], yd)


PROBED = [  # Hutchinson probes: float64 chains (rounding only) and the default float32;
    # the shared probes, what a Dask fit takes ("auto" in memory takes the pooled ones)
    TrajectoryLasso(alpha=0.05, max_iter=40, n_probes=10,
                    risk_options={"chain_dtype": "float64", "probe_scheme": "shared"}),
    TrajectoryLasso(alpha=0.05, solver="ista", max_iter=40, n_probes=6, fit_intercept=False,
                    risk_options={"chain_dtype": "float64", "probe_scheme": "shared"}),
    IterativeRidge(alpha=10.0, solver="nesterov", max_iter=30, n_probes=8,
                   risk_options={"chain_dtype": "float64"}),
    TrajectoryLasso(alpha=0.05, max_iter=40, n_probes=10, risk_options={"probe_scheme": "shared"}),
]


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
@pytest.mark.parametrize("est", PROBED, ids=["fista", "ista-nointercept", "ridge", "float32"])
def test_probes_equal_numpy(scheduler, est):
    # the probes an in-memory fit draws on the n rows, mapped onto the
    # compressed sample by their images X~^T Z: the same risk_path_, and the
    # generator left in the same state
    X, y, w = _data(9)
    rs_ref, rs_dask = np.random.RandomState(11), np.random.RandomState(11)
    ref = np.copy(est.set_params(random_state=rs_ref).fit(X, y, sample_weight=w).risk_path_)
    other = np.copy(est.set_params(random_state=12).fit(X, y, sample_weight=w).risk_path_)
    Xd, yd, wd = _lazy(X, y, w)
    with dask.config.set(scheduler=scheduler):
        got = est.set_params(random_state=rs_dask).fit(Xd, yd, sample_weight=wd).risk_path_
    float32 = "chain_dtype" not in est.get_params()["risk_options"]
    # float32 chains: the probes' images rounded to float32 (unit 6e-8) and
    # summed in another order; float64: rounding only
    assert _rel(got, ref) <= (1e-6 if float32 else 1e-10)
    # other probes move the estimate far more: the check sees the probes
    assert _rel(other, ref) > 1e-4
    np.testing.assert_array_equal(rs_dask.get_state()[1], rs_ref.get_state()[1])
    assert rs_dask.get_state()[2] == rs_ref.get_state()[2]


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
@pytest.mark.parametrize("weighted", [False, True])
def test_loo_subsample_equals_numpy(scheduler, weighted):
    # the subsample an in-memory fit tracks, fetched in the pass of the
    # moments; the other rows compressed (the control variate's full-sample
    # term exact)
    X, y, w = _data(10)
    sw = w if weighted else None
    ests = [TrajectoryLasso(alpha=0.05, max_iter=40, n_probes=None, estimate_loo=True,
                            loo_options={"subsample": 60, "store_predictions": True},
                            random_state=4),
            IterativeRidge(alpha=10.0, solver="nesterov", max_iter=30, n_probes=None,
                           estimate_loo=True, loo_options={"subsample": 45}, random_state=5)]
    Xd, yd, wd = _lazy(X, y, sw)
    for est in ests:
        ref = est.fit(X, y, sample_weight=sw)
        expected = {k: np.copy(getattr(ref, k)) for k in ("loo_path_", "loo_indices_",
                                                           "loo_predictions_")
                    if hasattr(ref, k)}
        with dask.config.set(scheduler=scheduler):
            got = est.fit(Xd, yd, sample_weight=wd)
        assert _rel(got.loo_path_, expected["loo_path_"]) <= 1e-10
        if "loo_indices_" in expected:  # the rows of X, sorted
            np.testing.assert_array_equal(got.loo_indices_, expected["loo_indices_"])
            assert _rel(got.loo_predictions_, expected["loo_predictions_"]) <= 1e-10
    # the subsample's estimate differs from the exact leave-one-out: the
    # comparison above is of the subsampled estimate
    subsampled = np.copy(got.loo_path_)
    full = ests[1].set_params(loo_options=None).fit(X, y, sample_weight=sw).loo_path_
    assert _rel(full, subsampled) > 1e-6


def test_lazy_stages_and_score(monkeypatch):
    X, y, w = _data(11)
    est = TrajectoryLasso(alpha=0.05, max_iter=15, n_probes=None).fit(X, y)
    Xd, yd, wd = _lazy(X, y, w)
    stages = list(est.staged_predict(Xd))
    assert len(stages) == 16 and all(isinstance(s, da.Array) for s in stages)
    np.testing.assert_allclose(np.column_stack(dask.compute(*stages)), est.predict_path(X),
                               rtol=1e-12, atol=1e-12)
    ref = [est.score(X, y), est.score(X, y, sample_weight=w)]
    search = TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=15), search="grid", cv=3,
                                       criterion="kfold").fit(X, y)
    ref_search = search.score(X, y)

    def gathered(self, *args, **kwargs):
        raise AssertionError("score gathered a Dask array")

    monkeypatch.setattr(da.Array, "__array__", gathered)  # reductions only
    with dask.config.set(scheduler="threads"):
        got = [est.score(Xd, yd), est.score(Xd, yd, sample_weight=wd)]
        got_search = search.score(Xd, yd)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    assert abs(got_search - ref_search) <= 1e-12 * abs(ref_search)
    assert 0.3 < ref[0] < 1.0  # a fit that explains part of y


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=":0") as cluster:
        with distributed.Client(cluster) as c:
            yield c


def test_local_cluster_fit(client):
    X, y, w = _data(8)
    # exact traces; then the probes' pass and the fetched rows on the cluster
    exact = TrajectoryLasso(alpha=0.05, max_iter=40, n_probes=None)
    probed = TrajectoryLasso(alpha=0.05, max_iter=40, n_probes=10,
                             risk_options={"chain_dtype": "float64", "probe_scheme": "shared"},
                             estimate_loo=True, loo_options={"subsample": 50}, random_state=3)
    Xd, yd, wd = _lazy(X, y, w)
    for est, names in ((exact, ("coef_path_", "risk_path_")),
                       (probed, ("coef_path_", "risk_path_", "loo_path_"))):
        ref = {k: np.copy(getattr(est.fit(X, y, sample_weight=w), k)) for k in names}
        est.fit(Xd, yd, sample_weight=wd)  # on the client's cluster
        for name, value in ref.items():
            assert _rel(getattr(est, name), value) <= 1e-10, name


def _joblib_version():
    import joblib

    return tuple(int(v) for v in joblib.__version__.split(".")[:2])


@pytest.mark.skipif(_joblib_version() < (1, 4),
                    reason="joblib's dask backend takes generators from joblib 1.4 (the "
                           "dask extra requires it)")
def test_joblib_dask_backend_gives_the_loky_choice(client):
    import joblib

    X, y, _ = _data(8)
    # the grid points of a search on the cluster's workers: the same choice
    search = TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=40),
                                       param_grid={"alpha": [1.0, 0.3, 0.1, 0.03]},
                                       criterion="kfold", cv=3, random_state=0, n_jobs=-1)
    with joblib.parallel_config(backend="loky"):
        loky = search.fit(X, y)
        choice = (loky.best_params_, loky.best_iteration_, np.copy(loky.kfold_path_))
    with joblib.parallel_config(backend="dask"):
        on_dask = search.fit(X, y)
    assert (on_dask.best_params_, on_dask.best_iteration_) == choice[:2]
    np.testing.assert_array_equal(on_dask.kfold_path_, choice[2])


def _strategies(paths):
    """The forms the risk estimates of ``paths`` planned, each with whether
    "auto" took the shared probes for a ROW_SOURCE (a Dask fit)."""
    return [("rows_scheme" in paths, d["form"]) for d in paths.details("risk_plan")]


def test_auto_probe_scheme_is_shared_on_dask():
    # probe_scheme="auto" takes the pooled probes in memory (one chain, its
    # rows' sums split by a template); a Dask fit must take the shared ones,
    # the rows' own, mapped onto the compressed sample
    X, y, w = _data(12)
    est = TrajectoryLasso(alpha=0.05, max_iter=40, n_probes=10,
                          risk_options={"chain_dtype": "float64"}, random_state=7)
    with record() as paths:
        auto = np.copy(est.fit(X, y, sample_weight=w).risk_path_)
    in_memory_auto = _strategies(paths)
    est.set_params(risk_options={"chain_dtype": "float64", "probe_scheme": "shared"})
    with record() as paths:
        shared = np.copy(est.fit(X, y, sample_weight=w).risk_path_)
    in_memory_shared = _strategies(paths)
    Xd, yd, wd = _lazy(X, y, w)
    with dask.config.set(scheduler="synchronous"), record() as paths:
        est.set_params(risk_options={"chain_dtype": "float64", "probe_scheme": "auto"})
        got = est.fit(Xd, yd, sample_weight=wd).risk_path_
    chosen = _strategies(paths)
    assert in_memory_auto and {c for _, c in in_memory_auto} == {"pooled"}
    assert not any(active for active, _ in in_memory_auto + in_memory_shared)
    assert chosen and all(active for active, _ in chosen)
    assert [c for _, c in chosen] == [c for _, c in in_memory_shared]
    assert "pooled" not in {c for _, c in chosen}
    # the in-memory fit with probe_scheme="shared" and the same seed
    assert _rel(got, shared) <= 1e-10
    assert _rel(auto, shared) > 1e-4  # the pooled probes: another estimate


@pytest.mark.parametrize("scheme, search", [("shared", "grid"), ("auto", "grid"),
                                            ("shared", "path")])
def test_risk_search_probes_equal_numpy(scheme, search):
    # the candidates of a search on the compressed sample draw the rows'
    # probes (the ROW_SOURCE around the search): the NumPy search's choice;
    # one pass for the probes of the whole grid (the same seed everywhere)
    X, y, w = _data(13)
    kwargs = dict(param_grid={"alpha": [0.3, 0.1, 0.03]}, criterion="risk", search=search)

    def make(seed, probe_scheme="shared"):
        return TrajectoryEarlyStoppingCV(
            TrajectoryLasso(max_iter=60, n_probes=10, random_state=seed,
                            risk_options={"chain_dtype": "float64", "probe_scheme": probe_scheme}),
            **kwargs)

    ref = make(5).fit(X, y, sample_weight=w)
    other = make(6).fit(X, y, sample_weight=w)
    Xd, yd, wd = _lazy(X, y, w)
    with dask.config.set(scheduler="synchronous"), record() as paths:
        got = make(5, scheme).fit(Xd, yd, sample_weight=wd)
    assert ref.search_ == got.search_ == search
    assert paths.details("row_source_pass") == [{"probes": 10}]
    assert got.best_params_ == ref.best_params_
    assert got.best_iteration_ == ref.best_iteration_
    np.testing.assert_allclose(got.best_risk_, ref.best_risk_, rtol=1e-8)
    assert _rel(got.risk_path_, ref.risk_path_) <= 1e-8
    # other probes move the estimate far more: the check sees the probes
    assert abs(other.best_risk_ - ref.best_risk_) > 1e-4 * ref.best_risk_
