"""Leave-one-out along a trajectory: IACV, brute-force refits, NS / IJ / ALO.

Definition (every function of this module computes the same target)
-------------------------------------------------------------------
The leave-``i``-out run is the estimator refitted without sample ``i`` with
the *same* algorithm, start (zero), step size (``step_size_`` of the full
fit, also when it was ``"auto"``), schedule and, for SGD, the same
mini-batches with ``i`` deleted. Its objective is the estimator's objective
on the remaining data: a mean-form loss is divided by the remaining weight
``W - rho_i``, a penalty keeps its own form (``IterativeRidge``'s
``alpha ||w||^2`` is a sum-form penalty, the Lasso/logistic ``alpha`` mean
form). With ``fit_intercept=True`` the left-out fit re-centres ``X`` and
``y`` on the remaining data (least squares) or refits its unpenalised
intercept coordinate (logistic). ``loo_path_[t]`` is the weighted mean over
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
from joblib import Parallel, delayed
from scipy import linalg
from scipy.special import expit
from sklearn.base import clone, is_classifier
from sklearn.exceptions import NotFittedError
from sklearn.utils import Bunch, check_random_state
from sklearn.utils.validation import check_is_fitted

from ._config import check_memory, get_config
from ._datafit import log_loss_terms
from ._design import Design
from ._iterations import MinibatchSampler
from ._path import RowBlock, design_rows
from ._validation import check_sample_weight

# arrays of size n_coef per tracked sample (state, temporaries) for the chunk size
_ARRAYS_PER_SAMPLE = 10


class _NEff:
    """Stand-in for a design in ``estimator._l2(design)`` (reads ``n_eff``)."""

    def __init__(self, n_eff):
        self.n_eff = n_eff


# ----------------------------------------------------------------------------
# the problem: per-sample constants, spectral basis
# ----------------------------------------------------------------------------


def _removed_weights(design):
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

    def __init__(self, est, design, y_tilde, iteration, coef_path, datafit, y):
        self.design, self.iteration, self.datafit = design, iteration, datafit
        self.y_tilde = np.asarray(y_tilde, dtype=np.float64)
        self.y = np.asarray(y, dtype=np.float64)
        self.path = np.asarray(coef_path, dtype=np.float64)
        self.T = self.path.shape[1] - 1
        self.n, self.m = design.n_samples, self.path.shape[0]
        self.W = float(design.n_eff)
        self.w, self.rho, self.W_minus = _removed_weights(design)
        self.classifier = datafit is not None and datafit.name == "logistic"
        self.quadratic = datafit is None
        self.centred = self.quadratic and design.fit_intercept
        with np.errstate(divide="ignore", invalid="ignore"):
            self.eps = np.where(self.rho > 0, self.rho / self.W_minus, 0.0)
        if not self.centred:
            self.eps = np.zeros(self.n)
        l2_minus = est._l2(_NEff(np.where(self.W_minus > 0, self.W_minus, 1.0)))
        self.dl2 = np.broadcast_to(np.asarray(l2_minus, dtype=np.float64), (self.n,)) \
            - float(iteration.l2)
        if not np.any(self.dl2):
            self.dl2 = None
        pen = getattr(iteration, "penalized", None)
        self.pen = None if pen is None else pen(self.m)
        self.sampler = getattr(iteration, "sampler", None)
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
            self.path = V.T @ prob.path
            self.c0 = V.T @ (np.asarray(d.rmatvec(prob.y_tilde), dtype=np.float64) / W)
            self._Q = None
        else:
            lam, Q = d.gram_eigh("samples")
            keep = lam > max(lam[-1], 0) * max(n, p) * np.finfo(np.float64).eps
            lam, Q = lam[keep], Q[:, keep]
            self.lam, self._Q = lam, Q
            if fitted is None:
                fitted = d.matvec(prob.path.astype(d.dtype, copy=False))
            scale = np.sqrt(W * lam)
            self.path = (Q.T @ np.asarray(fitted, dtype=np.float64)) / scale[:, None]
            self.c0 = np.sqrt(lam) * (Q.T @ prob.y_tilde) / np.sqrt(W)
            self.V = None
        self._prob = prob

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
        dZ = inject(k) - c * dV
        hb = it.hb(k) != 0.0
        dX = it.combine(k, dV, (dX1 - dX2) if hb else None, dZ)
        dV = it.extrapolate(k, dX, dX1)
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
        v_path[:, k - 1] = it.extrapolate(k - 1, path[:, k - 1], path[:, k - 2])
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
    loss = w_i @ (res * res)
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


def _track(prob, idx, coef_at=(), store=False):
    """Run the left-out trajectories of the samples ``idx`` (all of positive weight).

    Returns the weighted loss sums ``sum_i w_i loss_i^t`` (and error sums for
    classifiers), optionally the predictions (len(idx), T + 1) and the
    left-out coefficients at the iterates ``coef_at`` (in the fit's
    coordinates), shape (len(coef_at), len(idx), n_coef).
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
    dX1 = np.zeros((m, c))
    dX2 = np.zeros((m, c)) if prob.uses_hb else None
    dV = dX1
    buf = np.empty((m, c))
    loss = np.zeros(T + 1)
    err = np.zeros(T + 1) if prob.classifier else None
    preds = np.empty((c, T + 1)) if store else None
    coef_at = list(coef_at)
    coefs = np.empty((len(coef_at), c, prob.m)) if coef_at else None

    def record(t, eta):
        if prob.classifier:
            loss[t] = w_i @ log_loss_terms(eta, y_i)
            err[t] = w_i @ ((eta > 0) != (y_i > 0.5))
            if store:
                preds[:, t] = expit(eta)
        else:
            res = (1.0 + eps_i) * (y_i - eta)  # left-out residual, original scale
            loss[t] = w_i @ (res * res)
            if store:
                preds[:, t] = prob.y[idx] - res
        if coef_at and t in coef_at:
            D = path[:, t][:, None] + (dX1 if t else 0.0)
            if sp is not None:
                D = sp.basis() @ D
            coefs[coef_at.index(t)] = D.T

    record(0, UP[:, 0])
    design, datafit, sampler = prob.design, prob.datafit, prob.sampler
    in_all = np.ones(c, dtype=bool)
    q = np.zeros(c)  # u_i^T dV_i^{k-1}
    for k in range(1, T + 1):
        x1 = path[:, k - 1]
        x2 = path[:, k - 2] if k >= 2 else x1
        v = x1 if k == 1 else it.extrapolate(k - 1, x1, x2)
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
            if datafit is None:
                r = prob.y_tilde - Xv
                curv_all = None
            else:
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
                XS = np.asarray(RowBlock(design, S, prob.x_csr()).dense(), dtype=np.float64)
                N_S = float(prob.w[S].sum())
                z = XS.T @ r[S] / N_S if N_S > 0 else np.zeros(prob.m)
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
        dPre = it.combine(k, dV, (dX1 - dX2) if hb else None, dZ)
        if it.is_linear:
            dX = dPre
        else:
            pre = it.combine(k, v, (x1 - x2) if hb else None, z)
            xk = it.prox(k, pre)
            dX = it.prox(k, np.add(dPre, pre[:, None], out=dPre))
            dX -= xk[:, None]
        dV = it.extrapolate(k, dX, dX1)
        if dX2 is not None:
            dX2 = dX1
        dX1 = dX
        qx = np.einsum("ij,ij->j", UT, dX)
        q = qx if dV is dX else np.einsum("ij,ij->j", UT, dV)
        record(k, UP[:, k] + qx)
    return loss, err, preds, coefs


# ----------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------


def _block_size(prob, batch_size, n_steps=0):
    """Number of left-out runs advanced together."""
    m = prob.m if prob.spectral is None else prob.spectral.lam.shape[0]
    per = 8 * (m * _ARRAYS_PER_SAMPLE + 8 * n_steps + prob.T + 1)
    if batch_size is None:
        return int(max(1, get_config()["working_memory"] // per))
    check_memory(
        per * int(batch_size),
        f"the leave-one-out state of {int(batch_size)} samples x {m} coefficients",
        "Lower loo_batch_size (or leave it None to size the blocks from "
        "skacv.get_config()['working_memory']). ",
    )
    return int(batch_size)


def iacv_path(est, design, y_tilde, iteration, coef_path, y, *, datafit=None,
              batch_size=None, subsample=None, store_predictions=False, random_state=None,
              fitted=None, coef_at=(), spectral="auto", full_predictions=None, verbose=0):
    """Leave-one-out losses of every iterate by IACV (see the module docstring).

    Parameters
    ----------
    est : fitted estimator
        Supplies ``_l2`` (the penalty of the left-out objective).
    design : Design
        The fit's design (rows of ``X~``, centred and weighted).
    y_tilde : ndarray of shape (n_samples,)
        The fit's target (centred and weighted; labels {0, 1} for logistic).
    iteration : Iteration
        The iteration object of the fit.
    coef_path : ndarray of shape (n_coef, T + 1)
        Iterates in the fit's coordinates.
    y : ndarray of shape (n_samples,)
        Original target (least squares) or labels in {0, 1}.
    datafit : None or Logistic
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

    Returns
    -------
    result : Bunch
        ``loss`` (T + 1,), ``error`` (T + 1,) or None, ``predictions``
        (n_loo, T + 1) or None, ``indices`` (n_loo,), ``coef``
        (len(coef_at), n_tracked, n_coef) or None with ``coef_indices``.
    """
    tic = time.perf_counter()
    prob = _Problem(est, design, y_tilde, iteration, coef_path, datafit, y)
    n, T = prob.n, prob.T
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
        if 16 * r * r <= get_config()["path_memory_limit"]:
            prob.spectral = _Spectral(prob, fitted)
    if prob.spectral is None and prob.quadratic and prob.sampler is None:
        if 8 * prob.m * prob.m <= get_config()["working_memory"]:
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
    loss = np.zeros(T + 1)
    err = np.zeros(T + 1) if prob.classifier else None
    preds = {} if store_predictions else None
    coefs = []
    done = 0
    for idx in blocks:
        lo, er, pr, co = track(prob, idx, coef_at=coef_at, store=store_predictions)
        loss += lo
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
    loss *= scale / prob.W
    if err is not None:
        err *= scale / prob.W
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
                 coef_indices=np.concatenate(blocks) if blocks else tracked)


def _full_path_predictions(est, X):
    """Full-data prediction paths (probabilities for classifiers)."""
    eta = np.asarray(X @ est.coef_path_, dtype=np.float64) + est.intercept_path_
    return expit(eta) if is_classifier(est) else eta


def _estimator_loo(est, design, y_tilde, iteration, X, y, sample_weight):
    """Fill ``loo_path_`` (and ``loo_error_path_``, ``loo_predictions_``)."""
    datafit = est._make_datafit(design) if hasattr(est, "_make_datafit") else None
    path = est._fit_coef_path() if hasattr(est, "_fit_coef_path") else est.coef_path_
    store = bool(getattr(est, "store_loo_predictions", False))
    res = iacv_path(
        est, design, y_tilde, iteration, path, y, datafit=datafit,
        batch_size=getattr(est, "loo_batch_size", None),
        subsample=getattr(est, "loo_subsample", None), store_predictions=store,
        random_state=getattr(est, "random_state", None),
        fitted=getattr(est, "_fitted_path", None), verbose=getattr(est, "verbose", 0),
        full_predictions=lambda idx: _full_path_predictions(est, X[idx]),
    )
    est.loo_path_ = res.loss
    if res.error is not None:
        est.loo_error_path_ = res.error
    if store:
        est.loo_predictions_ = res.predictions
        est.loo_indices_ = res.indices


# ----------------------------------------------------------------------------
# brute force: refits without each sample
# ----------------------------------------------------------------------------


def _reference_fit(estimator, X, y, sample_weight):
    """The fitted full-data estimator whose path the leave-one-out follows."""
    try:
        check_is_fitted(estimator)
        return estimator
    except NotFittedError:
        est = clone(estimator)
        params = est.get_params()
        est.set_params(**{k: False for k in ("estimate_risk", "estimate_loo",
                                               "store_loo_predictions") if k in params})
        return est.fit(X, y, sample_weight=sample_weight)


def _refit_template(full):
    """Unfitted clone reproducing the full fit's algorithm (step fixed)."""
    est = clone(full)
    params = est.get_params()
    new = {"step_size": float(full.step_size_), "warm_start": False}
    new.update({k: False for k in ("estimate_risk", "estimate_loo", "store_loo_predictions")
                if k in params})
    est.set_params(**new)
    if hasattr(full, "preconditioner_"):
        # data-dependent parts of the algorithm are kept, like the step size
        # (honoured by estimators that read it; EigenPro rebuilds P otherwise)
        est._preconditioner_override = full.preconditioner_
    return est


def _full_sampler(full, n_samples):
    seed = getattr(full, "_batch_seed", None)
    if seed is None or getattr(full, "solver", None) != "sgd":
        return None
    return MinibatchSampler(n_samples, full.batch_size, seed)


def _refit_one(est, X, y, sample_weight, i, sampler, return_coef):
    """Refit without one unit of weight of sample ``i``; its prediction path."""
    n = X.shape[0]
    if sample_weight is None or sample_weight[i] <= 1:
        keep = np.arange(n) != i
        Xi, yi = X[keep], y[keep]
        swi = None if sample_weight is None else sample_weight[keep]
        if sampler is not None:
            est._sampler_override = sampler.without(i)
    else:
        Xi, yi = X, y
        swi = sample_weight.copy()
        swi[i] -= 1.0
        if sampler is not None:
            est._sampler_override = sampler
    est.fit(Xi, yi, sample_weight=swi)
    pred = _full_path_predictions(est, X[i: i + 1])[0]
    if return_coef:
        return pred, est.coef_path_, est.intercept_path_
    return pred


def _exact_loo(estimator, X, y, sample_weight=None, n_jobs=None, indices=None,
               return_coef=False):
    """Refits of :func:`exact_loo_path` for the samples ``indices``."""
    full = _reference_fit(estimator, X, y, sample_weight)
    X, y, sw = _validate(full, X, y, sample_weight)
    n = X.shape[0]
    if indices is None:
        indices = np.arange(n)
    template = _refit_template(full)
    sampler = _full_sampler(full, n)
    w = np.ones(n) if sw is None else sw
    todo = [i for i in indices if w[i] > 0]
    out = Parallel(n_jobs=n_jobs)(
        delayed(_refit_one)(clone(template), X, y, sw, i, sampler, return_coef) for i in todo
    )
    return full, X, y, sw, dict(zip(todo, out, strict=True))


def _validate(full, X, y, sample_weight):
    from sklearn.utils.validation import validate_data

    X, y = validate_data(full, X, y, accept_sparse=("csr", "csc"),
                         dtype=[np.float64, np.float32], reset=False)
    sw = check_sample_weight(sample_weight, X, np.float64)
    return X, y, sw


def _pointwise_loss(full, y, pred):
    """Loss of predictions ``pred`` (n, ...) of targets ``y`` (n,)."""
    if is_classifier(full):
        t = (y == full.classes_[1]).astype(np.float64)
        t = t.reshape(t.shape + (1,) * (pred.ndim - 1))
        p = np.clip(pred, 1e-300, 1.0)
        q = np.clip(1.0 - pred, 1e-300, 1.0)
        return -(t * np.log(p) + (1.0 - t) * np.log(q))
    r = np.asarray(y, dtype=np.float64).reshape(y.shape + (1,) * (pred.ndim - 1)) - pred
    return r * r


def exact_loo_path(estimator, X, y, sample_weight=None, n_jobs=None, return_predictions=False):
    """Brute-force leave-one-out error of every iterate (the reference).

    Refits ``clone(estimator)`` once per sample, without the sample, with the
    step size of the full fit (``step_size_``), no estimates, and for
    ``solver="sgd"`` the full fit's mini-batches with the sample deleted; the
    prediction of every iterate of the refit at the left-out sample gives the
    loss. With ``sample_weight`` (frequency weights) one unit of weight is
    removed (``w_i - 1``, or the whole row when ``w_i <= 1``) and the mean
    is weighted by ``w_i``; with integer weights this is the leave-one-out of
    the data with repeated rows. Cost: ``n_samples`` full fits.

    Parameters
    ----------
    estimator : TrajectoryLasso, IterativeRidge or TrajectoryLogisticRegression
        Fitted (its path is the one left out) or not (a clone is fitted first).
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    sample_weight : array-like of shape (n_samples,), default=None
    n_jobs : int, default=None
        Parallel refits (joblib).
    return_predictions : bool, default=False
        Also return the left-out predictions (probabilities of ``classes_[1]``
        for a classifier).

    Returns
    -------
    loo_path : ndarray of shape (n_iter_ + 1,)
        Weighted mean leave-one-out loss (squared error; log-loss for a
        classifier) of every iterate.
    predictions : ndarray of shape (n_samples, n_iter_ + 1)
        Only if ``return_predictions``. Rows of zero weight hold the
        full-data predictions.
    """
    full, X, y, sw, fits = _exact_loo(estimator, X, y, sample_weight, n_jobs)
    n = X.shape[0]
    w = np.ones(n) if sw is None else sw
    preds = np.empty((n, full.n_iter_ + 1))
    for i in range(n):
        preds[i] = fits[i] if i in fits else _full_path_predictions(full, X[i: i + 1])[0]
    path = w @ _pointwise_loss(full, y, preds) / w.sum()
    return (path, preds) if return_predictions else path


# ----------------------------------------------------------------------------
# NS / IJ / ALO at the last iterate
# ----------------------------------------------------------------------------


def _unweighted_rows(est, X, y, design):
    """Unweighted rows in the fit's coordinates and the target of the fit."""
    if hasattr(est, "_design"):  # logistic: [X, 1], labels {0, 1}
        U = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
        U = np.asarray(U, dtype=np.float64)
        if est.fit_intercept:
            U = np.hstack([U, np.ones((U.shape[0], 1))])
        return U, (y == est.classes_[1]).astype(np.float64), 0.0
    U = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
    U = np.asarray(U, dtype=np.float64) - design.x_offset.astype(np.float64)
    y_offset, _ = design.center_y(y)
    y = np.asarray(y, dtype=np.float64)
    return U, y - float(y_offset), float(y_offset)


def approximate_loo(estimator, X, y, sample_weight=None, method="alo"):
    """Closed-form approximate leave-one-out at the last iterate.

    With ``theta`` the last iterate, ``F_{-i}`` the left-out objective
    (sum form; see :func:`exact_loo_path` for the definition) and ``H_{-i}``
    its Hessian on the active set ``E`` (every coordinate for smooth
    penalties; the non-zero penalised coordinates and the intercept for
    ``l1``, as in Rad & Maleki 2020 and Stephenson & Broderick 2020):

    * ``"ns"`` (Newton step; Beirami et al. 2017, Rad & Maleki 2020):
      ``theta_{-i} = theta - H_{-i}^{-1} grad F_{-i}(theta)``;
    * ``"ij"`` (infinitesimal jackknife; Giordano et al. 2019): the same
      with the Hessian that keeps sample ``i``;
    * ``"alo"`` (Rad & Maleki 2020): the Newton step assuming ``theta`` is
      the minimiser (``grad F(theta) = 0`` on ``E``), which is the leverage
      formula ``eta_i + ell'_i h_i / (1 - ell''_i h_i)``.

    ``"ns"`` and ``"ij"`` keep the gradient of ``F`` at ``theta``, so they
    target the left-out *minimiser* even before convergence (Luo, Ren &
    Barber 2023 compare IACV with them along the path). All three are exact
    leave-one-out for ridge least squares at the minimiser; NS is exact for
    any quadratic objective. Only the predictions are formed (Sherman-Morrison:
    one Cholesky factorisation, ``O(n |E|^2)``).

    Parameters
    ----------
    estimator : fitted TrajectoryLasso, IterativeRidge or TrajectoryLogisticRegression
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        Training data of the fit.
    y : array-like of shape (n_samples,)
    sample_weight : array-like of shape (n_samples,), default=None
        The fit's weights (frequency weights; one unit is left out).
    method : {"alo", "ns", "ij"}, default="alo"

    Returns
    -------
    result : Bunch
        ``predictions`` (n_samples,): left-out predictions (probabilities of
        ``classes_[1]`` for a classifier); ``loss``: their weighted mean
        squared error (log-loss); ``error``: misclassification rate
        (classifier only); ``active_set`` the coordinates ``E``.
    """
    check_is_fitted(estimator)
    if method not in ("alo", "ns", "ij"):
        raise ValueError(f"method must be 'alo', 'ns' or 'ij'; got {method!r}.")
    X, y, sw = _validate(estimator, X, y, sample_weight)
    classifier = hasattr(estimator, "_design")
    if classifier:
        design = estimator._design(X, sw)
        theta = np.asarray(estimator._fit_coef_path()[:, -1], dtype=np.float64)
    else:
        design = Design(X, sw, estimator.fit_intercept)
        theta = np.asarray(estimator.coef_path_[:, -1], dtype=np.float64)
    iteration = estimator._make_iteration(estimator.step_size_, design)
    w, rho, W_minus = _removed_weights(design)
    W, m = float(design.n_eff), theta.shape[0]
    l1 = float(getattr(iteration, "l1", getattr(iteration, "alpha", 0.0)))
    pen = iteration.penalized(m) if hasattr(iteration, "penalized") else np.ones(m, bool)
    E = np.arange(m) if l1 == 0 else np.flatnonzero((theta != 0) | ~pen)
    check_memory(8 * X.shape[0] * m, f"the dense rows for {method.upper()} ({X.shape[0]} x {m})")
    U, target, y_offset = _unweighted_rows(estimator, X, y, design)
    eta = U @ theta
    if classifier:
        from ._datafit import Logistic

        g = Logistic().residual(eta, target)
        curv = Logistic().curvature(eta, target)
        kappa = rho
        eps = np.zeros_like(rho)
    else:
        g, curv = target - eta, np.ones_like(eta)
        eps = rho / W_minus if estimator.fit_intercept else np.zeros_like(rho)
        kappa = rho * (1.0 + eps)
    l2 = float(iteration.l2)
    l2_minus = np.broadcast_to(np.asarray(
        estimator._l2(_NEff(np.where(W_minus > 0, W_minus, 1.0))), dtype=np.float64), w.shape)
    beta_i = W_minus * l2_minus  # sum-form ridge of the left-out objective
    beta_ref = float(np.mean(beta_i[rho > 0])) if np.any(rho > 0) else W * l2
    UE = U[:, E]
    penE = pen[E].astype(np.float64)
    A = UE.T @ (UE * (w * curv)[:, None]) + np.diag(beta_ref * penE)
    try:
        cf = linalg.cho_factor(A, lower=True)
    except linalg.LinAlgError as exc:
        raise ValueError(
            f"The Hessian on the active set ({E.size} coordinates) is not positive "
            f"definite, so {method.upper()} is undefined (p > n without penalty, or "
            "collinear features). Use estimate_loo=True (IACV) instead."
        ) from exc
    rhs = np.column_stack([
        -(UE.T @ (w * g)),                 # gradient of the data fit
        penE * theta[E],                   # P theta
        penE * np.sign(theta[E]),          # l1 sub-gradient on E
    ])
    sol = linalg.cho_solve(cf, rhs)
    proj = UE @ sol
    h = np.empty(U.shape[0])
    L = np.tril(cf[0])
    step = max(1, int(get_config()["working_memory"] // (8 * max(E.size, 1))))
    for s in range(0, U.shape[0], step):
        Z = linalg.solve_triangular(L, UE[s: s + step].T, lower=True)
        h[s: s + step] = np.einsum("ij,ij->j", Z, Z)
    if method == "alo":
        num = kappa * g * h + (beta_i - W * l2) * proj[:, 1] - rho * l1 * proj[:, 2]
    else:
        num = proj[:, 0] + beta_i * proj[:, 1] + W_minus * l1 * proj[:, 2] + kappa * g * h
    if method == "ij":
        denom = np.ones_like(h)
    else:
        denom = 1.0 - kappa * curv * h
        if np.any(denom <= 1e-12):
            import warnings

            warnings.warn(
                f"{int(np.sum(denom <= 1e-12))} samples have leverage 1 on the active "
                "set: their left-out prediction is undefined (infinite).", RuntimeWarning,
                stacklevel=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        eta_loo = eta - np.where(denom > 1e-12, num / denom, np.inf)
    if classifier:
        loss = w @ log_loss_terms(eta_loo, target) / W
        err = w @ ((eta_loo > 0) != (target > 0.5)) / W
        return Bunch(predictions=expit(eta_loo), loss=float(loss), error=float(err),
                     active_set=E)
    res = (1.0 + eps) * (target - eta_loo)
    pred = np.asarray(y, dtype=np.float64) - res
    return Bunch(predictions=pred, loss=float(w @ (res * res) / W), active_set=E)
