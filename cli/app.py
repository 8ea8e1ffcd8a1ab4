"""`autograd-fix [--diff | --apply] PATH...` — the command-line tool.

Exit codes, Ruff's: 0 when no finding remains; 1 when findings remain (with `--diff`
every finding remains, since nothing is written; `--exit-zero` turns this off, and
`--exit-non-zero-on-fix` also gives 1 when `--apply` wrote a fix); 2 usage error, a
path that could not be read, parsed or safely fixed (each reported by name; the run
goes on), or a named path with no Python file in it; 128 + the signal's number when
interrupted (130 for Ctrl-C, 143 for SIGTERM), after saying which files were written.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import typer

from autograd_fix.cli.config import Config, ConfigError, ConfigLookup, parse_overrides
from autograd_fix.cli.discovery import ExcludePatternError
from autograd_fix.cli.interrupts import Interrupted, StopSignals
from autograd_fix.cli.progress import STATIC_PROGRESS_MIN_FILES, file_lines, progress_bar, run_progress_console
from autograd_fix.cli.runner import run_jobs  # light: the engine loads once a file is checked
from autograd_fix.verification.trust import Isolation, UserConfigError, UserSettings, load_user_settings

if TYPE_CHECKING:
    from rich.console import Console

    from autograd_fix.cli.apply_files import Applier
    from autograd_fix.cli.report_output import ReportSink
    from autograd_fix.cli.runner import FileOutcome

# Everything else loads where it is used (issue 20: `--help` and a cached run on a few
# small files must not pay for libcst, the rules, rich's progress bars or verification).

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class Color(str, enum.Enum):
    auto = "auto"
    always = "always"
    never = "never"


class Device(str, enum.Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class OutputFormat(str, enum.Enum):
    text = "text"
    json = "json"
    sarif = "sarif"
    github = "github"
    json_lines = "json-lines"
    junit = "junit"
    gitlab = "gitlab"


app = typer.Typer(add_completion=False, rich_markup_mode=None, context_settings={"help_option_names": ["-h", "--help"]})


def _split_codes(values: list[str] | None) -> list[str] | None:
    if values is None:
        return None
    return [code.strip().upper() for value in values for code in value.split(",") if code.strip()]


def _console(color: Color, stderr: bool = False) -> Console:
    from rich.console import Console

    force = {Color.always: True, Color.never: False}.get(color)
    no_color = color is Color.never or (color is Color.auto and "NO_COLOR" in os.environ)
    # no `:name:` emoji codes: nothing the tool prints means one (a path `:fire:.py` would
    # turn into a flame), and rich's emoji table is not loaded (start-up)
    return Console(stderr=stderr, force_terminal=force, no_color=no_color, highlight=False, soft_wrap=True, emoji=False)


class _LazyConsole:
    """A console made (and rich imported) at its first `print`: most runs print nothing
    on standard error."""

    def __init__(self, make: Callable[[], Console]) -> None:
        self._make = make
        self._console: Console | None = None

    def print(self, *objects: object, **options: Any) -> None:
        if self._console is None:
            self._console = self._make()
        self._console.print(*objects, **options)


def _display_path(path: Path) -> str:
    if path.is_absolute():
        try:
            return path.relative_to(Path.cwd()).as_posix()
        except ValueError:
            return path.as_posix()
    return path.as_posix()


def _config_lookup(user: UserSettings, items: list[str], isolated: bool) -> ConfigLookup:
    """The run's configuration lookup from `--config` items: one PATH (a file that
    exists, or an item without '=') replaces the nearest configuration; KEY=VALUE items
    go over whichever is used."""
    files = [item for item in items if "=" not in item or Path(item).is_file()]
    if len(files) > 1:
        raise ConfigError(f"--config names more than one configuration file: {', '.join(files)}")
    overrides = parse_overrides([item for item in items if item not in files])
    config_file = Path(files[0]) if files else None
    if config_file is not None and isolated:
        raise ConfigError("--config PATH and --isolated cannot be combined")
    return ConfigLookup(user, overrides=overrides, isolated=isolated, config_file=config_file)


def _check_codes(*prefix_lists: list[str]) -> None:
    if not any(prefix_lists):
        return
    from autograd_fix.codemods.registry import unknown_codes

    for prefixes in prefix_lists:
        bad = unknown_codes(prefixes)
        if bad:
            raise _usage_error(f"unknown rule code or prefix: {', '.join(bad)} (see --list-rules)")


def _usage_error(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_ERROR)


@app.command()
def check(
    paths: Optional[list[str]] = typer.Argument(None, metavar="PATH", help="Files or folders (recursive over .py and .ipynb); '-' reads stdin."),
    diff: bool = typer.Option(False, "--diff", help="Show the fixes as a unified diff; write nothing."),
    apply: bool = typer.Option(False, "--apply", help="Write the fixes (with '-': fixed source to stdout)."),
    check_mode: bool = typer.Option(  # noqa: ARG001 (exit 1 on findings is the default now)
        False, "--check", help="Exit 1 when any finding remains (the default; kept for existing scripts and hooks).",
    ),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when findings remain (errors still exit 2)."),
    exit_non_zero_on_fix: bool = typer.Option(
        False, "--exit-non-zero-on-fix", help="Exit 1 when --apply wrote a fix, even if no finding remains.",
    ),
    config_items: Optional[list[str]] = typer.Option(
        None, "--config", metavar="PATH|KEY=VALUE",
        help="A configuration file to use instead of the nearest one, or a KEY=VALUE setting (TOML) over it (repeatable).",
    ),
    isolated: bool = typer.Option(False, "--isolated", help="Read no configuration file (defaults, flags and --config KEY=VALUE)."),
    show_settings: Optional[str] = typer.Option(None, "--show-settings", metavar="FILE", help="Show the settings FILE is checked with, and exit."),
    show_files: bool = typer.Option(False, "--show-files", help="List the files that would be checked, and exit."),
    force_exclude: Optional[bool] = typer.Option(
        None, "--force-exclude/--no-force-exclude",
        help="Apply exclude to paths named on the command line too (what pre-commit needs).",
    ),
    select: Optional[list[str]] = typer.Option(None, "--select", metavar="CODES", help="Only these codes or prefixes (AGF0)."),
    extend_select: Optional[list[str]] = typer.Option(
        None, "--extend-select", metavar="CODES", help="Codes or prefixes to select on top of the configured selection.",
    ),
    exclude: Optional[list[str]] = typer.Option(
        None, "--exclude", metavar="GLOB", help="Exclude these paths (gitignore-style globs) instead of the configured exclude.",
    ),
    extend_exclude: Optional[list[str]] = typer.Option(
        None, "--extend-exclude", metavar="GLOB", help="Exclude these paths as well as the configured exclude.",
    ),
    add_noqa: bool = typer.Option(
        False, "--add-noqa", help="Add a '# noqa: CODE' comment on the line of every finding, and exit.",
    ),
    statistics: bool = typer.Option(False, "--statistics", help="Count the findings per rule instead of listing them."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print the findings only: no summary line."),
    silent: bool = typer.Option(False, "--silent", "-s", help="Print nothing but errors; the exit code tells."),
    ignore: Optional[list[str]] = typer.Option(None, "--ignore", metavar="CODES", help="Skip these codes or prefixes."),
    unsafe_fixes: Optional[bool] = typer.Option(None, "--unsafe-fixes/--no-unsafe-fixes", help="Also apply unsafe fixes."),
    unverified_fixes: bool = typer.Option(
        False, "--unverified-fixes", help="Also apply fixes verification could not decide (unverified); never rejected ones.",
    ),
    output_format: OutputFormat = typer.Option(
        OutputFormat.text, "--format", help="text, json, json-lines, sarif, github, gitlab or junit.",
    ),
    output_file: Optional[str] = typer.Option(None, "--output-file", "-o", metavar="PATH", help="Write the report to PATH (atomically) instead of stdout."),
    color: Color = typer.Option(Color.auto, "--color", help="auto, always or never."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", metavar="N", min=1, help="Worker processes (default: all cores)."),
    stdin_filename: Optional[str] = typer.Option(None, "--stdin-filename", metavar="NAME", help="Name for source read from stdin."),
    list_rules: bool = typer.Option(False, "--list-rules", help="List every rule and exit."),
    explain: Optional[str] = typer.Option(None, "--explain", metavar="CODE", help="Show a rule's documentation."),
    version: bool = typer.Option(False, "--version", help="Show the version and exit."),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Run original and fixed code before accepting a fix (--diff/--apply)."),
    device: Device = typer.Option(Device.auto, "--device", help="Where verification runs: auto, cpu or cuda."),
    verify_timeout: float = typer.Option(20.0, "--verify-timeout", metavar="SECONDS", min=0.1, help="Seconds per verification run."),
    isolation: Optional[Isolation] = typer.Option(
        None, "--isolation", help="How verification runs are confined: auto, required or off (a repository's pyproject.toml cannot lower it).",
    ),
    pass_env: Optional[list[str]] = typer.Option(
        None, "--pass-env", metavar="NAME", help="An environment variable verification runs keep (repeatable).",
    ),
    python: Optional[str] = typer.Option(
        None, "--python", metavar="PATH", help="The Python verification runs under (the project's; default: found, see README).",
    ),
    max_file_size: Optional[int] = typer.Option(
        None, "--max-file-size", metavar="BYTES", min=1, help="Skip larger source files, each with an error (default 2000000).",
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the result cache."),
    cache_dir: Optional[str] = typer.Option(
        None, "--cache-dir", metavar="PATH",
        help="The result cache's folder (default: .autograd-fix_cache in the project root; env AUTOGRAD_FIX_CACHE_DIR).",
    ),
    target_torch: Optional[str] = typer.Option(
        None, "--target-torch", metavar="VERSION",
        help="Oldest PyTorch the code must run on (e.g. 2.1); fixes never use newer APIs.",
    ),
) -> None:
    """Find PyTorch autograd pitfalls and fix them.

    \b
    Commands:
      autograd-fix [OPTIONS] PATH...  find (and with --diff/--apply fix) pitfalls
      autograd-fix verify ORIGINAL REWRITTEN
                                      compare two versions of a file
      autograd-fix verify FILE --gradcheck
                                      gradcheck its custom autograd Functions
      autograd-fix doctor SCRIPT [ARGS]...
                                      find autograd bugs by watching a short run
      autograd-fix server             the language server (LSP over stdio)
    Each command takes -h/--help.
    """
    from autograd_fix.codemods.safe_text import printable

    if version:
        from autograd_fix import __version__

        typer.echo(f"autograd-fix {__version__}")
        raise typer.Exit(EXIT_OK)
    if list_rules:
        if output_format is OutputFormat.json:
            from autograd_fix.cli.report_formats import rules_json
            from autograd_fix.codemods.registry import all_rules

            typer.echo(rules_json(all_rules()), nl=False)
            raise typer.Exit(EXIT_OK)
        from autograd_fix.cli.rules_doc import rules_table_text

        typer.echo(rules_table_text())
        raise typer.Exit(EXIT_OK)
    if explain is not None:
        from autograd_fix.cli.rules_doc import explain_text
        from autograd_fix.codemods.registry import rule_by_code

        rule = rule_by_code(explain)
        if rule is None:
            raise _usage_error(f"unknown rule code {explain!r} (see --list-rules)")
        typer.echo(explain_text(rule))
        raise typer.Exit(EXIT_OK)
    if show_settings is not None:
        from autograd_fix.cli.file_settings import settings_text

        try:
            user = load_user_settings().with_flags(isolation.value if isolation else None, pass_env or (), python)
            config = _config_lookup(user, config_items or [], isolated).for_path(Path(show_settings))
        except (ConfigError, UserConfigError) as error:
            raise _usage_error(str(error))
        for line in settings_text(show_settings, config).splitlines():
            typer.echo(printable(line))
        raise typer.Exit(EXIT_OK)
    if diff and apply:
        raise _usage_error("--diff and --apply cannot be combined")
    if add_noqa and (diff or apply or paths == ["-"]):
        raise _usage_error("--add-noqa cannot be combined with --diff, --apply or stdin")
    paths = paths or ["."]  # as Ruff: the current folder
    use_stdin = paths == ["-"]
    if "-" in paths and not use_stdin:
        raise _usage_error("'-' (stdin) cannot be combined with other paths")

    config_start = Path(stdin_filename).parent if (use_stdin and stdin_filename) else Path(paths[0] if not use_stdin else ".")
    try:
        user = load_user_settings().with_flags(isolation.value if isolation else None, pass_env or (), python)
        lookup = _config_lookup(user, config_items or [], isolated)
        start_config = lookup.for_path(config_start if config_start.exists() else Path.cwd())
    except (ConfigError, UserConfigError) as error:
        raise _usage_error(str(error))
    cli_selected = _split_codes(select)
    cli_ignored = _split_codes(ignore) or []
    cli_extended = _split_codes(extend_select) or []
    _check_codes(cli_selected or [], cli_ignored, cli_extended)
    excludes = ExcludeFlags(exclude, extend_exclude or [])
    from autograd_fix.codemods.torch_version import TorchVersion

    try:
        target_override = TorchVersion.parse(target_torch) if target_torch is not None else None
    except ValueError as error:
        raise _usage_error(f"--target-torch: {error}")
    mode = "apply" if apply else "diff" if diff else "report"
    structured = output_format in (OutputFormat.json, OutputFormat.sarif, OutputFormat.json_lines)

    verifying = verify and mode != "report"

    def settings(path: Path) -> Config:
        try:
            config = lookup.for_path(path)
        except ConfigError as error:
            raise _usage_error(str(error))
        _check_codes(config.select or [], config.ignore)
        return config

    from autograd_fix.cli.runner import Job
    from autograd_fix.codemods.project_index import ProjectIndex, project_root

    # the project index (other files' grad-disabling decorators, module classes): built
    # once, here, for every file of the run
    root = project_root([stdin_filename] if use_stdin and stdin_filename else [] if use_stdin else paths)
    try:
        project = ProjectIndex.build(root) if root is not None else None
    except (RecursionError, OSError):  # a tree too deep to walk: each file on its own, as without an index
        project = None

    def make_job(path: str, data: bytes | None = None) -> Job:
        config = start_config if data is not None else settings(Path(path))
        selected = cli_selected if cli_selected is not None else config.select
        if cli_extended:  # on top of the selection (all rules when none is configured)
            selected = [*selected, *cli_extended] if selected else None
        return Job(
            path=path,
            select=tuple(selected) if selected else None,
            ignore=tuple(cli_ignored + config.ignore + config.ignored_codes_for(Path(path))),
            unsafe_fixes=config.unsafe_fixes if unsafe_fixes is None else unsafe_fixes,
            compute_fix=(mode != "report" or structured) and not verifying,
            fix_diffs=output_format in (OutputFormat.json, OutputFormat.json_lines),
            data=data,
            target_torch=target_override or config.target_torch,
            roles=config.roles,
            project=project,
            fix_texts=output_format is OutputFormat.sarif,
            max_bytes=max_file_size or config.max_file_size,
        )

    errors: list[tuple[str, str]] = []
    warnings: list[tuple[str, str]] = []  # (path, message): not errors, but exit 2
    if use_stdin:
        _check_codes(start_config.select or [], start_config.ignore)
        job_list = [make_job(stdin_filename or "-", sys.stdin.buffer.read())]
    else:
        from autograd_fix.cli.file_settings import discover_per_path

        try:
            found = discover_per_path(paths, lookup, force_exclude, excludes.exclude, excludes.extend)
        except ExcludePatternError as error:
            raise _usage_error(f"--exclude/--extend-exclude: {error}")
        except ConfigError as error:
            raise _usage_error(str(error))
        errors.extend((missing, "no such file or folder") for missing in found.missing)
        errors.extend(found.problems)
        warnings.extend((path, f"No Python files found in {path}") for path in found.empty)
        job_list = [make_job(_display_path(path)) for path in found.files]
        if show_files:
            for job in job_list:
                typer.echo(printable(job.path))
            raise typer.Exit(EXIT_ERROR if errors or warnings else EXIT_OK)
    for note in lookup.notes():
        typer.echo(f"warning: {printable(note)}", err=True)
    if output_file is not None:
        from autograd_fix.cli.report_output import ReportOutputError, check_not_an_input, check_output_path

        try:
            check_output_path(output_file)
            check_not_an_input(output_file, [job.path for job in job_list])
        except ReportOutputError as error:
            raise _usage_error(str(error))
    workers = jobs or os.cpu_count() or 1
    from autograd_fix.cli.result_cache import ResultCache, default_cache_dir, run_cached

    # only plain reports use the cache: --diff and --apply need fixed texts and verdicts
    cache = None
    if not no_cache and mode == "report" and not use_stdin:
        cache = ResultCache(Path(cache_dir) if cache_dir else default_cache_dir(start_config.root))
    progress = run_progress_console(len(job_list), verifying)
    with StopSignals() as stops:
        applier = None
        if mode == "apply" and not use_stdin:
            from autograd_fix.cli.apply_files import Applier
            from autograd_fix.cli.writes import allowed_roots

            applier = Applier(allowed_roots(paths), stops)
        try:
            with progress_bar(progress, len(job_list), "checking files", more_than=STATIC_PROGRESS_MIN_FILES) as advance:
                outcomes = run_cached(
                    job_list, cache, lambda jobs: run_jobs(jobs, workers, advance, None if verifying else applier), advance,
                )
            if verifying:
                from autograd_fix.cli.apply_files import DecisionNotes
                from autograd_fix.cli.verify_patches import VerifySettings, verify_and_compose

                decided = applier or DecisionNotes()
                decided.expect(outcomes)
                decided.note = file_lines(progress, len(decided.candidates))
                settings = VerifySettings(
                    device=device.value, timeout=verify_timeout, jobs=jobs, user=user, unverified_fixes=unverified_fixes,
                    config=lookup.choice,
                )
                outcomes = verify_and_compose(outcomes, job_list, settings, bool(unsafe_fixes), progress, on_decided=decided)
        except Interrupted as stop:
            from autograd_fix.cli.apply_files import interrupt_report

            typer.echo(interrupt_report(stop, applier, mode), err=True)
            raise typer.Exit(stop.exit_code)
    if cache is not None and cache.warning is not None:  # one warning; not an error
        typer.echo(f"warning: {printable(cache.warning.message)}", err=True)
    if any(outcome.notebook is not None for outcome in outcomes):
        from autograd_fix.cli.notebook_check import cell_positions

        outcomes = [cell_positions(outcome) for outcome in outcomes]
    outcomes.sort(key=lambda outcome: outcome.path)
    errors.extend((o.path, o.error) for o in outcomes if o.error)
    warnings.extend((o.path, f"{o.path}: {note}") for o in outcomes for note in o.notes)

    if add_noqa:
        raise typer.Exit(_add_noqa(outcomes, errors, warnings, silent))
    stdin_data = job_list[0].data if use_stdin else None
    from autograd_fix.cli.report_output import ReportOutputError, ReportSink

    sink = ReportSink(output_file, lambda: _console(color))
    tally = _emit(
        outcomes, errors, mode=mode, output_format=output_format, sink=sink, color=color, stdin_data=stdin_data,
        applier=applier, warnings=warnings, verified_later=verify, verified=verifying if mode != "report" else None,
        verbosity=Verbosity(statistics=statistics, quiet=quiet or silent, silent=silent),
    )
    try:
        sink.close()
    except ReportOutputError as error:
        raise _usage_error(str(error))
    raise typer.Exit(tally.exit_code(exit_zero=exit_zero, non_zero_on_fix=exit_non_zero_on_fix))


def _add_noqa(outcomes: list[FileOutcome], errors: list[tuple[str, str]], warnings: list[tuple[str, str]], silent: bool) -> int:
    """`--add-noqa`: write the comments, say how many, exit 0 (2 when a file could not be
    read or written)."""
    from autograd_fix.cli.add_noqa import add_noqa
    from autograd_fix.codemods.safe_text import printable

    report, failed = add_noqa(outcomes)
    errors = [*errors, *failed]
    for path, message in errors:
        typer.echo(f"error: {printable(path)}: {printable(message)}", err=True)
    for _, message in warnings:
        typer.echo(f"warning: {printable(message)}", err=True)
    for path, why in report.skipped or []:
        typer.echo(f"note: {printable(path)}: {printable(why)}", err=True)
    if not silent:
        plural = "" if report.added == 1 else "s"
        typer.echo(f"Added {report.added} noqa comment{plural} in {report.files} file{'' if report.files == 1 else 's'}.")
    return EXIT_ERROR if errors or warnings else EXIT_OK


@dataclass(frozen=True)
class ExcludeFlags:
    """`--exclude` (replaces each configuration's `exclude`; None: not given) and
    `--extend-exclude` (added to it)."""

    exclude: list[str] | None
    extend: list[str]


@dataclass(frozen=True)
class Verbosity:
    """`--statistics` (counts per rule instead of the findings), `-q` (no summary line)
    and `-s` (nothing but errors)."""

    statistics: bool = False
    quiet: bool = False
    silent: bool = False


@dataclass(frozen=True)
class Tally:
    """What a run ended with, for its exit code: whether an error was reported, how many
    findings remain (not written by this run) and how many fixes were written."""

    errors: bool
    remaining: int
    fixed: int

    def exit_code(self, *, exit_zero: bool = False, non_zero_on_fix: bool = False) -> int:
        """Ruff's exit codes: 2 for errors, else 1 when findings remain (unless
        `exit_zero`) or, with `non_zero_on_fix`, when a fix was written; else 0."""
        if self.errors:
            return EXIT_ERROR
        if exit_zero:
            return EXIT_OK
        if self.remaining or (non_zero_on_fix and self.fixed):
            return EXIT_FINDINGS
        return EXIT_OK


def _emit(
    outcomes: list[FileOutcome],
    errors: list[tuple[str, str]],
    *,
    mode: str,
    output_format: OutputFormat,
    sink: ReportSink,
    color: Color,
    stdin_data: bytes | None,
    applier: Applier | None = None,
    warnings: list[tuple[str, str]] | None = None,
    verified_later: bool = False,
    verified: bool | None = None,
    verbosity: Verbosity = Verbosity(),
) -> Tally:
    """Report the run in `output_format`; what it ended with, for the exit code."""
    from autograd_fix.cli.render import print_findings, summary_line
    from autograd_fix.codemods.safe_text import printable

    err = _LazyConsole(lambda: _console(color, stderr=True))  # rich loads once something is printed
    warnings = warnings or []
    use_stdin = stdin_data is not None
    records = [record for outcome in outcomes for record in outcome.findings]
    fixable = sum(1 for r in records if r.fix_applies)
    # unsafe fixes not applied for want of --unsafe-fixes (a verified one is counted by its verdict)
    hidden_unsafe = sum(1 for r in records if r.fix_applicability == "unsafe" and not r.fix_applies and r.verification is None)
    # what the summary counts (read and analysed), whether or not it could be fixed
    counts = {
        "checked": sum(1 for o in outcomes if o.findings or not o.error), "verified_later": verified_later,
        "verified": verified, "rejected": 0, "unverified": 0,
    }
    verdicts = [r for r in records if r.verification is not None]
    if verdicts:  # verification's modules load only where it ran
        from autograd_fix.verification.verdict import Status

        counts["rejected"] = sum(1 for r in verdicts if r.verification.verdict is Status.REJECTED)
        counts["unverified"] = sum(1 for r in verdicts if r.verification.verdict is Status.UNVERIFIED and not r.fix_applies)
    fixed = files_fixed = 0
    applied_ids: set[int] = set()
    refused = applier.refused if applier is not None else []
    if applier is not None:  # files were written as they were decided
        errors.extend(refused)
        files_fixed, applied_ids = len(applier.written), applier.applied_ids
    elif mode == "apply":  # stdin: the fixed source goes to stdout below
        for outcome in outcomes:
            if outcome.fixed is not None and not outcome.error:
                files_fixed += 1
                applied_ids.update(id(r) for r in outcome.findings if r.fix_applies)
    fixed = len(applied_ids)
    for path, message in errors:
        err.print(f"error: {printable(path)}: {printable(message)}", highlight=False, markup=False)
    for _, message in warnings:
        err.print(f"warning: {printable(message)}", highlight=False, markup=False)
    status = Tally(bool(errors or warnings), len(records) - fixed, fixed)

    if mode == "apply" and use_stdin:
        outcome = outcomes[0]
        text = outcome.fixed if outcome.fixed is not None else outcome.original
        if text is not None:
            from autograd_fix.cli.apply_files import encode, new_bytes
            from autograd_fix.codemods.source import SourceError

            try:
                data = new_bytes(outcome, stdin_data) if outcome.notebook is not None else encode(outcome, text)
            except SourceError as error:
                err.print(f"error: {outcome.path}: {error}", highlight=False, markup=False)
                return Tally(True, status.remaining, status.fixed)
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        if sink.path is None:  # stdout holds the source: the report only goes to a file
            return status

    if verbosity.silent:
        return status
    if verbosity.statistics:
        from autograd_fix.cli.report_formats import statistics as rule_counts, statistics_json, statistics_text

        rows = rule_counts(r for r in records if id(r) not in applied_ids)
        sink.write(statistics_json(rows) if output_format is OutputFormat.json else statistics_text(rows))
        return status
    summary = {
        "files": len(outcomes),
        "findings": len(records),
        "fixable": fixable,
        "fixed": fixed,
        "errors": [{"path": path, "message": message} for path, message in [*errors, *warnings]],
    }
    if output_format is OutputFormat.json:
        from autograd_fix.cli.render import json_document

        sink.write(json_document(outcomes, summary) + "\n")
        return status
    if output_format is OutputFormat.sarif:
        from autograd_fix.cli.sarif import sarif_json

        sink.write(sarif_json(outcomes, [*errors, *warnings], summary, fixed=applied_ids if mode == "apply" else None) + "\n")
        return status
    if output_format in (OutputFormat.json_lines, OutputFormat.junit, OutputFormat.gitlab):
        from autograd_fix.cli.report_formats import gitlab_json, json_lines, junit_xml

        if output_format is OutputFormat.json_lines:
            sink.write(json_lines(r for r in records if id(r) not in applied_ids))
        elif output_format is OutputFormat.junit:
            sink.write(junit_xml(outcomes, [*errors, *warnings]))
        else:
            sink.write(gitlab_json(outcomes))
        return status
    if output_format is OutputFormat.github:
        from autograd_fix.cli.github_format import github_annotations

        sink.write(github_annotations([r for r in records if id(r) not in applied_ids], [*errors, *warnings]))
        return status

    out = sink.console  # text output: rich loads here, not for the machine-readable formats above
    if mode == "diff":
        from autograd_fix.cli.render import diff_bytes, file_diff, verdict_lines

        for outcome in outcomes:
            for line in verdict_lines(outcome):
                out.print(line, style="dim", highlight=False, markup=False)
            text = file_diff(outcome)
            if text:
                sink.write_diff(text, diff_bytes(outcome, text))
        if not verbosity.quiet:
            err.print(summary_line(len(records), fixable, hidden_unsafe, len(errors), mode=mode, **counts), highlight=False)
        return status
    if mode == "apply":
        applied = [r for r in records if id(r) in applied_ids]
        remaining = [r for r in records if id(r) not in applied_ids]
        for record in applied:
            note = f" [{record.verification.summary()}]" if record.verification else ""
            out.print(f"fixed {printable(record.location)}: {record.code} {record.message}{note}", highlight=False, markup=False, soft_wrap=True)
        print_findings(out, remaining)
        if verbosity.quiet:
            return status
        out.print(
            summary_line(
                len(records), fixable, hidden_unsafe, len(errors) - len(refused), mode=mode, fixed=fixed,
                files_fixed=files_fixed, not_written=len(refused), **counts,
            ),
            highlight=False,
        )
        return status
    print_findings(out, records)
    if not verbosity.quiet:
        out.print(summary_line(len(records), fixable, hidden_unsafe, len(errors), mode=mode, **counts), highlight=False)
    return status


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point; `autograd-fix verify ...`, `autograd-fix doctor ...`
    and `autograd-fix server` go to their own commands."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "verify":
        from autograd_fix.cli.verify_command import verify_app

        verify_app(args=args[1:], prog_name="autograd-fix verify")
        return
    if args and args[0] == "doctor":
        from autograd_fix.cli.doctor import doctor_app

        doctor_app(args=args[1:], prog_name="autograd-fix doctor")
        return
    if args and args[0] == "server":
        from autograd_fix.cli.server import server_app

        server_app(args=args[1:], prog_name="autograd-fix server")
        return
    with StopSignals():
        try:
            app(args=args, prog_name="autograd-fix")
        except Interrupted as stop:  # outside the run itself (finding files, reporting)
            typer.echo(f"autograd-fix: interrupted ({stop.label}).", err=True)
            sys.exit(stop.exit_code)
