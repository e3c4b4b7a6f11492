"""Input validation helpers shared by the estimators."""

import numpy as np
from sklearn.utils.validation import _check_sample_weight


def check_sample_weight(sample_weight, X, dtype):
    """Validate ``sample_weight``: finite, non-negative, not all zero."""
    if sample_weight is None:
        return None
    sw = _check_sample_weight(sample_weight, X, dtype=dtype, ensure_non_negative=True)
    if not np.all(np.isfinite(sw)):
        raise ValueError("Sample weights must be finite.")
    if not np.any(sw > 0):
        raise ValueError("Sample weights must contain at least one non-zero number.")
    return sw


def data_fingerprint(X, y, sample_weight=None):
    """Cheap summary of the training data, to detect a changed warm refit.

    Random projections ``v^T X u``, ``v^T y`` and ``v^T w`` (fixed seed): one
    product with ``X``, so any change of the data of a size that matters is
    detected. Compare two fingerprints with :func:`same_fingerprint` (the
    projections are compared up to rounding, which may depend on memory
    layout).
    """
    n, p = X.shape
    rng = np.random.default_rng(0)
    u = rng.standard_normal(p).astype(X.dtype)
    v = rng.standard_normal(n)
    Xu = np.asarray(X @ u, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64)
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    sig = np.array([Xu @ v, y @ v, y.sum(), w @ v, w.sum()])
    scale = np.array([np.abs(Xu) @ np.abs(v), np.abs(y) @ np.abs(v), np.abs(y).sum(),
                      np.abs(w) @ np.abs(v), np.abs(w).sum()])
    return (X.shape, np.dtype(X.dtype).str, sig, scale)


def same_fingerprint(a, b):
    """True when two :func:`data_fingerprint` summaries describe the same data."""
    if a[0] != b[0] or a[1] != b[1]:
        return False
    rtol = 1e3 * np.finfo(np.dtype(a[1])).eps
    return bool(np.all(np.abs(a[2] - b[2]) <= rtol * np.maximum(a[3], b[3])))


def same_param(a, b):
    """Equality of two parameter values for a warm refit (arrays element-wise,
    callables by identity)."""
    if a is b:
        return True
    if isinstance(a, (np.ndarray, list, tuple)) or isinstance(b, (np.ndarray, list, tuple)):
        try:
            return bool(np.array_equal(np.asarray(a), np.asarray(b)))
        except (TypeError, ValueError):
            return False
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False
