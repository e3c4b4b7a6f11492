"""Out-of-sample risk along a trajectory: the memory-matrix estimate.

Bellec & Tan (2024); Tan & Bellec (2024) for robust losses and mini-batches.
:func:`trajectory_risk` is the entry point (the estimators' ``risk_path_``):

1. the memory matrices ``A``, ``A_sources`` (traces of the Jacobians of the
   iterates with respect to the response entering every step) come from one
   engine, :func:`skacv.estimates._risk_engine.memory_matrices`, whose
   strategy :func:`skacv.estimates._risk_engine.choose_strategy` picks
   (spectral nodes for linear iterations, Jacobian chains for proximal ones,
   with shared or independent probes, a diagonalised core, the curvature
   chains of robust losses);
2. the readout corrects the training residuals with them
   (:mod:`skacv.estimates._risk_readout`: :func:`risk_from_memory`,
   :func:`risk_from_products` in the covariance form,
   :func:`risk_from_sources` for robust losses);
3. the diagnostics flag the iterates where the estimate is not to be
   trusted (:mod:`skacv.estimates._risk_reliability`).

Long paths whose supports settle (and linear iterations) keep the memory
matrices in a state-space form and correct the residuals by forward
recursions, linear in ``T``
(:class:`~skacv.estimates._risk_settled.SettledMemory`); every other
estimate checks its ``(T + 1) x (T + 1)`` matrices against
``path_memory_limit`` before allocating them.
"""

import functools
import time
from dataclasses import dataclass

import numpy as np
from sklearn.utils import Bunch, check_random_state

from .._config import check_memory, format_bytes
from ..utils._parallel import small_blas
from ._risk_chains import masked_memory_matrix
from ._risk_engine import (
    chain_cost_in_fits,  # noqa: F401 (re-exported)
    memory_matrices,
    plan_estimate,
    spectral_nodes,
)
from ._risk_pooled import (
    extend_pooled,
    jackknife_matrices,
    pooled_matrices,
    template_matrices,
)
from ._risk_probes import (
    POOLED_PROBES,
    choice_iterates,
    choice_noise,
    draw_probes,
    noise_iterates,
    probe_noise,
    probes_for_noise,
)
from ._risk_propagate import design_columns
from ._risk_readout import (  # noqa: F401 (the readout's names, re-exported)
    _extrapolate_columns,
    _intercept_term,
    residual_basis,
    residual_correction,
    residual_matrix,
    residual_products,
    risk_at_iterates,
    risk_from_memory,
    risk_from_products,
    risk_from_sources,
    source_points,
    source_residuals,
)
from ._risk_reliability import (  # noqa: F401 (re-exported)
    AMPLIFICATION_LIMIT,
    DF_LOW,
    SUPPORT_DF_LIMIT,
    _reliability,
    reliability_failures,
    risk_reliability,
)
from ._risk_settled import linear_settled_memory, settled_memory, settled_step  # noqa: F401

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
        (:func:`~skacv.estimates._risk_reliability.risk_reliability`).
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
        (:mod:`skacv.estimates._uq`).
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
        (:mod:`skacv.estimates._risk_state`).
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


def settled_kind(design, iteration, n_iter, n_probes="auto", datafit=None, keep_state=False,
                 probe_scheme="auto"):
    """Which settled form a trajectory of ``n_iter`` steps may take
    (:attr:`~skacv.estimates._risk_engine.EstimatePlan.settles`, planned
    before the fit: ``"linear"``, ``"proximal"`` or ``None``)."""
    plan = plan_estimate(design, iteration, None, n_probes, probe_scheme, n_iter=n_iter,
                         datafit=datafit, keep_state=keep_state)
    return plan.settles if plan.form == "settled" else None


def can_settle(design, iteration, n_iter, n_probes="auto", datafit=None, keep_state=False,
               probe_scheme="auto"):
    """Whether :func:`settled_kind` is not ``None``."""
    return settled_kind(design, iteration, n_iter, n_probes, datafit, keep_state,
                        probe_scheme) is not None


def check_risk_memory(design, iteration, n_iter, n_probes="auto", datafit=None,
                      products=False, keep_state=False, probe_scheme="auto"):
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
    if not can_settle(design, iteration, n_iter, n_probes, datafit, keep_state, probe_scheme):
        check_dense_memory(T1)
        return
    q = design.n_features + 1 if products else design.n_samples
    n_bytes = 8.0 * T1 * (SETTLED_ARRAYS * q + SETTLED_VECTORS)
    dense = DENSE_MATRICES * 8.0 * T1 * T1
    check_memory(n_bytes, f"The risk estimate of {T1} iterates (at least {n_bytes:,.0f} bytes "
                 f"when the supports settle; {format_bytes(dense)} for {DENSE_MATRICES} "
                 f"matrices of {T1} x {T1} floats when they do not)", ESTIMATE_HINT)



def memory_matrix(design, iteration, coef_path, *, n_probes=10, random_state=None,
                  chain_dtype="auto", verbose=0, probe_scheme="auto"):
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
    chain_dtype : dtype, "auto" or None, default="auto"
        Precision of the Jacobian chains of proximal methods (``"auto"`` or
        ``None``: float32 with Hutchinson probes, the dtype of ``X`` with
        exact traces; :func:`~skacv.estimates._risk_propagate.resolve_chain_dtype`).
    verbose : int
    probe_scheme : {"auto", "pooled", "shared", "independent"}, default="auto"
        How the Hutchinson probes are shared between the sources
        (:func:`~skacv.estimates._risk_engine.choose_scheme`).

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
                            verbose, scheme=probe_scheme)[:2]


def _memory_matrices(design, iteration, coef_path, n_probes, random_state, dtype,
                     verbose, state=None, keep_state=False, scheme="auto"):
    """:func:`memory_matrix`, also returning a state that a longer path of the
    same trajectory continues (``keep_state``; ``None`` when there is nothing
    to continue): the engine of the plan of
    :func:`~skacv.estimates._risk_engine.plan_estimate`."""
    if coef_path.shape[1] == 1:
        return np.zeros((1, 1)), np.zeros((1, 1)), None
    rng = check_random_state(random_state)
    plan = plan_estimate(design, iteration, coef_path, n_probes, scheme, dtype, state=state,
                         keep_state=keep_state)
    return memory_matrices(design, iteration, coef_path, plan, rng, verbose, state=state,
                           keep_state=keep_state)


def trajectory_risk(design, y_tilde, iteration, coef_path, *, datafit=None, n_probes=10,
                    random_state=None, chain_dtype="auto", fitted=None, verbose=0, _state=None,
                    _keep_state=False, products=False, matrices=True, probe_scheme="auto",
                    probe_goal="level", fitted_sources=None):
    """Estimated out-of-sample risk of every iterate of a trajectory.

    Full-batch least squares: the memory-matrix estimate of Bellec & Tan
    (2024) (:func:`risk_from_memory`). Mini-batches (``iteration.sampler``)
    or a robust loss (a non-quadratic ``datafit``): the estimate of Tan &
    Bellec (2024) (:func:`risk_from_sources`), which reduces to the former
    for full-batch least squares.

    datafit : datafit of :mod:`skacv.iterations._datafits`, default=None
        ``None`` is least squares.
    n_probes, random_state, chain_dtype, probe_scheme
        As :func:`memory_matrix` (``probe_scheme``: ``"auto"``, ``"shared"``
        or ``"independent"``; ``chain_dtype``: ``"auto"``, ``None`` or a
        dtype).
    probe_goal : {"level", "choice"}, default="level"
        What the adaptive pooled probes (``n_probes="auto"``) are grown for:
        the level of the estimate at every iterate, or the order of the
        iterates near its minimum (a search that compares the path with
        itself only; :func:`_grow_pooled`). ``choice_noise`` in the result.
    fitted : ndarray of shape (n_samples, T + 1), default=None
        ``X~ x^t`` if already known (saves one product with the whole path).
    fitted_sources : ndarray of shape (n_samples, >= T + 1), default=None
        ``X~ v^t`` of the gradient points if already known (the fit loop's):
        the residuals of a clipped extrapolation's gradient points without
        :func:`source_residuals`'s products.
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
    ``settled_min_tail`` steps or more (the speed policy), the memory matrices after the step
    ``k0`` where they settle are a state-space recursion on the
    eigenbasis of the support's Gram matrix (``r = |S|`` directions;
    :class:`~skacv.estimates._risk_settled.SettledMemory`), and the
    corrections are forward recursions: the chains in coordinates up to
    ``k0``, then ``O(r q T)`` work (``q`` samples, or features + 1 in the
    covariance form) and ``O(q T)`` memory, instead of ``O(T^3)`` and
    ``(T + 1)^2`` floats; the amplification diagnostic adds ``O(r T)`` when
    the memory matrix is non-negative (no momentum), ``O(r T^2 / 2)``
    scalar operations otherwise. Gradient descent, ridge GD and Nesterov
    (no heavy ball, no preconditioner) take the same form from the start
    (``k0 = 0``, ``r`` spectral nodes) from ``settled_min_tail`` steps on.
    Not with a warm-start state to keep (the chains continue in
    coordinates).

    Returns
    -------
    result : RiskEstimate
    """
    tic = time.perf_counter()
    T1 = coef_path.shape[1]
    plan = plan_estimate(design, iteration, coef_path, n_probes, probe_scheme, chain_dtype,
                         datafit=datafit, state=_state, keep_state=_keep_state, adaptive=True,
                         probe_goal=probe_goal)
    if plan.form == "settled":
        res = _settled_risk(design, y_tilde, iteration, coef_path, plan, random_state, fitted,
                            verbose, products, matrices, fitted_sources)
        if verbose:
            print(f"[risk] settled after step {plan.settled_step}: done in "
                  f"{time.perf_counter() - tic:.1f}s")
        return res
    check_dense_memory(T1)
    if plan.form == "curvature":
        res = _robust_risk(design, y_tilde, iteration, coef_path, datafit, plan, random_state,
                           fitted, verbose, _state, _keep_state)
        if verbose:
            print(f"[risk] done in {time.perf_counter() - tic:.1f}s")
        return res
    adaptive = plan.adaptive  # the pooled probes grow while noisy
    A, Av, state = memory_matrices(design, iteration, coef_path, plan,
                                   check_random_state(random_state), verbose, state=_state,
                                   keep_state=_keep_state or adaptive)
    has_momentum = iteration.extrapolates(coef_path.shape[1] - 1)
    # a clipped extrapolation: the gradient points are not combinations of the outputs
    clipped = has_momentum and iteration.clips
    F = Fv = prods = None
    if products and design.n_features <= design.n_samples:
        prods = residual_products(design, y_tilde, coef_path,
                                  source_points(iteration, coef_path) if clipped else None)
        flops = coef_path.shape[0] * coef_path.shape[1] ** 2
    else:
        if fitted is None:
            F = residual_matrix(design, y_tilde, coef_path)
        else:  # X~ x^t recorded by the fit loop
            F = np.asarray(y_tilde, dtype=np.float64)[:, None] - fitted
        Fv = (_source_residuals(design, y_tilde, iteration, F, coef_path, fitted_sources)
              if clipped else None)
        flops = F.shape[0] * F.shape[1] ** 2

    def readout(A, Av):
        """``(risk, G, R, K, P, Q)`` of the memory matrices ``A``, ``Av``."""
        A_sources = Av if has_momentum else None
        if prods is not None:
            risk, G, P, Q, K = risk_from_products(prods, A, design.n_eff, design.fit_intercept,
                                                  A_sources=A_sources, iteration=iteration)
            return risk, G, None, K, P, Q
        risk, G, R, K = risk_from_memory(F, A, design.n_eff, design.fit_intercept,
                                         A_sources=A_sources, iteration=iteration,
                                         return_residuals=True, F_sources=Fv)
        return risk, G, R, K, None, None

    @functools.cache
    def inner_products():
        """The residuals' inner products (``F^T F``; with a clipped
        extrapolation also ``F^T F_v`` and ``F_v^T F_v``), formed once."""
        if prods is not None:
            return prods
        if Fv is None:
            return Bunch(FF=F.T @ F)
        return Bunch(FF=F.T @ F, FFv=F.T @ Fv, FvFv=Fv.T @ Fv)

    def replicate_risk(A, Av, iterates=None):
        """The risk alone at ``iterates`` (``None``: all; the jackknife's
        replicates): from the residuals' inner products
        (:func:`risk_at_iterates`, ``O(T^2)`` flops an iterate after one
        ``O(n T^2)``)."""
        return risk_at_iterates(inner_products(), A, design.n_eff, design.fit_intercept,
                                A_sources=Av if has_momentum else None, iteration=iteration,
                                iterates=iterates)

    with small_blas(flops):  # the corrections of T x T matrices
        noise = choice = None
        used = getattr(state, "m", plan.n_probes)
        if adaptive:
            A, Av, state, out, noise, choice = _grow_pooled(
                design, iteration, coef_path, state, A, Av, readout, replicate_risk, verbose,
                probe_goal)
            used = state.m
            state = state if _keep_state else None
        else:
            out = readout(A, Av)
        risk, G, R, K, P, Q = out
        if prods is not None:
            prods.update(P=P, Q=Q)
        support = None
        if not iteration.is_linear and iteration.penalty.l1_ > 0:
            support = np.count_nonzero(coef_path, axis=0)
        reliable, df, amp, failures = risk_reliability(
            A, Av if has_momentum else A, design.n_eff, design.fit_intercept,
            proximal=not iteration.is_linear, support=support, return_failures=True,
            # without extrapolation the correction K is that inverse
            inverse=K if not has_momentum else None)
    failures["not_finite"] = failures["not_finite"] | ~np.isfinite(risk)
    reliable &= np.isfinite(risk)
    if verbose:
        print(f"[risk] done in {time.perf_counter() - tic:.1f}s")
    return RiskEstimate(risk=risk, risk_matrix=G, memory_matrix=A, memory_matrix_sources=Av,
                        corrected_residuals=R, correction=K, residuals=F, products=prods,
                        chain_state=state, reliable=reliable, df_fraction=df,
                        amplification=amp, support=support, n_eff=design.n_eff,
                        failures=failures,
                        momentum=iteration.has_momentum(coef_path.shape[1] - 1),
                        n_probes=used, probe_noise=noise, choice_noise=choice)


def _source_residuals(design, y_tilde, iteration, F, coef_path, fitted_sources):
    """The residuals of a clipped extrapolation's gradient points: from the
    fit loop's ``X~ v^t`` (``fitted_sources``) when given, else
    :func:`~skacv.estimates._risk_readout.source_residuals`."""
    if fitted_sources is not None:
        return np.asarray(y_tilde, dtype=np.float64)[:, None] - fitted_sources[:, :F.shape[1]]
    return source_residuals(design, iteration, F, coef_path)


def _grow_pooled(design, iteration, coef_path, state, A, Av, readout, replicate_risk,
                 verbose=0, goal="level"):
    """``n_probes="auto"`` with the pooled probes: the readout of the
    pooled chain's ``state`` (whose memory matrices are ``A``, ``Av``;
    ``readout(A, A_sources)``, its first item the risk), and more probes
    (:func:`~skacv.estimates._risk_pooled.extend_pooled`)
    while the probe noise of the risk, estimated by a jackknife over groups
    of probes, or of samples for a chain of one probe
    (:func:`~skacv.estimates._risk_pooled.jackknife_matrices`,
    :func:`~skacv.estimates._risk_probes.probe_noise`; the
    replicates by ``replicate_risk(A, A_sources, iterates)`` at the iterates
    of :func:`~skacv.estimates._risk_probes.noise_iterates`), asks for them
    (:func:`~skacv.estimates._risk_probes.probes_for_noise`).

    ``goal="choice"`` (a search that compares the path with itself only;
    :class:`~skacv.estimators._setup.FitPlan`): the probes grow while the
    noise of the order of the iterates near the minimum
    (:func:`~skacv.estimates._risk_probes.choice_noise`, at the iterates
    of :func:`~skacv.estimates._risk_probes.choice_iterates`) is above
    :data:`~skacv.estimates._risk_probes.CHOICE_NOISE_TARGET`, instead of
    the level's.

    Returns ``(A, A_sources, state, readout's output, noise, choice)``
    (``noise``: the level's, ``choice``: the choice's (``None`` unless
    ``goal="choice"``); both ``None`` once the chain has ``POOLED_PROBES``,
    when they are not measured).
    """
    template = (None if state.nodes is None else
                template_matrices(design, iteration, coef_path, None, nodes=state.nodes))
    while True:
        out = readout(A, Av)
        if state.m >= POOLED_PROBES:  # grown to all the probes: nothing to decide
            return A, Av, state, out, None, None
        level = noise_iterates(coef_path.shape[1])
        rivals = choice_iterates(out[0]) if goal == "choice" else np.arange(0)
        iterates = np.union1d(level, rivals)
        matrices, factor = jackknife_matrices(state, template)
        replicates = np.array([replicate_risk(*AAv, iterates) for AAv in matrices])
        noise = factor * probe_noise(out[0], replicates[:, np.isin(iterates, level)], level)
        choice = None
        if goal == "choice":
            choice = factor * choice_noise(out[0], replicates[:, np.isin(iterates, rivals)],
                                           rivals)
            m = probes_for_noise(state.m, choice, "choice")
        else:
            m = probes_for_noise(state.m, noise)
        if verbose:
            print(f"[risk] pooled probes: {state.m}, probe noise {noise:.2%} (rms relative "
                  "standard error)" + ("" if choice is None else
                                       f", of the choice {choice:.2%}")
                  + ("" if m == state.m else f": {m} probes"))
        if m == state.m:
            return A, Av, state, out, noise, choice
        state = extend_pooled(design, iteration, coef_path, state, m - state.m, verbose)
        A, Av = pooled_matrices(state, template)


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
    return RiskEstimate(risk=risk, risk_matrix=G, memory_matrix=A, memory_matrix_sources=K,
                        chain_state=new_state, reliable=reliable, df_fraction=df,
                        amplification=amp, corrected_residuals=corrected,
                        residuals=F if quadratic else None, failures=failures,
                        momentum=iteration.has_momentum(T1 - 1))


def _settled_risk(design, y_tilde, iteration, coef_path, plan, random_state, fitted, verbose,
                  products, matrices, fitted_sources=None):
    """:func:`trajectory_risk` of a path whose support settles after step
    ``k0 = plan.settled_step``: the chains in coordinates up to ``k0`` (the
    same probes as the dense route), then
    :class:`~skacv.estimates._risk_settled.SettledMemory`; a linear
    iteration (``k0 = 0``) from the spectral nodes of the dense route
    (:func:`~skacv.estimates._risk_engine.spectral_nodes`)."""
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
        model = linear_settled_memory(iteration, T, lam, w)
    else:
        dtype = plan.dtype
        Z = draw_probes(rng, (n, int(m)), dtype)  # as masked_memory_matrix
        head = masked_memory_matrix(design, iteration, coef_path[:, :k0 + 1], m, rng, dtype,
                                    verbose, keep_state=True, probes=Z)[2]
        model = settled_memory(lambda idx, dt: design_columns(design, idx, dt), iteration,
                               coef_path, k0, Z, head, n_eff)
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
    return RiskEstimate(risk=risk, risk_matrix=G, memory_matrix=A, memory_matrix_sources=Av,
                        corrected_residuals=R, residuals=F, products=prods, reliable=reliable,
                        df_fraction=df, amplification=amp, support=support, n_eff=n_eff,
                        failures=failures, momentum=iteration.has_momentum(T),
                        settled_step=k0)
