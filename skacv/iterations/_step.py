"""The generic step of every first-order algorithm: :class:`Iteration`.

With ``z(v) = X~^T r(v) / n_eff`` the negative gradient of the mean data fit at
``v`` (a mean over the mini-batch ``sampler(k)`` for stochastic methods),
step ``k = 1, 2, ...`` maps the state ``(x^{k-1}, x^{k-2}, v^{k-1})`` to

    pre^k = v^{k-1} - eta_k l2 v^{k-1} + hb_k (x^{k-1} - x^{k-2}) + eta_k z(v^{k-1})
    x^k   = prox_k(pre^k)
    v^k   = x^k + beta_k (x^k - x^{k-1})

``x^k`` are the iterates stored in ``coef_path_``; ``v^k`` are the points
where the gradient is evaluated. What the linear methods (:meth:`Iteration.combine`,
:meth:`Iteration.extrapolate`) advance besides the iterates: docs/architecture.rst
("The algorithm: one iteration object").
"""

import copy

import numpy as np

from ._penalties import Penalty, short_repr


def _clipped_step(x, x_prev, n_free=0):
    """``clip(x - x_prev, -|x|, |x|)``, the clipped momentum step (the last
    ``n_free`` coordinates, unpenalised, never clipped; ``x`` may carry
    extra axes, one run per column)."""
    d = np.subtract(x, x_prev)
    lim = np.abs(x)
    np.minimum(d, lim, out=d)
    np.negative(lim, out=lim)
    np.maximum(d, lim, out=d)
    if n_free:
        d[x.shape[0] - n_free:] = x[x.shape[0] - n_free:] - x_prev[x.shape[0] - n_free:]
    return d


def _perturbed_clipped_step(x, x_prev, dx, dx_prev, n_free):
    """:func:`_clipped_step` of the perturbed runs ``x + dx`` (one per column
    of ``dx``) minus the unperturbed run's: the left-out runs' momentum."""
    xs = x.reshape((-1,) + (1,) * (dx.ndim - 1))
    out = _clipped_step(xs + dx, x_prev.reshape(xs.shape) + dx_prev, n_free)
    out -= _clipped_step(x, x_prev, n_free).reshape(xs.shape)
    return out


def _clipped_difference(x, x_prev, n_free=0, plain_as_none=False):
    """``(c, e)`` with :func:`_clipped_step` ``= c * x + e * x_prev``
    coordinate by coordinate (``(1, -1)`` where nothing is clipped; ``e = 0``
    where it is); ``plain_as_none``: ``None`` when no coordinate is clipped."""
    at, c_at = _clipped_entries(x, x_prev, n_free)
    if plain_as_none and not at.size:
        return None
    # few coordinates clip (those leaving the support, or changing sign):
    # the ones and minus ones are filled, the clipped ones put in
    c = np.ones(np.broadcast_shapes(x.shape, x_prev.shape), dtype=c_at.dtype)
    c.reshape(-1)[at] = c_at
    e = np.full(c.shape, -1.0)
    e.reshape(-1)[at] = 0.0
    return c, e


def _clipped_entries(x, x_prev, n_free=0):
    """``(at, c_at)``: the coordinates where the momentum step ``x - x_prev``
    is clipped (flat indices, C order) and ``c = sign(x - x_prev) sign(x)``
    there, in the precision of ``x - x_prev`` (:func:`_clipped_difference`'s
    ``c``)."""
    d = np.subtract(x, x_prev)
    # the step is clipped where |x - x_prev| > |x|, to sign(x - x_prev) |x|
    # (0 where x = 0): c = sign(x - x_prev) sign(x) exactly
    clipped = np.greater(np.abs(d), np.abs(x))
    if n_free:
        clipped[x.shape[0] - n_free:] = False
    at = clipped.reshape(-1).nonzero()[0]  # (np.flatnonzero, without its wrappers)
    c_at = np.sign(d.reshape(-1)[at])
    c_at *= np.sign(x.take(at))
    return at, c_at


#: the default ``coef`` of the extrapolation's corrections: not computed yet
#: (``None`` is a computed value: the plain extrapolation)
NOT_COMPUTED = object()


def _combine(factors, x, x_prev, out=None):
    """``a * x + b * x_prev`` for ``factors = (a, b)``, or ``x`` itself for
    ``None`` (no extrapolation); ``out``: written there (it may be
    ``x_prev``'s block, not ``x``'s: ``x_prev`` is read first)."""
    if factors is None:
        if out is None:
            return x
        out[...] = x
        return out
    a, b = factors
    if out is None:
        out = a * x
        out += b * x_prev
        return out
    np.multiply(x_prev, b, out=out)
    out += a * x
    return out


class Iteration:
    """Base class of the iteration objects (plain gradient descent).

    Parameters
    ----------
    step_size : float, default=1.0
        Base step ``eta``. Estimators set it at fit time (:meth:`bind`).
    penalty : Penalty, default=None
        Penalty of the objective (``None``: none).
    schedule : None, callable or array-like, default=None
        Multiplies the step: ``eta_k = step_size * schedule(k)`` (callable of
        the step number ``k >= 1``) or ``step_size * schedule[k - 1]``.
    sampler : callable or None, default=None
        ``sampler(k)`` gives the rows of the mini-batch of step ``k``
        (stochastic gradients); ``None``: full-batch gradients.
    """

    name = "gd"
    #: the momentum coefficients do not depend on k
    _stationary_momentum = True

    def __init__(self, step_size=1.0, *, penalty=None, schedule=None, sampler=None):
        self.step_size = float(step_size)
        self.penalty = Penalty() if penalty is None else penalty
        self.schedule = schedule
        self.sampler = sampler

    def bind(self, step_size=None, penalty=None, schedule=None, sampler=None):
        """A copy with the step size, penalty, schedule and sampler of a fit."""
        it = copy.copy(self)
        if step_size is not None:
            it.step_size = float(step_size)
        for name, value in (("penalty", penalty), ("schedule", schedule), ("sampler", sampler)):
            if value is not None:
                setattr(it, name, value)
        return it

    @property
    def is_linear(self):
        """The prox is the identity: the map from the data to the iterates is linear."""
        return self.penalty.is_smooth

    @property
    def l2(self):
        """Ridge strength in mean form (the decay of :meth:`combine`)."""
        return self.penalty.l2_

    @property
    def is_stationary(self):
        """Every step applies the same linear map (a Toeplitz memory matrix)."""
        return self.is_linear and self.constant_steps

    @property
    def coordinatewise(self):
        """:meth:`combine` acts coordinate by coordinate with the same scalars on
        every row, as the memory-matrix engines assume (their blocks' rows are
        free coordinates, spectral nodes or samples). A subclass that overrides
        :meth:`combine` is taken as coordinate-mixing (a fixed preconditioner)
        unless it sets the class attribute ``coordinatewise = True``."""
        return type(self).combine is Iteration.combine

    @property
    def constant_steps(self):
        """Every step has the same linear part (step size and momentum; the
        prox aside)."""
        return self.schedule is None and self.sampler is None and self._stationary_momentum

    def eta(self, k):
        """Step size of step ``k`` (the step producing ``x^k``)."""
        s = self.schedule
        if s is None:
            return self.step_size
        if callable(s):
            return self.step_size * float(s(k))
        return self.step_size * float(s[k - 1])

    def decay(self, k):
        """Scalar decay ``1 - eta_k l2`` (penalties on every coordinate)."""
        return 1.0 - self.eta(k) * self.l2

    def hb(self, k):
        """Heavy-ball coefficient of ``x^{k-1} - x^{k-2}`` in step ``k``."""
        return 0.0

    def beta(self, k):
        """Extrapolation ``v^k = x^k + beta_k (x^k - x^{k-1})``."""
        return 0.0

    def extrapolates(self, n_steps, first=1):
        """Whether any of steps ``first..n_steps`` extrapolates (``beta_k != 0``:
        the gradient is taken at ``v^k != x^k``)."""
        if type(self).beta is Iteration.beta:  # beta_k = 0 at every step
            return False
        return any(self.beta(k) != 0.0 for k in range(first, n_steps + 1))

    def uses_heavy_ball(self, n_steps, first=1):
        """Whether any of steps ``first..n_steps`` adds a heavy-ball term
        (``hb_k != 0``: the step reads ``x^{k-2}`` too)."""
        if type(self).hb is Iteration.hb:  # hb_k = 0 at every step
            return False
        return any(self.hb(k) != 0.0 for k in range(first, n_steps + 1))

    def has_momentum(self, n_steps, first=1):
        """Extrapolation or heavy ball in any of steps ``first..n_steps``."""
        return self.extrapolates(n_steps, first) or self.uses_heavy_ball(n_steps, first)

    #: clip the extrapolation of non-smooth problems (see
    #: :meth:`extrapolation_coefficients`); set by the momentum classes
    restrict_extrapolation = False

    @property
    def clips(self):
        """The extrapolation / heavy-ball difference is clipped (a
        non-smooth penalty with ``restrict_extrapolation``)."""
        return self.restrict_extrapolation and not self.penalty.is_smooth

    def extrapolation_coefficients(self, k, x, x_prev):
        """Per-coordinate form ``v^k = a * x^k + b * x^{k-1}`` of a clipped
        extrapolation, or ``None`` for the plain one (``a = 1 + beta_k``,
        ``b = -beta_k`` everywhere).

        With ``restrict_extrapolation`` and a non-smooth penalty, the momentum
        step of every penalised coordinate is clipped to ``[-|x^k_j|,
        |x^k_j|]``: ``v^k_j = x^k_j + beta_k clip(x^k_j - x^{k-1}_j, -|x^k_j|,
        |x^k_j|)``. A coordinate at zero stays at zero and no coordinate
        crosses zero; away from zero nothing changes. The map is continuous
        and piecewise linear, so ``(a, b)`` (constant on each piece) also
        give its Jacobian. ``x``, ``x_prev`` may carry extra axes (one run
        per column).
        """
        beta = self.beta(k)
        if not self.clips or beta == 0.0:
            return None
        ce = _clipped_difference(x, x_prev, self.penalty.n_unpenalized, plain_as_none=True)
        if ce is None:  # nothing clipped: the plain extrapolation
            return None
        c, e = ce
        return 1.0 + beta * c, beta * e

    def combine(self, k, v, dx, z, n_free=None, overwrite_z=False, z_scaled=False):
        """``v - eta_k l2 v + hb_k dx + eta_k z`` (dx = x^{k-1} - x^{k-2});
        ``n_free``: trailing rows without decay (see
        the penalty's ``decay``); ``overwrite_z``: the result
        is written into ``z`` (a scratch block of the chains); ``z_scaled``:
        ``z`` holds ``eta_k z`` already (a caller that folded the step into
        its product)."""
        eta = self.eta(k)
        if overwrite_z:
            out = z
            if not z_scaled:
                out *= eta
        else:
            out = z.copy() if z_scaled else eta * z
        out += v
        self.penalty.decay(v, eta, out, n_free)
        h = self.hb(k)
        if h != 0.0:
            out += h * dx
        return out

    def extrapolate(self, k, x, x_prev, coef=None, out=None):
        """``v^k = x^k + beta_k (x^k - x^{k-1})``, or ``a * x^k + b * x^{k-1}``
        with ``coef = (a, b)`` of :meth:`extrapolation_coefficients` (iterates:
        use :meth:`extrapolate_iterate`; tangents: the coefficients of the
        iterates they are tangent to, broadcast along the first axis).
        ``out``: written there (else a new array, or ``x`` when ``beta_k = 0``);
        it may be ``x_prev``'s block, not ``x``'s."""
        if float(self.beta(k)) == 0.0:
            return _combine(None, x, x_prev, out)
        return _combine(self.extrapolation_factors(k, coef, x.ndim, x.dtype), x, x_prev, out)

    def extrapolation_factors(self, k, coef, ndim, dtype):
        """``(a, b)`` with ``v^k = a * x^k + b * x^{k-1}``: the scalars ``1 +
        beta_k``, ``-beta_k`` of the plain extrapolation, or ``coef`` (per
        coordinate, clipped) shaped to broadcast along the first axis of an
        ``ndim``-dimensional block, in ``dtype``."""
        beta = float(self.beta(k))  # a NumPy float64 scalar would upcast float32 arrays
        if coef is None:
            return 1.0 + beta, -beta
        a, b = coef
        shape = a.shape + (1,) * (ndim - a.ndim)
        return (a.reshape(shape).astype(dtype, copy=False),
                b.reshape(shape).astype(dtype, copy=False))

    def extrapolate_iterate(self, k, x, x_prev, out=None):
        """``v^k`` of the iterates ``x^k``, ``x^{k-1}`` (clipped if so set):
        :meth:`extrapolate` with :meth:`extrapolation_coefficients`, its
        values without the per-coordinate coefficients formed where few
        coordinates clip (the coefficients of the unclipped ones are two
        numbers, the others are put in). ``out``: written there (an array of
        ``x``'s shape sharing no memory with ``x``, ``x_prev``)."""
        if (x.ndim == 2 and not self.penalty.n_unpenalized and x.flags.f_contiguous
                and not x.flags.c_contiguous and x_prev.flags.f_contiguous):
            # a block held a column per row of memory (the stacked folds): the
            # same values elementwise, its flat indices in memory order
            return self.extrapolate_iterate(k, x.T, x_prev.T, None if out is None else out.T).T
        entries = self._clipped_entries(k, x, x_prev)
        if entries is None:
            return self.extrapolate(k, x, x_prev, self.extrapolation_coefficients(k, x, x_prev),
                                    out)
        at, c_at = entries
        if not at.size:  # the plain extrapolation
            return self.extrapolate(k, x, x_prev, None, out)
        return self._put_in(k, x, x_prev, at, c_at, out)

    def extrapolate_with_columns(self, k, x, x_prev):
        """``(v^k, columns)``: :meth:`extrapolate` and
        :meth:`extrapolation_columns` of the iterates ``x^k``, ``x^{k-1}``
        (shape (n_features,)) with their :meth:`extrapolation_coefficients`,
        the values of those three without the per-coordinate coefficients
        formed (the fit loop's step; :meth:`extrapolate_iterate`)."""
        if float(self.beta(k)) == 0.0:  # v^k = x^k, nothing to correct (the forms below)
            return x, None
        entries = self._clipped_entries(k, x, x_prev) if x.ndim == 1 else None
        if entries is None:
            coef = self.extrapolation_coefficients(k, x, x_prev)
            return (self.extrapolate(k, x, x_prev, coef),
                    self.extrapolation_columns(k, x, x_prev, coef))
        at, c_at = entries
        if not at.size:
            return self.extrapolate(k, x, x_prev, None), None
        # the correction is zero where nothing clips (exactly); at the clipped
        # coordinates it is extrapolation_correction's with their coefficients
        # (1 + beta c, beta 0), in the precisions extrapolation_coefficients gives
        beta = self.beta(k)
        c = self.extrapolation_correction(k, np.take(x, at), np.take(x_prev, at),
                                          (1.0 + beta * c_at, beta * np.zeros(at.size)))
        kept = c != 0
        return self._put_in(k, x, x_prev, at, c_at), (at[kept], c[kept])

    def _clipped_entries(self, k, x, x_prev):
        """:func:`_clipped_entries` of step ``k`` where it extrapolates clipped
        (``beta_k != 0``) on iterates of one dtype and shape, else ``None``
        (the general forms apply)."""
        if not (self.clips and self.beta(k) != 0.0 and x.dtype == x_prev.dtype
                and x.shape == x_prev.shape):
            return None
        return _clipped_entries(x, x_prev, self.penalty.n_unpenalized)

    def _put_in(self, k, x, x_prev, at, c_at, out=None):
        """The clipped extrapolation of step ``k``: the plain factors on every
        coordinate, then ``(1 + beta c_at, beta 0)`` at the clipped ones
        ``at`` put in, each in the precisions :meth:`extrapolation_coefficients`
        and :meth:`extrapolation_factors` give (``out``: written there)."""
        beta = self.beta(k)
        # 1 + beta c (c = 1) in the precision of c, then the iterates';
        # beta e (e = -1) in float64, then the iterates'
        t, dt = c_at.dtype.type, x.dtype.type
        v = _combine((dt(t(1.0) + t(beta)), dt(-beta)), x, x_prev, out)
        # at the clipped coordinates (1 + beta c_at, beta 0), the second by
        # beta 0 in the iterates' precision (flat indices, C order)
        np.put(v, at, _combine(((1.0 + beta * c_at).astype(x.dtype, copy=False),
                                dt(beta * 0.0)), x.take(at), x_prev.take(at)))
        return v

    def extrapolation_correction(self, k, x, x_prev, coef=NOT_COMPUTED):
        """``v^k`` minus the plain extrapolation, shape of ``x`` (``None``: zero);
        ``coef``: :meth:`extrapolation_coefficients` if already computed
        (``None`` included: the plain extrapolation)."""
        if coef is NOT_COMPUTED:
            coef = self.extrapolation_coefficients(k, x, x_prev)
        if coef is None:
            return None
        # the plain coefficients in the precision of (a, b), so that unclipped
        # coordinates give an exact zero (float32 iterates)
        a, b = coef
        beta = self.beta(k)
        da = a - (a.dtype.type(1.0) + a.dtype.type(beta))
        return da * x + (b + b.dtype.type(beta)) * x_prev

    def extrapolation_columns(self, k, x, x_prev, coef=NOT_COMPUTED):
        """``(J, c_J)``: the few coordinates where the clipped extrapolation
        differs from the plain one and the difference there
        (:meth:`extrapolation_correction`), or ``None`` (plain)."""
        c = self.extrapolation_correction(k, x, x_prev, coef)
        if c is None:
            return None
        J = np.flatnonzero(c)
        return J, c[J]

    def extrapolate_fitted(self, k, x, x_prev, Xx, Xx_prev, columns_product, coef=NOT_COMPUTED,
                           correction=None):
        """``X~ v^k`` from the fit loop's ``X~ x^k`` and ``X~ x^{k-1}``: the
        plain extrapolation plus ``X~_J c_J`` for the correction ``c`` of a
        clipped one (its few non-zero coordinates ``J``;
        ``columns_product(J, c_J)`` is ``X~[:, J] @ c_J``, e.g.
        the design's ``columns_product``; ``coef`` as in
        :meth:`extrapolation_correction`).
        ``correction``: :meth:`extrapolation_columns` if already computed
        (then ``x``, ``x_prev`` are not read; rows of ``X~`` work too)."""
        if correction is None and (coef is None or coef is NOT_COMPUTED) \
                and float(self.beta(k)) == 0.0:
            return Xx  # X~ v^k = X~ x^k (the forms below, without their calls)
        if correction is None:
            correction = self.extrapolation_columns(k, x, x_prev, coef)
        return self.fitted_extrapolation(k, correction)(Xx, Xx_prev, columns_product)

    def fitted_extrapolation(self, k, correction):
        """:meth:`extrapolate_fitted` of step ``k`` with its ``correction``
        (:meth:`extrapolation_columns`) as a function ``f(Xx, Xx_prev,
        columns_product, out=None)``, its factors worked out once: the fit
        loop applies it to each row panel of a pass (``out``: written there)."""
        factors = (None if float(self.beta(k)) == 0.0
                   else self.extrapolation_factors(k, None, 1, None))
        J, cJ = correction if correction is not None and correction[0].size else (None, None)

        def apply(Xx, Xx_prev, columns_product, out=None):
            v = _combine(factors, Xx, Xx_prev, out)
            if J is None:
                return v
            c = np.asarray(columns_product(J, cJ)).astype(v.dtype, copy=False)
            if v is Xx:  # v^k = x^k: not written in place
                return v + c
            v += c
            return v

        return apply

    def extrapolate_difference(self, k, x, x_prev, dx, dx1):
        """Extrapolation of perturbed runs ``x + dx`` (one per column of
        ``dx``) minus ``v^k`` of the unperturbed run; every perturbed run
        clips on its own iterates (leave-one-out runs)."""
        beta = float(self.beta(k))
        if not self.clips or beta == 0.0:
            return self.extrapolate(k, dx, dx1)
        out = _perturbed_clipped_step(x, x_prev, dx, dx1, self.penalty.n_unpenalized)
        out *= beta
        out += dx
        return out

    def momentum_coefficients(self, k, x1, x2):
        """Per-coordinate form ``m = c * x^{k-1} + d * x^{k-2}`` of a clipped
        heavy-ball difference ``clip(x^{k-1} - x^{k-2}, -|x^{k-1}|,
        |x^{k-1}|)``, or ``None`` for the plain ``x^{k-1} - x^{k-2}`` (see
        :meth:`extrapolation_coefficients`, the same clipping)."""
        if not self.clips or self.hb(k) == 0.0:
            return None
        return _clipped_difference(x1, x2, self.penalty.n_unpenalized)

    def momentum_difference(self, k, x1, x2, coef=None, dx1=None, dx2=None):
        """The heavy-ball difference of step ``k``: ``x^{k-1} - x^{k-2}``
        (clipped if so set). With ``dx1``, ``dx2``: the difference of the
        perturbed runs ``x + dx`` (each clipped on its own iterates) minus the
        unperturbed one, per column. With ``coef``: the tangent ``c * dx1 + d
        * dx2`` (``x1``, ``x2`` are then tangents)."""
        if coef is not None:
            c, e = coef
            shape = c.shape + (1,) * (x1.ndim - c.ndim)
            return c.reshape(shape) * x1 + e.reshape(shape) * x2
        if dx1 is not None:
            if not self.clips or self.hb(k) == 0.0:
                return dx1 - dx2
            return _perturbed_clipped_step(x1, x2, dx1, dx2, self.penalty.n_unpenalized)
        coef = self.momentum_coefficients(k, x1, x2)
        if coef is None:
            return x1 - x2
        return self.momentum_difference(k, x1, x2, coef)

    def prox(self, k, pre, scale=None):
        """Proximal step of the penalty with step ``eta_k`` (``scale``: per-column
        factor of the l1 strength, see the penalty's ``prox``)."""
        penalty = self.penalty
        if type(penalty).prox is Penalty.prox and penalty.is_smooth:
            return pre  # (its first answer, without the step size)
        return penalty.prox(pre, self.eta(k), scale)

    def prox_jacobian(self, k, x):
        """Diagonal of the prox Jacobian at step ``k`` given ``x^k`` (``None``:
        the identity; else a boolean mask, 1 where the coordinate is free)."""
        return self.penalty.prox_jacobian(x)

    def tangent(self, k, dv, dx1, dx2, dz, mask, coef=None, mcoef=None, n_free=None,
                overwrite_dz=False, out_v=None, dz_scaled=False):
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
        coef : None or tuple of arrays of shape (n_features,)
            ``extrapolation_coefficients(k, x^k, x^{k-1})`` (clipped
            extrapolation; ``None``: plain).
        mcoef : None or tuple of arrays of shape (n_features,)
            ``momentum_coefficients(k, x^{k-1}, x^{k-2})`` (clipped heavy
            ball; ``None``: plain).
        n_free : int or None
            Trailing rows without the ridge decay (``None``: the penalty's
            unpenalised coordinates). With ``mask``, ``coef`` and ``mcoef``
            ``None`` the map has scalar coefficients: ``n_free=0`` then
            advances any linear image of free, penalised coordinates (rows
            that are not coordinates: spectral nodes, samples).
        overwrite_dz : bool, default=False
            Write ``dx`` into ``dz`` (a scratch block) instead of a new array.
        out_v : array or None
            Write ``dv`` there (it may be ``dv``'s own block, read before).
        dz_scaled : bool, default=False
            ``dz`` holds ``eta_k`` times the gradient tangent (see
            :meth:`combine`'s ``z_scaled``).

        Returns
        -------
        dx, dv : arrays
            Tangents of ``x^k`` and ``v^k``.
        """
        h = self.hb(k)
        dm = None
        if h != 0.0:
            dm = dx1 - dx2 if mcoef is None else self.momentum_difference(k, dx1, dx2, mcoef)
        if dz_scaled:
            dpre = self.combine(k, dv, dm, dz, n_free, overwrite_dz, z_scaled=True)
        else:
            dpre = self.combine(k, dv, dm, dz, n_free, overwrite_dz)
        if mask is not None:
            dpre *= mask.reshape((-1,) + (1,) * (dpre.ndim - 1))
        return dpre, self.extrapolate(k, dpre, dx1, coef, out_v)

    def __repr__(self):
        ext = getattr(self, "extrapolation", None)
        ext = "" if ext is None else f", extrapolation={ext!r}"
        return (f"{type(self).__name__}(step_size={short_repr(self.step_size)}, "
                f"penalty={self.penalty!r}{ext})")
