"""FISTA in a rank-one-corrected metric: the converged Lasso path's solver
on designs with one dominant direction (a common factor of the features).

With ``H = X~_W^T X~_W / n_eff`` whose top eigenvalue ``L`` (eigenvector
``u``) stands far above the rest of its spectrum (equicorrelated features:
``L ~ rho |W|`` against a bulk below ``(1 - rho) (1 + sqrt(|W| / n))^2``),
FISTA's step ``1 / L`` moves every other direction ``L / lambda`` times too
slowly. The metric

    M = b I + (a - b) u u^T,   a >= max of v^T H v over unit v near u,
                               b >= max of H on the complement of u,

majorises ``H`` (:func:`rank_one_metric` sets ``a`` and ``b`` so that it
does, up to the accuracy of a few Lanczos steps, with a margin), and the
proximal-gradient step in it (a variable-metric forward-backward step with
a fixed metric, Becker & Fadili 2012)

    x = argmin_x 1/2 ||x - w||_M^2 + alpha ||x||_1,   w = v + M^{-1} z

(``z`` the negative gradient) converges at the pace of ``b / lambda_min``
instead of ``L / lambda_min`` (``docs/speed_policy.rst``, ``path_metric``).
The prox is ``x = soft(w - theta u / b, alpha / b)`` with the
scalar ``theta`` the root of ``g(theta) = theta - (a - b) u^T (x(theta) -
w)``, increasing and piecewise linear with slopes at least 1 (Newton's
method on its pieces, kept inside a bracket).

Only the converged path uses it (:mod:`skacv.model_selection._lasso_path`):
its solutions do not depend on the algorithm, while an estimator's
``coef_path_`` is the trajectory of the solver the user chose. The metric
prox has no diagonal Jacobian, so :class:`MetricFISTA` has no tangent.
"""

import numpy as np

from ..linalg._linalg import lanczos_top
from ._iterations import FISTA
from ._penalties import L1, ElasticNet


class RankOneMetric:
    """``M = b I + (a - b) u u^T`` (``u`` a unit vector, ``a >= b > 0``)."""

    def __init__(self, u, a, b):
        u = np.asarray(u, dtype=np.float64)
        self.u = u / np.linalg.norm(u)
        self.a, self.b = float(a), float(b)
        self.c = self.a - self.b
        self.theta = 0.0  # the last prox's root: the next one's start

    def solve(self, z):
        """``M^{-1} z = (z - (c / a) (u^T z) u) / b`` (Sherman-Morrison)."""
        z = np.asarray(z)
        coef = (self.c / self.a) * float(self.u @ z)
        out = z - (coef * self.u).astype(z.dtype, copy=False)
        out /= z.dtype.type(self.b)
        return out

    def prox_l1(self, w, alpha):
        """``argmin_x 1/2 ||x - w||_M^2 + alpha ||x||_1``."""
        u, b, c = self.u, self.b, self.c
        w64 = np.asarray(w, dtype=np.float64)
        tau = alpha / b
        scale = c * float(np.abs(u) @ np.abs(w64)) + c * tau * float(np.abs(u).sum()) + 1.0

        def x_of(theta):
            s = w64 - (theta / b) * u
            return np.sign(s) * np.maximum(np.abs(s) - tau, 0.0)

        theta, lo, hi = self.theta, -np.inf, np.inf
        for _ in range(100):
            x = x_of(theta)
            g = theta - c * float(u @ (x - w64))
            if abs(g) <= 1e-13 * (abs(theta) + scale):
                break
            if g > 0:
                hi = theta
            else:
                lo = theta
            slope = 1.0 + (c / b) * float(u[x != 0] @ u[x != 0])
            new = theta - g / slope  # the root of this piece
            if not lo < new < hi:  # left the bracket: bisect (or expand)
                new = (lo + hi) / 2 if np.isfinite(lo) and np.isfinite(hi) else (
                    theta - 2 * g)
            theta = new
        self.theta = theta
        return x_of(theta).astype(np.asarray(w).dtype, copy=False)


class MetricFISTA(FISTA):
    """FISTA with the step ``M^{-1}`` and the prox in the metric ``M``
    (a :class:`RankOneMetric`) for an ``L1`` penalty without unpenalised
    coordinates; the momentum and its clipping are FISTA's.

    With a ridge part ``l2`` (the elastic net ``alpha ||x||_1 + l2 ||x||^2 /
    2``) the smooth part's Hessian is ``H + l2 I``, which ``M + l2 I`` (the
    same form, ``a`` and ``b`` shifted by ``l2``) majorises: the step is
    ``(M + l2 I)^{-1} (z - l2 v)`` and the l1 prox is taken in that metric.
    """

    name = "fista (rank-one metric)"

    def __init__(self, metric, alpha, *, l2=0.0, extrapolation="clipped"):
        l2 = float(l2)
        if l2:
            metric = RankOneMetric(metric.u, metric.a + l2, metric.b + l2)
        penalty = ElasticNet(alpha, l2) if l2 else L1(alpha)
        super().__init__(1.0 / metric.a, penalty=penalty, extrapolation=extrapolation)
        self.metric = metric

    def combine(self, k, v, dx, z, n_free=None, overwrite_z=False, z_scaled=False):
        if z_scaled or dx is not None:
            raise NotImplementedError("MetricFISTA takes the plain gradient input.")
        l2 = self.penalty.l2_
        out = self.metric.solve(z - v.dtype.type(l2) * v if l2 else z)
        out += v
        if overwrite_z:
            z[...] = out
            return z
        return out

    def prox(self, k, pre, scale=None):
        if scale is not None:
            raise NotImplementedError("MetricFISTA has one l1 strength.")
        return self.metric.prox_l1(pre, self.penalty.l1_)

    def prox_jacobian(self, k, x):
        raise NotImplementedError("The metric prox has no diagonal Jacobian.")

    def tangent(self, *args, **kwargs):
        raise NotImplementedError("MetricFISTA solves converged paths; it has no tangent.")


def spike_possible(top, second, policy):
    """Whether a spectrum can have a top eigenvalue the speed ``policy``'s
    ``path_metric_min_ratio`` times above the rest, from the Lanczos run
    that set the step: its upper estimate ``top`` of the top eigenvalue and
    its second Ritz value ``second``, a lower bound of the second eigenvalue.
    ``False`` (the isotropic designs) decides without a product; ``True``
    leaves it to :func:`rank_one_metric`."""
    return top >= policy.path_metric_min_ratio * policy.metric_margin * second


def rank_one_metric(op, dim, u, policy, rest=None):
    """The metric of :class:`MetricFISTA` for the PSD operator ``op`` (of
    dimension ``dim``) with the top direction ``u`` (a Lanczos Ritz vector),
    or ``None`` when its top eigenvalue does not stand the speed policy's
    ``path_metric_min_ratio`` times above the rest (callers test
    :func:`spike_possible` first).

    ``b`` is the speed policy's ``metric_margin`` times the Lanczos estimate
    (its Ritz value plus residual norm) of the top of ``P op P``, ``P = I - u u^T``, from
    ``rest`` (the previous call's direction, a warm start) or a random start;
    ``a = u^T op u + ||P op u||^2 / (b - b0)`` (``b0`` that estimate), so that
    ``M - op`` is positive semidefinite on ``span(u)`` plus any direction
    where ``op`` is at most ``b0``: the cross term ``2 s t u^T op w`` of ``x =
    s u + t w`` is at most ``(a - u^T op u) s^2 + (b - b0) t^2``.

    Returns ``(metric, rest_direction)``.
    """
    u = np.asarray(u, dtype=np.float64)
    norm = np.linalg.norm(u)
    if dim < 2 or not norm > 0:
        return None, None
    u = u / norm
    Hu = np.asarray(op(u), dtype=np.float64)
    mu = float(u @ Hu)
    r2 = float(np.sum((Hu - mu * u) ** 2))

    def deflated(v):
        v = v - (u @ v) * u
        w = np.asarray(op(v), dtype=np.float64)
        return w - (u @ w) * u

    start = None if rest is None or rest.shape[0] != dim else rest - (u @ rest) * u
    b0, top, _ = lanczos_top(deflated, dim, start, policy.metric_lanczos_steps)
    b = policy.metric_margin * b0
    if not b > 0:
        return None, None
    a = mu + r2 / (b - b0)
    if a < policy.path_metric_min_ratio * b:
        return None, top
    return RankOneMetric(u, a, b), top
