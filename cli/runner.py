"""Checks files (in a process pool when there are many) and returns plain results.

Workers return only picklable, plain data: the libcst trees stay in the worker.
"""

from __future__ import annotations

import os
import signal
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable

from autograd_fix.cli.notebook import NotebookMap, is_notebook, load_notebook
from autograd_fix.cli.notebook_lines import FileRegion, cell_source_index
from autograd_fix.codemods.source import (
    DEFAULT_MAX_FILE_BYTES,
    SourceError,
    SourceText,
    decode_source,
    read_bytes,
    read_source,
)
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, Vocabulary
from autograd_fix.codemods.torch_version import TorchVersion

if TYPE_CHECKING:
    from autograd_fix.verification.verdict import Verdict

# The engine (libcst and every rule) loads in `check_file`, once a file is checked: a
# run answered by the result cache never imports it.

#: below this many files a pool costs more (worker start-up) than it saves
POOL_THRESHOLD = 8
#: at most this many files go to a pool worker at once: an interrupt waits for the
#: chunks being checked, and `--apply` writes a file only once its chunk is back
MAX_CHUNK = 8
#: a notebook's file may be this many times `max-file-size` (outputs, images), its code not
NOTEBOOK_SIZE_FACTOR = 16


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
    #: the project's PyTorch floor (None: assume the newest)
    target_torch: TorchVersion | None = None
    #: the project's role vocabulary (`[tool.autograd-fix]` `<role>-names` / `-objects`)
    roles: Vocabulary = DEFAULT_VOCABULARY
    #: also return each fix applied alone as text (SARIF's `fixes`)
    fix_texts: bool = False
    #: a larger source file is a per-file error (`max-file-size`); a notebook's limit
    #: applies to its code cells, its JSON may be `NOTEBOOK_SIZE_FACTOR` times larger
    max_bytes: int | None = DEFAULT_MAX_FILE_BYTES
    #: (rule code, line) of bugs a run showed (`doctor`): each adds that rule's fix built
    #: at the site (`codemods.site_fixes`); not for notebooks
    sites: tuple[tuple[str, int], ...] = ()


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
    #: the fix's id within its file (`codemods.plans`); None when there is no fix
    plan_id: str | None = None
    #: the whole file with only this finding's fix applied (with `Job.fix_texts`)
    patched: str | None = None
    #: the verification stage's verdict on this finding's patch, once verified
    verification: Verdict | None = None
    #: notebooks: the 1-based cell `line` is in (set once positions are mapped to cells)
    cell: int | None = None
    #: notebooks: the finding's region in the `.ipynb` file's own lines (its JSON), for
    #: viewers that show the file (SARIF, GitHub annotations); None where it is unknown
    file_region: FileRegion | None = None

    @property
    def cell_prefix(self) -> str:
        """`cell 4, line 3: ` for a notebook finding, where a message is placed on the
        `.ipynb` file's own lines (SARIF, annotations); empty otherwise."""
        return f"cell {self.cell}, line {self.line}: " if self.cell is not None else ""

    @property
    def location(self) -> str:
        """`path:line:col`, or `path:cell N:line:col` in a notebook (as Ruff prints)."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.line}:{self.column}"


@dataclass
class FileOutcome:
    path: str
    findings: list[FindingRecord] = field(default_factory=list)
    original: str | None = None
    fixed: str | None = None
    encoding: str = "utf-8"
    bom: bool = False
    error: str | None = None
    #: sha256 of the bytes read: a write refuses to replace a file changed since
    digest: str | None = None
    #: notebooks: how `original` (the cells' program) maps back to the notebook
    notebook: NotebookMap | None = None


def check_file(job: Job) -> FileOutcome:
    """Read, lint and (optionally) fix one file; every failure becomes `error`."""
    from autograd_fix.cli.notebook_check import DROPPED_FIX_NOTE, check_notebook_program
    from autograd_fix.codemods.engine import EngineError, FixOptions, StatementCode, check_source, target_paths
    from autograd_fix.codemods.plans import plan_ids
    from autograd_fix.codemods.registry import select_rules

    outcome = FileOutcome(path=job.path)
    try:
        if is_notebook(job.path):
            raw_limit = job.max_bytes * NOTEBOOK_SIZE_FACTOR if job.max_bytes is not None else None
            raw = job.data if job.data is not None else read_bytes(job.path, raw_limit)
            notebook = load_notebook(raw)
            source, outcome.notebook = notebook.source, notebook.map
        else:
            source = decode_source(job.data) if job.data is not None else read_source(job.path, job.max_bytes)
        if job.max_bytes is not None and len(source.text) > job.max_bytes:
            raise SourceError(f"holds {len(source.text):,} characters of code, more than max-file-size ({job.max_bytes:,}); skipped")
    except SourceError as error:
        outcome.error = str(error)
        return outcome
    outcome.original, outcome.encoding, outcome.bom = source.text, source.encoding, source.bom
    outcome.digest = source.digest
    rules = select_rules(list(job.select) if job.select else None, list(job.ignore))
    options = FixOptions(unsafe_fixes=job.unsafe_fixes, target_torch=job.target_torch, roles=job.roles)
    dropped: set[int] = set()
    try:
        if outcome.notebook is not None:
            result, dropped = check_notebook_program(
                outcome.notebook, source.text, rules, job.path, options, job.compute_fix
            )
        else:
            result = check_source(source.text, rules, path=job.path, options=options, compute_fix=job.compute_fix, sites=job.sites)
    except EngineError as error:
        outcome.error = str(error)
        return outcome
    except RecursionError:
        outcome.error = "source nests too deeply to analyse"
        return outcome
    paths = codes = None
    fixes = [f.fix for f in result.findings if f.fix is not None]
    if (job.fix_diffs or job.fix_texts) and fixes and result.module is not None:
        # generating every statement's text is a codegen of the file: only for files with fixes
        paths = target_paths(result.module, fixes)
        codes = StatementCode(result.module)
    for finding, plan_id in zip(result.findings, plan_ids(result.findings)):
        diff = None
        fix = None if id(finding) in dropped else finding.fix
        if job.fix_diffs and fix is not None and result.module is not None:
            diff = _fix_diff(result.module, finding, job.path, outcome.notebook, source, paths, codes)
        patched = _patched(result.module, fix, paths, codes) if job.fix_texts and fix is not None and result.module else None
        outcome.findings.append(
            FindingRecord(
                path=job.path,
                line=finding.span.line,
                column=finding.span.column,
                end_line=finding.span.end_line,
                end_column=finding.span.end_column,
                code=finding.code,
                name=finding.name,
                message=finding.message + (DROPPED_FIX_NOTE if finding.fix is not fix else ""),
                fix_applicability=fix.applicability.value if fix else None,
                fix_applies=fix is not None and options.allows_finding(finding),
                fix_diff=diff,
                plan_id=plan_id if fix is not None else None,
                patched=patched,
            )
        )
    if outcome.notebook is not None and outcome.findings:
        _place_in_file(outcome.findings, outcome.notebook, raw)
    if result.fix_error:
        outcome.error = result.fix_error
    elif result.fixed is not None and result.fixed != source.text:
        outcome.fixed = result.fixed
    return outcome


def _place_in_file(records: list[FindingRecord], notebook: NotebookMap, raw: bytes) -> None:
    """Each notebook finding's region in the `.ipynb` file itself (program lines -> cell
    lines -> lines of the JSON text)."""
    index = cell_source_index(raw)
    if index is None:
        return
    for record in records:
        (cell, line), (_, end_line) = notebook.locate_span(record.line), notebook.locate_span(record.end_line)
        record.file_region = index.region(cell, line, record.column, end_line, record.end_column)


def _fix_diff(module, finding, path: str, notebook: NotebookMap | None, source: SourceText, paths, codes) -> str | None:
    """The finding's fix alone as a diff: of the file, or of the notebook's cells."""
    from autograd_fix.codemods.engine import single_fix_diff

    if notebook is None:
        return single_fix_diff(module, finding, path, paths, codes, bom=source.bom)
    patched = _patched(module, finding.fix, paths, codes)
    return notebook.diff(source.text, patched, path) if patched is not None else None


def _patched(module, fix, paths, codes) -> str | None:
    from autograd_fix.codemods.engine import apply_fixes

    try:
        return apply_fixes(module, [fix], paths, codes)
    except Exception:  # a fix that cannot be applied alone has nothing to show
        return None


def run_jobs(
    jobs: list[Job],
    workers: int,
    on_done: Callable[[int], None] | None = None,
    on_outcome: Callable[[FileOutcome], None] | None = None,
) -> list[FileOutcome]:
    """Outcomes in the order of `jobs`; `on_done(1)` is called as each file finishes
    (for a progress bar), then `on_outcome(outcome)` (`--apply` writes it there and
    then, not at the end of the run)."""
    if workers <= 1 or len(jobs) < POOL_THRESHOLD:
        return _collect(map(check_file, jobs), on_done, on_outcome)
    workers = min(workers, len(jobs), os.cpu_count() or 1)
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_leave_interrupts_to_the_parent)
    try:
        results = pool.map(check_file, jobs, chunksize=max(1, min(MAX_CHUNK, len(jobs) // (workers * 4))))
        return _collect(results, on_done, on_outcome)
    finally:  # interrupted: drop the queued files instead of checking them all first
        pool.shutdown(wait=True, cancel_futures=True)


def _leave_interrupts_to_the_parent() -> None:
    """Pool workers ignore Ctrl-C: the terminal sends it to the whole process group,
    and the parent alone decides how the run stops (no traceback from each worker).
    SIGTERM ends a worker as it would any process (not the parent's handler, which
    a fork inherits)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _collect(
    results: Iterable[FileOutcome],
    on_done: Callable[[int], None] | None,
    on_outcome: Callable[[FileOutcome], None] | None,
) -> list[FileOutcome]:
    outcomes = []
    for outcome in results:
        outcomes.append(outcome)
        if on_done is not None:
            on_done(1)
        if on_outcome is not None:
            on_outcome(outcome)
    return outcomes
