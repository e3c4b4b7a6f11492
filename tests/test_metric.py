"""The rank-one metric of the Lasso path's FISTA (skacv.iterations._metric):
its prox against the optimality conditions, its inverse against a dense
solve, its majorisation of the working set's Hessian, and the converged
path it solves against scikit-learn's Lasso and the plain step."""

import numpy as np
import pytest
from sklearn.linear_model import Lasso

from skacv import TrajectoryLasso, risk_alpha_path
from skacv._policy import get_policy
from skacv._trace import record
from skacv.iterations._metric import RankOneMetric, rank_one_metric


def _equicorrelated(n, p, rho=0.5, s=10, seed=0):
    rng = np.random.default_rng(seed)
    X = np.sqrt(1 - rho) * rng.standard_normal((n, p)) + np.sqrt(rho) * rng.standard_normal((n, 1))
    beta = np.zeros(p)
    beta[:s] = 1.0
    return X, X @ beta + rng.standard_normal(n)


def _metric(p, seed, ratio=50.0):
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(p)
    b = rng.uniform(0.5, 2.0)
    return RankOneMetric(u, ratio * b, b)


@pytest.mark.parametrize("seed", range(6))
def test_prox_meets_the_optimality_conditions(seed):
    """x = argmin 1/2 ||x - w||_M^2 + alpha ||x||_1 iff M (w - x) is in
    alpha times the subdifferential of ||x||_1 at x: -alpha sign(x_j) on the
    support, within [-alpha, alpha] off it."""
    rng = np.random.default_rng(100 + seed)
    p = 40
    metric = _metric(p, seed, ratio=[2.0, 50.0, 1e4][seed % 3])
    M = metric.b * np.eye(p) + metric.c * np.outer(metric.u, metric.u)
    w = rng.standard_normal(p) * 3
    alpha = rng.uniform(0.2, 2.0)
    x = metric.prox_l1(w, alpha)
    g = M @ (w - x)
    on = x != 0
    assert on.any() and (~on).any()  # both conditions are exercised
    np.testing.assert_allclose(g[on], alpha * np.sign(x[on]), rtol=1e-9, atol=1e-9 * alpha)
    assert np.all(np.abs(g[~on]) <= alpha * (1 + 1e-9))


def test_prox_is_soft_thresholding_without_the_rank_one_part():
    rng = np.random.default_rng(3)
    w = rng.standard_normal(30)
    metric = RankOneMetric(rng.standard_normal(30), 2.0, 2.0)
    x = metric.prox_l1(w, 0.5)
    np.testing.assert_allclose(x, np.sign(w) * np.maximum(np.abs(w) - 0.25, 0), atol=1e-14)


def test_solve_inverts_the_metric():
    metric = _metric(25, 4)
    M = metric.b * np.eye(25) + metric.c * np.outer(metric.u, metric.u)
    z = np.random.default_rng(5).standard_normal(25)
    np.testing.assert_allclose(metric.solve(z), np.linalg.solve(M, z), rtol=1e-12)


def test_metric_majorises_an_equicorrelated_hessian():
    """M - H is positive semidefinite (up to rounding) for the Hessian of
    equicorrelated columns, whose top eigenvalue (about rho p) the metric
    carries on its own direction; an isotropic design gets no metric."""
    X, _ = _equicorrelated(300, 120)
    X = X - X.mean(axis=0)
    H = X.T @ X / 300
    lam, V = np.linalg.eigh(H)
    # a Lanczos-quality top direction: the exact one, perturbed
    u = V[:, -1] + 1e-3 * np.random.default_rng(0).standard_normal(120)
    metric, _ = rank_one_metric(lambda v: H @ v, 120, u, get_policy())
    assert metric is not None
    M = metric.b * np.eye(120) + metric.c * np.outer(metric.u, metric.u)
    assert np.linalg.eigvalsh(M - H).min() >= -1e-10 * lam[-1]
    # the rest of the spectrum sets b (within the margin), not the spike
    assert lam[-2] <= metric.b <= 1.6 * lam[-2]
    assert metric.a >= lam[-1] * (1 - 1e-9)

    Z = np.random.default_rng(1).standard_normal((300, 120))
    Z -= Z.mean(axis=0)
    G = Z.T @ Z / 300
    none, _ = rank_one_metric(lambda v: G @ v, 120, np.linalg.eigh(G)[1][:, -1], get_policy())
    assert none is None


# the share of the plain step's FISTA steps the metric may take (measured:
# 0.19 with p > n; 0.45 with p < n, where the plain path's conjugate-gradient
# finish already does much of the work)
@pytest.mark.parametrize("shape, share", [((200, 300), 1 / 3), ((300, 120), 0.6)])
def test_path_in_the_metric_equals_sklearn_in_fewer_steps(shape, share, speed_policy):
    """On equicorrelated columns the path solved in the metric has the
    solutions of scikit-learn's Lasso (tight tolerance) and of the plain
    step, in a fraction of the plain step's FISTA steps."""
    n, p = shape
    X, y = _equicorrelated(n, p)
    kw = dict(n_alphas=8, eps=1e-2, tol=1e-10, max_iter=50_000)
    speed_policy(path_coordinate_descent=False)  # FISTA's steps (p < n: the covariance form)
    fast = risk_alpha_path(TrajectoryLasso(), X, y, **kw)
    speed_policy(path_metric=False, path_coordinate_descent=False)
    plain = risk_alpha_path(TrajectoryLasso(), X, y, **kw)
    np.testing.assert_allclose(fast.alphas, plain.alphas)
    scale = np.abs(plain.coefs).max()
    np.testing.assert_allclose(fast.coefs, plain.coefs, atol=1e-4 * scale)
    np.testing.assert_array_equal(fast.df, plain.df)
    for j, alpha in enumerate(fast.alphas):
        ref = Lasso(alpha=alpha, tol=1e-12, max_iter=200_000).fit(X, y)
        np.testing.assert_allclose(fast.coefs[:, j], ref.coef_, atol=1e-4 * scale)
    assert fast.n_iter.sum() <= share * plain.n_iter.sum()


# the speed policy's metric_margin far below 1: b under the top of the rest of the spectrum
# (0.05: the steps diverge; 0.3: the objective keeps increasing)
@pytest.mark.parametrize("margin, event", [(0.05, "DivergenceError"), (0.3, "_MetricStalled")])
def test_a_metric_that_does_not_majorise_falls_back(margin, event, speed_policy):
    """A metric whose b is far too small stalls or diverges: the working set
    is solved again with the plain step, to the same solutions."""

    X, y = _equicorrelated(200, 300)
    kw = dict(n_alphas=6, eps=1e-2, tol=1e-10, max_iter=50_000)
    speed_policy(path_columns_descent=False)  # the working sets by FISTA
    ref = risk_alpha_path(TrajectoryLasso(), X, y, **kw)
    speed_policy(metric_margin=margin)
    with record() as paths:
        bad = risk_alpha_path(TrajectoryLasso(), X, y, **kw)
    assert event in [d["reason"] for d in paths.details("metric_fallback")]
    np.testing.assert_allclose(bad.coefs, ref.coefs, atol=1e-4 * np.abs(ref.coefs).max())
    np.testing.assert_array_equal(bad.df, ref.df)


def test_small_working_sets_take_coordinate_descent_whatever_their_spectrum(speed_policy):
    """A common factor on few rows (p >> n, the gene-expression designs'
    shape): working sets of at most the speed policy's
    ``path_metric_min_entries`` entries are solved by coordinate descent on
    their columns, not FISTA in the rank-one metric, to the same solutions
    (scikit-learn's Lasso at a tight tolerance; the metric's path); above
    that size the metric is taken as before."""
    speed_policy(path_lars_max_samples=None)  # the working sets, not the homotopy path
    X, y = _equicorrelated(30, 400, rho=0.6, s=5, seed=2)
    kw = dict(n_alphas=8, eps=1e-2, tol=1e-10, max_iter=50_000)
    assert 30 * 100 <= get_policy().path_metric_min_entries  # the first working sets fit
    with record() as small:
        cd = risk_alpha_path(TrajectoryLasso(), X, y, **kw)
    speed_policy(path_metric_min_entries=0)
    with record() as large:
        metric = risk_alpha_path(TrajectoryLasso(), X, y, **kw)
    assert "metric_fista" in large and "metric_fista" not in small
    assert "columns_coordinate_descent" in small
    scale = np.abs(metric.coefs).max()
    np.testing.assert_allclose(cd.coefs, metric.coefs, atol=1e-4 * scale)
    for j, alpha in enumerate(cd.alphas):
        ref = Lasso(alpha=alpha, tol=1e-12, max_iter=200_000).fit(X, y)
        np.testing.assert_allclose(cd.coefs[:, j], ref.coef_, atol=1e-4 * scale)


@pytest.mark.parametrize("rho, ruled_out", [(0.0, True), (0.6, False)])
def test_kept_spike_bound_holds_the_grown_spectrum(rho, ruled_out):
    """A working set grown by a few columns: the kept step bound's top
    estimate plus the new columns' squared norms bounds its top eigenvalue
    from above and the kept second Ritz value its second from below (Weyl;
    the exact spectra by LAPACK), so that ruling the spike out agrees with
    the exact spectrum; an isotropic design is ruled out without a Lanczos
    run, an equicorrelated one (a common factor) never; a working set that
    is not a superset of the kept one is not decided."""
    from skacv.iterations._metric import spike_possible
    from skacv.linalg._design import Design
    from skacv.model_selection._lasso_spaces import _SampleSpace

    rng = np.random.default_rng(3)
    n, p = 80, 200
    X = np.sqrt(1 - rho) * rng.standard_normal((n, p)) + np.sqrt(rho) * rng.standard_normal((n, 1))
    design = Design(X)
    space = _SampleSpace(design, X, None, design.center_y(rng.standard_normal(n))[1])
    work = np.arange(0, 120, 2)
    space.step_bound(space.sub(work), work)

    def exact(cols):
        A = design.X[:, cols]
        return np.linalg.eigvalsh(A.T @ A / design.n_eff)

    lam = exact(work)
    assert space.top >= lam[-1] * (1 - 1e-12) and space.second <= lam[-2] * (1 + 1e-12)
    grown = np.union1d(work, [1, 7, 151])
    lam_grown = exact(grown)
    added = np.sum(design.X[:, [1, 7, 151]] ** 2) / design.n_eff
    assert lam_grown[-1] <= space.top + added + 1e-12
    assert lam_grown[-2] >= space.second - 1e-12
    policy = get_policy()
    assert space.spike_ruled_out(grown) is ruled_out
    if ruled_out:
        assert not spike_possible(lam_grown[-1], lam_grown[-2], policy)
    else:
        assert spike_possible(lam_grown[-1], lam_grown[-2], policy)
    assert not space.spike_ruled_out(np.union1d(work[1:], [1]))  # not a superset


@pytest.mark.parametrize("rho", [0.0, 0.5])
def test_shared_design_bounds_rule_out_isotropic_working_sets(rho):
    """A search's design (shared): the design's top eigenvalue bounds every
    working set's from above (Cauchy's interlacing), and the trace less it
    over the rank less one (any working set) or the kept second Ritz value
    (a superset of the kept set) the second from below, so that working
    sets are decided without a Lanczos run where the exact spectra (LAPACK)
    rule the spike out; an equicorrelated design never. A superset grown
    by many columns, which Weyl's bound alone leaves to Lanczos (a design
    of one fit alone), is decided."""
    from skacv.iterations._metric import spike_possible
    from skacv.linalg._design import Design, make_design, shared_designs
    from skacv.model_selection._lasso_spaces import _SampleSpace

    rng = np.random.default_rng(5)
    n, p = 200, 240
    X = np.sqrt(1 - rho) * rng.standard_normal((n, p)) + np.sqrt(rho) * rng.standard_normal((n, 1))
    y = rng.standard_normal(n)
    policy = get_policy()

    def exact(design, cols):
        A = design.X[:, cols]
        return np.linalg.eigvalsh(A.T @ A / design.n_eff)

    small = np.sort(rng.choice(p, 20, replace=False))
    grown = np.union1d(small, rng.choice(p, 60, replace=False))
    with shared_designs():
        design = make_design(X)
        space = _SampleSpace(design, X, None, design.center_y(y)[1])
        top = exact(design, np.arange(p))[-1]
        assert top * (1 - 1e-12) <= design.lipschitz() <= top * (1 + 1e-3)
        for size in (60, 120, 240):
            work = np.sort(rng.choice(p, size, replace=False))
            lam = exact(design, work)
            assert space.spike_ruled_out(work) is (rho == 0.0)
            assert spike_possible(lam[-1], lam[-2], policy) == (rho != 0.0)
        space.step_bound(space.sub(small), small)
        lam = exact(design, grown)
        assert space.spike_ruled_out(grown) is (rho == 0.0)
        assert spike_possible(lam[-1], lam[-2], policy) == (rho != 0.0)
    alone = Design(X)
    space = _SampleSpace(alone, X, None, alone.center_y(y)[1])
    assert not space.spike_ruled_out(np.arange(60))
    space.step_bound(space.sub(small), small)
    assert not space.spike_ruled_out(grown)
