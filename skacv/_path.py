"""The fit loop shared by every trajectory estimator."""

import time

import numpy as np

# a trajectory is declared divergent when its training residual grows this
# many times larger than the residual of the zero start
_DIVERGENCE_FACTOR = 1e3


class DivergenceError(ValueError):
    """Raised when the iterates blow up (step size too large)."""


def init_state(design, coef_init=None):
    """Starting state ``x^0 = x^{-1} = v^0`` (zero by default)."""
    p = design.n_features
    x = np.zeros(p, dtype=design.dtype) if coef_init is None else coef_init.copy()
    Xx = design.matvec(x) if coef_init is not None else np.zeros(
        design.n_samples, dtype=design.dtype
    )
    return {"k": 0, "x": x, "x_prev": x, "v": x, "Xx": Xx, "Xx_prev": Xx, "Xv": Xx}


class LeastSquares:
    """Datafit ``||y~ - X~ b||^2 / (2 n_eff)``: the gradient input is the residual."""

    name = "least squares"

    def residual(self, Xv, y_tilde):
        """``r`` such that ``z = X~^T r / n_eff`` is the negative gradient at v."""
        return y_tilde - Xv

    def monitor(self, Xx, y_tilde):
        """Scalar that must stay bounded along a converging trajectory."""
        return float(np.linalg.norm(y_tilde - Xx))


def run_trajectory(design, y_tilde, iteration, n_steps, state, out, verbose=0,
                   datafit=None, fitted_out=None):
    """Advance ``state`` by ``n_steps`` steps of ``iteration``.

    The iterate of step ``k`` is written to ``out[:, k]``. ``state`` is
    updated in place, so that a later call continues bit-for-bit.

    Parameters
    ----------
    design : Design
    y_tilde : ndarray of shape (n_samples,)
    iteration : Iteration
    n_steps : int
    state : dict
        As returned by :func:`init_state`.
    out : ndarray of shape (n_features, >= state['k'] + n_steps + 1)
    verbose : int
    datafit : object, default=None
        Provides ``residual(Xv, y_tilde)`` and ``monitor(Xx, y_tilde)``;
        ``None`` is :class:`LeastSquares`.
    fitted_out : ndarray of shape (n_samples, >= state['k'] + n_steps + 1), default=None
        If given, ``X~ x^k`` is written to ``fitted_out[:, k]`` (it is computed
        by the loop anyway; the risk estimator reuses it).
    """
    if datafit is None:
        datafit = LeastSquares()
    dtype = design.dtype
    inv_n = dtype.type(1.0 / design.n_eff)
    y_norm = datafit.monitor(np.zeros_like(y_tilde), y_tilde)
    limit = _DIVERGENCE_FACTOR * (y_norm + np.finfo(dtype).tiny)
    k0 = state["k"]
    x, x_prev, v = state["x"], state["x_prev"], state["v"]
    Xx, Xx_prev, Xv = state["Xx"], state["Xx_prev"], state["Xv"]
    report = max(1, n_steps // 10)
    tic = time.perf_counter()
    for k in range(k0 + 1, k0 + n_steps + 1):
        r = datafit.residual(Xv, y_tilde)
        z = design.rmatvec(r)
        z *= inv_n
        pre = iteration.combine(k, v, x - x_prev if iteration.hb(k) else None, z)
        x_new = iteration.prox(k, pre)
        Xx_new = design.matvec(x_new)
        res_norm = datafit.monitor(Xx_new, y_tilde)
        if not np.isfinite(res_norm) or res_norm > limit:
            raise DivergenceError(
                f"The {iteration.name} iterates diverge at step {k} (training "
                f"residual norm {res_norm:.3g} against {y_norm:.3g} at the start) "
                f"with step_size={iteration.step_size:.6g}. Use step_size='auto' "
                "(1/L with L the largest eigenvalue of the Hessian) or a smaller "
                "step; gradient methods need step_size < 2/L."
            )
        v = iteration.extrapolate(k, x_new, x)
        Xv = iteration.extrapolate(k, Xx_new, Xx)
        x_prev, x = x, x_new
        Xx_prev, Xx = Xx, Xx_new
        out[:, k] = x
        if fitted_out is not None:
            fitted_out[:, k] = Xx
        if verbose and ((k - k0) % report == 0 or k == k0 + n_steps):
            mse = res_norm**2 / design.n_eff  # least squares: training mse
            print(
                f"[{iteration.name}] step {k}/{k0 + n_steps}  train mse {mse:.5g}  "
                f"{time.perf_counter() - tic:.1f}s"
            )
    state.update(k=k0 + n_steps, x=x, x_prev=x_prev, v=v, Xx=Xx, Xx_prev=Xx_prev, Xv=Xv)
    return state
