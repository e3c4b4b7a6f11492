"""What a fit is given besides its data and parameters: the set-up of a new
path (:class:`PathSetup`, computed once, kept for a warm refit and held fixed
by brute-force leave-one-out refits) and a search's plan for the fits of a
path it grows in stages (:class:`FitPlan`)."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class FitPlan:
    """What a search tells the fits of a path it grows in stages
    (:func:`skacv.model_selection._stages.grow_in_stages`) or fits in one
    go, held for them by
    :meth:`~skacv.estimators._base.TrajectoryEstimator._planned`.

    Attributes
    ----------
    horizon : int
        The length the path may reach: the first stage chooses the loop's
        form for the whole path
        (:meth:`~skacv.estimators._base.TrajectoryEstimator._covariance_form`).
    defer_uq : bool
        The debiasing statistics (:mod:`skacv.estimates._uq`) wait for
        :meth:`~skacv.estimators._base.TrajectoryEstimator._finish_deferred`:
        those of the last stage only.
    probe_goal : {"level", "choice"}
        What the adaptive probes of ``risk_path_`` are grown for
        (:func:`~skacv.estimates._risk.trajectory_risk`): its level at every
        iterate, or (``"choice"``: a search that compares the path with
        itself only, one grid point) the order of the iterates near its
        minimum.
    same_data : bool
        Every fit of the plan is on the data of its first (the stages of a
        search): a continued fit skips the finiteness check of its
        validation and keeps the first fit's data fingerprint (one pass over
        ``X`` each).
    """

    horizon: int = 0
    defer_uq: bool = False
    probe_goal: str = "level"
    same_data: bool = False


#: the plan of a fit outside a search
NO_PLAN = FitPlan()


@dataclasses.dataclass
class PathSetup:
    """The data-dependent parts of a new path
    (:meth:`~skacv.estimators._base.TrajectoryEstimator._new_setup`),
    kept for a warm refit and held fixed by brute-force leave-one-out refits
    (``frozen``).

    Attributes
    ----------
    step_size : float
        ``1 / L`` (or the given step size).
    batch_seed, n_samples : int or None
        The mini-batches' seed and the sample size they are drawn from
        (``solver="sgd"``).
    sampler : MinibatchSampler or None
        The mini-batches of a frozen set-up (a left-out refit's: the row deleted).
    preconditioner : object or None
        EigenPro's preconditioner (``IterativeRidge(solver="eigenpro")``).
    scale : float or None
        The Huber loss's scale.
    """

    step_size: float
    batch_seed: int | None = None
    n_samples: int | None = None
    sampler: object = None
    preconditioner: object = None
    scale: float | None = None
