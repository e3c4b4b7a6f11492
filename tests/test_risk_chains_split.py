"""Chains that meet in the middle (proximal iterations without momentum).

Forward chains carry the sources ``0..r-1`` to step ``r``; the transposed
steps carry the outputs ``r+1..T`` back to it. The references: the exact
memory matrix by finite differences of an independent elastic-net ISTA loop
(the map is piecewise affine, so central differences are exact up to
rounding), and the forward-only chains (``split = T``) with the same probes.
"""

import numpy as np
import pytest

# the independent FISTA loops (clipped and plain) of the risk tests
from test_risk import reference_memory, reference_path

import skacv.estimates.risk._chains as chains
from skacv import FISTA, ISTA, ElasticNet, TrajectoryLasso
from skacv._policy import get_policy
from skacv._trace import record
from skacv.estimates.risk._estimate import memory_matrix
from skacv.linalg._design import make_design


def _soft(x, t):
    return np.sign(x) * np.maximum(np.abs(x) - t, 0)


def _ista_path(X, Y, eta, l1, l2, w):
    """Elastic-net ISTA on the weighted mean loss; step ``k`` reads ``Y[:, k-1]``."""
    n, p = X.shape
    b = np.zeros(p)
    out = [b]
    for k in range(1, Y.shape[1] + 1):
        grad = X.T @ (w * (Y[:, k - 1] - X @ b)) / w.sum()
        b = _soft((1 - eta * l2) * b + eta * grad, eta * l1)
        out.append(b)
    return np.array(out).T


def _exact_memory(X, y, eta, l1, l2, w, T, delta=1e-6):
    """``A[t, s] = tr(X~ d b^t / d y~^(s))`` with ``X~ = sqrt(w) X``,
    ``y~ = sqrt(w) y``: a perturbation ``e_i`` of ``y~`` at source ``s`` is
    ``e_i / sqrt(w_i)`` on ``y``."""
    A = np.zeros((T + 1, T + 1))
    Y = np.repeat(y[:, None], T, axis=1)
    sw = np.sqrt(w)
    for s in range(T):
        for i in range(X.shape[0]):
            Yp, Ym = Y.copy(), Y.copy()
            Yp[i, s] += delta / sw[i]
            Ym[i, s] -= delta / sw[i]
            dB = (_ista_path(X, Yp, eta, l1, l2, w) - _ista_path(X, Ym, eta, l1, l2, w))
            A[:, s] += sw[i] * X[i] @ dB / (2 * delta)
    return A


def _problem(n, p, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, p)
    beta = np.zeros(p)
    beta[:5] = 1.0
    return X, X @ beta + 0.5 * rng.randn(n), rng.uniform(0.5, 2.0, n)


def _forced(speed_policy, split, gram=True):
    """The chains meet at ``split`` (at most the path's length); without
    ``gram``, the primal products X~^T (X~ d) at every step."""
    speed_policy(chain_split=split, chain_gram="auto" if gram else "never")


# n > support: identity probes on the coefficients; n < support: on the samples
@pytest.mark.parametrize("shape, l1", [((24, 16), 0.05), ((12, 40), 0.02)])
@pytest.mark.parametrize("split", [1, 2, 5, 9])
@pytest.mark.parametrize("gram", [True, False])
@pytest.mark.parametrize("folded", [True, False])
def test_split_chains_equal_finite_differences(speed_policy, shape, l1, split, gram, folded):
    """``folded``: a constant step is folded into the products (factor
    ``-eta / n``, the combinations only add); a schedule (here of ones, the
    same steps) keeps the step out of them (factor ``-1 / n``)."""
    X, y, w = _problem(*shape)
    T, l2 = 10, 0.3
    design = make_design(X, sample_weight=w, fit_intercept=False)
    eta = 0.9 / design.lipschitz()
    iteration = ISTA(eta, penalty=ElasticNet(l1, l2), schedule=None if folded else np.ones(T))
    path = _ista_path(X, np.repeat(y[:, None], T, axis=1), eta, l1, l2, w)
    support = (path[:, 1:] != 0).any(axis=1).sum()
    assert (support > shape[0]) == (shape[1] > shape[0])  # both probe sides are exercised
    _forced(speed_policy, split, gram)
    with record() as paths:
        A, A_src = memory_matrix(design, iteration, path, n_probes=None, chain_dtype=np.float64)
    assert [d["T"] for d in paths.details("split_step")] == [T]
    factors = {d["factor"] for d in paths.details("gram_product")}
    assert len(factors) == 1
    assert factors.pop() == pytest.approx(-(eta if folded else 1.0) / design.n_eff, rel=1e-12)
    ref = _exact_memory(X, y, eta, l1, l2, w, T)
    np.testing.assert_allclose(A, ref, atol=1e-6 * np.abs(ref).max())
    np.testing.assert_array_equal(A_src, A)  # no extrapolation: the sources are the outputs


@pytest.mark.parametrize("split", [1, 7, 18])
def test_split_chains_equal_forward_chains_with_the_same_probes(speed_policy, split):
    """Hutchinson probes, sample weights, an intercept: the same memory
    matrix and risk path as the forward-only chains (float64 chains: to
    rounding; float32: to its rounding, far below the probes' noise)."""
    X, y, w = _problem(60, 90, seed=3)
    for dtype, rtol in (("float64", 1e-10), ("float32", 1e-4)):
        kw = dict(solver="ista", max_iter=20, n_probes=6, random_state=0,
                  risk_options={"chain_dtype": dtype})
        _forced(speed_policy, 20)  # split = T: forward only
        ref = TrajectoryLasso(0.05, **kw).fit(X, y, sample_weight=w)
        _forced(speed_policy, split)
        est = TrajectoryLasso(0.05, **kw).fit(X, y, sample_weight=w)
        scale = np.abs(ref.memory_matrix_).max()
        np.testing.assert_allclose(est.memory_matrix_, ref.memory_matrix_, rtol=rtol,
                                   atol=rtol * scale)
        np.testing.assert_allclose(est.risk_path_, ref.risk_path_, rtol=rtol)


@pytest.mark.parametrize("extrapolation", ["clipped", "plain"])
@pytest.mark.parametrize("shape", [(24, 16), (12, 40)])
@pytest.mark.parametrize("split", [1, 2, 5, 9])
@pytest.mark.parametrize("folded", [True, False])
def test_split_fista_chains_equal_finite_differences(speed_policy, extrapolation, shape, split,
                                                     folded):
    """FISTA: the backward chains carry a functional of ``(dx^k, dv^k)``; the
    outputs' memory matrix equals finite differences of the reference loop,
    and both matrices (outputs and gradient points) equal the forward-only
    chains'; with the step folded into the products or not (a schedule of
    ones)."""
    X, y, _ = _problem(*shape, seed=4)
    T, alpha = 10, 0.05
    design = make_design(X, fit_intercept=False)
    eta = 0.9 / design.lipschitz()
    solver = "fista" if extrapolation == "clipped" else "fista_plain"
    path = reference_path(X, np.repeat(y[:, None], T, axis=1), solver, eta, T, alpha=alpha)

    def matrices(r):
        _forced(speed_policy, r)
        fista = FISTA(eta, alpha, extrapolation=extrapolation,
                      schedule=None if folded else np.ones(T))
        return memory_matrix(design, fista, path, n_probes=None, chain_dtype=np.float64)

    A, A_src = matrices(split)
    A_ref, A_src_ref = matrices(T)
    scale = np.abs(A_ref).max()
    np.testing.assert_allclose(A, A_ref, atol=1e-12 * scale)
    np.testing.assert_allclose(A_src, A_src_ref, atol=1e-12 * np.abs(A_src_ref).max())
    assert np.abs(A_src - A).max() > 1e-3 * scale  # the two matrices differ
    exact = reference_memory(X, y, solver, eta, T, 1e-6, alpha=alpha)
    np.testing.assert_allclose(A, exact, atol=1e-6 * np.abs(exact).max())


@pytest.mark.parametrize("split", [1, 9, 20])
def test_split_fista_with_probes_and_weights(speed_policy, split):
    """Hutchinson probes, sample weights, an intercept, float32 chains: the
    same risk path as the forward-only chains (to float32 rounding)."""
    X, y, w = _problem(60, 90, seed=5)
    for dtype, rtol in (("float64", 1e-10), ("float32", 1e-4)):
        kw = dict(solver="fista", max_iter=30, n_probes=6, random_state=0,
                  risk_options={"chain_dtype": dtype})
        _forced(speed_policy, 30)
        ref = TrajectoryLasso(0.05, **kw).fit(X, y, sample_weight=w)
        _forced(speed_policy, split)
        est = TrajectoryLasso(0.05, **kw).fit(X, y, sample_weight=w)
        np.testing.assert_allclose(est.memory_matrix_, ref.memory_matrix_, rtol=rtol,
                                   atol=rtol * np.abs(ref.memory_matrix_).max())
        np.testing.assert_allclose(est.risk_path_, ref.risk_path_, rtol=rtol)


def test_split_step_meets_in_the_middle_of_constant_supports():
    """Step ``k`` advances ``k - 1`` chains forward or ``T - k + 1`` backward,
    at the same cost per chain, so the split is ``r = T/2`` or ``T/2 + 1``
    whatever the supports; with constant supports it costs
    ``r (r - 1) / 2 + (T - r) (T - r + 1) / 2`` chain-steps, about half the
    forward chains' ``T (T - 1) / 2``. Short paths, where the split saves
    less than its overhead, are not split."""
    T = 100
    prefix = np.full(T + 2, 300)
    r = chains.split_step(50, prefix, T, get_policy())
    assert r in (T // 2, T // 2 + 1)
    cost = chains._chain_columns(10, T, r).sum()
    assert cost / chains._chain_columns(10, T, T).sum() == pytest.approx(
        (r * (r - 1) / 2 + (T - r) * (T - r + 1) / 2) / (T * (T - 1) / 2), rel=1e-3)
    assert chains.split_step(50, prefix[:5], 3, get_policy()) == 3
    shrinking = np.linspace(3000, 1000, T + 2).astype(int)
    assert chains.split_step(500, shrinking, T, get_policy()) in (T // 2, T // 2 + 1)


def test_warm_start_and_heavy_ball_run_forward_only():
    """A warm start continues the forward chains of the shorter path; the
    heavy ball's momentum has no transposed step here: neither is split.
    FISTA splits with two backward chains an output (``r ~ 2 T / 3``)."""
    from skacv import HeavyBall

    X, y, _ = _problem(60, 90, seed=1)
    shared = dict(max_iter=30, n_probes=4, random_state=0, risk_options={"probe_scheme": "shared"})
    with record() as paths:
        TrajectoryLasso(0.05, solver=HeavyBall(momentum=0.5), max_iter=30, n_probes=4,
                        random_state=0).fit(X, y)
        TrajectoryLasso(0.05, solver="ista", warm_start=True, **shared).fit(X, y)
    assert paths.count("memory_matrices") == 2 and "split_step" not in paths
    with record() as paths:
        TrajectoryLasso(0.05, solver="ista", **shared).fit(X, y)
        TrajectoryLasso(0.05, solver="fista", **shared).fit(X, y)
    # one output a backward chain (ISTA), two with extrapolation (FISTA)
    assert [d["per_output"] for d in paths.details("split_step")] == [1, 2]
    T, prefix = 90, np.full(92, 100)
    assert abs(chains.split_step(50, prefix, T, get_policy(), 2) - 2 * T / 3) <= 1
