"""The paths a computation took: a record of the branch points it passed
(``docs/architecture.rst``, "The paths taken are recorded, not spied on";
its "The recorded events" lists every event and its details).

The record is a :mod:`contextvars` variable: the code within the ``with``
block records, and so do the threads skacv starts (:func:`carried` hands
the record to them); work in other processes (joblib's loky workers), or
in threads started elsewhere without :func:`carried`, is not recorded.
Within nested ``record`` blocks the innermost one records.
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
        # another process (a joblib worker) gets an empty record, which nobody reads
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
