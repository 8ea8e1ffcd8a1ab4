"""The verification corpus (benchmarks/verification_corpus/) is well-formed.

Scores are a benchmark, not a test: this only checks what the scoring script relies
on, so a broken case fails CI instead of silently dropping out of the figures.
Nothing here runs torch.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from autograd_fix.codemods.registry import rule_by_code

CORPUS_DIR = Path(__file__).resolve().parents[1] / "benchmarks" / "verification_corpus"


def _load_corpus_module():
    spec = importlib.util.spec_from_file_location("verification_corpus_loader", CORPUS_DIR / "corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


corpus = _load_corpus_module()
CASES = corpus.load_cases(CORPUS_DIR)


def test_corpus_is_big_enough_and_covers_both_kinds():
    assert len(CASES) >= 40
    kinds = Counter(case.kind for case in CASES)
    assert kinds["library"] >= 10
    assert kinds["script"] >= 10


def test_every_required_wrong_kind_is_present():
    seen = {wrong_kind for case in CASES for wrong_kind, _ in case.wrong.values()}
    missing = set(corpus.REQUIRED_WRONG_KINDS) - seen
    assert not missing, f"no wrong rewrite of kind {sorted(missing)}"


def test_links_are_unique():
    links = Counter(case.link for case in CASES)
    assert [link for link, n in links.items() if n > 1] == []


#: rules whose fix changes only comments: the hand fix differs from the buggy code in
#: its text, not in its syntax tree (AGF100 removes unused `# noqa` codes)
COMMENT_FIXES = frozenset({"AGF100"})


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_case_is_well_formed(case):
    assert rule_by_code(case.rule) is not None, f"{case.rule} is not a rule"
    assert case.description
    sources = {"buggy.py": case.buggy_source, "fixed.py": case.fixed_source}
    sources.update({name: source for name, (_, source) in case.wrong.items()})
    trees = {}
    for name, source in sources.items():
        trees[name] = ast.parse(source, filename=f"{case.name}/{name}")
    # every rewrite really rewrites, and the wrong ones differ from the hand fix
    buggy = ast.dump(trees["buggy.py"])
    for name, tree in trees.items():
        if name == "fixed.py" and case.rule in COMMENT_FIXES:
            assert sources[name] != case.buggy_source, f"{name} is the buggy code"
        elif name != "buggy.py":
            assert ast.dump(tree) != buggy, f"{name} is the buggy code"
        if name.startswith("wrong_"):
            assert ast.dump(tree) != ast.dump(trees["fixed.py"]), f"{name} is the hand fix"
    # a script has a driver; a library case has none (no caller at all)
    has_driver = _has_driver(trees["buggy.py"])
    assert has_driver == (case.kind == "script"), f"kind {case.kind!r} but driver present: {has_driver}"


def _has_driver(tree: ast.Module) -> bool:
    """A `__main__` block or top-level statements beyond imports, definitions and constants."""
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # docstring
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and _is_setup(node):
            continue
        return True
    return False


def _is_setup(node: ast.Assign | ast.AnnAssign) -> bool:
    """Module-level names bound to literals or simple calls (`revgrad = RevGrad.apply`)."""
    value = node.value
    return isinstance(value, (ast.Constant, ast.Attribute, ast.Name))


def test_loader_names_what_is_wrong(tmp_path):
    bad = tmp_path / "01_broken_case"
    bad.mkdir()
    (bad / "buggy.py").write_text("x = 1\n")
    (bad / "fixed.py").write_text("x = 2\n")
    (bad / "wrong_a.py").write_text("x = 3\n")
    (bad / "case.toml").write_text(
        'link = "https://example.com/x"\nrule = "AGF001"\nkind = "script"\ndescription = "d"\n'
        '[wrong]\n"wrong_a.py" = "drop-term"\n'
    )
    with pytest.raises(corpus.CorpusError, match=re.escape("01_broken_case: link")):
        corpus.load_cases(tmp_path)
    (bad / "case.toml").write_text(
        'link = "https://github.com/o/r/issues/1"\nrule = "AGF001"\nkind = "script"\ndescription = "d"\n'
        '[wrong]\n"wrong_b.py" = "drop-term"\n'
    )
    with pytest.raises(corpus.CorpusError, match="lists"):
        corpus.load_cases(tmp_path)
