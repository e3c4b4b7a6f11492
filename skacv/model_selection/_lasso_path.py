"""The Lasso's path of converged fits along a decreasing grid of penalties.

:func:`lasso_path` solves ``min_b ||y~ - X~ b||^2 / (2 n_eff) + alpha ||b||_1``
alpha after alpha by FISTA, the skacv :class:`~skacv.FISTA` iteration run by
:func:`skacv.iterations._path.run_trajectory` (the only fit loop),
warm-started from the previous solution, on a working set (a relaxed
sequential strong rule, Tibshirani et al. 2012, plus the previous support,
grown by the violators of the optimality conditions; at most
``max(100, 4 |support|)`` columns to start with, grown by at most its size,
the columns of largest correlation first) until the duality gap of the
*full* problem is below the tolerance: the working set changes the cost,
not the solution. Once FISTA has identified a support and its signs, conjugate
gradients solve the Lasso restricted to them (:class:`_SupportFinish`, an
active-set Newton step), which FISTA's step, set by the top eigenvalue of
correlated columns, approaches slowly; the duality gap certifies it as it
does FISTA's iterates. The working sets run on copies of their columns of ``X~``
(:class:`_SampleSpace`) or, with fewer features than samples where it pays
(:func:`covariance_path_pays`, float64), in the covariance form
(:class:`_FeatureSpace`, scikit-learn's ``precompute``): products with
``C_WW`` of ``C = X~^T X~``, the residual through its quadratic forms, no
product with the rows of ``X~`` after ``C``. Each solution's df and risk come
from :mod:`skacv.model_selection._converged_risk`.
"""

import warnings

import numpy as np
from scipy.sparse.linalg import LinearOperator
from sklearn.utils import Bunch

from .._config import check_memory
from .._policy import get_policy
from ..exceptions import ConvergenceWarning, DivergenceError
from ..iterations._datafits import NormalEquations
from ..iterations._iterations import FISTA
from ..iterations._path import init_state, run_trajectory
from ..iterations._penalties import L1
from ..linalg._design import CovarianceForm, Design
from ..linalg._linalg import lanczos_top
from ..utils._compat import conjugate_gradient
from ._converged_risk import SupportDF, converged_risk

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
# at most max(this, 4 times the warm start's support) columns in a first
# working set, and a working set grows by at most its size (the largest
# violators): equicorrelated columns all pass the strong rule, and FISTA's
# step on them, 1 / (rho |W|), would be tiny
_WORK_MIN = 100
# the exact finish (_SupportFinish): supports of at most this share of the
# samples (the bulk of the spectrum of X~_S^T X~_S spans (1 +- sqrt(|S| / n))^2,
# Marchenko-Pastur: condition 34 at one half, 320 at 0.8, and conjugate
# gradients slow down as the support nears n); the products of the finishes
# that did not end their solve below this share of its FISTA steps; and
# conjugate-gradient iterations of one finish at most, its active-set steps
# included (each costs about a FISTA step)
_FINISH_MAX_RATIO = 0.5
_FINISH_SHARE = 0.25
_FINISH_MAXITER = 100
#: the covariance form's quadratic forms of ``||r||^2`` cancel (their
#: rounding, about ``1e-13 ||y~||^2``): it certifies duality gaps down to this
#: tolerance only (:func:`covariance_path_pays`)
COVARIANCE_PATH_MIN_TOL = 1e-10
#: the duality gap of an alpha is also at most ``PATH_OBJECTIVE_TOL * tol``
#: times twice its objective (at the warm start): scikit-learn's
#: ``tol * ||y~||^2 / n_eff`` alone can exceed the objective of a small
#: penalty when the fit explains most of ``y`` (``make_regression`` with
#: noise 5: the previous alpha's solution passed at the next two alphas,
#: whose risks came out identical); a factor of 100 leaves the gap of the
#: usual designs, whose objective stays above 1 % of ``||y~||^2 / (2 n_eff)``
PATH_OBJECTIVE_TOL = 100.0


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
    ``r = y~ - X~_W b_W`` itself.

    It and :class:`_FeatureSpace` give a working set ``W`` its design
    (``sub(W)``), the fit loop's target and datafit, the residual's
    statistics ``(||r||^2, r^T y~, X~^T r / n_eff)`` (``stats``), an upper
    bound of the top eigenvalue (``step_bound``, warm-started) and ``gram``,
    the Gram matrix of ``X~`` where it is formed (the supports' ranks).
    """

    datafit = None  # least squares
    gram = None  # X~^T X~ is not formed
    finish = None  # the path's _SupportFinish, set by lasso_path

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

    def support_system(self, sub, work, S):
        """``(v -> X~_S^T X~_S v, X~_S^T y~)`` of the columns ``S`` of the
        working set (positions in ``work``), in float64."""
        if S.size == work.size:
            part = sub
        elif sub.sparse:
            part = self.columns(work[S])
        else:  # a copy of the columns: sub's buffer stays the working set's
            part = Design(sub.X[:, S], None, False)
        dt = part.dtype

        def normal(v):
            return np.asarray(part.rmatvec(part.matvec(v.astype(dt))), dtype=np.float64)

        return normal, np.asarray(part.rmatvec(self.y), dtype=np.float64)


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
    finish = None  # the path's _SupportFinish, set by lasso_path

    def __init__(self, design, c, yy):
        """``c = X~^T y~`` (float64) and ``yy = y~^T y~``."""
        self.design, self.c, self.yy = design, c, yy
        self.full = CovarianceForm(design)
        self.u = np.zeros(design.n_features)  # top eigenvector, warm start of the step sizes

    @property
    def gram(self):
        """``C = X~^T X~`` (the ranks of the supports are read from it)."""
        return self.full.C

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

    def support_system(self, sub, work, S):
        """``(v -> C_SS v, c_S)`` of the columns ``S`` of the working set
        (positions in ``work``), in float64."""
        C = np.asarray(sub.C[np.ix_(S, S)], dtype=np.float64)
        return C.__matmul__, self.c[work[S]]


def covariance_path_pays(design, tol, n_alphas):
    """Whether the Lasso path of ``n_alphas`` penalties runs in the
    covariance form (:class:`_FeatureSpace`, the speed policy's
    ``covariance_path``): float64, at most the policy's
    ``covariance_max_features`` features, fewer than the samples, a
    duality-gap tolerance of at least
    :data:`COVARIANCE_PATH_MIN_TOL` (the quadratic forms of ``||r||^2``
    cancel: their rounding, about ``1e-13 ||y~||^2``, would stall finer
    gaps), and the Gram matrix (``2 n p^2`` flops at
    ``covariance_gemm_advantage`` times the speed of a product with ``X~``:
    ``p / 16`` products) below the policy's ``path_products_per_alpha``
    products per penalty."""
    n, p = design.n_samples, design.n_features
    policy = get_policy()
    if not (policy.covariance_path and design.dtype == np.float64
            and tol >= COVARIANCE_PATH_MIN_TOL and p <= min(n, policy.covariance_max_features)):
        return False
    gram = 0.0 if ("gram", "features") in design.cache else (
        p / policy.covariance_gemm_advantage)
    return gram <= policy.path_products_per_alpha * n_alphas


def _zero_stride(m, width, dtype):
    """A ``(m, width)`` array whose columns all share one buffer: the fit loop
    writes every iterate in it without keeping the path."""
    buf = np.zeros(m, dtype=dtype)
    return np.lib.stride_tricks.as_strided(buf, shape=(m, width), strides=(buf.strides[0], 0),
                                           writeable=True)


class _SupportFinish:
    """The exact finish of a working set's solve on the support FISTA has
    identified (an active-set Newton step).

    Once the support ``S`` and signs ``s`` of FISTA's iterate are the same
    at two consecutive gap checks, the Lasso restricted to them is least
    squares: ``X~_S^T X~_S b_S = X~_S^T y~ - n_eff alpha s`` (``C_SS b_S =
    c_S - n_eff alpha s`` in the covariance form), solved by conjugate
    gradients warm-started from the iterate. Equicorrelated columns give
    ``X~_S^T X~_S`` one outlier eigenvalue that sets FISTA's step for the
    whole spectrum; conjugate gradients remove it in one iteration.

    A solution that flips signs is not taken: the segment from the iterate
    to it stays in the orthant of ``s`` up to its first crossing, where the
    objective (the restricted least squares, convex, decreasing towards its
    minimum) is below the iterate's; the crossing columns leave ``S`` and
    the system is solved again (an active-set step), within
    :data:`_FINISH_MAXITER` conjugate-gradient iterations in all. The
    caller keeps the point if it lowers the objective; the duality gap
    certifies it as it does FISTA's iterates. A pattern is tried once; none
    with ``S`` empty, the whole working set (FISTA's first steps from the
    warm start, before it drops any column), above
    :data:`_FINISH_MAX_RATIO` of the samples
    (ill-conditioned, singular at ``n_samples``), none when FISTA's pace
    would reach the target within two checks, and none while the products
    of the finishes that did not end the working set's solve exceed
    :data:`_FINISH_SHARE` of its FISTA steps (the first one is free: many
    sign crossings, a support not yet identified, stop the next ones).

    Conjugate gradients stop at the residual ``rho = X~_S^T r - n_eff alpha
    s`` whose duality gap, about ``2 ||b||_1 ||rho||_inf / n_eff`` (the
    dual point ``r`` scaled by ``alpha / ||X~^T r / n_eff||_inf``), is a
    quarter of the target.
    """

    def __init__(self, space):
        self.space = space
        # finishes tried, kept by the caller, and columns dropped at sign
        # crossings (diagnostics: the tests read them)
        self.n_tried = self.n_accepted = self.n_flips = 0

    def start(self, sub, work, alpha, target):
        """A new working set's solve."""
        self.sub, self.work, self.alpha, self.target = sub, work, alpha, target
        self.previous, self.tried = None, set()
        # FISTA steps of this solve and products of its finishes that did not
        # end it: the finishes stop while these exceed _FINISH_SHARE of those
        self.fista_steps = self.wasted = 0

    def __call__(self, x, l1, fista_left):
        """``(x_new, n_products)``: the finish's point on the working set
        (``None`` if not tried) and the conjugate-gradient iterations spent;
        ``l1`` is the l1 norm of FISTA's iterate ``x`` (the caller compares
        the objectives), ``fista_left`` the steps FISTA would still take at
        its pace (at most the steps left in the budget): the finish is
        skipped below ``2 * _CHECK_EVERY`` and spends at most that many
        products."""
        signs = np.sign(x).astype(np.int8)
        key = signs.tobytes()
        stable, self.previous = key == self.previous, key
        S = np.flatnonzero(signs)
        if (not stable or key in self.tried or S.size in (0, x.size)
                or S.size > _FINISH_MAX_RATIO * self.space.design.n_samples
                or fista_left < 2 * _CHECK_EVERY or self.wasted > _FINISH_SHARE * self.fista_steps):
            return None, 0
        self.tried.add(key)
        self.n_tried += 1
        b, n_products = self._active_set(S, signs[S].astype(np.float64),
                                         np.asarray(x[S], dtype=np.float64), l1,
                                         int(min(fista_left, _FINISH_MAXITER)))
        out = np.zeros_like(x)
        out[S] = b
        return out, n_products

    def _active_set(self, S, s, b, l1, maxiter):
        """Conjugate gradients on the columns ``S`` (signs ``s``) from
        ``b``, dropping the columns whose sign crosses (zero in the result).
        Each solve after a crossing starts from the previous solution (its
        dropped columns out): a column less changes it little."""
        n_eff = self.space.design.n_eff
        normal, c = self.space.support_system(self.sub, self.work, S)
        rhs = c - n_eff * self.alpha * s
        atol = 0.25 * n_eff * self.target / max(l1, np.finfo(np.float64).tiny)
        keep = np.ones(S.size, dtype=bool)
        start = b.copy()
        n_products = 0
        while keep.any() and n_products + 1 < maxiter:  # (one product: the residual)
            m = int(keep.sum())

            def op(v, keep=keep):
                full = np.zeros(S.size)
                full[keep] = v
                return normal(full)[keep]

            new, k = conjugate_gradient(LinearOperator((m, m), matvec=op, dtype=np.float64),
                                        rhs[keep], start[keep], 0.0, atol,
                                        maxiter - n_products - 1)
            n_products += k + 1
            crossed = new * s[keep] <= 0.0
            if not np.all(np.isfinite(new)):
                break
            if not crossed.any():
                b[keep] = new
                break
            # first crossing of the segment old -> new (old has the signs s)
            old = b[keep]
            t = old[crossed] / (old[crossed] - new[crossed])
            step = old + float(t.min()) * (new - old)
            step[np.flatnonzero(crossed)[t <= t.min()]] = 0.0
            step[step * s[keep] <= 0.0] = 0.0
            b[keep], start[keep] = step, new
            keep &= b != 0.0
            self.n_flips += int(m - keep.sum())
        return b, n_products


def _steps_left(gap_prev, gap, target):
    """The FISTA steps to the gap ``target`` at the pace of the last check
    (from ``gap_prev`` to ``gap``, linear convergence); ``inf`` if the gap
    did not decrease."""
    if not gap < gap_prev < np.inf:
        return np.inf
    return _CHECK_EVERY * np.log(gap / target) / np.log(gap_prev / gap)


def _objective_gap(space, sub, work, x, fitted, alpha):
    """``(objective, duality gap, l1 norm)`` of ``x`` on the working set."""
    rr, ry, corr = space.stats(sub, work, x, fitted)
    l1 = float(np.abs(x).sum(dtype=np.float64))
    return rr / (2 * sub.n_eff) + alpha * l1, _duality_gap(rr, ry, corr, l1, alpha,
                                                           sub.n_eff), l1


def _solve_working_set(space, sub, work, alpha, coef, step_size, target, budget):
    """FISTA on the columns ``work`` (``sub``, in ``space``) until its duality
    gap is ``<= target``, with the exact finish of :class:`_SupportFinish`
    (``space.finish``; the speed policy's ``path_support_finish``).

    Returns the solution, its fitted values in ``space`` and the number of
    steps (conjugate-gradient iterations included). The momentum is
    restarted when the objective increases between two checks (function
    restart, O'Donoghue & Candes 2015) and after an accepted finish.
    """
    # FISTA's momentum follows state.k: a state at k = 0 restarts it
    iteration = FISTA(step_size, penalty=L1(alpha))
    y = space.target(work)
    state = init_state(sub, coef)
    scratch = _zero_stride(sub.n_features, budget + 1, sub.dtype)  # state.k <= done <= budget
    finish = space.finish
    if finish is not None:
        finish.start(sub, work, alpha, target)
    done = 0
    obj_prev = gap_prev = np.inf
    while done < budget:
        k = min(_CHECK_EVERY, budget - done)
        run_trajectory(sub, y, iteration, k, state, scratch, datafit=space.datafit)
        done += k
        if finish is not None:
            finish.fista_steps += k
        obj, gap, l1 = _objective_gap(space, sub, work, state.x, state.Xx, alpha)
        if gap <= target:
            break
        restart = obj > obj_prev
        if finish is not None:
            x, n_iter = finish(state.x, l1,
                               min(_steps_left(gap_prev, gap, target), budget - done))
            done += n_iter
            if x is not None:
                trial = init_state(sub, x)
                obj_x, gap_x, _ = _objective_gap(space, sub, work, x, trial.Xx, alpha)
                if obj_x < obj:  # accepted: FISTA goes on from it, momentum restarted
                    finish.n_accepted += 1
                    state, obj, gap, restart = trial, obj_x, gap_x, True
                    if gap <= target:
                        break
                finish.wasted += n_iter
        if restart and state.k:  # (an accepted finish starts at k = 0)
            state = init_state(sub, state.x)
        obj_prev, gap_prev = obj, gap
    return state.x, state.Xx, done


def _fista_with_step(space, sub, work, alpha, coef_w, step_size, goal, budget):
    """:func:`_solve_working_set` with the estimator's ``step_size``:
    ``"auto"`` is ``1 / L`` of the working set (warm-started Lanczos,
    ``space.step_bound``) and, should that estimate be too low and the steps
    diverge, the exact top eigenvalue; a float is used as given."""
    if not isinstance(step_size, str):
        return _solve_working_set(space, sub, work, alpha, coef_w, float(step_size), goal,
                                  budget)
    L = space.step_bound(sub, work)
    try:
        return _solve_working_set(space, sub, work, alpha, coef_w, 1.0 / L if L > 0 else 1.0,
                                  goal, budget)
    except DivergenceError:
        # the Lanczos estimate was too low: exact top eigenvalue, again
        return _solve_working_set(space, sub, work, alpha, coef_w, 1.0 / sub.lipschitz(), goal,
                                  budget)


def _solve_alpha(space, coef, stats, gap, alpha, alpha_prev, goal, step_size, max_iter):
    """Solve the Lasso at ``alpha`` from the warm start ``coef`` (of duality
    gap ``gap``, residual statistics ``stats = (||r||^2, r^T y~, X~^T r /
    n_eff)``) until the gap of the full problem is at most ``goal``.

    The working set is the previous support and the columns passing the
    relaxed sequential strong rule (at most ``max(_WORK_MIN, 4 |support|)``
    of them, the largest correlations first: equicorrelated columns all pass
    the rule), grown by the violators of the optimality conditions (at most
    as many as it holds, the largest first) until there are none (or
    ``max_iter`` FISTA steps are spent).

    Returns
    -------
    coef : ndarray of shape (n_features,)
    stats : tuple of (float, float, ndarray of shape (n_features,))
    gap : float
    steps : int
        FISTA steps taken.
    work : ndarray of int
        The last working set.
    """
    design = space.design
    p, n_eff = design.n_features, design.n_eff
    rr, ry, corr = stats
    steps = 0
    work = np.flatnonzero(coef)
    if gap > goal:
        # working set: (relaxed) sequential strong rule + previous support
        thresh = alpha - _STRONG_RULE_SLACK * (alpha_prev - alpha)
        work = np.flatnonzero((np.abs(corr) >= thresh) | (coef != 0))
        work = _largest(work, corr, coef != 0, max(_WORK_MIN, 4 * np.count_nonzero(coef)))
    while gap > goal and steps < max_iter:
        # the previous working set's columns go before a larger buffer comes
        sub = None
        sub = space.sub(work)
        coef_w, fitted, k = _fista_with_step(space, sub, work, alpha, coef[work], step_size,
                                             goal, max_iter - steps)
        steps += k
        coef = np.zeros(p, dtype=design.dtype)
        coef[work] = coef_w
        # optimality on the full problem (one product with X~^T, or C)
        rr, ry, corr = space.stats(sub, work, coef_w, fitted, full=True)
        gap = _duality_gap(rr, ry, corr, float(np.abs(coef).sum(dtype=np.float64)), alpha, n_eff)
        outside = np.ones(p, dtype=bool)
        outside[work] = False
        violators = np.flatnonzero(outside & (np.abs(corr) > alpha))
        if violators.size == 0:  # right working set (or its solve ran out of steps)
            break
        work = np.union1d(work, _largest(violators, corr, None, max(_WORK_MIN, work.size)))
    return coef, (rr, ry, corr), gap, steps, work


def _largest(cols, corr, keep, size):
    """At most ``size`` of the columns ``cols``: those of ``keep`` (mask over
    all columns) and the largest ``|corr|``."""
    if cols.size <= size:
        return cols
    kept = cols[keep[cols]] if keep is not None else cols[:0]
    rest = cols[~keep[cols]] if keep is not None else cols
    n_more = max(size - kept.size, 0)
    top = rest[np.argpartition(-np.abs(corr[rest]), n_more - 1)[:n_more]] if n_more else rest[:0]
    return np.union1d(kept, top)


def _lasso_grid(alphas, alpha_max, n_alphas, eps):
    """The given penalties, or ``n_alphas`` from ``alpha_max`` down to ``eps
    alpha_max`` (geometric)."""
    if alphas is not None:
        return alphas
    if alpha_max <= np.finfo(np.float64).resolution:
        return np.full(n_alphas, np.finfo(np.float64).resolution)
    return np.geomspace(alpha_max, alpha_max * eps, num=n_alphas)


class _NoChange:
    """``n_alphas_no_change``: whether a criterion has not improved on its
    minimum for ``patience`` consecutive values (``None``: never)."""

    def __init__(self, patience):
        self.patience, self.best, self.since_best = patience, np.inf, 0

    def __call__(self, value):
        if self.patience is None:
            return False
        if value < self.best:
            self.best, self.since_best = value, 0
            return False
        self.since_best += 1
        return self.since_best >= self.patience


def lasso_path(design, y_tilde, X, sample_weight, alphas, n_alphas, eps, step_size, tol,
               max_iter, n_alphas_no_change, df_offset, verbose, loo_of=None):
    """The Lasso's converged fits, df and training error along ``alphas``.

    See :func:`skacv.risk_alpha_path` for the parameters (``df_offset``: one
    with an intercept; ``loo_of(coef, alpha)``: the leave-one-out error of a
    solution, or ``None``).

    Returns
    -------
    path : :class:`~sklearn.utils.Bunch`
        ``alphas``, ``coefs`` (n_features, n_alphas), ``df``, ``train_mse``,
        ``n_iter``, ``gaps`` and, with ``loo_of``, ``loo``, over the solved
        alphas.
    """
    n_eff = design.n_eff
    p = design.n_features
    # ||r||^2, r^T y~ and X~^T r / n_eff at coef = 0
    yy = float(np.dot(np.asarray(y_tilde, dtype=np.float64), y_tilde))
    c = np.asarray(design.rmatvec(y_tilde), dtype=np.float64)
    stats = (yy, yy, c / n_eff)
    space = (_FeatureSpace(design, c, yy)
             if covariance_path_pays(design, tol, n_alphas if alphas is None else alphas.shape[0])
             else _SampleSpace(design, X, sample_weight, y_tilde))
    space.finish = _SupportFinish(space) if get_policy().path_support_finish else None
    alpha_max = float(np.max(np.abs(stats[2]))) if p else 0.0
    alphas = _lasso_grid(alphas, alpha_max, n_alphas, eps)
    n_alphas = alphas.shape[0]
    target = tol * yy / n_eff
    coefs = np.zeros((p, n_alphas), dtype=design.dtype, order="F")
    train_mse, gaps, df = np.empty(n_alphas), np.empty(n_alphas), np.empty(n_alphas)
    n_iters = np.zeros(n_alphas, dtype=np.int64)
    loo = np.empty(n_alphas) if loo_of is not None else None
    support_df = SupportDF(design, X, space.gram)
    coef = np.zeros(p, dtype=design.dtype)
    alpha_prev = max(alpha_max, alphas[0])
    stop = _NoChange(n_alphas_no_change)
    not_converged = []
    n_solved = n_alphas
    for i, alpha in enumerate(alphas):
        # the warm start may already be optimal (always at alpha >= alpha_max)
        rr = stats[0]
        l1_norm = float(np.abs(coef).sum(dtype=np.float64))
        gap = _duality_gap(*stats, l1_norm, alpha, n_eff)
        # scikit-learn's gap, but also relative to the objective: at small
        # penalties tol * ||y~||^2 / n_eff can exceed the objective itself
        # (a large y: the warm start from the previous alpha would pass)
        goal = min(target, max(PATH_OBJECTIVE_TOL * tol * (rr / n_eff + 2.0 * alpha * l1_norm),
                               COVARIANCE_PATH_MIN_TOL * yy / n_eff))
        coef, stats, gap, steps, work = _solve_alpha(space, coef, stats, gap, alpha, alpha_prev,
                                                     goal, step_size, max_iter)
        if gap > goal:
            not_converged.append((alpha, gap, goal))
        coefs[:, i] = coef
        train_mse[i] = stats[0] / n_eff
        gaps[i] = gap
        n_iters[i] = steps
        df[i] = support_df(coef) + df_offset
        alpha_prev = alpha
        if verbose > 1:
            print(f"[risk_alpha_path] alpha {alpha:.4g}: working set {work.size}, "
                  f"{steps} steps, gap {gap:.3e} (target {target:.3e})")
        if loo is not None:
            loo[i] = loo_of(coef, alpha)
        # the criterion watched: the leave-one-out error when computed
        if stop(loo[i] if loo is not None else converged_risk(train_mse[i], df[i], n_eff)):
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
