"""The documentation states the defaults the code has.

The defaults of :class:`skacv.TrajectoryEarlyStoppingCV` are stated once, on
the user guide's page "How the choice is made" (``docs/user_guide/choice.rst``):
a table of the defaults and a table of what ``"auto"`` becomes for each
estimator. These tests read those tables and check them against what a
default search reports after a fit (``criterion_``, ``search_``, its
automatic grid). They also scan every page (``docs/**/*.rst``, README.md,
the gallery's and the tutorial's scripts) for sentences that state a
parameter's default (``name=value`` followed by "(the default", "default
``value``", ...) and check the value against the signatures of skacv's public
estimators and functions, and every numpydoc ``default=`` of a public
docstring against its signature. No Sphinx build is needed.
"""

import ast
import inspect
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression

import skacv
from skacv import TrajectoryEarlyStoppingCV, TrajectoryLasso
from skacv._statistics import get_statistics

ROOT = Path(__file__).resolve().parents[1]
CHOICE_PAGE = ROOT / "docs" / "user_guide" / "choice.rst"
GENERATED = ("_build", "auto_examples", "auto_tutorial", "gen_modules", "node_modules")


def doc_files():
    """Every page a user reads: the Sphinx sources, the README, the scripts
    the gallery and the tutorial run."""
    files = [p for p in (ROOT / "docs").rglob("*.rst")
             if not any(part in GENERATED for part in p.parts)]
    files += [ROOT / "README.md"]
    files += sorted((ROOT / "examples").glob("*.py"))
    files += sorted((ROOT / "docs" / "tutorial").glob("*.py"))
    files += sorted((ROOT / "docs" / "figures").glob("*.py"))
    return sorted(files)


def public_callables():
    """skacv's public classes and functions, by name."""
    out = {}
    for name in skacv.__all__:
        obj = getattr(skacv, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            out[name] = obj
    return out


def signature_defaults():
    """``{parameter: {owner name: default}}`` over the public callables and
    the public methods of the public classes (owner ``Class.method``)."""
    owners = dict(public_callables())
    for name, obj in public_callables().items():
        if inspect.isclass(obj):
            owners.update({f"{name}.{m}": f for m, f in inspect.getmembers(obj, inspect.isfunction)
                           if not m.startswith("_")})
    table = {}
    for owner, obj in owners.items():
        try:
            params = inspect.signature(obj).parameters
        except (TypeError, ValueError):
            continue
        for pname, param in params.items():
            if param.default is not inspect.Parameter.empty:
                table.setdefault(pname, {})[owner] = param.default
    return table


def literal(text):
    """The Python value written in the documentation (``"auto"``, ``10``,
    ``None``); ``text`` itself when it is not a literal."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        try:
            return float(a) == float(b)
        except (TypeError, ValueError):
            return False
    return type(a) is type(b) and a == b


# --------------------------------------------------------------------------
# the tables of "How the choice is made"


def rst_table_rows(text, first_header):
    """Rows of the simple RST table whose header starts with
    ``first_header``: a list of lists of cells (continuation lines, whose
    first cell is empty, are dropped)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first_header))
    border = lines[start - 1]
    cols = [m.span() for m in re.finditer(r"=+", border)]
    rows = []
    for line in lines[start + 2:]:
        if line.startswith("="):
            break
        cells = [line[a:b if k < len(cols) - 1 else None].strip()
                 for k, (a, b) in enumerate(cols)]
        if cells[0]:
            rows.append(cells)
    return rows


def unquote(cell):
    """```` ``x`` ```` -> ``x``."""
    m = re.fullmatch(r"``(.+?)``", cell.strip())
    assert m, f"expected a ``literal`` cell, got {cell!r}"
    return m.group(1)


def test_defaults_table_matches_the_signature():
    params = TrajectoryEarlyStoppingCV(TrajectoryLasso()).get_params(deep=False)
    rows = rst_table_rows(CHOICE_PAGE.read_text(), "parameter ")
    assert len(rows) >= 5
    for cells in rows:
        name, value = unquote(cells[0]), literal(unquote(cells[1]))
        assert name in params, f"choice.rst names a parameter {name!r} the search lacks"
        assert same(value, params[name]), (
            f"choice.rst says the default of {name} is {value!r}; the code has "
            f"{params[name]!r}")


def _data(classifier):
    if classifier:
        return make_classification(n_samples=80, n_features=10, random_state=0)
    return make_regression(n_samples=80, n_features=30, n_informative=8, noise=5.0,
                           random_state=0)


def test_auto_table_matches_what_the_search_reports():
    rows = rst_table_rows(CHOICE_PAGE.read_text(), "estimator ")
    assert len(rows) >= 5
    namespace = {name: getattr(skacv, name) for name in skacv.__all__}
    for cells in rows:
        code = unquote(cells[0])
        criterion, search = literal(unquote(cells[1])), literal(unquote(cells[2]))
        estimator = eval(code, namespace)  # noqa: S307 - the page's own code
        X, y = _data(getattr(estimator, "_estimator_type", "") == "classifier"
                     or "Logistic" in code)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = TrajectoryEarlyStoppingCV(estimator).fit(X, y)
        assert fitted.criterion_ == criterion, (
            f"choice.rst: {code} -> criterion_ {criterion!r}; the fit reports "
            f"{fitted.criterion_!r}")
        assert fitted.search_ == search, (
            f"choice.rst: {code} -> search_ {search!r}; the fit reports {fitted.search_!r}")


NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "ten": 10}


def test_the_automatic_grid_is_as_described():
    text = " ".join(CHOICE_PAGE.read_text().split())
    n_alphas = int(re.search(r"grid of (\d+) values of ``alpha``", text).group(1))
    ratio = int(re.search(r"down to ``alpha_max / (\d+)``", text).group(1))
    after = NUMBER_WORDS[re.search(r"The path stops (\w+) values after", text).group(1)]
    share = {"half": 0.5}[re.search(r"degrees of freedom reach (\w+) the number of samples",
                                    text).group(1)]
    patience = int(re.search(r"no improvement during the last (\d+) iterations",
                             text).group(1))

    X, y = make_regression(n_samples=400, n_features=300, n_informative=40, noise=10.0,
                           random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = TrajectoryEarlyStoppingCV(TrajectoryLasso(random_state=0)).fit(X, y)
    alphas = np.asarray(search.cv_results_["param_alpha"], dtype=float)
    assert alphas.size == n_alphas
    # alpha_max: the smallest penalty whose Lasso solution is zero
    alpha_max = np.abs((X - X.mean(axis=0)).T @ (y - y.mean())).max() / X.shape[0]
    np.testing.assert_allclose(alphas[0], alpha_max, rtol=1e-10)
    np.testing.assert_allclose(alphas[0] / alphas[-1], ratio, rtol=1e-8)
    scores = np.asarray(search.cv_results_["path_risk"], dtype=float)
    df = np.asarray(search.cv_results_["path_df"], dtype=float)
    best = int(np.nanargmin(scores))
    solved_after = int(np.isfinite(scores[best + 1:]).sum())
    assert np.isnan(scores[-1]), "pick data where the alpha path stops early"
    # the first alpha at least ``after`` past the minimum whose df reach the share
    stop = next(i for i in range(best + after, alphas.size) if df[i] >= share * X.shape[0])
    assert solved_after == stop - best >= after
    assert get_statistics().path_walk_df == share
    assert search.get_params()["n_iter_no_change"] == patience


# --------------------------------------------------------------------------
# every sentence that states a default


_NAME = r"(?P<name>[a-z_][a-z0-9_]*)"
_VALUE = r"(?P<value>\"[^\"`]*\"|'[^'`]*'|-?[0-9.e+-]+|None|True|False)"
_TICK = r"`{1,2}"
DEFAULT_STATEMENTS = [
    # ``name=value`` (the default ...   /   ``name=value``, the default
    re.compile(_TICK + _NAME + "=" + _VALUE + _TICK + r",?\s+\(?(?:the|by)\s+default\b"),
    # ``name=value`` (default)
    re.compile(_TICK + _NAME + "=" + _VALUE + _TICK + r"\s+\(default\b"),
    # by default ``name=value``   /   default ``name=value``
    re.compile(r"\bdefault[:,]?\s+\(?" + _TICK + _NAME + "=" + _VALUE + _TICK),
    # ``name`` (default ``value``)   /   ``name`` defaults to ``value``
    re.compile(_TICK + _NAME + _TICK + r"\s+(?:\(default:?|defaults to)\s+"
               + _TICK + _VALUE + _TICK),
]


def sentences_with_defaults(text):
    """``(name, value, sentence)`` for every statement of a default in
    ``text`` (line breaks and comment markers removed)."""
    flat = " ".join(line.lstrip("#").strip() for line in text.splitlines())
    found = []
    for pattern in DEFAULT_STATEMENTS:
        for m in pattern.finditer(flat):
            a = flat.rfind(". ", 0, m.start()) + 1
            b = flat.find(". ", m.end())
            found.append((m.group("name"), m.group("value"),
                          flat[a:b if b >= 0 else None].strip()))
    return found


def wrong_defaults(text, defaults, owners):
    """The statements of ``text`` whose value no owner of that parameter has
    (restricted to the public names the sentence mentions, if any)."""
    problems = []
    for name, value, sentence in sentences_with_defaults(text):
        if name not in defaults:
            continue  # not a parameter of skacv (scikit-learn's, Python's)
        candidates = defaults[name]
        named = {o: d for o, d in candidates.items() if re.search(rf"\b{o}\b", sentence)}
        candidates = named or candidates
        if not any(same(literal(value), d) for d in candidates.values()):
            problems.append(f"{name}={value} ({', '.join(sorted(candidates))} have "
                            f"{sorted({repr(d) for d in candidates.values()})}): "
                            f"{sentence[:200]}")
    return problems


def test_the_scanner_finds_default_statements():
    text = ('Use ``criterion="auto"`` (the default). By default (``n_iter_no_change=10``'
            ' ...). ``search`` (default ``"auto"``) and `path_neighbors=1`, the default.')
    found = {(n, v) for n, v, _ in sentences_with_defaults(text)}
    assert found == {("criterion", '"auto"'), ("n_iter_no_change", "10"),
                     ("search", '"auto"'), ("path_neighbors", "1")}
    defaults = signature_defaults()
    assert wrong_defaults(text, defaults, public_callables()) == []
    bad = text.replace('``criterion="auto"``', '``criterion="kfold"``')
    assert len(wrong_defaults(bad, defaults, public_callables())) == 1


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_state_the_code_defaults(path):
    problems = wrong_defaults(path.read_text(), signature_defaults(), public_callables())
    assert not problems, f"{path.relative_to(ROOT)} states defaults the code lacks:\n" + \
        "\n".join(problems)


def test_no_page_says_kfold_is_the_default():
    """K-fold CV along the path is never the default criterion: it only
    replaces the risk estimate below 100 samples with more features than
    samples, and where the estimate flags itself unreliable."""
    claim = re.compile(r"default[^.;]{0,60}\b(?:is|uses|takes|chooses|runs)\b"
                       r"[^.;]{0,30}\b(?:K-fold|kfold)", re.IGNORECASE)
    for path in doc_files():
        flat = " ".join(line.lstrip("#").strip() for line in path.read_text().splitlines())
        hit = claim.search(flat)
        assert hit is None, f"{path.relative_to(ROOT)}: {hit.group(0)!r}"


# --------------------------------------------------------------------------
# numpydoc's "default=" in the public docstrings


_DOC_PARAM = re.compile(r"^\s{4}(?P<names>[a-z_][a-z0-9_, ]*) : .*\bdefault=(?P<value>.+)$",
                        re.MULTILINE)


@pytest.mark.parametrize("owner", sorted(public_callables()))
def test_docstring_defaults_match_the_signature(owner):
    obj = public_callables()[owner]
    params = inspect.signature(obj).parameters
    problems = []
    for m in _DOC_PARAM.finditer(inspect.getdoc(obj) and obj.__doc__ or ""):
        value = literal(m.group("value").strip())
        for name in (n.strip() for n in m.group("names").split(",")):
            if name not in params or params[name].default is inspect.Parameter.empty:
                continue
            if not same(value, params[name].default) and value != repr(
                    params[name].default):
                problems.append(f"{name}: docstring default={m.group('value').strip()}, "
                                f"signature {params[name].default!r}")
    assert not problems, f"{owner}: " + "; ".join(problems)
