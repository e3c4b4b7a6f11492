"""The architecture holds: layers, the warm-start guard, the extension point.

* every module imports only from lower layers (docs/architecture.rst), and
  never another skacv module inside a function;
* a warm-started refit after a change of any protected parameter raises, for
  every public estimator; the list of parameters comes from ``get_params``, so
  a parameter added later is covered;
* brute-force leave-one-out of EigenPro's preconditioned gradient descent
  holds the preconditioner fixed and equals IACV;
* an algorithm written outside the package as an :class:`~skacv.Iteration`
  fits, and its risk and leave-one-out estimates equal brute force.
"""

import ast
import inspect
import pathlib

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.utils._param_validation import StrOptions, generate_valid_param, make_constraint

import skacv
from skacv.estimates.risk._estimate import risk_from_memory
from skacv.estimators._base import TrajectoryEstimator
from skacv.utils._validation import same_param

PACKAGE = pathlib.Path(skacv.__file__).parent

# The subpackages, bottom up: a module imports only from a lower subpackage or,
# inside its own subpackage, from a lower module layer (MODULE_LAYERS). The top
# level holds the settings and errors (below everything) and the command line
# (above everything). docs/architecture.rst shows the same table.
SUBPACKAGE_LAYERS = [
    ["exceptions", "_config", "_statistics", "_trace"],
    ["_policy"],
    ["utils"],
    ["linalg"],
    ["iterations"],
    ["estimates"],
    ["estimators"],
    ["kernel_methods", "model_selection"],
    ["display", "_demo_checks"],
    ["_demo"],
    ["__main__", "__init__"],
]
SUBPACKAGE_LAYER = {name: i for i, names in enumerate(SUBPACKAGE_LAYERS) for name in names}

MODULE_LAYERS = {
    "utils": [["_compat"], ["_validation", "_parallel"]],
    "linalg": [["_linalg", "_blas", "_sampling", "_protocols", "_memory"], ["_step_bound"],
               ["_dask", "_design"], ["_copies", "_covariance"]],
    "iterations": [["_penalties", "_datafits"], ["_step"],
                   ["_iterations", "_preconditioning", "_screening"], ["_path", "_metric"]],
    "estimates": [
        ["loo._live_rows"],
        ["risk._state", "risk._readout", "risk._uq", "risk._result",
         "risk._probes", "loo._refit", "loo._track"],
        ["risk._spectral", "risk._propagate", "risk._curvature", "risk._reliability",
         "loo._iacv", "loo._approx"],
        ["risk._start", "risk._settled"],
        ["risk._chains", "risk._pooled"],
        ["risk._engine"],
        ["risk._forms"],
        ["risk._estimate"],
        ["risk._sgd"],
        ["risk.__init__", "loo.__init__"],
    ],
    "estimators": [["_advice", "_docs", "_setup", "_options"], ["_protocol", "_dask_fit"],
                   ["_base", "_path_methods"], ["_multitarget", "_intercept_column"],
                   ["_lasso", "_ridge", "_logistic", "_huber"]],
    "kernel_methods": [["_kernels", "_eigenpro_docs"], ["_eigenpro_setup"], ["_eigenpro"]],
    "model_selection": [["_fold_designs", "_fold_screening", "_converged_risk", "_delegate"],
                        ["_kfold", "_lasso_spaces", "_lasso_descent"],
                        ["_lasso_path", "_lasso_loo"],
                        ["_alpha_path", "_criteria", "_search_params"], ["_stages"],
                        ["_kfold_search", "_results", "_dask_search"], ["_candidates"],
                        ["_path_search"],
                        ["_mixing_search"], ["_selection"]],
    "display": [["_plot"]],
}


def _modules():
    """Dotted names (relative to skacv) of every module of the package."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        names.append(".".join(parts))
    return names


def _place(module):
    """(subpackage layer, module layer) of a dotted module name."""
    head, _, rest = module.partition(".")
    if not rest:
        return SUBPACKAGE_LAYER[head], 0
    if rest == "__init__":
        return SUBPACKAGE_LAYER[head], len(MODULE_LAYERS[head])
    layer = {m: i for i, ms in enumerate(MODULE_LAYERS[head]) for m in ms}
    return SUBPACKAGE_LAYER[head], layer[rest]


def _is_module(name):
    path = PACKAGE / name.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _skacv_imports(tree, module):
    """(dotted module imported, line, inside a function) of every skacv import."""
    package = module.split(".")[:-1]
    out = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.ImportFrom) and child.level >= 1:
                base = package[: len(package) - child.level + 1]
                target = ".".join(base + ([child.module] if child.module else []))
                for alias in child.names:
                    name = f"{target}.{alias.name}" if target else alias.name
                    out.append((name if _is_module(name) else target, child.lineno, in_function))
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in child.names] if isinstance(child, ast.Import) \
                    else [child.module or ""]
                for name in names:
                    if name.startswith("skacv."):
                        out.append((name[len("skacv."):], child.lineno, in_function))
            visit(child, inside)

    visit(tree, False)
    return out


def test_every_module_has_a_layer():
    for module in _modules():
        head, _, rest = module.partition(".")
        assert head in SUBPACKAGE_LAYER, f"add {head} to SUBPACKAGE_LAYERS and the docs' table"
        if rest and rest != "__init__":
            listed = {m for ms in MODULE_LAYERS[head] for m in ms}
            assert rest in listed, f"add {module} to MODULE_LAYERS and docs/architecture.rst"


#: no module of the package above this many lines (one read; 50 below the
#: 700-line cap, so that no module sits at the edge of it), with the
#: complexity cap of ruff's C901 (pyproject.toml) the house's size rules
MAX_MODULE_LINES = 650


def test_every_module_fits_in_one_read():
    long = {m: n for m in _modules()
            if (n := len((PACKAGE / (m.replace(".", "/") + ".py")).read_text().splitlines()))
            > MAX_MODULE_LINES}
    assert not long, f"split these modules by meaning (lines): {long}"


@pytest.mark.parametrize("module", _modules())
def test_imports_point_down(module):
    tree = ast.parse((PACKAGE / (module.replace(".", "/") + ".py")).read_text())
    package, here = module.partition(".")[0], _place(module)
    for name, line, in_function in _skacv_imports(tree, module):
        assert not in_function, f"{module}.py:{line} imports {name} inside a function"
        if name in MODULE_LAYERS:  # a subpackage's public names
            there = (SUBPACKAGE_LAYER[name], -1)
        else:
            there = _place(name)
        if name.partition(".")[0] == package and package in MODULE_LAYERS:
            assert there[1] < here[1], f"{module}.py:{line} imports {name}, a module not below it"
        else:
            assert there[0] < here[0], (
                f"{module}.py:{line} imports {name}, which is not in a lower subpackage")


def test_architecture_page_shows_the_real_layers():
    """The layer table of docs/architecture.rst is SUBPACKAGE_LAYERS."""
    page = (PACKAGE.parent / "docs" / "architecture.rst").read_text()
    rows = {}
    for line in page.split(".. code-block:: text", 1)[1].split("\n\n", 2)[1].splitlines():
        number, _, rest = line.strip().partition(" ")
        if number.isdigit():
            names = rest.strip().split("  ")[0]
            rows[int(number)] = sorted(n.strip().rstrip("/") for n in names.split(","))
    assert rows == {i: sorted(names) for i, names in enumerate(SUBPACKAGE_LAYERS)}


def test_private_scikit_learn_api_only_in_compat():
    for path in PACKAGE.rglob("*.py"):
        if path.stem == "_compat":
            continue
        text = path.read_text()
        for private in ("_param_validation", "_fit_context", "_check_sample_weight",
                        "_raise_for_params", "_routing_enabled"):
            for line in text.splitlines():
                if line.lstrip().startswith(("from sklearn", "import sklearn")):
                    assert private not in line, f"{path.name}: {line.strip()}"


# ----------------------------------------------------------------------------
# the warm-start guard, generated from the parameters
# ----------------------------------------------------------------------------


def _estimators():
    objects = [getattr(skacv, name) for name in skacv.__all__]
    return [o for o in objects if inspect.isclass(o) and issubclass(o, TrajectoryEstimator)]


def _data(cls):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 6))
    y = X[:, 0] + 0.5 * rng.standard_normal(40)
    if "Classifier" in cls.__name__ or "Logistic" in cls.__name__:
        y = (y > 0).astype(int)
    return X, y


# alternative values where a constraint alone does not give a usable one
_ALTERNATIVES = {
    "alpha": [0.5, 0.25],
    "l1_ratio": [0.7, 0.3],
    "kernel": ["laplacian", "gaussian"],
    "kernel_params": [{"nu": 2.5}, None],
    "step_schedule": [np.ones(50) * 0.5, None],
    "subsample_size": [30, "auto"],
    "batch_size": [7, 8],
    "n_components": [2, 3],
    "step_size": [0.01, 0.02],
    "momentum": [0.5, 0.3],
    "bandwidth": [2.0, 3.0],
    "risk_options": [{"chain_dtype": "float64"}, None],
}


def _another_value(est, name, value):
    """A valid value of parameter ``name`` other than ``value``."""
    candidates = list(_ALTERNATIVES.get(name, []))
    for constraint in est._parameter_constraints.get(name, []):
        if isinstance(constraint, StrOptions):
            candidates.extend(sorted(constraint.options))
        try:
            candidates.append(generate_valid_param(make_constraint(constraint)))
        except (NotImplementedError, ValueError, TypeError):
            pass
    if isinstance(value, bool):
        candidates.insert(0, not value)
    for c in candidates:
        if not same_param(c, value) and not isinstance(c, skacv.Iteration):
            return c
    return None


@pytest.mark.parametrize("cls", _estimators(), ids=lambda c: c.__name__)
def test_changing_a_protected_parameter_stops_a_warm_start(cls):
    X, y = _data(cls)
    base = cls(max_iter=3, warm_start=True)
    free = set(cls._free_params)
    protected = [k for k in base.get_params(deep=False) if k not in free]
    assert protected, "every estimator has parameters that define its path"
    for name in protected:
        est = clone(base).fit(X, y)
        new = _another_value(est, name, est.get_params()[name])
        assert new is not None, f"teach this test a second valid value of {name!r}"
        est.set_params(**{name: new, "max_iter": 5})
        with pytest.raises(ValueError, match=rf"cannot continue a path after \['{name}'\]"):
            est.fit(X, y)
    # free parameters do not stop it, and the path continues
    est = clone(base).fit(X, y)
    est.set_params(max_iter=5, verbose=0).fit(X, y)
    assert est.n_iter_ == 5


def test_logistic_step_schedule_is_protected():
    """The former hand-written list forgot ``step_schedule``: a warm refit with
    another schedule silently continued the path."""
    X, y = _data(skacv.TrajectoryLogisticRegression)
    est = skacv.TrajectoryLogisticRegression(max_iter=5, warm_start=True,
                                             step_schedule=np.ones(20)).fit(X, y)
    est.set_params(step_schedule=np.full(20, 0.5), max_iter=10)
    with pytest.raises(ValueError, match="step_schedule"):
        est.fit(X, y)


# ----------------------------------------------------------------------------
# leave-one-out of preconditioned gradient descent
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_exact_loo_of_eigenpro_holds_the_preconditioner_fixed(fit_intercept):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((30, 12)) * np.r_[4, 3, 2, np.ones(9)]
    y = X[:, 0] - X[:, 1] + rng.standard_normal(30)
    est = skacv.IterativeRidge(alpha=0.5, solver="eigenpro", n_components=3, max_iter=15,
                               fit_intercept=fit_intercept, estimate_risk=False,
                               estimate_loo=True, random_state=0).fit(X, y)
    ref = skacv.exact_loo_path(est, X, y)
    np.testing.assert_allclose(est.loo_path_, ref, rtol=1e-8)


# ----------------------------------------------------------------------------
# an algorithm written outside the package
# ----------------------------------------------------------------------------


class DampedFISTA(skacv.Iteration):
    """Proximal gradient with a constant extrapolation (not in skacv)."""

    name = "damped_fista"

    def beta(self, k):
        return 0.5


def _brute_force_memory_matrix(X, y, eta, alpha, T):
    """``A[t, s] = tr(X dx^t / dy^(s))`` by perturbing the response of the
    gradient at ``v^s`` sample by sample (exact: the map is piecewise affine)."""
    n, p = X.shape

    def run(dy=None, s=-1):
        x = x_prev = v = np.zeros(p)
        xs = [x]
        for k in range(1, T + 1):
            yk = y if (dy is None or k - 1 != s) else y + dy
            pre = v + eta * X.T @ (yk - X @ v) / n
            x_new = np.sign(pre) * np.maximum(np.abs(pre) - eta * alpha, 0)
            v = x_new + 0.5 * (x_new - x)
            x_prev, x = x, x_new
            xs.append(x)
        del x_prev
        return np.array(xs)

    base = run()
    A = np.zeros((T + 1, T + 1))
    h = 1e-7
    for s in range(T):
        for i in range(n):
            e = np.zeros(n)
            e[i] = h
            diff = (run(e, s) - base) / h
            A[:, s] += X[i] @ diff.T
    return base, np.tril(A, -1)


def _small_design(seed, n=15, p=10):
    """A Gaussian design and a response with three unit coefficients."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    return X, X[:, :3] @ np.ones(3) + 0.3 * rng.standard_normal(n), rng


def test_user_iteration_fits_and_estimates():
    n, T, alpha = 15, 8, 0.05
    X, y, _ = _small_design(2, n)
    est = skacv.TrajectoryLasso(alpha=alpha, solver=DampedFISTA(), max_iter=T,
                                fit_intercept=False, n_probes=None, estimate_loo=True,
                                loo_options={"store_predictions": True}).fit(X, y)
    path, A = _brute_force_memory_matrix(X, y, est.step_size_, alpha, T)
    np.testing.assert_allclose(est.coef_path_, path.T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(est.memory_matrix_, A, atol=1e-5 * max(1, np.abs(A).max()))
    # the risk is the memory-matrix estimate of those traces
    ref_risk = risk_from_memory(
        y[:, None] - X @ path.T, A, n, A_sources=_sources(A, n, T),
        iteration=DampedFISTA())[0]
    np.testing.assert_allclose(est.risk_path_, ref_risk, rtol=1e-5)
    # IACV is exact leave-one-out for least squares, whatever the algorithm
    np.testing.assert_allclose(est.loo_path_, skacv.exact_loo_path(est, X, y), rtol=1e-9)


class MixedISTA(skacv.Iteration):
    """ISTA whose gradient input goes through a fixed non-diagonal SPD matrix
    (a preconditioner written by a user): ``pre = x + eta M z``."""

    name = "mixed_ista"

    def __init__(self, M=None, **kwargs):
        super().__init__(**kwargs)
        self.M = M

    def combine(self, k, v, dx, z, n_free=None, overwrite_z=False, z_scaled=False):
        out = self.M @ (z if z_scaled else self.eta(k) * z) + v
        if overwrite_z:
            z[...] = out
            return z
        return out


class ScaledISTA(skacv.Iteration):
    """ISTA at 0.8 times the bound step through an overridden, coordinate-wise
    ``combine``."""

    name = "scaled_ista"
    coordinatewise = True

    def combine(self, k, v, dx, z, n_free=None, overwrite_z=False, z_scaled=False):
        out = super().combine(k, v, dx, z, n_free, overwrite_z, z_scaled)
        out -= v
        out *= out.dtype.type(0.8)
        out += v
        return out


def _ista_path(X, y, step, alpha, T, M, dy=None, s=-1):
    """ISTA with the gradient input ``step M X^T (y - X x) / n``; ``dy`` added to
    ``y`` at step ``s + 1`` only."""
    n, p = X.shape
    x = np.zeros(p)
    xs = [x]
    for k in range(1, T + 1):
        yk = y if (dy is None or k - 1 != s) else y + dy
        pre = x + step * (M @ (X.T @ (yk - X @ x))) / n
        x = np.sign(pre) * np.maximum(np.abs(pre) - step * alpha, 0)
        xs.append(x)
    return np.array(xs)


def test_coordinate_mixing_user_iteration_is_refused_by_the_estimate_not_by_loo():
    p, T, alpha = 12, 8, 0.05
    X, y, rng = _small_design(3, 30, p)
    Q = np.linalg.qr(rng.standard_normal((p, p)))[0]
    M = Q @ np.diag(np.linspace(0.5, 1.0, p)) @ Q.T
    assert not MixedISTA(M).coordinatewise and ScaledISTA().coordinatewise
    with pytest.raises(ValueError, match="coordinatewise = True"):
        skacv.TrajectoryLasso(alpha=alpha, solver=MixedISTA(M), max_iter=T,
                              fit_intercept=False).fit(X, y)
    est = skacv.TrajectoryLasso(alpha=alpha, solver=MixedISTA(M), max_iter=T,
                                fit_intercept=False, estimate_risk=False,
                                estimate_loo=True).fit(X, y)
    path = _ista_path(X, y, est.step_size_, alpha, T, M)
    np.testing.assert_allclose(est.coef_path_, path.T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(est.loo_path_, skacv.exact_loo_path(est, X, y), rtol=1e-9)


def test_declared_coordinatewise_override_gets_its_exact_memory_matrix():
    n, p, T, alpha = 15, 10, 6, 0.05
    X, y, _ = _small_design(4, n, p)
    est = skacv.TrajectoryLasso(alpha=alpha, solver=ScaledISTA(), max_iter=T,
                                fit_intercept=False, n_probes=None).fit(X, y)
    M, step = 0.8 * np.eye(p), est.step_size_
    path = _ista_path(X, y, step, alpha, T, M)
    np.testing.assert_allclose(est.coef_path_, path.T, rtol=1e-10, atol=1e-12)
    A, h = np.zeros((T + 1, T + 1)), 1e-7  # exact: the map is piecewise affine
    for s in range(T):
        for i in range(n):
            e = np.zeros(n)
            e[i] = h
            A[:, s] += X[i] @ ((_ista_path(X, y, step, alpha, T, M, e, s) - path) / h).T
    A = np.tril(A, -1)
    np.testing.assert_allclose(est.memory_matrix_, A, atol=1e-5 * max(1, np.abs(A).max()))


def _sources(A, n, T):
    """Memory matrix of the extrapolated points ``v^t = 1.5 x^t - 0.5 x^{t-1}``."""
    Av = A.copy()
    Av[1:] = 1.5 * A[1:] - 0.5 * A[:-1]
    return np.tril(Av, -1)


# ----------------------------------------------------------------------------
# the search calls estimators through skacv.SearchProtocol only
# ----------------------------------------------------------------------------

_OWN = ("self", "cls", "super()")


def _private_reads(tree):
    """``(line, code, name)`` of every private attribute that ``tree`` reads on
    another object than its own (``self``, ``cls``, ``super()``):
    ``x._name``, ``x.__dict__``, ``vars(x)`` and ``getattr`` / ``hasattr`` /
    ``setattr`` / ``delattr(x, "_name")``. (Names computed at run time are
    not seen: the search's are lists of public attributes.)"""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and ast.unparse(node.value) not in _OWN:
            name = node.attr
            if (name.startswith("_") and not name.startswith("__")) or name == "__dict__":
                out.append((node.lineno, ast.unparse(node), name))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args \
                and ast.unparse(node.args[0]) not in _OWN:
            if node.func.id == "vars":
                out.append((node.lineno, ast.unparse(node), "__dict__"))
            elif node.func.id in ("getattr", "hasattr", "setattr", "delattr") \
                    and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) \
                    and str(node.args[1].value).startswith("_"):
                out.append((node.lineno, ast.unparse(node), node.args[1].value))
    return out


def _attributes_set_on_self(paths, class_name=None):
    """Names of the methods and of the ``self.<name>`` assignments of the
    classes of ``paths`` (only ``class_name`` when given)."""
    names = set()
    for path in paths:
        for cls in ast.walk(ast.parse(path.read_text())):
            if not isinstance(cls, ast.ClassDef) or class_name not in (None, cls.name):
                continue
            for node in ast.walk(cls):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(node.name)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                        and ast.unparse(node.value) == "self":
                    names.add(node.attr)
    return names


def _search_names():
    """Everything :class:`~skacv.TrajectoryEarlyStoppingCV` defines or sets
    on itself (its own state, which the search's helper modules may read)."""
    return _attributes_set_on_self([PACKAGE / "model_selection" / "_selection.py"],
                                   "TrajectoryEarlyStoppingCV")


def _estimator_names():
    """Everything an estimator has or sets: the names of its classes and the
    ``self.<name>`` state of the estimators' and estimates' modules."""
    names = set()
    for obj in (getattr(skacv, n) for n in skacv.__all__):
        if inspect.isclass(obj) and issubclass(obj, skacv.SearchProtocol):
            names |= set(dir(obj))
    paths = [p for sub in ("estimators", "kernel_methods", "estimates")
             for p in (PACKAGE / sub).glob("*.py")]
    fitted = skacv.TrajectoryLasso(max_iter=3).fit(*_data(skacv.TrajectoryLasso))
    return names | _attributes_set_on_self(paths) | set(vars(fitted))  # (+ scikit-learn's)


def test_the_private_read_finder_finds_them():
    code = ("def f(self, estimator, est):\n"
            "    estimator._planned(plan)\n"
            "    getattr(est, '_linear_iterations', None)\n"
            "    hasattr(self.estimator, '_augment')\n"
            "    est.__dict__.pop('_plan', None)\n"
            "    vars(est)\n"
            "    self._seed, super()._fit(), est.coef_path_, getattr(est, 'risk_path_')\n")
    found = sorted(name for _, _, name in _private_reads(ast.parse(code)))
    assert found == sorted(["_planned", "_linear_iterations", "_augment", "__dict__",
                            "__dict__"])


def test_the_search_reads_no_private_estimator_attribute():
    """model_selection reads an estimator through skacv.SearchProtocol and
    its public attributes only. A private name it reads on another object
    is the search's own state (set by TrajectoryEarlyStoppingCV), and no
    estimator has a name of that state."""
    own = {n for n in _search_names() if n.startswith("_")}
    clash = own & _estimator_names() - set(dir(BaseEstimator))
    assert not clash, f"estimators also define the search's private names {clash}"
    reads = [f"{path.name}:{line}: {code}"
             for path in sorted((PACKAGE / "model_selection").glob("*.py"))
             for line, code, name in _private_reads(ast.parse(path.read_text()))
             if name not in own or name in set(dir(BaseEstimator))]
    assert not reads, "the search reads private attributes:\n" + "\n".join(reads)


def test_linalg_imports_and_calls_nothing_of_the_search():
    """linalg (floor 2) keeps row statistics: no import of model_selection
    and no read of a name only the search has (its methods, parameters and
    state, e.g. ``_resolve``, ``_folds``, ``criterion_``)."""
    search_only = _search_names() - _estimator_names() - set(dir(BaseEstimator))
    assert {"_resolve", "_folds", "criterion_", "estimator"} <= search_only
    found = []
    for path in sorted((PACKAGE / "linalg").glob("*.py")):
        tree = ast.parse(path.read_text())
        module = f"linalg.{path.stem}"
        found += [f"{path.name}:{line} imports {name}"
                  for name, line, _ in _skacv_imports(tree, module)
                  if name.startswith("model_selection")]
        found += [f"{path.name}:{node.lineno}: {ast.unparse(node)}"
                  for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and node.attr in search_only
                  and ast.unparse(node.value) not in _OWN]
    assert not found, "linalg reaches into the search:\n" + "\n".join(found)


#: subpackages above linalg that it must not know (it serves them)
_ABOVE_LINALG = ("estimators", "model_selection", "kernel_methods")


def _reaches_up(tree, module, own):
    """What ``tree`` (a linalg module) knows of the layers that use it: an
    import of estimators/, model_selection/ or kernel_methods/, a function
    taking an ``estimator`` or ``search``, and a private attribute read on
    another object whose name no linalg class sets (``own``)."""
    found = [f"imports {name}" for name, _, _ in _skacv_imports(tree, module)
             if name.partition(".")[0] in _ABOVE_LINALG]
    found += [f"{line}: {code}" for line, code, name in _private_reads(tree)
              if name not in own and not name.startswith("__")]
    found += [f"{node.lineno}: def {node.name}({arg.arg}, ...)" for node in ast.walk(tree)
              if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
              for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs
              if arg.arg in ("estimator", "search")]
    return found


def test_linalg_reads_no_estimator():
    """linalg keeps row statistics and Dask array handling: fitting an
    estimator on a Dask input lives in estimators/_dask_fit.py, so no linalg
    module imports the layers above it, takes an estimator, or reads a
    private attribute of an object that is not one of linalg's own (a
    ``Design``'s ``_start``): duck typing such as ``hasattr(estimator,
    "_augment")`` or ``estimator._fit(...)`` fails here."""
    paths = sorted((PACKAGE / "linalg").glob("*.py"))
    own = _attributes_set_on_self(paths)
    old = ("from ..model_selection._selection import Search\n"
           "def dask_fit(estimator, X):\n"
           "    hasattr(estimator, '_augment')\n"
           "    estimator._fit(X)\n")
    assert len(_reaches_up(ast.parse(old), "linalg._dask", own)) == 4
    found = [f"{path.name}: {item}" for path in paths
             for item in _reaches_up(ast.parse(path.read_text()), f"linalg.{path.stem}", own)]
    assert not found, "linalg reaches into the estimators:\n" + "\n".join(found)


def _calls(name):
    """Dotted modules (relative to skacv) that call a function named ``name``."""
    found = set()
    for module in _modules():
        tree = ast.parse((PACKAGE / (module.replace(".", "/") + ".py")).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if called == name:
                    found.add(module)
    return found


def test_one_probe_draw_and_one_plan_of_the_risk_estimate():
    """Every Hutchinson probe of the risk estimate is drawn by
    ``risk._probes.draw_probes`` (the one caller of ``rademacher``), and the
    number of probes and the probe scheme are decided by
    ``risk._engine.plan_estimate`` alone."""
    assert _calls("rademacher") == {"estimates.risk._probes"}
    for name in ("resolve_n_probes", "resolve_scheme", "pooled_start_probes",
                 "shared_plan", "stands_for_rows"):
        assert _calls(name) == {"estimates.risk._engine"}, name
