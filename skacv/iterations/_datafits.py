"""Data-fit terms: one protocol for the fit loop, the risk and leave-one-out.

A datafit works on the weighted design of :class:`~skacv.linalg._design.Design`:
rows of ``X~`` carry ``sqrt(w_i)``, so ``Xv = X~ v`` holds ``sqrt(w_i) eta_i``
with ``eta_i`` the linear predictor of sample ``i``. The *mean* data fit is
``sum_i w_i ell(y_i, eta_i) / n_eff``. Every datafit provides

* ``residual(Xv, y)``: ``r`` with ``X~^T r / n_eff`` the negative gradient of
  the mean data fit (``r_i = sqrt(w_i) (-ell'(eta_i))``);
* ``curvature(Xv, y)``: the per-sample ``ell''(eta_i)`` (unweighted; ``None``
  means one, the square loss), so that the Hessian of the mean data fit is
  ``X~^T diag(curvature) X~ / n_eff``;
* ``monitor(Xx, y)``: a scalar that stays bounded along a converging run
  (the divergence check of the fit loop) and ``report`` its progress line;
* ``take(rows)``: the same datafit on some rows (mini-batches);
* ``max_curvature``: an upper bound of ``ell''`` (the step size ``1 / L``
  uses ``L = max_curvature * lambda_max(X~^T X~ / n_eff) + l2``);
* ``quadratic``: the loss is the square loss (leave-one-out is exact,
  re-centring with an intercept is a rank-one update);
* ``bounded_gradient``: ``|ell'|`` is bounded (Huber, logistic): a step above
  the stability limit makes the iterates oscillate in a bounded band rather
  than diverge (:func:`~skacv.iterations._path.run_trajectory`'s ``user_step``).

``y`` is the fit's target: the centred, ``sqrt(w)``-weighted response for
least squares (and, uncentred, for the Huber loss), labels in {0, 1} for the
logistic loss.
"""

import math

import numpy as np
from scipy.special import expit


def log_loss_terms(eta, y):
    """Per-sample logistic loss ``log(1 + exp(eta)) - y eta`` (stable)."""
    return np.logaddexp(0.0, eta) - y * eta


def vector_norm(x):
    """``float(np.linalg.norm(x))`` of a real vector ``x``, bit for bit (its
    sum ``x . x`` and square root in the precision of ``x``) without its
    checks: the fit loop's monitors, every step."""
    x = x.ravel(order="K")
    s = x.dot(x)
    return math.sqrt(s) if type(s) is np.float64 else float(np.sqrt(s))

class LeastSquares:
    """Square loss ``(y - eta)^2 / 2``; the target is already weighted."""

    name = "squared_error"
    quadratic = True
    bounded_gradient = False
    classifier = False
    #: upper bound of ``ell''`` (the step size is ``1 / (max_curvature L)``)
    max_curvature = 1.0

    def take(self, rows):
        return self

    def residual(self, Xv, y):
        return y - Xv

    def curvature(self, Xv, y):
        return None

    def derivatives(self, eta, y):
        """Unweighted ``(-ell'(eta), ell''(eta))`` per sample."""
        return y - eta, np.ones_like(eta)

    def loss_terms(self, eta, y):
        """Per-sample loss ``(y - eta)^2``, the squared error."""
        return (y - eta) ** 2

    #: what :meth:`monitor` measures (divergence messages)
    monitor_name = "training residual norm"

    def monitor(self, Xx, y):
        """Norm of the training residual."""
        return vector_norm(y - Xx)

    def report(self, value, n_eff):
        return f"train mse {value**2 / n_eff:.5g}"


class NormalEquations(LeastSquares):
    """Least squares in the covariance form of the fit loop
    (:class:`~skacv.linalg._covariance.CovarianceForm`): the fitted values are ``X~^T
    X~ x`` and the target ``X~^T y~``, so that :meth:`monitor` is the norm
    of ``X~^T (y~ - X~ x)``, ``n_eff`` times the datafit's gradient."""

    monitor_name = "gradient norm (times n)"

    def report(self, value, n_eff):
        return f"gradient norm {value / n_eff:.5g}"


class _RowWeighted:
    """Datafits evaluated on unweighted rows: keeps ``sqrt(sample_weight)``
    and its inverse (0 on rows of zero weight); ``take(rows)`` is the datafit
    of a mini-batch (``_with_weight`` builds it)."""

    def __init__(self, sqrt_weight=None):
        self.sqrt_weight = sqrt_weight
        if sqrt_weight is None:
            self._inv = None
        else:
            pos = sqrt_weight > 0
            self._inv = np.where(pos, 1.0 / np.where(pos, sqrt_weight, 1.0), 0.0)

    def take(self, rows):
        """The datafit of the rows ``rows`` (a mini-batch)."""
        if self.sqrt_weight is None:
            return self
        return self._with_weight(self.sqrt_weight[rows])


class Huber(_RowWeighted):
    """Huber loss ``h(y - eta)``: ``r^2 / 2`` for ``|r| <= delta``, else
    ``delta |r| - delta^2 / 2``; the target is already weighted (``sqrt(w) y``,
    like least squares, without centring: the intercept is a coordinate).

    ``psi = h'`` clips the residual to ``[-delta, delta]``; the curvature is
    the indicator ``|r| <= delta`` (the inliers), which is also ``D_t`` of
    the robust risk estimate (Tan & Bellec 2024).

    Parameters
    ----------
    delta : float
        Threshold between the quadratic and the linear part (``epsilon *
        scale`` in :class:`~skacv.TrajectoryHuberRegressor`).
    sqrt_weight : ndarray of shape (n_samples,) or None
        ``sqrt(sample_weight)`` (the scaling of the rows of ``X~`` and ``y~``).
    """

    name = "huber"
    quadratic = False
    bounded_gradient = True
    monitor_name = "training Huber loss"
    classifier = False
    max_curvature = 1.0

    def __init__(self, delta, sqrt_weight=None):
        self.delta = float(delta)
        super().__init__(sqrt_weight)

    def _with_weight(self, sqrt_weight):
        return Huber(self.delta, sqrt_weight)

    def _raw(self, Xv, y):
        """Unweighted residual ``y_i - eta_i`` (0 for rows of zero weight)."""
        r = y - Xv
        return r if self._inv is None else r * self._inv.astype(r.dtype, copy=False)

    def residual(self, Xv, y):
        r = np.clip(self._raw(Xv, y), -self.delta, self.delta)
        if self.sqrt_weight is not None:
            r *= self.sqrt_weight.astype(r.dtype, copy=False)
        return r

    def curvature(self, Xv, y):
        return (np.abs(self._raw(Xv, y)) <= self.delta).astype(np.float64)

    def derivatives(self, eta, y):
        """Unweighted ``(-ell'(eta), ell''(eta))`` per sample."""
        r = y - eta
        return np.clip(r, -self.delta, self.delta), (np.abs(r) <= self.delta).astype(float)

    def loss_terms(self, eta, y):
        """Per-sample squared error ``(y - eta)^2`` (the risk is measured in
        squared error, whatever the training loss)."""
        return (y - eta) ** 2

    def huber_terms(self, eta, y):
        """Per-sample Huber loss ``h(y - eta)``."""
        a = np.abs(y - eta)
        d = self.delta
        return np.where(a <= d, 0.5 * a * a, d * a - 0.5 * d * d)

    def monitor(self, Xx, y):
        """Weighted mean Huber loss (the training objective without penalty)."""
        terms = self.huber_terms(self._raw(Xx, y), 0.0)
        if self.sqrt_weight is None:
            return float(np.mean(terms))
        w = self.sqrt_weight.astype(np.float64) ** 2
        return float(w @ terms / w.sum())

    def report(self, value, n_eff):
        return f"train huber loss {value:.5g}"


class Logistic(_RowWeighted):
    """Binary logistic loss, labels ``y`` in {0, 1}.

    Parameters
    ----------
    sqrt_weight : ndarray of shape (n_samples,) or None
        ``sqrt(sample_weight)`` (the scaling of the rows of ``X~``).
    """

    name = "log_loss"
    quadratic = False
    bounded_gradient = True
    monitor_name = "training log-loss"
    classifier = True
    max_curvature = 0.25

    def _with_weight(self, sqrt_weight):
        return Logistic(sqrt_weight)

    def eta(self, Xv):
        """Linear predictor from ``X~ v`` (0 for rows of zero weight)."""
        return Xv if self._inv is None else Xv * self._inv

    def residual(self, Xv, y):
        r = y - expit(self.eta(Xv))
        if self.sqrt_weight is not None:
            r *= self.sqrt_weight
        return r

    def curvature(self, Xv, y):
        p = expit(self.eta(Xv))
        return p * (1.0 - p)

    def derivatives(self, eta, y):
        """Unweighted ``(-ell'(eta), ell''(eta))`` per sample."""
        p = expit(eta)
        return y - p, p * (1.0 - p)

    def loss_terms(self, eta, y):
        """Per-sample log-loss."""
        return log_loss_terms(eta, y)

    def monitor(self, Xx, y):
        """Weighted mean log-loss (``log 2`` at zero)."""
        terms = log_loss_terms(self.eta(Xx), y)
        if self.sqrt_weight is None:
            return float(np.mean(terms))
        w = self.sqrt_weight**2
        return float(w @ terms / w.sum())

    def report(self, value, n_eff):
        return f"train log-loss {value:.5g}"

