"""Project settings reach every stage: the role names of `[tool.autograd-fix]` bind the
inputs of verification runs (`--diff` and `autograd-fix verify`), a long-lived process
reads a changed pyproject.toml again, and a broken one is a clear error."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli.app import app
from autograd_fix.cli.config import ConfigCache, ConfigError, load_config
from autograd_fix.cli.verify_command import verify_app
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, Role, Vocabulary
from test_roles import RETAINING_LOOPS

#: a training step over batches from `feed`: a name no default vocabulary reads as a loader
FEED_TRAINING = "import torch\n\n\n" + RETAINING_LOOPS[RETAINING_LOOPS.index("def fit_feed") :]

#: an evaluation pass over a model the project calls `resnet` (its class lives elsewhere)
RESNET_EVAL = textwrap.dedent(
    """\
    import torch


    def evaluate(resnet, loader):
        correct = 0
        for images, labels in loader:
            logits = resnet(images)
            correct += (logits.argmax(dim=1) == labels).sum().item()
        return correct
    """
)
RESNET_EVAL_FIXED = RESNET_EVAL.replace("def evaluate", "@torch.no_grad()\ndef evaluate")


def _cli(*args: str):
    """The command line as `autograd-fix ARGS` dispatches it (`verify` has its own app)."""
    if args and args[0] == "verify":
        return CliRunner().invoke(verify_app, list(args[1:]), catch_exceptions=False)
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


@pytest.mark.torch
def test_diff_verifies_with_the_projects_loader_names(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.autograd-fix]\nloader-names = ["feed"]\n')
    (tmp_path / "fit.py").write_text(FEED_TRAINING)
    result = _cli("--diff", "--format", "json", str(tmp_path))
    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["code"] == "AGF011"
    verification = finding["verification"]
    # without the project's names the run could not bind `feed` and said so (unverified)
    assert verification["verdict"] == "accepted", verification["reason"]
    bound = verification["evidence"]["fit_feed"]["original"]["bound"]
    assert "feed" in bound and "model" in bound


@pytest.mark.torch
def test_verify_command_binds_a_model_the_pyproject_names(tmp_path: Path) -> None:
    original, fixed = tmp_path / "evaluate.py", tmp_path / "evaluate_fixed.py"
    original.write_text(RESNET_EVAL)
    fixed.write_text(RESNET_EVAL_FIXED)
    args = ("verify", str(original), str(fixed), "--rule", "AGF001", "--format", "json")
    plain = json.loads(_cli(*args).stdout)
    assert plain["verdict"] == "unverified" and "cannot bind 'resnet'" in plain["reason"]
    (tmp_path / "pyproject.toml").write_text('[tool.autograd-fix]\nmodel-names = ["resnet"]\n')
    result = _cli(*args)
    verdict = json.loads(result.stdout)
    assert result.exit_code == 0 and verdict["verdict"] == "accepted", verdict["reason"]
    (unit,) = verdict["units"]
    assert "resnet" in unit["evidence"]["original"]["bound"]


@pytest.mark.parametrize("command", [(), ("verify",)])
def test_malformed_pyproject_is_a_usage_error_naming_the_file(tmp_path: Path, command: tuple[str, ...]) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.autograd-fix]\nselect = AGF001\n')
    (tmp_path / "evaluate.py").write_text(RESNET_EVAL)
    (tmp_path / "evaluate_fixed.py").write_text(RESNET_EVAL_FIXED)
    files = [str(tmp_path / "evaluate.py")] + ([str(tmp_path / "evaluate_fixed.py")] if command else [])
    result = _cli(*command, *files)
    assert result.exit_code == 2
    assert "error:" in result.stderr and str(pyproject) in result.stderr and "line 2" in result.stderr
    assert "Traceback" not in result.stderr


def test_role_additions_are_plain_data_and_round_trip() -> None:
    configured = DEFAULT_VOCABULARY.extended({Role.MODEL: ["ResNet"], Role.LOADER: ["feed"]}, {Role.OPTIMIZER: ["pkg.make"]})
    data = configured.additions()
    assert data == {"names": {"model": ["resnet"], "loader": ["feed"]}, "objects": {"optimizer": ["pkg.make"]}}
    assert json.loads(json.dumps(data)) == data
    assert Vocabulary.from_additions(data) == configured
    assert DEFAULT_VOCABULARY.additions() == {"names": {}, "objects": {}}
    assert Vocabulary.from_additions(None) is DEFAULT_VOCABULARY


def _touch_later(path: Path, text: str) -> None:
    """Write `text` and move the modification time on, as a later save would."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_config_cache_reads_a_changed_pyproject_again(tmp_path: Path) -> None:
    project, package = tmp_path / "project", tmp_path / "project" / "pkg"
    package.mkdir(parents=True)
    pyproject = project / "pyproject.toml"
    _touch_later(pyproject, '[tool.autograd-fix]\nselect = ["AGF001"]\n')
    cache = ConfigCache()
    first = cache.load(package)
    assert first.select == ["AGF001"] and first.source == pyproject.resolve()
    assert cache.load(project) is first  # one entry per project, whichever folder asks
    _touch_later(pyproject, '[tool.autograd-fix]\nselect = ["AGF002"]\nmodel-names = ["resnet"]\n')
    second = cache.load(package)
    assert second.select == ["AGF002"] and second.roles.role_by_name("resnet") is Role.MODEL
    _touch_later(pyproject, '[tool.autograd-fix]\nselect = "AGF002"\n')
    with pytest.raises(ConfigError, match="select must be a list of strings"):
        cache.load(package)
    pyproject.unlink()  # gone: the defaults
    assert cache.load(package).select is None


def test_config_cache_sees_a_nearer_pyproject_appear(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    _touch_later(tmp_path / "pyproject.toml", '[tool.autograd-fix]\nignore = ["AGF001"]\n')
    cache = ConfigCache()
    assert cache.load(package).ignore == ["AGF001"]
    _touch_later(package / "pyproject.toml", '[tool.autograd-fix]\nignore = ["AGF003"]\n')
    assert cache.load(package).ignore == ["AGF003"] == load_config(package).ignore
