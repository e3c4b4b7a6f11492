"""What a fit is given besides its data and parameters: the set-up of a new
path (:class:`PathSetup`, computed once, kept for a warm refit and held fixed
by brute-force leave-one-out refits) and a search's plan for the fits of a
path it grows in stages (:class:`FitPlan`)."""

import dataclasses

import numpy as np

from .._config import check_memory


@dataclasses.dataclass(frozen=True)
class FitPlan:
    """What a search tells the fits of a path it grows in stages
    (:func:`skacv.model_selection._stages.grow_in_stages`) or fits in one
    go, held for them by
    :meth:`~skacv.estimators._base.TrajectoryEstimator.planned`.

    Attributes
    ----------
    horizon : int
        The length the path may reach: the first stage chooses the loop's
        form for the whole path
        (:meth:`~skacv.estimators._base.TrajectoryEstimator._covariance_form`).
    defer_uq : bool
        The debiasing statistics (:mod:`skacv.estimates.risk._uq`) wait for
        :meth:`~skacv.estimators._base.TrajectoryEstimator.finish_deferred`:
        those of the last stage only.
    keep_deferred : bool
        What waits outlives the plan's block (the search finishes the
        candidate it selects only); otherwise it is dropped at the block's
        end.
    probe_goal : {"level", "choice"}
        What the adaptive probes of ``risk_path_`` are grown for
        (:func:`~skacv.estimates.risk._estimate.trajectory_risk`): its level at every
        iterate, or (``"choice"``: a search that compares the path with
        itself only, one grid point) the order of the iterates near its
        minimum.
    same_data : bool
        Every fit of the plan is on the data of its first (the stages of a
        search): a continued fit skips the finiteness check of its
        validation and keeps the first fit's data fingerprint (one pass over
        ``X`` each), and its parameters' validation (the stages set
        ``max_iter`` and ``warm_start`` only).
    end_tol : float or None
        A least-squares path with an l1 penalty ends before ``max_iter`` at
        the first check (every ``end_check`` steps) where its duality gap is
        at most ``end_tol * ||y~||^2 / n_eff`` (scikit-learn's ``Lasso``
        tolerance): its later iterates are the converged fit up to that
        gap, which the search scores on its own. ``None``: ``max_iter``
        steps.
    end_check : int
        Steps between two checks of ``end_tol`` (one product with ``X~^T``
        each).
    checks : SharedChecks or None
        The search's first validation of its data, shared by its
        candidates: a candidate's first fit given the very objects another
        one's validated takes that validation and data fingerprint.
    """

    horizon: int = 0
    defer_uq: bool = False
    keep_deferred: bool = False
    probe_goal: str = "level"
    same_data: bool = False
    end_tol: float | None = None
    end_check: int = 10
    checks: "SharedChecks | None" = None


class SharedChecks:
    """The first validation of a search's data, shared by its candidates
    (:attr:`FitPlan.checks`): the objects given, their validated form, the
    data fingerprint and the attributes the validation set
    (``n_features_in_``, ``feature_names_in_``), for the estimators of one
    class whose checks are the fit shell's own. The first candidate's fit
    that validates writes it (one reference, written whole: the candidates'
    threads may race, each then validates as before); a process worker's
    copy starts empty."""

    def __init__(self):
        self.entry = None

    def take(self, cls, given):
        """``(checked, fingerprint, attributes)`` kept for ``cls`` and the
        very objects ``given`` (``(X, y, sample_weight)``), or ``None``."""
        entry = self.entry
        if entry is None or entry[0] is not cls or any(
                a is not b for a, b in zip(entry[1], given, strict=True)):
            return None
        return entry[2:]

    def keep(self, cls, given, checked, fingerprint, attributes):
        self.entry = (cls, given, checked, fingerprint, attributes)


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


def loop_buffers(est, design, datafit, iteration, fitted, warm, n_done):
    """Where the full-batch loop of the estimator ``est`` writes what the
    estimates would otherwise compute again, beside ``fitted`` (the risk
    estimate's ``X~ x^t``), each ``None`` where it is not read: ``X~^T F``
    (the residuals' images, the loop's gradients) for the debiasing of least
    squares without extrapolation, and ``X~ v^t`` (the gradient points'
    fitted values) for a clipped extrapolation, whose gradient points'
    residuals the risk estimate reads
    (:func:`~skacv.estimates.risk._readout.source_residuals`)."""
    full = fitted is not None and iteration.sampler is None and design.policy.loop_records
    extrapolates = iteration.extrapolates(est.max_iter)
    images = full and datafit.quadratic and not extrapolates
    points = full and extrapolates and iteration.clips
    return (_loop_buffer(est, "_gradient_path", design.n_features, design.dtype, warm, n_done,
                         "the residuals' images X~^T F")
            if images else None,
            _loop_buffer(est, "_source_path", design.n_samples, fitted.dtype, warm, n_done,
                         "the gradient points' fitted values X~ v^t")
            if points else None)


def points_buffer(est, design, iteration, covariance, warm, n_done):
    """Where the loop in the covariance form writes the gradient points
    ``v^t`` of a clipped extrapolation, which its risk estimate reads in the
    coordinates (:func:`~skacv.estimates.risk._readout.source_points`, in
    float64: a float64 design only); ``None`` where they are not read."""
    if not (covariance and design.policy.loop_records and est._wants("estimate_risk")
            and design.dtype == np.float64 and iteration.extrapolates(est.max_iter)
            and iteration.clips):
        return None
    return _loop_buffer(est, "_point_path", design.n_features, np.float64, warm, n_done,
                        "the gradient points v^t")


def _loop_buffer(est, name, rows, dtype, warm, n_done, what):
    """A ``rows x (max_iter + 1)`` buffer of the loop's columns (``what``)
    that continues ``est``'s previous fit's (``name``) on a warm start, or
    ``None`` when that fit has none."""
    old = getattr(est, name, None) if warm else None
    if warm and (old is None or old.shape[1] != n_done + 1):
        return None
    check_memory(rows * (est.max_iter + 1) * np.dtype(dtype).itemsize,
                 f"{what} ({rows}, {est.max_iter + 1})",
                 "Lower max_iter or set estimate_risk=False. ")
    buffer = np.empty((rows, est.max_iter + 1), dtype=dtype, order="F")
    if warm:
        buffer[:, : n_done + 1] = old
    return buffer
