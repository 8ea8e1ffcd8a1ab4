"""Is a retaining backward the last of several backwards of one graph, in straight-line code?

`loss.backward(retain_graph=True)` twice (or Lightning's `self.manual_backward(loss,
retain_graph=True)` twice): the first call needs `retain_graph=True` because the second
backpropagates through the same graph; the last one keeps the buffers for nothing when
nothing after it can reach the graph. This module answers only the "last of several, and
straight-line" part, from the statements alone; whether the graph is fresh and stays in
the scope is `FreshGraph`'s question. Any doubt answers None (the rule stays silent).
"""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.expressions import is_true
from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.semantic.loops import (
    all_nodes,
    backward_root,
    breaks_graph,
    expression_statement_call,
    has_keyword,
    innermost_loop,
    is_backward_call,
    read_name_nodes,
    statement_line,
)
from autograd_fix.codemods.torch_api import LOSS_REDUCTIONS


def retained_root(call: cst.Call) -> cst.Name | None:
    """The loss a retaining backward backpropagates: `loss` in `loss.backward(...)`,
    `loss.mean().backward(...)` and `self.manual_backward(loss, ...)` (Lightning); None for
    anything else."""
    if type(call.func) is not cst.Attribute:
        return None
    if call.func.attr.value == "backward":
        root = call.func.value
        if type(root) is cst.Call and not root.args and type(root.func) is cst.Attribute and root.func.attr.value in LOSS_REDUCTIONS:
            root = root.func.value  # `loss.mean().backward()`: the graph of `loss`, reduced right here
    elif call.func.attr.value == "manual_backward":
        positional = [a.value for a in call.args if a.keyword is None]
        root = positional[0] if positional else None
    else:
        return None
    return root if type(root) is cst.Name else None


def earlier_roots(
    call: cst.Call, gradient_calls: list[cst.Call], parents: dict[int, cst.CSTNode], imports: ImportIndex
) -> list[str] | None:
    """The roots of the scope's other gradient calls when `call` is the last of them and they
    all run, in order, in one block with no loop around it, each a plain backward statement
    whose root is a name, and one of them already backpropagates `call`'s root with
    `retain_graph=True` (one graph backpropagated several times). None otherwise: a later
    or conditional gradient call, `autograd.grad`, or a loop could reach the graph again."""
    root = retained_root(call)
    line = statement_line(call, parents)
    if root is None or line is None or innermost_loop(call, parents) is not None:
        return None
    holder = parents.get(id(line))
    if type(holder) not in (cst.IndentedBlock, cst.Module):
        return None
    statements = list(holder.body)
    position = statements.index(line)
    roots: list[str] = []
    repeated = False
    for other in gradient_calls:
        if other is call:
            continue
        other_line = statement_line(other, parents)
        if other_line is None or parents.get(id(other_line)) is not holder or expression_statement_call(other_line) is not other:
            return None
        if statements.index(other_line) >= position or not is_backward_call(other, imports):
            return None
        other_root = backward_root(other, imports)
        if type(other_root) is not cst.Name:
            return None
        roots.append(other_root.value)
        retains = has_keyword(other, "retain_graph")
        repeated = repeated or (other_root.value == root.value and retains is not None and is_true(retains.value))
    return roots if repeated else None


def passed_on_after(call: cst.Call, names: set[str], parents: dict[int, cst.CSTNode]) -> bool:
    """Does a statement after `call` in its block hand one of `names` (uncut) to a call,
    `y = helper(loss)`, which could backpropagate through the graph again out of sight?"""
    line = statement_line(call, parents)
    holder = parents.get(id(line)) if line is not None else None
    if line is None or type(holder) not in (cst.IndentedBlock, cst.Module):
        return True
    statements = list(holder.body)
    for statement in statements[statements.index(line) + 1 :]:
        for node in all_nodes(statement, cst.Call):
            assert type(node) is cst.Call
            for argument in node.args:
                if not breaks_graph(argument.value) and {n.value for n in read_name_nodes(argument.value)} & names:
                    return True
    return False

