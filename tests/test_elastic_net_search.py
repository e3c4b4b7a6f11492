"""The elastic net's converged path and the search over (l1_ratio, alpha, t).

* ``risk_alpha_path(TrajectoryElasticNet(l1_ratio=r))``: ``ElasticNetCV``'s
  grid (``alpha_max / l1_ratio``), scikit-learn's ``ElasticNet`` solutions,
  an independent duality gap, the df of the elastic net (the trace of its
  hat matrix on the support), the limit of ``risk_path_``, exact
  leave-one-out where the support holds; in the covariance form, on the
  columns, and in the rank-one metric;
* ``TrajectoryEarlyStoppingCV(..., param_grid={"l1_ratio": [...]})``: the
  joint argmin over every (l1_ratio, alpha, iteration) when the walk covers
  the grid (brute force), the walk's stops, ``cv_results_``, errors, and
  scikit-learn's estimator checks.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose
from sklearn.base import clone
from sklearn.linear_model import ElasticNet
from sklearn_versions import parametrize_with_checks

from skacv import (
    TrajectoryEarlyStoppingCV,
    TrajectoryElasticNet,
    TrajectoryLasso,
    risk_alpha_path,
)
from skacv._trace import record


def _data(n=60, p=40, seed=0, rho=0.0, s=6, shift=1.0):
    rng = np.random.default_rng(seed)
    X = (np.sqrt(1 - rho) * rng.standard_normal((n, p))
         + np.sqrt(rho) * rng.standard_normal((n, 1)) + shift)
    beta = np.zeros(p)
    beta[:s] = rng.standard_normal(s)
    return X, X @ beta + 0.5 * rng.standard_normal(n) + 2.0


def _centred(X, y, w, fit_intercept):
    w = np.ones(X.shape[0]) if w is None else w
    if fit_intercept:
        X, y = X - w @ X / w.sum(), y - w @ y / w.sum()
    return X * np.sqrt(w)[:, None], y * np.sqrt(w), w.sum()


def _enet_gap(Xw, yw, n_eff, coef, l1, l2):
    """Independent elastic-net duality gap (scikit-learn's ``enet_dual_gap``
    form) of ``||yw - Xw b||^2 / (2 n_eff) + l1 |b|_1 + l2 |b|^2 / 2``."""
    r = yw - Xw @ coef
    corr = Xw.T @ r - n_eff * l2 * coef
    scale = min(1.0, n_eff * l1 / np.max(np.abs(corr)))
    primal = r @ r / (2 * n_eff) + l1 * np.abs(coef).sum() + l2 * coef @ coef / 2
    theta = scale * r
    dual = (theta @ yw - (theta @ theta + (scale * np.sqrt(n_eff * l2) * coef) @
                          (scale * np.sqrt(n_eff * l2) * coef)) / 2) / n_eff
    return primal - dual, yw @ yw / n_eff


@pytest.mark.parametrize("l1_ratio", [0.2, 0.7])
@pytest.mark.parametrize("shape, weighted, sparse", [((60, 40), False, False),
                                                     ((40, 80), True, False),
                                                     ((40, 80), False, True),
                                                     ((240, 30), True, False)])
def test_elastic_net_path_equals_sklearn(shape, weighted, sparse, l1_ratio):
    """The grid is ``ElasticNetCV``'s (``alpha_max = ||X~^T y~||_inf /
    (n_eff l1_ratio)``); solutions, gaps, df and the risk estimate against
    independent computations ((240, 30): the covariance form)."""
    n, p = shape
    X, y = _data(n, p, seed=1)
    w = np.random.default_rng(2).uniform(0.3, 2.0, n) if weighted else None
    Xin = sp.csr_matrix(X) if sparse else X
    path = risk_alpha_path(TrajectoryElasticNet(l1_ratio=l1_ratio), Xin, y, n_alphas=8,
                           eps=1e-2, tol=1e-13, max_iter=50_000, sample_weight=w)
    Xw, yw, n_eff = _centred(X, y, w, True)
    alpha_max = np.max(np.abs(Xw.T @ yw)) / (n_eff * l1_ratio)
    assert_allclose(path.alphas, np.geomspace(alpha_max, alpha_max * 1e-2, 8), rtol=1e-12)
    assert np.all(path.coefs[:, 0] == 0)
    for i, alpha in enumerate(path.alphas):
        ref = ElasticNet(alpha=alpha, l1_ratio=l1_ratio, tol=1e-14, max_iter=200_000)
        ref.fit(X, y, sample_weight=w)
        assert_allclose(path.coefs[:, i], ref.coef_, atol=1e-6)
        assert_allclose(path.intercepts[i], ref.intercept_, atol=1e-6)
        l1, l2 = alpha * l1_ratio, alpha * (1 - l1_ratio)
        gap, scale = _enet_gap(Xw, yw, n_eff, path.coefs[:, i], l1, l2)
        assert path.gaps[i] <= 1e-10 * scale
        assert_allclose(path.gaps[i], gap, atol=1e-12 * scale)
        S = np.flatnonzero(path.coefs[:, i])
        XS = Xw[:, S]
        hat = XS @ np.linalg.solve(XS.T @ XS + n_eff * l2 * np.eye(S.size), XS.T)
        assert_allclose(path.df[i], np.trace(hat) + 1, rtol=1e-9, atol=1e-9)
        assert path.df[i] < S.size + 1 or S.size == 0  # the ridge part shrinks it
        mse = np.average((y - X @ path.coefs[:, i] - path.intercepts[i]) ** 2, weights=w)
        assert_allclose(path.risk[i], mse / (1 - path.df[i] / n_eff) ** 2, rtol=1e-7)


def test_metric_path_on_an_equicorrelated_design_equals_sklearn(speed_policy):
    """One outlier eigenvalue: the working sets run in the rank-one metric,
    shifted by the ridge part (the metric majorises ``H + l2 I``)."""
    speed_policy(path_columns_descent=False)  # the working sets by FISTA
    X, y = _data(200, 300, seed=3, rho=0.5, s=10, shift=0.0)
    with record() as paths:
        path = risk_alpha_path(TrajectoryElasticNet(l1_ratio=0.5), X, y, n_alphas=6, eps=0.05,
                               tol=1e-12, max_iter=50_000)
    used = [d["l2"] for d in paths.details("metric_fista")]
    assert used and all(v > 0 for v in used)
    for i, alpha in enumerate(path.alphas):
        ref = ElasticNet(alpha=alpha, l1_ratio=0.5, tol=1e-14, max_iter=10**6).fit(X, y)
        assert_allclose(path.coefs[:, i], ref.coef_, atol=1e-6)


def test_lasso_path_is_the_l1_ratio_one_case():
    X, y = _data(50, 70, seed=4)
    a = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=6, criterion="loo")
    b = risk_alpha_path(TrajectoryElasticNet(l1_ratio=1.0), X, y, n_alphas=6, criterion="loo")
    for name in ("alphas", "coefs", "df", "risk", "loo", "n_iter"):
        assert_allclose(getattr(a, name), getattr(b, name), rtol=0, atol=0)


@pytest.mark.parametrize("weighted, sparse", [(False, False), (True, False), (False, True)])
def test_ridge_support_df_shares_its_gram_and_equals_the_hat_trace(weighted, sparse):
    """The elastic net's df from the Gram matrix of the supports' columns
    kept on the design (two paths' counters on one design, as the mixings of
    a search): supports that grow, shrink, jump and come back, in any
    order, each against the trace of its hat matrix; the second counter
    reuses the columns of the first."""
    from skacv.linalg._design import make_design, shared_designs
    from skacv.model_selection._converged_risk import RidgeSupportDF

    X, _ = _data(50, 90, seed=11)
    w = np.random.default_rng(12).uniform(0.3, 2.0, 50) if weighted else None
    Xw, _, n_eff = _centred(X, np.zeros(50), w, True)
    rng = np.random.default_rng(13)
    supports = [np.arange(5), np.arange(12), rng.choice(90, 30, replace=False),
                np.arange(3, 8), rng.choice(90, 60, replace=False), np.arange(12)]
    Xin = sp.csr_matrix(X) if sparse else X
    with shared_designs():
        design = make_design(Xin, w, True)
        first, second = RidgeSupportDF(design), RidgeSupportDF(make_design(Xin, w, True))
        for k, S in enumerate(supports):
            coef = np.zeros(90)
            coef[S] = rng.standard_normal(S.size)
            l2 = 10.0 ** rng.uniform(-3, 0)
            XS = Xw[:, np.sort(S)]
            hat = XS @ np.linalg.solve(XS.T @ XS + n_eff * l2 * np.eye(S.size), XS.T)
            counter = first if k < 3 else second
            assert_allclose(counter(coef, l2), np.trace(hat), rtol=1e-10)
        cols = design.cache["support_gram"][0]
        assert_allclose(np.sort(cols), np.unique(np.concatenate(supports)))
        assert second(np.zeros(90), 0.5) == 0.0


@pytest.mark.parametrize("weighted, sparse", [(False, False), (True, False), (False, True)])
def test_ridge_support_df_on_the_rows_side_equals_the_hat_trace(weighted, sparse):
    """Supports wider than the rows: the df from ``K_S = X~_S X~_S^T`` (the
    row Gram matrix less the columns outside the support, or the support's
    columns), each against the trace of its hat matrix, and the support's
    side where it costs fewer flops."""
    from skacv.linalg._design import make_design
    from skacv.model_selection._converged_risk import RidgeSupportDF

    n, p = 20, 90
    X, _ = _data(n, p, seed=21)
    w = np.random.default_rng(22).uniform(0.3, 2.0, n) if weighted else None
    Xw, _, n_eff = _centred(X, np.zeros(n), w, True)
    rng = np.random.default_rng(23)
    counter = RidgeSupportDF(make_design(sp.csr_matrix(X) if sparse else X, w, True))
    cases = [(np.arange(p), "rest"), (rng.choice(p, 80, replace=False), "rest"),
             (rng.choice(p, 40, replace=False), "support"), (np.arange(22), None),
             (np.arange(12), None)]
    for S, plan in cases:
        coef = np.zeros(p)
        coef[S] = rng.standard_normal(S.size)
        assert counter._rows_plan(np.sort(S)) == plan
        for l2 in (1e-3, 0.1, 3.0):
            XS = Xw[:, np.sort(S)]
            hat = XS @ np.linalg.solve(XS.T @ XS + n_eff * l2 * np.eye(S.size), XS.T)
            assert_allclose(counter(coef, l2), np.trace(hat), rtol=1e-10)


@pytest.mark.parametrize("p, rows", [(30, False), (90, True)])
def test_ridge_support_df_of_a_held_support_reads_its_spectrum(p, rows):
    """A support held at several penalties (the support's side, and the
    rows' side when it is wider than the rows): its eigenvalues from the
    speed policy's ``ridge_df_spectrum_repeats``-th penalty on, each df
    against the trace of its hat matrix; a new support factorises again;
    ``None``: the factor at every penalty."""
    from skacv._policy import policy_context
    from skacv.linalg._design import make_design
    from skacv.model_selection._converged_risk import RidgeSupportDF

    n = 20 if rows else 60
    X, _ = _data(n, p, seed=51)
    Xw, _, n_eff = _centred(X, np.zeros(n), None, True)
    rng = np.random.default_rng(52)
    held = np.sort(rng.choice(p, p - 2, replace=False))
    supports = [held] * 5 + [np.arange(p - 4)] + [held] * 2
    for repeats in (2, 3, None):
        with policy_context(ridge_df_spectrum_repeats=repeats), record() as paths:
            counter = RidgeSupportDF(make_design(X))
            for k, S in enumerate(supports):
                coef = np.zeros(p)
                coef[S] = 1.0
                l2 = 0.5 * 0.7**k
                XS = Xw[:, S]
                hat = XS @ np.linalg.solve(XS.T @ XS + n_eff * l2 * np.eye(S.size), XS.T)
                assert_allclose(counter(coef, l2), np.trace(hat), rtol=1e-10)
        sizes = [d["size"] for d in paths.details("ridge_df_spectrum")]
        assert sizes == ([] if repeats is None else [n if rows else p - 2])


def test_mixing_search_releases_the_support_gram_before_the_trajectories():
    """The paths' shared Gram matrix of the supports' columns is dropped once
    every ``l1_ratio``'s path is scored (the trajectories never read it): a
    search inside an outer ``shared_designs`` block leaves its design
    without it, while the paths alone leave it there."""
    from skacv.linalg._design import _SHARED, shared_designs

    X, y = _data(40, 60, seed=31)
    est = TrajectoryElasticNet(max_iter=30, n_probes=None)

    def shared_caches():
        return [entry[1].cache for key, entry in _SHARED.get().items() if key != "thread"]

    with shared_designs():
        risk_alpha_path(clone(est).set_params(l1_ratio=0.5), X, y)
        assert any("support_gram" in cache for cache in shared_caches())
    with shared_designs():
        TrajectoryEarlyStoppingCV(est, param_grid={"l1_ratio": [0.5, 1.0]},
                                  random_state=0).fit(X, y)
        caches = shared_caches()
        assert caches and not any(name in cache for cache in caches
                                  for name in ("support_gram", "path_transposed",
                                               "path_columns"))
    with shared_designs():  # the Lasso's path search releases its working-set buffer too
        TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=30), param_grid={"alpha": [0.5, 0.1]},
                                  random_state=0).fit(X, y)
        caches = shared_caches()
        assert caches and not any("path_columns" in cache for cache in caches)


def test_kfold_paths_drop_their_folds_column_buffers():
    """K-fold CV of the converged fits solves a path on each fold's rows, a
    new array whose shared design no later path reads: the design, its
    working-set buffer with it, is dropped after its path, not kept to the
    search's end (one per fold and mixing at once otherwise)."""
    from sklearn.model_selection import KFold

    from skacv.linalg._design import _SHARED, shared_designs
    from skacv.model_selection._path_search import kfold_alpha_path

    X, y = _data(60, 200, seed=3)
    splits = list(KFold(3, shuffle=True, random_state=0).split(X))
    est = TrajectoryElasticNet(l1_ratio=0.5, max_iter=30)
    with record() as paths, shared_designs():
        kfold_alpha_path(est, X, y, None, splits, np.geomspace(1.0, 0.01, 8), {})
        caches = [entry[1].cache for key, entry in _SHARED.get().items() if key != "thread"]
    assert paths.count("path_columns") >= len(splits)  # each fold's path had one
    assert caches == []


@pytest.mark.filterwarnings("ignore:The Lasso path .coordinate descent or FISTA")
def test_mixings_paths_share_the_transposed_copy():
    """The paths of several mixings on one shared design copy ``X~^T`` (the
    rows of the Fortran-ordered working sets' gathers) once: the same
    solutions, bit for bit, as each path with its own copy (the df read the
    shared Gram matrix of the supports' columns, in another order: rounding)."""
    from skacv.linalg._design import shared_designs

    rng = np.random.default_rng(41)
    n, p = 200, 300
    X = rng.standard_normal((n, p))
    y = X[:, :100] @ rng.standard_normal(100) * 15 / np.sqrt(n) + 1.5 * rng.standard_normal(n)
    ratios = (0.5, 0.9, 1.0)
    with record() as own:
        alone = [risk_alpha_path(TrajectoryElasticNet(l1_ratio=r), X, y, n_alphas=12)
                 for r in ratios]
    with record() as paths, shared_designs():
        shared = [risk_alpha_path(TrajectoryElasticNet(l1_ratio=r), X, y, n_alphas=12)
                  for r in ratios]
    assert paths.count("transposed_columns") == 1
    # one buffer of working-set columns, grown by the first path, reused by the others
    grown = [d["columns"] for d in paths.details("path_columns")]
    assert grown == sorted(grown) and len(grown) < own.count("path_columns")
    assert own.count("path_columns") >= len(ratios)
    assert sum(d["fortran"] for d in paths.details("columns_coordinate_descent")) > 1
    for a, b in zip(alone, shared, strict=True):
        for key in ("coefs", "train_mse", "n_iter", "gaps"):
            np.testing.assert_array_equal(a[key], b[key])
        assert_allclose(a.df, b.df, rtol=1e-12)


def test_converged_estimate_is_the_limit_of_risk_path():
    X, y = _data(40, 30, seed=5, shift=0.0)
    est = TrajectoryElasticNet(alpha=0.3, l1_ratio=0.5, max_iter=400, n_probes=None).fit(X, y)
    path = risk_alpha_path(est, X, y, alphas=[0.3], tol=1e-14, max_iter=100_000)
    assert_allclose(est.coef_, path.coefs[:, 0], atol=1e-6)
    err = np.abs(est.risk_path_ / path.risk[0] - 1)
    assert err[-1] < 1e-6 and err[50] > 100 * err[-1]


def test_converged_loo_is_exact_leave_one_out():
    """Exact leave-one-out with the ridge part in the left-out problems, where
    removing a sample keeps the support (the leverage formula on it) and
    where it does not (the leverage formula was within 1.6 % there)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 8))
    y = X[:, :3] @ [3.0, -2.0, 2.5] + 0.3 * rng.standard_normal(60) + 1.0
    alphas = [1.0, 0.3]
    path = risk_alpha_path(TrajectoryElasticNet(l1_ratio=0.6), X, y, alphas=alphas,
                           tol=1e-14, max_iter=100_000, criterion="loo")
    kept = 0
    for a, loo in zip(alphas, path.loo, strict=True):
        full = ElasticNet(alpha=a, l1_ratio=0.6, tol=1e-14, max_iter=10**6).fit(X, y)
        res, same = [], True
        for i in range(60):
            keep = np.arange(60) != i
            fit = ElasticNet(alpha=a, l1_ratio=0.6, tol=1e-14, max_iter=10**6).fit(
                X[keep], y[keep])
            same &= np.array_equal(np.sign(fit.coef_), np.sign(full.coef_))
            res.append(y[i] - fit.predict(X[i:i + 1])[0])
        assert_allclose(loo, float(np.mean(np.square(res))), rtol=1e-8)
        kept += same
    assert kept == 1


# ----------------------------------------------------------------------------
# the search over l1_ratio
# ----------------------------------------------------------------------------

RATIOS = [0.2, 0.5, 0.8, 1.0]


def test_a_wide_walk_is_the_joint_argmin_over_what_it_fitted():
    """With ``path_neighbors`` as wide as the grid: every l1_ratio's alpha
    path is solved, the chosen l1_ratio has every alpha's trajectory, each
    other l1_ratio the trajectory of its converged choice; the choice is the
    argmin over those (l1_ratio, alpha, iteration), refitted one by one, or
    the chosen l1_ratio's converged fit where it scores lower."""
    X, y = _data(80, 120, seed=6, rho=0.3)
    base = TrajectoryElasticNet(max_iter=60, random_state=0)
    wide = dict(criterion="risk", path_neighbors=30, n_iter_no_change=None,
                path_params={"n_alphas": 6}, random_state=0)
    search = TrajectoryEarlyStoppingCV(base, param_grid={"l1_ratio": RATIOS}, **wide).fit(X, y)
    res = search.cv_results_
    assert search.search_ == "path" and search.criterion_ == "risk"
    assert len(res["params"]) == 6 * len(RATIOS) and np.all(res["reason"] == "")
    ratios = np.array([p["l1_ratio"] for p in res["params"]])
    fitted = res["trajectory_fitted"]
    assert fitted[ratios == search.best_params_["l1_ratio"]].all()
    for r in RATIOS:
        rows = np.flatnonzero(ratios == r)
        assert fitted[rows[np.nanargmin(res["path_risk"][rows])]]
    best, best_params, best_t = np.inf, None, None
    for i in np.flatnonzero(fitted):
        params = res["params"][i]
        fit = clone(base).set_params(**params).fit(X, y)
        t = int(np.argmin(fit.risk_path_))
        # the same probes; the chains' float32 rounding may differ between the
        # search's fits and these refits (2.5e-8 with NumPy 1.24)
        assert res["min_risk"][i] == pytest.approx(fit.risk_path_[t], rel=1e-6)
        if fit.risk_path_[t] < best:
            best, best_params, best_t = fit.risk_path_[t], params, t
    if search.best_iteration_ is None:  # the converged fit scored lower
        assert search.best_risk_ == res["path_risk"][search.best_index_] < best
    else:
        assert search.best_params_ == best_params and search.best_iteration_ == best_t
        assert search.best_risk_ == pytest.approx(best, rel=1e-6)
    assert res["params"][search.best_index_] == search.best_params_
    assert_allclose(search.alpha_path_.alphas,
                    [p["alpha"] for p in res["params"]
                     if p["l1_ratio"] == search.best_params_["l1_ratio"]])
    # the selected model predicts with its iterate (or converged fit)
    assert_allclose(search.predict(X), X @ search.coef_ + search.intercept_)


def test_every_l1_ratio_is_solved_and_the_neighbours_probed():
    """Every l1_ratio's alpha path is solved (as ``ElasticNetCV``'s), on the
    grid ``alpha_max / l1_ratio``; the best converged l1_ratio gets its
    window of trajectories, each neighbour the trajectory of its converged
    choice, the others none (``path_neighbors=1``)."""
    X, y = _data(100, 150, seed=7, s=4, shift=0.0)
    grid = [0.05, 0.1, 0.3, 0.6, 0.9, 1.0]
    search = TrajectoryEarlyStoppingCV(TrajectoryElasticNet(max_iter=80, random_state=0),
                                       param_grid={"l1_ratio": grid},
                                       random_state=0).fit(X, y)
    res = search.cv_results_
    ratios = np.array([p["l1_ratio"] for p in res["params"]])
    for r in grid:
        assert np.isfinite(res["path_risk"][ratios == r]).any()
    # the same automatic grid scaled by 1 / l1_ratio (30 alphas each)
    assert_allclose(res["param_alpha"][ratios == 0.05] * 0.05,
                    res["param_alpha"][ratios == 1.0], rtol=1e-12)
    converged = [np.nanmin(res["path_risk"][ratios == r]) for r in grid]
    k = int(np.argmin(converged))
    fitted = res["trajectory_fitted"]
    chosen = grid.index(search.best_params_["l1_ratio"])
    assert abs(chosen - k) <= 1
    for j, r in enumerate(grid):
        rows = np.flatnonzero(ratios == r)
        if abs(j - k) > 1 and abs(j - chosen) > 1:
            assert not fitted[rows].any()
        elif j in (k, chosen):
            assert fitted[rows].sum() >= 2  # its window of alphas
        else:
            assert fitted[rows[np.nanargmin(res["path_risk"][rows])]]
    assert search.best_risk_ <= min(converged)


def test_given_alphas_and_one_l1_ratio_and_errors():
    X, y = _data(60, 40, seed=8)
    alphas = [0.3, 0.1, 0.03]
    search = TrajectoryEarlyStoppingCV(
        TrajectoryElasticNet(max_iter=40, random_state=0),
        param_grid={"alpha": alphas, "l1_ratio": [0.5]}, random_state=0).fit(X, y)
    assert search.search_ == "path"
    assert [p["alpha"] for p in search.cv_results_["params"]] == alphas
    assert search.best_params_["l1_ratio"] == 0.5
    # the same search as the alpha path at that mixing
    alone = TrajectoryEarlyStoppingCV(TrajectoryElasticNet(l1_ratio=0.5, max_iter=40,
                                                           random_state=0),
                                      param_grid={"alpha": alphas}, random_state=0).fit(X, y)
    assert alone.best_params_["alpha"] == search.best_params_["alpha"]
    assert alone.best_iteration_ == search.best_iteration_
    assert alone.best_risk_ == pytest.approx(search.best_risk_, rel=1e-6)
    with pytest.raises(ValueError, match="has no such parameter: use TrajectoryElasticNet"):
        TrajectoryEarlyStoppingCV(TrajectoryLasso(), param_grid={"l1_ratio": [0.5, 1.0]},
                                  search="path").fit(X, y)
    with pytest.raises(ValueError, match="l1_ratio"):
        TrajectoryEarlyStoppingCV(TrajectoryElasticNet(),
                                  param_grid={"l1_ratio": [0.5, 1.5]}).fit(X, y)


@parametrize_with_checks([
    # the literal default: alpha chosen on its automatic grid at l1_ratio=0.5
    # (the converged fit, when selected, solved far below the weight checks' rtol)
    TrajectoryEarlyStoppingCV(TrajectoryElasticNet(max_iter=30, n_probes=None),
                              path_params={"tol": 1e-12}),
    # the natural call over the mixing
    TrajectoryEarlyStoppingCV(TrajectoryElasticNet(max_iter=30, n_probes=None),
                              param_grid={"l1_ratio": [0.5, 0.9, 1.0]},
                              path_params={"tol": 1e-12}),
])
def test_sklearn_compatible(estimator, check):
    check(estimator)
