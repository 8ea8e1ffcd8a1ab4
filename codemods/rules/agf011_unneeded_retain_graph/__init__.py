"""AGF011 unneeded-retain-graph: `retain_graph=True` where the graph is never used again."""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.expressions import is_true
from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.names import WRAPPING_ITERATORS, expression_tokens, last_segment, name_tokens
from autograd_fix.codemods.rules.agf011_unneeded_retain_graph.fresh_graph import FreshGraph, NameHints
from autograd_fix.codemods.semantic.loops import (
    RootTracker,
    all_nodes,
    block_statements,
    enclosing_scope,
    expression_statement_call,
    has_keyword,
    is_gradient_call,
    parent_map,
    statement_line,
)
from autograd_fix.codemods.rule import Contract, Rule, RuleContext, SiteFix
from autograd_fix.codemods.site_fixes import statement_at
from autograd_fix.codemods.walk import iter_descendants
from autograd_fix.codemods.rules.agf011_unneeded_retain_graph.repeated_backward import earlier_roots, passed_on_after, retained_root
from autograd_fix.codemods.semantic.role_evidence import bound_as, iterated_name, scope_roles
from autograd_fix.codemods.semantic.roles import (
    CARRIED_STATE_TOKENS,
    DATA_ITERABLE_TOKENS,
    DATA_PARAMETER_TOKENS,
    STATE_CALL_TOKENS,
    Role,
    Vocabulary,
)



class UnneededRetainGraph(RootTracker, Rule):
    """
    ## What it does
    Finds `loss.backward(retain_graph=True)` where nothing backpropagates through that
    graph again, and removes the argument; when `l1.backward(retain_graph=True)` is
    directly followed by `l2.backward()` (two losses sharing one graph), it backpropagates
    their sum once: `(l1 + l2).backward()`.

    ## Why is this bad?
    `retain_graph=True` keeps every saved activation of the graph alive after backward,
    until the loss itself is dropped: peak memory grows for nothing. It is usually added
    to silence `Trying to backward through the graph a second time`, whose real cause is a
    graph carried across iterations (an RNN state that should be detached). Two backward
    passes over a shared graph also traverse the shared part twice; one backward of the
    sum gives the same gradients (backward is linear) in one pass.

    ## Example
    ```python
    for x, y in train_loader:
        optimizer.zero_grad()
        out = model(x)
        loss = criterion(out, y)
        loss.backward(retain_graph=True)
        optimizer.step()
    ```

    ## Use instead
    ```python
        loss.backward()
    ```
    and `(loss_a + loss_b).backward()` instead of
    `loss_a.backward(retain_graph=True); loss_b.backward()`.

    ## Fix safety
    Unsafe: the graph could still be used again through code the rule cannot see (a model
    that keeps state between calls in another file). The rule fires only when the
    enclosing function (or script) contains no other gradient computation (exactly one
    backward, or exactly the two being merged), the graph is built fresh in the loop
    body from a data loader's batches or from a function's data parameters (a name read
    before it is assigned in the iteration, or from outside it, must certainly hold no
    graph: integer indices such as `argmax` or topk's `[1]`, cuts such as `.data` or
    `.item()`, constants, same-file helpers returning only those, parameters that every
    same-file call fills with those, elements a same-file builder returns in a tuple that
    hold those where its `return` reads them; where the last binding that runs every
    iteration comes before a read, only that binding reaches it (`delta =
    delta.detach().numpy()` before a Python sum over `delta`); nothing named like a hidden
    state unless it certainly holds no graph (`(h.detach(), c.detach())`), no
    in-file module whose `forward` stores tensors on `self`), and no tensor of the graph
    escapes (returned, stored on an attribute or in a container, passed to another
    function, declared global). One graph backpropagated several times with
    `retain_graph=True` (`loss.backward(retain_graph=True)` twice, or Lightning's
    `self.manual_backward(loss, retain_graph=True)` twice): only the last call is fixed,
    and only when every gradient call of the scope is a plain backward statement before it
    in the same block, with no loop around them, and nothing after it hands the graph to
    another call. The merge requires the two calls to be adjacent
    statements with nothing between them (no `.grad` read, no step).

    ## Verification
    Gradients equal; outputs equal; peak memory not higher.
    """

    code = "AGF011"
    name = "unneeded-retain-graph"
    safety = Applicability.UNSAFE
    message = "`retain_graph=True` keeps a graph that is never used again"
    contract = Contract(
        description="gradients equal; outputs equal; peak memory not higher",
        checks=("grads_equal", "outputs_equal", "peak_memory_not_higher"),
    )

    no_site_fix = "no single call with `retain_graph=` at that line"

    @classmethod
    def fix_at(cls, context: RuleContext, line: int) -> SiteFix | None:
        """A run saw the graph retained at `line` never used again: `retain_graph=True`
        is dropped from the call (unsafe; verification compares)."""
        statement = statement_at(context, line)
        calls = [node for node in iter_descendants(statement) if type(node) is cst.Call
                 and any(a.keyword is not None and a.keyword.value == "retain_graph" for a in node.args)] if statement else []
        if len(calls) != 1:
            return None
        fix = Fix(Applicability.UNSAFE, (Edit(calls[0], _drop_retain_graph),), "remove `retain_graph=True`")
        return SiteFix(calls[0], "the graph this backward retains is never used again; drop `retain_graph=True`", fix)

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self._init_tracker()
        self._candidates: list[cst.Call] = []
        #: an in-file `forward` stores something on `self`: a module may carry a graph
        self._stateful_forward = False

    def visit_Call(self, node: cst.Call) -> None:
        if _is_retaining_backward(node):
            self._candidates.append(node)
            self.note_interesting()

    def visit_Assign(self, node: cst.Assign) -> None:
        self._note_self_store([t.target for t in node.targets])

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._note_self_store([node.target])

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._note_self_store([node.target])

    def _note_self_store(self, targets: list[cst.BaseExpression]) -> None:
        functions = self.enclosing_functions
        if not functions or functions[-1].name.value != "forward":
            return
        for target in targets:
            if type(target) is cst.Attribute and type(target.value) is cst.Name and target.value.value == "self":
                self._stateful_forward = True

    def leave_Module(self, original_node: cst.Module) -> None:
        if self._stateful_forward or not self._candidates:
            return
        imports = self.context.imports
        for root in self.interesting_roots():
            parents = parent_map(root, self.context.semantic.syntax)
            for call in self._candidates:
                if id(call) in parents:
                    self._check(call, imports, parents)

    def _hints(self, scope: cst.CSTNode) -> NameHints:
        """The name tie-breaks the graph analysis asks for, from the roles vocabulary (with
        the project's names) and the scope's role decisions: a loop over a
        `DataLoader(...)` yields fresh data whatever the loader is called."""
        roles = self.context.roles
        decisions = scope_roles(self.context, scope)
        data_parameters = DATA_PARAMETER_TOKENS | roles.added(Role.TARGET, Role.DEVICE)
        state_words = CARRIED_STATE_TOKENS | roles.added(Role.STATE)
        return NameHints(
            is_data_iterable=lambda node: _iterates_data(node, roles)
            or bound_as(decisions, iterated_name(node), Role.LOADER),
            is_data_parameter=lambda name: bool(set(name_tokens(name)) & data_parameters),
            is_state_name=lambda name: bool(set(name_tokens(name)) & state_words),
            is_state_call=lambda name: bool(set(name_tokens(name)) & STATE_CALL_TOKENS),
        )

    def _check(self, call: cst.Call, imports: ImportIndex, parents: dict[int, cst.CSTNode]) -> None:
        line = statement_line(call, parents)
        if line is None or expression_statement_call(line) is not call:
            return
        root = retained_root(call)
        if root is None:
            return
        scope = enclosing_scope(call, parents)
        gradient_calls = [c for c in all_nodes(scope, cst.Call) if is_gradient_call(c, imports)]  # type: ignore[arg-type]
        earlier = earlier_roots(call, gradient_calls, parents, imports) if len(gradient_calls) > 1 else None
        # `l1.backward(retain_graph=True); l2.backward()` merges into `(l1 + l2).backward()`; not `l1.mean()`
        plain = type(call.func) is cst.Attribute and call.func.attr.value == "backward" and type(call.func.value) is cst.Name
        follower = _following_backward(line, root.value, parents) if earlier is None and plain else None
        if earlier is not None:
            roots = list(dict.fromkeys([root.value, *earlier]))  # the last backward of a repeated graph
        elif len(gradient_calls) == 1:
            roots = [root.value]
        elif len(gradient_calls) == 2 and follower is not None and len(call.args) == 1:
            roots = [root.value, follower[1]]
        elif follower is None and all(c is call or _after(c, call, parents) for c in gradient_calls):
            roots = [root.value]  # every other backward comes later and must use only values recomputed after this one
        else:
            return
        semantic = self.context.semantic
        evidence = FreshGraph(scope, call, parents, semantic.call_graph, imports, self._hints(scope), semantic.no_graph)
        if not evidence.graph_is_fresh(roots) or evidence.graph_escapes(roots, imports):
            return
        if earlier is not None:
            if passed_on_after(call, evidence.graph, parents):
                return
        else:
            later = [c for c in gradient_calls if c is not call and (follower is None or c is not expression_statement_call(follower[0]))]
            if not all(evidence.recomputed_after(c) for c in later):
                return
        if follower is None:
            fix = Fix(Applicability.UNSAFE, (Edit(call, _drop_retain_graph),), "remove `retain_graph=True`")
            self.report(
                call,
                f"`retain_graph=True` keeps the graph of `{root.value}` alive, but nothing backpropagates "
                "through it again; remove it",
                fix,
            )
            return
        assert follower is not None
        second_line, second = follower
        merged = cst.parse_expression(f"({root.value} + {second}).backward()")
        fix = Fix(
            Applicability.UNSAFE,
            (
                Edit(line, _merged_line(merged, second_line.leading_lines)),
                Edit(second_line, lambda updated: cst.RemovalSentinel.REMOVE),
            ),
            f"backpropagate `({root.value} + {second})` once",
        )
        self.report(
            call,
            f"`{root.value}.backward(retain_graph=True)` followed by `{second}.backward()`: one backward of "
            f"`({root.value} + {second})` gives the same gradients without keeping the graph",
            fix,
        )


def _after(later: cst.Call, call: cst.Call, parents: dict[int, cst.CSTNode]) -> bool:
    """Is `later` a statement after `call`'s in the same block (source order, one block)?"""
    first, second = statement_line(call, parents), statement_line(later, parents)
    if first is None or second is None:
        return False
    block = block_statements(first, parents)
    return first in block and second in block and block.index(second) > block.index(first)


def _is_retaining_backward(call: cst.Call) -> bool:
    if not (type(call.func) is cst.Attribute and call.func.attr.value in {"backward", "manual_backward"}):
        return False
    argument = has_keyword(call, "retain_graph")
    return argument is not None and is_true(argument.value) and has_keyword(call, "create_graph") is None


def _following_backward(
    line: cst.SimpleStatementLine, first: str, parents: dict[int, cst.CSTNode]
) -> tuple[cst.SimpleStatementLine, str] | None:
    """The very next statement, when it is `other.backward()` with no arguments."""
    block = block_statements(line, parents)
    for index, statement in enumerate(block):
        if statement is line and index + 1 < len(block):
            following = block[index + 1]
            if type(following) is not cst.SimpleStatementLine or following.trailing_whitespace.comment is not None:
                return None
            call = expression_statement_call(following)
            if (
                call is not None
                and not call.args
                and type(call.func) is cst.Attribute
                and call.func.attr.value == "backward"
                and type(call.func.value) is cst.Name
                and call.func.value.value != first
            ):
                return following, call.func.value.value
    return None


def _iterates_data(node: cst.BaseExpression, roles: Vocabulary) -> bool:
    if type(node) is cst.Call and type(node.func) is cst.Name and node.func.value == "range":
        return True
    if type(node) is cst.Call and last_segment(node.func) in WRAPPING_ITERATORS:
        positional = [a.value for a in node.args if a.keyword is None]
        return bool(positional) and all(_iterates_data(a, roles) for a in positional)
    return bool(expression_tokens(node) & (DATA_ITERABLE_TOKENS | roles.added(Role.LOADER)))


def _drop_retain_graph(updated: cst.CSTNode) -> cst.CSTNode:
    assert type(updated) is cst.Call
    kept = [a for a in updated.args if not (a.keyword is not None and a.keyword.value == "retain_graph")]
    if kept:
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return updated.with_changes(args=kept)


def _merged_line(merged: cst.BaseExpression, extra_leading: tuple | list):
    def replace(updated: cst.CSTNode) -> cst.CSTNode:
        assert type(updated) is cst.SimpleStatementLine
        return updated.with_changes(
            body=[cst.Expr(value=merged)],
            leading_lines=[*updated.leading_lines, *extra_leading],
        )

    return replace
