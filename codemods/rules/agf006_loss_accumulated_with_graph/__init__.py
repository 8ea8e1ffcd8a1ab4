"""AGF006 loss-accumulated-with-graph: tensors with graph history accumulated across iterations."""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.semantic.roles import Role
from autograd_fix.codemods.rule import Contract, Rule, RuleContext, SiteFix
from autograd_fix.codemods.site_fixes import statement_at
from autograd_fix.codemods.semantic.accumulation import (
    Accumulation,
    LoopAnalysis,
    backpropagated_attribute,
    numeric_uses,
)
from autograd_fix.codemods.semantic.callgraph import CallGraph
from autograd_fix.codemods.semantic.gradmode import function_disables_grad, with_disables_grad
from autograd_fix.codemods.semantic.loops import RootTracker, all_nodes, ancestors, declared_global, is_gradient_call, parent_map

_LOOPS = (cst.For, cst.While)


class LossAccumulatedWithGraph(RootTracker, Rule):
    """
    ## What it does
    Finds tensors that still carry their autograd graph being accumulated across the
    iterations of a training loop (`total_loss += loss`, `losses.append(loss)`,
    `history["loss"] += loss`, `stats.append({"loss": loss})`), and cuts them off the graph
    with `.detach()` (or `.item()` where the accumulator is only ever used as a number).
    What carries the graph is read from the backward calls: a name, an output's attribute
    (`outputs.loss.backward()`, then `total += outputs.loss`), the items of a criterion's
    dict of loss terms summed into the loss (`losses["box"]`), and a step's output dict
    whose item is backpropagated (`out["loss"].backward()`, then `epoch.append(out)`:
    reported without a fix, since which of its items are tensors is not known).

    ## Why is this bad?
    Adding a loss that requires grad to a running total records the addition: the total
    becomes a tensor whose graph reaches every iteration's loss and the graph behind it.
    Nothing of it is ever freed while the total lives (the PyTorch FAQ: "Don't accumulate
    history across your training loop"). Memory grows every iteration, and the logged
    number is the same as with a detached value.

    ## Example
    ```python
    total_loss = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss
    print(f"epoch loss {total_loss / len(loader):.4f}")
    ```

    ## Use instead
    ```python
        total_loss += loss.item()
    ```
    or `loss.detach()` when the total is used as a tensor (returned, logged, stacked).

    ## Fix safety
    `.detach()` keeps the value, type and device, so it is safe; it is the default. The
    rule fires only when the accumulated value is (or, through a loss function, feeds)
    the tensor the same iteration backpropagates unconditionally without
    `retain_graph`/`create_graph`: its saved tensors are freed by that backward, so no
    later code can have backpropagated through the accumulator successfully. The rule
    stays silent when the accumulator (or anything computed from it) is backpropagated or
    differentiated in the same scope, when it is an attribute, a parameter or a `global`,
    when it is reset every iteration, and under `no_grad`. A same-file function's return
    value counts as such a tensor when it is (a number times) a sum that one of its loops
    accumulates from the loss the loop backpropagates (`return epoch_loss / len(loader)`).
    One more case keeps a graph no backward frees: a sum an evaluation loop of that
    function builds, with grad on, from loss calls on the output of the model its training
    loop backpropagates through; it is reported only where the caller keeps it in a list
    that is only ever appended to (nothing reads it back, so nothing can backpropagate it). `.item()` is used only when the
    accumulator starts as a Python number, the accumulated value is the backpropagated
    scalar itself or arithmetic of it with numbers (`loss / len(loader)`), and every use of the accumulator is arithmetic, a comparison,
    an f-string or `print`/`round`/`float`; it is marked unsafe because the accumulator
    becomes a Python float.

    ## Verification
    Accumulated values equal (as numbers); outputs equal; retained graph memory lower or
    equal.
    """

    code = "AGF006"
    name = "loss-accumulated-with-graph"
    safety = Applicability.SAFE
    message = "a tensor with autograd history is accumulated across iterations"
    contract = Contract(
        description="accumulated values equal; outputs equal; retained graph memory lower or equal",
        checks=("accumulated_values_equal", "outputs_equal", "retained_graph_not_higher", "graph_state_may_change"),
    )

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self._init_tracker()

    def visit_Call(self, node: cst.Call) -> None:
        if is_gradient_call(node, self.context.imports):
            self.note_interesting()

    def _is_loss_name(self, name: str) -> bool:
        """A callee named as a loss or a criterion (the project's role names included)."""
        return self.context.roles.has(name, Role.LOSS, Role.CRITERION)

    no_site_fix = "the line is not one `x += value`, `x = x + value` or `x.append(value)`"

    @classmethod
    def fix_at(cls, context: RuleContext, line: int) -> SiteFix | None:
        """A run saw the holder assigned at `line` keep the graphs of several iterations:
        the value it accumulates is `.detach()`-ed (unsafe; verification compares)."""
        statement = statement_at(context, line)
        if statement is None or len(statement.body) != 1:
            return None
        small = statement.body[0]
        value: cst.BaseExpression | None = None
        if type(small) is cst.AugAssign and type(small.operator) is cst.AddAssign:
            value = small.value
        elif (type(small) is cst.Assign and len(small.targets) == 1 and type(small.value) is cst.BinaryOperation
              and type(small.value.operator) is cst.Add and small.value.left.deep_equals(small.targets[0].target)):
            value = small.value.right
        elif (type(small) is cst.Expr and type(small.value) is cst.Call and type(small.value.func) is cst.Attribute
              and small.value.func.attr.value == "append" and len(small.value.args) == 1 and small.value.args[0].keyword is None):
            value = small.value.args[0].value
        if value is None:
            return None
        fix = Fix(Applicability.UNSAFE, (Edit(value, _method_appender("detach")),), "accumulate `.detach()`-ed values")
        return SiteFix(statement, "keeps the autograd graph of every iteration it accumulates; accumulate `.detach()`-ed values", fix)

    def leave_Module(self, original_node: cst.Module) -> None:
        imports = self.context.imports
        for root in _with_callers(self.interesting_roots(), self.context.semantic.call_graph):
            parents = parent_map(root, self.context.semantic.syntax)
            for loop in all_nodes(root, _LOOPS, self.context.semantic.syntax):
                assert type(loop) in (cst.For, cst.While)
                if _grad_disabled(loop, imports, parents):
                    continue
                analysis = LoopAnalysis(loop, imports, parents, self.context.semantic.call_graph, self._is_loss_name)
                if not (analysis.tracked or analysis.tracked_paths or analysis.graph_items or analysis.unfreed):
                    continue
                for accumulation in analysis.accumulations():
                    self._check(accumulation, analysis)
                for statement, passed, fits in analysis.tracker_accumulations():
                    if backpropagated_attribute(statement, original_node, imports):
                        continue
                    fix = Fix(Applicability.UNSAFE, (Edit(statement.value, _method_appender("detach")),), "accumulate `.detach()`-ed values")
                    self.report(
                        statement,
                        f"accumulates the items of `{passed}`, which carry a training iteration's autograd graph, "
                        "into the object's state on every call from the training loop, keeping every "
                        "iteration's graph alive; accumulate `.detach()`-ed values",
                        fix if fits else None,
                    )

    @staticmethod
    def _line_of(statement: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> cst.SimpleStatementLine | None:
        line = parents.get(id(statement))
        return line if type(line) is cst.SimpleStatementLine and len(line.body) == 1 else None

    def _check(self, accumulation: Accumulation, analysis: "LoopAnalysis") -> None:
        scope = analysis.scope
        name = accumulation.accumulator
        if name in declared_global(scope) or not analysis.accumulator_is_carried(accumulation):
            return
        if analysis.backpropagated_later(name):
            return
        use_item = (
            accumulation.numeric_form
            and len(accumulation.values) == 1
            and analysis.is_scalar(accumulation.values[0])
            and analysis.starts_as_number(name)
            and numeric_uses(name, scope, analysis.parents, set())
        )
        code = self.context.module.code_for_node(accumulation.values[0]).strip()
        containers = [v for v in accumulation.values if type(v) is cst.Name and v.value in analysis.graph_containers]
        if containers:
            # a step's output dict (`{"loss": loss, "metrics": {...}}`): `.detach()` does not
            # apply to it; when the same-file step says which items carry a graph (only the
            # backpropagated ones), detach those in place; otherwise report only
            message = (
                f"`{name}` keeps `{code}`, whose items carry this iteration's autograd graph, across "
                "iterations; store detached copies of its tensors"
            )
            paths = [p for c in containers for p in analysis.detachable_items(c.value)]  # type: ignore[union-attr]
            line = self._line_of(accumulation.statement, analysis.parents)
            if len(containers) != 1 or not paths or line is None:
                self.report(accumulation.statement, message)
                return
            statements = [f"{path} = {path}.detach()" for path in paths]
            fix = Fix(Applicability.UNSAFE, (Edit(line, _insert_before(statements)),), f"detach {', '.join(paths)} before keeping `{code}`")
            self.report(accumulation.statement, message, fix)
            return
        method = "item" if use_item else "detach"
        fix, *alternatives = [
            Fix(
                Applicability.UNSAFE if candidate == "item" else Applicability.SAFE,
                tuple(Edit(value, _method_appender(candidate)) for value in accumulation.values),
                f"accumulate `.{candidate}()` so the graph of each iteration can be freed",
            )
            # `.item()` where every use is numeric, and `.detach()` when verification
            # rejects it (a later use that needs a tensor the static reading missed)
            for candidate in ((method, "detach") if use_item else (method,))
        ]
        self.report(
            accumulation.statement,
            f"`{name}` accumulates `{code}` with its autograd graph across iterations, keeping every "
            f"iteration's graph alive; accumulate `{code if type(accumulation.values[0]) is cst.Name else f'({code})'}"
            f".{method}()`" if len(accumulation.values) == 1 else f"`{name}` accumulates tensors with their autograd graph across iterations; "
            f"accumulate them `.{method}()`-ed",
            fix,
            tuple(alternatives),
        )


def _with_callers(roots: list[cst.CSTNode], graph: CallGraph) -> list[cst.CSTNode]:
    """The roots that backpropagate, and the same-file functions that call one of them
    (`train_one_epoch` calling `self.train_one_batch`, where the backward is)."""
    if any(type(root) is cst.Module for root in roots):
        return roots
    inside = {id(node) for root in roots for node in all_nodes(root, cst.FunctionDef)}
    callers = [
        function.node
        for function in graph.functions.values()
        if id(function.node) not in inside
        and any((callee := graph.callee(name, function.class_name)) is not None and id(callee.node) in inside for name in function.calls)
    ]
    return roots + callers




def _insert_before(statements: list[str]):
    """An edit that puts `statements` before the line (and above its comments, which stay with it)."""
    parsed = [cst.parse_statement(f"{statement}\n") for statement in statements]

    def replace(updated: cst.CSTNode) -> cst.FlattenSentinel:
        return cst.FlattenSentinel([*parsed, updated])

    return replace


def _grad_disabled(loop: cst.CSTNode, imports: ImportIndex, parents: dict[int, cst.CSTNode]) -> bool:
    for parent in ancestors(loop, parents):
        if type(parent) is cst.With and with_disables_grad(parent, imports):
            return True
        if type(parent) is cst.FunctionDef and function_disables_grad(parent, imports):
            return True
    return False


def _method_appender(method: str):
    """`loss` -> `loss.detach()`; `loss * n` -> `(loss * n).detach()`."""

    def replace(updated: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(updated, cst.BaseExpression)
        receiver = updated
        if type(updated) not in (cst.Name, cst.Attribute, cst.Call, cst.Subscript) and not updated.lpar:
            receiver = updated.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name(method)))

    return replace
