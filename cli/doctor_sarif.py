"""`doctor --format sarif`: the run's findings as the main command's SARIF log
(`cli.sarif.sarif_document`), plus what only a run has: the ``DOC`` codes' rule
descriptors, each finding's measured evidence and its static agreement, and the run's
own outcome under the run's properties.
"""

from __future__ import annotations

import json
from typing import Any

from autograd_fix.cli.doctor_fixes import DoctorFiles
from autograd_fix.cli.sarif import sarif_document
from autograd_fix.verification.doctor.outcome import TITLES, Diagnosis


def _doc_descriptor(code: str) -> dict[str, Any]:
    return {
        "id": code,
        "name": code.lower(),
        "shortDescription": {"text": TITLES[code]},
        "fullDescription": {"text": f"{TITLES[code]} (found by `autograd-fix doctor` in a run; no rule fixes it)"},
        "defaultConfiguration": {"level": "warning"},
        "properties": {"tags": ["pytorch", "autograd", "runtime"]},
    }


def doctor_sarif(
    diagnosis: Diagnosis, files: DoctorFiles, errors: list[tuple[str, str]], agreement: list[bool | None],
    fixed: set[int] | None = None,
) -> str:
    """The SARIF log of one doctor run; `fixed` holds `id()`s of the records `--apply` wrote."""
    summary = {"findings": len(diagnosis.findings), "status": diagnosis.status, "detail": diagnosis.detail}
    document = sarif_document(files.outcomes, errors, summary, fixed=fixed)
    run = document["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    known = {rule["id"]: index for index, rule in enumerate(rules)}
    for code in sorted({f.code for f in diagnosis.findings} - set(known)):
        if code in TITLES:
            known[code] = len(rules)
            rules.append(_doc_descriptor(code))
    # results follow the outcomes' records, which are the findings in file order
    order = [index for outcome in files.outcomes for index, record in _indexed(files, outcome.findings)]
    for result, index in zip(run["results"], order):
        finding = diagnosis.findings[index]
        if "ruleIndex" not in result and finding.code in known:
            result["ruleIndex"] = known[finding.code]
        properties = result.setdefault("properties", {})
        properties["evidence"] = finding.evidence
        properties["source"] = "run"
        properties["static"] = {True: "also found", False: "missed", None: "unknown"}[agreement[index]]
        if index in files.reasons:
            properties["noFix"] = files.reasons[index]
    run["properties"]["run"] = {"status": diagnosis.status, "detail": diagnosis.detail, "shortened": list(diagnosis.shortened),
                                "measures": diagnosis.measures, "isolated": diagnosis.isolated}
    return json.dumps(document, indent=2, default=str)


def _indexed(files: DoctorFiles, records: list) -> list[tuple[int, Any]]:
    by_id = {id(record): index for index, record in files.records.items()}
    return [(by_id[id(record)], record) for record in records]
