"""Which values in a class or function are modules (or constants), read from how they are built.

`self.fc = nn.Linear(...)` or `self.layers = [Layer(d, e) for ...]` in `__init__` makes
`self.fc` / `self.layers` modules (or containers of modules), and a loop over such a
container binds a module: `for layer in self.layers: h = layer(h)` is a forward pass
though no name says "model". Constructors are recognised by qualified name (`torch.nn.*`)
or as classes of the same file that are modules.
"""

from __future__ import annotations

from typing import Callable

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.names import last_segment
from autograd_fix.codemods.semantic.answer import Answer
from autograd_fix.codemods.semantic.nn_modules import module_class_name
from autograd_fix.codemods.walk import SyntaxIndex, find_all, iter_descendants


def _nested_scope(node: cst.CSTNode) -> bool:
    return type(node) in (cst.FunctionDef, cst.ClassDef)


def module_attributes(
    node: cst.ClassDef, module_classes: set[str], imports: ImportIndex, syntax: SyntaxIndex | None = None
) -> frozenset[str]:
    """`self.X` attributes a class's `__init__` builds from modules: `self.fc = nn.Linear(...)`,
    `self.layers = self.layers + [Layer(d, e).to(device)]`, `nn.ModuleList(...)`; and
    containers whose items the class puts in eval or train mode (`self.model[key].eval()`).
    (The class's nodes are read off the file's index `syntax` when given.)"""
    find = syntax.find if syntax is not None else find_all
    found: set[str] = set()
    inits = [s for s in node.body.body if type(s) is cst.FunctionDef and s.name.value == "__init__"]
    assignments = (cst.Assign, cst.AugAssign, cst.AnnAssign)
    for statement in (n for init in inits for n in find(init.body, assignments, skip=(cst.FunctionDef, cst.ClassDef))):
        if statement.value is None:  # type: ignore[attr-defined]
            continue
        targets = [t.target for t in statement.targets] if type(statement) is cst.Assign else [statement.target]
        names = [dotted_name(target) for target in targets]
        attributes = [name for name in names if name is not None and name.startswith("self.") and name.count(".") == 1]
        if attributes and builds_module(statement.value, module_classes, imports):
            found.update(attributes)
    return frozenset(found | _mode_switched_containers(node, find))


#: nn.Module's mode switches: only a module's items answer them
_MODE_METHODS = frozenset({"eval", "train"})


def _mode_switched_containers(node: cst.ClassDef, find: Callable[..., list[cst.CSTNode]] = find_all) -> set[str]:
    """`self.X` whose items some method of the class puts in eval or train mode
    (`self.model[key].eval()`): a container of modules, such as a trainer's dict of
    generator and discriminator, though it is built by code this file does not show."""
    found: set[str] = set()
    for call in find(node.body, cst.Call):
        if type(call.func) is not cst.Attribute:  # type: ignore[attr-defined]
            continue
        item = call.func.value
        if call.func.attr.value in _MODE_METHODS and type(item) is cst.Subscript:
            name = dotted_name(item.value)
            if name is not None and name.startswith("self.") and name.count(".") == 1:
                found.add(name)
    return found


def builds_module(value: cst.BaseExpression, module_classes: set[str], imports: ImportIndex) -> bool:
    """Does `value` construct a module (`torch.nn.X(...)` but not a Parameter, or a module class of the file)?"""
    for call in iter_descendants(value):
        if type(call) is not cst.Call:
            continue
        qualified = imports.qualified_name(call.func)
        if qualified is not None and module_class_name(qualified) is Answer.YES:
            return True
        if type(call.func) is cst.Name and call.func.value in module_classes:
            return True
    return False


def module_loop_names(loops: list[cst.CSTNode], attributes: frozenset[str]) -> frozenset[str]:
    """`layer` in `for layer in self.layers:` (or `for i, layer in enumerate(self.layers)`)."""
    found: set[str] = set()
    if not attributes:
        return frozenset()
    for loop in loops:
        assert type(loop) in (cst.For, cst.CompFor)
        iterable, target = loop.iter, loop.target
        if type(iterable) is cst.Call and last_segment(iterable.func) == "enumerate" and iterable.args:
            iterable = iterable.args[0].value
            if type(target) is cst.Tuple and len(target.elements) == 2:
                target = target.elements[1].value
        if dotted_name(iterable) in attributes and type(target) is cst.Name:
            found.add(target.value)
    return frozenset(found)


def constant_attributes(node: cst.ClassDef) -> frozenset[str]:
    """`self.X` attributes that hold no autograd graph and never change after set-up:
    assigned only in `__init__`, from literals and `__init__`'s own parameters
    (`self.gama = gama`, `self.aux_loss = 0`). Reading one in a training step carries
    nothing from an earlier iteration into the graph."""
    inits = [s for s in node.body.body if type(s) is cst.FunctionDef and s.name.value == "__init__"]
    if not inits:
        return frozenset()
    parameters = {p.name.value for p in (*inits[0].params.posonly_params, *inits[0].params.params, *inits[0].params.kwonly_params)}
    constant: set[str] = set()
    changed: set[str] = set()
    for method in (s for s in node.body.body if type(s) is cst.FunctionDef):
        for statement in iter_descendants(method.body):
            for target, value in _self_assignments(statement):
                if method is inits[0] and type(statement) is cst.Assign and plain_value(value, parameters):
                    constant.add(target)
                else:
                    changed.add(target)
    return frozenset(constant - changed)


def _self_assignments(statement: cst.CSTNode) -> list[tuple[str, cst.BaseExpression | None]]:
    """(X, value) for each `self.X` (or an item of it) that `statement` writes."""
    if type(statement) is cst.Assign:
        targets = [t.target for t in statement.targets]
    elif type(statement) in (cst.AugAssign, cst.AnnAssign):
        targets = [statement.target]
    else:
        return []
    found = []
    for target in targets:
        whole = type(target) is cst.Attribute
        while type(target) is cst.Subscript or (type(target) is cst.Attribute and not _on_self(target)):
            target, whole = target.value, False
        if type(target) is cst.Attribute and _on_self(target):
            found.append((target.attr.value, statement.value if whole else None))
    return found


def _on_self(node: cst.Attribute) -> bool:
    return type(node.value) is cst.Name and node.value.value == "self"


def plain_value(value: cst.BaseExpression | None, parameters: set[str]) -> bool:
    """A literal, one of `parameters`, or arithmetic of those: a value that holds no graph."""
    if type(value) in (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString):
        return True
    if type(value) is cst.Name:
        return value.value in parameters or value.value in {"True", "False", "None"}
    if type(value) is cst.UnaryOperation:
        return plain_value(value.expression, parameters)
    if type(value) is cst.BinaryOperation:
        return plain_value(value.left, parameters) and plain_value(value.right, parameters)
    return False


def starred_list(call: cst.Call, scope: cst.CSTNode) -> list[cst.BaseExpression] | None:
    """The layers of `nn.Sequential(*layers)` when `layers = [a, b, c]` is bound once in
    `scope` (a function or the module) and only ever grown at its end (`append`,
    `extend`, `+=`): [a, b, c], whose neighbours stay neighbours. None otherwise."""
    starred = [a for a in call.args if a.star == "*"]
    if len(call.args) != 1 or len(starred) != 1 or type(starred[0].value) is not cst.Name:
        return None
    name = starred[0].value.value
    literal: cst.List | None = None
    for node in iter_descendants(scope, prune=lambda n: n is not scope and _nested_scope(n)):
        if type(node) is cst.Assign and any(type(t.target) is cst.Name and t.target.value == name for t in node.targets):
            if literal is not None or type(node.value) is not cst.List:
                return None
            literal = node.value
        elif type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == name:
            if node.attr.value not in {"append", "extend"}:
                return None  # insert, reverse, sort, pop: order changes
        elif type(node) is cst.Subscript and type(node.value) is cst.Name and node.value.value == name:
            return None  # `layers[i] = ...` may replace one
    if literal is None or any(type(e) is not cst.Element for e in literal.elements):
        return None
    return [element.value for element in literal.elements]
