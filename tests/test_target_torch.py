"""The target PyTorch version: the floor read from dependencies, config, command line, and
how it reaches AGF012 through a real CLI run."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli.app import app
from autograd_fix.cli.torch_floor import default_torch_floor, dependencies_floor
from autograd_fix.codemods.torch_version import TorchVersion

AMP_LOOP = textwrap.dedent(
    """\
    import torch


    def train(model, loader, optimizer, criterion):
        scaler = torch.cuda.amp.GradScaler()
        for inputs, targets in loader:
            optimizer.zero_grad()
            with torch.cuda.amp.autocast():
                loss = criterion(model(inputs), targets)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    """
)


@pytest.mark.parametrize(
    ("dependencies", "floor"),
    [
        (["torch>=2.1"], TorchVersion(2, 1)),
        (["torch~=2.2"], TorchVersion(2, 2)),
        (["torch~=2.2.1"], TorchVersion(2, 2)),
        (["torch==2.0.*"], TorchVersion(2, 0)),
        (["torch==2.3.1+cu121"], TorchVersion(2, 3)),
        (["torch>=1.13,<3"], TorchVersion(1, 13)),
        (["torch>2.2,!=2.2.1"], TorchVersion(2, 2)),
        (["numpy>=1.24", "Torch[opt] >= 2.4 ; python_version >= '3.9'"], TorchVersion(2, 4)),
        # several entries for different markers: the code must run on each
        (["torch>=2.4; sys_platform == 'linux'", "torch>=2.2; sys_platform == 'darwin'"], TorchVersion(2, 2)),
        # a torch requirement with no lower bound: the documented default floor
        (["torch<3"], default_torch_floor()),
        (["torch"], default_torch_floor()),
        (["torch!=2.0.1"], default_torch_floor()),
        # torch not listed: no information (rules assume the newest)
        (["numpy", "torchvision>=0.16"], None),
        ([], None),
        # entries pip would reject are skipped, not a crash
        (["torch>=>2", 42, "torch>=2.3"], TorchVersion(2, 3)),
    ],
)
def test_floor_is_the_lowest_version_the_torch_requirement_admits(dependencies: list, floor: TorchVersion | None) -> None:
    assert dependencies_floor(dependencies) == floor


@pytest.mark.parametrize(("text", "version"), [("2.1", (2, 1)), ("2", (2, 0)), ("2.4.1+cu121", (2, 4)), (" 1.13 ", (1, 13))])
def test_torch_version_parse(text: str, version: tuple[int, int]) -> None:
    assert TorchVersion.parse(text) == version


@pytest.mark.parametrize("text", ["", "two", "2.x", "latest"])
def test_torch_version_parse_rejects_nonsense(text: str) -> None:
    with pytest.raises(ValueError, match="not a PyTorch version"):
        TorchVersion.parse(text)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(AMP_LOOP)
    return tmp_path


def reported(*args: str) -> list[str]:
    """The old AMP APIs AGF012 reports in src/ (GradScaler needs 2.3, autocast 1.12)."""
    result = CliRunner().invoke(app, ["--select", "AGF012", *args, "src"], catch_exceptions=False)
    assert result.exit_code == (1 if "AGF012" in result.stdout else 0), result.output  # Ruff's: 1 while findings remain
    return [api for api in ("GradScaler", "autocast") for line in result.stdout.splitlines() if f"amp.{api}`" in line]


def write_pyproject(root: Path, text: str) -> None:
    (root / "pyproject.toml").write_text(textwrap.dedent(text))


def test_no_information_means_the_newest(project: Path) -> None:
    assert reported() == ["GradScaler", "autocast"]


def test_floor_from_project_dependencies(project: Path) -> None:
    write_pyproject(project, '[project]\nname = "trainer"\ndependencies = ["numpy", "torch>=2.1,<3"]\n')
    assert reported() == ["autocast"]
    write_pyproject(project, '[project]\nname = "trainer"\ndependencies = ["torch>=2.3"]\n')
    assert reported() == ["GradScaler", "autocast"]


def test_floor_from_an_extra(project: Path) -> None:
    # torch as an optional extra (autograd-fix's own `verify`): the code still runs on it
    write_pyproject(project, '[project]\nname = "lib"\ndependencies = ["numpy"]\n[project.optional-dependencies]\ngpu = ["torch>=2.1"]\n')
    assert reported() == ["autocast"]


def test_requirement_without_lower_bound_uses_the_default_floor(project: Path) -> None:
    # nanoGPT-style "any PyTorch below 3": 2.0 and 2.2 are admitted, torch.amp.GradScaler is not there
    write_pyproject(project, '[project]\nname = "gpt"\ndependencies = ["torch<3"]\n')
    assert default_torch_floor() < TorchVersion(2, 3)
    assert reported() == ["autocast"]


def test_config_target_wins_over_dependencies_and_the_flag_wins_over_both(project: Path) -> None:
    write_pyproject(
        project,
        """\
        [project]
        name = "trainer"
        dependencies = ["torch>=2.1"]

        [tool.autograd-fix]
        target-torch = "2.4"
        """,
    )
    assert reported() == ["GradScaler", "autocast"]
    assert reported("--target-torch", "2.2") == ["autocast"]
    assert reported("--target-torch", "1.11") == []


def test_dependencies_of_a_package_below_the_config_pyproject(project: Path) -> None:
    write_pyproject(project, '[tool.autograd-fix]\nselect = ["AGF012"]\n')
    write_pyproject(project / "src", '[project]\nname = "pkg"\ndependencies = ["torch~=2.2"]\n')
    assert reported() == ["autocast"]


@pytest.mark.parametrize(
    ("args", "pyproject", "message"),
    [
        (["--target-torch", "banana"], None, "--target-torch: not a PyTorch version: 'banana'"),
        ([], "[tool.autograd-fix]\ntarget-torch = 2.1\n", "target-torch must be a version string"),
        ([], '[tool.autograd-fix]\ntarget-torch = "2.x"\n', "target-torch: not a PyTorch version"),
    ],
)
def test_bad_targets_are_usage_errors(project: Path, args: list[str], pyproject: str | None, message: str) -> None:
    if pyproject:
        write_pyproject(project, pyproject)
    result = CliRunner().invoke(app, [*args, "src"])
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output
