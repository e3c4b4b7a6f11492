"""The numpydoc sections the least-squares trajectory regressors share
(:class:`~skacv.TrajectoryLasso`, :class:`~skacv.IterativeRidge`), and the
parameter ``X`` of the prediction methods (:func:`documents_x`)."""

import re

#: numpydoc attributes of the least-squares trajectory regressors
DOC_ATTRIBUTES = """
    Attributes
    ----------
    coef_path_ : ndarray of shape (n_features, n_iter_ + 1) or (n_targets, n_features, n_iter_ + 1)
        Every iterate, features first; column 0 is the starting point (zero).
        Memory: ``n_features * (max_iter + 1)`` floats (per target); a path
        above ``skacv.get_config()['path_memory_limit']`` is refused.

        **A 2-D y** (``(n_samples, n_targets)``, one column included, as
        scikit-learn's ``Lasso`` and ``Ridge``) fits one path per target
        (``estimators_``) with the same sample weights, and every attribute
        below is the targets' stacked along a leading target axis of length
        ``n_targets`` (``coef_`` of shape ``(n_targets, n_features)``,
        ``intercept_`` and ``step_size_`` of shape ``(n_targets,)``,
        ``risk_path_`` of shape ``(n_targets, n_iter_ + 1)``,
        ``risk_matrix_`` of shape ``(n_targets, n_iter_ + 1, n_iter_ + 1)``,
        ...), except ``n_iter_``, one int: every path runs exactly
        ``max_iter`` steps, so the stacked paths are rectangular without
        padding. A 1-D ``y`` keeps the shapes below.
    intercept_path_ : ndarray of shape (n_iter_ + 1,) or (n_targets, n_iter_ + 1)
        Intercept of every iterate (``y_mean - x_mean @ coef``, weighted).
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
        Last iterate, ``coef_path_[..., -1]``.
    intercept_ : float or ndarray of shape (n_targets,)
        ``intercept_path_[..., -1]``.
    n_iter_ : int
        Total number of iterations of the stored path (with ``warm_start`` it
        counts every call, like HistGradientBoosting's ``max_iter``); the same
        for every target of a 2-D ``y``.
    step_size_ : float or ndarray of shape (n_targets,)
        Step size used (``1 / L`` for ``step_size='auto'``). The targets of a
        2-D ``y`` share the set-up of a new path (step size, mini-batch seed,
        EigenPro's preconditioner), which depends on ``X`` and the weights
        only.
    estimators_ : list of n_targets estimators
        Only after a fit on a 2-D ``y``: the fit of each target, an estimator
        of this class fitted on its column, whose paths and estimates are
        the 1-D fit's on that column (to rounding at most: the targets share
        one centred design and its caches); its arrays are views of the
        stacked ones. Its methods serve one target: the debiasing methods
        (``debiased_coef``, ``coef_confidence_interval``,
        ``noise_variance_path``, ``excess_risk_path``) raise on a 2-D fit;
        call them on ``estimators_[k]``, as ``preconditioner_``
        (``IterativeRidge(solver="eigenpro")``) is read there.
    risk_path_ : ndarray of shape (n_iter_ + 1,) or (n_targets, n_iter_ + 1)
        Estimated out-of-sample prediction risk
        ``E[(y_new - x_new^T coef_t - intercept_t)^2]`` of every iterate
        (Bellec & Tan 2024). Only set when ``estimate_risk=True``.
    risk_matrix_ : ndarray of shape ([n_targets,] n_iter_ + 1, n_iter_ + 1)
        Estimated cross-iterate risks (its diagonal is ``risk_path_``), with
        a leading target axis for a 2-D ``y``.
        Only kept when it weighs at most ``risk_matrix_limit`` (1 MiB by
        default, ``n_iter_ <= 361``; :func:`skacv.set_config` raises it):
        a longer path keeps only the ``O(n_iter_)`` results.
    memory_matrix_ : ndarray of shape ([n_targets,] n_iter_ + 1, n_iter_ + 1)
        The memory matrix ``A`` used by the estimate (kept as ``risk_matrix_``).
    risk_reliable_ : ndarray of bool, shape (n_iter_ + 1,) or (n_targets, n_iter_ + 1)
        ``False`` at the iterates where ``risk_path_`` cannot be trusted:
        from the first iterate whose degrees-of-freedom fraction leaves
        ``[0, 1)`` or whose correction ``(I - A/n)^{-1}`` amplifies with
        cancellations (proximal momentum methods on ill-conditioned designs;
        see the user guide, "The fitted diagnostics"). A fit
        with flagged iterates warns (:class:`~skacv.exceptions.UnreliableEstimateWarning`)
        and :class:`TrajectoryEarlyStoppingCV` never selects them.
    risk_diagnostics_ : Bunch
        ``df_fraction``, ``amplification`` and ``support`` (arrays of shape
        ``(n_iter_ + 1,)``; ``support`` is ``None`` without an l1 penalty)
        behind ``risk_reliable_``; ``n_probes`` (int, the Hutchinson probes
        used; ``None`` for exact traces, the settled form of long paths and
        robust or mini-batch estimates, which do not record it) and ``probe_noise`` (float, the
        root-mean-square over the iterates of the relative standard error of
        ``risk_path_`` due to the probes, by a jackknife over groups of
        probes; measured only where ``n_probes="auto"`` chooses the pooled
        probes' number, 0.0 with the exact probes of a narrow design, else
        ``None``) and ``choice_noise`` (float or ``None``: the same for the
        differences between the iterates near the minimum, measured in a
        :class:`TrajectoryEarlyStoppingCV` of one grid point, whose probes
        grow for the choice of the iterate only). A 2-D ``y`` stacks each
        entry along a leading target axis (``None`` where no target has it,
        an object array where only some have it).
    noise_variance_path_ : ndarray of shape (n_iter_ + 1,) or (n_targets, n_iter_ + 1)
        Every iterate's estimate of the noise variance ``sigma^2``
        (``risk_path_`` minus the excess risk; Bellec & Tan 2024), **computed
        with the identity precision: right for standardised, uncorrelated
        features only.** For correlated features call
        ``noise_variance_path(precision)`` with their precision matrix, or
        ``"empirical"`` when ``n_samples > n_features``. Only set by
        least-squares fits with ``estimate_risk=True`` (full batch or SGD).
    excess_risk_path_ : ndarray of shape (n_iter_ + 1,) or (n_targets, n_iter_ + 1)
        The noise-free error ``(coef_t - beta)^T Sigma (coef_t - beta)`` of
        every iterate, with the same identity assumption
        (``excess_risk_path(precision)`` otherwise).
    loo_path_ : ndarray of shape (n_iter_ + 1,) or (n_targets, n_iter_ + 1)
        Leave-one-out squared error of every iterate, tracked by iterative
        approximate cross-validation (IACV, Luo, Ren & Barber 2023): the
        weighted mean over ``i`` of ``(y_i - yhat_{-i}^t)^2`` where
        ``yhat_{-i}^t`` predicts ``y_i`` with iterate ``t`` of the same
        algorithm (same start, steps and step size) run without sample ``i``
        (re-centred when ``fit_intercept=True``). Exact for the smooth
        solvers, a first-order approximation through the prox for ISTA/FISTA.
        See :func:`skacv.exact_loo_path` for the definition with weights.
        Only set when ``estimate_loo=True``.
    loo_std_error_path_ : ndarray of shape (n_iter_ + 1,) or (n_targets, n_iter_ + 1)
        Standard error of ``loo_path_`` when it is estimated from a random
        subsample (``loo_options["subsample"]`` below ``n_samples``: the control-variate
        estimate); its sampling error, not the error of IACV. Only set then.
    loo_predictions_ : ndarray of shape (n_loo, n_iter_ + 1) or (n_targets, n_loo, n_iter_ + 1)
        Leave-one-out predictions of the samples ``loo_indices_``; only set
        with ``loo_options={"store_predictions": True}``.
    loo_indices_ : ndarray of shape (n_loo,) or (n_targets, n_loo)
        Samples tracked by the leave-one-out estimate (all of them, or
        a subsample drawn at random). Only with ``"store_predictions"``.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` has feature names.
"""


def documents_x(kind="{array-like, sparse matrix}"):
    """Decorator: the parameter ``X : <kind> of shape (n_samples,
    n_features)``, the only one of the prediction methods, inserted before
    the Returns (or Yields) section of the method's docstring."""

    def decorate(method):
        doc = method.__doc__
        at = re.search(r"\n\n( *)(Returns|Yields)\n", doc)
        pad = at.group(1)
        method.__doc__ = (f"{doc[:at.start()]}\n\n{pad}Parameters\n{pad}----------\n"
                          f"{pad}X : {kind} of shape (n_samples, n_features){doc[at.start():]}")
        return method

    return decorate
