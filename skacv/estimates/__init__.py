"""What the trajectory says about itself: the memory-matrix risk estimate
(Bellec & Tan 2024; ``_risk`` and the chains that compute it), iterative
approximate leave-one-out (Luo, Ren & Barber 2023; ``_loo``), Newton-step,
infinitesimal-jackknife and ALO baselines, brute-force refits, and the
debiasing and confidence intervals (``_uq``)."""

from ._loo_approx import approximate_loo
from ._loo_refit import exact_loo_path

__all__ = ["approximate_loo", "exact_loo_path"]
