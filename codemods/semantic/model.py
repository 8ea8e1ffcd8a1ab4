"""`SemanticModel`: one per file, built lazily, shared by every rule that looks at it.

A rule reaches it as `self.context.semantic` and asks questions of its parts; each part
is computed the first time a rule asks and then reused by the others, so a file pays for
an analysis only when some selected rule needs it, and never twice.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.semantic.autograd_function import ApplyCalls, CustomFunction, apply_calls, custom_functions
from autograd_fix.codemods.semantic.answer import Answer
from autograd_fix.codemods.semantic.callgraph import CallGraph
from autograd_fix.codemods.semantic.no_graph import NoGraph
from autograd_fix.codemods.semantic.nn_modules import module_classes
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, Vocabulary
from autograd_fix.codemods.semantic.tracking import TrackingAnalysis
from autograd_fix.codemods.walk import SyntaxIndex

if TYPE_CHECKING:
    from autograd_fix.codemods.semantic.role_evidence import RoleDecision


class SemanticModel:
    """The questions rules ask about one parsed file."""

    def __init__(self, module: cst.Module, imports: ImportIndex, roles: Vocabulary = DEFAULT_VOCABULARY) -> None:
        self.module = module
        self.imports = imports
        #: the project's role vocabulary (name tokens per role, configured factories)
        self.roles = roles
        self._scope_roles: dict[int, dict[str, RoleDecision]] = {}

    @cached_property
    def syntax(self) -> SyntaxIndex:
        """The tree's nodes laid out once in walk order: searches and walks of any part of
        the file read slices of it instead of traversing the tree again."""
        return SyntaxIndex(self.module)

    @cached_property
    def module_classes(self) -> dict[str, Answer]:
        """Is each class of the file an `nn.Module`? (yes / no / unknown, by evidence)"""
        return module_classes(self.module, self.imports, self.syntax)

    @cached_property
    def call_graph(self) -> CallGraph:
        """Same-file functions, callers, grad mode and gradient use through calls."""
        return CallGraph.build(self.module, self.imports, self.syntax, self.module_classes)

    @cached_property
    def no_graph(self) -> NoGraph:
        """Which names and expressions certainly carry no graph (indices, cuts, their helpers)."""
        return NoGraph(self.module, self.imports, self.call_graph)

    @cached_property
    def tracking(self) -> TrackingAnalysis:
        """Which tensors require grad at each statement, what autograd saved, module values."""
        return TrackingAnalysis.build(self.module, self.imports, self.roles, lambda: self.call_graph, self.syntax)

    @cached_property
    def custom_functions(self) -> list[CustomFunction]:
        """The file's `torch.autograd.Function` subclasses."""
        return custom_functions(self.module, self.imports)

    @cached_property
    def apply_calls(self) -> dict[str, ApplyCalls]:
        """How each custom Function's `.apply` is called in this file, by class name."""
        return apply_calls(self.module, self.custom_functions)

    def roles_in(self, scope: cst.Module | cst.ClassDef | cst.FunctionDef) -> dict[str, "RoleDecision"]:
        """The role of each name bound in `scope` (evidence first, names break ties), once per scope."""
        from autograd_fix.codemods.semantic.role_evidence import roles_in

        key = id(scope)
        if key not in self._scope_roles:
            self._scope_roles[key] = roles_in(scope, self.imports, self.roles, self.module, self.module_classes)
        return self._scope_roles[key]
