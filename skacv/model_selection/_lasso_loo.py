"""Exact leave-one-out of a Lasso or an elastic-net solution.

Leaving sample ``i`` out (one unit of its frequency weight, ``rho_i``; the
left-out fit re-centred) changes the sum-form objective to

    F_{-i}(b) = b^T G_{-i} b / 2 - c_{-i}^T b + l1_i ||b||_1 + l2_i ||b||^2 / 2,
    G_{-i} = G - k_i u_i u_i^T,   c_{-i} = c - k_i u_i t_i,

``G = U^T diag(w) U``, ``c = U^T (w t)`` on the rows ``u_i`` of ``X`` centred
at the fit's offsets and the target ``t = y - y_offset``, ``k_i = rho_i W /
(W - rho_i)`` with an intercept (``rho_i`` without), ``l1_i``, ``l2_i`` the
left-out penalty in sum form (``W - rho_i`` times its mean form); the
left-out residual is ``(1 + rho_i / (W - rho_i)) (t_i - u_i^T b_{-i})`` with
an intercept, ``t_i - u_i^T b_{-i}`` without (the target of
:mod:`skacv.estimates.loo._iacv`, whose ``loo_path_`` tends to it).

Where removing ``i`` keeps the support ``S`` and the signs ``sigma`` of the
solution, ``b_{-i}`` solves ``(G_{-i} + l2_i I)_SS b = c_{-i,S} - l1_i
sigma``: a rank-one update of one factorisation (the leverage formula on
the support, Rad & Maleki 2020; Stephenson & Broderick 2020). This
candidate is kept where it passes the left-out optimality conditions
(signs kept, ``|grad_j F_{-i}| <= l1_i`` off the support: one product
``G_{:,S} B`` for all samples). A sample whose removal moves the support
(most of them on ``p > n`` designs) guesses again: its candidate's set less
the columns whose sign flipped, plus its most violating column (a
feature-sign step), the samples of one guess sharing its factorisation,
for up to the speed policy's ``loo_batch_rounds`` rounds
(:func:`exact_lasso_loo`). The samples left are solved one by one by
feature-sign steps from their first candidate (:func:`_solve_left_out`), on
the columns ``G[:, j]`` computed once for all samples (by coordinate
descent where the active set's Hessian is singular or ill-conditioned, on
which the feature-sign steps cycle: :func:`_descend_left_out`; from the
left-out Lasso's exact path where its active set outgrows its rows:
:class:`LeftOutPaths`). Cost:
``O(n p s)`` a round for the candidates and their check, and a few ``O(p
|A|)`` steps per sample solved alone; measured in ``docs/benchmarks.rst``.
"""

import warnings

import numpy as np
import scipy.sparse as sp
from scipy import linalg
from sklearn.linear_model import lars_path

from .._config import check_memory, working_memory_bytes
from .._trace import taken
from ..estimates.loo._track import removed_weights
from ._lasso_descent import (
    degenerate_homotopy,
    gram_coordinate_descent,
    gram_gap,
    gram_homotopy,
    lars_solutions,
)


class _LeftOut:
    """The full fit's quantities that the left-out problems share."""

    def __init__(self, design, X, target, penalty):
        self.X, self.t = X, np.asarray(target, dtype=np.float64)
        self.m = np.asarray(design.x_offset, dtype=np.float64)
        self.intercept = bool(design.fit_intercept)
        self.w, self.rho, W_minus = removed_weights(design)
        self.W_minus = W_minus
        W = float(design.n_eff)
        self.k = self.rho * W / W_minus if self.intercept else self.rho.copy()
        self.scale = 1.0 + self.rho / W_minus if self.intercept else np.ones_like(self.rho)
        self.l1 = W_minus * np.asarray(penalty.l1_at(W_minus), dtype=np.float64)
        self.l2 = W_minus * np.asarray(penalty.l2_at(W_minus), dtype=np.float64)
        self.l1, self.l2 = np.broadcast_to(self.l1, self.w.shape), np.broadcast_to(
            self.l2, self.w.shape)
        self.c = self.corr((self.w * self.t)[:, None])[:, 0]
        self.tt = float(self.w @ self.t ** 2)  # ||t||^2, weighted
        # the rank of the left-out rows (centred: one less)
        self.rank = (np.count_nonzero(self.w) - (self.rho == self.w).astype(np.intp)
                     - int(self.intercept))
        self.stats = design.statistics

    def cols(self, idx):
        """``U[:, idx]`` (float64, dense)."""
        A = self.X[:, idx]
        A = A.toarray() if sp.issparse(A) else np.asarray(A)
        return A.astype(np.float64) - self.m[idx]

    def rows(self, idx):
        """``U[idx]`` (float64, dense)."""
        A = self.X[idx]
        A = A.toarray() if sp.issparse(A) else np.asarray(A)
        return A.astype(np.float64) - self.m

    def corr(self, Z):
        """``U^T Z`` for ``Z`` of shape (n_samples, k)."""
        out = np.asarray(self.X.T @ Z, dtype=np.float64)
        return out - np.outer(self.m, Z.sum(axis=0)) if self.intercept else out

    def start_gram(self, S, GS):
        """The columns ``G[:, S]`` known (more are computed on demand)."""
        self.pos = np.full(self.c.shape[0], -1, dtype=np.intp)
        self.pos[S] = np.arange(S.size)
        self.gram = np.asfortranarray(GS)  # (a column of G a column: gathered whole)
        self.known = S.size

    def gram_columns(self, idx):
        """``G[:, idx]`` (the columns computed once for every left-out problem,
        in a buffer that doubles as it fills)."""
        new = idx[self.pos[idx] < 0]
        if new.size:
            p, size = self.c.shape[0], self.known + new.size
            if size > self.gram.shape[1]:
                room = min(max(size, 2 * self.gram.shape[1]), p)
                check_memory(8 * p * room,
                             f"the Gram columns of the left-out problems ({p} x {room})")
                buf = np.empty((p, room), order="F")
                buf[:, :self.known] = self.gram[:, :self.known]
                self.gram = buf
            self.gram[:, self.known:size] = self.corr(self.w[:, None] * self.cols(new))
            self.pos[new] = self.known + np.arange(new.size)
            self.known = size
        return self.gram.T[self.pos[idx]].T


def exact_lasso_loo(design, X, target, coef, penalty, paths=None):
    """Left-out residuals (shape (n_samples,), unweighted; ``scale`` applied)
    of the solution ``coef`` of an l1 (elastic-net) penalised least-squares
    fit: exact leave-one-out (module docstring). ``design``: the fit's
    design; ``target``: ``y - y_offset``; ``penalty``: the fit's penalty.

    The samples whose removal moves the support go through rounds of
    batched guesses (:func:`_guess_round`) before any is solved alone: a
    sample's next active set is its last candidate's, less the columns
    whose sign it flipped, plus its most violating column (one
    feature-sign step); the samples that guess the same set and signs
    share one factorisation, and a candidate that passes the left-out
    optimality conditions is the left-out solution. The speed policy's
    ``loo_batch_rounds`` bounds the rounds; the rest are solved one by one
    (:func:`_solve_left_out`) from their first candidate."""
    lo = _LeftOut(design, X, target, penalty)
    lo.paths = LeftOutPaths() if paths is None else paths
    coef = np.asarray(coef, dtype=np.float64)
    S = np.flatnonzero(coef)
    sigma = np.sign(coef[S])
    US = lo.cols(S)
    lo.start_gram(S, lo.corr(lo.w[:, None] * US))  # G[:, S]
    n = lo.t.shape[0]
    res = lo.t - US @ coef[S]  # a row of zero weight keeps the full fit
    starts = {}  # sample -> (columns, values): its first candidate, on its kept signs
    alone = []  # the samples solved one by one
    policy = design.policies[0]
    p = X.shape[1]
    aspect = policy.loo_homotopy_min_aspect
    # where the samples left take their left-out paths (p >= n), the rounds
    # of guesses cost more than they save: the full fit's candidate only
    homotopy = aspect is not None and p >= aspect * n and not np.any(lo.l2)
    guesses, moved, rounds = _rounds(lo, [(S, sigma, np.flatnonzero(lo.rho > 0))], res, starts,
                                     alone, 1 + (0 if homotopy else policy.loo_batch_rounds),
                                     policy.loo_batch_settle)
    left = {int(i): (E, theta) for E, theta, idx in guesses for i in idx}
    alone.extend(left)
    taken("lasso_loo", samples=n, moved=moved, refits=len(alone), rounds=rounds)
    for i in sorted(alone):
        found = _left_out_from_path(lo, i) if homotopy else None
        if found is not None:
            res[i] = found
            continue
        # from its first candidate (a round's later guesses, without the steps'
        # line search, may wander: measured slower from there where p >= n)
        E, values = starts.get(i, (S, coef[S]))
        x = np.zeros(p)
        x[E] = values
        res[i] = _solve_left_out(lo, i, x)
    # where a left-out problem stayed unsolved (inf: its descent unfinished),
    # the guesses go on (a step without the line search: another path)
    undefined = [(i, *left[i]) for i in left if not np.isfinite(res[i])]
    if undefined:
        _rounds(lo, _grouped(undefined), res, starts, [], lo.stats.loo_refit_steps, 0.0)
        taken("lasso_loo_guessed", samples=len(undefined),
              settled=int(sum(np.isfinite(res[i]) for i, _, _ in undefined)))
    return lo.scale * res


def _rounds(lo, guesses, res, starts, alone, max_rounds, settle):
    """Up to ``max_rounds`` batched rounds of ``guesses`` (``[(E, theta,
    samples)]``: :func:`_guess_round`), stopped after a round (not the
    first) that settled less than ``settle`` of its samples: ``(guesses
    left, the samples the first round did not settle, rounds run)``."""
    moved, rounds = 0, 0
    for _ in range(max_rounds):
        if not guesses:
            break
        rounds += 1
        pending, before = sum(idx.size for _, _, idx in guesses), len(alone)
        nxt = []
        for E, theta, idx in guesses:
            nxt.extend(_guess_round(lo, E, theta, idx, res, starts, alone))
        guesses = _grouped(nxt)
        if rounds == 1:
            moved = len(nxt) + len(alone) - before
        elif pending - len(nxt) - (len(alone) - before) < settle * pending:
            break  # (guesses that rarely settle: each sample's own steps cost less)
    return guesses, moved, rounds


def _guess_round(lo, E, theta, idx, res, starts, alone):
    """One batched round on the samples ``idx`` guessing the active set
    ``E`` with signs ``theta``: the candidate of each (the left-out problem
    on ``E``: one factorisation a ridge part, a rank-one update a sample,
    Sherman and Morrison), its left-out residual put in ``res`` where it
    passes the optimality conditions; the others' next guesses ``[(i, E',
    theta')]`` returned, and their first candidate on its kept signs kept
    in ``starts``.
    Samples without a candidate (a singular ``E``, leverage 1 on it, more
    columns than left-out rows) are added to ``alone``."""
    out = []
    GE = lo.gram_columns(E)  # G[:, E], one gather for every ridge part
    step = max(1, int(working_memory_bytes() // (8 * max(lo.c.shape[0], 1) * 3)))
    l2s = lo.l2[idx]
    for l2 in np.unique(l2s):
        sub = idx[l2s == l2]
        if l2 == 0:  # more columns than left-out rows: singular on E, solved alone
            over = lo.rank[sub] < E.size
            alone.extend(sub[over])
            sub = sub[~over]
        if not sub.size:
            continue
        cf = None
        if E.size:
            try:
                cf = linalg.cho_factor(GE[E] + l2 * np.eye(E.size), lower=True)
            except linalg.LinAlgError:  # collinear columns (every level of a one-hot
                # factor beside the intercept): no candidate, each sample solved
                alone.extend(sub)
                continue
            zc, zs = linalg.cho_solve(cf, np.column_stack([lo.c[E], theta])).T
        for s0 in range(0, sub.size, step):
            out.extend(_guess_chunk(lo, E, theta, sub[s0:s0 + step], GE, cf,
                                    (zc, zs) if E.size else None, res, starts, alone))
    return out


def _guess_chunk(lo, E, theta, idx, GE, cf, z, res, starts, alone):
    """:func:`_guess_round` on the samples ``idx`` (rows in working memory)."""
    Ui = lo.rows(idx)
    UE = Ui[:, E]
    k = lo.k[idx]
    if E.size:
        V = linalg.cho_solve(cf, UE.T)  # (G_EE + l2 I)^{-1} u_i[E]
        a = z[0][:, None] - lo.l1[idx] * z[1][:, None] - (k * lo.t[idx]) * V
        denom = 1.0 - k * np.einsum("ij,ji->i", UE, V)
        with np.errstate(divide="ignore", invalid="ignore"):  # (Sherman-Morrison)
            B = a + V * (k * np.einsum("ij,ji->i", UE, a) / denom)
        solvable = denom > np.finfo(np.float64).eps  # (leverage 1 on E: solved alone)
    else:
        B = np.zeros((0, idx.size))
        solvable = np.ones(idx.size, dtype=bool)
    r = lo.t[idx] - np.einsum("ij,ji->i", UE, B)  # t_i - u_i^T b_{-i}
    grad = lo.c[:, None] - GE @ B - Ui.T * (k * r)  # c_{-i} - G_{-i} b (every column)
    lim = lo.l1[idx] * (1.0 + lo.stats.loo_kkt_rtol)
    kept = theta[:, None] * B > 0
    off = np.abs(grad)
    off[E] = 0.0
    worst = np.argmax(off, axis=0)
    violated = off[worst, np.arange(idx.size)] > lim
    good = solvable & kept.all(axis=0) & ~violated
    res[idx[good]] = r[good]
    alone.extend(idx[~solvable])
    out = []
    for j in np.flatnonzero(solvable & ~good):
        i, keep = int(idx[j]), kept[:, j]
        starts.setdefault(i, (E[keep], B[keep, j]))
        cols, signs = E[keep], theta[keep]
        if violated[j]:
            w = int(worst[j])
            at = int(np.searchsorted(cols, w))
            cols = np.insert(cols, at, w)
            signs = np.insert(signs, at, np.sign(grad[w, j]))
        out.append((i, cols, signs))
    return out


def _grouped(guesses):
    """``[(E, theta, samples)]``: the guesses ``[(i, E, theta)]`` of the same
    active set and signs together."""
    groups = {}
    for i, E, theta in guesses:
        key = (E.tobytes(), theta.tobytes())
        if key not in groups:
            groups[key] = (E, theta, [])
        groups[key][2].append(i)
    return [(E, theta, np.asarray(idx, dtype=np.intp)) for E, theta, idx in groups.values()]


def _hessian(GA, A, k, ui):
    """``G_{-i}[A, A]`` without the ridge part, from ``GA = G[:, A]``: ``G_AA -
    k u_i[A] u_i[A]^T``."""
    return GA[A] - k * np.outer(ui[A], ui[A])


def _minus_gradient(c, GA, A, x, k, ui, l2):
    """``c_{-i} - (G_{-i} + l2 I) x`` for ``x`` supported on ``A`` (``GA = G[:, A]``,
    ``G_{-i}[:, A] = GA - k u_i u_i[A]^T``): minus the gradient of ``F_{-i}``'s
    smooth part."""
    return c - GA @ x[A] + (k * float(ui[A] @ x[A])) * ui - l2 * x


def _objective(H, c, l1, x):
    return 0.5 * float(x @ H @ x) - float(c @ x) + l1 * float(np.abs(x).sum())


def _left_out_from_path(lo, i, ui=None):
    """``t_i - u_i^T b_{-i}`` from the left-out Lasso's exact path
    (:class:`LeftOutPaths`), checked and finished by
    :func:`_descend_left_out`; ``None`` where the path does not reach the
    alpha (``ui``: the row ``u_i``, if the caller has it)."""
    k, ti, l1 = lo.k[i], lo.t[i], lo.l1[i]
    start = lo.paths.solution(lo, i, l1)
    if start is None:
        return None
    ui = lo.rows([i])[0] if ui is None else ui
    return _descend_left_out(lo, i, start, lo.c - k * ui * ti, k, ui, ti, l1, 0.0)


def _solve_left_out(lo, i, x):
    """``t_i - u_i^T b_{-i}`` of the minimiser ``b_{-i}`` of ``F_{-i}``, by
    the feature-sign search (Lee, Battle, Raina & Ng 2007) from ``x`` (shape
    (n_features,)): on the active set with its signs, the quadratic's
    minimiser, then the lowest objective on the segment to it among its
    sign changes; the most violating column joins where the active set is
    optimal. Exact and finite; from the full fit's candidate it takes a
    step per column that the left-out sample moves. Where the Lasso's
    active set outgrows the left-out rows (the full fit nearly
    interpolates: the Hessian is singular there), and at every smaller
    alpha after, the left-out Lasso's exact path (:class:`LeftOutPaths`)
    gives the start that :func:`_descend_left_out` checks. An
    active set whose Hessian is singular or ill-conditioned (near-duplicate
    columns), where the steps cycle, or one unfinished after the
    statistical policy's ``loo_refit_steps``, goes to
    :func:`_descend_left_out`."""
    ui = lo.rows([i])[0]
    k, ti, l1, l2 = lo.k[i], lo.t[i], lo.l1[i], lo.l2[i]
    c = lo.c - k * ui * ti
    rtol = lo.stats.loo_kkt_rtol
    if l2 == 0 and lo.paths.knows(i):  # its active set outgrew its rows at a larger alpha
        found = _left_out_from_path(lo, i, ui)
        if found is not None:
            return found
    A = np.flatnonzero(x)
    if A.size and l2 == 0:  # columns the left-out rows leave constant (a level of one
        # row): zero in F_{-i}, so is their coefficient (its Hessian singular there)
        GA = lo.gram_columns(A)
        full = GA[A, np.arange(A.size)]
        x[A[full - k * ui[A] ** 2 <= lo.stats.loo_dead_column * full]] = 0.0
    theta = np.sign(x)
    for _ in range(lo.stats.loo_refit_steps):
        A = np.flatnonzero(theta)
        GA = lo.gram_columns(A)  # (G_{-i}[:, A] = GA - k u_i u_i[A]^T)
        grad = _minus_gradient(c, GA, A, x, k, ui, l2)
        off = theta == 0
        worst = np.flatnonzero(off)[np.argmax(np.abs(grad[off]))] if off.any() else -1
        nonzero = x[A] != 0
        stationary = np.all(np.abs(grad[A][nonzero] - l1 * theta[A][nonzero]) <= rtol * l1)
        if stationary and nonzero.all():
            if worst < 0 or abs(grad[worst]) <= l1 * (1.0 + rtol):
                return ti - ui @ x
            theta[worst] = np.sign(grad[worst])  # (x stays 0 there)
            A = np.flatnonzero(theta)
            GA = lo.gram_columns(A)
        if l2 == 0 and A.size > lo.rank[i]:  # more columns than left-out rows
            taken("lasso_loo_interpolates", sample=int(i))
            start = lo.paths.solution(lo, i, l1)
            return _descend_left_out(lo, i, x if start is None else start, c, k, ui, ti, l1,
                                     l2)
        H = _hessian(GA, A, k, ui) + l2 * np.eye(A.size)
        rhs = c[A] - l1 * theta[A]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", linalg.LinAlgWarning)
                new = linalg.solve(H, rhs, assume_a="pos")
        except (linalg.LinAlgError, linalg.LinAlgWarning):
            # a singular or ill-conditioned active set (near-duplicate columns),
            # on which the steps cycle
            return _descend_left_out(lo, i, x, c, k, ui, ti, l1, l2)
        old = x[A]
        # the segment's points where a coordinate changes sign, and its end
        flip = np.flatnonzero(np.sign(new) != theta[A])
        with np.errstate(divide="ignore", invalid="ignore"):
            ts = old[flip] / (old[flip] - new[flip])
        crossing = flip[(ts > 0) & (ts < 1)]
        ts = np.append(ts[(ts > 0) & (ts < 1)], 1.0)
        pts = [old + t * (new - old) for t in ts]
        best = min(range(len(pts)), key=lambda m: _objective(H, c[A], l1, pts[m]))
        z = pts[best]
        if best < len(ts) - 1:  # a crossing: that coordinate is zero
            z[crossing[best]] = 0.0
        z[np.sign(z) != theta[A]] = 0.0  # (rounding: no coordinate keeps a wrong sign)
        x[A] = z
        theta[A] = np.sign(z)
    return _descend_left_out(lo, i, x, c, k, ui, ti, l1, l2)  # (cycling)


class LeftOutPaths:
    """The left-out Lasso's exact piecewise-linear paths (scikit-learn's
    ``lars_path``, Efron, Hastie, Johnstone & Tibshirani 2004) of the
    samples whose left-out active set outgrew their left-out rows, and,
    where ``p >= n`` (the speed policy's ``loo_homotopy_min_aspect``), of
    every sample the full fit's candidate did not settle, kept along an
    alpha path: a sample's is computed once, to its end, and read at every
    alpha after. Where the active set outgrows the rows the feature-sign
    steps stop (their Hessian is singular) and coordinate descent crawls
    (near interpolation); elsewhere the steps number about the columns a
    sample moves, the path's kinks about the rows. Each solution read is a
    start that :func:`_descend_left_out` checks and finishes."""

    def __init__(self):
        self.paths = {}
        self.rows = None  # U, every row centred at the full fit's means (once a path)

    def centred_rows(self, lo):
        """``U`` (float64, dense), computed at the first path and kept: the
        same rows at every alpha and for every sample."""
        if self.rows is None:
            self.rows = lo.rows(np.arange(lo.t.shape[0]))
        return self.rows

    def knows(self, i):
        return self.paths.get(i) is not None

    def solution(self, lo, i, l1):
        """The minimiser of ``F_{-i}`` without its ridge part at ``l1``
        (sum form), or ``None`` where ``lars_path`` failed or ended short
        of ``l1``."""
        if i not in self.paths:
            self.paths[i] = _left_out_path(lo, i, self)
        if self.paths[i] is None:
            return None
        kinks, path, n_rows, ended = self.paths[i]
        at = l1 / n_rows  # (lars_path's penalty: the mean form over its rows)
        if at < kinks[-1] and not ended:
            return None
        taken("lasso_loo_homotopy", sample=int(i))
        return lars_solutions(kinks, path, np.array([at]))[:, 0]


def _left_out_path(lo, i, paths):
    """``(kinks, coefs, n_rows, ended)`` of ``lars_path`` on sample ``i``'s
    left-out rows (``None`` where it fails): the rows weighted by ``w' = w
    - rho_i e_i`` (whose sum is ``W - rho_i``) and re-centred at their own
    mean. ``U`` and ``t``, centred at the full fit's means, are off by
    ``m' = -rho_i u_i / (W - rho_i)`` and ``-rho_i t_i / (W - rho_i)``
    there, and ``sum_j w'_j (u_j - m') (u_j - m')^T = G - k_i u_i u_i^T``
    (the same for ``c_{-i}``). ``ended``: the path ran to its end, not to
    its step limit. ``None`` too where three dense copies of the rows
    exceed the working memory (``skacv.set_config``; a sparse ``X``:
    ``lars_path`` takes dense rows): the feature-sign steps or the descent
    then solve the sample. ``paths``: the :class:`LeftOutPaths` keeping
    ``U``."""
    n = lo.t.shape[0]
    if 24 * n * lo.X.shape[1] > working_memory_bytes():  # (U kept, weighted, lars_path's)
        taken("lasso_loo_path_memory", sample=int(i))
        return None
    U, t = paths.centred_rows(lo), lo.t.copy()
    w = lo.w.copy()
    w[i] -= lo.rho[i]
    if lo.intercept:
        shift = lo.rho[i] / lo.W_minus[i]
        U = U + shift * U[i]  # (a new array: the kept U stays centred at the full means)
        t += shift * t[i]
    keep = np.flatnonzero(w > 0)
    root = np.sqrt(w[keep])
    max_iter = lo.stats.loo_refit_steps + 4 * keep.size
    target = root * t[keep]
    with warnings.catch_warnings():  # (degenerate kinks: the check below, the descent's)
        warnings.simplefilter("ignore")
        try:
            kinks, _, path = lars_path(root[:, None] * U[keep], target, method="lasso",
                                       max_iter=max_iter)
        except ValueError:  # columns leaving at one kink (scikit-learn issue 9603)
            return None
    # (lars_path's objective at zero, mean form over the rows: ||target||^2 / (2 n_rows))
    if degenerate_homotopy(kinks, path, float(target @ target) / (2.0 * keep.size)):
        taken("lasso_loo_homotopy_degenerate", sample=int(i))
        return None
    return kinks, path, keep.size, kinks.size - 1 < max_iter


def _descend_left_out(lo, i, x, c, k, ui, ti, l1, l2):
    """``t_i - u_i^T b_{-i}`` where the feature-sign search did not finish:
    working sets of ``F_{-i}``, from ``x`` and the columns the optimality
    conditions ask for, each solved to a duality gap of ``loo_descent_gap``
    times ``||t_{-i}||^2`` (:func:`_working_set`), until no column off the
    set violates them. ``inf`` past ``loo_refit_steps`` working sets, or at
    a working set that stays unsolved."""
    stats = lo.stats
    yy = max(lo.tt - k * ti * ti, 0.0)  # ||t_{-i}||^2, centred (as G_{-i})
    W = np.flatnonzero(x)
    for _ in range(stats.loo_refit_steps):
        GW = lo.gram_columns(W)
        H = np.ascontiguousarray(_hessian(GW, W, k, ui))
        b = _working_set(H, c[W], yy, l1, l2, x[W], ui[W], stats, i)
        if b is None:
            return np.inf
        x[:] = 0.0
        x[W] = b
        grad = _minus_gradient(c, GW, W, x, k, ui, l2)
        grad[W] = 0.0  # (off W only)
        new = np.flatnonzero(np.abs(grad) > l1 * (1.0 + stats.loo_kkt_rtol))
        if not new.size:
            taken("lasso_loo_descent", sample=int(i), columns=int(W.size))
            return ti - ui[W] @ b
        W = np.union1d(W, new)
    taken("lasso_loo_unfinished", sample=int(i))
    return np.inf


def _working_set(H, c, yy, l1, l2, x, u, stats, i):
    """The minimiser of ``F_{-i}`` on a working set (``H``, ``c``: its
    Hessian without the ridge part and its linear term; ``u``: ``u_i`` on
    the set), from ``x``, to a duality gap of ``loo_descent_gap`` times
    ``yy``: coordinate descent (:func:`gram_coordinate_descent`,
    indifferent to a singular Hessian) for ``loo_descent_epochs``. Short of
    the gap, the set's exact homotopy (:func:`gram_homotopy`) where it
    reaches it (more columns than left-out rows near interpolation, where
    the descent crawls: a million epochs measured on 29 columns); else the
    descent's point where the left-out prediction is within
    ``loo_descent_bound`` times ``||t_{-i}||`` of the minimiser's
    (:func:`_prediction_bound`: near-duplicate columns, whose split the
    descent crawls along but the prediction hardly sees); else the
    descent on to ``loo_descent_max_epochs`` and the same two checks.
    ``None`` where none passes (trace event ``lasso_loo_descent_limit``)."""
    goal = stats.loo_descent_gap * yy
    b, epochs = gram_coordinate_descent(H, c, yy, l1, l2, x, stats.loo_descent_gap,
                                        stats.loo_descent_epochs)
    if epochs < stats.loo_descent_epochs:
        return b
    gap = gram_gap(H, c, yy, l1, l2, b)
    if gap <= goal:
        return b
    exact = gram_homotopy(H, c, yy, l1, l2)
    if exact is not None and gram_gap(H, c, yy, l1, l2, exact) <= goal:
        taken("lasso_loo_descent_homotopy", sample=int(i), columns=int(c.size))
        return exact
    limit = stats.loo_descent_bound * np.sqrt(yy)
    more = max(stats.loo_descent_max_epochs - epochs, 0)
    for last in (False, True):
        if _prediction_bound(H, l2, yy, l1, b, u, gap) <= limit:
            taken("lasso_loo_descent_bounded", sample=int(i), columns=int(c.size))
            return b
        if last or not more:
            break
        b, epochs = gram_coordinate_descent(H, c, yy, l1, l2, b, stats.loo_descent_gap, more)
        if epochs < more:
            return b
        gap = gram_gap(H, c, yy, l1, l2, b)
        if gap <= goal:
            return b
    taken("lasso_loo_descent_limit", sample=int(i), columns=int(c.size))
    return None


def _prediction_bound(H, l2, yy, l1, b, u, gap):
    """A bound on ``|u^T (b - b*)|``, ``b*`` the minimiser of ``b^T (H + l2
    I) b / 2 - c^T b + l1 |b|_1`` (``yy``: ``||t||^2`` of the rows behind
    ``H``, ``c``), from the duality ``gap`` at ``b``. With ``d = b - b*``
    the gap bounds ``d^T (H + l2 I) d / 2``; on the eigenvectors whose eigenvalue is above rounding
    that bounds ``u``'s part of ``d`` by ``sqrt(2 gap sum (v^T u)^2 /
    lambda)``; on the others, whose part of ``u`` is ``u_N``, ``|u_N|
    |d|_1`` with ``|d|_1 <= |b|_1 + yy / (2 l1)`` (the objective at zero
    bounds ``l1 |b*|_1``). Finite where ``u`` lies in the Hessian's range
    (near-duplicate columns); large where it does not (more columns than
    rows: ``u_i`` is off the left-out rows' span)."""
    if not l1 > 0:
        return np.inf
    lam, V = linalg.eigh(H + l2 * np.eye(H.shape[0]))
    tau = max(float(lam[-1]), 0.0) * H.shape[0] * np.finfo(np.float64).eps
    z = V.T @ u
    big = lam > tau
    gap = max(gap, 0.0)
    return (np.sqrt(2.0 * gap * float(np.sum(z[big] ** 2 / lam[big])))
            + float(np.linalg.norm(z[~big])) * (float(np.abs(b).sum()) + yy / (2.0 * l1)))
