"""The Lasso path's solves by scikit-learn's coordinate descent
(:mod:`skacv.model_selection._lasso_path`): each alpha on ``C = X~^T X~``
in the covariance form (:func:`_coordinate_descent`), else a working set
on its columns (:func:`_columns_coordinate_descent`) where
:func:`_columns_descent` says so; on a small ``p >> n`` design, every
alpha's candidate from the exact homotopy path (:func:`_lars_candidates`).
"""

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning
from sklearn.linear_model import enet_path, lars_path, lars_path_gram

from .._trace import taken
from ..iterations._metric import spike_possible
from ..iterations._penalties import duality_gap


def _with_ridge(stats, coef, l2, n_eff):
    """The residual statistics ``(||r||^2, r^T y~, X~^T r / n_eff)`` of the
    augmented elastic-net problem (:mod:`~skacv.model_selection._lasso_path`)
    from the plain ones at ``coef``: ``||r||^2 + n_eff l2 ||b||^2``, ``r^T
    y~`` and ``X~^T r / n_eff - l2 b``."""
    if not l2:
        return stats
    rr, ry, corr = stats
    b = np.asarray(coef, dtype=np.float64)
    return rr + n_eff * l2 * float(b @ b), ry, corr - l2 * b


def _coordinate_descent(space, coef, alpha, goal, max_iter):
    """:func:`_solve_alpha` by ``enet_path`` with ``precompute`` on ``C =
    X~^T X~`` and ``c = X~^T y~``, from ``coef`` to the duality gap ``goal``
    (``steps``: its epochs). Given ``C`` and ``c`` it reads ``X`` and ``y``
    for their shape and ``||y||^2`` only: one row of ``X`` makes its
    penalty ``alpha * n_eff`` on ``b^T C b / 2 - c^T b``, ``n_eff`` times the
    mean-form objective."""
    design = space.design
    n_eff, l2 = design.n_eff, space.l2
    C, yy = np.asarray(space.gram, dtype=np.float64), space.yy
    if not C.flags.c_contiguous:  # the solver reads rows: C is symmetric
        C = C.T if C.flags.f_contiguous else np.ascontiguousarray(C)
    c = np.ascontiguousarray(space.c, dtype=np.float64)
    b, n_iter = gram_coordinate_descent(C, c, yy, alpha * n_eff, l2 * n_eff, coef,
                                        goal * n_eff / yy if yy > 0 else 0.0, max_iter)
    rr, ry, corr = gram_residuals(C, c, yy, b)
    corr = corr / n_eff
    gap = duality_gap(*_with_ridge((rr, ry, corr), b, l2, n_eff), float(np.abs(b).sum()),
                      alpha, n_eff)
    return (b.astype(design.dtype, copy=False), (rr, ry, corr), gap, n_iter,
            np.flatnonzero(b))


def gram_coordinate_descent(C, c, yy, l1, l2, coef, tol, max_iter):
    """``(b, epochs)``: the minimiser of ``b^T C b / 2 - c^T b + l1 ||b||_1 +
    l2 ||b||^2 / 2`` (``yy``: ``||y||^2`` of the data behind ``C = X^T X``,
    ``c = X^T y``, read for the duality gap only) by scikit-learn's
    coordinate descent (``enet_path`` with ``precompute``: ``X`` and ``y``
    are read for their shape and ``||y||^2`` only; one row makes its
    penalties the sum form's), from ``coef`` until the duality gap is at
    most ``tol * yy`` or ``max_iter`` epochs. ``C`` C-ordered."""
    with warnings.catch_warnings():  # the callers judge the gap themselves
        warnings.simplefilter("ignore", SklearnConvergenceWarning)
        _, coefs, _, n_iter = enet_path(
            np.empty((1, C.shape[0]), order="F"), np.array([np.sqrt(yy)]),
            l1_ratio=l1 / (l1 + l2), alphas=[l1 + l2], precompute=C, Xy=c,
            coef_init=np.asfortranarray(coef, dtype=np.float64), tol=tol, max_iter=max_iter,
            check_input=False, return_n_iter=True)
    return coefs[:, 0], int(n_iter[0])


def gram_residuals(C, c, yy, b):
    """``(||r||^2, r^T y, X^T r)`` at ``b`` from ``C = X^T X``, ``c = X^T y``
    and ``yy = ||y||^2`` (``r = y - X b``)."""
    Cb, cb = C @ b, float(c @ b)
    return max(yy - 2.0 * cb + float(b @ Cb), 0.0), yy - cb, c - Cb


def gram_gap(C, c, yy, l1, l2, b):
    """The duality gap of :func:`gram_coordinate_descent`'s objective at
    ``b`` (its sum form: :func:`~skacv.iterations._penalties.duality_gap`
    with one row's weight)."""
    return duality_gap(*gram_residuals(C, c, yy, b), float(np.abs(b).sum()), l1, 1.0, l2, b)


def degenerate_homotopy(kinks, path, zero_objective):
    """Whether a LARS-Lasso path (``lars_path``'s ``alphas`` ``kinks`` and
    ``coefs`` ``path``) is degenerate: its solution ``b`` at a kink ``a``
    has ``a |b|_1`` above ``zero_objective``, the objective at zero (in
    ``lars_path``'s scale), which bounds it. ``lars_path`` may return such
    a path without raising (columns entering and leaving at one kink, as
    duplicated ones do: coefficients of 1e15 that cancel, from which no
    solver comes back)."""
    return not np.all(np.abs(path).sum(axis=0) * kinks <= zero_objective * (1.0 + 1e-6))


def gram_homotopy(C, c, yy, l1, l2):
    """:func:`gram_coordinate_descent`'s minimiser read off its exact
    piecewise-linear path (scikit-learn's ``lars_path_gram`` on ``C + l2
    I`` and ``c``, LARS-Lasso, Efron, Hastie, Johnstone & Tibshirani 2004):
    exact where coordinate descent crawls (a singular ``C``: more columns
    than rows near interpolation), in about as many kinks as columns.
    ``None`` where ``lars_path_gram`` raises (columns leaving at one kink,
    scikit-learn issue 9603), where its path ends short of ``l1``, or where
    it is degenerate: a kink's solution ``b`` at penalty ``a`` with ``a
    |b|_1`` above ``yy / 2``, the objective at zero."""
    G = C + l2 * np.eye(C.shape[0]) if l2 else C
    with warnings.catch_warnings():  # (degenerate kinks: the check below)
        warnings.simplefilter("ignore")
        try:
            kinks, _, path = lars_path_gram(Xy=c, Gram=G, n_samples=1, alpha_min=l1,
                                            method="lasso", max_iter=8 * C.shape[0] + 100)
        except ValueError:
            return None
    if kinks[-1] > l1 * (1.0 + 1e-12):
        return None
    if degenerate_homotopy(kinks, path, 0.5 * yy):
        return None
    return lars_solutions(kinks, path, np.array([l1]))[:, 0]


def _descent_possible(space, step_size):
    """Whether the sample space's working sets may be solved by coordinate
    descent on their columns: float64 (dense, or a sparse design whose
    working sets may be copied dense: the speed policy's
    ``path_sparse_dense_bytes``), the default ``step_size`` and the speed
    policy's ``path_columns_descent``."""
    design = space.design
    dense = not design.sparse or design.policy.path_sparse_dense_bytes > 0
    return (space.gram is None and dense and design.dtype == np.float64
            and isinstance(step_size, str) and design.policy.path_columns_descent)


def _columns_descent(space, sub, work, step_size):
    """Whether a working set of the sample space is solved by coordinate
    descent on its columns: :func:`_descent_possible`, and a small working
    set (the speed policy's ``path_metric_min_entries``) or a spectrum
    without a top eigenvalue far above the rest (where FISTA in the
    rank-one metric is faster), ruled out by the kept estimates
    (:meth:`~skacv.model_selection._lasso_spaces._SampleSpace.spike_ruled_out`)
    or by a Lanczos run that FISTA's step bound then reuses."""
    policy = space.design.policy
    if sub.sparse or not _descent_possible(space, step_size):
        return False
    if sub.n_samples * len(work) <= policy.path_metric_min_entries:
        return True
    if policy.path_metric and policy.path_kept_spike_bound and space.spike_ruled_out(work):
        taken("spike_ruled_out")
        return True
    space.step_bound(sub, work)
    return not (policy.path_metric and spike_possible(space.top, space.second, policy))


def _columns_coordinate_descent(space, sub, alpha, coef_w, goal, max_iter):
    """The working set's Lasso (elastic net) by ``enet_path`` on its
    columns ``X~_W``, from ``coef_w`` to the speed policy's
    ``path_descent_gap_share`` of the duality gap ``goal`` (the full
    problem's gap differs from the working set's by rounding). The penalty
    ``alpha n_eff / n`` is ``alpha`` in the mean form over ``n_eff``.
    Returns the solution, its fitted values and the epochs.
    """
    share = space.design.policy.path_descent_gap_share
    taken("columns_coordinate_descent", fortran=bool(sub.X.flags.f_contiguous), gap_share=share)
    n, n_eff, l2 = sub.n_samples, space.design.n_eff, space.l2
    Xw = np.asfortranarray(sub.X)  # (the sample space's copies are in Fortran order)
    y = space.y64
    yy = float(y @ y)
    with warnings.catch_warnings():  # the path warns once for all alphas
        warnings.simplefilter("ignore", SklearnConvergenceWarning)
        _, coefs, _, n_iter = enet_path(
            Xw, y, l1_ratio=alpha / (alpha + l2), alphas=[(alpha + l2) * n_eff / n],
            precompute=False,  # (scikit-learn 1.6 refuses its default "auto" unchecked)
            coef_init=np.asfortranarray(coef_w, dtype=np.float64),
            tol=share * goal * n_eff / yy if yy > 0 else 0.0, max_iter=max_iter,
            check_input=False, return_n_iter=True)
    b = coefs[:, 0]
    return b, Xw @ b, int(n_iter[0])


def _lars_candidates(space, alphas, step_size):
    """The Lasso's solutions at ``alphas`` (decreasing) read off its exact
    piecewise-linear path by scikit-learn's ``lars_path`` (LARS-Lasso,
    Efron, Hastie, Johnstone & Tibshirani 2004) on ``X~``, ``y~``: a
    ``(n_features, n_alphas)`` array of candidates, each certified by the
    path's duality gap (the caller solves on from those that miss it), or
    ``None`` where the route does not apply (the Lasso only): sparse ``X``,
    a float ``step_size``, or a design not ``p > n`` with at most the speed
    policy's ``path_lars_max_samples`` rows. Its kinks number about ``n``,
    each a pass over ``X~``: at a few dozen rows it is cheaper than working
    sets of coordinate descent near interpolation, where those crawl.
    ``lars_path``'s penalty is ``|X~^T r|_inf / n``, the path's ``alpha
    n_eff / n``; it stops after ``path_lars_kinks_per_sample * n`` kinks
    (its buffers hold that many solutions)."""
    design = space.design
    n, p = design.n_samples, design.n_features
    limit = design.policy.path_lars_max_samples
    if (design.sparse or space.gram is not None or not isinstance(step_size, str)
            or limit is None or not n < p or n > limit):
        return None
    scale = design.n_eff / n
    with warnings.catch_warnings():  # (degenerate kinks: the gaps tell)
        warnings.simplefilter("ignore")
        try:
            kinks, _, path = lars_path(np.asarray(design.X, dtype=np.float64), space.y64,
                                       alpha_min=float(alphas[-1]) * scale, method="lasso",
                                       max_iter=design.policy.path_lars_kinks_per_sample * n)
        except ValueError:  # columns leaving at one kink (scikit-learn issue 9603)
            taken("lars_path_failed")
            return None
    taken("lars_path", kinks=int(kinks.size))
    return lars_solutions(kinks, path, np.asarray(alphas, dtype=np.float64) * scale)


def lars_solutions(kinks, path, at):
    """The solutions at the penalties ``at`` (``lars_path``'s scale) of the
    path ``lars_path`` returned (its ``alphas`` ``kinks``, decreasing, and
    ``coefs`` ``path``): shape (n_features, n_at), linear between two
    kinks, the end's solution past either end."""
    p = path.shape[0]
    k = np.clip(np.searchsorted(-kinks, -at), 1, kinks.size - 1) if kinks.size > 1 else None
    if k is None:
        return np.zeros((p, at.size))
    # linear between the kinks k - 1 and k; at the ends, the end's solution.
    # A penalty equal to a kink but for rounding (alpha_max, computed apart
    # from lars_path's first kink) takes the kink's solution: interpolated an
    # ulp away, the entering column would count in the df at 1e-17
    width = np.maximum(kinks[k - 1] - kinks[k], np.finfo(np.float64).tiny)
    t = np.clip((at - kinks[k]) / width, 0.0, 1.0)
    ulps = 64 * np.finfo(np.float64).eps
    t[np.abs(at - kinks[k - 1]) <= ulps * kinks[k - 1]] = 1.0
    t[np.abs(at - kinks[k]) <= ulps * np.abs(kinks[k])] = 0.0
    return (1.0 - t) * path[:, k] + t * path[:, k - 1]
