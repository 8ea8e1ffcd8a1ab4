"""A finding's span is libcst's position of its node, whatever shortcut computes it."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from autograd_fix.codemods.model import Span
from autograd_fix.codemods.positions import StatementPositions
from autograd_fix.codemods.rule import RuleContext
from autograd_fix.codemods.walk import SyntaxIndex, iter_descendants

SOURCE = '''#!/usr/bin/env python
# a header comment
"""Module docstring
over two lines."""
import torch; import torch.nn as nn


@torch.no_grad()
@staticmethod
def evaluate(model, loader):  # comment
    model.eval()
    total = 0.0
    for images, labels in loader:
        out = model(images)
        total += (out.argmax(1) == labels).float().sum().item()
    return total / max(len(loader), 1)

# a comment between statements

class Net(nn.Module):
    text = """a string
    that spans lines"""

    def forward(self, x):
        return self.fc(x) if x.ndim else x
if __name__ == "__main__": evaluate(Net(), []); print("done")
'''

REPO = Path(__file__).resolve().parents[1]


def expected_spans(module: cst.Module) -> dict[cst.CSTNode, Span]:
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    return {
        node: Span(where.start.line, where.start.column + 1, where.end.line, where.end.column)
        for node, where in positions.items()
    }


def check(text: str) -> tuple[int, bool]:
    """How many nodes were compared, and whether the per-statement path answered all of
    them (no whole-module fallback)."""
    module = cst.parse_module(text)
    expected = expected_spans(module)
    index = SyntaxIndex(module)
    positions = StatementPositions(module, lambda: index, text)
    # every node of the statements (a finding is never the module itself)
    nodes = [node for node in iter_descendants(module) if node in expected and node is not module]
    for node in nodes:
        assert positions.span(node) == expected[node], cst.Module([]).code_for_node(node)[:80]
    return len(nodes), positions._whole is None


def test_spans_are_libcst_positions() -> None:
    compared, per_statement = check(SOURCE)
    assert compared > 100 and per_statement


def test_rule_context_spans_match_with_and_without_the_text() -> None:
    module = cst.parse_module(SOURCE)
    expected = expected_spans(module)
    with_text, without = RuleContext("train.py", module, text=SOURCE), RuleContext("train.py", module)
    node = next(n for n in iter_descendants(module) if isinstance(n, cst.Attribute) and n.attr.value == "argmax")
    assert with_text.span(node) == without.span(node) == expected[node]


@pytest.mark.parametrize("text", ["\ufeffimport torch\nx = torch.ones(1)\n", "x = (1 +\n     2)\n\n\n", "pass"])
def test_odd_files_still_give_libcst_positions(text: str) -> None:
    check(text)


def test_spans_on_the_bug_corpus_are_libcst_positions() -> None:
    files = sorted((REPO / "tests" / "corpus").glob("*/buggy.py"))
    assert len(files) > 60
    results = [check(path.read_text(encoding="utf-8")) for path in files]
    assert sum(compared for compared, _ in results) > 10_000
    assert all(per_statement for _, per_statement in results)
