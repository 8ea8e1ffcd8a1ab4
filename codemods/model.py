"""Data types shared by the rules, the engine, the cli and the verification stage.

These types are the only thing `autograd_fix.verification` imports from the codemods, so
they stay plain: frozen dataclasses, no behaviour beyond small helpers.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable, Union

import libcst as cst


class Applicability(str, enum.Enum):
    """How much a fix may be trusted without a human look (Ruff's vocabulary)."""

    SAFE = "safe"
    UNSAFE = "unsafe"


Replacement = Union[cst.CSTNode, cst.FlattenSentinel, cst.RemovalSentinel]


@dataclass(frozen=True)
class Edit:
    """Replace one node of the parsed module.

    `replace` receives the node as it is after the engine applied any edits to its
    children in the same pass (libcst's `updated_node`), so nested fixes compose instead
    of one silently dropping the other.
    """

    target: cst.CSTNode
    replace: Callable[[cst.CSTNode], Replacement]


@dataclass(frozen=True)
class Fix:
    """A rewrite that resolves one finding."""

    applicability: Applicability
    edits: tuple[Edit, ...]
    description: str
    #: `import` statements the edits rely on, as source text (e.g. ``"import torch"``).
    required_imports: tuple[str, ...] = ()


@dataclass(frozen=True)
class Span:
    """1-based line, 1-based column (as editors count), end inclusive of the last char."""

    line: int
    column: int
    end_line: int
    end_column: int


@dataclass(frozen=True)
class Finding:
    """One occurrence of a rule's pattern in one file."""

    code: str
    name: str
    message: str
    span: Span
    fix: Fix | None = None
    #: later candidate fixes, in the rule's order of preference: verification tries `fix`
    #: first and each of these in turn while the previous one is rejected (AGF002: zero at
    #: the start of the iteration, then after the step); the static engine uses `fix` only
    alternatives: tuple[Fix, ...] = ()
    #: the node the finding points at; only meaningful while its module is alive.
    node: cst.CSTNode | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Example:
    """An inline rule example: VALID when `expected` is `None` and `reported` is False.

    INVALID examples are reported; `expected` holds the fixed source, or is `None` for a
    report-only finding.
    """

    source: str
    expected: str | None = None
    reported: bool = True
    #: apply unsafe fixes when checking this example.
    unsafe_fixes: bool = True
    #: file name the example pretends to live in (some rules look at it).
    filename: str = "example.py"


def valid(source: str, *, filename: str = "example.py") -> Example:
    """An example the rule must leave alone (no finding, byte-identical)."""
    return Example(source=source, expected=None, reported=False, filename=filename)


def invalid(source: str, expected: str | None = None, *, filename: str = "example.py") -> Example:
    """An example the rule must report; `expected` is the fixed source (None: report only)."""
    return Example(source=source, expected=expected, reported=True, filename=filename)
