"""AGF007 non-tensor-in-save-for-backward: numbers, sizes and `.item()` results passed to `save_for_backward`."""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.autograd_function import (
    RESERVED_CTX_ATTRIBUTES,
    CustomFunction,
    SavedTensorsReads,
    ctx_attribute,
    ctx_holder_facts,
    custom_function,
    own_nodes,
    save_for_backward_calls,
    saved_tensors_reads,
    statement_of_call,
    tuple_without,
    without_args,
)
from autograd_fix.codemods.model import Applicability, Edit, Fix, invalid, valid
from autograd_fix.codemods.rule import Contract, Rule


class NonTensorInSaveForBackward(Rule):
    """
    ## What it does
    Finds values that are certainly not tensors (number or string literals, parameters
    annotated `int`/`float`/`bool`/`str`, `.item()` / `.size()` / `.shape` / `len()`
    results, tuples) passed to `ctx.save_for_backward` in a custom
    `torch.autograd.Function`, and stores them as `ctx` attributes instead, reading them
    back from there in `backward`.

    ## Why is this bad?
    `save_for_backward` accepts tensors (or None) only: the forward pass raises
    `TypeError: save_for_backward can only save variables, but argument 1 is of type
    float`. Python values need no version tracking and belong on `ctx` directly
    (`ctx.scale = scale`).

    ## Example
    ```python
    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale: float):
            ctx.save_for_backward(x, scale)
            return x * scale

        @staticmethod
        def backward(ctx, grad_output):
            x, scale = ctx.saved_tensors
            return grad_output * scale, None
    ```

    ## Use instead
    ```python
        @staticmethod
        def forward(ctx, x, scale: float):
            ctx.scale = scale
            ctx.save_for_backward(x)
            return x * scale

        @staticmethod
        def backward(ctx, grad_output):
            x, = ctx.saved_tensors
            scale = ctx.scale
            return grad_output * scale, None
    ```

    ## Fix safety
    Safe: the original raises on every call, and a Python value read back from a ctx
    attribute is the same object `backward` would have got. The rule fires only on
    values it can show are not tensors (a parameter without annotation, or anything it
    cannot classify, is left alone). The fix is withheld (report only) when `backward`
    reads `ctx.saved_tensors` in a way it cannot rewrite exactly (`saved = ctx.saved_tensors`,
    starred unpacking, a loop), when the call is not a statement of its own, or when the
    attribute name it would use is taken.

    ## Verification
    The original `TypeError` is gone and the fixed Function passes
    `torch.autograd.gradcheck` in float64.
    """

    code = "AGF007"
    name = "non-tensor-in-save-for-backward"
    safety = Applicability.SAFE
    message = "non-tensor passed to ctx.save_for_backward"
    triggers = ("save_for_backward",)
    contract = Contract(
        description="the 'save_for_backward can only save variables' TypeError is gone and the Function passes "
        "torch.autograd.gradcheck in float64",
        checks=("original_error_gone", "gradcheck_passes"),
    )

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        imports = self.context.imports
        function = custom_function(node, imports)
        if function is None:
            return
        holder = function.ctx_function()
        ctx = function.forward_ctx()
        facts = ctx_holder_facts(function, imports)
        if holder is None or ctx is None or facts is None:
            return
        calls = save_for_backward_calls(holder, ctx)
        for call in calls:
            bad = [
                index for index, arg in enumerate(call.args)
                if not arg.star and arg.keyword is None and facts.is_non_tensor(arg.value)
            ]
            if bad:
                self._report(function, holder, ctx, call, bad, single_call=len(calls) == 1)

    def _report(
        self,
        function: CustomFunction,
        holder: cst.FunctionDef,
        ctx: str,
        call: cst.Call,
        bad: list[int],
        single_call: bool,
    ) -> None:
        shown = ", ".join(f"`{cst.Module([]).code_for_node(call.args[i].value)}`" for i in bad)
        message = (
            f"{shown} {'is not a tensor' if len(bad) == 1 else 'are not tensors'}: `save_for_backward` raises "
            "TypeError; store it as a ctx attribute instead"
        )
        plan = _plan(function, holder, ctx, call, bad) if single_call else None
        self.report(call.args[bad[0]], message, plan)

    VALID = [
        # 1. tensors saved, the float kept on ctx (the correct pattern)
        valid(
            """
import torch

class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale: float):
        ctx.scale = scale
        ctx.save_for_backward(x)
        return x * scale

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return grad_output * ctx.scale, None
"""
        ),
        # 2. None is accepted by save_for_backward (optional bias)
        valid(
            """
import torch
from torch.autograd import Function

class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        if bias is not None:
            output += bias
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_bias = grad_output.sum(0) if bias is not None else None
        return grad_output.mm(weight), grad_output.t().mm(input), grad_bias
"""
        ),
        # 3. an unannotated parameter: could be a tensor, left alone
        valid(
            """
import torch

class Mul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, g * a
"""
        ),
        # 4. a number turned into a tensor first
        valid(
            """
import torch

class Clamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, limit: float):
        bound = torch.tensor(limit, dtype=x.dtype)
        ctx.save_for_backward(x, bound)
        return x.clamp(-limit, limit)

    @staticmethod
    def backward(ctx, g):
        x, bound = ctx.saved_tensors
        return g * (x.abs() <= bound), None
"""
        ),
        # 5. setup_context style saving the input tensors only
        valid(
            """
import torch

class Cube(torch.autograd.Function):
    @staticmethod
    def forward(x, power: int = 3):
        return x ** power

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, power = inputs
        ctx.save_for_backward(x)
        ctx.power = power

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * ctx.power * x ** (ctx.power - 1), None
"""
        ),
        # 6. results of torch ops are tensors
        valid(
            """
import torch

class SoftClip(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        t = torch.tanh(x)
        scale = x.abs().max()
        ctx.save_for_backward(t, scale)
        return t * scale

    @staticmethod
    def backward(ctx, g):
        t, scale = ctx.saved_tensors
        return g * (1 - t * t) * scale
"""
        ),
        # 7. not an autograd Function: some other save_for_backward
        valid(
            """
class Recorder:
    def save_for_backward(self, *values):
        self.values = values

def record(ctx: Recorder, x: float):
    ctx.save_for_backward(x, 1.0)
"""
        ),
        # 8. a tensor parameter annotated as such
        valid(
            """
import torch
from torch import Tensor

class Gate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, gate: Tensor):
        ctx.save_for_backward(x, gate)
        return x * gate

    @staticmethod
    def backward(ctx, g):
        x, gate = ctx.saved_tensors
        return g * gate, g * x
"""
        ),
    ]

    INVALID = [
        # 1. a float parameter saved with the tensor
        invalid(
            """
import torch

class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale: float):
        ctx.save_for_backward(x, scale)
        return x * scale

    @staticmethod
    def backward(ctx, grad_output):
        x, scale = ctx.saved_tensors
        return grad_output * scale, None
""",
            """
import torch

class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale: float):
        ctx.scale = scale
        ctx.save_for_backward(x)
        return x * scale

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        scale = ctx.scale
        return grad_output * scale, None
""",
        ),
        # 2. an `.item()` result (a Python number), with a comment kept in place
        invalid(
            """
import torch

class MaxNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        peak = x.abs().max().item()
        # keep what backward needs
        ctx.save_for_backward(x, peak)
        return x / peak

    @staticmethod
    def backward(ctx, grad_output):
        x, peak = ctx.saved_tensors
        return grad_output / peak
""",
            """
import torch

class MaxNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        peak = x.abs().max().item()
        # keep what backward needs
        ctx.peak = peak
        ctx.save_for_backward(x)
        return x / peak

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        peak = ctx.peak
        return grad_output / peak
""",
        ),
        # 3. a literal: the attribute takes the name backward unpacks it as
        invalid(
            """
import torch
from torch.autograd import Function

class LeakyClamp(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x, 0.01)
        return torch.where(x > 0, x, x * 0.01)

    @staticmethod
    def backward(ctx, g):
        x, slope = ctx.saved_tensors
        return torch.where(x > 0, g, g * slope)
""",
            """
import torch
from torch.autograd import Function

class LeakyClamp(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.slope = 0.01
        ctx.save_for_backward(x)
        return torch.where(x > 0, x, x * 0.01)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        slope = ctx.slope
        return torch.where(x > 0, g, g * slope)
""",
        ),
        # 4. the input's shape (a torch.Size) for reshaping the gradient
        invalid(
            """
import torch

class FlattenSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x.shape)
        return x.sum()

    @staticmethod
    def backward(ctx, g):
        shape, = ctx.saved_tensors
        return g.expand(shape)
""",
            """
import torch

class FlattenSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        return x.sum()

    @staticmethod
    def backward(ctx, g):
        shape = ctx.shape
        return g.expand(shape)
""",
        ),
        # 5. indexed reads: the removed index is read from ctx, later indices shift
        invalid(
            """
import torch

class PowerLaw(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, p: int, w):
        ctx.save_for_backward(x, p, w)
        return w * x ** p

    @staticmethod
    def backward(ctx, g):
        x = ctx.saved_tensors[0]
        w = ctx.saved_tensors[2]
        return g * w * ctx.saved_tensors[1] * x ** (ctx.saved_tensors[1] - 1), None, g * x ** ctx.saved_tensors[1]
""",
            """
import torch

class PowerLaw(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, p: int, w):
        ctx.p = p
        ctx.save_for_backward(x, w)
        return w * x ** p

    @staticmethod
    def backward(ctx, g):
        x = ctx.saved_tensors[0]
        w = ctx.saved_tensors[1]
        return g * w * ctx.p * x ** (ctx.p - 1), None, g * x ** ctx.p
""",
        ),
        # 6. setup_context style: the forward parameter's annotation carries over
        invalid(
            """
import torch

class Cube(torch.autograd.Function):
    @staticmethod
    def forward(x, power: int = 3):
        return x ** power

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, power = inputs
        ctx.save_for_backward(x, power)

    @staticmethod
    def backward(ctx, g):
        x, power = ctx.saved_tensors
        return g * power * x ** (power - 1), None
""",
            """
import torch

class Cube(torch.autograd.Function):
    @staticmethod
    def forward(x, power: int = 3):
        return x ** power

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, power = inputs
        ctx.power = power
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        power = ctx.power
        return g * power * x ** (power - 1), None
""",
        ),
        # 7. backward keeps the saved tuple around: report only
        invalid(
            """
import torch

class Huber(torch.autograd.Function):
    @staticmethod
    def forward(ctx, r, delta: float = 1.0):
        ctx.save_for_backward(r, delta)
        return torch.where(r.abs() < delta, 0.5 * r * r, delta * (r.abs() - 0.5 * delta))

    @staticmethod
    def backward(ctx, g):
        saved = ctx.saved_tensors
        r, delta = saved
        return g * r.clamp(-delta, delta), None
"""
        ),
        # 8. alias `import torch.autograd as ag`, two numbers and a parenthesized unpacking
        invalid(
            """
import torch
import torch.autograd as ag

class Focal(ag.Function):
    @staticmethod
    def forward(ctx, p, gamma: float, eps: float):
        ctx.save_for_backward(p, gamma, eps)
        return -((1 - p) ** gamma) * torch.log(p + eps)

    @staticmethod
    def backward(ctx, g):
        (p, gamma, eps) = ctx.saved_tensors
        d = gamma * (1 - p) ** (gamma - 1) * torch.log(p + eps) - (1 - p) ** gamma / (p + eps)
        return g * d, None, None
""",
            """
import torch
import torch.autograd as ag

class Focal(ag.Function):
    @staticmethod
    def forward(ctx, p, gamma: float, eps: float):
        ctx.gamma = gamma
        ctx.eps = eps
        ctx.save_for_backward(p)
        return -((1 - p) ** gamma) * torch.log(p + eps)

    @staticmethod
    def backward(ctx, g):
        (p,) = ctx.saved_tensors
        gamma = ctx.gamma
        eps = ctx.eps
        d = gamma * (1 - p) ** (gamma - 1) * torch.log(p + eps) - (1 - p) ** gamma / (p + eps)
        return g * d, None, None
""",
        ),
    ]


def _plan(function: CustomFunction, holder: cst.FunctionDef, ctx: str, call: cst.Call, bad: list[int]) -> Fix | None:
    """The fix: `ctx.<name> = value` before the call, the value dropped from the call and
    from backward's unpacking (`name = ctx.<name>` after it; `ctx.saved_tensors[i]` -> `ctx.<name>`)."""
    backward = function.backward
    backward_ctx = function.backward_ctx()
    located = statement_of_call(holder, call)
    if backward is None or backward_ctx is None or located is None:
        return None
    reads = saved_tensors_reads(backward, backward_ctx)
    if not reads.understood:
        return None
    if reads.target is not None and len(reads.target.elements) != len(call.args):
        return None
    names = _attribute_names(call, bad, reads)
    if names is None or not _names_free(function, holder, ctx, names, call, bad):
        return None
    _, line = located
    removed = set(bad)
    stores = [
        cst.SimpleStatementLine(
            [cst.Assign([cst.AssignTarget(cst.Attribute(cst.Name(ctx), cst.Name(name)))], call.args[index].value)]
        )
        for index, name in zip(bad, names)
    ]
    edits = [Edit(line, lambda updated: _replace_save_line(updated, stores, removed, len(call.args)))]
    if reads.line is not None and reads.target is not None:
        target = reads.target
        loads = [
            (target.elements[index].value.value, name)  # type: ignore[union-attr]
            for index, name in zip(bad, names)
            if target.elements[index].value.value != "_"  # type: ignore[union-attr]
        ]
        edits.append(Edit(reads.line, lambda updated: _replace_unpack_line(updated, removed, loads, backward_ctx)))
    by_index = dict(zip(bad, names))
    for subscript, index in reads.subscripts:
        if index >= len(call.args):
            return None
        if index in by_index:
            replacement: cst.BaseExpression = cst.Attribute(cst.Name(backward_ctx), cst.Name(by_index[index]))
            edits.append(Edit(subscript, lambda updated, r=replacement: r.with_changes(lpar=updated.lpar, rpar=updated.rpar)))
        else:
            shift = sum(1 for b in bad if b < index)
            if shift:
                new_index = index - shift
                edits.append(Edit(subscript, lambda updated, n=new_index: _reindex(updated, n)))
    return Fix(
        applicability=Applicability.SAFE,
        edits=tuple(edits),
        description="store non-tensors as ctx attributes instead of save_for_backward",
    )


def _attribute_names(call: cst.Call, bad: list[int], reads: SavedTensorsReads) -> list[str] | None:
    """Attribute name per bad argument: the argument's own name, else backward's unpacked name."""
    names = []
    for index in bad:
        value = call.args[index].value
        name: str | None = None
        if isinstance(value, cst.Name):
            name = value.value
        elif reads.target is not None:
            element = reads.target.elements[index].value
            if isinstance(element, cst.Name) and element.value != "_":
                name = element.value
        elif isinstance(value, cst.Attribute) and value.attr.value == "shape":
            name = "shape"
        if name is None or name in RESERVED_CTX_ATTRIBUTES or name.startswith("__"):
            return None
        names.append(name)
    if len(set(names)) != len(names):
        return None
    return names


def _names_free(
    function: CustomFunction, holder: cst.FunctionDef, ctx: str, names: list[str], call: cst.Call, bad: list[int]
) -> bool:
    """No ctx attribute of these names is already set anywhere in the class."""
    wanted = set(names)
    for method in (function.forward, function.setup_context, function.backward):
        if method is None:
            continue
        params = tuple(method.params.posonly_params) + tuple(method.params.params)
        if not params:
            continue
        method_ctx = params[0].name.value
        for node in own_nodes(method, cst.Attribute):
            if ctx_attribute(node, method_ctx) in wanted:
                return False
    return True


def _replace_save_line(
    updated: cst.CSTNode, stores: list[cst.SimpleStatementLine], removed: set[int], total: int
) -> cst.CSTNode:
    assert isinstance(updated, cst.SimpleStatementLine)
    expr = updated.body[0]
    assert isinstance(expr, cst.Expr) and isinstance(expr.value, cst.Call)
    first = stores[0].with_changes(leading_lines=updated.leading_lines)
    new_stores = [first, *stores[1:]]
    if len(removed) == total:
        return cst.FlattenSentinel(new_stores)
    call = without_args(expr.value, removed)
    rest = updated.with_changes(leading_lines=(), body=[expr.with_changes(value=call)])
    return cst.FlattenSentinel([*new_stores, rest])


def _replace_unpack_line(
    updated: cst.CSTNode, removed: set[int], loads: list[tuple[str, str]], ctx: str
) -> cst.CSTNode:
    assert isinstance(updated, cst.SimpleStatementLine)
    assign = updated.body[0]
    assert isinstance(assign, cst.Assign)
    target = assign.targets[0].target
    assert isinstance(target, (cst.Tuple, cst.List))
    lines = [
        cst.SimpleStatementLine(
            [cst.Assign([cst.AssignTarget(cst.Name(local))], cst.Attribute(cst.Name(ctx), cst.Name(attribute)))]
        )
        for local, attribute in loads
    ]
    remaining = tuple_without(target, removed)
    if remaining is None:
        if not lines:
            return cst.RemovalSentinel.REMOVE
        lines[0] = lines[0].with_changes(leading_lines=updated.leading_lines)
        return cst.FlattenSentinel(lines)
    kept = updated.with_changes(body=[assign.with_changes(targets=[assign.targets[0].with_changes(target=remaining)])])
    return cst.FlattenSentinel([kept, *lines])


def _reindex(updated: cst.CSTNode, index: int) -> cst.CSTNode:
    assert isinstance(updated, cst.Subscript)
    element = updated.slice[0]
    assert isinstance(element.slice, cst.Index)
    return updated.with_changes(
        slice=[element.with_changes(slice=element.slice.with_changes(value=cst.Integer(str(index))))]
    )
