"""Linting a notebook's program: the engine, plus what a notebook adds to it.

1. Every cell must be valid Python on its own (as Jupyter runs it), not only the joined
   program; errors name the cell.
2. A fix that would change a masked IPython line or a cell boundary is dropped: its
   finding stays, without a fix; a fixed program that lost one is not used at all.
3. Once the run is over (verification keys findings by program position), positions
   in findings become `cell N:line:col`; a verdict's positions (where a run raised) are
   mapped as soon as it comes back, each against the program that side ran.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from typing import TYPE_CHECKING, Any, Callable, Sequence

from autograd_fix.cli.notebook import NotebookMap, check_cells_compile
from autograd_fix.codemods.engine import EngineError, FixOptions, SourceResult, analyse_text, check_source, triggered
from autograd_fix.codemods.fix_rounds import fix_rounds
from autograd_fix.codemods.model import TextFix
from autograd_fix.codemods.rule import Rule
from autograd_fix.codemods.text_fixes import apply_fix

if TYPE_CHECKING:
    from autograd_fix.verification.verdict import Verdict
    from autograd_fix.cli.runner import FileOutcome

DROPPED_FIX_NOTE = " (no fix: it would change an IPython magic line or a cell boundary)"
_SYNTAX_AT = re.compile(r"^syntax error at (\d+):(\d+)")

#: findings are identified by object identity: they live in this process only
FindingId = int


def check_notebook_program(
    nb_map: NotebookMap,
    program: str,
    rules: Sequence[type[Rule]],
    path: str,
    options: FixOptions,
    compute_fix: bool,
    sites: Sequence[tuple[str, int]] = (),
) -> tuple[SourceResult, set[FindingId]]:
    """The engine's result on `program`, and the ids (`id()`) of the findings whose fixes
    were dropped. A cell that does not parse (left out of `program`, see
    `NotebookMap.unparsable`) is a per-cell error: the other cells' findings are reported,
    and the notebook is not rewritten. `sites` (rule code, program line): bugs a doctor
    run showed, each adding its rule's fix built there, as for a script
    (`engine.check_source`)."""
    result, dropped = _check_cells(nb_map, program, rules, path, options, compute_fix, sites)
    if nb_map.unparsable:
        errors = "; ".join(nb_map.unparsable[number] for number in sorted(nb_map.unparsable))
        result.fixed = None
        result.fix_error = f"{errors} (left out of the analysis; the other cells were analysed; notebook left unchanged)"
    return result, dropped


def _check_cells(
    nb_map: NotebookMap,
    program: str,
    rules: Sequence[type[Rule]],
    path: str,
    options: FixOptions,
    compute_fix: bool,
    sites: Sequence[tuple[str, int]] = (),
) -> tuple[SourceResult, set[FindingId]]:
    active = triggered(rules, program)
    if (not active and not sites) or not nb_map.cells:
        return SourceResult(), set()
    error = check_cells_compile(nb_map, program)
    if error:
        raise EngineError(error)
    try:
        result = check_source(program, rules if sites else active, path=path, options=options, compute_fix=False, sites=sites)
    except EngineError as failure:
        raise EngineError(_cell_syntax_error(str(failure), nb_map)) from None
    if result.module is None:
        return result, set()
    dropped = {id(f) for f in result.findings if f.fix is not None and not _keeps_masked_lines(nb_map, program, f.fix)}
    if not compute_fix:
        return result, dropped
    kept = [dataclasses.replace(f, fix=None) if id(f) in dropped else f for f in result.findings]
    if any(options.allows_finding(f) for f in kept):
        rounds = fix_rounds(program, kept, lambda text: analyse_text(text, rules, path, options), options.allows_finding, _cells_compile(nb_map))
        # every rewritten program passed `_cells_compile`: boundaries intact
        result.fixed = None if rounds.error else rounds.text
        result.follow_ons, result.notes, result.fix_error = rounds.follow_ons, rounds.notes, rounds.error
        # `kept` replaced the findings whose fixes were dropped: the others are the same objects
        result.applied = {id(f) for f, k in zip(result.findings, kept) if id(k) in rounds.applied}
    return result, dropped


def _cells_compile(nb_map: NotebookMap) -> Callable[[str], None]:
    """A fixed program's check: its cells keep their boundaries and each compiles on its
    own, as Jupyter runs them (`from __future__` in a later cell, top-level `await`: the
    program as one file would not compile, its cells do)."""

    def validate(text: str) -> None:
        if not nb_map.intact(text):
            raise EngineError("the fixes would change an IPython magic line or a cell boundary; notebook left unchanged")
        error = check_cells_compile(nb_map, text)
        if error:
            raise EngineError(f"a fix produced code that does not compile ({error}); file left unchanged")

    return validate


def _keeps_masked_lines(nb_map: NotebookMap, program: str, fix: Any) -> bool:
    return isinstance(fix, TextFix) and nb_map.intact(apply_fix(program, fix))


def _cell_syntax_error(message: str, nb_map: NotebookMap) -> str:
    match = _SYNTAX_AT.match(message)
    if not match:
        return message
    cell, line = nb_map.locate(int(match.group(1)))
    return f"syntax error at cell {cell}:{line}:{match.group(2)}{message[match.end():]}"


def cell_positions(outcome: FileOutcome) -> FileOutcome:
    """Map a notebook outcome's program positions to cells (other outcomes: as is)."""
    nb_map = outcome.notebook
    if nb_map is None:
        return outcome
    for record in outcome.findings:
        cell, line = nb_map.locate(record.line)
        record.end_line -= record.line - line
        record.cell, record.line = cell, line
    return outcome


#: verdict reasons that quote the rewritten run's exception (all others: the original's)
_QUOTES_REWRITTEN = re.compile(r"rewritten raises|rewritten run|error persists|still raises")


def localize_verification(verdict: Verdict, nb_map: NotebookMap, pair: dict[str, Any]) -> Verdict:
    """`verdict` with each run's `where` (`line 14: code`, a line of the program it
    ran, its text read from the .ipynb on disk) as `cell 4, line 2: code`."""
    programs = {"original": pair.get("original") or "", "rewritten": pair.get("rewritten") or ""}
    quoted = "rewritten" if _QUOTES_REWRITTEN.search(verdict.reason) else "original"
    reason = verdict.reason
    units = []
    for unit in verdict.units:
        evidence = copy.deepcopy(unit.evidence)
        unit_reason = unit.reason
        for side, program in programs.items():
            exception = evidence.get(side, {}).get("exception") if isinstance(evidence.get(side), dict) else None
            if not isinstance(exception, dict) or not isinstance(exception.get("where"), str):
                continue
            old = exception["where"]
            exception["where"] = nb_map.localize_where(old, program)
            if side == quoted:
                reason = reason.replace(f" at {old}", f" at {exception['where']}")
                unit_reason = unit_reason.replace(f" at {old}", f" at {exception['where']}")
        units.append(dataclasses.replace(unit, evidence=evidence, reason=unit_reason))
    return dataclasses.replace(verdict, reason=reason, units=tuple(units))
