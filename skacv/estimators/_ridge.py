"""IterativeRidge: gradient paths of ridge regression with their risk."""

from numbers import Integral, Real

from sklearn.base import RegressorMixin

from ..iterations._datafits import LeastSquares
from ..iterations._iterations import (
    SGD,
    GradientDescent,
    HeavyBall,
    Iteration,
    Nesterov,
    PreconditionedGD,
)
from ..iterations._penalties import L2
from ..iterations._preconditioning import feature_preconditioner, preconditioned_lipschitz
from ..utils._compat import Interval, StrOptions
from ._base import COMMON_CONSTRAINTS, TrajectoryEstimator, store_params
from ._docs import DOC_ATTRIBUTES
from ._multitarget import MultiTargetMixin
from ._options import CHAIN_OPTIONS, LOO_OPTIONS
from ._path_methods import TrajectoryMixin
from ._setup import PathSetup


class IterativeRidge(MultiTargetMixin, TrajectoryMixin, RegressorMixin, TrajectoryEstimator):
    __doc__ = """Ridge regression fitted by a first-order method, keeping the whole path.

    Minimises scikit-learn's Ridge objective ``||y - X w - b||^2 + alpha ||w||^2``
    (with ``sample_weight``: ``sum_i w_i (...)^2 + alpha ||w||^2``) by exactly
    ``max_iter`` steps from zero. Internally the objective is divided by
    ``2 n_eff`` (``n_eff = sum(sample_weight)``), so the penalty in mean form is
    ``mu = alpha / n_eff``. ``alpha=0`` gives plain (early-stopped) least
    squares gradient descent. A 2-D ``y`` of shape (n_samples, n_targets)
    fits one path per target, as ``Ridge`` fits one coefficient row per
    target (the attributes gain a leading target axis, see ``coef_path_``).

    Parameters
    ----------
    alpha : float, default=1.0
    solver : {"gd", "nesterov", "heavy_ball", "sgd", "eigenpro"} or Iteration, default="gd"
        ``"sgd"``: mini-batch stochastic gradient (weighted mean gradient of
        ``batch_size`` rows, one random permutation per epoch seeded by
        ``random_state``, the penalty applied at every step). Combine it with
        a decreasing ``step_schedule`` to converge. ``risk_path_`` is Tan &
        Bellec's (2024) estimate for mini-batch SGD (Jacobian chains through
        the batches with ``n_probes`` Hutchinson probes, about ``n_probes *
        max_iter`` batch products per step). With sample weights a batch
        holds whole rows: a weighted fit is SGD on the repeated rows whose
        batches keep the copies of a row together.
        ``"eigenpro"``: full-batch gradient descent preconditioned by EigenPro's
        rank-``n_components`` Nystrom preconditioner (Ma & Belkin 2017),
        ``b <- b + eta P (z - mu b)``, see :class:`skacv.EigenProRegressor` for
        the kernel version. ``step_size="auto"`` is ``1 / L_P`` with ``L_P`` the
        largest eigenvalue of ``P^1/2 (X~^T X~ / n + mu) P^1/2``, typically
        ``(lambda_1 / lambda_{q+1})^0.95`` times larger than ``1 / L``.
        ``risk_path_`` is exact in its traces; it keeps the guarantee of the
        memory-matrix estimate only when the preconditioner is built from
        data independent of the training set (``subsample_size`` as an array):
        built from training rows it is a heuristic (biased by up to 30 % on
        the first iterates in simulations). The fitted preconditioner is the
        attribute ``preconditioner_`` (eigenvalues, flattened spectrum, gain).
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
        ``"auto"``: ``1 / (L + mu)``, L the largest eigenvalue of ``X~^T X~ / n``
        (``"sgd"``: ``1 / (L + mu + R^2 / batch_size)``, ``R`` the largest
        centred row norm, a heuristic bound on the batch curvature).
    batch_size : int, default=32
        Rows per step of ``solver="sgd"`` (ignored by the other solvers).
    n_components : int, default=10
        ``solver="eigenpro"``: number ``q`` of flattened eigendirections.
    subsample_size : "auto", int or array-like of shape (M, n_features), default="auto"
        ``solver="eigenpro"``: rows the preconditioner is estimated from.
        ``"auto"``: ``min(n, 2000)`` random training rows; an int: that many
        (all rows, exactly, once it reaches ``n``); an array: an independent
        sample of feature rows (unlabelled data, a held-out split), which keeps
        the guarantee of ``risk_path_``. Sample weights are frequency weights:
        the rows are drawn from the weighted empirical distribution.
    fit_intercept : bool, default=True
    warm_start : bool, default=False
        See :class:`TrajectoryLasso`.
    estimate_risk : bool, default=True
    estimate_loo : bool, default=False
        Compute ``loo_path_`` (exact leave-one-out along the path; for
        ``"sgd"`` the left-out run uses the same batches without the sample).
    n_probes : int, "auto" or None, default="auto"
        See :class:`TrajectoryLasso` (``"auto"``: exact traces when they cost at
        most 4 times 10 probes).
    risk_options : dict or None, default=None
        The key ``"chain_dtype"`` of :class:`TrajectoryLasso`'s: the chains
        of ``solver="sgd"`` (Tan & Bellec 2024; the others have none).
    loo_options : dict or None, default=None
        See :class:`TrajectoryLasso` (keys ``"batch_size"``,
        ``"subsample"``, ``"store_predictions"``).
    random_state : int, RandomState instance or None, default=None
    verbose : int, default=0
    """ + DOC_ATTRIBUTES + """
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
        **COMMON_CONSTRAINTS,
        "solver": [StrOptions({"gd", "nesterov", "heavy_ball", "sgd", "eigenpro"}), Iteration],
        "n_components": [Interval(Integral, 0, None, closed="left")],
        "subsample_size": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left"),
                           "array-like"],
        "momentum": [StrOptions({"auto"}), Interval(Real, 0, 1, closed="left")],
        "step_schedule": [None, callable, "array-like"],
    }
    _option_keys = {"risk_options": CHAIN_OPTIONS, "loo_options": LOO_OPTIONS}
    _alpha_sums_weights = True

    def __init__(
        self,
        alpha=1.0,
        *,
        solver="gd",
        momentum="auto",
        step_schedule=None,
        max_iter=100,
        step_size="auto",
        batch_size=32,
        n_components=10,
        subsample_size="auto",
        fit_intercept=True,
        warm_start=False,
        estimate_risk=True,
        estimate_loo=False,
        n_probes="auto",
        risk_options=None,
        loo_options=None,
        random_state=None,
        verbose=0,
    ):
        store_params(self, locals())

    def _make_datafit(self, design):
        return LeastSquares()

    def _make_penalty(self, design):
        # Ridge's objective adds alpha ||w||^2 to the summed loss
        return L2(self.alpha, sum_form=True, n_eff=design.n_eff)

    def _new_setup(self, design, datafit, penalty):
        if self.solver != "eigenpro":
            return super()._new_setup(design, datafit, penalty)
        P = feature_preconditioner(design, self.n_components, self.subsample_size,
                                   self.random_state)
        if isinstance(self.step_size, str):
            L = preconditioned_lipschitz(design, P, penalty.l2_)
            step = 1.0 / L if L > 0 else 1.0
        else:
            step = float(self.step_size)
        return PathSetup(step_size=step, preconditioner=P)

    def _set_setup_attributes(self, setup):
        if setup.preconditioner is not None:
            self.preconditioner_ = setup.preconditioner
        elif hasattr(self, "preconditioner_"):
            del self.preconditioner_

    def linear_iterations(self):
        """The path is a linear function of ``y`` with a spectral risk
        estimate (every solver but mini-batch SGD)."""
        if isinstance(self.solver, Iteration):
            return self.solver.sampler is None and self.solver.schedule is None
        return self.solver != "sgd"

    def stacks_folds(self):
        """K-fold CV along the path may run the folds as one block: the
        full-batch solvers without preconditioner."""
        return self.solver in ("gd", "nesterov", "heavy_ball")

    def _solvers(self, setup):
        return {
            "gd": (GradientDescent, {}),
            "nesterov": (Nesterov, {"momentum": self.momentum}),
            "heavy_ball": (HeavyBall, {"momentum": 0.9 if self.momentum == "auto"
                                       else self.momentum}),
            "sgd": (SGD, {}),
            "eigenpro": (PreconditionedGD, {"preconditioner": setup.preconditioner}),
        }
