"""Jupyter notebooks (`.ipynb`) as one Python program, and back.

A notebook's code cells run in order in one namespace, so they are analysed as one
program: the cells' sources, IPython lines masked (see `magics`), joined by boundary
comments. Rules, fixes and verification see only that program; this module maps its
positions to `cell N:line:col` (N counts every cell, markdown included, from 1: the
cell's position in Jupyter and the number Ruff prints), splits a fixed program back
into cells, and writes only the cells that changed into the notebook's own JSON.

Reading uses nbformat (schema validation, version); writing keeps what a rewrite by
nbformat would lose: key order, each source's list-or-string form, the indentation,
line endings and the final newline of the JSON. The rewritten notebook is validated
by nbformat before it is written.
"""

from __future__ import annotations

import ast
import codecs
import copy
import hashlib
import json
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from autograd_fix.cli.magics import mask_cell, split_lines
from autograd_fix.codemods.source import SourceChangedError, SourceError, SourceText, digest

SUFFIX = ".ipynb"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_PROGRAM_LINE = re.compile(r"line (\d+)\b")


class NotebookError(SourceError):
    """The notebook cannot be read, or a fixed program cannot be split back into it."""


def is_notebook(path: str) -> bool:
    return path.lower().endswith(SUFFIX)


@dataclass(frozen=True)
class CellSpan:
    """Where one code cell sits in the program."""

    index: int  # 0-based among all the notebook's cells
    first_line: int  # 1-based program line of the cell's first line
    line_count: int
    #: the program adds a final newline the cell's source does not have
    added_newline: bool

    @property
    def number(self) -> int:
        return self.index + 1


@dataclass
class NotebookMap:
    """How the program was built from the notebook: enough to map positions and to
    split a fixed program back into cell sources (plain data: it crosses processes)."""

    cells: list[CellSpan] = field(default_factory=list)
    #: the comment line between consecutive code cells (one per boundary, in order)
    boundaries: list[str] = field(default_factory=list)
    #: placeholder line -> the IPython line it masks
    restore: dict[str, str] = field(default_factory=dict)
    #: placeholder line -> the IPython input it runs as in verification (`magics`)
    runnable: dict[str, str] = field(default_factory=dict)
    #: cells that are not valid Python on their own (an exercise's `lr = `): cell number ->
    #: the syntax error. Each is left out of the program as blank lines (its positions
    #: kept), so the other cells are analysed and the cell itself is never rewritten.
    unparsable: dict[int, str] = field(default_factory=dict)
    #: the sources of those cells, by cell index: what `cell_sources` gives back for them
    left_out: dict[int, str] = field(default_factory=dict)

    def locate(self, line: int) -> tuple[int, int]:
        """(cell number, line in that cell) of a 1-based program line."""
        index, cell_line = self.locate_span(line)
        return index + 1, cell_line

    def program_line(self, cell_number: int, line: int) -> int:
        """The 1-based program line of `line` in the cell numbered `cell_number` (the
        inverse of `locate`; 0 when there is no such code cell)."""
        for span in self.cells:
            if span.number == cell_number:
                return span.first_line + line - 1
        return 0

    def locate_span(self, line: int) -> tuple[int, int]:
        """(cell index, 0-based among all the notebook's cells, line in that cell) of a
        1-based program line."""
        span = self._span_at(line)
        return span.index, line - span.first_line + 1

    def _span_at(self, line: int) -> CellSpan:
        for span in reversed(self.cells):
            if line >= span.first_line:
                return span
        return self.cells[0]

    def segments(self, program: str) -> list[str]:
        """The program split at the boundaries, one text per code cell (still masked).

        Raises NotebookError when a boundary was moved, re-indented or removed.
        """
        pieces: list[str] = []
        rest = program
        for boundary in self.boundaries:
            # the whole line: "...-1" is a prefix of the boundary after cell 12
            line = re.compile(rf"^{re.escape(boundary)}(\r\n|\r|\n)", re.M)
            match = line.search(rest)
            if match is None or line.search(rest, match.end()) is not None:
                raise NotebookError("a cell boundary moved")
            pieces.append(rest[: match.start()])
            rest = rest[match.end():]
        pieces.append(rest)
        return pieces

    def cell_sources(self, program: str) -> dict[int, str]:
        """Cell index -> source, IPython lines restored. Raises NotebookError when a
        masked line or a cell boundary did not survive unchanged."""
        seen: set[str] = set()
        sources: dict[int, str] = {}
        for span, segment in zip(self.cells, self.segments(program)):
            if span.index in self.left_out:
                sources[span.index] = self.left_out[span.index]  # never analysed, never rewritten
                continue
            lines = []
            for line in split_lines(segment):
                body = line.rstrip("\r\n")
                if body in self.restore:
                    if body in seen:
                        raise NotebookError("a masked IPython line was duplicated")
                    seen.add(body)
                    line = self.restore[body] + line[len(body):]
                lines.append(line)
            text = "".join(lines)
            if span.added_newline and text.endswith("\n"):
                text = text[:-1]
            sources[span.index] = text
        if len(seen) != len(self.restore):
            raise NotebookError("a masked IPython line was changed")
        return sources

    def intact(self, program: str) -> bool:
        try:
            self.cell_sources(program)
        except NotebookError:
            return False
        return True

    def diff(self, before: str, after: str, path: str) -> str:
        """Unified diffs of the changed cells, each headed `a/PATH:cell N`."""
        old, new = self.cell_sources(before), self.cell_sources(after)
        parts = []
        for span in self.cells:
            if old[span.index] != new[span.index]:
                parts.append(_unified_diff(_ended(old[span.index]), _ended(new[span.index]), f"{path}:cell {span.number}"))
        return "".join(parts)

    def localize_where(self, where: str, program: str) -> str:
        """`line 14: ...` (a line of `program`, a version of this notebook's program)
        as `cell 4, line 2: <that line's code>`; unchanged when it names no line."""
        match = _PROGRAM_LINE.match(where)
        lines = _LINE_BREAK.split(program)
        if match is None or not 0 < int(match.group(1)) <= len(lines):
            return where
        number = int(match.group(1))
        starts = [1] + [i + 2 for i, line in enumerate(lines) if line in self.boundaries]
        cell = max(k for k, start in enumerate(starts) if start <= number)
        if cell >= len(self.cells) or len(starts) != len(self.cells):
            return where
        code = lines[number - 1]
        code = self.restore.get(code, code).strip()
        return f"cell {self.cells[cell].number}, line {number - starts[cell] + 1}: {code}"


@dataclass
class Notebook:
    source: SourceText  # the program (UTF-8, no BOM) and the digest of the file's bytes
    map: NotebookMap


def _ended(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


def _source_text(source: Any, where: str) -> str:
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(part, str) for part in source):
        return "".join(source)
    raise NotebookError(f"{where}: `source` must be a string or a list of strings")


def _parse(data: bytes) -> tuple[str, dict[str, Any]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise NotebookError(f"not a notebook: not UTF-8 text ({error.reason} at byte {error.start})") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise NotebookError(f"not a notebook: invalid JSON at line {error.lineno} column {error.colno}: {error.msg}") from None
    if not isinstance(raw, dict):
        raise NotebookError("not a notebook: the JSON document is not an object")
    version = raw.get("nbformat")
    if version is None:
        raise NotebookError("not a notebook: no `nbformat` version")
    if version != 4:
        raise NotebookError(
            f"nbformat {version} notebooks are not supported (version 4 is); "
            "convert it with `jupyter nbconvert --to notebook --nbformat 4`"
        )
    if not isinstance(raw.get("cells"), list):
        raise NotebookError("not a notebook: no `cells` list")
    _validate(raw)
    return text, raw


def _validate(raw: dict[str, Any]) -> None:
    """nbformat's schema check, on a copy: nbformat adds missing cell ids as it checks,
    and a notebook is written back with only its changed sources changed."""
    import nbformat  # imported here: only runs that meet a notebook pay for it

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "cell is missing an id": not ours to fix
            nbformat.validate(copy.deepcopy(raw))
    except nbformat.ValidationError as error:
        message = str(error.message).splitlines()[0][:200]
        raise NotebookError(f"not a valid nbformat 4 notebook: {message}") from None


def is_python(raw: dict[str, Any]) -> bool:
    """Notebooks of other kernels (R, Julia) have no Python to check."""
    metadata = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    language = (metadata.get("language_info") or {}).get("name") or (metadata.get("kernelspec") or {}).get("language")
    return not isinstance(language, str) or language.lower().removeprefix("i").startswith("python")


def load_notebook(data: bytes) -> Notebook:
    """The notebook in `data` as one program, or NotebookError saying what is wrong."""
    _, raw = _parse(data)
    code_cells = [
        (index, _source_text(cell.get("source", ""), f"cell {index + 1}"))
        for index, cell in enumerate(raw["cells"])
        if isinstance(cell, dict) and cell.get("cell_type") == "code"
    ] if is_python(raw) else []
    program, nb_map = program_from_cells(code_cells)
    return Notebook(source=SourceText(text=program, encoding="utf-8", bom=False, digest=digest(data)), map=nb_map)


def program_from_cells(code_cells: list[tuple[int, str]]) -> tuple[str, NotebookMap]:
    """The program of a notebook's code cells, given as (index among all its cells,
    source) in order, and how it was built: shared by the files read from disk and
    the notebooks an editor sends to the language server."""
    token = hashlib.sha256("".join(text for _, text in code_cells).encode("utf-8", "surrogatepass")).hexdigest()[:12]
    nb_map = NotebookMap()
    parts: list[str] = []
    line = 1
    for position, (index, text) in enumerate(code_cells):
        masked = mask_cell(text, f"{token}-{index + 1}")
        added = not masked.text.endswith(("\n", "\r"))
        segment = masked.text + ("\n" if added and masked.text else "")
        count = len(_LINE_BREAK.findall(segment))
        error = _compile_error(segment, index + 1)
        if error is not None:
            nb_map.unparsable[index + 1] = error
            nb_map.left_out[index] = text
            segment = "\n" * count  # left out, in place: the other cells keep their lines
        else:
            nb_map.restore.update(masked.restore)
            nb_map.runnable.update(masked.runnable)
        nb_map.cells.append(CellSpan(index=index, first_line=line, line_count=count, added_newline=added))
        parts.append(segment)
        line += count
        if position < len(code_cells) - 1:
            boundary = f"# autograd-fix: cell boundary {token}-{index + 1}"
            nb_map.boundaries.append(boundary)
            parts.append(boundary + "\n")
            line += 1
    return "".join(parts), nb_map


def check_cells_compile(nb_map: NotebookMap, program: str) -> str | None:
    """The first code cell that is not valid Python on its own (as Jupyter runs it),
    as an error message, or None. Top-level `await` is allowed, as in IPython."""
    for span, segment in zip(nb_map.cells, nb_map.segments(program)):
        error = _compile_error(segment, span.number)
        if error is not None:
            return error
    return None


def _compile_error(segment: str, number: int) -> str | None:
    """Why cell `number` (its masked text) does not compile on its own, or None."""
    try:
        compile(segment, f"cell {number}", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except SyntaxError as error:
        return f"syntax error at cell {number}:{error.lineno or 1}:{error.offset or 1}: {error.msg}"
    except ValueError as error:
        return f"cell {number}: {error}"
    return None


def notebook_bytes(original: bytes, expected_digest: str, nb_map: NotebookMap, before: str, after: str) -> bytes:
    """The notebook `original` with the cells that `after` changed (compared with
    `before`, both programs of `nb_map`) rewritten, everything else kept.

    Raises SourceChangedError when `original` is not the notebook the programs were
    made from (it changed on disk since).
    """
    if digest(original) != expected_digest:
        raise SourceChangedError("changed on disk since it was read; not overwritten (run again)")
    text, raw = _parse(original)
    old, new = nb_map.cell_sources(before), nb_map.cell_sources(after)
    for index, source in new.items():
        if source == old[index]:
            continue
        cell = raw["cells"][index]
        cell["source"] = split_lines(source) if isinstance(cell.get("source"), list) else source
    _validate(raw)
    bom = codecs.BOM_UTF8 if original.startswith(codecs.BOM_UTF8) else b""
    return bom + _dump_like(raw, text).encode("utf-8")


def _dump_like(raw: dict[str, Any], original: str) -> str:
    """JSON of `raw` in the style of `original`: indentation, escaping, newlines."""
    indent_match = re.match(r"\{\r?\n([ \t]+)", original)
    indent: int | str | None = None
    if indent_match:
        whitespace = indent_match.group(1)
        indent = whitespace if "\t" in whitespace else len(whitespace)
    separators = (",", ": ") if indent is not None or '": ' in original else (",", ":")
    if indent is None and ", " in original:
        separators = (", ", separators[1])
    body = json.dumps(raw, indent=indent, ensure_ascii=original.isascii(), separators=separators)
    if "\r\n" in original:
        body = body.replace("\n", "\r\n")
    if original.endswith(("\n", "\r")):
        body += "\r\n" if original.endswith("\r\n") else "\n"
    return body


def _unified_diff(old: str, new: str, path: str) -> str:
    from autograd_fix.codemods.engine import unified_diff  # libcst: only once there is a diff to show

    return unified_diff(old, new, path)
