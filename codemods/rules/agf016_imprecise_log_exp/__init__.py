"""AGF016 imprecise-log-exp: `log(1 + x)`, `exp(x) - 1`, `log(sum(exp(x), dim))` on tensors."""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.rule import Contract, Rule
from autograd_fix.codemods.torch_api import EXP, EXPM1, LOG, LOG1P, LOGSUMEXP, SUM


class ImpreciseLogExp(Rule):
    """
    ## What it does
    Finds `torch.log(1 + x)` (or `x + 1`), `torch.exp(x) - 1` and
    `torch.log(torch.sum(torch.exp(x), dim))`, and rewrites them to `torch.log1p(x)`,
    `torch.expm1(x)` and `torch.logsumexp(x, dim)`.

    ## Why is this bad?
    For small `x`, `1 + x` and `exp(x)` round to a float close to 1 and the
    subtraction or logarithm that follows keeps only the rounding error: in float32,
    `torch.log(1 + 1e-8)` is 0 where `log1p` gives 1e-8, and the gradient of the loss
    through it loses the same digits. `exp(x)` overflows to `inf` for `x > 88` in float32,
    so the naive log-sum-exp returns `inf` and its gradient `nan`, where `logsumexp`
    subtracts the maximum first and stays finite (TorchFix's TOR106, TOR107, TOR108).

    ## Example
    ```python
    log_probs = torch.log(1 + p)
    delta = torch.exp(log_scale) - 1
    lse = torch.log(torch.sum(torch.exp(logits), dim=1))
    ```

    ## Use instead
    ```python
    log_probs = torch.log1p(p)
    delta = torch.expm1(log_scale)
    lse = torch.logsumexp(logits, dim=1)
    ```

    ## Fix safety
    Unsafe: the results change in their last digits (that is the point), and where the
    naive form overflowed they change from `inf`/`nan` to finite values. The rule matches
    by qualified name only (`torch.log`, not `math.log` or `np.log`, so Python floats and
    NumPy arrays are never touched), only with the literal `1` / `1.0` (a tensor `1` could
    broadcast to another shape or promote the dtype), and `log(sum(exp(x)))` only with an
    explicit `dim` that is not `None` (`logsumexp` requires one; pytorch/pytorch#144339)
    and no `dtype=` on the sum. `torch.exp(x) - 1` with the `exp` on the right, or method
    spellings (`x.exp() - 1`), are not matched.

    ## Verification
    The original is run once more in float64 as the reference: every value and gradient
    of the rewritten float32 run must be close to it, or at least as close as the
    original's (where the naive form overflows, only close to it); other outputs and
    printed lines must equal the reference's or the original's.
    """

    code = "AGF016"
    name = "imprecise-log-exp"
    safety = Applicability.UNSAFE
    message = "imprecise log/exp composition"
    contract = Contract(
        description="values and gradients at least as close to a float64 reference run of the original as the original's",
        checks=("closer_to_float64_reference",),
    )

    def visit_Call(self, node: cst.Call) -> None:
        imports = self.context.imports
        if imports.qualified_name(node.func) not in LOG:
            return
        argument = _only_positional(node)
        if argument is None:
            return
        summed = _logsumexp_parts(argument, imports)
        if summed is not None:
            inner, dim_args = summed
            self._rewrite(node, LOGSUMEXP, [inner, *dim_args], "use the numerically stable `torch.logsumexp`")
            return
        operand = _one_plus(argument)
        if operand is not None:
            self._rewrite(node, LOG1P, [cst.Arg(operand)], "`torch.log(1 + x)` loses precision for small `x`: use `torch.log1p(x)`")

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if not (type(node.operator) is cst.Subtract and _is_one(node.right) and type(node.left) is cst.Call):
            return
        call = node.left
        if call.lpar or self.context.imports.qualified_name(call.func) not in EXP:
            return
        argument = _only_positional(call)
        if argument is not None:
            self._rewrite(node, EXPM1, [cst.Arg(argument)], "`torch.exp(x) - 1` loses precision for small `x`: use `torch.expm1(x)`")

    def _rewrite(self, node: cst.BaseExpression, qualified: str, args: list[cst.Arg], message: str) -> None:
        func, needs = self.context.imports.expression_for(qualified)
        last = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        replacement = cst.Call(func=func, args=[*args[:-1], last])

        def replace(updated: cst.CSTNode) -> cst.CSTNode:
            return replacement

        fix = Fix(Applicability.UNSAFE, (Edit(node, replace),), f"use `{qualified}`", needs)
        self.report(node, message, fix)


def _only_positional(call: cst.Call) -> cst.BaseExpression | None:
    """The single positional argument of a one-argument call (no keywords, no stars)."""
    if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        return None
    return call.args[0].value


def _is_one(node: cst.BaseExpression) -> bool:
    if node.lpar:
        return False
    if type(node) is cst.Integer:
        return node.evaluated_value == 1
    return type(node) is cst.Float and node.evaluated_value == 1.0


def _is_number(node: cst.BaseExpression) -> bool:
    return type(node) in (cst.Integer, cst.Float) or (
        type(node) is cst.UnaryOperation and type(node.expression) in (cst.Integer, cst.Float)
    )


def _one_plus(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """`x` of `1 + x` / `x + 1` (literal one, x not itself a number)."""
    if not (type(node) is cst.BinaryOperation and type(node.operator) is cst.Add) or node.lpar:
        return None
    if _is_one(node.left):
        operand = node.right
    elif _is_one(node.right):
        operand = node.left
    else:
        return None
    return None if _is_number(operand) else operand


def _logsumexp_parts(node: cst.BaseExpression, imports: ImportIndex) -> tuple[cst.Arg, list[cst.Arg]] | None:
    """`(x, [dim args])` of `torch.sum(torch.exp(x), dim[, keepdim])` with a dim that is not None."""
    if type(node) is not cst.Call or node.lpar or imports.qualified_name(node.func) not in SUM:
        return None
    if not node.args or node.args[0].keyword is not None or node.args[0].star:
        return None
    exp_call = node.args[0].value
    if type(exp_call) is not cst.Call or imports.qualified_name(exp_call.func) not in EXP:
        return None
    inner = _only_positional(exp_call)
    rest = list(node.args[1:])
    if inner is None or not rest or any(a.star for a in rest):
        return None
    keywords = [a.keyword.value for a in rest if a.keyword is not None]
    positional = [a for a in rest if a.keyword is None]
    if set(keywords) - {"dim", "keepdim"} or len(positional) > 2:
        return None
    dim = positional[0].value if positional else next((a.value for a in rest if a.keyword and a.keyword.value == "dim"), None)
    if dim is None or (type(dim) is cst.Name and dim.value == "None"):
        return None
    return cst.Arg(inner), rest
