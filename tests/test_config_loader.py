"""One loader of configuration for the command line, the language server and
verification (`config_files.load_settings`): the same file, the same `extend`, the
same `--config` / `--isolated` choice, whoever asks. The case that went wrong: a
package's own `pyproject.toml` holding only `[project]` made verification lose the
repository root's `[tool.autograd-fix.verify]` `argv`."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from autograd_fix.cli.config import ConfigCache, ConfigError, ConfigLookup
from autograd_fix.cli.config import load_config as cli_config
from autograd_fix.config_files import ConfigChoice
from autograd_fix.verification import ACCEPTED, verify_pair
from autograd_fix.verification.config import load_config as verify_config
from autograd_fix.verification.trust import UserSettings

#: a training script that only runs with the argv its repository configures
NEEDS_ARGV = textwrap.dedent(
    """\
    import sys

    import torch

    if sys.argv[1:] != ["--epochs", "1"]:
        raise SystemExit(f"usage: train.py --epochs N (got {sys.argv[1:]})")
    w = torch.ones(3, requires_grad=True)
    loss = (w * 2).sum()
    loss.backward()
    print(f"loss {loss.item():.3f} grad {w.grad.tolist()}")
    """
)


@pytest.fixture
def monorepo(tmp_path: Path) -> Path:
    """A repository whose root holds the settings and a package with its own `[project]`."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.autograd-fix]\nselect = ["AGF001", "AGF006"]\n\n[tool.autograd-fix.verify]\nargv = ["--epochs", "1"]\n'
    )
    package = tmp_path / "packages" / "trainer"
    (package / "src").mkdir(parents=True)
    (package / "pyproject.toml").write_text('[project]\nname = "trainer"\nversion = "0.1"\ndependencies = ["torch>=2.1"]\n')
    (package / "src" / "train.py").write_text(NEEDS_ARGV)
    return tmp_path


def test_cli_language_server_and_verification_read_the_same_file(monorepo: Path) -> None:
    script = monorepo / "packages" / "trainer" / "src" / "train.py"
    root_file = monorepo / "pyproject.toml"
    user = UserSettings()
    assert cli_config(script.parent, user).source == root_file
    assert ConfigCache().load(script.parent).source == root_file
    assert ConfigLookup(user).for_path(script).source == root_file
    config = verify_config(str(script), user=user)
    assert config.argv == ("--epochs", "1")
    assert config.root == str(monorepo)
    # the package's [project] still gives the torch floor (a different question)
    assert str(cli_config(script.parent, user).target_torch) == "2.1"


@pytest.mark.torch
def test_verification_runs_the_script_with_the_roots_argv(monorepo: Path) -> None:
    script = monorepo / "packages" / "trainer" / "src" / "train.py"
    rewritten = NEEDS_ARGV.replace("(w * 2).sum()", "(w * 2.0).sum()")
    verdict = verify_pair(NEEDS_ARGV, rewritten, path=str(script), timeout=30.0, user=UserSettings())
    assert verdict.verdict == ACCEPTED, verdict.reason


def test_the_command_lines_choice_reaches_verification(monorepo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    script = str(monorepo / "packages" / "trainer" / "src" / "train.py")
    other = tmp_path_factory.mktemp("elsewhere") / "autograd-fix.toml"
    other.write_text('[verify]\nargv = ["--epochs", "7"]\nloop-cap = 1\n')
    user = UserSettings()
    named = verify_config(script, user=user, choice=ConfigChoice.of(config_file=other))
    assert (named.argv, named.loop_cap, named.root) == (("--epochs", "7"), 1, str(other.parent))
    assert verify_config(script, user=user, choice=ConfigChoice.of(isolated=True)).argv == ()
    overridden = verify_config(script, user=user, choice=ConfigChoice.of(overrides={"verify": {"loop-cap": 5}}))
    # KEY=VALUE merges into the file's table: the root's argv stays
    assert (overridden.argv, overridden.loop_cap) == (("--epochs", "1"), 5)
    lookup = ConfigLookup(user, config_file=other)
    assert lookup.for_path(Path(script)).source == other
    assert verify_config(script, user=user, choice=lookup.choice).argv == ("--epochs", "7")


def test_a_malformed_verify_override_is_a_clear_error_before_any_run(monorepo: Path) -> None:
    with pytest.raises(ConfigError, match="loop-cap must be a whole number"):
        cli_config(monorepo, UserSettings(), overrides={"verify": {"loop-cap": -1}})
