"""Checks files (in a process pool when there are many) and returns plain results.

Workers return only picklable, plain data: the libcst trees stay in the worker.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Iterable

from autograd_fix.codemods.engine import (
    EngineError,
    FixOptions,
    apply_fixes,
    check_source,
    finding_key,
    parse_module,
    run_rules,
    single_fix_diff,
)
from autograd_fix.codemods.registry import select_rules
from autograd_fix.codemods.source import SourceError, SourceText, decode_source, read_source
from autograd_fix.codemods.torch_version import TorchVersion

#: below this many files a pool costs more (worker start-up) than it saves
POOL_THRESHOLD = 8


@dataclass(frozen=True)
class Job:
    """What to do with one file; `text` is set for stdin input."""

    path: str
    select: tuple[str, ...] | None
    ignore: tuple[str, ...]
    unsafe_fixes: bool
    compute_fix: bool
    fix_diffs: bool
    data: bytes | None = None
    #: also return each fix applied alone (the patches verification runs)
    patches: bool = False
    #: verification's per-finding decisions, keyed (code, line, column)
    decisions: tuple[tuple[tuple[str, int, int], bool], ...] = ()
    #: the project's PyTorch floor (None: assume the newest)
    target_torch: TorchVersion | None = None


@dataclass
class FindingRecord:
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    name: str
    message: str
    fix_applicability: str | None
    #: the fix would be applied with the current options
    fix_applies: bool
    fix_diff: str | None = None
    #: the whole file with only this finding's fix applied (for verification)
    patched: str | None = None
    #: {"verdict", "reason", "evidence"} once verified
    verification: dict | None = None


@dataclass
class FileOutcome:
    path: str
    findings: list[FindingRecord] = field(default_factory=list)
    original: str | None = None
    fixed: str | None = None
    encoding: str = "utf-8"
    bom: bool = False
    error: str | None = None


def check_file(job: Job) -> FileOutcome:
    """Read, lint and (optionally) fix one file; every failure becomes `error`."""
    outcome = FileOutcome(path=job.path)
    try:
        source: SourceText = decode_source(job.data) if job.data is not None else read_source(job.path)
    except SourceError as error:
        outcome.error = str(error)
        return outcome
    outcome.original, outcome.encoding, outcome.bom = source.text, source.encoding, source.bom
    rules = select_rules(list(job.select) if job.select else None, list(job.ignore))
    options = FixOptions(unsafe_fixes=job.unsafe_fixes, decisions=dict(job.decisions), target_torch=job.target_torch)
    try:
        result = check_source(source.text, rules, path=job.path, options=options, compute_fix=job.compute_fix)
    except EngineError as error:
        outcome.error = str(error)
        return outcome
    except RecursionError:
        outcome.error = "source nests too deeply to analyse"
        return outcome
    for finding in result.findings:
        diff = patched = None
        if job.fix_diffs and finding.fix is not None and result.module is not None:
            diff = single_fix_diff(result.module, finding, job.path)
        if job.patches and finding.fix is not None and result.module is not None:
            patched = _patched(result.module, finding)
        outcome.findings.append(
            FindingRecord(
                path=job.path,
                line=finding.span.line,
                column=finding.span.column,
                end_line=finding.span.end_line,
                end_column=finding.span.end_column,
                code=finding.code,
                name=finding.name,
                message=finding.message,
                fix_applicability=finding.fix.applicability.value if finding.fix else None,
                fix_applies=options.allows_finding(finding),
                fix_diff=diff,
                patched=patched,
            )
        )
    if result.fix_error:
        outcome.error = result.fix_error
    elif result.fixed is not None and result.fixed != source.text:
        outcome.fixed = result.fixed
    return outcome


def stacked_patch(job: Job, original: str, base: list[tuple[str, int, int]], target: tuple[str, int, int]) -> tuple[str, str] | None:
    """(text with the `base` findings' fixes, the same plus `target`'s fix), or None.

    Fixes are edits on the original tree, so several compose in one pass; this lets a
    file's patches be verified one after the other, each on top of those accepted.
    """
    rules = select_rules(list(job.select) if job.select else None, list(job.ignore))
    module = parse_module(original)
    by_key = {finding_key(f): f for f in run_rules(module, rules, job.path, original, job.target_torch) if f.fix is not None}
    if target not in by_key or any(key not in by_key for key in base):
        return None
    base_fixes = [by_key[key].fix for key in base]
    try:
        return apply_fixes(module, base_fixes), apply_fixes(module, [*base_fixes, by_key[target].fix])
    except Exception:
        return None


def _patched(module, finding) -> str | None:
    try:
        return apply_fixes(module, [finding.fix])
    except Exception:  # a fix that cannot be applied alone is not verified (nor applied)
        return None


def run_jobs(jobs: list[Job], workers: int, on_done: Callable[[int], None] | None = None) -> list[FileOutcome]:
    """Outcomes in the order of `jobs`; `on_done(1)` is called as each file finishes
    (for a progress bar)."""
    if workers <= 1 or len(jobs) < POOL_THRESHOLD:
        return _collect(map(check_file, jobs), on_done)
    workers = min(workers, len(jobs), os.cpu_count() or 1)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return _collect(pool.map(check_file, jobs, chunksize=max(1, len(jobs) // (workers * 4))), on_done)


def _collect(results: Iterable[FileOutcome], on_done: Callable[[int], None] | None) -> list[FileOutcome]:
    outcomes = []
    for outcome in results:
        outcomes.append(outcome)
        if on_done is not None:
            on_done(1)
    return outcomes
