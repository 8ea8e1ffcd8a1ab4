"""The real-world bug corpus (tests/corpus/) is well-formed, and near-misses stay silent.

Detection and fix figures are a benchmark (benchmarks/bug_corpus.py), not a test: rules
may still miss bugs. What must hold is that every case is usable by that script, and that
correct code is never flagged (a known false positive is marked `xfail` in its case.toml
and listed in benchmarks/BUG_CORPUS.md). Nothing here runs the scripts.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

from autograd_fix.codemods.registry import rule_by_code

ROOT = Path(__file__).resolve().parents[1]


def _load_benchmark():
    spec = importlib.util.spec_from_file_location("bug_corpus_benchmark", ROOT / "benchmarks" / "bug_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


bench = _load_benchmark()
FOLDERS = sorted(p for p in bench.CORPUS_DIR.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
CASES = bench.load_cases()
NEAR_MISSES = [c for c in CASES if c.kind == "near-miss"]


def test_every_folder_is_a_named_case():
    """A folder the pattern skips would silently drop out of the figures."""
    assert [p.name for p in FOLDERS] == [c.name for c in CASES]
    assert FOLDERS, "the corpus is empty"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case_is_well_formed(case):
    assert case.link.startswith("https://") and " " not in case.link
    assert rule_by_code(case.rule) is not None, f"unknown rule {case.rule}"
    assert case.name.startswith(case.rule.lower() + "_"), "the folder is named after its rule"
    assert case.description.strip()
    buggy = case.folder / "buggy.py"
    ast.parse(buggy.read_text(encoding="utf-8"), filename=str(buggy))
    line_count = len(buggy.read_text(encoding="utf-8").splitlines())
    hand_fix = case.folder / "hand_fix.py"
    if case.kind == "bug":
        assert case.expected, "a bug case names at least one expected finding"
        assert case.rule in {code for code, _ in case.expected}
        assert all(1 <= line <= line_count for _, line in case.expected)
        assert all(rule_by_code(code) is not None for code, _ in case.expected)
        ast.parse(hand_fix.read_text(encoding="utf-8"), filename=str(hand_fix))
        assert case.xfail is None, "xfail is only for near-misses"
    else:
        assert case.expected == (), "a near-miss expects no finding"
        assert not hand_fix.exists(), "a near-miss is correct code: it has no hand fix"
    extra = {p.name for p in case.folder.iterdir()} - {"case.toml", "buggy.py", "hand_fix.py", "expected.txt", "__pycache__"}
    assert not extra, f"unexpected files {sorted(extra)}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_links_are_not_shared(case):
    """Each case cites its own report (two cases from one thread must say why in the slug)."""
    same = [c.name for c in CASES if c.link == case.link and c.kind == case.kind]
    assert len(same) == 1, f"{same} cite the same link"


def test_malformed_expected_is_rejected():
    with pytest.raises(bench.CaseError):
        bench.parse_expected("AGF001: 12\n")
    assert bench.parse_expected("AGF003 7\n\nAGF009 10\n") == (("AGF003", 7), ("AGF009", 10))


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.xfail(reason=c.xfail, strict=True)) if c.xfail else c for c in NEAR_MISSES],
    ids=lambda c: c.name,
)
def test_near_miss_has_no_finding(case):
    assert bench.findings_of(case) == []


def _write_case(root, name, kind, expected, buggy, xfail=None):
    folder = root / name
    folder.mkdir()
    extra = f'xfail = "{xfail}"\n' if xfail else ""
    (folder / "case.toml").write_text(
        f'link = "https://example.org/{name}"\nrule = "AGF006"\nkind = "{kind}"\ndescription = "d"\n{extra}', encoding="utf-8"
    )
    (folder / "expected.txt").write_text(expected, encoding="utf-8")
    (folder / "buggy.py").write_text(buggy, encoding="utf-8")
    return bench.load_case(folder)


ACCUMULATING = """\
import torch

model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
total = 0
for _ in range(3):
    opt.zero_grad()
    loss = model(torch.randn(4, 2)).pow(2).mean()
    loss.backward()
    opt.step()
    total += loss
"""


def test_scoring_counts_detection_only_at_the_expected_line(tmp_path):
    """The benchmark's detection must depend on the line, not just the code."""
    right = _write_case(tmp_path, "agf006_01_right", "bug", "AGF006 11\n", ACCUMULATING)
    wrong = _write_case(tmp_path, "agf006_02_wrong", "bug", "AGF006 10\n", ACCUMULATING)
    assert bench.score_case(right, run=False).detected is True
    missed = bench.score_case(wrong, run=False)
    assert missed.detected is False and "not detected" in missed.miss


def test_scoring_flags_findings_on_near_misses(tmp_path):
    near = _write_case(tmp_path, "agf006_03_near", "near-miss", "", ACCUMULATING)
    score = bench.score_case(near, run=False)
    assert score.false_positive and score.miss.startswith("false positive")
    report = bench.report([score], run=False)
    assert "false positives on near-misses: 1/1" in report
