"""Out-of-sample risk along a trajectory: the memory-matrix estimate.

Bellec & Tan (2024); Tan & Bellec (2024) for robust losses and mini-batches.
:func:`trajectory_risk` is the entry point (the estimators' ``risk_path_``);
the engine's plan and runner, the readout, the settled and robust forms and
the diagnostics live in the modules beside it."""

import functools
import numbers
import time

import numpy as np
from sklearn.utils import Bunch, check_random_state

from ..._config import check_memory, format_bytes
from ..._trace import taken
from ...utils._parallel import small_blas
from ._engine import (
    draws_probes,
    memory_matrices,
    plan_estimate,
)
from ._forms import _robust_risk, _settled_risk, _source_residuals
from ._pooled import (
    extend_pooled,
    jackknife_matrices,
    jackknife_sums,
    pooled_matrices,
    split_template,
    template_matrices,
    template_rows_times,
)
from ._probes import (
    choice_iterates,
    choice_noise,
    noise_iterates,
    probe_noise,
    probes_for_noise,
)
from ._readout import (
    residual_matrix,
    residual_products,
    risk_at_iterates,
    risk_from_memory,
    risk_from_products,
    risk_sensitivity,
    source_points,
)
from ._reliability import (
    risk_reliability,
)
from ._result import (
    DENSE_MATRICES,
    ESTIMATE_HINT,
    SETTLED_ARRAYS,
    SETTLED_VECTORS,
    RiskEstimate,
    check_dense_memory,
    dense_bytes,
)


def check_risk_memory(design, iteration, n_iter, n_probes="auto", datafit=None,
                      products=False, keep_state=False, probe_scheme="auto"):
    """Refuse, before a fit, a risk estimate above ``path_memory_limit``, and
    return the plan before the fit (:func:`trajectory_risk`'s ``before``).

    A path that may settle needs at least the settled form's ``O(q T)``
    floats (``q``: samples, or features + 1 with ``products``); any other its
    dense ``(T + 1) x (T + 1)`` matrices."""
    taken("check_risk_memory", probe_scheme=probe_scheme)
    T1 = int(n_iter) + 1
    plan = plan_estimate(design, iteration, None, n_probes, probe_scheme, n_iter=n_iter,
                         datafit=datafit, keep_state=keep_state)
    if plan.form != "settled":
        check_dense_memory(T1)
        return plan
    q = design.n_features + 1 if products else design.n_samples
    n_bytes = 8.0 * T1 * (SETTLED_ARRAYS * q + SETTLED_VECTORS)
    dense = dense_bytes(T1)
    check_memory(n_bytes, f"The risk estimate of {T1} iterates (at least {n_bytes:,.0f} bytes "
                 f"when the supports settle; {format_bytes(dense)} for {DENSE_MATRICES} "
                 f"matrices of {T1} x {T1} floats when they do not)", ESTIMATE_HINT)
    return plan


def memory_matrix(design, iteration, coef_path, *, n_probes=10, random_state=None,
                  chain_dtype="auto", verbose=0, probe_scheme="auto"):
    """Memory matrices ``(A, A_sources)`` of a trajectory, ``A[t, s] = tr(X~ d
    x^t / d y^(s))`` for the outputs and the gradient points, by the plan of
    :func:`~skacv.estimates.risk._engine.plan_estimate` (``n_probes``:
    Hutchinson probes, ``None`` exact, ``"auto"``; ``chain_dtype``,
    ``probe_scheme`` as there); ``ValueError`` before allocating matrices
    above ``path_memory_limit``."""
    check_dense_memory(coef_path.shape[1], 4)
    if coef_path.shape[1] == 1:
        return np.zeros((1, 1)), np.zeros((1, 1))
    plan = plan_estimate(design, iteration, coef_path, n_probes, probe_scheme, chain_dtype,
                         settled=False)
    return memory_matrices(design, iteration, coef_path, plan, check_random_state(random_state),
                           verbose)[:2]


def trajectory_risk(design, y_tilde, iteration, coef_path, *, datafit=None, n_probes=10,
                    random_state=None, chain_dtype="auto", fitted=None, verbose=0, _state=None,
                    _keep_state=False, products=False, matrices=True, probe_scheme="auto",
                    probe_goal="level", fitted_sources=None, before=None, sources=None):
    """Estimated out-of-sample risk of every iterate of a trajectory.

    Full-batch least squares: the memory-matrix estimate of Bellec & Tan
    (2024) (:func:`risk_from_memory`). Mini-batches or a robust loss: the
    estimate of Tan & Bellec (2024) (:func:`risk_from_sources`), which reduces
    to the former for full-batch least squares. A long path whose supports
    settle (and a linear iteration) takes the settled form: ``O(r q T)`` work
    and ``O(q T)`` memory instead of ``O(T^3)`` and ``(T + 1)^2`` floats.

    datafit : datafit of :mod:`skacv.iterations._datafits`, default=None
        ``None`` is least squares.
    n_probes, random_state, chain_dtype, probe_scheme
        As :func:`memory_matrix`.
    probe_goal : {"level", "choice"}, default="level"
        What the adaptive pooled probes are grown for (:func:`_grow_pooled`).
    fitted : ndarray of shape (n_samples, T + 1), default=None
        ``X~ x^t`` if already known.
    fitted_sources : ndarray of shape (n_samples, >= T + 1), default=None
        ``X~ v^t`` of the gradient points if already known (the fit loop's).
    sources : ndarray of shape (n_features, T + 1), default=None
        The gradient points ``v^t`` if already known (covariance form).
    products : bool, default=False
        With fewer features than samples, the residuals enter through their
        inner products in the features' space (:func:`residual_products`);
        ``corrected_residuals`` and ``residuals`` are then ``None``.
    matrices : bool, default=True
        ``False``: the ``(T + 1) x (T + 1)`` risk matrix is not formed
        (``risk_matrix`` ``None``; nor the settled form's matrices).
    before : EstimatePlan, default=None
        The plan of :func:`check_risk_memory`, whose probes are kept.

    Returns
    -------
    result : RiskEstimate
    """
    tic = time.perf_counter()
    T1 = coef_path.shape[1]
    plan = plan_estimate(design, iteration, coef_path, n_probes, probe_scheme, chain_dtype,
                         datafit=datafit, state=_state, keep_state=_keep_state, adaptive=True,
                         probe_goal=probe_goal, before=before)
    taken("risk_plan", form=plan.form, exact=plan.exact)
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
    # a continued pooled chain draws from its own generator
    rng = (check_random_state(random_state) if draws_probes(design, coef_path, plan, _state)
           else None)
    A, Av, state = memory_matrices(design, iteration, coef_path, plan, rng, verbose,
                                   state=_state, keep_state=_keep_state or adaptive,
                                   # a generator seeded here (an integer): this call's own
                                   own_rng=isinstance(random_state, numbers.Integral))
    has_momentum = iteration.extrapolates(coef_path.shape[1] - 1)
    # a clipped extrapolation: the gradient points are not combinations of the outputs
    clipped = has_momentum and iteration.clips
    F = Fv = prods = None
    if products and design.n_features <= design.n_samples:
        if clipped and (sources is None or sources.shape != coef_path.shape):
            sources = source_points(iteration, coef_path)
        # in source_points' layout (C order): the products' rounding is the same
        prods = residual_products(design, y_tilde, coef_path,
                                  np.ascontiguousarray(sources) if clipped else None)
        flops = coef_path.shape[0] * coef_path.shape[1] ** 2
    else:
        F = residual_matrix(design, y_tilde, coef_path, fitted)
        Fv = (_source_residuals(design, y_tilde, iteration, F, coef_path, fitted_sources)
              if clipped else None)
        flops = F.shape[0] * F.shape[1] ** 2

    def readout(A, Av):
        """``(risk, G, R, K, P, Q, l1)`` of the memory matrices ``A``, ``Av``
        (``G`` only with ``matrices``; ``l1``: the rows' l1 norms of the
        inverse of the (sources') correction)."""
        A_sources = Av if has_momentum else None
        if prods is not None:
            risk, G, P, Q, K, l1 = risk_from_products(
                prods, A, design.n_eff, design.fit_intercept, A_sources=A_sources,
                iteration=iteration, matrix=matrices, policy=design.policy)
            return risk, G, None, K, P, Q, l1
        risk, G, R, K, l1 = risk_from_memory(F, A, design.n_eff, design.fit_intercept,
                                                A_sources=A_sources, iteration=iteration,
                                                return_residuals=True, F_sources=Fv,
                                                matrix=matrices, policy=design.policy)
        return risk, G, R, K, None, None, l1

    @functools.cache
    def inner_products():
        """The residuals' inner products, formed once."""
        if prods is not None:
            return prods
        if Fv is None:
            return Bunch(FF=F.T @ F)
        return Bunch(FF=F.T @ F, FFv=F.T @ Fv, FvFv=Fv.T @ Fv)

    def replicate_risk(A, Av, iterates=None, overwrite=False):
        """The risk alone at ``iterates`` (the jackknife's replicates;
        ``overwrite``: their matrices, read once)."""
        return risk_at_iterates(inner_products(), A, design.n_eff, design.fit_intercept,
                                A_sources=Av if has_momentum else None, iteration=iteration,
                                iterates=iterates, overwrite=overwrite)

    def sensitivity(A, iterates):
        """:func:`risk_sensitivity` of ``A`` (no extrapolation), after its readout."""
        return risk_sensitivity(inner_products(), A, design.n_eff, design.fit_intercept,
                                iterates, None if prods is None else prods.get("MGam"))

    with small_blas(flops, design.policy):  # the corrections of T x T matrices
        noise = choice = None
        used = getattr(state, "m", plan.n_probes)
        if plan.exact:  # no probe noise: nothing to grow
            noise, choice, used = 0.0, (0.0 if probe_goal == "choice" else None), None
        if adaptive:
            A, Av, state, out, noise, choice = _grow_pooled(
                design, iteration, coef_path, state, A, Av, readout, replicate_risk, verbose,
                probe_goal, sensitivity)
            taken("grow_pooled", **locals())  # the grown chain, its readouts
            used = state.m
            state = state if _keep_state else None
        else:
            out = readout(A, Av)
            if getattr(state, "split", None) is not None:
                state.split = None  # the template's split: this path's readouts only
        risk, G, R, K, P, Q, l1 = out
        if prods is not None:
            prods.update(P=P, Q=Q)
        support = None
        if not iteration.is_linear and not iteration.penalty.is_smooth:
            support = np.count_nonzero(coef_path, axis=0)
        reliable, df, amp, failures = risk_reliability(
            A, Av if has_momentum else A, design.n_eff, design.statistics, design.fit_intercept,
            proximal=not iteration.is_linear, support=support, return_failures=True,
            row_l1=l1)
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


def _grow_pooled(design, iteration, coef_path, state, A, Av, readout, replicate_risk,
                 verbose=0, goal="level", sensitivity=None):
    """``n_probes="auto"`` with the pooled probes: the readout of ``state``'s
    matrices ``A``, ``Av``, and more probes
    (:func:`~skacv.estimates.risk._pooled.extend_pooled`) while the probe
    noise, by a jackknife over groups of probes (or of samples for one probe),
    asks for them (:func:`~skacv.estimates.risk._probes.probes_for_noise`).
    ``goal="choice"``: the noise of the order of the iterates near the minimum
    instead of the level's. Without extrapolation (and with ``sensitivity``,
    :func:`~skacv.estimates.risk._readout.risk_sensitivity`) the replicates
    are the risk's first order in their matrices (linear in the rows' sums:
    :func:`~skacv.estimates.risk._pooled.rows_from_sums`), the readout's
    solves once instead of once a replicate.

    Returns ``(A, A_sources, state, readout's output, noise, choice)``;
    ``noise`` and ``choice`` ``None`` when not measured.
    """
    # the state's template recursion has run to the path's end: its matrices,
    # split by the chain's readout (dropped from the state: this path's only)
    template, state.split = state.split, None
    if template is None and state.nodes is not None:
        template = split_template(template_matrices(iteration, coef_path.shape[1] - 1,
                                                    state.nodes, state.template), own=True)
    # without extrapolation the replicates' readouts never read A_sources
    sources = iteration.extrapolates(coef_path.shape[1] - 1)
    stats = design.statistics
    while True:
        out = readout(A, Av)
        if state.m >= stats.pooled_probes:  # grown to all the probes: nothing to decide
            return A, Av, state, out, None, None
        level = noise_iterates(coef_path.shape[1], stats)
        rivals = choice_iterates(out[0], stats) if goal == "choice" else np.arange(0)
        iterates = np.union1d(level, rivals)
        if sources or sensitivity is None:
            matrices, factor = jackknife_matrices(state, template, stats.noise_groups,
                                                  sources)
            replicates = np.array([replicate_risk(*AAv, iterates, overwrite=True)
                                   for AAv in matrices])
        else:
            sums, factor = jackknife_sums(state, stats.noise_groups)
            P, W = sensitivity(A, iterates)
            QW = template_rows_times(template, W)
            replicates = out[0][iterates] + (2.0 / design.n_eff ** 2) * (sums @ (P * QW))
        noise = factor * probe_noise(out[0], replicates[:, np.isin(iterates, level)], level)
        choice = None
        if goal == "choice":
            choice = factor * choice_noise(out[0], replicates[:, np.isin(iterates, rivals)],
                                           rivals)
            m = probes_for_noise(state.m, choice, stats, "choice")
        else:
            m = probes_for_noise(state.m, noise, stats)
        if verbose:
            print(f"[risk] pooled probes: {state.m}, probe noise {noise:.2%} (rms relative "
                  "standard error)" + ("" if choice is None else
                                       f", of the choice {choice:.2%}")
                  + ("" if m == state.m else f": {m} probes"))
        if m == state.m:
            return A, Av, state, out, noise, choice
        state = extend_pooled(design, iteration, coef_path, state, m - state.m, verbose)
        A, Av = pooled_matrices(state, template)
