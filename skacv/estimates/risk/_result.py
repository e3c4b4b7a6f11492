"""The risk estimate's result and the memory its dense matrices need."""

from dataclasses import dataclass

import numpy as np
from sklearn.utils import Bunch

from ..._config import check_memory

#: (T + 1) x (T + 1) float64 matrices the dense estimate holds at its peak (the
#: memory matrices, the correction and its inverse, the risk matrix, temporaries)
DENSE_MATRICES = 8
#: arrays of ``q x (T + 1)`` floats of the settled form (``q``: samples, or
#: features + 1 in the covariance form: the residuals of the outputs and of
#: the gradient points, and their corrections) and vectors of ``T + 1`` floats
SETTLED_ARRAYS, SETTLED_VECTORS = 4, 32
ESTIMATE_HINT = "Lower max_iter or set estimate_risk=False. "


@dataclass
class RiskEstimate:
    """The risk estimate of a trajectory (:func:`trajectory_risk`), ``T + 1``
    iterates.

    Attributes
    ----------
    risk : ndarray of shape (T + 1,)
    reliable : ndarray of bool of shape (T + 1,)
        :func:`~skacv.estimates.risk._reliability.risk_reliability`.
    df_fraction, amplification : ndarray of shape (T + 1,)
    failures : dict of str to ndarray of bool of shape (T + 1,)
    momentum : bool
    risk_matrix : ndarray of shape (T + 1, T + 1) or None
        ``G``, whose diagonal is ``risk`` (``None``: not formed).
    memory_matrix, memory_matrix_sources : ndarray of shape (T + 1, T + 1) or None
        ``A`` of the outputs and of the gradient points (``K`` of the robust
        estimate).
    corrected_residuals, residuals : ndarray of shape (n_samples, T + 1) or None
        ``R`` (what the debiasing reads) and ``F``.
    correction : ndarray of shape (T + 1, T + 1) or None
        ``K`` with ``R = F K^T``.
    products : Bunch or None
        The residuals' inner products (``products=True``).
    chain_state : object or None
        The state a longer path continues.
    support : ndarray of shape (T + 1,) or None
    n_eff : float or None
    n_probes : int or None
    probe_noise, choice_noise : float or None
        The pooled probes' measured noise of the level and of the choice.
    """

    risk: np.ndarray
    reliable: np.ndarray
    df_fraction: np.ndarray
    amplification: np.ndarray
    failures: dict
    momentum: bool
    risk_matrix: np.ndarray | None = None
    memory_matrix: np.ndarray | None = None
    memory_matrix_sources: np.ndarray | None = None
    corrected_residuals: np.ndarray | None = None
    correction: np.ndarray | None = None
    residuals: np.ndarray | None = None
    products: Bunch | None = None
    chain_state: object = None
    support: np.ndarray | None = None
    n_eff: float | None = None
    n_probes: int | None = None
    probe_noise: float | None = None
    choice_noise: float | None = None


def dense_bytes(n_iterates, n_matrices=DENSE_MATRICES):
    """Bytes of ``n_matrices`` matrices of ``n_iterates x n_iterates`` floats."""
    return n_matrices * 8.0 * int(n_iterates) ** 2


def check_dense_memory(n_iterates, n_matrices=DENSE_MATRICES):
    """Refuse, before anything is allocated, ``n_matrices`` matrices of
    ``n_iterates x n_iterates`` floats above ``path_memory_limit``."""
    T1 = int(n_iterates)
    n_bytes = dense_bytes(T1, n_matrices)
    check_memory(n_bytes, f"The risk estimate of {T1} iterates ({n_matrices} matrices of "
                 f"{T1} x {T1} floats, {n_bytes:,.0f} bytes)", ESTIMATE_HINT)
