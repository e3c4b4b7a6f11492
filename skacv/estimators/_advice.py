"""What a fit says when its risk estimate cannot be trusted
(:class:`~skacv.exceptions.UnreliableEstimateWarning`) or its features'
scales keep its gradient steps from reaching some of them
(:class:`~skacv.exceptions.FeatureScaleWarning`)."""

import warnings

import numpy as np

from ..exceptions import FeatureScaleWarning, UnreliableEstimateWarning, WeightScaleWarning
from ..utils._validation import join_options, user_stacklevel


def unreliable_advice(estimator, res, statistics):
    """``(first, cause, fixes)`` for the first iterate flagged in
    ``res.reliable`` (``None`` when none is): the check it fails, in a
    sentence, and the list of fixes that apply to this estimator."""
    if res.reliable.all():
        return None
    t = int(np.argmin(res.reliable))
    df = res.df_fraction[t]
    failed = {name for name, flags in res.failures.items() if flags[t]}
    params = estimator.get_params(deep=False)
    fixes = []
    momentum = bool(res.momentum)
    if "not_finite" in failed:
        cause = "The memory matrix or the estimate is not finite there."
    elif "df_high" in failed or (not momentum and df >= statistics.interpolation_df):
        # without momentum the correction amplifies only as 1 - df vanishes
        cause = ("The degrees of freedom approach the sample size: the iterate (nearly) "
                 "interpolates the training data, where the estimate divides vanishing "
                 "residuals by a vanishing 1 - df.")
        fixes.append("fewer iterations or a larger penalty" if "alpha" in params
                     else "fewer iterations")
    elif momentum:
        cause = "The Jacobian of a momentum method amplifies on this design."
        options = _solver_options(estimator)
        plain = next((s for s in ("ista", "gd") if s in options), None)
        if plain is not None:
            fixes.append(f"solver={plain!r} (no momentum)")
    else:
        cause = "The Jacobian amplifies on this design."
    if "estimate_loo" in params:
        fixes.insert(0, "estimate_loo=True (leave-one-out, tracked along the same path)")
    fixes.append("TrajectoryEarlyStoppingCV(criterion='auto')")
    return t, cause, fixes


def warn_unreliable(estimator, res, advice, statistics):
    """Warn with ``advice`` (:func:`unreliable_advice`; ``None``: no warning)."""
    if advice is None:
        return
    t, cause, fixes = advice
    df, amp = res.df_fraction[t], res.amplification[t]
    support = res.support
    extra = ("" if support is None else
             f"; degrees of freedom {df * res.n_eff:.3g} against a support of "
             f"{int(support[t])}, limit {statistics.support_df_limit:g} times")
    warnings.warn(
        f"{type(estimator).__name__}: risk_path_ is unreliable from iteration {t} on "
        f"({int((~res.reliable).sum())} of {res.reliable.size} iterates flagged in "
        f"risk_reliable_; degrees-of-freedom fraction {df:.3g}, expected in "
        f"[{statistics.df_low:g}, {statistics.df_high:g}); "
        f"amplification {amp:.3g}, limit {statistics.amplification_limit:g}{extra}). "
        f"{cause} Use {join_options(fixes)}.",
        UnreliableEstimateWarning, stacklevel=user_stacklevel())


def _solver_options(estimator):
    """The string values of the estimator's ``solver`` parameter."""
    for constraint in getattr(estimator, "_parameter_constraints", {}).get("solver", []):
        options = getattr(constraint, "options", None)
        if options is not None:
            return set(options)
    return set()


def feature_scales(design):
    """The root mean squares of the columns of ``X~`` (the design the steps
    run on: centred by its offsets, weighted; an intercept column included
    where the estimator has one): its column norms
    (:meth:`~skacv.linalg._design.Design.column_sq_norms`, shared by the
    fits of a search) up to the statistical policy's ``feature_scale_rows``
    rows, else those of that many evenly spaced rows (:meth:`Design.rows
    <skacv.linalg._design.Design.rows>`: the same centring)."""
    n, rows = design.n_samples, design.statistics.feature_scale_rows
    part = design if n <= rows else design.rows(
        np.unique(np.linspace(0, n - 1, rows).astype(np.intp)))
    return np.sqrt(part.column_sq_norms() / max(float(part.n_eff), np.finfo(np.float64).tiny))


def warn_feature_scales(estimator, design, n_features):
    """A :class:`~skacv.exceptions.FeatureScaleWarning` where the feature
    columns the gradient steps run on (centred; the intercept's column, where
    the intercept is a coordinate, has the largest one's size) differ in
    root mean square by more
    than the statistical policy's ``feature_scale_ratio``: a step of ``1 /
    L`` moves a coordinate of scale ``s`` at the rate ``(s / s_max)^2``, so
    the path, and where early stopping leaves it, hardly moves the small
    columns' coordinates (unscaled public real designs: up to 64 times the
    test error of the same search after ``StandardScaler`` for the Lasso, 73
    times for the Huber regressor; docs/benchmarks.rst)."""
    stats = design.statistics
    scales = feature_scales(design)[:n_features]
    # constant: a spread within rounding of the column's own size (its mean's,
    # which centring took off), not of the largest column's (a feature in
    # units of 1e-13 beside others in units of 1 is not constant)
    size = np.hypot(scales, np.asarray(design.x_offset[:n_features], dtype=np.float64))
    live = np.flatnonzero(scales > stats.feature_scale_zero * size)
    if live.size < 2:
        return
    small, big = live[np.argmin(scales[live])], live[np.argmax(scales[live])]
    ratio = scales[big] / scales[small]
    if ratio <= stats.feature_scale_ratio:
        return

    names = getattr(estimator, "feature_names_in_", None)

    def name(j):
        return f"feature {j}" + ("" if names is None else f" ({names[j]!r})")

    centred = "about its mean, " if design.fit_intercept else ""
    warnings.warn(
        f"{type(estimator).__name__}: the columns of X differ in scale by a factor of "
        f"{ratio:.3g} (root mean square, {centred}{name(small)} {scales[small]:.3g}, "
        f"{name(big)} {scales[big]:.3g}): a gradient step moves the coordinates of the "
        f"smallest columns {ratio ** 2:.3g} times slower than those of the largest, so the "
        "path, and where early stopping leaves it, hardly moves them. Standardise X, "
        f"e.g. make_pipeline(StandardScaler(), {type(estimator).__name__}(...)).",
        FeatureScaleWarning, stacklevel=user_stacklevel())


def weight_summary(sample_weight):
    """``(integer, n_rows, total, spread)`` of sample weights (NumPy or Dask;
    one computation): whether all are integers, the number of positive
    weights, their sum and their coefficient of variation; ``None`` for no
    weights or weights the fit's checks refuse (they say why)."""
    if sample_weight is None:
        return None
    if hasattr(sample_weight, "dask"):
        import dask.array as da

        w = sample_weight.astype(np.float64)
        pos = w > 0
        parts = da.compute(da.all(w == da.round(w)), da.count_nonzero(pos), w.sum(),
                           (w * w).sum(), da.all(da.isfinite(w)), da.any(w < 0), w.ndim)
    else:
        try:
            w = np.asarray(sample_weight, dtype=np.float64)
        except (TypeError, ValueError):
            return None
        if w.ndim != 1:
            return None
        parts = (np.all(w == np.round(w)), np.count_nonzero(w > 0), w.sum(), w @ w,
                 np.all(np.isfinite(w)), np.any(w < 0), 1)
    integer, n_rows, total, squares, finite, negative, ndim = parts
    if ndim != 1 or not finite or negative or n_rows == 0 or not total > 0:
        return None
    n_rows, total = int(n_rows), float(total)
    mean = total / n_rows
    spread = np.sqrt(max(float(squares) / n_rows - mean * mean, 0.0)) / mean
    return bool(integer), n_rows, total, float(spread)


def warn_weight_scale(estimator, sample_weight, statistics, weighted_classes=False,
                      summary=None):
    """A :class:`~skacv.exceptions.WeightScaleWarning` where ``sample_weight``
    (NumPy or Dask, or ``None``) is not integer and its sum differs from the
    number of rows it weighs (positive weights) by more than the statistical
    policy's ``weight_sum_rtol`` and more than ``weight_sum_sigmas`` times
    the standard error of a mean of that many weights of their spread (a
    subset of weights normalised to mean one, as cross-validation hands a
    fit, does not warn): the estimates read frequency weights, so
    ``sum(sample_weight)`` is their number of samples (``n_eff``) and the
    weights' scale moves them, while relative weights (survey, importance,
    precision) mean nothing by their scale. ``estimator``: the one the
    message names and advises (its ``_alpha_sums_weights``);
    ``weighted_classes``: ``sample_weight`` includes a ``class_weight``;
    ``summary``: :func:`weight_summary` of ``sample_weight`` if known."""
    if summary is None:
        summary = weight_summary(sample_weight)
    if summary is None or summary[0]:
        return  # counts: frequency weights as they read
    _, n_rows, total, spread = summary
    tol = max(statistics.weight_sum_rtol, statistics.weight_sum_sigmas * spread / np.sqrt(n_rows))
    if abs(total - n_rows) <= tol * n_rows:
        return
    owner = type(estimator).__name__
    alpha = {True: f" {owner}'s alpha weighs against sum(sample_weight), as scikit-learn's "
                   "Ridge and HuberRegressor: multiply alpha by the same factor to keep the fit.",
             False: f" {owner}'s fit does not depend on the weights' scale.",
             }.get(getattr(estimator, "_alpha_sums_weights", None), "")
    warnings.warn(
        f"{owner}: sample_weight{' (times class_weight)' if weighted_classes else ''} is not "
        f"integer and sums to {total:.6g} over the {n_rows} "
        "rows it weighs. skacv reads sample weights as frequency weights: the estimates "
        "(risk_path_, loo_path_, and the choices TrajectoryEarlyStoppingCV makes by them) "
        f"count sum(sample_weight) = {total:.6g} samples, so rescaling the weights changes "
        "them. For relative weights (survey, importance or precision weights) pass "
        f"sample_weight * {n_rows} / sample_weight.sum().{alpha}",
        WeightScaleWarning, stacklevel=user_stacklevel())
