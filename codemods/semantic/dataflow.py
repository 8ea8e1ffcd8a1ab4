"""Small, syntactic data-flow facts shared by rules.

Which names a statement binds or reads, which statements come after another one in
source order. These are deliberately simple (no aliasing, no control-flow merge): rules
use them to *rule out* a rewrite (fail closed), never to justify one on their own.
"""

from __future__ import annotations

from typing import Callable, Sequence

import libcst as cst
from autograd_fix.codemods.walk import SyntaxIndex, find_all, iter_descendants, walk


def simple_statements_after(body: cst.CSTNode, loop: cst.CSTNode) -> list[cst.CSTNode]:
    collector = _StatementsAfterLoop(loop)
    walk(body, collector)
    return collector.after


class _StatementsAfterLoop(cst.CSTVisitor):
    """Simple statements (and later loop targets) that come after `loop` in a body.

    Not `loops.StatementOrder`, which indexes every node for before/after questions."""

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
    if isinstance(node, cst.BaseAssignTargetExpression) or type(node) in (cst.Name, cst.Tuple, cst.List):
        finder = NameFinder()
        walk(node, finder)
        return finder.read  # a for-target: every name in it is (re)bound
    finder = NameFinder()
    walk(node, finder)
    return finder.bound


def read_names(node: cst.CSTNode) -> set[str]:
    if type(node) in (cst.Name, cst.Tuple, cst.List):
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
        if type(node) is cst.Name:
            self.bound.add(node.value)
        elif type(node) in (cst.Tuple, cst.List):
            for element in node.elements:
                self._targets(element.value)
        elif type(node) in (cst.Attribute, cst.Subscript):
            base = node
            while type(base) in (cst.Attribute, cst.Subscript):
                base = base.value
            if type(base) is cst.Name:
                self.bound.add(base.value)
        elif type(node) is cst.StarredElement:
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

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._targets(node.target)

    def visit_Call(self, node: cst.Call) -> None:
        # `outputs.append(x)`, `metrics.update(...)`: the receiver may be mutated
        if type(node.func) is cst.Attribute:
            base = node.func.value
            while type(base) in (cst.Attribute, cst.Subscript, cst.Call):
                base = base.func if type(base) is cst.Call else base.value
            if type(base) is cst.Name:
                self.bound.add(base.value)

    def visit_Name(self, node: cst.Name) -> None:
        self.read.add(node.value)


#: where a value made by one expression ends up, as far as its own function shows
REACHES_SINK = "sink"
RETURNED = "returned"
DROPPED = "dropped"


def result_flow(
    container: cst.FunctionDef,
    node: cst.CSTNode,
    is_sink: Callable[[cst.CSTNode], bool],
    syntax: SyntaxIndex | None = None,
) -> str:
    """Does the value of `node` (a call inside `container`) reach a statement `is_sink` accepts?

    A forward taint over the simple statements of `container` in source order, starting at
    the statement holding `node`: targets assigned from tainted names (and receivers such
    as `outputs.append(value)`) become tainted; a loop around `node` carries its taint into
    the loop's earlier statements (the next iteration). Taint is never cleared, so the
    answer errs towards REACHES_SINK. Returns REACHES_SINK, RETURNED (handed back by a
    `return`/`yield`: the callers decide) or DROPPED. A call in a compound statement's
    header (`if accuracy(model, val_loader) > best:`, `for out in predict(batches):`) is
    followed from that header; one found nowhere answers REACHES_SINK: unknown, fail closed.
    """
    contains = syntax.contains if syntax is not None else _contains
    statements = _ordered_simple_statements(container.body)
    index = next((i for i, statement in enumerate(statements) if contains(statement, node)), None)
    if index is None:
        return REACHES_SINK
    loop = _outermost_loop_around(container.body, node, contains, syntax)
    later = statements[index + 1 :]
    if loop is not None:
        in_loop = {id(inner) for inner in iter_descendants(loop)}  # one walk, not one per statement
        later += [statement for statement in statements[:index] if id(statement) in in_loop]
    returned = False
    tainted: set[str] = set()
    for position, statement in enumerate([statements[index], *later]):
        if position and not _reads(statement) & tainted:
            continue
        if is_sink(statement):
            return REACHES_SINK
        returned = returned or _hands_back(statement)
        tainted |= _writes(statement, node if not position else None)
    return RETURNED if returned else DROPPED


def _reads(statement: cst.CSTNode) -> set[str]:
    """Names read, with `self` refined to the attributes read (`self.history`)."""
    return (read_names(statement) - {"self"}) | _self_paths(statement)


def _writes(statement: cst.CSTNode, source: cst.CSTNode | None) -> set[str]:
    """Names (and `self.<attr>` paths) a statement binds or fills; `self` itself, the
    receiver of the method called, is not one (`self.validate(batch)` changes no name)."""
    written = assigned_names(statement) - {"self"}
    if source is not None:
        written -= assigned_names(source) - _assignment_names(source)
    return written | {path for path in _self_paths(statement) if _self_path_written(statement, path)}


def _assignment_names(node: cst.CSTNode) -> set[str]:
    finder = _AssignmentNameFinder()
    walk(node, finder)
    return finder.bound


class _AssignmentNameFinder(NameFinder):
    """Names bound by assignment only: a method call's receiver (`out.append(x)`) is not
    (a subclass, not an instance attribute: walks resolve handlers per visitor class)."""

    def visit_Call(self, node: cst.Call) -> None:
        return None


def _self_paths(statement: cst.CSTNode) -> set[str]:
    return {
        f"self.{node.attr.value}"
        for node in iter_descendants(statement)
        if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self"
    }


def _self_path_written(statement: cst.CSTNode, path: str) -> bool:
    """`self.history = ...`, `self.history[k] = ...`, `self.history.append(...)`."""
    attribute = path.split(".", 1)[1]
    for node in iter_descendants(statement):
        targets: list[cst.CSTNode] = []
        if type(node) is cst.Assign:
            targets = [target.target for target in node.targets]
        elif type(node) in (cst.AugAssign, cst.AnnAssign):
            targets = [node.target]
        elif type(node) is cst.Call and type(node.func) is cst.Attribute:
            targets = [node.func.value]
        for target in targets:
            while type(target) is cst.Subscript:
                target = target.value
            if (
                type(target) is cst.Attribute
                and target.attr.value == attribute
                and type(target.value) is cst.Name
                and target.value.value == "self"
            ):
                return True
    return False


def _contains(root: cst.CSTNode, node: cst.CSTNode) -> bool:
    return root is node or any(candidate is node for candidate in iter_descendants(root))


def _hands_back(statement: cst.CSTNode) -> bool:
    return any(type(node) in (cst.Return, cst.Yield) for node in iter_descendants(statement)) or type(statement) in (cst.Return, cst.Yield)


def _ordered_simple_statements(body: cst.CSTNode) -> list[cst.CSTNode]:
    collector = _SimpleStatements()
    walk(body, collector)
    return collector.statements


class _SimpleStatements(cst.CSTVisitor):
    """Simple statement lines in source order, with the headers of compound statements
    (an `if`/`while` test, a `for` iterable bound to its target, a `with` item bound to
    its `as` name) where they run, so that a value used there is followed like any
    other; nested functions and classes are theirs."""

    def __init__(self) -> None:
        super().__init__()
        self.statements: list[cst.CSTNode] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        self.statements.append(node)
        return False

    def visit_If(self, node: cst.If) -> None:
        self.statements.append(node.test)

    def visit_While(self, node: cst.While) -> None:
        self.statements.append(node.test)

    def visit_For(self, node: cst.For) -> None:
        self.statements.append(cst.Assign(targets=[cst.AssignTarget(node.target)], value=node.iter))

    def visit_WithItem(self, node: cst.WithItem) -> None:
        bound = node.asname is not None and type(node.asname.name) in (cst.Name, cst.Tuple, cst.List)
        self.statements.append(cst.Assign([cst.AssignTarget(node.asname.name)], node.item) if bound else node.item)

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> bool:
        self.statements.append(node)
        return False


def _outermost_loop_around(
    body: cst.CSTNode,
    node: cst.CSTNode,
    contains: Callable[[cst.CSTNode, cst.CSTNode], bool] = _contains,
    syntax: SyntaxIndex | None = None,
) -> cst.CSTNode | None:
    search = syntax.find if syntax is not None else find_all
    for candidate in search(body, (cst.For, cst.While), skip=(cst.FunctionDef, cst.ClassDef)):
        if contains(candidate, node):
            return candidate
    return None


def may_run_before(statements: Sequence[cst.CSTNode], target: cst.CSTNode) -> list[cst.CSTNode]:
    """The statements of straight-line code (a module's body) that can run before `target`.

    Earlier siblings at every level of nesting, and the whole of any loop around `target`
    (a later iteration runs after it). Branches beside `target`'s own (`else` of its `if`)
    are left out: they cannot run before it in the same pass. Only for code that runs
    once, such as a script's module level; a function can be called again, so inside one
    every statement may run before every other. Unknown shapes answer every statement.
    """
    for index, statement in enumerate(statements):
        if not _contains(statement, target):
            continue
        earlier = list(statements[:index])
        if statement is target or type(statement) in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
            return earlier
        if type(statement) in (cst.For, cst.While):
            return [*earlier, statement]
        for block in _blocks(statement):
            if any(_contains(child, target) for child in block):
                return [*earlier, *_headers(statement), *may_run_before(block, target)]
        return [*earlier, statement]
    return list(statements)


def _blocks(statement: cst.CSTNode) -> list[Sequence[cst.CSTNode]]:
    """Statement lists of an `if` (with its `elif`/`else` chain), `with` or `try`."""
    blocks: list[Sequence[cst.CSTNode]] = []
    if type(statement) is cst.If:
        blocks.append(statement.body.body)
        if type(statement.orelse) is cst.If:
            blocks.append([statement.orelse])
        elif statement.orelse is not None:
            blocks.append(statement.orelse.body.body)
    elif type(statement) is cst.With:
        blocks.append(statement.body.body)
    elif type(statement) in (cst.Try, cst.TryStar):
        # a handler or `finally` may run after any statement of the body: whole try then
        return []
    return blocks


def _headers(statement: cst.CSTNode) -> list[cst.CSTNode]:
    """Expressions of a compound statement that run before its blocks (`if` test, `with` items)."""
    if type(statement) is cst.If:
        return [statement.test]
    if type(statement) is cst.With:
        return [item.item for item in statement.items]
    return []


def stores_on_self(function: cst.FunctionDef) -> bool:
    """Does the function assign `self.<attr>` (or an item of it)? Its results then
    travel through the object, which the call-site data flow cannot follow."""
    for node in iter_descendants(function.body):
        targets: list[cst.BaseExpression] = []
        if type(node) is cst.Assign:
            targets = [target.target for target in node.targets]
        elif type(node) in (cst.AugAssign, cst.AnnAssign):
            targets = [node.target]
        for target in targets:
            base = target
            while type(base) in (cst.Attribute, cst.Subscript):
                base = base.value
            if base is not target and type(base) is cst.Name and base.value == "self":
                return True
    return False


def feeds_later_gradient(
    loop: cst.For | cst.While, container: cst.FunctionDef | None, uses_grad: Callable[[cst.CSTNode], bool]
) -> bool:
    """Do names the loop binds flow into a gradient computation (`uses_grad`) later in
    the same function (distillation targets computed in one loop, trained on after it)?

    A forward taint over the statements after the loop, in source order: assignments from
    tainted names taint their targets, rebinding without them clears the taint. At module
    level (`container` None) the answer is no: a script's later training is its own loop.
    """
    if container is None:
        return False
    statements = simple_statements_after(container.body, loop)
    tainted = bound_names(loop)
    for statement in statements:
        if read_names(statement) & tainted:
            if uses_grad(statement):
                return True
            tainted |= assigned_names(statement)
        else:
            tainted -= assigned_names(statement)
    return False
