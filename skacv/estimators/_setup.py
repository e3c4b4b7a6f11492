"""What a fit is given besides its data and parameters: the set-up of a new
path (:class:`PathSetup`) and a search's plan for its fits (:class:`FitPlan`)."""

import dataclasses

import numpy as np

from .._config import check_memory


@dataclasses.dataclass(frozen=True)
class FitPlan:
    """What a search tells the fits of a path it grows in stages
    (:func:`skacv.model_selection._stages.grow_in_stages`) or fits in one
    go, held for them by ``planned``.

    Attributes
    ----------
    horizon : int
        The length the path may reach: the first stage chooses the loop's
        form for it (``_covariance_form``).
    defer_uq : bool
        The debiasing statistics wait for ``finish_deferred`` (the last
        stage's only).
    keep_deferred : bool
        What waits outlives the block (the search finishes the candidate it
        selects only); else it is dropped at the block's end.
    probe_goal : {"level", "choice"}
        What the adaptive probes of ``risk_path_`` are grown for: its level
        at every iterate, or (a search of one grid point) the order of the
        iterates near its minimum.
    same_data : bool
        Every fit is on its first fit's data (a search's stages): a
        continued fit skips the finiteness check, the data fingerprint and
        the parameters' validation (the stages set ``max_iter`` and
        ``warm_start`` only).
    end_tol : float or None
        An l1 least-squares path ends at the first check where its duality
        gap is at most ``end_tol * ||y~||^2 / n_eff`` (scikit-learn's
        ``Lasso`` tolerance); ``None``: ``max_iter`` steps.
    end_check : int
        Steps between two checks of ``end_tol`` (one product with ``X~^T``,
        summed in the loop's last pass on a design read by panels).
    checks : SharedChecks or None
        The search's first validation of its data, shared by its candidates.
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
    """The first validation of a search's data (:attr:`FitPlan.checks`):
    the objects given, their validated form, the data fingerprint and the
    attributes the validation set, for the estimators of one class whose
    checks are the shell's own. Written whole, by one reference: racing
    threads each validate as before."""

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
    """The data-dependent parts of a new path (``_new_setup``), kept for a
    warm refit and held fixed by brute-force leave-one-out refits: the step
    size, the mini-batches' seed and sample size (``solver="sgd"``), the
    sampler of a frozen set-up (a left-out refit's: the row deleted),
    EigenPro's preconditioner (``IterativeRidge(solver="eigenpro")``) and
    the Huber loss's scale and the null model's intercept where its path
    starts (``level``), and the intercept column's frame ``(m, s)``
    (:class:`~skacv.estimators._intercept_column.InterceptColumnMixin`)."""

    step_size: float
    batch_seed: int | None = None
    n_samples: int | None = None
    sampler: object = None
    preconditioner: object = None
    scale: float | None = None
    level: float = 0.0
    frame: tuple | None = None


def loop_buffers(est, design, datafit, iteration, fitted, warm, n_done):
    """Where the full-batch loop writes what the estimates would compute
    again, each ``None`` where not read: ``X~^T F`` (the loop's gradients)
    for the debiasing of least squares without extrapolation, ``X~ v^t``
    (the gradient points' fitted values) for a clipped extrapolation
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
    ``v^t`` of a clipped extrapolation for the risk estimate
    (:func:`~skacv.estimates.risk._readout.source_points`; a float64 design
    only), or ``None``."""
    if not (covariance and design.policy.loop_records and est._wants("estimate_risk")
            and design.dtype == np.float64 and iteration.extrapolates(est.max_iter)
            and iteration.clips):
        return None
    return _loop_buffer(est, "_point_path", design.n_features, np.float64, warm, n_done,
                        "the gradient points v^t")


def _loop_buffer(est, name, rows, dtype, warm, n_done, what):
    """A ``rows x (max_iter + 1)`` buffer continuing the previous fit's
    ``name`` on a warm start (``None`` when it has none)."""
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
