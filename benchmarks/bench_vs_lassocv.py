"""Choosing the penalty without folds: risk_alpha_path against LassoCV / RidgeCV.

Part 1 (Lasso): the seed notebook's data generator (identity covariance,
``s`` nonzeros equal to ``15 / sqrt(n)``, noise sd ``sigma = 1.5``, seed 2025).
scikit-learn's ``LassoCV(cv=5)`` over 30 alphas (its default grid,
``eps=1e-3``, ``tol=1e-4``, ``n_jobs=1``) against ``skacv.risk_alpha_path``
over the same 30 alphas (same grid, same duality-gap tolerance): the alpha
minimising the converged out-of-sample risk estimate (Bellec 2020), with no
folds and no refit; once over all alphas and once stopped after
``--patience`` alphas past the minimum of the estimate, at fits of df at
least half the samples (``n_alphas_no_change``). ``--trajectory T`` also
runs a from-zero FISTA trajectory of ``T`` steps at the chosen alpha and
picks its iteration by ``risk_path_`` (the second stage of
``TrajectoryEarlyStoppingCV(search="path")``).

Part 2 (ridge, p < n): ``RidgeCV`` (efficient leave-one-out, ``gcv_mode``
auto) against ``risk_alpha_path(IterativeRidge())`` (one eigendecomposition,
exact df) over the same 30 alphas.

Both parts print the time, the chosen alpha and the true out-of-sample risk
``||coef - beta||^2 + intercept^2 + sigma^2`` (identity covariance, zero-mean
features, no true intercept), and the ratios. Goals (issue 7): Lasso true
risk <= 1.01 x LassoCV's and time <= 1/3 of LassoCV's; ridge: equal risk.

``--design equi`` (or ``both``) runs the Lasso part on the equicorrelated variant of
the seed generator: the same ``beta`` and noise, rows
``x_i = sqrt(1 - rho) z_i + sqrt(rho) w_i 1`` (``--rho``, default 0.5), so that
``Sigma = (1 - rho) I + rho 1 1^T`` and the true risk is
``h^T Sigma h + intercept^2 + sigma^2`` with ``h = coef - beta``.

With ``--natural``, glmnet's CV along its lambda path is a further baseline (issue 42),
when the optional ``python-glmnet`` package (Fortran glmnet; not a dependency of
skacv) is installed: ``glmnet.ElasticNet(alpha=1, n_splits=5, standardize=False)``,
its defaults otherwise (100 lambdas down to 1e-4 x lambda_max, ``tol=1e-7``, R^2
scoring). Its lambda is on scikit-learn's Lasso scale, ``(1 / (2 n)) ||y - X w - b||^2
+ lambda ||w||_1``, when ``standardize=False`` (the problem skacv solves by default; the
script checks it: the objective of glmnet's solution against scikit-learn's ``Lasso`` at
the same penalty, untimed). glmnet predicts at ``lambda_best_`` (the largest lambda within
one standard error of the CV minimum, its default) and the same fit's ``lambda_max_`` (the
CV minimum) is printed too. glmnet stops its own path once the training R^2 exceeds
0.999 (printed); it runs a second time on the 12 alphas of skacv's natural call
(``lambda_path``: then it fits them all). Times are wall-clock and CPU (``process_time``).
glmnet is single-threaded: ``--blas-threads 1`` compares like with like.

    python benchmarks/bench_vs_lassocv.py                  # n=2000, p=3000 (~30 s)
    python benchmarks/bench_vs_lassocv.py --size big       # n=10000, p=15000 (minutes)
    python benchmarks/bench_vs_lassocv.py --n 1000 --p 1500 --seeds 10 --skip-ridge
    python benchmarks/bench_vs_lassocv.py --n 4000 --p 6000 --s 400 --trajectory 50
    python benchmarks/bench_vs_lassocv.py --natural --skip-ridge   # the grid call users write
    python benchmarks/bench_vs_lassocv.py --natural --skip-ridge --design both --blas-threads 1
    python benchmarks/bench_vs_lassocv.py --natural --enet --skip-ridge --design both \
        --blas-threads 1                                   # the elastic-net rows too

With ``--natural``, glmnet-rs (``pip install glmnet-rs``, import ``glmnetrs``: a Rust port
of R glmnet's coordinate descent; an optional benchmark dependency, not one of skacv) is
one more baseline when installed: ``cv_glmnet(alpha=1, nfolds=5, nlambda=30,
standardize=False)``, its model at ``lambda.min`` (and ``lambda.1se`` printed).

``--enet`` (with ``--natural``) adds the elastic-net rows beside the Lasso's, on the same
data: ``ElasticNetCV(cv=5, l1_ratio=[.1, .5, .7, .9, .95, 1])`` over ``--n-alphas``
alphas per ``l1_ratio`` (30 by default, the grid of skacv's alpha paths; its default of
100 would only slow it down), skacv's natural call
``TrajectoryEarlyStoppingCV(TrajectoryElasticNet(max_iter=200), param_grid={"l1_ratio":
[.1, .5, .7, .9, .95, 1]})`` (one automatic alpha path per ``l1_ratio``, as
``ElasticNetCV``), and glmnet-rs's ``cv_glmnet`` at the mixing ``alpha=0.5`` (30 lambdas,
5 folds, ``standardize=False``) and over the six mixings with the same folds (the mixing
and lambda of the smallest CV error; the time of the six). R glmnet's Gaussian elastic
net divides its ridge part by the standard deviation of ``y`` (it solves on ``y / sd(y)``):
at ``lambda`` and mixing ``a`` its model is scikit-learn's ``ElasticNet`` with l1 part
``lambda a`` and ridge part ``lambda (1 - a) / sd(y)``, another mixing than
``l1_ratio = a``; the models are compared by their true risk.
"""

import argparse
import time
import warnings

import numpy as np
import sklearn
from sklearn.linear_model import ElasticNetCV, Lasso, LassoCV, RidgeCV
from threadpoolctl import threadpool_info, threadpool_limits

from skacv import (
    IterativeRidge,
    TrajectoryEarlyStoppingCV,
    TrajectoryElasticNet,
    TrajectoryLasso,
    risk_alpha_path,
)

try:  # optional baseline (issue 42): pip install python-glmnet
    import glmnet
except ImportError:
    glmnet = None
if glmnet is not None and not hasattr(glmnet, "ElasticNet"):
    # another distribution installs a module of that name (glmstar's, with
    # GaussNet and no ElasticNet): not python-glmnet's API, so no baseline
    glmnet = None
try:  # optional baseline (issue 62): pip install glmnet-rs
    import glmnetrs
except ImportError:
    glmnetrs = None

#: the mixings of the elastic-net rows (--enet)
L1_RATIOS = [0.1, 0.5, 0.7, 0.9, 0.95, 1.0]

SIZES = {"small": (2000, 3000, 200), "big": (10000, 15000, 1000)}


def seed_data(n, p, s, sigma, seed, rho=0.0):
    """The seed notebook's generator (seed_ista_reference.py); ``rho > 0``: its
    equicorrelated variant (one common factor per row, same ``beta``)."""
    beta = 15 * np.hstack([np.ones(s), np.zeros(p - s)]) / np.sqrt(n)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal(size=(n, p))
    if rho:
        X *= np.sqrt(1 - rho)
        X += np.sqrt(rho) * rng.standard_normal(size=(n, 1))
    y = X @ beta + sigma * rng.standard_normal(size=(n,))
    return X, y, beta


def true_risk(coef, intercept, beta, sigma, rho=0.0):
    """``h^T Sigma h + intercept^2 + sigma^2``, ``h = coef - beta``,
    ``Sigma = (1 - rho) I + rho 1 1^T``; ``coef`` (p,) or (p, k) (one risk per column)."""
    h = coef - (beta if np.ndim(coef) == 1 else beta[:, None])
    risk = ((1 - rho) * np.sum(h**2, axis=0) + rho * np.sum(h, axis=0) ** 2
            + np.asarray(intercept) ** 2 + sigma**2)
    return float(risk) if np.ndim(risk) == 0 else risk


def lasso_cv(n_alphas):
    """LassoCV with ``n_alphas`` alphas (``alphas=int`` since scikit-learn 1.7)."""
    version = tuple(int(v) for v in sklearn.__version__.split(".")[:2])
    grid = {"alphas": n_alphas} if version >= (1, 7) else {"n_alphas": n_alphas}
    return LassoCV(cv=5, n_jobs=1, **grid)


def row(name, seconds, alpha, risk, extra=""):
    print(f"{name:<34} {seconds:9.2f} {alpha:12.5g} {risk:11.4f}  {extra}")


def bench_lasso(n, p, s, sigma, seed, n_alphas, patience, trajectory, natural=False, rho=0.0):
    X, y, beta = seed_data(n, p, s, sigma, seed, rho)
    design = f"equicorrelated rho={rho}" if rho else "isotropic"
    print(f"\n== Lasso: n={n}, p={p}, s={s}, sigma={sigma}, seed={seed}, {n_alphas} alphas, "
          f"{design} ==")
    print(f"{'method':<34} {'time (s)':>9} {'alpha':>12} {'true risk':>11}")

    tic = time.perf_counter()
    cv = lasso_cv(n_alphas).fit(X, y)
    t_cv = time.perf_counter() - tic
    r_cv = true_risk(cv.coef_, cv.intercept_, beta, sigma, rho)
    row("LassoCV(cv=5)", t_cv, cv.alpha_, r_cv, f"support {np.count_nonzero(cv.coef_)}")

    out = {"t_cv": t_cv, "r_cv": r_cv}
    for name, stop in [("full", None), ("early", patience)]:
        tic = time.perf_counter()
        path = risk_alpha_path(TrajectoryLasso(), X, y, n_alphas=n_alphas,
                               n_alphas_no_change=stop)
        i = int(np.argmin(path.risk))
        seconds = time.perf_counter() - tic
        risk = true_risk(path.coefs[:, i], path.intercepts[i], beta, sigma, rho)
        label = ("risk_alpha_path, all alphas" if stop is None
                 else f"risk_alpha_path, stop after {stop}")
        row(label, seconds, path.alphas[i], risk,
            f"df {path.df[i]:.0f}, estimate {path.risk[i]:.4f}, {len(path.alphas)} alphas, "
            f"{path.n_iter.sum()} FISTA steps")
        out[f"t_{name}"], out[f"r_{name}"] = seconds, risk
        if stop is None:
            same_grid = np.allclose(path.alphas, cv.alphas_, rtol=1e-10)
            # the true risk along the path: what an oracle would pick on this grid
            truth = true_risk(path.coefs, path.intercepts, beta, sigma, rho)
            j = int(np.argmin(truth))
            alpha_chosen = path.alphas[i]
    print(f"{'(oracle on the grid)':<34} {'':>9} {path.alphas[j]:12.5g} {truth[j]:11.4f}")

    if trajectory:
        tic = time.perf_counter()
        est = TrajectoryLasso(alpha=alpha_chosen, max_iter=trajectory,
                              random_state=0).fit(X, y)
        t = int(np.argmin(est.risk_path_))
        t_traj = time.perf_counter() - tic
        r_traj = true_risk(est.coef_path_[:, t], est.intercept_path_[t], beta, sigma, rho)
        row(f"  + FISTA trajectory ({trajectory} steps)", t_traj, alpha_chosen, r_traj,
            f"iteration {t}, estimate {est.risk_path_[t]:.4f} (time of the trajectory)")
        out["t_traj"], out["r_traj"] = out["t_early"] + t_traj, r_traj

    if natural:
        # what a user writes: 12 alphas on LassoCV's range, the defaults otherwise
        grid = np.geomspace(cv.alphas_.max(), cv.alphas_.min(), 12)
        tic, cpu = time.perf_counter(), time.process_time()
        search = TrajectoryEarlyStoppingCV(TrajectoryLasso(solver="fista", max_iter=200),
                                           param_grid={"alpha": grid},
                                           random_state=0).fit(X, y)
        t_nat = time.perf_counter() - tic
        out["cpu_nat"] = time.process_time() - cpu  # CPU time: less noisy on a busy host
        r_nat = true_risk(search.coef_, search.intercept_, beta, sigma, rho)
        row("TrajectoryEarlyStoppingCV (12 alphas)", t_nat, search.best_params_["alpha"], r_nat,
            f"iteration {search.best_iteration_}, search_={search.search_!r}, "
            f"criterion_={search.criterion_!r}")
        out["t_nat"], out["r_nat"] = t_nat, r_nat
        if glmnet is None:
            print("glmnet CV along lambda: skipped (pip install python-glmnet to add it)")
        else:
            for key, lambdas in [("glmnet", None), ("glmnet_grid", grid)]:
                out.update(bench_glmnet(X, y, beta, sigma, rho, key, lambdas))
        if glmnetrs is None:
            print("glmnet-rs cv_glmnet: skipped (pip install glmnet-rs to add it)")
        else:
            out.update(bench_glmnetrs(X, y, beta, sigma, rho, [1.0], n_alphas, "glmnetrs"))

    print(f"same alpha grid as LassoCV: {same_grid}")
    for name in ("full", "early"):
        print(f"{name:>5}: time ratio path / LassoCV = {out[f't_{name}'] / t_cv:.3f} "
              f"(goal <= 0.333), risk ratio = {out[f'r_{name}'] / r_cv:.4f} (goal <= 1.01)")
    if natural:
        print(f"TrajectoryEarlyStoppingCV(12 alphas): time ratio / LassoCV = "
              f"{t_nat / t_cv:.3f} (goal <= 0.333), risk ratio = {r_nat / r_cv:.4f} "
              "(goal <= 1.01)")
    for key, what in [("glmnet", "glmnet"), ("glmnet_grid", "glmnet on the 12 alphas"),
                      ("glmnetrs", "glmnet-rs cv_glmnet")]:
        if f"t_{key}" in out:
            print(f"skacv (12 alphas) / {what}: time ratio = {t_nat / out[f't_{key}']:.3f} "
                  f"(goal <= 1), risk ratio = {r_nat / out[f'r_{key}']:.4f} at lambda_best_ "
                  f"(goal <= 1), {r_nat / out[f'r_{key}_min']:.4f} at lambda_max_; "
                  f"CPU time ratio = {out['cpu_nat'] / out[f'cpu_{key}']:.3f} "
                  f"({out['cpu_nat']:.2f} s / {out[f'cpu_{key}']:.2f} s); "
                  f"{what} / LassoCV: time {out[f't_{key}'] / t_cv:.3f}, "
                  f"risk {out[f'r_{key}'] / r_cv:.4f}")
    if trajectory:
        print(f"early + trajectory: time ratio {out['t_traj'] / t_cv:.3f}, "
              f"risk ratio {r_traj / r_cv:.4f}")
    return out


def lasso_objective(X, y, coef, intercept, alpha):
    """``(1 / (2 n)) ||y - X coef - intercept||^2 + alpha ||coef||_1``."""
    residual = y - X @ coef - intercept
    return float(residual @ residual / (2 * len(y)) + alpha * np.abs(coef).sum())


def bench_glmnet(X, y, beta, sigma, rho, key="glmnet", lambda_path=None):
    """glmnet's 5-fold CV along lambda (python-glmnet, Fortran): its own path of 100
    lambdas (``lambda_path=None``; glmnet stops it early once the training R^2 exceeds
    0.999) or the given lambdas (then glmnet fits them all)."""
    est = glmnet.ElasticNet(alpha=1, n_splits=5, standardize=False, n_jobs=1, random_state=0,
                            lambda_path=lambda_path)
    tic, cpu = time.perf_counter(), time.process_time()
    try:
        est.fit(X, y)
    except RuntimeError as exc:  # glmnet's error flags (jerr) are raised as RuntimeError
        print(f"glmnet CV along lambda: failed ({exc})")
        return {}
    t_glm, cpu_glm = time.perf_counter() - tic, time.process_time() - cpu
    lam_best = float(np.ravel(est.lambda_best_)[0])
    r_best = true_risk(est.coef_, est.intercept_, beta, sigma, rho)
    i_min = int(est.lambda_max_inx_)
    r_min = true_risk(est.coef_path_[:, i_min], est.intercept_path_[i_min], beta, sigma, rho)
    residual = y - X @ est.coef_path_[:, -1] - est.intercept_path_[-1]
    r2_last = 1 - residual.var() / y.var()
    label = ("glmnet ElasticNet(5-fold) 1-s.e." if lambda_path is None
             else "  glmnet, same 12 alphas, 1-s.e.")
    row(label, t_glm, lam_best, r_best,
        f"lambda_best_ (its default), support {np.count_nonzero(est.coef_)}, "
        f"{est.n_lambda_} lambdas down to {est.lambda_path_[-1]:.4g} "
        f"(training R^2 {r2_last:.5f} there)")
    print(f"{'  same fit at lambda_max_ (CV min)':<34} {'':>9} {est.lambda_max_:12.5g} "
          f"{r_min:11.4f}  support {np.count_nonzero(est.coef_path_[:, i_min])}")
    if lambda_path is None:
        # untimed check of the scale: glmnet's lambda is scikit-learn's Lasso alpha
        ref = Lasso(alpha=lam_best, tol=1e-8, max_iter=100_000).fit(X, y)
        obj_glm = lasso_objective(X, y, est.coef_, est.intercept_, lam_best)
        obj_ref = lasso_objective(X, y, ref.coef_, ref.intercept_, lam_best)
        diff = np.linalg.norm(est.coef_ - ref.coef_) / max(np.linalg.norm(ref.coef_), 1e-300)
        print(f"  scale check: Lasso objective at lambda_best_, glmnet / scikit-learn Lasso - 1 "
              f"= {obj_glm / obj_ref - 1:.2e}, relative coef difference {diff:.2e}")
    return {f"t_{key}": t_glm, f"cpu_{key}": cpu_glm, f"r_{key}": r_best, f"r_{key}_min": r_min}


def bench_glmnetrs(X, y, beta, sigma, rho, mixings, n_lambdas, key):
    """glmnet-rs's 5-fold ``cv_glmnet`` along ``n_lambdas`` lambdas at each of
    ``mixings`` (glmnet's ``alpha``; the same folds for all), ``standardize=False``:
    the mixing and ``lambda.min`` of the smallest CV error (``lambda.1se`` printed)."""
    tic, cpu = time.perf_counter(), time.process_time()
    fits, foldid = [], None
    for a in mixings:
        fit = glmnetrs.cv_glmnet(X, y, alpha=a, nfolds=5, nlambda=n_lambdas, standardize=False,
                                 seed=0, foldid=foldid)
        foldid = fit.foldid
        fits.append(fit)
    t, cpu_t = time.perf_counter() - tic, time.process_time() - cpu
    k = int(np.argmin([f.cvm[f.index_min] for f in fits]))
    fit, a = fits[k], mixings[k]
    out = {}
    for s in ("lambda.min", "lambda.1se"):
        c = fit.coef(s)[:, 0]
        out[s] = true_risk(c[1:], c[0], beta, sigma, rho)
    label = (f"glmnet-rs cv_glmnet(alpha={a:g})" if len(mixings) == 1
             else f"glmnet-rs cv_glmnet, {len(mixings)} mixings")
    row(label, t, fit.lambda_min, out["lambda.min"],
        f"lambda.min, mixing {a:g}, support {np.count_nonzero(fit.coef('lambda.min')[1:])}, "
        f"{fit.lambda_.size} lambdas; lambda.1se {fit.lambda_1se:.4g}: risk "
        f"{out['lambda.1se']:.4f}")
    return {f"t_{key}": t, f"cpu_{key}": cpu_t, f"r_{key}": out["lambda.min"],
            f"r_{key}_min": out["lambda.min"]}


def bench_elastic_net(n, p, s, sigma, seed, n_alphas, rho=0.0):
    """The elastic-net rows (``--enet``): ElasticNetCV, skacv's natural call and
    glmnet-rs, on the Lasso part's data."""
    X, y, beta = seed_data(n, p, s, sigma, seed, rho)
    design = f"equicorrelated rho={rho}" if rho else "isotropic"
    print(f"\n== Elastic net: n={n}, p={p}, s={s}, sigma={sigma}, seed={seed}, l1_ratio "
          f"{L1_RATIOS}, {design} ==")
    print(f"{'method':<34} {'time (s)':>9} {'alpha':>12} {'true risk':>11}")
    version = tuple(int(v) for v in sklearn.__version__.split(".")[:2])
    grid = {"alphas": n_alphas} if version >= (1, 7) else {"n_alphas": n_alphas}
    tic, cpu = time.perf_counter(), time.process_time()
    cv = ElasticNetCV(cv=5, l1_ratio=L1_RATIOS, n_jobs=1, **grid).fit(X, y)
    t_cv, cpu_cv = time.perf_counter() - tic, time.process_time() - cpu
    r_cv = true_risk(cv.coef_, cv.intercept_, beta, sigma, rho)
    row("ElasticNetCV(cv=5, 6 l1_ratio)", t_cv, cv.alpha_, r_cv,
        f"l1_ratio {cv.l1_ratio_:g}, support {np.count_nonzero(cv.coef_)}")
    tic, cpu = time.perf_counter(), time.process_time()
    search = TrajectoryEarlyStoppingCV(TrajectoryElasticNet(max_iter=200),
                                       param_grid={"l1_ratio": L1_RATIOS},
                                       random_state=0).fit(X, y)
    t_nat, cpu_nat = time.perf_counter() - tic, time.process_time() - cpu
    r_nat = true_risk(search.coef_, search.intercept_, beta, sigma, rho)
    fitted = search.cv_results_["trajectory_fitted"]
    row("TrajectoryEarlyStoppingCV (enet)", t_nat, search.best_params_["alpha"], r_nat,
        f"l1_ratio {search.best_params_['l1_ratio']:g}, iteration {search.best_iteration_}, "
        f"{int(fitted.sum())} trajectories, alpha paths {search.cv_results_['path_time']:.2f} s")
    print(f"skacv (enet) / ElasticNetCV: time ratio = {t_nat / t_cv:.3f} (goal <= 0.2), "
          f"risk ratio = {r_nat / r_cv:.4f} (goal <= 1); CPU time ratio = "
          f"{cpu_nat / cpu_cv:.3f} ({cpu_nat:.2f} s / {cpu_cv:.2f} s)")
    out = {"t_cv": t_cv, "r_cv": r_cv, "t_nat": t_nat, "r_nat": r_nat}
    if glmnetrs is None:
        print("glmnet-rs cv_glmnet: skipped (pip install glmnet-rs to add it)")
        return out
    for key, mixings in [("glmnetrs", [0.5]), ("glmnetrs_all", L1_RATIOS)]:
        res = bench_glmnetrs(X, y, beta, sigma, rho, mixings, n_alphas, key)
        out.update(res)
        print(f"skacv (enet) / {key}: time ratio = {t_nat / res[f't_{key}']:.3f} (goal <= 1), "
              f"risk ratio = {r_nat / res[f'r_{key}']:.4f} at lambda.min (goal <= 1); CPU "
              f"time ratio = {cpu_nat / res[f'cpu_{key}']:.3f} ({cpu_nat:.2f} s / "
              f"{res[f'cpu_{key}']:.2f} s)")
    return out


def bench_ridge(n, p, s, sigma, seed, n_alphas):
    X, y, beta = seed_data(n, p, s, sigma, seed + 1)
    print(f"\n== Ridge (p < n): n={n}, p={p}, s={s}, sigma={sigma}, {n_alphas} alphas ==")
    print(f"{'method':<34} {'time (s)':>9} {'alpha':>12} {'true risk':>11}")
    tic = time.perf_counter()
    path = risk_alpha_path(IterativeRidge(), X, y, n_alphas=n_alphas)
    i = int(np.argmin(path.risk))
    t_path = time.perf_counter() - tic
    r_path = true_risk(path.coefs[:, i], path.intercepts[i], beta, sigma)

    tic = time.perf_counter()
    cv = RidgeCV(alphas=path.alphas).fit(X, y)
    t_cv = time.perf_counter() - tic
    r_cv = true_risk(cv.coef_, cv.intercept_, beta, sigma)
    row("RidgeCV (efficient LOO)", t_cv, cv.alpha_, r_cv)
    row("risk_alpha_path(IterativeRidge)", t_path, path.alphas[i], r_path,
        f"df {path.df[i]:.1f}, estimate {path.risk[i]:.4f}")
    print(f"time ratio  path / RidgeCV = {t_path / t_cv:.3f}")
    print(f"risk ratio  path / RidgeCV = {r_path / r_cv:.4f}  (goal: equal)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--p", type=int, default=None)
    parser.add_argument("--s", type=int, default=None)
    parser.add_argument("--sigma", type=float, default=1.5)
    parser.add_argument("--seed", type=int, default=2025)
    parser.add_argument("--n-alphas", type=int, default=30)
    parser.add_argument("--patience", type=int, default=3,
                        help="n_alphas_no_change of the early-stopped path")
    parser.add_argument("--seeds", type=int, default=1,
                        help="repeat the Lasso part over this many seeds and average the ratios")
    parser.add_argument("--trajectory", type=int, default=0,
                        help="steps of the from-zero trajectory at the chosen alpha (0: none)")
    parser.add_argument("--natural", action="store_true",
                        help="also TrajectoryEarlyStoppingCV(TrajectoryLasso(solver='fista', "
                             "max_iter=200), param_grid={'alpha': 12 alphas}) with defaults")
    parser.add_argument("--ridge-p", type=int, default=None,
                        help="features of the ridge design (default p // 3, so that p < n)")
    parser.add_argument("--blas-threads", type=int, default=None,
                        help="limit BLAS threads for both methods (threadpoolctl); on a "
                             "busy machine 1 avoids OpenBLAS oversubscription")
    parser.add_argument("--design", choices=["seed", "equi", "both"], default="seed",
                        help="Lasso part on the isotropic seed generator, its equicorrelated "
                             "variant (--rho), or both")
    parser.add_argument("--rho", type=float, default=0.5,
                        help="correlation of the equicorrelated design")
    parser.add_argument("--enet", action="store_true",
                        help="with --natural: the elastic-net rows (ElasticNetCV, skacv's "
                             "l1_ratio search, glmnet-rs) on the same designs")
    parser.add_argument("--enet-only", action="store_true",
                        help="the elastic-net rows only (implies --enet --natural)")
    parser.add_argument("--skip-ridge", action="store_true")
    parser.add_argument("--skip-lasso", action="store_true")
    args = parser.parse_args()
    n, p, s = SIZES[args.size]
    n, p = args.n or n, args.p or p
    s = args.s or (s if args.n is None and args.p is None else max(1, p // 15))
    warnings.simplefilter("ignore", FutureWarning)
    with threadpool_limits(limits=args.blas_threads, user_api="blas"):
        blas = [(i["internal_api"], i["num_threads"]) for i in threadpool_info()
                if i["user_api"] == "blas"]
        print(f"scikit-learn {sklearn.__version__}, numpy {np.__version__}, BLAS {blas}")
        run(args, n, p, s)


def run(args, n, p, s):
    rhos = {"seed": [0.0], "equi": [args.rho], "both": [0.0, args.rho]}[args.design]
    if args.enet_only:
        for rho in rhos:
            for k in range(args.seeds):
                bench_elastic_net(n, p, s, args.sigma, args.seed + k, args.n_alphas, rho)
        args.skip_lasso = True
    for rho in [] if args.skip_lasso else rhos:
        runs = [bench_lasso(n, p, s, args.sigma, args.seed + k, args.n_alphas, args.patience,
                            args.trajectory, args.natural, rho) for k in range(args.seeds)]
        if args.enet and args.natural:
            for k in range(args.seeds):
                bench_elastic_net(n, p, s, args.sigma, args.seed + k, args.n_alphas, rho)
        if args.seeds > 1:
            print(f"\n== Lasso, {args.seeds} seeds, rho={rho}: mean ratios to LassoCV "
                  "(time, true risk) ==")
            keys = (["full", "early"] + (["traj"] if args.trajectory else [])
                    + (["nat"] if args.natural else [])
                    + [k for k in ("glmnet", "glmnet_grid") if all(f"t_{k}" in r for r in runs)])
            for key in keys:
                tr = [r[f"t_{key}"] / r["t_cv"] for r in runs]
                rr = [r[f"r_{key}"] / r["r_cv"] for r in runs]
                print(f"{key:>5}: time {np.mean(tr):.3f}  risk {np.mean(rr):.4f} "
                      f"(min {np.min(rr):.4f}, max {np.max(rr):.4f})")
    if not args.skip_ridge:
        pr = args.ridge_p or p // 3
        bench_ridge(n, pr, max(1, pr // 15), args.sigma, args.seed, args.n_alphas)


if __name__ == "__main__":
    main()
