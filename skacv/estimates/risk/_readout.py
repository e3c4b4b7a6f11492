"""The readout of the memory-matrix estimates: from traces to the risk.

Bellec & Tan (2024). For iterates ``x^0..x^T`` produced from gradient
points ("sources") ``v^0..v^{T-1}``,

* ``F`` (n, T+1): training residuals ``y~ - X~ x^t``;
* ``A`` (T+1, T+1), strictly lower triangular: ``A[t, s] = tr(X~ dx^t/dy^(s))``
  where the copy ``y^(s)`` of the response enters only through the gradient
  at ``v^s`` (step ``s + 1``); ``A_src`` the same for the sources;
* corrected residuals of the sources ``R_v = F_v (I - A_src/n - c I/n)^{-T}``
  and of the outputs ``R_x = (F_x + R_v (A/n)^T) / (1 - c/n)``, ``c = 1``
  with an intercept (the mean of every iterate's own residual, a diagonal
  entry of the memory matrix), else ``0``;
* the estimate ``R_x^T R_x / n`` of ``E[(y_new - x_new^T x^t - b0^t)(...s)]``.

With sample weights every ``n`` is ``n_eff = sum(w)`` and ``X~``, ``y~``
carry ``sqrt(w)`` (repeated rows). The robust / mini-batch estimate of Tan
& Bellec (2024) is :func:`risk_from_sources`.
"""

import numpy as np
import scipy.sparse as sp
from scipy.linalg import LinAlgError, solve_triangular
from scipy.linalg.blas import dtrmm
from scipy.linalg.lapack import dtrtri
from sklearn.utils import Bunch

from ..._config import check_memory
from ..._trace import taken
from ...linalg._copies import scratch


def _intercept_term(fit_intercept, n_eff):
    """``1`` with an intercept (its degree of freedom), else ``0``."""
    if fit_intercept and n_eff <= 1:
        raise ValueError(
            "Estimating the risk with fit_intercept=True needs more than one "
            f"sample; got n_samples = {n_eff:g} (with sample weights, their sum: "
            "frequency weights)."
        )
    return 1.0 if fit_intercept else 0.0


def _extrapolate_columns(iteration, M):
    """Columns of the sources from columns of the outputs (last axis = t)."""
    out = np.array(M, dtype=np.float64, copy=True)
    for k in range(1, M.shape[-1]):
        if iteration.extrapolates(k, first=k):
            out[..., k] = iteration.extrapolate(k, M[..., k], M[..., k - 1])
    return out


def source_residuals(design, iteration, F, coef_path):
    """Training residuals ``y~ - X~ v^t`` of the gradient points, (n, T + 1):
    combinations of ``F``'s columns, plus for a clipped extrapolation a
    correction with the few clipped coordinates (:func:`subtract_correction`)."""
    taken("source_residuals")
    Fv = _extrapolate_columns(iteration, F)
    coords, steps, values = [], [], []
    for t in range(1, coef_path.shape[1]):
        cols = iteration.extrapolation_columns(t, coef_path[:, t], coef_path[:, t - 1])
        if cols is not None and cols[0].size:
            coords.append(cols[0])
            steps.append(np.full(cols[0].size, t))
            values.append(cols[1])
    if coords:
        subtract_correction(design, Fv, np.concatenate(coords), np.concatenate(steps),
                            np.concatenate(values))
    return Fv


def subtract_correction(design, out, coords, steps, values):
    """``out -= X~ C`` for the sparse ``C`` (n_features, k) with ``values`` at
    ``(coords, steps)``: ``n nnz(C)`` flops, the columns it reads gathered by
    blocks of ``correction_block_bytes`` (the dense product over every clipped
    column would cost ``n |J| k``, ``|J|`` near the support on a long path)."""
    n = design.n_samples
    features, inv = np.unique(coords, return_inverse=True)
    values = np.asarray(values, dtype=np.float64)
    policy = design.policy
    block = max(1, policy.correction_block_bytes // (8 * max(n, 1)))
    for b0 in range(0, features.size, block):
        width = min(block, features.size - b0)
        in_block = (inv >= b0) & (inv < b0 + width)
        cols, local = np.unique(steps[in_block], return_inverse=True)
        C = sp.csr_array((values[in_block], (local, inv[in_block] - b0)),
                         shape=(cols.size, width))
        # the block's columns as contiguous rows of X~^T, what the CSR product
        # reads (in scratch memory: a block is gathered at every stage)
        idx = features[b0:b0 + width]
        Xc = design.columns(idx, out=None if design.sparse
                            else scratch((n, width), design.dtype, policy, "correction"))
        Xt = scratch((width, n), np.float64, policy, "correction_t")
        np.copyto(Xt, Xc.T)
        del Xc
        out[:, cols] -= (C @ Xt).T
        del Xt  # the scratch free for the next block


def source_points(iteration, coef_path):
    """The gradient points ``v^t`` (shape of ``coef_path``): column ``t`` the
    extrapolation of step ``t`` (clipped if so set), column 0 the start."""
    taken("source_points")
    B = np.asarray(coef_path, dtype=np.float64)
    V = B.copy()
    for t in range(1, B.shape[1]):
        V[:, t] = iteration.extrapolate_iterate(t, B[:, t], B[:, t - 1])
    return V


def _correction(A_sources, n_eff, c, out=None):
    """``(1 - c/n) I - tril(A_src, -1) / n``, whose inverse corrects the
    residuals, in its lower triangle (what the triangular solves read, LAPACK's
    ``trtrs``, ``trtri``): one pass over ``A_src`` instead of copies of ``(T +
    1)^2`` matrices; ``out``: written there (``A_src`` itself: in place)."""
    L = np.divide(A_sources, -n_eff, dtype=np.float64, out=out)  # -(A/n): one pass
    np.fill_diagonal(L, 1.0 - c / n_eff)
    return L


def _inverse(L, in_place=False):
    """``L^{-1}`` (lower triangular) of the lower triangle of ``L``, which it
    overwrites: LAPACK's ``trtri``, a third of the flops of the triangular
    solves with the identity; ``in_place``: in ``L``'s memory (C order), its
    upper triangle zeroed, instead of a copy."""
    U, info = dtrtri(L.T, lower=0, overwrite_c=1)  # L^T: upper, in Fortran order
    if info > 0:
        raise LinAlgError(f"singular matrix: resolution failed at diagonal {info - 1}")
    L_inv = U.T
    if not (in_place and np.may_share_memory(L_inv, L)):
        return np.tril(L_inv)
    for i in range(L_inv.shape[0] - 1):  # a row at a time: no (T + 1)^2 mask
        L_inv[i, i + 1:] = 0.0
    return L_inv


def _times_triangular(B, tri, lower, alpha=1.0):
    """``alpha B tri`` for a triangular ``tri`` whose other triangle is not
    read (BLAS ``trmm``: half a general product's flops); Fortran order."""
    if tri.flags.c_contiguous:  # its transpose in Fortran order: no copy
        return dtrmm(alpha, tri.T, B, side=1, lower=int(not lower), trans_a=1)
    return dtrmm(alpha, np.asfortranarray(tri), B, side=1, lower=int(lower))


def _sources_term(A, L_inv, n_eff):
    """``L^{-T} (A/n)^T`` (upper triangular) from ``L^{-1}`` and the strictly
    lower triangle of ``A``."""
    return _times_triangular(np.tril(A, -1), L_inv, lower=True, alpha=1.0 / n_eff).T


def _extrapolate_rows(iteration, W):
    """``E W`` for the (upper bidiagonal) ``E`` of :func:`_extrapolate_columns`
    (``F E`` the sources' residuals): row ``j`` is ``E[j, j] W[j] + E[j, j +
    1] W[j + 1]``, ``O(T^2)`` flops instead of a product's ``O(T^3)``."""
    T1 = W.shape[0]
    alt = np.zeros((2, T1))  # column k of alt E: (E[k, k], E[k - 1, k]), swapped for odd k
    alt[0, ::2] = alt[1, 1::2] = 1.0
    alt = _extrapolate_columns(iteration, alt)
    odd = np.arange(T1) % 2 == 1
    diag, upper = np.where(odd, alt[1], alt[0]), np.where(odd, alt[0], alt[1])
    out = W * diag[:, None]
    out[:-1] += W[1:] * upper[1:, None]
    return out


def residual_correction(A, n_eff, fit_intercept=False, A_sources=None, iteration=None,
                        return_inverse=False):
    """The lower-triangular ``K`` (T + 1, T + 1) with ``R_x = F K^T``: ``K =
    (I (1 - c/n) - A/n)^{-1}`` without extrapolation, else ``K^T = (I + E
    L^{-T} (A/n)^T) / (1 - c/n)``, ``F E`` the sources' residuals and ``L``
    the correction of their memory matrix. Parameters as :func:`risk_from_memory`;
    ``return_inverse``: also ``L^{-1}`` (``K`` itself without extrapolation)."""
    A = np.asarray(A, dtype=np.float64)
    T1 = A.shape[0]
    c = 1.0 if fit_intercept else 0.0
    if A_sources is None:
        K = _inverse(_correction(A, n_eff, c))
        return (K, K) if return_inverse else K
    A_sources = np.asarray(A_sources, dtype=np.float64)[:T1, :T1]
    L_inv = _inverse(_correction(A_sources, n_eff, c))
    KT = _extrapolate_rows(iteration, _sources_term(A, L_inv, n_eff))
    KT[np.diag_indices(T1)] += 1.0
    K = (KT / (1.0 - c / n_eff)).T
    return (K, L_inv) if return_inverse else K


def risk_from_memory(F, A, n_eff, fit_intercept=False, A_sources=None, iteration=None,
                     return_residuals=False, F_sources=None, matrix=True, policy=None):
    """Memory-matrix risk estimate ``(risk, G)`` from the training residuals
    ``F`` (n_samples, T + 1) of the outputs and the memory matrix ``A`` (T + 1,
    T + 1) of the outputs; ``A_sources`` that of the gradient points (``None``:
    no extrapolation) with the ``iteration`` that forms their residuals, or
    their residuals ``F_sources`` when they are not combinations of ``F``'s (a
    clipped extrapolation: ``R_x = (F + F_sources L^{-T} (A/n)^T) / (1 -
    c/n)``, and no ``K``). ``return_residuals``: also ``R_x = F K^T``, ``K``
    (:func:`residual_correction`) and the l1 norms of the rows of ``L^{-1}``
    (the inverse of the sources' correction, or ``K`` without extrapolation).
    ``risk`` (T + 1,) estimates the out-of-sample risk of every output, ``G``
    (T + 1, T + 1) the cross terms ``E[(y - yhat_t)(y - yhat_s)]`` (``None``
    unless ``matrix``: ``O(n T)`` flops for the risk instead of ``O(n T^2)``).
    ``policy``: the speed policy, whose ``readout_thin_products`` forms the
    clipped residuals' correction from the right where ``n < T + 1``."""
    taken("risk_from_memory")
    F = np.asarray(F, dtype=np.float64)
    T1 = F.shape[1]
    _intercept_term(fit_intercept, n_eff)  # refuses one sample with an intercept
    A = np.asarray(A, dtype=np.float64)[:T1, :T1]
    if F_sources is not None:
        c = 1.0 if fit_intercept else 0.0
        L_inv = _inverse(_correction(np.asarray(A_sources, dtype=np.float64)[:T1, :T1],
                                     n_eff, c))
        K = None
        Fv = np.asarray(F_sources, dtype=np.float64)
        if Fv.shape[0] < T1 and _thin_products(policy):
            # F_v L^{-T} tril(A, -1)^T / n: two products of n x (T + 1) with
            # triangular matrices (2 n T^2 flops) instead of T^3 + n T^2
            taken("thin_readout", rows=Fv.shape[0])
            R_x = _thin_sources_term(Fv, L_inv, A, n_eff)
        else:
            R_x = _times_triangular(Fv, _sources_term(A, L_inv, n_eff), lower=False)
        R_x += F
        R_x /= 1.0 - c / n_eff
    else:
        K, L_inv = residual_correction(A, n_eff, fit_intercept, A_sources, iteration,
                                       return_inverse=True)
        R_x = _times_triangular(F, K.T, lower=False)
    if matrix:
        G = R_x.T @ R_x / n_eff
        risk = np.diag(G).copy()
    else:
        G, risk = None, np.einsum("it,it->t", R_x, R_x) / n_eff
    if return_residuals:
        return risk, G, R_x, K, _row_l1(L_inv)
    return risk, G


class ResidualProducts(Bunch):
    """:func:`residual_products`' Bunch, whose products by ``C`` (``O(p^2 T)``
    flops), ``XF``, ``XFv`` and the residuals' inner products ``FF``, ``FFv``,
    ``FvFv`` (``O(p T^2)``) are formed when first read: the readout reads them
    only on a path shorter than the basis (else ``Phi``, ``M``), the
    debiasing statistics only there too (else ``MGam``)."""

    def __missing__(self, key):
        if key not in _RECIPES or "_B" not in self or ("v" in key and "_Bv" not in self):
            raise KeyError(key)
        M, (left, right) = self.M, _RECIPES[key]
        if key.startswith("_C"):
            value = M[1:, 1:] @ self[right]
        elif key.startswith("XF"):
            value = M[1:, :1] - self[right]
        else:
            value = _cross(M, self[left], self["_" + right[2:]], self[right])
        self[key] = value
        return value


#: how :class:`ResidualProducts` forms each lazy entry from the others
_RECIPES = {"_CB": (None, "_B"), "_CBv": (None, "_Bv"), "XF": (None, "_CB"),
            "XFv": (None, "_CBv"), "FF": ("_B", "_CB"), "FFv": ("_B", "_CBv"),
            "FvFv": ("_Bv", "_CBv")}


def _cross(M, B1, B2, CB2):
    """``(y 1^T - X B1)^T (y 1^T - X B2)`` from the basis ``M`` and ``C B2``."""
    c, yy = M[1:, 0], float(M[0, 0])
    return (yy - (c @ B1)[:, None] - (c @ B2)[None, :]) + B1.T @ CB2


def residual_products(design, y_tilde, coef_path, sources=None):
    """Inner products of the residuals ``F = y~ 1^T - X~ B`` and ``F_v`` (of
    ``sources``) in the features' space: ``O(p^2 T + p T^2)`` flops instead of
    ``O(n T^2)``. A Bunch of ``FF`` (T + 1, T + 1), ``XF`` (n_features, T + 1)
    (and ``FFv``, ``FvFv``, ``XFv`` alike), formed when read, and the
    residuals in the basis of :func:`residual_basis`: ``M``, ``Phi``
    (``Phiv``), ``FF = Phi^T M Phi``."""
    B = np.asarray(coef_path, dtype=np.float64)
    out = ResidualProducts(M=residual_basis(design, y_tilde), _B=B,
                           Phi=np.vstack([np.ones((1, B.shape[1])), -B]))
    if sources is not None:
        Bv = np.asarray(sources, dtype=np.float64)
        out.update(_Bv=Bv, Phiv=np.vstack([np.ones((1, Bv.shape[1])), -Bv]))
    return out


def _clipped(products):
    """Whether ``products`` has the sources' own residuals (a clipped
    extrapolation)."""
    return "Phiv" in products or "FvFv" in products


def residual_basis(design, y_tilde):
    """``M = [y~, X~]^T [y~, X~]`` (p + 1, p + 1): ``y~ - X~ b`` has the
    coefficients ``[1; -b]`` in the basis ``[y~, X~]``."""
    C = design.gram(side="features") * design.n_eff
    y = np.asarray(y_tilde, dtype=np.float64)
    c = np.asarray(design.rmatvec(y), dtype=np.float64).ravel()
    return np.block([[np.array([[y @ y]]), c[None, :]], [c[:, None], C]])


def risk_from_products(products, A, n_eff, fit_intercept=False, A_sources=None,
                       iteration=None, matrix=True, policy=None):
    """:func:`risk_from_memory` from :func:`residual_products`: ``R = F P + F_v
    Q`` (``Q`` only for a clipped extrapolation), ``G = R^T R / n`` (``None``
    unless ``matrix``). Returns ``(risk, G, P, Q, K, l1)`` (``K = P^T``,
    ``None`` with sources; ``P``, ``Q`` ``None`` with sources in the basis
    under the speed ``policy``'s ``readout_thin_products``:
    :func:`_momentum_in_basis`, whose correction takes the policy's scratch
    memory; ``l1`` as :func:`risk_from_memory`'s). Keeps ``MGam`` in
    ``products``: ``M Gam`` for ``Gam = Phi P + Phiv Q``
    (``None`` on a path shorter than the basis), whose rows after the first
    are ``X~^T R`` and whose products with ``Phi`` ``<F_t, R_t>``.

    Without extrapolation, in the basis, for the risk alone and a
    nonnegative ``A`` (the correction's inverse is nonnegative then, a finite
    Neumann series: its rows' l1 norms are its row sums), ``Gam^T = L^{-1}
    Phi^T`` by triangular solves: neither ``L^{-1}`` nor ``P`` (``None``)."""
    if (not matrix and A_sources is None and _in_basis(products)
            and np.asarray(A).min() >= 0):
        c = _intercept_term(fit_intercept, n_eff)
        T1 = _path_length(products)
        L = _correction(np.asarray(A, dtype=np.float64)[:T1, :T1], n_eff, c)
        Gam = solve_triangular(L, products.Phi.T, lower=True, check_finite=False).T
        products["MGam"] = MGam = products.M @ Gam
        risk = np.einsum("it,it->t", Gam, MGam) / n_eff
        return risk, None, None, None, None, solve_triangular(L, np.ones(T1), lower=True,
                                                              check_finite=False)
    if A_sources is not None and _in_basis(products) and _thin_products(policy):
        return _momentum_in_basis(products, A, n_eff, fit_intercept, A_sources, iteration,
                                  matrix, policy)
    P, Q, L_inv = _correction_columns(products, A, n_eff, fit_intercept, A_sources, iteration)
    G, products["MGam"] = _residual_gram(products, P, Q, diagonal=not matrix, upper=True,
                                         keep=True)
    G = G / n_eff
    K = P.T if Q is None else None
    if not matrix:
        return G, None, P, Q, K, _row_l1(L_inv)
    G = (G + G.T) / 2.0  # symmetric up to rounding
    return np.diag(G).copy(), G, P, Q, K, _row_l1(L_inv)


def _momentum_in_basis(products, A, n_eff, fit_intercept, A_sources, iteration, matrix,
                       policy=None):
    """:func:`risk_from_products` with extrapolation, in the basis: ``Gam =
    (Phi + Phi_v L^{-T} tril(A, -1)^T / n) / s``, ``Phi_v`` the sources'
    coefficients (``Phi E`` for a plain extrapolation), by two products of
    ``(p + 1) x (T + 1)`` with triangular matrices: ``O(p T^2)`` flops
    instead of the ``O(T^3)`` of ``P`` or ``Q`` (not formed: ``None``) and
    no other ``(T + 1)^2`` array than ``L^{-1}``, whose rows' l1 norms the
    reliability reads (in the speed ``policy``'s scratch memory, which the
    stages of a search share: :func:`~skacv.linalg._copies.scratch`)."""
    taken("thin_readout", rows=products.Phi.shape[0])
    T1 = _path_length(products)
    c = _intercept_term(fit_intercept, n_eff)
    buf = None if policy is None else scratch((T1, T1), np.float64, policy, "readout")
    L_inv = _inverse(_correction(np.asarray(A_sources, dtype=np.float64)[:T1, :T1], n_eff, c,
                                 out=buf), in_place=True)
    Phiv = (products.Phiv if _clipped(products)
            else _extrapolate_columns(iteration, products.Phi))
    Gam = _thin_sources_term(Phiv, L_inv, np.asarray(A, dtype=np.float64)[:T1, :T1], n_eff)
    Gam += products.Phi
    Gam /= 1.0 - c / n_eff
    products["MGam"] = MGam = products.M @ Gam
    l1 = _row_l1(L_inv, overwrite=True)  # L^{-1} is read no more
    if not matrix:
        return np.einsum("it,it->t", Gam, MGam) / n_eff, None, None, None, None, l1
    G = Gam.T @ MGam / n_eff
    G = (G + G.T) / 2.0  # symmetric up to rounding
    return np.diag(G).copy(), G, None, None, None, l1


def _thin_products(policy):
    """The speed ``policy``'s ``readout_thin_products`` (``None``: the default, on)."""
    return policy is None or policy.readout_thin_products


def _thin_sources_term(Bv, L_inv, A, n_eff):
    """``B_v L^{-T} tril(A, -1)^T / n``, the sources' part of the corrected
    residuals (``B_v`` their residuals, a row per sample) or of their
    coefficients in the basis (``Phi_v``): two products of ``B_v``'s rows
    with triangular matrices (``2 rows T^2`` flops), no ``(T + 1)^2``
    product formed."""
    out = _times_strictly_lower_t(_times_triangular(Bv, L_inv.T, lower=False), A)
    out /= n_eff
    return out


def _times_strictly_lower_t(B, A):
    """``B tril(A, -1)^T`` (BLAS ``trmm`` with a unit diagonal: neither ``A``'s
    diagonal nor its upper triangle is read, nor copied)."""
    A = np.ascontiguousarray(A)  # A^T: upper, in Fortran order
    out = dtrmm(1.0, A.T, B, side=1, lower=0, trans_a=0, diag=1)  # B (I + tril(A, -1)^T)
    out -= B
    return out


def _row_l1(L_inv, overwrite=False):
    """The l1 norms of the rows of ``L_inv`` (``overwrite``: its absolute
    values written over it, no copy)."""
    return np.abs(L_inv, out=L_inv if overwrite else None).sum(axis=1)


def _in_basis(products):
    """Whether the readout goes through the basis ``Phi`` (smaller than the path)."""
    return "Phi" in products and products.Phi.shape[0] < products.Phi.shape[1]


def risk_at_iterates(products, A, n_eff, fit_intercept=False, A_sources=None,
                     iteration=None, iterates=None, overwrite=False):
    """The risk of :func:`risk_from_products` at ``iterates`` ``S`` only
    (``None``: all), shape (|S|,): ``risk_from_products(...)[0][S]`` up to
    rounding, in ``O(T^2 |S|)`` flops by triangular solves instead of
    ``O(T^3)``; ``overwrite``: the correction is formed in the matrix it
    corrects (``A_sources``, or ``A`` without)."""
    P, Q, _ = _correction_columns(products, A, n_eff, fit_intercept, A_sources, iteration,
                                  np.arange(_path_length(products)) if iterates is None
                                  else iterates, overwrite)
    return _residual_gram(products, P, Q, diagonal=True) / n_eff


def risk_sensitivity(products, A, n_eff, fit_intercept=False, iterates=None, MGam=None):
    """The first order of :func:`risk_at_iterates` in ``A`` without
    extrapolation, at ``iterates`` ``S``: ``(P, W)`` of shape (T + 1, |S|),
    the change of ``risk_t`` under a change ``dA`` of the strictly lower
    triangle being ``2 P[:, t]^T dA W[:, t] / n^2``. With ``L`` the
    correction of ``A``, ``P = L^{-T} E_S`` (``R = F P``) and ``W = L^{-1}
    F^T R``: ``dP = L^{-T} dA^T L^{-T} / n`` in ``risk_t = P_t^T F^T F P_t /
    n``. Two triangular solves and one product with the residuals' inner
    products, whatever the number of changes read; ``MGam``: ``M Gam`` of the
    readout of the same ``A`` (:func:`risk_from_products` keeps it), whose
    columns ``S`` are ``M Phi P``."""
    T1 = _path_length(products)
    c = _intercept_term(fit_intercept, n_eff)
    L = _correction(np.asarray(A, dtype=np.float64)[:T1, :T1], n_eff, c)
    S = np.asarray(iterates)
    unit = np.zeros((T1, S.size))
    unit[S, np.arange(S.size)] = 1.0
    P = solve_triangular(L, unit, lower=True, trans="T", check_finite=False)
    if _in_basis(products):  # F^T F P = Phi^T M Phi P
        FFP = products.Phi.T @ (products.M @ (products.Phi @ P) if MGam is None
                                else MGam[:, S])
    else:
        FFP = products.FF @ P
    return P, solve_triangular(L, FFP, lower=True, check_finite=False)


def _correction_columns(products, A, n_eff, fit_intercept, A_sources, iteration,
                        iterates=None, overwrite=False):
    """The columns ``iterates`` of ``P`` and ``Q`` (``R = F P + F_v Q``) and,
    for all of them (``iterates=None``: upper-triangular ``P``, ``Q``, from
    ``L^{-1}`` by ``trtri``), ``L^{-1}`` (else ``None``).

    With ``L`` the correction of ``A_sources`` and ``s = 1 - c/n``, column
    ``t`` of ``Q`` is ``L^{-T} (A/n)^T e_t / s`` (clipped extrapolation, ``P =
    I / s``); with a plain extrapolation ``P``'s is ``(e_t + E L^{-T}
    (A/n)^T e_t) / s``; without momentum ``L_A^{-T} e_t``.
    """
    T1 = _path_length(products)
    c = _intercept_term(fit_intercept, n_eff)
    scale = 1.0 - c / n_eff
    A = np.asarray(A, dtype=np.float64)[:T1, :T1]
    if iterates is None:
        if A_sources is None:
            L_inv = _inverse(_correction(A, n_eff, c))
            return L_inv.T, None, L_inv
        L_inv = _inverse(_correction(np.asarray(A_sources, dtype=np.float64)[:T1, :T1],
                                     n_eff, c))
        W = _sources_term(A, L_inv, n_eff) / scale
        if _clipped(products):
            return np.eye(T1) / scale, W, L_inv
        P = _extrapolate_rows(iteration, W)
        P[np.diag_indices(T1)] += 1.0 / scale
        return P, None, L_inv
    S = np.asarray(iterates)
    unit = np.zeros((T1, S.size))
    unit[S, np.arange(S.size)] = 1.0
    if A_sources is None:
        P = solve_triangular(_correction(A, n_eff, c, A if overwrite else None), unit,
                             lower=True, trans="T", check_finite=False)
        return P, None, None
    A_sources = np.asarray(A_sources, dtype=np.float64)[:T1, :T1]
    in_place = overwrite and not np.may_share_memory(A, A_sources)  # A is read below
    L = _correction(A_sources, n_eff, c, A_sources if in_place else None)
    A_low = A[S]  # rows S of tril(A, -1)
    A_low[np.arange(T1)[None, :] >= S[:, None]] = 0.0
    W = solve_triangular(L, A_low.T / n_eff, lower=True, trans="T",
                         check_finite=False) / scale
    if _clipped(products):
        return unit / scale, W, None
    return unit / scale + _extrapolate_rows(iteration, W), None, None


def _path_length(products):
    """``T + 1`` of the inner products (without forming a lazy ``FF``)."""
    return products.Phi.shape[1] if "Phi" in products else products.FF.shape[0]


def _residual_gram(products, P, Q, diagonal=False, upper=False, keep=False):
    """``R^T R`` (or its diagonal) for ``R = F P + F_v Q`` from the inner
    products, or from their basis when it is smaller than the path;
    ``upper``: ``P`` and ``Q`` are upper triangular (``trmm``); ``keep``:
    also ``M Gam`` (basis), else ``None``."""
    def times(B, C):
        return _times_triangular(B, C, lower=False) if upper else B @ C
    MGam = None
    if _in_basis(products):
        Gam = times(products.Phi, P) if Q is None else (times(products.Phi, P)
                                                       + times(products.Phiv, Q))
        MGam = products.M @ Gam
        left, right = [Gam], [MGam]
    else:
        left, right = [P], [times(products.FF, P)]
        if Q is not None:
            right[0] = right[0] + times(products.FFv, Q)
            left.append(Q)
            right.append(times(products.FFv.T, P) + times(products.FvFv, Q))
    if diagonal:
        out = sum(np.einsum("tS,tS->S", a, b) for a, b in zip(left, right, strict=True))
    else:
        out = sum(a.T @ b for a, b in zip(left, right, strict=True))
    return (out, MGam) if keep else out


def risk_from_sources(F, Psi, A, K, n_eff, trace_d=None, fit_intercept=False):
    """Robust / mini-batch risk estimate ``(risk, G, W)`` (Tan & Bellec 2024).

    With ``K^ = diag(tr D_t) - K`` and ``W = K^{-1} A`` (lower-triangular),

        R_t = F_t + sum_{s<t} W[t, s] Psi_s,    risk_t = ||R_t||^2 / n_eff,

    which estimates ``||Sigma^{1/2}(b^t - beta)||^2 + ||eps||^2 / n``. ``F``
    (n, T + 1): training residuals; ``Psi`` (n, T + 1): column ``s`` the
    gradient residual ``sqrt(w) psi(r^s)`` on step ``s + 1``'s batch (zero
    elsewhere); ``A``, ``K``: the traces of
    :func:`skacv.estimates.risk._curvature.curvature_memory_matrices`;
    ``trace_d``: ``tr D_t = sum_i w_i psi'(r_i^t)`` (``None``: ``n_eff``).
    For the square loss with full batches (``Psi = F``, ``K = A``) this is
    :func:`risk_from_memory`; an intercept by centring is the diagonal source
    ``F_t`` (``fit_intercept``, ``W``'s diagonal).
    """
    F = np.asarray(F, dtype=np.float64)
    T1 = F.shape[1]
    c = _intercept_term(fit_intercept, n_eff)
    trace_d = np.full(T1, float(n_eff)) if trace_d is None else np.asarray(trace_d, float)
    diag = trace_d[:T1] - c
    # no inlier at iterate t (tr D_t = 0): nothing to correct there
    safe = np.where(diag > 0, diag, 1.0)
    Khat = np.diag(safe) - np.tril(np.asarray(K, dtype=np.float64)[:T1, :T1], -1)
    rhs = np.tril(np.asarray(A, dtype=np.float64)[:T1, :T1], -1) + c * np.eye(T1)
    rhs[diag <= 0] = 0.0
    W = solve_triangular(Khat, rhs, lower=True, check_finite=False)
    R = F + np.asarray(Psi, dtype=np.float64) @ np.tril(W, -1).T
    if c:
        R += F * np.diag(W)
    G = R.T @ R / n_eff
    return np.diag(G).copy(), G, W


def residual_matrix(design, y_tilde, coef_path, fitted=None):
    """Training residuals ``y~ - X~ x^t`` of every iterate, shape (n, T + 1), from
    ``fitted`` (``X~ x^t``, the fit loop's) when given."""
    if fitted is None:
        taken("residual_matrix")
        T1 = coef_path.shape[1]
        check_memory(8 * design.n_samples * T1, f"the residual matrix ({design.n_samples} x {T1})")
        fitted = design.matvec(np.asarray(coef_path, dtype=design.dtype))
    return np.asarray(y_tilde, dtype=np.float64)[:, None] - fitted

