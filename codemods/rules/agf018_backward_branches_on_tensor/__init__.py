"""AGF018 backward-branches-on-tensor: a custom `backward` that takes the truth value of a tensor."""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.rule import Contract, Rule
from autograd_fix.codemods.semantic.autograd_function import CustomFunction
from autograd_fix.codemods.semantic.tensor_truth import backward_tensors, names_in
from autograd_fix.codemods.walk import iter_descendants


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
    `.item()`, `.all()`, `.any()`, `is None`, `== None` and `ctx.needs_input_grad` give
    Python values and are left alone, and so are tests on a reduction to a single value
    (`x.abs().max() <= t`, `mask.sum() > 0`) and on a flag that every `save_for_backward`
    saves as a one-element tensor (`torch.ones(1)`, `torch.tensor([x.requires_grad])`):
    those are legal Python, raise nothing, and
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
    contract = Contract(
        description="the 'Boolean value of Tensor ... is ambiguous' error is gone and backward passes gradcheck in float64",
        checks=("original_error_gone", "gradcheck_passes"),
    )

    def leave_Module(self, original_node: cst.Module) -> None:
        for function in self.context.semantic.custom_functions:
            if function.backward is not None:
                self._check(function, function.backward)

    def _check(self, function: CustomFunction, backward: cst.FunctionDef) -> None:
        facts = backward_tensors(function, self.context.imports)
        if facts is None:
            return
        tensors = set(facts.names)
        torch_name, needs = self.context.imports.expression_for("torch")
        for node in iter_descendants(backward.body):
            if type(node) is cst.If and facts.tested(node.test):
                self.report(node.test)
            elif type(node) is cst.IfExp and facts.tested(node.test):
                fix = None
                if type(node.test) is cst.Comparison and _branch_ok(node.body, tensors) and (_branch_ok(node.orelse, tensors) or _is_zero(node.orelse)):
                    fix = Fix(Applicability.UNSAFE, (Edit(node, _as_where(torch_name)),), "use `torch.where`", needs)
                self.report(node, fix=fix)


def _branch_ok(node: cst.BaseExpression, tensors: set[str]) -> bool:
    return bool(names_in(node) & tensors) and type(node) not in (cst.Tuple, cst.List)


def _is_zero(node: cst.BaseExpression) -> bool:
    return (type(node) is cst.Integer and node.evaluated_value == 0) or (type(node) is cst.Float and node.evaluated_value == 0.0)


def _as_where(torch_name: cst.BaseExpression):  # type: ignore[no-untyped-def]
    def replace(updated: cst.CSTNode) -> cst.CSTNode:
        assert type(updated) is cst.IfExp
        plain = lambda e: e.with_changes(lpar=[], rpar=[]) if type(e) in (cst.Comparison, cst.BinaryOperation) else e
        orelse = updated.orelse
        if _is_zero(orelse):
            orelse = cst.Call(cst.Attribute(torch_name, cst.Name("zeros_like")), [cst.Arg(plain(updated.body))])
        args = [cst.Arg(plain(updated.test)), cst.Arg(plain(updated.body)), cst.Arg(plain(orelse))]
        call = cst.Call(cst.Attribute(torch_name, cst.Name("where")), args)
        return call.with_changes(lpar=updated.lpar, rpar=updated.rpar)

    return replace
