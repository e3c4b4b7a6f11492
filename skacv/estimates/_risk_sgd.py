"""Risk along stochastic (mini-batch) gradient paths.

Tan & Bellec (2024) extend the memory-matrix estimate of Bellec & Tan (2024)
to mini-batch SGD: the traces carry the batch masks. :class:`SGDRiskTracker`
builds it online along kernel (EigenPro) SGD, whose traces use the batch
columns of the EigenPro kernel that training computes anyway; linear models
in feature space get it from :func:`skacv.estimates._risk.trajectory_risk` (Jacobian
chains of :func:`skacv.estimates._risk_curvature.curvature_memory_matrices`). Both end in
:func:`skacv.estimates._risk_readout.risk_from_sources`.
"""

import numpy as np

from .._config import check_memory
from ..linalg._sampling import rademacher
from ._risk import risk_from_memory, risk_from_sources


class SGDRiskTracker:
    """Memory-matrix risk estimate along kernel (EigenPro) SGD, built online.

    Step ``t`` on the batch ``B_t`` (distinct rows with draw counts ``C_t``)
    moves the fitted values by ``-h K_P C_t (f - y)``, ``K_P`` the EigenPro
    kernel matrix and ``h = eta / m``. With ``M_{t,s} = prod_{u=s+2..t}
    (I - h K_P C_u) h K_P`` (the response to an injection in the gradient of
    step ``s + 1``), Tan & Bellec's (2024) SGD estimate, for the square loss,
    uses

        A[t, s] = tr(M_{t,s} W),   K'[t, s] = tr(M_{t,s} C_{s+1}),
        V = (n_eff I - K')^{-1} A,
        R_t = F_t + sum_{s<t} V[t, s] (C_{s+1} / w) F_s,   risk_t = ||R_t||^2 / n_eff,

    ``F_s = sqrt(w) (y - f_s)`` and ``W = diag(w)`` (traces over the repeated
    rows, written on distinct rows). Full batch (``C = W``): ``K' = A`` and
    this is Bellec & Tan's estimate :func:`skacv.estimates._risk_readout.risk_from_memory`
    with a Toeplitz ``A``. The traces are Hutchinson estimates with probes
    ``u = sqrt(w) z``: one chain ``M_{t,s} u`` per source, all advanced by the
    batch columns of ``K_P`` that the training step computes anyway (one GEMM
    with more right-hand sides); the injection ``h K_P u`` is computed once.
    Weighted mini-batches use the expected mask ``C / w`` of a repeated row
    (a heuristic); unweighted or integer-free cases are the paper's form.
    """

    def __init__(self, n, n_targets, weight, full, n_probes, rng):
        self.n, self.c, self.w, self.full = n, n_targets, weight, full
        self.n_eff = float(n if weight is None else weight.sum())
        if n_probes is None:  # identity probes: exact traces
            Z, self.k, self.div = np.eye(n), n, 1.0
        else:
            self.k = int(n_probes)
            Z = rademacher(rng, (n, self.k))
            self.div = float(self.k)
        self.U = Z if weight is None else np.sqrt(weight)[:, None] * Z
        self.injection = None  # K_P U, set by the model
        self.F, self.Psi, self.A_rows, self.K_rows = [], [], [np.zeros(0)], [np.zeros(0)]
        self.chain = np.zeros((n, 0))
        self.n_src = 0
        self.src_rows, self.src_id, self.src_coef = [], [], []
        self.positions = []

    def record(self, f, Y):
        F = Y - f
        if self.w is not None:
            F = F * np.sqrt(self.w)[:, None]
        self.F.append(F)

    def rhs(self, rows, counts):
        """``C_B`` times the batch rows of the chains (to multiply by ``K_P[:, B]``)."""
        k = self.k
        cols = self.chain[:, : (k if self.full else k * self.n_src) if self.n_src else 0]
        return counts[:, None] * cols[rows]

    def step(self, rows, counts, h, KB, f, Y, positions=None):
        """Advance the chains with ``KB = K_P[:, B] @ rhs(rows, counts)``.

        ``positions``: the drawn copies of the repeated-rows multiset (integer
        weights), for the exact masks of the residuals.
        """
        self.positions.append(positions)
        k, n = self.k, self.n
        mask = counts if self.w is None else counts / self.w[rows]
        if self.full:
            cols = self.chain - h * KB if self.n_src else h * self.injection
            self.chain, self.n_src = cols, 1
            a = np.einsum("nk,nk->", self.U, cols) / self.div
            self.A_rows.append(np.array([a]))
            self.K_rows.append(np.array([a]))
        else:
            used, need = k * self.n_src, k * (self.n_src + 1)
            check_memory(8 * n * need, f"the risk-estimate chains ({n} x {need})",
                         "Use fewer n_probes, fewer epochs or estimate_risk=False. ")
            if self.chain.shape[1] < need:
                grown = np.zeros((n, max(need, 2 * self.chain.shape[1])))
                grown[:, :used] = self.chain[:, :used]
                self.chain = grown
            if used:
                self.chain[:, :used] -= h * KB
            self.chain[:, used:need] = h * self.injection
            self.src_rows.append(rows)
            self.src_id.append(np.full(rows.shape[0], self.n_src))
            self.src_coef.append(mask)
            self.n_src += 1
            blocks = self.chain[:, :need].reshape(n, self.n_src, k)
            self.A_rows.append(np.einsum("nsk,nk->s", blocks, self.U) / self.div)
            r, sid = np.concatenate(self.src_rows), np.concatenate(self.src_id)
            vals = np.einsum("ek,ek->e", blocks[r, sid], self.U[r]) * np.concatenate(self.src_coef)
            self.K_rows.append(np.bincount(sid, weights=vals, minlength=self.n_src) / self.div)
        psi = np.zeros_like(self.F[-1])  # what this step's gradient saw, masked
        psi[rows] = mask[:, None] * self.F[-1][rows]
        self.Psi.append(psi)
        self.record(f, Y)

    def memory_matrices(self):
        """``(A, K')``, lower triangular of shape (T + 1, T + 1)."""
        T = len(self.A_rows) - 1
        A, K = np.zeros((T + 1, T + 1)), np.zeros((T + 1, T + 1))
        for t in range(1, T + 1):
            if self.full:  # Toeplitz: A[t, 0] = A[t + j, j]
                idx = np.arange(T + 1 - t)
                A[t + idx, idx] = self.A_rows[t][0]
                K[t + idx, idx] = self.K_rows[t][0]
            else:
                A[t, :t], K[t, :t] = self.A_rows[t], self.K_rows[t]
        return A, K

    def risk(self, steps=None):
        """Estimated risk (summed over targets) of the iterates ``steps``."""
        A, K = self.memory_matrices()
        T1 = A.shape[0]
        F = np.stack(self.F, axis=-1).reshape(-1, T1)
        if self.full:
            risk, _ = risk_from_memory(F, A, self.n_eff, False)
        else:
            if self.w is not None and all(p is not None for p in self.positions):
                F, Psi = self._repeated_rows()
            else:
                Psi = np.stack(self.Psi + [np.zeros_like(self.F[0])], axis=-1).reshape(-1, T1)
            risk = risk_from_sources(F, Psi, A, K, self.n_eff)[0]
        return risk if steps is None else risk[steps]

    def _repeated_rows(self):
        """Residuals and exactly masked residuals on the repeated rows."""
        T1 = len(self.F)
        row_of = np.repeat(np.arange(self.n), np.round(self.w).astype(np.int64))
        ne = row_of.shape[0]
        check_memory(16 * ne * self.c * T1, f"the risk residuals ({ne} x {self.c * T1}, twice)",
                     "Use estimate_risk=False or fewer epochs. ")
        F = np.stack(self.F, axis=-1) / np.sqrt(self.w)[:, None, None]  # unweighted
        Fe = F[row_of]
        Psi = np.zeros_like(Fe)
        for s, pos in enumerate(self.positions):
            Psi[pos, :, s] = Fe[pos, :, s]
        return Fe.reshape(-1, T1), Psi.reshape(-1, T1)
