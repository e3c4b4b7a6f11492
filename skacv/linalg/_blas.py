"""Matrix products prepared once and called many times without the GIL.

:func:`gemm_call` binds ``C <- alpha A B + beta C`` for fixed arrays to
SciPy's BLAS (``scipy.linalg.cython_blas``) through ``ctypes``, which
releases the GIL for the whole call (why: docs/architecture.rst on the
stacked folds' pass, docs/speed_policy.rst ``prepared_products``); shapes,
strides and pointers are checked and converted once, so a call costs about
a microsecond. The binding is refused (the caller falls back to NumPy's
product) unless the capsule's C signature is the 32-bit-integer one this
module passes (an ILP64 build would read 64-bit integers), and for any
dimension or leading dimension of ``2**31`` or more. ``library="numpy"``
binds the same call to the 64-bit-integer ``?gemm`` of NumPy's own OpenBLAS
where it is found (:func:`numpy_gemm_function`; ``prepared_blas``).
"""

import ctypes
import functools

import numpy as np
from scipy.linalg import cython_blas as _cython_blas  # Fortran convention, 32-bit integers
from threadpoolctl import threadpool_info

from .._policy import openblas_records

_ROUTINES = {np.dtype(np.float32): "sgemm", np.dtype(np.float64): "dgemm"}
_SCALARS = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}
#: what the ``ctypes.c_int`` arguments below can hold
INT_LIMIT = 2**31


def lp64_signature(signature, name):
    """Whether ``signature`` (a capsule's C declaration, bytes or str) is the
    ``?gemm`` of 32-bit integers that :func:`gemm_call` passes: ``void
    (char *, char *, int *, int *, int *, s *, s *, int *, s *, int *, s *,
    s *, int *)`` with ``s`` the routine's real type (``float``/``double``,
    or Cython's typedefs of them ending in ``_s``/``_d``)."""
    if isinstance(signature, bytes):
        signature = signature.decode("ascii", "replace")
    signature = " ".join(signature.split())
    if not (signature.startswith("void (") and signature.endswith(")")):
        return False
    args = [a.strip() for a in signature[len("void ("):-1].split(",")]
    if len(args) != 13 or ctypes.sizeof(ctypes.c_int) != 4:
        return False
    real = {"sgemm": ("float *", "_s *"), "dgemm": ("double *", "_d *")}[name]
    for i, arg in enumerate(args):
        if i in (0, 1):
            ok = arg == "char *"
        elif i in (2, 3, 4, 7, 9, 12):
            ok = arg == "int *"
        else:
            ok = arg == real[0] or (arg.endswith(real[1]) and "int" not in arg)
        if not ok:
            return False
    return True


@functools.lru_cache(maxsize=None)
def _gemm_function(name, library=_cython_blas):
    """The ctypes function of ``name`` (``sgemm``/``dgemm``) in ``library``
    (SciPy's ``cython_blas``), or ``None``."""
    capsules = getattr(library, "__pyx_capi__", None) or {}
    capsule = capsules.get(name)
    if capsule is None:
        return None
    try:
        get_name = ctypes.pythonapi.PyCapsule_GetName
        get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype = ctypes.c_void_p
        get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        signature = get_name(capsule)
        address = get_pointer(capsule, signature)
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not CPython
        return None
    if not lp64_signature(signature or b"", name):
        return None
    return _released(address) if address else None


def _released(address):
    """The 13-argument ``?gemm`` at ``address`` as a ctypes function that
    releases the GIL during the call (CFUNCTYPE, not PYFUNCTYPE)."""
    return ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 13)(address)


#: the 64-bit-integer ``?gemm`` of an OpenBLAS built with a symbol suffix
#: (NumPy's wheels: scipy-openblas64), names tried in turn
ILP64_SYMBOLS = ("scipy_{}_64_", "{}_64_")


def numpy_openblas_path(inspect=threadpool_info):
    """The file of the OpenBLAS that NumPy loaded, as threadpoolctl reports
    it (``inspect``: its ``threadpool_info``), or ``None``."""
    found = openblas_records(inspect)
    path = str(found[0].get("filepath") or "") if found else ""
    return path if "numpy" in path else None


# looked up once (threadpoolctl walks every loaded library)
_found_numpy_openblas = functools.lru_cache(maxsize=None)(numpy_openblas_path)


def numpy_gemm_function(name, path=None):
    """The ctypes function of ``name`` (``sgemm``/``dgemm``) with 64-bit
    integers (:data:`ILP64_SYMBOLS`) in NumPy's OpenBLAS (``path``: its
    file, default :func:`numpy_openblas_path`), or ``None``; one object
    per routine and file."""
    return _ilp64_gemm(name, _found_numpy_openblas() if path is None else path)


@functools.lru_cache(maxsize=None)
def _ilp64_gemm(name, path):
    if not path:
        return None
    try:
        lib = ctypes.CDLL(path)  # (loaded already: the same handle)
    except OSError:
        return None
    for pattern in ILP64_SYMBOLS:
        symbol = getattr(lib, pattern.format(name), None)
        if symbol is not None:
            return _released(ctypes.cast(symbol, ctypes.c_void_p).value)
    return None


class GemmCall(functools.partial):
    """A prepared product: calling it (no arguments) computes ``C <- alpha A
    B + beta C`` in place. Holds its three arrays (``operands``) so that
    their memory outlives it."""

    __slots__ = ("operands",)


def _form(M, itemsize):
    """``(trans, ld)`` of a 2-D array ``M`` (m x k) read by a column-major
    BLAS as ``M^T``: ``"N"`` for rows of unit stride (``M^T`` is then a
    column-major matrix with leading dimension ``ld``), ``"T"`` for columns
    of unit stride (``M`` itself is column-major); ``None`` otherwise."""
    m, k = M.shape
    s0, s1 = M.strides
    if (s1 == itemsize or k == 1) and s0 % itemsize == 0 and s0 // itemsize >= max(1, k):
        return "N", s0 // itemsize if m > 1 else max(1, k)
    if (s0 == itemsize or m == 1) and s1 % itemsize == 0 and s1 // itemsize >= max(1, m):
        return "T", s1 // itemsize if k > 1 else max(1, m)
    return None


def gemm_call(C, A, B, alpha=1.0, beta=0.0, library=_cython_blas, numpy_path=None):
    """Bind ``C <- alpha A B + beta C`` for these arrays (views included)
    to SciPy's BLAS, or return ``None`` when it cannot (another dtype, no
    SciPy BLAS or not its 32-bit-integer interface, a view without a unit
    stride, a dimension or leading dimension of ``2**31`` or more).

    Parameters
    ----------
    C : ndarray of shape (m, n), writable, rows of unit stride
    A : ndarray of shape (m, k)
    B : ndarray of shape (k, n)
        Each with one dimension of unit stride (C- or F-ordered views with
        any leading dimension), all of ``C``'s dtype (float32 or float64).
    alpha, beta : float
    library : module, "scipy" or "numpy", default=scipy.linalg.cython_blas
        Where the routines' capsules are (``"scipy"``: SciPy's
        ``cython_blas``); ``"numpy"``: NumPy's OpenBLAS
        (:func:`numpy_gemm_function`) where found, else SciPy's.
    numpy_path : str, default=None
        With ``library="numpy"``: the file of NumPy's OpenBLAS
        (``None``: :func:`numpy_openblas_path`).

    Returns
    -------
    call : GemmCall or None
        ``call()`` computes the product in place, without the GIL.
    """
    dtype = C.dtype
    if (dtype not in _ROUTINES or A.dtype != dtype or B.dtype != dtype
            or A.ndim != 2 or B.ndim != 2 or C.ndim != 2 or not C.flags.writeable):
        return None
    (m, k), (k2, n) = A.shape, B.shape
    if k2 != k or C.shape != (m, n) or min(m, n, k) < 1:
        return None
    to_numpy = isinstance(library, str) and library == "numpy"
    integer = ctypes.c_int
    fn = numpy_gemm_function(_ROUTINES[dtype], numpy_path) if to_numpy else None
    if fn is not None:
        integer = ctypes.c_int64
    else:
        scipy = to_numpy or (isinstance(library, str) and library == "scipy")
        fn = _gemm_function(_ROUTINES[dtype], _cython_blas if scipy else library)
    if fn is None:
        return None
    item = dtype.itemsize
    c_form, a_form, b_form = _form(C, item), _form(A, item), _form(B, item)
    if c_form is None or c_form[0] != "N" or a_form is None or b_form is None:
        return None
    if max(m, n, k, c_form[1], a_form[1], b_form[1]) >= INT_LIMIT:
        return None
    # row-major C = A B is the column-major C^T = B^T A^T
    keep = []

    def ref(value):
        keep.append(value)
        return ctypes.c_void_p(ctypes.addressof(value))

    scalar = _SCALARS[dtype]
    args = (ref(ctypes.c_char(b_form[0].encode())), ref(ctypes.c_char(a_form[0].encode())),
            ref(integer(n)), ref(integer(m)), ref(integer(k)),
            ref(scalar(alpha)), ctypes.c_void_p(B.ctypes.data), ref(integer(b_form[1])),
            ctypes.c_void_p(A.ctypes.data), ref(integer(a_form[1])),
            ref(scalar(beta)), ctypes.c_void_p(C.ctypes.data), ref(integer(c_form[1])))
    call = GemmCall(fn, *args)
    call.operands = (C, A, B, keep)
    return call
