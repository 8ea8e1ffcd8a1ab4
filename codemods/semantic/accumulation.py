"""Which names in a training loop carry a graph the same iteration frees by backward, and
where they are accumulated across iterations (the analysis behind AGF006).

A name carries the iteration's graph when the iteration backpropagates from it (or from
an attribute or item of it) unconditionally, or when it feeds such a loss through a loss
call (`ce` in `loss = ce + reg`), including the terms a same-file loss function returns
beside the total (`loss, mse, ce = my_loss(...)`). Accumulations are `acc += v`,
`acc = acc + v`, `acc.append(v)` and, through a same-file tracker method called every
iteration, `self.totals[key] += batch[key]`. Through the call graph, a value a same-file
function returns carries such graphs when it is a sum one of its loops accumulates that
way (`carried_sums`); a sum its evaluation loop builds from the trained model's loss, with
grad on and no backward, holds graphs nothing frees (`unfreed_sums`). Names only break one
tie: whether an unknown callable is a loss (`is_loss_name`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import libcst as cst

from autograd_fix.codemods.expressions import is_false
from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.semantic.callgraph import CallGraph
from autograd_fix.codemods.semantic.gradmode import with_disables_grad
from autograd_fix.codemods.semantic.module_calls import method_receivers
from autograd_fix.codemods.semantic.graphflow import expression_carries
from autograd_fix.codemods.semantic.role_evidence import is_functional_loss
from autograd_fix.codemods.semantic.loops import (
    Binding,
    all_nodes,
    ancestors,
    backward_has_gradient_argument,
    backward_root,
    bindings,
    breaks_graph,
    declared_global,
    enclosing_scope,
    has_keyword,
    innermost_loop,
    is_gradient_call,
    local_nodes,
    parent_map,
    read_name_nodes,
    runs_every_iteration,
)

#: functions that only format or print a number (a Python float works the same there)
_NUMERIC_CONSUMERS = frozenset({"print", "round", "float", "str", "format", "abs", "int", "repr"})


@dataclass
class Accumulation:
    statement: cst.CSTNode
    accumulator: str
    #: the accumulated expressions to cut off the graph (one, or the tracked members of a literal)
    values: list[cst.BaseExpression]
    #: `acc += v` / `acc = acc + v` on a plain name (eligible for `.item()`)
    numeric_form: bool


class LoopAnalysis:
    """Which names in one loop carry a graph that the same iteration frees by backward."""

    def __init__(
        self,
        loop: cst.For | cst.While | cst.FunctionDef,
        imports: ImportIndex,
        parents: dict[int, cst.CSTNode],
        graph: CallGraph,
        is_loss_name: Callable[[str], bool],
    ) -> None:
        self.loop = loop
        #: the name tie-break: a callable named like a loss (`criterion`, `compute_loss`)
        self.is_loss_name = is_loss_name
        self.imports = imports
        self.parents = parents
        self.scope = enclosing_scope(loop, parents)
        self.graph = graph
        #: the file's node index (the call graph's): searches read it, not the tree
        self.syntax = graph.syntax
        facts = graph.facts(self.scope) if type(self.scope) is cst.FunctionDef else None
        self.class_name = facts.class_name if facts is not None else None
        self.loop_bindings = bindings(loop.body, self.syntax)
        self._scope_bindings: list[Binding] | None = None
        #: names the iteration backpropagates from / that feed them through a loss function
        self.tracked: set[str] = set()
        #: tracked names known to be scalars (backward without a `gradient` argument)
        self.scalar: set[str] = set()
        #: `outputs.loss`, `out["loss"]`: attributes and items the iteration backpropagates from
        self.tracked_paths: set[str] = set()
        #: names whose items carry the graph: `losses` in `loss = losses["box"] + losses["cls"]`
        self.graph_items: set[str] = set()
        #: containers holding a graph among other things: `out` in `out["loss"].backward()`
        #: (`out["acc"]` may be a float: only keeping `out` itself is known to keep the graph)
        self.graph_containers: set[str] = set()
        #: nested `for k, v in losses.items()` loops over graph items: id(loop) -> `v`
        self.item_loops: dict[int, str] = {}
        #: names holding an evaluation pass's graph that no backward frees (`unfreed_sums`):
        #: kept only where nothing can read them back (`_write_only`)
        self.unfreed: set[str] = set()
        self._find_tracked()

    @property
    def item_names(self) -> set[str]:
        return set(self.item_loops.values())

    @property
    def scope_bindings(self) -> list[Binding]:
        if self._scope_bindings is None:
            self._scope_bindings = bindings(self.scope, self.syntax)
        return self._scope_bindings

    def _bindings_of(self, name: str) -> list[Binding]:
        return [b for b in self.loop_bindings if b.name == name]

    def _find_tracked(self) -> None:
        calls = [c for c in local_nodes(self.loop.body, cst.Call, self.syntax) if is_gradient_call(c, self.imports)]  # type: ignore[arg-type]
        for call in all_nodes(self.loop, cst.Call, self.syntax):
            assert type(call) is cst.Call
            if is_gradient_call(call, self.imports) and _keeps_graph(call):
                return  # retain_graph / create_graph: graphs may be used again
        for call in calls:
            assert type(call) is cst.Call
            root = backward_root(call, self.imports)
            if type(root) in (cst.Attribute, cst.Subscript) and runs_every_iteration(call, self.loop, self.parents):
                self._track_path(root)
                continue
            if type(root) is not cst.Name or not runs_every_iteration(call, self.loop, self.parents):
                continue
            if root.value in self.tracked or not self._fresh_graph(root.value):
                continue
            self.tracked.add(root.value)
            if not backward_has_gradient_argument(call, self.imports):
                self.scalar.add(root.value)
        for name in list(self.tracked):
            terms, dicts = self._returned_terms(name)
            self.tracked |= self._loss_inputs(name) | terms
            self.graph_items |= self._loss_items(name) | dicts
        self._through_calls(calls)

    def _through_calls(self, gradient_calls: list[cst.Call]) -> None:
        """`loss_each = self.train_one_batch(x)` every iteration, where the same-file method
        backpropagates every call and returns a dict of that loss's terms: the dict's items
        carry a graph its backward freed; so do `v` in `for k, v in loss_each.items()`."""
        if gradient_calls or type(self.loop) is cst.FunctionDef:
            return  # the loop backpropagates itself (or this is a callee's summary): no further
        for binding in self.loop_bindings:
            if binding.kind != "assign" or type(binding.value) is not cst.Call or len(self._bindings_of(binding.name)) != 1:
                continue
            if not runs_every_iteration(binding.statement, self.loop, self.parents):
                continue
            name = dotted_name(binding.value.func)
            callee = self.graph.callee(name, self.class_name) if name is not None else None
            if callee is None or callee.node is self.loop:
                continue
            returned = self.graph.returned_values(name, self.class_name)  # type: ignore[arg-type]
            if not returned or not all(type(r) is cst.Name for r in returned):
                continue
            parents = parent_map(callee.node, self.syntax)
            summary = LoopAnalysis(callee.node, self.imports, parents, self.graph, self.is_loss_name)  # type: ignore[arg-type]
            if all(r.value in summary.graph_items for r in returned):  # type: ignore[union-attr]
                self.graph_items.add(binding.name)
        self._returned_sums()
        for loop in local_nodes(self.loop.body, cst.For, self.syntax):
            assert type(loop) is cst.For
            iterable = loop.iter
            if innermost_loop(loop, self.parents) is not self.loop or type(iterable) is not cst.Call:
                continue
            if not (type(iterable.func) is cst.Attribute and iterable.func.attr.value in ("items", "values")):
                continue
            if dotted_name(iterable.func.value) not in self.graph_items:
                continue
            target = loop.target
            if iterable.func.attr.value == "items":
                target = target.elements[1].value if type(target) is cst.Tuple and len(target.elements) == 2 else None
            if type(target) is cst.Name:
                self.item_loops[id(loop)] = target.value

    def _returned_sums(self) -> None:
        """`epoch_loss_train, n = train_epoch(...)` every iteration, where the same-file
        function returns `epoch_loss_train / len(train_iter)`, the sum one of its loops
        accumulates from the loss that loop backpropagates: the value carries graphs those
        backward calls freed, so keeping it keeps them, and nothing can backpropagate it."""
        for binding in self.loop_bindings:
            call = binding.value
            if binding.kind != "assign" or type(call) is not cst.Call or len(self._bindings_of(binding.name)) != 1:
                continue
            name = dotted_name(call.func)
            returned = self.graph.returned_values(name, self.class_name) if name is not None else None
            callee = self.graph.callee(name, self.class_name) if returned is not None else None  # type: ignore[arg-type]
            if callee is None or callee.node is self.loop or not returned or len(returned) != 1:
                continue
            if not runs_every_iteration(binding.statement, self.loop, self.parents):
                continue
            value = _unpacked(binding, returned[0])
            sums = {leaf.value for leaf in _arithmetic_leaves(value)} if value is not None else set()
            if not sums or not all(_is_number(o) or _is_length(o) or type(o) is cst.Name for o in _arithmetic_operands(value)):  # type: ignore[arg-type]
                continue  # only a sum scaled by numbers (`total / len(loader)`) is followed
            if sums & carried_sums(callee.node, self.imports, self.graph, self.is_loss_name):
                self.tracked.add(binding.name)
            elif sums & unfreed_sums(callee.node, self.imports, self.graph, self.is_loss_name):
                self.unfreed.add(binding.name)

    def _track_path(self, root: cst.Attribute | cst.Subscript) -> None:
        """`outputs.loss.backward()`: the path carries this iteration's graph, and so do
        the items of `out` in `out["loss"].backward()` (an output dict of a step)."""
        base = root.value
        if type(base) is not cst.Name or not self._fresh_graph(base.value):
            return
        path = code_of(root)
        for assign in local_nodes(self.loop.body, cst.Assign, self.syntax):
            assert type(assign) is cst.Assign
            if any(code_of(t.target) == path for t in assign.targets) and breaks_graph(assign.value):
                return  # `output["loss"] = output["loss"].detach()`: cut before it is kept
        self.tracked_paths.add(path)
        if type(root) is cst.Subscript:
            self.graph_containers.add(base.value)

    def _loss_items(self, name: str) -> set[str]:
        """`losses` in `loss = losses["box"] + losses["cls"]`, `losses` bound by a loss call
        in the same iteration: every item of that dict of loss terms carries the graph."""
        found = self._bindings_of(name)
        if len(found) != 1 or found[0].value is None:
            return set()
        items: set[str] = set()
        for leaf in _arithmetic_operands(found[0].value):
            if type(leaf) is cst.Subscript and type(leaf.value) is cst.Name:
                candidate = self._bindings_of(leaf.value.value)
                if len(candidate) == 1 and candidate[0].value is not None and self._is_loss_call(candidate[0].value):
                    if self._fresh_graph(leaf.value.value):
                        items.add(leaf.value.value)
        return items

    def _returned_terms(self, name: str) -> tuple[set[str], set[str]]:
        """(terms, dicts of terms) among the names unpacked beside `name` from one same-file
        call: `MSE`, `ce` in `loss, MSE, ce = my_loss(...)` when `my_loss` returns
        `loss, MSE, ce` with `loss = MSE + ce` (or returns `MSE + ce, ...` directly), each
        term a loss call or a tensor method's result; `loss_item` in
        `loss, loss_item = self.loss_fn(...)` returning `(iou + cls, {"Box": iou, "Cls": cls})`.
        All are inputs of the backpropagated loss, freed with its graph."""
        found = self._bindings_of(name)
        if len(found) != 1 or type(found[0].statement) is not cst.Assign or type(found[0].value) is not cst.Call:
            return set(), set()
        targets = found[0].statement.targets
        if len(targets) != 1 or type(targets[0].target) is not cst.Tuple:
            return set(), set()
        names = [e.value.value if type(e.value) is cst.Name else None for e in targets[0].target.elements]
        callee_name = dotted_name(found[0].value.func)
        callee = self.graph.callee(callee_name, self.class_name) if callee_name is not None else None
        returned = self.graph.returned_values(callee_name, self.class_name) if callee is not None else None  # type: ignore[arg-type]
        if callee is None or not returned or len(returned) != 1 or type(returned[0]) is not cst.Tuple:
            return set(), set()
        elements = [e.value for e in returned[0].elements]
        if len(elements) != len(names):
            return set(), set()
        inner = bindings(callee.node.body, self.syntax)

        def single(expression: cst.BaseExpression) -> cst.BaseExpression | None:
            if type(expression) is not cst.Name:
                return expression
            bound = [b for b in inner if b.name == expression.value]
            return bound[0].value if len(bound) == 1 else None

        total = single(elements[names.index(name)])
        if total is None:
            return set(), set()
        operands = {leaf.value for leaf in _arithmetic_leaves(total)}
        is_term = lambda n: type(n) is cst.Name and n.value in operands and self._is_term(single(n))  # noqa: E731
        terms: set[str] = set()
        dicts: set[str] = set()
        computed = _computed_inputs(total, single)
        for mine, theirs in zip(names, elements):
            if mine is None or mine == name or not self._fresh_graph(mine):
                continue
            value = single(theirs)
            if is_term(theirs) or self._side_term(value, computed, callee.class_name):
                terms.add(mine)
            elif type(value) is cst.Dict and value.elements and all(
                type(e) is cst.DictElement and is_term(e.value) for e in value.elements
            ):
                dicts.add(mine)
        return terms, dicts

    def _side_term(self, value: cst.BaseExpression | None, computed: set[str], class_name: str | None) -> bool:
        """`imput_loss` returned beside `loss` by a step that computes both from the same
        model output (`GaussianNegLogLik(truth, output_mean, ...)` twice, on other masks):
        the output carries the graph the loss backpropagates, so a loss or tensor function
        of it holds a graph of its own, which no backward frees. A same-file function
        counts only where nothing in it cuts a graph (`.item()`, `argmax`, a comparison)."""
        if type(value) is not cst.Call or not computed:
            return False
        name = dotted_name(value.func)
        function = self.graph.callee(name, class_name) if name is not None else None
        if function is not None and (function.cuts or function.yields or not function.returns_value):
            return False
        return expression_carries(value, computed, self.imports)

    def _is_term(self, value: cst.BaseExpression | None) -> bool:
        """A loss call, or a tensor method's result (`(a - b).abs().mean()`): a tensor."""
        if type(value) is not cst.Call:
            return False
        if self._is_loss_call(value):
            return True
        func = value.func
        return type(func) is cst.Attribute and not (type(func.value) is cst.Name and func.value.value == "self")

    def _fresh_graph(self, name: str) -> bool:
        """Bound in the loop by computations only (no for/with targets, no `.item()`-like cut)."""
        found = self._bindings_of(name)
        return bool(found) and all(
            b.kind in {"assign", "augassign", "annassign"} and b.value is not None and not breaks_graph(b.value)
            for b in found
        )

    def _loss_inputs(self, name: str) -> set[str]:
        """`ce` in `loss = ce + reg`, `logits` in `loss = criterion(logits, y)`: freed with `name`'s graph."""
        found = self._bindings_of(name)
        if len(found) != 1 or not runs_every_iteration(found[0].statement, self.loop, self.parents):
            return set()
        value = found[0].value
        assert value is not None
        inputs: set[str] = set()
        operands = {leaf.value for leaf in _arithmetic_leaves(value)}
        for read in read_name_nodes(value):
            candidate = self._bindings_of(read.value)
            if len(candidate) != 1 or candidate[0].kind != "assign" or candidate[0].value is None:
                continue
            if not runs_every_iteration(candidate[0].statement, self.loop, self.parents):
                continue
            if breaks_graph(candidate[0].value):
                continue
            # a loss value used in arithmetic is a tensor (a criterion may return a dict);
            # a model output is known to be a tensor only when a torch loss function takes it
            if (read.value in operands and self._is_loss_call(candidate[0].value)) or (
                _is_model_call(candidate[0].value, self.imports) and self._passed_to_torch_loss(read.value, value)
            ):
                inputs.add(read.value)
        return inputs

    def _holds_loss(
        self, value: cst.BaseExpression, tainted: set[str], graph: CallGraph, function: cst.FunctionDef
    ) -> bool:
        """`criterion(out, y)` with `out` in `tainted`, or a name this loop binds only to
        numbers and to sums of such loss calls (`batch_loss = 0`, `batch_loss += criterion(...)`)."""
        if type(value) is cst.Name:
            found = self._bindings_of(value.value)
            calls = [b.value for b in found if not _is_number(b.value)]
            return bool(calls) and all(b.kind in {"assign", "augassign"} for b in found) and all(
                type(c) is cst.Call and self._holds_loss(c, tainted, graph, function) for c in calls
            )
        if not self._is_loss_call(value):
            return False
        assert type(value) is cst.Call
        name = dotted_name(value.func)
        facts = graph.facts(function)
        callee = graph.callee(name, facts.class_name if facts else None) if name is not None else None
        if callee is not None and (callee.cuts or callee.yields or not callee.returns_value):
            return False
        return any(type(a.value) is cst.Name and a.value.value in tainted for a in value.args)

    def _is_loss_call(self, node: cst.BaseExpression) -> bool:
        if type(node) is not cst.Call:
            return False
        qualified = self.imports.qualified_name(node.func)
        if qualified is not None:
            return is_functional_loss(qualified)
        name = dotted_name(node.func)
        return name is not None and self.is_loss_name(name.rsplit(".", 1)[-1])

    def _passed_to_torch_loss(self, name: str, value: cst.BaseExpression) -> bool:
        """Is `name` a direct argument of a `torch.nn.functional` loss in `value` (so a tensor)?"""
        for call in all_nodes(value, cst.Call, self.syntax):
            assert type(call) is cst.Call
            qualified = self.imports.qualified_name(call.func) or ""
            if qualified.startswith("torch.nn.functional.") and self._is_loss_call(call) and any(
                type(a.value) is cst.Name and a.value.value == name for a in call.args
            ):
                return True
        return False

    def tracker_accumulations(self) -> list[tuple[cst.AugAssign, str, bool]]:
        """`losses_track.update_train_losses(loss)` every iteration, `loss` an output dict
        whose item is backpropagated, and the same-file method (of a class that is no
        module) doing `self.train_losses[key] += loss[key]`: (that statement, `loss`, whether
        `.detach()` fits: the method has this one call site and every item of `loss` is
        known to be a tensor)."""
        found: list[tuple[cst.AugAssign, str, bool]] = []
        for expression in local_nodes(self.loop.body, cst.Expr, self.syntax):
            assert type(expression) is cst.Expr
            call = expression.value
            name = dotted_name(call.func) if type(call) is cst.Call else None
            if name is None or innermost_loop(expression, self.parents) is not self.loop:
                continue
            if not runs_every_iteration(expression, self.loop, self.parents):
                continue
            callee = self.graph.callee(name, self.class_name)
            if callee is None or callee.class_name is None or callee.module_like_class:
                continue
            params = [p.name.value for p in callee.node.params.params][1:]  # after `self`
            for position, argument in enumerate(call.args):  # type: ignore[union-attr]
                passed = argument.value
                if argument.keyword is not None or argument.star or position >= len(params):
                    break
                if type(passed) is cst.Name and passed.value in self.graph_containers:
                    fits = self.graph.call_count(callee) == 1 and self._tensor_items(passed.value)
                    found.extend((s, passed.value, fits) for s in _self_item_sums(callee.node, params[position]))
        return found

    def _tensor_items(self, container: str) -> bool:
        """`loss = model.compute_loss(...)` whose same-file method returns one dict literal
        of loss terms or arithmetic on them (`{"total": ce + reg, "ce": ce}`): all tensors."""
        found = self._bindings_of(container)
        if len(found) != 1 or type(found[0].value) is not cst.Call:
            return False
        name = dotted_name(found[0].value.func)
        callee = self.graph.callee(name, self.class_name) if name is not None else None
        returned = self.graph.returned_values(name, self.class_name) if callee is not None else None  # type: ignore[arg-type]
        if callee is None or not returned or len(returned) != 1 or type(returned[0]) is not cst.Dict:
            return False
        inner = bindings(callee.node.body, self.syntax)

        def tensor(value: cst.BaseExpression) -> bool:
            if type(value) is cst.Name:
                bound = [b for b in inner if b.name == value.value]
                return len(bound) == 1 and bound[0].value is not None and self._is_term(bound[0].value)
            if type(value) is cst.BinaryOperation:
                return any(tensor(operand) for operand in _arithmetic_operands(value))
            return self._is_term(value)

        return all(type(e) is cst.DictElement and tensor(e.value) for e in returned[0].elements)

    def detachable_items(self, container: str) -> list[str]:
        """`output["loss"]` for `output = module.training_step(batch)` when the same-file step
        returns one dict literal whose other items hold no graph (`loss.item()`, numbers,
        dicts of those): the backpropagated items are then all that keeps the graph."""
        found = self._bindings_of(container)
        if len(found) != 1 or type(found[0].value) is not cst.Call:
            return []
        name = dotted_name(found[0].value.func)
        returned = self.graph.returned_values(name, self.class_name) if name is not None else None
        if not returned or len(returned) != 1 or type(returned[0]) is not cst.Dict:
            return []
        paths = sorted(p for p in self.tracked_paths if p.startswith(f"{container}["))
        for element in returned[0].elements:
            if type(element) is not cst.DictElement or type(element.key) is not cst.SimpleString:
                return []
            if f"{container}[{element.key.value}]" not in paths and not _holds_no_graph(element.value):
                return []
        return paths

    def accumulations(self) -> list[Accumulation]:
        found: list[Accumulation] = []
        for statement in local_nodes(self.loop.body, (cst.AugAssign, cst.Assign, cst.Expr), self.syntax):
            inner = innermost_loop(statement, self.parents)
            if inner is not self.loop and id(inner) not in self.item_loops:
                continue
            accumulation = self._accumulation(statement)
            if accumulation is not None and accumulation.values:
                found.append(accumulation)
        return found

    def _accumulation(self, statement: cst.CSTNode) -> Accumulation | None:
        if type(statement) is cst.AugAssign and type(statement.operator) is cst.AddAssign:
            target = statement.target
            if type(target) is cst.Name:
                return self._single(statement, target.value, statement.value, True)
            if type(target) is cst.Subscript and type(target.value) is cst.Name:
                return self._single(statement, target.value.value, statement.value, False)
        if type(statement) is cst.Assign and len(statement.targets) == 1:
            target = statement.targets[0].target
            value = statement.value
            if type(target) is cst.Name and type(value) is cst.BinaryOperation and type(value.operator) is cst.Add:
                for mine, other in ((value.left, value.right), (value.right, value.left)):
                    if type(mine) is cst.Name and mine.value == target.value and not mine.lpar:
                        return self._single(statement, target.value, other, True)
        if type(statement) is cst.Expr and type(statement.value) is cst.Call:
            call = statement.value
            if type(call.func) is cst.Attribute and call.func.attr.value == "append" and len(call.args) == 1:
                receiver = call.func.value
                if type(receiver) is cst.Subscript:
                    receiver = receiver.value
                if type(receiver) is cst.Name and call.args[0].keyword is None and not call.args[0].star:
                    return self._single(statement, receiver.value, call.args[0].value, False)
        return None

    def _single(self, statement: cst.CSTNode, name: str, value: cst.BaseExpression, numeric: bool) -> Accumulation | None:
        if self._carries_graph(value):
            return Accumulation(statement, name, [value], numeric)
        if type(value) is cst.Name and value.value in self.unfreed and not numeric and self._write_only(name):
            return Accumulation(statement, name, [value], False)
        if type(value) in (cst.List, cst.Tuple):
            members = [e.value for e in value.elements if type(e) is not cst.StarredElement]
            return Accumulation(statement, name, [m for m in members if self._carries_graph(m)], False)
        if type(value) is cst.Dict:
            members = [e.value for e in value.elements if type(e) is cst.DictElement]
            return Accumulation(statement, name, [m for m in members if self._carries_graph(m)], False)
        return None

    def _carries_graph(self, value: cst.BaseExpression) -> bool:
        """A tracked name, or arithmetic on one (`loss * x.size(0)`), with no cut anywhere."""
        if type(value) is cst.Name:
            return value.value in self.tracked or value.value in self.graph_containers or value.value in self.item_names
        if type(value) in (cst.Attribute, cst.Subscript):
            if code_of(value) in self.tracked_paths:
                return True
            return type(value) is cst.Subscript and type(value.value) is cst.Name and (
                value.value.value in self.graph_items
            )
        if type(value) in (cst.BinaryOperation, cst.UnaryOperation) and not _is_not(value):
            # arithmetic keeps the graph of any operand that carries one, whatever the other
            # operands are (`loss / len(loader)`: `len()` cuts nothing of `loss`); a cut
            # operand (`loss.item() * n`) is a call, which is not looked into
            return any(
                self._carries_graph(leaf) for leaf in _arithmetic_operands(value) if type(leaf) is not cst.Name
            ) or any(leaf.value in self.tracked or leaf.value in self.item_names for leaf in _arithmetic_leaves(value))
        return False

    def is_scalar(self, value: cst.BaseExpression) -> bool:
        """A backpropagated scalar (`loss`), or arithmetic of such scalars with numbers
        (`loss / len(loader)`, `(a + b) / 2`): a tensor with one element, whose `.item()`
        is the same number."""
        operands = _arithmetic_operands(value)
        return any(type(o) is cst.Name and o.value in self.scalar for o in operands) and all(
            (type(o) is cst.Name and o.value in self.scalar) or _is_number(o) or _is_length(o) for o in operands
        ) and not any(_is_not(n) for n in all_nodes(value, cst.UnaryOperation, self.syntax))

    def _write_only(self, name: str) -> bool:
        """A list made empty in this scope and only ever appended to: nothing reads back
        what it holds (nor backpropagates it), so storing detached values changes nothing
        but the memory kept."""
        if type(self.scope) is not cst.FunctionDef or name in declared_global(self.scope):
            return False  # a module's list may be read from anywhere
        made = [b for b in self.scope_bindings if b.name == name]
        if len(made) != 1 or made[0].value is None:
            return False
        empty = _unpacked(made[0], made[0].value)
        if type(empty) is not cst.List or empty.elements:
            return False
        targets = {id(n) for t in made[0].statement.targets for n in all_nodes(t, cst.Name, self.syntax)}  # type: ignore[attr-defined]
        for node in all_nodes(self.scope, cst.Name, self.syntax):
            assert type(node) is cst.Name
            if node.value != name or id(node) in targets:
                continue
            parent = self.parents.get(id(node))
            if type(parent) is cst.Attribute and parent.attr is node:
                continue  # `x.eval_loss`: another object's attribute
            call = self.parents.get(id(parent))
            if not (type(parent) is cst.Attribute and parent.attr.value == "append" and type(call) is cst.Call):
                return False
            if type(self.parents.get(id(call))) is not cst.Expr:
                return False
        return True

    def accumulator_is_carried(self, accumulation: Accumulation) -> bool:
        """Bound before the loop in this scope, and not rebound in the loop except by the
        accumulation itself or a conditional reset to a literal."""
        name = accumulation.accumulator
        for binding in self._bindings_of(name):
            if binding.statement is accumulation.statement:
                continue
            if binding.kind == "assign" and _is_literal(binding.value) and not runs_every_iteration(
                binding.statement, self.loop, self.parents
            ):
                continue
            return False
        loop_statements = {id(b.statement) for b in self.loop_bindings}
        outside = [b for b in self.scope_bindings if b.name == name and id(b.statement) not in loop_statements]
        return bool(outside) and all(b.kind in {"assign", "annassign"} for b in outside)

    def starts_as_number(self, name: str) -> bool:
        found = [b for b in self.scope_bindings if b.name == name]
        return all(b.kind == "augassign" or _is_number(b.value) or _is_number(_unpacked(b, b.value)) for b in found)  # type: ignore[arg-type]

    def backpropagated_later(self, name: str) -> bool:
        """Does the accumulator, or anything computed from it, reach a gradient computation?"""
        derived = {name}
        scope_bindings = self.scope_bindings
        changed = True
        while changed:
            changed = False
            for binding in scope_bindings:
                if binding.name in derived or binding.value is None:
                    continue
                if {n.value for n in read_name_nodes(binding.value)} & derived:
                    derived.add(binding.name)
                    changed = True
        for call in all_nodes(self.scope, cst.Call, self.syntax):
            assert type(call) is cst.Call
            if is_gradient_call(call, self.imports) and {n.value for n in read_name_nodes(call)} & derived:
                return True
        for attribute in all_nodes(self.scope, cst.Attribute, self.syntax):
            assert type(attribute) is cst.Attribute
            if attribute.attr.value in {"grad_fn", "requires_grad", "register_hook", "retain_grad"}:
                if {n.value for n in read_name_nodes(attribute.value)} & derived:
                    return True
        return False


def carried_sums(
    function: cst.FunctionDef, imports: ImportIndex, graph: CallGraph, is_loss_name: Callable[[str], bool]
) -> set[str]:
    """Names `function` accumulates across a loop's iterations from the values each
    iteration backpropagates (`epoch_loss += loss` after `loss.backward()`), neither
    backpropagated later nor declared global: what AGF006 reports inside `function`."""
    parents = parent_map(function, graph.syntax)
    found: set[str] = set()
    for loop in local_nodes(function.body, (cst.For, cst.While), graph.syntax):
        assert type(loop) in (cst.For, cst.While)
        analysis = LoopAnalysis(loop, imports, parents, graph, is_loss_name)
        if not analysis.tracked:
            continue
        for accumulation in analysis.accumulations():
            name = accumulation.accumulator
            if accumulation.numeric_form and analysis.accumulator_is_carried(accumulation):
                if name not in declared_global(function) and not analysis.backpropagated_later(name):
                    found.add(name)
    return found


def unfreed_sums(
    function: cst.FunctionDef, imports: ImportIndex, graph: CallGraph, is_loss_name: Callable[[str], bool]
) -> set[str]:
    """Names an evaluation loop of `function` sums loss values into, each computed from the
    output of a callable that a training loop of the same function backpropagates through
    (`epoch_loss_eval += batch_loss_eval`, `batch_loss_eval += criterion(sequence, target)`
    over `model(story)` after `model.eval()`). Grad is on there (no `no_grad` around the
    loop, on the function or its calls), and the model has parameters that require grad
    (its training loop backpropagates through them), so each sum holds every evaluation
    batch's graph, saved activations included, which no backward frees."""
    facts = graph.facts(function)
    if facts is None or facts.decorated_no_grad or facts.called_under_no_grad or facts.enclosed_no_grad:
        return set()
    if any(_sets_grad_mode(call, imports) for call in all_nodes(function.body, cst.Call, graph.syntax)) or any(
        a.attr.value in {"requires_grad", "requires_grad_"} for a in all_nodes(function.body, cst.Attribute, graph.syntax)  # type: ignore[attr-defined]
    ):
        return set()  # `torch.set_grad_enabled(False)`, frozen parameters: whether a graph is built is not known
    # models: what the function switches between train and eval mode (`model.eval()`)
    models = method_receivers(function.body, "train") | method_receivers(function.body, "eval")
    parents = parent_map(function, graph.syntax)
    outer = [l for l in local_nodes(function.body, (cst.For, cst.While), graph.syntax) if innermost_loop(l, parents) is None]
    trained: set[str] = set()
    evaluation: list[cst.For | cst.While] = []
    for loop in outer:
        assert type(loop) in (cst.For, cst.While)
        if _grad_off(loop, parents, imports):
            continue
        analysis = LoopAnalysis(loop, imports, parents, graph, is_loss_name)
        if not analysis.tracked:
            if not any(is_gradient_call(c, imports) for c in all_nodes(loop, cst.Call, graph.syntax)):  # type: ignore[arg-type]
                evaluation.append(loop)
            continue
        for name in models:
            if _tainted(loop, lambda c, n=name: dotted_name(c.func) == n, imports) & analysis.tracked:
                trained.add(name)
    found: set[str] = set()
    for loop in evaluation if trained else []:
        is_source = lambda c: dotted_name(c.func) in trained  # noqa: E731
        tainted = _tainted(loop, is_source, imports)
        analysis = LoopAnalysis(loop, imports, parents, graph, is_loss_name)
        for statement in local_nodes(loop.body, cst.AugAssign, graph.syntax):
            assert type(statement) is cst.AugAssign
            target, value = statement.target, statement.value
            if type(statement.operator) is not cst.AddAssign or type(target) is not cst.Name:
                continue
            if innermost_loop(statement, parents) is not loop or target.value in declared_global(function):
                continue
            if not analysis.accumulator_is_carried(Accumulation(statement, target.value, [value], True)):
                continue
            if analysis.starts_as_number(target.value) and analysis._holds_loss(value, tainted, graph, function):
                if not analysis.backpropagated_later(target.value):
                    found.add(target.value)
    return found


def _tainted(loop: cst.For | cst.While, is_source: Callable[[cst.Call], bool], imports: ImportIndex) -> set[str]:
    """Names bound in `loop` to values computed from an `is_source` call's result."""
    found = bindings(loop.body)
    tainted: set[str] = set()
    changed = True
    while changed:
        changed = False
        for binding in found:
            if binding.name in tainted or binding.value is None:
                continue
            if expression_carries(binding.value, tainted, imports, is_source):
                tainted.add(binding.name)
                changed = True
    return tainted


def _grad_off(loop: cst.CSTNode, parents: dict[int, cst.CSTNode], imports: ImportIndex) -> bool:
    return any(type(p) is cst.With and with_disables_grad(p, imports) for p in ancestors(loop, parents))


def _sets_grad_mode(call: cst.Call, imports: ImportIndex) -> bool:
    qualified = imports.qualified_name(call.func) or ""
    return qualified in {"torch.set_grad_enabled", "torch.autograd.set_grad_enabled", "torch.inference_mode"}


def _unpacked(binding: Binding, returned: cst.BaseExpression) -> cst.BaseExpression | None:
    """The part of a callee's returned value that `binding` receives: all of it for
    `x = f()`, the matching element for `a, b = f()` when `f` returns a tuple literal."""
    statement = binding.statement
    if type(statement) is not cst.Assign or len(statement.targets) != 1:
        return None
    target = statement.targets[0].target
    if type(target) is cst.Name:
        return returned
    if type(target) is not cst.Tuple or type(returned) is not cst.Tuple:
        return None
    names = [e.value.value if type(e.value) is cst.Name and type(e) is not cst.StarredElement else None for e in target.elements]
    values = [e.value for e in returned.elements if type(e) is not cst.StarredElement]
    if len(values) != len(returned.elements) or len(values) != len(names) or names.count(binding.name) != 1:
        return None
    return values[names.index(binding.name)]


def _self_item_sums(function: cst.FunctionDef, parameter: str) -> list[cst.AugAssign]:
    """`self.totals[key] += batch[key]` in `function`, `batch` being `parameter`."""
    found: list[cst.AugAssign] = []
    for statement in all_nodes(function.body, cst.AugAssign):
        assert type(statement) is cst.AugAssign
        target, value = statement.target, statement.value
        if type(statement.operator) is not cst.AddAssign or type(value) is not cst.Subscript:
            continue
        if not (type(value.value) is cst.Name and value.value.value == parameter):
            continue
        root = target.value if type(target) is cst.Subscript else None
        if type(root) is cst.Attribute and type(root.value) is cst.Name and root.value.value == "self":
            found.append(statement)
    return found


def backpropagated_attribute(statement: cst.AugAssign, module: cst.Module, imports: ImportIndex) -> bool:
    """Does any gradient call of the file read the accumulated attribute (`.totals`)?"""
    target = statement.target
    attribute = target.value if type(target) is cst.Subscript else target
    name = attribute.attr.value if type(attribute) is cst.Attribute else None
    for call in all_nodes(module, cst.Call):
        assert type(call) is cst.Call
        if is_gradient_call(call, imports) and any(
            type(a) is cst.Attribute and a.attr.value == name for a in all_nodes(call, cst.Attribute)
        ):
            return True
    return False


def _computed_inputs(
    total: cst.BaseExpression, single: Callable[[cst.BaseExpression], cst.BaseExpression | None]
) -> set[str]:
    """Names the loss `total` is computed from (its call arguments, and those of the terms
    it adds up) that the function itself bound to a call's result (`output_mean` of
    `output_mean, output_var = self.forward(obs)`), not to its inputs (`truth` unpacked
    from `data`)."""
    sources = [total] + [v for leaf in _arithmetic_leaves(total) if (v := single(leaf)) is not None]
    found: set[str] = set()
    for source in sources:
        for call in all_nodes(source, cst.Call):
            assert type(call) is cst.Call
            for argument in call.args:
                if type(argument.value) is cst.Name and type(single(argument.value)) is cst.Call:
                    found.add(argument.value.value)
    return found


def _holds_no_graph(value: cst.BaseExpression) -> bool:
    """A number, a string, `x.item()`, `float(x)`, or a dict of those."""
    if type(value) in (cst.Integer, cst.Float, cst.SimpleString):
        return True
    if type(value) is cst.Dict:
        return all(type(e) is cst.DictElement and _holds_no_graph(e.value) for e in value.elements)
    if type(value) is cst.Call:
        if type(value.func) is cst.Attribute:
            return value.func.attr.value in {"item", "tolist"}
        return type(value.func) is cst.Name and value.func.value in {"float", "int", "len", "str"}
    return False


def _keeps_graph(call: cst.Call) -> bool:
    for keyword in ("retain_graph", "create_graph"):
        argument = has_keyword(call, keyword)
        if argument is not None and not is_false(argument.value):
            return True
    return False


def _is_model_call(node: cst.BaseExpression, imports: ImportIndex) -> bool:
    """`model(x)`, `self.net(x)`, `self(x)`: a call of a local (not imported) callable."""
    if type(node) is not cst.Call:
        return False
    return dotted_name(node.func) is not None and imports.qualified_name(node.func) is None


def _arithmetic_leaves(node: cst.BaseExpression) -> list[cst.Name]:
    if type(node) is cst.BinaryOperation:
        return _arithmetic_leaves(node.left) + _arithmetic_leaves(node.right)
    if type(node) is cst.UnaryOperation:
        return _arithmetic_leaves(node.expression)
    return [node] if type(node) is cst.Name else []


def _arithmetic_operands(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of `+ - * /` chains: names, attributes, items, calls."""
    if type(node) is cst.BinaryOperation:
        return _arithmetic_operands(node.left) + _arithmetic_operands(node.right)
    if type(node) is cst.UnaryOperation:
        return _arithmetic_operands(node.expression)
    return [node]


def code_of(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _is_number(node: cst.BaseExpression | None) -> bool:
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
        node = node.expression
    return type(node) in (cst.Integer, cst.Float)


def _is_length(node: cst.BaseExpression) -> bool:
    """`len(x)`: a Python int."""
    return type(node) is cst.Call and type(node.func) is cst.Name and node.func.value == "len"


def _is_not(node: cst.CSTNode) -> bool:
    """`not x`: a bool, whatever `x` carries."""
    return type(node) is cst.UnaryOperation and type(node.operator) is cst.Not


def _is_literal(node: cst.BaseExpression | None) -> bool:
    if _is_number(node):
        return True
    return type(node) in (cst.List, cst.Dict, cst.Tuple) and not node.elements  # type: ignore[union-attr]


def numeric_uses(name: str, scope: cst.CSTNode, parents: dict[int, cst.CSTNode], seen: set[str]) -> bool:
    """Is every read of `name` in the scope arithmetic, a comparison, an f-string or a print?

    A read that is assigned to another name is followed (that name must be numeric too).
    """
    if name in seen:
        return True
    seen.add(name)
    for node in all_nodes(scope, cst.Name):
        assert type(node) is cst.Name
        if node.value != name or _is_binding_target(node, parents):
            continue
        parent = parents.get(id(node))
        if type(parent) is cst.Attribute and parent.attr is node:
            continue  # `x.total`: another object's attribute
        if type(parent) in (cst.Arg, cst.Param) and getattr(parent, "keyword", None) is node:
            continue
        if not _numeric_context(node, name, scope, parents, seen):
            return False
    return True


def _numeric_context(
    node: cst.CSTNode, name: str, scope: cst.CSTNode, parents: dict[int, cst.CSTNode], seen: set[str]
) -> bool:
    current = node
    parent = parents.get(id(current))
    while type(parent) in (cst.BinaryOperation, cst.UnaryOperation, cst.Comparison, cst.ComparisonTarget):
        current, parent = parent, parents.get(id(parent))
    if type(parent) is cst.FormattedStringExpression:
        return True
    if type(parent) in (cst.If, cst.While) and parent.test is current:
        return True
    if type(parent) is cst.AugAssign and parent.value is current and type(parent.target) is cst.Name:
        return numeric_uses(parent.target.value, scope, parents, seen)
    if type(parent) is cst.Assign and parent.value is current:
        targets = [t.target for t in parent.targets]
        return all(type(t) is cst.Name for t in targets) and all(
            numeric_uses(t.value, scope, parents, seen) for t in targets  # type: ignore[union-attr]
        )
    if type(parent) is cst.Arg and parent.value is current:
        call = parents.get(id(parent))
        return (
            type(call) is cst.Call and type(call.func) is cst.Name and call.func.value in _NUMERIC_CONSUMERS
        )
    return False


def _is_binding_target(node: cst.Name, parents: dict[int, cst.CSTNode]) -> bool:
    parent = parents.get(id(node))
    if type(parent) is cst.AssignTarget and parent.target is node:
        return True
    if type(parent) in (cst.AugAssign, cst.AnnAssign) and parent.target is node:
        return True
    if type(parent) in (cst.FunctionDef, cst.ClassDef) and parent.name is node:
        return True
    if type(parent) is cst.Param and parent.name is node:
        return True
    return False
