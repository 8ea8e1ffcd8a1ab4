"""Fix rounds: apply fixes (as data) until a round has nothing left to apply.

One round composes the fixes it may apply (`text_fixes.compose`, in finding order: a fix
that collides with one taken before it waits for the next round), checks the result and
re-runs the rules on it. Fixes that only become possible once another went in (AGF012
removes `Variable(...)`, then AGF001 sees the evaluation pass) come from that re-run and
are announced as follow-on findings of their round. The static `--no-verify` path runs
every round here; the verified path (`cli.verify_patches`) runs the same rounds with
verification deciding each patch, and the same composition.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from autograd_fix.codemods.engine import MAX_FIX_ROUNDS, EngineError, validate_python
from autograd_fix.codemods.model import Finding, TextEdit, TextFix
from autograd_fix.codemods.text_fixes import Composition, LineIndex, compose, map_offset, span_back


@dataclass(frozen=True)
class FollowOn:
    """A finding that appeared only once an earlier round's fixes went in (AGF012 removes
    `Variable(...)`, then AGF001 sees the evaluation pass), with its span mapped back to
    the original text, and whether its fix went in."""

    round: int
    finding: Finding
    applied: bool


@dataclass
class Rounds:
    """The text after every round, the follow-on findings, and per-file notes."""

    text: str
    follow_ons: list[FollowOn] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: set when the fixes had to be dropped altogether (`text` is then the original)
    error: str | None = None
    #: `id()` of each finding given to `fix_rounds` whose fix went in (in its round or,
    #: deferred, in a later one)
    applied: set[int] = field(default_factory=set)


def fix_rounds(
    text: str,
    findings: list[Finding],
    analyse: Callable[[str], list[Finding]],
    allows: Callable[[Finding], bool],
    validate: Callable[[str], None] | None = None,
) -> Rounds:
    """Apply fixes round after round until a round has nothing left to apply.

    Each round composes the allowed fixes in finding order (`text_fixes.compose`: a fix
    that collides with one taken before it waits for the next round), checks the result
    with `validate` (default: compiled as one file; a fix that breaks it is dropped with a
    note), and re-runs the rules on it (`analyse`, which parses it: a round whose text
    libcst cannot read is dropped). A finding of the new text that continues no finding
    of the old one is a follow-on, announced with its round.
    """
    validate = validate_python if validate is None else validate
    original, original_lines = text, LineIndex(text)
    history: list[tuple[TextEdit, ...]] = []  # each round's edits, to map spans back
    result = Rounds(text)
    # what each finding of the current round is: a first-round finding (by its id) or
    # the follow-on at an index of `result.follow_ons`, however many rounds ago it came
    origin: dict[int, tuple[str, int]] = {id(f): ("found", id(f)) for f in findings}
    for round_number in range(1, MAX_FIX_ROUNDS + 1):
        chosen = [f for f in findings if f.fix is not None and allows(f)]
        composition = compose_valid(text, [f.fix for f in chosen], validate, result.notes)  # type: ignore[misc]
        if composition.text == text:
            break
        try:
            later = analyse(composition.text)
        except EngineError as error:
            result.notes.append(f"round {round_number}'s fixes were dropped: {error}")
            break
        applied = {id(chosen[index]) for index in composition.applied}
        for finding_id in applied:
            kind, key = origin[finding_id]
            if kind == "found":
                result.applied.add(key)
            else:
                result.follow_ons[key] = replace(result.follow_ons[key], applied=True)
        old_lines, new_lines = LineIndex(text), LineIndex(composition.text)
        carried = {
            (f.code, map_offset(old_lines.offset(f.span.line, f.span.column), composition.edits)): id(f)
            for f in findings
            if id(f) not in applied
        }
        history.append(composition.edits)
        before, origin = origin, {}
        for finding in later:
            earlier = carried.get((finding.code, new_lines.offset(finding.span.line, finding.span.column)))
            if earlier is not None:  # the same finding (deferred, or not allowed): not new
                origin[id(finding)] = before[earlier]
                continue
            origin[id(finding)] = ("follow", len(result.follow_ons))
            back = span_back(finding.span, new_lines, original_lines, history)
            result.follow_ons.append(FollowOn(round_number + 1, replace(finding, span=back), False))
        text, findings = composition.text, later
    else:
        return Rounds(original, result.follow_ons, result.notes, f"fixes did not converge after {MAX_FIX_ROUNDS} rounds; file left unchanged")
    result.text = text
    return result


def compose_valid(
    text: str, fixes: Sequence[TextFix], validate: Callable[[str], None], notes: list[str]
) -> Composition:
    """`text_fixes.compose` of `fixes`, checked by `validate`. When the whole does not
    pass, the fixes are taken one by one, each kept only if the text with it still
    passes (the order and outcome a verified run that accepts every patch would have);
    each one dropped gets a note."""
    composition = compose(text, fixes)
    if not composition.applied:
        return composition
    try:
        validate(composition.text)
        return composition
    except EngineError:
        pass
    kept: list[int] = []
    for index in composition.applied:
        trial = compose(text, [fixes[i] for i in (*kept, index)])
        try:
            validate(trial.text)
        except EngineError as error:
            notes.append(f"dropped the fix \"{fixes[index].description}\": {error}")
            continue
        kept.append(index)
    final = compose(text, [fixes[i] for i in kept])
    return replace(final, applied=tuple(kept), deferred=composition.deferred)
