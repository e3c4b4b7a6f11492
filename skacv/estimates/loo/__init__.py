"""Leave-one-out along a trajectory: iterative approximate leave-one-out
(IACV, Luo, Ren & Barber 2023; ``_iacv`` and its tracking, ``_track``), the
Newton-step, infinitesimal-jackknife and ALO baselines (``_approx``) and
brute-force refits (``_refit``)."""
