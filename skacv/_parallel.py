"""joblib helpers: the caller's skacv configuration and BLAS threads in workers.

:func:`delayed` wraps a function so that it runs under the skacv
configuration captured in the calling thread (joblib workers are other
threads or processes, which start from the defaults), and with at most
``threads`` BLAS threads, so that ``n_jobs`` workers times BLAS threads
never exceed the cores (oversubscription slows a 2-core machine down by an
order of magnitude when another process is busy).
"""

import os

import joblib
from threadpoolctl import threadpool_limits

from ._config import config_context, get_config


def effective_n_jobs(n_jobs):
    """Number of workers joblib will use for ``n_jobs``."""
    return max(1, joblib.effective_n_jobs(n_jobs))


def blas_threads_per_worker(n_jobs):
    """BLAS threads each of ``n_jobs`` workers may use: ``cores // workers``."""
    cores = os.cpu_count() or 1
    return max(1, cores // effective_n_jobs(n_jobs))


class _Wrapped:
    def __init__(self, function, config, threads):
        self.function, self.config, self.threads = function, config, threads

    def __call__(self, *args, **kwargs):
        with config_context(**self.config):
            if self.threads is None:
                return self.function(*args, **kwargs)
            with threadpool_limits(limits=self.threads, user_api="blas"):
                return self.function(*args, **kwargs)


def delayed(function, config=None, threads=None):
    """``joblib.delayed`` with the skacv configuration and a BLAS thread limit.

    Parameters
    ----------
    function : callable
    config : dict, default=None
        Configuration to run under (captured by the caller with
        :func:`skacv.get_config` in its own thread); ``None`` captures it now.
    threads : int or None, default=None
        BLAS threads inside the call (``None``: unchanged).
    """
    wrapped = _Wrapped(function, get_config() if config is None else config, threads)
    return joblib.delayed(wrapped)


def parallel(n_jobs, verbose=0, generator=False):
    """``joblib.Parallel``, as a generator of results in order when asked."""
    if generator:
        try:
            return joblib.Parallel(n_jobs=n_jobs, verbose=verbose, return_as="generator")
        except TypeError:  # joblib < 1.3
            pass
    return joblib.Parallel(n_jobs=n_jobs, verbose=verbose)
