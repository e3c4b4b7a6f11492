"""The stacked folds' step in its fast forms gives the values of its reference
forms bit for bit: the clipped extrapolation of the iterates without the
per-coordinate coefficients, the per-column step sizes tiled to the block's
shape, the intercept's correction of the gradients formed a row per fold."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.model_selection import KFold

from skacv import FISTA, IterativeRidge, TrajectoryLasso
from skacv._policy import current_policies
from skacv.iterations._path import init_state, run_normal_block
from skacv.iterations._penalties import L1, Penalty
from skacv.model_selection._kfold import StackedFolds, fold_views, stacked_iteration


def _iterates(shape, dtype, seed=0):
    """Iterates with zeros, sign changes and steps larger than the iterate
    (clipped), and steps that clip nothing."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    x_prev = (x * rng.uniform(0.2, 1.8, shape)).astype(dtype)
    flat_x, flat_prev = x.reshape(-1), x_prev.reshape(-1)
    flat_prev[::7] = -flat_x[::7]  # crosses zero: clipped
    flat_x[::11] = 0  # at zero: stays there
    flat_prev[::13] = 0
    return x, x_prev


def _same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert_array_equal(a, b)
    assert_array_equal(np.signbit(a), np.signbit(b))  # the zeros' signs too


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(200,), (200, 5)])
@pytest.mark.parametrize("n_unpenalized", [0, 3])
def test_extrapolate_iterate_is_extrapolate_with_the_coefficients(dtype, shape, n_unpenalized):
    it = FISTA(0.1, penalty=L1(0.1, n_unpenalized=n_unpenalized))
    x, x_prev = _iterates(shape, dtype)
    # (at k = 6, 9, 10, ... the float32 coefficient 1 + beta_k differs from
    # 1 + beta_k rounded from float64)
    for k in range(1, 120):
        coef = it.extrapolation_coefficients(k, x, x_prev)
        assert coef is not None or k == 1  # (beta_1 = 0)
        _same_bits(it.extrapolate_iterate(k, x, x_prev), it.extrapolate(k, x, x_prev, coef))
    # nothing clipped: the plain extrapolation, as the coefficients' None says
    same_sign = (x * np.asarray(0.9, dtype)).astype(dtype)
    assert it.extrapolation_coefficients(5, x, same_sign) is None
    _same_bits(it.extrapolate_iterate(5, x, same_sign), it.extrapolate(5, x, same_sign, None))
    # a smooth penalty never clips
    ridge = FISTA(0.1, penalty=None)
    _same_bits(ridge.extrapolate_iterate(5, x, x_prev), ridge.extrapolate(5, x, x_prev, None))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_unpenalized", [0, 3])
def test_extrapolate_with_columns_is_the_coefficients_forms(dtype, n_unpenalized):
    """The fit loop's step (:func:`~skacv.iterations._path.run_trajectory`):
    ``v^k`` and the correction's columns as extrapolate and
    extrapolation_columns give them from the coefficients."""
    it = FISTA(0.1, penalty=L1(0.1, n_unpenalized=n_unpenalized))
    x, x_prev = _iterates((300,), dtype, seed=4)
    for k in range(1, 120):
        coef = it.extrapolation_coefficients(k, x, x_prev)
        v, columns = it.extrapolate_with_columns(k, x, x_prev)
        _same_bits(v, it.extrapolate(k, x, x_prev, coef))
        expected = it.extrapolation_columns(k, x, x_prev, coef)
        if expected is None:
            assert columns is None and k == 1
            continue
        assert_array_equal(columns[0], expected[0])
        _same_bits(columns[1], expected[1])
        assert expected[0].size > 10
    same_sign = (x * np.asarray(0.9, dtype)).astype(dtype)
    v, columns = it.extrapolate_with_columns(5, x, same_sign)
    assert columns is None and it.extrapolation_columns(5, x, same_sign) is None
    _same_bits(v, it.extrapolate(5, x, same_sign, None))


def test_stacked_iteration_tiles_its_strengths_and_threshold():
    """The block's strengths that differ are tiled in the iterates' layout;
    its step sizes stay a read-only row (products by a broadcast row), and
    the prox tiles its threshold to the iterates' shape and layout once."""
    its = [FISTA(s, penalty=L1(a)) for s, a in ((0.1, 0.3), (0.2, 0.3), (0.4, 0.5))]
    row = stacked_iteration(its, np.float32)
    tiled = stacked_iteration(its, np.float32, n_rows=6)
    assert row.step_size.shape == (3,) and tiled.step_size.shape == (3,)
    assert_array_equal(tiled.step_size, row.step_size)
    assert not tiled.step_size.flags.writeable
    assert_array_equal(tiled.penalty.l1_, np.broadcast_to(row.penalty.l1_, (6, 3)))
    # held in the layout of the block's iterates (a fold per row of memory)
    assert tiled.penalty.l1_.flags["F_CONTIGUOUS"] and not tiled.penalty.l1_.flags.writeable
    pre = np.asfortranarray(np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32))
    x = tiled.prox(1, pre)
    tau, _ = tiled.penalty._held_threshold[2:]
    assert tau.shape == (6, 3) and tau.flags["F_CONTIGUOUS"]
    assert tiled.prox(1, pre.copy(order="F")).tobytes() == x.tobytes()
    assert tiled.penalty._held_threshold[2] is tau  # kept
    # the same bits as the row's prox (its threshold broadcast)
    assert_array_equal(x, row.prox(1, pre))
    # an unpenalised row (the block's coordinates are not all alike): a row
    unpenalized = [FISTA(0.1, penalty=L1(0.3, n_unpenalized=1)) for _ in range(2)]
    assert stacked_iteration(unpenalized, np.float32, n_rows=6).step_size.shape == (2,)


def _data(n=60, p=150, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + 0.4 * rng.standard_normal((n, 1)) + 2.0
    y = X[:, :4] @ np.array([1.0, -2.0, 1.5, 0.5]) + rng.standard_normal(n)
    return X, y, rng.integers(1, 4, n).astype(float)


@pytest.mark.parametrize("est", [
    TrajectoryLasso(alpha=0.05, max_iter=60, estimate_risk=False),
    TrajectoryLasso(alpha=0.01, solver="ista", max_iter=60, estimate_risk=False),
    IterativeRidge(alpha=0.5, solver="nesterov", max_iter=60, estimate_risk=False),
], ids=["fista", "ista", "nesterov"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("layout", ["folds", "rotated"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tiled_block_runs_as_the_row_of_step_sizes(speed_policy, est, weighted, layout, dtype):
    """The block's iteration (read-only step sizes, its prox threshold and
    any differing strengths tiled to the block's shape) runs the paths of
    the same iteration with a row of them (broadcast), bit for bit."""
    speed_policy(rotated_min_bytes=0 if layout == "rotated" else np.inf, rotated_min_features=0,
                 fold_covariance=False)
    X, y, sw = _data()
    sw = sw if weighted else None
    p = X.shape[1]
    splits = list(KFold(5, shuffle=True, random_state=0).split(X))
    folds = StackedFolds(est, X, y, sw, splits, np.dtype(dtype), current_policies())
    assert folds.designs.layout == layout
    views = fold_views(folds.designs, folds.products, X, sw, splits, est.fit_intercept)
    iterations = [est.path_iteration(v, *est.path_problem(v)) for v in views]
    tiled = stacked_iteration(iterations, np.dtype(dtype), p)
    row = stacked_iteration(iterations, np.dtype(dtype))
    assert tiled.step_size.shape == row.step_size.shape == (5,)
    assert not tiled.step_size.flags.writeable and row.step_size.flags.writeable
    assert_array_equal(folds.iteration.step_size, tiled.step_size)  # the block's own
    runs = []
    for it in (tiled, row):
        state = init_state(folds.products, n_columns=5)
        out = np.empty((60, p, 5), dtype=dtype)
        run_normal_block(folds.products, folds.response, it, 60, state, out)
        runs.append((out, state))
    assert_array_equal(runs[0][0], runs[1][0])
    assert_array_equal(runs[0][1].x, runs[1][1].x)
    assert_array_equal(runs[0][1].v, runs[1][1].v)
    assert np.abs(runs[0][1].x).max() > 0
    if not tiled.penalty.is_smooth:  # the prox's threshold was tiled
        assert tiled.penalty._held_threshold[2].shape == (p, 5)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradient_correction_a_row_per_fold(speed_policy, weighted, dtype):
    """With residuals whose training sums are far from zero (any target),
    the pass's gradients are each fold's own, ``X~_j^T m_j (target_j -
    P_j)`` with ``X~_j = X~ - sqrt(w) delta_j^T``, by hand in float64; the
    correction is far above the tolerance."""
    speed_policy(rotated_min_bytes=np.inf, fold_covariance=False)
    X, y, sw = _data()
    sw = sw if weighted else None
    splits = list(KFold(5, shuffle=True, random_state=0).split(X))
    folds = StackedFolds(TrajectoryLasso(alpha=0.05, estimate_risk=False), X, y, sw, splits,
                         np.dtype(dtype), current_policies())
    d = folds.designs
    assert d.layout == "folds"
    rng = np.random.default_rng(2)
    V = rng.standard_normal((X.shape[1], 5)).astype(dtype)
    target = (rng.standard_normal((5, X.shape[0])) + 3.0).astype(dtype)
    P, Z, rss = d.fitted_and_gradient(V, target)
    Xs = d.base.X.astype(np.float64)
    P_ref = (Xs @ V.astype(np.float64)).T
    R = (target - P_ref) * d.mask_t
    sqrt_w = d.sqrt_weight.astype(np.float64)
    shift = d.delta.astype(np.float64) * (R @ sqrt_w)[None, :]
    Z_ref = Xs.T @ R.T - shift
    scale = np.abs(Z_ref).max()
    tol = 1e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(P, P_ref, atol=tol * np.abs(P_ref).max(), rtol=0)
    np.testing.assert_allclose(Z, Z_ref, atol=tol * scale, rtol=0)
    np.testing.assert_allclose(rss, float((R * R).sum()), rtol=10 * tol)
    assert np.abs(shift).max() > 100 * tol * scale  # the correction matters


def test_prox_keeps_its_threshold_for_a_read_only_step_only():
    pen = L1(0.3)
    rng = np.random.default_rng(0)
    pre = rng.standard_normal((40, 5)).astype(np.float32)
    expected = {}
    steps = []
    for scale in (1.0, 2.0):
        step = np.ascontiguousarray(np.broadcast_to(
            np.array([0.1, 0.2, 0.3, 0.4, 0.5], dtype=np.float32) * scale, (40, 5)))
        expected[scale] = L1(0.3).prox(pre.copy(), step.copy())  # nothing kept
        step.flags.writeable = False
        steps.append(step)
    for _ in range(2):  # kept for each read-only array, given again, never stale
        for scale, step in zip((1.0, 2.0), steps, strict=True):
            _same_bits(pen.prox(pre.copy(), step), expected[scale])
    assert pen._held_threshold[0] is steps[-1]
    writable = np.array(steps[0])
    pen.prox(pre.copy(), writable)
    assert pen._held_threshold[0] is steps[-1]  # a writable step is not kept
    writable *= 2  # (it may change between calls)
    _same_bits(pen.prox(pre.copy(), writable), expected[2.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_held_out_errors_read_the_folds_iterates_in_place(dtype):
    """The paths held a fold per row (a transposed view, what advance
    keeps) give the held-out errors of the same iterates held contiguous."""
    X, y, sw = _data()
    splits = list(KFold(5, shuffle=True, random_state=0).split(X))
    folds = StackedFolds(TrajectoryLasso(alpha=0.05, estimate_risk=False), X, y, sw, splits,
                         np.dtype(dtype), current_policies())
    rng = np.random.default_rng(1)
    held = rng.standard_normal((30, 5, X.shape[1])).astype(dtype).transpose(0, 2, 1)
    got = folds._held_out_errors_of(held)
    ref = folds._held_out_errors_of(np.ascontiguousarray(held))
    np.testing.assert_allclose(got, ref, rtol=1e-5 if dtype == np.float32 else 1e-12)
    # and by hand, fold by fold (the weighted held-out squared errors)
    d = folds.designs
    Xs = d.base.X.astype(np.float64)
    response = d.by_fold(folds.response).astype(np.float64)
    for j, rows in enumerate(folds.tests):
        B = held[:, :, j].T.astype(np.float64)
        P = Xs[rows] @ B - d.sqrt_weight[rows, None] * (d.delta[:, j] @ B)[None, :]
        R = response[j, rows][:, None] - P
        np.testing.assert_allclose(got[:, j], (R * R).sum(axis=0),
                                   rtol=1e-4 if dtype == np.float32 else 1e-10)


def test_soft_threshold_is_sign_times_shrinkage():
    """``x - clip(x, -tau, tau)`` is ``sign(x) max(|x| - tau, 0)`` bit for
    bit (a zero where ``|x| <= tau``), per coordinate thresholds too."""
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        x = (rng.standard_normal((300, 5)) * 2).astype(dtype)
        x[::17] = 0.5  # at the threshold
        x[1::17] = -0.5
        for tau in (dtype(0.5), np.abs(rng.standard_normal((300, 5))).astype(dtype)):
            got = L1(1.0).prox(x.copy(), tau)
            x64 = x.astype(np.float64)
            ref = np.sign(x64) * np.maximum(np.abs(x64) - np.asarray(tau, np.float64), 0)
            # (the difference of two floats of dtype rounded once: as dtype's own)
            ref32 = np.sign(x) * np.maximum(np.abs(x) - tau, 0).astype(dtype)
            assert_array_equal(got, ref32)
            np.testing.assert_allclose(got, ref, rtol=4 * np.finfo(dtype).eps, atol=0)
            assert not np.signbit(got[got == 0]).any()


def test_tiled_strengths_smoothness_follows_the_array():
    """A read-only tiled strength is looked at once (held with the array):
    another array in its place is looked at again, a writeable one at
    every call (changed in place, the answer changes); the decay applies
    the ridge strength exactly where it is non-zero."""
    p = Penalty(l1=1.0, l2=0.0)
    for l1, smooth in ((np.ones((4, 3)), False), (np.zeros((4, 3)), True),
                       (np.eye(4, 3), False), (np.zeros((4, 3)), True)):
        l1.flags.writeable = False
        p.l1_ = l1
        assert p.is_smooth is smooth and p.is_smooth is smooth
    live = np.zeros((4, 3))
    p.l1_ = live
    assert p.is_smooth
    live[2, 1] = 0.5
    assert not p.is_smooth
    v = np.arange(12.0).reshape(4, 3) + 1.0
    for l2 in (np.zeros((4, 3)), np.full((4, 3), 0.25)):
        l2.flags.writeable = False
        p.l2_ = l2
        out = np.ones((4, 3))
        p.decay(v, 2.0, out)
        assert_array_equal(out, 1.0 - 2.0 * l2 * v)
