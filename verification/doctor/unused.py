"""Graphs nobody uses: forward passes whose graph no backward went through (AGF001),
and graphs kept by ``retain_graph=True`` that no later backward used (AGF011).

Pure functions of the run's observations (`watch.Watch.record`) and the project's
source; where the run saw the pass and where the rule's fix goes can differ (a helper
serving two callers, an evaluation loop), and the choice is made here.
"""

from __future__ import annotations

import ast
from typing import Any, Callable

from ..verdict import format_bytes
from .outcome import Finding, Reader


def _returns_at(text: str | None, line: int) -> bool:
    """Whether `line` is in a ``return`` statement (a helper handing the model's output on)."""
    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(n, ast.Return) and n.lineno <= line <= (n.end_lineno or n.lineno) for n in ast.walk(tree))


def _by_caller(site: dict[str, Any], read: Reader) -> list[dict[str, Any]]:
    """The site as its callers saw it, when its line returns the model's output to them
    and either the callers' passes fared differently (one helper serving a training
    caller and an evaluation caller: the helper cannot be fixed as a whole) or the
    helper is the model's own method (``return self.decoder(...)`` in ``infer``: the
    fix belongs to the caller, not to the model's API). Otherwise the forward's own line."""
    callers = list(site.get("callers") or ())
    if not callers or not _returns_at(read(site["file"]), int(site["line"])):
        return [site]
    mixed = any(int(c["unused"]) == 0 for c in callers) and any(int(c["unused"]) > 0 for c in callers)
    if not (mixed or site.get("module_method") or _serves_evaluations(callers, read)):
        return [site]
    per_pass = max(int(n) for n in site.get("unused_bytes") or [0])
    return [{"file": c["file"], "line": c["line"], "passes": c["passes"], "unused": c["unused"], "held": 0,
             "unused_bytes": [per_pass] if c["unused"] else []} for c in callers]


def _serves_evaluations(callers: list[dict[str, Any]], read: Reader) -> bool:
    """Whether every caller wasted every pass it asked for and sits in an evaluation
    function (`_evaluation_block` ending at a ``def``): the helper (``def _forward(self,
    batch): return {"energy": self.model(batch)}``) only hands the model's output to
    evaluation functions, and the fix goes there, as for a direct call. A script's
    module-level loop calling ``evaluate(model, x)`` keeps the helper's own line: that
    function is the evaluation."""
    return all(int(c["unused"]) >= int(c["passes"]) > 0
               and _evaluation_block(read(c["file"]), int(c["line"]), lambda first, last: True, functions_only=True) is not None
               for c in callers)


def unused_graphs(seen: dict[str, Any], read: Reader) -> list[Finding]:
    found = []
    sites = [entry for site in seen.get("sites") or () for entry in _by_caller(site, read)]
    for site in sites:
        wasted = int(site["unused"]) + int(site.get("held") or 0)
        if not wasted:
            continue
        sizes = [int(n) for n in site.get("unused_bytes") or ()]
        per_pass = max(sizes) if sizes else 0
        held = int(site.get("held") or 0)
        message = (f"{wasted} of {site['passes']} forward pass{'es' if site['passes'] != 1 else ''} here built a graph no "
                   f"backward went through ({format_bytes(per_pass)} of saved tensors per pass)")
        if held:
            message += f"; {held} still held when the run ended"
        message += ": run it under torch.no_grad()"
        found.append(Finding("AGF001", site["file"], int(site["line"]), message,
                             {"passes": site["passes"], "unused_passes": site["unused"], "held_at_end": held,
                              "saved_bytes_per_pass": per_pass}))
    return _at_evaluation_headers(found, sites, read)


def _trains(node: ast.AST) -> bool:
    """Whether a block calls a backward or an optimizer step (``.backward()``,
    ``.step()``, ``autograd.grad(...)``) anywhere inside."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
            if call.func.attr in ("backward", "step"):
                return True
            if call.func.attr == "grad" and isinstance(call.func.value, (ast.Name, ast.Attribute)) and \
                    getattr(call.func.value, "id", getattr(call.func.value, "attr", "")) == "autograd":
                return True
    return False


def _evaluation_block(text: str | None, line: int, wasted_everywhere: Callable[[int, int], bool],
                      functions_only: bool = False) -> int | None:
    """The header of the outermost loop or function around `line` that trains nothing
    and whose every forward pass was wasted (an evaluation: the rule's fix decorates the
    function or wraps the loop, and the rule reports that line); None when the forward
    sits directly in code that trains."""
    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError):
        return None
    kinds = (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef)
    chain = sorted((n for n in ast.walk(tree) if isinstance(n, kinds) and n.lineno <= line <= (n.end_lineno or n.lineno)),
                   key=lambda n: n.lineno, reverse=True)
    best = None
    for node in chain:  # innermost first
        if _trains(node) or not wasted_everywhere(node.lineno, node.end_lineno or node.lineno):
            break
        best = node
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    if functions_only and not isinstance(best, functions):
        return None
    if best is not None and not isinstance(best, functions) and any(isinstance(n, functions) for n in chain) \
            and not _only_the_forward(chain[0], line):
        # an evaluation loop inside a training function that does more than the forward
        # (data, metrics, logging): the rule wraps the forward's statement, and names it
        return None
    return best.lineno if best is not None and best.lineno != line else None


def _only_the_forward(loop: ast.AST, line: int) -> bool:
    """Whether the innermost loop around the forward at `line` does nothing else (its
    body is the forward's statement alone)."""
    body = getattr(loop, "body", [])
    return len(body) == 1 and body[0].lineno <= line <= (body[0].end_lineno or body[0].lineno)


def _at_evaluation_headers(found: list[Finding], sites: list[dict[str, Any]], read: Reader) -> list[Finding]:
    """AGF001 findings inside an evaluation function or loop (`_evaluation_block`), merged
    into one at its header; the forward's own line stays in the evidence (`fix_line`: a
    fix built at the run's site wraps that statement)."""
    def wasted_everywhere(path: str) -> Callable[[int, int], bool]:
        def check(first: int, last: int) -> bool:
            inside = [s for s in sites if s["file"] == path and first <= int(s["line"]) <= last]
            return all(int(s["unused"]) + int(s.get("held") or 0) >= int(s["passes"]) for s in inside)
        return check

    merged: dict[tuple[str, int], Finding] = {}
    kept = []
    for finding in found:
        header = _evaluation_block(read(finding.path), finding.line, wasted_everywhere(finding.path))
        if header is None:
            kept.append(finding)
            continue
        earlier = merged.get((finding.path, header))
        if earlier is None:
            merged[(finding.path, header)] = Finding(
                "AGF001", finding.path, header, finding.message.replace(" here ", f" at line {finding.line} ", 1),
                {**finding.evidence, "fix_line": finding.line, "forward_lines": [finding.line]})
            continue
        evidence = dict(earlier.evidence)
        evidence["forward_lines"] = evidence["forward_lines"] + [finding.line]
        for key in ("passes", "unused_passes", "held_at_end"):
            evidence[key] = int(evidence.get(key) or 0) + int(finding.evidence.get(key) or 0)
        evidence["saved_bytes_per_pass"] = max(int(evidence.get("saved_bytes_per_pass") or 0),
                                               int(finding.evidence.get("saved_bytes_per_pass") or 0))
        lines = ", ".join(map(str, evidence["forward_lines"]))
        message = (f"{evidence['unused_passes'] + evidence['held_at_end']} of {evidence['passes']} forward passes at lines "
                   f"{lines} built a graph no backward went through ({format_bytes(evidence['saved_bytes_per_pass'])} of "
                   "saved tensors per pass): run them under torch.no_grad()")
        merged[(finding.path, header)] = Finding("AGF001", finding.path, header, message, evidence)
    return kept + list(merged.values())


def unused_retains(seen: dict[str, Any]) -> list[Finding]:
    found = []
    for retain in seen.get("retains") or ():
        if retain["reused"] or not retain["saved"]:
            continue
        message = (f"retain_graph=True kept the graph at {retain['passes']} backward pass"
                   f"{'es' if retain['passes'] != 1 else ''}, and no later backward used any of its "
                   f"{retain['saved']} saved tensors: drop retain_graph=True")
        found.append(Finding("AGF011", retain["file"], int(retain["line"]), message,
                             {"passes": retain["passes"], "saved_tensors": retain["saved"]}))
    return found
