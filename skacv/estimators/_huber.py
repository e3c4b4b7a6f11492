"""TrajectoryHuberRegressor: gradient paths of Huber regression with their risk."""

import warnings
from numbers import Real

import numpy as np
import scipy.sparse as sp
from scipy.optimize import brentq
from sklearn.base import RegressorMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import HuberRegressor

from ..iterations._datafits import Huber
from ..iterations._iterations import SGD, GradientDescent, Iteration
from ..iterations._penalties import L2, Penalty
from ..utils._compat import Interval, StrOptions
from ..utils._validation import check_sample_weight
from ._base import (
    COMMON_CONSTRAINTS,
    TrajectoryEstimator,
    store_params,
)
from ._intercept_column import InterceptColumnMixin
from ._options import CHAIN_OPTIONS, LOO_OPTIONS
from ._path_methods import TrajectoryMixin
from ._protocol import geometric_grid

#: consistency factor of the median absolute deviation at the Gaussian
MAD_FACTOR = 1.482602218505602


def weighted_median(values, weights=None):
    """Median of ``values`` under frequency weights.

    With integer weights this is ``np.median`` of the values repeated by
    their weights (the mean of the two middle values for an even total).
    """
    values = np.asarray(values, dtype=np.float64)
    if weights is None:
        return float(np.median(values))
    keep = np.asarray(weights) > 0
    v, w = values[keep], np.asarray(weights, dtype=np.float64)[keep]
    order = np.argsort(v, kind="stable")
    v, c = v[order], np.cumsum(w[order])
    half = c[-1] / 2.0
    k = int(np.searchsorted(c, half, side="left"))
    if np.isclose(c[k], half, rtol=1e-12, atol=0.0) and k + 1 < v.shape[0]:
        return float(0.5 * (v[k] + v[k + 1]))
    return float(v[k])


def robust_scale(y, sample_weight=None, center=True):
    """``1.4826 * MAD`` of ``y`` about its weighted median (about 0 when
    ``center=False``); if that is 0, ``1.2533`` times the mean absolute
    deviation; if that is 0 too, 1."""
    y = np.asarray(y, dtype=np.float64)
    c = weighted_median(y, sample_weight) if center else 0.0
    dev = np.abs(y - c)
    scale = MAD_FACTOR * weighted_median(dev, sample_weight)
    if not scale > 0:
        w = np.ones_like(dev) if sample_weight is None else np.asarray(sample_weight, float)
        scale = np.sqrt(np.pi / 2.0) * float(w @ dev / w.sum()) if w.sum() > 0 else 0.0
    return float(scale) if np.isfinite(scale) and scale > 0 else 1.0


def huber_location(y, sample_weight, delta):
    """The Huber M-estimate of location of ``y`` at threshold ``delta``
    (``epsilon * scale``), the root of ``sum w psi(y - b)`` between the
    extremes of the rows of positive weight: the intercept of the null
    model (zero coefficients); ``y`` itself where it is constant."""
    y = np.asarray(y, dtype=np.float64)
    w = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight, np.float64)
    live = y[w > 0]
    if not np.ptp(live) > 0:
        return float(live[0]) if live.size else 0.0
    psi = Huber(delta).derivatives  # (psi, curvature) of the fitted values
    return float(brentq(lambda b: w @ psi(b, y)[0], live.min(), live.max(), xtol=1e-14 * delta))


def joint_scale(X, y, sample_weight, epsilon, alpha, fit_intercept):
    """The scale ``sigma*`` that scikit-learn's ``HuberRegressor(epsilon,
    alpha)`` (its defaults otherwise) estimates jointly with the
    coefficients, the minimiser of the objective over ``(w, b, sigma)``
    (Huber's concomitant scale, Owen 2007), or ``None`` where it is not an
    estimate of the noise: more coefficients (intercept included) than rows
    of positive weight (the joint fit interpolates and ``sigma*`` falls to
    zero), ``epsilon < 1`` (outside ``HuberRegressor``'s range) or a scale
    that is not positive. The pilot's convergence warning is not passed on
    (the scale is the path's fixed parameter, not its solution); its failure
    (scikit-learn's ``ValueError``) is raised again with the fix.

    The pilot fits ``y / s`` with ``alpha * s`` (``s``: :func:`robust_scale`
    of ``y``) and its scale is multiplied by ``s``: the same minimiser (with
    ``y = s y'``, ``w = s w'``, ``sigma = s sigma'`` the objective is ``s``
    times the one of ``y'`` with ``alpha s``), which scikit-learn's L-BFGS
    reaches in any units of ``y``; on ``y`` itself it stalled from units of
    about 1e6 (its tolerance is on the gradient, in the units of ``y``).
    With an intercept, a dense ``X`` is centred for the pilot (the same
    minimiser but the intercept's; L-BFGS stalled on features of large
    means, as the path's steps did before they were centred); a sparse one
    is not (it would be densified): its scale agrees to L-BFGS's tolerance."""
    n_rows = X.shape[0] if sample_weight is None else int(np.count_nonzero(
        np.asarray(sample_weight) > 0))
    if epsilon < 1.0 or n_rows <= X.shape[1] + int(fit_intercept):
        return None
    units = robust_scale(y, sample_weight, center=fit_intercept)
    if fit_intercept and not sp.issparse(X):
        X = X - np.average(X, axis=0, weights=sample_weight).astype(X.dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pilot = HuberRegressor(epsilon=epsilon, alpha=alpha * units, fit_intercept=fit_intercept)
        try:
            fitted = pilot.fit(X, np.asarray(y, dtype=np.float64) / units,
                               sample_weight=sample_weight)
        except ValueError as exc:  # ("HuberRegressor convergence failed")
            raise ValueError(
                "scale='auto' takes the scale of scikit-learn's HuberRegressor fitted on these "
                f"data, and its solver failed ({exc}). Standardise X (StandardScaler in a "
                "pipeline: columns in very different units stall it) or give scale a "
                "number.") from exc
        scale = units * float(fitted.scale_)
    return scale if np.isfinite(scale) and scale > 0 else None


class TrajectoryHuberRegressor(InterceptColumnMixin, TrajectoryMixin, RegressorMixin,
                               TrajectoryEstimator):
    """Huber regression fitted by a first-order method, keeping the whole path.

    Minimises scikit-learn's :class:`~sklearn.linear_model.HuberRegressor`
    objective with the scale ``sigma`` held fixed at ``scale_``,

        sum_i w_i (sigma + H_eps((y_i - x_i^T w - b) / sigma) sigma) + alpha ||w||^2

    (``H_eps(z) = z^2`` for ``|z| <= eps``, ``2 eps |z| - eps^2`` otherwise;
    ``w_i`` the sample weights, ones by default), by exactly ``max_iter``
    steps from zero. ``HuberRegressor`` minimises the same function jointly
    over ``sigma``; at its solution ``(w*, b*, sigma*)`` the minimiser over
    ``(w, b)`` with ``sigma = sigma*`` fixed is ``(w*, b*)`` (unique for
    ``alpha > 0`` up to a flat intercept direction), so with
    ``scale=HuberRegressor(...).fit(X, y).scale_`` the path converges to
    ``HuberRegressor``'s ``coef_`` and ``intercept_``. For fixed ``sigma``
    the objective is ``(2 n_eff / sigma)`` times the mean Huber loss
    ``h_delta`` with ``delta = epsilon * sigma`` plus the mean-form ridge
    ``(alpha sigma / n_eff) ||w||^2 / 2``, which the iterations minimise.
    ``penalty="l1"`` replaces ``alpha ||w||^2`` by ``alpha ||w||_1`` in the
    same objective (proximal gradient, soft-thresholding).

    The intercept is an unpenalised coordinate (that of the Huber loss is
    not a mean): the steps run on the design ``X1 = [X - 1 m^T, s 1]``
    (``m`` the columns' weighted means, ``s`` the largest root mean square
    of the centred columns; the intercept is ``b = s c - m^T w``), so the
    path does not depend on where the features' origin lies and the
    intercept moves as fast as the fastest feature's coordinate. The path
    starts at the null model: zero coefficients and the Huber location of
    ``y`` at the path's scale (``skacv.estimators._huber.huber_location``), so a shift of ``y``
    shifts the intercept path only (from zero the intercept moves at most
    ``epsilon * scale`` a step). The left-out fits hold ``m``, ``s`` and that
    start, as they hold the step size; the estimates take the start as fixed
    (its dependence on ``y``, one degree of freedom at the first iterate and
    none at convergence, is not in ``risk_path_``). Features
    in very different units still leave the small ones behind
    (:class:`~skacv.exceptions.FeatureScaleWarning`): standardise them (e.g.
    with :class:`~sklearn.preprocessing.StandardScaler`).

    ``risk_path_`` estimates the squared prediction error of every iterate
    by Tan & Bellec (2024): the memory-matrix estimate of Bellec & Tan
    (2024) weighted by the inliers ``D_t = diag(|y_i - x_i^T b^t| <= delta)``,
    with Jacobian chains through the mini-batches for ``solver="sgd"``.
    ``loo_path_`` is the leave-one-out squared error tracked by IACV (Luo,
    Ren & Barber 2023), first-order accurate: the Huber loss is piecewise
    quadratic. Both treat ``scale_`` as fixed (a left-out run keeps it, like
    the step size).

    Parameters
    ----------
    epsilon : float, default=1.35
        ``HuberRegressor``'s ``epsilon``: residuals beyond ``epsilon * scale_``
        are treated as outliers (linear loss).
    alpha : float, default=0.0001
        ``HuberRegressor``'s ``alpha`` (the penalty adds to the summed loss).
        :class:`~skacv.TrajectoryEarlyStoppingCV`'s literal default chooses
        it on :meth:`auto_alpha_grid`; ``search="grid"`` keeps this alpha.
    scale : "auto" or float, default="auto"
        The fixed scale ``sigma``. ``"auto"``: the scale
        ``HuberRegressor(epsilon=epsilon, alpha=alpha,
        fit_intercept=fit_intercept)`` estimates jointly with its
        coefficients (``alpha`` 0 for ``penalty="l1"``), so the converged
        path is that ``HuberRegressor``'s solution; where that scale is not
        an estimate of the noise (as many coefficients as rows of positive
        weight or more, where the joint fit interpolates; ``epsilon < 1``),
        ``1.4826`` times the median absolute deviation of ``y`` about its
        (weighted) median (about 0 without intercept), the robust scale of
        the starting point's residuals, which includes the signal. Fixed
        before the path and kept by the estimates (and the left-out runs);
        the fitted value is ``scale_``.
    penalty : {"l2", "l1"}, default="l2"
    solver : {"gd", "prox_gd", "sgd"} or Iteration, default="gd"
        ``"gd"``: gradient descent (proximal gradient for ``"l1"``);
        ``"prox_gd"``: the same iteration under its proximal name (the l1
        penalty by soft-thresholding, the l2 penalty through its gradient);
        ``"sgd"``: (proximal) mini-batch SGD, weighted mean gradient of
        ``batch_size`` rows, one permutation per epoch seeded by
        ``random_state``. An :class:`~skacv.Iteration` instance runs a
        user-defined algorithm (``risk_path_`` needs one without momentum).
    step_schedule : None, callable or array-like, default=None
        Step ``k`` uses ``step_size_ * schedule(k)`` (or ``schedule[k - 1]``).
    max_iter : int, default=100
        Total number of iterations of the path.
    step_size : "auto" or float, default="auto"
        ``"auto"``: ``1 / L`` with ``L = lambda_max(X1^T W X1) / sum(w)``, plus
        ``alpha scale_ / sum(w)`` for ``"l2"``, ``X1`` the design above (the Huber loss
        has curvature at most 1); ``"sgd"`` adds ``R^2 / batch_size``, ``R``
        the largest row norm.
    batch_size : int, default=32
        Rows per step of ``solver="sgd"``. With sample weights a batch holds
        whole rows: a weighted fit is SGD on the repeated rows whose batches
        keep the copies of a row together.
    fit_intercept : bool, default=True
    warm_start : bool, default=False
        ``max_iter`` is the total path length: a warm refit on the same data
        extends the stored path (50 + 50 steps equal 100), and continues the
        Jacobian chains of ``risk_path_``.
    estimate_risk : bool, default=True
        Compute ``risk_path_``.
    estimate_loo : bool, default=False
        Compute ``loo_path_``.
    n_probes : int, "auto" or None, default="auto"
        Hutchinson probes of the traces; ``None``: exact traces; ``"auto"``:
        exact up to 40 samples, else 10 probes. The chains cost about
        ``n_probes * max_iter / 2`` products with ``X`` (full batch) or with
        the batch rows (SGD) per step.
    risk_options : dict or None, default=None
        The key ``"chain_dtype"`` of :class:`TrajectoryLasso`'s (the chains
        of Tan & Bellec 2024).
    loo_options : dict or None, default=None
        See :class:`TrajectoryLasso` (keys ``"batch_size"``,
        ``"subsample"``, ``"store_predictions"``).
    random_state : int, RandomState instance or None, default=None
        Seeds the SGD batches, the probes and the leave-one-out subsample.
    verbose : int, default=0

    Attributes
    ----------
    coef_path_ : ndarray of shape (n_features, n_iter_ + 1)
        Every iterate of ``w``; column 0 is the start (zero).
    intercept_path_ : ndarray of shape (n_iter_ + 1,)
        Intercept of every iterate (0 without intercept).
    coef_ : ndarray of shape (n_features,)
        Last iterate, ``coef_path_[:, -1]``.
    intercept_ : float
        ``intercept_path_[-1]``.
    scale_ : float
        The fixed scale ``sigma`` of the objective.
    n_iter_ : int
    step_size_ : float
    risk_path_ : ndarray of shape (n_iter_ + 1,)
        Estimated squared prediction error ``E[(y_new - x_new^T coef_t -
        intercept_t)^2]`` of every iterate (Tan & Bellec 2024). Only with
        ``estimate_risk=True``.
    risk_matrix_ : ndarray of shape (n_iter_ + 1, n_iter_ + 1)
        Estimated cross-iterate errors (diagonal: ``risk_path_``). Only
        kept when it weighs at most ``risk_matrix_limit`` (1 MiB by default,
        see :func:`skacv.get_config`).
    memory_matrix_ : ndarray of shape (n_iter_ + 1, n_iter_ + 1)
        The traces ``A[t, s] = tr(D_t X~ J_{t,s} X~^T)`` of the estimate
        (kept as ``risk_matrix_``).
    risk_reliable_ : ndarray of bool, shape (n_iter_ + 1,)
        ``False`` from the first iterate whose weighted degrees-of-freedom
        fraction ``sum_s K[t, s] / tr(D_t)`` leaves ``[0, 1)`` or whose
        correction amplifies with cancellations (see
        :class:`TrajectoryLasso`).
    risk_diagnostics_ : Bunch
        ``df_fraction`` and ``amplification`` (arrays of shape
        ``(n_iter_ + 1,)``) behind ``risk_reliable_``; ``n_probes``,
        ``probe_noise`` and ``choice_noise`` as :class:`TrajectoryLasso`'s
        (``None`` here).
    loo_path_ : ndarray of shape (n_iter_ + 1,)
        Leave-one-out squared error of every iterate (IACV). Only with
        ``estimate_loo=True``.
    loo_predictions_ : ndarray of shape (n_loo, n_iter_ + 1)
        Only with ``loo_options={"store_predictions": True}``.
    loo_indices_ : ndarray of shape (n_loo,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` has feature names.

    See Also
    --------
    sklearn.linear_model.HuberRegressor : the same objective, jointly in the scale.

    Examples
    --------
    >>> import numpy as np
    >>> from skacv import TrajectoryHuberRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 20))
    >>> y = X[:, 0] + rng.standard_t(2, 200)
    >>> est = TrajectoryHuberRegressor(max_iter=50, random_state=0).fit(X, y)
    >>> est.coef_path_.shape, est.risk_path_.shape
    ((20, 51), (51,))
    """

    #: no debiasing of a robust loss's iterates (the UQ methods are absent)
    debiases = False

    _parameter_constraints: dict = {
        **COMMON_CONSTRAINTS,
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "scale": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "penalty": [StrOptions({"l2", "l1"})],
        "solver": [StrOptions({"gd", "prox_gd", "sgd"}), Iteration],
        "step_schedule": [None, callable, "array-like"],
    }
    _option_keys = {"risk_options": CHAIN_OPTIONS, "loo_options": LOO_OPTIONS}
    _alpha_sums_weights = True

    def __init__(
        self,
        epsilon=1.35,
        *,
        alpha=0.0001,
        scale="auto",
        penalty="l2",
        solver="gd",
        step_schedule=None,
        max_iter=100,
        step_size="auto",
        batch_size=32,
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

    # ------------------------------------------------------ problem pieces
    def _path_scale(self):
        """The scale of the path being fitted (or of the fitted path)."""
        scale = getattr(self, "_scale", None)
        if scale is not None:
            return scale
        return 1.0 if isinstance(self.scale, str) else float(self.scale)

    def _run_path(self, X, y, sample_weight, warm, frozen):
        if warm or frozen is not None:
            setup = self._setup if warm else frozen
            scale, level = setup.scale, setup.level
        else:
            scale = self._new_scale(X, y, sample_weight)
            level = (huber_location(y, sample_weight, self.epsilon * scale)
                     if self.fit_intercept else 0.0)
        # read by _make_datafit, _make_penalty and _fit_target
        self._scale, self._level = scale, level
        super()._run_path(X, y, sample_weight, warm, frozen)
        self.scale_ = scale

    def _new_scale(self, X, y, sample_weight):
        """The fixed scale of a new path: ``scale`` when a number; ``"auto"``:
        ``joint_scale``, else (more coefficients than rows, ``epsilon <
        1``) :func:`robust_scale` of ``y``."""
        if not isinstance(self.scale, str):
            return float(self.scale)
        joint = joint_scale(X, y, sample_weight, self.epsilon,
                            self.alpha if self.penalty == "l2" else 0.0, self.fit_intercept)
        if joint is not None:
            return joint
        return robust_scale(y, sample_weight, center=self.fit_intercept)

    def auto_alpha_grid(self, X, y, sample_weight=None):
        """The alphas of :class:`~skacv.TrajectoryEarlyStoppingCV`'s
        literal default (``param_grid=None``): ``auto_grid_alphas``
        geometric values (the statistical policy) from the penalty's scale
        down to ``auto_grid_eps`` of it, in ``HuberRegressor``'s units (the
        summed loss) with the scale ``sigma`` of this estimator's fit
        without penalty (``scale="auto"``: ``HuberRegressor(alpha=0)``'s joint
        scale, the noise's, which a target in other units scales with: the
        grid scales inversely, as the penalty's units do; each alpha's fit
        then takes ``HuberRegressor``'s joint scale at that alpha).
        ``"l2"``: the curvature bound of the objective,
        ``lambda_max(X1^T W X1) / sigma`` (``step_size="auto"``'s ``L``
        without ``alpha``, in alpha's units), where the penalty halves the
        steepest direction; ``"l1"``: the smallest alpha whose solution is
        zero, ``2 ||X^T W psi(y - b0)||_inf / sigma``, ``psi`` the Huber
        loss's derivative (the residual clipped to ``epsilon sigma``) and
        ``b0`` the Huber location of ``y`` (0 without intercept). ``None``
        where the scale is zero.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        alphas : ndarray of shape (n_alphas,) or None
            Decreasing.
        """
        est = clone(self).set_params(alpha=0.0)  # (the grid's scale: the noise's)
        X, y = est._validate_xy(X, y, reset=True)
        sw = check_sample_weight(sample_weight, X, X.dtype)
        est._scale = est._new_scale(X, y, sw)
        design = est._make_design(X, sw)
        if self.penalty == "l2":
            top = design.lipschitz() * design.n_eff / est._scale
        else:
            w = np.ones(X.shape[0]) if sw is None else np.asarray(sw, dtype=np.float64)
            y = np.asarray(y, dtype=np.float64)
            psi = Huber(self.epsilon * est._scale).derivatives  # (psi, curvature)
            b0 = 0.0
            if self.fit_intercept and np.ptp(y[w > 0]) > 0:  # w psi(y - b) falls in b
                b0 = huber_location(y, w, self.epsilon * est._scale)
            top = 2.0 * float(np.max(np.abs(X.T @ (w * psi(b0, y)[0])))) / est._scale
        stats = design.statistics
        return geometric_grid(top, stats.auto_grid_alphas, stats.auto_grid_eps)

    def _new_setup(self, design, datafit, penalty):
        setup = super()._new_setup(design, datafit, penalty)
        setup.scale, setup.level = self._path_scale(), self._level
        return setup

    def _fit_target(self, design, y):
        """``(level, sqrt(w) (y - level))``: the path starts at the null
        model's intercept, the Huber location of ``y`` (zero without
        intercept), held by a warm or left-out refit as the scale is."""
        level = design.dtype.type(getattr(self, "_level", 0.0))
        target = np.asarray(y, dtype=design.dtype) - level
        if design.sqrt_weight is not None:
            target = target * design.sqrt_weight
        return level, np.ascontiguousarray(target)

    def _make_datafit(self, design):
        sw = design.sqrt_weight
        return Huber(self.epsilon * self._path_scale(),
                     None if sw is None else np.asarray(sw, dtype=np.float64))

    def _make_penalty(self, design):
        # HuberRegressor's objective divided by 2 n_eff / scale: the mean Huber
        # loss plus (alpha scale / n_eff) ||w||^2 / 2 or (alpha scale / (2 n_eff)) ||w||_1
        strength = self.alpha * self._path_scale()
        unpenalized = int(self.fit_intercept)
        if self.penalty == "l2":
            return L2(strength, sum_form=True, n_eff=design.n_eff, n_unpenalized=unpenalized)
        return Penalty(l1=strength / 2.0, sum_form=True, n_eff=design.n_eff,
                       n_unpenalized=unpenalized)

    def _solvers(self, setup):
        return {"gd": (GradientDescent, {}), "prox_gd": (GradientDescent, {}), "sgd": (SGD, {})}
