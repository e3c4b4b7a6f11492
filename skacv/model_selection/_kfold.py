"""K-fold CV along the path with every fold in one block.

:class:`StackedFolds` advances the K fold paths on the stacked designs of
:mod:`skacv.model_selection._fold_designs` (docs/architecture.rst), each
fold with the step size its own fit would use: a fold path is that of
``clone(estimator).fit(X[train], y[train])`` up to the rounding of the
block's precision (:func:`kfold_dtype`) and of the folds' top eigenvalues
(the statistical policy's ``lipschitz_tol``).
"""

import copy

import numpy as np
import scipy.sparse as sp
from sklearn.utils import _safe_indexing

from .._config import check_memory
from .._trace import taken
from ..iterations._iterations import PreconditionedGD
from ..iterations._path import init_state, run_normal_block
from ..linalg._copies import gather
from ..linalg._design import Design
from ..linalg._linalg import lanczos_top_eigenvalues, top_eigenvalue
from ..utils._compat import _num_features, _num_samples
from ..utils._parallel import cache_bytes
from ..utils._validation import single_precision_holds
from ._fold_designs import FoldCovariance, FoldDesigns, fold_covariance_pays, pass_groups
from ._fold_screening import ScreenedFolds, screens, worth_screening


def stacked_iteration(iterations, dtype, n_rows=None):
    """One iteration advancing a block of columns, column ``j`` as
    ``iterations[j]`` would (its step size and penalty strengths), or
    ``None`` when they differ in anything a block cannot express (class,
    momentum, extrapolation, schedule) or precondition or sample batches.
    With ``n_rows`` (every coordinate penalised) the penalty strengths that
    differ are tiled (:func:`_tiled`): the prox's ``minimum`` and ``maximum``
    are faster on equal strides than on the broadcast of a row. The step
    sizes stay a read-only row: products by the broadcast of a row are the
    faster (and the prox tiles its threshold, :meth:`Penalty.prox`)."""
    first = iterations[0]
    if first.sampler is not None or isinstance(first, PreconditionedGD):
        return None
    for it in iterations[1:]:
        if (type(it) is not type(first) or type(it.penalty) is not type(first.penalty)
                or it.penalty.n_unpenalized != first.penalty.n_unpenalized
                or getattr(it, "momentum", None) != getattr(first, "momentum", None)
                or getattr(it, "extrapolation", None) != getattr(first, "extrapolation", None)
                or not _same_schedule(it.schedule, first.schedule)):
            return None
    l1 = np.array([it.penalty.l1_ for it in iterations])
    l2 = np.array([it.penalty.l2_ for it in iterations])
    if np.any(l1 == 0) and np.any(l1 != 0):
        return None  # smooth for some folds only
    stacked = copy.copy(first)
    stacked.step_size = np.array([it.step_size for it in iterations], dtype=dtype)
    penalty = copy.copy(first.penalty)  # strengths per column where they differ
    penalty.l1_ = l1[0] if np.all(l1 == l1[0]) else l1
    penalty.l2_ = l2[0] if np.all(l2 == l2[0]) else l2
    if n_rows is not None and not penalty.n_unpenalized:
        stacked.step_size.flags.writeable = False
        penalty.l1_, penalty.l2_ = (v if np.ndim(v) == 0 else _tiled(v, n_rows)
                                    for v in (penalty.l1_, penalty.l2_))
    stacked.penalty = penalty
    return stacked


def _tiled(row, n_rows):
    """``row`` repeated on ``n_rows`` rows in the iterates' Fortran layout,
    read-only (the same array at every step)."""
    tiled = np.ascontiguousarray(np.broadcast_to(row[:, None], (row.shape[0], n_rows))).T
    tiled.flags.writeable = False
    return tiled


class _FoldView:
    """What a fold's set-up reads of its design (``n_eff`` for sum-form
    penalties, the sizes, :meth:`lipschitz`) without a copy of its rows."""

    def __init__(self, n_samples, n_features, n_eff, lipschitz):
        self.n_samples, self.n_features, self.n_eff = n_samples, n_features, n_eff
        self._lipschitz = lipschitz

    def lipschitz(self):
        return self._lipschitz


def fold_lipschitz(designs):
    """Largest eigenvalue of every fold's ``X~_j^T X~_j / n_j``, shape
    (n_folds,), as the fold's own :meth:`~skacv.linalg._design.Design.lipschitz`
    gives it: one Lanczos process per fold run as a block on the stacked
    products (a zero response: one pass over ``X`` a step for all folds),
    each stopped and inflated by ``1 + tol`` as the folds' own fits
    (:func:`~skacv.linalg._linalg.lanczos_top_eigenvalues`); ``nan`` for a
    fold not converged."""
    tol = designs.statistics.lipschitz_tol
    n, p, K = designs.n_samples, designs.n_features, designs.n_folds
    dt = designs.dtype
    zero = np.zeros((K, n), dtype=dt)

    def op(Q):
        Z, _ = designs.normal_product(np.ascontiguousarray(Q, dtype=dt), zero)
        return -np.asarray(Z, dtype=np.float64) / designs.n_eff
    W0 = np.random.RandomState(0).standard_normal((p, K))
    # no cap on the basis: its 128 steps of p x K are small beside the block's X
    with designs.workers():
        return lanczos_top_eigenvalues(op, W0, tol, np.inf) * (1.0 + tol)


def small_fold_lipschitz(designs, gram=None):
    """Every fold's exact :meth:`~skacv.linalg._design.Design.lipschitz`
    (shape (n_folds,), LAPACK) from one Gram matrix of the block's ``X~``:
    all rows' minus the held-out rows' (features' side) or the training
    block (samples' side), less the fold's own centring (``delta``); or
    from the covariance form's Gram matrices ``gram`` (shape (n_folds,
    n_features, n_features)). ``None`` for a sparse ``X``."""
    if designs.sparse:
        return None
    if gram is not None:
        return np.array([top_eigenvalue(np.asarray(gram[j], dtype=np.float64),
                                        policy=designs.policy) / float(n_j)
                         for j, n_j in enumerate(designs.n_eff)])
    A = designs.base.X
    n, p = A.shape
    train = designs.mask.astype(bool)
    sw = designs.sqrt_weight.astype(np.float64)
    features = p <= n  # the Gram matrix of the smaller side
    whole = np.asarray(A.T @ A if features else A @ A.T, dtype=np.float64)
    out = np.empty(designs.n_folds)
    for j in range(designs.n_folds):
        n_j = float(designs.n_eff[j])
        if features:
            Ao = A[~train[:, j]]
            G = whole - Ao.T @ Ao
            if designs.fit_intercept:  # sum over training rows of w (x - mu_j)(x - mu_j)^T
                delta = designs.delta[:, j].astype(np.float64)
                G -= n_j * np.outer(delta, delta)
        else:
            tr = np.flatnonzero(train[:, j])
            G = whole[np.ix_(tr, tr)]
            if designs.fit_intercept:  # (a_i - s_i delta) . (a_k - s_k delta)
                delta = designs.delta[:, j]
                u, s = np.asarray(A[tr] @ delta, dtype=np.float64), sw[tr]
                G = G - np.outer(u, s) - np.outer(s, u) + float(delta @ delta) * np.outer(s, s)
        out[j] = top_eigenvalue(G, policy=designs.policy) / n_j
    return out


def fold_views(designs, products, X, sample_weight, splits, fit_intercept):
    """:class:`_FoldView` of every fold, their top eigenvalues by LAPACK
    where their own designs' would be (smaller side at most the policy's
    ``dense_eig_size``: :func:`small_fold_lipschitz`), else by
    :func:`fold_lipschitz` on ``products`` (``designs`` or its
    :class:`FoldCovariance`); a fold left without one gets its own design's
    (a copy of its rows)."""
    largest = max(len(tr) for tr, _ in splits)
    if min(largest, designs.n_features) <= designs.policy.dense_eig_size:
        lips = small_fold_lipschitz(
            designs, products.C if isinstance(products, FoldCovariance) else None)
    else:
        lips = fold_lipschitz(products)
    if lips is None:
        lips = np.full(len(splits), np.nan)
    views = []
    for j, (tr, _) in enumerate(splits):
        lip = lips[j]
        if not np.isfinite(lip):
            w_tr = None if sample_weight is None else sample_weight[tr]
            lip = Design(_safe_indexing(X, tr), w_tr, fit_intercept,
                         policies=designs.base.policies).lipschitz()
        views.append(_FoldView(len(tr), designs.n_features, float(designs.n_eff[j]), lip))
    return views


def _same_weights(design_weight, sample_weight):
    """Whether a design's weights (in its precision) are ``sample_weight``."""
    if design_weight is None or sample_weight is None:
        return design_weight is None and sample_weight is None
    return np.array_equal(design_weight,
                          np.asarray(sample_weight).astype(design_weight.dtype))


def _same_schedule(a, b):
    if a is None or b is None or callable(a) or callable(b):
        return a is b
    return np.array_equal(np.asarray(a), np.asarray(b))


class StackedFolds:
    """The K fold paths of an estimator, advanced together.

    Parameters
    ----------
    estimator : trajectory estimator
        Unfitted parameters (estimates are not computed for the folds).
    X : array-like or sparse matrix of shape (n_samples, n_features)
        Validated by the full fit.
    y : ndarray of shape (n_samples,)
    sample_weight : ndarray of shape (n_samples,) or None
    splits : list of (train, test) index arrays
    dtype : numpy dtype
        Precision of the block.
    policies : (SpeedPolicy, StatisticalPolicy)
    full_design : Design, default=None
        The full-data fit's design (centred, weighted ``X~``): the block's
        copy is gathered from it when the folds partition the rows.
    horizon : int, default=0
        The length a staged path may reach: the covariance form is weighed
        against ``max(estimator.max_iter, horizon)`` steps.
    estimators : list of estimators, default=None
        One group of K columns per estimator (the same solver, other
        penalties: a grid's alphas), column ``a K + j`` fold ``j`` of
        ``estimators[a]``, in the ``"folds"`` layout without the covariance
        form; ``None``: ``[estimator]``.

    Attributes
    ----------
    designs : FoldDesigns
        The block's columns (every group's folds).
    products : FoldDesigns or FoldCovariance
        What the block's steps multiply by (:func:`fold_covariance_pays`).
    step_sizes : ndarray of shape (n_columns,)
    losses : ndarray of shape (n_iter + 1, n_columns)
        Held-out squared errors (weighted sums) of every iterate of every
        column (``n_columns``: ``n_folds`` times the groups).
    test_weight : float
        Total weight of the held-out rows.
    """

    def __init__(self, estimator, X, y, sample_weight, splits, dtype, policies, full_design=None,
                 horizon=0, estimators=None):
        taken("stacked_folds", full_design=full_design)
        groups = [estimator] if estimators is None else list(estimators)
        n = X.shape[0]
        train = np.zeros((n, len(splits)), dtype=bool)
        test = np.zeros_like(train)
        for j, (tr, te) in enumerate(splits):
            train[tr, j] = True
            test[te, j] = True
        w = sample_weight
        policy = policies[0]
        # rows ordered by held-out fold when the folds partition a dense X:
        # a fold's test rows are then a slice of the block's copy
        order = _fold_order(X, test)
        if order is not None:
            train, test = train[order], test[order]
            y = np.asarray(y)[order]
            w = None if w is None else w[order]
            full = full_design
            if (type(full) is Design and not full.sparse and full.X.shape == X.shape
                    and full.fit_intercept == estimator.fit_intercept
                    and _same_weights(full.weight, sample_weight)):
                # the rows of the full fit's X~: no pass to centre the copy
                base = Design.centred(gather(full.X, dtype, policy, rows=order), full.x_offset,
                                      w, estimator.fit_intercept, policies)
            else:
                base = Design(gather(X, dtype, policy, rows=order), w, estimator.fit_intercept,
                              copy=False, policies=policies)
            bounds = np.concatenate([[0], np.cumsum(test.sum(axis=0))])
            self.tests = [slice(int(bounds[j]), int(bounds[j + 1])) for j in range(len(splits))]
        else:
            base = Design(X.astype(dtype) if X.dtype != dtype else X, w, estimator.fit_intercept,
                          policies=policies)
            self.tests = [np.flatnonzero(test[:, j]) for j in range(len(splits))]
        # a partition whose folds train on every other row: the rotated layout
        partition = (self.tests if order is not None and np.array_equal(train, ~test)
                     and len(groups) == 1 else None)
        self.designs = FoldDesigns(base, train, partition)
        self.offset, self.response = self.designs.center_y(y)
        if partition is not None and fold_covariance_pays(
                base.n_samples, base.n_features, len(splits),
                max(estimator.max_iter, horizon), policy,
                base.X.dtype.itemsize):
            self.products = FoldCovariance(self.designs, self.response, partition)
        else:
            self.products = self.designs
        views = fold_views(self.designs, self.products, X, sample_weight, splits,
                           estimator.fit_intercept)
        iterations = []
        for est in groups:
            for j, view in enumerate(views):  # (each group's parameters validated once)
                datafit, penalty = est.path_problem(view, validate=j == 0)
                iterations.append(est.path_iteration(view, datafit, penalty))
        self.test_weight = float(test.sum() if w is None else (w @ test).sum())
        if len(groups) > 1:  # every group's folds, column a K + j fold j
            self.designs = self.products = FoldDesigns(base, np.tile(train, (1, len(groups))))
            self.offset, self.response = self.designs.center_y(y)
            test = np.tile(test, (1, len(groups)))
        self.step_sizes = np.array([it.step_size for it in iterations])
        self._iterations = iterations
        self.live = 0  # the first column advanced (retire)
        self.iteration = stacked_iteration(iterations, dtype, self.designs.n_features)
        if self.iteration is None:
            raise TypeError(f"The folds of {type(estimator).__name__} cannot run as one block "
                            "(see skacv.model_selection._kfold.can_stack).")
        # (n_columns, n_samples) in the layout: a held-out row's residual is
        # sqrt(w_i) (y_i - prediction), its square the weighted error
        self.test_t = np.take_along_axis(test.T, self.designs.fold_of, axis=0).astype(dtype)
        # the iterates a fold per row of memory (Fortran order), as the pass's V^T
        self.state = init_state(self.products, n_columns=self.designs.n_folds, order="F")
        # x^0 = 0: the residual is the response on every row
        self.losses = self._held_out_errors(self.state.x, np.zeros_like(self.response))[None]
        self.verbose = estimator.verbose
        self._screen = None  # the working set's steps (advance)
        # the steps over all the features before a working set (the first ones
        # take in most features at a small alpha), and the step it may start at
        self._screen_wait = self.designs.policy.screening_retry_steps
        self._screen_after = self._screen_wait
        self._folds = None  # (a rotated block) its "folds" layout (_folds_layout)

    def advance(self, n_iter):
        """Continue every fold path to ``n_iter`` steps (if shorter); return
        :attr:`losses` of iterates ``0..n_iter``. Where a pass gives no
        held-out fitted values (an extrapolated step, the covariance form)
        the iterates are kept, by chunks of the speed policy's
        ``fold_paths_chunk_bytes`` a group, for :meth:`_held_out_errors_of`."""
        screened = screens(self.designs, self.products, self._iterations[self.live:])
        while self.state.k < n_iter:
            k0 = self.state.k
            if (self._screen is None and screened and k0 >= self._screen_after
                    and worth_screening(self.state, self.designs.policy)):
                columns = self._iterations[self.live:]
                stacked = stacked_iteration(columns, self.designs.dtype)
                stacked.step_size.flags.writeable = False  # (the prox holds its threshold)
                folds, response, test_t = self._folds_layout()
                self._screen = ScreenedFolds(
                    folds, response, columns, stacked, self.state,
                    lambda P, target, test_t=test_t: _folds_errors(P, target, test_t),
                    self.verbose)
            if self._screen is None:
                self._advance_all(n_iter, screened)
                continue
            new = np.full((n_iter - k0, self.designs.n_folds), np.nan)
            with self.designs.workers():
                done = self._screen.advance(n_iter - k0, new)
            self.state.k = k0 + done
            self._append_losses(k0, new[:done])
            if self.state.k < n_iter:  # on over all the features, for twice as long as last time
                taken("fold_screening_left", step=self.state.k)
                self.state = self._screen.full_state()
                self._screen = None
                self._screen_wait *= 2
                self._screen_after = self.state.k + self._screen_wait
        return self.losses[: n_iter + 1]

    def _folds_layout(self):
        """``(designs, response, test_t)`` of the block in the ``"folds"``
        layout, the working set's (a rotated block's: the same folds on the
        same copy of ``X~``, formed once)."""
        d = self.designs
        if d.layout == "folds":
            return d, self.response, self.test_t
        if self._folds is None:
            self._folds = (FoldDesigns(d.base, d.mask.astype(bool)),
                           np.ascontiguousarray(d.by_fold(self.response)),
                           np.ascontiguousarray(d.by_fold(self.test_t)))
        return self._folds

    def _advance_all(self, n_iter, screened=False):
        """Continue the paths over all the features towards ``n_iter`` steps:
        all the way, or (``screened``: the block may take a working set) to
        the end of the first chunk of steps after which the working set
        pays (:func:`~._fold_screening.worth_screening`), past the speed
        policy's ``screening_retry_steps`` from the start and twice as many
        after each hand-back."""
        k0 = self.state.k
        if n_iter > k0:
            d, it = self.products, self.iteration
            new = np.full((n_iter - k0, d.n_folds), np.nan)
            fitted = d.computes_fitted
            keep = not fitted or any(it.beta(k) != 0.0 for k in range(k0 + 1, n_iter + 1))
            step_bytes = d.n_features * d.n_folds * d.dtype.itemsize
            # (each group the chunk of steps of a block of its own)
            groups = d.n_folds // len(self.tests)  # (live)
            chunk = (max(1, min(n_iter - k0, self.designs.policy.fold_paths_chunk_bytes
                                * groups // step_bytes)) if keep else n_iter - k0)
            paths = None
            if keep:
                check_memory(step_bytes * chunk,
                             f"the fold paths ({d.n_features} x {d.n_folds} x {chunk})",
                             "Use fewer folds. ")
                # a fold per row (as the iterates): read in place by _held_out_errors_of
                paths = np.empty((chunk, d.n_folds, d.n_features),
                                 dtype=d.dtype).transpose(0, 2, 1)
            done = 0
            with d.workers():
                while done < n_iter - k0:
                    m = min(chunk, n_iter - k0 - done)
                    if screened:  # (looked at every screening_retry_steps, from _screen_after)
                        m = min(m, max(self._screen_after - self.state.k,
                                       self.designs.policy.screening_retry_steps))

                    def on_fitted(i, x, P, target, at=done):  # no extrapolation: X~ x^k is known
                        new[at + i] = self._held_out_errors(x, P, target)

                    run_normal_block(d, self.response, it, m, self.state,
                                     None if paths is None else paths[:m], verbose=self.verbose,
                                     on_fitted=on_fitted if fitted else None)
                    if paths is not None:
                        part = new[done:done + m]
                        missing = np.flatnonzero(np.isnan(part[:, 0]))
                        if missing.size:  # a run of steps is read as a view
                            run = missing[-1] - missing[0] + 1 == missing.size
                            part[missing] = self._held_out_errors_of(
                                paths[missing[0]:missing[-1] + 1] if run else paths[missing])
                    done += m
                    if (screened and self.state.k >= self._screen_after
                            and worth_screening(self.state, self.designs.policy)):
                        break
            self._append_losses(k0, new[:done])

    def _append_losses(self, k0, new):
        if self.live:  # (retired columns: no errors past their paths' ends)
            new = np.concatenate([np.full((new.shape[0], self.live), np.nan), new], axis=1)
        self.losses = np.concatenate([self.losses[: k0 + 1], new])

    def retire(self, stop):
        """Advance only the columns from ``stop`` on (a multiple of the
        folds): a block of several grid points whose first groups' paths have
        ended goes on without them (the speed policy's ``retire_grid_groups``).
        Their :attr:`losses` stay those of the iterates computed so far (NaN
        past them); the others continue where they are, each as in a block of
        the groups left (their own rounding: the products of a narrower
        block)."""
        total = self.losses.shape[1]
        K = len(self.tests)
        if (not self.designs.policy.retire_grid_groups or stop <= self.live or stop % K
                or stop >= total or self.designs.layout != "folds"
                or self.products is not self.designs):
            return
        taken("retire_grid_groups", retired=(stop - self.live) // K, left=(total - stop) // K)
        if self._screen is not None:  # the working set's state over all features
            self.state = self._screen.full_state()
            self._screen = None
        keep = slice(stop - self.live, None)
        self.designs = self.products = self.designs.columns(keep)
        self.response = np.ascontiguousarray(self.response[keep])
        self.offset, self.test_t = self.offset[keep], np.ascontiguousarray(self.test_t[keep])
        self.iteration = stacked_iteration(self._iterations[stop:], self.designs.dtype,
                                           self.designs.n_features)
        s = self.state
        s.x, s.x_prev, s.v, s.Xx, s.Xx_prev, s.Xv = (
            np.asfortranarray(a[:, keep]) for a in (s.x, s.x_prev, s.v, s.Xx, s.Xx_prev, s.Xv))
        if s.z_next is not None:  # the next step's gradient, as computed
            s.z_next = np.asfortranarray(s.z_next[:, keep])
            # the divergence check reads the training residual again at the next pass
            s.rss_next = 0.0
        self.live = stop

    def _held_out_errors(self, x, P, target=None):
        """Weighted held-out squared errors (shape (n_folds,)) of the iterates
        ``x`` (shape (n_features, n_folds)) from the pass's fitted values ``P
        = (X~ x)^T`` (``target``: :meth:`FoldDesigns.target` at ``x``)."""
        d = self.designs
        if target is None:
            target = self.products.target(self.response, x)
        if d.layout == "rotated":  # the held-out fold is the last row
            h = (target[-1] - P[-1]).astype(np.float64)
            return np.bincount(d.fold_of[-1], weights=h * h, minlength=d.n_folds)
        return _folds_errors(P, target, self.test_t)

    def _held_out_errors_of(self, paths):
        """Weighted held-out squared errors (shape (n_new, n_columns)) of the
        iterates ``paths`` (shape (n_new, n_features, n_columns)): one block
        product per fold with its test rows (every group's column of the
        fold)."""
        d = self.designs
        response = d.by_fold(self.response)
        total = np.zeros((paths.shape[0], d.n_folds))
        K = len(self.tests)
        for j, rows in enumerate(self.tests):
            # (n_new * groups, n_features): a view, row s * groups + a
            Bt = paths[:, :, j::K].transpose(0, 2, 1).reshape(-1, paths.shape[1])
            if isinstance(rows, slice) and Bt.strides[1] == Bt.itemsize:
                B = Bt.T  # read in place
            else:
                B = np.ascontiguousarray(Bt).T
            if isinstance(rows, slice):  # rows ordered by fold: a view
                P = d.base.X[rows] @ B
            else:
                P = np.asarray(d.base.rows(rows).matvec(B))
            if d.fit_intercept:  # X~_j = X~ - sqrt(w) delta_j^T
                P -= d.sqrt_weight[rows, None] * (d.delta[:, j] @ B)[None, :]
            R = response[j, rows][:, None] - P
            total[:, j::K] = np.einsum("it,it->t", R, R, dtype=np.float64).reshape(
                paths.shape[0], -1)
        return total


def _folds_errors(P, target, test_t):
    """Weighted held-out squared errors (shape (n_folds,)) from fitted values
    ``P`` and ``target`` in the ``"folds"`` layout (``test_t``: one on each
    fold's held-out rows, times ``sqrt(w)`` in the response)."""
    R = target - P
    R *= test_t
    R *= R
    return np.add.reduce(R, axis=1, dtype=np.float64)


def fit_beside(X, policy, fold_dtype="auto"):
    """Whether the full-data fit on ``X`` runs its stages beside the stacked
    folds (:func:`~skacv.utils._parallel.overlapped`, one BLAS thread each):
    the speed ``policy``'s ``fit_beside`` where set, else when ``X`` is
    dense and larger than the last-level cache and the block's copy (in
    ``fold_dtype``) runs in one group of panels (:func:`pass_groups`)."""
    if policy.fit_beside is not None:
        return policy.fit_beside
    if sp.issparse(X):
        return False
    try:
        size = _num_samples(X) * _num_features(X)
    except (TypeError, ValueError):
        return False  # the full fit's checks say why
    # the full fit's X: float32 kept, anything else in float64
    dtype = np.dtype(np.float32 if getattr(X, "dtype", None) == np.float32 else np.float64)
    block = size * kfold_dtype(fold_dtype).itemsize
    return size * dtype.itemsize > cache_bytes(3, policy) and pass_groups(block, policy) == 1


def fold_steps(n_iter, ratios):
    """Steps the fold paths need to match iterate ``n_iter`` of the full
    path (:func:`aligned_errors`): ``ceil(n_iter * max(1, max(ratios)))``."""
    r = max(1.0, float(np.max(ratios))) if len(ratios) else 1.0
    return int(np.ceil(n_iter * r * (1.0 - 1e-12)))


def aligned_errors(curves, ratios, n_path, weight):
    """K-fold CV along the path (shape (n_path,)): the mean held-out error
    (over the held-out rows' total ``weight``) at each iterate ``t`` of the
    full path, from each fold's ``curves[j]`` (weighted sums, one per
    iterate; a path stopped early keeps its last value) read at the point
    ``t * ratios[j]`` (linear interpolation): ``step_full / step_j`` matches
    the same gradient-flow time ("time"), ``1`` the same index ("iteration").
    """
    t = np.arange(n_path, dtype=np.float64)
    total = np.zeros(n_path)
    for curve, r in zip(curves, ratios, strict=True):
        curve = np.asarray(curve, dtype=np.float64)
        total += np.interp(t * r, np.arange(curve.shape[0], dtype=np.float64), curve)
    return total / weight if weight > 0 else np.full(n_path, np.nan)


def _fold_order(X, test):
    """Rows ordered by held-out fold (stable), or ``None`` unless ``X`` is
    dense and every row is held out by exactly one fold."""
    if not isinstance(X, np.ndarray) or not np.all(test.sum(axis=1) == 1):
        return None
    return np.argsort(test.argmax(axis=1), kind="stable")


def can_stack(estimator):
    """Whether the folds of ``estimator`` can run as one block (full-batch
    least squares on the plain design)."""
    return bool(estimator.stacks_folds())


def kfold_dtype(fold_dtype="auto"):
    """Precision (numpy dtype) of the stacked folds for the ``fold_dtype``
    of :class:`~skacv.TrajectoryEarlyStoppingCV`: ``"auto"`` is float32,
    whose rounding (~1e-6 relative) is far below the sampling noise of a
    held-out error (a search resolves it on its data first:
    :func:`resolve_fold_dtype`)."""
    if fold_dtype not in ("auto", "float32", "float64"):
        raise ValueError(f"fold_dtype must be 'auto', 'float32' or 'float64'; got "
                         f"{fold_dtype!r}.")
    return np.dtype(np.float32 if fold_dtype == "auto" else fold_dtype)


def resolve_fold_dtype(fold_dtype, X, y, sample_weight, policy):
    """``fold_dtype`` for the data ``(X, y)``: ``"auto"`` is ``"float32"``
    where that precision holds them
    (:func:`~skacv.utils._validation.single_precision_holds`: a target in
    units of 1e20 overflows its sums of squares, one of 1e-20 sinks into its
    subnormals; the speed ``policy``'s range), else ``"float64"``; a float32
    ``X`` keeps float32 (its fit runs in it)."""
    if fold_dtype != "auto" or getattr(X, "dtype", None) == np.float32:
        return fold_dtype
    if single_precision_holds(X, y, sample_weight, policy):
        return "float32"
    taken("fold_dtype_float64")
    return "float64"
