"""Tests of RiskPathDisplay (Agg backend): it draws what it claims."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skacv import RiskPathDisplay, TrajectoryEarlyStoppingCV, TrajectoryLasso

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
plt = pytest.importorskip("matplotlib.pyplot")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _pinned(estimator, **kwargs):
    """TrajectoryEarlyStoppingCV with the criterion and the search these tests
    pin ("risk", "grid") unless given: the "auto" choices have their own tests."""
    kwargs.setdefault("criterion", "risk")
    kwargs.setdefault("search", "grid")
    return TrajectoryEarlyStoppingCV(estimator, **kwargs)


def _data(n=150, p=100, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:10] = 1.0
    y = X @ beta + rng.standard_normal(n)
    return X[:100], y[:100], X[100:], y[100:]


def _legend_texts(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_from_estimator_draws_risk_test_error_and_marker():
    X, y, Xt, yt = _data()
    est = TrajectoryLasso(alpha=0.1, max_iter=40, random_state=0).fit(X, y)
    disp = RiskPathDisplay.from_estimator(est, Xt, yt)
    assert set(disp.lines_) == {"risk", "test"}
    # the risk curve is risk_path_ against 0..n_iter_
    x, r = disp.lines_["risk"].get_data()
    assert_array_equal(x, np.arange(41))
    assert_allclose(r, est.risk_path_)
    # the test curve is the test MSE of every iterate, computed by hand
    manual = [np.mean((yt - Xt @ est.coef_path_[:, t] - est.intercept_path_[t]) ** 2)
              for t in range(41)]
    assert_allclose(disp.lines_["test"].get_ydata(), manual, rtol=1e-10)
    # the marker sits on the argmin of the estimated risk
    t = int(np.argmin(est.risk_path_))
    assert_array_equal(disp.marker_.get_xdata(), [t])
    assert_allclose(disp.marker_.get_ydata(), [est.risk_path_[t]])
    assert disp.line_ is disp.lines_["risk"]
    assert _legend_texts(disp.ax_) == ["estimated risk", "test error",
                                       f"selected iteration ({t})"]
    assert disp.ax_.get_xlabel() == "iteration"
    assert disp.ax_.get_title() == "TrajectoryLasso (alpha=0.1)"
    assert disp.figure_ is disp.ax_.figure


def test_from_search_marks_best_iteration_and_uses_given_axes():
    X, y, Xt, yt = _data()
    search = _pinned(TrajectoryLasso(max_iter=40, random_state=0),
                                       param_grid={"alpha": [0.3, 0.1]}).fit(X, y)
    fig, ax = plt.subplots()
    disp = RiskPathDisplay.from_estimator(search, ax=ax, risk_kw={"color": "red"})
    assert disp.ax_ is ax and disp.figure_ is fig
    assert set(disp.lines_) == {"risk"}
    assert_allclose(disp.line_.get_ydata(), search.risk_path_)
    assert disp.line_.get_color() == "red"
    assert_array_equal(disp.marker_.get_xdata(), [search.best_iteration_])
    assert_allclose(disp.marker_.get_ydata(), [search.best_risk_])
    assert ax.get_title() == (f"TrajectoryLasso (alpha={search.best_params_['alpha']:.4g}), "
                              f"selected iteration {search.best_iteration_}")


def test_a_selected_converged_fit_is_a_line_not_an_iteration():
    X, y, Xt, yt = _data()
    # 3 iterations (whole paths: none grown past max_iter): the converged fit
    # of the chosen alpha scores lower
    search = _pinned(TrajectoryLasso(max_iter=3, random_state=0), search="path",
                     param_grid={"alpha": [0.3, 0.1, 0.03]}, n_iter_no_change=None)
    with pytest.warns(UserWarning, match="converged fit is selected"):
        search.fit(X, y)
    assert search.best_iteration_ is None
    disp = RiskPathDisplay.from_estimator(search, Xt, yt)
    assert_allclose(disp.line_.get_ydata(), search.risk_path_)
    assert_allclose(disp.marker_.get_ydata(), [search.best_risk_] * 2)
    assert f"selected: converged fit ({search.best_risk_:.4g})" in _legend_texts(disp.ax_)
    assert disp.ax_.get_title().endswith(", selected the converged fit")
    assert "selected iteration" not in disp.ax_.get_title()


def _scaled_data():
    """Columns on very different scales: a pipeline's scaler matters."""
    X, y, Xt, yt = _data()
    scales = np.linspace(0.1, 20.0, X.shape[1])
    return X * scales, y, Xt * scales, yt


def test_pipeline_is_read_through_its_final_step():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, Xt, yt = _scaled_data()
    pipe = make_pipeline(StandardScaler(), TrajectoryLasso(alpha=0.1, max_iter=30,
                                                           random_state=0)).fit(X, y)
    disp = RiskPathDisplay.from_estimator(pipe, Xt, yt)
    est = pipe[-1]
    assert_allclose(disp.lines_["risk"].get_ydata(), est.risk_path_)
    # the test error of the iterates on the *transformed* test set
    Zt = pipe[0].transform(Xt)
    manual = ((yt[:, None] - Zt @ est.coef_path_ - est.intercept_path_) ** 2).mean(axis=0)
    assert_allclose(disp.lines_["test"].get_ydata(), manual, rtol=1e-10)
    untransformed = ((yt[:, None] - est.predict_path(Xt)) ** 2).mean(axis=0)
    assert not np.allclose(manual, untransformed, rtol=1e-3)
    t = int(np.argmin(est.risk_path_))
    assert_array_equal(disp.marker_.get_xdata(), [t])
    # same title as the bare estimator
    assert disp.ax_.get_title() == "TrajectoryLasso (alpha=0.1)"


def test_pipeline_ending_in_a_search():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, Xt, yt = _scaled_data()
    search = _pinned(TrajectoryLasso(max_iter=40, random_state=0),
                                       param_grid={"alpha": [0.3, 0.1]},
                                       n_iter_no_change=None)
    pipe = make_pipeline(StandardScaler(), search).fit(X, y)
    disp = RiskPathDisplay.from_estimator(pipe, Xt, yt)
    fitted = pipe[-1]
    assert_allclose(disp.lines_["risk"].get_ydata(), fitted.risk_path_)
    assert_array_equal(disp.marker_.get_xdata(), [fitted.best_iteration_])
    Zt = pipe[0].transform(Xt)
    manual = ((yt[:, None] - fitted.estimator_.predict_path(Zt)) ** 2).mean(axis=0)
    assert_allclose(disp.lines_["test"].get_ydata(), manual, rtol=1e-10)
    assert disp.ax_.get_title() == (
        f"TrajectoryLasso (alpha={fitted.best_params_['alpha']:.4g}), "
        f"selected iteration {fitted.best_iteration_}")


def test_search_without_grid_shows_the_penalty_and_the_iteration():
    X, y, _, _ = _data()
    search = _pinned(
        TrajectoryLasso(alpha=0.25, max_iter=30, random_state=0)).fit(X, y)
    disp = RiskPathDisplay.from_estimator(search)
    assert disp.ax_.get_title() == (
        f"TrajectoryLasso (alpha=0.25), selected iteration {search.best_iteration_}")
    # an explicit name wins
    disp = RiskPathDisplay.from_estimator(search, name="mine")
    assert disp.ax_.get_title() == "mine"


def test_pipeline_errors():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, _, _ = _data()
    bare = make_pipeline(StandardScaler(), TrajectoryLasso(
        alpha=0.1, max_iter=5, estimate_risk=False)).fit(X, y)
    with pytest.raises(ValueError, match=r"TrajectoryLasso \(in Pipeline\) has neither"):
        RiskPathDisplay.from_estimator(bare)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        RiskPathDisplay.from_estimator(make_pipeline(StandardScaler(), TrajectoryLasso()))


def test_loo_curve_and_marker_on_the_criterion():
    loo = np.array([5.0, 3.0, 2.0, 2.5, 4.0])
    risk = np.array([5.0, 2.8, 2.9, 1.9, 4.0])
    disp = RiskPathDisplay(risk=risk, loo=loo, criterion="loo").plot()
    assert set(disp.lines_) == {"risk", "loo"}
    assert_allclose(disp.lines_["loo"].get_ydata(), loo)
    assert disp.line_ is disp.lines_["loo"]
    assert_array_equal(disp.marker_.get_xdata(), [2])
    assert_allclose(disp.marker_.get_ydata(), [2.0])
    # default criterion: the risk curve
    disp = RiskPathDisplay(risk=risk, loo=loo).plot(name="custom")
    assert_array_equal(disp.marker_.get_xdata(), [3])
    assert disp.ax_.get_title() == "custom"
    # an explicit best_iteration wins over the argmin
    disp = RiskPathDisplay(risk=risk, best_iteration=1).plot()
    assert_array_equal(disp.marker_.get_xdata(), [1])
    assert_allclose(disp.marker_.get_ydata(), [2.8])


def test_weighted_test_error():
    X, y, Xt, yt = _data()
    est = TrajectoryLasso(alpha=0.1, max_iter=10, random_state=0).fit(X, y)
    w = np.arange(1, Xt.shape[0] + 1, dtype=float)
    disp = RiskPathDisplay.from_estimator(est, Xt, yt, sample_weight=w)
    manual = np.average((yt[:, None] - est.predict_path(Xt)) ** 2, axis=0, weights=w)
    assert_allclose(disp.lines_["test"].get_ydata(), manual, rtol=1e-12)


def test_errors():
    X, y, Xt, yt = _data()
    est = TrajectoryLasso(alpha=0.1, max_iter=10, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="both X_test and y_test"):
        RiskPathDisplay.from_estimator(est, Xt)
    bare = TrajectoryLasso(alpha=0.1, max_iter=10, estimate_risk=False).fit(X, y)
    with pytest.raises(ValueError, match="neither risk_path_ nor loo_path_"):
        RiskPathDisplay.from_estimator(bare)
    with pytest.raises(ValueError, match="different lengths"):
        RiskPathDisplay(risk=np.ones(3), loo=np.ones(4)).plot()
    with pytest.raises(ValueError, match="Nothing to plot"):
        RiskPathDisplay().plot()
    with pytest.raises(ValueError, match="criterion='loo' but no loo path"):
        RiskPathDisplay(risk=np.ones(3), criterion="loo").plot()
    with pytest.raises(ValueError, match="outside"):
        RiskPathDisplay(risk=np.ones(3), best_iteration=3).plot()
    with pytest.raises(ValueError, match="y_test must have shape"):
        RiskPathDisplay.from_estimator(est, Xt, yt[:-1])


def test_classifier_loo_and_test_log_loss():
    logistic = pytest.importorskip("skacv.estimators._logistic")
    from sklearn.datasets import make_classification
    from sklearn.metrics import log_loss

    X, y = make_classification(n_samples=200, n_features=10, random_state=0)
    y = np.where(y == 1, "yes", "no")
    clf = logistic.TrajectoryLogisticRegression(max_iter=15, estimate_loo=True)
    search = _pinned(clf, criterion="loo").fit(X[:120], y[:120])
    disp = RiskPathDisplay.from_estimator(search, X[120:], y[120:])
    assert set(disp.lines_) == {"loo", "test"}
    assert disp.line_ is disp.lines_["loo"]
    assert_allclose(disp.line_.get_ydata(), search.loo_path_)
    est = search.estimator_
    manual = [log_loss(y[120:], est.predict_proba_path(X[120:])[:, t], labels=est.classes_)
              for t in range(est.n_iter_ + 1)]
    assert_allclose(disp.lines_["test"].get_ydata(), manual, rtol=1e-8)
    assert_array_equal(disp.marker_.get_xdata(), [search.best_iteration_])
    assert disp.ax_.get_ylabel() == "log-loss"


def _slow_start_path(T=80):
    """A path from zero: the first iterates 1000 times above the minimum (100,
    at t = 50), then a slow rise."""
    t = np.arange(T, dtype=float)
    return 1e5 * np.exp(-t / 5.0) + 100.0 + 0.05 * (t - 50.0) ** 2


def test_default_y_range_shows_the_minimum_region():
    risk = _slow_start_path()
    test = risk * 1.1 + 5.0
    disp = RiskPathDisplay(risk=risk, test_error=test).plot()
    low, high = disp.ax_.get_ylim()
    # both minima in view, the top at twice the larger one: not 0 to 100000
    assert low < risk.min() < test.min() < high
    assert_allclose(high, 2 * test.min())
    assert high - low < 3 * risk.min()
    assert low > 0.9 * risk.min()
    assert disp.ax_.get_ylabel() == f"prediction error (top clipped at {high:.3g})"
    # every value in view on request, and an explicit range wins
    disp = RiskPathDisplay(risk=risk, test_error=test).plot(ylim=None)
    assert disp.ax_.get_ylim()[1] >= test.max()
    assert disp.ax_.get_ylabel() == "prediction error"
    disp = RiskPathDisplay(risk=risk).plot(ylim=(50, 500))
    assert disp.ax_.get_ylim() == (50, 500)
    with pytest.raises(ValueError, match="ylim must be 'auto'"):
        RiskPathDisplay(risk=risk).plot(ylim="tight")


def test_default_y_range_keeps_matplotlib_range_when_nothing_is_clipped():
    from skacv.display._plot import auto_ylim

    flat = np.array([3.0, 2.0, 1.5, 1.6])
    assert auto_ylim([flat]) is None  # 3 < 2 * 1.5: everything already in view
    # the region up to 2 * 1.5 = 3 would fill more than a fifth of the height
    assert auto_ylim([np.array([9.0, 2.0, 1.5, 1.6])]) is None
    assert auto_ylim([np.array([9.5, 2.0, 1.5, 1.6])]) == (1.5 - 0.075, 3.0)
    assert auto_ylim([np.array([5.0, -1.0, 0.5])]) is None  # not positive
    assert auto_ylim([np.array([np.nan, np.nan])]) is None
    disp = RiskPathDisplay(risk=flat).plot()
    assert disp.ax_.get_ylim()[1] >= 3.0 and disp.ax_.get_ylabel() == "prediction error"


def test_labels_fit_in_the_saved_figure(tmp_path):
    disp = RiskPathDisplay(risk=_slow_start_path(), error_name="squared error").plot()
    fig = disp.figure_
    assert type(fig.get_layout_engine()).__name__ == "ConstrainedLayoutEngine"
    fig.savefig(tmp_path / "f.png")
    renderer = fig.canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    for text in (disp.ax_.yaxis.label, disp.ax_.xaxis.label):
        box = text.get_window_extent(renderer)
        assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= width and box.y1 <= height


def test_the_converged_fits_line_stays_in_view():
    """A converged fit selected below every iterate: its line is inside the
    automatic y-range."""
    disp = RiskPathDisplay(risk=np.array([1000.0, 500, 100, 20, 12, 10, 10.5, 11]),
                           converged=8.0).plot()
    bottom, top = disp.ax_.get_ylim()
    assert bottom < 8.0 < top
    plt.close("all")
