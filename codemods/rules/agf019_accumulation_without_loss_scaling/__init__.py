"""AGF019 accumulation-without-loss-scaling: gradients summed over k micro-batches, stepped as one batch's."""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.imports import dotted_name
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.rule import Contract, Rule
from autograd_fix.codemods.rules.agf019_accumulation_without_loss_scaling.grad_accumulation import AccumulationWindow, accumulation_windows
from autograd_fix.codemods.semantic.loops import (
    RootTracker,
    all_nodes,
    ancestors,
    backward_has_gradient_argument,
    backward_root,
    bindings,
    breaks_graph,
    enclosing_scope,
    expression_statement_call,
    innermost_loop,
    is_backward_call,
    parent_map,
    statement_line,
)
from autograd_fix.codemods.semantic.role_evidence import Basis, scope_roles
from autograd_fix.codemods.semantic.roles import Role
from autograd_fix.codemods.torch_api import SCALING_FUNCTIONS, SCALING_METHODS, SUM_REDUCTIONS
from autograd_fix.codemods.walk import SyntaxIndex

_ATOMIC = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)
#: calls that take the count only to count with it
_COUNTING_CALLS = frozenset({"range", "print", "len", "int", "min", "max", "enumerate"})


class AccumulationWithoutLossScaling(RootTracker, Rule):
    """
    ## What it does
    Finds gradient-accumulation loops that call `backward()` on every micro-batch and
    `optimizer.step()` only every `k`-th one (`if (i + 1) % k == 0:`, a counter, a flag
    bound to such a test, or a `for micro_step in range(k):` loop inside the step loop)
    without dividing the loss by `k`, and divides it: `loss = loss / k` before the
    backward when the loop names the loss, `(expr / k).backward()` otherwise.

    ## Why is this bad?
    `backward()` adds into `.grad`. Over `k` micro-batches of a mean-reduced loss the
    step sees the *sum* of `k` batch-mean gradients: `k` times the gradient of the mean
    loss over the big batch the accumulation stands for. The effective learning rate is
    `k` times larger, gradient clipping clips `k` times too early, and changing `k`
    silently changes training (Adam hides part of it, SGD does not).

    ## Example
    ```python
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```

    ## Use instead
    ```python
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss = loss / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```

    ## Fix safety
    Unsafe: it changes the training trajectory on purpose. Summing is right, and the
    rule stays silent, where the code shows it: a sum-reduced loss (`reduction="sum"`,
    `size_average=False`, a loss ending in `.sum()`), a loss divided by anything that is
    not a plain number (`/ num_tokens_in_window`: per-token normalisation over the
    window, as transformers' Trainer does since its 2024 fix), or multiplied as a whole
    by a name. It also stays silent where the loop scales in any other form: `loss /= k`,
    `loss * (1 / k)`, `loss.div(k)`, the count passed to the loss function, gradients
    divided before the step (`p.grad /= k`, `p.grad.div_(k)`, a same-file helper that
    writes `.grad`), and where something else runs the backward (`accelerator.backward`
    and DeepSpeed engines divide by their own accumulation count). A `GradScaler`'s
    `scaler.scale(loss)` is not scaling by `k` (it is undone before the step). Steps on
    every micro-batch, or zeroing on every micro-batch, are no accumulation.
    With a last, shorter window (`or (i + 1) == len(loader)`) the divided gradient of
    that window is its mean times `n / k`; exact per-window means need the window's
    size, which the rule does not guess.

    ## Verification
    At the first optimizer step (both runs stand on the same parameters there) every
    parameter's accumulated gradient must equal the original's divided by the number of
    backward passes in that window, that is the gradient of the mean of the
    micro-batches' losses, which for equal-sized micro-batches is the big-batch
    gradient; the losses backpropagated must be the original's divided by the same
    number. At every step `.grad` must equal the sum of the contributions since the
    previous step.
    """

    code = "AGF019"
    name = "accumulation-without-loss-scaling"
    safety = Applicability.UNSAFE
    message = "gradients of k micro-batches are summed, not averaged"
    contract = Contract(
        description="at the first optimizer step each parameter's .grad equals the gradient of the mean of the window's "
        "micro-batch losses (the original's accumulated gradient divided by the window's backward passes); at every "
        "step .grad equals the contributions since the previous step",
        checks=("accumulated_grads_are_window_mean",),
    )

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self._init_tracker()

    def visit_Call(self, node: cst.Call) -> None:
        if is_backward_call(node, self.context.imports):
            self.note_interesting()

    def leave_Module(self, original_node: cst.Module) -> None:
        roots = self.interesting_roots()
        if not roots:
            return
        sum_reduced = _sum_reduced_names(original_node, self.context.semantic.syntax)
        for root in roots:
            parents = parent_map(root, self.context.semantic.syntax)
            for window in accumulation_windows(root, self.context.imports, parents, lambda c: self._is_step(c, parents)):
                self._check(window, parents, sum_reduced)

    # -- which `.step()` is an optimizer's ----------------------------------------------
    def _is_step(self, call: cst.Call, parents: dict[int, cst.CSTNode]) -> bool:
        if type(call.func) is not cst.Attribute or call.func.attr.value != "step":
            return False
        receiver = dotted_name(call.func.value)
        if receiver is None:
            return False
        if not call.args:
            return self._has_role(receiver, Role.OPTIMIZER, call, parents)
        if len(call.args) == 1 and call.args[0].keyword is None and self._has_role(receiver, Role.SCALER, call, parents):
            return self._has_role(dotted_name(call.args[0].value), Role.OPTIMIZER, call, parents)
        return False

    def _has_role(self, name: str | None, role: Role, call: cst.Call, parents: dict[int, cst.CSTNode]) -> bool:
        """Evidence from the enclosing scope (and class, for `self.x`); the name only on a tie."""
        if name is None:
            return False
        scopes = [enclosing_scope(call, parents)]
        if name.startswith("self."):
            scopes += [p for p in ancestors(call, parents) if type(p) is cst.ClassDef][:1]
        for scope in scopes:
            decision = scope_roles(self.context, scope).get(name)
            if decision is not None and decision.basis is not Basis.NAME:
                return decision.role is role
        return self.context.roles.has(name, role)

    # -- one window ---------------------------------------------------------------------
    def _check(self, window: AccumulationWindow, parents: dict[int, cst.CSTNode], sum_reduced: set[str]) -> None:
        imports = self.context.imports
        if len(window.backwards) != 1:
            return  # several losses per micro-batch: which to divide is the author's choice
        call = window.backwards[0]
        if not is_backward_call(call, imports) or backward_has_gradient_argument(call, imports):
            return
        root = backward_root(call, imports)
        if root is None or _run_by_another(call, root, imports):
            return
        region = innermost_loop(window.steps[0], parents) or window.micro_loop
        count = window.count
        if self._loss_is_scaled(root, window.micro_loop, count, sum_reduced):
            return
        if _count_scales(region, count, window.counting, parents) or self._writes_grad(region):
            return
        fix = _fix(call, root, count, parents)
        k = _code(count)
        self.report(
            call,
            f"`backward()` on every micro-batch and a step every `{k}`: the step sees the sum of {k} micro-batch "
            f"gradients, not their mean; divide the loss by `{k}`",
            fix,
        )

    def _loss_is_scaled(
        self, root: cst.BaseExpression, loop: cst.For | cst.While, count: cst.BaseExpression, sum_reduced: set[str]
    ) -> bool:
        """Does the loss, as the micro-batch computes it, show scaling or summing intent?"""
        for expression, statement in _loss_expressions(root, loop):
            if type(statement) is cst.AugAssign and type(statement.operator) in (cst.DivideAssign, cst.MultiplyAssign):
                return True
            if _scales(expression, count, self.context.imports, sum_reduced):
                return True
            for node in all_nodes(expression, cst.Call):
                assert type(node) is cst.Call
                name = dotted_name(node.func)
                facts = self.context.semantic.call_graph.callee(name) if name is not None else None
                if facts is not None and any(_scales(e, count, self.context.imports, sum_reduced) for e in _returned(facts.node)):
                    return True  # a same-file loss function that normalises or sums itself
        return False

    def _writes_grad(self, region: cst.CSTNode) -> bool:
        """Gradients rescaled by hand in the loop or in a same-file helper it calls."""
        if _grad_written(region, self.context.imports):
            return True
        graph = self.context.semantic.call_graph
        for node in all_nodes(region, cst.Call):
            name = dotted_name(node.func)  # type: ignore[attr-defined]
            facts = graph.callee(name) if name is not None else None
            if facts is not None and _grad_written(facts.node, self.context.imports):
                return True
        return False


def _run_by_another(call: cst.Call, root: cst.BaseExpression, imports) -> bool:  # type: ignore[no-untyped-def]
    """`accelerator.backward(loss)`, `engine.backward(loss)`, `self.manual_backward(loss)`:
    a framework runs the backward (Accelerate and DeepSpeed divide by their own count)."""
    if type(call.func) is not cst.Attribute or imports.qualified_name(call.func) == "torch.autograd.backward":
        return False
    return call.func.attr.value == "manual_backward" or any(a.value is root for a in call.args)


def _loss_expressions(root: cst.BaseExpression, loop: cst.For | cst.While) -> list[tuple[cst.BaseExpression, cst.CSTNode | None]]:
    """The backward's root and every value the micro-batch binds to the names it is
    computed from (`loss = criterion(...)`, `loss = loss / k`, `loss /= k`), a few levels deep."""
    loop_bindings = bindings(loop.body)
    found: list[tuple[cst.BaseExpression, cst.CSTNode | None]] = [(root, None)]
    seen: set[str] = set()
    frontier = [root]
    for _ in range(3):
        names = {n.value for e in frontier for n in _arithmetic(e) if type(n) is cst.Name} - seen
        seen |= names
        frontier = []
        for binding in loop_bindings:
            if binding.name in names and binding.value is not None:
                found.append((binding.value, binding.statement))
                frontier.append(binding.value)
    return found


def _arithmetic(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`node` and its operands through `+ - * /` and unary signs (not into calls)."""
    found = [node]
    if type(node) is cst.BinaryOperation:
        found += _arithmetic(node.left) + _arithmetic(node.right)
    elif type(node) is cst.UnaryOperation:
        found += _arithmetic(node.expression)
    return found


def _scales(expression: cst.BaseExpression, count: cst.BaseExpression, imports, sum_reduced: set[str]) -> bool:  # type: ignore[no-untyped-def]
    count_code = _code(count)
    if type(expression) is cst.BinaryOperation and type(expression.operator) is cst.Multiply:
        if not all(type(side) in (cst.Integer, cst.Float, cst.Call, cst.BinaryOperation) for side in (expression.left, expression.right)):
            return True  # the whole loss multiplied by a name: may be `1 / k` under another name
    for node in _arithmetic(expression):
        if type(node) is cst.BinaryOperation and type(node.operator) is cst.Divide:
            if type(node.right) not in (cst.Integer, cst.Float) or _code(node.right) == count_code:
                return True  # divided by the count, or normalised by a computed denominator
        if type(node) is cst.BinaryOperation and type(node.operator) is cst.Multiply:
            if count_code in (_code(node.left), _code(node.right)) or _reads(node, count):
                return True
        if type(node) is cst.Call and _scaling_or_summing_call(node, imports, sum_reduced):
            return True
    return False


def _scaling_or_summing_call(call: cst.Call, imports, sum_reduced: set[str]) -> bool:  # type: ignore[no-untyped-def]
    if type(call.func) is cst.Attribute and call.func.attr.value in SCALING_METHODS | {"sum"}:
        return True  # `loss.div(k)`, `loss.mul_(s)`, `(out - y).pow(2).sum()`
    if imports.qualified_name(call.func) in SCALING_FUNCTIONS | {"torch.sum"}:
        return True
    if dotted_name(call.func) in sum_reduced:
        return True  # a criterion built with reduction="sum"
    return _sum_reduction_argument(call)


def _sum_reduction_argument(call: cst.Call) -> bool:
    for argument in call.args:
        keyword = argument.keyword.value if argument.keyword is not None else None
        if keyword in SUM_REDUCTIONS and _code(argument.value) in SUM_REDUCTIONS[keyword]:
            return True
    return False


def _sum_reduced_names(module: cst.Module, syntax: SyntaxIndex) -> set[str]:
    """Names (`criterion`, `self.loss_fn`) the file binds to a call with a sum reduction
    (the assignments read off the file's index)."""
    found: set[str] = set()
    for assign in all_nodes(module, cst.Assign, syntax):
        assert type(assign) is cst.Assign
        if type(assign.value) is cst.Call and _sum_reduction_argument(assign.value):
            found |= {name for t in assign.targets if (name := dotted_name(t.target)) is not None}
    return found


def _returned(function: cst.CSTNode) -> list[cst.BaseExpression]:
    values = [r.value for r in all_nodes(function, cst.Return) if r.value is not None]  # type: ignore[attr-defined]
    return [e.value for v in values for e in (v.elements if type(v) is cst.Tuple else [cst.Element(v)])]


def _reads(node: cst.CSTNode, count: cst.BaseExpression) -> bool:
    code = _code(count)
    return any(_code(n) == code for n in all_nodes(node, (cst.Name, cst.Attribute)))


def _count_scales(region: cst.CSTNode, count: cst.BaseExpression, counting: tuple[cst.CSTNode, ...], parents: dict[int, cst.CSTNode]) -> bool:
    """Is the count used in the loop other than to count (`/ k`, `* k`, `.div(k)`, passed to a function)?"""
    if type(count) not in (cst.Name, cst.Attribute):
        return False
    code = _code(count)
    inside = {id(n) for c in counting for n in all_nodes(c, (cst.Name, cst.Attribute))}
    for node in all_nodes(region, (cst.Name, cst.Attribute)):
        if id(node) in inside or _code(node) != code:
            continue
        parent = parents.get(id(node))
        if type(parent) is cst.Attribute and parent.value is node:
            continue  # `k.bit_length()`: a longer path, judged on its own
        if type(parent) is cst.BinaryOperation and type(parent.operator) in (cst.Divide, cst.Multiply):
            other = parent.left if parent.right is node else parent.right
            if breaks_graph(other):
                continue  # `loss.item() * k`: a logged number, not the loss backward sees
            return True
        if type(parent) is cst.AugAssign and type(parent.operator) in (cst.DivideAssign, cst.MultiplyAssign):
            return True
        if type(parent) is cst.Arg:
            call = parents.get(id(parent))
            if type(call) is cst.Call and dotted_name(call.func) not in _COUNTING_CALLS:
                return True
    return False


def _grad_written(root: cst.CSTNode, imports) -> bool:  # type: ignore[no-untyped-def]
    """`p.grad /= k`, `p.grad = p.grad / k`, `p.grad.div_(k)`, `torch._foreach_div_(grads, k)`."""
    for node in all_nodes(root, (cst.Assign, cst.AugAssign, cst.Call)):
        if type(node) is cst.AugAssign and _touches_grad(node.target):
            return True
        if type(node) is cst.Assign and any(_touches_grad(t.target) for t in node.targets):
            return True
        if type(node) is cst.Call:
            if type(node.func) is cst.Attribute and node.func.attr.value in SCALING_METHODS and _touches_grad(node.func.value):
                return True
            qualified = imports.qualified_name(node.func) or ""
            if qualified in SCALING_FUNCTIONS and (qualified.startswith("torch._foreach") or any(_touches_grad(a.value) for a in node.args)):
                return True
    return False


def _touches_grad(node: cst.CSTNode) -> bool:
    while type(node) in (cst.Attribute, cst.Subscript):
        if type(node) is cst.Attribute and node.attr.value in ("grad", "main_grad"):
            return True
        node = node.value
    return False


def _fix(call: cst.Call, root: cst.BaseExpression, count: cst.BaseExpression, parents: dict[int, cst.CSTNode]) -> Fix:
    k = _code(count) if isinstance(count, _ATOMIC) else f"({_code(count)})"
    line = statement_line(call, parents)
    if type(root) is cst.Name and line is not None and expression_statement_call(line) is call:
        scaled = cst.parse_statement(f"{root.value} = {root.value} / {k}\n")
        edit = Edit(line, lambda updated: cst.FlattenSentinel([scaled, updated]))
        return Fix(Applicability.UNSAFE, (edit,), f"divide `{root.value}` by `{_code(count)}` before backward")
    receiver = type(call.func) is cst.Attribute and call.func.value is root

    def divided(updated: cst.CSTNode) -> cst.CSTNode:
        text = _code(updated) if isinstance(updated, _ATOMIC) else f"({_code(updated)})"
        return cst.parse_expression(f"({text} / {k})" if receiver else f"{text} / {k}")

    return Fix(Applicability.UNSAFE, (Edit(root, divided),), f"divide the loss by `{_code(count)}`")


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)
