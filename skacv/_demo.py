"""The demo of ``python -m skacv demo``: the seed notebook's ISTA experiment,
then early stopping on the same design.

Simulates the data generator of the seed notebook (Bellec & Tan 2024 worked
example): ``X`` with i.i.d. standard normal entries (identity covariance),
``beta`` with ``s`` nonzero entries equal to ``15 / sqrt(n)``, Gaussian noise of
level ``sigma`` and seed 2025. It fits the ISTA (or FISTA) path of the Lasso
with the seed's step ``(1 + sqrt(p / n))^-2`` and prints, at every iterate
``t``, the training error, the true out-of-sample risk
``||b_t - beta||^2 + sigma^2`` (known here since ``beta`` is) and the estimate
``risk_path_`` that the estimator computes from the training data alone.

As in the seed, ``T`` counts the iterates of the table including the starting
point: ``t = 0, ..., T - 1``, that is ``T - 1`` ISTA steps (``max_iter=T-1``).

The seed's true risk only decreases along its path: there is nothing to
choose. The second part refits the same design with heavier noise
(``stop_sigma``) and a smaller penalty (``stop_alpha``), where the true risk
has a minimum along the path, and marks three choices of the iteration: the
argmin of the estimate ``risk_path_``, the oracle (the argmin of the true
risk, known only because the data are simulated) and 5-fold CV along the
path (:class:`~skacv.TrajectoryEarlyStoppingCV` with ``criterion="kfold"``).
"""

import os
import sys
import textwrap
import threading
import time
import warnings
from numbers import Integral, Real
from pathlib import Path

import numpy as np
from sklearn.model_selection import KFold
from sklearn.utils import Bunch

from ._config import path_memory_bytes
from .estimators._lasso import TrajectoryLasso
from .exceptions import SelectionBoundaryWarning
from .model_selection._selection import TrajectoryEarlyStoppingCV

#: defaults of the quick demo (same ratios p/n, s/n and signal as the seed);
#: ``stop_sigma``, ``stop_alpha``: the noise and penalty of the second part,
#: where the true risk has a minimum along the path
DEMO_DEFAULTS = dict(n=2000, p=3000, s=200, T=50, sigma=1.5, alpha=0.01, seed=2025, m=10,
                     stop_sigma=2.5, stop_alpha=0.001)
#: the seed notebook's own size (``--full``)
SEED_SIZE = dict(n=10000, p=15000, s=1000, T=100, sigma=1.5, alpha=0.01, seed=2025, m=10,
                 stop_sigma=2.5, stop_alpha=0.001)
#: folds of the K-fold choice of the second part
N_FOLDS = 5
#: T x T float64 arrays alive at the peak of the risk estimate and the
#: selection (memory matrices, risk matrix and their products: about 10 were
#: measured at peak for T = 2000 and 4000 with n = 50, p = 40; 12 for margin)
_TT_ARRAYS = 12
#: measured by examples/plot_estimate_accuracy.py (Gaussian design, the
#: early-stopping setting, p = 1.5 n): n -> (seeds, standard deviation over
#: seeds of the estimator's own relative error at the oracle iterate, of the
#: relative probe noise of 10 probes there); see :func:`expected_gap`
_MEASURED_GAP = {200: (30, 0.0985, 0.0521), 400: (24, 0.0946, 0.0264),
                 800: (16, 0.0462, 0.0218), 2000: (8, 0.0203, 0.0071)}
#: seconds after which a stage reports its progress on stderr
PROGRESS_AFTER = 3.0

_NO_MATPLOTLIB = ("matplotlib is not installed; to get the figure, run "
                  "pip install matplotlib (or the plot extra: pip install \".[plot]\" in a "
                  "checkout of skacv) and run the demo again.")

# pandas' default display: above this many rows only the head and the tail
_MAX_ROWS = 60
_HEAD = 5


def seed_data(n, p, s, sigma, seed):
    """The seed notebook's data generator.

    Returns
    -------
    X : ndarray of shape (n, p)
    y : ndarray of shape (n,)
    beta : ndarray of shape (p,)
        ``15 / sqrt(n)`` on the first ``s`` coordinates, zero elsewhere.
    """
    beta = 15 * np.hstack([np.ones(s), np.zeros(p - s)]) / np.sqrt(n)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal(size=(n, p))
    y = X @ beta + sigma * rng.standard_normal(size=(n,))
    return X, y, beta


def _physical_memory():
    """Bytes of physical memory, or ``None`` where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not Linux/macOS
        return None


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
    return _physical_memory()


def _gib(n_bytes):
    return f"{n_bytes / 2**30:,.1f} GiB"


def _figure_formats():
    """File extensions matplotlib can write, or ``None`` without matplotlib."""
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        return None
    return set(FigureCanvasBase.get_supported_filetypes())


def check_output_path(out, name="out"):
    """Check that a figure can be written to ``out``, before any work.

    Parameters
    ----------
    out : str or path-like
        File to write; its directory must exist and be writable, and its
        extension must be a format that matplotlib writes (when installed).
    name : str, default="out"
        How the option is called in the messages (``"--out"`` on the
        command line).

    Returns
    -------
    path : pathlib.Path
        The absolute path of the file.

    Raises
    ------
    ValueError
        With a one-line message that names ``name`` and the fix.
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
    formats = _figure_formats()
    if formats is not None and suffix not in formats:
        raise ValueError(f"{name} {text}: matplotlib cannot write .{suffix} files; use .png "
                         f"(or one of {', '.join(sorted('.' + f for f in formats))}).")
    _try_to_open(path, text, name)
    return path


def _try_to_open(path, text, name):
    """Open ``path`` for writing (appending: an existing file is kept as it
    is) and close it; a file created by the attempt is removed. Catches what
    the permission bits do not say (``/proc``, ``/sys``, read-only mounts,
    root's exceptions)."""
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


def demo_params(n=None, p=None, s=None, T=None, sigma=None, alpha=None, seed=None, m=None,
                full=False, option=None, stop_sigma=None, stop_alpha=None):
    """Resolve and check the parameters of the demo, before any work.

    Parameters default to :data:`DEMO_DEFAULTS` (``full=True``: to the
    seed's own size :data:`SEED_SIZE`); a parameter given explicitly wins.

    Parameters
    ----------
    n, p, s, T, sigma, alpha, seed, m, stop_sigma, stop_alpha : number or None, default=None
        See :func:`run_demo`.
    full : bool, default=False
        Start from :data:`SEED_SIZE` instead of :data:`DEMO_DEFAULTS`.
    option : callable, default=None
        Maps a parameter name to its name in the messages (the command line
        passes ``lambda k: "--" + k``); ``None`` keeps the name.

    Returns
    -------
    params : dict
        ``n``, ``p``, ``s``, ``T``, ``seed``, ``m`` (int) and ``sigma``,
        ``alpha``, ``stop_sigma``, ``stop_alpha`` (float).

    Raises
    ------
    ValueError
        With a one-line message that names the parameter and the fix.
    """
    def opt(k):  # on the command line, stop_sigma is --stop-sigma
        return k if option is None else option(k.replace("_", "-"))

    given = dict(n=n, p=p, s=s, T=T, sigma=sigma, alpha=alpha, seed=seed, m=m,
                 stop_sigma=stop_sigma, stop_alpha=stop_alpha)
    defaults = SEED_SIZE if full else DEMO_DEFAULTS
    params = dict(defaults)
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
            if isinstance(v, Real) and float(v).is_integer():
                params[k] = int(v)
            else:
                raise ValueError(f"{shown(k)} must be a whole number.")
        params[k] = int(params[k])
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
    n, p, T = params["n"], params["p"], params["T"]
    path_bytes = 8 * p * T
    limit = path_memory_bytes()
    if path_bytes > limit:
        raise ValueError(f"{shown('p')} and {shown('T')}: the stored path (p x T floats) "
                         f"would need {_gib(path_bytes)}, above skacv's path memory limit of "
                         f"{_gib(limit)}; lower {opt('T')} or {opt('p')}.")
    need = demo_memory(**params)
    memory = _available_memory()
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
    """Bytes the demo needs at its peak, by kind (a model, not a measure).

    Returns
    -------
    need : Bunch
        ``data``: the design (twice: the folds of the K-fold choice copy
        it), the ``p x T`` / ``n x T`` arrays of the path, its residuals and
        the fold paths; ``chains``: the float32 Jacobian chains of the
        probes (at most ``3 p m T``); ``square``: the ``T x T`` float64
        arrays of the risk estimate; ``total``.
    """
    data = 8 * (2 * n * p + 3 * (n + p) * T) + 4 * N_FOLDS * p * T
    chains = 4 * 3 * p * m * T
    square = 8 * _TT_ARRAYS * T * T
    return Bunch(data=data, chains=chains, square=square, total=data + chains + square)


class _Progress:
    """A stage of the demo that reports on stderr when it lasts.

    After ``after`` seconds (:data:`PROGRESS_AFTER` by default), and then
    every 5 seconds (on a terminal: one line rewritten in place), prints
    ``skacv demo: <stage>... <elapsed> s``; a stage that reported says when
    it is done. Quick stages print nothing.
    """

    def __init__(self, stage, stream=None, after=PROGRESS_AFTER):
        self.stage = stage
        self.stream = stream
        self.after = after
        self._done = threading.Event()
        self._reported = False

    def _write(self, text, end):
        stream = self.stream if self.stream is not None else sys.stderr
        try:
            stream.write(text + end)
            stream.flush()
        except (OSError, ValueError):  # pragma: no cover - stderr closed
            pass

    def _run(self):
        tty = getattr(self.stream if self.stream is not None else sys.stderr, "isatty",
                      lambda: False)()
        wait = self.after
        while not self._done.wait(wait):
            elapsed = time.perf_counter() - self._tic
            self._write(f"skacv demo: {self.stage}... {elapsed:.0f} s", "\r" if tty else "\n")
            self._reported, self._tty, wait = True, tty, 5.0

    def __enter__(self):
        self._tic = time.perf_counter()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self._done.set()
        self._thread.join()
        if self._reported:
            elapsed = time.perf_counter() - self._tic
            end = "done" if exc_type is None else "stopped"
            self._write(f"skacv demo: {self.stage}: {end} after {elapsed:.0f} s", "\n")
        return False


def run_demo(n=None, p=None, s=None, T=None, sigma=None, alpha=None, seed=None, m=None,
             solver="ista", out="skacv_demo.png", full=False, file=None, stop_sigma=None,
             stop_alpha=None, progress=None):
    """Run the seed experiment and the early-stopping one, print their
    tables, save a figure.

    Parameters default to :data:`DEMO_DEFAULTS` (``full=True``: to the seed's
    own size :data:`SEED_SIZE`); a parameter given explicitly wins. Every
    parameter, the memory it needs and the output path (opened for writing)
    are checked before any work starts.

    Parameters
    ----------
    n, p, s : int
        Samples (at least 2), features, nonzero coefficients (at most ``p``).
    T : int
        Iterates in the table, the start included (``T - 1`` steps, ``T >= 2``).
    sigma : float
        Noise level (``>= 0``).
    alpha : float
        Lasso penalty (``lam`` of the seed, ``>= 0``).
    seed : int
        Seed of the data and of the Hutchinson probes.
    m : int
        Hutchinson probes (``n_probes``).
    solver : {"ista", "fista"}, default="ista"
        Proximal gradient method of the path.
    out : str, path-like or None, default="skacv_demo.png"
        Image file of the figure (both parts: truth, estimate and, for the
        second, K-fold CV and the three choices); its format follows the
        extension. ``None``: no figure. Without matplotlib no figure is
        saved and the demo says how to get one.
    full : bool, default=False
        Start from the seed's size instead of the quick defaults.
    file : file-like, default=None
        Where to print (``sys.stdout``).
    stop_sigma, stop_alpha : float
        Noise level and Lasso penalty of the second part (same design and
        coefficients, new noise), where the true risk has a minimum along
        the path.
    progress : file-like, default=None
        Where stages longer than a few seconds report (``sys.stderr``).

    Returns
    -------
    result : Bunch
        ``t``, ``train_mse``, ``true_risk``, ``estimated_risk`` (``None``
        without ``risk_path_``), ``estimator``, ``beta``, ``seconds_data``,
        ``seconds_fit``, ``figure`` (the absolute path written, or ``None``)
        and the parameters used; ``stop``: a Bunch of the second part
        (``true_risk``, ``estimated_risk``, ``kfold_path``, ``estimator``,
        ``search``, ``choices``: iteration of ``"oracle"``, ``"estimate"``
        and ``"kfold"``, ``regret``: true risk at the choice over the
        oracle's minus one, ``seconds``).

    Raises
    ------
    ValueError
        Before any work, for a parameter out of range, a run that would not
        fit in memory or an output path that cannot be written.
    """
    if solver not in ("ista", "fista"):
        raise ValueError(f"solver must be 'ista' or 'fista', got {solver!r}.")
    params = demo_params(n=n, p=p, s=s, T=T, sigma=sigma, alpha=alpha, seed=seed, m=m,
                         full=full, stop_sigma=stop_sigma, stop_alpha=stop_alpha)
    out_path = None if out is None else check_output_path(out)
    n, p, s, T = (params[k] for k in ("n", "p", "s", "T"))
    sigma, alpha, seed, m = (params[k] for k in ("sigma", "alpha", "seed", "m"))

    def say(*args):
        print(*args, file=file, flush=True)

    eta = (1 + np.sqrt(p / n)) ** -2
    say(f"skacv demo: {solver.upper()} on the seed notebook's model (Bellec & Tan 2024)")
    say(f"  n={n} p={p} s={s} T={T} (t = 0..{T - 1}) sigma={sigma:g} alpha={alpha:g} "
        f"step=(1+sqrt(p/n))^-2={eta:.4g} probes m={m} seed={seed}")
    has_matplotlib = _figure_formats() is not None
    if out_path is not None and not has_matplotlib:
        say(f"  no figure: {_NO_MATPLOTLIB}")
    tic = time.perf_counter()
    with _Progress("simulating the data", progress):
        X, y, beta = seed_data(n, p, s, sigma, seed)
    seconds_data = time.perf_counter() - tic

    est = TrajectoryLasso(alpha, solver=solver, fit_intercept=False, step_size=eta,
                          max_iter=T - 1, n_probes=m, random_state=seed)
    tic = time.perf_counter()
    with _Progress(f"fitting {T - 1} {solver.upper()} steps and the risk estimate", progress):
        est.fit(X, y)
    seconds_fit = time.perf_counter() - tic

    residuals = y[:, None] - X @ est.coef_path_
    train_mse = np.einsum("it,it->t", residuals, residuals) / n
    true_risk = _true_risk(est.coef_path_, beta, sigma)
    estimated = getattr(est, "risk_path_", None)
    t = np.arange(T)

    columns = [("t", t), ("train MSE", train_mse), ("true risk", true_risk)]
    if estimated is not None:
        columns.append(("estimated risk", estimated))
    say()
    say(_format_table(columns))
    say()
    what = "fit + risk estimate" if estimated is not None else "fit"
    say(f"time: data {seconds_data:.2f} s, {what} {seconds_fit:.2f} s "
        f"({T - 1} steps, {1e3 * seconds_fit / (T - 1):.1f} ms per step)")
    say(f"support of the last iterate: {np.count_nonzero(est.coef_)} of {p} "
        f"(true support {s})")
    if estimated is not None:
        rel = np.abs(estimated - true_risk) / true_risk
        say(f"estimate vs truth: max relative error {rel.max():.3f}, "
            f"mean {rel.mean():.3f}")
    stop = _early_stopping(X, beta, params, solver, eta, say, progress)
    figure = None
    if out_path is not None:
        if has_matplotlib:
            with _Progress("drawing the figure", progress):
                figure = _save_figure(out_path, t, train_mse, true_risk, estimated, params,
                                      solver, stop)
            say(f"figure saved to {figure}")
        else:
            say(f"no figure saved: {_NO_MATPLOTLIB}")
    return Bunch(t=t, train_mse=train_mse, true_risk=true_risk, estimated_risk=estimated,
                 estimator=est, beta=beta, seconds_data=seconds_data,
                 seconds_fit=seconds_fit, figure=figure, solver=solver, stop=stop, **params)


def _true_risk(coef_path, beta, sigma):
    """``||b_t - beta||^2 + sigma^2`` of every column (identity covariance)."""
    err = coef_path - beta[:, None]
    return np.einsum("jt,jt->t", err, err) + sigma**2


def _gap_model(n, m):
    """``(n measured, seeds, own sd, probe sd, total sd)`` of :func:`expected_gap`."""
    near = min(_MEASURED_GAP, key=lambda k: abs(np.log(k / n)))
    seeds, own, probe = _MEASURED_GAP[near]
    scale = np.sqrt(near / n)
    own, probe = own * scale, probe * scale * np.sqrt(10 / m)
    return near, seeds, own, probe, float(np.hypot(own, probe))


def expected_gap(n, m):
    """The caption: the gap between estimate and truth expected at ``n``.

    The estimator's own error is a finite-sample error of order ``n^-1/2``
    (at ``t = 0`` the estimate is ``||y||^2 / n``, of relative standard
    deviation ``sqrt(2 / n)`` for Gaussian data); the probe noise adds to it.
    Both were measured over simulated data sets by
    ``examples/plot_estimate_accuracy.py`` (:data:`_MEASURED_GAP`, quoted in
    the user guide, "What the estimate is worth"); at another ``n`` the
    nearest measured size is scaled by ``sqrt(n_measured / n)``, and the
    probe noise by ``sqrt(10 / m)``.

    Parameters
    ----------
    n : int
        Samples.
    m : int
        Hutchinson probes.

    Returns
    -------
    caption : str
    """
    near, seeds, own, probe, total = _gap_model(n, m)
    where = f"measured over {seeds} seeds at n={near}"
    if near != n:
        where += f", scaled by sqrt({near}/n)"
    return (f"expected gap at n={n}: estimate / truth - 1 has a standard deviation of about "
            f"{100 * total:.1f} % ({100 * own:.1f} % the estimator's own finite-sample error, "
            f"of order n^-1/2; {100 * probe:.1f} % the noise of m={m} probes; {where}, "
            "see the user guide)")


def _early_stopping(X, beta, params, solver, eta, say, progress):
    """The second part: heavier noise and a smaller penalty on the same
    design, where the true risk has a minimum; the three choices."""
    n, T, m, seed = params["n"], params["T"], params["m"], params["seed"]
    sigma, alpha = params["stop_sigma"], params["stop_alpha"]
    y = X @ beta + sigma * np.random.default_rng(seed + 1).standard_normal(n)
    lasso = dict(alpha=alpha, solver=solver, fit_intercept=False, step_size=eta,
                 max_iter=T - 1, n_probes=m, random_state=seed)
    say()
    say(f"early stopping: the same design and coefficients, noise sigma={sigma:g}, "
        f"alpha={alpha:g}")
    tic = time.perf_counter()
    with _Progress("early stopping: fitting the path and the risk estimate", progress):
        est = TrajectoryLasso(**lasso).fit(X, y)
    n_folds = min(N_FOLDS, n)
    with _Progress(f"early stopping: {n_folds}-fold CV along the path", progress), \
            warnings.catch_warnings():
        # a choice at the last iterate is said in the table below
        warnings.simplefilter("ignore", SelectionBoundaryWarning)
        search = TrajectoryEarlyStoppingCV(
            TrajectoryLasso(**{**lasso, "estimate_risk": False}), criterion="kfold",
            cv=KFold(n_folds, shuffle=True, random_state=seed), n_iter_no_change=None,
            search="grid", random_state=seed).fit(X, y)
    seconds = time.perf_counter() - tic
    true_risk = _true_risk(est.coef_path_, beta, sigma)
    estimated, kfold = est.risk_path_, search.kfold_path_
    choices = {"oracle": int(np.argmin(true_risk)), "estimate": int(np.argmin(estimated)),
               "kfold": int(search.best_iteration_)}
    best = true_risk[choices["oracle"]]
    regret = {k: float(true_risk[t] / best - 1) for k, t in choices.items()}
    t = np.arange(T)
    say()
    say(_format_table([("t", t), ("true risk", true_risk), ("estimated risk", estimated),
                       (f"{n_folds}-fold CV", kfold)]))
    say()
    names = {"oracle": "oracle (argmin of the true risk)",
             "estimate": "estimate (argmin of risk_path_)",
             "kfold": f"{n_folds}-fold CV along the path"}
    width = max(len(v) for v in names.values())
    say(f"{'choice'.ljust(width)}  iteration  true risk  regret")
    for key, name in names.items():
        shown = "-" if key == "oracle" else f"{100 * regret[key]:+.2f} %"
        say(f"{name.ljust(width)}  {choices[key]:>9d}  {true_risk[choices[key]]:>9.2f}  "
            f"{shown:>7}")
    last = [name for key, name in names.items() if choices[key] == T - 1]
    if last:
        say(f"at the last iterate: {', '.join(last)}; the minimum may lie beyond it "
            "(raise T)")
    o = choices["oracle"]
    gap = estimated[o] / true_risk[o] - 1
    start = estimated[0] / true_risk[0] - 1
    sd = _gap_model(n, m)[-1]
    this_run = (f"this run: estimate / truth - 1 at the oracle iterate {100 * gap:+.1f} % "
                f"({gap / sd:+.1f} standard deviations; at t = 0, where the estimate is "
                f"||y||^2/n, {100 * start:+.1f} %)")
    say(f"{this_run}; time {seconds:.2f} s (path and estimate, then K-fold)")
    caption = expected_gap(n, m)
    say(caption + ".")
    return Bunch(t=t, true_risk=true_risk, estimated_risk=estimated, kfold_path=kfold,
                 estimator=est, search=search, choices=choices, regret=regret,
                 n_folds=n_folds, caption=caption, this_run=this_run, seconds=seconds,
                 sigma=sigma,
                 alpha=alpha)


def _format_table(columns):
    """Right-aligned table of ``(name, values)`` columns, pandas-like: values
    rounded to 2 decimals, only the first and last 5 rows above 60 rows."""
    names = [name for name, _ in columns]
    n_rows = len(columns[0][1])
    cells = [[str(int(v)) if name == "t" else f"{v:.2f}" for v in values]
             for name, values in columns]
    rows = list(range(n_rows))
    if n_rows > _MAX_ROWS:
        rows = rows[:_HEAD] + [None] + rows[-_HEAD:]
    widths = [max(len(name), *(len(c) for c in col))
              for name, col in zip(names, cells, strict=True)]
    lines = ["  ".join(name.rjust(w) for name, w in zip(names, widths, strict=True))]
    for r in rows:
        if r is None:
            lines.append("  ".join("...".rjust(w) for w in widths))
        else:
            lines.append("  ".join(col[r].rjust(w) for col, w in zip(cells, widths, strict=True)))
    if n_rows > _MAX_ROWS:
        lines.append("")
        lines.append(f"{n_rows} rows x {len(columns) - 1} columns")
    return "\n".join(lines)


def _save_figure(out, t, train_mse, true_risk, estimated, params, solver, stop):
    """Draw the figure (:func:`draw_figure`) and save it; return the path."""
    fig = draw_figure(t, train_mse, true_risk, estimated, params, solver, stop)
    fig.savefig(out, dpi=120)
    return str(out)


def draw_figure(t, train_mse, true_risk, estimated, params, solver, stop):
    """The demo's figure: both parts side by side.

    Left, the seed experiment: true risk, estimate and training error.
    Right, the early-stopping part: true risk, estimate and K-fold CV along
    the path, and the three choices, each a marker on the true risk at the
    chosen iteration (``gid`` ``"choice_oracle"``, ``"choice_estimate"``,
    ``"choice_kfold"``) and a vertical line; the caption
    (:func:`expected_gap`) below.

    Returns
    -------
    fig : matplotlib Figure
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.6), layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    ax.plot(t, true_risk, color="black", label=r"true risk $\|b_t-\beta\|^2+\sigma^2$")
    if estimated is not None:
        ax.plot(t, estimated, color="C3", linestyle="--", label="estimate (risk_path_)")
    ax.plot(t, train_mse, color="C0", linestyle=":", label="training MSE")
    ax.set_xlabel("iteration t")
    ax.set_ylabel("squared error")
    ax.set_title(f"the seed: sigma={params['sigma']:g}, alpha={params['alpha']:g}\n"
                 "the risk only decreases: nothing to choose", fontsize=10)
    ax.legend(fontsize=8)

    ax2.plot(stop.t, stop.true_risk, color="black", label="true risk")
    ax2.plot(stop.t, stop.estimated_risk, color="C3", linestyle="--",
             label="estimate (risk_path_)")
    ax2.plot(stop.t, stop.kfold_path, color="C2", linestyle="-.",
             label=f"{stop.n_folds}-fold CV along the path")
    marks = {"oracle": ("oracle", "black", "*", 14),
             "estimate": ("estimate's choice", "C3", "o", 9),
             "kfold": (f"{stop.n_folds}-fold's choice", "C2", "s", 8)}
    for key, (name, color, marker, size) in marks.items():
        it = stop.choices[key]
        extra = "" if key == "oracle" else f", regret {100 * stop.regret[key]:+.2f} %"
        ax2.axvline(it, color=color, linewidth=0.8, alpha=0.5)
        ax2.plot([it], [stop.true_risk[it]], marker=marker, markersize=size, color=color,
                 linestyle="none", markerfacecolor="none" if key != "oracle" else color,
                 markeredgewidth=1.5, gid=f"choice_{key}",
                 label=f"{name}: t={it} (true risk {stop.true_risk[it]:.2f}{extra})")
    ax2.set_xlabel("iteration t")
    ax2.set_ylabel("squared error")
    ax2.set_title(f"early stopping: sigma={stop.sigma:g}, alpha={stop.alpha:g}\n"
                  "markers on the true risk at each choice", fontsize=10)
    ax2.legend(fontsize=7)
    fig.suptitle(f"{solver.upper()} Lasso, n={params['n']}, p={params['p']}, s={params['s']}, "
                 f"m={params['m']} probes (Bellec & Tan 2024 estimate)")
    fig.supxlabel("\n".join(textwrap.wrap(stop.caption, 150) + [stop.this_run]), fontsize=8)
    return fig
