"""Verification of every candidate patch before `--diff` shows it or `--apply` writes it.

Each finding's fix, applied alone to its file, is one patch; patches run through the
verification stage (original vs patched, under the rule's contract) on one warm worker.
Policy: a rejected patch is never applied; a safe fix is applied unless rejected; an
unsafe fix is applied when accepted, or when unverified only with `--unsafe-fixes`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from autograd_fix.cli.runner import FileOutcome, FindingRecord, Job, run_jobs, stacked_patch
from autograd_fix.codemods.registry import rule_by_code


@dataclass(frozen=True)
class VerifySettings:
    device: str = "auto"
    timeout: float = 20.0
    jobs: int | None = None


def decide(record: FindingRecord, unsafe_fixes: bool) -> bool:
    """Whether `record`'s fix may be applied, given its verification verdict."""
    verdict = (record.verification or {}).get("verdict")
    if verdict == "rejected" or record.patched is None:
        return False
    if record.fix_applicability == "safe":
        return True
    return verdict == "accepted" or unsafe_fixes


def verify_records(
    outcomes: list[FileOutcome], jobs: list[Job], settings: VerifySettings, unsafe_fixes: bool,
    progress_console: Console | None,
) -> None:
    """Run every candidate patch and store its verdict on the record.

    A file's patches are verified one after another, in source order, each on top of the
    ones already going in (so a second bug is judged once the first is fixed, not against
    an original that still fails on the first); different files go in parallel.
    """
    from autograd_fix.verification import Verifier, WorkerError, verify_many
    from autograd_fix.verification.shadow import ShadowCopies

    queues = {o.path: [r for r in o.findings if r.fix_applicability is not None and r.patched is not None]
              for o in outcomes if not o.error}
    queues = {path: records for path, records in queues.items() if records}
    total = sum(len(records) for records in queues.values())
    if not total:
        return
    outcome_by_path = {o.path: o for o in outcomes}
    job_by_path = {job.path: job for job in jobs}
    going_in: dict[str, list[tuple[str, int, int]]] = {path: [] for path in queues}
    try:
        verifier = Verifier()
    except WorkerError as error:
        for records in queues.values():
            for record in records:
                record.verification = {"verdict": "unverified", "reason": f"verification worker unavailable: {error}", "evidence": {}}
        return
    shadows = ShadowCopies()  # each project copied once for the whole run
    try:
        with _progress(progress_console, total) as (progress, task):
            while queues:
                batch: list[tuple[FindingRecord, dict]] = []
                for path in list(queues):
                    record = queues[path].pop(0)
                    if not queues[path]:
                        del queues[path]
                    pair = _pair(record, outcome_by_path[path], job_by_path[path], going_in[path])
                    if pair is None:
                        record.verification = {"verdict": "unverified", "reason": "the fix cannot be applied on top of the others", "evidence": {}}
                        continue
                    batch.append((record, pair))
                verdicts = verify_many(
                    [pair for _, pair in batch], jobs=settings.jobs, device=settings.device,
                    timeout=settings.timeout, verifier=verifier, shadows=shadows,
                ) if batch else []
                for (record, _), verdict in zip(batch, verdicts):
                    record.verification = {
                        "verdict": verdict.verdict,
                        "reason": verdict.reason,
                        "driver": verdict.driver,
                        "evidence": {unit.name: unit.evidence for unit in verdict.units},
                    }
                    if decide(record, unsafe_fixes):
                        going_in[record.path].append((record.code, record.line, record.column))
                if progress is not None:
                    progress.advance(task, len(batch))
    finally:
        verifier.close()
        shadows.close()


def _pair(record: FindingRecord, outcome: FileOutcome, job: Job, going_in: list[tuple[str, int, int]]) -> dict | None:
    rule = rule_by_code(record.code)
    if going_in:
        texts = stacked_patch(job, outcome.original or "", going_in, (record.code, record.line, record.column))
        if texts is None:
            return None
        before, after = texts
    else:
        before, after = outcome.original, record.patched
    return {
        "original": before,
        "rewritten": after,
        "path": record.path,
        "rule": record.code,
        "checks": tuple(rule.contract.checks) if rule else None,
    }


class _NoProgress:
    def __enter__(self):
        return None, None

    def __exit__(self, *exc: object) -> None:
        return None


class _Progress:
    def __init__(self, console: Console, total: int) -> None:
        self.progress = Progress(
            TextColumn("verifying patches"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, transient=True,
        )
        self.total = total

    def __enter__(self):
        self.progress.start()
        return self.progress, self.progress.add_task("verify", total=self.total)

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def _progress(console: Console | None, total: int):
    if console is None or not console.is_terminal:
        return _NoProgress()
    return _Progress(console, total)


def decisions_for(outcome: FileOutcome, unsafe_fixes: bool) -> tuple[tuple[tuple[str, int, int], bool], ...]:
    """The engine's per-finding decisions for one file, from its verdicts."""
    return tuple(
        ((record.code, record.line, record.column), decide(record, unsafe_fixes))
        for record in outcome.findings
        if record.fix_applicability is not None
    )


def verify_and_refix(
    outcomes: list[FileOutcome],
    jobs: list[Job],
    settings: VerifySettings,
    unsafe_fixes: bool,
    workers: int,
    progress_console: Console | None,
) -> list[FileOutcome]:
    """Verify every patch, then compute each file's fixed text from the verdicts."""
    verify_records(outcomes, jobs, settings, unsafe_fixes, progress_console)
    job_by_path = {job.path: job for job in jobs}
    again = [
        dataclasses.replace(
            job_by_path[outcome.path],
            compute_fix=True,
            patches=False,
            decisions=decisions_for(outcome, unsafe_fixes),
        )
        for outcome in outcomes
        if not outcome.error and any(r.fix_applicability for r in outcome.findings)
    ]
    refixed = {outcome.path: outcome for outcome in run_jobs(again, workers)}
    merged = []
    for outcome in outcomes:
        new = refixed.get(outcome.path)
        if new is None:
            merged.append(outcome)
            continue
        verdicts = {(r.code, r.line, r.column): r.verification for r in outcome.findings}
        for record in new.findings:
            record.verification = verdicts.get((record.code, record.line, record.column))
        merged.append(new)
    return merged
