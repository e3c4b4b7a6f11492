"""Memory matrices of settled paths in state-space form.

When the support of a proximal trajectory stops changing after a step
``k0`` (:func:`settled_step`), and for linear iterations from the start, the
Jacobian chains advance by one fixed linear map: in the eigenbasis of the
support's Gram matrix every direction follows the scalar recursion of the
iteration, so that the memory matrices after ``k0`` are ``O(r T)`` numbers
(:class:`SettledMemory`) and the corrections of the risk estimate forward
recursions, linear in ``T`` (Bellec & Tan 2024's estimate, computed without
its ``(T + 1) x (T + 1)`` matrices).
"""

import numpy as np
from scipy import linalg

from ..._trace import taken
from ...utils._parallel import factorization_blas


def free_steps(iteration, coef_path):
    """Boolean ``(p, T)``: coordinate ``j`` is free at step ``k`` (column
    ``k - 1``): in the support of ``x^k``, penalised like every other row
    (no trailing unpenalised coordinate when the penalty has a ridge part),
    with the plain extrapolation of step ``k`` (an iteration without a
    heavy ball)."""
    free = coef_path[:, 1:] != 0
    pen = iteration.penalty
    if pen.n_unpenalized and np.any(pen.l2_):
        free[coef_path.shape[0] - pen.n_unpenalized:] = False
    for k in range(1, coef_path.shape[1]):
        beta = float(iteration.beta(k))
        coef = iteration.extrapolation_coefficients(k, coef_path[:, k], coef_path[:, k - 1])
        if coef is not None:
            free[:, k - 1] &= (coef[0] == 1.0 + beta) & (coef[1] == -beta)
    return free


def settled_step(iteration, coef_path):
    """The step ``k0`` after which the chains of a proximal trajectory are one
    fixed linear map on one support, or ``None``.

    From step ``k0 + 1`` on, every step keeps the support ``S`` of ``x^T``
    (the prox's Jacobian mask), with the plain extrapolation on ``S``
    (:func:`free_steps`), and the tangents ``dx^{k0}`` (and ``dv^{k0}``:
    also ``x^{k0-1}`` on ``S`` with an extrapolation) live on ``S``. The
    chains then advance by the same scalar recursion in every eigendirection
    of ``X~_S^T X~_S`` (:class:`SettledMemory`). ``None`` with a heavy ball
    (its difference reaches two steps back) or fewer than three steps.
    """
    T = coef_path.shape[1] - 1
    if T < 3 or iteration.uses_heavy_ball(T):
        return None
    lag = 2 if iteration.extrapolates(T) else 1
    masks = coef_path != 0
    S = masks[:, T]
    same = np.all(masks == S[:, None], axis=0)  # (T + 1,)
    good = same.copy()
    good[1:] &= np.all(free_steps(iteration, coef_path)[S], axis=0)
    # first steps from which every later one is good / has the support S
    first_good = T + 1 - int(np.argmin(good[::-1])) if not good.all() else 0
    first_same = T + 1 - int(np.argmin(same[::-1])) if not same.all() else 0
    k0 = max(2, first_good - 1, first_same + lag - 1)
    return k0 if k0 < T else None


class SettledMemory:
    """Memory matrices of a proximal trajectory whose support settles (or of
    a linear iteration, settled from the start: :func:`linear_settled_memory`)
    in state-space form: ``O(r T)`` numbers instead of ``(T + 1)^2``.

    Up to step ``k0`` (:func:`settled_step`) the memory matrices are dense
    (``A_head``, ``A_sources_head``, from the chains in coordinates). After
    it, the chains live on the support ``S`` and advance by the
    iteration's own linear step; in the eigenbasis ``V`` of
    ``X~_S^T X~_S / n_eff = V diag(lam) V^T`` (``r`` directions: ``|S|``
    less the numerical null space, which carries nothing) every coordinate follows the
    scalar recursion of :func:`~skacv.estimates.risk._spectral.spectral_memory_matrix`
    on its own. With the probes' images ``zeta = V^T X~_S^T Z`` (r, m), the
    sum over the probes of a chain's readout ``(1/m) sum_i zeta_ji w_ji``
    follows the same recursion, so that

        A[t, s] = sum_j cx_j(t, s),    A_sources[t, s] = sum_j cv_j(t, s)

    where ``(cx, cv)(., s)`` is that recursion started from the collapsed
    chains of the head (``Cx``, ``Cv`` at step ``k0``, sources ``s < k0``) or
    injected at step ``s + 1`` with ``omega_j = (1/m) sum_i zeta_ji^2 / n_eff``
    (sources ``s >= k0``). These are the Hutchinson
    estimates of the chains in coordinates with the same probes, up to
    rounding. Every operation on the matrices (:meth:`solve`, :meth:`apply`,
    :meth:`inverse_row_norms`) advances the recursion with all sources
    summed against a right-hand side: ``O(r q)`` per step for ``q`` columns.

    Parameters
    ----------
    iteration : Iteration
    T : int
    A_head, A_sources_head : ndarray of shape (k0 + 1, k0 + 1)
    lam, omega : ndarray of shape (r,)
        Eigenvalues of ``X~_S^T X~_S / n_eff`` and the injections' weights.
    Cx, Cv : ndarray of shape (r, k0)
    """

    def __init__(self, iteration, T, A_head, A_sources_head, lam, omega, Cx, Cv):
        self.iteration, self.T = iteration, int(T)
        self.k0 = A_head.shape[0] - 1
        self.A_head = np.tril(np.asarray(A_head, dtype=np.float64), -1)
        self.Av_head = np.tril(np.asarray(A_sources_head, dtype=np.float64), -1)
        self.lam = np.asarray(lam, dtype=np.float64)[:, None]
        self.omega = np.asarray(omega, dtype=np.float64)[:, None]
        self.Cx = np.asarray(Cx, dtype=np.float64)
        self.Cv = np.asarray(Cv, dtype=np.float64)

    @property
    def rank(self):
        """Number of eigendirections ``r``."""
        return self.lam.shape[0]

    def _step(self, k, Hv, Hx, inject):
        """Step ``k`` of the summed states ``H = sum_s c(., s) u_s^T`` (r, q),
        with source ``k - 1`` injected against ``inject`` (q,)."""
        dz = Hv * -self.lam
        dz += self.omega * inject[None, :]
        Hx_new, Hv_new = self.iteration.tangent(k, Hv, Hx, None, dz, None, n_free=0)
        return Hx_new, Hv_new

    def _start(self, U_head):
        """States at step ``k0`` from the head sources' columns ``U_head`` (q, k0)."""
        Hx = self.Cx @ U_head.T
        Hv = Hx if self.Cv is self.Cx else self.Cv @ U_head.T
        return Hx, Hv

    def solve(self, Fv, F=None, n_eff=1.0, c=0.0):
        """Corrected residuals of the sources and of the outputs.

        ``(1 - c/n) Rv_t = Fv_t + sum_{s<t} A_sources[t, s] Rv_s / n`` and
        ``(1 - c/n) Rx_t = F_t + sum_{s<t} A[t, s] Rv_s / n`` (``n = n_eff``;
        columns ``t``): the products by ``(I (1 - c/n) - A_sources/n)^{-1}``
        of :func:`~skacv.estimates.risk._readout.risk_from_memory`.

        Parameters
        ----------
        Fv : ndarray of shape (q, T + 1)
        F : ndarray of shape (q, T + 1) or None
            ``None``: the outputs are the sources (no extrapolation; then
            ``A = A_sources`` and ``Rx`` is ``Rv``).
        n_eff, c : float

        Returns
        -------
        Rv, Rx : ndarray of shape (q, T + 1)
        """
        k0, T = self.k0, self.T
        d = 1.0 - c / n_eff
        Fv = np.asarray(Fv, dtype=np.float64)
        Rv = np.empty_like(Fv)
        L = np.eye(k0 + 1) * d - self.Av_head / n_eff
        Rv[:, :k0 + 1] = linalg.solve_triangular(L, Fv[:, :k0 + 1].T, lower=True,
                                                 check_finite=False).T
        Rx = Rv if F is None else np.empty_like(Fv)
        if F is not None:
            F = np.asarray(F, dtype=np.float64)
        if Rx is not Rv:
            Rx[:, :k0 + 1] = (F[:, :k0 + 1] + Rv[:, :k0 + 1] @ self.A_head.T / n_eff) / d
        Hx, Hv = self._start(Rv[:, :k0])
        for k in range(k0 + 1, T + 1):
            Hx, Hv = self._step(k, Hv, Hx, Rv[:, k - 1])
            Rv[:, k] = (Fv[:, k] + Hv.sum(axis=0) / n_eff) / d
            if Rx is not Rv:
                Rx[:, k] = (F[:, k] + Hx.sum(axis=0) / n_eff) / d
        return Rv, Rx

    def apply(self, U):
        """``(A U^T)^T`` and ``(A_sources U^T)^T``: ``Y[:, t] = sum_{s<t} A[t, s]
        U[:, s]`` for ``U`` of shape (q, T + 1) (the row sums with ``U = 1``,
        the dense matrices with ``U = I``)."""
        k0, T = self.k0, self.T
        U = np.asarray(U, dtype=np.float64)
        Y = np.empty_like(U)
        Yv = np.empty_like(U)
        Y[:, :k0 + 1] = U[:, :k0 + 1] @ self.A_head.T
        Yv[:, :k0 + 1] = U[:, :k0 + 1] @ self.Av_head.T
        Hx, Hv = self._start(U[:, :k0])
        for k in range(k0 + 1, T + 1):
            Hx, Hv = self._step(k, Hv, Hx, U[:, k - 1])
            Y[:, k] = Hx.sum(axis=0)
            Yv[:, k] = Hv.sum(axis=0)
        return Y, Yv

    def dense(self):
        """The dense ``(A, A_sources)``, shape (T + 1, T + 1) each."""
        Y, Yv = self.apply(np.eye(self.T + 1))
        return Y.T, Yv.T

    def nonnegative(self, rounding):
        """Whether every entry of ``A_sources`` is ``>= 0``: no momentum, a
        non-negative head, non-negative weights and starting states, and
        every step's multiplier ``1 - eta_k (lam_j + l2) >= 0`` (a step
        within ``1 / L``): every entry is then a sum of non-negative terms."""
        it, k0, T = self.iteration, self.k0, self.T
        if it.has_momentum(T):
            return False
        if np.any(self.Av_head < 0) or np.any(self.omega < 0) or np.any(self.Cv < 0):
            return False
        ones = np.ones_like(self.lam)
        for k in range(k0 + 1, T + 1) if it.schedule is not None else [k0 + 1]:
            # a step of exactly 1 / L leaves a multiplier of -4e-16 on the top
            # eigendirection: terms that small change no l1 norm beyond rounding
            mu = it.tangent(k, ones, ones, None, -self.lam, None, n_free=0)[0]
            if np.any(mu < -rounding):
                return False
        return True

    def inverse_row_norms(self, n_eff, policies, c=0.0):
        """l1 norms of the rows of ``(I (1 - c/n) - A_sources/n)^{-1}``.

        Row ``t`` is column ``t`` of :meth:`solve`'s ``Rv`` with ``Fv = I``,
        whose entries after ``t`` are zero: step ``k`` advances the
        columns of the sources before it, less those whose state has decayed
        (the statistical policy's ``negligible_state``): ``O(r T w)`` for ``w`` live columns
        (``O(r T^2 / 2)`` at most) and ``O(r T)`` memory. When
        ``A_sources`` is non-negative (:meth:`nonnegative`: gradient descent,
        ISTA whose head is) so is the inverse, whose l1 norms are then its
        row sums: one :meth:`solve`, ``O(r T)``.
        """
        k0, T = self.k0, self.T
        policy, statistics = policies
        if self.nonnegative(statistics.multiplier_rounding):
            return self.solve(np.ones((1, T + 1)), None, n_eff, c)[0][0]
        d = 1.0 - c / n_eff
        L = np.eye(k0 + 1) * d - self.Av_head / n_eff
        Linv = linalg.solve_triangular(L, np.eye(k0 + 1), lower=True, check_finite=False)
        norms = np.empty(T + 1)
        norms[:k0 + 1] = np.abs(Linv).sum(axis=1)
        r = self.rank
        # three buffers, in place: the tangent writes dx into the gradient's
        # block (Hz) and dv into its own (then Hx and Hz swap); a column is
        # zero in all three until the step after its source enters
        Hx = np.zeros((r, T + 1))
        Hv = Hx if self.Cv is self.Cx else np.zeros((r, T + 1))
        Hz = np.zeros((r, T + 1))
        Hx[:, :k0 + 1] = self.Cx @ Linv[:k0]
        if Hv is not Hx:
            Hv[:, :k0 + 1] = self.Cv @ Linv[:k0]
        prev = np.zeros(T + 1)
        prev[:k0 + 1] = Linv[k0]
        neg_lam = -self.lam
        # columns lo..k-1 are live before step k (non-zero from the step after
        # their source enters; those before lo have decayed: negligible_state)
        lo, peak, every = 0, 0.0, policy.settled_drop_check
        for k in range(k0 + 1, T + 1):
            live = slice(lo, k)
            dz = Hz[:, live]
            np.multiply(Hv[:, live], neg_lam, out=dz)
            dz += self.omega * prev[live]
            hx, hv = self.iteration.tangent(
                k, Hv[:, live], Hx[:, live], None, dz, None, n_free=0, overwrite_dz=True,
                out_v=None if Hv is Hx else Hv[:, live])
            Hx, Hz = Hz, Hx  # hx is in Hz's block
            if Hv is Hz:  # no extrapolation: the sources are the outputs
                Hv = Hx
            row = hv.sum(axis=0)
            row /= n_eff * d
            norms[k] = np.abs(row).sum() + 1.0 / d
            prev[live] = row
            prev[k] = 1.0 / d
            if every and (k - k0) % every == 0:
                lo, peak = _first_live(lo, np.abs(hx), np.abs(hv), peak,
                                       statistics.negligible_state)
                taken("settled_window", first=lo, step=k)
        return norms


def _first_live(lo, hx, hv, peak, negligible):
    """The first column of the states ``|hx|``, ``|hv|`` (columns ``lo..``)
    above ``negligible`` (the statistical policy's ``negligible_state``)
    times the largest state seen (``peak``, updated): ``(lo, peak)``. The
    columns of a stable recursion decay geometrically (FISTA's slowest
    direction by about ``sqrt(1 - eta lam_min)`` a step), so that the row
    norms cost ``O(r T w)`` for a window of ``w`` live columns instead of
    ``O(r T^2)``."""
    size = hx.max(axis=0, initial=0.0)
    np.maximum(size, hv.max(axis=0, initial=0.0), out=size)
    if not np.all(np.isfinite(size)):  # a diverging recursion: nothing is negligible
        return lo, peak
    peak = max(peak, float(size.max(initial=0.0)))
    above = np.flatnonzero(size > negligible * peak)
    return lo + (int(above[0]) if above.size else size.size), peak


def linear_settled_memory(iteration, T, nodes, weights):
    """The :class:`SettledMemory` of a linear iteration (no prox: settled from
    the start, ``k0 = 0``) from spectral nodes and weights: ``A[t, s] =
    sum_j w_j lam_j phi_{t,s}(lam_j)`` of
    :func:`~skacv.estimates.risk._spectral.spectral_memory_matrix` (exact
    eigenvalues with unit weights, or Lanczos' quadrature)."""
    lam = np.asarray(nodes, dtype=np.float64).ravel()
    w = np.asarray(weights, dtype=np.float64).ravel()
    empty = np.zeros((lam.size, 0))
    extrapolates = iteration.extrapolates(T)
    return SettledMemory(iteration, T, np.zeros((1, 1)), np.zeros((1, 1)), lam, w * lam,
                         empty, np.zeros((lam.size, 0)) if extrapolates else empty)


def settled_memory(Xd, iteration, coef_path, k0, Z, head, n_eff, policy):
    """The :class:`SettledMemory` of a trajectory settled after step ``k0``.

    ``Xd(idx, dt)`` gives ``X~[:, idx]``; ``Z`` (n, m) are the probes of the
    head's chains and ``head`` their state after step ``k0``
    (:func:`~skacv.estimates.risk._chains.masked_memory_matrix` with
    ``keep_state=True``: ``A``, ``Av`` and the chains in coordinates, columns
    ``s m + i`` for source ``s`` and probe ``i``). The eigendecomposition and
    the projections are in float64 whatever the chains' precision.
    """
    T = coef_path.shape[1] - 1
    n, m = Z.shape
    S = np.flatnonzero(coef_path[:, k0] != 0)
    r = S.size
    if r:
        XS = np.asarray(Xd(S, np.float64), dtype=np.float64)
        G = XS.T @ XS
        G /= n_eff
        with factorization_blas("eigh", r, policy):
            lam, V = linalg.eigh(G, overwrite_a=True, check_finite=False)
        # the numerical null space of the support's columns carries nothing:
        # there X~_S v = 0, so the probes' images, the injections' weights and
        # the head's collapsed states vanish (rounding would keep it alive)
        keep = lam > lam[-1] * r * np.finfo(np.float64).eps
        lam, V = lam[keep], V[:, keep]
        zeta = V.T @ (XS.T @ np.asarray(Z, dtype=np.float64))  # (directions, m)
    else:
        lam, V, zeta = np.zeros(0), np.zeros((0, 0)), np.zeros((0, m))
    omega = np.mean(zeta**2, axis=1) / n_eff  # the injection X~^T z / n_eff, summed
    position = np.full(coef_path.shape[0], -1)
    position[S] = np.arange(r)

    def collapse(name):
        coords, values = head.chains.get(name)
        dense = np.zeros((r, m * k0))
        if coords is not None and coords.size:
            at = position[coords]
            values = np.asarray(values, dtype=np.float64)
            outside = values[at < 0]
            if outside.size and np.any(outside != 0):
                raise RuntimeError("settled chains with a tangent outside the support")
            dense[at[at >= 0]] = values[at >= 0]
        w = V.T @ dense  # (directions, m k0), columns s m + i
        return np.einsum("jsi,ji->js", w.reshape(-1, k0, m), zeta) / m

    Cx = collapse("dx1")
    extrapolates = iteration.extrapolates(T)
    Cv = collapse("dv") if extrapolates else Cx
    return SettledMemory(iteration, T, head.A, head.Av, lam, omega, Cx, Cv)
