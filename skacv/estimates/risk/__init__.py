"""The memory-matrix risk estimate along a trajectory (Bellec & Tan 2024;
Tan & Bellec 2024 for robust losses and mini-batches) and what it gives:
the plan and the engines of the memory matrices, the readout of the risk,
its reliability, and the debiasing and confidence intervals (``_uq``)."""
