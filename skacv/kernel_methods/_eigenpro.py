"""EigenPro kernel machines (Ma & Belkin 2017, 2019).

The model is ``f(x) = sum_j alpha_j k(x, x_j)`` over the training rows,
fitted by mini-batch SGD on the square loss from ``alpha = 0`` with EigenPro's
Nystrom preconditioner: the top ``q`` eigendirections of the kernel operator,
estimated on a subsample of ``M`` rows, are flattened to ``lambda_{q+1}``.
One step on a batch ``B`` of ``m`` draws with residuals ``g = f(X_B) - Y_B``:

    alpha[B] -= (eta / m) g
    alpha[S] += (eta / m) coef diag(d / lambda) phi(X_B)^T g

with ``phi(x) = k(x, X_S) coef`` the Nystrom eigenfunctions. This is SGD with
the *EigenPro kernel* ``k_P(x, z) = k(x, z) - sum_i (d_i/lambda_i) phi_i(x)
phi_i(z)`` (same RKHS, flatter spectrum, same interpolant). The number of
epochs is the regulariser; run to convergence, the fit is the minimum-norm
interpolant ``K^+ Y`` (ridgeless kernel regression).

Step and batch sizes follow Ma, Bassily & Belkin (2018) for the
preconditioned operator: ``beta = max_i k_P(x_i, x_i)`` (over every training
row), ``lambda_P`` the top eigenvalue after preconditioning, the critical
batch ``m* = beta / lambda_P + 1``. The batch is ``m = floor(m*)``, or the
whole data (full-batch gradient descent) when ``m* >= n`` or when the
subsample is the whole data and ``m* >= n / 4`` (the eigenvalues are then
exact, and SGD would gain at most a factor ``n / m*`` per epoch). The step is
``eta = m / beta`` (linear scaling) below ``m*``, ``0.9 * 2 m / (beta + (m - 1)
lambda_P)`` (the edge of stability with a 10 % margin) above it, and ``1 /
lambda_P`` for full-batch gradient descent (no sampling noise).

Sample weights are frequency weights: batches and the subsample are draws
from the multiset of rows repeated by their (integer) weights, so that a
weighted fit equals the fit on repeated rows (same random stream, same
path); other weights are drawn with probability ``w / sum(w)``.

Kernel blocks are computed by row chunks of at most
``skacv.get_config()["working_memory"]`` MiB; the full ``n x n`` kernel
matrix is used during the fit only when it needs less than a quarter of it,
and never kept by the fitted model.
"""

import dataclasses
import time
from numbers import Integral, Real

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._config import check_memory, working_memory_bytes
from .._policy import current_policies
from ..estimates.risk._sgd import SGDRiskTracker, epochs_stop, flag_against_gcv
from ..estimators._base import TrajectoryEstimator
from ..exceptions import DivergenceError
from ..iterations._preconditioning import NystromPreconditioner
from ..linalg._linalg import top_eigenvalue
from ..linalg._sampling import EpochSampler, draw_rows
from ..utils._compat import Interval, StrOptions, _fit_context
from ._eigenpro_docs import _DOC_ATTRIBUTES, _DOC_PARAMS
from ._kernels import KERNELS, Kernel, KernelOperator, median_bandwidth, scale_bandwidth

_EPS32 = float(np.finfo(np.float32).eps)


@dataclasses.dataclass(eq=False)
class _KernelFitState:
    """What the epochs of an EigenPro fit advance (a warm start continues it).

    ``n`` is the number of training rows of positive weight, ``c`` of outputs.

    Attributes
    ----------
    Y : ndarray of shape (n, c)
        Targets.
    w : ndarray of shape (n,) or None
        Sample weights (``None``: all one).
    n_eff : float
        Sum of the weights.
    op : KernelOperator
        Products with the kernel matrix.
    rows_S : ndarray of shape (s,)
        The Nystrom subsample's rows.
    phi : ndarray of shape (n, q)
        ``K(X, X_S)`` times the preconditioner's eigenvectors.
    sampler : EpochSampler
        The mini-batches of an epoch.
    alpha, f : ndarray of shape (n, c)
        Dual coefficients and the fitted values ``K alpha``.
    h : float
        Step per unit of batch weight (``eta / m``).
    mse0 : float
        Training mean squared error at zero (the divergence test's scale).
    """

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


class _BaseEigenPro(TrajectoryEstimator):
    """Shared fit/predict of :class:`EigenProRegressor` and :class:`EigenProClassifier`."""

    _parameter_constraints: dict = {
        "kernel": [StrOptions(set(KERNELS)), callable],
        "bandwidth": [StrOptions({"median", "scale"}), Interval(Real, 0, None, closed="neither")],
        "kernel_params": [dict, None],
        "n_components": [StrOptions({"auto"}), Interval(Integral, 0, None, closed="left")],
        "subsample_size": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "batch_size": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "step_size": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "max_iter": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "warm_start": ["boolean"],
        "estimate_risk": ["boolean"],
        "n_probes": [Interval(Integral, 1, None, closed="left"), None],
        "precision": [StrOptions({"auto", "float32", "float64"})],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    # the risk chains are built online: estimate_risk and n_probes are protected
    _free_params = ("max_iter", "warm_start", "verbose")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags

    def __init__(self, kernel="gaussian", *, bandwidth="median", kernel_params=None,
                 n_components="auto", subsample_size="auto", batch_size="auto",
                 step_size="auto", max_iter="auto", warm_start=False, estimate_risk=False,
                 n_probes=10, precision="auto", random_state=None, verbose=0):
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.kernel_params = kernel_params
        self.n_components = n_components
        self.subsample_size = subsample_size
        self.batch_size = batch_size
        self.step_size = step_size
        self.max_iter = max_iter
        self.warm_start = warm_start
        self.estimate_risk = estimate_risk
        self.n_probes = n_probes
        self.precision = precision
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ fit
    def _continues(self):
        """This fit continues the previous one (``warm_start``)."""
        if self.warm_start and self.max_iter == "auto":
            raise ValueError(
                "warm_start=True needs an integer max_iter (the total number of epochs); "
                "max_iter='auto' chooses it by the risk estimate in one fit."
            )
        return super()._continues() and getattr(self, "_state", None) is not None

    def _run_path(self, X, Y, sample_weight, warm, frozen):
        """Set up a new fit (or keep the previous one) and run the epochs."""
        policies = current_policies()
        if not warm:
            self._kernel_setup(X, Y, sample_weight, policies)
        if self.max_iter == "auto":
            self._run_epochs(policies[1].eigenpro_auto_max_epochs, policies[1], auto=True)
        else:
            self._run_epochs(self.max_iter - self.n_iter_, policies[1])

    def _kernel_setup(self, X, Y, sw, policies):
        """Preconditioner, step and batch sizes, and the zero starting point."""
        tic = time.perf_counter()
        policy, statistics = policies
        pos = None if sw is None else np.flatnonzero(sw > 0)
        Xc = X if pos is None else X[pos]
        Yc = Y if pos is None else Y[pos]
        w = None if sw is None else sw[pos]
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
        if self.subsample_size == "auto":
            M = 2000 if n_eff < 1e5 else 12000
        else:
            M = int(self.subsample_size)
        rows_S, counts_S, exact = draw_rows(w, M, self._rng, n, statistics)
        m_S = rows_S.shape[0]
        check_memory(3 * 8 * m_S * m_S, f"the Nystrom eigensystem ({m_S} x {m_S}, 3 copies)",
                     "Lower subsample_size. ")
        check_memory(8 * n * (X.shape[1] + 2 * Yc.shape[1] + 2), "the training state",
                     "Use fewer samples. ")
        K_SS = self._kernel_block(kern, op, Xc, rows_S, rows_S)
        kdiag = kern.diagonal(Xc)
        held = None if exact else self._heldout_rows(w, rows_S, counts_S, M, n, statistics)
        rule = None
        if held is not None:  # the q rule's beta_P on rows outside the subsample
            mult = np.zeros(n)
            mult[held[0]] = held[1]
            n_rule = min(statistics.eigenpro_rule_rows, mult.sum())
            rows_R = draw_rows(mult, n_rule, self._rng, n, statistics)[0]
            rule = (self._kernel_block(kern, op, Xc, rows_R, rows_S), kdiag[rows_R])
        P = NystromPreconditioner.from_kernel(
            K_SS, counts_S, self.n_components, policies,
            max_batch=None if exact else counts_S.sum(),
            heldout=rule)
        P.subsample_indices_, P.subsample_counts_ = rows_S, counts_S
        q = P.n_components_
        phi = op.matmul(rows_S, P.coef_) if q else np.zeros((n, 0))
        kp_diag = kdiag - (phi * phi) @ P.scale_ if q else kdiag
        beta = float(max(kp_diag.max(), np.finfo(np.float64).tiny))
        lam_p = P.top_eigenvalue_
        if held is not None:  # the Nystrom value underestimates it: check on held-out draws
            lam_p = max(lam_p, self._heldout_top_eigenvalue(kern, op, Xc, held, phi, P,
                                                                      policy))
        m_star = beta / lam_p + 1.0 if lam_p > 0 else np.inf
        gain = P.eigenvalues_[0] / lam_p if lam_p > 0 else np.inf
        rounding_tol = policy.eigenpro_rounding_tol
        single = kern.kernel == "gaussian" and (self.precision == "float32" or (
            self.precision == "auto" and not op.use_full and gain * _EPS32 <= rounding_tol))
        self.precision_ = "float32" if single else "float64"
        if single:
            op.to_single()
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
        self._epoch_steps = [0]
        self._coef_path = [np.zeros((n, Yc.shape[1]))]
        self._state = _KernelFitState(
            Y=Yc, w=w, n_eff=n_eff, op=op, rows_S=rows_S, phi=phi,
            sampler=EpochSampler(w, n, m, full, statistics), alpha=np.zeros((n, Yc.shape[1])),
            f=np.zeros((n, Yc.shape[1])), h=eta / m,
        )
        self._state.mse0 = self._train_mse(self._state.f)
        self.train_mse_path_ = np.array([self._state.mse0])
        self._tracker = None
        if self.estimate_risk or self.max_iter == "auto":
            steps = 1 if full else -(-int(round(n_eff)) // int(m))
            self._tracker = SGDRiskTracker(n, Yc.shape[1], w, steps, self.n_probes, probe_rng,
                                           statistics,
                                           positions=self._state.sampler.integer)
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

    @staticmethod
    def _kernel_block(kern, op, Xc, rows, cols):
        if op.full is not None and not op.single:
            return op.full[np.ix_(rows, cols)]
        return kern(Xc[rows], Xc[cols])

    def _heldout_top_eigenvalue(self, kern, op, Xc, held, phi, P, policy):
        """Top eigenvalue of the EigenPro kernel operator on draws outside the subsample.

        The Nystrom estimate ``lambda_P`` sees the subsample its eigenfunctions
        were fitted to; on the whole data the preconditioned operator's top
        eigenvalue was 1.6-3 times larger in our checks, which puts a batch
        of the estimated critical size beyond the edge of stability. Draws
        from the rest of the multiset of rows (the weights minus the draws of
        the subsample) give an estimate that was 1.4-1.6 times the truth.
        """
        rows, counts = held
        K = self._kernel_block(kern, op, Xc, rows, rows)
        if P.n_components_:
            K -= (phi[rows] * P.scale_) @ phi[rows].T
        sc = np.sqrt(counts)
        S = K * np.outer(sc, sc) / counts.sum()
        return top_eigenvalue(S, policy=policy)

    def _train_mse(self, f):
        st = self._state
        r = f - st.Y
        r2 = np.einsum("ij,ij->i", r, r)
        return float((r2.sum() if st.w is None else st.w @ r2) / st.n_eff
                     / r.shape[1])

    def _run_epochs(self, n_epochs, statistics, auto=False):
        st, P = self._state, self.preconditioner_
        op, phi, rows_S, h = st.op, st.phi, st.rows_S, st.h
        op.ensure()
        alpha, f, Y = st.alpha, st.f, st.Y
        c = Y.shape[1]
        limit = statistics.divergence_factor * max(st.mse0, np.finfo(np.float64).tiny)
        mse_path = list(self.train_mse_path_)
        tracker = self._tracker
        tic = time.perf_counter()
        for _ in range(n_epochs):
            with np.errstate(over="ignore", invalid="ignore"):
                for rows, counts, positions in st.sampler.epoch(self._rng):
                    g = counts[:, None] * (f[rows] - Y[rows])
                    corr = P.scale_[:, None] * (phi[rows].T @ g)  # (q, c)
                    alpha[rows] -= h * g  # rows are distinct (counts carry repeats)
                    if P.n_components_:
                        alpha[rows_S] += h * (P.coef_ @ corr)
                    rhs = g if tracker is None else np.hstack([g, tracker.rhs(rows, counts)])
                    KB = op.matmul(rows, rhs)
                    if P.n_components_:
                        KB -= phi @ (P.scale_[:, None] * (phi[rows].T @ rhs))
                    f -= h * KB[:, :c]
                    if tracker is not None:
                        tracker.step(rows, counts, h, KB[:, c:], -g / counts[:, None],
                                     positions)
                    self.n_steps_ += 1
            self.n_iter_ += 1
            self._epoch_steps.append(self.n_steps_)
            check_memory(8 * alpha.size * (self.n_iter_ + 1), "the coefficients of every epoch",
                         "Lower max_iter. ")
            self._coef_path.append(alpha.copy())
            if tracker is not None:
                tracker.epoch_end(Y - f)
            mse = self._train_mse(f)
            mse_path.append(mse)
            if not np.isfinite(mse) or mse > limit:
                m, lam_p = self.batch_size_, self.top_eigenvalue_
                raise DivergenceError(
                    f"EigenPro diverges at epoch {self.n_iter_} (training mse {mse:.3g} "
                    f"against {st.mse0:.3g} at the start) with step_size="
                    f"{self.step_size_:.6g} and batch_size={m}. Use step_size='auto' or a "
                    "smaller step: SGD is stable below 2 m / (beta + (m - 1) lambda_P) = "
                    f"{2 * m / (self.beta_ + (m - 1) * lam_p):.4g}."
                )
            if self.verbose:
                print(f"[EigenPro] epoch {self.n_iter_}/{self.max_iter}  train mse {mse:.5g}  "
                      + (f"risk {tracker.risks[-1] / c:.5g}  " if tracker is not None else "")
                      + f"{time.perf_counter() - tic:.1f}s")
            if auto and epochs_stop(*self._risk_and_flags(tracker, mse_path), statistics):
                break
        self.train_mse_path_ = np.array(mse_path)
        self.selected_iter_ = self.n_iter_
        if tracker is not None:
            risk, ok, _ = self._risk_and_flags(tracker, mse_path)
            self.risk_path_, self.risk_reliable_ = risk, ok
            if auto and ok[-1]:  # else the ridgeless limit: the last epoch
                self.selected_iter_ = int(np.argmin(np.where(ok, risk, np.inf)))
        self._set_coef(self._coef_path[self.selected_iter_])
        op.release()
        if tracker is None:
            for name in ("risk_path_", "risk_reliable_"):
                if hasattr(self, name):
                    delattr(self, name)
        if not self.warm_start:  # the chains are only needed to continue the path
            self._tracker = None

    @staticmethod
    def _risk_and_flags(tracker, mse_path):
        """``(risk_path, reliable, train_mse)`` averaged over the outputs."""
        c = tracker.c
        risk, mse = tracker.risk() / c, np.asarray(mse_path)
        ok = flag_against_gcv(risk, tracker.degrees_of_freedom(), mse, tracker.reliable(),
                              tracker.statistics)
        return risk, ok, mse

    def _set_coef(self, alpha):
        self.dual_coef_ = alpha

    # -------------------------------------------------------------- predict
    def _decision(self, X, alpha=None):
        """``k(X, X_fit_) @ alpha`` (default: ``dual_coef_``), shape (len(X), k)."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        kern = Kernel(self.kernel, self.bandwidth_, self.kernel_params)
        if alpha is None:
            alpha = self.dual_coef_.reshape(self.X_fit_.shape[0], -1)
        Xf = self.X_fit_
        sq = np.einsum("ij,ij->i", Xf, Xf)
        chunk = max(1, int(working_memory_bytes() // (16 * max(Xf.shape[0], 1))))
        out = np.empty((X.shape[0], alpha.shape[1]))
        for s in range(0, X.shape[0], chunk):
            out[s: s + chunk] = kern(X[s: s + chunk], Xf, Y_norm_squared=sq) @ alpha
        return out

    def _decision_path(self, X):
        """Scores of every epoch, shape (len(X), n_outputs, n_iter_ + 1)."""
        check_is_fitted(self)
        path = self.dual_coef_path_
        n, T1 = path.shape[0], path.shape[-1]
        F = self._decision(X, path.reshape(n, -1))
        return F.reshape(F.shape[0], -1, T1)

    @property
    def dual_coef_path_(self):
        """``alpha`` after every epoch, shape ``(n_centres, n_outputs, n_iter_ + 1)``."""
        check_is_fitted(self)
        return np.stack(self._coef_path, axis=-1)


class EigenProRegressor(RegressorMixin, _BaseEigenPro):
    __doc__ = """Kernel regression trained by EigenPro, preconditioned SGD (ridgeless).

    Minimises ``sum_i w_i ||f(x_i) - y_i||^2`` over ``f(x) = sum_j alpha_j
    k(x, x_j)`` by EigenPro 2 iterations (Ma & Belkin 2017, 2019) from zero;
    the number of epochs ``max_iter`` is the only regularisation, and the
    limit is the interpolant ``K^+ y`` (``KernelRidge(alpha -> 0)``).
    Cost: ``O(n^2 d)`` per epoch, memory ``O(n (d + q + batch))``.
    """ + _DOC_PARAMS + _DOC_ATTRIBUTES + """
    Examples
    --------
    >>> import numpy as np
    >>> from skacv import EigenProRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, (500, 2))
    >>> y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(500)
    >>> est = EigenProRegressor(bandwidth=0.5, max_iter=5, random_state=0).fit(X, y)
    >>> est.score(X, y) > 0.95
    True
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the kernel machine (or continue it, ``warm_start``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), default=None
            Frequency weights: integer weights equal repeated rows (the
            batches are draws from the weighted rows).

        Returns
        -------
        self : object
        """
        return self._fit(X, y, sample_weight)

    def _validate_xy(self, X, y, reset):
        X, y = validate_data(self, X, y, dtype=np.float64, multi_output=True,
                             y_numeric=True, reset=reset)
        y = np.asarray(y, dtype=np.float64)
        self._y_1d = y.ndim == 1
        return X, y.reshape(y.shape[0], -1)

    def _set_coef(self, alpha):
        self.dual_coef_ = alpha[:, 0].copy() if self._y_1d else alpha.copy()

    def predict(self, X):
        """Predict ``f(x) = k(x, X_fit_) @ dual_coef_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        """
        out = self._decision(X)
        return out[:, 0] if self._y_1d else out

    def predict_path(self, X):
        """Predictions after every epoch.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        Y : ndarray of shape (n_samples, n_iter_ + 1) or (n_samples, n_outputs, n_iter_ + 1)
            Column ``t``: the prediction after epoch ``t`` (0: the zero start);
            column ``selected_iter_`` is :meth:`predict`'s.
        """
        F = self._decision_path(X)
        return F[:, 0] if self._y_1d else F

    def staged_predict(self, X):
        """Yield the predictions after epochs ``0, 1, ..., n_iter_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Yields
        ------
        y : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        """
        F = self.predict_path(X)
        for t in range(F.shape[-1]):
            yield F[..., t]


class EigenProClassifier(ClassifierMixin, _BaseEigenPro):
    __doc__ = """Kernel classifier trained by EigenPro: one-hot regression and argmax.

    Regresses the one-hot encoding of the labels (0/1 targets, one column
    per class) with the EigenPro iterations of :class:`EigenProRegressor`
    and predicts the class of the largest score. There is no
    ``predict_proba``: the scores are least-squares fits, not probabilities.
    """ + _DOC_PARAMS + _DOC_ATTRIBUTES + """
    classes_ : ndarray of shape (n_classes,)
        Classes seen with positive weight.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from skacv import EigenProClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = EigenProClassifier(bandwidth=3.0, max_iter=3, random_state=0)
    >>> clf.fit(X[:1000] / 16, y[:1000]).score(X[1000:] / 16, y[1000:]) > 0.95
    True
    """

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the kernel classifier (or continue it, ``warm_start``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Frequency weights (integer weights equal repeated rows).

        Returns
        -------
        self : object
        """
        return self._fit(X, y, sample_weight)

    def _validate_xy(self, X, y, reset):
        X, y = validate_data(self, X, y, dtype=np.float64, reset=reset)
        check_classification_targets(y)
        return X, y

    def _encode_target(self, y, sample_weight):
        seen = y if sample_weight is None else y[sample_weight > 0]
        classes = np.unique(seen)
        self._fit_classes = classes
        return (y[:, None] == classes[None, :]).astype(np.float64), classes

    def _run_path(self, X, Y, sample_weight, warm, frozen):
        self.classes_ = self._fit_classes
        super()._run_path(X, Y, sample_weight, warm, frozen)

    def decision_function(self, X):
        """One-hot regression scores.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            Binary problems: score of ``classes_[1]`` minus that of
            ``classes_[0]``.
        """
        F = self._decision(X)
        if F.shape[1] == 2:
            return F[:, 1] - F[:, 0]
        return F[:, 0] if F.shape[1] == 1 else F

    def predict(self, X):
        """Class of the largest one-hot score.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        F = self._decision(X)
        return self.classes_[np.argmax(F, axis=1)]

    def predict_path(self, X):
        """Predicted classes after every epoch.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples, n_iter_ + 1)
            Column ``t``: the classes after epoch ``t``; column
            ``selected_iter_`` is :meth:`predict`'s.
        """
        return self.classes_[np.argmax(self._decision_path(X), axis=1)]

    def staged_predict(self, X):
        """Yield the predicted classes after epochs ``0, 1, ..., n_iter_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Yields
        ------
        y : ndarray of shape (n_samples,)
        """
        Y = self.predict_path(X)
        for t in range(Y.shape[1]):
            yield Y[:, t]
