"""`--format sarif`: findings as a SARIF 2.1.0 log (GitHub code scanning, IDE viewers).

One run per invocation. The driver lists every rule with its documentation (the same
text as `--explain`) and its help URI; each result points at the finding's region,
carries a stable fingerprint, the fix as SARIF replacements, and the verification
verdict and evidence under `properties`. Files that could not be checked become
`toolExecutionNotifications` and make the invocation unsuccessful.

Columns are counted in Unicode code points (`columnKind`), as libcst counts them;
regions end one past their last character, as SARIF wants.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from autograd_fix import __version__
from autograd_fix.cli.rules_doc import PROJECT_URL, rule_help_uri
from autograd_fix.cli.runner import FileOutcome, FindingRecord
from autograd_fix.codemods.registry import all_rules
from autograd_fix.codemods.rule import Rule
from autograd_fix.verification.verdict import Status

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"
#: the key of our own entry in `partialFingerprints` (bump the version if the recipe changes)
FINGERPRINT_KEY = "autogradFix/v1"
#: GitHub code scanning rejects longer rule descriptions
MAX_DESCRIPTION = 1000


def sarif_document(
    outcomes: list[FileOutcome],
    errors: list[tuple[str, str]],
    summary: dict[str, Any],
    *,
    fixed: set[int] | None = None,
    working_directory: Path | None = None,
) -> dict[str, Any]:
    """The SARIF log of one run; `fixed` holds `id()`s of findings `--apply` wrote."""
    rules = all_rules()
    rule_index = {rule.code: index for index, rule in enumerate(rules)}
    results = []
    for outcome in outcomes:
        fingerprints = finding_fingerprints(outcome)
        for record, fingerprint in zip(outcome.findings, fingerprints):
            applied = None if fixed is None else id(record) in fixed
            results.append(_result(record, outcome, rule_index.get(record.code), fingerprint, applied))
    cwd = working_directory or Path.cwd()
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "autograd-fix",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": PROJECT_URL,
                "rules": [_rule_descriptor(rule) for rule in rules],
            }
        },
        "invocations": [
            {
                "executionSuccessful": not errors,
                "toolExecutionNotifications": [_notification(path, message) for path, message in errors],
                "workingDirectory": {"uri": _directory_uri(cwd)},
            }
        ],
        "originalUriBaseIds": {SRCROOT: {"uri": _directory_uri(cwd)}},
        "columnKind": "unicodeCodePoints",
        "results": results,
        "properties": {"summary": summary},
    }
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def sarif_json(
    outcomes: list[FileOutcome],
    errors: list[tuple[str, str]],
    summary: dict[str, Any],
    *,
    fixed: set[int] | None = None,
) -> str:
    return json.dumps(sarif_document(outcomes, errors, summary, fixed=fixed), indent=2)


def _rule_descriptor(rule: type[Rule]) -> dict[str, Any]:
    documentation = rule.documentation()
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.message},
        "fullDescription": {"text": _limit(rule.summary())},
        "help": {"text": documentation, "markdown": documentation},
        "helpUri": rule_help_uri(rule.code),
        "defaultConfiguration": {"level": "warning"},
        "properties": {"tags": ["pytorch", "autograd"], "fixSafety": rule.safety.value},
    }


def _result(
    record: FindingRecord, outcome: FileOutcome, rule_index: int | None, fingerprint: str, applied: bool | None
) -> dict[str, Any]:
    location = _artifact_location(record.path)
    result: dict[str, Any] = {
        "ruleId": record.code,
        "level": "warning",
        "message": {"text": f"{record.cell_prefix}{record.message}"},
        "locations": [{"physicalLocation": {"artifactLocation": location, "region": _region(record)}}],
        "partialFingerprints": {FINGERPRINT_KEY: fingerprint},
    }
    if rule_index is not None:
        result["ruleIndex"] = rule_index
    properties: dict[str, Any] = {"name": record.name}
    if record.cell is not None:  # the position people see in Jupyter
        properties.update(cell=record.cell, cellLine=record.line, cellColumn=record.column)
    if record.fix_applicability is not None:
        properties["fixApplicability"] = record.fix_applicability
        properties["fixApplies"] = record.fix_applies
    if applied is not None:
        properties["fixed"] = applied
    if record.verification is not None:
        properties["verification"] = record.verification.finding_json()
    result["properties"] = properties
    fix = _fix(record, outcome, location)
    if fix is not None:
        result["fixes"] = [fix]
    return result


def _region(record: FindingRecord) -> dict[str, int]:
    """The finding's region in the file a viewer shows: for a notebook, lines of the
    `.ipynb` JSON (the cell and its own line go in the message and properties); the
    whole file's first line where the cell's place in the JSON is unknown."""
    if record.cell is not None:
        region = record.file_region
        if region is None:
            return {"startLine": 1}
        return {"startLine": region.line, "startColumn": region.column, "endLine": region.end_line,
                "endColumn": region.end_column + 1}
    return {"startLine": record.line, "startColumn": record.column, "endLine": record.end_line,
            "endColumn": record.end_column + 1}


def _fix(record: FindingRecord, outcome: FileOutcome, location: dict[str, Any]) -> dict[str, Any] | None:
    """The finding's own fix as replacements in the original text (None: no fix to offer).

    A fix that verification rejected is never offered: it would never be applied either.
    Nor is a notebook's: its replacements would be offsets into the cells' program, and
    applied to the `.ipynb` they would corrupt its JSON (`--apply` fixes notebooks).
    """
    if outcome.notebook is not None:
        return None
    if record.patched is None or outcome.original is None or record.fix_applicability is None:
        return None
    if record.verification is not None and record.verification.verdict is Status.REJECTED:
        return None
    replacements = text_replacements(outcome.original, record.patched)
    if not replacements:
        return None
    return {
        "description": {"text": f"{record.fix_applicability} fix ({_how_applied(record)}): {record.message}"},
        "artifactChanges": [{"artifactLocation": location, "replacements": replacements}],
    }


def _how_applied(record: FindingRecord) -> str:
    """The command that applies the fix, as `--apply`'s policy decides: a safe fix unless
    rejected; an unsafe one once verification accepts it, or with --unsafe-fixes when
    verification could not decide."""
    if record.fix_applicability == "safe" or (record.verification is not None and record.verification.verdict is Status.ACCEPTED):
        return "autograd-fix --apply"
    if record.verification is not None:
        return "autograd-fix --apply --unsafe-fixes: verification could not decide it"
    return "autograd-fix --apply once verification accepts it, or --apply --unsafe-fixes unless it rejects it"


def text_replacements(before: str, after: str) -> list[dict[str, Any]]:
    """SARIF `replacements` that turn `before` into `after`, whole lines at a time.

    Each deleted region is given both as lines/columns and as a character offset and
    length (code points), so that a consumer may use either.
    """
    old = before.splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    starts = [0]
    for line in old:
        starts.append(starts[-1] + len(line))
    replacements = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        start_line, start_column = _line_start(old, i1)
        end_line, end_column = _line_start(old, i2)
        replacement: dict[str, Any] = {
            "deletedRegion": {
                "startLine": start_line,
                "startColumn": start_column,
                "endLine": end_line,
                "endColumn": end_column,
                "charOffset": starts[i1],
                "charLength": starts[i2] - starts[i1],
            }
        }
        if j2 > j1:
            replacement["insertedContent"] = {"text": "".join(new[j1:j2])}
        replacements.append(replacement)
    return replacements


def _line_start(lines: list[str], index: int) -> tuple[int, int]:
    """1-based (line, column) where line `index` (0-based) starts; past the end: end of text."""
    if index < len(lines):
        return index + 1, 1
    if not lines:
        return 1, 1
    return len(lines), len(lines[-1]) + 1


def finding_fingerprints(outcome: FileOutcome) -> list[str]:
    """One fingerprint per finding that survives edits elsewhere in the file.

    It hashes the rule, the path and the finding's first source line (whitespace
    collapsed), not its line number; identical ones are told apart by their order.
    """
    lines = (outcome.original or "").splitlines()
    seen: Counter[str] = Counter()
    prints = []
    for record in outcome.findings:
        line = record.line
        if record.cell is not None and outcome.notebook is not None:  # `original` is the cells' program
            line = outcome.notebook.program_line(record.cell, record.line)
        text = " ".join(lines[line - 1].split()) if 0 < line <= len(lines) else ""
        digest = hashlib.sha256("\0".join((record.code, record.path, text)).encode("utf-8", "surrogatepass")).hexdigest()[:32]
        prints.append(f"{digest}:{seen[digest]}")
        seen[digest] += 1
    return prints


def _notification(path: str, message: str) -> dict[str, Any]:
    return {
        "level": "error",
        "message": {"text": f"{path}: {message}"},
        "locations": [{"physicalLocation": {"artifactLocation": _artifact_location(path)}}],
    }


def _artifact_location(path: str) -> dict[str, Any]:
    """A relative path becomes a URI under %SRCROOT% (the working directory)."""
    posix = path.replace("\\", "/")
    if Path(path).is_absolute():
        return {"uri": Path(path).as_uri()}
    while posix.startswith("./"):
        posix = posix[2:]
    return {"uri": quote(str(PurePosixPath(posix)), safe="/", errors="surrogateescape"), "uriBaseId": SRCROOT}


def _directory_uri(path: Path) -> str:
    return path.resolve().as_uri().rstrip("/") + "/"


def _limit(text: str) -> str:
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"
