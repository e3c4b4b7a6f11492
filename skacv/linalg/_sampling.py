"""Random rows: mini-batches of stochastic gradients (:class:`MinibatchSampler`
for linear SGD, :class:`EpochSampler` for kernel SGD), weighted subsamples
(:func:`draw_rows`, :func:`subsample_rows`) and the signs of every
Hutchinson probe (:func:`rademacher`).

Sample weights are frequency weights everywhere: a draw from the weighted
data is a draw from the multiset of rows repeated by their (integer)
weights, so that a weighted fit equals the fit on repeated rows. While a
:data:`ROW_SOURCE` is set (an in-memory sample standing for Dask rows,
:mod:`skacv.linalg._dask`), the probes and the subsample are its rows'.
"""

import contextlib
import contextvars

import numpy as np
from sklearn.utils import check_random_state

from .._config import check_memory

#: ``None``, or while an in-memory sample standing for other rows is fitted
#: (:func:`skacv.estimators._dask_fit.dask_fit`) an object whose ``probes(rng, shape,
#: dtype)`` and ``subsample(n, size)`` give the draws of those rows for
#: :func:`rademacher` and :func:`subsample_rows` (``None``: not that sample's)
ROW_SOURCE = contextvars.ContextVar("skacv_row_source", default=None)


def stands_for_rows():
    """Whether an in-memory sample standing for other rows is being fitted
    (:data:`ROW_SOURCE` set, in this context): ``probe_scheme="auto"`` then
    takes the shared probes, the ones that source maps onto the sample."""
    return ROW_SOURCE.get() is not None


@contextlib.contextmanager
def rows_behind(source):
    """:data:`ROW_SOURCE` set to ``source`` in the block (nothing if ``None``)."""
    if source is None:
        yield
        return
    token = ROW_SOURCE.set(source)
    try:
        yield
    finally:
        ROW_SOURCE.reset(token)


def integer_weights(weight, statistics):
    """True when ``weight`` is None or holds integers (frequency weights)
    summing to at most the ``statistics`` policy's ``expanded_weights_max``."""
    if weight is None:
        return True
    return (bool(np.all(weight == np.round(weight)))
            and weight.sum() <= statistics.expanded_weights_max)


def counts_of(draws, n_rows):
    """``(rows, counts)``: the distinct rows of a list of draws and their counts."""
    counts = np.bincount(draws, minlength=n_rows)
    rows = np.flatnonzero(counts)
    return rows, counts[rows].astype(np.float64)


def signs(rng, shape, dtype=np.float64):
    """Independent signs ``+-1`` of ``shape`` in ``dtype``, drawn from ``rng``
    (a RandomState or Generator) by ``rng.choice`` on ``[-1, 1]``: the same
    numbers in every dtype, and the same draw for the same ``rng`` state."""
    return rng.choice(np.array([-1, 1], dtype=dtype), size=shape)


def rademacher(rng, shape, dtype=np.float64):
    """Rademacher probes (:func:`signs`), or while a :data:`ROW_SOURCE` is
    set the probes of its rows mapped onto the sample: seeded estimates do
    not depend on the precision of the probes, nor on whether the rows were
    in memory."""
    source = ROW_SOURCE.get()
    Z = None if source is None else source.probes(rng, shape, dtype)
    return signs(rng, shape, dtype) if Z is None else Z


def subsample_rows(n_rows, size, random_state):
    """``(rows, scale)``: ``size`` of ``n_rows`` rows drawn without replacement
    from ``check_random_state(random_state)``, sorted, and ``n_rows / size``
    (the rows :data:`ROW_SOURCE` fetched for its sample)."""
    source = ROW_SOURCE.get()
    found = None if source is None else source.subsample(n_rows, size)
    if found is not None:
        return found
    rows = _distinct_rows(n_rows, size, random_state)
    return rows, n_rows / rows.shape[0]


def _distinct_rows(n_rows, size, random_state):
    """``size`` of ``n_rows`` rows drawn without replacement, sorted."""
    return np.sort(check_random_state(random_state).choice(n_rows, int(size), replace=False))


def _expanded(weight):
    return np.repeat(np.arange(weight.shape[0]), np.round(weight).astype(np.int64))


def draw_rows(weight, size, random_state, n_rows, statistics):
    """``size`` draws from the weighted empirical measure of ``n_rows`` rows.

    Returns ``(rows, counts, exact)``: distinct rows, their multiplicities
    (summing to ``size``) and ``exact=True`` when ``size >= n_eff``, in which
    case every row of positive weight is returned with its weight as count
    (no randomness). Otherwise: without weights, ``size`` distinct rows;
    with integer weights, ``size`` draws without replacement from the
    multiset of repeated rows (exactly what repeating the rows would draw);
    with other weights, draws with replacement with probability ``w / n_eff``.
    """
    if weight is None:
        if size >= n_rows:
            return np.arange(n_rows), np.ones(n_rows), True
        rows = _distinct_rows(n_rows, size, random_state)
        return rows, np.ones(rows.shape[0]), False
    n_eff = float(weight.sum())
    if size >= n_eff:
        rows = np.flatnonzero(weight > 0)
        return rows, weight[rows].astype(np.float64), True
    rng = check_random_state(random_state)
    if integer_weights(weight, statistics):
        expanded = _expanded(weight)
        draws = expanded[rng.choice(expanded.shape[0], int(size), replace=False)]
    else:
        draws = rng.choice(n_rows, int(size), replace=True, p=weight / n_eff)
    rows, counts = counts_of(draws, n_rows)
    return rows, counts, False


class MinibatchSampler:
    """Mini-batches of rows: one random permutation per epoch.

    Step ``k`` (``k >= 1``) uses batch ``j = (k - 1) mod n_batches`` of epoch
    ``e = (k - 1) // n_batches``; the permutation of epoch ``e`` is drawn from
    ``numpy.random.default_rng([seed, e])``. The last batch of an epoch is
    smaller when ``batch_size`` does not divide ``n_samples``.

    Parameters
    ----------
    n_samples : int
    batch_size : int
    seed : int
    """

    def __init__(self, n_samples, batch_size, seed):
        self.n_samples = int(n_samples)
        self.batch_size = int(min(max(batch_size, 1), self.n_samples))
        self.seed = int(seed)
        self.n_batches = -(-self.n_samples // self.batch_size)
        self._epoch, self._perm = -1, None

    def __call__(self, k):
        """Sorted row indices of the batch of step ``k``."""
        e, j = divmod(int(k) - 1, self.n_batches)
        if e != self._epoch:
            self._perm = np.random.default_rng([self.seed, e]).permutation(self.n_samples)
            self._epoch = e
        b = self.batch_size
        return np.sort(self._perm[j * b: (j + 1) * b])

    def without(self, i):
        """The same batches on the data with row ``i`` deleted (re-indexed)."""
        return _SamplerWithoutRow(self, i)


class _SamplerWithoutRow:
    """Batches of a :class:`MinibatchSampler` with one row removed."""

    def __init__(self, base, row):
        self.base, self.row = base, int(row)
        self.n_batches = base.n_batches  # (the fit loop's checks: once an epoch)

    def __call__(self, k):
        S = self.base(k)
        S = S[S != self.row]
        return S - (S > self.row)


class EpochSampler:
    """Epochs of mini-batches of draws from the weighted empirical measure.

    An epoch is a random permutation of the ``n_eff`` draws of the multiset
    of rows repeated by their (integer) weights, cut into batches of
    ``batch_size``, the last one shorter; with non-integer weights,
    ``round(n_eff)`` draws with replacement. In full-batch mode the single
    batch is every row with its weight as count. A batch is ``(rows, counts,
    positions)``, ``positions`` the drawn copies of the multiset (integer
    weights) or None.
    """

    def __init__(self, weight, n, batch_size, full, statistics):
        self.weight, self.n, self.full = weight, n, full
        self.batch_size = int(batch_size)
        self.integer = integer_weights(weight, statistics)
        if weight is not None and self.integer:
            self.expanded = _expanded(weight)
        elif weight is not None and not full:
            # an epoch draws round(n_eff) rows and their uniforms: refused with
            # the number before it is drawn (a weights' sum of 1e20 overflowed)
            n_eff = float(weight.sum())
            check_memory(16.0 * max(1.0, round(n_eff)),
                         f"An epoch's draws (the sample weights are frequencies: an epoch "
                         f"draws their sum, {n_eff:.6g} rows)",
                         "Rescale them to sum to the number of rows "
                         "(sample_weight * n / sample_weight.sum()). ")

    def epoch(self, rng):
        """The batches of one epoch drawn with ``rng``."""
        w, n = self.weight, self.n
        if self.full:
            counts = np.ones(n) if w is None else w.astype(np.float64)
            return [(np.arange(n), counts, None)]
        positions = None
        if w is None:
            draws = rng.permutation(n)
        elif self.integer:
            positions = rng.permutation(self.expanded.shape[0])
            draws = self.expanded[positions]
        else:
            draws = rng.choice(n, max(1, int(round(w.sum()))), replace=True, p=w / w.sum())
        m = self.batch_size
        out = []
        for s in range(0, draws.shape[0], m):
            chunk = draws[s: s + m]
            if w is None:
                out.append((chunk, np.ones(chunk.shape[0]), None))
            else:
                pos = None if positions is None else positions[s: s + m]
                out.append((*counts_of(chunk, n), pos))
        return out
