"""The memory-matrix engine: one plan (:func:`plan_estimate`), one runner
(:func:`memory_matrices`).

The memory matrices of Bellec & Tan (2024), ``A[t, s] = tr(X~ dx^t /
dy^(s))``, for the outputs and the gradient points, by the engine of the
plan's ``form``:

==================  ============================================================
``"spectral"``      linear iterations: scalar recursions on the eigenvalues or on
                    Lanczos' quadrature (:mod:`skacv.estimates.risk._spectral`)
``"preconditioned"``  gradient descent with a fixed preconditioner
``"shared"``        proximal iterations, the same probes for every source
                    (:mod:`skacv.estimates.risk._chains`)
``"pooled"``        proximal iterations, one chain of probes for all the sources
                    (``"auto"``'s; :mod:`skacv.estimates.risk._pooled`)
``"curvature"``     robust losses and mini-batches (Tan & Bellec 2024;
                    :mod:`skacv.estimates.risk._curvature`; full batch, the
                    stretches of unchanged inliers in their map's eigenbasis)
``"settled"``       a long path whose supports settle (and linear iterations):
                    :mod:`skacv.estimates.risk._settled`, run by
                    :func:`~skacv.estimates.risk._estimate.trajectory_risk`
==================  ============================================================

An engine returns ``(A, A_sources, state)``, ``state`` a dataclass of
:mod:`skacv.estimates.risk._state` (``None``: nothing to continue).
"""

from dataclasses import dataclass

import numpy as np

from ..._config import get_config, path_memory_bytes
from ..._trace import taken
from ...exceptions import EstimateBudgetError
from ...linalg._sampling import stands_for_rows
from ._chains import column_step_flops, masked_memory_matrix, shared_plan
from ._curvature import curvature_memory_matrices
from ._pooled import pooled_memory_matrix
from ._probes import pooled_probes, pooled_start_probes, range_probes
from ._propagate import chain_order, resolve_chain_dtype
from ._result import dense_bytes
from ._settled import settled_step
from ._spectral import (
    exact_nodes,
    lanczos_check,
    lanczos_nodes,
    preconditioned_memory_matrix,
    spectral_memory_matrix,
)
from ._state import PooledState, QuadratureState, usable_state


def _spectral(design, iteration, datafit=None):
    """Full-batch least squares with a linear iteration or a fixed preconditioner."""
    if iteration.sampler is not None or not (datafit is None or datafit.quadratic):
        return False
    return getattr(iteration, "preconditioner", None) is not None or iteration.is_linear


def resolve_n_probes(n_probes, design, iteration, n_iter, datafit=None):
    """The number of probes (``None``: exact traces) of ``n_probes="auto"``;
    any other value unchanged.

    Exact traces when they cost at most ``auto_exact_factor`` times
    ``auto_probes`` probes: for linear iterations an eigendecomposition,
    ``m^3 / 3`` flops (``m = min(n, p) <= auto_exact_max_dim``), against
    Lanczos, ``2 n p`` per probe and level, ``T / 2 + 2`` levels; for Jacobian
    chains ``n`` canonical vectors against the probes.
    """
    if not (isinstance(n_probes, str) and n_probes == "auto"):
        return n_probes
    taken("resolve_n_probes")
    n, p = design.n_samples, design.n_features
    stats = design.statistics
    if _spectral(design, iteration, datafit):
        m = min(n, p)
        exact = m ** 3 / 3.0
        probes = stats.auto_probes * 2.0 * n * p * (n_iter / 2 + 2)
        cheap = m <= stats.auto_exact_max_dim and exact <= stats.auto_exact_factor * probes
        return None if cheap else stats.auto_probes
    return chain_probes(n, stats)


def chain_probes(n_samples, statistics):
    """``n_probes="auto"`` of Jacobian chains: ``None`` (the ``n`` canonical
    vectors, exact traces) where they are at most ``auto_exact_factor``
    times ``auto_probes`` probes, else ``auto_probes``."""
    if n_samples <= statistics.auto_exact_factor * statistics.auto_probes:
        return None
    return statistics.auto_probes


def takes_exact_probes(design, iteration, n_iter, datafit=None, goal="level"):
    """Whether ``n_probes="auto"`` of a proximal chain (the pooled one, the
    settled form's head) takes the exact probes of
    :class:`~skacv.estimates.risk._probes.RangeProbes`: full-batch least
    squares without a heavy ball, in memory, where their number (the rank of
    ``X~``, at most ``min(n, p)``) is at most the probes the pooled chain
    starts with (:func:`~skacv.estimates.risk._probes.pooled_start_probes`):
    exact traces at no more columns a step."""
    if (iteration.sampler is not None or not (datafit is None or datafit.quadratic)
            or iteration.is_linear or getattr(iteration, "preconditioner", None) is not None
            or iteration.uses_heavy_ball(n_iter) or stands_for_rows()):
        return False
    n, p = design.n_samples, design.n_features
    return min(n, p) <= pooled_start_probes(n, design.statistics,
                                            iteration.extrapolates(n_iter), goal, p)


SCHEMES = ("auto", "pooled", "shared")


def resolve_scheme(scheme="auto"):
    """The probe scheme asked for, checked (``None`` is ``"auto"``)."""
    if scheme is None:
        scheme = "auto"
    if scheme not in SCHEMES:
        raise ValueError(f"probe_scheme must be 'auto', 'pooled' or 'shared'; got {scheme!r}.")
    return scheme


def chain_cost_in_fits(design, coef_path, n_probes):
    """``(fits, flops)``: the pooled chain's predicted time in fits of the same
    path, and its flops. A step multiplies the support's Gram matrix by the
    ``m`` probes (``2 s_k^2`` flops a column) at ``chain_gemm_advantage``
    times the fit's speed per flop."""
    T = coef_path.shape[1] - 1
    if T < 2 or n_probes is None:
        return 0.0, 0.0
    active = np.cumsum(np.any(coef_path != 0, axis=0)) > 0  # nothing active before the start
    support = np.maximum.accumulate((coef_path != 0).sum(axis=0)).astype(float)
    support = np.where(active, support, 0.0)
    flops = float(np.sum(2.0 * support**2 * float(n_probes)))
    n, p = design.n_samples, design.n_features
    policy = design.policy
    # the fit's products: two with X~ a step, or one with X~^T X~ (covariance form)
    step = 2.0 * p * p if p < n and p <= policy.covariance_max_features else 4.0 * n * p
    fit = step * T
    return flops / policy.chain_gemm_advantage / max(fit, 1.0), flops


def _check_budget(design, coef_path, n_probes):
    """Refuse a pooled chain above ``risk_time_budget`` fits (the shared probes
    are not budgeted: their cost depends on where the supports grow)."""
    budget = get_config()["risk_time_budget"]
    if budget is None:
        return
    cost, flops = chain_cost_in_fits(design, coef_path, n_probes)
    if cost > budget and flops > design.policy.risk_cheap_flops:
        s = int(np.count_nonzero(np.any(coef_path != 0, axis=1)))
        raise EstimateBudgetError(
            f"the risk estimate of this path would cost about {cost:.1f} fits (its Jacobian "
            f"chains on a support of {s} of {design.n_features} features over "
            f"{coef_path.shape[1] - 1} steps), more than risk_time_budget={budget:g} fits.")


def _settles(design, iteration, n_iter, n_probes, datafit, state, keep_state, scheme):
    """The settled form a path of ``n_iter`` steps may take: ``"linear"``,
    ``"proximal"`` (Hutchinson probes, ``scheme`` ``"auto"`` or ``"shared"``;
    whether it applies depends on the supports) or ``None``. Exact traces
    (``n_probes=None``) keep no chains to continue (``keep_state`` asks
    nothing of them)."""
    if (state is not None or (keep_state and n_probes is not None)
            or iteration.sampler is not None
            or not (datafit is None or datafit.quadratic)
            or n_iter < design.policy.settled_min_tail
            or getattr(iteration, "preconditioner", None) is not None
            or iteration.uses_heavy_ball(n_iter)):
        return None
    if iteration.is_linear:
        return "linear"
    # the settled form runs the shared probes: with "auto" too (which takes
    # the pooled ones on a path that does not settle); exact traces (``None``)
    # run it on the exact probes of the range of X~ (in memory)
    if scheme in ("auto", "shared") and (n_probes is not None or not stands_for_rows()):
        return "proximal"
    return None


@dataclass(frozen=True)
class EstimatePlan:
    """How the memory matrices of a trajectory are computed (:func:`plan_estimate`).

    Attributes
    ----------
    form : str
        The engine (the module's docstring).
    n_probes : int or None
        ``None``: exact traces.
    dtype : dtype or None
        The chains' precision.
    settles : {"linear", "proximal"} or None
    settled_step : int or None
        ``form="settled"``: where the supports settle (``None`` before a fit).
    split : int or None
        ``"shared"``: the step where backward chains take over.
    adaptive : bool
        ``"pooled"`` with ``n_probes="auto"``: more probes while noisy.
    auto_probes : bool
        ``n_probes`` was ``"auto"``.
    exact : bool
        ``"pooled"`` or ``"settled"`` with the exact probes
        (:func:`takes_exact_probes`; ``n_probes`` their number).
    """

    form: str
    n_probes: int | None
    dtype: np.dtype | None = None
    settles: str | None = None
    settled_step: int | None = None
    split: int | None = None
    adaptive: bool = False
    auto_probes: bool = False
    exact: bool = False


def plan_estimate(design, iteration, coef_path=None, n_probes="auto", probe_scheme="auto",
                  chain_dtype="auto", *, n_iter=None, datafit=None, state=None,
                  keep_state=False, adaptive=False, probe_goal="level", before=None,
                  settled=True):
    """The plan of the risk estimate of a trajectory: the one place where the
    number of probes, the form and the probe scheme are chosen.

    Parameters
    ----------
    design : Design
    iteration : Iteration
    coef_path : ndarray of shape (n_features, T + 1) or None
        ``None`` before a fit of ``n_iter`` steps: whether the path may settle
        is known, not where, nor the shared probes' split.
    n_probes : int, None or "auto"
        ``"auto"``: :func:`resolve_n_probes`.
    probe_scheme : {"auto", "pooled", "shared"}
        Exact traces and a heavy ball take the shared probes; ``"auto"`` the
        pooled ones, or the shared ones while the sample stands for rows out of
        memory (:func:`~skacv.linalg._sampling.stands_for_rows`). A path whose
        supports settle for ``settled_min_tail`` steps takes the settled form.
    chain_dtype : dtype, "auto" or None
        :func:`~skacv.estimates.risk._propagate.resolve_chain_dtype`.
    datafit : datafit, default=None
        Non-quadratic (or mini-batches): the curvature chains.
    state, keep_state
        The warm-start state to continue and whether a new one is kept.
    adaptive : bool, default=False
        Pooled probes with ``n_probes="auto"`` start with
        :func:`~skacv.estimates.risk._probes.pooled_start_probes` (or the
        state's) and the caller grows them; else all of
        :func:`~skacv.estimates.risk._probes.pooled_probes`.
    probe_goal : {"level", "choice"}, default="level"
        What the adaptive probes are grown for.
    before : EstimatePlan, default=None
        The plan of the same fit before its loop, whose probes are kept.
    settled : bool, default=True
        ``False``: never the settled form (the memory matrices themselves,
        as :func:`~skacv.estimates.risk._estimate.memory_matrix` returns).

    Returns
    -------
    plan : EstimatePlan

    Raises
    ------
    EstimateBudgetError
        When the pooled chain would cost more than ``risk_time_budget`` fits.
    ValueError
        An unknown ``probe_scheme``, or an iteration that is not
        :attr:`~skacv.Iteration.coordinatewise` (and has no preconditioner of
        its own form).
    """
    if not iteration.coordinatewise and getattr(iteration, "preconditioner", None) is None:
        raise ValueError(
            f"The memory-matrix estimate needs an iteration whose combine() acts "
            f"coordinate by coordinate; {type(iteration).__name__} overrides combine() "
            f"without declaring coordinatewise = True. Fit with estimate_risk=False "
            f"(estimate_loo=True gives its exact leave-one-out path), or set the class "
            f"attribute coordinatewise = True if its combine() is coordinate-wise.")
    T = int(n_iter) if coef_path is None else coef_path.shape[1] - 1
    scheme = resolve_scheme(probe_scheme)
    if before is None:
        auto_probes = isinstance(n_probes, str)
        n_probes = resolve_n_probes(n_probes, design, iteration, T, datafit)
    else:
        auto_probes, n_probes = before.auto_probes, before.n_probes
    n_probes, probed = _probes_within_memory(design, iteration, coef_path, n_probes, auto_probes,
                                             datafit, chain_dtype, keep_state)
    dtype = resolve_chain_dtype(design, n_probes, chain_dtype)
    settles = (_settles(design, iteration, T, n_probes, datafit, state, keep_state, scheme)
               if settled else None)
    exact = _exact_plan(design, iteration, coef_path, n_probes, auto_probes and not probed,
                        chain_dtype, datafit, probe_goal)
    if settles is not None:
        plan = _settled_plan(design, iteration, coef_path, n_probes, dtype, settles, exact,
                             auto_probes, chain_dtype,
                             _pooled_columns(design, scheme, n_probes, auto_probes, exact))
        if plan is not None:
            return plan
    if iteration.sampler is not None or not (datafit is None or datafit.quadratic):
        return EstimatePlan("curvature", n_probes, dtype, auto_probes=auto_probes)
    if getattr(iteration, "preconditioner", None) is not None:
        return EstimatePlan("preconditioned", n_probes, auto_probes=auto_probes)
    if iteration.is_linear:
        return EstimatePlan("spectral", n_probes, auto_probes=auto_probes)
    if coef_path is None:
        return EstimatePlan("chains", n_probes, dtype, auto_probes=auto_probes)
    if scheme == "auto" and stands_for_rows():
        scheme = "shared"  # the rows' probes (skacv.linalg._dask.RowSource)
        taken("rows_scheme")
    if n_probes is None or T < 1 or scheme == "shared" or iteration.uses_heavy_ball(T):
        scheme = "shared"
    elif scheme == "auto":
        scheme = "pooled"
    if scheme == "pooled" and exact:
        _check_budget(design, coef_path, exact["n_probes"])
        return EstimatePlan("pooled", **exact)
    if scheme == "pooled" and auto_probes:
        n_probes = pooled_probes(design.n_samples, design.n_features, design.statistics)
        if adaptive and isinstance(state, PooledState):  # the chain continued keeps its probes
            n_probes = state.m
        elif adaptive:
            n_probes = pooled_start_probes(design.n_samples, design.statistics,
                                           iteration.extrapolates(T), probe_goal,
                                           design.n_features)
    # a chain that starts with all the probes has nothing to grow
    adaptive = (adaptive and scheme == "pooled" and auto_probes
                and n_probes < design.statistics.pooled_probes)
    if scheme == "pooled":
        _check_budget(design, coef_path, n_probes)
    if scheme != "shared":
        return EstimatePlan(scheme, int(n_probes), dtype, adaptive=adaptive)
    split = shared_plan(design, iteration, coef_path, n_probes, dtype, state, keep_state)
    return EstimatePlan("shared", n_probes, dtype, split=split)


def _settled_plan(design, iteration, coef_path, n_probes, dtype, settles, exact, auto_probes,
                  chain_dtype, pooled_columns=None):
    """The settled form's plan of a path that may settle (``settles``), or
    ``None`` where its support does not stay fixed for ``settled_min_tail``
    final steps, or where its head costs more than the pooled chain of
    ``pooled_columns`` columns (:func:`_head_outweighs`; ``None``: no pooled
    chain to fall back on): before the fit (``coef_path`` ``None``) it may;
    exact traces (``n_probes=None``) and ``exact`` probes run on the range's
    exact probes."""
    if coef_path is None:  # before the fit: may settle
        return EstimatePlan("settled", n_probes, dtype, settles, auto_probes=auto_probes)
    T = coef_path.shape[1] - 1
    k0 = 0 if settles == "linear" else settled_step(iteration, coef_path)
    if k0 is None or T - k0 < design.policy.settled_min_tail:
        return None
    if settles == "proximal" and n_probes is None:  # exact traces: the range's probes
        exact = _range_plan(design, chain_dtype)
    if (settles == "proximal" and pooled_columns is not None
            and _head_outweighs(design, coef_path, k0,
                                exact["n_probes"] if exact else n_probes, pooled_columns)):
        return None
    if settles == "proximal" and exact:
        return EstimatePlan("settled", settles=settles, settled_step=k0, **exact)
    return EstimatePlan("settled", n_probes, dtype, settles, k0)


def _pooled_columns(design, scheme, n_probes, auto_probes, exact):
    """The columns of the pooled chain a proximal path takes where it does not
    settle (the exact probes, or at most ``pooled_probes`` with ``"auto"``),
    or ``None`` where it takes no pooled chain: exact traces, the shared
    probes, or rows out of memory."""
    if scheme != "auto" or n_probes is None or stands_for_rows():
        return None
    if exact:
        return exact["n_probes"]
    if auto_probes:
        return pooled_probes(design.n_samples, design.n_features, design.statistics)
    return int(n_probes)


def _head_outweighs(design, coef_path, k0, head_columns, pooled_columns):
    """Whether the settled form's head, shared chains of ``head_columns``
    columns a source over steps ``1..k0`` (``O(k0^2)`` chain steps), costs
    more than ``settled_head_max_ratio`` times the pooled chain of
    ``pooled_columns`` columns over the whole path (:func:`column_step_flops`
    a column and step), where the pooled chain's dense matrices fit in
    ``path_memory_limit``: a path that settles late (trace event
    ``settled_head_outweighs``)."""
    T = coef_path.shape[1] - 1
    if dense_bytes(T + 1) > path_memory_bytes():
        return False
    unit = column_step_flops(design.n_samples, chain_order(coef_path)[2], T)
    sources = np.maximum(np.arange(k0 + 1) - 1, 0)  # a step k carries sources 1..k-1
    head = float(head_columns) * float(unit[:k0 + 1] @ sources)
    pooled = float(pooled_columns) * float(unit.sum())
    if head <= design.policy.settled_head_max_ratio * pooled:
        return False
    taken("settled_head_outweighs", settled_step=k0, steps=T,
          ratio=head / max(pooled, 1.0))
    return True


def _probes_within_memory(design, iteration, coef_path, n_probes, auto_probes, datafit,
                          chain_dtype, keep_state):
    """``(n_probes, probed)``: ``n_probes`` (``probed`` False), or where
    ``n_probes="auto"``'s ``n`` canonical vectors (exact traces,
    :func:`chain_probes`) would run shared chains of ``n`` columns a source
    beyond ``path_memory_limit`` (:func:`_canonical_chains_too_large`: a long
    path at ``n <= 40``, refused after its fit before), the Hutchinson probes
    of larger designs, whose forms hold ``O(T)`` columns (``probed`` True:
    not the pooled chain's exact probes either)."""
    if not (auto_probes and n_probes is None and _canonical_chains_too_large(
            design, iteration, coef_path, datafit, chain_dtype, keep_state)):
        return n_probes, False
    taken("canonical_chains_too_large", n_probes=design.statistics.auto_probes)
    return design.statistics.auto_probes, True


def _canonical_chains_too_large(design, iteration, coef_path, datafit, chain_dtype,
                                keep_state):
    """Whether the shared chains of the ``n`` canonical vectors (``n_probes=None``:
    :func:`~skacv.estimates.risk._chains.masked_memory_matrix`'s columns, one
    block of ``min(n, width)`` per source up to the split, in the design's
    precision) on ``coef_path`` need more than ``path_memory_limit``; ``False``
    before the fit and for the forms without those chains."""
    if (coef_path is None or coef_path.shape[1] < 2 or iteration.sampler is not None
            or not (datafit is None or datafit.quadratic) or iteration.is_linear
            or getattr(iteration, "preconditioner", None) is not None):
        return False
    T = coef_path.shape[1] - 1
    width = int(chain_order(coef_path)[2][1])
    if width == 0:
        return False
    dtype = resolve_chain_dtype(design, None, chain_dtype)
    split = shared_plan(design, iteration, coef_path, None, dtype, None, keep_state)
    blocks = 2 + int(iteration.extrapolates(T)) + int(iteration.uses_heavy_ball(T))
    columns = min(design.n_samples, width) * split
    return blocks * width * columns * dtype.itemsize > path_memory_bytes()


def _exact_plan(design, iteration, coef_path, n_probes, auto_probes, chain_dtype, datafit,
                goal):
    """The plan's fields with the exact probes after a fit where
    ``n_probes="auto"`` takes them (:func:`takes_exact_probes`): their number
    and the precision of exact traces; else ``None``."""
    if not (auto_probes and n_probes is not None and coef_path is not None
            and takes_exact_probes(design, iteration, coef_path.shape[1] - 1, datafit, goal)):
        return None
    return _range_plan(design, chain_dtype)


def _range_plan(design, chain_dtype):
    """The plan's fields of the exact probes of the range of ``X~``
    (:func:`~skacv.estimates.risk._probes.range_probes`): their number, exact,
    and the precision of exact traces."""
    return dict(n_probes=range_probes(design).shape[1], exact=True,
                dtype=resolve_chain_dtype(design, None, chain_dtype))


def draws_probes(design, coef_path, plan, state):
    """Whether :func:`memory_matrices` of ``plan`` may draw from its generator:
    not the exact spectral nodes nor the exact probes, nor a pooled chain
    that continues ``state`` (it holds its own)."""
    if (plan.form == "spectral" and plan.n_probes is None) or plan.exact:
        return False
    return plan.form != "pooled" or usable_state(
        state, PooledState, plan.n_probes, plan.dtype, coef_path.shape[1] - 1,
        design.n_samples) is None


def memory_matrices(design, iteration, coef_path, plan, rng, verbose=0, state=None,
                    keep_state=False, curvature=None, own_rng=False):
    """``(A, A_sources, state)`` by the engine of ``plan``; ``own_rng``: ``rng``
    was made for this call; ``curvature`` (n_samples, T + 1): ``psi'`` for the
    curvature chains. A path of no step has zero matrices."""
    if coef_path.shape[1] == 1:
        return np.zeros((1, 1)), np.zeros((1, 1)), None
    T = coef_path.shape[1] - 1
    m, dtype, form = plan.n_probes, plan.dtype, plan.form
    taken("memory_matrices", form=form, steps=T - getattr(state, "k", 0))
    if form == "spectral":  # exact or Lanczos nodes (whose state continues a warm start)
        lam, w, state = spectral_nodes(design, iteration, T, m, rng, verbose, state, keep_state)
        return (*spectral_memory_matrix(iteration, lam, T, weights=w, return_sources=True),
                state)
    if form == "preconditioned":
        return (*preconditioned_memory_matrix(design, iteration, T, n_probes=m,
                                              random_state=rng), None)
    if form == "shared":
        return masked_memory_matrix(design, iteration, coef_path, m, rng, dtype, verbose,
                                    state=state, keep_state=keep_state, split=plan.split)
    if form == "pooled":
        return pooled_memory_matrix(design, iteration, coef_path, m, rng, dtype, verbose,
                                    state=state, keep_state=keep_state, own_rng=own_rng,
                                    probes=range_probes(design) if plan.exact else None)
    if form == "curvature":
        return curvature_memory_matrices(design, iteration, coef_path, curvature, m, rng, dtype,
                                         verbose, state=state, keep_state=keep_state)
    raise ValueError(f"no memory-matrix engine for the form {form!r}")


def spectral_nodes(design, iteration, T, n_probes, rng, verbose=0, state=None,
                   keep_state=False):
    """``(nodes, weights, state)`` of a linear iteration's ``T`` steps: the
    eigenvalues (``n_probes=None``) or Lanczos' quadrature, continuing
    ``state`` (a :class:`~skacv.estimates.risk._state.QuadratureState`)."""
    if n_probes is None:
        lam, w = exact_nodes(design)
        return lam, w, None
    if not (isinstance(state, QuadratureState) and state.Z.shape == (
            min(design.n_samples, design.n_features), int(n_probes))):
        state = None
    out = lanczos_nodes(design, n_probes, rng, depth=T // 2 + 2, verbose=verbose,
                        check=lanczos_check(iteration, T), state=state, keep_state=keep_state)
    return out[0], out[1], out[2] if keep_state else None
