"""Inputs that cannot exhaust or stall the tool: a folder nested a thousand levels deep, a
huge source file, a FIFO where a file or a run's record should be, a device or FIFO in
the project being copied for a run. Each is one per-path error or a verdict, and the run
goes on.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from autograd_fix.codemods.source import SourceError, read_bytes
from autograd_fix.verification.shadow import MAX_DEPTH, ShadowError, make_base
from test_odd_trees import EVAL, run  # an evaluation loop with a finding; the CLI in-process

def _deep(root: Path, levels: int) -> Path:
    """`levels` nested one-letter folders under `root` (made level by level: one
    `makedirs` of the whole path would exceed PATH_MAX first)."""
    here = root
    os.makedirs(here, exist_ok=True)
    fd = os.open(here, os.O_RDONLY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with open(os.open("deep.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as handle:
            handle.write(EVAL)
    finally:
        os.close(fd)
    return root


def remove_deep(root: Path) -> None:
    """Remove a tree made by `_deep` without recursion (`shutil.rmtree` and pytest's own
    clean-up of old temporary folders recurse, and crash on a thousand levels)."""
    fds = [os.open(root, os.O_RDONLY)]
    try:
        while True:
            try:
                fds.append(os.open("d", os.O_RDONLY, dir_fd=fds[-1]))
            except FileNotFoundError:
                break
        while fds:
            fd = fds.pop()
            for name in os.listdir(fd):
                if name != "d":
                    os.unlink(name, dir_fd=fd)
            os.close(fd)
            if fds:
                os.rmdir("d", dir_fd=fds[-1])
    finally:
        for fd in fds:
            os.close(fd)


@pytest.fixture
def deep_tree(tmp_path):
    root = _deep(tmp_path / "src" / "deep", 1100)
    yield root
    remove_deep(root)


def test_a_folder_a_thousand_levels_deep_is_one_error_and_exit_2(tmp_path, monkeypatch, deep_tree):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src" / "model.py").write_text(EVAL)
    result = run("src")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "RecursionError" not in result.output
    assert "nested more than 100 folders deep; skipped" in result.stderr
    assert "src/model.py:" in result.stdout


def test_a_source_file_over_the_size_limit_is_one_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "generated.py").write_text("x = 1\n" * 400_000)  # 2.4 MB
    (tmp_path / "model.py").write_text(EVAL)
    result = run(".")
    assert result.exit_code == 2
    assert "error: generated.py: is 2,400,000 bytes, more than max-file-size (2,000,000); skipped" in result.stderr
    assert "model.py:" in result.stdout
    (tmp_path / "pyproject.toml").write_text("[tool.autograd-fix]\nmax-file-size = 3000000\n")
    assert run(".").exit_code == 1  # read now: its finding remains, no error
    assert run("--max-file-size", "100", "model.py").exit_code == 2


def test_a_fifo_in_a_files_place_does_not_block_the_read(tmp_path):
    fifo = tmp_path / "train.py"
    os.mkfifo(fifo)
    with pytest.raises(SourceError, match="not a regular file"):
        read_bytes(str(fifo))  # would wait forever for a writer with a blocking open


def test_the_shadow_copy_never_reads_a_fifo_or_device(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "train.py").write_text(EVAL)
    os.mkfifo(project / "pipe.py")
    try:
        os.mknod(project / "zeros.bin", 0o600 | 0o020000, os.makedev(1, 5))  # like /dev/zero
    except (PermissionError, OSError):
        pass  # an unprivileged user cannot make a device; the FIFO is the same path
    shadow = make_base(str(project), str(tmp_path / "copy"))
    copied = sorted(p.name for p in (tmp_path / "copy").iterdir())
    assert copied == ["train.py"]
    assert shadow.copied_bytes == len(EVAL)


def test_the_shadow_copy_refuses_a_tree_deeper_than_its_limit(tmp_path):
    project = _deep(tmp_path / "proj", MAX_DEPTH + 5)
    with pytest.raises(ShadowError, match="more than 100 deep"):
        make_base(str(project), str(tmp_path / "copy"))
