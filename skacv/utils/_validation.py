"""Input validation and the warm-start guard shared by every estimator."""

import copy
import os
import sys

import numpy as np
import scipy.sparse as sp
import sklearn

from .._trace import taken
from ._compat import _check_sample_weight


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


def overflow_error(dtype):
    """The error of data whose squares overflow ``dtype`` (the Hessian's top
    eigenvalue, or the gradient at the start, not finite)."""
    dtype = np.dtype(dtype)
    return ValueError(
        f"The data overflow {dtype.name}: X, y or sample_weight hold values whose squares, "
        f"summed over the rows, pass its largest value {np.finfo(dtype).max:.3g}. Rescale "
        "them: StandardScaler on X, y divided by its standard deviation, the weights by "
        "their mean.")


def single_precision_holds(X, y, sample_weight, policy):
    """Whether float32 holds a least-squares fit of ``y`` on ``X`` (each row
    counted by its weight): ``||X||_F^2``, ``||y||^2`` and ``(||y|| / c)^2``
    (``c`` the smallest nonzero column norm of ``X``: the coefficients'
    scale, bounded above only) within the speed ``policy``'s
    ``single_sums_range`` of float32's smallest normal and largest values
    (its sums over the rows and its iterates' products keep that margin to
    overflow, its squared residuals to the subnormals; a zero ``y`` or ``X`` holds; data
    that are not finite or not numbers do not: a float64 fit then says why;
    labels, not numbers, leave ``y`` out). One pass over ``X`` in float64
    (dense or sparse)."""
    try:
        w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        X = X if sp.issparse(X) else np.asarray(X)
    except (TypeError, ValueError):
        return False
    if X.dtype.kind not in "biuf" or X.ndim != 2:
        return False
    try:
        y = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):  # (class labels)
        y = np.zeros(X.shape[0])
    if sp.issparse(X):
        X2 = X.astype(np.float64).power(2)
        cols = np.asarray(X2.sum(axis=0) if w is None else X2.T @ w).ravel()
    else:
        cols = (np.einsum("ij,ij->j", X, X, dtype=np.float64) if w is None
                else np.einsum("i,ij,ij->j", w, X, X, dtype=np.float64))
    yy = float(np.sum(y * y) if w is None else w @ (y * y))
    nonzero = cols[cols > 0]
    finfo = np.finfo(np.float32)
    low = policy.single_sums_range[0] * float(finfo.tiny)
    high = policy.single_sums_range[1] * float(finfo.max)
    # (the coefficients' scale bounded above only: their squares are never formed)
    scale = yy / float(nonzero.min()) if nonzero.size and yy > 0 else 0.0
    with np.errstate(invalid="ignore"):
        return (all(s == 0.0 or low <= s <= high for s in (float(cols.sum()), yy))
                and scale <= high)


def data_fingerprint(X, y, sample_weight=None):
    """Cheap summary of the training data, to detect a changed warm refit.

    Random projections ``v^T X u``, ``v^T y`` and ``v^T w`` (fixed seed): one
    product with ``X``, so any change of the data of a size that matters is
    detected. Compare two fingerprints with :func:`same_fingerprint` (the
    projections are compared up to rounding, which may depend on memory
    layout). ``y`` may be 2-D (several targets).
    """
    taken("data_fingerprint")
    n, p = X.shape
    rng = np.random.default_rng(0)
    u = rng.standard_normal(p).astype(X.dtype)
    v = rng.standard_normal(n)
    Xu = np.asarray(X @ u, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).reshape(n, -1)
    y = y @ np.linspace(1.0, 2.0, y.shape[1])
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
    callables and objects by identity unless they define equality)."""
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


class WarmStartGuard:
    """What a warm-started refit must find unchanged.

    Every parameter of ``estimator.get_params(deep=False)`` is protected,
    except those the class declares in ``_free_params`` (``max_iter``,
    ``warm_start``, ``verbose`` and the estimate switches): a parameter added
    later is protected by default.
    """

    def __init__(self, estimator, fingerprint, extra=None):
        params = _params(estimator)
        free = set(getattr(estimator, "_free_params", ()))
        self.params = {k: _snapshot(v) for k, v in params.items() if k not in free}
        self.fingerprint = fingerprint
        self.extra = extra

    def check(self, estimator, fingerprint, n_iter, extra=None):
        """Raise ``ValueError`` naming what prevents continuing the path."""
        if estimator.max_iter < n_iter:
            raise ValueError(
                f"max_iter={estimator.max_iter} must be larger than or equal to "
                f"n_iter_={n_iter} when warm_start=True: max_iter is the total length "
                "of the path."
            )
        if fingerprint[0] != self.fingerprint[0]:
            raise ValueError(
                f"warm_start=True continues the path fitted on data of shape "
                f"{self.fingerprint[0]}, but X has shape {fingerprint[0]}. Set "
                "warm_start=False to fit new data."
            )
        if not same_fingerprint(fingerprint, self.fingerprint) or not same_param(
                extra, self.extra):
            raise ValueError(
                "warm_start=True continues the path fitted on other training data "
                "(X, y, sample_weight or the dtype of X changed). Set "
                "warm_start=False to fit new data."
            )
        now = _params(estimator)
        changed = [k for k, v in self.params.items() if not same_param(now.get(k), v)]
        if changed:
            raise ValueError(
                f"warm_start=True cannot continue a path after {changed} changed "
                f"(was {[self.params[k] for k in changed]}). Set warm_start=False to "
                "start a new path."
            )


def _params(estimator):
    """The parameters a warm start compares: ``get_params(deep=False)``, with
    the grouped ones resolved where the estimator resolves them
    (``_warm_start_params``: ``risk_options=None`` is ``{}`` is every key at
    its default)."""
    resolved = getattr(estimator, "_warm_start_params", None)
    return resolved() if resolved is not None else estimator.get_params(deep=False)


def _snapshot(value):
    """A copy of a parameter value that later in-place changes cannot alter."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (list, tuple, dict)):
        try:
            return copy.deepcopy(value)
        except Exception:  # noqa: BLE001 - uncopyable: compare by identity
            return value
    return value


def join_options(options):
    """``"a"``, ``"a or b"``, ``"a, b, or c"`` (the fixes named in a message)."""
    if len(options) <= 2:
        return " or ".join(options)
    return ", ".join(options[:-1]) + ", or " + options[-1]


_LIBRARIES = tuple(os.path.dirname(m.__file__) + os.sep for m in (sklearn,))
_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_stacklevel():
    """The ``stacklevel`` that makes a :func:`warnings.warn` in the caller of
    this function name the first frame outside skacv and scikit-learn (the
    user's call, however deep the fit's own calls)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith((_OWN, *_LIBRARIES)):
        frame, level = frame.f_back, level + 1
    return level
