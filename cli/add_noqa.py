"""`--add-noqa`: a `# noqa: CODE` comment on the line of every finding that remains, so
that a project adopting autograd-fix (or a new rule) starts from a clean run and only
new code is held to the rules, as Ruff's `--add-noqa`.

The comment goes where the engine reads it: the finding's first line. A line that
already has `# noqa: AGF001` gets the new codes added to that comment; one with a bare
`# noqa` already suppresses everything. A line that cannot take a comment without
changing the program (it ends inside a triple-quoted string, or with a backslash
continuation) is left alone and counted, and so is a notebook (its lines are cells'
lines in a JSON file). Files are written as `--apply` writes them: atomically, in their
own encoding, and only if they still hold the bytes that were checked.
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from autograd_fix.cli.runner import FileOutcome, FindingRecord

@dataclass(frozen=True)
class NoqaEdit:
    """A file's text with the comments added, how many lines got a comment, and the
    lines (1-based) that could not take one."""

    text: str
    added: int
    skipped: tuple[int, ...]


def with_noqa(text: str, records: Iterable[FindingRecord]) -> NoqaEdit:
    """`text` with each finding's code in a `# noqa` comment on its first line."""
    from autograd_fix.codemods.engine import _NOQA  # the engine's own reading of the comment

    wanted: dict[int, set[str]] = {}
    for record in records:
        wanted.setdefault(record.line, set()).add(record.code)
    lines = text.splitlines(keepends=True)
    blocked = _lines_without_room(text)
    added, skipped = 0, []
    for number in sorted(wanted):
        if not 0 < number <= len(lines):
            continue
        line = lines[number - 1]
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        if number in blocked or body.rstrip().endswith("\\"):
            skipped.append(number)
            continue
        match = _NOQA.search(body) if "#" in body else None
        if match is not None and match.group("codes") is None:
            continue  # a bare `# noqa` suppresses every code already
        if match is not None:
            present = [code.strip().upper() for code in match.group("codes").split(",")]
            missing = sorted(wanted[number] - set(present))
            if not missing:
                continue
            body = body[: match.start()] + "# noqa: " + ", ".join(present + missing) + body[match.end():]
        else:
            body = body.rstrip() + "  # noqa: " + ", ".join(sorted(wanted[number]))
        lines[number - 1] = body + ending
        added += 1
    return NoqaEdit("".join(lines), added, tuple(skipped))


def _lines_without_room(text: str) -> set[int]:
    """Lines whose end lies inside a string token (a triple-quoted string, an f-string
    spanning lines), where a comment would become part of the string; every line when
    the text does not tokenize."""
    blocked: set[int] = set()
    open_fstrings: list[int] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            name = tokenize.tok_name.get(token.type, "")
            if name == "FSTRING_START":
                open_fstrings.append(token.start[0])
            elif name == "FSTRING_END" and open_fstrings:
                blocked.update(range(open_fstrings.pop(), token.end[0]))
            elif token.type == tokenize.STRING and token.end[0] > token.start[0]:
                blocked.update(range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        return set(range(1, text.count("\n") + 2))
    return blocked


@dataclass
class NoqaReport:
    """What `--add-noqa` did over a run."""

    added: int = 0
    files: int = 0
    #: (path, why) for files or lines left alone
    skipped: list[tuple[str, str]] | None = None


def add_noqa(outcomes: Iterable[FileOutcome]) -> tuple[NoqaReport, list[tuple[str, str]]]:
    """Write the comments into each file with findings; (the report, errors)."""
    from autograd_fix.cli.apply_files import encode
    from autograd_fix.cli.writes import WriteRefused, write_user_file
    from autograd_fix.codemods.source import SourceError

    report, errors = NoqaReport(skipped=[]), []
    for outcome in outcomes:
        if not outcome.findings or outcome.error or outcome.original is None:
            continue
        if outcome.notebook is not None:
            report.skipped.append((outcome.path, "a notebook: no noqa comments added"))
            continue
        edit = with_noqa(outcome.original, outcome.findings)
        report.skipped.extend((outcome.path, f"line {line} cannot take a comment") for line in edit.skipped)
        if not edit.added:
            continue
        try:
            write_user_file(outcome.path, encode(outcome, edit.text), expected_digest=outcome.digest)
        except (WriteRefused, SourceError, OSError) as error:
            errors.append((outcome.path, str(error)))
            continue
        report.added += edit.added
        report.files += 1
    return report, errors
