"""One trajectory on a working set of features: screening that keeps the path.

The fit loop's counterpart of the stacked folds' working sets
(:mod:`skacv.model_selection._fold_screening`). A coordinate whose iterate,
previous iterate and extrapolated point are zero stays at zero through a
step of an l1-penalised, coordinatewise iteration while its mean-form
negative gradient stays in the penalty's zero band
(:meth:`~skacv.iterations._penalties.Penalty.zero_band`: ``|z_j| <= l1``, or
``z_j <= l1`` with non-negative coefficients). With the residual ``r`` at
the step's gradient point, ``z_j = x~_j^T r / n_eff`` moves by at most
``||x~_j|| ||r - r'|| / n_eff`` between two residuals (Cauchy-Schwarz).

:func:`run_screened` advances :func:`~skacv.iterations._path.run_trajectory`
on the columns of ``X~`` in a *prefix* of a permutation of them (every
coordinate that is non-zero, or whose bound could leave the band) and
certifies the others before every step against the residual of the last
pass over all of them (a *refresh*): those whose bound reaches the band
have their gradient computed, and the prefix grows over those that leave
it. The iterates are the full loop's (the same steps of the same
iteration object) up to the rounding of the products, which the
certificate's margin covers; the screen is kept in the trajectory's state,
so that a continued fit takes the same steps as one run in one call.

The prefix's columns are rows of one transposed copy of ``X~``
(:func:`~skacv.linalg._copies.design_transposed`), copied into a buffer as
the certificate first reads them. A refresh costs a gradient over all the
columns; it is taken when the columns the steps since the last one
computed beyond those that move exceed the speed policy's
``screening_refresh_passes`` times the number of features. The loop runs
over every feature for its first ``trajectory_screening_after`` steps, and
goes back to them where the prefix's steps cost more than
``screening_max_share`` of a step over all of them (after
``screening_retry_steps`` steps on the prefix), trying a working set again
after ``screening_retry_steps`` steps (twice as many each time). The
policy's fields: docs/speed_policy.rst.
"""

import dataclasses

import numpy as np

from .._config import check_memory
from .._trace import taken
from ..linalg._copies import design_transposed
from ..linalg._design import Design


def screens_trajectory(design, iteration, datafit, gradients_out=None, user_step=False):
    """Whether :func:`run_screened` applies to a full-batch fit loop of
    ``iteration`` on ``design``: the speed policy's ``trajectory_screening``,
    a dense ``X~`` of at least ``screening_min_features`` columns and at
    most ``screening_max_bytes`` (the screen reads a transposed copy,
    :func:`~skacv.linalg._copies.design_transposed`), a
    coordinatewise iteration without mini-batches whose penalty has a zero
    band on every coordinate, and no record of every gradient
    (``gradients_out``) nor of the iterates for the oscillation check of a
    user's step on a loss of bounded gradient."""
    policy = design.policy
    if (not policy.trajectory_screening or not isinstance(design.X, np.ndarray)
            or iteration.sampler is not None
            or design.n_features < policy.screening_min_features
            or design.X.nbytes > policy.screening_max_bytes
            or gradients_out is not None or (user_step and datafit.bounded_gradient)
            or not iteration.coordinatewise):
        return False
    band = iteration.penalty.zero_band()
    return band is not None and band > 0


def entering_first(width, entering):
    """``(block, local)``: the positions past a prefix of ``width`` up to
    the last of ``entering`` (increasing positions past the prefix) and
    where they read from so that ``a[block] = a[local]`` puts ``entering``
    first and the others after them in their order (the stacked folds'
    working sets and the fit loop's take features in so)."""
    span = int(entering[-1]) + 1
    rest = np.ones(span, dtype=bool)
    rest[entering] = False
    local = width + np.concatenate([entering, np.flatnonzero(rest)])
    return slice(width, width + span), local


class _Scattered:
    """A path of shape (n_features, T + 1) written through the prefix's
    coordinates: ``out[:, k] = x`` puts ``x`` at the columns ``index`` of
    column ``k`` and zeros elsewhere."""

    def __init__(self, full, index):
        self.full, self.index = full, index

    def __setitem__(self, key, value):
        column = self.full[:, key[1]]
        column[:] = 0
        column[self.index] = value


class TrajectoryScreen:
    """The working set of one trajectory, kept in its
    :class:`~skacv.iterations._path.TrajectoryState` (``screen``).

    Parameters
    ----------
    design : Design
        The fit's design (dense).
    iteration : Iteration
        Its iteration (:func:`screens_trajectory`).

    Attributes
    ----------
    order : ndarray of shape (n_features,) or None
        The permutation of the columns: the prefix first, then the others
        by increasing slack (``None``: not started, or over every feature).
    width : int
        The prefix's columns.
    """

    def __init__(self, design, iteration):
        penalty = iteration.penalty
        self.limit = float(penalty.zero_band()) * design.n_eff  # |x~_j^T r| <= limit
        self.signed = bool(penalty.positive)
        n = design.n_samples
        # the rounding of a product of n terms (and of the residual it reads), relative
        self.margin = 4.0 * (n + 2) * float(np.finfo(design.dtype).eps)
        self.order = self.cols = None
        self.width = design.n_features
        # the loop runs over every feature before this step: a short path
        # would not pay back the copies (and a small alpha's first steps
        # move most coordinates)
        self.paused_until = design.policy.trajectory_screening_after
        self.pause = design.policy.screening_retry_steps
        self.pending = self.due = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state.update(self._released)
        return state

    #: what a continued fit takes again from its design (a warm start's):
    #: the working set's columns and the design itself
    _released = {"cols": None, "design": None}

    def release(self):
        """Drop the working set's column buffer and the design (a pickle
        leaves them out too): a fitted estimator that will not continue
        would keep up to a centred copy of ``X`` and a buffer of its
        columns. A continued fit takes them again, the same steps."""
        self.__dict__.update(self._released)

    # -- the prefix ---------------------------------------------------------

    def _refresh(self, design, state, residual):
        """At the gradient point ``v^k`` of ``state`` with its ``residual``:
        the gradient of every feature, the residual the certificate's
        reference, the coordinates that move or may leave the band the new
        prefix, the others after it by increasing slack."""
        taken("trajectory_screening_refresh")
        r = np.asarray(residual)
        Z = np.asarray(design.rmatvec(r), dtype=np.float64)
        norms = np.sqrt(design.column_sq_norms()) * (1.0 + 1e-6)
        room = Z if self.signed else np.abs(Z)
        with np.errstate(divide="ignore", invalid="ignore"):
            slack = (self.limit - room) / norms
        slack[np.isnan(slack)] = np.inf  # (0 / 0: a constant column, a zero gradient)
        r64 = np.asarray(r, dtype=np.float64)
        inside = ((state.x != 0) | (state.x_prev != 0) | (state.v != 0)
                  | (slack <= self.margin * float(np.sqrt(r64 @ r64))))
        first = np.flatnonzero(inside)
        rest = np.flatnonzero(~inside)
        rest = rest[np.argsort(slack[rest], kind="stable")]
        self.order = np.concatenate([first, rest])
        self.keys = slack[self.order]  # (read past the prefix: increasing)
        self.norms = norms[self.order]
        self.width = first.size
        self.filled = 0  # (the buffer kept: its columns copied again as they are read)
        self.reference = r64.copy()
        self.excess = 0.0
        self.columns = self.steps = 0  # the columns computed in the steps since

    def _columns(self, design, upto):
        """The columns of ``X~`` at the order's first ``upto`` positions
        (the prefix's, then the closest to the band) as rows (shape (>=
        upto, n_samples), C order), copied from
        :func:`~skacv.linalg._copies.design_transposed` as they are first
        read into a buffer with room to grow (taken again after
        unpickling)."""
        if self.cols is None:
            self.filled = 0
        if self.filled >= upto:
            return self.cols
        p = self.order.size
        if self.cols is None or self.cols.shape[0] < upto:
            old = 0 if self.cols is None else self.cols.shape[0]
            cap = min(p, max(upto + upto // 2, 2 * old, 64))
            check_memory(cap * design.n_samples * design.dtype.itemsize,
                         f"the working set's columns ({cap} x {design.n_samples})")
            cols = np.empty((cap, design.n_samples), dtype=design.dtype)
            if self.filled:
                cols[:self.filled] = self.cols[:self.filled]
            self.cols = cols
        upto = min(self.cols.shape[0], max(upto, 2 * self.filled))  # (doubled: few copies)
        np.take(design_transposed(design), self.order[self.filled:upto], axis=0,
                out=self.cols[self.filled:upto], mode="clip")
        self.filled = upto
        return self.cols

    def _grow(self, entering):
        """Take the features at ``entering`` (increasing positions past the
        prefix, within the copied columns) into it: the positions up to the
        last of them are reordered, ``entering`` first, the others after
        them in their order (the keys past the prefix stay increasing)."""
        w = self.width
        block, local = entering_first(w, entering)
        for name in ("order", "keys", "norms"):
            a = getattr(self, name)
            a[block] = a[local]
        self.cols[block] = self.cols[local]
        self.width = w + entering.size
        taken("trajectory_screening_grow", columns=entering.size)

    def _certify(self, residual, x, x_prev):
        """Before a step of the prefix's iterates ``x``, ``x_prev`` at the
        gradient point whose ``residual`` it reads: ``True`` where no
        feature past the prefix can leave the band (those whose bound
        reaches it have their gradient computed), else ``False`` with
        ``pending`` set to what the loop does first: grow the prefix, or
        what the steps since the last refresh called for after the last
        one (a refresh, or steps over every feature)."""
        if self.due is not None:
            self.pending, self.due = (self.due, None), None
            return False
        policy = self.policy
        w = self.width
        m, r_norm = self._within_reach(residual)
        if m:
            rows = self._columns(self.design, w + m)[w:w + m]
            g = np.asarray(rows @ np.asarray(residual), dtype=np.float64)
            room = g if self.signed else np.abs(g)
            # (within the rounding of the band: taken in, as a step over all may move it)
            leaves = np.flatnonzero(room > self.limit - self.margin * r_norm * self.norms[w:w + m])
            if leaves.size:
                self.pending = ("grow", leaves)
                return False
        moving = int(np.count_nonzero((x != 0) | (x_prev != 0)))
        self.excess += w + m - moving
        self.columns += w + m
        self.steps += 1
        p = self.order.size
        if self.excess > policy.screening_refresh_passes * p:
            self.due = "refresh"
        elif (self.steps >= policy.screening_retry_steps
                and self.columns > policy.screening_max_share * p * self.steps):
            self.due = "pause"
        return True

    def gap_gradient(self, design, residual):
        """``X~^T r`` for the duality gap at the fit loop's iterate (its
        ``residual``, float64) from the columns of the prefix and of the
        features past it within reach of the band (as the certificate
        computes them), zeros for the others: those stay inside the band
        there (by more than the products' rounding), so the gap's dual
        scaling is the exact gradient's (its largest ``|x~_j^T r|`` is among
        the computed ones, or within ``l1``, where the scale is 1), and so is
        the gap. ``None`` without a working set or where those columns
        exceed the speed policy's ``screening_max_share`` of the features:
        the caller takes the product over every feature."""
        if self.order is None:
            return None
        p = self.order.size
        upto = self.width + self._within_reach(residual)[0]
        if upto > design.policy.screening_max_share * p:
            return None
        taken("trajectory_screening_gap", columns=upto)
        corr = np.zeros(p)
        rows = self._columns(design, upto)[:upto]
        corr[self.order[:upto]] = rows @ np.asarray(residual, dtype=design.dtype)
        return corr

    def _within_reach(self, residual):
        """``(m, ||r||)``: the features past the prefix (its first ``m``
        positions, by increasing slack) whose bound may reach the band at
        ``residual``: those whose slack is at most ``||r - r_ref||`` plus the
        products' rounding of ``r``."""
        r = np.asarray(residual, dtype=np.float64)
        d = r - self.reference
        r_norm = float(np.sqrt(r @ r))
        reach = float(np.sqrt(d @ d)) + self.margin * r_norm
        return int(np.searchsorted(self.keys[self.width:], reach, side="right")), r_norm

    # -- the loop -----------------------------------------------------------

    def run(self, design, y_tilde, iteration, n_steps, state, out, run, datafit, **kwargs):
        """``n_steps`` steps of ``run`` (the fit loop) on ``state``: on the
        prefix where it pays, over every feature elsewhere."""
        self.policy = policy = design.policy
        self.design = design
        end = state.k + n_steps
        while state.k < end:
            if state.k < self.paused_until:
                run(design, y_tilde, iteration, min(end, self.paused_until) - state.k, state,
                    out, datafit=datafit, **kwargs)
                continue
            action, entering = self.pending or ("refresh" if self.order is None else None, None)
            self.pending = None
            if action == "grow":
                self._grow(entering)
            elif action == "refresh":
                self._refresh(design, state, datafit.residual(state.Xv, y_tilde))
            elif action == "pause":
                self._stop(state)
                continue
            if self.width > policy.screening_max_share * design.n_features:
                self._stop(state)
                continue
            self._advance(design, y_tilde, iteration, end - state.k, state, out, run, datafit,
                          **kwargs)
        return state

    def _stop(self, state):
        """Over every feature for the next ``pause`` steps (twice as many
        each time), then a refresh."""
        taken("trajectory_screening_pause", steps=self.pause)
        self.paused_until = state.k + self.pause
        self.pause *= 2
        self.order = self.cols = None

    def _advance(self, design, y_tilde, iteration, n_steps, state, out, run, datafit,
                 fitted_out=None, sources_out=None, points_out=None, **kwargs):
        """Steps on the prefix until ``n_steps`` or the certificate stops
        them; ``state`` over every feature after them."""
        idx = self.order[:self.width]
        sub = Design.centred(self._columns(design, self.width)[:self.width].T,
                             np.zeros(self.width, dtype=design.dtype), None,
                             fit_intercept=False, policies=design.policies)
        sub.n_eff = design.n_eff
        x = state.x[idx]
        x_prev = x if state.x_prev is state.x else state.x_prev[idx]
        v = x if state.v is state.x else state.v[idx]
        s = dataclasses.replace(state, x=x, x_prev=x_prev, v=v, z_next=None, z_gap=None,
                                screen=None)
        k0 = state.k
        run(sub, y_tilde, iteration, n_steps, s, _Scattered(out, idx), datafit=datafit,
            fitted_out=fitted_out, sources_out=sources_out,
            points_out=None if points_out is None else _Scattered(points_out, idx),
            certify=self._certify, **kwargs)
        if s.k - k0 < n_steps and self.pending is None:
            raise RuntimeError("the screened fit loop stopped without a reason")
        p = design.n_features

        def scatter(a):
            full = np.zeros(p, dtype=a.dtype)
            full[idx] = a
            return full
        state.k = s.k
        state.x = scatter(s.x)
        state.x_prev = state.x if s.x_prev is s.x else scatter(s.x_prev)
        state.v = state.x if s.v is s.x else scatter(s.v)
        state.Xx, state.Xx_prev, state.Xv = s.Xx, s.Xx_prev, s.Xv
        state.z_next = state.z_gap = None


def run_screened(design, y_tilde, iteration, n_steps, state, out, run, **kwargs):
    """:func:`~skacv.iterations._path.run_trajectory` (``run``) by
    :class:`TrajectoryScreen`: ``n_steps`` steps on ``state``, whose
    ``screen`` is made at the first call and kept."""
    screen = state.screen
    if screen is None:
        screen = state.screen = TrajectoryScreen(design, iteration)
        taken("trajectory_screening")
    return screen.run(design, y_tilde, iteration, n_steps, state, out, run, **kwargs)
