"""Judge one unit through its best driver, falling back when the driver cannot judge.

Runs in the job process. A driver (the file's script part, or a user-named driver)
judges the patch when both runs got somewhere: it falls back to its `fallbacks` (a
user-named driver, then the changed functions with synthesized inputs) when it
  * fails the same way on both sides for a reason that is not an autograd error
    (a missing package, no GPU, no network, a missing data file: nothing the patch did),
  * cannot finish the original run (too slow for the time limit, say),
  * gets past the original's autograd error only to stop at another one on a line the
    patch did not touch (a second bug the original never reached: the function on its
    own shows whether this patch fixes its part), or
  * never calls the changed function (and its own code did not change).
A driver that calls some changed functions but not others keeps its verdict for those,
and the others run on their own. Every result names the driver that ran, in `driver`
and at the head of the reason.

A driver that cannot finish or lacks something on this machine will fail the same way
for the file's next patch: `judge_unit` reports such failures (``failures``), the api
remembers them for the run, and a later unit marked ``known_failure`` goes straight to
its fallbacks instead of paying for the same two runs again.
"""

from __future__ import annotations

from typing import Any, Callable

from .contracts import evaluate
from .sandbox import Outcome
from .bounded import shortened_text
from .legacy import NOTE as LEGACY_NOTE
from .protocol import ExceptionRecord, part_json
from .verdict import ACCEPTED, REJECTED, UNVERIFIED, UnitResult

RunPair = Callable[[dict[str, Any]], "tuple[Outcome, Outcome] | list[Outcome]"]
_SLOW_HINT = "lower `loop-cap`, name a shorter `driver`, or `argv` for fewer epochs or steps, in [tool.autograd-fix.verify]"


def _mode(kind: str) -> str:
    return {"script": "script", "driver": "driver"}.get(kind, "function")


def _exception(outcome: Outcome) -> ExceptionRecord | None:
    return outcome.record.exception if outcome.record is not None else None


def _exc_text(exc: ExceptionRecord) -> str:
    first = (exc.message or "").strip().splitlines()[:1]
    where = f" at {exc.where}" if exc.where else ""
    return f"{exc.type}: {first[0][:200] if first else ''}{where}"


def cannot_judge(original: Outcome, rewritten: Outcome) -> str | None:
    """Why this driver's two runs say nothing about the patch, or None when they do."""
    if original.status != "ok":
        slow = f"; {_SLOW_HINT}" if original.status == "timeout" else ""
        return f"could not finish the original run: it {original.detail}{slow}"
    for outcome in (original, rewritten):
        setup = outcome.record.setup_error if outcome.record is not None else None
        if setup:
            return f"could not start: {setup}"
    eo, er = _exception(original), _exception(rewritten)
    if eo is None or eo.autograd or eo.memory:
        return None
    if er is not None and (er.type, er.message) == (eo.type, eo.message):
        cause = eo.environment
        return f"{cause} ({_exc_text(eo)})" if cause else f"fails the same way on both sides: {_exc_text(eo)}"
    return None


def _later_bug(original: Outcome, rewritten: Outcome) -> str | None:
    """The rewritten passed the original's autograd error and stopped at another autograd
    error on a line the patch left alone."""
    eo, er = _exception(original), _exception(rewritten)
    if not (eo and er and eo.autograd and er.autograd):
        return None
    if er.message == eo.message or er.user_line is None or er.user_line == eo.user_line:
        return None
    return f"got past the original's error but stopped at another one the patch did not touch: {_exc_text(er)}"


def lasting_failure(original: Outcome, rewritten: Outcome) -> bool:
    """A failure the file's next patch would meet too: too slow, or the machine lacks something."""
    if original.status == "timeout":
        return True
    eo, er = _exception(original), _exception(rewritten)
    return bool(eo and er and eo.environment and (er.type, er.message) == (eo.type, eo.message))


def _stopped_on_import(unit: dict[str, Any], original: Outcome) -> bool:
    """The original stopped in top-level code that importing the file runs too."""
    exc = _exception(original)
    line = exc.top_line if exc else None
    return line is not None and any(start <= line <= end for start, end in unit.get("import_lines") or ())


def _slow_on_import(unit: dict[str, Any], original: Outcome) -> bool:
    """The script run was too slow and the file has top-level code outside ``__main__``:
    importing it for its functions runs that code again, and in full (only script and
    driver runs are bounded), so a function fallback can only be slower."""
    return original.status == "timeout" and bool(unit.get("import_lines"))


def _reached(*outcomes: Outcome) -> set[str]:
    found: set[str] = set()
    for outcome in outcomes:
        found |= set(outcome.record.reached if outcome.record is not None else ())
    return found


def _bounded(outcome: Outcome | None) -> dict[str, Any]:
    """What a run's bounds cut (`bounded.Bounds.report`, and where it stopped) as plain
    data, empty for a run without a record or without bounds."""
    record = outcome.record if outcome is not None else None
    return part_json(record.bounded) if record is not None and record.bounded is not None else {}


def _shortened(original: Outcome, rewritten: Outcome | None) -> tuple[str, list[dict[str, Any]], str | None]:
    """What the bounded run cut (`bounded.describe`), the loops, and why the two sides are
    not comparable when the rewritten was cut differently (None when they match)."""
    mine, theirs = _bounded(original), _bounded(rewritten)
    loops, other = list(mine.get("loops") or ()), list(theirs.get("loops") or ())
    text = shortened_text(mine)
    if not text and shortened_text(theirs):  # the original stopped (at its error) before any cap: say what the rewritten's run cut
        text = f"the rewritten run: {shortened_text(theirs)}"
    if rewritten is None or rewritten.status != "ok" or original.status != "ok" or _exception(original) or _exception(rewritten):
        return text, loops or other, None  # a run that stopped at an error was not shortened by its caps alone

    def shape(bounded: dict[str, Any]) -> tuple[Any, ...]:
        stopped = bounded.get("stopped") or {}
        items = bounded.get("loops") or []
        return (stopped.get("label"), stopped.get("after"), repr(stopped.get("left")),  # not `where`: the patch may move lines
                *sorted((str(i.get("label")), int(i.get("cap", 0)), int(i.get("capped", 0))) for i in items))

    if shape(mine) == shape(theirs):
        return text, loops, None
    return text, loops, (f"the rewritten run was shortened differently ({shortened_text(theirs) or 'no loop capped'}): the patch "
                         "changed how many times a loop that trains runs")


def _labelled(result: UnitResult, driver: str, original: Outcome, note: str = "", rewritten: Outcome | None = None) -> UnitResult:
    """The result with its driver named in the reason (and what its bounded run cut), and
    an environmental cause (or a too-slow original) spelled out with the configuration
    that helps."""
    text, loops, differs = _shortened(original, rewritten)
    verdict, body, evidence = result.verdict, result.reason, result.evidence
    if loops:
        evidence = {**evidence, "shortened": loops}
    if differs is not None and verdict == ACCEPTED:
        # a loop that goes on in one version and stops in the other: the patch changed how
        # often the program trains, which equal outputs of the shortened runs cannot show
        verdict, body = REJECTED, f"{differs}; {body}"
    reason = f"{driver} shortened ({text}): {body}" if text else f"{driver}: {body}"
    if verdict == UNVERIFIED:
        exc = _exception(original)
        if exc is not None and exc.environment and exc.environment not in note:
            reason += f"; the run {exc.environment}"
        elif original.status == "timeout" and result.evidence:
            reason += f"; {_SLOW_HINT}"
    readings = sum(o.record.zero_dim_readings for o in (original, rewritten) if o is not None and o.record is not None)
    if readings:
        reason += f" ({LEGACY_NOTE}: {readings} reading{'s' if readings != 1 else ''})"
    ipython = original.record.ipython if original.record is not None else None
    if ipython:  # a notebook's IPython lines: how they ran (`ipython_lines`)
        reason += f" ({ipython})"
    if note:
        reason += f" ({note})"
    return UnitResult(result.name, result.mode, verdict, reason, evidence, driver=driver)


def _covering(fallbacks: list[dict[str, Any]], missing: list[str] | None) -> list[dict[str, Any]]:
    """The fallbacks that run the `missing` targets (all of them when None)."""
    if missing is None:
        return fallbacks
    chosen = []
    for unit in fallbacks:
        if unit.get("qualname") in missing:
            chosen.append(unit)
        elif unit.get("kind") == "driver" and set(unit.get("targets") or ()) & set(missing):
            keep = [t for t in unit["targets"] if t in missing]
            chosen.append({**unit, "targets": keep, "fallbacks": _covering(list(unit.get("fallbacks") or ()), keep),
                           "script_changed": False})
    return chosen


def _caller_results(unit: dict[str, Any], driver: str, mode: str, original: Outcome, rewritten: Outcome) -> list[UnitResult]:
    """A same-file caller of the changed function rejects the patch when the rewritten
    raises where the original ran clean; otherwise it says nothing (its outputs may differ
    by design: a fixed training step trains differently), so it yields no result."""
    if original.status != "ok" or (original.record is not None and (original.record.unbound or original.record.setup_error)):
        return []
    if _exception(original) is not None:
        return []
    exc = _exception(rewritten)
    if (exc is None and rewritten.status == "ok") or rewritten.status == "timeout":
        return []
    what = f"raises {_exc_text(exc)}" if exc is not None else rewritten.detail
    reason = f"{driver}: calls the changed {unit['caller_of']} and now {what}; the original ran clean"
    evidence = {"caller_of": unit["caller_of"], "original": "ran clean", "rewritten": what}
    return [UnitResult(unit["name"], mode, REJECTED, reason, evidence, driver=driver)]


def judge_unit(
    unit: dict[str, Any], run_pair: RunPair, checks: tuple[str, ...] | None, note: str = "",
    failures: dict[str, dict[str, Any]] | None = None,
) -> list[UnitResult]:
    """The unit's results: one, or (after a fallback) one per fallback unit run. Lasting
    driver failures go into `failures` (driver -> {"why", "fall_back"})."""
    failures = {} if failures is None else failures
    driver = unit.get("driver") or unit["name"]
    mode = _mode(unit["kind"])
    fallbacks = list(unit.get("fallbacks") or ())
    known = unit.get("known_failure")
    if unit.get("problem") or known:
        problem = unit.get("problem") or f"{driver}: {known['why']} (as for an earlier patch of this file)"
        if known and known["fall_back"] and fallbacks:
            return [r for f in fallbacks for r in judge_unit(f, run_pair, checks, f"the {problem}", failures)]
        reason = f"{problem} ({note})" if note else problem
        return [UnitResult(unit["name"], mode, UNVERIFIED, reason, {}, driver=driver)]
    original, rewritten = run_pair(unit)
    if unit.get("caller_of"):
        return _caller_results(unit, driver, mode, original, rewritten)
    result = evaluate(unit["name"], mode, unit["kind"], original, rewritten, checks)
    usable = bool(fallbacks) and (
        any(f.get("kind") == "driver" for f in fallbacks) or not (_stopped_on_import(unit, original) or _slow_on_import(unit, original))
    )
    if fallbacks and lasting_failure(original, rewritten):
        failures[driver] = {"why": cannot_judge(original, rewritten) or "", "fall_back": usable}
    if not fallbacks:
        return [_labelled(result, driver, original, note, rewritten)]
    why = cannot_judge(original, rewritten) or _later_bug(original, rewritten)
    if why is not None and not usable:
        # importing the file for its functions would run (and stop in) the same code
        return [_labelled(result, driver, original, note, rewritten)]
    missing: list[str] | None = None
    if why is None:
        reached = _reached(original, rewritten)
        missing = [t for t in unit.get("targets") or () if t not in reached]
        if not missing:
            return [_labelled(result, driver, original, note, rewritten)]
        if reached or unit.get("script_changed"):
            kept = [_labelled(result, driver, original, note, rewritten)]
            more = f"the {driver} never called {', '.join(missing)}"
            return kept + [r for f in _covering(fallbacks, missing) for r in judge_unit(f, run_pair, checks, more, failures)]
        why = f"never called {', '.join(missing)}"
    results = [r for f in _covering(fallbacks, missing) for r in judge_unit(f, run_pair, checks, f"the {driver} {why}", failures)]
    return results or [_labelled(result, driver, original, note, rewritten)]
