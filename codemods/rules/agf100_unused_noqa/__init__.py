"""AGF100 unused-noqa: a `# noqa: AGF...` comment that suppresses nothing."""

from __future__ import annotations

import re
from typing import Iterable, Sequence

import libcst as cst

from autograd_fix.codemods.engine import _NOQA as NOQA_COMMENT  # the engine's reading decides what is suppressed
from autograd_fix.codemods.model import Applicability, Edit, Finding, Fix
from autograd_fix.codemods.rule import Contract, Rule
_OWN_CODE = re.compile(r"^AGF\d{3}$")


class UnusedNoqa(Rule):
    """
    ## What it does
    Finds `# noqa: AGF...` comments naming autograd-fix codes that suppress no finding on
    their line, and removes those codes (the whole comment when nothing else is left).
    A code is unused when its rule ran and reported nothing there, when no rule has that
    code, or when the run does not enable the rule (as Ruff's RUF100, which reports
    "non-enabled" codes too). Codes of other tools (`F401`, `E501`) and a bare `# noqa`
    are left alone: another linter may need them.

    ## Why is this bad?
    A suppression outlives its reason: once the code is fixed, or a rule stops firing
    on code it wrongly reported, the comment silences a real bug written on that line
    later. Ruff's `--add-noqa` and `RUF100` are used together for this reason, and
    `autograd-fix --add-noqa` needs the same counterpart.

    ## Example
    ```python
    with torch.no_grad():
        preds = model(x)  # noqa: AGF001
    ```

    ## Use instead
    ```python
    with torch.no_grad():
        preds = model(x)
    ```

    ## Fix safety
    Safe: only the comment changes, and only the codes that suppress nothing on their
    line in this run. A code another rule of this run needs stays, and so does `AGF100`
    itself (a suppression of this rule is never judged by it). Run with fewer rules
    (`--select`, `--ignore`, `per-file-ignores`), the codes of the rules left out are
    reported as not enabled: apply the fix only from a run with every rule the comment
    is meant for.

    ## Verification
    Removing a comment changes no behaviour: outputs equal.
    """

    code = "AGF100"
    name = "unused-noqa"
    safety = Applicability.SAFE
    message = "unused `noqa` code"
    contract = Contract(description="only a comment changes: outputs equal", checks=("outputs_equal",))
    no_site_fix = "a noqa comment is found in the text; a run shows nothing about it"


    def judge(self, findings: Sequence[Finding], enabled: Iterable[str]) -> None:
        """Report the codes of each collected comment that none of `findings` (every
        other rule's findings, before suppression) uses; `enabled`: the codes of the
        rules this run enables."""
        enabled = frozenset(enabled)
        used: dict[int, set[str]] = {}
        for finding in findings:
            used.setdefault(finding.span.line, set()).add(finding.code)
        for holder, comment in _noqa_comments(self.context.module):
            match = _codes_noqa(comment.value)
            assert match is not None
            codes = [code.strip().upper() for code in match.group("codes").split(",")]
            line = self.context.span(comment).line
            unused = [
                code for code in codes
                if _OWN_CODE.match(code) and code != self.code and code not in used.get(line, set())
            ]
            if not unused:
                continue
            kept = [code for code in codes if code not in unused]
            why = ", ".join(
                f"{code} ({'not enabled' if code not in enabled else 'nothing to suppress'})" for code in unused
            )
            fix = Fix(Applicability.SAFE, (Edit(holder, _without(kept, match)),), "remove the unused codes")
            self.report(comment, message=f"unused `noqa` code: {why}", fix=fix)


class _Comments(cst.CSTVisitor):
    """The file's comments with `# noqa: CODES`, each with the node that holds it (the
    rules' shared walk skips whitespace nodes, so this rule walks the tree itself, only
    in files whose text has such a comment)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[cst.TrailingWhitespace | cst.EmptyLine, cst.Comment]] = []

    def visit_TrailingWhitespace(self, node: cst.TrailingWhitespace) -> None:
        self._collect(node)

    def visit_EmptyLine(self, node: cst.EmptyLine) -> None:
        self._collect(node)

    def _collect(self, node: cst.TrailingWhitespace | cst.EmptyLine) -> None:
        if node.comment is not None and _codes_noqa(node.comment.value):
            self.found.append((node, node.comment))


def _codes_noqa(comment: str) -> re.Match[str] | None:
    """The comment's `# noqa: CODES` (None for none, or for a bare `# noqa`)."""
    match = NOQA_COMMENT.search(comment)
    return match if match is not None and match.group("codes") is not None else None


def _noqa_comments(module: cst.Module) -> list[tuple[cst.TrailingWhitespace | cst.EmptyLine, cst.Comment]]:
    collector = _Comments()
    module.visit(collector)
    return collector.found


def _without(kept: list[str], match: re.Match[str]):  # type: ignore[no-untyped-def]
    """The line's comment with only `kept` codes; with none, the noqa part goes, and the
    comment with it (a comment line of its own: the whole line) when nothing else is
    left in it."""

    def replace(updated: cst.CSTNode):  # type: ignore[no-untyped-def]
        assert type(updated) in (cst.TrailingWhitespace, cst.EmptyLine) and updated.comment is not None
        value = updated.comment.value
        if kept:
            text = value[: match.start()] + "# noqa: " + ", ".join(kept) + value[match.end():]
            return updated.with_changes(comment=cst.Comment(text))
        rest = (value[: match.start()] + value[match.end():]).rstrip()
        if rest.strip() not in ("", "#"):
            return updated.with_changes(comment=cst.Comment(rest))
        if type(updated) is cst.EmptyLine:
            return cst.RemoveFromParent()
        return updated.with_changes(comment=None, whitespace=cst.SimpleWhitespace(""))

    return replace
