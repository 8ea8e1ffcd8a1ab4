"""Patch plans: stable ids, composition of any subset of fixes as data, and the text edits
a fix becomes giving exactly what applying its node edits to the tree gives."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograd_fix.codemods.engine import EngineError, StatementCode, apply_fixes, parse_module, run_rules, target_paths
from autograd_fix.codemods.plans import FilePlans, plan_ids
from autograd_fix.codemods.text_fixes import apply_fix, compose, materialize
from autograd_fix.codemods.registry import all_rules, select_rules

EVAL = textwrap.dedent(
    """\
    import torch


    def evaluate_{n}(model, loader):
        model.eval()
        outputs = []
        for x, y in loader:  # keep this comment
            outputs.append(model(x) * {n})
        return torch.cat(outputs)
    """
)


def _module_with(count: int) -> str:
    head, _, body = EVAL.partition("\n\n\n")
    return head + "".join("\n\n\n" + body.replace("{n}", str(n)) for n in range(count))


def _plans(text: str) -> FilePlans:
    return FilePlans.from_source(text, select_rules(None, []), "evaluate.py")


def test_ids_are_stable_and_unique() -> None:
    text = _module_with(4)
    first, second = _plans(text), _plans(text)
    ids = [plan.id for plan in first.plans]
    assert ids == [plan.id for plan in second.plans]
    assert len(set(ids)) == len(ids) == 4
    assert all(plan_id.startswith("AGF001@") for plan_id in ids)


def test_composing_a_subset_applies_exactly_those_fixes() -> None:
    plans = _plans(_module_with(3))
    first, _, third = (plan.id for plan in plans.plans)
    text = plans.compose([first, third])
    assert text.count("@torch.no_grad()") == 2  # the loop is the whole function: the decorator form
    assert "@torch.no_grad()\ndef evaluate_1" not in text and "# keep this comment" in text
    assert plans.compose([]) == plans.text


def test_an_unknown_id_is_an_error_not_a_silent_no_op() -> None:
    with pytest.raises(EngineError, match="no such fix"):
        _plans(_module_with(1)).compose(["AGF001@99:1"])


def test_duplicate_positions_get_distinct_ids() -> None:
    class _Fake:
        def __init__(self, line: int) -> None:
            self.code, self.fix = "AGF006", object()
            self.span = type("S", (), {"line": line, "column": 5})()

    assert plan_ids([_Fake(3), _Fake(3), _Fake(4)]) == ["AGF006@3:5", "AGF006@3:5#1", "AGF006@4:5"]  # type: ignore[list-item]


def _every_invalid_example():
    for rule in all_rules():
        for number, example in enumerate(rule.examples().invalid, start=1):
            if example.expected is not None:  # report-only examples have no fix to compose
                yield pytest.param(rule, example, id=f"{rule.code}-invalid-{number}")


@pytest.mark.parametrize(("rule", "example"), list(_every_invalid_example()))
def test_text_edits_give_what_the_node_edits_give(rule, example) -> None:
    """For every fix of every rule example: its text edits applied to the text == its
    node edits applied to the tree; and all of them composed == all applied to the tree
    in one pass whenever none collides (a collision defers, it never half-applies)."""
    source = textwrap.dedent(example.source).lstrip("\n")
    module = parse_module(source)
    fixes = [f.fix for f in run_rules(module, [rule], example.filename, source) if f.fix is not None]
    assert fixes, "an example with a fixed source must have a fix"
    paths, codes = target_paths(module, fixes), StatementCode(module)
    as_data = [materialize(module, fix, paths, codes) for fix in fixes]
    for fix, data in zip(fixes, as_data):
        assert apply_fix(source, data) == apply_fixes(module, [fix])
    composition = compose(source, as_data)
    if not composition.deferred:
        assert composition.text == apply_fixes(module, fixes)


@settings(max_examples=60, deadline=None)
@given(
    newline=st.sampled_from(["\n", "\r\n"]),
    trailing=st.booleans(),
    header=st.sampled_from(["", "# a comment\n", "#!/usr/bin/env python\n\n"]),
    footer=st.sampled_from(["", "\n# end\n", "\n\n"]),
    count=st.integers(0, 3),
)
def test_statement_code_reproduces_the_module_text(newline: str, trailing: bool, header: str, footer: str, count: int) -> None:
    body = "".join(f"x{n} = {n}\n\ndef f{n}():\n    return x{n}\n" for n in range(count))
    text = (header + body + footer).replace("\n", newline)
    if not trailing:
        text = text.rstrip("\r\n")
    module = cst.parse_module(text)
    assert StatementCode(module).code(module) == module.code == text


#: top-level statements with what libcst attaches to them: comment and blank lines,
#: decorators with comments between them, a compound statement, two statements on a line
LAYOUT = (
    "#!/usr/bin/env python\n# header comment\n\nimport torch\nimport torch.nn as nn\n\n\n# about f\n@torch.no_grad()\n"
    "# between decorators\n@staticmethod\n\ndef f(x):\n    return (x +\n        1)\n\nx = 1; y = 2\nif x:\n    y = 3\n"
    "    # indented trailing comment\n# dedented comment\nclass C:\n    \"\"\"doc\n\n    \"\"\"\n\n# end\n\n"
)


@settings(max_examples=60, deadline=None)
@given(
    newline=st.sampled_from(["\n", "\r\n"]),
    edits=st.lists(st.tuples(st.sampled_from(["replace", "remove", "insert"]), st.integers(0, 20)), min_size=1, max_size=3),
)
def test_statement_code_read_off_the_text_gives_what_codegen_gives(newline: str, edits: list[tuple[str, int]]) -> None:
    """With the module's text, untouched statements are read off it (no codegen): any
    rewrite of the top level (a statement replaced, removed, or one inserted) gives the
    text `Module.code` gives, as the generate-everything mode does."""
    text = LAYOUT.replace("\n", newline)
    module = cst.parse_module(text)
    body = list(module.body)
    for kind, position in edits:
        at = position % (len(body) + (kind == "insert"))
        if kind == "replace":
            body[at] = body[at].deep_clone()
        elif kind == "remove" and len(body) > 1:
            del body[at]
        elif kind == "insert":
            body.insert(at, cst.parse_statement("import math" + newline))
    rewritten = module.with_changes(body=body)
    read, generated = StatementCode(module, text), StatementCode(module)
    assert read.original == generated.original == text
    assert read.code(rewritten) == generated.code(rewritten) == rewritten.code


def test_statement_code_refuses_offsets_its_check_disproves() -> None:
    """A decorator whose `@` ends in a line continuation: Python's parser places the
    statement one line late. Reading the text there would put a fix in the wrong place,
    so the check raises, and `materialized` generates every statement instead."""
    from autograd_fix.codemods.engine import TextMismatch, materialized

    text = (
        "import torch\nfrom torch.autograd import Variable\n\n@ \\\n  torch.no_grad()\n"
        "def f():\n    return Variable(torch.randn(8, 4))\n"
    )
    module = cst.parse_module(text)
    rewritten = module.with_changes(body=[*module.body[:2], module.body[2].deep_clone()])
    with pytest.raises(TextMismatch):
        StatementCode(module, text).code(rewritten)
    assert StatementCode(module).code(rewritten) == text
    rule = next(rule for rule in all_rules() if rule.code == "AGF012")
    findings = run_rules(module, [rule], "f.py", text)
    assert any(f.fix is not None for f in findings)
    assert materialized(module, findings, text) == materialized(module, findings)


def test_any_subset_of_separate_fixes_composes_as_the_tree_pass_does() -> None:
    """Stacked patches (each composed on top of the accepted ones): every subset of
    fixes in separate functions gives the whole-module pass's text."""
    plans = _plans(_module_with(6))
    ids = [plan.id for plan in plans.plans]
    module = cst.parse_module(plans.text)
    node_fixes = [f.fix for f in run_rules(module, select_rules(None, []), "evaluate.py", plans.text) if f.fix is not None]
    by_id = dict(zip(ids, node_fixes))
    for end in range(len(ids) + 1):
        for chosen in (ids[:end], ids[end:], ids[::2][: end or None]):
            expected = apply_fixes(module, [by_id[i] for i in chosen]) if chosen else plans.text
            assert plans.compose(chosen) == expected
