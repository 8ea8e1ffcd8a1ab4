"""Data types shared by the rules, the engine, the cli and the verification stage.

These types are the only thing `autograd_fix.verification` imports from the codemods, so
they stay plain: frozen dataclasses, no behaviour beyond small helpers.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Union

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
class TextEdit:
    """Replace `text[start:end]` of the file's text with `text` (Ruff's `Edit`).

    Offsets count characters of the decoded text (Python string indices), not bytes: the
    engine, the plans and the language server all hold the text as `str`. `start == end`
    is an insertion. An edit is plain data: it survives the tree it came from, pickles
    across the process pool and round-trips through JSON.
    """

    start: int
    end: int
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "text": self.text}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TextEdit":
        return cls(start=int(data["start"]), end=int(data["end"]), text=str(data["text"]))


@dataclass(frozen=True)
class TextFix:
    """A finding's fix as data: text edits on the text the rules ran on, made once.

    Rules build a `Fix` of node edits; right after the rule pass the engine turns it into
    this (`codemods.text_fixes.materialize`), and from then on everything (the static
    `--no-verify` rounds, `--diff`, verification's plans, the language server) applies
    it through one composition step (`codemods.text_fixes.compose`). Its edits are sorted
    and do not overlap; required imports are edits of their own at the import block.
    """

    applicability: Applicability
    edits: tuple[TextEdit, ...]
    description: str

    def to_json(self) -> dict[str, Any]:
        return {
            "applicability": self.applicability.value,
            "description": self.description,
            "edits": [edit.to_json() for edit in self.edits],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TextFix":
        return cls(
            applicability=Applicability(data["applicability"]),
            edits=tuple(TextEdit.from_json(edit) for edit in data["edits"]),
            description=str(data["description"]),
        )


#: a finding's fix: node edits as a rule builds it, text edits once the engine made it data
AnyFix = Union[Fix, TextFix]


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
    #: a rule's `Fix`; a `TextFix` in every finding the engine hands on (`check_source`)
    fix: AnyFix | None = None
    #: later candidate fixes, in the rule's order of preference: verification tries `fix`
    #: first and each of these in turn while the previous one is rejected (AGF002: zero at
    #: the start of the iteration, then after the step); the static engine uses `fix` only
    alternatives: tuple[AnyFix, ...] = ()
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
