"""The covariance form of full-batch least squares (scikit-learn's
``precompute``): the fit loop's products with the p x p ``X~^T X~`` instead
of the n x p ``X~`` (:class:`CovarianceForm`), and when it costs less
(:func:`covariance_form_pays`, the speed policy's cost model).
"""

import numpy as np

from ._linalg import top_eigenvalue


def covariance_form_pays(design, n_steps):
    """Whether ``n_steps`` steps of full-batch least squares cost less in
    the :class:`CovarianceForm` of ``design`` (see
    the policy's ``covariance_max_features``, ``covariance_gemm_advantage``)."""
    n, p = design.n_samples, design.n_features
    policy = design.policy
    if n_steps < 1 or p > min(n, policy.covariance_max_features):
        return False
    gram = 0.0 if ("gram", "features") in design.cache else (
        2.0 * n * p * p / policy.covariance_gemm_advantage)
    return gram + 2.0 * p * p * n_steps < 4.0 * n * p * n_steps


class CovarianceForm:
    """The fit loop's products of full-batch least squares in the
    covariance form (docs/architecture.rst): ``C = X~^T X~`` in place of
    ``X~`` (the "fitted values" ``C x``), the target ``c = X~^T y~`` and the
    identity as :meth:`rmatvec`; the divergence monitor reads the norm of
    ``X~^T (y~ - X~ x)`` (:class:`~skacv.iterations._datafits.NormalEquations`).

    Parameters
    ----------
    design : Design
    idx : array-like of int, default=None
        Only these columns of ``X~`` (a working set of
        :func:`~skacv.risk_alpha_path`).
    """

    fuses = False
    sparse = False

    def __init__(self, design, idx=None):
        self.base = design
        self.policy, self.statistics = design.policies
        self.dtype = design.dtype
        self.n_eff = design.n_eff
        # X~^T X~ / n_eff (cached), scaled back, in the fit's precision; kept
        # by the design for a warm-started refit
        if "covariance" not in design.cache:
            C = np.asarray(design.gram(side="features") * design.n_eff, dtype=design.dtype)
            C.flags.writeable = False
            design.cache["covariance"] = C
        self.idx = None if idx is None else np.asarray(idx)
        # the columns idx only (a working set of the Lasso path): C[idx][:, idx]
        self.C = design.cache["covariance"] if idx is None else (
            design.cache["covariance"][np.ix_(self.idx, self.idx)])
        self.n_samples = self.n_features = self.C.shape[0]

    def target(self, y_tilde):
        """``c = X~^T y~``, the target of the loop (on the columns ``idx``)."""
        c = np.asarray(self.base.rmatvec(y_tilde), dtype=self.dtype)
        return c if self.idx is None else c[self.idx]

    def lipschitz(self):
        """Largest eigenvalue of ``X~^T X~ / n_eff`` (of the columns ``idx``;
        :func:`~skacv.linalg._linalg.top_eigenvalue`)."""
        return max(top_eigenvalue(np.asarray(self.C, dtype=np.float64) / self.n_eff,
                                 policy=self.policy), 0.0)

    def matvec(self, b):
        return self.C @ b

    def rmatvec(self, r):
        return r

    def columns_product(self, idx, c):
        """``C[:, idx] @ c``: rows of the symmetric ``C`` (contiguous)."""
        return np.asarray(c, dtype=self.C.dtype) @ self.C[np.asarray(idx)]
