"""EigenPro kernel machines (Ma & Belkin 2017, 2019).

The model is ``c + f(x)``, ``f(x) = sum_j alpha_j k(x, x_j)`` over the
training rows and ``c`` the regressor's ``intercept_`` (the targets'
weighted mean, held fixed; zero for the classifier's one-hot scores); ``f``
is fitted to ``Y - c`` (written ``Y`` below) by mini-batch SGD on the
square loss from ``alpha = 0`` with EigenPro's Nystrom preconditioner: the
top ``q`` eigendirections of the kernel operator, estimated on a subsample
of ``M`` rows, are flattened to ``lambda_{q+1}``.
Its set-up (the preconditioner, the batch and step sizes) is
:mod:`skacv.kernel_methods._eigenpro_setup`. One step on a batch ``B`` of
``m`` draws with residuals ``g = f(X_B) - Y_B``:

    alpha[B] -= (eta / m) g
    alpha[S] += (eta / m) coef diag(d / lambda) phi(X_B)^T g

with ``phi(x) = k(x, X_S) coef`` the Nystrom eigenfunctions. This is SGD with
the *EigenPro kernel* ``k_P(x, z) = k(x, z) - sum_i (d_i/lambda_i) phi_i(x)
phi_i(z)`` (same RKHS, flatter spectrum, same interpolant); run to
convergence, ``f`` is the minimum-norm interpolant ``K^+ Y``. The low-rank
part of the EigenPro kernel is applied to the batch rows at every step and
to every row once an epoch (the fitted values are ``f + phi @ acc`` in
between). Sample weights are frequency weights: batches and the subsample
are draws from the multiset of rows repeated by their (integer) weights.
"""

import time
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._config import check_memory, format_bytes, path_memory_bytes
from .._policy import current_policies
from ..estimates.risk._sgd import epochs_stop, flag_against_gcv
from ..estimators._advice import warn_weight_scale
from ..estimators._base import COMMON_CONSTRAINTS, TrajectoryEstimator, store_params
from ..estimators._docs import documents_x
from ..exceptions import ConvergenceWarning, DivergenceError, UnreliableEstimateWarning
from ..utils._compat import Interval, StrOptions, _fit_context
from ..utils._validation import user_stacklevel
from ._eigenpro_docs import _DOC_ATTRIBUTES, _DOC_PARAMS
from ._eigenpro_setup import EigenProSetup
from ._kernels import KERNELS, Kernel, kernel_product, squared_norms


class _BaseEigenPro(EigenProSetup, TrajectoryEstimator):
    """Shared fit/predict of :class:`EigenProRegressor` and :class:`EigenProClassifier`."""

    _parameter_constraints: dict = {
        "kernel": [StrOptions(set(KERNELS)), callable],
        "bandwidth": [StrOptions({"median", "scale"}), Interval(Real, 0, None, closed="neither")],
        "kernel_params": [dict, None],
        "n_components": [StrOptions({"auto"}), Interval(Integral, 0, None, closed="left")],
        "subsample_size": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "batch_size": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "max_iter": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "n_probes": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left"), None],
        "precision": [StrOptions({"auto", "float32", "float64"})],
        **{k: COMMON_CONSTRAINTS[k] for k in ("step_size", "warm_start", "estimate_risk",
                                              "random_state", "verbose")},
    }

    # the risk chains are built online: estimate_risk and n_probes are protected
    _free_params = ("max_iter", "warm_start", "verbose")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def __init__(self, kernel="gaussian", *, bandwidth="median", kernel_params=None,
                 n_components="auto", subsample_size="auto", batch_size="auto",
                 step_size="auto", max_iter="auto", warm_start=False, estimate_risk=False,
                 n_probes="auto", precision="auto", random_state=None, verbose=0):
        store_params(self, locals())

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the kernel machine (or continue it, ``warm_start``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets of the regressor; class labels, of shape (n_samples,),
            of the classifier.
        sample_weight : array-like of shape (n_samples,), default=None
            Frequency weights: integer weights equal repeated rows (the
            batches are draws from the weighted rows).

        Returns
        -------
        self : object
        """
        return self._fit(X, y, sample_weight)

    # ------------------------------------------------------------------ fit
    def stores_path(self):
        """``False``: the epochs' models are kept in the dual (``predict_path``),
        not as ``coef_path_`` (:meth:`skacv.SearchProtocol.stores_path`)."""
        return False

    def _continues(self):
        """This fit continues the previous one (``warm_start``)."""
        if self.warm_start and self.max_iter == "auto":
            raise ValueError(
                "warm_start=True needs an integer max_iter (the total number of epochs); "
                "max_iter='auto' chooses it by the risk estimate in one fit."
            )
        return super()._continues() and getattr(self, "_state", None) is not None

    def _run_path(self, X, Y, sample_weight, warm, frozen):
        """Set up a new fit (or keep the previous one) and run the epochs."""
        policies = current_policies()
        if not warm:
            if self.estimate_risk or self.max_iter == "auto":  # epochs by the estimate
                warn_weight_scale(self, sample_weight, policies[1])
            self._kernel_setup(X, Y, sample_weight, policies)
        if self.max_iter == "auto":
            self._run_epochs(policies[1].eigenpro_auto_max_epochs, policies[1], auto=True)
        else:
            self._run_epochs(self.max_iter - self.n_iter_, policies[1])
        self._warn_stall(policies[1])

    def _warn_stall(self, statistics):
        """Warn where the training mse stopped falling near its start.

        Each epoch of SGD below the edge of stability lowers the expected
        training mse; one that rises above the lowest so far while the fit
        is still near its start means the sampling noise of the steps
        outweighs their descent (the flattened directions end inside the
        target's part: too few of them, or a cluster of eigenvalues split).
        """
        path = self.train_mse_path_
        rise, level = statistics.eigenpro_stall
        low = np.minimum.accumulate(path)
        up = np.flatnonzero(path[1:] > (1 + rise) * low[:-1])
        if up.size and low[-1] > level * path[0]:
            t = int(up[0]) + 1
            warnings.warn(
                f"EigenPro stalls: its training mse rose to {path[t]:.3g} at epoch {t} "
                f"(lowest before {low[t - 1]:.3g}, {path[0]:.3g} at the start) with "
                f"n_components_={self.n_components_} and batch_size_={self.batch_size_} "
                f"(bandwidth_={self.bandwidth_:.4g}). Use a smaller bandwidth "
                "(bandwidth='median'), or a larger n_components and batch_size.",
                ConvergenceWarning, stacklevel=user_stacklevel())

    def _run_epochs(self, n_epochs, statistics, auto=False):
        st, P = self._state, self.preconditioner_
        op, phi, rows_S, h = st.op, st.phi, st.rows_S, st.h
        op.ensure()
        alpha, f, Y = st.alpha, st.f, st.Y
        c = Y.shape[1]
        limit = statistics.divergence_factor * max(st.mse0, np.finfo(np.float64).tiny)
        mse_path = list(self.train_mse_path_)
        tracker = self._tracker
        n_epochs, capped = self._affordable_epochs(tracker, n_epochs, auto)
        tic = time.perf_counter()
        q, scale, unit = P.n_components_, P.scale_[:, None], st.w is None
        if tracker is not None and q and tracker.phi is None:
            tracker.set_low_rank(phi)
        # the EigenPro correction deferred to the end of the epoch: the fitted
        # values are f + phi @ acc and the coefficients alpha + E_S coef @ acc
        # (O(m q) a step for the batch rows, not O(n q) for every row)
        acc = np.zeros((q, c))
        corr = None
        for _ in range(n_epochs):
            with np.errstate(over="ignore", invalid="ignore"):
                for rows, counts, positions in st.sampler.epoch(self._rng):
                    g = f[rows] - Y[rows]
                    phi_B = phi[rows] if q else None
                    low = None
                    if q and tracker is not None:  # one product for both deferred terms
                        both = phi_B @ np.hstack([acc, tracker.acc])
                        g += both[:, :c]
                        low = both[:, c:]
                    elif q:
                        g += phi_B @ acc
                    if not unit:
                        g *= counts[:, None]
                    alpha[rows] -= h * g  # rows are distinct (counts carry repeats)
                    rhs = g if tracker is None else np.hstack([g, tracker.rhs(rows, counts,
                                                                              low)])
                    KB = op.matmul(rows, rhs)  # K[:, B] @ rhs; K_P's low-rank part in corr
                    KB *= h
                    if q:  # (q, c + probes)
                        corr = phi_B.T @ rhs
                        corr *= h * scale
                        acc += corr[:, :c]
                    f -= KB[:, :c]
                    if tracker is not None:
                        tracker.step(rows, counts, h, KB[:, c:], -g / counts[:, None],
                                     positions, None if corr is None else corr[:, c:])
                    self.n_steps_ += 1
                if q:
                    f += phi @ acc
                    alpha[rows_S] += P.coef_ @ acc
                    acc[:] = 0.0
            self.n_iter_ += 1
            check_memory(8 * alpha.size * (self.n_iter_ + 1), "the coefficients of every epoch",
                         "Lower max_iter. ")
            self._coef_path.append(alpha.copy())
            if tracker is not None:
                tracker.epoch_end(Y - f)
            mse = st.train_mse(f)
            mse_path.append(mse)
            if not np.isfinite(mse) or mse > limit:
                m, lam_p = self.batch_size_, self.top_eigenvalue_
                raise DivergenceError(
                    f"EigenPro diverges at epoch {self.n_iter_} (training mse {mse:.3g} "
                    f"against {st.mse0:.3g} at the start) with step_size="
                    f"{self.step_size_:.6g} and batch_size={m}. Use step_size='auto' or a "
                    "smaller step: SGD is stable below 2 m / (beta + (m - 1) lambda_P) = "
                    f"{2 * m / (self.beta_ + (m - 1) * lam_p):.4g}."
                )
            if self.verbose:
                print(f"[EigenPro] epoch {self.n_iter_}/{self.max_iter}  train mse {mse:.5g}  "
                      + (f"risk {tracker.risks[-1] / c:.5g}  " if tracker is not None else "")
                      + f"{time.perf_counter() - tic:.1f}s")
            if auto and epochs_stop(*self._risk_and_flags(tracker, mse_path), statistics):
                capped = False
                break
        self._warn_capped(tracker, capped)
        self.train_mse_path_ = np.array(mse_path)
        self.selected_iter_ = self.n_iter_
        if tracker is not None:
            risk, ok, _ = self._risk_and_flags(tracker, mse_path)
            if auto and ok[-1]:  # else the ridgeless limit: the last epoch
                self.selected_iter_ = int(np.argmin(np.where(ok, risk, np.inf)))
            self.risk_leverage_spread_ = spread = np.array(tracker.spreads)
            self.risk_path_, self.risk_reliable_ = risk, self._flag_spread(
                ok, spread, np.array(tracker.spread_se), statistics)
        self._set_coef(self._coef_path[self.selected_iter_])
        op.release()
        if tracker is None:
            for name in ("risk_path_", "risk_reliable_", "risk_leverage_spread_", "n_probes_"):
                if hasattr(self, name):
                    delattr(self, name)
        if not self.warm_start:  # the chains are only needed to continue the path
            self._tracker = None

    @staticmethod
    def _affordable_epochs(tracker, n_epochs, auto):
        """``(epochs, capped)``: the epochs whose risk estimate fits within
        ``path_memory_limit``; for ``max_iter="auto"`` the most that fit
        (``capped``), else all of them or a refusal with the bytes needed."""
        if tracker is None:
            return n_epochs, False
        steps = tracker.t + n_epochs * tracker.S
        limit = path_memory_bytes()
        if not auto or tracker.memory_bytes(steps) <= limit:
            tracker.check_memory(steps, "Lower max_iter, raise batch_size or set "
                                 "estimate_risk=False. ")
            return n_epochs, False
        fit = max(1, (int(np.sqrt(limit / tracker.memory_bytes(0))) - 1 - tracker.t) // tracker.S)
        while fit > 1 and tracker.memory_bytes(tracker.t + fit * tracker.S) > limit:
            fit -= 1
        tracker.check_memory(tracker.t + fit * tracker.S, "Raise batch_size. ")
        return fit, True

    def _warn_capped(self, tracker, capped):
        """Warn where ``max_iter="auto"`` ran the most epochs the memory allows."""
        if capped:
            warnings.warn(
                f"max_iter='auto' stopped at {self.n_iter_} epochs of {tracker.S} steps: the "
                "risk estimate of more would need more than path_memory_limit="
                f"{format_bytes(path_memory_bytes())} ({tracker.memory_bytes(tracker.t):.3g} "
                "bytes now, growing with the square of the steps). Raise batch_size, or the "
                "limit with skacv.set_config(path_memory_limit=<MiB>).",
                ConvergenceWarning, stacklevel=user_stacklevel())

    @staticmethod
    def _risk_and_flags(tracker, mse_path):
        """``(risk_path, reliable, train_mse)`` averaged over the outputs."""
        c = tracker.c
        risk, mse = tracker.risk() / c, np.asarray(mse_path)
        ok = flag_against_gcv(risk, tracker.degrees_of_freedom(), mse, tracker.reliable(),
                              tracker.statistics)
        return risk, ok, mse

    def _flag_spread(self, ok, spread, se, statistics):
        """``ok`` and ``False`` from the first epoch whose leverage spread exceeds
        ``sgd_leverage_spread`` beyond its probe noise (``se``, standard errors),
        with a warning: these flags do not move the epochs or the choice (the
        trace form's error there is a bias of the level, slowly varying over
        the epochs)."""
        limit, z = statistics.sgd_leverage_spread
        # no standard error (two probes; NaN with one): no margin, no flag
        se = np.where(np.isfinite(se), se, np.inf)
        with np.errstate(invalid="ignore"):
            wide = np.logical_or.accumulate(spread - z * se >= limit)
        t = int(np.argmax(wide))
        if wide.any() and ok[t]:
            warnings.warn(
                f"{type(self).__name__}: the risk estimate's value is flagged in "
                f"risk_reliable_ from epoch {t} on: the diagonal of the fit's smoother "
                f"spreads ({spread[t]:.3g} +- {se[t]:.2g} in risk_leverage_spread_, above "
                f"{limit:g}), which the estimate's trace form does not see; there it "
                "underestimated the test error by 14-47 % (docs/benchmarks.rst). "
                "max_iter='auto' runs and chooses the epoch as without this flag; for the "
                "test error's level use held-out data.",
                UnreliableEstimateWarning, stacklevel=user_stacklevel())
        return ok & ~wide

    def _set_coef(self, alpha):
        self.dual_coef_ = alpha

    # -------------------------------------------------------------- predict
    def _scores(self, X, alpha):
        """``offset + k(X, X_fit_) @ alpha`` for ``alpha`` of shape
        (n_centres, k, T), shape (len(X), k, T)."""
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        kern = Kernel(self.kernel, self.bandwidth_, self.kernel_params)
        Xf, (n, k, T) = self.X_fit_, alpha.shape
        F = kernel_product(kern, X, Xf, alpha.reshape(n, -1), squared_norms(Xf))
        return F.reshape(F.shape[0], k, T) + self._offset[:, None]

    def _decision(self, X):
        """Scores of ``dual_coef_``, shape (len(X), k)."""
        check_is_fitted(self)
        return self._scores(X, self.dual_coef_.reshape(self.X_fit_.shape[0], -1, 1))[..., 0]

    def _decision_path(self, X):
        """Scores of every epoch, shape (len(X), n_outputs, n_iter_ + 1)."""
        return self._scores(X, self.dual_coef_path_)

    @documents_x()
    def staged_predict(self, X):
        """Yield the predictions after epochs ``0, 1, ..., n_iter_``.

        Yields
        ------
        y : ndarray of shape (n_samples,) or (n_samples, n_outputs)
            Column ``t`` of :meth:`predict_path` (the classes for the
            classifier).
        """
        F = self.predict_path(X)
        for t in range(F.shape[-1]):
            yield F[..., t]

    @property
    def dual_coef_path_(self):
        """``alpha`` after every epoch, shape ``(n_centres, n_outputs, n_iter_ + 1)``."""
        check_is_fitted(self)
        return np.stack(self._coef_path, axis=-1)


class EigenProRegressor(RegressorMixin, _BaseEigenPro):
    __doc__ = """Kernel regression trained by EigenPro, preconditioned SGD (ridgeless).

    Minimises ``sum_i w_i ||f(x_i) - y_i||^2`` over ``f(x) = c + sum_j
    alpha_j k(x, x_j)`` by EigenPro 2 iterations (Ma & Belkin 2017, 2019)
    from ``alpha = 0``, with ``c`` (``intercept_``) the weighted mean of
    ``y``, held fixed: the path starts at the mean, so early stopping
    shrinks towards it whatever the target's level (from zero, a level of
    1000 on a function of spread 0.5 stayed unfitted: 170 times the test
    error). The number of epochs
    ``max_iter`` is the only regularisation, and the limit is the
    interpolant ``c + K^+ (y - c)`` (``KernelRidge(alpha -> 0)`` on the
    centred target). The risk estimate takes ``c`` as fixed (its variance,
    ``1 / n`` of the noise's, is not in ``risk_path_``). Cost: ``O(n^2
    d)`` per epoch, memory ``O(n (d + q + batch))``.
    """ + _DOC_PARAMS + _DOC_ATTRIBUTES + """
    intercept_ : float or ndarray of shape (n_outputs,)
        ``c``, the weighted mean of the training targets, which every
        epoch's prediction adds (epoch 0's prediction).

    Examples
    --------
    >>> import numpy as np
    >>> from skacv import EigenProRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, (500, 2))
    >>> y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(500)
    >>> est = EigenProRegressor(bandwidth=0.5, max_iter=5, random_state=0).fit(X, y)
    >>> est.score(X, y) > 0.95
    True
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def _validate_xy(self, X, y, reset):
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64,
                             multi_output=True, y_numeric=True, reset=reset)
        y = np.asarray(y, dtype=np.float64)
        self._y_1d = y.ndim == 1
        return X, y.reshape(y.shape[0], -1)

    def _target_level(self, Y, w):
        """The weighted mean of the training targets, per output: the path
        starts at it (not at zero) and ``predict`` adds it."""
        return np.average(Y, axis=0, weights=w)

    def _set_coef(self, alpha):
        self.dual_coef_ = alpha[:, 0].copy() if self._y_1d else alpha.copy()
        self.intercept_ = float(self._offset[0]) if self._y_1d else self._offset.copy()

    @documents_x()
    def predict(self, X):
        """Predict ``f(x) = intercept_ + k(x, X_fit_) @ dual_coef_``.

        Returns
        -------
        y : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        """
        out = self._decision(X)
        return out[:, 0] if self._y_1d else out

    @documents_x()
    def predict_path(self, X):
        """Predictions after every epoch.

        Returns
        -------
        Y : ndarray of shape (n_samples, n_iter_ + 1) or (n_samples, n_outputs, n_iter_ + 1)
            Column ``t``: the prediction after epoch ``t`` (0: the start,
            ``intercept_``);
            column ``selected_iter_`` is :meth:`predict`'s.
        """
        F = self._decision_path(X)
        return F[:, 0] if self._y_1d else F


class EigenProClassifier(ClassifierMixin, _BaseEigenPro):
    __doc__ = """Kernel classifier trained by EigenPro: one-hot regression and argmax.

    Regresses the one-hot encoding of the labels (0/1 targets, one column
    per class) with the EigenPro iterations of :class:`EigenProRegressor`
    and predicts the class of the largest score. There is no
    ``predict_proba``: the scores are least-squares fits, not probabilities.
    """ + _DOC_PARAMS + _DOC_ATTRIBUTES + """
    classes_ : ndarray of shape (n_classes,)
        Classes seen with positive weight.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from skacv import EigenProClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> clf = EigenProClassifier(bandwidth=3.0, max_iter=3, random_state=0)
    >>> clf.fit(X[:1000] / 16, y[:1000]).score(X[1000:] / 16, y[1000:]) > 0.95
    True
    """

    def _validate_xy(self, X, y, reset):
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, reset=reset)
        check_classification_targets(y)
        return X, y

    def _encode_target(self, y, sample_weight):
        seen = y if sample_weight is None else y[sample_weight > 0]
        classes = np.unique(seen)
        self._fit_classes = classes
        return (y[:, None] == classes[None, :]).astype(np.float64), classes

    def _run_path(self, X, Y, sample_weight, warm, frozen):
        self.classes_ = self._fit_classes
        super()._run_path(X, Y, sample_weight, warm, frozen)

    @documents_x()
    def decision_function(self, X):
        """One-hot regression scores.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            Binary problems: score of ``classes_[1]`` minus that of
            ``classes_[0]``.
        """
        F = self._decision(X)
        if F.shape[1] == 2:
            return F[:, 1] - F[:, 0]
        return F[:, 0] if F.shape[1] == 1 else F

    @documents_x()
    def predict(self, X):
        """Class of the largest one-hot score.

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        F = self._decision(X)
        return self.classes_[np.argmax(F, axis=1)]

    @documents_x()
    def predict_path(self, X):
        """Predicted classes after every epoch.

        Returns
        -------
        y : ndarray of shape (n_samples, n_iter_ + 1)
            Column ``t``: the classes after epoch ``t``; column
            ``selected_iter_`` is :meth:`predict`'s.
        """
        return self.classes_[np.argmax(self._decision_path(X), axis=1)]
