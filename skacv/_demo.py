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

import time

import numpy as np
from sklearn.utils import Bunch

from ._lasso import TrajectoryLasso

#: defaults of the quick demo (same ratios p/n, s/n and signal as the seed)
DEMO_DEFAULTS = dict(n=2000, p=3000, s=200, T=50, sigma=1.5, alpha=0.01, seed=2025, m=10)
#: the seed notebook's own size (``--full``)
SEED_SIZE = dict(n=10000, p=15000, s=1000, T=100, sigma=1.5, alpha=0.01, seed=2025, m=10)

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


def run_demo(n=None, p=None, s=None, T=None, sigma=None, alpha=None, seed=None, m=None,
             solver="ista", out="skacv_demo.png", full=False, file=None):
    """Run the seed experiment, print the per-iteration table, save a figure.

    Parameters default to :data:`DEMO_DEFAULTS` (``full=True``: to the seed's
    own size :data:`SEED_SIZE`); a parameter given explicitly wins.

    Parameters
    ----------
    n, p, s : int
        Samples, features, nonzero coefficients.
    T : int
        Iterates in the table, the start included (``T - 1`` steps).
    sigma : float
        Noise level.
    alpha : float
        Lasso penalty (``lam`` of the seed).
    seed : int
        Seed of the data and of the Hutchinson probes.
    m : int
        Hutchinson probes (``n_probes``).
    solver : {"ista", "fista"}, default="ista"
    out : str or None, default="skacv_demo.png"
        PNG path of the figure (truth and estimate against the iteration);
        ``None``: no figure.
    full : bool, default=False
        Start from the seed's size instead of the quick defaults.
    file : file-like, default=None
        Where to print (``sys.stdout``).

    Returns
    -------
    result : Bunch
        ``t``, ``train_mse``, ``true_risk``, ``estimated_risk`` (``None``
        without ``risk_path_``), ``estimator``, ``beta``, ``seconds_data``,
        ``seconds_fit``, ``figure`` (the path written or ``None``) and the
        parameters used.
    """
    given = dict(n=n, p=p, s=s, T=T, sigma=sigma, alpha=alpha, seed=seed, m=m)
    params = dict(SEED_SIZE if full else DEMO_DEFAULTS)
    params.update({k: v for k, v in given.items() if v is not None})
    n, p, s, T = (int(params[k]) for k in ("n", "p", "s", "T"))
    sigma, alpha, seed, m = (float(params["sigma"]), float(params["alpha"]),
                             int(params["seed"]), int(params["m"]))
    if not (n >= 1 and p >= 1 and 0 <= s <= p and T >= 2 and m >= 1):
        raise ValueError(f"need n, p, m >= 1, 0 <= s <= p and T >= 2; got {params}.")

    def say(*args):
        print(*args, file=file, flush=True)

    eta = (1 + np.sqrt(p / n)) ** -2
    say(f"skacv demo: {solver.upper()} on the seed notebook's model (Bellec & Tan 2024)")
    say(f"  n={n} p={p} s={s} T={T} (t = 0..{T - 1}) sigma={sigma:g} alpha={alpha:g} "
        f"step=(1+sqrt(p/n))^-2={eta:.4g} probes m={m} seed={seed}")
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
    figure = _save_figure(out, t, train_mse, true_risk, estimated, params, solver, say)
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


def _save_figure(out, t, train_mse, true_risk, estimated, params, solver, say):
    if not out:
        return None
    try:
        from matplotlib.figure import Figure
    except ImportError:
        say("matplotlib is not installed: no figure saved "
            "(pip install 'skacv[plot]' to get one).")
        return None
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
    say(f"figure saved to {out}")
    return str(out)
