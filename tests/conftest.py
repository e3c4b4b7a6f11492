"""Settings shared by the whole test suite (read before any test module)."""

import os

# scikit-learn's estimator checks include ``check_array_api_input`` (NumPy input
# with array API dispatch enabled); it is skipped unless SciPy's array API
# support is on, which has to be decided before SciPy is first imported.
os.environ.setdefault("SCIPY_ARRAY_API", "1")
# figures are written to files only (headless CI)
os.environ.setdefault("MPLBACKEND", "Agg")


import pytest  # noqa: E402


@pytest.fixture
def float64_chains():
    """Jacobian chains in float64 (the default ``"auto"`` runs Hutchinson
    chains in float32): for tests of identities at rounding level."""
    from skacv import config_context

    with config_context(risk_chain_dtype="float64"):
        yield
