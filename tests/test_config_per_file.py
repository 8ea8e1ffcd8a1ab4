"""Configuration per file (issue 20, item 2): each file is checked with its nearest
configuration, whatever the order of the paths; dedicated config files, `extend`,
`--config PATH` and `KEY=VALUE`, `--isolated`, `--show-settings` and `--show-files`."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli.app import app
from autograd_fix.verification.config import load_config as load_verify_config

EVAL = textwrap.dedent(
    """\
    import torch


    def validate(model, loader):
        model.eval()
        scores = []
        for x, y in loader:
            scores.append(model(x))
        return scores
    """
)
DATA = textwrap.dedent(
    """\
    def train(model, x, y, optimizer):
        for _ in range(10):
            output = model(x)
            accuracy = (output.data.argmax(1) == y).float().mean().item()
            loss = torch.nn.functional.cross_entropy(output, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return accuracy
    """
)


def run(*args: str):
    return CliRunner().invoke(app, ["--no-verify", *args], catch_exceptions=False)


@pytest.fixture
def two_projects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name, ignored in (("projA", "AGF001"), ("projB", "AGF009")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "e.py").write_text(EVAL + "\n\n" + DATA)
        (tmp_path / name / "pyproject.toml").write_text(f'[tool.autograd-fix]\nignore = ["{ignored}"]\n')
    return tmp_path


def codes_by_file(stdout: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for line in stdout.splitlines():
        if ": AGF" in line:
            path, rest = line.split(":", 1)
            found.setdefault(path, set()).add(rest.split(": ", 1)[1].split()[0])
    return found


def test_each_project_keeps_its_own_settings_in_either_order(two_projects: Path) -> None:
    forward = codes_by_file(run("projA/e.py", "projB/e.py").stdout)
    backward = codes_by_file(run("projB/e.py", "projA/e.py").stdout)
    assert forward == backward
    assert "AGF001" not in forward["projA/e.py"] and "AGF001" in forward["projB/e.py"]
    assert "AGF009" in forward["projA/e.py"] and "AGF009" not in forward["projB/e.py"]
    # the same when the two are found by walking their parent, which has no configuration
    assert codes_by_file(run(".").stdout) == forward


def test_a_sub_projects_exclude_holds_when_its_parent_is_walked(two_projects: Path) -> None:
    (two_projects / "projB" / "pyproject.toml").write_text('[tool.autograd-fix]\nexclude = ["e.py"]\n')
    assert "projB/e.py" not in run(".").stdout
    assert "projA/e.py" in run(".").stdout


def test_dedicated_files_come_before_pyproject_in_a_folder(two_projects: Path) -> None:
    (two_projects / "projA" / "autograd-fix.toml").write_text('select = ["AGF009"]\n')
    assert codes_by_file(run("projA").stdout)["projA/e.py"] == {"AGF009"}
    (two_projects / "projA" / ".autograd-fix.toml").write_text('ignore = ["AGF009"]\n')
    assert codes_by_file(run("projA").stdout)["projA/e.py"] == {"AGF001"}


def test_extend_merges_and_a_cycle_is_a_clear_error(two_projects: Path) -> None:
    (two_projects / "base.toml").write_text('select = ["AGF001"]\n\n[verify]\nargv = ["--epochs", "1"]\nloop-cap = 2\n')
    (two_projects / "projB" / "pyproject.toml").write_text(
        '[tool.autograd-fix]\nextend = "../base.toml"\n\n[tool.autograd-fix.verify]\nloop-cap = 1\n'
    )
    assert codes_by_file(run("projB").stdout)["projB/e.py"] == {"AGF001"}
    verify = load_verify_config(config_dir=str(two_projects / "projB"))
    assert verify.argv == ("--epochs", "1") and verify.loop_cap == 1  # [verify] merged key by key
    shown = run("--show-settings", "projB/e.py").stdout
    assert "extends" in shown and "base.toml" in shown and "select = ['AGF001']" in shown
    (two_projects / "base.toml").write_text('extend = "projB/pyproject.toml"\n')
    cyclic = run("projB")
    assert cyclic.exit_code == 2 and "cycle" in cyclic.stderr and "Traceback" not in cyclic.output
    (two_projects / "projB" / "pyproject.toml").write_text('[tool.autograd-fix]\nextend = "missing.toml"\n')
    missing = run("projB")
    assert missing.exit_code == 2 and "does not exist" in missing.stderr


def test_config_file_key_value_and_isolated(two_projects: Path) -> None:
    (two_projects / "strict.toml").write_text('select = ["AGF009"]\n')
    assert codes_by_file(run("--config", "strict.toml", "projA", "projB").stdout) == {
        "projA/e.py": {"AGF009"}, "projB/e.py": {"AGF009"},
    }
    # KEY=VALUE goes over each file's own configuration
    both = codes_by_file(run("--config", 'select=["AGF001"]', "projA", "projB").stdout)
    assert both == {"projB/e.py": {"AGF001"}}  # projA ignores AGF001 in its own file
    assert codes_by_file(run("--isolated", "projA", "projB").stdout) == {
        "projA/e.py": {"AGF001", "AGF009"}, "projB/e.py": {"AGF001", "AGF009"},
    }
    for bad in (["--config", "select=[AGF001"], ["--config", "selct=[]"], ["--config", "a.toml", "--config", "b.toml"]):
        result = run(*bad, "projA")
        assert result.exit_code == 2 and result.stderr.startswith("error:"), result.output


def test_show_files_lists_what_would_be_checked(two_projects: Path) -> None:
    (two_projects / "projA" / "pyproject.toml").write_text('[tool.autograd-fix]\nexclude = ["e.py"]\n')
    (two_projects / "projA" / "f.py").write_text(EVAL)
    result = run("--show-files", "projA", "projB")
    assert result.exit_code == 0 and result.stdout.splitlines() == ["projA/f.py", "projB/e.py"]
    settings = run("--show-settings", "projB/e.py")
    assert settings.exit_code == 0 and "projB/pyproject.toml" in settings.stdout and "ignore = ['AGF009']" in settings.stdout
