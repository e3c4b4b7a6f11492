"""Copies of a dense design's rows and columns, and scratch memory.

:func:`gather` copies ``X[rows][:, cols]`` by blocks of rows (:func:`transposed`
``X^T`` by square blocks), in another
precision (the risk estimate's restricted float32 copy of ``X~``, the
stacked folds' copy of ``X`` with rows ordered by fold); :func:`scratch`
gives memory for such copies that a search makes again and again, reused
inside :func:`~skacv.linalg._design.shared_designs` (fresh memory of
:func:`~skacv.linalg._memory.fresh`).
"""

import sys
import threading

import numpy as np

from .._config import check_memory
from .._trace import taken
from ..utils._parallel import blas_threads, column_workers
from ._design import _SHARED
from ._memory import fresh


def gather(X, dtype, policy, rows=None, cols=None, out=None):
    """``X[rows][:, cols]`` of a dense ``X`` in ``dtype``, C order (``None``:
    all rows or columns), copied by blocks of rows: no full-size temporary in
    ``X``'s precision. ``out``: the array to fill (C-ordered, of that shape
    and dtype; else a new one); ``policy``: the speed policy (blocks and
    threads of the copy)."""
    n = X.shape[0] if rows is None else len(rows)
    p = X.shape[1] if cols is None else len(cols)
    if out is None:
        out = fresh(n * p, np.dtype(dtype), policy).reshape(n, p)
    block = max(1, policy.gather_bytes // max(1, p * X.itemsize))

    def copy(start, stop):
        for a in range(start, stop, block):
            b = min(a + block, stop)
            src = X[a:b] if rows is None else X[rows[a:b]]
            out[a:b] = src if cols is None else src.take(cols, axis=1)

    workers = policy.gather_threads or blas_threads()
    workers = workers if out.nbytes >= policy.gather_threads_min_bytes else 1
    if workers <= 1:
        copy(0, n)
        return out
    taken("gather_threads", workers=workers)
    bounds = np.linspace(0, n, workers + 1).astype(int)
    with column_workers(workers) as run:
        run(copy, list(zip(bounds[:-1], bounds[1:], strict=True)))
    return out


def design_transposed(design):
    """``X~^T`` of a dense ``design`` as a C-ordered copy (a column of
    ``X~`` one contiguous row; :func:`transposed`), made once and kept in
    the design's cache: the fits of a search share it (the Lasso path's
    working sets, the fit loop's, :mod:`skacv.iterations._screening`)."""
    XT = design.cache.get("path_transposed")
    if XT is None:
        check_memory(design.X.nbytes, f"the transposed copy of X~ ({design.n_features} x "
                     f"{design.n_samples})")
        XT = design.cache["path_transposed"] = transposed(design.X, design.policy)
        taken("transposed_columns")
    return XT


def transposed(X, policy):
    """``X^T`` of a dense 2-D ``X`` as a C-ordered copy in :func:`fresh`
    memory, by square blocks of the speed ``policy``'s ``transpose_block``
    (NumPy's copy of a transposed view reads one array across its rows: at
    2000 x 3000, 22 ms against 11 ms by blocks, 150 ms on fresh memory)."""
    n, p = X.shape
    out = fresh(n * p, X.dtype, policy, policy.transpose_mmap_min_bytes).reshape(p, n)
    b = max(1, policy.transpose_block)
    for i in range(0, n, b):
        for j in range(0, p, b):
            out[j:j + b, i:i + b] = X[i:i + b, j:j + b].T
    return out


def scratch(shape, dtype, policy, name="columns"):
    """An uninitialised C-ordered array of ``shape`` and ``dtype``. Inside
    :func:`shared_designs`, the memory of an earlier scratch array of the
    same ``name`` and dtype that nothing uses any more (the risk estimate's
    restricted copy of ``X~``, gathered again at every stage of a staged
    search), whose page faults fresh memory would pay again; outside,
    :func:`fresh` memory."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape, dtype=np.int64))
    shared = _SHARED.get()
    if shared is None or shared["thread"] != threading.get_ident():
        return fresh(size, dtype, policy).reshape(shape)
    pool = shared.setdefault("scratch", {})
    key = (name, dtype.str)
    buf = pool.get(key)
    # in use while a view of it lives (each holds a reference to it):
    # beyond the pool's, this name's and getrefcount's own
    if buf is not None and sys.getrefcount(buf) <= 3:
        if buf.size >= size:
            return buf[:size].reshape(shape)
        del pool[key]  # too small: freed before the larger one is made
    buf = fresh(size, dtype, policy)
    if key not in pool:
        pool[key] = buf
    return buf.reshape(shape)
