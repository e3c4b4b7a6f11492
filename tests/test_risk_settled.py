"""The settled form of the ISTA/FISTA memory matrices (long paths).

Once the support and the extrapolation stop changing, the chains are one
fixed linear map on the support: :class:`SettledMemory` keeps the head's
dense matrices and an ``O(r T)`` state-space tail, and the corrections run
as forward recursions. Every quantity must equal the dense route's with the
same probes (float64 chains: to rounding), whose own tests check it
against exact traces and brute force.
"""

import warnings

import numpy as np
import pytest
from scipy.signal import lfilter

from skacv import IterativeRidge, TrajectoryLasso, config_context
from skacv._policy import get_policy
from skacv._statistics import get_statistics
from skacv._trace import Paths, record
from skacv.estimates.risk import _settled as settled_form
from skacv.estimates.risk._engine import plan_estimate
from skacv.estimates.risk._state import first_live
from skacv.exceptions import UnreliableEstimateWarning
from skacv.iterations import FISTA, ISTA


def _problem(n, p, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    X[:, 1] += 0.5 * X[:, 0]  # correlated columns: a non-trivial Gram matrix
    y = X[:, :3] @ np.array([2.0, -1.5, 1.0]) + rng.standard_normal(n)
    return X, y


@pytest.fixture
def settled(speed_policy):
    """``settled(min_tail, **kw)`` fits a Lasso with the settled form allowed
    from ``min_tail`` tail steps; ``settled.calls`` lists the steps where it
    settled, one per fit that took the settled form; ``settled.paths``
    records the paths the fits took (:mod:`skacv._trace`)."""
    calls, paths = [], Paths()

    def fit(min_tail, X, y, sample_weight=None, **kw):
        speed_policy(settled_min_tail=min_tail)
        with warnings.catch_warnings(), record() as run:
            warnings.simplefilter("ignore", UnreliableEstimateWarning)
            est = TrajectoryLasso(**kw).fit(X, y, sample_weight=sample_weight)
        calls.extend(d["settled_step"] for d in run.details("settled_risk"))
        paths.events.extend(run.events)
        return est

    fit.calls, fit.paths = calls, paths
    return fit


CASES = [
    # (n, p, solver, fit_intercept, weighted): p > n runs the loop on X~ (the
    # residuals in samples' space), p < n in the covariance form (products)
    (40, 30, "ista", True, False),
    (40, 30, "fista", False, True),
    (25, 30, "fista", True, False),
    (25, 30, FISTA(extrapolation="plain"), False, False),
    (25, 30, "ista", False, True),
]


@pytest.mark.parametrize("n, p, solver, fit_intercept, weighted", CASES)
def test_settled_form_equals_the_dense_memory_matrices(settled, n, p, solver,
                                                       fit_intercept, weighted):
    X, y = _problem(n, p)
    sw = np.random.default_rng(1).integers(1, 4, n).astype(float) if weighted else None
    kw = dict(alpha=0.3, solver=solver, max_iter=150, fit_intercept=fit_intercept,
              n_probes=4, random_state=0,
              risk_options={"chain_dtype": "float64", "probe_scheme": "shared"})
    calls = settled.calls
    ref = settled(10**9, X, y, sw, **kw)
    assert calls == []
    est = settled(40, X, y, sw, **kw)
    assert len(calls) == 1 and 2 <= calls[0] <= 150 - 40  # the settled form ran
    masks = est.coef_path_ != 0
    assert np.all(masks[:, calls[0]:] == masks[:, -1:])  # on one support from k0 on
    scale = np.abs(ref.memory_matrix_).max()
    np.testing.assert_allclose(est.memory_matrix_, ref.memory_matrix_, rtol=1e-9,
                               atol=1e-12 * scale)
    np.testing.assert_allclose(est.risk_path_, ref.risk_path_, rtol=1e-10)
    np.testing.assert_allclose(est.risk_matrix_, ref.risk_matrix_, rtol=1e-9,
                               atol=1e-12 * np.abs(ref.risk_matrix_).max())
    for name in ("df_fraction", "amplification"):
        np.testing.assert_allclose(est.risk_diagnostics_[name], ref.risk_diagnostics_[name],
                                   rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(est.risk_diagnostics_.support, ref.risk_diagnostics_.support)
    np.testing.assert_array_equal(est.risk_reliable_, ref.risk_reliable_)
    # the debiasing reads the corrected residuals (or their products)
    np.testing.assert_allclose(est.excess_risk_path_, ref.excess_risk_path_, rtol=1e-9,
                               atol=1e-12 * np.abs(ref.excess_risk_path_).max())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableEstimateWarning)
        np.testing.assert_allclose(est.debiased_coef(), ref.debiased_coef(), rtol=1e-9,
                                   atol=1e-12)
    # both forms of the residuals: samples' space (p > n) and products (p < n)
    assert est._solver_state.form == ("covariance" if p < n else "design")


def test_settled_matrices_are_not_formed_unless_kept(settled):
    """Above ``risk_matrix_limit`` the settled form never forms a (T + 1)^2
    matrix: the estimate and its diagnostics are the same as when they are."""
    X, y = _problem(25, 30, seed=3)
    kw = dict(alpha=0.3, solver="fista", max_iter=150, n_probes=4, random_state=0,
              risk_options={"chain_dtype": "float64", "probe_scheme": "shared"})
    kept = settled(40, X, y, **kw)
    with config_context(risk_matrix_limit=0):
        lean = settled(40, X, y, **kw)
    assert len(settled.calls) == 2
    assert not hasattr(lean, "risk_matrix_") and not hasattr(lean, "memory_matrix_")
    assert hasattr(kept, "risk_matrix_")
    np.testing.assert_allclose(lean.risk_path_, kept.risk_path_, rtol=1e-13)
    np.testing.assert_allclose(lean.excess_risk_path_, kept.excess_risk_path_, rtol=1e-12)
    np.testing.assert_array_equal(lean.risk_reliable_, kept.risk_reliable_)


def test_settled_step_finds_the_last_change():
    """``k0``: the chains settle once the support, and with an extrapolation
    the previous one too, stay fixed for every later step."""
    T = 20
    path = np.zeros((4, T + 1))
    path[0, 1:] = 1.0
    path[1, 3:9] = 1.0  # leaves the support after step 8
    path[2, 6:] = 1.0  # enters at step 6
    ista = ISTA(0.1, alpha=0.1)
    assert settled_form.settled_step(ista, path) == 9
    fista = FISTA(0.1, alpha=0.1, extrapolation="plain")
    # with an extrapolation x^{k0 - 1} is on the support too
    assert settled_form.settled_step(fista, path) == 10
    path[3, T] = 1.0  # the last step changes the support: nothing settles
    assert settled_form.settled_step(ista, path) is None


def test_settled_form_is_chosen_for_long_settled_paths_only():
    """A path whose support settles early and runs on (diabetes-like: few
    features, a large penalty) may take the settled form, linear in T, and so
    may a linear method; a heavy ball or a warm start (chains to keep) may
    not."""
    X, y = _problem(60, 8, seed=4)
    T = get_policy().settled_min_tail + 40
    design_kw = dict(max_iter=T, alpha=0.5, random_state=0)
    est = TrajectoryLasso(verbose=0, **design_kw)
    iteration, design = _iteration_and_design(est, X, y)
    assert _settles(design, iteration, T, est.n_probes) == "proximal"
    assert _settles(design, iteration, T, est.n_probes, keep_state=True) is None
    assert _settles(design, iteration, 100, est.n_probes) is None  # too short
    ridge = IterativeRidge(max_iter=T)
    it_ridge, design_ridge = _iteration_and_design(ridge, X, y)
    assert _settles(design_ridge, it_ridge, T, ridge.n_probes) == "linear"
    ball = IterativeRidge(max_iter=T, solver="heavy_ball")
    it_ball, design_ball = _iteration_and_design(ball, X, y)
    assert _settles(design_ball, it_ball, T, ball.n_probes) is None


def _ar1(n, p, rho, seed=0):
    """AR(1) features (correlation ``rho`` between neighbours, a linear
    filter along the columns): FISTA's supports keep changing for a long
    time at a small penalty."""
    rng = np.random.default_rng(seed)
    X = lfilter([np.sqrt(1 - rho**2)], [1.0, -rho], rng.standard_normal((n, p)), axis=1)
    return X, X[:, :3] @ np.array([2.0, -1.5, 1.0]) + rng.standard_normal(n)


@pytest.mark.parametrize("p, frac, late", [(20, 0.01, True), (12, 0.003, False)])
def test_a_path_that_settles_late_takes_the_pooled_chain(settled, speed_policy, p, frac,
                                                         late):
    """The settled form's head runs shared chains of a block of columns per
    source, quadratic in the settled step: where that costs more than
    ``settled_head_max_ratio`` times the pooled chain over the whole path (a
    path settled after 151 of 260 steps: 46 times), ``"auto"`` takes the
    pooled chain (the same ``risk_path_`` as asking for it), and a path
    settled early (after 36 steps) keeps the settled form. Both forms
    estimate the same quantity: the pooled chain's template split (exact
    probes here, a narrow design) leaves it within a percent."""
    n, rho = 100 if late else 80, 0.95
    X, y = _ar1(n, p, rho)
    alpha = frac * np.max(np.abs((X - X.mean(0)).T @ (y - y.mean()))) / n
    kw = dict(alpha=alpha, max_iter=260, random_state=0)
    auto = settled(40, X, y, **kw)
    outweighs = settled.paths.details("settled_head_outweighs")
    if late:
        assert settled.calls == [] and len(outweighs) == 1
        assert outweighs[0]["settled_step"] > 120 and outweighs[0]["ratio"] > 20
    else:
        assert outweighs == [] and settled.calls[0] < 80
    pooled = settled(40, X, y, risk_options={"probe_scheme": "pooled"}, **kw)
    speed_policy(settled_head_max_ratio=np.inf)
    forced = settled(40, X, y, **kw)  # the settled form, whatever its head costs
    assert len(settled.calls) == (1 if late else 2)
    if late:
        np.testing.assert_array_equal(auto.risk_path_, pooled.risk_path_)
    else:
        np.testing.assert_array_equal(auto.risk_path_, forced.risk_path_)
    np.testing.assert_allclose(forced.risk_path_, pooled.risk_path_, rtol=1e-2)


def _settles(design, iteration, T, n_probes, keep_state=False):
    """The settled form a path of ``T`` steps may take, planned before the fit."""
    plan = plan_estimate(design, iteration, None, n_probes, n_iter=T, keep_state=keep_state)
    return plan.settles if plan.form == "settled" else None


def _iteration_and_design(est, X, y):
    est.set_params(estimate_risk=False).fit(X, y)
    prob = est._problem(X, y)
    return prob.iteration, prob.design


@pytest.mark.parametrize("solver, alpha, n_probes", [("gd", 1.0, None), ("nesterov", 0.5, None),
                                                     ("gd", 0.0, 4), ("nesterov", 1.0, 4)])
@pytest.mark.parametrize("n, p", [(40, 30), (25, 30)])
def test_linear_settled_form_equals_the_spectral_memory_matrices(speed_policy, solver,
                                                                 alpha, n_probes, n, p):
    """Gradient descent, ridge GD and Nesterov are settled from the start:
    the state-space form of their spectral nodes (exact eigenvalues or the
    Lanczos quadrature of the same probes) gives the dense route's matrices,
    estimate and diagnostics."""
    X, y = _problem(n, p, seed=5)
    kw = dict(alpha=alpha, solver=solver, max_iter=120, n_probes=n_probes, random_state=0)
    speed_policy(settled_min_tail=10**9)
    with record() as paths:
        ref = IterativeRidge(**kw).fit(X, y)
        speed_policy(settled_min_tail=40)
        est = IterativeRidge(**kw).fit(X, y)
    assert [d["settled_step"] for d in paths.details("settled_risk")] == [0]
    scale = np.abs(ref.memory_matrix_).max()
    np.testing.assert_allclose(est.memory_matrix_, ref.memory_matrix_, rtol=1e-9,
                               atol=1e-12 * scale)
    np.testing.assert_allclose(est.risk_path_, ref.risk_path_, rtol=1e-10)
    for name in ("df_fraction", "amplification"):
        np.testing.assert_allclose(est.risk_diagnostics_[name], ref.risk_diagnostics_[name],
                                   rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(est.risk_reliable_, ref.risk_reliable_)
    np.testing.assert_allclose(est.excess_risk_path_, ref.excess_risk_path_, rtol=1e-9,
                               atol=1e-12 * np.abs(ref.excess_risk_path_).max())


def test_settled_row_norms_stop_advancing_decayed_sources(settled, statistical_policy):
    """The row norms behind ``amplification`` stop advancing a source's
    column once its state has decayed (``negligible_state``), so that a
    long settled path costs ``O(r T w)``: here the live columns end far
    shorter than the path, and the norms equal both the dense route's and
    those of advancing every column."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 5))
    y = X @ np.array([1.0, -1.0, 0.5, 0.0, 0.0]) + 0.5 * rng.standard_normal(60)
    kw = dict(alpha=0.05, solver="fista", max_iter=1200, n_probes=4, random_state=0,
              risk_options={"chain_dtype": "float64", "probe_scheme": "shared"})
    def windows():  # (first live source, step) at the row norms' checks
        return [(d["first"], d["step"]) for d in settled.paths.details("settled_window")]

    est = settled(40, X, y, **kw)
    assert len(settled.calls) == 1
    lo, k = windows()[-1]
    assert k > 1100 and k - lo < 300  # the sources still advanced at the end
    ref = settled(10**9, X, y, **kw)  # the dense matrices
    statistical_policy(negligible_state=0.0)
    every = settled(40, X, y, **kw)  # every column advanced to the end
    assert windows()[-1][0] == 0
    for other, rtol in ((ref, 1e-9), (every, 1e-13)):
        np.testing.assert_allclose(est.risk_diagnostics_.amplification,
                                   other.risk_diagnostics_.amplification, rtol=rtol)
        np.testing.assert_array_equal(est.risk_reliable_, other.risk_reliable_)


def test_settled_form_drops_the_supports_null_space(settled):
    """Collinear columns on the settled support: the null space of their
    Gram matrix carries nothing (``X~_S v = 0``), is left out of the
    state-space form, and the estimate is the dense route's."""
    X, y = _problem(60, 6, seed=6)
    X[:, 5] = X[:, 0]  # a duplicate: both copies share the coefficient
    kw = dict(alpha=0.1, solver="fista", max_iter=400, n_probes=4, random_state=0,
              risk_options={"chain_dtype": "float64", "probe_scheme": "shared"})
    est = settled(40, X, y, **kw)
    models = [d["model"] for d in settled.paths.details("settled_memory")]
    assert len(models) == 1
    support = np.count_nonzero(est.coef_)
    assert est.coef_[0] != 0 and est.coef_[5] != 0
    assert models[0].rank == support - 1
    ref = settled(10**9, X, y, **kw)
    np.testing.assert_allclose(est.risk_path_, ref.risk_path_, rtol=1e-9)
    np.testing.assert_allclose(est.risk_diagnostics_.amplification,
                               ref.risk_diagnostics_.amplification, rtol=1e-9)
    np.testing.assert_allclose(est.risk_diagnostics_.df_fraction,
                               ref.risk_diagnostics_.df_fraction, rtol=1e-9, atol=1e-12)


def test_first_live_column_of_the_row_norms():
    """``first_live``: the leading columns whose states are all below
    ``negligible_state`` of the largest seen are dropped (a live column
    stops the scan: the window stays contiguous); a state that is not
    finite (a diverging recursion) drops nothing."""
    negligible = 1e-13
    tiny = negligible / 10
    hx = np.array([[tiny * 50, 0.0, 1.0, tiny, 50.0], [0.0, tiny, 0.0, 0.0, 0.0]])
    hv = np.zeros_like(hx)
    assert first_live(7, hx, hv, 0.0, negligible) == (9, 50.0)
    # a larger peak seen before makes the third column negligible too
    assert first_live(7, hx, hv, 1e14, negligible) == (11, 1e14)
    hv[1, 4] = 100.0  # either state counts, and raises the peak
    assert first_live(0, hx, hv, 0.0, negligible) == (2, 100.0)
    assert first_live(0, hx * 0, hv * 0, 0.0, negligible) == (5, 0.0)  # all zero: all gone
    for bad in (np.nan, np.inf):
        broken = hx.copy()
        broken[0, 3] = bad
        assert first_live(7, broken, hv, 1.0, negligible) == (7, 1.0)


def test_free_steps_exclude_clipped_unpenalised_and_inactive_coordinates():
    from skacv.iterations._penalties import Penalty

    path = np.array([[1.0, 1.0, 0.0, 1.0],  # inactive at step 2
                     [0.5, 0.5, 0.5, -0.1],  # a sign change at step 3: clipped
                     [1.0, 1.1, 1.2, 1.3],
                     [-2.0, -2.1, -2.2, -2.3],
                     [3.0, 3.0, 3.0, 3.0]])  # unpenalised
    it = FISTA(1.0, penalty=Penalty(l1=0.1, l2=0.3, n_unpenalized=1))
    free = settled_form.free_steps(it, path)
    coef = it.extrapolation_coefficients(3, path[:, 3], path[:, 2])
    assert free.shape == (5, 3)
    assert not free[0, 1] and not free[4].any()  # inactive; unpenalised with a ridge part
    assert not free[1, 2] and coef[1][1] == 0.0
    assert free[2:4].all()
    # without the ridge part the unpenalised coordinate is free where active
    it = ISTA(1.0, penalty=Penalty(l1=0.1, n_unpenalized=1))
    assert settled_form.free_steps(it, path)[4].all()


def _nodes(r=7, seed=2):
    rng = np.random.default_rng(seed)
    return rng.uniform(0.01, 2.0, r), rng.uniform(0.2, 1.5, r)


@pytest.mark.parametrize("step, l2", [(0.45, 0.0), (0.45, 0.3), (0.9, 0.1)])
def test_stationary_response_equals_the_recursion(step, l2):
    """Gradient descent with a constant step (ridge or not, ``rho_j`` of
    either sign: the step 0.9 overshoots the top node): the closed-form
    diagonals of the memory matrix equal the scalar recursion stepped
    through the iteration's tangent; an iteration whose map changes (a
    schedule, Nesterov's momentum, a heavy ball) has none."""
    from skacv.estimates.risk._spectral import _nodes_memory, stationary_response
    from skacv.iterations import GradientDescent, HeavyBall, Nesterov
    from skacv.iterations._penalties import L2

    lam, w = _nodes()
    T = 300
    it = GradientDescent(step_size=step, penalty=L2(l2) if l2 else None)
    A, _ = _nodes_memory(it, lam, T, w, True)  # the recursion
    a = stationary_response(it, lam, w * lam, T)
    np.testing.assert_allclose(a, A[:, 0], rtol=1e-12, atol=1e-15 * np.abs(a).max())
    fast, fast_v = _nodes_memory(it, lam, T, w, True, closed_form=True)
    np.testing.assert_allclose(fast, A, rtol=1e-12, atol=1e-15 * np.abs(a).max())
    assert fast_v is not fast and np.array_equal(fast_v, fast)
    if step == 0.9:
        assert np.any(1 - step * (lam + l2) < 0) and np.any(a[1:] < 0)
    schedule = GradientDescent(step_size=step, schedule=lambda k: 1.0 / np.sqrt(k))
    for other in (schedule, Nesterov(step_size=step), HeavyBall(step_size=step)):
        assert stationary_response(other, lam, w * lam, T) is None


@pytest.mark.parametrize("step, l2, c", [(0.45, 0.2, 1.0), (1.0, 0.0, 0.0), (0.6, 0.0, 1.0)])
def test_stationary_settled_form_convolves_as_the_recursion(step, l2, c, statistical_policy):
    """The settled form of a stationary iteration by FFT (the corrections'
    Toeplitz inverse by Newton's doubling, then causal convolutions) equals
    the state-space recursion: corrected residuals, the memory matrix's
    products, its dense matrices and the correction's row norms, with
    non-negative ``A_sources`` and with signs (the step 1.0: the top node's
    multiplier near -1, the inverse's entries down to -0.015)."""
    from skacv.iterations import GradientDescent
    from skacv.iterations._penalties import L2

    statistical_policy(negligible_state=0.0)  # the recursion drops nothing
    lam, w = _nodes()
    T, n_eff = 700, 30.0
    it = GradientDescent(step_size=step, penalty=L2(l2) if l2 else None)
    args = (it, T, np.zeros((1, 1)), np.zeros((1, 1)), lam, w * lam,
            np.zeros((lam.size, 0)), np.zeros((lam.size, 0)))
    fast = settled_form.SettledMemory(*args)
    slow = settled_form.SettledMemory(*args, convolve=False)
    assert fast.stationary_kernel() is not None and slow.stationary_kernel() is None
    F = np.random.default_rng(0).standard_normal((4, T + 1))
    Rf, Rs = fast.solve(F, None, n_eff, c)[0], slow.solve(F, None, n_eff, c)[0]
    np.testing.assert_allclose(Rf, Rs, rtol=1e-9, atol=1e-12 * np.abs(Rs).max())
    np.testing.assert_allclose(fast.apply(F)[0], slow.apply(F)[0], rtol=1e-9,
                               atol=1e-12 * np.abs(F).max())
    np.testing.assert_allclose(fast.dense()[0], slow.dense()[0], rtol=1e-9, atol=1e-14)
    policies = (get_policy(), get_statistics())
    norms = fast.inverse_row_norms(n_eff, policies, c)
    np.testing.assert_allclose(norms, slow.inverse_row_norms(n_eff, policies, c), rtol=1e-9)
    assert fast.nonnegative(1e-12) == (step < 0.9)
    if step == 1.0:  # the row norms are not the row sums
        assert norms[-1] > 1.02 * fast.solve(np.ones((1, T + 1)), None, n_eff, c)[0][0, -1]


def test_a_schedule_equal_at_its_ends_is_not_stationary():
    """A step schedule whose first and last steps agree but whose middle
    differs has no Toeplitz memory matrix: no closed form, and the settled
    form of such a path runs the recursion (its risk path equals the dense
    spectral route's)."""
    from skacv.estimates.risk._spectral import stationary_response
    from skacv.iterations import GradientDescent

    lam, w = _nodes()
    T = 200
    schedule = np.ones(T)
    schedule[T // 3:T // 2] = 0.3
    it = GradientDescent(step_size=0.45, schedule=schedule)
    assert stationary_response(it, lam, w * lam, T) is None
    memory = settled_form.linear_settled_memory(it, T, lam, w)
    assert memory.stationary_kernel() is None


@pytest.mark.parametrize("T", [1000, 3000])
def test_an_amplifying_correction_declines_the_convolutions(T):
    """Where the correction's inverse grows (the nodes' weights above
    ``n_eff``: ``d - a(z) / n_eff`` vanishes inside the unit disk, a fit near
    interpolation), FFT rounding relative to its largest terms would swamp
    the early iterates: the settled form declines the convolutions past the
    speed policy's ``settled_fft_max_gain`` and its corrections are the
    recursion's, early iterates exact."""
    from skacv.iterations import GradientDescent

    rng = np.random.default_rng(4)
    lam = rng.uniform(0.05, 1.0, 12)
    w = np.full(12, 3.0)  # sum 36 > n_eff
    n_eff, c = 30.0, 1.0
    it = GradientDescent(step_size=0.9)
    max_gain = get_policy().settled_fft_max_gain
    fast = settled_form.linear_settled_memory(it, T, lam, w, max_gain)
    slow = settled_form.SettledMemory(it, T, np.zeros((1, 1)), np.zeros((1, 1)), lam, w * lam,
                                      np.zeros((12, 0)), np.zeros((12, 0)), convolve=False)
    F = np.random.default_rng(0).standard_normal((3, T + 1))
    with record() as paths:
        Rf = fast.solve(F, None, n_eff, c)[0]
    assert [not d["gain"] <= max_gain for d in paths.details("settled_fft_declined")] == [True]
    Rs = slow.solve(F, None, n_eff, c)[0]
    np.testing.assert_array_equal(Rf, Rs)
    assert np.abs(Rs[:, -1]).max() > 1e6 * np.abs(Rs[:, 0]).max()  # it amplifies
