"""Text geometry behind the language server: minimal edits and `# noqa` insertion."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograd_fix.cli.lsp_edits import apply_edits, line_edits, noqa_edit, split_lines

LINES = st.lists(
    st.tuples(st.sampled_from(["x = 1", "y = 2", "", "for b in loader:", "  é😀", "\tz"]), st.sampled_from(["\n", "\r\n", "\r"])),
    max_size=12,
)


def _text(pairs: list[tuple[str, str]], trailing_break: bool) -> str:
    text = "".join(content + brk for content, brk in pairs)
    return text if trailing_break or not text else text.rstrip("\r\n")


@settings(max_examples=200, deadline=None)
@given(LINES, LINES, st.booleans(), st.booleans())
def test_line_edits_turn_the_old_text_into_the_new(old, new, old_break, new_break) -> None:
    before, after = _text(old, old_break), _text(new, new_break)
    assert apply_edits(before, line_edits(before, after)) == after


def test_line_edits_touch_only_changed_lines() -> None:
    before = "import torch\n\nfor x in loader:\n    model(x)\n"
    after = "import torch\n\nwith torch.no_grad():\n    for x in loader:\n        model(x)\n"
    edits = line_edits(before, after)
    assert [(e.start_line, e.end_line) for e in edits] == [(2, 4)]
    assert apply_edits(before, edits) == after


def test_split_lines_uses_the_protocols_line_breaks_only() -> None:
    # form feed and other str.splitlines() breaks are not LSP line breaks
    assert split_lines("a\x0cb\r\nc\rd\ne") == ["a\x0cb\r\n", "c\r", "d\n", "e"]


def _suppressed(source: str, line: int, code: str = "AGF001") -> str | None:
    text = textwrap.dedent(source)
    edit = noqa_edit(text, line, code)
    return None if edit is None else apply_edits(text, [edit])


def test_noqa_goes_at_the_end_of_a_line_without_a_comment() -> None:
    assert _suppressed("for x in loader:   \n    model(x)\n", 1) == "for x in loader:  # noqa: AGF001\n    model(x)\n"


def test_noqa_follows_an_existing_comment() -> None:
    assert _suppressed("for x in loader:  # validation\n    model(x)\n", 1) == (
        "for x in loader:  # validation  # noqa: AGF001\n    model(x)\n"
    )


def test_noqa_merges_into_an_existing_noqa_comment() -> None:
    assert _suppressed("total += loss  # noqa: AGF003  (checked)\r\n", 1, "AGF006") == "total += loss  # noqa: AGF003, AGF006  (checked)\r\n"


@pytest.mark.parametrize(
    "source",
    [
        'msg = f"""start\nfor x in loader: {1}\n"""\n',  # line 2 ends inside a string
        "total = a + \\\n    b\n",  # line 1 ends in a backslash continuation
    ],
    ids=["inside-string", "backslash"],
)
def test_noqa_is_not_offered_where_a_comment_cannot_go(source: str) -> None:
    line = 2 if source.startswith("msg") else 1
    assert _suppressed(source, line) is None
