"""Out-of-sample risk at convergence along a path of penalties.

For a penalised least-squares fit ``b(alpha)`` the memory-matrix estimate of a
converging trajectory (Bellec & Tan 2024) tends to the estimate of Bellec
(2020) at the solution,

    R(alpha) = (||y~ - X~ b||^2 / n_eff) / (1 - df / n_eff)^2,
    df = tr(X~ d b / d y~) (+ 1 with an intercept),

an estimate of ``E[(y_new - x_new^T b - b_0)^2]`` that needs no folds. ``df`` is
the rank of the support's columns for the Lasso (Tibshirani & Taylor 2012;
the support size when ``X~`` has full column rank, see :class:`_SupportDF`)
and ``sum_j lambda_j / (lambda_j + mu)``
for ridge (``lambda_j`` the eigenvalues of ``X~^T X~ / n_eff``, ``mu`` the
penalty in mean form). The intercept is an unpenalised coordinate: it adds one
to ``df`` (the fixed point of the memory-matrix recursion of
:mod:`skacv.estimates._risk` with its intercept term).

:func:`risk_alpha_path` computes ``b(alpha)``, ``df`` and ``R(alpha)`` over a
decreasing grid. The Lasso is solved alpha after alpha by FISTA, the skacv
:class:`~skacv.FISTA` iteration run by :func:`skacv.iterations._path.run_trajectory`
(the only fit loop), warm-started from the previous solution, on a working set
(a relaxed sequential strong rule, Tibshirani et al. 2012, plus the previous
support, grown by the violators of the optimality conditions) until the
duality gap of the *full* problem is below the tolerance: the working set
changes the cost, not the solution. With fewer features than samples (at
most the speed policy's ``covariance_max_features``, float64) the working sets run in the
covariance form (scikit-learn's ``precompute``): products with ``C_WW`` of
``C = X~^T X~``, the residual through its quadratic forms, no product with
the rows of ``X~`` after ``C``. Ridge is solved in closed form from one
eigendecomposition.
"""

import warnings
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils import Bunch
from sklearn.utils.validation import check_X_y

from .._config import check_memory
from .._policy import get_policy
from ..estimates._loo_approx import approximate_loo_at
from ..exceptions import ConvergenceWarning, DivergenceError
from ..iterations._datafits import NormalEquations
from ..iterations._iterations import FISTA
from ..iterations._path import init_state, run_trajectory
from ..iterations._penalties import L1, L2
from ..linalg._design import CovarianceForm, Design, make_design
from ..linalg._linalg import independent_columns, lanczos_top
from ..utils._compat import HasMethods, Interval, StrOptions, validate_params
from ..utils._validation import check_sample_weight

# FISTA steps between two duality-gap checks on the working set (a check costs
# one product with X~_W^T, half a step)
_CHECK_EVERY = 5
# Lanczos steps of the step-size estimate of each working set (warm-started)
_LANCZOS_STEPS = 4
# working set of alpha_k: |X~_j^T r(alpha_{k-1})| / n >= alpha_k - SLACK (alpha_{k-1} - alpha_k),
# plus the previous support; SLACK = 1 is the sequential strong rule (Tibshirani
# et al. 2012). 0.5 keeps fewer columns for a few more optimality checks (measured
# on the seed design: 20% fewer products in all)
_STRONG_RULE_SLACK = 0.5
#: the Lasso path runs in the covariance form (:func:`covariance_path_pays`).
#: 30 alphas (the default grid, tol 1e-4) on designs with a common factor,
#: 2-core EPYC, against the working-set columns of X~: 20000 x 200 0.09 s
#: against 1.9 s, 10000 x 1000 0.53 against 12.6, 4000 x 2000 2.2 against
#: 12.7, 3000 x 2000 2.4 against 9.5, 2000 x 1000 0.77 against 1.9,
#: 1000 x 500 0.31 against 0.56, 500 x 100 0.066 against 0.083 (risks equal
#: to 1e-8 relative)
COVARIANCE_PATH = True
#: ... when the Gram matrix costs at most this many products with ``X~`` per
#: penalty (the path on the columns took 40-140 per penalty in the
#: measurements above: the optimality check, the step sizes, the FISTA
#: steps on the working set) ...
PATH_PRODUCTS_PER_ALPHA = 10.0
#: ... and the duality-gap tolerance is at least this
COVARIANCE_PATH_MIN_TOL = 1e-10
#: the duality gap of an alpha is also at most ``PATH_OBJECTIVE_TOL * tol``
#: times twice its objective (at the warm start): scikit-learn's
#: ``tol * ||y~||^2 / n_eff`` alone can exceed the objective of a small
#: penalty when the fit explains most of ``y`` (``make_regression`` with
#: noise 5: the previous alpha's solution passed at the next two alphas,
#: whose risks came out identical); a factor of 100 leaves the gap of the
#: usual designs, whose objective stays above 1 % of ``||y~||^2 / (2 n_eff)``
PATH_OBJECTIVE_TOL = 100.0


@validate_params(
    {
        "estimator": [HasMethods(["fit", "get_params"])],
        "X": ["array-like", "sparse matrix"],
        "y": ["array-like"],
        "alphas": ["array-like", None],
        "n_alphas": [Interval(Integral, 1, None, closed="left")],
        "eps": [Interval(Real, 0, None, closed="neither")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "sample_weight": ["array-like", None],
        "n_alphas_no_change": [Interval(Integral, 1, None, closed="left"), None],
        "criterion": [StrOptions({"risk", "loo"})],
        "verbose": ["verbose"],
    },
    prefer_skip_nested_validation=True,
)
def risk_alpha_path(estimator, X, y, *, alphas=None, n_alphas=30, eps=1e-3, tol=1e-4,
                    max_iter=1000, sample_weight=None, n_alphas_no_change=None,
                    criterion="risk", verbose=0):
    """Converged fits and their out-of-sample risk estimate along a penalty path.

    For every ``alpha`` of a decreasing grid, computes the solution of the
    estimator's objective (scikit-learn's ``Lasso`` objective for
    :class:`~skacv.TrajectoryLasso`, ``Ridge``'s for
    :class:`~skacv.IterativeRidge`), its degrees of freedom and the estimate
    of its out-of-sample risk (Bellec 2020)

    ``risk = (||y~ - X~ coef||^2 / n_eff) / (1 - df / n_eff)^2``

    of ``E[(y_new - x_new^T coef - intercept)^2]``, where ``X~, y~`` are the
    centred (``fit_intercept=True``) and ``sqrt(sample_weight)``-weighted data
    and ``n_eff = sum(sample_weight)``. It is the limit of the trajectory's
    ``risk_path_`` (Bellec & Tan 2024) when the iterations converge.

    Parameters
    ----------
    estimator : TrajectoryLasso or IterativeRidge
        Prototype (fitted or not) of a least-squares trajectory estimator
        with an ``l1`` or an ``l2`` penalty. Its ``fit_intercept`` and
        ``step_size`` are used (``"auto"``: ``1 / L`` of each working set,
        ``L`` from a few warm-started Lanczos steps; a float is used as
        given); its ``alpha``, ``max_iter`` and ``solver`` are not: the
        solutions do not depend on the solver (the Lasso path is always
        solved with FISTA, ridge in closed form).
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        Training data (float32 is kept in float32).
    y : array-like of shape (n_samples,)
        Target values.
    alphas : array-like of shape (n_alphas,), default=None
        Penalties (positive), in the estimator's units: the Lasso's ``alpha``
        or the Ridge ``alpha`` (mean-form penalty ``alpha / n_eff``). They
        are sorted in decreasing order. ``None`` builds a geometric grid:

        * Lasso: from ``alpha_max = ||X~^T y~||_inf / n_eff`` (the smallest
          penalty with a zero solution, scikit-learn's ``_alpha_grid``) down
          to ``eps * alpha_max``;
        * ridge: from ``n_eff * L / eps`` down to ``n_eff * L * eps``, ``L``
          the largest eigenvalue of ``X~^T X~ / n_eff``; ``df`` then runs from
          about ``eps * rank`` to nearly the rank of ``X~``.
    n_alphas : int, default=30
        Size of the default grid.
    eps : float, default=1e-3
        Length of the default grid (see ``alphas``).
    tol : float, default=1e-4
        Lasso: each ``alpha`` is solved until the duality gap of the objective
        ``P(b) = ||y~ - X~ b||^2 / (2 n_eff) + alpha ||b||_1`` is at most
        ``tol * ||y~||^2 / n_eff``, scikit-learn's ``Lasso`` criterion
        (its gap ``tol * ||y||^2`` is on the objective multiplied by
        ``n_samples``), and at most ``200 tol P`` at the warm start from the
        previous alpha (``PATH_OBJECTIVE_TOL``: when the fit explains most of
        ``y`` the first bound can exceed the objective itself, and the
        previous solution would pass; this second bound not below
        ``1e-10 ||y~||^2 / n_eff``). The dual point is the residual
        rescaled to be feasible. Unused for ridge (exact).
    max_iter : int, default=1000
        Largest number of FISTA steps per ``alpha`` (a
        :class:`~sklearn.exceptions.ConvergenceWarning` is raised when an
        ``alpha`` does not reach ``tol``).
    sample_weight : array-like of shape (n_samples,), default=None
        Frequency weights (an integer weight equals repeating the row).
    n_alphas_no_change : int, default=None
        Lasso only: stop walking down the grid once the estimated risk has
        not improved on its minimum for this many consecutive alphas (the
        smallest penalties, the slowest to solve, are skipped when the risk
        is clearly past its minimum). The outputs then cover the solved
        alphas only. ``None`` solves every alpha. Ignored for ridge (every
        alpha costs the same there).
    criterion : {"risk", "loo"}, default="risk"
        The quantity ``n_alphas_no_change`` watches. ``"loo"`` also computes
        ``loo``, the leave-one-out error of every solution
        (:func:`converged_loo`: exact for ridge, exact on the support for
        the Lasso), ``O(n s^2)`` per alpha for a support of ``s`` columns
        (ridge: ``s = n_features``).
    verbose : int, default=0
        Print one line per ``alpha``.

    Returns
    -------
    path : :class:`~sklearn.utils.Bunch`
        With the fields (``n_alphas`` is the number of solved alphas)

        alphas : ndarray of shape (n_alphas,)
            The penalties, decreasing.
        coefs : ndarray of shape (n_features, n_alphas)
            Solutions.
        intercepts : ndarray of shape (n_alphas,)
            ``y_offset - x_offset @ coef`` (zeros without intercept).
        df : ndarray of shape (n_alphas,)
            Degrees of freedom ``tr(d yhat / d y)``: the rank of the
            support's columns (Lasso: the support size unless it holds
            dependent columns, such as duplicates or every level of a
            one-hot encoded feature; on the columns of ``X`` only duplicates
            are detected, see the user guide) or ``sum_j lambda_j /
            (lambda_j + alpha / n_eff)`` (ridge), plus one with an intercept.
        risk : ndarray of shape (n_alphas,)
            Estimated out-of-sample risk (``inf`` where ``df >= n_eff``: the
            estimate is undefined at interpolation).
        loo : ndarray of shape (n_alphas,)
            ``criterion="loo"`` only: the leave-one-out error of each
            solution (weighted mean squared left-out residual; ``inf`` where
            a sample has leverage 1).
        train_mse : ndarray of shape (n_alphas,)
            ``||y~ - X~ coef||^2 / n_eff``.
        n_iter : ndarray of shape (n_alphas,)
            FISTA steps per ``alpha`` (0 for ridge).
        gaps : ndarray of shape (n_alphas,)
            Duality gaps reached, in the units of the objective above (those
            of the ``dual_gaps`` of scikit-learn's ``lasso_path``; 0 for ridge).

    References
    ----------
    Bellec, P. C. (2020). Out-of-sample error estimate for robust M-estimators
    with convex penalty. arXiv:2008.11840.

    Bellec, P. C. and Tan, K. (2024). Uncertainty quantification for iterative
    algorithms in linear models with application to early stopping.
    arXiv:2404.17856.

    Tibshirani, R., Bien, J., Friedman, J., Hastie, T., Simon, N., Taylor, J.
    and Tibshirani, R. J. (2012). Strong rules for discarding predictors in
    lasso-type problems. JRSS B.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from skacv import TrajectoryLasso, risk_alpha_path
    >>> X, y = make_regression(n_samples=100, n_features=200, n_informative=5,
    ...                        noise=1.0, random_state=0)
    >>> path = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=10)
    >>> path.coefs.shape, path.risk.shape
    ((200, 10), (10,))
    >>> best_alpha = path.alphas[path.risk.argmin()]
    """
    estimator._validate_params()
    X, y = check_X_y(X, y, accept_sparse=("csr", "csc"), dtype=[np.float64, np.float32],
                     y_numeric=True)
    y = np.asarray(y, dtype=X.dtype)
    sample_weight = check_sample_weight(sample_weight, X, X.dtype)
    if alphas is not None:
        alphas = np.asarray(alphas, dtype=np.float64).ravel()
        if alphas.size == 0 or not np.all(np.isfinite(alphas)) or np.any(alphas <= 0):
            raise ValueError(
                "alphas must be a non-empty array of positive finite penalties; got "
                f"{alphas!r}."
            )
        alphas = np.sort(alphas)[::-1]
    n_out = n_alphas if alphas is None else alphas.shape[0]
    check_memory(X.shape[1] * n_out * X.dtype.itemsize,
                 f"the coefficients of the path ({X.shape[1]} x {n_out})", "Use fewer alphas. ")
    design = make_design(X, sample_weight, estimator.fit_intercept)
    lasso, ridge_scale = _penalty_family(estimator, design)
    y_offset, y_tilde = design.center_y(y)
    df_offset = 1.0 if estimator.fit_intercept else 0.0
    loo_of = None
    if criterion == "loo":
        target = np.asarray(y, dtype=np.float64) - float(y_offset)

        def loo_of(coef, alpha):
            return converged_loo(estimator, design, X, target, coef, alpha)

    if lasso:
        res = _lasso_path(design, y_tilde, X, sample_weight, alphas, n_alphas, eps,
                          estimator.step_size, tol, max_iter, n_alphas_no_change, df_offset,
                          verbose, loo_of)
    else:
        res = _ridge_path(design, y_tilde, alphas, n_alphas, eps, ridge_scale)
        res.df = res.df + df_offset
        if loo_of is not None:
            res.loo = np.array([loo_of(res.coefs[:, i], a) for i, a in enumerate(res.alphas)])
    res.risk = _risk(res.train_mse, res.df, design.n_eff)
    if estimator.fit_intercept:
        res.intercepts = (y_offset - design.x_offset @ res.coefs).astype(X.dtype)
    else:
        res.intercepts = np.zeros(res.alphas.shape[0], dtype=X.dtype)
    if verbose:
        for i in range(res.alphas.shape[0]):
            print(f"[risk_alpha_path] alpha {res.alphas[i]:.4g}  df {res.df[i]:.1f}  "
                  f"risk {res.risk[i]:.5g}  steps {res.n_iter[i]}  gap {res.gaps[i]:.2e}")
    return res


def supports_alpha_path(estimator, n_samples=2):
    """Whether :func:`risk_alpha_path` can follow this estimator's penalty
    (a least-squares trajectory estimator with an l1 or an l2 penalty)."""
    probe = Bunch(n_eff=float(max(n_samples, 2)), sqrt_weight=None, weight=None)
    try:
        _penalty_family(estimator, probe)
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def converged_loo(estimator, design, X, target, coef, alpha):
    """Leave-one-out error of the solution ``coef`` at ``alpha``.

    The leverage formula at a solution (:func:`skacv.approximate_loo`'s
    ``"alo"``, Rad & Maleki 2020, which is exact leave-one-out for a
    quadratic objective) on the support of ``coef`` (every coordinate for
    ridge): for the Lasso, exact leave-one-out when removing a sample keeps
    the support and the signs (Stephenson & Broderick 2020), the limit of the
    trajectories' ``loo_path_`` (Luo, Ren & Barber 2023) at convergence.
    Costs ``O(n s^2 + s^3)`` for a support of ``s`` columns.

    Parameters
    ----------
    estimator : TrajectoryLasso or IterativeRidge
        Prototype: its penalty at ``alpha`` defines the left-out objectives.
    design : Design
        The path's centred, weighted design.
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        The data of ``design``.
    target : ndarray of shape (n_samples,)
        Centred, unweighted ``y`` (``y - y_offset``).
    coef : ndarray of shape (n_features,)
        The solution at ``alpha``.
    alpha : float

    Returns
    -------
    loo : float
        Weighted mean squared left-out residual (``inf`` at leverage 1).
    """
    coef = np.asarray(coef, dtype=np.float64)
    penalty = clone(estimator).set_params(alpha=float(alpha))._make_penalty(design)
    support = np.flatnonzero(coef) if penalty.l1_ > 0 else np.arange(coef.shape[0])
    check_memory(8 * design.n_samples * max(support.size, 1),
                 f"the support's rows for leave-one-out ({design.n_samples} x {support.size})")
    cols = X[:, support]
    U = (cols.toarray() if sp.issparse(cols) else np.asarray(cols)).astype(np.float64)
    U -= design.x_offset[support].astype(np.float64)
    if support.size == 0:  # no coordinate: a column of zeros keeps the formula's shapes
        U, theta, penalty = np.zeros((design.n_samples, 1)), np.zeros(1), L2(1.0)
    else:
        theta = coef[support]
    datafit = estimator._make_datafit(design)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # leverage 1: an infinite error
        eta_loo, scale, _ = approximate_loo_at(design, datafit, FISTA(1.0, penalty=penalty),
                                               theta, U, target, "alo")
    w = np.ones(design.n_samples) if design.weight is None else np.asarray(
        design.weight, dtype=np.float64)
    res = scale * (target - eta_loo)
    with np.errstate(invalid="ignore", over="ignore"):
        value = float(w @ (res * res) / design.n_eff)
    return value if np.isfinite(value) else np.inf


def _penalty_family(estimator, design):
    """``(lasso, scale)``: whether the estimator's penalty is ``l1`` (the Lasso
    path) or ``l2`` (the ridge path, mean-form strength ``scale * alpha``)."""
    make = getattr(estimator, "_make_penalty", None)
    datafit = getattr(estimator, "_make_datafit", None)
    if make is None or datafit is None or not datafit(design).quadratic:
        raise ValueError(
            f"risk_alpha_path needs a least-squares trajectory estimator (TrajectoryLasso "
            f"or IterativeRidge); got {type(estimator).__name__}."
        )
    # the penalty family at unit strength (the prototype's own alpha may be 0)
    penalty = clone(estimator).set_params(alpha=1.0)._make_penalty(design)
    if penalty.l1 > 0 and penalty.l2 == 0:
        return True, 1.0
    if penalty.l2 > 0 and penalty.l1 == 0:
        return False, penalty.l2_ / penalty.l2
    raise ValueError(
        "risk_alpha_path follows an l1 or an l2 penalty path; the estimator's penalty "
        f"{penalty!r} is neither."
    )


# ----------------------------------------------------------------------------
# Lasso
# ----------------------------------------------------------------------------


def _duality_gap(rr, ry, corr, l1, alpha, n_eff):
    """Lasso duality gap (objective ``||r||^2 / (2 n_eff) + alpha ||b||_1``)
    from ``rr = ||r||^2``, ``ry = r^T y~`` and ``corr = X~^T r / n_eff``; the
    dual point is ``r * min(1, alpha / ||corr||_inf)``."""
    dn = float(np.max(np.abs(corr))) if corr.size else 0.0
    c = alpha / dn if dn > alpha else 1.0
    return (0.5 * rr * (1.0 + c * c) - c * ry) / n_eff + alpha * l1


class _SampleSpace:
    """The Lasso path's products with the columns of ``X~`` (copies of the
    working set's columns, :class:`_WorkingColumns`): the residual
    ``r = y~ - X~_W b_W`` itself."""

    datafit = None  # least squares

    def __init__(self, design, X, sample_weight, y_tilde):
        self.design, self.y = design, y_tilde
        self.y64 = np.asarray(y_tilde, dtype=np.float64)
        self.columns = _WorkingColumns(design, X, sample_weight)
        self.u = None  # top singular direction (samples), warm start of the step sizes

    def sub(self, work):
        return self.columns(work)

    def target(self, work):
        return self.y

    def stats(self, sub, work, coef_w, fitted, full=False):
        """``(||r||^2, r^T y~, X~^T r / n_eff)`` of ``r = y~ - fitted``
        (``X~_W^T r`` unless ``full``)."""
        r = self.y - fitted
        r64 = np.asarray(r, dtype=np.float64)
        corr = (self.design if full else sub).rmatvec(r)
        return float(r64 @ r64), float(r64 @ self.y64), corr / self.design.n_eff

    def step_bound(self, sub, work):
        L, self.u = _top_eigenvalue(sub, self.u)
        return L


class _FeatureSpace:
    """The Lasso path in the covariance form (scikit-learn's ``precompute``,
    :class:`~skacv.linalg._design.CovarianceForm`): with ``C = X~^T X~`` and
    ``c = X~^T y~``, the working set's loop multiplies by ``C_WW`` and its
    "fitted values" are ``g = C_WW b_W``; the residual enters through
    ``||r||^2 = y~^T y~ - 2 c_W^T b_W + b_W^T g``, ``r^T y~ = y~^T y~ - c_W^T
    b_W`` and ``X~^T r = c - C_{:,W} b_W``: no product with the n rows of
    ``X~`` after ``C`` (float64 designs: in float32 the quadratic forms lose
    the digits the duality gap needs)."""

    datafit = NormalEquations()

    def __init__(self, design, c, yy):
        """``c = X~^T y~`` (float64) and ``yy = y~^T y~``."""
        self.design, self.c, self.yy = design, c, yy
        self.full = CovarianceForm(design)
        self.u = np.zeros(design.n_features)  # top eigenvector, warm start of the step sizes

    def sub(self, work):
        return CovarianceForm(self.design, work)

    def target(self, work):
        return self.c[work].astype(self.design.dtype)

    def stats(self, sub, work, coef_w, fitted, full=False):
        b = np.asarray(coef_w, dtype=np.float64)
        cb = float(self.c[work] @ b)
        rr = self.yy - 2.0 * cb + float(b @ np.asarray(fitted, dtype=np.float64))
        if full:
            corr = self.c - (b @ self.full.C[work] if work.size else 0.0)
        else:
            corr = self.c[work] - fitted
        return max(rr, 0.0), self.yy - cb, corr / self.design.n_eff

    def step_bound(self, sub, work):
        inv_n = 1.0 / self.design.n_eff
        L, top = lanczos_top(lambda v: (sub.C @ v) * inv_n, work.size, self.u[work],
                             _LANCZOS_STEPS)
        self.u[:] = 0.0
        self.u[work] = top
        return L


def covariance_path_pays(design, tol, n_alphas):
    """Whether the Lasso path of ``n_alphas`` penalties runs in the
    covariance form (:class:`_FeatureSpace`, :data:`COVARIANCE_PATH`):
    float64, at most the speed policy's ``covariance_max_features`` features, fewer than the
    samples, a duality-gap tolerance of at least
    :data:`COVARIANCE_PATH_MIN_TOL` (the quadratic forms of ``||r||^2``
    cancel: their rounding, about ``1e-13 ||y~||^2``, would stall finer
    gaps), and the Gram matrix (``2 n p^2`` flops at
    ``covariance_gemm_advantage`` times the speed of a product with ``X~``:
    ``p / 16`` products) below :data:`PATH_PRODUCTS_PER_ALPHA` products per
    penalty."""
    n, p = design.n_samples, design.n_features
    if not (COVARIANCE_PATH and design.dtype == np.float64 and tol >= COVARIANCE_PATH_MIN_TOL
            and p <= min(n, get_policy().covariance_max_features)):
        return False
    gram = 0.0 if ("gram", "features") in design.cache else (
        p / get_policy().covariance_gemm_advantage)
    return gram <= PATH_PRODUCTS_PER_ALPHA * n_alphas


def _zero_stride(m, width, dtype):
    """A ``(m, width)`` array whose columns all share one buffer: the fit loop
    writes every iterate in it without keeping the path."""
    buf = np.zeros(m, dtype=dtype)
    return np.lib.stride_tricks.as_strided(buf, shape=(m, width), strides=(buf.strides[0], 0),
                                           writeable=True)


def _solve_working_set(space, sub, work, alpha, coef, step_size, target, budget):
    """FISTA on the columns ``work`` (``sub``, in ``space``) until its duality
    gap is ``<= target``.

    Returns the solution, its fitted values in ``space`` and the number of
    steps. The momentum is restarted when the objective increases between
    two checks (function restart, O'Donoghue & Candes 2015).
    """
    n_eff = sub.n_eff
    iteration = FISTA(step_size, penalty=L1(alpha))
    y = space.target(work)
    state = init_state(sub, coef)
    scratch = _zero_stride(sub.n_features, budget + 1, sub.dtype)  # state["k"] <= budget
    done, gap = 0, np.inf
    obj_prev = np.inf
    while done < budget:
        k = min(_CHECK_EVERY, budget - done)
        run_trajectory(sub, y, iteration, k, state, scratch, datafit=space.datafit)
        done += k
        rr, ry, corr = space.stats(sub, work, state["x"], state["Xx"])
        l1 = float(np.abs(state["x"]).sum(dtype=np.float64))
        gap = _duality_gap(rr, ry, corr, l1, alpha, n_eff)
        if gap <= target:
            break
        obj = rr / (2 * n_eff) + alpha * l1
        if obj > obj_prev:
            iteration = FISTA(step_size, penalty=L1(alpha))
            state = init_state(sub, state["x"])
        obj_prev = obj
    return state["x"], state["Xx"], done


def _lasso_path(design, y_tilde, X, sample_weight, alphas, n_alphas, eps, step_size, tol,
                max_iter, n_alphas_no_change, df_offset, verbose, loo_of=None):
    n_eff = design.n_eff
    p = design.n_features
    dtype = design.dtype
    # ||r||^2, r^T y~ and X~^T r / n_eff at coef = 0
    yy = float(np.dot(np.asarray(y_tilde, dtype=np.float64), y_tilde))
    rr, ry = yy, yy
    c = np.asarray(design.rmatvec(y_tilde), dtype=np.float64)
    corr = c / n_eff
    space = (_FeatureSpace(design, c, yy)
             if covariance_path_pays(design, tol, n_alphas if alphas is None else alphas.shape[0])
             else _SampleSpace(design, X, sample_weight, y_tilde))
    alpha_max = float(np.max(np.abs(corr))) if p else 0.0
    if alphas is None:
        if alpha_max <= np.finfo(np.float64).resolution:
            alphas = np.full(n_alphas, np.finfo(np.float64).resolution)
        else:
            alphas = np.geomspace(alpha_max, alpha_max * eps, num=n_alphas)
    n_alphas = alphas.shape[0]
    target = tol * yy / n_eff
    coefs = np.zeros((p, n_alphas), dtype=dtype, order="F")
    train_mse = np.empty(n_alphas)
    gaps = np.empty(n_alphas)
    n_iters = np.zeros(n_alphas, dtype=np.int64)
    df = np.empty(n_alphas)
    loo = np.empty(n_alphas) if loo_of is not None else None
    support_df = _SupportDF(design, space, X)
    coef = np.zeros(p, dtype=dtype)
    alpha_prev = max(alpha_max, alphas[0])
    best, since_best = np.inf, 0
    not_converged = []
    n_solved = n_alphas
    for i, alpha in enumerate(alphas):
        # the warm start may already be optimal (always at alpha >= alpha_max)
        l1_norm = float(np.abs(coef).sum(dtype=np.float64))
        gap = _duality_gap(rr, ry, corr, l1_norm, alpha, n_eff)
        # scikit-learn's gap, but also relative to the objective: at small
        # penalties tol * ||y~||^2 / n_eff can exceed the objective itself
        # (a large y: the warm start from the previous alpha would pass)
        goal = min(target, max(PATH_OBJECTIVE_TOL * tol * (rr / n_eff + 2.0 * alpha * l1_norm),
                               COVARIANCE_PATH_MIN_TOL * yy / n_eff))
        steps = 0
        work = np.flatnonzero(coef)
        if gap > goal:
            # working set: (relaxed) sequential strong rule + previous support
            thresh = alpha - _STRONG_RULE_SLACK * (alpha_prev - alpha)
            work = np.flatnonzero((np.abs(corr) >= thresh) | (coef != 0))
        while gap > goal and steps < max_iter:
            # the previous working set's columns go before a larger buffer comes
            sub = None
            sub = space.sub(work)
            if isinstance(step_size, str):  # "auto": 1 / L of the working set
                L = space.step_bound(sub, work)
                step = 1.0 / L if L > 0 else 1.0
            else:
                step = float(step_size)
            try:
                coef_w, fitted, k = _solve_working_set(
                    space, sub, work, alpha, coef[work], step, goal, max_iter - steps
                )
            except DivergenceError:
                if not isinstance(step_size, str):
                    raise
                # the Lanczos estimate was too low: exact top eigenvalue, again
                step = 1.0 / sub.lipschitz()
                coef_w, fitted, k = _solve_working_set(
                    space, sub, work, alpha, coef[work], step, goal, max_iter - steps
                )
            steps += k
            coef = np.zeros(p, dtype=dtype)
            coef[work] = coef_w
            # optimality on the full problem (one product with X~^T, or C)
            rr, ry, corr = space.stats(sub, work, coef_w, fitted, full=True)
            gap = _duality_gap(rr, ry, corr, float(np.abs(coef).sum(dtype=np.float64)),
                               alpha, n_eff)
            outside = np.ones(p, dtype=bool)
            outside[work] = False
            violators = np.flatnonzero(outside & (np.abs(corr) > alpha))
            if violators.size == 0:  # right working set (or its solve ran out of steps)
                break
            work = np.union1d(work, violators)
        if gap > goal:
            not_converged.append((alpha, gap, goal))
        coefs[:, i] = coef
        train_mse[i] = rr / n_eff
        gaps[i] = gap
        n_iters[i] = steps
        df[i] = support_df(coef) + df_offset
        alpha_prev = alpha
        if verbose > 1:
            print(f"[risk_alpha_path] alpha {alpha:.4g}: working set {work.size}, "
                  f"{steps} steps, gap {gap:.3e} (target {target:.3e})")
        if loo is not None:
            loo[i] = loo_of(coef, alpha)
        if n_alphas_no_change is not None:
            # the criterion watched: the leave-one-out error when computed
            risk = loo[i] if loo is not None else _risk(train_mse[i], df[i], n_eff)
            if risk < best:
                best, since_best = risk, 0
            else:
                since_best += 1
                if since_best >= n_alphas_no_change:
                    n_solved = i + 1
                    break
    if not_converged:
        a, g, goal = not_converged[0]
        warnings.warn(
            f"FISTA did not reach the duality-gap tolerance within max_iter={max_iter} "
            f"steps for {len(not_converged)} of {n_solved} alphas (e.g. alpha={a:.4g}: "
            f"gap {g:.3e} > {goal:.3e}). Increase max_iter or tol; small alphas with "
            "p > n are the slowest.",
            ConvergenceWarning,
            stacklevel=4,  # the caller of risk_alpha_path (behind validate_params)
        )
    m = n_solved
    out = Bunch(alphas=alphas[:m], coefs=coefs[:, :m], df=df[:m], train_mse=train_mse[:m],
                n_iter=n_iters[:m], gaps=gaps[:m])
    if loo is not None:
        out.loo = loo[:m]
    return out


#: columns of ``X~`` within this relative distance of each other (up to sign,
#: in the norm) are duplicates (:func:`duplicate_labels`); the square root of
#: the dtype's resolution, at most ``1e-5`` (``3.2e-8`` in float64, ``1e-5``
#: in float32) when ``None``
DUPLICATE_TOL = None


def duplicate_labels(design):
    """Labels of the columns of ``X~``: columns equal up to sign share one
    (the smallest index of the group), every other column has its own index.

    A Lasso solution may split a coefficient between duplicate columns
    (``x`` twice, or ``x`` and ``-x``: one column with a centred binary
    feature and its complement): its support then holds both, but its
    fitted values have the divergence of one, ``rank(X~_S)`` (Tibshirani &
    Taylor 2012). Candidates are the columns with equal projections on two
    random directions (one product with ``X~^T``), checked column against
    column (:data:`DUPLICATE_TOL`). Other exact linear relations between
    columns (every level of a one-hot encoded feature beside an intercept)
    are found only where ``X~^T X~`` is at hand (:class:`_SupportDF`).

    Returns
    -------
    labels : ndarray of shape (n_features,), int
    """
    p = design.n_features
    labels = np.arange(p)
    if p < 2 or design.n_samples < 1:
        return labels
    tol = DUPLICATE_TOL if DUPLICATE_TOL is not None else min(
        1e-5, float(np.sqrt(np.finfo(design.dtype).resolution)))
    Z = np.random.default_rng(0).standard_normal((design.n_samples, 2)).astype(design.dtype)
    S = np.asarray(design.rmatvec(Z), dtype=np.float64)
    sign = np.where(S[:, 0] < 0, -1.0, 1.0)
    S *= sign[:, None]
    order = np.lexsort((S[:, 1], S[:, 0]))
    a = S[order]
    # the projections of duplicates agree to the rounding of the product: far
    # below tol; a candidate run is checked column against column below
    close = np.all(np.abs(np.diff(a, axis=0))
                   <= tol * (np.abs(a[1:]) + np.abs(a[:-1]) + np.finfo(np.float64).tiny),
                   axis=1)
    if not close.any():
        return labels
    starts = np.flatnonzero(np.diff(np.concatenate([[False], close, [False]]).astype(np.int8)))
    for lo, hi in zip(starts[::2], starts[1::2], strict=True):  # run order[lo .. hi]
        run = np.sort(order[lo:hi + 1])
        cols = np.asarray(design.columns(run), dtype=np.float64) * sign[run]
        free = np.ones(run.size, dtype=bool)
        for k in range(run.size):  # group the run's columns (a run is a few columns)
            if not free[k]:
                continue
            ref = cols[:, k]
            dist = np.linalg.norm(cols[:, k:] - ref[:, None], axis=0)
            same = free[k:] & (dist <= tol * max(float(np.linalg.norm(ref)),
                                                 np.finfo(np.float64).tiny))
            labels[run[k:][same]] = run[k]
            free[k:] &= ~same
    return labels


#: at most this many indicator columns (two distinct values) have their
#: relations checked on the columns of ``X~`` (:class:`_SupportDF`): their
#: Gram matrix costs ``2 n b^2`` flops
BINARY_RELATIONS_MAX = 2000
# rows of X~ per block when forming the indicators' Gram matrix
_GRAM_BLOCK_BYTES = 64 * 2**20


def binary_columns(X):
    """Indices of the columns of ``X`` (dense or sparse) that take exactly
    two distinct values: indicators, such as the levels of a one-hot
    encoded feature (an implicit zero of a sparse column is a value)."""
    n, p = X.shape
    if n == 0 or p == 0:
        return np.zeros(0, dtype=np.intp)
    if sp.issparse(X):
        Xc = sp.csc_matrix(X)
        Xc.sum_duplicates()
        nnz = np.diff(Xc.indptr)
        has = nnz > 0
        starts = Xc.indptr[:-1][has]
        lo = np.zeros(p)
        hi = np.zeros(p)
        lo[has] = np.minimum.reduceat(Xc.data, starts)
        hi[has] = np.maximum.reduceat(Xc.data, starts)
        implicit = nnz < n
        lo = np.where(implicit, np.minimum(lo, 0.0), lo)
        hi = np.where(implicit, np.maximum(hi, 0.0), hi)
        col = np.repeat(np.arange(p), nnz)
        other = (Xc.data != lo[col]) & (Xc.data != hi[col])
        bad = np.bincount(col[other], minlength=p) > 0
        return np.flatnonzero((lo < hi) & ~bad)
    X = np.asarray(X)
    # candidates: two distinct values among the first rows, then checked on
    # the others by blocks (continuous columns drop out at the first block)
    first = X[:min(n, 64)]
    lo, hi = first.min(axis=0), first.max(axis=0)
    cand = np.flatnonzero(np.all((first == lo) | (first == hi), axis=0))
    r0 = first.shape[0]
    while cand.size and r0 < n:
        step = max(1, _GRAM_BLOCK_BYTES // (cand.size * X.itemsize))
        block = X[r0:r0 + step, cand]
        c_lo, c_hi = lo[cand], hi[cand]
        # a column constant so far takes its second value in this block
        b_lo, b_hi = block.min(axis=0), block.max(axis=0)
        same = c_lo == c_hi
        c_lo = np.where(same, np.minimum(c_lo, b_lo), c_lo)
        c_hi = np.where(same, np.maximum(c_hi, b_hi), c_hi)
        lo[cand], hi[cand] = c_lo, c_hi
        cand = cand[np.all((block == c_lo) | (block == c_hi), axis=0)]
        r0 += step
    return cand[lo[cand] < hi[cand]]


def _columns_gram(design, cols):
    """``X~_cols^T X~_cols`` in float64, by blocks of rows."""
    n = design.n_samples
    G = np.zeros((cols.size, cols.size))
    step = max(1, _GRAM_BLOCK_BYTES // max(1, 8 * cols.size))
    for r0 in range(0, n, step):
        rows = slice(r0, min(n, r0 + step))
        block = (design.rows(np.arange(rows.start, rows.stop)).columns(cols) if design.sparse
                 else design.X[rows, cols])  # a dense X~ is held centred and weighted
        block = np.asarray(block, dtype=np.float64)
        G += block.T @ block
    return G


class _SupportDF:
    """The Lasso path's df: ``rank(X~_S)`` of each support ``S`` (Tibshirani
    & Taylor 2012). A solution may keep linearly dependent columns: a
    coefficient split between duplicates, or every level of a one-hot
    encoded feature beside the intercept (their centred columns sum to
    zero; the L1 norm is flat along that shift when half of the levels'
    coefficients lie on each side).

    In the covariance form (``C = X~^T X~`` known) ``C`` is factorised once
    (:func:`~skacv.linalg._linalg.independent_columns`): when ``X~`` has full
    column rank so has every ``X~_S`` (``df = |S|``); else the rank of
    ``C_SS`` is taken for every new support. On the columns of ``X~``
    (``p > n``: ``X~`` is rank-deficient, and a factorisation per support
    would cost more than the path) the relations looked for are those of
    real designs: among the indicator columns (:func:`binary_columns`, at
    most :data:`BINARY_RELATIONS_MAX`; their Gram matrix is factorised once,
    and, when singular, the rank of the support's indicators is taken) and
    duplicates up to sign among the others (:func:`duplicate_labels`). An
    exact relation among other columns (a total beside its parts) is not
    detected there. df is at most the rows of ``X~`` of positive weight,
    less one with an intercept.
    """

    def __init__(self, design, space, X):
        self.gram = None  # Gram matrix whose restriction to a support gives its rank
        self.cols = None  # its columns (None: all of X~)
        self.labels = None  # duplicate labels of the other columns
        full = getattr(space, "full", None)  # the covariance form's C (_FeatureSpace)
        if full is not None:
            C = full.C
            if independent_columns(C).size < C.shape[0]:
                self.gram = C
        else:
            B = binary_columns(X)
            if 1 < B.size <= BINARY_RELATIONS_MAX:
                G = _columns_gram(design, B)
                if independent_columns(G).size < B.size:
                    self.gram, self.cols = G, B
            labels = duplicate_labels(design)
            if not np.array_equal(labels, np.arange(labels.size)):
                self.labels = labels
        self.key, self.value = None, 0
        # no support has a larger rank than the rows of X~ (centred: one less)
        rows = design.n_samples if design.weight is None else int(np.count_nonzero(design.weight))
        self.max_rank = max(0, rows - int(design.fit_intercept))

    def _rank(self, idx):
        """Rank of the columns ``idx`` of :attr:`gram` (cached for the last
        ``idx``: the support often stays from one penalty to the next)."""
        if self.key is None or not np.array_equal(idx, self.key):
            self.key = idx
            self.value = int(independent_columns(self.gram[np.ix_(idx, idx)]).size)
        return self.value

    def __call__(self, coef):
        active = np.flatnonzero(coef)
        if self.gram is not None and self.cols is None:
            return self._rank(active)
        rank = 0
        if self.gram is not None:  # the support's indicators, then the others
            inside = np.isin(active, self.cols)
            rank = self._rank(np.searchsorted(self.cols, active[inside]))
            active = active[~inside]
        if self.labels is not None:
            active = np.unique(self.labels[active])
        return min(self.max_rank, rank + int(active.size))


def _risk(train_mse, df, n_eff):
    """``train_mse / (1 - df / n_eff)^2``, ``inf`` where ``df >= n_eff``."""
    train_mse, df = np.asarray(train_mse, dtype=np.float64), np.asarray(df, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(df < n_eff, train_mse / (1.0 - df / n_eff) ** 2, np.inf)


class _WorkingColumns:
    """Designs of working sets of columns (same centring, weights, ``n_eff``).

    Dense: the columns of ``X~`` (already centred and weighted) are copied
    into one reused buffer (grown by half when too small; its leading
    ``n_samples * |W|`` entries as a C-ordered array) and wrapped in a
    ``Design`` without intercept and weights, which uses them as they are: a
    fresh array per working set would pay its page faults every time. The
    previous working set's design is dropped by the caller before a larger
    buffer is made, so that at most one buffer lives. Sparse: the column
    slice of ``X`` with the same weights and centring.
    """

    def __init__(self, design, X, sample_weight):
        self.design, self.X, self.sample_weight = design, X, sample_weight
        self.buffer = None

    def __call__(self, idx):
        d = self.design
        if d.sparse:
            return Design(self.X[:, idx], self.sample_weight, d.fit_intercept)
        n, m = d.n_samples, idx.shape[0]
        if self.buffer is None or self.buffer.size < n * m:
            self.buffer = None
            cap = min(d.n_features, m + m // 2 + 64)
            check_memory(n * cap * d.dtype.itemsize, f"the working-set columns ({n} x {cap})")
            self.buffer = np.empty(n * cap, dtype=d.dtype)
        # the leading n * m entries as a C-ordered (n, m) array: np.take writes
        # into it directly (into a strided view it took a temporary of that size)
        cols = self.buffer[: n * m].reshape(n, m)
        np.take(d.X, idx, axis=1, out=cols, mode="clip")
        sub = Design(cols, None, False)
        sub.n_eff = d.n_eff
        return sub


def _top_eigenvalue(design, u0=None, n_steps=_LANCZOS_STEPS):
    """Upper estimate of the largest eigenvalue of ``X~^T X~ / n_eff`` and the
    top direction in sample space, by :func:`skacv.linalg._linalg.lanczos_top` on
    the smaller of ``X~^T X~ / n_eff`` and ``X~ X~^T / n_eff``, warm-started
    from the direction ``u0`` (sample space) of the previous working set. The
    step ``1 / L`` only sets the speed of FISTA: the duality gap certifies
    the solutions.
    """
    n, p = design.n_samples, design.n_features
    inv_n = 1.0 / design.n_eff
    dt = design.dtype
    if p < n:  # feature side
        def op(v):
            return np.asarray(design.rmatvec(design.matvec(v.astype(dt))),
                              dtype=np.float64) * inv_n
        start = None if u0 is None else np.asarray(design.rmatvec(u0.astype(dt)), np.float64)
        L, top = lanczos_top(op, p, start, n_steps)
        return L, np.asarray(design.matvec(top.astype(dt)), dtype=np.float64)

    def op(v):
        return np.asarray(design.matvec(design.rmatvec(v.astype(dt))), dtype=np.float64) * inv_n

    return lanczos_top(op, n, u0, n_steps)


# ----------------------------------------------------------------------------
# ridge
# ----------------------------------------------------------------------------


def _ridge_path(design, y_tilde, alphas, n_alphas, eps, scale):
    """Closed-form ridge path from one eigendecomposition of the smaller Gram."""
    n, p = design.n_samples, design.n_features
    n_eff = design.n_eff
    m = min(n, p)
    check_memory(8 * m * m, f"the Gram matrix ({m} x {m}) of the ridge path",
                 "Subsample the data or use IterativeRidge trajectories. ")
    side = "features" if p <= n else "samples"
    lam, vecs = design.gram_eigh(side)
    lam = np.clip(lam, 0, None)
    if alphas is None:
        top = float(lam[-1]) if lam.size else 0.0
        top = top if top > 0 else 1.0
        alphas = np.geomspace(top / eps, top * eps, num=n_alphas) / scale
    mu = alphas * scale
    y64 = np.asarray(y_tilde, dtype=np.float64)
    inv = 1.0 / (lam[:, None] + mu[None, :])  # (m, n_alphas)
    if side == "features":
        c = vecs.T @ (np.asarray(design.rmatvec(y_tilde), dtype=np.float64) / n_eff)
        coefs = vecs @ (c[:, None] * inv)
        fitted = np.asarray(design.matvec(coefs.astype(design.dtype)), dtype=np.float64)
    else:
        u = vecs.T @ y64
        fitted = vecs @ (u[:, None] * lam[:, None] * inv)
        coefs = np.asarray(design.rmatvec(vecs @ (u[:, None] * inv)), dtype=np.float64)
        coefs /= n_eff
    resid = y64[:, None] - fitted
    train_mse = np.einsum("ij,ij->j", resid, resid) / n_eff
    df = (lam[:, None] * inv).sum(axis=0)
    return Bunch(alphas=alphas, coefs=np.asfortranarray(coefs, dtype=design.dtype), df=df,
                 train_mse=train_mse, n_iter=np.zeros(alphas.shape[0], dtype=np.int64),
                 gaps=np.zeros(alphas.shape[0]))
