"""Global configuration of skacv (memory limits)."""

from contextlib import contextmanager

_CONFIG = {
    "path_memory_limit": 4 * 2**30,
    "working_memory": 1 * 2**30,
    "risk_chain_dtype": "auto",
}


def get_config():
    """Return a copy of the current skacv configuration.

    Returns
    -------
    config : dict
        ``path_memory_limit`` (bytes): largest array a trajectory estimator may
        allocate to store a path (``coef_path_``, leave-one-out predictions).
        ``working_memory`` (bytes): size of the temporary blocks used by the
        risk and leave-one-out estimators before they chunk their work.
        ``risk_chain_dtype`` ("auto", None, "float32" or "float64"):
        precision of the Jacobian chains of ISTA/FISTA risk estimates.
        ``"auto"`` (default) uses float32 with Hutchinson probes
        (``n_probes=int``) and the dtype of ``X`` with exact traces
        (``n_probes=None``); ``None`` follows ``X``. float32 chains are about
        twice as fast; their relative rounding error (~1e-6) is far below the
        Hutchinson noise (~1e-2).
    """
    return dict(_CONFIG)


def set_config(path_memory_limit=None, working_memory=None, risk_chain_dtype="unchanged"):
    """Set the global skacv configuration.

    Parameters
    ----------
    path_memory_limit : int, default=None
        Largest path array in bytes. ``None`` leaves it unchanged.
    working_memory : int, default=None
        Size of temporary blocks in bytes. ``None`` leaves it unchanged.
    risk_chain_dtype : "auto", None, "float32" or "float64", default="unchanged"
        Precision of the ISTA/FISTA Jacobian chains (``"auto"``: float32
        with Hutchinson probes, that of X with exact traces; ``None``: that
        of X).
    """
    if risk_chain_dtype != "unchanged":
        if risk_chain_dtype not in ("auto", None, "float32", "float64"):
            raise ValueError(
                "risk_chain_dtype must be 'auto', None, 'float32' or 'float64'; got "
                f"{risk_chain_dtype!r}."
            )
        _CONFIG["risk_chain_dtype"] = risk_chain_dtype
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
            f"{what} would need {format_bytes(n_bytes)}, above the limit "
            f"path_memory_limit={format_bytes(limit)}. {hint}Raise the limit with "
            "skacv.set_config(path_memory_limit=...) if the memory is available."
        )


def format_bytes(n_bytes):
    """``'1.5 GiB (1610612736 bytes)'``: the size in GiB with the exact count."""
    n_bytes = int(n_bytes)
    return f"{n_bytes / 2**30:.3g} GiB ({n_bytes} bytes)"
