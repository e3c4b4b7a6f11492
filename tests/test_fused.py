"""The one-pass fit loop on large dense designs (Design.panel_products):
the same iterates as the two-pass loop up to rounding, warm starts bit for
bit, every full-batch estimator."""


import threading

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone

import skacv.linalg._design as design_module
from skacv import (
    IterativeRidge,
    TrajectoryHuberRegressor,
    TrajectoryLasso,
    TrajectoryLogisticRegression,
)
from skacv._statistics import get_statistics
from skacv._trace import record

ESTIMATORS = [
    TrajectoryLasso(alpha=0.02, max_iter=40, random_state=0),  # clipped FISTA
    TrajectoryLasso(alpha=0.02, solver="ista", max_iter=40, random_state=0),
    IterativeRidge(alpha=1.0, solver="heavy_ball", max_iter=40),
    IterativeRidge(alpha=1.0, solver="nesterov", max_iter=40, fit_intercept=False),
    TrajectoryHuberRegressor(alpha=0.1, max_iter=40, random_state=0),
    TrajectoryLogisticRegression(max_iter=40, penalty="l1", alpha=0.01, solver="fista"),
]


def _data(seed=0, n=150, p=60):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + 0.5 * rng.standard_normal((n, 1)) + 1.0
    y = X[:, :3] @ rng.standard_normal(3) + rng.standard_normal(n)
    sw = rng.uniform(0.2, 2.0, n)
    return X, y, sw


@pytest.fixture(autouse=True)
def products_with_x(speed_policy):
    """The loops of this module read X~ (never the covariance form, which
    these small tall designs would otherwise take)."""
    speed_policy(covariance_max_features=0)


@pytest.fixture
def fused(speed_policy):
    """Every dense design read by panels of 8 rows (an uneven last one)."""
    speed_policy(fuse_min_bytes=0)
    speed_policy(panel_bytes=1)


@pytest.mark.parametrize("est", ESTIMATORS, ids=lambda e: f"{type(e).__name__}-{e.solver}")
def test_one_pass_loop_equals_two_pass_loop(speed_policy, est):
    X, y, sw = _data()
    if isinstance(est, TrajectoryLogisticRegression):
        y = (y > np.median(y)).astype(int)
    ref = clone(est).fit(X, y, sample_weight=sw)
    speed_policy(fuse_min_bytes=0)
    speed_policy(panel_bytes=1)
    one = clone(est).fit(X, y, sample_weight=sw)
    scale = np.abs(ref.coef_path_).max()
    assert_allclose(one.coef_path_, ref.coef_path_, rtol=0, atol=1e-10 * scale)
    assert_allclose(one.intercept_path_, ref.intercept_path_, rtol=1e-10, atol=1e-12)
    if hasattr(ref, "risk_path_"):
        assert_allclose(one.risk_path_, ref.risk_path_, rtol=1e-8)


@pytest.mark.parametrize("est", ESTIMATORS[:3], ids=lambda e: e.solver)
def test_one_pass_loop_continues_bit_for_bit(est, fused):
    X, y, _ = _data(seed=1)
    cold = clone(est).fit(X, y)
    warm = clone(est).set_params(max_iter=17, warm_start=True).fit(X, y)
    warm.set_params(max_iter=40).fit(X, y)
    assert_array_equal(warm.coef_path_, cold.coef_path_)


def test_panels_cover_every_row(fused):
    X, _, sw = _data(n=37, p=5)
    d = design_module.Design(X, sw, True)
    b = np.arange(5.0)
    P, Z = d.panel_products(b, lambda rows, Pr: Pr * 2.0)
    assert len(d._panels()) == 5  # 8-row panels, the last one of 5 rows
    assert_allclose(P, d.matvec(b), rtol=1e-14)
    assert_allclose(Z, d.rmatvec(2.0 * d.matvec(b)), rtol=1e-13)
    assert_allclose(d.panel_rmatvec(P), d.rmatvec(P), rtol=1e-13)


def test_block_panel_products(fused):
    """A block of columns, held transposed: (X~ B)^T and X~^T r(X~ B) as
    two passes give them, the residual seen per panel of rows, in float64
    and float32 (the BLAS gemm accumulating in place)."""
    X, _, sw = _data(n=37, p=5)
    rows_start = np.repeat(np.arange(0, 37, 8), 8)[:37].astype(float)
    for dtype, rtol in ((np.float64, 1e-12), (np.float32, 1e-5)):
        d = design_module.Design(X.astype(dtype), sw, True)
        B = (np.arange(15.0).reshape(5, 3) / 7.0).astype(dtype)
        seen = []

        def residual(rows, Pt, seen=seen, dtype=dtype):
            assert Pt.shape == (3, min(rows.stop, 37) - rows.start)
            seen.append(rows.start)
            return Pt - dtype(rows.start)

        P, Z = d.panel_products(B, residual)
        assert seen == [0, 8, 16, 24, 32]
        ref_P = d.matvec(B.astype(np.float64))
        assert P.shape == (3, 37) and P.dtype == Z.dtype == dtype
        assert_allclose(P.T, ref_P, rtol=rtol, atol=rtol * np.abs(ref_P).max())
        ref_Z = d.rmatvec(ref_P - rows_start[:, None])
        assert_allclose(Z, ref_Z, rtol=rtol, atol=rtol * np.abs(ref_Z).max())


@pytest.mark.parametrize("shape", [(420, 340), (330, 520)])
def test_one_pass_lipschitz(speed_policy, shape):
    """The step size of a panel-read design (one pass per product, on the
    features' side) is an upper bound of the top eigenvalue of X~^T X~ / n_eff
    within the Lanczos tolerance, as the two-pass operator's."""
    rng = np.random.default_rng(3)
    n, p = shape
    X = rng.standard_normal((n, p)) + 0.3 * rng.standard_normal((n, 1))
    sw = rng.uniform(0.2, 2.0, n)
    two_pass = design_module.Design(X, sw, True)
    exact = np.linalg.eigvalsh(two_pass.dense().T @ two_pass.dense())[-1] / two_pass.n_eff
    speed_policy(fuse_min_bytes=0)
    one_pass = design_module.Design(X, sw, True)
    assert one_pass.fuses
    lip = one_pass.lipschitz()
    tol = get_statistics().lipschitz_tol
    assert exact <= lip <= exact * (1 + 2 * tol)
    assert abs(lip - two_pass.lipschitz()) <= 2 * tol * exact


def test_design_in_place():
    """copy=False centres and weights the caller's own C-ordered copy in
    place (the stacked folds' block); otherwise, or for an F-ordered X, a copy."""
    X, _, sw = _data(n=30, p=7)
    ref = design_module.Design(X, sw, True)
    own = X.copy()
    d = design_module.Design(own, sw, True, copy=False)
    assert d.X is own
    assert_allclose(d.X, ref.X, rtol=1e-15, atol=1e-15)
    Xf = np.asfortranarray(X)
    d = design_module.Design(Xf, sw, True, copy=False)
    assert d.X is not Xf and np.array_equal(Xf, X)
    assert_allclose(d.X, ref.X, rtol=1e-15, atol=1e-15)


def test_one_pass_loop_does_not_depend_on_blas_threads(speed_policy, fused):
    """The panels make FUSE_GROUPS fixed groups of rows: with two BLAS
    threads they run on a pool of two threads of their own (one BLAS thread
    each), with one in turn, and the iterates are the same bits either way.
    (Which of the pool's threads takes a group is the scheduler's: on a busy
    machine one may take both, so the pool is checked, not the threads.)"""
    from threadpoolctl import threadpool_limits

    X, y, sw = _data()
    est = TrajectoryLasso(alpha=0.02, max_iter=40, random_state=0, estimate_risk=False,
                          estimate_loo=False)

    def threads(paths):  # the threads the one-pass products' groups ran in
        return {d["thread"] for d in paths.details("panel_group")}

    def pools(paths):  # (threads, BLAS threads inside) of the passes' pools
        return {(d["workers"], d["blas_threads"]) for d in paths.details("pass_workers")}

    with threadpool_limits(limits=1, user_api="blas"), record() as paths:
        one = clone(est).fit(X, y, sample_weight=sw)
    assert pools(paths) == {(1, 1)}
    assert threads(paths) == {threading.get_ident()}  # in turn, in the caller's thread
    with threadpool_limits(limits=2, user_api="blas"), record() as paths:
        two = clone(est).fit(X, y, sample_weight=sw)
    assert pools(paths) == {(2, 1)}
    assert 1 <= len(threads(paths)) <= 2 and threading.get_ident() not in threads(paths)
    assert_array_equal(two.coef_path_, one.coef_path_)
    assert_array_equal(two.intercept_path_, one.intercept_path_)
    # more BLAS threads than groups (none here): two multithreaded products a step
    speed_policy(fuse_groups=0)
    with record() as paths:
        many = clone(est).fit(X, y, sample_weight=sw)
    assert "run_trajectory" in paths and not threads(paths)
    speed_policy(fuse_min_bytes=2**62)
    ref = clone(est).fit(X, y, sample_weight=sw)
    assert_array_equal(many.coef_path_, ref.coef_path_)


@pytest.mark.parametrize("sparse", [False, True])
def test_columns_product(sparse):
    """X~[:, J] @ c (the clipped extrapolation's correction): the gathered
    columns for a few, a product with the scattered vector for many; both
    equal the dense design's columns times c (centred, weighted)."""
    import scipy.sparse as sp

    X, _, sw = _data(n=50, p=200)
    X[np.abs(X) < 1.0] = 0.0
    d = design_module.Design(sp.csr_matrix(X) if sparse else X, sw, True)
    ref = design_module.Design(X, sw, True).dense()
    rng = np.random.default_rng(0)
    for m in (1, 5, 32, 33, 120, 200):  # gathered up to max(32, 200 / 40)
        J = np.sort(rng.choice(200, m, replace=False))
        c = rng.standard_normal(m)
        assert_allclose(d.columns_product(J, c), ref[:, J] @ c, rtol=1e-12, atol=1e-12)


def test_clipped_fista_path_either_product(speed_policy):
    """The fit's fitted values at the extrapolated point, with the clipping
    correction by gathered columns or by a full product: the same path up
    to rounding (corrections of many coordinates occur in the first steps)."""
    X, y, sw = _data(n=120, p=300)
    est = TrajectoryLasso(alpha=0.01, max_iter=60, estimate_risk=False, estimate_loo=False)
    speed_policy(columns_gather_min=10**9)
    with record() as paths:
        gathered = clone(est).fit(X, y, sample_weight=sw)
    n_gathered = paths.count("matvec")
    sizes = [d["size"] for d in paths.details("columns_product")]
    assert max(sizes) > 8 and len(sizes) > 10
    speed_policy(columns_gather_min=0)
    speed_policy(columns_gather_share=0.0)
    with record() as paths:
        full = clone(est).fit(X, y, sample_weight=sw)
    # one full product per correction
    assert paths.count("matvec") == n_gathered + paths.count("columns_product")
    scale = np.abs(full.coef_path_).max()
    assert_allclose(full.coef_path_, gathered.coef_path_, rtol=0, atol=1e-10 * scale)


def test_one_pass_loop_in_threads_raises_divergence_and_recovers(speed_policy, fused):
    """A step above the stability limit in the two-thread one-pass loop:
    the divergence error leaves the loop (its threads released), and the
    next fit of the same design's data runs as a cold two-pass-equal fit."""
    from threadpoolctl import threadpool_limits

    from skacv.exceptions import DivergenceError

    X, y, sw = _data(seed=2)
    est = TrajectoryLasso(alpha=0.02, max_iter=200, estimate_risk=False, estimate_loo=False)
    with threadpool_limits(limits=2, user_api="blas"):
        step = clone(est).fit(X, y, sample_weight=sw).step_size_
        with pytest.raises(DivergenceError, match="diverge"):
            clone(est).set_params(step_size=5.0 * step).fit(X, y, sample_weight=sw)
        again = clone(est).fit(X, y, sample_weight=sw)
    speed_policy(fuse_min_bytes=2**62)
    ref = clone(est).fit(X, y, sample_weight=sw)
    scale = np.abs(ref.coef_path_).max()
    assert_allclose(again.coef_path_, ref.coef_path_, rtol=0, atol=1e-10 * scale)


def test_warm_starts_switching_between_the_loops(speed_policy, fused):
    """Warm starts that alternate the one-pass and the two-pass loop (the
    BLAS threads changed between fits): each continuation takes the gradient
    at its own start, the path that of a cold fit up to rounding (a one-pass
    continuation once read the gradient its last one-pass run had left)."""
    X, y, sw = _data(seed=3)
    est = TrajectoryLasso(alpha=0.02, solver="ista", max_iter=40, estimate_risk=False,
                          estimate_loo=False)
    cold = clone(est).fit(X, y, sample_weight=sw)
    warm = clone(est).set_params(max_iter=12, warm_start=True).fit(X, y, sample_weight=sw)
    speed_policy(fuse_min_bytes=2**62)  # two products a step
    warm.set_params(max_iter=25).fit(X, y, sample_weight=sw)
    speed_policy(fuse_min_bytes=0)  # one pass again
    warm.set_params(max_iter=40).fit(X, y, sample_weight=sw)
    scale = np.abs(cold.coef_path_).max()
    assert_allclose(warm.coef_path_, cold.coef_path_, rtol=0, atol=1e-10 * scale)


@pytest.mark.parametrize("kernels", ["Haswell", "SkylakeX"])  # narrow and wide thin panels
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [1, 2, 4, 8, 12])
def test_chain_primal_product_every_form_is_the_plain_product(kernels_policy, speed_policy,
                                                              kernels, dtype, k):
    # X~[:, :rows]^T (factor X~[:, :cols] V) by matrix-vector products or
    # thin panels (a few columns: how few, the defaults of the BLAS kernels,
    # pinned whatever this machine runs), blocks of rows, or two products over
    # all rows: the plain product up to rounding, on column prefixes (strided
    # views), with a last partial panel, and the block (a column view of the
    # chains) left as it is; each policy takes the form it says
    from skacv.estimates.risk._propagate import _thin_panel_rows, primal_product

    rng = np.random.default_rng(k)
    Xs = rng.standard_normal((203, 90)).astype(dtype)
    chains = np.asfortranarray(rng.standard_normal((90, 2 * k)).astype(dtype))
    block = chains[:70, k:]  # a strided view, as the chains pass it
    kept = block.copy()
    rows, cols, factor = 80, 70, -0.37
    Xd = Xs.astype(np.float64)
    expected = Xd[:, :rows].T @ (factor * (Xd[:, :cols] @ block.astype(np.float64)))
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    panels = kernels_policy(kernels)
    if k > panels.chain_panel_max_columns:
        default = "plain"  # one block of 2 MiB: all the rows
    else:
        default = "vectors" if k < panels.chain_panel_min_columns else "thin"
    small = {"chain_panel_bytes": 9 * k * 90 * np.dtype(dtype).itemsize,
             "chain_panel_threads_min_bytes": 0, "chain_fused_bytes": 2 * 2**20}
    for policy, form in ((small, default),  # the kernels' columns
                         ({**small, "chain_panel_max_columns": k,
                           "chain_panel_min_columns": k + 1}, "vectors"),
                         ({**small, "chain_panel_min_columns": k}, "thin"),
                         ({**small, "chain_panel_max_columns": k - 1}, "plain"),
                         ({"chain_panel_max_columns": 0, "chain_fused_bytes": 1}, "blocks"),
                         ({"chain_fused_bytes": None}, "plain")):
        pinned = speed_policy(**policy)
        assert (_thin_panel_rows(Xs, k, pinned) == 9) == (form in ("vectors", "thin"))
        out = np.full((rows, k), np.nan, dtype=dtype)
        with record() as paths:
            primal_product(Xs, rows, cols, block, out, factor, pinned)
        taken = ("vectors" if "vector_panel_products" in paths
                 else "thin" if "thin_panel_products" in paths
                 else "blocks" if "primal_blocks" in paths else "plain")
        assert taken == form
        np.testing.assert_allclose(out, expected, rtol=rtol, atol=rtol * np.abs(expected).max())
        assert_array_equal(block, kept)



def test_panel_products_second_residual(fused):
    """``also``: X~^T s of a second residual of the same pass, as two passes
    give it; the first product as without it."""
    X, _, sw = _data(n=37, p=5)
    d = design_module.Design(X, sw, True)
    b = np.arange(5.0)
    P0, Z0 = d.panel_products(b, lambda rows, Pr: Pr * 2.0)
    P, Z, S = d.panel_products(b, lambda rows, Pr: Pr * 2.0, lambda rows, Pr: 1.0 - Pr)
    assert_array_equal(P, P0)
    assert_array_equal(Z, Z0)  # the same products in the same order
    assert_allclose(S, d.rmatvec(1.0 - d.matvec(b)), rtol=1e-13)


def _sklearn_gap(X, y, sw, coef, alpha):
    """scikit-learn's Lasso duality gap (enet_coordinate_descent's, divided
    by the weights' sum) of the weighted, centred problem at ``coef``."""
    w = sw / sw.sum()
    Xc = (X - w @ X) * np.sqrt(sw)[:, None]
    yc = (y - w @ y) * np.sqrt(sw)
    n = sw.sum()
    R = yc - Xc @ coef
    dn = np.max(np.abs(Xc.T @ R))
    const = alpha * n / dn if dn > alpha * n else 1.0
    gap = 0.5 * (R @ R) * (1 + const**2) + alpha * n * np.abs(coef).sum() - const * (R @ yc)
    return gap / n, yc @ yc / n


@pytest.mark.parametrize("fuse", [False, True], ids=["two-pass", "one-pass"])
def test_gap_checks_end_where_the_gap_falls(speed_policy, fuse):
    """A path with ``end_tol`` ends at the first check (every ``end_check``
    steps) where scikit-learn's duality gap is below the goal; the one-pass
    loop sums the gap's X~^T r in its last pass (no product of its own)."""
    from skacv.estimators._setup import FitPlan

    X, y, sw = _data(seed=2)
    if fuse:
        speed_policy(fuse_min_bytes=0)
        speed_policy(panel_bytes=1)
    alpha, tol = 0.2, 1e-5

    def fit(end_tol, max_iter=400):
        est = TrajectoryLasso(alpha=alpha, max_iter=max_iter, estimate_risk=False)
        with record() as paths, est.planned(FitPlan(end_tol=end_tol)):
            est.fit(X, y, sample_weight=sw)
        return est, paths

    est, paths = fit(tol)
    full, full_paths = fit(None)
    checks = np.arange(10, 401, 10)
    gaps = [_sklearn_gap(X, y, sw, full.coef_path_[:, k], alpha) for k in checks]
    below = [k for k, (gap, yy) in zip(checks, gaps, strict=True) if gap <= tol * yy]
    assert below and below[0] < 400  # the goal is reached within the path
    assert est.n_iter_ == below[0]
    assert_allclose(est.coef_path_, full.coef_path_[:, : est.n_iter_ + 1], rtol=1e-12,
                     atol=1e-14)
    # the checks' products: against the same path without checks
    extra = paths.count("rmatvec") - fit(None, est.n_iter_)[1].count("rmatvec")
    assert extra == (0 if fuse else est.n_iter_ // 10)
