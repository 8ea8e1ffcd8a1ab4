"""Where a statement reads or writes a tensor's `.data`, and what surrounds it.

`x.data.mul_(2)` and `x.data = y` (writes), `x.data` reads (bound whole, stored into an
attribute, copied by a write, passed to `nn.init.*`), and whether a scope runs backward,
steps an optimizer or reads `.grad` (where `.data` can corrupt a graph). Syntactic facts
of one statement or scope; AGF009 decides from them and the tracking analysis.
"""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.names import name_tokens
from autograd_fix.codemods.semantic.inplace import is_inplace_call
from autograd_fix.codemods.semantic.roles import OPTIMIZER_OR_SCALER_TOKENS
from autograd_fix.codemods.walk import SyntaxIndex, find_all, walk

#: mutations whose `.data` cannot simply be dropped (they change shape or storage)
_STORAGE_METHODS = frozenset({"resize_", "resize_as_", "set_", "storage_"})
#: a `.data` read bound to a name, returned or stored may be mutated later: unsafe
_BINDING = (cst.Assign, cst.AnnAssign, cst.Return, cst.AugAssign)
#: calls that run backward: `loss.backward()`, `accelerator.backward(loss)`, Lightning's `manual_backward`
_BACKWARD_METHODS = frozenset({"backward", "manual_backward"})
_BACKWARD_FUNCTIONS = frozenset({"torch.autograd.grad", "torch.autograd.backward"})


def is_data(node: cst.CSTNode) -> bool:
    return type(node) is cst.Attribute and node.attr.value == "data"


def data_mutation(small: cst.BaseSmallStatement, imports: ImportIndex) -> cst.Attribute | None:
    """The `.data` attribute a whole-statement in-place mutation goes through, if any."""
    node: cst.BaseExpression | None = None
    if type(small) is cst.Expr and type(small.value) is cst.Call:
        node = small.value
        # an unknown trailing-underscore method counts as a mutation (`semantic/inplace.py`)
        if not is_inplace_call(node, imports).possible:
            return None
        while type(node) is cst.Call and is_inplace_call(node, imports).possible:
            node = node.func.value  # type: ignore[attr-defined]
    elif type(small) is cst.AugAssign:
        node = small.target
    elif type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Subscript:
        node = small.targets[0].target
    if node is None:
        return None
    while type(node) is cst.Subscript:
        node = node.value
    return node if is_data(node) else None  # type: ignore[return-value]


def storage_change(small: cst.BaseSmallStatement) -> bool:
    finder = _MethodFinder(_STORAGE_METHODS)
    walk(small, finder)
    return finder.found


class _MethodFinder(cst.CSTVisitor):
    def __init__(self, methods: frozenset[str]) -> None:
        super().__init__()
        self.methods = methods
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        if type(node.func) is cst.Attribute and node.func.attr.value in self.methods:
            self.found = True


def data_reads(statement: cst.CSTNode, handled: set[int], syntax: SyntaxIndex | None = None) -> list[cst.Attribute]:
    """`.data` attributes read in a statement (not the ones already handled as writes,
    nor those in a lambda, which runs later if at all)."""
    return [
        node
        for node in (syntax.find if syntax else find_all)(statement, cst.Attribute, skip=cst.Lambda)
        if node.attr.value == "data" and id(node) not in handled  # type: ignore[attr-defined]
    ]


class AutogradFinder(cst.CSTVisitor):
    """Does a scope (not its nested functions or classes) run backward, step or read grads?"""

    def __init__(self, imports: ImportIndex, stepper_words: frozenset[str] = OPTIMIZER_OR_SCALER_TOKENS) -> None:
        #: `X.step()` steps an optimizer when X is named with one of these
        #: (`roles.OPTIMIZER_OR_SCALER_TOKENS` plus the project's optimizer names)
        self.stepper_words = stepper_words
        super().__init__()
        self.imports = imports
        self.found = False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "grad":
            self.found = True  # `p.grad`: a hand-written optimizer step

    def visit_Call(self, node: cst.Call) -> None:
        if self.imports.qualified_name(node.func) in _BACKWARD_FUNCTIONS:
            self.found = True
        elif type(node.func) is cst.Attribute:
            method = node.func.attr.value
            if method in _BACKWARD_METHODS:
                self.found = True
            elif method == "step":
                receiver = dotted_name(node.func.value) or ""
                if set(name_tokens(receiver.rsplit(".", 1)[-1])) & self.stepper_words:
                    self.found = True


def init_call_argument(statement: cst.CSTNode, data: cst.Attribute, imports: ImportIndex) -> bool:
    """Is `data` the tensor argument of an `nn.init.*` call?"""
    finder = _InitFinder(data, imports)
    walk(statement, finder)
    return finder.found


class _InitFinder(cst.CSTVisitor):
    def __init__(self, data: cst.Attribute, imports: ImportIndex) -> None:
        super().__init__()
        self.data = data
        self.imports = imports
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        name = self.imports.qualified_name(node.func) or ""
        if name.startswith("torch.nn.init.") and node.args and node.args[0].value is self.data:
            self.found = True


def bound_whole(statement: cst.SimpleStatementLine, data: cst.Attribute) -> bool:
    """Is the `.data` tensor itself (not a value computed from it) bound, returned or stored?"""
    for small in statement.body:
        value = getattr(small, "value", None)
        if isinstance(small, _BINDING) and value is not None and _is_or_views(value, data):
            return True
        if type(small) is cst.Expr and type(small.value) is cst.Call:
            if any(_is_or_views(a.value, data) for a in small.value.args):
                return True  # `history.append(p.data)`
    return False


def stored_whole(statement: cst.SimpleStatementLine, data: cst.Attribute) -> bool:
    """Is the `.data` tensor itself stored into an attribute or a container slot?"""
    for small in statement.body:
        if type(small) is cst.Assign and _is_or_views(small.value, data):
            if any(type(t.target) in (cst.Attribute, cst.Subscript) for t in small.targets):
                return True
    return False


def last_name(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def write_targets(node: cst.CSTNode, imports: ImportIndex) -> set[int]:
    """The `.data` attributes a small statement writes through (whole-statement mutations, `x.data = ...`)."""
    if not isinstance(node, cst.BaseSmallStatement):
        return set()
    targets: set[int] = set()
    mutation = data_mutation(node, imports)
    if mutation is not None:
        targets.add(id(mutation))
    if type(node) is cst.Assign:
        targets.update(id(t.target) for t in node.targets if is_data(t.target))
    return targets


def constructs(node: cst.CSTNode, name: str) -> bool:
    """`name = <call>(...)` with one target (the constructor is checked by the caller)."""
    if type(node) is cst.Assign:
        target = node.targets[0].target if len(node.targets) == 1 else None
    elif type(node) is cst.AnnAssign and node.value is not None:
        target = node.target
    else:
        return False
    return type(target) is cst.Name and target.value == name and type(node.value) is cst.Call


def write_source(small: cst.BaseSmallStatement, read: cst.Attribute) -> bool:
    """Is the `.data` read only the value copied by this write (`... = old.data`, `.copy_(old.data)`)?"""
    if type(small) in (cst.Assign, cst.AugAssign):
        return _is_or_views(small.value, read)
    if type(small) is cst.Expr and type(small.value) is cst.Call:
        return any(_is_or_views(argument.value, read) for argument in small.value.args)
    return False


def same(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    return a.deep_equals(b)


def _is_or_views(node: cst.BaseExpression, data: cst.Attribute) -> bool:
    if node is data:
        return True
    if type(node) in (cst.Tuple, cst.List):
        return any(_is_or_views(e.value, data) for e in node.elements)
    if type(node) is cst.Subscript:
        return _is_or_views(node.value, data)
    if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in {
        "view", "reshape", "t", "transpose", "permute", "squeeze", "unsqueeze", "flatten", "expand", "cpu", "to",
        "contiguous", "numpy", "view_as",
    }:
        return _is_or_views(node.func.value, data)
    return False
