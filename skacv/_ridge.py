"""IterativeRidge: gradient paths of ridge regression with their risk."""

from numbers import Real

from sklearn.utils._param_validation import Interval, StrOptions

from ._base import BaseTrajectoryRegressor
from ._iterations import GradientDescent, HeavyBall, Nesterov, check_schedule
from ._lasso import _DOC_ATTRIBUTES


class IterativeRidge(BaseTrajectoryRegressor):
    """Ridge regression fitted by a first-order method, keeping the whole path.

    Minimises scikit-learn's Ridge objective ``||y - X w - b||^2 + alpha ||w||^2``
    (with ``sample_weight``: ``sum_i w_i (...)^2 + alpha ||w||^2``) by exactly
    ``max_iter`` steps from zero. Internally the objective is divided by
    ``2 n_eff`` (``n_eff = sum(sample_weight)``), so the penalty in mean form is
    ``mu = alpha / n_eff``. ``alpha=0`` gives plain (early-stopped) least
    squares gradient descent.

    Parameters
    ----------
    alpha : float, default=1.0
    solver : {"gd", "nesterov", "heavy_ball"}, default="gd"
    momentum : "auto" or float, default="auto"
        ``"nesterov"``: ``"auto"`` is the schedule ``(k - 1) / (k + 2)``, a
        float a constant extrapolation. ``"heavy_ball"``: ``"auto"`` is 0.9.
        Ignored by ``"gd"``.
    step_schedule : None, callable or array-like, default=None
        Step ``k`` (``k = 1..max_iter``) uses ``step_size_ * schedule(k)`` or
        ``step_size_ * schedule[k - 1]``.
    max_iter : int, default=100
        Total number of iterations of the path.
    step_size : "auto" or float, default="auto"
        ``"auto"``: ``1 / (L + mu)``, L the largest eigenvalue of ``X~^T X~ / n``.
    fit_intercept : bool, default=True
    warm_start : bool, default=False
        See :class:`TrajectoryLasso`.
    estimate_risk : bool, default=True
    estimate_loo : bool, default=False
    n_probes : int or None, default=10
        Hutchinson probes; ``None`` uses exact traces from one
        eigendecomposition (always exact for the linear solvers when cheap).
    random_state : int, RandomState instance or None, default=None
    verbose : int, default=0
    """ + _DOC_ATTRIBUTES + """
    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from skacv import IterativeRidge
    >>> X, y = make_regression(n_samples=200, n_features=50, noise=1.0, random_state=0)
    >>> est = IterativeRidge(alpha=1.0, max_iter=30).fit(X, y)
    >>> int(est.risk_path_.argmin()) <= 30
    True
    """

    _parameter_constraints: dict = {
        **BaseTrajectoryRegressor._parameter_constraints,
        "alpha": [Interval(Real, 0, None, closed="left")],
        "solver": [StrOptions({"gd", "nesterov", "heavy_ball"})],
        "momentum": [StrOptions({"auto"}), Interval(Real, 0, 1, closed="left")],
        "step_schedule": [None, callable, "array-like"],
    }
    _warm_params = ("alpha", "solver", "momentum", "fit_intercept", "step_size")

    def __init__(
        self,
        alpha=1.0,
        *,
        solver="gd",
        momentum="auto",
        step_schedule=None,
        max_iter=100,
        step_size="auto",
        fit_intercept=True,
        warm_start=False,
        estimate_risk=True,
        estimate_loo=False,
        n_probes=10,
        random_state=None,
        verbose=0,
    ):
        self.alpha = alpha
        self.solver = solver
        self.momentum = momentum
        self.step_schedule = step_schedule
        self.max_iter = max_iter
        self.step_size = step_size
        self.fit_intercept = fit_intercept
        self.warm_start = warm_start
        self.estimate_risk = estimate_risk
        self.estimate_loo = estimate_loo
        self.n_probes = n_probes
        self.random_state = random_state
        self.verbose = verbose

    def _l2(self, design):
        return self.alpha / design.n_eff

    def _make_iteration(self, step_size, design):
        schedule = check_schedule(self.step_schedule, self.max_iter)
        mu = self._l2(design)
        if self.solver == "gd":
            return GradientDescent(step_size, l2=mu, schedule=schedule)
        if self.solver == "heavy_ball":
            m = 0.9 if self.momentum == "auto" else self.momentum
            return HeavyBall(step_size, momentum=m, l2=mu, schedule=schedule)
        return Nesterov(step_size, momentum=self.momentum, l2=mu, schedule=schedule)
