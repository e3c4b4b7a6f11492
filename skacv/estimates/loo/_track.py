"""IACV's left-out runs (Luo, Ren & Barber 2023): the per-sample constants,
the eigenbasis of the linear least-squares iterations, and one block of
left-out runs advanced by the fit's own :class:`~skacv.Iteration`.

The definition of the target and the derivation of the update are in
:mod:`skacv.estimates.loo._iacv`, which drives these blocks.
"""


import numpy as np
from scipy.special import expit

from ..._config import check_memory
from ...iterations._datafits import LeastSquares, log_loss_terms
from ...iterations._path import minibatch_gradient
from ...linalg._design import design_rows
from ._live_rows import live_rows, step_differences


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
        self.uses_hb = iteration.uses_heavy_ball(self.T)
        self.sw = np.sqrt(self.w)
        self.spectral = None
        self.gram = None
        self.gram_dtype = np.float64
        self._gram_cols = (None, None)
        self._X_csr = None

    def gram_columns(self, nz):
        """The columns ``nz`` (``None``: all) of ``gram`` in ``gram_dtype``;
        kept while the left-out runs' support stays the same (it settles)."""
        key, cols = self._gram_cols
        same = (nz is None and key is None) if (nz is None or key is None) else (
            key.shape == nz.shape and np.array_equal(key, nz))
        if cols is None or not same:
            cols = self.gram if nz is None else self.gram[:, nz]
            cols = np.asarray(cols, dtype=self.gram_dtype)
            self._gram_cols = (nz, cols)
        return cols

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
                     "Use loo_options={'subsample': <int>} or a smaller problem. ")
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


class _HessianImage:
    """The batch Hessian applied to the left-out runs' differences, ``X~^T W``
    with ``W = diag(curv) X~ dV`` (shape (n_samples, c)) not yet multiplied
    by ``X~^T`` (:func:`_apply_hessian` by the products by ``X~``): the runs'
    negative-gradient differences are then one product
    (:meth:`differences`)."""

    def __init__(self, W, design, residual):
        self.W, self.design, self.residual = W, design, residual

    def differences(self, inv, a, b, idx, sw_i, n_eff, fortran):
        """``dZ = -(X~^T W) inv + z a + UT b`` (:func:`_track`'s, before its
        ridge and mini-batch terms) as ``X~^T M``: ``z = X~^T r /
        n_eff`` (``r`` the fit's residual) and the runs' rows ``u_i =
        x~_{idx_i} / sw_i`` are columns of ``X~^T`` too, so ``M = -W inv + r
        a / n_eff`` plus ``b_i / sw_i`` at row ``idx_i`` of column ``i``
        (``fortran``: the result in Fortran order where the product gives
        it)."""
        M = self.W * -inv
        M += np.multiply.outer(self.residual, a / n_eff)
        M[idx, np.arange(idx.size)] += b / sw_i
        d = self.design
        if fortran and not d.sparse:
            return np.asarray(M.T @ d.X, dtype=np.float64).T
        return np.asarray(d.rmatvec(M), dtype=np.float64)


def _apply_hessian(prob, dV, curv, residual, rows=None, fortran=False):
    """``X~^T diag(curv) X~ @ dV`` (sum form; ``curv=None``: least squares).

    With the Gram matrix (least squares) the product takes only its columns
    where some difference is nonzero, in ``prob.gram_dtype`` (float32 from
    ``SpeedPolicy.loo_float32_min_features`` coefficients on), the result in
    float64, where they number at most ``loo_gram_max_columns`` a sample;
    above, a :class:`_HessianImage` of the products by ``X~`` and ``X~^T``
    (``residual``: the fit's). ``rows``: ``dV`` holds only these rows of the
    differences (the others zero: :class:`~._live_rows.LiveRows`), and the
    products read only their columns of ``X~``; ``fortran``: the Gram
    product in Fortran order (its rows then reduce fast).
    """
    d = prob.design
    n, p = d.n_samples, prob.m
    if rows is not None and rows.size >= 0.8 * p:  # (as the dense block)
        full = np.zeros((p, dV.shape[1]))
        full[rows] = dV
        dV, rows = full, None
    if curv is None and prob.gram is not None:
        if rows is not None:
            nz = rows
        else:
            nz = np.flatnonzero(np.any(dV != 0, axis=1))
            if nz.size >= 0.8 * dV.shape[0]:
                nz = None
        # its columns where they cost less than the products by X~, X~^T
        if (p if nz is None else nz.size) <= d.policy.loo_gram_max_columns * n:
            G = prob.gram_columns(nz)
            D = dV if nz is None or rows is not None else dV[nz]
            if fortran:
                return np.asarray(D.astype(G.dtype, copy=False).T @ G.T, dtype=np.float64).T
            if G.dtype == np.float64:
                return G @ D
            return np.asarray(G @ D.astype(G.dtype), dtype=np.float64)
    c = dV.shape[1]
    if not d.sparse and n * p * p + p * p * c < 2 * n * p * c:
        Xd = np.asarray(d.X, dtype=np.float64)
        Xc = Xd if curv is None else Xd * curv[:, None]
        return (Xc.T @ (Xd if rows is None else Xd[:, rows])) @ dV
    if rows is None:
        XdV = np.asarray(d.matvec(dV), dtype=np.float64)
    else:
        XdV = np.asarray(d.columns(rows) @ dV, dtype=np.float64)
    if curv is not None:
        XdV *= curv[:, None]
    return _HessianImage(XdV, d, residual)


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


def _step_pieces(prob, k, v, idx, U, y_i, sw_i, dV, in_all, rows=None, fortran=False):
    """The full step's gradient and the tracked samples' pieces at step ``k``
    (extrapolated point ``v``): ``(z, g, curv, N_S, HdV, mS, sig_S, in_S)``.

    ``z`` is the step's negative mean gradient (over the batch ``S``),
    ``g`` the tracked samples' residuals on the original scale, ``curv``
    their curvatures (``None`` for least squares), ``N_S`` the batch's
    weight, ``HdV`` the batch Hessian applied to the differences ``dV``
    (``rows``, ``fortran``: full batch, :func:`_apply_hessian`'s; its
    :class:`_HessianImage` where the products are by ``X~``),
    ``mS``/``sig_S`` the batch's centring terms (``None``/0 without a
    mini-batch or centring) and ``in_S`` which tracked samples are in the
    batch."""
    sp, W = prob.spectral, prob.W
    if sp is not None:  # least squares, full batch, linear iteration
        return (sp.c0 - sp.lam * v, y_i - U @ v, None, W, (W * sp.lam)[:, None] * dV,
                None, 0.0, in_all)
    design, datafit, sampler = prob.design, prob.datafit, prob.sampler
    Xv = np.asarray(design.matvec(v.astype(design.dtype, copy=False)), dtype=np.float64)
    r = datafit.residual(Xv, prob.y_tilde)
    curv_all = datafit.curvature(Xv, prob.y_tilde)
    g = r[idx] / sw_i
    curv = None if curv_all is None else curv_all[idx]
    if sampler is None:
        z = np.asarray(design.rmatvec(r), dtype=np.float64) / W
        HdV = _apply_hessian(prob, dV, curv_all, r, rows, fortran)
        return z, g, curv, W, HdV, None, 0.0, in_all
    S = sampler(k)
    rows = design.rows(S, prob.x_csr())
    XS = np.asarray(rows.dense(), dtype=np.float64)
    z = np.asarray(minibatch_gradient(rows, r[S], design.weight, v), dtype=np.float64)
    XdV = XS @ dV
    if curv_all is not None:
        XdV *= curv_all[S][:, None]
    mS, sig_S = None, 0.0
    if prob.centred:
        mS = XS.T @ prob.sw[S]
        sig_S = float(prob.sw[S] @ r[S])
    return (z, g, curv, float(prob.w[S].sum()), XS.T @ XdV, mS, sig_S,
            np.isin(idx, S, assume_unique=True))


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
    it, T = prob.iteration, prob.T
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
    # the runs stepped on the rows where they differ from the fit (None: all rows)
    live = live_rows(prob, idx, (dX1, dX2, dV))
    scale_i = None if prob.l1_scale is None else prob.l1_scale[idx]
    # scratch blocks of the negative-gradient differences, in their layout
    # (Fortran order on the live rows: :func:`_apply_hessian`)
    order = "C" if live is None else "F"
    buf, buf2 = np.empty((m, c), order=order), np.empty((m, c), order=order)
    UTo = UT if live is None else np.asfortranarray(UT)
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
            D = path[:, t][:, None] + ((dX1 if live is None else live.full("x1")) if t else 0.0)
            if sp is not None:
                D = sp.basis() @ D
            coefs[coef_at.index(t)] = D.T

    if not k0:
        record(0, UP[:, 0])
    in_all = np.ones(c, dtype=bool)
    for k in range(k0 + 1, T + 1):
        x1 = path[:, k - 1]
        x2 = path[:, k - 2] if k >= 2 else x1
        v = x1 if k == 1 else it.extrapolate_iterate(k - 1, x1, x2)
        z, g, curv, N_S, HdV, mS, sig_S, in_S = _step_pieces(
            prob, k, v, idx, U, y_i, sw_i, dV if live is None else live.v.D, in_all,
            None if live is None else live.v.rows, live is not None)
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
        if isinstance(HdV, _HessianImage):  # one product by X~^T
            dZ = HdV.differences(inv, N_S * inv - 1.0, coef_u * inv, idx, sw_i, N_S,
                                 live is not None)
        else:
            dZ = HdV
            dZ *= -inv
            dZ += np.multiply(z[:, None], N_S * inv - 1.0, out=buf2)
            dZ += np.multiply(UTo, coef_u * inv, out=buf)
        if mS is not None:
            dZ += np.multiply.outer(mS, eps_i * (g - q) * inv)
        if dl2_i is not None:
            t2 = (v[:, None] + dV) * dl2_i if live is None else live.dl2_term(v, dl2_i)
            dZ -= t2 if prob.pen is None else t2 * prob.pen[:, None]
        hb = it.hb(k) != 0.0
        pre = xk = None  # the fit's pre-prox point and iterate (a proximal iteration)
        if not it.is_linear:
            pre = it.combine(k, v, it.momentum_difference(k, x1, x2) if hb else None, z)
            xk = it.prox(k, pre)
        if live is not None:  # the rows where the runs may differ from the fit
            rows, dX, dV = live.step(it, k, x1, x2, path[:, k], pre, xk, dZ, hb, buf2)
            UTr = UTo if rows is None else UT[rows]
        else:
            dX, dV = step_differences(it, k, x1, x2, path[:, k], pre, xk, dV, dX1, dX2, dZ, hb,
                                      scale_i)
            if dX2 is not None:
                dX2 = dX1
            dX1, UTr = dX, UT
        qx = np.einsum("ij,ij->j", UTr, dX)
        q = qx if dV is dX else np.einsum("ij,ij->j", UTr, dV)
        record(k, UP[:, k] + qx)
    diffs = {"dX1": dX1, "dX2": dX2, "dV": dV} if live is None else live.finish()
    if state is not None:
        state.update(k=T, q=q, **diffs)
    return loss, err, preds, coefs
