"""Choosing the iteration and the penalty: K-fold CV along the path with the
folds run as one block (``_kfold``), converged fits along alpha
(``_alpha_path``) and :class:`~skacv.TrajectoryEarlyStoppingCV`."""

from ._alpha_path import risk_alpha_path
from ._selection import TrajectoryEarlyStoppingCV

__all__ = ["risk_alpha_path", "TrajectoryEarlyStoppingCV"]
