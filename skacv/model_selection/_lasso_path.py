"""The Lasso's path of converged fits along a decreasing grid of penalties.

:func:`lasso_path` solves ``min_b ||y~ - X~ b||^2 / (2 n_eff) + alpha ||b||_1``
alpha after alpha, warm-started, on a working set (a relaxed sequential
strong rule, Tibshirani et al. 2012, plus the previous support, grown by
the violators of the optimality conditions) until the duality gap of the
*full* problem is below the tolerance: the working set changes the cost,
not the solution. A working set is solved by FISTA
(:func:`skacv.iterations._path.run_trajectory`), in a rank-one metric
where one direction dominates (:mod:`skacv.iterations._metric`), with an
exact finish on an identified support (:class:`_SupportFinish`); or, dense
float64 on the columns of ``X~`` or on ``C = X~^T X~``, by scikit-learn's
coordinate descent (:mod:`skacv.model_selection._lasso_descent`); where
that misses the gap on ``C`` (ill-conditioned), it solves on from the exact
finish on its support. A small ``p > n`` design takes each alpha's
candidate from the exact homotopy path first
(:func:`~skacv.model_selection._lasso_descent._lars_candidates`), the
working sets solving on only where it misses the gap. Its products are those of
:mod:`skacv.model_selection._lasso_spaces`; each solution's df and risk
come from :mod:`skacv.model_selection._converged_risk`.

The elastic net (``l1_ratio < 1``) is the Lasso of the augmented data
``[X~; sqrt(n_eff l2) I]``, ``[y~; 0]`` (``l2 = alpha (1 - l1_ratio)``) at
the l1 strength ``alpha l1_ratio``, its rows never formed: the augmented
residual's statistics by :func:`_with_ridge`, the ridge part in FISTA's
step, step bound, metric and finish. ``alpha_max`` is the Lasso's divided
by ``l1_ratio``, as scikit-learn's ``ElasticNetCV`` grid.
"""

import warnings

import numpy as np
from scipy.sparse.linalg import LinearOperator
from sklearn.utils import Bunch

from .._trace import taken
from ..exceptions import ConvergenceWarning, DivergenceError
from ..iterations._iterations import FISTA
from ..iterations._metric import MetricFISTA
from ..iterations._path import init_state, run_trajectory
from ..iterations._penalties import L1, ElasticNet, duality_gap
from ..linalg._design import Design
from ..utils._compat import conjugate_gradient
from ..utils._validation import user_stacklevel
from ._converged_risk import RidgeSupportDF, SupportDF, converged_risk, duplicate_labels
from ._lasso_descent import (
    _columns_coordinate_descent,
    _columns_descent,
    _coordinate_descent,
    _descent_possible,
    _lars_candidates,
    _with_ridge,
)
from ._lasso_spaces import _FeatureSpace, _SampleSpace, covariance_path_pays


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
    gradients from the iterate (they remove in one iteration the outlier
    eigenvalue of equicorrelated columns that sets FISTA's step). A
    solution that flips signs is cut at the segment's first crossing (the
    restricted objective is convex: below the iterate's there), the
    crossing columns leave ``S`` and the system is solved again. The caller
    keeps the point if it lowers the objective; the duality gap certifies
    it. A pattern is tried once, and not when ``S`` is empty or the whole
    working set, too large (the speed policy's ``path_finish_max_ratio``),
    FISTA near its target, or the finishes wasted too much
    (``path_finish_share``). Conjugate gradients stop where the duality gap
    of the residual ``rho = X~_S^T r - n_eff alpha s``, about ``2 ||b||_1
    ||rho||_inf / n_eff``, is a quarter of the target.
    """

    def __init__(self, space):
        self.space = space
        # finishes tried, kept, and columns dropped at sign crossings (the tests read them)
        self.n_tried = self.n_accepted = self.n_flips = 0

    def start(self, sub, work, alpha, target):
        """A new working set's solve."""
        self.sub, self.work, self.alpha, self.target = sub, work, alpha, target
        self.previous, self.tried = None, set()
        # FISTA steps, and the products of the finishes that did not end the solve
        self.fista_steps = self.wasted = 0

    def __call__(self, x, l1, fista_left):
        """``(x_new, n_products)``: the finish's point (``None`` if not
        tried) and the conjugate-gradient iterations spent; ``l1``: the l1
        norm of FISTA's iterate ``x``, ``fista_left``: the steps FISTA would
        still take (skipped below ``2 * path_check_every``, else at most that
        many products)."""
        policy = self.space.design.policy
        signs = np.sign(x).astype(np.int8)
        key = signs.tobytes()
        stable, self.previous = key == self.previous, key
        S = np.flatnonzero(signs)
        if (not stable or key in self.tried or S.size in (0, x.size)
                or S.size > policy.path_finish_max_ratio * self.space.design.n_samples
                or fista_left < 2 * policy.path_check_every
                or self.wasted > policy.path_finish_share * self.fista_steps):
            return None, 0
        self.tried.add(key)
        self.n_tried += 1
        b, n_products = self._active_set(S, signs[S].astype(np.float64),
                                         np.asarray(x[S], dtype=np.float64), l1,
                                         int(min(fista_left, policy.path_finish_maxiter)))
        out = np.zeros_like(x)
        out[S] = b
        return out, n_products

    def at_once(self, coef, alpha, target):
        """The finish of the support and signs of ``coef`` (all features) at
        once, without FISTA's checks (a coordinate descent that missed the
        gap ``target``, after ``max_iter`` epochs that cost more than the
        finish's ``path_finish_maxiter`` products): the point, zero off the
        support."""
        S = np.flatnonzero(coef)
        out = np.zeros_like(coef)
        if S.size:
            self.start(self.space.sub(S), S, alpha, target)
            b = np.asarray(coef[S], dtype=np.float64)
            out[S], _ = self._active_set(np.arange(S.size), np.sign(b), b, float(np.abs(b).sum()),
                                         self.space.design.policy.path_finish_maxiter)
        return out

    def _solve(self, A, b, x0, atol, maxiter):
        """``(x, iterations)``: conjugate gradients on ``A x = b`` from ``x0``
        (a method: the tests' doubles give wrong solves). On a singular
        support system (exactly collinear columns, as a log ratio beside its
        two logs) CG can break down (``p^T A p = 0``) and return a
        non-finite ``x``, which :meth:`_active_set` discards: NumPy's
        division warning is not the user's."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return conjugate_gradient(A, b, x0, 0.0, atol, maxiter)

    def _active_set(self, S, s, b, l1, maxiter):
        """Conjugate gradients on the columns ``S`` (signs ``s``) from
        ``b``, dropping the columns whose sign crosses (zero in the
        result); each solve after a crossing starts from the previous one."""
        n_eff = self.space.design.n_eff
        normal, c = self.space.support_system(self.sub, self.work, S)
        l2 = n_eff * self.space.l2
        if l2:  # the elastic net: X~_S^T X~_S + n_eff l2 I
            plain = normal

            def normal(v):
                return plain(v) + l2 * v

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

            new, k = self._solve(LinearOperator((m, m), matvec=op, dtype=np.float64),
                                 rhs[keep], start[keep], atol, maxiter - n_products - 1)
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


def _steps_left(gap_prev, gap, target, check_every):
    """The FISTA steps to the gap ``target`` at the pace of the last check
    (from ``gap_prev`` to ``gap``, ``check_every`` steps before, linear
    convergence); ``inf`` if the gap did not decrease."""
    if not gap < gap_prev < np.inf:
        return np.inf
    return check_every * np.log(gap / target) / np.log(gap_prev / gap)


def _objective_gap(space, sub, work, x, fitted, alpha):
    """``(objective, duality gap, l1 norm)`` of ``x`` on the working set."""
    rr, ry, corr = _with_ridge(space.stats(sub, work, x, fitted), x, space.l2, sub.n_eff)
    l1 = float(np.abs(x).sum(dtype=np.float64))
    return rr / (2 * sub.n_eff) + alpha * l1, duality_gap(rr, ry, corr, l1, alpha,
                                                           sub.n_eff), l1


class _MetricStalled(Exception):
    """The rank-one metric's solve stopped decreasing the objective (its
    estimate of the spectrum missed): carries the last iterate and the
    steps taken."""

    def __init__(self, x, steps):
        super().__init__()
        self.x, self.steps = x, steps


def _solve_working_set(space, sub, work, alpha, coef, step_size, target, budget, metric=None):
    """FISTA on the columns ``work`` (``sub``, in ``space``) until its duality
    gap is ``<= target``, with the exact finish ``space.finish``. With a
    ``metric``, :class:`~skacv.iterations._metric.MetricFISTA` (``step_size``
    unused), which raises :class:`_MetricStalled` after the speed policy's
    ``path_metric_max_restarts`` objective increases. Returns the solution,
    its fitted values in ``space`` and the steps (conjugate-gradient
    iterations included). The momentum restarts (a state at ``k = 0``) when
    the objective increases between two checks (function restart,
    O'Donoghue & Candes 2015) and after an accepted finish.
    """
    l2 = space.l2
    if metric is None:
        iteration = FISTA(step_size, penalty=ElasticNet(alpha, l2) if l2 else L1(alpha))
    else:
        iteration = MetricFISTA(metric, alpha, l2=l2)
        taken("metric_fista", l2=l2)
    y = space.target(work)
    state = init_state(sub, coef)
    scratch = _zero_stride(sub.n_features, budget + 1, sub.dtype)  # state.k <= done <= budget
    finish = space.finish
    if finish is not None:
        finish.start(sub, work, alpha, target)
    done = increases = 0
    obj_prev = gap_prev = np.inf
    policy = space.design.policy
    while done < budget:
        k = min(policy.path_check_every, budget - done)
        run_trajectory(sub, y, iteration, k, state, scratch, datafit=space.datafit, fuse=True)
        done += k
        if finish is not None:
            finish.fista_steps += k
        obj, gap, l1 = _objective_gap(space, sub, work, state.x, state.Xx, alpha)
        if gap <= target:
            break
        restart = obj > obj_prev
        if restart and metric is not None:
            increases += 1
            if increases >= policy.path_metric_max_restarts:
                raise _MetricStalled(state.x, done)
        if finish is not None:
            x, n_iter = finish(state.x, l1,
                               min(_steps_left(gap_prev, gap, target, policy.path_check_every),
                                   budget - done))
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
    """:func:`_solve_working_set` with the estimator's ``step_size``: a
    float as given; ``"auto"``, the rank-one metric where one direction
    dominates (``space.metric``), else ``1 / L`` of ``space.step_bound``
    and, should the steps diverge, of the exact top eigenvalue. A metric
    whose solve diverges or stalls hands its last iterate to the plain step."""
    if not isinstance(step_size, str):
        return _solve_working_set(space, sub, work, alpha, coef_w, float(step_size), goal,
                                  budget)
    L = space.step_bound(sub, work) * space.design.policy.path_step_margin + space.l2
    metric = space.metric(sub, work) if space.design.policy.path_metric else None
    spent = 0
    if metric is not None:
        try:
            return _solve_working_set(space, sub, work, alpha, coef_w, None, goal, budget,
                                      metric=metric)
        except _MetricStalled as stalled:
            taken("metric_fallback", reason="_MetricStalled")
            space.forget_metric()
            coef_w, spent = stalled.x, stalled.steps
        except DivergenceError:
            taken("metric_fallback", reason="DivergenceError")
            space.forget_metric()
    try:
        x, fitted, done = _solve_working_set(space, sub, work, alpha, coef_w,
                                             1.0 / L if L > 0 else 1.0, goal, budget - spent)
    except DivergenceError:  # the Lanczos estimate was too low
        taken("step_fallback")
        x, fitted, done = _solve_working_set(space, sub, work, alpha, coef_w,
                                             1.0 / (sub.lipschitz() + space.l2), goal,
                                             budget - spent)
    return x, fitted, done + spent


def _solve_alpha(space, coef, stats, gap, alpha, alpha_prev, goal, step_size, max_iter):
    """``(coef, stats, gap, steps, work)``: the Lasso at ``alpha`` solved
    from the warm start ``coef`` (of duality gap ``gap``, residual
    statistics ``stats = (||r||^2, r^T y~, X~^T r / n_eff)``) until the gap
    of the full problem is at most ``goal``, in ``steps`` (FISTA's or
    coordinate descent's), ``work`` the last working set. The working set
    is the previous support and the columns passing the relaxed sequential
    strong rule (the speed policy's ``path_strong_rule_slack``, or
    ``path_descent_rule_slack`` after coordinate descent; at most
    ``max(path_work_min, 4 |support|)``, the largest correlations first),
    grown by the violators of the optimality conditions (at most as many
    as it holds, the largest first) until there are none or ``max_iter``
    steps are spent. In the covariance form coordinate descent on ``C``
    solves; where it misses the gap in ``max_iter`` epochs (an
    ill-conditioned ``C`` at a small alpha), again from the exact finish on
    its support (:meth:`_SupportFinish.at_once`), and should that miss too,
    the working sets from its point, within ``max_iter`` steps of their own.
    """
    descent_steps = 0
    if space.coordinate_descent:
        coef, stats, gap, descent_steps, work = _coordinate_descent(space, coef, alpha, goal,
                                                                   max_iter)
        if gap > goal:
            taken("descent_missed", gap=gap, goal=goal)
        if gap > goal and space.finish is not None:
            first = coef, stats, gap, work
            coef, stats, gap, k, work = _coordinate_descent(
                space, space.finish.at_once(coef, alpha, goal), alpha, goal, max_iter)
            descent_steps += k
            if gap > first[2]:  # the finish dropped columns at a sign crossing
                coef, stats, gap, work = first
        if gap <= goal:
            return coef, stats, gap, descent_steps, work
    design = space.design
    p, n_eff = design.n_features, design.n_eff
    rr, ry, corr = stats
    steps = 0
    work = np.flatnonzero(coef)
    policy = design.policy
    if gap > goal:
        # wider after coordinate descent: a violators' round restarts it far from its gap
        slack = policy.path_strong_rule_slack
        if space.last_descent:
            taken("descent_rule", slack=policy.path_descent_rule_slack)
            slack = policy.path_descent_rule_slack
        thresh = alpha - slack * (alpha_prev - alpha)
        work = np.flatnonzero((np.abs(corr) >= thresh) | (coef != 0))
        work = _largest(work, corr, coef != 0,
                        max(policy.path_work_min, 4 * np.count_nonzero(coef)))
    while gap > goal and steps < max_iter:
        sub = None  # the previous working set's columns go before a larger buffer comes
        # Fortran order where coordinate descent may solve them and solved the last set
        fortran = (_descent_possible(space, step_size) and space.last_descent
                   and design.policy.path_fortran_columns)
        sub = space.sub(work, fortran=fortran)
        space.last_descent = _columns_descent(space, sub, work, step_size)
        if space.last_descent:
            coef_w, fitted, k = _columns_coordinate_descent(space, sub, alpha, coef[work], goal,
                                                            max_iter - steps)
        else:
            if fortran:  # FISTA's products read a C-ordered copy
                sub = None
                sub = space.sub(work)
            coef_w, fitted, k = _fista_with_step(space, sub, work, alpha, coef[work], step_size,
                                                 goal, max_iter - steps)
        steps += k
        coef = np.zeros(p, dtype=design.dtype)
        coef[work] = coef_w
        rr, ry, corr = space.stats(sub, work, coef_w, fitted, full=True)
        gap = duality_gap(*_with_ridge((rr, ry, corr), coef, space.l2, n_eff),
                          float(np.abs(coef).sum(dtype=np.float64)), alpha, n_eff)
        outside = np.ones(p, dtype=bool)
        outside[work] = False
        violators = np.flatnonzero(outside & (np.abs(corr) > alpha))
        if violators.size == 0:
            break
        work = np.union1d(work, _largest(violators, corr, None,
                                         max(policy.path_work_min, work.size)))
    return coef, (rr, ry, corr), gap, descent_steps + steps, work


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


def _alpha_max(c, n_eff, l1_ratio):
    """The smallest penalty whose solution is zero, from ``c = X~^T y~``."""
    return float(np.max(np.abs(c))) / n_eff / l1_ratio if c.size else 0.0


def lasso_grid(design, y_tilde, n_alphas, eps, l1_ratio=1.0):
    """:func:`lasso_path`'s automatic grid (``alphas=None``), the same
    values, before the path is solved."""
    c = np.asarray(design.rmatvec(y_tilde), dtype=np.float64)
    return _lasso_grid(None, _alpha_max(c, design.n_eff, l1_ratio), n_alphas, eps)


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
    minimum for ``patience`` consecutive values (``None``: never) and the
    fit's degrees of freedom have reached ``df_end`` (the statistical
    policy's ``path_walk_df`` times ``n_eff``): converged scores need not
    be unimodal in ``alpha`` (a bump, then a deeper minimum at a smaller
    penalty), so the walk goes on below it; above it the estimate
    amplifies its residuals by ``(1 - df / n_eff)^-2 >= 4`` and, on ``p > n``
    designs, scatters far from the truth (spurious minima)."""

    def __init__(self, patience, df_end):
        self.patience, self.df_end = patience, df_end
        self.best, self.since_best = np.inf, 0

    def __call__(self, value, df):
        if self.patience is None:
            return False
        if value < self.best:
            self.best, self.since_best = value, 0
            return False
        self.since_best += 1
        return self.since_best >= self.patience and df >= self.df_end


def lasso_path(design, y_tilde, X, sample_weight, alphas, n_alphas, eps, step_size, tol,
               max_iter, n_alphas_no_change, df_offset, verbose, loo_of=None, l1_ratio=1.0,
               precision_of=None):
    """The Lasso's converged fits along ``alphas``: a Bunch of ``alphas``,
    ``coefs`` (n_features, n_alphas), ``df``, ``train_mse``, ``n_iter``,
    ``gaps`` and, with ``loo_of(coef, alpha)``, ``loo``, over the solved
    alphas. The parameters are :func:`skacv.risk_alpha_path`'s
    (``df_offset``: one with an intercept; ``l1_ratio < 1``: the elastic
    net, ``alphas`` in scikit-learn's ``ElasticNet`` units;
    ``precision_of(coef, i)``: the mean squared error the solution of
    ``alphas[i]`` is solved relative to, ``tol`` times its value at the
    warm start ``coef``, instead
    of ``path_objective_tol * tol`` times the training residuals' and the
    violators' cut (held-out rows:
    :func:`~skacv.model_selection._alpha_path.alpha_path_fits`))."""
    if l1_ratio == 1.0 and design.statistics.path_drop_duplicates:
        labels = duplicate_labels(design)
        keep = np.flatnonzero(labels == np.arange(labels.size))
        if keep.size < labels.size:
            return _without_duplicates(keep, design, y_tilde, X, sample_weight, alphas, n_alphas,
                                       eps, step_size, tol, max_iter, n_alphas_no_change,
                                       df_offset, verbose, loo_of, precision_of=precision_of)
    n_eff = design.n_eff
    p = design.n_features
    # ||r||^2, r^T y~ and X~^T r / n_eff at coef = 0
    yy = float(np.dot(np.asarray(y_tilde, dtype=np.float64), y_tilde))
    c = np.asarray(design.rmatvec(y_tilde), dtype=np.float64)
    stats = (yy, yy, c / n_eff)
    space = (_FeatureSpace(design, c, yy)
             if covariance_path_pays(design, tol, n_alphas if alphas is None else alphas.shape[0])
             else _SampleSpace(design, X, sample_weight, y_tilde))
    policy, statistics = design.policies
    space.finish = _SupportFinish(space) if policy.path_support_finish else None
    space.last_descent = None  # whether the last working set was solved by coordinate descent
    taken("lasso_path", space=type(space).__name__, finish=space.finish)
    space.coordinate_descent = (getattr(space, "gram_form", False)
                                and policy.path_coordinate_descent)
    space.l2 = 0.0
    alpha_max = _alpha_max(c, n_eff, l1_ratio)
    alphas = _lasso_grid(alphas, alpha_max, n_alphas, eps)
    n_alphas = alphas.shape[0]
    target = tol * yy / n_eff
    coefs = np.zeros((p, n_alphas), dtype=design.dtype, order="F")
    train_mse, gaps, df = np.empty(n_alphas), np.empty(n_alphas), np.empty(n_alphas)
    n_iters = np.zeros(n_alphas, dtype=np.int64)
    loo = np.empty(n_alphas) if loo_of is not None else None
    support_df = (SupportDF(design, X, space.gram) if l1_ratio == 1.0
                  else RidgeSupportDF(design, space.gram))
    coef = np.zeros(p, dtype=design.dtype)
    alpha_prev = max(alpha_max, alphas[0]) * l1_ratio  # (l1 strengths)
    stop = _NoChange(n_alphas_no_change, statistics.path_walk_df * n_eff)
    lars = _lars_candidates(space, alphas, step_size) if l1_ratio == 1.0 else None
    not_converged = []
    n_solved = n_alphas
    for i, alpha_i in enumerate(alphas):
        # the l1 strength and the ridge part (the elastic net)
        alpha, space.l2 = alpha_i * l1_ratio, alpha_i * (1.0 - l1_ratio)
        rr = _with_ridge(stats, coef, space.l2, n_eff)[0]
        l1_norm = float(np.abs(coef).sum(dtype=np.float64))
        gap = duality_gap(*_with_ridge(stats, coef, space.l2, n_eff), l1_norm, alpha, n_eff)
        # also relative to the data-fit term, which tol * ||y~||^2 / n_eff can
        # exceed (the risk estimates read ||r||^2: ||X~ (b - b*)||^2 <= 2 n_eff gap),
        # or to the held-out error where that is what is read
        if precision_of is None:
            relative = statistics.path_objective_tol * tol * rr / n_eff
        else:
            relative = tol * precision_of(coef, i)
        goal = min(target, max(relative, policy.covariance_path_min_tol * yy / n_eff))
        # violators outside the warm start's support: it is wrong, whatever its
        # gap. A correlation within rounding of alpha is none: at a grid's first
        # alpha computed as alpha_max by the caller, one unit above ours, the cut
        # would ask for a gap of 0, out of reach (max_iter steps and a warning);
        # a unit of the design's dtype, in which its correlations are computed
        kink = alpha * (1.0 + statistics.path_zero_ulps * np.finfo(design.dtype).eps)
        if precision_of is None and np.any((coef == 0) & (np.abs(stats[2]) > kink)):
            goal = min(goal, statistics.kkt_gap_cut * gap)
        if lars is not None:  # the homotopy path's solution, solved on if it misses
            coef, stats, gap = _lars_start(space, lars[:, i], coef, stats, gap, alpha, alpha_i)
        coef, stats, gap, steps, work = _solve_alpha(space, coef, stats, gap, alpha, alpha_prev,
                                                     goal, step_size, max_iter)
        _zero_rounding(coef, statistics)
        if gap > goal:
            not_converged.append((alpha_i, gap, goal))
        coefs[:, i] = coef
        train_mse[i] = stats[0] / n_eff
        gaps[i] = gap
        n_iters[i] = steps
        df[i] = (support_df(coef) if l1_ratio == 1.0 else support_df(coef, space.l2)) + df_offset
        alpha_prev = alpha
        if verbose > 1:
            print(f"[risk_alpha_path] alpha {alpha_i:.4g}: working set {work.size}, "
                  f"{steps} steps, gap {gap:.3e} (target {target:.3e})")
        if loo is not None:
            loo[i] = loo_of(coef, alpha_i)
        if stop(loo[i] if loo is not None
                else converged_risk(train_mse[i], df[i], n_eff, statistics), df[i]):
            n_solved = i + 1
            break
    if not_converged:
        a, g, goal = not_converged[0]
        warnings.warn(
            f"The Lasso path (coordinate descent or FISTA on working sets) did not reach "
            f"the duality-gap tolerance within max_iter={max_iter} steps for "
            f"{len(not_converged)} of {n_solved} alphas (e.g. alpha={a:.4g}: "
            f"gap {g:.3e} > {goal:.3e}). Increase max_iter or tol; small alphas with "
            "p > n or nearly collinear columns are the slowest.",
            ConvergenceWarning,
            stacklevel=user_stacklevel(),
        )
    # (the finish refers back to the space: a cycle that would hold the
    # design, its centred copy and caches, to the next garbage collection)
    space.finish = None
    m = n_solved
    out = Bunch(alphas=alphas[:m], coefs=coefs[:, :m], df=df[:m], train_mse=train_mse[:m],
                n_iter=n_iters[:m], gaps=gaps[:m])
    if loo is not None:
        out.loo = loo[:m]
    return out


def _lars_start(space, candidate, coef, stats, gap, alpha, alpha_i):
    """``(coef, stats, gap)``: the start of an alpha's solve, the homotopy
    path's ``candidate`` unless its duality gap exceeds the warm start's
    (``coef``, ``stats``, ``gap``). ``lars_path`` may return a degenerate
    path without raising (columns that enter and leave at one kink, as
    duplicated columns do: coefficients of ``1e15`` that cancel, depending
    on the BLAS's rounding), from which no solver comes back within
    ``max_iter``."""
    design = space.design
    candidate = candidate.astype(design.dtype)
    fitted = np.asarray(design.matvec(candidate), dtype=np.float64)
    c_stats = space.stats(None, None, candidate, fitted, full=True)
    c_gap = duality_gap(*c_stats, float(np.abs(candidate).sum(dtype=np.float64)), alpha,
                        design.n_eff)
    if c_gap <= gap:
        return candidate, c_stats, c_gap
    taken("lars_candidate_dropped", alpha=float(alpha_i), gap=float(c_gap),
          warm_gap=float(gap))
    return coef, stats, gap


def _zero_rounding(coef, statistics):
    """Set to zero, in place, the coefficients of ``coef`` within the
    statistical policy's ``path_zero_ulps`` rounding units of its largest: at
    an alpha within rounding of a kink the homotopy's interpolation leaves
    the coordinate joining there at about ``1e-18`` of the others, and the
    df (the support's rank), hence the risk estimate, would count it on one
    machine's rounding and not on another's."""
    if coef.size:
        cut = statistics.path_zero_ulps * np.finfo(coef.dtype).eps * np.abs(coef).max()
        coef[np.abs(coef) <= cut] = 0


def _without_duplicates(keep, design, y_tilde, X, sample_weight, alphas, *args,
                        precision_of=None):
    """:func:`lasso_path` on the columns ``keep`` of ``X~`` (the others equal
    to one of them or to its negative:
    :func:`~skacv.model_selection._converged_risk.duplicate_labels`),
    each solution's coefficients put back in place (zero on the dropped
    columns). The same Lasso solutions: where columns coincide up to sign
    the l1 norm is smallest with the whole coefficient on one of them (a
    solution of the full problem: the same fitted values, residuals and
    duality gap; its support's rank, the df, is the whole group's), and the
    reduced problem has no ties for its solvers (coordinate descent and
    FISTA converge slowly on duplicated columns, scikit-learn's
    ``lars_path`` may fail on them)."""
    taken("duplicate_columns", kept=keep.size, n_features=design.n_features)
    X_sub = X[:, keep]
    sub = (Design(X_sub, sample_weight, design.fit_intercept, policies=design.policies)
           if design.sparse else
           Design.centred(design.X[:, keep], design.x_offset[keep], design.weight,
                          design.fit_intercept, design.policies))
    *head, loo_of = args
    p = design.n_features
    sub_loo = (None if loo_of is None
               else (lambda coef, alpha: loo_of(_put_back(coef, keep, p), alpha)))
    sub_precision = (None if precision_of is None
                     else (lambda coef, i: precision_of(_put_back(coef, keep, p), i)))
    res = lasso_path(sub, y_tilde, X_sub, sample_weight, alphas, *head, sub_loo,
                     precision_of=sub_precision)
    res.coefs = _put_back(res.coefs, keep, p)
    return res


def _put_back(coef, keep, p):
    """The coefficients ``coef`` of the columns ``keep`` (a vector, or a
    column per alpha) in place among ``p``, zeros elsewhere."""
    full = np.zeros((p, *coef.shape[1:]), dtype=coef.dtype, order="F")
    full[keep] = coef
    return full
