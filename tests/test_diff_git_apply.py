"""`--diff` output is a patch `git apply` takes, byte for byte, whatever the file holds.

Each case is a failure the fuzz campaign (benchmarks/fuzz_campaign.py) found: the diff
was printed through rich (tabs expanded to spaces, carriage returns and control
characters dropped, a latin-1 file's lines re-encoded as UTF-8) and split into lines
with `str.splitlines` (which breaks inside comments at form feeds, "\\x1c" or U+2028,
and made every line of a CR-only file a "No newline at end of file" line).
"""

from __future__ import annotations

import codecs
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli.app import app

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

EVALUATE = """\
import torch


def evaluate(model, val_loader):
    model.eval()  # no dropout{note}
    scores = []
    for x, y in val_loader:
        scores.append(model(x))
    return scores
"""

SHORT = """\
import torch
def evaluate(model, loader):
    model.eval()
    return [model(x) for x in loader]
"""


def _latin1() -> bytes:
    text = "# -*- coding: latin-1 -*-\n" + EVALUATE.format(note=" (température moyenne)")
    return text.encode("latin-1")


CASES = {
    "cr-only line endings": EVALUATE.format(note="").replace("\n", "\r").encode(),
    "crlf and lf mixed": EVALUATE.format(note="").replace("\n", "\r\n", 4).encode(),
    "form feed in a comment": EVALUATE.format(note=" \x0c page").encode(),
    "file separator in a comment": EVALUATE.format(note=" \x1c").encode(),
    "line separator in a comment": EVALUATE.format(note=" \u2028 more").encode(),
    "control character in a comment": EVALUATE.format(note=" \x06").encode(),
    "tab-indented file": EVALUATE.format(note="").replace("    ", "\t").encode(),
    "trailing tab and spaces": EVALUATE.format(note=" \t  ").encode(),
    "latin-1 file with a cookie": _latin1(),
    "BOM, hunk on line 1": codecs.BOM_UTF8 + SHORT.encode(),
}


def _run(folder: Path, monkeypatch: pytest.MonkeyPatch, *args: str):
    monkeypatch.chdir(folder)
    return CliRunner().invoke(app, [*args, "--no-verify", "--unsafe-fixes", "--color", "never", "train.py"])


@pytest.mark.parametrize("name", list(CASES))
def test_diff_applies_with_git_and_equals_apply(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = CASES[name]
    diff_dir, apply_dir = tmp_path / "diff", tmp_path / "apply"
    for folder in (diff_dir, apply_dir):
        folder.mkdir()
        (folder / "train.py").write_bytes(data)
    subprocess.run(["git", "init", "-q"], cwd=diff_dir, check=True)

    diff = _run(diff_dir, monkeypatch, "--diff")
    assert diff.exit_code == 1, diff.output  # a diff to show
    assert (diff_dir / "train.py").read_bytes() == data  # --diff writes nothing
    applied = _run(apply_dir, monkeypatch, "--apply")
    assert applied.exit_code == 0, applied.output
    fixed = (apply_dir / "train.py").read_bytes()
    assert fixed != data  # there was a fix to show

    (tmp_path / "fix.patch").write_bytes(diff.stdout_bytes)
    git = subprocess.run(["git", "apply", str(tmp_path / "fix.patch")], cwd=diff_dir, capture_output=True, text=True)
    assert git.returncode == 0, git.stderr + repr(diff.stdout_bytes)
    assert (diff_dir / "train.py").read_bytes() == fixed


def test_diff_to_output_file_keeps_the_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--output-file` gets the same bytes as standard output."""
    data = CASES["latin-1 file with a cookie"].replace(b"\n", b"\r\n")
    (tmp_path / "train.py").write_bytes(data)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    piped = _run(tmp_path, monkeypatch, "--diff")
    result = _run(tmp_path, monkeypatch, "--diff", "--output-file", "fix.patch")
    assert result.exit_code == 1, result.output  # a diff to show
    assert (tmp_path / "fix.patch").read_bytes() == piped.stdout_bytes
    subprocess.run(["git", "apply", "fix.patch"], cwd=tmp_path, check=True)
    assert b"@torch.no_grad()\r\ndef evaluate" in (tmp_path / "train.py").read_bytes()


def test_unified_diff_breaks_lines_only_at_newlines() -> None:
    """A form feed or U+2028 inside a comment and a CR-only file are not line breaks to
    git: the diff must not split there (nor mark each piece "No newline at end of file")."""
    from autograd_fix.codemods.engine import unified_diff

    before = "x = 1  # a\x0cb\u2028c\ny = 2\n"
    diff = unified_diff(before, before.replace("y = 2", "y = 3"), "m.py")
    assert "-x = 1" not in diff and " x = 1  # a\x0cb\u2028c\n" in diff
    cr_only = unified_diff("a = 1\rb = 2\r", "a = 1\rb = 3\r", "m.py")
    assert cr_only.count("No newline at end of file") == 2  # one old line, one new line
