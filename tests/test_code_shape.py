"""The shape issues 8 and 18 ask of the code: one package per rule over one semantic
model, where `codemods/semantic/` holds only what at least two rules use, and one token
vocabulary per role. These guard it against drifting back.

The rule users of a semantic module are computed from imports: a rule uses a module its
package imports, a module such a module imports in turn (through `semantic/` only), and
the module behind each `SemanticModel` attribute it reads (`context.semantic.tracking`
uses `semantic/tracking.py`, found from the names that attribute's body reads in
`semantic/model.py`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from autograd_fix.codemods.registry import all_rules

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "codemods" / "rules"
SEMANTIC = ROOT / "codemods" / "semantic"
RULE_PACKAGES = sorted(path for path in RULES.glob("agf[0-9][0-9][0-9]_*") if path.is_dir())
PREFIX = "autograd_fix.codemods."
#: modules the guard does not count: the package marker
NOT_ANALYSES = frozenset({"__init__"})


def _imports(path: Path) -> dict[str, set[str]]:
    """Each `autograd_fix.codemods.*` module `path` imports, with the names it takes from it."""
    found: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            found.setdefault(node.module.removeprefix(PREFIX), set()).update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX):
                    found.setdefault(alias.name.removeprefix(PREFIX), set())
    return found


def _semantic_imports(path: Path) -> set[str]:
    """The `semantic/` modules (by stem) `path` imports."""
    return {name.split(".", 1)[1] for name in _imports(path) if name.startswith("semantic.")}


def _model_attributes() -> dict[str, set[str]]:
    """For each attribute of `SemanticModel`, the semantic modules its body draws on."""
    model = SEMANTIC / "model.py"
    source_of = {
        imported: name.split(".", 1)[1]
        for name, names in _imports(model).items()
        if name.startswith("semantic.")
        for imported in names
    }
    tree = ast.parse(model.read_text())
    (cls,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "SemanticModel"]
    attributes: dict[str, set[str]] = {}
    for member in cls.body:
        if isinstance(member, ast.FunctionDef):
            names = {node.id for node in ast.walk(member) if isinstance(node, ast.Name)}
            attributes[member.name] = {source_of[name] for name in names if name in source_of}
    return attributes


def _semantic_attributes_read(path: Path) -> set[str]:
    """`X` of every `<...>.semantic.X` (or `semantic.X`) that `path` reads."""
    read = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute):
            owner = node.value
            if (isinstance(owner, ast.Attribute) and owner.attr == "semantic") or (
                isinstance(owner, ast.Name) and owner.id == "semantic"
            ):
                read.add(node.attr)
    return read


def semantic_rule_users(rules: Path = RULES, semantic: Path = SEMANTIC) -> dict[str, set[str]]:
    """Each module of `semantic/` (by stem) and the rule packages (by name) that use it."""
    modules = {path.stem: path for path in semantic.glob("*.py") if path.stem not in NOT_ANALYSES}
    edges = {stem: _semantic_imports(path) & modules.keys() for stem, path in modules.items()}
    attributes = _model_attributes()
    users: dict[str, set[str]] = {stem: set() for stem in modules}
    for package in sorted(path for path in rules.glob("agf[0-9][0-9][0-9]_*") if path.is_dir()):
        pending: set[str] = set()
        for path in package.glob("*.py"):
            pending |= _semantic_imports(path)
            read = _semantic_attributes_read(path)
            if read:
                pending.add("model")
            for attribute in read:
                pending |= attributes.get(attribute, set())
        reached: set[str] = set()
        while pending:
            stem = pending.pop()
            if stem in modules and stem not in reached:
                reached.add(stem)
                pending |= edges[stem]
        for stem in reached:
            users[stem].add(package.name[:6])
    return users


def test_every_rule_package_is_a_registered_rule() -> None:
    packages = {path.name for path in RULE_PACKAGES}
    assert packages == {rule.__module__.split(".")[3] for rule in all_rules()}
    assert len(packages) >= 18
    for package in RULE_PACKAGES:
        assert (package / "examples.py").is_file(), f"{package.name}: its examples live in examples.py"


def test_semantic_keeps_only_modules_at_least_two_rules_use() -> None:
    users = semantic_rule_users()
    assert "tracking" in users and users["tracking"], "the import scan found nothing: it is broken"
    lonely = {stem: sorted(rules) for stem, rules in users.items() if len(rules) < 2}
    assert lonely == {}, f"move these into their one rule's package (codemods/rules/agfNNN_*/): {lonely}"


@pytest.mark.parametrize("package", RULE_PACKAGES, ids=lambda p: p.name[:6])
def test_rules_import_no_other_rule(package: Path) -> None:
    # an analysis two rules need lives in codemods/semantic/, not in one of them
    for path in package.glob("*.py"):
        imported = _imports(path)
        others = {name for name in imported if name.startswith("rules.") and name.split(".")[1] != package.name}
        assert not others, f"{path.relative_to(ROOT)} imports another rule: {others}"


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
