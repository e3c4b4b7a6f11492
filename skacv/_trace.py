"""The paths a computation took: a record of the branch points it passed.

skacv chooses between implementations that compute the same numbers (a
covariance form or the products with ``X``, a fast path or the general one,
LAPACK or Lanczos, ...). Tests check that the intended one was taken by
recording the computation: ``with record() as paths: est.fit(X, y)``, then
``"eigsh" in paths``, ``paths.count("make_design")`` or
``paths.details("settled_risk")``. The code marks a branch point with
``taken(name, **details)``, which costs one context-variable lookup when
nothing records and never changes a computation (the details are values the
code already holds).

The record is a :mod:`contextvars` variable: the code that runs within the
``with`` block records, and so do the threads skacv starts (the column
groups and passes of :mod:`skacv.utils._parallel`, the candidates of a
search on joblib's threads: :func:`carried` hands the record to them). Work
done in other processes (joblib's loky workers) is not recorded, nor work
in threads started elsewhere without :func:`carried`. Within nested
``record`` blocks the innermost one records.

Events
------
Each event below is taken where the code says, with the details named;
this list is the one place they are documented (``tests/test_trace.py``
checks that it names every event the code takes and every event a test
reads). A count of an event counts the calls (products, passes, fits).

Fits and their set-up (:mod:`skacv.estimators`, :mod:`skacv.iterations`)

``fit``
    An estimator's fit started (``estimator``: its class name,
    ``max_iter``: its steps).
``data_fingerprint``
    A fit fingerprinted its data (:func:`skacv.utils._validation.data_fingerprint`).
``make_design``
    A design was built (:func:`skacv.linalg._design.make_design`).
``check_risk_memory``
    A fit checked the risk estimate's memory before its loop
    (``probe_scheme``: the scheme it was told).
``run_trajectory``
    A fit loop ran (:func:`skacv.iterations._path.run_trajectory`;
    ``steps``: how many).
``debias_statistics``
    A fit computed its debiasing statistics.

Products and spectra of a design (:mod:`skacv.linalg`)

``matvec``, ``rmatvec``
    A product ``X~ B`` or ``X~^T R``.
``panel_products``
    A one-pass product ``(X~ b, X~^T r)`` by row panels; ``panel_group``:
    one group of its panels ran (``thread``: the thread's identifier).
``columns``
    Columns of ``X~`` were gathered dense; ``columns_product``: a
    product with a few columns (``size``: how many).
``gram``
    ``X~^T X~`` or ``X~ X~^T`` was asked for (``side``).
``eigvalsh_float32``
    The Gram matrix's eigenvalues in single precision.
``lanczos_top_eigenvalues``
    The top eigenvalue by skacv's Lanczos; ``eigsh``: by ARPACK.
``gather_threads``
    A copy of rows and columns ran in threads (``workers``).
``row_source_pass``
    A pass over a Dask design's rows drew probes (``probes``).

Threads (:mod:`skacv.utils._parallel`)

``small_blas``
    The T x T corrections of an estimate, on one BLAS thread or not
    (``one_thread``).
``pass_workers``
    A pass of panel groups started (``blas_threads``: the BLAS threads
    inside it, ``workers``: its threads).
``overlapped``
    Two computations ran beside each other.

The risk estimate (:mod:`skacv.estimates.risk`)

``risk_plan``
    The estimate of a path was planned (``form``); ``rows_scheme``: its
    ``"auto"`` scheme took the shared probes for a Dask fit's row source.
``resolve_n_probes``
    ``n_probes="auto"`` was resolved (once a fit).
``memory_matrices``
    A memory-matrix engine ran (``form``: ``"shared"``, ``"pooled"``,
    ``"spectral"``, ...; ``steps``: the steps it propagated).
``grow_pooled``
    The adaptive pooled chain was grown (details: the estimate's
    variables, ``design``, ``iteration``, ``coef_path``, ``state``, ``A``,
    ``Av``, ``readout``, ``replicate_risk``, ...).
``template_quadrature``
    The pooled chain's template ran its Lanczos quadrature (``depth``).
``lanczos_quadrature``
    The spectral estimate's Lanczos quadrature ran (``resumed``: from a
    warm start's, ``depth``: its steps in all).
``forward_chains``
    Jacobian chains were advanced (``k0``, ``k_end``: the steps).
``split_step``
    Chains meeting in the middle were planned (``T``, ``per_output``).
``design_columns``
    The chains gathered their restricted copy of ``X~``.
``restricted_gram``
    The chains' restricted Gram matrix is a block of the design's
    (``from_full``).
``gram_product``
    A chain product with the restricted Gram matrix or by primal
    products (``factor``); its forms: ``vector_products`` and
    ``gram_panel_products`` (from the Gram matrix), ``primal_product``
    (two products with ``X~``) by ``thin_panel_products``,
    ``vector_panel_products`` or ``primal_blocks`` (blocks of rows).
``residual_matrix``
    An ``n x (T + 1)`` residual matrix was formed; ``risk_from_memory``:
    the risk read from such residuals; ``source_residuals``: the
    gradient points' residuals formed again.
``settled_risk``
    The settled form ran (``settled_step``); ``settled_memory``: its
    model (``model``); ``settled_window``: its row norms' live sources
    (``first``, at step ``step``).

Leave-one-out and model selection

``loo_gram_dtype``
    The left-out runs' Gram products' precision (``float32``).
``stacked_folds``
    The K folds were stacked (``full_design``: the full fit's design, or
    ``None``); ``fold_covariance``: in the covariance form;
    ``prepared_calls``: a pass's products were prepared for the BLAS.
``lasso_path``
    A Lasso path started (``space``: ``"_FeatureSpace"`` or
    ``"_SampleSpace"``, ``finish``: its support finish or ``None``).
``metric_fista``
    A working set ran FISTA in the rank-one metric (``l2``);
    ``metric_fallback``: the metric's solve was abandoned (``reason``);
    ``step_fallback``: the plain step diverged (the exact top eigenvalue
    followed); ``columns_coordinate_descent``: a working set by
    coordinate descent.
"""

import contextlib
import contextvars
from collections import Counter

__all__ = ["Paths", "carried", "record", "taken"]

_RECORD = contextvars.ContextVar("skacv_paths", default=None)


class Paths:
    """The events recorded within a :func:`record` block, in order.

    ``name in paths``: the event happened; :meth:`count`: how often;
    :meth:`details`: the details of each time (dicts); ``list(paths)``:
    ``(name, details)`` pairs in order.
    """

    def __init__(self):
        self.events = []

    def add(self, name, details):
        self.events.append((name, details))  # atomic: threads may add at once

    def __iter__(self):
        return iter(list(self.events))

    def __len__(self):
        return len(self.events)

    def __bool__(self):  # a record, even an empty one
        return True

    def __contains__(self, name):
        return any(event == name for event, _ in self.events)

    def count(self, name):
        """How many times ``name`` was taken."""
        return sum(event == name for event, _ in self.events)

    def details(self, name):
        """The details of every ``name`` event, in order."""
        return [details for event, details in self.events if event == name]

    def names(self):
        """The events' names, in order."""
        return [event for event, _ in self.events]

    def counts(self):
        """:class:`collections.Counter` of the events' names."""
        return Counter(self.names())

    def clear(self):
        """Forget the events recorded so far."""
        self.events.clear()

    def __reduce__(self):
        # a record does not travel to another process: the worker gets an
        # empty one, which nobody reads
        return Paths, ()

    def __repr__(self):
        return f"Paths({self.names()!r})"


def taken(name, /, **details):
    """Record that the computation took the branch ``name`` (a no-op unless
    a :func:`record` block is recording)."""
    paths = _RECORD.get()
    if paths is not None:
        paths.add(name, details)


@contextlib.contextmanager
def record(paths=None):
    """Record the branch points passed within the block: yields the
    :class:`Paths` (a new one, or ``paths`` to add to)."""
    paths = Paths() if paths is None else paths
    token = _RECORD.set(paths)
    try:
        yield paths
    finally:
        _RECORD.reset(token)


def recording():
    """The :class:`Paths` being recorded in this context, or ``None``."""
    return _RECORD.get()


def carried(function, paths=None):
    """``function`` made to record into the caller's record (or ``paths``)
    in whichever thread runs it; ``function`` itself when nothing records."""
    paths = _RECORD.get() if paths is None else paths
    if paths is None:
        return function

    def run(*args, **kwargs):
        token = _RECORD.set(paths)
        try:
            return function(*args, **kwargs)
        finally:
            _RECORD.reset(token)

    return run
