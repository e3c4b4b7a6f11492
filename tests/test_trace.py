"""The record of the paths a computation took (:mod:`skacv._trace`).

Its events are recorded where the code runs them, also in the threads skacv
starts (column groups, passes, a search's candidates on joblib's threads),
never outside a ``record`` block, and documented in one place: the module's
docstring names every event the code takes and every event a test reads.
"""

import pickle
import re
import threading
from pathlib import Path

import joblib
import numpy as np

import skacv
from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso
from skacv._trace import carried, record, recording, taken
from skacv.utils._parallel import column_workers, delayed, parallel, pass_workers

ROOT = Path(skacv.__file__).parent
TESTS = Path(__file__).parent


def test_record_counts_and_details():
    taken("outside")  # nothing records: nothing happens
    with record() as paths:
        assert recording() is paths and not len(paths)
        taken("a", k=1)
        taken("b")
        taken("a", k=2)
    taken("a", k=3)  # after the block: not recorded
    assert recording() is None
    assert paths.names() == ["a", "b", "a"] and list(paths)[1] == ("b", {})
    assert "a" in paths and "c" not in paths and paths.count("a") == 2
    assert paths.details("a") == [{"k": 1}, {"k": 2}]
    assert paths.counts() == {"a": 2, "b": 1}
    with record() as outer:
        taken("x")
        with record() as inner:  # the innermost block records
            taken("y")
        with record(outer):  # or adds to a record given
            taken("z")
    assert outer.names() == ["x", "z"] and inner.names() == ["y"]
    # a record does not travel to other processes: an empty one arrives
    assert len(pickle.loads(pickle.dumps(outer))) == 0


def test_the_threads_skacv_starts_record():
    def work(i):
        taken("work", i=i, thread=threading.get_ident())

    with record() as paths:
        with column_workers(3) as run:
            run(work, [(i,) for i in range(6)])
        with pass_workers(2) as run:
            run(work, [(i,) for i in range(6, 8)])
        with joblib.parallel_backend("threading", n_jobs=2):
            parallel(2)(delayed(work)(i) for i in range(8, 12))
        plain = threading.Thread(target=work, args=(99,))  # not skacv's: not recorded
        plain.start()
        plain.join()
        helper = threading.Thread(target=carried(work), args=(12,))  # carried: recorded
        helper.start()
        helper.join()
    assert sorted(d["i"] for d in paths.details("work")) == list(range(13))
    assert len({d["thread"] for d in paths.details("work")}) > 1


def test_a_search_records_its_candidates_on_threads():
    """The candidates of a search fitted on joblib's threads are recorded:
    the same fits, loops and estimates as the search in one thread (the
    threads do not share the search's design: their products differ)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 20))
    y = X[:, :3].sum(axis=1) + rng.standard_normal(60)
    counts = []
    for n_jobs in (1, 2):
        search = TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=10), search="grid",
                                           param_grid={"alpha": [0.3, 0.1, 0.03]},
                                           n_jobs=n_jobs, n_iter_no_change=None)
        with joblib.parallel_backend("threading", n_jobs=n_jobs), record() as paths:
            search.fit(X, y)
        counts.append(paths.counts())
    assert counts[0]["fit"] >= 3 and counts[0]["run_trajectory"] >= 3
    for name in ("fit", "run_trajectory", "memory_matrices", "risk_plan"):
        assert counts[1][name] == counts[0][name], name


def _taken_in_skacv():
    names = set()
    for path in ROOT.rglob("*.py"):
        names |= set(re.findall(r'\btaken\("([a-z_0-9]+)"', path.read_text()))
    return names


def _documented():
    """The names in ``docs/architecture.rst``'s section of the events."""
    doc = (TESTS.parent / "docs" / "architecture.rst").read_text()
    section = doc[doc.index(".. _trace_events:"):]
    section = section[:section.index("\nTolerances in the tests\n")]
    return set(re.findall(r"``([a-z_0-9]+)``", section))


def _read_by_tests():
    names = set()
    pattern = (r'(?:paths|run)\.(?:count|details)\("([a-z_0-9]+)"\)'
               r'|"([a-z_0-9]+)" (?:not )?in (?:paths|run)\b')
    for path in TESTS.glob("test_*.py"):
        if path.name == "test_trace.py":
            continue
        for match in re.findall(pattern, path.read_text()):
            names |= {m for m in match if m}
    return names


def test_every_event_is_documented():
    taken_names = _taken_in_skacv()
    assert len(taken_names) > 40
    assert not taken_names - _documented(), "events taken but not documented"
    read = _read_by_tests()
    assert len(read) > 30
    assert not read - taken_names, "tests read events the code never takes"
