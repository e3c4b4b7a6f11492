"""The statistical policy: the constants that change the numbers of a fit,
an estimate or a search, beside the speed policy (:mod:`skacv._policy`).
"""

import contextlib
import dataclasses
import threading

__all__ = ["StatisticalPolicy", "get_statistics", "statistics_context"]


@dataclasses.dataclass(frozen=True)
class StatisticalPolicy:
    """Constants that change the numbers: tolerances, patience, sample sizes
    and reliability thresholds of the fits, the estimates and the searches
    (each field: ``docs/speed_policy.rst``, "The statistical policy")."""

    #: estimates closer than this (relative) tie: the first grid point, then iteration, wins
    tie_rtol: float = 1e-9
    #: the early stopping waits at least this fraction of the best iteration
    relative_patience: float = 0.5
    #: ... and this fraction where the criterion rippled before its minimum (momentum)
    ripple_patience: float = 2.0
    #: a rise of the criterion above its running minimum by more than this (relative) is a ripple
    ripple_rtol: float = 1e-3
    #: ... a ripple waits only on a path whose minimum lies within this (relative) of the
    #: smallest criterion known elsewhere (the grid's converged fits, paths fitted before)
    ripple_reach: float = 0.05
    #: a path whose limit lies more than this below its minimum has not ended
    limit_rtol: float = 0.01
    #: a minimum within this (relative) of its path's limit has reached it
    reached_rtol: float = 0.0025
    #: the path search's walk assumes a trajectory gains at least this times df / n below its limit
    walk_gain_df: float = 0.5
    #: the walk skips the alphas that could beat its best by at most this (relative)
    walk_rtol: float = 0.01
    #: a Lasso path stopped on ``risk_path_`` ends at this duality gap (relative)
    converged_tol: float = 1e-5
    #: a path still falling grows up to this many times ``max_iter``
    max_iter_growth: int = 10
    #: ``criterion="auto"`` computes both estimates up to this ``n_samples * n_features``,
    #: where the other one costs at most the chosen one
    auto_both_size: int = 200_000
    #: ``criterion="auto"``'s leave-one-out samples, and the most it grows to
    auto_loo_samples: int = 100
    auto_loo_samples_max: int = 500
    #: ``criterion="auto"`` takes K-fold below this many samples (more features than samples)
    auto_kfold_samples: int = 100
    #: ... and where the Lasso support's leave-one-out by leverages exceeds the converged
    #: risk estimate by this factor at its choice; a row of leverage at least
    #: ``alo_leverage_trim`` counts by the minimum-norm refit without it
    auto_alo_ratio: float = 1.3
    alo_leverage_trim: float = 0.99
    #: the Lasso path's gap is also at most this times ``tol`` times ``||r||^2 / n_eff``
    path_objective_tol: float = 100.0
    #: a warm start missing a violating column is solved to this fraction of its gap
    kkt_gap_cut: float = 0.1
    #: a path's coefficients within this many rounding units of its largest are
    #: zeros, and correlations within as many units above alpha no violators
    path_zero_ulps: float = 64.0
    #: a left-out Lasso solution is optimal within this (relative to its l1 penalty)
    loo_kkt_rtol: float = 1e-9
    #: most feature-sign steps of a left-out Lasso solve (converged leave-one-out)
    loo_refit_steps: int = 500
    #: a fit warns where its columns' root mean squares (on at most this many rows)
    #: differ by more than this factor; a column whose spread is below this share of
    #: its own size is constant
    feature_scale_ratio: float = 100.0
    feature_scale_rows: int = 2000
    feature_scale_zero: float = 1e-12
    #: where the feature-sign steps cycle, coordinate descent on working sets to this
    #: duality gap (relative to the left-out ``||t||^2``) within this many epochs a set;
    #: past them the set's exact homotopy, or the point whose left-out prediction is
    #: bounded within this share of ``||t_{-i}||``, else the descent to the most epochs
    loo_descent_gap: float = 1e-13
    loo_descent_epochs: int = 100000
    loo_descent_bound: float = 1e-4
    loo_descent_max_epochs: int = 2000000
    #: a column whose sum of squares on the left-out rows is at most this share of
    #: its own is constant there (a one-hot level of the left-out row alone)
    loo_dead_column: float = 1e-12
    #: most indicator columns whose linear relations the converged df checks
    binary_relations_max: int = 2000
    #: relative distance of duplicate columns (``None``: from the dtype)
    duplicate_tol: float | None = None
    #: the Lasso path solves once for a group of duplicate columns (its first column)
    path_drop_duplicates: bool = True
    #: relative tolerance of the Lanczos top eigenvalue of ``step_size="auto"``
    lipschitz_tol: float = 1e-3
    #: growth of the training objective that counts as divergence
    divergence_factor: float = 1e3
    #: degrees-of-freedom fraction reported as (nearly) interpolating
    interpolation_df: float = 0.9
    #: the Lasso's (elastic net's) converged path ends past its minimum
    #: (``n_alphas_no_change``) only where its fits' df reach this fraction of
    #: ``n_eff``: below, the estimate may rise and fall again (a bump); above, on
    #: ``p > n`` designs, it scatters
    path_walk_df: float = 0.5
    #: the automatic ridge grid of the path search continues past ``eps`` while
    #: the leave-one-out error falls (``n_alphas_no_change``; modeldata's meats,
    #: docs/benchmarks.rst); ``criterion="auto"`` reads the risk estimate on it
    #: down to leave-one-out's minimum where the estimate falls at the end too
    ridge_grid_extends: bool = True
    #: the literal default's alpha grid of an estimator without an alpha path (the
    #: logistic and Huber losses): this many alphas, from its scale down to ``auto_grid_eps`` of it,
    #: walked from the largest until ``auto_grid_no_change`` alphas bring no new minimum
    auto_grid_alphas: int = 7
    auto_grid_eps: float = 1e-4
    auto_grid_no_change: int = 2
    #: ``criterion="auto"`` of a ridge path search takes leave-one-out when its
    #: converged error at the risk estimate's alpha exceeds its minimum this many times
    ridge_auto_loo_ratio: float = 2.0
    #: the auto_grid walk for the non-negative Lasso and elastic net (``positive=True``,
    #: no converged alpha path): this many alphas down to ``positive_grid_eps`` of
    #: the largest (bench_positive.py, docs/speed_policy.rst)
    positive_grid_alphas: int = 20
    positive_grid_eps: float = 1e-3
    #: integer sample weights summing to at most this are frequency weights
    expanded_weights_max: int = 10**8
    #: non-integer sample weights whose sum differs from their rows' count by more
    #: than this (relative) and this many standard errors of their mean warn that
    #: their scale moves the estimates
    weight_sum_rtol: float = 1e-3
    weight_sum_sigmas: float = 3.0
    #: EigenPro: damping exponent, eigenvalue floor, step margin, ``"auto"`` epochs,
    #: bandwidth draws, held-out rows of the ``q`` rule
    eigenpro_damping: float = 0.95
    eigenpro_eig_floor: float = 1e-8
    eigenpro_saturation_margin: float = 0.9
    eigenpro_auto_max_epochs: int = 300
    eigenpro_median_draws: int = 1000
    eigenpro_rule_rows: int = 500
    #: EigenPro stalls (a warning): its training mse rose by this fraction
    #: above its lowest so far while staying above the second times its start
    eigenpro_stall: tuple = (0.01, 0.3)
    #: EigenPro's ``subsample_size="auto"``: draws, and the second number from the third's samples;
    #: on small data ``M (n / 2 M)^p`` draws, ``p`` and the fewest
    eigenpro_subsample_max: tuple = (2000, 12000, 1e5)
    eigenpro_subsample_power: float = 2.0
    eigenpro_subsample_min: int = 300
    #: EigenPro: the fewest rows outside the subsample, as a multiple of its
    #: draws, that check ``lambda_P`` and bound ``beta_P``; with fewer the
    #: subsample is the whole data and the ``q`` rule's held-out rows are a split of it
    eigenpro_heldout_min: float = 1.0
    #: the df fractions a proximal iterate's estimate is trusted within
    df_low: float = -0.05
    df_high: float = 0.99
    #: ... below ``df_low`` by this many times Hutchinson's bound on the probe noise
    #: of the robust / mini-batch traces' df, ``sqrt(2 / (m tr D_t))``, where probed
    robust_df_noise_sigmas: float = 2.0
    #: largest accepted ratio of an iterate's df to its support
    support_df_limit: float = 1.5
    #: largest accepted ratio of a row's l1 norm of ``(I - A/n)^{-1}`` to ``1 / (1 - df)``
    amplification_limit: float = 2.0
    #: ``n_probes="auto"`` of a spectral estimate: probes, exact-trace factor and largest order
    auto_probes: int = 10
    auto_exact_factor: float = 4.0
    auto_exact_max_dim: int = 2000
    #: the pooled chain's most probes (``small_probes`` on designs below ``small_design``)
    pooled_probes: int = 32
    small_probes: int = 64
    small_design: tuple = (1000, 128)
    #: the adaptive pooled chain's first probes by samples (with and without momentum)
    pooled_start_probes: tuple = ((8000, 1), (4000, 8), (2000, 16))
    pooled_start_probes_no_momentum: tuple = ((8000, 1), (1000, 4))
    #: a chain for a choice starts with at most these probes from these samples on
    choice_start_probes: tuple = (1000, 4)
    #: probe noise above which the chain grows (for a value, for a choice)
    pooled_noise_target: float = 0.008
    choice_noise_target: float = 0.01
    #: iterates within this relative excess of the minimum compete with it
    choice_near: float = 0.02
    #: groups deleted in turn by the jackknife of the probe noise
    noise_groups: int = 8
    #: iterates at which the jackknife's replicates are read
    noise_iterates: int = 64
    #: the pooled chain's template: probes, quadrature tolerance, lags, exact support
    template_probes: int = 2
    template_rtol: float = 1e-3
    template_check_lags: int = 200
    template_exact_support: int = 300
    #: ... without its nodes below this share of the largest (eigenvalue times weight)
    template_node_floor: float = 1e-10
    #: a continued chain keeps its template's nodes while its columns grew by at most this
    template_reuse_growth: float = 0.005
    #: Lanczos depths at which the template's quadrature is checked
    template_check_depths: tuple = (10, 14, 20, 28, 40, 56, 80)
    #: the settled form stops a source's column at this fraction of the largest state
    negligible_state: float = 1e-13
    #: the settled form's multipliers above minus this count as non-negative
    multiplier_rounding: float = 1e-12
    #: EigenPro's ``max_iter="auto"``: risk tolerance, patience, training-error floor
    sgd_risk_rtol: float = 5e-3
    sgd_patience: int = 3
    sgd_limit_mse: float = 1e-4
    #: EigenPro's ``n_probes="auto"``: the most and fewest probes, and the relative
    #: spread of the risk estimate over the probes allowed (its form ``sqrt(2 / (m n))``)
    sgd_probes: int = 10
    sgd_probes_min: int = 5
    sgd_probe_spread: float = 6e-3
    #: EigenPro's risk estimate is flagged beyond this multiple of GCV
    gcv_ratio: float = 1.5
    #: EigenPro: probes fitted as targets for the spread of ``diag(S_t)``, and the
    #: spread ``Var(d) / (1 - mean d)^2`` beyond which the estimate's value is
    #: flagged, by the second number times the standard error of its probe noise
    sgd_leverage_probes: int = 5
    sgd_leverage_spread: tuple = (0.1, 2.0)
    #: ... and from this many rows (``n_eff``) on this many leverage probes
    sgd_leverage_probes_large: tuple = (8000, 3)


class InForce:
    """The frozen policy in force (``policy``), replaced for a ``with``
    block by :meth:`replaced` (of either policy)."""

    def __init__(self, policy):
        self.policy = policy
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def replaced(self, new):
        current = self.policy
        with self._lock:
            self.policy = new
        try:
            yield new
        finally:
            with self._lock:
                self.policy = current


_in_force = InForce(StatisticalPolicy())


def get_statistics():
    """The :class:`StatisticalPolicy` in force."""
    return _in_force.policy


@contextlib.contextmanager
def statistics_context(**changes):
    """Change fields of the statistical policy within a ``with`` block (an
    unknown field raises ``TypeError``), from the policy in force when the
    block starts.

    Examples
    --------
    >>> from skacv._statistics import get_statistics, statistics_context
    >>> with statistics_context(relative_patience=0.0):
    ...     get_statistics().relative_patience
    0.0
    >>> get_statistics().relative_patience
    0.5
    """
    with _in_force.replaced(dataclasses.replace(_in_force.policy, **changes)) as new:
        yield new
