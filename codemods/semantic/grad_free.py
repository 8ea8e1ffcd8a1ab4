"""Values that visibly cannot require grad where they are used.

A fresh torch factory call without `requires_grad=`, a `.data` read, a `.detach()`, a
batch drawn from a data loader (rebound only by device and dtype conversions), and
conversions of those. `Variable(x)` of such a value is just `x`; elsewhere it is
`x.detach()`.
"""

from __future__ import annotations

from typing import Sequence

import libcst as cst

from autograd_fix.codemods.expressions import method_chain
from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.names import iterable_tokens
from autograd_fix.codemods.semantic.dataflow import assigned_names
from autograd_fix.codemods.semantic.graph_breaks import VARIABLE_NAMES
from autograd_fix.codemods.semantic.roles import DATA_ITERABLE_TOKENS
from autograd_fix.codemods.walk import walk

#: torch functions whose result never requires grad unless asked with `requires_grad=`
FACTORIES = frozenset(
    f"torch.{name}"
    for name in (
        "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "rand", "randn", "randint",
        "randperm", "arange", "linspace", "logspace", "eye", "zeros_like", "ones_like", "empty_like",
        "full_like", "rand_like", "randn_like", "randint_like", "Tensor", "FloatTensor", "DoubleTensor",
        "HalfTensor", "LongTensor", "IntTensor", "ShortTensor", "ByteTensor", "BoolTensor",
        "cuda.FloatTensor", "cuda.LongTensor", "cuda.DoubleTensor", "cuda.HalfTensor", "cuda.ByteTensor",
    )
)
#: tensor methods that keep "does not require grad" (conversions, copies to a device)
CONVERSIONS = frozenset(
    {"cuda", "cpu", "to", "float", "double", "half", "bfloat16", "long", "int", "short", "bool", "byte",
     "type", "contiguous", "pin_memory", "squeeze", "unsqueeze", "view", "reshape", "permute", "t"}
)


def grad_free(
    node: cst.BaseExpression,
    imports: ImportIndex,
    loops: Sequence[cst.For],
    data_words: frozenset[str] = DATA_ITERABLE_TOKENS,
) -> bool:
    """Can `node` visibly not require grad (so `Variable(node)` is just `node`)?

    A fresh torch factory call, a `.data` read, a `.detach()`, a loader batch (a target
    of one of the enclosing `loops`, innermost last, whose iterable is named with one of
    `data_words`: the loader role's vocabulary), or conversions (`.cuda()`,
    `.float()`, `.to(...)`) of one of those.
    """
    if fresh_factory(node, imports):
        return True
    if type(node) is cst.Attribute and node.attr.value == "data":
        return True
    if type(node) is cst.Call and type(node.func) is cst.Attribute:
        method = node.func.attr.value
        if method == "detach" and not node.args:
            return True
        if method in CONVERSIONS and imports.qualified_name(node.func) is None:
            return grad_free(node.func.value, imports, loops, data_words)
        return False
    if type(node) is cst.Name:
        return _is_batch_name(node.value, imports, loops, data_words)
    return False


def _is_batch_name(name: str, imports: ImportIndex, loops: Sequence[cst.For], data_words: frozenset[str]) -> bool:
    """A target of an enclosing `for ... in <data loader>` loop, rebound only by conversions."""
    for loop in reversed(loops):
        if name not in assigned_names(loop.target):
            continue
        if not iterable_tokens(loop.iter) & data_words:
            return False
        checker = _RebindChecker(name, imports)
        walk(loop.body, checker)
        return checker.ok
    return False


def fresh_factory(node: cst.BaseExpression, imports: ImportIndex) -> bool:
    """`torch.randn(...)`-style call that makes a new tensor not requiring grad."""
    if type(node) is not cst.Call or imports.qualified_name(node.func) not in FACTORIES:
        return False
    for arg in node.args:
        if arg.star == "**":
            return False
        if arg.keyword is not None and arg.keyword.value == "requires_grad" and not (type(arg.value) is cst.Name and arg.value.value == "False"):
            return False
    return True


class _RebindChecker(cst.CSTVisitor):
    """Every assignment to `name` is `name = [Variable(]name.<conversions>()[)]`."""

    def __init__(self, name: str, imports: ImportIndex) -> None:
        super().__init__()
        self.name = name
        self.imports = imports
        self.ok = True

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(self.name in assigned_names(t.target) for t in node.targets):
            value = node.value
            if type(value) is cst.Call and self.imports.qualified_name(value.func) in VARIABLE_NAMES and value.args:
                value = value.args[0].value
            root, links = method_chain(value)
            if not (type(root) is cst.Name and root.value == self.name and all(
                n in CONVERSIONS and c is not None for n, c in links
            )):
                self.ok = False

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self.name in assigned_names(node.target):
            self.ok = False

    def visit_For(self, node: cst.For) -> None:
        if self.name in assigned_names(node.target):
            self.ok = False
