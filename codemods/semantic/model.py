"""`SemanticModel`: one per file, built lazily, shared by every rule that looks at it.

A rule reaches it as `self.context.semantic` and asks questions of its parts; each part
is computed the first time a rule asks and then reused by the others, so a file pays for
an analysis only when some selected rule needs it, and never twice.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.semantic.autograd_function import ApplyCalls, CustomFunction, apply_calls, custom_functions
from autograd_fix.codemods.semantic.answer import Answer
from autograd_fix.codemods.semantic.callgraph import CallGraph
from autograd_fix.codemods.semantic.no_graph import NoGraph
from autograd_fix.codemods.semantic.nn_modules import module_class_name, module_classes
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, Role, Vocabulary
from autograd_fix.codemods.semantic.tracking import TrackingAnalysis
from autograd_fix.codemods.walk import SyntaxIndex

if TYPE_CHECKING:
    from autograd_fix.codemods.semantic.role_evidence import RoleDecision

#: what a role decided by evidence says of "is this value an nn.Module" (a criterion may be
#: `nn.MSELoss()`, a module, or `F.mse_loss`, a function: unknown)
_ROLE_ANSWERS = {
    Role.MODEL: Answer.YES,
    Role.OPTIMIZER: Answer.NO,
    Role.SCHEDULER: Answer.NO,
    Role.SCALER: Answer.NO,
    Role.LOADER: Answer.NO,
    Role.LOSS: Answer.NO,
    Role.INPUT: Answer.NO,
    Role.TARGET: Answer.NO,
    Role.STATE: Answer.NO,
    Role.DEVICE: Answer.NO,
    Role.BACKWARD_RUNNER: Answer.NO,
    Role.EVAL_DATA: Answer.NO,
}


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
        return custom_functions(self.module, self.imports, self.syntax)

    @cached_property
    def apply_calls(self) -> dict[str, ApplyCalls]:
        """How each custom Function's `.apply` is called in this file, by class name."""
        return apply_calls(self.module, self.custom_functions)

    def is_module(self, value: cst.BaseExpression, statement: cst.CSTNode) -> Answer:
        """Does `value` hold an `nn.Module` just before `statement` (a statement of this file)?

        By evidence only, never by how the name is spelt (`G_AB`, `netD`, `Enc1`):
        - a constructor: `nn.Linear(...)`, a same-file module class (`class_is_module`), a
          name or `self.X` the tracking analysis saw bound to one, or typed as an instance
          of a same-file class (`model = ActorCritic()`: that class's answer);
        - use: the scope's role evidence (`x.eval()`, `x.parameters()`, an alias of a
          model, an `nn.Module` annotation) says model; a certain other role (an
          optimizer, a loader, a loss value) says no.
        Anything else is UNKNOWN."""
        if type(value) is cst.Call:
            return self._constructs_module(value)
        name = dotted_name(value)
        if name is None:
            return Answer.UNKNOWN
        if self.tracking.built_module(value, statement):
            return Answer.YES
        graph = self.call_graph
        function = graph.instances.scope_of(statement) if graph.instances is not None else None
        if type(value) is cst.Name and graph.instances is not None:
            class_name = graph.instances.class_of(value.value, statement)
            if class_name is not None:
                return self.module_classes.get(class_name, Answer.UNKNOWN)
        scopes: list[cst.Module | cst.ClassDef | cst.FunctionDef] = []
        if function is not None:
            scopes.append(function)
            owner = graph.owner(function)
            if owner is not None and name.startswith("self."):
                scopes.append(owner)
        scopes.append(self.module)
        for scope in scopes:
            decision = self.roles_in(scope).get(name)
            if decision is not None and decision.certain:
                return _ROLE_ANSWERS.get(decision.role, Answer.UNKNOWN) if decision.role is not None else Answer.UNKNOWN
        return Answer.UNKNOWN

    def likely_module(self, value: cst.BaseExpression, statement: cst.CSTNode) -> bool:
        """`is_module`, with the tie-break a rule that must decide uses where the evidence
        says nothing: YES is a module, NO is none whatever the name says, and only an
        UNKNOWN falls to the tracking analysis's reading, which also counts a name of the
        module vocabulary (`model`, `encoder`, `criterion`) and a module's attributes
        (`model.fc`, `self.blocks[i]`)."""
        answer = self.is_module(value, statement)
        if answer is not Answer.UNKNOWN:
            return answer is Answer.YES
        return self.tracking.is_module(value, statement)

    def _constructs_module(self, call: cst.Call) -> Answer:
        qualified = self.imports.qualified_name(call.func)
        if qualified is not None:
            return module_class_name(qualified)
        callee = dotted_name(call.func)
        return self.module_classes.get(callee, Answer.UNKNOWN) if callee is not None else Answer.UNKNOWN

    def roles_in(self, scope: cst.Module | cst.ClassDef | cst.FunctionDef) -> dict[str, "RoleDecision"]:
        """The role of each name bound in `scope` (evidence first, names break ties), once per scope."""
        from autograd_fix.codemods.semantic.role_evidence import roles_in

        key = id(scope)
        if key not in self._scope_roles:
            self._scope_roles[key] = roles_in(scope, self.imports, self.roles, self.module, self.module_classes, self.syntax)
        return self._scope_roles[key]
