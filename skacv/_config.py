"""Global configuration of skacv (memory limits)."""

from contextlib import contextmanager

_CONFIG = {"path_memory_limit": 4 * 2**30, "working_memory": 1 * 2**30}


def get_config():
    """Return a copy of the current skacv configuration.

    Returns
    -------
    config : dict
        ``path_memory_limit`` (bytes): largest array a trajectory estimator may
        allocate to store a path (``coef_path_``, leave-one-out predictions).
        ``working_memory`` (bytes): size of the temporary blocks used by the
        risk and leave-one-out estimators before they chunk their work.
    """
    return dict(_CONFIG)


def set_config(path_memory_limit=None, working_memory=None):
    """Set the global skacv configuration.

    Parameters
    ----------
    path_memory_limit : int, default=None
        Largest path array in bytes. ``None`` leaves it unchanged.
    working_memory : int, default=None
        Size of temporary blocks in bytes. ``None`` leaves it unchanged.
    """
    if path_memory_limit is not None:
        _CONFIG["path_memory_limit"] = int(path_memory_limit)
    if working_memory is not None:
        _CONFIG["working_memory"] = int(working_memory)


@contextmanager
def config_context(**new_config):
    """Context manager temporarily changing the skacv configuration."""
    old = get_config()
    set_config(**new_config)
    try:
        yield
    finally:
        set_config(**old)


def check_memory(n_bytes, what, hint=""):
    """Raise MemoryError-like ValueError if ``n_bytes`` exceeds the path limit."""
    limit = _CONFIG["path_memory_limit"]
    if n_bytes > limit:
        raise ValueError(
            f"{what} would need {n_bytes / 2**30:.2f} GiB, above the limit of "
            f"{limit / 2**30:.2f} GiB. {hint}Raise the limit with "
            "skacv.set_config(path_memory_limit=...) if the memory is available."
        )
