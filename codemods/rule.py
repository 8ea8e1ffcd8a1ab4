"""The rule base class: one rule = one class in the package `codemods/rules/agfNNN_<pattern>/`.

A rule is a libcst `BatchableCSTVisitor`: the engine parses a file once and runs every
selected rule in a single traversal (`libcst.visit_batched`). Rules that need the whole
module first (a call graph, say) do their work in `visit_Module`.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.model import Applicability, Example, Finding, Fix, Span
from autograd_fix.codemods.positions import StatementPositions
from autograd_fix.codemods.prefilters import Prefilter, prefilter
from autograd_fix.codemods.semantic.model import SemanticModel
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, Vocabulary
from autograd_fix.codemods.torch_version import TorchVersion

if TYPE_CHECKING:
    from autograd_fix.codemods.project_index import ProjectIndex

DOC_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety", "Verification")


@dataclass(frozen=True)
class Contract:
    """What must hold between the original and the rewritten run of a patch.

    `checks` name probes the verification stage implements (see
    `autograd_fix.verification.contracts`); `description` is the human sentence shown
    by `--explain` and in verdicts.
    """

    description: str
    checks: tuple[str, ...]


@dataclass(frozen=True)
class RuleExamples:
    """A rule's examples: VALID ones it must leave alone, INVALID ones it must report (and fix)."""

    valid: tuple[Example, ...]
    invalid: tuple[Example, ...]


class RuleContext:
    """What a rule may know about the file it is looking at."""

    def __init__(
        self,
        path: str,
        module: cst.Module,
        target_torch: TorchVersion | None = None,
        roles: Vocabulary = DEFAULT_VOCABULARY,
        text: str | None = None,
        project: "ProjectIndex | None" = None,
    ) -> None:
        self.path = path
        self.module = module
        #: the oldest PyTorch the project supports (None: unknown, assume the newest);
        #: a fix must not rewrite to an API missing there
        self.target_torch = target_torch
        #: the project's role vocabulary: name tokens per role and configured factories
        self.roles = roles
        self.imports = ImportIndex.from_module(module)
        if project is not None:
            #: the run's project index, seen from this file (`codemods.project_index`)
            self.imports.project = project.view(path)
        #: the module's source, when the caller has it (spans are cheaper with it)
        self.text = text
        self._positions: StatementPositions | None = None
        self._semantic: SemanticModel | None = None

    @property
    def semantic(self) -> "SemanticModel":
        """The file's semantic model, built on first use and shared by every rule."""
        if self._semantic is None:
            self._semantic = SemanticModel(self.module, self.imports, self.roles)
        return self._semantic

    def span(self, node: cst.CSTNode) -> Span:
        """1-based line/column span of `node` (libcst's position; see `StatementPositions`)."""
        if self._positions is None:
            self._positions = StatementPositions(self.module, lambda: self.semantic.syntax, self.text)
        return self._positions.span(node)


@dataclass(frozen=True)
class SiteFix:
    """What `Rule.fix_at` builds for one site: the node reported, the message, the fix."""

    node: cst.CSTNode
    message: str
    fix: Fix


class Rule(cst.BatchableCSTVisitor):
    """Base class of all rules. Subclasses set the class attributes and report findings."""

    code: ClassVar[str]
    name: ClassVar[str]
    safety: ClassVar[Applicability]
    #: where some of the rule's fixes differ from `safety`, in a few words
    #: (AGF004: "unsafe where only a run can tell"); shown next to it in the rules table
    safety_note: ClassVar[str] = ""
    #: default message; `report` may pass a more specific one.
    message: ClassVar[str]
    contract: ClassVar[Contract]
    #: a registered rule's prefilter is declared in `codemods/prefilters.py` under its
    #: code (readable without importing the rule); these two are for a rule outside the
    #: registry (a test's): text tokens of which one must occur, and a regex that must
    #: also match somewhere in the text
    triggers: ClassVar[tuple[str, ...] | None] = None
    trigger_pattern: ClassVar[re.Pattern[str] | None] = None

    @classmethod
    def may_fire_on(cls, text: str) -> bool:
        """Prefilter only (never evidence): could this rule fire on `text` at all?"""
        if cls.triggers is None:
            return prefilter(cls.code).admits(text)
        return Prefilter(cls.triggers, cls.trigger_pattern).admits(text)

    def __init__(self, context: RuleContext) -> None:
        super().__init__()
        self.context = context
        self.findings: list[Finding] = []

    def report(
        self, node: cst.CSTNode, message: str | None = None, fix: Fix | None = None, alternatives: tuple[Fix, ...] = (),
    ) -> None:
        """Record a finding; `alternatives` are further candidate fixes after `fix`, in order."""
        self.findings.append(
            Finding(
                code=self.code,
                name=self.name,
                message=message or self.message,
                span=self.context.span(node),
                fix=fix,
                alternatives=alternatives if fix is not None else (),
                node=node,
            )
        )

    @classmethod
    def fix_at(cls, context: RuleContext, line: int) -> "SiteFix | None":
        """The rule's fix for a bug a run showed at `line` where the rule's own analysis
        was silent (`autograd-fix doctor`): the node to report, a message and the fix
        (always unsafe: the site is known, the evidence is the run's, verification
        decides). None when the rule cannot build a fix from the site alone; a rule
        without such a builder says why in `no_site_fix`."""
        return None

    #: why `fix_at` offers nothing for this rule (shown with the run's finding)
    no_site_fix: ClassVar[str] = "this rule's fix needs its own analysis of the code; none is built from a run's site alone"

    @classmethod
    def examples(cls) -> RuleExamples:
        """The rule's VALID and INVALID examples, kept in `examples.py` of the rule's package
        (`rules/agfNNN_<name>/examples.py`).

        The rule's code holds logic only; the docs generator and the parametrized example
        tests read the examples through here.
        """
        package = sys.modules[cls.__module__].__package__ or cls.__module__
        module = importlib.import_module(f"{package}.examples")
        return RuleExamples(valid=tuple(module.VALID), invalid=tuple(module.INVALID))

    @classmethod
    def documentation(cls) -> str:
        """The rule's docstring, dedented: the source of `--explain` and the README."""
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def safety_label(cls) -> str:
        """`safe`, or `safe (unsafe where ...)` for a rule whose fixes are mixed."""
        return f"{cls.safety.value} ({cls.safety_note})" if cls.safety_note else cls.safety.value

    @classmethod
    def summary(cls) -> str:
        """First paragraph of the 'What it does' section, on one line."""
        text = cls.documentation()
        match = re.search(r"## What it does\s*\n(.*?)(?:\n\s*\n|\Z)", text, re.S)
        first = match.group(1) if match else text.split("\n\n", 1)[0]
        return " ".join(first.split())

    @classmethod
    def missing_doc_sections(cls) -> list[str]:
        text = cls.documentation()
        return [section for section in DOC_SECTIONS if f"## {section}" not in text]
