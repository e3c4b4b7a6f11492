"""Cost and accuracy of the uncertainty quantification (debiased iterates,
confidence intervals, noise variance) against the fit it comes from.

Part 1, same run: wall time of

* the fit with ``estimate_risk=True`` (the baseline; it includes the
  debiasing scores ``W = X~^T R / n`` computed at the end of the fit);
* the part of it spent on ``W`` (:func:`skacv.estimates.risk._uq.debias_statistics`, timed
  on its own on the same design and corrected residuals);
* the methods: ``debiased_coef`` and ``coef_confidence_interval`` at one
  iterate, ``noise_variance_path`` for the whole path, with the identity, a
  dense and a sparse (tridiagonal, AR(1)) precision,

and the ratio of each to the fit.

Part 2 (``--coverage``): Monte Carlo coverage of 95% intervals on null and
nonzero coefficients and the mean and standard deviation of the noise
variance estimate (sigma = 1), for ISTA, FISTA and gradient descent on an
isotropic and an AR(1) design (true precision, and the identity on the
AR(1) design to show its bias).

    python benchmarks/bench_uq.py                       # part 1
    python benchmarks/bench_uq.py --coverage --reps 40  # part 2 (a few minutes)
"""

import argparse
import time
import warnings

import numpy as np
import scipy.sparse as sp

from skacv import IterativeRidge, TrajectoryLasso
from skacv.estimates.risk._estimate import trajectory_risk
from skacv.estimates.risk._uq import debias_statistics


def ar1(p, rho):
    i = np.arange(p)
    return rho ** np.abs(i[:, None] - i[None, :])


def data(n, p, s, rho, rng):
    Sigma = ar1(p, rho)
    X = rng.standard_normal((n, p)) @ np.linalg.cholesky(Sigma).T
    beta = np.zeros(p)
    beta[rng.choice(p, s, replace=False)] = rng.standard_normal(s)
    beta *= np.sqrt(5.0 / (beta @ Sigma @ beta))
    return X, X @ beta + rng.standard_normal(n), beta, Sigma


def make(kind, T, seed=0):
    if kind == "gd":
        return IterativeRidge(alpha=0.0, max_iter=T)
    return TrajectoryLasso(alpha=0.1, solver=kind, max_iter=T, random_state=seed)


def best_of(f, repeat=3):
    times = []
    for _ in range(repeat):
        tic = time.perf_counter()
        f()
        times.append(time.perf_counter() - tic)
    return min(times)


def row(kind, X, y, T, dense, tri):
    """Times (s) of the fit, of W, and of the methods with three precisions."""
    est = make(kind, T)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = best_of(lambda: est.fit(X, y), 1)
    pb = est._problem(X, y)
    _, target = pb.design.center_y(y)
    res = trajectory_risk(pb.design, target, pb.iteration, est.coef_path_,
                          n_probes=est.n_probes, random_state=0)
    t = T // 2
    return fit, [
        best_of(lambda: debias_statistics(pb.design, res.corrected_residuals,
                                          res.correction, res.risk_matrix)),
        best_of(lambda: est.debiased_coef(t)),
        best_of(lambda: est.coef_confidence_interval(t)),
        best_of(lambda: est.coef_confidence_interval(t, precision=dense)),
        best_of(lambda: est.coef_confidence_interval(t, precision=tri)),
        best_of(lambda: est.noise_variance_path()),
        best_of(lambda: est.noise_variance_path(dense)),
        best_of(lambda: est.noise_variance_path(tri)),
    ]


def part1(n, p, T):
    rng = np.random.default_rng(0)
    X, y, _, Sigma = data(n, p, p // 20, 0.5, rng)
    dense = np.linalg.inv(Sigma)
    tri = sp.csr_matrix(np.where(np.abs(dense) > 1e-12, dense, 0.0))
    print(f"n={n}, p={p}, T={T}; times as a fraction of the fit with estimate_risk=True "
          "(I: identity, dense / sparse: an AR(1) precision)")
    names = ["W", "deb. I", "CI I", "CI dense", "CI sparse", "s2 I", "s2 dense",
             "s2 sparse"]
    print(f"{'solver':8s} {'fit (s)':>8s} " + " ".join(f"{a:>9s}" for a in names))
    for kind in ("ista", "fista", "gd"):
        fit, cols = row(kind, X, y, T, dense, tri)
        print(f"{kind:8s} {fit:8.2f} " + " ".join(f"{c / fit:9.4f}" for c in cols))


def part2(reps, n=400, p=600, s=200, T=40, iterations=(1, 5, 15, 40)):
    print(f"n={n}, p={p}, {s} nonzero, ||beta||_Sigma^2 = 5, sigma = 1, {reps} data sets, "
          f"iterations {iterations}; coverage of 95% intervals (min-max over iterations), "
          "noise variance mean (min-max over all t) and sd (max over t)")
    for kind in ("ista", "fista", "gd"):
        for rho, prec in ((0.0, "identity"), (0.5, "true"), (0.5, "identity")):
            rng = np.random.default_rng(123)
            null, nonnull, s2 = [], [], []
            for r in range(reps):
                X, y, beta, Sigma = data(n, p, s, rho, rng)
                Omega = np.linalg.inv(Sigma) if prec == "true" else None
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = make(kind, T, r).fit(X, y)
                ci = np.stack([est.coef_confidence_interval(t, precision=Omega)
                               for t in iterations])
                hit = (ci[..., 0] <= beta) & (beta <= ci[..., 1])
                null.append(hit[:, beta == 0].mean(axis=1))
                nonnull.append(hit[:, beta != 0].mean(axis=1))
                s2.append(est.noise_variance_path(Omega))
            null, nonnull, s2 = np.mean(null, 0), np.mean(nonnull, 0), np.array(s2)
            m, sd = s2.mean(0), s2.std(0, ddof=1)
            print(f"{kind:6s} rho={rho:.1f} precision={prec:8s} null {null.min():.3f}-"
                  f"{null.max():.3f}  nonzero {nonnull.min():.3f}-{nonnull.max():.3f}  "
                  f"sigma^2 mean {m.min():.2f}-{m.max():.2f} (t=0: {m[0]:.2f}) "
                  f"sd<={sd.max():.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--p", type=int, default=3000)
    parser.add_argument("--T", type=int, default=100)
    parser.add_argument("--coverage", action="store_true")
    parser.add_argument("--reps", type=int, default=40)
    args = parser.parse_args()
    if args.coverage:
        part2(args.reps)
    else:
        part1(args.n, args.p, args.T)
