"""Intersphinx inventories of the projects the documentation links to,
written at build time so that the build needs no network.

Each project lists the names these pages and skacv's docstrings refer to,
with their page on the project's own site (the URL scheme of its Sphinx
build). A name missing here is an unresolved reference under
``sphinx-build -n``: add it with its page.
"""

import os
import zlib

SKLEARN_GENERATED = "modules/generated/{}.html#{}"

# project: (base URL, version, {role: {name: page, ...}})
PROJECTS = {
    "python": ("https://docs.python.org/3/", "3", {
        "py:exception": {
            "UserWarning": "library/exceptions.html#UserWarning",
            "RuntimeWarning": "library/exceptions.html#RuntimeWarning",
            "ValueError": "library/exceptions.html#ValueError",
            "TypeError": "library/exceptions.html#TypeError",
            "MemoryError": "library/exceptions.html#MemoryError",
        },
        "py:class": {
            "float": "library/functions.html#float",
            "int": "library/functions.html#int",
            "dict": "library/stdtypes.html#dict",
            "list": "library/stdtypes.html#list",
            "tuple": "library/stdtypes.html#tuple",
            "str": "library/stdtypes.html#str",
            "warnings.catch_warnings": "library/warnings.html#warnings.catch_warnings",
        },
        "py:function": {
            "warnings.simplefilter": "library/warnings.html#warnings.simplefilter",
            "warnings.filterwarnings": "library/warnings.html#warnings.filterwarnings",
        },
        "py:module": {"warnings": "library/warnings.html#module-warnings"},
    }),
    "numpy": ("https://numpy.org/doc/stable/", "stable", {
        "py:class": {
            "numpy.ndarray": "reference/generated/numpy.ndarray.html#numpy.ndarray",
            "numpy.random.RandomState":
                "reference/random/legacy.html#numpy.random.RandomState",
            "numpy.random.Generator":
                "reference/random/generator.html#numpy.random.Generator",
            "numpy.memmap": "reference/generated/numpy.memmap.html#numpy.memmap",
        },
        "py:data": {"numpy.float32": "reference/arrays.scalars.html#numpy.float32",
                    "numpy.float64": "reference/arrays.scalars.html#numpy.float64"},
    }),
    "scipy": ("https://docs.scipy.org/doc/scipy/", "stable", {
        "py:class": {
            name: "reference/generated/{0}.html#{0}".format(name)
            for name in ("scipy.sparse.csr_matrix", "scipy.sparse.csc_matrix",
                         "scipy.sparse.csr_array", "scipy.sparse.linalg.LinearOperator")
        },
        "py:module": {"scipy.sparse": "reference/sparse.html#module-scipy.sparse"},
    }),
    "sklearn": ("https://scikit-learn.org/stable/", "stable", {
        "py:class": {
            name: SKLEARN_GENERATED.format(name, name)
            for name in (
                "sklearn.linear_model.Lasso", "sklearn.linear_model.LassoCV",
                "sklearn.linear_model.ElasticNet", "sklearn.linear_model.Ridge",
                "sklearn.linear_model.RidgeCV", "sklearn.linear_model.HuberRegressor",
                "sklearn.linear_model.LogisticRegression",
                "sklearn.linear_model.LogisticRegressionCV",
                "sklearn.linear_model.SGDRegressor",
                "sklearn.model_selection.GridSearchCV", "sklearn.model_selection.KFold",
                "sklearn.model_selection.StratifiedKFold",
                "sklearn.pipeline.Pipeline", "sklearn.preprocessing.StandardScaler",
                "sklearn.preprocessing.OneHotEncoder",
                "sklearn.preprocessing.PolynomialFeatures",
                "sklearn.ensemble.HistGradientBoostingRegressor",
                "sklearn.exceptions.ConvergenceWarning",
                "sklearn.exceptions.EfficiencyWarning", "sklearn.exceptions.NotFittedError",
                "sklearn.utils.Bunch", "sklearn.kernel_approximation.RBFSampler",
            )
        },
        "py:function": {
            name: SKLEARN_GENERATED.format(name, name)
            for name in (
                "sklearn.model_selection.check_cv", "sklearn.model_selection.cross_val_score",
                "sklearn.model_selection.train_test_split", "sklearn.pipeline.make_pipeline",
                "sklearn.get_config", "sklearn.set_config", "sklearn.config_context",
                "sklearn.datasets.make_regression", "sklearn.datasets.load_diabetes",
                "sklearn.utils.estimator_checks.check_estimator",
            )
        },
    }),
    "joblib": ("https://joblib.readthedocs.io/en/stable/", "stable", {
        "py:class": {"joblib.Parallel": "generated/joblib.Parallel.html#joblib.Parallel"},
        "py:function": {
            "joblib.parallel_backend":
                "generated/joblib.parallel_backend.html#joblib.parallel_backend",
            "joblib.parallel_config":
                "generated/joblib.parallel_config.html#joblib.parallel_config",
        },
    }),
    "dask": ("https://docs.dask.org/en/stable/", "stable", {
        "py:class": {
            "dask.array.Array": "generated/dask.array.Array.html#dask.array.Array",
            "dask.dataframe.DataFrame":
                "generated/dask.dataframe.DataFrame.html#dask.dataframe.DataFrame",
        },
        "py:function": {
            "dask.array.from_array":
                "generated/dask.array.from_array.html#dask.array.from_array",
        },
    }),
    "distributed": ("https://distributed.dask.org/en/stable/", "stable", {
        "py:class": {"distributed.Client": "api.html#distributed.Client"},
    }),
}


def write_inventories(directory):
    """Write ``<project>.inv`` for every project into ``directory``; return
    the ``intersphinx_mapping`` that reads them."""
    os.makedirs(directory, exist_ok=True)
    mapping = {}
    for project, (url, version, roles) in PROJECTS.items():
        lines = []
        for role, names in roles.items():
            for name, page in sorted(names.items()):
                lines.append(f"{name} {role} 1 {page} -")
        header = ("# Sphinx inventory version 2\n"
                  f"# Project: {project}\n# Version: {version}\n"
                  "# The remainder of this file is compressed using zlib.\n")
        path = os.path.join(directory, f"{project}.inv")
        with open(path, "wb") as fh:
            fh.write(header.encode())
            fh.write(zlib.compress(("\n".join(lines) + "\n").encode()))
        mapping[project] = (url, path)
    return mapping
