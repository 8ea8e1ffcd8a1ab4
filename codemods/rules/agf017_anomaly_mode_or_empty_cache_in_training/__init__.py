"""AGF017 anomaly-mode-or-empty-cache-in-training: debugging and cache-flushing calls left in training."""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.expressions import is_true
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.rule import Contract, Rule
from autograd_fix.codemods.semantic.loops import (
    all_nodes,
    ancestors,
    enclosing_scope,
    innermost_loop,
    is_backward_call,
    local_nodes,
    parent_map,
    runs_every_iteration,
)
from autograd_fix.codemods.torch_api import DETECT_ANOMALY, EMPTY_CACHE, SET_DETECT_ANOMALY

_CONDITIONAL = (cst.If, cst.IfExp, cst.Try, cst.ExceptHandler, cst.Match, cst.BooleanOperation)


class AnomalyModeOrEmptyCacheInTraining(Rule):
    """
    ## What it does
    Finds `torch.autograd.set_detect_anomaly(True)` and `with torch.autograd.detect_anomaly():`
    left on around a training loop, and `torch.cuda.empty_cache()` called on every
    iteration of a training loop, and removes them (a `with` block is unwrapped).

    ## Why is this bad?
    Anomaly mode records the Python stack of every forward operation and checks every
    backward result for `nan`: it slows every step several times. It is a debugging aid
    for one failing step, not a setting for a whole run. `empty_cache()` returns the
    caching allocator's free blocks to the driver; the next iteration reserves them
    again with `cudaMalloc`, which synchronizes and slows training. It frees no memory
    that live tensors hold, so it cures no out-of-memory error inside a loop.

    ## Example
    ```python
    torch.autograd.set_detect_anomaly(True)
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
        torch.cuda.empty_cache()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    ```

    ## Fix safety
    Unsafe: a person may have turned anomaly mode on on purpose while hunting a `nan`,
    and anomaly mode turns a silent `nan` gradient into an error. The rule fires only on
    an unconditional call with the literal `True` (a flag such as
    `set_detect_anomaly(args.debug)`, or a call under `if`, is a choice the code makes
    visible) in a scope whose loop backpropagates, and on an `empty_cache()` that runs on
    every iteration of the innermost loop that itself calls backward (a flush after each
    epoch, or every N steps under `if`, is left alone). A `with detect_anomaly()` with
    other context managers in the same statement is reported without a fix.

    ## Verification
    Outputs and gradients equal (neither call changes any value; anomaly mode's own
    flag, where the program reads it, may change); the verdict reports the measured time
    per step of both runs and their ratio.
    """

    code = "AGF017"
    name = "anomaly-mode-or-empty-cache-in-training"
    safety = Applicability.UNSAFE
    message = "slows every training step"
    contract = Contract(
        description="outputs and gradients equal (the calls change no value); time per step reported",
        checks=("outputs_equal", "grads_equal", "graph_state_may_change", "time_per_step_reported"),
    )

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self._lines: list[tuple[cst.SimpleStatementLine, str]] = []
        self._withs: list[cst.With] = []

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if len(node.body) != 1 or type(node.body[0]) is not cst.Expr or type(node.body[0].value) is not cst.Call:
            return
        call = node.body[0].value
        qualified = self.context.imports.qualified_name(call.func)
        if qualified in SET_DETECT_ANOMALY and _turns_on(call):
            self._lines.append((node, "anomaly"))
        elif qualified in EMPTY_CACHE and not call.args:
            self._lines.append((node, "cache"))

    def visit_With(self, node: cst.With) -> None:
        imports = self.context.imports
        if any(type(i.item) is cst.Call and imports.qualified_name(i.item.func) in DETECT_ANOMALY for i in node.items):
            self._withs.append(node)

    def leave_Module(self, original_node: cst.Module) -> None:
        if not self._lines and not self._withs:
            return
        parents = parent_map(original_node, self.context.semantic.syntax)
        for line, kind in self._lines:
            if _conditional(line, parents):
                continue
            if kind == "anomaly" and self._scope_trains(line, parents):
                self._report_line(line, parents, "`set_detect_anomaly(True)` left on around training slows every step several times; remove it")
            elif kind == "cache" and self._flushes_every_step(line, parents):
                self._report_line(line, parents, "`empty_cache()` on every training step re-reserves GPU memory each time and slows training; remove it")
        for block in self._withs:
            if _conditional(block, parents) or not self._with_trains(block, parents):
                continue
            message = "`detect_anomaly()` around training slows every step several times; remove it"
            if len(block.items) != 1 or block.asynchronous is not None or type(block.body) is not cst.IndentedBlock:
                self.report(block, message)
                continue
            fix = Fix(Applicability.UNSAFE, (Edit(block, _unwrapped),), "remove `detect_anomaly()`")
            self.report(block, message, fix)

    def _backward_calls(self, root: cst.CSTNode, nested: bool = False) -> list[cst.Call]:
        imports = self.context.imports
        found = all_nodes(root, cst.Call) if nested else local_nodes(root, cst.Call)
        return [c for c in found if is_backward_call(c, imports)]  # type: ignore[misc]

    def _scope_trains(self, line: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> bool:
        """A backward inside a loop of the same scope; anomaly mode is global, so for a
        call at module level, a loop anywhere in the file (a script's `train` function)."""
        scope = enclosing_scope(line, parents)
        calls = self._backward_calls(scope, nested=type(scope) is cst.Module)
        return any(innermost_loop(c, parents) is not None for c in calls)

    def _with_trains(self, block: cst.With, parents: dict[int, cst.CSTNode]) -> bool:
        inside = self._backward_calls(block.body)
        if any(innermost_loop(c, parents) is not None for c in inside):
            return True
        loop = innermost_loop(block, parents)
        return loop is not None and any(innermost_loop(c, parents) is loop for c in self._backward_calls(loop.body))

    def _flushes_every_step(self, line: cst.SimpleStatementLine, parents: dict[int, cst.CSTNode]) -> bool:
        loop = innermost_loop(line, parents)
        if loop is None or not runs_every_iteration(line, loop, parents):
            return False
        return any(innermost_loop(c, parents) is loop for c in self._backward_calls(loop.body))

    def _report_line(self, line: cst.SimpleStatementLine, parents: dict[int, cst.CSTNode], message: str) -> None:
        block = parents.get(id(line))
        body = getattr(block, "body", None)
        if isinstance(body, (list, tuple)) and len(body) == 1:
            self.report(line, message)  # the only statement of its block: removing it would leave it empty
            return
        fix = Fix(Applicability.UNSAFE, (Edit(line, lambda updated: cst.RemovalSentinel.REMOVE),), "remove the call")
        self.report(line, message, fix)


def _turns_on(call: cst.Call) -> bool:
    positional = [a for a in call.args if a.keyword is None and not a.star]
    mode = positional[0].value if positional else next((a.value for a in call.args if a.keyword and a.keyword.value == "mode"), None)
    return mode is not None and is_true(mode)


def _conditional(node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> bool:
    """Under an `if` / `try` between `node` and its function: the code chose when it runs."""
    for parent in ancestors(node, parents):
        if type(parent) in (cst.FunctionDef, cst.Lambda, cst.ClassDef):
            return False
        if isinstance(parent, _CONDITIONAL):
            return True
    return False


def _unwrapped(updated: cst.CSTNode) -> cst.CSTNode | cst.FlattenSentinel:
    assert type(updated) is cst.With
    body = updated.body
    if type(body) is not cst.IndentedBlock:
        return updated
    statements = list(body.body)
    statements[0] = statements[0].with_changes(leading_lines=[*updated.leading_lines, *statements[0].leading_lines])
    return cst.FlattenSentinel(statements)
