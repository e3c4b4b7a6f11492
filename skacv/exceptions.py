"""Exceptions and warnings raised by skacv (and scikit-learn's
:class:`~sklearn.exceptions.ConvergenceWarning`, for a step size above the
stability limit that has not diverged yet).
"""

from sklearn.exceptions import ConvergenceWarning


class DivergenceError(ValueError):
    """The iterates of a trajectory diverge (the step size is too large), or,
    on a loss of bounded gradient (Huber, logistic), oscillate with no
    iterate better than zero coefficients.

    A subclass of :class:`ValueError`, so that code catching the errors of
    scikit-learn's ``fit`` keeps working. The message names the step size
    used and the fix.
    """


class UnreliableEstimateWarning(UserWarning):
    """An out-of-sample estimate is flagged as unreliable at some iterates.

    The estimate is still returned; the flagged iterates are never selected
    by :class:`~skacv.TrajectoryEarlyStoppingCV`, and the message names the
    remedy (another solver or criterion).
    """


class SelectionBoundaryWarning(UserWarning):
    """:class:`~skacv.TrajectoryEarlyStoppingCV` chose a value on the edge of
    what it searched: the first or last value of a grid, or the last
    iteration ``max_iter``. The best value may lie beyond it; the message
    names the fix (widen the grid, raise ``max_iter``). A grid's edge where
    the criterion no longer falls (within the statistical policy's
    ``limit_rtol``, 1 %, of the next value's) does not warn.
    """


class FeatureScaleWarning(UserWarning):
    """The columns of ``X`` differ so much in scale that the gradient steps
    of a trajectory hardly move the coordinates of the smallest: a step of
    ``1 / L`` moves a coordinate of scale ``s`` at the rate ``(s /
    s_max)^2``, so where early stopping leaves the path depends on the
    units of the features. The message names the fix (standardise ``X``).
    """


class WeightScaleWarning(UserWarning):
    """Sample weights that are not integers and do not sum to the number of
    rows they weigh. skacv reads sample weights as frequency weights: the
    estimates (``risk_path_``, ``loo_path_``, the search's criterion) take
    ``sum(sample_weight)`` as the number of samples, so the scale of such
    weights changes them (the fits of the mean-form penalties do not). The
    message names the fix (weights rescaled to sum to the number of rows).
    """


__all__ = ["ConvergenceWarning", "DivergenceError", "FeatureScaleWarning",
           "SelectionBoundaryWarning", "UnreliableEstimateWarning", "WeightScaleWarning"]


class EstimateBudgetError(ValueError):
    """An estimate would cost more than the budget it was given
    (``risk_time_budget`` of :func:`skacv.get_config`): raised before the
    cost is spent, so that the caller can choose another criterion
    (:class:`~skacv.TrajectoryEarlyStoppingCV` lets it through whatever its
    criterion: the configuration never changes the model selected).
    """
