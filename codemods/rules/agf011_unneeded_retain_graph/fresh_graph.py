"""Is a retained graph built fresh in its iteration, and does anything use it again?

The question behind AGF011 (`retain_graph=True` that nothing needs): the graph behind the
retaining backward must be built in the iteration (or function) from data, constants and
modules; none of it may leave the scope; and a later backward in the same iteration may
read only values recomputed after the first one (or cut, or made by torch's factories).
Any doubt answers "not fresh", which keeps the rule silent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.names import last_segment
from autograd_fix.codemods.semantic.autograd_function import ACCEPTS_NON_TENSORS
from autograd_fix.codemods.semantic.callgraph import CallGraph
from autograd_fix.codemods.semantic.dataflow import stores_on_self
from autograd_fix.codemods.semantic.grad_free import fresh_factory
from autograd_fix.codemods.semantic.graphflow import CUTTING_FUNCTIONS, CUTTING_METHODS
from autograd_fix.codemods.semantic.loops import (
    Binding,
    StatementOrder,
    all_nodes,
    ancestors,
    bindings,
    breaks_graph,
    declared_global,
    has_keyword,
    innermost_loop,
    is_gradient_call,
    local_nodes,
    read_name_nodes,
    runs_every_iteration,
)
from autograd_fix.codemods.semantic.module_values import builds_module, constant_attributes, plain_value
from autograd_fix.codemods.semantic.no_graph import NoGraph
from autograd_fix.codemods.walk import iter_descendants

_PLACEMENT_METHODS = frozenset({"to", "cuda", "cpu", "type"})
_GRAPH_ATTRIBUTES = frozenset({"grad_fn", "register_hook", "retain_grad", "next_functions"})


@dataclass(frozen=True)
class NameHints:
    """Where names break ties: which iterables yield data batches, which parameters hold
    input data, and which names or calls suggest state carried across iterations."""

    is_data_iterable: Callable[[cst.BaseExpression], bool]
    is_data_parameter: Callable[[str], bool]
    is_state_name: Callable[[str], bool]
    is_state_call: Callable[[str], bool]


class FreshGraph:
    """Is the graph behind a retaining backward's roots built fresh in its iteration (or
    function), does any of it leave the scope, and does a later backward reuse it?

    Evidence first: bindings in the iteration, data the loop iterates over, constants set
    once (`self.gama`, `gama = 0.8`), modules, torch factories, cuts (`.detach()`).
    `hints` (names) only decide what counts as data or as carried state where the
    code itself cannot tell.
    """

    def __init__(
        self, scope: cst.CSTNode, call: cst.Call, parents: dict[int, cst.CSTNode], graph: CallGraph, imports: ImportIndex,
        hints: NameHints, no_graph: NoGraph | None = None,
    ) -> None:
        self.imports = imports
        #: values carried across iterations or read from outside it that certainly hold no graph
        self.no_graph = no_graph
        self.hints = hints
        self.scope = scope
        self.call = call
        self.parents = parents
        self.loop = innermost_loop(call, parents)
        self.region: cst.CSTNode = self.loop.body if self.loop is not None else _body(scope)
        self.order = StatementOrder.of(self.region)
        self.region_bindings = bindings(self.region)
        self.region_bound = {binding.name for binding in self.region_bindings}
        self.call_graph = graph
        self.owner = graph.owner(scope) if type(scope) is cst.FunctionDef else None
        #: `self.X` set once in `__init__` from literals or its parameters: read freely
        self.constants = constant_attributes(self.owner) | self._setup_tensors() if self.owner is not None else frozenset()
        self.allowed_outside = self._allowed_outside_names()
        #: attributes called (`self.criterion_c(...)`, `model.init_hidden`): functions, not values
        self.callees = {id(c.func) for c in all_nodes(self.region, cst.Call) if type(c.func) is cst.Attribute}  # type: ignore[union-attr]
        #: names of the graph bound in the region (roots and everything they are computed from)
        self.graph: set[str] = set()
        self._free_cache: dict[tuple[str, int], bool] = {}

    def _setup_tensors(self) -> frozenset[str]:
        """`self.X` made in this method before the loop from torch factories only (a GAN's
        labels: `self.y_real_, self.y_fake_ = torch.ones(n, 1), torch.zeros(n, 1)`, then
        `self.y_real_ = self.y_real_.cuda()`), and written by no other method but
        `__init__`: fixed tensors that hold no graph, read freely in the loop."""
        if self.owner is None or self.loop is None or type(self.scope) is not cst.FunctionDef:
            return frozenset()
        in_loop = {id(node) for node in all_nodes(self.loop, (cst.Assign, cst.AugAssign, cst.AnnAssign))}
        made: set[str] = set()
        other: set[str] = set()
        for method in (s for s in self.owner.body.body if type(s) is cst.FunctionDef):
            for node in all_nodes(method.body, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                for name, value in _self_targets(node):  # type: ignore[arg-type]
                    if method is self.scope and id(node) not in in_loop and value is not None and (
                        _copies_no_graph(value, self.imports) or _moved(value, name)
                    ):
                        made.add(name)
                    elif method.name.value != "__init__":
                        other.add(name)
        return frozenset(made - other)

    def _allowed_outside_names(self) -> set[str] | None:
        """Names from outside the region that are data (loop targets over a loader, data params)."""
        if self.loop is not None:
            if type(self.loop) is not cst.For or not self.hints.is_data_iterable(self.loop.iter):
                return None
            return {n.value for n in all_nodes(self.loop.target, cst.Name)}  # type: ignore[union-attr]
        if type(self.scope) is cst.FunctionDef:
            params = self.scope.params
            every = [*params.posonly_params, *params.params, *params.kwonly_params]
            return {p.name.value for p in every if self.hints.is_data_parameter(p.name.value)}
        return set()  # a script's top level: everything is bound in the region

    def graph_is_fresh(self, roots: list[str]) -> bool:
        if self.allowed_outside is None or self._mentions_state():
            return False
        call_position = self.order.position(self.call)
        pending = [(root, self.call) for root in roots]
        seen: set[tuple[str, int]] = set()
        while pending:
            name, reader = pending.pop()
            if (name, id(reader)) in seen:
                continue
            seen.add((name, id(reader)))
            found = [b for b in self.region_bindings if b.name == name]
            if not found:
                return False  # a root or a value from outside the region that is not data
            self.graph.add(name)
            # a rebinding after the call (`x_hat = G(y, e).detach()` for a later update) does not
            # feed this graph: the iteration rebinds the name before the call before reading it
            found = self._reaching(found, reader) or [b for b in found if self.order.position(b.statement) < call_position] or found
            for binding in found:
                if binding.kind not in {"assign", "augassign", "annassign"} or binding.value is None:
                    return False
                position = self.order.position(binding.statement)
                if position > call_position:
                    return False
                part = _element_value(binding)
                if _copies_no_graph(part, self.imports) or self._no_graph_expression(part):
                    continue  # `y_cont_ = torch.from_numpy(noise).type(...)`: a new tensor, whatever it read
                if not self._unconditional(binding.statement) and not _moved_name(part, name):
                    return False  # (`if gpu: x_ = x_.cuda()` moves this iteration's value, carries nothing)
                if self._calls_stateful(binding.value):
                    return False
                for read in self._argument_reads(part):
                    if read == name and binding.kind == "augassign":
                        continue
                    local = [b for b in self.region_bindings if b.name == read]
                    if local and min(self.order.position(b.statement) for b in local) < position:
                        pending.append((read, binding.statement))
                    elif read not in self.allowed_outside and not self._constant_outside(read) and not self._holds_no_graph(read):
                        return False  # from outside and not data, or carried from the last iteration
        return True

    def _reaching(self, found: list[Binding], reader: cst.CSTNode) -> list[Binding]:
        """The one binding of `found` whose value `reader` sees, when the code says so: the
        last one before it runs every iteration (it dominates the reader), and no later one
        sits in an inner loop around the reader (whose next round would see that one).
        `advantage = torch.tensor(advantage_lst)` after a loop that accumulated a float
        `advantage`: only the tensor reaches `surr = ratio * advantage`. [] when unsure."""
        at = self.order.position(reader)
        before = [b for b in found if -1 < self.order.position(b.statement) < at]
        if not before or self.loop is None:
            return []
        latest = max(before, key=lambda b: self.order.position(b.statement))
        if latest.kind != "assign" or not self._unconditional(latest.statement):
            return []
        around = [node for node in ancestors(reader, self.parents) if type(node) in (cst.For, cst.While)]
        inner = around[: around.index(self.loop)] if self.loop in around else around
        for binding in found:
            if self.order.position(binding.statement) >= at and any(
                loop is node for loop in inner for node in ancestors(binding.statement, self.parents)
            ):
                return []
        return [latest]

    def _free_at(self, name: str, reader: cst.CSTNode, pending: frozenset[tuple[str, int]] = frozenset()) -> bool:
        """Does `name`, read by `reader` (a node of the region), certainly hold no graph
        there? Flow-sensitive where the code says which binding reaches (`_reaching`):
        `delta = delta.detach().numpy()` before `for item in delta[::-1]` cuts what the loop
        reads, whatever `delta` held before; elsewhere every binding of the region counts,
        and so does what the name holds from outside it. A cycle (`a = g * a + item[0]`)
        is assumed free, the other bindings decide."""
        key = (name, id(reader))
        if key in pending:
            return True
        if key in self._free_cache:
            return self._free_cache[key]
        found = [b for b in self.region_bindings if b.name == name]
        reached = self._reaching(found, reader)
        answer = bool(found) or self._holds_no_graph(name) or self._constant_outside(name)
        if answer and not reached and found:
            answer = self._only_in_region(name) or self._holds_no_graph(name) or self._constant_outside(name)
        for binding in reached or found:
            if not answer:
                break
            answer = self._binding_free(binding, pending | {key})
        self._free_cache[key] = answer
        return answer

    def _binding_free(self, binding: Binding, pending: frozenset[tuple[str, int]]) -> bool:
        """The value `binding` gives its name holds no graph, its reads followed by `_free_at`."""
        if binding.value is None or binding.kind not in {"assign", "for"} or self.no_graph is None:
            return False
        value = _element_value(binding) if binding.kind == "assign" else binding.value
        if _copies_no_graph(value, self.imports) or self._no_graph_expression(value):
            return True
        reads = {n.value for n in read_name_nodes(value)} - {"self"}
        free = frozenset(read for read in reads if self._free_at(read, binding.statement, pending))
        if type(self.scope) not in (cst.FunctionDef, cst.Module):
            return False
        return self.no_graph.expression(value, self.scope, free | self._trusted())

    def _no_graph_expression(self, value: cst.BaseExpression) -> bool:
        """`value` certainly holds no graph, with the region's data names (loop targets over
        a loader, data parameters) trusted as `_holds_no_graph` trusts them."""
        if self.no_graph is None or type(self.scope) not in (cst.FunctionDef, cst.Module):
            return False
        return self.no_graph.expression(value, self.scope, self._trusted())

    def _trusted(self) -> frozenset[str]:
        trusted = set(self.allowed_outside or ())
        if type(self.scope) is cst.FunctionDef:
            params = self.scope.params
            every = [*params.posonly_params, *params.params, *params.kwonly_params]
            trusted |= {p.name.value for p in every if self.hints.is_data_parameter(p.name.value)}
        return frozenset(trusted)

    def _constant_outside(self, name: str) -> bool:
        """Bound only outside the iteration, and only to literals (`gama = 0.8`) or modules
        (`D = Discriminator()`: its parameters are leaves; in-file forwards keep no state)."""
        if name in self.region_bound:
            return False
        found = [b for b in bindings(self.scope) if b.name == name]
        return bool(found) and all(b.kind == "assign" and b.value is not None and self._no_graph_value(b.value) for b in found)

    def _holds_no_graph(self, name: str) -> bool:
        """Read from outside the iteration or carried from the previous one, `name` never
        holds a graph: every binding in the scope is an index, a cut, a constant or data
        (`prev = topk(out, 1)[1]`, then `prev = mask(prev)` returning `.data`)."""
        if self.no_graph is None or type(self.scope) not in (cst.FunctionDef, cst.Module):
            return False
        return self.no_graph.name(name, self.scope, self._trusted())

    def _no_graph_value(self, value: cst.BaseExpression) -> bool:
        return plain_value(value, set()) or builds_module(value, self.call_graph.module_classes, self.imports)

    def recomputed_after(self, later: cst.Call) -> bool:
        """Does the later gradient call `name.backward()` in the same region read only values
        bound after this (retaining) call, data, or values that hold no graph? Then it never
        backpropagates through the retained graph (talking-heads: `x_hat` recomputed and
        detached, both discriminator outputs recomputed)."""
        if not (type(later.func) is cst.Attribute and type(later.func.value) is cst.Name):
            return False
        if any(a.keyword is None or a.keyword.value != "retain_graph" for a in later.args):
            return False  # `gradient=`, `inputs=`: what it backpropagates is not the name alone
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
            if latest.kind != "assign" or latest.value is None:
                return False
            position = self.order.position(latest.statement)
            part = _element_value(latest)
            if _moved_name(part, name):
                pending.append((name, position))  # `if gpu: z_ = z_.cuda()`: the value before it, moved
                continue
            if not self._unconditional(latest.statement):
                if self._no_graph_anywhere(name, found):
                    continue  # `if supervised: y = torch.zeros(...)... else: y = torch.from_numpy(...)`
                return False
            if _cut_whole(latest.value) or _copies_no_graph(part, self.imports) or self._no_graph_expression(part):
                continue  # holds no graph, whatever it read (`torch.from_numpy(noise).type(...)`)
            reads = self._value_reads(latest.value)
            if reads is None or (position < first and not self._no_graph_before(latest.value)):
                return False
            pending.extend((read, position) for read in reads)
        return True

    def _no_graph_anywhere(self, name: str, found: list[Binding]) -> bool:
        """Every binding of `name` in the region holds no graph (or moves the name), and so
        does what it holds from outside the region: whichever ran last, no graph."""
        for binding in found:
            if binding.kind != "assign" or binding.value is None:
                return False
            part = _element_value(binding)
            if not (_moved_name(part, name) or _copies_no_graph(part, self.imports) or self._no_graph_expression(part)):
                return False
        return (
            name in (self.allowed_outside or set())
            or self._constant_outside(name)
            or self._only_in_region(name)
            or self._holds_no_graph(name)
            or any(self._unconditional(b.statement) and not _moved_name(_element_value(b), name) for b in found)
        )

    def _only_in_region(self, name: str) -> bool:
        """`name` is bound nowhere in the scope but in the region, and is no parameter: it
        holds no value from outside the region, only one its bindings there made."""
        inside = {id(b.statement) for b in self.region_bindings if b.name == name}
        if type(self.scope) is cst.FunctionDef:
            params = self.scope.params
            every = [*params.posonly_params, *params.params, *params.kwonly_params, params.star_arg, params.star_kwarg]
            if any(type(p) is cst.Param and p.name.value == name for p in every):
                return False
        return bool(inside) and all(id(b.statement) in inside for b in bindings(self.scope) if b.name == name)

    def _value_reads(self, value: cst.BaseExpression) -> set[str] | None:
        """Names whose values `value` uses, method receivers included (`out` in `out.pow(2)`);
        functions called by bare or imported name are not values. None when it reads `self` state."""
        callees: set[int] = set()
        for call in all_nodes(value, cst.Call):
            assert type(call) is cst.Call
            head = call.func
            while type(head) is cst.Attribute and self.imports.qualified_name(call.func) is not None:
                head = head.value  # `torch.randn(...)`: an imported function, not a value
            if type(head) is cst.Name:
                callees.add(id(head))
        for attribute in all_nodes(value, cst.Attribute):
            assert type(attribute) is cst.Attribute
            if type(attribute.value) is cst.Name and attribute.value.value == "self":
                if id(attribute) not in self.callees and attribute.attr.value not in self.constants:
                    return None
        return {n.value for n in read_name_nodes(value) if id(n) not in callees and n.value != "self"}

    def _no_graph_before(self, value: cst.BaseExpression) -> bool:
        """A value made before the retaining call from data only: no call but torch's
        factories (without `requires_grad`) and methods of what they made."""
        for call in all_nodes(value, cst.Call):
            assert type(call) is cst.Call
            qualified = self.imports.qualified_name(call.func) or ""
            if qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in ACCEPTS_NON_TENSORS:
                if has_keyword(call, "requires_grad") is None:
                    continue
                return False
            if type(call.func) is not cst.Attribute or type(call.func.value) is cst.Name and call.func.value.value == "self":
                return False
        return True

    def _calls_stateful(self, value: cst.BaseExpression) -> bool:
        """Calls a same-file function that stores on `self`: it may hand back a graph it kept."""
        class_name = self.owner.name.value if self.owner is not None else None
        for call in all_nodes(value, cst.Call):
            name = dotted_name(call.func)  # type: ignore[union-attr]
            if name is not None and any(stores_on_self(f.node) for f in self.call_graph.resolve(name, class_name, call)):
                return True
        return False

    def _unconditional(self, statement: cst.CSTNode) -> bool:
        if self.loop is not None:
            return runs_every_iteration(statement, self.loop, self.parents)
        for parent in ancestors(statement, self.parents):
            if parent is self.scope:
                return True
            if type(parent) in (cst.If, cst.Try, cst.For, cst.While, cst.Match, cst.FunctionDef, cst.Lambda):
                return False
        return True

    def _argument_reads(self, value: cst.BaseExpression) -> set[str]:
        """Names read as values (not as the callee `model` in `model(x)` / `self.model(x)`)."""
        callee_heads: set[int] = set()
        for call in all_nodes(value, cst.Call):
            assert type(call) is cst.Call
            head = call.func
            while type(head) is cst.Attribute:
                head = head.value
            # `logits.flatten()`: a value made in the iteration, not a callee like `model.encode`
            if type(head) is cst.Name and (head is call.func or head.value not in self.region_bound):
                callee_heads.add(id(head))
            if type(call.func) is cst.Attribute and call.func.attr.value in _PLACEMENT_METHODS:
                for argument in call.args:  # `x.to(self.device)`: where, not what
                    callee_heads.update(id(n) for n in read_name_nodes(argument.value))
        for attribute in all_nodes(value, cst.Attribute):
            assert type(attribute) is cst.Attribute
            if type(attribute.value) is cst.Name and attribute.value.value == "self" and attribute.attr.value in self.constants:
                callee_heads.add(id(attribute.value))  # `self.gama * loss_c`: a set-up constant
        return {n.value for n in read_name_nodes(value) if id(n) not in callee_heads and n.value not in {"True", "False", "None"}}

    def _mentions_state(self) -> bool:
        """A value from outside the iteration named like carried state (`hidden`, `self.memory`);
        names bound in the iteration (`loss_c`) were followed by `graph_is_fresh` instead,
        and a name that certainly holds no graph is no carried graph whatever it is called
        (`first_hidden = (h.detach(), c.detach())`)."""
        for name in read_name_nodes(self.region):
            if name.value not in self.region_bound and self.hints.is_state_name(name.value) and not self._holds_no_graph(name.value):
                return True
        for attribute in all_nodes(self.region, cst.Attribute):
            assert type(attribute) is cst.Attribute
            if id(attribute) not in self.callees and self.hints.is_state_name(attribute.attr.value):
                return True
        returned = {
            id(c) for r in all_nodes(self.region, cst.Return) if r.value is not None  # type: ignore[union-attr]
            for c in all_nodes(r.value, cst.Call)  # type: ignore[union-attr]
        }
        for call in all_nodes(self.region, cst.Call):
            assert type(call) is cst.Call
            if type(call.func) is cst.Attribute and type(call.func.value) is cst.Call:
                continue  # `G(y, e_hat).detach()`: a value made right here, not a carried state
            if id(call) in returned and type(call.func) is cst.Attribute and _bound_name(call.func.value, self.region_bound):
                continue  # `return {"loss": loss.detach()}`: a local value handed back cut, carried nowhere
            if type(call.func) is cst.Attribute and type(call.func.value) is cst.Name and self._made_here(call.func.value):
                continue  # `delta.detach()` of a value this iteration made before reading it: a cut, no carried state
            segment = last_segment(call.func)
            if segment is not None and self.hints.is_state_call(segment):
                return True
        return False

    def _made_here(self, read: cst.Name) -> bool:
        """Does `read` see a value the iteration made: the name's first binding in the
        region runs every iteration, before the read and not around it (`hidden =
        hidden.detach()` reads the last iteration's value)?"""
        found = [b for b in self.region_bindings if b.name == read.value]
        if not found:
            return False
        first = min(found, key=lambda b: self.order.position(b.statement))
        if not -1 < self.order.position(first.statement) < self.order.position(read) or not self._unconditional(first.statement):
            return False
        return not any(node is read for node in iter_descendants(first.statement))

    def graph_escapes(self, roots: list[str], imports: ImportIndex) -> bool:
        """Does a tensor of the graph leave the scope or meet another gradient API?"""
        derived = set(self.graph)
        if derived & declared_global(self.scope):
            return True
        scope_bindings = bindings(self.scope)
        def carried(node: cst.BaseExpression, reader: cst.CSTNode) -> bool:
            """`node`, read at `reader`, reads a name of the graph that may hold it there."""
            if breaks_graph(node):
                return False
            names = {n.value for n in read_name_nodes(node)} & derived
            if self.order.position(reader) < 0:
                return bool(names)  # outside the region: flow-insensitive
            return any(not self._free_at(name, reader) for name in names)

        changed = True
        while changed:
            changed = False
            for binding in scope_bindings:
                if binding.name in derived or binding.value is None:
                    continue
                if carried(binding.value, binding.statement):
                    derived.add(binding.name)
                    changed = True
        if type(self.scope) is cst.Module:
            if self._functions_read_globals(derived):
                return True
            nodes = local_nodes  # a script: the file's functions see only the globals they read
        else:
            nodes = all_nodes  # nested defs and lambdas count: fail closed
        for node in nodes(self.scope, (cst.Return, cst.Yield)):
            value = node.value  # type: ignore[union-attr]
            if value is not None and carried(value, node):
                return True
        for node in nodes(self.scope, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]  # type: ignore[union-attr]
            value = node.value  # type: ignore[union-attr]
            if value is not None and any(type(t) in (cst.Attribute, cst.Subscript) for t in targets):
                if carried(value, node):
                    return True
        for node in nodes(self.scope, cst.Expr):
            assert type(node) is cst.Expr
            call = node.value
            if type(call) is not cst.Call or is_gradient_call(call, imports):
                continue
            if type(call.func) is cst.Name and call.func.value == "print":
                continue
            if any(carried(a.value, node) for a in call.args):
                return True
        for attribute in nodes(self.scope, cst.Attribute):
            assert type(attribute) is cst.Attribute
            if attribute.attr.value in _GRAPH_ATTRIBUTES:
                return True
        return False

    def _functions_read_globals(self, names: set[str]) -> bool:
        """Does a function of the script read one of `names` as a global (not its own)?"""
        for function in all_nodes(self.scope, cst.FunctionDef):
            assert type(function) is cst.FunctionDef
            params = function.params
            own = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
            own |= {p.name.value for p in (params.star_arg, params.star_kwarg) if type(p) is cst.Param}
            own |= {binding.name for binding in bindings(function)}
            if {name.value for name in read_name_nodes(function.body)} & (names - own):
                return True
        return False


def _copies_no_graph(value: cst.BaseExpression, imports: ImportIndex) -> bool:
    """A torch factory call that makes a new tensor holding no graph (`torch.ones(n, 1)`);
    not `torch.as_tensor`, which hands a tensor argument back as it is."""
    return fresh_factory(value, imports) and imports.qualified_name(value.func) != "torch.as_tensor"  # type: ignore[attr-defined]


#: methods that move or cast a tensor (`self.y_real_.cuda()`): what they return holds
#: a graph only if the receiver does
_MOVES = frozenset({"cuda", "cpu", "to", "float", "double", "half"})


def _element_value(binding: Binding) -> cst.BaseExpression:
    """What `binding.name` receives: its element when a tuple display is unpacked into a
    tuple target of the same length, else the whole assigned value."""
    statement, value = binding.statement, binding.value
    assert value is not None
    if type(statement) is cst.Assign and type(value) in (cst.Tuple, cst.List):
        for target in (t.target for t in statement.targets):
            if type(target) in (cst.Tuple, cst.List) and len(target.elements) == len(value.elements):
                for element, item in zip(target.elements, value.elements):
                    if type(element.value) is cst.Name and element.value.value == binding.name:
                        return item.value
    return value


def _moved_name(value: cst.BaseExpression, name: str) -> bool:
    """`x_.cuda()` for `x_`: the name's own value moved or cast."""
    return (
        type(value) is cst.Call
        and type(value.func) is cst.Attribute
        and value.func.attr.value in _MOVES
        and type(value.func.value) is cst.Name
        and value.func.value.value == name
    )


def _moved(value: cst.BaseExpression, name: str) -> bool:
    """`self.<name>.cuda()`: the attribute moved onto itself."""
    return (
        type(value) is cst.Call
        and type(value.func) is cst.Attribute
        and value.func.attr.value in _MOVES
        and type(value.func.value) is cst.Attribute
        and value.func.value.attr.value == name
        and type(value.func.value.value) is cst.Name
        and value.func.value.value.value == "self"
    )


def _self_targets(node: cst.Assign | cst.AugAssign | cst.AnnAssign) -> list[tuple[str, cst.BaseExpression | None]]:
    """(X, value) for each `self.X` a statement writes; the value is None where it is not
    X's alone (an augmented assignment, an element of an unpacked call)."""
    targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
    value = node.value if type(node) is not cst.AugAssign else None
    found: list[tuple[str, cst.BaseExpression | None]] = []
    for target in targets:
        if _on_self(target):
            found.append((target.attr.value, value))  # type: ignore[union-attr]
        elif type(target) in (cst.Tuple, cst.List):
            values = value.elements if type(value) in (cst.Tuple, cst.List) and len(value.elements) == len(target.elements) else None
            for index, element in enumerate(target.elements):
                if _on_self(element.value):
                    found.append((element.value.attr.value, values[index].value if values else None))  # type: ignore[union-attr]
        elif type(target) in (cst.Attribute, cst.Subscript):
            while type(target) in (cst.Attribute, cst.Subscript) and not _on_self(target):
                target = target.value
            if _on_self(target):
                found.append((target.attr.value, None))  # type: ignore[union-attr]
    return found


def _on_self(node: cst.BaseExpression) -> bool:
    return type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self"


def _cut_whole(value: cst.BaseExpression) -> bool:
    """`G(y, e).detach()`, `loss.item()`, `float(x)`: the value as a whole holds no graph."""
    if type(value) is not cst.Call:
        return False
    if type(value.func) is cst.Attribute:
        return value.func.attr.value in CUTTING_METHODS
    return type(value.func) is cst.Name and value.func.value in CUTTING_FUNCTIONS


def _bound_name(node: cst.BaseExpression, bound: set[str]) -> bool:
    return type(node) is cst.Name and node.value in bound


def _body(scope: cst.CSTNode) -> cst.CSTNode:
    if type(scope) is cst.FunctionDef:
        return scope.body
    return scope
