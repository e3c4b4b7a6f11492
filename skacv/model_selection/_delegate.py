"""Prediction with the iterate a search selected: the methods of
:class:`~skacv.TrajectoryEarlyStoppingCV` that delegate to its fitted
``estimator_`` (whose ``coef_`` / ``intercept_`` are the selected iterate)."""

from sklearn.utils.metadata_routing import process_routing
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ..utils._compat import _raise_for_params, _routing_enabled


def _estimator_has(attr):
    """The fitted ``estimator_`` (else the unfitted ``estimator``) has ``attr``."""

    def check(self):
        getattr(self.estimator_ if hasattr(self, "estimator_") else self.estimator, attr)
        return True

    return check


def routed_params(search, method, sample_weight, params, groups=None):
    """The metadata of ``search``'s ``method`` for its estimator's; with
    ``groups`` a dict, it receives the ``groups`` of the folds' ``split``
    (passed as ``GridSearchCV.fit`` takes them, routed or not)."""
    if _routing_enabled():
        if sample_weight is not None:
            params = {**params, "sample_weight": sample_weight}
        routed = process_routing(search, method, **params)
        if groups is not None:
            groups["groups"] = routed.splitter.split.get("groups")
        return dict(getattr(routed.estimator, method))
    if groups is not None:
        params = dict(params)
        groups["groups"] = params.pop("groups", None)
    _raise_for_params(params, search, method)
    return {} if sample_weight is None else {"sample_weight": sample_weight}


def _fitted(name, doc):
    """A property: the fitted ``estimator_``'s ``name``."""

    def get(self):
        check_is_fitted(self)
        return getattr(self.estimator_, name)

    return property(get, doc=doc)


def _delegated(method, summary, returns):
    """``estimator_``'s ``method`` on ``X`` (available if the estimator has it;
    ``predict`` always)."""

    def delegate(self, X):
        check_is_fitted(self)
        return getattr(self.estimator_, method)(X)

    delegate.__name__ = method
    delegate.__qualname__ = f"SelectedIterateMixin.{method}"
    delegate.__doc__ = f"""{summary}

        Parameters
        ----------
        X : {{array-like, sparse matrix}} of shape (n_samples, n_features)

        Returns
        -------
        {returns}
        """
    return delegate if method == "predict" else available_if(_estimator_has(method))(delegate)


class SelectedIterateMixin:
    """``coef_``, ``intercept_``, ``classes_``, the predictions and ``score``
    of the selected iterate (``estimator_``'s)."""

    coef_ = _fitted("coef_", "Coefficients of the selected iterate (``estimator_.coef_``).")
    intercept_ = _fitted("intercept_",
                         "Intercept of the selected iterate (``estimator_.intercept_``).")
    classes_ = _fitted("classes_", "Class labels (classifiers only).")
    predict = _delegated("predict", "Predict with the selected iterate.",
                         "y_pred : ndarray of shape (n_samples,)")
    predict_proba = _delegated("predict_proba", "Class probabilities of the selected iterate.",
                               "proba : ndarray of shape (n_samples, n_classes)")
    predict_log_proba = _delegated(
        "predict_log_proba", "Log of the class probabilities of the selected iterate.",
        "log_proba : ndarray of shape (n_samples, n_classes)")
    decision_function = _delegated(
        "decision_function", "Decision function of the selected iterate.",
        "scores : ndarray of shape (n_samples,) or (n_samples, n_classes)")

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
        kwargs = routed_params(self, "score", sample_weight, score_params)
        return self.estimator_.score(X, y, **kwargs)
