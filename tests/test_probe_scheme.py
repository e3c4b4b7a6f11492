"""The probe scheme of the proximal chains (``probe_scheme``): the choice
of ``"auto"`` (:func:`~skacv.estimates.risk._engine.plan_estimate`), and its
validation."""

import numpy as np
import pytest
from sklearn.base import clone

import skacv.estimates.risk._engine as engine
import skacv.estimates.risk._estimate as risk_module
from skacv import IterativeRidge, TrajectoryLasso
from skacv._trace import record
from skacv.estimates.risk._settled import settled_step


def _problem(seed=0, n=40, p=60):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X[:, :6] @ np.linspace(1.0, 2.0, 6) + rng.standard_normal(n)
    return X, y


def test_auto_scheme(speed_policy):
    """``"auto"``: the pooled probes (one chain), the shared ones with a heavy
    ball, for exact traces and on paths of ``settled_min_tail`` steps or more
    (whose supports may settle); ``"shared"`` and ``"pooled"`` force the
    choice; anything else (the removed ``"independent"`` and ``"grouped"``
    included) is refused."""
    def engines(paths):  # the memory-matrix engines the estimates ran
        return [d["form"] for d in paths.details("memory_matrices")]

    X, y = _problem(0, n=60, p=60)
    lasso = TrajectoryLasso(0.05, max_iter=8, random_state=0)
    cases = [
        ({}, "pooled"),
        ({"n_probes": None}, "shared"),
        ({"risk_options": {"probe_scheme": "shared"}}, "shared"),
        ({"risk_options": {"probe_scheme": "pooled"}}, "pooled"),
    ]
    for params, expected in cases:
        with record() as paths:
            clone(lasso).set_params(**params).fit(X, y)
        assert engines(paths) == [expected], params
    # a heavy ball (no Lasso solver has one) keeps the shared probes
    fitted = clone(lasso).fit(X, y)
    prob = fitted._problem(X, y)
    for hb, form in ((0.5, "shared"), (0.0, "pooled")):
        plan = engine.plan_estimate(prob.design, _HeavyBallLike(prob.iteration, hb),
                                    fitted.coef_path_, 10)
        assert plan.form == form, hb
    # a long path whose supports settle takes the settled form (the shared
    # probes), "auto" or "shared"; one that does not, the pooled probes
    speed_policy(settled_min_tail=8)
    with record() as paths:
        long = clone(lasso).set_params(alpha=0.3, max_iter=60).fit(X, y)
    assert paths.count("settled_risk") == 1 and "pooled" not in engines(paths)
    assert settled_step(long._problem(X, y).iteration, long.coef_path_) <= 52
    with record() as paths:
        clone(long).set_params(risk_options={"probe_scheme": "pooled"}).fit(X, y)
    assert "settled_risk" not in paths and engines(paths) == ["pooled"]
    for scheme in ("per_source", "independent", "grouped"):
        with pytest.raises(ValueError, match="'probe_scheme' parameter of TrajectoryLasso"):
            clone(lasso).set_params(risk_options={"probe_scheme": scheme}).fit(X, y)
    # linear iterations do not use chains: the scheme does not change them (and
    # IterativeRidge has no such key)
    ridge = IterativeRidge(1.0, max_iter=10, random_state=0)
    with pytest.raises(ValueError, match="unknown key 'probe_scheme'"):
        clone(ridge).set_params(risk_options={"probe_scheme": "shared"}).fit(X, y)
    ridge.fit(X, y)
    prob = ridge._problem(X, y)
    a, b = (risk_module.trajectory_risk(prob.design, prob.target_rows, prob.iteration,
                                        ridge.coef_path_, n_probes=ridge.n_probes,
                                        random_state=0, probe_scheme=scheme).risk
            for scheme in ("pooled", "shared"))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a, ridge.risk_path_, rtol=1e-10)


class _HeavyBallLike:
    """``iteration`` with a heavy ball of ``hb`` at every step, as far as
    the plan of the estimate asks."""

    def __init__(self, iteration, hb=0.5):
        self._iteration, self._hb = iteration, hb

    def __getattr__(self, name):
        return getattr(self._iteration, name)

    def uses_heavy_ball(self, n_steps, first=1):  # as Iteration.uses_heavy_ball
        return self._hb != 0.0 and n_steps >= first


def test_one_fit_counts_its_probes_once():
    """A fit resolves ``n_probes="auto"`` once: the plan before its loop
    (the estimate's memory check) hands its number of probes to the
    estimate."""
    X, y = _problem(1, n=60, p=80)
    for est in (TrajectoryLasso(0.05, max_iter=12, random_state=0),
                IterativeRidge(max_iter=12, random_state=0)):
        with record() as paths:
            est.fit(X, y)
        assert paths.count("check_risk_memory") == 1
        assert paths.count("resolve_n_probes") == 1


def test_canonical_chains_beyond_the_memory_limit_take_the_probes():
    # n <= 40 takes the n canonical vectors (exact traces) in shared chains of
    # n columns a source, O(n T) columns: beyond path_memory_limit the fit
    # takes the Hutchinson probes of larger designs (the pooled chain), where
    # before it was refused after its path; n_probes=None (asked for) is still
    # refused. 30 x 200: the canonical chains need 11.5 MiB
    import skacv

    medians = []
    for seed in range(4):
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((30, 200))
        y = X[:, :5].sum(axis=1) + 0.5 * rng.standard_normal(30)  # 5 ones, 195 zeros
        est = TrajectoryLasso(alpha=0.1, max_iter=150, random_state=0)
        exact = clone(est).fit(X, y)
        assert exact.risk_diagnostics_.n_probes is None  # the canonical vectors
        with skacv.config_context(path_memory_limit=8), pytest.warns(Warning), record() as paths:
            probed = clone(est).fit(X, y)
        assert "canonical_chains_too_large" in paths
        assert probed.risk_diagnostics_.n_probes is not None
        with skacv.config_context(path_memory_limit=8):
            with pytest.raises(ValueError, match="Jacobian chains"):
                clone(est).set_params(n_probes=None).fit(X, y)
        # the probes' estimate where both are reliable: within their fluctuation
        # (medians 0.03-0.06 over these seeds, one iterate 0.69)
        both = probed.risk_reliable_ & exact.risk_reliable_
        assert both.sum() >= 10
        medians.append(np.median(np.abs(probed.risk_path_[both] / exact.risk_path_[both] - 1)))
    assert max(medians) < 0.15
