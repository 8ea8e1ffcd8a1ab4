"""What the forward/backward of a custom autograd Function do with `ctx` attributes.

Which attributes a method reads, writes (and how often), which ctx methods it calls,
and which of backward's top-level lines merely alias an attribute (`z = ctx.z`), so a
rule moving tensors into `save_for_backward` can unpack them straight into those names.
Syntactic and per method: a use it cannot pair (a starred unpacking, `setattr`) makes
the answer "unknown" rather than a guess.
"""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.semantic.autograd_function import (
    all_nodes,
    ctx_attribute,
    rebound_names,
    return_statements,
    returned_elements,
    top_level_body,
)
from autograd_fix.codemods.walk import iter_descendants


def _has_comments(line: cst.SimpleStatementLine) -> bool:
    return any(e.comment is not None for e in line.leading_lines) or line.trailing_whitespace.comment is not None


def assigned_pairs(target: cst.BaseExpression, value: cst.BaseExpression) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """`a = x` -> [(a, x)]; `a, b = x, y` -> [(a, x), (b, y)] (sru's `ctx.forget, ctx.reset =
    forget, reset`); an unpacking of anything else binds nothing we can pair."""
    if type(target) not in (cst.Tuple, cst.List):
        return [(target, value)]
    if type(value) not in (cst.Tuple, cst.List) or len(value.elements) != len(target.elements):
        return []
    if any(type(e) is cst.StarredElement for e in (*target.elements, *value.elements)):
        return []
    return [(t.value, v.value) for t, v in zip(target.elements, value.elements)]


def assign_target_value(line: cst.SimpleStatementLine) -> tuple[cst.BaseExpression, cst.BaseExpression]:
    assign = line.body[0]
    assert type(assign) is cst.Assign
    return assign.targets[0].target, assign.value


def backward_aliases(
    backward: cst.FunctionDef, ctx: str, attributes: set[str]
) -> dict[str, tuple[str, cst.SimpleStatementLine]]:
    """attribute -> (name, line) for backward's top-level `name = ctx.<attribute>` (or
    `a, b = ctx.a, ctx.b`) lines: unpacking `ctx.saved_tensors` straight into `name`
    makes the line redundant. Only when the line binds nothing else, carries no
    comment, and `name` is bound nowhere else in backward."""
    body = top_level_body(backward)
    found: dict[str, tuple[str, cst.SimpleStatementLine]] = {}
    for position, statement in enumerate(body):
        if not (type(statement) is cst.SimpleStatementLine and len(statement.body) == 1):
            continue
        assign = statement.body[0]
        if type(assign) is not cst.Assign or len(assign.targets) != 1 or _has_comments(statement):
            continue
        pairs = assigned_pairs(assign.targets[0].target, assign.value)
        named = [(t.value, ctx_attribute(v, ctx)) for t, v in pairs if type(t) is cst.Name]
        if not pairs or len(named) != len(pairs) or any(a not in attributes for _, a in named):
            continue
        others = rebound_names(body[:position] + body[position + 1 :]) | set(param_names(backward))
        if any(name in others for name, _ in named) or len({n for n, _ in named}) != len(named):
            continue
        for name, attribute in named:
            assert attribute is not None
            found.setdefault(attribute, (name, statement))
    return found


def param_names(function: cst.FunctionDef) -> list[str]:
    params = function.params
    return [p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)]


def own_returns_in(statement: cst.CSTNode) -> bool:
    """Does the statement contain a `return` (outside nested functions, lambdas, classes)?"""
    nested = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
    return any(
        type(node) is cst.Return
        for node in iter_descendants(statement, prune=lambda n: isinstance(n, nested))
    )


def ctx_reads(node: cst.CSTNode, ctx: str) -> set[str]:
    """Attributes read as `ctx.<name>` anywhere under `node` (stores excluded)."""
    stored = {id(t) for t in ctx_targets(node)}
    return {
        a.attr.value
        for a in all_nodes(node, cst.Attribute)
        if ctx_attribute(a, ctx) is not None and id(a) not in stored
    }


def ctx_targets(node: cst.CSTNode) -> list[cst.CSTNode]:
    targets: list[cst.CSTNode] = []
    for assign in all_nodes(node, cst.Assign):
        targets += [t.target for t in assign.targets]
    targets += [a.target for a in all_nodes(node, cst.AugAssign)]
    targets += [a.target for a in all_nodes(node, cst.AnnAssign)]
    targets += [d.target for d in all_nodes(node, cst.Del)]
    expanded: dict[int, cst.CSTNode] = {}
    for target in targets:
        for node in (target, *all_nodes(target, cst.Attribute)):
            expanded[id(node)] = node
    return list(expanded.values())


def ctx_writes(node: cst.CSTNode, ctx: str) -> set[str]:
    return {name for t in ctx_targets(node) if (name := ctx_attribute(t, ctx)) is not None}


def ctx_write_counts(node: cst.CSTNode, ctx: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for target in ctx_targets(node):
        name = ctx_attribute(target, ctx)
        if name is not None:
            counts[name] = counts.get(name, 0) + 1
    for call in all_nodes(node, cst.Call):  # setattr(ctx, "x", ...) and friends: unknowable
        if type(call.func) is cst.Name and call.func.value in ("setattr", "delattr"):
            for arg in call.args[1:2]:
                if type(arg.value) is cst.SimpleString:
                    counts[str(arg.value.evaluated_value)] = 99
    return counts


def ctx_method_called(node: cst.CSTNode, ctx: str, method: str) -> bool:
    return any(
        type(c.func) is cst.Attribute and ctx_attribute(c.func, ctx) == method for c in all_nodes(node, cst.Call)
    )


def kept_output(holder: cst.FunctionDef, position: int, value: cst.BaseExpression) -> bool:
    """Is `value`, stored on ctx by top-level statement `position` of forward, forward's
    own output? A plain name that every `return` hands back (alone or in a tuple), where
    every `return` comes after the store and the name is not rebound after it. Such a
    store is the cycle output -> grad_fn -> ctx -> output."""
    body = top_level_body(holder)
    returns = return_statements(holder)
    if type(value) is not cst.Name or not returns or position >= len(body):
        return False
    if any(own_returns_in(statement) for statement in body[: position + 1]):
        return False
    if value.value in rebound_names(body[position + 1 :]):
        return False
    for node in returns:
        elements = returned_elements(node)
        if elements is None or not any(type(e) is cst.Name and e.value == value.value for e in elements):
            return False
    return True
