"""Fixes as data, and the one composition step every output path uses.

Rules build fixes as node edits (`model.Fix`: closures over the parsed tree). Right after
the rule pass the engine turns each into a `model.TextFix` (`materialize`): the fix is
applied alone to the original tree, only the top-level statements it touches are
generated again (`engine.StatementCode`), and the new text is diffed against the old one
into the smallest ranges that changed. A required import becomes its own edit at the
import block. From then on no tree is needed: `compose` applies any list of fixes to the
text (Ruff's model: take each fix in the given order unless one of its edits collides
with an edit already taken; the colliding fix waits for the next round, which re-runs the
rules on the new text), and `--no-verify`, `--diff`, `--apply`, verification's plans and
the language server all go through it, so they cannot disagree on the text a set of
fixes gives.
"""

from __future__ import annotations

import bisect
import difflib
import re
from dataclasses import dataclass
from typing import Sequence

import libcst as cst

from autograd_fix.codemods.model import Fix, Span, TextEdit, TextFix

#: a changed region of more lines than this is split into line hunks (a fix that edits
#: two distant places must not claim everything between them)
_HUNK_LINES = 3
#: Python's line breaks, as libcst counts lines for spans
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix (window by window: C comparisons, no loop per char)."""
    limit = min(len(a), len(b))
    lo, step = 0, 4096
    while lo < limit:
        hi = min(limit, lo + step)
        if a[lo:hi] == b[lo:hi]:
            lo, step = hi, step * 2
            continue
        if hi - lo == 1:
            return lo
        step = max(1, (hi - lo) // 2)
    return lo


def _common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the longest common suffix, at most `limit`."""
    return common_prefix(a[::-1][:limit], b[::-1][:limit]) if limit else 0


def text_edits(before: str, after: str) -> tuple[TextEdit, ...]:
    """The smallest edits that turn `before` into `after`: one range when the change is a
    few lines, otherwise one per changed run of lines, each trimmed to what differs."""
    if before == after:
        return ()
    prefix = common_prefix(before, after)
    suffix = _common_suffix(before, after, min(len(before), len(after)) - prefix)
    old, new = before[prefix : len(before) - suffix], after[prefix : len(after) - suffix]
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    if len(old_lines) <= _HUNK_LINES or len(new_lines) <= _HUNK_LINES:
        return (TextEdit(prefix, prefix + len(old), new),)
    starts = [0]
    for line in old_lines:
        starts.append(starts[-1] + len(line))
    edits = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        piece_old, piece_new = old[starts[i1] : starts[i2]], "".join(new_lines[j1:j2])
        head = common_prefix(piece_old, piece_new)
        tail = _common_suffix(piece_old, piece_new, min(len(piece_old), len(piece_new)) - head)
        begin = prefix + starts[i1] + head
        edits.append(TextEdit(begin, prefix + starts[i2] - tail, piece_new[head : len(piece_new) - tail]))
    return tuple(edits)


def materialize(module: cst.Module, fix: Fix, paths: dict[int, frozenset[int]] | None, codes: object) -> TextFix:
    """`fix` (node edits on `module`) as text edits on `module`'s text.

    `paths` and `codes` are `engine.target_paths` / `engine.StatementCode` of `module`
    (so only the statements the fix touches are generated again). The node edits and the
    required imports are diffed separately, so that an import at the top and an edit far
    below are two small edits; where they touch, one diff of the whole fix is used.
    Raises whatever the rule's replacement raises (the caller drops that fix).
    """
    from autograd_fix.codemods.engine import StatementCode, apply_fixes
    from autograd_fix.codemods.imports import add_imports

    assert isinstance(codes, StatementCode)
    before = codes.original
    body = text_edits(before, apply_fixes(module, [Fix(fix.applicability, fix.edits, fix.description)], paths, codes))
    imports: tuple[TextEdit, ...] = ()
    if fix.required_imports:
        with_imports = add_imports(module, list(fix.required_imports))
        if with_imports is not module:
            imports = text_edits(before, codes.code(with_imports))
    edits = tuple(sorted((*imports, *body), key=lambda edit: (edit.start, edit.end)))
    if any(_collide(a, b) for a, b in zip(edits, edits[1:])):
        edits = text_edits(before, apply_fixes(module, [fix], paths, codes))
    return TextFix(applicability=fix.applicability, edits=edits, description=fix.description)


def _collide(a: TextEdit, b: TextEdit) -> bool:
    """Whether two edits cannot both be applied without one changing what the other means.

    Ranges that overlap collide; so does an insertion inside or at either end of a
    replaced range (which side of the new text should it go?). Identical edits do not
    (two fixes adding the same import add it once), nor do two insertions at one point
    (they go in the order their fixes were taken), nor ranges that only touch.
    """
    if a == b:
        return False
    if a.start == a.end and b.start == b.end:
        return False
    if a.start == a.end:
        return b.start <= a.start <= b.end
    if b.start == b.end:
        return a.start <= b.start <= a.end
    return max(a.start, b.start) < min(a.end, b.end)


@dataclass(frozen=True)
class Composition:
    """The text with the taken fixes applied; indices into the fixes composed."""

    text: str
    applied: tuple[int, ...]
    #: fixes that collide with one taken before them: for the next round
    deferred: tuple[int, ...]
    #: the edits applied, sorted (to map positions from the old text to the new one)
    edits: tuple[TextEdit, ...] = ()


def compose(text: str, fixes: Sequence[TextFix]) -> Composition:
    """`text` with `fixes` applied: each in the given order unless one of its edits
    collides with an edit of a fix taken before it (then it is deferred). Pure: no parse,
    no validation (callers check the result as their output needs)."""
    taken: list[TextEdit] = []  # sorted by (start, end), acceptance order kept among equals
    keys: list[tuple[int, int]] = []
    applied: list[int] = []
    deferred: list[int] = []
    for index, fix in enumerate(fixes):
        if any(_collides_with_taken(edit, taken, keys) for edit in fix.edits):
            deferred.append(index)
            continue
        applied.append(index)
        for edit in fix.edits:
            if edit in taken:
                continue  # the same edit made by an earlier fix (an import both need)
            position = bisect.bisect_right(keys, (edit.start, edit.end))
            keys.insert(position, (edit.start, edit.end))
            taken.insert(position, edit)
    return Composition(apply_edits(text, taken), tuple(applied), tuple(deferred), tuple(taken))


def _collides_with_taken(edit: TextEdit, taken: list[TextEdit], keys: list[tuple[int, int]]) -> bool:
    """`_collide` against the taken edits that can reach `edit` (those starting at most
    at its end; of those, the ones ending at or after its start)."""
    stop = bisect.bisect_right(keys, (edit.end, float("inf")))  # type: ignore[arg-type]
    return any(other.end >= edit.start and _collide(edit, other) for other in taken[:stop])


def apply_edits(text: str, edits: Sequence[TextEdit]) -> str:
    """`text` with non-colliding `edits` applied (sorted by start; equal starts keep their order)."""
    if not edits:
        return text
    pieces = []
    position = 0
    for edit in sorted(edits, key=lambda edit: (edit.start, edit.end)):
        pieces.append(text[position : edit.start])
        pieces.append(edit.text)
        position = max(position, edit.end)
    pieces.append(text[position:])
    return "".join(pieces)


def apply_fix(text: str, fix: TextFix) -> str:
    """`text` with `fix` alone applied (its edits never collide with each other)."""
    return apply_edits(text, fix.edits)


def map_offset(offset: int, edits: Sequence[TextEdit]) -> int:
    """Where `offset` of the old text lies in the text after `edits` (sorted, applied
    together); an offset inside a replaced range maps to where its replacement starts."""
    shift = 0
    for edit in edits:
        if edit.start >= offset and not (edit.start == edit.end == offset):
            break
        if offset < edit.end:
            return edit.start + shift
        shift += len(edit.text) - (edit.end - edit.start)
    return offset + shift


def unmap_offset(offset: int, edits: Sequence[TextEdit]) -> int:
    """Where `offset` of the text after `edits` (sorted) lay in the old text; an offset
    inside a replacement maps to the start of the range it replaced."""
    shift = 0
    for edit in edits:
        new_start = edit.start + shift
        if offset < new_start:
            break
        if offset < new_start + len(edit.text):
            return edit.start
        shift += len(edit.text) - (edit.end - edit.start)
    return offset - shift


class LineIndex:
    """Offsets of 1-based (line, column) positions in one text, and back, with the line
    breaks Python (and libcst's spans) count."""

    def __init__(self, text: str) -> None:
        self.starts = [0, *(match.end() for match in _LINE_BREAK.finditer(text))]

    def offset(self, line: int, column: int) -> int:
        return self.starts[min(max(line, 1), len(self.starts)) - 1] + max(column, 1) - 1

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1


def span_back(span: Span, lines: LineIndex, original: LineIndex, history: Sequence[Sequence[TextEdit]]) -> Span:
    """`span` of a later round's text (`lines`) as a span of the original text, back
    through each round's edits (`history`, oldest first): a position inside a rewritten
    range maps to the start of what that range replaced."""
    start, end = lines.offset(span.line, span.column), lines.offset(span.end_line, span.end_column)
    for edits in reversed(history):
        start, end = unmap_offset(start, edits), unmap_offset(end, edits)
    (line, column), (end_line, end_column) = original.position(start), original.position(max(start, end))
    return Span(line, column, end_line, end_column)
