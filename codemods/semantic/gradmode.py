"""Shared facts about grad mode: is a scope already under `no_grad`, does it use gradients?

Several rules must stay silent where autograd is off (`no_grad`, `inference_mode`,
`set_grad_enabled(False)`) or where the code needs gradients (`.backward(`,
`torch.autograd.grad`, `torch.func`, `.grad` reads, optimizer steps). Both answers come
from qualified names, so aliases (`import torch as T`, `from torch import no_grad`) work.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from autograd_fix.codemods.expressions import is_false
from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.names import name_tokens
from autograd_fix.codemods.semantic.graph_breaks import VARIABLE_NAMES
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, NON_OPTIMIZER_STEPPER_TOKENS, Role, Vocabulary
from autograd_fix.codemods.walk import SyntaxIndex, find_all, walk

from autograd_fix.codemods.torch_api import NO_GRAD_NAMES, SET_GRAD_ENABLED_NAMES  # the rules ask this module
ENABLE_GRAD_NAMES = frozenset({"torch.enable_grad", "torch.autograd.enable_grad", "torch.autograd.grad_mode.enable_grad"})

#: method calls that only make sense when gradients are wanted
GRAD_METHODS = frozenset(
    {"backward", "manual_backward", "zero_grad", "requires_grad_", "retain_grad", "register_hook", "grad"}
)
#: attributes whose reads or writes mean the code cares about gradients
GRAD_ATTRIBUTES = frozenset({"grad", "grad_fn", "is_leaf", "_grad"})
#: attributes that only mean gradient use when written: `print(x.requires_grad)` or
#: `assert not out.requires_grad` inspects a flag, it computes no gradient
GRAD_FLAGS = frozenset({"requires_grad"})
#: receivers of `.step()` that are not optimizers (schedulers step on metrics)


def disables_grad(expression: cst.BaseExpression, imports: ImportIndex) -> bool:
    """True for `torch.no_grad()`, `torch.no_grad`, `inference_mode()`, `set_grad_enabled(False)`,
    and for the project's own grad-disabling decorators and context managers
    (`@smart_inference_mode()` defined in another file) where the run built a project
    index (`imports.project`; issue 18, F4).

    `inference_mode(False)` and `set_grad_enabled(<anything but False>)` do not count. A
    name that resolves into torch is decided by torch's names alone: a project cannot
    redefine `torch.no_grad`.
    """
    if type(expression) is cst.Call:
        name = imports.qualified_name(expression.func)
        if name in NO_GRAD_NAMES:
            if name.endswith("inference_mode") and expression.args and is_false(expression.args[0].value):
                return False
            return True
        if name in SET_GRAD_ENABLED_NAMES:
            return bool(expression.args) and is_false(expression.args[0].value)
    else:
        name = imports.qualified_name(expression)
        if name in NO_GRAD_NAMES:
            return True
    if imports.project is None or (name is not None and name.split(".", 1)[0] == "torch"):
        return False
    return imports.project.disables_grad(expression)


def enables_grad(expression: cst.BaseExpression, imports: ImportIndex) -> bool:
    """True for `enable_grad()` and `set_grad_enabled(x)` with x not literally False."""
    target = expression.func if type(expression) is cst.Call else expression
    name = imports.qualified_name(target)
    if name in ENABLE_GRAD_NAMES:
        return True
    if name in SET_GRAD_ENABLED_NAMES and type(expression) is cst.Call:
        return not (expression.args and is_false(expression.args[0].value))
    return False


def with_disables_grad(node: cst.With, imports: ImportIndex) -> bool:
    return any(disables_grad(item.item, imports) for item in node.items)


def function_disables_grad(node: cst.FunctionDef, imports: ImportIndex) -> bool:
    return any(disables_grad(decorator.decorator, imports) for decorator in node.decorators)


def is_optimizer_step(call: cst.Call, vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> bool:
    """`optimizer.step()`, `scaler.step(opt)`, `self.opt.step()`; not `scheduler.step()`
    (`roles.NON_OPTIMIZER_STEPPER_TOKENS`, and the project's scheduler names)."""
    if not (type(call.func) is cst.Attribute and call.func.attr.value == "step"):
        return False
    receiver = dotted_name(call.func.value)
    if receiver is None:
        return True  # unknown receiver: assume the worst (fail closed)
    tokens = set(name_tokens(receiver.replace(".", "_")))
    return not tokens & (NON_OPTIMIZER_STEPPER_TOKENS | vocabulary.tokens(Role.SCHEDULER))


@dataclass
class GradUse:
    """What in a subtree uses gradients, and which same-file functions it calls."""

    direct: list[cst.CSTNode] = field(default_factory=list)
    #: names of called functions (`foo`) and methods on self (`self.foo`)
    calls: set[str] = field(default_factory=set)


class GradUseFinder(cst.CSTVisitor):
    """Collects gradient evidence in a subtree (nested defs included: fail closed)."""

    def __init__(self, imports: ImportIndex) -> None:
        super().__init__()
        self.imports = imports
        self.result = GradUse()

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.imports.qualified_name(node.func)
        if qualified is not None and (
            qualified.startswith(("torch.autograd.", "torch.func.", "functorch"))
            and qualified not in NO_GRAD_NAMES
            and qualified not in SET_GRAD_ENABLED_NAMES
            and not qualified.startswith("torch.autograd.Function")
            and qualified not in VARIABLE_NAMES  # `Variable(x)` takes no gradient; `requires_grad=True` is seen below
        ):
            self.result.direct.append(node)
        elif enables_grad(node, self.imports):
            self.result.direct.append(node)
        elif type(node.func) is cst.Attribute:
            method = node.func.attr.value
            if method in GRAD_METHODS or (method == "step" and is_optimizer_step(node)):
                self.result.direct.append(node)
        for argument in node.args:
            if argument.keyword is not None and argument.keyword.value == "requires_grad" and not is_false(argument.value):
                self.result.direct.append(node)
        name = dotted_name(node.func)
        if name is not None:
            self.result.calls.add(name)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in GRAD_ATTRIBUTES:
            self.result.direct.append(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._flag_written(target.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._flag_written(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._flag_written(node.target)

    def _flag_written(self, target: cst.BaseExpression) -> None:
        """`p.requires_grad = True` (or a tuple of such targets) asks for gradients."""
        if type(target) in (cst.Tuple, cst.List):
            for element in target.elements:
                self._flag_written(element.value)
        elif type(target) is cst.Attribute and target.attr.value in GRAD_FLAGS:
            self.result.direct.append(target)


def find_grad_use(node: cst.CSTNode, imports: ImportIndex, syntax: SyntaxIndex | None = None) -> GradUse:
    finder = GradUseFinder(imports)
    (syntax.walk if syntax is not None else walk)(node, finder)
    return finder.result


def changes_grad_mode(node: cst.CSTNode, imports: ImportIndex, syntax: SyntaxIndex | None = None) -> bool:
    """Does `node` hold a `with` that disables grad, or a `set_grad_enabled(False)`
    statement? The author then handles grad mode there; a rule should not add to it."""
    for child in (syntax.find if syntax else find_all)(node, (cst.With, cst.Call)):
        if type(child) is cst.With and with_disables_grad(child, imports):  # type: ignore[arg-type]
            return True
        if type(child) is cst.Call and disables_grad(child, imports):  # type: ignore[arg-type]
            if imports.qualified_name(child.func) != "torch.no_grad":
                return True
    return False
