"""Text geometry for the language server: lines as editors count them, minimal edits, noqa.

Positions here are 0-based (line, character) with characters counted in code points,
as Python strings index them; the server converts them to the client's position
encoding (UTF-16 by default) at the protocol boundary. Nothing here imports pygls.

Fixes are sent as minimal line-based edits (difflib over lines) rather than one
whole-document replacement: an editor keeps the cursor, folds, breakpoints and
bookmarks on every line that did not change, and undo shows only what the fix touched.
"""

from __future__ import annotations

import difflib
import re
import tokenize
from dataclasses import dataclass

from autograd_fix.codemods.engine import EngineError, validate_python

#: the Language Server Protocol's line breaks (str.splitlines knows more, e.g. form feed)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_NOQA_CODES = re.compile(r"#\s*noqa:\s*[A-Za-z]+\d+(?:\s*,\s*[A-Za-z]+\d+)*", re.I)
_BARE_NOQA = re.compile(r"#\s*noqa(?!:)", re.I)


@dataclass(frozen=True)
class TextEdit:
    """Replace [start, end) (0-based line, code-point character) by `new_text`."""

    start_line: int
    start_character: int
    end_line: int
    end_character: int
    new_text: str


def split_lines(text: str) -> list[str]:
    """Lines with their line breaks, split where an LSP client splits them."""
    lines: list[str] = []
    start = 0
    for match in _LINE_BREAK.finditer(text):
        lines.append(text[start:match.end()])
        start = match.end()
    if start < len(text):
        lines.append(text[start:])
    return lines


def _content(line: str) -> str:
    """The line without its line break."""
    return line.rstrip("\r\n")


def line_edits(before: str, after: str) -> list[TextEdit]:
    """The smallest set of whole-line edits that turns `before` into `after`."""
    old, new = split_lines(before), split_lines(after)
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    edits = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        start = _line_start(old, i1)
        end = _line_start(old, i2)
        edits.append(TextEdit(start[0], start[1], end[0], end[1], "".join(new[j1:j2])))
    return edits


def _line_start(lines: list[str], index: int) -> tuple[int, int]:
    """Where line `index` starts; past the last line, the end of the text."""
    if index < len(lines) or not lines:
        return index, 0
    last = lines[-1]
    if last != _content(last):  # the text ends with a line break: an empty last line
        return index, 0
    return len(lines) - 1, len(last)


def apply_edits(text: str, edits: list[TextEdit]) -> str:
    """`text` with non-overlapping `edits` applied (what a client does with them)."""
    lines = split_lines(text)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(line: int, character: int) -> int:
        if line >= len(lines):
            return len(text)
        return offsets[line] + min(character, len(_content(lines[line])))

    result = text
    ordered = sorted(edits, key=lambda e: (e.start_line, e.start_character), reverse=True)
    for edit in ordered:
        start, end = offset(edit.start_line, edit.start_character), offset(edit.end_line, edit.end_character)
        result = result[:start] + edit.new_text + result[end:]
    return result


def noqa_edit(text: str, line: int, code: str) -> TextEdit | None:
    """The edit that suppresses `code` on 1-based `line`, or None when it cannot be done.

    An existing `# noqa: A, B` comment gets `, CODE` appended to its codes; otherwise
    `  # noqa: CODE` goes at the end of the line. None when the line already suppresses
    everything (bare `# noqa`), when its end lies inside a string or after a backslash
    continuation, or when the result would not compile.
    """
    lines = split_lines(text)
    if not 1 <= line <= len(lines):
        return None
    content = _content(lines[line - 1])
    try:
        comment = _comment_on_line(lines, line)
    except _NoPlaceForAComment:
        return None
    at_end = len(content.rstrip())
    edit = TextEdit(line - 1, at_end, line - 1, len(content), f"  # noqa: {code}")
    if comment is not None:
        column, comment_text = comment
        if _BARE_NOQA.search(comment_text):
            return None
        codes = _NOQA_CODES.search(comment_text)
        if codes is not None:
            insert_at = column + codes.end()
            edit = TextEdit(line - 1, insert_at, line - 1, insert_at, f", {code}")
    elif content.rstrip().endswith("\\"):
        return None
    try:
        validate_python(apply_edits(text, [edit]))
    except EngineError:
        return None
    return edit


class _NoPlaceForAComment(Exception):
    """The line ends inside a token (a multi-line string), or the text does not tokenize."""


def _comment_on_line(lines: list[str], line: int) -> tuple[int, str] | None:
    """(column, text) of the comment on 1-based `line`, if it has one."""
    feed = iter(lines)
    try:
        for token in tokenize.generate_tokens(lambda: next(feed, "")):
            if token.start[0] > line:
                break
            if token.type == tokenize.COMMENT and token.start[0] == line:
                return token.start[1], token.string
            if token.start[0] <= line < token.end[0] and token.type not in (tokenize.NL, tokenize.NEWLINE):
                raise _NoPlaceForAComment
    except (tokenize.TokenError, SyntaxError):
        raise _NoPlaceForAComment from None
    return None
