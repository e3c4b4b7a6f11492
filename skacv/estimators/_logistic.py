"""TrajectoryLogisticRegression: gradient paths of penalised logistic regression."""


import numpy as np
from scipy.special import expit, log_expit
from sklearn.base import ClassifierMixin, clone
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import column_or_1d, validate_data

from ..iterations._datafits import Logistic
from ..iterations._iterations import FISTA, SGD, GradientDescent, Iteration
from ..iterations._penalties import L1, L2
from ..utils._compat import StrOptions, _fit_context
from ..utils._validation import check_sample_weight
from ._base import (
    COMMON_CONSTRAINTS,
    TrajectoryEstimator,
    store_params,
)
from ._docs import documents_x
from ._intercept_column import InterceptColumnMixin
from ._path_methods import PathMixin
from ._protocol import geometric_grid


class TrajectoryLogisticRegression(InterceptColumnMixin, PathMixin, ClassifierMixin,
                                   TrajectoryEstimator):
    """Binary logistic regression fitted by a first-order method, keeping the path.

    Minimises the mean log-loss plus a penalty,

        (1 / n) sum_i log(1 + exp(-s_i (x_i^T w + b))) + alpha * P(w)

    with ``s_i = +-1``, ``P(w) = ||w||^2 / 2`` (``penalty="l2"``) or
    ``||w||_1`` (``penalty="l1"``) and an unpenalised intercept ``b``; with
    ``sample_weight`` the mean is ``sum_i w_i (...) / sum_i w_i``. This is
    scikit-learn's :class:`~sklearn.linear_model.LogisticRegression` with
    ``C = 1 / (alpha * sum(sample_weight))`` (``C = 1 / (alpha n)`` without
    weights; ``l1_ratio=1`` for ``"l1"``), to which the path converges.

    The intercept is an unpenalised coordinate: the steps run on the design
    ``X1 = [X - 1 m^T, s 1]`` (``m`` the columns' weighted means, ``s`` the
    largest root mean square of the centred columns; the intercept is ``b =
    s c - m^T w``), so the path does not depend on where the features'
    origin lies and the intercept moves as fast as the fastest feature's
    coordinate. The left-out fits hold ``m`` and ``s``, as they hold the
    step size. Features in very different units still leave the small ones
    behind (:class:`~skacv.exceptions.FeatureScaleWarning`): standardise them
    (e.g. :class:`~sklearn.preprocessing.StandardScaler`).

    There is no ``risk_path_``: the memory-matrix risk estimate of
    :class:`TrajectoryLasso` and :class:`IterativeRidge` is for least squares.
    ``estimate_loo=True`` gives the leave-one-out log-loss and
    misclassification of every iterate by iterative approximate
    cross-validation (Luo, Ren & Barber 2023).

    Parameters
    ----------
    alpha : float, default=1e-3
        Penalty level (mean form): ``C = 1 / (alpha n)``, so that the
        default is scikit-learn's ``C=1`` at about a thousand samples.
        Stopping early regularises more. ``TrajectoryEarlyStoppingCV(
        TrajectoryLogisticRegression())`` chooses alpha and the iteration
        (:meth:`auto_alpha_grid`); ``search="grid"`` keeps this alpha.
    penalty : {"l2", "l1"}, default="l2"
    class_weight : dict, "balanced" or None, default=None
        scikit-learn's ``class_weight``: weights ``{class_label: weight}``
        (a class absent has weight 1); ``"balanced"``: ``n / (2 n_c)``
        (``n`` and ``n_c`` the total and class sums of ``sample_weight``,
        ``sklearn.utils.class_weight.compute_class_weight``). They
        multiply ``sample_weight``, and everything sees the product as
        sample weights: the objective (``C = 1 / (alpha *
        sum(sample_weight))``), :meth:`auto_alpha_grid` and ``loo_path_``
        (frequency weights: the class-weighted log-loss, one unit of weight
        left out). The folds of :class:`~skacv.TrajectoryEarlyStoppingCV`
        compute their own class weights, as ``GridSearchCV``'s refits do,
        and weight their held-out losses by ``sample_weight`` only.
    solver : {"gd", "fista", "sgd"} or Iteration, default="fista"
        ``"gd"``: gradient descent (``"l1"``: proximal gradient, ISTA);
        ``"fista"``: accelerated proximal gradient (Beck & Teboulle 2009;
        with ``"l1"`` the extrapolation is clipped, see :class:`~skacv.FISTA`);
        ``"sgd"``: (proximal) mini-batch SGD, weighted mean gradient of
        ``batch_size`` rows, one permutation per epoch seeded by
        ``random_state``. An :class:`~skacv.Iteration` instance runs a
        user-defined algorithm.
    max_iter : int, default=100
        Total number of iterations of the path.
    step_size : "auto" or float, default="auto"
        ``"auto"``: ``1 / L`` with ``L = lambda_max(X1^T W X1) / (4 sum(w)) +
        alpha`` (l2), ``X1`` the design above; ``"sgd"`` adds ``R^2 / (4 batch_size)``,
        ``R`` the largest row norm.
    step_schedule : None, callable or array-like, default=None
        Step ``k`` uses ``step_size_ * schedule(k)`` (or ``schedule[k - 1]``).
    batch_size : int, default=32
        Rows per step of ``solver="sgd"``.
    fit_intercept : bool, default=True
    warm_start : bool, default=False
        ``max_iter`` is the total path length: a warm refit on the same data
        extends the stored path (50 + 50 steps equal 100).
    estimate_loo : bool, default=False
        Compute ``loo_path_`` and ``loo_error_path_``.
    loo_options : dict or None, default=None
        See :class:`TrajectoryLasso` (keys ``"batch_size"``,
        ``"subsample"``, ``"store_predictions"``: the leave-one-out
        probabilities).
    random_state : int, RandomState instance or None, default=None
        Seeds the SGD batches and the leave-one-out subsample.
    verbose : int, default=0

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
    coef_path_ : ndarray of shape (n_features, n_iter_ + 1)
        Every iterate of ``w``; column 0 is the start (zero).
    intercept_path_ : ndarray of shape (n_iter_ + 1,)
    coef_ : ndarray of shape (1, n_features)
        Last iterate (``coef_path_[:, -1]``).
    intercept_ : ndarray of shape (1,)
    n_iter_ : int
    step_size_ : float
    loo_path_ : ndarray of shape (n_iter_ + 1,)
        Leave-one-out log-loss of every iterate (weighted mean over samples
        of the loss at ``x_i`` of the run without sample ``i``, same steps),
        tracked by IACV (first-order accurate, ``O(1/n^2)`` per iterate).
        Only with ``estimate_loo=True``.
    loo_error_path_ : ndarray of shape (n_iter_ + 1,)
        Leave-one-out misclassification rate of every iterate.
    loo_predictions_ : ndarray of shape (n_loo, n_iter_ + 1)
        Leave-one-out probabilities of ``classes_[1]`` of the samples
        ``loo_indices_`` (``loo_options={"store_predictions": True}``).
    loo_indices_ : ndarray of shape (n_loo,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from skacv import TrajectoryLogisticRegression
    >>> X, y = make_classification(n_samples=200, n_features=10, random_state=0)
    >>> clf = TrajectoryLogisticRegression(alpha=0.01, max_iter=50, estimate_loo=True)
    >>> clf.fit(X, y).loo_path_.shape
    (51,)
    """

    _alpha_sums_weights = False
    _parameter_constraints: dict = {
        **{k: COMMON_CONSTRAINTS[k] for k in (
            "alpha", "max_iter", "step_size", "batch_size", "fit_intercept", "warm_start",
            "estimate_loo", "loo_options", "random_state", "verbose")},
        "penalty": [StrOptions({"l2", "l1"})],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "solver": [StrOptions({"gd", "fista", "sgd"}), Iteration],
        "step_schedule": [None, callable, "array-like"],
    }

    def __init__(
        self,
        alpha=1e-3,
        *,
        penalty="l2",
        class_weight=None,
        solver="fista",
        max_iter=100,
        step_size="auto",
        step_schedule=None,
        batch_size=32,
        fit_intercept=True,
        warm_start=False,
        estimate_loo=False,
        loo_options=None,
        random_state=None,
        verbose=0,
    ):
        store_params(self, locals())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Run the iterations from zero (or extend the path, ``warm_start``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Two classes.
        sample_weight : array-like of shape (n_samples,), default=None
            Frequency weights (an integer weight equals repeating the row).

        Returns
        -------
        self : object
        """
        return self._fit(X, y, self._fit_weights(y, sample_weight))

    def _fit_weights(self, y, sample_weight):
        """``sample_weight`` times the weights of the classes of ``y``
        (``class_weight``; ``None``: ``sample_weight`` itself)."""
        if self.class_weight is None:
            return sample_weight
        y = column_or_1d(y, warn=True)
        sw = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        classes, index = np.unique(y, return_inverse=True)
        with np.errstate(divide="ignore", invalid="ignore"):  # (a class of no weight)
            if isinstance(self.class_weight, str):  # "balanced", of the weighted counts
                # (scikit-learn's formula; its sample_weight argument is 1.7's)
                counts = np.bincount(index, weights=sw, minlength=classes.size)
                weight = (counts.sum() / (classes.size * counts))[index]
            else:
                weight = compute_class_weight(self.class_weight, classes=classes, y=y)[index]
            return weight if sw is None else np.where(sw != 0, weight * sw, 0.0)

    def auto_alpha_grid(self, X, y, sample_weight=None):
        """The alphas of :class:`~skacv.TrajectoryEarlyStoppingCV`'s
        literal default (``param_grid=None``): ``auto_grid_alphas``
        geometric values (the statistical policy) from the penalty's scale
        down to ``auto_grid_eps`` of it. ``"l2"``: the curvature bound of the
        mean log-loss, ``lambda_max(X1^T W X1) / (4 sum(w))`` (the ``L`` of
        ``step_size="auto"`` without ``alpha``), where the penalty halves the
        steepest direction; ``"l1"``: the smallest alpha whose solution is
        zero, ``||X^T W (y - mean_w(y))||_inf / sum(w)`` (labels {0, 1};
        ``y - 1/2`` without intercept). ``None`` where the scale is zero.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        alphas : ndarray of shape (n_alphas,) or None
            Decreasing.
        """
        est = clone(self)
        X, y = est._validate_xy(X, y, reset=True)
        sw = check_sample_weight(est._fit_weights(y, sample_weight), X, X.dtype)
        target, _ = est._encode_target(y, sw)
        design = est._make_design(X, sw)
        if self.penalty == "l2":
            top = est._make_datafit(design).max_curvature * design.lipschitz()
        else:
            w = np.ones(X.shape[0]) if sw is None else np.asarray(sw, dtype=np.float64)
            centre = w @ target / w.sum() if self.fit_intercept else 0.5
            top = float(np.max(np.abs(X.T @ (w * (target - centre))))) / w.sum()
        stats = design.statistics
        return geometric_grid(top, stats.auto_grid_alphas, stats.auto_grid_eps)

    # ------------------------------------------------------ problem pieces
    def _validate_xy(self, X, y, reset):
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"),
                             dtype=[np.float64, np.float32], reset=reset)
        check_classification_targets(y)
        y_type = type_of_target(y, input_name="y", raise_unknown=True)
        if y_type != "binary":
            raise ValueError(
                "Only binary classification is supported. The type of the target "
                f"is {y_type}. Use OneVsRestClassifier for more classes."
            )
        return X, y

    def _encode_target(self, y, sample_weight):
        classes = np.unique(y)
        if classes.shape[0] != 2:
            raise ValueError(
                "TrajectoryLogisticRegression is a binary classifier: it needs "
                f"samples of 2 classes, got {classes.shape[0]} class(es) "
                f"({classes.tolist()})."
            )
        self._fit_classes = classes
        return (y == classes[1]).astype(np.float64), classes

    def _fit_target(self, design, y):
        return 0.0, np.asarray(y, dtype=design.dtype)

    def _make_datafit(self, design):
        return Logistic(None if design.sqrt_weight is None
                        else design.sqrt_weight.astype(np.float64))

    def _make_penalty(self, design):
        cls = L2 if self.penalty == "l2" else L1
        return cls(self.alpha, n_unpenalized=int(self.fit_intercept))

    def _solvers(self, setup):
        return {"gd": (GradientDescent, {}), "fista": (FISTA, {}), "sgd": (SGD, {})}

    def _store_path(self, path, design, offset):
        self.classes_ = self._fit_classes
        super()._store_path(path, design, offset)
        self.coef_ = self.coef_[None, :]
        self.intercept_ = self.intercept_path_[-1:].copy()

    def _path_predictions(self, X):
        return expit(super()._path_predictions(X))

    # --------------------------------------------------------------- predict
    @documents_x()
    def decision_function(self, X):
        """Linear predictor of the last iterate.

        Returns
        -------
        scores : ndarray of shape (n_samples,)
            Positive scores predict ``classes_[1]``.
        """
        X = self._check_X(X)
        return np.asarray(X @ self.coef_[0]).ravel() + self.intercept_[0]

    @documents_x()
    def predict(self, X):
        """Class labels of the last iterate.

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        scores = self.decision_function(X)
        return self.classes_[(scores > 0).astype(int)]

    @documents_x()
    def predict_proba(self, X):
        """Class probabilities of the last iterate.

        Returns
        -------
        proba : ndarray of shape (n_samples, 2)
            Columns in the order of ``classes_``.
        """
        p1 = expit(self.decision_function(X))
        return np.column_stack([1.0 - p1, p1])

    @documents_x()
    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba` (computed stably).

        Returns
        -------
        log_proba : ndarray of shape (n_samples, 2)
        """
        d = self.decision_function(X)
        return np.column_stack([log_expit(-d), log_expit(d)])

    @documents_x()
    def decision_function_path(self, X):
        """Linear predictor of every iterate.

        Returns
        -------
        scores : ndarray of shape (n_samples, n_iter_ + 1)
        """
        return self._decision_path(X)

    @documents_x()
    def predict_path(self, X):
        """Class labels of every iterate.

        Returns
        -------
        Y : ndarray of shape (n_samples, n_iter_ + 1)
        """
        scores = self.decision_function_path(X)
        return self.classes_[(scores > 0).astype(int)]

    @documents_x()
    def predict_proba_path(self, X):
        """Probability of ``classes_[1]`` at every iterate.

        Returns
        -------
        P : ndarray of shape (n_samples, n_iter_ + 1)
        """
        return expit(self.decision_function_path(X))

    def _staged_scores(self, X):
        X = self._check_X(X)
        for t in range(self.coef_path_.shape[1]):
            yield np.asarray(X @ self.coef_path_[:, t]).ravel() + self.intercept_path_[t]

    @documents_x()
    def staged_predict(self, X):
        """Yield :meth:`predict` of iterates ``0, 1, ..., n_iter_``.

        Yields
        ------
        y : ndarray of shape (n_samples,)
        """
        for scores in self._staged_scores(X):
            yield self.classes_[(scores > 0).astype(int)]

    @documents_x()
    def staged_predict_proba(self, X):
        """Yield :meth:`predict_proba` of iterates ``0, 1, ..., n_iter_``.

        Yields
        ------
        proba : ndarray of shape (n_samples, 2)
        """
        for scores in self._staged_scores(X):
            p1 = expit(scores)
            yield np.column_stack([1.0 - p1, p1])
