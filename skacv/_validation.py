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


def data_fingerprint(X, y):
    """Cheap summary of the training data, to detect a changed warm refit."""
    head = X[: min(X.shape[0], 3)]
    head_sum = float(abs(head).sum())
    y = np.asarray(y, dtype=np.float64)
    return (X.shape, head_sum, float(y.sum()), float(y @ np.arange(y.shape[0])))
