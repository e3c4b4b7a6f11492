"""The path methods of the estimators that store ``coef_path_`` and
``intercept_path_`` (:class:`PathMixin`), and the regressors' ``fit``,
predictions, ``score`` and uncertainty quantification (:class:`TrajectoryMixin`),
for one target or the stacked paths of several."""

import numpy as np
from sklearn.utils.validation import check_is_fitted, validate_data

from ..estimates.risk._uq import UncertaintyMixin
from ..linalg._dask import is_dask
from ..utils._compat import _fit_context
from ._dask_fit import lazy_predictor, lazy_score
from ._docs import documents_x


class PathMixin:
    """Input validation and the linear predictor of every stored iterate
    (estimators with ``coef_path_`` and ``intercept_path_``)."""

    def _check_X(self, X):
        check_is_fitted(self)
        return validate_data(
            self, X, accept_sparse=("csr", "csc"), dtype=[np.float64, np.float32],
            reset=False,
        )

    def _decision_path(self, X, start=0):
        """Linear predictor of the iterates ``start, ..., n_iter_``: of shape
        (n_samples, S), or (n_samples, n_targets, S) for the stacked paths of
        several targets (one product with ``X`` for every target and
        iterate)."""
        coef, intercept = self.coef_path_[..., start:], self.intercept_path_[..., start:]
        if coef.ndim == 3:  # several targets: coef (p, n_targets * S)
            n_targets, p, S = coef.shape
            coef = coef.transpose(1, 0, 2).reshape(p, n_targets * S)
            intercept = intercept.reshape(-1)
        if is_dask(X):  # a lazy Dask array (skacv.estimators._dask_fit)
            out = lazy_predictor(self, X, coef, intercept)
        else:
            out = np.asarray(self._check_X(X) @ coef) + intercept
        return out if self.coef_path_.ndim == 2 else out.reshape(out.shape[0], n_targets, S)

    def linear_predictor_path(self, X, start=0):
        return self._decision_path(X, start)


def _linear_prediction(X, coef, intercept):
    """``X @ coef + intercept`` as an ndarray: of shape (n_samples,) for a
    coefficient vector, (n_samples, n_targets) for ``coef`` of shape
    (n_features, n_targets)."""
    product = np.asarray(X @ coef)
    return (product.ravel() if coef.ndim == 1 else product) + intercept


class TrajectoryMixin(UncertaintyMixin, PathMixin):
    """``fit``, the path methods and the uncertainty quantification
    (:class:`skacv.estimates.risk._uq.UncertaintyMixin`) of the regressors that store
    ``coef_path_``."""

    def record_iterate(self, iteration):
        # the default iterate of the debiasing methods while coef_ stays that array
        self._coef_is_iterate(iteration)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Run the iterations from zero (or extend the path, ``warm_start``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data. float32 input is kept in float32.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Target values. A 2-D ``y`` (one column included;
            :class:`~skacv.TrajectoryLasso`, :class:`~skacv.TrajectoryElasticNet`
            and :class:`~skacv.IterativeRidge`) fits one path per column
            (``estimators_``) and stacks the attributes along a leading
            target axis (see Attributes).
        sample_weight : array-like of shape (n_samples,), default=None
            Frequency weights (of every target): an integer weight equals
            repeating the row. The estimates (``risk_path_``, ``loo_path_``)
            use the same weights, with ``n_eff = sum(sample_weight)`` samples.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        return self._fit(X, y, sample_weight)

    @documents_x()
    def predict_path(self, X):
        """Predictions of every iterate.

        Returns
        -------
        Y : ndarray of shape (n_samples, n_iter_ + 1) or (n_samples, n_targets, n_iter_ + 1)
            ``Y[..., t]`` is the prediction of iterate ``t`` (0: the starting
            point); the target axis after the samples' when ``y`` was 2-D.
        """
        return self._decision_path(X)

    @documents_x()
    def staged_predict(self, X):
        """Yield the predictions of iterates ``0, 1, ..., n_iter_``.

        Yields
        ------
        y : ndarray of shape (n_samples,) or (n_samples, n_targets)
            Shaped as ``predict``'s.
        """
        dask = is_dask(X)  # lazy Dask arrays (skacv.estimators._dask_fit)
        X = X if dask else self._check_X(X)
        # iterate t: coef_path_[..., t] (transposed for several targets)
        for coef, intercept in zip(self.coef_path_.T, self.intercept_path_.T, strict=True):
            yield (lazy_predictor(self, X, coef, intercept) if dask
                   else _linear_prediction(X, coef, intercept))

    @documents_x()
    def predict(self, X):
        """Predict with the last iterate (the selected one in a search).

        Returns
        -------
        y : ndarray of shape (n_samples,) or (n_samples, n_targets)
            2-D when ``y`` was 2-D (one column included).
        """
        if is_dask(X):  # a lazy Dask array (skacv.estimators._dask_fit)
            return lazy_predictor(self, X, self.coef_.T, self.intercept_)
        return _linear_prediction(self._check_X(X), self.coef_.T, self.intercept_)

    def score(self, X, y, sample_weight=None):
        """Coefficient of determination ``R^2`` of ``predict`` (scikit-learn's
        ``RegressorMixin.score``; on a Dask input reduced over the row
        chunks).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        score : float
        """
        if is_dask(X, y, sample_weight):
            return lazy_score(self, X, y, sample_weight)
        return super().score(X, y, sample_weight=sample_weight)
