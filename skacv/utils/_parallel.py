"""joblib helpers: the caller's configurations and BLAS threads in workers.

:func:`delayed` wraps a function so that it runs under the skacv and
scikit-learn configurations captured in the calling thread (joblib workers
are other threads or processes, which start from the defaults), and with at most
``threads`` BLAS threads, so that ``n_jobs`` workers times BLAS threads
never exceed the cores (oversubscribed threads wait on each other, and
much more so when another process is busy).
"""

import contextlib
import functools
import os
from concurrent.futures import ThreadPoolExecutor, wait

import joblib
import scipy.linalg  # noqa: F401  (SciPy's BLAS is loaded before _BLAS looks for it)
import sklearn
from threadpoolctl import ThreadpoolController

from .._config import config_context, get_config
from .._trace import carried, recording, taken


def effective_n_jobs(n_jobs):
    """Number of workers joblib will use for ``n_jobs``."""
    return max(1, joblib.effective_n_jobs(n_jobs))


def blas_threads_per_worker(n_jobs):
    """BLAS threads each of ``n_jobs`` workers may use: ``cores // workers``,
    never more than the caller's own limit (:func:`blas_threads`); ``None``
    (unchanged) for one worker, which runs in the caller's thread under its
    limit."""
    workers = effective_n_jobs(n_jobs)
    if workers == 1:
        return None
    return max(1, min(blas_threads(), (os.cpu_count() or 1) // workers))


class _Wrapped:
    def __init__(self, function, config, threads, sklearn_config):
        self.function, self.config, self.threads = function, config, threads
        self.sklearn_config = sklearn_config
        self.paths = recording()  # the caller's record of paths taken, if any

    def __call__(self, *args, **kwargs):
        function = carried(self.function, self.paths)
        with config_context(**self.config), sklearn.config_context(**self.sklearn_config):
            if self.threads is None:
                return function(*args, **kwargs)
            # the libraries found once (_BLAS): a new threadpool_limits walks
            # every loaded library, milliseconds a call in a large process
            with _BLAS.limit(limits=self.threads):
                return function(*args, **kwargs)


def delayed(function, config=None, threads=None, sklearn_config=None):
    """``joblib.delayed`` under the skacv and scikit-learn configurations
    ``config`` and ``sklearn_config`` (metadata routing, ``assume_finite``,
    ...; ``None``: captured now, in the caller's thread: a caller whose
    generator of calls joblib may consume in another thread captures them
    itself) and with at most ``threads`` BLAS threads (``None``: unchanged)."""
    wrapped = _Wrapped(function, get_config() if config is None else config, threads,
                       sklearn.get_config() if sklearn_config is None else sklearn_config)
    return joblib.delayed(wrapped)


def parallel(n_jobs, verbose=0, generator=False):
    """``joblib.Parallel``, as a generator of results in order when asked."""
    if generator:
        try:
            return joblib.Parallel(n_jobs=n_jobs, verbose=verbose, return_as="generator")
        except TypeError:  # joblib < 1.3
            pass
    return joblib.Parallel(n_jobs=n_jobs, verbose=verbose)


# the BLAS libraries of this process, found once (at import, after NumPy and
# SciPy have loaded theirs): finding them walks every loaded library, which
# is slow and, interrupted by Ctrl-C, prints a traceback from a callback
_BLAS = ThreadpoolController().select(user_api="blas")


def blas_threads():
    """BLAS threads the process may use now (the smallest limit of the
    loaded BLAS libraries; 1 if none is found)."""
    counts = [int(info.get("num_threads") or 1) for info in _BLAS.info()]
    return max(1, min(counts)) if counts else 1


@contextlib.contextmanager
def column_workers(workers):
    """Yields ``run(function, calls)`` (:func:`_threads`) in ``workers``
    threads with BLAS limited to one thread: independent groups of columns
    in threads instead of in BLAS, the element-wise work between the
    products (which NumPy runs in one thread) spread too."""
    workers = int(workers)
    with _BLAS.limit(limits=1) if workers > 1 else contextlib.nullcontext():
        with _threads(workers) as run:
            yield run


def overlapped(first, second):
    """``(first(), second())`` with ``first`` in a thread of its own beside
    ``second`` in the caller's thread, each on one BLAS thread (with two or
    more BLAS threads to share; else one after the other), under the
    caller's skacv and scikit-learn configurations (both thread-local). For
    two computations of similar length that each gain less from a second
    BLAS thread than from running beside the other (a full-data fit beside
    the stacked folds' passes). An exception of ``second`` is raised once
    ``first`` has finished; then ``first``'s own."""
    taken("overlapped")
    if blas_threads() < 2:
        return first(), second()
    helper = _Wrapped(first, get_config(), None, sklearn.get_config())
    with _BLAS.limit(limits=1), ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(helper)
        try:
            out = second()
        finally:
            wait([future])
        return future.result(), out


@contextlib.contextmanager
def _threads(workers):
    """Yields ``run(function, calls)``, which calls ``function(*args)`` for
    every ``args`` in ``calls`` in ``workers`` threads and waits for all of
    them (in turn for one worker); ``run.workers`` threads."""
    if workers <= 1:
        def run(function, calls):
            for args in calls:
                function(*args)

        run.workers = 1
        yield run
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        def run(function, calls):
            function = carried(function)  # the threads record into the caller's paths
            futures = [pool.submit(function, *args) for args in calls]
            try:
                for future in futures:
                    future.result()
            except BaseException:
                # an error or Ctrl-C: the calls not started yet are dropped, so
                # that the pool's exit waits for the running ones only (it ran
                # every queued call before: a Ctrl-C waited for the whole pass)
                for future in futures:
                    future.cancel()
                raise

        run.workers = workers
        yield run


@contextlib.contextmanager
def small_blas(flops, policy):
    """BLAS limited to one thread for work of about ``flops`` flops when that
    is below the speed ``policy``'s ``small_blas_flops``: a multithreaded BLAS wakes its threads at
    every call, which costs more than small products save (figures in
    docs/benchmarks.rst)."""
    if flops < policy.small_blas_flops and blas_threads() > 1:
        with _BLAS.limit(limits=1):
            taken("small_blas", one_thread=True)
            yield
    else:
        taken("small_blas", one_thread=False)
        yield


@contextlib.contextmanager
def factorization_blas(kind, order, policy):
    """BLAS limited to one thread for a dense symmetric factorisation
    (``kind``: ``"cholesky"``, ``"eigvalsh"`` or ``"eigh"``) of order up to
    the speed ``policy``'s ``one_thread_order[kind]``: LAPACK's threaded versions wait on their
    threads at every panel, which costs more than they save at these sizes."""
    if order <= policy.one_thread_order[kind] and blas_threads() > 1:
        with _BLAS.limit(limits=1):
            yield
    else:
        yield


@contextlib.contextmanager
def pass_workers(n_groups):
    """Run a pass made of many small products (panels of rows) in
    ``n_groups`` independent groups of the caller's (the results do not
    depend on the number of threads): :func:`_threads` in
    ``min(n_groups, blas_threads())`` threads, BLAS limited to one thread (a
    multithreaded BLAS wakes and joins its threads at every call, which costs
    more than a panel's product; figures in docs/benchmarks.rst)."""
    threads = blas_threads()
    workers = min(int(n_groups), threads)
    with _BLAS.limit(limits=1) if threads > 1 else contextlib.nullcontext():
        if recording():  # the BLAS threads the pass runs on
            taken("pass_workers", blas_threads=blas_threads(), workers=workers)
        with _threads(workers) as run:
            yield run


@contextlib.contextmanager
def kept_workers(owner, n_groups, attr="_run"):
    """:func:`pass_workers` kept on ``owner.<attr>`` while inside, so that
    every pass within (nested uses included) runs on the same threads; a
    use while they are kept yields them."""
    run = getattr(owner, attr, None)
    if run is not None:
        yield run
        return
    with pass_workers(n_groups) as run:
        setattr(owner, attr, run)
        try:
            yield run
        finally:
            setattr(owner, attr, None)


#: where Linux describes the first CPU's caches
CACHE_ROOT = "/sys/devices/system/cpu/cpu0/cache"


def _count_cpus(text):
    """CPUs in a Linux CPU list such as ``"0-3,8"``."""
    count = 0
    for part in text.strip().split(","):
        if part:
            a, _, b = part.partition("-")
            count += int(b or a) - int(a) + 1
    return count


def cache_bytes(level, policy):
    """Size in bytes of the CPU's data (or unified) cache of ``level`` (1 to
    3): the speed ``policy``'s ``cpu_caches`` where set, else as Linux reports it
    for the first CPU, else the policy's ``default_cache_bytes``."""
    if policy.cpu_caches is not None:
        return policy.cpu_caches[level]
    size = reported_cache_bytes(level)
    default = policy.default_cache_bytes
    return default.get(level, default[3]) if size is None else size


@functools.lru_cache(maxsize=None)
def reported_cache_bytes(level, root=CACHE_ROOT):
    """The size of :func:`cache_bytes` as Linux reports it under ``root``
    (``None`` where it does not)."""
    try:
        path = _cache_entry(level, root)
        if path is not None:
            with open(os.path.join(path, "size")) as f:
                text = f.read().strip().upper()
            scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
            size = int(text.rstrip("KMG")) * scale
            if size > 0:
                return size
    except (OSError, ValueError):
        pass
    return None


def _cache_entry(level, root):
    """The sysfs folder (under ``root``) of the first CPU's data (or
    unified) cache of ``level``, or ``None``."""
    for entry in sorted(os.listdir(root)):
        path = os.path.join(root, entry)
        with open(os.path.join(path, "level")) as f:
            if int(f.read()) != level:
                continue
        with open(os.path.join(path, "type")) as f:
            if f.read().strip() == "Instruction":
                continue
        return path
    return None


def last_level_share(policy):
    """The last-level cache (:func:`cache_bytes`) counted at most
    the speed ``policy``'s ``last_level_per_cpu_max`` per CPU that shares it (Linux sysfs's
    ``shared_cpu_list``; one CPU where it does not say or where the policy's
    ``cpu_caches`` stand for the system's)."""
    shared = 1 if policy.cpu_caches is not None else shared_cpus()
    return min(cache_bytes(3, policy), shared * policy.last_level_per_cpu_max)


@functools.lru_cache(maxsize=None)
def shared_cpus(root=CACHE_ROOT):
    """The CPUs that share the last-level cache, as Linux reports them under
    ``root`` (1 where it does not say)."""
    shared = 1
    try:
        path = _cache_entry(3, root)
        if path is not None:
            with open(os.path.join(path, "shared_cpu_list")) as f:
                shared = max(1, _count_cpus(f.read()))
    except (OSError, ValueError):
        pass
    return shared
