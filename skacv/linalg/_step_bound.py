"""The top eigenvalue of a design's ``X~^T X~`` by Lanczos: the step size's
bound (:meth:`~skacv.linalg._design.Design.lipschitz`, where the smaller Gram
matrix is too large for LAPACK).

A Ritz value never exceeds the top eigenvalue; with a residual at most the
statistical policy's ``lipschitz_tol`` (relative) an eigenvalue lies within
that fraction of it, so ``theta (1 + lipschitz_tol)`` bounds the top one
(from a random start, the one found): a step ``1 / L`` never too long. On a
large dense float64 ``X~`` the steps that do not settle in float64 go on
with a float32 copy, whose Ritz vector is then certified in float64
(:func:`_top_in_single`; docs/speed_policy.rst, ``lipschitz_single_*``).
"""

import contextlib

import numpy as np

from .._config import path_memory_bytes
from .._trace import taken
from ..utils._validation import overflow_error
from ._linalg import lanczos, lanczos_top_eigenvalues, top_eigenvalue, top_ritz
from ._memory import fresh


def identity_residual(rows, P):
    """The residual callback of ``Design.panel_products`` for ``X~^T X~ b``
    (the fitted values themselves)."""
    return P


def _normal_operator(design, fuses, dim):
    """``v -> X~^T X~ v`` (``dim``: the features' side) or ``X~ X~^T v`` (the
    samples' side) of ``design``, in its precision, returned in float64: one
    pass by row panels where ``fuses``, else two products."""
    def op(v):
        v = v.astype(design.dtype)
        if fuses:
            w = design.panel_products(v, identity_residual)[1]
        elif dim == design.n_features:
            w = design.rmatvec(design.matvec(v))
        else:
            w = design.matvec(design.rmatvec(v))
        return np.asarray(w, dtype=np.float64)
    return op


def lanczos_top_of(design, G=None):
    """The top eigenvalue of ``X~^T X~`` (not divided by ``n_eff``) of
    ``design``: on its formed features' Gram matrix ``G`` (``X~^T X~ /
    n_eff``, the covariance form) when given, else on the smaller side's
    operator (one pass a product where the design is read by panels);
    skacv's Lanczos to ``lipschitz_tol``, ARPACK if it has not settled in
    its basis (:func:`~skacv.linalg._linalg.lanczos_top_eigenvalues`).
    Raises the overflow error (``ValueError``) where the float64 products
    overflow."""
    n, p = design.n_samples, design.n_features
    fuses = G is None and design.fuses
    dim = p if G is not None or fuses or p <= n else n

    if G is not None:  # formed already (the covariance form): Lanczos on it
        def op(v):
            return (G @ v) * design.n_eff
    else:
        op = _normal_operator(design, fuses, dim)
    W0 = np.random.RandomState(0).standard_normal((dim, 1))
    tol = design.statistics.lipschitz_tol
    theta = None if G is not None else _top_in_single(design, op, dim, fuses, W0, tol)
    if theta is None:
        with design.operator_workers():
            theta = lanczos_top_eigenvalues(lambda Q: op(Q[:, 0])[:, None], W0, tol,
                                            design.policy.lanczos_basis_bytes)[0]
            if np.isnan(theta):  # not settled in the basis
                theta = top_eigenvalue(op=op, dim=dim, tol=tol, policy=design.policy)
    if not np.isfinite(theta):
        raise overflow_error(design.dtype)
    return theta


def _settled(share):
    """The ``until`` of a Lanczos run stopped at the first step (from the
    second) whose top Ritz pair's residual is at most ``share`` times its
    value, or where an overflow left a non-finite entry (no certificate)."""
    def test(state):
        if not np.isfinite(state.alphas[-1, 0] + state.betas[-1, 0]):
            return True
        if state.j < 2:
            return False
        theta, residual, _ = top_ritz(state, 0)
        return residual <= share * max(theta, 0.0)
    return test


def _finite(state):
    return bool(np.isfinite(state.alphas).all() and np.isfinite(state.betas).all())


def _top_in_single(design, op, dim, fuses, W0, tol):
    """:func:`lanczos_top_of`'s eigenvalue of ``op`` (on the side of ``dim``;
    ``fuses``: one pass a product) from ``W0``, on a dense float64 ``X~`` of
    at least the speed policy's ``lipschitz_single_min_bytes``: Lanczos in
    float64 for its first ``lipschitz_single_after`` steps (a separated top
    eigenvalue settles there, as in
    :func:`~skacv.linalg._linalg.lanczos_top_eigenvalues`: the same value),
    then on a float32 copy of ``X~`` (half the bytes a product reads) until
    its top Ritz pair's residual is at most ``lipschitz_single_rtol_share``
    of ``tol`` (relative). That Ritz vector's Rayleigh quotient and residual,
    in float64 by one product of ``op``, certify it as the float64 test
    does: the quotient, never above the top eigenvalue, with an eigenvalue
    within ``tol`` of it. ``None``: not taken (or a copy above
    ``path_memory_limit``), or not certified; the float64 Lanczos then runs."""
    policy = design.policy
    floor = policy.lipschitz_single_min_bytes
    X = design.X
    if (floor is None or design.sparse or design.dtype != np.float64
            or X.nbytes < floor or X.nbytes // 2 > path_memory_bytes()):
        return None
    steps = int(min(128, dim, max(2, policy.lanczos_basis_bytes // (8 * dim))))
    with design.operator_workers():
        state = lanczos(lambda Q: op(Q[:, 0])[:, None], W0,
                        min(steps, max(2, policy.lipschitz_single_after)), until=_settled(tol))
    if not _finite(state):
        raise overflow_error(design.dtype)
    theta, residual, _ = top_ritz(state, 0)
    if residual <= tol * max(theta, 0.0) or state.exhausted:
        taken("lipschitz_single", steps=state.j, single=False, certified=True)
        return max(theta, 0.0)
    X32 = fresh(X.size, np.dtype(np.float32), policy).reshape(X.shape)
    with np.errstate(over="ignore"):  # (an overflow fails the certificate below)
        np.copyto(X32, X, casting="same_kind")
    single = type(design).centred(X32, design.x_offset, design.weight, design.fit_intercept,
                                  design.policies)
    op32 = _normal_operator(single, fuses, dim)
    workers = single.panel_workers() if fuses else contextlib.nullcontext()
    with np.errstate(over="ignore", invalid="ignore"), workers:
        state = lanczos(lambda Q: op32(Q[:, 0])[:, None], W0, steps,
                        until=_settled(policy.lipschitz_single_rtol_share * tol), resume=state)
    if not _finite(state):
        taken("lipschitz_single", steps=state.j, single=True, certified=False)
        return None
    v = state.basis[:, :, 0].T @ top_ritz(state, 0)[2]
    v /= np.linalg.norm(v)
    with design.operator_workers(), np.errstate(over="ignore", invalid="ignore"):
        w = op(v)
        quotient = float(v @ w)
        residual = float(np.linalg.norm(w - quotient * v))
    certified = bool(np.isfinite(quotient) and np.isfinite(residual) and quotient > 0
                     and residual <= tol * quotient)
    taken("lipschitz_single", steps=state.j, single=True, certified=certified)
    return quotient if certified else None
