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
SGD            1-eta mu   0             0                     identity
ProxGradient   1-eta mu*  0             0 or FISTA's          soft* or id.
=============  =========  ============  ====================  =============

Here ``mu`` is the ridge penalty in mean form (``alpha / n_eff`` for
scikit-learn's ``Ridge`` objective) and ``a`` the Lasso ``alpha``. ``SGD``
(and ``ProxGradient`` with a ``sampler``) replaces ``z`` by its mean over the
mini-batch ``sampler(k)``; ``*``: ``ProxGradient`` leaves trailing
coordinates (an intercept) unpenalised.
"""

import math

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
        b = float(self.beta(k))  # a NumPy float64 scalar would upcast float32 arrays
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
            self._tau.append((1.0 + math.sqrt(1.0 + 4.0 * t * t)) / 2.0)  # a Python float
        return self._tau[k]

    def beta(self, k):
        return (self._tau_k(k - 1) - 1.0) / self._tau_k(k)


class MinibatchSampler:
    """Mini-batches of rows: one random permutation per epoch.

    Step ``k`` (``k >= 1``) uses batch ``j = (k - 1) mod n_batches`` of epoch
    ``e = (k - 1) // n_batches``; the permutation of epoch ``e`` is drawn from
    ``numpy.random.default_rng([seed, e])``, so the batch of a step depends
    only on ``(seed, k)`` (a warm restart continues the same sequence). The
    last batch of an epoch is smaller when ``batch_size`` does not divide
    ``n_samples``.

    Parameters
    ----------
    n_samples : int
    batch_size : int
    seed : int
    """

    def __init__(self, n_samples, batch_size, seed):
        self.n_samples = int(n_samples)
        self.batch_size = int(min(max(batch_size, 1), self.n_samples))
        self.seed = int(seed)
        self.n_batches = -(-self.n_samples // self.batch_size)
        self._epoch, self._perm = -1, None

    def __call__(self, k):
        """Sorted row indices of the batch of step ``k``."""
        e, j = divmod(int(k) - 1, self.n_batches)
        if e != self._epoch:
            self._perm = np.random.default_rng([self.seed, e]).permutation(self.n_samples)
            self._epoch = e
        b = self.batch_size
        return np.sort(self._perm[j * b: (j + 1) * b])

    def without(self, i):
        """The same batches on the data with row ``i`` deleted (re-indexed)."""
        return _SamplerWithoutRow(self, i)


class _SamplerWithoutRow:
    """Batches of a :class:`MinibatchSampler` with one row removed."""

    def __init__(self, base, row):
        self.base, self.row = base, int(row)
        self.n_samples = base.n_samples - 1
        self.batch_size = base.batch_size
        self.n_batches = base.n_batches

    def __call__(self, k):
        S = self.base(k)
        S = S[S != self.row]
        return S - (S > self.row)


class SGD(GradientDescent):
    """Mini-batch stochastic gradient descent (``l2 > 0``: ridge SGD).

    The gradient input of step ``k`` is the weighted mean over the batch
    ``S_k = sampler(k)``: ``z = X~_S^T r_S / sum_{i in S} w_i``.
    """

    name = "sgd"
    _stationary_momentum = False

    def __init__(self, step_size, sampler, l2=0.0, schedule=None):
        super().__init__(step_size, l2=l2, schedule=schedule)
        self.sampler = sampler


class ProxGradient(Iteration):
    """Proximal gradient whose penalty skips trailing coordinates.

    For penalised objectives with an unpenalised intercept stored as the last
    coordinate(s) (logistic regression on ``[X, 1]``): the ridge decay
    ``1 - eta_k l2`` and the soft-threshold at ``eta_k l1`` act on the first
    ``n_features - n_unpenalized`` coordinates only. ``accelerated=True`` adds
    FISTA's extrapolation; ``sampler`` makes it a (proximal) SGD.

    Parameters
    ----------
    step_size : float
    l1, l2 : float, default=0.0
        Penalty ``l1 ||b||_1 + l2 ||b||^2 / 2`` on the penalised coordinates.
    n_unpenalized : int, default=0
    accelerated : bool, default=False
    schedule : None, callable or array-like, default=None
    sampler : MinibatchSampler or None, default=None
    """

    def __init__(self, step_size, l1=0.0, l2=0.0, n_unpenalized=0, accelerated=False,
                 schedule=None, sampler=None):
        super().__init__(step_size, l2=l2, schedule=schedule)
        self.l1 = float(l1)
        self.n_unpenalized = int(n_unpenalized)
        self.accelerated = bool(accelerated)
        self.sampler = sampler
        self.is_linear = self.l1 == 0.0
        self._stationary_momentum = not self.accelerated and sampler is None
        if sampler is not None:
            self.name = "sgd"
        else:
            self.name = "fista" if accelerated else ("ista" if self.l1 else "gd")
        self._tau = [1.0]

    def _n_pen(self, x):
        return x.shape[0] - self.n_unpenalized

    def penalized(self, n_coef):
        """Boolean mask of the penalised coordinates."""
        mask = np.ones(n_coef, dtype=bool)
        if self.n_unpenalized:
            mask[n_coef - self.n_unpenalized:] = False
        return mask

    def combine(self, k, v, dx, z):
        out = self.eta(k) * z
        out += v
        if self.l2:
            m = self._n_pen(v)
            out[:m] -= (self.eta(k) * self.l2) * v[:m]
        return out

    def beta(self, k):
        if not self.accelerated:
            return 0.0
        while len(self._tau) <= k:
            t = self._tau[-1]
            self._tau.append((1.0 + math.sqrt(1.0 + 4.0 * t * t)) / 2.0)  # a Python float
        return (self._tau[k - 1] - 1.0) / self._tau[k]

    def prox(self, k, pre):
        if not self.l1:
            return pre
        m = self._n_pen(pre)
        out = pre.copy()
        head = out[:m]
        tau = pre.dtype.type(self.eta(k) * self.l1)
        mag = np.abs(head)
        mag -= tau
        np.maximum(mag, 0, out=mag)
        np.copysign(mag, head, out=head)
        return out

    def prox_jacobian(self, k, x):
        if not self.l1:
            return None
        mask = x != 0
        if self.n_unpenalized:
            mask[x.shape[0] - self.n_unpenalized:] = True
        return mask


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
    "SGD",
    "ProxGradient",
    "MinibatchSampler",
    "soft_threshold",
    "check_schedule",
]
