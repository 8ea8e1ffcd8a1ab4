"""Verification runs under the project's own Python, which autograd-fix need not be
installed in; static analysis needs no torch at all.

The environments here are real virtual environments (`environments.derived_environment`):
one with autograd-fix and no torch (as `pipx install autograd-fix` leaves it), one with
torch and no autograd-fix (the project's own). A Python a repository could plant (its
`.venv`, a `python` key in its pyproject.toml) is never started unless the user trusts
the project: the verification worker starts outside the sandbox.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from autograd_fix.verification import Verifier, verify_pair
from autograd_fix.verification.config import load_config
from autograd_fix.verification.interpreter import OWN, InterpreterError, Interpreter, choose, problem
from autograd_fix.verification.shadow import project_root
from autograd_fix.verification.trust import UserSettings, load_user_settings
from environments import clean_environment, derived_environment, without_autograd_fix, without_torch

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = "examples/eval_forward_without_no_grad.py"
BASE = "import torch\nx = torch.ones(3, requires_grad=True)\ntotal = float((x * 2).sum())\n"


@pytest.fixture(scope="module")
def environments(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"tool": a Python with autograd-fix and no torch, "project": one with torch and no
    autograd-fix}."""
    folder = tmp_path_factory.mktemp("environments")
    return {
        "tool": derived_environment(folder / "tool", without_torch),
        "project": derived_environment(folder / "project", without_autograd_fix),
    }


def run_tool(python: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "autograd_fix", *args], cwd=REPO, env=env or clean_environment(),
        capture_output=True, text=True, timeout=300,
    )


@pytest.mark.torch
def test_the_environments_are_what_they_claim(environments: dict[str, Path]) -> None:
    tool = subprocess.run([environments["tool"], "-c", "import autograd_fix, torch"], capture_output=True, text=True)
    assert "No module named 'torch'" in tool.stderr
    looked_up = "import importlib.util as u; assert u.find_spec('torch'); import autograd_fix"
    project = subprocess.run([environments["project"], "-c", looked_up], capture_output=True, text=True)
    assert "No module named 'autograd_fix'" in project.stderr


def test_static_analysis_needs_no_torch(environments: dict[str, Path]) -> None:
    """Nothing in codemods/ or cli/ imports torch when nothing is verified."""
    checked = run_tool(environments["tool"], "--check", "examples/")
    assert checked.returncode == 1, checked.stderr
    assert "examples/eval_forward_without_no_grad.py:33:9: AGF001 [*]" in checked.stdout
    assert "Traceback" not in checked.stderr
    unverified_diff = run_tool(environments["tool"], "--diff", "--no-verify", EXAMPLE)
    assert unverified_diff.returncode == 1, unverified_diff.stderr  # a diff to show: findings remain
    assert "+        with torch.no_grad():" in unverified_diff.stdout


def test_without_torch_anywhere_each_fix_is_unverified_and_says_what_to_do(environments: dict[str, Path]) -> None:
    done = run_tool(environments["tool"], "--diff", EXAMPLE, "examples/missing_zero_grad.py")
    assert done.returncode == 1, done.stderr  # the findings remain
    assert "Traceback" not in done.stderr
    verdicts = [line for line in done.stdout.splitlines() if line.startswith("# AGF")]
    assert len(verdicts) == 2
    for line in verdicts:
        assert " unverified: not run: no Python with torch to verify with: autograd-fix's own Python" in line
        assert "has no torch" in line and "Pass --python PATH" in line and "autograd-fix[verify]" in line
    assert "2 unverified" in done.stderr


@pytest.mark.torch
def test_a_tool_without_torch_verifies_with_the_projects_python(environments: dict[str, Path]) -> None:
    """The issue's done-when: autograd-fix without torch, verification under `--python`,
    a second environment that has torch and no autograd-fix."""
    project = environments["project"]
    done = run_tool(environments["tool"], "--diff", EXAMPLE, "--python", str(project))  # its folder will do
    assert done.returncode == 1, done.stderr  # a diff to show
    (verdict,) = [line for line in done.stdout.splitlines() if line.startswith("# AGF001")]
    assert " accepted: " in verdict, verdict
    assert "+        with torch.no_grad():" in done.stdout
    assert f"note: verifying with {project} (Python 3." in done.stderr and "torch 2." in done.stderr
    assert "; --python)" in done.stderr


def test_the_verify_command_takes_python_too(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from autograd_fix.cli.verify_command import verify_app

    before, after = tmp_path / "before.py", tmp_path / "after.py"
    before.write_text(BASE)
    after.write_text(BASE + "total = total * 1\n")
    missing = str(tmp_path / "nowhere" / "python")
    compared = CliRunner().invoke(verify_app, [str(before), str(after), "--python", missing])
    assert compared.exit_code == 3, compared.output
    assert f"unverified: not run: the Python chosen for verification, {missing} (--python), does not exist" in compared.output
    checked = CliRunner().invoke(verify_app, [str(before), "--gradcheck", "--python", missing])
    assert checked.exit_code == 3 and "<module>: unchecked" in checked.output and "does not exist" in checked.output


# -- which interpreter ---------------------------------------------------------------------

@pytest.mark.torch
def test_an_activated_environment_is_found_and_the_tools_own_is_skipped(environments: dict[str, Path]) -> None:
    project = environments["project"]
    chosen = choose(UserSettings(), None, None, {"VIRTUAL_ENV": str(project.parent.parent)})
    assert (chosen.path, chosen.origin, chosen.own) == (str(project), "VIRTUAL_ENV", False)
    assert chosen.torch and chosen.torch.startswith("2.")
    conda = choose(UserSettings(), None, None, {"CONDA_PREFIX": str(project.parent.parent)})
    assert conda.origin == "CONDA_PREFIX"
    own = choose(UserSettings(), None, None, {"VIRTUAL_ENV": sys.prefix})  # a pre-commit hook's own environment
    assert own.own and own.notes == ()


@pytest.mark.torch
def test_a_found_environment_without_torch_is_passed_over_with_a_note(environments: dict[str, Path]) -> None:
    tool_env = environments["tool"].parent.parent
    chosen = choose(UserSettings(), None, None, {"VIRTUAL_ENV": str(tool_env)})
    assert chosen.own and chosen.origin == OWN
    assert chosen.notes == (f"VIRTUAL_ENV's Python {environments['tool']} has no torch; not used for verification",)


def test_a_named_python_is_final(environments: dict[str, Path]) -> None:
    with pytest.raises(InterpreterError) as raised:
        choose(UserSettings(python=str(environments["tool"]), python_flag=True), None, None, {})
    assert str(raised.value).startswith(f"not run: the Python chosen for verification, {environments['tool']} (--python), has no torch;")
    with pytest.raises(InterpreterError, match="does not exist"):
        choose(UserSettings().with_flags(python="no/such/python"), None, None, {})


@pytest.mark.torch
def test_the_users_configuration_file_may_name_it(environments: dict[str, Path], tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    config = tmp_path / "autograd-fix" / "config.toml"
    config.parent.mkdir()
    config.write_text(f'[verify]\npython = "{environments["project"]}"\n')
    chosen = choose(load_user_settings(), None, None, {})
    assert (chosen.path, chosen.origin) == (str(environments["project"]), f"python in {config}")
    flagged = choose(load_user_settings().with_flags(python=str(environments["project"].parent.parent)), None, None, {})
    assert flagged.origin == "--python"


def hostile_interpreter(path: Path, marker: Path) -> None:
    """An executable that records that it ran (what a repository could commit)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho ran >> {marker}\nexec {sys.executable} \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.mark.torch
def test_a_repositorys_own_environment_is_used_only_when_the_user_trusts_it(environments: dict[str, Path], tmp_path: Path) -> None:
    root, marker = tmp_path / "repo", tmp_path / "marker"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'repo'\n")
    (root / ".venv").mkdir()
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    hostile_interpreter(root / ".venv" / "bin" / "python", marker)
    chosen = choose(UserSettings(), None, str(root), {})
    assert chosen.own and not marker.exists()
    trusted = choose(UserSettings(trusted=(str(root),)), None, str(root), {})
    assert trusted.origin == "the project's .venv" and marker.exists()  # trusted: started, to ask its versions


@pytest.mark.torch
def test_a_repositorys_python_key_is_ignored_unless_trusted(tmp_path: Path, environments: dict[str, Path]) -> None:
    root, marker = tmp_path / "repo", tmp_path / "marker"
    root.mkdir()
    hostile_interpreter(root / "tools" / "python", marker)
    (root / "pyproject.toml").write_text('[tool.autograd-fix.verify]\npython = "tools/python"\n')
    script = root / "train.py"
    script.write_text(BASE)
    config = load_config(str(script), user=UserSettings())
    assert config.python is None
    assert any('ignored python = "tools/python"' in note and "cannot choose the Python" in note for note in config.notes)
    assert choose(UserSettings(), config.python, project_root(str(script)), {}).own and not marker.exists()
    trusted = UserSettings(trusted=(str(root),))
    assert load_config(str(script), user=trusted).python == str(root / "tools" / "python")


def test_the_cli_says_the_repositorys_python_was_ignored(tmp_path: Path, environments: dict[str, Path]) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "pyproject.toml").write_text('[tool.autograd-fix.verify]\npython = "tools/python"\n')
    shutil.copy(REPO / EXAMPLE, root / "eval.py")
    done = subprocess.run(
        [str(environments["tool"]), "-m", "autograd_fix", "--diff", "eval.py"], cwd=root,
        env=clean_environment(XDG_CONFIG_HOME=str(tmp_path / "xdg")), capture_output=True, text=True, timeout=300,
    )
    assert 'ignored python = "tools/python": a repository\'s configuration cannot choose the Python' in done.stderr
    assert "unverified: not run: no Python with torch" in done.stdout


# -- what the verdict says about an interpreter that cannot run the worker ----------------

@pytest.mark.parametrize(
    ("python", "torch", "why"),
    [
        ("3.11.7", "2.13.0+cpu", None),
        ("3.13.0", "2.14.0a0+git1234", None),
        ("3.11.0", "unknown", None),
        ("3.10.13", "2.13.0", None),
        ("3.9.18", "2.13.0", "is Python 3.9.18; the verification worker runs on Python 3.10 or newer"),
        ("3.11.7", None, "has no torch"),
        ("3.11.7", "1.13.1", "has torch 1.13.1; verification supports torch 2.1 or newer"),
        ("3.11.7", "2.0.1+cu118", "has torch 2.0.1+cu118; verification supports torch 2.1 or newer"),
    ],
)
def test_supported_versions(python: str, torch: str | None, why: str | None) -> None:
    assert problem(python, torch) == why


def test_torch_is_an_extra_that_asks_for_the_oldest_torch_verification_supports() -> None:
    from autograd_fix.compat import tomllib
    from autograd_fix.verification.interpreter import OLDEST_PYTHON, OLDEST_TORCH

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.split("[")[0].split(">")[0].strip() in ("torch", "numpy")]
    assert f"torch>={'.'.join(map(str, OLDEST_TORCH))}" in project["optional-dependencies"]["verify"]
    # the full suite verifies in the test environment; the static one has no torch
    assert "autograd-fix[verify,test-static]" in project["optional-dependencies"]["test"]
    assert not [d for d in project["optional-dependencies"]["test-static"] if d.split(">")[0] in ("torch", "numpy")]
    assert project["requires-python"] == f">={'.'.join(map(str, OLDEST_PYTHON))}"


def fake_torch(python: Path, version: str, body: str) -> None:
    """A `torch` in `python`'s environment: its metadata says `version`, importing it runs `body`."""
    site = next((python.parent.parent / "lib").glob("python3.*/site-packages"))
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(body)
    info = site / f"torch-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")


def test_an_old_torch_is_named_with_the_supported_versions(tmp_path: Path) -> None:
    python = derived_environment(tmp_path / "old", without_torch)
    fake_torch(python, "1.13.1", "__version__ = '1.13.1'\n")
    with pytest.raises(InterpreterError) as raised:
        choose(UserSettings(python=str(python), python_flag=True), None, None, {})
    assert "has torch 1.13.1; verification supports torch 2.1 or newer; install torch 2.1 or newer there" in str(raised.value)


def test_a_torch_that_fails_to_import_is_named_with_its_error(tmp_path: Path) -> None:
    python = derived_environment(tmp_path / "broken", without_torch)
    fake_torch(python, "2.13.0", "raise ImportError('libtorch_cpu.so: cannot open shared object file')\n")
    chosen = choose(UserSettings(python=str(python), python_flag=True), None, None, {})
    with pytest.raises(InterpreterError) as raised:
        Verifier(interpreter=chosen)
    assert str(raised.value) == (
        f"not run: the Python chosen for verification, {python} (--python), cannot import torch: "
        "ImportError: libtorch_cpu.so: cannot open shared object file"
    )


def old_pythons() -> list[str]:
    """Pythons older than the worker's floor (3.10) on this machine (none on CI: skipped)."""
    found = [shutil.which(f"python3.{minor}") for minor in (9, 8)]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found += [str(p) for p in sorted(pyenv.glob("3.[0-9].*/bin/python3"))]
    return [path for path in found if path and subprocess.run([path, "-c", "0"], capture_output=True).returncode == 0]


@pytest.mark.skipif(not old_pythons(), reason="no Python older than 3.10 on this machine")
def test_a_python_too_old_for_the_worker_is_named_with_the_supported_versions() -> None:
    old = old_pythons()[0]
    with pytest.raises(InterpreterError, match=r"is Python 3\.\d+\.\d+; the verification worker runs on Python 3\.10 or newer"):
        choose(UserSettings(python=old, python_flag=True), None, None, {})
    # the worker's own first line says the same, should a Python get past the question
    pretending = Interpreter(old, "--python", "3.11.0", "2.13.0")
    with pytest.raises(InterpreterError, match=r"is Python 3\.\d+\.\d+; the verification worker runs on Python 3\.10"):
        Verifier(interpreter=pretending)


# -- the hostile-repository guarantee holds under another interpreter ----------------------

@pytest.mark.torch
def test_the_worker_under_the_projects_python_never_imports_from_the_users_folder(
    environments: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from test_hostile_repository import planted_repository

    script, marker = planted_repository(tmp_path, monkeypatch)
    chosen = choose(UserSettings(python=str(environments["project"]), python_flag=True), None, None, {})
    with Verifier(interpreter=chosen) as verifier:
        assert open(f"/proc/{verifier._proc.pid}/cmdline", "rb").read().split(b"\0")[1] == b"-I"
        assert os.path.realpath(os.readlink(f"/proc/{verifier._proc.pid}/cwd")) == os.path.realpath(verifier.scratch)
        verdict = verify_pair(BASE, BASE + "total = total * 1\n", path=str(script), verifier=verifier, timeout=30)
    assert verdict.verdict == "accepted", verdict.reason
    assert not marker.exists(), marker.read_text()


def test_the_readme_documents_the_interpreter_order() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Which Python runs verification"):]
    for step in ("--python", "VIRTUAL_ENV", "CONDA_PREFIX", ".venv", "trusted-projects", "autograd-fix[verify]"):
        assert step in section, step
