"""The K folds of K-fold CV along the path run as one block (skacv.model_selection._kfold):
equal to separate fold fits, in stages or in one go, in float32 within
rounding, with clear errors."""

import os
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.model_selection import KFold, ShuffleSplit

from skacv import (
    FISTA,
    IterativeRidge,
    TrajectoryEarlyStoppingCV,
    TrajectoryHuberRegressor,
    TrajectoryLasso,
    config_context,
)
from skacv._policy import current_policies, get_policy
from skacv._trace import Paths, record
from skacv.exceptions import DivergenceError
from skacv.linalg._design import Design
from skacv.model_selection import _fold_designs, _kfold
from skacv.model_selection._fold_designs import FoldDesigns
from skacv.model_selection._kfold import StackedFolds, can_stack, stacked_iteration


def _data(n=90, p=60, seed=0):
    rng = np.random.default_rng(seed)
    # correlated columns with a large common offset (centring matters)
    X = rng.standard_normal((n, p)) + 0.5 * rng.standard_normal((n, 1)) + 3.0
    y = X[:, :5] @ np.ones(5) + rng.standard_normal(n)
    sw = rng.integers(0, 3, n).astype(float)
    return X, y, sw


ESTIMATORS = [
    TrajectoryLasso(alpha=0.05, max_iter=40, estimate_risk=False),
    TrajectoryLasso(alpha=0.05, solver="ista", max_iter=40, estimate_risk=False,
                    fit_intercept=False),
    IterativeRidge(alpha=1.0, max_iter=40, estimate_risk=False),
    IterativeRidge(alpha=1.0, solver="nesterov", max_iter=40, estimate_risk=False),
    IterativeRidge(alpha=1.0, solver="heavy_ball", max_iter=40, estimate_risk=False),
]


def _by_hand(est, X, y, sw, splits):
    """Held-out squared errors (weighted sums) of every iterate of separate
    fold fits, shape (n_iter + 1, n_folds), and their step sizes."""
    errors, steps = [], []
    for tr, te in splits:
        params = {} if sw is None else {"sample_weight": sw[tr]}
        fold = clone(est).fit(X[tr], y[tr], **params)
        steps.append(fold.step_size_)
        w = np.ones(len(te)) if sw is None else sw[te]
        errors.append(w @ (y[te, None] - fold.predict_path(X[te])) ** 2)
    return np.array(errors).T, np.array(steps)


def _layout(speed_policy, layout):
    """Dense folds that partition the rows in the given layout of
    :class:`~skacv.model_selection._fold_designs.FoldDesigns` ("rotated" from a size on)."""
    speed_policy(rotated_min_bytes=0 if layout == "rotated" else np.inf)
    speed_policy(rotated_min_features=0)
    # several panels of rows in two groups, as on a large design
    speed_policy(fold_panel_rows=16)
    speed_policy(pass_groups_min_bytes=0)  # two groups from any size
    _form(speed_policy, "pass")  # (small Gram matrices would take the covariance form)


def _form(speed_policy, form):
    """The stacked folds' products: the pass over X ("pass") or the
    covariance form ("covariance", where the folds partition a dense X)."""
    covariance = form == "covariance"
    speed_policy(fold_covariance=covariance, fold_covariance_always=covariance)


@pytest.mark.parametrize("est", ESTIMATORS, ids=lambda e: f"{type(e).__name__}-{e.solver}")
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("X_kind", ["folds", "rotated", "sparse"])
@pytest.mark.parametrize("form", ["pass", "covariance"])
def test_stacked_folds_equal_separate_fold_fits(speed_policy,
                                                est, weighted, X_kind, form):
    X, y, sw = _data()
    sw = sw if weighted else None
    sparse = X_kind == "sparse"
    _layout(speed_policy, X_kind)
    _form(speed_policy, form)
    Xs = sp.csr_matrix(X) if sparse else X
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    expected, steps = _by_hand(est, Xs, y, sw, splits)
    folds = StackedFolds(est, Xs, y, sw, splits, np.dtype(np.float64), current_policies())
    assert folds.designs.layout == ("folds" if sparse else X_kind)
    assert isinstance(folds.products, _fold_designs.FoldCovariance) == (form == "covariance"
                                                                and not sparse)
    # each fold's step size is its own fit's (the estimator's rule on its rows)
    assert_allclose(folds.step_sizes, steps, rtol=1e-12)
    assert_allclose(folds.advance(40), expected, rtol=1e-11)


@pytest.mark.parametrize("est", ESTIMATORS, ids=lambda e: f"{type(e).__name__}-{e.solver}")
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("layout", ["folds", "rotated"])
def test_stacked_folds_from_the_full_fits_design(speed_policy, est, weighted, layout):
    """The block's copy of X gathered from the full fit's centred, weighted
    X~ (``full_design``, what TrajectoryEarlyStoppingCV passes after the
    full fit) is the block built from X: the same rows, centring and
    weights, and the fold paths of separate fold fits."""
    X, y, sw = _data(seed=3)
    sw = sw + 0.5 if weighted else None
    _layout(speed_policy, layout)
    splits = list(KFold(4, shuffle=True, random_state=1).split(X))
    fit = {} if sw is None else {"sample_weight": sw}
    design = clone(est).set_params(warm_start=True).fit(X, y, **fit)._warm_design
    assert type(design) is Design
    folds = StackedFolds(est, X, y, sw, splits,
                         np.dtype(np.float64), current_policies(), full_design=design)
    plain = StackedFolds(est, X, y, sw, splits, np.dtype(np.float64), current_policies())
    base, ref = folds.designs.base, plain.designs.base
    assert base.X is not design.X and not np.shares_memory(base.X, design.X)
    assert_allclose(base.X, ref.X, rtol=1e-12, atol=1e-12 * np.abs(ref.X).max())
    assert_allclose(base.x_offset, ref.x_offset, rtol=1e-12)
    assert_allclose(folds.designs.delta, plain.designs.delta, rtol=1e-10, atol=1e-12)
    expected, steps = _by_hand(est, X, y, sw, splits)
    assert_allclose(folds.step_sizes, steps, rtol=1e-12)
    assert_allclose(folds.advance(40), expected, rtol=1e-11)
    # a design of other data (another intercept) is not used
    other = clone(est).set_params(warm_start=True, fit_intercept=not est.fit_intercept)
    other_design = other.fit(X, y, **fit)._warm_design
    odd = StackedFolds(est, X, y, sw, splits,
                       np.dtype(np.float64), current_policies(), full_design=other_design)
    assert_allclose(odd.designs.base.X, ref.X, rtol=1e-12, atol=1e-12 * np.abs(ref.X).max())
    # nor one of other weights
    other_w = {"sample_weight": np.arange(1.0, X.shape[0] + 1) if sw is None else sw[::-1]}
    other_design = clone(est).set_params(warm_start=True).fit(X, y, **other_w)._warm_design
    odd = StackedFolds(est, X, y, sw, splits,
                       np.dtype(np.float64), current_policies(), full_design=other_design)
    assert_allclose(odd.designs.base.X, ref.X, rtol=1e-12, atol=1e-12 * np.abs(ref.X).max())


def test_search_gathers_the_folds_from_the_full_design(speed_policy):
    """The K-fold search, in stages (warm starts: the full fit keeps its
    design), builds its block from the full fit's design."""

    speed_policy(stage_min_flops=0)  # stages at any size
    X, y, _ = _data(n=200)
    with record() as paths:
        TrajectoryEarlyStoppingCV(clone(ESTIMATORS[0]),
                                  search="grid", criterion="kfold", random_state=0).fit(X, y)
    seen = [d["full_design"] for d in paths.details("stacked_folds")]
    assert len(seen) == 1 and type(seen[0]) is Design and seen[0].X.shape == X.shape


@pytest.mark.parametrize("est", ESTIMATORS[:3], ids=lambda e: f"{type(e).__name__}-{e.solver}")
def test_stacked_folds_of_a_narrow_design(speed_policy, est):
    """Rows of at most NARROW_FEATURES values: panels of up to
    NARROW_PANEL_ROWS rows (here 64, so that a pass has several)."""
    policy = speed_policy(narrow_panel_rows=64)
    assert policy.block_panel_rows_for(12) == 64 and policy.block_panel_rows_for(60) == 200
    _form(speed_policy, "pass")  # which such a design would not take
    X, y, sw = _data(n=300, p=12)
    splits = list(KFold(5, shuffle=True, random_state=0).split(X))
    expected, _ = _by_hand(est, X, y, sw, splits)
    folds = StackedFolds(est, X, y, sw, splits, np.dtype(np.float64), current_policies())
    assert folds.designs.layout == "folds"  # short rows: the rotated layout does not pay
    assert_allclose(folds.advance(40), expected, rtol=1e-11)


@pytest.mark.parametrize("splitter", [ShuffleSplit(3, test_size=0.3, random_state=0),
                                      KFold(3)])
def test_stacked_folds_any_splits(splitter):
    """Held-out sets that overlap or leave rows out (ShuffleSplit: the rows
    of the block keep their order) and unshuffled folds (ordered by fold):
    the separate fold fits' held-out errors either way."""
    X, y, sw = _data(seed=3)
    est = ESTIMATORS[0]
    splits = list(splitter.split(X))
    expected, _ = _by_hand(est, X, y, sw, splits)
    folds = StackedFolds(est, X, y, sw, splits, np.dtype(np.float64), current_policies())
    assert isinstance(folds.tests[0], slice) == isinstance(splitter, KFold)
    assert_allclose(folds.advance(40), expected, rtol=1e-11)


@pytest.mark.parametrize("layout", ["folds", "rotated"])
@pytest.mark.parametrize("form", ["pass", "covariance"])
def test_stacked_folds_continue_bit_for_bit_and_float32_is_within_rounding(speed_policy,
                                                                           layout, form,
                                                                           ):
    _layout(speed_policy, layout)
    _form(speed_policy, form)
    X, y, sw = _data()
    splits = list(KFold(5, shuffle=True, random_state=1).split(X))
    est = ESTIMATORS[0]
    whole = StackedFolds(est, X, y, sw, splits, np.dtype(np.float64), current_policies())
    one = whole.advance(40)
    staged = StackedFolds(est, X, y, sw, splits, np.dtype(np.float64), current_policies())
    staged.advance(7)
    staged.advance(25)
    # the paths continue bit for bit; the errors of a stage are one block
    # product (its summation order depends on the stage's width)
    assert_allclose(staged.advance(40), one, rtol=1e-13)
    assert_array_equal(staged.state.x, whole.state.x)
    assert_array_equal(staged.state.v, whole.state.v)
    assert_array_equal(staged.advance(12), staged.advance(40)[:13])  # the stored prefix
    # float32 (the default): measured at most 3e-6 relative on these and
    # larger designs (40-150 steps of FISTA, ISTA, GD, Nesterov, heavy ball)
    low = StackedFolds(est, X, y, sw, splits, np.dtype(np.float32), current_policies())
    assert low.designs.layout == layout
    assert_allclose(low.advance(40), one, rtol=3e-5)


def test_clipped_extrapolation_is_exactly_plain_where_nothing_is_clipped_in_float32():
    # the fit loop adds the clipped columns' correction; rounding of the plain
    # coefficients in float32 once made every coordinate look clipped
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 3)).astype(np.float32)
    x_prev = x * np.float32(0.9)  # same signs, smaller steps: nothing clipped
    x_prev[:5] = -x[:5]  # these cross zero: clipped
    it = FISTA(0.1, 0.1)
    for k in (2, 7, 30):
        c = it.extrapolation_correction(k, x, x_prev)
        assert_array_equal(np.flatnonzero(c.any(axis=1)), np.arange(5))


def test_which_estimators_stack():
    assert can_stack(TrajectoryLasso())
    assert can_stack(IterativeRidge(solver="nesterov"))
    assert not can_stack(TrajectoryLasso(solver="sgd"))
    assert not can_stack(IterativeRidge(solver="eigenpro"))
    assert not can_stack(IterativeRidge(solver="sgd"))
    assert not can_stack(TrajectoryHuberRegressor())
    # iterations that a block cannot express
    assert stacked_iteration([FISTA(0.1, 0.1), FISTA(0.2, 0.1)], np.float64) is not None
    assert stacked_iteration([FISTA(0.1, 0.1), FISTA(0.2, 0.1, extrapolation="plain")],
                             np.float64) is None


def test_stacked_folds_errors(speed_policy):
    _layout(speed_policy, "rotated")
    X, y, sw = _data()
    splits = list(KFold(3).split(X))
    w = np.ones(len(y))
    w[splits[0][0]] = 0.0  # no weight on the training rows of fold 0
    with pytest.raises(ValueError, match="no sample weight"):
        StackedFolds(ESTIMATORS[0], X, y, w, splits, np.dtype(np.float64), current_policies())
    big = IterativeRidge(alpha=1.0, max_iter=40, step_size=50.0, estimate_risk=False)
    with pytest.raises(DivergenceError, match="diverge"):
        StackedFolds(big, X, y, None, splits, np.dtype(np.float64), current_policies()).advance(40)
    with pytest.raises(ValueError, match="fold_dtype must be"):
        _kfold.kfold_dtype("float16")
    # the rotated layout needs each fold to hold out exactly its slice of rows
    train = np.ones((len(y), 2), dtype=bool)
    train[:45, 0] = train[45:, 1] = False
    base = Design(X)
    assert FoldDesigns(base, train, [slice(0, 45), slice(45, 90)]).layout == "rotated"
    with pytest.raises(ValueError, match="partition must hold out"):
        FoldDesigns(base, train, [slice(0, 40), slice(40, 90)])


@pytest.mark.parametrize("n, p", [(420, 340), (440, 600)])
def test_fold_step_sizes_from_one_block_of_lanczos_processes(n, p):
    # above dense_eig_size the folds' top eigenvalues come from a block of
    # Lanczos processes on the stacked products: within the fold fits' own
    # tolerance (lipschitz_tol = 1e-3) of their step sizes, and never longer
    # than 1 / lambda_max of the fold's Gram matrix
    rng = np.random.default_rng(3)
    X = rng.standard_normal((n, p)) + 0.3 * rng.standard_normal((n, 1))
    y = X[:, 0] + rng.standard_normal(n)
    sw = rng.uniform(0.5, 2.0, n)
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    est = TrajectoryLasso(alpha=0.05, max_iter=5, estimate_risk=False)
    folds = StackedFolds(est, X, y, sw, splits, np.dtype(np.float32), current_policies())
    for j, (tr, _) in enumerate(splits):
        own = clone(est).fit(X[tr], y[tr], sample_weight=sw[tr]).step_size_
        assert abs(folds.step_sizes[j] / own - 1) <= 2e-3
        Xc = X[tr] - np.average(X[tr], axis=0, weights=sw[tr])
        Xw = Xc * np.sqrt(sw[tr])[:, None]
        G = Xw.T @ Xw if p <= n else Xw @ Xw.T
        lam = np.linalg.eigvalsh(G / sw[tr].sum())[-1]
        assert folds.step_sizes[j] * lam <= 1.0 + 1e-6


def test_kfold_criterion_runs_stacked_folds_in_float32_by_default():
    # TrajectoryEarlyStoppingCV(criterion="kfold"): the default float32 block
    # against separate fold fits (float64), within the rounding measured above
    from skacv import TrajectoryEarlyStoppingCV

    X, y, sw = _data(n=120, p=70, seed=2)
    est = TrajectoryLasso(alpha=0.03, max_iter=60)
    search = TrajectoryEarlyStoppingCV(est, search="grid", criterion="kfold", cv=5, random_state=0,
                                       fold_alignment="iteration")
    search.fit(X, y, sample_weight=sw)
    splits = list(KFold(5, shuffle=True, random_state=search._seed).split(X))
    T = len(search.kfold_path_) - 1  # (grown past max_iter: the path still falls there)
    errors, _ = _by_hand(clone(est).set_params(estimate_risk=False, max_iter=T), X, y, sw,
                         splits)
    expected = errors.sum(axis=1) / sw.sum()
    assert_allclose(search.kfold_path_, expected, rtol=3e-5)
    assert search.best_iteration_ == int(np.argmin(expected))


@pytest.mark.parametrize("staged", [False, True])
def test_kfold_path_still_falling_at_max_iter_grows_past_it(speed_policy, staged):
    """K-fold CV along a path whose held-out error still falls at
    ``max_iter`` grows the path past it, as the estimates' paths do (then
    stops once its minimum lies ``patience`` back), in stages or from a
    path fitted in one go: the choice is the argmin of separate fold fits
    of the grown length (brute force), beyond ``max_iter``, and no
    ``SelectionBoundaryWarning`` says to raise ``max_iter``."""
    from skacv import TrajectoryEarlyStoppingCV
    from skacv.exceptions import SelectionBoundaryWarning

    speed_policy(stage_min_flops=0 if staged else np.inf)
    X, y, _ = _data(n=120, p=70, seed=2)
    est = TrajectoryLasso(alpha=0.03, solver="ista", max_iter=30)
    search = TrajectoryEarlyStoppingCV(est, search="grid", criterion="kfold", cv=5,
                                       random_state=0, fold_dtype="float64",
                                       fold_alignment="iteration")
    with warnings.catch_warnings():
        warnings.simplefilter("error", SelectionBoundaryWarning)
        search.fit(X, y)
    T = len(search.kfold_path_) - 1
    splits = list(KFold(5, shuffle=True, random_state=search._seed).split(X))
    errors, _ = _by_hand(clone(est).set_params(estimate_risk=False, max_iter=T), X, y, None,
                         splits)
    expected = errors.sum(axis=1) / len(y)
    assert_allclose(search.kfold_path_, expected, rtol=1e-10)
    best = int(np.argmin(expected))
    assert search.best_iteration_ == best > est.max_iter
    assert T >= best + 10  # its minimum n_iter_no_change (or more) back
    assert search.estimator_.n_iter_ == T


@pytest.mark.parametrize("n, p", [(90, 60), (60, 90)])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_small_fold_step_sizes_from_one_gram_matrix(n, p, weighted, fit_intercept):
    # below dense_eig_size: each fold's top eigenvalue from the Gram matrix of
    # all the rows minus its held-out rows' (features' side) or its training
    # block (samples' side), with its own centring: the fold's own design's
    from skacv.linalg._design import Design
    from skacv.model_selection._kfold import small_fold_lipschitz

    X, y, sw = _data(n=n, p=p, seed=4)
    sw = sw + 0.5 if weighted else None
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    train = np.zeros((n, len(splits)), dtype=bool)
    for j, (tr, _) in enumerate(splits):
        train[tr, j] = True

    def designs(X):
        return FoldDesigns(Design(X, sw, fit_intercept), train)

    got = small_fold_lipschitz(designs(X))
    for (tr, _), lip in zip(splits, got, strict=True):
        own = Design(X[tr], None if sw is None else sw[tr], fit_intercept).lipschitz()
        assert_allclose(lip, own, rtol=1e-11)
    assert small_fold_lipschitz(designs(sp.csr_matrix(X))) is None


def test_small_fold_step_sizes_of_the_covariance_form_read_its_gram_matrices(speed_policy,
                                                                             ):
    """In the covariance form the folds' Gram matrices are formed already:
    the step sizes come from them (the copy of X is not read again) and
    equal each fold's own design's."""
    from skacv.linalg._design import Design
    from skacv.model_selection._kfold import small_fold_lipschitz

    X, y, sw = _data(seed=6)
    _layout(speed_policy, "rotated")
    _form(speed_policy, "covariance")
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    est = TrajectoryLasso(alpha=0.05, max_iter=5, estimate_risk=False)
    folds = StackedFolds(est, X, y, sw, splits, np.dtype(np.float64), current_policies())
    assert isinstance(folds.products, _fold_designs.FoldCovariance)
    folds.designs.base.X[:] = np.nan  # only the Gram matrices may be read
    got = small_fold_lipschitz(folds.designs, folds.products.C)
    for (tr, _), lip in zip(splits, got, strict=True):
        assert_allclose(lip, Design(X[tr], sw[tr], True).lipschitz(), rtol=1e-11)


def test_folds_take_exact_step_sizes_where_their_own_designs_do():
    # 330 x 520: the full design is above dense_eig_size but each fold's
    # training rows (247-248) are not: its own fit computes its step size
    # exactly (LAPACK), and so do the stacked folds
    rng = np.random.default_rng(5)
    X = rng.standard_normal((330, 520)) + 0.3 * rng.standard_normal((330, 1))
    y = X[:, 0] + rng.standard_normal(330)
    splits = list(KFold(4, shuffle=True, random_state=0).split(X))
    est = TrajectoryLasso(alpha=0.05, max_iter=5, estimate_risk=False)
    folds = StackedFolds(est, X, y, None, splits, np.dtype(np.float64), current_policies())
    own = [clone(est).fit(X[tr], y[tr]).step_size_ for tr, _ in splits]
    assert_allclose(folds.step_sizes, own, rtol=1e-11)


@pytest.mark.parametrize("X_kind", ["folds", "rotated", "sparse"])
@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("n_splits", [2, 4])
@pytest.mark.parametrize("products", ["prepared", "numpy"])
def test_block_pass_is_each_folds_own_residual_and_gradient(speed_policy, X_kind, fit_intercept,
                                                            n_splits,
                                                            products):
    """One pass of the block (held transposed, in either layout, from 2
    folds on, its products prepared for SciPy's BLAS or NumPy's): the fitted
    values, each fold's training residual sum of squares and gradient X~_j^T
    m_j (y~_j - X~_j v_j), written out with each fold's own centring and
    weights; and the held-out errors of an iterate from those fitted values.
    (The residual sum of squares, the divergence monitor, had the sign of the
    fold's centring shift wrong on dense designs before.)"""
    X, y, sw = _data(seed=4)
    sw = sw + 0.5
    splits = list(KFold(n_splits, shuffle=True, random_state=2).split(X))
    est = clone(ESTIMATORS[2]).set_params(fit_intercept=fit_intercept)
    sparse = X_kind == "sparse"
    _layout(speed_policy, X_kind)
    speed_policy(prepared_products=products == "prepared")
    Xs = sp.csr_matrix(X) if sparse else X
    folds = StackedFolds(est, Xs, y, sw, splits, np.dtype(np.float64), current_policies())
    d = folds.designs
    assert d.layout == ("folds" if sparse else X_kind)
    rng = np.random.default_rng(0)
    V = rng.standard_normal((X.shape[1], len(splits)))
    P, Z, rss = d.fitted_and_gradient(V, d.target(folds.response, V))
    if not sparse:  # the pass took the products asked for, in two groups of panels
        groups = [g for _, gs in d._plan[-1] for g in gs]
        assert len(groups) >= 2 and len(groups[0][0]) >= 2
        assert all((g[3] is not None) == (products == "prepared") for g in groups)
    # the block's rows are ordered by held-out fold on dense designs
    rows = np.arange(len(y)) if sparse else np.concatenate([te for _, te in splits])
    mu_all = np.average(X, axis=0, weights=sw) if fit_intercept else np.zeros(X.shape[1])
    total_rss, held_out = 0.0, np.zeros(len(splits))
    for j, (tr, te) in enumerate(splits):
        w = sw[tr]
        mu = np.average(X[tr], axis=0, weights=w) if fit_intercept else np.zeros(X.shape[1])
        y_off = np.average(y[tr], weights=w) if fit_intercept else 0.0
        r = np.sqrt(w) * ((y[tr] - y_off) - (X[tr] - mu) @ V[:, j])
        total_rss += r @ r
        assert_allclose(Z[:, j], (np.sqrt(w)[:, None] * (X[tr] - mu)).T @ r, rtol=1e-10,
                        atol=1e-10 * np.abs(Z[:, j]).max())
        e = np.sqrt(sw[te]) * ((y[te] - y_off) - (X[te] - mu) @ V[:, j])
        held_out[j] = e @ e
    assert_allclose(rss, total_rss, rtol=1e-10)
    fitted = (np.sqrt(sw)[:, None] * (X - mu_all)) @ V  # the products of the block's base
    assert_allclose(d.by_fold(P).T, fitted[rows], rtol=1e-10,
                    atol=1e-10 * np.abs(fitted).max())
    assert_allclose(folds._held_out_errors(V, P), held_out, rtol=1e-10)
    # without the held-out fitted values (the steps of an extrapolating
    # method): the same gradients and residual sum of squares; a dense X
    # gives no fitted values (a sparse one, those of the training rows)
    P2, Z2, rss2 = d.fitted_and_gradient(V, d.target(folds.response, V), held_out=False)
    assert_allclose(Z2, Z, rtol=1e-12, atol=1e-12 * np.abs(Z).max())
    assert_allclose(rss2, rss, rtol=1e-12)
    if d.sparse:
        assert_allclose(P2, P, rtol=1e-12, atol=1e-12 * np.abs(P).max())
    else:
        assert P2 is None


def test_block_pass_prepares_every_group_or_none(speed_policy):
    """When the products of one group of panels cannot be prepared for
    SciPy's BLAS, every group takes NumPy's (the target is laid out once for
    all groups): the pass is the one with every group prepared."""
    X, y, _ = _data(seed=4)
    splits = list(KFold(3, shuffle=True, random_state=2).split(X))
    _layout(speed_policy, "rotated")
    folds = StackedFolds(clone(ESTIMATORS[2]), X, y, None, splits,
                         np.dtype(np.float64), current_policies())
    d = folds.designs
    V = np.random.default_rng(0).standard_normal((X.shape[1], len(splits)))
    target = d.target(folds.response, V)
    ref = d.fitted_and_gradient(V, target)
    assert all(g[3] is not None for _, gs in d._plan[-1] for g in gs)
    assert all(len(gs) >= 2 for _, gs in d._plan[-1])  # (passes of several groups)
    speed_policy(prepared_groups=1)  # the second group's products not prepared
    d.policy = get_policy()
    d._plan = None
    P, Z, rss = d.fitted_and_gradient(V, target)
    assert all(g[3] is None for _, gs in d._plan[-1] for g in gs)
    assert_allclose(P, ref[0], rtol=1e-12, atol=1e-12 * np.abs(ref[0]).max())
    assert_allclose(Z, ref[1], rtol=1e-12, atol=1e-12 * np.abs(ref[1]).max())
    assert_allclose(rss, ref[2], rtol=1e-12)


@pytest.mark.parametrize("layout", ["folds", "rotated"])
def test_block_points_written_in_the_pass_buffer(speed_policy, layout):
    """Points written into the pass's buffer (``point_buffer``, as the block's
    steps write v^k) and passed as that array give the pass of the same
    points passed as another array, bit for bit."""
    X, y, _ = _data(seed=4)
    splits = list(KFold(3, shuffle=True, random_state=2).split(X))
    _layout(speed_policy, layout)
    folds = StackedFolds(clone(ESTIMATORS[2]), X, y, None, splits,
                         np.dtype(np.float64), current_policies())
    d = folds.designs
    assert d.layout == layout
    rng = np.random.default_rng(0)
    V1, V2 = (np.asfortranarray(rng.standard_normal((X.shape[1], 3))) for _ in range(2))
    target = d.target(folds.response, V1)
    ref = d.fitted_and_gradient(V1, target, held_out=True)
    point = d.point_buffer()
    assert point.shape == V1.shape and d.point_buffer() is point
    d.fitted_and_gradient(V2, target)  # the buffer holds V2
    point[...] = V1
    P, Z, rss = d.fitted_and_gradient(point, target, held_out=True)
    assert_array_equal(P, ref[0])
    assert_array_equal(Z, ref[1])
    assert rss == ref[2]
    # the buffer is overwritten by a pass at other points
    d.fitted_and_gradient(V2, target)
    assert_array_equal(point, V2)


def test_fold_panels_fit_the_level_2_cache(speed_policy):
    """A panel of the pass holds about FOLD_PANEL_CACHE_SHARE of the level-2
    cache, its products at most FOLD_PANEL_MAX_PRODUCT multiply-adds (at
    least 8 rows, at most FOLD_PANEL_ROWS; many rows for narrow designs),
    the panels of a pass without the held-out column sized for its K - 1
    columns; and the pass runs in two groups only for a copy of X larger
    than the last-level cache."""
    policy = speed_policy(cpu_caches={2: 2**20, 3: 32 * 2**20})
    rows = _fold_designs.fold_panel_rows
    assert rows(1500, policy, 4) == int(0.75 * 2**20) // 6000 == 131
    assert rows(1500, policy, 8) == 65
    assert rows(200, policy, 4) == policy.fold_panel_rows
    assert rows(10**6, policy, 4) == 8
    assert rows(policy.narrow_features, policy, 4) == policy.narrow_panel_rows
    # a larger level-2 cache: the products stay within FOLD_PANEL_MAX_PRODUCT
    # (OpenBLAS's small-matrix kernels), 5 columns by default
    policy = speed_policy(cpu_caches={2: 2 * 2**20, 3: 32 * 2**20})
    assert policy.fold_panel_max_product == 10**6
    assert rows(5000, policy, 4) == 10**6 // 25000 == 40
    assert rows(5000, policy, 4, n_columns=4) == 10**6 // 20000 == 50
    assert rows(15000, policy, 4, n_columns=5) == 13
    assert rows(15000, policy, 4, n_columns=4) == 16
    assert rows(1500, policy, 4) == 10**6 // 7500 == 133
    assert rows(3000, policy, 4, n_columns=2) == 2 * 2**20 * 3 // 4 // 12000 == 131
    policy = speed_policy(cpu_caches={2: 2**19, 3: 32 * 2**20})
    assert rows(1500, policy, 4) == int(0.75 * 2**19) // 6000 == 65
    policy = speed_policy(cpu_caches={2: 2**20, 3: 32 * 2**20})  # its last-level share: 32 MiB
    assert _fold_designs.pass_groups(32 * 2**20, policy) == 1
    assert _fold_designs.pass_groups(32 * 2**20 + 1, policy) == policy.pass_groups
    assert _fold_designs.pass_groups(1, speed_policy(pass_groups_min_bytes=0)) == policy.pass_groups
    speed_policy(pass_groups_min_bytes=None)
    # the full fit beside the folds: X beyond the last-level cache (32 MiB, not
    # this machine's), the block's copy (float32 by default) within it
    beside = _kfold.fit_beside
    assert not beside(np.empty((1000, 1500)), policy)  # 12 MB
    assert beside(np.empty((2000, 3000)), policy)  # 48 MB, its block 24 MB
    assert not beside(np.empty((3000, 3000)), policy)  # block 36 MB: two groups
    assert not beside(np.empty((2000, 3000), dtype=np.float32), policy)
    assert not beside(sp.csr_matrix((2000, 3000)), policy)
    assert not beside(np.empty((2000, 3000)), policy, "float64")
    # the planned panels have those rows
    speed_policy(rotated_min_bytes=0)
    speed_policy(rotated_min_features=0)
    speed_policy(cpu_caches={2: 64 * 60 * 8 * 4 // 3, 3: 2**30}, last_level_per_cpu_max=2**30)
    speed_policy(fold_covariance=False)  # the pass, not the Gram matrices
    X, y, _ = _data(n=900)
    splits = list(KFold(3, shuffle=True, random_state=0).split(X))
    folds = StackedFolds(clone(ESTIMATORS[0]), X, y, None, splits,
                         np.dtype(np.float64), current_policies())
    passes = folds.designs._pass_plan()[-1]  # (sums, groups) of all K columns, of K - 1
    assert folds.designs.layout == "rotated" and len(passes) == 2
    for sums, groups in passes:
        assert len(groups) == len(sums) == 1  # one group
        # the views of every panel: (V^T, Xa, ...)
        panels = [v[1].shape[0] for group in groups for v in group[0]]
        assert max(panels) == 64 and sum(panels) == 900
    # products capped (a block made under that policy): the pass without the
    # held-out column has larger panels, and the same products
    V = np.random.default_rng(1).standard_normal((X.shape[1], 3))
    target = folds.designs.target(folds.response, V)
    ref = [folds.designs.fitted_and_gradient(V, target, held_out=h) for h in (True, False)]
    speed_policy(fold_panel_max_product=60 * 3 * 20)
    capped = StackedFolds(clone(ESTIMATORS[0]), X, y, None, splits,
                          np.dtype(np.float64), current_policies())
    sizes = [[v[1].shape[0] for group in groups for v in group[0]]
             for _, groups in capped.designs._pass_plan()[-1]]
    assert max(sizes[0]) == 20 and max(sizes[1]) == 30
    assert sum(sizes[0]) == sum(sizes[1]) == 900
    for h, (P, Z, rss) in zip((True, False), ref, strict=True):
        P2, Z2, rss2 = capped.designs.fitted_and_gradient(V, target, held_out=h)
        if h:
            assert_allclose(P2, P, rtol=1e-12, atol=1e-12 * np.nanmax(np.abs(P)))
        else:
            assert P is None and P2 is None
        assert_allclose(Z2, Z, rtol=1e-12, atol=1e-12 * np.abs(Z).max())
        assert_allclose(rss2, rss, rtol=1e-12)


def test_cache_sizes_from_sysfs(tmp_path, speed_policy):
    """The caches' sizes as Linux reports them (the data or unified cache of
    each level), else the defaults; the policy's ``cpu_caches`` stand for
    the report where set."""
    from skacv.utils import _parallel

    for i, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"),
                                             (2, "Unified", "1024K"), (3, "Unified", "32M")]):
        entry = tmp_path / f"index{i}"
        entry.mkdir()
        (entry / "level").write_text(f"{level}\n")
        (entry / "type").write_text(f"{kind}\n")
        (entry / "size").write_text(f"{size}\n")
    root = str(tmp_path)
    reported, share = _parallel.reported_cache_bytes, _parallel.shared_cpus
    try:
        assert reported(1, root) == 48 * 2**10
        assert reported(2, root) == 2**20
        assert reported(3, root) == 32 * 2**20
        # the share of a guest's view of the host's cache: at most
        # the policy's last_level_per_cpu_max a CPU that shares it (none listed: one)
        (tmp_path / "index3" / "size").write_text("491520K\n")
        for cpus, count in [(None, 1), ("0-1", 2), ("0,2,4-5", 4), ("3", 1)]:
            if cpus is not None:
                (tmp_path / "index3" / "shared_cpu_list").write_text(f"{cpus}\n")
            reported.cache_clear()
            share.cache_clear()
            assert reported(3, root) == 480 * 2**20
            assert share(root) == count
        missing = str(tmp_path / "missing")
        assert reported(2, missing) is None and share(missing) == 1
    finally:
        reported.cache_clear()
        share.cache_clear()
    # pinned by the policy: those sizes (the others the defaults), the
    # last-level cache one CPU's
    policy = speed_policy(cpu_caches={2: 3 * 2**20, 3: 2**30})
    assert _parallel.cache_bytes(2, policy) == 3 * 2**20
    assert _parallel.cache_bytes(1, policy) == policy.default_cache_bytes[1]
    assert _parallel.last_level_share(policy) == policy.last_level_per_cpu_max
    assert _parallel.last_level_share(speed_policy(cpu_caches={3: 2**20})) == 2**20


@pytest.mark.parametrize("layout", ["folds", "rotated"])
def test_block_pass_does_not_depend_on_the_blas_threads(speed_policy, layout):
    """The pass runs its groups of panels on one BLAS thread each (a
    multithreaded BLAS is 10-30x slower on the small products of the panels)
    and adds the groups' sums in order: the same bits whatever the threads."""
    from threadpoolctl import threadpool_limits


    _layout(speed_policy, layout)
    X, y, _ = _data(seed=5)
    splits = list(KFold(3, shuffle=True, random_state=1).split(X))
    out = []
    paths = Paths()
    for threads in (1, 2):
        # built on one thread: the folds' step sizes come from the caller's
        # BLAS (a Gram matrix and LAPACK), whose last bits may depend on its
        # threads on some CPUs; the pass and the steps must not
        with threadpool_limits(1, user_api="blas"):
            folds = StackedFolds(clone(ESTIMATORS[0]), X, y, None, splits,
                                 np.dtype(np.float64), current_policies())
        with threadpool_limits(threads, user_api="blas"), record(paths):
            assert len(folds.designs._pass_plan()[-1][0][1]) == 2  # two groups of panels
            V = np.random.default_rng(0).standard_normal((X.shape[1], 3))
            out.append(folds.designs.fitted_and_gradient(V, folds.designs.target(
                folds.response, V)))
            out.append(folds.advance(20))
    # the BLAS threads inside the passes
    assert paths.details("pass_workers")
    assert {d["blas_threads"] for d in paths.details("pass_workers")} == {1}
    for a, b in zip(out[0][:2] + (out[1],), out[2][:2] + (out[3],), strict=True):
        assert_array_equal(a, b)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="two cores")
def test_overlapped_runs_beside_on_one_blas_thread_each_with_the_callers_configuration():
    """skacv.utils._parallel.overlapped (the full path's stages beside the folds'
    passes): the first call in a thread of its own, both on one BLAS thread,
    the caller's skacv and scikit-learn configurations (thread-local) in
    both, the BLAS threads restored after; one after the other in the
    caller's thread when there is one BLAS thread; the second call's
    exception raised once the first has finished."""
    import threading
    import time

    import sklearn
    from threadpoolctl import threadpool_limits

    from skacv import get_config
    from skacv.utils import _parallel

    seen = {}

    def first():
        seen["first"] = (threading.get_ident(), _parallel.blas_threads(),
                         get_config()["path_memory_limit"], sklearn.get_config()["assume_finite"])
        return 1

    def second():
        seen["second"] = (threading.get_ident(), _parallel.blas_threads())
        return 2

    with (threadpool_limits(2, user_api="blas"), config_context(path_memory_limit=77),
          sklearn.config_context(assume_finite=True)):
        assert _parallel.blas_threads() == 2
        assert _parallel.overlapped(first, second) == (1, 2)
        assert _parallel.blas_threads() == 2
    assert seen["first"][0] != seen["second"][0] == threading.get_ident()
    assert seen["first"][1:] == (1, 77.0, True)
    assert seen["second"][1] == 1
    with threadpool_limits(1, user_api="blas"):
        assert _parallel.overlapped(first, second) == (1, 2)
    assert seen["first"][0] == threading.get_ident()
    done = []

    def slow():
        time.sleep(0.05)
        done.append(1)

    def fail():
        raise ValueError("second failed")

    with threadpool_limits(2, user_api="blas"), pytest.raises(ValueError, match="second failed"):
        _parallel.overlapped(slow, fail)
    assert done == [1]


@pytest.mark.parametrize("level2", [512 * 2**10, 2 * 2**20])
def test_fold_covariance_rule(speed_policy, level2):
    """The covariance form of the stacked folds where it measured faster
    (many samples per feature, or Gram matrices that all fit in the level-2
    cache), the pass elsewhere (2000 x 1000: the p x p products read more
    than the pass), never with more features than samples or than
    COVARIANCE_MAX_FEATURES, nor when switched off."""
    policy = speed_policy(cpu_caches={2: level2})
    pays = _kfold.fold_covariance_pays
    for n, p in [(20000, 8), (20000, 50), (50000, 20), (20000, 200), (5000, 500),
                 (10000, 1000)]:
        assert pays(n, p, 5, 150, policy)
    for n, p in [(2000, 1000), (2000, 3000), (10000, 5000), (3000, 2001), (1000, 500)]:
        assert not pays(n, p, 5, 150, policy)
    # 5 Gram matrices of 250 x 250 in float32: 1.25 MB, resident in 2 MiB only
    assert pays(500, 250, 5, 150, policy) == (level2 >= 2 * 2**20)
    assert pays(500, 250, 5, 150, policy, itemsize=8) is False  # 2.5 MB in float64
    assert not pays(20000, 50, 5, 0, policy)


def test_kfold_search_on_a_tall_design_takes_the_covariance_form(speed_policy):
    """TrajectoryEarlyStoppingCV(criterion="kfold") on n >> p: the folds in
    the covariance form give the pass's K-fold path within the float32
    rounding of the block, and the same iteration."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((3000, 20)) + 0.7 * rng.standard_normal((3000, 1))
    y = X[:, :4] @ np.ones(4) + 2.0 * rng.standard_normal(3000)
    assert _kfold.fold_covariance_pays(3000, 20, 5, 60, get_policy())
    est = TrajectoryLasso(alpha=0.01, max_iter=60, estimate_risk=False)
    search = TrajectoryEarlyStoppingCV(est, search="grid", criterion="kfold", n_iter_no_change=None)
    with record() as paths:
        cov = clone(search).fit(X, y)
    assert "fold_covariance" in paths
    speed_policy(fold_covariance=False)
    with record() as paths:
        ref = clone(search).fit(X, y)
    assert "stacked_folds" in paths and "fold_covariance" not in paths
    assert_allclose(cov.kfold_path_, ref.kfold_path_, rtol=3e-5)
    assert cov.best_iteration_ == ref.best_iteration_


def test_designs_declare_their_products():
    """The designs the loops read have the declared protocols
    (skacv.linalg._protocols.LinearProducts and BlockProducts), with no
    delegation: the folds' covariance form declares the block's products and
    keeps the folds' rows, layout and centring with its FoldDesigns."""
    from skacv.linalg._covariance import CovarianceForm
    from skacv.linalg._protocols import BlockProducts, LinearProducts

    X, y, sw = _data(n=120, p=8)
    design = Design(X, sw, True)
    for d in (design, CovarianceForm(design)):
        assert isinstance(d, LinearProducts)
        assert d.fuses is False
    assert not isinstance(np.ones(3), LinearProducts)
    splits = [(np.setdiff1d(np.arange(120), te), te) for te in np.array_split(np.arange(120), 4)]
    est = TrajectoryLasso(alpha=0.05, solver="ista", max_iter=5)
    folds = StackedFolds(est, X, y, sw, splits, np.dtype(np.float64), current_policies())
    assert isinstance(folds.designs, FoldDesigns)
    assert isinstance(folds.products, _fold_designs.FoldCovariance)  # 120 x 8: the Gram matrices
    for block in (folds.designs, folds.products):
        assert isinstance(block, BlockProducts)
    assert not hasattr(folds.products, "layout")  # no delegation to the designs
    assert not isinstance(design, BlockProducts)


@pytest.mark.parametrize("staged", [True, False])
def test_kfold_stages_wait_for_a_limit_below_the_minimum(speed_policy, staged):
    """The K-fold path of a search stops on its patience, unless its limit
    (K-fold CV of the converged fit, known along the alpha path) lies below
    its minimum: converging, the path must still fall to it, so it runs on
    to ``max_iter`` and past it, up to ``max_iter_growth`` times
    ``max_iter`` (a limit it cannot reach), in stages or fitted in one go."""
    from skacv._statistics import get_statistics
    from skacv.model_selection._kfold_search import fit_kfold, kfold_splits

    speed_policy(stage_min_flops=0 if staged else np.inf)
    rng = np.random.default_rng(3)
    X = rng.standard_normal((60, 200))
    y = X[:, :3] @ [1.0, -1.0, 0.5] + 2.0 * rng.standard_normal(60)  # overfits late
    splits = kfold_splits(5, X, y, classifier=False)
    attrs = ("kfold_path_",)

    def length(limit):
        est = TrajectoryLasso(alpha=0.01, max_iter=300, estimate_risk=False)
        _, paths, _ = fit_kfold(est, X, y, {}, attrs, splits, 10, "time", "auto", limit,
                                current_policies())
        return est.n_iter_, paths["kfold_path_"]

    n_free, path = length(None)
    assert n_free < 300  # the patience ended it after its minimum
    n_limited, _ = length(0.5 * path.min())
    assert n_limited == get_statistics().max_iter_growth * 300
    n_above, _ = length(2.0 * path.min())  # a limit above the minimum: patience only
    assert n_above == n_free


@pytest.mark.parametrize("layout", ["folds", "rotated"])
@pytest.mark.parametrize("form", ["pass", "covariance"])
def test_fold_paths_kept_by_chunks_give_the_whole_buffers_errors(speed_policy, layout, form):
    """The iterates kept for the held-out errors go through one buffer of a
    few steps (the speed policy's ``fold_paths_chunk_bytes``): the paths are
    those of one buffer for the whole path bit for bit (the fit loop
    continues from one chunk to the next), the held-out errors within the
    rounding of products of another width; a staged advance too."""
    _layout(speed_policy, layout)
    _form(speed_policy, form)
    X, y, sw = _data()
    splits = list(KFold(5, shuffle=True, random_state=1).split(X))
    est = ESTIMATORS[0]  # FISTA: every step extrapolates, every iterate is kept
    whole = StackedFolds(est, X, y, sw, splits, np.dtype(np.float64), current_policies())
    one = whole.advance(40)
    # a chunk of 3 steps: 14 chunks, the last one short
    speed_policy(fold_paths_chunk_bytes=3 * X.shape[1] * 5 * 8)
    chunked = StackedFolds(est, X, y, sw, splits, np.dtype(np.float64), current_policies())
    assert_allclose(chunked.advance(40), one, rtol=1e-13)
    assert_array_equal(chunked.state.x, whole.state.x)
    staged = StackedFolds(est, X, y, sw, splits, np.dtype(np.float64), current_policies())
    staged.advance(7)
    assert_allclose(staged.advance(40), one, rtol=1e-13)
    assert np.ptp(one[1:]) > 0.1 * one[0].max()  # the errors move along the path
