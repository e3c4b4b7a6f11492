"""Memory matrices of robust losses and mini-batches (Tan & Bellec 2024):
the traces ``A`` and ``K`` of :func:`skacv.estimates.risk._readout.risk_from_sources`,
one chain per source and probe in coefficient space, stepped while it has
not decayed (:meth:`_CurvatureChains._retire`), or a stretch of one map at a
time in its eigenbasis (:func:`constant_runs`, :func:`_stretch`)."""

import time

import numpy as np
from scipy import linalg, sparse

from ..._config import check_memory, path_memory_bytes
from ..._trace import taken
from ._probes import draw_probes
from ._state import CurvatureState, first_live, usable_state


def curvature_memory_matrices(design, iteration, coef_path, curvature, n_probes, rng,
                              chain_dtype, verbose=0, state=None, keep_state=False):
    """Traces ``(A, K, state)`` of the robust / mini-batch risk estimate (Tan &
    Bellec 2024).

    Step ``k`` uses the gradient input ``z = X~_S^T r_S / N_k`` on its batch
    ``S`` (every row for full batch) of weight ``N_k``, ``r = sqrt(w) psi(y -
    eta)``. The chain ``J_{t,s}`` of ``x^t`` with respect to a vector added in
    step ``s + 1`` (source ``s``) advances by the iteration's
    :meth:`~skacv.Iteration.tangent` with ``dz = (injection - X~_S^T diag(c)
    X~_S dx) / N_k``, ``c = psi'`` at ``x^{k-1}``. The traces are

        A[t, s] = tr(D_t X~ J_{t,s} X~^T),
        K[t, s] = tr(D_t X~ J_{t,s} X~^T S_s D_s),

    ``D_t = diag(curvature[:, t])`` (``None``: ones) and ``S_s`` the batch of
    step ``s + 1``: one chain per source gives both. ``n_probes=None``: exact
    traces; ``state``: a :class:`~skacv.estimates.risk._state.CurvatureState`
    of a shorter prefix (probes only). No momentum.

    Full batch, the chains advance by one fixed linear map over every
    stretch of steps whose inliers and prox mask do not change
    (:func:`constant_runs`; the Huber loss's inliers settle within a few
    steps and then flip one row at a time). Such a stretch is taken in that
    map's eigenbasis (:func:`_stretch`) where that costs less than its chain
    steps: ``O(r^2 m)`` per source and ``O(r)`` per entry of ``A`` and ``K``
    instead of ``(4 n p + n) m`` per source and step, the same traces up to
    rounding.
    """
    n = design.n_samples
    T = coef_path.shape[1] - 1
    dtype = np.dtype(chain_dtype)
    keep_state = keep_state and n_probes is not None
    if iteration.has_momentum(T):
        raise ValueError(
            f"The robust / mini-batch risk estimate needs an iteration without momentum; "
            f"{iteration.name} extrapolates. Use solver='gd' or 'sgd', or "
            "estimate_risk=False and estimate_loo=True."
        )
    state = usable_state(state, CurvatureState, n_probes, dtype, T, n)
    k0 = 0 if state is None else state.k
    A = np.zeros((T + 1, T + 1))
    K = np.zeros((T + 1, T + 1))
    if state is not None:
        A[: k0 + 1, : k0 + 1] = state.A
        K[: k0 + 1, : k0 + 1] = state.K
    if T == 0:
        return A, K, None
    p = coef_path.shape[0]
    check_memory(n * p * dtype.itemsize, f"the dense design for the risk chains ({n} x {p})")
    if n_probes is None:
        Z, m, scale = np.eye(n, dtype=dtype), n, 1.0
    else:
        m, scale = int(n_probes), 1.0 / int(n_probes)
        Z = state.Z if state is not None else draw_probes(rng, (n, m), dtype)
    plan = _plan(design, iteration, coef_path, curvature, m, k0, T)
    width, held = _plan_memory(plan, T, k0, keep_state)
    plain = [(k0, T, False)]
    plain_memory = _plan_memory(plain, T, k0, keep_state)
    need = _chain_bytes(p, m, dtype, width, held)
    if held and need > path_memory_bytes() and need > _chain_bytes(p, m, dtype, *plain_memory):
        # the stretches' float64 states pass the limit: the chain steps need less
        plan, (width, held) = plain, plain_memory
    check_memory(_chain_bytes(p, m, dtype, width, held),
                 f"the Jacobian chains ({p} x {m * width}, 2 blocks"
                 + (f"; their states, {p} x {m * held} in float64)" if held else ")"),
                 "Use fewer probes (n_probes) or fewer iterations. ")
    chains = np.zeros((p, m * width), dtype=dtype, order="F")
    if state is not None:
        chains[:, : m * k0] = state.chains
    run = _CurvatureChains(design, iteration, coef_path, curvature, Z, m, scale, dtype, A, K)
    tic = time.perf_counter()
    for a, b, fast in plan:
        if fast:  # steps a + 1..b in the eigenbasis of their map
            _stretch(run, chains, a, b, keep=b < T or keep_state)
            taken("curvature_stretch", start=a, stop=b)
        else:
            for k in range(a + 1, b + 1):
                run.step(k, chains)
        if verbose:
            print(f"[risk] {iteration.name} robust traces: step {b}/{T}"
                  f"{' (one map)' if fast else ''}, {time.perf_counter() - tic:.1f}s")
    new_state = None
    if keep_state:
        new_state = CurvatureState(k=T, Z=Z, dtype=dtype, A=A.copy(), K=K.copy(),
                                   chains=chains[:, : m * T].copy())
    return A, K, new_state


class _CurvatureChains:
    """The steps of :func:`curvature_memory_matrices`."""

    def __init__(self, design, iteration, coef_path, curvature, Z, m, scale, dtype, A, K):
        T = coef_path.shape[1] - 1
        self.design, self.iteration, self.coef_path = design, iteration, coef_path
        self.Z, self.m, self.scale, self.dtype, self.A, self.K = Z, m, scale, dtype, A, K
        self.Xd = np.asarray(design.dense(), dtype=dtype, order="C")
        self.weight = (None if design.weight is None
                       else np.asarray(design.weight, dtype=np.float64))
        self.curv = None if curvature is None else np.asarray(curvature, dtype=dtype)
        self.injection = self.Xd.T @ Z  # X~^T Z, (p, m)
        self.sampler = iteration.sampler
        self.batches = [None] * (T + 1)  # batches[s]: rows of step s + 1 (None: all)
        self.batch_probes = self.member = None
        if self.sampler is not None:
            for s in range(T):
                self.batches[s] = np.asarray(self.sampler(s + 1))
            # member[i, s]: how often row i is in batch s (a user's sampler may repeat rows)
            # (n x T bytes, 4 with repeated rows: at most half the path's float64 fitted
            # values, checked before the fit)
            repeats = any(np.unique(S).size < S.size for S in self.batches[:T])
            self.member = np.zeros((design.n_samples, T), dtype=np.int32 if repeats else bool)
            for s, S in enumerate(self.batches[:T]):
                if repeats:
                    np.add.at(self.member[:, s], S, 1)
                else:
                    self.member[S, s] = True
            self.batch_probes = self._batch_probes(T)
        # (first column, X~ @ chains[:, first:]) after the last step (full batch: reused)
        self.fitted_chains = None
        self.lo, self.peak = 0, 0.0  # the first live source, the largest chain seen

    def _batch_probes(self, T):
        """``B_s = X~_S^T (Z D_s)_S`` for every source's batch ``S``: then ``K[t, s]
        = <B_s, J_{t,s}> + sum_{i in S} (d^t_i - 1) z_i d^s_i x~_i^T J_{t,s}``, the
        sum over the few rows whose curvature at ``x^t`` is not 1."""
        Z, m, curv, Xd = self.Z, self.m, self.curv, self.Xd
        out = np.empty((Xd.shape[1], m * T), dtype=self.dtype, order="F")
        for s in range(T):
            S = self.batches[s]
            ZS = Z[S] if curv is None else Z[S] * curv[S, s][:, None]
            out[:, s * m:(s + 1) * m] = Xd[S].T @ ZS
        return out

    def _batch_weight(self, S):
        if S is None:
            return float(self.design.n_eff)
        return float(S.shape[0]) if self.weight is None else float(self.weight[S].sum())

    def _gradient(self, k, chains, c_lo, c_old, c_new):
        """The gradient tangents of step ``k``'s batch (live columns ``c_lo..``)
        and the new injection."""
        S = self.batches[k - 1]
        N = self._batch_weight(S)
        inv_N = self.dtype.type(1.0 / N) if N > 0 else self.dtype.type(0.0)
        dz = np.empty((chains.shape[0], c_new - c_lo), dtype=self.dtype, order="F")
        live = c_old - c_lo
        if live:
            XS = self.Xd if S is None else self.Xd[S]
            cached = self.fitted_chains
            if S is None and cached is not None:
                Y = cached[1][:, c_lo - cached[0]:]
            else:
                Y = XS @ chains[:, c_lo:c_old]
            if self.curv is not None:
                c = self.curv[:, k - 1] if S is None else self.curv[S, k - 1]
                Y = Y * c[:, None]
            np.multiply(XS.T @ Y, -inv_N, out=dz[:, :live])
        np.multiply(self.injection, inv_N, out=dz[:, live:])
        return dz

    def step(self, k, chains):
        """Step ``k`` of every live chain, then row ``k`` of ``A`` and ``K``."""
        m, lo = self.m, self.lo
        c_lo, c_old, c_new = m * lo, m * (k - 1), m * k
        dz = self._gradient(k, chains, c_lo, c_old, c_new)
        dv = chains[:, c_lo:c_new]
        if c_old < c_new:
            dv[:, c_old - c_lo:] = 0
        mask = self.iteration.prox_jacobian(k, self.coef_path[:, k])
        dx, _ = self.iteration.tangent(k, dv, dv, None, dz, mask)
        chains[:, c_lo:c_new] = dx
        # readout: A with D_k on every row, K with D_k D_s on the rows of S_s
        if self.sampler is None:
            self._read_full_batch(k, dx, lo)
        else:
            self._read_minibatch(k, dx, lo)
        every = self.design.policy.settled_drop_check
        if every and k % every == 0:
            self._retire(k, chains)

    def _retire(self, k, chains):
        """Stop advancing the sources whose chains have decayed below
        ``negligible_state`` times the largest chain seen (their columns set to
        zero): the steps are non-expansive (a step of at most ``2 / L``, a
        mask, curvatures in ``[0, max_curvature]``), so a decayed chain stays
        negligible, and a long path costs ``O(T w)`` chain steps for ``w`` live
        sources instead of ``O(T^2)``."""
        m, lo = self.m, self.lo
        block = np.abs(chains[:, m * lo:m * k])
        size = block.max(axis=0, initial=0.0).reshape(k - lo, m).max(axis=1)
        new_lo, self.peak = first_live(lo, size[None, :], size[None, :], self.peak,
                                        self.design.statistics.negligible_state)
        new_lo = min(new_lo, k)
        if new_lo > lo:
            chains[:, m * lo:m * new_lo] = 0
            self.lo = new_lo
            taken("curvature_window", first=new_lo, step=k)

    def _read_full_batch(self, k, dx, lo):
        Z, m, curv, scale, n = self.Z, self.m, self.curv, self.scale, self.Z.shape[0]
        dk = None if curv is None else curv[:, k]
        Y = self.Xd @ dx  # (n, m (k - lo))
        self.fitted_chains = (m * lo, Y)
        W = Z if dk is None else Z * dk[:, None]
        self.A[k, lo:k] = scale * _shared_block_trace(W, Y, m)
        if curv is None:
            self.K[k, lo:k] = self.A[k, lo:k]
        else:
            self.K[k, lo:k] = scale * np.einsum("nm,ns,nsm->s", W, curv[:, lo:k],
                                                Y.reshape(n, k - lo, m), dtype=np.float64,
                                                optimize=True)

    def _read_minibatch(self, k, dx, lo):
        Z, m, curv, scale, Xd = self.Z, self.m, self.curv, self.scale, self.Xd
        dk = None if curv is None else curv[:, k]
        P = Xd.T @ (Z if dk is None else Z * dk[:, None])
        self.A[k, lo:k] = scale * _shared_block_trace(P, dx, m)
        self.K[k, lo:k] = scale * np.einsum("ij,ij->j", self.batch_probes[:, m * lo:m * k], dx,
                                            dtype=np.float64).reshape(k - lo, m).sum(axis=1)
        if curv is None:
            return
        # the rows of each batch S_s whose d^t_i d^s_i differs from d^s_i: at
        # most the rows with d^t_i != 1, and for the Huber loss only those
        # that left the inliers since step s (a few once the path settles)
        out = np.flatnonzero(dk != 1)
        if not out.size:
            return
        coef = (dk[out] - 1)[None, :] * curv[out, lo:k].T  # (k - lo, |out|)
        coef *= self.member[out, lo:k].T
        src, sel = np.nonzero(coef)  # the (source, row) pairs, by source
        if not src.size:
            return
        # K[k, s] += <dx_s, sum over the pairs (s, i) of coef x~_i z_i^T>: one sparse
        # product over every pair of the step (rows: the pairs' sources x probes)
        srcs, inv = np.unique(src, return_inverse=True)
        probes = np.arange(m)
        weights = coef[src, sel][:, None] * Z[out[sel]]  # (pairs, m)
        S = sparse.csr_matrix((weights.ravel(), ((inv[:, None] * m + probes).ravel(),
                                                 np.repeat(sel, m))),
                              shape=(srcs.size * m, out.size))
        R = S @ Xd[out]  # (sources x probes, p)
        cols = (srcs[:, None] * m + probes).ravel()
        vals = np.einsum("rp,pr->r", R, dx[:, cols], dtype=np.float64)
        self.K[k, srcs + lo] += scale * vals.reshape(-1, m).sum(axis=1)


def _shared_block_trace(W, D, m):
    """``[sum(W * D[:, s*m:(s+1)*m]) for s]`` as the diagonal blocks of one
    product ``W^T D``."""
    k = D.shape[1] // m
    G = (W.T @ D).reshape(m, k, m)
    return np.einsum("iki->k", G).astype(np.float64)


def constant_runs(iteration, coef_path, curvature):
    """The stretches ``(a, b)`` (``a < b``) of steps ``a + 1..b`` that apply one
    linear map to the chains of :func:`curvature_memory_matrices`: step
    ``k`` reads the curvature at ``x^{k-1}`` and the prox mask at ``x^k``,
    the same for all of them, and the chains after step ``a`` live on that
    mask's coordinates (``a = 0``: no chain yet; a step that changes the mask
    starts no stretch). Empty unless full batch with constant steps, the same
    step on every coordinate, no momentum and a curvature."""
    T = coef_path.shape[1] - 1
    if (curvature is None or T < 2 or iteration.sampler is not None
            or not iteration.constant_steps or not iteration.coordinatewise
            or iteration.has_momentum(T)):
        return []
    p = coef_path.shape[0]
    b = iteration.tangent(1, np.zeros((p, 1)), np.zeros((p, 1)), None, np.ones((p, 1)), None)[0]
    if not (np.all(b == b[0, 0]) and b[0, 0] != 0):
        return []
    same_curvature = np.all(curvature[:, 1:] == curvature[:, :-1], axis=0)  # x^j, x^(j-1)
    masks = [None] + [iteration.prox_jacobian(k, coef_path[:, k]) for k in range(1, T + 1)]

    def same_mask(i, j):
        mi, mj = masks[i], masks[j]
        return (mi is None) == (mj is None) and (mi is None or np.array_equal(mi, mj))

    runs, first = [], 1  # the first step of the current map
    for k in range(2, T + 2):
        if k <= T and same_curvature[k - 2] and same_mask(k, k - 1):
            continue
        a, b = first - 1, k - 1
        if a >= 1 and not same_mask(a, first):
            a += 1  # its first step takes the chains onto the new mask
        if b > a:
            runs.append((a, b))
        first = k
    return runs


def _plan_memory(plan, T, k0, keep_state):
    """``(width, held)``: the sources whose chains are held as columns (up to
    the last step a stretch does not end) and those whose states a stretch
    holds in float64 (``a`` at its start, ``b`` at its end, twice)."""
    width = T if keep_state else max(
        [k0] + [b if not fast or b < T else a for a, b, fast in plan])
    held = max([0] + [a + 2 * b for a, b, fast in plan if fast])
    return width, held


def _chain_bytes(p, m, dtype, width, held):
    """Bytes of :func:`_plan_memory`'s columns: two blocks of chains, the states."""
    return 2 * p * m * width * np.dtype(dtype).itemsize + 8 * p * m * held


def _plan(design, iteration, coef_path, curvature, m, k0, T):
    """``[(a, b, fast), ...]`` covering steps ``k0 + 1..T``: steps ``a + 1..b``
    in one map's eigenbasis (``fast``, :func:`_stretch`) where that costs
    less than their chain steps (:func:`_stretch_pays`; the speed policy's
    ``curvature_stretches``), else chain steps."""
    plan, k = [], k0
    stretches = design.policy.curvature_stretches
    for a, b in constant_runs(iteration, coef_path, curvature) if stretches else []:
        a = max(a, k0)
        if b <= a or not _stretch_pays(design, m, a, b, coef_path.shape[0]):
            continue
        if a > k:
            plan.append((k, a, False))
        plan.append((a, b, True))
        k = b
    if k < T:
        plan.append((k, T, False))
    return plan


def chain_step_flops(n, p, m):
    """Flops of one source's chain step: its ``m`` columns through two
    products with ``X~`` (``2 n p`` flops a column each), read out (``n``)."""
    return (4.0 * n * p + n) * m


def _stretch_pays(design, m, a, b, p):
    """Whether steps ``a + 1..b`` cost less in the eigenbasis (an
    eigendecomposition of at most ``p`` coordinates, the sources' states in
    and out of it, their readouts) than as chain steps (step ``k`` advances
    ``k`` sources, :func:`chain_step_flops` each)."""
    n = design.n_samples
    chains = chain_step_flops(n, p, m) * (b * (b + 1) - a * (a + 1)) / 2.0
    stretch = (10.0 * p ** 3 + 2.0 * n * p * (p + 3 * m) + 4.0 * p * p * m * b
               + 2.0 * n * p * m * a + 2.0 * p * (b - a) * b)
    return stretch < chains


def _stretch(run, chains, a, b, keep):
    """Rows ``a + 1..b`` of ``A`` and ``K`` over a stretch of one map
    (:func:`constant_runs`) from the chains after step ``a``; ``keep``: the
    chains after step ``b`` written back.

    On the mask's coordinates ``S`` a step is ``dx <- diag(alpha) dx + beta
    (inj - G dx)``, ``G = X~_S^T C X~_S / N`` with ``C`` the curvature the
    steps read (at ``x^a..x^{b-1}``) and ``alpha``, ``beta`` the iteration's
    :meth:`~skacv.Iteration.tangent` on ``dv`` and ``dz``: ``I - beta H``,
    ``H = G + diag((1 - alpha) / beta) = V diag(lam) V^T``. In its
    eigenbasis each direction decays by ``mu = 1 - beta lam`` a step, so with
    the readouts ``u = V^T X~_S^T C z`` (``A``) and ``V^T X~_S^T C D_s z``
    (``K``)

        A[t, s] = sum_j c_j(s) mu_j^(t - a)                (s < a: chains after step a)
        A[t, s] = sum_j omega_j beta mu_j^(t - s - 1)      (a <= s < t)

    ``c_j(s)`` the readout of source ``s``'s chain after step ``a`` and
    ``omega_j`` that of the injection ``V^T X~_S^T z / N`` (the same probes:
    the chains' traces up to rounding). ``D_s`` differs from ``C`` on a few
    rows (read apart), and so may ``D_b``: row ``b`` is read from the chains
    after step ``b``."""
    it, Z, m, scale, curv = run.iteration, run.Z, run.m, run.scale, run.curv
    p = chains.shape[0]
    k, L = a + 1, b - a
    ones, zeros = np.ones((p, 1)), np.zeros((p, 1))
    alpha = np.asarray(it.tangent(k, ones, ones, None, zeros.copy(), None)[0], float)[:, 0]
    beta = float(it.tangent(k, zeros, zeros, None, ones.copy(), None)[0][0, 0])
    mask = it.prox_jacobian(b, run.coef_path[:, b])
    S = np.arange(p) if mask is None else np.flatnonzero(mask)
    run.fitted_chains = None  # (the chains change here)
    if S.size == 0:  # no free coordinate: every chain is zero
        if keep:
            chains[:, : m * b] = 0
        return
    C = np.asarray(curv[:, a], dtype=np.float64)
    N = run._batch_weight(None)
    XS = np.asarray(run.Xd[:, S], dtype=np.float64)
    H = XS.T @ (XS * C[:, None])
    H /= N
    H[np.diag_indices_from(H)] += (1.0 - alpha[S]) / beta
    lam, V = linalg.eigh(H, overwrite_a=True, check_finite=False)
    mu = 1.0 - beta * lam
    XV = XS @ V  # (n, r)
    Zd = np.asarray(Z, dtype=np.float64)
    inj = XV.T @ Zd
    inj *= beta / N  # (r, m): the injection's state after its step
    powers = mu[:, None] ** np.arange(L + 1)  # (r, L + 1)
    rows = slice(a + 1, b + 1)
    read = _Readout(run, XV, Zd, C, scale)
    UA, UK = read.A(C), read.K(C)  # the stretch's rows read with D_t = C
    for M, U in ((run.A, UA), (run.K, UK)):
        omega = scale * np.einsum("ji,ji->j", U, inj)
        M[rows, a:b] = np.tril(linalg.toeplitz(omega @ powers[:, :L]))
    lo = min(run.lo, a)  # the sources before it have decayed (their chains are zero)
    H0 = None
    if a > lo:
        # the earlier sources: their chains after step a, read out in the eigenbasis
        H0 = V.T @ np.asarray(chains[S, m * lo:m * a], dtype=np.float64)
        H0 = H0.reshape(-1, a - lo, m)
        decay = powers[:, 1:].T  # (L, r): mu^(t - a)
        run.A[rows, lo:a] = decay @ read.sources(UA, H0, lo)
        run.K[rows, lo:a] = decay @ read.sources(UK, H0, lo, C)
    D_b = np.asarray(curv[:, b], dtype=np.float64)
    last = not np.array_equal(D_b, C)
    if not (keep or last):
        return
    # the chains after step b: the earlier ones decayed, the stretch's own injections
    Hb = np.empty((V.shape[1], b - lo, m))
    if H0 is not None:
        np.multiply(H0, powers[:, L][:, None, None], out=Hb[:, :a - lo])
    Hb[:, a - lo:] = powers[:, L - 1::-1][:, :, None] * inj[:, None, :]
    if last:  # x^b has other inliers: its row read with D_b
        run.A[b, lo:b] = read.sources(read.A(D_b), Hb, lo).sum(axis=0)
        run.K[b, lo:b] = read.sources(read.K(D_b), Hb, lo, D_b).sum(axis=0)
    if keep:
        chains[:, : m * b] = 0
        chains[S, m * lo:m * b] = V @ Hb.reshape(-1, (b - lo) * m)


class _Readout:
    """The readouts of :func:`_stretch` in the eigenbasis (``XV = X~_S V``):
    ``u = V^T X~_S^T D z`` for ``A`` at an iterate of curvature ``D``, with
    ``C`` (the stretch's sources' curvature) too for ``K``."""

    def __init__(self, run, XV, Z, C, scale):
        self.run, self.XV, self.Z, self.C, self.scale = run, XV, Z, C, scale

    def A(self, D):
        return (self.XV * D[:, None]).T @ self.Z

    def K(self, D):
        return (self.XV * (D * self.C)[:, None]).T @ self.Z

    def sources(self, U, H, first, D=None):
        """``(r, s)``: ``scale sum_i U[j, i] H[j, s, i]`` (the readout's terms per
        direction) for the sources ``first, first + 1, ...``; ``D``: ``K``'s,
        each source ``s`` read with ``D D_s`` instead of ``D C`` on the rows
        where ``D_s`` is not ``C``."""
        out = self.scale * np.einsum("ji,jsi->js", U, H)
        if D is None:
            return out
        # the rows whose curvature differs from C at some source: there each
        # source s adds sum_k XV[k, j] D_k (D_s - C)_k (Z[k] . H[j, s]) to out[j, s].
        # A row differs on the sources before (or after) it flipped: the rows
        # sorted by their span of sources, a product (sources x rows) @ (rows x
        # directions probes) for each group of rows alike, over their span
        C = self.C
        delta = np.asarray(self.run.curv[:, first:first + H.shape[1]], dtype=np.float64)
        delta = delta - C[:, None]
        differs = delta != 0
        rows = np.flatnonzero(np.any(differs, axis=1))
        if rows.size == 0:
            return out
        r, n_src, m = H.shape
        starts = np.argmax(differs[rows], axis=1)
        ends = n_src - np.argmax(differs[rows, ::-1], axis=1)
        order = np.lexsort((starts, ends))
        rows, starts, ends = rows[order], starts[order], ends[order]
        policy = self.run.design.policy
        # sources in blocks of arrays (sources, r m) of at most curvature_block_entries
        wide = max(1, policy.curvature_block_entries // (r * m))
        group = max(1, min(wide, policy.curvature_row_group))
        for lo in range(0, n_src, wide):
            hi = min(n_src, lo + wide)
            touch = np.flatnonzero((starts < hi) & (ends > lo))
            if touch.size == 0:
                continue
            W = np.zeros((hi - lo, r * m))
            for g in range(0, touch.size, group):
                at = touch[g:g + group]
                k = rows[at]
                a, b = max(lo, int(starts[at].min())), min(hi, int(ends[at].max()))
                XZ = self.XV[k, :, None] * self.Z[k, None, :]  # (rows, r, m)
                XZ *= D[k, None, None]
                W[a - lo:b - lo] += delta[k, a:b].T @ XZ.reshape(k.size, r * m)
            out[:, lo:hi] += self.scale * np.einsum("sji,jsi->js", W.reshape(hi - lo, r, m),
                                                    H[:, lo:hi])
        return out
