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
import operator
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


def _node_types() -> frozenset[type]:
    """Every concrete libcst node class (computed once, at import: a frozen set)."""
    found: set[type] = set()
    pending = [cst.CSTNode]
    while pending:
        cls = pending.pop()
        found.add(cls)
        pending.extend(cls.__subclasses__())
    return frozenset(found)


_NODE_TYPES = _node_types()


#: field types that never hold a node (`Name.value`, `Integer.value`): not read at all
_SCALAR_FIELD_TYPES = (str, bool, "str", "bool")


@functools.lru_cache(maxsize=None)
def _child_fields(node_type: type) -> tuple[str, ...]:
    """The fields of `node_type` that may hold syntactic children (a leaf such as `Name`
    has none: its only field is a string)."""
    return tuple(
        field.name
        for field in dataclasses.fields(node_type)
        if field.name not in _FORMATTING_FIELDS and not field.name.startswith("whitespace")
        and field.type not in _SCALAR_FIELD_TYPES
    )


@functools.lru_cache(maxsize=None)
def _field_reader(node_type: type, last_first: bool = False) -> Callable[[cst.CSTNode], tuple]:
    """One C-level call that reads all of a node type's syntactic fields as a tuple
    (`last_first`: in reverse, for the index, which pushes children on a stack)."""
    fields = _child_fields(node_type)[::-1] if last_first else _child_fields(node_type)
    if not fields:
        return lambda node: ()
    if len(fields) == 1:
        read = operator.attrgetter(fields[0])
        return lambda node: (read(node),)
    return operator.attrgetter(*fields)


def children_of(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Syntactic children of `node` (no formatting nodes), in field order, as a list.

    The traversals below are the hottest code of a static run (millions of calls on a
    large tree), hence the per-type field reader and the set lookup instead of
    `isinstance` against libcst's abstract base class.
    """
    node_types = _NODE_TYPES
    result: list[cst.CSTNode] = []
    for value in _field_reader(type(node))(node):
        value_type = type(value)
        if value_type is list or value_type is tuple:
            result.extend(item for item in value if type(item) in node_types)
        elif value_type in node_types:
            result.append(value)
    return result


def iter_children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Syntactic children of `node` (no formatting nodes), in field order."""
    return iter(children_of(node))


def iter_descendants(node: cst.CSTNode, prune: Callable[[cst.CSTNode], bool] | None = None) -> Iterator[cst.CSTNode]:
    """`node` and everything below it, pre-order; `prune(n)` True skips n's subtree."""
    stack = [node]
    pop, extend = stack.pop, stack.extend
    while stack:
        current = pop()
        yield current
        if prune is not None and current is not node and prune(current):
            continue
        children = children_of(current)
        children.reverse()
        extend(children)


@functools.lru_cache(maxsize=None)
def node_types_of(types: type | tuple[type, ...]) -> frozenset[type]:
    """The concrete node classes that are instances of `types` (abstract bases included):
    `type(node) in node_types_of(...)` answers `isinstance` without going through
    libcst's ABC machinery, which costs a Python-level call per check."""
    wanted = types if isinstance(types, tuple) else (types,)
    # by each class's MRO, as `issubclass` decides it for libcst's classes (none registers
    # a virtual subclass), without an ABC `__subclasscheck__` call per class and base
    return frozenset(cls for cls in _NODE_TYPES if any(base in cls.__mro__ for base in wanted))


def find_all(
    root: cst.CSTNode, types: type | tuple[type, ...], *, skip: type | tuple[type, ...] = ()
) -> list[cst.CSTNode]:
    """Nodes of `types` under `root` (itself included), pre-order. A node of a `skip` type
    below `root` is still reported when it matches, but its subtree is not searched."""
    wanted, skipped = node_types_of(types), node_types_of(skip)
    found: list[cst.CSTNode] = []
    stack = [root]
    pop, extend = stack.pop, stack.extend
    while stack:
        node = pop()
        node_type = type(node)
        if node_type in wanted:
            found.append(node)
        if node_type in skipped and node is not root:
            continue
        children = children_of(node)
        children.reverse()
        extend(children)
    return found


@functools.lru_cache(maxsize=None)
def _handlers(visitor_type: type, node_type: type) -> tuple[str | None, str | None]:
    """The names of the visitor's own `visit_<Type>` / `leave_<Type>` for a node type.

    libcst's visitor bases define a do-nothing stub of each for every node type; those
    are left out, so a walk neither calls them nor schedules a leave for every node.
    """
    name = node_type.__name__
    return _own_method(visitor_type, f"visit_{name}"), _own_method(visitor_type, f"leave_{name}")


def _own_method(visitor_type: type, name: str) -> str | None:
    method = getattr(visitor_type, name, None)
    if not callable(method) or getattr(method, "__module__", None) == _LIBCST_STUBS:
        return None
    return name


_LIBCST_STUBS = cst.CSTVisitor.visit_Name.__module__  # libcst._typed_visitor


def _overrides(visitor_type: type, method: str) -> bool:
    return getattr(visitor_type, method, None) is not getattr(cst.CSTVisitor, method)


@functools.lru_cache(maxsize=None)
def _type_handlers(visitor_type: type, node_type: type) -> tuple[Callable | None, Callable | None, Callable[[object], bool]]:
    """A visitor class's (visit, leave, skip test) for one node type, as plain functions
    called with the visitor first: libcst's generic `on_visit` / `on_leave` where the class
    overrides them (they skip children on any falsy result), else its own `visit_<Type>` /
    `leave_<Type>` (a `visit_*` skips them only on False). Resolved once per pair of
    classes, not on every walk (most walks are over one statement)."""
    generic_visit = visitor_type.on_visit if _overrides(visitor_type, "on_visit") else None  # type: ignore[attr-defined]
    generic_leave = visitor_type.on_leave if _overrides(visitor_type, "on_leave") else None  # type: ignore[attr-defined]
    visit_name, leave_name = _handlers(visitor_type, node_type)
    if generic_visit is not None:
        visit, skips = generic_visit, _skips_on_falsy
    else:
        visit, skips = (getattr(visitor_type, visit_name) if visit_name else None), _skips_on_false
    leave = generic_leave if generic_leave is not None else (getattr(visitor_type, leave_name) if leave_name else None)
    return visit, leave, skips


def walk(node: cst.CSTNode, visitor: object) -> None:
    """Run a read-only visitor's `visit_*`/`leave_*` methods over `node`'s subtree.

    A visitor that overrides libcst's generic `on_visit` / `on_leave` gets those called
    for every node instead (they usually dispatch to `visit_*` themselves). Handlers are
    the visitor class's methods: one set on an instance is not seen (subclass instead).
    """
    visitor_type = type(visitor)
    # per node type: (visit, leave, skip-children-when); resolved once per walk
    table: dict[type, tuple[Callable | None, Callable | None, Callable[[object], bool]]] = {}
    # an explicit stack (no recursion limit on deep trees): (node, leaving?)
    stack: list[tuple[cst.CSTNode, bool]] = [(node, False)]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        current, leaving = pop()
        handlers = table.get(type(current))
        if handlers is None:
            handlers = table[type(current)] = _type_handlers(visitor_type, type(current))
        visit, leave, skips = handlers
        if leaving:
            leave(visitor, current)  # type: ignore[misc]
            continue
        if visit is not None and skips(visit(visitor, current)):
            continue
        if leave is not None:
            push((current, True))
        children = children_of(current)
        children.reverse()
        extend([(child, False) for child in children])


def _skips_on_false(result: object) -> bool:
    return result is False


def _skips_on_falsy(result: object) -> bool:
    return not result


def _batched_handlers(visitors: list[cst.BatchableCSTVisitor], node_type: type) -> tuple[list[Callable], list[Callable]]:
    """Every visitor's own visit and leave methods for one node type, in visitor order."""
    visits: list[Callable] = []
    leaves: list[Callable] = []
    for visitor in visitors:
        visit, leave = _handlers(type(visitor), node_type)
        if visit is not None:
            visits.append(getattr(visitor, visit))
        if leave is not None:
            leaves.append(getattr(visitor, leave))
    return visits, leaves


class SyntaxIndex:
    """One file's syntactic nodes laid out once, in walk order, for the many searches of a
    static run.

    Each node's subtree is a slice of `order` (`start` to `end`), so "the calls in this
    statement" is a slice filtered by type, and a walk is a loop over a list, where a
    plain traversal reads every node's fields again on every search. A node that is not in
    the tree (one a rule built) falls back to the plain traversal. The index is built by
    the file's `SemanticModel`, so it lives exactly as long as the tree it describes.
    """

    def __init__(self, root: cst.CSTNode) -> None:
        # pre-order with an explicit stack: a node's int index is pushed under its children,
        # so popping it records where its subtree ends; children are pushed last field first
        # (`children_of` inlined: this loop runs once per node of every file checked)
        order: list[cst.CSTNode] = []
        ends: list[int] = []
        stack: list = [root]
        pop, push, add, end = stack.pop, stack.append, order.append, ends.append
        node_types, readers = _NODE_TYPES, {}
        while stack:
            item = pop()
            item_type = type(item)
            if item_type is int:
                ends[item] = len(order)
                continue
            index = len(order)
            add(item)
            end(index + 1)
            read = readers.get(item_type)
            if read is None:  # False: a leaf (`Name`, `Integer`), nothing to read
                read = readers[item_type] = _field_reader(item_type, last_first=True) if _child_fields(item_type) else False
            if read is False:
                continue
            push(index)
            for value in read(item):
                value_type = type(value)
                if value_type is list or value_type is tuple:
                    for child in reversed(value):
                        if type(child) in node_types:
                            push(child)
                elif value_type in node_types:
                    push(value)
        #: every node, pre-order (the order `walk` visits them in)
        self.order = order
        #: ends[i]: one past the last node of order[i]'s subtree
        self.ends = ends
        self._position = dict(zip(map(id, order), range(len(order))))  # id -> index, built in C

    def span(self, node: cst.CSTNode) -> tuple[int, int] | None:
        """`node`'s subtree as a slice of `order` (None: not a node of this tree)."""
        index = self._position.get(id(node))
        return None if index is None else (index, self.ends[index])

    def parents(self, root: cst.CSTNode) -> dict[int, cst.CSTNode] | None:
        """`id(child) -> parent` for every node under `root` (`loops.parent_map`), read off
        the index: no field of any node is read again. None: `root` is not in the tree."""
        span = self.span(root)
        if span is None:
            return None
        start, stop = span
        order, ends = self.order, self.ends
        found: dict[int, cst.CSTNode] = {}
        open_nodes: list[int] = [start]  # the ancestors of the node at hand, innermost last
        push, pop = open_nodes.append, open_nodes.pop
        for index in range(start + 1, stop):
            while ends[open_nodes[-1]] <= index:
                pop()
            found[id(order[index])] = order[open_nodes[-1]]
            push(index)
        return found

    def contains(self, root: cst.CSTNode, node: cst.CSTNode) -> bool:
        """Is `node` `root` or inside it?"""
        outer, inner = self._position.get(id(root)), self._position.get(id(node))
        if outer is None or inner is None:
            return root is node or any(candidate is node for candidate in iter_descendants(root))
        return outer <= inner < self.ends[outer]

    def descendants(self, root: cst.CSTNode, prune: Callable[[cst.CSTNode], bool] | None = None) -> Iterator[cst.CSTNode]:
        """`iter_descendants(root, prune)`, read off the index: the same nodes in the same order."""
        span = self.span(root)
        if span is None:
            yield from iter_descendants(root, prune)
            return
        start, stop = span
        order, ends = self.order, self.ends
        if prune is None:
            yield from order[start:stop]
            return
        index = start
        while index < stop:
            node = order[index]
            yield node
            index = ends[index] if index != start and prune(node) else index + 1

    def find(
        self, root: cst.CSTNode, types: type | tuple[type, ...], *, skip: type | tuple[type, ...] = ()
    ) -> list[cst.CSTNode]:
        """`find_all(root, types, skip=skip)`, read off the index."""
        span = self.span(root)
        if span is None:
            return find_all(root, types, skip=skip)
        start, stop = span
        wanted, order = node_types_of(types), self.order
        if not skip:
            return [node for node in order[start:stop] if type(node) in wanted]
        skipped, ends = node_types_of(skip), self.ends
        found: list[cst.CSTNode] = []
        index = start
        while index < stop:
            node = order[index]
            node_type = type(node)
            if node_type in wanted:
                found.append(node)
            index = ends[index] if node_type in skipped and index != start else index + 1
        return found

    def walk(self, root: cst.CSTNode, visitor: object) -> None:
        """`walk(root, visitor)`, read off the index: the same calls in the same order."""
        span = self.span(root)
        if span is None:
            walk(root, visitor)
            return
        start, stop = span
        visitor_type = type(visitor)
        table: dict[type, tuple] = {}
        order, ends = self.order, self.ends
        pending: list[tuple[int, Callable, cst.CSTNode]] = []  # leaves due at an index
        index = start
        while index < stop:
            while pending and pending[-1][0] <= index:
                _, leave, node = pending.pop()
                leave(visitor, node)
            node = order[index]
            handlers = table.get(type(node))
            if handlers is None:
                handlers = table[type(node)] = _type_handlers(visitor_type, type(node))
            visit, leave, skips = handlers
            if visit is not None and skips(visit(visitor, node)):
                index = ends[index]
                continue
            if leave is not None:
                pending.append((ends[index], leave, node))
            index += 1
        while pending:
            _, leave, node = pending.pop()
            leave(visitor, node)

    def walk_batched(self, visitors: list[cst.BatchableCSTVisitor]) -> None:
        """libcst's `visit_batched` over the whole indexed tree, without rebuilding: every
        visitor sees every node (a `visit_*` result does not prune), in walk order."""
        table: dict[type, tuple[list[Callable], list[Callable]]] = {}
        pending: list[tuple[int, list[Callable], cst.CSTNode]] = []
        ends = self.ends
        for index, node in enumerate(self.order):
            while pending and pending[-1][0] <= index:
                _, leaves, done = pending.pop()
                for leave in leaves:
                    leave(done)
            node_type = type(node)
            handlers = table.get(node_type)
            if handlers is None:
                handlers = table[node_type] = _batched_handlers(visitors, node_type)
            for visit in handlers[0]:
                visit(node)
            if handlers[1]:
                pending.append((ends[index], handlers[1], node))
        while pending:
            _, leaves, done = pending.pop()
            for leave in leaves:
                leave(done)
