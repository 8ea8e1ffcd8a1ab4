"""Tensors an `nn.Module` method hands back to its caller, read from the module's state.

slicetca's `PartitionTCA.get_components` returns `f(self.vectors[i][j]).data` for every
component: a getter whose callers may want the graph (a penalty on the components), cut
by `.data`. Tracking cannot follow parameters into nested `ParameterList`s or through
the module's own callables, so this asks a narrower question from the method's shape:
does a read rooted in the module's parameters or submodules reach the method's return
value (returned, bound to a returned name, or appended into a returned container)?
Initialisers (`_init_weights`, names ending in `_`), `__init__` and dunders are not
getters and are left out.
"""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.imports import dotted_name
from autograd_fix.codemods.semantic.tracking import ClassInfo
from autograd_fix.codemods.walk import iter_descendants

#: container methods that put their argument into the receiver
_INSERTS = frozenset({"append", "extend", "insert", "add"})
#: methods that turn a tensor into Python values (no graph to hand back)
_TO_PYTHON = frozenset({"item", "tolist"})


def is_getter(function: cst.FunctionDef | None, info: ClassInfo | None) -> bool:
    """A plain method of an nn.Module class (not `__init__`, a dunder, `forward` or an initialiser)."""
    if function is None or info is None or not info.module_like:
        return False
    name = function.name.value
    return not (name.startswith("__") or name == "forward" or name.endswith("_") or name.startswith("_init"))


def reads_module_state(node: cst.BaseExpression, info: ClassInfo) -> bool:
    """Does `node` read `self.<attr>` for a parameter or submodule attribute of the class?"""
    owned = info.parameters | set(info.modules)
    for sub in iter_descendants(node):
        if type(sub) is cst.Attribute and dotted_name(sub.value) == "self" and sub.attr.value in owned:
            return True
    return False


def reaches_return(function: cst.FunctionDef, statement: cst.SimpleStatementLine, read: cst.BaseExpression) -> bool:
    """Is the tensor `read` (or a tensor-method chain on it) handed back by `function`:
    returned, bound to a name a `return` hands back, or put into such a container
    (`temp[i].append(read.detach())`)? A number made from it (`.item()`, an f-string)
    is not a tensor handed back."""
    returned = _returned_names(function)
    for small in statement.body:
        values: list[cst.BaseExpression] = []
        if type(small) is cst.Return and small.value is not None:
            values = [e.value for e in small.value.elements] if type(small.value) is cst.Tuple else [small.value]
        elif type(small) is cst.Assign and any(_root(t.target) in returned for t in small.targets):
            values = [small.value]
        elif type(small) is cst.Expr and type(small.value) is cst.Call:
            func = small.value.func
            if type(func) is cst.Attribute and func.attr.value in _INSERTS and _root(func.value) in returned:
                values = [a.value for a in small.value.args]
        if any(_chain_of(value, read) for value in values):
            return True
    return False


def _chain_of(value: cst.BaseExpression, read: cst.BaseExpression) -> bool:
    """`read`, or `read` followed by tensor attributes, indexing or methods (not `.item()`)."""
    while value is not read:
        if type(value) is cst.Call and type(value.func) is cst.Attribute:
            if value.func.attr.value in _TO_PYTHON:
                return False
            value = value.func.value
        elif type(value) in (cst.Attribute, cst.Subscript):
            value = value.value
        else:
            return False
    return True


def _returned_names(function: cst.FunctionDef) -> set[str]:
    names: set[str] = set()
    for node in iter_descendants(function.body, prune=lambda n: type(n) in (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
        if type(node) is cst.Return and node.value is not None:
            values = [e.value for e in node.value.elements] if type(node.value) is cst.Tuple else [node.value]
            names |= {v.value for v in values if type(v) is cst.Name}
    return names


def _root(node: cst.BaseExpression) -> str | None:
    """`temp` of `temp`, `temp[i]`, `temp.items` (the name a container is held by)."""
    while type(node) in (cst.Subscript, cst.Attribute):
        node = node.value
    return node.value if type(node) is cst.Name else None
