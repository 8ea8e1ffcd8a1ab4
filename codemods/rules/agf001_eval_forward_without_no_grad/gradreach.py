"""Does the graph a statement makes reach a gradient computation? Flow-sensitive.

`dataflow.result_flow` never clears a taint, so in a function that trains in one branch
and evaluates in the other (`if is_train: ... loss.backward() else: ...`) the evaluation
branch's `loss` looks like the training branch's. Here the statements that can run after
the starting one are followed in control-flow order over the structured code: a branch
starts from the state before the `if` and the branches' states are joined; a loop body is
run until its state stops growing (the next iteration); rebinding a plain name clears its
taint (the next iteration's `loss = criterion(...)` is a new value). Only what the start
statement binds is followed, and a value stops carrying a graph where `graphflow` says a
cut happens (`.item()`, `.detach()`, ...).

The answer errs towards "reaches": a graph-carrying value returned, yielded, or stored on
anything but a plain local name counts as reaching (a caller or an object may train on it).
"""

from __future__ import annotations

from typing import Callable, Container, Sequence

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.semantic.dataflow import assigned_names, read_names
from autograd_fix.codemods.semantic.graphflow import STORING_METHODS, expression_carries, makes_distribution
from autograd_fix.codemods.semantic.loops import bindings
from autograd_fix.codemods.walk import iter_descendants


class _Reached(Exception):
    """Raised out of the walk as soon as a graph-carrying value meets a sink."""


def graph_reaches_gradient(
    container: cst.FunctionDef | cst.Module,
    start: cst.BaseStatement,
    imports: ImportIndex,
    is_sink: Callable[[cst.CSTNode], bool],
    is_source: Callable[[cst.Call], bool],
) -> bool:
    """Can a graph made by `start` (a statement of `container`, whose `is_source` calls
    run a forward) reach a statement that `is_sink` accepts (a backward, an optimizer
    step), or leave `container`? A module (a script, a notebook's cells) is followed like
    a function body; a value it stores anywhere but a plain name counts as reaching."""
    path = _path_to(container.body if type(container) is cst.Module else container.body.body, start)
    if path is None:
        return True  # not found: unknown, fail closed
    walker = _Walker(imports, is_sink, _Lazy(lambda: _distributions(container, imports)))
    try:
        tainted = walker.start(start, is_source)
        for block, index in reversed(path):
            statement = block[index]
            if statement is not start and type(statement) in (cst.For, cst.While):
                tainted = walker.statement(statement, tainted)  # the next iterations
            tainted = walker.block(block[index + 1 :], tainted)
    except _Reached:
        return True
    return False


def _path_to(block: Sequence[cst.BaseStatement], target: cst.CSTNode) -> list[tuple[Sequence[cst.BaseStatement], int]] | None:
    """(block, index) pairs from the function body down to `target`, outermost first."""
    for index, statement in enumerate(block):
        if statement is target:
            return [(block, index)]
        for inner in _blocks(statement):
            below = _path_to(inner, target)
            if below is not None:
                return [(block, index), *below]
    return None


def _blocks(statement: cst.CSTNode) -> list[Sequence[cst.BaseStatement]]:
    """Statement lists directly inside a compound statement (nested defs are their own)."""
    if type(statement) in (cst.FunctionDef, cst.ClassDef, cst.SimpleStatementLine):
        return []
    found: list[Sequence[cst.BaseStatement]] = []
    for child in (getattr(statement, "body", None), getattr(statement, "orelse", None),
                  getattr(statement, "finalbody", None), *getattr(statement, "handlers", ())):
        if type(child) is cst.If:
            found.append([child])
        elif child is not None:
            body = child.body
            found.append(body.body if isinstance(body, cst.BaseSuite) else body)
    return [block for block in found if isinstance(block, (list, tuple))]


def _distributions(container: cst.FunctionDef | cst.Module, imports: ImportIndex) -> frozenset[str]:
    """Names every binding of which in `container` builds a `torch.distributions` object
    (`dist = Normal(mu, std)`): their `sample()` holds no graph."""
    found: dict[str, bool] = {}
    for binding in bindings(container):
        made = binding.kind == "assign" and binding.value is not None and makes_distribution(binding.value, imports)
        found[binding.name] = found.get(binding.name, True) and made
    return frozenset(name for name, made in found.items() if made)


class _Lazy:
    """Names computed on the first question (most walks never meet a `sample()` call)."""

    def __init__(self, compute: Callable[[], frozenset[str]]) -> None:
        self._compute = compute
        self._names: frozenset[str] | None = None

    def __contains__(self, name: object) -> bool:
        if self._names is None:
            self._names = self._compute()
        return name in self._names


class _Walker:
    def __init__(self, imports: ImportIndex, is_sink: Callable[[cst.CSTNode], bool],
                 distributions: Container[str] = frozenset()) -> None:
        self.imports = imports
        self.is_sink = is_sink
        self.distributions = distributions
        #: the forward calls of the start statement (only while it is walked)
        self.is_source: Callable[[cst.Call], bool] = _no_source

    def carries(self, node: cst.CSTNode, tainted: set[str]) -> bool:
        return expression_carries(node, tainted, self.imports, self.is_source, self.distributions)

    def block(self, statements: Sequence[cst.BaseStatement], tainted: set[str]) -> set[str]:
        for statement in statements:
            tainted = self.statement(statement, tainted)
        return tainted

    def start(self, statement: cst.CSTNode, is_source: Callable[[cst.Call], bool]) -> set[str]:
        """The taint after the start statement, whose `is_source` calls make the graph."""
        if type(statement) not in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
            return assigned_names(statement)  # a compound statement: everything it binds
        self.is_source = is_source
        try:
            return self.statement(statement, set())
        finally:
            self.is_source = _no_source

    def statement(self, statement: cst.CSTNode, tainted: set[str]) -> set[str]:
        if type(statement) in (cst.FunctionDef, cst.ClassDef):
            return tainted
        if type(statement) in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
            for small in statement.body:
                tainted = self.small(small, tainted)
            return tainted
        if type(statement) in (cst.For, cst.While):
            return self.loop(statement, tainted)
        if type(statement) is cst.If:
            body = self.block(statement.body.body, set(tainted))
            orelse = statement.orelse
            other = self.statement(orelse, set(tainted)) if type(orelse) is cst.If else (
                self.block(orelse.body.body, set(tainted)) if orelse is not None else tainted
            )
            return body | other
        if type(statement) is cst.With:
            return self.block(statement.body.body, tainted)
        if type(statement) in (cst.Try, cst.TryStar):
            after_body = self.block(statement.body.body, set(tainted))
            state = tainted | after_body
            for handler in statement.handlers:
                state |= self.block(handler.body.body, set(state))
            if statement.orelse is not None:
                state |= self.block(statement.orelse.body.body, set(after_body))
            if statement.finalbody is not None:
                state = self.block(statement.finalbody.body.body, state)
            return state
        return tainted | assigned_names(statement)  # `match` and the like: keep every taint

    def loop(self, loop: cst.For | cst.While, tainted: set[str]) -> set[str]:
        state = set(tainted)
        while True:
            entry = set(state)
            if type(loop) is cst.For and self.carries(loop.iter, entry):
                entry |= assigned_names(loop.target)
            after = self.block(loop.body.body, entry)
            if after <= state:
                break
            state |= after
        if loop.orelse is not None:
            state = self.block(loop.orelse.body.body, state)
        return state

    def small(self, small: cst.BaseSmallStatement, tainted: set[str]) -> set[str]:
        if tainted and read_names(small) & tainted and self.is_sink(small):
            raise _Reached
        if type(small) is cst.Return or (type(small) is cst.Expr and type(small.value) is cst.Yield):
            value = small.value if type(small) is cst.Return else small.value.value
            if value is not None and self.carries(value, tainted):
                raise _Reached  # handed to a caller that may train on it
            return tainted
        if type(small) in (cst.Assign, cst.AugAssign, cst.AnnAssign) and small.value is not None:
            targets = [t.target for t in small.targets] if type(small) is cst.Assign else [small.target]
            if self.carries(small.value, tainted) or (type(small) is cst.AugAssign and self.carries(small.target, tainted)):
                if any(not _local_target(target) for target in targets):
                    raise _Reached  # `self.history = out`, `outputs[k] = out`: stored where others see it
                self._stores(small.value, tainted)
                # the targets now hold the graph; `model` of `prob = model.pi(s)` does not
                return tainted | set().union(*(assigned_names(target) for target in targets))
            return tainted - {target.value for target in targets if type(target) is cst.Name}
        for call in iter_descendants(small):
            # `outputs.append(out)`, `writer.add(out)`: the receiver now holds the graph
            if (type(call) is cst.Call and type(call.func) is cst.Attribute
                    and self.imports.qualified_name(call.func) is None
                    and any(self.carries(argument.value, tainted) for argument in call.args)):
                raise _Reached
        return tainted


    def _stores(self, value: cst.CSTNode, tainted: set[str]) -> None:
        """`n = memory.push(out)`: a container's storing method took a graph-carrying value."""
        for call in iter_descendants(value):
            if (type(call) is cst.Call and type(call.func) is cst.Attribute
                    and call.func.attr.value in STORING_METHODS
                    and any(self.carries(argument.value, tainted) for argument in call.args)):
                raise _Reached


def _no_source(call: cst.Call) -> bool:
    return False


def _local_target(target: cst.BaseExpression) -> bool:
    if type(target) is cst.Name:
        return True
    if type(target) in (cst.Tuple, cst.List):
        return all(_local_target(element.value) for element in target.elements)
    if type(target) is cst.StarredElement:
        return _local_target(target.value)
    return False
