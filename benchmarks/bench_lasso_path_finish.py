"""The Lasso path's exact finish on the identified support (or its rank-one
metric), on and off.

``risk_alpha_path(TrajectoryLasso(), X, y, alphas=grid)`` with the speed
policy's ``path_support_finish`` on (conjugate gradients on the support FISTA
has identified, an active-set Newton step) and off (FISTA alone), or with
``--switch path_metric`` its ``path_metric`` on (FISTA in a rank-one metric
where a common factor dominates a working set's spectrum,
``skacv.iterations._metric``) and off (FISTA's step ``1 / L``), timed in
the same run, interleaved (the best of ``--repeat``), on the seed notebook's
generator (``benchmarks/bench_vs_lassocv.py``: ``s = 10`` nonzeros equal to
``15 / sqrt(n)``, noise 1.5, seed 2025), isotropic and equicorrelated
(``rho = 0.5``), a grid of ``--n-alphas`` penalties from ``alpha_max`` down to
``1e-3 alpha_max``; plus p < n cases, AR(1) features (rho = 0.9, the same
``beta``) and a sparse ``X``. Prints the times,
their ratio (off / on: above 1 the fast path pays), the FISTA steps (conjugate
gradient iterations included), the largest difference of the coefficients
between the two paths, the supports that differ and the largest gap over its
goal (both paths certify their gaps: the coefficients agree to what the
tolerance allows).

Run (one BLAS thread)::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_lasso_path_finish.py
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_lasso_path_finish.py --quick
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/bench_lasso_path_finish.py \
        --switch path_metric
"""

import argparse
import time
import warnings

import numpy as np
import scipy.sparse as sp
from bench_vs_lassocv import seed_data

from skacv import TrajectoryLasso, risk_alpha_path
from skacv._policy import policy_context


def _grid(X, y, n_alphas):
    """``n_alphas`` penalties from ``alpha_max`` (centred data) to ``1e-3 alpha_max``."""
    Xc = X - np.asarray(X.mean(axis=0)).ravel()
    a_max = np.max(np.abs(Xc.T @ (y - y.mean()))) / X.shape[0]
    return np.geomspace(a_max, 1e-3 * a_max, n_alphas)


def _sparse_data(n, p, seed=1):
    rng = np.random.default_rng(seed)
    X = sp.random(n, p, density=0.02, random_state=seed, format="csr")
    X.data = rng.standard_normal(X.nnz)
    y = np.asarray(X[:, :10] @ np.ones(10)).ravel() + rng.standard_normal(n)
    return X, y


def _ar1_data(n, p, rho=0.9, seed=3):
    """AR(1) columns (``corr(x_j, x_k) = rho^|j - k|``) with the seed generator's ``beta``."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, p))
    X = np.empty_like(Z)
    X[:, 0] = Z[:, 0]
    for j in range(1, p):
        X[:, j] = rho * X[:, j - 1] + np.sqrt(1 - rho * rho) * Z[:, j]
    beta = np.zeros(p)
    beta[:10] = 15 / np.sqrt(n)
    return X, X @ beta + 1.5 * rng.standard_normal(n)


def _run(X, y, grid, switch, on):
    with policy_context(**{switch: on}), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tic = time.perf_counter()
        path = risk_alpha_path(TrajectoryLasso(), X, y, alphas=grid)
        seconds = time.perf_counter() - tic
    return seconds, path, len(w)


def bench(name, X, y, n_alphas, repeat, switch):
    grid = _grid(X.toarray() if sp.issparse(X) else X, y, n_alphas)
    times = {True: [], False: []}
    for _ in range(repeat):
        for finish in (False, True):  # interleaved
            seconds, path, n_warn = _run(X, y, grid, switch, finish)
            times[finish].append(seconds)
            if finish:
                on, warn_on = path, n_warn
            else:
                off, warn_off = path, n_warn
    t_on, t_off = min(times[True]), min(times[False])
    diff = np.abs(on.coefs - off.coefs).max()
    df_diff = int(np.count_nonzero(on.df != off.df))
    print(f"{name:<34} {t_off:8.2f} {t_on:8.2f} {t_off / t_on:6.2f} "
          f"{off.n_iter.sum():7d} {on.n_iter.sum():7d} {diff:10.2e} "
          f"{np.abs(off.coefs).max():8.3f} {df_diff:5d} {warn_off:3d}/{warn_on:<3d}")
    return t_off, t_on


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--n-alphas", type=int, default=12)
    parser.add_argument("--switch", choices=["path_support_finish", "path_metric"],
                        default="path_support_finish", help="the speed policy's switch")
    args = parser.parse_args()
    k = 2 if args.quick else 1
    cases = [
        ("equicorrelated 0.5, 2000 x 3000", lambda: seed_data(2000 // k, 3000 // k, 10, 1.5,
                                                               2025, 0.5)[:2]),
        ("isotropic, 2000 x 3000", lambda: seed_data(2000 // k, 3000 // k, 10, 1.5, 2025)[:2]),
        ("isotropic, 1000 x 1500", lambda: seed_data(1000 // k, 1500 // k, 10, 1.5, 2025)[:2]),
        ("equicorrelated 0.5, 3000 x 1000", lambda: seed_data(3000 // k, 1000 // k, 10, 1.5,
                                                               2025, 0.5)[:2]),
        ("isotropic, 3000 x 1000", lambda: seed_data(3000 // k, 1000 // k, 10, 1.5, 2025)[:2]),
        ("AR(1) 0.9, 2000 x 3000", lambda: _ar1_data(2000 // k, 3000 // k)),
        ("sparse 2%, 2000 x 3000", lambda: _sparse_data(2000 // k, 3000 // k)),
    ]
    print(f"{args.switch} off and on; {args.n_alphas} alphas, alpha_max to 1e-3 alpha_max, "
          f"best of {args.repeat}; steps include conjugate-gradient iterations")
    print(f"{'case':<34} {'off (s)':>8} {'on (s)':>8} {'ratio':>6} {'st off':>7} "
          f"{'st on':>7} {'max|dcoef|':>10} {'max|coef|':>8} {'df!=':>5} warn")
    for name, make in cases:
        X, y = make()
        bench(name, X, y, args.n_alphas, args.repeat, args.switch)


if __name__ == "__main__":
    main()
