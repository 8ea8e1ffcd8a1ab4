"""`autograd-fix verify`: run two versions of a file and judge the patch, or gradcheck
every custom autograd.Function in one file.

    autograd-fix verify ORIGINAL REWRITTEN [--rule CODE] [--entry NAME]
                        [--device auto|cpu|cuda] [--timeout S] [--format text|json]
    autograd-fix verify FILE --gradcheck

Exit codes: 0 accepted (or every Function passes gradcheck), 1 rejected (or a Function
fails), 3 unverified (or no Function could be checked), 2 usage error. The main app
dispatches ``verify ...`` argv to `verify_app`; it may pass a warm
`autograd_fix.verification.Verifier` as click's context ``obj`` to reuse one worker.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from autograd_fix.cli.config import ConfigError, load_config
from autograd_fix.cli.notebook import is_notebook, load_notebook
from autograd_fix.codemods.source import SourceError, read_source
from autograd_fix.cli.verify_patches import ConfigNotes, say_interpreter, say_isolation_notice
from autograd_fix.verification import (
    EXIT_CODES, UNVERIFIED, UnitError, Verdict, Verifier, WorkerError, find_units, gradcheck_file, verify_pair,
)
from autograd_fix.verification.interpreter import unavailable_reason
from autograd_fix.verification.trust import Isolation, UserConfigError, UserSettings, load_user_settings
from autograd_fix.verification.verdict import format_bytes

EXIT_USAGE = 2
_STYLE = {"accepted": "bold green", "rejected": "bold red", "unverified": "bold yellow"}

verify_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,  # the same plain help as `autograd-fix --help` and `server --help`
    context_settings={"help_option_names": ["-h", "--help"]},
)


class Device(str, enum.Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class Format(str, enum.Enum):
    text = "text"
    json = "json"


def _usage(message: str) -> typer.Exit:
    Console(stderr=True, soft_wrap=True).print(Text.assemble(("error:", "red"), f" {message}"), highlight=False)
    return typer.Exit(EXIT_USAGE)


def output_console() -> Console:
    """Standard output: on a terminal as wide as it is; in a pipe or a file, lines are
    never cut at a fixed 80 columns (soft wrap for text, unbounded width for tables)."""
    console = Console(highlight=False, soft_wrap=True, emoji=False)
    if not console.is_terminal:
        console = Console(highlight=False, soft_wrap=True, width=_PIPE_WIDTH, emoji=False)
    return console


#: the width a table may take when standard output is not a terminal (tables only grow
#: as wide as their content)
_PIPE_WIDTH = 100_000


def _read(path: Path) -> str:
    """The file's text as Python reads it (its encoding cookie, no BOM, its own line
    endings, so line numbers are the file's); for a notebook, its code cells as one
    program (IPython masked)."""
    return _read_program(path)[0]


def _read_program(path: Path) -> tuple[str, dict[str, str]]:
    """`_read`'s text, and for a notebook its masked IPython lines (placeholder -> input:
    verification runs them through IPython where it can, `verification.ipython_lines`)."""
    try:
        if is_notebook(str(path)):
            notebook = load_notebook(path.read_bytes())
            return notebook.source.text, dict(notebook.map.runnable)
        return read_source(str(path)).text, {}
    except (OSError, SourceError) as exc:
        raise _usage(f"cannot read {path}: {exc}") from exc


def _checks_for(rule: str | None) -> tuple[str, ...] | None:
    if rule is None:
        return None
    from autograd_fix.codemods.registry import rule_by_code

    found = rule_by_code(rule)
    if found is None:
        raise _usage(f"--rule {rule}: no such rule")
    contract = getattr(found, "contract", None)
    return tuple(contract.checks) if contract is not None else None


def _project_roles(original: Path) -> dict:
    """The `<role>-names` / `<role>-objects` of the ORIGINAL file's project, as the main
    command reads them (`load_config`), for binding the inputs of the runs; a
    pyproject.toml that cannot be read is a usage error, as it is there."""
    start = original.resolve().parent
    try:
        return load_config(start if start.exists() else Path.cwd()).roles.additions()
    except ConfigError as error:
        raise _usage(str(error)) from None


@verify_app.command(no_args_is_help=True)
def verify(
    ctx: typer.Context,
    files: list[Path] = typer.Argument(..., metavar="ORIGINAL REWRITTEN | FILE", help="Two versions of a file, or FILE with --gradcheck.", show_default=False),
    rule: Optional[str] = typer.Option(None, "--rule", metavar="CODE", help="Judge by this rule's contract (e.g. AGF001)."),
    entry: Optional[str] = typer.Option(None, "--entry", metavar="NAME", help="The unit to run: a function, Class.method, or __main__."),
    device: Device = typer.Option(Device.auto, "--device", help="Where function-mode inputs live: auto, cpu or cuda."),
    timeout: float = typer.Option(20.0, "--timeout", metavar="SECONDS", min=0.1, help="Seconds allowed per run."),
    output_format: Format = typer.Option(Format.text, "--format", help="text or json."),
    gradcheck: bool = typer.Option(False, "--gradcheck", help="gradcheck every custom autograd.Function in FILE.", show_default=False),
    isolation: Optional[Isolation] = typer.Option(
        None, "--isolation", help="How the runs are confined: auto, required or off (a repository's pyproject.toml cannot lower it).",
    ),
    pass_env: Optional[list[str]] = typer.Option(None, "--pass-env", metavar="NAME", help="An environment variable the runs keep (repeatable)."),
    python: Optional[str] = typer.Option(None, "--python", metavar="PATH", help="The Python the runs use (the project's; default: found)."),
) -> None:
    """Run the original and the rewritten version of a file and compare gradients,
    outputs and memory; or gradcheck every custom autograd.Function in one file.

    Exit codes: 0 accepted (or every Function passes gradcheck), 1 rejected (or a
    Function fails), 3 unverified (or no Function could be checked), 2 usage error.
    """
    console = output_console()
    # a caller holding a warm worker (the main app, tests) passes it as the context obj
    verifier = ctx.obj if isinstance(ctx.obj, Verifier) else None
    try:
        user = load_user_settings().with_flags(isolation.value if isolation else None, pass_env or (), python)
    except UserConfigError as error:
        raise _usage(str(error)) from None
    if gradcheck:
        if len(files) != 1:
            raise _usage("--gradcheck takes exactly one FILE")
        raise typer.Exit(_gradcheck(files[0], timeout, output_format, console, verifier, user))
    if len(files) != 2:
        raise _usage("expected ORIGINAL and REWRITTEN (or FILE --gradcheck)")
    (original, original_ipython), (rewritten, rewritten_ipython) = _read_program(files[0]), _read_program(files[1])
    checks = _checks_for(rule)
    roles = _project_roles(files[0])
    try:
        find_units(original, rewritten, path=str(files[0]), entry=entry)
    except UnitError as exc:
        if entry is not None:
            raise _usage(str(exc)) from exc
    own, unavailable = _own_verifier(verifier, files[0], user, rule.upper() if rule else None)
    verifier = verifier or own
    try:
        verdict = unavailable or verify_pair(
            original,
            rewritten,
            path=str(files[0].resolve()),
            rule=rule.upper() if rule else None,
            entry=entry,
            device=device.value,
            timeout=timeout,
            checks=checks,
            verifier=verifier,
            roles=roles,
            user=user,
            ipython_lines={**original_ipython, **rewritten_ipython},
        )
        say_isolation_notice(verifier)
        ConfigNotes().say(verdict)
    finally:
        if own is not None:
            own.close()
    if output_format is Format.json:
        console.print_json(json.dumps(verdict.to_json(), default=str))
    else:
        render_verdict(verdict, console)
    raise typer.Exit(EXIT_CODES.get(verdict.verdict, 3))


def render_verdict(verdict: Verdict, console: Console) -> None:
    """The verdict line, then per unit its checks and what each side measured."""
    console.print(Text.assemble((str(verdict.verdict), _STYLE[verdict.verdict]), f": {verdict.full_reason}"))
    for unit in verdict.units:
        # the verdict line already quotes the reason of a single unit, or of the unit
        # that decided it: said once is enough
        told = unit.reason in verdict.reason
        line = Text.assemble("  ", (unit.name, "bold"), f" ({unit.mode}): ", (str(unit.verdict), _STYLE[unit.verdict]))
        if not told:
            line.append(f" - {unit.reason}")
        console.print(line)
        checks = unit.evidence.get("checks") or []
        if checks:
            table = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
            table.add_column("check")
            table.add_column("result")
            table.add_column("detail")
            for check in checks:
                style = {"pass": "green", "fail": "red"}.get(check["status"], "yellow")
                table.add_row(Text(check["check"]), Text(check["status"], style=style), Text(check["detail"]))
            console.print(table)
        sides = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
        sides.add_column("")
        sides.add_column("original")
        sides.add_column("rewritten")
        orig, rew = unit.evidence.get("original", {}), unit.evidence.get("rewritten", {})
        rows = [
            ("run", lambda e: f"{e.get('status', '?')} in {e.get('wall_s', 0):.2f} s"),
            ("device", lambda e: str(e.get("device") or "-")),
            ("raised", lambda e: f"{e['exception']['type']}" if e.get("exception") else "-"),
            ("retained graph", lambda e: format_bytes((e.get("measured") or {}).get("retained_graph_bytes"))),
            ("graph at peak", lambda e: format_bytes((e.get("measured") or {}).get("peak_graph_bytes"))),
            ("graph nodes", lambda e: str((e.get("measured") or {}).get("graph_nodes", "-"))),
            ("peak memory", lambda e: format_bytes((e.get("measured") or {}).get("peak_bytes"))),
            ("backward / steps", lambda e: f"{(e.get('measured') or {}).get('backward_passes', '-')} / {(e.get('measured') or {}).get('optimizer_steps', '-')}"),
        ]
        if orig or rew:
            for label, get in rows:
                sides.add_row(label, Text(get(orig)), Text(get(rew)))
            console.print(sides)


def _own_verifier(
    verifier: Verifier | None, path: Path, user: UserSettings, rule: str | None = None,
) -> tuple[Verifier | None, Verdict | None]:
    """A worker of our own (to hear whether its runs were isolated) under the Python
    chosen for `path`'s project, unless the caller passed one; else the verdict that
    says why none could start."""
    if verifier is not None:
        return None, None
    try:
        own = Verifier.for_project(str(path), user)
    except WorkerError as error:
        return None, Verdict(UNVERIFIED, unavailable_reason(error), rule, ())
    say_interpreter(own)
    return own, None


def _gradcheck(
    path: Path, timeout: float, output_format: Format, console: Console, verifier: Verifier | None, user: UserSettings,
) -> int:
    own, unavailable = _own_verifier(verifier, path, user)
    verifier = verifier or own
    try:
        reports = [{"name": "<module>", "passed": None, "error": unavailable.reason, "inputs": None}] if unavailable else \
            gradcheck_file(_read(path), path=str(path.resolve()), timeout=timeout, verifier=verifier)
        say_isolation_notice(verifier)
    finally:
        if own is not None:
            own.close()
    if output_format is Format.json:
        console.print_json(json.dumps({"file": str(path), "functions": reports}, default=str))
    else:
        if not reports:
            console.print(Text(f"{path}: no custom torch.autograd.Function found"))
        for report in reports:
            state = {True: ("passed", "bold green"), False: ("failed", "bold red"), None: ("unchecked", "bold yellow")}[report.get("passed")]
            tail = f" - {report['error']}" if report.get("error") else ""
            inputs = f" ({report['inputs']})" if report.get("inputs") else ""
            console.print(Text.assemble(f"{report['name']}: ", state, f"{inputs}{tail}"))
    if any(r.get("passed") is False for r in reports):
        return EXIT_CODES["rejected"]
    if not reports or any(r.get("passed") is None for r in reports):
        return EXIT_CODES["unverified"]
    return EXIT_CODES["accepted"]
