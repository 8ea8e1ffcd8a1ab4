"""Turns results into text, JSON and diffs. The only place that formats output.

Text findings are `path:line:col: CODE [*] message` (1-based), the format editors and CI
problem matchers understand; in notebooks `path:cell N:line:col:` (as Ruff prints). `[*]` marks a finding whose fix `--apply` would apply with
the current options. Diffs are plain unified diffs (`git apply` accepts them); rich only
adds colour when writing to a terminal.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterable

from autograd_fix.codemods.safe_text import printable
from autograd_fix.cli.runner import FileOutcome, FindingRecord

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

# rich loads where text is styled: a JSON, SARIF or other machine-readable report never
# imports it (tens of ms of a run's start)


def finding_line(record: FindingRecord) -> Text:
    from rich.text import Text

    text = Text()
    text.append(f"{printable(record.location)}:", style="bold")
    text.append(" ")
    text.append(record.code, style="bold red")
    if record.fix_applies:
        text.append(" [*]", style="cyan")
    text.append(f" {record.message}")
    if record.verification:
        text.append(f" [{record.verification.summary()}]", style="dim")
    return text


def verdict_lines(outcome: FileOutcome) -> list[str]:
    """One line per verified patch of a file, printed above its diff.

    They start with `#` so that `git apply` skips them as commentary.
    """
    return [
        f"# {record.code} {printable(record.location)} {record.verification.summary()}"
        for record in outcome.findings
        if record.verification
    ]


def print_findings(console: Console, records: Iterable[FindingRecord]) -> None:
    for record in records:
        console.print(finding_line(record), soft_wrap=True, highlight=False)


def file_diff(outcome: FileOutcome) -> str:
    """The file's unified diff; a UTF-8 BOM stays on line 1 of both sides, as git shows
    it, so a hunk that touches line 1 still applies."""
    if outcome.original is None or outcome.fixed is None:
        return ""
    if outcome.notebook is not None:
        return outcome.notebook.diff(outcome.original, outcome.fixed, outcome.path)
    from autograd_fix.codemods.engine import unified_diff

    return unified_diff(outcome.original, outcome.fixed, outcome.path, bom=outcome.bom)


def diff_bytes(outcome: FileOutcome, diff: str) -> bytes:
    """`diff` as the bytes `git apply` expects: the file's lines in the file's own
    encoding (a latin-1 file's diff in UTF-8 matches none of its lines), the `---`/`+++`
    header lines in UTF-8."""
    encoding = "utf-8" if outcome.notebook is not None else outcome.encoding
    out = []
    for line in diff.split("\n"):
        header = line.startswith(("--- a/", "+++ b/", '--- "a/', '+++ "b/'))
        out.append(line.encode("utf-8" if header else encoding, "surrogateescape" if header else "strict"))
    return b"\n".join(out)


def print_diff(console: Console, diff: str) -> None:
    """Colour a unified diff line by line; without colour, write it byte for byte.

    Rich drops carriage returns and form feeds from the text it prints, and `git apply`
    needs them (a CRLF file's lines end in CRLF in its diff), so plain output bypasses
    rich, and coloured output writes each line's ending itself after the styled body."""
    if console.color_system is None:
        console.file.write(diff)
        console.file.flush()
        return
    from rich.text import Text

    from autograd_fix.codemods.engine import git_lines

    for line in git_lines(diff):
        body = line.rstrip("\r\n")
        style = None
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("@@"):
            style = "cyan"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        console.print(Text(body, style=style or ""), soft_wrap=True, highlight=False, markup=False, end="")
        console.file.write(line[len(body):])


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def summary_line(
    findings: int, fixable: int, hidden_unsafe: int, errors: int, *, mode: str, fixed: int = 0, files_fixed: int = 0,
    checked: int | None = None, verified_later: bool = False, not_written: int = 0,
    verified: bool | None = None, rejected: int = 0, unverified: int = 0,
) -> str:
    """The run's last line.

    `checked`: files read and analysed; with none, the line says so rather than "No
    findings" (nothing was looked at). `hidden_unsafe`: unsafe fixes not applied with
    the current options; `verified_later` (a listing, when `--apply` would verify) says
    `--apply` applies them once verification accepts them, as it does; otherwise only
    `--unsafe-fixes` would. `errors` counts files not checked, `not_written` files
    checked and fixed whose write `--apply` refused (they are not in `fixed`).
    `verified` (`--diff` / `--apply`): whether patches were run; then `rejected` and
    `unverified` count the patches left out for their verdict; without verification
    the line says that nothing was run."""
    parts: list[str] = []
    if checked == 0 and not findings:
        parts.append("No files checked")
    elif mode == "apply":
        parts.append(f"Fixed {plural(fixed, 'finding')} in {plural(files_fixed, 'file')}")
        remaining = findings - fixed
        parts.append(f"{remaining} remaining" if remaining else "nothing left to fix")
    elif mode == "diff":
        parts.append(f"Would fix {plural(fixable, 'finding')} of {findings}")
    elif findings:
        parts.append(f"Found {plural(findings, 'finding')}")
        if fixable:
            parts.append(f"{fixable} fixable with --apply")
    else:
        parts.append("No findings")
    if rejected:
        parts.append(f"{rejected} rejected by verification")
    if unverified:
        parts.append(f"{unverified} unverified, not {'written' if mode == 'apply' else 'shown'} (--unverified-fixes "
                     f"{'writes' if mode == 'apply' else 'shows'} {'it' if unverified == 1 else 'them'})")
    if verified is False and mode in ("apply", "diff") and (findings or fixed):
        parts.append("not verified (--no-verify)")
    if hidden_unsafe and verified_later and mode == "report":
        parts.append(f"{hidden_unsafe} more fixable with --apply once verification accepts {'it' if hidden_unsafe == 1 else 'them'}")
    elif hidden_unsafe:
        parts.append(f"{hidden_unsafe} more fixable with --unsafe-fixes")
    if not_written:
        parts.append(f"{plural(not_written, 'file')} not written")
    if errors:
        parts.append(f"{plural(errors, 'file')} could not be checked")
    return "; ".join(parts) + "."


def json_document(outcomes: list[FileOutcome], summary: dict[str, Any]) -> str:
    findings = [finding_json(record) for outcome in outcomes for record in outcome.findings]
    return json.dumps({"findings": findings, "summary": summary}, indent=2)


def finding_json(record: FindingRecord) -> dict[str, Any]:
    """One finding as `--format json` (and `json-lines`) write it."""
    entry: dict[str, Any] = {
        "path": record.path,
        "cell": record.cell,
        "line": record.line,
        "column": record.column,
        "end_line": record.end_line,
        "end_column": record.end_column,
        "code": record.code,
        "name": record.name,
        "message": record.message,
        "round": record.round,
        "fix": None,
        "verification": record.verification.finding_json() if record.verification else None,
    }
    if record.fix_applicability is not None:
        entry["fix"] = {"applicability": record.fix_applicability, "diff": record.fix_diff or ""}
        if record.fix is not None and record.cell is None and record.round == 1:
            # the fix as data: character offsets into the file's text (Ruff's `edits`)
            entry["fix"]["edits"] = [edit.to_json() for edit in record.fix.edits]
    return entry
