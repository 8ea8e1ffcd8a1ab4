"""What a training step does wrong: optimizer steps and hand-written updates that use
gradients of earlier steps (AGF002), steps on the unscaled sum of micro-batch gradients
(AGF019), and debug switches left in the training run (anomaly mode,
``torch.cuda.empty_cache()``: AGF017, DOC001).
"""

from __future__ import annotations

import ast
from typing import Any

from .outcome import ANOMALY_LEFTOVER, DEBUG_LEFTOVER, Finding, Reader


def stale_steps(seen: dict[str, Any], read: Reader) -> list[Finding]:
    grouped: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for stale in seen.get("stale") or ():
        site = stale.get("site") or _hand_update_site(stale.get("backward_site"), read)
        if not site:
            continue
        grouped.setdefault((site[0], int(site[1]), stale["optimizer"]), []).append(stale)
    found = []
    for (path, line, optimizer), steps in grouped.items():
        numbers = [s["step"] for s in steps]
        mixed = max(s["steps_mixed"] for s in steps)
        first = steps[0]
        if first.get("site") is None:  # a hand-written update (no optimizer)
            message = (f"this hand-written update used .grad holding the backward passes of up to {mixed} updates (never "
                       f"zeroed since the previous update), at update{'s' if len(numbers) > 1 else ''} "
                       f"{', '.join(map(str, numbers[:8]))} ({first['params']} of {first['of']} leaves updated: "
                       f"{', '.join(first.get('names') or [])}): set .grad to None (or zero it) after each update")
            found.append(Finding("AGF002", path, line, message,
                                 {"optimizer": None, "steps": numbers, "steps_mixed": mixed, "params": first["params"],
                                  "of": first["of"], "examples": first.get("names") or []}))
            continue
        used = [s for s in steps if not s.get("at_end")]
        message = (f"{optimizer}.step() used .grad holding the backward passes of up to {mixed} steps (never zeroed "
                   f"since its previous step), at step{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers[:8]))}"
                   f" ({first['params']} of {first['of']} parameters): zero the gradients before each backward")
        if not used:
            message = (f"after {optimizer}'s step {numbers[0] - 1}, backward added to .grad without zeroing it: the run "
                       f"stopped before step {numbers[0]}, which would have used gradients of {mixed} steps "
                       f"({first['params']} of {first['of']} parameters): zero the gradients after each step")
        found.append(Finding("AGF002", path, line, message,
                             {"optimizer": optimizer, "steps": numbers, "steps_mixed": mixed, "params": first["params"],
                              "of": first["of"], "examples": first.get("names") or []}))
    return found


def _hand_update_site(backward: list[Any] | None, read: Reader) -> tuple[str, int] | None:
    """Where a hand-written update is: the first in-place update that reads a ``.grad``
    (``w -= lr * w.grad``, ``p.data.add_(-lr * p.grad)``) in the loop (else the
    function, else the module) that runs the backward; the backward itself when there is
    none to be found (the update lives in another file)."""
    if not backward:
        return None
    path, line = backward[0], int(backward[1])
    try:
        tree = ast.parse(read(path) or "")
    except (SyntaxError, ValueError):
        return path, line
    kinds = (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef, ast.AsyncFunctionDef)
    around = [n for n in ast.walk(tree) if isinstance(n, kinds) and n.lineno <= line <= (n.end_lineno or n.lineno)]
    scope = max(around, key=lambda n: n.lineno) if around else tree

    def reads_grad(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Attribute) and n.attr == "grad" for n in ast.walk(node))

    updates = []
    for node in ast.walk(scope):
        if isinstance(node, ast.AugAssign) and not reads_grad(node.target) and reads_grad(node.value):
            updates.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_")
              and not node.func.attr.startswith("zero") and not reads_grad(node.func.value) and any(map(reads_grad, node.args))):
            updates.append(node.lineno)
    return (path, min(updates)) if updates else (path, line)


def leftovers(seen: dict[str, Any]) -> list[Finding]:
    """Anomaly mode on for two or more backward passes: AGF017 at the line that turned it
    on (that line is what the rule's fix removes), or DOC001 at the backward when the run
    did not see it turned on (``torch.set_anomaly_enabled``, an environment switch);
    ``empty_cache()`` called two or more times at one line: AGF017 there."""
    found = []
    switched: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for entry in seen.get("anomaly") or ():
        on = entry.get("on")
        if on:
            switched.setdefault((on[0], int(on[1])), []).append(entry)
        elif entry["passes"] >= 2:
            found.append(Finding(ANOMALY_LEFTOVER, entry["file"], int(entry["line"]),
                                 f"{entry['passes']} backward passes here ran with anomaly detection on (it slows every "
                                 "forward and backward): remove detect_anomaly / set_detect_anomaly(True)",
                                 {"passes": entry["passes"]}))
    for (path, line), entries in switched.items():
        passes = sum(int(e["passes"]) for e in entries)
        if passes >= 2:
            at = ", ".join(sorted({f"{e['file']}:{e['line']}" for e in entries}))
            found.append(Finding(DEBUG_LEFTOVER, path, line,
                                 f"anomaly detection turned on here was on for {passes} backward passes ({at}); it slows "
                                 "every forward and backward: remove it from the training run",
                                 {"passes": passes, "backwards": sorted({f"{e['file']}:{e['line']}" for e in entries})}))
    for entry in seen.get("empty_cache") or ():
        if entry["calls"] >= 2:
            found.append(Finding(DEBUG_LEFTOVER, entry["file"], int(entry["line"]),
                                 f"torch.cuda.empty_cache() called {entry['calls']} times here: it frees nothing a "
                                 "later allocation would not reuse and stalls the device",
                                 {"calls": entry["calls"]}))
    return found


def unscaled_accumulation(seen: dict[str, Any]) -> list[Finding]:
    """Steps that used the summed gradients of several backward passes of one line, each
    a mean loss not divided by their number (`accumulation.AccumulationWatch`): AGF019 at
    that backward, where the rule's fix divides the loss."""
    found = []
    for entry in seen.get("accumulation") or ():
        k = int(entry["backwards"])
        message = (f"{entry['steps']} {entry['optimizer']} step{'s' if entry['steps'] != 1 else ''} used the summed "
                   f"gradients of {k} backward passes of this line, each of a mean-reduced loss that was not divided "
                   f"by the accumulation steps (the step is {k}x a full batch's): divide the loss by the number of "
                   "accumulation steps before backward")
        found.append(Finding("AGF019", entry["file"], int(entry["line"]), message,
                             {"steps": entry["steps"], "backwards_per_step": k, "optimizer": entry["optimizer"]}))
    return found
