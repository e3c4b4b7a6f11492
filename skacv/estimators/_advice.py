"""What a fit says when its risk estimate cannot be trusted
(:class:`~skacv.exceptions.UnreliableEstimateWarning`)."""

import warnings

import numpy as np

from ..exceptions import UnreliableEstimateWarning
from ..utils._validation import join_options


def unreliable_advice(estimator, res, statistics):
    """``(first, cause, fixes)`` for the first iterate flagged in
    ``res.reliable`` (``None`` when none is): the check it fails, in a
    sentence, and the list of fixes that apply to this estimator."""
    if res.reliable.all():
        return None
    t = int(np.argmin(res.reliable))
    df = res.df_fraction[t]
    failed = {name for name, flags in res.failures.items() if flags[t]}
    params = estimator.get_params(deep=False)
    fixes = []
    momentum = bool(res.momentum)
    if "not_finite" in failed:
        cause = "The memory matrix or the estimate is not finite there."
    elif "df_high" in failed or (not momentum and df >= statistics.interpolation_df):
        # without momentum the correction amplifies only as 1 - df vanishes
        cause = ("The degrees of freedom approach the sample size: the iterate (nearly) "
                 "interpolates the training data, where the estimate divides vanishing "
                 "residuals by a vanishing 1 - df.")
        fixes.append("fewer iterations or a larger penalty" if "alpha" in params
                     else "fewer iterations")
    elif momentum:
        cause = "The Jacobian of a momentum method amplifies on this design."
        options = _solver_options(estimator)
        plain = next((s for s in ("ista", "gd") if s in options), None)
        if plain is not None:
            fixes.append(f"solver={plain!r} (no momentum)")
    else:
        cause = "The Jacobian amplifies on this design."
    if "estimate_loo" in params:
        fixes.insert(0, "estimate_loo=True (leave-one-out, tracked along the same path)")
    fixes.append("TrajectoryEarlyStoppingCV(criterion='auto')")
    return t, cause, fixes


def warn_unreliable(estimator, res, advice, statistics):
    """Warn with ``advice`` (:func:`unreliable_advice`; ``None``: no warning)."""
    if advice is None:
        return
    t, cause, fixes = advice
    df, amp = res.df_fraction[t], res.amplification[t]
    support = res.support
    extra = ("" if support is None else
             f"; degrees of freedom {df * res.n_eff:.3g} against a support of "
             f"{int(support[t])}, limit {statistics.support_df_limit:g} times")
    warnings.warn(
        f"{type(estimator).__name__}: risk_path_ is unreliable from iteration {t} on "
        f"({int((~res.reliable).sum())} of {res.reliable.size} iterates flagged in "
        f"risk_reliable_; degrees-of-freedom fraction {df:.3g}, expected in "
        f"[{statistics.df_low:g}, {statistics.df_high:g}); "
        f"amplification {amp:.3g}, limit {statistics.amplification_limit:g}{extra}). "
        f"{cause} Use {join_options(fixes)}.",
        UnreliableEstimateWarning, stacklevel=4)


def _solver_options(estimator):
    """The string values of the estimator's ``solver`` parameter."""
    for constraint in getattr(estimator, "_parameter_constraints", {}).get("solver", []):
        options = getattr(constraint, "options", None)
        if options is not None:
            return set(options)
    return set()
