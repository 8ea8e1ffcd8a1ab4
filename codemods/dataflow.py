"""Small, syntactic data-flow facts shared by rules.

Which names a statement binds or reads, which statements come after another one in
source order. These are deliberately simple (no aliasing, no control-flow merge): rules
use them to *rule out* a rewrite (fail closed), never to justify one on their own.
"""

from __future__ import annotations

import libcst as cst
from autograd_fix.codemods.walk import walk


def simple_statements_after(body: cst.CSTNode, loop: cst.CSTNode) -> list[cst.CSTNode]:
    collector = StatementOrder(loop)
    walk(body, collector)
    return collector.after


class StatementOrder(cst.CSTVisitor):
    def __init__(self, loop: cst.CSTNode) -> None:
        super().__init__()
        self.loop = loop
        self.seen_loop = False
        self.after: list[cst.CSTNode] = []

    def visit_For(self, node: cst.For) -> bool:
        if node is self.loop:
            self.seen_loop = True
            return False
        if self.seen_loop:
            self.after.append(node.target)
        return True

    def visit_While(self, node: cst.While) -> bool:
        if node is self.loop:
            self.seen_loop = True
            return False
        return True

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        if self.seen_loop:
            self.after.append(node)
        return False


def bound_names(node: cst.CSTNode) -> set[str]:
    finder = NameFinder()
    walk(node, finder)
    return finder.bound


def assigned_names(node: cst.CSTNode) -> set[str]:
    if isinstance(node, cst.BaseAssignTargetExpression) or isinstance(node, (cst.Name, cst.Tuple, cst.List)):
        finder = NameFinder()
        walk(node, finder)
        return finder.read  # a for-target: every name in it is (re)bound
    finder = NameFinder()
    walk(node, finder)
    return finder.bound


def read_names(node: cst.CSTNode) -> set[str]:
    if isinstance(node, (cst.Name, cst.Tuple, cst.List)):
        return set()
    finder = NameFinder()
    walk(node, finder)
    return finder.read


class NameFinder(cst.CSTVisitor):
    """Names bound (assignment/for/with targets, mutated receivers) and read in a subtree."""

    def __init__(self) -> None:
        super().__init__()
        self.bound: set[str] = set()
        self.read: set[str] = set()

    def _targets(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Name):
            self.bound.add(node.value)
        elif isinstance(node, (cst.Tuple, cst.List)):
            for element in node.elements:
                self._targets(element.value)
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            base = node
            while isinstance(base, (cst.Attribute, cst.Subscript)):
                base = base.value
            if isinstance(base, cst.Name):
                self.bound.add(base.value)
        elif isinstance(node, cst.StarredElement):
            self._targets(node.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._targets(target.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._targets(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._targets(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._targets(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._targets(node.name)

    def visit_Call(self, node: cst.Call) -> None:
        # `outputs.append(x)`, `metrics.update(...)`: the receiver may be mutated
        if isinstance(node.func, cst.Attribute):
            base = node.func.value
            while isinstance(base, (cst.Attribute, cst.Subscript, cst.Call)):
                base = base.func if isinstance(base, cst.Call) else base.value
            if isinstance(base, cst.Name):
                self.bound.add(base.value)

    def visit_Name(self, node: cst.Name) -> None:
        self.read.add(node.value)
