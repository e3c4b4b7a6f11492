"""The statistical policy: the constants that change the numbers of a fit,
an estimate or a search (tolerances, patience, sample sizes, reliability
thresholds), in one frozen dataclass beside the speed policy
(:class:`skacv._policy.SpeedPolicy`, which only chooses between equal
computations).
"""

import contextlib
import dataclasses
import threading

__all__ = ["StatisticalPolicy", "get_statistics", "statistics_context"]


@dataclasses.dataclass(frozen=True)
class StatisticalPolicy:
    """Constants that change the numbers: tolerances, patience, sample sizes
    and reliability thresholds of the fits, the estimates and the searches.

    Kept apart from :class:`skacv._policy.SpeedPolicy` (which only chooses
    between equal computations) and from :func:`skacv.config_context`
    (resources); read with :func:`get_statistics`, changed for a block with
    :func:`statistics_context` (tests: the ``statistical_policy`` fixture).
    The measurements behind the defaults are in ``docs/speed_policy.rst``
    ("The statistical policy").

    Attributes
    ----------
    tie_rtol : float
        Estimates of two iterates closer than this (relative) are a tie: the
        first grid point, then the earliest iteration, wins.
    relative_patience : float
        The early stopping waits at least this fraction of the best
        iteration without improvement (and at least ``n_iter_no_change``).
    limit_rtol : float
        A path whose limit (the converged fit's criterion) lies more than
        this fraction below its minimum has not ended; within it, the
        converged fit scores within this fraction of what the path reaches.
    converged_tol : float
        A Lasso path stopped on ``risk_path_`` ends once its duality gap is
        at most this times ``||y~||^2 / n_eff`` (``FitPlan.end_tol``).
    max_iter_growth : int
        A path still falling at ``max_iter`` grows past it, by stages, up to
        this many times ``max_iter``.
    auto_both_size : int
        ``criterion="auto"`` also computes the other estimate when
        ``n_samples * n_features`` is at most this and the choice is
        leave-one-out.
    auto_loo_samples, auto_loo_samples_max : int
        ``criterion="auto"``: leave-one-out tracks every sample up to
        ``auto_loo_samples``, a random subsample of that size above, grown
        up to ``auto_loo_samples_max`` while within the budget of K-fold.
    auto_kfold_samples : int
        ``criterion="auto"`` uses K-fold CV along the path below this many
        samples with more features than samples.
    path_objective_tol : float
        The Lasso path's duality gap of an alpha is also at most this times
        ``tol`` times twice its objective at the warm start.
    kkt_gap_cut : float
        A warm start missing a column that violates the optimality
        conditions at the new alpha is solved at least to this fraction of
        its gap.
    binary_relations_max : int
        At most this many indicator columns have their linear relations
        checked by the converged fit's degrees of freedom
        (:class:`skacv.model_selection._converged_risk.SupportDF`).
    duplicate_tol : float or None
        Columns of ``X~`` within this relative distance (up to sign) are
        duplicates; ``None``: the square root of the dtype's resolution, at
        most ``1e-5``.
    lipschitz_tol : float
        Relative tolerance of the Lanczos estimate of the top eigenvalue
        behind ``step_size="auto"`` (the bound is inflated by it).
    divergence_factor : float
        A trajectory diverges when its training objective grows this many
        times larger than at the zero start.
    interpolation_df : float
        A flagged iterate of a method without momentum whose
        degrees-of-freedom fraction is at least this is reported as (nearly)
        interpolating.
    expanded_weights_max : int
        Integer sample weights summing to at most this are frequency
        weights drawn from expanded index lists.
    eigenpro_damping : float
        Damping exponent ``a`` of EigenPro 2 (Ma and Belkin 2019).
    eigenpro_eig_floor : float
        The preconditioner treats eigenvalues below this fraction of the
        largest as zero.
    eigenpro_saturation_margin : float
        EigenPro's step is this fraction of the largest stable step.
    eigenpro_auto_max_epochs : int
        Epochs of EigenPro's ``max_iter="auto"``.
    eigenpro_median_draws : int
        Pairs drawn for the median bandwidth.
    eigenpro_rule_rows : int
        Held-out rows over which the automatic ``q`` rule takes ``beta_P``.
    """

    tie_rtol: float = 1e-9
    relative_patience: float = 0.5
    limit_rtol: float = 0.01
    converged_tol: float = 1e-4
    max_iter_growth: int = 10
    auto_both_size: int = 200_000
    auto_loo_samples: int = 100
    auto_loo_samples_max: int = 500
    auto_kfold_samples: int = 100
    path_objective_tol: float = 100.0
    kkt_gap_cut: float = 0.1
    binary_relations_max: int = 2000
    duplicate_tol: float | None = None
    lipschitz_tol: float = 1e-3
    divergence_factor: float = 1e3
    interpolation_df: float = 0.9
    expanded_weights_max: int = 10**8
    eigenpro_damping: float = 0.95
    eigenpro_eig_floor: float = 1e-8
    eigenpro_saturation_margin: float = 0.9
    eigenpro_auto_max_epochs: int = 300
    eigenpro_median_draws: int = 1000
    eigenpro_rule_rows: int = 500


_lock = threading.Lock()
_statistics = StatisticalPolicy()


def get_statistics():
    """The :class:`StatisticalPolicy` in force."""
    return _statistics


@contextlib.contextmanager
def statistics_context(**changes):
    """Change fields of the statistical policy within a ``with`` block (an
    unknown field raises ``TypeError``).

    Examples
    --------
    >>> from skacv._statistics import get_statistics, statistics_context
    >>> with statistics_context(relative_patience=0.0):
    ...     get_statistics().relative_patience
    0.0
    >>> get_statistics().relative_patience
    0.5
    """
    global _statistics
    current = _statistics
    new = dataclasses.replace(current, **changes)
    with _lock:
        _statistics = new
    try:
        yield new
    finally:
        with _lock:
            _statistics = current
