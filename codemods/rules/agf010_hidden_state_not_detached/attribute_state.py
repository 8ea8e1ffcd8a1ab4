"""Recurrent state an `nn.Module` keeps on itself across calls of `forward`.

`out, self.hidden = self.lstm(x, self.hidden)` inside `forward` carries the state from
one call to the next through an attribute; the training loop that runs backward every
batch is elsewhere (at module level, or in a `train(model, ...)` function the module
calls with an instance). When nothing detaches or re-initialises the attribute, the
second batch backpropagates into the first batch's freed graph
(pytorch/pytorch#2769). This finds those carries and the loop that proves them; the
rule decides how to detach.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.rules.agf010_hidden_state_not_detached.recurrent_state import unconditional_backward_index
from autograd_fix.codemods.semantic.answer import Answer
from autograd_fix.codemods.walk import SyntaxIndex, iter_descendants

#: calls that cut the graph of the state or rebuild it (`repackage_hidden` is the word-language-model helper)
_DETACH_METHODS = frozenset({"detach", "detach_"})
#: words of a method name that may reset state defined out of view (a base class's `reset()`,
#: `clear_memory`): a loop calling one on the model is given the benefit of the doubt
_RESET_WORDS = ("reset", "init", "clear", "hidden", "state", "memory", "repackage")
#: `nn.Module` methods those words match that reset nothing
_NOT_RESETS = frozenset({"state_dict", "load_state_dict"})


@dataclass
class AttributeCarry:
    """`..., self.<attribute> = call(..., self.<attribute>, ...)` at the top level of `forward`."""

    cls: cst.ClassDef
    forward: cst.FunctionDef
    line: cst.SimpleStatementLine
    statement: cst.Assign
    owner: str
    attribute: str
    #: the training loop that calls an instance and runs backward every iteration
    loop: cst.For | cst.While
    #: the values assigned to the attribute elsewhere in the class (`__init__`, `init_hidden`...)
    initial: tuple[cst.BaseExpression, ...]


def find_attribute_carries(
    module: cst.Module, imports: ImportIndex, module_classes: dict[str, Answer], syntax: SyntaxIndex | None = None
) -> list[AttributeCarry]:
    """Carries through `self.<attribute>` in a module class's `forward`, each with a
    training loop in this file that calls an instance without detaching or resetting it.
    `syntax`: the file's index, to find the classes without a walk of the tree."""
    found: list[AttributeCarry] = []
    if Answer.YES not in module_classes.values():
        return found  # no module class here: nothing keeps state on `self` across forwards
    for cls in syntax.find(module, cst.ClassDef) if syntax is not None else _classes(module):
        if module_classes.get(cls.name.value) is not Answer.YES:
            continue
        forward = next((s for s in cls.body.body if type(s) is cst.FunctionDef and s.name.value == "forward"), None)
        if forward is None or not forward.params.params:
            continue
        owner = forward.params.params[0].name.value
        for line, assign, attribute in _forward_carries(forward, owner):
            if _cut_in_class(cls, attribute):
                continue
            resets = _resetting_methods(cls, attribute, forward)
            defined = frozenset(m.name.value for m in cls.body.body if type(m) is cst.FunctionDef)
            loop = _training_loop(module, cls.name.value, attribute, resets, defined, imports)
            if loop is not None:
                found.append(
                    AttributeCarry(cls, forward, line, assign, owner, attribute, loop, _assigned_values(cls, attribute, assign))
                )
    return found


def _classes(module: cst.Module) -> list[cst.ClassDef]:
    return [n for n in iter_descendants(module) if type(n) is cst.ClassDef]


def _self_attribute(node: cst.BaseExpression, owner: str) -> str | None:
    if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == owner:
        return node.attr.value
    return None


def _forward_carries(forward: cst.FunctionDef, owner: str) -> list[tuple[cst.SimpleStatementLine, cst.Assign, str]]:
    """Top-level lines of forward that feed `self.<attribute>` into a call and store the
    call's result back on it; only when forward assigns the attribute nowhere else."""
    if type(forward.body) is not cst.IndentedBlock:
        return []
    found = []
    for line in forward.body.body:
        if not (type(line) is cst.SimpleStatementLine and len(line.body) == 1):
            continue
        assign = line.body[0]
        if not (type(assign) is cst.Assign and len(assign.targets) == 1 and type(assign.value) is cst.Call):
            continue
        target = assign.targets[0].target
        elements = [e.value for e in target.elements] if type(target) in (cst.Tuple, cst.List) else [target]
        stored = {a for e in elements if (a := _self_attribute(e, owner)) is not None}
        passed = {a for arg in assign.value.args if (a := _self_attribute(arg.value, owner)) is not None}
        for attribute in sorted(stored & passed):
            if _assignment_count(forward, owner, attribute) == 1:
                found.append((line, assign, attribute))
    return found


def _assignment_count(function: cst.CSTNode, owner: str, attribute: str) -> int:
    count = 0
    for node in iter_descendants(function):
        targets: list[cst.BaseExpression] = []
        if type(node) is cst.Assign:
            targets = [t.target for t in node.targets]
        elif type(node) in (cst.AugAssign, cst.AnnAssign):
            targets = [node.target]
        for target in targets:
            elements = [e.value for e in target.elements] if type(target) in (cst.Tuple, cst.List) else [target]
            count += sum(1 for e in elements if _self_attribute(e, owner) == attribute)
    return count


def _mentions_attribute(node: cst.CSTNode, attribute: str) -> bool:
    return any(type(n) is cst.Attribute and n.attr.value == attribute for n in iter_descendants(node))


def _cuts(node: cst.CSTNode) -> bool:
    """A detach (or a `repackage...` helper) is called somewhere in `node`."""
    for call in iter_descendants(node):
        if type(call) is not cst.Call:
            continue
        func = call.func
        name = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""
        if name in _DETACH_METHODS or "repackage" in name:
            return True
    return False


def _cut_in_class(cls: cst.ClassDef, attribute: str) -> bool:
    """Some statement of the class both mentions `.<attribute>` and detaches."""
    return any(
        type(n) is cst.SimpleStatementLine and _mentions_attribute(n, attribute) and _cuts(n)
        for n in iter_descendants(cls)
    )


def _resetting_methods(cls: cst.ClassDef, attribute: str, forward: cst.FunctionDef) -> frozenset[str]:
    """Methods other than `forward` that assign `self.<attribute>` (a `reset_state()`)."""
    names = set()
    for method in cls.body.body:
        if type(method) is cst.FunctionDef and method is not forward and method.params.params:
            owner = method.params.params[0].name.value
            if _assignment_count(method, owner, attribute):
                names.add(method.name.value)
    names.discard("__init__")
    return frozenset(names)


def _assigned_values(cls: cst.ClassDef, attribute: str, carry: cst.Assign) -> tuple[cst.BaseExpression, ...]:
    values = []
    for node in iter_descendants(cls):
        if type(node) is cst.Assign and node is not carry:
            for target in node.targets:
                if type(target.target) is cst.Attribute and target.target.attr.value == attribute:
                    values.append(node.value)
    return tuple(values)


def _instances(module: cst.Module, class_name: str) -> set[str]:
    """Names bound anywhere in the file to `ClassName(...)`."""
    names = set()
    for node in iter_descendants(module):
        if (
            type(node) is cst.Assign
            and type(node.value) is cst.Call
            and type(node.value.func) is cst.Name
            and node.value.func.value == class_name
        ):
            names |= {t.target.value for t in node.targets if type(t.target) is cst.Name}
    return names


def _receivers(module: cst.Module, function: cst.FunctionDef, instances: set[str]) -> set[str]:
    """Parameters of `function` that a call in this file passes an instance to."""
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    names = set()
    for call in iter_descendants(module):
        if not (type(call) is cst.Call and type(call.func) is cst.Name and call.func.value == function.name.value):
            continue
        for position, arg in enumerate(call.args):
            if not (type(arg.value) is cst.Name and arg.value.value in instances) or arg.star:
                continue
            if arg.keyword is not None:
                names.add(arg.keyword.value)
            elif position < len(params):
                names.add(params[position])
    return names


def _training_loop(
    module: cst.Module,
    class_name: str,
    attribute: str,
    resets: frozenset[str],
    defined: frozenset[str],
    imports: ImportIndex,
) -> cst.For | cst.While | None:
    """A loop of this file that runs backward in every iteration, calls an instance of
    the class (a name bound to `ClassName(...)`, or a function parameter some call passes
    one to), and neither touches `.<attribute>` nor calls a resetting method (one of the
    class's that assigns it, or one defined out of view whose name says it may)."""
    instances = _instances(module, class_name)
    if not instances:
        return None
    scopes: list[tuple[cst.CSTNode, set[str]]] = [(module, instances)]
    scopes += [
        (f, instances | _receivers(module, f, instances)) for f in iter_descendants(module) if type(f) is cst.FunctionDef
    ]
    for scope, models in scopes:
        for loop in _own_loops(scope):
            if type(loop.body) is not cst.IndentedBlock:
                continue
            if unconditional_backward_index(list(loop.body.body), imports) is None:
                continue
            if _mentions_attribute(loop.body, attribute) or _calls_any(loop.body, resets):
                continue
            if _calls_model(loop.body, models) and not _may_reset(loop.body, models, defined):
                return loop
    return None


def _own_loops(scope: cst.CSTNode) -> list[cst.For | cst.While]:
    """Loops of `scope`'s own code (not of nested functions or classes)."""
    nested = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
    body = scope.body if type(scope) is cst.FunctionDef else scope
    return [
        n
        for n in iter_descendants(body, prune=lambda n: isinstance(n, nested))
        if type(n) in (cst.For, cst.While)
    ]


def _calls_any(node: cst.CSTNode, methods: frozenset[str]) -> bool:
    return any(
        type(n) is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value in methods
        for n in iter_descendants(node)
    )


def _may_reset(node: cst.CSTNode, models: set[str], defined: frozenset[str]) -> bool:
    """`model.reset_states()` or the like, for a method the class does not define in view
    (inherited from a base out of this file): what it assigns is unknown."""
    for call in iter_descendants(node):
        if type(call) is cst.Call and type(call.func) is cst.Attribute:
            receiver, method = call.func.value, call.func.attr.value.lower()
            if call.func.attr.value in defined | _NOT_RESETS or not (type(receiver) is cst.Name and receiver.value in models):
                continue
            if any(word in method for word in _RESET_WORDS):
                return True
    return False


def _calls_model(node: cst.CSTNode, models: set[str]) -> bool:
    """`model(...)` or `model.forward(...)` for one of `models`."""
    for call in iter_descendants(node):
        if type(call) is not cst.Call:
            continue
        func = call.func
        if type(func) is cst.Attribute and func.attr.value == "forward":
            func = func.value
        if type(func) is cst.Name and func.value in models:
            return True
    return False
