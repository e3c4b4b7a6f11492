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
    (resources); read with the speed policy by
    :func:`skacv._policy.current_policies` where a computation starts and
    passed down, changed for a block with :func:`statistics_context`
    (tests: the ``statistical_policy`` fixture).
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
    df_low, df_high : float
        The degrees-of-freedom fractions a proximal iterate's estimate is
        trusted within (:func:`skacv.estimates.risk._reliability.risk_reliability`;
        from ``df_high`` the factor ``1 / (1 - df)^2`` exceeds 1e4).
    support_df_limit : float
        Largest accepted ratio between an iterate's degrees of freedom and
        its support (+ 1 with an intercept).
    amplification_limit : float
        Largest accepted ratio between the l1 norm of a row of ``(I -
        A/n)^{-1}`` and ``1 / (1 - df)``.
    auto_probes, auto_exact_factor, auto_exact_max_dim : int, float, int
        ``n_probes="auto"`` of a spectral estimate: exact traces when they
        cost at most ``auto_exact_factor`` times ``auto_probes`` probes (an
        eigendecomposition of at most ``auto_exact_max_dim``), else that
        many probes (:func:`skacv.estimates.risk._engine.resolve_n_probes`).
    pooled_probes, small_probes, small_design : int, int, tuple
        The pooled chain's most probes with ``n_probes="auto"``
        (``small_probes`` below ``small_design``'s samples with at most its
        features; :func:`skacv.estimates.risk._probes.pooled_probes`).
    pooled_start_probes, pooled_start_probes_no_momentum : tuple of (int, int)
        The adaptive pooled chain starts with the probes of the first
        ``(samples, probes)`` pair whose samples the data reach (else all
        of ``pooled_probes``); the second table for an iteration without
        momentum.
    choice_start_probes : (int, int)
        A chain for a choice (``probe_goal="choice"``) starts with at most
        this many probes from this many samples on.
    pooled_noise_target, choice_noise_target : float
        The adaptive pooled chain grows while the probe noise of
        ``risk_path_`` (of the order of the iterates near its minimum, for
        a choice) is above this.
    choice_near : float
        Iterates within this relative excess of the estimate's minimum
        compete with it (:func:`skacv.estimates.risk._probes.choice_iterates`).
    noise_groups : int
        Groups of probes (and of samples, with one probe) deleted in turn by
        the jackknife of the probe noise.
    noise_iterates : int
        Iterates at which the jackknife's replicates are read on a longer path.
    template_probes, template_rtol, template_check_lags, template_exact_support : int or float
        The pooled chain's template: Lanczos probes, the relative change
        that ends its quadrature, the lags its nodes serve at least, and the
        support up to which it takes exact eigenvalues instead
        (:mod:`skacv.estimates.risk._pooled`).
    template_check_depths : tuple of int
        The Lanczos depths at which the template's quadrature is checked.
    negligible_state : float
        The settled form stops advancing a source's column once its state is
        at most this fraction of the largest seen (``_settled``).
    multiplier_rounding : float
        The settled form's multipliers above minus this count as non-negative.
    sgd_risk_rtol, sgd_patience, sgd_limit_mse : float, int, float
        EigenPro's ``max_iter="auto"``: the epochs grow until the estimate's
        best has not fallen by ``sgd_risk_rtol`` over ``sgd_patience``
        epochs, or, once flagged, the training error falls below
        ``sgd_limit_mse`` of its start. The estimate's probes move it by
        about 0.5 % from epoch to epoch (docs/benchmarks.rst, EigenPro).
    gcv_ratio : float
        EigenPro's risk estimate is flagged beyond this multiple of GCV.
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
    df_low: float = -0.05
    df_high: float = 0.99
    support_df_limit: float = 1.5
    amplification_limit: float = 2.0
    auto_probes: int = 10
    auto_exact_factor: float = 4.0
    auto_exact_max_dim: int = 2000
    pooled_probes: int = 32
    small_probes: int = 64
    small_design: tuple = (1000, 128)
    pooled_start_probes: tuple = ((8000, 1), (4000, 8), (2000, 16))
    pooled_start_probes_no_momentum: tuple = ((8000, 1), (1000, 4))
    choice_start_probes: tuple = (1000, 4)
    pooled_noise_target: float = 0.008
    choice_noise_target: float = 0.01
    choice_near: float = 0.02
    noise_groups: int = 8
    noise_iterates: int = 64
    template_probes: int = 2
    template_rtol: float = 1e-3
    template_check_lags: int = 200
    template_exact_support: int = 300
    template_check_depths: tuple = (10, 14, 20, 28, 40, 56, 80)
    negligible_state: float = 1e-13
    multiplier_rounding: float = 1e-12
    sgd_risk_rtol: float = 5e-3
    sgd_patience: int = 3
    sgd_limit_mse: float = 1e-4
    gcv_ratio: float = 1.5


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
