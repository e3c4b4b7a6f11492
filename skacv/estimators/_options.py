"""The grouped parameters ``risk_options`` and ``loo_options`` (a dict or
``None`` each): a class's ``_option_keys`` declares their keys as ``{key:
(default, scikit-learn's constraints)}``, checked by :func:`check_options`."""

from numbers import Integral

from ..utils._compat import (
    Interval,
    InvalidParameterError,
    StrOptions,
    validate_parameter_constraints,
)

_POSITIVE = [Interval(Integral, 1, None, closed="left"), None]

#: ``risk_options`` of the Jacobian chains (Huber, SGD; ridge's SGD)
CHAIN_OPTIONS = {"chain_dtype": ("auto", [StrOptions({"auto", "float32", "float64"})])}
#: ``risk_options`` of ISTA / FISTA: keyword arguments of ``trajectory_risk``
RISK_OPTIONS = {"probe_scheme": ("auto", [StrOptions({"auto", "pooled", "shared"})]),
                **CHAIN_OPTIONS}
#: ``loo_options``: keyword arguments of :func:`skacv.estimates.loo._iacv.iacv_path`
LOO_OPTIONS = {"batch_size": (None, _POSITIVE), "subsample": (None, _POSITIVE),
               "store_predictions": (False, ["boolean"])}


def resolve_options(estimator, param):
    """``{key: value}`` of ``estimator``'s grouped parameter ``param``, every
    declared key at its default where not given."""
    keys = type(estimator)._option_keys.get(param, {})
    given = getattr(estimator, param, None) or {}  # (get_params(deep=False)[param])
    return {k: given.get(k, default) for k, (default, _) in keys.items()}


def check_options(estimator):
    """Raise ``InvalidParameterError`` naming an unknown key of a grouped
    parameter (with the allowed keys, their values and defaults) or the key
    whose value its constraints refuse."""
    name = type(estimator).__name__
    for param, keys in type(estimator)._option_keys.items():
        given = estimator.get_params(deep=False).get(param)
        if not isinstance(given, dict):  # None, or refused by _parameter_constraints
            continue
        unknown = [k for k in given if k not in keys]
        if unknown:
            allowed = "; ".join(f"{k!r}: {' or '.join(map(str, constraints))} (default "
                                f"{default!r})" for k, (default, constraints) in keys.items())
            raise InvalidParameterError(f"The {param!r} parameter of {name} has the unknown "
                                        f"key {unknown[0]!r}. Its keys are {allowed}.")
        validate_parameter_constraints({k: c for k, (_, c) in keys.items()}, given,
                                       caller_name=f"{name}'s {param}")
