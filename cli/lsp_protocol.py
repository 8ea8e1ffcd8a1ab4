"""From an analysis to protocol objects: diagnostics, edits and code actions.

The engine counts 1-based lines and code-point columns (end inclusive); the protocol
counts 0-based lines and, by default, UTF-16 code units (end exclusive). `ClientView`
holds what the conversion needs to know about the client: its negotiated position
encoding and whether it accepts versioned document edits.
"""

from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from autograd_fix.cli.lsp_analysis import DocumentAnalysis, Problem, fixed_text
from autograd_fix.cli.lsp_edits import TextEdit, line_edits, noqa_edit, split_lines
from autograd_fix.cli.rules_doc import rule_help_uri
from autograd_fix.codemods.model import Finding, Span

SOURCE = "autograd-fix"
VERIFY_COMMAND = "autograd-fix.verifyAndApply"
VERIFY_TITLE = "Verify and apply all autograd-fix fixes in this file"


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
        preferred when safe) and its `# noqa`; then the verify-and-apply command."""
        lines = split_lines(analysis.text)
        wanted = self.codec.range_from_client_units(lines, params.range)
        start, end = (wanted.start.line, wanted.start.character), (wanted.end.line, wanted.end.character)
        actions: list[types.CodeAction] = []
        any_fix = False
        for index, finding in enumerate(analysis.findings):
            if not _touches(finding.span, start, end):
                continue
            diagnostic = self.diagnostic(finding, lines)
            fixed = fixed_text(analysis, index)
            if fixed is not None and finding.fix is not None:
                applicability = finding.fix.applicability.value
                any_fix = True
                actions.append(
                    types.CodeAction(
                        title=f"Fix {finding.code}: {finding.fix.description} ({applicability})",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        is_preferred=applicability == "safe",
                        edit=self.workspace_edit(uri, analysis, line_edits(analysis.text, fixed)),
                    )
                )
            suppress = noqa_edit(analysis.text, finding.span.line, finding.code)
            if suppress is not None:
                actions.append(
                    types.CodeAction(
                        title=f"Suppress {finding.code} with # noqa: {finding.code}",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        edit=self.workspace_edit(uri, analysis, [suppress]),
                    )
                )
        if any_fix:
            actions.append(
                types.CodeAction(
                    title=VERIFY_TITLE,
                    kind=types.CodeActionKind.QuickFix,
                    command=types.Command(title=VERIFY_TITLE, command=VERIFY_COMMAND, arguments=[uri]),
                )
            )
        only = params.context.only
        if only:
            actions = [a for a in actions if any(str(a.kind).startswith(str(kind)) for kind in only)]
        return actions


def _touches(span: Span, start: tuple[int, int], end: tuple[int, int]) -> bool:
    """Whether the finding's span touches the 0-based [start, end] range (inclusive, so
    a cursor at either end of a finding still gets its actions)."""
    return (span.line - 1, span.column - 1) <= end and start <= (span.end_line - 1, span.end_column)
