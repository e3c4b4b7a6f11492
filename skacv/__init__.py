"""skacv: iterative linear estimators that estimate their own out-of-sample risk
at every iteration (Bellec & Tan 2024) and track approximate leave-one-out
along the trajectory (Luo, Ren & Barber 2023)."""

from . import exceptions
from ._config import config_context, get_config, set_config
from .display import RiskPathDisplay
from .estimates import approximate_loo, exact_loo_path
from .estimators import (
    IterativeRidge,
    SearchProtocol,
    TrajectoryElasticNet,
    TrajectoryHuberRegressor,
    TrajectoryLasso,
    TrajectoryLogisticRegression,
)
from .iterations import (
    FISTA,
    ISTA,
    L1,
    L2,
    ElasticNet,
    GradientDescent,
    HeavyBall,
    Iteration,
    Nesterov,
)
from .kernel_methods import EigenProClassifier, EigenProRegressor
from .model_selection import TrajectoryEarlyStoppingCV, risk_alpha_path

__version__ = "0.1.0"

__all__ = [
    "TrajectoryLasso",
    "TrajectoryElasticNet",
    "IterativeRidge",
    "EigenProRegressor",
    "EigenProClassifier",
    "TrajectoryLogisticRegression",
    "TrajectoryHuberRegressor",
    "exact_loo_path",
    "approximate_loo",
    "TrajectoryEarlyStoppingCV",
    "risk_alpha_path",
    "RiskPathDisplay",
    "SearchProtocol",
    "Iteration",
    "GradientDescent",
    "HeavyBall",
    "Nesterov",
    "ISTA",
    "FISTA",
    "L1",
    "L2",
    "ElasticNet",
    "exceptions",
    "get_config",
    "set_config",
    "config_context",
]
