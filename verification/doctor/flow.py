"""Gradients that never arrive: parameters no backward reached, found at the line that
cut the graph when the run saw one (AGF008), a ``require_grad`` typo (AGF013), a
reentrant checkpoint whose output has no graph (AGF014).

A cut explains the forwards before it in the same function: those are not AGF001
(`explained_by_cuts`), whose fix would make the cut permanent.
"""

from __future__ import annotations

import ast
from typing import Any

from .outcome import Finding, Reader


def silent(seen: dict[str, Any], script: str, read: Reader) -> list[Finding]:
    """Parameters no gradient reached: at the lines that cut the graph when the run saw
    any (`cuts`: a copy of graph-carrying data, a leaf re-made every iteration), else at
    their module's call."""
    params_all = list(seen.get("silent_params") or ())
    cuts = [cut for cut in seen.get("cuts") or () if cut["kind"] != "reentrant"] if params_all else []
    if params_all:
        cuts += [cut for entry in seen.get("leaf_roots") or () if (cut := _rewrap_cut(entry, read)) is not None]
    if cuts:
        return [_cut_finding(cut, params_all) for cut in cuts]
    grouped: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for param in params_all:
        site = param.get("site") or (seen.get("first_step_site") or (script, 1))
        grouped.setdefault((site[0], int(site[1])), []).append(param)
    found = []
    for (path, line), params in grouped.items():
        names = [p["name"] for p in params]
        total = sum(int(p["numel"]) for p in params)
        zeros = sum(1 for p in params if p["grad"] == "zeros")
        message = (f"{len(names)} parameter{'s' if len(names) != 1 else ''} ({total} values: {', '.join(names[:4])}"
                   f"{', ...' if len(names) > 4 else ''}) never received a non-zero gradient"
                   f"{' (only zeros)' if zeros == len(names) else ''}: the graph is cut between them and the loss")
        found.append(Finding("AGF008", path, line, message, {"params": names, "values": total}))
    return found


def _rewrap_cut(entry: dict[str, Any], read: Reader) -> dict[str, Any] | None:
    """A backward whose root is a leaf made to require grad (``loss.requires_grad =
    True``, the usual way to silence "does not require grad"): the cut is that line, found
    in the loop or function of the backward by the root's name; None when there is no
    such line (the leaf was made by a constructor: `cuts` names that call)."""
    path, line = entry["file"], int(entry["line"])
    found = None
    try:
        tree = ast.parse(read(path) or "")
    except (SyntaxError, ValueError):
        tree = None
    if tree is not None:
        roots = {n.func.value.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr == "backward" and isinstance(n.func.value, ast.Name) and n.lineno == line}
        kinds = (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef, ast.AsyncFunctionDef)
        around = [n for n in ast.walk(tree) if isinstance(n, kinds) and n.lineno <= line <= (n.end_lineno or n.lineno)]
        scope = max(around, key=lambda n: n.lineno) if around else tree
        for node in ast.walk(scope):
            target = None
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Attribute) \
                    and node.targets[0].attr == "requires_grad":
                target = node.targets[0].value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "requires_grad_":
                target = node.func.value
            if isinstance(target, ast.Name) and target.id in roots and node.lineno <= line:
                found = node.lineno
    return {"file": path, "line": found, "kind": "rewrap", "calls": entry["calls"]} if found is not None else None


def misspelled(seen: dict[str, Any], script: str, read: Reader) -> list[Finding]:
    """Parameters whose ``require_grad`` attribute (a typo of ``requires_grad``: setting
    it changes nothing) says the opposite of their ``requires_grad``: AGF013 at each line
    of the script that assigns it."""
    typo = seen.get("misspelled")
    if not typo or not typo["params"]:
        return []
    try:
        tree = ast.parse(read(script) or "")
    except (SyntaxError, ValueError):
        return []
    lines = sorted({n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Attribute) and t.attr == "require_grad" for t in n.targets)})
    return [Finding("AGF013", script, line,
                    f"`.require_grad` set here is not `.requires_grad`: {typo['params']} parameter"
                    f"{'s' if typo['params'] != 1 else ''} ({', '.join(typo['names'])}) kept the opposite requires_grad "
                    f"({typo['trained']} received gradients)",
                    {"params": typo["params"], "trained": typo["trained"], "examples": typo["names"]}) for line in lines]


def reentrant(seen: dict[str, Any]) -> list[Finding]:
    """Reentrant checkpoints whose output came back with no graph (`cuts`)."""
    return [Finding("AGF014", cut["file"], int(cut["line"]),
                    f"this reentrant checkpoint returned an output with no graph ({cut['calls']} call"
                    f"{'s' if cut['calls'] != 1 else ''}): none of its inputs requires grad, so the parameters of the "
                    "checkpointed module never receive a gradient: pass use_reentrant=False",
                    {"calls": cut["calls"]})
            for cut in seen.get("cuts") or () if cut["kind"] == "reentrant"]


def _innermost_function(text: str | None, line: int) -> tuple[int, int] | None:
    """(first, last) line of the innermost function holding `line`; (0, 0) at module level."""
    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError):
        return None
    spans = [(n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree)
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno <= line <= (n.end_lineno or n.lineno)]
    return max(spans) if spans else (0, 0)


def explained_by_cuts(found: list[Finding], read: Reader) -> list[Finding]:
    """A forward whose graph a later line of the same function cut (AGF008 at a cut) has
    no backward through it because of the cut: that is AGF008's finding, not AGF001's
    (whose fix, no_grad, would make the cut permanent)."""
    cuts = [f for f in found if f.code == "AGF008" and "cut" in f.evidence]
    if not cuts:
        return found
    def explained(finding: Finding) -> bool:
        if finding.code != "AGF001":
            return False
        for cut in cuts:
            if cut.path != finding.path or not finding.line < cut.line:
                continue
            text = read(cut.path)
            scope = _innermost_function(text, cut.line)
            if scope is not None and scope == _innermost_function(text, finding.line):
                return True
        return False
    return [f for f in found if not explained(f)]


def _cut_finding(cut: dict[str, Any], params: list[dict[str, Any]]) -> Finding:
    names = [p["name"] for p in params]
    made = {"copy": "copies values that carried a graph into a tensor with no history",
            "rewrap": "makes a loss with no graph require grad: the backward through it reaches no parameter"}.get(
        cut["kind"], "makes a fresh leaf (requires_grad=True) every iteration: what produced its values gets no gradient")
    what, unit = ("this line", "backward") if cut["kind"] == "rewrap" else ("this call", "call")
    message = (f"{what} {made} ({cut['calls']} {unit}{'s' if cut['calls'] != 1 else ''}); {len(names)} parameter"
               f"{'s' if len(names) != 1 else ''} ({', '.join(names[:4])}{', ...' if len(names) > 4 else ''}) never "
               "received a gradient: keep the graph (use the tensors themselves, torch.stack/sum)")
    return Finding("AGF008", cut["file"], int(cut["line"]), message,
                   {"params": names, "cut": cut["kind"], "calls": cut["calls"]})
