"""Patch plans: a file's fixable findings with stable ids, and one composition step.

The verification pipeline needs, for every finding of a file, "the file with the fixes
already going in" and "the same plus this fix", and at the end "the file with exactly the
accepted fixes". All three come from one parse and one rule pass: fixes are edits on the
original tree, so any subset of them composes in a single transform (`compose`). No
re-parse and no re-run of the rules per patch, so the cost of one patch does not grow
with the number of findings in the file.

A plan id is `CODE@LINE:COLUMN` (plus `#k` for the k-th finding of one code at one
position), stable for one text and one rule selection: the same input gives the same ids
in the worker that checked the file and in the process that verifies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import libcst as cst

from autograd_fix.codemods.engine import (
    EngineError,
    apply_fixes,
    parse_module,
    run_rules,
    target_paths,
    triggered,
    unified_diff,
    validate_python,
)
from autograd_fix.codemods.model import Applicability, Finding, Fix
from autograd_fix.codemods.rule import Rule
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


class FilePlans:
    """The parsed file and its fixes by plan id; composes any subset of them."""

    def __init__(self, module: cst.Module, findings: Sequence[Finding]) -> None:
        self.module = module
        self.text = module.code
        self._fixes: dict[str, Fix] = {}
        self.plans: list[PatchPlan] = []
        for plan_id, finding in zip(plan_ids(findings), findings):
            if plan_id is None or finding.fix is None:
                continue
            self._fixes[plan_id] = finding.fix
            self.plans.append(
                PatchPlan(
                    id=plan_id,
                    code=finding.code,
                    line=finding.span.line,
                    column=finding.span.column,
                    applicability=finding.fix.applicability,
                    description=finding.fix.description,
                )
            )
        self._paths = target_paths(module, list(self._fixes.values()))

    @classmethod
    def from_source(
        cls, text: str, rules: Sequence[type[Rule]], path: str, target_torch: TorchVersion | None = None
    ) -> "FilePlans":
        """Parse `text` once and run `rules` once (raises EngineError when it cannot parse);
        `target_torch` as the check that produced the findings had it, so ids agree."""
        active = triggered(rules, text)
        if not active:
            return cls(parse_module(text), [])
        module = parse_module(text)
        return cls(module, run_rules(module, active, path, text, target_torch))

    def __contains__(self, plan_id: str) -> bool:
        return plan_id in self._fixes

    def compose(self, ids: Iterable[str], *, final: bool = False) -> str:
        """The original text with exactly the fixes of `ids` applied, checked to compile;
        with `final` (a text that will be written) also re-parsed by libcst, as the engine
        does for every text it writes (a parse costs 5x a compile: not for every patch).

        Raises EngineError for an unknown id, a fix that cannot be applied, or a result
        that does not parse or compile (the caller keeps the file as it was).
        """
        wanted = list(dict.fromkeys(ids))
        missing = [plan_id for plan_id in wanted if plan_id not in self._fixes]
        if missing:
            raise EngineError(f"no such fix in this file: {', '.join(missing)}")
        if not wanted:
            return self.text
        try:
            text = apply_fixes(self.module, [self._fixes[plan_id] for plan_id in wanted], self._paths)
        except Exception as error:  # a rule's replacement built an invalid tree
            raise EngineError(f"a fix could not be applied ({type(error).__name__}: {error})") from None
        validate_python(text)
        if final:
            try:
                cst.parse_module(text)
            except cst.ParserSyntaxError:
                raise EngineError("the fixes together produce code that does not parse") from None
        return text

    def diff(self, plan_id: str, path: str) -> str:
        """Unified diff of one plan's fix applied alone (the JSON output's per-finding diff)."""
        return unified_diff(self.text, self.compose([plan_id]), path)
