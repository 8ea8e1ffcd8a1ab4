"""The report formats CI systems read besides SARIF and GitHub's: JSON Lines, JUnit XML,
GitLab Code Quality, and the `--statistics` and `--list-rules --format json` tables.

Why these: they are what Ruff writes, so a pipeline step written for Ruff's
`--output-format` works with autograd-fix's `--format` unchanged (GitLab's merge-request
widget reads Code Quality JSON; Jenkins, Azure and CircleCI read JUnit).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence
from xml.sax.saxutils import escape, quoteattr

from autograd_fix.cli.render import finding_json
from autograd_fix.codemods.safe_text import printable

if TYPE_CHECKING:
    from autograd_fix.cli.runner import FileOutcome, FindingRecord
    from autograd_fix.codemods.rule import Rule


def json_lines(records: Iterable[FindingRecord]) -> str:
    """One JSON object per finding and line (`--format json-lines`), the fields of
    `--format json`'s findings; nothing for a clean run."""
    return "".join(json.dumps(finding_json(record)) + "\n" for record in records)


def junit_xml(outcomes: Sequence[FileOutcome], errors: Sequence[tuple[str, str]]) -> str:
    """JUnit XML: a test suite per file with findings, a failed test case per finding,
    an errored one per file that could not be checked; a passing case when clean."""
    suites: list[str] = []
    total = sum(len(outcome.findings) for outcome in outcomes)
    for outcome in outcomes:
        if not outcome.findings:
            continue
        cases = []
        for record in outcome.findings:
            text = f"{record.location}: {record.code} {record.message}"
            cases.append(
                f'    <testcase name={quoteattr(f"autograd-fix.{record.code}")} classname={quoteattr(printable(record.path))} '
                f'line="{record.line}" column="{record.column}">\n'
                f"      <failure message={quoteattr(printable(record.message))}>{escape(printable(text))}</failure>\n"
                "    </testcase>"
            )
        suites.append(
            f'  <testsuite name={quoteattr(printable(outcome.path))} tests="{len(cases)}" failures="{len(cases)}" errors="0">\n'
            + "\n".join(cases) + "\n  </testsuite>"
        )
    for path, message in errors:
        suites.append(
            f'  <testsuite name={quoteattr(printable(path))} tests="1" failures="0" errors="1">\n'
            f'    <testcase name="autograd-fix" classname={quoteattr(printable(path))}>\n'
            f"      <error message={quoteattr(printable(message))}>{escape(printable(message))}</error>\n"
            "    </testcase>\n  </testsuite>"
        )
    if not suites:
        suites.append(
            '  <testsuite name="autograd-fix" tests="1" failures="0" errors="0">\n'
            '    <testcase name="No findings" classname="autograd-fix"/>\n  </testsuite>'
        )
    tests = max(total + len(errors), 1)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuites name="autograd-fix" tests="{tests}" failures="{total}" errors="{len(errors)}">\n'
        + "\n".join(suites) + "\n</testsuites>\n"
    )


def gitlab_json(outcomes: Sequence[FileOutcome]) -> str:
    """GitLab Code Quality: one issue per finding, with the fingerprint SARIF uses (the
    rule, the path and the finding's source line, so it survives edits elsewhere)."""
    from autograd_fix.cli.sarif import finding_fingerprints

    issues: list[dict[str, Any]] = []
    for outcome in outcomes:
        for record, fingerprint in zip(outcome.findings, finding_fingerprints(outcome)):
            region = record.file_region
            begin, end = (region.line, region.end_line) if region is not None else (record.line, record.end_line)
            issues.append({
                "check_name": record.code,
                "description": f"{record.cell_prefix}{record.code} {record.message}",
                "fingerprint": fingerprint,
                "severity": "major",
                "location": {"path": record.path, "lines": {"begin": begin, "end": end}},
            })
    return json.dumps(issues, indent=2) + "\n"


@dataclass(frozen=True)
class RuleCount:
    """One line of `--statistics`: how often a rule fired, and how many of those `--apply`
    would fix with the current options."""

    code: str
    name: str
    count: int
    fixable: int


def statistics(records: Iterable[FindingRecord]) -> list[RuleCount]:
    """Counts per rule, most frequent first (then by code), as Ruff's `--statistics`."""
    records = list(records)
    counts = Counter(record.code for record in records)
    fixable = Counter(record.code for record in records if record.fix_applies)
    names = {record.code: record.name for record in records}
    ordered = sorted(counts, key=lambda code: (-counts[code], code))
    return [RuleCount(code, names[code], counts[code], fixable[code]) for code in ordered]


def statistics_text(rows: Sequence[RuleCount]) -> str:
    """`count  CODE  [*] name` per rule (`[*]`: every one fixable, `[-]`: some)."""
    if not rows:
        return ""
    width = max(len(str(row.count)) for row in rows)
    lines = []
    for row in rows:
        mark = "[*]" if row.fixable == row.count else "[-]" if row.fixable else "   "
        lines.append(f"{row.count:>{width}}\t{row.code}\t{mark} {row.name}")
    return "\n".join(lines) + "\n"


def statistics_json(rows: Sequence[RuleCount]) -> str:
    return json.dumps(
        [{"code": row.code, "name": row.name, "count": row.count, "fixable": row.fixable} for row in rows], indent=2
    ) + "\n"


def rules_json(rules: Iterable[type[Rule]]) -> str:
    """`--list-rules --format json`: each rule's code, name, fix safety, summary and
    documentation (what `--explain` shows), for editors and documentation sites."""
    return json.dumps(
        [
            {
                "code": rule.code,
                "name": rule.name,
                "fix": rule.safety_label(),
                "summary": rule.summary(),
                "explanation": rule.documentation(),
            }
            for rule in rules
        ],
        indent=2,
    ) + "\n"
