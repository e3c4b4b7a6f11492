"""Helpers below the math: scikit-learn's private API (``_compat``, the only
module that imports it), input checks (``_validation``), joblib and BLAS
threads (``_parallel``)."""

