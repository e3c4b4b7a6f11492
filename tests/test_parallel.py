"""skacv's own worker threads (``skacv.utils._parallel``)."""

import threading
import time

import pytest

from skacv.utils._parallel import column_workers


def test_an_error_in_the_workers_drops_the_calls_not_started():
    # the error (or a Ctrl-C) reaches the caller once the running calls end,
    # not after every queued call: 200 calls of 20 ms on 2 threads take 2 s;
    # the first one raises at once
    ran, lock = [], threading.Lock()

    def work(i):
        if i == 0:
            raise RuntimeError("first call")
        time.sleep(0.02)
        with lock:
            ran.append(i)

    with pytest.raises(RuntimeError, match="first call"):
        with column_workers(2) as run:
            run(work, [(i,) for i in range(200)])
    assert len(ran) < 100, len(ran)  # (every one of the 199 before)
    # without an error every call runs, in any number of threads
    ran.clear()
    with column_workers(2) as run:
        run(work, [(i,) for i in range(1, 41)])
    assert sorted(ran) == list(range(1, 41))
