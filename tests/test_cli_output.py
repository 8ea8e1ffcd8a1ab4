"""What the tool prints: diffs that `git apply` takes byte for byte, syntax error
positions, summaries that agree with `--apply`, help text, piped output."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli.app import app

# AGF012 rewrites line 3 (a safe fix), so a three-line hunk context reaches line 1
DEPRECATED = (
    "import torch\n"
    "from torch.autograd import Variable\n"
    "inputs = Variable(torch.randn(8, 4))\n"
    "print(inputs.sum())\n"
)

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")


def run(*args: str, input: bytes | None = None):
    return CliRunner().invoke(app, list(args), input=input, catch_exceptions=False)


def _git_repo(folder: Path, files: dict[str, bytes]) -> None:
    """A repository holding `files` as committed, with no line-ending conversion."""
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    subprocess.run(["git", "config", "core.autocrlf", "false"], cwd=folder, check=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)


@needs_git
@pytest.mark.parametrize(
    "data",
    [
        pytest.param(DEPRECATED.replace("\n", "\r\n").encode(), id="crlf"),
        pytest.param(b"\xef\xbb\xbf" + DEPRECATED.encode(), id="bom"),
        pytest.param(b"\xef\xbb\xbf" + DEPRECATED.replace("\n", "\r\n").encode(), id="bom-crlf"),
        pytest.param(DEPRECATED.replace("Variable\n", "Variable\r\n").encode(), id="mixed-endings"),
        pytest.param(DEPRECATED.replace("torch\n", "torch  # \x0c page\n").encode(), id="form-feed"),
        pytest.param(DEPRECATED.rstrip("\n").replace("\n", "\r\n").encode(), id="crlf-no-final-newline"),
    ],
)
def test_diff_applies_with_git_and_gives_the_bytes_apply_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes
) -> None:
    monkeypatch.chdir(tmp_path)
    _git_repo(tmp_path, {"train.py": data})
    result = run("--diff", "--no-verify", "--color", "never", "train.py")
    assert result.exit_code == 1  # a diff to show
    assert "Variable(" in result.stdout  # the change is in the diff at all
    patch = tmp_path / "fix.patch"
    patch.write_bytes(result.stdout_bytes)
    subprocess.run(["git", "apply", "--check", "fix.patch"], cwd=tmp_path, check=True)
    subprocess.run(["git", "apply", "fix.patch"], cwd=tmp_path, check=True)
    patched = (tmp_path / "train.py").read_bytes()

    (tmp_path / "train.py").write_bytes(data)
    assert run("--apply", "--no-verify", "train.py").exit_code == 0
    assert patched == (tmp_path / "train.py").read_bytes()
    assert patched != data


@needs_git
def test_coloured_diff_keeps_crlf_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _git_repo(tmp_path, {"train.py": DEPRECATED.replace("\n", "\r\n").encode()})
    result = run("--diff", "--no-verify", "--color", "always", "train.py")
    assert b"torch.randn(8, 4))\x1b[0m\r\n" in result.stdout_bytes  # the ending after the colour reset
    assert b" import torch\r\n" in result.stdout_bytes


def test_json_fix_diff_carries_the_bom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_bytes(b"\xef\xbb\xbf" + DEPRECATED.replace("\n", "\r\n").encode())
    import json

    result = run("--format", "json", "train.py")
    diff = json.loads(result.stdout)["findings"][0]["fix"]["diff"]
    assert " \ufeffimport torch\r\n" in diff


UNCLOSED = "import torch\n\nlogits = model(torch.cat((a, b)\nloss = criterion(logits, y)\n\nloss.backward()\n"


def _py_compile_error(path: Path) -> SyntaxError:
    import py_compile

    with pytest.raises(py_compile.PyCompileError) as caught:
        py_compile.compile(str(path), cfile=str(path.with_suffix(".pyc")), doraise=True)
    error = caught.value.exc_value
    assert isinstance(error, SyntaxError)
    return error


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(UNCLOSED, id="unclosed-paren"),
        pytest.param("import torch\nfor x in loader:\nloss = model(x)\n", id="missing-indent"),
        pytest.param("import torch\n\ndef step(x):\n    return x +\n\nstep(torch.ones(2))\n", id="dangling-operator"),
        pytest.param("import torch\nif torch.cuda.is_available():\n\tx = 1\n        y = 2\n", id="tab-mixup"),
        pytest.param("import torch\nx = torch.ones(2]\n", id="mismatched-bracket"),
    ],
)
def test_syntax_error_names_the_position_py_compile_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "broken.py"
    path.write_text(source)
    expected = _py_compile_error(path)
    result = run("broken.py")
    assert result.exit_code == 2
    assert f"error: broken.py: syntax error at {expected.lineno}:{expected.offset}: {expected.msg}\n" in result.stderr


def test_unclosed_paren_is_reported_on_its_own_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken.py").write_text(UNCLOSED)
    result = run("broken.py")
    assert "error: broken.py: syntax error at 3:25: '(' was never closed\n" in result.stderr
    assert "parser error" not in result.stderr


def test_top_level_help_lists_every_command() -> None:
    result = run("--help")
    assert result.exit_code == 0
    commands = result.stdout.split("Commands:", 1)[1].split("Arguments:", 1)[0]
    for command in ("autograd-fix verify ORIGINAL REWRITTEN", "autograd-fix verify FILE --gradcheck", "autograd-fix doctor SCRIPT", "autograd-fix server"):
        assert command in commands


@pytest.mark.parametrize("command", [[], ["verify"], ["doctor"], ["server"]])
def test_every_command_has_the_same_plain_help(command: list[str]) -> None:
    from autograd_fix.cli.app import main

    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        main([*command, "-h"])
    assert exited.value.code == 0
    text = out.getvalue()
    assert text.startswith(f"Usage: autograd-fix{''.join(' ' + c for c in command)} [OPTIONS]")
    assert "\nOptions:\n" in text and "-h, --help" in text
    assert "╭" not in text and "│" not in text  # no rich boxes in one command only
    assert "<bool>" not in text and "<str>" not in text and "<float" not in text


def test_gradcheck_flag_shows_no_type() -> None:
    from autograd_fix.cli.verify_command import verify_app

    result = CliRunner().invoke(verify_app, ["--help"])
    line = next(line for line in result.stdout.splitlines() if line.strip().startswith("--gradcheck "))
    assert line.split()[0] == "--gradcheck" and line.split()[1] == "gradcheck"


LONG_REASON = (
    "function scale with synthesized inputs: cannot bind 'lookup_table' (original): no role inferred from "
    "its name, annotation, default or use in the body; add a factory under [tool.autograd-fix.verify] in "
    "pyproject.toml, e.g. lookup_table = \"mypkg.testing:make_lookup_table\""
)


def test_verify_prints_a_single_units_reason_once_unwrapped_and_verbatim(capsys: pytest.CaptureFixture[str]) -> None:
    from autograd_fix.cli.verify_command import output_console, render_verdict
    from autograd_fix.verification.verdict import UnitResult, combine

    verdict = combine([UnitResult("scale", "function", "unverified", LONG_REASON)], None)
    render_verdict(verdict, output_console())  # stdout is captured: not a terminal
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"unverified: {LONG_REASON}"
    assert lines[1] == "  scale (function): unverified"
    assert sum(LONG_REASON in line for line in lines) == 1


def test_verify_names_each_units_reason_when_the_verdict_quotes_only_one(capsys: pytest.CaptureFixture[str]) -> None:
    from autograd_fix.cli.verify_command import output_console, render_verdict
    from autograd_fix.verification.verdict import UnitResult, combine

    units = [
        UnitResult("train", "function", "accepted", "outputs equal, .grad untouched"),
        UnitResult("evaluate", "function", "rejected", "outputs differ: logits [0] 0.1 vs 0.3"),
    ]
    render_verdict(combine(units, None), output_console())
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "rejected: evaluate: outputs differ: logits [0] 0.1 vs 0.3"
    assert "  train (function): accepted - outputs equal, .grad untouched" in lines
    assert "  evaluate (function): rejected" in lines


@pytest.mark.torch
def test_piped_verify_output_is_not_cut_at_80_columns(tmp_path: Path) -> None:
    """A real run with stdout a pipe: one verdict line however long, said once."""
    import sys

    (tmp_path / "before.py").write_text("import torch\n\n\ndef scale(x):\n    y = x * 2\n    return y.sum().item()\n")
    (tmp_path / "after.py").write_text(
        "import torch\n\n\ndef scale(x):\n    y = x * 2\n    return y.sum().item() + lookup_table_for_scaling\n"
    )
    completed = subprocess.run(
        [sys.executable, "-m", "autograd_fix", "verify", "before.py", "after.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
    )
    assert completed.returncode == 3, completed.stderr
    first, second = completed.stdout.splitlines()[:2]
    assert first.startswith("unverified: function scale with synthesized inputs: cannot bind 'lookup_table_for_scaling'")
    assert first.endswith('lookup_table_for_scaling = "mypkg.testing:make_lookup_table_for_scaling"')
    assert "[tool.autograd-fix.verify]" in first  # not eaten as rich markup
    assert second == "  scale (function): unverified"


def _gated(repo_root: Path) -> str:
    """The AGF003 example as a library file (no __main__: function-mode verification):
    one safe and one unsafe fix, both accepted."""
    example = (repo_root / "examples" / "inplace_on_grad_tracked_tensor.py").read_text()
    return example.split('\nif __name__ == "__main__":')[0]


@pytest.mark.torch
def test_listing_counts_what_apply_then_fixes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo_root: Path) -> None:
    """An unsafe fix that verification accepts is applied by a plain --apply: the
    listing must not send the user to --unsafe-fixes for it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gated.py").write_text(_gated(repo_root))
    listing = run("gated.py")
    assert listing.stdout.splitlines()[-1] == (
        "Found 2 findings; 1 fixable with --apply; 1 more fixable with --apply once verification accepts it."
    )
    applied = run("--apply", "gated.py")
    assert applied.exit_code == 0, applied.output
    assert applied.stdout.splitlines()[-1] == "Fixed 2 findings in 1 file; nothing left to fix."
    assert "        gate.mul_(2.0)\n" not in (tmp_path / "gated.py").read_text()


def test_listing_without_verification_points_to_unsafe_fixes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo_root: Path) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gated.py").write_text(_gated(repo_root))
    listing = run("--no-verify", "gated.py")
    assert listing.stdout.splitlines()[-1] == "Found 2 findings; 1 fixable with --apply; 1 more fixable with --unsafe-fixes."
    applied = run("--apply", "--no-verify", "gated.py")
    assert applied.stdout.splitlines()[-1] == (
        "Fixed 1 finding in 1 file; 1 remaining; not verified (--no-verify); 1 more fixable with --unsafe-fixes."
    )


@pytest.mark.parametrize("mode", [[], ["--diff"], ["--apply"]])
def test_nothing_checked_is_not_called_no_findings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.txt").write_text("not python\n")
    (tmp_path / "broken.py").write_text(UNCLOSED)
    empty = run(*mode, "--no-verify", "docs")
    assert "No findings" not in empty.output
    assert "No files checked." in empty.output
    broken = run(*mode, "--no-verify", "broken.py")
    assert "No findings" not in broken.output
    assert "No files checked; 1 file could not be checked." in broken.output


def test_a_checked_clean_file_still_says_no_findings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "clean.py").write_text("import torch\n\nx = torch.ones(3)\n")
    (tmp_path / "broken.py").write_text(UNCLOSED)
    result = run("clean.py", "broken.py")
    assert result.stdout.splitlines()[-1] == "No findings; 1 file could not be checked."


def _quoted_line(reason: str) -> tuple[int, str]:
    """(N, code) from a reason's `at line N: code`."""
    import re

    match = re.search(r" at line (\d+): (.+?)(?: \(run\)|; |$)", reason)
    assert match is not None, reason
    return int(match.group(1)), match.group(2)


def _user_line(data: bytes, number: int) -> str:
    text = data.decode("utf-8-sig").replace("\r\n", "\n")
    return text.split("\n")[number - 1].strip()


EVALUATE = (
    '"""Evaluation helpers."""\n'
    "\n"
    "import torch\n"
    "from torch import nn\n"
    "\n"
    "\n"
    "def evaluate(model, val_loader):\n"
    "    model.eval()\n"
    "    all_logits = []\n"
    "    for inputs, targets in val_loader:\n"
    "        all_logits.append(model(inputs))\n"
    "    scores = torch.cat(all_logits).softmax(1)\n"
    "    return scores.numpy().tolist()\n"
)


@pytest.mark.parametrize("crlf_bom", [False, True], ids=["lf", "bom-crlf"])
@pytest.mark.torch
def test_function_mode_reason_quotes_the_users_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crlf_bom: bool) -> None:
    monkeypatch.chdir(tmp_path)
    data = EVALUATE.encode()
    if crlf_bom:
        data = b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n")
    (tmp_path / "evaluate.py").write_bytes(data)
    import json

    result = run("--diff", "--format", "json", "evaluate.py")
    reason = json.loads(result.stdout)["findings"][0]["verification"]["reason"]
    assert reason.startswith("function evaluate with synthesized inputs")
    number, code = _quoted_line(reason)
    assert (number, code) == (13, "return scores.numpy().tolist()")
    assert code == _user_line(data, number)


SCALE = '"""Scaling helpers."""\nimport torch\n\n\ndef scale(x):\n    x = x.detach().requires_grad_()\n    y = x * 2\n    z = y.sum()\n    z.backward()\n    return x.grad\n'
SCALE_PATCHED = SCALE.replace("    z = y.sum()\n", "    with torch.no_grad():\n        z = y.sum()\n")


@pytest.mark.torch
def test_verify_quotes_the_original_files_line_for_the_rewritten_runs_error(tmp_path: Path) -> None:
    """The patch inserted a line above the one that now raises: the reason names that
    line's number in the user's (original) file, with its text."""
    from autograd_fix.cli.verify_command import verify_app

    original = b"\xef\xbb\xbf" + SCALE.replace("\n", "\r\n").encode()
    (tmp_path / "scale.py").write_bytes(original)
    (tmp_path / "scale_fixed.py").write_text(SCALE_PATCHED)
    result = CliRunner().invoke(verify_app, [str(tmp_path / "scale.py"), str(tmp_path / "scale_fixed.py"), "--format", "json"])
    assert result.exit_code == 1, result.output
    import json

    reason = json.loads(result.stdout)["reason"]
    assert "rewritten raises RuntimeError" in reason
    number, code = _quoted_line(reason)
    assert (number, code) == (9, "z.backward()")
    assert code == _user_line(original, number)


@pytest.mark.torch
def test_stdin_reason_counts_lines_in_the_text_checked_not_the_file_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editor pipes its buffer (two lines longer than the saved file) with
    --stdin-filename: the reason's line number and text are the buffer's."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evaluate.py").write_text(EVALUATE)
    buffer = "# edited, not saved yet\n# another new line\n" + EVALUATE
    import json

    result = run("--diff", "--format", "json", "-", "--stdin-filename", "evaluate.py", input=buffer.encode())
    finding = json.loads(result.stdout)["findings"][0]
    assert finding["line"] == 9
    number, code = _quoted_line(finding["verification"]["reason"])
    assert (number, code) == (15, "return scores.numpy().tolist()")
    assert code == _user_line(buffer.encode(), number)


def test_a_machine_readable_report_loads_neither_rich_nor_verification_verdicts(tmp_path: Path) -> None:
    """A `--no-verify --format json` run (editors, CI, the speed benchmarks) prints no
    styled text and no verdict: rich and `verification.verdict` are not imported
    (tens of ms of every start). A text report of the same file does load rich."""
    import sys

    (tmp_path / "old.py").write_text(DEPRECATED)
    probe = (
        "import sys\nfrom autograd_fix.cli.entry import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as exit:\n    print('exit', exit.code)\n"
        "print(sorted(m for m in ('rich', 'autograd_fix.verification.verdict') if m in sys.modules), file=sys.stderr)\n"
    )
    command = [sys.executable, "-c", probe, "--no-verify", "--no-cache", "old.py"]
    machine = subprocess.run([*command, "--format", "json"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert '"AGF012"' in machine.stdout and "exit 1" in machine.stdout
    assert machine.stderr.splitlines()[-1] == "[]"
    text = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "AGF012" in text.stdout and "'rich'" in text.stderr.splitlines()[-1]
