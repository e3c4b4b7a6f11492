"""No test patches skacv.

A test checks the path the code took by its record (:mod:`skacv._trace`),
forces a branch by the policies (the ``speed_policy`` and
``statistical_policy`` fixtures) or a real argument, and replaces a
collaborator by a test double it passes in (a subclass, an argument): never
by replacing an attribute of a skacv module or class. The walk below reads
every test module and fails on a ``monkeypatch.setattr`` / ``setattr`` /
``mock.patch`` / ``mock.patch.object`` call, or an assignment, whose target
is reached from a name bound to skacv (an import of skacv or of one of its
modules, classes or functions, or a local name bound to one of those), or
whose target it cannot trace to an import (a helper's parameter: a
patching helper would hide what it patches); third-party targets
(matplotlib's ``show``, SciPy's, scikit-learn's, Dask's) are allowed.
"""

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
PATCHERS = {"setattr", "patch", "object", "delattr"}


def _bindings(tree):
    """``{name: dotted origin}`` of the module's imports and of the simple
    assignments ``name = <dotted expression>`` (in any scope)."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    names[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for _ in range(3):  # aliases of aliases
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                value = node.value
                if (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                        and value.func.attr == "importorskip" and value.args
                        and isinstance(value.args[0], ast.Constant)):
                    names.setdefault(node.targets[0].id, str(value.args[0].value))
                    continue
                origin = _origin(value, names)
                if origin is not None:
                    names.setdefault(node.targets[0].id, origin)
    return names


def _origin(node, names):
    """The dotted origin of ``a.b.c`` (or ``getattr(a, "b")``) when ``a`` is bound."""
    parts = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id == "getattr" and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant)):
            parts.append(str(node.args[1].value))
            node = node.args[0]
        else:
            break
    if isinstance(node, ast.Name) and node.id in names:
        return ".".join([names[node.id], *reversed(parts)])
    return None


def _is_skacv(origin):
    return origin == "skacv" or origin.startswith("skacv.")


def patches_of_skacv(source):
    """``(line, text)`` of the patches of skacv attributes in ``source``."""
    tree = ast.parse(source)
    names = _bindings(tree)
    found = []
    for node in ast.walk(tree):
        target = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in PATCHERS:
                target = node.args[0]
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute):
                    origin = _origin(t.value, names)
                    if origin is not None and _is_skacv(origin):
                        found.append((node.lineno, ast.unparse(t)))
            continue
        if target is None:
            continue
        if isinstance(target, ast.Constant) and isinstance(target.value, str):
            origin = target.value  # monkeypatch.setattr("skacv.x.y", value)
        else:
            origin = _origin(target, names)
        # an untraceable target of monkeypatch / mock (not of the builtins,
        # which tests use on their own objects)
        untraced = origin is None and isinstance(node.func, ast.Attribute)
        if untraced or (origin is not None and _is_skacv(origin)):
            found.append((node.lineno, ast.unparse(node.func) + "(" + ast.unparse(target)))
    return found


@pytest.mark.parametrize("path", sorted(TESTS.glob("*.py")), ids=lambda p: p.name)
def test_no_test_patches_skacv(path):
    found = patches_of_skacv(path.read_text())
    assert not found, (f"{path.name} patches skacv (record the path with skacv._trace, "
                       f"force it by a policy or pass a test double instead): {found}")


def test_the_walk_finds_the_patches():
    source = """
import scipy.linalg
import skacv.linalg._design as design_module
from skacv import TrajectoryLasso
from skacv.estimates.risk import _estimate as _risk
from unittest import mock
import matplotlib.pyplot as plt

def test(monkeypatch):
    monkeypatch.setattr(design_module, "blas_threads", lambda: 3)
    monkeypatch.setattr(design_module.linalg, "eigh", None)
    monkeypatch.setattr(TrajectoryLasso, "fit", None)
    mp.setattr(_risk, "plan_estimate", None)
    module = design_module
    monkeypatch.setattr(module, "x", 1)
    monkeypatch.setattr("skacv.linalg._design.make_design", None)
    with mock.patch.object(_risk, "plan_estimate"):
        pass
    design_module.Design.gram = None
    monkeypatch.setattr(plt, "show", None)
    monkeypatch.setattr(scipy.linalg, "cho_factor", None)
    d = design_module.Design(X)
    d.policy = None

def watch(monkeypatch, owner, name):
    monkeypatch.setattr(owner, name, None)
"""
    found = patches_of_skacv(source)
    assert sorted(line for line, _ in found) == [10, 11, 12, 13, 15, 16, 17, 19, 26], found
