"""What the demo of ``python -m skacv demo`` is sized by, and the checks of
its parameters, of the memory it needs and of its output file, all done
before any work starts (a user mistake ends with one line naming the fix).
"""

import os
from numbers import Integral, Real
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

from ._config import path_memory_bytes

#: defaults of the quick demo (same ratios p/n, s/n and signal as the seed);
#: ``stop_sigma``, ``stop_alpha``: the noise and penalty of the second part,
#: where the true risk has a minimum along the path
DEMO_DEFAULTS = dict(n=2000, p=3000, s=200, T=50, sigma=1.5, alpha=0.01, seed=2025, m=10,
                     stop_sigma=2.5, stop_alpha=0.001)
#: the seed notebook's own size (``--full``)
SEED_SIZE = dict(DEMO_DEFAULTS, n=10000, p=15000, s=1000, T=100)
#: folds of the K-fold choice of the second part
N_FOLDS = 5
#: T x T float64 arrays alive at the peak of the risk estimate and the
#: selection (memory matrices, risk matrix and their products: about 10 were
#: measured at peak for T = 2000 and 4000 with n = 50, p = 40; 12 for margin)
_TT_ARRAYS = 12


def _available_memory():
    """Bytes of memory available to a new process (``MemAvailable`` of
    ``/proc/meminfo``), else the physical memory, else ``None``."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not Linux/macOS
        return None


def _gib(n_bytes):
    return f"{n_bytes / 2**30:,.1f} GiB"


def figure_formats():
    """File extensions matplotlib can write, or ``None`` without matplotlib."""
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        return None
    return set(FigureCanvasBase.get_supported_filetypes())


def check_output_path(out, name="out"):
    """Check that a figure can be written to ``out`` (str or path-like),
    before any work: its directory exists and is writable, its extension is
    a format that matplotlib writes (when installed) and it opens for
    writing. Returns its absolute :class:`pathlib.Path`; raises
    ``ValueError`` with a one-line message that names the option, ``name``
    (``"--out"`` on the command line), and the fix.
    """
    text = os.fspath(out)
    if not text:
        raise ValueError(f"{name} is empty: give a file name such as skacv_demo.png.")
    path = Path(text).expanduser().absolute()
    if path.is_dir():
        raise ValueError(f"{name} {text} is a directory: give a file name, e.g. "
                         f"{name} {path / 'skacv_demo.png'}.")
    parent = path.parent
    if not parent.exists():
        raise ValueError(f"{name} {text}: the directory {parent} does not exist; create it "
                         "first or choose another path.")
    if not parent.is_dir():
        raise ValueError(f"{name} {text}: {parent} is not a directory; choose another path.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{name} {text}: the directory {parent} is not writable; choose "
                         "another path.")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"{name} {text}: the file exists and is not writable; choose "
                         "another path.")
    suffix = path.suffix.lower().lstrip(".")
    if not suffix:
        raise ValueError(f"{name} {text} has no file extension: give e.g. "
                         f"{name} {text}.png.")
    formats = figure_formats()
    if formats is not None and suffix not in formats:
        raise ValueError(f"{name} {text}: matplotlib cannot write .{suffix} files; use .png "
                         f"(or one of {', '.join(sorted('.' + f for f in formats))}).")
    # opened for appending (an existing file is kept), a file the attempt
    # created removed: what the permission bits do not say (``/proc``,
    # ``/sys``, read-only mounts, root's exceptions)
    existed = path.exists()
    try:
        with open(path, "ab"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ValueError(f"{name} {text}: cannot write the file ({reason}); choose another "
                         "path.") from None
    if not existed:
        try:
            path.unlink()
        except OSError:  # pragma: no cover - created but not removable
            pass
    return path


def demo_params(n=None, p=None, s=None, T=None, sigma=None, alpha=None, seed=None, m=None,
                full=False, option=None, stop_sigma=None, stop_alpha=None, memory=None):
    """Resolve and check the parameters of the demo (those of
    :func:`~skacv._demo.run_demo`), before any work: ``None`` takes
    :data:`DEMO_DEFAULTS` (``full=True``: the seed's own size
    :data:`SEED_SIZE`). ``option`` maps a parameter name to its name in the
    messages (the command line passes ``lambda k: "--" + k``; ``None`` keeps
    it); ``memory``: the bytes the run may use (``None``: what this machine
    has available). Returns the dict of ``n``, ``p``, ``s``, ``T``,
    ``seed``, ``m`` (int) and ``sigma``, ``alpha``, ``stop_sigma``,
    ``stop_alpha`` (float); raises ``ValueError`` with a one-line message
    that names the parameter and the fix.
    """
    def opt(k):  # on the command line, stop_sigma is --stop-sigma
        return k if option is None else option(k.replace("_", "-"))

    given = dict(n=n, p=p, s=s, T=T, sigma=sigma, alpha=alpha, seed=seed, m=m,
                 stop_sigma=stop_sigma, stop_alpha=stop_alpha)
    params = dict(SEED_SIZE if full else DEMO_DEFAULTS)
    params.update({k: v for k, v in given.items() if v is not None})

    def origin(k):
        if given[k] is not None:
            return ""
        return " (the --full size)" if full else " (the default)"

    def shown(k):
        v = params[k]
        text = f"{v:g}" if isinstance(v, float) else repr(v)
        return f"{opt(k)} {text}{origin(k)}"

    for k in ("n", "p", "s", "T", "seed", "m"):
        v = params[k]
        if isinstance(v, bool) or not isinstance(v, Integral):
            if not (isinstance(v, Real) and float(v).is_integer()):
                raise ValueError(f"{shown(k)} must be a whole number.")
        params[k] = int(v)
    for k in ("sigma", "alpha", "stop_sigma", "stop_alpha"):
        v = params[k]
        if isinstance(v, bool) or not isinstance(v, Real) or not np.isfinite(v):
            raise ValueError(f"{shown(k)} must be a finite number.")
        params[k] = float(v)
    lower = {"n": (2, "the number of samples"), "p": (1, "the number of features"),
             "T": (2, "the iterates t = 0..T-1: the start and at least one step"),
             "m": (1, "the number of probes"), "s": (0, "the number of nonzero coefficients"),
             "seed": (0, "a random seed"), "sigma": (0, "the noise level"),
             "alpha": (0, "the Lasso penalty"),
             "stop_sigma": (0, "the noise level of the early-stopping part"),
             "stop_alpha": (0, "the Lasso penalty of the early-stopping part")}
    for k, (low, what) in lower.items():
        if params[k] < low:
            raise ValueError(f"{opt(k)} must be at least {low} ({what}), got "
                             f"{shown(k)[len(opt(k)) + 1:]}.")
    if params["seed"] >= 2**32:
        raise ValueError(f"{opt('seed')} must be below 2**32 = {2**32}, got {params['seed']}.")
    if params["s"] > params["p"]:
        raise ValueError(f"{shown('s')} is larger than {shown('p')}: the number of nonzero "
                         f"coefficients must be at most the number of features; lower "
                         f"{opt('s')} or raise {opt('p')}.")
    path_bytes = 8 * params["p"] * params["T"]
    limit = path_memory_bytes()
    if path_bytes > limit:
        raise ValueError(f"{shown('p')} and {shown('T')}: the stored path (p x T floats) "
                         f"would need {_gib(path_bytes)}, above skacv's path memory limit of "
                         f"{_gib(limit)}; lower {opt('T')} or {opt('p')}.")
    need = demo_memory(**params)
    memory = _available_memory() if memory is None else memory
    if memory is not None and need.total > memory:
        what, fix = {
            "chains": (f"{shown('m')} probes over {shown('T')} iterates", opt("m")),
            "data": (f"{shown('n')} and {shown('p')}", f"{opt('n')} or {opt('p')}"),
            "square": (f"{shown('T')}: the T x T memory and risk matrices", opt("T")),
        }[max(("chains", "data", "square"), key=lambda k: need[k])]
        raise ValueError(f"{what}: the demo needs about {_gib(need.total)} of memory, "
                         f"more than the {_gib(memory)} available on this machine; lower "
                         f"{fix}.")
    return params


def demo_memory(n, p, T, m, **_):
    """Bytes the demo needs at its peak, by kind (a model, not a measure),
    in a Bunch: ``data``: the design (twice: the folds of the K-fold choice
    copy it), the ``p x T`` / ``n x T`` arrays of the path, its residuals and
    the fold paths; ``chains``: the float32 Jacobian chains of the probes (at
    most ``3 p m T``); ``square``: the ``T x T`` float64 arrays of the risk
    estimate; ``total``.
    """
    data = 8 * (2 * n * p + 3 * (n + p) * T) + 4 * N_FOLDS * p * T
    chains = 4 * 3 * p * m * T
    square = 8 * _TT_ARRAYS * T * T
    return Bunch(data=data, chains=chains, square=square, total=data + chains + square)
