"""TrajectoryElasticNet and TrajectoryLasso: ISTA / FISTA paths of the
elastic net (the Lasso its ``l1_ratio=1`` case) with their risk."""

from numbers import Real

import numpy as np
from sklearn.base import RegressorMixin, clone

from ..iterations._datafits import LeastSquares
from ..iterations._iterations import FISTA, SGD, GradientDescent, Iteration
from ..iterations._penalties import L1, L2, ElasticNet
from ..utils._compat import Interval, StrOptions
from ..utils._validation import check_sample_weight
from ._base import COMMON_CONSTRAINTS, TrajectoryEstimator, store_params
from ._docs import DOC_ATTRIBUTES
from ._multitarget import MultiTargetMixin
from ._options import LOO_OPTIONS, RISK_OPTIONS
from ._path_methods import TrajectoryMixin
from ._protocol import geometric_grid

#: the numpydoc parameters after the penalty's (both estimators)
_SOLVER_PARAMETERS = """    solver : {"fista", "ista", "sgd"} or Iteration, default="fista"
        ``"fista"``: accelerated proximal gradient (Beck & Teboulle 2009)
        with a clipped extrapolation (no coordinate is extrapolated from or
        across zero, which keeps ``risk_path_`` right on correlated designs;
        ``solver=FISTA(extrapolation="plain")`` runs the original; see
        :class:`~skacv.FISTA` and the user guide);
        ``"ista"``: proximal gradient descent; ``"sgd"``: proximal mini-batch
        SGD (weighted mean gradient of ``batch_size`` rows, one random
        permutation per epoch seeded by ``random_state``, soft-thresholding
        at every step), whose ``risk_path_`` is Tan & Bellec's (2024)
        estimate through the batches. An :class:`~skacv.Iteration`
        instance runs a user-defined algorithm (its step size and the
        penalty are set at fit time; see the architecture page).
    max_iter : int, default=100
        Total number of iterations of the path.
    step_size : "auto" or float, default="auto"
        ``"auto"`` uses ``1 / L``, L the largest eigenvalue of ``X~^T X~ / n``
        (Lanczos, or LAPACK on small problems); ``"sgd"`` adds
        ``R^2 / batch_size``, ``R`` the largest centred row norm. A float is
        used as given.
    batch_size : int, default=32
        Rows per step of ``solver="sgd"`` (ignored by the other solvers).
    positive : bool, default=False
        Keep the coefficients non-negative (scikit-learn's ``positive=True``):
        the proximal step is ``max(0, soft-threshold)``, whose Jacobian is
        the mask of the positive coordinates, so ``risk_path_``,
        ``loo_path_`` and ``debiased_coef`` follow unchanged.
        :class:`TrajectoryEarlyStoppingCV` then has no converged alpha path
        (``search="path"`` raises): its literal default walks
        :meth:`auto_alpha_grid`.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept by weighted centring.
    warm_start : bool, default=False
        ``max_iter`` is the total path length: a warm refit on the same data
        extends the stored path from ``n_iter_`` to ``max_iter`` (the solver
        state, momentum included, is kept so that 50 + 50 steps equal 100).
        A smaller ``max_iter``, other data or other solver parameters raise.
        The risk estimate is continued too: the Jacobian chains of the last
        fit are kept (only while ``warm_start=True``; not pickled), so the
        refit propagates only the new steps; so is the centred design (a copy
        of ``X`` when there is an intercept or sample weights).
    estimate_risk : bool, default=True
        Compute ``risk_path_``: Jacobian chains of ``n_probes`` columns
        restricted to the support, about ``2 n_probes s^2`` flops a step
        against the fit's ``4 n p`` (``s`` the union of the supports; the
        costs measured: :ref:`benchmarks`).
        :class:`~skacv.TrajectoryEarlyStoppingCV` chooses by this estimate
        by default; set ``estimate_risk=False`` when ``risk_path_`` is not
        read.
    estimate_loo : bool, default=False
        Compute ``loo_path_``.
    n_probes : int, "auto" or None, default="auto"
        Hutchinson probes for the traces of the memory matrix, the accuracy
        of ``risk_path_`` against its cost; ``None`` computes them exactly
        (a deterministic estimate); ``"auto"`` computes them exactly when
        that costs at most 4 times 10 probes, or by the exact probes of a
        narrow design (``min(n_samples, n_features)`` at most the probes
        the pooled chain starts with: the same chain, deterministic), else
        starts the pooled probes' chain with fewer probes the more samples there are and
        grows them while a jackknife finds ``risk_path_`` noisy (its
        relative standard error in ``risk_diagnostics_``; the rule:
        :ref:`internals`); 10 probes with another probe scheme.
    risk_options : dict or None, default=None
        How the Jacobian chains of ``risk_path_`` run; a changed value
        changes the draw or the rounding, not the quantity estimated. Keys:

        - ``"probe_scheme"``: {"auto", "pooled", "shared"}, default "auto".
          The Hutchinson probes of ``solver="fista"`` and ``"ista"``
          (ignored by ``"sgd"`` and by exact traces). ``"pooled"``: every
          source injects the same ``n_probes`` probes into one chain, each
          row of the memory matrix split between the sources by the linear
          counterpart's: ``n_probes`` columns a step, continued by a warm
          start. ``"shared"``: the same probes, a chain for every source
          (the seed notebook's estimator, ``n_probes * max_iter**2 / 4``
          chain-steps). ``"auto"``: ``"pooled"``; ``"shared"`` with a heavy
          ball and on a Dask input (the rows' own probes). With ``"auto"``
          or ``"shared"`` a path whose supports stay fixed for its last 512
          steps or more takes the settled form (time linear in its length).
        - ``"chain_dtype"``: {"auto", "float32", "float64"}, default "auto".
          ``"auto"``: float32 chains with Hutchinson probes, whose own
          relative error (of order ``1 / sqrt(n_probes)``) dwarfs float32
          rounding (about 1e-6), the dtype of ``X`` with exact traces;
          ``"float64"``: the traces to rounding level, at about twice the
          time.
    loo_options : dict or None, default=None
        How the leave-one-out estimate (``estimate_loo=True``) runs. Keys:

        - ``"batch_size"``: int or None, default None. Left-out runs
          advanced together (``~ 8 * n_features * batch_size`` bytes per
          state block); ``None`` sizes the blocks from
          ``skacv.get_config()['working_memory']``.
        - ``"subsample"``: int or None, default None. Track only this many
          samples, drawn without replacement with ``random_state``;
          ``loo_path_`` is then a control-variate estimate of the full
          path, the in-sample losses of every sample the control (far more
          precise than the subsample mean; bias of order ``1 /
          subsample``, standard error ``loo_std_error_path_``).
        - ``"store_predictions"``: bool, default False. Keep the
          leave-one-out predictions (``loo_predictions_``,
          ``loo_indices_``).

        For example ``loo_options={"subsample": 500}``.
    random_state : int, RandomState instance or None, default=None
        Seeds the Hutchinson probes.
    verbose : int, default=0
        Progress messages.
"""


def elastic_net_penalty(alpha, l1_ratio, positive=False):
    """scikit-learn's ``ElasticNet`` penalty ``alpha l1_ratio ||w||_1 + alpha
    (1 - l1_ratio) ||w||^2 / 2`` in mean form: :class:`~skacv.L1` at
    ``l1_ratio=1`` (the Lasso), :class:`~skacv.L2` at ``0``, else
    :class:`~skacv.ElasticNet` (the l1 part the prox, the l2 part a decay of
    the gradient step); ``positive``: the coefficients kept non-negative."""
    alpha, l1_ratio, positive = float(alpha), float(l1_ratio), bool(positive)
    if l1_ratio == 1.0:
        return L1(alpha, positive=positive)
    if l1_ratio == 0.0:
        return L2(alpha, positive=positive)
    return ElasticNet(alpha * l1_ratio, alpha * (1.0 - l1_ratio), positive=positive)


class TrajectoryElasticNet(MultiTargetMixin, TrajectoryMixin, RegressorMixin,
                           TrajectoryEstimator):
    __doc__ = """Elastic net fitted by ISTA or FISTA, keeping the whole path.

    Minimises scikit-learn's ElasticNet objective

        (1 / (2 n)) ||y - X w - b||^2 + alpha l1_ratio ||w||_1
            + alpha (1 - l1_ratio) / 2 ||w||^2

    (with ``sample_weight``: ``sum_i w_i (...)^2 / (2 sum_i w_i)``) by exactly
    ``max_iter`` proximal-gradient steps from zero, and stores every iterate
    together with an estimate of its out-of-sample risk. The ridge part
    enters every step as a decay of the gradient step (``1 - eta alpha (1 -
    l1_ratio)``), the l1 part as the soft-threshold at ``eta alpha
    l1_ratio``: the Jacobian of a step is the support mask times a linear
    map, so the memory-matrix risk estimate (Bellec & Tan 2024), iterative
    leave-one-out (Luo, Ren & Barber 2023) and the debiasing of
    ``debiased_coef`` (Bellec & Tan's separable penalties) hold as for the
    Lasso. :class:`TrajectoryLasso` is the case ``l1_ratio=1``. A 2-D ``y``
    of shape (n_samples, n_targets) fits one path per target, as
    ``ElasticNet`` fits one coefficient row per target (the attributes gain
    a leading target axis, see ``coef_path_``).

    Parameters
    ----------
    alpha : float, default=1.0
        Constant that multiplies the penalty terms (``ElasticNet``'s
        ``alpha``).
    l1_ratio : float, default=0.5
        The mixing parameter, ``0 <= l1_ratio <= 1`` (``ElasticNet``'s):
        ``1`` is the Lasso, ``0`` ridge regression with the mean-form
        penalty ``alpha ||w||^2 / 2`` (the iterations are then linear in
        ``y``; use :class:`IterativeRidge` for its spectral estimates).
""" + _SOLVER_PARAMETERS + DOC_ATTRIBUTES + """
    See Also
    --------
    TrajectoryLasso : the case ``l1_ratio=1``.
    TrajectoryEarlyStoppingCV : chooses ``alpha``, ``l1_ratio`` and the
        iteration (``param_grid={"l1_ratio": [...]}``, as ``ElasticNetCV``).

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from skacv import TrajectoryElasticNet
    >>> X, y = make_regression(n_samples=200, n_features=50, noise=1.0, random_state=0)
    >>> est = TrajectoryElasticNet(alpha=0.5, l1_ratio=0.7, max_iter=50,
    ...                            random_state=0).fit(X, y)
    >>> est.coef_path_.shape, est.risk_path_.shape
    ((50, 51), (51,))
    """

    _parameter_constraints: dict = {
        **COMMON_CONSTRAINTS,
        "l1_ratio": [Interval(Real, 0, 1, closed="both")],
        "solver": [StrOptions({"fista", "ista", "sgd"}), Iteration],
        "positive": ["boolean"],
    }
    _option_keys = {"risk_options": RISK_OPTIONS, "loo_options": LOO_OPTIONS}
    _alpha_sums_weights = False

    def __init__(
        self,
        alpha=1.0,
        *,
        l1_ratio=0.5,
        solver="fista",
        max_iter=100,
        step_size="auto",
        batch_size=32,
        positive=False,
        fit_intercept=True,
        warm_start=False,
        estimate_risk=True,
        estimate_loo=False,
        n_probes="auto",
        risk_options=None,
        loo_options=None,
        random_state=None,
        verbose=0,
    ):
        store_params(self, locals())

    def auto_alpha_grid(self, X, y, sample_weight=None):
        """The alphas of :class:`~skacv.TrajectoryEarlyStoppingCV`'s literal
        default (``param_grid=None``) with ``positive=True``, which has no
        converged alpha path: ``positive_grid_alphas`` geometric values (the
        statistical policy) from the smallest alpha whose solution is zero,
        ``max_j (X~^T W y~)_j / (sum(w) l1_ratio)`` (the positive part: the
        KKT conditions of ``Lasso(positive=True)``), down to
        ``positive_grid_eps`` of it. ``None`` otherwise (the alpha path), at ``l1_ratio=0`` and
        where no feature correlates positively with ``y``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        alphas : ndarray of shape (n_alphas,) or None
            Decreasing.
        """
        if not self.positive or self.l1_ratio == 0:
            return None
        est = clone(self)  # (validation sets n_features_in_: not on self)
        X, y = est._validate_xy(X, y, reset=True, multi_output=True)
        design = est._make_design(X, check_sample_weight(sample_weight, X, X.dtype))
        top = max(float(np.max(design.rmatvec(design.center_y(t)[1]))) for t in
                  np.asarray(y).reshape(X.shape[0], -1).T) / (design.n_eff * self.l1_ratio)
        stats = design.statistics
        return geometric_grid(top, stats.positive_grid_alphas, stats.positive_grid_eps)

    def _make_datafit(self, design):
        return LeastSquares()

    def _make_penalty(self, design):
        return elastic_net_penalty(self.alpha, self.l1_ratio, self.positive)

    def _solvers(self, setup):
        return {"fista": (FISTA, {}), "ista": (GradientDescent, {}), "sgd": (SGD, {})}

    def stacks_folds(self):
        """K-fold CV along the path may run the folds as one block: the
        full-batch solvers."""
        return self.solver in ("fista", "ista")


class TrajectoryLasso(TrajectoryElasticNet):
    __doc__ = """Lasso fitted by ISTA or FISTA, keeping the whole path.

    Minimises scikit-learn's Lasso objective

        (1 / (2 n)) ||y - X w - b||^2 + alpha ||w||_1

    (with ``sample_weight``: ``sum_i w_i (...)^2 / (2 sum_i w_i)``) by exactly
    ``max_iter`` proximal-gradient steps from zero, and stores every iterate
    together with an estimate of its out-of-sample risk. It is
    :class:`TrajectoryElasticNet` with ``l1_ratio=1`` (the same code). A 2-D
    ``y`` of shape (n_samples, n_targets) fits one path per target, as
    ``Lasso`` fits one coefficient row per target (the attributes gain a
    leading target axis, see ``coef_path_``).

    Parameters
    ----------
    alpha : float, default=1.0
        Penalty level (``lam`` in the seed notebook).
""" + _SOLVER_PARAMETERS + DOC_ATTRIBUTES + """
    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from skacv import TrajectoryLasso
    >>> X, y = make_regression(n_samples=200, n_features=50, noise=1.0, random_state=0)
    >>> est = TrajectoryLasso(alpha=0.5, max_iter=50, random_state=0).fit(X, y)
    >>> est.coef_path_.shape, est.risk_path_.shape
    ((50, 51), (51,))
    """

    _parameter_constraints: dict = {
        k: v for k, v in TrajectoryElasticNet._parameter_constraints.items() if k != "l1_ratio"
    }

    #: the mixing of :class:`TrajectoryElasticNet`: the Lasso (not a parameter)
    l1_ratio = 1.0

    def __init__(
        self,
        alpha=1.0,
        *,
        solver="fista",
        max_iter=100,
        step_size="auto",
        batch_size=32,
        positive=False,
        fit_intercept=True,
        warm_start=False,
        estimate_risk=True,
        estimate_loo=False,
        n_probes="auto",
        risk_options=None,
        loo_options=None,
        random_state=None,
        verbose=0,
    ):
        store_params(self, locals())
