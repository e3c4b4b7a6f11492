"""Fresh memory for large copies (:func:`fresh`): the copies of ``X~`` of
:mod:`~skacv.linalg._copies` and the step size's float32 copy
(:mod:`~skacv.linalg._step_bound`)."""

import mmap
import sys

import numpy as np


def fresh(size, dtype, policy, min_bytes=None):
    """Uninitialised memory for ``size`` items of ``dtype`` (1-D). On Linux,
    from ``min_bytes`` on (``None``: the speed ``policy``'s
    ``scratch_mmap_min_bytes``, itself ``None`` for never), a private
    anonymous mapping without NumPy's huge-page advice, whose compaction
    made the first touch of a large copy several times slower, erratically
    (measured in the history of ``docs/benchmarks.rst``); freed with the
    last array that uses it."""
    nbytes = size * dtype.itemsize
    limit = policy.scratch_mmap_min_bytes if min_bytes is None else min_bytes
    if limit is None or nbytes < max(limit, 1) or not sys.platform.startswith("linux"):
        return np.empty(size, dtype=dtype)
    # populated by the kernel at once: faster than a page fault at every
    # first touch (the copies that take this memory write all of it)
    flags = mmap.MAP_PRIVATE | getattr(mmap, "MAP_POPULATE", 0)
    return np.frombuffer(mmap.mmap(-1, nbytes, flags=flags), dtype=dtype)
