"""Probe chains on a diagonalised core (skacv.estimates.risk._core_space).

The core chains must give the memory matrices of the chains in coordinates
with the same probes, whatever step they start at, in either form (the
sample Gram matrix or the coefficient one, rank-deficient included) and
whatever the iteration (plain, extrapolated or heavy ball, clipped or not),
with weights, on sparse designs and in parallel column groups.
"""


import numpy as np
import pytest
import scipy.sparse as sp

import skacv.estimates.risk._core_space as core_space
from skacv import FISTA, HeavyBall, TrajectoryLasso
from skacv._policy import policy_context
from skacv._trace import record
from skacv.exceptions import UnreliableEstimateWarning
from skacv.iterations._iterations import ISTA
from skacv.iterations._penalties import Penalty

# p > n with momentum: the reliability checks flag the late iterates; the
# memory matrices compared here are what those checks read
pytestmark = pytest.mark.filterwarnings(f"ignore::{UnreliableEstimateWarning.__module__}."
                                        f"{UnreliableEstimateWarning.__name__}")


def _wide_problem(seed=0, n=40, p=90):
    """p > n with a small penalty: supports of 60-85 coordinates, wider than
    the sample, that still change along the path."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n, p)
    X[:, 1::2] += 0.6 * X[:, ::2]  # correlated pairs
    beta = np.zeros(p)
    beta[:15] = 1.0
    return X, X @ beta + 0.5 * rng.randn(n)


def _settling_problem(seed=0, n=80, p=60):
    """Supports narrower than the sample that settle, with two equal columns
    (a core Gram matrix of rank one less than its size)."""
    X, y = _wide_problem(seed, n, p)
    X[:, 3] = X[:, 2]
    return X, y


PROBLEMS = {"wide": (_wide_problem, 0.02, "samples"),
            "settling": (_settling_problem, 0.1, "coefficients")}


SOLVERS = {
    "ista": lambda: "ista",
    "fista": lambda: "fista",
    "fista_plain": lambda: FISTA(extrapolation="plain"),
    "heavy_ball": lambda: HeavyBall(momentum=0.5),
}


def _plans(paths):
    """The core plans of the chains recorded in ``paths`` (``None``: none)."""
    return [d["plan"] for d in paths.details("core_space_plan")]


def _fit(X, y, solver, plan, workers=None, alpha=0.02, **kw):
    """Fit with the core chains forced to start at ``plan`` (an
    int), or disabled (``None``), their column groups in ``workers``
    threads; also returns the starts used."""
    fit = kw.pop("fit", {})
    core = dict(core_space=False) if plan is None else dict(core_space_start=plan)
    with policy_context(**core, core_space_threads=workers), record() as paths:
        est = TrajectoryLasso(alpha, solver=SOLVERS[solver](), max_iter=30, n_probes=4,
                              random_state=0,
                              risk_options={"chain_dtype": "float64", "probe_scheme": "shared"},
                              **kw).fit(X, y, **fit)
    return est, [(p.start, p.form) for p in _plans(paths) if p is not None]


@pytest.mark.parametrize("problem", list(PROBLEMS))
@pytest.mark.parametrize("solver", list(SOLVERS))
@pytest.mark.parametrize("start", [1, 2, 9, 29])
def test_core_chains_equal_the_chains_in_coordinates(problem, solver, start):
    make, alpha, form = PROBLEMS[problem]
    X, y = make()
    ref, _ = _fit(X, y, solver, None, alpha=alpha)
    est, used = _fit(X, y, solver, start, alpha=alpha)
    assert used == [(start, form)]
    np.testing.assert_array_equal(est.coef_path_, ref.coef_path_)
    scale = np.abs(ref.memory_matrix_).max()
    np.testing.assert_allclose(est.memory_matrix_, ref.memory_matrix_, rtol=1e-9,
                               atol=1e-11 * scale)
    np.testing.assert_allclose(est.risk_path_, ref.risk_path_, rtol=1e-9)


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_probes_are_summed_once_the_supports_have_settled(solver):
    """From the first step without changing coordinates each eigen-coordinate
    evolves on its own: the chains of every source are summed over the probes
    (weighted by the probes) and the new sources are injected once, with the
    mean squared probe. Same memory matrices as the chains in coordinates."""
    X, y = _settling_problem()
    kw = dict(solver=SOLVERS[solver](), max_iter=80, n_probes=4, random_state=0,
              risk_options={"chain_dtype": "float64", "probe_scheme": "shared"})
    with policy_context(core_space_start=18), record() as paths:
        est = TrajectoryLasso(0.2, **kw).fit(X, y)
    plans = _plans(paths)
    with policy_context(core_space=False):
        ref = TrajectoryLasso(0.2, **kw).fit(X, y)
    assert plans[0].form == "coefficients"
    assert plans[0].start == 18 <= plans[0].collapse < 60
    np.testing.assert_allclose(est.memory_matrix_, ref.memory_matrix_, rtol=1e-9,
                               atol=1e-11 * np.abs(ref.memory_matrix_).max())
    np.testing.assert_allclose(est.risk_path_, ref.risk_path_, rtol=1e-9)


@pytest.mark.parametrize("kind", ["weighted", "sparse_weighted", "intercept"])
def test_core_chains_with_weights_sparse_and_intercept(kind):
    X, y = _wide_problem(1)
    w = np.random.RandomState(2).rand(X.shape[0]) + 0.5
    Xk = sp.csr_matrix(X) if kind.startswith("sparse") else X
    kw = {"fit_intercept": kind == "intercept"}
    fit = {} if kind == "intercept" else {"sample_weight": w}
    ref = _fit(Xk, y, "fista", None, **kw, fit=fit)[0]
    est, used = _fit(Xk, y, "fista", 6, **kw, fit=fit)
    assert used == [(6, "samples")]
    np.testing.assert_allclose(est.memory_matrix_, ref.memory_matrix_, rtol=1e-9,
                               atol=1e-11 * np.abs(ref.memory_matrix_).max())


def test_core_chains_in_parallel_column_groups(speed_policy):
    """Groups of one source in two threads: the same matrices as one thread."""
    X, y = _wide_problem(3)
    speed_policy(chain_chunk_bytes=1)
    one, _ = _fit(X, y, "heavy_ball", 4, workers=1)
    two, _ = _fit(X, y, "heavy_ball", 4, workers=2)
    np.testing.assert_allclose(two.memory_matrix_, one.memory_matrix_, rtol=1e-12,
                               atol=1e-14 * np.abs(one.memory_matrix_).max())


def test_the_flop_model_diagonalises_wide_and_settling_cores():
    """The seed's generator scaled down (p > n, lam = 0.01): supports wider
    than the sample, forward chains switch to the sample form early; a larger
    penalty and a long path (supports that settle below n): the coefficient
    form; a path of 3 steps: no eigendecomposition pays. Chains that meet in
    the middle (``split``) keep the wide short paths in coordinates (measured
    here: 19 against 26 ms for ISTA, 26 against 43 ms for FISTA) but not the
    settled long one (FISTA: 89 against 166 ms). Every fit gives the memory
    matrices of the chains in coordinates (float32 chains: 1e-4)."""
    rng = np.random.default_rng(2025)
    n, p, s = 200, 300, 100
    X = rng.standard_normal((n, p))
    y = X @ (15 * np.r_[np.ones(s), np.zeros(p - s)] / np.sqrt(n)) + 1.5 * rng.standard_normal(n)
    kw = dict(step_size=(1 + np.sqrt(p / n)) ** -2, fit_intercept=False, n_probes=5,
              random_state=0, risk_options={"probe_scheme": "shared"})
    cases = [("ista", 0.01, 60, False, "samples"), ("fista", 0.01, 60, False, "samples"),
             ("fista", 0.5, 300, False, "coefficients"),
             ("ista", 1.0, 300, False, "coefficients"), ("ista", 0.01, 3, False, None),
             ("ista", 0.01, 60, True, None), ("fista", 0.01, 60, True, None),
             ("fista", 0.5, 300, True, "coefficients")]
    for solver, alpha, T, split, form in cases:
        # forward chains only (as with a heavy ball): the split at the end
        forward = {} if split else {"chain_split": 10**9}
        with policy_context(**forward), record() as paths:
            est = TrajectoryLasso(alpha, solver=solver, max_iter=T, **kw).fit(X, y)
        plans = _plans(paths)
        with policy_context(**forward, core_space=False):
            ref = TrajectoryLasso(alpha, solver=solver, max_iter=T, **kw).fit(X, y)
        assert len(plans) == 1
        assert (plans[0] and plans[0].form) == form, (solver, alpha, T, split)
        if form == "samples":
            assert (est.coef_path_[:, plans[0].start:] != 0).sum(axis=0).min() > n
        if form == "coefficients":  # the supports have settled by the switch
            support = est.coef_path_[:, plans[0].start:] != 0
            assert plans[0].explicit.size < 0.5 * support.sum(axis=0).min()
        np.testing.assert_allclose(est.memory_matrix_, ref.memory_matrix_, rtol=1e-4,
                                   atol=1e-5 * np.abs(ref.memory_matrix_).max())


def test_warm_start_keeps_the_coefficient_space_chains():
    """A warm-started fit keeps its chains for the next stage, in
    coordinates: no core plan is made."""
    X, y = _wide_problem()
    with record() as paths:
        TrajectoryLasso(0.02, solver="ista", max_iter=20, n_probes=3, random_state=0,
                        warm_start=True, risk_options={"probe_scheme": "shared"}).fit(X, y)
    assert "memory_matrices" in paths and "core_space_plan" not in paths


def test_free_steps_exclude_clipped_unpenalised_and_inactive_coordinates():
    path = np.array([[1.0, 1.0, 0.0, 1.0],  # inactive at step 2
                     [0.5, 0.5, 0.5, -0.1],  # a sign change at step 3: clipped
                     [1.0, 1.1, 1.2, 1.3],
                     [-2.0, -2.1, -2.2, -2.3],
                     [3.0, 3.0, 3.0, 3.0]])  # unpenalised
    it = FISTA(1.0, penalty=Penalty(l1=0.1, l2=0.3, n_unpenalized=1))
    free = core_space.free_steps(it, path)
    coef = it.extrapolation_coefficients(3, path[:, 3], path[:, 2])
    assert free.shape == (5, 3)
    assert not free[0, 1] and not free[4].any()  # inactive; unpenalised with a ridge part
    assert not free[1, 2] and coef[1][1] == 0.0
    assert free[2:4].all()
    # without the ridge part the unpenalised coordinate is free where active
    it = ISTA(1.0, penalty=Penalty(l1=0.1, n_unpenalized=1))
    assert core_space.free_steps(it, path)[4].all()


def test_coefficient_form_in_float32_chains_keeps_the_estimate():
    """The default float32 chains on the coefficient form: its set-up
    (eigenbasis, ``G_perp = X~_E^T (I - U U^T) X~_E``, a difference of Gram
    matrices that nearly cancel on an equicorrelated design) runs in float64.
    Set up in float32 it moved the risk path by 1.3e-3 here (2.4 % at
    1000 x 1500 with T = 150); float32 chains in coordinates are within
    about 1e-5 of float64 ones."""
    n, p, rho = 1000, 1500, 0.5
    rng = np.random.default_rng(2500)
    X = np.sqrt(1 - rho) * rng.standard_normal((n, p)) + np.sqrt(rho) * rng.standard_normal((n, 1))
    beta = np.zeros(p)
    beta[:100] = rng.standard_normal(100) / 10.0 * 2.0
    y = X @ beta + rng.standard_normal(n)
    alpha = 0.1 * np.sqrt(np.log(p) / n)
    kw = dict(solver="fista", max_iter=30, n_probes=2, random_state=0,
              risk_options={"probe_scheme": "shared"})
    with policy_context(core_space_start=10), record() as paths:
        est = TrajectoryLasso(alpha, **kw).fit(X, y)
    plans = _plans(paths)
    with policy_context(core_space=False):
        ref = TrajectoryLasso(alpha, **kw).fit(X, y)
        ref64 = TrajectoryLasso(alpha, **{**kw, "risk_options": {"probe_scheme": "shared",
                                                                 "chain_dtype": "float64"}})
        ref64.fit(X, y)
    assert plans[0].form == "coefficients" and plans[0].start == 10
    np.testing.assert_array_equal(est.coef_path_, ref.coef_path_)
    np.testing.assert_allclose(ref.risk_path_, ref64.risk_path_, rtol=1e-4)
    np.testing.assert_allclose(est.risk_path_, ref.risk_path_, rtol=1e-4)
