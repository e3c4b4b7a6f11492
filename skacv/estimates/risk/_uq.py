"""Uncertainty quantification along a trajectory (Bellec & Tan 2024).

Debiased iterates, confidence intervals for the coefficients, the noise
level and the excess risk of every iterate, from the quantities of the
memory-matrix risk estimate (:mod:`skacv.estimates.risk._estimate`): the centred, weighted
design ``X~`` (n, p), the corrected residuals ``R = F K^T`` (n, T+1) and the
risk matrix ``G = R^T R / n`` (``n`` is ``n_eff = sum(sample_weight)``).
The fit keeps

    W = X~^T R / n                      (p, T+1), like ``coef_path_``
    s_t = (2 (A_eff G)_tt - p G_tt) / n  (T+1,)

with ``A_eff = n (I - K^{-1})``: the memory matrix with the intercept's
diagonal (``A + I`` with an intercept) and the extrapolation of momentum
methods folded in, so that ``F = R (I - A_eff / n)^T``. Hence
``(A_eff G)_tt = n G_tt - <F_t, R_t>``, which needs neither ``K`` nor the
sources: it holds as well for a clipped extrapolation, whose sources are
not combinations of the outputs (no ``K`` exists there).

For a precision matrix ``Omega`` (the inverse covariance of the features,
``Sigma^{-1}``):

    debiased iterate   b^{t,deb} = b^t + Omega W[:, t]
                       ~ beta + N(0, G_tt Omega / n) coordinate-wise
    interval           b^{t,deb}_j -/+ z_{(1+level)/2} sqrt(G_tt Omega_jj / n)
    excess risk        N_t = W_t^T Omega W_t + s_t
                       ~ (b^t - beta)^T Sigma (b^t - beta)
    noise variance     sigma^2_t = G_tt - N_t

``N_t`` is the diagonal of Bellec & Tan's noise-free error matrix
``Q [F^T X~ Omega X~^T F + A F^T F + F^T F A^T - p F^T F] Q^T / n^2``
(``Q = (I - A_eff/n)^{-1}``; ``Q`` commutes with ``A_eff``, so the bracket
collapses to ``W^T Omega W + (A_eff G + G A_eff^T) / n - p G / n``). At
``t = 0`` without intercept and with ``Omega = I``,
``sigma^2_0 = ((n + p) ||y||^2 - ||X^T y||^2) / n^2`` (Dicker 2014).

``G`` needs no ``Sigma``; everything else does (a change of coordinates
``X -> X Sigma^{-1/2}`` leaves ``F`` and ``A`` unchanged but not ``W``).

``precision="empirical"`` (``n > p``): with the inverse *sample* covariance
``Omega^ = (X~^T X~ / n)^{-1}`` the debiasing needs no correction at all,
``b^t + Omega^ X~^T (y~ - X~ b^t) / n = b_ls`` (the least-squares fit) for
every ``t``, and the degrees-of-freedom correction above would be wrong
(it assumes ``Omega`` independent of the rows: plugging ``Omega^`` into it
gave 95 % intervals covering 1.00 at the first iterates and 0.89 later). The
exact answer is the classical one: ``b_ls -/+ t_{n - p - c} sqrt(s^2
Omega^_jj / n)`` with ``s^2 = ||y~ - X~ b_ls||^2 / (n - p - c)`` (``c = 1``
with an intercept), which covers exactly at ``level`` under Gaussian noise
for any design, and ``s^2`` is every iterate's noise variance
(:func:`least_squares_statistics`).
"""

import dataclasses
import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from scipy import linalg
from scipy.stats import norm
from scipy.stats import t as student_t
from sklearn.exceptions import NotFittedError
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ..._config import check_memory
from ...exceptions import UnreliableEstimateWarning
from ...utils._parallel import factorization_blas
from ...utils._validation import join_options, user_stacklevel

# ----------------------------------------------------------------------------
# the mathematics (pure functions)
# ----------------------------------------------------------------------------


def debias_statistics(design, corrected_residuals, residuals, risk_matrix, target=None,
                      images=None):
    """What the fit keeps for the debiasing: ``W`` and ``s`` (module docstring).

    ``corrected_residuals`` ``R = F K^T`` and ``residuals`` ``F``, shape
    (n_samples, T + 1); ``risk_matrix``: ``G`` or its diagonal; ``target``:
    ``y~`` for ``precision="empirical"``; ``images``: ``(X~^T F, K)`` when the
    fit loop computed ``X~^T F``, so that ``X~^T R = (X~^T F) K^T`` costs ``p
    T^2`` instead of ``n p T``. Returns a :class:`DebiasStatistics`."""
    n, p = design.n_eff, design.n_features
    T1 = corrected_residuals.shape[1]
    check_memory(8 * p * T1, f"the debiasing scores ({p} x {T1})",
                 "Lower max_iter or set estimate_risk=False. ")
    if images is not None:
        XF, K = images
        W = np.asarray(XF[:, :T1], dtype=np.float64) @ np.asarray(K, dtype=np.float64).T / n
    else:
        R = np.asarray(corrected_residuals).astype(design.dtype, copy=False)
        W = np.asarray(design.rmatvec(R), dtype=np.float64) / n
    FR = np.einsum("it,it->t", np.asarray(residuals, dtype=np.float64),
                   np.asarray(corrected_residuals, dtype=np.float64))
    return _debias_statistics(design, W, FR, risk_matrix, target)


def debias_statistics_from_products(design, products, risk_matrix, target=None):
    """:func:`debias_statistics` from the residuals' inner products (``R = F P +
    F_v Q``): ``W = (X~^T F P + X~^T F_v Q) / n`` and ``<F_t, R_t>`` the
    diagonal of ``F^T F P + F^T F_v Q``; from the readout's ``MGam`` where
    it kept it (``O(p T)`` flops: ``X~^T R`` its rows after the first,
    ``<F_t, R_t> = Phi_t^T (M Gam)_t``)."""
    n = design.n_eff
    if products.get("W") is not None:  # the settled form: X~^T R and <F_t, R_t> already
        return _debias_statistics(design, products.W / n, products.FR, risk_matrix, target)
    if products.get("MGam") is not None:  # X~^T R and the inner products, by the basis
        MGam = products.MGam
        return _debias_statistics(design, MGam[1:] / n,
                                  np.einsum("it,it->t", products.Phi, MGam), risk_matrix,
                                  target)
    P, Q = products.P, products.Q
    W = products.XF @ P
    FR = np.einsum("ts,st->t", products.FF, P)
    if Q is not None:
        W += products.XFv @ Q
        FR += np.einsum("ts,st->t", products.FFv, Q)
    return _debias_statistics(design, W / n, FR, risk_matrix, target)


def _debias_statistics(design, W, FR, risk_matrix, target):
    """``W`` (the scores) and ``FR`` (``<F_t, R_t>``) to the statistics."""
    n, p = design.n_eff, design.n_features
    G = np.asarray(risk_matrix, dtype=np.float64)
    g = G if G.ndim == 1 else np.diag(G)  # the risk path, or the risk matrix's diagonal
    with np.errstate(all="ignore"):  # exploding (flagged) estimates give inf / nan
        # (A_eff G)_tt = n G_tt - <F_t, R_t> (module docstring)
        AG = n * g - FR
        offset = (2.0 * AG - p * g) / n
    return DebiasStatistics(score=np.asfortranarray(W), offset=offset, n_eff=float(n),
                            n_features=p,
                            least_squares=least_squares_statistics(design, target))


@dataclasses.dataclass(frozen=True)
class LeastSquaresFit:
    """The classical least-squares fit behind ``precision="empirical"``:
    ``reason`` why it is not available (else ``None``), ``coef`` ``b_ls``,
    ``precision_diagonal`` of ``(X~^T X~ / n)^{-1}``, ``noise_variance``
    ``s^2`` and ``dof`` ``n - p - c`` (sample weights count as repetitions)."""

    reason: str | None = None
    coef: np.ndarray | None = None
    precision_diagonal: np.ndarray | None = None
    noise_variance: float | None = None
    dof: float | None = None


@dataclasses.dataclass(frozen=True)
class DebiasStatistics:
    """What the debiasing methods of a fit need (module docstring): ``score``
    ``W`` (n_features, T + 1, Fortran order), ``offset`` ``s`` (T + 1,),
    ``n_eff``, ``n_features`` and ``least_squares``."""

    score: np.ndarray
    offset: np.ndarray
    n_eff: float
    n_features: int
    least_squares: LeastSquaresFit


def least_squares_statistics(design, target):
    """The :class:`LeastSquaresFit` of ``design`` and ``target`` (``y~``), only
    its ``reason`` when not available (``n - p - c <= 0``, more than
    ``empirical_max_features`` features, a singular Gram matrix)."""
    n, p = design.n_eff, design.n_features
    dof = n - p - (1 if design.fit_intercept else 0)
    if target is None:
        return LeastSquaresFit(reason="the fit kept no response")
    if dof <= 0:
        return LeastSquaresFit(reason=(
            f"it needs more samples than features (sum(sample_weight) = {n:g}, "
            f"n_features = {p}{' + 1 for the intercept' if design.fit_intercept else ''}): "
            "the sample covariance is singular"))
    most = design.policy.empirical_max_features
    if p > most:
        return LeastSquaresFit(reason=(
            f"it is prepared at fit time only up to {most} features "
            f"(a {p} x {p} Gram matrix here)"))
    # a warm-started refit on the same data (same X, y, weights) reuses it,
    # and so does another fit of the same search on a shared design
    # (skacv.linalg._design.shared_designs) with the same response
    cached = design.cache.get("least_squares")
    if cached is None or not np.array_equal(cached[0], target):
        cached = (np.array(target, copy=True), _least_squares_fit(design, target, dof))
        design.cache["least_squares"] = cached
    return cached[1]


def _least_squares_fit(design, target, dof):
    """:func:`least_squares_statistics` once the fit is known to exist."""
    n, p = design.n_eff, design.n_features
    eigh = design.cache.get(("eigh", "features"))
    y = np.asarray(target, dtype=np.float64)
    rhs = np.asarray(design.rmatvec(target), dtype=np.float64).ravel() / n  # X~^T y~ / n
    if eigh is not None:  # the spectral risk already decomposed X~^T X~ / n
        lam, V = eigh
        if lam.size and lam[0] <= 1e-12 * max(lam[-1], 1e-300):
            return LeastSquaresFit(reason="the sample covariance of the design is singular")
        coef = V @ ((V.T @ rhs) / lam)
        diag = np.einsum("jk,jk->j", V / lam, V)
    else:
        G = design.gram(side="features")  # the product on every thread, the factor on one
        with factorization_blas("cholesky", p, design.policy):
            try:
                c = linalg.cho_factor(G, lower=True, check_finite=False)
            except linalg.LinAlgError:
                return LeastSquaresFit(reason="the sample covariance of the design is singular")
            coef = linalg.cho_solve(c, rhs, check_finite=False)
            # diag(G^-1): column sums of squares of L^-1 (LAPACK trtri, p^3 / 3 flops)
            L_inv, info = linalg.lapack.dtrtri(np.tril(c[0]), lower=1)
        if info != 0:
            return LeastSquaresFit(reason="the sample covariance of the design is singular")
        diag = np.einsum("kj,kj->j", L_inv, L_inv)
    fitted = np.asarray(design.matvec(coef.astype(design.dtype)), dtype=np.float64).ravel()
    rss = float(np.sum((y - fitted) ** 2))
    return LeastSquaresFit(coef=coef, precision_diagonal=diag, noise_variance=rss / dof,
                           dof=float(dof))


def check_precision(precision, n_features):
    """Validate ``precision``: ``None`` (the identity), ``"empirical"``, or a
    symmetric matrix with a positive diagonal (returned as an ndarray or CSR);
    ``ValueError`` otherwise."""
    if precision is None:
        return None
    if isinstance(precision, str):
        if precision == "empirical":
            return precision
        raise ValueError(
            f"precision must be None, 'empirical' or a matrix of shape ({n_features}, "
            f"{n_features}); got the string {precision!r}."
        )
    if sp.issparse(precision):
        P = sp.csr_matrix(precision, dtype=np.float64)
        values, diag = P.data, P.diagonal()
    else:
        P = np.asarray(precision, dtype=np.float64)
        values = P
        diag = np.diagonal(P) if P.ndim == 2 else None
    if P.shape != (n_features, n_features):
        raise ValueError(
            f"precision must be of shape (n_features, n_features) = ({n_features}, "
            f"{n_features}), the inverse covariance of the features; got shape "
            f"{P.shape}."
        )
    if not np.all(np.isfinite(values)):
        raise ValueError("precision contains NaN or infinite entries.")
    scale = float(np.max(np.abs(values))) if values.size else 0.0
    asym = abs(P - P.T).max() if sp.issparse(P) else np.max(np.abs(P - P.T), initial=0.0)
    if asym > 1e-10 * scale:
        raise ValueError(
            f"precision must be symmetric (an inverse covariance); the largest entry of "
            f"precision - precision.T is {asym:.3g}. Symmetrise it, e.g. "
            "(P + P.T) / 2."
        )
    if np.any(diag <= 0):
        j = int(np.argmin(diag))
        raise ValueError(
            f"precision must have a positive diagonal (an inverse covariance); entry "
            f"({j}, {j}) is {diag[j]:.3g}."
        )
    return P


def _apply(precision, W):
    """``Omega @ W`` (``None``: the identity)."""
    if precision is None:
        return W
    return np.asarray(precision @ W, dtype=np.float64)


def _precision_diagonal(precision, n_features):
    if precision is None:
        return np.ones(n_features)
    return np.asarray(precision.diagonal(), dtype=np.float64)


def excess_risk(stats, precision=None):
    """``N_t`` of every iterate (module docstring), shape (T + 1,)."""
    W = stats.score
    return np.einsum("jt,jt->t", W, _apply(precision, W)) + stats.offset


def debiased_coef(coef, stats, t, precision=None):
    """``b^t + Omega W[:, t]``, shape (n_features,)."""
    return np.asarray(coef, dtype=np.float64) + _apply(precision, stats.score[:, t])


def confidence_interval(center, risk, n_eff, precision, level):
    """``center -/+ z_{(1+level)/2} sqrt(risk Omega_jj / n)``, shape (n_features, 2)."""
    z = norm.ppf(0.5 + level / 2.0)
    with np.errstate(invalid="ignore"):
        half = z * np.sqrt(risk * _precision_diagonal(precision, center.shape[0]) / n_eff)
    return np.column_stack([center - half, center + half])


# ----------------------------------------------------------------------------
# the methods of the estimators
# ----------------------------------------------------------------------------

_ITERATION_DOC = """iteration : int or None, default=None
            Index into the path (negative values count from the end).
            ``None``: the iterate of ``coef_`` (the last one, or the one
            selected by :class:`~skacv.TrajectoryEarlyStoppingCV`)."""
_PRECISION_DOC = """precision : None, "empirical", array-like or sparse matrix of shape \
(n_features, n_features), default=None
            Inverse covariance ``Sigma^{-1}`` of the rows of ``X`` (the
            population's, not the sample's). **None means the identity: the
            features are assumed standardised (unit variance) and
            uncorrelated.** With correlated features or features of other
            scales the result is wrong unless the precision is given: on an
            AR(1) design with correlation 0.5 (sigma^2 = 1) the identity gave
            noise variances of -2.3 at the first iterate and up to 1.9 later,
            and 95% intervals covering as little as 85% of the nonzero
            coefficients. Use a matrix you know (a design you control) or
            one estimated from independent rows (unlabelled data, many more
            rows than ``n_samples``). Do not pass the inverse sample
            covariance of the training rows as a matrix (it breaks the
            degrees-of-freedom correction: coverage 1.00 early, 0.89 later);
            ``"empirical"`` is that choice done right: when ``n_samples >
            n_features`` (+ 1 with an intercept; at most
            the speed policy's ``empirical_max_features``, 2000, features)
            the debiased iterate
            is then the least-squares fit at *every* iteration, the intervals
            the classical Student-t intervals of least squares (exact under
            Gaussian noise) and the noise variance ``RSS / (n - p - 1)``;
            otherwise it raises."""


def _debiases(estimator):
    """Whether ``estimator``'s loss has the debiasing (least squares: the
    class attribute ``debiases``; a robust loss's risk estimate has none)."""
    return getattr(estimator, "debiases", True)


class UncertaintyMixin:
    """Debiased iterates, confidence intervals, noise level and excess risk
    of every iterate (Bellec & Tan 2024) for least-squares trajectory
    estimators fitted with ``estimate_risk=True``; a class whose
    ``debiases`` is False has none of these methods."""

    def _debias_stats(self):
        check_is_fitted(self)
        stats = getattr(self, "_uq_stats", None)
        if stats is None:
            raise NotFittedError(
                f"This {type(self).__name__} has no risk estimate to debias with: it was "
                "fitted with estimate_risk=False. Refit it with estimate_risk=True; the "
                "estimator_ of TrajectoryEarlyStoppingCV keeps it with criterion='risk' (a K-fold "
                "choice switches it off: criterion='kfold', or 'auto' where the estimate "
                "is flagged or below 100 samples with more features than samples)."
            )
        return stats

    def _coef_is_iterate(self, iteration):
        """Record that ``coef_`` is now the path's iterate ``iteration`` (``None``:
        a converged fit, no iterate), the methods' default while ``coef_`` stays
        that array."""
        self._coef_iterate = (None if iteration is None else int(iteration), self.coef_)

    def _current_iterate(self):
        """The iterate recorded by :meth:`_coef_is_iterate`, else the last."""
        record = getattr(self, "_coef_iterate", None)
        if record is not None and record[1] is self.coef_:
            if record[0] is None:
                raise ValueError(
                    "coef_ is the converged fit that TrajectoryEarlyStoppingCV selected "
                    "(search='path'), not an iterate of the stored path: pass iteration= "
                    "explicitly (e.g. iteration=-1, the last iterate).")
            return int(record[0])
        return self.coef_path_.shape[1] - 1

    def _check_iteration(self, iteration, warn=True):
        T1 = self.coef_path_.shape[1]
        if iteration is None:
            t = self._current_iterate()
        elif isinstance(iteration, bool) or not isinstance(iteration, numbers.Integral):
            raise ValueError(
                f"iteration must be None or an integer in [{-T1}, {T1 - 1}]; got "
                f"{iteration!r}."
            )
        elif not -T1 <= iteration < T1:
            raise ValueError(
                f"iteration must be in [{-T1}, {T1 - 1}] (n_iter_ = {T1 - 1}; negative "
                f"values count from the end); got {iteration}."
            )
        else:
            t = int(iteration) % T1
        reliable = getattr(self, "risk_reliable_", None)
        if warn and reliable is not None and not reliable[t]:
            advice = getattr(self, "_risk_advice", None)
            why, fixes = "", ["an earlier iterate"]
            if advice is not None:  # why the first flagged iterate is, and a solver
                why = f" From iteration {advice[0]} on: {advice[1][0].lower()}{advice[1][1:]}"
                fixes += [f for f in advice[2] if f.startswith("solver=")]
            warnings.warn(
                f"{type(self).__name__}: iterate {t} is flagged in risk_reliable_: its "
                "debiasing rests on the same unstable memory matrix as risk_path_, and "
                f"the interval cannot be trusted.{why} Use {join_options(fixes)}.",
                UnreliableEstimateWarning, stacklevel=user_stacklevel())
        return t

    def _least_squares(self, stats):
        """The classical fit behind ``precision="empirical"`` (or a clear error)."""
        ls = stats.least_squares
        if ls is None or ls.reason is not None:
            why = "it was not prepared" if ls is None else ls.reason
            raise ValueError(
                f"precision='empirical' is not available for this fit: {why}. Pass the "
                "precision matrix (inverse covariance) of the features if it is known, an "
                "estimate of it from independent rows (unlabelled data), or None for "
                "standardised, uncorrelated features.")
        return ls

    def noise_variance_path(self, precision=None):
        stats = self._debias_stats()
        if isinstance(check_precision(precision, stats.n_features), str):
            ls = self._least_squares(stats)
            return np.full(self.coef_path_.shape[1], ls.noise_variance)
        return self._risk_path_of_fit() - self.excess_risk_path(precision)

    def excess_risk_path(self, precision=None):
        stats = self._debias_stats()
        P = check_precision(precision, stats.n_features)
        if isinstance(P, str):
            return self._risk_path_of_fit() - self.noise_variance_path(P)
        return excess_risk(stats, P)

    def _risk_path_of_fit(self):
        self._debias_stats()
        return np.asarray(self.risk_path_, dtype=np.float64)

    def debiased_coef(self, iteration=None, precision=None):
        stats = self._debias_stats()
        P = check_precision(precision, stats.n_features)
        if isinstance(P, str):
            self._check_iteration(iteration, warn=False)
            return self._least_squares(stats).coef.copy()
        t = self._check_iteration(iteration)
        return debiased_coef(self.coef_path_[:, t], stats, t, P)

    def coef_confidence_interval(self, iteration=None, level=0.95, precision=None):
        stats = self._debias_stats()
        if isinstance(level, bool) or not isinstance(level, numbers.Real) \
                or not 0.0 < level < 1.0:
            raise ValueError(f"level must be a number in (0, 1), e.g. 0.95; got {level!r}.")
        P = check_precision(precision, stats.n_features)
        if isinstance(P, str):
            self._check_iteration(iteration, warn=False)
            ls = self._least_squares(stats)
            q = student_t.ppf(0.5 + float(level) / 2.0, ls.dof)
            half = q * np.sqrt(ls.noise_variance * ls.precision_diagonal / stats.n_eff)
            return np.column_stack([ls.coef - half, ls.coef + half])
        t = self._check_iteration(iteration)
        center = debiased_coef(self.coef_path_[:, t], stats, t, P)
        return confidence_interval(center, float(self.risk_path_[t]), stats.n_eff, P,
                                   float(level))

    noise_variance_path.__doc__ = f"""Estimated noise variance ``sigma^2`` at every iterate.

        ``sigma^2_t = risk_path_[t] - excess_risk_path(precision)[t]`` (Bellec &
        Tan 2024): every iterate gives its own estimate of the same number,
        ``Var(y | x)``; the early ones are the noisiest (at ``t = 0``, with
        the identity and no intercept, it is the moment estimator
        ``((n + p) ||y||^2 - ||X^T y||^2) / n^2``); the standard deviation
        scales with ``risk_path_[t]``. Like the intervals it needs the
        precision of the features: when ``n_samples <= n_features``, ``y``
        lies in the span of the columns of ``X`` and no estimate that
        ignores the covariance can tell the noise from the signal.

        Parameters
        ----------
        {_PRECISION_DOC}

        Returns
        -------
        noise_variance : ndarray of shape (n_iter_ + 1,)
            Can be negative at early iterates (it is a difference of
            estimates); iterates flagged in ``risk_reliable_`` are not
            trustworthy.
        """

    excess_risk_path.__doc__ = f"""Estimated excess risk of every iterate.

        The noise-free prediction error ``(b^t - beta)^T Sigma (b^t - beta)``
        (``risk_path_`` minus the noise variance), from Bellec & Tan's
        noise-free error matrix (2024).

        Parameters
        ----------
        {_PRECISION_DOC}

        Returns
        -------
        excess_risk : ndarray of shape (n_iter_ + 1,)
            Iterates flagged in ``risk_reliable_`` are not trustworthy.
        """

    debiased_coef.__doc__ = f"""Debiased coefficients of an iterate.

        ``b^t + Omega X~^T r~^t / n``, where ``r~^t`` are the corrected
        residuals of ``risk_path_`` (column ``t`` of ``F (I - A/n)^{{-T}}``,
        with the intercept's and the momentum's terms) and ``X~`` the
        centred, weighted design: approximately ``beta + N(0,
        risk_path_[t] * Omega / n)`` coordinate by coordinate, at any
        iteration, for Gaussian-like designs with ``n`` and ``p`` large and
        comparable (Bellec & Tan 2024). The intercept is not debiased.

        Parameters
        ----------
        {_ITERATION_DOC}
        {_PRECISION_DOC}

        Returns
        -------
        coef : ndarray of shape (n_features,)

        Warns
        -----
        UnreliableEstimateWarning
            When the iterate is flagged in ``risk_reliable_``.
        """

    coef_confidence_interval.__doc__ = f"""Confidence intervals of the coefficients from an iterate.

        ``debiased_coef(iteration, precision) -/+ z sqrt(risk_path_[t] *
        Omega_jj / n)`` with ``z`` the ``(1 + level) / 2`` normal quantile
        and ``n = sum(sample_weight)``: the coordinate-wise intervals of
        Bellec & Tan (2024), valid at any iteration for Gaussian-like
        designs with ``n`` and ``p`` large and comparable (each interval
        covers with probability close to ``level``; they are not
        simultaneous).

        **The default precision is the identity: the intervals are wrong
        for correlated (or unstandardised) features unless** ``precision``
        **is given.**

        Parameters
        ----------
        {_ITERATION_DOC}
        level : float, default=0.95
            Nominal coverage, in (0, 1).
        {_PRECISION_DOC}

        Returns
        -------
        intervals : ndarray of shape (n_features, 2)
            Lower and upper bounds for every coefficient (the intercept is
            not covered).

        Warns
        -----
        UnreliableEstimateWarning
            When the iterate is flagged in ``risk_reliable_``.
        """

    # (a loss without the debiasing has none of them: hasattr is False)
    noise_variance_path = available_if(_debiases)(noise_variance_path)
    excess_risk_path = available_if(_debiases)(excess_risk_path)
    debiased_coef = available_if(_debiases)(debiased_coef)
    coef_confidence_interval = available_if(_debiases)(coef_confidence_interval)
