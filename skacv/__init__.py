"""skacv: iterative linear estimators that estimate their own out-of-sample risk
at every iteration (Bellec & Tan 2024) and track approximate leave-one-out
along the trajectory (Luo, Ren & Barber 2023)."""

from . import exceptions
from ._alpha_path import risk_alpha_path
from ._config import config_context, get_config, set_config
from ._eigenpro import EigenProClassifier, EigenProRegressor
from ._huber import TrajectoryHuberRegressor
from ._iterations import FISTA, ISTA, GradientDescent, HeavyBall, Iteration, Nesterov
from ._lasso import TrajectoryLasso
from ._logistic import TrajectoryLogisticRegression
from ._loo_approx import approximate_loo
from ._loo_refit import exact_loo_path
from ._penalties import L1, L2, ElasticNet
from ._plot import RiskPathDisplay
from ._ridge import IterativeRidge
from ._selection import TrajectoryEarlyStoppingCV

__version__ = "0.1.0"

__all__ = [
    "TrajectoryLasso",
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
