"""``python -m skacv demo``: the seed experiment at a small size."""

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose

import skacv._demo as demo_module
from skacv._demo import _format_table, draw_figure, expected_gap, run_demo, seed_data
from skacv._demo_checks import (
    DEMO_DEFAULTS,
    SEED_SIZE,
    check_output_path,
    demo_memory,
    demo_params,
)


def _seed_ista(X, y, lam, T, eta=None):
    """The seed notebook's loop (T columns: the start and T - 1 steps)."""
    n, p = X.shape
    if eta is None:
        eta = (1 + np.sqrt(p / n)) ** -2
    b = np.zeros(p)
    out = [b]
    for _ in range(1, T):
        u = b + eta * X.T @ (y - X @ b) / n
        b = np.sign(u) * np.clip(np.abs(u) - lam * eta, 0, None)
        out.append(b)
    return np.array(out).T


def test_seed_data_is_the_seed_generator():
    X, y, beta = seed_data(50, 80, 7, 1.5, 2025)
    rng = np.random.default_rng(2025)
    X_ref = rng.standard_normal(size=(50, 80))
    eps = rng.standard_normal(size=(50,))
    assert_allclose(X, X_ref)
    assert np.count_nonzero(beta) == 7
    assert_allclose(beta[:7], 15 / np.sqrt(50))
    assert_allclose(y, X_ref @ beta + 1.5 * eps)


def test_run_demo_table_is_the_seed_experiment(tmp_path):
    n, p, s, T, sigma, lam = 150, 200, 15, 12, 1.5, 0.01
    buf = io.StringIO()
    res = run_demo(n=n, p=p, s=s, T=T, m=5, out=str(tmp_path / "demo.png"), file=buf)
    X, y, beta = seed_data(n, p, s, sigma, 2025)
    path = _seed_ista(X, y, lam, T)
    assert_allclose(res.estimator.coef_path_, path, rtol=0, atol=1e-10)
    assert_allclose(res.true_risk, ((path - beta[:, None]) ** 2).sum(0) + sigma**2,
                    rtol=1e-10)
    assert_allclose(res.train_mse, ((y[:, None] - X @ path) ** 2).mean(0), rtol=1e-10)
    assert_allclose(res.true_risk[0], 15**2 * s / n + sigma**2)
    assert res.estimated_risk is res.estimator.risk_path_
    assert res.estimated_risk.shape == (T,)
    assert_allclose(res.t, np.arange(T))
    text = buf.getvalue()
    header = next(line for line in text.splitlines() if "true risk" in line)
    assert header.split() == ["t", "train", "MSE", "true", "risk", "estimated", "risk"]
    # every row printed (T <= 60), values rounded to 2 decimals
    last = next(line for line in text.splitlines() if line.split()[:1] == [str(T - 1)])
    assert last.split()[1:] == [f"{v:.2f}" for v in (res.train_mse[-1], res.true_risk[-1],
                                                      res.estimated_risk[-1])]
    assert "per step" in text
    if res.figure is not None:  # matplotlib installed
        assert res.figure == str(tmp_path / "demo.png")
        assert (tmp_path / "demo.png").stat().st_size > 1000
        assert text.splitlines()[-1] == f"figure saved to {tmp_path / 'demo.png'}"


def test_run_demo_explicit_options_win_over_full():
    res = run_demo(n=60, p=40, s=4, T=3, m=2, full=True, out=None, solver="fista",
                   file=io.StringIO())
    assert (res.n, res.p, res.s, res.T, res.m) == (60, 40, 4, 3, 2)
    assert res.estimator.solver == "fista" and res.figure is None
    with pytest.raises(ValueError, match="T must be at least 2"):
        run_demo(n=60, p=40, s=4, T=1, out=None, file=io.StringIO())


def test_table_layout_like_the_seed():
    """Above 60 rows, the head and the tail of 5 rows (pandas' display)."""
    t = np.arange(100)
    text = _format_table([("t", t), ("true risk", t / 3.0)])
    lines = text.splitlines()
    assert [ln.split()[0] for ln in lines[1:12]] == ["0", "1", "2", "3", "4", "...",
                                                      "95", "96", "97", "98", "99"]
    assert lines[1].split() == ["0", "0.00"] and lines[-3].split() == ["99", "33.00"]
    assert lines[-1] == "100 rows x 1 columns"
    assert len(_format_table([("t", t[:60])]).splitlines()) == 61


def test_command_line_help_and_tiny_run(tmp_path):
    run = subprocess.run([sys.executable, "-m", "skacv", "demo", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0
    assert "--full" in run.stdout and "--alpha" in run.stdout and "--m" in run.stdout
    run = subprocess.run(
        [sys.executable, "-m", "skacv", "demo", "--n", "80", "--p", "100", "--s", "5",
         "--T", "4", "--m", "2", "--no-plot"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert "true risk" in run.stdout
    # the last row (t = 3) of both tables: the seed's and the early-stopping part's
    assert [ln.split()[0] for ln in run.stdout.splitlines() if ln[:1] == "3"] == ["3", "3"]
    assert not list(tmp_path.iterdir())  # --no-plot wrote nothing


def test_command_line_errors(capsys):
    from skacv.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(["demo", "--T", "1", "--no-plot"])
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "skacv demo: error: --T must be at least 2 (the iterates t = 0..T-1: the start "
        "and at least one step), got 1. (skacv demo --help lists the options)"]
    with pytest.raises(SystemExit):
        main([])  # a command is required
    with pytest.raises(SystemExit):
        main(["demo", "--solver", "sgd"])


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(n=1), "n must be at least 2"),
        (dict(alpha=-1.0), "alpha must be at least 0"),
        (dict(sigma=-0.1), "sigma must be at least 0"),
        (dict(sigma=float("nan")), "sigma nan .* finite number"),
        (dict(n=10.5), "n 10.5 must be a whole number"),
        (dict(p=10), r"s 200 \(the default\) is larger than p 10"),
        (dict(p=10, full=True), r"s 1000 \(the --full size\) is larger than p 10"),
        (dict(seed=2**32), "seed must be below 2"),
    ],
)
def test_demo_params_errors_name_the_parameter(params, message):
    with pytest.raises(ValueError, match=message):
        demo_params(**params)


def test_demo_params_resolves_defaults_and_whole_floats():
    params = demo_params(n=100.0, p=50, s=5, full=True)
    assert params == {**SEED_SIZE, "n": 100, "p": 50, "s": 5}
    assert isinstance(params["n"], int) and isinstance(params["sigma"], float)
    assert demo_params() == DEMO_DEFAULTS


def test_run_demo_checks_the_output_before_fitting(tmp_path):
    buf = io.StringIO()
    with pytest.raises(ValueError, match="does not exist"):
        run_demo(n=60, p=80, s=5, T=3, out=str(tmp_path / "missing" / "x.png"), file=buf)
    with pytest.raises(ValueError, match="solver must be"):
        run_demo(n=60, p=80, s=5, T=3, out=None, solver="sgd", file=buf)
    assert buf.getvalue() == ""  # nothing printed, nothing fitted


def test_check_output_path(tmp_path):
    assert check_output_path(tmp_path / "a.png") == tmp_path / "a.png"
    with pytest.raises(ValueError, match="--out .* is a directory"):
        check_output_path(tmp_path, name="--out")
    with pytest.raises(ValueError, match="no file extension"):
        check_output_path(tmp_path / "a")
    with pytest.raises(ValueError, match="empty"):
        check_output_path("")


def _kfold_by_hand(X, y, lam, T, eta, seed, n_folds=5):
    """K-fold CV along the path, written out: each fold's ISTA path with the
    full data's step, every iterate scored on its held-out fold."""
    from sklearn.model_selection import KFold

    sse = np.zeros(T)
    for train, test in KFold(n_folds, shuffle=True, random_state=seed).split(X):
        path = _seed_ista(X[train], y[train], lam, T, eta=eta)
        sse += ((y[test][:, None] - X[test] @ path) ** 2).sum(axis=0)
    return sse / X.shape[0]


def test_early_stopping_part_marks_the_three_choices():
    n, p, s, T, m = 300, 450, 30, 25, 5
    buf = io.StringIO()
    res = run_demo(n=n, p=p, s=s, T=T, m=m, out=None, file=buf)
    stop, sigma, lam = res.stop, DEMO_DEFAULTS["stop_sigma"], DEMO_DEFAULTS["stop_alpha"]
    # the data: the seed's design and coefficients, new noise
    X, _, beta = seed_data(n, p, s, DEMO_DEFAULTS["sigma"], 2025)
    y = X @ beta + sigma * np.random.default_rng(2026).standard_normal(n)
    eta = (1 + np.sqrt(p / n)) ** -2
    path = _seed_ista(X, y, lam, T)
    assert_allclose(stop.estimator.coef_path_, path, rtol=0, atol=1e-10)
    truth = ((path - beta[:, None]) ** 2).sum(axis=0) + sigma**2
    assert_allclose(stop.true_risk, truth, rtol=1e-10)
    # the setting has a minimum inside the path: there is something to choose
    assert 0 < stop.choices["oracle"] == np.argmin(truth) < T - 1
    assert truth[-1] > 1.02 * truth.min()
    assert stop.choices["estimate"] == np.argmin(stop.estimator.risk_path_)
    # K-fold CV along the path, against the folds written out (float32 folds)
    kfold = _kfold_by_hand(X, y, lam, T, eta, seed=2025)
    assert_allclose(stop.kfold_path, kfold, rtol=1e-4)
    assert stop.choices["kfold"] == np.argmin(kfold)
    for key, t in stop.choices.items():
        assert_allclose(stop.regret[key], truth[t] / truth.min() - 1, rtol=1e-12)
    # the table of the choices, as printed
    text = buf.getvalue()
    for name, key in (("oracle (argmin of the true risk)", "oracle"),
                      ("estimate (argmin of risk_path_)", "estimate"),
                      ("5-fold CV along the path", "kfold")):
        row = next(line for line in text.splitlines() if line.startswith(name))
        assert row[len(name):].split()[:2] == [str(stop.choices[key]),
                                               f"{truth[stop.choices[key]]:.2f}"]
    assert f"expected gap at n={n}:" in text and "this run: estimate / truth - 1" in text


def test_figure_marks_the_three_choices():
    pytest.importorskip("matplotlib")
    res = run_demo(n=300, p=450, s=30, T=25, m=5, out=None, file=io.StringIO())
    fig = draw_figure(res.t, res.train_mse, res.true_risk, res.estimated_risk,
                      {k: res[k] for k in DEMO_DEFAULTS}, "ista", res.stop)
    seed_ax, ax = fig.axes
    stop = res.stop
    marks = {line.get_gid(): line for line in ax.lines if line.get_gid()}
    assert set(marks) == {"choice_oracle", "choice_estimate", "choice_kfold"}
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    for key, words in (("oracle", "oracle"), ("estimate", "estimate's choice"),
                       ("kfold", "5-fold's choice")):
        t = stop.choices[key]
        # each marker sits on the true risk at its choice
        assert_allclose(marks[f"choice_{key}"].get_xdata(), [t])
        assert_allclose(marks[f"choice_{key}"].get_ydata(), [stop.true_risk[t]])
        assert any(text.startswith(f"{words}: t={t} ") for text in legend), legend
    # the curves: true risk, estimate, K-fold, each over the whole path
    curves = [line.get_ydata() for line in ax.lines if len(line.get_xdata()) == len(res.t)]
    for values in (stop.true_risk, stop.estimated_risk, stop.kfold_path):
        assert any(np.array_equal(c, values) for c in curves)
    assert "expected gap at n=300" in fig._supxlabel.get_text()
    assert len(seed_ax.lines) == 3  # the seed part: truth, estimate, training error


def test_expected_gap_quotes_the_measurement():
    text = expected_gap(2000, 10)
    assert "2.0 % the estimator's own" in text and "0.7 % the noise of m=10 probes" in text
    assert "measured over 8 seeds at n=2000, see" in text
    # n^-1/2 from the nearest measured size, probes sqrt(10 / m)
    text = expected_gap(8000, 40)
    assert "1.0 % the estimator's own" in text and "0.2 % the noise of m=40" in text
    assert "scaled by sqrt(2000/n)" in text


def test_memory_of_the_run_is_checked():
    gib = 2**30
    # 12 T x T float64 arrays: 12 * 8 * 4000**2 bytes = 1.43 GiB, with the rest 1.5
    with pytest.raises(ValueError, match=r"T 4000: the T x T .* about 1\.5 GiB .* lower T"):
        demo_params(n=50, p=40, s=5, T=4000, memory=gib)
    with pytest.raises(ValueError, match="m 1000000 probes .* lower m"):
        demo_params(n=50, p=40, s=5, T=20, m=1000000, memory=gib)
    need = demo_memory(n=50, p=40, T=4000, m=10)
    assert need.square == 12 * 8 * 4000**2
    assert need.total == need.square + need.data + need.chains
    demo_params(n=50, p=40, s=5, T=200, memory=gib)  # 4 MiB: fine
    # the command line's names: 12 float64 T x T arrays, 12 * 8 * 20000**2 bytes
    with pytest.raises(ValueError) as exc:
        demo_params(n=50, p=40, s=5, T=20000, option=lambda k: f"--{k}", memory=16 * gib)
    assert str(exc.value).startswith("--T 20000: the T x T memory and risk matrices")
    assert "about 35.9 GiB of memory, more than the 16.0 GiB available" in str(exc.value)
    assert "lower --T" in str(exc.value)


def test_output_is_opened_before_the_work(tmp_path):
    existing = tmp_path / "old.png"
    existing.write_bytes(b"keep me")
    assert check_output_path(existing) == existing
    assert existing.read_bytes() == b"keep me"  # opened to append, not truncated
    check_output_path(tmp_path / "new.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.png"]  # the probe removed
    if Path("/proc").is_dir():  # the permission bits say writable to root, open says no
        with pytest.raises(ValueError, match=r"/proc/x\.png: cannot write the file"):
            check_output_path("/proc/x.png")


def test_progress_reports_only_long_stages():
    import time

    stream = io.StringIO()
    with demo_module._Progress("a long stage", stream, after=0.05):
        time.sleep(0.3)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("skacv demo: a long stage... ")
    assert lines[-1].startswith("skacv demo: a long stage: done after ")
    stream = io.StringIO()
    with demo_module._Progress("a quick stage", stream, after=0.05):
        pass
    assert stream.getvalue() == ""
