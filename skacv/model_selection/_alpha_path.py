"""Out-of-sample risk at convergence along a path of penalties.

For a penalised least-squares fit ``b(alpha)`` the memory-matrix estimate of a
converging trajectory (Bellec & Tan 2024) tends to the estimate of Bellec
(2020) at the solution (:mod:`skacv.model_selection._converged_risk`), which
needs no folds. :func:`risk_alpha_path` computes ``b(alpha)``, ``df`` and
the risk over a decreasing grid, the Lasso by
:func:`skacv.model_selection._lasso_path.lasso_path`, ridge in closed form
(:func:`_ridge_path`).
"""

import warnings
from inspect import signature
from numbers import Integral, Real

import numpy as np
from sklearn.base import clone
from sklearn.utils import Bunch
from sklearn.utils.validation import check_X_y

from .._config import check_memory
from ..estimates.loo._track import removed_weights
from ..estimators._advice import warn_weight_scale
from ..estimators._protocol import SearchProtocol
from ..exceptions import UnreliableEstimateWarning
from ..linalg._design import make_design
from ..utils._compat import HasMethods, Interval, StrOptions, validate_params
from ..utils._validation import check_sample_weight
from ._converged_risk import converged_risk
from ._lasso_loo import LeftOutPaths, exact_lasso_loo
from ._lasso_path import lasso_grid, lasso_path


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
    :class:`~skacv.TrajectoryLasso`, ``ElasticNet``'s for
    :class:`~skacv.TrajectoryElasticNet` at its ``l1_ratio``, ``Ridge``'s for
    :class:`~skacv.IterativeRidge`), its degrees of freedom and the estimate
    of its out-of-sample risk (Bellec 2020)

    ``risk = (||y~ - X~ coef||^2 / n_eff) / (1 - df / n_eff)^2``

    of ``E[(y_new - x_new^T coef - intercept)^2]``, where ``X~, y~`` are the
    centred (``fit_intercept=True``) and ``sqrt(sample_weight)``-weighted data
    and ``n_eff = sum(sample_weight)``. It is the limit of the trajectory's
    ``risk_path_`` (Bellec & Tan 2024) when the iterations converge.

    Parameters
    ----------
    estimator : TrajectoryLasso, TrajectoryElasticNet or IterativeRidge
        Prototype (fitted or not) of a least-squares trajectory estimator
        with an ``l1``, ``l2`` or elastic-net penalty (its ``l1_ratio`` is
        kept; the elastic net is solved as the Lasso, the ridge part in its
        steps). Its ``fit_intercept`` and
        ``step_size`` are used (``"auto"``: ``1 / L`` of each working set,
        ``L`` from a few warm-started Lanczos steps; a float is used as
        given); its ``alpha``, ``max_iter`` and ``solver`` are not: the
        solutions do not depend on the solver (the Lasso path is solved by
        FISTA or coordinate descent, ridge in closed form).
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
          to ``eps * alpha_max``; the elastic net: ``alpha_max`` divided by
          ``l1_ratio``, as ``ElasticNetCV``'s grid;
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
        ``n_samples``), and at most ``100 tol ||y~ - X~ b||^2 / n_eff`` at the
        warm start from the previous alpha (``path_objective_tol``: when the
        fit explains most of ``y`` the first bound can exceed the residuals'
        term itself, and the previous solution would pass; this second bound
        not below ``1e-10 ||y~||^2 / n_eff``). The dual point is the residual
        rescaled to be feasible. Unused for ridge (exact).
    max_iter : int, default=1000
        Largest number of FISTA steps per ``alpha`` (in the covariance form,
        of coordinate descent's epochs, as many again from the exact
        solution on its support where they miss ``tol``, then as many
        working-set steps should that miss too, or at once without the
        support finish; a
        :class:`~sklearn.exceptions.ConvergenceWarning` is raised when an
        ``alpha`` does not reach ``tol``).
    sample_weight : array-like of shape (n_samples,), default=None
        Frequency weights (an integer weight equals repeating the row).
    n_alphas_no_change : int, default=None
        Lasso and elastic net: stop walking down the grid once the
        estimated risk has not improved on its minimum for this many
        consecutive alphas and the fit's degrees of freedom have reached
        the statistical policy's ``path_walk_df`` (0.5) times the number
        of samples (the smallest penalties, the slowest to solve, are
        skipped where the estimate is past its minimum and the risk
        estimate's ``(1 - df / n)^-2`` amplifies its residuals four times
        or more; below that df the criterion along alpha may rise and fall
        again, so the walk goes on). ``n`` is the sum of ``sample_weight``
        (the frequency weights' count). Where ``n > 2 (n_features + 1)``
        the df never reach it and every alpha is solved. The outputs then
        cover the solved alphas only. ``None`` solves every alpha. Ridge (every alpha costs the same
        there) with ``criterion="loo"``: the automatic grid
        (``alphas=None``) continues below its end at the same ratio until
        the leave-one-out error has not improved for this many alphas (a
        decaying spectrum leaves it falling there).
    criterion : {"risk", "loo"}, default="risk"
        The quantity ``n_alphas_no_change`` watches. ``"loo"`` also computes
        ``loo``, the exact leave-one-out error of every solution (ridge: in
        closed form from the path's eigendecomposition, ``O(n min(n, p))``
        per alpha; the Lasso and the elastic net: the leverage formula on
        the support where removing a sample keeps it, checked by the
        left-out optimality conditions, ``O(n p s)`` for a support of ``s``
        columns, and the left-out problem solved for the other samples; the
        limit of the trajectories' ``loo_path_``).
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
            are detected, see the user guide), ``sum_j lambda_j / (lambda_j +
            n_eff alpha (1 - l1_ratio))`` over the eigenvalues of the
            support's ``X~_S^T X~_S`` (the elastic net) or ``sum_j lambda_j /
            (lambda_j + alpha / n_eff)`` (ridge), plus one with an intercept.
        risk : ndarray of shape (n_alphas,)
            Estimated out-of-sample risk (``inf`` where ``df >= 0.99 n_eff``: the
            estimate is undefined at interpolation).
        loo : ndarray of shape (n_alphas,)
            ``criterion="loo"`` only: the leave-one-out error of each
            solution (weighted mean squared left-out residual; ``inf`` where
            a left-out problem stays unsolved: the trace's
            ``lasso_loo_unfinished``, ``lasso_loo_descent_limit``; an
            :class:`~skacv.exceptions.UnreliableEstimateWarning` says how
            many).
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
    return alpha_path_fits(estimator, X, y, alphas=alphas, n_alphas=n_alphas, eps=eps, tol=tol,
                           max_iter=max_iter, sample_weight=sample_weight,
                           n_alphas_no_change=n_alphas_no_change, criterion=criterion,
                           verbose=verbose)


def alpha_path_fits(estimator, X, y, *, alphas=None, n_alphas=30, eps=1e-3, tol=1e-4,
                    max_iter=1000, sample_weight=None, n_alphas_no_change=None,
                    criterion="risk", verbose=0, held_out=None, precisions=None):
    """:func:`risk_alpha_path` (its parameters unvalidated); ``held_out``:
    ``(X_test, y_test, test_weight)``, the rows a fold's solutions are
    scored on (K-fold CV). Each Lasso or elastic-net ``alpha`` is then
    solved to the duality gap ``tol`` times the smaller of ``||y~||^2 /
    n_eff`` and the held-out weighted mean squared error at its warm start
    (``LassoCV``'s criterion, relative to what the fold measures), instead
    of the risk estimate's precision (relative to the training residuals,
    which vanish at interpolation while the held-out errors do not, and
    the violators' cut for the df, which held-out errors do not read).
    ``precisions``: the mean squared errors the solutions are read
    against, one an alpha of the decreasing grid (K-fold CV's errors, for
    the full data's path of ``criterion="kfold"``), used as the held-out
    error is."""
    X, y, sample_weight = _path_data(X, y, sample_weight)
    if alphas is not None:
        alphas = _checked_alphas(alphas)
    n_out = n_alphas if alphas is None else alphas.shape[0]
    check_memory(X.shape[1] * n_out * X.dtype.itemsize,
                 f"the coefficients of the path ({X.shape[1]} x {n_out})", "Use fewer alphas. ")
    design = make_design(X, sample_weight, estimator.fit_intercept)
    warn_weight_scale(estimator, sample_weight, design.statistics)
    lasso, ridge_scale, l1_ratio = _penalty_family(estimator, design)
    y_offset, y_tilde = design.center_y(y)
    df_offset = 1.0 if estimator.fit_intercept else 0.0
    loo_of = None
    if criterion == "loo":
        target = np.asarray(y, dtype=np.float64) - float(y_offset)
        left_out_paths = LeftOutPaths()  # (read along the path's decreasing alphas)

        def loo_of(coef, alpha):
            return converged_loo(estimator, design, X, target, coef, alpha, left_out_paths)

    precision_of = None if held_out is None else _held_out_error(design, y_offset, *held_out)
    if precisions is not None:
        given = np.asarray(precisions, dtype=np.float64)

        def precision_of(coef, i):
            return float(given[i])
    if lasso:
        res = lasso_path(design, y_tilde, X, sample_weight, alphas, n_alphas, eps,
                         estimator.step_size, tol, max_iter, n_alphas_no_change, df_offset,
                         verbose, loo_of, l1_ratio=l1_ratio, precision_of=precision_of)
        if loo_of is not None:
            _warn_undefined_loo(res.alphas, res.loo)
    else:
        res = _ridge_path(design, y_tilde, alphas, n_alphas, eps, ridge_scale, loo_of is not None)
        res.df = res.df + df_offset
        if alphas is None and n_alphas_no_change is not None and loo_of is not None:
            res = _extend_ridge_grid(res, design, y_tilde, eps, ridge_scale, df_offset,
                                     n_alphas_no_change)
    res.risk = converged_risk(res.train_mse, res.df, design.n_eff, design.statistics)
    if estimator.fit_intercept:
        res.intercepts = (y_offset - design.x_offset @ res.coefs).astype(X.dtype)
    else:
        res.intercepts = np.zeros(res.alphas.shape[0], dtype=X.dtype)
    if verbose:
        for i in range(res.alphas.shape[0]):
            print(f"[risk_alpha_path] alpha {res.alphas[i]:.4g}  df {res.df[i]:.1f}  "
                  f"risk {res.risk[i]:.5g}  steps {res.n_iter[i]}  gap {res.gaps[i]:.2e}")
    return res


def _warn_undefined_loo(alphas, loo):
    """An :class:`~skacv.exceptions.UnreliableEstimateWarning` where the
    converged leave-one-out of a Lasso or elastic-net path is undefined
    (``inf``: a left-out problem stayed unsolved)."""
    bad = np.flatnonzero(~np.isfinite(loo))
    if bad.size:
        warnings.warn(UnreliableEstimateWarning(
            f"The converged leave-one-out error is undefined at {bad.size} of "
            f"{loo.shape[0]} alphas (e.g. alpha={alphas[bad[0]]:.4g}): a left-out Lasso "
            f"problem stayed unsolved there (near-collinear columns, or an active set "
            f"that outgrew the left-out rows where scikit-learn's lars_path failed). A "
            f"choice by leave-one-out leaves those alphas out; criterion='kfold' scores "
            f"them."), stacklevel=3)


def _path_data(X, y, sample_weight):
    """``(X, y, sample_weight)``: the path's data, checked."""
    X, y = check_X_y(X, y, accept_sparse=("csr", "csc"), dtype=[np.float64, np.float32],
                     y_numeric=True)
    y = np.asarray(y, dtype=X.dtype)
    sample_weight = check_sample_weight(sample_weight, X, X.dtype)
    return X, y, sample_weight


def _checked_alphas(alphas):
    """The given penalties, decreasing, or a ``ValueError``."""
    alphas = np.asarray(alphas, dtype=np.float64).ravel()
    if alphas.size == 0 or not np.all(np.isfinite(alphas)) or np.any(alphas <= 0):
        raise ValueError(
            "alphas must be a non-empty array of positive finite penalties; got "
            f"{alphas!r}." + (" alpha=0 (no penalty) has no converged fit to score: "
                              "TrajectoryEarlyStoppingCV(search='grid') fits its "
                              "trajectory." if np.any(alphas == 0) else "")
        )
    return np.sort(alphas)[::-1]


def lasso_alpha_grid(estimator, X, y, *, alphas=None, n_alphas=30, eps=1e-3,
                     sample_weight=None):
    """The decreasing grid :func:`alpha_path_fits` solves for a Lasso or
    elastic-net ``estimator`` (``alphas`` sorted, or ``n_alphas`` from
    the data's ``alpha_max`` down to ``eps alpha_max``), before any path
    is solved: K-fold CV scores the grid first, then the full data's path
    is solved to the precision its scores need."""
    if alphas is not None:
        return _checked_alphas(alphas)
    X, y, sample_weight = _path_data(X, y, sample_weight)
    design = make_design(X, sample_weight, estimator.fit_intercept)
    _, y_tilde = design.center_y(y)
    return lasso_grid(design, y_tilde, n_alphas, eps, _penalty_family(estimator, design)[2])


def held_out_sse(X_test, y_test, test_weight, coefs, intercepts):
    """``(n_fits,)``: the weighted sum of squared errors on the held-out rows
    of the fits ``coefs`` (shape (n_features, n_fits)) and ``intercepts``."""
    pred = np.asarray(X_test @ coefs, dtype=np.float64) + intercepts
    return np.asarray(test_weight, dtype=np.float64) @ (
        np.asarray(y_test, dtype=np.float64)[:, None] - pred) ** 2


def _held_out_error(design, y_offset, X_test, y_test, test_weight):
    """``error(coef, i)``: the weighted mean squared error on the held-out
    rows of the fit ``coef`` (its intercept ``y_offset - x_offset @ coef``;
    ``i``, the grid's index, unread)."""
    total = float(np.sum(test_weight))
    offset = np.asarray(design.x_offset, dtype=np.float64)

    def error(coef, i=None):
        coef = np.asarray(coef, dtype=np.float64)
        sse = held_out_sse(X_test, y_test, test_weight, coef[:, None],
                           float(y_offset) - offset @ coef)
        return float(sse[0]) / total if total > 0 else 0.0

    return error


def path_option(path_params, name):
    """``path_params[name]``, else :func:`risk_alpha_path`'s default for
    ``name`` (its grid's ``n_alphas``, ``eps``, ...): what the search's
    alpha path ran with."""
    params = path_params or {}
    if name in params:
        return params[name]
    return signature(risk_alpha_path).parameters[name].default


def supports_alpha_path(estimator, n_samples=2):
    """Whether :func:`risk_alpha_path` can follow this estimator's penalty
    (a least-squares trajectory estimator with an l1 or an l2 penalty)."""
    probe = Bunch(n_eff=float(max(n_samples, 2)), sqrt_weight=None, weight=None)
    try:
        _penalty_family(estimator, probe)
    except (ValueError, TypeError, AttributeError, NotImplementedError):
        return False
    return True


def ridge_path_of(estimator):
    """Whether :func:`risk_alpha_path` follows ``estimator``'s penalty in
    closed form (an l2 penalty: the ridge path, its leave-one-out exact)."""
    probe = Bunch(n_eff=2.0, sqrt_weight=None, weight=None)
    try:
        return not _penalty_family(estimator, probe)[0]
    except (ValueError, TypeError, AttributeError, NotImplementedError):
        return False


def converged_loo(estimator, design, X, target, coef, alpha, paths=None):
    """Leave-one-out error of the Lasso or elastic-net solution ``coef``
    (shape (n_features,)) at ``alpha``: weighted mean squared left-out
    residual (``inf`` where undefined).

    Exact leave-one-out (:func:`~skacv.model_selection._lasso_loo.exact_lasso_loo`),
    the limit of the trajectories' ``loo_path_`` (Luo, Ren & Barber 2023)
    at convergence. The leverage formula on the support alone (Stephenson &
    Broderick 2020) is exact only where removing a sample keeps the support
    and the signs: it was off by -6 % to +155 % on ``p > n`` designs. The
    ridge path's is in closed form (:func:`_ridge_path_loo`). ``design``:
    the path's design of ``X``; ``target``: ``y - y_offset`` (unweighted);
    ``paths``: the :class:`~skacv.model_selection._lasso_loo.LeftOutPaths`
    of the alphas before (a new one without).
    """
    penalty = clone(estimator).set_params(alpha=float(alpha)).path_problem(design)[1]
    w = np.ones(design.n_samples) if design.weight is None else np.asarray(
        design.weight, dtype=np.float64)
    res = exact_lasso_loo(design, X, target, np.asarray(coef, dtype=np.float64), penalty,
                          paths)
    return float(w @ (res * res) / design.n_eff)


def _penalty_family(estimator, design):
    """``(lasso, scale, l1_ratio)``: whether the estimator's penalty has an
    ``l1`` part (the Lasso path; with an ``l2`` part too, the elastic net of
    mixing ``l1_ratio``) or is ``l2`` (the ridge path, mean-form strength
    ``scale * alpha``)."""
    try:  # (the estimator's parameters validated first)
        quadratic = isinstance(estimator, SearchProtocol) and estimator.path_problem(
            design)[0].quadratic
    except NotImplementedError:  # a trajectory estimator without its problem
        quadratic = False
    if not quadratic:
        raise ValueError(
            f"risk_alpha_path needs a least-squares trajectory estimator (TrajectoryLasso "
            f"or IterativeRidge); got {type(estimator).__name__}."
        )
    # the penalty family at unit strength (the prototype's own alpha may be 0)
    penalty = clone(estimator).set_params(alpha=1.0).path_problem(design)[1]
    if getattr(penalty, "positive", False):
        raise ValueError(
            "risk_alpha_path has no path of non-negative coefficients (positive=True): "
            "TrajectoryEarlyStoppingCV's search='grid' fits a trajectory per alpha of "
            "param_grid={'alpha': [...]}; search='auto' (the default) walks the "
            "estimator's auto_alpha_grid."
        )
    if penalty.l1 > 0 and penalty.l2 == 0:
        return True, 1.0, 1.0
    if penalty.l2 > 0 and penalty.l1 == 0:
        return False, penalty.l2_ / penalty.l2, 0.0
    if penalty.l1 > 0 and penalty.l2 > 0 and not penalty.sum_form:
        return True, 1.0, penalty.l1 / (penalty.l1 + penalty.l2)
    raise ValueError(
        "risk_alpha_path follows an l1, an l2 or a mean-form elastic-net penalty path; "
        "the estimator's penalty "
        f"{penalty!r} is neither."
    )


def _extend_ridge_grid(res, design, y_tilde, eps, scale, df_offset, patience):
    """The automatic ridge grid continued geometrically below ``eps`` times its
    top while the leave-one-out error's minimum over its last ``patience``
    alphas lies more than ``walk_rtol`` below the minimum before them (the
    statistical policy's ``ridge_grid_extends``; a flat end, as least
    squares with ``n >> p``, is not continued):
    with a decaying spectrum (spectra, nearly collinear columns) ``df`` at
    ``eps`` is a few units of the rank and the error still falls there
    (modeldata's meats: ``df`` 3 of 100, a held-out error five times its
    minimum, at ``df`` 15-23 and ``1e-8`` of the top). Not on the risk
    estimate: it reads one mean leverage and, where the leverages spread at
    small alphas, keeps falling into near-interpolation (docs/benchmarks.rst).
    It stops at the rounding of the Gram's eigenvalues (``min(n, p)`` ulps
    of the top)."""
    if not design.statistics.ridge_grid_extends or res.alphas.shape[0] <= max(patience, 1):
        return res
    ratio = res.alphas[-1] / res.alphas[-2]
    floor = res.alphas[0] * eps * min(design.n_samples, design.n_features) * np.finfo(
        np.float64).eps
    while True:
        more = res.alphas[-1] * ratio ** np.arange(1, patience + 1)
        more = more[more >= floor]
        if more.size == 0 or not ridge_loo_falls(res.loo, patience, design.statistics):
            return res
        ext = _ridge_path(design, y_tilde, more, None, eps, scale, loo=True)
        ext.df = ext.df + df_offset
        for key in ("alphas", "df", "train_mse", "n_iter", "gaps", "loo"):
            res[key] = np.concatenate([res[key], ext[key]])
        res.coefs = np.asfortranarray(np.concatenate([res.coefs, ext.coefs], axis=1))


def ridge_loo_falls(loo, patience, statistics):
    """Whether the leave-one-out errors ``loo`` of a decreasing ridge grid
    still fall at its end: their minimum over the last ``patience`` alphas
    more than ``walk_rtol`` below the minimum before them."""
    loo = np.where(np.isfinite(loo), loo, np.inf)
    return bool(loo.shape[0] > patience and np.min(loo[-patience:])
                < (1.0 - statistics.walk_rtol) * np.min(loo[:-patience]))


def _ridge_path(design, y_tilde, alphas, n_alphas, eps, scale, loo=False):
    """Closed-form ridge path from one eigendecomposition of the smaller Gram
    (with ``loo``, its exact leave-one-out: :func:`_ridge_path_loo`)."""
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
    res = Bunch(alphas=alphas, coefs=np.asfortranarray(coefs, dtype=design.dtype), df=df,
                train_mse=train_mse, n_iter=np.zeros(alphas.shape[0], dtype=np.int64),
                gaps=np.zeros(alphas.shape[0]))
    if loo:
        if side == "features":  # h_ii = sum_j (X~ V)_ij^2 / (n_eff (lambda_j + mu))
            Z = np.asarray(design.matvec(vecs), dtype=np.float64)
            hat = (Z * Z) @ inv / n_eff
        else:  # h_ii = sum_j Q_ij^2 lambda_j / (lambda_j + mu)
            hat = (vecs * vecs) @ (lam[:, None] * inv)
        res.loo = _ridge_path_loo(design, hat, resid)
    return res


def _ridge_path_loo(design, hat, resid):
    """Exact leave-one-out error of every ridge solution from the diagonal
    of its hat matrix (Golub, Heath & Wahba 1979; scikit-learn's
    ``_RidgeGCV``), ``O(n min(n, p))`` an alpha: removing the weight ``rho_i
    = min(w_i, 1)`` of sample ``i`` (the same sum-form penalty, the
    intercept refitted) leaves the residual ``r_i / (1 - rho_i / n_eff -
    rho_i h_i)``, ``h_i = x~_i^T (X~^T W X~ + alpha)^-1 x~_i``; written as
    the leverage formula's ``(1 + eps_i) r_i / (1 - kappa_i h_i)``
    (:func:`skacv.approximate_loo`'s ``"alo"``; ``inf`` at leverage 1).
    ``hat``: ``w_i h_i`` (n_samples, n_alphas), ``resid``: ``sqrt(w_i) r_i``."""
    w, rho, W_minus = removed_weights(design)
    eps = rho / W_minus if design.fit_intercept else np.zeros_like(rho)
    kappa = rho * (1.0 + eps) / np.where(w > 0, w, 1.0)  # (zero weight: rho = 0)
    denom = np.multiply(hat, -kappa[:, None])  # (in place: n_samples x n_alphas)
    denom += 1.0
    bad = denom <= 1e-12
    ok = ~bad.any(axis=0)
    if not ok.all():
        denom[bad] = 1.0
    res = np.divide(resid, denom, out=denom)
    if design.fit_intercept:
        res *= (1.0 + eps)[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        value = np.einsum("ij,ij->j", res, res) / design.n_eff
    return np.where(ok & np.isfinite(value), value, np.inf)
