"""The shared probes' chains of proximal iterations against finite
differences: the exact memory matrix of an independent elastic-net ISTA
loop (the map is piecewise affine, so central differences are exact up to
rounding) and of the FISTA loops of the risk tests, with identity probes
(exact traces) on either side of the design, with and without the
restricted Gram matrix, the step folded into the products or not.
"""

import numpy as np
import pytest

# the independent FISTA loops (clipped and plain) of the risk tests
from test_risk import reference_memory, reference_path

import skacv.estimates.risk._propagate as propagate
from skacv import FISTA, ISTA, ElasticNet
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


# n > support: identity probes on the coefficients; n < support: on the samples
@pytest.mark.parametrize("shape, l1", [((24, 16), 0.05), ((12, 40), 0.02)])
@pytest.mark.parametrize("gram", [True, False])
@pytest.mark.parametrize("folded", [True, False])
def test_chains_equal_finite_differences(monkeypatch, shape, l1, gram, folded):
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
    if not gram:  # the primal products X~^T (X~ d) at every step
        monkeypatch.setattr(propagate, "maybe_gram", lambda Xs, gram, *a, **k: gram)
    factors = set()
    product = propagate.gram_product
    monkeypatch.setattr(propagate, "gram_product",
                        lambda *a: factors.add(a[-2]) or product(*a))
    A, A_src = memory_matrix(design, iteration, path, n_probes=None, chain_dtype=np.float64)
    assert len(factors) == 1
    assert factors.pop() == pytest.approx(-(eta if folded else 1.0) / design.n_eff, rel=1e-12)
    ref = _exact_memory(X, y, eta, l1, l2, w, T)
    np.testing.assert_allclose(A, ref, atol=1e-6 * np.abs(ref).max())
    np.testing.assert_array_equal(A_src, A)  # no extrapolation: the sources are the outputs


@pytest.mark.parametrize("extrapolation", ["clipped", "plain"])
@pytest.mark.parametrize("shape", [(24, 16), (12, 40)])
@pytest.mark.parametrize("folded", [True, False])
def test_fista_chains_equal_finite_differences(extrapolation, shape, folded):
    """FISTA: the outputs' memory matrix equals finite differences of the
    reference loop, and differs from the gradient points'; with the step
    folded into the products or not (a schedule of ones)."""
    X, y, _ = _problem(*shape, seed=4)
    T, alpha = 10, 0.05
    design = make_design(X, fit_intercept=False)
    eta = 0.9 / design.lipschitz()
    solver = "fista" if extrapolation == "clipped" else "fista_plain"
    path = reference_path(X, np.repeat(y[:, None], T, axis=1), solver, eta, T, alpha=alpha)

    fista = FISTA(eta, alpha, extrapolation=extrapolation,
                  schedule=None if folded else np.ones(T))
    A, A_src = memory_matrix(design, fista, path, n_probes=None, chain_dtype=np.float64)
    assert np.abs(A_src - A).max() > 1e-3 * np.abs(A).max()  # the two matrices differ
    exact = reference_memory(X, y, solver, eta, T, 1e-6, alpha=alpha)
    np.testing.assert_allclose(A, exact, atol=1e-6 * np.abs(exact).max())
