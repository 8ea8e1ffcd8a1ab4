"""Observables of autograd's own state: where a program reads them, and what they reach.

Why: a fix that stops recording a graph (``no_grad`` around an evaluation, a ``detach()``
on an accumulated loss, a mended graph break) changes ``x.requires_grad``, ``x.grad_fn``
and ``x.is_leaf`` by design. Where the program prints or keeps such a value (``seen.append(
out.requires_grad)``, ``print(loss.grad_fn is None)``), comparing it as an output rejected
the right fix ("outputs differ: seen[4]: True != False"). Where the rule's contract says
so (the check ``graph_state_may_change``), those values are expected to change, and the
verdict lists them instead.

What counts, read from the syntax tree of each side (pure ast, nothing runs here):

* a graph-state read: an attribute ``requires_grad``, ``grad_fn``, ``is_leaf``,
  ``_version``, or a call of ``is_grad_enabled`` / ``is_inference_mode_enabled`` /
  ``is_inference``;
* a name it reaches: assigned from an expression holding one (or holding a name it
  reached), or a container it is put into (``seen.append(...)``, ``stats[k] = ...``,
  ``self.flags.add(...)``), to a fixed point; an attribute target (``self.seen``) counts
  by its attribute name; ``return`` and the function's own name when a ``return``
  statement holds one (so ``stats = evaluate(...)`` is reached too);
* the lines of the statements holding one, and of call statements handed a name it
  reached (what a ``print`` there writes is tagged).

Only values shaped like graph state may differ at those places: booleans, ``None``
against a graph node (``<AddBackward0>``), and the constant strings a conditional
expression on graph state chooses between (``"on" if torch.is_anomaly_enabled() else
"off"``); a number kept in the same list is still compared. Anomaly mode's flag counts
as graph state: AGF017's fix turns it off on purpose.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

GRAPH_ATTRIBUTES = frozenset({"requires_grad", "grad_fn", "is_leaf", "_version"})
GRAPH_CALLS = frozenset({"is_grad_enabled", "is_inference_mode_enabled", "is_inference",
                         # anomaly mode: AGF017's fix turns it off by design
                         "is_anomaly_enabled", "is_anomaly_check_nan_enabled"})
_CONTAINER_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "appendleft"})
RETURN = "return"


@dataclass
class GraphState:
    """Where one side's source reads graph state (see the module docstring)."""

    names: set[str] = field(default_factory=set)
    lines: set[int] = field(default_factory=set)
    #: the constant strings a conditional expression on graph state chooses between
    #: (``"on" if torch.is_anomaly_enabled() else "off"``): they stand for the flag
    choices: set[str] = field(default_factory=set)


def _reads_graph_state(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr in GRAPH_ATTRIBUTES:
            return True
        if isinstance(sub, ast.Call):
            func = sub.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name in GRAPH_CALLS:
                return True
    return False


def _mentions(node: ast.AST, names: set[str]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in names:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in names and isinstance(sub.ctx, ast.Load):
            return True
    return False


def _target_names(target: ast.AST) -> set[str]:
    """The names an assignment target binds or fills (``x``, ``self.seen``, ``stats[k]``)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Attribute):
        return {target.attr}
    if isinstance(target, ast.Subscript):
        return _target_names(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_target_names(t) for t in target.elts)) if target.elts else set()
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return set()


def _flows(tree: ast.AST) -> list[tuple[set[str], ast.AST]]:
    """(names filled, the expression filling them) for every assignment and container call."""
    flows: list[tuple[set[str], ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            flows.append((set().union(*(_target_names(t) for t in node.targets)), node.value))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            flows.append((_target_names(node.target), node.value))
        elif isinstance(node, (ast.For, ast.comprehension)):
            flows.append((_target_names(node.target), node.iter))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _CONTAINER_METHODS:
            values = [*node.args, *(k.value for k in node.keywords)]
            if values:
                flows.append((_target_names(node.func.value), ast.Tuple(elts=values, ctx=ast.Load())))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Return) and sub.value is not None:
                    # what calls of the function get: `stats = evaluate(...)` reaches `stats`
                    flows.append(({RETURN, node.name}, sub.value))
    return flows


def graph_state(source: str) -> GraphState:
    """Where `source` reads graph state and which names those reads reach."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return GraphState()
    found = GraphState()
    flows = _flows(tree)
    changed = True
    while changed:
        changed = False
        for names, value in flows:
            if names <= found.names:
                continue
            if _reads_graph_state(value) or _mentions(value, found.names - {RETURN}):
                found.names |= names
                changed = True
    for node in ast.walk(tree):
        if isinstance(node, ast.IfExp) and _reads_graph_state(node.test):
            found.choices.update(branch.value for branch in (node.body, node.orelse)
                                 if isinstance(branch, ast.Constant) and isinstance(branch.value, str))
        if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For,
                                                                 ast.While, ast.If, ast.With, ast.Try)):
            # a statement that reads graph state, or a call statement (a `print`, a log
            # line) handed a value such a read reached
            if _reads_graph_state(node) or (isinstance(node, ast.Expr) and _mentions(node, found.names - {RETURN})):
                found.lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return found
