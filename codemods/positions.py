"""Line/column spans of nodes, from the code of one top-level statement at a time.

libcst computes positions with a codegen pass over the whole file. A file with findings
usually has one or two of them, so `StatementPositions` generates only the top-level
statement that holds a node, and places it in the file by the line Python's own parser
(`ast`, in C) gives that statement. The result is libcst's position of the node, as
`PositionProvider` over the whole module would give it; whenever the file and its `ast`
do not line up statement for statement (or `ast` cannot parse it), the whole-module
positions are used instead.
"""

from __future__ import annotations

import ast
import itertools
import warnings
from typing import Callable

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from autograd_fix.codemods.model import Span
from autograd_fix.codemods.walk import SyntaxIndex


class _PositionsWrapper(MetadataWrapper):
    """A metadata wrapper for positions only.

    libcst resolves a provider that is not batchable (positions come from one codegen
    pass) and then runs a batched traversal of the whole tree for the batchable providers
    that are left, even when none are. With no visitors there is nothing to traverse for.
    """

    def visit_batched(self, visitors, before_visit=None, after_leave=None):  # type: ignore[no-untyped-def]
        visitors = list(visitors)
        if not visitors and before_visit is None and after_leave is None:
            return self.module
        return super().visit_batched(visitors, before_visit, after_leave)


def positions_of(module: cst.Module) -> dict[cst.CSTNode, CodeRange]:
    """libcst's positions of every node of `module` (one codegen pass)."""
    return dict(_PositionsWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))  # type: ignore[arg-type]


class StatementPositions:
    """Spans of the nodes of one parsed file, computed lazily, statement by statement."""

    def __init__(self, module: cst.Module, syntax: Callable[[], SyntaxIndex], text: str | None = None) -> None:
        """`text` is `module`'s source (without it, whole-module positions are used:
        generating the text would cost the codegen this class saves)."""
        self.module = module
        self.text = text
        self._syntax = syntax
        self._first_lines: list[int] | None = None
        self._statements: dict[int, tuple[dict[cst.CSTNode, CodeRange], int]] = {}
        self._whole: dict[cst.CSTNode, CodeRange] | None = None

    def span(self, node: cst.CSTNode) -> Span:
        position, offset = self._position(node)
        start, end = position.start, position.end
        return Span(start.line + offset, start.column + 1, end.line + offset, end.column)

    def _position(self, node: cst.CSTNode) -> tuple[CodeRange, int]:
        first_lines = self._statement_lines()
        if first_lines is not None:
            syntax = self._syntax()
            for index, statement in enumerate(self.module.body):
                if syntax.contains(statement, node):
                    positions, offset = self._statement(index, statement, first_lines[index])
                    if node in positions:
                        return positions[node], offset
                    break
        if self._whole is None:
            self._whole = positions_of(self.module)
        return self._whole[node], 0

    def _statement(self, index: int, statement: cst.BaseStatement, line: int) -> tuple[dict[cst.CSTNode, CodeRange], int]:
        """The positions within the statement generated alone, and the line offset that
        puts them where the statement is in the file."""
        if index not in self._statements:
            alone = self.module.with_changes(header=(), body=(statement,), footer=())
            positions = positions_of(alone)
            first = statement.decorators[0] if type(statement) in (cst.FunctionDef, cst.ClassDef) and statement.decorators else statement
            self._statements[index] = (positions, line - positions[first].start.line)
        return self._statements[index]

    def _statement_lines(self) -> list[int] | None:
        """The first line of each top-level statement (its first decorator's, for a
        decorated definition), from `ast`; None when the two parsers do not agree on the
        statements."""
        if self._first_lines is None:
            self._first_lines = (_first_lines(self.module, self.text) if self.text is not None else None) or []
        return self._first_lines or None


def _first_lines(module: cst.Module, text: str) -> list[int] | None:
    try:
        with warnings.catch_warnings():  # the user's odd literals are theirs to hear about (see compile_quietly)
            warnings.simplefilter("ignore")
            parsed = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines: list[int] = []
    position = 0
    for statement in module.body:
        if position >= len(parsed.body):
            return None
        first = parsed.body[position]
        decorators = getattr(first, "decorator_list", None)
        lines.append(min([first.lineno, *(d.lineno for d in decorators or ())]))
        position += len(statement.body) if type(statement) is cst.SimpleStatementLine else 1
    return lines if position == len(parsed.body) else None


def top_level_offsets(module: cst.Module, text: str) -> list[int] | None:
    """Where each top-level node of `module` (its header lines, statements, footer
    lines, in that order) starts in `text`, its source, with `len(text)` last; None
    where the two cannot be lined up this way (no trailing newline, a lone `\r` line
    break, `ast` and libcst disagreeing on the statements, lines out of order).

    A top-level node's code is whole lines: its leading blank and comment lines (one
    line each, the first decorator's own included), then the statement from the line
    Python's parser gives its first token (`_first_lines`). The offsets are what the
    lines say, not proof: `engine.StatementCode` checks a node's generated code against
    the text between its offsets wherever the result depends on them."""
    if not module.has_trailing_newline or not text.endswith("\n") or text.count("\r") != text.count("\r\n"):
        return None
    first_lines = _first_lines(module, text)
    if first_lines is None:
        return None
    line_starts = [0, *itertools.accumulate(len(line) + 1 for line in text.split("\n"))]
    total = len(line_starts) - 2  # the text ends with "\n": its last split piece is empty
    lines = list(range(1, len(module.header) + 1))
    for statement, first in zip(module.body, first_lines):
        leading = len(statement.leading_lines)
        decorators = getattr(statement, "decorators", ())
        if decorators:
            leading += len(decorators[0].leading_lines)
        lines.append(first - leading)
    lines += range(total - len(module.footer) + 1, total + 1)
    if (lines and lines[0] != 1) or any(b <= a for a, b in zip(lines, lines[1:])) or (lines and lines[-1] > total):
        return None
    return [line_starts[line - 1] for line in lines] + [len(text)]
