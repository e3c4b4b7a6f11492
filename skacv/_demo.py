"""The demo of ``python -m skacv demo``: the seed notebook's ISTA experiment
(the worked example of Bellec & Tan 2024; :func:`seed_data`), then early
stopping on the same design with heavier noise and a smaller penalty, where
the true risk has a minimum along the path: the iterations chosen by the
estimate ``risk_path_``, by the oracle (the data are simulated) and by
5-fold CV along the path (:class:`~skacv.TrajectoryEarlyStoppingCV`,
``criterion="kfold"``). As in the seed, ``T`` counts the iterates of the
table including the start (``T - 1`` steps).
"""

import sys
import textwrap
import threading
import time
import warnings

import numpy as np
from sklearn.model_selection import KFold
from sklearn.utils import Bunch

from ._demo_checks import N_FOLDS, check_output_path, demo_params, figure_formats
from .estimators._lasso import TrajectoryLasso
from .exceptions import SelectionBoundaryWarning
from .model_selection._selection import TrajectoryEarlyStoppingCV

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
    """The seed notebook's data generator: ``X`` of shape (n, p), standard
    normal; ``beta`` of shape (p,), ``15 / sqrt(n)`` on the first ``s``
    coordinates, zero elsewhere; ``y = X beta + sigma * noise``, shape (n,)."""
    beta = 15 * np.hstack([np.ones(s), np.zeros(p - s)]) / np.sqrt(n)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal(size=(n, p))
    y = X @ beta + sigma * rng.standard_normal(size=(n,))
    return X, y, beta


class _Progress:
    """A stage of the demo that reports on stderr when it lasts.

    After ``after`` seconds (:data:`PROGRESS_AFTER` by default), and then
    every 5 seconds (on a terminal: one line rewritten in place), prints
    ``skacv demo: <stage>... <elapsed> s``; a stage that reported says when
    it is done. Quick stages print nothing. ``seconds``: how long it lasted.
    """

    def __init__(self, stage, stream=None, after=PROGRESS_AFTER):
        self.stage = stage
        self.stream = stream if stream is not None else sys.stderr
        self.after = after
        self._done = threading.Event()
        self._reported = False

    def _write(self, text, end):
        try:
            self.stream.write(text + end)
            self.stream.flush()
        except (OSError, ValueError):  # pragma: no cover - stderr closed
            pass

    def _run(self):
        tty = getattr(self.stream, "isatty", lambda: False)()
        wait = self.after
        while not self._done.wait(wait):
            elapsed = time.perf_counter() - self._tic
            self._write(f"skacv demo: {self.stage}... {elapsed:.0f} s", "\r" if tty else "\n")
            self._reported, wait = True, 5.0

    def __enter__(self):
        self._tic = time.perf_counter()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self._done.set()
        self._thread.join()
        self.seconds = time.perf_counter() - self._tic
        if self._reported:
            end = "done" if exc_type is None else "stopped"
            self._write(f"skacv demo: {self.stage}: {end} after {self.seconds:.0f} s", "\n")
        return False


def run_demo(n=None, p=None, s=None, T=None, sigma=None, alpha=None, seed=None, m=None,
             solver="ista", out="skacv_demo.png", full=False, file=None, stop_sigma=None,
             stop_alpha=None, progress=None):
    """Run the seed experiment and the early-stopping one, print their
    tables, save a figure.

    The parameters are resolved and checked, with the memory they need and
    the output path, before any work (:mod:`skacv._demo_checks`).

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
        ``t``, ``train_mse``, ``true_risk``, ``estimated_risk``,
        ``estimator``, ``beta``, ``seconds_data``, ``seconds_fit``,
        ``figure`` (the absolute path written, or ``None``)
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
    has_matplotlib = figure_formats() is not None
    if out_path is not None and not has_matplotlib:
        say(f"  no figure: {_NO_MATPLOTLIB}")
    with _Progress("simulating the data", progress) as stage:
        X, y, beta = seed_data(n, p, s, sigma, seed)
    seconds_data = stage.seconds

    lasso = dict(solver=solver, fit_intercept=False, step_size=eta, max_iter=T - 1,
                 n_probes=m, random_state=seed)
    est = TrajectoryLasso(alpha, **lasso)
    with _Progress(f"fitting {T - 1} {solver.upper()} steps and the risk estimate",
                   progress) as stage:
        est.fit(X, y)
    seconds_fit = stage.seconds

    residuals = y[:, None] - X @ est.coef_path_
    train_mse = np.einsum("it,it->t", residuals, residuals) / n
    true_risk = _true_risk(est.coef_path_, beta, sigma)
    estimated = est.risk_path_
    t = np.arange(T)

    say()
    say(_format_table([("t", t), ("train MSE", train_mse), ("true risk", true_risk),
                       ("estimated risk", estimated)]))
    say()
    say(f"time: data {seconds_data:.2f} s, fit + risk estimate {seconds_fit:.2f} s "
        f"({T - 1} steps, {1e3 * seconds_fit / (T - 1):.1f} ms per step)")
    say(f"support of the last iterate: {np.count_nonzero(est.coef_)} of {p} "
        f"(true support {s})")
    rel = np.abs(estimated - true_risk) / true_risk
    say(f"estimate vs truth: max relative error {rel.max():.3f}, mean {rel.mean():.3f}")
    stop = _early_stopping(X, beta, params, lasso, say, progress)
    figure = None
    if out_path is not None:
        if has_matplotlib:
            with _Progress("drawing the figure", progress):
                draw_figure(t, train_mse, true_risk, estimated, params, solver,
                            stop).savefig(out_path, dpi=120)
            figure = str(out_path)
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
    """The caption: the gap between estimate and truth expected at ``n``
    samples with ``m`` probes.

    The estimator's own error is a finite-sample error of order ``n^-1/2``
    (at ``t = 0`` the estimate is ``||y||^2 / n``, of relative standard
    deviation ``sqrt(2 / n)`` for Gaussian data); the probe noise adds to it.
    Both are measured (:data:`_MEASURED_GAP`, quoted in the user guide, "What
    the estimate is worth"); at another ``n`` the nearest measured size is
    scaled by ``sqrt(n_measured / n)``, and the probe noise by ``sqrt(10 / m)``.
    """
    near, seeds, own, probe, total = _gap_model(n, m)
    where = f"measured over {seeds} seeds at n={near}"
    if near != n:
        where += f", scaled by sqrt({near}/n)"
    return (f"expected gap at n={n}: estimate / truth - 1 has a standard deviation of about "
            f"{100 * total:.1f} % ({100 * own:.1f} % the estimator's own finite-sample error, "
            f"of order n^-1/2; {100 * probe:.1f} % the noise of m={m} probes; {where}, "
            "see the user guide)")


def _early_stopping(X, beta, params, lasso, say, progress):
    """The second part: heavier noise and a smaller penalty on the same
    design, where the true risk has a minimum; the three choices.
    ``lasso``: the first part's ``TrajectoryLasso`` parameters but ``alpha``."""
    n, T, m, seed = params["n"], params["T"], params["m"], params["seed"]
    sigma, alpha = params["stop_sigma"], params["stop_alpha"]
    y = X @ beta + sigma * np.random.default_rng(seed + 1).standard_normal(n)
    lasso = dict(lasso, alpha=alpha)
    say()
    say(f"early stopping: the same design and coefficients, noise sigma={sigma:g}, "
        f"alpha={alpha:g}")
    with _Progress("early stopping: fitting the path and the risk estimate", progress) as fit:
        est = TrajectoryLasso(**lasso).fit(X, y)
    n_folds = min(N_FOLDS, n)
    with _Progress(f"early stopping: {n_folds}-fold CV along the path", progress) as cv, \
            warnings.catch_warnings():
        # a choice at the last iterate is said in the table below
        warnings.simplefilter("ignore", SelectionBoundaryWarning)
        search = TrajectoryEarlyStoppingCV(
            TrajectoryLasso(**{**lasso, "estimate_risk": False}), criterion="kfold",
            cv=KFold(n_folds, shuffle=True, random_state=seed), n_iter_no_change=None,
            search="grid", random_state=seed).fit(X, y)
    seconds = fit.seconds + cv.seconds
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
                 sigma=sigma, alpha=alpha)


def _format_table(columns):
    """Right-aligned table of ``(name, values)`` columns, pandas-like: values
    rounded to 2 decimals, only the first and last 5 rows above 60 rows."""
    names = [name for name, _ in columns]
    n_rows = len(columns[0][1])
    cells = [[str(int(v)) if name == "t" else f"{v:.2f}" for v in values]
             for name, values in columns]
    widths = [max(len(name), *(len(c) for c in col))
              for name, col in zip(names, cells, strict=True)]
    rows = [[col[r] for col in cells] for r in range(n_rows)]
    if n_rows > _MAX_ROWS:
        rows = rows[:_HEAD] + [["..."] * len(cells)] + rows[-_HEAD:]
    lines = ["  ".join(text.rjust(w) for text, w in zip(row, widths, strict=True))
             for row in [names, *rows]]
    if n_rows > _MAX_ROWS:
        lines += ["", f"{n_rows} rows x {len(columns) - 1} columns"]
    return "\n".join(lines)


def draw_figure(t, train_mse, true_risk, estimated, params, solver, stop):
    """The demo's figure: both parts side by side.

    Left, the seed experiment: true risk, estimate and training error.
    Right, the early-stopping part: true risk, estimate and K-fold CV along
    the path, and the three choices, each a marker on the true risk at the
    chosen iteration (``gid`` ``"choice_oracle"``, ``"choice_estimate"``,
    ``"choice_kfold"``) and a vertical line; the caption
    (:func:`expected_gap`) below. Returns a matplotlib ``Figure``.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.6), layout="constrained")
    ax, ax2 = fig.subplots(1, 2)
    ax.plot(t, true_risk, color="black", label=r"true risk $\|b_t-\beta\|^2+\sigma^2$")
    ax.plot(t, estimated, color="C3", linestyle="--", label="estimate (risk_path_)")
    ax.plot(t, train_mse, color="C0", linestyle=":", label="training MSE")
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
    for axes in (ax, ax2):
        axes.set_xlabel("iteration t")
        axes.set_ylabel("squared error")
    ax2.set_title(f"early stopping: sigma={stop.sigma:g}, alpha={stop.alpha:g}\n"
                  "markers on the true risk at each choice", fontsize=10)
    ax2.legend(fontsize=7)
    fig.suptitle(f"{solver.upper()} Lasso, n={params['n']}, p={params['p']}, s={params['s']}, "
                 f"m={params['m']} probes (Bellec & Tan 2024 estimate)")
    fig.supxlabel("\n".join(textwrap.wrap(stop.caption, 150) + [stop.this_run]), fontsize=8)
    return fig
