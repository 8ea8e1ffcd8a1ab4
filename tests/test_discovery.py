"""File discovery: `.gitignore` semantics as git applies them, default and configured excludes."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli.app import app
from autograd_fix.cli.discovery import ExcludePatternError, discover

TRAIN = "import torch\n\n\ndef step(model, x):\n    return model(x).sum()\n"


def make_tree(root: Path, files: list[str], ignores: dict[str, str], repository: bool = True) -> None:
    if repository:
        (root / ".git").mkdir()
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(TRAIN)
    for folder, text in ignores.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / ".gitignore").write_text(text)


def found(root: Path, *paths: str, exclude: tuple[str, ...] = ()) -> set[str]:
    result = discover([str(root / p) for p in paths or (".",)], exclude, root)
    return {path.resolve().relative_to(root.resolve()).as_posix() for path in result.files}


def test_negation_re_includes_a_file_within_one_gitignore(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        ["train.py", "scratch_plot.py", "scratch_keep.py", "exp/scratch_lr.py"],
        {".": "# notebooks exported as scripts\nscratch_*.py\n!scratch_keep.py\n"},
    )
    assert found(tmp_path) == {"train.py", "scratch_keep.py"}


def test_nested_gitignore_patterns_are_relative_to_their_own_folder(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        ["local.py", "src/local.py", "src/pkg/local.py", "src/generated/ops.py", "generated/ops.py"],
        {"src": "/local.py\ngenerated/\n"},
    )
    # `/local.py` is anchored to src/ (not the root, not src/pkg/); `generated/` only below src/
    assert found(tmp_path) == {"local.py", "src/pkg/local.py", "generated/ops.py"}


def test_deeper_gitignore_negation_overrides_a_shallower_pattern(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        ["model_gen.py", "src/model_gen.py", "src/loss_gen.py"],
        {".": "*_gen.py\n", "src": "!model_gen.py\n"},
    )
    assert found(tmp_path) == {"src/model_gen.py"}


def test_negation_cannot_re_include_a_file_whose_folder_is_excluded(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        ["train.py", "outputs/keep.py", "data/loader.py", "data/keep.py"],
        # git: "It is not possible to re-include a file if a parent directory of that file is excluded."
        {".": "outputs/\n!outputs/keep.py\ndata/\n", "data": "!keep.py\n"},
    )
    assert found(tmp_path) == {"train.py"}


def test_double_star_and_directory_only_patterns(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        [
            "docs/conf.py", "docs/api/v1/conf.py", "docs/api/v1/usage.py",
            "runs/log.py", "exp/runs/log.py", "models/runs.py",
            "main.py",
        ],
        # `main.py/` is directory-only: the file main.py stays
        {".": "docs/**/conf.py\nruns/\nmain.py/\n"},
    )
    assert found(tmp_path) == {"docs/api/v1/usage.py", "models/runs.py", "main.py"}


def test_walking_a_subfolder_honours_the_gitignores_above_it(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        ["src/train.py", "src/generated/ops.py", "src/pkg/generated/ops.py", "src/pkg/tmp_x.py"],
        {".": "/src/generated/\n", "src": "tmp_*.py\n"},
    )
    assert found(tmp_path, "src/pkg") == {"src/pkg/generated/ops.py"}
    assert found(tmp_path, "src") == {"src/train.py", "src/pkg/generated/ops.py"}


def test_gitignores_above_the_repository_root_do_not_apply(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.py\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    make_tree(repo, ["train.py"], {})
    assert found(repo) == {"train.py"}


def test_default_excludes_at_any_depth_and_virtualenvs_under_any_name(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        [
            "train.py", "pkg/__pycache__/m.py", "pkg/node_modules/m.py", "mylib.egg-info/m.py",
            "tools/build/m.py", "env311/lib/m.py",
        ],
        {},
        repository=False,
    )
    (tmp_path / "env311" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert found(tmp_path) == {"train.py"}


def test_configured_excludes_are_relative_to_the_config_folder_and_may_negate(tmp_path: Path) -> None:
    make_tree(tmp_path, ["legacy/old.py", "legacy/keep.py", "src/legacy/new.py", "src/train.py"], {})
    assert found(tmp_path, exclude=("/legacy/*", "!/legacy/keep.py")) == {
        "legacy/keep.py", "src/legacy/new.py", "src/train.py"
    }
    assert found(tmp_path, "src", exclude=("legacy/",)) == {"src/train.py"}


def test_invalid_patterns_in_a_gitignore_are_skipped_like_git_does(tmp_path: Path) -> None:
    make_tree(tmp_path, ["train.py", "debug_a.py"], {".": "!\n[z-a]\ndebug_*.py\n\\\n"})
    assert found(tmp_path) == {"train.py"}


def test_invalid_configured_exclude_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_tree(tmp_path, ["src/train.py"], {})
    with pytest.raises(ExcludePatternError):
        discover([str(tmp_path)], ["[z-a]"], tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.autograd-fix]\nexclude = ["[z-a].py"]\n')
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["src"])
    assert result.exit_code == 2
    assert "exclude" in result.stderr and "[z-a].py" in result.stderr
    assert "Traceback" not in result.output
