"""`autograd-fix server`: a language server (LSP over stdio) built on pygls.

Diagnostics are published on open, save and (debounced) change; each links its rule's
documentation. Code actions offer each finding's fix (titled with its applicability) and
a `# noqa` suppression; the `autograd-fix.verifyAndApply` command verifies the
document's fixes as `--diff` does and applies only what the policy allows.

Analysis runs on one background thread, never on the event loop, so the server keeps
reading messages while a file is analysed. Every analysis is tagged with the document
version it read; a result for a version the editor has moved past is dropped, and a
newer change cancels an analysis still waiting out its debounce. (A thread rather than
a process: the parsed module and the rules' fix callables stay in memory for code
actions, and they cannot cross a process boundary.) Documents are synchronised whole
on every change: the analysis reads the whole text anyway, and pygls would apply
incremental changes with str.splitlines(), whose line breaks are not the protocol's.
Protocol conversions live in `lsp_protocol`, text geometry in `lsp_edits`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import replace
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional
from urllib.parse import unquote

import typer
from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from autograd_fix import __version__
from autograd_fix.cli.app import Device
from autograd_fix.cli.config import ConfigCache
from autograd_fix.cli.lsp_analysis import DocumentAnalysis, DocumentSettings, Problem, analyse, settings_for
from autograd_fix.cli.lsp_edits import line_edits
from autograd_fix.cli.lsp_notebook import NOTEBOOK_TYPE, CodeCell, NotebookProgram, notebook_program
from autograd_fix.cli.lsp_protocol import FIX_ALL_KIND, SOURCE, VERIFY_COMMAND, ClientView
from autograd_fix.cli.lsp_settings import SECTION, EditorSettings, editor_settings
from autograd_fix.cli.lsp_verify import VerifyReport, source_bytes, verify_document
from autograd_fix.cli.verify_patches import VerifySettings
from autograd_fix.codemods.model import Span
from autograd_fix.verification.trust import UserConfigError, UserSettings, load_user_settings

DEFAULT_DEBOUNCE_MS = 300

logger = logging.getLogger(__name__)


class AutogradFixServer(LanguageServer):
    """Holds per-session state: the latest analysis per document, pending analyses, and
    the warm verification worker (started on the first verify command, kept until exit)."""

    def __init__(self, debounce_s: float, verify_settings: VerifySettings) -> None:
        super().__init__(
            SOURCE, __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[
                    types.NotebookDocumentFilterWithCells(
                        notebook=NOTEBOOK_TYPE, cells=[types.NotebookCellLanguage(language="python")]
                    )
                ]
            ),
        )
        self.debounce_s = debounce_s
        self.verify_settings = verify_settings
        self.analyses: dict[str, DocumentAnalysis] = {}
        self.pending: dict[str, asyncio.Task[None]] = {}
        #: the analysis under way per document: (version, text, its future)
        self.in_flight: dict[str, tuple[int | None, str, asyncio.Future[DocumentAnalysis]]] = {}
        self.reported_config_errors: set[str] = set()
        self.analysis_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="autograd-fix-analysis")
        self.verify_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="autograd-fix-verify")
        self.verifier: Any = None
        #: `[tool.autograd-fix]` per project, read again when a pyproject.toml changes
        self.configs = ConfigCache()
        #: the latest analysis per notebook URI, with the program it analysed
        self.notebooks: dict[str, tuple[NotebookProgram, DocumentAnalysis]] = {}
        #: diagnostics are published (push) unless the client pulls them
        self.push_diagnostics = True
        #: the interpreter was named on the server's command line (editor settings keep off it)
        self.python_from_command_line = bool(verify_settings.user and verify_settings.user.python)
        self.reported_setting_problems: set[str] = set()

    # -- documents ----------------------------------------------------------------
    def open_document(self, uri: str) -> TextDocument | None:
        return self.workspace.text_documents.get(unquote(uri))

    def schedule(self, uri: str, delay_s: float) -> None:
        """(Re)start the analysis of `uri`; a pending one for an older version is cancelled."""
        self._schedule_task(uri, self._publish_after(uri, delay_s))

    async def _publish_after(self, uri: str, delay_s: float) -> None:
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        try:
            analysis = await self.current_analysis(uri)
            if analysis is not None:
                self.publish(uri, analysis)
        except asyncio.CancelledError:
            raise
        except Exception:  # never let one document's failure stop the server
            logger.exception("publishing diagnostics for %s failed", uri)

    async def current_analysis(self, uri: str) -> DocumentAnalysis | None:
        """The analysis of the document's current version (None: closed, or it changed
        while being analysed, in which case a newer analysis is already on its way).

        Requests for a version already being analysed (a code action asked for while
        the debounced analysis runs) wait for that analysis instead of starting another.
        """
        document = self.open_document(uri)
        if document is None:
            return None
        text, version = document.source, document.version
        cached = self.analyses.get(uri)
        if cached is not None and cached.version == version and cached.text == text:
            return cached
        running = self.in_flight.get(uri)
        if running is None or running[0] != version or running[1] != text:
            path = to_fs_path(uri) if uri.startswith("file:") else None
            fallback = Path(self.workspace.root_path or Path.cwd())
            future = asyncio.get_running_loop().run_in_executor(
                self.analysis_thread, _analyse_buffer, text, version, path, fallback, self.configs
            )
            running = (version, text, asyncio.ensure_future(future))
            self.in_flight[uri] = running
        try:
            analysis = await asyncio.shield(running[2])
        finally:
            if self.in_flight.get(uri) is running and running[2].done():
                del self.in_flight[uri]
        current = self.open_document(uri)
        if current is None or current.version != version or current.source != text:
            return None  # stale: the editor moved on while this version was analysed
        if self.analyses.get(uri) is not analysis:
            self.analyses[uri] = analysis
            self._report_config_error(analysis)
        return analysis

    def _report_config_error(self, analysis: DocumentAnalysis) -> None:
        """A pyproject.toml that cannot be used is shown and logged once per distinct error
        (the document is analysed with the default settings meanwhile)."""
        error = analysis.settings.error
        if error and error not in self.reported_config_errors:
            self.reported_config_errors.add(error)
            message = f"autograd-fix: {error} (using the default settings)"
            logger.warning("%s", message)
            self.window_log_message(types.LogMessageParams(type=types.MessageType.Error, message=message))
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))

    def settings_changed(self) -> None:
        """A pyproject.toml was saved or changed on disk: analyse every open document
        again (the configuration cache sees the new modification time)."""
        uris = set(self.analyses) | set(self.pending)  # as the client spells them
        self.analyses.clear()
        self.in_flight.clear()  # one under way read the old settings: it is not reused
        self.reported_config_errors.clear()
        for uri in sorted(uris):
            if uri.startswith("notebook:"):
                continue
            if self.open_document(uri) is not None:
                self.schedule(uri, 0)
        for uri in sorted(self.workspace.notebook_documents):
            self.notebooks.pop(uri, None)
            self.schedule_notebook(uri, 0)
        refresh = self.client_capabilities.workspace and self.client_capabilities.workspace.diagnostics
        if not self.push_diagnostics and refresh and refresh.refresh_support:
            self.workspace_diagnostic_refresh(None)

    def view(self) -> ClientView:
        capabilities = self.client_capabilities.workspace
        versioned = bool(capabilities and capabilities.workspace_edit and capabilities.workspace_edit.document_changes)
        return ClientView(self.workspace.position_codec, versioned)

    def publish(self, uri: str, analysis: DocumentAnalysis) -> None:
        if not self.push_diagnostics:
            return  # the client pulls them (textDocument/diagnostic)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=self.view().diagnostics(analysis), version=analysis.version)
        )

    async def diagnostics_for(self, uri: str) -> list[types.Diagnostic]:
        """The current diagnostics of a document or notebook cell, for a pull request
        (analysed now if need be; an empty list for a document that is not open)."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            current = await self.current_notebook(notebook.uri)
            return self.cell_diagnostics(current, uri) if current is not None else []
        for _ in range(5):  # a newer version arrived while analysing: analyse that one
            if self.open_document(uri) is None:
                return []
            analysis = await self.current_analysis(uri)
            if analysis is not None:
                return self.view().diagnostics(analysis)
        return []

    # -- notebooks ------------------------------------------------------------------
    def notebook_cells(self, notebook_uri: str) -> tuple[int, list[CodeCell]] | None:
        """(version, code cells in order) of an open notebook; None when it is not open."""
        notebook = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if notebook is None:
            return None
        cells = []
        for position, cell in enumerate(notebook.cells):
            document = self.open_document(cell.document) if cell.kind == types.NotebookCellKind.Code else None
            if document is not None:  # a cell of another language is not synchronised
                cells.append(CodeCell(index=position, uri=cell.document, text=document.source))
        return notebook.version, cells

    def schedule_notebook(self, uri: str, delay_s: float) -> None:
        self._schedule_task(f"notebook:{uri}", self._publish_notebook_after(uri, delay_s))

    def _schedule_task(self, key: str, work: Any) -> None:
        previous = self.pending.pop(key, None)
        if previous is not None:
            previous.cancel()
        self.pending[key] = asyncio.get_running_loop().create_task(work)

    async def _publish_notebook_after(self, uri: str, delay_s: float) -> None:
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        try:
            current = await self.current_notebook(uri)
            if current is not None and self.push_diagnostics:
                for cell in current[0].cells:
                    self.text_document_publish_diagnostics(
                        types.PublishDiagnosticsParams(uri=cell.uri, diagnostics=self.cell_diagnostics(current, cell.uri))
                    )
        except asyncio.CancelledError:
            raise
        except Exception:  # never let one notebook's failure stop the server
            logger.exception("publishing diagnostics for %s failed", uri)

    async def current_notebook(self, uri: str) -> tuple[NotebookProgram, DocumentAnalysis] | None:
        """The analysis of the notebook's current cells (None: closed, or changed while
        being analysed: a newer analysis is on its way)."""
        found = self.notebook_cells(uri)
        if found is None:
            return None
        version, cells = found
        cached = self.notebooks.get(uri)
        if cached is not None and cached[0].version == version and cached[0].cells == tuple(cells):
            return cached
        program = notebook_program(uri, version, cells)
        path = to_fs_path(uri) if uri.startswith("file:") else None
        fallback = Path(self.workspace.root_path or Path.cwd())
        analysis = await asyncio.get_running_loop().run_in_executor(
            self.analysis_thread, _analyse_buffer, program.program, version, path, fallback, self.configs
        )
        latest = self.notebook_cells(uri)
        if latest is None or latest != (version, cells):
            return None
        self.notebooks[uri] = (program, analysis)
        self._report_config_error(analysis)
        return program, analysis

    async def notebook_cell(self, cell_uri: str) -> tuple[NotebookProgram, DocumentAnalysis, CodeCell] | None:
        """The current analysis of the notebook that holds `cell_uri`, and that cell."""
        notebook = self.workspace.get_notebook_document(cell_uri=cell_uri)
        current = await self.current_notebook(notebook.uri) if notebook is not None else None
        cell = current[0].cell(cell_uri) if current is not None else None
        if current is None or cell is None:
            return None
        return current[0], current[1], cell

    def cell_diagnostics(self, current: tuple[NotebookProgram, DocumentAnalysis], cell_uri: str) -> list[types.Diagnostic]:
        """A cell's diagnostics: its findings, and why the cell was left out when it
        does not parse (the other cells are analysed all the same)."""
        program, analysis = current
        cell = program.cell(cell_uri)
        if cell is None:
            return []
        findings = [(finding, span) for _, finding, span in program.findings_in(analysis.findings, cell_uri)]
        diagnostics = self.view().cell_diagnostics(findings, cell.text)
        error = program.map.unparsable.get(cell.index + 1)
        if error is not None:
            diagnostics.append(
                types.Diagnostic(
                    range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=1, character=0)),
                    message=f"autograd-fix did not analyse this cell: {error}",
                    severity=types.DiagnosticSeverity.Information,
                    source=SOURCE,
                )
            )
        if analysis.problem is not None and cell is program.cells[0]:
            diagnostics.append(types.Diagnostic(
                range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
                message=analysis.problem.message, severity=types.DiagnosticSeverity.Error, source=SOURCE,
            ))
        return diagnostics

    def forget_notebook(self, uri: str, cell_uris: list[str]) -> None:
        task = self.pending.pop(f"notebook:{uri}", None)
        if task is not None:
            task.cancel()
        self.notebooks.pop(uri, None)
        if self.push_diagnostics:
            for cell_uri in cell_uris:
                self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell_uri, diagnostics=[]))

    # -- the editor's settings --------------------------------------------------------
    def apply_editor_settings(self, settings: EditorSettings) -> None:
        """Take the editor's settings; a value of the wrong type is said once, not used."""
        for problem in settings.problems:
            if problem not in self.reported_setting_problems:
                self.reported_setting_problems.add(problem)
                self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=f"autograd-fix: {problem}"))
        changes: dict[str, Any] = {}
        if settings.device is not None:
            changes["device"] = settings.device
        if settings.verify_timeout is not None:
            changes["timeout"] = settings.verify_timeout
        if settings.python is not None and not self.python_from_command_line:
            user = self.verify_settings.user or _user_settings()
            if user.python != settings.python:
                changes["user"] = user.with_flags(python=settings.python)
                if self.verifier is not None:  # the next verification starts under the new interpreter
                    self.verifier.close()
                    self.verifier = None
        if changes:
            self.verify_settings = replace(self.verify_settings, **changes)
        if settings.debounce_ms is not None:
            self.debounce_s = settings.debounce_ms / 1000

    async def pull_editor_settings(self) -> None:
        """Ask the editor for the `autograd-fix` section (workspace/configuration)."""
        try:
            answers = await self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
            )
        except Exception:  # an editor that fails the request keeps the server's own settings
            logger.exception("workspace/configuration failed")
            return
        if answers:
            self.apply_editor_settings(editor_settings(answers[0]))

    def reports_progress(self) -> bool:
        window = self.client_capabilities.window
        return bool(window and window.work_done_progress)

    # -- verification -------------------------------------------------------------
    def warm_verifier(self, path: str | None = None) -> Any:
        """The session's verification worker, started (or restarted) on demand under the
        Python chosen for `path`'s project (`--python`, or found there); None when it
        cannot start (the verdicts then say why)."""
        from autograd_fix.verification import Verifier, WorkerError

        if self.verifier is None or not self.verifier.alive:
            try:
                self.verifier = Verifier.for_project(path, self.verify_settings.user)
            except WorkerError:
                self.verifier = None
        return self.verifier

    async def verify_and_apply(self, uri: Any) -> dict[str, Any]:
        """Verify the document's fixes, report the verdicts, apply what the policy allows."""
        if not isinstance(uri, str) or self.open_document(uri) is None:
            return self.tell(types.MessageType.Error, f"autograd-fix: {VERIFY_COMMAND} needs the URI of an open document", applied=False)
        analysis = await self.current_analysis(uri)
        if analysis is None:
            return self.tell(types.MessageType.Warning, "autograd-fix: the document changed; run the command again", applied=False)
        if analysis.problem is not None:
            return self.tell(types.MessageType.Error, f"{analysis.problem.message}; nothing to verify", applied=False)
        if not any(f.fix is not None for f in analysis.findings):
            return self.tell(types.MessageType.Info, "autograd-fix: nothing to fix in this document", applied=False)
        try:
            data = source_bytes(analysis.text)
        except ValueError as error:
            return self.tell(types.MessageType.Error, f"autograd-fix: {error}", applied=False)
        self.window_log_message(types.LogMessageParams(type=types.MessageType.Info, message=f"autograd-fix: verifying the fixes of {uri}"))
        loop = asyncio.get_running_loop()
        progress = await self.begin_progress(sum(1 for f in analysis.findings if f.fix is not None))
        try:
            report: VerifyReport = await loop.run_in_executor(
                self.verify_thread, verify_document, data, analysis, self.verify_settings,
                lambda: self.warm_verifier(analysis.path),
                (lambda done, total: loop.call_soon_threadsafe(self.report_progress, progress, done, total)) if progress else None,
            )
        finally:
            if progress is not None:
                self.work_done_progress.end(progress, types.WorkDoneProgressEnd(message="done"))
        notice = self.verifier.isolation_notice() if self.verifier is not None else None
        if notice:  # once per worker: its runs could not be isolated on this machine
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=f"autograd-fix: {notice}"))
        for note in report.notes:  # a project setting that was ignored, a file not read
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=f"autograd-fix: {note}"))
        if report.error:
            return self.tell(types.MessageType.Error, f"autograd-fix: {report.error}; nothing applied", applied=False, verdicts=report.verdicts)
        current = self.open_document(uri)
        if current is None or current.version != analysis.version:
            return self.tell(
                types.MessageType.Warning,
                "autograd-fix: the document changed during verification; nothing applied (run the command again)\n" + report.summary(),
                applied=False, verdicts=report.verdicts,
            )
        if report.fixed is None:
            return self.tell(types.MessageType.Warning, "autograd-fix: no fix may be applied\n" + report.summary(), applied=False, verdicts=report.verdicts)
        result = await self.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(
                edit=self.view().workspace_edit(uri, analysis, line_edits(analysis.text, report.fixed)),
                label="autograd-fix: verified fixes",
            )
        )
        if not result.applied:
            reason = result.failure_reason or "no reason given"
            return self.tell(types.MessageType.Error, f"autograd-fix: the editor did not apply the fixes ({reason})\n" + report.summary(), applied=False, verdicts=report.verdicts)
        kind = types.MessageType.Info if report.all_applied else types.MessageType.Warning
        return self.tell(kind, f"autograd-fix: applied {report.applied_count} of {len(report.verdicts)} {'fix' if len(report.verdicts) == 1 else 'fixes'}\n" + report.summary(), applied=True, verdicts=report.verdicts)

    async def begin_progress(self, fixes: int) -> str | None:
        """Start a progress report in the editor for a verification of `fixes` fixes (the
        first run of a session starts a worker: seconds); None when the client takes none."""
        if not self.reports_progress():
            return None
        token = f"autograd-fix-verify-{uuid.uuid4().hex}"
        try:
            await self.work_done_progress.create_async(token)
        except Exception:  # the client refused the token: verify without progress
            logger.exception("window/workDoneProgress/create failed")
            return None
        noun = "fix" if fixes == 1 else "fixes"
        self.work_done_progress.begin(
            token,
            types.WorkDoneProgressBegin(title="autograd-fix: verifying", message=f"0 of {fixes} {noun}", percentage=0, cancellable=False),
        )
        return token

    def report_progress(self, token: str, done: int, total: int) -> None:
        """One patch decided (called on the event loop)."""
        percentage = int(100 * done / total) if total else 100
        self.work_done_progress.report(token, types.WorkDoneProgressReport(message=f"{done} of {total}", percentage=percentage))

    def tell(self, kind: types.MessageType, message: str, **result: Any) -> dict[str, Any]:
        """Show `message` to the user and return it, with `result`, as the command's result."""
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))
        return {"message": message, **result}

    def close(self) -> None:
        for task in self.pending.values():
            task.cancel()
        self.pending.clear()
        if self.verifier is not None:
            self.verifier.close()
            self.verifier = None
        self.analysis_thread.shutdown(wait=False, cancel_futures=True)
        self.verify_thread.shutdown(wait=False, cancel_futures=True)


def _analyse_buffer(text: str, version: int | None, path: str | None, fallback: Path, configs: ConfigCache) -> DocumentAnalysis:
    """Runs on the analysis thread: configuration, then the engine; never raises."""
    file_path = Path(path) if path else None
    display = path or "<untitled>"
    try:
        settings = settings_for(file_path, fallback, configs)
        return analyse(text, version, display, settings)
    except Exception as error:  # a bug in a rule must not take the server down
        logger.exception("analysis of %s failed", display)
        problem = Problem(f"autograd-fix failed on this file ({type(error).__name__}: {error}); please report it", Span(1, 1, 1, 1))
        return DocumentAnalysis(text=text, version=version, path=display, settings=DocumentSettings(), problem=problem)


def _is_pyproject(uri: str) -> bool:
    return unquote(uri).rstrip("/").rsplit("/", 1)[-1] == "pyproject.toml"


def build_server(debounce_s: float = DEFAULT_DEBOUNCE_MS / 1000, verify_settings: VerifySettings = VerifySettings()) -> AutogradFixServer:
    """A server with every feature registered (not started)."""
    server = AutogradFixServer(debounce_s, verify_settings)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: AutogradFixServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: AutogradFixServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, ls.debounce_s)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: AutogradFixServer, params: types.DidSaveTextDocumentParams) -> None:
        if _is_pyproject(params.text_document.uri):
            ls.settings_changed()
            return
        ls.analyses.pop(params.text_document.uri, None)  # the configuration may have changed
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.INITIALIZE)
    def initialize(ls: AutogradFixServer, params: types.InitializeParams) -> None:
        # an editor names the project's interpreter here ({"python": PATH}) when it was
        # not given as --python on the server's command line
        settings = editor_settings(params.initialization_options)
        ls.apply_editor_settings(settings)
        pulls = params.capabilities.text_document and params.capabilities.text_document.diagnostic
        mode = settings.diagnostic_mode or "auto"
        ls.push_diagnostics = mode == "push" or (mode == "auto" and not pulls)

    @server.feature(types.INITIALIZED)
    def initialized(ls: AutogradFixServer, params: types.InitializedParams) -> None:
        if ls.client_capabilities.workspace and ls.client_capabilities.workspace.configuration:
            asyncio.ensure_future(ls.pull_editor_settings())
        watched = ls.client_capabilities.workspace and ls.client_capabilities.workspace.did_change_watched_files
        if watched and watched.dynamic_registration:  # hear of pyproject.toml edits made outside the editor
            options = types.DidChangeWatchedFilesRegistrationOptions(
                watchers=[types.FileSystemWatcher(glob_pattern="**/pyproject.toml")]
            )
            registration = types.Registration(
                id="autograd-fix-pyproject", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options
            )
            ls.client_register_capability(types.RegistrationParams(registrations=[registration]))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: AutogradFixServer, params: types.DidChangeWatchedFilesParams) -> None:
        if any(_is_pyproject(change.uri) for change in params.changes):
            ls.settings_changed()

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: AutogradFixServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        pending = ls.pending.pop(uri, None)
        if pending is not None:
            pending.cancel()
        ls.analyses.pop(uri, None)
        ls.in_flight.pop(uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND], resolve_provider=False),  # type: ignore[list-item]
    )
    async def code_action(ls: AutogradFixServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        if ls.workspace.get_notebook_document(cell_uri=uri) is not None:
            found = await ls.notebook_cell(uri)
            if found is None:
                return []
            program, analysis, cell = found
            return await asyncio.get_running_loop().run_in_executor(
                ls.analysis_thread, ls.view().notebook_code_actions, program, analysis, cell, params
            )
        analysis = await ls.current_analysis(uri)
        if analysis is None:
            return []
        # building fixes renders code: off the event loop, like the analysis itself
        return await asyncio.get_running_loop().run_in_executor(ls.analysis_thread, ls.view().code_actions, uri, analysis, params)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def did_open_notebook(ls: AutogradFixServer, params: types.DidOpenNotebookDocumentParams) -> None:
        ls.schedule_notebook(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def did_change_notebook(ls: AutogradFixServer, params: types.DidChangeNotebookDocumentParams) -> None:
        ls.schedule_notebook(params.notebook_document.uri, ls.debounce_s)
        structure = params.change.cells.structure if params.change.cells else None
        if structure is not None and structure.did_close and ls.push_diagnostics:
            for cell in structure.did_close:  # a deleted cell keeps no diagnostics
                ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell.uri, diagnostics=[]))

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def did_save_notebook(ls: AutogradFixServer, params: types.DidSaveNotebookDocumentParams) -> None:
        ls.notebooks.pop(params.notebook_document.uri, None)  # the configuration may have changed
        ls.schedule_notebook(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def did_close_notebook(ls: AutogradFixServer, params: types.DidCloseNotebookDocumentParams) -> None:
        ls.forget_notebook(params.notebook_document.uri, [cell.uri for cell in params.cell_text_documents])

    @server.feature(
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.DiagnosticOptions(identifier=SOURCE, inter_file_dependencies=False, workspace_diagnostics=False),
    )
    async def pull_diagnostics(ls: AutogradFixServer, params: types.DocumentDiagnosticParams) -> types.DocumentDiagnosticReport:
        return types.RelatedFullDocumentDiagnosticReport(items=await ls.diagnostics_for(params.text_document.uri))

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: AutogradFixServer, params: types.HoverParams) -> types.Hover | None:
        uri = params.text_document.uri
        if ls.workspace.get_notebook_document(cell_uri=uri) is not None:
            found = await ls.notebook_cell(uri)
            if found is None:
                return None
            program, analysis, cell = found
            located = [(finding, span) for _, finding, span in program.findings_in(analysis.findings, uri)]
            return ls.view().hover(located, cell.text, params.position)
        analysis = await ls.current_analysis(uri)
        if analysis is None:
            return None
        return ls.view().hover([(finding, finding.span) for finding in analysis.findings], analysis.text, params.position)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: AutogradFixServer, params: types.DidChangeConfigurationParams) -> None:
        configuration = ls.client_capabilities.workspace and ls.client_capabilities.workspace.configuration
        if configuration:
            await ls.pull_editor_settings()
        elif isinstance(params.settings, dict):  # an editor that pushes its settings instead
            ls.apply_editor_settings(editor_settings(params.settings.get(SECTION)))

    @server.command(VERIFY_COMMAND)
    async def verify_and_apply(ls: AutogradFixServer, *arguments: Any) -> dict[str, Any]:
        return await ls.verify_and_apply(arguments[0] if arguments else None)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: AutogradFixServer, *_: Any) -> None:
        ls.close()

    return server


def _user_settings() -> UserSettings:
    """The user's configuration file's settings; its defaults when it cannot be read (the
    verdicts say what is wrong with it)."""
    try:
        return load_user_settings()
    except UserConfigError:
        return UserSettings()


server_app = typer.Typer(add_completion=False, rich_markup_mode=None, context_settings={"help_option_names": ["-h", "--help"]})


@server_app.command()
def serve(
    stdio: bool = typer.Option(False, "--stdio", help="Accepted for clients that pass it: stdio is the only transport.", show_default=False),
    debounce_ms: int = typer.Option(DEFAULT_DEBOUNCE_MS, "--debounce-ms", metavar="MS", min=0, help="Wait this long after an edit before analysing."),
    device: Device = typer.Option(Device.auto, "--device", help="Where verification runs: auto, cpu or cuda."),
    verify_timeout: float = typer.Option(20.0, "--verify-timeout", metavar="SECONDS", min=0.1, help="Seconds per verification run."),
    log_level: Optional[str] = typer.Option(None, "--log-level", metavar="LEVEL", help="Log to stderr at this level (DEBUG, INFO, WARNING, ERROR)."),
    python: Optional[str] = typer.Option(None, "--python", metavar="PATH", help="The Python verification runs under (the project's; default: found)."),
) -> None:
    """Start the autograd-fix language server (LSP over stdio) for an editor."""
    if log_level and log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        typer.echo(f"error: --log-level must be DEBUG, INFO, WARNING or ERROR, not {log_level!r}", err=True)
        raise typer.Exit(2)
    if log_level:
        logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        user = _user_settings().with_flags(python=python) if python else None
    except UserConfigError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2)
    server = build_server(debounce_ms / 1000, VerifySettings(device=device.value, timeout=verify_timeout, jobs=1, user=user))
    try:
        server.start_io()
    finally:
        server.close()
