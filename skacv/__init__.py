"""skacv: iterative linear estimators that estimate their own out-of-sample risk
at every iteration (Bellec & Tan 2024) and track approximate leave-one-out
along the trajectory (Luo, Ren & Barber 2023)."""

from ._config import config_context, get_config, set_config
from ._iterations import FISTA, ISTA, GradientDescent, HeavyBall, Iteration, Nesterov
from ._lasso import TrajectoryLasso
from ._ridge import IterativeRidge

__version__ = "0.1.0"

__all__ = [
    "TrajectoryLasso",
    "IterativeRidge",
    "Iteration",
    "GradientDescent",
    "HeavyBall",
    "Nesterov",
    "ISTA",
    "FISTA",
    "get_config",
    "set_config",
    "config_context",
]
