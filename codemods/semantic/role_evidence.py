"""Roles of the names in a scope, decided by evidence first and by names only on ties.

Evidence, strongest first:
1. how a name is bound: constructors (`torch.optim.Adam(...)` -> optimizer,
   `torch.optim.lr_scheduler.*(...)` -> scheduler, `DataLoader(...)` -> loader,
   `nn.CrossEntropyLoss()` or a bare `F.cross_entropy` -> criterion, a call of `F.*_loss`
   or of a known criterion -> loss, other `nn.*` layers and same-file `nn.Module`
   subclasses -> model, the project's `<role>-objects` factories), annotations
   (`opt: torch.optim.Optimizer`, `model: nn.Module`), and aliases of such names
   (`model = model.to(device)`);
2. how it is used: `x.zero_grad()` together with `x.step()` -> optimizer, `x.parameters()`
   or `x.eval()` -> model, `x.backward()` -> loss, `for batch in x` -> loader.

A stronger kind of evidence wins over a weaker one (`model = nn.Sequential(...)` iterated
by `for layer in model` stays a model). Two roles from evidence of the same strength
make the name `Basis.CONFLICT`: its role is unknown, and a rule whose fix depends on it
must not guess. Only names with no evidence at all get a role from their tokens
(`roles.Vocabulary.role_by_name`), marked `Basis.NAME`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.names import WRAPPING_ITERATORS, last_segment
from autograd_fix.codemods.semantic.answer import Answer
from autograd_fix.codemods.semantic.nn_modules import module_class_name, module_class_names
from autograd_fix.codemods.semantic.nn_modules import module_classes as nn_module_classes
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, Role, Vocabulary
from autograd_fix.codemods.walk import SyntaxIndex, iter_descendants, node_types_of

if TYPE_CHECKING:
    from autograd_fix.codemods.rule import RuleContext

_LOADER_CLASSES = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
_SCALER_CLASSES = frozenset({"torch.cuda.amp.GradScaler", "torch.amp.GradScaler", "torch.cpu.amp.GradScaler"})
#: `torch.nn.functional` losses whose names do not end in `_loss`
_FUNCTIONAL_LOSSES = frozenset(
    {"cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div"}
)
#: calls on a value that return the same value, moved or switched (`model.to(device)`)
_SAME_VALUE_METHODS = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "double", "half", "bfloat16", "requires_grad_"})
#: methods only a module has (an optimizer has `zero_grad` too, but none of these)
_MODULE_METHODS = frozenset({"parameters", "named_parameters", "eval", "modules", "children", "named_modules", "forward"})


class Basis(Enum):
    """What a role decision rests on."""

    #: how the name is bound: a constructor, an annotation, a configured factory, an alias
    BOUND = "bound"
    #: how the value is used (`.zero_grad()` with `.step()`, `for batch in x`, `.backward()`)
    USE = "use"
    #: no evidence; the name's tokens broke the tie
    NAME = "name"
    #: evidence of equal strength for two roles: unknown
    CONFLICT = "conflict"


@dataclass(frozen=True)
class RoleDecision:
    """The role of one name (None when unknown) and why."""

    role: Role | None
    basis: Basis
    why: str

    @property
    def certain(self) -> bool:
        """Decided by evidence (not by a name, not in conflict)."""
        return self.basis in (Basis.BOUND, Basis.USE)


_BINDING, _USE = 0, 1


def roles_in(
    scope: cst.Module | cst.ClassDef | cst.FunctionDef,
    imports: ImportIndex,
    vocabulary: Vocabulary = DEFAULT_VOCABULARY,
    module: cst.Module | None = None,
    classes: Mapping[str, Answer] | None = None,
    syntax: SyntaxIndex | None = None,
) -> dict[str, RoleDecision]:
    """Role decisions for the names bound or used in `scope` (dotted for `self.opt`).

    A class scope reads every method (`self.optimizer = Adam(...)` in `__init__`, its
    `.step()` in `train_step`); a function or module scope stops at nested definitions.
    `module` (the file) tells which same-file classes are modules (`classes`: the
    file's answers, `SemanticModel.module_classes`, computed here when not given); a
    `Module` scope is its own. Names without evidence whose tokens name no role are left out.
    `syntax`: the file's index, which the scope's nodes are read off when given.
    """
    file = module if module is not None else scope
    if classes is None:
        classes = nn_module_classes(file, imports) if type(file) is cst.Module else {}
    collector = _Collector(imports, vocabulary, module_class_names(classes), syntax)
    if type(scope) is cst.FunctionDef:
        collector.parameters(scope.params)
    collector.collect(scope.body if type(scope) is not cst.Module else scope, type(scope) is cst.ClassDef)
    return collector.decisions()


def scope_roles(context: "RuleContext", scope: cst.CSTNode) -> dict[str, RoleDecision]:
    """`roles_in` for a function, class or module scope of the context's file, with the
    project's vocabulary, computed once per scope and shared by every rule; other scopes
    (a lambda) have no decisions."""
    if type(scope) not in (cst.Module, cst.ClassDef, cst.FunctionDef):
        return {}
    return context.semantic.roles_in(scope)


def model_names(decisions: dict[str, RoleDecision]) -> frozenset[str]:
    """Names the evidence says hold a model (a module constructor, a same-file
    `nn.Module` subclass, `.eval()` / `.parameters()` use), however they are spelt
    (`G_AB`, `Enc1`, `netD`)."""
    return frozenset(name for name, decision in decisions.items() if decision.role is Role.MODEL and decision.certain)


def bound_as(decisions: dict[str, RoleDecision], name: str | None, role: Role) -> bool:
    """Does the binding of `name` (a constructor, annotation or configured factory, not
    its use) say it has `role`?"""
    decision = decisions.get(name) if name is not None else None
    return decision is not None and decision.basis is Basis.BOUND and decision.role is role


#: scopes `_Collector.collect` does not enter (a function too, below a function or module)
_NESTED_SCOPES = frozenset(node_types_of((cst.ClassDef, cst.Lambda)))
#: the nodes `_Collector.collect` reads evidence from (a method is read through its body)
_EVIDENCE_NODES = frozenset(node_types_of((cst.Assign, cst.AnnAssign, cst.Call, cst.For, cst.CompFor)))


class _Collector:
    """Evidence per name, in two strengths (`_BINDING`, `_USE`)."""

    def __init__(self, imports: ImportIndex, vocabulary: Vocabulary, classes: frozenset[str],
                 syntax: SyntaxIndex | None = None) -> None:
        self.imports = imports
        self.descendants = syntax.descendants if syntax is not None else iter_descendants
        self.vocabulary = vocabulary
        self.classes = classes
        self.evidence: dict[str, dict[int, dict[Role, str]]] = {}
        self.methods: dict[str, set[str]] = {}
        self.mentioned: list[str] = []

    def add(self, name: str, strength: int, role: Role, why: str) -> None:
        self.evidence.setdefault(name, {}).setdefault(strength, {}).setdefault(role, why)
        self.mention(name)

    def mention(self, name: str) -> None:
        if name not in self.evidence:
            self.evidence[name] = {}
        self.mentioned.append(name)

    def parameters(self, params: cst.Parameters) -> None:
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            self.mention(param.name.value)
            if param.annotation is not None:
                self.annotated(param.name.value, param.annotation.annotation)

    def annotated(self, name: str, annotation: cst.BaseExpression) -> None:
        role = self.annotation_role(annotation)
        if role is not None:
            self.add(name, _BINDING, role, "annotation")

    def collect(self, root: cst.CSTNode, into_methods: bool) -> None:
        # exact type tests (these node classes have no subclasses): `isinstance` against
        # libcst's ABC-based classes costs a Python-level call per miss, on every node
        pruned = _NESTED_SCOPES if into_methods else _NESTED_SCOPES | {cst.FunctionDef}

        def prune(node: cst.CSTNode) -> bool:
            return type(node) in pruned

        for node in self.descendants(root, prune):
            kind = type(node)
            if kind not in _EVIDENCE_NODES:
                continue
            if kind is cst.Assign:
                for target in node.targets:
                    self.bound(target.target, node.value)
            elif kind is cst.AnnAssign:
                name = dotted_name(node.target)
                if name is not None:
                    self.annotated(name, node.annotation.annotation)
                if node.value is not None:
                    self.bound(node.target, node.value)
            elif kind is cst.Call:
                self.called(node)
            elif kind is cst.For or kind is cst.CompFor:
                iterated = iterated_name(node.iter)
                if iterated is not None:
                    self.add(iterated, _USE, Role.LOADER, "iterated by a for loop")

    def bound(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        name = dotted_name(target)
        if name is None:
            return
        self.mention(name)
        found = self.value_role(value)
        if found is not None:
            self.add(name, _BINDING, found[0], found[1])

    def called(self, call: cst.Call) -> None:
        if type(call.func) is not cst.Attribute:
            return
        receiver = dotted_name(call.func.value)
        if receiver is None or self.imports.qualified_name(call.func.value) is not None:
            return  # not a value of this scope (`torch.optim.Adam(...)`)
        method = call.func.attr.value
        self.methods.setdefault(receiver, set()).add(method)
        self.mention(receiver)
        if method == "backward" and not any(argument.keyword is None for argument in call.args):
            self.add(receiver, _USE, Role.LOSS, ".backward() is called on it")
        elif method == "backward" and call.args and type(call.args[0].value) in (cst.Name, cst.Attribute):
            loss = dotted_name(call.args[0].value)
            if loss is not None:
                self.add(loss, _USE, Role.LOSS, f"{receiver}.backward() runs its backward")

    # -- what a value is --------------------------------------------------------------
    def value_role(self, value: cst.BaseExpression) -> tuple[Role, str] | None:
        if type(value) is cst.Call:
            return self.call_role(value)
        qualified = self.imports.qualified_name(value)
        if qualified is not None and is_functional_loss(qualified):
            return Role.CRITERION, f"{qualified} (a loss function)"
        alias = dotted_name(value)
        if alias is not None and alias in self.evidence:
            role = self.binding_role(alias)
            if role is not None:
                return role, f"an alias of {alias}"
        return None

    def call_role(self, call: cst.Call) -> tuple[Role, str] | None:
        qualified = self.imports.qualified_name(call.func)
        configured = self.vocabulary.object_role(qualified)
        if configured is not None:
            return configured, f"built by {qualified} (configured)"
        if qualified is not None:
            role = _constructed(qualified)
            if role is not None:
                return role, f"built by {qualified}"
        if type(call.func) is cst.Name and call.func.value in self.classes:
            role = Role.CRITERION if call.func.value.endswith("Loss") else Role.MODEL
            return role, f"an instance of the nn.Module subclass {call.func.value}"
        if type(call.func) is cst.Attribute and call.func.attr.value in _SAME_VALUE_METHODS:
            return self.value_role(call.func.value)
        callee = dotted_name(call.func)
        if callee is not None and callee in self.evidence and self.binding_role(callee) is Role.CRITERION:
            return Role.LOSS, f"returned by the criterion {callee}"
        return None

    def binding_role(self, name: str) -> Role | None:
        roles = self.evidence.get(name, {}).get(_BINDING, {})
        return next(iter(roles)) if len(roles) == 1 else None

    def annotation_role(self, annotation: cst.BaseExpression) -> Role | None:
        if type(annotation) is cst.Subscript and last_segment(annotation.value) == "Optional" and annotation.slice:
            element = annotation.slice[0].slice
            return self.annotation_role(element.value) if type(element) is cst.Index else None
        qualified = self.imports.qualified_name(annotation)
        configured = self.vocabulary.object_role(qualified)
        if configured is not None:
            return configured
        if type(annotation) is cst.Name and annotation.value in self.classes:
            return Role.CRITERION if annotation.value.endswith("Loss") else Role.MODEL
        return _constructed(qualified) if qualified is not None else None

    # -- decisions --------------------------------------------------------------------
    def decisions(self) -> dict[str, RoleDecision]:
        for name, methods in self.methods.items():
            if {"zero_grad", "step"} <= methods:
                self.add(name, _USE, Role.OPTIMIZER, "both .zero_grad() and .step() are called on it")
            module_methods = methods & _MODULE_METHODS
            if module_methods:
                self.add(name, _USE, Role.MODEL, f".{min(module_methods)}() is called on it")
        result: dict[str, RoleDecision] = {}
        for name in dict.fromkeys(self.mentioned):
            decision = self.decide(name)
            if decision is not None:
                result[name] = decision
        return result

    def decide(self, name: str) -> RoleDecision | None:
        for strength, basis in ((_BINDING, Basis.BOUND), (_USE, Basis.USE)):
            roles = self.evidence[name].get(strength, {})
            if len(roles) == 1:
                role, why = next(iter(roles.items()))
                return RoleDecision(role, basis, why)
            if len(roles) > 1:
                return RoleDecision(None, Basis.CONFLICT, "; ".join(f"{r.value}: {w}" for r, w in roles.items()))
        role = self.vocabulary.role_by_name(name)
        return RoleDecision(role, Basis.NAME, f"named {name!r}") if role is not None else None


def _constructed(qualified: str) -> Role | None:
    """The role of what calling (or an annotation naming) `qualified` gives."""
    last = qualified.rsplit(".", 1)[-1]
    if qualified.startswith("torch.optim.lr_scheduler."):
        return Role.SCHEDULER
    if qualified.startswith("torch.optim.") and last[:1].isupper():
        return Role.OPTIMIZER
    if qualified in _LOADER_CLASSES:
        return Role.LOADER
    if qualified in _SCALER_CLASSES:
        return Role.SCALER
    if qualified == "torch.device":
        return Role.DEVICE
    if qualified.startswith("torch.nn.functional."):
        return Role.LOSS if is_functional_loss(qualified) else None
    if module_class_name(qualified) is Answer.YES and last not in {"ParameterList", "ParameterDict"}:
        return Role.CRITERION if last.endswith("Loss") or last == "_Loss" else Role.MODEL
    return None


def is_functional_loss(qualified: str) -> bool:
    """`torch.nn.functional.mse_loss`, `...cross_entropy`: a loss function of torch's."""
    last = qualified.rsplit(".", 1)[-1]
    return qualified.startswith("torch.nn.functional.") and (last.endswith("_loss") or last in _FUNCTIONAL_LOSSES)


def iterated_name(iterable: cst.BaseExpression) -> str | None:
    """`loader` in `for b in loader`, `enumerate(tqdm(loader))`; None for anything else."""
    while type(iterable) is cst.Call and last_segment(iterable.func) in WRAPPING_ITERATORS and iterable.args:
        iterable = iterable.args[0].value
    return dotted_name(iterable) if type(iterable) in (cst.Name, cst.Attribute) else None
