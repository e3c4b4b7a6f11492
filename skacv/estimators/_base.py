"""The fit shell of every trajectory estimator (docs/architecture.rst, "The
fit shell"): validation, the warm-start guard, the path and its estimates;
the estimators supply the hooks. Kernel machines (EigenPro) override
``_run_path`` only."""

import contextlib
import dataclasses
from numbers import Integral, Real

import numpy as np
import sklearn
from sklearn.base import BaseEstimator
from sklearn.utils import Bunch, check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from .._config import check_memory, format_bytes, risk_matrix_bytes
from .._trace import taken
from ..estimates.loo._iacv import iacv_path
from ..estimates.risk._estimate import check_risk_memory, trajectory_risk
from ..estimates.risk._uq import (
    debias_statistics,
    debias_statistics_from_products,
)
from ..iterations._datafits import LeastSquares, NormalEquations
from ..iterations._iterations import Iteration, PreconditionedGD, check_schedule
from ..iterations._path import (
    curvature_bound,
    gap_monitor,
    init_state,
    run_to_convergence,
    run_trajectory,
)
from ..linalg._covariance import CovarianceForm, covariance_form_pays
from ..linalg._dask import is_dask
from ..linalg._design import make_design
from ..linalg._sampling import ROW_SOURCE, MinibatchSampler
from ..utils._compat import CachedParamNames, Interval, StrOptions
from ..utils._validation import (
    WarmStartGuard,
    check_sample_weight,
    data_fingerprint,
    same_fingerprint,
)
from ._advice import (
    unreliable_advice,
    warn_feature_scales,
    warn_unreliable,
    warn_weight_scale,
    weight_summary,
)
from ._dask_fit import dask_fit
from ._options import LOO_OPTIONS, check_options, resolve_options
from ._protocol import FitShellSearch
from ._setup import PathSetup, loop_buffers, points_buffer

#: solvers whose least-squares loop may run in the covariance form (one
#: full batch, no preconditioner): its X~^T X~ is formed before the step size
FULL_BATCH_SOLVERS = ("fista", "ista", "gd", "nesterov", "heavy_ball")


_ESTIMATE_ATTRIBUTES = ("risk_path_", "risk_matrix_", "memory_matrix_", "risk_reliable_",
                        "risk_diagnostics_", "noise_variance_path_", "excess_risk_path_",
                        "loo_path_", "loo_std_error_path_",
                        "loo_error_path_", "loo_predictions_", "loo_indices_")


#: what a pickle leaves out: the Jacobian chains, the left-out runs, the
#: centred design, the deferred statistics and the loop's records of the path
#: (X~ x^t, X~^T F, X~ v^t)
_WARM_ONLY = ("_risk_state", "_loo_state", "_warm_design", "_uq_pending", "_fitted_path",
              "_gradient_path", "_source_path")


#: parameter constraints shared by the trajectory estimators
COMMON_CONSTRAINTS = {
    "alpha": [Interval(Real, 0, None, closed="left")],
    "max_iter": [Interval(Integral, 1, None, closed="left")],
    "batch_size": [Interval(Integral, 1, None, closed="left")],
    "step_size": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
    "fit_intercept": ["boolean"],
    "warm_start": ["boolean"],
    "estimate_risk": ["boolean"],
    "estimate_loo": ["boolean"],
    "loo_options": [None, dict],  # its keys: _options.LOO_OPTIONS (check_options)
    "n_probes": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"}), None],
    "risk_options": [None, dict],  # its keys: the estimator's _option_keys
    "random_state": ["random_state"],
    "verbose": ["verbose"],
}


def store_params(estimator, given):
    """Set the arguments of an ``__init__`` (``given``, its ``locals()``) as
    attributes, unchanged, as scikit-learn requires of ``__init__`` (a
    subclass's own parameters are its ``__init__``'s)."""
    for name, value in given.items():
        if name != "self":
            setattr(estimator, name, value)


#: what the validation of a first fit sets on the estimator (FitPlan.checks)
_CHECKED_ATTRIBUTES = ("n_features_in_", "feature_names_in_")


class TrajectoryEstimator(CachedParamNames, FitShellSearch, BaseEstimator):
    """Fit shell: validation, warm start, the path and its estimates.

    ``max_iter`` is the total length of the path: with ``warm_start=True`` a
    refit on the same data continues the stored path (50 + 50 steps equal
    100 bit for bit); a shorter ``max_iter``, other data or any changed
    parameter outside ``_free_params`` raises.
    """

    #: parameters a warm-started refit may change (every other one is protected)
    _free_params = ("max_iter", "warm_start", "verbose", "estimate_risk", "estimate_loo",
                    "loo_options", "n_probes", "random_state")
    #: the keys of the grouped parameters (``risk_options``, ``loo_options``):
    #: ``{parameter: {key: (default, constraints)}}`` (skacv.estimators._options)
    _option_keys = {"loo_options": LOO_OPTIONS}
    #: whether ``alpha`` weighs against ``sum(sample_weight)`` (scikit-learn's ``Ridge``
    #: and ``HuberRegressor``: rescaling the weights rescales the penalty), ``False``
    #: where the fit reads only the weights' ratios (``Lasso``), ``None``: no ``alpha``
    #: (the advice of :func:`~skacv.estimators._advice.warn_weight_scale`)
    _alpha_sums_weights = None

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _validate_params(self):
        if self._continues() and self._plan_in_force().same_data:
            # a later stage of a search (the plan's same_data): the search set
            # max_iter and warm_start only, the first stage validated the
            # rest and the warm start's guard refuses any other change
            return
        taken("validate_params")
        super()._validate_params()
        check_options(self)  # the keys and values of risk_options and loo_options

    def _warm_start_params(self):
        """The parameters a warm start must find unchanged, the grouped ones
        resolved (``None``, ``{}`` and the defaults are the same)."""
        params = self.get_params(deep=False)
        params.update({p: resolve_options(self, p) for p in self._option_keys})
        return params

    # ------------------------------------------------------------------ hooks
    def _validate_xy(self, X, y, reset, multi_output=False):
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"),
                             dtype=[np.float64, np.float32], y_numeric=True,
                             multi_output=multi_output, reset=reset)
        return X, np.asarray(y, dtype=X.dtype)

    def _encode_target(self, y, sample_weight):
        """The target of the fit and what a warm refit must find unchanged."""
        return y, None

    def _fit_weights(self, y, sample_weight):
        """The fit's sample weights from the user's (the logistic
        estimator's ``class_weight`` multiplies them)."""
        return sample_weight

    def _make_design(self, X, sample_weight, setup=None):
        return make_design(X, sample_weight, self.fit_intercept)

    def _fit_target(self, design, y):
        """``(offset, target)``: centred, weighted ``y`` for least squares."""
        return design.center_y(y)

    def _make_penalty(self, design):
        raise NotImplementedError

    def _make_datafit(self, design):
        raise NotImplementedError

    def _solvers(self, setup):
        """``{name: (Iteration class, extra keyword arguments)}`` of the named
        solvers (``setup`` holds the data-dependent parts of a new path)."""
        raise NotImplementedError

    # ----------------------------------------------------------- the shell
    def _checks_shared(self):
        """The data's checks are the shell's own (the same for every candidate)."""
        cls = type(self)
        return (cls._validate_xy is TrajectoryEstimator._validate_xy
                and cls._encode_target is TrajectoryEstimator._encode_target)

    def _continues(self):
        """This fit continues the stored path (``warm_start``)."""
        return bool(self.warm_start) and hasattr(self, "n_iter_") \
            and getattr(self, "_warm_guard", None) is not None

    def _fit(self, X, y, sample_weight=None, frozen=None):
        """Validate, guard the warm start, run the path, set the estimates;
        ``frozen`` (a previous fit's ``PathSetup``) is the set-up a new path
        reuses (brute-force leave-one-out refits)."""
        taken("fit", estimator=type(self).__name__, max_iter=self.max_iter)
        warm = self._continues()
        if is_dask(X, y, sample_weight):  # one pass over the rows (._dask_fit)
            return dask_fit(self, X, y, sample_weight, frozen)
        # the next stage of a search refits the data its first stage checked
        plan = self._plan_in_force()
        same_data = plan.same_data
        trusted = warm and same_data
        given = (X, y, sample_weight)
        checked = self.__dict__.get("_plan_data") if trusted else None
        # a candidate's first fit: another candidate's checks of the same objects
        checks = plan.checks if not warm and self._checks_shared() else None
        shared = None if checks is None else checks.take(type(self), given)
        if checked is not None and all(a is b for a, b in zip(checked[0], given, strict=True)):
            X, y, sample_weight = checked[1]  # the same objects: validated by the first
        elif shared is not None:
            taken("shared_checks")
            (X, y, sample_weight), _, attributes = shared
            self.__dict__.pop("feature_names_in_", None)  # (as validate_data's reset)
            self.__dict__.update(attributes)
        else:
            taken("validate", reset=not warm)
            with (sklearn.config_context(assume_finite=True) if trusted
                  else contextlib.nullcontext()):
                X, y = self._validate_xy(X, y, reset=not warm)
                sample_weight = check_sample_weight(sample_weight, X, X.dtype)
        if same_data:  # held for the plan's block only (planned)
            self._plan_data = given, (X, y, sample_weight)
        y_fit, extra = self._encode_target(y, sample_weight)
        if trusted:
            fingerprint = self._warm_guard.fingerprint
        elif shared is not None:
            fingerprint = shared[1]
        else:
            fingerprint = data_fingerprint(X, y_fit, sample_weight)
            if checks is not None:
                checks.keep(type(self), given, (X, y, sample_weight), fingerprint,
                            {a: self.__dict__[a] for a in _CHECKED_ATTRIBUTES
                             if a in self.__dict__})
        if warm:
            self._warm_guard.check(self, fingerprint, self.n_iter_, extra)
        else:
            self.release_warm_state()
        self._run_path(X, y_fit, sample_weight, warm, frozen)
        self._warm_guard = WarmStartGuard(self, fingerprint, extra)
        return self

    def _new_setup(self, design, datafit, penalty):
        """A new path's step size (``1 / L``, ``L`` the curvature bound of the
        mean objective, plus the largest row norm over the batch size for
        mini-batches) and mini-batch seed."""
        setup = PathSetup(step_size=1.0)
        solver = getattr(self, "solver", None)
        sgd = solver == "sgd"
        if sgd:
            setup.batch_seed = int(check_random_state(self.random_state).randint(2**31 - 1))
            setup.n_samples = design.n_samples
        if isinstance(self.step_size, str):
            L = curvature_bound(design, datafit, penalty.l2_, self.batch_size if sgd else None)
            setup.step_size = 1.0 / L if L > 0 else 1.0
        else:
            setup.step_size = float(self.step_size)
        return setup

    def _covariance_form(self, design, datafit, n_total, iteration=None):
        """Whether a new path's loop runs in the covariance form: full-batch
        least squares without preconditioner where it pays
        (:func:`~skacv.linalg._covariance.covariance_form_pays`); before the
        iteration exists (``None``) the solver's name says if it is full batch."""
        if type(datafit) is not LeastSquares or not covariance_form_pays(
                design, max(n_total, self._plan_in_force().horizon)):
            return False
        if iteration is None:
            return getattr(self, "solver", None) in FULL_BATCH_SOLVERS
        return iteration.sampler is None and not isinstance(iteration, PreconditionedGD)

    def _make_iteration(self, setup, design, penalty):
        schedule = None
        if "step_schedule" in self.get_params(deep=False):
            schedule = check_schedule(self.step_schedule, self.max_iter)
        sampler = setup.sampler
        if sampler is None and setup.batch_seed is not None:
            sampler = MinibatchSampler(design.n_samples, self.batch_size, setup.batch_seed)
        if isinstance(self.solver, Iteration):  # a user-defined algorithm
            iteration = self.solver.bind(setup.step_size, penalty, schedule, sampler)
        else:
            cls, kwargs = self._solvers(setup)[self.solver]
            iteration = cls(setup.step_size, penalty=penalty, schedule=schedule,
                            sampler=sampler, **kwargs)
        return iteration

    def _run_path(self, X, y, sample_weight, warm, frozen):
        n, p = X.shape
        design = getattr(self, "_warm_design", None) if warm else None
        if design is None:
            design = self._make_design(X, sample_weight, frozen)
        m = design.n_features  # coordinates of the fit (an intercept column included)
        n_total = self.max_iter
        check_memory(m * (n_total + 1) * X.dtype.itemsize,
                     f"coef_path_ of shape ({p}, {n_total + 1})", "Lower max_iter. ")
        datafit = self._make_datafit(design)
        penalty = self._make_penalty(design)
        offset, target = self._fit_target(design, y)
        path = np.empty((m, n_total + 1), dtype=X.dtype, order="F")
        if warm:
            setup, n_done = self._setup, self.n_iter_
            path[:, : n_done + 1] = self._fit_coef_path()
            state = self._solver_state
        else:
            if frozen is None:  # (a refit of a fit that warned already: not again)
                warn_feature_scales(self, design, p)
            if frozen is None and self._covariance_form(design, datafit, n_total):
                # the covariance form's X~^T X~ first: the step size reads it
                # (Lanczos on p x p instead of passes over X~)
                design.gram(side="features")
            setup = dataclasses.replace(frozen) if frozen is not None else self._new_setup(
                design, datafit, penalty)
            n_done = 0
            path[:, 0] = 0
            state = None
        iteration = self._make_iteration(setup, design, penalty)
        # the loop's products with X~ (two a step) or, for full-batch least
        # squares with few features, with X~^T X~ (one p x p product a step);
        # a warm start continues in the form it started in
        if state is None:
            covariance = self._covariance_form(design, datafit, n_total, iteration)
        else:
            covariance = state.form == "covariance"
        loop = CovarianceForm(design) if covariance else design
        if state is None:
            state = init_state(loop, form="covariance" if covariance else "design")
        fitted = risk_plan = None
        if self._wants("estimate_risk") and self.risk_available():
            # the estimate's memory before the path is run (a long path may need
            # (T + 1) x (T + 1) matrices, skacv.estimates.risk._estimate.check_risk_memory)
            # and its number of probes, counted once
            risk_plan = check_risk_memory(
                design, iteration, n_total, getattr(self, "n_probes", "auto"), datafit,
                products=covariance, keep_state=bool(self.warm_start),
                probe_scheme=resolve_options(self, "risk_options").get("probe_scheme", "auto"))
        if self._wants("estimate_risk") and not covariance:
            # X~ x^t of every iterate, kept for the residuals of the risk estimate
            check_memory(n * (n_total + 1) * X.dtype.itemsize,
                         f"the fitted values of the path ({n}, {n_total + 1})",
                         "Lower max_iter or set estimate_risk=False. ")
            fitted = np.empty((n, n_total + 1), dtype=X.dtype, order="F")
            old = getattr(self, "_fitted_path", None) if warm else None
            if old is not None and old.shape[1] == n_done + 1:
                fitted[:, : n_done + 1] = old
            else:
                fitted[:, : n_done + 1] = design.matvec(path[:, : n_done + 1])
        gradients, sources = loop_buffers(self, design, datafit, iteration, fitted, warm,
                                          n_done)
        points = points_buffer(self, design, iteration, covariance, warm, n_done)
        loop_target = loop.target(target) if covariance else target
        # the covariance form: the estimates read the residuals' products (no fitted values)
        buffers = dict(datafit=NormalEquations(), points_out=points) if covariance else dict(
            datafit=datafit, fitted_out=fitted, fuse=True, gradients_out=gradients,
            sources_out=sources, user_step=not isinstance(self.step_size, str), screen=True)
        plan = self._plan_in_force()
        converged = gap_monitor(design, datafit, penalty, target, loop_target, covariance,
                                plan.end_tol)
        if converged is not None and not covariance:  # the gap's product in the last pass
            buffers["gap_out"] = True
        k = run_to_convergence(
            lambda steps: run_trajectory(loop, loop_target, iteration, steps, state, path,
                                         verbose=self.verbose, **buffers),
            state, n_total - n_done, plan.end_check, converged)
        if k < n_total:  # ended at convergence (the plan's end_tol): k + 1 columns
            n_total = k
            path, fitted, gradients, sources, points = (
                None if a is None else a[:, : k + 1]
                for a in (path, fitted, gradients, sources, points))
        self._fitted_path = fitted
        self._gradient_path = gradients
        self._source_path = sources
        self._point_path = points
        self._store_path(path, design, offset)
        self.step_size_ = setup.step_size
        self.n_iter_ = n_total
        self._solver_state = state
        self._setup = setup
        self._set_setup_attributes(setup)
        self._set_estimates(design, datafit, target, iteration, X, y, fitted, risk_plan)
        # a warm refit continues on the same data (checked by the guard): it
        # reuses the centred design and its decompositions, and the loop's
        # gradient points (what only a continued estimate reads)
        self._warm_design = design if self.warm_start else None
        if not self.warm_start:
            self._point_path = None
            if state.screen is not None:  # (its columns and the centred design)
                state.screen.release()

    def _store_path(self, path, design, offset):
        """``coef_path_``, ``intercept_path_``, ``coef_``, ``intercept_``."""
        self.coef_path_ = path
        if design.fit_intercept:
            self.intercept_path_ = (offset - design.x_offset @ path).astype(path.dtype)
        else:
            self.intercept_path_ = np.zeros(path.shape[1], dtype=path.dtype)
        self.coef_ = path[:, -1].copy()
        self.intercept_ = self.intercept_path_[-1]

    def _set_setup_attributes(self, setup):
        """Public attributes of the set-up (e.g. ``preconditioner_``)."""

    def _fit_coef_path(self):
        """The path in the fit's coordinates (shape (n_coef, n_iter_ + 1))."""
        return self.coef_path_

    def _fit_rows(self, X):
        """Unweighted rows of ``X`` in the fit's coordinates (dense, float64)."""
        X = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
        return np.asarray(X, dtype=np.float64)

    def _problem(self, X, y, sample_weight=None):
        """This fit's problem on ``(X, y, sample_weight)``: a Bunch of the
        ``design``, ``datafit``, ``iteration`` (this fit's set-up), the
        unweighted ``rows`` and ``target_rows`` in the fit's coordinates
        (centred for least squares with an intercept) and the validated ``y``;
        ``(X, y, sample_weight)`` must be the fit's training data."""
        check_is_fitted(self)
        X, y = self._validate_xy(X, y, reset=False)
        sample_weight = check_sample_weight(self._fit_weights(y, sample_weight), X, X.dtype)
        y_fit, _ = self._encode_target(y, sample_weight)
        self._check_fitted_on(X, y_fit, sample_weight)
        design = self._make_design(X, sample_weight, self._setup)
        penalty = self._make_penalty(design)
        offset, _ = self._fit_target(design, y_fit)
        iteration = self._make_iteration(self._frozen_setup(), design, penalty)
        rows = self._fit_rows(X) - design.x_offset.astype(np.float64)
        target_rows = np.asarray(y_fit, dtype=np.float64) - float(offset)
        return Bunch(design=design, datafit=self._make_datafit(design), iteration=iteration,
                     rows=rows, target_rows=target_rows, y=y)

    def _check_fitted_on(self, X, y_fit, sample_weight):
        """Raise unless the validated ``(X, y_fit, sample_weight)`` are the
        data of this fit (its warm-start fingerprint)."""
        guard = self.__dict__.get("_warm_guard")
        if guard is not None and not same_fingerprint(
                data_fingerprint(X, y_fit, sample_weight), guard.fingerprint):
            raise ValueError(
                f"This {type(self).__name__} was fitted on other data than the X, y "
                "and sample_weight given: leave-one-out is of the fit's own training "
                "data. Pass them, or an unfitted estimator (fitted on the data first).")

    def _wants(self, flag):
        return bool(self.get_params(deep=False).get(flag, False))

    def _path_predictions(self, X):
        """Predictions of every iterate at rows ``X`` (probabilities for
        classifiers): the full-data predictions of rows of zero weight."""
        return np.asarray(X @ self.coef_path_, dtype=np.float64) + self.intercept_path_

    # ------------------------------------------------------------ estimates
    def _set_estimates(self, design, datafit, target, iteration, X, y, fitted, risk_plan=None):
        for name in _ESTIMATE_ATTRIBUTES:
            if hasattr(self, name):
                delattr(self, name)
        self.__dict__.pop("_dropped_risk_matrices", None)
        self._uq_stats = None  # what the debiasing methods need (UncertaintyMixin)
        self._risk_advice = None  # the first flagged iterate, why, and the fixes
        if self._wants("estimate_risk") or self._wants("estimate_loo"):
            rows = ROW_SOURCE.get()  # a Dask input's compressed sample: the rows' weights
            if rows is None:
                warn_weight_scale(self, design.weight, design.statistics,
                                  getattr(self, "class_weight", None) is not None)
            else:  # (summed once per source: a search's candidates share it)
                if not hasattr(rows, "weight_summary"):
                    rows.weight_summary = weight_summary(rows.w)
                warn_weight_scale(self, rows.w, design.statistics, summary=rows.weight_summary)
        if self._wants("estimate_risk"):
            # a warm-started fit continues the Jacobian chains of the previous one
            res = trajectory_risk(
                design, target, iteration, self._fit_coef_path(), datafit=datafit,
                n_probes=self.n_probes, **resolve_options(self, "risk_options"),
                random_state=self.random_state, verbose=self.verbose, fitted=fitted,
                fitted_sources=getattr(self, "_source_path", None),
                sources=getattr(self, "_point_path", None),
                _state=getattr(self, "_risk_state", None), _keep_state=bool(self.warm_start),
                # after the covariance form: the residuals through their products
                products=getattr(getattr(self, "_solver_state", None), "form", None)
                == "covariance",
                matrices=self._keeps_risk_matrices(),
                probe_goal=self._plan_in_force().probe_goal, before=risk_plan)
            self._risk_state = res.chain_state
            self.risk_path_ = res.risk
            if not self._keeps_risk_matrices():  # what __getattr__ reports
                self._dropped_risk_matrices = self.n_iter_ + 1
            if self._keeps_risk_matrices() and res.risk_matrix is not None:
                self.risk_matrix_ = res.risk_matrix
            if self._keeps_risk_matrices() and res.memory_matrix is not None:
                self.memory_matrix_ = res.memory_matrix
            self.risk_reliable_ = res.reliable
            self.risk_diagnostics_ = Bunch(df_fraction=res.df_fraction,
                                           amplification=res.amplification,
                                           support=res.support, n_probes=res.n_probes,
                                           probe_noise=res.probe_noise,
                                           choice_noise=res.choice_noise)
            # full-batch least squares whose sources combine the outputs' residuals
            self.__dict__.pop("_uq_pending", None)
            if res.corrected_residuals is not None or res.products is not None:
                if self._plan_in_force().defer_uq:
                    # a stage of an early-stopped search: only the last one's are kept
                    self._uq_pending = (design, res, target)
                else:
                    self._set_uq(design, res, target)
            self._risk_advice = unreliable_advice(self, res, design.statistics)
            warn_unreliable(self, res, self._risk_advice, design.statistics)
        if self._wants("estimate_loo"):
            loo = resolve_options(self, "loo_options")  # batch_size, subsample, store_predictions
            res = iacv_path(
                design, target, iteration, self._fit_coef_path(), y, datafit=datafit, **loo,
                random_state=self.random_state, fitted=fitted,
                verbose=self.verbose,
                full_predictions=lambda idx: self._path_predictions(X[idx]),
                # a warm-started fit continues the left-out runs of the previous one
                _state=getattr(self, "_loo_state", None), _keep_state=bool(self.warm_start),
            )
            self._loo_state = res.state
            self.loo_path_ = res.loss
            if res.std_error is not None:  # a subsample: its standard error
                self.loo_std_error_path_ = res.std_error
            if res.error is not None:
                self.loo_error_path_ = res.error
            if loo["store_predictions"]:
                self.loo_predictions_ = res.predictions
                self.loo_indices_ = res.indices

    def _keeps_risk_matrices(self):
        """``risk_matrix_`` and ``memory_matrix_`` fit in ``risk_matrix_limit``."""
        T1 = self.n_iter_ + 1
        return 8.0 * T1 * T1 <= risk_matrix_bytes()

    def __getattr__(self, name):
        # called only for a missing attribute: say why the matrices are absent
        T1 = self.__dict__.get("_dropped_risk_matrices")
        if name in ("risk_matrix_", "memory_matrix_") and T1 is not None:
            raise AttributeError(
                f"{type(self).__name__} keeps {name} only up to risk_matrix_limit="
                f"{format_bytes(risk_matrix_bytes())}; this fit's {T1} x {T1} matrix needs "
                f"{format_bytes(8.0 * T1 * T1)}. Refit within "
                f"skacv.config_context(risk_matrix_limit={8.0 * T1 * T1 / 2**20:.4g}) to keep it."
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _set_uq(self, design, res, target):
        """The debiasing statistics (:mod:`skacv.estimates.risk._uq`) of the
        risk estimate ``res`` and the paths they give."""
        taken("debias_statistics")
        G = res.risk_matrix if res.risk_matrix is not None else res.risk
        if res.corrected_residuals is not None:
            XF = getattr(self, "_gradient_path", None)  # X~^T R = (X~^T F) K^T when R = F K^T
            images = None if XF is None or res.correction is None else (XF, res.correction)
            self._uq_stats = debias_statistics(design, res.corrected_residuals,
                                               res.residuals, G, target, images=images)
        else:  # after the covariance form
            self._uq_stats = debias_statistics_from_products(design, res.products, G, target)
        if self._uq_stats is not None:
            self.excess_risk_path_ = self.excess_risk_path()
            self.noise_variance_path_ = self.risk_path_ - self.excess_risk_path_

    # ---------------------------------------------------------- warm state
    def _frozen_setup(self, left_out=None):
        """This fit's set-up for a refit without row ``left_out``."""
        setup = dataclasses.replace(self._setup)
        if setup.batch_seed is not None:
            sampler = MinibatchSampler(setup.n_samples, self.batch_size, setup.batch_seed)
            setup.sampler = sampler if left_out is None else sampler.without(left_out)
        return setup

    def __getstate__(self):
        # what only speeds up a warm-started refit, which recomputes it
        state = dict(super().__getstate__())  # a copy: never mutate __dict__
        for name in _WARM_ONLY:
            state.pop(name, None)
        return state
