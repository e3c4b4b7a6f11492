"""The step size's top eigenvalue from a float32 copy of ``X~``, certified in
float64 (``Design.lipschitz``; the speed policy's ``lipschitz_single_*``).

Every bound is checked against LAPACK's top eigenvalue of ``X~^T X~ / n_eff``:
``Design.lipschitz`` returns ``theta (1 + lipschitz_tol)`` where ``theta`` is a
Rayleigh quotient (never above the top eigenvalue) whose residual puts an
eigenvalue within ``lipschitz_tol`` of it, so the bound lies in ``[top, top (1 +
lipschitz_tol)]``, whatever precision the Lanczos steps ran in.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from skacv import TrajectoryLasso
from skacv._policy import get_policy
from skacv._statistics import get_statistics
from skacv._trace import record
from skacv.linalg._design import Design


def _top(X, sw, fit_intercept):
    """LAPACK's top eigenvalue of ``X~^T X~ / n_eff`` (float64)."""
    w = np.ones(X.shape[0]) if sw is None else sw
    Xc = X - (w @ X) / w.sum() if fit_intercept else X
    Xt = Xc * np.sqrt(w)[:, None]
    return np.linalg.eigvalsh(Xt.T @ Xt)[-1] / w.sum()


def _within_bound(lip, top):
    tol = get_statistics().lipschitz_tol
    return top * (1 - 1e-12) <= lip <= top * (1 + tol) * (1 + 1e-12)


def _isotropic(shape, seed=7):
    """A flat top of the spectrum: Lanczos needs tens of steps (isotropic rows)."""
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("shape", [(240, 320), (320, 240)])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("fuse", [False, True])
def test_single_precision_step_bound_is_certified(speed_policy, shape, weighted,
                                                  fit_intercept, fuse):
    """A flat spectrum does not settle in the float64 steps: the float32 copy
    runs on, its Ritz vector is certified in float64, and the bound is an upper
    bound of the top eigenvalue within ``lipschitz_tol``, as the float64
    Lanczos' is (on either side of ``X~``, one pass or two a product)."""
    speed_policy(dense_eig_size=50, lipschitz_single_min_bytes=0,
                 fuse_min_bytes=0 if fuse else 2**40)
    X = _isotropic(shape)
    sw = np.random.default_rng(1).uniform(0.5, 2.0, shape[0]) if weighted else None
    top = _top(X, sw, fit_intercept)
    design = Design(X, sw, fit_intercept)
    assert design.fuses == fuse
    with record() as paths:
        lip = design.lipschitz()
    (event,) = paths.details("lipschitz_single")
    assert event["single"] and event["certified"]
    assert event["steps"] > get_policy().lipschitz_single_after
    assert "lanczos_top_eigenvalues" not in paths
    assert _within_bound(lip, top)
    # the float64 Lanczos' bound: the same eigenvalue within the tolerance
    speed_policy(lipschitz_single_min_bytes=None)
    with record() as paths:
        lip64 = Design(X, sw, fit_intercept).lipschitz()
    assert "lipschitz_single" not in paths and _within_bound(lip64, top)
    assert abs(lip - lip64) <= get_statistics().lipschitz_tol * top


def test_a_separated_top_eigenvalue_settles_in_float64(speed_policy):
    """A common factor separates the top eigenvalue: the float64 steps settle
    before any copy is made, with the float64 Lanczos' value bit for bit."""
    speed_policy(dense_eig_size=50, lipschitz_single_min_bytes=0)
    rng = np.random.default_rng(3)
    X = rng.standard_normal((260, 300)) + 2.0 * rng.standard_normal((260, 1))
    with record() as paths:
        lip = Design(X, None, True).lipschitz()
    (event,) = paths.details("lipschitz_single")
    assert not event["single"] and event["steps"] <= get_policy().lipschitz_single_after
    assert _within_bound(lip, _top(X, None, True))
    speed_policy(lipschitz_single_min_bytes=None)
    assert Design(X, None, True).lipschitz() == lip


def test_an_uncertified_bound_falls_back_to_float64(speed_policy):
    """Float32 steps stopped far from the tolerance (a share of 30 times it)
    leave a Ritz vector whose float64 residual fails the certificate: the
    float64 Lanczos runs, and the bound still holds."""
    speed_policy(dense_eig_size=50, lipschitz_single_min_bytes=0,
                 lipschitz_single_rtol_share=30.0)
    X = _isotropic((240, 320))
    with record() as paths:
        lip = Design(X, None, True).lipschitz()
    (event,) = paths.details("lipschitz_single")
    assert event["single"] and not event["certified"]
    assert "lanczos_top_eigenvalues" in paths
    assert _within_bound(lip, _top(X, None, True))


def test_a_copy_that_overflows_falls_back_to_float64(speed_policy):
    """Entries of 1e20 overflow the float32 products (not the float64 ones):
    no certificate, the float64 Lanczos gives the bound."""
    speed_policy(dense_eig_size=50, lipschitz_single_min_bytes=0)
    X = _isotropic((240, 320)) * 1e20
    with record() as paths, np.errstate(all="raise"):
        lip = Design(X, None, True).lipschitz()
    (event,) = paths.details("lipschitz_single")
    assert not event["certified"] and "lanczos_top_eigenvalues" in paths
    assert _within_bound(lip / 1e40, _top(X / 1e20, None, True))


@pytest.mark.parametrize("kind", ["sparse", "float32", "small"])
def test_the_copy_is_taken_on_large_dense_float64_designs_only(speed_policy, kind):
    """A sparse ``X``, a float32 ``X`` (its products are float32 already) and a
    design below ``lipschitz_single_min_bytes`` keep the float64 Lanczos."""
    speed_policy(dense_eig_size=50,
                 lipschitz_single_min_bytes=2**40 if kind == "small" else 0)
    X = _isotropic((240, 320))
    if kind == "sparse":
        X = sp.csr_matrix(np.where(np.abs(X) > 1.0, X, 0.0))
    elif kind == "float32":
        X = X.astype(np.float32)
    with record() as paths:
        lip = Design(X, None, True).lipschitz()
    assert "lipschitz_single" not in paths and "lanczos_top_eigenvalues" in paths
    dense = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    top = _top(dense, None, True)
    assert top * (1 - 1e-5) <= lip <= top * (1 + get_statistics().lipschitz_tol) * (1 + 1e-5)


def test_fista_path_with_the_single_precision_bound(speed_policy):
    """The fit reads the certified bound: its step is ``1 / lipschitz`` and its
    path converges to the same solution as with the float64 bound (the steps
    differ by at most the tolerance)."""
    speed_policy(dense_eig_size=50, lipschitz_single_min_bytes=0)
    rng = np.random.default_rng(5)
    X = _isotropic((240, 320))
    y = X[:, :5] @ np.ones(5) + rng.standard_normal(240)
    with record() as paths:
        single = TrajectoryLasso(alpha=0.1, max_iter=3000, estimate_risk=False).fit(X, y)
    assert paths.details("lipschitz_single")[0]["certified"]
    top = _top(X, None, True)
    assert _within_bound(1.0 / single.step_size_, top)
    speed_policy(lipschitz_single_min_bytes=None)
    double = TrajectoryLasso(alpha=0.1, max_iter=3000, estimate_risk=False).fit(X, y)
    assert abs(single.step_size_ / double.step_size_ - 1) <= get_statistics().lipschitz_tol
    np.testing.assert_allclose(single.coef_, double.coef_, atol=1e-6)


@pytest.mark.parametrize("floor", [0, None])
def test_an_overflowing_design_raises_the_overflow_error(speed_policy, floor):
    """Entries of 1e160 overflow the float64 products of the Lanczos route:
    the fit says so (the data overflow float64, rescale them) whatever the
    route, instead of LAPACK's "Eigenvalues did not converge"."""
    speed_policy(dense_eig_size=50, lipschitz_single_min_bytes=floor)
    X = _isotropic((240, 320)) * 1e160
    y = np.random.default_rng(2).standard_normal(240)
    with np.errstate(over="ignore", invalid="ignore"), record() as paths:
        with pytest.raises(ValueError, match="overflow float64"):
            TrajectoryLasso(alpha=0.1, max_iter=5).fit(X, y)
    assert "eigsh" not in paths  # (ARPACK is for a Lanczos basis too small, not this)
