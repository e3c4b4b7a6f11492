"""Spectral linear algebra shared by every module: one Lanczos process
(:func:`lanczos`, full re-orthogonalisation) and what is read from it
(Gauss quadrature, the Hutchinson estimate of ``tr f(op)`` from probes;
top eigenvalues), the top eigenvalue and eigenpairs of a matrix or
operator (LAPACK, ARPACK or a randomized range finder), and a basis of the
columns behind a Gram matrix (pivoted Cholesky)."""

import dataclasses

import numpy as np
import scipy.linalg as linalg
from scipy.sparse.linalg import LinearOperator, eigsh
from sklearn.utils.extmath import randomized_svd

from .._trace import taken
from ..utils._parallel import factorization_blas

#: a column counts as independent of the columns taken before it (in
#: :func:`independent_columns`) when more than this share of its squared norm
#: lies outside their span: the square root of float64's resolution
RANK_TOL = float(np.sqrt(np.finfo(np.float64).resolution))


def _tridiagonal(alphas, betas, k, i):
    Tk = np.diag(alphas[:k, i])
    if k > 1:
        off = betas[: k - 1, i]
        Tk += np.diag(off, 1) + np.diag(off, -1)
    return Tk


def _quadrature(alphas, betas, k, scale):
    """Nodes and weights of the Lanczos tridiagonals (one per column)."""
    nodes, weights = [], []
    for i in range(alphas.shape[1]):
        theta, U = np.linalg.eigh(_tridiagonal(alphas, betas, k, i))
        nodes.append(theta)
        weights.append(scale[i] * U[0] ** 2)
    return np.clip(np.concatenate(nodes), 0, None), np.concatenate(weights)


@dataclasses.dataclass(eq=False)
class LanczosState:
    """Lanczos processes after ``j`` steps, one per column of the starting
    block (:func:`lanczos`); ``resume`` continues them.

    Attributes
    ----------
    j : int
        Steps taken.
    alphas, betas : ndarray of shape (j, m)
        Diagonals and off-diagonals of the tridiagonals (``betas[j - 1]``:
        the norms of the residuals after the last step).
    basis : ndarray of shape (j, dim, m)
        The Lanczos vectors (kept for the re-orthogonalisation).
    raw : ndarray of shape (m,)
        Squared norms of the starting vectors (the quadrature's scale).
    q, q_prev : ndarray of shape (dim, m)
        The next and the last Lanczos vectors.
    beta_prev : ndarray of shape (m,)
        The last off-diagonal entries.
    exhausted : bool
        A column found an invariant subspace (or the whole space): no more
        steps.
    """

    j: int
    alphas: np.ndarray
    betas: np.ndarray
    basis: np.ndarray
    raw: np.ndarray
    q: np.ndarray
    q_prev: np.ndarray
    beta_prev: np.ndarray
    exhausted: bool


def lanczos(op, W0, depth, check=None, rtol=1e-9, resume=None, until=None):
    """Lanczos processes from the columns of ``W0``, one per column.

    Parameters
    ----------
    op : callable
        ``op(Q)`` applies a symmetric operator to a block ``Q`` of shape
        (dim, m).
    W0 : ndarray of shape (dim, m)
        Starting vectors (not normalised).
    depth : int
        Number of steps (at most ``dim``).
    check : callable, default=None
        ``check(nodes, weights)`` is evaluated every other step (from the
        7th) and the process stops once its value changes by less than
        ``rtol`` (relative).
    resume : LanczosState, default=None
        The state of a previous run on the same ``op`` and ``W0``, continued
        up to the new ``depth``.
    until : callable, default=None
        ``until(state)`` is evaluated after every step on the
        :class:`LanczosState` so far; the process stops when it returns True
        (and can be resumed from there).

    Returns
    -------
    state : LanczosState
        The tridiagonals of the ``j`` steps taken (``exhausted`` when an
        invariant subspace was found) and what :func:`lanczos` needs to
        resume.
    """
    dim, m = W0.shape
    depth = int(min(depth, dim))
    if resume is not None and resume.q.shape != (dim, m):
        resume = None
    j0 = 0 if resume is None else resume.j
    depth = max(depth, j0)
    basis = np.zeros((depth, dim, m))
    alphas = np.zeros((depth, m))
    betas = np.zeros((depth, m))
    if resume is not None:
        raw = resume.raw
        basis[:j0], alphas[:j0], betas[:j0] = resume.basis, resume.alphas, resume.betas
        q, q_prev, beta_prev = resume.q, resume.q_prev, resume.beta_prev
        exhausted = resume.exhausted
    else:
        raw = np.linalg.norm(W0, axis=0) ** 2
        norms = np.sqrt(raw)
        norms[norms == 0] = 1.0
        q = W0 / norms
        q_prev = np.zeros_like(q)
        beta_prev = np.zeros(m)
        exhausted = False
    k_used = depth if not exhausted else j0
    prev = None
    if check is not None and resume is not None and not exhausted and j0 >= 7 and j0 < depth:
        # a resumed process applies the (new) check on the schedule of a
        # process run from the start (every other step, two steps apart), so
        # that a path grown in stages stops where the whole path would: at
        # j0 itself when it is a check step and the check holds there
        last = j0 if j0 % 2 == 1 else j0 - 1  # the last check step
        prev = check(*_quadrature(alphas, betas, last, raw))
        if last == j0 and j0 >= 9:
            back = check(*_quadrature(alphas, betas, j0 - 2, raw))
            if np.abs(prev - back).max() <= rtol * max(np.abs(prev).max(), 1e-300):
                depth = k_used = j0
    for j in range(j0, depth if not exhausted else j0):
        basis[j] = q
        w = np.asarray(op(q), dtype=np.float64)
        a = np.einsum("dm,dm->m", q, w)
        w -= a * q + beta_prev * q_prev
        for _ in range(2):  # full re-orthogonalisation (twice is enough)
            coef = np.einsum("kdm,dm->km", basis[: j + 1], w)
            w -= np.einsum("kdm,km->dm", basis[: j + 1], coef)
        b = np.linalg.norm(w, axis=0)
        alphas[j], betas[j] = a, b
        if np.any(b <= 1e-12 * max(np.abs(alphas[: j + 1]).max(), 1e-300)):
            # an invariant subspace for a column: its quadrature is exact
            k_used, exhausted = j + 1, True
            break
        q_prev, q = q, w / b
        beta_prev = b
        if until is not None and until(LanczosState(
                j + 1, alphas[: j + 1], betas[: j + 1], basis[: j + 1], raw, q, q_prev,
                beta_prev, False)):
            k_used = j + 1
            break
        if check is not None and j >= 6 and j % 2 == 0 and j + 1 < depth:
            val = check(*_quadrature(alphas, betas, j + 1, raw))
            if prev is not None:
                scale = np.abs(val).max()
                if np.abs(val - prev).max() <= rtol * max(scale, 1e-300):
                    k_used = j + 1
                    break
            prev = val
    return LanczosState(j=k_used, alphas=alphas[:k_used], betas=betas[:k_used],
                        basis=basis[:k_used], raw=raw, q=q, q_prev=q_prev,
                        beta_prev=beta_prev, exhausted=exhausted or k_used >= dim)


def quadrature(state, depth=None):
    """Nodes and weights of the Gauss quadrature of a :class:`LanczosState`
    (:func:`lanczos_quadrature`'s, at the state's depth or at ``depth <=
    state.j``)."""
    return _quadrature(state.alphas, state.betas, state.j if depth is None else depth,
                       state.raw)


def lanczos_quadrature(op, W0, depth, check=None, rtol=1e-9, resume=None,
                       return_state=False):
    """Gauss quadrature of ``w^T f(op) w`` for the columns ``w`` of ``W0``.

    Nodes and weights (``||w||^2`` times the squared first components of the
    Ritz vectors), concatenated over the columns; exact for polynomials of
    degree ``< 2 * depth``. See :func:`lanczos` for ``check``, ``rtol`` and
    ``resume``.

    Returns
    -------
    (nodes, weights) : tuple of ndarrays
    k_used : int
        Lanczos steps taken.
    state : LanczosState
        Only with ``return_state=True``: what ``resume`` continues.
    """
    state = lanczos(op, W0, depth, check=check, rtol=rtol, resume=resume)
    result = quadrature(state), state.j
    return result + (state,) if return_state else result


def lanczos_top(op, dim, v0=None, n_steps=4):
    """Upper estimate of the top eigenvalue of a PSD operator, warm-startable.

    ``n_steps`` Lanczos steps started from ``v0`` plus a small random part
    (a random start, with twice the steps, when ``v0`` is None). Returns the
    top Ritz value plus its residual norm (an eigenvalue lies within the
    residual of the Ritz value), the top Ritz vector, the warm start of
    the next call on a nearby operator, and the second Ritz value (a lower
    bound of the second eigenvalue; 0 after one step).
    """
    v = np.random.RandomState(0).standard_normal(dim)
    if v0 is not None and np.linalg.norm(v0) > 0:
        v = v0 / np.linalg.norm(v0) + 1e-2 * v / np.linalg.norm(v)
    else:
        n_steps = 2 * n_steps
    state = lanczos(lambda Q: op(Q[:, 0])[:, None], v[:, None], n_steps)
    theta, residual, u = top_ritz(state, 0)
    top = state.basis[:, :, 0].T @ u
    ritz = np.linalg.eigvalsh(_tridiagonal(state.alphas, state.betas, state.j, 0))
    second = max(float(ritz[-2]), 0.0) if ritz.size > 1 else 0.0
    return max(theta + residual, 0.0), top, second


def lanczos_top_eigenvalues(op, W0, tol, max_bytes, max_steps=128):
    """Top eigenvalue of a PSD operator by Lanczos processes from the columns
    of ``W0`` (one per column, run as a block), each stopped at the first
    step where its top Ritz value ``theta`` has a residual norm at most
    ``tol * theta`` (an eigenvalue lies within it; from a random start, the
    top one): fewer passes than ARPACK (docs/speed_policy.rst,
    ``dense_eig_size``). The Lanczos basis is capped at ``max_bytes`` (the
    speed policy's ``lanczos_basis_bytes``; ``np.inf``: no cap).

    Returns
    -------
    theta : ndarray of shape (n_columns,)
        The converged top Ritz values (``theta <= lambda_max <= theta (1 +
        tol)`` when the top eigenvalue is the one found), ``nan`` for a
        process not converged within ``max_steps`` (or the dimension),
        ``inf`` for one whose products overflowed.
    """
    taken("lanczos_top_eigenvalues")
    dim, m = W0.shape
    out = np.full(m, np.nan)
    if np.isfinite(max_bytes):  # the basis kept for the re-orthogonalisation
        max_steps = int(min(max_steps, max(2, int(max_bytes) // (8 * dim * m))))

    def settle(state, full=False):
        for i in np.flatnonzero(np.isnan(out)):
            if not np.isfinite(state.alphas[:, i].sum() + state.betas[:, i].sum()):
                out[i] = np.inf  # (no eigenvalue of its tridiagonal to read)
                continue
            theta, residual, _ = top_ritz(state, i)
            if full or residual <= tol * max(theta, 0.0):
                out[i] = max(theta, 0.0)
        return not np.isnan(out).any()

    state = lanczos(op, W0, max_steps, until=lambda state: state.j >= 2 and settle(state))
    # a process that found an invariant subspace (or the whole space) stops
    # before the check: its Ritz values are exact, its residual zero
    settle(state, state.j >= W0.shape[0])
    return out


def top_ritz(state, i):
    """``(theta, residual, u)``: the top Ritz value of column ``i`` of a
    :func:`lanczos` state, its residual norm (an eigenvalue of the operator
    lies within it of ``theta``) and its eigenvector of the tridiagonal."""
    k = state.j
    theta, U = np.linalg.eigh(_tridiagonal(state.alphas, state.betas, k, i))
    return float(theta[-1]), float(abs(state.betas[k - 1, i] * U[-1, -1])), U[:, -1]


def top_eigenvalue(A=None, *, policy, op=None, dim=None, tol=1e-6):
    """Largest eigenvalue of a symmetric PSD matrix ``A`` or operator ``op``.

    Up to the speed ``policy``'s ``dense_eig_size`` the matrix (formed from ``op`` applied to
    the identity, ``op`` accepting blocks of columns) goes to LAPACK; above,
    ARPACK's Lanczos (``scipy.sparse.linalg.eigsh``, relative tolerance
    ``tol``, deterministic start) on the matrix or the operator.
    """
    if A is not None:
        dim = A.shape[0]
        op = A.dot
    if dim == 0:
        return 0.0
    if dim <= policy.dense_eig_size:
        M = np.asarray(A if A is not None else op(np.eye(dim)), dtype=np.float64)
        M = (M + M.T) / 2
        with factorization_blas("eigvalsh", dim, policy):
            return max(float(linalg.eigvalsh(M, subset_by_index=(dim - 1, dim - 1),
                                             check_finite=False)[0]), 0.0)
    lin = LinearOperator((dim, dim), matvec=op, matmat=op, dtype=np.float64)
    v0 = np.random.RandomState(0).standard_normal(dim)
    taken("eigsh")
    return max(float(eigsh(lin, k=1, which="LA", v0=v0, tol=tol,
                           return_eigenvectors=False)[0]), 0.0)


def top_eigh(S, k, policy, single=False):
    """Top ``k`` eigenpairs of a symmetric PSD matrix, in descending order.

    LAPACK's ``eigh(subset_by_index=...)``, or a randomized range finder
    (Halko, Martinsson & Tropp 2011) when ``S`` is large and ``k`` small.
    ``single``: LAPACK in float32 (the pairs come back in float64; the
    eigenvalues within about ``4e-7`` of the largest, measured at orders
    300-2000), SciPy's divide and conquer ``ssyevd`` for the whole spectrum
    (NumPy's ``eigh`` of a float32 matrix was not faster than in float64).
    """
    m = S.shape[0]
    k = int(min(k, m))
    if k <= 0:
        return np.zeros(0), np.zeros((m, 0))
    if m > 4000 and 10 * k < m:
        U, s, _ = randomized_svd(S, k, n_oversamples=max(10, k // 2), n_iter=4,
                                 random_state=0)
        return s, U
    with factorization_blas("eigh", m, policy):
        if single:
            S = np.asarray(S, dtype=np.float32)
            subset = None if 4 * k > m else (m - k, m - 1)
            lam, U = linalg.eigh(S, subset_by_index=subset, check_finite=False,
                                 driver="evd" if subset is None else "evr")
            lam, U = lam[lam.shape[0] - k:].astype(np.float64), U[:, U.shape[1] - k:]
            U = U.astype(np.float64)
        elif 4 * k > m:  # divide and conquer on everything beats a large subset
            lam, U = np.linalg.eigh(S)
            lam, U = lam[m - k:], U[:, m - k:]
        else:
            lam, U = linalg.eigh(S, subset_by_index=(m - k, m - 1), check_finite=False)
    return np.clip(lam[::-1], 0, None), np.ascontiguousarray(U[:, ::-1])


def block_trace(Wt, D, m):
    """``[sum(Wt.T * D[:, s*m:(s+1)*m]) for s]`` for Wt (m, r), D (r, m*k):
    the Hutchinson traces of ``k`` blocks of ``m`` probe columns.

    Reads ``D.T`` as (k, m, r) blocks: a view for either memory order of
    ``D`` (no copy), accumulated in the precision of ``D``; a Fortran-ordered
    ``D`` is one matrix-vector product (``(k, m r) @ (m r,)``)."""
    k = D.shape[1] // m
    if Wt.shape[1] == 0:
        return np.zeros(k)
    if D.flags.f_contiguous:
        return D.T.reshape(k, m * D.shape[0]) @ Wt.reshape(-1)
    return np.einsum("kmr,mr->k", D.T.reshape(k, m, D.shape[0]), Wt)


def independent_columns(G, policy, tol=RANK_TOL):
    """Indices (sorted) of a maximal set of linearly independent columns
    behind the positive semi-definite Gram matrix ``G`` (``G = M^T M``):
    pivoted Cholesky (LAPACK ``pstrf``) of its correlation form, stopped
    when no column has more than ``tol`` of its squared norm outside the
    span of those taken (columns of zero norm are never taken). ``G`` of
    full numerical rank, the common case, costs one unpivoted (blocked)
    factorisation, whose squared pivots are the same shares in the columns'
    order. The number of indices is the numerical rank of ``M``."""
    G = np.asarray(G, dtype=np.float64)
    d = np.sqrt(np.clip(np.diag(G), 0.0, None)) if G.size else np.zeros(0)
    keep = np.flatnonzero(d > 0)
    if keep.size == 0:
        return keep
    d = d[keep]
    R = G[np.ix_(keep, keep)] / d[:, None] / d[None, :]
    with factorization_blas("cholesky", R.shape[0], policy):
        U, info = linalg.lapack.dpotrf(R, lower=0)
        if info == 0 and np.min(np.diag(U)) ** 2 > tol:
            return keep
        _, piv, rank, info = linalg.lapack.dpstrf(R, tol=tol, lower=0)
    if info < 0:
        raise ValueError(f"pstrf: illegal argument {-info}")
    return np.sort(keep[piv[:rank] - 1])
