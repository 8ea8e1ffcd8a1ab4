"""Is a custom Function's forward input certainly not a tensor?

Padding a missing gradient with None is right only for inputs that need no gradient, so
the evidence here (annotations, literal arguments at every `apply` call, scalar-only
uses such as `dim=` or `range()`, ctx attributes used only as plain factors) decides
whether a padding fix is safe, unsafe (run-judged) or not offered.
"""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.semantic.autograd_function import (
    SCALAR_KEYWORDS,
    ApplyCalls,
    CustomFunction,
    TensorFacts,
    ctx_attribute,
    is_scalar_literal,
    own_nodes,
    save_for_backward_calls,
    setup_context_aliases,
)
from autograd_fix.codemods.walk import walk


def input_evidence(function: CustomFunction, index: int, calls: ApplyCalls | None, imports: ImportIndex) -> str | None:
    """'safe' / 'unsafe' when input `index` is shown to be a non-tensor, else None."""
    inputs = function.forward_inputs() or ()
    forward = function.forward
    assert forward is not None
    param = inputs[index]
    name = param.name.value
    facts = TensorFacts(forward, imports, skip_params=1 if function.combined else 0)
    if name in facts.tensors or _saved(function, index, name):
        return None
    if name in facts.non_tensors:
        return "safe"
    if calls is not None and not calls.unknown and _literal_at_every_call(calls, index, param):
        return "safe"
    if name in _scalar_uses(forward):
        return "safe"
    attributes = _ctx_attributes_of(function, index, name)
    backward = function.backward
    ctx = function.backward_ctx()
    if not attributes or backward is None or ctx is None:
        return None
    scalar_attrs = {a for a in _scalar_uses(backward, ctx) if a in attributes}
    if scalar_attrs:
        return "safe"
    if all(_only_arithmetic_factor(backward, ctx, a) for a in attributes):
        return "unsafe"
    return None


def _literal_at_every_call(calls: ApplyCalls, index: int, param: cst.Param) -> bool:
    passed = [args[index] for args in calls.arguments if index < len(args)]
    if not passed:
        return False
    return all(is_scalar_literal(arg) for arg in passed)


def _saved(function: CustomFunction, index: int, name: str) -> bool:
    """Is the input passed to save_for_backward (then it is a tensor or None)?"""
    holder = function.ctx_function()
    ctx = function.forward_ctx()
    if holder is None or ctx is None:
        return True
    names = {name} | setup_context_aliases(function, index)
    for call in save_for_backward_calls(holder, ctx):
        for arg in call.args:
            if arg.star or (type(arg.value) is cst.Name and arg.value.value in names):
                return True
    return False


def _ctx_attributes_of(function: CustomFunction, index: int, name: str) -> set[str]:
    """ctx attributes that hold input `index` (`ctx.alpha = alpha`)."""
    holder = function.ctx_function()
    ctx = function.forward_ctx()
    if holder is None or ctx is None:
        return set()
    names = {name} if function.combined else setup_context_aliases(function, index)
    found: set[str] = set()
    for assign in own_nodes(holder, cst.Assign):
        if type(assign.value) is cst.Name and assign.value.value in names:
            for target in assign.targets:
                attribute = ctx_attribute(target.target, ctx)
                if attribute is not None:
                    found.add(attribute)
    return found


def _scalar_uses(function: cst.FunctionDef, ctx: str | None = None) -> set[str]:
    """Names (or, with `ctx`, ctx attributes) used where only Python ints/bools fit."""
    finder = _ScalarUseFinder(ctx)
    walk(function.body, finder)
    return finder.found


class _ScalarUseFinder(cst.CSTVisitor):
    def __init__(self, ctx: str | None) -> None:
        super().__init__()
        self.ctx = ctx
        self.found: set[str] = set()

    def _key(self, node: cst.BaseExpression) -> str | None:
        if self.ctx is None:
            return node.value if type(node) is cst.Name else None
        return ctx_attribute(node, self.ctx)

    def visit_Call(self, node: cst.Call) -> None:
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in SCALAR_KEYWORDS:
                key = self._key(arg.value)
                if key is not None:
                    self.found.add(key)
        if type(node.func) is cst.Name and node.func.value == "range":
            for arg in node.args:
                key = self._key(arg.value)
                if key is not None:
                    self.found.add(key)


def _only_arithmetic_factor(function: cst.FunctionDef, ctx: str, attribute: str) -> bool:
    """Every read of `ctx.<attribute>` is an operand of `*`, `/`, `+`, `-` (a plain factor)."""
    finder = _FactorUseFinder(ctx, attribute)
    walk(function.body, finder)
    return finder.uses > 0 and finder.uses == finder.factor_uses


class _FactorUseFinder(cst.CSTVisitor):
    _ARITHMETIC = (cst.Multiply, cst.Divide, cst.Add, cst.Subtract)

    def __init__(self, ctx: str, attribute: str) -> None:
        super().__init__()
        self.ctx = ctx
        self.attribute = attribute
        self.uses = 0
        self.factor_uses = 0

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, self._ARITHMETIC):
            for operand in (node.left, node.right):
                if ctx_attribute(operand, self.ctx) == self.attribute:
                    self.factor_uses += 1

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if ctx_attribute(node, self.ctx) == self.attribute:
            self.uses += 1
