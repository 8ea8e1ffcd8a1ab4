"""Names bound to a callable and used only by calling them.

A rule that rewrites a callable *reference* (`autocast = torch.cuda.amp.autocast if amp
else torch.autocast`) instead of a call can only check the arguments where the name is
called. This answers "is every use of `name` in this scope a call, and which calls": a
use that hands the name on (an argument, a return, an attribute read) makes the answer
unknown (None), and the rule then reports without a fix.
"""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.walk import iter_descendants, walk


def calls_of_alias(scope: cst.CSTNode, name: str) -> list[cst.Call] | None:
    """Every call of `name` in `scope` (nested functions included, where the name is
    read through the closure), or None when `name` is read other than as a callee."""
    finder = _AliasUses(name)
    walk(scope, finder)
    return None if finder.escapes else finder.calls


def forwards_to(value: cst.BaseExpression, imports: ImportIndex, callees: frozenset[str]) -> bool:
    """Is `value` a lambda that hands all its arguments to one of `callees` (qualified
    names)? RL-Adventure's `Variable = lambda *args, **kwargs: autograd.Variable(*args,
    **kwargs).cuda() if USE_CUDA else autograd.Variable(*args, **kwargs)`: a call of the
    alias is a call of `torch.autograd.Variable`, keywords included."""
    if type(value) is not cst.Lambda:
        return False
    star, double = value.params.star_arg, value.params.star_kwarg
    if not (type(star) is cst.Param and type(double) is cst.Param):
        return False
    passed = {("*", star.name.value), ("**", double.name.value)}
    return any(
        type(call) is cst.Call and imports.qualified_name(call.func) in callees
        and {(a.star, a.value.value) for a in call.args if a.star and type(a.value) is cst.Name} == passed
        for call in iter_descendants(value.body)
    )


class _AliasUses(cst.CSTVisitor):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.calls: list[cst.Call] = []
        self.callees: set[int] = set()
        #: names that are not reads: assignment targets, attribute names, keywords
        self.targets: set[int] = set()
        self.escapes = False

    def visit_Call(self, node: cst.Call) -> None:
        if type(node.func) is cst.Name and node.func.value == self.name:
            self.calls.append(node)
            self.callees.add(id(node.func))

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if type(node.target) is cst.Name:
            self.targets.add(id(node.target))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.targets.add(id(node.attr))  # `torch.autocast` is not a use of `autocast`

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.targets.add(id(node.keyword))

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name and id(node) not in self.callees and id(node) not in self.targets:
            self.escapes = True
