"""The held-out report cases (benchmarks/heldout_reports/cases) are well-formed.

Fast and static: no rule runs here (the set must stay held out; measure.py scores it).
Each case must name its report, expect one rule code at a line inside its source, and hold
a program that parses, so that a measurement never silently skips a broken case.
"""

from __future__ import annotations

import ast
import re
from autograd_fix.compat import tomllib
from collections import Counter
from pathlib import Path

import pytest

CASES_DIR = Path(__file__).resolve().parents[1] / "benchmarks" / "heldout_reports" / "cases"
CASE_FILES = sorted(CASES_DIR.glob("*.toml"))
RULE_CODE = re.compile(r"^AGF0(0[1-9]|1[0-8])$")
REQUIRED = {"link": str, "origin": str, "rule": str, "kind": str, "line": int, "title": str, "source": str,
            "cited_elsewhere_in_benchmarks": bool}


def _load(path: Path) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def test_the_set_is_there_and_large_enough() -> None:
    kinds = Counter(_load(path)["kind"] for path in CASE_FILES)
    assert kinds["bug"] >= 36
    assert kinds["near-miss"] >= 12


def test_every_rule_has_at_least_two_bug_cases() -> None:
    per_rule = Counter(data["rule"] for data in map(_load, CASE_FILES) if data["kind"] == "bug")
    expected = {f"AGF{number:03d}" for number in range(1, 19)}
    assert {rule for rule, count in per_rule.items() if count >= 2} == expected


@pytest.mark.parametrize("path", CASE_FILES, ids=[path.stem for path in CASE_FILES])
def test_case_is_well_formed(path: Path) -> None:
    data = _load(path)
    for key, kind in REQUIRED.items():
        assert isinstance(data.get(key), kind), f"{key} missing or not {kind.__name__}"
    assert data["link"].startswith(("https://", "http://"))
    assert RULE_CODE.match(data["rule"])
    assert data["kind"] in {"bug", "near-miss"}
    assert data["origin"] in {"github-issue", "github-pr", "forum", "web-page"}
    lines = data["source"].splitlines()
    assert 1 <= data["line"] <= len(lines)
    assert lines[data["line"] - 1].strip(), "the expected line is blank"
    ast.parse(data["source"], filename=path.name)


def test_links_are_not_duplicated_within_a_kind() -> None:
    seen = Counter((data["kind"], data["link"]) for data in map(_load, CASE_FILES))
    assert [key for key, count in seen.items() if count > 1] == []
