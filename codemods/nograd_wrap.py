"""Wrap consecutive statements of one block in a single `with torch.no_grad():`.

Used by rules whose fix is "this in-place update of a leaf belongs under no_grad"
(AGF003, AGF009), and AGF001's decoration and `with` wraps of evaluation code. The wrap composes with other edits: every statement's *updated* node
(after nested fixes) ends up inside the `with`, and comments stay where they were (the
first statement's leading comments move above the `with`).
"""

from __future__ import annotations

from typing import Sequence

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.model import Edit


def no_grad_wrap_edits(
    statements: Sequence[cst.SimpleStatementLine], imports: ImportIndex
) -> tuple[tuple[Edit, ...], tuple[str, ...]]:
    """Edits putting `statements` (consecutive, same block) under one `with torch.no_grad():`.

    All but the last statement are removed from the block; the last one is replaced by
    the `with`, built from every statement's updated node (libcst visits siblings in
    order, so the earlier ones are collected first).
    """
    if not statements:
        return (), ()
    expression, needs = imports.expression_for("torch.no_grad")
    collected: dict[int, cst.BaseStatement] = {}

    def take(index: int):
        def replace(updated: cst.CSTNode):
            collected[index] = updated  # type: ignore[assignment]
            return cst.RemovalSentinel.REMOVE

        return replace

    def wrap(updated: cst.CSTNode) -> cst.CSTNode:
        body = [collected[i] for i in range(len(statements) - 1) if i in collected] + [updated]
        leading = body[0].leading_lines  # type: ignore[union-attr]
        body[0] = body[0].with_changes(leading_lines=())  # type: ignore[union-attr]
        return cst.With(
            items=[cst.WithItem(item=cst.Call(func=expression))],
            body=cst.IndentedBlock(body=body),  # type: ignore[arg-type]
            leading_lines=leading,
        )

    edits = [Edit(statement, take(i)) for i, statement in enumerate(statements[:-1])]
    edits.append(Edit(statements[-1], wrap))
    return tuple(edits), needs


def consecutive_runs(items: Sequence[tuple[int, int, object]]) -> list[list[object]]:
    """Group `(block, index, payload)` triples into runs of consecutive indices per block."""
    runs: list[list[object]] = []
    previous: tuple[int, int] | None = None
    for block, index, payload in sorted(items, key=lambda t: (t[0], t[1])):
        if previous is not None and previous == (block, index - 1):
            runs[-1].append(payload)
        else:
            runs.append([payload])
        previous = (block, index)
    return runs


def decorate(function: cst.CSTNode, call: cst.Call) -> cst.CSTNode:
    """`function` with `@<call>` added as its innermost decorator (AGF001's function fix)."""
    assert type(function) is cst.FunctionDef
    return function.with_changes(decorators=[*function.decorators, cst.Decorator(decorator=call)])


def wrap_in_with(loop: cst.CSTNode, call: cst.Call) -> cst.CSTNode:
    """`with <call>:` around a whole loop (AGF001's loop fix)."""
    assert type(loop) in (cst.For, cst.While)
    inner = loop.with_changes(leading_lines=())
    return cst.With(items=[cst.WithItem(item=call)], body=cst.IndentedBlock(body=[inner]),
                    leading_lines=loop.leading_lines)


def wrap_statements(block: cst.CSTNode, first: int, last: int, call: cst.Call) -> cst.CSTNode:
    """`with torch.no_grad():` around statements `first..last` of an indented block."""
    assert type(block) is cst.IndentedBlock
    body = list(block.body)
    inner = [body[first].with_changes(leading_lines=()), *body[first + 1 : last + 1]]
    wrapped = cst.With(items=[cst.WithItem(item=call)], body=cst.IndentedBlock(body=inner),
                       leading_lines=body[first].leading_lines)
    return block.with_changes(body=[*body[:first], wrapped, *body[last + 1 :]])
