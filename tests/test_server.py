"""`autograd-fix server` end to end: a real LSP client talks to the server over stdio."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features
from typer.testing import CliRunner

from autograd_fix.cli.app import app
from autograd_fix.cli.rules_doc import rule_help_uri
from test_cli import EVAL_LOOP, EVAL_LOOP_FIXED
from test_roles import FACTORY_TRAINING
from test_cli_verification import SCRIPT as RUNNABLE
from test_lsp_verify import RETAIN

AMP_SCALER = "import torch\n\nscaler = torch.cuda.amp.GradScaler()\n"
EVAL_LINE = EVAL_LOOP.splitlines().index("    for x, y in val_loader:  # validation")
TIMEOUT_S = 30.0


class EditorClient(LanguageClient):
    """A test client that keeps every diagnostics notification and applies edits."""

    def __init__(self) -> None:
        super().__init__(converter_factory=default_converter)
        self.published: list[types.PublishDiagnosticsParams] = []
        self.applied_edits: list[types.WorkspaceEdit] = []
        self.registrations: list[types.Registration] = []


def _editor_client() -> EditorClient:
    client = EditorClient()

    def publish(client: EditorClient, params: types.PublishDiagnosticsParams) -> None:
        client.published.append(params)

    def apply_edit(client: EditorClient, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        client.applied_edits.append(params.edit)
        return types.ApplyWorkspaceEditResult(applied=True)

    def register(client: EditorClient, params: types.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)

    features = {
        **DEFAULT_CLIENT_FEATURES,
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish,
        types.WORKSPACE_APPLY_EDIT: apply_edit,
        types.CLIENT_REGISTER_CAPABILITY: register,
    }
    register_lsp_features(client, features)
    return client


#: one server for the module (each test uses its own documents): starting one costs seconds
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "autograd_fix", "server"], client_factory=_editor_client),
    scope="module",
)
async def client(lsp_client: EditorClient):
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=None,
            # this module's tests read published diagnostics; pulled ones: test_server_editor
            initialization_options={"diagnosticMode": "push"},
        )
    )
    yield
    await lsp_client.shutdown_session()


# -- helpers ----------------------------------------------------------------------------
def _uri(path: Path) -> str:
    return path.resolve().as_uri()


def _open(client: EditorClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)
        )
    )


def _change(client: EditorClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def _published(client: EditorClient, uri: str, version: int) -> list[types.PublishDiagnosticsParams]:
    """Every diagnostics notification for `uri` so far, once the one for `version` came."""

    async def wait() -> list[types.PublishDiagnosticsParams]:
        while True:
            seen = [params for params in client.published if params.uri == uri]
            if any(params.version == version for params in seen):
                return seen
            await asyncio.sleep(0.02)

    return await asyncio.wait_for(wait(), TIMEOUT_S)


async def _diagnostics(client: EditorClient, uri: str, version: int) -> list[types.Diagnostic]:
    """The diagnostics published for `uri` at `version` (waits for them)."""
    published = await _published(client, uri, version)
    return list([params for params in published if params.version == version][-1].diagnostics)


def _offset(text: str, position: types.Position) -> int:
    """Offset in `text` of an LSP position (UTF-16 code units, as negotiated by VS Code)."""
    lines = text.splitlines(keepends=True)
    if position.line >= len(lines):
        return len(text)
    line = lines[position.line]
    units = 0
    for index, char in enumerate(line):
        if units >= position.character:
            return sum(len(ln) for ln in lines[: position.line]) + index
        units += len(char.encode("utf-16-le")) // 2
    return sum(len(ln) for ln in lines[: position.line]) + len(line.rstrip("\r\n"))


def _apply(text: str, edit: types.WorkspaceEdit, uri: str, version: int) -> str:
    """What an editor does with a workspace edit for one document."""
    assert edit.document_changes, "a client that supports versioned edits gets them"
    (change,) = edit.document_changes
    assert isinstance(change, types.TextDocumentEdit)
    assert change.text_document.uri == uri and change.text_document.version == version
    edits = sorted(change.edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True)
    for item in edits:
        start, end = _offset(text, item.range.start), _offset(text, item.range.end)
        text = text[:start] + item.new_text + text[end:]
    return text


async def _actions(client: EditorClient, uri: str, diagnostic: types.Diagnostic) -> dict[str, Any]:
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=diagnostic.range,
            context=types.CodeActionContext(diagnostics=[diagnostic]),
        )
    )
    return {action.title: action for action in result or []}


# -- tests ------------------------------------------------------------------------------
async def test_diagnostics_on_open_link_the_rule_documentation(client: EditorClient, tmp_path: Path) -> None:
    uri = _uri(tmp_path / "train.py")
    _open(client, uri, EVAL_LOOP)
    (diagnostic,) = await _diagnostics(client, uri, 1)
    assert diagnostic.code == "AGF001"
    assert diagnostic.source == "autograd-fix"
    assert diagnostic.severity == types.DiagnosticSeverity.Warning
    assert diagnostic.code_description is not None and diagnostic.code_description.href == rule_help_uri("AGF001")
    assert "no_grad" in diagnostic.message
    assert (diagnostic.range.start.line, diagnostic.range.start.character) == (EVAL_LINE, 4)


async def test_quick_fix_rewrites_the_buffer_and_the_finding_goes_away(client: EditorClient, tmp_path: Path) -> None:
    uri = _uri(tmp_path / "train.py")
    _open(client, uri, EVAL_LOOP)
    (diagnostic,) = await _diagnostics(client, uri, 1)
    actions = await _actions(client, uri, diagnostic)
    (title,) = [t for t in actions if t.startswith("Fix AGF001:")]
    fix = actions[title]
    assert title.endswith("(safe)") and fix.is_preferred and fix.kind == types.CodeActionKind.QuickFix
    assert fix.edit is not None
    fixed = _apply(EVAL_LOOP, fix.edit, uri, 1)
    assert fixed == EVAL_LOOP_FIXED
    _change(client, uri, fixed, 2)
    assert await _diagnostics(client, uri, 2) == []


async def test_noqa_action_suppresses_the_finding(client: EditorClient, tmp_path: Path) -> None:
    uri = _uri(tmp_path / "train.py")
    _open(client, uri, EVAL_LOOP)
    (diagnostic,) = await _diagnostics(client, uri, 1)
    suppress = (await _actions(client, uri, diagnostic))["Suppress AGF001 with # noqa: AGF001"]
    assert suppress.edit is not None
    suppressed = _apply(EVAL_LOOP, suppress.edit, uri, 1)
    assert suppressed.splitlines()[EVAL_LINE] == "    for x, y in val_loader:  # validation  # noqa: AGF001"
    _change(client, uri, suppressed, 2)
    assert await _diagnostics(client, uri, 2) == []


async def test_rapid_changes_publish_only_current_results(client: EditorClient, tmp_path: Path) -> None:
    uri = _uri(tmp_path / "train.py")
    clean = "import torch\n\nx = torch.ones(3)\n"
    _open(client, uri, clean)
    assert await _diagnostics(client, uri, 1) == []
    typed = EVAL_LOOP[: len(EVAL_LOOP) // 2]
    for version, text in enumerate([clean + "# a", typed, typed + "\n", EVAL_LOOP], start=2):
        _change(client, uri, text, version)
    published = await _published(client, uri, 5)
    (diagnostic,) = published[-1].diagnostics
    assert diagnostic.code == "AGF001"
    versions = [params.version for params in published]
    assert versions == sorted(versions), "a stale analysis was published after a newer one"


async def test_unparsable_buffer_gets_a_syntax_error_diagnostic(client: EditorClient, tmp_path: Path) -> None:
    uri = _uri(tmp_path / "train.py")
    broken = EVAL_LOOP.replace("    return scores\n", "    return scores(\n")
    _open(client, uri, broken)
    (diagnostic,) = await _diagnostics(client, uri, 1)
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert "syntax error" in diagnostic.message
    assert diagnostic.range.start.line == broken.splitlines().index("    return scores(")
    assert await _actions(client, uri, diagnostic) == {}
    _change(client, uri, EVAL_LOOP, 2)
    (diagnostic,) = await _diagnostics(client, uri, 2)
    assert diagnostic.code == "AGF001"


async def test_nesting_that_would_crash_the_parser_is_a_diagnostic(client: EditorClient, tmp_path: Path) -> None:
    """libcst's parser overflows the stack on nesting this deep (the command line dies
    with a segfault); the server must report it and keep serving."""
    uri = _uri(tmp_path / "generated.py")
    _open(client, uri, "import torch\nx = " + "(" * 5000 + ")" * 5000 + "\n")
    (diagnostic,) = await _diagnostics(client, uri, 1)
    assert diagnostic.severity == types.DiagnosticSeverity.Error and diagnostic.range.start.line == 1
    other = _uri(tmp_path / "train.py")
    _open(client, other, EVAL_LOOP)
    assert [d.code for d in await _diagnostics(client, other, 1)] == ["AGF001"]


async def test_columns_are_utf16_code_units(client: EditorClient, tmp_path: Path) -> None:
    uri = _uri(tmp_path / "amp.py")
    prefix = 'label = "😀 é"; scaler = '
    text = f"import torch\n{prefix}torch.cuda.amp.GradScaler()\n"
    _open(client, uri, text)
    (diagnostic,) = await _diagnostics(client, uri, 1)
    assert diagnostic.code == "AGF012"
    assert diagnostic.range.start.line == 1
    assert diagnostic.range.start.character == len(prefix.encode("utf-16-le")) // 2
    fix = next(a for t, a in (await _actions(client, uri, diagnostic)).items() if t.startswith("Fix AGF012"))
    assert fix.edit is not None
    assert _apply(text, fix.edit, uri, 1) == f'import torch\n{prefix}torch.amp.GradScaler("cuda")\n'


async def test_configuration_comes_from_the_documents_pyproject(client: EditorClient, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.autograd-fix]\nexclude = ["vendored/"]\nper-file-ignores = { "eval_*.py" = ["AGF001"] }\n'
    )
    ignored, excluded, checked = _uri(tmp_path / "eval_loop.py"), _uri(tmp_path / "vendored" / "loop.py"), _uri(tmp_path / "train.py")
    for uri in (ignored, excluded, checked):
        _open(client, uri, EVAL_LOOP)
    assert await _diagnostics(client, ignored, 1) == []
    assert await _diagnostics(client, excluded, 1) == []
    assert [d.code for d in await _diagnostics(client, checked, 1)] == ["AGF001"]


async def test_a_broken_configuration_is_reported_and_defaults_apply(client: EditorClient, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.autograd-fix]\nselcet = ["AGF001"]\n')
    uri = _uri(tmp_path / "train.py")
    _open(client, uri, EVAL_LOOP)
    assert [d.code for d in await _diagnostics(client, uri, 1)] == ["AGF001"]
    assert any(m.type == types.MessageType.Error and "selcet" in m.message for m in client.messages)


async def test_role_and_torch_settings_give_the_diagnostics_of_the_command_line(
    client: EditorClient, tmp_path: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.autograd-fix]\noptimizer-objects = ["mypkg.training.make_optimizer"]\ntarget-torch = "2.1"\n'
    )
    trainer, amp = tmp_path / "fit.py", tmp_path / "amp.py"
    trainer.write_text(FACTORY_TRAINING)
    amp.write_text(AMP_SCALER)
    _open(client, _uri(trainer), FACTORY_TRAINING)
    _open(client, _uri(amp), AMP_SCALER)
    served = [(d.code, d.range.start.line + 1) for d in await _diagnostics(client, _uri(trainer), 1)]
    # the configured factory makes `tr` an optimizer (AGF002); PyTorch 2.1 has no
    # torch.amp.GradScaler, so AGF012 stays silent, as on the command line
    assert served == _command_line(trainer) == [("AGF002", 12)]
    assert await _diagnostics(client, _uri(amp), 1) == [] == _command_line(amp)


async def test_editing_pyproject_takes_effect_without_restarting(client: EditorClient, tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    # the editor was asked to tell the server of pyproject.toml changes made anywhere
    (watch,) = [r for r in client.registrations if r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES]
    assert [w["globPattern"] for w in watch.register_options["watchers"]] == ["**/pyproject.toml"]
    pyproject.write_text('[tool.autograd-fix]\nselect = ["AGF002"]\n')
    uri = _uri(tmp_path / "train.py")
    _open(client, uri, EVAL_LOOP)
    assert await _diagnostics(client, uri, 1) == []
    seen = len([p for p in client.published if p.uri == uri])
    pyproject.write_text('[tool.autograd-fix]\nselect = ["AGF001", "AGF002"]\n')
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=_uri(pyproject), type=types.FileChangeType.Changed)])
    )
    await asyncio.wait_for(_until(lambda: len([p for p in client.published if p.uri == uri]) > seen), TIMEOUT_S)
    assert [d.code for d in await _diagnostics(client, uri, 1)] == ["AGF001"]
    # unannounced (edited outside the editor): the next analysis reads the new settings
    pyproject.write_text('[tool.autograd-fix]\nignore = ["AGF001"]\n# a longer file: a changed size too\n')
    _change(client, uri, EVAL_LOOP + "\n", 2)
    assert await _diagnostics(client, uri, 2) == []


async def test_a_malformed_pyproject_is_logged_and_the_server_keeps_serving(client: EditorClient, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.autograd-fix]\nselect = AGF001\n')
    uri = _uri(tmp_path / "train.py")
    _open(client, uri, EVAL_LOOP)
    assert [d.code for d in await _diagnostics(client, uri, 1)] == ["AGF001"]
    logged = [m for m in client.log_messages if m.type == types.MessageType.Error and str(tmp_path) in m.message]
    assert logged and "line 2" in logged[0].message and "using the default settings" in logged[0].message


@pytest.mark.torch
async def test_verify_and_apply_runs_verification_then_applies(client: EditorClient, tmp_path: Path) -> None:
    path = tmp_path / "evaluate.py"
    path.write_text(RUNNABLE)
    uri = _uri(path)
    _open(client, uri, RUNNABLE)
    (diagnostic,) = await _diagnostics(client, uri, 1)
    # The action is a CodeAction carrying a Command; lsprotocol's client-side decoder
    # reads any object with a "command" key as a bare Command and keeps only its title
    # (editors tell them apart by the key's type), so the test checks the title and runs
    # the command the action names.
    assert "Verify and apply all autograd-fix fixes in this file" in await _actions(client, uri, diagnostic)
    edits_before = len(client.applied_edits)
    result: Any = await asyncio.wait_for(
        client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="autograd-fix.verifyAndApply", arguments=[uri])
        ),
        120,
    )
    (verdict,) = result["verdicts"]
    assert verdict["verdict"] == "accepted" and verdict["applied"] and result["applied"]
    assert any("AGF001 line" in m.message and "accepted" in m.message for m in client.messages)
    (edit,) = client.applied_edits[edits_before:]
    fixed = _apply(RUNNABLE, edit, uri, 1)
    assert "with torch.no_grad():\n    for batch in val_loader:\n        outputs.append(model(batch))" in fixed


async def test_unsafe_fix_is_titled_unsafe_and_not_preferred(client: EditorClient, tmp_path: Path) -> None:
    uri = _uri(tmp_path / "train.py")
    text = RETAIN
    _open(client, uri, text)
    (diagnostic,) = await _diagnostics(client, uri, 1)
    assert diagnostic.code == "AGF011"
    actions = await _actions(client, uri, diagnostic)
    (title,) = [t for t in actions if t.startswith("Fix AGF011:")]
    assert title.endswith("(unsafe)") and not actions[title].is_preferred
    fixed = _apply(text, actions[title].edit, uri, 1)
    assert "loss.backward()\n" in fixed and fixed.replace("loss.backward()", "loss.backward(retain_graph=True)") == text


async def test_closing_a_document_clears_its_diagnostics(client: EditorClient, tmp_path: Path) -> None:
    uri = _uri(tmp_path / "train.py")
    _open(client, uri, EVAL_LOOP)
    assert len(await _diagnostics(client, uri, 1)) == 1
    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    await asyncio.wait_for(_until(lambda: client.published[-1].uri == uri and not client.published[-1].diagnostics), TIMEOUT_S)


async def test_verify_command_on_an_unknown_document_is_an_error_message(client: EditorClient, tmp_path: Path) -> None:
    edits_before = len(client.applied_edits)
    result: Any = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="autograd-fix.verifyAndApply", arguments=[_uri(tmp_path / "never_opened.py")])
    )
    assert result["applied"] is False
    assert any(m.type == types.MessageType.Error and "open document" in m.message for m in client.messages)
    assert len(client.applied_edits) == edits_before


def _command_line(path: Path) -> list[tuple[str, int]]:
    """(code, line) of what `autograd-fix --format json PATH` reports."""
    result = CliRunner().invoke(app, ["--no-verify", "--format", "json", str(path)], catch_exceptions=False)
    return [(f["code"], f["line"]) for f in json.loads(result.stdout)["findings"]]


async def _until(condition) -> None:
    while not condition():
        await asyncio.sleep(0.02)
