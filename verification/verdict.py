"""Result types of the verification stage: plain frozen dataclasses, JSON-ready.

They carry no torch objects so the cli (which never imports torch itself) can render
them; the evidence dicts hold only numbers, strings, lists and dicts.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from autograd_fix.codemods.safe_text import REASON_LIMIT, printable, printable_values


class Status(str, enum.Enum):
    """A verdict: equal to its lower-case name as a string (JSON, exit codes, tests)."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    UNVERIFIED = "unverified"

    def __str__(self) -> str:
        return self.value


ACCEPTED = Status.ACCEPTED
REJECTED = Status.REJECTED
UNVERIFIED = Status.UNVERIFIED

#: exit code of `autograd-fix verify` per verdict (2 is reserved for usage errors).
EXIT_CODES = {ACCEPTED: 0, REJECTED: 1, UNVERIFIED: 3}


@dataclass(frozen=True)
class UnitResult:
    """The verdict for one runnable unit (a script, a function, a method, a Function)."""

    name: str
    mode: str  # "script" | "driver" | "function"
    verdict: Status
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)
    #: what ran: "script driver (__main__)", "driver `python train.py`", "function f with synthesized inputs"
    driver: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Status(self.verdict))
        # reasons and evidence quote what a run printed and raised: no control
        # character reaches a terminal, a diff or an annotation, and no reason is huge
        object.__setattr__(self, "reason", printable(self.reason, limit=REASON_LIMIT))
        object.__setattr__(self, "evidence", printable_values(self.evidence))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mode": self.mode,
            "verdict": self.verdict.value,
            "reason": self.reason,
            "driver": self.driver,
            "evidence": self.evidence,
        }


@dataclass(frozen=True)
class Verdict:
    """The verdict for one patch: the worst of its units' verdicts."""

    verdict: Status
    reason: str
    rule: str | None
    units: tuple[UnitResult, ...] = ()
    #: why the runs behind this verdict were not isolated (None: isolated, or nothing ran)
    isolation_gap: str | None = None
    #: what the tool did not take from the project's configuration, and why
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Status(self.verdict))
        object.__setattr__(self, "reason", printable(self.reason, limit=REASON_LIMIT))
        if self.isolation_gap is not None:
            object.__setattr__(self, "isolation_gap", printable(self.isolation_gap))
        object.__setattr__(self, "notes", tuple(printable(note) for note in self.notes))

    @property
    def driver(self) -> str | None:
        """What ran the patch (the units' drivers, in order), None when nothing ran."""
        drivers = list(dict.fromkeys(u.driver for u in self.units if u.driver))
        return "; ".join(drivers) if drivers else None

    @property
    def accepted(self) -> bool:
        return self.verdict == ACCEPTED

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.verdict, 3)

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "reason": self.reason,
            "rule": self.rule,
            "driver": self.driver,
            "isolated": self.isolation_gap is None,
            "isolation_gap": self.isolation_gap,
            "units": [unit.to_json() for unit in self.units],
        }

    def finding_json(self) -> dict[str, Any]:
        """The `verification` field of a finding in `--format json` (a stable interface)."""
        return {
            "verdict": self.verdict.value,
            "reason": self.reason,
            "driver": self.driver,
            "isolated": self.isolation_gap is None,
            "evidence": {unit.name: unit.evidence for unit in self.units},
        }

    @property
    def full_reason(self) -> str:
        """The reason, and when the runs were not isolated, that they were not: said on
        every verdict, so that no accepted fix reads as if it came from a confined run."""
        gap = f" [runs NOT isolated: {self.isolation_gap}]" if self.isolation_gap else ""
        return f"{self.reason}{gap}"

    def summary(self) -> str:
        """One line for diffs and findings, e.g. ``accepted: outputs equal, ...``."""
        return f"{self.verdict.value}: {self.full_reason}"


def combine(units: list[UnitResult] | tuple[UnitResult, ...], rule: str | None) -> Verdict:
    """Rejected if any unit is rejected, else unverified if any is, else accepted."""
    units = tuple(units)
    if not units:
        return Verdict(UNVERIFIED, "no runnable unit found", rule, units)
    for wanted in (REJECTED, UNVERIFIED):
        bad = [u for u in units if u.verdict == wanted]
        if bad:
            reason = bad[0].reason if len(units) == 1 else f"{bad[0].name}: {bad[0].reason}"
            return Verdict(wanted, reason, rule, units)
    if len(units) == 1:
        return Verdict(ACCEPTED, units[0].reason, rule, units)
    return Verdict(ACCEPTED, "; ".join(f"{u.name}: {u.reason}" for u in units), rule, units)


def format_bytes(n: int | float | None) -> str:
    """Human figure in decimal units (``17.1 MB``), as the design's examples read."""
    if n is None:
        return "n/a"
    n = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"
