"""Every private scikit-learn API that skacv uses, imported in one place.

scikit-learn keeps these names stable within the versions skacv supports
(``scikit-learn>=1.6``, tested against the oldest and the newest in CI);
when one moves, this module is the only one to change.
"""

from sklearn.base import _fit_context
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    StrOptions,
    validate_params,
)
from sklearn.utils.metadata_routing import _raise_for_params, _routing_enabled
from sklearn.utils.validation import _check_sample_weight, _num_features, _num_samples

__all__ = [
    "HasMethods",
    "Interval",
    "StrOptions",
    "_check_sample_weight",
    "_fit_context",
    "_num_features",
    "_num_samples",
    "_raise_for_params",
    "_routing_enabled",
    "validate_params",
]
