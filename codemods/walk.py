"""A fast, read-only traversal of libcst trees for the rules' analyses.

`node.visit(visitor)` in libcst rebuilds every node it passes (its visitors double as
transformers), which makes each analysis walk cost several times a parse. Rules only
read the tree, so `walk` calls a visitor's `visit_<Type>` / `leave_<Type>` methods over
the syntactic children directly: same protocol (a `visit_*` returning False skips the
node's children), no rebuilding. Whitespace, parentheses, commas and other formatting
nodes are not visited: no rule reasons about them (`# noqa` is read from the text).

Children are visited in the order the node's dataclass declares its fields, which is
source order for every node rules walk except decorators (visited after a function's
body); order-sensitive analyses walk statements themselves.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Iterator

import libcst as cst

_FORMATTING_FIELDS = frozenset(
    {
        "lpar", "rpar", "lbracket", "rbracket", "lbrace", "rbrace", "comma", "semicolon", "colon",
        "leading_lines", "lines_after_decorators", "header", "footer", "trailing_whitespace",
        "equal", "star", "dot", "operator", "whitespace_after_at", "newline", "first_line",
        "empty_lines", "lines_after_decorators", "asynchronous", "whitespace_before_colon",
    }
)


@functools.lru_cache(maxsize=None)
def _child_fields(node_type: type) -> tuple[str, ...]:
    return tuple(
        field.name
        for field in dataclasses.fields(node_type)
        if field.name not in _FORMATTING_FIELDS and not field.name.startswith("whitespace")
    )


@functools.lru_cache(maxsize=None)
def _is_node_type(value_type: type) -> bool:
    # CSTNode is an ABC: a cached issubclass per type beats isinstance per value
    return issubclass(value_type, cst.CSTNode)


def iter_children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Syntactic children of `node` (no formatting nodes), in field order."""
    for name in _child_fields(type(node)):
        value = getattr(node, name)
        value_type = type(value)
        if value_type is list or value_type is tuple:
            for item in value:
                if _is_node_type(type(item)):
                    yield item
        elif _is_node_type(value_type):
            yield value


def iter_descendants(node: cst.CSTNode, prune: Callable[[cst.CSTNode], bool] | None = None) -> Iterator[cst.CSTNode]:
    """`node` and everything below it, pre-order; `prune(n)` True skips n's subtree."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if prune is not None and current is not node and prune(current):
            continue
        children = list(iter_children(current))
        children.reverse()
        stack.extend(children)


@functools.lru_cache(maxsize=None)
def _handlers(visitor_type: type, node_type: type) -> tuple[str | None, str | None]:
    name = node_type.__name__
    visit = f"visit_{name}" if callable(getattr(visitor_type, f"visit_{name}", None)) else None
    leave = f"leave_{name}" if callable(getattr(visitor_type, f"leave_{name}", None)) else None
    return visit, leave


def _overrides(visitor_type: type, method: str) -> bool:
    return getattr(visitor_type, method, None) is not getattr(cst.CSTVisitor, method)


def walk(node: cst.CSTNode, visitor: object) -> None:
    """Run a read-only visitor's `visit_*`/`leave_*` methods over `node`'s subtree.

    A visitor that overrides libcst's generic `on_visit` / `on_leave` gets those called
    for every node instead (they usually dispatch to `visit_*` themselves).
    """
    visitor_type = type(visitor)
    generic_visit = visitor.on_visit if _overrides(visitor_type, "on_visit") else None  # type: ignore[attr-defined]
    generic_leave = visitor.on_leave if _overrides(visitor_type, "on_leave") else None  # type: ignore[attr-defined]
    # an explicit stack (no recursion limit on deep trees): (node, leaving?)
    stack: list[tuple[cst.CSTNode, bool]] = [(node, False)]
    while stack:
        current, leaving = stack.pop()
        visit, leave = _handlers(visitor_type, type(current))
        if leaving:
            if generic_leave is not None:
                generic_leave(current)
            else:
                getattr(visitor, leave)(current)  # type: ignore[arg-type]
            continue
        if generic_visit is not None:
            if not generic_visit(current):
                continue
        elif visit is not None and getattr(visitor, visit)(current) is False:
            continue
        if leave is not None or generic_leave is not None:
            stack.append((current, True))
        children = list(iter_children(current))
        for child in reversed(children):
            stack.append((child, False))


def walk_batched(node: cst.CSTNode, visitors: list[cst.BatchableCSTVisitor]) -> None:
    """libcst's `visit_batched`, without rebuilding: every visitor sees every node."""
    table: dict[type, tuple[list[Callable], list[Callable]]] = {}
    stack: list[tuple[cst.CSTNode, bool]] = [(node, False)]
    while stack:
        current, leaving = stack.pop()
        node_type = type(current)
        handlers = table.get(node_type)
        if handlers is None:
            visits, leaves = [], []
            for visitor in visitors:
                visit, leave = _handlers(type(visitor), node_type)
                if visit is not None:
                    visits.append(getattr(visitor, visit))
                if leave is not None:
                    leaves.append(getattr(visitor, leave))
            handlers = table[node_type] = (visits, leaves)
        if leaving:
            for leave in handlers[1]:
                leave(current)
            continue
        for visit in handlers[0]:
            visit(current)
        if handlers[1]:
            stack.append((current, True))
        for child in reversed(list(iter_children(current))):
            stack.append((child, False))
