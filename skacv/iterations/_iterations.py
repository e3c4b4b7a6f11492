"""The algorithms of skacv, each a subclass of the generic step
:class:`~skacv.iterations._step.Iteration` that sets its momentum.

=============  ============  ====================  =======================
algorithm      hb_k          beta_k                penalty
=============  ============  ====================  =======================
GD / ISTA      0             0                     L2 (ridge GD), L1 (ISTA)
heavy ball     momentum      0                     smooth
Nesterov       0             (k-1)/(k+2) or const  smooth
FISTA          0             (tau_{k-1}-1)/tau_k   L1 (or any)
SGD            0             0                     any (proximal SGD)
EigenPro       0             0                     L2, preconditioned step
=============  ============  ====================  =======================

A new algorithm is a subclass overriding ``hb``, ``beta`` or ``combine``;
estimators accept an instance as ``solver`` and bind the step size and the
penalty at fit time (:meth:`~skacv.iterations._step.Iteration.bind`). See
docs/architecture.rst.
"""

import math

import numpy as np

from ._penalties import L1
from ._step import Iteration


class GradientDescent(Iteration):
    """(Proximal) gradient descent: ridge GD with an ``L2`` penalty, ISTA with ``L1``."""

    @property
    def name(self):
        if self.sampler is not None:
            return "sgd"
        return "gd" if self.penalty.is_smooth else "ista"


class ISTA(GradientDescent):
    """Proximal gradient descent on the Lasso (penalty ``alpha ||b||_1``).

    ``ISTA(step_size, alpha)`` is ``GradientDescent`` with ``penalty=L1(alpha)``.
    """

    def __init__(self, step_size=1.0, alpha=None, *, penalty=None, schedule=None, sampler=None):
        if penalty is None and alpha is not None:
            penalty = L1(alpha)
        super().__init__(step_size, penalty=penalty, schedule=schedule, sampler=sampler)


def _set_extrapolation(it, extrapolation):
    """Check and set the momentum's ``extrapolation`` (``"clipped"`` or ``"plain"``)."""
    if extrapolation not in ("clipped", "plain"):
        raise ValueError(
            f"extrapolation must be 'clipped' or 'plain'; got {extrapolation!r}.")
    it.extrapolation = extrapolation
    it.restrict_extrapolation = extrapolation == "clipped"


class HeavyBall(Iteration):
    """Polyak's heavy ball: ``+ momentum (x^{k-1} - x^{k-2})``.

    With a non-smooth penalty and ``extrapolation="clipped"`` (the default)
    the difference is clipped as in :class:`FISTA`:
    ``clip(x^{k-1} - x^{k-2}, -|x^{k-1}|, |x^{k-1}|)``.
    """

    name = "heavy_ball"

    def __init__(self, step_size=1.0, momentum=0.9, *, penalty=None, schedule=None,
                 sampler=None, extrapolation="clipped"):
        super().__init__(step_size, penalty=penalty, schedule=schedule, sampler=sampler)
        self.momentum = float(momentum)
        _set_extrapolation(self, extrapolation)

    def hb(self, k):
        return self.momentum


class Nesterov(Iteration):
    """Nesterov's accelerated gradient.

    ``momentum='auto'`` uses ``beta_k = (k - 1) / (k + 2)``; a float gives a
    constant extrapolation (the strongly convex variant). With a non-smooth
    penalty, ``extrapolation`` works as in :class:`FISTA`.
    """

    name = "nesterov"

    def __init__(self, step_size=1.0, momentum="auto", *, penalty=None, schedule=None,
                 sampler=None, extrapolation="clipped"):
        super().__init__(step_size, penalty=penalty, schedule=schedule, sampler=sampler)
        self.momentum = momentum
        _set_extrapolation(self, extrapolation)
        self._stationary_momentum = not (isinstance(momentum, str) and momentum == "auto")

    def beta(self, k):
        if isinstance(self.momentum, str):
            return (k - 1.0) / (k + 2.0)
        return float(self.momentum)


class FISTA(Iteration):
    """Accelerated proximal gradient (Beck & Teboulle 2009), ``tau_0 = 1``.

    ``FISTA(step_size, alpha)`` uses ``penalty=L1(alpha)``; any penalty works.

    ``extrapolation="clipped"`` (the default) clips every penalised
    coordinate's momentum step to ``[-|x^k_j|, |x^k_j|]``:
    ``v^k_j = x^k_j + beta_k clip(x^k_j - x^{k-1}_j, -|x^k_j|, |x^k_j|)``, so
    a coordinate at zero stays at zero and none crosses zero
    (:meth:`Iteration.extrapolation_coefficients`). Beck & Teboulle's
    ``v^k = x^k + beta_k (x^k - x^{k-1})`` (``"plain"``) gives a coordinate
    that just left the support the value ``-beta_k x^{k-1}_j``; these
    ghosts make the Jacobian of the iterates, ``d x^k / d y``, grow without
    bound on correlated designs, and with it the error of the memory-matrix
    risk estimate (docs/internals.rst has the measurements). Smooth
    penalties are unaffected. Convergence rates are proved for ``"plain"``
    only.
    """

    name = "fista"
    _stationary_momentum = False

    def __init__(self, step_size=1.0, alpha=None, *, penalty=None, schedule=None,
                 sampler=None, extrapolation="clipped"):
        if penalty is None and alpha is not None:
            penalty = L1(alpha)
        super().__init__(step_size, penalty=penalty, schedule=schedule, sampler=sampler)
        _set_extrapolation(self, extrapolation)
        self._tau = [1.0]
        self._beta = [None]  # beta_k of step k >= 1, computed once (read many times a step)

    def _tau_k(self, k):
        while len(self._tau) <= k:
            t = self._tau[-1]
            self._tau.append((1.0 + math.sqrt(1.0 + 4.0 * t * t)) / 2.0)  # a Python float
        return self._tau[k]

    def beta(self, k):
        betas = self._beta
        if 0 < k < len(betas):
            return betas[k]
        while k >= len(betas) and k > 0:
            j = len(betas)
            betas.append((self._tau_k(j - 1) - 1.0) / self._tau_k(j))
        return betas[k] if k > 0 else (self._tau_k(k - 1) - 1.0) / self._tau_k(k)


class SGD(GradientDescent):
    """Mini-batch stochastic (proximal) gradient descent.

    The gradient input of step ``k`` is the weighted mean over the batch
    ``S_k = sampler(k)``: ``z = X~_S^T r_S / sum_{i in S} w_i``.
    """

    def __init__(self, step_size=1.0, sampler=None, *, penalty=None, schedule=None):
        super().__init__(step_size, penalty=penalty, schedule=schedule, sampler=sampler)
        if sampler is None:
            raise ValueError("SGD needs a sampler of mini-batches.")


class PreconditionedGD(GradientDescent):
    """Preconditioned (ridge) gradient descent ``b <- b + eta P (z - l2 b)``.

    ``P`` is a fixed symmetric positive definite preconditioner with
    ``P.apply(G)`` (EigenPro's :class:`~skacv.iterations._preconditioning.NystromPreconditioner`
    in feature space). The combination is linear, so the fit loop, the
    tangents and the leave-one-out runs use :meth:`combine` unchanged; the
    spectral form of the risk needs the nodes of the whitened problem
    (:func:`skacv.iterations._preconditioning.preconditioned_nodes`).
    """

    name = "eigenpro"

    def __init__(self, step_size=1.0, preconditioner=None, *, penalty=None, schedule=None,
                 sampler=None):
        super().__init__(step_size, penalty=penalty, schedule=schedule, sampler=sampler)
        self.preconditioner = preconditioner

    @property
    def is_stationary(self):
        return False  # the spectral form lives in the whitened coordinates

    def decay(self, k):  # the decay is the matrix I - eta l2 P, not a scalar
        raise NotImplementedError("PreconditionedGD has no scalar decay; use combine().")

    def combine(self, k, v, dx, z, n_free=None, overwrite_z=False, z_scaled=False):
        eta = self.eta(k)
        l2 = eta * self.l2 if z_scaled else self.l2  # z_scaled: P (eta z - eta l2 v)
        out = self.preconditioner.apply(z - l2 * v if self.l2 else z)
        if not z_scaled:
            out = out * out.dtype.type(eta)
        out += v
        if overwrite_z:
            z[...] = out
            return z
        return out

    def whitened(self):
        """Plain gradient descent with the same steps: the whitened problem."""
        return GradientDescent(self.step_size, schedule=self.schedule)


def check_schedule(schedule, n_steps):
    """Validate a step schedule for ``n_steps`` steps (a callable's factors
    at ``k = 1..n_steps`` too; it is returned as given)."""
    if schedule is None:
        return schedule
    s = (np.array([float(schedule(k)) for k in range(1, n_steps + 1)]) if callable(schedule)
         else np.asarray(schedule, dtype=np.float64).ravel())
    if s.shape[0] < n_steps:
        raise ValueError(
            f"step_schedule has {s.shape[0]} entries but max_iter={n_steps} "
            "steps are requested."
        )
    bad = np.flatnonzero(~np.isfinite(s) | (s < 0))
    if bad.size:
        raise ValueError(f"step_schedule must give finite non-negative factors; its factor "
                         f"at step {bad[0] + 1} is {s[bad[0]]:g}.")
    return schedule if callable(schedule) else s

