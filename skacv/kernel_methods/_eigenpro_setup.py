"""How an EigenPro fit starts: the bandwidth, the Nystrom preconditioner,
the batch and step sizes, and the zero state that the epochs advance.

Step and batch sizes follow Ma, Bassily & Belkin (2018) for the
preconditioned operator: ``beta = max_i k_P(x_i, x_i)`` (over every training
row), ``lambda_P`` the top eigenvalue after preconditioning, the critical
batch ``m* = beta / lambda_P + 1``. The batch is ``m = floor(m*)``, or the
whole data (full-batch gradient descent) when ``m* >= n`` or when the
subsample is the whole data and ``m* >= n / 4`` (the eigenvalues are then
exact, and SGD would gain at most a factor ``n / m*`` per epoch; ``q`` is then
EigenPro 2's rule on a split of the rows). The step is
``eta = m / beta`` (linear scaling) below ``m*``, ``0.9 * 2 m / (beta + (m - 1)
lambda_P)`` (the edge of stability with a 10 % margin) above it, and ``1 /
lambda_P`` for full-batch gradient descent (no sampling noise).
"""

import dataclasses
import time

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from .._config import check_memory
from ..estimates.risk._sgd import SGDRiskTracker
from ..iterations._preconditioning import NystromPreconditioner
from ..linalg._linalg import top_eigenvalue
from ..linalg._sampling import EpochSampler, counts_of, draw_rows
from ._kernels import (
    Kernel,
    KernelOperator,
    median_bandwidth,
    row_value_order,
    scale_bandwidth,
)

_EPS32 = float(np.finfo(np.float32).eps)


@dataclasses.dataclass(eq=False)
class _KernelFitState:
    """What the epochs of an EigenPro fit advance (a warm start continues
    it), on the ``n`` training rows of positive weight and ``c`` outputs:
    the targets ``Y`` (n, c), the weights ``w`` (``None``: all one) and
    their sum ``n_eff``, the kernel products ``op``, the Nystrom rows
    ``rows_S``, ``phi = K(X, X_S)`` times the preconditioner's eigenvectors
    (n, q), the epochs' ``sampler``, the dual coefficients ``alpha`` and
    fitted values ``f = K alpha`` (n, c), the step per unit of batch weight
    ``h = eta / m`` and the training mse at zero ``mse0`` (the divergence
    test's scale)."""

    Y: np.ndarray
    w: np.ndarray | None
    n_eff: float
    op: KernelOperator
    rows_S: np.ndarray
    phi: np.ndarray
    sampler: EpochSampler
    alpha: np.ndarray
    f: np.ndarray
    h: float
    mse0: float = np.nan

    def train_mse(self, f):
        """Weighted training mse of ``f``, averaged over the outputs."""
        r = f - self.Y
        r2 = np.einsum("ij,ij->i", r, r)
        return float((r2.sum() if self.w is None else self.w @ r2) / self.n_eff
                     / r.shape[1])


class EigenProSetup:
    """The start of an EigenPro fit: :meth:`_kernel_setup` sets the fitted
    sizes and ``_state``."""

    def _target_level(self, Y, w):
        """The constant the kernel expansion is added to, per output: zeros
        (the classifier's one-hot scores start at zero)."""
        return np.zeros(Y.shape[1])

    def _kernel_setup(self, X, Y, sw, policies):
        """Preconditioner, step and batch sizes, and the zero starting point."""
        tic = time.perf_counter()
        policy, statistics = policies
        pos = None if sw is None else np.flatnonzero(sw > 0)
        Xc = X if pos is None else X[pos]
        Yc = Y if pos is None else Y[pos]
        w = None if sw is None else sw[pos]
        self._offset = self._target_level(Yc, w)  # (the path's start, added to f)
        Yc = Yc - self._offset
        n = Xc.shape[0]
        n_eff = float(n if w is None else w.sum())
        rng = check_random_state(self.random_state)
        self._rng = np.random.RandomState(rng.randint(np.iinfo(np.int32).max))
        # probes of the risk estimate: their own stream, so that the fit does
        # not depend on estimate_risk
        probe_rng = np.random.RandomState(rng.randint(np.iinfo(np.int32).max))
        if self.bandwidth == "scale":
            self.bandwidth_ = scale_bandwidth(Xc, w)
        elif self.bandwidth == "median":  # its own stream too
            bw_rng = np.random.RandomState(rng.randint(np.iinfo(np.int32).max))
            self.bandwidth_ = median_bandwidth(Xc, w, statistics.eigenpro_median_draws, bw_rng,
                                             statistics)
        else:
            self.bandwidth_ = float(self.bandwidth)
        kern = Kernel(self.kernel, self.bandwidth_, self.kernel_params)
        op = KernelOperator(kern, Xc, policy)
        # ---- Nystrom preconditioner
        M = self._subsample_draws(n_eff, statistics)
        if n_eff - M < statistics.eigenpro_heldout_min * M:  # too few rows to check lambda_P
            M = int(np.ceil(n_eff))
        rows_S, counts_S, exact = draw_rows(w, M, self._rng, n, statistics)
        m_S = rows_S.shape[0]
        check_memory(3 * 8 * m_S * m_S, f"the Nystrom eigensystem ({m_S} x {m_S}, 3 copies)",
                     "Lower subsample_size. ")
        width = 0 if sp.issparse(X) else X.shape[1]  # (a dense X: its centred factors)
        check_memory(8 * n * (width + 2 * Yc.shape[1] + 2), "the training state",
                     "Use fewer samples. ")
        XS = Xc[rows_S]
        K_SS = kern(XS, XS)
        kdiag = kern.diagonal(Xc)
        held = None if exact else self._heldout_rows(w, rows_S, counts_S, M, n, statistics)
        rule, n_components = None, self.n_components
        if exact and n_components == "auto":
            n_components = self._split_rule(XS, K_SS, counts_S, kdiag[rows_S], policies)
        if held is not None:  # the q rule's beta_P on rows outside the subsample
            mult = np.zeros(n)
            mult[held[0]] = held[1]
            n_rule = min(statistics.eigenpro_rule_rows, mult.sum())
            rows_R = draw_rows(mult, n_rule, self._rng, n, statistics)[0]
            rule = (kern(Xc[rows_R], XS), kdiag[rows_R])
        P = NystromPreconditioner.from_kernel(
            K_SS, counts_S, n_components, policies,
            max_batch=None if exact else counts_S.sum(), heldout=rule,
            single=not exact and m_S >= policy.eigenpro_eigh_float32_min_order)
        P.subsample_indices_, P.subsample_counts_ = rows_S, counts_S
        q = P.n_components_
        lam_p = P.top_eigenvalue_
        if held is not None:  # the Nystrom value underestimates it: check on held-out draws
            lam_p = max(lam_p, self._heldout_top_eigenvalue(kern, Xc, held, XS, P, policy))
        gain = P.eigenvalues_[0] / lam_p if lam_p > 0 else np.inf
        rounding_tol = policy.eigenpro_rounding_tol
        # float64 where the n x n matrix fits in it and n is at most the
        # speed policy's eigenpro_float64_max_rows (a few hundred rows,
        # where the two cost the same), else float32 where the gain allows
        # (blocks, or the matrix kept in float32 where it fits)
        kept64 = op.use_full and n <= policy.eigenpro_float64_max_rows
        # (the fused blocks of a dense X: other kernels and a sparse X in float64)
        single = op.fused and (self.precision == "float32" or (
            self.precision == "auto" and not kept64 and gain * _EPS32 <= rounding_tol))
        self.precision_ = "float32" if single else "float64"
        # the eigenfunctions at every row from the training's kernel blocks
        # (kept in float64): in float32 the low-rank part of K_P cancels the
        # same rounded kernel the steps multiply by, and the pass of q
        # columns is faster (docs/benchmarks.rst)
        if single:
            op.to_single()
        op.ensure()
        phi = op.matmul(rows_S, P.coef_) if q else np.zeros((n, 0))
        kp_diag = kdiag - (phi * phi) @ P.scale_ if q else kdiag
        beta = float(max(kp_diag.max(), np.finfo(np.float64).tiny))
        m_star = beta / lam_p + 1.0 if lam_p > 0 else np.inf
        # ---- batch and step (Ma, Bassily & Belkin 2018)
        if self.batch_size != "auto":
            m = float(self.batch_size)
        elif m_star >= n_eff or (exact and 4 * m_star >= n_eff):
            m = n_eff  # within a factor 4 of n, SGD gains little on exact full-batch GD
        else:
            m = m_star
        m = max(1, int(m)) if m < n_eff else n_eff
        full = m >= n_eff
        if self.step_size != "auto":
            eta = float(self.step_size)
        elif full:
            eta = 1.0 / lam_p if lam_p > 0 else 1.0 / beta
        elif m <= m_star:
            eta = m / beta
        else:
            eta = statistics.eigenpro_saturation_margin * 2.0 * m / (beta + (m - 1) * lam_p)
        # ---- state
        self.X_fit_ = Xc
        self.preconditioner_ = P
        self.n_components_ = q
        self.subsample_size_ = int(round(counts_S.sum()))
        self.beta_ = beta
        self.top_eigenvalue_ = float(lam_p)
        self.critical_batch_size_ = float(m_star)
        self.batch_size_ = int(round(m))
        self.step_size_ = float(eta)
        self.n_iter_ = 0
        self.n_steps_ = 0
        self._coef_path = [np.zeros((n, Yc.shape[1]))]
        self._state = _KernelFitState(
            Y=Yc, w=w, n_eff=n_eff, op=op, rows_S=rows_S, phi=phi,
            sampler=EpochSampler(w, n, m, full, statistics), alpha=np.zeros((n, Yc.shape[1])),
            f=np.zeros((n, Yc.shape[1])), h=eta / m,
        )
        self._state.mse0 = self._state.train_mse(self._state.f)
        self.train_mse_path_ = np.array([self._state.mse0])
        self._tracker = None
        if self.estimate_risk or self.max_iter == "auto":
            steps = 1 if full else -(-int(round(n_eff)) // int(m))
            probes = self.n_probes_ = self._probe_count(n_eff, statistics)
            self._tracker = SGDRiskTracker(n, Yc.shape[1], w, steps, probes, probe_rng,
                                           statistics, positions=self._state.sampler.integer)
            U = self._tracker.U
            KU = op.matmul(np.arange(n), U)
            if q:
                KU -= phi @ (P.scale_[:, None] * (phi.T @ U))
            self._tracker.injection = KU
            self._tracker.start(Yc - self._state.f)
        self._setup_time = time.perf_counter() - tic
        if self.verbose:
            print(f"[EigenPro] n={n}, subsample {self.subsample_size_}, q={q}, "
                  f"lambda_1={P.eigenvalues_[0]:.4g}, lambda_P={lam_p:.4g}, beta={beta:.4g}, "
                  f"m*={m_star:.4g}, batch {self.batch_size_}{' (full)' if full else ''}, "
                  f"step {eta:.4g}; set-up {self._setup_time:.1f}s")

    def _heldout_rows(self, w, rows_S, counts_S, M, n, statistics):
        """Draws from the rest of the multiset of rows (the weights minus the
        subsample's draws): ``(rows, counts)`` or None."""
        rest = np.ones(n) if w is None else w.astype(np.float64).copy()
        rest[rows_S] = np.maximum(rest[rows_S] - counts_S, 0.0)
        if rest.sum() < 2:
            return None
        rows, counts, _ = draw_rows(rest, min(M, rest.sum()), self._rng, n, statistics)
        return rows, counts

    def _split_rule(self, XS, K_SS, counts, diagonal, policies):
        """``q`` of the whole data's preconditioner: EigenPro 2's rule (Ma &
        Belkin 2019) on a random half of the rows, its critical batch bounded by
        the half's draws and ``beta_P`` taken on the other half. On the rows of
        its own eigensystem ``k_P`` falls to 0 as ``q`` nears their number, and
        with the floor alone ``q`` flattened nearly every direction (232-262 of
        250-300 rows): the epochs then fit the noise at once. The halves split
        the multiset of rows (integer weights: their copies) taken in the
        order of their values, so that repeated rows and weights split alike."""
        m = K_SS.shape[0]
        integer = bool(np.all(counts == np.round(counts)))
        order = row_value_order(XS)
        units = np.repeat(order, counts[order].astype(np.int64) if integer else 1)
        if units.shape[0] < 4:
            return "auto"
        perm = self._rng.permutation(units.shape[0])
        half, c_half = counts_of(units[perm[: units.shape[0] // 2]], m)
        rest = np.unique(units[perm[units.shape[0] // 2:]])
        c_half = c_half if integer else counts[half]
        P = NystromPreconditioner.from_kernel(
            K_SS[np.ix_(half, half)], c_half, "auto", policies,
            max_batch=c_half.sum(), heldout=(K_SS[np.ix_(rest, half)], diagonal[rest]))
        return P.n_components_

    def _subsample_draws(self, n_eff, statistics):
        """``M``: ``subsample_size``, or for ``"auto"`` the statistical policy's
        ``eigenpro_subsample_*`` rule (docs/speed_policy.rst; Ma & Belkin 2019)."""
        if self.subsample_size != "auto":
            return int(self.subsample_size)
        small, large, from_n = statistics.eigenpro_subsample_max
        cap = small if n_eff < from_n else large
        if 2 * cap <= n_eff:
            return cap
        by_n = np.ceil(cap * (n_eff / (2 * cap)) ** statistics.eigenpro_subsample_power)
        return int(min(cap, max(by_n, statistics.eigenpro_subsample_min)))

    def _probe_count(self, n_eff, statistics):
        """``n_probes``, or for ``"auto"`` the fewest probes ``m`` (at least
        ``sgd_probes_min``, at most ``sgd_probes``) whose relative spread of the
        estimate, in the form of Hutchinson's bound ``sqrt(2 / (m n_eff))``
        (Rademacher probes of an operator with eigenvalues in [0, 1], the
        estimate's trace a fraction of ``n_eff``), is at most
        ``sgd_probe_spread`` (docs/benchmarks.rst). A statistical choice: the
        same on every machine, whatever its BLAS kernels pad the products to."""
        if self.n_probes != "auto":
            return self.n_probes
        tol = statistics.sgd_probe_spread
        m = max(int(np.ceil(2.0 / (n_eff * tol * tol))), statistics.sgd_probes_min)
        return min(statistics.sgd_probes, m)

    @staticmethod
    def _heldout_top_eigenvalue(kern, Xc, held, XS, P, policy):
        """Top eigenvalue of the EigenPro kernel operator on draws outside the subsample.

        The Nystrom estimate ``lambda_P`` sees the subsample its eigenfunctions
        were fitted to and underestimates the top eigenvalue on the whole
        data, which would put a batch of the estimated critical size beyond
        the edge of stability; draws from the rest of the multiset of rows
        (the weights minus the subsample's draws) do not (docs/internals.rst).
        """
        rows, counts = held
        XH = Xc[rows]
        sc = np.sqrt(counts) / np.sqrt(counts.sum())
        K = kern(XH, XH)
        K *= sc[:, None]
        K *= sc[None, :]
        if not P.n_components_:
            return top_eigenvalue(K, policy=policy)
        phi = sc[:, None] * (kern(XH, XS) @ P.coef_)
        phi_s = phi * P.scale_
        if K.shape[0] <= policy.dense_eig_size:  # LAPACK's: the matrix, not op(I)
            return top_eigenvalue(K - phi_s @ np.ascontiguousarray(phi.T), policy=policy)
        # the low-rank part as an operator (not the h x h product with phi)

        def op(V):
            return K @ V - phi_s @ (phi.T @ V)

        return top_eigenvalue(op=op, dim=K.shape[0], policy=policy)
