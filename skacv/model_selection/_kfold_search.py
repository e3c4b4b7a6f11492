"""K-fold CV along the path of one grid point (``criterion="kfold"``): the
full path and its folds' paths, grown together in the stages of
:func:`skacv.model_selection._stages.grow_in_stages`, every iterate of the
full path scored by the folds' held-out errors matched with it. The folds
run as one block where they can (:class:`skacv.model_selection._kfold.StackedFolds`),
else as separate fits of clones of the estimator. Where only the full
fit's step size and length are needed (:meth:`KFoldPath.defers_full`), the
full fit waits for the search's choice (:class:`DeferredFull`).
"""

import contextlib
import dataclasses
import time
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone, is_classifier
from sklearn.model_selection import KFold, StratifiedKFold, check_cv
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import check_array

from .._trace import taken
from ..estimators._setup import FitPlan
from ..iterations._datafits import log_loss_terms
from ..utils._compat import _num_features, _num_samples
from ..utils._parallel import cache_bytes, overlapped
from ._fold_designs import fold_covariance_pays, rotated_pays
from ._kfold import StackedFolds, aligned_errors, can_stack, fit_beside, fold_steps, kfold_dtype
from ._stages import (
    at_boundary,
    can_stage,
    estimate_paths,
    grow_in_stages,
    grown_length,
    planned,
    refit_shorter,
    release_warm_state,
    stop_length,
)


@dataclasses.dataclass
class _Fold:
    """One fold fitted as a separate estimator, and the held-out errors of
    its iterates so far (weighted sums over its held-out rows)."""

    estimator: object
    X_train: object
    y_train: np.ndarray
    fit_params: dict
    X_test: object
    y_test: np.ndarray
    weight: np.ndarray
    curve: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))


def _score_fold(fold, classifier):
    """Append the held-out losses of the iterates added since the last stage."""
    k0 = fold.curve.shape[0]
    if k0 >= np.shape(fold.estimator.coef_path_)[-1]:
        return
    # the linear predictors of the new iterates at the held-out rows
    P = fold.estimator.linear_predictor_path(fold.X_test, k0)
    if classifier:  # the datafit's log loss of the linear predictor
        loss = log_loss_terms(P, (fold.y_test == fold.estimator.classes_[1])[:, None])
    else:
        loss = (np.asarray(fold.y_test, dtype=np.float64)[:, None] - P) ** 2
    fold.curve = np.concatenate([fold.curve, fold.weight @ loss])


def _time_ratios(estimator, alignment, fold_step_sizes):
    """``step_full / step_j`` of every fold for ``alignment="time"`` with a
    known, positive, constant full-batch step size (else ones: by index)."""
    full = getattr(estimator, "step_size_", None)
    steps = np.asarray(fold_step_sizes, dtype=np.float64)
    params = estimator.get_params(deep=False)
    full_batch = params.get("solver") not in (None, "sgd", "eigenpro")
    known = (full is not None and np.ndim(full) == 0 and np.isfinite(full) and full > 0
             and np.all(np.isfinite(steps)) and np.all(steps > 0))
    if alignment == "time" and full_batch and params.get("step_schedule") is None and known:
        return float(full) / steps
    return np.ones(steps.shape[0])


@dataclasses.dataclass
class DeferredFull:
    """The full-data fit of a K-fold candidate, run only if the candidate is
    selected (:func:`full_fit`): ``estimator`` fitted from zero on ``(X, y)``
    for ``max_iter`` steps, the path ``kfold_path_`` was aligned with."""

    estimator: object
    X: object
    y: object
    fit_params: dict
    max_iter: int

    def fit(self):
        """The fitted estimator (the fit :class:`KFoldPath` deferred)."""
        taken("deferred_full_fit", max_iter=self.max_iter)
        refit_shorter(self.estimator, self.X, self.y, self.fit_params, self.max_iter)
        return self.estimator


def full_fit(estimator):
    """``estimator``, or the fitted estimator a :class:`DeferredFull` stands for."""
    return estimator.fit() if isinstance(estimator, DeferredFull) else estimator


class KFoldPath:
    """K-fold CV along the path of ``estimator`` on ``(X, y)``.

    Parameters
    ----------
    estimator : trajectory estimator
        The full fit (fitted here); its clones fit separate folds.
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    fit_params : dict
        The full fit's metadata.
    splits : list of (train, test) index arrays
    alignment : {"time", "iteration"}
        How the folds' iterates are matched with the full path's
        (:func:`skacv.model_selection._kfold.aligned_errors`).
    fold_dtype : {"auto", "float32", "float64"}
        Precision of the block of folds
        (:func:`skacv.model_selection._kfold.kfold_dtype`).
    policies : (SpeedPolicy, StatisticalPolicy)
        The search's.
    defer_full : bool, default=False
        The full fit may wait (:meth:`defers_full`; the caller resolves it
        by :func:`full_fit`).
    """

    def __init__(self, estimator, X, y, fit_params, splits, alignment, fold_dtype, policies,
                 defer_full=False):
        self.estimator, self.X, self.y = estimator, X, y
        self.policies = policies
        self.fit_params, self.splits = fit_params, splits
        self.alignment, self.fold_dtype = alignment, fold_dtype
        sw = fit_params.get("sample_weight")
        self.sample_weight = None if sw is None else np.asarray(sw, dtype=np.float64)
        self.classifier = is_classifier(estimator)
        self.use_stack = not self.classifier and can_stack(estimator)
        # the length the path may reach (a staged path's first stage is shorter)
        self.horizon = estimator.get_params(deep=False).get("max_iter", 0) or 0
        self.block = None  # the folds as one block (StackedFolds)
        self.columns = slice(None)  # its columns (a block of several grid points: a group)
        self.folds = []  # or as separate fits (_Fold)
        self.beside = False  # the full path's stages run beside the block's passes
        self.ratios = np.ones(len(splits))
        self.n_iter = 0  # length of the fold paths
        self.defer_full = defer_full
        self.deferred = False  # the full fit waits (full_iter: its length)
        self.in_stages = False  # the paths grow in stages (_fit_in_stages)
        self.full_iter = None

    def _make_folds(self):
        # rows taken by position: CSR, arrays, DataFrames
        X = self.X
        Xa = X.tocsr() if sp.issparse(X) else (X if hasattr(X, "iloc") else np.asarray(X))
        y = np.asarray(self.y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()  # the full fit has warned
        sw = self.sample_weight
        off = {k: False for k in ("estimate_risk", "estimate_loo")
               if k in self.estimator.get_params(deep=False)}
        for train, test in self.splits:
            params = dict(self.fit_params)
            if sw is not None:
                params["sample_weight"] = sw[train]
            self.folds.append(_Fold(
                clone(self.estimator).set_params(**off), _safe_indexing(Xa, train), y[train],
                params, _safe_indexing(Xa, test), y[test],
                np.ones(len(test)) if sw is None else sw[test]))

    def _make_block(self, validated):
        """The block of folds; beside the full fit's first stage
        (``validated=False``: the same input checks) its errors are
        returned, not raised, so that the full fit's own speak first."""
        try:
            Xv = check_array(self.X, accept_sparse=("csr", "csc"),
                             dtype=[np.float64, np.float32], ensure_all_finite=not validated)
            y = np.asarray(self.y, dtype=np.float64).reshape(Xv.shape[0])
            # after the full fit, its centred X (kept for the warm-started stages)
            full = self.estimator.fitted_design() if validated else None
            return StackedFolds(self.estimator, Xv, y, self.sample_weight, self.splits,
                                kfold_dtype(self.fold_dtype), self.policies, full,
                                horizon=self.horizon)
        except Exception as exc:
            if validated:
                raise
            return exc

    def _fit_full(self):
        self.estimator.fit(self.X, self.y, **self.fit_params)

    def _start(self, params):
        """The first stage of the full path (deferred: one step, planned for
        ``max_iter``: the same checks and step size), then the folds' set-up;
        ``False`` when the full fit stores no path (the caller says why)."""
        self.estimator.set_params(**params)
        self.beside = (not self.deferred and self.use_stack
                       and fit_beside(self.X, self.policies[0], self.fold_dtype))
        if self.deferred:
            self.start_deferred(own_plan=not self.in_stages)
        elif self.beside:  # the block's set-up beside the full path's first stage
            built = overlapped(self._fit_full, lambda: self._make_block(False))[1]
            if isinstance(built, Exception):
                raise built
        else:
            self._fit_full()
        if not hasattr(self.estimator, "coef_path_"):
            return False
        if self.deferred:
            self.full_iter = self.estimator.max_iter
        if self.use_stack:
            self.block = built if self.beside else self._make_block(True)
            self.ratios = _time_ratios(self.estimator, self.alignment, self.block.step_sizes)
        else:
            self._make_folds()
        return True

    def start_deferred(self, checks=None, own_plan=True):
        """The deferred full fit's first stage: one step, planned for
        ``max_iter`` (the same checks and step size; ``checks``: the
        :class:`~skacv.estimators._setup.FitPlan`'s; ``own_plan=False``:
        inside the stages' plan, whose horizon is the estimator's
        ``max_iter``)."""
        max_iter = self.estimator.max_iter
        plan = (planned(self.estimator, FitPlan(horizon=max_iter, checks=checks)) if own_plan
                else contextlib.nullcontext())
        try:
            with plan:
                self.estimator.set_params(max_iter=1).fit(self.X, self.y, **self.fit_params)
        finally:
            self.estimator.set_params(max_iter=max_iter)
        self.full_iter = max_iter

    def defers_full(self, one_go):
        """Whether the full fit can wait for the search's choice: the folds
        run as one block, the full path is fitted in one go (``one_go``)
        from zero with ``step_size="auto"`` (it never diverges) and
        estimates nothing of its own."""
        params = self.estimator.get_params(deep=False)
        return bool(self.defer_full and one_go and self.use_stack
                    and self.policies[0].defer_full_fit
                    and params.get("step_size") == "auto" and not params.get("warm_start")
                    and not any(params.get(k) for k in ("estimate_risk", "estimate_loo")))

    def _full_length(self):
        """Iterations of the full path (fitted, or deferred)."""
        if self.deferred:
            return self.full_iter
        return np.shape(self.estimator.coef_path_)[-1] - 1

    def _fit_separate(self, n_iter, params):
        """Separate fold paths long enough for ``n_iter`` steps of the full path."""
        first = not hasattr(self.folds[0].estimator, "coef_path_")
        for fold in self.folds:
            done = 0 if first else np.shape(fold.estimator.coef_path_)[-1] - 1
            steps = n_iter if first else max(fold_steps(n_iter, self.ratios), done)
            fold.estimator.set_params(**dict(params, max_iter=steps)).fit(
                fold.X_train, fold.y_train, **fold.fit_params)
        if first:  # the fold step sizes are known now
            self.ratios = _time_ratios(
                self.estimator, self.alignment,
                [getattr(f.estimator, "step_size_", np.nan) for f in self.folds])
            need = fold_steps(n_iter, self.ratios)
            if need > n_iter:  # continue the fold paths (warm start: bit for bit)
                for fold in self.folds:
                    warm = fold.estimator.warm_start
                    try:
                        fold.estimator.set_params(max_iter=need, warm_start=True).fit(
                            fold.X_train, fold.y_train, **fold.fit_params)
                    finally:
                        fold.estimator.set_params(warm_start=warm)
        for fold in self.folds:
            _score_fold(fold, self.classifier)

    def _fit_folds(self, n_iter, params):
        """Fold paths long enough for ``n_iter`` steps of the full path."""
        if self.use_stack:
            self.block.advance(fold_steps(n_iter, self.ratios))
        else:
            self._fit_separate(n_iter, params)

    def _continue_full(self, n_iter):
        self.estimator.set_params(max_iter=n_iter, warm_start=True).fit(
            self.X, self.y, **self.fit_params)

    def kfold_path(self, n_path):
        """``kfold_path_`` of the first ``n_path`` iterates of the full path."""
        if self.use_stack:
            return aligned_errors(list(self.block.losses[:, self.columns].T), self.ratios,
                                  n_path, self.block.test_weight)
        weight = float(sum(f.weight.sum() for f in self.folds))
        return aligned_errors([f.curve for f in self.folds], self.ratios, n_path, weight)

    def stage(self, **params):
        """Fit the full path with ``params`` (its first stage starts the
        folds; later ones continue it) and the folds as far; return the
        criterion path (``None``: the full fit stores no path)."""
        first = self.block is None and not self.folds
        if first and not self._start(params):
            return None
        self.n_iter = n_iter = params.get("max_iter", self.estimator.max_iter)
        if not first and self.beside:
            # the full path continued beside the folds' pass (one thread each)
            overlapped(lambda: self._continue_full(n_iter),
                       lambda: self._fit_folds(n_iter, params))
        else:
            self._fit_folds(n_iter, params)
        return self.kfold_path(n_iter + 1)

    def _fit_in_one_go(self, n_iter_no_change, limit=None, bar=None):
        if self.stage() is None:
            return False
        policy, statistics = self.policies
        if n_iter_no_change is not None and can_stage(self.estimator, policy):
            # a cheap path fitted in one go ends where the stages would have
            # stopped, or, still falling at max_iter, grows past it as they do
            n = self._full_length()
            path = self.kfold_path(n + 1)
            if at_boundary(path, n, self.estimator.max_iter, statistics, limit,
                           n_iter_no_change, bar=bar):
                first = grown_length(path, n, self.estimator.max_iter,
                                     statistics.max_iter_growth * n, n_iter_no_change,
                                     policy.stage_growth, statistics, limit, bar=bar)
                return self._fit_in_stages(n_iter_no_change, limit, first, bar)
            m = stop_length(path, n_iter_no_change, policy.stage_growth, statistics, limit,
                            bar)
            if m < n and self.deferred:
                self.full_iter = m
            elif m < n:
                refit_shorter(self.estimator, self.X, self.y, self.fit_params, m)
        return True

    def _fit_in_stages(self, n_iter_no_change, limit=None, first=None, bar=None):
        """The paths in stages (from ``first`` steps, continuing a path fitted
        in one go), past ``max_iter`` while the criterion still falls there
        (:func:`~._stages.at_boundary`)."""
        policy, statistics = self.policies
        self.in_stages = True  # (a first stage starts inside the stages' plan)
        taken("kfold_stages", deferred=self.deferred)
        fitted = grow_in_stages(self.estimator, lambda: [f.estimator for f in self.folds],
                                self.stage, n_iter_no_change, policy.stage_growth, statistics,
                                limit=limit, first=first, finish=not self.deferred, bar=bar)
        if fitted is None:
            return False
        if self.deferred:
            self.full_iter = self.n_iter
            return True
        # the full path, from where it is to where the folds stopped
        warm_start = self.estimator.warm_start
        try:
            if np.shape(self.estimator.coef_path_)[-1] != self.n_iter + 1:
                self._continue_full(self.n_iter)
        finally:
            self.estimator.set_params(warm_start=warm_start)
            release_warm_state([self.estimator])
        return True

    def fit(self, attrs, n_iter_no_change=None, limit=None, bar=None):
        """Fit the full path and the folds; return ``(paths, fit_time)``:
        the estimate paths ``attrs`` and ``kfold_path_`` (``{}``: the full
        fit stores no path). With ``n_iter_no_change`` the paths grow in
        stages stopped on ``kfold_path_`` (``limit``, ``bar``: :func:`~._stages.stops`)."""
        tic = time.perf_counter()
        if n_iter_no_change is None or not can_stage(self.estimator, self.policies[0], self.X):
            self.deferred = self.defers_full(True)
            done = self._fit_in_one_go(n_iter_no_change, limit, bar)
        else:  # deferred unless its stages would run beside the folds' (at no wall time)
            self.deferred = (self.defers_full(True)
                             and not fit_beside(self.X, self.policies[0], self.fold_dtype))
            done = self._fit_in_stages(n_iter_no_change, limit, bar=bar)
        if not done:
            return {}, time.perf_counter() - tic
        n_path = self._full_length() + 1
        if self.use_stack:
            self.block.advance(fold_steps(n_path - 1, self.ratios))
        # (deferred: no estimate of its own, defers_full)
        paths = {} if self.deferred else estimate_paths(self.estimator, attrs)
        paths["kfold_path_"] = self.kfold_path(n_path)
        return paths, time.perf_counter() - tic


def fit_kfold(estimator, X, y, fit_params, attrs, splits, n_iter_no_change, alignment,
              fold_dtype, limit, policies, defer_full=False, bar=None):
    """``(estimator, paths, fit_time)``: the fitted full estimator (or a
    :class:`DeferredFull`), its estimate paths ``attrs`` with
    ``kfold_path_`` (``{}`` when it stores no path) and the time taken.
    Each fold is fitted once (same parameters, estimates off), every
    iterate scored on its held-out fold (squared error, or log loss for
    classifiers, weighted); ``kfold_path_[t]`` is the weighted mean of the
    folds' errors matched with iterate ``t`` of the full path
    (:func:`skacv.model_selection._kfold.aligned_errors`). The parameters
    are :class:`KFoldPath`'s.
    """
    search = KFoldPath(estimator, X, y, fit_params, splits, alignment, fold_dtype, policies,
                       defer_full)
    paths, fit_time = search.fit(attrs, n_iter_no_change, limit, bar)
    if search.deferred:
        taken("defer_full_fit")
        return DeferredFull(estimator, X, y, fit_params, search.full_iter), paths, fit_time
    return estimator, paths, fit_time


def stacks_grid(estimator, X, splits, n_iter_no_change, fold_dtype, policies):
    """Whether the grid points of ``estimator`` (other penalties) run their
    K-fold paths in one block (:func:`fit_kfold_block`): the speed
    policy's ``stack_grid``, each path fitted in one go with its full fit
    deferred, and its folds' block in the ``"folds"`` layout without the
    covariance form (which a block of several grid points does not take)."""
    policy = policies[0]
    search = KFoldPath(estimator, X, None, {}, splits, "time", fold_dtype, policies, True)
    if not (policy.stack_grid and search.defers_full(True) and len(splits) >= 2
            and (n_iter_no_change is None or not can_stage(estimator, policy, X))):
        return False
    n, p = _num_samples(X), _num_features(X)
    itemsize = kfold_dtype(fold_dtype).itemsize
    horizon = estimator.get_params(deep=False).get("max_iter") or 0
    rotated = not sp.issparse(X) and rotated_pays(n * p * itemsize, p, policy)
    return not rotated and not fold_covariance_pays(n, p, len(splits), horizon, policy,
                                                    itemsize)


def fit_kfold_block(estimators, X, y, fit_params, attrs, splits, n_iter_no_change, alignment,
                    fold_dtype, limits, policies, checks=None, bar=None):
    """:func:`fit_kfold` of several grid points (``estimators``, where
    :func:`stacks_grid`) whose folds run as one block
    (:class:`~skacv.model_selection._kfold.StackedFolds` with a group of
    columns each): each path, its stopping (``limits``) and its deferred
    full fit as its own :class:`KFoldPath`'s, one pass a step for all
    (blocks of as many grid points as the speed policy's
    ``grid_block_cache_share`` holds; ``checks``: the full fits' shared
    validation; ``bar``: every path's :func:`~._stages.patience`'s). Returns
    ``[(DeferredFull, paths, fit_time), ...]`` (the block's time shared
    evenly)."""
    tic = time.perf_counter()
    searches = [KFoldPath(e, X, y, fit_params, splits, alignment, fold_dtype, policies, True)
                for e in estimators]
    for search in searches:
        search.deferred = True
        search.start_deferred(checks)
    # (validated by the full fits; each block's copy gathered from its first one's X~)
    Xv = check_array(X, accept_sparse=("csr", "csc"), dtype=[np.float64, np.float32],
                     ensure_all_finite=False)
    yv = np.asarray(y, dtype=np.float64).reshape(-1)
    K, dtype, policy = len(splits), kfold_dtype(fold_dtype), policies[0]
    # blocks of equal sizes, each one's iterates within the policy's share of the level-2 cache
    size = max(1, int(policy.grid_block_cache_share * cache_bytes(2, policy)
                      // (K * _num_features(X) * dtype.itemsize)))
    n_blocks = -(-len(searches) // size)
    for group in np.array_split(np.array(searches, dtype=object), n_blocks):
        first = group[0]
        block = StackedFolds(first.estimator, Xv, yv, first.sample_weight, splits, dtype,
                             policies, first.estimator.fitted_design(), horizon=first.horizon,
                             estimators=[s.estimator for s in group])
        for a, search in enumerate(group):
            search.block, search.columns = block, slice(a * K, (a + 1) * K)
            search.ratios = _time_ratios(search.estimator, alignment,
                                         block.step_sizes[search.columns])
        block.advance(max(fold_steps(s.full_iter, s.ratios) for s in group))
    paths = []
    for s, limit in zip(searches, limits, strict=True):
        paths.append(s.fit(attrs, n_iter_no_change, limit, bar)[0])
        # its paths have ended (the block's groups in order): the block goes on without them
        s.block.retire(s.columns.stop)
    fit_time = (time.perf_counter() - tic) / len(searches)
    taken("grid_fold_block", n_grid=len(searches))
    for _ in searches:
        taken("defer_full_fit")
    return [(DeferredFull(s.estimator, X, y, fit_params, s.full_iter), p, fit_time)
            for s, p in zip(searches, paths, strict=True)]


def kfold_splits(cv, X, y, classifier, seed=None, groups=None):
    """The folds of K-fold CV, ``[(train, test), ...]``: for an int ``cv``,
    ``StratifiedKFold`` (classifiers) or ``KFold``, in order without a
    ``seed``, shuffled with it; anything else through
    :func:`~sklearn.model_selection.check_cv` (``groups`` to its ``split``)."""
    if isinstance(cv, Integral):
        n = _num_samples(X)
        if n < cv:
            raise ValueError(
                f"n_samples={n} is too few for K-fold CV with cv={cv} folds: at "
                f"least {cv} samples are needed (one per held-out fold). Lower cv "
                "or use criterion='risk' or 'loo'.")
        kind = StratifiedKFold if classifier else KFold
        cv = (kind(n_splits=cv) if seed is None
              else kind(n_splits=cv, shuffle=True, random_state=seed))
    else:
        cv = check_cv(cv, y, classifier=classifier)
    return list(cv.split(X, y, groups))
