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
    names the fix (widen the grid, raise ``max_iter``).
    """


__all__ = ["ConvergenceWarning", "DivergenceError", "SelectionBoundaryWarning",
           "UnreliableEstimateWarning"]


class EstimateBudgetError(ValueError):
    """An estimate would cost more than the budget it was given
    (``risk_time_budget`` of :func:`skacv.get_config`): raised before the
    cost is spent, so that the caller can choose another criterion
    (:class:`~skacv.TrajectoryEarlyStoppingCV` lets it through whatever its
    criterion: the configuration never changes the model selected).
    """
