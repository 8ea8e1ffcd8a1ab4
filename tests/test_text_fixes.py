"""Fixes as data: a fix is text edits that survive the tree they came from (JSON, pickle),
and one composition step applies any list of them (Ruff's model: in order, a fix that
collides with one taken before it waits for the next round)."""

from __future__ import annotations

import json
import pickle
import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.model import Applicability, TextEdit, TextFix
from autograd_fix.codemods.registry import all_rules
from autograd_fix.codemods.text_fixes import LineIndex, compose, map_offset, text_edits, unmap_offset

TRAIN = textwrap.dedent(
    """\
    import torch
    from torch.autograd import Variable


    def evaluate(model, loader):
        model.eval()
        total = 0
        for x, y in loader:
            out = model(Variable(x))
            total += (out.argmax(1) == y).sum().item()
        return total
    """
)


def _fix(*edits: tuple[int, int, str]) -> TextFix:
    return TextFix(Applicability.SAFE, tuple(TextEdit(*edit) for edit in edits), "test")


def test_a_real_fix_round_trips_through_json_and_pickle_and_still_applies() -> None:
    result = check_source(TRAIN, all_rules(), path="evaluate.py", options=FixOptions(unsafe_fixes=True), compute_fix=False)
    fixes = [f.fix for f in result.findings if f.fix is not None]
    assert fixes and all(isinstance(fix, TextFix) for fix in fixes)
    for fix in fixes:
        again = TextFix.from_json(json.loads(json.dumps(fix.to_json())))
        assert again == fix == pickle.loads(pickle.dumps(fix))
        assert compose(TRAIN, [again]).text == compose(TRAIN, [fix]).text != TRAIN


def test_composition_takes_fixes_in_order_and_defers_collisions() -> None:
    text = "a = 1\nb = 2\nc = 3\n"
    first, clash, later = _fix((4, 5, "10")), _fix((0, 5, "a = 9")), _fix((16, 17, "30"))
    composition = compose(text, [first, clash, later])
    assert composition.text == "a = 10\nb = 2\nc = 30\n"
    assert (composition.applied, composition.deferred) == ((0, 2), (1,))
    # the same import needed by two fixes goes in once; two insertions at one point both go in
    both = _fix((0, 0, "import torch\n"))
    assert compose(text, [both, both, _fix((0, 0, "import os\n"))]).text == "import torch\nimport os\n" + text
    # an insertion at the edge of a replaced range is ambiguous: deferred
    assert compose(text, [_fix((6, 11, "b = 7")), _fix((6, 6, "x = 0\n"))]).deferred == (1,)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab\n c", max_size=60), st.text(alphabet="ab\n cd", max_size=60))
def test_text_edits_turn_one_text_into_the_other_and_positions_map_back(before: str, after: str) -> None:
    edits = text_edits(before, after)
    assert compose(before, [TextFix(Applicability.SAFE, edits, "diff")]).text == after
    assert all(a.end <= b.start for a, b in zip(edits, edits[1:]))
    for offset in range(len(before) + 1):  # an untouched position maps there and back
        if not any(edit.start <= offset < edit.end or edit.start == offset for edit in edits):
            assert unmap_offset(map_offset(offset, edits), edits) == offset


def test_line_index_counts_python_line_breaks() -> None:
    lines = LineIndex("a\r\nbc\rd\n")
    assert [lines.offset(2, 2), lines.offset(3, 1)] == [4, 6]
    assert lines.position(4) == (2, 2)
