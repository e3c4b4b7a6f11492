"""What the risk estimate returns (:class:`RiskEstimate`) and the memory
its dense ``(T + 1) x (T + 1)`` matrices need (:func:`check_dense_memory`)."""

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
        The estimated out-of-sample risk of every iterate.
    reliable : ndarray of bool of shape (T + 1,)
        The iterates whose estimate is to be trusted
        (:func:`~skacv.estimates.risk._reliability.risk_reliability`).
    df_fraction : ndarray of shape (T + 1,)
        The degrees of freedom of every iterate over ``n_eff``.
    amplification : ndarray of shape (T + 1,)
        The amplification of the probes' noise by the correction.
    failures : dict of str to ndarray of bool of shape (T + 1,)
        Which reliability check every iterate fails.
    momentum : bool
        Whether the iteration has momentum on this path.
    risk_matrix : ndarray of shape (T + 1, T + 1) or None
        The corrected residuals' Gram matrix over ``n_eff`` (its diagonal is
        ``risk``); ``None`` when not formed (``matrices=False`` and the
        settled form).
    memory_matrix, memory_matrix_sources : ndarray of shape (T + 1, T + 1) or None
        ``A`` of the outputs and of the gradient points (the matrix ``K``
        of the robust estimate); ``None`` as ``risk_matrix``.
    corrected_residuals : ndarray of shape (n_samples, T + 1) or None
        Full-batch least squares (and the robust estimate's least squares)
        unless ``products``; what the debiasing reads
        (:mod:`skacv.estimates.risk._uq`).
    correction : ndarray of shape (T + 1, T + 1) or None
        The correction ``K`` with ``R = F K^T`` of :func:`risk_from_memory`
        (``None`` for a clipped extrapolation, the settled and the robust
        forms).
    residuals : ndarray of shape (n_samples, T + 1) or None
        The training residuals ``F`` (``None`` with ``products`` and for a
        robust loss).
    products : Bunch or None
        The residuals' inner products in the features' space with
        ``products=True`` (:func:`residual_products`, with ``P`` and ``Q``;
        the settled form's ``W`` and ``FR``).
    chain_state : object or None
        The state a longer path of the same trajectory continues
        (:mod:`skacv.estimates.risk._state`).
    support : ndarray of shape (T + 1,) or None
        The support's size at every iterate of an L1-penalised path.
    n_eff : float or None
        The effective number of samples (``None``: the robust estimate).
    n_probes : int or None
        The probes the estimate used (``None``: exact traces, the settled
        and the robust forms).
    probe_noise, choice_noise : float or None
        The pooled probes' measured noise of the level and of the choice
        (``n_probes="auto"``; ``None`` when not measured).
    settled_step : int or None
        The step after which the settled form took over (``None``: not
        settled).
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
    settled_step: int | None = None


def check_dense_memory(n_iterates, n_matrices=DENSE_MATRICES):
    """Refuse, before anything is allocated, a risk estimate whose ``n_matrices``
    matrices of ``n_iterates x n_iterates`` floats are above ``path_memory_limit``
    (the message names the bytes, the limit and the fixes)."""
    T1 = int(n_iterates)
    n_bytes = n_matrices * 8.0 * T1 * T1
    check_memory(n_bytes, f"The risk estimate of {T1} iterates ({n_matrices} matrices of "
                 f"{T1} x {T1} floats, {n_bytes:,.0f} bytes)", ESTIMATE_HINT)
