"""IACV's left-out runs of an l1 trajectory, stepped on the rows where they differ from the fit.

In the block of left-out runs (:func:`~skacv.estimates.loo._track._track`,
one column per left-out sample) the differences from the fit,
``dX^k = x^k_{-i} - x^k`` and ``dV^k``, are zero on most coordinates of a
wide l1 path: a left-out run's support is close to the fit's. A coordinate
``j`` whose differences ``dX^{k-1}``, ``dX^{k-2}`` and ``dV^{k-1}`` are zero
in every run enters step ``k`` with the pre-prox difference ``eta_k dZ_j``
(:meth:`~skacv.Iteration.combine` of zeros), and the prox keeps run ``i``
there at the fit's value when both ``pre_j`` and ``pre_j + eta_k dZ_ij`` lie
in the penalty's zero band (:meth:`~skacv.iterations._penalties.Penalty.zero_band`,
``|.| <= eta_k l1`` times the run's strength scale): a zero difference. The
momentum, the prox and the clipped extrapolation of the perturbed runs are
elementwise, so :class:`LiveRows` runs them (the iteration's own methods) on
the other rows only, keeps the differences as the rows where they are
non-zero, and the products ``X~ dV`` read the columns of those rows. The
negative-gradient differences ``dZ`` are still formed on every row (one
product by ``X~^T`` where the runs multiply by ``X~``:
:class:`~skacv.estimates.loo._track._HessianImage`): the band is checked on
them. A bound of them from an earlier step (Cauchy-Schwarz on the change of
``X~ dV``) was tried instead and admitted two to four times the rows on the
gene design NCI60, so it was not kept. The values are the dense block's up
to the order of the sums in the products.
"""

import numpy as np

from ..._trace import taken


def step_differences(it, k, x1, x2, x_new, pre, x_fit, dV, dX1, dX2, dZ, hb, scale,
                     overwrite_z=False):
    """The runs' differences ``(dX^k, dV^k)`` after step ``k`` of the
    iteration ``it`` (on every row, or on rows they are all taken on): the
    momentum difference of the perturbed runs, the combination with the
    negative-gradient differences ``dZ`` (``overwrite_z``: into ``dZ``), the
    prox of each run's own pre-prox point (``pre`` plus its difference,
    strengths scaled by ``scale``) minus the fit's ``x_fit`` (``pre`` and
    ``x_fit`` ``None``: a linear iteration, the combination itself), then
    the clipped extrapolation of the perturbed runs from the fit's ``x1``
    to ``x_new``."""
    dm = it.momentum_difference(k, x1, x2, dx1=dX1, dx2=dX2) if hb else None
    dX = it.combine(k, dV, dm, dZ, overwrite_z=overwrite_z)
    if pre is not None:
        dX = it.prox(k, np.add(dX, pre[:, None], out=dX), scale)
        dX -= x_fit[:, None]
    return dX, it.extrapolate_difference(k, x_new, x1, dX, dX1)


def live_rows(prob, idx, state):
    """:class:`LiveRows` of the left-out runs of the samples ``idx`` of
    ``prob`` (a ``_Problem``) from their differences ``state = (dX1, dX2,
    dV)``, or ``None`` (the dense block): the penalty's zero band on its
    penalised coordinates, a proximal full-batch iteration outside the
    eigenbasis, scalar l1 and l2 strengths and at least the speed policy's
    ``loo_live_rows_min_features`` coefficients."""
    it, policy = prob.iteration, prob.design.policy
    penalty = it.penalty
    if (it.is_linear or prob.sampler is not None or prob.spectral is not None
            or prob.m < policy.loo_live_rows_min_features
            or not isinstance(penalty.l2_, float)):
        return None
    band = penalty.head_zero_band()
    if band is None:
        return None
    return LiveRows(prob.m, idx.size, penalty.n_unpenalized, band,
                    None if prob.l1_scale is None else prob.l1_scale[idx], prob.uses_hb,
                    policy.loo_live_rows_max_share, policy.loo_live_rows_recheck, state)


class _Diff:
    """A difference of the runs: ``D`` on the sorted ``rows`` (zero elsewhere),
    or on every row (``rows`` ``None``)."""

    __slots__ = ("rows", "D")

    def __init__(self, rows, D):
        self.rows, self.D = rows, D

    @property
    def support(self):
        """The rows where it may be non-zero."""
        if self.rows is None:
            return np.flatnonzero(np.any(self.D != 0, axis=1))
        return self.rows


class LiveRows:
    """The left-out runs' differences on the rows where they are non-zero.

    Parameters
    ----------
    m, c : int
        Coefficients and runs.
    n_free : int
        Trailing unpenalised coefficients (always stepped).
    band : float
        :func:`live_rows_band`.
    scale : ndarray of shape (c,) or None
        The runs' l1 strength scales (the prox's ``scale``).
    keep_two : bool
        Keep ``dX^{k-2}`` (heavy-ball steps read it).
    dense_share : float
        A step whose rows number more than this share of ``m`` runs on
        every row, without gathering them, as do the next ``recheck - 1``
        (the speed policy's ``loo_live_rows_max_share`` and
        ``loo_live_rows_recheck``).
    recheck : int
        See ``dense_share``.
    state : tuple of three arrays
        ``(dX1, dX2, dV)`` of shape (m, c) (``dX2`` may be ``None``): the
        block's differences so far (zero at the start).

    Attributes
    ----------
    x1, x2, v : _Diff
        ``dX^{k-1}``, ``dX^{k-2}`` (kept with ``keep_two``) and ``dV^{k-1}``.
    """

    def __init__(self, m, c, n_free, band, scale, keep_two, dense_share, recheck, state):
        self.m, self.c = m, c
        self.free = np.arange(m - n_free, m)
        self.band = float(band)
        self.scale = scale
        self.scale_min = 1.0 if scale is None else float(np.min(scale))
        self.keep_two = keep_two
        self.dense_share, self.recheck = dense_share, int(recheck)
        self.dense_until = 0  # steps before it run on every row
        self.mask = np.zeros(m, dtype=bool)
        self.pos = np.zeros(m, dtype=np.intp)
        dX1, dX2, dV = state
        self.x1 = _Diff(None, dX1)
        self.x2 = (_Diff(None, dX2) if keep_two and dX2 is not None
                   else _Diff(np.zeros(0, dtype=np.intp), np.zeros((0, c))))
        self.v = self.x1 if dV is dX1 else _Diff(None, dV)
        self.steps = self.rows_stepped = 0

    def finish(self):
        """The differences on every row, ``{"dX1", "dX2", "dV"}`` (``dX2``
        ``None`` without ``keep_two``; ``dV`` is ``dX1`` where they are one
        array), after the trace event ``loo_live_rows``: the coefficients,
        the steps and the rows they stepped in all (docs/architecture.rst)."""
        taken("loo_live_rows", m=self.m, steps=self.steps, rows=self.rows_stepped)
        dX1 = self.full("x1")
        return {"dX1": dX1, "dX2": self.full("x2") if self.keep_two else None,
                "dV": dX1 if self.v is self.x1 else self.full("v")}

    def full(self, which):
        """``dX^{k-1}`` (``"x1"``), ``dX^{k-2}`` (``"x2"``) or ``dV^{k-1}``
        (``"v"``) on every row, shape (m, c)."""
        return self._gather(getattr(self, which), None)

    def dl2_term(self, v, dl2_i):
        """``(v + dV) * dl2_i`` of the dense block (the left-out ridge
        strengths' difference), formed from the live rows."""
        d = self.v
        if d.rows is None:
            return (v[:, None] + d.D) * dl2_i
        t2 = np.multiply.outer(v, dl2_i)
        t2[d.rows] = (v[d.rows, None] + d.D) * dl2_i
        return t2

    def _gather(self, d, rows):
        """The difference ``d`` on ``rows`` (``None``: every row; read only)."""
        if d.rows is None:
            return d.D if rows is None else d.D[rows]
        if rows is None:
            out = np.zeros((self.m, self.c))
            out[d.rows] = d.D
            return out
        out = np.zeros((rows.size, self.c))
        out[self.pos[d.rows]] = d.D
        return out

    def step(self, it, k, x1, x2, x_new, pre, x_fit, dZ, hb, scratch):
        """Step ``k`` of the runs from the negative-gradient differences ``dZ``
        (shape (m, c), every row; Fortran order, whose rows reduce fast;
        overwritten, as is ``scratch``, of its shape and layout) at the
        fit's point: ``x1``, ``x2``, ``x_new`` are ``x^{k-1}``, ``x^{k-2}``,
        ``x^k`` of the fit, ``pre`` its pre-prox point and ``x_fit`` its
        prox. Returns ``(rows, dX, dV)``: the rows stepped (``None``: every
        row) and the new differences there."""
        if k < self.dense_until:
            return self._step_rows(it, k, None, x1, x2, x_new, pre, x_fit, dZ, hb)
        eta = it.eta(k)
        reach = np.abs(dZ, out=scratch).max(axis=1)
        reach *= eta
        reach += np.abs(pre)
        mask = self.mask
        # rounded up, reach bounds |pre_j + eta dZ_ij| as the prox forms it; the
        # threshold is the prox's up to the order of its products (an ulp or two)
        tau = eta * self.band * self.scale_min * (1.0 - 8.0 * np.finfo(np.float64).eps)
        np.greater_equal(reach, tau, out=mask)
        mask[self.free] = True
        for d in (self.x1, self.v) + ((self.x2,) if hb else ()):
            mask[d.support] = True
        rows = np.flatnonzero(mask)
        if rows.size > self.dense_share * self.m:  # every row, as the dense block
            self.dense_until = k + self.recheck
            return self._step_rows(it, k, None, x1, x2, x_new, pre, x_fit, dZ, hb)
        self.pos[rows] = np.arange(rows.size)
        return self._step_rows(it, k, rows, *(a[rows] for a in (x1, x2, x_new, pre, x_fit)),
                               dZ[rows], hb)

    def _step_rows(self, it, k, rows, x1, x2, x_new, pre, x_fit, dZ_rows, hb):
        """:meth:`step` on ``rows`` (``None``: every row), its arguments
        taken there."""
        self.steps += 1
        self.rows_stepped += self.m if rows is None else rows.size
        dX, dV = step_differences(
            it, k, x1, x2, x_new, pre, x_fit, self._gather(self.v, rows),
            self._gather(self.x1, rows), self._gather(self.x2, rows) if hb else None, dZ_rows,
            hb, self.scale, overwrite_z=True)
        if self.keep_two:
            self.x2 = self.x1
        self.x1 = self._kept(rows, dX)
        self.v = self.x1 if dV is dX else self._kept(rows, dV)
        return rows, dX, dV

    @staticmethod
    def _kept(rows, D):
        """``D`` stepped on ``rows``, kept on its non-zero rows (on every
        row where the step took every row: no copy)."""
        if rows is None:
            return _Diff(None, D)
        nz = np.any(D != 0, axis=1)
        return _Diff(rows[nz], D[nz])
