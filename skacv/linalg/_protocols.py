"""The protocols of the designs the loops read, with their declared
capabilities: :class:`LinearProducts` for the fit loop
(:func:`~skacv.iterations._path.run_trajectory`) and the estimates,
:class:`BlockProducts` for the block of stacked fold paths
(:func:`~skacv.iterations._path.run_normal_block`). A new form of the
products (another storage, another machine) implements one of them; the
loops read nothing else.
"""

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class LinearProducts(Protocol):
    """What the fit loop (:func:`~skacv.iterations._path.run_trajectory`) and
    the estimates read of a design: its sizes and precision, the products
    with ``X~`` and ``X~^T``, a few columns, the step size's eigenvalue, and
    declared capabilities. :class:`Design` (``X~`` itself) and
    :class:`CovarianceForm` (``X~^T X~``, few features) have it.

    Capabilities
    ------------
    fuses : bool
        The loop may read ``X~`` once a step by row panels
        (:meth:`Design.panel_products`); ``False`` for every other form.
    sparse : bool
        ``X~`` is a centred sparse matrix (products only, no dense rows).
    policy, statistics : SpeedPolicy, StatisticalPolicy
        The policies of the computation, captured with the design (what the
        products and the estimates on it read).
    """

    n_samples: int
    n_features: int
    n_eff: float
    dtype: np.dtype
    fuses: bool
    sparse: bool
    policy: object
    statistics: object

    def matvec(self, b): ...

    def rmatvec(self, r): ...

    def columns_product(self, idx, c): ...

    def lipschitz(self): ...


@runtime_checkable
class BlockProducts(Protocol):
    """What the block of K stacked fold paths
    (:func:`~skacv.iterations._path.run_normal_block`) reads of its design:
    sizes, precision, each column's weight ``n_eff`` (shape (K,)), the
    response's target at the iterates, one step's fitted values, gradients
    and residual sum of squares, whether it computes fitted values, and
    where its pass reads the points (``None``: wherever they are).
    :class:`~skacv.model_selection._fold_designs.FoldDesigns` (one pass over ``X~``)
    and :class:`~skacv.model_selection._fold_designs.FoldCovariance` (the folds'
    Gram matrices) have it."""

    n_samples: int
    n_features: int
    n_eff: np.ndarray
    dtype: np.dtype
    computes_fitted: bool

    def target(self, Y, V): ...

    def fitted_and_gradient(self, V, target, held_out=True): ...

    def normal_product(self, V, Y): ...

    def point_buffer(self): ...

    def workers(self): ...
