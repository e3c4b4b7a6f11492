"""EigenPro's Nystrom preconditioner and preconditioned gradient descent.

The preconditioner (Ma & Belkin 2017, 2019) flattens the top ``q`` eigenvalues
of a covariance operator, estimated on a subsample of ``M`` rows:

    P = I - sum_{i <= q} d_i e_i e_i^T,   d_i = 1 - (lambda_{q+1} / lambda_i)^a

so that ``P H`` has eigenvalues ``lambda_i^(1-a) lambda_{q+1}^a`` (``i <= q``)
and ``lambda_i`` (``i > q``); its largest eigenvalue ``lambda_P =
lambda_1^(1-a) lambda_{q+1}^a`` allows a step ``(lambda_1/lambda_{q+1})^a``
times larger. ``a`` is the damping exponent (0.95 as in EigenPro 2, which
hedges against the Nystrom estimate of ``lambda_{q+1}``).

* Feature space (linear models): ``H = X~^T X~ / n`` and ``e_i`` are
  eigenvectors in R^p; :class:`PreconditionedGD` is the
  :class:`~skacv.Iteration` ``b <- b + eta P (z - mu b)``.
* Kernel machines: ``H`` is the kernel covariance operator, ``e_i`` its
  Nystrom eigenfunctions (see :mod:`skacv._eigenpro`).

Risk along the path. With a fixed ``P`` independent of the training data,
``c = P^{-1/2} b`` follows plain gradient descent on the design ``X~ P^{1/2}``,
so Bellec & Tan's memory-matrix estimate holds with the spectral nodes of
``P^{1/2} (X~^T X~ / n + mu) P^{1/2}`` (:func:`preconditioned_nodes`). When
``P`` is built from training rows the estimate is a heuristic (biased by
17-31 % at n = 1000-2000 on spiked Gaussian designs in the research notes).

Subsamples follow frequency-weight semantics (:func:`draw_rows`): a sample of
``M`` draws from the weighted empirical measure, so that integer weights
equal repeated rows.

Kernel SGD (:class:`SGDRiskTracker`): the memory-matrix estimate along
mini-batch paths in Tan & Bellec's (2024) form, whose traces use the batch
columns of the EigenPro kernel that training computes anyway.
"""

import numpy as np
import scipy.linalg as linalg
from scipy.sparse.linalg import LinearOperator, eigsh
from sklearn.utils import check_random_state
from sklearn.utils.extmath import randomized_svd

from ._config import check_memory
from ._iterations import GradientDescent
from ._path import design_rows

#: damping exponent ``a`` of EigenPro 2
DAMPING = 0.95
#: eigenvalues below this fraction of the largest are treated as zero
EIG_FLOOR = 1e-8
#: expanded index lists of integer weights are used up to this length
_MAX_EXPANDED = 10**8


# ----------------------------------------------------------------------------
# weighted subsamples
# ----------------------------------------------------------------------------


def integer_weights(weight):
    """True when ``weight`` is None or holds integers (frequency weights)."""
    if weight is None:
        return True
    return bool(np.all(weight == np.round(weight))) and weight.sum() <= _MAX_EXPANDED


def counts_of(draws, n_rows):
    """``(rows, counts)``: the distinct rows of a list of draws and their counts."""
    counts = np.bincount(draws, minlength=n_rows)
    rows = np.flatnonzero(counts)
    return rows, counts[rows].astype(np.float64)


def draw_rows(weight, size, random_state, n_rows):
    """``size`` draws from the weighted empirical measure of ``n_rows`` rows.

    Returns ``(rows, counts, exact)``: distinct rows, their multiplicities
    (summing to ``size``) and ``exact=True`` when ``size >= n_eff``, in which
    case every row of positive weight is returned with its weight as count
    (no randomness). Otherwise: without weights, ``size`` distinct rows;
    with integer weights, ``size`` draws without replacement from the
    multiset of repeated rows (exactly what repeating the rows would draw);
    with other weights, draws with replacement with probability ``w / n_eff``.
    """
    if weight is None:
        if size >= n_rows:
            return np.arange(n_rows), np.ones(n_rows), True
        rng = check_random_state(random_state)
        rows = np.sort(rng.choice(n_rows, int(size), replace=False))
        return rows, np.ones(rows.shape[0]), False
    n_eff = float(weight.sum())
    if size >= n_eff:
        rows = np.flatnonzero(weight > 0)
        return rows, weight[rows].astype(np.float64), True
    rng = check_random_state(random_state)
    if integer_weights(weight):
        expanded = np.repeat(np.arange(n_rows), np.round(weight).astype(np.int64))
        draws = expanded[rng.choice(expanded.shape[0], int(size), replace=False)]
    else:
        draws = rng.choice(n_rows, int(size), replace=True, p=weight / n_eff)
    rows, counts = counts_of(draws, n_rows)
    return rows, counts, False


# ----------------------------------------------------------------------------
# the preconditioner
# ----------------------------------------------------------------------------


def top_eigh(S, k):
    """Top ``k`` eigenpairs of a symmetric PSD matrix, in descending order.

    LAPACK's ``eigh(subset_by_index=...)``, or a randomized range finder
    (Halko, Martinsson & Tropp 2011) when ``S`` is large and ``k`` small.
    """
    m = S.shape[0]
    k = int(min(k, m))
    if k <= 0:
        return np.zeros(0), np.zeros((m, 0))
    if m > 4000 and 10 * k < m:
        U, s, _ = randomized_svd(S, k, n_oversamples=max(10, k // 2), n_iter=4,
                                 random_state=0)
        return s, U
    if 4 * k > m:  # divide and conquer on everything beats a large subset
        lam, U = linalg.eigh(S, driver="evd", check_finite=False)
        lam, U = lam[m - k:], U[:, m - k:]
    else:
        lam, U = linalg.eigh(S, subset_by_index=(m - k, m - 1), check_finite=False)
    return np.clip(lam[::-1], 0, None), np.ascontiguousarray(U[:, ::-1])


class NystromPreconditioner:
    """Rank-``q`` spectral preconditioner of EigenPro.

    Built by :meth:`from_features` (linear models) or :meth:`from_kernel`
    (kernel machines) from the top eigenvalues ``lambda_1 >= ... >=
    lambda_{q+1}`` of a subsample covariance.

    Parameters
    ----------
    eigenvalues : ndarray of shape (r,)
        Top eigenvalues (descending) of the subsample covariance, ``r > q``
        unless the spectrum ends (then the tail is 0 and nothing is flattened
        beyond ``r``).
    n_components : int
        ``q``, the number of flattened directions.
    damping : float, default=0.95
        Exponent ``a`` in (0, 1].

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (r,)
    n_components_ : int
    tail_eigenvalue_ : float
        ``lambda_{q+1}``, the level the top ``q`` eigenvalues are flattened to.
    flattening_ : ndarray of shape (q,)
        ``d_i = 1 - (lambda_{q+1} / lambda_i)^a``.
    flattened_spectrum_ : ndarray of shape (r,)
        Eigenvalues after preconditioning (on the subsample's eigenbasis).
    top_eigenvalue_ : float
        ``lambda_P = lambda_1^(1-a) lambda_{q+1}^a``, the largest of them.
    gain_ : float
        ``lambda_1 / lambda_P``, the factor by which the step size grows.
    components_ : ndarray of shape (n_features, q)
        Orthonormal eigenvectors ``e_i`` (feature space), set by
        :meth:`from_features`.
    coef_ : ndarray of shape (n_subsample, q)
        Kernel form, set by :meth:`from_kernel`: ``k_P(x, z) = k(x, z) -
        sum_i (d_i / lambda_i) phi_i(x) phi_i(z)`` with ``phi(x) = k(x, X_S) @
        coef_``.
    """

    def __init__(self, eigenvalues, n_components, damping=DAMPING):
        lam = np.asarray(eigenvalues, dtype=np.float64)
        q = int(min(n_components, max(lam.shape[0] - 1, 0)))
        self.eigenvalues_ = lam
        self.n_components_ = q
        self.damping = float(damping)
        self.tail_eigenvalue_ = float(lam[q]) if lam.shape[0] else 0.0
        if q:
            ratio = (self.tail_eigenvalue_ / lam[:q]) ** self.damping
            self.flattening_ = 1.0 - ratio
        else:
            self.flattening_ = np.zeros(0)
        self.flattened_spectrum_ = lam.copy()
        self.flattened_spectrum_[:q] *= 1.0 - self.flattening_
        self.top_eigenvalue_ = float(self.flattened_spectrum_.max()) if lam.size else 0.0
        self.gain_ = float(lam[0] / self.top_eigenvalue_) if self.top_eigenvalue_ > 0 else 1.0

    # ------------------------------------------------------------- builders
    @classmethod
    def from_features(cls, A, n_components, damping=DAMPING):
        """Preconditioner of the covariance ``A^T A`` (rows ``A`` pre-scaled).

        Uses the ``p x p`` covariance when ``p <= len(A)``, else the Gram
        matrix ``A A^T`` and ``e_i = A^T u_i / sqrt(lambda_i)``.
        """
        A = np.asarray(A, dtype=np.float64)
        m, p = A.shape
        k = min(int(n_components) + 1, m, p)
        if p <= m:
            lam, E = top_eigh(A.T @ A, k)
        else:
            lam, U = top_eigh(A @ A.T, k)
            E = None
        keep = int(np.sum(lam > EIG_FLOOR * lam[0])) if lam.size and lam[0] > 0 else 0
        q = max(min(int(n_components), keep - 1), 0)
        self = cls(lam[: q + 1] if keep else lam[:1] * 0, q, damping)
        if E is None:
            E = A.T @ (U[:, :q] / np.sqrt(lam[:q]))
        self.components_ = np.ascontiguousarray(E[:, :q])
        return self

    @classmethod
    def from_kernel(cls, K_SS, counts, n_components, damping=DAMPING, max_batch=None,
                    beta=1.0, max_components=1000):
        """Preconditioner of the Nystrom kernel operator of a subsample.

        ``K_SS`` is the kernel matrix of the distinct subsample rows and
        ``counts`` their multiplicities: the operator is ``sum_j c_j
        k(., x_j) k(., x_j)^T / sum(c)``, with eigenvalues those of
        ``diag(sqrt c) K_SS diag(sqrt c) / sum(c)``.

        ``n_components="auto"`` (EigenPro 2's rule): the largest ``q <=
        max_components`` whose critical batch ``beta / lambda_P + 1`` stays
        below ``max_batch`` (``None``: no bound, the subsample is the whole
        data and the eigenvalues are exact), among eigenvalues above
        ``1e-8 lambda_1``.
        """
        c = np.asarray(counts, dtype=np.float64)
        m = K_SS.shape[0]
        total = c.sum()
        sc = np.sqrt(c)
        S = K_SS * np.outer(sc, sc) / total
        q_max = max_components if n_components == "auto" else int(n_components)
        if n_components == "auto" and max_batch is not None and m > 1:
            # critical batch beta / lambda_P(q) + 1 <= max_batch  <=>  lambda_{q+1} >= L
            lam1 = float(eigsh(S, k=1, which="LA", v0=np.ones(m), tol=1e-8,
                               return_eigenvectors=False)[0]) if m > 200 \
                else float(np.linalg.eigvalsh(S)[-1])
            a = damping
            L = EIG_FLOOR * lam1
            if max_batch > 1:
                L = max(L, (beta / ((max_batch - 1) * lam1 ** (1 - a))) ** (1 / a))
            lam = np.zeros(0)
            if L < lam1:
                lam, U = linalg.eigh(S, subset_by_value=(L, np.inf), check_finite=False)
                lam, U = np.clip(lam[::-1], 0, None), U[:, ::-1]
                lam, U = lam[: q_max + 1], np.ascontiguousarray(U[:, : q_max + 1])
            if lam.size == 0:
                lam, U = top_eigh(S, 1)
            q_top = lam.shape[0] - 1
        else:
            lam, U = top_eigh(S, min(q_max + 1, m))
            keep = int(np.sum(lam > EIG_FLOOR * lam[0])) if lam.size and lam[0] > 0 else 0
            q_top = max(min(q_max, keep - 1), 0)
        q = q_top
        self = cls(lam[: q + 1], q, damping)
        self.coef_ = np.ascontiguousarray(sc[:, None] * U[:, :q] / np.sqrt(total))
        self.scale_ = self.flattening_ / lam[:q] if q else np.zeros(0)
        return self

    # ------------------------------------------------------------- products
    def apply(self, G, power=1.0):
        """``P^power @ G`` in feature space, for G of shape (p,) or (p, k)."""
        E = self.components_
        if E.shape[1] == 0:
            return G
        d = self.flattening_ if power == 1.0 else 1.0 - (1.0 - self.flattening_) ** power
        coef = E.T @ G
        coef *= d if G.ndim == 1 else d[:, None]
        out = G - E @ coef
        return out.astype(G.dtype, copy=False)

    def __repr__(self):
        return (f"NystromPreconditioner(n_components={self.n_components_}, "
                f"gain={self.gain_:.4g}, top_eigenvalue={self.top_eigenvalue_:.4g})")


def feature_preconditioner(design, n_components, subsample_size, random_state=None,
                           damping=DAMPING):
    """Preconditioner of ``X~^T X~ / n_eff`` for :class:`PreconditionedGD`.

    Parameters
    ----------
    design : Design
    n_components : int
    subsample_size : "auto", int or array-like of shape (M, n_features)
        ``"auto"``: ``min(n_eff, 2000)`` draws; an int: that many draws of
        training rows (all rows, exactly, when it reaches ``n_eff``); an
        array: an independent sample of feature rows (unlabelled data or a
        held-out split), centred with the training means. Only the last keeps
        the risk estimate's guarantee.

    Returns
    -------
    precond : NystromPreconditioner
        With ``independent_`` (bool) and ``subsample_size_`` (int).
    """
    if not isinstance(subsample_size, (str, int, np.integer)):
        Z = np.asarray(subsample_size, dtype=np.float64)
        if Z.ndim != 2 or Z.shape[1] != design.n_features or Z.shape[0] < 1:
            raise ValueError(
                "subsample_size given as an array must have shape (M, n_features) = "
                f"(M, {design.n_features}); got {Z.shape}."
            )
        if not np.all(np.isfinite(Z)):
            raise ValueError("The preconditioner sample (subsample_size) contains NaN or inf.")
        A = (Z - design.x_offset) / np.sqrt(Z.shape[0])
        P = NystromPreconditioner.from_features(A, n_components, damping)
        P.independent_, P.subsample_size_ = True, Z.shape[0]
        return P
    M = 2000 if subsample_size == "auto" else int(subsample_size)
    rows, counts, exact = draw_rows(design.weight, M, random_state, design.n_samples)
    check_memory(8 * rows.shape[0] * design.n_features,
                 f"the preconditioner subsample ({rows.shape[0]} x {design.n_features})",
                 "Lower subsample_size. ")
    A = np.asarray(design_rows(design, rows), dtype=np.float64)
    if design.weight is not None:  # back to unweighted rows, then the draw counts
        A /= np.sqrt(design.weight[rows])[:, None]
    A *= np.sqrt(counts / counts.sum())[:, None]
    P = NystromPreconditioner.from_features(A, n_components, damping)
    P.independent_, P.subsample_size_ = False, int(round(counts.sum()))
    P.exact_ = exact
    return P


# ----------------------------------------------------------------------------
# the iteration
# ----------------------------------------------------------------------------


class PreconditionedGD(GradientDescent):
    """Preconditioned (ridge) gradient descent ``b <- b + eta P (z - mu b)``.

    ``z = X~^T (y~ - X~ b) / n_eff`` is the negative least-squares gradient,
    ``mu = l2`` the ridge penalty in mean form and ``P`` a fixed symmetric
    positive definite :class:`NystromPreconditioner` (feature space). The
    combination is linear, so the fit loop, Jacobian actions (tangents) and
    leave-one-out trajectories use :meth:`combine` unchanged; the spectral
    forms need the nodes of the whitened problem, :func:`preconditioned_nodes`.

    Parameters
    ----------
    step_size : float
    preconditioner : NystromPreconditioner
    l2 : float, default=0.0
    schedule : None, callable or array-like, default=None
    """

    name = "eigenpro"

    def __init__(self, step_size, preconditioner, l2=0.0, schedule=None):
        super().__init__(step_size, l2=l2, schedule=schedule)
        self.preconditioner = preconditioner

    def decay(self, k):  # the decay is the matrix I - eta mu P, not a scalar
        raise NotImplementedError("PreconditionedGD has no scalar decay; use combine().")

    def combine(self, k, v, dx, z):
        g = z - self.l2 * v if self.l2 else z
        out = self.preconditioner.apply(g)
        out = out * out.dtype.type(self.eta(k))
        out += v
        return out

    def scalar_iteration(self):
        """Plain gradient descent with the same steps: the whitened problem."""
        return GradientDescent(self.step_size, l2=0.0, schedule=self.schedule)

    def memory_matrix(self, design, n_iter, n_probes=None, random_state=None):
        """Memory matrices ``(A, A)`` of the path (no extrapolation).

        ``A[t, s] = sum_j omega_j eta (1 - eta theta_j)^(t-s-1)`` over the
        nodes of :func:`preconditioned_nodes`, i.e.
        ``tr(X~ d b^t / d y^(s))`` exactly (``n_probes=None``) or its
        Hutchinson estimate.
        """
        from ._risk import spectral_memory_matrix

        T = int(n_iter)
        theta, w = preconditioned_nodes(design, self.preconditioner, self.l2,
                                        n_probes=n_probes, random_state=random_state,
                                        depth=T // 2 + 2)
        A = spectral_memory_matrix(self.scalar_iteration(), theta, T, weights=w)
        return A, A

    def __repr__(self):
        return (f"PreconditionedGD(step_size={self.step_size:.4g}, "
                f"n_components={self.preconditioner.n_components_})")


# ----------------------------------------------------------------------------
# spectra of the preconditioned problem
# ----------------------------------------------------------------------------


def _whitened_ops(design, P, l2):
    """``M v = mu P v + P^1/2 X~^T X~ P^1/2 v / n`` and ``Z^T U = P^1/2 X~^T U``."""
    inv_n = 1.0 / design.n_eff
    dt = design.dtype

    def sqrt_p(V):
        return P.apply(V, power=0.5)

    def M(V):
        V = np.asarray(V, dtype=np.float64)
        W = sqrt_p(V).astype(dt, copy=False)
        out = sqrt_p(np.asarray(design.rmatvec(design.matvec(W)), dtype=np.float64)) * inv_n
        if l2:
            out += l2 * P.apply(V)
        return out

    def Zt(U):
        return sqrt_p(np.asarray(design.rmatvec(np.asarray(U, dtype=dt)), dtype=np.float64))

    return M, Zt


def preconditioned_lipschitz(design, P, l2=0.0):
    """Largest eigenvalue of ``P^1/2 (X~^T X~ / n_eff + mu I) P^1/2``."""
    n, p = design.n_samples, design.n_features
    M, _ = _whitened_ops(design, P, l2)
    if p <= 2000:
        L = float(np.linalg.eigvalsh(M(np.eye(p)))[-1])
    elif not l2 and n <= 2000:
        theta, _ = preconditioned_nodes(design, P, 0.0)
        L = float(theta.max())
    else:
        op = LinearOperator((p, p), matvec=M, matmat=M, dtype=np.float64)
        v0 = np.random.RandomState(0).standard_normal(p)
        L = float(eigsh(op, k=1, which="LA", v0=v0, tol=1e-6)[0][0])
    return max(L, 0.0)


def preconditioned_nodes(design, P, l2=0.0, n_probes=None, random_state=None, depth=None):
    """Spectral nodes and weights of preconditioned gradient descent.

    In the whitened coordinates ``c = P^{-1/2} b`` the iteration is
    ``c <- c - eta (M c - Z^T y~ / n)`` with ``Z = X~ P^{1/2}`` and
    ``M = Z^T Z / n + mu P``. With ``M = sum_j theta_j v_j v_j^T`` the memory
    matrix is ``A[t, s] = sum_j omega_j eta (1 - eta theta_j)^(t-s-1)``,
    ``omega_j = ||Z v_j||^2 / n``. Returned are ``theta`` and the weights
    ``omega / theta`` for :func:`skacv._risk.spectral_memory_matrix` (whose
    nodes enter as ``w_j theta_j phi(theta_j)``). Without penalty ``omega_j
    = theta_j`` (unit weights).

    ``n_probes=None``: exact, from a dense eigendecomposition of the smaller
    side (``mu = 0``) or of ``M`` on the span of the rows of ``X~`` and the
    components of ``P`` (``mu > 0``; ``M = mu I`` with weight 0 elsewhere).
    ``n_probes=m``: Gauss quadrature of Lanczos (depth ``depth``) started
    from ``Z^T u / sqrt(n)`` for ``m`` Rademacher vectors ``u``, i.e. the
    Hutchinson estimate of the traces.
    """
    n, p = design.n_samples, design.n_features
    M, Zt = _whitened_ops(design, P, l2)
    inv_n = 1.0 / design.n_eff
    if n_probes is not None:
        rng = check_random_state(random_state)
        U = rng.choice([-1.0, 1.0], size=(n, int(n_probes)))
        W0 = Zt(U) * np.sqrt(inv_n)
        depth = min(int(depth or 30), p)
        theta, omega = _lanczos_quadrature(M, W0, depth)
        omega /= int(n_probes)
    elif not l2:
        r = min(n, p)
        check_memory(8 * r * r * 2, f"the exact preconditioned spectrum ({r} x {r})",
                     "Use n_probes=int (Hutchinson) instead. ")
        if p <= n:
            G = M(np.eye(p))
        else:
            E = P.components_
            XE = np.asarray(design.matvec(E.astype(design.dtype)), dtype=np.float64)
            G = design.gram(side="samples") - (XE * P.flattening_) @ XE.T * inv_n
        theta = np.clip(np.linalg.eigvalsh((G + G.T) / 2), 0, None)
        omega = theta.copy()
    else:
        q = P.components_.shape[1]
        r = min(p, n + q)
        check_memory(8 * r * max(r, n, p) * 3, f"the exact preconditioned spectrum ({r} x {r})",
                     "Use n_probes=int (Hutchinson) instead. ")
        if r == p:
            basis = np.eye(p)
        else:
            Xt = np.asarray(design.rmatvec(np.eye(n, dtype=design.dtype)), dtype=np.float64)
            basis = linalg.qr(np.hstack([Xt, P.components_]), mode="economic")[0]
        Mq = basis.T @ M(basis)
        theta, V = np.linalg.eigh((Mq + Mq.T) / 2)
        theta = np.clip(theta, 0, None)
        B = design.matvec((P.apply(basis @ V, power=0.5)).astype(design.dtype))
        omega = np.einsum("ij,ij->j", B, B, dtype=np.float64) * inv_n
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(theta > 0, omega / np.where(theta > 0, theta, 1.0), 0.0)
    return theta, w


def _lanczos_quadrature(op, W0, depth):
    """Gauss quadrature of ``w^T f(op) w`` for the columns of ``W0`` (see
    :func:`skacv._risk.lanczos_quadrature`)."""
    from ._risk import lanczos_quadrature

    return lanczos_quadrature(op, W0, depth)[0]


# ----------------------------------------------------------------------------
# estimates of a fitted IterativeRidge(solver="eigenpro")
# ----------------------------------------------------------------------------


def preconditioned_after_fit(est, design, y_tilde, iteration, X, y, sample_weight):
    """Fill ``risk_path_`` (and ``loo_path_``) for a preconditioned path.

    Stand-in for :meth:`BaseTrajectoryRegressor._after_fit` until
    :func:`skacv._risk.memory_matrix` dispatches on ``iteration.memory_matrix``
    and :func:`skacv._loo.iacv_path` skips its spectral shortcut for
    iterations with a ``preconditioner``.
    """
    from ._loo import _full_path_predictions, iacv_path
    from ._risk import risk_from_memory

    for name in ("risk_path_", "risk_matrix_", "memory_matrix_", "loo_path_",
                 "loo_predictions_", "loo_indices_"):
        if hasattr(est, name):
            delattr(est, name)
    if est.estimate_risk:
        T = est.coef_path_.shape[1] - 1
        A, _ = iteration.memory_matrix(design, T, n_probes=est.n_probes,
                                       random_state=est.random_state)
        fitted = getattr(est, "_fitted_path", None)
        if fitted is None:
            fitted = design.matvec(est.coef_path_)
        F = np.asarray(y_tilde, dtype=np.float64)[:, None] - fitted
        est.risk_path_, est.risk_matrix_ = risk_from_memory(F, A, design.n_eff,
                                                            design.fit_intercept)
        est.memory_matrix_ = A
    if est.estimate_loo:
        store = bool(getattr(est, "store_loo_predictions", False))
        res = iacv_path(
            est, design, y_tilde, iteration, est.coef_path_, y, datafit=None,
            batch_size=getattr(est, "loo_batch_size", None),
            subsample=getattr(est, "loo_subsample", None), store_predictions=store,
            random_state=est.random_state, fitted=getattr(est, "_fitted_path", None),
            spectral=False, verbose=est.verbose,
            full_predictions=lambda idx: _full_path_predictions(est, X[idx]),
        )
        est.loo_path_ = res.loss
        if store:
            est.loo_predictions_, est.loo_indices_ = res.predictions, res.indices


# ----------------------------------------------------------------------------
# risk along a (preconditioned) kernel SGD path
# ----------------------------------------------------------------------------


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
    this is Bellec & Tan's estimate :func:`skacv._risk.risk_from_memory`
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
            Z = rng.choice([-1.0, 1.0], size=(n, self.k))
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
        from ._risk import risk_from_memory

        A, K = self.memory_matrices()
        T1 = A.shape[0]
        F = np.stack(self.F, axis=-1).reshape(-1, T1)
        if self.full:
            risk, _ = risk_from_memory(F, A, self.n_eff, False)
        else:
            V = linalg.solve_triangular(self.n_eff * np.eye(T1) - K, A, lower=True,
                                        check_finite=False)
            if self.w is not None and all(p is not None for p in self.positions):
                F, Psi = self._repeated_rows()
            else:
                Psi = np.stack(self.Psi + [np.zeros_like(self.F[0])], axis=-1).reshape(-1, T1)
            R = F + Psi @ V.T
            risk = np.einsum("it,it->t", R, R) / self.n_eff
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
