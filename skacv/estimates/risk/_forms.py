"""The settled form (:func:`_settled_risk`: the state-space memory of
:class:`~skacv.estimates.risk._settled.SettledMemory`, linear in ``T``) and
the robust form (:func:`_robust_risk`: the curvature chains read by
:func:`~skacv.estimates.risk._readout.risk_from_sources`, Tan & Bellec
2024) of :func:`~skacv.estimates.risk._estimate.trajectory_risk`.
"""

import numpy as np
from sklearn.utils import Bunch, check_random_state

from ..._config import check_memory
from ..._trace import taken
from ._chains import masked_memory_matrix
from ._engine import memory_matrices, spectral_nodes
from ._probes import draw_probes, range_probes
from ._propagate import design_columns
from ._readout import (
    _extrapolate_columns,
    _intercept_term,
    residual_basis,
    residual_matrix,
    risk_from_sources,
    source_points,
    source_residuals,
)
from ._reliability import _reliability, risk_reliability
from ._result import ESTIMATE_HINT, SETTLED_ARRAYS, RiskEstimate, check_dense_memory
from ._settled import linear_settled_memory, settled_memory


def _source_residuals(design, y_tilde, iteration, F, coef_path, fitted_sources):
    """The residuals of a clipped extrapolation's gradient points, from the fit
    loop's ``X~ v^t`` when given."""
    if fitted_sources is not None:
        return np.asarray(y_tilde, dtype=np.float64)[:, None] - fitted_sources[:, :F.shape[1]]
    return source_residuals(design, iteration, F, coef_path)


def _probed_df_low(statistics, n_probes, trace_d):
    """The lowest df fraction the robust / mini-batch traces trust at each
    iterate: ``df_low``, less ``robust_df_noise_sigmas`` times
    ``sqrt(2 / (m tr D_t))`` with ``m`` probes (``None``: exact traces, no
    noise). Hutchinson's estimate of a trace has the standard deviation
    ``sqrt(2 / m) ||M||_F`` at most (Rademacher probes, a symmetric ``M``),
    and ``||M||_F <= sqrt(tr D_t)`` for a map of norm at most one on the
    ``tr D_t`` inliers: the df fraction, that trace over ``tr D_t``, has at
    most ``sqrt(2 / (m tr D_t))``, large on a robust fit's first inliers."""
    if n_probes is None:
        return None
    td = np.maximum(np.asarray(trace_d, dtype=np.float64), 1.0)
    return statistics.df_low - statistics.robust_df_noise_sigmas * np.sqrt(
        2.0 / (float(n_probes) * td))


def _robust_risk(design, y_tilde, iteration, coef_path, datafit, plan, random_state, fitted,
                 verbose, state, keep_state):
    """:func:`trajectory_risk` for mini-batches or a robust loss (Tan & Bellec 2024),
    by the curvature chains of ``plan``."""
    T1 = coef_path.shape[1]
    T = T1 - 1
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
    A, K, new_state = memory_matrices(design, iteration, coef_path, plan, rng, verbose,
                                      state=state, keep_state=keep_state, curvature=curvature)
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
    if quadratic:  # least squares: the corrected residuals also debias (skacv.estimates.risk._uq)
        corrected = F + Psi @ np.tril(W, -1).T
        if c:
            corrected += F * np.diag(W)
    # diagnostics: K relative to tr D_t plays the role of A / n
    td = np.full(T1, design.n_eff) if trace_d is None else trace_d
    with np.errstate(divide="ignore", invalid="ignore"):
        A_equiv = design.n_eff * np.tril(K, -1) / np.where(td > 0, td, np.nan)[:, None]
    # an iterate with no inliers (tr D_t = 0: a robust fit whose intercept has
    # not reached the targets yet) has a zero row of K, the curvature being
    # its factor: it does not move with y, its row is zero (not 0 / 0)
    A_equiv[td <= 0] = 0.0
    A_equiv[0] = 0.0
    reliable, df, amp, failures = risk_reliability(
        A_equiv, A_equiv, design.n_eff, design.statistics, c,
        proximal=not (iteration.is_linear and quadratic),
        return_failures=True, df_low=_probed_df_low(design.statistics, plan.n_probes, td))
    failures["not_finite"] = failures["not_finite"] | ~np.isfinite(risk)
    reliable &= np.isfinite(risk)
    return RiskEstimate(risk=risk, risk_matrix=G, memory_matrix=A, memory_matrix_sources=K,
                        chain_state=new_state, reliable=reliable, df_fraction=df,
                        amplification=amp, corrected_residuals=corrected,
                        residuals=F if quadratic else None, failures=failures,
                        momentum=iteration.has_momentum(T1 - 1))


def _settled_risk(design, y_tilde, iteration, coef_path, plan, random_state, fitted, verbose,
                  products, matrices, fitted_sources=None):
    """:func:`trajectory_risk` of a path settled after ``plan.settled_step``:
    the shared chains up to it (the same probes as the dense route), then
    :class:`~skacv.estimates.risk._settled.SettledMemory`; a linear iteration
    from the dense route's spectral nodes."""
    T1 = coef_path.shape[1]
    T = T1 - 1
    k0, m = plan.settled_step, plan.n_probes
    n, n_eff = design.n_samples, design.n_eff
    c = _intercept_term(design.fit_intercept, n_eff)
    if matrices:  # asked for: the (T + 1)^2 matrices A, A_sources, G and a temporary
        check_dense_memory(T1, 4)
    rng = check_random_state(random_state)
    if iteration.is_linear:  # the nodes (and the same probes) as the dense route
        lam, w, _ = spectral_nodes(design, iteration, T, m, rng, verbose)
        model = linear_settled_memory(iteration, T, lam, w, design.policy.settled_fft_max_gain)
    else:
        dtype = plan.dtype
        # as masked_memory_matrix, or the exact probes
        Z = range_probes(design) if plan.exact else draw_probes(rng, (n, int(m)), dtype)
        head = masked_memory_matrix(design, iteration, coef_path[:, :k0 + 1], m, rng, dtype,
                                    verbose, keep_state=True, probes=Z)[2]
        model = settled_memory(lambda idx, dt: design_columns(design, idx, dt), iteration,
                               coef_path, k0, Z, head, n_eff, design.policy)
        taken("settled_memory", model=model)
    has_momentum = iteration.extrapolates(T)
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
        # what the debiasing reads (skacv.estimates.risk._uq): X~^T R and <F_t, R_t>
        prods = Bunch(W=MG[1:], FR=np.einsum("it,it->t", Phi, MG))
        if matrices:
            G = Gx.T @ MG / n_eff
    else:
        check_memory(8.0 * T1 * SETTLED_ARRAYS * n,
                     f"the settled risk estimate ({n} x {T1}, {SETTLED_ARRAYS} arrays)",
                     ESTIMATE_HINT)
        F = residual_matrix(design, y_tilde, coef_path, fitted)
        if has_momentum:
            Fv = (_source_residuals(design, y_tilde, iteration, F, coef_path, fitted_sources)
                  if iteration.clips else _extrapolate_columns(iteration, F))
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
        amp = (model.inverse_row_norms(n_eff, design.policies, c) * (1.0 - c / n_eff)
               * np.maximum(1.0 - df, 1e-12))
    support = None
    if not iteration.is_linear and not iteration.penalty.is_smooth:
        support = np.count_nonzero(coef_path, axis=0)
    reliable, df, amp, failures = _reliability(df, amp, n_eff, design.statistics,
                                               design.fit_intercept, not iteration.is_linear,
                                               support, True)
    failures["not_finite"] = failures["not_finite"] | ~np.isfinite(risk)
    reliable &= np.isfinite(risk)
    A = Av = None
    if matrices:
        A, Av = model.dense()
    taken("settled_risk", settled_step=k0)
    return RiskEstimate(risk=risk, risk_matrix=G, memory_matrix=A, memory_matrix_sources=Av,
                        corrected_residuals=R, residuals=F, products=prods, reliable=reliable,
                        df_fraction=df, amplification=amp, support=support, n_eff=n_eff,
                        failures=failures, momentum=iteration.has_momentum(T))
