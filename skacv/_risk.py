"""Out-of-sample risk along a trajectory: the memory-matrix estimate.

Bellec & Tan (2024). For iterates ``x^0..x^T`` (``coef_path``) produced by an
:class:`~skacv.Iteration` from gradient points ("sources") ``v^0..v^{T-1}``,

* ``F`` (n, T+1): training residuals ``y~ - X~ x^t``;
* ``A`` (T+1, T+1), strictly lower triangular: ``A[t, s] = tr(X~ dx^t/dy^(s))``
  where the copy ``y^(s)`` of the response enters only through the gradient
  evaluated at ``v^s`` (used by step ``s + 1``). ``A_src`` is the same for the
  sources ``v^t`` (they differ only for extrapolating methods);
* corrected residuals of the sources ``R_v = F_v (I - A_src/n - c I/n)^{-T}``
  and of the outputs ``R_x = (F_x + R_v (A/n)^T) / (1 - c/n)``, with ``c = 1``
  when an intercept is fitted (the intercept of every iterate is the mean of
  its own residual, a diagonal entry of the memory matrix) and ``c = 0``
  otherwise;
* the estimate ``R_x^T R_x / n`` of ``E[(y_new - x_new^T x^t - b0^t)(...s)]``.

With sample weights (frequency weights) every ``n`` is ``n_eff = sum(w)``,
``X~`` and ``y~`` carry ``sqrt(w)`` and the traces are the traces of the
weighted problem, which equals repeating rows.

Traces are computed

* for linear iterations (GD, scheduled GD, ridge GD, heavy ball, Nesterov)
  spectrally: ``A[t, s] = sum_j omega_j theta_j phi_{t,s}(theta_j)`` with the
  scalar recursion ``phi`` of the iteration in one eigendirection. Exact
  nodes are the eigenvalues of ``X~^T X~ / n`` (``n_probes=None``); with
  ``n_probes=m`` the nodes/weights are the Gauss quadrature of Lanczos started
  from ``m`` Rademacher probes, which *is* the Hutchinson estimate with those
  probes (exactly so once the Lanczos depth reaches ``(T + 1) / 2``; earlier
  when the quadrature has converged, which is checked). Constant-coefficient
  iterations are Toeplitz: one chain instead of ``T^2/2``.
* for ISTA/FISTA by propagating Jacobian actions through the masks of the
  prox, for all sources at once (BLAS-3 blocks), restricted to the supports,
  with Gram-restricted products when they are cheaper; ``n_probes=None``
  propagates identity probes (exact traces, small problems only).
"""

import time

import numpy as np
from scipy.linalg import solve_triangular
from sklearn.utils import Bunch, check_random_state

from ._config import check_memory, get_config

# ----------------------------------------------------------------------------
# the estimate from (F, A)
# ----------------------------------------------------------------------------


def _extrapolate_columns(iteration, M):
    """Columns of the sources from columns of the outputs (last axis = t)."""
    out = np.array(M, dtype=np.float64, copy=True)
    for k in range(1, M.shape[-1]):
        if iteration.beta(k) != 0.0:
            out[..., k] = iteration.extrapolate(k, M[..., k], M[..., k - 1])
    return out


def risk_from_memory(F, A, n_eff, fit_intercept=False, A_sources=None, iteration=None):
    """Memory-matrix risk estimate from residuals and traces.

    Parameters
    ----------
    F : ndarray of shape (n_samples, T + 1)
        Training residuals of the outputs ``x^t`` (weighted by ``sqrt(w)``).
    A : ndarray of shape (T + 1, T + 1)
        Memory matrix of the outputs (strictly lower triangular).
    n_eff : float
        Number of samples (``sum(sample_weight)``).
    fit_intercept : bool, default=False
        Adds the intercept's diagonal term.
    A_sources : ndarray of shape (T + 1, T + 1), default=None
        Memory matrix of the gradient points; ``None`` when they are the
        outputs (no extrapolation).
    iteration : Iteration, default=None
        Needed with ``A_sources`` to form the residuals of the sources.

    Returns
    -------
    risk : ndarray of shape (T + 1,)
        Estimated out-of-sample risk of every output.
    risk_matrix : ndarray of shape (T + 1, T + 1)
        Estimated cross terms ``E[(y - yhat_t)(y - yhat_s)]``.
    """
    F = np.asarray(F, dtype=np.float64)
    T1 = F.shape[1]
    c = 1.0 if fit_intercept else 0.0
    if c and n_eff <= 1:
        raise ValueError(
            "Estimating the risk with fit_intercept=True needs more than one "
            f"sample; got n_samples = {n_eff:g}."
        )
    A = np.asarray(A, dtype=np.float64)[:T1, :T1]
    if A_sources is None:
        A_sources, F_v = A, F
    else:
        A_sources = np.asarray(A_sources, dtype=np.float64)[:T1, :T1]
        F_v = _extrapolate_columns(iteration, F)
    L = np.eye(T1) * (1.0 - c / n_eff) - np.tril(A_sources, -1) / n_eff
    R_v = solve_triangular(L, F_v.T, lower=True, check_finite=False).T
    if A_sources is A:
        R_x = R_v
    else:
        R_x = (F + R_v @ (np.tril(A, -1) / n_eff).T) / (1.0 - c / n_eff)
    G = R_x.T @ R_x / n_eff
    return np.diag(G).copy(), G


# ----------------------------------------------------------------------------
# linear iterations: spectral recursions
# ----------------------------------------------------------------------------


def spectral_memory_matrix(iteration, eigvals, n_iter, weights=None, return_sources=False):
    """Memory matrix of a linear iteration from spectral nodes.

    ``A[t, s] = sum_j w_j lambda_j phi_{t,s}(lambda_j)`` where ``phi`` is the
    tangent of the iteration in one eigendirection of ``X~^T X~ / n`` (unit
    injection at source ``s``). With the eigenvalues and unit weights this is
    exact; with Lanczos nodes and weights it is the Hutchinson estimate.

    Parameters
    ----------
    iteration : Iteration
        A linear iteration (``iteration.is_linear``).
    eigvals : ndarray of shape (r,)
        Nodes (eigenvalues of ``X~^T X~ / n_eff``; zeros may be dropped).
    n_iter : int
        Number of steps ``T``.
    weights : ndarray of shape (r,), default=None
        Quadrature weights (ones: exact traces).
    return_sources : bool, default=False
        Also return the memory matrix of the gradient points.

    Returns
    -------
    A : ndarray of shape (n_iter + 1, n_iter + 1)
    A_sources : ndarray of shape (n_iter + 1, n_iter + 1)
        Only if ``return_sources``.
    """
    if not iteration.is_linear:
        raise ValueError(f"{iteration.name} is not linear: no spectral form.")
    lam = np.asarray(eigvals, dtype=np.float64).ravel()
    w = np.ones_like(lam) if weights is None else np.asarray(weights, dtype=np.float64)
    wl = w * lam
    T = int(n_iter)
    A = np.zeros((T + 1, T + 1))
    Av = np.zeros((T + 1, T + 1))
    if iteration.is_stationary:
        # Toeplitz: one chain from source 0 gives every diagonal
        a, av = _chain(iteration, lam, wl, T, n_sources=1)
        for d in range(1, T + 1):
            idx = np.arange(d, T + 1)
            A[idx, idx - d] = a[d, 0]
            Av[idx, idx - d] = av[d, 0]
    else:
        A, Av = _chain(iteration, lam, wl, T, n_sources=T)
    return (A, Av) if return_sources else A


def _chain(iteration, lam, wl, T, n_sources):
    """Scalar tangent recursions for sources ``0..n_sources-1`` (columns)."""
    r = lam.shape[0]
    A = np.zeros((T + 1, T + 1))
    Av = np.zeros((T + 1, T + 1))
    dv = np.zeros((r, n_sources))
    dx1 = np.zeros((r, n_sources))
    dx2 = np.zeros((r, n_sources))
    lam_c = lam[:, None]
    for k in range(1, T + 1):
        cols = min(k, n_sources)  # sources 0..k-1 are active
        dz = -lam_c * dv[:, :cols]
        if k - 1 < n_sources:
            dz[:, k - 1] += 1.0
        dx, dvn = iteration.tangent(k, dv[:, :cols], dx1[:, :cols], dx2[:, :cols], dz, None)
        A[k, :cols] = wl @ dx
        Av[k, :cols] = wl @ dvn
        dx2[:, :cols] = dx1[:, :cols]
        dx1[:, :cols] = dx
        dv[:, :cols] = dvn
    return A, Av


def _exact_nodes(design):
    """Eigenvalues of ``X~^T X~ / n_eff`` (from the smaller Gram matrix)."""
    m = min(design.n_samples, design.n_features)
    check_memory(8 * m * m, f"the exact-trace Gram matrix ({m} x {m})",
                 "Use n_probes=int (Hutchinson) instead. ")
    lam = design.gram_eigenvalues()
    return np.clip(lam, 0, None), np.ones_like(lam)


def _quadrature(alphas, betas, k, scale):
    """Nodes and weights of the Lanczos tridiagonals (one per column)."""
    nodes, weights = [], []
    for i in range(alphas.shape[1]):
        Tk = np.diag(alphas[:k, i])
        if k > 1:
            off = betas[: k - 1, i]
            Tk += np.diag(off, 1) + np.diag(off, -1)
        theta, U = np.linalg.eigh(Tk)
        nodes.append(theta)
        weights.append(scale[i] * U[0] ** 2)
    return np.clip(np.concatenate(nodes), 0, None), np.concatenate(weights)


def lanczos_quadrature(op, W0, depth, check=None, rtol=1e-9, resume=None,
                       return_state=False):
    """Gauss quadrature of ``w^T f(op) w`` for the columns ``w`` of ``W0``.

    Block Lanczos with full re-orthogonalisation, one independent process per
    column. Returns nodes and weights (``||w||^2`` times the squared first
    components of the Ritz vectors) concatenated over the columns; exact for
    polynomials of degree ``< 2 * depth``. ``check(nodes, weights)``, if
    given, is evaluated every other step and the process stops once its value
    changes by less than ``rtol`` (relative).

    ``resume`` (the state returned with ``return_state=True`` by a run on the
    same ``op`` and ``W0``) continues that run up to the new ``depth``
    instead of starting again.
    """
    dim, m = W0.shape
    depth = int(min(depth, dim))
    if resume is not None and (resume["dim"], resume["m"]) != (dim, m):
        resume = None
    j0 = 0 if resume is None else resume["j"]
    depth = max(depth, j0)
    basis = np.zeros((depth, dim, m))
    alphas = np.zeros((depth, m))
    betas = np.zeros((depth, m))
    if resume is not None:
        raw = resume["raw"]
        basis[:j0], alphas[:j0], betas[:j0] = resume["basis"], resume["alphas"], resume["betas"]
        q, q_prev, beta_prev = resume["q"], resume["q_prev"], resume["beta_prev"]
        exhausted = resume["exhausted"]
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
    for j in range(j0, depth if not exhausted else j0):
        basis[j] = q
        w = np.asarray(op(q), dtype=np.float64)
        a = np.einsum("dm,dm->m", q, w)
        w -= a * q + beta_prev * q_prev
        # full re-orthogonalisation (twice is enough)
        for _ in range(2):
            coef = np.einsum("kdm,dm->km", basis[: j + 1], w)
            w -= np.einsum("kdm,km->dm", basis[: j + 1], coef)
        b = np.linalg.norm(w, axis=0)
        alphas[j], betas[j] = a, b
        if np.any(b <= 1e-12 * max(1.0, np.abs(alphas[: j + 1]).max())):
            # invariant subspace found for a column: the quadrature is exact
            k_used, exhausted = j + 1, True
            break
        q_prev, q = q, w / b
        beta_prev = b
        if check is not None and j >= 6 and j % 2 == 0 and j + 1 < depth:
            # stop once the quantities the estimate needs have converged
            val = check(*_quadrature(alphas, betas, j + 1, raw))
            if prev is not None:
                scale = np.abs(val).max()
                if np.abs(val - prev).max() <= rtol * max(scale, 1e-300):
                    k_used = j + 1
                    break
            prev = val
    result = _quadrature(alphas, betas, k_used, raw), k_used
    if not return_state:
        return result
    state = {"dim": dim, "m": m, "j": k_used, "raw": raw, "basis": basis[:k_used],
             "alphas": alphas[:k_used], "betas": betas[:k_used], "q": q, "q_prev": q_prev,
             "beta_prev": beta_prev, "exhausted": exhausted or k_used >= dim}
    return result + (state,)


def _lanczos_check(iteration, T):
    """Quantity whose convergence stops the Lanczos process early.

    Stationary iterations: their (cheap, one-chain) memory matrix itself.
    Otherwise the moments ``sum w theta (1 - theta / theta_max)^d``,
    ``d = 0..T``, which span the polynomials of degree <= T + 1 involved.
    """
    if iteration.is_stationary:
        return lambda lam, w: spectral_memory_matrix(iteration, lam, T, weights=w)[1:, 0]
    d = np.arange(T + 1)

    def moments(lam, w):
        top = max(lam.max(), 1e-300)
        return (w * lam) @ (1.0 - lam[:, None] / top) ** d[None, :]

    return moments


def _lanczos_nodes(design, n_probes, rng, depth, verbose=0, check=None, rtol=1e-9,
                   state=None, keep_state=False):
    """Gauss quadrature of ``m`` Rademacher probes (stochastic Lanczos).

    Returns nodes and weights such that ``sum_j w_j f(theta_j)`` equals the
    Hutchinson estimate ``(1/m) sum_i z_i^T f(K) z_i`` for every polynomial
    ``f`` of degree ``< 2 * depth``; with ``keep_state``, also the Lanczos
    state, which ``state`` resumes (same design and probes).
    """
    n, p = design.n_samples, design.n_features
    dim = min(n, p)
    inv_n = 1.0 / design.n_eff
    if n <= p:

        def op(Q):
            return design.matvec(design.rmatvec(Q.astype(design.dtype))) * inv_n
    else:

        def op(Q):
            return design.rmatvec(design.matvec(Q.astype(design.dtype))) * inv_n

    m = n_probes
    if state is not None:
        Z = state["Z"]
        resume = state["lanczos"]
    else:
        Z = rng.choice([-1.0, 1.0], size=(dim, m))
        resume = None
    out = lanczos_quadrature(op, Z, depth, check=check, rtol=rtol, resume=resume,
                             return_state=keep_state)
    (nodes, weights), k_used = out[:2]
    if verbose:
        print(f"[risk] Lanczos quadrature: {m} probes x {k_used} steps")
    if keep_state:
        return nodes, weights / m, {"kind": "lanczos", "Z": Z, "lanczos": out[2]}
    return nodes, weights / m


# ----------------------------------------------------------------------------
# masked (proximal) iterations: propagation of Jacobian actions
# ----------------------------------------------------------------------------


def _masked_memory(design, iteration, coef_path, n_probes, rng, chain_dtype, verbose=0,
                   state=None, keep_state=False):
    """Hutchinson (or exact) memory matrices of a proximal trajectory.

    For source ``s`` the tangent of ``x^k`` lives on the support of ``x^k``.
    All sources are propagated together as one block, with products by
    ``X~`` restricted to the columns of the supports (prefix views of a copy
    of ``X~`` whose columns are sorted by the last step they are active).

    ``state`` (returned with ``keep_state=True``, Hutchinson probes only)
    holds the chains after the last step of a shorter prefix of the same
    trajectory: the computation continues from there, so that extending a
    path by warm start costs only the new rows of the memory matrices.

    Returns
    -------
    A, A_sources : ndarrays of shape (T + 1, T + 1)
    state : dict or None
    """
    n = design.n_samples
    T = coef_path.shape[1] - 1
    inv_n = 1.0 / design.n_eff
    dtype = np.dtype(chain_dtype)
    keep_state = keep_state and n_probes is not None
    if state is not None and not (
        state.get("kind") == "chains" and n_probes is not None
        and state["m"] == int(n_probes) and state["dtype"] == dtype and state["k"] <= T
        and state["Z"].shape[0] == n
    ):
        state = None
    k0 = 0 if state is None else state["k"]
    masks = coef_path != 0  # (p, T+1); mask of step k = support of x^k
    # order the columns by the last step at which they are in a support so
    # that every support (and every union of consecutive ones) is a prefix
    steps = np.arange(T + 1)
    last = np.where(masks.any(axis=1), np.max(np.where(masks, steps, -1), axis=1), -1)
    order = np.argsort(-last, kind="stable")
    last_sorted = last[order]
    # prefix length covering every coordinate active at step >= k
    prefix = np.searchsorted(-last_sorted, -np.arange(T + 2), side="right")
    width = int(prefix[max(k0 - 1, 1)]) if T >= 1 else 0
    A = np.zeros((T + 1, T + 1))
    Av = np.zeros((T + 1, T + 1))
    if state is not None:
        A[: k0 + 1, : k0 + 1] = state["A"]
        Av[: k0 + 1, : k0 + 1] = state["Av"]
    Z = None  # Rademacher probes (the saved ones when continuing)
    if n_probes is not None:
        Z = state["Z"] if state is not None else (
            rng.choice([-1.0, 1.0], size=(n, int(n_probes))).astype(dtype))
    if width == 0:  # every iterate after x^0 is zero: nothing depends on y
        return A, Av, (_chain_state(T, Z, dtype, A, Av, {}) if keep_state else None)
    Xs = np.asarray(design.columns(order[:width]), dtype=dtype, order="F")
    if n_probes is None:  # exact traces: identity probes on the smaller side
        if n <= width:
            probes = Xs.T.copy()  # X~^T Z with Z = I_n
            trace_w = probes
            m, scale = n, 1.0
        else:
            probes = np.eye(width, dtype=dtype)  # inject e_j, trace with X~^T X~
            trace_w = (Xs.T @ Xs).astype(dtype)
            m, scale = width, 1.0
    else:
        m = int(n_probes)
        probes = Xs.T @ Z
        trace_w = probes
        scale = 1.0 / m
    cols_max = m * T
    check_memory(
        3 * width * cols_max * dtype.itemsize,
        f"the Jacobian chains ({width} x {cols_max}, 3 blocks)",
        "Use fewer probes (n_probes) or fewer iterations. ",
    )
    dv = np.zeros((width, cols_max), dtype=dtype, order="F")
    dx1 = np.zeros_like(dv)
    dx2 = np.zeros_like(dv) if _uses_hb(iteration, T) else None
    dv_rows = 0  # rows of dv that may be non-zero
    if state is not None:  # scatter the saved chains into this column order
        position = np.empty(coef_path.shape[0], dtype=np.intp)
        position[order] = np.arange(order.size)
        c0 = m * k0
        for name, block in (("dv", dv), ("dx1", dx1), ("dx2", dx2)):
            coords, values = state["chains"].get(name, (None, None))
            if block is None or coords is None or coords.size == 0:
                continue
            rows = position[coords]
            block[rows, :c0] = values
            if name == "dv":
                dv_rows = int(rows.max()) + 1
    masks_s = masks[order[:width]]
    gram = None
    k_first = max(2, k0 + 1)  # first step with chains to propagate
    tic = time.perf_counter()
    rows_k = rows_prev = 0
    for k in range(k0 + 1, T + 1):
        c_old = m * (k - 1)  # chains of sources 0..k-2 (source k-1 is new)
        c_new = m * k
        rows_k = int(prefix[k])  # supports of steps >= k live in this prefix
        rows_prev = min(int(prefix[k - 1]), width) if k >= 2 else 0
        mask_k = masks_s[:rows_k, k]
        dz = np.empty((rows_k, c_new), dtype=dtype)
        if c_old and dv_rows:
            u = dv_rows
            gram = _maybe_gram(Xs, gram, k, k_first, prefix, m, T, n,
                               cached=None if state is None else state.get("gram"),
                               order=order)
            if gram is not None and gram.shape[0] >= max(u, rows_k):
                prod = gram[:rows_k, :u] @ dv[:u, :c_old]
            else:
                prod = Xs[:, :rows_k].T @ (Xs[:, :u] @ dv[:u, :c_old])
            np.multiply(prod, -inv_n, out=dz[:, :c_old])
        elif c_old:
            dz[:, :c_old] = 0
        np.multiply(probes[:rows_k], inv_n, out=dz[:, c_old:c_new])
        if dv_rows < rows_k:
            dv[dv_rows:rows_k, :c_new] = 0
        dx2_k = None
        if dx2 is not None:
            dx2_k = dx2[:rows_k, :c_new]
        dx, dvn = iteration.tangent(
            k, dv[:rows_k, :c_new], dx1[:rows_k, :c_new], dx2_k, dz, mask_k
        )
        # rows beyond the prefix: dx = 0 there, dv = extrapolate(0, dx1)
        tail_v = None
        if iteration.beta(k) != 0.0 and rows_prev > rows_k:
            tail_v = iteration.extrapolate(
                k, np.zeros((rows_prev - rows_k, c_new), dtype), dx1[rows_k:rows_prev, :c_new]
            )
        A[k, :k] = scale * _block_trace(trace_w[:rows_k], dx, m)
        tv = scale * _block_trace(trace_w[:rows_k], dvn, m)
        if tail_v is not None:
            tv += scale * _block_trace(trace_w[rows_k:rows_prev], tail_v, m)
        Av[k, :k] = tv
        if dx2 is not None:
            dx2[:rows_prev, :c_new] = dx1[:rows_prev, :c_new]
        dx1[:rows_k, :c_new] = dx
        dv[:rows_k, :c_new] = dvn
        dv_rows = rows_k
        if tail_v is not None:
            dv[rows_k:rows_prev, :c_new] = tail_v
            dv_rows = rows_prev
        if verbose and (k % max(1, T // 10) == 0 or k == T):
            print(f"[risk] {iteration.name} traces: step {k}/{T}, support prefix "
                  f"{rows_k}, {time.perf_counter() - tic:.1f}s")
    new_state = None
    if keep_state:
        c = m * T
        if k0 < T:  # chains after step T, in coordinates (see the loop's invariants)
            chains = {"dv": (order[:dv_rows], dv[:dv_rows, :c].copy()),
                      "dx1": (order[:rows_k], dx1[:rows_k, :c].copy())}
            if dx2 is not None:
                chains["dx2"] = (order[:rows_prev], dx2[:rows_prev, :c].copy())
        else:
            chains = state["chains"]
        new_state = _chain_state(T, Z, dtype, A, Av, chains)
        if gram is not None and gram.nbytes <= _GRAM_CACHE_BYTES:
            new_state["gram"] = (order[: gram.shape[0]], gram)
        elif state is not None and "gram" in state:
            new_state["gram"] = state["gram"]
    return A, Av, new_state


# largest restricted Gram matrix kept with the chains for a warm-started refit
_GRAM_CACHE_BYTES = 256 * 2**20


def _chain_state(k, Z, dtype, A, Av, chains):
    return {"kind": "chains", "k": k, "m": Z.shape[1], "Z": Z, "dtype": dtype, "A": A.copy(),
            "Av": Av.copy(), "chains": chains}


def _uses_hb(iteration, T):
    return any(iteration.hb(k) != 0.0 for k in range(1, T + 1))


def _block_trace(W, D, m):
    """``[sum(W * D[:, s*m:(s+1)*m]) for s]`` for W (r, m), D (r, m*k)."""
    k = D.shape[1] // m
    if W.shape[0] == 0:
        return np.zeros(k)
    return np.einsum("rm,rkm->k", W, D.reshape(D.shape[0], k, m), dtype=np.float64,
                     optimize=True)


def _maybe_gram(Xs, gram, k, k_first, prefix, m, T, n, cached=None, order=None):
    """Decide once (at the first step with chains, ``k_first``) whether to
    precompute the Gram matrix of a late prefix of columns, using the flop
    model ``primal: 2 n (u + r) c`` against ``gram: 2 r u c`` plus ``n w^2``.
    ``cached = (coordinates, gram)`` from a previous stage is reused when it
    covers the prefix (columns ``order[:w]``)."""
    if gram is not None or k != k_first or T < k_first + 1:
        return gram
    best_w, best_save = 0, 0.0
    for start in range(k_first, T + 1):
        w = int(prefix[start - 1])
        save = 0.0
        for kk in range(start, T + 1):
            r, u, c = int(prefix[kk]), int(prefix[kk - 1]), m * (kk - 1)
            save += 2 * n * (u + r) * c - 2 * r * u * c
        save -= n * w * w
        if save > best_save:
            best_save, best_w = save, w
    if best_w == 0:
        return None
    if cached is not None:
        coords, cached_gram = cached
        position = np.full(max(int(coords.max(initial=-1)), int(order.max())) + 1, -1)
        position[coords] = np.arange(coords.size)
        idx = position[order[:best_w]]
        if np.all(idx >= 0) and cached_gram.dtype == Xs.dtype:
            return cached_gram[np.ix_(idx, idx)]
    check_memory(best_w * best_w * Xs.dtype.itemsize, "the restricted Gram matrix")
    Xw = Xs[:, :best_w]
    return Xw.T @ Xw


# ----------------------------------------------------------------------------
# public functions
# ----------------------------------------------------------------------------


def memory_matrix(design, iteration, coef_path, *, n_probes=10, random_state=None,
                  chain_dtype=None, verbose=0):
    """Memory matrices of a trajectory (outputs and gradient points).

    Parameters
    ----------
    design : Design
        The centred, weighted design of the fit.
    iteration : Iteration
        The iteration object that produced ``coef_path``.
    coef_path : ndarray of shape (n_features, T + 1)
    n_probes : int or None, default=10
        Rademacher probes (Hutchinson); ``None`` for exact traces.
    random_state : int, RandomState instance or None
    chain_dtype : dtype, default=None
        Precision of the Jacobian chains of proximal methods (default: the
        configured ``risk_chain_dtype``, ``"auto"``: float32 with Hutchinson
        probes, the dtype of ``X`` with exact traces).
    verbose : int

    Returns
    -------
    A : ndarray of shape (T + 1, T + 1)
        ``A[t, s] = tr(X~ d x^t / d y^(s))``.
    A_sources : ndarray of shape (T + 1, T + 1)
        Same for the gradient points ``v^t``.
    """
    return _memory_matrices(design, iteration, coef_path, n_probes, random_state, chain_dtype,
                            verbose)[:2]


def _chain_dtype(design, n_probes, chain_dtype=None):
    """Precision of the Jacobian chains: ``chain_dtype``, else the configured
    ``risk_chain_dtype``; ``"auto"`` is float32 with Hutchinson probes (whose
    own relative error, ~1e-2, dwarfs float32 rounding, ~1e-6) and the dtype
    of ``X`` for exact traces; ``None`` is the dtype of ``X``."""
    if chain_dtype is None:
        chain_dtype = get_config().get("risk_chain_dtype")
    if chain_dtype == "auto":
        chain_dtype = np.float32 if n_probes is not None else None
    return np.dtype(chain_dtype or design.dtype)


def _memory_matrices(design, iteration, coef_path, n_probes, random_state, chain_dtype,
                     verbose, state=None, keep_state=False):
    """:func:`memory_matrix`, also returning a state that a longer path of the
    same trajectory continues (``keep_state``; ``None`` when there is nothing
    to continue): the Lanczos process of linear methods with probes, the
    Jacobian chains of proximal methods with probes."""
    T = coef_path.shape[1] - 1
    rng = check_random_state(random_state)
    if T == 0:
        return np.zeros((1, 1)), np.zeros((1, 1)), None
    if hasattr(iteration, "memory_matrix"):  # iterations with their own spectral form
        return (*iteration.memory_matrix(design, T, n_probes=n_probes, random_state=rng),
                None)
    if getattr(iteration, "sampler", None) is not None:
        raise ValueError(
            f"The memory-matrix risk estimate of {iteration.name} with mini-batches is not "
            "implemented; use estimate_risk=False and estimate_loo=True (IACV) instead."
        )
    if iteration.is_linear:
        new_state = None
        if n_probes is None:
            lam, w = _exact_nodes(design)
        else:
            if not (state is not None and state.get("kind") == "lanczos"
                    and state["Z"].shape == (min(design.n_samples, design.n_features),
                                             int(n_probes))):
                state = None
            out = _lanczos_nodes(design, n_probes, rng, depth=T // 2 + 2, verbose=verbose,
                                 check=_lanczos_check(iteration, T), state=state,
                                 keep_state=keep_state)
            lam, w = out[:2]
            new_state = out[2] if keep_state else None
        A, Av = spectral_memory_matrix(iteration, lam, T, weights=w, return_sources=True)
        return A, Av, new_state
    chain_dtype = _chain_dtype(design, n_probes, chain_dtype)
    return _masked_memory(design, iteration, coef_path, n_probes, rng, chain_dtype, verbose,
                          state=state, keep_state=keep_state)


def residual_matrix(design, y_tilde, coef_path):
    """Training residuals ``y~ - X~ x^t`` of every iterate, shape (n, T + 1)."""
    T1 = coef_path.shape[1]
    check_memory(8 * design.n_samples * T1, f"the residual matrix ({design.n_samples} x {T1})")
    F = design.matvec(np.asarray(coef_path, dtype=design.dtype))
    return np.asarray(y_tilde, dtype=np.float64)[:, None] - F


def trajectory_risk(design, y_tilde, iteration, coef_path, *, n_probes=10, random_state=None,
                    chain_dtype=None, fitted=None, verbose=0, _state=None, _keep_state=False):
    """Estimated out-of-sample risk of every iterate of a trajectory.

    fitted : ndarray of shape (n_samples, T + 1), default=None
        ``X~ x^t`` if already known (saves one product with the whole path).

    Returns
    -------
    result : Bunch
        ``risk`` (T+1,), ``risk_matrix`` (T+1, T+1), ``memory_matrix`` (T+1, T+1)
        for the iterates, ``memory_matrix_sources`` for the gradient points.
    """
    tic = time.perf_counter()
    A, Av, state = _memory_matrices(design, iteration, coef_path, n_probes, random_state,
                                    chain_dtype, verbose, state=_state, keep_state=_keep_state)
    if fitted is None:
        F = residual_matrix(design, y_tilde, coef_path)
    else:  # X~ x^t recorded by the fit loop
        F = np.asarray(y_tilde, dtype=np.float64)[:, None] - fitted
    has_momentum = any(iteration.beta(k) != 0.0 for k in range(1, coef_path.shape[1]))
    risk, G = risk_from_memory(F, A, design.n_eff, design.fit_intercept,
                               A_sources=Av if has_momentum else None, iteration=iteration)
    if verbose:
        print(f"[risk] done in {time.perf_counter() - tic:.1f}s")
    return Bunch(risk=risk, risk_matrix=G, memory_matrix=A, memory_matrix_sources=Av,
                 chain_state=state)


def risk_path(estimator, X, y, sample_weight=None):
    """Estimated out-of-sample risk path of a fitted trajectory estimator.

    Recomputes the estimate from ``estimator.coef_path_`` on the training
    data ``(X, y)`` with the estimator's ``n_probes`` and ``random_state``.

    Parameters
    ----------
    estimator : fitted TrajectoryLasso or IterativeRidge
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    risk : ndarray of shape (n_iter_ + 1,)
    """
    from sklearn.utils.validation import check_is_fitted, validate_data

    from ._design import Design
    from ._validation import check_sample_weight

    check_is_fitted(estimator)
    X, y = validate_data(estimator, X, y, accept_sparse=("csr", "csc"),
                         dtype=[np.float64, np.float32], y_numeric=True, reset=False)
    sw = check_sample_weight(sample_weight, X, X.dtype)
    design = Design(X, sw, estimator.fit_intercept)
    _, y_tilde = design.center_y(np.asarray(y, dtype=X.dtype))
    iteration = estimator._make_iteration(estimator.step_size_, design)
    return trajectory_risk(design, y_tilde, iteration, estimator.coef_path_,
                           n_probes=estimator.n_probes,
                           random_state=estimator.random_state).risk


def _estimator_risk(est, design, y_tilde, iteration):
    """Fill ``risk_path_`` and friends on a fitted estimator."""
    # a warm-started fit continues the Jacobian chains of the previous one
    keep = bool(getattr(est, "warm_start", False))
    res = trajectory_risk(design, y_tilde, iteration, est.coef_path_, n_probes=est.n_probes,
                          random_state=est.random_state, verbose=est.verbose,
                          fitted=getattr(est, "_fitted_path", None),
                          _state=getattr(est, "_risk_state", None), _keep_state=keep)
    est._risk_state = res.chain_state
    est.risk_path_ = res.risk
    est.risk_matrix_ = res.risk_matrix
    est.memory_matrix_ = res.memory_matrix
