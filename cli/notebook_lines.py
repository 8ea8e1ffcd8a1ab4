"""Where a cell's source text sits in the `.ipynb` file itself: the line and column of
the JSON file that holds a given line and column of a cell.

A finding in a notebook is reported to people as `nb.ipynb:cell 4:3:1`, but SARIF
viewers (GitHub code scanning) and `::error` annotations only know lines of the file
they show, which is the JSON. Line 3 of the file is `  {`, so the cell position must be
carried over: a small scanner reads the JSON text and, for each string of a code cell's
`"source"` (a list of strings, usually one per line, or one string), keeps the offset of
each character of its decoded text in the file, escapes (`\\n`, `\\"`, `\\u00e9`) and
all. Plain data, computed where the raw bytes are read (`runner.check_file`).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

_WHITESPACE = re.compile(r"[ \t\r\n]*")
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")
_SIMPLE_ESCAPES = frozenset('"\\/bfnrt')
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")


class _BadJson(ValueError):
    pass


@dataclass
class _CellSource:
    """One cell's decoded source, with each character's offset in the file."""

    text: list[str] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class FileRegion:
    """A region in the `.ipynb` file: 1-based lines, 1-based columns in code points."""

    line: int
    column: int
    end_line: int
    end_column: int


class CellSourceIndex:
    """Positions of the notebook's cell sources in its JSON text."""

    def __init__(self, text: str, cells: dict[int, _CellSource]) -> None:
        self._line_starts = [0] + [match.end() for match in re.finditer(r"\r\n|\r|\n", text)]
        self._cells = cells

    def position(self, cell_index: int, line: int, column: int) -> tuple[int, int] | None:
        """(file line, file column) of `column` on `line` of the cell at `cell_index`
        (0-based among all cells; line and columns 1-based), or None if it is not there.
        A column just past the line's end maps to just past its last character."""
        cell = self._cells.get(cell_index)
        if cell is None:
            return None
        text = "".join(cell.text)
        starts = [0] + [match.end() for match in re.finditer(r"\r\n|\r|\n", text)]
        if not 1 <= line <= len(starts):
            return None
        index = starts[line - 1] + column - 1
        if index < len(cell.offsets):
            offset = cell.offsets[index]
        elif cell.offsets:
            offset = cell.offsets[-1] + 1
        else:
            return None
        file_line = bisect.bisect_right(self._line_starts, offset)
        return file_line, offset - self._line_starts[file_line - 1] + 1

    def region(self, cell_index: int, line: int, column: int, end_line: int, end_column: int) -> FileRegion | None:
        start = self.position(cell_index, line, column)
        end = self.position(cell_index, end_line, end_column)
        if start is None or end is None:
            return None
        return FileRegion(start[0], start[1], end[0], end[1])


def cell_source_index(raw: bytes) -> CellSourceIndex | None:
    """The index of a notebook's raw bytes (None: not JSON this scanner can follow)."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    cells: dict[int, _CellSource] = {}
    try:
        position = _value(text, _skip(text, 0), (), cells)
    except (_BadJson, IndexError, RecursionError):
        return None
    if _skip(text, position) != len(text):
        return None
    return CellSourceIndex(text, cells)


def _skip(text: str, position: int) -> int:
    return _WHITESPACE.match(text, position).end()  # type: ignore[union-attr]


def _value(text: str, position: int, path: tuple, cells: dict[int, _CellSource]) -> int:
    """Scan one JSON value at `position`; return the position after it."""
    char = text[position]
    if char == "{":
        return _object(text, position, path, cells)
    if char == "[":
        return _array(text, position, path, cells)
    if char == '"':
        decoded, offsets, end = _string(text, position)
        cell = _source_of(path, cells)
        if cell is not None:
            cell.text.append(decoded)
            cell.offsets.extend(offsets)
        return end
    match = _SCALAR.match(text, position)
    if match is None:
        raise _BadJson(position)
    return match.end()


def _source_of(path: tuple, cells: dict[int, _CellSource]) -> _CellSource | None:
    """The cell whose source a string at `path` belongs to, if it does."""
    if len(path) in (3, 4) and path[0] == "cells" and path[2] == "source" and isinstance(path[1], int):
        return cells.setdefault(path[1], _CellSource())
    return None


def _object(text: str, position: int, path: tuple, cells: dict[int, _CellSource]) -> int:
    position = _skip(text, position + 1)
    if text[position] == "}":
        return position + 1
    while True:
        if text[position] != '"':
            raise _BadJson(position)
        key, _, position = _string(text, position)
        position = _skip(text, position)
        if text[position] != ":":
            raise _BadJson(position)
        position = _skip(text, _value(text, _skip(text, position + 1), (*path, key), cells))
        if text[position] == "}":
            return position + 1
        if text[position] != ",":
            raise _BadJson(position)
        position = _skip(text, position + 1)


def _array(text: str, position: int, path: tuple, cells: dict[int, _CellSource]) -> int:
    position = _skip(text, position + 1)
    if text[position] == "]":
        return position + 1
    index = 0
    while True:
        position = _skip(text, _value(text, position, (*path, index), cells))
        index += 1
        if text[position] == "]":
            return position + 1
        if text[position] != ",":
            raise _BadJson(position)
        position = _skip(text, position + 1)


def _string(text: str, position: int) -> tuple[str, list[int], int]:
    """The decoded string starting at the quote at `position`, the file offset of each
    decoded character, and the position after the closing quote."""
    chars: list[str] = []
    offsets: list[int] = []
    index = position + 1
    while True:
        char = text[index]
        if char == '"':
            return "".join(chars), offsets, index + 1
        if char != "\\":
            chars.append(char)
            offsets.append(index)
            index += 1
            continue
        escape = text[index + 1]
        if escape in _SIMPLE_ESCAPES:
            chars.append({"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}.get(escape, escape))
            offsets.append(index)
            index += 2
            continue
        if escape != "u":
            raise _BadJson(index)
        code = _hex4(text, index + 2)
        width = 6
        # a high surrogate and a low one escaped next to it are one character (as
        # `json.loads` reads them); any other surrogate stays a lone code point
        if 0xD800 <= code < 0xDC00 and text[index + 6: index + 8] == "\\u":
            low = _hex4(text, index + 8)
            if 0xDC00 <= low < 0xE000:
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                width = 12
        chars.append(chr(code))
        offsets.append(index)
        index += width


def _hex4(text: str, position: int) -> int:
    """The four hex digits of a `\\uXXXX` escape at `position` (exactly four: `int`
    alone would also take `+1a2`, ` 1a2` or `1_a2`, which JSON does not)."""
    match = _HEX4.match(text, position)
    if match is None:
        raise _BadJson(position)
    return int(match.group(), 16)
