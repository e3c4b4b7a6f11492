"""Memory matrices of settled paths in state-space form.

When the support of a proximal trajectory stops changing after a step
``k0`` (:func:`settled_step`), and for linear iterations from the start,
the chains advance by one fixed linear map: in the eigenbasis of the
support's Gram matrix every direction follows the iteration's scalar
recursion, so the memory matrices after ``k0`` are ``O(r T)`` numbers
(:class:`SettledMemory`) and the corrections of Bellec & Tan (2024)'s
estimate forward recursions, linear in ``T``.
"""

import numpy as np
from scipy import fft, linalg

from ..._trace import taken
from ...utils._parallel import factorization_blas
from ._probes import probe_images
from ._spectral import stationary_response
from ._state import first_live


def free_steps(iteration, coef_path):
    """Boolean ``(p, T)``: coordinate ``j`` is free at step ``k`` (column ``k -
    1``): in the support of ``x^k``, penalised like the others, with the plain
    extrapolation."""
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
    """The step ``k0`` after which the chains are one fixed linear map on the
    support ``S`` of ``x^T``, or ``None``: every later step keeps ``S`` with the
    plain extrapolation (:func:`free_steps`) and the tangents at ``k0`` live on
    ``S``. ``None`` with a heavy ball or fewer than three steps.
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
    """Memory matrices of a settled proximal trajectory (or of a linear
    iteration: :func:`linear_settled_memory`) in state-space form.

    Up to step ``k0`` the matrices are dense (``A_head``, ``A_sources_head``).
    After it, in the eigenbasis ``V`` of ``X~_S^T X~_S / n_eff = V diag(lam)
    V^T`` (``r`` directions, the numerical null space dropped) every coordinate
    follows the scalar recursion of
    :func:`~skacv.estimates.risk._spectral.spectral_memory_matrix`. With the
    probes' images ``zeta = V^T X~_S^T Z`` (r, m), a chain's readout follows
    the same recursion, so that

        A[t, s] = sum_j cx_j(t, s),    A_sources[t, s] = sum_j cv_j(t, s)

    with ``(cx, cv)(., s)`` started from the head's collapsed chains (``Cx``,
    ``Cv`` (r, k0), sources ``s < k0``) or injected at step ``s + 1`` with
    ``omega_j = (1/m) sum_i zeta_ji^2 / n_eff``: the Hutchinson estimates of
    the chains in coordinates with the same probes, up to rounding. Every
    operation advances the recursion with all sources summed against a
    right-hand side: ``O(r q)`` per step for ``q`` columns. Where the map is
    the same at every step from the start (:meth:`stationary_kernel`), the
    operations are causal convolutions in time instead, by FFT
    (``convolve=False``: the recursion all the same).
    """

    def __init__(self, iteration, T, A_head, A_sources_head, lam, omega, Cx, Cv,
                 convolve=True, max_gain=None):
        self.iteration, self.T = iteration, int(T)
        self.k0 = A_head.shape[0] - 1
        self.A_head = np.tril(np.asarray(A_head, dtype=np.float64), -1)
        self.Av_head = np.tril(np.asarray(A_sources_head, dtype=np.float64), -1)
        self.lam = np.asarray(lam, dtype=np.float64)[:, None]
        self.omega = np.asarray(omega, dtype=np.float64)[:, None]
        self.Cx = np.asarray(Cx, dtype=np.float64)
        self.Cv = np.asarray(Cv, dtype=np.float64)
        # (the recursion stepped in Python, convolve=False: the tests' reference)
        self._kernel = None if convolve else (None,)
        self.max_gain = max_gain
        self._inverses = {}

    def stationary_kernel(self):
        """``a`` (T + 1,): ``A[t, s] = A_sources[t, s] = a[t - s]``
        (:func:`~skacv.estimates.risk._spectral.stationary_response`) where the
        map is one and the same from the start (``k0 = 0``: gradient descent
        with a constant step), else ``None``. Then every correction is a
        causal convolution in time (:func:`_toeplitz_inverse`), with no
        recursion stepped in Python."""
        if self._kernel is None:
            a = None
            if self.k0 == 0:
                a = stationary_response(self.iteration, self.lam, self.omega, self.T)
            self._kernel = (a,)
        return self._kernel[0]

    def _convolution_inverse(self, n_eff, d):
        """The first column ``h`` of the corrections' Toeplitz inverse
        (:func:`_toeplitz_inverse`), or ``None`` where there is no kernel or
        the inverse amplifies: ``d sum |h|`` above ``max_gain`` (the speed
        policy's ``settled_fft_max_gain``), or not finite. An FFT product's
        rounding is relative to its largest terms; where ``h`` grows (``d -
        a(z) / n_eff`` vanishes in the unit disk: the fit near
        interpolation) it would swamp the early iterates, which the
        recursion keeps exact."""
        a = self.stationary_kernel()
        if a is None:
            return None
        key = (float(n_eff), float(d))
        if key not in self._inverses:
            with np.errstate(all="ignore"):
                h = _toeplitz_inverse(a, n_eff, d)
                gain = abs(d) * np.abs(h).sum()
            if not np.isfinite(gain) or (self.max_gain is not None and gain > self.max_gain):
                taken("settled_fft_declined", gain=gain)
                h = None
            self._inverses[key] = h
        return self._inverses[key]

    @property
    def rank(self):
        """Number of eigendirections ``r``."""
        return self.lam.shape[0]

    def _step(self, k, Hv, Hx, inject):
        """Step ``k`` of the summed states (r, q), source ``k - 1`` injected against ``inject``."""
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
        """Corrected residuals ``(Rv, Rx)`` (q, T + 1) of the sources and outputs:
        ``(1 - c/n) Rv_t = Fv_t + sum_{s<t} A_sources[t, s] Rv_s / n`` and
        ``(1 - c/n) Rx_t = F_t + sum_{s<t} A[t, s] Rv_s / n``; ``F=None``: the
        outputs are the sources."""
        k0, T = self.k0, self.T
        d = 1.0 - c / n_eff
        Fv = np.asarray(Fv, dtype=np.float64)
        h = self._convolution_inverse(n_eff, d) if F is None else None
        if h is not None:
            Rv = _causal_convolution(Fv, h)
            return Rv, Rv
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
        """``Y[:, t] = sum_{s<t} A[t, s] U[:, s]`` and the same with ``A_sources``,
        for ``U`` (q, T + 1)."""
        k0, T = self.k0, self.T
        U = np.asarray(U, dtype=np.float64)
        a = self.stationary_kernel()
        if a is not None:
            Y = _causal_convolution(U, a)
            return Y, Y
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
        non-negative head, weights and states, and every step's multiplier ``1 -
        eta_k (lam_j + l2) >= 0``."""
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

        Row ``t`` is column ``t`` of :meth:`solve`'s ``Rv`` with ``Fv = I``: step
        ``k`` advances the live columns (those not decayed below
        ``negligible_state``), ``O(r T w)`` for ``w`` live columns. When
        ``A_sources`` is :meth:`nonnegative` so is the inverse: its row sums, one
        :meth:`solve`. With a stationary kernel (:meth:`_convolution_inverse`)
        row ``t`` is ``h[t], ..., h[0]``: the cumulative sums of ``|h|``, exact,
        no column dropped.
        """
        k0, T = self.k0, self.T
        policy, statistics = policies
        h = self._convolution_inverse(n_eff, 1.0 - c / n_eff)
        if h is not None:  # row t of a Toeplitz inverse: h[t], ..., h[0]
            return np.cumsum(np.abs(h))
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
                lo, peak = first_live(lo, np.abs(hx), np.abs(hv), peak,
                                       statistics.negligible_state)
                taken("settled_window", first=lo, step=k)
        return norms


def _causal_convolution(U, kernel):
    """``Y[:, t] = sum_{s <= t} kernel[t - s] U[:, s]`` for ``U`` (q, N), by FFT."""
    N = U.shape[1]
    size = fft.next_fast_len(2 * N - 1, real=True)
    Y = fft.irfft(fft.rfft(U, size, axis=1) * fft.rfft(kernel, size), size, axis=1)
    return np.ascontiguousarray(Y[:, :N])


def _toeplitz_inverse(a, n_eff, d):
    """First column ``h`` (N,) of ``(d I - A / n_eff)^{-1}`` for the lower
    triangular Toeplitz ``A[t, s] = a[t - s]`` (``a[0] = 0``): the power
    series ``1 / (d - a(z) / n_eff)`` by Newton's doubling ``h <- h (2 - c
    h)``, each step two FFT products, ``O(N log N)``."""
    c = -np.asarray(a, dtype=np.float64) / n_eff
    c[0] = d
    N = c.size
    h = np.array([1.0 / d])
    m = 1
    while m < N:
        m = min(2 * m, N)
        h = np.pad(h, (0, m - h.size))[None, :]
        e = -_causal_convolution(h, c[:m])[0]  # - c h, to order m
        e[0] += 2.0
        h = _causal_convolution(h, e)[0]
    return h


def linear_settled_memory(iteration, T, nodes, weights, max_gain=None):
    """The :class:`SettledMemory` of a linear iteration (``k0 = 0``) from
    spectral nodes and weights (``max_gain``: its convolutions'
    :meth:`SettledMemory._convolution_inverse`)."""
    lam = np.asarray(nodes, dtype=np.float64).ravel()
    w = np.asarray(weights, dtype=np.float64).ravel()
    empty = np.zeros((lam.size, 0))
    extrapolates = iteration.extrapolates(T)
    return SettledMemory(iteration, T, np.zeros((1, 1)), np.zeros((1, 1)), lam, w * lam,
                         empty, np.zeros((lam.size, 0)) if extrapolates else empty,
                         max_gain=max_gain)


def settled_memory(Xd, iteration, coef_path, k0, Z, head, n_eff, policy):
    """The :class:`SettledMemory` of a trajectory settled after step ``k0``:
    ``Xd(idx, dt)`` gives ``X~[:, idx]``, ``Z`` (n, m) the head's probes (or
    its :class:`~skacv.estimates.risk._probes.RangeProbes`) and
    ``head`` its :class:`~skacv.estimates.risk._state.ChainState` after ``k0``
    (columns ``s m + i`` for source ``s``, probe ``i``); in float64.
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
        zeta = V.T @ probe_images(XS, S, Z, np.float64)  # (directions, m)
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
