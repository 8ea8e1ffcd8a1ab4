"""Patch plans: a file's fixes with stable ids, composed through the one composition step.

The verification pipeline needs, for every finding of a file, "the file with the fixes
already going in" and "the same plus this fix", and at the end "the file with exactly the
accepted fixes". Fixes are data (`model.TextFix`, text edits made once right after the
rule pass), so any subset of them composes with `text_fixes.compose` on the text: no
parse, no tree and no re-run of the rules per patch. A fix that collides with the ones
going in is deferred (`FixDeferred`): the next round re-runs the rules on the composed
text and offers it again (`cli.verify_patches`).

A plan id is `CODE@LINE:COLUMN` (plus `#k` for the k-th finding of one code at one
position), stable for one text and one rule selection: the same input gives the same ids
in the worker that checked the file and in the process that verifies it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

from autograd_fix.codemods.engine import EngineError, FixOptions, check_source, parse_module, validate_python
from autograd_fix.codemods.model import Applicability, Finding, TextFix
from autograd_fix.codemods.rule import Rule
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, Vocabulary
from autograd_fix.codemods.text_fixes import compose
from autograd_fix.codemods.torch_version import TorchVersion


@dataclass(frozen=True)
class PatchPlan:
    """One finding's fix, identified within its file."""

    id: str
    code: str
    line: int
    column: int
    applicability: Applicability
    description: str


def plan_ids(findings: Sequence[Finding]) -> list[str | None]:
    """The plan id of each finding (None for a finding without a fix), in order."""
    seen: dict[str, int] = {}
    ids: list[str | None] = []
    for finding in findings:
        if finding.fix is None:
            ids.append(None)
            continue
        base = f"{finding.code}@{finding.span.line}:{finding.span.column}"
        count = seen.get(base, 0)
        seen[base] = count + 1
        ids.append(base if count == 0 else f"{base}#{count}")
    return ids


class FixDeferred(EngineError):
    """The fix collides with a fix going in before it: it waits for the next round."""


@dataclass(frozen=True)
class PlanEntry:
    """One finding's fix (and its later candidates) under its plan id."""

    id: str
    code: str
    line: int
    column: int
    fix: TextFix
    alternatives: tuple[TextFix, ...] = ()


class FilePlans:
    """One text and its fixes by plan id; composes any subset of them."""

    def __init__(self, text: str, entries: Iterable[PlanEntry]) -> None:
        self.text = text
        self._fixes: dict[str, TextFix] = {}
        self.plans: list[PatchPlan] = []
        #: plan id -> the ids of its candidate fixes in order (the first is the plan id
        #: itself, later ones `ID~2`, `ID~3`): each composes like any plan
        self.candidates: dict[str, list[str]] = {}
        for entry in entries:
            self._fixes[entry.id] = entry.fix
            later = [f"{entry.id}~{rank}" for rank in range(2, len(entry.alternatives) + 2)]
            self._fixes.update(zip(later, entry.alternatives))
            self.candidates[entry.id] = [entry.id, *later]
            self.plans.append(
                PatchPlan(entry.id, entry.code, entry.line, entry.column, entry.fix.applicability, entry.fix.description)
            )

    @classmethod
    def from_findings(cls, text: str, findings: Sequence[Finding]) -> "FilePlans":
        """Plans of `findings` (fixes as data, as `check_source` gives them) on `text`."""
        entries = []
        for plan_id, finding in zip(plan_ids(findings), findings):
            if plan_id is None or not isinstance(finding.fix, TextFix):
                continue
            alternatives = tuple(a for a in finding.alternatives if isinstance(a, TextFix))
            entries.append(PlanEntry(plan_id, finding.code, finding.span.line, finding.span.column, finding.fix, alternatives))
        return cls(text, entries)

    @classmethod
    def from_source(
        cls,
        text: str,
        rules: Sequence[type[Rule]],
        path: str,
        target_torch: TorchVersion | None = None,
        roles: Vocabulary = DEFAULT_VOCABULARY,
        sites: Sequence[tuple[str, int]] = (),
    ) -> "FilePlans":
        """Parse `text` once and run `rules` once (raises EngineError when it cannot parse);
        `target_torch`, `roles` and `sites` (a run's bugs, `site_fixes`) as the check that
        produced the findings had them, so ids agree. The command line's verified path
        does not need this: its check already carries every fix as data."""
        options = FixOptions(target_torch=target_torch, roles=roles)
        result = check_source(text, rules, path=path, options=options, compute_fix=False, sites=sites)
        return cls.from_findings(text, result.findings)

    def description(self, plan_id: str) -> str:
        """What the fix of `plan_id` (a plan or one of its later candidates) does."""
        return self._fixes[plan_id].description

    def fix(self, plan_id: str) -> TextFix:
        return self._fixes[plan_id]

    def __contains__(self, plan_id: str) -> bool:
        return plan_id in self._fixes

    def compose(self, ids: Iterable[str], *, final: bool = False) -> str:
        """The text with exactly the fixes of `ids` applied (`text_fixes.compose`), checked
        to compile; with `final` (a text that will be written) also parsed by libcst.

        Raises FixDeferred when a fix collides with one before it in `ids`, EngineError
        for an unknown id or a result that does not compile or parse (the caller keeps
        the file as it was).
        """
        wanted = list(dict.fromkeys(ids))
        missing = [plan_id for plan_id in wanted if plan_id not in self._fixes]
        if missing:
            raise EngineError(f"no such fix in this file: {', '.join(missing)}")
        if not wanted:
            return self.text
        composition = compose(self.text, [self._fixes[plan_id] for plan_id in wanted])
        if composition.deferred:
            later = ", ".join(wanted[index] for index in composition.deferred)
            raise FixDeferred(f"{later} collides with a fix going in before it")
        validate_python(composition.text)
        if final:
            parse_module(composition.text)
        return composition.text
