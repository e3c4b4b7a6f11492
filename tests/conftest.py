"""Settings shared by the whole test suite (read before any test module)."""

import os

# scikit-learn's estimator checks include ``check_array_api_input`` (NumPy input
# with array API dispatch enabled); it is skipped unless SciPy's array API
# support is on, which has to be decided before SciPy is first imported.
os.environ.setdefault("SCIPY_ARRAY_API", "1")
# figures are written to files only (headless CI)
os.environ.setdefault("MPLBACKEND", "Agg")
# One BLAS / OpenMP thread per process. The suite is dominated by small matrix
# products, where threads buy nothing, and on a loaded machine BLAS threads
# that wait for a busy core (and the joblib workers of the n_jobs tests, each
# with its own BLAS threads) multiply the run time several-fold. The
# variables reach the processes the tests start (command line, examples);
# joblib's loky workers get one thread each from joblib itself, and the
# threadpool limit below covers this process and its threads (threading
# backend), whatever was imported before.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


import pytest  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

#: most processes ``-n auto`` starts (pyproject.toml's addopts): beyond a few,
#: the longest tests (10-15 s) and each worker's imports set the time, and
#: every worker holds its own NumPy, SciPy and scikit-learn
MAX_WORKERS = 8


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one test process per CPU this process may use, as joblib
    counts them (CPU affinity and a container's CPU quota, which pytest-xdist's
    own count through psutil ignores), at most :data:`MAX_WORKERS`. Each
    process runs its BLAS on one thread (above), so the workers do not
    oversubscribe the cores. ``pytest -n 0`` runs the suite in this process;
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` (pytest-xdist's own) sets the count."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's hook reads it
    from joblib import cpu_count

    return max(1, min(cpu_count(), MAX_WORKERS))


@pytest.fixture(scope="session", autouse=True)
def _one_blas_thread():
    """Limit BLAS and OpenMP to one thread for the whole session."""
    with threadpool_limits(limits=1):
        yield


@pytest.fixture
def speed_policy():
    """Change skacv's speed policy (:class:`skacv._policy.SpeedPolicy`) for
    one test: ``speed_policy(covariance_max_features=0)``; every change is
    undone after the test. The one way tests change a threshold."""
    import contextlib

    from skacv._policy import policy_context

    with contextlib.ExitStack() as stack:
        yield lambda **changes: stack.enter_context(policy_context(**changes))


@pytest.fixture
def statistical_policy():
    """Change skacv's statistical policy (:class:`skacv._statistics.StatisticalPolicy`)
    for one test: ``statistical_policy(relative_patience=0)``; every change is
    undone after the test. The one way tests change a tolerance or a patience."""
    import contextlib

    from skacv._statistics import statistics_context

    with contextlib.ExitStack() as stack:
        yield lambda **changes: stack.enter_context(statistics_context(**changes))


@pytest.fixture
def kernels_policy(speed_policy):
    """Pin the fields of the speed policy that skacv sets from NumPy's BLAS
    kernels at import (``SpeedPolicy.narrow_blas_panels``) to their defaults
    for an OpenBLAS running the kernel set ``kernels`` (``"Haswell"``:
    narrow, ``"SkylakeX"``: wide; :func:`skacv._policy.kernels_policy`),
    whatever this machine runs: ``kernels_policy("Haswell")`` returns the
    policy in force. A test of a path those fields choose pins them."""
    from skacv._policy import SpeedPolicy
    from skacv._policy import kernels_policy as defaults

    def pin(kernels):
        policy = defaults(kernels)
        return speed_policy(**{key: getattr(policy, key)
                               for key in SpeedPolicy().narrow_blas_panels})

    return pin
