"""`--format github`: findings as GitHub Actions workflow commands (annotations).

`::error file=src/train.py,line=33,col=9,endLine=33,endColumn=44,title=AGF001::message`
puts the finding on the changed line of a pull request. GitHub's check-run annotations
take columns only within one line, so a finding that spans several lines gets `line`
and `endLine` without columns. Values are escaped the way GitHub's toolkit does it:
`%`, CR and LF in the message; those and `:` and `,` in properties.
"""

from __future__ import annotations

from typing import Iterable

from autograd_fix.cli.runner import FindingRecord
from autograd_fix.codemods.safe_text import printable

#: the title of an annotation for a file the tool could not check
ERROR_TITLE = "autograd-fix error"


def escape_data(text: str) -> str:
    """`text` for a workflow command: GitHub's own escapes for `%`, CR and LF, and every
    other control character escaped (a CI log shows the line raw, ANSI sequences and all)."""
    escaped = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return printable(escaped)


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(level: str, message: str, **properties: object) -> str:
    """One `::level key=value,...::message` line; properties whose value is None are left out."""
    fields = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items() if value is not None)
    return f"::{level} {fields}::{escape_data(message)}" if fields else f"::{level}::{escape_data(message)}"


def finding_annotation(record: FindingRecord) -> str:
    """One annotation; a notebook finding is placed on the `.ipynb` file's own lines
    (its JSON, which is what a pull request shows) with the cell in the message."""
    line, column, end_line, end_column = record.line, record.column, record.end_line, record.end_column
    if record.cell is not None:
        region = record.file_region
        line, column, end_line, end_column = (
            (region.line, region.column, region.end_line, region.end_column) if region else (1, None, None, None)
        )
    one_line = line == end_line
    message = record.cell_prefix + record.message
    if record.fix_applies:
        message += " (fixable with autograd-fix --apply)"
    if record.verification:
        message += f" [{record.verification.summary()}]"
    return workflow_command(
        "error",
        message,
        file=record.path,
        line=line,
        col=column if one_line else None,
        endLine=end_line,
        endColumn=end_column if one_line else None,
        title=record.code,
    )


def github_annotations(records: Iterable[FindingRecord], errors: Iterable[tuple[str, str]]) -> str:
    """Every finding, then every file that could not be checked, one command per line."""
    lines = [finding_annotation(record) for record in records]
    lines += [workflow_command("error", message, file=path, title=ERROR_TITLE) for path, message in errors]
    return "".join(line + "\n" for line in lines)
