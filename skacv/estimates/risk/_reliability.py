"""Per-iterate diagnostics of the memory-matrix risk estimate.

Where the estimate of Bellec & Tan (2024) is meaningful, the degrees of
freedom of every iterate lie in ``[0, 1)`` (proximal methods), stay within
the size of its support, and the correction ``(I - A/n)^{-1}`` does not
amplify the residuals beyond what a memory matrix without cancellations
would (:func:`risk_reliability`); the first failing iterate and every later
one are flagged.
"""

import numpy as np
from scipy.linalg import solve_triangular

from ._readout import _correction

#: lowest degrees-of-freedom fraction accepted (Hutchinson noise around 0)
DF_LOW = -0.05
#: highest degrees-of-freedom fraction accepted: from there the estimate's
#: factor ``1 / (1 - df)^2`` exceeds 1e4, so that an error of 1e-3 in ``df``
#: (probe noise) moves it by 20 % and more; the iterate (nearly)
#: interpolates. ISTA with a tiny penalty on 100 x 200 reached 0.99999996
#: with exact traces, never 1, while its probes' estimates fell on either
#: side of 1
DF_HIGH = 0.99
#: largest accepted ratio between the degrees of freedom ``n df_t`` of an
#: iterate and the size of its support (+ 1 with an intercept): the fitted
#: values of a sparse iterate live on its support, ``n df_t <= |S_t| *
#: ||X~ d x^t / d y||_2``, and the operator norm is about 1 where the
#: estimate is right (ISTA: ratio <= 0.4; clipped FISTA: <= 1.2 on the
#: correlated designs of the tests) and larger where the Jacobian of a
#: momentum method amplifies (ratio 4 where the estimate was 140 % off)
SUPPORT_DF_LIMIT = 1.5
#: largest accepted ratio between the l1 norm of a row of ``(I - A/n)^{-1}``
#: and its value for a memory matrix without cancellations, ``1 / (1 - df)``
AMPLIFICATION_LIMIT = 2.0


def risk_reliability(A, A_sources, n_eff, fit_intercept=False, proximal=False,
                     support=None, return_failures=False, inverse=None):
    """Per-iterate diagnostics of the memory-matrix estimate.

    The degrees-of-freedom fraction of iterate ``t`` is
    ``df_t = (sum_s A[t, s] + c) / n`` (``c = 1`` with an intercept): the
    divergence of its fitted values over ``n``. For a proximal method (a
    prox whose Jacobian is a projection) it lies in ``[0, 1)`` whenever the
    estimate is meaningful. The correction ``(I - A/n)^{-1}`` mixes the
    residuals of all earlier iterates; its row ``t`` has an l1 norm close
    to ``1 / (1 - df_t)`` when the memory matrix has no cancellations (ISTA,
    gradient descent), and far above it when the Jacobians of a momentum
    method oscillate in sign (FISTA on an ill-conditioned restricted Gram
    matrix), where the estimate's variance explodes.

    Parameters
    ----------
    A, A_sources : ndarray of shape (T + 1, T + 1)
        Memory matrices of the outputs and of the gradient points.
    n_eff : float
    fit_intercept : bool, default=False
    proximal : bool, default=False
        The iterations apply a non-linear prox (the ``[0, 1)`` test applies).
    support : ndarray of shape (T + 1,), default=None
        Number of non-zero coefficients of every iterate (sparse proximal
        methods): ``n df_t`` above ``SUPPORT_DF_LIMIT`` times the support
        (+ 1 with an intercept) fails.

    Returns
    -------
    reliable : ndarray of bool, shape (T + 1,)
        ``False`` from the first failing iterate on (the correction carries
        the failure to every later iterate).
    df_fraction : ndarray of shape (T + 1,)
    amplification : ndarray of shape (T + 1,)
        ``||row t of (I - A_src/n)^{-1}||_1 * (1 - df_t)``; 1 without
        cancellations.
    failures : dict
        Only with ``return_failures=True``: which check each iterate fails
        (:func:`reliability_failures`).

    ``inverse``: ``(I (1 - c/n) - A_sources/n)^{-1}`` if already computed
    (:func:`residual_correction`'s ``K`` without extrapolation).
    """
    T1 = A.shape[0]
    c = 1.0 if fit_intercept else 0.0
    df = (np.tril(A, -1).sum(axis=1) + c) / n_eff
    with np.errstate(all="ignore"):
        Linv = inverse
        if Linv is None:
            Linv = solve_triangular(_correction(A_sources, n_eff, c), np.eye(T1), lower=True,
                                    check_finite=False)
        amp = np.abs(Linv).sum(axis=1) * (1.0 - c / n_eff) * np.maximum(1.0 - df, 1e-12)
    return _reliability(df, amp, n_eff, fit_intercept, proximal, support, return_failures)


def _reliability(df, amp, n_eff, fit_intercept, proximal, support, return_failures):
    """:func:`risk_reliability` from the degrees of freedom and the amplification."""
    failed = reliability_failures(df, amp, n_eff, fit_intercept, proximal, support)
    ok = ~np.logical_or.reduce(list(failed.values()))
    reliable = np.logical_and.accumulate(ok)
    if return_failures:
        return reliable, df, amp, failed
    return reliable, df, amp


def reliability_failures(df, amp, n_eff, fit_intercept=False, proximal=False, support=None):
    """The checks of :func:`risk_reliability`, each iterate on its own:
    a dict of boolean arrays of shape (T + 1,), ``True`` where the check
    fails (``"not_finite"``; for proximal methods ``"df_high"``: ``df_t >=
    DF_HIGH``, the iterate (nearly) interpolates; ``"df_low"``: ``df_t <
    DF_LOW``;
    ``"amplification"``; with ``support``, ``"support"``)."""
    c = 1.0 if fit_intercept else 0.0
    failed = {"not_finite": ~(np.isfinite(df) & np.isfinite(amp))}
    with np.errstate(invalid="ignore"):
        if proximal:
            failed["df_high"] = df >= DF_HIGH
            failed["df_low"] = df < DF_LOW
            failed["amplification"] = amp > AMPLIFICATION_LIMIT
        if support is not None:
            failed["support"] = df * n_eff > SUPPORT_DF_LIMIT * (
                np.asarray(support, dtype=float) + c)
    return failed
