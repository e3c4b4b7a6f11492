"""The speed policy: every cost model, threshold and machine constant that
chooses *how* skacv computes something, in one frozen dataclass.

Nothing here changes a result beyond rounding: each field picks between
implementations that compute the same numbers (a covariance form or the
products with ``X``, one pass over row panels or two products, LAPACK or
Lanczos, one BLAS thread or several, panel and block sizes; a solver's
internal choices, to the same tolerance). The constants that change the
numbers (tolerances, patience, sample sizes, reliability thresholds) are
fields of a second frozen dataclass, :class:`skacv._statistics.StatisticalPolicy`,
no other module of skacv binds a numeric tuning constant
(``tests/test_policy_constants.py``).

Both are read once, with :func:`current_policies`, where a fit, a search or
a public function starts (a :class:`~skacv.linalg._design.Design` captures
them at its construction, as ``design.policy`` and ``design.statistics``),
and handed down as arguments: no function below reads them, and the threads
a computation starts get the caller's. Tests and benchmarks change them for
a block with :func:`policy_context` (the test suite through its
``speed_policy`` fixture), never by patching module globals. The measurements behind the defaults
are in ``docs/speed_policy.rst`` ("Measurements behind the speed policy").
"""

import contextlib
import dataclasses
import threading
from types import MappingProxyType

import numpy  # noqa: F401  (NumPy's BLAS loaded before threadpoolctl looks for it)
from threadpoolctl import threadpool_info

from ._statistics import get_statistics

__all__ = ["SpeedPolicy", "blas_kernels", "current_policies", "get_policy", "kernels_policy",
           "policy_context"]


def _frozen(mapping):
    return dataclasses.field(default_factory=lambda: MappingProxyType(dict(mapping)))


@dataclasses.dataclass(frozen=True)
class SpeedPolicy:
    """Thresholds and sizes that choose between equal computations.

    Sizes are in bytes, work in flops.

    Attributes
    ----------
    gram_cache_size : int
        Gram matrices up to this order are kept in the design's cache once
        formed (:meth:`skacv.linalg._design.Design.gram`).
    fuse_min_bytes : int
        A dense ``X~`` of at least this many bytes is read by row panels in
        the fit loop: one pass over memory for ``X~ x`` and ``X~^T r``
        (:meth:`~skacv.linalg._design.Design.panel_products`).
    fuse_groups : int
        ... in this many groups of consecutive panels, run in threads with
        one BLAS thread each (one group reads memory more slowly than two
        multithreaded products).
    panel_bytes : int
        Bytes of ``X~`` in a panel of those passes: beyond a level-2 cache,
        within the last level's share of a core.
    columns_gather_share, columns_gather_min : float, int
        :meth:`~skacv.linalg._design.Design.columns_product` gathers the
        columns when there are at most this share of them (or this many),
        else multiplies by the dense vector: gathering ``m`` columns of a
        row-major ``X`` reads about ``m`` cache lines per row.
    correction_block_bytes : int
        The clipped extrapolation's sparse correction of the gradient points'
        residuals (:func:`skacv.estimates.risk._readout.subtract_correction`)
        gathers the columns it reads by blocks of about this many bytes.
    covariance_max_features : int
        The fit loop of full-batch least squares (and the folds and the
        alpha path) may run in the covariance form, one product with the p x
        p ``X~^T X~`` a step instead of two with the n x p ``X~``, for at
        most this many features, fewer than the samples ...
    covariance_gemm_advantage : float
        ... when it costs less: the Gram matrix's ``2 n p^2`` flops count at
        this many times the speed of a matrix-vector product (a matrix
        product is compute-bound, the steps' products memory-bound).
    covariance_path : bool
        The Lasso path of :func:`skacv.risk_alpha_path` may run in the
        covariance form (:func:`skacv.model_selection._lasso_spaces.covariance_path_pays`) ...
    path_products_per_alpha : float
        ... when the Gram matrix costs at most this many products with ``X~``
        per penalty (the path on the working sets' columns takes 40-140 per
        penalty: the optimality check, the step sizes, the FISTA steps).
    path_coordinate_descent : bool
        The Lasso path in the covariance form (few features) solves each
        alpha by scikit-learn's coordinate descent on ``X~^T X~``
        (``enet_path`` with ``precompute``) to the same duality gap, instead
        of FISTA on working sets (whose Python steps cost more on small
        designs).
    path_columns_descent : bool
        The Lasso path on the columns of ``X~`` (more features than samples,
        or beyond the covariance form's limits) solves each working set by
        scikit-learn's coordinate descent on its columns (``enet_path``
        without ``precompute``) to the same duality gap, where the columns
        are dense float64, the step is ``"auto"`` and no common factor
        dominates the working set's spectrum (there FISTA in the rank-one
        metric of ``path_metric`` takes fewer passes over the columns).
    path_support_finish : bool
        The Lasso path finishes a working set's FISTA on the support it has
        identified by conjugate gradients (an active-set Newton step,
        :class:`skacv.model_selection._lasso_path._SupportFinish`).
    path_metric : bool
        The Lasso path runs FISTA in a rank-one metric on working sets whose
        top eigenvalue stands far above the rest (a common factor of the
        features, :mod:`skacv.iterations._metric`) ...
    path_metric_min_ratio : float
        ... when its top eigenvalue is at least this many times the top of
        the rest (the metric's bound of it): below, plain FISTA's step
        ``1 / L`` loses little and the metric's Lanczos steps are saved.
    block_panel_rows : int
        At most this many rows in a panel of a block of a few columns ...
    narrow_features, narrow_panel_rows : int
        ... unless the rows are at most ``narrow_features`` long: then up to
        ``narrow_panel_rows`` (short rows make small panels whose calls cost
        more than their products).
    gather_bytes : int
        :func:`skacv.linalg._copies.gather` copies by blocks of rows of about
        this many bytes of ``X`` ...
    gather_threads_min_bytes : int
        ... in as many threads as there are BLAS threads from this size of
        the copy on (first touch of fresh memory scales with the threads).
    scratch_mmap_min_bytes : int or None
        Scratch memory of at least this many bytes (the chains' float32
        copy of ``X~``, the correction's columns) is a private anonymous
        mapping on Linux, without NumPy's huge-page advice
        (:func:`skacv.linalg._copies.fresh`; ``None``: always NumPy's).
    gram_block_bytes : int
        Rows of ``X~`` in a block of about this many bytes when a Gram matrix
        of a few columns is formed by blocks of rows
        (:func:`skacv.model_selection._converged_risk.binary_columns` and the
        indicators' Gram matrix of the Lasso path's df).
    small_blas_flops : float
        Work of fewer flops runs with one BLAS thread
        (:func:`skacv.utils._parallel.small_blas`): waking the threads costs
        more than small products save.
    one_thread_order : mapping of str to int
        Dense symmetric factorisations (``"cholesky"``, ``"eigvalsh"``,
        ``"eigh"``) of at most this order run with one BLAS thread
        (:func:`skacv.utils._parallel.factorization_blas`).
    default_cache_bytes : mapping of int to int
        The CPU's data cache of each level (1, 2 per core, 3 shared) where
        the system does not say.
    cpu_caches : mapping of int to int or None
        The CPU's data caches of levels 1, 2 and 3 in bytes, instead of what
        the system reports (:func:`skacv.utils._parallel.cache_bytes`; the
        last-level cache then counts as one CPU's; a level not given by
        :func:`policy_context`: ``default_cache_bytes``): tests pin a
        machine's caches with it. ``None``: the system's report.
    last_level_per_cpu_max : int
        The last-level cache counted at most this much per CPU that shares
        it (a virtual machine reports the host's whole cache).
    eigvalsh_float32_min_order : int
        The eigenvalues of a Gram matrix of at least this order (exact traces,
        the step size) in single precision
        (:meth:`skacv.linalg._design.Design.gram_eigenvalues`): half the time
        from 1000 on, within about ``1e-7`` of the largest.
    dense_eig_size : int
        Dense symmetric eigenproblems up to this dimension go to LAPACK,
        larger ones to Lanczos (:func:`skacv.linalg._linalg.top_eigenvalue`
        and every step-size and spectrum computation).
    lanczos_basis_bytes : int
        Memory of the Lanczos basis of
        :func:`skacv.linalg._linalg.lanczos_top_eigenvalues`.
    fold_panel_cache_share, fold_panel_max_product, fold_panel_rows : float, int, int
        Rows of a panel of the stacked folds' pass
        (:func:`skacv.model_selection._fold_designs.fold_panel_rows`): this share of
        the level-2 cache, products of at most this many multiply-adds
        (BLAS's small-matrix kernels take them without packing their
        operands), at most this many rows.
    pass_groups : int
        The panels of a pass make this many groups of consecutive rows, each
        with its own sum of the gradient, run in threads ...
    pass_groups_min_bytes : int or None
        ... when the block's copy of ``X`` has more bytes than this; ``None``:
        than the last-level cache's share holds (read from memory the groups
        share the bandwidth well, from the cache they do not).
    prepared_products : bool
        The pass's products are prepared once per block for SciPy's BLAS and
        called without the GIL (:func:`skacv.linalg._blas.gemm_call`);
        ``False``: NumPy's products (the GIL's hand-overs between the
        groups' threads cost more than small products).
    fold_covariance : bool
        The stacked folds may run in the covariance form
        (:class:`skacv.model_selection._fold_designs.FoldCovariance`) where it costs
        less (:func:`skacv.model_selection._fold_designs.fold_covariance_pays`) ...
    fold_covariance_step_cost : float
        ... each flop of its memory-bound p x p products counted this many
        times unless the Gram matrices fit in the level-2 cache.
    chain_gemm_advantage : float
        The risk estimate's Jacobian chains (products with the support's
        Gram matrix, many columns: compute-bound) run this many times
        faster per flop than the fit's matrix-vector products
        (memory-bound): the cost model of :func:`skacv.estimates.risk._estimate.chain_cost_in_fits`.
    chain_min_columns : int
        A matrix product of the chains with fewer columns than this costs
        about as much as one with this many (a skinny matrix product is
        bound by reading the matrix, not by its flops): the columns the
        restricted Gram matrix's cost model
        (:func:`skacv.estimates.risk._propagate.maybe_gram`) counts at least ...
    chain_gemv_max_columns : int
        ... except a product of at most this many columns, which runs as
        matrix-vector products on blocks of rows in cache (the restricted
        Gram matrix's, :func:`skacv.estimates.risk._propagate.gram_product`)
        and is counted as twice its columns (``0``: always matrix products).
    chain_gram_panel_min_columns : int
        The restricted Gram matrix's products with at least this many
        columns (and at most ``chain_gemv_max_columns``) run by panels of
        its rows, one small matrix product a panel
        (:func:`skacv.estimates.risk._propagate.gram_product`) ...
    chain_gram_panel_cache_share : float
        ... of this share of the level-2 cache ...
    chain_gram_panel_llc_share : float
        ... where the product's block of the Gram matrix is at most this
        share of the last-level cache (beyond, read from memory, the
        matrix-vector products on blocks in cache win).
    chain_panel_max_columns : int
        The chains' primal products ``X~_S^T (X~_S V)`` with at most this
        many columns run by thin panels of rows of ``X~``, both products of
        a panel in the transposed layout while it is in cache
        (:func:`skacv.estimates.risk._propagate.primal_product`; ``0``:
        never) ...
    chain_panel_min_columns : int
        ... and at least this many: a product of fewer columns runs as
        matrix-vector products on the same panels, a panel's two products
        a column while it is in cache ...
    narrow_blas_panels : mapping
        ... with these values of the two fields above (and of
        ``kernel_rhs_multiple``) where NumPy's BLAS is
        an OpenBLAS running kernels outside ``wide_blas_kernels``
        (:func:`blas_kernels`; read once, when skacv is imported): there
        the small matrix products of 2 columns cost about 2.6 times one
        column's and those of 5-8 columns more than blocked matrix
        products, while the AVX-512 kernels run them at about one column's
        cost.
    wide_blas_kernels : tuple of str
        OpenBLAS's kernel sets (its ``architecture``, as threadpoolctl
        reports it) whose small matrix products keep the thin panels' defaults.
    chain_panel_bytes : int
        ... a panel of this many bytes divided by the product's columns
        (larger ones leave the BLAS's small-matrix kernels) ...
    chain_panel_threads_min_bytes : int
        ... and with several BLAS threads only on a restricted design of at
        least this many bytes (below, the threads of one matrix product
        win).
    risk_cheap_flops : float
        Chains of at most this many flops (a fraction of a second) are never
        refused by a ``risk_time_budget`` (:func:`skacv.get_config`).
    chain_fused_bytes : int or None
        The Jacobian chains' primal products ``X~_S^T (X~_S V)`` run by
        blocks of rows of ``X~`` of about this many bytes (at least 8 rows),
        both products of a block while it is in cache
        (:func:`skacv.estimates.risk._propagate.primal_product`; ``None``:
        two products over all the rows, reading ``X~`` twice).
    chain_chunk_bytes : int
        The risk estimate's Jacobian chains are advanced by groups of
        columns of about this many bytes, in cache (tangent, traces and
        store in one pass; :func:`skacv.estimates.risk._propagate.chunk_columns`).
    chain_gram_cache_bytes : int
        Largest restricted Gram matrix kept with the chains' warm-start
        state for a longer refit.
    chain_columns_reuse_steps : float
        A continued chain (a longer warm-started refit, a search's next
        stage) reads the restricted copy of ``X~`` the previous fit kept
        instead of gathering its own when the copy holds every column
        active after ``x^0`` and its row order costs the new steps at most
        this many times the copy's columns in extra rows read
        (:func:`skacv.estimates.risk._propagate.kept_order`; a gather by
        columns costs several steps' products).
    chain_split_min_gain : float
        The chains split into forward and backward halves only when the
        flop model says the split saves this factor (the backward steps
        mask, combine and read the block in separate passes;
        :func:`skacv.estimates.risk._chains.split_step`).
    settled_min_tail : int
        The settled form of the risk estimate
        (:class:`skacv.estimates.risk._settled.SettledMemory`) is used
        when the support stays fixed for at least this many final steps: its
        recursions cost a few array operations a step in Python, which the
        dense form's ``O(T^3)`` flops pass at a few hundred steps.
    settled_drop_check : int or None
        The settled form's row norms of the correction
        (:meth:`skacv.estimates.risk._settled.SettledMemory.inverse_row_norms`)
        look for decayed sources' columns to stop advancing every this many
        steps (a look costs about one step); ``None``: every column is
        advanced to the end (the plain reference, ``O(r T^2)``).
    loo_float32_min_features : int
        The left-out runs of leave-one-out (``loo_path_``) multiply their
        differences by the Gram matrix in float32 from this many
        coefficients on (float64 below): the differences are of order
        ``1 / n`` of the iterates, and the rounding moved ``loo_path_`` by
        at most 1e-7 relatively (against brute-force refits in
        ``tests/test_loo_fast.py``; 3e-8 at 1000 x 1500 with 300 steps).
    rotated_min_bytes, rotated_min_features : int
        Smallest dense copy of ``X`` and fewest features whose folds run in
        the ``"rotated"`` layout (:class:`skacv.model_selection._fold_designs.FoldDesigns`:
        no mask, the gradient product over the training folds only; short
        rows make long panels that stop at the folds' boundaries).
    stage_min_flops : float
        :class:`~skacv.TrajectoryEarlyStoppingCV` fits a path whose fit and
        estimates cost less than this in one go instead of in stages (then
        cut where the stages would stop: the same path): the fixed cost of a
        stage would exceed what stopping saves
        (:func:`skacv.model_selection._stages.can_stage`).
    stage_min_flops_linear : float
        The same for a linear method with the spectral risk, whose estimates
        cost the same at any length (stopping saves only fit steps).
    stage_min_flops_chains : float
        The same, counted on the fit alone (``4 n p max_iter``), for a risk
        path of Jacobian chains (ISTA, FISTA). Every stage sets its chains
        up again (the support's columns, the probes' images, the template,
        the readout), but the chains continue from stage to stage and a path
        fitted in one go runs, with its chains, to ``max_iter`` or to
        convergence: 0, every such path in stages (the natural 12-alpha
        search took 0.54-0.85x the CPU time of the one-go fits at 500 x
        1000 to 2000 x 1000 with the same choice, and 0.72-1.40x, median
        0.88x against 1.27x of LassoCV's, on eight small real designs;
        ``docs/speed_policy.rst``).
    stage_growth : float
        A staged path still improving at its end grows by this fraction of
        its length (:func:`skacv.model_selection._stages.next_stage`) ...
    stage_growth_chains : float
        ... and by this fraction when its criterion is ``risk_path_`` of
        the Jacobian chains, whose every stage restarts them (a copy of the
        support's columns, the probes' images, the readout).
    auto_blas3_speedup : float
        ``criterion="auto"``'s cost model of leave-one-out counts block
        products this many times faster per flop than matrix-vector products
        (:func:`skacv.model_selection._criteria.loo_cost_in_fits`) ...
    auto_cheap_flops : float
        ... and sizes the leave-one-out subsample up to this many flops when
        K-fold would cost less (:func:`skacv.model_selection._criteria.auto_criterion`).
    path_check_every : int
        FISTA steps of the Lasso path between two duality-gap checks on a
        working set (a check costs one product with ``X~_W^T``, half a step).
    path_strong_rule_slack : float
        The working set of ``alpha_k``: ``|X~_j^T r(alpha_{k-1})| / n >=
        alpha_k - slack (alpha_{k-1} - alpha_k)``, plus the previous support
        (``1``: the sequential strong rule, Tibshirani et al. 2012; ``0.5``
        keeps fewer columns for a few more optimality checks).
    path_work_min : int
        At most ``max(path_work_min, 4 |support|)`` columns in a first
        working set, which grows by at most its size (equicorrelated columns
        all pass the strong rule, and FISTA's step on them, ``1 / (rho |W|)``,
        would be tiny).
    path_finish_max_ratio, path_finish_share, path_finish_maxiter : float, float, int
        The exact finish (``path_support_finish``) on supports of at most this
        share of the samples (conjugate gradients slow down as the support
        nears ``n``, Marchenko-Pastur); while the products of the finishes
        that did not end their solve stay below this share of the FISTA
        steps; at most this many conjugate-gradient iterations a finish.
    path_metric_max_restarts : int
        Objective increases between checks that end a solve in the rank-one
        metric (each restarts the momentum).
    path_lanczos_steps : int
        Lanczos steps of the step-size estimate of each working set
        (warm-started; :mod:`skacv.model_selection._lasso_spaces`).
    covariance_path_min_tol : float
        The covariance form of the Lasso path certifies duality gaps down to
        this tolerance only (its quadratic forms of ``||r||^2`` cancel, about
        ``1e-13 ||y~||^2``): a smaller ``tol`` runs on ``X~``.
    metric_margin, metric_lanczos_steps : float, int
        The rank-one metric's ``b`` is this factor times the Lanczos estimate
        (this many steps, twice as many from a random start) of the top of
        ``H`` on the complement of ``u`` (a Ritz value, below the eigenvalue;
        :func:`skacv.iterations._metric.rank_one_metric`).
    eigenpro_rounding_tol : float
        EigenPro's products run in float32 (``precision="auto"``) when their
        rounding, amplified by the preconditioner's gain ``lambda_1 /
        lambda_P``, stays below this fraction of a step.
    kernel_rhs_multiple : int
        EigenPro's products of a kernel block (computed by panels in
        :class:`~skacv.kernel_methods._kernels.KernelOperator`) with two or
        more columns take them padded with zeros to a multiple of this
        many, faster on OpenBLAS's SkylakeX kernels (docs/benchmarks.rst,
        EigenPro); ``narrow_blas_panels`` sets 1 (no padding) elsewhere.
    eigenpro_subsample_max : tuple of (int, int, float)
        EigenPro's ``subsample_size="auto"``: the first number of draws, the
        second from the third's number of samples on (Ma & Belkin 2019's
        sizes), when that is at most half the data.
    eigenpro_eigh_float32_min_order, eigh_float32_floor : int, float
        EigenPro's Nystrom eigensystem of a subsample (not the whole data) of
        at least this order in float32 (half the time); eigenvalues below the
        float's fraction of the largest count as zero (docs/benchmarks.rst).
    eigenpro_float64_max_rows : int
        ``precision="auto"`` keeps a float64 kernel matrix up to this many
        rows, float32 beyond (twice faster an epoch at n = 5000).
    eigenpro_subsample_power, eigenpro_subsample_min : float, int
        Smaller data (``n`` below twice the first size ``M``): ``M (n / 2
        M)^p`` draws, ``p`` the first number, but at least the second (300
        of 1257 digits, 1125 of 3000 rows). The former ``(8 n^2)^(1/3)``
        (417 of 3000) flattened too few directions for the risk path to
        train before it stopped (docs/benchmarks.rst, EigenPro).
    empirical_max_features : int
        ``precision="empirical"`` (the debiasing's least-squares fit) is
        prepared at fit time up to this many features (a p x p Gram matrix
        and its Cholesky factor, ``n p^2`` operations); above, it is refused.
    loop_records : bool
        The full-batch fit loop writes what the estimates would otherwise
        compute again (``X~^T F`` of the residuals, ``X~ v^t`` of a clipped
        extrapolation's gradient points:
        :func:`skacv.estimators._setup.loop_buffers`); ``False``: the
        estimates compute them.
    fold_covariance_always : bool
        The stacked folds take the covariance form wherever they may (a
        partition of a dense ``X``, at most ``covariance_max_features``
        features), whatever its cost
        (:func:`skacv.model_selection._fold_designs.fold_covariance_pays`).
    chain_gram : {"auto", "never", "always"}
        The Jacobian chains' restricted Gram matrix
        (:func:`skacv.estimates.risk._propagate.maybe_gram`): where its flop
        model says it pays, never (every product a primal one), or over all
        the chains' columns from their first step.
    chain_split : int or None
        The step where the forward and backward chains meet
        (:func:`skacv.estimates.risk._chains.split_step`, at most the path's
        length); ``None``: where it costs the least.
    gather_threads : int or None
        Threads of a copy of at least ``gather_threads_min_bytes``
        (:func:`skacv.linalg._copies.gather`); ``None``: the BLAS threads.
    prepared_groups : int or None
        At most this many groups of a stacked folds' pass take the prepared
        products of ``prepared_products`` (``None``: every group); where one
        group does not, none does.
    fit_beside : bool or None
        The K-fold search runs the full-data fit beside the stacked folds
        (``True``), after them (``False``), or where that pays (``None``,
        :func:`skacv.model_selection._kfold.fit_beside`).
    path_step_margin : float
        The Lasso path's plain FISTA step on a working set is ``1 / (m L +
        l2)``, ``L`` the Lanczos estimate of its top eigenvalue, ``m`` this
        margin; steps too long for it (``m`` below 1) diverge, and the
        working set is solved again with the exact top eigenvalue.
    """

    gram_cache_size: int = 2000
    fuse_min_bytes: int = 32 * 2**20
    fuse_groups: int = 2
    panel_bytes: int = 2 * 2**20
    columns_gather_share: float = 1 / 40
    columns_gather_min: int = 32
    correction_block_bytes: int = 64 * 2**20
    covariance_max_features: int = 2000
    covariance_gemm_advantage: float = 16.0
    covariance_path: bool = True
    path_products_per_alpha: float = 10.0
    path_coordinate_descent: bool = True
    path_columns_descent: bool = True
    path_support_finish: bool = True
    path_metric: bool = True
    path_metric_min_ratio: float = 4.0
    block_panel_rows: int = 200
    narrow_features: int = 32
    narrow_panel_rows: int = 4096
    gather_bytes: int = 2**20
    gather_threads_min_bytes: int = 16 * 2**20
    scratch_mmap_min_bytes: int | None = 64 * 2**20
    gram_block_bytes: int = 64 * 2**20
    small_blas_flops: float = 1e8
    one_thread_order: MappingProxyType = _frozen({"cholesky": 2500, "eigvalsh": 800,
                                                  "eigh": 1000})
    default_cache_bytes: MappingProxyType = _frozen({1: 32 * 2**10, 2: 512 * 2**10,
                                                     3: 16 * 2**20})
    cpu_caches: MappingProxyType | None = None
    last_level_per_cpu_max: int = 32 * 2**20
    dense_eig_size: int = 300
    eigvalsh_float32_min_order: int = 1000
    lanczos_basis_bytes: int = 256 * 2**20
    fold_panel_cache_share: float = 0.75
    fold_panel_max_product: int = 10**6
    fold_panel_rows: int = 256
    pass_groups: int = 2
    pass_groups_min_bytes: int | None = None
    prepared_products: bool = True
    fold_covariance: bool = True
    fold_covariance_step_cost: float = 4.0
    rotated_min_bytes: int = 2**20
    chain_gemm_advantage: float = 8.0
    chain_min_columns: int = 16
    chain_gemv_max_columns: int = 4
    chain_gram_panel_min_columns: int = 4
    chain_gram_panel_cache_share: float = 0.5
    chain_gram_panel_llc_share: float = 0.5
    chain_panel_max_columns: int = 8
    chain_panel_min_columns: int = 0
    narrow_blas_panels: MappingProxyType = _frozen({"chain_panel_max_columns": 4,
                                                    "chain_panel_min_columns": 3,
                                                    "kernel_rhs_multiple": 1})
    wide_blas_kernels: tuple = ("SkylakeX", "Cooperlake", "SapphireRapids")
    chain_panel_bytes: int = 2 * 2**20
    chain_panel_threads_min_bytes: int = 16 * 2**20
    risk_cheap_flops: float = 4e9
    chain_fused_bytes: int | None = 2 * 2**20
    chain_chunk_bytes: int = 2**20
    chain_gram_cache_bytes: int = 256 * 2**20
    chain_columns_reuse_steps: float = 4.0
    chain_split_min_gain: float = 1.2
    settled_min_tail: int = 512
    settled_drop_check: int | None = 32
    loo_float32_min_features: int = 256
    rotated_min_features: int = 64
    stage_min_flops: float = 5e8
    stage_min_flops_linear: float = 5e9
    stage_min_flops_chains: float = 0.0
    stage_growth: float = 0.5
    stage_growth_chains: float = 1.0
    auto_blas3_speedup: float = 5.0
    auto_cheap_flops: float = 5e9
    path_check_every: int = 5
    path_strong_rule_slack: float = 0.5
    path_work_min: int = 100
    path_finish_max_ratio: float = 0.5
    path_finish_share: float = 0.25
    path_finish_maxiter: int = 100
    path_metric_max_restarts: int = 3
    path_lanczos_steps: int = 4
    covariance_path_min_tol: float = 1e-10
    metric_margin: float = 1.25
    metric_lanczos_steps: int = 6
    eigenpro_rounding_tol: float = 1e-2
    kernel_rhs_multiple: int = 16
    eigenpro_subsample_max: tuple = (2000, 12000, 1e5)
    eigenpro_eigh_float32_min_order: int = 1000
    eigh_float32_floor: float = 1e-6
    eigenpro_float64_max_rows: int = 3000
    eigenpro_subsample_power: float = 2.0
    eigenpro_subsample_min: int = 300
    empirical_max_features: int = 2000
    loop_records: bool = True
    fold_covariance_always: bool = False
    chain_gram: str = "auto"
    chain_split: int | None = None
    gather_threads: int | None = None
    prepared_groups: int | None = None
    fit_beside: bool | None = None
    path_step_margin: float = 1.0

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


def blas_kernels(inspect=threadpool_info):
    """The kernel set (``architecture``) of the OpenBLAS that NumPy runs, as
    threadpoolctl reports it (``inspect``: its ``threadpool_info``), or
    ``None`` for another BLAS, none found, or libraries threadpoolctl cannot
    inspect."""
    try:
        loaded = inspect()
    except Exception:  # a library it cannot inspect: the defaults
        return None
    found = [info for info in loaded
             if info.get("user_api") == "blas" and info.get("internal_api") == "openblas"]
    ours = [info for info in found if "numpy" in str(info.get("filepath", ""))] or found
    return ours[0].get("architecture") if ours else None


def kernels_policy(kernels):
    """The default :class:`SpeedPolicy` where NumPy's BLAS is an OpenBLAS
    running the kernel set ``kernels`` (``None``: another BLAS, or none
    found): the dataclass's values, with ``narrow_blas_panels`` for kernels
    outside ``wide_blas_kernels``. Tests pin the kernels' fields with it
    (``tests/conftest.py``, the ``kernels_policy`` fixture)."""
    policy = SpeedPolicy()
    if kernels is not None and kernels not in policy.wide_blas_kernels:
        policy = dataclasses.replace(policy, **policy.narrow_blas_panels)
    return policy


def _machine_policy():
    """The default :class:`SpeedPolicy` of this machine: that of the kernels
    NumPy's OpenBLAS runs (:func:`kernels_policy` of :func:`blas_kernels`)."""
    return kernels_policy(blas_kernels())


_lock = threading.Lock()
_policy = _machine_policy()


def get_policy():
    """The :class:`SpeedPolicy` in force."""
    return _policy


def current_policies():
    """``(speed, statistics)``: the :class:`SpeedPolicy` and the
    :class:`~skacv._statistics.StatisticalPolicy` in force. The one read of
    the ambient policies: where a fit, a search or a public function starts
    (a :class:`~skacv.linalg._design.Design` at its construction), handed
    down as arguments from there (``tests/test_architecture.py``)."""
    return get_policy(), get_statistics()


@contextlib.contextmanager
def policy_context(**changes):
    """Change fields of the speed policy within a ``with`` block.

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
    global _policy
    current = _policy
    for name in ("one_thread_order", "default_cache_bytes"):
        if name in changes:
            changes[name] = MappingProxyType({**getattr(current, name), **changes[name]})
    if changes.get("cpu_caches") is not None:
        changes["cpu_caches"] = MappingProxyType({**current.default_cache_bytes,
                                                  **changes["cpu_caches"]})
    new = dataclasses.replace(current, **changes)
    with _lock:
        _policy = new
    try:
        yield new
    finally:
        with _lock:
            _policy = current

