"""The speed policy: every cost model, threshold and machine constant that
chooses *how* skacv computes something, never what (the constants that
change the numbers are :class:`skacv._statistics.StatisticalPolicy`).

``docs/speed_policy.rst`` describes each field and the measurements behind
its default; ``docs/architecture.rst`` ("The policies passed, not read")
how both policies are read once, with :func:`current_policies`, and handed
down as arguments.
"""

import contextlib
import dataclasses
from types import MappingProxyType

import numpy  # noqa: F401  (NumPy's BLAS loaded before threadpoolctl looks for it)
from threadpoolctl import threadpool_info

from ._statistics import InForce, get_statistics

__all__ = ["SpeedPolicy", "blas_kernels", "current_policies", "get_policy", "kernels_policy",
           "policy_context"]


def _frozen(mapping):
    return dataclasses.field(default_factory=lambda: MappingProxyType(dict(mapping)))


@dataclasses.dataclass(frozen=True)
class SpeedPolicy:
    """Thresholds and sizes that choose between equal computations (sizes
    in bytes, work in flops; each field: ``docs/speed_policy.rst``)."""

    #: order up to which a formed Gram matrix stays in the design's cache
    gram_cache_size: int = 2000
    #: dense ``X~`` from which the fit loop reads row panels (one pass for both products)
    fuse_min_bytes: int = 32 * 2**20
    #: groups of consecutive panels of that pass, one thread each
    fuse_groups: int = 2
    #: bytes of ``X~`` in a panel of that pass
    panel_bytes: int = 2 * 2**20
    #: ``Design.columns_product`` gathers at most this share (or this many) of the columns
    columns_gather_share: float = 1 / 40
    columns_gather_min: int = 32
    #: blocks of the clipped extrapolation's sparse correction
    correction_block_bytes: int = 64 * 2**20
    #: the readout with momentum by products of the thin residual block where cheaper
    readout_thin_products: bool = True
    #: most features of the covariance form (fewer than the samples)
    covariance_max_features: int = 2000
    #: speed per flop of the Gram matrix's product against a matrix-vector product
    covariance_gemm_advantage: float = 16.0
    #: the Lasso path may run in the covariance form ...
    covariance_path: bool = True
    #: ... when the Gram matrix costs at most this many products with ``X~`` per penalty
    path_products_per_alpha: float = 10.0
    #: the covariance-form path solves each alpha by scikit-learn's coordinate descent
    path_coordinate_descent: bool = True
    #: the path on the columns solves working sets by coordinate descent where it may
    path_columns_descent: bool = True
    #: ... on Fortran-ordered copies, gathered by blocks of rows transposed into them
    path_fortran_columns: bool = True
    #: a sparse design's working set is solved on a dense copy of its columns (descent
    #: included) where the copy holds at most these bytes ...
    path_sparse_dense_bytes: int = 32 * 2**20
    #: ... and the columns hold at least this share of nonzero entries
    path_sparse_dense_density: float = 0.05
    #: ... deciding a working set grown by a few columns from the kept spectrum's bounds
    path_kept_spike_bound: bool = True
    #: the path finishes a working set by conjugate gradients on its support
    path_support_finish: bool = True
    #: the path runs FISTA in a rank-one metric where a common factor dominates ...
    path_metric: bool = True
    #: ... a top eigenvalue at least this many times the rest's
    path_metric_min_ratio: float = 4.0
    #: ... on working sets of more than this many entries (rows x columns)
    path_metric_min_entries: int = 2**13
    #: most rows in a panel of a block of a few columns ...
    block_panel_rows: int = 200
    #: ... or, for rows of at most ``narrow_features``, ``narrow_panel_rows``
    narrow_features: int = 32
    narrow_panel_rows: int = 4096
    #: blocks of rows of ``skacv.linalg._copies.gather``'s copies ...
    gather_bytes: int = 2**20
    #: ... in threads from this size of the copy on
    gather_threads_min_bytes: int = 16 * 2**20
    #: scratch memory from this size on is a private anonymous mapping (``None``: NumPy's)
    scratch_mmap_min_bytes: int | None = 64 * 2**20
    #: the side of the square blocks of ``skacv.linalg._copies.transposed`` ...
    transpose_block: int = 256
    #: ... into a mapping from this size on
    transpose_mmap_min_bytes: int = 4 * 2**20
    #: blocks of rows when a Gram matrix of a few columns is formed by blocks
    gram_block_bytes: int = 64 * 2**20
    #: work below this runs with one BLAS thread
    small_blas_flops: float = 1e8
    #: largest order of a symmetric factorisation run with one BLAS thread
    one_thread_order: MappingProxyType = _frozen({"cholesky": 2500, "eigvalsh": 800,
                                                  "eigh": 1000})
    #: data cache of each level where the system does not say
    default_cache_bytes: MappingProxyType = _frozen({1: 32 * 2**10, 2: 512 * 2**10,
                                                     3: 16 * 2**20})
    #: the CPU's caches instead of the system's report (``None``: the report)
    cpu_caches: MappingProxyType | None = None
    #: the last-level cache counted at most this much per CPU that shares it
    last_level_per_cpu_max: int = 32 * 2**20
    #: largest symmetric eigenproblem given to LAPACK (larger: Lanczos)
    dense_eig_size: int = 300
    #: Gram eigenvalues in single precision from this order on
    eigvalsh_float32_min_order: int = 1000
    #: memory of a Lanczos basis
    lanczos_basis_bytes: int = 256 * 2**20
    #: the step size's Lanczos on a float32 copy of a dense float64 ``X~`` of at
    #: least this many bytes, its top Ritz vector certified in float64 (``None``: never) ...
    lipschitz_single_min_bytes: int | None = 4 * 2**20
    #: ... after this many float64 steps without settling ...
    lipschitz_single_after: int = 6
    #: ... stopped where its residual is this share of ``lipschitz_tol``
    lipschitz_single_rtol_share: float = 0.9
    #: rows of a panel of the stacked folds' pass: cache share, largest product, most rows
    fold_panel_cache_share: float = 0.75
    fold_panel_max_product: int = 10**6
    fold_panel_rows: int = 256
    #: groups of rows of a pass, run in threads ...
    pass_groups: int = 2
    #: ... from a copy of ``X`` of this many bytes (``None``: the last-level cache's share)
    pass_groups_min_bytes: int | None = None
    #: the pass's products prepared for SciPy's BLAS, called without the GIL ...
    prepared_products: bool = True
    #: ... bound to NumPy's OpenBLAS where found (``"numpy"``) or SciPy's (``"scipy"``)
    prepared_blas: str = "numpy"
    #: the stacked folds may run in the covariance form ...
    fold_covariance: bool = True
    #: ... its memory-bound flops counted this many times unless in the level-2 cache
    fold_covariance_step_cost: float = 4.0
    #: smallest copy of ``X`` whose folds run in the rotated layout
    rotated_min_bytes: int = 2**20
    #: speed per flop of the chains' matrix products against the fit's products
    chain_gemm_advantage: float = 8.0
    #: fewest columns a chains' matrix product is counted as
    chain_min_columns: int = 16
    #: restricted Gram products of at most this many columns run as blocked matrix-vector products
    chain_gemv_max_columns: int = 4
    #: restricted Gram products of at least this many columns run by panels ...
    chain_gram_panel_min_columns: int = 4
    #: ... of this share of the level-2 cache ...
    chain_gram_panel_cache_share: float = 0.5
    #: ... where their block is at most this share of the last-level cache
    chain_gram_panel_llc_share: float = 0.5
    #: the chains' primal products of at most this many columns run by thin panels ...
    chain_panel_max_columns: int = 8
    #: ... and at least this many (fewer: matrix-vector products on the panels)
    chain_panel_min_columns: int = 0
    #: the values of those fields for OpenBLAS kernels outside ``wide_blas_kernels``
    narrow_blas_panels: MappingProxyType = _frozen({"chain_panel_max_columns": 4,
                                                    "chain_panel_min_columns": 3,
                                                    "kernel_rhs_multiple": 4,
                                                    "kernel_gemv_tail": 2})
    #: OpenBLAS kernel sets that keep the thin panels' defaults
    wide_blas_kernels: tuple = ("SkylakeX", "Cooperlake", "SapphireRapids")
    #: a thin panel's bytes, divided by the product's columns ...
    chain_panel_bytes: int = 2 * 2**20
    #: ... with several BLAS threads from a restricted design of this size on
    chain_panel_threads_min_bytes: int = 16 * 2**20
    #: chains of at most this work are never refused by a ``risk_time_budget``
    risk_cheap_flops: float = 4e9
    #: blocks of rows of the chains' fused primal products (``None``: two products)
    chain_fused_bytes: int | None = 2 * 2**20
    #: groups of columns in which the chains advance, in cache
    chain_chunk_bytes: int = 2**20
    #: largest restricted Gram matrix kept for a warm-started refit
    chain_gram_cache_bytes: int = 256 * 2**20
    #: extra rows (in steps) a continued chain accepts to reuse the kept copy of ``X~``
    chain_columns_reuse_steps: float = 4.0
    #: smallest saving for which the chains split into forward and backward halves
    chain_split_min_gain: float = 1.2
    #: fewest final steps on a fixed support that take the settled form
    settled_min_tail: int = 512
    #: ... unless its head (shared chains, quadratic in the settled step) costs
    #: more than this times the pooled chain over the whole path
    settled_head_max_ratio: float = 20.0
    #: the robust traces take a stretch of one map in its eigenbasis where it pays
    curvature_stretches: bool = True
    #: ... whose readout of the sources on rows of another curvature runs in blocks
    #: of at most this many rows (or sources) times directions times probes
    curvature_block_entries: int = 2**19
    #: ... and reads those rows in groups of at most this many, sorted by the sources
    #: where they differ
    curvature_row_group: int = 64
    #: steps between the settled form's looks for decayed sources (``None``: never)
    settled_drop_check: int | None = 32
    #: a stationary settled form convolves by FFT while its correction's inverse
    #: amplifies at most this much (``d sum |h|``); beyond, the recursion
    settled_fft_max_gain: float = 1e4
    #: rounds of batched active-set guesses before each left-out Lasso problem whose
    #: support moves is solved alone (converged leave-one-out)
    loo_batch_rounds: int = 8
    #: ... while the last round settled at least this share of its samples
    loo_batch_settle: float = 0.25
    #: the Lasso's samples solved alone take their left-out exact path (lars_path) where
    #: n_features >= this times n_samples (feature-sign steps below)
    loo_homotopy_min_aspect: float | None = 1.0
    #: left-out runs multiply by the Gram matrix in float32 from this many coefficients
    loo_float32_min_features: int = 256
    #: left-out runs of an l1 path step only the rows where they differ from the fit
    #: from this many coefficients on
    loo_live_rows_min_features: int = 64
    #: ... and on every row where those number more than this share of them
    loo_live_rows_max_share: float = 0.5
    #: ... for this many steps before the rows are counted again
    loo_live_rows_recheck: int = 10
    #: left-out runs keep the Gram matrix up to this many features a sample
    loo_gram_max_aspect: float = 8.0
    #: ... and multiply by its columns where they number at most this many a sample
    #: (by X~ and X~^T above)
    loo_gram_max_columns: float = 4.0
    #: fewest features whose folds run in the rotated layout
    rotated_min_features: int = 64
    #: a search fits a path costing less than this in one go, not in stages ...
    stage_min_flops: float = 5e8
    #: ... this for a linear method with the spectral risk ...
    stage_min_flops_linear: float = 5e9
    #: ... and this (on the fit alone) for a risk path of Jacobian chains
    stage_min_flops_chains: float = 0.0
    #: a staged path still improving grows by this fraction ...
    stage_growth: float = 0.5
    #: ... and by this one when its criterion is the chains' ``risk_path_``
    stage_growth_chains: float = 1.0
    #: ``criterion="auto"`` counts block products this many times faster per flop ...
    auto_blas3_speedup: float = 5.0
    #: ... and sizes the leave-one-out subsample up to this work
    auto_cheap_flops: float = 5e9
    #: FISTA steps of the Lasso path between two duality-gap checks
    path_check_every: int = 5
    #: slack of the path's strong rule (``1``: the sequential strong rule) ...
    path_strong_rule_slack: float = 0.5
    #: ... after a working set solved by coordinate descent
    path_descent_rule_slack: float = 2.0
    #: a working set's coordinate descent stops at this share of the path's duality gap
    path_descent_gap_share: float = 0.9
    #: most rows of a ``p > n`` Lasso path read off the exact homotopy path (``None``: never)
    path_lars_max_samples: int | None = 100
    #: ... stopped after this many kinks per row
    path_lars_kinks_per_sample: int = 4
    #: most columns of a first working set: ``max(path_work_min, 4 |support|)``
    path_work_min: int = 100
    #: the exact finish: largest support share, products share, most CG iterations
    path_finish_max_ratio: float = 0.5
    path_finish_share: float = 0.25
    path_finish_maxiter: int = 100
    #: objective increases that end a solve in the rank-one metric
    path_metric_max_restarts: int = 3
    #: Lanczos steps of a working set's step-size estimate
    path_lanczos_steps: int = 4
    #: the elastic net's df from the support's eigenvalues once it holds at this many
    #: penalties in a row (``None``: never)
    ridge_df_spectrum_repeats: int | None = 2
    #: smallest ``tol`` the covariance form of the path certifies
    covariance_path_min_tol: float = 1e-10
    #: the rank-one metric's margin and Lanczos steps
    metric_margin: float = 1.25
    metric_lanczos_steps: int = 6
    #: EigenPro's products in float32 while their rounding stays below this share of a step
    eigenpro_rounding_tol: float = 2e-2
    #: ``fold_dtype="auto"`` runs the stacked folds in float32 where the data's sums of
    #: squares lie within these multiples of its smallest normal and largest values
    single_sums_range: tuple = (2.0**20, 2.0**-40)
    #: EigenPro's kernel products take their columns padded to a multiple of this
    kernel_rhs_multiple: int = 16
    #: ... and up to this many columns past a multiple of ``kernel_gemm_block``
    #: (at least one) run as matrix-vector products on the block (0: none)
    kernel_gemv_tail: int = 0
    kernel_gemm_block: int = 8
    #: a fused kernel product over more rows ``B`` of ``k(X, X[B])`` than this runs by
    #: blocks of this many of them, their products summed
    kernel_column_block: int = 4096
    #: EigenPro keeps the kernel matrix within this share of ``working_memory``: the
    #: whole of it, or its leading rows where they are at least this share of them
    kernel_matrix_share: float = 1.0
    kernel_rows_min_share: float = 0.25
    #: EigenPro's Nystrom eigensystem in float32 from this order; its zero floor;
    #: float64 where the flattened directions reach below the trust ratio
    eigenpro_eigh_float32_min_order: int = 300
    eigh_float32_floor: float = 1e-6
    eigh_float32_trust: float = 3e-6
    #: the float64 one's floor under the automatic q rule (held-out rows)
    eigh_float64_floor: float = 1e-12
    #: ``precision="auto"`` keeps a float64 kernel matrix up to this many rows
    eigenpro_float64_max_rows: int = 500
    #: ``precision="empirical"`` prepared at fit time up to this many features
    empirical_max_features: int = 2000
    #: the fit loop writes what the estimates would compute again
    loop_records: bool = True
    #: the stacked folds take the covariance form wherever they may
    fold_covariance_always: bool = False
    #: the chains' restricted Gram matrix: ``"auto"``, ``"never"`` or ``"always"``
    chain_gram: str = "auto"
    #: the step where the forward and backward chains meet (``None``: the cheapest)
    chain_split: int | None = None
    #: threads of a large copy (``None``: the BLAS threads)
    gather_threads: int | None = None
    #: most groups of a pass taking the prepared products (``None``: every group)
    prepared_groups: int | None = None
    #: the full-data fit beside the stacked folds (``None``: where that pays)
    fit_beside: bool | None = None
    #: K-fold CV's candidates defer their full-data fit to the selection where they may
    defer_full_fit: bool = True
    #: ``search="path"`` with K-fold CV runs every alpha's folds in one block where it may
    stack_grid: bool = True
    #: ... in blocks whose iterates fill at most this share of the level-2 cache
    grid_block_cache_share: float = 0.75
    #: ... and advances only the groups whose paths go on (the others' ended)
    retire_grid_groups: bool = True
    #: margin of the Lasso path's plain FISTA step ``1 / (m L + l2)``
    path_step_margin: float = 1.0
    #: the stacked folds' buffer of iterates for the held-out errors, reused chunk after chunk
    fold_paths_chunk_bytes: int = 2 * 2**20
    #: the stacked folds of an l1 penalty step on a certified working set of features ...
    fold_screening: bool = True
    #: ... and so does a fit's own trajectory (the fit loop) ...
    trajectory_screening: bool = True
    #: ... from this step on (a shorter path does not pay back the working set's copies) ...
    trajectory_screening_after: int = 64
    #: ... of designs of at least this many features ...
    screening_min_features: int = 256
    #: ... and a block's copy of ``X`` of at most these bytes (the working set keeps another)
    screening_max_bytes: int = 256 * 2**20
    #: ... refreshed when the steps' surplus columns outweigh this many passes over all
    screening_refresh_passes: float = 1.0
    #: ... and left for the rest of a stage where its steps computed more than this share
    screening_max_share: float = 0.5
    #: ... counting a step's fixed work as this many entries of the iterates
    screening_step_overhead: int = 8192
    #: ... and taken again after at least this many steps over all of them (twice as many each time)
    screening_retry_steps: int = 16
    #: the path's Fortran-ordered working sets copy rows of a kept transposed ``X~`` up to this size
    path_transposed_max_bytes: int = 256 * 2**20

    def __reduce__(self):
        """Pickled with its mappings as dicts (a mapping proxy does not
        pickle): a fitted estimator keeps its design, which carries it."""
        return _unpickle, ({f.name: dict(v) if isinstance(v, MappingProxyType) else v
                            for f in dataclasses.fields(self)
                            for v in [getattr(self, f.name)]},)

    def block_panel_rows_for(self, n_features):
        """Most rows in a panel of a block of columns of rows ``n_features`` long."""
        if n_features <= self.narrow_features:
            return self.narrow_panel_rows
        return self.block_panel_rows


def _unpickle(fields):
    return SpeedPolicy(**{k: MappingProxyType(v) if isinstance(v, dict) else v
                          for k, v in fields.items()})


def openblas_records(inspect=threadpool_info):
    """threadpoolctl's records (``inspect``: its ``threadpool_info``) of the
    OpenBLAS libraries loaded, NumPy's first; none where threadpoolctl
    cannot inspect a library."""
    try:
        loaded = inspect()
    except Exception:  # a library it cannot inspect
        return []
    found = [info for info in loaded
             if info.get("user_api") == "blas" and info.get("internal_api") == "openblas"]
    return sorted(found, key=lambda info: "numpy" not in str(info.get("filepath") or ""))


def blas_kernels(inspect=threadpool_info):
    """The kernel set (``architecture``) of NumPy's OpenBLAS (else of the
    first found), or ``None`` for another BLAS or none found."""
    found = openblas_records(inspect)
    return found[0].get("architecture") if found else None


def kernels_policy(kernels):
    """The default :class:`SpeedPolicy` where NumPy's BLAS is an OpenBLAS
    running the kernel set ``kernels`` (``None``: another BLAS, or none
    found): ``narrow_blas_panels`` for kernels outside ``wide_blas_kernels``
    (the tests' ``kernels_policy`` fixture pins them with it)."""
    policy = SpeedPolicy()
    if kernels is not None and kernels not in policy.wide_blas_kernels:
        policy = dataclasses.replace(policy, **policy.narrow_blas_panels)
    return policy


def _machine_policy():
    """The default :class:`SpeedPolicy` of this machine's BLAS kernels."""
    return kernels_policy(blas_kernels())


_in_force = InForce(_machine_policy())


def get_policy():
    """The :class:`SpeedPolicy` in force."""
    return _in_force.policy


def current_policies():
    """``(speed, statistics)``: the :class:`SpeedPolicy` and the
    :class:`~skacv._statistics.StatisticalPolicy` in force; the one read of
    the ambient policies, where a computation starts."""
    return get_policy(), get_statistics()


@contextlib.contextmanager
def policy_context(**changes):
    """Change fields of the speed policy within a ``with`` block, from the
    policy in force when the block starts.

    Mappings (``one_thread_order``, ``default_cache_bytes``) are merged into
    the current ones. An unknown field raises ``TypeError``.

    Examples
    --------
    >>> from skacv._policy import get_policy, policy_context
    >>> with policy_context(covariance_max_features=0):
    ...     get_policy().covariance_max_features
    0
    >>> get_policy().covariance_max_features
    2000
    """
    current = _in_force.policy
    for name in ("one_thread_order", "default_cache_bytes"):
        if name in changes:
            changes[name] = MappingProxyType({**getattr(current, name), **changes[name]})
    if changes.get("cpu_caches") is not None:
        changes["cpu_caches"] = MappingProxyType({**current.default_cache_bytes,
                                                  **changes["cpu_caches"]})
    with _in_force.replaced(dataclasses.replace(current, **changes)) as new:
        yield new
