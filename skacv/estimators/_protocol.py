"""The methods a trajectory estimator offers the search, written once
(:class:`SearchProtocol`, with the defaults of an estimator that fits whole
paths and declares no capability), and the fit shell's implementation of
them (:class:`FitShellSearch`). What the search does with each:
``docs/architecture.rst`` ("The estimator protocol").
"""

import contextlib
from typing import Protocol, runtime_checkable

import numpy as np
from scipy.special import logit
from sklearn.base import is_classifier

from ._setup import NO_PLAN


def geometric_grid(top, n_alphas, eps):
    """``auto_alpha_grid``'s alphas: ``n_alphas`` geometric values from
    ``top`` down to ``eps`` times it (``None`` where ``top`` is not
    positive: no penalty scale)."""
    return np.geomspace(top, eps * top, n_alphas) if top > 0 else None


@runtime_checkable
class SearchProtocol(Protocol):
    """The methods :class:`~skacv.TrajectoryEarlyStoppingCV` calls on a
    trajectory estimator, with their defaults.

    Subclass it (every skacv estimator does) and override what your
    estimator supports, or implement every method. A trajectory estimator
    also has the parameters ``max_iter`` and ``warm_start`` for a path grown
    in stages (a warm-started refit with a larger ``max_iter`` continues
    the stored path and its estimates), ``estimate_risk`` and/or
    ``estimate_loo`` for its criteria, and its ``fit`` sets ``coef_path_``,
    ``intercept_path_`` and the criterion's path (``risk_path_``,
    ``loo_path_``, each of shape ``(n_iter_ + 1,)``).

    What the estimator is (read before the fits):

    * :meth:`linear_iterations`, :meth:`risk_available`,
      :meth:`stores_path`, :meth:`stacks_folds`.

    Paths grown in stages (``n_iter_no_change``):

    * :meth:`planned`, :meth:`finish_deferred`, :meth:`release_warm_state`.

    The problem (K-fold CV with the folds as one block, the alpha path):

    * :meth:`path_problem`, :meth:`path_iteration`,
      :meth:`validate_fit_data`, :meth:`auto_alpha_grid`.

    The fitted path:

    * :meth:`linear_predictor_path`, :meth:`fitted_design`,
      :meth:`record_iterate`.
    """

    # ------------------------------------------------ what the estimator is
    def linear_iterations(self):
        """Whether the iterates are a linear function of ``y`` whose risk is
        computed spectrally: its cost does not grow with the path's length
        (``criterion="auto"`` then prefers ``"risk"``, and stages grow at
        the linear rate).

        Returns
        -------
        linear : bool
            Default ``False``.
        """
        return False

    def risk_available(self):
        """Whether ``estimate_risk=True`` is possible with the current
        parameters (``criterion="auto"`` reports the risk beside
        leave-one-out only then).

        Returns
        -------
        available : bool
            Default ``True``.
        """
        return True

    def stores_path(self):
        """Whether ``fit`` stores the iterates as ``coef_path_`` and
        ``intercept_path_``, of which the search selects one without
        refitting (the search refuses an estimator that does not, before
        any fit).

        Returns
        -------
        stores : bool
            Default ``True``.
        """
        return True

    def stacks_folds(self):
        """Whether K-fold CV along the path may run the folds as one block
        (full-batch least squares on the plain design), built from
        :meth:`path_problem` and :meth:`path_iteration` of every fold; the
        same condition lets a Dask input be fitted on its row statistics.

        Returns
        -------
        stacks : bool
            Default ``False``: each fold is a fit of its own.
        """
        return False

    # ------------------------------------------------------ staged fits
    def planned(self, plan):
        """A context for the fits of one grid point: inside it the fits
        follow ``plan`` (the length the path may reach, whether statistics
        wait for :meth:`finish_deferred`, what the risk's probes are for,
        whether every fit is on the same data); what they deferred and did
        not finish is dropped at its end, unless the plan keeps it.

        Parameters
        ----------
        plan : FitPlan
            A frozen dataclass (``skacv.estimators._setup.FitPlan``); an
            estimator may ignore it.

        Returns
        -------
        block : context manager
            Default: a block that does nothing.
        """
        return contextlib.nullcontext(self)

    def finish_deferred(self):
        """Compute what the fits of the enclosing :meth:`planned` block
        deferred to the last one (default: nothing). The search calls it at
        the block's end, or, where the plan keeps what waits
        (``keep_deferred``), on the candidate it selects only."""

    def release_warm_state(self):
        """Free what a warm-started refit would continue from (the search
        calls it once a path has stopped growing; default: nothing)."""

    # ---------------------------------------------------------- the problem
    def path_problem(self, design, validate=True):
        """The data fit and the penalty that the current parameters define
        on ``design`` (the parameters are validated first).

        Parameters
        ----------
        design : Design
            The centred, weighted design ``X~`` (``skacv.linalg._design``).
        validate : bool, default=True
            ``False``: the caller has validated the same parameters already
            (the stacked folds' designs after the first).

        Returns
        -------
        datafit, penalty : objects of ``skacv.iterations``
        """
        raise NotImplementedError(f"{type(self).__name__} declares no problem for the search.")

    def path_iteration(self, design, datafit, penalty):
        """The algorithm of a new path on ``design`` (its step size by the
        estimator's own rule), as a fit from zero would run it.

        Parameters
        ----------
        design : Design
        datafit, penalty : the result of :meth:`path_problem`

        Returns
        -------
        iteration : Iteration
        """
        raise NotImplementedError(f"{type(self).__name__} declares no iteration for the "
                                  "search.")

    def auto_alpha_grid(self, X, y, sample_weight=None):
        """The penalties the literal default search walks when the estimator
        has no alpha path (``param_grid=None``, ``search="auto"``), largest
        first.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        alphas : ndarray of shape (n_alphas,) or None
            Default ``None``: a single fit with the estimator's own ``alpha``.
        """
        return None

    def validate_fit_data(self, X, y):
        """``X`` and ``y`` checked and converted as ``fit`` checks them (so
        that the search's errors are the estimator's own).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        X, y : the validated data (default: unchanged)
        """
        return X, y

    # ------------------------------------------------------- the fitted path
    def linear_predictor_path(self, X, start=0):
        """The linear predictor of the iterates ``start, ..., n_iter_`` at
        the rows ``X`` (K-fold CV along the path scores it on the held-out
        rows).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        start : int, default=0

        Returns
        -------
        eta : ndarray of shape (n_samples, n_iter_ + 1 - start)
            Default: ``predict_path`` (classifiers: the log-odds of
            ``predict_proba_path``).
        """
        if is_classifier(self):
            proba = self.predict_proba_path(X)[:, start:]
            return logit(np.clip(proba, 1e-15, 1 - 1e-15))
        return self.predict_path(X)[:, start:]

    def fitted_design(self):
        """The centred design of the last fit, kept for a warm-started
        refit (``None`` when not kept; the folds of K-fold CV then share its
        centring)."""
        return None

    def record_iterate(self, iteration):
        """Record that ``coef_`` is now the stored iterate ``iteration``
        (``None``: a converged fit, no iterate), the search's choice
        (default: nothing).

        Parameters
        ----------
        iteration : int or None
        """


class FitShellSearch(SearchProtocol):
    """The fit shell's side of the protocol (docs/architecture.rst, "The
    estimator protocol"), from its hooks and warm state."""

    @contextlib.contextmanager
    def planned(self, plan):
        self._plan = plan
        try:
            yield self
        finally:
            if not plan.keep_deferred:
                self.__dict__.pop("_uq_pending", None)
            # the data the block's first fit validated (FitPlan.same_data)
            self.__dict__.pop("_plan_data", None)
            del self._plan

    def _plan_in_force(self):
        """The :class:`~skacv.estimators._setup.FitPlan` of the enclosing
        :meth:`planned` block."""
        return self.__dict__.get("_plan", NO_PLAN)

    def finish_deferred(self):
        # the debiasing statistics of the last fit (FitPlan.defer_uq)
        pending = self.__dict__.pop("_uq_pending", None)
        if pending is not None:
            self._set_uq(*pending)

    def release_warm_state(self):
        # the Jacobian chains or Lanczos process, the centred design and
        # its decompositions
        self._risk_state = None
        self._loo_state = None
        self._warm_design = None
        self._point_path = None
        screen = getattr(self.__dict__.get("_solver_state"), "screen", None)
        if screen is not None:  # the working set's columns and the design
            screen.release()

    def path_problem(self, design, validate=True):
        if validate:
            self._validate_params()
        return self._make_datafit(design), self._make_penalty(design)

    def path_iteration(self, design, datafit, penalty):
        return self._make_iteration(self._new_setup(design, datafit, penalty), design, penalty)

    def validate_fit_data(self, X, y):
        return self._validate_xy(X, y, reset=True)

    def fitted_design(self):
        return self.__dict__.get("_warm_design")
