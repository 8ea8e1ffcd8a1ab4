"""From what a run showed to findings: source line, rule code, measured evidence.

Pure functions of the run's record (`watch.Watch.record`, `child.run_doctor_side`) and of
the project's source text (read through `read`, which the caller supplies), so the
decisions can be tested without running anything. No torch here.

A finding carries the code of the rule whose fix applies at that site (AGF001...), or a
``DOC`` code for what no rule fixes (anomaly mode on with no line seen turning it on, an
autograd crash no rule explains).
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from ..verdict import format_bytes

#: anomaly mode on where the run did not see it turned on, and autograd crashes no rule
#: explains (no rule fixes them)
ANOMALY_LEFTOVER = "DOC001"
AUTOGRAD_CRASH = "DOC003"
#: anomaly mode or empty_cache() left in the training run: the rule's own code
DEBUG_LEFTOVER = "AGF017"

#: finite differences at most this large: the forward is flat where it was probed
STRAIGHT_THROUGH = 1e-12

#: calls that make a Function's forward piecewise constant (its backward: straight-through)
PIECEWISE_CONSTANT = frozenset({"round", "floor", "ceil", "sign", "trunc", "argmax", "argmin", "heaviside",
                                "bucketize", "item"})

#: what each code says, as the report's legend and SARIF's rule descriptions
TITLES = {
    "AGF001": "forward pass builds a graph no backward uses",
    "AGF002": "optimizer step sees gradients of earlier steps",
    "AGF003": "in-place change of a tensor autograd saved",
    "AGF004": "custom backward disagrees with finite differences",
    "AGF006": "graph kept across iterations by an accumulator",
    "AGF008": "parameters receive no gradient",
    "AGF010": "hidden state carries the graph of earlier iterations",
    "AGF011": "retained graph never used again",
    "AGF013": "requires_grad misspelled: the parameters it meant to freeze are trained",
    "AGF014": "reentrant checkpoint cuts its parameters off the graph",
    DEBUG_LEFTOVER: "anomaly detection or torch.cuda.empty_cache() left in the training run",
    ANOMALY_LEFTOVER: "anomaly detection on in the training loop (where it was turned on not seen)",
    AUTOGRAD_CRASH: "autograd error",
}

Reader = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Finding:
    """One bug the run showed: where (path relative to the project root, 1-based line),
    which rule, what was measured."""

    code: str
    path: str
    line: int
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Diagnosis:
    """The outcome of one doctor run: how the run ended, and its findings."""

    script: str
    status: str  # finished | crashed | timeout | memory | exited | harness_error | unavailable
    detail: str
    findings: tuple[Finding, ...] = ()
    shortened: tuple[dict[str, Any], ...] = ()
    measures: dict[str, Any] = field(default_factory=dict)
    isolated: bool = True
    #: why another script than the one named was run (a library file's driver)
    via: str = ""
    #: the project root the paths are relative to
    root: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["findings"] = [f.to_json() for f in self.findings]
        data["shortened"] = list(self.shortened)
        return data


def analyse(record: dict[str, Any], script: str, read: Reader, focus: dict[str, Any] | None = None) -> list[Finding]:
    """Every finding a run's record supports (`focus`: the record of the focused
    re-run after an in-place error, if there was one)."""
    seen = record.get("observations") or {}
    stepped = int(seen.get("optimizer_steps") or 0) > 0
    found: list[Finding] = []
    found += _unused_graphs(seen, read)
    found += _stale_steps(seen, read)
    recurrent = _recurrent(seen, stepped)
    found += recurrent
    found += _holders(seen, stepped, read, {f.path for f in recurrent})
    found += _silent(seen, script, read)
    found += _reentrant(seen)
    found += _misspelled(seen, script, read)
    found += _functions(seen, read)
    found += _retains(seen)
    found += _leftovers(seen)
    found += _crash(record, script, focus, found, read)
    found = _explained_by_cuts(found, read)
    if (record.get("exception") or {}).get("autograd"):
        # the pass whose backward raised was never backpropagated: not a graph built for nothing
        found = [f for f in found if not (f.code == "AGF001" and f.evidence.get("unused_passes") == 1)]
    unique = {(f.code, f.path, f.line): f for f in found}
    return sorted(unique.values(), key=lambda f: (f.path, f.line, f.code))


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
    if not (mixed or site.get("module_method")):
        return [site]
    per_pass = max(int(n) for n in site.get("unused_bytes") or [0])
    return [{"file": c["file"], "line": c["line"], "passes": c["passes"], "unused": c["unused"], "held": 0,
             "unused_bytes": [per_pass] if c["unused"] else []} for c in callers]


def _unused_graphs(seen: dict[str, Any], read: Reader) -> list[Finding]:
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


def _evaluation_block(text: str | None, line: int, wasted_everywhere: Callable[[int, int], bool]) -> int | None:
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
    return best.lineno if best is not None and best.lineno != line else None


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


def _stale_steps(seen: dict[str, Any], read: Reader) -> list[Finding]:
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


def _recurrent(seen: dict[str, Any], stepped: bool) -> list[Finding]:
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


def _holders(seen: dict[str, Any], stepped: bool, read: Reader, recurrent_files: set[str]) -> list[Finding]:
    found = []
    for holder in seen.get("holders") or ():
        tags = [tuple(tag) for tag in holder.get("tags") or ()]
        iterations = len({tag[0] if stepped else tag[1] for tag in tags})
        if iterations < 2:
            continue
        name = holder["name"]
        attribute = "." in name
        code = "AGF010" if attribute else "AGF006"
        if attribute and holder["file"] in recurrent_files:
            continue  # the forward that consumes it is already reported
        text = read(holder["file"])
        lines = _accumulation_lines(text, name, int(holder["first_line"])) if text is not None else []
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


def _silent(seen: dict[str, Any], script: str, read: Reader) -> list[Finding]:
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


def _misspelled(seen: dict[str, Any], script: str, read: Reader) -> list[Finding]:
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


def _reentrant(seen: dict[str, Any]) -> list[Finding]:
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


def _explained_by_cuts(found: list[Finding], read: Reader) -> list[Finding]:
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


def _functions(seen: dict[str, Any], read: Reader) -> list[Finding]:
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


def _backward_of(tree: ast.Module, qualname: str, method: str = "backward") -> ast.FunctionDef | None:
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
        forward = _backward_of(ast.parse(text or ""), qualname, "forward")
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
        backward = _backward_of(ast.parse(text), qualname)
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


def _retains(seen: dict[str, Any]) -> list[Finding]:
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


def _leftovers(seen: dict[str, Any]) -> list[Finding]:
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


def _crash(record: dict[str, Any], script: str, focus: dict[str, Any] | None, found: list[Finding],
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
        if modifications:
            last = modifications[-1]
            evidence["op"] = last["op"]
            at = int(last["line"])
            made = _inplace_constructor(read(last["file"]), at) if read is not None else None
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
        return [Finding("AGF004", path, line, f"the run stopped: {message[:200]}", {"error": message[:300]})]
    if "backward through the graph a second time" in message and any(f.code in ("AGF010", "AGF006") for f in found):
        return []  # explained by the state that carried the old graph
    return [Finding(AUTOGRAD_CRASH, path, line, f"the run stopped with an autograd error: {message[:200]}",
                    {"error": message[:300], "type": exc.get("type")})]


# -- where in the source --------------------------------------------------------------


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


def _accumulation_lines(text: str, name: str, first_line: int) -> list[int]:
    """Statements that add to `name` (``+=``, ``x = x + ...``, ``.append``), those in loops
    first; for ``obj.attr``, assignments to any ``*.attr``."""
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
                hit = "." in name or _mentions(child.value, name)
            elif isinstance(child, ast.Expr) and isinstance(child.value, ast.Call):
                func = child.value.func
                hit = (isinstance(func, ast.Attribute) and func.attr in ("append", "extend", "insert")
                       and isinstance(func.value, ast.Name) and func.value.id == name)
            if hit:
                (in_loop if looping else other).append(child.lineno)
            visit(child, looping or isinstance(child, (ast.For, ast.While, ast.AsyncFor)))

    visit(scope, False)
    return sorted(set(in_loop)) or sorted(set(other))


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
