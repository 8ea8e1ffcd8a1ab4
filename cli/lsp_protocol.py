"""From an analysis to protocol objects: diagnostics, edits and code actions.

The engine counts 1-based lines and code-point columns (end inclusive); the protocol
counts 0-based lines and, by default, UTF-16 code units (end exclusive). `ClientView`
holds what the conversion needs to know about the client: its negotiated position
encoding and whether it accepts versioned document edits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from autograd_fix.cli.lsp_analysis import DocumentAnalysis, Problem, fixed_text
from autograd_fix.cli.lsp_notebook import CodeCell, NotebookProgram
from autograd_fix.cli.lsp_edits import TextEdit, line_edits, noqa_edit, split_lines
from autograd_fix.cli.rules_doc import rule_help_uri
from autograd_fix.codemods.model import Finding, Span
from autograd_fix.codemods.registry import rule_by_code

SOURCE = "autograd-fix"
VERIFY_COMMAND = "autograd-fix.verifyAndApply"
VERIFY_TITLE = "Verify and apply all autograd-fix fixes in this file"
#: the code action kind of the verified fix-all, offered once per file (as Ruff offers
#: `source.fixAll.ruff`): an editor can run it on save
FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.{SOURCE}"


@dataclass(frozen=True)
class ClientView:
    codec: PositionCodec
    #: the client takes `documentChanges` (edits bound to a document version)
    versioned_edits: bool

    def position(self, lines: list[str], line: int, character: int) -> types.Position:
        """0-based code-point position -> the client's position encoding."""
        if line >= len(lines):
            return types.Position(line=line, character=0)
        return self.codec.position_to_client_units(lines, types.Position(line=line, character=character))

    def range(self, lines: list[str], span: Span) -> types.Range:
        # Span: 1-based, end column inclusive -> LSP: 0-based, end exclusive
        return types.Range(
            start=self.position(lines, span.line - 1, span.column - 1),
            end=self.position(lines, span.end_line - 1, span.end_column),
        )

    def text_edit(self, lines: list[str], edit: TextEdit) -> types.TextEdit:
        return types.TextEdit(
            range=types.Range(
                start=self.position(lines, edit.start_line, edit.start_character),
                end=self.position(lines, edit.end_line, edit.end_character),
            ),
            new_text=edit.new_text,
        )

    def workspace_edit(self, uri: str, analysis: DocumentAnalysis, edits: list[TextEdit]) -> types.WorkspaceEdit:
        """Edits of the analysed document version; versioned where the client supports
        it, so that an editor refuses them once the buffer has changed."""
        lines = split_lines(analysis.text)
        converted: list[types.TextEdit | types.AnnotatedTextEdit | types.SnippetTextEdit] = [
            self.text_edit(lines, edit) for edit in edits
        ]
        if self.versioned_edits:
            identifier = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=analysis.version)
            return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(text_document=identifier, edits=converted)])
        return types.WorkspaceEdit(changes={uri: converted})  # type: ignore[dict-item]

    def diagnostic(self, finding: Finding, lines: list[str]) -> types.Diagnostic:
        return types.Diagnostic(
            range=self.range(lines, finding.span),
            message=finding.message,
            severity=types.DiagnosticSeverity.Warning,
            code=finding.code,
            code_description=types.CodeDescription(href=rule_help_uri(finding.code)),
            source=SOURCE,
            data={"name": finding.name, "fix": finding.fix.applicability.value if finding.fix else None},
        )

    def problem_diagnostic(self, problem: Problem, lines: list[str]) -> types.Diagnostic:
        return types.Diagnostic(
            range=self.range(lines, problem.span),
            message=problem.message,
            severity=types.DiagnosticSeverity.Error,
            source=SOURCE,
        )

    def diagnostics(self, analysis: DocumentAnalysis) -> list[types.Diagnostic]:
        lines = split_lines(analysis.text)
        result = [self.diagnostic(finding, lines) for finding in analysis.findings]
        if analysis.problem is not None:
            result.append(self.problem_diagnostic(analysis.problem, lines))
        return result

    def code_actions(self, uri: str, analysis: DocumentAnalysis, params: types.CodeActionParams) -> list[types.CodeAction]:
        """Per finding in the requested range: its fix (titled with its applicability;
        preferred when safe) and its `# noqa`; then, once for the file, the verified
        fix-all (`source.fixAll.autograd-fix`)."""
        lines = split_lines(analysis.text)
        wanted = self.codec.range_from_client_units(lines, params.range)
        start, end = (wanted.start.line, wanted.start.character), (wanted.end.line, wanted.end.character)
        actions: list[types.CodeAction] = []
        for index, finding in enumerate(analysis.findings):
            if not _touches(finding.span, start, end):
                continue
            diagnostic = self.diagnostic(finding, lines)
            fixed = fixed_text(analysis, index)
            if fixed is not None and finding.fix is not None:
                actions.append(_fix_action(finding, diagnostic, self.workspace_edit(uri, analysis, line_edits(analysis.text, fixed))))
            suppress = noqa_edit(analysis.text, finding.span.line, finding.code)
            if suppress is not None:
                actions.append(_noqa_action(finding, diagnostic, self.workspace_edit(uri, analysis, [suppress])))
        if any(finding.fix is not None for finding in analysis.findings):
            actions.append(fix_all_action(uri))
        return requested(actions, params)

    def cell_diagnostics(self, findings: list[tuple[Finding, Span]], cell_text: str) -> list[types.Diagnostic]:
        """Diagnostics of a notebook cell: its findings at their spans within the cell."""
        lines = split_lines(cell_text)
        return [self.diagnostic(replace(finding, span=span), lines) for finding, span in findings]

    def cells_edit(self, changes: dict[str, list[tuple[str, TextEdit]]]) -> types.WorkspaceEdit:
        """Edits of several notebook cells (cell URI -> (the cell's text, an edit of it))."""
        return types.WorkspaceEdit(
            changes={
                uri: [self.text_edit(split_lines(text), edit) for text, edit in edits]  # type: ignore[misc]
                for uri, edits in changes.items()
            }
        )

    def notebook_code_actions(
        self, program: NotebookProgram, analysis: DocumentAnalysis, cell: CodeCell, params: types.CodeActionParams
    ) -> list[types.CodeAction]:
        """A notebook cell's quick fixes: each finding's fix in the requested range, as
        edits of every cell the fix changes, and its `# noqa` on the cell's line."""
        lines = split_lines(cell.text)
        wanted = self.codec.range_from_client_units(lines, params.range)
        start, end = (wanted.start.line, wanted.start.character), (wanted.end.line, wanted.end.character)
        actions: list[types.CodeAction] = []
        for index, finding, span in program.findings_in(analysis.findings, cell.uri):
            if not _touches(span, start, end):
                continue
            diagnostic = self.diagnostic(replace(finding, span=span), lines)
            fixed = fixed_text(analysis, index)
            changed = program.changed_cells(fixed) if fixed is not None else None
            if changed and finding.fix is not None:
                edits = {uri: [(old, edit) for edit in line_edits(old, new)] for uri, (old, new) in changed.items()}
                actions.append(_fix_action(finding, diagnostic, self.cells_edit(edits)))
            suppress = noqa_edit(cell.text, span.line, finding.code)
            if suppress is not None:
                actions.append(_noqa_action(finding, diagnostic, self.cells_edit({cell.uri: [(cell.text, suppress)]})))
        return requested(actions, params)

    def hover(self, findings: list[tuple[Finding, Span]], text: str, position: types.Position) -> types.Hover | None:
        """The documentation of the rules whose findings (with their spans in `text`) lie
        under the client's `position`; None when there is none."""
        lines = split_lines(text)
        at = self.codec.position_from_client_units(lines, position)
        point = (at.line, at.character)
        under = [(f, s) for f, s in findings if _touches(s, point, point)]
        if not under:
            return None
        sections = []
        for code in dict.fromkeys(finding.code for finding, _ in under):
            rule = rule_by_code(code)
            body = rule.documentation() if rule is not None else ""
            sections.append(f"**{code}** ({rule_help_uri(code)})\n\n{body}".rstrip())
        first = under[0][1]
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(sections)),
            range=self.range(lines, first),
        )


def _fix_action(finding: Finding, diagnostic: types.Diagnostic, edit: types.WorkspaceEdit) -> types.CodeAction:
    """A finding's fix, titled with its applicability (preferred when safe)."""
    assert finding.fix is not None
    applicability = finding.fix.applicability.value
    return types.CodeAction(
        title=f"Fix {finding.code}: {finding.fix.description} ({applicability})",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        is_preferred=applicability == "safe",
        edit=edit,
    )


def _noqa_action(finding: Finding, diagnostic: types.Diagnostic, edit: types.WorkspaceEdit) -> types.CodeAction:
    return types.CodeAction(
        title=f"Suppress {finding.code} with # noqa: {finding.code}",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        edit=edit,
    )


def fix_all_action(uri: str) -> types.CodeAction:
    """The file's one verified fix-all: it runs the verify-and-apply command."""
    return types.CodeAction(
        title=VERIFY_TITLE,
        kind=FIX_ALL_KIND,
        command=types.Command(title=VERIFY_TITLE, command=VERIFY_COMMAND, arguments=[uri]),
    )


def requested(actions: list[types.CodeAction], params: types.CodeActionParams) -> list[types.CodeAction]:
    """The actions of the kinds the client asked for (`only`: a kind and its sub-kinds,
    so `source` takes `source.fixAll.autograd-fix`)."""
    only = params.context.only
    if not only:
        return actions
    wanted = [_kind_value(kind) for kind in only]
    return [
        action for action in actions
        if any(_kind_value(action.kind) == kind or _kind_value(action.kind).startswith(kind + ".") for kind in wanted)
    ]


def _kind_value(kind: object) -> str:
    """A code action kind as its protocol string (the converter gives an enum member
    for a standard kind and a plain string for any other)."""
    return str(kind.value) if isinstance(kind, Enum) else str(kind)


def _touches(span: Span, start: tuple[int, int], end: tuple[int, int]) -> bool:
    """Whether the finding's span touches the 0-based [start, end] range (inclusive, so
    a cursor at either end of a finding still gets its actions)."""
    return (span.line - 1, span.column - 1) <= end and start <= (span.end_line - 1, span.end_column)
