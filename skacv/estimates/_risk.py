"""Out-of-sample risk along a trajectory: the memory-matrix estimate.

Bellec & Tan (2024). For iterates ``x^0..x^T`` (``coef_path``) produced by an
:class:`~skacv.Iteration` from gradient points ("sources") ``v^0..v^{T-1}``,

* ``F`` (n, T+1): training residuals ``y~ - X~ x^t``;
* ``A`` (T+1, T+1), strictly lower triangular: ``A[t, s] = tr(X~ dx^t/dy^(s))``
  where the copy ``y^(s)`` of the response enters only through the gradient
  evaluated at ``v^s`` (used by step ``s + 1``). ``A_src`` is the same for the
  sources ``v^t`` (they differ only for extrapolating methods);
* corrected residuals of the sources ``R_v = F_v (I - A_src/n - c I/n)^{-T}``
  and of the outputs ``R_x = (F_x + R_v (A/n)^T) / (1 - c/n)``, with ``c = 1``
  when an intercept is fitted (the intercept of every iterate is the mean of
  its own residual, a diagonal entry of the memory matrix) and ``c = 0``
  otherwise;
* the estimate ``R_x^T R_x / n`` of ``E[(y_new - x_new^T x^t - b0^t)(...s)]``.

With sample weights (frequency weights) every ``n`` is ``n_eff = sum(w)``,
``X~`` and ``y~`` carry ``sqrt(w)`` and the traces are the traces of the
weighted problem, which equals repeating rows.

Traces are computed spectrally for linear iterations
(:mod:`skacv.estimates._risk_spectral`) and by propagating Jacobian actions through
the masks of the prox for ISTA/FISTA (:mod:`skacv.estimates._risk_chains`).
Long paths whose supports settle (and linear iterations) keep the memory
matrices in a state-space form and correct the residuals by forward
recursions, linear in ``T`` (:class:`~skacv.estimates._risk_core_space.SettledMemory`,
:func:`trajectory_risk`); every other estimate checks its ``(T + 1) x (T +
1)`` matrices against ``path_memory_limit`` before allocating them.
"""

import time

import numpy as np
from scipy.linalg import solve_triangular
from sklearn.utils import Bunch, check_random_state

from .._config import check_memory, format_bytes, get_config
from .._policy import get_policy
from ..exceptions import EstimateBudgetError
from ..utils._parallel import small_blas
from ._risk_chains import (
    curvature_memory_matrices,
    design_columns,
    masked_memory_matrix,
    resolve_chain_dtype,
    uses_heavy_ball,
)
from ._risk_core_space import linear_settled_memory, settled_memory, settled_step
from ._risk_independent import independent_memory_matrix, probe_scheme
from ._risk_spectral import (
    exact_nodes,
    lanczos_check,
    lanczos_nodes,
    preconditioned_memory_matrix,
    spectral_memory_matrix,
)

# ----------------------------------------------------------------------------
# the estimate from (F, A)
# ----------------------------------------------------------------------------


def _intercept_term(fit_intercept, n_eff):
    """``1`` with an intercept (its degree of freedom), else ``0``."""
    if fit_intercept and n_eff <= 1:
        raise ValueError(
            "Estimating the risk with fit_intercept=True needs more than one "
            f"sample; got n_samples = {n_eff:g}."
        )
    return 1.0 if fit_intercept else 0.0


def _extrapolate_columns(iteration, M):
    """Columns of the sources from columns of the outputs (last axis = t)."""
    out = np.array(M, dtype=np.float64, copy=True)
    for k in range(1, M.shape[-1]):
        if iteration.beta(k) != 0.0:
            out[..., k] = iteration.extrapolate(k, M[..., k], M[..., k - 1])
    return out


def source_residuals(design, iteration, F, coef_path):
    """Training residuals ``y~ - X~ v^t`` of the gradient points, shape (n, T + 1).

    ``v^t = x^t + beta_t (x^t - x^{t-1})`` is a combination of the outputs, so
    its residual combines ``F``'s columns; a clipped extrapolation
    (:meth:`~skacv.iterations._iterations.Iteration.extrapolation_coefficients`) adds a
    correction ``C[:, t]`` whose few non-zero rows cost one product.
    """
    Fv = _extrapolate_columns(iteration, F)
    T1 = coef_path.shape[1]
    C = np.zeros(coef_path.shape)
    for t in range(1, T1):
        c = iteration.extrapolation_correction(t, coef_path[:, t], coef_path[:, t - 1])
        if c is not None:
            C[:, t] = c
    rows = np.flatnonzero(np.any(C != 0, axis=1))
    if rows.size:
        cols = np.asarray(design.columns(rows), dtype=np.float64)
        Fv -= cols @ C[rows]
    return Fv


def source_points(iteration, coef_path):
    """The gradient points ``v^t`` of the path (shape of ``coef_path``):
    column ``t`` is the extrapolation of step ``t`` from ``x^t`` and
    ``x^{t-1}`` (clipped if so set), column 0 the start; the points whose
    residuals :func:`source_residuals` gives."""
    B = np.asarray(coef_path, dtype=np.float64)
    V = B.copy()
    for t in range(1, B.shape[1]):
        V[:, t] = iteration.extrapolate_iterate(t, B[:, t], B[:, t - 1])
    return V


def _correction(A_sources, n_eff, c):
    """``(1 - c/n) I - tril(A_src, -1) / n``: the lower-triangular matrix whose
    inverse corrects the residuals (used by the estimate and its diagnostics)."""
    T1 = A_sources.shape[0]
    return np.eye(T1) * (1.0 - c / n_eff) - np.tril(A_sources, -1) / n_eff


def residual_correction(A, n_eff, fit_intercept=False, A_sources=None, iteration=None):
    """The lower-triangular matrix ``K`` whose product corrects the residuals.

    The corrected residuals of the outputs are ``R_x = F K^T`` (``F`` the
    training residuals of the outputs): ``K = (I (1 - c/n) - A/n)^{-1}``
    without extrapolation, and with extrapolation (sources ``v^t`` differing
    from the outputs ``x^t``) ``K^T = (I + E L^{-T} (A/n)^T) / (1 - c/n)``,
    where ``F E`` are the residuals of the sources and ``L`` the correction
    of the sources' memory matrix. Parameters as in :func:`risk_from_memory`.

    Returns
    -------
    K : ndarray of shape (T + 1, T + 1)
    """
    A = np.asarray(A, dtype=np.float64)
    T1 = A.shape[0]
    c = 1.0 if fit_intercept else 0.0
    eye = np.eye(T1)
    if A_sources is None:
        return solve_triangular(_correction(A, n_eff, c), eye, lower=True, check_finite=False)
    A_sources = np.asarray(A_sources, dtype=np.float64)[:T1, :T1]
    L_inv = solve_triangular(_correction(A_sources, n_eff, c), eye, lower=True,
                             check_finite=False)
    E = _extrapolate_columns(iteration, eye)  # residuals of the sources: F @ E
    return ((eye + E @ L_inv.T @ (np.tril(A, -1) / n_eff).T) / (1.0 - c / n_eff)).T


def risk_from_memory(F, A, n_eff, fit_intercept=False, A_sources=None, iteration=None,
                     return_residuals=False, F_sources=None):
    """Memory-matrix risk estimate from residuals and traces.

    Parameters
    ----------
    F : ndarray of shape (n_samples, T + 1)
        Training residuals of the outputs ``x^t`` (weighted by ``sqrt(w)``).
    A : ndarray of shape (T + 1, T + 1)
        Memory matrix of the outputs (strictly lower triangular).
    n_eff : float
        Number of samples (``sum(sample_weight)``).
    fit_intercept : bool, default=False
        Adds the intercept's diagonal term.
    A_sources : ndarray of shape (T + 1, T + 1), default=None
        Memory matrix of the gradient points; ``None`` when they are the
        outputs (no extrapolation).
    iteration : Iteration, default=None
        Needed with ``A_sources`` to form the residuals of the sources.
    return_residuals : bool, default=False
        Also return the corrected residuals and the correction.
    F_sources : ndarray of shape (n_samples, T + 1), default=None
        Residuals of the gradient points when they are not combinations of
        the outputs' (:func:`source_residuals`, clipped extrapolation):
        ``R_x = (F + F_sources L^{-T} (A/n)^T) / (1 - c/n)``, and the
        returned correction is ``None``.

    Returns
    -------
    risk : ndarray of shape (T + 1,)
        Estimated out-of-sample risk of every output.
    risk_matrix : ndarray of shape (T + 1, T + 1)
        Estimated cross terms ``E[(y - yhat_t)(y - yhat_s)]``.
    corrected_residuals : ndarray of shape (n_samples, T + 1)
        ``R_x = F K^T`` (only with ``return_residuals``).
    correction : ndarray of shape (T + 1, T + 1)
        ``K`` of :func:`residual_correction` (only with ``return_residuals``).
    """
    F = np.asarray(F, dtype=np.float64)
    T1 = F.shape[1]
    _intercept_term(fit_intercept, n_eff)  # refuses one sample with an intercept
    A = np.asarray(A, dtype=np.float64)[:T1, :T1]
    if F_sources is not None:
        c = 1.0 if fit_intercept else 0.0
        eye = np.eye(T1)
        L_inv = solve_triangular(_correction(np.asarray(A_sources, dtype=np.float64)[:T1, :T1],
                                             n_eff, c), eye, lower=True, check_finite=False)
        K = None
        R_x = (F + np.asarray(F_sources, dtype=np.float64) @ (
            L_inv.T @ (np.tril(A, -1) / n_eff).T)) / (1.0 - c / n_eff)
    else:
        K = residual_correction(A, n_eff, fit_intercept, A_sources, iteration)
        R_x = F @ K.T
    G = R_x.T @ R_x / n_eff
    if return_residuals:
        return np.diag(G).copy(), G, R_x, K
    return np.diag(G).copy(), G


def residual_products(design, y_tilde, coef_path, sources=None):
    """Inner products of the residual matrices ``F = y~ 1^T - X~ B`` (``B``
    the path) and ``F_v = y~ 1^T - X~ B_v`` (``B_v`` the gradient points,
    ``sources``) in the features' space, from ``C = X~^T X~`` (the design's
    Gram matrix) and ``c = X~^T y~``: ``F^T F``, ``X~^T F`` (and
    ``F^T F_v``, ``F_v^T F_v``, ``X~^T F_v``), ``O(p^2 T + p T^2)`` flops
    instead of ``O(n T^2)`` for many samples and few features.

    Returns
    -------
    products : Bunch
        ``FF`` (T+1, T+1), ``XF`` (n_features, T+1); with ``sources`` also
        ``FFv``, ``FvFv`` (T+1, T+1) and ``XFv`` (n_features, T+1). Also the
        residuals in the basis ``[y~, X~]`` (:func:`residual_basis`): ``M``
        and ``Phi`` (``Phiv`` with ``sources``), ``FF = Phi^T M Phi``.
    """
    M = residual_basis(design, y_tilde)
    C = M[1:, 1:]
    c = M[1:, 0]
    yy = float(M[0, 0])

    def cross(B1, CB1, B2, CB2):  # (y 1^T - X B1)^T (y 1^T - X B2)
        return (yy - (c @ B1)[:, None] - (c @ B2)[None, :]) + B1.T @ CB2

    B = np.asarray(coef_path, dtype=np.float64)
    CB = C @ B
    out = Bunch(FF=cross(B, CB, B, CB), XF=c[:, None] - CB, M=M,
                Phi=np.vstack([np.ones((1, B.shape[1])), -B]))
    if sources is not None:
        Bv = np.asarray(sources, dtype=np.float64)
        CBv = C @ Bv
        out.update(FFv=cross(B, CB, Bv, CBv), FvFv=cross(Bv, CBv, Bv, CBv),
                   XFv=c[:, None] - CBv, Phiv=np.vstack([np.ones((1, Bv.shape[1])), -Bv]))
    return out


def residual_basis(design, y_tilde):
    """The Gram matrix ``M = [y~, X~]^T [y~, X~]`` of shape (p + 1, p + 1): a
    residual ``y~ - X~ b`` has the coefficients ``[1; -b]`` in the basis
    ``[y~, X~]``, and ``(y~ - X~ b)^T (y~ - X~ b') = [1; -b]^T M [1; -b']``
    (from the design's ``X~^T X~``: no pass over the samples)."""
    C = design.gram(side="features") * design.n_eff
    y = np.asarray(y_tilde, dtype=np.float64)
    c = np.asarray(design.rmatvec(y), dtype=np.float64).ravel()
    return np.block([[np.array([[y @ y]]), c[None, :]], [c[:, None], C]])


def risk_from_products(products, A, n_eff, fit_intercept=False, A_sources=None,
                       iteration=None):
    """:func:`risk_from_memory` from :func:`residual_products` instead of the
    residual matrices: ``R = F P + F_v Q`` (``Q`` with the gradient points'
    products, a clipped extrapolation), ``G = R^T R / n``.

    Returns
    -------
    risk, risk_matrix : as :func:`risk_from_memory`
    P, Q : ndarray of shape (T + 1, T + 1) (``Q`` ``None`` without sources)
    correction : ndarray of shape (T + 1, T + 1) or None
        ``K`` (``P = K^T``), ``None`` with sources.

    With the residuals' basis (``M``, ``Phi``, ``Phiv`` of
    :func:`residual_products`) and fewer features than iterates, ``G =
    Gam^T M Gam / n`` with ``Gam = Phi P + Phiv Q``: ``O(p T^2)`` flops
    instead of the ``O(T^3)`` of ``P^T F^T F P``.
    """
    FF = products.FF
    T1 = FF.shape[0]
    _intercept_term(fit_intercept, n_eff)
    A = np.asarray(A, dtype=np.float64)[:T1, :T1]
    low_rank = "Phi" in products and products.Phi.shape[0] < T1
    if "FvFv" in products:
        c = 1.0 if fit_intercept else 0.0
        L_inv = solve_triangular(_correction(np.asarray(A_sources, dtype=np.float64)[:T1, :T1],
                                             n_eff, c), np.eye(T1), lower=True,
                                 check_finite=False)
        P = np.eye(T1) / (1.0 - c / n_eff)
        Q = (L_inv.T @ (np.tril(A, -1) / n_eff).T) / (1.0 - c / n_eff)
        K = None
        if low_rank:
            Gam = products.Phi @ P + products.Phiv @ Q
            G = Gam.T @ (products.M @ Gam) / n_eff
        else:
            FR = FF @ P + products.FFv @ Q
            G = (P.T @ FR + Q.T @ (products.FFv.T @ P + products.FvFv @ Q)) / n_eff
    else:
        K = residual_correction(A, n_eff, fit_intercept, A_sources, iteration)
        P, Q = K.T, None
        if low_rank:
            Gam = products.Phi @ P
            G = Gam.T @ (products.M @ Gam) / n_eff
        else:
            G = K @ FF @ K.T / n_eff
    G = (G + G.T) / 2.0  # symmetric up to rounding
    return np.diag(G).copy(), G, P, Q, K


def risk_from_sources(F, Psi, A, K, n_eff, trace_d=None, fit_intercept=False):
    """Robust / mini-batch risk estimate from residuals, sources and traces.

    Tan & Bellec (2024): with ``K^ = diag(tr D_t) - K`` and ``W = K^{-1} A``
    (a lower-triangular solve),

        R_t = F_t + sum_{s<t} W[t, s] Psi_s,    risk_t = ||R_t||^2 / n_eff,

    which estimates ``||Sigma^{1/2}(b^t - beta)||^2 + ||eps||^2 / n``. For
    the square loss with full-batch gradients (``Psi = F``, ``K = A``,
    ``tr D_t = n``) this is :func:`risk_from_memory`. An intercept fitted by
    centring (least squares) is the diagonal source ``F_t`` with
    ``A[t, t] = K[t, t] = 1`` (``fit_intercept=True``).

    Parameters
    ----------
    F : ndarray of shape (n_samples, T + 1)
        Training residuals ``y~ - X~ x^t`` (weighted by ``sqrt(w)``).
    Psi : ndarray of shape (n_samples, T + 1)
        Sources: column ``s`` is the gradient residual ``sqrt(w) psi(r^s)``
        on the rows of the batch of step ``s + 1`` (zero elsewhere; the last
        column is unused).
    A, K : ndarray of shape (T + 1, T + 1)
        Traces of :func:`skacv.estimates._risk_chains.curvature_memory_matrices`
        (strictly lower triangular).
    n_eff : float
    trace_d : ndarray of shape (T + 1,), default=None
        ``tr D_t = sum_i w_i psi'(r_i^t)``; ``None``: ``n_eff`` (square loss).
    fit_intercept : bool, default=False
        Least squares with an intercept by centring.

    Returns
    -------
    risk : ndarray of shape (T + 1,)
    risk_matrix : ndarray of shape (T + 1, T + 1)
    W : ndarray of shape (T + 1, T + 1)
        The lower-triangular mixing weights (diagonal: the intercept).
    """
    F = np.asarray(F, dtype=np.float64)
    T1 = F.shape[1]
    c = _intercept_term(fit_intercept, n_eff)
    trace_d = np.full(T1, float(n_eff)) if trace_d is None else np.asarray(trace_d, float)
    diag = trace_d[:T1] - c
    # no inlier at iterate t (tr D_t = 0): nothing to correct there
    safe = np.where(diag > 0, diag, 1.0)
    Khat = np.diag(safe) - np.tril(np.asarray(K, dtype=np.float64)[:T1, :T1], -1)
    rhs = np.tril(np.asarray(A, dtype=np.float64)[:T1, :T1], -1) + c * np.eye(T1)
    rhs[diag <= 0] = 0.0
    W = solve_triangular(Khat, rhs, lower=True, check_finite=False)
    R = F + np.asarray(Psi, dtype=np.float64) @ np.tril(W, -1).T
    if c:
        R += F * np.diag(W)
    G = R.T @ R / n_eff
    return np.diag(G).copy(), G, W


#: lowest degrees-of-freedom fraction accepted (Hutchinson noise around 0)
DF_LOW = -0.05
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


def _has_momentum(iteration, n_steps):
    """An extrapolation or a heavy ball at some step ``1..n_steps`` (the
    cause the reliability warning names for an amplifying Jacobian)."""
    return any(iteration.beta(k) != 0.0 or iteration.hb(k) != 0.0
               for k in range(1, n_steps + 1))


def reliability_failures(df, amp, n_eff, fit_intercept=False, proximal=False, support=None):
    """The checks of :func:`risk_reliability`, each iterate on its own:
    a dict of boolean arrays of shape (T + 1,), ``True`` where the check
    fails (``"not_finite"``; for proximal methods ``"df_high"``: ``df_t >=
    1``, the iterate interpolates; ``"df_low"``: ``df_t < DF_LOW``;
    ``"amplification"``; with ``support``, ``"support"``)."""
    c = 1.0 if fit_intercept else 0.0
    failed = {"not_finite": ~(np.isfinite(df) & np.isfinite(amp))}
    with np.errstate(invalid="ignore"):
        if proximal:
            failed["df_high"] = df >= 1.0
            failed["df_low"] = df < DF_LOW
            failed["amplification"] = amp > AMPLIFICATION_LIMIT
        if support is not None:
            failed["support"] = df * n_eff > SUPPORT_DF_LIMIT * (
                np.asarray(support, dtype=float) + c)
    return failed


#: Hutchinson probes used by ``n_probes="auto"`` when exact traces are not cheap
AUTO_PROBES = 10
#: ``n_probes="auto"``: exact traces when they cost at most this many times
#: the probes' computation
AUTO_EXACT_FACTOR = 4.0
#: and, for linear methods, the eigendecomposition is at most this size
AUTO_EXACT_MAX_DIM = 2000


def _spectral(design, iteration, datafit=None):
    """The memory matrix is a spectral sum: full-batch least squares with a
    linear iteration or a fixed preconditioner (else: Jacobian chains)."""
    if iteration.sampler is not None or not (datafit is None or datafit.quadratic):
        return False
    return getattr(iteration, "preconditioner", None) is not None or iteration.is_linear


def resolve_n_probes(n_probes, design, iteration, n_iter, datafit=None):
    """The number of probes (``None``: exact traces) of ``n_probes="auto"``.

    Exact traces remove the probe noise (two fits give the same estimate);
    they are used when they cost at most ``AUTO_EXACT_FACTOR`` times the
    ``AUTO_PROBES`` probes:

    * linear iterations (gradient descent, Nesterov, heavy ball, ridge):
      one eigendecomposition of the smaller Gram matrix, ``m^3 / 3`` flops
      for ``m = min(n, p) <= AUTO_EXACT_MAX_DIM``, against Lanczos with the
      probes, ``2 n p`` per probe and level, ``n_iter / 2 + 2`` levels;
    * Jacobian chains (ISTA, FISTA, mini-batch SGD, robust losses): the
      chains start from the ``n`` canonical vectors instead of the probes:
      exact when ``n <= AUTO_EXACT_FACTOR * AUTO_PROBES``.

    Any other value is returned unchanged.
    """
    if not (isinstance(n_probes, str) and n_probes == "auto"):
        return n_probes
    n, p = design.n_samples, design.n_features
    if _spectral(design, iteration, datafit):
        m = min(n, p)
        exact = m ** 3 / 3.0
        probes = AUTO_PROBES * 2.0 * n * p * (n_iter / 2 + 2)
        cheap = m <= AUTO_EXACT_MAX_DIM and exact <= AUTO_EXACT_FACTOR * probes
    else:
        cheap = n <= AUTO_EXACT_FACTOR * AUTO_PROBES
    return None if cheap else AUTO_PROBES


#: (T + 1) x (T + 1) float64 matrices the dense estimate holds at its peak (the
#: memory matrices, the correction and its inverse, the risk matrix, temporaries)
DENSE_MATRICES = 8
#: the settled form (:class:`~skacv.estimates._risk_core_space.SettledMemory`)
#: is used when the support stays fixed for at least this many final steps:
#: its recursions cost a few array operations a step in Python, which the
#: dense form's O(T^3) flops pass at a few hundred steps
SETTLED_MIN_TAIL = 512
#: arrays of ``q x (T + 1)`` floats of the settled form (``q``: samples, or
#: features + 1 in the covariance form: the residuals of the outputs and of
#: the gradient points, and their corrections) and vectors of ``T + 1`` floats
SETTLED_ARRAYS, SETTLED_VECTORS = 4, 32
ESTIMATE_HINT = "Lower max_iter or set estimate_risk=False. "


def check_dense_memory(n_iterates, n_matrices=DENSE_MATRICES):
    """Refuse, before anything is allocated, a risk estimate whose ``n_matrices``
    matrices of ``n_iterates x n_iterates`` floats are above ``path_memory_limit``
    (the message names the bytes, the limit and the fixes)."""
    T1 = int(n_iterates)
    n_bytes = n_matrices * 8.0 * T1 * T1
    check_memory(n_bytes, f"The risk estimate of {T1} iterates ({n_matrices} matrices of "
                 f"{T1} x {T1} floats, {n_bytes:,.0f} bytes)", ESTIMATE_HINT)


def settled_kind(design, iteration, n_iter, n_probes="auto", datafit=None, keep_state=False):
    """Which settled form a trajectory of ``n_iter`` steps may take
    (:func:`trajectory_risk`): ``"linear"`` (gradient descent, ridge,
    Nesterov: settled from the start), ``"proximal"`` (ISTA / FISTA with
    Hutchinson probes shared by the sources: whether it does depends on the
    supports) or ``None``. Full-batch least squares without heavy ball or
    preconditioner, no warm-start state to keep, at least
    ``SETTLED_MIN_TAIL`` steps."""
    if (keep_state or iteration.sampler is not None
            or not (datafit is None or datafit.quadratic) or n_iter < SETTLED_MIN_TAIL
            or getattr(iteration, "preconditioner", None) is not None
            or uses_heavy_ball(iteration, n_iter)):
        return None
    if iteration.is_linear:
        return "linear"
    n_probes = resolve_n_probes(n_probes, design, iteration, n_iter, datafit)
    if n_probes is not None and probe_scheme(
            iteration, n_probes, n_iter, design.n_samples) == "shared":
        return "proximal"
    return None


def can_settle(design, iteration, n_iter, n_probes="auto", datafit=None, keep_state=False):
    """Whether :func:`settled_kind` is not ``None``."""
    return settled_kind(design, iteration, n_iter, n_probes, datafit, keep_state) is not None


def check_risk_memory(design, iteration, n_iter, n_probes="auto", datafit=None,
                      products=False, keep_state=False):
    """Refuse, before a fit, a risk estimate above ``path_memory_limit``.

    A path that may settle (:func:`can_settle`) needs at least the settled
    form's ``O(q T)`` floats (``q``: samples, or features + 1 with
    ``products``); any other estimate needs its dense ``(T + 1) x (T + 1)``
    matrices (:func:`check_dense_memory`).

    Raises
    ------
    ValueError
        With the bytes, the limit and the fixes.
    """
    T1 = int(n_iter) + 1
    if not can_settle(design, iteration, n_iter, n_probes, datafit, keep_state):
        check_dense_memory(T1)
        return
    q = design.n_features + 1 if products else design.n_samples
    n_bytes = 8.0 * T1 * (SETTLED_ARRAYS * q + SETTLED_VECTORS)
    dense = DENSE_MATRICES * 8.0 * T1 * T1
    check_memory(n_bytes, f"The risk estimate of {T1} iterates (at least {n_bytes:,.0f} bytes "
                 f"when the supports settle; {format_bytes(dense)} for {DENSE_MATRICES} "
                 f"matrices of {T1} x {T1} floats when they do not)", ESTIMATE_HINT)


def memory_matrix(design, iteration, coef_path, *, n_probes=10, random_state=None,
                  chain_dtype=None, verbose=0):
    """Memory matrices of a trajectory (outputs and gradient points).

    Parameters
    ----------
    design : Design
        The centred, weighted design of the fit.
    iteration : Iteration
        The iteration object that produced ``coef_path``.
    coef_path : ndarray of shape (n_features, T + 1)
    n_probes : int, None or "auto", default=10
        Rademacher probes (Hutchinson); ``None`` for exact traces; ``"auto"``:
        exact when cheap (:func:`resolve_n_probes`).
    random_state : int, RandomState instance or None
    chain_dtype : dtype, default=None
        Precision of the Jacobian chains of proximal methods (default: the
        configured ``risk_chain_dtype``, ``"auto"``: float32 with Hutchinson
        probes, the dtype of ``X`` with exact traces).
    verbose : int

    Returns
    -------
    A : ndarray of shape (T + 1, T + 1)
        ``A[t, s] = tr(X~ d x^t / d y^(s))``.
    A_sources : ndarray of shape (T + 1, T + 1)
        Same for the gradient points ``v^t``.

    Raises
    ------
    ValueError
        When the matrices are above ``path_memory_limit`` (before they are
        allocated).
    """
    check_dense_memory(coef_path.shape[1], 4)
    return _memory_matrices(design, iteration, coef_path, n_probes, random_state, chain_dtype,
                            verbose)[:2]


def chain_cost_in_fits(design, coef_path, n_probes, scheme):
    """Predicted time of the proximal chains of :func:`memory_matrix` in
    units of the fit of the same path (``T`` steps of two products with
    ``X~``, ``4 n p`` flops a step).

    The chains are restricted to the features active so far (``s_k`` at
    step ``k``): a step multiplies the support's Gram matrix by ``m``
    columns per block of sources with independent probes (at most ``k // 2
    + 1`` blocks, about 16 once merged), or by the shared probes' ``m``
    columns per open source (meet in the middle: ``m T / 4`` on average);
    ``2 s_k^2`` flops a column, at the speed policy's
    ``chain_gemm_advantage`` times the fit's speed per flop.

    Returns
    -------
    fits : float
    flops : float
        The chains' flops.
    """
    T = coef_path.shape[1] - 1
    if T < 2 or n_probes is None:
        return 0.0, 0.0
    m = float(n_probes)
    active = np.cumsum(np.any(coef_path != 0, axis=0)) > 0  # nothing active before the start
    support = np.maximum.accumulate((coef_path != 0).sum(axis=0)).astype(float)
    support = np.where(active, support, 0.0)
    k = np.arange(T + 1, dtype=float)
    if scheme == "independent":
        columns = m * np.minimum(k // 2 + 1, 16.0)
    else:
        columns = np.full(T + 1, m * T / 4.0)
    flops = float(np.sum(2.0 * support**2 * columns))
    n, p = design.n_samples, design.n_features
    policy = get_policy()
    # the fit's products: two with X~ a step, or one with X~^T X~ (covariance form)
    step = 2.0 * p * p if p < n and p <= policy.covariance_max_features else 4.0 * n * p
    fit = step * T
    return flops / policy.chain_gemm_advantage / max(fit, 1.0), flops


def _check_budget(design, coef_path, n_probes, scheme):
    """Refuse chains that would cost more than ``risk_time_budget`` fits."""
    budget = get_config()["risk_time_budget"]
    if budget is None or scheme != "independent":
        # the shared probes' cost depends on their core space and on where
        # the chains meet, which this model does not see (it overestimated
        # them 5-10 times on small designs): not budgeted
        return
    cost, flops = chain_cost_in_fits(design, coef_path, n_probes, scheme)
    if cost > budget and flops > get_policy().risk_cheap_flops:
        s = int(np.count_nonzero(np.any(coef_path != 0, axis=1)))
        raise EstimateBudgetError(
            f"the risk estimate of this path would cost about {cost:.1f} fits (its Jacobian "
            f"chains on a support of {s} of {design.n_features} features over "
            f"{coef_path.shape[1] - 1} steps), more than risk_time_budget={budget:g} fits.")


def _memory_matrices(design, iteration, coef_path, n_probes, random_state, dtype,
                     verbose, state=None, keep_state=False):
    """:func:`memory_matrix`, also returning a state that a longer path of the
    same trajectory continues (``keep_state``; ``None`` when there is nothing
    to continue): the Lanczos process of linear methods with probes, the
    Jacobian chains of proximal methods with probes."""
    T = coef_path.shape[1] - 1
    n_probes = resolve_n_probes(n_probes, design, iteration, T)
    rng = check_random_state(random_state)
    if T == 0:
        return np.zeros((1, 1)), np.zeros((1, 1)), None
    if iteration.sampler is not None:
        raise ValueError(
            f"The memory-matrix risk estimate of {iteration.name} with mini-batches is not "
            "implemented; use estimate_risk=False and estimate_loo=True (IACV) instead."
        )
    if getattr(iteration, "preconditioner", None) is not None:
        return (*preconditioned_memory_matrix(design, iteration, T, n_probes=n_probes,
                                              random_state=rng), None)
    if iteration.is_linear:
        new_state = None
        if n_probes is None:
            lam, w = exact_nodes(design)
        else:
            if not (state is not None and state.get("kind") == "lanczos"
                    and state["Z"].shape == (min(design.n_samples, design.n_features),
                                             int(n_probes))):
                state = None
            out = lanczos_nodes(design, n_probes, rng, depth=T // 2 + 2, verbose=verbose,
                                check=lanczos_check(iteration, T), state=state,
                                keep_state=keep_state)
            lam, w = out[:2]
            new_state = out[2] if keep_state else None
        A, Av = spectral_memory_matrix(iteration, lam, T, weights=w, return_sources=True)
        return A, Av, new_state
    dtype = resolve_chain_dtype(design, n_probes, dtype)
    scheme = probe_scheme(iteration, n_probes, T, design.n_samples)
    _check_budget(design, coef_path, n_probes, scheme)
    if scheme == "independent":
        return independent_memory_matrix(design, iteration, coef_path, n_probes, rng, dtype,
                                         verbose, state=state, keep_state=keep_state)
    return masked_memory_matrix(design, iteration, coef_path, n_probes, rng, dtype, verbose,
                                state=state, keep_state=keep_state)


def residual_matrix(design, y_tilde, coef_path):
    """Training residuals ``y~ - X~ x^t`` of every iterate, shape (n, T + 1)."""
    T1 = coef_path.shape[1]
    check_memory(8 * design.n_samples * T1, f"the residual matrix ({design.n_samples} x {T1})")
    F = design.matvec(np.asarray(coef_path, dtype=design.dtype))
    return np.asarray(y_tilde, dtype=np.float64)[:, None] - F


def trajectory_risk(design, y_tilde, iteration, coef_path, *, datafit=None, n_probes=10,
                    random_state=None, chain_dtype=None, fitted=None, verbose=0, _state=None,
                    _keep_state=False, products=False, matrices=True):
    """Estimated out-of-sample risk of every iterate of a trajectory.

    Full-batch least squares: the memory-matrix estimate of Bellec & Tan
    (2024) (:func:`risk_from_memory`). Mini-batches (``iteration.sampler``)
    or a robust loss (a non-quadratic ``datafit``): the estimate of Tan &
    Bellec (2024) (:func:`risk_from_sources`), which reduces to the former
    for full-batch least squares.

    datafit : datafit of :mod:`skacv.iterations._datafits`, default=None
        ``None`` is least squares.
    fitted : ndarray of shape (n_samples, T + 1), default=None
        ``X~ x^t`` if already known (saves one product with the whole path).
    products : bool, default=False
        Full-batch least squares with fewer features than samples: the
        residuals enter through their inner products in the features' space
        (:func:`residual_products`, :func:`risk_from_products`; the fit loop
        in the covariance form, whose design holds ``X~^T X~``); then
        ``corrected_residuals`` and ``residuals`` are ``None`` and
        ``products`` holds ``FF``, ``XF`` (..., see
        :func:`residual_products`), ``P`` and ``Q``.
    matrices : bool, default=True
        Return the ``(T + 1) x (T + 1)`` matrices (``risk_matrix``,
        ``memory_matrix``, ``memory_matrix_sources``) also when the
        estimate does not need them (the settled form); ``False``: they are
        ``None`` then.

    The memory the estimate needs is checked against ``path_memory_limit``
    before it is allocated (:func:`check_dense_memory`; a ``ValueError``
    with the bytes, the limit and the fixes).

    **Settled supports.** For ISTA / FISTA (no heavy ball, shared probes)
    whose support and extrapolation stay fixed for the last
    ``SETTLED_MIN_TAIL`` steps or more, the memory matrices after the step
    ``k0`` where they settle are a state-space recursion on the
    eigenbasis of the support's Gram matrix (``r = |S|`` directions;
    :class:`~skacv.estimates._risk_core_space.SettledMemory`), and the
    corrections are forward recursions: the chains in coordinates up to
    ``k0``, then ``O(r q T)`` work (``q`` samples, or features + 1 in the
    covariance form) and ``O(q T)`` memory, instead of ``O(T^3)`` and
    ``(T + 1)^2`` floats; the amplification diagnostic adds ``O(r T)`` when
    the memory matrix is non-negative (no momentum), ``O(r T^2 / 2)``
    scalar operations otherwise. Gradient descent, ridge GD and Nesterov
    (no heavy ball, no preconditioner) take the same form from the start
    (``k0 = 0``, ``r`` spectral nodes) from ``SETTLED_MIN_TAIL`` steps on.
    Not with a warm-start state to keep (the chains continue in
    coordinates).

    Returns
    -------
    result : Bunch
        ``risk`` (T+1,), ``risk_matrix`` (T+1, T+1), ``memory_matrix`` (T+1, T+1)
        for the iterates, ``memory_matrix_sources`` for the gradient points
        (the matrix ``K`` of the robust estimate), ``corrected_residuals``
        (n_samples, T+1) and ``correction`` (T+1, T+1) of
        :func:`risk_from_memory` (full-batch least squares only, ``None``
        otherwise; ``correction`` is ``None`` too for a clipped
        extrapolation), ``residuals`` ``F`` (the debiasing of
        :mod:`skacv.estimates._uq` uses ``R``, ``F`` and ``G``), and the
        diagnostics of :func:`risk_reliability` (``reliable``,
        ``df_fraction``, ``amplification``).
    """
    tic = time.perf_counter()
    T1 = coef_path.shape[1]
    robust = datafit is not None and not datafit.quadratic
    kind = None if _state is not None else settled_kind(design, iteration, T1 - 1, n_probes,
                                                            datafit, _keep_state)
    if kind is not None:
        k0 = 0 if kind == "linear" else settled_step(iteration, coef_path)
        if k0 is not None and T1 - 1 - k0 >= SETTLED_MIN_TAIL:
            res = _settled_risk(design, y_tilde, iteration, coef_path, k0, n_probes,
                                random_state, chain_dtype, fitted, verbose, products, matrices)
            if verbose:
                print(f"[risk] settled after step {k0}: done in "
                      f"{time.perf_counter() - tic:.1f}s")
            return res
    check_dense_memory(T1)
    if iteration.sampler is not None or robust:
        res = _robust_risk(design, y_tilde, iteration, coef_path, datafit, n_probes,
                           random_state, chain_dtype, fitted, verbose, _state, _keep_state)
        if verbose:
            print(f"[risk] done in {time.perf_counter() - tic:.1f}s")
        return res
    A, Av, state = _memory_matrices(design, iteration, coef_path, n_probes, random_state,
                                    chain_dtype, verbose, state=_state, keep_state=_keep_state)
    has_momentum = any(iteration.beta(k) != 0.0 for k in range(1, coef_path.shape[1]))
    A_sources = Av if has_momentum else None
    # a clipped extrapolation: the gradient points are not combinations of the outputs
    clipped = has_momentum and iteration.clips
    F = R = prods = None
    if products and design.n_features <= design.n_samples:
        prods = residual_products(design, y_tilde, coef_path,
                                  source_points(iteration, coef_path) if clipped else None)
        flops = coef_path.shape[0] * coef_path.shape[1] ** 2
    else:
        if fitted is None:
            F = residual_matrix(design, y_tilde, coef_path)
        else:  # X~ x^t recorded by the fit loop
            F = np.asarray(y_tilde, dtype=np.float64)[:, None] - fitted
        Fv = source_residuals(design, iteration, F, coef_path) if clipped else None
        flops = F.shape[0] * F.shape[1] ** 2
    with small_blas(flops):  # the corrections of T x T matrices
        if prods is not None:
            risk, G, P, Q, K = risk_from_products(prods, A, design.n_eff, design.fit_intercept,
                                                  A_sources=A_sources, iteration=iteration)
            prods.update(P=P, Q=Q)
        else:
            risk, G, R, K = risk_from_memory(F, A, design.n_eff, design.fit_intercept,
                                             A_sources=A_sources, iteration=iteration,
                                             return_residuals=True, F_sources=Fv)
        support = None
        if not iteration.is_linear and iteration.penalty.l1_ > 0:
            support = np.count_nonzero(coef_path, axis=0)
        reliable, df, amp, failures = risk_reliability(
            A, Av if has_momentum else A, design.n_eff, design.fit_intercept,
            proximal=not iteration.is_linear, support=support, return_failures=True,
            # without extrapolation the correction K is that inverse
            inverse=K if A_sources is None else None)
    failures["not_finite"] = failures["not_finite"] | ~np.isfinite(risk)
    reliable &= np.isfinite(risk)
    if verbose:
        print(f"[risk] done in {time.perf_counter() - tic:.1f}s")
    return Bunch(risk=risk, risk_matrix=G, memory_matrix=A, memory_matrix_sources=Av,
                 corrected_residuals=R, correction=K, residuals=F, products=prods,
                 chain_state=state, reliable=reliable, df_fraction=df, amplification=amp,
                 support=support, n_eff=design.n_eff, failures=failures,
                 momentum=_has_momentum(iteration, coef_path.shape[1] - 1))


def _robust_risk(design, y_tilde, iteration, coef_path, datafit, n_probes, random_state,
                 chain_dtype, fitted, verbose, state, keep_state):
    """:func:`trajectory_risk` for mini-batches or a robust loss (Tan & Bellec 2024)."""
    T1 = coef_path.shape[1]
    T = T1 - 1
    n_probes = resolve_n_probes(n_probes, design, iteration, T, datafit)
    rng = check_random_state(random_state)
    y_tilde = np.asarray(y_tilde, dtype=np.float64)
    if fitted is None:
        check_memory(8 * design.n_samples * T1,
                     f"the fitted values ({design.n_samples} x {T1})")
        fitted = design.matvec(np.asarray(coef_path, dtype=design.dtype))
    fitted = np.asarray(fitted, dtype=np.float64)
    quadratic = datafit is None or datafit.quadratic
    curvature = None
    w = np.ones(design.n_samples) if design.weight is None else np.asarray(
        design.weight, dtype=np.float64)
    if not quadratic:
        curvature = np.empty_like(fitted)
        for t in range(T1):
            curvature[:, t] = datafit.curvature(fitted[:, t], y_tilde)
        trace_d = w @ curvature
    else:
        trace_d = None
    dtype = resolve_chain_dtype(design, n_probes, chain_dtype)
    A, K, new_state = curvature_memory_matrices(
        design, iteration, coef_path, curvature, n_probes, rng, dtype, verbose,
        state=state, keep_state=keep_state)
    F = y_tilde[:, None] - fitted
    # sources: the gradient residual of step s + 1 on its batch
    Psi = np.zeros_like(F)
    sampler = iteration.sampler
    for s in range(T):
        r = F[:, s] if quadratic else datafit.residual(fitted[:, s], y_tilde)
        if sampler is None:
            Psi[:, s] = r
        else:
            S = np.asarray(sampler(s + 1))
            Psi[S, s] = r[S]
    c = design.fit_intercept and quadratic  # an intercept by centring
    risk, G, W = risk_from_sources(F, Psi, A, K, design.n_eff, trace_d, fit_intercept=c)
    corrected = None
    if quadratic:  # least squares: the corrected residuals also debias (skacv.estimates._uq)
        corrected = F + Psi @ np.tril(W, -1).T
        if c:
            corrected += F * np.diag(W)
    # diagnostics: K relative to tr D_t plays the role of A / n
    td = np.full(T1, design.n_eff) if trace_d is None else trace_d
    with np.errstate(divide="ignore", invalid="ignore"):
        A_equiv = design.n_eff * np.tril(K, -1) / np.where(td > 0, td, np.nan)[:, None]
    A_equiv[0] = 0.0
    reliable, df, amp, failures = risk_reliability(
        A_equiv, A_equiv, design.n_eff, c, proximal=not (iteration.is_linear and quadratic),
        return_failures=True)
    failures["not_finite"] = failures["not_finite"] | ~np.isfinite(risk)
    reliable &= np.isfinite(risk)
    return Bunch(risk=risk, risk_matrix=G, memory_matrix=A, memory_matrix_sources=K,
                 chain_state=new_state, reliable=reliable, df_fraction=df, amplification=amp,
                 corrected_residuals=corrected, residuals=F if quadratic else None,
                 failures=failures, momentum=_has_momentum(iteration, T1 - 1))


def _settled_risk(design, y_tilde, iteration, coef_path, k0, n_probes, random_state,
                  chain_dtype, fitted, verbose, products, matrices):
    """:func:`trajectory_risk` of a path whose support settles after step ``k0``:
    the chains in coordinates up to ``k0`` (the same probes as the dense
    route), then :class:`~skacv.estimates._risk_core_space.SettledMemory`;
    a linear iteration (``k0 = 0``) from the spectral nodes of
    :func:`_memory_matrices`."""
    T1 = coef_path.shape[1]
    T = T1 - 1
    n, n_eff = design.n_samples, design.n_eff
    c = _intercept_term(design.fit_intercept, n_eff)
    if matrices:  # asked for: the (T + 1)^2 matrices A, A_sources, G and a temporary
        check_dense_memory(T1, 4)
    m = resolve_n_probes(n_probes, design, iteration, T)
    rng = check_random_state(random_state)
    if iteration.is_linear:  # the nodes (and the same probes) as _memory_matrices
        if m is None:
            lam, w = exact_nodes(design)
        else:
            lam, w = lanczos_nodes(design, m, rng, depth=T // 2 + 2, verbose=verbose,
                                   check=lanczos_check(iteration, T))
        model = linear_settled_memory(iteration, T, lam, w)
    else:
        dtype = resolve_chain_dtype(design, m, chain_dtype)
        Z = rng.choice([-1.0, 1.0], size=(n, int(m))).astype(dtype)  # as masked_memory_matrix
        head = masked_memory_matrix(design, iteration, coef_path[:, :k0 + 1], m, rng, dtype,
                                    verbose, keep_state=True, probes=Z)[2]
        model = settled_memory(lambda idx, dt: design_columns(design, idx, dt), iteration,
                               coef_path, k0, Z, head, n_eff)
    has_momentum = any(iteration.beta(k) != 0.0 for k in range(1, T1))
    B = np.asarray(coef_path, dtype=np.float64)
    F = R = prods = G = None
    if products and design.n_features <= n:
        # residuals in the basis [y~, X~]: F = y~ 1^T - X~ B has coefficients [1; -B]
        M = residual_basis(design, y_tilde)
        check_memory(8.0 * T1 * SETTLED_ARRAYS * M.shape[0],
                     f"the settled risk estimate ({M.shape[0]} x {T1}, {SETTLED_ARRAYS} arrays)",
                     ESTIMATE_HINT)
        Phi = np.vstack([np.ones((1, T1)), -B])
        if has_momentum:
            Phiv = np.vstack([np.ones((1, T1)), -source_points(iteration, B)])
            _, Gx = model.solve(Phiv, Phi, n_eff, c)
        else:
            Gx = model.solve(Phi, None, n_eff, c)[1]
        MG = M @ Gx
        risk = np.einsum("it,it->t", Gx, MG) / n_eff
        # what the debiasing reads (skacv.estimates._uq): X~^T R and <F_t, R_t>
        prods = Bunch(W=MG[1:], FR=np.einsum("it,it->t", Phi, MG))
        if matrices:
            G = Gx.T @ MG / n_eff
    else:
        check_memory(8.0 * T1 * SETTLED_ARRAYS * n,
                     f"the settled risk estimate ({n} x {T1}, {SETTLED_ARRAYS} arrays)",
                     ESTIMATE_HINT)
        if fitted is None:
            F = residual_matrix(design, y_tilde, coef_path)
        else:
            F = np.asarray(y_tilde, dtype=np.float64)[:, None] - fitted
        if has_momentum:
            Fv = (source_residuals(design, iteration, F, coef_path) if iteration.clips
                  else _extrapolate_columns(iteration, F))
            R = model.solve(Fv, F, n_eff, c)[1]
        else:
            R = model.solve(F, None, n_eff, c)[1]
        risk = np.einsum("it,it->t", R, R) / n_eff
        if matrices:
            G = R.T @ R / n_eff
    if G is not None:
        G = (G + G.T) / 2.0
    # diagnostics: the row sums of A and the rows of (I (1 - c/n) - A_sources/n)^{-1}
    df = (model.apply(np.ones((1, T1)))[0][0] + c) / n_eff
    with np.errstate(all="ignore"):
        amp = (model.inverse_row_norms(n_eff, c) * (1.0 - c / n_eff)
               * np.maximum(1.0 - df, 1e-12))
    support = None
    if not iteration.is_linear and iteration.penalty.l1_ > 0:
        support = np.count_nonzero(coef_path, axis=0)
    reliable, df, amp, failures = _reliability(df, amp, n_eff, design.fit_intercept,
                                               not iteration.is_linear, support, True)
    failures["not_finite"] = failures["not_finite"] | ~np.isfinite(risk)
    reliable &= np.isfinite(risk)
    A = Av = None
    if matrices:
        A, Av = model.dense()
    return Bunch(risk=risk, risk_matrix=G, memory_matrix=A, memory_matrix_sources=Av,
                 corrected_residuals=R, correction=None, residuals=F, products=prods,
                 chain_state=None, reliable=reliable, df_fraction=df, amplification=amp,
                 support=support, n_eff=n_eff, failures=failures,
                 momentum=_has_momentum(iteration, T), settled_step=k0)
