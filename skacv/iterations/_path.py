"""The fit loop shared by every trajectory estimator.

:func:`run_trajectory` advances the state of an :class:`~skacv.Iteration`
on a :class:`~skacv.linalg._design.Design` with a datafit, full-batch or on the
mini-batches of ``iteration.sampler``; it writes every iterate into the
path, detects divergence (the statistical policy's ``divergence_factor``)
and a step above the stability limit. :func:`run_normal_block` advances a block of least-squares
runs (the stacked folds of K-fold CV) on a design with a one-pass normal
product, with the same iteration methods.
"""

import contextlib
import dataclasses
import math
import time
import warnings

import numpy as np

from .._trace import taken
from ..exceptions import ConvergenceWarning, DivergenceError
from ..linalg._design import max_row_norm2
from ..utils._validation import overflow_error, user_stacklevel
from ._datafits import LeastSquares, vector_norm
from ._screening import run_screened, screens_trajectory


@dataclasses.dataclass(eq=False)
class TrajectoryState:
    """Where a trajectory stands between two calls of the fit loop.

    :func:`run_trajectory` and :func:`run_normal_block` update it in place,
    so that a later call (a warm-started refit) continues bit for bit; an
    estimator keeps it (``_solver_state``, pickled with it). Arrays have
    shape (n_features,) and (n_samples,), or (n_features, n_columns) and
    (n_samples, n_columns) for a block of runs.

    Attributes
    ----------
    k : int
        Steps taken.
    x, x_prev, v : ndarray
        The iterates ``x^k``, ``x^{k-1}`` and the extrapolated point ``v^k``.
    Xx, Xx_prev, Xv : ndarray
        Their products with the design, ``X~ x^k``, ``X~ x^{k-1}`` and
        ``X~ v^k`` (:func:`run_trajectory`).
    z_next : ndarray or None
        The gradient of step ``k + 1`` when the last pass computed it (the
        one-pass loops; ``None``: taken afresh).
    rss_next : float or None
        :func:`run_normal_block`: the training residual's squared norm at
        ``v^k``, from the same pass.
    z_gap : ndarray or None
        ``X~^T r(x^k)`` when the last pass computed it beside the next
        gradient (:func:`run_trajectory`'s ``gap_out``; ``None``: not known),
        what :func:`gap_monitor` reads instead of a product of its own.
    form : {"design", "covariance"}
        The products the loop runs on: ``X~`` or the covariance form ``X~^T
        X~`` (:class:`~skacv.linalg._covariance.CovarianceForm`); a warm start
        continues in the form it started in.
    screen : TrajectoryScreen or None
        :func:`run_trajectory`'s working set of features
        (:mod:`skacv.iterations._screening`; ``None``: none yet), kept so that
        a continued fit takes the same steps.
    """

    k: int
    x: np.ndarray
    x_prev: np.ndarray
    v: np.ndarray
    Xx: np.ndarray
    Xx_prev: np.ndarray
    Xv: np.ndarray
    z_next: np.ndarray | None = None
    rss_next: float | None = None
    form: str = "design"
    z_gap: np.ndarray | None = None
    screen: object = None


def init_state(design, coef_init=None, n_columns=None, form="design", order="C"):
    """Starting state ``x^0 = x^{-1} = v^0`` (zero by default; ``n_columns``:
    a block of zero starts, one run per column, held in ``order``), a
    :class:`TrajectoryState` on the products ``form``."""
    cols = () if n_columns is None else (n_columns,)
    x = (np.zeros((design.n_features, *cols), dtype=design.dtype, order=order)
         if coef_init is None else coef_init.copy())
    Xx = design.matvec(x) if coef_init is not None else np.zeros(
        (design.n_samples, *cols), dtype=design.dtype, order=order
    )
    return TrajectoryState(k=0, x=x, x_prev=x, v=x, Xx=Xx, Xx_prev=Xx, Xv=Xx, form=form)


def run_trajectory(design, y_tilde, iteration, n_steps, state, out, verbose=0,
                   datafit=None, fitted_out=None, fuse=False, gradients_out=None,
                   sources_out=None, points_out=None, gap_out=False, user_step=False,
                   screen=False, certify=None):
    """Advance ``state`` by ``n_steps`` steps of ``iteration``.

    The iterate of step ``k`` is written to ``out[:, k]``. ``state`` is
    updated in place, so that a later call continues bit-for-bit.

    Parameters
    ----------
    design : Design
    y_tilde : ndarray of shape (n_samples,)
    iteration : Iteration
    n_steps : int
    state : TrajectoryState
        As returned by :func:`init_state`.
    out : ndarray of shape (n_features, >= state.k + n_steps + 1)
    verbose : int
    datafit : object, default=None
        A datafit of :mod:`skacv.iterations._datafits`; ``None`` is least squares.
    fitted_out : ndarray of shape (n_samples, >= state.k + n_steps + 1), default=None
        Receives ``X~ x^k`` in column ``k`` (the risk estimator reuses it).
    fuse : bool, default=False
        On a large dense design (:attr:`~skacv.linalg._design.Design.fuses`), take
        ``X~ x^k`` and the next gradient ``X~^T r(v^k)`` in one pass over
        ``X~`` (:meth:`~skacv.linalg._design.Design.panel_products`); the next
        gradient is kept in ``state`` so that a continued fit repeats the
        same rounding.
    gradients_out, sources_out, points_out : ndarray or None, default=None
        Full batch only: column ``k = state.k .. state.k + n_steps`` receives
        ``X~^T r(v^k)`` (shape (n_features, ...); the debiasing's ``X~^T F``,
        :mod:`skacv.estimates.risk._uq`), ``X~ v^k`` (shape (n_samples, ...))
        and ``v^k`` (the risk estimate's ``source_residuals`` and
        ``source_points``, :mod:`skacv.estimates.risk._readout`), which the
        loop computes anyway (the two-pass loop takes the last gradient in a
        product of its own).
    gap_out : bool, default=False
        With ``fuse``, the last step's pass also sums ``X~^T r(x^k)`` (the
        duality gap's correlations, :func:`gap_monitor`) into
        ``state.z_gap``, while each panel is in cache: a pass over ``X~``
        less a check of the gap.
    user_step : bool, default=False
        The step size is the user's (not ``1 / L``): with a loss of bounded
        gradient (``datafit.bounded_gradient``) an oversized step makes the
        iterates oscillate in a band that grows with the step, which the
        divergence factor does not see; :func:`check_oscillation` reads the
        training objective along the steps instead.
    screen : bool, default=False
        Run the steps on a certified working set of features where
        :func:`~skacv.iterations._screening.screens_trajectory` applies
        (:func:`~skacv.iterations._screening.run_screened`): the same
        iterates up to the rounding of the products.
    certify : callable, default=None
        ``certify(r, x, x_prev)`` before each step that takes its gradient
        afresh, with the residual at its gradient point and the iterates:
        ``False`` ends the loop before that step (the working set's
        certificate; ``state.k`` tells the steps taken).
    """
    if datafit is None:
        datafit = LeastSquares()
    if screen and screens_trajectory(design, iteration, datafit, gradients_out, user_step):
        return run_screened(
            design, y_tilde, iteration, n_steps, state, out, run_trajectory,
            verbose=verbose, datafit=datafit, fitted_out=fitted_out, fuse=fuse,
            sources_out=sources_out, points_out=points_out, gap_out=gap_out,
            user_step=user_step)
    taken("run_trajectory", steps=n_steps)
    if iteration.sampler is not None:
        return _run_minibatch(design, y_tilde, iteration, n_steps, state, out, verbose,
                              datafit, fitted_out, user_step)
    return _run_full_batch(design, y_tilde, iteration, n_steps, state, out, verbose, datafit,
                           fitted_out, fuse, gradients_out, sources_out, points_out, gap_out,
                           user_step, certify)


def _run_full_batch(design, y_tilde, iteration, n_steps, state, out, verbose, datafit,
                    fitted_out, fuse, gradients_out, sources_out, points_out, gap_out,
                    user_step, certify):
    """:func:`run_trajectory` for full-batch iterations: its steps over
    every column of ``design`` (a working set's, with ``certify``)."""
    dtype = design.dtype
    inv_n = dtype.type(1.0 / design.n_eff)
    y_norm = datafit.monitor(np.zeros_like(y_tilde), y_tilde)
    limit = design.statistics.divergence_factor * (y_norm + np.finfo(dtype).tiny)
    k0 = state.k
    x, x_prev, v = state.x, state.x_prev, state.v
    Xx, Xx_prev, Xv = state.Xx, state.Xx_prev, state.Xv
    report = max(1, n_steps // 10)
    tic = time.perf_counter()
    # A constant-step gradient / proximal-gradient step without momentum is a
    # nonexpansive map when step_size <= 2/L: ||x^k - x^{k-1}|| cannot grow.
    # Growth certifies a step above the stability limit (divergence may still
    # be too slow to reach the error threshold within max_iter).
    trail = [] if user_step and datafit.bounded_gradient else None
    # (the bounded-gradient losses: check_oscillation reads the objective instead)
    watch = trail is None and _nonexpansive(iteration, k0 + 1, k0 + n_steps)
    step_norm = float(np.linalg.norm(x - x_prev)) if watch and k0 > 0 else None
    floor = 10.0 * np.sqrt(np.finfo(dtype).eps)
    grew_at = None
    fuse = fuse and design.fuses
    z_next = state.z_next if fuse else None
    state.z_gap = z_gap = None
    if sources_out is not None:
        sources_out[:, k0] = Xv
    if points_out is not None:
        points_out[:, k0] = v
    done = n_steps
    with design.panel_workers() if fuse else contextlib.nullcontext():
        for k in range(k0 + 1, k0 + n_steps + 1):
            if z_next is None:
                r = datafit.residual(Xv, y_tilde)
                if certify is not None and not certify(r, x, x_prev):
                    done = k - 1 - k0
                    break
                z = design.panel_rmatvec(r) if fuse else design.rmatvec(r)
            else:
                z = z_next.copy()
            if gradients_out is not None and (k == k0 + 1 or not fuse):
                gradients_out[:, k - 1] = z
            z *= inv_n
            pre = iteration.combine(
                k, v, iteration.momentum_difference(k, x, x_prev) if iteration.hb(k) else None, z)
            x_new = iteration.prox(k, pre)
            # v^k and the clipped extrapolation's correction of X~ v^k (None: plain)
            v_new, correction = iteration.extrapolate_with_columns(k, x_new, x)
            if fuse:  # X~ x^k, X~ v^k and the next gradient in one pass
                Xx_new, Xv_new, z_next, z_gap = _fused_products(
                    design, y_tilde, iteration, datafit, k, x_new, Xx, correction,
                    gap_out and k == k0 + n_steps)
                if gradients_out is not None:
                    gradients_out[:, k] = z_next
            else:
                Xx_new = design.matvec(x_new)
            res_norm = datafit.monitor(Xx_new, y_tilde)
            if not math.isfinite(res_norm) or res_norm > limit:
                raise _diverged(iteration, k, res_norm, y_norm,
                                getattr(datafit, "monitor_name", "training residual norm"),
                                dtype=design.dtype)
            if trail is not None:
                trail.append((k, res_norm))
            if watch:
                d = vector_norm(x_new - x)
                if (grew_at is None and step_norm is not None and d > (1 + 1e-3) * step_norm
                        and d > floor * float(np.linalg.norm(x_new))):
                    grew_at = (k, step_norm, d)
                step_norm = d
            v = v_new
            Xv = Xv_new if fuse else iteration.extrapolate_fitted(
                k, x_new, x, Xx_new, Xx, design.columns_product, None, correction)
            x_prev, x = x, x_new
            Xx_prev, Xx = Xx, Xx_new
            out[:, k] = x
            if fitted_out is not None:
                fitted_out[:, k] = Xx
            if sources_out is not None:
                sources_out[:, k] = Xv
            if points_out is not None:
                points_out[:, k] = v
            if verbose and ((k - k0) % report == 0 or k == k0 + n_steps):
                msg = datafit.report(res_norm, design.n_eff)
                print(
                    f"[{iteration.name}] step {k}/{k0 + n_steps}  {msg}  "
                    f"{time.perf_counter() - tic:.1f}s"
                )
    if gradients_out is not None and not fuse and done > 0:  # the last step's gradient
        gradients_out[:, k0 + done] = design.rmatvec(datafit.residual(Xv, y_tilde))
    state.k, state.x, state.x_prev, state.v = k0 + done, x, x_prev, v
    state.Xx, state.Xx_prev, state.Xv = Xx, Xx_prev, Xv
    # without the one pass, a later one-pass continuation takes its gradient afresh
    state.z_next = z_next if fuse else None
    state.z_gap = z_gap
    if trail:
        check_oscillation(design, iteration, datafit, y_norm, trail, out)
    _warn_growth(iteration, grew_at)
    return state


def _warn_growth(iteration, grew_at):
    """The steps of a nonexpansive map grew (``grew_at``: step, before,
    after; ``None``: they did not)."""
    if grew_at is None:
        return
    k, before, after = grew_at
    warnings.warn(
        f"The {iteration.name} steps grow (||x^k - x^(k-1)|| from {before:.3g} to "
        f"{after:.3g} at step {k}) with step_size={_step(iteration):.6g}: the step "
        "is above the stability limit 2/L and the iterates will diverge. Use "
        "step_size='auto' (1/L) or a smaller step.",
        ConvergenceWarning, stacklevel=user_stacklevel(),
    )


def _fused_products(design, y_tilde, iteration, datafit, k, x_new, Xx, correction, gap=False):
    """``(X~ x^k, X~ v^k, X~^T r(v^k), X~^T r(x^k) or None)`` in one pass over
    the row panels of ``X~`` (:meth:`~skacv.linalg._design.Design.panel_products`),
    ``X~ v^k`` by the iteration's :meth:`~skacv.Iteration.fitted_extrapolation`
    on each panel with the clipped extrapolation's ``correction``
    (:meth:`~skacv.Iteration.extrapolation_columns`; ``X~ x^k`` itself when
    step ``k`` does not extrapolate); ``gap``: the last one too (else
    ``None``), the residual at ``x^k`` summed on the same panels."""
    if iteration.beta(k) == 0.0:  # v^k = x^k

        def plain(rows, P):
            return datafit.take(rows).residual(P, y_tilde[rows])

        P, z = design.panel_products(x_new, plain)
        return P, P, z, (z if gap else None)
    extrapolate = iteration.fitted_extrapolation(k, correction)
    X = design.X
    Xv = np.empty_like(Xx)

    def residual(rows, P):
        out = extrapolate(P, Xx[rows], lambda J, c: X[rows][:, J] @ c, out=Xv[rows])
        return datafit.take(rows).residual(out, y_tilde[rows])

    def at_iterate(rows, P):
        return datafit.take(rows).residual(P, y_tilde[rows])

    P, z, *z_gap = design.panel_products(x_new, residual, at_iterate if gap else None)
    return P, Xv, z, (z_gap[0] if gap else None)


def run_normal_block(design, Y, iteration, n_steps, state, out, verbose=0, on_fitted=None):
    """Advance a block of full-batch least-squares runs, one per column: the
    stacked folds of :mod:`skacv.model_selection._kfold`, on a design whose
    ``fitted_and_gradient`` takes the fitted values (held transposed, a row
    per column) and the gradients of every column in one pass over ``X``.

    Step ``k``'s pass is at ``v^k`` and gives the gradient of step ``k + 1``
    (kept in ``state``, so that a continued run repeats the same rounding;
    a run from scratch takes its first gradient in a pass of its own) and,
    when ``v^k = x^k``, the fitted values of the new iterate; the
    divergence check reads the training residual at ``v^{k-1}``.
    ``iteration`` has step sizes (and sum-form penalty strengths) of shape
    (n_columns,) or tiled to the iterates' shape
    (:func:`~skacv.model_selection._kfold.stacked_iteration`).

    Parameters
    ----------
    design : BlockProducts
        :class:`~skacv.linalg._protocols.BlockProducts` (``held_out=False``:
        only the gradients and the fitted values they use are needed).
    Y : ndarray of shape (n_columns, n_samples)
    iteration : Iteration
    n_steps : int
    state : TrajectoryState
        :func:`init_state` with ``n_columns``; updated in place (a later
        call continues bit for bit).
    out : ndarray of shape (>= n_steps, n_features, n_columns) or None
        The iterate of step ``state.k + i`` goes to ``out[i - 1]``, a
        contiguous block (``None``: the iterates are not kept).
    on_fitted : callable, default=None
        ``on_fitted(i, x, P, target)`` after the iterate ``x`` of step
        ``state.k + i + 1`` with its fitted values ``P = (X~ x)^T`` and
        ``target(Y, x)``, when the step's pass computes them (no
        extrapolation at that step).
    """
    dtype = design.dtype
    # 1 / n_eff of every column (a row broadcast on the iterates' rows)
    inv_n = np.asarray(1.0 / design.n_eff, dtype=dtype)
    y_norm = float(np.linalg.norm(Y))
    # (a Python float: the comparison below in double precision, as NumPy's)
    limit = float(design.statistics.divergence_factor * (y_norm + np.finfo(dtype).tiny))
    k0 = state.k
    x, x_prev, v = state.x, state.x_prev, state.v
    z, rss = state.z_next, state.rss_next
    if z is None:  # the gradient at v^{k0}
        _, z, rss = design.fitted_and_gradient(v, design.target(Y, v), held_out=False)
    report = max(1, n_steps // 10)
    tic = time.perf_counter()
    # where the pass reads its points: v^k is written there (no copy)
    point = design.point_buffer()
    for i, k in enumerate(range(k0 + 1, k0 + n_steps + 1)):
        if not math.isfinite(rss) or (rss > 0.0 and math.sqrt(rss) > limit):
            raise _diverged(iteration, k - 1, np.sqrt(rss), y_norm, dtype=design.dtype)
        # the pass's gradient is a new array of the loop's: scaled, and
        # combined, in place (the state's, from an earlier call, is kept)
        z = np.multiply(z, inv_n, out=None if z is state.z_next else z)
        pre = iteration.combine(
            k, v, iteration.momentum_difference(k, x, x_prev) if iteration.hb(k) else None, z,
            overwrite_z=True)
        x_new = iteration.prox(k, pre)
        v = iteration.extrapolate_iterate(k, x_new, x, point)
        if point is not None:
            v = point
        target = design.target(Y, v)
        fitted = on_fitted is not None and iteration.beta(k) == 0.0  # v^k = x^k: P = X~ x^k
        P, z, rss = design.fitted_and_gradient(v, target, held_out=fitted)
        x_prev, x = x, x_new
        if out is not None:
            out[i] = x
        if fitted:
            on_fitted(i, x, P, target)
        if verbose and (i + 1) % report == 0:
            print(f"[{iteration.name}] block of {x.shape[1]}: step {k}/{k0 + n_steps}  "
                  f"{time.perf_counter() - tic:.1f}s")
    if v is point:  # (the pass's buffer is the design's)
        v = v.copy(order="K")
    state.k, state.x, state.x_prev, state.v = k0 + n_steps, x, x_prev, v
    state.z_next, state.rss_next = z, rss
    return state


def _diverged(iteration, k, value, y_norm, measure="training residual norm",
              advice="Use step_size='auto' (1/L with L the largest eigenvalue of the "
                     "Hessian) or a smaller step; gradient methods need step_size < 2/L.",
              dtype=np.float64):
    if not np.isfinite(y_norm):  # not a divergence: the start overflows already
        return overflow_error(dtype)
    return DivergenceError(
        f"The {iteration.name} iterates diverge at step {k} ({measure} "
        f"{value:.3g} against {y_norm:.3g} at the start) "
        f"with step_size={_step(iteration):.6g}. {advice}"
    )


def _step(iteration):
    """The (largest) base step size, for messages."""
    return float(np.max(iteration.step_size))


def _nonexpansive(iteration, first, last):
    """Whether steps ``first..last`` apply one fixed map without momentum."""
    if iteration.schedule is not None or iteration.sampler is not None:
        return False
    return not iteration.has_momentum(last, first)


def minibatch_gradient(rows, r_S, weight, like):
    """``X~_S^T r_S / sum_{i in S} w_i``: the negative gradient of the mean data
    fit over the batch ``rows`` (a :meth:`~skacv.linalg._design.Design.rows` design), zero
    when the batch has no weight (then only the penalty acts)."""
    S = rows.idx
    w_S = float(len(S)) if weight is None else float(weight[S].sum(dtype=np.float64))
    if w_S <= 0:
        return np.zeros_like(like)
    z = np.asarray(rows.rmatvec(r_S))
    z *= z.dtype.type(1.0 / w_S)
    return z


def _run_minibatch(design, y_tilde, iteration, n_steps, state, out, verbose, datafit,
                   fitted_out, user_step=False):
    """:func:`run_trajectory` for iterations with a ``sampler`` (SGD).

    Step ``k`` uses ``z = X~_S^T r_S / sum_{i in S} w_i`` on the batch
    ``S = iteration.sampler(k)`` (an empty batch weight gives ``z = 0``: only
    the penalty acts). The training objective is checked once per epoch.
    """
    sampler = iteration.sampler
    dtype = design.dtype
    X_csr = design.X.tocsr() if design.sparse else None
    weight = design.weight
    y_norm = datafit.monitor(np.zeros_like(y_tilde), y_tilde)
    limit = design.statistics.divergence_factor * (y_norm + np.finfo(dtype).tiny)
    k0 = state.k
    x, x_prev, v = state.x, state.x_prev, state.v
    check_every = max(1, getattr(sampler, "n_batches", 1))
    trail = [] if user_step and datafit.bounded_gradient else None
    report = max(1, n_steps // 10)
    tic = time.perf_counter()
    for k in range(k0 + 1, k0 + n_steps + 1):
        S = sampler(k)
        rows = design.rows(S, X_csr)
        z = minibatch_gradient(rows, datafit.take(S).residual(rows.matvec(v), y_tilde[S]),
                               weight, x)
        pre = iteration.combine(
            k, v, iteration.momentum_difference(k, x, x_prev) if iteration.hb(k) else None, z)
        x_new = iteration.prox(k, pre)
        last = k == k0 + n_steps
        shown = verbose and ((k - k0) % report == 0 or last)
        checked = fitted_out is not None or last or shown or (k - k0) % check_every == 0
        if checked:
            Xx_new = design.matvec(x_new)
            value = datafit.monitor(Xx_new, y_tilde)
            if fitted_out is not None:
                fitted_out[:, k] = Xx_new
        else:  # between checks of the objective: finiteness only
            value = 0.0 if np.isfinite(np.abs(x_new).sum()) else np.inf
        if not np.isfinite(value) or value > limit:
            raise _diverged(iteration, k, value, y_norm, "training objective monitor",
                            "Use a smaller step_size or a decreasing step_schedule "
                            "(stochastic gradients need step_size < 2/L_batch).")
        if trail is not None and checked:
            trail.append((k, value))
        v = iteration.extrapolate_iterate(k, x_new, x)
        x_prev, x = x, x_new
        out[:, k] = x
        if shown:
            msg = datafit.report(value, design.n_eff)
            print(f"[{iteration.name}] step {k}/{k0 + n_steps}  {msg}  "
                  f"{time.perf_counter() - tic:.1f}s")
    Xx, Xx_prev = design.matvec(x), design.matvec(x_prev)
    Xv = (iteration.extrapolate_fitted(k0 + n_steps, x, x_prev, Xx, Xx_prev,
                                       design.columns_product)
          if n_steps else state.Xv)
    state.k, state.x, state.x_prev, state.v = k0 + n_steps, x, x_prev, v
    state.Xx, state.Xx_prev, state.Xv = Xx, Xx_prev, Xv
    if trail:
        check_oscillation(design, iteration, datafit, y_norm, trail, out)
    return state


def check_oscillation(design, iteration, datafit, start, trail, out):
    """A user's step on a loss of bounded gradient (Huber, logistic).

    With ``|ell'| <= G`` a step moves the iterate by at most ``step G
    ||X~|| / n``: above the stability limit ``2 / L`` the iterates do not
    grow geometrically (the divergence factor is never reached) but
    oscillate in a band that grows with the step (a convex, coercive
    objective pulls back any iterate far from the minimiser). ``trail``
    holds ``(k, data fit at x^k)`` of the checked steps, ``start`` its value
    at zero coefficients. With ``step > 2 / L`` (:func:`curvature_bound`,
    that of mini-batches for SGD; gradient descent and FISTA converge
    below it, so a step of ``1 / L`` never reaches this): raises
    :class:`~skacv.exceptions.DivergenceError` when no step went below
    ``start`` (no iterate is better than zero), warns when the objective
    ends above ``start`` (mini-batches, whose noise makes it non-monotone)
    or above its lowest along the path (full batch).
    """
    ks = [k for k, _ in trail]
    values = np.array([v for _, v in trail])
    tol = 10.0 * np.sqrt(np.finfo(np.float64).eps) * max(abs(start), np.finfo(np.float64).tiny)
    sampler = iteration.sampler
    stuck = values.min() > start + tol
    objective = values + np.array([iteration.penalty.value(out[:, k]) for k in ks])
    low = int(np.argmin(objective))
    ended = objective[-1] > (start if sampler is not None else objective[low]) + tol
    if not (stuck or ended):
        return
    h = _step(iteration)
    L = curvature_bound(design, datafit, iteration.penalty.l2_,
                        None if sampler is None else getattr(sampler, "batch_size", None))
    if not h > 2.0 / L:
        return
    fix = (f"Use step_size='auto' (1/L = {1.0 / L:.3g}, L = {L:.3g} the curvature bound of "
           f"the training objective{'' if sampler is None else ' on mini-batches'}) or a "
           f"step below 2/L = {2.0 / L:.3g}.")
    head = (f"The {iteration.name} iterates do not converge: step_size={h:.6g} is above the "
            f"stability limit 2/L and")
    if stuck:
        raise DivergenceError(
            f"{head} the {datafit.monitor_name} never fell below its value at zero "
            f"coefficients ({start:.4g}) in {len(ks)} checked steps (lowest "
            f"{values.min():.4g}). The loss has a bounded gradient, so the iterates "
            f"oscillate in a band that grows with the step instead of diverging. {fix}")
    where = ("its value at zero coefficients" if sampler is not None else
             f"its lowest along the path ({objective[low]:.4g} at step {ks[low]})")
    warnings.warn(
        f"{head} the training objective at step {ks[-1]} ({objective[-1]:.4g}) is above "
        f"{where}: the iterates oscillate. {fix}", ConvergenceWarning,
        stacklevel=user_stacklevel())


def curvature_bound(design, datafit, l2, batch_size=None):
    """``L``, the curvature bound of the mean objective whose ``1 / L`` is
    ``step_size="auto"``: ``max ell'' lambda_max(X~^T X~ / n_eff) + l2``, plus
    ``max ell'' max_i ||x~_i||^2 / b`` for mini-batches of ``b`` rows."""
    L = datafit.max_curvature * design.lipschitz() + l2
    if batch_size is not None:
        b = min(batch_size, design.n_samples)
        L += datafit.max_curvature * max_row_norm2(design) / b
    return L


def gap_monitor(design, datafit, penalty, target, loop_target, covariance, tol):
    """``converged(state)``: whether the duality gap at the fit loop's iterate
    is at most ``tol * ||y~||^2 / n_eff`` (scikit-learn's ``Lasso``
    tolerance), for least squares with an l1 penalty on every coordinate
    (:meth:`~skacv.iterations._penalties.Penalty.duality_gap`); ``None``
    for another problem or ``tol=None``. ``covariance``: the loop runs in the
    covariance form (``state.Xx = X~^T X~ x``, ``loop_target = X~^T y~``),
    else ``state.Xx = X~ x`` and one product with ``X~^T`` a check (none
    where the loop's last pass summed it: ``state.z_gap``; the prefix's
    columns only where the loop runs on a working set whose certificate
    keeps every other feature inside the band there,
    :meth:`~skacv.iterations._screening.TrajectoryScreen.gap_gradient`)."""
    if (tol is None or type(datafit) is not LeastSquares or penalty.is_smooth
            or penalty.n_unpenalized):
        return None
    n_eff = design.n_eff
    y = np.asarray(target, dtype=np.float64)
    yy = float(y @ y)
    c = np.asarray(loop_target, dtype=np.float64)
    goal = tol * yy / n_eff

    def converged(state):
        x = np.asarray(state.x, dtype=np.float64)
        if covariance:
            cx, Cx = float(c @ x), np.asarray(state.Xx, dtype=np.float64)
            rr, ry, corr = max(yy - 2.0 * cx + float(x @ Cx), 0.0), yy - cx, c - Cx
        else:
            r = y - np.asarray(state.Xx, dtype=np.float64)
            rr, ry = float(r @ r), float(r @ y)
            corr = state.z_gap
            if corr is None and state.screen is not None:
                corr = state.screen.gap_gradient(design, r)
            if corr is None:
                corr = design.rmatvec(r.astype(design.dtype))
            corr = np.asarray(corr, dtype=np.float64)
        return penalty.duality_gap(rr, ry, corr / n_eff, x, n_eff) <= goal

    return converged


def run_to_convergence(run, state, n_steps, check, converged):
    """``run(k)`` (``k`` steps of the fit loop on ``state``) for ``n_steps``
    steps, or, with ``converged`` (:func:`gap_monitor`), by ``check`` steps
    until ``converged(state)`` holds; returns the last step ``state.k``."""
    if converged is None:
        run(n_steps)
        return state.k
    end = state.k + n_steps
    first = state.k
    while state.k < end and not (state.k > first and converged(state)):
        run(min(check, end - state.k))
    return state.k
