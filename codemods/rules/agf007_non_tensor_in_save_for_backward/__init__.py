"""AGF007 non-tensor-in-save-for-backward: numbers, sizes and `.item()` results passed to `save_for_backward`."""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.semantic.autograd_function import (
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
from autograd_fix.codemods.model import Applicability, Edit, Fix
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
            (x,) = ctx.saved_tensors
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
        if type(value) is cst.Name:
            name = value.value
        elif reads.target is not None:
            element = reads.target.elements[index].value
            if type(element) is cst.Name and element.value != "_":
                name = element.value
        elif type(value) is cst.Attribute and value.attr.value == "shape":
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
    assert type(updated) is cst.SimpleStatementLine
    expr = updated.body[0]
    assert type(expr) is cst.Expr and type(expr.value) is cst.Call
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
    assert type(updated) is cst.SimpleStatementLine
    assign = updated.body[0]
    assert type(assign) is cst.Assign
    target = assign.targets[0].target
    assert type(target) in (cst.Tuple, cst.List)
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
    assert type(updated) is cst.Subscript
    element = updated.slice[0]
    assert type(element.slice) is cst.Index
    return updated.with_changes(
        slice=[element.with_changes(slice=element.slice.with_changes(value=cst.Integer(str(index))))]
    )
