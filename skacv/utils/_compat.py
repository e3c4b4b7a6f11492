"""Every private scikit-learn API that skacv uses, imported in one place.

scikit-learn keeps these names stable within the versions skacv supports
(``scikit-learn>=1.6``, tested against the oldest and the newest in CI);
when one moves, this module is the only one to change. It also holds
:func:`conjugate_gradient`, scipy's ``cg`` across the renaming of its
tolerance (``tol`` became ``rtol`` in scipy 1.12, ``tol`` was removed later),
and :class:`CachedParamNames`, ``BaseEstimator._get_param_names`` read once
per class.
"""

import functools
import inspect

from scipy.sparse.linalg import cg
from sklearn.base import BaseEstimator, _fit_context
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    InvalidParameterError,
    StrOptions,
    validate_parameter_constraints,
    validate_params,
)
from sklearn.utils.metadata_routing import _raise_for_params, _routing_enabled
from sklearn.utils.validation import _check_sample_weight, _num_features, _num_samples

__all__ = [
    "CachedParamNames",
    "HasMethods",
    "Interval",
    "InvalidParameterError",
    "StrOptions",
    "_check_sample_weight",
    "_fit_context",
    "_num_features",
    "_num_samples",
    "_raise_for_params",
    "_routing_enabled",
    "conjugate_gradient",
    "validate_parameter_constraints",
    "validate_params",
]

# the name of cg's relative tolerance in the installed scipy
_CG_RTOL = "rtol" if "rtol" in inspect.signature(cg).parameters else "tol"


def conjugate_gradient(A, b, x0, rtol, atol, maxiter):
    """``scipy.sparse.linalg.cg(A, b, x0=x0, rtol=rtol, atol=atol,
    maxiter=maxiter)`` on every supported scipy (>= 1.10), stopping at
    ``||b - A x|| <= max(rtol ||b||, atol)``; returns ``x`` and the number of
    iterations (products with ``A`` besides the initial residual's)."""
    n_iter = [0]

    def count(xk):
        n_iter[0] += 1

    x, _ = cg(A, b, x0=x0, atol=atol, maxiter=maxiter, callback=count, **{_CG_RTOL: rtol})
    return x, n_iter[0]


@functools.lru_cache(maxsize=None)
def _param_names(cls):
    return tuple(BaseEstimator._get_param_names.__func__(cls))


class CachedParamNames:
    """``get_params`` without reading the signature again: scikit-learn's
    ``BaseEstimator._get_param_names`` inspects ``__init__`` at every call
    (about 0.2 ms, a third of a fit's fixed cost on a small design, where a
    fit and a search call ``get_params`` a dozen times); the names of a
    class are read once. Place it before ``BaseEstimator`` in the bases."""

    @classmethod
    def _get_param_names(cls):
        return list(_param_names(cls))

