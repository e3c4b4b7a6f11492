"""Risk along kernel (EigenPro) SGD paths, built online (Tan & Bellec 2024's
extension of the memory-matrix estimate of Bellec & Tan 2024 to mini-batch
SGD: the traces carry the batch masks). Linear models get it from
:func:`skacv.estimates.risk._estimate.trajectory_risk`.
"""

import numpy as np
from scipy.linalg import solve_triangular

from ..._config import check_memory, path_memory_bytes
from ._probes import draw_probes

#: ``(T + 1) x (T + 1)`` float64 matrices the tracker holds at its peak: ``A``,
#: ``K'``, the triangular system ``n_eff I - K'`` and its solver's copy
TRACKER_MATRICES = 4


def flag_against_gcv(risk, df, train_mse, reliable, statistics):
    """The tracker's flags, and ``False`` from the first epoch where the estimate
    exceeds ``gcv_ratio`` times GCV on the same degrees of freedom.

    Both read the current residuals through ``1 / (1 - df)^2``; the memory
    terms add the earlier residuals. On kernel paths whose signal lies in the
    top eigendirections (one-hot digits) those carry the targets back into the
    estimate: it stayed 2.5-5.4 times GCV and 4-6 times the test error, while
    on smooth synthetic regressions it stayed within 1.06 times GCV.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        gcv = train_mse / (1.0 - df) ** 2
        ok = reliable & (risk <= statistics.gcv_ratio * gcv)
    return np.logical_and.accumulate(ok)


def leverage_probes(n_eff, statistics):
    """The probes fitted as targets for the leverage spread: ``sgd_leverage_probes``,
    and the fewer of ``sgd_leverage_probes_large`` from its number of rows on
    (the spread's probe noise falls with the rows it averages over)."""
    rows, probes = statistics.sgd_leverage_probes_large
    return probes if n_eff >= rows else statistics.sgd_leverage_probes


def leverage_spread(Z, X, w, exact):
    """``(h, se)``: ``h = Var(d) / (1 - mean(d))^2`` of the smoother's diagonal
    ``d = diag(S_t)`` (weighted by ``w``) from ``X = S_t Z``, the relative size of
    the second-order term that a trace (GCV) form drops from ``sum_i r_i^2 /
    (1 - d_i)^2``; ``se``: its probe noise's standard error (a delete-one-probe
    jackknife; 0 when exact, NaN with fewer than 3 probes).

    Hutchinson's ``d_i ~ mean_j z_ij x_ij`` adds the noise ``s_i^2 / k`` (the
    products' sample variance over the ``k`` probes) to ``d_i^2``, taken off
    here; ``exact``: ``Z`` is the identity. A row of weight ``w_i`` stands for
    ``w_i`` copies (as the tracker reads residuals), each of leverage ``d_i /
    w_i``: their weighted mean is ``tr(S_t) / n_eff``.
    """
    if w is None:
        wt, per_copy = np.full(X.shape[0], 1.0 / X.shape[0]), 1.0
    else:
        wt = w / w.sum()
        per_copy = np.divide(1.0, w, out=np.zeros(w.shape), where=w > 0)
    if exact:
        d = np.diag(X) * per_copy
        mean = wt @ d
        return float((wt @ (d * d) - mean * mean) / (1.0 - mean) ** 2), 0.0
    P = Z * X if w is None else Z * X * per_copy[:, None]
    k = P.shape[1]
    if k < 2:
        return np.nan, np.nan
    # the k probes, then the k sets without one of them: over a set of s
    # probes, d_i^2 less its noise is the mean of P_ij P_il over pairs j != l,
    # whose weighted mean over the rows comes from the Gram matrix of P
    m, G = wt @ P, P.T @ (wt[:, None] * P)
    pairs = G.sum() - np.trace(G)
    sizes = np.r_[k, np.full(k, k - 1.0)]
    mean = np.r_[m.sum(), m.sum() - m] / sizes
    with np.errstate(divide="ignore", invalid="ignore"):
        square = np.r_[pairs, pairs - 2.0 * (G.sum(axis=1) - np.diag(G))] / (sizes * (sizes - 1))
    h = (square - mean * mean) / (1.0 - mean) ** 2
    se = np.sqrt((k - 1) * np.mean((h[1:] - h[1:].mean()) ** 2)) if k > 2 else np.nan
    return float(h[0]), float(se)


def epochs_stop(risk, reliable, train_mse, statistics):
    """EigenPro's ``max_iter="auto"`` stops here: while the estimate holds, once
    its best has not fallen by ``sgd_risk_rtol`` over ``sgd_patience`` epochs;
    once flagged, at the ridgeless limit (the training error below
    ``sgd_limit_mse`` of its start, or stalling likewise)."""
    patience = statistics.sgd_patience
    if not reliable[-1] and train_mse[-1] <= statistics.sgd_limit_mse * train_mse[0]:
        return True
    if risk.shape[0] <= patience + 1:
        return False
    path = risk if reliable[-1] else train_mse
    return path.min() > (1.0 - statistics.sgd_risk_rtol) * path[: -patience].min()


class SGDRiskTracker:
    """Memory-matrix risk estimate along kernel (EigenPro) SGD, built online.

    Step ``t`` on the batch ``B_t`` (distinct rows, draw counts ``C_t``) moves
    the fitted values by ``-h K_P C_t (f - y)``, ``K_P`` the EigenPro kernel
    matrix and ``h = eta / m``. With ``M_{t,s} = prod_{u=s+2..t} (I - h K_P
    C_u) h K_P``, Tan & Bellec's (2024) SGD estimate for the square loss is

        A[t, s] = tr(M_{t,s} W),   K'[t, s] = tr(M_{t,s} C_{s+1}),
        V = (n_eff I - K')^{-1} A,
        R_t = F_t + sum_{s<t} V[t, s] (C_{s+1} / w) F_s,   risk_t = ||R_t||^2 / n_eff,

    ``F_s = sqrt(w) (y - f_s)`` and ``W = diag(w)``.

    **Traces stationary over epochs.** Every epoch draws its batches afresh, so
    the law of ``M_{t,s}`` depends on the lag ``t - s`` and on the position ``p
    = s mod S`` in the epoch of ``S`` steps. One chain per position ``p_g``
    (``G = min(S, n_probes)`` spread over the first epoch, ``k_p = n_probes //
    G`` Rademacher columns each, or the identity for exact traces with ``G =
    S``), advanced by the batch columns of ``K_P`` that training computes
    anyway, gives ``A[t, s] = A[t - s + p_g, p_g]`` for the sources whose
    position has ``p_g`` as its nearest chain at or before it (likewise
    ``K'``): about ``n_probes`` more right-hand sides a batch instead of
    ``O(T^2)`` chains. A source's trace depends strongly on its position
    (``K'`` at lag 8 was 4 times larger for an epoch's first batch than its
    last), hence the spread. Full batch (``S = 1``): Toeplitz, ``K' = A``,
    Bellec & Tan's estimate.

    Residuals are read on the units of the multiset of rows: integer weights
    with the drawn copies (``positions``) as repeated rows, other weights with
    the expected mask ``C / w`` (a heuristic). From ``df_t = sum_s K'[t, s] /
    n_eff >= df_high`` on the estimate is flagged (:meth:`reliable`).

    **Leverage spread.** The traces see ``diag(S_t)`` (``f_t = S_t y``) only
    through its mean; its spread is measured on some of the probes ``z``
    (:func:`leverage_probes`) fitted as targets (their residuals ``z - S_t z``
    advance as the chains do, as the last columns of ``chain``):
    :func:`leverage_spread`.
    """

    def __init__(self, n, n_targets, weight, steps_per_epoch, n_probes, rng, statistics,
                 positions=False):
        self.n, self.c, self.w, self.statistics = n, n_targets, weight, statistics
        self.S = S = int(steps_per_epoch)
        self.n_eff = float(n if weight is None else weight.sum())
        G = S if n_probes is None else min(S, int(n_probes))
        self.starts = (np.arange(G) * S) // G  # the positions that start a chain
        self.group = np.searchsorted(self.starts, np.arange(S), side="right") - 1
        self.exact = n_probes is None
        if self.exact:  # identity probes: exact traces
            self.kp, self.div = n, 1.0
            Z = np.tile(np.eye(n), (1, G))
        else:
            self.kp = max(1, int(n_probes) // G)
            self.div = float(self.kp)
            Z = draw_probes(rng, (n, G * self.kp))
        self.U = Z if weight is None else np.sqrt(weight)[:, None] * Z
        self.injection = None  # K_P U, set by the model
        # the chains, then the leverage probes' residuals z - S_t z (the last
        # columns of the batch products: a product's columns past a multiple of
        # the BLAS kernel's block can run as matrix-vector products)
        k = n if self.exact else min(Z.shape[1], leverage_probes(self.n_eff, statistics))
        self.Z = Z[:, :k]
        self.k = self.Z.shape[1]
        self.chain = self.Z.copy()
        self.J = 0  # the chains' columns, before the leverage probes
        self.spreads, self.spread_se = [], []
        # a deferred low-rank term (set_low_rank): the chains are chain + phi @ acc
        self.phi = None
        self.n_chains = 0
        # the probes on each chain's first batch, times its mask (the K' traces):
        # its rows, columns and values, and the chain of each entry
        self.first_rows = self.first_cols = self.first_chain = np.zeros(0, dtype=np.int64)
        self.first_val = np.zeros(0)
        self.first_flat = self.first_rows  # their positions in the flattened chains
        # traces by chain and lag: lag j of chain g is A[p_g + j, p_g]
        self.lag_A, self.lag_K = np.zeros((G, S + 1)), np.zeros((G, S + 1))
        self.lags = np.ones(G, dtype=np.int64)  # lag 0 holds 0
        self.t = 0
        self.copies = positions and weight is not None
        if self.copies:
            self.row_of = np.repeat(np.arange(n), np.round(weight).astype(np.int64))
        self.n_units = self.row_of.shape[0] if self.copies else n
        # per step of the current epoch: units and masked residuals; per
        # epoch: the same, joined (each unit once per epoch where the draws
        # are a permutation of the units)
        self.src_idx, self.src_val = [], []
        self.epochs = []  # (units, steps, values) of epochs whose draws repeat units
        self.n_aligned = 0  # ... and those with every unit once, stacked:
        self.steps_aligned = np.zeros((0, self.n_units), dtype=np.int64)
        self.values_aligned = np.zeros((0, self.n_units, n_targets))
        self.A = self.K = np.zeros((1, 1))  # the (t + 1) x (t + 1) matrices so far
        self.filled = 0  # their rows up to this one are filled
        self.risks, self.df = [], []

    # ------------------------------------------------------------ building
    def _units(self, R):
        """Residuals ``y - f`` of shape (n, c) on the units of the estimate."""
        if self.copies:
            return R[self.row_of]
        return R if self.w is None else R * np.sqrt(self.w)[:, None]

    def set_low_rank(self, phi):
        """Take ``K_P[:, B] = K[:, B] - phi diag(s) phi[B]^T`` with the low-rank term
        deferred: the chains are ``chain + phi @ acc`` (``O(m q)`` a step for the
        batch rows instead of ``O(n q)``), their traces through ``phi^T U``."""
        self.phi = phi
        self.acc = np.zeros((phi.shape[1], self.k))
        self.phi_U = phi.T @ self.U  # (q, G kp)
        self.phi_UM = np.zeros_like(self.phi_U)  # phi^T (U * first mask), by chain

    def rhs(self, rows, counts, low=None):
        """``C_B`` times the batch rows of the chains; ``low``: ``phi[rows] @ acc``
        if the caller has it."""
        chain = self.chain[rows]
        if self.phi is not None:
            chain += self.phi[rows] @ self.acc if low is None else low
        chain *= counts[:, None]
        return chain

    def _start_chain(self, rows, mask, h, low):
        """Chain ``g`` starts on this step's batch: ``h K_P U_g`` (the injection)
        before the leverage probes' columns; its probes on the batch, times the
        mask, are kept by entries (the ``K'`` traces)."""
        g, kp, J = self.n_chains, self.kp, self.J
        cols = slice(g * kp, (g + 1) * kp)
        self.chain = np.hstack([self.chain[:, :J], h * self.injection[:, cols], self.chain[:, J:]])
        UM = mask[:, None] * self.U[rows, cols]  # (m, kp)
        self.first_rows = np.r_[self.first_rows, np.repeat(rows, kp)]
        self.first_cols = np.r_[self.first_cols, np.tile(np.arange(g * kp, (g + 1) * kp),
                                                         rows.shape[0])]
        self.first_chain = np.r_[self.first_chain, np.full(UM.size, g)]
        self.first_val = np.r_[self.first_val, UM.ravel()]
        self.first_flat = self.first_rows * self.chain.shape[1] + self.first_cols
        if low:
            q = self.acc.shape[0]
            self.acc = np.hstack([self.acc[:, :J], np.zeros((q, kp)), self.acc[:, J:]])
            self.phi_UM[:, cols] = self.phi[rows].T @ UM
        self.n_chains += 1
        self.J = J + kp

    def step(self, rows, counts, h, hKB, resid, positions=None, hcorr=None):
        """Advance the chains with ``hKB = h K_P[:, B] @ rhs(rows, counts)`` (after
        :meth:`set_low_rank`, its ``K`` part and ``hcorr``); ``resid``: ``y - f``
        on the batch rows before the step; ``positions``: the drawn copies.
        """
        mask = counts if self.w is None else counts / self.w[rows]
        self.chain -= hKB
        low = self.phi is not None
        if low:
            self.acc += hcorr
        if self.n_chains < self.starts.shape[0] and self.t == self.starts[self.n_chains]:
            self._start_chain(rows, mask, h, low)
        self.t += 1
        active, kp, J = self.n_chains, self.kp, self.J
        # the column sums of chain * U, summed by chain; those of chain times
        # the probes on its first batch from that batch's entries alone
        a = np.einsum("nj,nj->j", self.chain[:, :J], self.U[:, :J]).reshape(active, kp).sum(axis=1)
        kap = np.bincount(self.first_chain, np.take(self.chain, self.first_flat) * self.first_val,
                          minlength=active)
        if low:  # the traces of phi @ acc
            q = self.acc.shape[0]
            acc = self.acc[:, :J].reshape(q, active, kp)
            a += np.einsum("qpk,qpk->p", self.phi_U[:, : active * kp].reshape(q, active, kp), acc)
            kap += np.einsum("qpk,qpk->p", self.phi_UM[:, : active * kp].reshape(q, active, kp),
                             acc)
        a /= self.div
        kap /= self.div
        lags = self.lags[:active]
        if lags.max() >= self.lag_A.shape[1]:  # room for more lags
            grow = max(self.S, self.lag_A.shape[1] // 2)
            self.lag_A = np.pad(self.lag_A, ((0, 0), (0, grow)))
            self.lag_K = np.pad(self.lag_K, ((0, 0), (0, grow)))
        idx = np.arange(active)
        self.lag_A[idx, lags] = a
        self.lag_K[idx, lags] = kap
        self.lags[:active] += 1
        if self.copies:
            if positions is None:  # full batch: every copy
                positions = np.arange(self.n_units)
            self.src_idx.append(positions)
            self.src_val.append(resid[np.searchsorted(rows, self.row_of[positions])])
        else:
            self.src_idx.append(rows)
            scale = mask if self.w is None else mask * np.sqrt(self.w[rows])
            self.src_val.append(scale[:, None] * resid)

    @staticmethod
    def memory_bytes(steps):
        """Bytes of the estimate's matrices at its peak after ``steps`` steps."""
        return TRACKER_MATRICES * 8.0 * (int(steps) + 1) ** 2

    def check_memory(self, steps, hint=""):
        """Refuse ``steps`` steps whose matrices exceed ``path_memory_limit``."""
        check_memory(self.memory_bytes(steps), f"The risk estimate of {int(steps)} SGD steps "
                     f"({TRACKER_MATRICES} matrices of {int(steps) + 1} x {int(steps) + 1} "
                     "floats)", hint)

    def _matrices(self, t):
        """``A`` and ``K'`` (t + 1, t + 1) from the positions' lags, the rows since
        the last call filled."""
        size = self.A.shape[0]
        if t + 1 > size:  # room for more steps (by half again, not doubling)
            new = max(t + 1, size + size // 2)
            if self.memory_bytes(new) > path_memory_bytes():  # no spare room near the limit
                new = t + 1
            self.check_memory(new - 1)
            A, K = np.zeros((new, new)), np.zeros((new, new))
            A[:size, :size], K[:size, :size] = self.A, self.K
            self.A, self.K = A, K
        r0 = self.filled + 1
        if r0 <= t:
            r = np.arange(r0, t + 1)[:, None]
            src = np.arange(t)[None, :]
            lag = r - src
            g = self.group[src % self.S]
            lag = np.where(lag > 0, lag, 0)  # lag 0 holds 0: the sources s >= r
            self.A[r0: t + 1, :t] = self.lag_A[g, lag]
            self.K[r0: t + 1, :t] = self.lag_K[g, lag]
            self.filled = t
        return self.A[: t + 1, : t + 1], self.K[: t + 1, : t + 1]

    def start(self, R):
        """Residuals ``y - f`` (n, c) of the starting point."""
        self.risks.append(float(np.sum(self._units(R) ** 2)) / self.n_eff)
        self.df.append(0.0)
        self.spreads.append(0.0)
        self.spread_se.append(0.0)

    def _close_epoch(self, first_step):
        """Join the sources of the steps since ``first_step`` (an epoch)."""
        if not self.src_idx:
            return
        units = np.concatenate(self.src_idx)
        steps = np.repeat(np.arange(first_step, first_step + len(self.src_idx)),
                          [len(i) for i in self.src_idx])
        values = np.concatenate(self.src_val)
        order = None
        if units.shape[0] == self.n_units:  # a permutation of the units: its inverse
            inv = np.full(self.n_units, -1)
            inv[units] = np.arange(self.n_units)
            order = inv if inv.min() >= 0 else None
        if order is None:
            order = np.argsort(units, kind="stable")
        units, steps, values = units[order], steps[order], values[order]
        distinct = units.shape[0] == self.n_units and bool(np.all(np.diff(units) > 0))
        if distinct:  # stacked in arrays grown by half again
            e = self.n_aligned
            if e == self.steps_aligned.shape[0]:
                grow = max(4, e // 2)
                self.steps_aligned = np.concatenate(
                    [self.steps_aligned, np.zeros((grow, self.n_units), dtype=np.int64)])
                self.values_aligned = np.concatenate(
                    [self.values_aligned, np.zeros((grow,) + values.shape)])
            self.steps_aligned[e], self.values_aligned[e] = steps, values
            self.n_aligned += 1
        else:
            self.epochs.append((units, steps, values))
        self.src_idx, self.src_val = [], []

    def epoch_end(self, R):
        """Read out the estimate of the current iterate (residuals ``R = y - f``)."""
        t = self.t
        self._close_epoch(t - len(self.src_idx))
        A, K = self._matrices(t)
        # row t of V = (n_eff I - K')^{-1} A: e_t^T L^{-1} by a transposed solve
        L = -K
        L[np.diag_indices(t + 1)] += self.n_eff
        e = np.zeros(t + 1)
        e[t] = 1.0
        v = solve_triangular(L, e, lower=True, trans="T", check_finite=False) @ A
        out = self._units(R).copy()
        # sources s < t (the gradient of step s + 1): every unit once per
        # epoch when the draws are a permutation of the units
        e = self.n_aligned
        if e:
            out += np.einsum("eu,euc->uc", v[self.steps_aligned[:e]], self.values_aligned[:e])
        for units, steps, values in self.epochs:
            np.add.at(out, units, v[steps][:, None] * values)
        self.risks.append(float(np.sum(out ** 2)) / self.n_eff)
        self.df.append(float(K[t].sum()) / self.n_eff)
        E = self.chain[:, self.J:]
        if self.phi is not None:  # a matrix-vector product a probe: a product of a
            # few columns packs phi (at n = 20000, q = 445: 7.9 ms against 5.9)
            acc = np.ascontiguousarray(self.acc[:, self.J:].T)
            E = E + (self.phi @ acc.T if self.exact or not acc.shape[0] else
                     np.stack([self.phi @ col for col in acc], axis=1))
        h, se = leverage_spread(self.Z, self.Z - E, self.w, self.exact)
        self.spreads.append(h)
        self.spread_se.append(se)
        return self.risks[-1]

    # ------------------------------------------------------------ read-out
    def risk(self):
        """Estimated risk (summed over targets) at the start and every epoch end."""
        return np.array(self.risks)

    def degrees_of_freedom(self):
        """``df_t`` (fraction of ``n_eff``) at the start and every epoch end."""
        return np.array(self.df)

    def reliable(self):
        """``False`` from the first epoch whose ``df_t`` reaches ``df_high`` on."""
        df = self.degrees_of_freedom()
        ok = np.isfinite(self.risk()) & (df < self.statistics.df_high)
        return np.logical_and.accumulate(ok)
