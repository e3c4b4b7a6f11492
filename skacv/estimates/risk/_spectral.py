"""Memory matrices of linear iterations from spectral nodes.

For a linear iteration (GD, scheduled GD, ridge GD, heavy ball, Nesterov)
``A[t, s] = sum_j omega_j theta_j phi_{t,s}(theta_j)`` with ``phi`` the
iteration's scalar recursion in one eigendirection of ``X~^T X~ / n``
(Bellec & Tan 2024). Exact nodes are the eigenvalues; with ``m`` probes the
Gauss quadrature of Lanczos from them, which *is* the Hutchinson estimate
with those probes once the depth reaches ``(T + 1) / 2`` (earlier when the
quadrature has converged, which is checked). Constant-coefficient
iterations are Toeplitz: one chain instead of ``T^2 / 2``.
"""

import contextlib
from dataclasses import dataclass

import numpy as np
from sklearn.utils import check_random_state

from ..._config import check_memory
from ..._trace import taken
from ...iterations._preconditioning import preconditioned_nodes
from ...linalg._linalg import lanczos_quadrature
from ._probes import draw_probes
from ._state import QuadratureState


def spectral_memory_matrix(iteration, eigvals, n_iter, weights=None, return_sources=False):
    """Memory matrix of a linear iteration from spectral nodes ``eigvals`` (of
    ``X~^T X~ / n_eff``) and quadrature ``weights`` (ones: exact traces) over
    ``n_iter`` steps; ``return_sources``: also the gradient points'."""
    if not iteration.is_linear:
        raise ValueError(f"{iteration.name} is not linear: no spectral form.")
    A, Av = _nodes_memory(iteration, eigvals, n_iter, weights, iteration.is_stationary,
                          closed_form=True)
    return (A, Av) if return_sources else A


def counterpart_memory_matrix(iteration, eigvals, n_iter, weights=None, resume=None,
                              keep=False):
    """``(A, A_sources)`` of ``iteration``'s *linear counterpart* (its prox
    replaced by the identity) on spectral nodes: the template of the pooled
    probes' split. ``keep``: also the :class:`CounterpartChain` after step
    ``n_iter``, which ``resume`` continues bit for bit."""
    return _nodes_memory(iteration, eigvals, n_iter, weights, iteration.constant_steps,
                         resume, keep, share=True)


def counterpart_response(iteration, eigvals, n_iter, weights=None):
    """The first column of :func:`counterpart_memory_matrix`'s ``A`` and
    ``A_sources`` side by side, ``O(r n_iter)``: what the template's quadrature
    must resolve (its long lags weigh the small eigenvalues)."""
    return counterpart_responses(iteration, [(eigvals, weights)], n_iter)[0]


def counterpart_responses(iteration, node_sets, n_iter):
    """:func:`counterpart_response` of each ``(eigvals, weights)`` of
    ``node_sets``, by one chain over all their nodes (a step of the chain
    costs about the same for a few nodes or a few hundred)."""
    lam = [np.asarray(e, dtype=np.float64).ravel() for e, _ in node_sets]
    wl = np.zeros((sum(x.size for x in lam), len(lam)))
    start = 0
    for i, (x, (_, w)) in enumerate(zip(lam, node_sets, strict=True)):
        wl[start:start + x.size, i] = x if w is None else np.asarray(w, dtype=np.float64) * x
        start += x.size
    a, av, _ = _chain(iteration, np.concatenate(lam), wl, int(n_iter), n_sources=1)
    return [np.concatenate([a[:, i], av[:, i]]) for i in range(len(lam))]


@dataclass
class CounterpartChain:
    """The scalar recursion of :func:`_chain` after step ``k``."""

    k: int
    A: np.ndarray
    Av: np.ndarray
    dv: np.ndarray
    dx1: np.ndarray
    dx2: np.ndarray


def _nodes_memory(iteration, eigvals, n_iter, weights, stationary, resume=None, keep=False,
                  share=False, closed_form=False):
    """``share``: a stationary ``A_sources`` equal to ``A`` (no extrapolation)
    is the same array. ``closed_form``: without extrapolation, the diagonals
    from :func:`stationary_response` (the counterparts' templates keep the
    chain, whose continuation is the same run bit for bit)."""
    lam = np.asarray(eigvals, dtype=np.float64).ravel()
    w = np.ones_like(lam) if weights is None else np.asarray(weights, dtype=np.float64)
    wl = w * lam
    T = int(n_iter)
    a = stationary_response(iteration, lam, wl, T) if stationary and closed_form else None
    if a is not None:  # no extrapolation: A_sources = A, every diagonal at once
        A = _lower_toeplitz(a)
        return A, (A if share else A.copy())
    if stationary:
        # Toeplitz: one chain from source 0 gives every diagonal
        a, av, chain = _chain(iteration, lam, wl, T, 1, resume)
        A = _lower_toeplitz(a[:, 0])
        Av = A if share and np.array_equal(a, av) else _lower_toeplitz(av[:, 0])
    else:  # (T + 1, T + 1): the chain's own arrays, a last column of zeros
        A, Av, chain = _chain(iteration, lam, wl, T, T, resume, pad=1)
    return (A, Av, chain) if keep else (A, Av)


def stationary_response(iteration, lam, wl, T):
    """``a`` (T + 1,), ``a[0] = 0``: the memory matrix ``A[t, s] = a[t - s]`` of an
    iteration that is one and the same linear map at every step (``constant_steps``:
    no schedule, no sampler), without extrapolation or heavy ball (gradient
    descent with a constant step), on nodes ``lam`` (r,) with weights ``wl``
    (r,) of the injection; else ``None``. Node ``j`` multiplies its tangent
    by ``rho_j`` a step and takes ``g_j`` of a unit injection, so ``a[m] =
    sum_j wl_j g_j rho_j^(m - 1)``: both are read off the iteration's
    :meth:`tangent` (at the first step, and at the last as a check), and
    ``a`` is formed by blocks of about ``sqrt(T)`` lags, ``O(r T)`` flops and
    ``O(r sqrt(T))`` memory, with no step of a recursion in Python."""
    T = int(T)
    if (T < 1 or not iteration.constant_steps or iteration.extrapolates(T)
            or iteration.uses_heavy_ball(T)):
        return None
    lam = np.asarray(lam, dtype=np.float64).ravel()
    ones, zeros = np.ones_like(lam), np.zeros_like(lam)
    maps = [(iteration.tangent(k, ones, ones, None, -lam, None, n_free=0)[0],
             iteration.tangent(k, zeros, zeros, None, ones, None, n_free=0)[0])
            for k in (1, T)]
    (rho, g), (rho_T, g_T) = maps
    if not (np.array_equal(rho, rho_T) and np.array_equal(g, g_T)):
        return None
    a = np.zeros(T + 1)
    # blocks of about sqrt(T) lags: as many blocks as lags a block, the
    # powers' temporary O(r sqrt(T)) (all lags at once: r T)
    width = min(T, int(np.ceil(np.sqrt(T))))
    powers = np.power(rho[:, None], np.arange(width))  # (r, width)
    jump = powers[:, -1] * rho  # rho^width
    coef = np.asarray(wl, dtype=np.float64).ravel() * g  # rho^(start) wl g
    for start in range(0, T, width):
        stop = min(start + width, T)
        a[start + 1:stop + 1] = coef @ powers[:, :stop - start]
        coef = coef * jump
    return a


def _lower_toeplitz(col):
    """The strictly lower-triangular Toeplitz matrix ``M[t, s] = col[t - s]``,
    ``s < t``, in one pass."""
    T = col.shape[0] - 1
    vals = np.concatenate([np.zeros(T + 1), col[1:]])  # vals[T + d] = col[d], d >= 1
    return np.lib.stride_tricks.sliding_window_view(vals, T + 1)[:, ::-1].copy()


def _chain(iteration, lam, wl, T, n_sources, resume=None, pad=0):
    """Scalar tangent recursions for sources ``0..n_sources-1``: ``A``,
    ``A_sources`` (T + 1, n_sources + pad: ``pad`` columns of zeros) and the
    :class:`CounterpartChain` after step ``T`` (holding them), continuing
    ``resume``; ``wl`` of shape (r, g) (one source): ``A``, ``A_sources``
    (T + 1, g), a column per set of weights."""
    r = lam.shape[0]
    width = n_sources if wl.ndim == 1 else wl.shape[1]
    A = np.zeros((T + 1, width + pad))
    Av = np.zeros((T + 1, width + pad))
    # by sources (rows: the active ones a contiguous block): dv (advanced in
    # place), dx1, dx2 and a spare block that the next dx is written into,
    # rotated: no copies between steps
    dv, dx1, dx2, spare = (np.zeros((n_sources, r)) for _ in range(4))
    k0 = 0
    if resume is not None:
        k0, c0 = resume.k, resume.dv.shape[1]
        A[:k0 + 1, :c0], Av[:k0 + 1, :c0] = resume.A[:, :c0], resume.Av[:, :c0]
        dv[:c0], dx1[:c0], dx2[:c0] = resume.dv.T, resume.dx1.T, resume.dx2.T
    neg_lam = -lam
    for k in range(k0 + 1, T + 1):
        cols = min(k, n_sources)  # sources 0..k-1 are active
        dz = np.multiply(neg_lam, dv[:cols], out=spare[:cols])
        if k - 1 < n_sources:
            dz[k - 1] += 1.0
        dx, _ = iteration.tangent(k, dv[:cols], dx1[:cols], dx2[:cols], dz, None, n_free=0,
                                  overwrite_dz=True, out_v=dv[:cols])
        filled = cols if wl.ndim == 1 else width  # a column per source, or per weights
        A[k, :filled] = (dx @ wl).ravel()
        Av[k, :filled] = (dv[:cols] @ wl).ravel()
        dx2, dx1, spare = dx1, spare, dx2
    cols = min(T, n_sources)
    return A, Av, CounterpartChain(T, A, Av, dv[:cols].T, dx1[:cols].T, dx2[:cols].T)


def significant_nodes(lam, w, statistics):
    """The nodes ``lam`` (weights ``w``, ``None``: unit) whose eigenvalue
    times weight is at least the statistical policy's ``template_node_floor``
    of the largest. A node ``theta`` enters the template as ``w theta
    phi_{t, s}(theta)``, and the counterpart's response ``phi`` grows at
    most linearly in the lag where ``theta`` is small (no curvature: the
    momentum's drift), so the nodes left out move an entry by about ``T``
    times the floor of the largest node's: far below the quadrature's
    ``template_rtol`` (the spectra of collinear designs, spectra of
    standardised absorbances among them, hold most of their nodes within
    ``1e-10`` of the top, each a column of the template's recursion)."""
    mass = lam if w is None else w * lam
    keep = mass >= statistics.template_node_floor * mass.max(initial=0.0)
    if keep.all() or not keep.any():
        return lam, w
    taken("template_nodes_dropped", dropped=int(keep.size - keep.sum()), nodes=keep.size)
    return lam[keep], None if w is None else w[keep]


def exact_nodes(design):
    """Eigenvalues of ``X~^T X~ / n_eff``, unit weights."""
    m = min(design.n_samples, design.n_features)
    check_memory(8 * m * m, f"the exact-trace Gram matrix ({m} x {m})",
                 "Use n_probes=int (Hutchinson) instead. ")
    lam = design.gram_eigenvalues()
    return np.clip(lam, 0, None), np.ones_like(lam)


def lanczos_check(iteration, T):
    """What stops the Lanczos process once converged: a stationary iteration's
    memory matrix (one chain), else the moments ``sum w theta (1 - theta /
    theta_max)^d``, ``d = 0..T``.
    """
    if iteration.is_stationary:
        # the Toeplitz matrix's first column, one chain (no (T + 1)^2 matrix)
        return lambda lam, w: _chain(iteration, np.asarray(lam, dtype=np.float64),
                                     np.asarray(w, dtype=np.float64) * lam, T, 1)[0][1:, 0]
    d = np.arange(T + 1)

    def moments(lam, w):
        top = max(lam.max(), 1e-300)
        return (w * lam) @ (1.0 - lam[:, None] / top) ** d[None, :]

    return moments


def lanczos_nodes(design, n_probes, rng, depth, verbose=0, check=None, state=None,
                  keep_state=False):
    """Gauss quadrature of ``m`` Rademacher probes: ``sum_j w_j f(theta_j)``
    equals the Hutchinson estimate ``(1/m) sum_i z_i^T f(K) z_i`` for every
    polynomial ``f`` of degree ``< 2 * depth``; with ``keep_state`` also a
    :class:`~skacv.estimates.risk._state.QuadratureState`, which ``state``
    resumes (the same design and probes).
    """
    n, p = design.n_samples, design.n_features
    dim = min(n, p)
    inv_n = 1.0 / design.n_eff
    if n <= p:

        def op(Q):
            return design.matvec(design.rmatvec(Q.astype(design.dtype))) * inv_n
    else:

        def op(Q):
            return design.normal_matvec(Q.astype(design.dtype)) * inv_n

    m = n_probes
    if state is not None:
        Z = state.Z
        resume = state.lanczos
    else:
        Z = draw_probes(rng, (dim, m))
        resume = None
    with design.operator_workers() if n > p else contextlib.nullcontext():
        out = lanczos_quadrature(op, Z, depth, check=check, resume=resume,
                                 return_state=keep_state)
    (nodes, weights), k_used = out[:2]
    taken("lanczos_quadrature", resumed=resume is not None, depth=k_used)
    if verbose:
        print(f"[risk] Lanczos quadrature: {m} probes x {k_used} steps")
    if keep_state:
        return nodes, weights / m, QuadratureState(Z=Z, lanczos=out[2])
    return nodes, weights / m


def preconditioned_memory_matrix(design, iteration, n_iter, n_probes=None, random_state=None):
    """``(A, A)`` of preconditioned gradient descent: plain gradient descent in
    whitened coordinates, on the nodes of
    :func:`skacv.iterations._preconditioning.preconditioned_nodes`.
    """
    T = int(n_iter)
    probes = None
    if n_probes is not None:
        probes = draw_probes(check_random_state(random_state), (design.n_samples, int(n_probes)))
    theta, w = preconditioned_nodes(design, iteration.preconditioner, iteration.l2,
                                    probes=probes, depth=T // 2 + 2)
    A = spectral_memory_matrix(iteration.whitened(), theta, T, weights=w)
    return A, A
