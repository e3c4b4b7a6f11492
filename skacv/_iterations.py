"""Iteration objects: one small object per first-order algorithm.

Every algorithm of skacv is written in one generic form. With
``z(v) = X~^T (y~ - X~ v) / n_eff`` the negative least-squares gradient,
step ``k = 1, 2, ...`` maps the state ``(x^{k-1}, x^{k-2}, v^{k-1})`` to

    pre^k = decay_k v^{k-1} + hb_k (x^{k-1} - x^{k-2}) + eta_k z(v^{k-1})
    x^k   = prox_k(pre^k)
    v^k   = x^k + beta_k (x^k - x^{k-1})

``x^k`` are the iterates stored in ``coef_path_``; ``v^k`` are the points
where the gradient is evaluated (``v = x`` without extrapolation). The
combination and the extrapolation are linear, so the *same* methods
(:meth:`Iteration.combine`, :meth:`Iteration.extrapolate`) advance the
iterates, their tangents (Jacobian actions, used by the risk estimator) and
the leave-one-out trajectories (used by IACV), and also act eigenvalue-wise
in the spectral forms. Only :meth:`Iteration.prox` and
:meth:`Iteration.prox_jacobian` are non-linear.

=============  =========  ============  ====================  =============
algorithm      decay_k    hb_k          beta_k                prox
=============  =========  ============  ====================  =============
GD             1          0             0                     identity
ridge GD       1-eta mu   0             0                     identity
heavy ball     1-eta mu   momentum      0                     identity
Nesterov       1-eta mu   0             (k-1)/(k+2) or const  identity
ISTA           1          0             0                     soft(., eta a)
FISTA          1          0             (tau_{k-1}-1)/tau_k   soft(., eta a)
=============  =========  ============  ====================  =============

Here ``mu`` is the ridge penalty in mean form (``alpha / n_eff`` for
scikit-learn's ``Ridge`` objective) and ``a`` the Lasso ``alpha``.
"""

import numpy as np


class Iteration:
    """Base class of the iteration objects.

    Parameters
    ----------
    step_size : float
        Base step ``eta``.
    l2 : float, default=0.0
        Ridge penalty ``mu`` in mean form (objective
        ``||y~ - X~ b||^2 / (2 n_eff) + mu ||b||^2 / 2``).
    schedule : None, callable or array-like, default=None
        Multiplies the step: ``eta_k = step_size * schedule(k)`` (callable of
        the step number ``k >= 1``) or ``step_size * schedule[k - 1]``.
    """

    name = "base"
    #: prox is the identity: the map from the data to the iterates is linear
    is_linear = True

    def __init__(self, step_size, l2=0.0, schedule=None):
        self.step_size = float(step_size)
        self.l2 = float(l2)
        self.schedule = schedule

    # ----------------------------------------------------------- coefficients
    def eta(self, k):
        """Step size of step ``k`` (the step producing ``x^k``)."""
        s = self.schedule
        if s is None:
            return self.step_size
        if callable(s):
            return self.step_size * float(s(k))
        return self.step_size * float(s[k - 1])

    def decay(self, k):
        return 1.0 - self.eta(k) * self.l2

    def hb(self, k):
        return 0.0

    def beta(self, k):
        return 0.0

    @property
    def is_stationary(self):
        """True when every step applies the same linear map (Toeplitz memory)."""
        return self.is_linear and self.schedule is None and self._stationary_momentum

    _stationary_momentum = True

    # ------------------------------------------------------- the linear parts
    def combine(self, k, v, dx, z):
        """``decay_k v + hb_k dx + eta_k z`` (dx = x^{k-1} - x^{k-2})."""
        out = self.eta(k) * z
        d = self.decay(k)
        out += v if d == 1.0 else d * v
        h = self.hb(k)
        if h != 0.0:
            out += h * dx
        return out

    def extrapolate(self, k, x, x_prev):
        """``v^k = x^k + beta_k (x^k - x^{k-1})``."""
        b = self.beta(k)
        if b == 0.0:
            return x
        return (1.0 + b) * x - b * x_prev

    # ------------------------------------------------------------------ prox
    def prox(self, k, pre):
        return pre

    def prox_jacobian(self, k, x):
        """Diagonal of the prox Jacobian at step ``k`` given ``x^k``.

        ``None`` means the identity; otherwise a boolean mask (1 where the
        coordinate is free).
        """
        return None

    # ------------------------------------------------------------- tangents
    def tangent(self, k, dv, dx1, dx2, dz, mask):
        """Advance tangent vectors (blocks of columns) by one step.

        Parameters
        ----------
        dv, dx1, dx2 : arrays
            Tangents of ``v^{k-1}``, ``x^{k-1}`` and ``x^{k-2}``.
        dz : array
            Tangent of the gradient input ``z`` at step ``k`` (the consumer
            supplies it: ``(injection - X~^T X~ dv) / n_eff``).
        mask : None or boolean array of shape (n_features,)
            ``prox_jacobian(k, x^k)``.

        Returns
        -------
        dx, dv : arrays
            Tangents of ``x^k`` and ``v^k``.
        """
        h = self.hb(k)
        dpre = self.combine(k, dv, (dx1 - dx2) if h != 0.0 else None, dz)
        if mask is not None:
            dpre *= mask.reshape((-1,) + (1,) * (dpre.ndim - 1))
        return dpre, self.extrapolate(k, dpre, dx1)

    def __repr__(self):
        return f"{type(self).__name__}(step_size={self.step_size:.4g})"


class GradientDescent(Iteration):
    """Gradient descent (``l2 > 0``: ridge gradient descent)."""

    name = "gd"


class HeavyBall(Iteration):
    """Polyak's heavy ball: ``+ momentum (x^{k-1} - x^{k-2})``."""

    name = "heavy_ball"

    def __init__(self, step_size, momentum=0.9, l2=0.0, schedule=None):
        super().__init__(step_size, l2=l2, schedule=schedule)
        self.momentum = float(momentum)

    def hb(self, k):
        return self.momentum


class Nesterov(Iteration):
    """Nesterov's accelerated gradient.

    ``momentum='auto'`` uses ``beta_k = (k - 1) / (k + 2)``; a float gives a
    constant extrapolation (the strongly convex variant).
    """

    name = "nesterov"

    def __init__(self, step_size, momentum="auto", l2=0.0, schedule=None):
        super().__init__(step_size, l2=l2, schedule=schedule)
        self.momentum = momentum
        self._stationary_momentum = not (
            isinstance(momentum, str) and momentum == "auto"
        )

    def beta(self, k):
        if isinstance(self.momentum, str):
            return (k - 1.0) / (k + 2.0)
        return float(self.momentum)


def soft_threshold(x, tau):
    """Soft-thresholding ``sign(x) max(|x| - tau, 0)``."""
    return np.sign(x) * np.maximum(np.abs(x) - tau, 0)


class ISTA(Iteration):
    """Proximal gradient descent on the Lasso (penalty ``alpha ||b||_1``)."""

    name = "ista"
    is_linear = False

    def __init__(self, step_size, alpha, l2=0.0, schedule=None):
        super().__init__(step_size, l2=l2, schedule=schedule)
        self.alpha = float(alpha)

    def prox(self, k, pre):
        tau = pre.dtype.type(self.eta(k) * self.alpha)
        out = np.abs(pre)
        out -= tau
        np.maximum(out, 0, out=out)
        return np.copysign(out, pre, out=out)

    def prox_jacobian(self, k, x):
        return x != 0


class FISTA(ISTA):
    """FISTA (Beck & Teboulle 2009) with ``tau_0 = 1``."""

    name = "fista"
    _stationary_momentum = False

    def __init__(self, step_size, alpha, l2=0.0, schedule=None):
        super().__init__(step_size, alpha, l2=l2, schedule=schedule)
        self._tau = [1.0]

    def _tau_k(self, k):
        while len(self._tau) <= k:
            t = self._tau[-1]
            self._tau.append((1.0 + np.sqrt(1.0 + 4.0 * t * t)) / 2.0)
        return self._tau[k]

    def beta(self, k):
        return (self._tau_k(k - 1) - 1.0) / self._tau_k(k)


def check_schedule(schedule, n_steps):
    """Validate a step schedule for ``n_steps`` steps."""
    if schedule is None or callable(schedule):
        return schedule
    s = np.asarray(schedule, dtype=np.float64).ravel()
    if s.shape[0] < n_steps:
        raise ValueError(
            f"step_schedule has {s.shape[0]} entries but max_iter={n_steps} "
            "steps are requested."
        )
    if not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ValueError("step_schedule must contain finite non-negative factors.")
    return s


__all__ = [
    "Iteration",
    "GradientDescent",
    "HeavyBall",
    "Nesterov",
    "ISTA",
    "FISTA",
    "soft_threshold",
    "check_schedule",
]
