"""`autograd-fix doctor SCRIPT [ARGS...]`: run the script once, bounded and instrumented,
in the verification sandbox, and report the autograd bugs the run showed.

    autograd-fix doctor [--diff | --apply] [--timeout S] [--format text|json|sarif] [--exit-zero]
                        [--plot FILE.svg] [--driver SCRIPT] [--isolation ...] SCRIPT [ARGS...]

Each finding has its line, its rule code and what was measured; each also says whether
the static rules report the same code there (``static: also found`` / ``static:
missed``), which makes the run an oracle for the static rules' recall.

With --diff / --apply, each finding a rule can fix goes to that rule's fix at its site
(`cli.doctor_fixes`), verified and composed as the main command's fixes are.

The text report ends with a compact chart of saved-tensor memory and live autograd nodes
per backward pass; --plot writes the same as an SVG picture, and with --diff/--apply runs
the fixed script once more to draw it next to the original (`cli.doctor_plot`).

Exit codes, Ruff's as the main command's: 0 no finding remains, 1 findings remain (with
--apply: findings whose fix was not written), 2 errors (usage; the run could not be made:
the sandbox refused, the worker failed, the run timed out or ran out of memory; a file
could not be written); --exit-zero turns 1 into 0.
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

from autograd_fix.cli.apply_files import Applier, DecisionNotes
from autograd_fix.cli.config import ConfigLookup
from autograd_fix.cli.doctor_fixes import DoctorFiles, doctor_files, fix_note, project_root
from autograd_fix.cli.doctor_plot import runs, svg, terminal_chart
from autograd_fix.cli.doctor_sarif import doctor_sarif
from autograd_fix.cli.progress import progress_console
from autograd_fix.cli.render import file_diff, print_diff, verdict_lines
from autograd_fix.cli.verify_command import _read, _usage, output_console
from autograd_fix.cli.verify_patches import VerifySettings, verify_and_compose
from autograd_fix.cli.writes import allowed_roots
from autograd_fix.codemods.engine import check_source
from autograd_fix.codemods.registry import all_rules
from autograd_fix.codemods.safe_text import printable
from autograd_fix.verification.bounded import describe
from autograd_fix.verification.doctor.outcome import TITLES, Diagnosis, Finding
from autograd_fix.verification.trust import Isolation, UserConfigError, load_user_settings

#: Ruff's exit codes, as the main command: 2 also when the run could not be made
EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
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
    sarif = "sarif"


def _scopes(text: str) -> list[tuple[int, int]]:
    """(first, last) lines of every function in `text`."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    return [(n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _blocks(text: str) -> list[tuple[int, int]]:
    """(first, last) lines of every loop and `with` statement in `text`."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    kinds = (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)
    return [(n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree) if isinstance(n, kinds)]


def static_agreement(finding: Finding, text: str | None, static: list[tuple[str, int]]) -> bool | None:
    """Whether a static finding of the same code names the same site: the same line, or
    a line of the same innermost function (AGF001 reports the evaluation function's
    ``def``); None when the file could not be read or no static rule has the code (DOC)."""
    if text is None or not finding.code.startswith("AGF"):
        return None
    lines = [line for code, line in static if code == finding.code]
    if any(abs(line - finding.line) <= _NEAR_LINES for line in lines):
        return True
    if any(first in lines and first <= finding.line <= last for first, last in _blocks(text)):
        return True  # inside the loop or `with` the static finding heads (AGF001 wraps the loop)
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
    root = project_root(script, diagnosis)
    texts: dict[str, str | None] = {} if diagnosis.via else {diagnosis.script: text}
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
    diff: bool = typer.Option(False, "--diff", help="Show the verified fixes of the findings as a unified diff; write nothing."),
    apply: bool = typer.Option(False, "--apply", help="Write the fixes verification accepted."),
    timeout: float = typer.Option(60.0, "--timeout", metavar="SECONDS", min=0.1, help="Seconds allowed for the run."),
    verify_timeout: float = typer.Option(20.0, "--verify-timeout", metavar="SECONDS", min=0.1, help="Seconds allowed for each verification run."),
    output_format: Format = typer.Option(Format.text, "--format", help="text, json or sarif."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when findings remain (errors still exit 2)."),
    isolation: Optional[Isolation] = typer.Option(
        None, "--isolation", help="How the run is confined: auto, required or off (a repository's pyproject.toml cannot lower it).",
    ),
    pass_env: Optional[list[str]] = typer.Option(None, "--pass-env", metavar="NAME", help="An environment variable the run keeps (repeatable)."),
    driver: Optional[Path] = typer.Option(
        None, "--driver", metavar="SCRIPT",
        help="Run this project script to watch SCRIPT's code (default for a file that runs nothing itself: a project script found that imports it).",
    ),
    plot: Optional[Path] = typer.Option(
        None, "--plot", metavar="FILE.svg",
        help="Write saved-tensor memory and live autograd nodes per backward pass as an SVG picture (with --diff/--apply: "
             "also of a second run of the fixed script).",
    ),
) -> None:
    """Run SCRIPT once, shortened as verification shortens it (loops that train stop
    after a few iterations), under instrumentation, in the verification sandbox; report
    each autograd bug the run showed with its line, rule code and measured evidence.
    With --diff or --apply, each finding a rule can fix gets that rule's fix at its site,
    verified as the main command verifies fixes; only accepted fixes are shown or written.

    Exit codes (Ruff's): 0 no finding remains, 1 findings remain, 2 error (usage, or the
    run could not be made); --exit-zero: 0 unless an error.
    """
    from autograd_fix.cli.verify_patches import say_isolation_notice
    from autograd_fix.verification import Verifier, WorkerError
    from autograd_fix.verification.doctor.diagnose import diagnose

    if diff and apply:
        raise _usage("--diff and --apply cannot be combined")
    if not script.is_file():
        raise _usage(f"{script}: no such file")
    text = _read(script)
    try:
        user = load_user_settings().with_flags(isolation.value if isolation else None, pass_env or ())
    except UserConfigError as error:
        raise _usage(str(error)) from None
    mode = "apply" if apply else "diff" if diff else "report"
    verifier = None
    try:
        verifier = Verifier()
    except WorkerError:
        pass  # diagnose reports the failure
    try:
        diagnosis = diagnose(str(script), text, list(args) if args else None, timeout=timeout, verifier=verifier, user=user,
                             driver=str(driver) if driver else None)
        say_isolation_notice(verifier)
        texts = _texts(diagnosis, script, text)
        statics = {path: _static_findings(source, path) for path, source in texts.items() if source is not None}
        agreement = [static_agreement(f, texts.get(f.path), statics.get(f.path, [])) for f in diagnosis.findings]
        files = doctor_files(diagnosis, project_root(script, diagnosis), agreement, ConfigLookup(user),
                             fixes=mode != "report", fix_texts=output_format is Format.sarif)
        applier = Applier(allowed_roots([str(script.resolve().parent)])) if mode == "apply" else None
        if mode != "report" and any(r.plan_id for r in files.records.values()):
            settings = VerifySettings(timeout=verify_timeout, user=user)
            verify_and_compose(files.outcomes, files.jobs, settings, False, progress_console(), verifier=verifier, follow_ons=False,
                               on_decided=applier or DecisionNotes())
        after = None
        fixed = _fixed_script(files, script)
        if plot is not None and fixed is not None and (not diagnosis.via or mode == "apply"):  # a driver reads files from disk
            after = diagnose(str(script), fixed, list(args) if args else None, timeout=timeout, verifier=verifier, user=user,
                             driver=str(driver) if driver else None)
    finally:
        if verifier is not None:
            verifier.close()
    console = output_console()
    drawn = runs(diagnosis.measures.get("series") or [], (after.measures.get("series") or []) if after is not None else None)
    if plot is not None:
        try:
            plot.write_text(svg(drawn, diagnosis.script), encoding="utf-8")
        except OSError as error:
            raise _usage(f"{plot}: cannot write the picture: {error}") from None
    failed = diagnosis.status not in ("finished", "crashed")
    errors = [(o.path, o.error) for o in files.outcomes if o.error] + ([(diagnosis.script, diagnosis.detail)] if failed else [])
    written = set(applier.applied_ids) if applier is not None else set()
    for path, message in (applier.refused if applier is not None else []):
        errors.append((path, message))
    if output_format is Format.json:
        console.print_json(json.dumps(doctor_json(diagnosis, agreement, files, mode, written), default=str))
    elif output_format is Format.sarif:
        console.print(Text(doctor_sarif(diagnosis, files, errors, agreement, written if mode == "apply" else None)), soft_wrap=True)
    else:
        chart = terminal_chart(drawn) if any(len(run.series) > 1 for run in drawn) else []
        render(diagnosis, agreement, console, files, written, chart, notes=mode != "report")
        if mode == "diff":
            for outcome in files.outcomes:
                for line in verdict_lines(outcome):
                    console.print(Text(line, style="dim"))
                patch = file_diff(outcome)
                if patch:
                    print_diff(console, patch)
    for path, message in errors:
        typer.echo(f"error: {printable(path)}: {printable(message)}", err=True)
    remaining = sum(1 for record in files.records.values() if id(record) not in written)
    if errors:
        raise typer.Exit(EXIT_ERROR)
    raise typer.Exit(EXIT_CLEAN if exit_zero or not remaining else EXIT_FINDINGS)


def _fixed_script(files: DoctorFiles, script: Path) -> str | None:
    """The script's text with the accepted fixes composed, when any changed it."""
    target = os.path.realpath(script)
    for outcome in files.outcomes:
        if os.path.realpath(outcome.path) == target and outcome.fixed is not None and outcome.fixed != outcome.original:
            return outcome.fixed
    return None


def doctor_json(diagnosis: Diagnosis, agreement: list[bool | None], files: DoctorFiles, mode: str, written: set[int]) -> dict:
    """The JSON report: the diagnosis, each finding with its static agreement and, with
    --diff or --apply, what became of its fix; the diffs of --diff."""
    data = diagnosis.to_json()
    for index, (finding, agrees) in enumerate(zip(data["findings"], agreement)):
        finding["static"] = {True: "also found", False: "missed", None: "unknown"}[agrees]
        record = files.records.get(index)
        if mode == "report" or record is None:
            continue
        verdict = record.verification
        finding["fix"] = {
            "plan": record.plan_id, "applicability": record.fix_applicability,
            "verdict": verdict.verdict.value if verdict else None, "reason": verdict.full_reason if verdict else files.reasons.get(index),
            "applied": id(record) in written if mode == "apply" else None, "goes_in": record.fix_applies,
        }
    if mode == "diff":
        data["diffs"] = {o.path: d for o in files.outcomes if (d := file_diff(o))}
    return data


def render(
    diagnosis: Diagnosis, agreement: list[bool | None], console: Console, files: DoctorFiles | None = None,
    written: set[int] | None = None, chart: list[str] | None = None, notes: bool = True,
) -> None:
    """The run's line, then one line per finding (``path:line CODE message``); with
    `files` (--diff, --apply), a second line per finding: what became of its fix; then
    the `chart` (`doctor_plot.terminal_chart`), and the count last."""
    shortened = describe(list(diagnosis.shortened))
    measures = diagnosis.measures
    counts = ""
    if measures.get("backward_passes") is not None:
        counts = f"; {measures['backward_passes']} backward passes, {measures['optimizer_steps']} optimizer steps"
    via = f" ({diagnosis.via})" if diagnosis.via else ""
    head = printable(f"{diagnosis.script}{via}: {diagnosis.detail}{' (shortened: ' + shortened + ')' if shortened else ''}{counts}")
    if not diagnosis.isolated:
        head += " [run NOT isolated]"
    console.print(Text(head))
    for index, (finding, agrees) in enumerate(zip(diagnosis.findings, agreement)):
        static = {True: "static: also found", False: "static: missed", None: ""}[agrees]
        record = files.records.get(index) if files is not None else None
        where = f"cell {record.cell}:{record.line}" if record is not None and record.cell is not None else str(finding.line)
        line = Text.assemble((f"{printable(finding.path)}:{where}", "bold"), " ", (finding.code, "bold red"),
                             f" {printable(finding.message)}")
        if static:
            line.append(f" [{static}]", style="dim")
        console.print(line)
        if notes and record is not None and files is not None:
            note = fix_note(record, files.reasons.get(index))
            if written is not None and id(record) in written:
                note = note.replace("fix goes in:", "fixed:", 1)
            console.print(Text(f"  {printable(note)}", style="dim"))
    for line in chart or ():
        console.print(Text(line, style="dim"))
    if diagnosis.status in ("finished", "crashed"):
        missed = sum(1 for agrees in agreement if agrees is False)
        noun = "finding" if len(diagnosis.findings) == 1 else "findings"
        console.print(Text(f"{len(diagnosis.findings)} {noun}" + (f" ({missed} the static rules miss)" if missed else "")))


__all__ = ["TITLES", "doctor_app", "doctor_json", "render", "static_agreement"]
