"""What the language server knows about one version of one document.

`analyse` runs the same engine, rule selection and `pyproject.toml` configuration as the
command line (select / ignore / per-file-ignores / unsafe-fixes / exclude / target-torch /
`<role>-names` and `<role>-objects`, found by the same `load_config`) on an editor buffer, and keeps each finding's fix as data (text edits) so that code actions apply it on request
instead of rendering every fix on every keystroke. Nothing here imports pygls.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from autograd_fix.cli.config import Config, ConfigCache, ConfigError
from autograd_fix.cli.discovery import ExcludePatternError, is_excluded
from autograd_fix.codemods.engine import EngineError, FixOptions, check_source, validate_python
from autograd_fix.codemods.model import Finding, Span, TextFix
from autograd_fix.codemods.registry import select_rules, unknown_codes
from autograd_fix.codemods.rule import Rule
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, Vocabulary
from autograd_fix.codemods.text_fixes import apply_fix
from autograd_fix.codemods.torch_api import uses_torch
from autograd_fix.codemods.torch_version import TorchVersion


@dataclass(frozen=True)
class DocumentSettings:
    """The configuration that applies to one document."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    unsafe_fixes: bool = False
    #: the document matches the configuration's `exclude`: no diagnostics
    excluded: bool = False
    #: the project's PyTorch floor (None: assume the newest)
    target_torch: TorchVersion | None = None
    #: the project's role vocabulary (`<role>-names` / `<role>-objects`)
    roles: Vocabulary = DEFAULT_VOCABULARY
    #: why the configuration could not be used (the defaults apply instead)
    error: str | None = None

    def rules(self) -> list[type[Rule]]:
        return select_rules(list(self.select) if self.select else None, list(self.ignore))

    def options(self) -> FixOptions:
        """The engine options the command line would use for this document."""
        return FixOptions(unsafe_fixes=self.unsafe_fixes, target_torch=self.target_torch, roles=self.roles)


@dataclass(frozen=True)
class Problem:
    """Why a buffer could not be analysed, and where (1-based, end column inclusive)."""

    message: str
    span: Span


@dataclass
class DocumentAnalysis:
    """Findings of one document version (or the problem that prevented them)."""

    text: str
    version: int | None
    path: str
    settings: DocumentSettings
    findings: list[Finding] = field(default_factory=list)
    module: cst.Module | None = None
    problem: Problem | None = None
    #: each finding's fixed text once built (editors ask for code actions on every
    #: cursor move); keyed by the finding's index
    fixed_texts: dict[int, str | None] = field(default_factory=dict)


def settings_for(path: Path | None, fallback_folder: Path, configs: ConfigCache) -> DocumentSettings:
    """The `[tool.autograd-fix]` settings for a document at `path` (None: not a file),
    from the server's `configs` (read again when a pyproject.toml changes)."""
    start = fallback_folder
    if path is not None:  # an unsaved file's folder may not exist yet: its nearest existing parent
        start = next((folder for folder in path.parents if folder.exists()), fallback_folder)
    try:
        config = configs.load(start)
        _check_codes(config)
    except ConfigError as error:
        return DocumentSettings(error=str(error))
    per_file = config.ignored_codes_for(path) if path is not None else []
    return DocumentSettings(
        select=tuple(config.select) if config.select else None,
        ignore=tuple(config.ignore + per_file),
        unsafe_fixes=config.unsafe_fixes,
        excluded=path is not None and _excluded(config, path),
        target_torch=config.target_torch,
        roles=config.roles,
    )


def _check_codes(config: Config) -> None:
    for key, codes in (("select", config.select or []), ("ignore", config.ignore)):
        bad = unknown_codes(codes)
        if bad:
            raise ConfigError(f"{config.source}: [tool.autograd-fix] {key}: unknown rule code or prefix: {', '.join(bad)}")


def _excluded(config: Config, path: Path) -> bool:
    """Whether `path` or a folder above it matches the configured `exclude` globs.

    The command line checks a file it is given by name whatever `exclude` says; an
    editor opens every file it shows, so here `exclude` keeps fixtures and vendored
    code quiet, as it does for `autograd-fix src/`.
    """
    if not config.exclude or config.root is None:
        return False
    try:
        return is_excluded(path, config.exclude, config.root)
    except ExcludePatternError:  # load_config reports it; an invalid glob excludes nothing
        return False


def analyse(text: str, version: int | None, path: str, settings: DocumentSettings) -> DocumentAnalysis:
    """Lint one buffer; every failure becomes `problem`, never an exception."""
    analysis = DocumentAnalysis(text=text, version=version, path=path, settings=settings)
    if settings.excluded:
        return analysis
    rules = settings.rules()
    if uses_torch(text):  # a torch buffer's syntax is checked even where no rule's prefilter admits it
        # CPython's own parser first: it reports a half-typed buffer precisely, and it
        # refuses nesting so deep that libcst's parser would overflow the stack and take
        # the whole server down with it (the buffer is whatever the user typed)
        analysis.problem = _python_problem(text)
        if analysis.problem is not None:
            return analysis
    try:
        result = check_source(text, rules, path=path, options=settings.options(), compute_fix=False)
    except EngineError as error:
        analysis.problem = Problem(f"autograd-fix cannot analyse this file: {error}", Span(1, 1, 1, 1))
        return analysis
    except RecursionError:
        analysis.problem = _too_deep()
        return analysis
    analysis.findings = result.findings
    analysis.module = result.module
    return analysis


def _too_deep() -> Problem:
    return Problem("autograd-fix cannot analyse this file: it nests too deeply", Span(1, 1, 1, 1))


def _python_problem(text: str) -> Problem | None:
    """Why CPython cannot parse the buffer, and where; None when it can."""
    try:
        ast.parse(text)
    except SyntaxError as error:
        line = error.lineno or 1
        column = max(error.offset or 1, 1)
        end_line = error.end_lineno or line
        end_column = max((error.end_offset or column + 1) - 1, column if end_line == line else 1)
        return Problem(f"autograd-fix cannot analyse this file: syntax error: {error.msg}", Span(line, column, end_line, end_column))
    except (RecursionError, MemoryError):
        return _too_deep()
    except ValueError as error:  # NUL bytes
        return Problem(f"autograd-fix cannot analyse this file: {error}", Span(1, 1, 1, 1))
    return None


def fixed_text(analysis: DocumentAnalysis, index: int) -> str | None:
    """The document with only finding `index`'s fix applied; None when it cannot be made safely."""
    if index not in analysis.fixed_texts:
        analysis.fixed_texts[index] = _fixed_text(analysis, analysis.findings[index])
    return analysis.fixed_texts[index]


def _fixed_text(analysis: DocumentAnalysis, finding: Finding) -> str | None:
    if not isinstance(finding.fix, TextFix):
        return None
    text = apply_fix(analysis.text, finding.fix)
    try:
        validate_python(text)
    except EngineError:  # a fix that does not compile alone is not offered
        return None
    return text if text != analysis.text else None
