"""Several targets for the least-squares trajectory regressors: one clone
per column of ``Y``, each an ordinary 1-D fit of the shell, their attributes
stacked (docs/architecture.rst, "The fit shell"). The clones share one
centred design (:func:`~skacv.linalg._design.shared_designs`) and the first
target's set-up (``frozen``)."""

import copy
import dataclasses

import numpy as np
import scipy.sparse as sp
import sklearn
from sklearn.base import clone
from sklearn.utils import Bunch

from ..linalg._dask import is_dask
from ..linalg._design import shared_designs
from ..utils._validation import WarmStartGuard, check_sample_weight, data_fingerprint

#: attributes of a 1-D fit stacked along a leading target axis for a 2-D ``y``
STACKED_ATTRIBUTES = ("coef_path_", "intercept_path_", "coef_", "intercept_", "step_size_",
                      "risk_path_", "risk_matrix_", "memory_matrix_", "risk_reliable_",
                      "noise_variance_path_", "excess_risk_path_", "loo_path_",
                      "loo_std_error_path_", "loo_error_path_", "loo_predictions_",
                      "loo_indices_")

#: what a 1-D fit leaves beside the stacked attributes (dropped by a new 2-D fit)
_ONE_TARGET_STATE = ("_solver_state", "_setup", "_fitted_path", "_gradient_path",
                     "_source_path", "_uq_stats", "_risk_advice", "_dropped_risk_matrices",
                     "_coef_iterate", "_warm_guard", "preconditioner_", "risk_diagnostics_")


def is_multi_target(y):
    """Whether ``y`` is 2-D, a column per target (a sparse or ragged ``y`` is
    left to the 1-D validation and its message)."""
    if y is None or sp.issparse(y):
        return False
    try:
        return np.ndim(y) == 2
    except (ValueError, TypeError):
        return False


def stack_diagnostics(bunches):
    """One ``risk_diagnostics_`` from the targets': each entry stacked along a
    leading target axis, ``None`` where no target has it (an object array
    where only some have it)."""
    out = Bunch()
    for key in bunches[0]:
        values = [b[key] for b in bunches]
        if all(v is None for v in values):
            out[key] = None
        elif any(v is None for v in values):
            out[key] = np.empty(len(values), dtype=object)
            for k, v in enumerate(values):
                out[key][k] = v
        else:
            out[key] = np.stack([np.asarray(v) for v in values])
    return out


class MultiTargetMixin:
    """``fit`` with ``y`` of shape (n_samples, n_targets): one path per
    target (``estimators_``), the attributes stacked; a 1-D ``y`` is the
    shell's fit. A warm refit continues every target's path, checked by this
    estimator's own guard; the debiasing methods are for one target."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def _fit(self, X, y, sample_weight=None, frozen=None):
        multi = is_multi_target(y)
        fitted = self.__dict__.get("estimators_")
        # a warm start continues a path of the same kind (1-D or 2-D y)
        if self.warm_start and multi != (fitted is not None) and (
                fitted is not None or self._continues()):
            was = "a 1-D y" if fitted is None else f"a 2-D y ({len(fitted)} targets)"
            raise ValueError(
                f"warm_start=True continues the path fitted on {was}, but y is "
                f"{'2-D' if multi else '1-D'} now. Set warm_start=False to fit new data.")
        if not multi:
            self.__dict__.pop("estimators_", None)
            return super()._fit(X, y, sample_weight, frozen)
        return self._fit_targets(X, y, sample_weight, frozen)

    def _fit_targets(self, X, Y, sample_weight, frozen):
        """One clone per column of ``Y``, then the stacked attributes."""
        name = type(self).__name__
        if is_dask(X, Y, sample_weight):
            raise ValueError(
                f"{name} fits a 2-D y (several targets) on in-memory data only. Fit one "
                "estimator per column of y on the Dask input, or call .compute().")
        warm = bool(self.warm_start) and self.__dict__.get("estimators_") is not None
        X, Y = self._validate_xy(X, Y, reset=not warm, multi_output=True)
        sample_weight = check_sample_weight(sample_weight, X, X.dtype)
        Y = np.asfortranarray(Y)  # each target a contiguous column
        fingerprint = data_fingerprint(X, Y, sample_weight)
        if warm:
            if len(self.estimators_) != Y.shape[1]:
                raise ValueError(
                    f"warm_start=True continues the paths of {len(self.estimators_)} "
                    f"targets, but y has {Y.shape[1]} columns. Set warm_start=False to fit "
                    "new data.")
            self._warm_guard.check(self, fingerprint, self.n_iter_)
            # the protected parameters are this guard's: the targets take the free ones
            params = self.get_params(deep=False)
            estimators = [e.set_params(**{k: params[k] for k in self._free_params})
                          for e in self.estimators_]
        else:
            self.release_warm_state()
            for attr in _ONE_TARGET_STATE:
                self.__dict__.pop(attr, None)
            estimators = [clone(self) for _ in range(Y.shape[1])]
        # the data were checked here: the targets' fits skip the finiteness
        # checks and, continued, their fingerprints (FitPlan.same_data); the
        # debiasing statistics are each fit's own (no deferral)
        plan = dataclasses.replace(self._plan_in_force(), defer_uq=False, same_data=True,
                                   checks=None)
        with shared_designs(), sklearn.config_context(assume_finite=True):
            for k, est in enumerate(estimators):
                est.__dict__.pop("feature_names_in_", None)  # (the validated X has none)
                with est.planned(plan):
                    est._fit(X, Y[:, k], sample_weight, frozen)
                # the set-up of a new path (step size, mini-batch seed,
                # preconditioner) depends on X and the weights only: the first
                # target's serves the others, the number its 1-D fit computes
                if frozen is None:
                    frozen = est._setup
        self._stack(estimators)
        self._warm_guard = WarmStartGuard(self, fingerprint)
        return self

    def _stack(self, estimators):
        """Stacked copies of the targets' attributes; the targets keep views."""
        self.estimators_ = estimators
        self.n_iter_ = int(estimators[0].n_iter_)  # every path runs max_iter steps
        if hasattr(self, "feature_names_in_"):
            for est in estimators:
                est.feature_names_in_ = self.feature_names_in_
        for attr in STACKED_ATTRIBUTES + ("risk_diagnostics_", "_dropped_risk_matrices"):
            self.__dict__.pop(attr, None)
        for attr in STACKED_ATTRIBUTES:
            if hasattr(estimators[0], attr):
                setattr(self, attr, np.stack([getattr(e, attr) for e in estimators]))
        self._link_targets()
        if hasattr(estimators[0], "risk_diagnostics_"):
            self.risk_diagnostics_ = stack_diagnostics(
                [e.risk_diagnostics_ for e in estimators])
        dropped = estimators[0].__dict__.get("_dropped_risk_matrices")
        if dropped is not None:  # what __getattr__ reports
            self._dropped_risk_matrices = dropped

    def _stacked(self):
        return [attr for attr in STACKED_ATTRIBUTES if attr in self.__dict__]

    def _link_targets(self):
        for k, est in enumerate(self.estimators_):
            for attr in self._stacked():
                setattr(est, attr, getattr(self, attr)[k])

    def __getstate__(self):
        state = super().__getstate__()
        if state.get("estimators_") is not None:
            # the targets' views of the stacked attributes are pickled once, here
            stacked = self._stacked()
            targets = [copy.copy(est) for est in state["estimators_"]]
            for est in targets:
                for attr in stacked:
                    est.__dict__.pop(attr, None)
            state["estimators_"] = targets
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if self.__dict__.get("estimators_") is not None:
            self._link_targets()

    def _debias_stats(self):
        estimators = self.__dict__.get("estimators_")
        if estimators is not None:
            raise ValueError(
                f"This {type(self).__name__} was fitted on a 2-D y ({len(estimators)} "
                "targets): the debiased iterates, confidence intervals, noise variance and "
                "excess risk are computed for one target. Call the method on "
                "estimators_[k], the fit of target k.")
        return super()._debias_stats()
