"""Penalty objects consumed by the iterations (skglm's datafit / penalty split).

A penalty ``l1 ||w||_1 + l2 ||w||^2 / 2`` is added to the *mean* data fit
(the objective every iteration works on, see :mod:`skacv.iterations._iterations`).
The smooth part ``l2`` enters the gradient step as a decay ``1 - eta l2``;
the non-smooth part ``l1`` is the proximal step (soft-thresholding at
``eta l1``). Trailing ``n_unpenalized`` coordinates (an intercept stored as
the last coordinate) are left alone.

``sum_form=True`` declares a penalty that the user's objective adds to the
*summed* loss (scikit-learn's ``Ridge``: ``||y - Xw||^2 + alpha ||w||^2``):
in mean form its strength is divided by the total sample weight, so a
leave-one-out objective, which has less weight, has a slightly larger
mean-form penalty (:meth:`Penalty.l2_at`, :meth:`Penalty.l1_at`).
"""

import numpy as np


def soft_threshold(x, tau, out=None, neg_tau=None):
    """Soft-thresholding ``sign(x) max(|x| - tau, 0)`` (``out`` may be ``x``).

    Formed as ``x - clip(x, -tau, tau)`` (``neg_tau``: ``-tau`` if known): the
    same values, bit for bit, as ``sign(x) (|x| - tau)`` where ``|x| > tau``
    (round to nearest is symmetric), and a zero elsewhere (``+0``, where
    the sign's copy gave ``-0`` for a negative ``x``), with ``tau`` in the
    precision of ``x``; three passes of ``minimum``, ``maximum`` and
    ``subtract`` instead of ``abs``, ``subtract``, ``maximum`` and
    ``copysign`` (the last several times slower than the others on
    float32 blocks with mixed signs)."""
    clipped = np.minimum(x, tau)
    np.maximum(clipped, -tau if neg_tau is None else neg_tau, out=clipped)
    return np.subtract(x, clipped, out=clipped if out is None else out)


def short_repr(value):
    """``value`` in a repr: a number to 4 digits, an array of them (one per
    column of a block of stacked folds) abridged."""
    if np.ndim(value) == 0:
        return f"{value:.4g}"
    return np.array2string(np.asarray(value), precision=4, threshold=6)


def duality_gap(rr, ry, corr, l1_norm, l1, n_eff, l2=0.0, coef=None, positive=False):
    """Duality gap of least squares with the elastic-net penalty, mean form
    ``||r||^2 / (2 n_eff) + l1 ||b||_1 + l2 ||b||^2 / 2``, from ``rr =
    ||r||^2``, ``ry = r^T y~``, ``corr = X~^T r / n_eff`` and ``l1_norm =
    ||b||_1`` (``coef``: ``b``, read with ``l2 > 0``); the dual point is ``r``
    scaled into the constraint ``||X~^T theta / n_eff - l2 b||_inf <= l1``
    (scikit-learn's ``enet_coordinate_descent``, divided by ``n_eff``;
    ``positive``: the one-sided constraint ``max(X~^T theta / n_eff - l2 b)
    <= l1`` of ``b >= 0``). ``l1 = 0`` (ridge): the dual point ``r`` itself."""
    w2 = 0.0
    if l2:
        b = np.asarray(coef, dtype=np.float64)
        corr = corr - l2 * b
        w2 = float(b @ b)
    dn = float(np.max(corr if positive else np.abs(corr))) if corr.size else 0.0
    c = l1 / dn if dn > l1 and l1 > 0 else 1.0
    return ((0.5 * rr * (1.0 + c * c) - c * ry) / n_eff + l1 * l1_norm
            + 0.5 * l2 * (1.0 + c * c) * w2)


class Penalty:
    """Elastic-net penalty ``l1 ||w||_1 + l2 ||w||^2 / 2`` in mean form.

    Parameters
    ----------
    l1 : float, default=0.0
        Strength of the l1 part (the objective's units).
    l2 : float, default=0.0
        Strength of the ridge part (the objective's units).
    sum_form : bool, default=False
        The objective adds the penalty to the summed loss: the mean-form
        strengths are ``l1 / n_eff`` and ``l2 / n_eff``.
    n_eff : float, default=1.0
        Total sample weight the mean form refers to (used with ``sum_form``).
    n_unpenalized : int, default=0
        Number of trailing coordinates without penalty.
    positive : bool, default=False
        Constrain the penalised coordinates to be non-negative (scikit-learn's
        ``positive=True``): the prox is ``max(0, x - tau)`` (the indicator of
        the orthant added to the penalty), its Jacobian still the diagonal
        mask of the non-zero (now strictly positive) coordinates.

    Attributes
    ----------
    l1_, l2_ : float
        Mean-form strengths used by the iterations.
    """

    name = "penalty"

    def __init__(self, l1=0.0, l2=0.0, *, sum_form=False, n_eff=1.0, n_unpenalized=0,
                 positive=False):
        self.l1, self.l2 = float(l1), float(l2)
        self.positive = bool(positive)
        self.sum_form = bool(sum_form)
        self.n_eff = float(n_eff)
        self.n_unpenalized = int(n_unpenalized)
        scale = 1.0 / self.n_eff if self.sum_form else 1.0
        self.l1_, self.l2_ = self.l1 * scale, self.l2 * scale

    @property
    def is_smooth(self):
        """No proximal step (the map from the data to the iterates is linear)."""
        if self.positive:
            return False
        l1 = self.l1_  # a float, or per column (stacked folds)
        return not (self._any(l1, "l1") if isinstance(l1, np.ndarray) else l1)

    def _any(self, strength, name):
        """Whether ``strength`` (an array of strengths per column: stacked
        folds) is non-zero anywhere; a read-only array (a block's tiled
        strengths, the same array at every step) is looked at once (held
        under ``name``): it must not be a view of memory written later
        (``_tiled`` makes its own copy)."""
        if not isinstance(strength, np.ndarray) or strength.flags.writeable:
            return bool(np.any(strength))
        held = self.__dict__.get("_held_any_" + name)
        if held is None or held[0] is not strength:
            held = self.__dict__["_held_any_" + name] = (strength, bool(strength.any()))
        return held[1]

    def _at(self, strength, mean_form, n_eff):
        """Mean-form strength for total weights ``n_eff`` (array-like): a
        sum-form ``strength`` divided by them, a mean-form one as it is."""
        n_eff = np.asarray(n_eff, dtype=np.float64)
        if not self.sum_form:
            return np.broadcast_to(mean_form, n_eff.shape)
        with np.errstate(divide="ignore"):
            return np.where(n_eff > 0, strength / np.where(n_eff > 0, n_eff, 1.0), 0.0)

    def l2_at(self, n_eff):
        """Mean-form ridge strength for total weights ``n_eff`` (array-like)."""
        return self._at(self.l2, self.l2_, n_eff)

    def penalized(self, n_coef):
        """Boolean mask of the penalised coordinates."""
        mask = np.ones(n_coef, dtype=bool)
        if self.n_unpenalized:
            mask[n_coef - self.n_unpenalized:] = False
        return mask

    def _head(self, x):
        return x.shape[0] - self.n_unpenalized

    def decay(self, v, step, out, n_free=None):
        """``out -= step l2 v`` on the penalised coordinates (the gradient of
        the ridge part); ``v`` has coordinates on its first axis, the last
        ``n_free`` of them unpenalised (default ``n_unpenalized``; ``0``: every
        row decays, for rows that are linear images of penalised coordinates)."""
        l2 = self.l2_
        if (l2 != 0.0) if isinstance(l2, float) else self._any(l2, "l2"):
            m = v.shape[0] - (self.n_unpenalized if n_free is None else n_free)
            if m == v.shape[0] == out.shape[0]:  # every row (without the views)
                out -= self._decay_factor(step, l2) * v
            else:
                out[:m] -= (step * l2) * v[:m]
        return out

    def _decay_factor(self, step, l2):
        """``step * l2``; for a read-only array ``step`` and strengths ``l2``
        (a block's step sizes and tiled strengths,
        :func:`~skacv.model_selection._kfold.stacked_iteration`: the same
        arrays at every step) formed once and held (as :meth:`_threshold`)."""
        if not (isinstance(step, np.ndarray) and isinstance(l2, np.ndarray)
                and not step.flags.writeable and not l2.flags.writeable):
            return step * l2
        held = self.__dict__.get("_held_decay")
        if held is None or held[0] is not step or held[1] is not l2:
            factor = step * l2
            factor.flags.writeable = False
            held = self.__dict__["_held_decay"] = (step, l2, factor)
        return held[2]

    def l1_at(self, n_eff):
        """Mean-form l1 strength for total weights ``n_eff`` (array-like)."""
        return self._at(self.l1, self.l1_, n_eff)

    def prox(self, pre, step, scale=None):
        """Proximal step at ``pre`` with step size ``step`` (a new array or ``pre``).

        ``scale`` (shape ``(n_columns,)``, for a block of columns ``pre``)
        multiplies the l1 strength column by column: the left-out objectives
        of a sum-form penalty (:meth:`l1_at`).
        """
        if self.is_smooth:
            return pre
        tau, neg_tau = self._threshold(step, pre)
        if scale is not None:
            tau = (tau * np.asarray(scale)).astype(pre.dtype)
            neg_tau = None
        if self.positive:  # max(0, soft-threshold) = max(0, pre - tau)
            out = pre.copy()
            head = out[:self._head(pre)]
            np.maximum(np.subtract(head, tau, out=head), 0, out=head)
            return out
        if not self.n_unpenalized:
            return soft_threshold(pre, tau, neg_tau=neg_tau)
        out = pre.copy()
        m = self._head(pre)
        soft_threshold(out[:m], tau, out=out[:m])
        return out

    def zero_band(self):
        """The band of gradients that keeps a zero at zero: a coordinate whose
        point ``v_j`` and momentum are zero stays at zero through a step
        whose mean-form negative gradient has ``|z_j| <= band``
        (soft-thresholding at ``eta l1``, or ``max(0, x - eta l1)`` with
        ``positive``: the band is ``l1``). ``None`` where no band holds for
        every coordinate: unpenalised coordinates, strengths per column, a
        subclass's own prox (the working sets of the stacked folds,
        ``skacv.model_selection._fold_screening``)."""
        return None if self.n_unpenalized else self.head_zero_band()

    def head_zero_band(self):
        """:meth:`zero_band` of the penalised coordinates (the trailing
        ``n_unpenalized`` aside): ``None`` for strengths per column or a
        subclass's own prox."""
        if type(self).prox is not Penalty.prox or isinstance(self.l1_, np.ndarray):
            return None
        return float(self.l1_)

    def _threshold(self, step, pre):
        """``(tau, -tau)``, ``tau = step * l1_`` in the precision of ``pre``
        (``-tau``: ``None`` unless held); for a read-only array ``step`` (a
        block's step sizes, :func:`~skacv.model_selection._kfold.stacked_iteration`:
        the same array at every step) both kept, tiled to the shape and
        layout of ``pre`` (``minimum`` and ``maximum`` on equal strides: the
        broadcast of a row is several times slower), and given again for it."""
        dtype = pre.dtype
        held = self.__dict__.get("_held_threshold")
        if (held is not None and held[0] is step and held[1] == dtype
                and held[2].shape == pre.shape):
            return held[2], held[3]
        tau = dtype.type(step * self.l1_)
        if isinstance(step, np.ndarray) and not step.flags.writeable:
            if tau.shape != pre.shape and not self.n_unpenalized:
                tiled = np.empty_like(pre)
                tiled[...] = tau
                tau = tiled
            neg = np.negative(tau)
            self._held_threshold = (step, dtype, tau, neg)
            return tau, neg
        return tau, None

    def prox_jacobian(self, x):
        """Diagonal of the prox Jacobian given its output ``x``: ``None`` for
        the identity, else a boolean mask (free coordinates)."""
        if self.is_smooth:
            return None
        mask = x != 0
        if self.n_unpenalized:
            mask[x.shape[0] - self.n_unpenalized:] = True
        return mask

    def duality_gap(self, rr, ry, corr, coef, n_eff):
        """:func:`duality_gap` of least squares with this penalty at ``coef``
        (every coordinate penalised: ``corr``, ``coef`` of shape
        ``(n_features,)``)."""
        b = np.asarray(coef, dtype=np.float64)
        return duality_gap(rr, ry, corr, float(np.abs(b).sum()), float(self.l1_), n_eff,
                           float(self.l2_), b, self.positive)

    def value(self, coef):
        """Mean-form penalty value at ``coef``."""
        c = np.asarray(coef, dtype=np.float64)[: self._head(np.asarray(coef))]
        return self.l1_ * float(np.abs(c).sum()) + 0.5 * self.l2_ * float(c @ c)

    def __repr__(self):
        return (f"{type(self).__name__}(l1={short_repr(self.l1_)}, l2={short_repr(self.l2_)}"
                f"{', n_unpenalized=%d' % self.n_unpenalized if self.n_unpenalized else ''}"
                f"{', positive=True' if self.positive else ''})")


class L1(Penalty):
    """Lasso penalty ``alpha ||w||_1`` (mean form, scikit-learn's ``Lasso``)."""

    name = "l1"

    def __init__(self, alpha, *, n_unpenalized=0, positive=False):
        super().__init__(l1=alpha, n_unpenalized=n_unpenalized, positive=positive)


class L2(Penalty):
    """Ridge penalty ``alpha ||w||^2 / 2``; ``sum_form=True`` for a penalty on
    the summed loss (scikit-learn's ``Ridge``: ``alpha / n_eff`` in mean form)."""

    name = "l2"

    def __init__(self, alpha, *, sum_form=False, n_eff=1.0, n_unpenalized=0, positive=False):
        super().__init__(l2=alpha, sum_form=sum_form, n_eff=n_eff,
                         n_unpenalized=n_unpenalized, positive=positive)


class ElasticNet(Penalty):
    """``l1 ||w||_1 + l2 ||w||^2 / 2`` (mean form)."""

    name = "elastic_net"

