"""The intercept as a coordinate of the parameter, for losses whose intercept
is not a mean (logistic, Huber): :class:`InterceptColumnMixin`."""

import numpy as np
import scipy.sparse as sp

from ..linalg._design import Design


def _size(squares, n_eff):
    """The largest root mean square of the centred columns (``1`` where every
    column is constant)."""
    size = float(np.sqrt(squares.max() / n_eff)) if squares.size else 0.0
    return size if np.isfinite(size) and size > 0 else 1.0


class InterceptColumnMixin:
    """The intercept as the last, unpenalised coordinate of the parameter, for
    losses whose intercept is not a mean (logistic, Huber).

    The steps run on the design ``[X - 1 m^T, s 1]``: ``m`` the columns'
    weighted means (subtracted in every product for a sparse ``X``) and ``s``
    the largest root mean square of the centred columns (read from the
    design's own column norms), in the coordinates ``(w, c)`` with intercept
    ``b = s c - m^T w``. The minimiser is the one of ``[X, 1]``; the path
    does not depend on where the features' origin lies, and the intercept
    moves as fast as the fastest feature's coordinate (on ``[X, 1]`` a
    feature of mean 10 left it, and the path, near zero). On standardised
    ``X`` (``m = 0``, ``s = 1``) both are the same. ``(m, s)`` belong to the
    path's set-up (:class:`~skacv.estimators._setup.PathSetup`): the
    brute-force left-out refits hold them fixed, as they hold the step size,
    so they are the same algorithm on fewer rows.
    """

    def _augment(self, X, frame):
        """``[X, s 1]`` for ``frame = (m, s)`` (``X`` alone without
        intercept): a new array (dense) or CSR matrix; the design subtracts
        ``m``."""
        if not self.fit_intercept:
            return X
        size = frame[1]
        if sp.issparse(X):
            column = sp.csr_matrix(np.full((X.shape[0], 1), size, dtype=X.dtype))
            return sp.hstack([X, column], format="csr", dtype=X.dtype)
        X = np.asarray(X)
        out = np.empty((X.shape[0], X.shape[1] + 1), dtype=X.dtype)
        out[:, :-1] = X
        out[:, -1] = size
        return out

    def _make_design(self, X, sample_weight, setup=None):
        """The design of the steps; ``setup``'s frame where it has one (a
        warm or left-out refit's), else this data's."""
        frame = None if setup is None else setup.frame
        if not self.fit_intercept:
            design = Design(X, sample_weight, fit_intercept=False)
            design.intercept_frame = None  # (read by _new_setup)
            return design
        if frame is None:  # the columns' weighted means; the size from the design
            w = (np.ones(X.shape[0]) if sample_weight is None
                 else np.asarray(sample_weight, dtype=np.float64))
            frame = (np.asarray(X.T @ w, dtype=np.float64).ravel() / w.sum(), None)
        offset, size = frame
        design = Design(self._augment(X, (offset, 1.0 if size is None else size)),
                        sample_weight, fit_intercept=False, copy=False,
                        x_offset=np.append(offset, 0.0))
        if size is None:
            self._size_intercept_column(design)
        else:
            design.intercept_frame = frame
        return design

    @staticmethod
    def _size_intercept_column(design):
        """Set the intercept column (made of ones) to the size of the largest
        centred feature, read from the design's column norms (dense: the
        centred copy; sparse: their expansion), and complete those norms."""
        norms = np.array(design.column_sq_norms())
        size = _size(norms[:-1], design.n_eff)
        if design.sparse:  # (the column's stored ones; rows are weighted in the products)
            X = design.X
            X.data[X.indices == X.shape[1] - 1] = size
        else:
            design.X[:, -1] *= size
        norms[-1] *= size * size
        norms.flags.writeable = False
        design.cache["column_sq_norms"] = norms
        design.intercept_frame = (design.x_offset[:-1].astype(np.float64), size)

    def _new_setup(self, design, datafit, penalty):
        setup = super()._new_setup(design, datafit, penalty)
        setup.frame = design.intercept_frame
        return setup

    def _fit_rows(self, X):
        return super()._fit_rows(self._augment(X, self._setup.frame))

    def _store_path(self, path, design, offset):
        """The paths of ``w`` and ``b = s c - m^T w + offset`` from the path of
        ``(w, c)`` (``offset``: the target's, where the path starts);
        ``coef_`` and ``intercept_`` the last iterate's."""
        p = path.shape[0] - int(self.fit_intercept)
        self.coef_path_ = np.asfortranarray(path[:p])
        if self.fit_intercept:
            m, s = design.intercept_frame
            # (c kept as it ran: a warm start continues from it bit for bit)
            self._intercept_coordinate_path = path[p].copy()
            self.intercept_path_ = (s * path[p].astype(np.float64) - m @ path[:p]
                                    + float(offset)).astype(path.dtype)
        else:
            self.intercept_path_ = np.zeros(path.shape[1], dtype=path.dtype)
        self.coef_ = self.coef_path_[:, -1].copy()
        self.intercept_ = self.intercept_path_[-1]

    def _fit_coef_path(self):
        """Iterates in the fit's coordinates ``(w, c)``, shape (n_coef, n_iter_ + 1)."""
        if self.fit_intercept:
            return np.vstack([self.coef_path_, self._intercept_coordinate_path[None, :]])
        return self.coef_path_
