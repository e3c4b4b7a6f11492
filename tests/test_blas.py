"""Products prepared for SciPy's BLAS, or NumPy's OpenBLAS
(skacv.linalg._blas.gemm_call): equal to NumPy's on every layout of views
the stacked folds' pass uses, in place, and refused (None) where a BLAS call cannot express them."""

import ctypes
import threading

import numpy as np
import pytest
from numpy.testing import assert_allclose

import skacv.linalg._blas as blas_module
from skacv.linalg._blas import gemm_call, lp64_signature


def _view(M, order, pad):
    """``M`` as a view with the given order and a leading dimension ``pad``
    larger than its extent (a slice of a wider array)."""
    m, k = M.shape
    if order == "C":
        big = np.zeros((m, k + pad), dtype=M.dtype)
        big[:, :k] = M
        return big[:, :k]
    big = np.zeros((k, m + pad), dtype=M.dtype)
    big[:, :m] = M.T
    return big[:, :m].T


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(5, 7, 3), (1, 4, 6), (6, 4, 1), (3, 1, 2), (13, 40, 5)])
@pytest.mark.parametrize("orders", ["CC", "CF", "FC", "FF"])
@pytest.mark.parametrize("pad", [0, 3])
@pytest.mark.parametrize("library", [None, "scipy", "numpy"])
def test_gemm_call_is_the_product(dtype, shape, orders, pad, library):
    """C <- alpha A B + beta C for C- and F-ordered views with any leading
    dimension, repeated calls accumulating in place; against float64 NumPy.
    SciPy's BLAS (the default, ``"scipy"``) and NumPy's OpenBLAS (``"numpy"``,
    its 64-bit-integer interface) alike."""
    m, k, n = shape
    rng = np.random.default_rng(sum(shape))
    A = _view(rng.standard_normal((m, k)).astype(dtype), orders[0], pad)
    B = _view(rng.standard_normal((k, n)).astype(dtype), orders[1], pad)
    wide = rng.standard_normal((m, n + pad)).astype(dtype)
    C = wide[:, :n]  # rows of unit stride, leading dimension n + pad
    C0, right = C.copy(), wide[:, n:].copy()
    kwargs = {} if library is None else {"library": library}
    call = gemm_call(C, A, B, alpha=-1.5, beta=0.5, **kwargs)
    assert call is not None
    call()
    AB = A.astype(np.float64) @ B.astype(np.float64)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    scale = np.abs(AB).max() + np.abs(C0).max()
    assert_allclose(C, -1.5 * AB + 0.5 * C0, rtol=rtol, atol=rtol * scale)
    call()
    assert_allclose(C, -1.5 * AB + 0.5 * (-1.5 * AB + 0.5 * C0), rtol=rtol, atol=rtol * scale)
    assert np.array_equal(wide[:, n:], right)  # nothing written beside the view


def test_gemm_call_accumulates_into_rows_of_a_block_from_threads():
    """The stacked folds' gradient product: ``Z[j:j+3] += R[rows, :3]^T X[rows]``
    (a transposed view of the first columns of a row-major block) from two
    threads at once, each into its own sum."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 50)).astype(np.float32)
    R = rng.standard_normal((60, 5)).astype(np.float32)
    sums = [np.zeros((8, 50), dtype=np.float32) for _ in range(2)]
    panels = [[(a, min(a + 7, 30), a % 4) for a in range(0, 30, 7)],
              [(a, min(a + 7, 60), a % 4) for a in range(30, 60, 7)]]
    calls = [[gemm_call(Z[j:j + 3], R[a:b, :3].T, X[a:b], beta=1.0) for a, b, j in group]
             for group, Z in zip(panels, sums, strict=True)]

    def run(group):
        for _ in range(50):
            for call in group:
                call()

    threads = [threading.Thread(target=run, args=(group,)) for group in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for group, Z in zip(panels, sums, strict=True):
        ref = np.zeros((8, 50))
        for a, b, j in group:
            ref[j:j + 3] += 50 * R[a:b, :3].T.astype(np.float64) @ X[a:b].astype(np.float64)
        assert_allclose(Z, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


def test_gemm_call_refuses_what_blas_cannot_take():
    """None (the caller keeps NumPy's product) for other or mixed dtypes,
    views without a unit stride, shapes that do not match, a read-only or
    column-ordered output, empty products."""
    A, B, C = np.ones((3, 4)), np.ones((4, 2)), np.zeros((3, 2))
    assert gemm_call(C, A, B) is not None
    assert gemm_call(C.astype(np.float32), A.astype(np.float32), B.astype(np.float32)) is not None
    assert gemm_call(C.astype(complex), A.astype(complex), B.astype(complex)) is None
    assert gemm_call(C.astype(np.int64), A.astype(np.int64), B.astype(np.int64)) is None
    assert gemm_call(C, A.astype(np.float32), B) is None
    assert gemm_call(C, np.ones((3, 8))[:, ::2], B) is None
    assert gemm_call(C, A, np.ones((5, 2))) is None
    assert gemm_call(np.zeros((3, 3)), A, B) is None
    ro = np.zeros((3, 2))
    ro.flags.writeable = False
    assert gemm_call(ro, A, B) is None
    assert gemm_call(np.zeros((3, 2), order="F"), A, B) is None
    assert gemm_call(np.zeros((3, 2)), np.ones((3, 0)), np.ones((0, 2))) is None
    assert gemm_call(np.zeros(3), A, B) is None


def _capsule(address, signature):
    """A PyCapsule holding ``address`` under the name ``signature``."""
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                   ctypes.c_void_p]
    name = ctypes.create_string_buffer(signature)
    capsule = new(address, name, None)
    return capsule, name  # the name's buffer must outlive the capsule


def test_only_the_32_bit_interface_is_bound():
    """A capsule whose declaration is not the 32-bit-integer ``?gemm`` (an
    ILP64 SciPy: 64-bit integers) is refused: no binding, NumPy's product."""
    from scipy.linalg import cython_blas

    real = {name: cython_blas.__pyx_capi__[name] for name in ("sgemm", "dgemm")}
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    signatures = {name: get_name(capsule) for name, capsule in real.items()}
    assert all(lp64_signature(sig, name) for name, sig in signatures.items())
    assert lp64_signature(
        b"void (char *, char *, int *, int *, int *, float *, float *, int *, float *, "
        b"int *, float *, float *, int *)", "sgemm")
    ilp64 = signatures["dgemm"].replace(b"int *", b"npy_int64 *")
    assert not lp64_signature(ilp64, "dgemm")
    assert not lp64_signature(signatures["dgemm"].replace(b"int *", b"long *", 1), "dgemm")
    assert not lp64_signature(signatures["sgemm"], "dgemm")  # float where double is due
    assert not lp64_signature(b"void (char *)", "sgemm")
    assert not lp64_signature(b"", "sgemm")

    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object,
                                                                  ctypes.c_char_p]
    address = get_pointer(real["dgemm"], signatures["dgemm"])
    fake, keep = _capsule(address, ilp64)

    class FakeBlas:
        __pyx_capi__ = {"dgemm": fake, "sgemm": real["sgemm"]}

    try:
        A, B, C = np.ones((3, 4)), np.ones((4, 2)), np.zeros((3, 2))
        assert gemm_call(C, A, B, library=FakeBlas) is None
        assert gemm_call(*(M.astype(np.float32) for M in (C, A, B)), library=FakeBlas) is not None
    finally:
        blas_module._gemm_function.cache_clear()  # (the fake capsule's name is freed below)
    del keep
    assert gemm_call(C, A, B) is not None  # the real library binds again


def test_sizes_a_32_bit_int_cannot_hold_are_refused():
    """A dimension or leading dimension of 2**31 or more would wrap in the
    ``int`` arguments: refused before any call (the views below are never
    read)."""
    base = np.zeros(8)
    A, B = np.ones((3, 4)), np.ones((4, 2))
    item = base.itemsize
    # C with a leading dimension of 2**31 (two rows that far apart)
    C_wide = np.lib.stride_tricks.as_strided(base, shape=(2, 2), strides=(2**31 * item, item))
    assert gemm_call(C_wide, np.ones((2, 4)), B) is None
    A_wide = np.lib.stride_tricks.as_strided(base, shape=(2, 4), strides=(2**31 * item, item),
                                             writeable=False)
    assert gemm_call(np.zeros((2, 2)), A_wide, B) is None
    # one below the limit still binds (the call is prepared, never made)
    C_edge = np.lib.stride_tricks.as_strided(base, shape=(2, 2),
                                             strides=((2**31 - 1) * item, item))
    assert gemm_call(C_edge, np.ones((2, 4)), B) is not None
    assert gemm_call(np.zeros((3, 2)), A, B) is not None


def test_numpy_openblas_binding_and_its_fallback():
    """``library="numpy"`` binds NumPy's own OpenBLAS where threadpoolctl
    finds it (here: NumPy's wheels ship scipy-openblas64, whose ``?gemm``
    takes 64-bit integers); a NumPy without one (or a symbol not found)
    falls back to SciPy's BLAS, the same product."""
    path = blas_module.numpy_openblas_path()
    if path is None:
        pytest.skip("NumPy's BLAS is not an OpenBLAS threadpoolctl finds")
    assert blas_module.numpy_gemm_function("sgemm") is not None
    assert blas_module.numpy_gemm_function("dgemm") is not None
    # no such library, no such symbols, nothing found: no binding
    missing = "/no/such/libopenblas.so"
    assert blas_module.numpy_gemm_function("sgemm", path=missing) is None
    assert blas_module.numpy_gemm_function("nosuchgemm") is None
    assert blas_module.numpy_openblas_path(inspect=lambda: []) is None

    def broken():
        raise RuntimeError("cannot inspect")

    assert blas_module.numpy_openblas_path(inspect=broken) is None
    assert blas_module.numpy_openblas_path(inspect=lambda: [
        {"user_api": "blas", "internal_api": "mkl", "filepath": "/x/numpy/libmkl.so"}]) is None
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((5, 300)), rng.standard_normal((300, 4))
    numpy_dgemm = blas_module.numpy_gemm_function("dgemm")
    for numpy_path in (None, missing):
        C = np.zeros((5, 4))
        call = gemm_call(C, A, B, library="numpy", numpy_path=numpy_path)
        assert call is not None
        # NumPy's routine where found, else SciPy's capsule
        assert (call.func is numpy_dgemm) == (numpy_path is None)
        call()
        assert_allclose(C, A @ B, rtol=1e-12, atol=1e-12 * np.abs(A @ B).max())
