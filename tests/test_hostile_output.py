"""Output that cannot be forged or smuggled: what a verified run prints or raises, and the
names of the files the tool is pointed at, reach the terminal, diffs, JSON and GitHub
annotations with every control character escaped, and a run cannot make a huge reason.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli.app import app
from autograd_fix.codemods.safe_text import REASON_LIMIT, git_quoted, printable
from autograd_fix.verification import Verdict, verify_pair
from autograd_fix.verification.verdict import UnitResult

ESC = "\x1b"
#: an OSC 52 clipboard write, a window title, and cursor-up plus erase-line
SEQUENCES = f"{ESC}]52;c;ZWNobyBwd25lZA=={ESC}\\{ESC}]0;owned\x07{ESC}[1A{ESC}[2K"

EVAL = textwrap.dedent("""\
    import torch
    from torch import nn

    model = nn.Linear(8, 2)
    model.eval()
    for batch in [torch.randn(4, 8) for _ in range(3)]:
        print(model(batch).sum().item())
    """)


def test_printable_escapes_controls_and_caps_length():
    assert printable(f"a{ESC}[31mb\nc\x9bd\x7f") == "a\\x1b[31mb\\nc\\x9bd\\x7f"
    assert printable("tab\tand\nline", keep_lines=True) == "tab\tand\nline"
    assert printable("plain ünïcode") == "plain ünïcode"
    long = printable("x" * 5000, limit=100)
    assert long.startswith("x" * 100) and long.endswith("(4900 more characters)")


def test_git_quoted_matches_git():
    assert git_quoted("a/src/train.py") == "a/src/train.py"
    assert git_quoted("a/new\nline.py") == '"a/new\\nline.py"'
    assert git_quoted(f"a/e{ESC}x.py") == '"a/e\\033x.py"'
    assert git_quoted('a/q"b\\c.py') == '"a/q\\"b\\\\c.py"'


def test_a_verdict_never_carries_raw_controls_or_a_huge_reason():
    unit = UnitResult("u", "script", "rejected", f"raised {SEQUENCES}" + "y" * 10_000,
                      {"original": {"stdout_tail": f"line1\n{SEQUENCES}\n"}})
    verdict = Verdict("rejected", unit.reason, "AGF001", (unit,), isolation_gap=f"gap{ESC}")
    for text in (verdict.summary(), json.dumps(verdict.to_json()), unit.evidence["original"]["stdout_tail"]):
        assert ESC not in text and "\x07" not in text
    assert len(verdict.reason) < REASON_LIMIT + 50
    assert unit.evidence["original"]["stdout_tail"].startswith("line1\n")  # lines kept in evidence


@pytest.mark.torch
def test_what_a_run_prints_and_raises_is_escaped_in_its_verdict(tmp_path):
    script = tmp_path / "train.py"
    base = "import torch\nx = torch.ones(3)\ntotal = float(x.sum())\n"
    hostile = base + f"print({SEQUENCES!r})\nraise RuntimeError({('boom' + SEQUENCES + 'z' * 200_000)!r})\n"
    script.write_text(base)
    verdict = verify_pair(base, hostile, path=str(script), timeout=20)
    assert verdict.verdict == "rejected", verdict.reason
    dumped = json.dumps(verdict.to_json(), ensure_ascii=False)
    assert ESC not in dumped and "\x07" not in dumped and ESC not in verdict.summary()
    assert "\\x1b" in verdict.reason
    assert len(verdict.reason) < REASON_LIMIT + 50


@pytest.fixture
def odd_names(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in (f"e{ESC}[2Jvil.py", "new\nline.py"):
        (tmp_path / name).write_text(EVAL)
    return tmp_path


def test_odd_file_names_reach_no_terminal_raw(odd_names):
    listing = CliRunner().invoke(app, ["--color", "never", "."]).stdout
    assert "e\\x1b[2Jvil.py:6:1: AGF001" in listing and "new\\nline.py:6:1: AGF001" in listing
    for args in (["."], ["--diff", "--no-verify", "."], ["--format", "github", "."], ["--apply", "--no-verify", "--check", "."]):
        result = CliRunner().invoke(app, ["--color", "never", *args])
        assert ESC not in result.stdout and ESC not in result.stderr, args


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_diff_of_odd_names_has_quoted_headers_that_git_applies(odd_names):
    result = CliRunner().invoke(app, ["--color", "never", "--diff", "--no-verify", "."])
    assert '--- "a/new\\nline.py"' in result.stdout and '+++ "b/e\\033[2Jvil.py"' in result.stdout
    patch = odd_names / "fix.patch"
    patch.write_bytes(result.stdout_bytes)
    subprocess.run(["git", "init", "-q"], cwd=odd_names, check=True)
    done = subprocess.run(["git", "apply", "--check", "-v", str(patch)], cwd=odd_names, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "new\\nline.py" in done.stderr or "new\nline.py" in done.stderr


def test_the_per_file_progress_line_escapes_an_odd_file_name():
    """Found by benchmarks/attacks: verifying a file named with a newline and an escape
    sequence printed ``[2/2] odd<newline>name<ESC>[31m.py`` raw on stderr."""
    import io

    from rich.console import Console

    from autograd_fix.cli.progress import file_lines

    out = io.StringIO()
    note = file_lines(Console(file=out, force_terminal=False, width=200), 2)
    note(f"odd\nname{ESC}[31m.py", "0 of 1 fix accepted")
    assert ESC not in out.getvalue() and out.getvalue().count("\n") == 1, repr(out.getvalue())
    assert "odd\\nname\\x1b[31m.py" in out.getvalue()


def test_a_file_name_with_an_emoji_code_is_printed_as_it_is(tmp_path, monkeypatch):
    """rich turns `:fire:` into a flame in the strings it prints: a file name must not
    change on its way to the terminal (an error line names the file)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ":fire:.py").write_text("import torch\nx = (\n")
    result = CliRunner().invoke(app, ["--no-verify", "--no-cache", "--color", "always", "."])
    assert "error: :fire:.py: syntax error at 2:5" in result.output
    assert "\N{FIRE}" not in result.output
