"""Displays: :class:`~skacv.RiskPathDisplay`."""

from ._plot import RiskPathDisplay

__all__ = ["RiskPathDisplay"]
