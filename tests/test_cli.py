"""The command-line contract: output format, modes, exit codes, config, stdin, JSON."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli.app import app

EVAL_LOOP = textwrap.dedent(
    """\
    import torch


    def fit(model, train_loader, val_loader, optimizer):
        for x, y in train_loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
        model.eval()
        scores = []
        for x, y in val_loader:  # validation
            scores.append(model(x))
        return scores
    """
)
EVAL_LOOP_FIXED = textwrap.dedent(
    """\
    import torch


    def fit(model, train_loader, val_loader, optimizer):
        for x, y in train_loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
        model.eval()
        scores = []
        with torch.no_grad():
            for x, y in val_loader:  # validation
                scores.append(model(x))
        return scores
    """
)
CLEAN = "import torch\n\nx = torch.ones(3)\n"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(EVAL_LOOP)
    (tmp_path / "src" / "clean.py").write_text(CLEAN)
    return tmp_path


def run(*args: str, input: bytes | None = None, verify: bool = False):
    """Invoke the CLI; verification (slow, tested in test_cli_verification) off unless asked."""
    extra = [] if verify or not {"--diff", "--apply"} & set(args) else ["--no-verify"]
    return CliRunner().invoke(app, [*extra, *args], input=input, catch_exceptions=False)


def test_report_lists_findings_in_editor_format(project: Path) -> None:
    result = run("src")
    assert result.exit_code == 1  # findings remain (Ruff's exit codes)
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "src/train.py:11:5: AGF001 [*] evaluation loop runs the model with autograd recording; "
        "wrap it in `with torch.no_grad():`"
    )
    assert lines[-1] == "Found 1 finding; 1 fixable with --apply."


def test_no_findings_says_so(project: Path) -> None:
    result = run("src/clean.py")
    assert result.exit_code == 0
    assert result.stdout.strip() == "No findings."


def test_check_exits_one_with_findings_and_zero_without(project: Path) -> None:
    assert run("--check", "src").exit_code == 1
    assert run("--check", "src/clean.py").exit_code == 0


@pytest.mark.parametrize("output_format", ["text", "json", "sarif", "github"])
def test_exit_codes_follow_ruff_in_every_format(project: Path, output_format: str) -> None:
    """1 while findings remain (no --check needed: a CI step copied from Ruff's habits
    must fail), 0 when clean, 2 for errors; --exit-zero keeps 0, never hides errors."""
    fmt = ["--format", output_format]
    assert run(*fmt, "src").exit_code == 1
    assert run(*fmt, "--diff", "src").exit_code == 1  # a diff to show
    assert run(*fmt, "src/clean.py").exit_code == 0
    assert run(*fmt, "--diff", "src/clean.py").exit_code == 0
    assert run(*fmt, "--exit-zero", "src").exit_code == 0
    assert run(*fmt, "--exit-zero", "src", "missing.py").exit_code == 2


def test_apply_exits_zero_when_everything_was_fixed_unless_asked(project: Path) -> None:
    source = project / "src" / "train.py"
    assert run("--apply", "src").exit_code == 0
    source.write_text(EVAL_LOOP)
    assert run("--apply", "--exit-non-zero-on-fix", "src").exit_code == 1
    assert source.read_text() == EVAL_LOOP_FIXED
    assert run("--apply", "--exit-non-zero-on-fix", "src").exit_code == 0  # nothing fixed this time


def test_apply_exits_one_when_a_finding_stays(project: Path) -> None:
    """An unsafe fix that --no-verify --apply leaves alone (no --unsafe-fixes): its
    finding remains, so the run fails as Ruff's would."""
    shutil.copy(EXAMPLES / "missing_zero_grad.py", project / "src" / "steps.py")
    result = run("--apply", "src/steps.py")
    assert "AGF002" in result.stdout and result.exit_code == 1, result.stdout
    assert run("--apply", "--exit-zero", "src/steps.py").exit_code == 0


def test_diff_writes_nothing_and_git_apply_accepts_it(project: Path) -> None:
    result = run("--diff", "--color", "never", "src")
    assert result.exit_code == 1  # there is a diff to show
    assert (project / "src" / "train.py").read_text() == EVAL_LOOP
    assert result.stdout.startswith("--- a/src/train.py\n+++ b/src/train.py\n@@")
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    patch = project / "fix.patch"
    patch.write_text(result.stdout)
    subprocess.run(["git", "apply", str(patch)], cwd=project, check=True)
    assert (project / "src" / "train.py").read_text() == EVAL_LOOP_FIXED


def test_diff_combines_with_check(project: Path) -> None:
    result = run("--diff", "--check", "src")
    assert result.exit_code == 1
    assert "+    with torch.no_grad():" in result.stdout


def test_apply_writes_fix_and_reports(project: Path) -> None:
    result = run("--apply", "src")
    assert result.exit_code == 0
    assert (project / "src" / "train.py").read_text() == EVAL_LOOP_FIXED
    assert (project / "src" / "clean.py").read_text() == CLEAN
    assert "Fixed 1 finding in 1 file; nothing left to fix; not verified (--no-verify)." in result.stdout
    again = run("--check", "src")
    assert again.exit_code == 0, "a second run must find nothing"


def test_apply_keeps_crlf_bom_and_encoding(project: Path) -> None:
    path = project / "src" / "win.py"
    body = ("# -*- coding: utf-8 -*-\n# é\n" + EVAL_LOOP).replace("\n", "\r\n")
    path.write_bytes(b"\xef\xbb\xbf" + body.encode("utf-8"))
    assert run("--apply", "src/win.py").exit_code == 0
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    text = data[3:].decode("utf-8")
    assert "\r\n" in text and "\n" not in text.replace("\r\n", "")
    assert text.replace("\r\n", "\n") == "# -*- coding: utf-8 -*-\n# é\n" + EVAL_LOOP_FIXED


def test_apply_keeps_latin1_encoding(project: Path) -> None:
    path = project / "src" / "latin.py"
    path.write_bytes(("# -*- coding: latin-1 -*-\n# café\n" + EVAL_LOOP).encode("latin-1"))
    assert run("--apply", "src/latin.py").exit_code == 0
    assert path.read_bytes().decode("latin-1") == "# -*- coding: latin-1 -*-\n# café\n" + EVAL_LOOP_FIXED


def test_unparsable_and_binary_files_are_reported_and_the_run_goes_on(project: Path) -> None:
    (project / "src" / "broken.py").write_text("import torch\ndef f(:\n    pass\n")
    (project / "src" / "blob.py").write_bytes(b"\x00\x01torch\x02")
    result = run("--apply", "src")
    assert result.exit_code == 2
    assert "error: src/broken.py: syntax error" in result.stderr
    assert "error: src/blob.py: binary file" in result.stderr
    assert (project / "src" / "train.py").read_text() == EVAL_LOOP_FIXED


def test_files_without_torch_use_are_not_parsed(project: Path) -> None:
    """The prefilter skips files no rule could fire on: even a syntax error there is
    left to Python's own tools."""
    (project / "src" / "notes.py").write_text("def f(:\n")
    assert run("--check", "src/notes.py").exit_code == 0


def test_missing_path_is_an_error(project: Path) -> None:
    result = run("nope.py")
    assert result.exit_code == 2
    assert "nope.py" in result.stderr


def test_usage_errors_exit_two(project: Path) -> None:
    assert run("--diff", "--apply", "src").exit_code == 2
    assert run("-", "src").exit_code == 2  # stdin with paths (no PATH at all means ".")
    bad = run("--select", "AGF999", "src")
    assert bad.exit_code == 2 and "AGF999" in bad.stderr


def test_select_and_ignore_by_prefix(project: Path) -> None:
    assert "AGF001" in run("--select", "AGF0", "src").stdout
    assert "AGF001" not in run("--ignore", "AGF00", "src").stdout
    assert "AGF001" not in run("--select", "AGF001", "--ignore", "AGF001", "src").stdout


def test_noqa_suppresses(project: Path) -> None:
    path = project / "src" / "train.py"
    path.write_text(EVAL_LOOP.replace("# validation", "# noqa: AGF001"))
    assert "AGF001" not in run("src/train.py").stdout
    path.write_text(EVAL_LOOP.replace("# validation", "# noqa"))
    assert "AGF001" not in run("src/train.py").stdout
    path.write_text(EVAL_LOOP.replace("# validation", "# noqa: AGF002"))
    assert "AGF001" in run("src/train.py").stdout


def test_config_ignore_exclude_and_per_file_ignores(project: Path) -> None:
    pyproject = project / "pyproject.toml"
    pyproject.write_text('[tool.autograd-fix]\nignore = ["AGF001"]\n')
    assert "AGF001" not in run("src").stdout
    pyproject.write_text('[tool.autograd-fix]\nexclude = ["src/train.py"]\n')
    assert "AGF001" not in run("src").stdout
    pyproject.write_text('[tool.autograd-fix]\nper-file-ignores = { "src/*.py" = ["AGF001"] }\n')
    assert "AGF001" not in run("src").stdout
    pyproject.write_text('[tool.autograd-fix]\nselct = ["AGF001"]\n')
    result = run("src")
    assert result.exit_code == 2 and "selct" in result.stderr


def test_cli_select_wins_over_config(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.autograd-fix]\nselect = ["AGF002"]\n')
    assert "AGF001" not in run("src").stdout
    assert "AGF001" in run("--select", "AGF001", "src").stdout


def test_gitignore_and_default_excludes(project: Path) -> None:
    for folder in ("build", ".venv", "generated", "pkg/__pycache__"):
        (project / folder).mkdir(parents=True)
        (project / folder / "train.py").write_text(EVAL_LOOP)
    (project / ".git").mkdir()
    (project / ".gitignore").write_text("generated/\n")
    result = run(".")
    assert result.stdout.count("AGF001") == 1
    assert "src/train.py" in result.stdout


def test_explicit_file_is_checked_even_if_ignored(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.autograd-fix]\nexclude = ["src/train.py"]\n')
    assert "AGF001" in run("src/train.py").stdout


def test_force_exclude_holds_for_named_files_as_pre_commit_passes_them(project: Path) -> None:
    (project / "legacy").mkdir()
    (project / "legacy" / "old.py").write_text(EVAL_LOOP)
    (project / "pyproject.toml").write_text('[tool.autograd-fix]\nexclude = ["legacy/"]\n')
    named = ("legacy/old.py", "src/train.py", "src/clean.py")
    forced = run("--force-exclude", "--apply", *named)
    assert (project / "legacy" / "old.py").read_text() == EVAL_LOOP  # not rewritten
    assert "legacy" not in forced.stdout + forced.stderr
    assert (project / "src" / "train.py").read_text() == EVAL_LOOP_FIXED
    assert forced.exit_code == 0
    # only excluded files staged: a clean run, not "no Python files"
    only = run("--force-exclude", "legacy/old.py")
    assert only.exit_code == 0 and "No files checked." in only.stdout, only.stdout + only.stderr
    # the same from configuration, and a named folder that is excluded
    (project / "pyproject.toml").write_text('[tool.autograd-fix]\nexclude = ["legacy/"]\nforce-exclude = true\n')
    assert run("legacy/old.py", "legacy").exit_code == 0
    assert "AGF001" in run("--no-force-exclude", "legacy/old.py").stdout
    # default excludes count too: a file inside a virtual environment's folder
    (project / ".venv").mkdir()
    (project / ".venv" / "site.py").write_text(EVAL_LOOP)
    assert "AGF001" not in run("--force-exclude", ".venv/site.py").stdout
    (project / "pyproject.toml").write_text('[tool.autograd-fix]\nforce-exclude = "yes"\n')
    assert run("src").exit_code == 2


def test_stdin_report_and_apply(project: Path) -> None:
    result = run("-", "--stdin-filename", "model/eval.py", input=EVAL_LOOP.encode())
    assert result.stdout.startswith("model/eval.py:11:5: AGF001")
    fixed = run("--apply", "-", input=EVAL_LOOP.encode())
    assert fixed.exit_code == 0
    assert fixed.stdout == EVAL_LOOP_FIXED
    untouched = run("--apply", "-", input=CLEAN.encode())
    assert untouched.stdout == CLEAN


def test_json_output_is_pinned(project: Path) -> None:
    result = run("--format", "json", "src")
    document = json.loads(result.stdout)
    assert set(document) == {"findings", "summary"}
    (finding,) = document["findings"]
    assert set(finding) == {
        "path", "cell", "line", "column", "end_line", "end_column", "code", "name", "message", "round", "fix", "verification"
    }
    assert finding["round"] == 1  # a follow-on fix of a later round says which
    assert finding["cell"] is None  # set for notebooks only
    assert finding["verification"] is None  # verification runs only for --diff / --apply
    assert (finding["path"], finding["line"], finding["column"], finding["code"]) == ("src/train.py", 11, 5, "AGF001")
    assert finding["name"] == "eval-forward-without-no-grad"
    assert finding["fix"]["applicability"] == "safe"
    assert "+    with torch.no_grad():" in finding["fix"]["diff"]
    assert document["summary"] == {"files": 2, "findings": 1, "fixable": 1, "fixed": 0, "errors": []}


def test_unsafe_fixes_only_with_flag(project: Path) -> None:
    source = "import torch\n\ndef evaluate(model, loader):\n    model.eval()\n    return [model(x) for x in loader]\n"
    (project / "src" / "ev.py").write_text(source)
    result = run("--no-verify", "src/ev.py")  # as the --apply below: no verification to accept it
    assert "AGF001 [*]" not in result.stdout and "1 more fixable with --unsafe-fixes" in result.stdout
    run("--apply", "src/ev.py")
    assert (project / "src" / "ev.py").read_text() == source
    run("--apply", "--unsafe-fixes", "src/ev.py")
    assert "@torch.no_grad()\ndef evaluate" in (project / "src" / "ev.py").read_text()


def test_list_rules_explain_version() -> None:
    listing = run("--list-rules")
    assert listing.exit_code == 0 and "AGF001  eval-forward-without-no-grad" in listing.stdout
    explained = run("--explain", "agf001")
    assert explained.exit_code == 0 and "## Why is this bad?" in explained.stdout
    assert run("--explain", "AGF999").exit_code == 2
    assert run("--version").stdout.startswith("autograd-fix ")


def test_many_files_use_the_pool_and_agree(project: Path) -> None:
    for number in range(12):
        (project / "src" / f"m{number}.py").write_text(EVAL_LOOP)
    serial = run("--jobs", "1", "src").stdout
    parallel = run("--jobs", "2", "src").stdout
    assert serial == parallel and serial.count("AGF001") == 13


@pytest.mark.slow
def test_console_script_and_python_m(project: Path) -> None:
    bin_dir = Path(sys.executable).parent
    script = bin_dir / "autograd-fix"
    env = {**os.environ, "NO_COLOR": "1"}
    for command in ([str(script)], [sys.executable, "-m", "autograd_fix"]):
        completed = subprocess.run([*command, "--check", "src"], capture_output=True, text=True, env=env, cwd=project)
        assert completed.returncode == 1, completed.stderr
        assert "src/train.py:11:5: AGF001" in completed.stdout
    completed = subprocess.run(
        [str(script), "--apply", "-", "--stdin-filename", "x.py", "--no-verify"],
        input=EVAL_LOOP, capture_output=True, text=True, env=env, cwd=project,
    )
    assert completed.returncode == 0 and completed.stdout == EVAL_LOOP_FIXED
