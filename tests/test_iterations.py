"""The iteration objects: coefficients, prox, steps and tangents.

The references are textbook formulas and plain numpy loops; the tangents
(Jacobian actions) are checked against perturbed runs of the fit loop. The
algorithms are linear (GD, ridge GD, heavy ball, Nesterov) or piecewise affine
(ISTA, FISTA: soft-thresholding), so a perturbation that keeps every sign
pattern moves the iterates *exactly* along the tangent: the checks are exact up
to rounding, not first-order approximations.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skacv._policy import current_policies
from skacv.iterations._iterations import (
    FISTA,
    ISTA,
    GradientDescent,
    HeavyBall,
    Nesterov,
    check_schedule,
)
from skacv.iterations._path import init_state, run_trajectory
from skacv.iterations._penalties import L2, ElasticNet, soft_threshold
from skacv.linalg._design import Design


def _data(seed=0, n=50, p=30, offset=0.5):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + offset
    y = X[:, :5] @ np.ones(5) + rng.standard_normal(n)
    sw = rng.uniform(0.5, 2.0, n)
    return X, y, sw


def _run(design, y_tilde, iteration, T):
    out = np.zeros((design.n_features, T + 1), dtype=design.dtype, order="F")
    run_trajectory(design, y_tilde, iteration, T, init_state(design), out)
    return out


def _step(design):
    return 1.0 / design.lipschitz()


ITERATIONS = {
    "gd": lambda eta: GradientDescent(eta),
    "ridge_gd": lambda eta: GradientDescent(eta, penalty=L2(0.3)),
    "gd_schedule": lambda eta: GradientDescent(eta, schedule=lambda k: 1.5 / np.sqrt(k)),
    "heavy_ball": lambda eta: HeavyBall(eta, momentum=0.6, penalty=L2(0.1)),
    "nesterov_auto": lambda eta: Nesterov(eta, penalty=L2(0.1)),
    "nesterov_constant": lambda eta: Nesterov(eta, momentum=0.5),
    "ista": lambda eta: ISTA(eta, alpha=0.05),
    "fista": lambda eta: FISTA(eta, alpha=0.05, extrapolation="plain"),
    "fista_ridge": lambda eta: FISTA(eta, penalty=ElasticNet(0.05, 0.2), extrapolation="plain"),
    "fista_clipped": lambda eta: FISTA(eta, alpha=0.05),
    "fista_ridge_clipped": lambda eta: FISTA(eta, penalty=ElasticNet(0.05, 0.2)),
    "nesterov_l1_clipped": lambda eta: Nesterov(eta, penalty=ElasticNet(0.05, 0.0)),
    "heavy_ball_l1_clipped": lambda eta: HeavyBall(eta, momentum=0.6,
                                                   penalty=ElasticNet(0.05, 0.0)),
    "heavy_ball_l1": lambda eta: HeavyBall(eta, momentum=0.6, penalty=ElasticNet(0.05, 0.0),
                                           extrapolation="plain"),
}


# ----------------------------------------------------------------------------
# elementary pieces
# ----------------------------------------------------------------------------


def test_soft_threshold():
    x = np.array([-3.0, -1.0, -0.5, 0.0, 0.2, 1.0, 2.5])
    assert_array_equal(soft_threshold(x, 1.0), [-2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5])
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal(100), 0.4
    # the prox of t |.|: the minimiser of (u - x)^2 / 2 + t |u|, brute force on a grid
    grid = np.linspace(-4, 4, 80001)
    brute = grid[np.argmin((grid[None, :] - x[:, None]) ** 2 / 2 + t * np.abs(grid), axis=1)]
    assert_allclose(soft_threshold(x, t), brute, atol=1e-4)
    # ISTA's in-place prox is the same function, with threshold eta * alpha
    ista = ISTA(0.5, alpha=0.8)
    assert_array_equal(ista.prox(3, x.copy()), soft_threshold(x, 0.4))
    assert_array_equal(ista.prox_jacobian(3, soft_threshold(x, 0.4)), np.abs(x) > 0.4)
    # float32 stays float32
    assert ista.prox(1, x.astype(np.float32)).dtype == np.float32


def test_fista_momentum_is_beck_teboulle():
    """t_1 = 1, t_{k+1} = (1 + sqrt(1 + 4 t_k^2)) / 2 and
    y_{k+1} = x_k + (t_k - 1) / t_{k+1} (x_k - x_{k-1}) (Beck & Teboulle 2009)."""
    it = FISTA(1.0, alpha=0.1)
    t = [None, 1.0]
    for k in range(1, 60):
        t.append((1 + np.sqrt(1 + 4 * t[k] ** 2)) / 2)
    for k in range(1, 60):
        assert it.beta(k) == pytest.approx((t[k] - 1) / t[k + 1], rel=1e-14)
    assert it.beta(1) == 0.0
    # increases to 1, with beta_k ~ 1 - 3 / k
    b = np.array([it.beta(k) for k in range(1, 2000)])
    assert np.all(np.diff(b) > 0) and b[-1] < 1
    assert 1999 * (1 - it.beta(1999)) == pytest.approx(3, rel=1e-2)
    # out-of-order queries give the same values
    assert FISTA(1.0, 0.1).beta(40) == it.beta(40)


def test_nesterov_beta_schedule():
    auto = Nesterov(1.0)
    assert [auto.beta(k) for k in range(1, 6)] == [0.0, 1 / 4, 2 / 5, 3 / 6, 4 / 7]
    assert all(auto.beta(k) == (k - 1) / (k + 2) for k in range(1, 200))
    assert not auto.is_stationary and auto.is_linear
    const = Nesterov(1.0, momentum=0.3)
    assert all(const.beta(k) == 0.3 for k in range(1, 20))
    assert const.is_stationary
    assert HeavyBall(1.0, momentum=0.4).hb(7) == 0.4
    assert HeavyBall(1.0, momentum=0.4).beta(7) == 0.0


def test_step_coefficients_and_flags():
    gd = GradientDescent(0.5, penalty=L2(0.2), schedule=lambda k: 1.0 / k)
    assert gd.eta(1) == 0.5 and gd.eta(4) == 0.125
    assert gd.decay(4) == pytest.approx(1 - 0.125 * 0.2)
    assert not gd.is_stationary
    arr = GradientDescent(2.0, schedule=check_schedule([1.0, 0.5, 0.25], 3))
    assert [arr.eta(k) for k in (1, 2, 3)] == [2.0, 1.0, 0.5]
    assert GradientDescent(0.5, penalty=L2(0.2)).is_stationary
    assert GradientDescent(0.5).is_linear and not ISTA(0.5, 1.0).is_linear
    assert not FISTA(0.5, 1.0).is_stationary
    with pytest.raises(ValueError, match="3 entries but max_iter=4"):
        check_schedule([1.0, 0.5, 0.25], 4)
    # the momentum predicates every consumer asks (fit loop, chains, IACV)
    for it, extrapolates, heavy_ball in [(gd, False, False), (ISTA(0.5, 1.0), False, False),
                                         (FISTA(0.5, 1.0), True, False),
                                         (Nesterov(0.5, momentum=0.5), True, False),
                                         (HeavyBall(0.5, momentum=0.6), False, True)]:
        assert it.extrapolates(10) == extrapolates
        assert it.uses_heavy_ball(10) == heavy_ball
        assert it.has_momentum(10) == (extrapolates or heavy_ball)
        assert not it.has_momentum(0)  # no step, no momentum
    # FISTA's beta_1 = 0: the first step alone does not extrapolate
    assert not FISTA(0.5, 1.0).extrapolates(1) and FISTA(0.5, 1.0).extrapolates(2)
    assert FISTA(0.5, 1.0).extrapolates(5, first=2) and not FISTA(0.5, 1.0).extrapolates(1, 1)
    with pytest.raises(ValueError, match="finite non-negative"):
        check_schedule([1.0, -0.5], 2)


# ----------------------------------------------------------------------------
# the fit loop against textbook loops
# ----------------------------------------------------------------------------


def _textbook(X, y, name, eta, T):
    """Plain numpy loops, written from the textbook updates."""
    n, p = X.shape
    grad = lambda b: -X.T @ (y - X @ b) / n  # noqa: E731
    x_prev, x, v = np.zeros(p), np.zeros(p), np.zeros(p)
    t_k = 1.0
    out = [x.copy()]
    for k in range(1, T + 1):
        if name == "gd":
            x_new = x - eta * grad(x)
        elif name == "ridge_gd":  # gradient of the loss + 0.3 |b|^2 / 2
            x_new = x - eta * (grad(x) + 0.3 * x)
        elif name == "gd_schedule":
            x_new = x - eta * 1.5 / np.sqrt(k) * grad(x)
        elif name == "heavy_ball":  # Polyak
            x_new = x - eta * (grad(x) + 0.1 * x) + 0.6 * (x - x_prev)
        elif name == "nesterov_auto":
            x_new = v - eta * (grad(v) + 0.1 * v)
            v = x_new + (k - 1) / (k + 2) * (x_new - x)
        elif name == "nesterov_constant":
            x_new = v - eta * grad(v)
            v = x_new + 0.5 * (x_new - x)
        elif name == "ista":
            x_new = soft_threshold(x - eta * grad(x), eta * 0.05)
        elif name.startswith("fista"):
            ridge = 0.2 if "ridge" in name else 0.0  # + 0.2 |b|^2 / 2 + 0.05 |b|_1
            x_new = soft_threshold(v - eta * (grad(v) + ridge * v), eta * 0.05)
            t_next = (1 + np.sqrt(1 + 4 * t_k**2)) / 2
            step = x_new - x
            if name.endswith("clipped"):  # never from or across zero
                step = np.clip(step, -np.abs(x_new), np.abs(x_new))
            v = x_new + (t_k - 1) / t_next * step
            t_k = t_next
        elif name.startswith("heavy_ball_l1"):
            m = x - x_prev
            if name.endswith("clipped"):
                m = np.clip(m, -np.abs(x), np.abs(x))
            x_new = soft_threshold(x - eta * grad(x) + 0.6 * m, eta * 0.05)
        elif name == "nesterov_l1_clipped":
            x_new = soft_threshold(v - eta * grad(v), eta * 0.05)
            v = x_new + (k - 1) / (k + 2) * np.clip(x_new - x, -np.abs(x_new), np.abs(x_new))
        x_prev, x = x, x_new
        out.append(x.copy())
    return np.array(out).T


@pytest.mark.parametrize("name", list(ITERATIONS))
def test_fit_loop_equals_textbook_updates(name):
    X, y, _ = _data(1)
    d = Design(X, None, fit_intercept=False)
    _, yt = d.center_y(y)
    eta = _step(d)
    path = _run(d, yt, ITERATIONS[name](eta), 40)
    assert_allclose(path, _textbook(X, y, name, eta, 40), rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------
# tangents against perturbed runs
# ----------------------------------------------------------------------------


def _tangent_path(design, iteration, path, dy):
    """Propagate tangents (a block of directions ``dy`` of y~) with
    ``iteration.tangent``; return dx^k for k = 0..T, shape (T + 1, p, m)."""
    p, T1 = path.shape
    m = dy.shape[1]
    inject = design.rmatvec(dy)
    dx1 = np.zeros((p, m))
    dx2 = np.zeros((p, m))
    dv = np.zeros((p, m))
    out = [dx1.copy()]
    for k in range(1, T1):
        dz = (inject - design.rmatvec(design.matvec(dv))) / design.n_eff
        mask = iteration.prox_jacobian(k, path[:, k])
        coef = iteration.extrapolation_coefficients(k, path[:, k], path[:, k - 1])
        mcoef = (iteration.momentum_coefficients(k, path[:, k - 1], path[:, k - 2])
                 if k >= 2 else None)
        dx, dv = iteration.tangent(k, dv, dx1, dx2, dz, mask, coef, mcoef)
        dx2, dx1 = dx1, dx
        out.append(dx.copy())
    return np.array(out)


@pytest.mark.parametrize("name", list(ITERATIONS))
@pytest.mark.parametrize("weighted", [False, True])
def test_tangent_equals_perturbed_run(name, weighted):
    X, y, sw = _data(2)
    d = Design(X, sw if weighted else None, fit_intercept=True)
    _, yt = d.center_y(y)
    eta = _step(d)
    T = 30
    path = _run(d, yt, ITERATIONS[name](eta), T)
    rng = np.random.default_rng(3)
    dy = rng.standard_normal((d.n_samples, 2))
    linear = ITERATIONS[name](eta).is_linear
    # linear maps: any size; piecewise affine: small enough to keep the signs
    h = 1.0 if linear else 1e-7
    tangents = _tangent_path(d, ITERATIONS[name](eta), path, dy)
    for j in range(dy.shape[1]):
        moved = _run(d, yt + h * dy[:, j], ITERATIONS[name](eta), T)
        if not linear:
            # the check is exact only on a fixed sign pattern: make sure of it
            assert_array_equal(np.sign(moved), np.sign(path))
            assert 0 < np.count_nonzero(path[:, -1]) < d.n_features
        diff = (moved - path) / h
        scale = np.abs(tangents[:, :, j]).max()
        assert scale > 1e-3
        tol = 1e-9 if linear else 1e-6
        assert_allclose(diff.T, tangents[:, :, j], rtol=0, atol=tol * scale)


def test_tangent_masks_the_inactive_coordinates():
    X, y, _ = _data(4)
    d = Design(X, None, fit_intercept=False)
    _, yt = d.center_y(y)
    it = ISTA(_step(d), alpha=0.2)
    path = _run(d, yt, it, 10)
    dx = _tangent_path(d, it, path, np.random.default_rng(0).standard_normal((50, 3)))
    zero = path[:, 10] == 0
    assert zero.any() and (~zero).any()
    assert_array_equal(dx[10][zero], 0.0)
    assert np.all(np.abs(dx[10][~zero]).sum(axis=1) > 0)


def test_clipped_extrapolation():
    """v_j = x_j + beta clip(x_j - x'_j, -|x_j|, |x_j|): zero stays zero, no sign
    crossing, plain away from zero, continuous, and (a, b) reproduce it."""
    it = FISTA(0.3, alpha=0.1)
    plain = FISTA(0.3, alpha=0.1, extrapolation="plain")
    k = 9
    beta = it.beta(k)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(400) * (rng.random(400) < 0.7)
    x_prev = x + rng.standard_normal(400) * rng.choice([0.01, 3.0], 400)
    v = it.extrapolate_iterate(k, x, x_prev)
    assert_allclose(v, x + beta * np.clip(x - x_prev, -np.abs(x), np.abs(x)), rtol=1e-14)
    assert_array_equal(v[x == 0], 0.0)
    assert np.all(np.sign(v) * np.sign(x) >= 0)
    small = np.abs(x - x_prev) <= np.abs(x)
    assert small.any() and (~small & (x != 0)).any()
    assert_allclose(v[small], plain.extrapolate_iterate(k, x, x_prev)[small], rtol=1e-14)
    a, b = it.extrapolation_coefficients(k, x, x_prev)
    assert_allclose(a * x + b * x_prev, v, rtol=1e-14, atol=1e-15)
    # continuous: a coordinate shrinking to zero from either side
    for sgn in (1.0, -1.0):
        xs = np.array([sgn * 1e-9, 0.0])
        vs = it.extrapolate_iterate(k, xs, np.array([2.0, 2.0]))
        assert np.abs(vs).max() < 3e-9
    # one column per run: the same as run by run
    X2, P2 = np.column_stack([x, x_prev]), np.column_stack([x_prev, x])
    V2 = it.extrapolate_iterate(k, X2, P2)
    assert_allclose(V2[:, 1], it.extrapolate_iterate(k, x_prev, x), rtol=1e-14)
    # smooth penalties and extrapolation="plain" are unchanged
    assert Nesterov(0.3, penalty=L2(0.1)).extrapolation_coefficients(k, x, x_prev) is None
    assert plain.extrapolation_coefficients(k, x, x_prev) is None
    with pytest.raises(ValueError, match="extrapolation must be 'clipped' or 'plain'"):
        FISTA(0.3, alpha=0.1, extrapolation="support")
    assert "extrapolation='plain'" in repr(plain) and "extrapolation='clipped'" in repr(it)


def test_repr_of_a_block_of_stacked_columns():
    """The stacked folds' iteration holds a step size and a strength per
    column: its repr (what a traceback through it shows) lists them,
    abridged, where formatting an array as a number raised ``TypeError``."""
    from skacv.model_selection._kfold import stacked_iteration

    its = [FISTA(0.1 * (j + 1), alpha=0.01 * (j + 1)) for j in range(8)]
    block = stacked_iteration(its, np.float64)
    text = repr(block)
    assert text.startswith("FISTA(step_size=[0.1 0.2 0.3 ... 0.6 0.7 0.8], penalty=L1(l1=[")
    assert "0.01" in text and "0.08" in text and "extrapolation='clipped'" in text
    assert repr(its[0]) == ("FISTA(step_size=0.1, penalty=L1(l1=0.01, l2=0), "
                            "extrapolation='clipped')")


def test_clipped_fit_loop_keeps_the_fitted_values():
    """The fit loop's X~ v^k (from X~ x^k, X~ x^{k-1} and the clipped columns)
    equals X~ @ v^k."""
    X, y, sw = _data(7, n=60, p=80)
    d = Design(X, sw, fit_intercept=True)
    _, yt = d.center_y(y)
    it = FISTA(_step(d), alpha=0.02)
    state = init_state(d)
    out = np.zeros((80, 31), order="F")
    run_trajectory(d, yt, it, 30, state, out)
    assert_allclose(state.Xv, d.matvec(state.v), rtol=1e-10, atol=1e-12)
    assert_allclose(state.v, it.extrapolate_iterate(30, out[:, 30], out[:, 29]))
    assert it.extrapolation_correction(30, out[:, 30], out[:, 29]) is not None


@pytest.mark.parametrize("name", ["heavy_ball", "nesterov_auto", "fista"])
def test_combine_and_extrapolate_act_on_blocks(name):
    """The linear parts act column by column on 2-D blocks."""
    it = ITERATIONS[name](0.3)
    rng = np.random.default_rng(5)
    v, dx, z = (rng.standard_normal((8, 3)) for _ in range(3))
    k = 4
    block = it.combine(k, v, dx, z.copy())
    for j in range(3):
        col = it.combine(k, v[:, j], dx[:, j], z[:, j].copy())
        assert_allclose(block[:, j], col, rtol=1e-15)
    expected = it.decay(k) * v + it.hb(k) * dx + it.eta(k) * z
    assert_allclose(block, expected, rtol=1e-14)
    x, x_prev = rng.standard_normal((8, 3)), rng.standard_normal((8, 3))
    assert_allclose(it.extrapolate(k, x, x_prev), x + it.beta(k) * (x - x_prev), rtol=1e-14)


@pytest.mark.parametrize("name", list(ITERATIONS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_combine_and_tangent_in_place(name, dtype):
    """``overwrite_z`` / ``overwrite_dz`` (the risk chains' scratch blocks)
    give the same values as the new-array forms, written into the scratch
    block, in its precision."""
    it = ITERATIONS[name](0.3)
    rng = np.random.default_rng(7)
    v, dx, dx2, z = (rng.standard_normal((8, 3)).astype(dtype) for _ in range(4))
    x, x_prev = rng.standard_normal(8), rng.standard_normal(8)
    mask = rng.random(8) < 0.6
    k = 4
    coef = it.extrapolation_coefficients(k, x, x_prev)
    mcoef = it.momentum_coefficients(k, x, x_prev) if it.hb(k) else None
    scratch = z.copy()
    out = it.combine(k, v, dx, scratch, overwrite_z=True)
    assert out is scratch and out.dtype == dtype
    assert_allclose(out, it.combine(k, v, dx, z.copy()), rtol=1e-6 if dtype == np.float32
                    else 1e-15)
    tol = 1e-6 if dtype == np.float32 else 1e-15
    # z_scaled: z holds eta_k z (the chains fold a constant step into their products)
    zs = (z * dtype(it.eta(k))).astype(dtype)
    scaled = it.combine(k, v, dx, zs, z_scaled=True)
    assert scaled is not zs and scaled.dtype == dtype
    assert_allclose(scaled, out, rtol=10 * tol, atol=10 * tol)
    assert it.combine(k, v, dx, zs, overwrite_z=True, z_scaled=True) is zs
    assert_allclose(zs, out, rtol=10 * tol, atol=10 * tol)
    dxs, _ = it.tangent(k, v, dx, dx2, (z * dtype(it.eta(k))).astype(dtype), mask, coef,
                        mcoef, dz_scaled=True)
    assert_allclose(dxs, it.tangent(k, v, dx, dx2, z.copy(), mask, coef, mcoef)[0],
                    rtol=10 * tol, atol=10 * tol)
    for kk in (1, k):  # beta_1 = 0 for FISTA: dv is a copy of dx in out_v
        ref_x, ref_v = it.tangent(kk, v, dx, dx2, z.copy(), mask, coef, mcoef)
        scratch, v_block = z.copy(), v.copy()  # dv written over its own block
        dxk, dvk = it.tangent(kk, v_block, dx, dx2, scratch, mask, coef, mcoef,
                              overwrite_dz=True, out_v=v_block)
        assert dxk is scratch and dvk is v_block and dxk.dtype == dvk.dtype == dtype
        assert_allclose(dxk, ref_x, rtol=tol)
        assert_allclose(dvk, ref_v, rtol=tol)
        assert not np.any(dxk[~mask])
    # the extrapolation into x_prev's block, and its factors
    a, b = it.extrapolation_factors(k, coef, 2, dtype)
    expected = a * v + b * dx
    assert_allclose(it.extrapolate(k, v, dx, coef), expected, rtol=tol)
    prev = dx.copy()
    assert it.extrapolate(k, v, prev, coef, out=prev) is prev
    assert_allclose(prev, expected, rtol=tol)
    if coef is None:
        assert (a, b) == (1.0 + it.beta(k), -it.beta(k))


def test_preconditioned_combine_with_the_step_folded_into_z():
    """``PreconditionedGD.combine``: ``v + eta P (z - l2 v)``, also from ``eta z``."""
    from skacv.iterations._iterations import PreconditionedGD
    from skacv.iterations._preconditioning import NystromPreconditioner

    rng = np.random.default_rng(3)
    A = rng.standard_normal((40, 8))
    P = NystromPreconditioner.from_features(A, 3, current_policies())
    it = PreconditionedGD(0.7, P, penalty=L2(0.2))
    v, z = rng.standard_normal((8, 2)), rng.standard_normal((8, 2))
    expected = v + 0.7 * P.apply(z - 0.2 * v)
    assert_allclose(it.combine(3, v, None, z.copy()), expected, rtol=1e-13)
    assert_allclose(it.combine(3, v, None, 0.7 * z, z_scaled=True), expected, rtol=1e-13)
    scratch = 0.7 * z
    assert it.combine(3, v, None, scratch, overwrite_z=True, z_scaled=True) is scratch
    assert_allclose(scratch, expected, rtol=1e-13)


@pytest.mark.parametrize("name", list(ITERATIONS))
def test_float32_state_stays_float32(name):
    """No NumPy float64 scalar (momentum, step) may upcast the float32 state:
    the products would then convert X to float64 at every step."""
    X, y, _ = _data(6)
    d = Design(X.astype(np.float32), None, fit_intercept=True)
    _, yt = d.center_y(y)
    state = init_state(d)
    out = np.zeros((d.n_features, 11), dtype=np.float32, order="F")
    run_trajectory(d, yt, ITERATIONS[name](_step(d)), 10, state, out)
    for key in ("x", "x_prev", "v", "Xx", "Xx_prev", "Xv"):
        assert getattr(state, key).dtype == np.float32, key
    path64 = _run(Design(X, None, True), Design(X, None, True).center_y(y)[1],
                  ITERATIONS[name](_step(d)), 10)
    assert_allclose(out, path64, rtol=0, atol=1e-4 * np.abs(path64).max())
