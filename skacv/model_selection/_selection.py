"""TrajectoryEarlyStoppingCV: choose the iteration (and the parameters) of a
trajectory estimator from its own risk estimate, its leave-one-out error or
K-fold CV along its path, without refitting (its parts: docs/architecture.rst).
"""

import dataclasses
import warnings
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.model_selection import ParameterGrid, check_cv
from sklearn.utils import check_random_state, get_tags
from sklearn.utils.metadata_routing import MetadataRouter, MethodMapping
from sklearn.utils.validation import check_is_fitted

from .._policy import current_policies
from ..estimators._advice import warn_weight_scale
from ..exceptions import UnreliableEstimateWarning
from ..linalg._dask import is_dask
from ..linalg._design import shared_designs
from ..linalg._sampling import rows_behind
from ..utils._compat import (
    CachedParamNames,
    HasMethods,
    Interval,
    StrOptions,
    _fit_context,
    _num_features,
    _num_samples,
)
from ..utils._validation import user_stacklevel
from ._alpha_path import risk_alpha_path, supports_alpha_path
from ._candidates import fit_candidates, walk_grid
from ._criteria import CRITERIA, resolve_auto, switch_estimates
from ._dask_search import sufficient_search
from ._delegate import SelectedIterateMixin, routed_params
from ._kfold import resolve_fold_dtype
from ._kfold_search import full_fit, kfold_splits
from ._mixing_search import fit_mixing_search, mixing_grid, searches_path
from ._path_search import check_far_rows_at, fit_path_search, warn_converged
from ._results import (
    GatheredWarnings,
    UndefinedEstimate,
    cv_results,
    flat_edge,
    one_target,
    select,
    set_iterate,
    unreliable_risk,
    warn_boundary,
    warn_grid_edge,
)
from ._search_params import check_protocol, warn_ignored_params
from ._stages import within_limit


class TrajectoryEarlyStoppingCV(CachedParamNames, SelectedIterateMixin, MetaEstimatorMixin,
                                BaseEstimator):
    """Choose the iteration and the parameters of a trajectory estimator along
    its path, by an estimate of its out-of-sample error: no refit.

    The wrapped estimator (e.g. :class:`TrajectoryLasso`,
    :class:`IterativeRidge`) is fitted once per point of ``param_grid`` on the
    whole training set. Each fit stores every iterate and an estimate of its
    out-of-sample risk: ``risk_path_`` (the memory-matrix estimate of Bellec &
    Tan 2024) or ``loo_path_`` (iterative approximate leave-one-out, Luo, Ren &
    Barber 2023), or K-fold CV along the path (``kfold_path_``). The pair
    (grid point, iteration) with the smallest estimate is selected, and the
    fitted estimator of that grid point is kept with its ``coef_`` /
    ``intercept_`` set to the selected iterate. With ``search="path"`` the
    same criterion at convergence scores the converged fits, which compete
    with the iterates (the user guide's "How the choice is made" gives the
    search step by step). ``GridSearchCV`` over ``max_iter`` costs k folds
    times the candidate lengths, then a refit; this, one path per grid point.

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
        the penalty. ``"risk"``: ``risk_path_`` (flagged iterates of
        ``risk_reliable_`` excluded) and, along alpha, its limit at
        convergence (:func:`skacv.risk_alpha_path`). ``"loo"``:
        ``loo_path_`` and, along alpha, the converged fit's exact
        leave-one-out (its limit: both score the same quantity).
        ``"kfold"``: K-fold CV along the path (each fold fitted once, for
        ISTA and FISTA as one block that costs about one fit; the iterate of
        the fit on all the data selected) and, along alpha, K-fold CV of the
        converged fits (as ``LassoCV``). ``"auto"`` is an estimate without
        refits: ``"risk"`` for the least-squares solvers with full batches,
        ``"loo"`` for the others (on a random subsample of the rows above 100
        samples), K-fold CV where the risk estimate is unreliable (below 100
        samples with more features than samples, ``"loo"`` there below ``cv``
        samples where the estimator tracks it, iterates flagged where the
        choice lies, or a Lasso path search whose support's leave-one-out by
        leverages is more than ``auto_alo_ratio`` (1.3) times the estimate
        at its converged choice: far rows carry the fit; an
        :class:`~skacv.exceptions.UnreliableEstimateWarning` says why),
        ``"loo"`` for a ridge path search where the exact
        leave-one-out of the converged fits is more than twice its minimum
        at the risk estimate's choice (the leverages spread; the statistical
        policy's ``ridge_auto_loo_ratio``). The criterion used is
        ``criterion_``.
    cv : int, cross-validation generator or iterable, default=5
        Folds of ``criterion="kfold"`` (and of ``"auto"`` when it chooses
        it). An int is the number of folds (``StratifiedKFold`` for
        classifiers, ``KFold`` otherwise), shuffled with ``random_state``
        when it is given, in order when it is ``None``. Anything else is
        used as in :func:`~sklearn.model_selection.check_cv`.
    fold_alignment : {"time", "iteration"}, default="time"
        How K-fold CV along the path matches the folds' iterates with the
        full path's: ``"time"``, iterate ``t`` with fold ``j``'s point ``t *
        eta / eta_j`` (the same gradient-flow time), interpolated between its
        iterates; ``"iteration"``, the same index (textbook K-fold CV along
        the path, whose choice lands later on small problems). Mini-batch
        solvers and step schedules match by index.
    fold_dtype : {"auto", "float32", "float64"}, default="auto"
        Precision of the fold paths run as one block (ISTA, FISTA, the
        full-batch ``IterativeRidge`` solvers): ``"auto"`` is float32 (its
        rounding is far below a held-out error's sampling noise), float64
        where float32 cannot hold the data's sums of squares (a target in
        units of about 1e17 or more, or 1e-17 or less).
    param_grid : dict, list of dicts or None, default=None
        Parameters of ``estimator`` to search, as in
        :class:`~sklearn.model_selection.GridSearchCV` (e.g.
        ``{"alpha": [0.1, 0.03, 0.01]}``). ``None``: the penalty is chosen
        on the automatic grid of :func:`skacv.risk_alpha_path` (as
        ``LassoCV()``) where the estimator has an alpha path, else, with
        ``search="auto"``, on the estimator's own grid
        (:meth:`TrajectoryLogisticRegression.auto_alpha_grid`,
        :meth:`TrajectoryHuberRegressor.auto_alpha_grid`,
        :meth:`TrajectoryElasticNet.auto_alpha_grid` with ``positive=True``;
        walked from its largest alpha until two alphas bring no new minimum), else
        (``search="grid"``) a single fit with the estimator's ``alpha``.
        ``ElasticNetCV(l1_ratio=[.1, .5, 1])``'s search:
        ``param_grid={"l1_ratio": [.1, .5, 1]}``.
    search : {"auto", "grid", "path"}, default="auto"
        ``"auto"``: ``"path"`` when ``param_grid`` is ``None``, ``{"alpha":
        [...]}`` (two values or more) or has ``"l1_ratio"`` and the
        estimator is a least-squares one with an l1, l2 or elastic-net
        penalty (without ``positive=True``), ``"grid"`` otherwise (used:
        ``search_``). ``"grid"`` fits one trajectory per grid point.
        ``"path"`` (penalty only) returns the joint argmin of the criterion
        over (alpha, iteration) (and
        ``l1_ratio``), the converged fit of every alpha included: it solves
        and scores the whole alpha path at convergence
        (:func:`skacv.risk_alpha_path`), then fits the from-zero
        trajectories of the alpha chosen there and around it (see
        ``path_neighbors``). The converged fit is selected
        (``best_iteration_ = None``) when it scores lower than every iterate
        (a SelectionBoundaryWarning says so when a trajectory was still
        improving at ``max_iter``).
    path_neighbors : int, default=1
        ``search="path"`` only: the trajectories' window widens until the
        best has this many fitted alphas on each side (or the grid's end),
        all scoring higher; alphas whose converged score an early-stopping
        gain could take below the best are fitted too (the statistical
        policy's ``walk_gain_df`` and ``walk_rtol``). ``0`` fits the
        converged fits' choice only (faster, not the joint argmin). With
        K-fold CV on paths too cheap for stages, every alpha is fitted
        (several alphas' folds in one block: the speed policy's ``stack_grid``).
    path_params : dict or None, default=None
        ``search="path"`` only: extra keyword arguments of
        :func:`skacv.risk_alpha_path` (``n_alphas``, ``eps``, ``tol``,
        ``max_iter``, ``n_alphas_no_change``). By default the path stops
        after 3 alphas without a new minimum of the estimate, once its
        fits' df reach half the number of samples
        (``n_alphas_no_change=3``; with K-fold CV, ``None``: the whole grid).
    n_iter_no_change : int or None, default=10
        Early stopping of each path on its own estimate: the path is grown by
        warm-started refits and stops after no improvement during the last
        ``n_iter_no_change`` iterations and half the best iteration (twice
        it where the estimate rippled on its way down to its minimum, as
        under momentum), unless (``search="path"``) its alpha's converged
        score lies below that minimum. A path whose estimate still falls at
        ``max_iter`` (its minimum among the last ``n_iter_no_change``
        iterates) grows past it and stops as above, up to 10 times
        ``max_iter`` (K-fold CV too), unless that minimum lies within
        0.25 % of its alpha's converged score.
        ``estimator_.n_iter_`` is where the selected
        path stopped. ``None`` fits every path to ``max_iter``; paths too
        cheap for stages to pay are fitted whole too.
    n_jobs : int or None, default=None
        Grid points fitted in parallel with joblib. ``None`` means 1 unless
        in a :func:`joblib.parallel_backend` context; ``-1`` uses all
        processors. Any joblib backend works (``"loky"``, ``"threading"``,
        ``"dask"``, ``"ray"``).
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
        over the folds (only when ``criterion_ == "kfold"``).
    n_splits_ : int
        Number of folds (only when ``criterion_ == "kfold"``).
    search_ : {"grid", "path"}
        The search strategy used (``search`` resolved).
    estimator_ : estimator object
        The fitted clone of the selected grid point, with its whole path
        (``coef_path_``, ``risk_path_``, ...); its ``coef_`` and
        ``intercept_`` are the selected iterate (or converged fit).
    best_estimator_ : estimator object
        ``estimator_``, under :class:`~sklearn.model_selection.GridSearchCV`'s
        name (the same object; nothing was refitted).
    best_iteration_ : int or None
        Selected iteration (``0`` is the starting point); ``None`` when
        ``search="path"`` selected the converged fit of the chosen alpha.
    best_params_ : dict
        Selected grid point (``{}`` for a single fit).
    best_index_ : int
        Row of ``cv_results_`` of the selected grid point.
    best_risk_ : float
        The criterion at the selection (``criterion_``'s path at
        ``best_iteration_``, or ``cv_results_["path_<criterion>"]`` of a
        converged fit): an estimate of ``E[(y_new - f(x_new))^2]`` for
        regressors, the log-loss for classifiers. Lower is better.
    best_score_ : float
        ``-best_risk_``: higher is better, as ``GridSearchCV.best_score_``.
    risk_path_ : ndarray of shape (estimator_.n_iter_ + 1,)
        ``estimator_.risk_path_``, when the estimator computed it (one grid
        point: probes grown for the choice, not the level; see the user guide).
    loo_path_ : ndarray of shape (estimator_.n_iter_ + 1,)
        ``estimator_.loo_path_``, when the estimator computed it.
    coef_ : ndarray of shape (n_features,) or (n_classes, n_features)
        ``estimator_.coef_`` (the selected iterate).
    intercept_ : float or ndarray
        ``estimator_.intercept_``.
    classes_ : ndarray of shape (n_classes,)
        Classifiers only.
    cv_results_ : dict of ndarrays
        One row per grid point (per alpha for ``search="path"``, decreasing;
        per alpha walked on an estimator's own automatic grid),
        ready for ``pandas.DataFrame``: ``params``, ``param_<name>`` (masked
        arrays), ``best_iteration``, ``min_<criterion>``,
        ``rank_<criterion>``, ``<criterion>_path`` (object array: the whole
        path of each row; also ``risk_path`` / ``loo_path`` when computed,
        and ``risk_reliable`` with ``risk_path``), ``n_iter`` (length of the
        fitted path) and ``fit_time``. With ``search="path"`` also
        ``path_<criterion>`` (the criterion at convergence), ``path_risk``,
        ``path_df``, ``path_n_iter``, ``trajectory_fitted`` and ``reason``
        (why an alpha has no score; its scores are NaN); trajectory columns
        are masked (or ``None``) for alphas without a trajectory.
    alpha_path_ : Bunch
        ``search="path"`` only: the result of :func:`skacv.risk_alpha_path`
        (with ``criterion_ == "kfold"``, a Lasso's or an elastic net's path is
        solved after the folds', to the duality gap ``tol`` times each
        alpha's K-fold CV error, the folds' own precision, not to the risk
        estimate's).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` has feature names.

    See Also
    --------
    sklearn.model_selection.GridSearchCV : k-fold search with a refit.
    RiskPathDisplay : plot the risk path and the selected iteration.

    Notes
    -----
    The estimates are consistent in the proportional regime (``n`` and ``p`` large and
    comparable) for Gaussian-like designs; see the user guide. With Hutchinson traces
    (``n_probes=int``) the selected iteration can move between close iterates from one probe
    seed to another (``random_state`` fixes it). Iterates flagged by ``risk_reliable_`` are
    never selected. A choice on the edge of the search (the first or last value of a numeric
    grid of at least 3 values, or the smallest alpha of an automatic grid, where the criterion
    still falls by ``limit_rtol`` (1 %); or the iteration ``max_iter``) raises a
    :class:`~skacv.exceptions.SelectionBoundaryWarning` with the fix. Estimates closer than a
    relative ``1e-9`` are ties: the first grid point and the earliest iteration win. A parameter
    read under another's value only (``path_*``, ``cv``, ``fold_*``) warns when set and ignored.

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
        "criterion": [StrOptions({"auto", *CRITERIA})],
        "cv": ["cv_object"],
        "fold_alignment": [StrOptions({"time", "iteration"})],
        "fold_dtype": [StrOptions({"auto", "float32", "float64"})],
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
                 fold_dtype="auto", param_grid=None, search="auto", path_neighbors=1,
                 path_params=None, n_iter_no_change=10, n_jobs=None, random_state=None,
                 verbose=0):
        self.estimator = estimator
        self.criterion = criterion
        self.cv = cv
        self.fold_alignment = fold_alignment
        self.fold_dtype = fold_dtype
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
        self._policies = current_policies()  # read once, handed to its fits and rules
        if self.criterion == "auto":
            self.criterion_, self._loo_subsample, self._both = resolve_auto(
                self.estimator, n_samples, n_features, self.cv, self._policies)
        else:
            self.criterion_, self._loo_subsample, self._both = self.criterion, None, False
        grid = self.param_grid
        if grid is not None:
            ParameterGrid(grid)  # scikit-learn's checks (a bare value: wrap it in a list)
        if self.search == "auto":
            self.search_ = ("path" if searches_path(grid)
                            and supports_alpha_path(self.estimator, n_samples) else "grid")
        else:
            self.search_ = self.search
        warn_ignored_params(self)
        self._seed = check_random_state(self.random_state).randint(np.iinfo(np.int32).max)

    def _folds(self, X, y, groups=None):
        """The folds of ``criterion_ == "kfold"`` (the same for every grid point)."""
        if self.criterion_ != "kfold":
            return None
        return kfold_splits(self.cv, X, y, is_classifier(self.estimator),
                            None if self.random_state is None else self._seed, groups)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        sub = get_tags(self.estimator)
        tags.estimator_type = sub.estimator_type
        tags.input_tags = sub.input_tags
        # one criterion path per grid point: a 1-D target (a column y is
        # raveled; several targets: one search each, MultiOutputRegressor)
        tags.target_tags = dataclasses.replace(sub.target_tags, multi_output=False)
        tags.regressor_tags = sub.regressor_tags
        tags.classifier_tags = sub.classifier_tags
        return tags

    # ------------------------------------------------------------ routing
    def get_metadata_routing(self):
        """Get metadata routing of this object.

        ``fit`` metadata (``sample_weight``) go to the estimator's ``fit``
        (hence to its estimates), ``groups`` to the ``split`` of ``cv``;
        ``score`` metadata to the estimator's ``score``.

        Returns
        -------
        routing : MetadataRouter
        """
        return MetadataRouter(owner=self.__class__.__name__).add(
            estimator=self.estimator,
            method_mapping=MethodMapping()
            .add(caller="fit", callee="fit")
            .add(caller="score", callee="score"),
        ).add(splitter=check_cv(self.cv, classifier=is_classifier(self.estimator)),
              method_mapping=MethodMapping().add(caller="fit", callee="split"))

    @property
    def best_estimator_(self):
        """``estimator_`` (GridSearchCV's name for the chosen fitted estimator)."""
        check_is_fitted(self, "estimator_")
        return self.estimator_

    # ---------------------------------------------------------------- fit
    def _prepared(self, params):
        """The clone of a grid point, seeded, with the estimates of the criterion."""
        est = clone(self.estimator)
        own = est.get_params(deep=False)
        if "random_state" in own and own["random_state"] is None:
            # one seed for every grid point: common random numbers across the grid
            est.set_params(random_state=self._seed)
        if params:
            est.set_params(**params)
        return switch_estimates(est, own, self.criterion_, self.criterion == "auto",
                                self._loo_subsample, self._both)

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
            ``groups`` (array-like of shape (n_samples,)): group labels of the
            folds' ``split`` (e.g. ``cv=GroupKFold()``), as in
            ``GridSearchCV.fit``. Other metadata for the estimator's ``fit``
            only with ``sklearn.set_config(enable_metadata_routing=True)``.

        Returns
        -------
        self : object
            Fitted meta-estimator.
        """
        check_protocol(self.estimator)
        split = {}  # the folds' groups
        routed = routed_params(self, "fit", sample_weight, fit_params, split)
        dask = is_dask(X, y, routed.get("sample_weight"))
        source = None  # on a Dask input, the rows behind the compressed sample
        if dask:  # one pass over the rows (_dask_search)
            X, y, routed, self._splits, source = sufficient_search(self, X, y, routed,
                                                                   split["groups"])
        else:
            y = one_target(y)
            self._resolve(X)
            self._splits = self._folds(X, y, split["groups"])
        if self.criterion_ != "kfold" and not dask:  # (K-fold reads the weights' ratios)
            warn_weight_scale(self.estimator, routed.get("sample_weight"), self._policies[1])
        auto_risk = self.criterion == "auto" and self.criterion_ == "risk" and not dask
        self._auto_risk = auto_risk  # a ridge path may move it to leave-one-out
        with GatheredWarnings() as gathered:
            self._search_with_fallback(X, y, routed, source, auto_risk, dask, split["groups"])
        # the fits' warnings once each, from the user's call (_fit_context between)
        flags = np.asarray(self._selected_paths.get("risk_reliable_", 1))
        gathered.reissue(self.criterion_, self._converged is None and not (flags > 0).all())
        self._warn_boundary()
        est = self.estimator_
        est.finish_deferred()  # its debiasing statistics (the candidates' waited)
        selected = self._selected_paths
        if self._converged is None:
            self.best_risk_ = float(selected[CRITERIA[self.criterion_][0]][self.best_iteration_])
            set_iterate(est, self.best_iteration_)
        else:  # search="path": the trajectory's limit, the converged fit
            self.best_risk_ = self._converged.score
            set_iterate(est, None, self._converged.coef, self._converged.intercept)
        self.best_score_ = -self.best_risk_
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
        del (self._selected_paths, self._splits, self._converged, self._policies, self._walked,
             self._auto_risk, self._fold_dtype)
        self.n_features_in_ = est.n_features_in_
        if self.verbose:
            print(f"[TrajectoryEarlyStoppingCV] selected {self.best_params_} at iteration "
                  f"{self.best_iteration_}: estimated {self.criterion_} {self.best_risk_:.6g}")
        return self

    def _search_with_fallback(self, X, y, routed, source, auto_risk, dask, groups):
        """The search; with ``criterion="auto"``, again with K-fold CV where
        the risk estimate is undefined or flagged where the choice lies."""
        try:
            with rows_behind(source):
                self._search(X, y, routed)
            why = None if not auto_risk or self._converged or self.criterion_ != "risk" else (
                unreliable_risk(
                    self._selected_paths.get("risk_reliable_"), self.best_iteration_,
                    self.n_iter_no_change))
        except UndefinedEstimate as exc:
            if not auto_risk:
                raise
            why = str(exc)
        if why is None:
            return
        # no no-refit estimate is reliable here: K-fold CV, and say why
        warnings.warn(
            f"criterion='auto' used K-fold CV along the path (cv={self.cv!r}) instead of "
            f"the risk estimate: {why} Set criterion='kfold' to skip the estimate, or "
            "criterion='loo' (exact leave-one-out, slower) to keep a no-refit choice.",
            UnreliableEstimateWarning, stacklevel=user_stacklevel())
        self.criterion_, self._loo_subsample, self._both = "kfold", None, False
        try:
            self._splits = self._folds(X, y, groups)
        except ValueError as exc:
            raise ValueError(
                f"n_samples={_num_samples(X)} is too few for criterion='auto': {why} "
                f"And {exc}") from exc
        self._search(X, y, routed)

    def _search(self, X, y, routed):
        # the alpha path and the candidates fitted in this thread share the
        # design of X (one centred copy, one Gram matrix; skacv.linalg._design)
        self._converged = None  # search="path" may select the converged fit
        self._walked = None  # the automatic grid of an estimator without alpha path
        # the stacked folds' precision on these data (float64 where float32 cannot hold them)
        self._fold_dtype = (resolve_fold_dtype(self.fold_dtype, X, y, routed.get("sample_weight"),
                                               self._policies[0])
                            if self.criterion_ == "kfold" else self.fold_dtype)
        with shared_designs():
            if self.search_ == "grid":
                self._fit_grid_search(X, y, routed)
            elif mixing_grid(self.param_grid) is not None:  # (and over l1_ratio)
                fit_mixing_search(self, X, y, routed)
            else:
                fit_path_search(self, X, y, routed)

    def _candidates(self):
        if self.param_grid is None:
            return [{}]
        candidates = list(ParameterGrid(self.param_grid))
        if not candidates:
            raise ValueError("param_grid is empty: give at least one value per parameter.")
        return candidates

    def _auto_grid(self, X, y, fit_params):
        """The estimator's own alpha grid of the literal default (``None``:
        a single fit), as ``{"alpha": [...]}``, decreasing."""
        if self.param_grid is not None or self.search != "auto":
            return None
        alphas = clone(self.estimator).auto_alpha_grid(X, y, fit_params.get("sample_weight"))
        return None if alphas is None else {"alpha": [float(a) for a in alphas]}

    def _fit_grid_search(self, X, y, fit_params):
        self._walked = self._auto_grid(X, y, fit_params)
        if self._walked is None:
            candidates = self._candidates()
            paths, times, kept = fit_candidates(self, candidates, X, y, fit_params)
        else:  # walked from its largest alpha (the fitted ones are the candidates)
            candidates = [{"alpha": a} for a in self._walked["alpha"]]
            paths, times, kept = walk_grid(self, candidates, X, y, fit_params)
            candidates = candidates[:len(paths)]
        i, t, mins, best_iters = select(paths, self.criterion_, self._policies[1].tie_rtol)
        if getattr(self, "_auto_risk", False) and self.criterion_ == "risk":
            check_far_rows_at(self.estimator, candidates[i], X, y,
                              fit_params.get("sample_weight"), self._policies[1])
        self._selected_paths = paths[i]
        self.estimator_ = full_fit(kept[i])  # a deferred full fit runs now
        self.best_index_ = i
        self.best_iteration_ = t
        self.best_params_ = candidates[i]
        self.cv_results_ = cv_results(candidates, self.criterion_, paths, mins, best_iters,
                                      times)

    def _alpha_path(self, estimator, X, y, **kwargs):
        """:func:`skacv.risk_alpha_path` (a test double of the search overrides it)."""
        return risk_alpha_path(estimator, X, y, **kwargs)

    def _warn_boundary(self):
        """A choice on the edge of the grid or at ``max_iter`` (``warn_boundary``)."""
        grids = self.param_grid if isinstance(self.param_grid, list) else [self.param_grid]
        if self.search_ == "path":
            # (the automatic grid starts from the zero solution: no edge there)
            grids = [{"alpha": [r["alpha"] for r in self.cv_results_["params"]]}
                     if self.param_grid is not None and "alpha" in self.param_grid else {}]
            warn_grid_edge(self)
        elif self._walked is not None:  # the estimator's own grid: its edge below
            grids = [{}]
            warn_grid_edge(self)
        params = {**self.estimator.get_params(deep=False), **self.best_params_}
        if self._converged is not None:
            est = self.estimator_  # the chosen alpha's trajectory: where and how it ended
            warn_converged(self._converged, self.best_params_.get("alpha"),
                           params.get("max_iter"), self.criterion_,
                           self._policies[1].limit_rtol,
                           len(self._selected_paths[CRITERIA[self.criterion_][0]]) - 1,
                           est.n_iter_ < est.max_iter)
        flat = flat_edge(self.cv_results_, self.criterion_, self.best_index_,
                         self._policies[1].limit_rtol)
        warn_boundary(grids, self.best_params_, self.best_iteration_, params.get("max_iter"),
                      self.criterion_, getattr(self.estimator_, "n_iter_", None),
                      self._reached_limit(), flat)

    def _reached_limit(self):
        """Whether the selected trajectory's minimum lies within ``limit_rtol``
        of its alpha's converged criterion (``search="path"``)."""
        limits = self.cv_results_.get(f"path_{self.criterion_}")
        if self.search_ != "path" or self._converged is not None or limits is None:
            return False
        best = float(self._selected_paths[CRITERIA[self.criterion_][0]][self.best_iteration_])
        return within_limit(best, float(limits[self.best_index_]), self._policies[1])
