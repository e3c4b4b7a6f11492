"""EigenPro on a sparse ``X``: the same fit as on its dense copy.

A sparse ``X`` runs the kernel blocks by chunks in float64 (no centred dense
factors), its bandwidth, split rule and eigensystem from the same rows in the
same order; the dense fit is run with ``precision="float64"`` so that both
compute in float64. Tolerances: the Gaussian kernel's entries differ by the
rounding of ``|x|^2 - 2 x.y + |y|^2`` against the dense path's centred rows
(about ``1e-15`` relative), which a stable linear iteration of a few epochs
carries to about ``1e-14`` (measured); the Laplacian kernel takes the square
root of a distance, where a rounding of ``1e-16`` near zero becomes ``1e-8``
(measured ``4e-9`` on the predictions).
"""

import contextlib

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits

from skacv import EigenProClassifier, EigenProRegressor, config_context
from skacv.kernel_methods._kernels import row_value_order, scale_bandwidth

RTOL = {"gaussian": 1e-10, "laplacian": 1e-7}


def sparse_problem(n=400, p=60, seed=0):
    """A CSR design of 10 % density, its dense copy and a target of five columns."""
    rng = np.random.default_rng(seed)
    Xs = sp.random(n, p, density=0.1, random_state=seed, format="csr")
    X = Xs.toarray()
    y = X[:, :5].sum(axis=1) + 0.1 * rng.standard_normal(n)
    return Xs, X, y, rng


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian"])
@pytest.mark.parametrize("weighted", [False, True])
def test_sparse_x_gives_the_fit_of_its_dense_copy(kernel, weighted):
    Xs, X, y, rng = sparse_problem()
    sw = rng.integers(0, 3, size=X.shape[0]).astype(float) if weighted else None
    params = dict(kernel=kernel, max_iter=8, random_state=0, precision="float64",
                  estimate_risk=True)
    dense = EigenProRegressor(**params).fit(X, y, sample_weight=sw)
    sparse = EigenProRegressor(**params).fit(Xs, y, sample_weight=sw)
    # the set-up's choices are the same
    assert sparse.bandwidth_ == pytest.approx(dense.bandwidth_, rel=1e-13)
    assert (sparse.n_components_, sparse.batch_size_) == (dense.n_components_,
                                                          dense.batch_size_)
    assert sp.issparse(sparse.X_fit_)
    tol = RTOL[kernel]
    scale = np.max(np.abs(dense.predict(X)))
    for A, B in [(X, Xs), (X[:50], Xs[:50].tocsc())]:  # dense and sparse test rows
        np.testing.assert_allclose(sparse.predict(B), dense.predict(A), rtol=0, atol=tol * scale)
        np.testing.assert_allclose(sparse.predict(A), dense.predict(A), rtol=0, atol=tol * scale)
        np.testing.assert_allclose(dense.predict(B), dense.predict(A), rtol=0, atol=tol * scale)
    np.testing.assert_allclose(sparse.risk_path_, dense.risk_path_, rtol=tol)
    np.testing.assert_allclose(sparse.predict_path(Xs[:20]), dense.predict_path(X[:20]),
                               rtol=0, atol=tol * scale)


def test_sparse_x_with_the_defaults_and_two_targets():
    """``max_iter="auto"`` chooses the same epoch; ``precision="auto"`` and
    ``"float32"`` run a sparse ``X`` in float64 (the documented kernels and
    inputs without single-precision blocks); two targets fit as the dense."""
    Xs, X, y, rng = sparse_problem(n=300, seed=1)
    Y = np.column_stack([y, X[:, 5] - X[:, 6]])
    dense = EigenProRegressor(random_state=0, precision="float64").fit(X, Y)
    sparse = EigenProRegressor(random_state=0).fit(Xs, Y)
    assert sparse.precision_ == "float64"
    assert sparse.n_iter_ == dense.n_iter_
    np.testing.assert_allclose(sparse.predict(Xs), dense.predict(X), rtol=0,
                               atol=1e-10 * np.abs(dense.predict(X)).max())
    assert EigenProRegressor(max_iter=2, precision="float32").fit(Xs, y).precision_ == "float64"


def test_sparse_classifier_gives_the_dense_scores():
    X, y = load_digits(return_X_y=True)
    X = X[:600] / 16.0
    y = y[:600]
    Xs = sp.csr_matrix(X)  # about half the entries are zero
    params = dict(max_iter=6, random_state=0, precision="float64", estimate_risk=True)
    dense = EigenProClassifier(**params).fit(X[:400], y[:400])
    sparse = EigenProClassifier(**params).fit(Xs[:400], y[:400])
    scores = dense.decision_function(X[400:])
    np.testing.assert_allclose(sparse.decision_function(Xs[400:]), scores, rtol=0,
                               atol=1e-10 * np.abs(scores).max())
    np.testing.assert_array_equal(sparse.predict(Xs[400:]), dense.predict(X[400:]))
    np.testing.assert_allclose(sparse.risk_path_, dense.risk_path_, rtol=1e-10)


def test_scale_bandwidth_of_a_sparse_x():
    Xs, X, _, rng = sparse_problem(n=200, p=30, seed=2)
    w = rng.uniform(0.5, 2.0, size=200)
    for weights in (None, w):
        assert scale_bandwidth(Xs, weights) == pytest.approx(scale_bandwidth(X, weights),
                                                             rel=1e-12)


@pytest.mark.parametrize("copy", [True, False])
def test_row_value_order_is_the_dense_lexicographic_order(copy):
    """Integer entries of both signs, many zeros and repeated rows, so that
    every case of the token comparison (a negative or positive entry against
    the other row's zero, a row that is a prefix of another) occurs; through
    the dense copy, and without it (``working_memory`` below the copy)."""
    rng = np.random.default_rng(3)
    for trial in range(300):
        m, d = int(rng.integers(1, 40)), int(rng.integers(1, 6))
        X = rng.integers(-2, 3, size=(m, d)).astype(float) * (rng.random((m, d)) < 0.5)
        if trial % 3 == 0:
            X[rng.integers(0, m, size=m // 2)] = X[0]
        Xs = sp.csr_matrix(X)
        if trial % 5 == 0 and Xs.nnz:  # explicit zeros stored in the matrix, of both signs
            Xs.data[0], Xs.data[-1] = 0.0, -0.0
        with contextlib.nullcontext() if copy else config_context(working_memory=1e-6):
            order = row_value_order(Xs)
        np.testing.assert_array_equal(order, np.lexsort(Xs.toarray().T[::-1]))


def test_row_value_order_refuses_tokens_beyond_the_memory_limit():
    Xs = sp.random(50, 40, density=0.5, random_state=0, format="csr")
    with config_context(working_memory=1e-6, path_memory_limit=0.1):  # 0.1 MiB
        with pytest.raises(ValueError, match="the order of 50 sparse rows by their 1000 entries"):
            row_value_order(Xs)
