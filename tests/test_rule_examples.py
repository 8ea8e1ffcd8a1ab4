"""Every inline example of every rule, as its own test (ids like `AGF001-invalid-3`).

VALID: no finding and the source is left byte-identical. INVALID: reported; the fixed
source equals the expected text exactly (or no fix for report-only); the fixed source
parses and compiles; a second run finds nothing left to fix.
"""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from autograd_fix.codemods.engine import FixOptions, check_source, run_rules
from autograd_fix.codemods.model import Example
from autograd_fix.codemods.registry import all_rules
from autograd_fix.codemods.rule import Rule


def _cases():
    for rule in all_rules():
        for kind, examples in (("valid", rule.examples().valid), ("invalid", rule.examples().invalid)):
            for number, example in enumerate(examples, start=1):
                yield pytest.param(rule, example, id=f"{rule.code}-{kind}-{number}")


def _clean(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


@pytest.mark.parametrize(("rule", "example"), list(_cases()))
def test_example(rule: type[Rule], example: Example) -> None:
    source = _clean(example.source)
    options = FixOptions(unsafe_fixes=example.unsafe_fixes)
    result = check_source(source, [rule], path=example.filename, options=options)
    if not example.reported:
        assert result.findings == [], f"VALID example reported: {[f.message for f in result.findings]}"
        assert result.fixed is None
        return
    assert result.findings, "INVALID example not reported"
    assert all(f.code == rule.code for f in result.findings)
    assert result.fix_error is None, result.fix_error
    if example.expected is None:
        assert all(f.fix is None for f in result.findings), "report-only example got a fix"
        return
    assert result.fixed is not None, "INVALID example has an expected fix but none was produced"
    assert result.fixed == _clean(example.expected)
    compile(result.fixed, example.filename, "exec")
    again = run_rules(cst.parse_module(result.fixed), [rule], example.filename)
    assert [f for f in again if f.fix is not None] == [], "second run still finds something to fix"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_is_documented(rule: type[Rule]) -> None:
    assert rule.missing_doc_sections() == []
    assert rule.name == rule.name.lower() and " " not in rule.name
    assert len(rule.examples().valid) >= 8 and len(rule.examples().invalid) >= 8
    assert rule.contract.checks and rule.contract.description
