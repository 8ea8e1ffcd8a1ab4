"""Rewrites of `.data` mutations that only a run can judge (AGF009's unsafe fixes).

Two shapes, both exact in what they compute, both uncertain in what the program meant:

- `h.data.mul_(2)` on a non-leaf tensor an op saved for backward becomes `h = h.mul(2)`:
  the same values, now recorded by autograd, so backward sees the tensor it saved instead
  of a silently changed one. Other names holding the old `h` no longer see the change.
- `w.data = value` on a leaf becomes `w.copy_(value)` under `torch.no_grad()`: the same
  values when the shapes and dtypes match; `copy_` raises (or casts) where the original
  swapped in a tensor of another shape (or dtype).

Both are offered as unsafe fixes: verification runs the file and keeps them only when the
forward values agree and the gradients are equal or corrected.
"""

from __future__ import annotations

import libcst as cst

#: in-place methods with a differentiable out-of-place twin (`mul_` -> `mul`). Methods
#: whose derivative is zero almost everywhere (`round_`, `sign_`, `floor_`), or that
#: overwrite the values (`zero_`, `fill_`, `copy_`, `uniform_`), are straight-through or
#: reset tricks: out of place they would stop every gradient, and a run that checks
#: gradients against finite differences would call that a correction.
OUT_OF_PLACE_METHODS = frozenset(
    {
        "add_", "sub_", "mul_", "div_", "true_divide_", "neg_", "abs_", "pow_", "sqrt_", "rsqrt_",
        "exp_", "log_", "reciprocal_", "square_", "sigmoid_", "tanh_", "relu_", "clamp_", "clamp_min_",
        "clamp_max_", "clip_", "masked_fill_", "addcmul_", "addcdiv_", "lerp_",
    }
)

_AUGMENTED = {
    cst.AddAssign: "add",
    cst.SubtractAssign: "sub",
    cst.MultiplyAssign: "mul",
    cst.DivideAssign: "div",
}


def _inplace_chain(call: cst.BaseExpression) -> tuple[list[cst.Call], cst.BaseExpression]:
    """`a.data.mul_(2).add_(1)` -> ([add_ call, mul_ call], `a.data`)."""
    calls: list[cst.Call] = []
    node = call
    while type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value.endswith("_"):
        calls.append(node)
        node = node.func.value
    return calls, node


def _data_of_name(node: cst.BaseExpression) -> str | None:
    """`h.data` -> "h"; anything else (subscripts, attributes of attributes) -> None."""
    if type(node) is cst.Attribute and node.attr.value == "data" and type(node.value) is cst.Name:
        return node.value.value
    return None


def out_of_place_name(small: cst.BaseSmallStatement) -> str | None:
    """The name `small` mutates through `.data` when it can be rebound out of place, else None."""
    if type(small) is cst.Expr:
        calls, base = _inplace_chain(small.value)
        if not calls or any(c.func.attr.value not in OUT_OF_PLACE_METHODS for c in calls):  # type: ignore[attr-defined]
            return None
        return _data_of_name(base)
    if type(small) is cst.AugAssign and type(small.operator) in _AUGMENTED:
        return _data_of_name(small.target)
    return None


def out_of_place(updated: cst.CSTNode) -> cst.CSTNode:
    """`h.data.mul_(2)` -> `h = h.mul(2)`; `h.data += y` -> `h = h.add(y)` (an Edit's replace)."""
    if type(updated) is cst.AugAssign:
        name = _data_of_name(updated.target)
        assert name is not None
        method = _AUGMENTED[type(updated.operator)]
        value: cst.BaseExpression = cst.Call(cst.Attribute(cst.Name(name), cst.Name(method)), args=[cst.Arg(updated.value)])
        return cst.Assign([cst.AssignTarget(cst.Name(name))], value, semicolon=updated.semicolon)
    assert type(updated) is cst.Expr
    calls, base = _inplace_chain(updated.value)
    name = _data_of_name(base)
    assert name is not None and calls
    value = cst.Name(name)
    for call in reversed(calls):
        func = call.func
        assert type(func) is cst.Attribute
        value = call.with_changes(func=func.with_changes(value=value, attr=cst.Name(func.attr.value[:-1])))
    return cst.Assign([cst.AssignTarget(cst.Name(name))], value, semicolon=updated.semicolon)


#: methods whose result shares storage with their receiver
_VIEWS = frozenset(
    {"detach", "view", "view_as", "reshape", "t", "transpose", "permute", "expand", "expand_as",
     "narrow", "squeeze", "unsqueeze", "flatten", "unflatten", "as_strided", "select", "unfold", "diagonal", "real"}
)


def shares_storage(value: cst.BaseExpression) -> bool:
    """Could `value` be a tensor someone else holds (`other`, `enc.weight.data`, `w.t()`,
    `x[:, keep]`)? Then `w.data = value` ties the two (weight tying) and `copy_` would not;
    a run that compares gradients with finite differences cannot see that, so the fix is
    withheld. A computed value (`F.normalize(w.detach(), dim=1)`) is fresh."""
    node = value
    while True:
        if type(node) in (cst.Name, cst.Subscript, cst.Attribute):
            return True
        if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in _VIEWS:
            node = node.func.value
            continue
        return False


def copy_into(updated: cst.CSTNode) -> cst.CSTNode:
    """`w.data = value` -> `w.copy_(value)` (an Edit's replace; the no_grad wrap is separate)."""
    assert type(updated) is cst.Assign and len(updated.targets) == 1
    target = updated.targets[0].target
    assert type(target) is cst.Attribute and target.attr.value == "data"
    call = cst.Call(cst.Attribute(target.value, cst.Name("copy_")), args=[cst.Arg(updated.value)])
    return cst.Expr(call, semicolon=updated.semicolon)
