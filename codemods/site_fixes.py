"""Fixes at sites a run found (`autograd-fix doctor`): "the fix of rule X at line L".

A dynamic finding names a rule and a line. Where the rule's own analysis reported
nothing there, the rule's `fix_at` builds its fix from the site alone. The results are
ordinary findings with fixes as data: they get plan ids and go through the same
composition and verification as the static findings (`engine.check_source` and
`plans.FilePlans.from_source` take the same `sites`, in the same order, so the ids agree).
"""

from __future__ import annotations

from typing import Sequence

import libcst as cst

from autograd_fix.codemods.model import Applicability, Finding, Fix
from autograd_fix.codemods.nograd_wrap import no_grad_wrap_edits
from autograd_fix.codemods.rule import Rule, RuleContext, SiteFix
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, Vocabulary
from autograd_fix.codemods.torch_version import TorchVersion
from autograd_fix.codemods.walk import iter_children

#: (rule code, 1-based line) of one bug a run showed
Site = tuple[str, int]

_CLAUSES = (cst.Else, cst.Finally, cst.ExceptHandler, cst.ExceptStarHandler, cst.If, cst.MatchCase)


def _inner_statements(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The statements of every indented block of a compound statement (elif/else/except
    clauses included)."""
    found: list[cst.CSTNode] = []
    for child in iter_children(node):
        if type(child) is cst.IndentedBlock:
            found.extend(child.body)
        elif isinstance(child, _CLAUSES):
            found.extend(_inner_statements(child))
    return found


def statement_at(context: RuleContext, line: int) -> cst.SimpleStatementLine | None:
    """The innermost statement line that holds `line` (None: the line is a compound
    statement's header, a blank line, or a one-line suite such as ``if x: y()``)."""
    statements: list[cst.CSTNode] = list(context.module.body)
    while True:
        holder = None
        for statement in statements:
            span = context.span(statement)
            if span.line <= line <= span.end_line:
                holder = statement
                break
        if holder is None:
            return None
        if type(holder) is cst.SimpleStatementLine:
            return holder
        statements = _inner_statements(holder)


def no_grad_site_fix(context: RuleContext, line: int, message: str) -> SiteFix | None:
    """The statement at `line` under `with torch.no_grad():`, as an unsafe fix (a run saw
    the forward there build graphs no backward went through; verification compares)."""
    statement = statement_at(context, line)
    if statement is None:
        return None
    edits, needs = no_grad_wrap_edits([statement], context.imports)
    return SiteFix(statement, message, Fix(Applicability.UNSAFE, edits, "wrap the forward pass in `with torch.no_grad():`", needs))


def site_findings(
    module: cst.Module,
    rules: Sequence[type[Rule]],
    path: str,
    text: str | None,
    sites: Sequence[Site],
    target_torch: TorchVersion | None = None,
    roles: Vocabulary = DEFAULT_VOCABULARY,
) -> list[Finding]:
    """One finding with a fix per site whose rule (among the selected `rules`) can build
    one there; `# noqa` holds for them as for any finding."""
    from autograd_fix.codemods.engine import _is_suppressed, _noqa_map

    by_code = {rule.code: rule for rule in rules}
    context = RuleContext(path, module, target_torch, roles, text)
    suppressed = _noqa_map(module.code if text is None else text)
    found: list[Finding] = []
    for code, line in sites:
        rule = by_code.get(code)
        built = rule.fix_at(context, line) if rule is not None else None
        if rule is None or built is None:
            continue
        finding = Finding(code, rule.name, built.message, context.span(built.node), built.fix, node=built.node)
        if not _is_suppressed(finding, suppressed):
            found.append(finding)
    return found


def site_fix_reason(code: str, rules: Sequence[type[Rule]]) -> str:
    """Why no fix is offered for a run's finding of `code` (no rule, not selected, or the
    rule builds none from a site)."""
    rule = next((rule for rule in rules if rule.code == code), None)
    if rule is None:
        return "no rule fixes this" if not code.startswith("AGF") else f"{code} is not selected"
    return rule.no_site_fix
