"""Leave-one-out along a trajectory: IACV, brute-force refits, NS / IJ / ALO.

Definition (every function of this module computes the same target)
-------------------------------------------------------------------
The leave-``i``-out run is the estimator refitted without sample ``i`` with
the *same* algorithm, start (zero), step size (``step_size_`` of the full
fit, also when it was ``"auto"``), schedule and, for SGD, the same
mini-batches with ``i`` deleted. Its objective is the estimator's objective
on the remaining data: a mean-form loss is divided by the remaining weight
``W - rho_i``, a penalty keeps its own form (``IterativeRidge``'s
``alpha ||w||^2`` and ``TrajectoryHuberRegressor``'s penalties are sum-form,
the Lasso/logistic ``alpha`` mean form). With ``fit_intercept=True`` the
left-out fit re-centres ``X`` and ``y`` on the remaining data (least squares)
or refits its unpenalised intercept coordinate (logistic, Huber, whose
left-out runs also keep the full fit's ``scale_``). ``loo_path_[t]`` is the weighted mean over
``i`` of the loss of iterate ``t`` of run ``-i`` at ``(x_i, y_i)``.

Sample weights are frequency weights: removing sample ``i`` removes *one
unit* of its weight, ``rho_i = min(w_i, 1)`` (the whole row when
``w_i <= 1``), and the mean over ``i`` is weighted by ``w_i``. With integer
weights this equals the leave-one-out of the data with repeated rows (each
copy of a row sees the other copies); rows of zero weight are not data and
only contribute their full-data prediction.

IACV (Luo, Ren & Barber 2023)
-----------------------------
Every left-out run is tracked as a difference ``d_i^t = x_{-i}^t - x^t`` to
the full run, advanced by the same :class:`~skacv.Iteration` methods as the
fit (``combine``, ``prox``, ``extrapolate``), with the gradient input of the
left-out objective linearised at the full iterate ``v^{k-1}``:

    z_{-i} = (N_S z - H_S d_i - rho_i [i in S] u_i (g_i - c_i u_i^T d_i)
              + centring terms) / (N_S - rho_i [i in S]) - (mu_{-i} - mu) (v + d_i)

(``u_i`` the unweighted row, ``g_i`` and ``c_i`` minus the first and the
second derivative of the loss at ``u_i^T v``, ``H_S = X~_S^T diag(c) X~_S``,
``N_S`` the weight of the batch, ``S`` every row for full-batch methods).
Least squares is quadratic, so this is *exact* leave-one-out; for the
linear least-squares iterations it runs in the eigenbasis of ``X~^T X~``
(or of ``X~ X~^T`` when ``p > n``), ``O(n min(n, p))`` per step after an
``O(n p min(n, p))`` set-up. ISTA/FISTA apply the exact prox to each
left-out point (no prox Jacobian) and logistic regression linearises the
gradient, both with an ``O(1/n^2)`` error per iterate.

The centring terms of least squares with an intercept: re-centring on the
data without ``i`` equals, for the centred full-data coordinates, removing
``u_i`` with weight ``kappa_i = rho_i W / (W - rho_i)`` (full batch), and the
left-out residual of ``y_i`` is ``W / (W - rho_i)`` times the centred one.
"""

import time

import numpy as np
from scipy.special import expit
from sklearn.utils import Bunch, check_random_state

from .._config import check_memory, path_memory_bytes, working_memory_bytes
from ..iterations._datafits import LeastSquares, log_loss_terms
from ..iterations._path import minibatch_gradient
from ..linalg._design import design_rows

# arrays of size n_coef per tracked sample (state, temporaries) for the chunk size
_ARRAYS_PER_SAMPLE = 10

# ----------------------------------------------------------------------------
# the problem: per-sample constants, spectral basis
# ----------------------------------------------------------------------------


def removed_weights(design):
    """``w``, ``rho = min(w, 1)`` and the remaining weight ``W - rho``."""
    n = design.n_samples
    w = np.ones(n) if design.weight is None else np.asarray(design.weight, dtype=np.float64)
    rho = np.minimum(w, 1.0)
    W_minus = design.n_eff - rho
    bad = np.flatnonzero((rho > 0) & (W_minus <= 0))
    if bad.size:
        raise ValueError(
            "Leave-one-out needs more than one sample: removing sample "
            f"{bad[0]} leaves a total sample weight of {W_minus[bad[0]]:g}."
        )
    return w, rho, W_minus


class _Problem:
    """What the leave-one-out runs of one trajectory share."""

    def __init__(self, design, y_tilde, iteration, coef_path, datafit, y):
        datafit = LeastSquares() if datafit is None else datafit
        self.design, self.iteration, self.datafit = design, iteration, datafit
        self.y_tilde = np.asarray(y_tilde, dtype=np.float64)
        self.y = np.asarray(y, dtype=np.float64)
        self.path = np.asarray(coef_path, dtype=np.float64)
        self.T = self.path.shape[1] - 1
        self.n, self.m = design.n_samples, self.path.shape[0]
        self.W = float(design.n_eff)
        self.w, self.rho, self.W_minus = removed_weights(design)
        self.classifier = datafit.classifier
        self.quadratic = datafit.quadratic
        self.centred = self.quadratic and design.fit_intercept
        with np.errstate(divide="ignore", invalid="ignore"):
            self.eps = np.where(self.rho > 0, self.rho / self.W_minus, 0.0)
        if not self.centred:
            self.eps = np.zeros(self.n)
        # the left-out objective's penalty in mean form (sum-form penalties
        # are divided by the remaining weight)
        penalty = iteration.penalty
        l2_minus = penalty.l2_at(np.where(self.W_minus > 0, self.W_minus, 1.0))
        self.dl2 = np.broadcast_to(l2_minus, (self.n,)) - float(iteration.l2)
        if not np.any(self.dl2):
            self.dl2 = None
        # a sum-form l1 penalty is stronger in mean form on the left-out data
        self.l1_scale = None
        if penalty.sum_form and penalty.l1_ > 0:
            l1_minus = penalty.l1_at(np.where(self.W_minus > 0, self.W_minus, 1.0))
            self.l1_scale = np.broadcast_to(l1_minus, (self.n,)) / penalty.l1_
        self.pen = penalty.penalized(self.m) if penalty.n_unpenalized else None
        self.sampler = iteration.sampler
        self.uses_hb = any(iteration.hb(k) != 0.0 for k in range(1, self.T + 1))
        self.sw = np.sqrt(self.w)
        self.spectral = None
        self.gram = None
        self._X_csr = None

    def x_csr(self):
        if self._X_csr is None and self.design.sparse:
            self._X_csr = self.design.X.tocsr()
        return self._X_csr

    def rows(self, idx):
        """Unweighted rows ``u_i`` (centred for least squares with intercept)."""
        U = np.asarray(design_rows(self.design, idx), dtype=np.float64)
        return U / self.sw[idx, None]


class _Spectral:
    """Eigenbasis of ``X~^T X~`` restricted to the row space of ``X~``.

    ``coords(x) = V^T x``; ``lam`` are the eigenvalues of ``X~^T X~ / W``.
    """

    def __init__(self, prob, fitted=None):
        d = prob.design
        n, p, W = d.n_samples, d.n_features, prob.W
        r = min(n, p)
        check_memory(8 * r * r * 2, f"the eigendecomposition for leave-one-out ({r} x {r})",
                     "Use loo_subsample or a smaller problem. ")
        if p <= n:
            lam, V = d.gram_eigh("features")
            self.lam = np.clip(lam, 0, None)
            self.V = V
            self.c0 = V.T @ (np.asarray(d.rmatvec(prob.y_tilde), dtype=np.float64) / W)
            self._Q = None
        else:
            lam, Q = d.gram_eigh("samples")
            keep = lam > max(lam[-1], 0) * max(n, p) * np.finfo(np.float64).eps
            lam, Q = lam[keep], Q[:, keep]
            self.lam, self._Q = lam, Q
            self.c0 = np.sqrt(lam) * (Q.T @ prob.y_tilde) / np.sqrt(W)
            self.V = None
        self.project(prob, fitted)

    def project(self, prob, fitted=None):
        """Coordinates of the path of ``prob`` in this basis (also for a
        longer path of the same data: a warm continuation)."""
        d = prob.design
        if self._Q is None:
            self.path = self.V.T @ prob.path
        else:
            if fitted is None:
                fitted = d.matvec(prob.path.astype(d.dtype, copy=False))
            scale = np.sqrt(prob.W * self.lam)
            self.path = (self._Q.T @ np.asarray(fitted, dtype=np.float64)) / scale[:, None]
        self._prob = prob
        return self

    def rows(self, idx):
        prob = self._prob
        if self._Q is None:
            return prob.rows(idx) @ self.V
        return (np.sqrt(prob.W) * self._Q[idx] * np.sqrt(self.lam)) / prob.sw[idx, None]

    def basis(self):
        """``V`` (n_features, r), to map coordinates back (tests)."""
        if self.V is None:
            d = self._prob.design
            self.V = np.asarray(d.rmatvec(self._Q), dtype=np.float64) / np.sqrt(
                self._prob.W * self.lam)
        return self.V


# ----------------------------------------------------------------------------
# IACV: one block of left-out runs
# ----------------------------------------------------------------------------


def _apply_hessian(prob, dV, curv):
    """``X~^T diag(curv) X~ @ dV`` (sum form; ``curv=None``: least squares)."""
    d = prob.design
    if curv is None and prob.gram is not None:
        nz = np.flatnonzero(np.any(dV != 0, axis=1))
        if nz.size < 0.8 * dV.shape[0]:
            return prob.gram[:, nz] @ dV[nz]
        return prob.gram @ dV
    n, p = d.n_samples, prob.m
    c = dV.shape[1]
    if not d.sparse and n * p * p + p * p * c < 2 * n * p * c:
        Xd = np.asarray(d.X, dtype=np.float64)
        Xc = Xd if curv is None else Xd * curv[:, None]
        return (Xc.T @ Xd) @ dV
    XdV = np.asarray(d.matvec(dV), dtype=np.float64)
    if curv is not None:
        XdV *= curv[:, None]
    return np.asarray(d.rmatvec(XdV), dtype=np.float64)


def _responses(it, curv, inject, T):
    """Responses of the difference recursion in the eigenbasis (diagonal).

    Runs ``dZ^k = inject(k) - curv * dV^{k-1}`` through the iteration's own
    ``combine``/``extrapolate`` from a zero state, for ``k = 1..T``, and
    returns the ``dX^k`` and ``dV^k`` (columns ``k - 1``).
    """
    r = curv.shape[0]
    cols = inject(1).shape[1] if inject(1).ndim == 2 else None
    shape = (r,) if cols is None else (r, cols)
    dX1, dX2, dV = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    outX = np.empty((T,) + shape)
    outV = np.empty((T,) + shape)
    c = curv if cols is None else curv[:, None]
    for k in range(1, T + 1):
        dX, dV = it.tangent(k, dV, dX1, dX2, inject(k) - c * dV, None)
        dX2, dX1 = dX1, dX
        outX[k - 1], outV[k - 1] = dX, dV
    return outX, outV


def _track_toeplitz(prob, idx, coef_at=(), store=False):
    """:func:`_track` for stationary linear least-squares iterations.

    In the eigenbasis every left-out run is the full-data recursion with the
    diagonal curvature ``s lam + dl2`` plus injections along its own row
    ``u_i`` (a scalar ``a_i^k`` per step) and along common vectors. With a
    stationary iteration the response to an injection depends on the lag
    only, so ``u_i^T dV^k`` and the predictions are convolutions of the
    scalars ``a_i`` with kernels ``sum_j u_ij^2 phi_tau(lam_j)`` (one GEMM);
    the feedback ``a_i^k = -(kappa_i / N_i)(g_i^k - u_i^T dV^{k-1})`` is a
    scalar recursion. Cost ``O(n r T + n T^2)`` instead of ``O(n r T)``
    passes over an (r, n) state. Samples of one block share ``rho``.
    """
    it, T, W, sp = prob.iteration, prob.T, prob.W, prob.spectral
    rho = float(prob.rho[idx[0]])
    N = W - rho
    s = W / N
    eps = float(prob.eps[idx[0]])
    kappa = rho * (1.0 + eps)
    dl2 = 0.0 if prob.dl2 is None else float(prob.dl2[idx[0]])
    lam = sp.lam
    curv = s * lam + dl2
    path = sp.path
    v_path = np.empty((path.shape[0], T))  # v^{k-1}, k = 1..T
    v_path[:, 0] = path[:, 0]
    for k in range(2, T + 1):
        v_path[:, k - 1] = it.extrapolate_iterate(k - 1, path[:, k - 1], path[:, k - 2])
    common = (s - 1.0) * (sp.c0[:, None] - lam[:, None] * v_path) - dl2 * v_path
    unit = np.ones(lam.shape[0])
    phiX, phiV = _responses(it, curv, lambda k: unit if k == 1 else 0.0 * unit, T)
    RX, RV = _responses(it, curv, lambda k: common[:, k - 1], T)
    U = sp.rows(idx)
    c = idx.shape[0]
    U2 = U * U
    KX = U2 @ phiX.T  # (c, T): lag tau = 0..T-1
    KV = U2 @ phiV.T
    y_i = prob.y_tilde[idx] / prob.sw[idx]
    G = y_i[:, None] - U @ v_path  # g_i^k, k = 1..T
    CQ = U @ RV.T  # u_i^T (common response of dV^k), k = 1..T
    CX = U @ path
    CX[:, 1:] += U @ RX.T
    a = np.zeros((c, T + 1))  # a[:, k] injected at step k
    KV_rev = np.ascontiguousarray(KV[:, ::-1])  # KV_rev[:, T-1-tau] = KV[:, tau]
    KX_rev = np.ascontiguousarray(KX[:, ::-1])
    eta = np.empty((c, T + 1))
    eta[:, 0] = CX[:, 0]
    for k in range(1, T + 1):
        q = CQ[:, k - 2].copy() if k >= 2 else np.zeros(c)
        if k >= 2:  # sum_{s=1}^{k-1} KV[:, k-1-s] a[:, s]
            q += np.einsum("ij,ij->i", KV_rev[:, T - k + 1:], a[:, 1:k])
        a[:, k] = -(kappa / N) * (G[:, k - 1] - q)
        # eta^k = CX^k + sum_{s=1}^{k} KX[:, k-s] a[:, s]
        eta[:, k] = CX[:, k] + np.einsum("ij,ij->i", KX_rev[:, T - k:], a[:, 1: k + 1])
    res = (1.0 + prob.eps[idx])[:, None] * (y_i[:, None] - eta)
    w_i = prob.w[idx]
    loss = w_i[:, None] * (res * res)
    preds = (prob.y[idx][:, None] - res) if store else None
    coefs = None
    if coef_at:
        coefs = np.empty((len(coef_at), c, prob.m))
        Vb = sp.basis()
        for j, t in enumerate(coef_at):
            D = np.repeat(path[:, t][:, None], c, axis=1)
            if t:
                D += RX[t - 1][:, None]
                # sum_{s=1}^{t} phiX[t-s] * u a^s
                D += U.T * (a[:, 1: t + 1] @ phiX[t - 1:: -1][:t]).T
            coefs[j] = (Vb @ D).T
    return loss, None, preds, coefs


def _track(prob, idx, coef_at=(), store=False, state=None):
    """Run the left-out trajectories of the samples ``idx`` (all of positive weight).

    Returns the weighted losses ``w_i loss_i^t`` (len(idx), T + 1) (and the
    error sums for classifiers), optionally the predictions (len(idx), T + 1) and the
    left-out coefficients at the iterates ``coef_at`` (in the fit's
    coordinates), shape (len(coef_at), len(idx), n_coef).

    ``state`` (a dict, updated in place) continues the runs of a shorter
    prefix of the same path: it holds the differences after step
    ``state["k"]``; the returned sums and predictions then cover the steps
    after it only (entries up to ``state["k"]`` are zero / unset).
    """
    it, T, W = prob.iteration, prob.T, prob.W
    sp = prob.spectral
    c = idx.shape[0]
    w_i, rho_i, eps_i = prob.w[idx], prob.rho[idx], prob.eps[idx]
    sw_i = prob.sw[idx]
    # centred y (least squares, y_tilde carries sqrt(w)) or labels in {0, 1}
    y_i = prob.y_tilde[idx] if prob.classifier else prob.y_tilde[idx] / sw_i
    dl2_i = None if prob.dl2 is None else prob.dl2[idx]
    if sp is not None:
        U, path = sp.rows(idx), sp.path
    else:
        U, path = prob.rows(idx), prob.path
    m = U.shape[1]
    UT = np.ascontiguousarray(U.T)  # (m, c): column i is u_i
    UP = U @ path  # u_i^T x^t of the full iterates, (c, T + 1)
    k0 = 0 if state is None else state["k"]
    if k0:
        dX1, dX2, dV, q = state["dX1"], state["dX2"], state["dV"], state["q"]
    else:
        dX1 = np.zeros((m, c))
        dX2 = np.zeros((m, c)) if prob.uses_hb else None
        dV = dX1
        q = np.zeros(c)  # u_i^T dV_i^{k-1}
    buf = np.empty((m, c))
    loss = np.zeros((c, T + 1))
    err = np.zeros(T + 1) if prob.classifier else None
    preds = np.empty((c, T + 1)) if store else None
    coef_at = list(coef_at)
    coefs = np.empty((len(coef_at), c, prob.m)) if coef_at else None

    def record(t, eta):
        if prob.classifier:
            loss[:, t] = w_i * log_loss_terms(eta, y_i)
            err[t] = w_i @ ((eta > 0) != (y_i > 0.5))
            if store:
                preds[:, t] = expit(eta)
        else:
            res = (1.0 + eps_i) * (y_i - eta)  # left-out residual, original scale
            loss[:, t] = w_i * (res * res)
            if store:
                preds[:, t] = prob.y[idx] - res
        if coef_at and t in coef_at:
            D = path[:, t][:, None] + (dX1 if t else 0.0)
            if sp is not None:
                D = sp.basis() @ D
            coefs[coef_at.index(t)] = D.T

    if not k0:
        record(0, UP[:, 0])
    design, datafit, sampler = prob.design, prob.datafit, prob.sampler
    in_all = np.ones(c, dtype=bool)
    for k in range(k0 + 1, T + 1):
        x1 = path[:, k - 1]
        x2 = path[:, k - 2] if k >= 2 else x1
        v = x1 if k == 1 else it.extrapolate_iterate(k - 1, x1, x2)
        mS, sig_S, in_S = None, 0.0, in_all
        if sp is not None:  # least squares, full batch, linear iteration
            z = sp.c0 - sp.lam * v
            g = y_i - U @ v
            curv = None
            N_S = W
            HdV = (W * sp.lam)[:, None] * dV
        else:
            Xv = np.asarray(design.matvec(v.astype(design.dtype, copy=False)),
                            dtype=np.float64)
            r = datafit.residual(Xv, prob.y_tilde)
            curv_all = datafit.curvature(Xv, prob.y_tilde)
            g = r[idx] / sw_i
            curv = None if curv_all is None else curv_all[idx]
            if sampler is None:
                N_S = W
                z = np.asarray(design.rmatvec(r), dtype=np.float64) / W
                HdV = _apply_hessian(prob, dV, curv_all)
            else:
                S = sampler(k)
                rows = design.rows(S, prob.x_csr())
                XS = np.asarray(rows.dense(), dtype=np.float64)
                N_S = float(prob.w[S].sum())
                z = np.asarray(minibatch_gradient(rows, r[S], design.weight, v),
                               dtype=np.float64)
                in_S = np.isin(idx, S, assume_unique=True)
                XdV = XS @ dV
                if curv_all is not None:
                    XdV *= curv_all[S][:, None]
                HdV = XS.T @ XdV
                if prob.centred:
                    mS = XS.T @ prob.sw[S]
                    sig_S = float(prob.sw[S] @ r[S])
        rho_S = rho_i * in_S
        N_i = N_S - rho_S
        with np.errstate(divide="ignore"):
            inv = np.where(N_i > 0, 1.0 / np.where(N_i > 0, N_i, 1.0), 0.0)
        coef_u = -rho_S * (g - (q if curv is None else curv * q))
        if prob.centred:
            e = g - q
            P = sig_S - rho_S * e
            if mS is not None:
                P = P - mS @ dV
            coef_u += eps_i * (P - rho_S * e + N_i * eps_i * e)
        # dZ = (N_S / N_i - 1) z - H_S dV / N_i + u_i coef_u / N_i (+ centring, ridge)
        dZ = HdV
        dZ *= -inv
        dZ += np.multiply.outer(z, N_S * inv - 1.0)
        dZ += np.multiply(UT, coef_u * inv, out=buf)
        if mS is not None:
            dZ += np.multiply.outer(mS, eps_i * (g - q) * inv)
        if dl2_i is not None:
            t2 = (v[:, None] + dV) * dl2_i
            dZ -= t2 if prob.pen is None else t2 * prob.pen[:, None]
        hb = it.hb(k) != 0.0
        dPre = it.combine(k, dV, it.momentum_difference(k, x1, x2, dx1=dX1, dx2=dX2)
                          if hb else None, dZ)
        if it.is_linear:
            dX = dPre
        else:
            pre = it.combine(k, v, it.momentum_difference(k, x1, x2) if hb else None, z)
            xk = it.prox(k, pre)
            dX = it.prox(k, np.add(dPre, pre[:, None], out=dPre),
                         None if prob.l1_scale is None else prob.l1_scale[idx])
            dX -= xk[:, None]
        dV = it.extrapolate_difference(k, path[:, k], x1, dX, dX1)
        if dX2 is not None:
            dX2 = dX1
        dX1 = dX
        qx = np.einsum("ij,ij->j", UT, dX)
        q = qx if dV is dX else np.einsum("ij,ij->j", UT, dV)
        record(k, UP[:, k] + qx)
    if state is not None:
        state.update(k=T, dX1=dX1, dX2=dX2, dV=dV, q=q)
    return loss, err, preds, coefs


# ----------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------


def _in_sample_losses(prob, fitted, tracked, prev=None):
    """Weighted in-sample losses ``w_i loss(y_i, x_i^T x^t)`` of the full
    iterates: their sum over every sample, and the rows ``tracked``.

    ``prev`` (the result for a prefix of the same path: a warm continuation)
    supplies its columns; only the new ones are computed.

    Returns ``(total, rows)`` of shapes (T + 1,) and (len(tracked), T + 1).
    """
    d, n, T = prob.design, prob.n, prob.T
    sw = np.where(prob.sw > 0, prob.sw, 1.0)
    pos = np.flatnonzero(prob.w > 0)
    total = np.zeros(T + 1)
    rows = np.empty((tracked.shape[0], T + 1))
    where = np.searchsorted(pos, tracked)
    start = 0
    if prev is not None and prev[0].shape[0] <= T + 1:
        start = prev[0].shape[0]
        total[:start], rows[:, :start] = prev
    # columns of the path per chunk: n * chunk doubles within the working memory
    chunk = int(max(1, min(T + 1, working_memory_bytes() // (8 * 3 * max(n, 1)))))
    for lo in range(start, T + 1, chunk):
        hi = min(T + 1, lo + chunk)
        if fitted is not None:
            Xv = np.asarray(fitted[:, lo:hi], dtype=np.float64)
        else:
            Xv = np.asarray(d.matvec(prob.path[:, lo:hi].astype(d.dtype, copy=False)),
                            dtype=np.float64)
        eta = Xv[pos] / sw[pos, None]
        if prob.classifier:
            terms = log_loss_terms(eta, prob.y_tilde[pos, None])
        else:
            terms = (prob.y_tilde[pos] / sw[pos])[:, None] - eta
            terms *= terms
        terms *= prob.w[pos, None]
        total[lo:hi] = terms.sum(axis=0)
        rows[:, lo:hi] = terms[where]
    return total, rows


def _regression_estimate(prob, per, tracked, fitted, scale, state=None):
    """Leave-one-out path from a subsample, with a control variate.

    ``per`` (len(tracked), T + 1) are the weighted left-out losses
    ``a_i = w_i L_i^t`` of the tracked samples; the weighted in-sample losses
    ``b_i = w_i R_i^t`` of the full iterates are known for *every* sample and
    strongly correlated with ``a_i`` (``L_i / R_i`` is close to a common
    ``(1 - h_ii)^{-2}`` at a fixed support). The difference estimator

        loo_t = ( scale * sum_sub (a_i - beta_t b_i) + beta_t * sum_all b_i ) / W,

    with ``beta_t`` the least-squares slope of ``a`` on ``b`` over the
    subsample, has far less variance than the Horvitz-Thompson mean
    ``scale * sum_sub a_i / W`` (``beta_t = 0``), and never much more: where
    the in-sample losses carry little information (near interpolation) the
    slope goes to zero. Its bias is of order ``1 / n_sub``.
    """
    total, rows = _in_sample_losses(prob, fitted, tracked,
                                    None if state is None else state.get("in_sample"))
    if state is not None:  # a warm continuation computes only the new columns
        state["in_sample"] = (total, rows)
    a_c = per - per.mean(axis=0)
    b_c = rows - rows.mean(axis=0)
    var = np.einsum("ij,ij->j", b_c, b_c)
    cov = np.einsum("ij,ij->j", a_c, b_c)
    with np.errstate(divide="ignore", invalid="ignore"):
        beta = np.where(var > 0, cov / np.where(var > 0, var, 1.0), 0.0)
    return (scale * (per.sum(axis=0) - beta * rows.sum(axis=0)) + beta * total) / prob.W


def _block_size(prob, batch_size, n_steps=0):
    """Number of left-out runs advanced together."""
    m = prob.m if prob.spectral is None else prob.spectral.lam.shape[0]
    per = 8 * (m * _ARRAYS_PER_SAMPLE + 8 * n_steps + prob.T + 1)
    if batch_size is None:
        return int(max(1, working_memory_bytes() // per))
    check_memory(
        per * int(batch_size),
        f"the leave-one-out state of {int(batch_size)} samples x {m} coefficients",
        "Lower loo_batch_size (or leave it None to size the blocks from "
        "skacv.get_config()['working_memory']). ",
    )
    return int(batch_size)


def iacv_path(design, y_tilde, iteration, coef_path, y, *, datafit=None,
              batch_size=None, subsample=None, store_predictions=False, random_state=None,
              fitted=None, coef_at=(), spectral="auto", full_predictions=None, verbose=0,
              _state=None, _keep_state=False):
    """Leave-one-out losses of every iterate by IACV (see the module docstring).

    Parameters
    ----------
    design : Design
        The fit's design (rows of ``X~``, centred and weighted).
    y_tilde : ndarray of shape (n_samples,)
        The fit's target (centred and weighted; labels {0, 1} for logistic).
    iteration : Iteration
        The iteration object of the fit (its penalty gives the left-out
        objective's penalty, :meth:`~skacv.iterations._penalties.Penalty.at_weight`).
    coef_path : ndarray of shape (n_coef, T + 1)
        Iterates in the fit's coordinates.
    y : ndarray of shape (n_samples,)
        Original target (least squares) or labels in {0, 1}.
    datafit : datafit of :mod:`skacv.iterations._datafits`, default=None
        ``None`` is least squares.
    batch_size, subsample : int or None
        Block size of the left-out runs; random subset of tracked samples.
    store_predictions : bool
    random_state : int, RandomState instance or None
        Draws the subsample.
    fitted : ndarray of shape (n_samples, T + 1), default=None
        ``X~ x^t`` when known (spectral set-up for ``p > n``).
    coef_at : sequence of int
        Iterates at which the left-out coefficients are returned.
    spectral : {"auto", False}
        Use the eigenbasis for linear least-squares iterations.
    full_predictions : callable, default=None
        ``full_predictions(idx)`` gives the full-data prediction paths of
        the rows ``idx`` of zero weight (stored predictions).
    _state, _keep_state : dict or None, bool
        Warm continuation (private): ``_keep_state=True`` returns in
        ``state`` what a call on a longer path with the same prefix (a
        warm-started refit on the same data, which the estimator guards)
        needs to continue the left-out runs instead of restarting them.
        Only for the general recursion, when the state fits in the working
        memory.

    Returns
    -------
    result : Bunch
        ``loss`` (T + 1,), ``error`` (T + 1,) or None, ``predictions``
        (n_loo, T + 1) or None, ``indices`` (n_loo,), ``coef``
        (len(coef_at), n_tracked, n_coef) or None with ``coef_indices``,
        ``state`` (dict or None).
    """
    tic = time.perf_counter()
    prob = _Problem(design, y_tilde, iteration, coef_path, datafit, y)
    n, T = prob.n, prob.T
    state = _state
    if state is not None and not (
            state["T"] <= T and state["subsample"] == subsample
            and state["store"] == bool(store_predictions) and not coef_at
            and state["batch_size"] == batch_size and state["n"] == n
            and (state["random_state"] is random_state or (
                isinstance(random_state, (int, np.integer))
                and state["random_state"] == random_state))):
        state = None
    if state is not None:  # the same subsample, blocks and basis as before
        prob.gram = state["gram"]
        if state["spectral"] is not None:
            prob.spectral = state["spectral"].project(prob, fitted)
        return _continue(prob, state, T, fitted, store_predictions, full_predictions,
                         verbose, tic, _keep_state)
    if store_predictions:
        check_memory(8 * n * (T + 1), f"loo_predictions_ of shape ({n}, {T + 1})",
                     "Set store_loo_predictions=False or use loo_subsample. ")
    if subsample is not None and subsample < n:
        rng = check_random_state(random_state)
        indices = np.sort(rng.choice(n, int(subsample), replace=False))
        scale = n / indices.shape[0]
    else:
        indices, scale = np.arange(n), 1.0
    tracked = indices[prob.rho[indices] > 0]
    # the eigenbasis of X~^T X~ diagonalises combine() only for scalar steps
    # (not for a preconditioned step such as EigenPro's)
    linear_ls = (prob.quadratic and iteration.is_linear and prob.sampler is None
                 and getattr(iteration, "preconditioner", None) is None)
    if spectral == "auto" and linear_ls and prob.pen is None:
        r = min(n, prob.m)
        if 16 * r * r <= path_memory_bytes():
            prob.spectral = _Spectral(prob, fitted)
    if prob.spectral is None and prob.quadratic and prob.sampler is None:
        if 8 * prob.m * prob.m <= working_memory_bytes():
            prob.gram = np.asarray(design.gram(side="features"), dtype=np.float64) * prob.W
    track, groups = _track, [tracked]
    if prob.spectral is not None and iteration.is_stationary \
            and T <= 4 * prob.spectral.lam.shape[0]:
        values = np.unique(prob.rho[tracked])
        if values.shape[0] <= 8:  # blocks share rho (frequency weights: rho = 1)
            track = _track_toeplitz
            groups = [tracked[prob.rho[tracked] == r] for r in values]
    block = _block_size(prob, batch_size, T if track is _track_toeplitz else 0)
    blocks = [g[s: s + block] for g in groups for s in range(0, g.shape[0], block)]
    keep = (_keep_state and track is _track and not coef_at
            and 8 * (3 * prob.m + 1) * tracked.shape[0] <= working_memory_bytes())
    if keep:
        new_state = dict(T=T, subsample=subsample, store=bool(store_predictions),
                         batch_size=batch_size, n=n, gram=prob.gram, indices=indices,
                         spectral=prob.spectral,
                         random_state=random_state,
                         scale=scale, tracked=tracked, blocks=blocks,
                         block_states=[dict(k=0) for _ in blocks])
    losses = []  # per block: weighted losses of its samples (c, T + 1)
    err = np.zeros(T + 1) if prob.classifier else None
    preds = {} if store_predictions else None
    coefs = []
    done = 0
    for b, idx in enumerate(blocks):
        kw = dict(state=new_state["block_states"][b]) if keep else {}
        lo, er, pr, co = track(prob, idx, coef_at=coef_at, store=store_predictions, **kw)
        losses.append(lo)
        if err is not None:
            err += er
        if preds is not None:
            preds.update(zip(idx.tolist(), pr, strict=True))
        if co is not None:
            coefs.append(co)
        done += idx.shape[0]
        if verbose:
            print(f"[loo] {done}/{tracked.shape[0]} left-out runs "
                  f"({'toeplitz' if track is _track_toeplitz else 'recursion'}), "
                  f"{time.perf_counter() - tic:.1f}s")
    if keep:
        new_state.update(losses=losses, err=None if err is None else err.copy(),
                         preds=preds)
    return _finish(prob, losses, err, preds, indices, scale, fitted, full_predictions,
                   coefs, blocks, new_state if keep else None)


def _continue(prob, state, T, fitted, store, full_predictions, verbose, tic, keep):
    """:func:`iacv_path` continuing the runs saved in ``state`` to step ``T``."""
    k0 = state["T"]
    losses = []
    err = None
    if state["err"] is not None:
        err = np.zeros(T + 1)
        err[: k0 + 1] = state["err"]
    preds = state["preds"]
    blocks = state["blocks"]
    for idx, bstate, old in zip(blocks, state["block_states"], state["losses"], strict=True):
        lo, er, pr, _ = _track(prob, idx, store=store, state=bstate)
        lo[:, : k0 + 1] = old
        losses.append(lo)
        if err is not None:
            err[k0 + 1:] += er[k0 + 1:]
        if preds is not None:
            for i, row in zip(idx.tolist(), pr, strict=True):
                row[: k0 + 1] = preds[i]
                preds[i] = row
    if verbose:
        print(f"[loo] continued {state['tracked'].shape[0]} left-out runs from step {k0} "
              f"to {T}, {time.perf_counter() - tic:.1f}s")
    new_state = None
    if keep:
        new_state = dict(state, T=T, losses=losses,
                         err=None if err is None else err.copy(), preds=preds)
    return _finish(prob, losses, err, preds, state["indices"], state["scale"], fitted,
                   full_predictions, [], blocks, new_state)


def _finish(prob, losses, err, preds, indices, scale, fitted, full_predictions,
            coefs, blocks, state):
    """Normalise the sums of :func:`iacv_path` and assemble its result."""
    T = prob.T
    tracked = np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.intp)
    per = np.concatenate(losses) if losses else np.zeros((0, T + 1))
    if scale != 1.0 and tracked.size:
        loss = _regression_estimate(prob, per, tracked, fitted, scale, state)
    else:
        loss = per.sum(axis=0) / prob.W
    if err is not None:
        err = err * (scale / prob.W)
    predictions = None
    if preds is not None:
        predictions = np.full((indices.shape[0], T + 1), np.nan)
        untracked = np.flatnonzero(prob.rho[indices] == 0)
        if untracked.size and full_predictions is not None:
            # rows of zero weight are not data: their full-data predictions
            predictions[untracked] = full_predictions(indices[untracked])
        for row, i in enumerate(indices.tolist()):
            if i in preds:
                predictions[row] = preds[i]
    return Bunch(loss=loss, error=err, predictions=predictions, indices=indices,
                 coef=np.concatenate(coefs, axis=1) if coefs else None,
                 coef_indices=tracked, state=state)
