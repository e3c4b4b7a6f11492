"""The problem's linear algebra: the centred, weighted design ``X~`` and its
covariance form (``_design``), eigenvalues and Lanczos (``_linalg``), products
prepared for BLAS (``_blas``), row sampling (``_sampling``)."""

