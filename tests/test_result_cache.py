"""The result cache (issue 20, item 7): a re-run is answered from `.autograd-fix_cache/`,
an edit or a changed setting is not, a corrupt entry is rewritten, an unwritable folder
is one warning, concurrent runs leave whole entries, and a cached run loads no libcst."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli import runner as runner_module
from autograd_fix.cli.app import app
from autograd_fix.cli.result_cache import CACHE_DIR_NAME

TRAIN = textwrap.dedent(
    """\
    import torch


    def fit(model, loader, optimizer):
        for x, y in loader:
            optimizer.zero_grad(set_to_none=False)
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
    """
)
CLEAN = "import torch\n\nweights = torch.ones(3)\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AUTOGRAD_FIX_CACHE_DIR", raising=False)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the static check actually analysed (not answered by the cache)."""
    seen: list[str] = []
    real = runner_module.check_file

    def counting(job):
        seen.append(job.path)
        return real(job)

    monkeypatch.setattr(runner_module, "check_file", counting)
    return seen


def run(*args: str):
    return CliRunner().invoke(app, ["--no-verify", *args])


def entries(root: Path) -> list[Path]:
    return sorted((root / CACHE_DIR_NAME).glob("v*/*.json"))


def test_a_rerun_is_answered_by_the_cache_with_the_same_report(project: Path, checked: list[str]) -> None:
    first = run(".")
    assert first.exit_code == 1 and "AGF015" in first.stdout
    assert sorted(checked) == ["clean.py", "train.py"]
    checked.clear()
    second = run(".")
    assert checked == []
    assert (second.exit_code, second.stdout) == (first.exit_code, first.stdout)
    assert (project / CACHE_DIR_NAME / ".gitignore").read_text().splitlines()[-1] == "*"
    assert len(entries(project)) == 2


def test_an_edit_or_another_setting_is_checked_again(project: Path, checked: list[str]) -> None:
    run(".")
    checked.clear()
    (project / "clean.py").write_text(TRAIN)
    edited = run(".")
    assert checked == ["clean.py"]
    assert "clean.py:6:9: AGF015" in edited.stdout
    checked.clear()
    ignored = run(".", "--ignore", "AGF015")
    assert sorted(checked) == ["clean.py", "train.py"]
    assert "AGF015" not in ignored.stdout
    checked.clear()
    assert run(".", "--unsafe-fixes").exit_code == 1
    assert sorted(checked) == ["clean.py", "train.py"]


def test_no_cache_reads_and_writes_nothing(project: Path, checked: list[str]) -> None:
    run(".", "--no-cache")
    run(".", "--no-cache")
    assert len(checked) == 4
    assert not (project / CACHE_DIR_NAME).exists()


def test_diff_and_apply_never_use_the_cache(project: Path, checked: list[str]) -> None:
    run(".")
    checked.clear()
    shown = run(".", "--diff", "--unsafe-fixes")
    assert sorted(checked) == ["clean.py", "train.py"]
    assert "+        optimizer.zero_grad()\n" in shown.stdout


def test_json_output_reruns_a_file_whose_findings_have_fixes(project: Path, checked: list[str]) -> None:
    run(".")
    checked.clear()
    report = run(".", "--format", "json")
    assert checked == ["train.py"]  # clean.py has no fix to show: its entry answers
    assert json.loads(report.stdout) == json.loads(run(".", "--format", "json", "--no-cache").stdout)


@pytest.mark.parametrize("damage", ["not json {", '{"schema": 1, "key": 3}', "", '{"schema": 1}'])
def test_a_corrupt_entry_is_ignored_and_rewritten(project: Path, checked: list[str], damage: str) -> None:
    first = run(".")
    for entry in entries(project):
        entry.write_text(damage)
    checked.clear()
    again = run(".")
    assert again.stdout == first.stdout
    assert sorted(checked) == ["clean.py", "train.py"]
    assert all(json.loads(entry.read_text())["schema"] == 1 for entry in entries(project))


def test_a_forged_entry_with_wrong_types_is_a_miss(project: Path, checked: list[str]) -> None:
    first = run(".")
    for entry in entries(project):
        data = json.loads(entry.read_text())
        for finding in data["findings"]:
            finding["line"] = "7"
        entry.write_text(json.dumps(data))
    checked.clear()
    assert run(".").stdout == first.stdout
    assert "train.py" in checked


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True, reason="root writes anywhere")
def test_an_unwritable_cache_folder_is_one_warning(project: Path) -> None:
    blocked = project / "ro"
    blocked.mkdir()
    blocked.chmod(0o500)
    try:
        result = run(".", "--cache-dir", str(blocked / "cache"))
    finally:
        blocked.chmod(0o700)
    assert result.exit_code == 1  # the findings' exit code, not an error
    assert result.stderr.count("cannot be written") == 1


def test_a_cache_folder_that_is_a_file_is_one_warning(project: Path) -> None:
    (project / "taken").write_text("a file where the cache would go\n")
    clean = run("clean.py", "--cache-dir", "taken/cache")
    assert clean.exit_code == 0
    assert clean.stderr.count("warning:") == 1 and "cannot be written" in clean.stderr
    findings = run(".", "--cache-dir", "taken/cache")
    assert findings.exit_code == 1 and "AGF015" in findings.stdout


def _tool(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", "from autograd_fix.cli.entry import main; main()", "--no-verify", *args],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_concurrent_runs_leave_whole_entries(tmp_path: Path) -> None:
    for index in range(12):
        (tmp_path / f"train_{index}.py").write_text(TRAIN.replace("fit", f"fit_{index}"))
    runs = [_tool(".", "--jobs", "1", cwd=tmp_path) for _ in range(3)]
    outputs = [proc.communicate(timeout=300) for proc in runs]
    assert [proc.returncode for proc in runs] == [1, 1, 1]
    assert len({out for out, _ in outputs}) == 1
    assert len(entries(tmp_path)) == 12
    assert all(json.loads(entry.read_text())["findings"] for entry in entries(tmp_path))
    assert not [p for p in (tmp_path / CACHE_DIR_NAME).rglob("*.tmp")]
    warm = _tool(".", cwd=tmp_path)
    assert warm.communicate(timeout=120)[0] == outputs[0][0]


def test_a_cached_run_loads_neither_libcst_nor_the_rules(project: Path) -> None:
    probe = (
        "import sys\nfrom autograd_fix.cli.entry import main\n"
        "try:\n    main(['--no-verify', '.'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('libcst', 'autograd_fix.codemods.engine', 'autograd_fix.verification.runner') if m in sys.modules), file=sys.stderr)\n"
    )
    cold = subprocess.run([sys.executable, "-c", probe], cwd=project, capture_output=True, text=True, timeout=120)
    assert "libcst" in cold.stderr.splitlines()[-1]
    warm = subprocess.run([sys.executable, "-c", probe], cwd=project, capture_output=True, text=True, timeout=120)
    assert warm.stderr.splitlines()[-1] == "[]"
    assert warm.stdout == cold.stdout and "AGF015" in warm.stdout


def test_files_no_rule_admits_load_neither_libcst_nor_the_rules(tmp_path: Path) -> None:
    """No rule can fire on a file that shows no PyTorch use, or that none of the rules'
    prefilters admits (`codemods/prefilters.py`: `import torch` alone, issue 20's one-line
    file): a run over such files answers before libcst and the rules load (start-up)."""
    (tmp_path / "setup_tools.py").write_text("import os\n\nprint(os.getcwd())\n")
    (tmp_path / "util.py").write_text("def scale(x, k):\n    x *= k\n    return x\n")
    (tmp_path / "one.py").write_text("import torch\n")
    (tmp_path / "ops.py").write_text("import torch\n\n\ndef ones(n):\n    return torch.ones(n)\n")
    probe = (
        "import sys\nfrom autograd_fix.cli.entry import main\n"
        "try:\n    main(['--no-verify', '--no-cache', '.'])\nexcept SystemExit as exit:\n    print('exit', exit.code)\n"
        "print(sorted(m for m in sys.modules if m == 'libcst' or '.rules.' in m), file=sys.stderr)\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.stderr.splitlines()[-1] == "[]"
    assert "No findings." in run.stdout and "exit 0" in run.stdout
    (tmp_path / "train.py").write_text(TRAIN)  # a torch file in the same run: the rules load, as always
    run = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "'libcst'" in run.stderr.splitlines()[-1] and "AGF015" in run.stdout
