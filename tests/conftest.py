"""Settings shared by the whole test suite (read before any test module)."""

import os

# scikit-learn's estimator checks include ``check_array_api_input`` (NumPy input
# with array API dispatch enabled); it is skipped unless SciPy's array API
# support is on, which has to be decided before SciPy is first imported.
os.environ.setdefault("SCIPY_ARRAY_API", "1")
# figures are written to files only (headless CI)
os.environ.setdefault("MPLBACKEND", "Agg")
