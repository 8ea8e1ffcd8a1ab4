"""From a doctor run's findings to fixes: each finding a rule can fix goes to that rule's
fix at that site, then through the main command's verification and composition.

Where the static rule reports the same code at the same site, its own finding's fix is
used; where it was silent, the run's site goes to the rule's `fix_at`
(`codemods.site_fixes`) through `Job.sites`. Either way the fix is an ordinary plan of
the file (`codemods.plans`): `verify_patches.verify_and_compose` verifies each patch on
top of those going in, composes the accepted ones once, and `apply_files.Applier`
writes only those. No second pipeline: this module only builds the records.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from autograd_fix.cli.config import ConfigError, ConfigLookup
from autograd_fix.cli.notebook import is_notebook, load_notebook
from autograd_fix.cli.runner import FileOutcome, FindingRecord, Job, check_file
from autograd_fix.codemods.registry import select_rules
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY
from autograd_fix.codemods.site_fixes import site_fix_reason
from autograd_fix.codemods.source import SourceError, read_source
from autograd_fix.verification.doctor.outcome import TITLES, Diagnosis, Finding

#: a finding in a file outside the project (a library) or one that cannot be read
OUTSIDE = "the file is outside the project or cannot be read"


@dataclass
class DoctorFiles:
    """The run's findings as records of the files they are in (one outcome per file, its
    records in the diagnosis's order), the jobs that checked them, and why a finding has
    no fix to offer."""

    outcomes: list[FileOutcome] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)
    #: index of the finding in the diagnosis -> its record
    records: dict[int, FindingRecord] = field(default_factory=dict)
    #: index of the finding -> why no fix is offered
    reasons: dict[int, str] = field(default_factory=dict)


def project_root(script: Path, diagnosis: Diagnosis) -> str | None:
    """The folder the findings' paths are relative to (the script's path ends with the
    diagnosis's relative name)."""
    if diagnosis.root:
        return diagnosis.root.rstrip(os.sep) + os.sep
    full = str(script.resolve())
    return full[: -len(diagnosis.script)] if full.endswith(diagnosis.script) else None


def _display(path: str) -> str:
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def doctor_files(
    diagnosis: Diagnosis,
    root: str | None,
    agreement: list[bool | None],
    lookup: ConfigLookup,
    *,
    fixes: bool,
    fix_texts: bool = False,
) -> DoctorFiles:
    """Records for every finding; with `fixes`, each finding's fix as a plan: the static
    finding's where the static rule agrees (`agreement`), the rule's fix at the run's site
    where it was silent."""
    files = DoctorFiles()
    by_path: dict[str, list[int]] = {}
    for index, finding in enumerate(diagnosis.findings):
        by_path.setdefault(finding.path, []).append(index)
    for relative, indexes in by_path.items():
        full = os.path.join(root, relative) if root and not os.path.isabs(relative) and not relative.startswith("..") else None
        if full is None or not os.path.isfile(full):
            outcome = FileOutcome(path=relative)
            for index in indexes:
                files.records[index] = _record(diagnosis.findings[index], relative, None)
                files.reasons[index] = OUTSIDE
                outcome.findings.append(files.records[index])
            files.outcomes.append(outcome)
            continue
        reason = None
        try:
            config = lookup.for_path(Path(full))
        except ConfigError as error:
            config, reason = None, f"configuration: {error}"
        select = tuple(config.select) if config is not None and config.select else None
        ignore = tuple((config.ignore + config.ignored_codes_for(Path(full))) if config is not None else ())
        rules = select_rules(list(select) if select else None, list(ignore))
        sites = tuple((diagnosis.findings[i].code, _fix_line(diagnosis.findings[i])) for i in indexes
                      if agreement[i] is False and any(rule.code == diagnosis.findings[i].code for rule in rules))
        job = Job(
            path=_display(full), select=select, ignore=ignore,
            unsafe_fixes=bool(config.unsafe_fixes) if config is not None else False,
            compute_fix=False, fix_diffs=False,
            target_torch=config.target_torch if config is not None else None,
            roles=config.roles if config is not None else DEFAULT_VOCABULARY,
            fix_texts=fix_texts, sites=sites if fixes else (),
        )
        checked = check_file(job) if fixes and config is not None else _read_only(job.path)
        outcome = FileOutcome(path=job.path, original=checked.original, encoding=checked.encoding, bom=checked.bom,
                              digest=checked.digest, error=checked.error, notebook=checked.notebook)
        taken: dict[str, int] = {}
        notebook = checked.notebook
        for index in indexes:
            finding = diagnosis.findings[index]
            # a notebook ran as its cells' program: its records are in (cell, line)
            located = notebook.locate(finding.line) if notebook is not None else None
            static = _matching(checked.findings, finding, agreement[index]) if fixes else None
            record = _record(finding, job.path, static, located)
            if static is not None and static.plan_id in taken:
                record.plan_id = None  # one fix, verified once: the first finding it fixes carries it
                files.reasons[index] = f"the same fix as the finding at line {taken[static.plan_id]}"
            elif static is not None and static.plan_id:
                taken[static.plan_id] = finding.line
            elif fixes:
                files.reasons[index] = (reason if config is None else checked.error or site_fix_reason(finding.code, rules))
            files.records[index] = record
            outcome.findings.append(record)
        files.outcomes.append(outcome)
        files.jobs.append(job)
    return files


def _read_only(path: str) -> FileOutcome:
    """The file's text without a check (a report: fingerprints and lines need the text)."""
    outcome = FileOutcome(path=path)
    try:
        if is_notebook(path):  # the cells' program, as the run ran it
            with open(path, "rb") as handle:
                notebook = load_notebook(handle.read())
            outcome.original, outcome.notebook = notebook.source.text, notebook.map
            return outcome
        source = read_source(path)
    except (SourceError, OSError) as error:
        outcome.error = str(error)
        return outcome
    outcome.original, outcome.encoding, outcome.bom, outcome.digest = source.text, source.encoding, source.bom, source.digest
    return outcome


def _fix_line(finding: Finding) -> int:
    """Where a fix built at the run's site goes: the forward's own statement when the
    finding names the evaluation function or loop around it (`fix_line`)."""
    return int(finding.evidence.get("fix_line") or finding.line)


def _matching(records: list[FindingRecord], finding: Finding, agrees: bool | None) -> FindingRecord | None:
    """The checked file's finding whose fix fixes `finding`: where the static rule agrees,
    its nearest finding of the same code; where it was silent, the site's own (the
    smallest span holding the line its fix is built at). A notebook's records are still
    in its cells' program lines here, as the run's findings are (cells are placed when
    reported)."""
    line = finding.line if agrees else _fix_line(finding)
    same = [r for r in records if r.code == finding.code and r.plan_id is not None]
    if agrees:
        return min(same, key=lambda r: abs(r.line - line), default=None)
    holding = [r for r in same if r.line <= line <= r.end_line]
    return min(holding, key=lambda r: (r.end_line - r.line, -r.line), default=None)


def _record(finding: Finding, path: str, fix: FindingRecord | None, located: tuple[int, int] | None = None) -> FindingRecord:
    cell, line = located if located is not None else (None, finding.line)
    return FindingRecord(
        path=path, line=line, column=1, end_line=line, end_column=1, cell=cell,
        code=finding.code, name=TITLES.get(finding.code, finding.code), message=finding.message,
        fix_applicability=fix.fix_applicability if fix else None, fix_applies=False,
        plan_id=fix.plan_id if fix else None, patched=fix.patched if fix else None,
        fix=fix.fix if fix else None, alternatives=fix.alternatives if fix else (),
    )


def fix_note(record: FindingRecord, reason: str | None) -> str:
    """What became of a finding's fix, in a few words (the text report's second line)."""
    if record.verification is not None:
        verb = "goes in" if record.fix_applies else "left out"
        return f"fix {verb}: {record.verification.summary()}"
    if record.plan_id is not None:
        return "fix: " + (reason or "not verified")
    return f"no fix offered: {reason or 'no rule fixes this'}"

