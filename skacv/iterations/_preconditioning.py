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
  eigenvectors in R^p; :class:`~skacv.iterations._iterations.PreconditionedGD` is the
  iteration ``b <- b + eta P (z - mu b)``.
* Kernel machines: ``H`` is the kernel covariance operator, ``e_i`` its
  Nystrom eigenfunctions (see :mod:`skacv.kernel_methods._eigenpro`).

Risk along the path. With a fixed ``P`` independent of the training data,
``c = P^{-1/2} b`` follows plain gradient descent on the design ``X~ P^{1/2}``,
so Bellec & Tan's memory-matrix estimate holds with the spectral nodes of
``P^{1/2} (X~^T X~ / n + mu) P^{1/2}`` (:func:`preconditioned_nodes`). When
``P`` is built from training rows the estimate is a heuristic (its bias:
docs/internals.rst).

Subsamples follow frequency-weight semantics (:func:`draw_rows`): a sample of
``M`` draws from the weighted empirical measure, so that integer weights
equal repeated rows.
"""

import numpy as np
import scipy.linalg as linalg

from .._config import check_memory
from ..linalg._design import design_rows
from ..linalg._linalg import lanczos_quadrature, top_eigenvalue, top_eigh
from ..linalg._sampling import draw_rows


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
    damping : float
        Exponent ``a`` in (0, 1] (the builders' default: the statistical
        policy's ``eigenpro_damping``, 0.95).

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

    def __init__(self, eigenvalues, n_components, damping):
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

    @classmethod
    def from_features(cls, A, n_components, policies):
        """Preconditioner of the covariance ``A^T A`` (rows ``A`` pre-scaled;
        ``policies``: ``(speed, statistics)``, the latter's damping and
        eigenvalue floor).

        Uses the ``p x p`` covariance when ``p <= len(A)``, else the Gram
        matrix ``A A^T`` and ``e_i = A^T u_i / sqrt(lambda_i)``.
        """
        A = np.asarray(A, dtype=np.float64)
        m, p = A.shape
        k = min(int(n_components) + 1, m, p)
        policy, statistics = policies
        if p <= m:
            lam, E = top_eigh(A.T @ A, k, policy)
        else:
            lam, U = top_eigh(A @ A.T, k, policy)
            E = None
        floor = statistics.eigenpro_eig_floor
        keep = int(np.sum(lam > floor * lam[0])) if lam.size and lam[0] > 0 else 0
        q = max(min(int(n_components), keep - 1), 0)
        self = cls(lam[: q + 1] if keep else lam[:1] * 0, q, statistics.eigenpro_damping)
        if E is None:
            E = A.T @ (U[:, :q] / np.sqrt(lam[:q]))
        self.components_ = np.ascontiguousarray(E[:, :q])
        return self

    @classmethod
    def from_kernel(cls, K_SS, counts, n_components, policies, damping=None, max_batch=None,
                    heldout=None, max_components=1000, single=False):
        """Preconditioner of the Nystrom kernel operator of a subsample.

        ``K_SS`` is the kernel matrix of the distinct subsample rows and
        ``counts`` their multiplicities: the operator is ``sum_j c_j
        k(., x_j) k(., x_j)^T / sum(c)``, with eigenvalues those of
        ``diag(sqrt c) K_SS diag(sqrt c) / sum(c)``.

        ``n_components="auto"`` (EigenPro 2's rule, Ma & Belkin 2019): the
        largest ``q <= max_components`` whose critical batch ``beta_P(q) /
        lambda_P(q) + 1`` stays below ``max_batch`` (``None``: no bound, the
        subsample is the whole data and the eigenvalues are exact), among
        eigenvalues above the statistical policy's ``eigenpro_eig_floor``
        times ``lambda_1``; with held-out rows (they bound ``q``) above the
        eigensystem's resolution, the speed policy's ``eigh_float64_floor``
        times ``lambda_1``. ``beta_P(q)`` is the largest
        diagonal of the EigenPro kernel of ``q`` components over the rows of
        ``heldout = (K_HS, diagonal)`` (their kernel with the subsample rows
        and ``k(x, x)``), rows outside the subsample (:func:`critical_batches`).
        ``single``: the eigensystem in float32 (:func:`top_eigh`), eigenvalues
        below the speed policy's ``eigh_float32_floor`` times the largest then
        taken as zero; in float64 again where the flattened directions reach
        below its ``eigh_float32_trust`` times the largest, or where that
        floor, not the rule, ends ``q``.
        """
        c = np.asarray(counts, dtype=np.float64)
        m = K_SS.shape[0]
        total = c.sum()
        sc = np.sqrt(c)
        S = K_SS / total if np.all(c == 1.0) else K_SS * np.outer(sc, sc) / total
        q_max = max_components if n_components == "auto" else int(n_components)
        policy, statistics = policies
        damping = statistics.eigenpro_damping if damping is None else damping
        rule = n_components == "auto" and max_batch is not None and heldout is not None
        for f32 in (True, False) if single else (False,):
            lam, U = top_eigh(S, min(q_max + 1, m), policy, single=f32)
            # the rule's held-out rows bound q: its floor is the eigensystem's
            # resolution, not the statistical floor
            floor = policy.eigh_float64_floor if rule else statistics.eigenpro_eig_floor
            if f32:
                floor = max(statistics.eigenpro_eig_floor, policy.eigh_float32_floor)
            keep = int(np.sum(lam > floor * lam[0])) if lam.size and lam[0] > 0 else 0
            q = max(min(q_max, keep - 1), 0)
            coef = sc[:, None] * U[:, :q] / np.sqrt(total)
            if rule and q:
                K_HS, diag_H = heldout
                m_star = critical_batches(lam[: q + 1], K_HS @ coef, diag_H, damping)
                fits = np.flatnonzero(m_star <= max_batch)
                q = int(fits[-1]) if fits.size else 0
            # float32 eigenvectors flatten lambda_{q+1} / lambda_1 down to the
            # trust ratio; below it the preconditioned operator can turn
            # indefinite and the steps diverge. Where the float32 floor, not
            # the rule, ends q (the rule wants directions it cannot resolve:
            # a cluster above the floor, the next eigenvalues below it), the
            # rule stops short. float64 in both cases
            cut = q == keep - 1 < q_max
            if not f32 or not q or (lam[q] >= policy.eigh_float32_trust * lam[0] and not cut):
                break
        self = cls(lam[: q + 1], q, damping)
        self.coef_ = np.ascontiguousarray(coef[:, :q])
        self.scale_ = self.flattening_ / lam[:q] if q else np.zeros(0)
        return self

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


def critical_batches(lam, phi, diagonal, damping):
    """Critical batch ``m*(q) = beta_P(q) / lambda_P(q) + 1`` for ``q = 0..r-1``.

    ``lam`` (r,) are the top eigenvalues of the subsample operator and
    ``phi`` (h, r - 1) its eigenfunctions ``phi_i(x) = k(x, X_S) coef_i`` at
    ``h`` rows with kernel diagonal ``diagonal`` (h,). With ``q`` flattened
    directions, ``lambda_P(q) = lambda_1^(1-a) lambda_{q+1}^a`` and
    ``beta_P(q)`` is the largest diagonal of the EigenPro kernel over those
    rows,

        k_P(x, x) = k(x, x) - sum_{i<=q} (d_i / lambda_i) phi_i(x)^2,
        d_i = 1 - (lambda_{q+1} / lambda_i)^a.

    Ma & Belkin (2019) size the batch with the preconditioned ``beta_P``:
    with ``beta = max k(x, x)`` instead, the rule stops at a ``q`` that
    splits a cluster of eigenvalues (``lambda_P`` then stays at the level of
    the cluster) and the batch is a few rows. Rows outside the subsample
    keep the rule honest: on the subsample's own rows ``k_P`` falls to 0 as
    ``q`` nears its size (the Nystrom eigenfunctions interpolate them), also
    along directions whose eigenvalues are noise.
    """
    lam = np.asarray(lam, dtype=np.float64)
    a = damping
    r = lam.shape[0]
    P2 = np.asarray(phi, dtype=np.float64)[:, : r - 1] ** 2
    h = P2.shape[0]
    c1 = np.zeros((h, r))
    c2 = np.zeros((h, r))
    np.cumsum(P2 / lam[: r - 1], axis=1, out=c1[:, 1:])
    np.cumsum(P2 * lam[: r - 1] ** (-1 - a), axis=1, out=c2[:, 1:])
    tail_a = np.clip(lam, 0, None) ** a
    kp = np.asarray(diagonal, dtype=np.float64)[:, None] - (c1 - c2 * tail_a)
    beta = np.maximum(kp.max(axis=0), np.finfo(np.float64).tiny)
    lam_p = lam[0] ** (1 - a) * tail_a
    lam_p[0] = lam[0]
    with np.errstate(divide="ignore"):
        return np.where(lam_p > 0, beta / lam_p + 1.0, np.inf)


def feature_preconditioner(design, n_components, subsample_size, random_state=None):
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
        P = NystromPreconditioner.from_features(A, n_components, design.policies)
        P.independent_, P.subsample_size_ = True, Z.shape[0]
        return P
    M = 2000 if subsample_size == "auto" else int(subsample_size)
    rows, counts, exact = draw_rows(design.weight, M, random_state, design.n_samples,
                                    design.statistics)
    check_memory(8 * rows.shape[0] * design.n_features,
                 f"the preconditioner subsample ({rows.shape[0]} x {design.n_features})",
                 "Lower subsample_size. ")
    A = np.asarray(design_rows(design, rows), dtype=np.float64)
    if design.weight is not None:  # back to unweighted rows, then the draw counts
        A /= np.sqrt(design.weight[rows])[:, None]
    A *= np.sqrt(counts / counts.sum())[:, None]
    P = NystromPreconditioner.from_features(A, n_components, design.policies)
    P.independent_, P.subsample_size_ = False, int(round(counts.sum()))
    P.exact_ = exact
    return P


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
    M, _ = _whitened_ops(design, P, l2)
    return top_eigenvalue(op=M, dim=design.n_features, policy=design.policy)


def preconditioned_nodes(design, P, l2=0.0, probes=None, depth=None):
    """Spectral nodes and weights of preconditioned gradient descent.

    In the whitened coordinates ``c = P^{-1/2} b`` the iteration is
    ``c <- c - eta (M c - Z^T y~ / n)`` with ``Z = X~ P^{1/2}`` and
    ``M = Z^T Z / n + mu P``. With ``M = sum_j theta_j v_j v_j^T`` the memory
    matrix is ``A[t, s] = sum_j omega_j eta (1 - eta theta_j)^(t-s-1)``,
    ``omega_j = ||Z v_j||^2 / n``. Returned are ``theta`` and the weights
    ``omega / theta`` for :func:`skacv.estimates.risk._spectral.spectral_memory_matrix` (whose
    nodes enter as ``w_j theta_j phi(theta_j)``). Without penalty ``omega_j
    = theta_j`` (unit weights).

    ``probes=None``: exact, from a dense eigendecomposition of the smaller
    side (``mu = 0``) or of ``M`` on the span of the rows of ``X~`` and the
    components of ``P`` (``mu > 0``; ``M = mu I`` with weight 0 elsewhere).
    ``probes`` (n_samples, m), ``m`` Rademacher vectors ``u`` (drawn by the
    risk estimate): Gauss quadrature of Lanczos (depth ``depth``) started
    from ``Z^T u / sqrt(n)``, i.e. the Hutchinson estimate of the traces.
    """
    n, p = design.n_samples, design.n_features
    M, Zt = _whitened_ops(design, P, l2)
    inv_n = 1.0 / design.n_eff
    if probes is not None:
        W0 = Zt(probes) * np.sqrt(inv_n)
        depth = min(int(depth or 30), p)
        theta, omega = lanczos_quadrature(M, W0, depth)[0]
        omega /= probes.shape[1]
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
