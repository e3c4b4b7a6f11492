"""Exceptions and warnings raised by skacv.

``DivergenceError`` is raised when the iterates of a trajectory blow up;
``UnreliableEstimateWarning`` is emitted when a risk estimate flags iterates
at which it cannot be trusted (see ``risk_reliable_`` on the estimators).
scikit-learn's :class:`~sklearn.exceptions.ConvergenceWarning` is used for
a step size above the stability limit that has not diverged yet.
"""

from sklearn.exceptions import ConvergenceWarning


class DivergenceError(ValueError):
    """The iterates of a trajectory diverge (the step size is too large).

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


__all__ = ["ConvergenceWarning", "DivergenceError", "UnreliableEstimateWarning"]
