"""A run that stopped with an autograd error: the error is a finding of the rule that
explains it, placed where the bug is, not where it showed (the in-place op the focused
anomaly re-run found for AGF003, the copy that cut the graph for AGF008, the Function
whose backward miscounts for AGF004); DOC003 when no rule explains it.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from .functions import backward_of
from .outcome import AUTOGRAD_CRASH, Finding, Reader

#: autograd's message for a backward that returned the wrong number of gradients
_COUNT_ERROR = re.compile(r"function (\w+?)Backward returned an incorrect number of gradients \(expected (\d+), got (\d+)\)")


def crash(record: dict[str, Any], script: str, focus: dict[str, Any] | None, found: list[Finding],
           read: Reader | None = None) -> list[Finding]:
    exc = record.get("exception")
    if not exc or not exc.get("autograd"):
        return []
    message = str(exc.get("message") or "")
    site = record.get("crash_site") or (script, int(exc.get("user_line") or 1))
    path, line = site[0], int(site[1])
    if "modified by an inplace operation" in message:
        modifications = (focus or {}).get("modifications") or []
        saved_at = (focus or {}).get("anomaly_forward")
        evidence: dict[str, Any] = {"error": message[:300], "backward_line": line}
        if saved_at:
            evidence["saved_by"] = {"path": saved_at[0], "line": int(saved_at[1])}
        stale = _stale_root(read(path) if read is not None else None, line) if modifications and modifications[-1].get("leaf") else None
        if stale is not None and any("reused_from" in f.evidence for f in found):
            return []  # the forward that reused the updated graph is named (`held.reused`)
        if stale is not None:
            # the tensors changed were parameters, updated in place as they must be: the bug
            # is the graph made before the update that this backward's loss still uses
            evidence.update(op=modifications[-1]["op"], updated_at=int(modifications[-1]["line"]))
            return [Finding("AGF003", path, stale,
                            f"this loss uses a graph made before the parameters it saved were updated in place (`"
                            f"{modifications[-1]['op']}` at line {modifications[-1]['line']}); the backward at line {line} "
                            "then failed: build it from a fresh forward, or detach the reused output", evidence)]
        if modifications:
            last = modifications[-1]
            evidence["op"] = last["op"]
            at = int(last["line"])
            made = _inplace_constructor(read(last["file"]), at) if read is not None else None
            if made is None and read is not None:
                # the op ran in a module made with inplace=True that the line does not name
                # (a layer of an nn.Sequential): its constructor, when the file has one only
                for modification in reversed(modifications):
                    if modification.get("inplace_module"):
                        made = _constructed_inplace(read(modification["file"]), modification["inplace_module"])
                        if made is not None:
                            last, at = modification, int(modification["line"])
                            evidence["op"] = last["op"]
                            break
            if made is not None:  # `self.act(x)` of `self.act = nn.ReLU(inplace=True)`: the flag is the bug
                evidence["called_at"] = at
                text = (f"this module is made with inplace=True; its in-place `{last['op']}` (called at line {at}) changed "
                        f"a tensor autograd had saved" + (f" (for the op at {saved_at[0]}:{saved_at[1]})" if saved_at else "")
                        + f"; the backward at line {line} then failed: make it with inplace=False")
                return [Finding("AGF003", last["file"], made, text, evidence)]
            text = (f"in-place `{last['op']}` here changed a tensor autograd had saved"
                    + (f" (for the op at {saved_at[0]}:{saved_at[1]})" if saved_at else "")
                    + f"; the backward at line {line} then failed: use the out-of-place op")
            return [Finding("AGF003", last["file"], at, text, evidence)]
        if saved_at:
            return [Finding("AGF003", saved_at[0], int(saved_at[1]),
                            f"a tensor this op saved was changed in place before the backward at line {line}", evidence)]
    if "is being used in an in-place operation" in message:  # a leaf (or its view) changed in place under grad
        return [Finding("AGF003", path, line, f"in-place change of a tensor that requires grad, under grad mode: {message[:160]}",
                        {"error": message[:300]})]
    cuts = [cut for cut in (record.get("observations") or {}).get("cuts") or () if cut.get("kind") == "copy"]
    if "does not require grad and does not have a grad_fn" in message and cuts:
        # the loss has no graph because a call copied graph-carrying values into a tensor
        # with no history: the cut is the bug, the backward only where it shows
        return [Finding("AGF008", cut["file"], int(cut["line"]),
                        f"this call copies values that carried a graph into a tensor with no history ({cut['calls']} call"
                        f"{'s' if cut['calls'] != 1 else ''}); the backward at line {line} then failed: {message[:120]}: keep "
                        "the graph (use the tensor itself)", {"cut": "copy", "calls": cut["calls"], "error": message[:300]})
                for cut in cuts]
    if "incorrect number of gradients" in message:
        if any(f.code == "AGF004" for f in found):
            return []  # the return that miscounts is already named
        returned = _returns_of_count(record, message, read)
        if returned:
            return [Finding("AGF004", file, at, f"this return of {name}.backward gives {got} gradient{'s' if got != 1 else ''}; "
                            f"the run stopped: {message[:160]}: return one per forward input (None where there is none)",
                            {"error": message[:300], "class": name, "returned": got}) for file, at, name, got in returned]
        return [Finding("AGF004", path, line, f"the run stopped: {message[:200]}", {"error": message[:300]})]
    if "backward through the graph a second time" in message and any(
            f.code in ("AGF010", "AGF006") or "reused_from" in f.evidence for f in found):
        return []  # explained by the state that carried the old graph, or the output reused after a step
    return [Finding(AUTOGRAD_CRASH, path, line, f"the run stopped with an autograd error: {message[:200]}",
                    {"error": message[:300], "type": exc.get("type")})]


def _constructed_inplace(text: str | None, class_name: str) -> int | None:
    """The line of the one call ``<class_name>(..., inplace=True)`` in `text`; None when
    there is none or more than one (which of them ran is not known)."""
    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError):
        return None
    lines = {n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
             and (n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)) == class_name
             and any(k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True for k in n.keywords)}
    return lines.pop() if len(lines) == 1 else None


def _inplace_constructor(text: str | None, line: int) -> int | None:
    """The line that made, with ``inplace=True``, the module called at `line`
    (``x = self.act(x)`` and ``self.act = nn.ReLU(inplace=True)``); None otherwise."""
    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError):
        return None
    called = {n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id for n in ast.walk(tree)
              if isinstance(n, ast.Call) and n.lineno <= line <= (n.end_lineno or n.lineno)
              and isinstance(n.func, (ast.Attribute, ast.Name))}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        names = {t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", None) for t in node.targets}
        flagged = any(k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True for k in node.value.keywords)
        if flagged and names & called:
            return node.lineno
    return None


def _returns_of_count(record: dict[str, Any], message: str, read: Reader | None) -> list[tuple[str, int, str, int]]:
    """(file, line, class, count) of the ``return`` statements of the custom Function's
    backward that give as many gradients as the error says it got (a tuple of that
    length; a single expression for one): the run's own count names the line. The
    Function is one the run recorded (`watch.Watch._on_apply`)."""
    match = _COUNT_ERROR.search(message)
    if match is None or read is None:
        return []
    name, got = match.group(1), int(match.group(3))
    found = []
    for function in (record.get("observations") or {}).get("functions") or ():
        if function["class"].rsplit(".", 1)[-1] != name:
            continue
        try:
            backward = backward_of(ast.parse(read(function["file"]) or ""), function["class"])
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(backward) if backward is not None else ():
            if not isinstance(node, ast.Return) or node.value is None:
                continue
            count = (len(node.value.elts) if isinstance(node.value, ast.Tuple)
                     and not any(isinstance(e, ast.Starred) for e in node.value.elts) else None)
            if count is None and not isinstance(node.value, (ast.Tuple, ast.List, ast.Starred)):
                count = 1
            if count == got:
                found.append((function["file"], node.lineno, name, got))
    return found


def _stale_root(text: str | None, line: int) -> int | None:
    """The last statement before `line`, in its function, that assigns the name whose
    ``.backward()`` is called at `line` (``D_tc_loss = ...`` for ``D_tc_loss.backward()``);
    None when there is none."""
    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError):
        return None
    roots = {n.func.value.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "backward" and isinstance(n.func.value, ast.Name) and n.lineno == line}
    if not roots:
        return None
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.lineno <= line <= (n.end_lineno or n.lineno)]
    scope = max(functions, key=lambda n: n.lineno) if functions else tree
    assigned = [n.lineno for n in ast.walk(scope) if isinstance(n, ast.Assign) and n.lineno < line
                and any(isinstance(target, ast.Name) and target.id in roots for target in n.targets)]
    return max(assigned) if assigned else None
