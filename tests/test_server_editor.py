"""The language server as a current editor drives it: VS Code's capabilities, so
diagnostics are pulled (textDocument/diagnostic), notebooks arrive as notebook documents,
settings come from workspace/configuration, and verification reports progress."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, client_capabilities

from test_cli import EVAL_LOOP, EVAL_LOOP_FIXED
from test_cli_verification import SCRIPT as RUNNABLE
from test_server import EditorClient, _editor_client, _open, _uri

TIMEOUT_S = 30.0
HEADER, _, BODY = EVAL_LOOP.partition("\n\n\n")  # the import, then the function
FIXED_BODY = EVAL_LOOP_FIXED.partition("\n\n\n")[2]

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "autograd_fix", "server"], client_factory=_editor_client),
    scope="module",
)
async def client(lsp_client: EditorClient):
    lsp_client.set_configuration({"verifyTimeout": "soon", "device": "cpu"}, section="autograd-fix")
    await lsp_client.initialize_session(types.InitializeParams(capabilities=_current_vscode(), root_uri=None))
    yield
    await lsp_client.shutdown_session()


def _current_vscode() -> types.ClientCapabilities:
    """VS Code's capabilities as pytest-lsp records them, plus what current VS Code also
    declares: pulled diagnostics (with refresh) and notebook documents."""
    capabilities = client_capabilities("visual-studio-code")
    assert capabilities.text_document is not None and capabilities.workspace is not None
    capabilities.text_document.diagnostic = types.DiagnosticClientCapabilities(dynamic_registration=True, related_document_support=False)
    capabilities.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    capabilities.notebook_document = types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities(dynamic_registration=True, execution_summary_support=True)
    )
    return capabilities


async def _pull(client: EditorClient, uri: str) -> list[types.Diagnostic]:
    report = await asyncio.wait_for(
        client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))),
        TIMEOUT_S,
    )
    assert report.kind == "full"
    return list(report.items)


def _whole(text: str) -> types.Range:
    return types.Range(start=types.Position(line=0, character=0), end=types.Position(line=len(text.splitlines()), character=0))


async def _actions(client: EditorClient, uri: str, range_: types.Range, only: list[Any] | None = None) -> list[Any]:
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), range=range_,
            context=types.CodeActionContext(diagnostics=[], only=only),
        )
    )
    return list(result or [])


def _apply(text: str, edits: list[types.TextEdit]) -> str:
    """`edits` (ASCII text: code points are UTF-16 units) applied to `text`."""
    lines = text.splitlines(keepends=True) + [""]
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: types.Position) -> int:
        return starts[position.line] + position.character

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


def _open_notebook(client: EditorClient, path: Path, cells: list[tuple[types.NotebookCellKind, str]]) -> tuple[str, list[str]]:
    uri = _uri(path)
    cell_uris = [f"vscode-notebook-cell:{path.resolve()}#W{index}sZmlsZQ%3D%3D" for index in range(len(cells))]
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=uri, notebook_type="jupyter-notebook", version=1,
                cells=[types.NotebookCell(kind=kind, document=cell_uri) for (kind, _), cell_uri in zip(cells, cell_uris)],
            ),
            cell_text_documents=[
                types.TextDocumentItem(
                    uri=cell_uri, language_id="python" if kind == types.NotebookCellKind.Code else "markdown", version=1, text=text
                )
                for (kind, text), cell_uri in zip(cells, cell_uris)
            ],
        )
    )
    return uri, cell_uris


# -- diagnostics are pulled -------------------------------------------------------------
async def test_a_client_that_pulls_gets_diagnostics_by_request_and_none_pushed(client: EditorClient, tmp_path: Path) -> None:
    uri = _uri(tmp_path / "train.py")
    _open(client, uri, EVAL_LOOP)
    (diagnostic,) = await _pull(client, uri)
    assert diagnostic.code == "AGF001"
    assert diagnostic.range.start.line == EVAL_LOOP.splitlines().index("    for x, y in val_loader:  # validation")
    await asyncio.sleep(0.5)  # past the debounce: a pushing server would have published by now
    assert not [params for params in client.published if params.uri == uri]


async def test_a_document_that_is_not_open_pulls_nothing(client: EditorClient, tmp_path: Path) -> None:
    assert await _pull(client, _uri(tmp_path / "never_opened.py")) == []


# -- notebooks ------------------------------------------------------------------------
async def test_notebook_cells_are_analysed_as_one_program_with_diagnostics_per_cell(client: EditorClient, tmp_path: Path) -> None:
    _, (first, markdown, loop) = _open_notebook(
        client, tmp_path / "evaluate.ipynb",
        [(types.NotebookCellKind.Code, HEADER + "\n"), (types.NotebookCellKind.Markup, "# Evaluate"), (types.NotebookCellKind.Code, BODY)],
    )
    assert await _pull(client, first) == []
    assert await _pull(client, markdown) == []
    (diagnostic,) = await _pull(client, loop)
    assert diagnostic.code == "AGF001"
    # the line within its cell, not within the program the cells make together
    assert diagnostic.range.start.line == BODY.splitlines().index("    for x, y in val_loader:  # validation")


async def test_a_cell_that_does_not_parse_is_named_and_the_others_are_analysed(client: EditorClient, tmp_path: Path) -> None:
    _, (header, exercise, loop) = _open_notebook(
        client, tmp_path / "exercise.ipynb",
        [(types.NotebookCellKind.Code, HEADER + "\n"), (types.NotebookCellKind.Code, "lr = \n"), (types.NotebookCellKind.Code, BODY)],
    )
    (note,) = await _pull(client, exercise)
    assert note.severity == types.DiagnosticSeverity.Information and "did not analyse this cell" in note.message
    assert [d.code for d in await _pull(client, loop)] == ["AGF001"]


async def test_a_notebook_quick_fix_edits_only_the_cell_it_changes(client: EditorClient, tmp_path: Path) -> None:
    _, (header, loop) = _open_notebook(
        client, tmp_path / "fix.ipynb", [(types.NotebookCellKind.Code, HEADER + "\n"), (types.NotebookCellKind.Code, BODY)]
    )
    (diagnostic,) = await _pull(client, loop)
    actions = await _actions(client, loop, diagnostic.range)
    fix = next(action for action in actions if action.title.startswith("Fix AGF001"))
    assert set(fix.edit.changes) == {loop}
    assert _apply(BODY, fix.edit.changes[loop]) == FIXED_BODY
    suppress = next(action for action in actions if action.title.startswith("Suppress AGF001"))
    assert "# noqa: AGF001" in _apply(BODY, suppress.edit.changes[loop])


async def test_a_changed_cell_is_analysed_again(client: EditorClient, tmp_path: Path) -> None:
    notebook, (header, loop) = _open_notebook(
        client, tmp_path / "edit.ipynb", [(types.NotebookCellKind.Code, HEADER + "\n"), (types.NotebookCellKind.Code, BODY)]
    )
    assert len(await _pull(client, loop)) == 1
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(uri=notebook, version=2),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    text_content=[
                        types.NotebookDocumentCellContentChanges(
                            document=types.VersionedTextDocumentIdentifier(uri=loop, version=2),
                            changes=[types.TextDocumentContentChangeWholeDocument(text=FIXED_BODY)],
                        )
                    ]
                )
            ),
        )
    )
    assert await _pull(client, loop) == []


# -- hover, fix-all, settings, progress ----------------------------------------------
async def test_hover_on_a_finding_shows_its_rule_documentation(client: EditorClient, tmp_path: Path) -> None:
    uri = _uri(tmp_path / "hover.py")
    _open(client, uri, EVAL_LOOP)
    (diagnostic,) = await _pull(client, uri)
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=diagnostic.range.start)
    )
    assert hover is not None and "**AGF001**" in hover.contents.value and "no_grad" in hover.contents.value
    nothing = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=0))
    )
    assert nothing is None


async def test_the_verified_fix_all_is_offered_once_per_file_under_its_own_kind(client: EditorClient, tmp_path: Path) -> None:
    text = EVAL_LOOP + "\n\n" + EVAL_LOOP.partition("\n\n\n")[2].replace("def fit", "def fit_again")
    uri = _uri(tmp_path / "two.py")
    _open(client, uri, text)
    assert len(await _pull(client, uri)) == 2
    everything = [a.title for a in await _actions(client, uri, _whole(text))]
    assert everything.count("Verify and apply all autograd-fix fixes in this file") == 1
    quick = [a.title for a in await _actions(client, uri, _whole(text), only=[types.CodeActionKind.QuickFix])]
    assert quick and "Verify and apply all autograd-fix fixes in this file" not in quick
    for kind in (types.CodeActionKind.SourceFixAll, "source.fixAll.autograd-fix", types.CodeActionKind.Source):
        assert [a.title for a in await _actions(client, uri, _whole(text), only=[kind])] == [
            "Verify and apply all autograd-fix fixes in this file"
        ]


async def test_editor_settings_are_read_and_a_bad_value_is_said_once(client: EditorClient) -> None:
    async def said() -> list[str]:
        while True:
            found = [m.message for m in client.messages if "verifyTimeout" in m.message]
            if found:
                return found
            await asyncio.sleep(0.02)

    (message,) = await asyncio.wait_for(said(), TIMEOUT_S)
    assert "autograd-fix.verifyTimeout must be a number" in message and "'soon'" in message


@pytest.mark.torch
async def test_verification_reports_progress_from_begin_to_end(client: EditorClient, tmp_path: Path) -> None:
    path = tmp_path / "evaluate.py"
    path.write_text(RUNNABLE)
    uri = _uri(path)
    _open(client, uri, RUNNABLE)
    assert len(await _pull(client, uri)) == 1
    before = set(client.progress_reports)
    result: Any = await asyncio.wait_for(
        client.workspace_execute_command_async(types.ExecuteCommandParams(command="autograd-fix.verifyAndApply", arguments=[uri])),
        120,
    )
    assert result["applied"] is True, result
    (token,) = set(client.progress_reports) - before
    reports = client.progress_reports[token]
    assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].message == "0 of 1 fix"
    assert any(isinstance(r, types.WorkDoneProgressReport) and r.message == "1 of 1" for r in reports)
    assert isinstance(reports[-1], types.WorkDoneProgressEnd)
