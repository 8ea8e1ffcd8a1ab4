"""Gradient-accumulation windows: where a loop backpropagates every micro-batch and steps
the optimizer only every k-th time, and what k is (the analysis behind AGF019).

Two shapes are recognised, both from syntax and the loop's own statements:

* **a step under an accumulation test**: `loss.backward()` runs on every iteration of a
  loop and `optimizer.step()` sits under `if (i + 1) % k == 0:` (also `i % k == k - 1`,
  `not (i + 1) % k`, the test in an `or` / `and`, or a flag the iteration binds to such
  a test, `is_grad_step = (batch_idx + 1) % k == 0`; or a counter the iteration
  increments and the step compares, `if count == k:` / `if count >= k:`);
* **a micro-batch loop**: `for micro_step in range(k):` backpropagates on every pass and
  the enclosing loop steps after it (nanoGPT's shape).

A loop that also zeroes gradients on every micro-batch accumulates nothing and has no
window. Which `.step()` is an optimizer's is the caller's question (roles come from
evidence in the rule's scope), passed in as `is_step`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.semantic.loops import (
    all_nodes,
    ancestors,
    bindings,
    innermost_loop,
    is_gradient_call,
    local_nodes,
    runs_every_iteration,
)

_LOOPS = (cst.For, cst.While)
_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


@dataclass(frozen=True)
class AccumulationWindow:
    """One loop that backpropagates `len(backwards)` times per micro-batch and steps every
    `count` micro-batches."""

    #: the loop whose iterations are the micro-batches
    micro_loop: cst.For | cst.While
    #: the gradient calls of one micro-batch (each runs on every iteration of `micro_loop`)
    backwards: tuple[cst.Call, ...]
    #: the optimizer steps that end a window
    steps: tuple[cst.Call, ...]
    #: the accumulation count as the code writes it (`accum_steps`, `args.gradient_accumulation_steps`, `4`)
    count: cst.BaseExpression
    #: the nodes that only count micro-batches (the test, the `range(k)` call): uses of the
    #: count there are not scaling
    counting: tuple[cst.CSTNode, ...]


def accumulation_windows(
    root: cst.CSTNode,
    imports: ImportIndex,
    parents: dict[int, cst.CSTNode],
    is_step: Callable[[cst.Call], bool],
) -> list[AccumulationWindow]:
    """Every accumulation window under `root` (a function or the module)."""
    found: list[AccumulationWindow] = []
    for loop in all_nodes(root, _LOOPS):
        assert type(loop) in (cst.For, cst.While)
        window = _tested_window(loop, imports, parents, is_step) or _micro_loop_window(loop, imports, parents, is_step)
        if window is not None:
            found.append(window)
    return found


def _gradient_calls(loop: cst.For | cst.While, imports: ImportIndex, parents: dict[int, cst.CSTNode]) -> list[cst.Call]:
    return [c for c in local_nodes(loop.body, cst.Call) if is_gradient_call(c, imports) and innermost_loop(c, parents) is loop]  # type: ignore[misc]


def _zeroes_every_iteration(loop: cst.For | cst.While, parents: dict[int, cst.CSTNode]) -> bool:
    for call in local_nodes(loop.body, cst.Call):
        assert type(call) is cst.Call
        if type(call.func) is cst.Attribute and call.func.attr.value == "zero_grad" and runs_every_iteration(call, loop, parents):
            return True
    return False


def _tested_window(
    loop: cst.For | cst.While, imports: ImportIndex, parents: dict[int, cst.CSTNode], is_step: Callable[[cst.Call], bool]
) -> AccumulationWindow | None:
    backwards = _gradient_calls(loop, imports, parents)
    if not backwards or not all(runs_every_iteration(c, loop, parents) for c in backwards):
        return None
    if _zeroes_every_iteration(loop, parents):
        return None
    steps = [c for c in local_nodes(loop.body, cst.Call) if is_step(c) and innermost_loop(c, parents) is loop]  # type: ignore[arg-type]
    if not steps:
        return None
    flags = _flags(loop)
    counters = _counters(loop, parents)
    count: cst.BaseExpression | None = None
    counting: list[cst.CSTNode] = []
    for step in steps:
        test = _guarding_test(step, loop, parents, flags, counters)  # type: ignore[arg-type]
        if test is None:
            return None  # a step on every iteration (or under a test we do not read)
        if count is not None and _code(count) != _code(test[0]):
            return None
        count = test[0]
        counting.append(test[1])
    assert count is not None
    return AccumulationWindow(loop, tuple(backwards), tuple(steps), count, tuple(counting))  # type: ignore[arg-type]


def _micro_loop_window(
    loop: cst.For | cst.While, imports: ImportIndex, parents: dict[int, cst.CSTNode], is_step: Callable[[cst.Call], bool]
) -> AccumulationWindow | None:
    """`for micro_step in range(k): ... loss.backward()` inside a loop that steps after it."""
    if type(loop) is not cst.For or type(loop.iter) is not cst.Call or dotted_name(loop.iter.func) != "range":
        return None
    arguments = [a for a in loop.iter.args if a.keyword is None and not a.star]
    if len(arguments) != len(loop.iter.args) or not arguments or len(arguments) > 2:
        return None
    if len(arguments) == 2 and not (type(arguments[0].value) is cst.Integer and arguments[0].value.value == "0"):
        return None
    count = arguments[-1].value
    if _is_literal_below_two(count):
        return None
    backwards = _gradient_calls(loop, imports, parents)
    if not backwards or not all(runs_every_iteration(c, loop, parents) for c in backwards) or _zeroes_every_iteration(loop, parents):
        return None
    if any(is_step(c) for c in all_nodes(loop.body, cst.Call)):  # type: ignore[arg-type]
        return None  # steps inside the micro-batch loop: not this shape
    outer = next((p for p in ancestors(loop, parents) if isinstance(p, _LOOPS) or isinstance(p, _NESTED)), None)
    if not isinstance(outer, _LOOPS):
        return None
    steps = [c for c in local_nodes(outer.body, cst.Call) if is_step(c) and innermost_loop(c, parents) is outer]  # type: ignore[arg-type]
    if not steps or any(bindings_of_count(count, loop)):
        return None
    return AccumulationWindow(loop, tuple(backwards), tuple(steps), count, (loop.iter,))  # type: ignore[arg-type]


def bindings_of_count(count: cst.BaseExpression, loop: cst.CSTNode) -> list[str]:
    """Names of the count the loop itself rebinds (then it is not one count)."""
    name = dotted_name(count)
    return [b.name for b in bindings(loop) if name is not None and b.name == name]


def _flags(loop: cst.For | cst.While) -> dict[str, cst.BaseExpression]:
    """`is_grad_step = <test>` bound once in the loop: name -> test."""
    found: dict[str, list[cst.BaseExpression]] = {}
    for binding in bindings(loop.body):
        if binding.kind in ("assign", "annassign") and binding.value is not None:
            found.setdefault(binding.name, []).append(binding.value)
        else:
            found.setdefault(binding.name, []).append(cst.Name("_unknown_"))
    return {name: values[0] for name, values in found.items() if len(values) == 1}


def _counters(loop: cst.For | cst.While, parents: dict[int, cst.CSTNode]) -> set[str]:
    """Names the loop increments by one on every iteration (`count += 1`)."""
    found: set[str] = set()
    for statement in local_nodes(loop.body, cst.AugAssign):
        assert type(statement) is cst.AugAssign
        if (
            type(statement.operator) is cst.AddAssign
            and type(statement.target) is cst.Name
            and type(statement.value) is cst.Integer
            and statement.value.value == "1"
            and runs_every_iteration(statement, loop, parents)
        ):
            found.add(statement.target.value)
    return found


def _guarding_test(
    step: cst.Call,
    loop: cst.For | cst.While,
    parents: dict[int, cst.CSTNode],
    flags: dict[str, cst.BaseExpression],
    counters: set[str],
) -> tuple[cst.BaseExpression, cst.CSTNode] | None:
    """(count, test node) of the nearest `if` around `step` (inside `loop`) whose test is
    an accumulation test, or None."""
    child: cst.CSTNode = step
    for parent in ancestors(step, parents):
        if parent is loop:
            return None
        if type(parent) is cst.If and child is parent.body:
            found = _accumulation_test(parent.test, flags, counters)
            if found is not None:
                return found, parent.test
        child = parent
    return None


def _accumulation_test(
    test: cst.BaseExpression, flags: dict[str, cst.BaseExpression], counters: set[str], depth: int = 0
) -> cst.BaseExpression | None:
    """The count `k` of a test that is true once every k micro-batches, else None."""
    if depth > 3:
        return None
    test = _strip(test)
    if type(test) is cst.BooleanOperation:
        return _accumulation_test(test.left, flags, counters, depth + 1) or _accumulation_test(test.right, flags, counters, depth + 1)
    if type(test) is cst.Name and test.value in flags:
        return _accumulation_test(flags[test.value], flags, counters, depth + 1)
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return _modulo_count(_strip(test.expression))  # `not (i + 1) % k`
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    comparison = test.comparisons[0]
    left, right = _strip(test.left), _strip(comparison.comparator)
    if type(comparison.operator) is cst.Equal:
        for side, other in ((left, right), (right, left)):
            count = _modulo_count(side)
            if count is not None and (_is_int(other, "0") or _is_count_minus_one(other, count)):
                return count
    if type(comparison.operator) in (cst.Equal, cst.GreaterThanEqual) and type(left) is cst.Name and left.value in counters:
        return None if _is_literal_below_two(right) else right
    return None


def _modulo_count(node: cst.BaseExpression) -> cst.BaseExpression | None:
    node = _strip(node)
    if type(node) is cst.BinaryOperation and type(node.operator) is cst.Modulo:
        count = _strip(node.right)
        return None if _is_literal_below_two(count) else count
    return None


def _is_count_minus_one(node: cst.BaseExpression, count: cst.BaseExpression) -> bool:
    if type(count) is cst.Integer and type(node) is cst.Integer:
        return int(node.value, 0) == int(count.value, 0) - 1
    return (
        type(node) is cst.BinaryOperation
        and type(node.operator) is cst.Subtract
        and _code(_strip(node.left)) == _code(count)
        and _is_int(_strip(node.right), "1")
    )


def _is_int(node: cst.BaseExpression, value: str) -> bool:
    return type(node) is cst.Integer and node.value == value


def _is_literal_below_two(node: cst.BaseExpression) -> bool:
    return type(node) is cst.Integer and int(node.value, 0) < 2 or type(node) in (cst.Float, cst.SimpleString)


def _strip(node: cst.BaseExpression) -> cst.BaseExpression:
    """The expression without its parentheses (libcst keeps them on the node)."""
    return node.with_changes(lpar=(), rpar=()) if getattr(node, "lpar", None) else node


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)
