"""The fit loop of full-batch least squares in the covariance form
(skacv.linalg._covariance.CovarianceForm: products with X~^T X~ instead of X~): the
iterates, the estimates built on them and the warm starts of the products
with X~, the rule that picks it, and the fits it must not touch."""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone

import skacv.linalg._covariance as covariance_module
import skacv.linalg._design as design_module
from skacv import (
    IterativeRidge,
    TrajectoryHuberRegressor,
    TrajectoryLasso,
    TrajectoryLogisticRegression,
)
from skacv._policy import get_policy
from skacv._statistics import get_statistics
from skacv._trace import record
from skacv.exceptions import DivergenceError

LEAST_SQUARES = [
    TrajectoryLasso(alpha=0.02, max_iter=60, random_state=0),  # clipped FISTA
    TrajectoryLasso(alpha=0.02, solver="ista", max_iter=60, random_state=0),
    IterativeRidge(alpha=0.5, max_iter=60),
    IterativeRidge(alpha=0.5, solver="heavy_ball", max_iter=60),
    IterativeRidge(alpha=0.5, solver="nesterov", max_iter=60, fit_intercept=False),
]


def _data(seed=0, n=300, p=40):
    """Correlated columns (a common factor), an offset, noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + 0.8 * rng.standard_normal((n, 1)) + 1.0
    y = X[:, :4] @ rng.standard_normal(4) + rng.standard_normal(n) + 2.0
    sw = rng.uniform(0.2, 2.0, n)
    return X, y, sw


@pytest.fixture
def products_with_x(speed_policy, monkeypatch):
    """A switch to the products with X~ (the covariance form never pays)."""

    def switch():
        speed_policy(covariance_max_features=0)

    return switch


def _form(est):
    return est._solver_state.form


@pytest.mark.parametrize("est", LEAST_SQUARES, ids=lambda e: f"{type(e).__name__}-{e.solver}")
@pytest.mark.parametrize("fmt", ["dense", "csr", "float32"])
def test_covariance_form_gives_the_iterates_and_estimates_of_the_products_with_x(
        est, fmt, products_with_x):
    """Paths, intercepts, the risk path (same probes) and the leave-one-out
    path agree with the loop on X~ up to rounding, with weights and an
    intercept, dense, sparse and float32."""
    X, y, sw = _data()
    if fmt == "csr":
        X = sp.csr_matrix(np.where(np.abs(X - 1.0) > 0.7, X, 0.0))
    elif fmt == "float32":
        X = X.astype(np.float32)
    est = clone(est).set_params(estimate_loo=True)
    cov = clone(est).fit(X, y, sample_weight=sw)
    products_with_x()
    ref = clone(est).fit(X, y, sample_weight=sw)
    assert (_form(cov), _form(ref)) == ("covariance", "design")
    rtol = 1e-4 if fmt == "float32" else 1e-10
    scale = np.abs(ref.coef_path_).max()
    assert cov.coef_path_.dtype == ref.coef_path_.dtype
    assert_allclose(cov.coef_path_, ref.coef_path_, rtol=0, atol=rtol * scale)
    assert_allclose(cov.intercept_path_, ref.intercept_path_, rtol=rtol,
                    atol=rtol * np.abs(ref.intercept_path_).max())
    assert_allclose(cov.risk_path_, ref.risk_path_, rtol=10 * rtol)
    assert_allclose(cov.loo_path_, ref.loo_path_, rtol=10 * rtol)
    # the debiasing, from the residuals' products in the features' space
    assert_allclose(cov.excess_risk_path_, ref.excess_risk_path_, rtol=100 * rtol,
                    atol=100 * rtol * np.abs(ref.risk_path_).max())
    assert_allclose(cov.debiased_coef(10), ref.debiased_coef(10), rtol=100 * rtol,
                    atol=100 * rtol * scale)


@pytest.mark.parametrize("est", LEAST_SQUARES[:3], ids=lambda e: e.solver)
def test_warm_start_continues_in_its_form_bit_for_bit(speed_policy, est, products_with_x,
                                                      monkeypatch):
    """A warm start continues the covariance form bit for bit (cold 60 =
    warm 17 + 43), and keeps the form it started in even where the rule
    would now pick the other (the path stays one computation)."""
    X, y, _ = _data(seed=1)
    cold = clone(est).fit(X, y)
    warm = clone(est).set_params(max_iter=17, warm_start=True).fit(X, y)
    warm.set_params(max_iter=60).fit(X, y)
    assert _form(cold) == _form(warm) == "covariance"
    assert_array_equal(warm.coef_path_, cold.coef_path_)
    # the Jacobian chains (float32 by default) continue within their rounding
    assert_allclose(warm.risk_path_, cold.risk_path_, rtol=1e-7)
    products_with_x()
    warm.set_params(max_iter=70).fit(X, y)
    assert _form(warm) == "covariance"
    longer = clone(est).set_params(max_iter=70)
    speed_policy(covariance_max_features=2000)
    assert_array_equal(warm.coef_path_, longer.fit(X, y).coef_path_)


def test_the_rule_weighs_the_gram_matrix_against_the_steps():
    """Fewer features than samples, the Gram matrix paid back by the steps:
    covariance; more features than samples, too many features, or too few
    steps for the Gram matrix: the products with X~; a design holding the
    Gram matrix already pays back sooner."""
    pays = covariance_module.covariance_form_pays
    adv = get_policy().covariance_gemm_advantage
    X, _, _ = _data(n=400, p=40)
    d = design_module.Design(X, None, True)
    # 2 n p^2 / adv + 2 p^2 T < 4 n p T  <=>  T > n p / (adv (2 n - p))
    threshold = 400 * 40 / (adv * (2 * 400 - 40))
    assert pays(d, int(np.floor(threshold)) + 1)
    assert not pays(d, max(1, int(np.ceil(threshold)) - 1)) or threshold < 2
    assert not pays(d, 0)
    d.gram(side="features")  # now held by the design
    assert pays(d, 1)
    wide = design_module.Design(_data(n=40, p=60)[0], None, True)
    assert not pays(wide, 10**6)
    many = design_module.Design(np.ones((3000, 2001)), None, False)
    assert not pays(many, 10**6)


def test_the_rule_on_realistic_shapes():
    """The cost model picks the covariance form where it measured faster
    (n >> p, 150 steps) and the products with X~ for few steps on a tall
    design of many features."""
    pays = covariance_module.covariance_form_pays

    class Shape:
        def __init__(self, n, p):
            self.n_samples, self.n_features, self.cache = n, p, {}
            self.policy = get_policy()

    assert pays(Shape(20000, 50), 150) and pays(Shape(10000, 1000), 150)
    assert pays(Shape(2000, 1000), 150)
    assert not pays(Shape(2000, 1000), 10)
    assert not pays(Shape(2000, 3000), 150)


def test_divergence_is_caught_in_the_covariance_form():
    """A step far above 2/L diverges: the norm of X~^T (y~ - X~ x) grows
    past the threshold and the error names it and the fix."""
    X, y, _ = _data(n=80, p=20)
    est = IterativeRidge(alpha=0.0, max_iter=200, estimate_risk=False).fit(X, y)
    assert _form(est) == "covariance"
    est.set_params(step_size=5.0 * est.step_size_)
    with pytest.raises(DivergenceError, match=r"gradient norm .*step_size='auto'"):
        est.fit(X, y)


def test_no_sample_sized_matrix_after_the_covariance_form():
    """After a loop in the covariance form the risk estimate forms neither
    the path's fitted values nor the n x (T + 1) residual matrices (their
    products in the features' space instead), also when a warm start
    continues it."""
    X, y, sw = _data(seed=2)
    est = TrajectoryLasso(alpha=0.02, max_iter=30, warm_start=True, random_state=0)
    with record() as paths:
        est.fit(X, y, sample_weight=sw)
        est.set_params(max_iter=45).fit(X, y, sample_weight=sw)
    assert paths.count("run_trajectory") == 2  # (the record saw both fits)
    assert "residual_matrix" not in paths and "risk_from_memory" not in paths
    assert _form(est) == "covariance" and est._fitted_path is None
    assert est.risk_path_.shape == (46,) and np.all(np.isfinite(est.excess_risk_path_))


@pytest.mark.parametrize("est", [
    TrajectoryHuberRegressor(alpha=0.1, max_iter=40, random_state=0),
    TrajectoryLogisticRegression(alpha=0.01, penalty="l1", max_iter=40, solver="fista"),
    IterativeRidge(alpha=0.5, solver="sgd", batch_size=32, max_iter=40, random_state=0),
], ids=lambda e: type(e).__name__ + "-" + e.solver)
def test_other_losses_and_minibatches_keep_the_products_with_x(est):
    X, y, _ = _data()
    if isinstance(est, TrajectoryLogisticRegression):
        y = (y > np.median(y)).astype(int)
    fitted = clone(est).fit(X, y)
    assert _form(fitted) == "design"


@pytest.mark.parametrize("criterion", ["risk", "kfold"])
def test_staged_early_stopping_picks_the_form_for_the_whole_path(criterion, speed_policy):
    """The first stage of an early-stopped path (10 steps here; with K-fold
    CV, whose stages grow the folds only, the deferred full fit's one-step
    start inside the stages) chooses the loop's form for the whole path: it
    weighs the Gram matrix against the path's horizon (max_iter), not
    against the stage."""
    from skacv import TrajectoryEarlyStoppingCV

    speed_policy(stage_min_flops=0, stage_min_flops_linear=0)  # stages at any size
    X, y, _ = _data(seed=4, n=400, p=390)  # min(n, p) > 300: no Gram for the step
    d = design_module.Design(X, None, True)
    assert not covariance_module.covariance_form_pays(d, 10)
    assert covariance_module.covariance_form_pays(d, 100)
    est = IterativeRidge(alpha=0.5, max_iter=100, estimate_risk=criterion == "risk")
    with record() as paths:
        search = TrajectoryEarlyStoppingCV(est,
                                           search="grid",
                                           criterion=criterion, n_iter_no_change=5).fit(X, y)
    lengths = [d["max_iter"] for d in paths.details("fit") if d["estimator"] == "IterativeRidge"]
    if criterion == "kfold":  # the folds in stages, the full fit deferred: started, then run once
        assert [d["deferred"] for d in paths.details("kfold_stages")] == [True]
        assert lengths[0] == 1 and len(lengths) == 2 and paths.count("deferred_full_fit") == 1
    else:
        assert lengths[0] == 10 and len(lengths) > 1  # in stages
    assert _form(search.estimator_) == "covariance"
    assert not hasattr(search.estimator_, "_horizon")


@pytest.mark.parametrize("est", LEAST_SQUARES, ids=lambda e: f"{type(e).__name__}-{e.solver}")
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_risk_and_debiasing_from_the_residuals_products(est, fit_intercept):
    """trajectory_risk(products=True) (the residuals' inner products in the
    features' space, gradient points included for the clipped FISTA) gives
    the risk, the risk matrix, the correction and the debiasing statistics
    of the residual matrices (n x T), to rounding."""
    from skacv.estimates.risk._estimate import trajectory_risk
    from skacv.estimates.risk._uq import debias_statistics, debias_statistics_from_products

    X, y, sw = _data(seed=3, n=250, p=30)
    est = clone(est).set_params(fit_intercept=fit_intercept, estimate_risk=False,
                                max_iter=40).fit(X, y, sample_weight=sw)
    prob = est._problem(X, y, sample_weight=sw)
    _, target = est._fit_target(prob.design, prob.y)
    path = est._fit_coef_path()
    kw = dict(n_probes=None, datafit=prob.datafit)
    dense = trajectory_risk(prob.design, target, prob.iteration, path, **kw)
    prods = trajectory_risk(prob.design, target, prob.iteration, path, products=True, **kw)
    assert dense.corrected_residuals is not None and prods.corrected_residuals is None
    scale = np.abs(dense.risk_matrix).max()
    assert_allclose(prods.risk, dense.risk, rtol=1e-9)
    assert_allclose(prods.risk_matrix, dense.risk_matrix, rtol=0, atol=1e-10 * scale)
    assert_array_equal(prods.reliable, dense.reliable)
    a = debias_statistics(prob.design, dense.corrected_residuals, dense.residuals,
                          dense.risk_matrix, target)
    b = debias_statistics_from_products(prob.design, prods.products, prods.risk_matrix, target)
    assert_allclose(b.score, a.score, rtol=0, atol=1e-10 * np.abs(a.score).max())
    assert_allclose(b.offset, a.offset, rtol=0, atol=1e-9 * np.abs(a.offset).max())


@pytest.mark.parametrize("sparse", [False, True])
def test_step_size_from_the_covariance_forms_gram(speed_policy, sparse):
    """A fit that will run in the covariance form forms X~^T X~ first and
    takes the step size by Lanczos on it (p x p products, none with X~): an
    upper bound of the top eigenvalue within the Lanczos tolerance, as the
    step size of the X~ loop."""
    X, y, sw = _data(seed=5, n=900, p=360)  # p above dense_eig_size: Lanczos
    Xin = sp.csr_matrix(X) if sparse else X
    exact = np.linalg.eigvalsh(design_module.Design(X, sw, True).dense().T
                               @ design_module.Design(X, sw, True).dense())[-1] / sw.sum()
    tol = get_statistics().lipschitz_tol
    est = TrajectoryLasso(alpha=0.02, solver="ista", max_iter=60, estimate_risk=False,
                          estimate_loo=False)
    with record() as paths:
        fit = clone(est).fit(Xin, y, sample_weight=sw)
    assert fit._solver_state.form == "covariance"
    assert paths.count("matvec") == 0  # c = X~^T y~ is the only product with X~
    assert paths.count("rmatvec") >= 1  # (the record saw the products)
    assert exact <= 1 / fit.step_size_ <= exact * (1 + 2 * tol)
    speed_policy(covariance_max_features=0)
    ref = clone(est).fit(Xin, y, sample_weight=sw)
    assert ref._solver_state.form == "design"
    assert_allclose(fit.step_size_, ref.step_size_, rtol=2 * tol)


# ----------------------------------------------------------------------------
# one design per search (skacv.linalg._design.shared_designs)
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("search", ["path", "grid"])
def test_a_search_forms_the_gram_matrix_once(search):
    """The alpha path and the candidates of TrajectoryEarlyStoppingCV share
    the design of X: one design for the search, whose Gram matrix is formed
    once and cached (it was formed by the path and again by every
    candidate), and the same selection and coefficients as with a design
    per fit (the candidates fitted in joblib's threads, which never share)."""
    import joblib

    from skacv import TrajectoryEarlyStoppingCV

    X, y, sw = _data(n=400, p=30)
    grid = {"alpha": [0.1, 0.05, 0.02, 0.01]}
    est = TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=80), param_grid=grid,
                                    search=search, criterion="risk", random_state=0)
    # the search's own sharing nests in this one: its designs stay readable here
    with design_module.shared_designs():
        design = design_module.make_design(X, sw, True)
        assert not design.cache
        shared = clone(est).fit(X, y, sample_weight=sw)
        made = [v[1] for k, v in design_module._SHARED.get().items() if isinstance(k, tuple)]
    assert made == [design] and ("gram", "features") in design.cache
    with joblib.parallel_backend("threading"):
        alone = clone(est).set_params(n_jobs=2).fit(X, y, sample_weight=sw)
    assert shared.best_params_ == alone.best_params_
    assert shared.best_iteration_ == alone.best_iteration_
    assert_allclose(shared.coef_, alone.coef_, rtol=1e-9, atol=1e-12)


def test_make_design_shares_only_the_same_data():
    import threading

    X, y, sw = _data(n=50, p=5)
    assert design_module.make_design(X) is not design_module.make_design(X)  # outside
    with design_module.shared_designs():
        d = design_module.make_design(X, sw, True)
        assert design_module.make_design(X, sw.copy(), True) is d  # weights by value
        with design_module.shared_designs():  # nested: the outer's
            assert design_module.make_design(X, sw, True) is d
        assert design_module.make_design(X, sw, False) is not d
        assert design_module.make_design(X, sw * 2, True) is not d
        assert design_module.make_design(X.copy(), sw, True) is not d
        assert design_module.make_design(X, None, True) is not d
        other = []
        t = threading.Thread(target=lambda: other.append(design_module.make_design(X, sw, True)))
        t.start()
        t.join()
        assert other[0] is not d  # another thread never shares
    with design_module.shared_designs():
        assert design_module.make_design(X, sw, True) is not d  # dropped on exit


def _address(a):
    return a.__array_interface__["data"][0]


def _mapped(a):
    """Whether ``a``'s memory is an anonymous mapping (:func:`skacv.linalg._memory.fresh`)."""
    import mmap

    while isinstance(a, np.ndarray):
        a = a.base
    return isinstance(a, memoryview) and isinstance(a.obj, mmap.mmap)


@pytest.mark.parametrize("mapped", [False, True])
def test_scratch_memory_is_reused_only_when_nothing_uses_it(mapped, speed_policy):
    """``scratch`` inside ``shared_designs``: the memory of an earlier
    scratch array once every view of it is gone (the same address, so no
    fresh pages), never while one lives (no two live arrays share memory),
    a larger request replaces a smaller buffer, another name or dtype has a
    buffer of its own; outside the context a new array each time; dropped
    on exit (outside, two live arrays never share memory). The same with
    new memory from anonymous mappings (``mapped``: on Linux, from the
    policy's ``scratch_mmap_min_bytes``)."""
    import sys

    from skacv.linalg._copies import gather, scratch
    policy = speed_policy(scratch_mmap_min_bytes=1 if mapped else None)
    maps = mapped and sys.platform.startswith("linux")
    outside = scratch((40, 30), np.float32, policy)
    assert outside.shape == (40, 30) and outside.flags.c_contiguous
    assert _mapped(outside) == maps and outside.flags.writeable
    X = np.arange(12.0).reshape(3, 4)
    copy = gather(X, np.float32, policy, cols=[3, 1])
    assert _mapped(copy) == maps
    assert_allclose(copy, X[:, [3, 1]])
    with design_module.shared_designs():
        a = scratch((40, 30), np.float32, policy)
        assert _mapped(a) == maps
        first = _address(a)
        view = a[:, :10]
        del a
        b = scratch((40, 20), np.float32, policy)  # the view keeps the first in use
        assert not np.shares_memory(b, view)
        del view
        c = scratch((30, 40), np.float32, policy)  # now free: the same memory
        assert _address(c) == first and c.shape == (30, 40) and c.flags.c_contiguous
        d = scratch((30, 40), np.float64, policy)
        e = scratch((30, 40), np.float32, policy, "other")
        assert not np.shares_memory(d, c) and not np.shares_memory(e, c)
        del c
        big = scratch((100, 100), np.float32, policy)  # larger: replaces the first
        grown = _address(big)
        del big
        again = scratch((100, 100), np.float32, policy)
        assert _address(again) == grown
        again[:] = 1.0  # writable, the whole of it
        del again
        with design_module.shared_designs():  # nested: the outer's pool
            small = scratch((10, 10), np.float32, policy)
            assert _address(small) == grown
            assert not np.shares_memory(scratch((10, 10), np.float32, policy), small)
    fresh = [scratch((40, 30), np.float32, policy) for _ in range(2)]
    assert not np.shares_memory(*fresh)


def test_shared_design_keeps_each_responses_least_squares_fit():
    """The design's cached least-squares fit (precision="empirical") is the
    fit of its own response: two fits of one shared design with different
    responses each get theirs (it was cached per design)."""
    X, y, _ = _data(n=120, p=6)
    y2 = -X[:, 2] + np.random.default_rng(5).standard_normal(120)
    ref = TrajectoryLasso(max_iter=30, random_state=0).fit(X, y2)
    with design_module.shared_designs():
        TrajectoryLasso(max_iter=30, random_state=0).fit(X, y)
        est = TrajectoryLasso(max_iter=30, random_state=0).fit(X, y2)
    assert_allclose(est._debias_stats().least_squares.coef,
                    ref._debias_stats().least_squares.coef, rtol=1e-12)
    assert_allclose(est.noise_variance_path(precision="empirical"),
                    ref.noise_variance_path(precision="empirical"), rtol=1e-12)


def test_chains_take_the_restricted_gram_from_the_covariance_forms(speed_policy):
    """After a fit in the covariance form the Jacobian chains' restricted
    Gram matrix is a block of the design's X~^T X~ (no product with the n
    rows): the same risk path as a fit on the products with X~ without a
    cached X~^T X~, whose chains take the products from the support's
    columns (float32 chains: rounding of order 1e-7)."""
    X, y, sw = _data()
    est = TrajectoryLasso(alpha=0.02, max_iter=60, n_probes=4, random_state=0)
    with record() as paths:
        cov = clone(est).fit(X, y, sample_weight=sw)
    assert _form(cov) == "covariance"
    assert "restricted_gram" in paths  # a block of the design's Gram matrix was used
    speed_policy(covariance_max_features=0, gram_cache_size=0)
    with record() as paths:
        ref = clone(est).fit(X, y, sample_weight=sw)
    assert _form(ref) == "design" and "restricted_gram" not in paths
    assert "gram_product" in paths
    assert_allclose(cov.risk_path_, ref.risk_path_, rtol=1e-5)
