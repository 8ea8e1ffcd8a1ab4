"""Contracts: what must hold between the original and the rewritten run.

Each check in `CHECKS` is implemented here by name; a rule's ``contract.checks`` names
some of them. Without a rule's checks the generic equivalence contract applies: outputs
and gradients equal, retained graph memory not higher; when the original raised an
autograd error the rewritten must run clean (and, where the unit has tensor inputs, its
gradients must match finite differences in float64).

Before any check: both runs must have executed the lines the patch changed (the
record's ``changed_lines`` from `coverage`), else the verdict is unverified. After the
checks: ``n/a`` (could not compare) is never evidence, and neither is a pass of
``original_error_gone`` alone; a contract with nothing else passing is unverified.

Tolerances (documented, stable):

* tensors: ``torch.testing.assert_close`` defaults per dtype, float32 rtol=1.3e-6,
  atol=1e-5; float64 rtol=1e-7, atol=1e-7; integer and bool tensors exactly. dtype and
  shape must match; ``requires_grad``/``grad_fn`` are not compared (a fix that detaches a
  value keeps its meaning).
* Python floats: the float32 tolerances above (they usually come from ``.item()``).
* values read from a clock (`clock`: the `time` module's clocks return marked numbers
  during a run, and arithmetic keeps the mark; floats named like timings where no marked
  clock was read): not outputs; the verdict names them.
* what a script or driver printed (scripts report results by printing them): part of
  ``outputs_equal`` / ``accumulated_values_equal`` in script and driver mode, line by
  line and token by token; numbers within the float tolerances above widened by half a
  unit in each side's last printed digit, integers exactly, timings / clock times /
  hex addresses / temporary paths masked (`printed` documents the rules).
* gradient at a step vs. the sum of contributions since the previous step: rtol=1e-4,
  atol=1e-6 (each contribution is a difference of two float32 accumulations). The sum
  since the previous step of *any* optimizer also satisfies it (a discriminator zeroed
  after the generator's step drops what the generator's backward, already stepped, left
  on it). Before the first ``optimizer.step()`` nothing has moved, so the losses
  backpropagated (scale included) and each parameter's contributions must equal the
  original's (float tolerances above).
* gradient accumulation (``accumulated_grads_are_window_mean``): at the first optimizer
  step, where both runs stand on the same parameters, each parameter's contributions
  since the start in the rewritten must equal the original's divided by ``n``, the
  number of backward passes the original ran before that step (the gradient of the
  mean of the window's micro-batch losses; for equal-sized, mean-reduced micro-batches
  the big batch's gradient), rtol=1e-4, atol=1e-6 as for contributions; the losses
  backpropagated, the original's divided by ``n`` (rel 1e-5, abs 1e-7), when all of them
  were backward passes that reached these parameters (``n`` counts only those: a pass
  through another model's copy is not a micro-batch). Both runs must
  have the same ``n``, and some contribution must be non-zero (a zero term proves
  nothing). Later steps are not compared across runs (the parameters have moved apart);
  at every step of the rewritten ``.grad`` must equal its contributions since the
  previous step (the AGF002 invariant above, without its first-step equality).
* finite differences: ``torch.autograd.gradcheck`` defaults in float64 (eps=1e-6,
  atol=1e-5, rtol=1e-3), for Function units in full; for scripts and functions along one
  random direction (`directional`): |<grad, v> - central difference| <= 1e-5 + 1e-3 *
  |central difference|, same eps, float64 as torch's default dtype.
  Where the run calls backward more than once (a GAN's or a FactorVAE's second loss),
  the second and third backward are checked the same way (`directional.later_backward_checks`:
  theta is what no step changed before that backward, the earlier backwards replayed),
  and any of them off fails the check.
* forward values recorded before each backward (the loss, the outermost modules'
  outputs): the tensor tolerances above; an original that raised is compared on the
  records it made before raising.
* a second point (``outputs_equal``, ``accumulated_values_equal``,
  ``forward_values_equal``, ``equal_or_gradients_corrected``): each side re-run up to
  its first optimizer step with every parameter and tensor input moved by a tenth of its
  size along a seeded direction and the seeds shifted, the same on both sides
  (`directional.second_point`); the sum of the losses backpropagated before that step
  (the randomly weighted outputs of a unit without backward) must agree within
  rtol=1e-5, atol=1e-5: a sum, so that a fix merging two backward passes over one graph
  into ``(l1 + l2).backward()`` compares like with like. The sums are compared only
  where both sides reached that step within 8 passes; otherwise (a backward raised, no
  step) the first losses are. Where either side
  cannot reach it (it raises first, the run used a third of its time limit) only the
  run's own point is compared.
* a custom Function's ``backward`` against the original's on the same ctx: equal, or
  ``allclose`` at float defaults (the same inputs give the same bits unless the formula
  was rewritten); a custom Function's gradients against finite differences: the
  directional rule above, per input.
* observables of graph state (``graph_state_may_change`` in the contract: the fix
  stops or mends a graph by design): booleans and ``None``/graph nodes that a read of
  ``requires_grad``, ``grad_fn``, ``is_leaf``, ``is_grad_enabled()`` reached (`graph_state`),
  returned, kept in globals or containers, or printed by that statement, may differ;
  they are listed, and everything else is compared as before.
* a 0-dim / 1-element tensor against a Python number: compared as numbers (the float
  tolerances above).
* a corrected ``requires_grad`` flag (``requires_grad_flag_takes_effect``, AGF013):
  training changes on purpose, so parameters are not compared at the end. Before the
  first optimizer step its losses and the gradients both sides have are equal (tensor
  tolerances); a tensor the fix froze keeps its value; a tensor with a gradient on both
  sides is updated in both or neither; a tensor that newly gets one must be moved by,
  and pass, the directional finite-difference check of the rewritten run (a free tensor
  of a script is not moved by it: n/a).
* a numerically stable rewrite (``closer_to_float64_reference``, AGF016): the original
  script is run once more in float64 (`reference`: the same seeds and random draws) as
  the reference; element by element, each value and gradient of the rewritten float32
  run is within rtol=1e-4, atol=1e-5 of it, or at least as close to it as the
  original's (where the original is not finite and the reference is: only within);
  other outputs and printed lines equal the reference's or the original's. Function
  units (no reference run): outputs and gradients equal.
* time per step (``time_per_step_reported``): the shortest interval between two
  optimizer steps of each side's bounded run (other load only adds time), reported with
  their ratio; a report, never evidence (it neither accepts nor rejects).
* peak memory: the rewritten may exceed the original by 5 % + 64 kB (sampling noise).
* retained graph (``retained_graph_not_higher``): judged on two measures of the bytes of
  tensors autograd saved (unique storages; parameters and views of them excluded). At
  the end of the run: the rewritten keeps no more bytes, and no more graph nodes unless
  it keeps fewer bytes; exact, no tolerance. At the peak during the run (what a graph
  kept in a function's locals holds before it is freed): the rewritten may exceed the
  original by 1 % of the original's peak, no absolute slack, so an original that never
  held a graph allows none (the count is exact; the 1 % covers graphs that sit in
  reference cycles and are freed when the cyclic GC happens to run). The peak is
  compared only when both runs finished without raising (a run that raised stopped
  early).
* ``retained_graph_lower_if_any``: not higher as above, and strictly lower where the
  original held any graph: on the peak when the original's peak was > 0, at the end
  (bytes, else graph nodes), or on the bytes autograd saved over the whole run (a
  validation graph smaller than the training step's sets no peak; exact, no GC noise).
  An original that recorded no graph at all (the code already ran under inference
  mode or no_grad) leaves nothing to remove: the fix is "not confirmed" and rejected,
  never accepted on "0 B -> 0 B".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping

import torch

from .checks import GENERIC, SPECS, CheckStatus
from .printed import printed_differences, printed_lines
from .protocol import ExceptionRecord, RunRecord, part_json
from .sandbox import Outcome
from .verdict import ACCEPTED, REJECTED, UNVERIFIED, UnitResult, format_bytes

FLOAT_RTOL, FLOAT_ATOL = 1.3e-6, 1e-5
PEAK_SLACK_RATIO, PEAK_SLACK_BYTES = 0.05, 64 * 1024
PEAK_GRAPH_SLACK_RATIO = 0.01
SECOND_POINT_RTOL, SECOND_POINT_ATOL = 1e-5, 1e-5
#: why a fix meant to stop recording a graph is withdrawn when the original recorded none
NO_GRAPH_TO_REMOVE = "the original recorded no graph here, so the fix removes none and the finding is withdrawn"
MAX_MISMATCHES = 5
#: how `gradcheck.compare_backwards` says that the original's backward raised
ORIGINAL_BACKWARD_RAISED = "the original backward raised"
#: "close to the float64 reference" (`check_closer_to_float64_reference`): float32 after a
#: few operations, not one
REFERENCE_RTOL, REFERENCE_ATOL = 1e-4, 1e-5
#: a directional derivative smaller than this is a flat point: agreeing there proves nothing
NONTRIVIAL_DERIVATIVE = 1e-8

PASS, FAIL, NA, UNKNOWN = CheckStatus.PASS, CheckStatus.FAIL, CheckStatus.NA, CheckStatus.UNKNOWN


@dataclass(frozen=True)
class CheckResult:
    check: str
    status: CheckStatus
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"check": self.check, "status": self.status, "detail": self.detail}


@dataclass(frozen=True)
class Sides:
    """The two records (and outcomes) a check looks at."""

    original: RunRecord
    rewritten: RunRecord
    orig_outcome: Outcome
    rew_outcome: Outcome
    mode: str
    #: where the contract expects observables of graph state to change
    #: (``graph_state_may_change``): the ones that did, as the comparisons set them aside
    graph_state: list[str] | None = None


# -- value comparison ----------------------------------------------------------------
def compare(a: Any, b: Any, where: str, *, lenient: bool = False) -> list[str]:
    """Differences between two serialized values (empty when equal within tolerance)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if _plain_number(a) or _plain_number(b):
            # a 0-dim / 1-element tensor against a Python number (`.item()`): as numbers
            x, y = _as_number(a), _as_number(b)
            if x is None or y is None:
                return [f"{where}: a tensor of {_numel(a if x is None else b)} elements vs a number"]
            return [] if _close_numbers(x, y) else [f"{where}: {x!r} != {y!r}"]
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return [f"{where}: {type(a).__name__} vs {type(b).__name__}"]
        if a.shape != b.shape:
            return [f"{where}: shape {list(a.shape)} vs {list(b.shape)}"]
        if a.dtype != b.dtype:
            if not lenient:
                return [f"{where}: dtype {a.dtype} vs {b.dtype}"]
            b = b.to(a.dtype)
        try:
            torch.testing.assert_close(b, a, equal_nan=True)
        except AssertionError:
            diff = (b.double() - a.double()).abs()
            finite = diff[torch.isfinite(diff)]
            worst = float(finite.max()) if finite.numel() else float("nan")
            return [f"{where}: values differ (max abs diff {worst:.3g})"]
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        if "__seq__" in a and "__seq__" in b:
            if a["length"] != b["length"]:
                return [f"{where}: length {a['length']} vs {b['length']}"]
            out: list[str] = []
            for i, (x, y) in enumerate(zip(a["items"], b["items"])):
                out += compare(x, y, f"{where}[{i}]", lenient=lenient)
                if len(out) >= MAX_MISMATCHES:
                    break
            return out
        if "__dict__" in a and "__dict__" in b:
            return _compare_maps(a["__dict__"], b["__dict__"], where, lenient)
        if "__module__" in a and "__module__" in b:
            attrs = _compare_maps(a.get("attrs") or {}, b.get("attrs") or {}, where, lenient)
            return _compare_maps(a["state"], b["state"], where, lenient) + attrs
        if "__object__" in a and "__object__" in b:
            if a["__object__"] != b["__object__"]:
                return [f"{where}: {a['__object__']} vs {b['__object__']}"]
            return _compare_maps(a.get("attrs") or {}, b.get("attrs") or {}, where, lenient)
        return _compare_maps(a, b, where, lenient)
    if _is_number(a) and _is_number(b) and not isinstance(a, bool) and not isinstance(b, bool):
        return [] if _close_numbers(float(a), float(b)) else [f"{where}: {a!r} != {b!r}"]
    if type(a) is not type(b):
        return [f"{where}: {type(a).__name__} vs {type(b).__name__}"]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def _compare_maps(a: dict, b: dict, where: str, lenient: bool) -> list[str]:
    out: list[str] = []
    for key in sorted(set(a) | set(b)):
        label = f"{where}.{key}" if where else str(key)
        if key not in a or key not in b:
            out.append(f"{label}: only in the {'rewritten' if key not in a else 'original'} run")
        else:
            out += compare(a[key], b[key], label, lenient=lenient)
        if len(out) >= MAX_MISMATCHES:
            break
    return out


def _plain_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numel(value: Any) -> int:
    return value.numel() if isinstance(value, torch.Tensor) else 1


def _is_number(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return value.numel() == 1
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _as_number(value: Any) -> float | None:
    if isinstance(value, torch.Tensor):
        return float(value.item()) if value.numel() == 1 and not value.is_complex() else None
    return float(value)


def _close_numbers(a: float, b: float) -> bool:
    if math.isnan(a) and math.isnan(b):
        return True
    return abs(a - b) <= FLOAT_ATOL + FLOAT_RTOL * abs(a)


def _grad_maps(a: dict, b: dict, label: str) -> list[str]:
    out = []
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        if x is None and y is None:
            continue
        if x is None or y is None:
            out.append(f"{label} {name}: {'None' if x is None else 'set'} in the original, {'None' if y is None else 'set'} in the rewritten")
        else:
            out += compare(x, y, f"{label} {name}")
        if len(out) >= MAX_MISMATCHES:
            break
    return out


# -- checks ----------------------------------------------------------------------------
def _original_values_missing(s: Sides) -> bool:
    exc = s.original.exception
    return exc is not None and exc.phase in ("run", "import", "compile") and s.mode != "autograd_function"


def _graph_shaped(value: Any, choices: frozenset[str] = frozenset()) -> bool:
    """A value a graph-state read yields: a flag, no node, a graph node, or one of the
    strings a conditional on graph state chooses between (`graph_state`)."""
    if value is None or isinstance(value, bool) or (isinstance(value, str) and value in choices):
        return True
    return isinstance(value, dict) and "Backward" in str(value.get("__object__", ""))


def _set_aside(a: Any, b: Any, names: frozenset[str], where: str, found: list[str], reached: bool,
               choices: frozenset[str] = frozenset()) -> tuple[Any, Any]:
    """`a` and `b` with every differing pair of graph-shaped values at a place a
    graph-state read reached (`graph_state`: a name in `names`, or inside one) replaced
    by None on both sides, each listed in `found`."""
    if isinstance(a, dict) and isinstance(b, dict):
        if "__seq__" in a and "__seq__" in b:
            pairs = [_set_aside(x, y, names, f"{where}[{i}]", found, reached, choices) for i, (x, y) in enumerate(zip(a["items"], b["items"]))]
            tail_a, tail_b = a["items"][len(pairs):], b["items"][len(pairs):]
            return ({**a, "items": [p[0] for p in pairs] + tail_a}, {**b, "items": [p[1] for p in pairs] + tail_b})
        for key in ("__dict__", "attrs", "state"):
            if isinstance(a.get(key), dict) and isinstance(b.get(key), dict):
                x, y = _set_aside_map(a[key], b[key], names, where, found, reached, choices)
                a, b = {**a, key: x}, {**b, key: y}
        if not any(k in a for k in ("__dict__", "__module__", "__object__", "__seq__")):
            return _set_aside_map(a, b, names, where, found, reached, choices)
        return a, b
    if reached and _graph_shaped(a, choices) and _graph_shaped(b, choices) and compare(a, b, where):
        found.append(f"{where}: {_summarize_value(a)} -> {_summarize_value(b)}")
        return None, None
    return a, b


def _set_aside_map(a: dict, b: dict, names: frozenset[str], where: str, found: list[str], reached: bool,
                   choices: frozenset[str] = frozenset()) -> tuple[dict, dict]:
    x, y = dict(a), dict(b)
    for key in set(a) & set(b):
        label = f"{where}.{key}" if where else str(key)
        x[key], y[key] = _set_aside(a[key], b[key], names, label, found, reached or key in names, choices)
    return x, y


def _graph_state_names(s: Sides, key: str = "names") -> frozenset[str]:
    return frozenset(name for record in (s.original, s.rewritten) if record.graph_state
                     for name in getattr(record.graph_state, key))


def _outputs(s: Sides, *, lenient: bool) -> list[str]:
    o_out, r_out = s.original.outputs, s.rewritten.outputs
    if s.graph_state is not None:
        o_out, r_out = _set_aside(o_out, r_out, _graph_state_names(s), "", s.graph_state, False, _graph_state_names(s, "choices"))
    diffs = compare(o_out, r_out, "", lenient=lenient)
    if s.mode in ("function", "method"):
        diffs += _compare_maps(s.original.params_final, s.rewritten.params_final, "param", lenient)
    if s.original.printed is not None and s.rewritten.printed is not None:
        # a script reports its results by printing them: what it printed is an output
        diffs += printed_differences(s.original.printed, s.rewritten.printed, rtol=FLOAT_RTOL, atol=FLOAT_ATOL,
                                     graph_state=s.graph_state, choices=_graph_state_names(s, "choices"))
    return diffs


def _second_point(s: Sides) -> tuple[str | None, str]:
    """(the difference at the second point or None, the clause saying it was compared):
    the first loss (or the weighted outputs) with parameters, inputs and seeds moved the
    same on both sides (`directional.second_point`). Not compared ("") where either side
    could not reach it; the run's own point is then all there is."""
    a, b = s.original.second_point or {}, s.rewritten.second_point or {}
    if not (a.get("applicable") and b.get("applicable")):
        return None, ""
    # the losses backpropagated before the first step, summed (a merge of two backward
    # passes into one keeps the sum); records without the sum compare the first loss
    # the sums only where both windows closed at an optimizer step (an original whose
    # backward raised ended its window there: then the first losses)
    key = "window_loss" if a.get("window_end") == b.get("window_end") == "step" else "loss"
    x, y = float(a[key]), float(b[key])
    if not (math.isnan(x) and math.isnan(y)) and abs(x - y) > SECOND_POINT_ATOL + SECOND_POINT_RTOL * abs(x):
        what = "the first loss" if key == "loss" else "the sum of the losses backpropagated before the first step"
        return (f"at a second point (parameters and inputs moved, seeds shifted, the same on both sides) {what} "
                f"is {x:.7g} in the original and {y:.7g} in the rewritten: a term that vanished at the run's own "
                "point does not vanish there"), ""
    return None, " (at a second point too)"


def _clock_clause(s: Sides) -> str:
    """What the runs set aside as clock readings (`clock`), for the verdict to say so."""
    names = list(dict.fromkeys([*s.original.volatile, *s.rewritten.volatile]))
    return f"; not compared, read from a clock: {', '.join(names[:6])}" if names else ""


def check_outputs_equal(s: Sides) -> CheckResult:
    if _original_values_missing(s):
        return CheckResult("outputs_equal", NA, "the original raised before producing values")
    diffs = _outputs(s, lenient=False)
    if diffs:
        return CheckResult("outputs_equal", FAIL, "outputs differ: " + "; ".join(diffs[:3]))
    moved, clause = _second_point(s)
    if moved:
        return CheckResult("outputs_equal", FAIL, f"outputs differ {moved}")
    return CheckResult("outputs_equal", PASS, "outputs equal" + clause + _clock_clause(s))


def check_accumulated_values_equal(s: Sides) -> CheckResult:
    if _original_values_missing(s):
        return CheckResult("accumulated_values_equal", NA, "the original raised before producing values")
    diffs = _outputs(s, lenient=True)
    if diffs:
        return CheckResult("accumulated_values_equal", FAIL, "accumulated values differ: " + "; ".join(diffs[:3]))
    moved, clause = _second_point(s)
    if moved:
        return CheckResult("accumulated_values_equal", FAIL, f"accumulated values differ {moved}")
    return CheckResult("accumulated_values_equal", PASS, "accumulated values equal" + clause)


def _forward_record_diffs(o: list[dict[str, Any]], r: list[dict[str, Any]]) -> list[str]:
    """The original's forward records (each kept before its backward ran) against the
    rewritten's first as many: the loss, and the outermost modules' outputs."""
    diffs: list[str] = []
    for index, (a, b) in enumerate(zip(o, r)):
        label = f"backward #{index + 1}"
        diffs += compare(_seq(a["loss"]), _seq(b["loss"]), f"{label} loss")
        outputs = _without_recomputations(a["outputs"], b["outputs"], [x for earlier in o[: index + 1] for x in earlier["outputs"]])
        diffs += compare(_seq([_seq(x) for x in a["outputs"]]), _seq([_seq(x) for x in outputs]), f"{label} module outputs")
        if len(diffs) >= MAX_MISMATCHES:
            break
    return diffs


def _without_recomputations(a: list[Any], b: list[Any], seen: list[Any]) -> list[Any]:
    """The rewritten's module outputs `b` without the extra calls that only recompute a
    value the original already had (`seen`: its outputs up to this backward), when what
    is left lines up with the original's `a`: ``D(z.detach())`` scoring again what ``D(z)``
    scored before a step, so that the second loss no longer reuses the first one's graph.
    Otherwise `b` unchanged (and the lengths differ)."""
    if len(b) <= len(a):
        return b
    kept: list[Any] = []
    position = 0
    for item in b:
        if position < len(a) and not compare(_seq(a[position]), _seq(item), ""):
            kept.append(item)
            position += 1
        elif not any(not compare(_seq(value), _seq(item), "") for value in seen):
            return b
    return kept if position == len(a) else b


def _seq(items: list[Any]) -> dict[str, Any]:
    return {"__seq__": "list", "items": list(items), "length": len(items)}


def check_forward_values_equal(s: Sides) -> CheckResult:
    """Forward values equal, including those the original computed before it crashed:
    each backward's loss (and module outputs) is recorded before that backward runs."""
    o_records, r_records = s.original.forward or [], s.rewritten.forward or []
    o_count = int(s.original.forward_count or 0)
    r_count = int(s.rewritten.forward_count or 0)
    if _original_values_missing(s):
        if not o_records:
            return CheckResult("forward_values_equal", NA, "the original raised before any backward, so no forward value exists to compare")
        if r_count < o_count:
            return CheckResult("forward_values_equal", FAIL, f"the rewritten reached {r_count} backward pass(es), the original {o_count} before it raised")
        diffs = _forward_record_diffs(o_records, r_records)
        if diffs:
            return CheckResult("forward_values_equal", FAIL, "forward values differ: " + "; ".join(diffs[:3]))
        moved, clause = _second_point(s)
        if moved:
            return CheckResult("forward_values_equal", FAIL, f"forward values differ {moved}")
        return CheckResult("forward_values_equal", PASS, f"forward values before the original's error equal ({len(o_records)} backward pass(es)){clause}")
    diffs = compare(s.original.outputs, s.rewritten.outputs, "")
    if o_count != r_count:
        diffs.append(f"backward passes: {o_count} vs {r_count}")
    diffs += _forward_record_diffs(o_records, r_records)
    if diffs:
        return CheckResult("forward_values_equal", FAIL, "forward values differ: " + "; ".join(diffs[:3]))
    moved, clause = _second_point(s)
    if moved:
        return CheckResult("forward_values_equal", FAIL, f"forward values differ {moved}")
    return CheckResult("forward_values_equal", PASS, "forward values equal" + clause)


def check_graph_state_may_change(s: Sides) -> CheckResult:
    """The contract's word that observables of graph state (`graph_state`) may change:
    the output comparisons set them aside, and this lists those that did. Never
    evidence by itself."""
    name = "graph_state_may_change"
    if s.graph_state is None or _original_values_missing(s):
        return CheckResult(name, NA, "observables of graph state not compared")
    _outputs(s, lenient=True)
    changed = list(dict.fromkeys(s.graph_state))
    if not changed:
        return CheckResult(name, NA, "no observable of graph state changed")
    more = f" (and {len(changed) - 3} more)" if len(changed) > 3 else ""
    return CheckResult(name, PASS, "observables of graph state changed as the contract expects: " + "; ".join(changed[:3]) + more)


def check_time_per_step_reported(s: Sides) -> CheckResult:
    """The time per optimizer step of both runs (the shortest interval between two steps
    of the same bounded run, one process per side, seeded alike), as a ratio: what a
    fix meant to speed training up (AGF017) saves. A report, never evidence; the figures
    are as noisy as the machine they ran on."""
    name = "time_per_step_reported"
    a = (s.original.measures or {}).get("time_per_step_s")
    b = (s.rewritten.measures or {}).get("time_per_step_s")
    if not a or not b:
        return CheckResult(name, NA, "time per step not measured (fewer than two optimizer steps on a side)")
    return CheckResult(name, PASS, f"time per step {a * 1e3:.3g} ms -> {b * 1e3:.3g} ms ({a / b:.2f}x as fast, "
                                   "measured in the same bounded run on both sides)")


def check_grads_untouched(s: Sides) -> CheckResult:
    diffs = _grad_maps(s.original.leaf_grads, s.rewritten.leaf_grads, ".grad of")
    if diffs:
        return CheckResult("grads_untouched", FAIL, "parameters' .grad changed: " + "; ".join(diffs[:3]))
    return CheckResult("grads_untouched", PASS, ".grad untouched")


def check_grads_equal(s: Sides) -> CheckResult:
    if _original_values_missing(s):
        return CheckResult("grads_equal", NA, "the original raised before producing gradients")
    o, r = s.original, s.rewritten
    diffs = _grad_maps(o.leaf_grads, r.leaf_grads, "final .grad of")
    o_steps, r_steps = o.steps, r.steps
    if o.measures.get("optimizer_steps") != r.measures.get("optimizer_steps"):
        diffs.append(
            f"optimizer steps: {o.measures.get('optimizer_steps')} vs {r.measures.get('optimizer_steps')}"
        )
    for a, b in zip(o_steps, r_steps):
        diffs += _grad_maps(a["grads"], b["grads"], f"step {a['step']} .grad of")
        if len(diffs) >= MAX_MISMATCHES:
            break
    if o.output_grads is not None and r.output_grads is not None:
        diffs += _grad_maps(o.output_grads, r.output_grads, "d(outputs)/d")
    if diffs:
        return CheckResult("grads_equal", FAIL, "gradients differ: " + "; ".join(diffs[:3]))
    return CheckResult("grads_equal", PASS, "gradients equal")


def _retained(record: RunRecord) -> tuple[int | None, int, int | None]:
    """(saved bytes alive at the end, graph nodes reachable at the end, peak saved bytes)."""
    measures = record.measures
    return measures.get("retained_graph_bytes"), int(measures.get("graph_nodes") or 0), measures.get("peak_graph_bytes")


def _peak_comparable(s: Sides) -> bool:
    """A run that raised stopped early: its peak says nothing about the whole run."""
    return s.original.exception is None and s.rewritten.exception is None


def _retained_text(a: int, b: int, na: int, nb: int, pa: int | None, pb: int | None) -> str:
    text = f"retained at end {format_bytes(a)} -> {format_bytes(b)}"
    if na or nb:
        text += f" ({na} -> {nb} graph nodes)"
    if pa is None or pb is None:
        return text
    return f"graph held at peak {format_bytes(pa)} -> {format_bytes(pb)}, {text}"


def _peak_allowance(pa: int) -> float:
    return pa * (1 + PEAK_GRAPH_SLACK_RATIO)


def check_retained_graph_not_higher(s: Sides) -> CheckResult:
    """Neither the graph alive at the end nor the graph held at the peak grows."""
    (a, na, pa), (b, nb, pb) = _retained(s.original), _retained(s.rewritten)
    if a is None or b is None:
        return CheckResult("retained_graph_not_higher", UNKNOWN, "retained graph memory was not measured")
    if not _peak_comparable(s):
        pa = pb = None
    text = _retained_text(a, b, na, nb, pa, pb)
    end_ok = b <= a and (nb <= na or b < a)
    peak_ok = pa is None or pb is None or pb <= _peak_allowance(pa)
    if end_ok and peak_ok:
        return CheckResult("retained_graph_not_higher", PASS, text)
    which = " and ".join(w for w, bad in (("at peak", not peak_ok), ("at end", not end_ok)) if bad)
    return CheckResult("retained_graph_not_higher", FAIL, f"{text}: higher {which}")


def check_retained_graph_lower_if_any(s: Sides) -> CheckResult:
    """Strictly lower when the original held any graph: the peak of saved bytes when the
    original held some during the run, else (or when the peak is the same, e.g. set by a
    training step both keep) the end of the run as before: saved bytes, else nodes (after
    a backward the saved tensors are freed but an accumulated loss still keeps every
    iteration's nodes reachable). Never higher on either (as `retained_graph_not_higher`)."""
    (a, na, pa), (b, nb, pb) = _retained(s.original), _retained(s.rewritten)
    if a is None or b is None:
        return CheckResult("retained_graph_lower_if_any", UNKNOWN, "retained graph memory was not measured")
    if not _peak_comparable(s):
        pa = pb = None
    text = _retained_text(a, b, na, nb, pa, pb)
    if a > 0:
        end_lower = b < a
    elif na > 0:
        end_lower = b == 0 and nb < na
    else:
        end_lower = False
    end_not_higher = b <= a and (nb <= na or b < a)
    if pa is not None and pb is not None:
        peak_lower = pa > 0 and pb < pa
        peak_not_higher = pb <= _peak_allowance(pa)
        held_any = pa > 0 or a > 0 or na > 0
        nothing_now = pb == 0 and b == 0 and nb == 0
    else:
        peak_lower, peak_not_higher = False, True
        held_any = a > 0 or na > 0
        nothing_now = b == 0 and nb == 0
    ra, rb = _recorded(s)
    recorded_lower = ra is not None and rb is not None and ra > 0 and rb < ra
    if not held_any and not ra and nothing_now:
        # the code the finding was about recorded no graph at all (a project decorator
        # already entered inference mode, the caller runs it under no_grad): the fix
        # removes nothing, so the finding is not confirmed, and its fix not accepted
        return CheckResult("retained_graph_lower_if_any", FAIL, f"not confirmed: {NO_GRAPH_TO_REMOVE} ({text})")
    if held_any:
        ok = (peak_lower or end_lower or recorded_lower) and end_not_higher and peak_not_higher
    else:
        ok = nothing_now
    if recorded_lower and not (peak_lower or end_lower):
        text += f", graph recorded over the run {format_bytes(ra)} -> {format_bytes(rb)}"
    return CheckResult("retained_graph_lower_if_any", PASS if ok else FAIL, text if ok else f"{text}: not lower")


def _recorded(s: Sides) -> tuple[int | None, int | None]:
    """Bytes autograd saved over the whole run, each side (None when not comparable): a
    validation graph smaller than the training step's sets no peak, yet the fix that
    stops recording it records less, every run, without GC noise."""
    if not _peak_comparable(s):
        return None, None
    a = s.original.measures.get("recorded_graph_bytes")
    b = s.rewritten.measures.get("recorded_graph_bytes")
    return a, b


def check_step_grads_match_contributions(s: Sides) -> CheckResult:
    r = s.rewritten
    measures = r.measures
    steps = measures.get("optimizer_steps", 0) + measures.get("manual_updates", 0)
    if not steps:
        return CheckResult(
            "step_grads_match_contributions", UNKNOWN, "no optimizer.step() or hand-written update ran in the rewritten version"
        )
    unit = "steps" if measures.get("optimizer_steps", 0) else "hand-written updates"
    count = r.step_violation_count
    orig_count = s.original.stale_steps
    if count:
        first = r.step_violations[0]
        return CheckResult(
            "step_grads_match_contributions",
            FAIL,
            f"at step {first['step']} {first['param']}: {first['detail']} ({count} violation(s) over {steps} steps)",
        )
    before = _first_step_differences(s.original.steps or [], r.steps or [])
    if before:
        return CheckResult(
            "step_grads_match_contributions",
            FAIL,
            "before the first optimizer.step() the rewritten backpropagates something else than the original "
            "(zeroing gradients changes no loss and no contribution): " + "; ".join(before[:3]),
        )
    tail = f"; original: {orig_count} step(s) saw stale gradients" if orig_count else ""
    first = " (first step's losses and contributions equal the original's)" if s.original.steps else ""
    return CheckResult("step_grads_match_contributions", PASS, f"every step's .grad = contributions since the previous step ({steps} {unit}){tail}{first}")


def check_accumulated_grads_are_window_mean(s: Sides) -> CheckResult:
    """The first step's accumulated gradient against the reference the original gives:
    the mean of its micro-batch gradients at the same parameters (AGF019)."""
    name = "accumulated_grads_are_window_mean"
    o_steps, r_steps = s.original.steps or [], s.rewritten.steps or []
    if not o_steps or not r_steps:
        side = "original" if not o_steps else "rewritten"
        return CheckResult(name, UNKNOWN, f"no optimizer step ran in the {side} version, so no accumulated gradient to compare")
    a, b = o_steps[0], r_steps[0]
    n, m = a.get("backward_passes") or 0, b.get("backward_passes") or 0
    if n != m:
        return CheckResult(name, FAIL, f"the first step followed {n} backward pass(es) in the original and {m} in the rewritten")
    if n == 0:
        return CheckResult(name, UNKNOWN, "no backward pass ran before the first step")
    diffs, compared = [], 0
    o_contrib, r_contrib = a.get("contributions") or {}, b.get("contributions") or {}
    for param in sorted(set(o_contrib) | set(r_contrib)):
        x, y = o_contrib.get(param), r_contrib.get(param)
        if x is None and y is None:
            continue
        if x is None or y is None or x.shape != y.shape:
            diffs.append(f"{param}: {'no gradient' if y is None else 'a gradient'} in the rewritten, {'none' if x is None else 'one'} in the original")
            continue
        reference = x.double() / n
        compared += int(bool(reference.abs().sum() > 0))
        if not torch.allclose(y.double(), reference, rtol=1e-4, atol=1e-6):
            ratio = float((y.double() * x.double()).sum() / (x.double() * x.double()).sum()) if reference.abs().sum() > 0 else float("nan")
            diffs.append(f"{param}: gradient = {ratio:.4g} x the original's, expected 1/{n} (the mean of {n} micro-batches)")
    losses_o, losses_r = list(a.get("losses") or []), list(b.get("losses") or [])
    losses_compared = len(losses_o) == len(losses_r) == n  # else some loss fed another model
    if losses_compared:
        for index, (x, y) in enumerate(zip(losses_o, losses_r)):
            if not math.isclose(y, x / n, rel_tol=1e-5, abs_tol=1e-7):
                diffs.append(f"loss {index} backpropagated: {y:.6g}, expected {x:.6g} / {n}")
                break
    if diffs:
        return CheckResult(name, FAIL, "at the first step " + "; ".join(diffs[:MAX_MISMATCHES]))
    violations = s.rewritten.step_violation_count
    if violations:
        first = s.rewritten.step_violations[0]
        return CheckResult(name, FAIL, f"at step {first['step']} {first['param']}: {first['detail']} ({violations} violation(s))")
    if not compared:
        return CheckResult(name, UNKNOWN, "every contribution before the first step was zero: nothing to compare")
    losses_note = f"; losses backpropagated = the original's / {n}" if losses_compared else ""
    return CheckResult(
        name,
        PASS,
        f"first step: the gradient of {compared} parameter(s) = the mean of the original's {n} micro-batch gradients "
        f"(accumulated / {n}){losses_note}; every step's .grad = contributions since the previous step "
        f"({len(r_steps)} steps)",
    )


def _first_step_differences(o_steps: list[dict[str, Any]], r_steps: list[dict[str, Any]]) -> list[str]:
    """Until the first ``optimizer.step()`` no parameter has moved, so a fix that only
    adds or moves zeroing must backpropagate the same losses (scale included) and add the
    same contributions to every parameter as the original did."""
    if not o_steps or not r_steps:
        return []
    a, b = o_steps[0], r_steps[0]
    diffs = compare(_seq(list(a.get("losses") or [])), _seq(list(b.get("losses") or [])), "losses backpropagated")
    if not diffs:
        diffs = _grad_maps(a.get("contributions") or {}, b.get("contributions") or {}, "contribution to")
    return diffs


def check_original_error_gone(s: Sides) -> CheckResult:
    exc = s.original.exception
    if exc is None:
        return CheckResult("original_error_gone", NA, "the original raised nothing")
    if s.rewritten.exception is not None:
        return CheckResult("original_error_gone", FAIL, f"still raises {_exc_text(s.rewritten['exception'])}")
    return CheckResult("original_error_gone", PASS, f"original {exc.type} gone")


def _original_fd_note(s: Sides) -> str:
    fd = s.original.finite_differences or {}
    if not fd.get("applicable"):
        return ""
    if fd["passed"]:
        return f"; the original's matched too ({fd['analytic']:.6g} vs {fd['numeric']:.6g})"
    return f"; the original's did not ({fd['analytic']:.6g} vs {fd['numeric']:.6g})"


def check_gradients_match_finite_differences(s: Sides) -> CheckResult:
    """The rewritten's gradients are true derivatives (float64, along a random direction);
    the original's comparison is shown as evidence of what the fix changed."""
    name = "gradients_match_finite_differences"
    gc_result = s.rewritten.gradcheck
    if gc_result is not None:
        status = PASS if gc_result["passed"] else FAIL
        return CheckResult(name, status, "gradcheck passes" if gc_result["passed"] else gc_result["error"])
    fd = s.rewritten.finite_differences
    if not fd or not fd.get("applicable"):
        return CheckResult(name, NA, (fd or {}).get("detail", "finite differences not applicable to this unit"))
    if not fd["passed"]:
        return CheckResult(name, FAIL, f"rewritten: {fd['detail']}")
    later = [entry for entry in fd.get("later") or () if entry.get("applicable")]
    wrong = [entry for entry in later if not entry["passed"]]
    if wrong:
        return CheckResult(name, FAIL, f"rewritten: {wrong[0]['detail']} (the first backward's matched)")
    also = "".join(f"; at backward {entry['backward']} too ({entry['analytic']:.6g} vs {entry['numeric']:.6g})" for entry in later)
    return CheckResult(name, PASS, f"gradients match finite differences ({fd['analytic']:.6g} vs {fd['numeric']:.6g}){also}{_original_fd_note(s)}")


def check_equal_or_gradients_corrected(s: Sides) -> CheckResult:
    """Outputs and gradients equal the original's (a `.data` read made `.detach()`, an
    intended update moved under no_grad); or the original's gradients were wrong (a
    `.data` mutation of a tensor autograd saved): then the forward values before the
    first backward must be equal (the math did not change), the rewritten's gradients
    must match finite differences, and the original's must not. Training then moves
    the two versions apart, so their later values are not compared."""
    name = "equal_or_gradients_corrected"
    outputs, grads = check_outputs_equal(s), check_grads_equal(s)
    if outputs.status != FAIL and grads.status != FAIL:
        status = PASS if PASS in (outputs.status, grads.status) else NA
        return CheckResult(name, status, f"{outputs.detail}, {grads.detail}")
    differ = grads.detail if grads.status == FAIL else outputs.detail
    o_fd, r_fd = s.original.finite_differences or {}, s.rewritten.finite_differences or {}
    if not r_fd.get("applicable"):
        return CheckResult(name, FAIL, f"{differ}; {r_fd.get('detail', 'finite differences were not run')}, so no correction can be shown")
    if not r_fd["passed"]:
        return CheckResult(name, FAIL, f"{differ}; rewritten: {r_fd['detail']}")
    if not o_fd.get("applicable"):
        return CheckResult(name, FAIL, f"{differ}; the original's gradients could not be checked ({o_fd.get('detail', 'not run')}), so no correction can be shown")
    if o_fd["passed"]:
        return CheckResult(name, FAIL, f"{differ}, although the original's gradients already matched finite differences")
    first = _forward_record_diffs((s.original.forward or [])[:1], (s.rewritten.forward or [])[:1])
    if first:
        return CheckResult(name, FAIL, "forward values before the first backward differ: " + "; ".join(first[:3]))
    moved, _ = _second_point(s)
    if moved:
        return CheckResult(name, FAIL, f"forward values before the first backward differ {moved}")
    return CheckResult(
        name,
        PASS,
        f"gradients corrected: the rewritten's match finite differences ({r_fd['analytic']:.6g} vs {r_fd['numeric']:.6g}), "
        f"the original's did not ({o_fd['analytic']:.6g}); forward values before the first backward equal",
    )


# -- custom Functions: the original's backward as the reference ------------------------
def _functions(record: RunRecord) -> dict[str, dict[str, Any]]:
    return record.functions or {}


def _judged_by_finite_differences_alone(s: Sides, cls: str, why: str) -> CheckResult:
    """`cls`'s original backward raised, so there is no original gradient to agree with:
    the rewritten's backward must match finite differences (float64, along a random
    direction, at the run's own inputs) at some input where the derivative is not zero
    (a backward that returns zeros agrees with a flat point and proves nothing)."""
    name = "backward_agrees_with_original"
    direct = ((s.rewritten.functions or {}).get(cls) or {}).get("direct") or {}
    if direct.get("rewritten_error"):
        return CheckResult(name, FAIL, f"{cls}: {why}; the rewritten backward raises too on the same ctx: {direct['rewritten_error']}")
    positions = (((s.rewritten.functions or {}).get(cls) or {}).get("fd") or {}).get("positions") or {}
    if not positions:
        return CheckResult(name, UNKNOWN, f"{cls}: {why}, and its rewritten backward was not checked against finite differences")
    off = [(p, r) for p, r in sorted(positions.items()) if not r.get("match")]
    if off:
        position, result = off[0]
        return CheckResult(name, FAIL, f"{cls}: {why}; the rewritten backward does not match finite differences at input "
                                       f"{position} ({result['analytic']:.6g} vs {result['numeric']:.6g})")
    telling = [(p, r) for p, r in sorted(positions.items()) if abs(float(r.get("numeric") or 0.0)) > NONTRIVIAL_DERIVATIVE]
    if not telling:
        return CheckResult(name, UNKNOWN, f"{cls}: {why}; finite differences are zero at the run's inputs, which proves nothing")
    position, result = telling[0]
    return CheckResult(name, PASS, f"{cls}: {why}, so there is nothing to agree with; judged by finite differences "
                                   f"alone, the rewritten backward matches them (input {position}: {result['analytic']:.6g} "
                                   f"vs {result['numeric']:.6g}, float64)")


def check_backward_agrees_with_original(s: Sides) -> CheckResult:
    """Both backwards called on the same saved context: identical gradients wherever the
    original returned one; a padded None only for inputs that never required grad."""
    name = "backward_agrees_with_original"
    probed = {cls: entry for cls, entry in _functions(s.rewritten).items() if entry.get("direct") is not None}
    if not probed:
        return CheckResult(name, UNKNOWN, "no custom Function of this file built a graph in the rewritten run, so its backward was never compared")
    clauses = []
    for cls, entry in sorted(probed.items()):
        direct, roles = entry["direct"], entry.get("roles") or []
        if direct.get("error") and direct["error"].startswith(ORIGINAL_BACKWARD_RAISED):
            # nothing to agree with: the rewritten's backward is judged on its own
            return _judged_by_finite_differences_alone(s, cls, direct["error"])
        if direct.get("error"):
            return CheckResult(name, UNKNOWN, f"{cls}: {direct['error']}")
        if direct["mismatches"]:
            return CheckResult(name, FAIL, f"{cls}.backward differs from the original's on the same ctx at {direct['mismatches'][0]}")
        needed = [p for p in direct["padded_none"] if p < len(roles) and roles[p] == "grad"]
        carried = {int(k): v for k, v in (s.original.graph_inputs or {}).items()}
        evidence = next((p for p in needed if p in carried), None)
        if evidence is not None and s.mode == "autograd_function":
            # the file itself passes a graph-carrying value there: its gradient is dropped
            return CheckResult(
                name,
                FAIL,
                f"{cls}.backward returns None for input {evidence}, which the file fills with {carried[evidence]}: "
                "a value that carries a graph, so its gradient would be dropped",
            )
        if needed and s.mode == "autograd_function":
            # synthesized inputs all require grad: that is our choice, not the program's
            return CheckResult(
                name,
                UNKNOWN,
                f"{cls}.backward returns None for input {needed[0]}, a tensor the synthesized inputs made require grad; "
                "only a run through code that calls it (a driver) can show whether it needs a gradient",
            )
        if needed:
            return CheckResult(name, FAIL, f"{cls}.backward returns None for input {needed[0]}, which required grad during the run: its gradient is dropped")
        added_note = ""
        if direct["added"]:
            gate = check_gradcheck_if_original_matches(s)
            surrogate = _not_true_derivative(s.original, cls)
            if gate.status == FAIL:
                return CheckResult(name, FAIL, f"{cls}.backward adds gradient(s) at position(s) {direct['added']}: {gate.detail}")
            if gate.status != PASS and surrogate is None:
                return CheckResult(name, UNKNOWN, f"{cls}.backward adds gradient(s) at position(s) {direct['added']} that no run can check: {gate.detail}")
            if gate.status != PASS:
                # a straight-through estimator or gradient reversal: its own values are the
                # intent, and finite differences cannot judge a gradient that is not one
                added_note = (
                    f", and adds its own values at position(s) {direct['added']}, not checked against finite "
                    f"differences because the original's are not the true derivative ({surrogate}), by design or not"
                )
        kept = direct.get("original_positions") or []
        clause = f"{cls}.backward returns the original's gradients at position(s) {kept}" if kept else f"{cls}.backward: the original returned no gradient"
        clause += added_note
        if direct["padded_none"]:
            clause += f", None for input(s) {direct['padded_none']} (never required grad)"
        clauses.append(clause)
    return CheckResult(name, PASS, "; ".join(clauses))


def _not_true_derivative(record: RunRecord, cls: str) -> str | None:
    """The first position where the original `cls.backward` was measured off finite
    differences (float64, a random direction), or None when it was not measured off."""
    entry = _functions(record).get(cls) or {}
    fd = entry.get("fd") or {}
    if fd.get("error") or not fd.get("positions"):
        return None
    off = _fd_mismatches(entry)
    return off[0] if off else None


def _fd_mismatches(entry: dict[str, Any]) -> list[str]:
    fd = entry.get("fd") or {}
    return [f"position {p}: {v['analytic']:.6g} vs {v['numeric']:.6g}" for p, v in sorted(fd.get("positions", {}).items()) if not v["match"]]


def _original_fails_gradcheck_too(s: Sides, name: str) -> CheckResult | None:
    """For a Function unit whose original ran cleanly yet fails gradcheck as well: the
    backward is deliberately not the full derivative (a gradient projected with
    ``.tril()`` onto a triangular parameter, a surrogate), so gradcheck is no evidence
    against the rewrite and the other contracts (grads_equal) decide."""
    original = s.original.gradcheck
    if name != "unit" or original is None or original.get("passed") or s.original.exception is not None:
        return None
    return CheckResult("gradcheck_passes", NA, f"not applied: the original fails gradcheck too ({str(original.get('error'))[:120]}), by design or not")


def check_gradcheck_if_original_matches(s: Sides) -> CheckResult:
    """gradcheck (float64) of the rewritten Function, applied only where the original's
    existing gradients are true derivatives: a straight-through estimator or a gradient
    reversal is not a mistake to correct."""
    name = "gradcheck_if_original_matches"
    originals = {cls: e for cls, e in _functions(s.original).items() if e.get("fd") is not None}
    rewrittens = {cls: e for cls, e in _functions(s.rewritten).items() if e.get("fd") is not None}
    if not originals or not rewrittens:
        return CheckResult(name, NA, "no custom Function of this file built a graph in both runs")
    clauses = []
    for cls, entry in sorted(originals.items()):
        fd = entry["fd"]
        if fd.get("error") or not fd.get("positions"):
            return CheckResult(name, NA, f"{cls}: the original's gradients could not be checked ({fd.get('error') or 'it returned none'})")
        off = _fd_mismatches(entry)
        if off:
            return CheckResult(name, NA, f"not applied: the original {cls}.backward is not the true derivative ({off[0]}), by design or not")
        mine = rewrittens.get(cls)
        if mine is None:
            continue
        if mine["fd"].get("error"):
            return CheckResult(name, FAIL, f"{cls}: the rewritten cannot be checked in float64: {mine['fd']['error']}")
        wrong = _fd_mismatches(mine)
        if wrong:
            return CheckResult(name, FAIL, f"gradcheck fails for {cls}: backward does not match finite differences at {wrong[0]}")
        clauses.append(f"{cls}.backward matches finite differences (float64)")
    gc_result = s.rewritten.gradcheck
    if gc_result is not None and not gc_result["passed"]:
        return CheckResult(name, FAIL, f"gradcheck fails: {gc_result['error']}")
    if not clauses:
        return CheckResult(name, NA, "no Function ran in both versions")
    return CheckResult(name, PASS, "; ".join(clauses))


def check_gradcheck_passes(s: Sides) -> CheckResult:
    results = []
    if s.rewritten.gradcheck is not None:
        results.append(("unit", s.rewritten.gradcheck))
    if not results:  # a driver ran the Functions: their backward at the real inputs
        return _functions_match_finite_differences(s)
    failed = [(name, r) for name, r in results if not r.get("passed")]
    if failed:
        name, r = failed[0]
        return _original_fails_gradcheck_too(s, name) or CheckResult("gradcheck_passes", FAIL, f"gradcheck fails{'' if name == 'unit' else ' for ' + name}: {r.get('error')}")
    return CheckResult("gradcheck_passes", PASS, "gradcheck passes (float64)")


def _functions_match_finite_differences(s: Sides) -> CheckResult:
    """gradcheck's question asked where a driver (script, command, test) called the
    Functions: at each one's first graph-building call, is its backward the derivative of
    its forward, along a random direction in float64 (`probes._on_apply`)?"""
    checked, failed = [], []
    originals = s.original.functions or {}
    for name, entry in sorted((s.rewritten.functions or {}).items()):
        positions = ((entry or {}).get("fd") or {}).get("positions") or {}
        before = ((originals.get(name) or {}).get("fd") or {}).get("positions") or {}
        for position, result in sorted(positions.items()):
            if not result.get("match") and before.get(position, {}).get("match") is False:
                continue  # not the derivative before either (a straight-through estimator): no evidence
            checked.append(name)
            if not result.get("match"):
                failed.append(f"{name} input {position}: backward {result['analytic']:.6g} vs finite differences {result['numeric']:.6g}")
    if failed:
        return CheckResult("gradcheck_passes", FAIL, f"backward does not match finite differences at the run's inputs: {failed[0]}")
    if not checked:
        return CheckResult("gradcheck_passes", UNKNOWN, "no custom autograd.Function ran in this unit")
    names = ", ".join(dict.fromkeys(checked))
    return CheckResult("gradcheck_passes", PASS, f"{names}: backward matches finite differences at the run's inputs (float64)")


def check_ctx_freed_without_gc(s: Sides) -> CheckResult:
    r, o = s.rewritten.measures, s.original.measures
    if not r.get("ctx_created"):
        return CheckResult("ctx_freed_without_gc", UNKNOWN, "no custom autograd.Function ran in the rewritten version")
    leaked = r.get("ctx_freed_only_by_gc", 0)
    text = f"ctx objects freed only by the cyclic GC: {o.get('ctx_freed_only_by_gc', 0)} -> {leaked}"
    return CheckResult("ctx_freed_without_gc", PASS if leaked == 0 else FAIL, text)


def check_peak_memory_not_higher(s: Sides) -> CheckResult:
    a = s.original.measures.get("peak_bytes")
    b = s.rewritten.measures.get("peak_bytes")
    if a is None or b is None:
        return CheckResult("peak_memory_not_higher", UNKNOWN, "peak memory could not be measured")
    text = f"peak {format_bytes(a)} -> {format_bytes(b)}"
    if s.original.exception is not None:
        # the original stopped at its error: its peak covers less work than the fix's
        return CheckResult("peak_memory_not_higher", NA, f"{text} (not compared: the original stopped at its error)")
    ok = b <= a * (1 + PEAK_SLACK_RATIO) + PEAK_SLACK_BYTES
    return CheckResult("peak_memory_not_higher", PASS if ok else FAIL, text if ok else f"{text}: higher")


def check_parameters_change_as_intended(s: Sides) -> CheckResult:
    o, r = s.original, s.rewritten
    if o.exception is None and o.params_final:
        diffs = _compare_maps(o.params_final, r.params_final, "param", False)
        if diffs:
            return CheckResult("parameters_change_as_intended", FAIL, "parameters end differently: " + "; ".join(diffs[:3]))
        return CheckResult("parameters_change_as_intended", PASS, "parameters end as in the original")
    initial, final = r.params_initial, r.params_final
    # inputs made afresh each iteration (a GAN's noise leaf) receive gradients but are
    # not parameters: nothing is meant to update them
    fresh = set(r.fresh_inputs)
    had_grad = set(r.ever_grad) - fresh
    unchanged = []
    checked = 0
    for name, start in initial.items():
        if name not in had_grad or name not in final:
            continue
        checked += 1
        if torch.equal(start, final[name]):
            unchanged.append(name)
    if not checked:
        return CheckResult("parameters_change_as_intended", NA, "no parameter received a gradient (not a parameter update)")
    if unchanged:
        return CheckResult(
            "parameters_change_as_intended",
            FAIL,
            f"{len(unchanged)} of {checked} parameter(s) with a gradient never changed ({unchanged[0]}): the update has no effect",
        )
    note = f" ({len(fresh)} input leaves made afresh each iteration not counted)" if fresh else ""
    return CheckResult("parameters_change_as_intended", PASS, f"all {checked} parameter(s) with a gradient were updated{note}")


def _moved_by_finite_differences(name: str, mode: str) -> bool:
    """Whether the directional check moves the leaf a run's probes named `name`: in a
    script, the parameters of modules (``net.fc.weight``; not a free tensor ``scale``,
    nor a tensor known only as an optimizer's ``SGD#0.p2``); in a unit, its arguments too."""
    if mode in ("function", "method"):
        return True
    return "." in name and not re.fullmatch(r"\w+#\d+\.p\d+", name)


def check_requires_grad_flag_takes_effect(s: Sides) -> CheckResult:
    """A corrected ``requires_grad`` flag (AGF013) changes training on purpose, so the
    parameters cannot end as in the original. What must hold instead:

    * up to the first optimizer step nothing has moved: that step's losses, and the
      gradient of every tensor that has one on both sides, equal the original's;
    * a tensor the fix froze (a gradient in the original, never in the rewritten) keeps
      its initial value; a tensor with a gradient on both sides is updated in both or
      in neither (which tensors an optimizer steps is not the flag's business);
    * a tensor that newly gets a gradient: the rewritten's gradients match finite
      differences (the float64 directional check, `directional`);
    * where the flag changed no tensor's gradient, the parameters end as in the original.
    """
    name = "requires_grad_flag_takes_effect"
    o, r = s.original, s.rewritten
    if o.exception is not None or r.exception is not None:
        return CheckResult(name, NA, "a run raised; the flag's effect is judged on clean runs")
    o_grad, r_grad = set(o.ever_grad or ()), set(r.ever_grad or ()) - set(r.fresh_inputs or ())
    o_grad -= set(o.fresh_inputs or ())
    frozen, newly = sorted(o_grad - r_grad), sorted(r_grad - o_grad)
    if not frozen and not newly:
        diffs = _compare_maps(o.params_final or {}, r.params_final or {}, "param", False)
        if diffs:
            return CheckResult(name, FAIL, "no tensor's gradient changed, yet parameters end differently: " + "; ".join(diffs[:3]))
        return CheckResult(name, NA, "the corrected flag changed no tensor's gradient")
    o_steps, r_steps = o.steps or [], r.steps or []
    if not o_steps or not r_steps:
        return CheckResult(name, NA, "no optimizer step on a side: nothing trained to compare")
    first_o, first_r = o_steps[0], r_steps[0]
    diffs = compare(first_o.get("losses"), first_r.get("losses"), "the first step's losses")
    shared = sorted(set(first_o.get("grads") or {}) & set(first_r.get("grads") or {}) & (o_grad & r_grad))
    for key in shared:
        x, y = first_o["grads"][key], first_r["grads"][key]
        if x is not None and y is not None:
            diffs += compare(x, y, f"the first step's gradient of {key}")
    if diffs:
        return CheckResult(name, FAIL, "before the first step (nothing moved yet): " + "; ".join(diffs[:3]))
    initial, final = r.params_initial or {}, r.params_final or {}
    moved = [key for key in frozen if key in initial and key in final and not torch.equal(initial[key], final[key])]
    if moved:
        return CheckResult(name, FAIL, f"{len(moved)} tensor(s) the fix froze still changed ({moved[0]})")
    # a tensor with a gradient on both sides: the flag did not touch it, so whether an
    # update moves it cannot change (only the way it moves, once others train differently)
    o_initial, o_final = o.params_initial or {}, o.params_final or {}
    for key in sorted(o_grad & r_grad):
        if all(key in m for m in (initial, final, o_initial, o_final)):
            o_moved, r_moved = not torch.equal(o_initial[key], o_final[key]), not torch.equal(initial[key], final[key])
            if o_moved != r_moved:
                return CheckResult(name, FAIL, f"{key} has a gradient in both runs but is updated only in the "
                                               f"{'original' if o_moved else 'rewritten'}: the flag did not change that")
    held = sum(1 for key in frozen if key in initial and key in final)
    parts = [f"first step's losses and {len(shared)} shared gradient(s) equal the original's"]
    if frozen:
        parts.append(f"{len(frozen)} tensor(s) frozen by the fix, {held} of them seen to keep their value")
    if newly:
        fd = r.finite_differences or {}
        unmoved = [key for key in newly if not _moved_by_finite_differences(key, s.mode)]
        if unmoved:
            return CheckResult(name, NA, f"{unmoved[0]} newly gets a gradient, but finite differences of a script move "
                                         "module parameters only, and it is not one")
        if not fd.get("applicable"):
            return CheckResult(name, NA, f"{len(newly)} tensor(s) newly get a gradient ({newly[0]}), and "
                                         f"{fd.get('detail') or 'finite differences were not run'}")
        if not fd.get("passed"):
            return CheckResult(name, FAIL, f"{len(newly)} tensor(s) newly get a gradient ({newly[0]}), but {fd.get('detail')}")
        parts.append(f"{len(newly)} tensor(s) newly get a gradient, and the rewritten's {fd.get('detail')}")
    if frozen and not held:
        return CheckResult(name, NA, f"{len(frozen)} tensor(s) frozen by the fix, none of them recorded before and after")
    return CheckResult(name, PASS, "the corrected flag takes effect: " + "; ".join(parts))


@dataclass
class _Reference:
    """What `check_closer_to_float64_reference` counted."""

    values: int = 0
    original_off: int = 0
    original_nonfinite: int = 0
    rewritten_off: int = 0
    failures: list[str] | None = None

    def fail(self, text: str) -> None:
        self.failures = [*(self.failures or []), text]


def _against_reference(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor, where: str, tally: _Reference) -> None:
    """Element by element (float64): the rewritten `y` is close to the reference `z`, or at
    least as close as the original `x` (an original that is not finite there allows only
    a rewritten close to the reference, or the very same value)."""
    x, y, z = x.detach().double(), y.detach().double(), z.detach().double()
    tol = REFERENCE_ATOL + REFERENCE_RTOL * z.abs()
    same_z = (y == z) | (y.isnan() & z.isnan())
    close_y = same_z | ((y - z).abs() <= tol)
    close_x = (x == z) | (x.isnan() & z.isnan()) | ((x - z).abs() <= tol)
    err_x, err_y = (x - z).abs().nan_to_num(nan=math.inf), (y - z).abs().nan_to_num(nan=math.inf)
    as_x = (y == x) | (y.isnan() & x.isnan())
    no_worse = torch.isfinite(x) & torch.isfinite(y) & (err_y <= err_x)
    ok = close_y | no_worse | as_x
    tally.values += z.numel()
    tally.original_off += int((~close_x).sum())
    tally.original_nonfinite += int((~torch.isfinite(x) & torch.isfinite(z)).sum())
    tally.rewritten_off += int((~close_y).sum())
    if not bool(ok.all()):
        index = int((~ok).flatten().nonzero()[0])
        tally.fail(f"{where}: the rewritten {float(y.flatten()[index]):.6g} is further from the float64 reference "
                   f"{float(z.flatten()[index]):.6g} than the original {float(x.flatten()[index]):.6g}")


def _walk_reference(a: Any, b: Any, ref: Any, where: str, tally: _Reference) -> None:
    """Tensors and numbers element by element (`_against_reference`); everything else
    must equal the reference's or the original's."""
    if isinstance(ref, torch.Tensor) and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) \
            and ref.is_floating_point() and a.shape == b.shape == ref.shape:
        _against_reference(a, b, ref, where, tally)
        return
    if _is_number(ref) and _is_number(a) and _is_number(b) and not any(isinstance(v, bool) for v in (a, b, ref)):
        x, y, z = (torch.tensor([_as_number(v)], dtype=torch.float64) for v in (a, b, ref))
        _against_reference(x, y, z, where, tally)
        return
    if isinstance(ref, dict) and isinstance(a, dict) and isinstance(b, dict):
        if "__seq__" in ref and "__seq__" in a and "__seq__" in b and a["length"] == b["length"] == ref["length"]:
            for i, items in enumerate(zip(a["items"], b["items"], ref["items"])):
                _walk_reference(*items, f"{where}[{i}]", tally)
            return
        if not any(k in ref for k in ("__seq__", "__dict__", "__module__", "__object__")):
            for key in sorted(set(a) & set(b) & set(ref)):
                _walk_reference(a[key], b[key], ref[key], f"{where}.{key}" if where else str(key), tally)
            return
    if compare(ref, b, where, lenient=True) and compare(a, b, where):
        tally.fail(f"{where}: {_summarize_value(b)} is neither the float64 reference's {_summarize_value(ref)} "
                   f"nor the original's {_summarize_value(a)}")


def check_closer_to_float64_reference(s: Sides) -> CheckResult:
    """A numerically stable rewrite (AGF016) is judged against the original computed in
    float64 (`reference`): every value and gradient of the rewritten float32 run is within
    rtol=1e-4, atol=1e-5 of the reference, or at least as close to it as the original's
    (where the original is not finite and the reference is, only the former); every
    other output, and every printed line, equals the reference's or the original's.
    Units without a reference run (functions with synthesized inputs): outputs and
    gradients equal."""
    name = "closer_to_float64_reference"
    ref = s.original.float64_reference
    if not ref:
        # a unit run with synthesized inputs (a library function) has no reference run:
        # its fix must then keep outputs and gradients, as an equivalence
        parts = [check_outputs_equal(s), check_grads_equal(s)]
        failed = [c for c in parts if c.status == FAIL]
        if failed:
            return CheckResult(name, FAIL, f"no float64 reference run for this {s.mode} unit, and {failed[0].detail}")
        if all(c.status == PASS for c in parts):
            return CheckResult(name, PASS, f"no float64 reference run for this {s.mode} unit: "
                                           + ", ".join(c.detail for c in parts))
        return CheckResult(name, NA, "no float64 reference run, and " + next(c.detail for c in parts if c.status != PASS))
    if ref.get("error"):
        return CheckResult(name, NA, f"the float64 reference run raised {ref['error']}")
    if s.original.exception is not None or s.rewritten.exception is not None:
        return CheckResult(name, NA, "a run raised; the reference compares finished runs")
    tally = _Reference()
    o_out, r_out, z_out = s.original.outputs or {}, s.rewritten.outputs or {}, ref.get("outputs") or {}
    for key in sorted(set(o_out) & set(r_out) & set(z_out)):
        _walk_reference(o_out[key], r_out[key], z_out[key], key, tally)
    o_g, r_g, z_g = s.original.leaf_grads or {}, s.rewritten.leaf_grads or {}, ref.get("leaf_grads") or {}
    for key in sorted(set(o_g) & set(r_g) & set(z_g)):
        if o_g[key] is not None and r_g[key] is not None:
            _walk_reference(o_g[key], r_g[key], z_g[key], f".grad of {key}", tally)
    if s.original.printed is not None and s.rewritten.printed is not None and ref.get("printed"):
        lines = {}
        for label, other, rtol in (("reference", ref["printed"], REFERENCE_RTOL), ("original", s.original.printed, FLOAT_RTOL)):
            diffs = printed_differences(other, s.rewritten.printed, rtol=rtol, atol=REFERENCE_ATOL)
            lines[label] = {d.split(":")[0]: d for d in diffs}
        both = [lines["reference"][k] for k in lines["reference"] if k in lines["original"]]
        if both:
            tally.fail(f"{both[0]} (differs from the float64 reference's and from the original's)")
    if tally.failures:
        return CheckResult(name, FAIL, "; ".join(tally.failures[:3]))
    if not tally.values:
        return CheckResult(name, NA, "no floating value or gradient to hold against the float64 reference")
    nonfinite = f", {tally.original_nonfinite} of them not finite" if tally.original_nonfinite else ""
    return CheckResult(name, PASS, f"against a float64 reference run: the original is off at {tally.original_off} of "
                                   f"{tally.values} values and gradients{nonfinite}, the rewritten at {tally.rewritten_off}, "
                                   "and nowhere further off than the original")


def _implementations() -> dict[str, Callable[[Sides], CheckResult]]:
    """Each registered check's implementation, ``check_<name>`` in this module."""
    found = {}
    for spec in SPECS:
        implementation = globals().get(f"check_{spec.name}")
        if not callable(implementation):  # pragma: no cover - held by a test
            raise RuntimeError(f"check {spec.name!r} is registered in checks.SPECS but has no check_{spec.name}")
        found[spec.name] = implementation
    return found


CHECKS: Mapping[str, Callable[[Sides], CheckResult]] = MappingProxyType(_implementations())

#: checks that expect the original to fail and the rewritten to run clean
_ERROR_FIXING = {"original_error_gone"}
#: a pass of these alone is no evidence that a fix is right ("the error is gone" holds
#: just as well for a rewrite that drops the code that raised)
_NOT_EVIDENCE = {"original_error_gone", "graph_state_may_change", "time_per_step_reported"}


# -- evidence and verdict ------------------------------------------------------------------
def _exc_text(exc: ExceptionRecord) -> str:
    message = exc.message.strip().splitlines()[0] if exc.message.strip() else ""
    where = f" at {exc.where}" if exc.where else ""
    return f"{exc.type}: {message[:200]}{where}"


def _summarize_value(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return f"tensor{list(value.shape)} {str(value.dtype).replace('torch.', '')}"
    if isinstance(value, dict):
        if "__seq__" in value:
            return f"{value['__seq__']} of {value['length']}"
        if "__module__" in value:
            return f"{value['__module__']} ({len(value['state'])} tensors)"
        if "__object__" in value:
            return value["__object__"]
        if "__dict__" in value:
            return f"dict of {len(value['__dict__'])}"
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, (int, bool, str)) or value is None:
        return value if not isinstance(value, str) else value[:80]
    return type(value).__name__


def _printed_summary(printed: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a script printed, as compared: line count, size, and whether it was cut."""
    if printed is None:
        return None
    return {"lines": printed_lines(printed), "chars": printed["chars"], "truncated": printed["truncated"]}


def side_evidence(outcome: Outcome) -> dict[str, Any]:
    evidence: dict[str, Any] = {
        "status": outcome.status,
        "detail": outcome.detail,
        "wall_s": outcome.duration_s,
        "stdout_bytes": outcome.output_bytes,
        "stdout_tail": outcome.output[-400:],
    }
    record = outcome.record
    if record is None:
        return evidence
    measures = record.measures
    evidence.update(
        {
            "device": record.device,
            "exception": part_json(record.exception),
            "unbound": part_json(record.unbound),
            "bound": record.bound,
            "outputs": {k: _summarize_value(v) for k, v in (record.outputs or {}).items()},
            "printed": _printed_summary(record.printed),
            "measured": measures,
            "step_violations": record.step_violation_count,
            "stale_steps": record.stale_steps,
        }
    )
    if record.gradcheck is not None:
        evidence["gradcheck"] = record.gradcheck
    if record.finite_differences is not None:
        evidence["finite_differences"] = record.finite_differences
    if record.changed_lines is not None:
        evidence["changed_lines"] = part_json(record.changed_lines)
    if record.forward_count:
        evidence["backward_passes_recorded"] = record.forward_count
        losses = [float(t) for f in record.forward[:5] for t in f["loss"] if isinstance(t, torch.Tensor) and t.numel() == 1]
        evidence["first_losses"] = [round(v, 6) for v in losses]
    if record.functions:
        evidence["functions"] = record.functions
    return evidence


def _unexercised(o: RunRecord, r: RunRecord) -> str | None:
    """The reason when a run never executed (part of) the code the patch changed.

    A run that finished must have run every changed hunk; one that raised stopped where
    it raised, so hunks after that point cannot have run: it must have reached one."""
    for side, record in (("original", o), ("rewritten", r)):
        coverage = record.changed_lines
        if not coverage or not coverage.missed:
            continue
        missed = coverage.missed
        if record.exception is not None and len(missed) < len(coverage.hunks):
            continue
        where = f"line {missed[0]}" if len(missed) == 1 else f"lines {', '.join(map(str, missed[:5]))}"
        stopped = record.exception
        before = f": it stopped with {_exc_text(stopped)}" if stopped is not None else ""
        return f"the changed code never ran (the {side} run never reached {where}{before})"
    return None


def evaluate(name: str, mode: str, kind: str, original: Outcome, rewritten: Outcome, checks: tuple[str, ...] | None) -> UnitResult:
    """The unit's verdict from its two outcomes under the given (or generic) contract."""
    evidence: dict[str, Any] = {"original": side_evidence(original), "rewritten": side_evidence(rewritten), "checks": []}
    generic = not checks
    names = tuple(checks) if checks else GENERIC

    def result(verdict: str, reason: str) -> UnitResult:
        evidence["contract"] = "generic equivalence" if generic else list(names)
        return UnitResult(name=name, mode=mode, verdict=verdict, reason=reason, evidence=evidence)

    # 1. the sandbox: did both runs finish and report?
    if original.status != "ok":
        return result(UNVERIFIED, f"original run {original.detail}; nothing to compare")
    if rewritten.status != "ok":
        if rewritten.status == "harness_error":
            return result(UNVERIFIED, f"rewritten run: {rewritten.detail}")
        if rewritten.status == "timeout":
            limit = rewritten.duration_s
            if original.duration_s * 2 >= limit:
                return result(UNVERIFIED, f"rewritten run {rewritten.detail}; the original took {original.duration_s:.1f} s")
            stopped = original.record.exception if original.record is not None else None
            if stopped is not None:
                # the original ended at its error; the rewritten runs on through what the original never reached
                return result(UNVERIFIED, f"rewritten run {rewritten.detail}; the original stopped at its error after "
                                          f"{original.duration_s:.1f} s ({_exc_text(stopped)}), so the time the rewritten needs is unknown")
        return result(REJECTED, f"rewritten run {rewritten.detail} (the original finished in {original.duration_s:.2f} s)")
    o, r = original.record or RunRecord(), rewritten.record or RunRecord()
    for record in (o, r):
        if record.setup_error:
            return result(UNVERIFIED, record.setup_error)
    for side, record in (("original", o), ("rewritten", r)):
        if record.unbound:
            unbound = record.unbound
            return result(UNVERIFIED, f"cannot bind {unbound.name!r} ({side}): {unbound.why}")

    # 2. accepted means exercised: both runs must have executed the lines the patch changed
    never_ran = _unexercised(o, r)
    if never_ran:
        return result(UNVERIFIED, never_ran)

    # 3. exceptions
    eo, er = o.exception, r.exception
    for side, exc in (("original", eo), ("rewritten", er)):
        if exc is not None and exc.memory:
            verdict = UNVERIFIED if side == "original" or (eo and eo.memory) else REJECTED
            return result(verdict, f"{side} run ran out of memory: {_exc_text(exc)}")
    expects_error = bool(set(names) & _ERROR_FIXING) or (generic and eo is not None and eo.autograd)
    if eo is None and er is not None:
        return result(REJECTED, f"rewritten raises {_exc_text(er)} ({er.phase}); the original ran clean")
    if eo is not None:
        same = er is not None and er.type == eo.type and er.message == eo.message
        if er is not None:
            if same and not expects_error:
                return result(UNVERIFIED, f"both versions raise {_exc_text(eo)}; nothing to compare")
            prefix = "the original's error persists" if same else f"rewritten raises {_exc_text(er)}"
            return result(REJECTED, f"{prefix}" + ("" if same else f" (original: {eo.type})") + (f": {_exc_text(er)}" if same else ""))
        if not expects_error:
            return result(UNVERIFIED, f"the original raises {_exc_text(eo)}; this contract compares clean runs")
        if generic:
            names = ("original_error_gone", "gradients_match_finite_differences", *names)

    # 4. the contract's checks
    sides = Sides(o, r, original, rewritten, kind, [] if "graph_state_may_change" in names else None)
    outcomes: list[CheckResult] = []
    for check in dict.fromkeys(names):
        implementation = CHECKS.get(check)
        if implementation is None:
            outcomes.append(CheckResult(check, UNKNOWN, f"unknown check {check!r}; known: {', '.join(sorted(CHECKS))}"))
            continue
        try:
            outcomes.append(implementation(sides))
        except Exception as exc:  # noqa: BLE001 - a broken check must not pass silently
            outcomes.append(CheckResult(check, UNKNOWN, f"check {check} failed to run: {type(exc).__name__}: {exc}"))
    evidence["checks"] = [c.to_json() for c in outcomes]
    failed = [c for c in outcomes if c.status == FAIL]
    if failed:
        return result(REJECTED, failed[0].detail)
    unknown = [c for c in outcomes if c.status == UNKNOWN]
    if unknown:
        return result(UNVERIFIED, unknown[0].detail)
    if not any(c.status == PASS and c.check not in _NOT_EVIDENCE for c in outcomes):
        # n/a means "could not compare": never evidence for acceptance
        missing = next((c for c in outcomes if c.status == NA), None)
        why = f": {missing.detail}" if missing is not None else ""
        return result(UNVERIFIED, f"no check of the contract could compare the two runs{why}")
    # one clause per fact: retained_graph_not_higher and _lower_if_any report the same numbers
    passed = list(dict.fromkeys(clause for c in outcomes if c.status == PASS for clause in c.detail.split(", ")))
    return result(ACCEPTED, ", ".join(passed) if passed else "no check applied")
