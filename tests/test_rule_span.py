"""A finding's span is libcst's position of its node, whatever shortcut computes it."""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from autograd_fix.codemods.model import Span
from autograd_fix.codemods.rule import RuleContext
from autograd_fix.codemods.walk import iter_descendants

SOURCE = '''import torch


def evaluate(model, loader):  # comment
    model.eval()
    total = 0.0
    for images, labels in loader:
        out = model(images)
        total += (out.argmax(1) == labels).float().sum().item()
    return total / max(len(loader), 1)
'''


def test_spans_are_libcst_positions() -> None:
    module = cst.parse_module(SOURCE)
    context = RuleContext("train.py", module)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = [node for node in iter_descendants(module) if node in expected]
    assert len(nodes) > 50
    for node in nodes:
        where = expected[node]
        assert context.span(node) == Span(where.start.line, where.start.column + 1, where.end.line, where.end.column)
