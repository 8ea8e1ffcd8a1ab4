"""AGF010 hidden-state-not-detached: recurrent state carried across training iterations."""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.semantic.dataflow import read_names
from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.rule import Contract, Rule
from autograd_fix.codemods.semantic.roles import Role
from autograd_fix.codemods.rules.agf010_hidden_state_not_detached.attribute_state import AttributeCarry, find_attribute_carries
from autograd_fix.codemods.rules.agf010_hidden_state_not_detached.recurrent_state import Carry, FunctionFinder, find_carries, retains_graph

#: torch functions that make a single fresh tensor (the state is a tensor, not a tuple)
_TENSOR_FACTORIES = frozenset(
    f"torch.{name}"
    for name in ("zeros", "ones", "randn", "rand", "empty", "full", "zeros_like", "ones_like", "randn_like",
                 "empty_like", "full_like", "tensor")
)
_TENSOR_METHODS = frozenset({"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "detach", "clone"})


class HiddenStateNotDetached(Rule):
    """
    ## What it does
    Finds recurrent state (`hidden`, `h`, `(h, c)`, `state`, `memory`) that an RNN / LSTM /
    GRU / model call returns inside a training loop and that is fed back into the same
    call in the next iteration without being detached, and detaches it at the top of the
    iteration (truncated backpropagation through time), or right after the call when it
    may be `None` before the first one.

    It also finds state an `nn.Module` keeps on itself: `out, self.hidden =
    self.lstm(x, self.hidden)` in `forward`, where a training loop of the same file
    (at module level, or in a function such as `train(model, ...)` that the file calls
    with an instance) calls the model and runs backward every batch, and neither the
    class nor that loop detaches `self.hidden`, re-initialises it (`model.hidden =
    model.init_hidden()`) or calls a method that reassigns it (pytorch/pytorch#2769).
    The detach then goes in `forward`, right before the recurrent call.

    ## Why is this bad?
    The state returned in iteration *k* carries the graph of iteration *k*. After
    `loss.backward()` frees that graph, iteration *k + 1* backpropagates through the state
    into it again and fails with `Trying to backward through the graph a second time`.
    Adding `retain_graph=True` hides the error but keeps every batch's graph alive (memory
    grows each step) and, once the optimizer has updated the weights in place, fails with
    `one of the variables needed for gradient computation has been modified by an inplace
    operation`.

    ## Example
    ```python
    hidden = model.init_hidden(batch_size)
    for inputs, targets in batches:
        optimizer.zero_grad()
        output, hidden = model(inputs, hidden)
        loss = criterion(output, targets)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    hidden = model.init_hidden(batch_size)
    for inputs, targets in batches:
        hidden = tuple(h.detach() for h in hidden)  # LSTM (h, c); `hidden.detach()` for GRU/RNN
        ...
    ```

    ## Fix safety
    The rule fires only when the loop runs a backward pass unconditionally in every
    iteration (not under an `if`, so not a chunked TBPTT loop that detaches every k
    steps), after the recurrent call, and the state is neither re-initialised, detached
    (`.detach()`, `.detach_()`, a `repackage_hidden` helper), nor passed to any other call
    in the loop. The detach goes first in the loop body and follows how the code shapes
    the state: `h, c = h.detach(), c.detach()` for unpacked names,
    `hidden = tuple(h.detach() for h in hidden)` for a tuple built before the loop,
    `hidden = hidden.detach()` for a tensor made by a torch factory. These fixes are safe:
    the original fails at the second iteration. When the state's shape is unknown
    (`model.init_hidden(...)`), the fix handles a tensor or a tuple of tensors
    (`hidden.detach() if isinstance(hidden, torch.Tensor) else tuple(...)`) and is
    unsafe (a nested structure would need a recursive helper). With `retain_graph=True`
    the original may run, and detaching changes its gradients (it truncates the history
    by design): unsafe. A state initialised to `None`, or not initialised in view
    (a parameter), is detached right after the recurrent call instead (the top of the
    loop would call `None.detach()`), in the same shapes, when the call is a statement of
    the loop body and nothing after it reads the state; otherwise it is reported only.

    ## Verification
    The original's error (`Trying to backward through the graph a second time`, or the
    in-place version error) is gone in the rewritten run, and its peak memory is not
    higher.
    """

    code = "AGF010"
    name = "hidden-state-not-detached"
    safety = Applicability.SAFE
    message = "recurrent state carried across training iterations without .detach()"
    contract = Contract(
        description="the original's 'backward through the graph a second time' (or in-place version) error is "
        "gone; the forward values (each backward's loss) the original computed before its error are equal; peak "
        "memory not higher",
        checks=("original_error_gone", "forward_values_equal", "peak_memory_not_higher", "graph_state_may_change"),
    )

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self._scan = FunctionFinder(context.module)

    # the batched traversal records which scopes run a backward; the analysis runs once at the end
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scan.visit_FunctionDef(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._scan.leave_FunctionDef(original_node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._scan.visit_Attribute(node)

    def leave_Module(self, original_node: cst.Module) -> None:
        for scope in self._scan.scopes():
            state_words = self.context.roles.tokens(Role.STATE)
            for carry, initial in find_carries(scope, self.context.imports, state_words, self.context.semantic.syntax):
                self._report(carry, initial)
        if self._scan.scopes():
            semantic = self.context.semantic
            for attribute_carry in find_attribute_carries(original_node, self.context.imports, semantic.module_classes, semantic.syntax):
                self._report_attribute(attribute_carry)

    def _report_attribute(self, carry: AttributeCarry) -> None:
        """State kept on `self.<attribute>` by `forward`, with the training loop outside the
        class: the detach goes in `forward`, right before the recurrent call."""
        shown = f"{carry.owner}.{carry.attribute}"
        message = (
            f"`{shown}` carries the recurrent state from one `forward` call to the next, and the training loop "
            f"that calls the model runs backward every batch without detaching or re-initialising it: the next "
            "backward() runs into the previous batch's graph ('Trying to backward through the graph a second time')"
        )
        if any(type(v) is cst.Name and v.value == "None" for v in carry.initial):
            self.report(carry.statement, message + f"; detach `{shown}` before the call once it is set")
            return
        statement, needs = _attribute_detach(shown, carry.initial, self.context.imports)
        fix = Fix(
            applicability=Applicability.UNSAFE,
            edits=(Edit(carry.line, lambda updated: _before(updated, statement)),),
            description=f"detach `{shown}` in `forward` before the recurrent call",
            required_imports=needs,
        )
        self.report(carry.statement, message, fix)

    def _report(self, carry: Carry, initial: dict[str, cst.BaseExpression | None]) -> None:
        imports = self.context.imports
        shown = f"({', '.join(carry.names)})" if carry.unpacked else carry.names[0]
        message = (
            f"`{shown}` is carried into the next iteration of a training loop without `.detach()`: the next "
            "backward() runs into the previous batch's graph ('Trying to backward through the graph a second time')"
        )
        body = carry.loop.body
        if type(body) is not cst.IndentedBlock:
            self.report(carry.statement, message + "; detach it at the top of the loop")
            return
        if any(initial.get(n) is None for n in carry.names):
            self._report_after_call(carry, body, message)
            return
        statement, applicability, needs = _detach_statement(carry, initial, imports)
        if retains_graph(carry.loop):
            applicability = Applicability.UNSAFE
        fix = Fix(
            applicability=applicability,
            edits=(Edit(body, lambda updated: _prepend(updated, statement)),),
            description=f"detach `{shown}` at the top of the loop body",
            required_imports=needs,
        )
        self.report(carry.statement, message, fix)


    def _report_after_call(self, carry: Carry, body: cst.IndentedBlock, message: str) -> None:
        """State that starts as `None` (or comes from a parameter): detaching at the top of
        the loop would fail on `None.detach()`, so the detach goes right after the call,
        where the state is the model's output (MorvanZhou's tutorial repacks there too).
        Only when the call is a statement of the loop body and nothing after it in the
        body reads the state (a loss on it would lose its gradient)."""
        line = next(
            (s for s in body.body if type(s) is cst.SimpleStatementLine and any(b is carry.statement for b in s.body)),
            None,
        )
        later = body.body[body.body.index(line) + 1 :] if line is not None else []
        if line is None or any(set(carry.names) & read_names(s) for s in later):
            self.report(carry.statement, message + "; detach it right after the call (it may be None before the first one)")
            return
        statement, applicability, needs = _detach_statement(carry, {n: None for n in carry.names}, self.context.imports)
        if retains_graph(carry.loop):
            applicability = Applicability.UNSAFE
        shown = f"({', '.join(carry.names)})" if carry.unpacked else carry.names[0]
        fix = Fix(
            applicability=applicability,
            edits=(Edit(line, lambda updated: cst.FlattenSentinel([updated, statement])),),
            description=f"detach `{shown}` right after the call (it may be None before the first one)",
            required_imports=needs,
        )
        self.report(carry.statement, message + "; it may be None before the first call: detach it right after the call", fix)


# --- the fix ---------------------------------------------------------------------------


def _detach_statement(
    carry: Carry, initial: dict[str, cst.BaseExpression | None], imports: ImportIndex
) -> tuple[cst.SimpleStatementLine, Applicability, tuple[str, ...]]:
    if carry.unpacked:
        left = ", ".join(carry.names)
        right = ", ".join(f"{n}.detach()" for n in carry.names)
        return cst.parse_statement(f"{left} = {right}"), Applicability.SAFE, ()  # type: ignore[return-value]
    name = carry.names[0]
    value = initial[name]
    loop_var = "t" if name == "h" else "h"
    if type(value) in (cst.Tuple, cst.List):
        text = f"{name} = tuple({loop_var}.detach() for {loop_var} in {name})"
        return cst.parse_statement(text), Applicability.SAFE, ()  # type: ignore[return-value]
    if value is not None and _makes_tensor(value, imports):
        return cst.parse_statement(f"{name} = {name}.detach()"), Applicability.SAFE, ()  # type: ignore[return-value]
    tensor, needs = imports.expression_for("torch.Tensor")
    tensor_text = cst.Module(body=[]).code_for_node(tensor)
    text = (
        f"{name} = {name}.detach() if isinstance({name}, {tensor_text}) "
        f"else tuple({loop_var}.detach() for {loop_var} in {name})"
    )
    return cst.parse_statement(text), Applicability.UNSAFE, needs  # type: ignore[return-value]


def _attribute_detach(
    shown: str, initial: tuple[cst.BaseExpression, ...], imports: ImportIndex
) -> tuple[cst.SimpleStatementLine, tuple[str, ...]]:
    """The detach of `self.hidden` in the shape every other assignment gives it: a tuple
    literal, a torch factory's tensor, or either (decided at run time)."""
    if initial and all(type(v) in (cst.Tuple, cst.List) for v in initial):
        return cst.parse_statement(f"{shown} = tuple(h.detach() for h in {shown})"), ()  # type: ignore[return-value]
    if initial and all(_makes_tensor(v, imports) for v in initial):
        return cst.parse_statement(f"{shown} = {shown}.detach()"), ()  # type: ignore[return-value]
    tensor, needs = imports.expression_for("torch.Tensor")
    tensor_text = cst.Module(body=[]).code_for_node(tensor)
    text = f"{shown} = {shown}.detach() if isinstance({shown}, {tensor_text}) else tuple(h.detach() for h in {shown})"
    return cst.parse_statement(text), needs  # type: ignore[return-value]


def _before(updated: cst.CSTNode, statement: cst.SimpleStatementLine) -> cst.CSTNode:
    """`statement` inserted before the line, which hands it its leading comments."""
    assert type(updated) is cst.SimpleStatementLine
    first = statement.with_changes(leading_lines=updated.leading_lines)
    return cst.FlattenSentinel([first, updated.with_changes(leading_lines=[])])


def _makes_tensor(value: cst.BaseExpression, imports: ImportIndex) -> bool:
    if type(value) is not cst.Call:
        return False
    if imports.qualified_name(value.func) in _TENSOR_FACTORIES:
        return True
    return type(value.func) is cst.Attribute and value.func.attr.value in _TENSOR_METHODS and (
        imports.qualified_name(value.func) is None
    )


def _prepend(updated: cst.CSTNode, statement: cst.SimpleStatementLine) -> cst.CSTNode:
    if type(updated) is not cst.IndentedBlock:
        return updated
    return updated.with_changes(body=[statement, *updated.body])
