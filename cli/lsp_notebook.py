"""Notebook documents in the language server: the cells an editor sends, as one program.

LSP 3.17 synchronises a notebook as a notebook document whose cells are text documents
of their own, each with its URI. A notebook's code cells run in one namespace, so they
are analysed as one program, built exactly as `autograd-fix notebook.ipynb` builds it
(`notebook.program_from_cells`: IPython lines masked, a cell that does not parse left
out in place). A finding is shown on the cell that holds it, at its line in that cell;
a fix of the program becomes edits of the cells it changes, found by splitting the
fixed program back into cells with the same map. Nothing here imports pygls.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from autograd_fix.cli.notebook import NotebookError, NotebookMap, program_from_cells
from autograd_fix.codemods.model import Finding, Span

#: the notebook types the server asks editors to synchronise (VS Code's and Jupyter's name)
NOTEBOOK_TYPE = "jupyter-notebook"


@dataclass(frozen=True)
class CodeCell:
    """One code cell as the editor sent it."""

    #: the cell's position among all the notebook's cells (markdown included), from 0
    index: int
    uri: str
    text: str


@dataclass(frozen=True)
class NotebookProgram:
    """A notebook version's code cells as one program, and the way back to the cells."""

    uri: str
    version: int | None
    cells: tuple[CodeCell, ...]
    program: str
    map: NotebookMap

    def cell(self, uri: str) -> CodeCell | None:
        return next((cell for cell in self.cells if cell.uri == uri), None)

    def in_cell(self, span: Span) -> tuple[CodeCell, Span] | None:
        """The cell that holds a program span, and the span within that cell; None when
        the span crosses a cell boundary (no rule reports such a span)."""
        if not self.cells:
            return None
        index, line = self.map.locate_span(span.line)
        end_index, end_line = self.map.locate_span(span.end_line)
        if index != end_index:
            return None
        cell = next((c for c in self.cells if c.index == index), None)
        if cell is None:
            return None
        return cell, replace(span, line=line, end_line=end_line)

    def program_line(self, cell: CodeCell, line: int) -> int:
        """The 1-based program line of 1-based `line` of `cell`."""
        return self.map.program_line(cell.index + 1, line)

    def findings_in(self, findings: list[Finding], uri: str) -> list[tuple[int, Finding, Span]]:
        """(index among `findings`, finding, its span within the cell) for each finding in
        the cell `uri`."""
        found = []
        for position, finding in enumerate(findings):
            located = self.in_cell(finding.span)
            if located is not None and located[0].uri == uri:
                found.append((position, finding, located[1]))
        return found

    def changed_cells(self, fixed_program: str) -> dict[str, tuple[str, str]] | None:
        """Cell URI -> (its text, its fixed text) for each cell the fix changes; None when
        the fixed program cannot be split back into these cells (the fix is then not
        offered, as `--diff` refuses to write such a notebook)."""
        try:
            sources = self.map.cell_sources(fixed_program)
        except NotebookError:
            return None
        changed = {}
        for cell in self.cells:
            fixed = sources.get(cell.index)
            if fixed is not None and fixed != cell.text:
                changed[cell.uri] = (cell.text, fixed)
        return changed


def notebook_program(uri: str, version: int | None, cells: list[CodeCell]) -> NotebookProgram:
    """The program of a notebook's code cells (given in notebook order)."""
    program, nb_map = program_from_cells([(cell.index, cell.text) for cell in cells])
    return NotebookProgram(uri=uri, version=version, cells=tuple(cells), program=program, map=nb_map)

