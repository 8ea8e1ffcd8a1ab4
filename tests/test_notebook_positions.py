"""Notebook findings in SARIF and GitHub annotations sit on the `.ipynb` file's own
lines (the JSON a viewer shows), with the cell in the message and properties; SARIF
offers no fix for a notebook (its offsets would point into the cells' program)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from autograd_fix.cli.app import app
from autograd_fix.cli.notebook_lines import cell_source_index

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "eval_in_notebook.ipynb"


def _file_char(raw: str, line: int, column: int) -> str:
    return raw.splitlines(keepends=True)[line - 1][column - 1]


_ESCAPED_PAIR = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _decode_escape(rest: str) -> str:
    """The character a JSON escape at the start of `rest` stands for: `\\n`, `\\u00e9`,
    or a surrogate pair `\\ud83d\\ude00` (one character), read by `json` itself."""
    if rest[1] != "u":
        return json.loads('"' + rest[:2] + '"')
    width = 12 if _ESCAPED_PAIR.match(rest) else 6
    return json.loads('"' + rest[:width] + '"')


_NOT_LINE_BREAKS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def _cells(surrogates: bool) -> st.SearchStrategy[list[list[str]]]:
    """Cells of lines; lone surrogates only where the JSON escapes them (UTF-8 cannot
    hold them unescaped)."""
    excluded = () if surrogates else ("Cs",)
    line = st.text(st.characters(blacklist_categories=excluded, blacklist_characters=_NOT_LINE_BREAKS), max_size=12)
    return st.lists(st.lists(line, min_size=1, max_size=5), min_size=1, max_size=4)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), ascii_only=st.booleans(), as_list=st.booleans(), indent=st.sampled_from([None, 1, 2]))
def test_every_character_of_every_cell_maps_to_its_place_in_the_json(data, ascii_only, as_list, indent) -> None:
    cells = data.draw(_cells(surrogates=ascii_only))
    sources = ["\n".join(cell) for cell in cells]
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [],
                           "source": source.splitlines(keepends=True) if as_list else source} for source in sources],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    raw = json.dumps(notebook, ensure_ascii=ascii_only, indent=indent)
    index = cell_source_index(raw.encode())
    assert index is not None
    # the cells as a reader of the file sees them: two lone surrogates escaped side by
    # side (`\\ud800\\udc00`) are read back as one character
    for cell_index, cell in enumerate(json.loads(raw)["cells"]):
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        for line_number, text in enumerate(source.split("\n"), start=1):
            for column, char in enumerate(text, start=1):
                line, file_column = index.position(cell_index, line_number, column)
                found = _file_char(raw, line, file_column)
                if found == "\\":  # an escape: it must decode to the character
                    assert _decode_escape(raw.splitlines()[line - 1][file_column - 1:]) == char
                else:
                    assert found == char


@pytest.mark.parametrize("text", ["\ud000\u00e9", "a\U0001f600b", "x\ud800y", "\udc00z", "\ud800\udc00", "\ud83d\\ude00"])
def test_unicode_escapes_map_to_their_characters(text: str) -> None:
    """Escapes found by the property above: U+D000 is no surrogate, a lone surrogate is one
    character, an escaped pair is one character, a backslash before `u` is no escape."""
    raw = json.dumps({"cells": [{"cell_type": "code", "source": text}]}, ensure_ascii=True)
    index = cell_source_index(raw.encode())
    decoded = json.loads(raw)["cells"][0]["source"]
    for column, char in enumerate(decoded, start=1):
        _, file_column = index.position(0, 1, column)
        rest = raw[file_column - 1:]
        assert (_decode_escape(rest) if rest[0] == "\\" else rest[0]) == char


@pytest.mark.parametrize("escape", ["+1a2", " 1a2", "1_a2", "0x1a", "12"])
def test_a_malformed_unicode_escape_gives_no_index(escape: str) -> None:
    raw = '{"cells": [{"cell_type": "code", "source": "a\\u' + escape + 'b"}]}'
    assert cell_source_index(raw.encode()) is None


def test_broken_json_gives_no_index() -> None:
    assert cell_source_index(b'{"cells": [') is None
    assert cell_source_index(b"\xff\xfe") is None


@pytest.fixture
def notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return Path(shutil.copy(EXAMPLE, tmp_path / "eval.ipynb"))


def test_sarif_places_a_notebook_finding_on_the_json_line_of_its_cell(notebook: Path) -> None:
    result = CliRunner().invoke(app, ["--format", "sarif", "eval.ipynb"], catch_exceptions=False)
    (finding,) = json.loads(result.stdout)["runs"][0]["results"]
    region = finding["locations"][0]["physicalLocation"]["region"]
    raw_line = notebook.read_text().splitlines()[region["startLine"] - 1]
    assert raw_line[region["startColumn"] - 1:].startswith("for inputs, targets in val_batches:")
    assert finding["message"]["text"].startswith("cell 7, line 3: ")
    assert finding["properties"]["cell"] == 7 and finding["properties"]["cellLine"] == 3
    assert "fixes" not in finding  # offsets into the cells' program would corrupt the JSON


def test_github_annotation_points_at_the_notebook_file_line(notebook: Path) -> None:
    result = CliRunner().invoke(app, ["--format", "github", "eval.ipynb"], catch_exceptions=False)
    line = result.stdout.splitlines()[0]
    start = int(line.split("line=")[1].split(",")[0])
    assert "for inputs, targets in val_batches:" in notebook.read_text().splitlines()[start - 1]
    assert "::cell 7, line 3: " in line
