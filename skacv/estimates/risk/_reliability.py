"""Per-iterate diagnostics of the memory-matrix risk estimate of Bellec & Tan
(2024): the first failing iterate and every later one are flagged.
"""

import numpy as np
from scipy.linalg import solve_triangular

from ._readout import _correction


def risk_reliability(A, A_sources, n_eff, statistics, fit_intercept=False, proximal=False,
                     support=None, return_failures=False, row_l1=None, df_low=None):
    """Per-iterate diagnostics of the memory-matrix estimate.

    The degrees-of-freedom fraction ``df_t = (sum_s A[t, s] + c) / n`` (``c =
    1`` with an intercept) lies in ``[0, 1)`` for a proximal method whenever
    the estimate is meaningful. Row ``t`` of the correction ``(I - A/n)^{-1}``
    has an l1 norm close to ``1 / (1 - df_t)`` without cancellations (ISTA,
    gradient descent), far above it when a momentum method's Jacobians
    oscillate in sign (FISTA on an ill-conditioned restricted Gram matrix),
    where the estimate's variance explodes.

    Parameters
    ----------
    A, A_sources : ndarray of shape (T + 1, T + 1)
    n_eff : float
    statistics : StatisticalPolicy
        Its ``df_low``, ``df_high``, ``support_df_limit`` and
        ``amplification_limit``.
    fit_intercept : bool, default=False
    proximal : bool, default=False
        A non-linear prox (the ``[0, 1)`` test applies).
    support : ndarray of shape (T + 1,), default=None
        Support sizes: ``n df_t`` above ``support_df_limit`` times the support
        (+ 1 with an intercept) fails.
    return_failures : bool, default=False
    row_l1 : ndarray of shape (T + 1,), default=None
        The l1 norms of the rows of ``(I (1 - c/n) - A_sources/n)^{-1}`` if
        already computed.
    df_low : float or ndarray of shape (T + 1,), default=None
        The lowest df fraction trusted at each iterate (``None``: the
        policy's ``df_low``), lower where the df is a noisy estimate.

    Returns
    -------
    reliable : ndarray of bool, shape (T + 1,)
        ``False`` from the first failing iterate on.
    df_fraction : ndarray of shape (T + 1,)
    amplification : ndarray of shape (T + 1,)
        ``||row t of (I - A_src/n)^{-1}||_1 * (1 - df_t)``; 1 without
        cancellations.
    failures : dict
        With ``return_failures``: :func:`reliability_failures`.
    """
    T1 = A.shape[0]
    c = 1.0 if fit_intercept else 0.0
    df = (np.tril(A, -1).sum(axis=1) + c) / n_eff
    with np.errstate(all="ignore"):
        if row_l1 is None:
            row_l1 = np.abs(solve_triangular(_correction(A_sources, n_eff, c), np.eye(T1),
                                             lower=True, check_finite=False)).sum(axis=1)
        amp = row_l1 * (1.0 - c / n_eff) * np.maximum(1.0 - df, 1e-12)
    return _reliability(df, amp, n_eff, statistics, fit_intercept, proximal, support,
                        return_failures, df_low)


def _reliability(df, amp, n_eff, statistics, fit_intercept, proximal, support, return_failures,
                 df_low=None):
    """:func:`risk_reliability` from the degrees of freedom and the amplification."""
    failed = reliability_failures(df, amp, n_eff, statistics, fit_intercept, proximal, support,
                                  df_low)
    ok = ~np.logical_or.reduce(list(failed.values()))
    reliable = np.logical_and.accumulate(ok)
    if return_failures:
        return reliable, df, amp, failed
    return reliable, df, amp


def reliability_failures(df, amp, n_eff, statistics, fit_intercept=False, proximal=False,
                         support=None, df_low=None):
    """The checks of :func:`risk_reliability` per iterate: boolean arrays,
    ``True`` where ``"not_finite"``, for proximal methods ``"df_high"``
    (nearly interpolates), ``"df_low"`` (below ``df_low``, default the
    policy's) and ``"amplification"``, with ``support`` ``"support"`` fail."""
    c = 1.0 if fit_intercept else 0.0
    failed = {"not_finite": ~(np.isfinite(df) & np.isfinite(amp))}
    with np.errstate(invalid="ignore"):
        if proximal:
            failed["df_high"] = df >= statistics.df_high
            failed["df_low"] = df < (statistics.df_low if df_low is None else df_low)
            failed["amplification"] = amp > statistics.amplification_limit
        if support is not None:
            failed["support"] = df * n_eff > statistics.support_df_limit * (
                np.asarray(support, dtype=float) + c)
    return failed
