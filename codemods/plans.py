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

from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

import libcst as cst

from autograd_fix.codemods.engine import (
    EngineError,
    StatementCode,
    apply_fixes,
    rewrite_node,
    parse_module,
    target_paths,
    triggered,
    validate_python,
    with_sites,
)
from autograd_fix.codemods.imports import add_imports
from autograd_fix.codemods.model import Applicability, Finding, Fix
from autograd_fix.codemods.rule import Rule
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, Vocabulary
from autograd_fix.codemods.torch_version import TorchVersion
from autograd_fix.codemods.unused_imports import imported_names, may_orphan, touched_names, uses


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
        #: plan id -> the ids of its candidate fixes in order (the first is the plan id
        #: itself, later ones `ID~2`, `ID~3`): each composes like any plan
        self.candidates: dict[str, list[str]] = {}
        for plan_id, finding in zip(plan_ids(findings), findings):
            if plan_id is None or finding.fix is None:
                continue
            self._fixes[plan_id] = finding.fix
            later = [f"{plan_id}~{rank}" for rank in range(2, len(finding.alternatives) + 2)]
            self._fixes.update(zip(later, finding.alternatives))
            self.candidates[plan_id] = [plan_id, *later]
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
        self._codes = StatementCode(module) if self._fixes else None
        self._home = self._home_statements()
        # texts of rewritten top-level statements by (index, plan ids applied inside it, in
        # order): stacked patches re-apply the accepted fixes every time, and regenerating
        # each of them per patch grew with the number of findings
        self._pieces: dict[tuple[int, tuple[str, ...]], str] = {}
        #: uses of the module's imported names, and per plan the uses its edits cover
        #: (computed when first composed: `_may_orphan`)
        self._import_uses: Counter[str] | None = None
        self._touched: dict[str, Counter[str]] = {}

    def _home_statements(self) -> dict[str, int]:
        """Plan id -> index of the one top-level statement all its edits lie in, for the
        plans that can be composed statement by statement (nothing module-wide: every edit
        inside one statement, and no import to add)."""
        if not self._fixes:
            return {}
        imports = [statement for fix in self._fixes.values() for statement in fix.required_imports]
        if imports and add_imports(self.module, imports) is not self.module:
            return {}
        index_of = {id(statement): index for index, statement in enumerate(self.module.body)}
        home: dict[str, int] = {}
        for plan_id, fix in self._fixes.items():
            found: set[int] = set()
            for edit in fix.edits:
                path = self._paths.get(id(edit.target))
                found |= {index_of[node] for node in path if node in index_of} if path is not None else {-1}
            if len(found) == 1 and -1 not in found:
                home[plan_id] = found.pop()
        return home

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
        produced the findings had them, so ids agree."""
        active = triggered(rules, text)
        if not active and not sites:
            return cls(parse_module(text), [])
        module = parse_module(text)
        return cls(module, with_sites(module, rules, active, path, text, target_torch, roles, sites))

    def description(self, plan_id: str) -> str:
        """What the fix of `plan_id` (a plan or one of its later candidates) does."""
        return self._fixes[plan_id].description

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
            if self._codes is not None and all(plan_id in self._home for plan_id in wanted) and not self._may_orphan(wanted):
                text = self._compose_by_statement(wanted, self._codes)
            else:
                text = apply_fixes(self.module, [self._fixes[plan_id] for plan_id in wanted], self._paths, self._codes)
        except Exception as error:  # a rule's replacement built an invalid tree
            raise EngineError(f"a fix could not be applied ({type(error).__name__}: {error})") from None
        validate_python(text)
        if final:
            try:
                cst.parse_module(text)
            except cst.ParserSyntaxError:
                raise EngineError("the fixes together produce code that does not parse") from None
        return text

    def _may_orphan(self, wanted: list[str]) -> bool:
        """Could these fixes together leave an import unused? Removing it is a change
        outside their statements (`unused_imports`), which only a full pass makes."""
        if self._import_uses is None:
            self._import_uses = uses(self.module, imported_names(self.module))
        for plan_id in wanted:
            if plan_id not in self._touched:
                self._touched[plan_id] = touched_names([self._fixes[plan_id]])
        return may_orphan(self._import_uses, (self._touched[plan_id] for plan_id in wanted))

    def _compose_by_statement(self, wanted: list[str], codes: StatementCode) -> str:
        """The module text, each top-level statement rewritten alone by the fixes inside
        it (its text cached per set of fixes); untouched statements keep their text."""
        groups: dict[int, list[str]] = {}
        for plan_id in wanted:
            groups.setdefault(self._home[plan_id], []).append(plan_id)
        module = self.module
        pieces = [codes.text_of(node) for node in module.header]
        for index, statement in enumerate(module.body):
            group = groups.get(index)
            if not group:
                pieces.append(codes.text_of(statement))
                continue
            key = (index, tuple(group))
            piece = self._pieces.get(key)
            if piece is None:
                fixes = [self._fixes[plan_id] for plan_id in group]
                targets = [id(edit.target) for fix in fixes for edit in fix.edits]
                result = rewrite_node(statement, fixes, frozenset().union(*(self._paths[t] for t in targets)))
                if isinstance(result, cst.RemovalSentinel):
                    piece = ""
                elif isinstance(result, cst.FlattenSentinel):
                    piece = "".join(module.code_for_node(node) for node in result.nodes)
                else:
                    piece = module.code_for_node(result)  # type: ignore[arg-type]
                self._pieces[key] = piece
            pieces.append(piece)
        pieces.extend(codes.text_of(node) for node in module.footer)
        return codes.join(pieces, module.has_trailing_newline)
