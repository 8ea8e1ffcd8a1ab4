"""Discovery survives odd trees: each odd entry is one per-path error, the run goes on
over everything else and exits 2 (issue 10, item 3)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli import discovery
from autograd_fix.cli.app import app
from autograd_fix.cli.discovery import discover

EVAL = """\
import torch
from torch import nn

model = nn.Linear(8, 2)
model.eval()
for batch in [torch.randn(4, 8) for _ in range(3)]:
    print(model(batch).sum().item())
"""


def run(*args: str):
    return CliRunner().invoke(app, ["--color", "never", *args], catch_exceptions=False)


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`src/` with one real file to check next to every kind of odd entry."""
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "model.py").write_text(EVAL)
    (src / "self.py").symlink_to("self.py")
    (src / "ping.py").symlink_to("pong.py")
    (src / "pong.py").symlink_to("ping.py")
    (src / "gone.py").symlink_to("deleted.py")
    (src / "pkg" / "up").symlink_to("..")  # a folder loop
    os.mkfifo(src / "pipe.py")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(src / "server.py"))
    yield tmp_path
    listener.close()


EXPECTED = {
    "src/self.py": "symlink loop (Too many levels of symbolic links); skipped",
    "src/ping.py": "symlink loop (Too many levels of symbolic links); skipped",
    "src/pong.py": "symlink loop (Too many levels of symbolic links); skipped",
    "src/gone.py": "broken symlink (to deleted.py, which does not exist); skipped",
    "src/pipe.py": "a named pipe (FIFO), not a regular file; skipped",
    "src/server.py": "a socket, not a regular file; skipped",
}


def test_each_odd_entry_is_one_problem_and_the_rest_is_found(tree: Path) -> None:
    result = discover(["src"])
    assert [p.as_posix() for p in result.files] == ["src/pkg/model.py"]
    assert dict(result.problems) == EXPECTED
    assert len(result.problems) == len(EXPECTED)
    assert result.missing == [] and result.empty == []


def test_the_cli_reports_one_line_per_odd_entry_checks_the_rest_and_exits_2(tree: Path) -> None:
    result = run("src")
    assert result.exit_code == 2  # not 1: that means findings under --check
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert sorted(errors) == sorted(f"error: {path}: {why}" for path, why in EXPECTED.items())
    assert "src/pkg/model.py:" in result.stdout and "AGF001" in result.stdout
    assert "Traceback" not in result.output


def test_odd_entries_named_on_the_command_line(tree: Path) -> None:
    result = run("src/self.py", "src/pipe.py", "src/pkg/model.py")
    assert result.exit_code == 2
    assert "error: src/self.py: symlink loop" in result.stderr
    assert "error: src/pipe.py: a named pipe (FIFO), not a regular file; skipped" in result.stderr
    assert "src/pkg/model.py:" in result.stdout


def test_check_mode_exits_2_not_1_for_an_odd_tree(tree: Path) -> None:
    assert run("--check", "src").exit_code == 2


def test_apply_goes_on_over_the_rest(tree: Path) -> None:
    result = run("--apply", "--no-verify", "src")
    assert result.exit_code == 2
    assert "with torch.no_grad():" in (tree / "src" / "pkg" / "model.py").read_text()


def test_an_unreadable_folder_is_one_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Root reads a chmod 000 folder anyway, so the refusal is simulated at `os.scandir`."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src" / "secret").mkdir(parents=True)
    (tmp_path / "src" / "secret" / "a.py").write_text(EVAL)
    (tmp_path / "src" / "model.py").write_text(EVAL)
    real_scandir = os.scandir

    def scandir(path):
        if Path(path).name == "secret":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(discovery.os, "scandir", scandir)
    result = run("src")
    assert result.exit_code == 2
    assert "error: src/secret: cannot read folder: Permission denied; skipped" in result.stderr
    assert "src/model.py:" in result.stdout


def test_a_chmod_000_folder_never_stops_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As a normal user the folder is one error; as root it is simply read."""
    monkeypatch.chdir(tmp_path)
    locked = tmp_path / "src" / "locked"
    locked.mkdir(parents=True)
    (locked / "a.py").write_text(EVAL)
    (tmp_path / "src" / "model.py").write_text(EVAL)
    locked.chmod(0)
    try:
        result = run("src")
        readable = os.access(locked, os.R_OK)
    finally:
        locked.chmod(0o755)
    assert "Traceback" not in result.output
    assert "src/model.py:" in result.stdout
    if readable:
        assert result.exit_code == 1 and "src/locked/a.py:" in result.stdout  # findings, no error
    else:
        assert result.exit_code == 2 and "error: src/locked: cannot read folder" in result.stderr


def test_an_unreadable_file_is_one_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "model.py").write_text(EVAL)
    (tmp_path / "src" / "secret.py").write_text(EVAL)
    from autograd_fix.codemods import source

    real_open = os.open

    def guarded_open(path, *args, **kwargs):
        if str(path).endswith("secret.py"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    # the refusal as the kernel gives it to a user (root reads anything): at the open the
    # source reader makes (tests below also run as a real unprivileged user)
    monkeypatch.setattr(source.os, "open", guarded_open)
    result = run("src")
    assert result.exit_code == 2
    assert "error: src/secret.py: Permission denied" in result.stderr
    assert "src/model.py:" in result.stdout


def test_a_named_folder_without_python_files_is_a_warning_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# docs\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "model.py").write_text(EVAL)
    result = run("docs")
    assert result.exit_code == 2
    assert result.stderr.strip() == "warning: No Python files found in docs"
    assert "No findings" not in result.output
    both = run("docs", "src")
    assert both.exit_code == 2 and "warning: No Python files found in docs" in both.stderr
    assert "src/model.py:" in both.stdout
    document = json.loads(run("--format", "json", "docs").stdout)
    assert document["summary"]["errors"] == [{"path": "docs", "message": "No Python files found in docs"}]


def test_a_folder_with_only_odd_entries_is_not_called_empty(tree: Path) -> None:
    (tree / "src" / "pkg" / "model.py").unlink()
    result = run("src")
    assert result.exit_code == 2
    assert "No Python files found" not in result.stderr
    assert "error: src/self.py: symlink loop" in result.stderr


def _as_unprivileged_user() -> list[str] | None:
    """The command prefix that runs a program as an unprivileged user: none needed when
    the tests already run as one; as root, `setpriv` (or `runuser`) to `nobody`; None
    where no such user can be made."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv:
        return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", "nobody", "--"]
    return None


def test_a_real_kernel_refusal_of_a_folder_and_a_file_is_one_error_each() -> None:
    """No patched `os.scandir` or `open`: a chmod 000 folder and file, read by a user the
    kernel refuses them to (root reads them anyway, so the tool runs as `nobody`)."""
    prefix = _as_unprivileged_user()
    if prefix is None:
        pytest.skip("running as root with neither setpriv nor runuser: no unprivileged user to run as")
    if subprocess.run([*prefix, sys.executable, "-c", "pass"], capture_output=True, cwd="/").returncode != 0:
        pytest.skip(f"{sys.executable} does not start as an unprivileged user (its files are root's only)")
    root = Path(tempfile.mkdtemp(prefix="agf-unreadable-"))  # not under pytest's root-only folder
    try:
        root.chmod(0o755)
        src = root / "src"
        (src / "locked").mkdir(parents=True)
        (src / "locked" / "a.py").write_text(EVAL)
        (src / "model.py").write_text(EVAL)
        (src / "secret.py").write_text(EVAL)
        for path in (root, src):
            path.chmod(0o755)
        (src / "model.py").chmod(0o644)
        (src / "secret.py").chmod(0)
        (src / "locked").chmod(0)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(root), "LANG": "C.UTF-8", "XDG_CONFIG_HOME": str(root)}
        done = subprocess.run(
            [*prefix, sys.executable, "-m", "autograd_fix", "--color", "never", "src"],
            cwd=root, env=env, capture_output=True, text=True, timeout=300,
        )
    finally:
        for path in (root / "src" / "locked", root / "src" / "secret.py"):
            if path.exists():
                path.chmod(0o755)
        shutil.rmtree(root, ignore_errors=True)
    assert done.returncode == 2, done.stderr
    assert "error: src/locked: cannot read folder: Permission denied; skipped" in done.stderr
    assert "error: src/secret.py: Permission denied" in done.stderr
    assert "Traceback" not in done.stderr
    assert "src/model.py:" in done.stdout
