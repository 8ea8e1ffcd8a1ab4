"""Graphs that outlive their iteration: a hidden state fed back into a forward with its
old graph (AGF010), an output reused in its own iteration after a step updated what its
graph saved (AGF003), and variables or containers that hold the graphs of several
iterations (AGF006, or AGF010 for a module attribute such as ``self.hidden``).

The run names the holder (a variable, a container, an attribute); the source says
where it is added to, which is where the rule's fix (``.detach()``/``.item()``) goes.
"""

from __future__ import annotations

import ast
from typing import Any

from .outcome import Finding, Reader


def recurrent(seen: dict[str, Any], stepped: bool) -> list[Finding]:
    found = []
    for entry in seen.get("recurrent") or ():
        behind = int(entry["steps_behind"] if stepped else entry["backwards_behind"])
        if behind < 1:
            continue
        unit = "optimizer step" if stepped else "backward pass"
        message = (f"an input of this forward carries the graph of an earlier iteration ({behind} {unit}"
                   f"{'s' if behind != 1 else ''} back, already backpropagated), at {entry['forwards']} "
                   f"forward{'s' if entry['forwards'] != 1 else ''}: detach the state between iterations")
        found.append(Finding("AGF010", entry["file"], int(entry["line"]), message,
                             {"forwards": entry["forwards"], "iterations_behind": behind}))
    return found


#: the errors a backward through a reused, updated graph stops with (freed, or retained)
REUSE_ERRORS = ("backward through the graph a second time", "modified by an inplace operation")


def reused(seen: dict[str, Any], error: str) -> list[Finding]:
    """An output fed again into a forward in the iteration that made it (the pass that
    made it has not run since), after a backward went through its graph and an optimizer
    step updated, in place, parameters that graph reaches (a GAN's ``D(fake)`` after the
    generator's step), in a run that then stopped with the error a backward through it
    meets (`error`: a freed graph, or saved parameters modified in place). AGF003, the
    in-place update of what the graph saved, at the forward that reuses it. Without an
    update since, the reuse of a retained graph is legitimate; without the error, no
    backward went through it (``G(y, e_hat).detach()``): neither is reported."""
    if not any(text in error for text in REUSE_ERRORS):
        return []
    found = []
    for entry in seen.get("reused") or ():
        if int(entry.get("updated") or 0) < 1:
            continue
        made = entry.get("made_at") or ["", 0]
        message = (f"this forward reuses the output made at line {made[1]} in this iteration, after a backward went "
                   f"through its graph and an optimizer step updated {entry['updated']} of the parameters it reaches in "
                   "place: a backward through it fails (graph freed, or saved parameters modified): detach the reused output")
        found.append(Finding("AGF003", entry["file"], int(entry["line"]), message,
                             {"forwards": entry["forwards"], "reused_from": int(made[1]), "updated_params": entry["updated"]}))
    return found


def holders(seen: dict[str, Any], stepped: bool, read: Reader, recurrent_files: set[str]) -> list[Finding]:
    found = []
    for holder in seen.get("holders") or ():
        tags = [tuple(tag) for tag in holder.get("tags") or ()]
        iterations = len({tag[0] if stepped else tag[1] for tag in tags})
        if iterations < 2:
            continue
        name = holder["name"]
        # a module's attribute is its state (``self.hidden``: AGF010); a tracker object's
        # attribute is an accumulator like a variable (AGF006)
        attribute = "." in name and holder.get("kind") != "object"
        code = "AGF010" if attribute else "AGF006"
        if attribute and holder["file"] in recurrent_files:
            continue  # the forward that consumes it is already reported
        text = read(holder["file"])
        lines = _accumulation_lines(text, name, int(holder["first_line"]), holder.get("kind") == "object") if text is not None else []
        where = f"`{name}`" + (f" (in {holder['function']})" if holder["function"] not in ("<module>",) else "")
        message = (f"{where} holds the graphs of {iterations} iterations ({holder['nodes']} autograd nodes): "
                   + ("detach it between iterations" if attribute else "accumulate loss.item() or loss.detach()"))
        for line in lines or [0]:  # 0: no statement adds to it (placed below)
            found.append(Finding(code, holder["file"], line or int(holder["first_line"]) or 1, message,
                                 {"holder": name, "iterations": iterations, "graph_nodes": holder["nodes"],
                                  "accumulates": bool(lines)}))
    # a holder no statement adds to (`epoch_loss = total_loss / n`) holds an accumulator's
    # graph: reported where the accumulator adds to it, not on its own function's first line
    placed = {f.path for f in found if f.evidence["accumulates"]}
    return [f for f in found if f.evidence["accumulates"] or f.path not in placed]


def _scope(tree: ast.Module, first_line: int) -> ast.AST:
    if first_line <= 1:
        return tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            node.lineno == first_line or (node.decorator_list and node.decorator_list[0].lineno == first_line)
        ):
            return node
    return tree


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _target_name(target: ast.AST) -> str | None:
    while isinstance(target, ast.Subscript):
        target = target.value
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return "*." + target.attr
    return None


def _accumulation_lines(text: str, name: str, first_line: int, adding_only: bool = False) -> list[int]:
    """Statements that add to `name` (``+=``, ``x = x + ...``, ``.append``), those in loops
    first; for ``obj.attr``, assignments to any ``*.attr`` (`adding_only`: those whose
    value reads the attribute, as an accumulator's do; resetting it to 0 adds nothing)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    scope = tree if "." in name else _scope(tree, first_line)
    wanted = "*." + name.rsplit(".", 1)[1] if "." in name else name
    in_loop: list[int] = []
    other: list[int] = []

    def visit(node: ast.AST, looping: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not scope and "." not in name:
                continue
            hit = False
            if isinstance(child, ast.AugAssign) and _target_name(child.target) == wanted:
                hit = True
            elif isinstance(child, ast.Assign) and any(_target_name(t) == wanted for t in child.targets):
                if "." in name:
                    hit = not adding_only or any(isinstance(n, ast.Attribute) and "*." + n.attr == wanted
                                                 for n in ast.walk(child.value))
                else:
                    hit = _mentions(child.value, name)
            elif isinstance(child, ast.Expr) and isinstance(child.value, ast.Call):
                func = child.value.func
                hit = (isinstance(func, ast.Attribute) and func.attr in ("append", "extend", "insert")
                       and _target_name(func.value) == wanted)
            if hit:
                (in_loop if looping else other).append(child.lineno)
            visit(child, looping or isinstance(child, (ast.For, ast.While, ast.AsyncFor)))

    visit(scope, False)
    return sorted(set(in_loop)) or sorted(set(other))
