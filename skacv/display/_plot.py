"""RiskPathDisplay: estimated risk, leave-one-out and test error along a path."""

from numbers import Real

import numpy as np
from scipy.special import log_expit
from sklearn.base import is_classifier
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted


def _check_matplotlib(caller):
    try:
        import matplotlib.pyplot  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"{caller} requires matplotlib. Install it with `pip install matplotlib` "
            "(or the plot extra: `pip install \".[plot]\"` in a checkout of skacv)."
        ) from exc


def _format_value(value):
    if isinstance(value, Real) and not isinstance(value, (bool, np.bool_)):
        return f"{value:.4g}"
    return repr(value)


def _as_path(values, name):
    if values is None:
        return None
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one value per iterate), got shape {values.shape}.")
    return values


#: ``ylim="auto"`` of :meth:`RiskPathDisplay.plot`: the y-range ends at this
#: multiple of the largest of the curves' minima (the first iterates of a path
#: from zero sit orders of magnitude above the region where one stops) ...
_Y_TOP_FACTOR = 2.0
#: ... when the whole range is more than this many times that range (the
#: region would fill less than a fifth of the axes' height); else matplotlib's
_FLATTENED = 5.0


def auto_ylim(curves, factor=_Y_TOP_FACTOR):
    """``(bottom, top)`` showing the informative part of positive error
    curves (``ylim="auto"``): the top ``factor`` times the largest of their
    minima (at least 0.1 % of the range above the smallest value), the
    bottom 5 % of that range below it; ``None`` (matplotlib's range) when
    the whole range is within :data:`_FLATTENED` times this one, a curve
    has no finite value or a value is not positive."""
    finite = [c[np.isfinite(c)] for c in curves]
    if not finite or any(c.size == 0 for c in finite):
        return None
    low = min(c.min() for c in finite)
    high = max(c.max() for c in finite)
    if low <= 0:
        return None
    top = max(factor * max(c.min() for c in finite), low + 0.001 * (high - low))
    if high - low <= _FLATTENED * (top - low):
        return None
    return low - 0.05 * (top - low), top


def path_test_error(estimator, X, y, sample_weight=None):
    """Test error of every iterate, shape (n_iter_ + 1,): the (weighted)
    mean squared error of ``predict_path(X)`` (regressors), the mean
    log-loss of ``decision_function_path(X)`` (binary classifiers), as
    ``risk_path_`` and ``loo_path_`` estimate."""
    if hasattr(estimator, "decision_function_path"):
        D = estimator.decision_function_path(X)
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != D.shape[0]:
            raise ValueError(f"y_test must have shape ({D.shape[0]},), got {y.shape}.")
        sign = np.where(y == estimator.classes_[1], 1.0, -1.0)
        return np.average(-log_expit(sign[:, None] * D), axis=0, weights=sample_weight)
    if not hasattr(estimator, "predict_path"):
        raise TypeError(
            f"{type(estimator).__name__} has no predict_path: the test error of its "
            "iterates cannot be computed."
        )
    Y = estimator.predict_path(X)
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1 or y.shape[0] != Y.shape[0]:
        raise ValueError(f"y_test must have shape ({Y.shape[0]},), got {y.shape}.")
    sq = (y[:, None] - Y) ** 2
    return np.average(sq, axis=0, weights=sample_weight)


class RiskPathDisplay:
    """Estimated risk path of a trajectory, with the selected iteration.

    Draws, against the iteration number, the memory-matrix risk estimate
    (``risk_path_``), the approximate leave-one-out error (``loo_path_``),
    K-fold CV along the path (``kfold_path_`` of a search), optionally the
    error on a test set, and marks the selected iteration.
    Create it with :meth:`from_estimator`; the constructor takes plain
    arrays (scikit-learn's Display pattern).

    Parameters
    ----------
    risk : ndarray of shape (n_iter + 1,), default=None
        Estimated risk of every iterate.
    loo : ndarray of shape (n_iter + 1,), default=None
        Approximate leave-one-out error of every iterate.
    kfold : ndarray of shape (n_iter + 1,), default=None
        K-fold CV error of every iterate (``kfold_path_``).
    test_error : ndarray of shape (n_iter + 1,), default=None
        Error of every iterate on held-out data.
    best_iteration : int, default=None
        Iteration to mark. ``None``: the argmin of the ``criterion`` curve.
    criterion : {"risk", "loo", "kfold"}, default=None
        Curve that carries the marker. ``None``: the first given of
        ``"risk"``, ``"loo"``, ``"kfold"``.
    estimator_name : str, default=None
        Used in the title.
    error_name : str, default=None
        Label of the y axis (``None``: ``"prediction error"``).
    converged : float, default=None
        The criterion's value of a converged fit selected instead of an
        iterate (:class:`~skacv.TrajectoryEarlyStoppingCV` with
        ``search="path"`` and ``best_iteration_ = None``): drawn as a
        horizontal line in place of the marker.

    Attributes
    ----------
    lines_ : dict of matplotlib Line2D
        ``"risk"``, ``"loo"``, ``"kfold"``, ``"test"`` (those drawn).
    line_ : matplotlib Line2D
        The curve of the criterion (``lines_[criterion]``).
    marker_ : matplotlib Line2D
        The marker of the selected iteration (the line of the converged
        fit's value with ``converged``).
    ax_ : matplotlib Axes
    figure_ : matplotlib Figure

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sklearn.datasets import make_regression
    >>> from skacv import RiskPathDisplay, TrajectoryLasso
    >>> X, y = make_regression(n_samples=200, n_features=100, noise=5.0, random_state=0)
    >>> est = TrajectoryLasso(alpha=0.5, max_iter=50, random_state=0).fit(X[:150], y[:150])
    >>> disp = RiskPathDisplay.from_estimator(est, X[150:], y[150:])
    >>> sorted(disp.lines_)
    ['risk', 'test']
    """

    def __init__(self, *, risk=None, loo=None, test_error=None, best_iteration=None,
                 criterion=None, estimator_name=None, error_name=None, kfold=None,
                 converged=None):
        self.risk = risk
        self.loo = loo
        self.kfold = kfold
        self.test_error = test_error
        self.best_iteration = best_iteration
        self.criterion = criterion
        self.estimator_name = estimator_name
        self.error_name = error_name
        self.converged = converged

    def _curves(self):
        given = {"risk": "risk", "loo": "loo", "kfold": "kfold", "test": "test_error"}
        curves = {k: _as_path(getattr(self, name), name) for k, name in given.items()
                  if getattr(self, name) is not None}
        if not curves:
            raise ValueError("Nothing to plot: give risk, loo, kfold or test_error.")
        lengths = {k: v.shape[0] for k, v in curves.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"The paths have different lengths: {lengths}.")
        return curves

    def _mark(self, ax, path, marker_kw):
        """The selection: the converged fit's value as a horizontal line,
        else a marker on the selected iteration of ``path``."""
        if self.converged is not None:  # the selection is no iterate
            kw = {"color": "k", "linestyle": "--", "linewidth": 1,
                  "label": f"selected: converged fit ({self.converged:.4g})", **(marker_kw or {})}
            return ax.axhline(self.converged, **kw)
        best = self.best_iteration
        best = int(np.nanargmin(path)) if best is None else int(best)
        if not 0 <= best < path.shape[0]:
            raise ValueError(f"best_iteration={best} is outside [0, {path.shape[0] - 1}].")
        kw = {"marker": "o", "markersize": 8, "color": "k", "linestyle": "none",
              "label": f"selected iteration ({best})", **(marker_kw or {})}
        return ax.plot([best], [path[best]], **kw)[0]

    def plot(self, ax=None, *, name=None, risk_kw=None, loo_kw=None, test_kw=None,
             marker_kw=None, kfold_kw=None, ylim="auto"):
        """Draw the paths.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            Axes to draw on; ``None`` creates a figure with constrained
            layout (the labels fit in a saved figure).
        name : str, default=None
            Title; ``None`` uses ``estimator_name``.
        risk_kw, loo_kw, test_kw, kfold_kw : dict, default=None
            Keyword arguments of ``ax.plot`` for each curve.
        marker_kw : dict, default=None
            Keyword arguments of ``ax.plot`` for the selected-iteration marker.
        ylim : "auto", None or (bottom, top), default="auto"
            Range of the y axis. ``"auto"``: up to twice the largest of the
            curves' minima, so that the first iterates
            of a path, often orders of magnitude above the rest, do not
            flatten the region where one stops (they leave the top of the
            axes, and the y label says where it is clipped); matplotlib's
            range when the whole range is within 5 times that one or a value
            is not positive.
            ``None``: matplotlib's range (every value in view).

        Returns
        -------
        display : RiskPathDisplay
        """
        _check_matplotlib("RiskPathDisplay.plot")
        import matplotlib.pyplot as plt

        curves = self._curves()
        criterion = self.criterion
        if criterion is None:
            criterion = next(k for k in ("risk", "loo", "kfold", "test") if k in curves)
        if criterion not in curves:
            raise ValueError(f"criterion={criterion!r} but no {criterion} path was given.")
        if ax is None:
            _, ax = plt.subplots(layout="constrained")
        styles = {
            "risk": ({"label": "estimated risk", "color": "C0"}, risk_kw),
            "loo": ({"label": "approximate leave-one-out", "color": "C1",
                     "linestyle": "--"}, loo_kw),
            "kfold": ({"label": "K-fold CV along the path", "color": "C3",
                       "linestyle": "-."}, kfold_kw),
            "test": ({"label": "test error", "color": "C2", "linestyle": ":"}, test_kw),
        }
        self.lines_ = {}
        for key, values in curves.items():
            default, user = styles[key]
            kw = {**default, **(user or {})}
            (self.lines_[key],) = ax.plot(np.arange(values.shape[0]), values, **kw)
        self.marker_ = self._mark(ax, curves[criterion], marker_kw)
        self.line_ = self.lines_[criterion]
        ax.set_xlabel("iteration")
        ylabel = self.error_name or "prediction error"
        title = name if name is not None else self.estimator_name
        if title:
            ax.set_title(title)
        if isinstance(ylim, str):
            if ylim != "auto":
                raise ValueError(f"ylim must be 'auto', None or (bottom, top), got {ylim!r}.")
            # the converged fit's line, a selection, stays in view
            shown = [*curves.values(), *([] if self.converged is None
                                         else [np.array([float(self.converged)])])]
            ylim = auto_ylim(shown)
            if ylim is not None:  # say that the first iterates left the axes
                ylabel = f"{ylabel} (top clipped at {ylim[1]:.3g})"
        if ylim is not None:
            ax.set_ylim(*ylim)
        ax.set_ylabel(ylabel)
        ax.legend()
        self.ax_ = ax
        self.figure_ = ax.figure
        return self

    @classmethod
    def from_estimator(cls, estimator, X_test=None, y_test=None, *, sample_weight=None,
                       ax=None, name=None, **kwargs):
        """Plot the paths of a fitted trajectory estimator.

        Parameters
        ----------
        estimator : fitted estimator
            A trajectory estimator (its ``risk_path_`` / ``loo_path_`` are
            drawn and the marker sits on the argmin of ``risk_path_``, else
            of ``loo_path_``); a :class:`TrajectoryEarlyStoppingCV` (the
            paths of the selected grid point and its ``kfold_path_``, the
            marker on ``best_iteration_``); or a :class:`~sklearn.pipeline.Pipeline`
            ending in either (``X_test`` goes through the other steps'
            ``transform``).
        X_test : {array-like, sparse matrix} of shape (n_samples, n_features), default=None
            Held-out data (the input of ``estimator``, before any step of a
            pipeline); with ``y_test`` adds the test-error curve (mean
            squared error of every iterate for regressors, log-loss for
            binary classifiers).
        y_test : array-like of shape (n_samples,), default=None
            Targets of ``X_test``.
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the test samples.
        ax : matplotlib Axes, default=None
            Axes to draw on; ``None`` creates a figure.
        name : str, default=None
            Title; ``None``: the class name of the trajectory estimator, its
            penalty ``alpha`` (and the other selected parameters of a
            search), and the selected iteration of a search, e.g.
            ``"TrajectoryLasso (alpha=0.1), selected iteration 23"``.
        **kwargs : dict
            Passed to :meth:`plot` (``risk_kw``, ``loo_kw``, ``kfold_kw``,
            ``test_kw``, ``marker_kw``, ``ylim``).

        Returns
        -------
        display : RiskPathDisplay
            Object that stores the computed paths and the drawn artists.
        """
        _check_matplotlib("RiskPathDisplay.from_estimator")
        check_is_fitted(estimator)
        if (X_test is None) != (y_test is None):
            raise ValueError("Give both X_test and y_test, or neither.")
        final = estimator
        if isinstance(estimator, Pipeline):
            final = estimator.steps[-1][1]
            if final is None or final == "passthrough":
                raise ValueError("The pipeline ends in 'passthrough': it has no estimator "
                                 "whose paths could be drawn.")
            if X_test is not None and len(estimator.steps) > 1:
                X_test = estimator[:-1].transform(X_test)
        inner, best, criterion, selected, kfold = final, None, None, {}, None
        converged = None
        if hasattr(final, "best_iteration_") and hasattr(final, "estimator_"):
            inner, best, criterion = final.estimator_, final.best_iteration_, final.criterion_
            converged = final.best_risk_ if best is None else None
            selected = dict(final.best_params_)
            kfold = getattr(final, "kfold_path_", None)
        risk = getattr(inner, "risk_path_", None)
        loo = getattr(inner, "loo_path_", None)
        if risk is None and loo is None and kfold is None:
            where = "" if inner is estimator else f" (in {type(estimator).__name__})"
            raise ValueError(
                f"{type(inner).__name__}{where} has neither risk_path_ nor loo_path_: fit "
                "it with estimate_risk=True or estimate_loo=True."
            )
        test = None
        if X_test is not None:
            test = path_test_error(inner, X_test, y_test, sample_weight=sample_weight)
        error_name = "log-loss" if is_classifier(inner) else "squared error"
        disp = cls(risk=risk, loo=loo, kfold=kfold, test_error=test, best_iteration=best,
                   criterion=criterion, estimator_name=_title(inner, selected, best,
                                                        converged is not None),
                   error_name=error_name, converged=converged)
        return disp.plot(ax=ax, name=name, **kwargs)


def _title(estimator, selected, best_iteration, converged=False):
    """``"TrajectoryLasso (alpha=0.1), selected iteration 23"``: the class name,
    the penalty and the selected parameters, the selected iteration."""
    shown = {}
    params = estimator.get_params(deep=False)
    if "alpha" in params:
        shown["alpha"] = params["alpha"]
    shown.update(selected)
    title = type(estimator).__name__
    if shown:
        title += " (" + ", ".join(f"{k}={_format_value(v)}" for k, v in shown.items()) + ")"
    if best_iteration is not None:
        title += f", selected iteration {int(best_iteration)}"
    return title + (", selected the converged fit" if converged else "")
