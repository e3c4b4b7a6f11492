"""Every fast path computes what its plain reference computes.

Each fast path of skacv is an implementation chosen by the speed policy
(:class:`skacv._policy.SpeedPolicy`) in place of a plainer one that computes
the same numbers. ``FAST_PATHS`` lists them: the policy that forces the fast
path, the policy that forces the reference, a computation, the check that the
fast path was taken, and the tolerance (rounding of a different order of
operations). The test below is generated from the registry: a new fast path
is one entry, and gets its equivalence test for free.
"""

import dataclasses
import warnings
from typing import Callable

import numpy as np
import pytest
from numpy.testing import assert_allclose

import skacv.linalg._design as design_module
from skacv import IterativeRidge, TrajectoryLasso, risk_alpha_path
from skacv._policy import current_policies, policy_context
from skacv._trace import record
from skacv.model_selection._fold_designs import FoldCovariance
from skacv.model_selection._kfold import StackedFolds


def _data(n, p, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) + 0.3
    beta = np.zeros(p)
    beta[: max(1, p // 5)] = rng.standard_normal(max(1, p // 5))
    y = X @ beta + 0.5 * rng.standard_normal(n) + 1.0
    sw = rng.integers(1, 4, n).astype(np.float64)
    return X, y, sw


def _spaces(paths):
    """The spaces of the Lasso paths recorded in ``paths``."""
    return [d["space"] for d in paths.details("lasso_path")]


def _fit(make, X, y, sw):
    est = make().fit(X, y, sample_weight=sw)
    return {"coef_path_": est.coef_path_, "intercept_path_": est.intercept_path_,
            "risk_path_": getattr(est, "risk_path_", None)}, est


def covariance_form():
    """The fit loop on X~^T X~ (one p x p product a step) against the
    products with X~ (two a step): the same iterates and risk estimates."""
    X, y, sw = _data(120, 12)
    out, est = _fit(lambda: IterativeRidge(alpha=2.0, max_iter=30, random_state=0), X, y, sw)
    return out, est._solver_state.form == "covariance"


def one_pass_panels():
    """A dense X~ read once a step by row panels (X~ x and X~^T r in one
    pass) against two products a step."""
    X, y, sw = _data(90, 40)
    with record() as paths:
        out, _ = _fit(lambda: TrajectoryLasso(alpha=0.05, solver="fista", max_iter=25,
                                              random_state=0), X, y, sw)
    return out, "panel_products" in paths


def gathered_columns():
    """A few columns of X~ gathered and multiplied against a product of the
    whole X~ with a vector of zeros outside them (clipped FISTA's correction
    of the extrapolated fitted values)."""
    X, y, sw = _data(80, 60)
    with record() as paths:
        out, _ = _fit(lambda: TrajectoryLasso(alpha=0.1, solver="fista", max_iter=25,
                                              estimate_risk=False), X, y, sw)
    out.pop("risk_path_")
    return out, "columns" in paths


def _folds(estimator, X, y, sw, n_iter=20):
    splits = [(np.setdiff1d(np.arange(X.shape[0]), te), te)
              for te in np.array_split(np.arange(X.shape[0]), 4)]
    folds = StackedFolds(estimator, X, y, sw, splits, np.dtype(np.float64), current_policies())
    folds.advance(n_iter)
    return {"losses": folds.losses, "step_sizes": folds.step_sizes}, folds


def fold_covariance():
    """The K stacked folds on their Gram matrices against the pass over X."""
    X, y, sw = _data(200, 10)
    out, folds = _folds(TrajectoryLasso(alpha=0.05, solver="ista", max_iter=20), X, y, sw)
    return out, isinstance(folds.products, FoldCovariance)


def rotated_folds():
    """The folds' rows rotated so that a panel needs no mask (and its
    gradient product only the training folds) against the masked layout."""
    X, y, sw = _data(96, 30)
    out, folds = _folds(TrajectoryLasso(alpha=0.05, solver="fista", max_iter=20), X, y, sw)
    return out, folds.designs.layout == "rotated"


def prepared_products():
    """The folds' pass through products prepared for SciPy's BLAS (without
    the GIL) against NumPy's products."""
    X, y, sw = _data(96, 30)
    with record() as paths:
        out, _ = _folds(TrajectoryLasso(alpha=0.05, solver="ista", max_iter=20), X, y, sw)
    return out, "prepared_calls" in paths


def numpy_blas_products():
    """The folds' prepared products bound to NumPy's own OpenBLAS against
    SciPy's BLAS: the same routine (taken: every prepared call of the pass
    is NumPy's ``?gemm``, where NumPy ships an OpenBLAS)."""
    import skacv.linalg._blas as blas

    if blas.numpy_gemm_function("dgemm") is None:  # another BLAS: nothing to bind
        pytest.skip("NumPy's BLAS is not an OpenBLAS whose ?gemm_64_ is found")
    X, y, sw = _data(96, 30)
    out, folds = _folds(TrajectoryLasso(alpha=0.05, solver="ista", max_iter=20), X, y, sw)
    numpy_gemm = blas.numpy_gemm_function("dgemm")
    calls = [c for _, groups in folds.designs._plan[4] for g in groups for c in g[3] or ()]
    taken = bool(calls) and numpy_gemm is not None and all(
        first.func is numpy_gemm and second.func is numpy_gemm for first, _, second in calls)
    return out, taken


def retired_grid_groups():
    """K-fold CV of a whole alpha grid in one block (p > n), the block
    advancing only the alphas whose paths go on against every alpha to the
    longest path: the same K-fold paths and choice (float64 folds)."""
    from skacv import TrajectoryEarlyStoppingCV

    X, y, _ = _data(40, 120, seed=3)
    amax = np.max(np.abs((X - X.mean(0)).T @ (y - y.mean()))) / len(y)
    with record() as paths:
        search = TrajectoryEarlyStoppingCV(
            TrajectoryLasso(solver="fista", max_iter=60),
            param_grid={"alpha": np.geomspace(amax, amax * 1e-3, 6)}, criterion="kfold",
            fold_dtype="float64", random_state=0).fit(X, y)
    assert paths.count("grid_fold_block") == 1
    res = search.cv_results_
    out = {f"kfold_path_{a}": np.asarray(p) for a, p in enumerate(res["kfold_path"])}
    out["choice"] = np.array([search.best_index_, search.best_iteration_ or -1], dtype=float)
    return out, "retire_grid_groups" in paths


def covariance_path():
    """The Lasso's alpha path on ``C = X~^T X~`` (products with ``C_WW``)
    against the working sets' columns of X~: the same penalties and df, the
    risks within what the duality gaps certify (tol 1e-10; FISTA stops at
    other iterates on the two forms)."""
    X, y, sw = _data(240, 30)
    with record() as paths:
        path = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=8, eps=1e-2, tol=1e-10,
                               max_iter=50_000, sample_weight=sw)
    return {"alphas": path.alphas, "df": path.df, "risk": path.risk}, _spaces(paths) == [
        "_FeatureSpace"]


def path_columns_descent():
    """The Lasso path's working sets on the columns of X~ (p > n, isotropic
    and weighted) by scikit-learn's coordinate descent against FISTA: the
    same solutions, df and risks within what the duality gaps certify (tol
    1e-12)."""
    out, paths = _weighted_wide_path(120, 8, n_alphas=8, eps=0.05)
    return out, "columns_coordinate_descent" in paths


def path_lars():
    """The Lasso path of a small weighted p > n design read off the exact
    homotopy path (LARS-Lasso) against the working sets: the same
    solutions, df and risks within what the duality gaps certify (tol
    1e-12)."""
    out, paths = _weighted_wide_path(120, 8, n_alphas=8, eps=0.05)
    return out, "lars_path" in paths


def _weighted_wide_path(p, k, **path_params):
    """The Lasso path at tol 1e-12 of a weighted design of 80 rows and
    ``p`` columns, ``k`` of them in the signal: its solutions, df and risks
    and the record."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((80, p))
    y = X[:, :k] @ np.ones(k) + rng.standard_normal(80)
    sw = rng.uniform(0.5, 2.0, 80)
    with record() as paths:
        path = risk_alpha_path(TrajectoryLasso(), X, y, tol=1e-12, max_iter=50_000,
                               sample_weight=sw, **path_params)
    return {"coefs": path.coefs, "df": path.df, "risk": path.risk}, paths


def _descent_path_with_violators():
    """A Lasso path (p > n, weighted) whose working sets are solved by
    coordinate descent and grown by violators (the relaxed strong rule of
    slack -0.5, narrower than the penalty: most alphas take two
    working sets); its solutions, df and risks and the record."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((70, 150))
    y = X[:, :12] @ rng.standard_normal(12) + rng.standard_normal(70)
    sw = rng.uniform(0.5, 2.0, 70)
    slack = {"path_strong_rule_slack": -0.5, "path_descent_rule_slack": -0.5}
    with policy_context(**slack), record() as paths:
        path = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=10, eps=0.02, tol=1e-8,
                               max_iter=50_000, sample_weight=sw)
    return {"coefs": path.coefs, "df": path.df, "risk": path.risk}, paths


def path_fortran_columns():
    """The path's coordinate descent on working sets gathered in Fortran
    order by blocks of rows against C-ordered copies transposed per solve:
    the same columns, the same solutions."""
    out, paths = _descent_path_with_violators()
    cd = paths.details("columns_coordinate_descent")
    return out, any(d["fortran"] for d in cd)  # (the first after a decision only)


def path_transposed_columns():
    """The path's Fortran-ordered working sets copied as rows of a
    transposed copy of X~ against blocks of rows of X~ transposed into the
    buffer: the same columns, bitwise the same solutions, df and risks."""
    out, paths = _descent_path_with_violators()
    cd = paths.details("columns_coordinate_descent")
    return out, paths.count("transposed_columns") == 1 and any(d["fortran"] for d in cd)


def path_kept_spike_bound():
    """A working set grown by violators decided by the kept spectrum's
    bounds (no Lanczos run) against a new Lanczos run per working set: the
    same solver (coordinate descent) for every working set, the same
    solutions."""
    out, paths = _descent_path_with_violators()
    return out, paths.count("spike_ruled_out") >= 5


def path_descent_rule_slack():
    """The working sets after one solved by coordinate descent from the
    wider strong rule of ``path_descent_rule_slack`` (fewer violators'
    rounds) against the relaxed rule of the FISTA path: the same solutions,
    df and risks within what the duality gaps certify (tol 1e-12)."""
    out, paths = _weighted_wide_path(160, 10, n_alphas=10, eps=0.02)
    slack = [d["slack"] for d in paths.details("descent_rule")]
    return out, bool(slack) and all(s == 2.0 for s in slack)


def path_descent_gap_share():
    """The working sets' coordinate descent stopped at 0.9 of the gap goal
    against 0.5: the same solutions, df and risks within what the duality
    gaps certify (tol 1e-12), and every alpha's gap of the full problem
    within its goal (no ConvergenceWarning)."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((90, 150))
    y = X[:, :10] @ np.ones(10) + rng.standard_normal(90)
    with record() as paths, warnings.catch_warnings():
        warnings.simplefilter("error")
        path = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=10, eps=0.02, tol=1e-12,
                               max_iter=50_000)
    shares = [d["gap_share"] for d in paths.details("columns_coordinate_descent")]
    return ({"coefs": path.coefs, "df": path.df, "risk": path.risk},
            bool(shares) and all(s == 0.9 for s in shares))


def path_one_pass():
    """The Lasso path's working sets read by row panels (``X~_W b`` and
    ``X~_W^T r`` in one pass a step) against two products a step, with
    and without the rank-one metric (equicorrelated columns, p > n): the
    same solutions, df and risks within what the duality gaps certify
    (tol 1e-12)."""
    rng = np.random.default_rng(1)
    X = 0.7 * rng.standard_normal((80, 120)) + 0.7 * rng.standard_normal((80, 1))
    y = X[:, :8] @ np.ones(8) + rng.standard_normal(80)
    out = {}
    with record() as paths:
        for metric in (False, True):
            with policy_context(path_metric=metric, path_metric_min_ratio=2.0):
                path = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=8, eps=0.05,
                                       tol=1e-12, max_iter=50_000)
            out.update({f"coefs {metric}": path.coefs, f"df {metric}": path.df,
                        f"risk {metric}": path.risk})
    return out, "panel_products" in paths


def path_support_finish():
    """The Lasso path's exact finish on FISTA's identified support
    (conjugate gradients, an active-set Newton step) against FISTA alone, on
    equicorrelated columns (rho 0.5, p > n): the same solutions, df and
    risks within what the duality gaps certify (tol 1e-12)."""
    rng = np.random.default_rng(0)
    X = 0.7 * rng.standard_normal((80, 120)) + 0.7 * rng.standard_normal((80, 1))
    y = X[:, :8] @ np.ones(8) + rng.standard_normal(80)
    with record() as paths:
        path = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=8, eps=0.05, tol=1e-12,
                               max_iter=50_000)
    out = {"coefs": path.coefs, "df": path.df, "risk": path.risk}
    made = [d["finish"] for d in paths.details("lasso_path") if d["finish"] is not None]
    return out, bool(made) and made[0].n_accepted > 0


def path_metric():
    """The Lasso path's FISTA in the rank-one metric of a common factor
    against FISTA's plain step, on equicorrelated columns with p > n (the
    columns of X~) and p < n (the covariance form): the same solutions, df
    and risks within what the duality gaps certify (tol 1e-12; 1e-10, the
    covariance form's finest)."""
    rng = np.random.default_rng(1)
    out = {}
    with record() as paths:
        for n, p, tol in [(80, 120, 1e-12), (150, 40, 1e-10)]:
            X = 0.7 * rng.standard_normal((n, p)) + 0.7 * rng.standard_normal((n, 1))
            y = X[:, :8] @ np.ones(8) + rng.standard_normal(n)
            path = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=8, eps=0.05, tol=tol,
                                   max_iter=50_000)
            out.update({f"coefs_{p}": path.coefs, f"df_{p}": path.df, f"risk_{p}": path.risk})
    # the second design ran in the covariance form
    assert _spaces(paths) == ["_SampleSpace", "_FeatureSpace"]
    return out, "metric_fista" in paths


def eigvalsh_float32():
    """The Gram matrix's eigenvalues in single precision (a float32 Gram
    matrix, LAPACK's ssyev) against double: ridge GD's exact traces (its
    risk path) and the step size from them, within float32's rounding."""
    X, y, sw = _data(150, 120)
    with record() as paths:
        est = IterativeRidge(alpha=1e-2, max_iter=60).fit(X, y, sample_weight=sw)
        assert est.risk_diagnostics_["n_probes"] is None  # exact traces
        # a design without a cached Gram matrix: the float32 one from X~ itself
        lam = design_module.Design(X, sw, True).gram_eigenvalues()
    out = {"risk_path_": est.risk_path_, "coef_path_": est.coef_path_,
           "step_size_": np.array([est.step_size_]), "eigenvalues": lam / lam[-1]}
    return out, "eigvalsh_float32" in paths


def loo_float32_gram():
    """The left-out runs' products with the Gram matrix in float32 against
    float64 (the differences are small: rounding of order 1e-8 relatively)."""
    X, y, sw = _data(60, 40)
    with record() as paths:
        est = TrajectoryLasso(alpha=0.05, solver="fista", max_iter=30, estimate_risk=False,
                              estimate_loo=True).fit(X, y, sample_weight=sw)
    return {"loo_path_": est.loo_path_}, any(
        d["float32"] for d in paths.details("loo_gram_dtype"))


def chain_fused_bytes():
    """The Jacobian chains' primal products by blocks of rows of X~ (both
    products of a block in cache) against two products over all the rows:
    the same risk estimate (float64 chains: rounding of another order of
    sums). The restricted Gram matrix is refused, so that every product of
    the chains is a primal one."""
    X, y, sw = _data(150, 300)
    est = TrajectoryLasso(alpha=0.02, solver="fista", max_iter=40, n_probes=8,
                          risk_options={"chain_dtype": "float64"}, random_state=0)
    with policy_context(chain_gram="never"), record() as paths:
        est.fit(X, y, sample_weight=sw)
    assert "primal_product" in paths
    return {"risk_path_": est.risk_path_}, "primal_blocks" in paths


def _gram_chain_risk(spied):
    """The risk path of 4 pooled probes (float64 chains) with the restricted
    Gram matrix forced over the whole union from the first step (the
    policy's ``chain_gram``), and whether the event ``spied`` was taken."""
    X, y, sw = _data(150, 300)
    with policy_context(chain_gram="always"), record() as paths:
        est = TrajectoryLasso(alpha=0.02, solver="fista", max_iter=40, n_probes=4,
                              risk_options={"probe_scheme": "pooled", "chain_dtype": "float64"},
                              random_state=0).fit(X, y, sample_weight=sw)
    return {"risk_path_": est.risk_path_}, spied in paths


def chain_vector_products():
    """The restricted Gram matrix's products of a few columns (4 pooled
    probes) by matrix-vector products on blocks of its rows in cache,
    against a matrix product: the same risk estimate."""
    return _gram_chain_risk("vector_products")


def chain_gram_panels():
    """The restricted Gram matrix's products of a few columns (4 pooled
    probes) by panels of its rows, one small matrix product a panel (panels
    of 8 rows, so that the sums run over many), against a matrix product:
    the same risk estimate."""
    return _gram_chain_risk("gram_panel_products")


def _primal_chain_risk(name, probes):
    """``risk_path_`` of FISTA's pooled chains of each of ``probes`` (float64
    chains) with every product a primal one (the restricted Gram matrix
    refused: the policy's ``chain_gram``), and whether the event ``name``
    was taken."""
    X, y, sw = _data(150, 300)
    out = {}
    with policy_context(chain_gram="never"), record() as paths:
        for m in probes:
            est = TrajectoryLasso(alpha=0.02, solver="fista", max_iter=40, n_probes=m,
                                  risk_options={"probe_scheme": "pooled",
                                                "chain_dtype": "float64"},
                                  random_state=0).fit(X, y, sample_weight=sw)
            out[f"risk_path_{m}"] = est.risk_path_
    return out, name in paths


def chain_thin_panels():
    """The chains' primal products of a few columns (2 and 8 pooled probes)
    by thin panels of rows in the transposed layout, against two products
    over all the rows: the same risk estimate (panels of a few rows so that
    the sums run over many)."""
    return _primal_chain_risk("thin_panel_products", (2, 8))


def chain_vector_panels():
    """The chains' primal products of one and two columns by matrix-vector
    products on thin panels of rows, against two products over all the
    rows: the same risk estimate."""
    return _primal_chain_risk("vector_panel_products", (1, 2))


@dataclasses.dataclass(frozen=True)
class FastPath:
    run: Callable
    fast: dict
    reference: dict
    rtol: float = 1e-10


def settled_row_window():
    """The settled form's row norms (the amplification diagnostic of a
    momentum method) advancing the live sources only, against every source
    to the end of a long path."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 5))
    y = X @ np.array([1.0, -1.0, 0.5, 0.0, 0.0]) + 0.5 * rng.standard_normal(60)
    with record() as paths:
        est = TrajectoryLasso(alpha=0.05, solver="fista", max_iter=1200, n_probes=4,
                              random_state=0, risk_options={"chain_dtype": "float64"}).fit(X, y)
    windows = [d["first"] for d in paths.details("settled_window")]
    out = {"risk_path_": est.risk_path_,
           "amplification": est.risk_diagnostics_.amplification}
    return out, bool(windows) and windows[-1] > 0


_NO_COVARIANCE = {"covariance_max_features": 0}
_PASS = {"fold_covariance": False, "fold_panel_rows": 16, "pass_groups_min_bytes": 0}
#: the Lasso path's working sets (not the homotopy path of small p > n designs) ...
_WS = {"path_lars_max_samples": None}
#: ... by FISTA (its one-pass panels, finish and metric)
_FISTA_PATH = {**_WS, "path_columns_descent": False}

def thin_readout():
    """The risk readout with momentum from the right (two products of the
    thin residual block with triangular matrices) against the ``(T + 1)^2``
    matrices ``P``, ``Q`` first: FISTA paths longer than the residuals'
    basis (120 x 12) and than the rows (30 x 60, the clipped residuals)."""
    out, taken = {}, []
    for n, p in ((120, 12), (30, 60)):
        X, y, sw = _data(n, p)
        with record() as paths:
            res, _ = _fit(lambda: TrajectoryLasso(alpha=0.01, max_iter=80, random_state=0),
                          X, y, sw)
        out[f"{n}x{p}"] = res["risk_path_"]
        taken.append("thin_readout" in paths)
    assert len(set(taken)) == 1, f"the thin readout taken on one design only: {taken}"
    return out, taken[0]


FAST_PATHS = {
    "thin_readout": FastPath(thin_readout, {"readout_thin_products": True},
                             {"readout_thin_products": False}, rtol=1e-10),
    "covariance_form": FastPath(covariance_form, {"covariance_gemm_advantage": 1e9},
                                _NO_COVARIANCE),
    "one_pass_panels": FastPath(one_pass_panels,
                                {**_NO_COVARIANCE, "fuse_min_bytes": 0, "panel_bytes": 1},
                                {**_NO_COVARIANCE, "fuse_min_bytes": 2**62}),
    "gathered_columns": FastPath(gathered_columns,
                                 {**_NO_COVARIANCE, "columns_gather_min": 10**9},
                                 {**_NO_COVARIANCE, "columns_gather_min": 0,
                                  "columns_gather_share": 0.0}),
    "fold_covariance": FastPath(fold_covariance,
                                {"fold_covariance": True, "covariance_gemm_advantage": 1e9},
                                {"fold_covariance": False}),
    "rotated_folds": FastPath(rotated_folds,
                              {**_PASS, "rotated_min_bytes": 0, "rotated_min_features": 0},
                              {**_PASS, "rotated_min_bytes": 2**62}),
    "prepared_products": FastPath(prepared_products, {**_PASS, "prepared_products": True},
                                  {**_PASS, "prepared_products": False}),
    "numpy_blas_products": FastPath(numpy_blas_products,
                                    {**_PASS, "prepared_blas": "numpy"},
                                    {**_PASS, "prepared_blas": "scipy"}),
    "retired_grid_groups": FastPath(retired_grid_groups, {"retire_grid_groups": True},
                                    {"retire_grid_groups": False}),
    "covariance_path": FastPath(covariance_path, {"covariance_path": True},
                                {"covariance_path": False}, rtol=1e-7),
    "path_columns_descent": FastPath(path_columns_descent, {**_WS, "path_columns_descent": True},
                                     {**_WS, "path_columns_descent": False}, rtol=1e-7),
    "path_fortran_columns": FastPath(path_fortran_columns, {**_WS, "path_fortran_columns": True},
                                     {**_WS, "path_fortran_columns": False}, rtol=1e-12),
    # (the same columns gathered: no rounding apart)
    "path_transposed_columns": FastPath(path_transposed_columns,
                                        {**_WS, "path_transposed_max_bytes": 2**62},
                                        {**_WS, "path_transposed_max_bytes": 0}, rtol=0.0),
    # (every working set past the small ones that take coordinate descent
    # whatever their spectrum: path_metric_min_entries)
    "path_kept_spike_bound": FastPath(path_kept_spike_bound,
                                      {**_WS, "path_kept_spike_bound": True,
                                       "path_metric_min_entries": 0},
                                      {**_WS, "path_kept_spike_bound": False,
                                       "path_metric_min_entries": 0}, rtol=1e-12),
    "path_descent_rule_slack": FastPath(path_descent_rule_slack,
                                        {**_WS, "path_descent_rule_slack": 2.0},
                                        {**_WS, "path_descent_rule_slack": 0.5}, rtol=1e-7),
    "path_descent_gap_share": FastPath(path_descent_gap_share,
                                       {**_WS, "path_descent_gap_share": 0.9},
                                       {**_WS, "path_descent_gap_share": 0.5}, rtol=1e-7),
    "path_one_pass": FastPath(path_one_pass,
                              {**_FISTA_PATH, "covariance_path": False, "fuse_min_bytes": 0,
                               "panel_bytes": 1},
                              {**_FISTA_PATH, "covariance_path": False, "fuse_min_bytes": 2**62},
                              rtol=1e-7),
    "path_lars_max_samples": FastPath(path_lars, {"path_lars_max_samples": 100},
                                      {"path_lars_max_samples": None}, rtol=1e-7),
    "path_support_finish": FastPath(path_support_finish,
                                    {**_FISTA_PATH, "path_support_finish": True},
                                    {**_FISTA_PATH, "path_support_finish": False}, rtol=1e-7),
    "path_metric": FastPath(path_metric,
                            {**_FISTA_PATH, "path_metric": True, "path_metric_min_ratio": 2.0},
                            {**_FISTA_PATH, "path_metric": False}, rtol=1e-7),
    "chain_fused_bytes": FastPath(chain_fused_bytes,
                                  {"chain_fused_bytes": 1, "chain_panel_max_columns": 0},
                                  {"chain_fused_bytes": None}),
    "chain_vector_products": FastPath(chain_vector_products,
                                      {"chain_gemv_max_columns": 4,
                                       "chain_gram_panel_min_columns": 99},
                                      {"chain_gemv_max_columns": 0}),
    "chain_gram_panels": FastPath(chain_gram_panels,
                                  {"chain_gemv_max_columns": 4, "chain_gram_panel_min_columns": 4,
                                   "chain_gram_panel_cache_share": 1e-6,
                                   "chain_gram_panel_llc_share": 1.0},
                                  {"chain_gemv_max_columns": 0}),
    "chain_thin_panels": FastPath(chain_thin_panels,
                                  {"chain_panel_max_columns": 8, "chain_panel_min_columns": 0,
                                   "chain_panel_bytes": 100_000,
                                   "chain_panel_threads_min_bytes": 0},
                                  {"chain_panel_max_columns": 0, "chain_fused_bytes": None}),
    "chain_vector_panels": FastPath(chain_vector_panels,
                                    {"chain_panel_max_columns": 8, "chain_panel_min_columns": 3,
                                     "chain_panel_bytes": 100_000,
                                     "chain_panel_threads_min_bytes": 0},
                                    {"chain_panel_max_columns": 0, "chain_fused_bytes": None}),
    "settled_row_window": FastPath(settled_row_window,
                                   {"settled_min_tail": 40, "settled_drop_check": 32},
                                   {"settled_min_tail": 40, "settled_drop_check": None},
                                   rtol=1e-12),
    "eigvalsh_float32": FastPath(eigvalsh_float32, {"eigvalsh_float32_min_order": 0},
                                 {"eigvalsh_float32_min_order": 10**9}, rtol=1e-5),
    "loo_float32_gram": FastPath(loo_float32_gram, {"loo_float32_min_features": 0},
                                 {"loo_float32_min_features": 10**9}, rtol=1e-6),
}


@pytest.mark.parametrize("name", sorted(FAST_PATHS))
def test_fast_path_equals_its_reference(name):
    path = FAST_PATHS[name]
    with policy_context(**path.reference):
        reference, taken = path.run()
    assert not taken, f"{name}: the reference policy still takes the fast path"
    with policy_context(**path.fast):
        fast, taken = path.run()
    assert taken, f"{name}: the fast path was not taken"
    assert reference.keys() == fast.keys()
    for key in reference:
        scale = np.abs(reference[key]).max()
        assert_allclose(fast[key], reference[key], rtol=path.rtol, atol=path.rtol * scale,
                        err_msg=f"{name}: {key}")


@pytest.mark.parametrize("kernels, narrow", [("Haswell", True), ("Zen", True),
                                             ("SkylakeX", False), (None, False)])
def test_the_machine_policy_follows_the_blas_kernels(kernels, narrow):
    """The default policy takes ``narrow_blas_panels`` where NumPy's
    OpenBLAS runs kernels outside ``wide_blas_kernels`` (another BLAS:
    ``None``, the dataclass's values), and ``blas_kernels`` reads what
    threadpoolctl reports of an OpenBLAS."""
    from threadpoolctl import threadpool_info

    from skacv import _policy

    found = {info.get("architecture") for info in threadpool_info()
             if info.get("internal_api") == "openblas"}
    assert _policy.blas_kernels() in (found or {None})
    # libraries it cannot inspect: the defaults
    assert _policy.blas_kernels(inspect=lambda: 1 / 0) is None
    # the policy in force: the one read at import (no test left a change behind)
    assert _policy.get_policy() == _policy._machine_policy()
    assert _policy._machine_policy() == _policy.kernels_policy(_policy.blas_kernels())
    policy, base = _policy.kernels_policy(kernels), _policy.SpeedPolicy()
    expected = dict(base.narrow_blas_panels) if narrow else {
        key: getattr(base, key) for key in base.narrow_blas_panels}
    assert {key: getattr(policy, key) for key in expected} == expected
    assert dataclasses.replace(policy, **{key: getattr(base, key) for key in expected}) == base
