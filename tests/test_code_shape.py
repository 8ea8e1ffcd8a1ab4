"""The shape issue 8 asks of the code: thin rule files over one semantic model, one
token vocabulary per role. These guard it against drifting back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RULE_FILES = sorted((ROOT / "codemods" / "rules").glob("agf[0-9][0-9][0-9]_*.py"))
#: "at most about 400 lines of logic" per rule file
MAX_LOGIC_LINES = 420


def logic_lines(path: Path) -> int:
    """Lines that are neither blank, nor comments, nor docstrings."""
    source = path.read_text()
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return sum(
        1
        for number, line in enumerate(source.splitlines(), start=1)
        if line.strip() and not line.strip().startswith("#") and number not in docstrings
    )


def test_there_are_nineteen_rule_files() -> None:
    assert len(RULE_FILES) == 19


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.stem[:6])
def test_rule_files_hold_logic_only_and_stay_thin(path: Path) -> None:
    assert logic_lines(path) <= MAX_LOGIC_LINES, f"{path.name}: move analysis into codemods/semantic/"


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.stem[:6])
def test_rules_import_no_other_rule(path: Path) -> None:
    # an analysis two rules need lives in codemods/semantic/, not in one of them
    tree = ast.parse(path.read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not {name for name in imported if ".rules." in name or name.endswith(".rules")}


def _token_sets(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        names += [t.id for t in targets if isinstance(t, ast.Name) and t.id.lstrip("_").endswith("TOKENS")]
    return names


def test_identifier_token_sets_live_only_in_the_roles_module() -> None:
    roles = ROOT / "codemods" / "semantic" / "roles.py"
    elsewhere = {
        str(path.relative_to(ROOT)): _token_sets(path)
        for path in sorted((ROOT / "codemods").rglob("*.py"))
        if path != roles and _token_sets(path)
    }
    assert elsewhere == {}
    assert _token_sets(roles)
