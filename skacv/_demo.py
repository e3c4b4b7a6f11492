"""The demo of ``python -m skacv demo``: the seed notebook's ISTA experiment.

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
"""

import os
import time
from numbers import Integral, Real
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

from ._config import path_memory_bytes
from .estimators._lasso import TrajectoryLasso

#: defaults of the quick demo (same ratios p/n, s/n and signal as the seed)
DEMO_DEFAULTS = dict(n=2000, p=3000, s=200, T=50, sigma=1.5, alpha=0.01, seed=2025, m=10)
#: the seed notebook's own size (``--full``)
SEED_SIZE = dict(n=10000, p=15000, s=1000, T=100, sigma=1.5, alpha=0.01, seed=2025, m=10)

_NO_MATPLOTLIB = ("matplotlib is not installed; to get the figure, run "
                  "pip install matplotlib (or the plot extra: pip install \"skacv[plot]\", "
                  "or \".[plot]\" in a source checkout) and run the demo again.")

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
    return path


def demo_params(n=None, p=None, s=None, T=None, sigma=None, alpha=None, seed=None, m=None,
                full=False, option=None):
    """Resolve and check the parameters of the demo, before any work.

    Parameters default to :data:`DEMO_DEFAULTS` (``full=True``: to the
    seed's own size :data:`SEED_SIZE`); a parameter given explicitly wins.

    Parameters
    ----------
    n, p, s, T, sigma, alpha, seed, m : number or None, default=None
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
        ``alpha`` (float).

    Raises
    ------
    ValueError
        With a one-line message that names the parameter and the fix.
    """
    opt = option or (lambda k: k)
    given = dict(n=n, p=p, s=s, T=T, sigma=sigma, alpha=alpha, seed=seed, m=m)
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
    for k in ("sigma", "alpha"):
        v = params[k]
        if isinstance(v, bool) or not isinstance(v, Real) or not np.isfinite(v):
            raise ValueError(f"{shown(k)} must be a finite number.")
        params[k] = float(v)
    lower = {"n": (2, "the number of samples"), "p": (1, "the number of features"),
             "T": (2, "the iterates t = 0..T-1: the start and at least one step"),
             "m": (1, "the number of probes"), "s": (0, "the number of nonzero coefficients"),
             "seed": (0, "a random seed"), "sigma": (0, "the noise level"),
             "alpha": (0, "the Lasso penalty")}
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
    # X, the p x T / n x T arrays of the path, its residuals and the risk
    # estimate, and the float32 Jacobian chains of the probes (at most 3 p m T)
    data = 8 * (n * p + 3 * (n + p) * T)
    chains = 4 * 3 * p * params["m"] * T
    memory = _physical_memory()
    if memory is not None and data + chains > memory:
        if chains > data:
            what, fix = f"{shown('m')} probes over {shown('T')} iterates", f"{opt('m')}"
        else:
            what, fix = f"{shown('n')} and {shown('p')}", f"{opt('n')} or {opt('p')}"
        raise ValueError(f"{what}: the demo needs about {_gib(data + chains)} of memory, "
                         f"more than the {_gib(memory)} of this machine; lower {fix}.")
    return params


def run_demo(n=None, p=None, s=None, T=None, sigma=None, alpha=None, seed=None, m=None,
             solver="ista", out="skacv_demo.png", full=False, file=None):
    """Run the seed experiment, print the per-iteration table, save a figure.

    Parameters default to :data:`DEMO_DEFAULTS` (``full=True``: to the seed's
    own size :data:`SEED_SIZE`); a parameter given explicitly wins. Every
    parameter, and the output path, is checked before any work starts.

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
        Image file of the figure (truth and estimate against the
        iteration); its format follows the extension. ``None``: no figure.
        Without matplotlib no figure is saved and the demo says how to get
        one.
    full : bool, default=False
        Start from the seed's size instead of the quick defaults.
    file : file-like, default=None
        Where to print (``sys.stdout``).

    Returns
    -------
    result : Bunch
        ``t``, ``train_mse``, ``true_risk``, ``estimated_risk`` (``None``
        without ``risk_path_``), ``estimator``, ``beta``, ``seconds_data``,
        ``seconds_fit``, ``figure`` (the absolute path written, or ``None``)
        and the parameters used.

    Raises
    ------
    ValueError
        Before any work, for a parameter out of range or an output path that
        cannot be written.
    """
    if solver not in ("ista", "fista"):
        raise ValueError(f"solver must be 'ista' or 'fista', got {solver!r}.")
    params = demo_params(n=n, p=p, s=s, T=T, sigma=sigma, alpha=alpha, seed=seed, m=m,
                         full=full)
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
    X, y, beta = seed_data(n, p, s, sigma, seed)
    seconds_data = time.perf_counter() - tic

    est = TrajectoryLasso(alpha, solver=solver, fit_intercept=False, step_size=eta,
                          max_iter=T - 1, n_probes=m, random_state=seed)
    tic = time.perf_counter()
    est.fit(X, y)
    seconds_fit = time.perf_counter() - tic

    residuals = y[:, None] - X @ est.coef_path_
    train_mse = np.einsum("it,it->t", residuals, residuals) / n
    err = est.coef_path_ - beta[:, None]
    true_risk = np.einsum("jt,jt->t", err, err) + sigma**2
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
    figure = None
    if out_path is not None:
        if has_matplotlib:
            figure = _save_figure(out_path, t, train_mse, true_risk, estimated, params,
                                  solver)
            say(f"figure saved to {figure}")
        else:
            say(f"no figure saved: {_NO_MATPLOTLIB}")
    return Bunch(t=t, train_mse=train_mse, true_risk=true_risk, estimated_risk=estimated,
                 estimator=est, beta=beta, seconds_data=seconds_data,
                 seconds_fit=seconds_fit, figure=figure, solver=solver, **params)


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


def _save_figure(out, t, train_mse, true_risk, estimated, params, solver):
    """Draw the truth, the estimate and the training error; return the path."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(t, true_risk, color="black", label=r"true risk $\|b_t-\beta\|^2+\sigma^2$")
    if estimated is not None:
        ax.plot(t, estimated, color="C3", linestyle="--", label="estimate (risk_path_)")
    ax.plot(t, train_mse, color="C0", linestyle=":", label="training MSE")
    ax.set_xlabel("iteration t")
    ax.set_ylabel("squared error")
    ax.set_title(f"{solver.upper()}, n={params['n']}, p={params['p']}, s={params['s']}, "
                 f"alpha={params['alpha']:g}")
    ax.legend()
    fig.savefig(out, dpi=120)
    return str(out)
