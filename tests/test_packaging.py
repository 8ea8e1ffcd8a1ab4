"""One distribution, one import namespace; README and docs generated from the rules."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograd_fix.cli.rules_doc import README_BEGIN, README_END, readme_table, rule_page

REPO = Path(__file__).resolve().parent.parent


def test_subpackages_import_under_one_namespace() -> None:
    import autograd_fix.cli
    import autograd_fix.codemods
    import autograd_fix.verification

    for module in (autograd_fix.cli, autograd_fix.codemods, autograd_fix.verification):
        assert module.__name__.startswith("autograd_fix.")


def test_readme_rule_table_is_current() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index(README_BEGIN) + len(README_BEGIN) : readme.index(README_END)].strip()
    assert table == readme_table(), "README rule table is stale: python -m autograd_fix.cli.rules_doc --write-readme"


def test_rule_pages_are_current() -> None:
    """docs/rules/AGFNNN.md is every finding's help URI: it exists and shows the current examples."""
    from autograd_fix.codemods.registry import all_rules

    stale = [
        rule.code
        for rule in all_rules()
        if not (REPO / "docs" / "rules" / f"{rule.code}.md").is_file()
        or (REPO / "docs" / "rules" / f"{rule.code}.md").read_text(encoding="utf-8") != rule_page(rule)
    ]
    assert stale == [], f"rule pages missing or stale: {stale}; run python -m autograd_fix.cli.rules_doc --write-docs"


def test_rule_files_hold_logic_and_examples_live_beside_them() -> None:
    """Issue 8: rule code defines no examples; each rule's package holds an `examples.py` with both kinds."""
    import inspect

    from autograd_fix.codemods.registry import all_rules

    for rule in all_rules():
        source = inspect.getsource(inspect.getmodule(rule))
        assert "VALID" not in source.replace("INVALID", ""), f"{rule.code} still defines examples"
        examples = rule.examples()
        assert examples.valid and examples.invalid


def test_every_rule_has_an_example_script() -> None:
    from autograd_fix.codemods.registry import all_rules

    scripts = {path.stem for path in (REPO / "examples").glob("*.py")}
    missing = [rule.code for rule in all_rules() if rule.name.replace("-", "_") not in scripts]
    assert missing == [], f"rules without examples/<name>.py: {missing}"


@pytest.mark.slow
def test_wheel_contains_only_the_namespace(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
    )
    if completed.returncode != 0 and "No module named build" in completed.stderr:
        pytest.skip("the 'build' package is not installed")
    assert completed.returncode == 0, completed.stderr[-2000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/", 1)[0] for name in names}
    assert top_level == {"autograd_fix", next(n for n in top_level if n.endswith(".dist-info"))}
    for expected in (
        "autograd_fix/__main__.py",
        "autograd_fix/cli/app.py",
        "autograd_fix/codemods/engine.py",
        "autograd_fix/codemods/rules/agf001_eval_forward_without_no_grad/__init__.py",
        "autograd_fix/codemods/rules/agf001_eval_forward_without_no_grad/examples.py",
        "autograd_fix/verification/__init__.py",
    ):
        assert expected in names
    from autograd_fix.codemods.registry import all_rules

    packaged = {name.split("/")[3] for name in names if name.startswith("autograd_fix/codemods/rules/agf")}
    assert packaged == {rule.__module__.split(".")[3] for rule in all_rules()}, "list each rule package in pyproject.toml"
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "autograd-fix = autograd_fix.cli.entry:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
