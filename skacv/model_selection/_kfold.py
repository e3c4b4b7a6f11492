"""K-fold CV along the path with every fold in one block.

The K fold designs stacked as one block (and their covariance form) are
those of :mod:`skacv.model_selection._fold_designs`; this module advances
the K fold paths as one block (:class:`StackedFolds`, by
:func:`~skacv.iterations._path.run_normal_block` with the estimator's own
:class:`~skacv.Iteration`: step sizes and sum-form penalty strengths per
column) and aligns them with the full path. The held-out errors of an
iterate come from the fitted values the pass computes on every row when its
step does not extrapolate (ISTA, gradient descent: the pass is at the new
iterate), else from one block product per fold with its test rows at the
end of a stage.

Each fold's step size is the one its own fit would use (the estimator's
step rule, with the folds' top eigenvalues from one block of Lanczos
processes on the stacked products), so a stacked fold path is the path of
``clone(estimator).fit(X[train], y[train])`` up to the rounding of the block
products (and of that eigenvalue, within the statistical policy's
``lipschitz_tol``). The block runs in
the search's ``fold_dtype`` (:func:`kfold_dtype`): float32 by default, whose
rounding (~1e-6 relative) is far below the sampling noise of a held-out
error (~1/sqrt(n_test)).
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
from ._fold_designs import FoldCovariance, FoldDesigns, fold_covariance_pays, pass_groups


def stacked_iteration(iterations, dtype, n_rows=None):
    """One iteration advancing a block of columns, column ``j`` as
    ``iterations[j]`` would (its step size and penalty strengths), or
    ``None`` when they differ in anything a block cannot express (class,
    momentum, extrapolation, schedule) or precondition or sample batches.

    With ``n_rows`` (the block's coordinates, every one penalised), the
    per-column step sizes and strengths are held tiled, shape ``(n_rows,
    n_columns)`` in the layout of the block's iterates (a column per row of
    memory, Fortran order): the step's products with them are then
    elementwise on equal shapes and strides, the same values as the
    broadcast of a row of ``n_columns`` (whose inner loops run only
    ``n_columns`` long: several times slower)."""
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
        stacked.step_size = _tiled(stacked.step_size, n_rows)
        penalty.l1_, penalty.l2_ = (v if np.ndim(v) == 0 else _tiled(v, n_rows)
                                    for v in (penalty.l1_, penalty.l2_))
    stacked.penalty = penalty
    return stacked


def _tiled(row, n_rows):
    """``row`` (shape (n_columns,)) repeated on ``n_rows`` rows, held a
    column per row (Fortran order: the layout of the block's iterates,
    :meth:`StackedFolds.advance`) and read-only (the penalty's prox keeps
    its threshold for it: ``_threshold``)."""
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


def fold_lipschitz(designs, tol=None):
    """Largest eigenvalue of every fold's ``X~_j^T X~_j / n_j`` (training
    rows), as :meth:`~skacv.linalg._design.Design.lipschitz` of the fold's own
    design would give it: one Lanczos process per fold, run as a block on
    the stacked products (:meth:`FoldDesigns.normal_product` with a zero
    response: one pass over ``X`` per step for every fold), each stopped
    at the first step where its top Ritz value ``theta`` has a residual at
    most ``tol * theta`` (:func:`~skacv.linalg._linalg.lanczos_top_eigenvalues`,
    the rule of the folds' own fits), inflated by ``1 + tol`` as the fold's
    own fit inflates it: an upper bound, a step ``1 / L`` that is never too
    long. The block stops when every process has; ``nan`` for a fold not
    converged within 128 steps. Used where the folds' own designs would use
    Lanczos too (see :func:`fold_views`). ``tol``: the statistical policy's
    ``lipschitz_tol`` when ``None``.

    Returns
    -------
    lipschitz : ndarray of shape (n_folds,)
    """
    tol = designs.statistics.lipschitz_tol if tol is None else tol
    n, p, K = designs.n_samples, designs.n_features, designs.n_folds
    dt = designs.dtype
    # X~_j^T m_j X~_j q_j for every fold in one pass over X (the folds' own
    # step, with a zero response), on the side of the features whatever the
    # shape: the passes over X dominate, not the length of the vectors
    zero = np.zeros((K, n), dtype=dt)

    def op(Q):
        Z, _ = designs.normal_product(np.ascontiguousarray(Q, dtype=dt), zero)
        return -np.asarray(Z, dtype=np.float64) / designs.n_eff
    W0 = np.random.RandomState(0).standard_normal((p, K))
    # no cap on the basis (at most 128 steps of p x K floats, a small part of
    # the block's copy of X): the fallback, a copy of each fold's rows, would
    # cost far more memory
    with designs.workers():
        return lanczos_top_eigenvalues(op, W0, tol, np.inf) * (1.0 + tol)


def small_fold_lipschitz(designs, gram=None):
    """Every fold's :meth:`~skacv.linalg._design.Design.lipschitz` where the fold's
    own design computes it exactly (LAPACK: its smaller side at most
    ``dense_eig_size``), from the block's design instead of a copy of each
    fold's rows: one Gram matrix of ``X~`` (centred by the mean of all rows,
    weighted), each fold's that of all rows minus its other rows' (features'
    side) or its training block (samples' side), with the correction of its
    own centring (``delta``); in the covariance form
    (:class:`FoldCovariance`) its Gram matrices themselves (``gram``, shape
    (n_folds, n_features, n_features)). In the block's
    precision (float32 by default: within its rounding of the fold's own
    value). ``None`` for a sparse ``X`` (each fold then builds its own
    design).

    Returns
    -------
    lipschitz : ndarray of shape (n_folds,) or None
    """
    if designs.sparse:
        return None
    if gram is not None:  # the covariance form holds every fold's Gram matrix already
        C = gram
        return np.array([top_eigenvalue(np.asarray(C[j], dtype=np.float64),
                                        policy=designs.policy) / float(n_j)
                         for j, n_j in enumerate(designs.n_eff)])
    A = designs.base.X
    n, p = A.shape
    train = designs.mask.astype(bool)
    sw = designs.sqrt_weight.astype(np.float64)
    out = np.empty(designs.n_folds)
    if p <= n:
        S = np.asarray(A.T @ A, dtype=np.float64)
        for j in range(designs.n_folds):
            Ao = A[~train[:, j]]
            G = S - Ao.T @ Ao
            n_j = float(designs.n_eff[j])
            if designs.fit_intercept:  # sum over training rows of w (x - mu_j)(x - mu_j)^T
                delta = designs.delta[:, j].astype(np.float64)
                G -= n_j * np.outer(delta, delta)
            out[j] = top_eigenvalue(G, policy=designs.policy) / n_j
    else:
        B = np.asarray(A @ A.T, dtype=np.float64)
        for j in range(designs.n_folds):
            tr = np.flatnonzero(train[:, j])
            G = B[np.ix_(tr, tr)]
            n_j = float(designs.n_eff[j])
            if designs.fit_intercept:  # (a_i - s_i delta) . (a_k - s_k delta)
                delta = designs.delta[:, j]
                u, s = np.asarray(A[tr] @ delta, dtype=np.float64), sw[tr]
                G = G - np.outer(u, s) - np.outer(s, u) + float(delta @ delta) * np.outer(s, s)
            out[j] = top_eigenvalue(G, policy=designs.policy) / n_j
    return out


def fold_views(designs, products, X, sample_weight, splits, fit_intercept):
    """:class:`_FoldView` of every fold. The folds' top eigenvalues come
    from :func:`small_fold_lipschitz` where their own designs would compute
    them exactly, else from :func:`fold_lipschitz`; a fold left without one
    (sparse and small, or a Lanczos process not converged) gets its own
    design's :meth:`~skacv.linalg._design.Design.lipschitz` (a copy of its rows).
    ``products``: the block's products (``designs`` or its
    :class:`FoldCovariance`)."""
    # exact (LAPACK) where each fold's own design would be: its smaller side
    # (training rows or features) at most the policy's dense_eig_size
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
        The search's (its designs carry them).
    full_design : Design, default=None
        The full-data fit's design of ``X`` with the same weights and
        intercept (its ``X~``, centred and weighted): the block's copy is
        gathered from it, already centred, when the folds partition the rows.
    horizon : int, default=0
        The length the path may reach when it grows in stages (the first
        stage's ``max_iter`` is shorter): the covariance form is weighed
        against ``max(estimator.max_iter, horizon)`` steps.

    Attributes
    ----------
    designs : FoldDesigns
        The folds' rows, layout and centring.
    products : FoldDesigns or FoldCovariance
        What the block's steps multiply by (the covariance form where it
        pays, :func:`fold_covariance_pays`).
    step_sizes : ndarray of shape (n_folds,)
    losses : ndarray of shape (n_iter + 1, n_folds)
        Held-out squared errors (weighted, summed over each fold's held-out
        rows) of every iterate of every fold.
    test_weight : float
        Total weight of the held-out rows.
    """

    def __init__(self, estimator, X, y, sample_weight, splits, dtype, policies, full_design=None,
                 horizon=0):
        taken("stacked_folds", full_design=full_design)
        n = X.shape[0]
        train = np.zeros((n, len(splits)), dtype=bool)
        test = np.zeros_like(train)
        for j, (tr, te) in enumerate(splits):
            train[tr, j] = True
            test[te, j] = True
        w = sample_weight
        policy = policies[0]
        # the block's own copy of X (centred in place), with the rows ordered
        # by held-out fold when the folds partition the rows of a dense X: a
        # fold's test rows are then a slice of it, read without a copy by the
        # held-out errors of extrapolated iterates (_held_out_errors_of)
        order = _fold_order(X, test)
        if order is not None:
            train, test = train[order], test[order]
            y = np.asarray(y)[order]
            w = None if w is None else w[order]
            full = full_design
            if (type(full) is Design and not full.sparse and full.X.shape == X.shape
                    and full.fit_intercept == estimator.fit_intercept
                    and _same_weights(full.weight, sample_weight)):
                # the rows of the full fit's X~ (centred, weighted): no pass
                # to centre the copy
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
        partition = self.tests if order is not None and np.array_equal(train, ~test) else None
        self.designs = FoldDesigns(base, train, partition)
        self.offset, self.response = self.designs.center_y(y)
        if partition is not None and fold_covariance_pays(
                base.n_samples, base.n_features, len(splits),
                max(estimator.max_iter, horizon), policy,
                base.X.dtype.itemsize):
            self.products = FoldCovariance(self.designs, self.response, partition)
        else:
            self.products = self.designs
        # each fold's step size by the estimator's own rule on its own problem,
        # with the folds' top eigenvalues from one block of Lanczos processes
        views = fold_views(self.designs, self.products, X, sample_weight, splits,
                           estimator.fit_intercept)
        iterations = []
        for j, view in enumerate(views):  # (the parameters validated once)
            datafit, penalty = estimator.path_problem(view, validate=j == 0)
            iterations.append(estimator.path_iteration(view, datafit, penalty))
        self.step_sizes = np.array([it.step_size for it in iterations])
        self.iteration = stacked_iteration(iterations, dtype, self.designs.n_features)
        if self.iteration is None:
            raise TypeError(f"The folds of {type(estimator).__name__} cannot run as one block "
                            "(see skacv.model_selection._kfold.can_stack).")
        # residuals on a held-out row, in the weighted coordinates, are
        # sqrt(w_i) (y_i - prediction): their squares are the weighted errors
        # (n_folds, n_samples), in the block's layout
        self.test_t = np.take_along_axis(test.T, self.designs.fold_of, axis=0).astype(dtype)
        self.test_weight = float(test.sum() if w is None else (w @ test).sum())
        # the iterates held a fold per row of memory (shape (n_features,
        # n_folds), Fortran order): the pass reads them as V^T, returns its
        # gradients so, and the kept iterates are copied as they lie
        self.state = init_state(self.products, n_columns=self.designs.n_folds, order="F")
        # x^0 = 0: the residual is the response on every row
        self.losses = self._held_out_errors(self.state.x, np.zeros_like(self.response))[None]
        self.verbose = estimator.verbose

    def advance(self, n_iter):
        """Continue every fold path to ``n_iter`` steps (if shorter); return
        :attr:`losses` of iterates ``0..n_iter``.

        Where a step's pass does not give the held-out fitted values (an
        extrapolated step, or the covariance form), the iterates are kept
        for one block product per fold with its test rows: by chunks of
        steps in one buffer (the speed policy's ``fold_paths_chunk_bytes``),
        each chunk's errors taken before the next is run (the paths continue
        bit for bit from one call of the fit loop to the next)."""
        k0 = self.state.k
        if n_iter > k0:
            d, it = self.products, self.iteration
            new = np.full((n_iter - k0, d.n_folds), np.nan)
            fitted = d.computes_fitted
            keep = not fitted or any(it.beta(k) != 0.0 for k in range(k0 + 1, n_iter + 1))
            step_bytes = d.n_features * d.n_folds * d.dtype.itemsize
            chunk = (max(1, min(n_iter - k0, self.designs.policy.fold_paths_chunk_bytes
                                // step_bytes)) if keep else n_iter - k0)
            paths = None
            if keep:
                check_memory(step_bytes * chunk,
                             f"the fold paths ({d.n_features} x {d.n_folds} x {chunk})",
                             "Use fewer folds. ")
                # held a fold per row (as the iterates): a fold's iterates are
                # then rows of it, read in place by _held_out_errors_of's products
                paths = np.empty((chunk, d.n_folds, d.n_features),
                                 dtype=d.dtype).transpose(0, 2, 1)
            done = 0
            with d.workers():
                while done < n_iter - k0:
                    m = min(chunk, n_iter - k0 - done)

                    def on_fitted(i, x, P, target, at=done):  # no extrapolation: X~ x^k is known
                        new[at + i] = self._held_out_errors(x, P, target)

                    run_normal_block(d, self.response, it, m, self.state,
                                     None if paths is None else paths[:m], verbose=self.verbose,
                                     on_fitted=on_fitted if fitted else None)
                    if paths is not None:
                        part = new[done:done + m]
                        missing = np.flatnonzero(np.isnan(part[:, 0]))
                        if missing.size and missing[-1] - missing[0] + 1 == missing.size:
                            # a run of steps (extrapolation at every step): a view
                            part[missing] = self._held_out_errors_of(
                                paths[missing[0]:missing[-1] + 1])
                        elif missing.size:
                            part[missing] = self._held_out_errors_of(paths[missing])
                    done += m
            self.losses = np.concatenate([self.losses[: k0 + 1], new])
        return self.losses[: n_iter + 1]

    def _held_out_errors(self, x, P, target=None):
        """Weighted held-out squared errors (shape (n_folds,)) of the iterates
        ``x`` (shape (n_features, n_folds)) from their fitted values ``P =
        (X~ x)^T`` on every row, which the fit loop's pass computes anyway
        (``target``: :meth:`FoldDesigns.target` at ``x``, if known)."""
        d = self.designs
        if target is None:
            target = self.products.target(self.response, x)
        if d.layout == "rotated":  # the held-out fold is the last row
            h = (target[-1] - P[-1]).astype(np.float64)
            return np.bincount(d.fold_of[-1], weights=h * h, minlength=d.n_folds)
        R = target - P
        R *= self.test_t
        R *= R
        return np.add.reduce(R, axis=1, dtype=np.float64)

    def _held_out_errors_of(self, paths):
        """Weighted held-out squared errors of the iterates ``paths`` (shape
        (n_new, n_features, n_folds), best a transposed view of a fold per
        row: :meth:`advance`), shape (n_new, n_folds): one block product
        per fold with its test rows."""
        d = self.designs
        response = d.by_fold(self.response)
        total = np.zeros((paths.shape[0], d.n_folds))
        for j, rows in enumerate(self.tests):
            Bt = paths[:, :, j]  # (n_new, n_features)
            if isinstance(rows, slice) and Bt.strides[1] == Bt.itemsize:
                B = Bt.T  # its rows read in place by the product (a fold per row of paths)
            else:
                B = np.ascontiguousarray(Bt).T
            if isinstance(rows, slice):  # rows ordered by fold: a view
                P = d.base.X[rows] @ B
            else:
                P = np.asarray(d.base.rows(rows).matvec(B))
            if d.fit_intercept:  # X~_j = X~ - sqrt(w) delta_j^T
                P -= d.sqrt_weight[rows, None] * (d.delta[:, j] @ B)[None, :]
            R = response[j, rows][:, None] - P
            total[:, j] = np.einsum("it,it->t", R, R, dtype=np.float64)
        return total


def fit_beside(X, policy, fold_dtype="auto"):
    """Whether the full-data fit on ``X`` runs its stages beside the stacked
    folds (:func:`~skacv.utils._parallel.overlapped`, one BLAS thread each: the
    block's set-up beside the first stage, each later stage beside the
    folds' passes): when ``X`` is dense, larger than the last-level cache
    (the full fit's products read memory, and a second BLAS thread adds
    little to them) and the block's copy is not (its pass runs in one group
    of panels, :func:`pass_groups`, in the precision ``fold_dtype`` of
    :func:`kfold_dtype`). With ``X`` in the cache the full fit loses more
    than it gains on one BLAS thread, and with two groups of panels the
    block runs its groups in turn beside the full fit; measured figures in
    ``docs/benchmarks.rst`` (``fit_beside``); the speed ``policy``'s
    ``fit_beside`` decides where it is set."""
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
    """Steps the fold paths need so that iterate ``n_iter`` of the full path
    has a match in each (:func:`aligned_errors`): ``ceil(n_iter * r)`` for
    the largest ratio ``r`` (at least ``n_iter``)."""
    r = max(1.0, float(np.max(ratios))) if len(ratios) else 1.0
    return int(np.ceil(n_iter * r * (1.0 - 1e-12)))


def aligned_errors(curves, ratios, n_path, weight):
    """K-fold CV along the path, read at the full path's iterates.

    Parameters
    ----------
    curves : sequence of ndarray of shape (n_steps_j + 1,)
        Held-out error of every iterate of fold ``j`` (weighted sum over its
        held-out rows). A path that stopped early keeps its last value.
    ratios : ndarray of shape (n_folds,)
        ``r_j``: iterate ``t`` of the full path is compared with the point
        ``t * r_j`` of fold ``j``'s path (linear interpolation between its
        iterates). ``r_j = step_full / step_j`` matches the iterates at the
        same gradient-flow time ``t * step`` ("time"); ``r_j = 1`` at the
        same index ("iteration").
    n_path : int
        Number of iterates of the full path.
    weight : float
        Total weight of the held-out rows.

    Returns
    -------
    path : ndarray of shape (n_path,)
        Mean held-out error per iterate of the full path.
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
    """Whether the folds of ``estimator`` can run as one block: full-batch
    least squares on the plain design (not mini-batches, preconditioners,
    robust or logistic losses)."""
    return bool(estimator.stacks_folds())


def kfold_dtype(fold_dtype="auto"):
    """Precision of the stacked folds.

    Parameters
    ----------
    fold_dtype : {"auto", "float32", "float64"}, default="auto"
        ``fold_dtype`` of :class:`~skacv.TrajectoryEarlyStoppingCV`:
        ``"auto"`` is float32, whose rounding (~1e-6 relative) is far below
        the sampling noise of a held-out error.

    Returns
    -------
    dtype : numpy.dtype
    """
    if fold_dtype not in ("auto", "float32", "float64"):
        raise ValueError(f"fold_dtype must be 'auto', 'float32' or 'float64'; got "
                         f"{fold_dtype!r}.")
    return np.dtype(np.float32 if fold_dtype == "auto" else fold_dtype)
