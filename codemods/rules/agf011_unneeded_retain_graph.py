"""AGF011 unneeded-retain-graph: `retain_graph=True` where the graph is never used again."""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.expressions import is_true
from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.semantic.loops import (
    RootTracker,
    StatementOrder,
    all_nodes,
    ancestors,
    bindings,
    block_statements,
    breaks_graph,
    declared_global,
    enclosing_scope,
    expression_statement_call,
    has_keyword,
    innermost_loop,
    is_gradient_call,
    local_nodes,
    parent_map,
    read_name_nodes,
    runs_every_iteration,
    statement_line,
)
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.semantic.callgraph import CallGraph
from autograd_fix.codemods.semantic.dataflow import stores_on_self
from autograd_fix.codemods.semantic.autograd_function import ACCEPTS_NON_TENSORS
from autograd_fix.codemods.semantic.graphflow import CUTTING_FUNCTIONS, CUTTING_METHODS
from autograd_fix.codemods.semantic.module_values import builds_module, constant_attributes, plain_value
from autograd_fix.codemods.names import WRAPPING_ITERATORS, expression_tokens, last_segment, name_tokens
from autograd_fix.codemods.rule import Contract, Rule

#: an iterable named so yields fresh data batches (no graph carried in)
_DATA_ITERABLE_TOKENS = frozenset({"loader", "dataloader", "loaders", "batches", "dataset", "ds", "data", "train", "minibatches"})
#: parameters named so hold input data, not a tensor with a graph from the caller
_DATA_PARAMETER_TOKENS = frozenset(
    {"batch", "x", "y", "xb", "yb", "inputs", "input", "targets", "target", "images", "image", "imgs", "img",
     "labels", "label", "data", "sample", "samples", "device", "dtype"}
)
#: names that suggest state carried across iterations (TBPTT, memories): stay away
_STATE_TOKENS = frozenset(
    {"hidden", "hx", "cx", "h", "c", "state", "states", "memory", "memories", "mems", "carry", "prev", "previous", "cache"}
)
_STATE_CALL_TOKENS = frozenset({"hidden", "reset", "repackage", "detach", "state", "memory", "cache"})
_PLACEMENT_METHODS = frozenset({"to", "cuda", "cpu", "type"})
_GRAPH_ATTRIBUTES = frozenset({"grad_fn", "register_hook", "retain_grad", "next_functions"})


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
    body from a data loader's batches or from a function's data parameters (no name read
    before it is assigned in the iteration, nothing named like a hidden state, no
    in-file module whose `forward` stores tensors on `self`), and no tensor of the graph
    escapes (returned, stored on an attribute or in a container, passed to another
    function, declared global). The merge requires the two calls to be adjacent
    statements with nothing between them (no `.grad` read, no step).

    ## Verification
    Gradients equal; outputs equal; peak memory not higher.
    """

    code = "AGF011"
    name = "unneeded-retain-graph"
    safety = Applicability.UNSAFE
    message = "`retain_graph=True` keeps a graph that is never used again"
    triggers = ("retain_graph",)
    contract = Contract(
        description="gradients equal; outputs equal; peak memory not higher",
        checks=("grads_equal", "outputs_equal", "peak_memory_not_higher"),
    )

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
            if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
                self._stateful_forward = True

    def leave_Module(self, original_node: cst.Module) -> None:
        if self._stateful_forward or not self._candidates:
            return
        imports = self.context.imports
        for root in self.interesting_roots():
            parents = parent_map(root)
            for call in self._candidates:
                if id(call) in parents:
                    self._check(call, imports, parents)

    def _check(self, call: cst.Call, imports: ImportIndex, parents: dict[int, cst.CSTNode]) -> None:
        line = statement_line(call, parents)
        if line is None or expression_statement_call(line) is not call:
            return
        assert isinstance(call.func, cst.Attribute)
        root = call.func.value
        if not isinstance(root, cst.Name):
            return
        scope = enclosing_scope(call, parents)
        gradient_calls = [c for c in all_nodes(scope, cst.Call) if is_gradient_call(c, imports)]  # type: ignore[arg-type]
        follower = _following_backward(line, root.value, parents)
        if len(gradient_calls) == 1:
            roots = [root.value]
        elif len(gradient_calls) == 2 and follower is not None and len(call.args) == 1:
            roots = [root.value, follower[1]]
        elif len(gradient_calls) == 2 and follower is None:
            roots = [root.value]  # the other backward must use only values recomputed after this one
        else:
            return
        evidence = _Evidence(scope, call, parents, self.context.semantic.call_graph, imports)
        if not evidence.graph_is_fresh(roots) or evidence.graph_escapes(roots, imports):
            return
        later = [c for c in gradient_calls if c is not call and (follower is None or c is not expression_statement_call(follower[0]))]
        if later and not evidence.recomputed_after(later[0]):
            return
        if len(roots) == 1:
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


def _is_retaining_backward(call: cst.Call) -> bool:
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward"):
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
            if not isinstance(following, cst.SimpleStatementLine) or following.trailing_whitespace.comment is not None:
                return None
            call = expression_statement_call(following)
            if (
                call is not None
                and not call.args
                and isinstance(call.func, cst.Attribute)
                and call.func.attr.value == "backward"
                and isinstance(call.func.value, cst.Name)
                and call.func.value.value != first
            ):
                return following, call.func.value.value
    return None


class _Evidence:
    """Is the graph behind the roots built fresh here, and does any of it leave the scope?"""

    def __init__(
        self, scope: cst.CSTNode, call: cst.Call, parents: dict[int, cst.CSTNode], graph: CallGraph, imports: ImportIndex
    ) -> None:
        self.imports = imports
        self.scope = scope
        self.call = call
        self.parents = parents
        self.loop = innermost_loop(call, parents)
        self.region: cst.CSTNode = self.loop.body if self.loop is not None else _body(scope)
        self.order = StatementOrder.of(self.region)
        self.region_bindings = bindings(self.region)
        self.region_bound = {binding.name for binding in self.region_bindings}
        self.call_graph = graph
        self.owner = graph.owner(scope) if isinstance(scope, cst.FunctionDef) else None
        #: `self.X` set once in `__init__` from literals or its parameters: read freely
        self.constants = constant_attributes(self.owner) if self.owner is not None else frozenset()
        self.allowed_outside = self._allowed_outside_names()
        #: attributes called (`self.criterion_c(...)`, `model.init_hidden`): functions, not values
        self.callees = {id(c.func) for c in all_nodes(self.region, cst.Call) if isinstance(c.func, cst.Attribute)}  # type: ignore[union-attr]
        #: names of the graph bound in the region (roots and everything they are computed from)
        self.graph: set[str] = set()

    def _allowed_outside_names(self) -> set[str] | None:
        """Names from outside the region that are data (loop targets over a loader, data params)."""
        if self.loop is not None:
            if not isinstance(self.loop, cst.For) or not _iterates_data(self.loop.iter):
                return None
            return {n.value for n in all_nodes(self.loop.target, cst.Name)}  # type: ignore[union-attr]
        if isinstance(self.scope, cst.FunctionDef):
            params = self.scope.params
            every = [*params.posonly_params, *params.params, *params.kwonly_params]
            return {p.name.value for p in every if set(name_tokens(p.name.value)) & _DATA_PARAMETER_TOKENS}
        return set()  # a script's top level: everything is bound in the region

    def graph_is_fresh(self, roots: list[str]) -> bool:
        if self.allowed_outside is None or self._mentions_state():
            return False
        call_position = self.order.position(self.call)
        pending = list(roots)
        while pending:
            name = pending.pop()
            if name in self.graph:
                continue
            found = [b for b in self.region_bindings if b.name == name]
            if not found:
                return False  # a root or a value from outside the region that is not data
            self.graph.add(name)
            # a rebinding after the call (`x_hat = G(y, e).detach()` for a later update) does not
            # feed this graph: the iteration rebinds the name before the call before reading it
            found = [b for b in found if self.order.position(b.statement) < call_position] or found
            for binding in found:
                if binding.kind not in {"assign", "augassign", "annassign"} or binding.value is None:
                    return False
                if not self._unconditional(binding.statement) or self._calls_stateful(binding.value):
                    return False
                position = self.order.position(binding.statement)
                if position > call_position:
                    return False
                for read in self._argument_reads(binding.value):
                    if read == name and binding.kind == "augassign":
                        continue
                    local = [b for b in self.region_bindings if b.name == read]
                    if local and min(self.order.position(b.statement) for b in local) < position:
                        pending.append(read)
                    elif read not in self.allowed_outside and not self._constant_outside(read):
                        return False  # from outside and not data, or carried from the last iteration
        return True

    def _constant_outside(self, name: str) -> bool:
        """Bound only outside the iteration, and only to literals (`gama = 0.8`) or modules
        (`D = Discriminator()`: its parameters are leaves; in-file forwards keep no state)."""
        if name in self.region_bound:
            return False
        found = [b for b in bindings(self.scope) if b.name == name]
        return bool(found) and all(b.kind == "assign" and b.value is not None and self._no_graph_value(b.value) for b in found)

    def _no_graph_value(self, value: cst.BaseExpression) -> bool:
        return plain_value(value, set()) or builds_module(value, self.call_graph.module_classes, self.imports)

    def recomputed_after(self, later: cst.Call) -> bool:
        """Does the later gradient call `name.backward()` in the same region read only values
        bound after this (retaining) call, data, or values that hold no graph? Then it never
        backpropagates through the retained graph (talking-heads: `x_hat` recomputed and
        detached, both discriminator outputs recomputed)."""
        if not (isinstance(later.func, cst.Attribute) and isinstance(later.func.value, cst.Name)) or later.args:
            return False
        first, limit = self.order.position(self.call), self.order.position(later)
        if limit < first:
            return False
        pending, seen = [(later.func.value.value, limit)], set()
        while pending:
            name, before = pending.pop()
            if (name, before) in seen:
                continue
            seen.add((name, before))
            found = [b for b in self.region_bindings if b.name == name and -1 < self.order.position(b.statement) < before]
            if not found:
                if name in (self.allowed_outside or set()) or self._constant_outside(name):
                    continue
                return False
            latest = max(found, key=lambda b: self.order.position(b.statement))
            if latest.kind != "assign" or latest.value is None or not self._unconditional(latest.statement):
                return False
            position = self.order.position(latest.statement)
            if _cut_whole(latest.value):
                continue
            reads = self._value_reads(latest.value)
            if reads is None or (position < first and not self._no_graph_before(latest.value)):
                return False
            pending.extend((read, position) for read in reads)
        return True

    def _value_reads(self, value: cst.BaseExpression) -> set[str] | None:
        """Names whose values `value` uses, method receivers included (`out` in `out.pow(2)`);
        functions called by bare or imported name are not values. None when it reads `self` state."""
        callees: set[int] = set()
        for call in all_nodes(value, cst.Call):
            assert isinstance(call, cst.Call)
            head = call.func
            while isinstance(head, cst.Attribute) and self.imports.qualified_name(call.func) is not None:
                head = head.value  # `torch.randn(...)`: an imported function, not a value
            if isinstance(head, cst.Name):
                callees.add(id(head))
        for attribute in all_nodes(value, cst.Attribute):
            assert isinstance(attribute, cst.Attribute)
            if isinstance(attribute.value, cst.Name) and attribute.value.value == "self":
                if id(attribute) not in self.callees and attribute.attr.value not in self.constants:
                    return None
        return {n.value for n in read_name_nodes(value) if id(n) not in callees and n.value != "self"}

    def _no_graph_before(self, value: cst.BaseExpression) -> bool:
        """A value made before the retaining call from data only: no call but torch's
        factories (without `requires_grad`) and methods of what they made."""
        for call in all_nodes(value, cst.Call):
            assert isinstance(call, cst.Call)
            qualified = self.imports.qualified_name(call.func) or ""
            if qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in ACCEPTS_NON_TENSORS:
                if has_keyword(call, "requires_grad") is None:
                    continue
                return False
            if not isinstance(call.func, cst.Attribute) or isinstance(call.func.value, cst.Name) and call.func.value.value == "self":
                return False
        return True

    def _calls_stateful(self, value: cst.BaseExpression) -> bool:
        """Calls a same-file function that stores on `self`: it may hand back a graph it kept."""
        class_name = self.owner.name.value if self.owner is not None else None
        for call in all_nodes(value, cst.Call):
            name = dotted_name(call.func)  # type: ignore[union-attr]
            if name is not None and any(stores_on_self(f.node) for f in self.call_graph.resolve(name, class_name)):
                return True
        return False

    def _unconditional(self, statement: cst.CSTNode) -> bool:
        if self.loop is not None:
            return runs_every_iteration(statement, self.loop, self.parents)
        for parent in ancestors(statement, self.parents):
            if parent is self.scope:
                return True
            if isinstance(parent, (cst.If, cst.Try, cst.For, cst.While, cst.Match, cst.FunctionDef, cst.Lambda)):
                return False
        return True

    def _argument_reads(self, value: cst.BaseExpression) -> set[str]:
        """Names read as values (not as the callee `model` in `model(x)` / `self.model(x)`)."""
        callee_heads: set[int] = set()
        for call in all_nodes(value, cst.Call):
            assert isinstance(call, cst.Call)
            head = call.func
            while isinstance(head, cst.Attribute):
                head = head.value
            if isinstance(head, cst.Name):
                callee_heads.add(id(head))
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in _PLACEMENT_METHODS:
                for argument in call.args:  # `x.to(self.device)`: where, not what
                    callee_heads.update(id(n) for n in read_name_nodes(argument.value))
        for attribute in all_nodes(value, cst.Attribute):
            assert isinstance(attribute, cst.Attribute)
            if isinstance(attribute.value, cst.Name) and attribute.value.value == "self" and attribute.attr.value in self.constants:
                callee_heads.add(id(attribute.value))  # `self.gama * loss_c`: a set-up constant
        return {n.value for n in read_name_nodes(value) if id(n) not in callee_heads and n.value not in {"True", "False", "None"}}

    def _mentions_state(self) -> bool:
        """A value from outside the iteration named like carried state (`hidden`, `self.memory`);
        names bound in the iteration (`loss_c`) were followed by `graph_is_fresh` instead."""
        for name in read_name_nodes(self.region):
            if name.value not in self.region_bound and set(name_tokens(name.value)) & _STATE_TOKENS:
                return True
        for attribute in all_nodes(self.region, cst.Attribute):
            assert isinstance(attribute, cst.Attribute)
            if id(attribute) not in self.callees and set(name_tokens(attribute.attr.value)) & _STATE_TOKENS:
                return True
        for call in all_nodes(self.region, cst.Call):
            assert isinstance(call, cst.Call)
            if isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Call):
                continue  # `G(y, e_hat).detach()`: a value made right here, not a carried state
            segment = last_segment(call.func)
            if segment is not None and set(name_tokens(segment)) & _STATE_CALL_TOKENS:
                return True
        return False

    def graph_escapes(self, roots: list[str], imports: ImportIndex) -> bool:
        """Does a tensor of the graph leave the scope or meet another gradient API?"""
        derived = set(self.graph)
        if derived & declared_global(self.scope):
            return True
        scope_bindings = bindings(self.scope)
        changed = True
        while changed:
            changed = False
            for binding in scope_bindings:
                if binding.name in derived or binding.value is None or breaks_graph(binding.value):
                    continue
                if {n.value for n in read_name_nodes(binding.value)} & derived:
                    derived.add(binding.name)
                    changed = True
        if isinstance(self.scope, cst.Module):
            if self._functions_read_globals(derived):
                return True
            nodes = local_nodes  # a script: the file's functions see only the globals they read
        else:
            nodes = all_nodes  # nested defs and lambdas count: fail closed
        for node in nodes(self.scope, (cst.Return, cst.Yield)):
            value = node.value  # type: ignore[union-attr]
            if value is not None and _reads_unbroken(value, derived):
                return True
        for node in nodes(self.scope, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]  # type: ignore[union-attr]
            value = node.value  # type: ignore[union-attr]
            if value is not None and any(isinstance(t, (cst.Attribute, cst.Subscript)) for t in targets):
                if _reads_unbroken(value, derived):
                    return True
        for node in nodes(self.scope, cst.Expr):
            assert isinstance(node, cst.Expr)
            call = node.value
            if not isinstance(call, cst.Call) or is_gradient_call(call, imports):
                continue
            if isinstance(call.func, cst.Name) and call.func.value == "print":
                continue
            if any(_reads_unbroken(a.value, derived) for a in call.args):
                return True
        for attribute in nodes(self.scope, cst.Attribute):
            assert isinstance(attribute, cst.Attribute)
            if attribute.attr.value in _GRAPH_ATTRIBUTES:
                return True
        return False

    def _functions_read_globals(self, names: set[str]) -> bool:
        """Does a function of the script read one of `names` as a global (not its own)?"""
        for function in all_nodes(self.scope, cst.FunctionDef):
            assert isinstance(function, cst.FunctionDef)
            params = function.params
            own = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
            own |= {p.name.value for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)}
            own |= {binding.name for binding in bindings(function)}
            if {name.value for name in read_name_nodes(function.body)} & (names - own):
                return True
        return False


def _cut_whole(value: cst.BaseExpression) -> bool:
    """`G(y, e).detach()`, `loss.item()`, `float(x)`: the value as a whole holds no graph."""
    if not isinstance(value, cst.Call):
        return False
    if isinstance(value.func, cst.Attribute):
        return value.func.attr.value in CUTTING_METHODS
    return isinstance(value.func, cst.Name) and value.func.value in CUTTING_FUNCTIONS


def _reads_unbroken(node: cst.BaseExpression, names: set[str]) -> bool:
    return not breaks_graph(node) and bool({n.value for n in read_name_nodes(node)} & names)


def _body(scope: cst.CSTNode) -> cst.CSTNode:
    if isinstance(scope, (cst.FunctionDef,)):
        return scope.body
    return scope


def _iterates_data(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "range":
        return True
    if isinstance(node, cst.Call) and last_segment(node.func) in WRAPPING_ITERATORS:
        positional = [a.value for a in node.args if a.keyword is None]
        return bool(positional) and all(_iterates_data(a) for a in positional)
    return bool(expression_tokens(node) & _DATA_ITERABLE_TOKENS)


def _drop_retain_graph(updated: cst.CSTNode) -> cst.CSTNode:
    assert isinstance(updated, cst.Call)
    kept = [a for a in updated.args if not (a.keyword is not None and a.keyword.value == "retain_graph")]
    if kept:
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return updated.with_changes(args=kept)


def _merged_line(merged: cst.BaseExpression, extra_leading: tuple | list):
    def replace(updated: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(updated, cst.SimpleStatementLine)
        return updated.with_changes(
            body=[cst.Expr(value=merged)],
            leading_lines=[*updated.leading_lines, *extra_leading],
        )

    return replace
