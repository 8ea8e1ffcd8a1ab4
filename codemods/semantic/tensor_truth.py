"""Which values a custom `backward` holds as tensors, and which tests ask a tensor for
its truth value (`g if x > 0 else 0`, `if grad == 0:`).

Why here: AGF018 reports such a test (it raises "Boolean value of Tensor with more than
one value is ambiguous" for any real batch), and AGF004, which turns a returned Python
`0` into `None`, must leave it alone (its fix would keep the test that raises): one
answer to one question, for both rules.
"""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.semantic.dataflow import assigned_names
from autograd_fix.codemods.walk import iter_descendants

_ORDERING = (cst.LessThan, cst.GreaterThan, cst.LessThanEqual, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)


def backward_tensor_names(backward: cst.FunctionDef) -> set[str]:
    """The gradient parameters, names unpacked from `ctx.saved_tensors`, and names
    computed from those (one pass in source order)."""
    params = [*backward.params.posonly_params, *backward.params.params]
    names = {p.name.value for p in params[1:]}
    for node in iter_descendants(backward.body):
        if isinstance(node, cst.Assign):
            if _saved_tensors(node.value) or (names_in(node.value) & names and _tensor_expression(node.value)):
                for target in node.targets:
                    names |= assigned_names(target.target)
    return names


def names_in(node: cst.CSTNode) -> set[str]:
    """Every identifier read in `node` (a bare name included)."""
    return {n.value for n in iter_descendants(node) if isinstance(n, cst.Name)}


def _saved_tensors(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Subscript):
        node = node.value
    return isinstance(node, cst.Attribute) and node.attr.value in ("saved_tensors", "saved_variables")


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
    if isinstance(node, (cst.BinaryOperation, cst.UnaryOperation)):
        return True
    if isinstance(node, cst.Comparison):
        return all(isinstance(c.operator, _ORDERING) for c in node.comparisons)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        method = node.func.attr.value
        if method in _REDUCTIONS:
            return any(a.keyword is None or a.keyword.value == "dim" for a in node.args if a.star == "")
        return method in _ELEMENTWISE
    return isinstance(node, cst.Name)


def _is_tensor(node: cst.BaseExpression, tensors: set[str]) -> bool:
    """A tensor name, `ctx.saved_tensors[i]`, or arithmetic / a tensor-keeping method on one."""
    if isinstance(node, cst.Name):
        return node.value in tensors
    if isinstance(node, cst.BinaryOperation):
        return _is_tensor(node.left, tensors) or _is_tensor(node.right, tensors)
    if isinstance(node, cst.UnaryOperation) and not isinstance(node.operator, cst.Not):
        return _is_tensor(node.expression, tensors)
    if isinstance(node, cst.Comparison) and _tensor_expression(node):
        return any(_is_tensor(operand, tensors) for operand in (node.left, *(c.comparator for c in node.comparisons)))
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and _tensor_expression(node):
        return _is_tensor(node.func.value, tensors)
    return isinstance(node, cst.Subscript) and _saved_tensors(node)


def tests_tensor(test: cst.BaseExpression, tensors: set[str]) -> bool:
    """A comparison with a tensor on either side (`x > 0`, `grad == 0`), or a bare tensor."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return tests_tensor(test.expression, tensors)
    if isinstance(test, cst.BooleanOperation):
        return tests_tensor(test.left, tensors) or tests_tensor(test.right, tensors)
    if _is_tensor(test, tensors):
        return True
    if not isinstance(test, cst.Comparison) or not all(isinstance(c.operator, _ORDERING) for c in test.comparisons):
        return False
    return any(_is_tensor(operand, tensors) for operand in (test.left, *(c.comparator for c in test.comparisons)))
