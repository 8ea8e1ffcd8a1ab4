"""Custom autograd Functions whose backward is wrong (AGF004): checked against finite
differences at the run's own inputs (in the child), and against the forward's input
count (here, from the source).

A forward that is flat where it was probed (a quantizer, a straight-through estimator)
cannot be judged by finite differences: no finding there.
"""

from __future__ import annotations

import ast
from typing import Any

from .outcome import Finding, Reader


#: finite differences at most this large: the forward is flat where it was probed
STRAIGHT_THROUGH = 1e-12


#: calls that make a Function's forward piecewise constant (its backward: straight-through)
PIECEWISE_CONSTANT = frozenset({"round", "floor", "ceil", "sign", "trunc", "argmax", "argmin", "heaviside",
                                "bucketize", "item"})


def custom_functions(seen: dict[str, Any], read: Reader) -> list[Finding]:
    found = []
    for function in seen.get("functions") or ():
        text = read(function["file"])
        inputs = function.get("inputs")
        miscounted = _miscounted_returns(text, function["class"], int(inputs)) if text is not None and inputs else []
        for line, count in miscounted:
            found.append(Finding("AGF004", function["file"], line,
                                 f"{function['class']}.backward returns {count} gradients here; its forward took {inputs} "
                                 f"inputs at the run's own call: return exactly one per input (None where there is none)",
                                 {"class": function["class"], "returned": count, "inputs": inputs}))
        # a forward flat where it was probed (finite differences exactly 0: `round`, a
        # sign, a quantizer) with a non-zero backward is a straight-through estimator by
        # design, not a wrong derivative
        wrong = {int(k): v for k, v in (function.get("positions") or {}).items()
                 if not v.get("match", True) and abs(float(v.get("numeric") or 0.0)) > STRAIGHT_THROUGH}
        if not wrong or miscounted or _quantizes(text, function["class"]):
            continue
        line = _return_line(text, function["class"]) if text is not None else None
        position, numbers = next(iter(sorted(wrong.items())))
        message = (f"{function['class']}.backward's gradient for input {position} disagrees with finite differences at the "
                   f"run's own inputs (<grad, v> = {numbers['analytic']:.6g}, finite differences {numbers['numeric']:.6g})")
        found.append(Finding("AGF004", function["file"], line or int(function["backward_line"]), message,
                             {"class": function["class"], "inputs": {str(k): v for k, v in wrong.items()}}))
    return found


def backward_of(tree: ast.Module, qualname: str, method: str = "backward") -> ast.FunctionDef | None:
    name = qualname.rsplit(".", 1)[-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    return item
    return None


def _quantizes(text: str | None, qualname: str) -> bool:
    """Whether the Function's forward rounds or reads a value out of the graph
    (``round``, ``floor``, ``sign``, ``.item()``...): a quantizer whose backward is a
    straight-through estimator by design, which finite differences cannot judge."""
    try:
        forward = backward_of(ast.parse(text or ""), qualname, "forward")
    except (SyntaxError, ValueError):
        return False
    if forward is None:
        return False
    for node in ast.walk(forward):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in PIECEWISE_CONSTANT:
                return True
    return False


def _miscounted_returns(text: str, qualname: str, inputs: int) -> list[tuple[int, int]]:
    """(line, count) of each ``return a, b, ...`` of ``<class>.backward`` whose tuple is
    not one gradient per forward input (a trailing extra None included: PyTorch lets it
    pass today, the next check may not)."""
    try:
        backward = backward_of(ast.parse(text), qualname)
    except (SyntaxError, ValueError):
        return []
    if backward is None:
        return []
    found = []
    stack: list[ast.AST] = list(backward.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
            elements = node.value.elts
            if not any(isinstance(e, ast.Starred) for e in elements) and len(elements) != inputs:
                found.append((node.lineno, len(elements)))
        stack.extend(ast.iter_child_nodes(node))
    return sorted(found)


def _return_line(text: str, qualname: str) -> int | None:
    """The last ``return`` of ``<class>.backward`` (where AGF004's fix goes)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    name = qualname.rsplit(".", 1)[-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "backward":
                    returns = [n.lineno for n in ast.walk(item) if isinstance(n, ast.Return)]
                    return max(returns) if returns else item.lineno
    return None
