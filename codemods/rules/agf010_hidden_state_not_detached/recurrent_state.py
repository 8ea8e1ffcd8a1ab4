"""Recurrent state a training loop feeds back into its own model call.

`output, hidden = model(x, hidden)` inside a loop that runs backward every iteration,
with `hidden` neither detached, re-initialised nor handed to another call: the next
backward runs into the previous iteration's graph. This finds those carries (the loop,
the call, the state's names and shape) and the state's value before the loop; the rule
decides how to detach it.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.names import name_tokens
from autograd_fix.codemods.semantic.dataflow import assigned_names
from autograd_fix.codemods.semantic.gradmode import with_disables_grad
from autograd_fix.codemods.walk import SyntaxIndex, walk

#: calls that run a backward pass on their (first) argument
_BACKWARD_FUNCTIONS = frozenset({"manual_backward"})


@dataclass
class Carry:
    """One recurrent call in a loop that feeds its own state back in."""

    loop: cst.For | cst.While
    statement: cst.Assign
    names: tuple[str, ...]
    #: the state is unpacked as separate names, `(h, c)`, rather than one name
    unpacked: bool


class FunctionFinder(cst.CSTVisitor):
    """Every function, and which scopes mention `backward` / `manual_backward` (cheap prefilter)."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__()
        self.functions: list[cst.FunctionDef] = []
        self.stack: list[cst.CSTNode] = [module]
        self.with_backward: set[int] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node)
        self.stack.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.stack.pop()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in {"backward", *_BACKWARD_FUNCTIONS}:
            self.with_backward.add(id(self.stack[-1]))

    def scopes(self) -> list[cst.CSTNode]:
        """The module and the functions whose own code (not a nested def's) runs a backward."""
        return [scope for scope in [self.stack[0], *self.functions] if id(scope) in self.with_backward]


class _ScopeWalker(cst.CSTVisitor):
    """Loops of one scope, in source order, with the assignments seen before each one."""

    def __init__(self, root: cst.CSTNode) -> None:
        super().__init__()
        self.root = root
        self.events: list[tuple[str, cst.CSTNode]] = []

    def _nested(self, node: cst.CSTNode) -> bool:
        return node is not self.root

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return not self._nested(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_For(self, node: cst.For) -> None:
        self.events.append(("loop", node))

    def visit_While(self, node: cst.While) -> None:
        self.events.append(("loop", node))

    def visit_Assign(self, node: cst.Assign) -> None:
        self.events.append(("assign", node))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self.events.append(("assign", node))


def find_carries(
    scope: cst.Module | cst.FunctionDef, imports: ImportIndex, state_words: frozenset[str],
    syntax: SyntaxIndex | None = None,
) -> list[tuple[Carry, dict[str, cst.BaseExpression | None]]]:
    """Recurrent calls of `scope` whose state is fed back across iterations, with the
    state's values before the loop (`state_words`: the project's `Role.STATE` vocabulary;
    the scope is walked off the file's index when given)."""
    walker = _ScopeWalker(scope)
    (syntax.walk if syntax is not None else walk)(scope, walker)
    results = []
    seen: set[int] = set()
    for position, (kind, node) in enumerate(walker.events):
        if kind != "loop":
            continue
        assert type(node) in (cst.For, cst.While)
        for carry in _loop_carries(node, imports, state_words):
            if id(carry.statement) in seen:
                continue  # an outer loop already owns this call
            seen.add(id(carry.statement))
            initial = _initial_values(walker.events[:position], carry.names)
            results.append((carry, initial))
    return results


def _loop_carries(loop: cst.For | cst.While, imports: ImportIndex, state_words: frozenset[str]) -> list[Carry]:
    """Recurrent calls in `loop` whose state is fed back with no detach in between."""
    if type(loop.body) not in (cst.IndentedBlock, cst.SimpleStatementSuite):
        return []
    statements = list(loop.body.body)
    backward_at = unconditional_backward_index(statements, imports)
    if backward_at is None:
        return []
    carries = []
    for index, assign in _reachable_assigns(statements, imports):
        if index >= backward_at:
            continue
        state = _fed_back_state(assign, imports, state_words)
        if state is None:
            continue
        names, unpacked = state
        if all(_untouched_elsewhere(loop, assign, name) for name in names):
            carries.append(Carry(loop, assign, names, unpacked))
    return carries


def unconditional_backward_index(statements, imports: ImportIndex) -> int | None:  # type: ignore[no-untyped-def]
    """Index of the first top-level statement (through `with`) that runs a backward pass."""
    for index, statement in enumerate(statements):
        if _has_backward(statement, imports, through_with=True):
            return index
    return None


def _has_backward(statement: cst.CSTNode, imports: ImportIndex, through_with: bool) -> bool:
    if type(statement) is cst.With:
        if with_disables_grad(statement, imports):
            return False
        return any(_has_backward(s, imports, through_with) for s in _block(statement.body))
    if type(statement) in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
        finder = _BackwardFinder(imports)
        walk(statement, finder)
        return finder.found
    return False


class _BackwardFinder(cst.CSTVisitor):
    def __init__(self, imports: ImportIndex) -> None:
        super().__init__()
        self.imports = imports
        self.found = False
        self.retains = False

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.imports.qualified_name(node.func)
        method = node.func.attr.value if type(node.func) is cst.Attribute else None
        if qualified == "torch.autograd.backward" or method == "backward" or method in _BACKWARD_FUNCTIONS:
            self.found = True
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "retain_graph":
                    if not (type(arg.value) is cst.Name and arg.value.value in {"False", "None"}):
                        self.retains = True


def retains_graph(loop: cst.For | cst.While) -> bool:
    finder = _BackwardFinder(ImportIndex())
    walk(loop.body, finder)
    return finder.retains


def _block(body: cst.BaseSuite) -> list[cst.CSTNode]:
    return list(body.body)


def _reachable_assigns(statements, imports: ImportIndex):  # type: ignore[no-untyped-def]
    """(top-level index, Assign) for assignments reached through `with` and inner loops.

    Assignments under `if`/`try` are skipped (a conditional state update: fail closed),
    as are those under a grad-disabling `with`.
    """
    for index, statement in enumerate(statements):
        for assign in _assigns_in(statement, imports):
            yield index, assign


def _assigns_in(statement: cst.CSTNode, imports: ImportIndex) -> list[cst.Assign]:
    if type(statement) in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
        return [s for s in statement.body if type(s) is cst.Assign]
    if type(statement) is cst.With:
        if with_disables_grad(statement, imports):
            return []
        return [a for s in _block(statement.body) for a in _assigns_in(s, imports)]
    if type(statement) in (cst.For, cst.While):
        return [a for s in _block(statement.body) for a in _assigns_in(s, imports)]
    return []


def _fed_back_state(
    assign: cst.Assign, imports: ImportIndex, state_words: frozenset[str]
) -> tuple[tuple[str, ...], bool] | None:
    """The state names a recurrent call reads and rebinds: `out, h = rnn(x, h)`."""
    if len(assign.targets) != 1 or type(assign.value) is not cst.Call:
        return None
    call = assign.value
    callee = dotted_name(call.func)
    if callee is None or imports.qualified_name(call.func) is not None:
        return None  # a torch API or a computed callee, not a model instance
    target = assign.targets[0].target
    for arg in call.args:
        if arg.star:
            continue
        names = _names_of(arg.value)
        if names is None or not all(set(name_tokens(n)) & state_words for n in names):
            continue
        if _binds_pattern(target, arg.value):
            return names, type(arg.value) in (cst.Tuple, cst.List)
    return None


def _names_of(node: cst.BaseExpression) -> tuple[str, ...] | None:
    if type(node) is cst.Name:
        return (node.value,)
    if type(node) in (cst.Tuple, cst.List) and node.elements:
        names = []
        for element in node.elements:
            if type(element.value) is not cst.Name or type(element) is cst.StarredElement:
                return None
            names.append(element.value.value)
        return tuple(names)
    return None


def _binds_pattern(target: cst.BaseExpression, pattern: cst.BaseExpression) -> bool:
    """Is `pattern` (a name or a tuple of names) the target or one element of it?"""
    if target.deep_equals(pattern) or _same_names(target, pattern):
        return True
    if type(target) in (cst.Tuple, cst.List):
        return any(_binds_pattern(e.value, pattern) for e in target.elements)
    return False


def _same_names(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    if type(a) in (cst.Tuple, cst.List) and type(b) in (cst.Tuple, cst.List):
        return _names_of(a) is not None and _names_of(a) == _names_of(b)
    return False


def _untouched_elsewhere(loop: cst.For | cst.While, statement: cst.Assign, name: str) -> bool:
    """`name` is not rebound, detached in place, or handed to another call in the loop."""
    checker = _TouchChecker(statement, name)
    walk(loop.body, checker)
    if type(loop) is cst.For and name in assigned_names(loop.target):
        return False
    return not checker.touched


class _TouchChecker(cst.CSTVisitor):
    def __init__(self, statement: cst.Assign, name: str) -> None:
        super().__init__()
        self.statement = statement
        self.name = name
        self.touched = False

    def visit_Assign(self, node: cst.Assign) -> bool:
        if node is self.statement:
            return False
        if any(self.name in assigned_names(t.target) for t in node.targets):
            self.touched = True
        return True

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self.name in assigned_names(node.target):
            self.touched = True

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self.name in assigned_names(node.target):
            self.touched = True

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        if self.name in assigned_names(node.target):
            self.touched = True

    def visit_For(self, node: cst.For) -> None:
        if self.name in assigned_names(node.target):
            self.touched = True

    def visit_AsName(self, node: cst.AsName) -> None:
        if self.name in assigned_names(node.name):
            self.touched = True

    def visit_Del(self, node: cst.Del) -> None:
        if self.name in assigned_names(node.target):
            self.touched = True

    def visit_Expr(self, node: cst.Expr) -> None:
        # `detach_hidden(hidden)`: a call whose result is dropped works by side effect
        call = node.value
        if type(call) is cst.Call and any(_mentions(arg.value, self.name) for arg in call.args):
            self.touched = True

    def visit_Call(self, node: cst.Call) -> None:
        callee = (dotted_name(node.func) or "").rsplit(".", 1)[-1].lower()
        if ("detach" in callee or "repackage" in callee) and any(_mentions(a.value, self.name) for a in node.args):
            self.touched = True
        if type(node.func) is cst.Attribute and node.func.attr.value.endswith("_"):
            if type(node.func.value) is cst.Name and node.func.value.value == self.name:
                self.touched = True  # `h.detach_()`, `h.zero_()`


def _mentions(node: cst.BaseExpression, name: str) -> bool:
    """`name` itself, or inside a tuple/list display (`(h, c)`), not deeper expressions."""
    if type(node) is cst.Name:
        return node.value == name
    if type(node) in (cst.Tuple, cst.List):
        return any(_mentions(e.value, name) for e in node.elements)
    return False


def _initial_values(events, names: tuple[str, ...]) -> dict[str, cst.BaseExpression | None]:  # type: ignore[no-untyped-def]
    """The last value assigned to each name before the loop (None: unknown or `None`)."""
    values: dict[str, cst.BaseExpression | None] = {}
    for kind, node in events:
        if kind != "assign":
            continue
        targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
        value = node.value
        for target in targets:
            for name in names:
                if name in assigned_names(target):
                    values[name] = _value_for(target, name, value)
    return values


def _value_for(target: cst.BaseExpression, name: str, value: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """The expression bound to `name`: the whole value, or its element when unpacked.

    `h, c = torch.zeros(...), torch.zeros(...)` -> the first `torch.zeros`; an unpacked
    call result (`h, c = model.init_hidden()`) -> the call (its element is a tensor).
    """
    if value is None or (type(value) is cst.Name and value.value == "None"):
        return None
    if type(target) is cst.Name:
        return value
    if type(target) in (cst.Tuple, cst.List) and type(value) in (cst.Tuple, cst.List):
        for element, item in zip(target.elements, value.elements):
            if name in assigned_names(element.value):
                return _value_for(element.value, name, item.value)
        return None
    return value
