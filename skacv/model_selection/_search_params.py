"""Parameters of :class:`~skacv.TrajectoryEarlyStoppingCV` that only one
value of another parameter reads: set to another value than their default
where this fit ignores them, they warn (a grid of searches over
``criterion`` or ``search`` stays possible)."""

import inspect
import reprlib
import warnings
from numbers import Integral

from ..estimators._protocol import SearchProtocol
from ..utils._validation import user_stacklevel
from ._kfold import can_stack

#: parameter -> (the configuration that reads it, the fit's reason to ignore it)
CONDITIONAL = {
    "path_neighbors": "search='path'",
    "path_params": "search='path'",
    "cv": "criterion='kfold' (or 'auto', which may fall back to it)",
    "fold_alignment": "criterion='kfold' (or 'auto', which may fall back to it)",
    "fold_dtype": "criterion='kfold' with folds run as one block (ISTA, FISTA, the "
                  "full-batch IterativeRidge solvers)",
}


def check_protocol(estimator):
    """Refuse an estimator that does not offer :class:`~skacv.SearchProtocol`
    (a scikit-learn estimator, a pipeline), saying what the search needs."""
    if not isinstance(estimator, SearchProtocol):
        raise TypeError(
            f"{type(estimator).__name__} is not a trajectory estimator: "
            "TrajectoryEarlyStoppingCV selects an iterate of the path an estimator "
            "stores (coef_path_, its estimates) without refitting. Use a skacv "
            "estimator, or one implementing skacv.SearchProtocol; to scale the "
            "data, put the search inside the pipeline: make_pipeline(StandardScaler(), "
            "TrajectoryEarlyStoppingCV(TrajectoryLasso())).")
    if not estimator.stores_path():
        raise TypeError(path_not_stored(estimator))


def path_not_stored(estimator):
    """Why the search cannot select an iterate of ``estimator``'s fits."""
    return (f"{type(estimator).__name__} does not store its path (coef_path_, "
            "intercept_path_): TrajectoryEarlyStoppingCV selects an iterate of the "
            "stored path without refitting. Read its risk_path_ directly (EigenPro's "
            "max_iter='auto' keeps the epoch of its smallest risk estimate, "
            "selected_iter_); to compare other parameters, use GridSearchCV.")


def ignored_params(search):
    """``{name: why}`` of the conditional parameters that this fit of
    ``search`` (``criterion_`` and ``search_`` resolved) does not read."""
    out = {}
    if search.search_ != "path":
        why = f"search={search.search!r}" + (
            f" resolved to search_={search.search_!r}" if search.search == "auto" else "")
        out.update(path_neighbors=why, path_params=why)
    if search.criterion in ("risk", "loo"):
        why = f"criterion={search.criterion!r}"
        out.update(cv=why, fold_alignment=why, fold_dtype=why)
    elif not can_stack(search.estimator):
        out["fold_dtype"] = (f"{type(search.estimator).__name__}'s folds are fitted one "
                             "by one")
    return out


def warn_ignored_params(search):
    """Warn for every conditional parameter set to another value than its
    default and ignored by this fit (:func:`ignored_params`)."""
    defaults = inspect.signature(type(search).__init__).parameters
    for name, why in ignored_params(search).items():
        value = getattr(search, name)
        default = defaults[name].default
        if _is_default(value, default):
            continue
        warnings.warn(
            f"{name}={reprlib.repr(value)} is ignored: {why}; it is read only with "
            f"{CONDITIONAL[name]}. "
            f"Leave {name} at its default ({default!r}) here.", UserWarning,
            stacklevel=user_stacklevel())


def _is_default(value, default):
    if value is default:
        return True
    plain = (str, Integral)
    return (isinstance(value, plain) and isinstance(default, plain)
            and not isinstance(value, bool) and value == default)
