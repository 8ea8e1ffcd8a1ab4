"""Progress on long static runs: a bar on a terminal above the threshold, silence otherwise."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from autograd_fix.cli import progress as progress_module
from autograd_fix.cli.app import app
from autograd_fix.cli.progress import STATIC_PROGRESS_MIN_FILES, progress_bar
from autograd_fix.cli.runner import Job, run_jobs

CLEAN = "import torch\n\nx = torch.ones(3)\n"


def console(terminal: bool) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=terminal, force_interactive=terminal, width=80), buffer


def bar_output(total: int, terminal: bool, steps: int | None = None) -> str:
    out, buffer = console(terminal)
    with progress_bar(out, total, "checking files", more_than=STATIC_PROGRESS_MIN_FILES) as advance:
        for _ in range(total if steps is None else steps):
            advance(1)
    return buffer.getvalue()


def test_bar_appears_on_a_terminal_above_the_threshold() -> None:
    output = bar_output(STATIC_PROGRESS_MIN_FILES + 1, terminal=True)
    assert "checking files" in output
    assert f"/{STATIC_PROGRESS_MIN_FILES + 1}" in output  # M/N completed column


def test_no_bar_at_or_below_the_threshold() -> None:
    assert bar_output(STATIC_PROGRESS_MIN_FILES, terminal=True) == ""
    assert bar_output(3, terminal=True) == ""


def test_never_anything_without_a_terminal() -> None:
    assert bar_output(5000, terminal=False, steps=10) == ""
    with progress_bar(None, 5000, "checking files") as advance:
        advance(1)


def jobs_for(paths: list[Path]) -> list[Job]:
    return [Job(path=str(p), select=None, ignore=(), unsafe_fixes=False, compute_fix=False, fix_diffs=False) for p in paths]


@pytest.mark.parametrize("workers", [1, 2])
def test_run_jobs_reports_every_finished_file_in_order(tmp_path: Path, workers: int) -> None:
    paths = []
    for number in range(10):
        path = tmp_path / f"m{number}.py"
        path.write_text(CLEAN)
        paths.append(path)
    finished: list[int] = []
    outcomes = run_jobs(jobs_for(paths), workers, finished.append)
    assert len(finished) == len(paths) and set(finished) == {1}
    assert [o.path for o in outcomes] == [str(p) for p in paths]


@pytest.fixture
def many_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    for number in range(STATIC_PROGRESS_MIN_FILES + 5):
        (tmp_path / "src" / f"m{number:03}.py").write_text(CLEAN)
    return tmp_path


def test_cli_shows_the_bar_on_stderr_when_stderr_is_a_terminal(many_files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("autograd_fix.cli.progress.stderr_is_terminal", lambda: True)
    result = CliRunner().invoke(app, ["--jobs", "1", "src"], catch_exceptions=False)
    assert result.exit_code == 0
    assert "checking files" in result.stderr
    assert "checking files" not in result.stdout
    assert result.stdout.strip() == "No findings."


def test_cli_is_silent_on_stderr_without_a_terminal_even_when_color_is_forced(many_files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert progress_module.progress_console().is_terminal is False
    result = CliRunner().invoke(app, ["--jobs", "1", "--color", "always", "src"], catch_exceptions=False)
    assert result.exit_code == 0
    assert result.stderr == ""
