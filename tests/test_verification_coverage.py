"""Changed lines per side (difflib) and the line watch that says whether they ran."""

from __future__ import annotations

import sys
import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from autograd_fix.verification.coverage import LineWatch, changed_lines, executable_lines, unexercised

TRAIN = textwrap.dedent(
    """\
    import torch


    def train(model, loader, optimizer, criterion, epochs=1):
        for epoch in range(epochs):
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
        return model
    """
)


def test_a_replaced_line_is_changed_on_both_sides():
    fixed = TRAIN.replace("loss.backward()", "loss.mean().backward()")
    assert fixed != TRAIN
    assert changed_lines(TRAIN, fixed) == ([[8]], [[8]])


def test_an_insertion_is_anchored_on_the_statement_it_runs_before():
    fixed = TRAIN.replace("            loss = criterion", "            optimizer.zero_grad()\n            loss = criterion")
    assert fixed != TRAIN
    original, rewritten = changed_lines(TRAIN, fixed)
    assert rewritten == [[7]]
    assert original == [[7]]  # `loss = criterion(...)`, where the new line runs first


def test_an_insertion_at_the_end_of_the_file_is_anchored_on_the_last_statement():
    extended = TRAIN + "\nprint('done')\n"
    original, rewritten = changed_lines(TRAIN, extended)
    assert rewritten == [[12]] and original == [[10]]


def test_a_wrapped_block_is_changed_where_its_lines_hold_code():
    wrapped = TRAIN.replace(
        "        for x, y in loader:\n            loss",
        "        with torch.enable_grad():\n          for x, y in loader:\n            loss",
    )
    assert wrapped != TRAIN
    original, rewritten = changed_lines(TRAIN, wrapped)
    assert original == [[6]]
    assert rewritten == [[6, 7]]


def test_lines_without_code_are_not_executable():
    source = "x = 1\n\n# a comment\nif x:\n    y = 2\nelse:\n    y = 3\n"
    assert executable_lines(source) == {1, 4, 5, 7}
    assert executable_lines("def broken(:\n") == set()


def test_unexercised_names_the_first_line_of_each_hunk_that_never_ran():
    assert unexercised([[3, 4], [9]], ran=[4]) == [9]
    assert unexercised([[3, 4], [9]], ran=[]) == [3, 9]


def _run(source: str, path: str, hunks, *, call=None):
    watch = LineWatch(path, hunks)
    namespace: dict = {}
    with watch:
        exec(compile(source, path, "exec"), namespace)  # noqa: S102
        if call:
            namespace[call[0]](*call[1:])
    return watch


GATED = textwrap.dedent(
    """\
    def step(batch, fast):
        if fast:
            return 0
        total = sum(batch)
        return total
    """
)


def test_the_watch_sees_a_changed_line_only_when_it_runs():
    assert _run(GATED, "/proj/gated.py", [[4]], call=("step", [1, 2], True)).report()["missed"] == [4]
    report = _run(GATED, "/proj/gated.py", [[4]], call=("step", [1, 2], False)).report()
    assert report == {"hunks": [[4]], "ran": [4], "missed": []}


def test_code_from_another_compile_with_the_same_name_does_not_count():
    # namedtuple/dataclass compile methods as "<string>", the name of a unit without a file
    watch = LineWatch("<string>", [[4]])
    with watch:
        exec(compile(GATED, "<string>", "exec"), {})  # the unit's own module: defines step only
        other: dict = {}
        exec(compile("def f():\n    a = 1\n    b = 2\n    c = 3\n", "<string>", "exec"), other)
        other["f"]()
    assert watch.report()["missed"] == [4]


def test_lines_run_while_paused_do_not_count_and_the_previous_tracer_is_restored():
    before = sys.gettrace()
    watch = LineWatch("/proj/gated.py", [[4]])
    namespace: dict = {}
    with watch:
        exec(compile(GATED, "/proj/gated.py", "exec"), namespace)  # noqa: S102
        with watch.paused():
            namespace["step"]([1], False)
    assert watch.report()["ran"] == []
    assert sys.gettrace() is before


def test_without_changed_lines_nothing_is_watched():
    watch = _run(GATED, "/proj/gated.py", None)
    assert not watch.enabled and watch.report() is None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["", "x = 1", "model.eval()", "y = x", "pass"]), max_size=30),
    st.lists(st.sampled_from(["", "x = 1", "model.eval()", "z = 2", "pass"]), max_size=30),
)
def test_trimmed_opcodes_rebuild_the_rewritten_lines(a, b):
    # only the stretch between the first and last differing line is matched; the
    # opcodes must still turn one version into the other, at the right line numbers
    from autograd_fix.verification.coverage import _opcodes

    rebuilt: list[str] = []
    position = 0
    for tag, i1, i2, j1, j2 in _opcodes(a, b):
        assert i1 == position
        rebuilt += a[i1:i2] if tag == "equal" else b[j1:j2]
        position = i2
    assert position == len(a) and rebuilt == b
