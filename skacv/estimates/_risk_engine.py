"""The memory-matrix engine: one entry point, the probe scheme a strategy.

The memory matrices of Bellec & Tan (2024), ``A[t, s] = tr(X~ dx^t /
dy^(s))`` for the outputs and the gradient points, are computed by
:func:`memory_matrices` for any :class:`~skacv.Iteration`; *how* is a
strategy object, chosen in one place (:func:`choose_strategy`):

==============================  ==============================================
:class:`SpectralNodes`          linear iterations (GD, ridge, heavy ball,
                                Nesterov): scalar recursions on the eigenvalues
                                (exact) or on Lanczos' quadrature of the probes
                                (:mod:`skacv.estimates._risk_spectral`)
:class:`PreconditionedNodes`    gradient descent with a fixed preconditioner
:class:`SharedChains`           proximal iterations, the same probes for every
                                source (or identity probes: exact traces),
                                forward chains meeting backward ones
                                (:mod:`skacv.estimates._risk_chains`)
:class:`CoreSpaceChains`        the same probes, the chains on a diagonalised
                                core once the supports allow it
                                (:mod:`skacv.estimates._risk_core_space`)
:class:`IndependentChains`      proximal iterations, probes of their own for
                                every source, summed in blocks
                                (:mod:`skacv.estimates._risk_independent`)
:class:`PooledChains`           proximal iterations, probes shared by all
                                the sources in one chain (``"auto"``'s;
                                :mod:`skacv.estimates._risk_pooled`)
:class:`CurvatureChains`        robust losses and mini-batches: the traces ``A``
                                and ``K`` of Tan & Bellec (2024)
                                (:mod:`skacv.estimates._risk_curvature`)
==============================  ==============================================

The statistical choices (exact traces or probes, ``n_probes="auto"``; the
probe scheme, :func:`choose_scheme`;
the chains' precision) are arguments; the choices between equal computations
(split, core space, Gram matrices, chunk sizes) read the speed policy
(:func:`skacv._policy.get_policy`). The two proximal chain strategies drive
the same propagator (:class:`~skacv.estimates._risk_propagate.ForwardChains`).
Every strategy has ``memory_matrices(design, iteration, coef_path, rng,
verbose, state, keep_state) -> (A, A_sources, state)``, ``state`` a
dataclass of :mod:`skacv.estimates._risk_state` that a longer path of the
same trajectory continues (``None``: nothing to continue).
"""

from dataclasses import dataclass

import numpy as np

from .._config import get_config
from .._policy import get_policy
from ..exceptions import EstimateBudgetError
from ..linalg._sampling import stands_for_rows
from ._risk_chains import core_space_chains, masked_memory_matrix, shared_plan
from ._risk_core_space import CorePlan
from ._risk_curvature import curvature_memory_matrices
from ._risk_pooled import pooled_memory_matrix
from ._risk_independent import independent_memory_matrix
from ._risk_probes import POOLED_PROBES, pooled_start_probes
from ._risk_propagate import resolve_chain_dtype
from ._risk_spectral import (
    exact_nodes,
    lanczos_check,
    lanczos_nodes,
    preconditioned_memory_matrix,
    spectral_memory_matrix,
)
from ._risk_state import PooledState, QuadratureState

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


SCHEMES = ("auto", "pooled", "shared", "independent")


def resolve_scheme(scheme="auto"):
    """The probe scheme asked for, checked (``None`` is ``"auto"``)."""
    if scheme is None:
        scheme = "auto"
    if scheme not in SCHEMES:
        raise ValueError("probe_scheme must be 'auto', 'pooled', 'shared' or 'independent'; "
                         f"got {scheme!r}.")
    return scheme


def choose_scheme(iteration, n_probes, T, scheme="auto"):
    """The probe scheme of the proximal chains of a path of ``T`` steps:
    ``"pooled"``, ``"independent"`` or ``"shared"``.

    ``scheme`` is the estimator's ``probe_scheme``. Exact traces
    (``n_probes=None``) and an iteration with a heavy ball always take the
    shared probes. ``"auto"``: the pooled probes
    (:mod:`skacv.estimates._risk_pooled`: one chain of ``POOLED_PROBES``
    probes for all the sources, the rows' sums split by the template). (A
    path whose supports settle for the speed policy's ``settled_min_tail``
    steps or more takes the settled form before this choice, with ``"auto"``
    or ``"shared"``: :func:`~skacv.estimates._risk.settled_kind`.)
    """
    scheme = resolve_scheme(scheme)
    if n_probes is None or T < 1 or scheme == "shared" or iteration.uses_heavy_ball(T):
        return "shared"
    return "pooled" if scheme == "auto" else scheme


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
    elif scheme == "pooled":
        columns = np.full(T + 1, m)
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
    if budget is None or scheme == "shared":
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


@dataclass(frozen=True)
class SpectralNodes:
    """Linear iterations: the memory matrices from spectral nodes, exact
    (``n_probes=None``: the eigenvalues) or Lanczos' quadrature of
    ``n_probes`` probes (its state continues a warm start)."""

    n_probes: int | None = None

    def memory_matrices(self, design, iteration, coef_path, rng, verbose=0, state=None,
                        keep_state=False):
        T = coef_path.shape[1] - 1
        if self.n_probes is None:
            lam, w = exact_nodes(design)
            new_state = None
        else:
            if not (isinstance(state, QuadratureState) and state.Z.shape == (
                    min(design.n_samples, design.n_features), int(self.n_probes))):
                state = None
            out = lanczos_nodes(design, self.n_probes, rng, depth=T // 2 + 2, verbose=verbose,
                                check=lanczos_check(iteration, T), state=state,
                                keep_state=keep_state)
            lam, w = out[:2]
            new_state = out[2] if keep_state else None
        A, Av = spectral_memory_matrix(iteration, lam, T, weights=w, return_sources=True)
        return A, Av, new_state


@dataclass(frozen=True)
class PreconditionedNodes:
    """Gradient descent with a fixed preconditioner: plain gradient descent
    in whitened coordinates (no state)."""

    n_probes: int | None = None

    def memory_matrices(self, design, iteration, coef_path, rng, verbose=0, state=None,
                        keep_state=False):
        T = coef_path.shape[1] - 1
        return (*preconditioned_memory_matrix(design, iteration, T, n_probes=self.n_probes,
                                              random_state=rng), None)


@dataclass(frozen=True)
class SharedChains:
    """Proximal iterations, the same probes for every source (``n_probes=None``:
    identity probes, exact traces); forward chains up to ``split``, backward
    ones after it."""

    n_probes: int | None
    dtype: np.dtype
    split: int | None = None

    def memory_matrices(self, design, iteration, coef_path, rng, verbose=0, state=None,
                        keep_state=False):
        return masked_memory_matrix(design, iteration, coef_path, self.n_probes, rng,
                                    self.dtype, verbose, state=state, keep_state=keep_state,
                                    split=self.split)


@dataclass(frozen=True)
class CoreSpaceChains:
    """The shared probes with the chains on a diagonalised core from
    ``plan.start`` on (no state)."""

    n_probes: int
    dtype: np.dtype
    plan: CorePlan

    def memory_matrices(self, design, iteration, coef_path, rng, verbose=0, state=None,
                        keep_state=False):
        A, Av = core_space_chains(design, iteration, coef_path, self.n_probes, rng,
                                  self.dtype, self.plan, verbose)
        return A, Av, None


@dataclass(frozen=True)
class IndependentChains:
    """Proximal iterations, ``n_probes`` probes of their own for every
    source, the chains of consecutive sources summed in blocks."""

    n_probes: int
    dtype: np.dtype

    def memory_matrices(self, design, iteration, coef_path, rng, verbose=0, state=None,
                        keep_state=False):
        return independent_memory_matrix(design, iteration, coef_path, self.n_probes, rng,
                                         self.dtype, verbose, state=state,
                                         keep_state=keep_state)


@dataclass(frozen=True)
class PooledChains:
    """Proximal iterations, ``n_probes`` probes shared by every source in
    one chain, whose state continues a warm start."""

    n_probes: int
    dtype: np.dtype
    adaptive: bool = False  # n_probes="auto": more probes while noisy (trajectory_risk)

    def memory_matrices(self, design, iteration, coef_path, rng, verbose=0, state=None,
                        keep_state=False):
        return pooled_memory_matrix(design, iteration, coef_path, self.n_probes, rng,
                                    self.dtype, verbose, state=state, keep_state=keep_state)


@dataclass(frozen=True)
class CurvatureChains:
    """Robust losses and mini-batches: the traces ``A`` and ``K`` (returned
    as ``A_sources``) of Tan & Bellec (2024), ``curvature`` ``psi'`` of every
    sample at every iterate (``None``: least squares)."""

    n_probes: int | None
    dtype: np.dtype
    curvature: np.ndarray | None = None

    def memory_matrices(self, design, iteration, coef_path, rng, verbose=0, state=None,
                        keep_state=False):
        return curvature_memory_matrices(design, iteration, coef_path, self.curvature,
                                         self.n_probes, rng, self.dtype, verbose, state=state,
                                         keep_state=keep_state)


def choose_strategy(design, iteration, coef_path, n_probes="auto", probe_scheme="auto",
                    chain_dtype="auto", state=None, keep_state=False, datafit=None,
                    robust=False, curvature=None, adaptive=False, probe_goal="level"):
    """The strategy of :func:`memory_matrices` for a trajectory: the one place
    where the memory matrices' computation is chosen.

    Parameters
    ----------
    design : Design
    iteration : Iteration
    coef_path : ndarray of shape (n_features, T + 1)
    n_probes : int, None or "auto"
        Hutchinson probes; ``None``: exact traces; ``"auto"``:
        :func:`resolve_n_probes`.
    probe_scheme : {"auto", "pooled", "shared", "independent"}
        :func:`choose_scheme`; ``"auto"`` is ``"shared"`` while the sample
        stands for rows out of memory (a Dask input,
        :func:`~skacv.linalg._sampling.stands_for_rows`): its shared probes
        are the rows' own, mapped onto the sample.
    chain_dtype : dtype, "auto" or None
        :func:`~skacv.estimates._risk_propagate.resolve_chain_dtype`.
    state, keep_state
        The warm-start state to continue and whether a new one is kept
        (the shared chains then run forward only, without a core space).
    datafit : datafit, default=None
        For ``n_probes="auto"``.
    robust : bool, default=False
        The robust / mini-batch estimate (a non-quadratic datafit or
        mini-batches): :class:`CurvatureChains` with ``curvature``.
    adaptive : bool, default=False
        The pooled probes with ``n_probes="auto"`` start with
        :func:`~skacv.estimates._risk_probes.pooled_start_probes` (or the
        state's probes), and the caller grows
        them while the estimate is noisy (``PooledChains.adaptive``;
        :func:`~skacv.estimates._risk.trajectory_risk`); else
        ``POOLED_PROBES``.
    probe_goal : {"level", "choice"}, default="level"
        What the adaptive probes are grown for (``pooled_start_probes``'s
        ``goal``; :class:`~skacv.estimators._setup.FitPlan`).

    Raises
    ------
    EstimateBudgetError
        When the independent chains are predicted to cost more than
        ``risk_time_budget`` fits (:func:`chain_cost_in_fits`).
    ValueError
        Mini-batches without a robust estimate (no memory matrix).
    """
    T = coef_path.shape[1] - 1
    auto_probes = isinstance(n_probes, str)
    n_probes = resolve_n_probes(n_probes, design, iteration, T, datafit)
    if robust:
        return CurvatureChains(n_probes, resolve_chain_dtype(design, n_probes, chain_dtype),
                               curvature)
    if iteration.sampler is not None:
        raise ValueError(
            f"The memory-matrix risk estimate of {iteration.name} with mini-batches is not "
            "implemented; use estimate_risk=False and estimate_loo=True (IACV) instead."
        )
    if getattr(iteration, "preconditioner", None) is not None:
        return PreconditionedNodes(n_probes)
    if iteration.is_linear:
        return SpectralNodes(n_probes)
    dtype = resolve_chain_dtype(design, n_probes, chain_dtype)
    if probe_scheme in (None, "auto") and stands_for_rows():
        probe_scheme = "shared"  # the rows' probes (skacv.linalg._dask.RowSource)
    scheme = choose_scheme(iteration, n_probes, T, probe_scheme)
    if scheme == "pooled" and auto_probes:
        n_probes = POOLED_PROBES
        if adaptive and isinstance(state, PooledState):  # the chain continued keeps its probes
            n_probes = state.m
        elif adaptive:
            n_probes = pooled_start_probes(design.n_samples, iteration.extrapolates(T),
                                           probe_goal)
    # a chain that starts with all the probes has nothing to grow
    adaptive = adaptive and scheme == "pooled" and auto_probes and n_probes < POOLED_PROBES
    _check_budget(design, coef_path, n_probes, scheme)
    if scheme == "independent":
        return IndependentChains(int(n_probes), dtype)
    if scheme == "pooled":
        return PooledChains(int(n_probes), dtype, adaptive)
    split, plan = shared_plan(design, iteration, coef_path, n_probes, dtype, state, keep_state)
    if plan is not None:
        return CoreSpaceChains(int(n_probes), dtype, plan)
    return SharedChains(n_probes, dtype, split)


def memory_matrices(design, iteration, coef_path, strategy, rng, verbose=0, state=None,
                    keep_state=False):
    """The memory matrices ``(A, A_sources, state)`` of a trajectory by
    ``strategy`` (:func:`choose_strategy`); ``rng`` a RandomState (the
    probes). A path of no step has zero matrices."""
    if coef_path.shape[1] == 1:
        return np.zeros((1, 1)), np.zeros((1, 1)), None
    return strategy.memory_matrices(design, iteration, coef_path, rng, verbose=verbose,
                                    state=state, keep_state=keep_state)
