"""What the trajectory says about itself, in two rooms:

* ``risk``: the memory-matrix estimate of the out-of-sample risk of every
  iterate (Bellec & Tan 2024) and the debiasing and confidence intervals
  it gives;
* ``loo``: leave-one-out along the path, iterative approximate (Luo, Ren &
  Barber 2023), its one-step baselines and brute-force refits.
"""

from .loo._approx import approximate_loo
from .loo._refit import exact_loo_path

__all__ = ["approximate_loo", "exact_loo_path"]
