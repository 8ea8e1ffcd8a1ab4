"""Bounded runs: a script that trains for hours runs both sides of a patch in seconds.

Design (issue 17, item 1). Both sides run the *same* shortened program: every loop in
the script and in the project files it imports is given a counter, and a loop whose
iterations train or evaluate a model stops after a few such iterations, identically on
both sides; a loop that only prepares data runs in full. What counts as "does model
work" is observed, not guessed from names:

* a **training event** is a ``backward`` (``torch.autograd.backward``/``grad``) or an
  ``optimizer.step()``; a **forward** is the end of an outermost call of an
  ``nn.Module`` that has parameters (a parameter-free loss module is not one);
* an iteration of a loop is a **working** one when a training event happened between
  its start and the start of the next iteration (events of loops nested in it count for
  it too);
* a loop stops, as if its iterable were exhausted (its ``else:`` runs, and so does the
  code after it: an evaluation after the epoch loop still runs), once it has run
  `cap` working iterations (3 by default), or `outer_cap` (2) when working iterations
  of another loop ran inside it (an epoch loop around a batch loop). Every entry of a
  loop counts afresh: each of the 2 epochs runs 3 batches.
* a loop whose iterations only run forwards (an evaluation, sampling 1,000 words)
  keeps `DEFAULT_FORWARD_CAP` (3) of them when the patch changed none of its lines, and
  runs in full when it did (what the patch changed runs as in the full program);
  ``forward-loop-cap`` sets one number for all of them (0: all in full). Its results
  are sometimes paired with data no cap shortens (``torch.cat(predictions)`` against
  every label of the dataset): when both sides then stop at the same error that is not
  autograd's, the pair runs again with evaluation loops in full
  (`evaluation_cut_broke`); when the original run does not fit the time limit while
  an evaluation the patch changed ran in full, the pair runs again with every
  evaluation loop capped (the verdict names them among what was shortened).

What a script shows only later is compared at the end: names that both versions
assign on lines the patch changed (`observed_names`: ``total_loss`` of ``total_loss +=
loss.item()``) are reported after each such assignment, and their last values are
outputs of the run. A running loss logged every 200 batches is never printed by a run
of 3 batches, yet a rewrite that keeps only the last loss leaves a different value.

Loops inside a model's ``forward`` (``for layer in self.layers``) see no event (the
module call that contains them has not ended) and are never cut; neither is a loop
over ``model.parameters()`` doing a manual update, nor one building modules.

Why loops, and not only "stop both sides at the N-th optimizer step": a stop at a
fixed event ends the run wherever it happens to be, so code after the training loop
(an evaluation, the metric printed at the end) may never run, while the changed code is
often exactly there. Capping loops keeps the program's shape: every statement that runs
in the full run still runs, only fewer times.

The two are combined: once the changed code has run, **the loops under way stop after
`DEFAULT_STOP_AFTER` (2) more backwards** (``stop-after-change``; 0: never), at the next
iteration boundary of a loop that trains (its step done: never while gradients wait for
an optimizer step), the same on both sides (`Bounds.stop`). Every loop under way ends
there as if its iterable were exhausted, so the code after them still runs (an
evaluation after the epoch loop, a ``torch.stack(losses)`` that a wrong ``.item()``
rewrite breaks, a gradient norm read after the loop); loops entered later keep their
caps. A first version ended the whole program at that point, and the verification
corpus showed why not: four wrong rewrites whose damage shows only after the loop were
accepted. "The changed code has run" means every hunk of the patch, on this side: a
call ``__autograd_fix_reached__(hunks)`` is compiled in before each statement that
starts on or spans a changed line, and, for a change in a ``def``'s header (a
decorator), at the start of its body, so a decorator counts when the function is
called, not when it is defined. A hunk that only inserts or deletes lines is placed on
the same unchanged statement on both sides (`coverage.reach_points`): the one right
before it, or right after it for a decorator. The backward that runs in the same
iteration as the changed code counts as the first: an AGF002 fix is compared over two
steps, an AGF010 fix over the second chunk whose backward needs the detach, and an
evaluation the patch changed (it runs after the first epoch) is followed by two
iterations of the next epoch rather than by the rest of the capped epochs. A changed
line that never runs never stops the loops (the caps alone apply, and the line watch
reports it). Re-runs for finite differences and the second point end at their own
backward and are never stopped.

**A stop at the changed function's return** (`Bounds.stop_at_return`), for contracts
decided once the changed code has returned (`checks.DECIDED_AT_RETURN`: outputs, the
``.grad`` left, graph memory; AGF001's ``no_grad`` on an evaluation): the function that
holds every hunk gets an innermost decorator (`RETURNED`), and when the call that ran the
last hunk returns, the run ends there (`StopRun`), both sides alike, instead of training
2 more steps: nanoGPT evaluates at iteration 0, before its first step, and a step of the
baby GPT costs more than the whole evaluation. What later code would read is made an
output: the value returned (an object of the project's own class by its attributes: the
caller reads ``meter.sum / meter.count`` after the stop), the call's arguments it may have
filled in (plain containers, objects of project classes), the torch, numpy and
``random`` states, grad and inference mode, and which modules of the changed file's
globals are in training mode (a rewrite that loses ``model.train()`` returns the same
losses, yet trains differently); the globals are compared as at any end.
Not when the call trained (a backward or a step ran in it: a ``no_grad`` around training
code shows at the backward; the ordinary stop applies). And the stop proves too little
when a graph the call recorded outlived it (saved tensors still alive once its frame is
gone, or a returned tensor with a graph: a later backward may go through it, and a
wrong ``no_grad`` shows only there): the run records that (``escaped``) and the job runs
the pair again without this stop (`escaped_stop`). Limits: a graph without saved
tensors kept in a global is not seen; state other than the outputs above (a file
written, a submodule's attribute) is compared only as far as the globals show it.

When even the shortened run does not fit its time or memory limit though a model
forward finished (`shortest_evaluation_could_help`), the pair runs once more with every
evaluation loop kept at 1 iteration (``forward-loop-cap = 1``, a loop over evaluation
loops included: nanoGPT's 2 splits become 1), the same on both sides, and the verdict
names the loops so cut.

How: the source of the script (and, through an import hook, of every ``.py`` file of
the project copy the run imports) is parsed with `ast` and recompiled with
``for x in it`` turned into ``for x in __autograd_fix_loop__(it, ID)``, list, set and
dict comprehensions likewise, and ``while test`` into ``__autograd_fix_while__(ID)``
followed by ``while __autograd_fix_more__(ID) and test``. Loops of generator functions
and generator expressions are left alone: they run on their consumer's schedule (the
consumer's events would count for them), and the consumer's loop is the one counted. Line numbers are kept, so tracebacks, the line
watch (`coverage.LineWatch`) and the reach tracer see the user's lines. The helpers are
builtins of the run child only; the parse happens inside the sandboxed child, on text
the child could run anyway, so a hostile file gains nothing it did not have (replacing
the helper changes its own run only, and the report is plain strings and numbers read
back with ``weights_only``).

Determinism: both sides are forked from the same job with identical seeds (the harness
seeds torch, random and numpy before the script runs, so code that never seeds runs
identically too); the caps depend only on what the program does, so both sides stop
at the same iteration unless the patch changes which loops train or how long they would
run, which rejects the patch, saying so.

Gradient accumulation (contracts with ``Probe.WHOLE_WINDOWS``, AGF019): a loop that
backpropagates every micro-batch and steps every k-th would stop before its first step
when k exceeds the cap, leaving no accumulated gradient to compare. In those runs an
entry that reaches its cap while gradients that ``backward`` added wait for an optimizer
step runs on until the step (at most `WINDOW_CAP` working iterations), the same on both
sides; other runs are capped as above.

A loop is reported as capped only when it would have gone on: a sized iterable
(``range``, a list, a ``DataLoader``) says its length; otherwise the next item is
fetched (the same on both sides) and dropped. ``while`` loops are reported when they
reach the cap. Each first cap of a loop is also written to the run's output stream
(`MARKER`), so a run killed at its time limit can still say what had been shortened.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import enum
import importlib.abc
import importlib.machinery
import json
import operator
import os
import re
import sys
import time
import types
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

if TYPE_CHECKING:  # torch is imported where the caps are installed, in the run child only
    from torch import nn

DEFAULT_CAP = 3
DEFAULT_OUTER_CAP = 2
#: forward-only iterations (an evaluation, sampling) kept by a loop the patch did not change
DEFAULT_FORWARD_CAP = 3
#: working iterations an entry may run past its cap while backward's gradients wait for an
#: optimizer step (gradient accumulation over k micro-batches, `whole_windows` runs only)
WINDOW_CAP = 16
#: backwards a run keeps once every hunk of the changed code has run (0: no stop)
DEFAULT_STOP_AFTER = 2
LOOP = "__autograd_fix_loop__"
REACHED = "__autograd_fix_reached__"
SEEN = "__autograd_fix_seen__"
WHILE_ENTER = "__autograd_fix_while__"
WHILE_MORE = "__autograd_fix_more__"
#: a line the run child writes to its output when it first caps a loop
RETURNED = "__autograd_fix_returned__"
MARKER = "\x1eautograd-fix capped "
#: a line the run child writes after its 1st, 2nd, 4th, 8th... model forward and backward,
#: so a run killed at its time limit can say how far it got
PROGRESS = "\x1eautograd-fix progress "
_LABEL_CHARS = 40


def returned_key(name: str) -> str:
    """The output that holds what the changed function `name` returned where the run stopped."""
    return f"{name}() returned (the changed function, where the run stopped)"


class StopRun(BaseException):
    """Ends a bounded run when the changed function returned (`Bounds.stop_at_return`).
    Not an Exception: the user's ``except Exception`` must not swallow it."""


def _target(target: ast.expr) -> str:
    if isinstance(target, ast.Tuple) and target.elts:
        return ", ".join(ast.unparse(element) for element in target.elts)
    return ast.unparse(target)


def _label(node: ast.AST) -> str:
    """How a verdict names a loop: ``for epoch``, ``for x, y``, ``while True``."""
    if isinstance(node, ast.While):
        text = "while " + ast.unparse(node.test)
    else:
        text = "for " + _target(node.target)
    if len(text) > _LABEL_CHARS:
        text = text[: _LABEL_CHARS - 3] + "..."
    return text


#: names of values read from a clock or derived from one (an iteration's `dt`, tokens per
#: second, model FLOPs utilisation): the fallback for floats from clocks that `clock` does
#: not mark (``datetime.now()``, CUDA events); marked readings are set aside whatever their name
VOLATILE_NAME = re.compile(
    r"time|elapsed|duration|^start$|^end$|^t\d+$|^tic$|^toc$|^now$|timestamp|"
    r"^dt$|^dt_|_dt$|per_sec|per_second|per_s$|throughput|^fps$|latency|^mfu$|_mfu$|^mfu_"
)


def _target_names(targets: list[ast.expr]) -> list[str]:
    """Plain names a statement assigns (``a``, ``a, b = ...``); not attributes or items."""
    names: list[str] = []
    for target in targets:
        if isinstance(target, ast.Name):
            names.append(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            names += _target_names(list(target.elts))
        elif isinstance(target, ast.Starred):
            names += _target_names([target.value])
    return names


def _assigned_on(source: str, lines: set[int]) -> set[str]:
    """``scope.name`` of the names assigned by statements that start on `lines`."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    found: set[str] = set()

    def walk(node: ast.AST, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                walk(child, [*scope, child.name])
                continue
            if isinstance(child, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)):
                continue
            if isinstance(child, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and child.lineno in lines:
                targets = list(child.targets) if isinstance(child, ast.Assign) else [child.target]
                if not isinstance(child, ast.AnnAssign) or child.value is not None:
                    found.update(f"{'.'.join(scope) or '<module>'}.{name}" for name in _target_names(targets))
            walk(child, scope)

    walk(tree, [])
    return found


def observed_names(original: str, rewritten: str, hunks: tuple[list[list[int]], list[list[int]]]) -> list[str]:
    """Names both versions assign on lines the patch changed (``scope.name``): their last
    values are compared as outputs of a bounded run. A script often shows what such a
    line computes only later (a running loss printed every 200 batches, which a run of 3
    batches never reaches); the value itself, at the end of the shortened run, is what
    that later line would have read. Clock readings among them are set aside by the run
    (`clock`), where their values show what they are."""
    lines_a = {line for hunk in hunks[0] for line in hunk}
    lines_b = {line for hunk in hunks[1] for line in hunk}
    return sorted(_assigned_on(original, lines_a) & _assigned_on(rewritten, lines_b))


def _header_span(stmt: ast.stmt) -> tuple[int, int]:
    """The lines of a statement that are its own: a simple statement's every line, a
    compound statement's header (decorators included), not its body."""
    body = getattr(stmt, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
        decorators = getattr(stmt, "decorator_list", None) or []
        start = min([stmt.lineno, *(d.lineno for d in decorators)])
        return start, max(start, body[0].lineno - 1)
    return stmt.lineno, getattr(stmt, "end_lineno", None) or stmt.lineno


def _mark_reached(tree: ast.Module, hunks: list[list[int]]) -> None:
    """Insert ``REACHED((i, ...))`` before each statement holding a line of hunk i (at the
    start of the body for a change in a function's header: the decorator of an
    evaluation counts when it is called)."""
    hunk_of: dict[int, set[int]] = {}  # two hunks may share a reach point (an insertion and a deletion after it)
    for index, hunk in enumerate(hunks):
        for line in hunk:
            hunk_of.setdefault(line, set()).add(index)
    if not hunk_of:
        return

    def mark(ids: set[int], at: ast.stmt) -> ast.stmt:
        call = ast.Call(func=ast.Name(id=REACHED, ctx=ast.Load()), args=[ast.Constant(tuple(sorted(ids)))], keywords=[])
        return ast.copy_location(ast.Expr(ast.copy_location(call, at)), at)

    for node in list(ast.walk(tree)):
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if not isinstance(statements, list) or not statements or not isinstance(statements[0], ast.stmt):
                continue
            marked: list[ast.stmt] = []
            for stmt in statements:
                start, end = _header_span(stmt)
                ids = {index for line in range(start, end + 1) for index in hunk_of.get(line, ())}
                if ids and isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    first = stmt.body[0]
                    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
                    stmt.body.insert(1 if docstring else 0, mark(ids, stmt.body[1] if docstring and len(stmt.body) > 1 else first))
                elif ids:
                    marked.append(mark(ids, stmt))
                marked.append(stmt)
            setattr(node, field, marked)


def _returning_function(tree: ast.Module, hunks: list[list[int]]) -> ast.FunctionDef | None:
    """The innermost plain function (not async, not a generator) whose lines, decorators
    included, hold every line of `hunks`: the run may stop when it returns
    (`Bounds.stop_at_return`). None when the change is not inside one function."""
    lines = {line for hunk in hunks for line in hunk}
    if not lines:
        return None
    best: ast.FunctionDef | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or _is_generator(node):
            continue
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        end = getattr(node, "end_lineno", None) or node.lineno
        if all(start <= line <= end for line in lines) and (best is None or start >= best.lineno):
            best = node
    return best


def _watch_return(tree: ast.Module, hunks: list[list[int]]) -> None:
    """Give the function that holds the change an outermost decorator ``RETURNED``, so
    the run can stop once the call that ran the changed code has returned: outermost, so
    that its own decorators (a ``@torch.no_grad()``) have restored what they set by then."""
    function = _returning_function(tree, hunks)
    if function is not None:
        first = function.decorator_list[0] if function.decorator_list else function  # co_firstlineno as it was
        watch = ast.copy_location(ast.Name(id=RETURNED, ctx=ast.Load()), first)
        function.decorator_list.insert(0, watch)


def _tensors_in(value: Any, depth: int = 0) -> Iterator[Any]:
    """Tensors a returned value holds (containers and dataclass-like objects, 3 deep)."""
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 3 and isinstance(value, (list, tuple, set, frozenset)):
        for item in list(value)[:1000]:
            yield from _tensors_in(item, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for item in list(value.values())[:1000]:
            yield from _tensors_in(item, depth + 1)
    elif depth < 3 and hasattr(value, "__dict__") and not isinstance(value, type) and not callable(value):
        for item in list(vars(value).values())[:1000]:
            yield from _tensors_in(item, depth + 1)


def _detached(value: Any, depth: int = 0) -> Any:
    """`value` with its tensors detached (lists, tuples and dicts rebuilt), so that holding
    it as an output keeps no graph alive for the memory probes; a plain object (an
    ``AverageMeter`` an evaluation returns) as a dict of its class name and attributes,
    private ones included: the caller reads them (``meter.sum / meter.count``) after the
    stop, and an output compared only by its class name would hide what it holds."""
    import torch
    from torch import nn

    if isinstance(value, torch.Tensor):
        return value.detach()
    if depth >= 3:
        return value
    if type(value) in (list, tuple):
        return type(value)(_detached(item, depth + 1) for item in value)
    if type(value) is dict:
        return {key: _detached(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (nn.Module, type, types.ModuleType, enum.Enum)) or callable(value):
        return value
    names = [name for name in getattr(value, "__dict__", {}) if not name.startswith("__")]
    names += [name for cls in type(value).__mro__ for name in getattr(cls, "__slots__", ()) if isinstance(name, str)
              and not name.startswith("__") and name not in names]
    module = type(value).__module__ or ""
    if not names or module.startswith(("builtins", "numpy", "torch")) or dataclasses.is_dataclass(value):
        # what `record.serialize` spells out (numbers, arrays, dataclasses), and torch's own
        # objects (a DataLoader would drag its whole dataset into the record)
        return value
    state: dict[str, Any] = {"__class__": type(value).__qualname__}
    for name in names[:100]:
        try:
            state[name] = _detached(getattr(value, name), depth + 1)
        except AttributeError:  # an empty slot
            continue
    return state


def _arguments_after(name: str, function: Any, arguments: tuple[tuple, dict]) -> dict[str, Any]:
    """The arguments of the changed call that it may have filled in, as they are after it
    (a ``results`` dict or a meter the caller passed and reads after the stop): plain
    containers and objects of the project's own classes; not modules (their state is
    compared with the globals and the parameters), not torch's or numpy's objects (a
    ``DataLoader`` would drag its whole dataset into the record)."""
    import inspect

    import torch

    args, kwargs = arguments
    try:
        bound = inspect.signature(function).bind_partial(*args, **kwargs).arguments
    except (TypeError, ValueError):
        bound = {**{f"#{i}": arg for i, arg in enumerate(args)}, **kwargs}
    found: dict[str, Any] = {}
    for key, arg in bound.items():
        module = type(arg).__module__ or ""
        plain = type(arg) in (list, dict, set)
        own = not module.startswith(("torch", "numpy", "builtins")) and not isinstance(arg, (torch.nn.Module, types.ModuleType, type))
        if (plain or own) and not callable(arg):
            found[f"{name}() argument {key} after the call (where the run stopped)"] = _detached(arg)
    return found


def _is_generator(node: ast.AST) -> bool:
    """A function whose own body yields (nested functions and classes aside)."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        current = stack.pop()
        if isinstance(current, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(current))
    return False


class _Capper(ast.NodeTransformer):
    """Counts the loops of one file. Left alone: loops of a generator function and
    generator expressions (they run on their consumer's schedule, and the consumer's
    loop is the one capped), ``async for``."""

    def __init__(self, bounds: "Bounds", filename: str) -> None:
        self.bounds = bounds
        self.filename = filename
        self._in_generator = [False]
        self._scope: list[str] = []
        #: this file's lines the patch changed (empty for the project's other files)
        self._changed = bounds.changed_lines if bounds.changed_file == filename else frozenset()

    def _wrap(self, iterable: ast.expr, loop_id: int) -> ast.expr:
        call = ast.Call(func=ast.Name(id=LOOP, ctx=ast.Load()), args=[iterable, ast.Constant(loop_id)], keywords=[])
        return ast.copy_location(call, iterable)

    def _scoped(self, node: ast.AST, in_generator: bool) -> ast.AST:
        self._in_generator.append(in_generator)
        self._scope.append(getattr(node, "name", "<genexpr>"))
        try:
            self.generic_visit(node)
        finally:
            self._in_generator.pop()
            self._scope.pop()
        return node

    def _holds_change(self, node: ast.AST) -> bool:
        """The patch changed a line of this loop (its header or its body)."""
        end = getattr(node, "end_lineno", None) or node.lineno
        return any(node.lineno <= line <= end for line in self._changed)

    def _register(self, node: ast.AST, line: int, label: str) -> int:
        return self.bounds.register(self.filename, line, label, changed=self._holds_change(node))

    def _observed(self, node: ast.stmt, targets: list[ast.expr]) -> Any:
        """The statement, followed by a report of the values it assigned to names the
        job asked to observe (an assignment on a changed line, see `observed_names`)."""
        if not self._changed or not self.bounds.observe or node.lineno not in self._changed:
            return node
        scope = ".".join(self._scope) or "<module>"
        calls = []
        for name in _target_names(targets):
            key = f"{scope}.{name}"
            if key in self.bounds.observe:
                call = ast.Call(func=ast.Name(id=SEEN, ctx=ast.Load()), args=[ast.Constant(key), ast.Name(id=name, ctx=ast.Load())], keywords=[])
                calls.append(ast.copy_location(ast.Expr(ast.copy_location(call, node)), node))
        return [node, *calls] if calls else node

    def visit_Assign(self, node: ast.Assign) -> Any:
        self.generic_visit(node)
        return self._observed(node, list(node.targets))

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        self.generic_visit(node)
        return self._observed(node, [node.target])

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        self.generic_visit(node)
        return self._observed(node, [node.target]) if node.value is not None else node

    def _function(self, node: ast.AST) -> ast.AST:
        return self._scoped(node, _is_generator(node))

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        return self._scoped(node, False)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> ast.AST:
        return self._scoped(node, True)

    def visit_For(self, node: ast.For) -> ast.AST:
        self.generic_visit(node)
        if not self._in_generator[-1]:
            node.iter = self._wrap(node.iter, self._register(node, node.lineno, _label(node)))
        return node

    def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
        self.generic_visit(node)
        if not node.is_async and not self._in_generator[-1]:
            label = "for " + _target(node.target)
            node.iter = self._wrap(node.iter, self._register(node.iter, node.iter.lineno, label[:_LABEL_CHARS]))
        return node

    def visit_While(self, node: ast.While) -> Any:
        self.generic_visit(node)
        if self._in_generator[-1]:
            return node
        loop_id = self._register(node, node.lineno, _label(node))
        more = ast.Call(func=ast.Name(id=WHILE_MORE, ctx=ast.Load()), args=[ast.Constant(loop_id)], keywords=[])
        node.test = ast.copy_location(ast.BoolOp(op=ast.And(), values=[ast.copy_location(more, node.test), node.test]), node.test)
        enter = ast.Expr(ast.Call(func=ast.Name(id=WHILE_ENTER, ctx=ast.Load()), args=[ast.Constant(loop_id)], keywords=[]))
        return [ast.copy_location(enter, node), node]


class _Loop:
    """One loop, over all its entries: where it is and how often it was cut."""

    __slots__ = ("filename", "line", "label", "capped", "cap", "entries", "announced", "outer", "changed", "forward_cap",
                 "forward")

    def __init__(self, filename: str, line: int, label: str, changed: bool = False, forward_cap: int = 0) -> None:
        self.filename, self.line, self.label = filename, line, label
        self.capped = 0  # entries that were cut
        self.cap = 0
        self.entries = 0
        self.announced = False
        self.outer = False  # an entry had another loop's working iterations inside it
        self.changed = changed  # the patch changed a line of this loop
        self.forward_cap = forward_cap  # forward-only iterations an entry keeps (0: all)
        self.forward = False  # an entry was cut after forward-only iterations (an evaluation)


class _Entry:
    """The counter of one entry of one loop (for and while alike)."""

    __slots__ = ("bounds", "loop", "started", "events", "ticks", "forwards", "working", "forward_only", "outer")

    def __init__(self, bounds: "Bounds", loop: _Loop) -> None:
        self.bounds, self.loop = bounds, loop
        self.started = False
        self.events = self.ticks = self.forwards = self.working = self.forward_only = 0
        self.outer = False
        loop.entries += 1

    def at_iteration_start(self) -> bool:
        """Count the iteration that just ended; False when the loop must stop here."""
        bounds = self.bounds
        if self.started:
            if bounds.ticks != self.ticks:
                self.outer = True  # another loop did working iterations inside this one
            if bounds.events != self.events:
                self.working += 1
                bounds.ticks += 1
            elif bounds.forwards != self.forwards:
                self.forward_only += 1
        if not self.started:
            return True
        cap = bounds.outer_cap if self.outer else bounds.cap
        if bounds.whole_windows and bounds.pending and cap <= self.working < WINDOW_CAP:
            return True  # an accumulation window is still open: run on to its step
        forward_cap = self.loop.forward_cap
        return self.working < cap and not (forward_cap and not self.working and self.forward_only >= forward_cap)

    def kept(self) -> int:
        return self.working if self.working else self.forward_only

    def begin(self) -> None:
        self.started = True
        bounds = self.bounds
        self.events, self.ticks, self.forwards = bounds.events, bounds.ticks, bounds.forwards

    def cut(self) -> None:
        loop = self.loop
        loop.capped += 1
        loop.cap = max(loop.cap, self.kept())
        loop.outer = loop.outer or self.outer
        loop.forward = loop.forward or not self.working
        if not loop.announced:
            loop.announced = True
            self.bounds.announce(loop, self.kept())


class _Capped:
    """The iterator a capped ``for`` loop runs over."""

    __slots__ = ("_it", "_entry", "_known", "_done", "_order", "_ending", "__weakref__")

    def __init__(self, bounds: "Bounds", loop: _Loop, iterable: Iterable[Any]) -> None:
        try:
            known = operator.length_hint(iterable, -1)
        except Exception:  # noqa: BLE001 - a user __len__ that raises
            known = -1
        self._it = iter(iterable)
        self._entry = _Entry(bounds, loop)
        self._known = known  # items left, or -1: unknown
        self._done = False
        self._ending = False  # the run stopped while this loop was under way (`Bounds.stop`)
        self._order = 0
        if bounds.stop_after:
            bounds.begun += 1
            self._order = bounds.begun  # outer loops began first
            bounds._live.add(self)

    def __iter__(self) -> "_Capped":
        return self

    def __next__(self) -> Any:
        # `_Entry.at_iteration_start` and `begin`, inlined: this runs once per iteration
        # of every loop of the project, data preparation included
        if self._done:
            raise StopIteration
        entry = self._entry
        bounds = entry.bounds
        if entry.started:
            if bounds.events != entry.events or bounds.ticks != entry.ticks or (entry.loop.forward_cap and bounds.forwards != entry.forwards):
                if bounds.events != entry.events and bounds.stop_due():
                    bounds.stop(entry.loop)
                if self._ending:
                    self._done = True
                    self._ended()
                    raise StopIteration
                if not entry.at_iteration_start():
                    self._done = True
                    if self._would_go_on():
                        entry.cut()
                    self._ended()
                    raise StopIteration
        else:
            entry.started = True
        entry.events, entry.ticks, entry.forwards = bounds.events, bounds.ticks, bounds.forwards
        try:
            item = next(self._it)  # what fetching the item does (a generator's model work) counts too
        except StopIteration:
            self._ended()
            raise
        if self._known > 0:
            self._known -= 1
        return item

    def _ended(self) -> None:
        """Tell `Bounds.loop_done` that a loop with working iterations ended (exhausted,
        cut or stopped), while the frame that ran it is still alive."""
        done = self._entry.bounds.loop_done
        if done is not None and self._entry.working:
            done()

    def _would_go_on(self) -> bool:
        if self._known >= 0:
            return self._known > 0
        try:
            next(self._it)
        except StopIteration:
            return False
        except Exception:  # noqa: BLE001 - the item the full run would have met next
            return True
        return True


class _ProjectLoader(importlib.machinery.SourceFileLoader):
    """Compiles a project module with its loops capped (never from a stale ``.pyc``)."""

    bounds: "Bounds"

    def get_code(self, fullname: str) -> Any:
        return self.bounds.compile(self.get_data(self.path), self.path)


class _ProjectFinder(importlib.abc.MetaPathFinder):
    """Finds modules as the path finder does; those under the project copy load capped."""

    def __init__(self, bounds: "Bounds") -> None:
        self.bounds = bounds

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader or not self.bounds.owns(spec.origin):
            return spec
        loader = _ProjectLoader(spec.loader.name, spec.loader.path)
        loader.bounds = self.bounds
        spec.loader = loader
        return spec


class Bounds:
    """The caps of one run: compiles sources with counted loops, observes events, and
    reports what was shortened. `root` is the project copy (whose ``.py`` files load
    capped); `cap` 0 turns capping off (sources compile unchanged)."""

    def __init__(self, cap: int = DEFAULT_CAP, outer_cap: int = DEFAULT_OUTER_CAP, root: str | None = None,
                 announce_fd: int | None = None, forward_cap: int | None = None, changed_file: str | None = None,
                 changed_lines: Iterable[int] = (), observe: Iterable[str] = (), whole_windows: bool = False,
                 stop_after: int = 0, hunks: Iterable[Iterable[int]] = (), stop_at_return: bool = False) -> None:
        self.cap = int(cap)
        self.outer_cap = int(outer_cap) if outer_cap else self.cap
        #: forward-only loops (an evaluation): None caps those the patch did not change at
        #: `DEFAULT_FORWARD_CAP` and runs the others in full; a number applies to all (0: none)
        self.forward_cap = None if forward_cap is None else int(forward_cap)
        #: the file the patch changed (its path in the run's copy) and this side's changed lines
        self.changed_file = os.path.abspath(changed_file) if changed_file else None
        self.changed_lines = frozenset(int(line) for line in changed_lines)
        #: this side's hunks (lines of the changed file): the run may stop once all ran
        self.hunks = [sorted(int(line) for line in hunk) for hunk in hunks if hunk]
        #: backwards kept once every hunk ran (0: no stop); see `stop`
        self.stop_after = int(stop_after or 0) if self.hunks else 0
        #: the stop as configured, for a re-run that must end where the run ended (`reset`)
        self._stop_after_setting = self.stop_after
        #: end the run when the call of the changed function that ran every hunk returns
        #: (`StopRun`), for contracts decided by then (`checks.DECIDED_AT_RETURN`)
        self.stop_at_return = bool(stop_at_return) and bool(self.hunks)
        self._stop_at_return_setting = self.stop_at_return
        #: calls of the watched function under way: (token, events, live graph bytes) at entry
        self._calls: list[tuple[object, int, int]] = []
        #: the call that ran the last hunk (its token), or None
        self._return_call: object | None = None
        #: bytes of saved tensors alive now (`probes.Probes.live_graph_bytes`), set by the harness
        self.graph_live: Any = None
        #: what the run recorded where it stopped at a return: the value returned, the
        #: random states and the modules in training mode (outputs of the run)
        self._at_stop: dict[str, Any] = {}
        self._reached: set[int] = set()
        #: backwards (`backwards`) and optimizer steps when the last hunk was first reached
        self._armed_at: int | None = None
        self._armed_steps = 0
        self.backwards = 0
        self.steps = 0
        #: optimizers the run made (none: its updates are hand-written, no step will come)
        self.optimizers = 0
        #: where the run stopped (`stop`), or None
        self.stopped: dict[str, Any] | None = None
        #: the ``for`` loops under way (their iterators), to say at a stop how many items
        #: each had left: a patch that shortens a loop must not hide behind the stop
        self._live: "weakref.WeakSet[_Capped]" = weakref.WeakSet()
        self.begun = 0
        #: ``while`` entries under way when the run stopped: each ends at its next test
        self._ending_whiles: list[_Entry] = []
        #: ``scope.name`` of names assigned on changed lines whose last values are outputs
        self.observe = frozenset(observe)
        self._seen: dict[str, Any] = {}
        self.forwards = 0
        self.root = os.path.abspath(root) if root else None
        self.announce_fd = announce_fd
        self.events = 0
        self.ticks = 0
        self._began = time.monotonic()
        #: run capped loops on while gradients wait for a step (an accumulation window)
        self.whole_windows = whole_windows
        #: a backward ran since the last optimizer step
        self.pending = False
        self._loops: list[_Loop] = []
        self._whiles: dict[int, _Entry] = {}
        self._depth = 0
        self._owns_params: dict[int, bool] = {}
        self._undo: list[Any] = []
        #: called when a ``for`` loop that did working iterations ends, its function's
        #: locals still alive (the doctor looks at what they hold then); None: nobody asks
        self.loop_done: Callable[[], None] | None = None

    @property
    def enabled(self) -> bool:
        return self.cap > 0

    # -- compiling -------------------------------------------------------------------
    def register(self, filename: str, line: int, label: str, changed: bool = False) -> int:
        if self.forward_cap is not None:
            forward_cap = self.forward_cap
        else:
            forward_cap = 0 if changed else DEFAULT_FORWARD_CAP
        self._loops.append(_Loop(filename, line, label, changed, forward_cap))
        return len(self._loops) - 1

    def owns(self, filename: str | None) -> bool:
        if not filename or not filename.endswith(".py") or self.root is None:
            return False
        return os.path.abspath(filename).startswith(self.root + os.sep)

    def compile(self, source: str | bytes, filename: str) -> Any:
        """The code of `source` with its loops counted (unchanged when capping is off,
        or when the tree cannot be rewritten: then it simply runs in full)."""
        if not self.enabled:
            return compile(source, filename, "exec", dont_inherit=True)
        tree = ast.parse(source, filename)  # a SyntaxError is the caller's, as for compile
        try:
            if (self.stop_after or self.stop_at_return) and os.path.abspath(filename) == self.changed_file:
                if self.stop_at_return:
                    _watch_return(tree, self.hunks)
                _mark_reached(tree, self.hunks)
            tree = ast.fix_missing_locations(_Capper(self, os.path.abspath(filename)).visit(tree))
            return compile(tree, filename, "exec", dont_inherit=True)
        except (RecursionError, ValueError, TypeError, MemoryError):
            return compile(source, filename, "exec", dont_inherit=True)

    # -- the helpers the rewritten code calls ----------------------------------------------
    def _loop(self, iterable: Iterable[Any], loop_id: int) -> Iterator[Any]:
        return _Capped(self, self._loops[loop_id], iterable)

    def _reached_hunks(self, ids: tuple[int, ...]) -> None:
        """Hunks `ids` of the changed code are running; once all have, the run is armed."""
        if self._armed_at is not None:
            return
        self._reached.update(ids)
        if len(self._reached) >= len(self.hunks):
            self._armed_at, self._armed_steps = self.backwards, self.steps
            if self.stop_at_return and self._calls:
                self._return_call = self._calls[-1][0]

    def _watched(self, function: Any) -> Any:
        """The changed function, wrapped so that the call that ran every hunk of the
        change ends the run once it has returned (`_returned`): its frame and locals are
        gone by then, so what its graph left alive is what it let escape."""
        import functools

        if isinstance(function, (staticmethod, classmethod)):
            return type(function)(self._watched(function.__func__))
        if not isinstance(function, types.FunctionType):
            return function  # a decorator made something else (a scripted function, a property): no stop here
        bounds = self

        @functools.wraps(function)
        def watched(*args: Any, **kwargs: Any) -> Any:
            token = object()
            live = bounds.graph_live() if bounds.graph_live is not None else 0
            bounds._calls.append((token, bounds.events, live))
            try:
                value = function(*args, **kwargs)
            finally:
                entry = bounds._calls.pop()
            if bounds._return_call is token and bounds.stop_at_return and bounds.stopped is None:
                bounds._returned(function, value, entry[1], entry[2], (args, kwargs))
            return value

        return watched

    def _returned(self, function: Any, value: Any, events: int, live: int, arguments: tuple[tuple, dict] = ((), {})) -> None:
        """The call that ran the changed code returned `value`: stop the run here (both
        sides alike) unless the call trained (a backward or a step ran in it: what the
        change did shows later, and the ordinary stop applies). Whether anything of a
        graph the call recorded outlived it (``escaped``: saved tensors still alive, or a
        returned tensor with a graph) is recorded: a later backward could have used it, so
        the job runs the pair again without this stop (`escaped_stop`)."""
        if self.events != events:
            return
        escaped = ""
        if self.graph_live is not None and self.graph_live() > live:
            escaped = "saved tensors of its graph outlived the call"
        elif any(t.requires_grad and t.grad_fn is not None for t in _tensors_in(value)):
            escaped = "it returned a tensor that holds a graph"
        import inspect

        try:
            inner = inspect.unwrap(function)  # under its decorators (a `torch.no_grad()` wrapper)
        except ValueError:
            inner = function
        code = getattr(inner, "__code__", None)
        name = getattr(inner, "__qualname__", None) or getattr(inner, "__name__", "?")
        where = f"{self._relative(code.co_filename)}:{code.co_firstlineno}" if code is not None else "?"
        live_loops = [it for it in list(self._live) if not it._done]
        left = sorted((it._order, it._entry.loop.label, it._known) for it in live_loops)
        self.stopped = {"where": where, "label": f"{name}()", "after": 0, "counted": "return", "at_return": True,
                        "escaped": escaped, "left": [[label, known] for _, label, known in left]}
        self._at_stop = self._state_at_stop(name, value, getattr(inner, "__globals__", {}))
        self._at_stop.update(_arguments_after(name, inner, arguments))
        raise StopRun(f"the changed {name}() returned")

    @staticmethod
    def _state_at_stop(name: str, value: Any, namespace: dict[str, Any]) -> dict[str, Any]:
        """What code after the stop would have read and the run's globals do not show: the
        value the changed function returned, the random states, and which modules of the
        changed file's globals are in training mode."""
        import random

        import torch
        from torch import nn

        state: dict[str, Any] = {returned_key(name): _detached(value),
                                 # a rewrite that leaves grad mode off for good (`set_grad_enabled(False)`)
                                 "autograd mode where the run stopped": {"grad enabled": torch.is_grad_enabled(),
                                                                         "inference mode": torch.is_inference_mode_enabled()},
                                 "torch random state where the run stopped": torch.get_rng_state(),
                                 "random module state where the run stopped": hash(random.getstate())}
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            state["numpy random state where the run stopped"] = numpy.random.get_state()[1].copy()
        modes = {key: sorted(sub or "." for sub, module in item.named_modules() if module.training)
                 for key, item in list(namespace.items()) if isinstance(item, nn.Module)}
        if modes:
            state["modules in training mode where the run stopped"] = modes
        return state

    def _relative(self, filename: str) -> str:
        return os.path.relpath(filename, self.root) if self.root and self.owns(filename) else os.path.basename(filename)

    @property
    def reached(self) -> frozenset[int]:
        """The hunks whose reach points ran (indices into `hunks`)."""
        return frozenset(self._reached)

    def stop_due(self) -> bool:  # noqa: D401
        """The changed code has run and `stop_after` backwards followed, and, in a run that
        made an optimizer, as many optimizer steps, the last one done: no gradient waits for
        a step (an accumulation window of 4 micro-batches runs 2 windows). A run without
        an optimizer updates by hand (``p.data.add_(p.grad, alpha=-lr)``): its backwards
        count alone, the update done by the next iteration boundary."""
        if self.stopped is not None or self._armed_at is None:
            return False  # once: loops entered after the stop run with their caps
        if self.backwards - self._armed_at < self.stop_after:
            return False
        if self.optimizers:
            return self.steps - self._armed_steps >= self.stop_after and not self.pending
        return True

    def stop(self, loop: _Loop) -> None:
        """End every loop under way at its next iteration boundary, `loop` (whose
        boundary this is) first, as if their iterables were exhausted, both sides alike:
        the code after them still runs (an evaluation after the epoch loop, a
        ``torch.stack(losses)`` a wrong rewrite breaks), loops entered later keep their caps."""
        live = [it for it in list(self._live) if not it._done]
        # items each loop under way had left (-1: unknown), in the order the loops began
        left = sorted((it._order, it._entry.loop.label, it._known) for it in live)
        self.stopped = {"where": self._where(loop), "label": loop.label, "after": self.stop_after,
                        "counted": "optimizer step" if self.optimizers else "backward",
                        "left": [[label, known] for _, label, known in left]}
        for it in live:
            it._ending = True
        self._ending_whiles = [entry for entry in self._whiles.values() if entry.started]

    def _while_enter(self, loop_id: int) -> None:
        self._whiles[loop_id] = _Entry(self, self._loops[loop_id])

    def _while_more(self, loop_id: int) -> bool:
        entry = self._whiles.get(loop_id)
        if entry is None:
            entry = self._whiles[loop_id] = _Entry(self, self._loops[loop_id])
        if entry.started and self.events != entry.events and self.stop_due():
            self.stop(entry.loop)
        if any(entry is ending for ending in self._ending_whiles):  # the stop ends the loops under way
            self._ending_whiles = [ending for ending in self._ending_whiles if ending is not entry]
            entry.started = False
            return False
        if not entry.at_iteration_start():
            entry.cut()
            entry.started = False  # a later test of the same entry (none: the loop ended)
            entry.working = entry.forward_only = 0
            return False
        entry.begin()
        return True

    def _seen_value(self, key: str, value: Any) -> None:
        """The value a changed line just assigned (the last one is the output). A tensor
        is kept detached: holding it must not keep its graph alive for the memory probes."""
        detach = getattr(value, "detach", None)
        if detach is not None and type(value).__module__.startswith("torch"):
            try:
                value = detach()
            except Exception:  # noqa: BLE001 - a tensor subclass that refuses
                pass
        self._seen[key] = value

    def observed(self) -> dict[str, Any]:
        """The last values of the observed names, keyed as verdicts name them."""
        seen = {f"{key.rpartition('.')[2]} (last value assigned by the changed code in {key.rpartition('.')[0]})": value
                for key, value in sorted(self._seen.items())}
        return {**seen, **self._at_stop}

    # -- events -------------------------------------------------------------------------
    def _pre_forward(self, module: nn.Module, args: Any) -> None:
        self._depth += 1

    def _post_forward(self, module: nn.Module, args: Any, output: Any) -> None:
        self._depth = max(0, self._depth - 1)
        if self._depth == 0:
            key = id(module)
            owns = self._owns_params.get(key)
            if owns is None:
                owns = self._owns_params[key] = next(iter(module.parameters()), None) is not None
            if owns:
                self.forwards += 1
                if self.forwards & (self.forwards - 1) == 0:
                    self._progress()

    def _event(self, *args: Any) -> None:
        self.events += 1

    def _stepped(self, *args: Any) -> None:
        self.events += 1
        self.steps += 1
        self.pending = False

    def install(self) -> "Bounds":
        """The builtins, the import hook and the event hooks (before the probes, whose
        wrappers of backward then call ours)."""
        if not self.enabled:
            return self
        import torch
        import torch.optim.optimizer as _optimizer_module
        from torch import nn

        for name, helper in ((LOOP, self._loop), (WHILE_ENTER, self._while_enter), (WHILE_MORE, self._while_more),
                             (SEEN, self._seen_value), (REACHED, self._reached_hunks), (RETURNED, self._watched)):
            setattr(builtins, name, helper)
            self._undo.append(lambda name=name: delattr(builtins, name) if hasattr(builtins, name) else None)
        finder = _ProjectFinder(self)
        position = next((i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder), len(sys.meta_path))
        sys.meta_path.insert(position, finder)
        self._undo.append(lambda: sys.meta_path.remove(finder) if finder in sys.meta_path else None)
        handles = [
            nn.modules.module.register_module_forward_pre_hook(self._pre_forward),
            nn.modules.module.register_module_forward_hook(self._post_forward, always_call=True),
            _optimizer_module.register_optimizer_step_post_hook(self._stepped),
        ]
        self._undo.extend(handle.remove for handle in handles)
        original_backward, original_grad = torch.autograd.backward, torch.autograd.grad

        def backward(*args: Any, **kwargs: Any) -> Any:
            try:
                return original_backward(*args, **kwargs)
            finally:
                self.events += 1
                self.backwards += 1
                self.pending = True
                if self.backwards & (self.backwards - 1) == 0:
                    self._progress()

        def grad(*args: Any, **kwargs: Any) -> Any:
            try:
                return original_grad(*args, **kwargs)
            finally:
                self.events += 1

        torch.autograd.backward, torch.autograd.grad = backward, grad
        optimizer_init = torch.optim.Optimizer.__init__

        def made(optimizer: Any, *args: Any, **kwargs: Any) -> None:
            self.optimizers += 1
            optimizer_init(optimizer, *args, **kwargs)

        torch.optim.Optimizer.__init__ = made  # type: ignore[method-assign]
        self._undo.append(lambda: setattr(torch.optim.Optimizer, "__init__", optimizer_init))
        self._undo.append(lambda: setattr(torch.autograd, "backward", original_backward))
        self._undo.append(lambda: setattr(torch.autograd, "grad", original_grad))
        return self

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def __enter__(self) -> "Bounds":
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def reset(self, *, keep_stop: bool = False) -> None:
        """Fresh counters (a re-run of the same program). A re-run that ends at its own
        backward (finite differences, the second point) is never stopped (`stop_after`
        off); one that must shorten the program as the run did (the float64 reference,
        `keep_stop`) stops where the run stopped."""
        self._whiles.clear()
        self._depth = 0
        self.stop_after = self._stop_after_setting if keep_stop else 0
        self.stop_at_return = self._stop_at_return_setting if keep_stop else False
        self._return_call = None
        self._calls.clear()
        self._at_stop = {}
        self._armed_at = None
        self._reached = set()
        self.stopped = None

    # -- reporting ------------------------------------------------------------------------
    def _where(self, loop: _Loop) -> str:
        name = loop.filename
        if self.root and self.owns(name):
            name = os.path.relpath(name, self.root)
        else:
            name = os.path.basename(name)
        return f"{name}:{loop.line}"

    def _progress(self) -> None:
        """How far the run got (`PROGRESS`): read back only if it is killed (`progress`)."""
        if self.announce_fd is None:
            return
        item = {"forwards": self.forwards, "backwards": self.backwards, "seconds": round(time.monotonic() - self._began, 1)}
        try:
            os.write(self.announce_fd, (PROGRESS + json.dumps(item) + "\n").encode())
        except OSError:
            pass

    def announce(self, loop: _Loop, working: int) -> None:
        if self.announce_fd is None:
            return
        line = MARKER + json.dumps({"where": self._where(loop), "label": loop.label, "cap": working}) + "\n"
        try:
            os.write(self.announce_fd, line.encode())
        except OSError:
            pass

    def report(self) -> list[dict[str, Any]]:
        """The loops that were cut, outer loops first, then by file and line: where
        (relative to the project), how the verdict names them, the working iterations
        kept per entry, and how many entries (of how many) were cut."""
        cut = sorted((loop for loop in self._loops if loop.capped), key=lambda loop: (not loop.outer, loop.filename, loop.line))
        return [
            {"where": self._where(loop), "label": loop.label, "cap": loop.cap, "capped": loop.capped, "entries": loop.entries,
             "forward": loop.forward}
            for loop in cut
        ]

    def settings(self) -> dict[str, int | None]:
        return {"cap": self.cap, "outer_cap": self.outer_cap, "forward_cap": self.forward_cap, "stop_after": self.stop_after,
                "stop_at_return": self.stop_at_return}


def _marked(output: str, marker: str) -> Iterator[dict[str, Any]]:
    """The JSON objects the run wrote after `marker` in its output stream."""
    for line in output.split("\n"):
        index = line.find(marker)
        if index < 0:
            continue
        try:
            item = json.loads(line[index + len(marker):])
        except ValueError:
            continue
        if isinstance(item, dict):
            yield item


def announced(output: str) -> list[dict[str, Any]]:
    """The loops a run said it capped before it ended (read from its output stream)."""
    return [{"where": item["where"], "label": item["label"], "cap": item["cap"]} for item in _marked(output, MARKER)
            if all(isinstance(item.get(k), str) for k in ("where", "label")) and isinstance(item.get("cap"), int)]


def progress(output: str) -> dict[str, Any]:
    """The last progress a run reported (`PROGRESS`): forwards, backwards and the seconds
    it had taken by then; zeros when it reported none (not one forward finished)."""
    last: dict[str, Any] = {"forwards": 0, "backwards": 0, "seconds": 0.0}
    for item in _marked(output, PROGRESS):
        if all(isinstance(item.get(k), (int, float)) for k in ("forwards", "backwards", "seconds")):
            last = item
    return last


def describe_progress(item: dict[str, Any]) -> str:
    """``by then at least 2 forwards, no backward had finished (the last counted after 14.2 s)``."""
    forwards, backwards = int(item.get("forwards", 0)), int(item.get("backwards", 0))
    if not forwards and not backwards:
        return "not one forward of a model with parameters had finished by then"
    counted = ", ".join(f"{'at least ' if n > 1 else ''}{n} {what}{'s' if n != 1 else ''}" if n else f"no {what}"
                        for n, what in ((forwards, "forward"), (backwards, "backward")))
    return f"by then {counted} had finished (the last counted after {float(item.get('seconds', 0)):g} s)"


def describe(loops: list[dict[str, Any]]) -> str:
    """``loop `for epoch` at main.py:225 capped at 2 iterations, `for x, y` at main.py:171 at 3``."""
    parts = []
    for index, loop in enumerate(loops[:6]):
        cap = int(loop.get("cap", 0))
        at = f"capped at {cap} iteration{'s' if cap != 1 else ''}" if index == 0 else f"at {cap}"
        parts.append(f"`{loop.get('label')}` at {loop.get('where')} {at}")
    more = f" and {len(loops) - 6} more" if len(loops) > 6 else ""
    return "loop " + ", ".join(parts) + more if parts else ""


def describe_stop(stopped: dict[str, Any] | None) -> str:
    """``stopped 2 optimizer steps after the changed code ran (at loop `for i` at main.py:68)``."""
    if not stopped:
        return ""
    if stopped.get("at_return"):
        return f"stopped when the changed {stopped.get('label')} returned ({stopped.get('where')})"
    after, counted = int(stopped.get("after", 0)), str(stopped.get("counted") or "backward")
    return (f"stopped {after} {counted}{'s' if after != 1 else ''} after the changed code ran "
            f"(at loop `{stopped.get('label')}` at {stopped.get('where')})")


def shortened_text(bounded: dict[str, Any] | None) -> str:
    """What a run's record says was shortened: its stop, then its capped loops."""
    bounded = bounded or {}
    return ", ".join(part for part in (describe_stop(bounded.get("stopped")), describe(bounded.get("loops") or [])) if part)


def applies(unit: dict[str, Any], settings: dict[str, Any] | None) -> dict[str, Any] | None:
    """The caps a unit's runs get: script and driver runs (not a pytest node, not a
    function with synthesized inputs), when capping is on."""
    if not settings or int(settings.get("cap") or 0) <= 0:
        return None
    if unit.get("kind") == "script" or (unit.get("kind") == "driver" and (unit.get("command") or {}).get("kind") != "pytest"):
        return settings
    return None


def holds_changed_loop(source: str, lines: Iterable[int]) -> bool:
    """A loop of `source` holds one of `lines` (its header or body): unset, the forward
    cap lets such a loop's evaluation run in full, so capping it could shorten a run."""
    wanted = set(lines)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return True
    return any(isinstance(node, (ast.For, ast.While, ast.comprehension)) and
               any((getattr(node, "lineno", None) or node.iter.lineno) <= line <= (getattr(node, "end_lineno", None) or node.iter.end_lineno or 0)
                   for line in wanted)
               for node in ast.walk(tree))


def capping_evaluations_could_help(output: str) -> bool:
    """A run killed at its time limit had run more model forwards than an evaluation loop
    keeps when capped (`DEFAULT_FORWARD_CAP`): a second try with every evaluation capped
    might fit; with fewer it would be cut at the same place."""
    return int(progress(output).get("forwards", 0)) > DEFAULT_FORWARD_CAP


def escaped_stop(outcomes: Any) -> bool:
    """A side stopped at the changed function's return although a graph that call
    recorded outlived it (`Bounds._returned`): code after the return could have used it."""
    for outcome in outcomes:
        bounded = outcome.record.bounded if outcome.record is not None else None
        stopped = (bounded.stopped if bounded is not None else None) or {}
        if stopped.get("at_return") and stopped.get("escaped"):
            return True
    return False


def shortest_evaluation_could_help(outcomes: Any) -> bool:
    """The original run was killed at its time limit or ran out of memory after at least
    one model forward had finished (`PROGRESS`): a run whose every evaluation loop keeps
    one iteration might fit (with none finished it would be cut at the same place)."""
    if not outcomes:
        return False
    original = outcomes[0]
    exception = original.record.exception if original.status == "ok" and original.record is not None else None
    out_of_limits = original.status in ("timeout", "memory") or bool(exception is not None and exception.memory)
    return out_of_limits and int(progress(original.output).get("forwards", 0)) >= 1


def evaluation_cut_broke(outcomes: Any) -> bool:
    """Both sides stopped at the same error that is not autograd's after an evaluation
    loop was cut: often the cut itself (predictions of 3 batches paired with every label
    of the dataset), so the pair is run again with evaluation loops in full."""
    if len(outcomes) != 2 or any(o.status != "ok" or o.record is None for o in outcomes):
        return False
    first, second = (o.record.exception for o in outcomes)
    if not first or not second or first.autograd or (first.type, first.message) != (second.type, second.message):
        return False
    bounded = outcomes[0].record.bounded
    loops = bounded.loops if bounded is not None else ()
    return any(loop.get("forward") for loop in loops)


def note_timeouts(outcomes: Any, settings: dict[str, Any] | None) -> Any:
    """A run killed at its time limit although its loops were capped says so, and what
    had been shortened by then (from the markers it wrote, which are then dropped from
    every outcome's output)."""
    if settings is None:
        return outcomes
    for outcome in outcomes:
        loops = announced(outcome.output)
        reached = progress(outcome.output)
        if MARKER in outcome.output or PROGRESS in outcome.output:  # the markers are the tool's, not what the code printed
            outcome.output = "\n".join(line for line in outcome.output.split("\n") if MARKER not in line and PROGRESS not in line)
        if outcome.status != "timeout":
            continue
        if loops:
            outcome.detail += f", even shortened ({describe(loops)}; {describe_progress(reached)})"
        else:
            cap, outer = settings.get("cap"), settings.get("outer_cap")
            outcome.detail += (f", even shortened (loops that run a backward or an optimizer step capped at {cap} "
                               f"iterations, {outer} for outer loops, evaluation loops the patch did not change at "
                               f"{settings.get('forward_cap') if settings.get('forward_cap') is not None else DEFAULT_FORWARD_CAP}; "
                               f"none had reached its cap: the first iterations alone do not fit the time limit; {describe_progress(reached)})")
    return outcomes
