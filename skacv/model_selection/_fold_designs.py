"""The K fold designs of K-fold CV along the path, stacked as one block.

Fold ``j`` is the fit on the weights ``w * m_j`` (``m_j`` one on its
training rows, zero on its held-out fold), centred by its own weighted
means. :class:`FoldDesigns` stacks the K designs column by column on one
copy of ``X~``, read once a step for all folds; :class:`FoldCovariance` is
its covariance form. Both are the
:class:`~skacv.linalg._protocols.BlockProducts` that
:func:`~skacv.iterations._path.run_normal_block` reads (the pass, its
layouts and threads: docs/architecture.rst).
"""


import copy

import numpy as np

from .._trace import taken
from ..linalg._blas import gemm_call
from ..linalg._design import _sum_in_order
from ..utils._parallel import cache_bytes, kept_workers, last_level_share


def _prepared_calls(views, library):
    """``(first, mask, second)`` per panel of a group (the speed policy's
    ``prepared_products`` in its ``prepared_blas`` ``library``): the
    calls of :func:`_pass_group` and the masking multiply's arguments (or
    ``None``); ``None`` when a product cannot be prepared."""
    taken("prepared_calls")
    calls = []
    for Bt, Xa, Ra, _, Ma, Gt, Zj in views:
        first = gemm_call(Ra, Xa, Bt, alpha=-1.0, beta=1.0, library=library)
        second = gemm_call(Zj, Gt, Xa, alpha=1.0, beta=1.0, library=library)
        if first is None or second is None:
            return None
        calls.append((first, None if Ma is None else (Ra, Ma, Gt.T), second))
    return calls


def _pass_group(views, total, tmp, calls):
    """One group of panels of :meth:`FoldDesigns._dense_pass` into its
    gradient sum ``total``, by the prepared ``calls`` or NumPy's products on
    the ``views`` (``tmp``: a scratch gradient)."""
    total[...] = 0
    if calls is not None:  # prepared products, without the GIL
        for first, mask, second in calls:
            first()  # Ra <- Ra - Xa V (Ra holds the target)
            if mask is not None:
                np.multiply(*mask)
            second()  # Zj <- Zj + Gt Xa
        return
    dot, subtract, multiply = np.dot, np.subtract, np.multiply
    for Bt, Xa, Ra, Ta, Ma, Gt, Zj in views:
        dot(Xa, Bt, out=Ra)
        subtract(Ta, Ra, out=Ra)
        if Ma is not None:
            multiply(Ra, Ma, out=Gt.T)
        dot(Gt, Xa, out=tmp)
        Zj += tmp


def fold_panel_rows(n_features, policy, itemsize=4, n_columns=5):
    """Rows of a panel of the stacked folds' pass (the speed ``policy``'s
    ``fold_panel_cache_share`` of the level-2 cache, products of
    ``n_columns`` columns of at most ``fold_panel_max_product``
    multiply-adds where 8 rows are (a block of several grid points' folds
    may be wider), at most ``fold_panel_rows`` rows; short rows up to
    ``narrow_panel_rows``)."""
    if n_features <= policy.narrow_features:
        return policy.narrow_panel_rows
    rows = int(policy.fold_panel_cache_share * cache_bytes(2, policy)) // (n_features * itemsize)
    small = policy.fold_panel_max_product // (max(1, n_columns) * n_features)
    if small >= 8:  # (a wider block's products are never small: the cache alone)
        rows = min(rows, small)
    return max(8, min(policy.fold_panel_rows, rows))


def fold_covariance_pays(n_samples, n_features, n_folds, n_steps, policy, itemsize=4):
    """Whether ``n_steps`` steps of ``n_folds`` stacked folds cost less in
    the covariance form (:class:`FoldCovariance`, the speed ``policy``'s
    ``fold_covariance``; ``itemsize``: the block's precision). The Gram
    matrices cost ``4 n p^2`` flops at ``covariance_gemm_advantage``
    times the speed of the pass, and ``2 K p^2`` a step, each flop of these
    memory-bound products counted ``fold_covariance_step_cost`` times
    unless the K Gram matrices fit in the level-2 cache (plus ``2 n p`` for
    the held-out errors, at gemm speed), against ``2 n p (2K - 1)`` a step
    for the pass (compute-bound)."""
    n, p, K = n_samples, n_features, n_folds
    if not policy.fold_covariance or n_steps < 1 or p > min(n, policy.covariance_max_features):
        return False
    if policy.fold_covariance_always:
        return True
    adv = policy.covariance_gemm_advantage
    resident = K * p * p * itemsize <= cache_bytes(2, policy)
    per_flop = 1.0 if resident else policy.fold_covariance_step_cost
    step = 2.0 * K * p * p * per_flop + 2.0 * n * p / adv
    return 4.0 * n * p * p / adv + n_steps * step < n_steps * 2.0 * n * p * (2 * K - 1)


def pass_groups(nbytes, policy):
    """Groups of panels of a pass over a copy of ``X`` of ``nbytes``
    (the speed ``policy``'s ``pass_groups`` beyond ``pass_groups_min_bytes``)."""
    limit = policy.pass_groups_min_bytes
    limit = last_level_share(policy) if limit is None else limit
    return policy.pass_groups if nbytes > limit else 1


def rotated_pays(n_bytes, n_features, policy):
    """Whether a dense design of ``n_bytes`` (in the folds' precision) and
    ``n_features`` columns takes the ``"rotated"`` layout where its folds
    partition the rows (the speed policy's ``rotated_min_bytes`` and
    ``rotated_min_features``)."""
    return n_bytes >= policy.rotated_min_bytes and n_features >= policy.rotated_min_features


class FoldDesigns:
    """K fold designs of one ``X`` stacked column by column.

    Column ``j`` of a block has the products of ``X~_j = sqrt(w) (X - 1
    mu_j^T)`` (``mu_j``: the weighted mean of fold ``j``'s training rows;
    zero without intercept), as those of :attr:`base` and a shift of the
    response (:meth:`target`). Fitted values are computed on every row, the
    gradients on each fold's training rows. Row-wise quantities are held
    shape (n_folds, n_samples) in the block's *layout*:

    - ``"folds"``: row ``j`` is fold ``j``;
    - ``"rotated"`` (``partition`` of a dense design of at least the speed
      policy's ``rotated_min_bytes`` and ``rotated_min_features``): on fold
      ``j``'s held-out rows, row ``i`` is fold ``(j + 1 + i) mod K``, the
      held-out fold last. :attr:`fold_of` gives the fold of every entry,
      :meth:`by_fold` the ``"folds"`` layout.

    Parameters
    ----------
    base : Design
        The design of all rows (weights ``w``, centred by the mean of all rows).
    train : ndarray of shape (n_samples, n_folds), bool
        Training rows of each fold.
    partition : list of slice, default=None
        Fold ``j``'s held-out rows, when they are consecutive and its
        training rows are all the others.

    Attributes
    ----------
    n_eff : ndarray of shape (n_folds,)
        Training weight of each fold.
    delta : ndarray of shape (n_features, n_folds)
        ``mu_j - mu``: the folds' offsets from the centring of ``base``.
    layout : {"folds", "rotated"}
    fold_of : ndarray of shape (n_folds, n_samples)
        The fold of each entry of a row-wise quantity in the layout.
    """

    #: the pass gives the fitted values of every row
    computes_fitted = True

    def __init__(self, base, train, partition=None):
        self.base = base
        self.n_samples, self.n_features = base.n_samples, base.n_features
        self.dtype, self.sparse = base.dtype, base.sparse
        self.fit_intercept = base.fit_intercept
        self.policy, self.statistics = base.policies
        self.mask = np.asarray(train, dtype=base.dtype)
        self.mask_t = np.ascontiguousarray(self.mask.T)  # (n_folds, n_samples)
        w = np.ones(self.n_samples) if base.weight is None else base.weight.astype(np.float64)
        self.sqrt_weight = np.sqrt(w).astype(base.dtype)
        self.fold_weight = w[:, None] * self.mask  # (n, K), float64
        self.n_eff = self.fold_weight.sum(axis=0)
        if np.any(self.n_eff <= 0):
            raise ValueError("A training fold has no sample weight; use fewer folds or "
                             "give the samples positive weights.")
        K = self.n_folds
        self.fold_of = np.repeat(np.arange(K)[:, None], self.n_samples, axis=1)
        self.partition = None
        if (partition is not None and not self.sparse and K >= 2
                and rotated_pays(base.X.nbytes, self.n_features, self.policy)):
            self.partition = [(sl.start, sl.stop) for sl in partition]
            held_out = np.zeros_like(self.mask)
            for j, (a, b) in enumerate(self.partition):
                self.fold_of[:, a:b] = ((j + 1 + np.arange(K)) % K)[:, None]
                held_out[a:b, j] = 1
            if not np.array_equal(held_out, 1 - self.mask):
                raise ValueError("partition must hold out each fold's non-training rows, "
                                 "one slice per fold, every row in exactly one.")
        self.layout = "folds" if self.partition is None else "rotated"
        # (rotated) where each fold's held-out rows start, and whether none is empty
        self._fold_starts = None if self.partition is None else [a for a, _ in self.partition]
        self._no_empty_fold = self.partition is not None and all(b > a for a, b in self.partition)
        if not self.fit_intercept:
            self.delta = np.zeros((self.n_features, K), dtype=base.dtype)
        elif self.partition is not None:
            # X~^T (sqrt(w) m_j) = n_j (mu_j - mu): the sum of the other folds' slices
            part = [np.asarray(self.sqrt_weight[a:b] @ base.X[a:b], dtype=np.float64)
                    for a, b in self.partition]
            self.delta = np.stack(
                [_sum_in_order([np.zeros(self.n_features)] + part[:j] + part[j + 1:])
                 / self.n_eff[j] for j in range(K)], axis=1).astype(base.dtype)
        else:  # X~^T (sqrt(w) m_j) = n_j (mu_j - mu)
            s = self.sqrt_weight[:, None] * self.mask
            self.delta = (np.asarray(base.rmatvec(s), dtype=np.float64)
                          / self.n_eff).astype(base.dtype)
        self.delta_t = np.ascontiguousarray(self.delta.T)  # a row per fold
        # (rotated) the fold of row c of the training residuals on fold h's held-out rows
        self._rotated_fold = (np.arange(K - 1)[:, None] + 1 + np.arange(K)[None, :]) % K
        self._plan = None  # the dense pass's buffers and panels (_pass_plan)
        self._point = None  # the points' rows of its buffer (point_buffer)
        self._run = None  # the pass's threads inside workers()
        #: the products of the sparse form (two products, no panels or buffers):
        #: a working set's prefix (:meth:`features`)
        self.plain = False
        #: the working set's column norms on each fold's training rows, once computed
        self.screening_norms = None

    @property
    def n_folds(self):
        return self.mask.shape[1]

    def columns(self, keep):
        """The block of the columns ``keep`` (a slice) of a ``"folds"``
        layout: the same ``X~``, each kept column's mask, weights and
        offset as here (not computed again), its own pass buffers."""
        if self.partition is not None:
            raise ValueError("A rotated block keeps all its folds.")
        sub = copy.copy(self)
        for name in ("mask", "fold_weight", "delta"):
            setattr(sub, name, getattr(self, name)[:, keep])
        sub.mask_t, sub.delta_t = (np.ascontiguousarray(getattr(self, name)[keep])
                                   for name in ("mask_t", "delta_t"))
        sub.n_eff = self.n_eff[keep]
        sub.screening_norms = None
        sub.fold_of = np.repeat(np.arange(sub.n_folds)[:, None], self.n_samples, axis=1)
        sub.release_buffers()
        return sub

    def release_buffers(self):
        """Forget the pass's buffers (:meth:`point_buffer`), built again by
        the next pass for the columns the block has then."""
        self._plan = self._point = self._run = None

    def by_fold(self, A):
        """A row-wise quantity of shape (n_folds, n_samples) in the ``"folds"``
        layout (row ``j`` is fold ``j``)."""
        if self.partition is None:
            return A
        out = np.empty_like(A)
        np.put_along_axis(out, self.fold_of, A, axis=0)
        return out

    def center_y(self, y):
        """``(y_offset, Y~)``: the folds' training means (shape (n_folds,)) and
        ``sqrt(w) (y - y_offset_j)`` on every row, held transposed (shape
        (n_folds, n_samples), in the block's layout)."""
        y = np.asarray(y, dtype=np.float64)
        if self.fit_intercept:
            offset = (self.fold_weight.T @ y) / self.n_eff
        else:
            offset = np.zeros(self.n_folds)
        Y = self.sqrt_weight[None, :] * (y[None, :] - offset[self.fold_of])
        return offset, np.ascontiguousarray(Y, dtype=self.dtype)

    def target(self, Y, V):
        """``Y~_j + sqrt(w) (mu_j - mu)^T v_j`` on every row (shape (n_folds,
        n_samples), in the layout): fold ``j``'s residual at ``v_j`` is
        ``target_j - X~ v_j`` (as ``X~_j v_j = X~ v_j - sqrt(w) (mu_j -
        mu)^T v_j``)."""
        if not self.fit_intercept:
            return Y
        # delta_j^T v_j: a contiguous sum when V is held a fold per row
        shift = (np.matmul(self.delta_t[:, None, :], V.T[:, :, None])[:, 0, 0]
                 if V.flags.f_contiguous
                 else np.einsum("pk,pk->k", self.delta, V)).astype(Y.dtype)
        shift = shift[:, None] if self.partition is None else shift[self.fold_of]
        if self.base.weight is not None:
            shift = shift * self.sqrt_weight[None, :]
        return Y + shift

    def fitted_and_gradient(self, V, target, held_out=True):
        """``(P, Z, rss)`` in one pass over ``X``: ``P = (X~ V)^T`` (shape
        (n_folds, n_samples) in the layout), column ``j`` of ``Z`` is
        ``X~_j^T m_j (target_j - P_j)``, ``rss`` the training residual sum
        of squares of all folds (in the block's precision). With
        ``held_out=False`` the rotated layout leaves the held-out rows'
        fitted values out and a dense ``X`` gives no ``P`` (``None``)."""
        if self.sparse or self.plain:
            P = np.ascontiguousarray(np.asarray(self.base.matvec(V)).T)
            R = (target - P) * self.mask_t
            Z = self._less_offsets(np.asarray(self.base.rmatvec(R.T)), R, self.delta)
        else:  # (the intercept's correction inside the pass's sums)
            P, Z, R = self._dense_pass(V, target, held_out)
        self.residuals = R
        return P, Z, float(np.vdot(R, R))

    def features(self, X, delta, x_offset, width):
        """The block on the first ``width`` columns of a permutation of
        ``X~``'s (``X``, with its ``delta`` and ``x_offset`` rows in the same
        order): the same folds, weights and response, its own pass buffers
        (the working sets of :mod:`~skacv.model_selection._fold_screening`;
        the points' other coordinates are zero), :attr:`plain`: a prefix
        that changes from step to step prepares no pass."""
        sub = copy.copy(self)
        base = self.base
        sub.base = type(base).centred(X[:, :width], x_offset[:width], base.weight,
                                      self.fit_intercept, base.policies)
        sub.n_features = width
        sub.delta = delta[:width]
        sub.delta_t = np.ascontiguousarray(sub.delta.T)
        sub.plain = True
        sub.release_buffers()
        return sub

    def feature_gradients(self, residuals, X, delta):
        """Column ``j`` of the gradient (as the pass's ``Z``) of the
        features whose ``X~`` columns are ``X`` (shape (n_samples, m)) and
        offsets ``delta`` (shape (m, n_folds)), from the pass's masked
        training ``residuals`` (:attr:`residuals`, shape (n_folds,
        n_samples), ``"folds"`` layout): shape (m, n_folds), C-ordered as
        ``delta`` (the offsets' correction then runs along its rows)."""
        return self._less_offsets(np.matmul(X.T, residuals.T), residuals, delta)

    def _less_offsets(self, Z, R, delta):
        """``Z`` (products ``X~^T R^T`` of columns of ``X~`` with offsets
        ``delta``) as fold ``j``'s ``X~_j = X~ - sqrt(w) delta_j^T`` gives
        them: less ``delta_j`` times each fold's ``sum sqrt(w) r`` (with an
        intercept; in place)."""
        if self.fit_intercept:
            Z -= delta * (R @ self.sqrt_weight).astype(Z.dtype)[None, :]
        return Z

    def workers(self):
        """Keep the threads of the passes (:func:`~skacv.utils._parallel.kept_workers`)
        for every pass inside the block (a pass outside one starts its own)."""
        return kept_workers(self, self.policy.pass_groups)

    def _dense_pass(self, V, target, held_out=True):
        """The pass of :meth:`fitted_and_gradient` on a dense ``X`` by panels
        of rows (:meth:`_pass_plan`) in groups, each summing its own
        gradient (added in order). A panel forms ``R = target - Xa V`` (a
        row per sample) and adds ``R^T Xa`` to the gradient; rotated, fold
        ``j``'s held-out rows take the columns ``j + 1, ..., j + K`` (mod K)
        and the gradient rows sum in a ``(2K - 2, p)`` block whose row ``c``
        is fold ``(c + 1) mod K``. Returns ``(P, Z, R)``: the fitted values
        (``None`` unless ``held_out``),
        the gradient (less ``delta_j`` times each fold's ``sum sqrt(w) r``)
        and the training residuals (a view; rotated, shape (K - 1,
        n_samples))."""
        K = self.n_folds
        if self._plan is None:
            self.point_buffer()
        Vt, R, T, masked, passes = self._plan
        rotated = self.partition is not None
        # the panels' columns: all K, or (rotated, no held-out values) its K - 1 training folds
        part = 0 if held_out or not rotated else 1
        sums, groups = passes[part]
        if V is not self._point or V.base is not Vt:  # (else written in place: point_buffer)
            np.copyto(Vt[:K], V.T)
        if rotated:  # fold j's columns j + 1, ..., j + K (mod K): rows j + 1 .. of V^T twice
            np.copyto(Vt[K:], Vt[:K])
        width = R[part].shape[1]
        prepared = groups[0][3] is not None
        # the prepared products form target - Xa V in a copy of the target
        np.copyto(R[part] if prepared else T[part], target[:width].T)
        if len(groups) == 1 and self._run is not None:  # inside workers(): BLAS on one thread
            _pass_group(*groups[0])
        else:
            with self.workers() as run:
                run(_pass_group, groups)
        total = _sum_in_order(sums)
        Rt = (R[part][:, :K - 1] if rotated else masked).T  # the training residuals
        s = None
        if self.fit_intercept:  # each fold's sum of sqrt(w) r over its training rows
            RW = Rt if self.base.weight is None else Rt * self.sqrt_weight[None, :]
            if self.partition is not None and self._no_empty_fold:
                # rotated: by held-out fold, row c of fold h is fold (h + 1 + c) mod K
                M = np.add.reduceat(RW.T, self._fold_starts, axis=0, dtype=np.float64)
                s = np.bincount(self._rotated_fold.ravel(), weights=M.T.ravel(), minlength=K)
            else:
                s = np.bincount(self.fold_of[:Rt.shape[0]].ravel(),
                                weights=RW.astype(np.float64).ravel(), minlength=K)
        # X~_j = X~ - sqrt(w) delta_j^T: the gradients less delta_j s_j, a row per fold
        shift = None if s is None else self.delta_t * s.astype(self.dtype)[:, None]
        if self.partition is None:  # a new array, a fold per row as the iterates
            Z = (total.copy() if shift is None else np.subtract(total, shift)).T
        else:  # row c of the sum belongs to fold (c + 1) mod K; Z^T built by rows
            Zt = np.empty((K, total.shape[1]), dtype=self.dtype)
            # fold j < K - 1 sums 0 + total[K - 1] (j = 0) or total[j - 1] + total[K - 1 + j]
            np.add(total[K - 1], self.dtype.type(0), out=Zt[0])
            np.add(total[:K - 2], total[K:], out=Zt[1:K - 1])
            Zt[K - 1] = total[K - 2]
            if shift is not None:
                Zt -= shift
            Z = Zt.T
        if not held_out:
            return None, Z, Rt
        P = np.empty((K, self.n_samples), dtype=self.dtype)  # (C order, as the target)
        return np.subtract(target, R[part].T, out=P), Z, Rt

    def point_buffer(self):
        """Where the dense pass reads its points ``V`` (shape (n_features,
        n_folds)): a ``V`` written there and passed as this very array is not
        copied (overwritten by the next pass at another ``V``); ``None``
        for a sparse ``X``."""
        if self.sparse or self.plain:
            return None
        if self._plan is None:
            self._plan = self._pass_plan()
            self._point = self._plan[0][:self.n_folds].T
        return self._point

    def _pass_plan(self):
        """Buffers of :meth:`_dense_pass`: ``V^T`` (rotated: twice over, so
        that a fold's columns are a contiguous block), the residuals and
        targets a row per sample (K columns; rotated, also K - 1), the
        masked residuals (``"folds"``) and, per choice of columns, ``(sums,
        groups)``: each group's gradient sum, scratch gradient, the views
        of its panels (:func:`fold_panel_rows`) and their prepared calls."""
        X, K, dt = self.base.X, self.n_folds, self.dtype
        n, p = X.shape
        rotated = self.partition is not None
        Vt = np.empty((2 * K if rotated else K, p), dtype=dt)
        widths = (K, K - 1) if rotated else (K,)
        R = tuple(np.empty((n, c), dtype=dt) for c in widths)
        T = tuple(np.empty_like(r) for r in R)
        masked = None if rotated else np.empty((n, K), dtype=dt)  # masked residuals
        passes = []
        for part, width in enumerate(widths):
            rows = fold_panel_rows(p, self.policy, X.itemsize, width)
            # (first row, last row, fold whose held-out rows they are, gradient rows)
            if rotated:
                panels = [(r0, min(r0 + rows, b), j, slice(j, j + K - 1))
                          for j, (a, b) in enumerate(self.partition)
                          for r0 in range(a, b, rows)]
            else:
                panels = [(r0, min(r0 + rows, n), None, slice(0, K))
                          for r0 in range(0, n, rows)]
            n_groups = min(pass_groups(X.nbytes, self.policy), len(panels))
            bounds = np.linspace(0, len(panels), n_groups + 1).round().astype(int)
            sums, groups = [], []
            for g in range(n_groups):
                total = np.zeros((2 * K - 2 if rotated else K, p), dtype=dt)
                views = []
                for a, b, j, zrows in panels[bounds[g]:bounds[g + 1]]:
                    sl = slice(a, b)
                    Ra = R[part][sl]
                    if rotated:  # the gradient reads the training columns
                        Bt, Ma, Gt = Vt[j + 1:j + 1 + width].T, None, Ra[:, :K - 1].T
                    else:
                        Bt, Ma, Gt = Vt.T, self.mask[sl], masked[sl].T
                    views.append((Bt, X[sl], Ra, T[part][sl], Ma, Gt, total[zrows]))
                sums.append(total)
                limit = self.policy.prepared_groups
                prepare = self.policy.prepared_products and (limit is None or g < limit)
                groups.append((views, total, np.empty((K - 1 if rotated else K, p), dtype=dt),
                               _prepared_calls(views, self.policy.prepared_blas)
                               if prepare else None))
            if any(g[3] is None for g in groups):  # all groups prepared, or none
                groups = [g[:3] + (None,) for g in groups]
            passes.append((sums, groups))
        return Vt, R, T, masked, passes

    def normal_product(self, V, Y):
        """``(Z, rss)``: column ``j`` of ``Z`` is ``X~_j^T m_j (Y_j - X~_j v_j)``
        (``Y`` as :meth:`center_y` gives it), ``rss`` the training residual
        sum of squares of all folds (:meth:`fitted_and_gradient`; the
        held-out rows' fitted values are not computed)."""
        _, Z, rss = self.fitted_and_gradient(V, self.target(Y, V), held_out=False)
        return Z, rss


class FoldCovariance:
    """The products of :class:`FoldDesigns` in the covariance form (few
    features, many samples; scikit-learn's ``precompute``). With ``C_j =
    X~_j^T M_j X~_j`` (p x p: all rows' Gram matrix minus the held-out
    rows' and the centring's) and ``c_j = X~^T (m_j Y~_j)``, fold ``j``'s
    gradient at ``v_j`` is ``c_j - C_j v_j`` and its training residual sum
    of squares ``Y~_j^T M_j Y~_j - 2 v_j^T c_j + v_j^T C_j v_j``. No fitted
    values: the held-out errors come from the stored iterates. Folds that
    partition the rows only.

    Parameters
    ----------
    designs : FoldDesigns
    response : ndarray of shape (n_folds, n_samples)
        :meth:`FoldDesigns.center_y`'s, in the block's layout.
    partition : list of slice
        Fold ``j``'s held-out rows (its training rows are all the others).
    """

    #: the pass gives no fitted values (see :func:`~skacv.iterations._path.run_normal_block`)
    computes_fitted = False

    def __init__(self, designs, response, partition):
        taken("fold_covariance")
        self.designs = designs
        self.policy, self.statistics = designs.policy, designs.statistics
        self.dtype, self.n_eff, self.n_folds = designs.dtype, designs.n_eff, designs.n_folds
        self.n_samples, self.n_features = designs.n_samples, designs.n_features
        A, K, dt = designs.base.X, designs.n_folds, designs.dtype
        # the held-out rows' Gram matrices; their sum is all rows'
        self.C = np.empty((K, A.shape[1], A.shape[1]), dtype=dt)
        for j, rows in enumerate(partition):
            Ao = A[rows]
            np.matmul(Ao.T, Ao, out=self.C[j])
        S = _sum_in_order([self.C[0].copy(), *self.C[1:]])
        for j in range(K):
            np.subtract(S, self.C[j], out=self.C[j])
            if designs.fit_intercept:  # X~_j = X~ - sqrt(w) delta_j^T on the training rows
                delta = designs.delta[:, j]
                self.C[j] -= (designs.n_eff[j] * np.outer(delta, delta)).astype(dt)
        self.c, self.yy = self._linear_terms(response)

    def point_buffer(self):
        """``None``: the Gram matrices' products read the points where they are."""
        return None

    def workers(self):
        """The threads of the block's passes (:meth:`FoldDesigns.workers`)."""
        return self.designs.workers()

    def _linear_terms(self, Y):
        """``(c, yy)``: ``c_j = X~^T (m_j Y_j)`` (shape (n_features, n_folds))
        and ``Y_j^T M_j Y_j``, for ``Y`` in the block's layout."""
        d = self.designs
        MY = d.mask.T * d.by_fold(Y)
        c = np.asarray(d.base.X.T @ MY.T, dtype=d.dtype)
        return c, np.einsum("kn,kn->k", MY, MY, dtype=np.float64)

    def target(self, Y, V):
        return Y  # not read: the linear terms of the response are in c

    def fitted_and_gradient(self, V, target, held_out=True):
        """``(None, Z, rss)`` as :meth:`FoldDesigns.fitted_and_gradient`
        gives ``Z`` and ``rss``, for the block's response."""
        return (None, *self._normal(V, self.c, self.yy))

    def normal_product(self, V, Y):
        """:meth:`FoldDesigns.normal_product`, any response ``Y``."""
        if not np.any(Y):  # the Lanczos processes of the step sizes
            return self._normal(V, np.zeros_like(self.c), np.zeros(self.n_folds))
        return self._normal(V, *self._linear_terms(Y))

    def _normal(self, V, c, yy):
        CV = np.matmul(self.C, np.ascontiguousarray(V.T)[:, :, None])[:, :, 0].T
        Z = c - CV
        # rounding can make the sum of squares of an exact fit negative
        rss = float(yy.sum() - 2.0 * np.vdot(V, c) + np.vdot(V, CV))
        return Z, max(rss, 0.0)
