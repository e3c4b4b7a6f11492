"""Leave-one-out along a trajectory: IACV, brute-force refits, NS / IJ / ALO.

Definition (every function of this module computes the same target)
-------------------------------------------------------------------
The leave-``i``-out run is the estimator refitted without sample ``i`` with
the *same* algorithm, start (zero), step size (``step_size_`` of the full
fit, also when it was ``"auto"``), schedule and, for SGD, the same
mini-batches with ``i`` deleted. Its objective is the estimator's objective
on the remaining data: a mean-form loss is divided by the remaining weight
``W - rho_i``, a penalty keeps its own form (``IterativeRidge``'s
``alpha ||w||^2`` and ``TrajectoryHuberRegressor``'s penalties are sum-form,
the Lasso/logistic ``alpha`` mean form). With ``fit_intercept=True`` the
left-out fit re-centres ``X`` and ``y`` on the remaining data (least squares)
or refits its unpenalised intercept coordinate (logistic, Huber, whose
left-out runs also keep the full fit's ``scale_``). ``loo_path_[t]`` is the weighted mean over
``i`` of the loss of iterate ``t`` of run ``-i`` at ``(x_i, y_i)``.

Sample weights are frequency weights: removing sample ``i`` removes *one
unit* of its weight, ``rho_i = min(w_i, 1)`` (the whole row when
``w_i <= 1``), and the mean over ``i`` is weighted by ``w_i``. With integer
weights this equals the leave-one-out of the data with repeated rows (each
copy of a row sees the other copies); rows of zero weight are not data and
only contribute their full-data prediction.

IACV (Luo, Ren & Barber 2023)
-----------------------------
Every left-out run is tracked as a difference ``d_i^t = x_{-i}^t - x^t`` to
the full run, advanced by the same :class:`~skacv.Iteration` methods as the
fit (``combine``, ``prox``, ``extrapolate``), with the gradient input of the
left-out objective linearised at the full iterate ``v^{k-1}``:

    z_{-i} = (N_S z - H_S d_i - rho_i [i in S] u_i (g_i - c_i u_i^T d_i)
              + centring terms) / (N_S - rho_i [i in S]) - (mu_{-i} - mu) (v + d_i)

(``u_i`` the unweighted row, ``g_i`` and ``c_i`` minus the first and the
second derivative of the loss at ``u_i^T v``, ``H_S = X~_S^T diag(c) X~_S``,
``N_S`` the weight of the batch, ``S`` every row for full-batch methods).
Least squares is quadratic, so this is *exact* leave-one-out; for the
linear least-squares iterations it runs in the eigenbasis of ``X~^T X~``
(or of ``X~ X~^T`` when ``p > n``), ``O(n min(n, p))`` per step after an
``O(n p min(n, p))`` set-up. ISTA/FISTA apply the exact prox to each
left-out point (no prox Jacobian) and logistic regression linearises the
gradient, both with an ``O(1/n^2)`` error per iterate.

The centring terms of least squares with an intercept: re-centring on the
data without ``i`` equals, for the centred full-data coordinates, removing
``u_i`` with weight ``kappa_i = rho_i W / (W - rho_i)`` (full batch), and the
left-out residual of ``y_i`` is ``W / (W - rho_i)`` times the centred one.
"""

import time

import numpy as np
from sklearn.utils import Bunch

from ..._config import check_memory, path_memory_bytes, working_memory_bytes
from ..._trace import taken
from ...iterations._datafits import log_loss_terms
from ...linalg._sampling import subsample_rows
from ._track import _Problem, _Spectral, _track, _track_toeplitz

# arrays of size n_coef per tracked sample (state, temporaries) for the chunk size
_ARRAYS_PER_SAMPLE = 10


def _in_sample_losses(prob, fitted, tracked, prev=None):
    """Weighted in-sample losses ``w_i loss(y_i, x_i^T x^t)`` of the full
    iterates: their sum over every sample, and the rows ``tracked``.

    ``prev`` (the result for a prefix of the same path: a warm continuation)
    supplies its columns; only the new ones are computed.

    Returns ``(total, rows)`` of shapes (T + 1,) and (len(tracked), T + 1).
    """
    d, n, T = prob.design, prob.n, prob.T
    sw = np.where(prob.sw > 0, prob.sw, 1.0)
    pos = np.flatnonzero(prob.w > 0)
    total = np.zeros(T + 1)
    rows = np.empty((tracked.shape[0], T + 1))
    where = np.searchsorted(pos, tracked)
    start = 0
    if prev is not None and prev[0].shape[0] <= T + 1:
        start = prev[0].shape[0]
        total[:start], rows[:, :start] = prev
    # columns of the path per chunk: n * chunk doubles within the working memory
    chunk = int(max(1, min(T + 1, working_memory_bytes() // (8 * 3 * max(n, 1)))))
    for lo in range(start, T + 1, chunk):
        hi = min(T + 1, lo + chunk)
        if fitted is not None:
            Xv = np.asarray(fitted[:, lo:hi], dtype=np.float64)
        else:
            Xv = np.asarray(d.matvec(prob.path[:, lo:hi].astype(d.dtype, copy=False)),
                            dtype=np.float64)
        eta = Xv[pos] / sw[pos, None]
        if prob.classifier:
            terms = log_loss_terms(eta, prob.y_tilde[pos, None])
        else:
            terms = (prob.y_tilde[pos] / sw[pos])[:, None] - eta
            terms *= terms
        terms *= prob.w[pos, None]
        total[lo:hi] = terms.sum(axis=0)
        rows[:, lo:hi] = terms[where]
    return total, rows


def _regression_estimate(prob, per, tracked, fitted, scale, state=None):
    """Leave-one-out path from a subsample, with a control variate.

    ``per`` (len(tracked), T + 1) are the weighted left-out losses
    ``a_i = w_i L_i^t`` of the tracked samples; the weighted in-sample losses
    ``b_i = w_i R_i^t`` of the full iterates are known for *every* sample and
    strongly correlated with ``a_i`` (``L_i / R_i`` is close to a common
    ``(1 - h_ii)^{-2}`` at a fixed support). The difference estimator

        loo_t = ( scale * sum_sub (a_i - beta_t b_i) + beta_t * sum_all b_i ) / W,

    with ``beta_t`` the least-squares slope of ``a`` on ``b`` over the
    subsample, has far less variance than the Horvitz-Thompson mean
    ``scale * sum_sub a_i / W`` (``beta_t = 0``), and never much more: where
    the in-sample losses carry little information (near interpolation) the
    slope goes to zero. Its bias is of order ``1 / n_sub``.

    Its standard error is the delete-one jackknife over the ``n_sub`` drawn
    samples (rows of zero weight drawn count as draws with ``a_i = b_i = 0``)
    with the finite-population factor of a draw without replacement,

        se_t^2 = (1 - n_sub / n) (n_sub - 1) / n_sub * sum_j (loo_t^(-j) - mean_j loo_t^(-j))^2,

    ``loo_t^(-j)`` the estimate without the draw ``j`` (its slope refitted):
    the linearised variance ``(1 - n_sub / n) s^2(a - beta b) / n_sub``
    ignores the slope's estimation and the heavy tails of the left-out
    losses (``docs/internals.rst``, Leave-one-out).

    Returns
    -------
    loss, std_error : ndarray of shape (T + 1,)
    """
    total, rows = _in_sample_losses(prob, fitted, tracked,
                                    None if state is None else state.get("in_sample"))
    if state is not None:  # a warm continuation computes only the new columns
        state["in_sample"] = (total, rows)
    a_c = per - per.mean(axis=0)
    b_c = rows - rows.mean(axis=0)
    var = np.einsum("ij,ij->j", b_c, b_c)
    cov = np.einsum("ij,ij->j", a_c, b_c)
    with np.errstate(divide="ignore", invalid="ignore"):
        beta = np.where(var > 0, cov / np.where(var > 0, var, 1.0), 0.0)
    loss = (scale * (per.sum(axis=0) - beta * rows.sum(axis=0)) + beta * total) / prob.W
    std_error = _jackknife_error(per, rows, total, prob.n, scale, prob.W)
    return loss, std_error


def _jackknife_error(a, b, total, n, scale, W):
    """Jackknife standard error of :func:`_regression_estimate` (closed
    form: every delete-one estimate from the sums, ``O(n_sub T)``).

    ``a``, ``b`` (m, T + 1): left-out and in-sample weighted losses of the
    ``m`` tracked draws; ``total`` (T + 1,) the in-sample sum over every
    sample; ``n_sub = n / scale`` draws in all (``n_sub - m`` of zero weight).
    """
    m = a.shape[0]
    n_sub = int(round(n / scale))
    Sa, Sb = a.sum(axis=0), b.sum(axis=0)
    Sab, Sbb = np.einsum("ij,ij->j", a, b), np.einsum("ij,ij->j", b, b)

    def estimate(sa, sb, sab, sbb, k, c):
        # slope over k tracked draws from the sums; c draws in all
        with np.errstate(divide="ignore", invalid="ignore"):
            cov = sab - sa * sb / k
            var = sbb - sb * sb / k
            beta = np.where(var > 1e-12 * np.maximum(sbb, 1e-300), cov / var, 0.0)
        return (n / c * (sa - beta * sb) + beta * total) / W

    if n_sub < 2 or m < 2:
        return np.zeros_like(total)
    # without a tracked draw j
    thetas = [estimate(Sa - a, Sb - b, Sab - a * b, Sbb - b * b, m - 1, n_sub - 1)]
    if n_sub > m:  # without a drawn row of zero weight (all give the same value)
        thetas.append(np.repeat(estimate(Sa, Sb, Sab, Sbb, m, n_sub - 1)[None],
                                n_sub - m, axis=0))
    theta = np.concatenate(thetas)
    dev = theta - theta.mean(axis=0)
    var = max(1.0 - n_sub / n, 0.0) * (n_sub - 1) / n_sub * np.einsum("ij,ij->j", dev, dev)
    return np.sqrt(var)


def _gram_dtype(n_coef, policy):
    """Precision of the left-out runs' Gram products (the speed ``policy``'s
    ``loo_float32_min_features``)."""
    taken("loo_gram_dtype", float32=n_coef >= policy.loo_float32_min_features)
    return np.float32 if n_coef >= policy.loo_float32_min_features else np.float64


def _block_size(prob, batch_size, n_steps=0):
    """Number of left-out runs advanced together."""
    m = prob.m if prob.spectral is None else prob.spectral.lam.shape[0]
    per = 8 * (m * _ARRAYS_PER_SAMPLE + 8 * n_steps + prob.T + 1)
    if batch_size is None:
        return int(max(1, working_memory_bytes() // per))
    check_memory(
        per * int(batch_size),
        f"the leave-one-out state of {int(batch_size)} samples x {m} coefficients",
        "Lower loo_options['batch_size'] (or leave it None to size the blocks from "
        "skacv.get_config()['working_memory']). ",
    )
    return int(batch_size)


def iacv_path(design, y_tilde, iteration, coef_path, y, *, datafit=None,
              batch_size=None, subsample=None, store_predictions=False, random_state=None,
              fitted=None, coef_at=(), spectral="auto", full_predictions=None, verbose=0,
              _state=None, _keep_state=False):
    """Leave-one-out losses of every iterate by IACV (see the module docstring).

    Parameters
    ----------
    design : Design
        The fit's design (rows of ``X~``, centred and weighted).
    y_tilde : ndarray of shape (n_samples,)
        The fit's target (centred and weighted; labels {0, 1} for logistic).
    iteration : Iteration
        The iteration object of the fit (its penalty gives the left-out
        objective's penalty, :meth:`~skacv.iterations._penalties.Penalty.l2_at`
        and :meth:`~skacv.iterations._penalties.Penalty.l1_at`).
    coef_path : ndarray of shape (n_coef, T + 1)
        Iterates in the fit's coordinates.
    y : ndarray of shape (n_samples,)
        Original target (least squares) or labels in {0, 1}.
    datafit : datafit of :mod:`skacv.iterations._datafits`, default=None
        ``None`` is least squares.
    batch_size, subsample : int or None
        Block size of the left-out runs; random subset of tracked samples.
    store_predictions : bool
    random_state : int, RandomState instance or None
        Draws the subsample.
    fitted : ndarray of shape (n_samples, T + 1), default=None
        ``X~ x^t`` when known (spectral set-up for ``p > n``).
    coef_at : sequence of int
        Iterates at which the left-out coefficients are returned.
    spectral : {"auto", False}
        Use the eigenbasis for linear least-squares iterations.
    full_predictions : callable, default=None
        ``full_predictions(idx)`` gives the full-data prediction paths of
        the rows ``idx`` of zero weight (stored predictions).
    _state, _keep_state : dict or None, bool
        Warm continuation (private): ``_keep_state=True`` returns in
        ``state`` what a call on a longer path with the same prefix (a
        warm-started refit on the same data, which the estimator guards)
        needs to continue the left-out runs instead of restarting them.
        Only for the general recursion, when the state fits in the working
        memory.

    Returns
    -------
    result : Bunch
        ``loss`` (T + 1,), ``std_error`` (T + 1,) (the standard error of a
        subsampled ``loss``, see :func:`_regression_estimate`; None when every
        sample is tracked), ``error`` (T + 1,) or None, ``predictions``
        (n_loo, T + 1) or None, ``indices`` (n_loo,), ``coef``
        (len(coef_at), n_tracked, n_coef) or None with ``coef_indices``,
        ``state`` (dict or None).
    """
    tic = time.perf_counter()
    prob = _Problem(design, y_tilde, iteration, coef_path, datafit, y)
    n, T = prob.n, prob.T
    state = _state
    if state is not None and not (
            state["T"] <= T and state["subsample"] == subsample
            and state["store"] == bool(store_predictions) and not coef_at
            and state["batch_size"] == batch_size and state["n"] == n
            and (state["random_state"] is random_state or (
                isinstance(random_state, (int, np.integer))
                and state["random_state"] == random_state))):
        state = None
    if state is not None:  # the same subsample, blocks and basis as before
        prob.gram = state["gram"]
        prob.gram_dtype = _gram_dtype(prob.m, design.policy)
        if state["spectral"] is not None:
            prob.spectral = state["spectral"].project(prob, fitted)
        blocks = state["blocks"]
        losses, err, preds, _ = _track_blocks(prob, _track, blocks, state["block_states"], (),
                                              store_predictions, verbose, tic, state)
        new_state = None
        if _keep_state:
            new_state = dict(state, T=T, losses=losses,
                             err=None if err is None else err.copy(), preds=preds)
        return _finish(prob, losses, err, preds, state["indices"], state["scale"], fitted,
                       full_predictions, [], blocks, new_state)
    if store_predictions:
        check_memory(8 * n * (T + 1), f"loo_predictions_ of shape ({n}, {T + 1})",
                     "Set loo_options={'store_predictions': False} or use its 'subsample'. ")
    if subsample is not None and subsample < n:
        indices, scale = subsample_rows(n, subsample, random_state)
    else:
        indices, scale = np.arange(n), 1.0
    tracked = indices[prob.rho[indices] > 0]
    # the eigenbasis of X~^T X~ diagonalises combine() only for scalar steps
    # (not for a preconditioned step such as EigenPro's)
    linear_ls = (prob.quadratic and iteration.is_linear and prob.sampler is None
                 and getattr(iteration, "preconditioner", None) is None)
    if spectral == "auto" and linear_ls and prob.pen is None:
        r = min(n, prob.m)
        if 16 * r * r <= path_memory_bytes():
            prob.spectral = _Spectral(prob, fitted)
    if prob.spectral is None and prob.quadratic and prob.sampler is None:
        if (8 * prob.m * prob.m <= working_memory_bytes()
                and prob.m <= design.policy.loo_gram_max_aspect * n):
            # kept in the precision of its products (float32: half the memory)
            prob.gram_dtype = _gram_dtype(prob.m, design.policy)
            prob.gram = (np.asarray(design.gram(side="features"), dtype=np.float64)
                         * prob.W).astype(prob.gram_dtype, copy=False)
    track, groups = _track, [tracked]
    if prob.spectral is not None and iteration.is_stationary \
            and T <= 4 * prob.spectral.lam.shape[0]:
        values = np.unique(prob.rho[tracked])
        if values.shape[0] <= 8:  # blocks share rho (frequency weights: rho = 1)
            track = _track_toeplitz
            groups = [tracked[prob.rho[tracked] == r] for r in values]
    block = _block_size(prob, batch_size, T if track is _track_toeplitz else 0)
    blocks = [g[s: s + block] for g in groups for s in range(0, g.shape[0], block)]
    keep = (_keep_state and track is _track and not coef_at
            and 8 * (3 * prob.m + 1) * tracked.shape[0] <= working_memory_bytes())
    if keep:
        new_state = dict(T=T, subsample=subsample, store=bool(store_predictions),
                         batch_size=batch_size, n=n, gram=prob.gram, indices=indices,
                         spectral=prob.spectral,
                         random_state=random_state,
                         scale=scale, tracked=tracked, blocks=blocks,
                         block_states=[dict(k=0) for _ in blocks])
    losses, err, preds, coefs = _track_blocks(
        prob, track, blocks, new_state["block_states"] if keep else None, coef_at,
        store_predictions, verbose, tic)
    if keep:
        new_state.update(losses=losses, err=None if err is None else err.copy(),
                         preds=preds)
    return _finish(prob, losses, err, preds, indices, scale, fitted, full_predictions,
                   coefs, blocks, new_state if keep else None)


def _track_blocks(prob, track, blocks, block_states, coef_at, store, verbose, tic, old=None):
    """``track`` on every block (``block_states``: their kept states, or
    ``None``): per block the weighted losses of its samples (c, T + 1), the
    error sums, the predictions by sample and the left-out coefficients.
    ``old`` (a kept state of :func:`iacv_path`) continues its runs: the
    steps up to ``old["T"]`` are its own."""
    T = prob.T
    k0 = -1 if old is None else old["T"]  # the steps already taken
    err = np.zeros(T + 1) if prob.classifier else None
    if err is not None and old is not None:
        err[: k0 + 1] = old["err"]
    if old is None:
        preds = {} if store else None
    else:
        preds = old["preds"]
    losses, coefs = [], []
    done = 0
    for b, idx in enumerate(blocks):
        kw = {} if block_states is None else dict(state=block_states[b])
        lo, er, pr, co = track(prob, idx, coef_at=coef_at, store=store, **kw)
        if old is not None:
            lo[:, : k0 + 1] = old["losses"][b]
        losses.append(lo)
        if err is not None:
            err[k0 + 1:] += er[k0 + 1:]
        if preds is not None:
            for i, row in zip(idx.tolist(), pr, strict=True):
                if old is not None:
                    row[: k0 + 1] = preds[i]
                preds[i] = row
        if co is not None:
            coefs.append(co)
        done += idx.shape[0]
        if verbose and old is None:
            print(f"[loo] {done}/{sum(g.shape[0] for g in blocks)} left-out runs "
                  f"({'toeplitz' if track is _track_toeplitz else 'recursion'}), "
                  f"{time.perf_counter() - tic:.1f}s")
    if verbose and old is not None:
        print(f"[loo] continued {done} left-out runs from step {k0} "
              f"to {T}, {time.perf_counter() - tic:.1f}s")
    return losses, err, preds, coefs


def _finish(prob, losses, err, preds, indices, scale, fitted, full_predictions,
            coefs, blocks, state):
    """Normalise the sums of :func:`iacv_path` and assemble its result."""
    T = prob.T
    tracked = np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.intp)
    per = np.concatenate(losses) if losses else np.zeros((0, T + 1))
    std_error = None
    if scale != 1.0 and tracked.size:
        loss, std_error = _regression_estimate(prob, per, tracked, fitted, scale, state)
    else:
        loss = per.sum(axis=0) / prob.W
    if err is not None:
        err = err * (scale / prob.W)
    predictions = None
    if preds is not None:
        predictions = np.full((indices.shape[0], T + 1), np.nan)
        untracked = np.flatnonzero(prob.rho[indices] == 0)
        if untracked.size and full_predictions is not None:
            # rows of zero weight are not data: their full-data predictions
            predictions[untracked] = full_predictions(indices[untracked])
        for row, i in enumerate(indices.tolist()):
            if i in preds:
                predictions[row] = preds[i]
    return Bunch(loss=loss, std_error=std_error, error=err, predictions=predictions,
                 indices=indices,
                 coef=np.concatenate(coefs, axis=1) if coefs else None,
                 coef_indices=tracked, state=state)
