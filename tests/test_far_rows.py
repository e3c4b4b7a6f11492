"""``criterion="auto"``'s check of the Lasso's risk estimate where far rows
carry the fit: leave-one-out of the support's least squares by its
leverages (``support_loo_ratio``) against brute-force refits, and the move
to K-fold CV it triggers (statistical policy ``auto_alo_ratio``)."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from skacv import IterativeRidge, TrajectoryEarlyStoppingCV, TrajectoryLasso
from skacv._policy import policy_context
from skacv._statistics import get_statistics, statistics_context
from skacv._trace import record
from skacv.exceptions import UnreliableEstimateWarning
from skacv.linalg._design import Design
from skacv.model_selection._converged_risk import support_loo_ratio


def _weighted_ols(X, y, w):
    """Weighted least squares with an intercept: ``(coef, intercept)``."""
    A = np.column_stack([np.ones(len(y)), X]) * np.sqrt(w)[:, None]
    sol = np.linalg.lstsq(A, y * np.sqrt(w), rcond=None)[0]
    return sol[1:], sol[0]


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_support_loo_ratio_is_the_least_squares_leave_one_out(sparse, weighted):
    """At the least-squares solution on a support (with an intercept), the
    leverage form is exact: the ratio times ``risk`` equals the mean of
    brute-force leave-one-out errors, with integer weights over the rows
    repeated as often (one copy left out at a time: the same ratio as the
    repeated rows' own); a row alone on its level of a one-hot column
    (leverage 1) counts with the minimum-norm refit without it (its level's
    coefficient 0, as a fold without the row has it), whose residual is
    far from the row's own (0). Rows read in blocks of 7
    (``gram_block_bytes``)."""
    rng = np.random.default_rng(0)
    n, p = 40, 8
    X = rng.standard_normal((n, p))
    X[:, 6] = 0.0
    X[3, 6] = 1.0  # a level of one row: leverage 1
    y = X[:, :3] @ np.array([1.0, -2.0, 0.5]) + rng.standard_normal(n)
    w = rng.integers(1, 4, n).astype(float) if weighted else np.ones(n)
    w[3] = 1.0  # (one copy: alone on its level)
    S = np.array([0, 1, 2, 4, 6])
    coef = np.zeros(p)
    coef[S], _ = _weighted_ols(X[:, S], y, w)
    risk = 0.7  # any positive number: the ratio divides by it
    with policy_context(gram_block_bytes=8 * S.size * 7):  # blocks of 7 rows
        design = Design(sp.csr_matrix(X) if sparse else X, w if weighted else None, True)
        ratio = support_loo_ratio(design, y, coef, risk)
        rows = np.repeat(np.arange(n), w.astype(int))
        repeated = support_loo_ratio(Design(X[rows], None, True), y[rows], coef, risk)
    errs = np.empty(n)
    for i in range(n):
        keep = np.ones(rows.size, dtype=bool)
        keep[np.flatnonzero(rows == i)[0]] = False  # one copy of row i
        # without row 3 column 6 is zero: lstsq's minimum norm gives it 0
        b, b0 = _weighted_ols(X[rows[keep]][:, S], y[rows[keep]], np.ones(keep.sum()))
        errs[i] = (y[i] - X[i, S] @ b - b0) ** 2
    brute = np.average(errs, weights=w)
    np.testing.assert_allclose(ratio * risk, brute, rtol=1e-8)
    np.testing.assert_allclose(repeated, ratio, rtol=1e-8)
    # the row of its own level: not its fitted residual (0), a large error
    b_full, b0_full = _weighted_ols(X[:, S], y, w)
    assert abs(y[3] - X[3, S] @ b_full - b0_full) < 1e-8 < errs[3]


def test_support_loo_ratio_of_an_empty_support_is_one():
    X = np.random.default_rng(1).standard_normal((10, 3))
    assert support_loo_ratio(Design(X, None, True), np.ones(10), np.zeros(3), 2.0) == 1.0


def test_support_loo_ratio_of_a_support_with_a_duplicate_column():
    """A support that keeps a column twice (the coefficient split between
    the copies) spans what the support without the copy spans: the same
    leverages, residuals and minimum-norm refits, so the same ratio. Its
    Gram matrix is singular: the pseudo-inverse by the eigendecomposition
    (trace ``gram_solver``), against Cholesky's factor on the support
    without the copy."""
    rng = np.random.default_rng(2)
    n = 30
    X = rng.standard_normal((n, 6))
    X[:, 5] = X[:, 0]
    X[:, 4] = 0.0
    X[7, 4] = 1.0  # a level of one row: the far branch too
    y = X[:, :3] @ np.array([1.0, -1.0, 2.0]) + rng.standard_normal(n)
    coef = np.zeros(6)
    coef[[0, 1, 2, 4]], _ = _weighted_ols(X[:, [0, 1, 2, 4]], y, np.ones(n))
    split = coef.copy()
    split[[0, 5]] = coef[0] / 2
    with record() as paths:
        reduced = support_loo_ratio(Design(X, None, True), y, coef, 1.3)
        doubled = support_loo_ratio(Design(X, None, True), y, split, 1.3)
    assert [d["cholesky"] for d in paths.details("gram_solver")] == [True, False]
    np.testing.assert_allclose(doubled, reduced, rtol=1e-9)


@pytest.mark.parametrize("rank", [7, 5])
def test_gram_solver_against_the_pseudo_inverse(rank):
    """Leverages ``x G^+ x^T``, ``x G^+ b`` and ``|G^+ x|^2`` of rows ``x`` of
    ``A`` (``G = A^T A``) against NumPy's ``pinv``: full rank (Cholesky's
    factor) and rank 5 of 7 (the eigendecomposition)."""
    from skacv._policy import SpeedPolicy
    from skacv.model_selection._converged_risk import _GramSolver

    rng = np.random.default_rng(rank)
    A = rng.standard_normal((20, rank)) @ rng.standard_normal((rank, 7))
    b = rng.standard_normal(7)
    G = A.T @ A
    with record() as paths:
        solver = _GramSolver(G, SpeedPolicy())
    assert paths.details("gram_solver")[0]["cholesky"] == (rank == 7)
    pinv = np.linalg.pinv(G, rcond=1e-10)
    P = solver.whiten_rows(A)
    np.testing.assert_allclose(np.einsum("ij,ij->i", P, P),
                               np.einsum("ij,jk,ik->i", A, pinv, A), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(P @ solver.whiten_vector(b), A @ pinv @ b, rtol=1e-8,
                               atol=1e-10)
    np.testing.assert_allclose(solver.inverse_sq_norms(P), np.sum((A @ pinv) ** 2, axis=1),
                               rtol=1e-8)


def _heavy_tailed(seed, n=120, p=20):
    """Columns of Student's t with 1.5 degrees of freedom, standardised:
    a few rows far from the others carry the fit."""
    rng = np.random.default_rng(seed)
    X = rng.standard_t(1.5, size=(n, p))
    y = X[:, :5].sum(axis=1) + rng.standard_normal(n)
    return (X - X.mean(0)) / X.std(0), y


def test_auto_moves_to_kfold_where_far_rows_carry_the_fit():
    """Heavy-tailed columns: at the risk estimate's converged choice the
    support's leave-one-out is several times the estimate, so ``"auto"``
    moves to K-fold CV along the path (``criterion_``), with one warning
    at the user's call that says why; the same search is ``criterion=
    "kfold"``'s. ``criterion="risk"`` keeps the estimate, and so does
    ``"auto"`` with ``auto_alo_ratio`` above the ratio."""
    X, y = _heavy_tailed(1)
    with record() as paths, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search = TrajectoryEarlyStoppingCV(TrajectoryLasso(), random_state=0).fit(X, y)
    ratio = paths.details("far_rows")[0]["ratio"]
    assert ratio > 2 * get_statistics().auto_alo_ratio
    assert search.criterion_ == "kfold"
    said = [w for w in caught if issubclass(w.category, UnreliableEstimateWarning)]
    assert len(said) == 1 and said[0].filename == __file__
    assert "far rows" in str(said[0].message) and "K-fold CV" in str(said[0].message)
    kfold = TrajectoryEarlyStoppingCV(TrajectoryLasso(), criterion="kfold",
                                      random_state=0).fit(X, y)
    assert kfold.best_params_ == search.best_params_
    assert kfold.best_iteration_ == search.best_iteration_
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnreliableEstimateWarning)
        risk = TrajectoryEarlyStoppingCV(TrajectoryLasso(), criterion="risk",
                                         random_state=0).fit(X, y)
        with statistics_context(auto_alo_ratio=1.5 * ratio):
            kept = TrajectoryEarlyStoppingCV(TrajectoryLasso(), random_state=0).fit(X, y)
    assert risk.criterion_ == kept.criterion_ == "risk"
    assert kept.best_params_ == risk.best_params_
    assert kept.best_iteration_ == risk.best_iteration_


def test_auto_keeps_the_risk_estimate_on_gaussian_rows():
    """Gaussian rows (leverages about ``df / n``): the ratio is within a
    few percent of 1 and ``"auto"`` keeps the risk estimate, silently."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 20))
    y = X[:, :5].sum(axis=1) + rng.standard_normal(120)
    with record() as paths, warnings.catch_warnings():
        warnings.simplefilter("error", UnreliableEstimateWarning)
        search = TrajectoryEarlyStoppingCV(TrajectoryLasso(), random_state=0).fit(X, y)
    assert abs(paths.details("far_rows")[0]["ratio"] - 1.0) < 0.05
    assert search.criterion_ == "risk"


def test_grid_search_runs_the_check_at_its_choice():
    """``search="grid"`` (trajectories only, no converged path): the same
    check on the converged fit at the chosen alpha; on heavy-tailed columns
    it moves to K-fold CV with one warning, as the path search does, and
    ``criterion="risk"`` keeps the estimate. Estimators without a Lasso's
    alpha path (the ridge) are not checked."""
    X, y = _heavy_tailed(1)
    grid = {"alpha": list(np.geomspace(1.0, 1e-3, 8))}
    with record() as paths, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search = TrajectoryEarlyStoppingCV(TrajectoryLasso(), param_grid=grid, search="grid",
                                           random_state=0).fit(X, y)
    ratio = paths.details("far_rows")[0]["ratio"]
    assert ratio > 2 * get_statistics().auto_alo_ratio and search.criterion_ == "kfold"
    said = [w for w in caught if issubclass(w.category, UnreliableEstimateWarning)]
    assert len(said) == 1 and said[0].filename == __file__ and "far rows" in str(said[0].message)
    kfold = TrajectoryEarlyStoppingCV(TrajectoryLasso(), param_grid=grid, search="grid",
                                      criterion="kfold", random_state=0).fit(X, y)
    assert kfold.best_params_ == search.best_params_
    assert kfold.best_iteration_ == search.best_iteration_
    with record() as paths, warnings.catch_warnings():
        warnings.simplefilter("error", UnreliableEstimateWarning)
        risk = TrajectoryEarlyStoppingCV(TrajectoryLasso(), param_grid=grid, search="grid",
                                         criterion="risk", random_state=0).fit(X, y)
        ridge = TrajectoryEarlyStoppingCV(IterativeRidge(), param_grid=grid, search="grid",
                                          random_state=0).fit(X, y)
    assert risk.criterion_ == ridge.criterion_ == "risk"
    assert not paths.details("far_rows")


def test_grid_search_checks_a_data_frame_as_its_array():
    """The grid's check reads ``X`` after the estimator's own validation, as
    the path search does: a pandas DataFrame of heavy-tailed columns moves
    to K-fold CV with the array's ratio and choice."""
    pd = pytest.importorskip("pandas")
    X, y = _heavy_tailed(1)
    grid = {"alpha": list(np.geomspace(1.0, 1e-3, 8))}
    out = []
    for data in (X, pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])):
        with record() as paths, warnings.catch_warnings():
            warnings.simplefilter("ignore", UnreliableEstimateWarning)
            search = TrajectoryEarlyStoppingCV(TrajectoryLasso(), param_grid=grid,
                                               search="grid", random_state=0).fit(data, y)
        out.append((paths.details("far_rows")[0]["ratio"], search.criterion_,
                    search.best_params_, search.best_iteration_))
    assert out[0][1] == out[1][1] == "kfold"
    assert out[0][2:] == out[1][2:]
    np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-12)
