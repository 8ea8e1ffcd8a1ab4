"""AGF018 backward-branches-on-tensor: a custom `backward` that takes the truth value of a tensor."""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.rule import Contract, Rule
from autograd_fix.codemods.semantic.autograd_function import CustomFunction
from autograd_fix.codemods.semantic.dataflow import assigned_names
from autograd_fix.codemods.walk import iter_descendants

_ORDERING = (cst.LessThan, cst.GreaterThan, cst.LessThanEqual, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)


class BackwardBranchesOnTensor(Rule):
    """
    ## What it does
    Finds a custom `torch.autograd.Function.backward` whose `if` or conditional
    expression tests a comparison of a tensor (a gradient it receives or a tensor from
    `ctx.saved_tensors`, or a tensor computed from those: arithmetic, an elementwise
    comparison such as `mask = x > 0`, a reduction along a dimension such as
    `(x == 0).sum(dim)`), such as `return grad_output if x > 0 else 0`. The conditional
    expression becomes the elementwise `torch.where(x > 0, grad_output,
    torch.zeros_like(grad_output))`; an `if` statement is reported.

    ## Why is this bad?
    `x > 0` on a tensor is a tensor of booleans; Python asks for one truth value and
    PyTorch raises `Boolean value of Tensor with more than one value is ambiguous` for
    any batch with more than one element. Where it runs (a one-element tensor) it picks
    one branch for the whole tensor, which is not the elementwise derivative
    (the founding article's `UnsafeRelu`).

    ## Example
    ```python
    class UnsafeRelu(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clamp(min=0)

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return grad_output if x > 0 else 0
    ```

    ## Use instead
    ```python
            return torch.where(x > 0, grad_output, torch.zeros_like(grad_output))
    ```

    ## Fix safety
    Unsafe: `torch.where` broadcasts the condition against both branches, which matches
    the intent only where the compared tensor has the gradient's shape (an input saved
    for backward of an elementwise op). Only a conditional expression whose branches are
    tensors or the literal `0` is rewritten; tests on `.shape`, `.dim()`, `.numel()`,
    `.item()`, `.all()`, `.any()`, `is None` and `ctx.needs_input_grad` give Python values
    and are left alone, and so are tests on a reduction to a single value
    (`x.abs().max() <= t`, `mask.sum() > 0`): those are legal Python, raise nothing, and
    may be an intended whole-tensor switch (gradient clipping, an early exit), which the
    contract below (an error that goes away, gradcheck) cannot judge. An `if` statement is report-only: its branches are statements,
    and which elementwise form they mean is for a person to write.

    ## Verification
    The original's "ambiguous" error is gone and the Function's backward matches finite
    differences (gradcheck in float64).
    """

    code = "AGF018"
    name = "backward-branches-on-tensor"
    safety = Applicability.UNSAFE
    message = "a custom backward takes the truth value of a tensor: ambiguous for more than one element, and not elementwise"
    triggers = ("backward",)
    contract = Contract(
        description="the 'Boolean value of Tensor ... is ambiguous' error is gone and backward passes gradcheck in float64",
        checks=("original_error_gone", "gradcheck_passes"),
    )

    def leave_Module(self, original_node: cst.Module) -> None:
        for function in self.context.semantic.custom_functions:
            if function.backward is not None:
                self._check(function, function.backward)

    def _check(self, function: CustomFunction, backward: cst.FunctionDef) -> None:
        tensors = _tensor_names(backward)
        torch_name, needs = self.context.imports.expression_for("torch")
        for node in iter_descendants(backward.body):
            if isinstance(node, cst.If) and _tests_tensor(node.test, tensors):
                self.report(node.test)
            elif isinstance(node, cst.IfExp) and _tests_tensor(node.test, tensors):
                fix = None
                if isinstance(node.test, cst.Comparison) and _branch_ok(node.body, tensors) and (_branch_ok(node.orelse, tensors) or _is_zero(node.orelse)):
                    fix = Fix(Applicability.UNSAFE, (Edit(node, _as_where(torch_name)),), "use `torch.where`", needs)
                self.report(node, fix=fix)


def _tensor_names(backward: cst.FunctionDef) -> set[str]:
    """The gradient parameters, names unpacked from `ctx.saved_tensors`, and names
    computed from those (one pass in source order)."""
    params = [*backward.params.posonly_params, *backward.params.params]
    names = {p.name.value for p in params[1:]}
    for node in iter_descendants(backward.body):
        if isinstance(node, cst.Assign):
            if _saved_tensors(node.value) or (_names_in(node.value) & names and _tensor_expression(node.value)):
                for target in node.targets:
                    names |= assigned_names(target.target)
    return names


def _names_in(node: cst.CSTNode) -> set[str]:
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


def _tests_tensor(test: cst.BaseExpression, tensors: set[str]) -> bool:
    """A comparison with a tensor on either side (`x > 0`, `grad == 0`), or a bare tensor."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _tests_tensor(test.expression, tensors)
    if isinstance(test, cst.BooleanOperation):
        return _tests_tensor(test.left, tensors) or _tests_tensor(test.right, tensors)
    if _is_tensor(test, tensors):
        return True
    if not isinstance(test, cst.Comparison) or not all(isinstance(c.operator, _ORDERING) for c in test.comparisons):
        return False
    return any(_is_tensor(operand, tensors) for operand in (test.left, *(c.comparator for c in test.comparisons)))


def _branch_ok(node: cst.BaseExpression, tensors: set[str]) -> bool:
    return bool(_names_in(node) & tensors) and not isinstance(node, (cst.Tuple, cst.List))


def _is_zero(node: cst.BaseExpression) -> bool:
    return (isinstance(node, cst.Integer) and node.evaluated_value == 0) or (isinstance(node, cst.Float) and node.evaluated_value == 0.0)


def _as_where(torch_name: cst.BaseExpression):  # type: ignore[no-untyped-def]
    def replace(updated: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(updated, cst.IfExp)
        plain = lambda e: e.with_changes(lpar=[], rpar=[]) if isinstance(e, (cst.Comparison, cst.BinaryOperation)) else e
        orelse = updated.orelse
        if _is_zero(orelse):
            orelse = cst.Call(cst.Attribute(torch_name, cst.Name("zeros_like")), [cst.Arg(plain(updated.body))])
        args = [cst.Arg(plain(updated.test)), cst.Arg(plain(updated.body)), cst.Arg(plain(orelse))]
        call = cst.Call(cst.Attribute(torch_name, cst.Name("where")), args)
        return call.with_changes(lpar=updated.lpar, rpar=updated.rpar)

    return replace
