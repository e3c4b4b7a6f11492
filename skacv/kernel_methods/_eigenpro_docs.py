"""Shared docstring sections of the EigenPro estimators."""

_DOC_PARAMS = """
    Parameters
    ----------
    kernel : {"gaussian", "laplacian", "matern"} or callable, default="gaussian"
        ``exp(-d^2 / (2 sigma^2))``, ``exp(-d / sigma)`` or the Matern kernel
        (``kernel_params={"nu": 1.5}`` by default), ``d`` the Euclidean
        distance and ``sigma`` the ``bandwidth``; a callable
        ``kernel(X, Y, **kernel_params)`` returns the kernel matrix.
        ``"gaussian"`` is scikit-learn's ``rbf_kernel`` with ``gamma = 1 / (2
        sigma^2)`` and ``"matern"`` its ``Matern(length_scale=sigma, nu)``;
        ``"laplacian"`` is Ma & Belkin's, on the Euclidean distance, not
        scikit-learn's ``laplacian_kernel`` (L1 distance): pass
        ``sklearn.metrics.pairwise.laplacian_kernel`` as a callable for that
        one.
    bandwidth : {"median", "scale"} or float, default="median"
        ``sigma``. ``"median"``: the median distance between two rows (the
        median heuristic), over the pairs of 1000 draws of the (weighted)
        rows; ``"scale"``: ``sqrt(n_features * Var(X))`` (``E ||x - z||^2 = 2
        sigma^2``). Both are equivariant to a common scaling of the features,
        so standardise features of different units first.
    kernel_params : dict or None, default=None
    n_components : "auto" or int, default="auto"
        Number ``q`` of flattened eigendirections. ``"auto"``: the largest
        ``q <= 1000`` whose critical batch ``beta_P(q) / lambda_P(q) + 1``
        does not exceed the subsample size (Ma & Belkin 2019), ``beta_P(q)``
        the largest diagonal of the EigenPro kernel of ``q`` components over
        500 rows outside the subsample (on its own rows it vanishes as ``q``
        nears the subsample size, also along noise directions), among the
        eigenvalues the eigensystem resolves (above ``1e-12 lambda_1``, in
        float64 where float32's floor would end ``q``); when the subsample is
        the whole training set, the same rule on a random half of the rows
        with the other half held out (every eigenvalue above ``1e-8
        lambda_1`` flattened all but the noise's directions at once: on 250
        rows test errors 29 times tuned kernel ridge's). 0
        gives plain kernel SGD. A fit whose training mse rises while above
        0.3 of its start warns (``ConvergenceWarning``: too few flattened
        directions or too small a batch for the bandwidth).
    subsample_size : "auto" or int, default="auto"
        Draws ``M`` for the Nystrom eigensystem; ``"auto"``: 2000 (12000 from
        1e5 samples) from 4000 (24000) samples on; on fewer ``n``,
        ``2000 (n / 4000)^2`` and at least 300 (300 of 1257 digits, 1125 of
        3000 rows; the statistical policy's ``eigenpro_subsample_*`` fields);
        every row where fewer rows than the draws would stay outside (below
        600 rows: they check ``lambda_P`` and bound ``beta_P``; the policy's
        ``eigenpro_heldout_min``). The set-up costs
        ``O(M^2 d + M^2 min(q, M))``.
    batch_size : "auto" or int, default="auto"
        ``"auto"``: the critical batch ``m*`` (full batch when it is close to
        ``n``, see above); at least ``n`` gives full-batch preconditioned
        gradient descent.
    step_size : "auto" or float, default="auto"
        Step ``eta`` per batch (the update is ``eta / m`` times the batch sum).
        ``"auto"``: Ma, Bassily & Belkin's rule (module docstring).
    max_iter : "auto" or int, default="auto"
        Total number of epochs (with ``warm_start``, counted over all calls).
        ``"auto"``: the epochs grow while the risk estimate (see
        ``estimate_risk``, computed in this mode) improves: they stop once its
        best has not fallen by 0.5 % over the last 3 epochs (or at 300), and
        the model keeps the epoch of the smallest estimate
        (``selected_iter_``). Once the estimate is flagged for near
        interpolation or its departure from GCV (``risk_reliable_``, not
        for the leverage spread alone) it cannot choose: the epochs go on to the
        ridgeless limit (until the training error falls below ``1e-4`` of
        its start, or stalls in the same way) and the model keeps the last
        one.
    warm_start : bool, default=False
        Continue the previous fit on the same data for ``max_iter - n_iter_``
        more epochs (same preconditioner, step and random stream: the path is
        the one a single fit with the final ``max_iter`` follows). With
        ``estimate_risk`` the chains of the estimate are kept for this.
    estimate_risk : bool, default=False
        Estimate the out-of-sample squared error at the end of every epoch
        (``risk_path_``) with the memory-matrix estimate along the SGD path
        (Bellec & Tan 2024; for mini-batches, Tan & Bellec 2024's form with
        batch-masked residuals):
        the Jacobian traces of a step with respect to an earlier one depend
        on their lag and on the earlier step's position in its epoch, so
        Hutchinson chains started at ``min(S, n_probes)`` positions of the
        first epoch (``S`` steps per epoch; ``n_probes // min(S, n_probes)``
        probes each), advanced with the kernel columns the training computes
        anyway, give them all. Costs one extra pass over the kernel matrix
        (the injections) and about ``n_probes`` more right-hand sides in
        every batch product: linear in the number of steps.
        ``risk_reliable_`` flags the epochs from which the path nearly
        interpolates or the estimate departs from GCV (see there). Nothing is
        guaranteed for non-linear kernels. With a linear kernel on Gaussian
        features, full batch is Bellec & Tan's estimate (consistent when the
        preconditioner is independent of the data; here it is built from
        training rows, which biases early iterates); its measured accuracy
        is in docs/internals.rst.
    n_probes : "auto", int or None, default="auto"
        Hutchinson probes of the risk estimate (in all, at least one per
        chain); ``None``: exact traces (``n`` probes at every position). An
        integer is used as given. ``"auto"``: as many as the estimate's
        precision needs, 5 to 10: the fewest whose relative spread of
        ``risk_path_`` in the form of Hutchinson's bound, ``sqrt(2 / (m
        n))`` for ``m`` Rademacher probes, is at most 0.6 %: 10 probes up to
        6172 rows, 6 at 10000, 5 from 11112 (the same on every machine). The
        statistical policy's ``sgd_probes``, ``sgd_probes_min`` and
        ``sgd_probe_spread``; measurements in docs/benchmarks.rst.
    precision : {"auto", "float32", "float64"}, default="auto"
        Precision of the training's Gaussian kernel products (other kernels,
        callables and a sparse ``X``: float64). ``"float32"``: blocks computed and
        multiplied in single precision from centred rows, about twice as
        fast. The EigenPro kernel ``K_P`` is ``K`` minus a low-rank part that
        cancels all but ``1 / gain`` of it (``gain = lambda_1 / lambda_P``),
        so the rounding of a step is about ``1.2e-7 * gain`` of it (float32's
        epsilon): ``"auto"`` takes float32 when that is below ``2e-2`` (a gain
        below ``1.68e5``; the test errors of the two agreed within the paths'
        own spread up to gain 1.9e5, float32's 3.8 % worse at 3.5e5),
        float64 otherwise, and float64 where the whole kernel matrix
        fits in it and ``n`` is at most 500 (the speed policy's
        ``eigenpro_float64_max_rows``; the two cost about the same there);
        the kernel matrix is kept (in the training's precision) within
        ``working_memory`` (the speed policy's ``kernel_matrix_share`` of it):
        the whole of it up to 16384 rows in float32 at the default 1024 MiB,
        else its leading rows where they are at least a quarter of them (up
        to 32768 rows), the others' blocks computed at every step; the
        Nystrom eigenfunctions at the
        training rows come from the same blocks (kept in float64). The
        coefficients and the predictions stay in float64; the eigensystem
        too, except that of a subsample of at least 300 rows that is not the
        whole data (the speed policy's ``eigenpro_eigh_float32_min_order``):
        float32, half the time, its eigenvalues within about ``4e-7 lambda_1``
        (rounding changes the preconditioner slightly, not the path's limit;
        the held-out ``lambda_P`` keeps the step stable).
    random_state : int, RandomState instance or None, default=None
        Seeds the subsample, the batches and the probes.
    verbose : int, default=0
        Print the set-up and the training mse of every epoch.
"""

_DOC_ATTRIBUTES = """
    Attributes
    ----------
    dual_coef_ : ndarray of shape (n_centres,) or (n_centres, n_outputs)
        ``alpha``: ``f(x) = k(x, X_fit_) @ dual_coef_`` (the regressor adds
        ``intercept_``), after epoch ``selected_iter_``.
    dual_coef_path_ : ndarray of shape (n_centres, n_outputs, n_iter_ + 1)
        ``alpha`` after every epoch (``predict_path``).
    selected_iter_ : int
        The epoch of ``dual_coef_``: ``n_iter_``, or with ``max_iter="auto"``
        the epoch of the smallest risk estimate among the unflagged ones
        (``n_iter_`` when the last epoch is flagged).
    X_fit_ : {ndarray, sparse matrix} of shape (n_centres, n_features)
        The centres: training rows of positive weight (CSR where ``X`` was
        sparse).
    bandwidth_ : float
    preconditioner_ : NystromPreconditioner
        Eigenvalues (``eigenvalues_``), the flattened spectrum
        (``flattened_spectrum_``), ``top_eigenvalue_`` ``lambda_P``, the
        ``gain_`` ``lambda_1 / lambda_P``, and the Nystrom rows
        ``subsample_indices_`` (into ``X_fit_``) with their draw counts
        ``subsample_counts_``.
    n_components_ : int
    subsample_size_ : int
    beta_ : float
        ``max_i k_P(x_i, x_i)`` of the EigenPro kernel.
    top_eigenvalue_ : float
        ``lambda_P`` used by the rules: the largest eigenvalue of the
        preconditioned operator, exact when the subsample is the whole data,
        else the larger of the Nystrom value and a held-out estimate (the
        Nystrom value underestimates it).
    precision_ : {"float32", "float64"}
        Precision of the training's kernel products.
    critical_batch_size_ : float
        ``m* = beta_ / top_eigenvalue_ + 1``.
    batch_size_ : int
        Draws per step (``n_eff`` for full batch).
    step_size_ : float
    n_iter_ : int
        Epochs run.
    n_steps_ : int
        SGD steps run.
    train_mse_path_ : ndarray of shape (n_iter_ + 1,)
        Training mean squared error (weighted, averaged over outputs) at the
        start and after every epoch.
    risk_path_ : ndarray of shape (n_iter_ + 1,)
        Estimated out-of-sample mean squared error (averaged over outputs)
        at the start and after every epoch; with ``estimate_risk=True`` or
        ``max_iter="auto"`` (which chooses the epoch by it).
    n_probes_ : int or None
        Probes of the risk estimate (``n_probes``, or the automatic count;
        ``None``: exact traces); with ``risk_path_``.
    risk_reliable_ : ndarray of bool, shape (n_iter_ + 1,)
        ``False`` from the first epoch on whose degrees of freedom reach
        ``0.99 n`` (near interpolation, where the estimate is noise), or
        whose estimate exceeds 1.5 times GCV on the same degrees of freedom
        (the memory terms carry the targets back: one-hot digits, 4-6 times
        the test error, 2.5-5.4 times GCV; within 1.06 times GCV on smooth
        regressions); and, with a warning
        (:class:`~skacv.exceptions.UnreliableEstimateWarning`) but the epochs
        and their choice unchanged, from the first epoch whose
        ``risk_leverage_spread_`` exceeds 0.1 by two standard errors of its
        probe noise (a delete-one-probe jackknife): the estimate's traces see the
        smoother's diagonal through its mean alone, and its level fell 14-47 %
        below the test error there (one-hot digits from epochs 14-23 on); no
        epoch of the accurate problems of docs/benchmarks.rst was flagged.
    risk_leverage_spread_ : ndarray of shape (n_iter_ + 1,)
        ``Var(d) / (1 - mean(d))^2`` of the diagonal ``d`` of the fit's
        smoother ``S_t`` (``f_t = S_t y``) at the start and every epoch,
        from up to 5 of the probes (3 from 8000 rows on) fitted as targets
        (Hutchinson's diagonal, its probe noise taken off; exact with
        ``n_probes=None``; NaN with one probe, and no flag with two: no
        standard error): the relative size
        of the second-order term a trace form drops from ``sum_i r_i^2 / (1 -
        d_i)^2``; with ``risk_path_``.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
"""
