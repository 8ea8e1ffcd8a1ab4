"""Checks files (in a process pool when there are many) and returns plain results.

Workers return only picklable, plain data: the libcst trees stay in the worker.
"""

from __future__ import annotations

import os
import signal
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
from autograd_fix.codemods.torch_api import uses_torch
from autograd_fix.codemods.prefilters import triggered_codes
from autograd_fix.codemods.python_syntax import syntax_problem
from autograd_fix.codemods.registry import selected_codes
from autograd_fix.codemods.torch_version import TorchVersion

if TYPE_CHECKING:
    from autograd_fix.codemods.engine import FixOptions
    from autograd_fix.codemods.model import Finding, TextFix
    from autograd_fix.codemods.project_index import ProjectIndex
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
    #: at the site (`codemods.site_fixes`); a notebook's are lines of its cells' program
    sites: tuple[tuple[str, int], ...] = ()
    #: the run's project index (`codemods.project_index`), built once for all jobs
    project: ProjectIndex | None = None


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
    #: the fix as data (text edits on the text its round checked), and its later candidates
    fix: TextFix | None = field(default=None, repr=False)
    alternatives: tuple[TextFix, ...] = field(default=(), repr=False)
    #: 1 for a finding of the file as it is; k > 1 for a follow-on that appeared only once
    #: round k-1's fixes went in (its position mapped back to the original text)
    round: int = 1

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
    #: per-file notes of the fix rounds (a fix dropped because its result did not compile)
    notes: list[str] = field(default_factory=list)


def check_file(job: Job) -> FileOutcome:
    """Read, lint and (optionally) fix one file; every failure becomes `error`."""
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
    admitted = None
    if outcome.notebook is None and not job.sites:
        admitted = triggered_codes(selected_codes(job.select, job.ignore), source.text)
        if not admitted:
            # no selected rule can fire (`engine.check_source` answers the same, from the
            # same prefilters and the same syntax check): libcst and the rules are not
            # loaded for it (start-up of a run on small files)
            outcome.error = syntax_problem(source.text) if uses_torch(source.text) else None
            return outcome
    from autograd_fix.cli.notebook_check import check_notebook_program
    from autograd_fix.codemods.engine import EngineError, FixOptions, check_source
    from autograd_fix.codemods.plans import plan_ids
    from autograd_fix.codemods.registry import lazy_rules

    rules = lazy_rules(job.select, job.ignore)
    options = FixOptions(unsafe_fixes=job.unsafe_fixes, target_torch=job.target_torch, roles=job.roles, project=job.project)
    dropped: set[int] = set()
    try:
        if outcome.notebook is not None:
            result, dropped = check_notebook_program(
                outcome.notebook, source.text, rules, job.path, options, job.compute_fix, job.sites
            )
        else:
            result = check_source(
                source.text, rules, path=job.path, options=options, compute_fix=job.compute_fix, sites=job.sites, admitted=admitted
            )
    except EngineError as error:
        outcome.error = str(error)
        return outcome
    except RecursionError:
        outcome.error = "source nests too deeply to analyse"
        return outcome
    for finding, plan_id in zip(result.findings, plan_ids(result.findings)):
        fix = None if id(finding) in dropped else finding.fix
        record = _record(job, finding, fix, plan_id, options, outcome.notebook, source)
        if result.fixed is not None:  # the fixes were computed: say which went in
            record.fix_applies = id(finding) in result.applied
        outcome.findings.append(record)
    for follow_on in result.follow_ons:
        record = _record(job, follow_on.finding, follow_on.finding.fix, None, options, None, source, text=False)
        record.round, record.fix_applies = follow_on.round, follow_on.applied
        record.message += follow_on_note(follow_on.round)
        outcome.findings.append(record)
    outcome.notes = list(result.notes)
    if outcome.notebook is not None and outcome.findings:
        _place_in_file(outcome.findings, outcome.notebook, raw)
    if result.fix_error:
        outcome.error = result.fix_error
    elif result.fixed is not None and result.fixed != source.text:
        outcome.fixed = result.fixed
    return outcome


def follow_on_note(round_number: int) -> str:
    """What a follow-on finding's message says: it is not in the file as it stands."""
    return f" (round {round_number}: found once the earlier fixes went in)"


def _place_in_file(records: list[FindingRecord], notebook: NotebookMap, raw: bytes) -> None:
    """Each notebook finding's region in the `.ipynb` file itself (program lines -> cell
    lines -> lines of the JSON text)."""
    index = cell_source_index(raw)
    if index is None:
        return
    for record in records:
        (cell, line), (_, end_line) = notebook.locate_span(record.line), notebook.locate_span(record.end_line)
        record.file_region = index.region(cell, line, record.column, end_line, record.end_column)


def _record(
    job: Job, finding: Finding, fix, plan_id: str | None, options: FixOptions, notebook: NotebookMap | None,
    source: SourceText, text: bool = True,
) -> FindingRecord:
    """A finding as a plain record; with `text`, its fix's diff and patched text as the job
    asks (a follow-on's fix is on a later round's text: it has neither)."""
    from autograd_fix.cli.notebook_check import DROPPED_FIX_NOTE
    from autograd_fix.codemods.engine import single_fix_diff
    from autograd_fix.codemods.model import TextFix
    from autograd_fix.codemods.text_fixes import apply_fix

    assert fix is None or isinstance(fix, TextFix)
    patched = apply_fix(source.text, fix) if text and fix is not None and (job.fix_diffs or job.fix_texts) else None
    diff = None
    if job.fix_diffs and patched is not None:
        diff = single_fix_diff(source.text, fix, job.path, bom=source.bom) if notebook is None else notebook.diff(source.text, patched, job.path)
    return FindingRecord(
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
        patched=patched if job.fix_texts else None,
        fix=fix if text else None,
        alternatives=tuple(a for a in finding.alternatives if isinstance(a, TextFix)) if text and fix is not None else (),
    )


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
    from concurrent.futures import ProcessPoolExecutor  # multiprocessing: only for parallel runs

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
