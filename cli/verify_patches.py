"""Verification of every candidate patch before `--diff` shows it or `--apply` writes it.

Each finding's fix is one patch plan (`codemods.plans`), made data by the check
(`FindingRecord.fix`): nothing is parsed again to plan it. A file's patches are verified
one after another, each composed on top of the plans already going in (the one
composition step, `codemods.text_fixes.compose`). A patch that collides with one going in
is deferred; once a round's patches are decided, the rules run again on the composed
text (one parse, which also proves the text parses): deferred findings found again are
verified in the next round, and findings that only the new text has are follow-ons
(`FindingRecord.round`), announced and verified like any other. The same rounds as the
static `--no-verify` path (`codemods.fix_rounds`), so with every patch accepted both
write the same bytes.
Policy: only what verification accepted is applied. A rejected patch never is; an
unverified one (verification could not decide: the run needs the network, timed out, the
changed code never ran) only with `--unverified-fixes`, and an unverified unsafe one only
with `--unsafe-fixes` as well.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable

from rich.console import Console
from rich.text import Text

from autograd_fix.cli.notebook_check import localize_verification
from autograd_fix.cli.progress import progress_bar
from autograd_fix.cli.runner import FileOutcome, FindingRecord, Job, follow_on_note
from autograd_fix.config_files import ConfigChoice
from autograd_fix.codemods.engine import MAX_FIX_ROUNDS, EngineError, FixOptions, analyse_text
from autograd_fix.codemods.model import Finding, TextEdit, TextFix
from autograd_fix.codemods.plans import FilePlans, FixDeferred, PlanEntry, plan_ids
from autograd_fix.codemods.text_fixes import LineIndex, compose, map_offset, span_back
from autograd_fix.codemods.registry import rule_by_code, select_rules
from autograd_fix.codemods.safe_text import printable
from autograd_fix.codemods.semantic.roles import Vocabulary
from autograd_fix.verification.trust import UserSettings
from autograd_fix.verification.verdict import Status, Verdict

if TYPE_CHECKING:
    from autograd_fix.verification import Verifier


@dataclass(frozen=True)
class VerifySettings:
    device: str = "auto"
    timeout: float = 20.0
    jobs: int | None = None
    #: the user's own safety settings (flags over their configuration file; None: the file alone)
    user: UserSettings | None = None
    #: also apply fixes whose verification could not decide (`--unverified-fixes`)
    unverified_fixes: bool = False
    #: `--config PATH` / `KEY=VALUE` / `--isolated`: verification reads the settings the checks read
    config: ConfigChoice | None = None


class ConfigNotes:
    """Says each note about a project's configuration (a setting that was ignored, a
    file that was not read) once per run of the tool, on stderr."""

    def __init__(self) -> None:
        self._said: set[str] = set()

    def say(self, verdict: Verdict) -> None:
        for note in verdict.notes:
            if note not in self._said:
                self._said.add(note)
                Console(stderr=True, highlight=False, soft_wrap=True).print(
                    Text.assemble(("warning:", "yellow"), f" {printable(note)}")
                )


def say_interpreter(verifier: "Verifier") -> None:
    """Say on stderr which Python runs verification when it is not autograd-fix's own,
    and which found environments it passed over (see `verification.interpreter`)."""
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    for note in verifier.interpreter.notes:
        console.print(Text.assemble(("warning:", "yellow"), f" {printable(note)}"))
    if not verifier.interpreter.own:
        console.print(Text(f"note: verifying with {printable(verifier.interpreter.describe())}"))


def say_isolation_notice(verifier: "Verifier | None") -> None:
    """Warn on stderr, once per run of the tool, that verification runs went unisolated
    (the machine has no user namespaces); `Verifier.isolation_notice` keeps the once."""
    notice = verifier.isolation_notice() if verifier is not None else None
    if notice:
        Console(stderr=True, highlight=False, soft_wrap=True, emoji=False).print(f"[yellow]warning:[/yellow] {notice}", markup=True)


def decide(record: FindingRecord, unsafe_fixes: bool, unverified_fixes: bool = False) -> bool:
    """Whether `record`'s fix may be applied, given its verification verdict: when
    accepted; when unverified only if the user opted in (`unverified_fixes`, and for an
    unsafe fix `unsafe_fixes` too); never when rejected."""
    if record.plan_id is None or record.verification is None:
        return False
    verdict = record.verification.verdict
    if verdict is Status.ACCEPTED:
        return True
    if verdict is Status.REJECTED or not unverified_fixes:
        return False
    return record.fix_applicability == "safe" or unsafe_fixes


#: the reason given when a fix cannot be composed with the ones going in (such a patch is
#: never verified, so never decided on, and never goes in)
CANNOT_COMPOSE = "the fix cannot be applied on top of the others"
#: the reason given to a deferred finding that the next round no longer found
RESOLVED_BY_OTHERS = "no longer found once the fixes it collided with went in"


def _unverified(record: FindingRecord, reason: str) -> Verdict:
    return Verdict(Status.UNVERIFIED, reason, record.code, ())


class _FileQueue:
    """One file's patches in source order, its plans, the ids going in so far, and the
    project's role settings (its `<role>-names` bind the names a run needs, as they
    decided the findings)."""

    def __init__(
        self, outcome: FileOutcome, plans: FilePlans, records: list[FindingRecord], roles: Vocabulary, unsafe_fixes: bool = False,
    ) -> None:
        self.outcome = outcome
        #: the file's own `unsafe-fixes` setting (each file has its configuration's)
        self.unsafe_fixes = unsafe_fixes
        self.plans = plans
        self.records = records
        self.roles = roles.additions()
        self.going_in: list[str] = []
        self._composed: dict[tuple[str, ...], str] = {}
        #: per record (by id): the candidate fix being tried (index into its candidates)
        #: and the verdicts of the candidates rejected before it
        self.candidate: dict[int, int] = {}
        self.rejected: dict[int, list[tuple[str, Verdict]]] = {}
        #: per record: the plan id that went in (a later candidate's `ID~k`)
        self.chosen: dict[int, str] = {}
        #: the round being verified, the records deferred in it (they collide with a patch
        #: going in), and every finding of the round's text as (code, line, column,
        #: record): a later round tells a follow-on from a finding it already had
        self.round = 1
        self.deferred: list[FindingRecord] = []
        self.current_findings: list[tuple[str, int, int, FindingRecord | None]] = [
            (r.code, r.line, r.column, r) for r in outcome.findings if r.round == 1
        ]
        #: each finished round's edits (to map a follow-on's position back to the file)
        self.history: list[tuple[TextEdit, ...]] = []
        #: records whose fix went in, over all rounds, and the text once every round is done
        self.applied: set[int] = set()
        self.final_text: str | None = None

    def candidates(self, record: FindingRecord) -> list[str]:
        plan_id = record.plan_id or ""
        return self.plans.candidates.get(plan_id, [plan_id])

    def current(self, record: FindingRecord) -> str:
        """The plan id of the candidate fix of `record` now being tried."""
        return self.candidates(record)[self.candidate.get(id(record), 0)]

    def next_candidate(self, record: FindingRecord, verdict: Verdict) -> bool:
        """After `verdict` rejected the current candidate (or it could not be composed):
        move to the next one (True), or False when none is left."""
        index = self.candidate.get(id(record), 0)
        failed = verdict.verdict is Status.REJECTED or verdict.reason == CANNOT_COMPOSE
        if not failed or index + 1 >= len(self.candidates(record)):
            return False
        self.rejected.setdefault(id(record), []).append((self.current(record), verdict))
        self.candidate[id(record)] = index + 1
        return True

    def explain(self, record: FindingRecord, verdict: Verdict) -> Verdict:
        """`verdict` of the candidate tried last, saying which candidate it was and why
        the earlier ones were rejected (unchanged for a finding with one fix)."""
        candidates = self.candidates(record)
        if len(candidates) < 2:
            return verdict
        index = self.candidate.get(id(record), 0)
        current = candidates[index]
        head = f"candidate fix {index + 1} of {len(candidates)} ({self.plans.description(current)})"
        earlier = "; ".join(
            f"candidate {candidates.index(plan) + 1} ({self.plans.description(plan)}) rejected: {old.reason}"
            for plan, old in self.rejected.get(id(record), [])
        )
        reason = f"{head}: {verdict.reason}" + (f" [{earlier}]" if earlier else "")
        return replace(verdict, reason=reason)

    def _compose(self, ids: list[str]) -> str:
        """The file with `ids` applied; this patch's "before" is the last one's "before"
        or "after", so only the newest two are kept (composing validates the whole file)."""
        key = tuple(ids)
        text = self._composed.pop(key, None)
        if text is None:
            text = self.plans.compose(ids)
            self._composed = dict(list(self._composed.items())[-1:])
        self._composed[key] = text  # most recently used last
        return text

    def pair(self, record: FindingRecord) -> dict | None:
        """The verification request of `record`'s patch on top of those going in; None
        when it cannot be composed. Raises FixDeferred when it collides with one going in."""
        try:
            before = self._compose(self.going_in)
            after = self._compose([*self.going_in, self.current(record)])
        except FixDeferred:
            raise
        except EngineError:
            return None
        rule = rule_by_code(record.code)
        # line numbers in reasons count in the text that was checked (stdin, an editor
        # buffer), not in the file on disk; a notebook's are mapped to cells afterwards
        user_text = self.outcome.original if self.outcome.notebook is None else None
        return {
            "original": before,
            "rewritten": after,
            "user_text": user_text,
            "path": record.path,
            "rule": record.code,
            "checks": tuple(rule.contract.checks) if rule else None,
            "roles": self.roles,
            # the masked IPython lines, for IPython's transformer where the runs have it
            "ipython_lines": dict(self.outcome.notebook.runnable) if self.outcome.notebook is not None else None,
        }


def _entry(record: FindingRecord) -> PlanEntry | None:
    if record.plan_id is None or record.fix is None:
        return None
    return PlanEntry(record.plan_id, record.code, record.line, record.column, record.fix, record.alternatives)


def _queues(outcomes: list[FileOutcome], jobs: list[Job]) -> list[_FileQueue]:
    """One queue per file with fixes, its plans made from the fixes the check carried."""
    job_by_path = {job.path: job for job in jobs}
    queues = []
    for outcome in outcomes:
        records = [r for r in outcome.findings if r.plan_id is not None]
        if outcome.error or not records or outcome.original is None:
            continue
        job = job_by_path[outcome.path]
        entries = {}
        for record in records:
            entry = _entry(record)
            if entry is None:  # a record made without its fix (not by `check_file`)
                record.verification = _unverified(record, "the fix could not be planned")
            elif entry.id not in entries:
                entries[entry.id] = entry
        plans = FilePlans(outcome.original, entries.values())
        queues.append(_FileQueue(outcome, plans, [r for r in records if r.plan_id in entries], job.roles, job.unsafe_fixes))
    return queues


def _unavailable(queues: list[_FileQueue], error: Exception) -> None:
    """Every record of `queues` unverified: no worker could be started (said once)."""
    from autograd_fix.verification.interpreter import unavailable_reason

    said = ConfigNotes()
    for queue in queues:
        for record in queue.records:
            record.verification = replace(_unverified(record, unavailable_reason(error)), notes=getattr(error, "notes", ()))
            said.say(record.verification)


def verify_records(
    queues: list[_FileQueue], settings: VerifySettings, unsafe_fixes: bool, progress_console: Console | None,
    verifier: Verifier | None = None,
    on_file_done: Callable[[_FileQueue], None] | None = None,
    on_patch: Callable[[int, int], None] | None = None,
    announce: bool | None = None,
) -> None:
    """Run every candidate patch and store its verdict on the record; `on_file_done`
    hears of each file as soon as its last patch has a verdict, `on_patch(done, total)`
    of each patch (the language server's progress).

    A file's patches are verified one after another, in source order, each on top of the
    ones already going in (so a second bug is judged once the first is fixed, not against
    an original that still fails on the first); different files go in parallel. A
    long-lived caller (the language server) passes its warm `verifier` and keeps it open;
    `announce` (default: whether the verifier is this call's own) says isolation notices
    and configuration notes on stderr.
    """
    from autograd_fix.verification import Verifier, WorkerError, api
    from autograd_fix.verification.shadow import ShadowCopies
    from autograd_fix.verification.source_memo import SourceMemo

    total = sum(len(queue.records) for queue in queues)
    if not total:
        return
    own = verifier is None
    try:
        verifier = verifier or Verifier.for_project(queues[0].outcome.path, settings.user, choice=settings.config)
    except WorkerError as error:
        _unavailable(queues, error)
        return
    if own:
        say_interpreter(verifier)
    speak = own if announce is None else announce
    pending = {id(queue): list(queue.records) for queue in queues}
    busy: set[int] = set()  # files with a patch being verified (one at a time per file)
    shadows = ShadowCopies(parent=getattr(verifier, "scratch", None))  # each project copied once for the whole run
    memo = SourceMemo()  # each statement analysed once for the whole run
    notes = ConfigNotes()
    try:
        with progress_bar(progress_console, total, "verifying patches") as advance:

            decided = [0]

            def settled(queue: _FileQueue) -> None:
                advance(1)
                decided[0] += 1
                if on_patch is not None:
                    on_patch(decided[0], total)
                if not pending[id(queue)] and id(queue) not in busy and on_file_done is not None:
                    on_file_done(queue)

            def next_pair() -> tuple[tuple[_FileQueue, FindingRecord, dict], dict] | None:
                """The next patch of the first file that is free: earlier files finish
                (and are written) first, instead of all at the very end."""
                for queue in queues:
                    while pending[id(queue)] and id(queue) not in busy:
                        record = pending[id(queue)].pop(0)
                        try:
                            pair = queue.pair(record)
                        except FixDeferred:  # verified in the next round, on the new text
                            queue.deferred.append(record)
                            settled(queue)
                            continue
                        if pair is None:
                            verdict = _unverified(record, CANNOT_COMPOSE)
                            if queue.next_candidate(record, verdict):
                                pending[id(queue)].insert(0, record)
                                continue
                            record.verification = queue.explain(record, verdict)
                            settled(queue)
                            continue
                        busy.add(id(queue))
                        return (queue, record, pair), pair
                return None

            def on_verdict(key: tuple[_FileQueue, FindingRecord, dict], verdict: Verdict) -> None:
                if speak:  # a long-lived caller (the language server) says it its own way
                    say_isolation_notice(verifier)
                    notes.say(verdict)
                queue, record, pair = key
                notebook = queue.outcome.notebook
                if notebook is not None:  # the runs saw the cells' program: name cells
                    verdict = localize_verification(verdict, notebook, pair)
                busy.discard(id(queue))
                if queue.next_candidate(record, verdict):
                    pending[id(queue)].insert(0, record)  # the rule's next candidate fix
                    return
                record.verification = queue.explain(record, verdict)
                if decide(record, unsafe_fixes or queue.unsafe_fixes, settings.unverified_fixes):
                    queue.chosen[id(record)] = queue.current(record)
                    queue.going_in.append(queue.current(record))
                    queue.applied.add(id(record))
                settled(queue)

            api.verify_stream(
                next_pair, on_verdict, verifier=verifier, shadows=shadows, memo=memo,
                jobs=settings.jobs, device=settings.device, timeout=settings.timeout, user=settings.user,
                config=settings.config,
            )
    finally:
        if own:
            verifier.close()
        shadows.close()


def verify_and_compose(
    outcomes: list[FileOutcome],
    jobs: list[Job],
    settings: VerifySettings,
    unsafe_fixes: bool,
    progress_console: Console | None,
    verifier: Verifier | None = None,
    on_decided: Callable[[FileOutcome], None] | None = None,
    on_patch: Callable[[int, int], None] | None = None,
    follow_ons: bool = True,
) -> list[FileOutcome]:
    """Verify every patch, round after round, and compose each file's fixed text from its
    accepted plans as soon as its last round is decided; `on_decided(outcome)` is then
    called at once (`--apply` writes the file there), before the other files are done.
    Without `follow_ons` (doctor: its records are a run's findings, not the rules') one
    round only."""
    job_by_path = {job.path: job for job in jobs}
    queues = _queues(outcomes, jobs)
    finished: set[int] = set()
    own = verifier is None
    queues_left: list[_FileQueue] | None = None
    if own and any(queue.records for queue in queues):
        from autograd_fix.verification import Verifier, WorkerError

        try:  # one worker for every round
            verifier = Verifier.for_project(queues[0].outcome.path, settings.user, choice=settings.config)
        except WorkerError as error:
            _unavailable(queues, error)  # nothing goes in: each file stays as it is
            queues_left = []
        else:
            say_interpreter(verifier)
    active = queues if queues_left is None else queues_left
    try:
        while active:
            later: list[_FileQueue] = []

            def finish(queue: _FileQueue) -> None:
                if id(queue) in finished or queue in later:
                    return
                if follow_ons and _next_round(queue, job_by_path[queue.outcome.path]):
                    if queue not in later:
                        later.append(queue)
                    return
                finished.add(id(queue))
                _compose(queue)
                if on_decided is not None:
                    on_decided(queue.outcome)

            verify_records(
                active, settings, unsafe_fixes, progress_console, verifier, on_file_done=finish, on_patch=on_patch, announce=own
            )
            for queue in active:
                if queue not in later:
                    finish(queue)
            active = later
    finally:
        if own and verifier is not None:
            verifier.close()
    for queue in queues:  # no worker could start: decided with nothing going in
        if id(queue) not in finished:
            finished.add(id(queue))
            _compose(queue)
            if on_decided is not None:
                on_decided(queue.outcome)
    queued = {id(queue.outcome) for queue in queues}
    for outcome in outcomes:  # files whose patches never reached verification
        if id(outcome) not in queued:
            for record in outcome.findings:
                record.fix_applies = False
    return outcomes


def _next_round(queue: _FileQueue, job: Job) -> bool:
    """End `queue`'s round: compose what went in, run the rules on it, and queue the next
    round's patches (deferred findings found again, follow-ons). False when the file is
    done (`queue.final_text` is then its text)."""
    base = queue.plans.text
    queue.final_text = base
    if not queue.going_in and not queue.deferred:
        return False
    try:
        text = queue.plans.compose(queue.going_in)
    except EngineError as error:
        queue.outcome.error = f"{error}; file left unchanged"
        return False
    if queue.round >= MAX_FIX_ROUNDS:
        queue.outcome.error = f"fixes did not converge after {MAX_FIX_ROUNDS} rounds; file left unchanged"
        return False
    rules = select_rules(list(job.select) if job.select else None, list(job.ignore))
    options = FixOptions(unsafe_fixes=job.unsafe_fixes, target_torch=job.target_torch, roles=job.roles, project=job.project)
    try:
        findings = analyse_text(text, rules, queue.outcome.path, options) if text != base else []
    except EngineError as error:
        queue.outcome.notes.append(f"round {queue.round}'s fixes were dropped: {error}")
        for record in queue.outcome.findings:
            if queue.chosen.get(id(record)) in queue.going_in:
                queue.applied.discard(id(record))
        return False
    queue.final_text = text
    edits = compose(base, [queue.plans.fix(plan_id) for plan_id in queue.going_in]).edits
    queue.history.append(edits)
    to_verify = _carry_over(queue, base, text, edits, findings)
    for record in queue.deferred:
        if record.verification is None:
            record.verification = _unverified(record, RESOLVED_BY_OTHERS)
    queue.round += 1
    queue.going_in, queue.deferred, queue._composed = [], [], {}
    queue.plans = FilePlans(text, [entry for entry in map(_entry, to_verify) if entry is not None])
    queue.records = to_verify
    return bool(to_verify)


def _carry_over(
    queue: _FileQueue, base: str, text: str, edits: tuple[TextEdit, ...], findings: list[Finding]
) -> list[FindingRecord]:
    """The records the next round verifies: a deferred record whose finding the new text
    still has (with its new fix), and a new record for each follow-on (a finding that
    continues none of the old text's); every finding of the new text becomes the queue's
    current findings."""
    old_lines, new_lines, original = LineIndex(base), LineIndex(text), LineIndex(queue.outcome.original or "")
    carried = {
        (code, map_offset(old_lines.offset(line, column), edits)): record
        for code, line, column, record in queue.current_findings
        if record is None or id(record) not in queue.applied
    }
    deferred = {id(record) for record in queue.deferred}
    ids = plan_ids(findings)
    current: list[tuple[str, int, int, FindingRecord | None]] = []
    to_verify: list[FindingRecord] = []
    for finding, plan_id in zip(findings, ids):
        key = (finding.code, new_lines.offset(finding.span.line, finding.span.column))
        fix = finding.fix if isinstance(finding.fix, TextFix) else None
        round_id = f"r{queue.round + 1}:{plan_id}" if plan_id is not None else None
        if key in carried:
            record = carried[key]
            if record is not None and id(record) in deferred and fix is not None:
                record.plan_id, record.fix, record.verification = round_id, fix, None
                record.alternatives = tuple(a for a in finding.alternatives if isinstance(a, TextFix))
                queue.candidate.pop(id(record), None)
                queue.rejected.pop(id(record), None)
                to_verify.append(record)
            current.append((finding.code, finding.span.line, finding.span.column, record))
            continue
        record = _follow_on(queue, finding, fix, round_id, new_lines, original)
        queue.outcome.findings.append(record)
        current.append((finding.code, finding.span.line, finding.span.column, record))
        if fix is not None:
            to_verify.append(record)
    queue.current_findings = current
    return to_verify


def _follow_on(
    queue: _FileQueue, finding: Finding, fix: TextFix | None, plan_id: str | None, lines: LineIndex, original: LineIndex
) -> FindingRecord:
    """A record of a finding the new text has and the old one did not, at its place in
    the original text (inside a rewritten range: where that range starts)."""
    span = span_back(finding.span, lines, original, queue.history)
    return FindingRecord(
        path=queue.outcome.path, line=span.line, column=span.column, end_line=span.end_line, end_column=span.end_column,
        code=finding.code, name=finding.name, message=finding.message + follow_on_note(queue.round + 1),
        fix_applicability=fix.applicability.value if fix else None, fix_applies=False,
        plan_id=plan_id if fix is not None else None, fix=fix,
        alternatives=tuple(a for a in finding.alternatives if isinstance(a, TextFix)) if fix is not None else (),
        round=queue.round + 1,
    )


def _compose(queue: _FileQueue) -> None:
    """The file's fixed text once every round is decided (none went in: as it is)."""
    if queue.final_text is None and queue.going_in:  # one round only (no `_next_round`)
        try:
            queue.final_text = queue.plans.compose(queue.going_in, final=True)
        except EngineError as error:
            queue.outcome.error = f"{error}; file left unchanged"
            queue.applied.clear()
    for record in queue.outcome.findings:
        record.fix_applies = id(record) in queue.applied
    fixed = queue.final_text
    if fixed is None or fixed == queue.outcome.original or not queue.applied:
        return
    from autograd_fix.codemods.unused_imports import drop_newly_unused_imports

    fixed = drop_newly_unused_imports(queue.outcome.original or "", fixed, queue.outcome.path)  # as `check_source` does
    notebook = queue.outcome.notebook
    if notebook is not None and not notebook.intact(fixed):
        queue.outcome.error = "the fixes would change an IPython magic line or a cell boundary; file left unchanged"
        for record in queue.outcome.findings:
            record.fix_applies = False
        return
    queue.outcome.fixed = fixed
