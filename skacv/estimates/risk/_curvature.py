"""Memory matrices of robust losses and mini-batches (Tan & Bellec 2024):
the traces ``A`` and ``K`` of :func:`skacv.estimates.risk._readout.risk_from_sources`,
one chain per source and probe in coefficient space."""

import time

import numpy as np

from ..._config import check_memory
from ._probes import draw_probes
from ._state import CurvatureState, usable_state


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
    check_memory(2 * p * m * T * dtype.itemsize, f"the Jacobian chains ({p} x {m * T}, 2 blocks)",
                 "Use fewer probes (n_probes) or fewer iterations. ")
    chains = np.zeros((p, m * T), dtype=dtype, order="F")
    if state is not None:
        chains[:, : m * k0] = state.chains
    run = _CurvatureChains(design, iteration, coef_path, curvature, Z, m, scale, dtype, A, K)
    tic = time.perf_counter()
    for k in range(k0 + 1, T + 1):
        run.step(k, chains)
        if verbose and (k % max(1, T // 10) == 0 or k == T):
            print(f"[risk] {iteration.name} robust traces: step {k}/{T}, "
                  f"{time.perf_counter() - tic:.1f}s")
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
        self.batch_probes = None
        if self.sampler is not None:
            for s in range(T):
                self.batches[s] = np.asarray(self.sampler(s + 1))
            self.batch_probes = self._batch_probes(T)
        self.fitted_chains = None  # X~ @ chains after the last step (full batch: reused)

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

    def _gradient(self, k, chains, c_old, c_new):
        """The gradient tangents of step ``k``'s batch and the new injection."""
        S = self.batches[k - 1]
        N = self._batch_weight(S)
        inv_N = self.dtype.type(1.0 / N) if N > 0 else self.dtype.type(0.0)
        dz = np.empty((chains.shape[0], c_new), dtype=self.dtype, order="F")
        if c_old:
            XS = self.Xd if S is None else self.Xd[S]
            if S is None and self.fitted_chains is not None:
                Y = self.fitted_chains
            else:
                Y = XS @ chains[:, :c_old]
            if self.curv is not None:
                c = self.curv[:, k - 1] if S is None else self.curv[S, k - 1]
                Y = Y * c[:, None]
            np.multiply(XS.T @ Y, -inv_N, out=dz[:, :c_old])
        np.multiply(self.injection, inv_N, out=dz[:, c_old:c_new])
        return dz

    def step(self, k, chains):
        """Step ``k`` of every chain, then row ``k`` of ``A`` and ``K``."""
        m = self.m
        c_old, c_new = m * (k - 1), m * k
        dz = self._gradient(k, chains, c_old, c_new)
        dv = chains[:, :c_new]
        if c_old < c_new:
            dv[:, c_old:c_new] = 0
        mask = self.iteration.prox_jacobian(k, self.coef_path[:, k])
        dx, _ = self.iteration.tangent(k, dv, dv, None, dz, mask)
        chains[:, :c_new] = dx
        # readout: A with D_k on every row, K with D_k D_s on the rows of S_s
        if self.sampler is None:
            self._read_full_batch(k, dx)
        else:
            self._read_minibatch(k, dx, c_new)

    def _read_full_batch(self, k, dx):
        Z, m, curv, scale, n = self.Z, self.m, self.curv, self.scale, self.Z.shape[0]
        dk = None if curv is None else curv[:, k]
        Y = self.Xd @ dx  # (n, m k)
        self.fitted_chains = Y
        W = Z if dk is None else Z * dk[:, None]
        self.A[k, :k] = scale * _shared_block_trace(W, Y, m)
        if curv is None:
            self.K[k, :k] = self.A[k, :k]
        else:
            self.K[k, :k] = scale * np.einsum("nm,ns,nsm->s", W, curv[:, :k],
                                              Y.reshape(n, k, m), dtype=np.float64,
                                              optimize=True)

    def _read_minibatch(self, k, dx, c_new):
        Z, m, curv, scale, Xd = self.Z, self.m, self.curv, self.scale, self.Xd
        dk = None if curv is None else curv[:, k]
        P = Xd.T @ (Z if dk is None else Z * dk[:, None])
        self.A[k, :k] = scale * _shared_block_trace(P, dx, m)
        self.K[k, :k] = scale * np.einsum("ij,ij->j", self.batch_probes[:, :c_new], dx,
                                          dtype=np.float64).reshape(k, m).sum(axis=1)
        if curv is None:
            return
        for s in range(k):
            Ss = self.batches[s]
            coef = (dk[Ss] - 1) * curv[Ss, s]
            Ss, coef = Ss[coef != 0], coef[coef != 0]
            if Ss.size:
                Ys = Xd[Ss] @ dx[:, s * m:(s + 1) * m]
                self.K[k, s] += scale * float(np.einsum("nm,nm->", Z[Ss] * coef[:, None], Ys,
                                                        dtype=np.float64))


def _shared_block_trace(W, D, m):
    """``[sum(W * D[:, s*m:(s+1)*m]) for s]`` as the diagonal blocks of one
    product ``W^T D``."""
    k = D.shape[1] // m
    G = (W.T @ D).reshape(m, k, m)
    return np.einsum("iki->k", G).astype(np.float64)
