"""The criteria of :class:`~skacv.TrajectoryEarlyStoppingCV`: which path each
reads, and what ``criterion="auto"`` chooses before the fit (a cost model of
leave-one-out against K-fold CV along the path, in units of one fit).

The machine constants of the cost model (``auto_blas3_speedup``,
``auto_cheap_flops``) are fields of :class:`skacv._policy.SpeedPolicy`; the
sizes of the leave-one-out subsample, which change the estimate, are here.
"""

import inspect
import warnings
from collections.abc import Sized
from numbers import Integral

import numpy as np
from sklearn.base import is_classifier

from .._config import working_memory_bytes
from ..estimates.risk._curvature import chain_step_flops
from ..estimates.risk._engine import chain_probes
from ..exceptions import UnreliableEstimateWarning
from ..utils._validation import user_stacklevel
from ._kfold import can_stack

#: criterion -> (the path it minimises, the estimator's flag that computes it)
CRITERIA = {"risk": ("risk_path_", "estimate_risk"), "loo": ("loo_path_", "estimate_loo"),
            "kfold": ("kfold_path_", None)}

#: the estimates a candidate fit reports (cv_results_ columns)
PATH_ATTRS = ("risk_path_", "loo_path_", "risk_reliable_")

# (the measured regrets of criterion="auto"'s choices: docs/internals.rst)


def few_samples(n_samples, n_features, n_folds, statistics):
    """Whether ``criterion="auto"`` leaves the risk estimate for K-fold CV
    along the path (the statistical policy's ``auto_kfold_samples``)."""
    return n_folds <= n_samples < statistics.auto_kfold_samples and n_features > n_samples


def n_splits(cv, n_samples):
    """The number of folds of the search's ``cv``: an int itself, a splitter's
    ``get_n_splits`` on ``n_samples`` rows (``LeaveOneOut``: ``n_samples``),
    a list of splits its length; 5 where it cannot be told without the
    data's labels or groups, or without consuming an iterator."""
    if isinstance(cv, Integral):
        return int(cv)
    if hasattr(cv, "get_n_splits"):
        try:
            return int(cv.get_n_splits(np.empty((n_samples, 0))))
        except (TypeError, ValueError):
            return 5
    return len(cv) if isinstance(cv, Sized) else 5


def resolve_auto(estimator, n_samples, n_features, cv, policies):
    """``(criterion_, loo_subsample, both)`` of ``criterion="auto"``:
    :func:`auto_criterion`, or K-fold CV along the path for few samples
    (:func:`few_samples`, with a warning); ``both``: :func:`reports_both`."""
    statistics = policies[1]
    n_folds = n_splits(cv, n_samples)
    criterion, sub = auto_criterion(estimator, n_samples, n_features, n_folds, policies)
    if criterion == "risk" and few_samples(n_samples, n_features, n_folds, statistics):
        warnings.warn(  # user -> _fit_context's wrapper -> fit -> _resolve -> here
            f"criterion='auto' uses K-fold CV along the path (cv={cv!r}) with {n_samples} "
            f"samples and {n_features} features: below "
            f"{statistics.auto_kfold_samples} samples with "
            "more features than samples the risk estimate is unreliable on real designs. "
            "Set criterion='risk' to use it anyway.", UnreliableEstimateWarning,
            stacklevel=user_stacklevel())
        return "kfold", None, False
    if criterion == "risk" and few_samples(n_samples, n_features, 0, statistics):
        # as above, but too few samples for the folds: leave-one-out along the
        # path (n runs, each fold one sample) where the estimator tracks it
        if "estimate_loo" in estimator.get_params(deep=False):
            warnings.warn(
                f"criterion='auto' uses leave-one-out along the path with {n_samples} "
                f"samples and {n_features} features: the risk estimate is unreliable "
                f"there and K-fold CV (cv={cv!r}) needs at least {n_folds} samples.",
                UnreliableEstimateWarning, stacklevel=user_stacklevel())
            return "loo", None, False
        warnings.warn(
            f"criterion='auto' uses the risk estimate with {n_samples} samples and "
            f"{n_features} features although it is unreliable there: K-fold CV "
            f"(cv={cv!r}) needs at least {n_folds} samples.", UnreliableEstimateWarning,
            stacklevel=user_stacklevel())
    return criterion, sub, reports_both(estimator, criterion, n_samples, n_features, sub,
                                        policies)


def reports_both(estimator, criterion, n_samples, n_features, loo_subsample, policies):
    """Whether ``criterion="auto"``, resolved to ``criterion``, computes the
    other estimate too: leave-one-out on a small problem (``auto_both_size``)
    whose risk estimate costs at most the leave-one-out (both counted before
    the fit at ``max_iter`` steps: :func:`risk_cost_flops`,
    :func:`loo_cost_in_fits`). The estimators for which ``"auto"`` takes
    leave-one-out have the curvature chains' risk (a robust loss,
    mini-batches), quadratic in the steps, which cost the Huber literal
    default 10-35 times its leave-one-out on small real designs
    (docs/benchmarks.rst, ``bench_huber_grid.py``). The rule counts every
    chain step: full batch, the stretches of unchanged inliers cost less
    (:func:`~skacv.estimates.risk._curvature.constant_runs`), which is known
    only after the fit."""
    policy, statistics = policies
    if criterion != "loo" or n_samples * n_features > statistics.auto_both_size:
        return False
    tracked = n_samples if loo_subsample is None else loo_subsample
    loo = loo_cost_in_fits(estimator, n_samples, n_features, tracked, policy)[1]
    return risk_cost_flops(estimator, n_samples, n_features, statistics) <= loo


def risk_cost_flops(estimator, n_samples, n_features, statistics):
    """Flops of the curvature chains' risk estimate (Tan & Bellec 2024;
    :func:`~skacv.estimates.risk._curvature.curvature_memory_matrices`) over
    ``max_iter`` steps: step ``k`` advances ``k`` sources
    (:func:`~skacv.estimates.risk._curvature.chain_step_flops` each),
    ``(4 n p + n) m T^2 / 2`` in all; ``m`` the probes ``n_probes="auto"``
    takes (:func:`chain_probes`; ``None``: the ``n`` canonical vectors)."""
    params = estimator.get_params(deep=False)
    T = int(params.get("max_iter", 100) or 100)
    n, p = max(n_samples, 1), max(n_features, 1) + int(bool(params.get("fit_intercept")))
    m = params.get("n_probes", "auto")
    if isinstance(m, str):
        m = chain_probes(n, statistics)
    m = n if m is None else int(m)
    return chain_step_flops(n, p, m) * T * T / 2.0


def loo_cost_in_fits(estimator, n_samples, n_features, n_tracked, policy):
    """Estimated cost of ``loo_path_`` (``n_tracked`` left-out runs) in fits
    of the estimator, and in flops.

    A tracked left-out run costs, per step, a product with the (restricted)
    Gram matrix (``2 p^2`` flops as a block product; ``4 n p`` without the
    Gram matrix) plus ``~20 p`` elementwise operations; a fit step costs
    ``4 n p`` flops as matrix-vector products. Block products count
    the speed ``policy``'s ``auto_blas3_speedup`` times faster per flop than
    matrix-vector products.
    """
    speedup = policy.auto_blas3_speedup
    params = estimator.get_params(deep=False)
    T = int(params.get("max_iter", 100) or 100)
    n, p, c = max(n_samples, 1), max(n_features, 1), n_tracked
    quadratic = not is_classifier(estimator) and params.get("solver") != "sgd"
    linear = estimator.linear_iterations()
    if quadratic and linear and params.get("solver") != "eigenpro":
        # eigenbasis: one eigendecomposition, then scalar recursions per sample
        r = min(n, p)
        flops = 2 * n * p * r / speedup + 2 * c * (r * T + T * T)
        return flops / (T * 4 * n * p), flops
    gram = quadratic and 8 * p * p <= working_memory_bytes()
    step = (2 * p * p if gram else 4 * n * p) * c / speedup + 20 * p * c
    setup = 2 * n * p * p / speedup if gram else 0.0
    flops = T * step + setup
    return flops / (T * 4 * n * p), flops


def auto_criterion(estimator, n_samples, n_features, n_folds, policies):
    """``(criterion, loo_subsample)`` chosen by ``criterion="auto"`` before
    the fit, ``"risk"`` or ``"loo"``, never ``"kfold"``.

    * Estimators with only one of the two estimates: that one.
    * Linear iterations of least squares (``IterativeRidge`` with "gd",
      "nesterov", "heavy_ball", "eigenpro"): ``"risk"``, computed spectrally,
      cheaper than any leave-one-out (kept even where its ``n T^2``
      corrected residuals cost more than the folds: they are a refit); the
      path search of a ridge path may move it to leave-one-out where the
      leverages spread (``ridge_auto_loo_ratio``).
    * ISTA and FISTA of the Lasso: ``"risk"``, the memory-matrix estimate
      (Bellec & Tan 2024): their exact leave-one-out costs 10 to 100 fits.
    * Everything else (proximal SGD, robust and logistic losses):
      ``"loo"``, whose cost is linear in the tracked samples
      (:func:`loo_cost_in_fits`): every sample up to ``auto_loo_samples``,
      above a random subsample of as many as fit in the larger of the
      K-fold budget (``n_folds - 1`` fits) and ``auto_cheap_flops``, between
      ``auto_loo_samples`` and ``auto_loo_samples_max`` (unless the estimator
      sets ``loo_options["subsample"]`` itself).
    """
    params = estimator.get_params(deep=False)
    has_risk, has_loo = "estimate_risk" in params, "estimate_loo" in params
    if not has_loo:
        return "risk", None
    if has_risk and (estimator.linear_iterations() or can_stack(estimator)):
        return "risk", None
    sub = (params.get("loo_options") or {}).get("subsample")
    policy, statistics = policies
    if sub is None and n_samples > statistics.auto_loo_samples:
        sub = statistics.auto_loo_samples
        if n_features is not None:  # more while within the budget
            fits1, flops1 = loo_cost_in_fits(estimator, n_samples, n_features, 1, policy)
            setup = loo_cost_in_fits(estimator, n_samples, n_features, 0, policy)[1]
            budget = max(policy.auto_cheap_flops, (n_folds - 1) * flops1 / fits1)
            affordable = int((budget - setup) // max(flops1 - setup, 1.0))
            sub = int(np.clip(affordable, statistics.auto_loo_samples,
                              statistics.auto_loo_samples_max))
        if sub >= n_samples:
            sub = None
    return "loo", sub


def switch_estimates(est, own, criterion, auto, loo_subsample=None, both=False):
    """Switch on the estimate of ``criterion`` in the clone ``est`` of a grid
    point (``own``: the search's estimator's parameters) and the others as
    the search needs them; returns ``est``. With ``"kfold"`` (or ``"loo"``
    chosen explicitly) the others stay on only where the estimator switches
    them on against its class default; with ``auto``, the other estimate is
    computed when ``both`` and it exists, or when asked for."""
    flag = CRITERIA[criterion][1]
    if flag in own:
        est.set_params(**{flag: True})
    defaults = inspect.signature(type(est).__init__).parameters
    if criterion == "kfold" or (criterion == "loo" and not auto):
        # chosen explicitly, leave-one-out is the estimate too: the risk
        # (only reported) would cost as much as the folds
        est.set_params(**{k: False for k in ("estimate_risk", "estimate_loo")
                          if k != flag and k in own
                          and (not own[k] or defaults[k].default is not False)})
    if loo_subsample is not None and criterion == "loo" and "loo_options" in own:
        # (an estimator without loo_options sizes its leave-one-out itself)
        options = est.get_params(deep=False)["loo_options"] or {}
        est.set_params(loo_options={**options, "subsample": loo_subsample})
    if auto and criterion != "kfold" and "estimate_risk" in own and "estimate_loo" in own:
        # the other estimate only when both are cheap and it exists (no
        # memory-matrix risk with mini-batches)
        other = "estimate_loo" if criterion == "risk" else "estimate_risk"
        available = est.risk_available()
        asked = bool(own[other]) and defaults[other].default is False  # against the default
        est.set_params(**{other: bool((both and available) or asked)})
    return est
