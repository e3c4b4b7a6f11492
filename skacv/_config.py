"""Configuration of skacv: resources only (memory limits, a time budget); a
limit exceeded is an error that names it, never another computation
(``docs/architecture.rst``, "The policies passed, not read").

Like scikit-learn's configuration, the values are thread-local (a
:func:`config_context` in one thread does not leak into another) and are
handed to joblib workers by :mod:`skacv.utils._parallel`. Sizes are in MiB,
as in scikit-learn's ``working_memory``.
"""

import threading
from contextlib import contextmanager
from numbers import Integral, Real

_DEFAULTS = {  # each key: get_config's docstring
    "path_memory_limit": 4096,
    "working_memory": 1024,
    "dask_max_features": 2000,
    "risk_matrix_limit": 1,
    "risk_time_budget": None,
}
#: former keys that changed the numbers, now estimator parameters (carried by
#: ``get_params`` and ``clone``): where each went
_MOVED = {
    "risk_probe_scheme": "the key 'probe_scheme' of TrajectoryLasso's risk_options",
    "risk_chain_dtype": "the key 'chain_dtype' of the risk_options of TrajectoryLasso, "
                        "TrajectoryHuberRegressor and IterativeRidge",
    "kfold_dtype": "the parameter fold_dtype of TrajectoryEarlyStoppingCV",
}
_global_config = dict(_DEFAULTS)
_threadlocal = threading.local()

_UNCHANGED = object()


def _local():
    if not hasattr(_threadlocal, "config"):
        _threadlocal.config = dict(_global_config)
    return _threadlocal.config


def get_config():
    """Return a copy of the current skacv configuration.

    Returns
    -------
    config : dict
        ``path_memory_limit`` (MiB): largest array a trajectory estimator
        may allocate to store a path (``coef_path_``, fitted values,
        leave-one-out predictions), and the most the risk estimate may
        hold in its ``(T + 1) x (T + 1)`` matrices (eight at its peak) or,
        for a settled path, in its ``O(n T)`` arrays, each checked before
        the fit and again before they are allocated; larger requests are
        refused with the size in the message. ``working_memory`` (MiB): size
        of the temporary blocks of the risk and leave-one-out estimates,
        which chunk their work beyond it (scikit-learn's ``working_memory`` has the same unit),
        and the most of EigenPro's kernel matrix a fit keeps (the whole of
        it up to 16384 rows in float32 at the default 1024, else its leading
        rows: the speed policy's ``kernel_matrix_share``).
        ``dask_max_features`` (int): the most features of a Dask input
        (see the Dask page of the user guide), whose fit holds a ``(p + 1) x (p + 1)``
        Gram matrix per fold and chunk in flight; above it ``fit`` raises.
        ``risk_matrix_limit`` (MiB, default 1): the largest ``(T + 1) x (T +
        1)`` matrix of the risk estimate that a fitted estimator keeps as
        ``risk_matrix_`` and ``memory_matrix_`` (``T = n_iter_``; 1 MiB is
        ``T <= 361``); longer paths keep only the ``O(T)`` results
        (``risk_path_``, ``risk_reliable_``, ``risk_diagnostics_``): a
        fitted estimator then weighs two to three times its ``coef_path_``
        (the debiasing's scores are as large). Raise it to keep
        the matrices of a longer path (``0`` keeps none). The memory the
        estimate itself needs (those matrices while it runs, the Jacobian
        chains) is checked against ``path_memory_limit`` before it is
        allocated.
        ``risk_time_budget`` (fits, default ``None``: no cap): an ISTA/FISTA
        risk estimate with pooled probes (not the shared ones, whose split
        the model does not see) whose Jacobian chains are predicted to cost
        more than this many fits of the path (the estimate's own cost model)
        raises :class:`~skacv.exceptions.EstimateBudgetError` before it runs,
        whatever the search's criterion (the budget refuses, it never
        chooses another criterion: set ``criterion="kfold"`` for the folds;
        ``risk_time_budget=2``: no dearer than about the stacked folds).
    """
    return dict(_local())


def set_config(path_memory_limit=None, working_memory=None, dask_max_features=None,
               risk_matrix_limit=None, risk_time_budget=_UNCHANGED, **moved):
    """Set the skacv configuration (of the current thread).

    Parameters
    ----------
    path_memory_limit : float, default=None
        Largest path array in MiB. ``None`` leaves it unchanged.
    working_memory : float, default=None
        Size of temporary blocks in MiB. ``None`` leaves it unchanged.
    dask_max_features : int, default=None
        Most features of a Dask input. ``None`` leaves it unchanged.
    risk_matrix_limit : float, default=None
        Largest risk-estimate matrix a fitted estimator keeps, in MiB (``0``:
        none; see :func:`get_config`). ``None`` leaves it unchanged.
    risk_time_budget : float or None, optional
        Most fits an ISTA/FISTA risk estimate may cost (``None``: no cap; see
        :func:`get_config`). Left unchanged when not given.
    **moved
        Refused with a ``TypeError`` that names where the key went: the
        probes and precision of the risk chains and of the stacked folds
        change the estimates, so they are estimator parameters
        (``risk_options``, ``fold_dtype``).
    """
    for key in moved:
        if key in _MOVED:
            raise TypeError(f"set_config() no longer takes {key!r}: it changes the "
                            f"estimates, so it is {_MOVED[key]} (carried by get_params "
                            "and clone).")
        raise TypeError(f"set_config() got an unexpected keyword argument {key!r}.")
    config = _local()
    if risk_time_budget is not _UNCHANGED:
        if risk_time_budget is not None and not (isinstance(risk_time_budget, Real)
                                                   and risk_time_budget >= 0):
            raise ValueError(f"risk_time_budget is in fits and must be >= 0 or None; got "
                             f"{risk_time_budget!r}.")
        config["risk_time_budget"] = (None if risk_time_budget is None
                                      else float(risk_time_budget))
    if risk_matrix_limit is not None:
        if not (isinstance(risk_matrix_limit, Real) and risk_matrix_limit >= 0):
            raise ValueError(f"risk_matrix_limit is in MiB and must be >= 0; got "
                             f"{risk_matrix_limit!r}.")
        config["risk_matrix_limit"] = float(risk_matrix_limit)
    if dask_max_features is not None:
        if not (isinstance(dask_max_features, Integral) and dask_max_features > 0):
            raise ValueError(f"dask_max_features must be a positive int; got "
                             f"{dask_max_features!r}.")
        config["dask_max_features"] = int(dask_max_features)
    for name, value in (("path_memory_limit", path_memory_limit),
                        ("working_memory", working_memory)):
        if value is None:
            continue
        if not (isinstance(value, Real) and value > 0):
            raise ValueError(f"{name} is in MiB and must be positive; got {value!r}.")
        config[name] = float(value)


@contextmanager
def config_context(**new_config):
    """Context manager that changes the configuration temporarily.

    Parameters
    ----------
    **new_config
        Keyword arguments of :func:`set_config`.

    Examples
    --------
    >>> import skacv
    >>> with skacv.config_context(working_memory=64):
    ...     skacv.get_config()["working_memory"]
    64.0
    """
    old = get_config()
    set_config(**new_config)
    try:
        yield
    finally:
        set_config(**old)


def _mib(name):
    return get_config()[name] * 2**20


def path_memory_bytes():
    """``path_memory_limit`` in bytes."""
    return _mib("path_memory_limit")


def risk_matrix_bytes():
    """``risk_matrix_limit`` in bytes."""
    return _mib("risk_matrix_limit")


def working_memory_bytes():
    """``working_memory`` in bytes."""
    return _mib("working_memory")


def check_memory(n_bytes, what, hint=""):
    """Refuse an allocation of ``n_bytes`` above ``path_memory_limit``.

    Raises
    ------
    ValueError
        With the size asked for, the limit and the way to raise it.
    """
    limit = path_memory_bytes()
    if n_bytes > limit:
        raise ValueError(
            f"{what} would need {format_bytes(n_bytes)}, above the limit "
            f"path_memory_limit={format_bytes(limit)}. {hint}Raise the limit with "
            "skacv.set_config(path_memory_limit=<MiB>) if the memory is available."
        )


def format_bytes(n_bytes):
    """``'1.5 GiB (1536 MiB)'``: a size in GiB with its count in MiB."""
    n_bytes = float(n_bytes)
    return f"{n_bytes / 2**30:.3g} GiB ({n_bytes / 2**20:.6g} MiB)"
