"""Fresh memory for large arrays (the centred design, the copies of its
rows and columns, scratch memory): :func:`fresh`."""

import mmap
import sys

import numpy as np

from .._policy import get_policy


def fresh(size, dtype):
    """Uninitialised memory for ``size`` items of ``dtype`` (1-D). On Linux,
    from the speed policy's ``scratch_mmap_min_bytes`` on, a private
    anonymous mapping instead of NumPy's allocation: NumPy advises the
    kernel to back large arrays by huge pages, and where the kernel honours
    that advice by compacting memory on the spot (transparent huge pages in
    ``madvise`` mode) the first touch of a large fresh copy cost up to 2.6
    times as much, and erratically, as without the advice; the products that
    read the copy ran at the same speed (``docs/benchmarks.rst``). The
    mapping is freed with the last array that uses it."""
    nbytes = size * dtype.itemsize
    limit = get_policy().scratch_mmap_min_bytes
    if limit is None or nbytes < max(limit, 1) or not sys.platform.startswith("linux"):
        return np.empty(size, dtype=dtype)
    return np.frombuffer(mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE), dtype=dtype)
