"""No numeric tuning constant at module level outside the policy.

Every threshold, tolerance, size or count that tunes skacv is a field of
:class:`skacv._policy.SpeedPolicy` (choices between equal computations) or of
:class:`skacv._statistics.StatisticalPolicy` (constants that change the numbers),
set by tests through the ``speed_policy`` and ``statistical_policy``
fixtures. The walk below reads the source of every module of skacv and
fails on a module-level UPPER_CASE name bound to a number or to arithmetic
of numbers (``1e-4``, ``-3``, ``2 * 2**20``, ``1 << 40``), except the few
non-tuning constants of ``ALLOWED``. And the policies are read in few places:
:func:`skacv._policy.current_policies` reads them where a fit, a search or a
public function starts (``ENTRY_POINTS``), and hands them down as arguments.
"""

import ast
from pathlib import Path

import pytest

import skacv

ROOT = Path(skacv.__file__).parent
#: the modules that hold the policies themselves
POLICY_MODULES = {"_policy.py", "_statistics.py"}
#: where the ambient policies are read (``current_policies()``): a design's
#: construction (every fit and public function starts with its design; a
#: derived design takes its parent's), the search's fit and EigenPro's fit
ENTRY_POINTS = {"linalg/_design.py": 1, "model_selection/_selection.py": 1,
                "kernel_methods/_eigenpro.py": 1}

#: module-level numeric constants that tune nothing, with the reason
ALLOWED = {
    # the demo's scenario, like DEMO_DEFAULTS: the folds of its K-fold choice
    ("_demo_checks.py", "N_FOLDS"): "scenario",
    # a measured count of T x T arrays alive at the estimate's peak, for the
    # demo's memory check: a fact of the code, not a choice
    ("_demo_checks.py", "_TT_ARRAYS"): "measured count",
    # seconds before a stage of the demo reports progress: display only
    ("_demo.py", "PROGRESS_AFTER"): "display",
    # pandas' default display (head and tail above this many rows)
    ("_demo.py", "_MAX_ROWS"): "display",
    ("_demo.py", "_HEAD"): "display",
    # the y-range of RiskPathDisplay.plot(ylim="auto"): presentation only
    ("display/_plot.py", "_Y_TOP_FACTOR"): "display",
    ("display/_plot.py", "_FLATTENED"): "display",
    # exact: 1 / Phi^-1(3/4), the MAD's consistency factor at the Gaussian
    ("estimators/_huber.py", "MAD_FACTOR"): "mathematical constant",
    # the range of ctypes.c_int, the BLAS calls' integer arguments
    ("linalg/_blas.py", "INT_LIMIT"): "machine constant",
    # arrays alive at the peak of the estimates, for their memory checks:
    # facts of the code, like _demo's _TT_ARRAYS
    ("estimates/risk/_result.py", "DENSE_MATRICES"): "measured count",
    ("estimates/risk/_result.py", "SETTLED_ARRAYS"): "measured count",
    ("estimates/risk/_sgd.py", "TRACKER_MATRICES"): "a count of the code's arrays",
    # the Python objects of a sparse row's entry in EigenPro's row order, for
    # its memory check (175 bytes measured): a fact of the code
    ("kernel_methods/_kernels.py", "_TOKEN_BYTES"): "measured size",
    ("estimates/risk/_result.py", "SETTLED_VECTORS"): "measured count",
    ("estimates/loo/_iacv.py", "_ARRAYS_PER_SAMPLE"): "measured count",
}


def _numeric(node):
    """A number (not a bool), or unary and binary arithmetic of numbers."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float, complex)) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _numeric(node.operand)
    if isinstance(node, ast.BinOp):
        return _numeric(node.left) and _numeric(node.right)
    return False


def _upper(name):
    core = name.lstrip("_")
    return bool(core) and core.isupper()


def numeric_constants(source):
    """``(line, name)`` of the module-level UPPER_CASE names of ``source``
    bound to numbers (also inside module-level ``if`` / ``try`` blocks)."""
    found = []

    def walk(body):
        for node in body:
            if isinstance(node, (ast.If, ast.Try)):
                handlers = [n for h in getattr(node, "handlers", []) for n in h.body]
                walk(node.body + node.orelse + getattr(node, "finalbody", []) + handlers)
                continue
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            for target in targets:
                pairs = ([(target, value)] if not isinstance(target, ast.Tuple)
                         else zip(target.elts, value.elts, strict=True)
                         if isinstance(value, ast.Tuple) else [])
                for name, val in pairs:
                    if isinstance(name, ast.Name) and _upper(name.id) and _numeric(val):
                        found.append((node.lineno, name.id))

    walk(ast.parse(source).body)
    return found


def _constants():
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in POLICY_MODULES:
            continue
        for line, name in numeric_constants(path.read_text()):
            out[(rel, name)] = line
    return out


def test_the_walk_finds_numeric_constants():
    source = "\n".join([
        "A = 1e-4", "B = -3", "C = 2 * 2**20", "D = 1 << 40", "_E = 0.5", "F: int = 7",
        "if True:", "    G = 10**8",
        "lower = 5", "H = True", "NAMES = ('a', 'b')", "I = None", "J = float('1')",
        "K = {'a': 1}", "L = object()", "M, N = 1, 'n'", "try:", "    O = 2.0",
        "except ImportError:", "    P = 3", "def f():", "    Q = 4", "class R:", "    S = 5",
    ])
    assert [name for _, name in numeric_constants(source)] == (
        list("ABCD") + ["_E", "F", "G", "M", "O", "P"])


def test_no_numeric_tuning_constant_outside_the_policy():
    """Outside the policies' modules, a module-level numeric constant is in
    ``ALLOWED`` or it is a field of a policy."""
    found = _constants()
    offenders = [f"skacv/{rel}:{line} {name}" for (rel, name), line in sorted(found.items())
                 if (rel, name) not in ALLOWED]
    assert not offenders, ("numeric tuning constants at module level: make them fields of "
                           "SpeedPolicy (skacv/_policy.py) or StatisticalPolicy "
                           "(skacv/_statistics.py), or, if they tune nothing, add them to "
                           "ALLOWED with the reason:\n"
                           + "\n".join(offenders))


def test_the_allowed_constants_are_current():
    """Every entry of ``ALLOWED`` still names a numeric module constant."""
    found = _constants()
    assert sorted(set(ALLOWED) - set(found)) == []


def _calls(source, names):
    """Line numbers of the calls of the functions ``names`` in ``source``
    (by name or as an attribute: ``f()``, ``module.f()``)."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) in names]


def test_the_walk_finds_calls():
    source = "a = get_policy()\nb = _policy.get_statistics()\ndef f():\n    return get_policy\n"
    assert _calls(source, {"get_policy", "get_statistics"}) == [1, 2]


def test_the_policies_are_read_at_the_entry_points_only():
    """``get_policy()`` and ``get_statistics()`` are called once each in
    skacv, by ``current_policies()``; it is called only where a fit, a
    search or a public function starts (``ENTRY_POINTS``): every function
    below takes the policies as arguments (or from the design it works on)."""
    direct, entry = {}, {}
    for path in sorted(ROOT.rglob("*.py")):
        rel, source = path.relative_to(ROOT).as_posix(), path.read_text()
        for name in ("get_policy", "get_statistics"):
            for line in _calls(source, {name}):
                direct.setdefault(name, []).append(f"{rel}:{line}")
        if rel != "_policy.py" and _calls(source, {"current_policies"}):
            entry[rel] = len(_calls(source, {"current_policies"}))
    assert {name: [site.split(":")[0] for site in sites] for name, sites in direct.items()} == {
        "get_policy": ["_policy.py"], "get_statistics": ["_policy.py"]}, direct
    assert entry == ENTRY_POINTS


@pytest.mark.parametrize("policy", ["SpeedPolicy", "StatisticalPolicy"])
def test_every_policy_field_is_documented(policy):
    """Each field of the two policies has a ``#:`` comment in the code (its
    own, or that of the fields it is grouped with, written without a blank
    line between them) and an entry in ``docs/speed_policy.rst`` (alone or
    in a group such as ````a``, ``b`` (float)``)."""
    import dataclasses
    import re

    from skacv import _policy, _statistics

    module = _policy if policy == "SpeedPolicy" else _statistics
    cls = getattr(module, policy)
    lines = Path(module.__file__).read_text().splitlines()
    body = next(node for node in ast.parse("\n".join(lines)).body
                if isinstance(node, ast.ClassDef) and node.name == policy).body
    commented, previous, previous_end = set(), None, None
    for node in body:
        if isinstance(node, ast.AnnAssign):
            above = lines[node.lineno - 2].strip()
            if above.startswith("#:") or (previous_end == node.lineno - 1
                                          and previous in commented):
                commented.add(node.target.id)
            previous, previous_end = node.target.id, node.end_lineno
    fields = [f.name for f in dataclasses.fields(cls)]
    assert [name for name in fields if name not in commented] == []
    docs = (Path(__file__).parents[1] / "docs" / "speed_policy.rst").read_text()
    terms = re.findall(r"^((?:``\w+``(?:, )?)+) \(", docs, flags=re.M)
    documented = set(re.findall(r"``(\w+)``", " ".join(terms)))
    assert [name for name in fields if name not in documented] == []


def test_derived_designs_take_their_parents_policies():
    """A ``Design`` made without ``policies=`` captures the policies in force:
    only where a fit or a public function starts (``make_design`` and the
    fit shell, with the intercept column's design of the Huber and
    logistic estimators); every design derived inside a computation
    (working sets, folds, sub-designs) is given its parent's."""
    capture = {"linalg/_design.py", "estimators/_base.py", "estimators/_intercept_column.py"}
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call)
                    and getattr(node.func, "id", getattr(node.func, "attr", None))
                    in ("Design", "centred")
                    and not any(k.arg == "policies" for k in node.keywords)
                    and len(node.args) < 5 and rel not in capture):
                found.append(f"skacv/{rel}:{node.lineno}")
    assert found == []


def test_the_policies_pickle():
    """A fitted estimator keeps its design, which carries the policies."""
    import pickle

    from skacv._policy import current_policies

    policies = current_policies()
    assert pickle.loads(pickle.dumps(policies)) == policies


def test_a_policy_context_changes_the_policy_in_force_when_entered():
    """``policy_context`` and ``statistics_context`` read the policy they
    change when their block starts (not when they are made) and restore it
    when it ends."""
    from skacv._policy import get_policy, policy_context
    from skacv._statistics import get_statistics, statistics_context

    speed = policy_context(panel_bytes=4096)
    statistics = statistics_context(tie_rtol=0.25)
    with policy_context(gram_cache_size=7), statistics_context(relative_patience=0.125):
        with speed, statistics:
            assert (get_policy().panel_bytes, get_policy().gram_cache_size) == (4096, 7)
            assert (get_statistics().tie_rtol, get_statistics().relative_patience) == (0.25, 0.125)
        assert get_policy().panel_bytes != 4096 and get_policy().gram_cache_size == 7
        assert get_statistics().tie_rtol != 0.25 and get_statistics().relative_patience == 0.125
