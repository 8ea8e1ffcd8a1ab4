"""The analyses test node types exactly (`type(node) is cst.Name`), not with `isinstance`.

libcst's node classes have `ABCMeta` for their metaclass, so every `isinstance` that
fails costs a Python-level `__instancecheck__` call; on a static run that was about a
tenth of the analysis (issue 18, "Speed"). An exact test means the same only for a
concrete class that nothing subclasses. This guard holds every exact test in `codemods/`
to that, so a test against an abstract base (`type(x) is cst.BaseExpression`, always
False) or a class a later libcst subclasses fails here rather than silently.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import libcst as cst
import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "codemods").rglob("*.py"))


def _cst_classes(node: ast.expr) -> list[str]:
    """The `cst.X` names of an exact test's right-hand side (a class or a tuple of them)."""
    elements = node.elts if isinstance(node, ast.Tuple) else [node]
    return [
        element.attr
        for element in elements
        if isinstance(element, ast.Attribute) and isinstance(element.value, ast.Name) and element.value.id == "cst"
    ]


def exact_tests(source: str) -> list[tuple[int, str]]:
    """(line, class name) of every `type(E) is [not] cst.X` / `type(E) [not] in (cst.X, ...)`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare) or len(node.ops) != 1:
            continue
        left = node.left
        if not (isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "type"):
            continue
        if isinstance(node.ops[0], (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
            found += [(node.lineno, name) for name in _cst_classes(node.comparators[0])]
    return found


def _problem(name: str) -> str | None:
    cls = getattr(cst, name, None)
    if not (isinstance(cls, type) and issubclass(cls, cst.CSTNode)):
        return "not a libcst node class"
    if inspect.isabstract(cls) or name.startswith("Base"):
        return "an abstract base: no node's type is it"
    if cls.__subclasses__():
        return f"subclassed by {[sub.__name__ for sub in cls.__subclasses__()]}: use isinstance"
    return None


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(ROOT)))
def test_exact_type_tests_name_concrete_leaf_classes(path: Path) -> None:
    problems = [
        f"{path.relative_to(ROOT)}:{line}: cst.{name} is {problem}"
        for line, name in exact_tests(path.read_text(encoding="utf-8"))
        if (problem := _problem(name)) is not None
    ]
    assert not problems, "\n".join(problems)


def test_the_guard_finds_both_kinds_of_mistake() -> None:
    source = "ok = type(a) is cst.Name\nbad = type(b) is cst.BaseExpression\nalso = type(c) in (cst.Call, cst.BaseSuite)\n"
    names = [name for _, name in exact_tests(source)]
    assert names == ["Name", "BaseExpression", "Call", "BaseSuite"]
    assert _problem("Name") is None
    assert _problem("BaseExpression") is not None
    assert _problem("BaseSuite") is not None
    assert _problem("ParserSyntaxError") is not None


def test_the_codebase_uses_exact_tests() -> None:
    """The rewrite is in place (a guard over zero tests would prove nothing)."""
    assert sum(len(exact_tests(path.read_text(encoding="utf-8"))) for path in SOURCES) > 1000
