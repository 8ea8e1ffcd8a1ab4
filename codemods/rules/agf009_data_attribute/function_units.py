"""A function body flattened into the steps it runs, in source order.

Each small statement, and each compound statement's header (an `if` test, a `for`
target, a `with` item), is one unit, with the blocks that enclose it (and whether each is
a loop body). Rules use it to ask "is `name` used between these two steps, or in a loop
around them?" and "can a nested function, lambda, class or `global` see `name`?", e.g.
AGF009's writes into a module built a few lines earlier.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autograd_fix.codemods.walk import children_of, walk


def chain_root(node: cst.BaseExpression) -> str | None:
    """`m.weight` / `m.block.bias` -> 'm': a plain attribute chain on a name (at least one attribute)."""
    if type(node) is not cst.Attribute:
        return None
    while type(node) is cst.Attribute:
        node = node.value
    return node.value if type(node) is cst.Name else None


def uses_name(node: cst.CSTNode, name: str, allowed: set[int]) -> bool:
    """Does `name` occur in `node` other than as the root of one of the `allowed` `.data` writes?"""
    if type(node) is cst.Name:
        return node.value == name
    if type(node) is cst.Attribute:
        if id(node) in allowed and chain_root(node.value) == name:
            return False
        return uses_name(node.value, name, allowed)  # `x.name` is not a use of `name`
    # syntactic children only (libcst's `.children` rebuilds the subtree to list them)
    return any(uses_name(child, name, allowed) for child in children_of(node))


@dataclass(frozen=True)
class Unit:
    """A piece of a function run as one step: a small statement or a compound statement's header."""

    node: cst.CSTNode
    #: the statement line of a small statement (None for headers and opaque statements)
    line: cst.SimpleStatementLine | None
    #: enclosing blocks, outermost first: (id of the block, is it a loop body)
    blocks: tuple[tuple[int, bool], ...]


class FunctionUnits:
    """A function body (not nested functions) flattened into units in source order."""

    def __init__(self, function: cst.FunctionDef) -> None:
        self.items: list[Unit] = []
        self.nested: list[cst.CSTNode] = []
        self._suite(function.body, ())
        self.index = {id(unit.node): i for i, unit in enumerate(self.items)}
        finder = _NestedScopeFinder()
        walk(function.body, finder)
        self.nested = finder.found

    def captured(self, name: str) -> bool:
        """Can code elsewhere (a nested function, lambda or class; `global`) see `name`?"""
        return any(uses_name(node, name, set()) for node in self.nested)

    def _suite(self, suite: cst.BaseSuite, blocks: tuple[tuple[int, bool], ...]) -> None:
        if type(suite) is cst.SimpleStatementSuite:
            self.items.extend(Unit(small, None, blocks) for small in suite.body)
            return
        assert type(suite) is cst.IndentedBlock
        for statement in suite.body:
            self._statement(statement, blocks)

    def _statement(self, node: cst.BaseStatement, blocks: tuple[tuple[int, bool], ...]) -> None:
        add = self.items.append
        if type(node) is cst.SimpleStatementLine:
            self.items.extend(Unit(small, node, blocks) for small in node.body)
        elif type(node) is cst.If:
            add(Unit(node.test, None, blocks))
            self._suite(node.body, blocks + ((id(node.body), False),))
            if type(node.orelse) is cst.If:
                self._statement(node.orelse, blocks + ((id(node.orelse), False),))
            elif node.orelse is not None:
                self._suite(node.orelse.body, blocks + ((id(node.orelse), False),))
        elif type(node) in (cst.For, cst.While):
            inner = blocks + ((id(node.body), True),)
            if type(node) is cst.For:
                add(Unit(node.iter, None, blocks))
                add(Unit(node.target, None, inner))
            else:
                add(Unit(node.test, None, inner))
            self._suite(node.body, inner)
            if node.orelse is not None:
                self._suite(node.orelse.body, blocks + ((id(node.orelse), False),))
        elif type(node) is cst.With:
            for item in node.items:
                add(Unit(item, None, blocks))
            self._suite(node.body, blocks + ((id(node.body), False),))
        elif type(node) in (cst.Try, cst.TryStar):
            self._suite(node.body, blocks + ((id(node.body), False),))
            for handler in node.handlers:
                inner = blocks + ((id(handler), False),)
                if handler.type is not None:
                    add(Unit(handler.type, None, inner))
                if handler.name is not None:
                    add(Unit(handler.name, None, inner))
                self._suite(handler.body, inner)
            if node.orelse is not None:
                self._suite(node.orelse.body, blocks + ((id(node.orelse), False),))
            if node.finalbody is not None:
                self._suite(node.finalbody.body, blocks + ((id(node.finalbody), False),))
        else:
            add(Unit(node, None, blocks))  # nested definitions, match, anything newer: opaque


class _NestedScopeFinder(cst.CSTVisitor):
    """Nested functions, lambdas, classes and `global`/`nonlocal` statements of a function body."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[cst.CSTNode] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.found.append(node)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.found.append(node)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        self.found.append(node)
        return False

    def visit_Global(self, node: cst.Global) -> None:
        self.found.append(node)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.found.append(node)
