"""Data-fit terms consumed by the fit loop and by the leave-one-out tracker.

A datafit works on the weighted design of :class:`~skacv._design.Design`:
rows of ``X~`` carry ``sqrt(w_i)``, so ``Xv = X~ v`` holds ``sqrt(w_i) eta_i``
with ``eta_i`` the linear predictor of sample ``i``. It provides

* ``residual(Xv, y)``: ``r`` with ``X~^T r / n_eff`` the negative gradient of
  the mean data fit (``r_i = sqrt(w_i) (-ell'(eta_i))``);
* ``curvature(Xv, y)``: the per-sample second derivative ``ell''(eta_i)``
  (unweighted: the Hessian of the mean data fit is
  ``X~^T diag(curvature) X~ / n_eff``);
* ``monitor(Xx, y)``: a scalar that stays bounded along a converging run
  (the fit loop's divergence check);
* ``take(rows)``: the same datafit restricted to some rows (mini-batches).

The least-squares datafit is :class:`skacv._path.LeastSquares` (curvature one).
"""

import numpy as np
from scipy.special import expit


def log_loss_terms(eta, y):
    """Per-sample logistic loss ``log(1 + exp(eta)) - y eta`` (stable)."""
    return np.logaddexp(0.0, eta) - y * eta


class Logistic:
    """Binary logistic loss, labels ``y`` in {0, 1}.

    Parameters
    ----------
    sqrt_weight : ndarray of shape (n_samples,) or None
        ``sqrt(sample_weight)`` (the scaling of the rows of ``X~``).
    """

    name = "logistic"

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
        return Logistic(self.sqrt_weight[rows])

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

    def monitor(self, Xx, y):
        """Weighted mean log-loss (``log 2`` at zero)."""
        terms = log_loss_terms(self.eta(Xx), y)
        if self.sqrt_weight is None:
            return float(np.mean(terms))
        w = self.sqrt_weight**2
        return float(w @ terms / w.sum())

    def report(self, value, n_eff):
        """Progress message of the fit loop from ``monitor``."""
        return f"train log-loss {value:.5g}"


__all__ = ["Logistic", "log_loss_terms"]
