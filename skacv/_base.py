"""Base class of the trajectory estimators (fit loop, paths, warm start)."""

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ._config import check_memory
from ._design import Design
from ._path import init_state, run_trajectory
from ._validation import check_sample_weight, data_fingerprint, same_fingerprint, same_param


class PathMixin:
    """Input validation and the linear predictor of every stored iterate
    (estimators with ``coef_path_`` and ``intercept_path_``)."""

    def _check_X(self, X):
        check_is_fitted(self)
        return validate_data(
            self, X, accept_sparse=("csr", "csc"), dtype=[np.float64, np.float32],
            reset=False,
        )

    def _decision_path(self, X):
        X = self._check_X(X)
        return np.asarray(X @ self.coef_path_) + self.intercept_path_


class TrajectoryMixin(PathMixin):
    """Path methods shared by the regressors that store ``coef_path_``."""

    def predict_path(self, X):
        """Predictions of every iterate.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        Y : ndarray of shape (n_samples, n_iter_ + 1)
            Column ``t`` is the prediction of iterate ``t`` (column 0: the
            starting point).
        """
        return self._decision_path(X)

    def staged_predict(self, X):
        """Yield the predictions of iterates ``0, 1, ..., n_iter_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Yields
        ------
        y : ndarray of shape (n_samples,)
        """
        X = self._check_X(X)
        for t in range(self.coef_path_.shape[1]):
            yield np.asarray(X @ self.coef_path_[:, t]).ravel() + self.intercept_path_[t]


class BaseTrajectoryRegressor(TrajectoryMixin, RegressorMixin, BaseEstimator):
    """Common machinery: validation, the fit loop, warm start, estimates.

    Subclasses implement ``_make_iteration(design)`` returning an
    :class:`~skacv.Iteration`, ``_l2(design)`` (ridge penalty in mean form)
    and list in ``_warm_params`` the parameters a warm refit may not change.
    """

    _parameter_constraints: dict = {
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "step_size": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "fit_intercept": ["boolean"],
        "warm_start": ["boolean"],
        "estimate_risk": ["boolean"],
        "estimate_loo": ["boolean"],
        "store_loo_predictions": ["boolean"],
        "loo_batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "loo_subsample": [Interval(Integral, 1, None, closed="left"), None],
        "n_probes": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    _warm_params = ("fit_intercept", "step_size")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    # ----------------------------------------------------------------- hooks
    def _l2(self, design):
        return 0.0

    def _make_iteration(self, step_size, design):
        raise NotImplementedError

    # ------------------------------------------------------------------- fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Run the iterations from zero (or extend the path, ``warm_start``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data. float32 input is kept in float32.
        y : array-like of shape (n_samples,)
            Target values.
        sample_weight : array-like of shape (n_samples,), default=None
            Frequency weights: an integer weight equals repeating the row.
            The estimates (``risk_path_``, ``loo_path_``) use the same
            weights, with ``n_eff = sum(sample_weight)`` samples.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        warm = self.warm_start and hasattr(self, "coef_path_")
        if not warm:
            self._release_warm_state()  # state of a previous path
        X, y = validate_data(
            self, X, y, accept_sparse=("csr", "csc"),
            dtype=[np.float64, np.float32], y_numeric=True, reset=not warm,
        )
        y = np.asarray(y, dtype=X.dtype)
        sample_weight = check_sample_weight(sample_weight, X, X.dtype)
        fingerprint = data_fingerprint(X, y, sample_weight)
        params = {k: getattr(self, k) for k in self._warm_params}
        if warm:
            self._check_warm(fingerprint, params, sample_weight)
        n_total = self.max_iter
        check_memory(
            X.shape[1] * (n_total + 1) * X.dtype.itemsize,
            f"coef_path_ of shape ({X.shape[1]}, {n_total + 1})",
            "Lower max_iter. ",
        )
        design = Design(X, sample_weight, self.fit_intercept)
        if warm and getattr(self, "_design_cache", None) is not None:
            design.cache = self._design_cache  # same data (checked above)
        y_offset, y_tilde = design.center_y(y)
        if warm:
            step = self.step_size_
            n_done = self.n_iter_
            path = np.empty((X.shape[1], n_total + 1), dtype=X.dtype, order="F")
            path[:, : n_done + 1] = self.coef_path_
            state = self._solver_state
        else:
            step = self._auto_step(design)
            n_done = 0
            path = np.empty((X.shape[1], n_total + 1), dtype=X.dtype, order="F")
            path[:, 0] = 0
            state = init_state(design)
        iteration = self._make_iteration(step, design)
        fitted = None
        if self.estimate_risk:
            # X~ x^t of every iterate, kept for the residuals of the risk estimate
            check_memory(
                X.shape[0] * (n_total + 1) * X.dtype.itemsize,
                f"the fitted values of the path ({X.shape[0]}, {n_total + 1})",
                "Lower max_iter or set estimate_risk=False. ",
            )
            fitted = np.empty((X.shape[0], n_total + 1), dtype=X.dtype, order="F")
            old = getattr(self, "_fitted_path", None) if warm else None
            if old is not None and old.shape[1] == n_done + 1:
                fitted[:, : n_done + 1] = old
            else:
                fitted[:, : n_done + 1] = design.matvec(path[:, : n_done + 1])
        run_trajectory(
            design, y_tilde, iteration, n_total - n_done, state, path,
            verbose=self.verbose, fitted_out=fitted,
        )
        self._fitted_path = fitted
        self.step_size_ = step
        self.coef_path_ = path
        if self.fit_intercept:
            self.intercept_path_ = (y_offset - design.x_offset @ path).astype(X.dtype)
        else:
            self.intercept_path_ = np.zeros(n_total + 1, dtype=X.dtype)
        self.coef_ = path[:, -1].copy()
        self.intercept_ = self.intercept_path_[-1]
        self.n_iter_ = n_total
        self._solver_state = state
        self._fingerprint = fingerprint
        self._fit_params = params
        self._sample_weight_sum = None if sample_weight is None else float(sample_weight.sum())
        self._after_fit(design, y_tilde, iteration, X, y, sample_weight)
        self._design_cache = design.cache if self.warm_start else None
        return self

    def __getstate__(self):
        # the saved Jacobian chains only speed up a warm-started refit
        state = dict(super().__getstate__())  # a copy: never mutate __dict__
        state.pop("_risk_state", None)
        state.pop("_design_cache", None)
        return state

    def _release_warm_state(self):
        """Free what a warm-started refit would continue from (the Jacobian
        chains or Lanczos process, the design's decompositions)."""
        self._risk_state = None
        self._design_cache = None

    def _auto_step(self, design):
        if isinstance(self.step_size, str):
            L = design.lipschitz() + self._l2(design)
            return 1.0 / L if L > 0 else 1.0
        return float(self.step_size)

    def _check_warm(self, fingerprint, params, sample_weight):
        if self.max_iter < self.n_iter_:
            raise ValueError(
                f"max_iter={self.max_iter} must be larger than or equal to "
                f"n_iter_={self.n_iter_} when warm_start==True: max_iter is the "
                "total length of the path."
            )
        if fingerprint[0] != self._fingerprint[0]:
            raise ValueError(
                f"warm_start=True continues the path fitted on data of shape "
                f"{self._fingerprint[0]}, but X has shape {fingerprint[0]}. Set "
                "warm_start=False to fit new data."
            )
        sw_sum = None if sample_weight is None else float(sample_weight.sum())
        if (not same_fingerprint(fingerprint, self._fingerprint)
                or sw_sum != self._sample_weight_sum):
            raise ValueError(
                "warm_start=True continues the path fitted on other training data "
                "(X, y, sample_weight or the dtype of X changed). Set "
                "warm_start=False to fit new data."
            )
        changed = [k for k in params if not same_param(params[k], self._fit_params[k])]
        if changed:
            raise ValueError(
                f"warm_start=True cannot continue a path after {changed} changed "
                f"(was {[self._fit_params[k] for k in changed]}). Set "
                "warm_start=False to start a new path."
            )

    def _after_fit(self, design, y_tilde, iteration, X, y, sample_weight):
        """Fill the estimates (risk path, leave-one-out path)."""
        for name in ("risk_path_", "risk_matrix_", "loo_path_", "loo_predictions_",
                     "loo_indices_"):
            if hasattr(self, name):
                delattr(self, name)
        if self.estimate_risk:
            from ._risk import _estimator_risk

            _estimator_risk(self, design, y_tilde, iteration)
        if self.estimate_loo:
            from ._loo import _estimator_loo

            _estimator_loo(self, design, y_tilde, iteration, X, y, sample_weight)

    def predict(self, X):
        """Predict with the last iterate.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        X = self._check_X(X)
        return np.asarray(X @ self.coef_).ravel() + self.intercept_
