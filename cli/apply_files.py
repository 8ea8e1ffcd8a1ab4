"""`--apply`, one file at a time: each file is written as soon as its fixes are decided.

A long verified run used to write everything at its very end, so an interrupt (or a
crash) at 95% lost every verified patch. `Applier` is called with each file's outcome
the moment nothing more can change it (after the static pass with `--no-verify`, after
its last patch's verdict otherwise), writes it through `write_user_file`, and remembers
what was written and what was refused, so that the summary and an interrupted run's
report say exactly which files changed.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from autograd_fix.cli.interrupts import Interrupted, StopSignals
from autograd_fix.cli.notebook import notebook_bytes
from autograd_fix.cli.runner import FileOutcome
from autograd_fix.cli.writes import WriteRefused, write_user_file
from autograd_fix.codemods.source import SourceError, SourceText, read_bytes


def new_bytes(outcome: FileOutcome, original: bytes | None = None) -> bytes:
    """What `--apply` writes: the fixed source, or the notebook with its changed cells
    (built from `original`, by default the file as it is now on disk)."""
    if outcome.notebook is None:
        return encode(outcome)
    data = original if original is not None else read_bytes(outcome.path)
    if outcome.fixed is None:
        return data
    return notebook_bytes(data, outcome.digest or "", outcome.notebook, outcome.original or "", outcome.fixed)


def encode(outcome: FileOutcome, text: str | None = None) -> bytes:
    """The file's new bytes, in its own encoding and with its BOM if it had one."""
    body = text if text is not None else outcome.fixed or ""
    return SourceText(text=body, encoding=outcome.encoding, bom=outcome.bom).encode(body)


def decision_note(outcome: FileOutcome) -> str:
    """A decided file in a few words: how many of its candidate fixes go in."""
    if outcome.error:
        return outcome.error
    candidates = [r for r in outcome.findings if r.plan_id is not None]
    accepted = sum(1 for r in candidates if r.fix_applies)
    return f"{accepted} of {len(candidates)} fix{'es' if len(candidates) != 1 else ''} accepted"


def candidates(outcomes: Iterable[FileOutcome]) -> list[str]:
    """The files that have fixes still to decide after the static pass."""
    return [o.path for o in outcomes if not o.error and any(r.plan_id for r in o.findings)]


@dataclass
class Applier:
    """Writes decided files, one by one; call it with each outcome once decided."""

    #: real paths a symlinked file may point into (`writes.allowed_roots`)
    roots: Sequence[str]
    #: keeps a signal from cutting a write in half (None: nothing to hold)
    stops: StopSignals | None = None
    #: told `(path, what happened)` after each file with fixes (progress lines)
    note: Callable[[str, str], None] | None = None
    written: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)
    #: `id()` of every finding record whose fix is now on disk
    applied_ids: set[int] = field(default_factory=set)
    #: files that may still get fixes (set once the static pass is over)
    candidates: list[str] = field(default_factory=list)

    def expect(self, outcomes: Iterable[FileOutcome]) -> None:
        """Remember which files have fixes still to decide (for an interrupt's report)."""
        self.candidates = candidates(outcomes)

    def __call__(self, outcome: FileOutcome) -> None:
        if outcome.fixed is None or outcome.error:
            if self.note is not None and outcome.path in self.candidates:
                self.note(outcome.path, outcome.error or "no fix accepted; unchanged")
            return
        # the write and its record go together: a signal in between would leave a
        # written file out of the interrupt's "written:" list
        with self.stops.held() if self.stops is not None else nullcontext():
            try:
                write_user_file(outcome.path, new_bytes(outcome), expected_digest=outcome.digest, roots=self.roots)
            except (WriteRefused, SourceError) as error:
                self.refused.append((outcome.path, str(error)))
                if self.note is not None:
                    self.note(outcome.path, f"not written: {error}")
                return
            self.written.append(outcome.path)
            fixes = [r for r in outcome.findings if r.fix_applies]
            self.applied_ids.update(id(r) for r in fixes)
            if self.note is not None:
                self.note(outcome.path, f"written ({len(fixes)} fix{'es' if len(fixes) != 1 else ''})")

    def not_written(self) -> list[str]:
        """Files that had fixes in view and were not written (for an interrupt's report)."""
        done = set(self.written) | {path for path, _ in self.refused}
        return [path for path in self.candidates if path not in done]


@dataclass
class DecisionNotes:
    """`--diff` and report runs: no file is written, but each decided file still gets
    its progress line (the same protocol as `Applier`)."""

    note: Callable[[str, str], None] | None = None
    candidates: list[str] = field(default_factory=list)

    def expect(self, outcomes: Iterable[FileOutcome]) -> None:
        self.candidates = candidates(outcomes)

    def __call__(self, outcome: FileOutcome) -> None:
        if self.note is not None:
            self.note(outcome.path, decision_note(outcome))


def interrupt_report(stop: Interrupted, applier: Applier | None, mode: str) -> str:
    """What an interrupted run says on stderr: that it stopped, and which files it did
    and did not write."""
    lines = [f"autograd-fix: interrupted ({stop.label}); stopping."]
    if applier is None:
        lines.append("No file was written." if mode == "apply" else "Nothing was written (this mode writes no file).")
    else:
        lines += [f"written: {path}" for path in applier.written]
        lines += [f"not written: {path}" for path in applier.not_written()]
        if not applier.written:
            lines.append("No file was written.")
    return "\n".join(lines)
