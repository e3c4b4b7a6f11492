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

        {"Yields" if method.startswith("staged_") else "Returns"}
        {"------" if method.startswith("staged_") else "-------"}
        {returns}
        """
    return delegate if method == "predict" else available_if(_estimator_has(method))(delegate)


class SelectedIterateMixin:
    """``coef_``, ``intercept_``, ``classes_``, the predictions and ``score``
    of the selected iterate (``estimator_``'s), and the fitted path's
    predictions (``predict_path``, ``staged_predict``, ...), where the
    estimator has them."""

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

    # the fitted path's (``estimator_``'s whole path: iterate ``best_iteration_``
    # is the selected one, and the path may run past it)
    predict_path = _delegated(
        "predict_path",
        "Predictions of every iterate of the fitted path (``estimator_.predict_path``).\n\n"
        "        Column ``best_iteration_`` is :meth:`predict`'s (the selected iterate).\n"
        "        With ``best_iteration_`` ``None`` the selection is the alpha path's\n"
        "        converged solution, which is no column of the trajectory.",
        "Y : ndarray of shape (n_samples, estimator_.n_iter_ + 1)")
    staged_predict = _delegated(
        "staged_predict",
        "Yield the predictions of the fitted path's iterates ``0, 1, ..., estimator_.n_iter_``.",
        "y : ndarray, shaped as ``predict``'s")
    decision_function_path = _delegated(
        "decision_function_path",
        "Decision function of every iterate of the fitted path (classifiers).",
        "scores : ndarray of shape (n_samples, estimator_.n_iter_ + 1)")
    predict_proba_path = _delegated(
        "predict_proba_path",
        "Probability of ``classes_[1]`` at every iterate of the fitted path (classifiers).",
        "P : ndarray of shape (n_samples, estimator_.n_iter_ + 1)")
    staged_predict_proba = _delegated(
        "staged_predict_proba",
        "Yield the class probabilities of the fitted path's iterates (classifiers).",
        "proba : ndarray of shape (n_samples, n_classes)")

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
