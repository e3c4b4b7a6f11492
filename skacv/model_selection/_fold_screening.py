"""The stacked folds on a working set of features: screening that keeps the path.

A coordinate whose iterate, previous iterate and extrapolated point are
zero stays at zero through a step of an l1-penalised iteration while its
gradient stays in the penalty's zero band (:meth:`Penalty.zero_band`:
``|z_j| <= l1``). Coordinate ``j`` of fold ``c`` has the gradient
``X~_jc^T m_c r_c`` (times ``1 / n_c``), which moves by at most ``N_jc
||m_c (r_c - r'_c)||`` between two residuals ``r_c``, ``r'_c``
(Cauchy-Schwarz; ``N_jc`` the norm of the fold-centred column on fold
``c``'s training rows). :class:`ScreenedFolds` runs the block's steps on a
*prefix* of a column permutation of ``X~`` (every coordinate that is
non-zero, or whose bound could leave the band) and certifies the others at
every step against the residual of its last pass over every column (a
*refresh*): those whose bound is too close to the band are computed, and
join the prefix if their gradient leaves it. The iterates are the full
block's (the same steps of the same iteration object, on the same values)
up to the rounding of the products, which the certificate's margin covers.

A refresh costs a gradient product with all of ``X`` and a copy of its
permuted columns; it is taken when the features the steps since the last
one computed (the prefix's and the certificate's) exceed those that move
by the speed policy's ``screening_refresh_passes`` times the number of
features (a ski-rental rule: rent the surplus until it has cost a
refresh). A block takes a working set after ``screening_retry_steps``
steps over every feature (a small alpha's first steps take in most of
them) and hands it back where its steps cost more than
``screening_max_share`` of a step over every feature. Where screening
applies (:func:`screens`) and the policy's fields: docs/speed_policy.rst.
"""


import time

import numpy as np

from .._trace import taken
from ..iterations._path import TrajectoryState, run_normal_block
from ..iterations._screening import entering_first


def step_columns(columns, n_columns, policy):
    """What a step of a working set of ``columns`` features (the prefix's
    and those the certificate computes) costs, in features of a step over
    all of them: those plus the speed policy's
    ``screening_step_overhead`` (the certificate's and the prefix's
    fixed work, in entries of the iterates) over the block's
    ``n_columns``."""
    return columns + policy.screening_step_overhead / n_columns


def worth_screening(state, policy):
    """Whether a block at ``state`` (over all features) starts on a working
    set: a step on the features whose iterates move would cost at most half
    the speed policy's ``screening_max_share`` of a step over all of them
    (:func:`step_columns`)."""
    moving = np.any(state.x != 0, axis=1) | np.any(state.x_prev != 0, axis=1)
    cost = step_columns(np.count_nonzero(moving), state.x.shape[1], policy)
    return cost <= 0.5 * policy.screening_max_share * moving.size


def screens(designs, products, iterations):
    """Whether stacked folds on ``designs`` (:class:`FoldDesigns`), stepping
    on ``products`` with ``iterations`` (one per column), advance on a
    working set: the speed policy's ``fold_screening``, a dense ``X`` of at
    least ``screening_min_features`` columns and at most
    ``screening_max_bytes`` (the working set keeps a permuted copy of the
    block's) on its own products (not the
    covariance form; a rotated block's working set takes the ``"folds"``
    layout), and a penalty with a zero band on every coordinate of every
    column."""
    d = designs
    policy = d.policy
    if (not policy.fold_screening or d.sparse or products is not d
            or d.n_features < policy.screening_min_features
            or d.base.X.nbytes > policy.screening_max_bytes):
        return False
    bands = [it.penalty.zero_band() for it in iterations]
    return all(b is not None and b > 0 for b in bands)


def _map_iterates(state, f):
    """``(x, x_prev, v)`` of ``state`` through ``f`` (a copy in another
    order of the features), an array shared with ``x`` shared again."""
    x = f(state.x)
    return (x, x if state.x_prev is state.x else f(state.x_prev),
            x if state.v is state.x else f(state.v))


def _column_norms_of(designs):
    """:func:`_training_column_norms` of ``designs``, kept on it (a working
    set taken again after a hand-back reads them again)."""
    if designs.screening_norms is None:
        designs.screening_norms = _training_column_norms(designs)
    return designs.screening_norms


def _training_column_norms(designs):
    """``N`` of shape (n_features, n_folds): the norm of every column of
    ``X~_j`` (fold ``j``'s centring) on fold ``j``'s training rows, in
    float64 by panels of rows, inflated by a relative ``1e-6`` over the
    rounding of the sums."""
    X, mask = designs.base.X, designs.mask
    n, p = X.shape
    sq = np.zeros((p, mask.shape[1]))
    rows = max(1, 2**22 // max(1, p))
    for a in range(0, n, rows):
        block = np.square(X[a:a + rows], dtype=np.float64)
        sq += block.T @ mask[a:a + rows].astype(np.float64)
    # sum over training rows of (x~ - sqrt(w) delta)^2 = sum x~^2 - n_j delta^2
    sq -= designs.n_eff * np.square(designs.delta.astype(np.float64))
    return np.sqrt(np.maximum(sq, 0.0)) * (1.0 + 1e-6)


class ScreenedFolds:
    """The steps of a block of stacked folds on a working prefix of its features.

    Parameters
    ----------
    designs : FoldDesigns
        The block (``"folds"`` layout, dense ``X``).
    response : ndarray of shape (n_columns, n_samples)
        :meth:`FoldDesigns.center_y`'s.
    iterations : list of Iteration
        Every column's own iteration.
    iteration : Iteration
        Them stacked, their strengths a row per column (any number of
        rows: :func:`~skacv.model_selection._kfold.stacked_iteration`
        without ``n_rows``).
    state : TrajectoryState
        The block's state over all features (:func:`init_state`); read
        once, kept on the prefix from then on (:meth:`full_state`).
    errors : callable
        ``errors(P, target)``: the held-out errors (shape (n_columns,))
        of iterates whose fitted values are ``P`` (shape (n_columns,
        n_samples)) and ``target`` :meth:`FoldDesigns.target` at them.
    verbose : int, default=0
        Print the steps' progress (as the steps over every feature do)
        with the working set's size.

    Attributes
    ----------
    order : ndarray of shape (n_features,)
        The permutation of the columns: the prefix first, then the others
        by increasing slack.
    width : int
        The prefix's columns.
    """

    def __init__(self, designs, response, iterations, iteration, state, errors, verbose=0):
        taken("fold_screening")
        self.designs, self.response, self.errors = designs, response, errors
        d = designs
        self.policy = d.policy
        self.iteration = iteration
        band = np.array([it.penalty.zero_band() for it in iterations], dtype=np.float64)
        self.limit = band * d.n_eff  # |X~_j^T m_j r_j| <= limit_j: the coordinate stays at zero
        self.limit_dt = self.limit.astype(d.dtype)  # (a row, in the gradients' precision)
        # non-negative coefficients: a zero stays while z_j <= band (one-sided)
        self.signed = all(it.penalty.positive for it in iterations)
        with np.errstate(divide="ignore"):  # (a row per column, as the slack's)
            self.inv_norms = np.ascontiguousarray((1.0 / _column_norms_of(d)).T, dtype=d.dtype)
        n = d.n_samples
        # the rounding of a product of n terms (and of the residual it reads), relative
        self.margin = 4.0 * (n + 2) * float(np.finfo(d.dtype).eps)
        self.verbose = verbose
        self.full = state
        self.state = None  # the prefix's (refresh)
        self.excess = 0.0

    # -- the prefix ---------------------------------------------------------

    def full_state(self):
        """The block's :class:`TrajectoryState` over all features (Fortran
        order, as :func:`init_state`'s), the prefix's put back in place
        (no next gradient: a run that continues takes it afresh)."""
        if self.state is None:
            return self.full
        s, d, K = self.state, self.designs, self.response.shape[0]
        idx = self.order[:self.width]

        def scatter(a):
            out = np.zeros((d.n_features, K), dtype=d.dtype, order="F")
            out[idx] = a
            return out
        x, x_prev, v = _map_iterates(s, scatter)
        zero = np.zeros((d.n_samples, K), dtype=d.dtype, order="F")
        self.full = TrajectoryState(k=s.k, x=x, x_prev=x_prev, v=v, Xx=zero, Xx_prev=zero,
                                    Xv=zero)
        return self.full

    def _start(self):
        """The first refresh: every feature in the prefix, the gradient and
        residuals of a pass over all of them at ``v^k``."""
        d, full = self.designs, self.full
        self.order = np.arange(d.n_features)
        self.XT, self.delta, self.offset = d.base.X.T, d.delta, d.base.x_offset
        _, Z, rss = d.fitted_and_gradient(full.v, d.target(self.response, full.v),
                                          held_out=False)
        self.width = d.n_features
        self.state = TrajectoryState(k=full.k, x=full.x, x_prev=full.x_prev, v=full.v, Xx=None,
                                     Xx_prev=None, Xv=None, z_next=Z, rss_next=rss)
        self._refresh(d.residuals)

    def _refresh(self, residuals):
        """At the point ``v^k`` whose pass left the masked training
        ``residuals`` (shape (n_columns, n_samples)): the gradient of every
        feature past the prefix, the residuals the certificate's reference,
        the coordinates that move or may leave the band the new prefix, the
        others after it by increasing slack (the columns of ``X~`` copied in
        that order)."""
        taken("fold_screening_refresh")
        s, w, K = self.state, self.width, self.response.shape[0]
        R = np.asarray(residuals, dtype=np.float64)
        self.reference = R.copy()
        Z = np.empty((self.order.size, K), dtype=s.z_next.dtype)
        Z[:w] = s.z_next
        if w < Z.shape[0]:
            Z[w:] = self.designs.feature_gradients(residuals, self.XT[w:].T, self.delta[w:])
        S = self._slack(Z)
        slack = S.min(axis=0)
        moving = np.zeros(Z.shape[0], dtype=bool)
        moving[:w] = (np.any(s.x != 0, axis=1) | np.any(s.x_prev != 0, axis=1)
                      | np.any(s.v != 0, axis=1))
        reach = self.margin * float(np.sqrt(np.max(np.einsum("kn,kn->k", R, R))))
        inside = moving | (slack <= reach)
        first = np.flatnonzero(inside)
        rest = np.flatnonzero(~inside)
        rest = rest[np.argsort(slack[rest], kind="stable")]
        perm = np.concatenate([first, rest])
        self.order = self.order[perm]
        self.keys = slack[perm]  # (read past the prefix: increasing)
        self.ST = np.take(S, perm, axis=1)  # each column's slack, a row per column
        self.inv_norms = np.take(self.inv_norms, perm, axis=1)
        self.XT = np.ascontiguousarray(self.XT[perm])  # (X~'s columns a row each)
        self.delta, self.offset = self.delta[perm], self.offset[perm]
        self.width = first.size

        def gather(a):
            out = np.zeros((first.size, K), dtype=a.dtype, order="F")
            kept = first < w  # (the others: zero iterates)
            out[kept] = a[first[kept]]
            return out
        x, x_prev, v = _map_iterates(s, gather)
        self.state = TrajectoryState(k=s.k, x=x, x_prev=x_prev, v=v, Xx=None, Xx_prev=None,
                                     Xv=None, z_next=np.asfortranarray(Z[first]),
                                     rss_next=s.rss_next)
        self.prefix = self.designs.features(self.XT.T, self.delta, self.offset, self.width)
        self.excess = 0.0
        self.columns = self.steps = 0  # the columns computed in the steps since

    def _slack(self, Z):
        """Every feature's slack in every column, ``(limit_c - |Z_jc|) /
        N_jc`` (``Z_jc`` itself for non-negative coefficients), a row per
        column (shape (n_columns, n_features): the minimum over the columns
        and the permutation's gathers then run along rows): how far column
        ``c``'s training residual may move before feature ``j``'s gradient
        can leave the band (``inf`` for a column constant on a fold's
        training rows)."""
        dt = self.designs.dtype
        room = np.array(np.asarray(Z, dtype=dt).T, order="C")
        if not self.signed:
            np.abs(room, out=room)
        np.subtract(self.limit_dt[:, None], room, out=room)
        room *= self.inv_norms
        room[np.isnan(room)] = np.inf  # (0 * inf: a constant column, a zero gradient)
        return room

    def _grow(self, entering, Zc):
        """Take the features ``entering`` (increasing positions past the
        prefix) into the prefix with zero iterates and the next step's
        gradient ``Zc``: the positions up to the last of them are reordered,
        ``entering`` first, the others after them in their order (the keys
        past the prefix stay increasing)."""
        s, K, w = self.state, self.response.shape[0], self.width
        block, local = entering_first(w, entering)
        for name in ("order", "keys", "delta", "offset"):
            a = getattr(self, name)
            a[block] = a[local]
        for a in (self.ST, self.inv_norms):  # (a row per column)
            a[:, block] = a[:, local]
        self.XT[block] = self.XT[local]
        stop = w + entering.size

        def grown(a, fill=None):
            out = np.zeros((stop, K), dtype=a.dtype, order="F")
            out[:w] = a
            if fill is not None:
                out[w:] = fill
            return out
        s.x, s.x_prev, s.v = _map_iterates(s, grown)
        s.z_next = grown(s.z_next, Zc)
        self.width = stop
        self.prefix = self.designs.features(self.XT.T, self.delta, self.offset, self.width)
        taken("fold_screening_grow", columns=entering.size)

    # -- the steps ----------------------------------------------------------

    def advance(self, n_steps, losses):
        """Up to ``n_steps`` steps of every column, the held-out errors of
        their iterates into ``losses`` (shape (n_steps, n_columns)); returns
        the steps taken: fewer where the steps since the last refresh (at
        least the speed policy's ``screening_retry_steps`` of them) cost
        more than its ``screening_max_share`` of steps over all the
        features (:func:`step_columns`; the block goes on over all of them,
        :meth:`full_state`)."""
        if self.state is None:
            self._start()
        it, Y, p = self.iteration, self.response, self.designs.n_features
        K = Y.shape[0]
        budget = self.policy.screening_refresh_passes * p
        share = self.policy.screening_max_share * p
        got = []  # the held-out errors of a step whose pass gave its fitted values
        report, k0, tic = max(1, n_steps // 10), self.state.k, time.perf_counter()

        def on_fitted(_, x, P, target):
            got.append(self.errors(P, target))
        for i in range(n_steps):
            s = self.state
            k = s.k + 1
            got.clear()
            prefix = self.prefix
            run_normal_block(prefix, Y, it, 1, s, None,
                             on_fitted=on_fitted if it.beta(k) == 0.0 else None)
            if got:
                losses[i] = got[0]
            else:  # the fitted values of x^k on the prefix
                P = np.ascontiguousarray((prefix.base.X @ s.x).T)
                losses[i] = self.errors(P, prefix.target(Y, s.x))
            m = self._certify(prefix.residuals)
            moving = int(np.count_nonzero(np.any(s.x != 0, axis=1) | np.any(s.x_prev != 0, axis=1)))
            self.excess += self.width + m - moving
            self.columns += self.width + m
            self.steps += 1
            if self.verbose and (i + 1) % report == 0:
                print(f"[{it.name}] block of {K}: step {k}/{k0 + n_steps} on {self.width} of "
                      f"{p} features  {time.perf_counter() - tic:.1f}s")
            pays = (self.steps < self.policy.screening_retry_steps
                    or step_columns(self.columns / self.steps, K, self.policy) <= share)
            if self.excess > budget or not pays:
                if not pays:  # (at a refresh, or as soon as the steps since show it)
                    return i + 1
                self._refresh(prefix.residuals)
        return n_steps

    def _certify(self, residuals):
        """Check the features past the prefix at the point the last pass
        read (its masked training ``residuals``, shape (n_columns,
        n_samples)): those whose bound reaches the band have their gradient
        computed, and the prefix grows over them when one leaves it.
        Returns how many were computed."""
        R = np.asarray(residuals, dtype=np.float64)
        D = R - self.reference
        reach = np.sqrt(np.einsum("kn,kn->k", D, D))
        reach += self.margin * np.sqrt(np.einsum("kn,kn->k", R, R))
        w = self.width
        m = int(np.searchsorted(self.keys[w:], float(np.max(reach)), side="right"))
        if not m:
            return 0
        near = np.flatnonzero(np.any(self.ST[:, w:w + m] <= reach[:, None], axis=0))
        if not near.size:
            return 0
        Zc = self.designs.feature_gradients(residuals, self.XT[w + near].T, self.delta[w + near])
        leaves = np.any((Zc if self.signed else np.abs(Zc)) > self.limit_dt, axis=1)
        if np.any(leaves):
            self._grow(near[leaves], Zc[leaves])
        return near.size
