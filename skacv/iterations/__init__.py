"""The algorithms: datafits, penalties, one :class:`~skacv.Iteration` object per
algorithm (its step, Jacobian action and leave-one-out update), EigenPro's
preconditioner, and the fit loop (``_path``)."""

from ._iterations import FISTA, ISTA, GradientDescent, HeavyBall, Iteration, Nesterov
from ._penalties import L1, L2, ElasticNet

__all__ = [
    "FISTA",
    "ISTA",
    "GradientDescent",
    "HeavyBall",
    "Iteration",
    "Nesterov",
    "L1",
    "L2",
    "ElasticNet",
]
