"""Kernel methods: kernels and EigenPro (preconditioned kernel SGD) with a risk
path."""

from ._eigenpro import EigenProClassifier, EigenProRegressor

__all__ = ["EigenProClassifier", "EigenProRegressor"]
