"""What unit finding derives from source text, remembered for one run.

A file with N findings is verified as N patches, each a full version of the file. Every
question `find_units` asks of a version (the names it binds at import, the globals a
function reads, who calls whom) used to walk the whole file again, so each patch cost
more the more findings its file had, and the run grew with N squared. Consecutive
versions share all but a statement or two, so answers are kept per top-level statement,
keyed by that statement's own text and position on its line: a patch pays only for the
statements it changed. Parsed versions are kept too, because each patch's rewritten
version is the next patch's original.

One memo lives as long as one verification run (the cli creates it with its shadow
copies); nothing here is module-level state.
"""

from __future__ import annotations

import ast
import builtins
import symtable
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Generic, Hashable, TypeVar

Parsed = TypeVar("Parsed")

#: a statement's identity: its source lines, and where on its first and last line it sits
StatementKey = tuple[str, int, int]


@dataclass(frozen=True)
class CallFacts:
    """Calls a statement makes directly: ``name(...)`` and ``self.name(...)``."""

    plain: frozenset[str]
    on_self: frozenset[str]


def statement_key(segment: str, node: ast.stmt) -> StatementKey:
    """Two statements on one line (``a = 1; b = 2``) share their lines, not their columns."""
    return (segment, node.col_offset, node.end_col_offset or 0)


def bound_names(node: ast.stmt) -> frozenset[str]:
    """Names a top-level statement binds when the module is imported.

    The walk never enters a definition's body: a definition it meets is at module scope
    (perhaps under an ``if`` or ``try``) and binds its own name, while names assigned in
    its body are local unless declared ``global`` there (those are collected). Lambdas
    and comprehensions are their own scopes too."""
    names: set[str] = set()
    stack: list[ast.AST] = [node]
    while stack:
        sub = stack.pop()
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(sub.name)
            names |= {name for inner in ast.walk(sub) if isinstance(inner, ast.Global) for name in inner.names}
            continue
        if isinstance(sub, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(sub, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in sub.names}
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            names.add(sub.id)
        elif isinstance(sub, ast.Global):
            names |= set(sub.names)
        stack.extend(ast.iter_child_nodes(sub))
    return frozenset(names)


def call_facts(node: ast.stmt) -> CallFacts:
    plain: set[str] = set()
    on_self: set[str] = set()
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Call):
            continue
        func = sub.func
        if isinstance(func, ast.Name):
            plain.add(func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            on_self.add(func.attr)
    return CallFacts(frozenset(plain), frozenset(on_self))


def global_reads(table: symtable.SymbolTable) -> frozenset[str]:
    """Globals read in `table` and the scopes nested in it, builtins excluded."""
    found: set[str] = set()
    pending = [table]
    while pending:
        current = pending.pop()
        for sym in current.get_symbols():
            if sym.is_global() and sym.is_referenced():
                found.add(sym.get_name())
        pending.extend(current.get_children())
    return frozenset(name for name in found if not hasattr(builtins, name) and name not in {"__name__", "__file__"})


def definition_reads(segment: str, path: str, qualname: str) -> frozenset[str] | None:
    """Globals the definition `qualname` (top-level name first) reads, from the symbol
    table of its own text; None when that text does not stand alone."""
    try:
        table = symtable.symtable(segment, path, "exec")
    except SyntaxError:
        return None
    head, *rest = qualname.split(".")
    current = next((child for child in table.get_children() if child.get_name() == head), None)
    for part in rest:
        if current is None:
            break
        current = next((child for child in current.get_children() if child.get_name() == part), None)
    return frozenset() if current is None else global_reads(current)


class _Bounded(Generic[Parsed]):
    """A dict that forgets its oldest entries past `limit` (a run over a big tree must not
    keep every statement it ever saw)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._items: OrderedDict[Hashable, Parsed] = OrderedDict()

    def get(self, key: Hashable, make: Callable[[], Parsed]) -> Parsed:
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        value = make()
        self._items[key] = value
        if len(self._items) > self._limit:
            self._items.popitem(last=False)
        return value


class SourceMemo:
    """Per-statement answers and recently parsed versions, for one verification run."""

    #: versions kept: a patch's original and rewritten, and a few to spare
    MODULES = 8
    #: statements kept per kind of answer
    STATEMENTS = 50_000

    def __init__(self) -> None:
        self._modules: _Bounded[object] = _Bounded(self.MODULES)
        self._names: _Bounded[frozenset[str]] = _Bounded(self.STATEMENTS)
        self._calls: _Bounded[CallFacts] = _Bounded(self.STATEMENTS)
        self._reads: _Bounded[frozenset[str] | None] = _Bounded(self.STATEMENTS)

    def module(self, source: str, path: str, parse: Callable[[], Parsed]) -> Parsed:
        """The parsed version of `source`, parsed once while it is recent."""
        return self._modules.get((path, source), parse)  # type: ignore[return-value]

    def bound_names(self, segment: str, node: ast.stmt) -> frozenset[str]:
        return self._names.get(statement_key(segment, node), lambda: bound_names(node))

    def calls(self, segment: str, node: ast.stmt) -> CallFacts:
        return self._calls.get(statement_key(segment, node), lambda: call_facts(node))

    def reads(self, segment: str, node: ast.stmt, path: str, qualname: str) -> frozenset[str] | None:
        return self._reads.get((statement_key(segment, node), qualname), lambda: definition_reads(segment, path, qualname))
