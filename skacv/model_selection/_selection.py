"""TrajectoryEarlyStoppingCV: choose the iteration (and the parameters) of a
trajectory estimator from its own risk estimate, its leave-one-out error or
K-fold CV along its path, without refitting."""

import inspect
import time
import warnings
from collections import defaultdict
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
import sklearn
from scipy.special import logit
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.exceptions import EfficiencyWarning
from sklearn.model_selection import KFold, ParameterGrid, StratifiedKFold, check_cv
from sklearn.utils import _safe_indexing, check_random_state, get_tags
from sklearn.utils.metadata_routing import MetadataRouter, MethodMapping, process_routing
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_array, check_is_fitted

from .._config import config_context, get_config, working_memory_bytes
from ..exceptions import EstimateBudgetError, SelectionBoundaryWarning, UnreliableEstimateWarning
from ..iterations._datafits import log_loss_terms
from ..linalg._dask import is_dask, sufficient_search
from ..linalg._design import shared_designs
from ..utils._compat import (
    HasMethods,
    Interval,
    StrOptions,
    _fit_context,
    _num_features,
    _num_samples,
    _raise_for_params,
    _routing_enabled,
)
from ..utils._parallel import blas_threads_per_worker, delayed, overlapped, parallel
from ._alpha_path import risk_alpha_path, supports_alpha_path
from ._kfold import StackedFolds, aligned_errors, can_stack, fit_beside, fold_steps, kfold_dtype

# estimates of two iterates closer than this (relative) are a tie: the first
# grid point, then the earliest iteration, wins (rounding must not decide)
_TIE_RTOL = 1e-9

_CRITERIA = {"risk": ("risk_path_", "estimate_risk"), "loo": ("loo_path_", "estimate_loo"),
             "kfold": ("kfold_path_", None)}

#: the estimates a candidate fit reports (cv_results_ columns)
_PATH_ATTRS = ("risk_path_", "loo_path_", "risk_reliable_")

#: criterion="auto": cost model of leave-one-out against K-fold CV along the
#: path, in units of one fit. A tracked left-out run costs, per step, a
#: product with the (restricted) Gram matrix (``2 p^2`` flops as a block
#: product; ``4 n p`` without the Gram matrix) plus ``~20 p`` elementwise
#: operations; a fit step costs ``4 n p`` flops as matrix-vector products.
#: Block products run ``AUTO_BLAS3_SPEEDUP`` times faster per flop than
#: matrix-vector products (measured 5-12 on 2 cores, n x p from 200 x 100 to
#: 5000 x 7500; the smallest value is used).
AUTO_BLAS3_SPEEDUP = 5.0

# criterion="auto" for the linear least-squares solvers (gradient descent,
# Nesterov, heavy ball): the risk estimate forms the corrected residuals of
# every iterate, ``~4 n T^2`` flops for a path of ``T`` steps and about
# twice that over the stages of the early stopping, against about 3 fits
# (``4 n p T`` flops each) for the full fit and the block of folds: more
# than the folds when ``T`` exceeds about 1.5 times ``n_features``
# (measured, 150 steps: at 20000 x 8 the risk took 0.22 s against 0.11 s
# for 5-fold CV written by hand, at 50000 x 20 0.85 against 0.64 s; at
# 2000 x 1000 0.45 against 0.97 s). It is kept there: no refit.

#: criterion="auto" sizes the leave-one-out subsample of estimators whose
#: folds do not run as one block (mini-batch SGD, robust and logistic
#: losses: their K folds are K separate fits) to this many flops (in the
#: units of the model above: about 0.7 s on one core) when K-fold would
#: cost less: it uses every sample, no fold is held out.
AUTO_CHEAP_FLOPS = 5e9

# criterion="kfold" for estimators whose folds run as one block (ISTA,
# FISTA; :mod:`skacv.model_selection._kfold`; criterion="auto" before issue
# 42): K-fold CV along the path, matched in time
# (``fold_alignment="time"``). The folds train on ``(K - 1) / K`` of the
# data, which shifts their best iteration. Measured on 26 small problems
# (FISTA, alpha 0.05, 200 steps; equicorrelated 0.5 / 0.8 and AR(1) 0.9 at
# 200 x 400, equicorrelated 0.5 at 400 x 200, isotropic 300 x 600, 4
# seeds each; diabetes with degree-2 features and breast cancer with a
# sparse signal, 3 seeds each), regret of the choice against the oracle
# iteration, median / worst: 5 folds in time 0.12 % / 2.7 % (folds in
# order, the default), 0.24 % / 5.0 % and 0.36 % / 2.7 % (shuffled, two
# seeds); 10 folds in time 0.08-0.11 % / 0.9-2.0 %; 5 folds by index
# (textbook K-fold along the path, shuffled) 0.35 % / 13 %; exact
# leave-one-out 0.04 % / 0.84 % at 6x the time of 5 folds (10 folds: 1.3x).

#: criterion="auto" also computes the other estimate (both in cv_results_)
#: when n_samples * n_features is at most this and the choice is
#: leave-one-out (the spectral risk of linear iterations is the cheaper
#: estimate: its leave-one-out would double the cost)
AUTO_BOTH_SIZE = 200_000

#: criterion="auto": leave-one-out tracks every sample up to this many, a
#: random subsample of this size above. Each tracked sample costs about one
#: product with the (restricted) Gram matrix per iteration, so the cost is
#: linear in this number. The subsample path is a control-variate estimate
#: (the in-sample losses of every sample, see
#: ``skacv.estimates._loo._regression_estimate``): on equicorrelated and AR(1) designs
#: (FISTA, n 200-1000, 15 fits x 300 subsamples) 100 samples gave a mean
#: level error of 0.3-3 % against the full leave-one-out path (the plain
#: mean: 8-11 %) and a 90th-percentile regret of the argmin of 0-3 % except
#: on one p > n design near interpolation (12 %; 0 % with 200 samples).
AUTO_LOO_SAMPLES = 100

#: criterion="auto" tracks more samples, up to this many, while the
#: leave-one-out stays within the budget of K-fold CV along the path or of
#: ``AUTO_CHEAP_FLOPS`` (heavy-tailed losses need them: with Student-t noise
#: and gross outliers the Huber choice from 100 samples had regrets up to
#: 15 % where every sample gave at most 7 %)
AUTO_LOO_SAMPLES_MAX = 500


def loo_cost_in_fits(estimator, n_samples, n_features, n_tracked):
    """Estimated cost of ``loo_path_`` (``n_tracked`` left-out runs) in fits
    of the estimator, and in flops (see ``AUTO_BLAS3_SPEEDUP``)."""
    params = estimator.get_params(deep=False)
    T = int(params.get("max_iter", 100) or 100)
    n, p, c = max(n_samples, 1), max(n_features, 1), n_tracked
    quadratic = not is_classifier(estimator) and params.get("solver") != "sgd"
    linear = getattr(estimator, "_linear_iterations", lambda: False)()
    if quadratic and linear and params.get("solver") != "eigenpro":
        # eigenbasis: one eigendecomposition, then scalar recursions per sample
        r = min(n, p)
        flops = 2 * n * p * r / AUTO_BLAS3_SPEEDUP + 2 * c * (r * T + T * T)
        return flops / (T * 4 * n * p), flops
    gram = quadratic and 8 * p * p <= working_memory_bytes()
    step = (2 * p * p if gram else 4 * n * p) * c / AUTO_BLAS3_SPEEDUP + 20 * p * c
    setup = 2 * n * p * p / AUTO_BLAS3_SPEEDUP if gram else 0.0
    flops = T * step + setup
    return flops / (T * 4 * n * p), flops


def auto_criterion(estimator, n_samples, n_features=None, n_folds=5):
    """``(criterion, loo_subsample)`` chosen by ``criterion="auto"`` before
    the fit: an estimate that needs no refit, ``"risk"`` or ``"loo"``, never
    ``"kfold"`` (K-fold CV replaces it only when the fitted estimate says it
    is unreliable, or when the ISTA/FISTA chains would cost more than the
    folds: see :class:`TrajectoryEarlyStoppingCV`).

    * Estimators with only one of the two estimates: that one
      (``TrajectoryLogisticRegression``: leave-one-out, sized as below).
    * Linear iterations of least squares (``IterativeRidge`` with "gd",
      "nesterov", "heavy_ball", "eigenpro"): ``"risk"``, computed spectrally
      (exact traces when cheap, ``n_probes="auto"``), deterministic and
      cheaper than any leave-one-out. (With a path longer than about 1.5
      times the features its corrected residuals, ``n T^2``, cost more
      than the folds run as one block: it is kept, the folds are a refit.)
    * ISTA and FISTA of the Lasso: ``"risk"``, the memory-matrix estimate
      (Bellec & Tan 2024): their exact leave-one-out costs a restricted Gram
      product per sample and step (10 to 100 fits).
    * Everything else that tracks leave-one-out (proximal SGD, robust and
      logistic losses): ``"loo"``. Iterative approximate leave-one-out costs
      time linear in the path length and in the tracked samples
      (:func:`loo_cost_in_fits`); every sample is tracked up to
      ``AUTO_LOO_SAMPLES``, above a random subsample (a control-variate
      estimate) of as many samples as fit in the larger of the K-fold
      budget (``n_folds - 1`` fits) and ``AUTO_CHEAP_FLOPS``, between
      ``AUTO_LOO_SAMPLES`` and ``AUTO_LOO_SAMPLES_MAX`` (unless the
      estimator sets ``loo_subsample`` itself).
    """
    params = estimator.get_params(deep=False)
    has_risk, has_loo = "estimate_risk" in params, "estimate_loo" in params
    if not has_loo:
        return "risk", None
    linear = getattr(estimator, "_linear_iterations", None)
    if has_risk and ((linear is not None and linear()) or can_stack(estimator)):
        return "risk", None
    sub = params.get("loo_subsample")
    if sub is None and n_samples > AUTO_LOO_SAMPLES:
        sub = AUTO_LOO_SAMPLES
        if n_features is not None:  # more while within the budget
            fits1, flops1 = loo_cost_in_fits(estimator, n_samples, n_features, 1)
            setup = loo_cost_in_fits(estimator, n_samples, n_features, 0)[1]
            budget = max(AUTO_CHEAP_FLOPS, (n_folds - 1) * flops1 / fits1)
            affordable = int((budget - setup) // max(flops1 - setup, 1.0))
            sub = int(np.clip(affordable, AUTO_LOO_SAMPLES, AUTO_LOO_SAMPLES_MAX))
        if sub >= n_samples:
            sub = None
    return "loo", sub


def _estimator_has(attr):
    """The fitted ``estimator_`` (else the unfitted ``estimator``) has ``attr``."""

    def check(self):
        getattr(self.estimator_ if hasattr(self, "estimator_") else self.estimator, attr)
        return True

    return check


def set_iterate(estimator, iteration):
    """Make ``coef_`` / ``intercept_`` of a fitted trajectory estimator the
    iterate ``iteration`` of its stored path (in place; the path is kept).

    Parameters
    ----------
    estimator : fitted trajectory estimator
        Has ``coef_path_`` (iterations on the last axis) and ``intercept_path_``.
    iteration : int
        Index into the path, ``0 <= iteration <= n_iter_``.

    Returns
    -------
    estimator : object
        The same estimator.
    """
    n_path = estimator.coef_path_.shape[-1]
    if not 0 <= iteration < n_path:
        raise ValueError(f"iteration must be in [0, {n_path - 1}], got {iteration}.")
    coef_shape = np.shape(estimator.coef_)
    estimator.coef_ = np.array(estimator.coef_path_[..., iteration]).reshape(coef_shape)
    # the iterate of coef_, for the methods that default to it (debiased_coef, ...)
    estimator._selected_iterate = (int(iteration), estimator.coef_)
    intercept = estimator.intercept_path_[..., iteration]
    if np.ndim(estimator.intercept_):
        intercept = np.array(intercept).reshape(np.shape(estimator.intercept_))
    estimator.intercept_ = intercept
    return estimator


def _argmin_first(path):
    """First iterate within the tie tolerance of the smallest finite value."""
    path = np.where(np.isfinite(path), path, np.inf)
    m = path.min() if path.size else np.inf
    if not np.isfinite(m):
        return None
    return int(np.flatnonzero(path <= m + _TIE_RTOL * abs(m))[0])


#: a path whose fit and estimates cost less than this many flops (tens of
#: milliseconds) is fitted in one go: the fixed cost of every stage (input
#: validation, set-up of the estimates) would exceed what stopping saves
#: (ridge GD at 500 x 250, 150 steps: 22 ms in one go, 36 ms in stages)
STAGE_MIN_FLOPS = 5e8
#: the same for a linear method whose risk is computed spectrally: its
#: estimates cost the same at any length (the Gram eigenvalues, the classical
#: fit of the debiasing), so stopping saves only fit steps, and every stage
#: recomputes the memory matrix and the debiasing scores (ridge GD, 150 steps:
#: 0.33 s in one go, 0.49 s in stages at 2000 x 1000; 1.05 s and 1.23 s at
#: 2000 x 3000)
STAGE_MIN_FLOPS_LINEAR = 5e9


def _can_stage(estimator, X=None):
    params = estimator.get_params(deep=False)
    if not ("max_iter" in params and "warm_start" in params):
        return False
    if X is None:
        return True
    try:
        n, p = _num_samples(X), _num_features(X)
    except (TypeError, ValueError):
        return True
    T = int(params["max_iter"] or 1)
    flops = 4.0 * n * p * T  # the fit
    linear = getattr(estimator, "_linear_iterations", lambda: False)()
    if params.get("estimate_risk") and not linear:
        return True  # probe chains: quadratic in the path length
    if params.get("estimate_loo"):
        sub = params.get("loo_subsample")
        flops += loo_cost_in_fits(estimator, n, p, min(n, sub or n))[1]
    elif params.get("estimate_risk"):
        return flops > STAGE_MIN_FLOPS_LINEAR
    return flops > STAGE_MIN_FLOPS


#: the early stopping waits at least this fraction of the best iteration
#: without improvement (and at least ``n_iter_no_change`` iterations): an
#: estimate's bumps last longer on longer paths. With 10 iterations only, on
#: equicorrelated designs (FISTA, 150-200 steps, 200 x 400 and 500 x 750) the
#: risk estimate stopped at a bump at iteration 88 or 158 where the truth kept
#: decreasing to the last iterate (regret 11-15 %; the whole path: 0 %).
RELATIVE_PATIENCE = 0.5


def _patience(best, n_iter_no_change):
    """Iterations without improvement after ``best`` that stop the path."""
    return max(n_iter_no_change, int(RELATIVE_PATIENCE * best))


def _next_stage(n_iter, best, n_iter_no_change):
    """Length of the next stage of an early-stopped path.

    While the estimate still improves at the end of the path (``best ==
    n_iter``), grow by ``max(n_iter_no_change, n_iter // 2)``: the estimates
    continue from one stage to the next (Jacobian chains, left-out runs), so
    a stage costs its new steps plus a fixed overhead, which geometric
    growth keeps to a few stages; the overshoot is at most half the path.
    Once the minimum lies behind, go to the first length where the rule can
    hold, ``best + _patience(best, n_iter_no_change)``, but by at least
    ``n_iter // 8``.
    """
    if best is None or best >= n_iter:
        return n_iter + max(n_iter_no_change, n_iter // 2)
    return max(best + _patience(best, n_iter_no_change), n_iter + max(1, n_iter // 8))


def _fit_candidate(estimator, X, y, fit_params, attrs, attr=None, n_iter_no_change=None,
                   splits=None, fold_alignment="time"):
    """Fit one grid point; return it with its estimate paths and fit time.

    With ``n_iter_no_change``, the path is grown in stages by warm-started
    refits (which continue the path bit for bit, and the Jacobian chains of
    the risk estimate) until the estimate ``attr`` has not improved during
    the last ``n_iter_no_change`` iterations, or ``max_iter`` is reached.
    See :func:`_next_stage` for the stage lengths.
    """
    with warnings.catch_warnings():
        if attr != "risk_path_":
            # the risk is only reported (cv_results_, with risk_reliable): its
            # flags do not concern the selection
            warnings.simplefilter("ignore", UnreliableEstimateWarning)
        if attr == "kfold_path_":
            return _fit_kfold(estimator, X, y, fit_params, attrs, splits, n_iter_no_change,
                              fold_alignment)
        return _fit_stages(estimator, X, y, fit_params, attrs, attr, n_iter_no_change)


def _fit_kfold(estimator, X, y, fit_params, attrs, splits, n_iter_no_change=None,
               alignment="time"):
    """The full path, and K-fold CV along it: each fold fitted once (same
    parameters, estimates off), every iterate scored on its held-out fold
    (squared error, or log loss for classifiers, weighted by
    ``sample_weight``); ``kfold_path_[t]`` is the weighted mean over all
    held-out samples of the folds' errors matched with iterate ``t`` of the
    full path (:func:`skacv.model_selection._kfold.aligned_errors`): with
    ``alignment="time"``, fold ``j``'s point ``t * step_full / step_j`` (the
    same gradient-flow time ``t * step``; the folds run as many more steps
    as that needs), with ``"iteration"`` its iterate ``t``. A fold path
    shorter than the full one (a solver that stops at convergence) keeps
    its last iterate.

    With ``n_iter_no_change``, the full path and the fold paths grow
    together in the stages of :func:`_fit_stages` (warm starts), stopped by
    the same rule on ``kfold_path_``; the full path's stages run beside the
    folds' passes where that is faster (:func:`skacv.model_selection._kfold.fit_beside`).
    """
    tic = time.perf_counter()
    sw = fit_params.get("sample_weight")
    sw = None if sw is None else np.asarray(sw, dtype=np.float64)
    # rows are taken by position: CSR for any sparse format, arrays for
    # array-likes (DataFrames keep their columns)
    Xa = X.tocsr() if sp.issparse(X) else (X if hasattr(X, "iloc") else np.asarray(X))
    off = {k: False for k in ("estimate_risk", "estimate_loo", "store_loo_predictions")
           if k in estimator.get_params(deep=False)}
    folds = []
    classifier = is_classifier(estimator)

    def make_folds():
        y_arr = np.asarray(y)
        if y_arr.ndim == 2 and y_arr.shape[1] == 1:
            y_arr = y_arr.ravel()  # the full fit has warned
        for train, test in splits:
            params = dict(fit_params)
            if sw is not None:
                params["sample_weight"] = sw[train]
            folds.append((clone(estimator).set_params(**off), _safe_indexing(Xa, train),
                          y_arr[train], params, _safe_indexing(Xa, test), y_arr[test],
                          np.ones(len(test)) if sw is None else sw[test]))

    # held-out errors of every iterate of every fold (weighted sums)
    curves = [np.zeros(0) for _ in splits]
    ratios = np.ones(len(splits))

    def fold_scores(fold, X_te, start):
        """Predictions (classifiers: linear predictors) of the fold's
        iterates from ``start``."""
        direct = getattr(fold, "_decision_path", None)
        if direct is not None:
            return direct(X_te, start)
        if classifier:
            return logit(np.clip(fold.predict_proba_path(X_te)[:, start:], 1e-15, 1 - 1e-15))
        return fold.predict_path(X_te)[:, start:]

    def score_folds():
        # held-out losses of the iterates added since the last stage only
        for j, (fold, _, _, _, X_te, y_te, w) in enumerate(folds):
            k0 = curves[j].shape[0]
            if k0 >= np.shape(fold.coef_path_)[-1]:
                continue
            P = fold_scores(fold, X_te, k0)
            if classifier:  # the datafit's log loss of the linear predictor
                loss = log_loss_terms(P, (y_te == fold.classes_[1])[:, None])
            else:
                loss = (np.asarray(y_te, dtype=np.float64)[:, None] - P) ** 2
            curves[j] = np.concatenate([curves[j], w @ loss])

    def kfold_path(T1):
        if use_stack:
            losses = block[0].losses
            return aligned_errors(list(losses.T), ratios, T1, block[0].test_weight)
        weight = float(sum(f[6].sum() for f in folds))
        return aligned_errors(curves, ratios, T1, weight)

    use_stack = not classifier and can_stack(estimator)
    block = []  # the folds as one block (skacv.model_selection._kfold)
    beside = []  # whether the full path's stages run beside the block's passes
    fold_iter = [0]  # length of the fold paths

    def set_ratios(fold_step_sizes):
        full = getattr(estimator, "step_size_", None)
        steps = np.asarray(fold_step_sizes, dtype=np.float64)
        params = estimator.get_params(deep=False)
        full_batch = params.get("solver") not in (None, "sgd", "eigenpro")
        if (alignment == "time" and full_batch and params.get("step_schedule") is None
                and full is not None and np.ndim(full) == 0
                and np.isfinite(full) and full > 0 and np.all(np.isfinite(steps))
                and np.all(steps > 0)):
            ratios[:] = float(full) / steps
        else:
            ratios[:] = 1.0

    def make_block(validated):
        # after the full fit, which has validated X (finite values included),
        # only its form; beside it, the same checks (the full fit's errors
        # are raised first: the block's are returned, not raised)
        try:
            Xv = check_array(X, accept_sparse=("csr", "csc"), dtype=[np.float64, np.float32],
                             ensure_all_finite=not validated)
            y_arr = np.asarray(y, dtype=np.float64).reshape(Xv.shape[0])
            # after the full fit, its centred X (kept for the warm-started stages)
            full = getattr(estimator, "_warm_design", None) if validated else None
            return StackedFolds(estimator, Xv, y_arr, sw, splits, kfold_dtype(Xv), full)
        except Exception as exc:
            if validated:
                raise
            return exc

    def start(**params):
        # the full data first (its own input checks speak for bad input); in
        # stages only once, at the first, and continued to the end afterwards
        estimator.set_params(**params)
        beside.append(use_stack and fit_beside(X))
        if beside[0]:  # the block's set-up beside the full path's first stage
            built = overlapped(lambda: estimator.fit(X, y, **fit_params),
                               lambda: make_block(False))[1]
            if isinstance(built, Exception):
                raise built
        else:
            estimator.fit(X, y, **fit_params)
        if not hasattr(estimator, "coef_path_"):
            return False  # the caller says why
        if use_stack:
            block.append(built if beside[0] else make_block(True))
            set_ratios(block[0].step_sizes)
        else:
            make_folds()
        return True

    def fit_folds(n_iter, params):
        """Fold paths long enough for ``n_iter`` steps of the full path."""
        if use_stack:
            block[0].advance(fold_steps(n_iter, ratios))
            return
        first = not hasattr(folds[0][0], "coef_path_")
        for fold, X_tr, y_tr, fold_params, *_ in folds:
            done = 0 if first else np.shape(fold.coef_path_)[-1] - 1
            steps = n_iter if first else max(fold_steps(n_iter, ratios), done)
            fold.set_params(**dict(params, max_iter=steps)).fit(X_tr, y_tr, **fold_params)
        if first:  # the fold step sizes are known now
            set_ratios([getattr(f[0], "step_size_", np.nan) for f in folds])
            need = fold_steps(n_iter, ratios)
            if need > n_iter:  # continue the fold paths (warm start: bit for bit)
                for fold, X_tr, y_tr, fold_params, *_ in folds:
                    warm = fold.warm_start
                    try:
                        fold.set_params(max_iter=need, warm_start=True).fit(
                            X_tr, y_tr, **fold_params)
                    finally:
                        fold.set_params(warm_start=warm)
        score_folds()

    def continue_full(n_iter):
        estimator.set_params(max_iter=n_iter, warm_start=True).fit(X, y, **fit_params)

    def stage(**params):
        first = not (block or folds)
        if first and not start(**params):
            return None
        fold_iter[0] = n_iter = params.get("max_iter", estimator.max_iter)
        if not first and beside and beside[0]:
            # the full path continued beside the folds' pass (one thread each)
            overlapped(lambda: continue_full(n_iter), lambda: fit_folds(n_iter, params))
        else:
            fit_folds(n_iter, params)
        return kfold_path(n_iter + 1)

    if n_iter_no_change is None or not _can_stage(estimator, X):
        if stage() is None:
            return estimator, {}, time.perf_counter() - tic
        if n_iter_no_change is not None and _can_stage(estimator):
            # a cheap path fitted in one go ends where the stages would have stopped
            n = np.shape(estimator.coef_path_)[-1] - 1
            m = _stop_length(kfold_path(n + 1), n_iter_no_change)
            if m < n:
                _refit_shorter(estimator, X, y, fit_params, m)
    else:
        if _grow_in_stages(estimator, lambda: [f[0] for f in folds], stage,
                           n_iter_no_change) is None:
            return estimator, {}, time.perf_counter() - tic
        # the full path, from where it is to where the folds stopped
        warm_start = estimator.warm_start
        try:
            if np.shape(estimator.coef_path_)[-1] != fold_iter[0] + 1:
                continue_full(fold_iter[0])
        finally:
            estimator.set_params(warm_start=warm_start)
            release = getattr(estimator, "_release_warm_state", None)
            if release is not None:
                release()
    n_path = np.shape(estimator.coef_path_)[-1]
    if use_stack:
        block[0].advance(fold_steps(n_path - 1, ratios))
    path = kfold_path(n_path)
    paths = _estimate_paths(estimator, attrs)
    paths["kfold_path_"] = path
    return estimator, paths, time.perf_counter() - tic


def _grow_in_stages(estimator, fitted, stage, n_iter_no_change):
    """Grow ``estimator``'s path in stages (:func:`_next_stage`):
    ``stage(max_iter=n, warm_start=True)`` fits to ``n`` iterations and
    returns the criterion path (``None``: stop, the caller says why). Stops
    once the criterion has not improved during the last ``_patience``
    iterations or at ``max_iter``; then restores ``warm_start`` and frees the
    warm state of every estimator of ``fitted()``. Returns the last path."""
    max_iter, warm_start = estimator.max_iter, estimator.warm_start
    n_iter = min(max_iter, 2 * n_iter_no_change)
    # the length the path may reach, for the choices a first stage makes for
    # the whole path (the fit loop's form, skacv.linalg._design.covariance_form_pays)
    estimator._horizon = max_iter
    # the debiasing statistics (skacv.estimates._uq) of the last stage only
    estimator._defer_uq = True
    try:
        while True:
            path = stage(max_iter=n_iter, warm_start=True)
            if path is None:
                return None
            best = _argmin_first(path)
            if n_iter >= max_iter or (best is not None
                                      and n_iter - best >= _patience(best, n_iter_no_change)):
                del estimator._defer_uq
                finish = getattr(estimator, "_finish_deferred", None)
                if finish is not None:
                    finish()
                return path
            n_iter = min(max_iter, _next_stage(n_iter, best, n_iter_no_change))
    finally:
        del estimator._horizon
        estimator.__dict__.pop("_defer_uq", None)
        estimator.__dict__.pop("_uq_pending", None)
        estimator.set_params(warm_start=warm_start)
        for est in fitted():
            release = getattr(est, "_release_warm_state", None)
            if release is not None:
                release()


def _stop_length(path, n_iter_no_change):
    """Where the stages of :func:`_grow_in_stages` stop on a criterion path
    computed in one go (its last index when the rule never holds)."""
    T = len(path) - 1
    n = min(T, 2 * n_iter_no_change)
    while True:
        best = _argmin_first(path[: n + 1])
        if n >= T or (best is not None and n - best >= _patience(best, n_iter_no_change)):
            return n
        n = min(T, _next_stage(n, best, n_iter_no_change))


def _refit_shorter(estimator, X, y, fit_params, n_iter):
    """Refit ``estimator`` from zero to ``n_iter`` iterations (a prefix of its
    path: a path fitted in one go, cut where the early stopping stops)."""
    warm_start = estimator.warm_start
    try:
        estimator.set_params(max_iter=n_iter, warm_start=False).fit(X, y, **fit_params)
    finally:
        estimator.set_params(warm_start=warm_start)


def _fit_stages(estimator, X, y, fit_params, attrs, attr, n_iter_no_change):
    tic = time.perf_counter()
    if n_iter_no_change is None or not _can_stage(estimator, X):
        estimator.fit(X, y, **fit_params)
        if n_iter_no_change is not None and _can_stage(estimator) and hasattr(estimator, attr):
            # a cheap path fitted in one go ends where the stages would have
            # stopped (estimator_.n_iter_ is what the search needed)
            m = _stop_length(_selectable(_estimate_paths(estimator, attrs), attr),
                             n_iter_no_change)
            if m < estimator.n_iter_:
                _refit_shorter(estimator, X, y, fit_params, m)
    else:
        def stage(**params):
            estimator.set_params(**params).fit(X, y, **fit_params)
            if not hasattr(estimator, attr):
                return None  # the caller says what is missing
            return _selectable(_estimate_paths(estimator, attrs), attr)

        _grow_in_stages(estimator, lambda: [estimator], stage, n_iter_no_change)
    fit_time = time.perf_counter() - tic
    return estimator, _estimate_paths(estimator, attrs), fit_time


def _estimate_paths(estimator, attrs):
    return {a: np.asarray(getattr(estimator, a), dtype=np.float64)
            for a in attrs if hasattr(estimator, a)}


def _finite_min(path):
    path = np.where(np.isfinite(path), path, np.inf)
    return float(path.min()) if path.size else np.inf


def _selectable(paths, attr):
    """The criterion path with the iterates flagged by ``risk_reliable_`` set
    to +inf (never selected)."""
    path = np.asarray(paths[attr], dtype=np.float64)
    if attr == "risk_path_" and "risk_reliable_" in paths:
        path = np.where(paths["risk_reliable_"] > 0, path, np.inf)
    return path


class _UndefinedEstimate(ValueError):
    """The criterion is undefined at every iterate of the grid."""


def _kfold_alpha_path(estimator, X, y, sample_weight, splits, alphas, options):
    """K-fold CV along the alpha path: the converged fits of every alpha on
    each fold's training rows (:func:`skacv.risk_alpha_path`, warm-started
    along ``alphas``, the ``tol`` and ``max_iter`` of ``options``) scored on
    its held-out rows; the weighted mean squared error over all held-out
    samples, one value per alpha (``alphas`` decreasing)."""
    kw = {k: v for k, v in options.items() if k in ("tol", "max_iter", "eps")}
    Xr = X.tocsr() if sp.issparse(X) else np.asarray(X)
    y = np.asarray(y, dtype=np.float64)
    sw = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    total, weight = np.zeros(len(alphas)), 0.0
    for train, test in splits:
        fold = risk_alpha_path(clone(estimator), Xr[train], y[train], alphas=alphas,
                               sample_weight=None if sw is None else sw[train],
                               n_alphas_no_change=None, **kw)
        pred = np.asarray(Xr[test] @ fold.coefs, dtype=np.float64) + fold.intercepts
        w = np.ones(len(test)) if sw is None else sw[test]
        total += w @ (y[test, None] - pred) ** 2
        weight += float(w.sum())
    return total / weight


def _too_few_message(n_samples, criterion, df):
    """The error of an alpha path on which ``criterion`` is undefined at every alpha."""
    df = np.asarray(df, dtype=np.float64)
    df = df[np.isfinite(df)]
    need = int(np.ceil(df.min())) + 2 if df.size else 3
    what = {"risk": "the converged risk estimate", "loo": "the converged leave-one-out",
            "kfold": "K-fold CV"}[criterion]
    return (f"n_samples={n_samples} is too few for {what} along this alpha grid: every "
            f"alpha's solution fits the data exactly (degrees of freedom >= n_samples), "
            f"where the estimate is undefined. At least {max(need, n_samples + 1)} samples "
            "are needed for these penalties; give more samples or larger alphas.")


class TrajectoryEarlyStoppingCV(MetaEstimatorMixin, BaseEstimator):
    """Choose the iteration and the parameters of a trajectory estimator along
    its path, by an estimate of its out-of-sample error: no refit.

    The wrapped estimator (e.g. :class:`TrajectoryLasso`,
    :class:`IterativeRidge`) is fitted once per point of ``param_grid`` on the
    whole training set. Each fit stores every iterate and an estimate of its
    out-of-sample risk: ``risk_path_`` (the memory-matrix estimate of Bellec &
    Tan 2024) or ``loo_path_`` (iterative approximate leave-one-out, Luo, Ren &
    Barber 2023), or K-fold CV along the path (``kfold_path_``: the folds
    fitted once each, for ISTA and FISTA as one block that costs about one
    fit). The pair (grid point, iteration) with the smallest estimate is
    selected, and the fitted estimator of that grid point is kept with its
    ``coef_`` / ``intercept_`` set to the selected iterate. One criterion
    decides everything: with ``search="path"`` the penalty is chosen by the
    same quantity at convergence (the converged risk, the converged
    leave-one-out or K-fold CV along the alpha path), then the iteration.

    Compared with ``GridSearchCV`` over ``max_iter`` (k folds times the number
    of candidate lengths, then a refit), this costs one path per grid point
    (and, with K-fold, its folds' paths).

    Parameters
    ----------
    estimator : estimator object
        A trajectory estimator: ``fit`` sets ``coef_path_``,
        ``intercept_path_`` and the path of the criterion. Its
        ``estimate_risk`` (criterion ``"risk"``) or ``estimate_loo``
        (``"loo"``) parameter is switched on in the clones; the other estimate
        is computed only if the estimator asks for it. Put preprocessing in a
        :class:`~sklearn.pipeline.Pipeline` *around* this meta-estimator.
    criterion : {"auto", "risk", "loo", "kfold"}, default="auto"
        The quantity that chooses the iteration and, with ``search="path"``,
        the penalty. ``"risk"`` minimises ``risk_path_`` (iterates flagged
        by ``risk_reliable_`` excluded) and, along alpha, its limit at
        convergence (:func:`skacv.risk_alpha_path`); ``"loo"`` minimises
        ``loo_path_`` and, along alpha, the leave-one-out error at
        convergence (exact for ridge; the leverage formula on the support
        for the Lasso, exact when removing a sample keeps the support);
        ``"kfold"`` minimises K-fold CV along the path (``kfold_path_``:
        each of the ``cv`` folds fitted once with the estimates off, every
        iterate scored on its held-out fold; then one fit on all the data,
        whose iterate is selected) and, along alpha, K-fold CV of the
        converged fits (as ``LassoCV``). For ISTA, FISTA and the full-batch
        ``IterativeRidge`` solvers the folds run as one block (one pass over
        ``X`` per product for all folds, in ``kfold_dtype``, float32 by
        default: see :func:`skacv.get_config`).
        ``"auto"`` is an estimate without refits: ``"risk"`` for the
        least-squares solvers with full batches (gradient descent, Nesterov,
        heavy ball, EigenPro: spectral, exact traces when cheap; ISTA and
        FISTA: the memory-matrix estimate); ``"loo"`` for the others
        (proximal SGD, robust and logistic losses), tracking every sample
        up to ``AUTO_LOO_SAMPLES = 100`` and above a random subsample of 100
        to 500 samples (as many as the larger of the K-fold budget and
        about a second allow, estimated from ``n_samples``,
        ``n_features``, ``max_iter`` and the tracked samples; a
        control-variate estimate, see ``loo_subsample`` in
        :class:`TrajectoryLasso`). K-fold CV replaces the risk only where
        the fitted estimate says it is unreliable (``risk_reliable_`` flags
        an iterate at or before the chosen one plus ``n_iter_no_change``):
        an :class:`~skacv.exceptions.UnreliableEstimateWarning` says why;
        and, only when asked for with a ``risk_time_budget`` (see
        :func:`skacv.get_config`; none by default), for ISTA and FISTA with
        independent probes (1000 samples and more) in a grid search, where
        the estimate's Jacobian chains would cost more than that many fits
        (predicted from the supports before the chains run,
        :func:`skacv.estimates._risk.chain_cost_in_fits`): a
        :class:`~sklearn.exceptions.EfficiencyWarning` gives the predicted
        cost. Wide supports (a small alpha on a correlated design) cost 10
        fits and more today. Only that estimate is computed (and any the estimator switches on
        against its default), unless ``"loo"`` is chosen and ``n_samples *
        n_features <= 200_000``: then the risk too, and both appear in
        ``cv_results_``. The criterion used is ``criterion_``.
    cv : int, cross-validation generator or iterable, default=5
        Folds of ``criterion="kfold"`` (and of ``"auto"`` when it chooses
        it). An int is the number of folds (``StratifiedKFold`` for
        classifiers, ``KFold`` otherwise), shuffled with ``random_state``
        when it is given, in order (as scikit-learn's ``cv=int``) when it is
        ``None``: default fits are deterministic. Anything else is used as in
        :func:`~sklearn.model_selection.check_cv`. On small problems 10
        folds choose closer to the oracle iteration than 5, at about 1.3x
        the cost when the folds run as one block (see ``fold_alignment``).
    fold_alignment : {"time", "iteration"}, default="time"
        How K-fold CV along the path matches the folds' iterates with the
        full path's. ``"time"``: iterate ``t`` of the full path (step size
        ``eta``) with the point ``t * eta / eta_j`` of fold ``j``'s path
        (step size ``eta_j``, its own rule on its rows: its top eigenvalue
        differs), linearly interpolated between its iterates, the same
        gradient-flow time ``t * eta``; the folds run as many more steps as
        that needs. ``"iteration"``: the same index ``t`` (textbook K-fold CV
        along the path). Folds train on ``(K - 1) / K`` of the data and
        their steps are shorter when ``p`` is comparable to ``n``: matched
        by index, their best iteration comes late, and on small problems the
        choice lands further from the oracle (measured in the user guide,
        "The default criterion").
        Mini-batch solvers (SGD, EigenPro), step-size schedules and solvers
        whose step sizes are not known are matched by index.
    param_grid : dict, list of dicts or None, default=None
        Parameters of ``estimator`` to search, as in
        :class:`~sklearn.model_selection.GridSearchCV` (e.g.
        ``{"alpha": [0.1, 0.03, 0.01]}``). ``None``: a single fit.
    search : {"auto", "grid", "path"}, default="auto"
        ``"auto"``: ``"path"`` when ``param_grid`` is ``{"alpha": [...]}``
        with at least two values and the estimator is a least-squares one
        with an l1 or l2 penalty (:func:`skacv.risk_alpha_path` follows it),
        ``"grid"`` otherwise; the strategy used is ``search_``.
        ``"grid"`` fits one trajectory per grid point. ``"path"`` (penalty
        only: ``param_grid`` is ``None`` or ``{"alpha": [...]}``) first
        solves the whole alpha path to convergence with warm starts
        (:func:`skacv.risk_alpha_path`) and scores it with the criterion
        at convergence (the converged risk; the converged leave-one-out;
        K-fold CV of the converged fits of each fold), picks alpha there,
        then fits the from-zero trajectory at that alpha (and
        ``path_neighbors`` alphas on each side) to pick the iteration.
    path_neighbors : int, default=0
        ``search="path"`` only: number of alphas on each side of the path's
        choice whose trajectories are fitted too; the joint argmin over those
        trajectories is selected.
    path_params : dict or None, default=None
        ``search="path"`` only: extra keyword arguments of
        :func:`skacv.risk_alpha_path` (``n_alphas``, ``eps``, ``tol``,
        ``max_iter``, ``n_alphas_no_change``). By default the path stops
        after 3 alphas without a new minimum of the estimated risk
        (``n_alphas_no_change=3``; ``None`` runs the whole grid).
    n_iter_no_change : int or None, default=10
        Early stopping of each path on its own estimate: the path is grown by
        warm-started refits (bit for bit the same iterates, and the Jacobian
        chains of ``risk_path_`` and the left-out runs of ``loo_path_`` are
        continued, not recomputed) and stops once
        the estimate has not improved during the last ``n_iter_no_change``
        iterations and half the best iteration (``RELATIVE_PATIENCE``: the
        bumps of an estimate last longer on longer paths), or at the
        estimator's ``max_iter``. The selection is then
        the argmin over the path computed so far, and ``estimator_.n_iter_``
        (and its ``max_iter``) is where the path stopped. The rule is checked
        at the end of stages (the first is ``2 * n_iter_no_change`` long; a
        stage grows the path by half while the estimate still improves
        at its end, else up to the first length where the rule can hold), so
        the path may run a little past the first iteration where it holds.
        ``None`` fits every path to ``max_iter`` (the argmin over whole
        paths). Estimators without ``max_iter`` and ``warm_start`` are always
        fitted to the end. So are paths whose fit and estimates are
        estimated to cost less than ``STAGE_MIN_FLOPS`` (a few
        milliseconds: the fixed cost of a stage would exceed the saving), or,
        for linear methods with the spectral risk (ridge GD), whose fit costs
        less than ``STAGE_MIN_FLOPS_LINEAR`` (a few tenths of a second: their
        estimates cost the same at any length, stopping saves only steps);
        such a path is then refitted to where the stages would have stopped,
        so that ``estimator_.n_iter_`` is the same either way.
    n_jobs : int or None, default=None
        Grid points fitted in parallel with joblib. ``None`` means 1 unless
        in a :func:`joblib.parallel_backend` context; ``-1`` uses all
        processors. Any joblib backend works (``"loky"``, ``"threading"``,
        ``"dask"`` with a ``distributed.Client``, ``"ray"`` after
        ``ray.util.joblib.register_ray()``).
    random_state : int, RandomState instance or None, default=None
        Seed given to the clones whose own ``random_state`` is ``None``
        (Hutchinson probes, leave-one-out subsample, mini-batches): one
        integer drawn per ``fit``, the same for every grid point. An int
        makes the fit reproducible.
    verbose : int, default=0
        Progress messages (joblib's and one line per selection).

    Attributes
    ----------
    criterion_ : {"risk", "loo", "kfold"}
        The criterion used (``criterion`` resolved).
    kfold_path_ : ndarray of shape (n_iter_ + 1,)
        Held-out error of every iterate of the selected grid point, averaged
        over the folds (only when ``criterion_ == "kfold"``), matched as
        ``fold_alignment`` says.
    n_splits_ : int
        Number of folds (only when ``criterion_ == "kfold"``).
    search_ : {"grid", "path"}
        The search strategy used (``search`` resolved).
    estimator_ : estimator object
        The fitted clone of the selected grid point. Its whole path
        (``coef_path_``, ``risk_path_``, ...) is kept; its ``coef_`` and
        ``intercept_`` are the selected iterate, so ``estimator_.predict``
        predicts with it.
    best_iteration_ : int
        Selected iteration (``0`` is the starting point).
    best_params_ : dict
        Selected grid point (``{}`` without ``param_grid``).
    best_index_ : int
        Row of ``cv_results_`` of the selected grid point.
    best_risk_ : float
        The criterion at the selection (the ``risk_path_``, ``loo_path_``
        or ``kfold_path_`` value of ``criterion_`` at ``best_iteration_``),
        an estimate of ``E[(y_new - f(x_new))^2]`` for regressors, the
        log-loss for classifiers. Lower is better.
    best_score_ : float
        ``-best_risk_``: higher is better, as ``GridSearchCV.best_score_``
        (whose regression scorers are negated errors too).
    risk_path_ : ndarray of shape (estimator_.n_iter_ + 1,)
        ``estimator_.risk_path_``, when the estimator computed it.
    loo_path_ : ndarray of shape (estimator_.n_iter_ + 1,)
        ``estimator_.loo_path_``, when the estimator computed it.
    coef_ : ndarray of shape (n_features,) or (n_classes, n_features)
        ``estimator_.coef_`` (the selected iterate).
    intercept_ : float or ndarray
        ``estimator_.intercept_``.
    classes_ : ndarray of shape (n_classes,)
        Classifiers only.
    cv_results_ : dict of ndarrays
        One row per grid point (per alpha of the path for ``search="path"``),
        ready for ``pandas.DataFrame``: ``params`` (list of dicts),
        ``param_<name>`` (masked arrays), ``best_iteration``,
        ``min_<criterion>`` (the smallest estimate on that path),
        ``rank_<criterion>``, ``<criterion>_path`` (object array: the whole
        path of each row; also ``risk_path`` / ``loo_path`` when computed, and
        ``risk_reliable`` with ``risk_path``),
        ``n_iter`` (length of the fitted path: where it stopped with
        ``n_iter_no_change``) and ``fit_time`` (all stages). With ``search="path"``
        one row per alpha of the grid (decreasing), also ``path_<criterion>``
        (the criterion at convergence, which chose alpha), ``path_risk``
        (converged risk estimate), ``path_df``, ``path_n_iter``,
        ``trajectory_fitted`` and ``reason`` (empty for a scored alpha;
        else why it has no score, e.g. the alpha path stopped before it:
        its scores are NaN); trajectory columns are masked (or ``None``)
        for alphas without a trajectory.
    alpha_path_ : Bunch
        ``search="path"`` only: the result of :func:`skacv.risk_alpha_path`.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` has feature names.

    See Also
    --------
    sklearn.model_selection.GridSearchCV : k-fold search with a refit.
    RiskPathDisplay : plot the risk path and the selected iteration.

    Notes
    -----
    The estimates are consistent in the proportional regime (``n`` and
    ``p`` large and comparable) for Gaussian-like designs; see the user
    guide. With Hutchinson traces (``n_probes=int``) the estimate carries a
    small random error, so the selected iteration can move between close
    iterates from one probe seed to another (``random_state`` fixes it);
    ``n_probes="auto"`` computes exact traces when they are cheap. The
    memory-matrix estimate of proximal momentum methods (FISTA) can break
    down on correlated designs: its flagged iterates (``risk_reliable_``) are
    never selected, and ``criterion="auto"`` falls back to K-fold CV along
    the path, with a warning, when they concern the choice. A choice on the
    edge of the search (the first or last value of a numeric grid of at
    least 3 values, or the iteration ``max_iter``) raises a
    :class:`~skacv.exceptions.SelectionBoundaryWarning` with the fix.
    Estimates closer than a relative ``1e-9`` are ties: the first grid point
    and the earliest iteration win.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso
    >>> X, y = make_regression(n_samples=200, n_features=300, n_informative=20,
    ...                        noise=5.0, random_state=0)
    >>> search = TrajectoryEarlyStoppingCV(
    ...     TrajectoryLasso(max_iter=100, random_state=0),
    ...     param_grid={"alpha": [3.0, 1.0, 0.3, 0.1]},
    ... ).fit(X, y)
    >>> sorted(search.cv_results_["params"], key=lambda d: d["alpha"])[0]
    {'alpha': 0.1}
    >>> search.search_, search.criterion_  # alpha and iteration by the risk
    ('path', 'risk')
    >>> bool(search.best_risk_ == search.risk_path_[search.best_iteration_])
    True
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "predict"])],
        "criterion": [StrOptions({"auto", *_CRITERIA})],
        "cv": ["cv_object"],
        "fold_alignment": [StrOptions({"time", "iteration"})],
        "param_grid": [dict, list, None],
        "search": [StrOptions({"auto", "grid", "path"})],
        "path_neighbors": [Interval(Integral, 0, None, closed="left")],
        "path_params": [dict, None],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left"), None],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, estimator, *, criterion="auto", cv=5, fold_alignment="time",
                 param_grid=None, search="auto", path_neighbors=0, path_params=None,
                 n_iter_no_change=10, n_jobs=None, random_state=None, verbose=0):
        self.estimator = estimator
        self.criterion = criterion
        self.cv = cv
        self.fold_alignment = fold_alignment
        self.param_grid = param_grid
        self.search = search
        self.path_neighbors = path_neighbors
        self.path_params = path_params
        self.n_iter_no_change = n_iter_no_change
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _resolve(self, X):
        """``criterion_``, ``search_`` and the clones' seed for this fit."""
        try:
            n_samples, n_features = _num_samples(X), _num_features(X)
        except (TypeError, ValueError):
            n_samples = n_features = 0  # the estimator's own validation says why
        if self.criterion == "auto":
            n_folds = self.cv if isinstance(self.cv, Integral) else 5
            self.criterion_, self._loo_subsample = auto_criterion(
                self.estimator, n_samples, n_features, n_folds)
            # both estimates in cv_results_ when the problem is small
            self._both = (n_samples * n_features <= AUTO_BOTH_SIZE
                          and self.criterion_ == "loo")
        else:
            self.criterion_, self._loo_subsample, self._both = self.criterion, None, False
        grid = self.param_grid
        if self.search == "auto":
            alpha_only = (isinstance(grid, dict) and set(grid) == {"alpha"}
                          and len(grid["alpha"]) > 1)
            self.search_ = ("path" if alpha_only
                            and supports_alpha_path(self.estimator, n_samples) else "grid")
        else:
            self.search_ = self.search
        self._seed = check_random_state(self.random_state).randint(np.iinfo(np.int32).max)

    def _folds(self, X, y):
        """The folds of ``criterion_ == "kfold"`` (the same for every grid point)."""
        if self.criterion_ != "kfold":
            return None
        classifier = is_classifier(self.estimator)
        if isinstance(self.cv, Integral):
            n = _num_samples(X)
            if n < self.cv:
                raise ValueError(
                    f"n_samples={n} is too few for K-fold CV with cv={self.cv} folds: at "
                    f"least {self.cv} samples are needed (one per held-out fold). Lower cv "
                    "or use criterion='risk' or 'loo'.")
            kind = StratifiedKFold if classifier else KFold
            cv = (kind(n_splits=self.cv) if self.random_state is None
                  else kind(n_splits=self.cv, shuffle=True, random_state=self._seed))
        else:
            cv = check_cv(self.cv, y, classifier=classifier)
        return list(cv.split(X, y))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        sub = get_tags(self.estimator)
        tags.estimator_type = sub.estimator_type
        tags.input_tags = sub.input_tags
        tags.target_tags = sub.target_tags
        tags.regressor_tags = sub.regressor_tags
        tags.classifier_tags = sub.classifier_tags
        return tags

    # ------------------------------------------------------------ routing
    def get_metadata_routing(self):
        """Get metadata routing of this object.

        ``fit`` metadata (``sample_weight``) go to the estimator's ``fit``
        (hence to its estimates); ``score`` metadata to its ``score``.

        Returns
        -------
        routing : MetadataRouter
        """
        return MetadataRouter(owner=self.__class__.__name__).add(
            estimator=self.estimator,
            method_mapping=MethodMapping()
            .add(caller="fit", callee="fit")
            .add(caller="score", callee="score"),
        )

    def _route_fit(self, sample_weight, params):
        if _routing_enabled():
            if sample_weight is not None:
                params = {**params, "sample_weight": sample_weight}
            return dict(process_routing(self, "fit", **params).estimator.fit)
        _raise_for_params(params, self, "fit")
        return {} if sample_weight is None else {"sample_weight": sample_weight}

    # ---------------------------------------------------------------- fit
    def _prepared(self, params):
        est = clone(self.estimator)
        own = est.get_params(deep=False)
        if "random_state" in own and own["random_state"] is None:
            # one seed for every grid point: common random numbers across the grid
            est.set_params(random_state=self._seed)
        if params:
            est.set_params(**params)
        flag = _CRITERIA[self.criterion_][1]
        if flag in own:
            est.set_params(**{flag: True})
        if self.criterion_ == "kfold":
            # the folds are the estimate: the others only where the estimator
            # switches them on against its class default (asked for)
            defaults = inspect.signature(type(est).__init__).parameters
            est.set_params(**{k: False for k in ("estimate_risk", "estimate_loo")
                              if k in own and (not own[k] or defaults[k].default is not False)})
        if self._loo_subsample is not None and self.criterion_ == "loo":
            est.set_params(loo_subsample=self._loo_subsample)
        if (self.criterion == "auto" and self.criterion_ != "kfold"
                and "estimate_risk" in own and "estimate_loo" in own):
            # the other estimate only when both are cheap and it exists (no
            # memory-matrix risk with mini-batches)
            other = "estimate_loo" if self.criterion_ == "risk" else "estimate_risk"
            available = getattr(est, "_risk_available", lambda: True)()
            default = inspect.signature(type(est).__init__).parameters[other].default
            asked = bool(own[other]) and default is False  # against the class default
            est.set_params(**{other: bool((self._both and available) or asked)})
        return est

    def _fit_candidates(self, candidates, X, y, fit_params):
        """Fit every candidate; keep only the fitted estimators that can win."""
        attr = _CRITERIA[self.criterion_][0]
        attrs = _PATH_ATTRS
        # the caller's configuration and a share of the BLAS threads in every
        # worker (captured here, in the caller's thread)
        config, sklearn_config = get_config(), sklearn.get_config()
        threads = blas_threads_per_worker(self.n_jobs) if len(candidates) > 1 else None
        jobs = (delayed(_fit_candidate, config, threads, sklearn_config)(
            self._prepared(params), X, y, fit_params, attrs, attr, self.n_iter_no_change,
            self._splits, self.fold_alignment)
            for params in candidates)
        paths, times, mins, kept = [], [], [], {}
        best = np.inf
        # results in order, as a generator so that discarded fits are freed early
        results = parallel(self.n_jobs, self.verbose, generator=True)(jobs)
        for i, (est, est_paths, fit_time) in enumerate(results):
            if not (hasattr(est, "coef_path_") and hasattr(est, "intercept_path_")):
                raise TypeError(
                    f"{type(est).__name__} does not store its path (coef_path_, "
                    "intercept_path_): TrajectoryEarlyStoppingCV selects an iterate of "
                    "the stored path without refitting. Read its risk_path_ directly and "
                    "refit with max_iter set to the chosen iteration."
                )
            if attr not in est_paths:
                raise ValueError(
                    f"criterion={self.criterion_!r} reads {attr} but "
                    f"{type(est).__name__} did not set it in fit. Use an estimator "
                    f"that estimates it (parameter {_CRITERIA[self.criterion_][1]})."
                )
            paths.append(est_paths)
            times.append(fit_time)
            mins.append(_finite_min(_selectable(est_paths, attr)))
            best = min(best, mins[-1])
            # keep only the fits that can still win (ties included); the others
            # are freed as soon as they arrive
            kept[i] = est
            kept = {j: e for j, e in kept.items() if mins[j] <= best + _TIE_RTOL * abs(best)}
        return paths, np.array(times), kept

    def _select(self, paths):
        """Joint argmin over (grid point, iteration), ties to the first."""
        attr = _CRITERIA[self.criterion_][0]
        selectable = [_selectable(p, attr) for p in paths]
        mins = np.array([_finite_min(p) for p in selectable])
        m = mins.min()
        if not np.isfinite(m):
            raise _UndefinedEstimate(
                f"Every {attr} of the grid is NaN, infinite or flagged as unreliable "
                "(risk_reliable_): the estimate is undefined (e.g. a diverging path or "
                "degenerate data). Try criterion='loo'."
            )
        threshold = m + _TIE_RTOL * abs(m)
        i = int(np.flatnonzero(mins <= threshold)[0])
        path = np.where(np.isfinite(selectable[i]), selectable[i], np.inf)
        best_iters = [int(np.argmin(np.where(np.isfinite(p), p, np.inf)))
                      for p in selectable]
        best_iters[i] = int(np.flatnonzero(path <= threshold)[0])
        return i, best_iters[i], mins, np.array(best_iters)

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, sample_weight=None, **fit_params):
        """Fit the estimator once per grid point and select the best iterate.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data.
        y : array-like of shape (n_samples,)
            Target values.
        sample_weight : array-like of shape (n_samples,), default=None
            Frequency weights, passed to the estimator's ``fit`` and hence
            used by its risk / leave-one-out estimates. With metadata routing
            enabled it is routed like any other metadata (request it with
            ``estimator.set_fit_request(sample_weight=True)``).
        **fit_params : dict
            Other metadata for the estimator's ``fit``; only with
            ``sklearn.set_config(enable_metadata_routing=True)``.

        Returns
        -------
        self : object
            Fitted meta-estimator.
        """
        routed = self._route_fit(sample_weight, fit_params)
        dask = is_dask(X, y, routed.get("sample_weight"))
        if dask:  # one pass (skacv.linalg._dask)
            X, y, routed, self._splits = sufficient_search(self, X, y, routed)
        else:
            self._resolve(X)
            self._splits = self._folds(X, y)
        auto_risk = self.criterion == "auto" and self.criterion_ == "risk" and not dask
        # with a risk_time_budget (skacv.config_context; none by default, so
        # that "auto" keeps the no-refit estimate whatever it costs) "auto"
        # uses K-fold where the ISTA/FISTA chains would cost more; not along
        # the alpha path, whose K-fold replacement refits every fold's
        # converged path (several times the estimate's cost)
        budget = get_config()["risk_time_budget"]
        if auto_risk and self.search_ != "grid":
            budget = None
        why = costly = None
        try:
            with config_context(risk_time_budget=budget):
                self._search(X, y, routed)
            why = None if dask else self._unreliable_risk()
        except _UndefinedEstimate as exc:
            if not auto_risk:
                raise
            why = str(exc)
        except EstimateBudgetError as exc:
            if not auto_risk:
                raise
            costly = str(exc)
        if costly is not None:
            warnings.warn(
                f"criterion='auto' used K-fold CV along the path (cv={self.cv!r}) instead of "
                f"the risk estimate: {costly} Set criterion='risk' to compute it anyway, or "
                "criterion='kfold' to skip this check.", EfficiencyWarning, stacklevel=2)
            why = costly
        elif why is not None:
            # no no-refit estimate is reliable here: K-fold CV, and say why
            warnings.warn(
                f"criterion='auto' used K-fold CV along the path (cv={self.cv!r}) instead of "
                f"the risk estimate: {why} Set criterion='kfold' to skip the estimate, or "
                "criterion='loo' (exact leave-one-out, slower) to keep a no-refit choice.",
                UnreliableEstimateWarning, stacklevel=2)
        if why is not None:
            self.criterion_, self._loo_subsample, self._both = "kfold", None, False
            try:
                self._splits = self._folds(X, y)
            except ValueError as exc:
                raise ValueError(
                    f"n_samples={_num_samples(X)} is too few for criterion='auto': {why} "
                    f"And {exc}") from exc
            self._search(X, y, routed)
        self._warn_boundary()
        est = self.estimator_
        selected = self._selected_paths
        self.best_risk_ = float(selected[_CRITERIA[self.criterion_][0]][self.best_iteration_])
        self.best_score_ = -self.best_risk_
        set_iterate(est, self.best_iteration_)
        for name in ("risk_path_", "loo_path_", "kfold_path_", "feature_names_in_"):
            if hasattr(self, name):
                delattr(self, name)
            if name == "kfold_path_" and name in selected:
                self.kfold_path_ = selected[name]
            elif hasattr(est, name):
                setattr(self, name, getattr(est, name))
        if self._splits is not None:
            self.n_splits_ = len(self._splits)
        elif hasattr(self, "n_splits_"):
            del self.n_splits_
        del self._selected_paths, self._splits
        self.n_features_in_ = est.n_features_in_
        if self.verbose:
            print(f"[TrajectoryEarlyStoppingCV] selected {self.best_params_} at iteration "
                  f"{self.best_iteration_}: estimated {self.criterion_} {self.best_risk_:.6g}")
        return self

    def _search(self, X, y, routed):
        # the alpha path and the candidates fitted in this thread share the
        # design of X (one centred copy, one Gram matrix; skacv.linalg._design)
        with shared_designs():
            if self.search_ == "path":
                self._fit_path_search(X, y, routed)
            else:
                self._fit_grid_search(X, y, routed)

    def _unreliable_risk(self):
        """Why the risk estimate of an ``"auto"`` choice cannot be trusted
        (``None`` when it can): ``risk_reliable_`` flags an iterate of the
        chosen path at or before the last one the early stopping looked at
        (``best_iteration_ + n_iter_no_change``): the minimum may lie among
        the flagged iterates."""
        if not (self.criterion == "auto" and self.criterion_ == "risk"):
            return None
        flags = self._selected_paths.get("risk_reliable_")
        if flags is None:
            return None
        window = self.best_iteration_ + (self.n_iter_no_change or len(flags))
        flagged = np.flatnonzero(~(np.asarray(flags[: window + 1]) > 0))
        if flagged.size == 0:
            return None
        return (f"risk_reliable_ flags {flagged.size} iterates of the chosen path from "
                f"iteration {flagged[0]} on (the chosen iteration is "
                f"{self.best_iteration_}), so its minimum is not trustworthy.")

    def _warn_boundary(self):
        """A choice on the edge of what was searched: the grid's first or
        last value of a numeric parameter with at least 3 values, or the last
        iteration ``max_iter``."""
        grids = self.param_grid if isinstance(self.param_grid, list) else [self.param_grid]
        if self.search_ == "path":
            values = {"alpha": [r["alpha"] for r in self.cv_results_["params"]]}
            grids = [values]
        for name, chosen in self.best_params_.items():
            for grid in grids:
                vals = (grid or {}).get(name)
                numeric = vals is not None and len(vals) >= 3 and all(
                    isinstance(v, (Real, np.number)) and not isinstance(v, (bool, np.bool_))
                    for v in vals)
                if not numeric or chosen not in vals:
                    continue
                if chosen in (min(vals), max(vals)):
                    side = "smallest" if chosen == min(vals) else "largest"
                    warnings.warn(
                        f"The chosen {name}={chosen!r} is the {side} value of the grid: the "
                        f"best {name} may lie outside it. Widen the grid of {name!r} "
                        f"(param_grid) beyond {chosen!r}.", SelectionBoundaryWarning,
                        stacklevel=4)
                break
        params = {**self.estimator.get_params(deep=False), **self.best_params_}
        max_iter = params.get("max_iter")
        if isinstance(max_iter, Integral) and self.best_iteration_ >= max_iter:
            warnings.warn(
                f"The chosen iteration is the last one, max_iter={max_iter}: the "
                f"{self.criterion_} estimate was still decreasing there. Raise max_iter "
                f"(e.g. to {2 * max_iter}).", SelectionBoundaryWarning, stacklevel=4)

    def _candidates(self):
        if self.param_grid is None:
            return [{}]
        candidates = list(ParameterGrid(self.param_grid))
        if not candidates:
            raise ValueError("param_grid is empty: give at least one value per parameter.")
        return candidates

    def _fit_grid_search(self, X, y, fit_params):
        candidates = self._candidates()
        paths, times, kept = self._fit_candidates(candidates, X, y, fit_params)
        i, t, mins, best_iters = self._select(paths)
        self._selected_paths = paths[i]
        self.estimator_ = kept[i]
        self.best_index_ = i
        self.best_iteration_ = t
        self.best_params_ = candidates[i]
        self.cv_results_ = self._results(candidates, paths, mins, best_iters, times)

    def _results(self, candidates, paths, mins, best_iters, times, rows=None, n_rows=None):
        """cv_results_ (rows: the fitted candidates, or ``rows`` of ``n_rows``)."""
        n = len(candidates) if n_rows is None else n_rows
        rows = np.arange(n) if rows is None else np.asarray(rows)
        results = {"params": list(candidates)}
        results.update(_param_columns(candidates))
        crit = self.criterion_
        fitted = np.zeros(n, dtype=bool)
        fitted[rows] = True
        best_iteration = np.ma.MaskedArray(np.zeros(n, dtype=int), mask=~fitted)
        best_iteration[rows] = best_iters
        min_crit = np.ma.MaskedArray(np.full(n, np.nan), mask=~fitted)
        min_crit[rows] = mins
        rank = np.ma.MaskedArray(np.zeros(n, dtype=np.int32), mask=~fitted)
        # rank like scipy's "min" method (ties share the smallest rank)
        order = np.asarray(mins)
        rank[rows] = 1 + np.searchsorted(np.sort(order), order, side="left")
        results["best_iteration"] = best_iteration
        results[f"min_{crit}"] = min_crit
        results[f"rank_{crit}"] = rank
        for attr in (*_PATH_ATTRS, "kfold_path_"):
            if any(attr in p for p in paths):
                col = np.empty(n, dtype=object)
                for r, p in zip(rows, paths, strict=True):
                    col[r] = p.get(attr)
                results[attr[:-1]] = col
        n_iter = np.ma.MaskedArray(np.zeros(n, dtype=int), mask=~fitted)
        n_iter[rows] = [len(p[_CRITERIA[crit][0]]) - 1 for p in paths]
        results["n_iter"] = n_iter
        fit_time = np.ma.MaskedArray(np.full(n, np.nan), mask=~fitted)
        fit_time[rows] = times
        results["fit_time"] = fit_time
        if n_rows is not None:
            results["trajectory_fitted"] = fitted
        return results

    def _fit_path_search(self, X, y, fit_params):
        grid = self.param_grid
        if grid is not None and (not isinstance(grid, dict) or set(grid) != {"alpha"}):
            raise ValueError(
                "search='path' searches the penalty only: param_grid must be None or "
                f"{{'alpha': [...]}}, got {grid!r}. Use search='grid' for other parameters."
            )
        extra = set(fit_params) - {"sample_weight"}
        if extra:
            raise ValueError(f"search='path' supports sample_weight only, got {sorted(extra)}.")
        given = None if grid is None else list(grid["alpha"])
        alphas = None if given is None else np.asarray(given, dtype=np.float64)
        # the estimator's own input checks and messages (y=None, NaN, empty
        # data); the trajectories are fitted on X as given (feature names)
        Xv, yv = X, y
        validate = getattr(clone(self.estimator), "_validate_xy", None)
        if validate is not None:
            Xv, yv = validate(X, y, reset=True)
        n = _num_samples(Xv)
        if n < 2:
            raise ValueError(f"search='path' needs at least 2 samples, got {n} "
                             "sample (n_samples = 1).")
        crit = self.criterion_
        sw = fit_params.get("sample_weight")
        options = {"n_alphas_no_change": 3, **(self.path_params or {})}
        tic = time.perf_counter()
        path = risk_alpha_path(clone(self.estimator), Xv, yv, alphas=alphas, sample_weight=sw,
                               criterion="loo" if crit == "loo" else "risk", **options)
        # every alpha of the grid, decreasing (the path's order), as given
        if given is None:
            n_alphas = options.get("n_alphas", 30)
            full = (path.alphas if path.alphas.shape[0] == n_alphas else np.geomspace(
                path.alphas[0], path.alphas[0] * options.get("eps", 1e-3), num=n_alphas))
            values = [float(a) for a in full]
        else:
            order = np.argsort(-alphas, kind="stable")
            full, values = alphas[order], [given[i] for i in order]
        m, n_grid = path.alphas.shape[0], len(values)
        path_risk = np.full(n_grid, np.nan)
        path_risk[:m] = path.risk
        if crit == "kfold":
            score = _kfold_alpha_path(self.estimator, Xv, yv, sw, self._splits, full, options)
        else:
            score = np.full(n_grid, np.nan)
            score[:m] = path.loo if crit == "loo" else path.risk
        path_time = time.perf_counter() - tic
        finite = np.isfinite(score)
        reason = np.array(["" if ok else "undefined: the fit interpolates (df >= n_samples) or "
                           "a sample has leverage 1" for ok in finite], dtype=object)
        if crit != "kfold":
            reason[m:] = (f"not solved: the alpha path stopped after n_alphas_no_change="
                          f"{options['n_alphas_no_change']} alphas without a new minimum of "
                          f"the {crit} estimate")
        if not finite.any():
            raise ValueError(_too_few_message(n, crit, path.df))
        a = int(np.argmin(np.where(finite, score, np.inf)))
        k = self.path_neighbors
        rows = [r for r in range(max(0, a - k), min(n_grid, a + k + 1)) if finite[r]]
        candidates = [{"alpha": values[r]} for r in rows]
        paths, times, kept = self._fit_candidates(candidates, X, y, fit_params)
        i, t, mins, best_iters = self._select(paths)
        all_candidates = [{"alpha": v} for v in values]
        results = self._results(all_candidates, paths, mins, best_iters, times, rows=rows,
                                n_rows=n_grid)
        results[f"path_{crit}"] = np.where(finite, score, np.nan)
        results["path_risk"] = path_risk
        results["path_df"] = np.concatenate([np.asarray(path.df, dtype=np.float64),
                                             np.full(n_grid - m, np.nan)])
        results["path_n_iter"] = np.ma.MaskedArray(
            np.concatenate([np.asarray(path.n_iter), np.zeros(n_grid - m, dtype=int)]),
            mask=np.arange(n_grid) >= m)
        results["reason"] = reason
        results["path_time"] = path_time
        self.alpha_path_ = path
        self._selected_paths = paths[i]
        self.estimator_ = kept[i]
        self.best_index_ = rows[i]
        self.best_iteration_ = t
        self.best_params_ = candidates[i]
        self.cv_results_ = results

    # ----------------------------------------------------------- predict
    @property
    def coef_(self):
        """Coefficients of the selected iterate (``estimator_.coef_``)."""
        check_is_fitted(self)
        return self.estimator_.coef_

    @property
    def intercept_(self):
        """Intercept of the selected iterate (``estimator_.intercept_``)."""
        check_is_fitted(self)
        return self.estimator_.intercept_

    @property
    def classes_(self):
        """Class labels (classifiers only)."""
        check_is_fitted(self)
        return self.estimator_.classes_

    def predict(self, X):
        """Predict with the selected iterate.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        return self.estimator_.predict(X)

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X):
        """Class probabilities of the selected iterate.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        return self.estimator_.predict_proba(X)

    @available_if(_estimator_has("predict_log_proba"))
    def predict_log_proba(self, X):
        """Log of the class probabilities of the selected iterate.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
        """
        check_is_fitted(self)
        return self.estimator_.predict_log_proba(X)

    @available_if(_estimator_has("decision_function"))
    def decision_function(self, X):
        """Decision function of the selected iterate.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        check_is_fitted(self)
        return self.estimator_.decision_function(X)

    def score(self, X, y, sample_weight=None, **score_params):
        """The estimator's ``score`` (R^2, accuracy) at the selected iterate.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
        **score_params : dict
            Other metadata for the estimator's ``score`` (metadata routing only).

        Returns
        -------
        score : float
        """
        check_is_fitted(self)
        if _routing_enabled():
            if sample_weight is not None:
                score_params = {**score_params, "sample_weight": sample_weight}
            kwargs = process_routing(self, "score", **score_params).estimator.score
        else:
            _raise_for_params(score_params, self, "score")
            kwargs = {} if sample_weight is None else {"sample_weight": sample_weight}
        return self.estimator_.score(X, y, **kwargs)


def _param_columns(candidates):
    """``param_<name>`` masked arrays (numeric dtype when every value is)."""
    n = len(candidates)
    values = defaultdict(dict)
    for i, params in enumerate(candidates):
        for name, value in params.items():
            values[name][i] = value
    out = {}
    for name, col in values.items():
        mask = np.ones(n, dtype=bool)
        mask[list(col)] = False
        numeric = all(isinstance(v, (Real, np.number)) and not isinstance(v, (bool, np.bool_))
                      for v in col.values())
        if numeric:
            data = np.array([col.get(i, 0) for i in range(n)])
        else:
            data = np.empty(n, dtype=object)
            for i, v in col.items():
                data[i] = v
        out[f"param_{name}"] = np.ma.MaskedArray(data, mask=mask)
    return out
