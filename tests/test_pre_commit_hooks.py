"""The hooks in `.pre-commit-hooks.yaml`, run by the real pre-commit as a user's would be.

pre-commit builds a fresh virtualenv and pip-installs this package into it, without
torch (an optional extra): the hook environment installs in seconds. The fixer hook
verifies under the project's own Python: the project here has a `.venv` with torch (an
environment made from this test environment's packages, `environments`), and the user's
configuration trusts the project, so the hook finds it (pre-commit points `VIRTUAL_ENV`
at the hook's own environment). pip's installation report (`PIP_REPORT`) shows that no
torch was installed; `PIP_CONSTRAINT` still pins torch to 2.13.0, should anything ask
for it (an unpinned `torch>=2.1` resolves to a multi-GB CUDA build).
`VIRTUALENV_SYSTEM_SITE_PACKAGES=1` lets the hook's virtualenv reuse the packages of
the interpreter it is built from; set `AUTOGRAD_FIX_TEST_CLEAN_HOOK_ENV=1` to build the
environment from nothing, as a user's first `pre-commit run` does. This package itself
is always installed into the hook's environment from the snapshot.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from environments import derived_environment, without_autograd_fix

REPO = Path(__file__).resolve().parent.parent
TORCH_PIN = "torch==2.13.0"

TRAIN = textwrap.dedent(
    """\
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    train_data = [(torch.randn(4, 8), torch.randint(0, 2, (4,))) for _ in range(4)]
    val_data = [torch.randn(4, 8) for _ in range(3)]

    for inputs, targets in train_data:
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()

    model.eval()
    predictions = []
    for inputs in val_data:
        predictions.append(model(inputs))
    print(torch.cat(predictions).argmax(1).tolist())
    """
)


def git(*args: str, cwd: Path) -> str:
    command = ["git", "-c", "user.name=autograd-fix tests", "-c", "user.email=tests@example.invalid", "-c", "commit.gpgsign=false"]
    return subprocess.run([*command, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def snapshot_of_this_repository(target: Path) -> Path:
    """A one-commit copy of the working tree (uncommitted edits included), so that
    pre-commit installs exactly the code under test."""
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=REPO).split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    git("init", "-q", cwd=target)
    git("add", "-A", cwd=target)
    git("commit", "-q", "-m", "snapshot", cwd=target)
    return target


def test_manifest_declares_both_hooks() -> None:
    hooks = {hook["id"]: hook for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"autograd-fix", "autograd-fix-apply"}
    for hook in hooks.values():
        assert hook["language"] == "python" and hook["types_or"] == ["python", "jupyter"]
        assert hook["entry"].split()[0] == "autograd-fix"  # the console script of this package
    assert "--check" in hooks["autograd-fix"]["entry"].split()
    assert "--apply" in hooks["autograd-fix-apply"]["entry"].split()
    for hook in hooks.values():  # pre-commit names files explicitly: exclusions must still hold
        assert "--force-exclude" in hook["entry"].split()


@pytest.mark.slow
@pytest.mark.torch
def test_hook_fails_on_a_buggy_training_file_and_passes_after_apply(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    hook_repo = snapshot_of_this_repository(tmp_path / "hook-repo")
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    (project / "legacy").mkdir()
    (project / "legacy" / "old.py").write_text(TRAIN)  # the same bug, in a folder the project excludes
    (project / "pyproject.toml").write_text('[tool.autograd-fix]\nexclude = ["legacy/"]\n')
    (project / "README.md").write_text("# a project\n")
    (project / ".gitignore").write_text(".venv/\n")
    derived_environment(project / ".venv", without_autograd_fix)  # the project's Python, with torch
    user_config = tmp_path / "xdg" / "autograd-fix" / "config.toml"
    user_config.parent.mkdir(parents=True)
    user_config.write_text(f'[verify]\ntrusted-projects = ["{project}"]\n')
    git("init", "-q", cwd=project)
    git("add", "-A", cwd=project)
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(TORCH_PIN + "\n")
    report = tmp_path / "pip-report.json"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("GIT_", "PRE_COMMIT", "VIRTUALENV_"))}
    env.update(
        PIP_CONSTRAINT=str(constraints),  # read by the pip that builds the hook's environment
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"),
        NO_COLOR="1",
        XDG_CONFIG_HOME=str(tmp_path / "xdg"),
    )
    env.pop("VIRTUAL_ENV", None)
    env.pop("CONDA_PREFIX", None)
    if not os.environ.get("AUTOGRAD_FIX_TEST_CLEAN_HOOK_ENV"):
        env["VIRTUALENV_SYSTEM_SITE_PACKAGES"] = "1"

    def try_repo(*hook: str, pip_report: bool = False) -> subprocess.CompletedProcess[str]:
        extra = {"PIP_REPORT": str(report)} if pip_report else {}
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo), *hook, "--all-files", "--color", "never"],
            cwd=project, env={**env, **extra}, capture_output=True, text=True, timeout=600,
        )

    first = try_repo(pip_report=True)  # both hooks: the check, then the fixer
    output = first.stdout + first.stderr
    assert first.returncode == 1, output
    assert "autograd-fix (check)" in output and "train.py:19:1: AGF001" in output
    assert "autograd-fix (apply fixes)" in output and "files were modified by this hook" in output
    fixed = (project / "train.py").read_text()
    assert "with torch.no_grad():\n    for inputs in val_data:\n        predictions.append(model(inputs))" in fixed
    # pre-commit passed legacy/old.py by name; --force-exclude kept both hooks off it
    assert "legacy/old.py" not in output
    assert (project / "legacy" / "old.py").read_text() == TRAIN

    installed = {item["metadata"]["name"].lower(): item for item in json.loads(report.read_text())["install"]}
    assert "autograd-fix" in installed
    assert "torch" not in installed  # verification used the project's torch

    second = try_repo("autograd-fix")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Passed" in second.stdout
