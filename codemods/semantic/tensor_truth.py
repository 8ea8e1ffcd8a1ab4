"""Which values a custom `backward` holds as tensors, and which tests ask a tensor for
its truth value (`g if x > 0 else 0`, `if grad == 0:`).

Why here: AGF018 reports such a test (it raises "Boolean value of Tensor with more than
one value is ambiguous" for any real batch), and AGF004, which turns a returned Python
`0` into `None`, must leave it alone (its fix would keep the test that raises): one
answer to one question, for both rules.

A tensor known to hold one element has a legal truth value, and branching on it is a
whole-tensor switch by design: a flag that `forward` saves as `torch.ones(1)` or
`torch.tensor([x.requires_grad])` (nn-toolbox's ShakeShake, a binarizer's "needs grad"
flag). So is a comparison with `None` (`tensor == None` is Python's `False`). Neither is
a test this module reports.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autograd_fix.codemods import torch_api
from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.semantic.autograd_function import (
    CustomFunction,
    assigned_values,
    is_scalar_literal,
    save_for_backward_calls,
    subscript_index,
)
from autograd_fix.codemods.semantic.dataflow import assigned_names
from autograd_fix.codemods.walk import iter_descendants

_ORDERING = (cst.LessThan, cst.GreaterThan, cst.LessThanEqual, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)


@dataclass(frozen=True)
class BackwardTensors:
    """The values of one custom `backward` that may hold more than one element."""

    names: frozenset[str]
    #: positions of `ctx.saved_tensors` that hold one element after every `save_for_backward`
    one_element_slots: frozenset[int] = frozenset()

    def tested(self, test: cst.BaseExpression) -> bool:
        """Whether `test` asks one of these for its truth value."""
        return tests_tensor(test, set(self.names), self.one_element_slots)


def backward_tensors(function: CustomFunction, imports: ImportIndex) -> BackwardTensors | None:
    """What `function`'s backward holds as (possibly multi-element) tensors; None without a backward."""
    if function.backward is None:
        return None
    slots = one_element_saved_slots(function, imports)
    return BackwardTensors(frozenset(backward_tensor_names(function.backward, slots)), slots)


def backward_tensor_names(backward: cst.FunctionDef, one_element_slots: frozenset[int] = frozenset()) -> set[str]:
    """The gradient parameters, names unpacked from `ctx.saved_tensors` (but those at a
    one-element slot), and names computed from those (one pass in source order)."""
    params = [*backward.params.posonly_params, *backward.params.params]
    names = {p.name.value for p in params[1:]}
    for node in iter_descendants(backward.body):
        if type(node) is cst.Assign:
            if _saved_tensors(node.value):
                for target in node.targets:
                    names |= _saved_names(target.target, node.value, one_element_slots)
            elif names_in(node.value) & names and _tensor_expression(node.value):
                for target in node.targets:
                    names |= assigned_names(target.target)
    return names


def _saved_names(target: cst.BaseExpression, value: cst.BaseExpression, slots: frozenset[int]) -> set[str]:
    """Names bound from `ctx.saved_tensors` (or `ctx.saved_tensors[i]`) but those at one-element slots."""
    if type(value) is cst.Subscript:
        return set() if subscript_index(value) in slots else assigned_names(target)
    if type(target) in (cst.Tuple, cst.List) and not any(type(e) is cst.StarredElement for e in target.elements):
        kept = [assigned_names(e.value) for i, e in enumerate(target.elements) if i not in slots]
        return set().union(*kept)
    return assigned_names(target)


def one_element_saved_slots(function: CustomFunction, imports: ImportIndex) -> frozenset[int]:
    """Positions `i` where every `ctx.save_for_backward(...)` of the Function saves a tensor
    built with one element right there (`torch.ones(1)`, `torch.tensor([flag])`, or a name
    bound only to such values): `ctx.saved_tensors[i]` then holds one element in backward."""
    method, ctx = function.ctx_function(), function.forward_ctx()
    if method is None or ctx is None:
        return frozenset()
    calls = save_for_backward_calls(method, ctx)
    if not calls or any(a.star or a.keyword is not None for c in calls for a in c.args):
        return frozenset()
    values = assigned_values(method)
    width = min(len(c.args) for c in calls)
    return frozenset(i for i in range(width) if all(_one_element(c.args[i].value, values, imports) for c in calls))


def _one_element(
    node: cst.BaseExpression, values: dict[str, list[cst.BaseExpression | None]], imports: ImportIndex, depth: int = 0
) -> bool:
    """A value built to hold exactly one element: a literal unit shape or one literal datum, or a cast of one."""
    if depth > 4:
        return False
    if type(node) is cst.Name:
        bound = values.get(node.value, [])
        return bool(bound) and all(v is not None and _one_element(v, values, imports, depth + 1) for v in bound)
    if type(node) is cst.UnaryOperation and type(node.operator) in (cst.Minus, cst.Plus):
        return _one_element(node.expression, values, imports, depth)
    if type(node) is not cst.Call:
        return False
    qualified = imports.qualified_name(node.func)
    if qualified is None and type(node.func) is cst.Attribute:
        # a method on a value (not a `torch.` function): casts and copies keep the count
        method = node.func.attr.value
        return method in torch_api.ELEMENT_COUNT_PRESERVING_METHODS and _one_element(node.func.value, values, imports, depth)
    positional = [a.value for a in node.args if a.keyword is None and not a.star]
    if qualified in torch_api.SIZED_FACTORIES:
        shape = positional[:1] if qualified == "torch.full" else positional
        return len(shape) >= 1 and all(_unit_shape(s) for s in shape)
    if qualified in torch_api.DATA_CONSTRUCTORS and len(positional) == 1:
        data = positional[0]
        if type(data) in (cst.List, cst.Tuple):
            return len(data.elements) == 1 and _single_datum(data.elements[0])
        return is_scalar_literal(data) and type(data) is not cst.Tuple
    return False


def _unit_shape(node: cst.BaseExpression) -> bool:
    """`1`, `(1,)`, `[1, 1]`: a size of one element in all."""
    if type(node) is cst.Integer:
        return node.evaluated_value == 1
    if type(node) in (cst.Tuple, cst.List):
        return all(type(e) is not cst.StarredElement and _unit_shape(e.value) for e in node.elements)
    return False


def _single_datum(element: cst.BaseElement) -> bool:
    """The one element of `torch.tensor([e])` is one value: no nested display, no unpacking."""
    return type(element) is not cst.StarredElement and type(element.value) not in (cst.List, cst.Tuple, cst.Set, cst.ListComp, cst.GeneratorExp, cst.SetComp)


def names_in(node: cst.CSTNode) -> set[str]:
    """Every identifier read in `node` (a bare name included)."""
    return {n.value for n in iter_descendants(node) if type(n) is cst.Name}


def _saved_tensors(node: cst.BaseExpression) -> bool:
    if type(node) is cst.Subscript:
        node = node.value
    return type(node) is cst.Attribute and node.attr.value in ("saved_tensors", "saved_variables")


#: tensor methods whose result keeps the operand's elements (a tensor of the same size or broadcast)
_ELEMENTWISE = frozenset({
    "clone", "detach", "abs", "neg", "sign", "float", "double", "to", "exp", "sigmoid", "tanh", "mul", "div", "add",
    "sub", "pow", "sqrt", "clamp", "expand_as", "eq", "ne", "gt", "lt", "ge", "le", "masked_fill", "type_as",
})
#: reductions that stay multi-element when given a dimension (`(x == 0).sum(dim)`); without one they give a
#: single value, a legal Python truth value (a whole-tensor switch the rule leaves alone)
_REDUCTIONS = frozenset({"sum", "mean", "prod", "amax", "amin", "any", "all", "count_nonzero", "norm"})


def _tensor_expression(node: cst.BaseExpression) -> bool:
    """Arithmetic, an elementwise comparison, a method call that keeps a tensor a tensor, or a
    reduction along a dimension (not `.item()`, `.shape`, nor a reduction to one value)."""
    if type(node) in (cst.BinaryOperation, cst.UnaryOperation):
        return True
    if type(node) is cst.Comparison:
        return all(isinstance(c.operator, _ORDERING) for c in node.comparisons) and not _compares_none(node)
    if type(node) is cst.Call and type(node.func) is cst.Attribute:
        method = node.func.attr.value
        if method in _REDUCTIONS:
            return any(a.keyword is None or a.keyword.value == "dim" for a in node.args if a.star == "")
        return method in _ELEMENTWISE
    return type(node) is cst.Name


def _is_tensor(node: cst.BaseExpression, tensors: set[str], slots: frozenset[int] = frozenset()) -> bool:
    """A tensor name, `ctx.saved_tensors[i]` (not at a one-element slot), or arithmetic /
    a tensor-keeping method on one."""
    if type(node) is cst.Name:
        return node.value in tensors
    if type(node) is cst.BinaryOperation:
        return _is_tensor(node.left, tensors, slots) or _is_tensor(node.right, tensors, slots)
    if type(node) is cst.UnaryOperation and type(node.operator) is not cst.Not:
        return _is_tensor(node.expression, tensors, slots)
    if type(node) is cst.Comparison and _tensor_expression(node) and not _compares_none(node):
        return any(_is_tensor(operand, tensors, slots) for operand in _operands(node))
    if type(node) is cst.Call and type(node.func) is cst.Attribute and _tensor_expression(node):
        return _is_tensor(node.func.value, tensors, slots)
    return type(node) is cst.Subscript and _saved_tensors(node) and subscript_index(node) not in slots


def _operands(node: cst.Comparison) -> tuple[cst.BaseExpression, ...]:
    return (node.left, *(c.comparator for c in node.comparisons))


def _compares_none(node: cst.Comparison) -> bool:
    """`x == None`, `x != None`: a tensor compared with None gives Python's bool, not a tensor."""
    return any(type(o) is cst.Name and o.value == "None" for o in _operands(node))


def tests_tensor(test: cst.BaseExpression, tensors: set[str], slots: frozenset[int] = frozenset()) -> bool:
    """A comparison with a tensor on either side (`x > 0`, `grad == 0`), or a bare tensor."""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return tests_tensor(test.expression, tensors, slots)
    if type(test) is cst.BooleanOperation:
        return tests_tensor(test.left, tensors, slots) or tests_tensor(test.right, tensors, slots)
    if _is_tensor(test, tensors, slots):
        return True
    if type(test) is not cst.Comparison or not all(isinstance(c.operator, _ORDERING) for c in test.comparisons):
        return False
    return not _compares_none(test) and any(_is_tensor(operand, tensors, slots) for operand in _operands(test))
