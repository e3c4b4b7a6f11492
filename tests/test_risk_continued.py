"""What a stage of an early-stopped search continues instead of redoing
(:mod:`skacv.model_selection._stages`), bit for bit what one run gives:

* the template of the pooled probes' split, the linear counterpart's
  recursion on the same nodes (:func:`skacv.estimates.risk._pooled.template_matrices`,
  ``resume``), for a momentum schedule (FISTA: one column a source) and a
  constant one (ISTA: Toeplitz), with a ridge part or not;
* the gradient points of a clipped extrapolation, written by the fit loop
  in the covariance form (continued by a warm start) where the risk
  estimate formed them again
  (:func:`skacv.estimates.risk._readout.source_points`);
* a warm-started fit in stages (20, 40, 52 steps, as the search grows it)
  against the same stages with the template's recursion dropped before
  each: the same ``risk_path_``, memory matrices and state, bit for bit.
"""

import numpy as np
import pytest

import skacv.estimates.risk._pooled as pooled
from skacv import TrajectoryElasticNet, TrajectoryLasso
from skacv._trace import record
from skacv.estimates.risk._readout import source_points
from skacv.estimates.risk._spectral import counterpart_memory_matrix

STAGES = (20, 40, 52)


def _data(n=150, p=12, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + 0.5 * rng.standard_normal((n, 1))
    beta = np.zeros(p)
    beta[:4] = rng.standard_normal(4)
    return X, X @ beta + rng.standard_normal(n)


def _iteration(make):
    X, y = _data()
    est = make(max_iter=STAGES[-1], estimate_risk=False).fit(X, y)
    return est._problem(X, y).iteration, est.coef_path_


MAKERS = {
    "fista": lambda **kw: TrajectoryLasso(0.05, solver="fista", **kw),
    "ista": lambda **kw: TrajectoryLasso(0.05, solver="ista", **kw),
    "enet_fista": lambda **kw: TrajectoryElasticNet(0.05, l1_ratio=0.5, solver="fista", **kw),
}


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_continued_template_is_one_run_bit_for_bit(name):
    iteration, _ = _iteration(MAKERS[name])
    rng = np.random.default_rng(1)
    lam, w = rng.uniform(0.05, 3.0, 9), rng.uniform(0.5, 2.0, 9)
    chain = None
    for T in STAGES:
        A, Av, chain = counterpart_memory_matrix(iteration, lam, T, w, resume=chain, keep=True)
        assert chain.k == T
    A0, Av0 = counterpart_memory_matrix(iteration, lam, STAGES[-1], w)
    np.testing.assert_array_equal(A, A0)
    np.testing.assert_array_equal(Av, Av0)
    assert np.abs(A0).max() > 0  # not trivially equal
    # resumed at its own end (what the probes' growth reads): the same matrices
    again = counterpart_memory_matrix(iteration, lam, STAGES[-1], w, resume=chain)
    np.testing.assert_array_equal(again[0], A0)
    np.testing.assert_array_equal(again[1], Av0)


def _wide(n=80, p=40, seed=3):
    """A design on which the products of the gradient points round
    differently in another memory layout (measured: F order against
    source_points' C order moves ``risk_path_`` by an ulp at 40 steps)."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n, p)
    beta = np.zeros(p)
    beta[:5] = rng.randn(5)
    return X, X @ beta + rng.randn(n)


@pytest.mark.parametrize("name", ["fista", "enet_fista"])
@pytest.mark.parametrize("data, stages", [(_data, STAGES), (_wide, (20, 40))])
def test_the_loop_writes_the_gradient_points_the_estimate_read(name, data, stages,
                                                              speed_policy):
    """In the covariance form the loop's ``v^t`` (continued through the
    stages) are :func:`source_points` of the path, bit for bit, and the
    risk estimate takes them instead of forming them: the same
    ``risk_path_`` as the estimate that forms them (the loop records
    nothing: the speed policy's ``loop_records=False``)."""
    X, y = data()
    est = MAKERS[name](max_iter=stages[0], warm_start=True, random_state=0).fit(X, y)
    for T in stages[1:]:
        est.set_params(max_iter=T).fit(X, y)
    assert est._solver_state.form == "covariance"
    iteration = est._problem(X, y).iteration
    assert iteration.clips
    V = est._point_path
    V0 = source_points(iteration, est.coef_path_)
    np.testing.assert_array_equal(V, V0)
    assert np.any(V0 != est.coef_path_)  # the extrapolation moved the points
    with record() as paths:
        again = MAKERS[name](max_iter=stages[-1], random_state=0).fit(X, y)
    assert "source_points" not in paths
    speed_policy(loop_records=False)
    with record() as paths:
        plain = MAKERS[name](max_iter=stages[-1], random_state=0).fit(X, y)
    assert "source_points" in paths and plain._point_path is None
    np.testing.assert_array_equal(again.risk_path_, plain.risk_path_)
    np.testing.assert_array_equal(again.memory_matrix_, plain.memory_matrix_)


def _staged(make, keep):
    """A warm-started fit grown through STAGES; without ``keep`` the state's
    template recursion is dropped before each stage (what a stage
    recomputed before it was kept)."""
    X, y = _data()
    est = make(max_iter=STAGES[0], warm_start=True, random_state=0).fit(X, y)
    nodes = [est._risk_state.nodes]
    for T in STAGES[1:]:
        if not keep:
            est._risk_state.template = None
        est.set_params(max_iter=T).fit(X, y)
        nodes.append(est._risk_state.nodes)
    return est, nodes


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_fit_in_stages_keeps_what_it_continues_bit_for_bit(name):
    kept, nodes = _staged(MAKERS[name], keep=True)
    fresh, _ = _staged(MAKERS[name], keep=False)
    state = kept._risk_state
    assert isinstance(state, pooled.PooledState)
    assert state.template is not None and state.template.k == STAGES[-1]
    assert all(n is nodes[0] for n in nodes)  # the nodes kept: the recursion continued
    np.testing.assert_array_equal(kept.risk_path_, fresh.risk_path_)
    np.testing.assert_array_equal(kept.memory_matrix_, fresh.memory_matrix_)
    np.testing.assert_array_equal(kept.risk_reliable_, fresh.risk_reliable_)
    np.testing.assert_array_equal(state.template.A, fresh._risk_state.template.A)


def test_a_stage_takes_the_first_validation_for_the_same_objects_only():
    """In a block of the plan's ``same_data`` (the stages of a search), a
    warm refit given the very objects the first fit validated takes its
    validated data; other objects (a copy) are validated; nothing of it
    outlives the block."""
    from skacv.estimators._setup import FitPlan

    X, y = _data()
    est = TrajectoryLasso(0.05, max_iter=20, warm_start=True, random_state=0)
    with record() as paths, est.planned(FitPlan(same_data=True)):
        est.fit(X, y)
        est.set_params(max_iter=30).fit(X, y)
        assert paths.details("validate") == [{"reset": True}]
        est.set_params(max_iter=40).fit(X.copy(), y)
        assert paths.details("validate") == [{"reset": True}, {"reset": False}]
    assert paths.count("fit") == 3
    assert "_plan_data" not in est.__dict__
    one = TrajectoryLasso(0.05, max_iter=40, random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.coef_path_, one.coef_path_)


def test_a_stage_validates_no_parameters_within_the_plan_only():
    """A later stage of a search (a warm refit in a block of the plan's
    ``same_data``) does not validate its parameters again; the warm start's
    guard still refuses a changed protected one, and outside the block a
    warm refit validates them."""
    from sklearn.utils._param_validation import InvalidParameterError

    from skacv.estimators._setup import FitPlan

    X, y = _data()
    est = TrajectoryLasso(0.05, max_iter=20, warm_start=True, random_state=0)
    with record() as paths, est.planned(FitPlan(same_data=True)):
        est.fit(X, y)
        est.set_params(max_iter=30).fit(X, y)
        with pytest.raises(ValueError, match="changed"):
            est.set_params(alpha=0.1, max_iter=40).fit(X, y)
    assert paths.count("fit") == 3 and paths.count("validate_params") == 1
    est.set_params(alpha=0.05)
    with record() as paths, pytest.raises(InvalidParameterError):
        est.set_params(max_iter=-1).fit(X, y)
    assert paths.count("validate_params") == 1
    with record() as paths:
        est.set_params(max_iter=40).fit(X, y)
    assert paths.count("validate_params") == 1
    one = TrajectoryLasso(0.05, max_iter=40, random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.coef_path_, one.coef_path_)
    np.testing.assert_array_equal(est.risk_path_, one.risk_path_)


def test_a_continued_pooled_chain_is_given_no_generator():
    """The pooled chain that continues a state holds its probes and
    generator: the risk estimate does not make one for it (``None``: a draw
    from it would fail), and does for a chain that starts afresh (Rademacher
    probes: more features than the exact probes would take)."""
    from skacv.estimates.risk._engine import draws_probes, plan_estimate

    X, y = _data(p=80)
    est = TrajectoryLasso(0.05, max_iter=STAGES[0], warm_start=True, random_state=0).fit(X, y)
    state = est._risk_state
    est.set_params(max_iter=STAGES[1]).fit(X, y)
    prob = est._problem(X, y)
    plan = plan_estimate(prob.design, prob.iteration, est.coef_path_, "auto", state=state,
                         keep_state=True, adaptive=True)
    assert plan.form == "pooled"
    assert not draws_probes(prob.design, est.coef_path_, plan, state)
    assert draws_probes(prob.design, est.coef_path_, plan, None)
    shorter = est.coef_path_[:, :STAGES[0]]  # shorter than the state: afresh
    assert draws_probes(prob.design, shorter, plan, state)


def test_a_chain_keeps_a_generator_made_for_it_without_a_copy():
    """A pooled chain given a generator made for it (``own_rng``: the risk
    estimate's, seeded by an integer) keeps it in its state as it is; given
    the caller's, a copy, which the caller's later draws do not move. Both
    states continue alike, and a state's generator is never advanced in
    place (extending the same state twice gives the same probes)."""
    X, y = _data()
    est = TrajectoryLasso(0.05, max_iter=30, random_state=0).fit(X, y)
    prob = est._problem(X, y)
    path = est.coef_path_

    def run(rng, own):
        return pooled.run_pooled_chain(prob.design, prob.iteration, path, 4, rng, np.float64,
                                       keep_state=True, own_rng=own)

    mine, theirs = np.random.RandomState(0), np.random.RandomState(0)
    a, b = run(mine, True), run(theirs, False)
    assert a.state.rng is mine and b.state.rng is not theirs
    theirs.randint(10)  # the caller draws on
    np.testing.assert_array_equal(a.SA, b.SA)
    np.testing.assert_array_equal(a.state.rng.get_state()[1], b.state.rng.get_state()[1])
    one = pooled.extend_pooled(prob.design, prob.iteration, path, a.state, 2)
    two = pooled.extend_pooled(prob.design, prob.iteration, path, a.state, 2)
    np.testing.assert_array_equal(one.Z, two.Z)
    np.testing.assert_array_equal(one.SA, two.SA)
    assert one.rng is not a.state.rng
