"""The scikit-learn estimators: one fit shell (``_base``) and thin estimators
that name a datafit, a penalty and an iteration, and the methods they offer the
search (:class:`SearchProtocol`)."""

from ._huber import TrajectoryHuberRegressor
from ._lasso import TrajectoryElasticNet, TrajectoryLasso
from ._logistic import TrajectoryLogisticRegression
from ._protocol import SearchProtocol
from ._ridge import IterativeRidge

__all__ = [
    "TrajectoryLasso",
    "TrajectoryElasticNet",
    "IterativeRidge",
    "TrajectoryLogisticRegression",
    "TrajectoryHuberRegressor",
    "SearchProtocol",
]
