"""One fit's trajectory on a certified working set of features
(skacv.iterations._screening): the same path as the fit loop over every
feature, whichever way the working set changes (refreshes, features
entering between them, pauses over every feature), the same continuation
after a warm start or a pickle, and the same estimates read from it."""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone

from skacv import TrajectoryElasticNet, TrajectoryLasso
from skacv._trace import record


def _wide(n=60, p=400, rho=0.9, seed=0):
    """AR(1) features (correlation ``rho`` between neighbours) with an
    offset, p > n: FISTA's iterates at a small alpha take in many features
    before they settle on a support, and features enter late."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, p))
    X = np.empty_like(Z)
    X[:, 0] = Z[:, 0]
    for j in range(1, p):
        X[:, j] = rho * X[:, j - 1] + np.sqrt(1 - rho**2) * Z[:, j]
    X += 1.0
    beta = np.zeros(p)
    beta[[3, 50, 120, 121, 300]] = [2.0, -1.5, 1.0, 1.0, 0.5]
    y = X @ beta + rng.standard_normal(n)
    return X, y


def _screening(speed_policy, on=True, after=0, refresh=None, share=None):
    """The fit loop's working set from step ``after`` on for designs of at
    least 8 features; ``refresh``, ``share``: the policy's fields."""
    speed_policy(trajectory_screening=on, trajectory_screening_after=after,
                 screening_min_features=8)
    if refresh is not None:
        speed_policy(screening_refresh_passes=refresh)
    if share is not None:
        speed_policy(screening_max_share=share)


ESTIMATORS = {
    "fista": TrajectoryLasso(alpha=0.05, max_iter=400, estimate_risk=False),
    "ista": TrajectoryLasso(alpha=0.05, solver="ista", max_iter=300, estimate_risk=False),
    "positive": TrajectoryLasso(alpha=0.02, max_iter=300, estimate_risk=False, positive=True),
    "enet": TrajectoryElasticNet(alpha=0.1, l1_ratio=0.5, max_iter=300, estimate_risk=False),
}


def _fit(est, X, y, sample_weight=None):
    with record() as paths:
        est = clone(est).fit(X, y, sample_weight=sample_weight)
    return est, paths


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("refresh", ["often", "never"])
def test_screened_path_equals_full_loop(speed_policy, name, weighted, refresh):
    """Every iterate of the screened fit is the loop's over all features
    (float64, 1e-10 of the path's scale: the products of fewer columns
    round differently, and FISTA carries the rounding along). With no
    refresh after the first, every feature that enters goes through the
    certificate: a missed one would change the path from its step on;
    refreshed often, the prefix changes at many steps."""
    X, y = _wide()
    w = np.random.default_rng(1).uniform(0.2, 3.0, X.shape[0]) if weighted else None
    est = ESTIMATORS[name]
    _screening(speed_policy, on=False)
    whole, paths = _fit(est, X, y, w)
    assert "trajectory_screening" not in paths
    _screening(speed_policy, refresh=0.05 if refresh == "often" else 1e12, share=2.0)
    screened, paths = _fit(est, X, y, w)
    assert paths.count("trajectory_screening") == 1
    # the working set changed on the way: features entered past the first prefix
    assert paths.count("trajectory_screening_grow") > 0
    if refresh == "often":
        assert paths.count("trajectory_screening_refresh") > 5
    else:
        assert paths.count("trajectory_screening_refresh") == 1
    scale = np.max(np.abs(whole.coef_path_))
    assert_allclose(screened.coef_path_, whole.coef_path_, rtol=0, atol=1e-10 * scale)
    assert_allclose(screened.intercept_path_, whole.intercept_path_, rtol=0,
                    atol=1e-10 * max(1.0, abs(whole.intercept_)))
    # exact zeros stay exact: the supports along the path are the loop's
    assert_array_equal(screened.coef_path_ != 0, whole.coef_path_ != 0)


def test_screened_path_pauses_and_comes_back(speed_policy):
    """A working set that costs more than the policy's share of a step
    over all features hands the loop back (a pause over every feature)
    and is taken again later; the path is the same throughout."""
    X, y = _wide()
    est = TrajectoryLasso(alpha=0.01, max_iter=400, estimate_risk=False)
    _screening(speed_policy, on=False)
    whole, _ = _fit(est, X, y)
    _screening(speed_policy, share=0.1)
    screened, paths = _fit(est, X, y)
    assert paths.count("trajectory_screening_pause") >= 1
    # taken again after the pause: a refresh after it
    events = paths.names()
    pause = events.index("trajectory_screening_pause")
    assert "trajectory_screening_refresh" in events[pause:]
    scale = np.max(np.abs(whole.coef_path_))
    assert_allclose(screened.coef_path_, whole.coef_path_, rtol=0, atol=1e-10 * scale)


def test_screening_waits_for_a_long_path(speed_policy):
    """The loop runs over every feature for the policy's
    ``trajectory_screening_after`` steps: a path that ends before then
    takes no working set (no refresh, no copy of ``X~``)."""
    X, y = _wide()
    _screening(speed_policy, after=50)
    _, paths = _fit(TrajectoryLasso(alpha=0.05, max_iter=40, estimate_risk=False), X, y)
    assert "trajectory_screening_refresh" not in paths
    assert "transposed_columns" not in paths
    _, paths = _fit(TrajectoryLasso(alpha=0.05, max_iter=80, estimate_risk=False), X, y)
    assert paths.count("trajectory_screening_refresh") >= 1


def test_screened_warm_start_and_pickle_continue_bit_for_bit(speed_policy):
    """A screened fit of 150 steps, then 150 more by warm start (after a
    pickle round trip, which drops the working set's copy of the columns),
    is the screened fit of 300 steps bit for bit: the screen is kept in the
    trajectory's state, so the continuation takes the same decisions."""
    X, y = _wide()
    _screening(speed_policy, after=20, refresh=0.3)
    cold = TrajectoryLasso(alpha=0.03, max_iter=300, estimate_risk=False).fit(X, y)
    warm = TrajectoryLasso(alpha=0.03, max_iter=150, estimate_risk=False,
                           warm_start=True).fit(X, y)
    warm = pickle.loads(pickle.dumps(warm))
    warm.set_params(max_iter=300).fit(X, y)
    assert_array_equal(warm.coef_path_, cold.coef_path_)
    assert_array_equal(warm.intercept_path_, cold.intercept_path_)


def test_fitted_estimator_keeps_no_copy_of_the_columns(speed_policy):
    """A fit that will not continue (``warm_start=False``, or a search's
    candidate once its path has stopped growing) drops the working set's
    column buffer and the centred design it was taken from (up to twice
    ``X``'s size: 1.88 times at 1000 x 8000), as a pickle does; a warm
    start keeps them. Continued after ``set_params(warm_start=True)``, the
    fit takes them again: the fit of 300 steps, bit for bit."""
    from skacv import TrajectoryEarlyStoppingCV

    X, y = _wide()
    _screening(speed_policy, after=20, refresh=0.3)
    cold = TrajectoryLasso(alpha=0.03, max_iter=300, random_state=0).fit(X, y)
    with record() as paths:
        est = TrajectoryLasso(alpha=0.03, max_iter=150, random_state=0).fit(X, y)
    assert "trajectory_screening" in paths
    screen = est._solver_state.screen
    assert screen.cols is None and screen.design is None
    warm = TrajectoryLasso(alpha=0.03, max_iter=150, warm_start=True).fit(X, y)
    assert warm._solver_state.screen.cols is not None
    assert warm._solver_state.screen.design is not None
    est.set_params(warm_start=True, max_iter=300).fit(X, y)
    assert_array_equal(est.coef_path_, cold.coef_path_)
    assert_allclose(est.risk_path_, cold.risk_path_, rtol=1e-12)
    # the candidates grow by warm starts; released once their paths stop
    with record() as paths:
        search = TrajectoryEarlyStoppingCV(TrajectoryLasso(max_iter=150), criterion="risk",
                                           param_grid={"alpha": [0.1, 0.03]}, search="grid",
                                           random_state=0).fit(X, y)
    assert paths.count("fit") > 2  # (stages)
    screen = search.estimator_._solver_state.screen
    assert screen is not None and screen.cols is None and screen.design is None


def test_screened_estimates_equal_full_loop(speed_policy):
    """The risk estimate and the leave-one-out path read what the loop
    records (the fitted values, the gradient points of the clipped
    extrapolation): screened, they are the full loop's (1e-8)."""
    X, y = _wide(n=80)
    est = TrajectoryLasso(alpha=0.05, max_iter=150, random_state=0, estimate_loo=True)
    _screening(speed_policy, on=False)
    whole, _ = _fit(est, X, y)
    _screening(speed_policy, after=10)
    screened, paths = _fit(est, X, y)
    assert paths.count("trajectory_screening_refresh") >= 1
    assert_allclose(screened.risk_path_, whole.risk_path_, rtol=1e-8)
    assert_allclose(screened.loo_path_, whole.loo_path_, rtol=1e-8)


def test_screening_only_where_its_certificate_holds(speed_policy):
    """No working set for ridge (no zero band), for SGD (mini-batches),
    for a sparse ``X`` or for designs below ``screening_min_features``;
    the fits are then the loop's own."""
    import scipy.sparse as sp

    from skacv import IterativeRidge

    X, y = _wide()
    _screening(speed_policy)
    for est, data in [
        (IterativeRidge(alpha=1.0, max_iter=100, estimate_risk=False), X),
        (TrajectoryLasso(alpha=0.05, solver="sgd", max_iter=20, estimate_risk=False,
                         random_state=0), X),
        (TrajectoryLasso(alpha=0.05, max_iter=100, estimate_risk=False), sp.csr_matrix(X)),
    ]:
        _, paths = _fit(est, data, y)
        assert "trajectory_screening" not in paths
    speed_policy(screening_min_features=X.shape[1] + 1)
    _, paths = _fit(TrajectoryLasso(alpha=0.05, max_iter=100, estimate_risk=False), X, y)
    assert "trajectory_screening" not in paths


@pytest.mark.parametrize("positive", [False, True])
def test_certificate_catches_a_residual_moving_along_a_column(speed_policy, positive):
    """The certificate's bound is reached when the residual moves along a
    column: moved by slightly less than that column's slack (in units of
    ``||x~_j||``) nothing past the prefix is computed as leaving; by
    slightly more, the column enters. A weaker bound (a shorter reach)
    would let it through."""
    from skacv.iterations._iterations import FISTA
    from skacv.iterations._path import init_state
    from skacv.iterations._penalties import L1
    from skacv.iterations._screening import TrajectoryScreen
    from skacv.linalg._design import make_design

    _screening(speed_policy)
    X, y = _wide(n=40)
    design = make_design(X, None, True)
    _, r0 = design.center_y(y)
    z = design.rmatvec(r0)
    alpha = 1.05 * np.max(np.abs(z)) / design.n_eff  # every coordinate in the band
    screen = TrajectoryScreen(design, FISTA(1.0, penalty=L1(alpha, positive=positive)))
    screen.policy = design.policy
    screen.design = design
    state = init_state(design)
    screen._refresh(design, state, r0)
    assert screen.width == 0
    j = screen.order[0]  # the column closest to the band
    u = design.X[:, j] / np.linalg.norm(design.X[:, j])
    slack = screen.keys[0]
    x = np.zeros(0)
    # the gradient's side that moves towards the band
    sign = 1.0 if positive else np.sign(z[j])
    assert screen._certify(r0 + 0.99 * slack * sign * u, x, x)
    assert screen.pending is None
    assert not screen._certify(r0 + 1.01 * slack * sign * u, x, x)
    action, entering = screen.pending
    assert action == "grow" and screen.order[entering[0]] == j


@pytest.mark.parametrize("name", ["fista", "positive", "enet"])
def test_screened_gap_checks_end_where_the_full_loop_ends(speed_policy, name):
    """A path with ``end_tol`` (a search's staged paths) checks the duality
    gap every ``end_check`` steps; on the working set the check reads
    ``X~^T r`` from the prefix's columns where the certificate keeps every
    other feature inside the band: the path ends at the same check as the
    loop over every feature, with the same iterates, and those checks take
    no product over every feature."""
    from skacv.estimators._setup import FitPlan

    X, y = _wide()
    est = clone(ESTIMATORS[name]).set_params(max_iter=3000)

    def fit(on):
        _screening(speed_policy, on=on)
        e = clone(est)
        with record() as paths, e.planned(FitPlan(end_tol=1e-5)):
            e.fit(X, y)
        return e, paths

    whole, whole_paths = fit(False)
    screened, paths = fit(True)
    assert whole.n_iter_ < 3000  # ended by a gap check
    assert screened.n_iter_ == whole.n_iter_
    scale = np.max(np.abs(whole.coef_path_))
    assert_allclose(screened.coef_path_, whole.coef_path_, rtol=0, atol=1e-10 * scale)
    read = paths.count("trajectory_screening_gap")
    assert read >= 1
    # each check read from the prefix saves one product over every feature
    # (the refreshes' products come on top of the loop's own)
    refreshes = paths.count("trajectory_screening_refresh")
    assert (paths.count("rmatvec") - refreshes
            <= whole_paths.count("rmatvec") - read)


def test_gap_gradient_reads_the_features_within_reach(speed_policy):
    """``gap_gradient``: ``X~^T r`` of the prefix and of the features past
    it whose slack the residual may reach, zeros for the others (their
    gradients inside the band: the gap's scale is the exact gradient's,
    so the gap is); a column the residual moved along past its slack is
    computed, and the gap is still the exact one; ``None`` where those
    columns exceed the policy's share."""
    from skacv.iterations._iterations import FISTA
    from skacv.iterations._path import init_state
    from skacv.iterations._penalties import L1, duality_gap
    from skacv.iterations._screening import TrajectoryScreen
    from skacv.linalg._design import make_design

    _screening(speed_policy)
    X, y = _wide(n=40)
    design = make_design(X, None, True)
    _, r0 = design.center_y(y)
    z = design.rmatvec(r0)
    alpha = 1.05 * np.max(np.abs(z)) / design.n_eff
    screen = TrajectoryScreen(design, FISTA(1.0, penalty=L1(alpha)))
    screen.policy = design.policy
    state = init_state(design)
    screen._refresh(design, state, r0)
    j = screen.order[0]
    screen._columns(design, 2)
    screen._grow(np.array([0]))  # the closest column in the prefix
    k = screen.order[1]  # now the closest past it
    u = design.X[:, k] / np.linalg.norm(design.X[:, k])
    slack = screen.keys[1]
    sign = np.sign(z[k])
    near = r0 + 0.99 * slack * sign * u
    corr = screen.gap_gradient(design, near)
    exact = design.rmatvec(near)
    assert corr is not None
    assert_allclose(corr[j], exact[j], rtol=1e-12)
    assert np.count_nonzero(corr) == 1
    b = np.zeros(design.n_features)
    b[j] = 0.1
    yy = float(r0 @ r0)
    n_eff = design.n_eff
    gap_prefix = duality_gap(float(near @ near), float(near @ r0), corr / n_eff, 0.1, alpha,
                             n_eff)
    gap_exact = duality_gap(float(near @ near), float(near @ r0), exact / n_eff, 0.1, alpha,
                            n_eff)
    assert_allclose(gap_prefix, gap_exact, rtol=1e-12)
    assert yy > 0
    # past its slack: that column's gradient may have left the band, so it is
    # computed (it sets the gap's scale there), the others still are not
    far = r0 + 1.5 * slack * sign * u
    corr = screen.gap_gradient(design, far)
    exact = design.rmatvec(far)
    assert corr is not None and corr[k] != 0
    assert_allclose(corr[[j, k]], exact[[j, k]], rtol=1e-12)
    assert np.max(np.abs(exact)) > alpha * n_eff  # (k outside the band: it sets the scale)
    assert np.count_nonzero(corr) < design.n_features
    gaps = [duality_gap(float(far @ far), float(far @ r0), c / n_eff, 0.1, alpha, n_eff)
            for c in (corr, exact)]
    assert_allclose(gaps[0], gaps[1], rtol=1e-12)
    # (the design's policy: one column the most worth reading)
    speed_policy(screening_max_share=1.0 / design.n_features)
    assert screen.gap_gradient(make_design(X, None, True), far) is None
