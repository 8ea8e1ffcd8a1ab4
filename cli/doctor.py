"""`autograd-fix doctor SCRIPT [ARGS...]`: run the script once, bounded and instrumented,
in the verification sandbox, and report the autograd bugs the run showed.

    autograd-fix doctor [--timeout S] [--format text|json] [--isolation ...] SCRIPT [ARGS...]

Each finding has its line, its rule code and what was measured; each also says whether
the static rules report the same code there (``static: also found`` / ``static:
missed``), which makes the run an oracle for the static rules' recall.

Exit codes: 0 no finding, 1 findings, 2 usage error, 3 the run could not be made (the
sandbox refused, the worker failed, the run timed out or ran out of memory).
"""

from __future__ import annotations

import ast
import enum
import json
import os
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.text import Text

from autograd_fix.cli.verify_command import _read, _usage, output_console
from autograd_fix.codemods.engine import check_source
from autograd_fix.codemods.registry import all_rules
from autograd_fix.codemods.safe_text import printable
from autograd_fix.verification.bounded import describe
from autograd_fix.verification.doctor.findings import TITLES, Diagnosis, Finding
from autograd_fix.verification.trust import Isolation, UserConfigError, load_user_settings

EXIT_CLEAN, EXIT_FINDINGS, EXIT_UNAVAILABLE = 0, 1, 3
#: a module-level finding and a static one this many lines apart name the same statement
_NEAR_LINES = 2

doctor_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class Format(str, enum.Enum):
    text = "text"
    json = "json"


def _scopes(text: str) -> list[tuple[int, int]]:
    """(first, last) lines of every function in `text`."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    return [(n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def static_agreement(finding: Finding, text: str | None, static: list[tuple[str, int]]) -> bool | None:
    """Whether a static finding of the same code names the same site: the same line, or
    a line of the same innermost function (AGF001 reports the evaluation function's
    ``def``); None when the file could not be read."""
    if text is None:
        return None
    lines = [line for code, line in static if code == finding.code]
    if any(abs(line - finding.line) <= _NEAR_LINES for line in lines):
        return True
    enclosing = [s for s in _scopes(text) if s[0] <= finding.line <= s[1]]
    if not enclosing:
        return False
    first, last = max(enclosing)  # the innermost: the latest start
    return any(first <= line <= last for line in lines)


def _static_findings(text: str, path: str) -> list[tuple[str, int]]:
    try:
        result = check_source(text, all_rules(), path=path, compute_fix=False)
    except Exception:  # noqa: BLE001 - a file the static engine cannot parse: no agreement to tell
        return []
    return [(f.code, f.span.line) for f in result.findings]


def _texts(diagnosis: Diagnosis, script: Path, text: str) -> dict[str, str | None]:
    root = str(script.resolve())[: -len(diagnosis.script)] if str(script.resolve()).endswith(diagnosis.script) else None
    texts: dict[str, str | None] = {diagnosis.script: text}
    for finding in diagnosis.findings:
        if finding.path in texts:
            continue
        texts[finding.path] = None
        if root and not os.path.isabs(finding.path) and not finding.path.startswith(".."):
            try:
                texts[finding.path] = Path(root, finding.path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                pass
    return texts


@doctor_app.command(no_args_is_help=True, context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": ["-h", "--help"]})
def doctor(
    script: Path = typer.Argument(..., metavar="SCRIPT", help="The training script, run as `python SCRIPT ARGS...` would.", show_default=False),
    args: Optional[list[str]] = typer.Argument(None, metavar="[ARGS]...", help="Its arguments (default: `argv` of [tool.autograd-fix.verify]).", show_default=False),
    timeout: float = typer.Option(60.0, "--timeout", metavar="SECONDS", min=0.1, help="Seconds allowed for the run."),
    output_format: Format = typer.Option(Format.text, "--format", help="text or json."),
    isolation: Optional[Isolation] = typer.Option(
        None, "--isolation", help="How the run is confined: auto, required or off (a repository's pyproject.toml cannot lower it).",
    ),
    pass_env: Optional[list[str]] = typer.Option(None, "--pass-env", metavar="NAME", help="An environment variable the run keeps (repeatable)."),
) -> None:
    """Run SCRIPT once, shortened as verification shortens it (loops that train stop
    after a few iterations), under instrumentation, in the verification sandbox; report
    each autograd bug the run showed with its line, rule code and measured evidence.

    Exit codes: 0 no finding, 1 findings, 2 usage error, 3 the run could not be made.
    """
    from autograd_fix.cli.verify_patches import say_isolation_notice
    from autograd_fix.verification import Verifier, WorkerError
    from autograd_fix.verification.doctor.diagnose import diagnose

    if not script.is_file():
        raise _usage(f"{script}: no such file")
    text = _read(script)
    try:
        user = load_user_settings().with_flags(isolation.value if isolation else None, pass_env or ())
    except UserConfigError as error:
        raise _usage(str(error)) from None
    verifier = None
    try:
        verifier = Verifier()
    except WorkerError:
        pass  # diagnose reports the failure
    try:
        diagnosis = diagnose(str(script), text, list(args) if args else None, timeout=timeout, verifier=verifier, user=user)
        say_isolation_notice(verifier)
    finally:
        if verifier is not None:
            verifier.close()
    texts = _texts(diagnosis, script, text)
    statics = {path: _static_findings(source, path) for path, source in texts.items() if source is not None}
    agreement = [static_agreement(f, texts.get(f.path), statics.get(f.path, [])) for f in diagnosis.findings]
    console = output_console()
    if output_format is Format.json:
        data = diagnosis.to_json()
        for finding, agrees in zip(data["findings"], agreement):
            finding["static"] = {True: "also found", False: "missed", None: "unknown"}[agrees]
        console.print_json(json.dumps(data, default=str))
    else:
        render(diagnosis, agreement, console)
    if diagnosis.status not in ("finished", "crashed"):
        raise typer.Exit(EXIT_UNAVAILABLE)
    raise typer.Exit(EXIT_FINDINGS if diagnosis.findings else EXIT_CLEAN)


def render(diagnosis: Diagnosis, agreement: list[bool | None], console: Console) -> None:
    """The run's line, then one line per finding (``path:line CODE message``)."""
    shortened = describe(list(diagnosis.shortened))
    measures = diagnosis.measures
    counts = ""
    if measures.get("backward_passes") is not None:
        counts = f"; {measures['backward_passes']} backward passes, {measures['optimizer_steps']} optimizer steps"
    head = printable(f"{diagnosis.script}: {diagnosis.detail}{' (shortened: ' + shortened + ')' if shortened else ''}{counts}")
    if not diagnosis.isolated:
        head += " [run NOT isolated]"
    console.print(Text(head))
    for finding, agrees in zip(diagnosis.findings, agreement):
        static = {True: "static: also found", False: "static: missed", None: ""}[agrees]
        line = Text.assemble((f"{printable(finding.path)}:{finding.line}", "bold"), " ", (finding.code, "bold red"),
                             f" {printable(finding.message)}")
        if static:
            line.append(f" [{static}]", style="dim")
        console.print(line)
    if diagnosis.status in ("finished", "crashed"):
        missed = sum(1 for agrees in agreement if agrees is False)
        noun = "finding" if len(diagnosis.findings) == 1 else "findings"
        console.print(Text(f"{len(diagnosis.findings)} {noun}" + (f" ({missed} the static rules miss)" if missed else "")))


__all__ = ["TITLES", "doctor_app", "render", "static_agreement"]
