"""The file's same-file call graph, with grad mode and gradient use propagated through calls.

One answer, shared by every rule, to: which same-file functions does a call reach; is a
function only ever called under `no_grad` (decorator, `with` block, or a caller that is);
does a function (or anything it calls) take gradients; does a caller feed a function's
result into a gradient computation; which classes are `nn.Module`s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.names import last_segment
from autograd_fix.codemods.semantic.answer import Answer
from autograd_fix.codemods.semantic.dataflow import DROPPED, REACHES_SINK, RETURNED, result_flow, stores_on_self
from autograd_fix.codemods.semantic.gradmode import GradUseFinder, find_grad_use, function_disables_grad, with_disables_grad
from autograd_fix.codemods.semantic.graphflow import (
    CUTTING_ATTRIBUTES,
    CUTTING_FUNCTIONS,
    CUTTING_METHODS,
    METADATA_ATTRIBUTES,
    VALUE_INDEX_PAIRS,
    graph_flow,
)
from autograd_fix.codemods.semantic.instances import InstanceTypes
from autograd_fix.codemods.semantic.lightning import is_lightning_class, is_lightning_hook
from autograd_fix.codemods.semantic.module_values import module_attributes
from autograd_fix.codemods.semantic.nn_modules import module_classes
from autograd_fix.codemods.torch_api import THREAD_TARGET_LAUNCHERS
from autograd_fix.codemods.walk import SyntaxIndex, find_all


@dataclass
class FunctionFacts:
    """What the call graph knows of one function of the file."""

    node: cst.FunctionDef
    class_name: str | None
    module_like_class: bool
    direct_grad: bool
    calls: set[str]
    decorated_no_grad: bool
    enclosed_no_grad: bool
    #: (calling function or None, under no_grad there, the call expression)
    call_sites: list[tuple["FunctionFacts | None", bool, cst.Call]] = field(default_factory=list)
    #: `for` loops and comprehensions directly in this function (not in nested ones)
    loops: list[cst.CSTNode] = field(default_factory=list)
    #: returns or yields a value
    returns_value: bool = False
    #: the values its own `return` statements hand back (nested defs excluded)
    returned: list[cst.BaseExpression] = field(default_factory=list)
    #: a generator: what a call returns is not what `return` says
    yields: bool = False
    #: something in it cuts a graph (`.item()`, `argmax`, `.shape`, a comparison)
    cuts: bool = False
    #: it, or a same-file function it calls, takes gradients (backward, step, autograd.grad)
    uses_grad: bool = False
    #: passed as a value (`run_eval(model, loader, model.validation_step)`): called by
    #: code whose grad mode the call graph cannot see
    passed_as_callback: bool = False
    #: run as a new thread's or process's target (`mp.Process(target=test)`): its grad
    #: mode is torch's default there, its result is dropped (`THREAD_TARGET_LAUNCHERS`)
    thread_target: bool = False
    #: some same-file call site runs it under no_grad (there, or in a caller that does), or
    #: it is a hook Lightning's evaluation loops run under no_grad (`validation_step`)
    called_under_no_grad: bool = False
    #: some same-file caller feeds its result into a gradient computation (or returns it
    #: to a caller that does)
    called_from_grad_scope: bool = False


class CallGraph:
    """Same-file functions, their call sites and callers, and gradient use through calls.

    Built once per file (see `SemanticModel.call_graph`). Calls resolve by name within
    the file only: a bare name to a module-level function, `self.name`/`cls.name` to a
    method of the calling class. A name that resolves to nothing is unknown, never
    assumed to train or not.
    """

    def __init__(self, imports: ImportIndex) -> None:
        self.imports = imports
        self.functions: dict[int, FunctionFacts] = {}
        self.by_key: dict[tuple[str | None, str], list[FunctionFacts]] = {}
        #: whether each class of this file is an nn.Module (`nn_modules`: one answer)
        self.class_answers: dict[str, Answer] = {}
        #: classes of this file that certainly are modules
        self.module_classes: set[str] = set()
        #: the last names of callables called (or passed) under no_grad anywhere in the
        #: file: a function or method of one of these names may run without grad (a
        #: name-level over-approximation that keeps tracking from claiming grad is on)
        self.no_grad_callees: set[str] = set()
        self._module_attributes: dict[str, frozenset[str]] = {}
        #: module-level code (outside functions and classes) takes gradients
        self.module_level_uses_grad = False
        self._methods: dict[str, list[FunctionFacts]] | None = None
        #: calls the graph does not resolve: (calling class, callee name)
        self.unresolved: list[tuple[str | None, str]] = []
        #: LightningModules and Callbacks of this file (through same-file bases too)
        self.lightning_classes: set[str] = set()
        #: the file's classes by name (the last one of a name wins, as at run time)
        self.classes: dict[str, cst.ClassDef] = {}
        self._attribute_classes: dict[tuple[str, str], str | None] = {}
        #: the file's node index (set by `build`), for searches of any part of the file
        self.syntax: SyntaxIndex | None = None
        #: which same-file class a bare name holds where it is used (`model = ActorCritic()`)
        self.instances: InstanceTypes | None = None
        #: the method names the file's classes define (set once every function is
        #: collected): `x.m(...)` resolves to nothing when no class defines `m`
        self._class_methods: frozenset[str] | None = None

    @classmethod
    def build(
        cls, module: cst.Module, imports: ImportIndex, syntax: SyntaxIndex | None = None,
        classes: Mapping[str, Answer] | None = None,
    ) -> "CallGraph":
        """The file's call graph; `classes`: whether each class is an nn.Module
        (`nn_modules.module_classes`, computed here when not given)."""
        graph = cls(imports)
        graph.syntax = syntax or SyntaxIndex(module)
        graph.class_answers = dict(classes) if classes is not None else module_classes(module, imports, graph.syntax)
        graph._collect(module, graph.syntax)
        return graph

    def note_no_grad_call(self, name: str | None, call: cst.Call) -> None:
        """A call made under no_grad: its callee's last name, and the bare names passed to
        it (`trainer.run(evaluate)`), may run without grad (see `no_grad_callees`)."""
        if name is not None:
            self.no_grad_callees.add(last_segment(call.func) or name.rsplit(".", 1)[-1])
        for argument in call.args:
            if type(argument.value) is cst.Name:
                self.no_grad_callees.add(argument.value.value)

    def facts(self, node: cst.FunctionDef) -> FunctionFacts | None:
        """The facts of a function of this file (None for a node of another tree)."""
        return self.functions.get(id(node))

    def module_attributes(self, class_name: str | None) -> frozenset[str]:
        """`self.X` attributes the class's `__init__` builds from modules (see module_values)."""
        if class_name is None or class_name not in self.classes:
            return frozenset()
        if class_name not in self._module_attributes:
            self._module_attributes[class_name] = module_attributes(
                self.classes[class_name], self.module_classes, self.imports, self.syntax
            )
        return self._module_attributes[class_name]

    def owner(self, node: cst.FunctionDef) -> cst.ClassDef | None:
        """The class whose method `node` is (None for a plain function)."""
        facts = self.facts(node)
        return self.classes.get(facts.class_name) if facts is not None and facts.class_name else None

    def _collect(self, module: cst.Module, syntax: SyntaxIndex) -> None:
        collector = _Collector(self)
        syntax.walk(module, collector)
        self._class_methods = frozenset(method for owner, method in self.by_key if owner is not None)
        self.instances = InstanceTypes(module, set(self.classes), [f.node for f in self.functions.values()], syntax)
        for caller, under_no_grad, name, call in collector.call_sites:
            resolved = self.resolve(name, caller.class_name if caller else None, call)
            for callee in resolved:
                callee.call_sites.append((caller, under_no_grad, call))
            if not resolved:
                self.unresolved.append((caller.class_name if caller else None, name))
        for function in self.functions.values():
            function.passed_as_callback = function.node.name.value in collector.callbacks
        self._propagate()
        if self._mark_thread_targets(collector.thread_targets):
            self._propagate()  # a target started under no_grad: what it calls is too
        # after propagation: a module-level call of a same-file function that trains counts
        top = [s for s in module.body if type(s) not in (cst.FunctionDef, cst.ClassDef)]
        self.module_level_uses_grad = any(self.uses_grad(statement, None) for statement in top)

    def resolve(self, name: str, caller_class: str | None, where: cst.CSTNode | None = None) -> list[FunctionFacts]:
        """The same-file functions a call of `name` runs: a bare name's module-level
        function; `self.m`/`cls.m` the calling class's method (or the method a same-file
        base class defines); `x.m` where `x` holds an instance of a same-file class at
        `where` (a node of the calling scope, None: module level; see `InstanceTypes`),
        that class's method (`model = ActorCritic()`, then `model.train_net()`). Else []."""
        receiver, _, method = name.rpartition(".")
        if not receiver:
            return self.by_key.get((None, name), [])
        if "." in receiver or (self._class_methods is not None and method not in self._class_methods):
            return []  # (no class of the file defines `method`: no receiver's type is needed)
        if receiver in ("self", "cls"):
            return self.method_of(caller_class, method)
        instance = self.instances.class_of(receiver, where) if self.instances is not None else None
        return self.method_of(instance, method)

    def module_instances(self, where: cst.CSTNode) -> frozenset[str]:
        """Names that hold a same-file module class's instance at `where`, and their
        module attributes (`vae`, `vae.decoder` of `vae = VAE()` whose `__init__` sets
        `self.decoder = nn.Sequential(...)`): models by evidence, whatever they are called.
        The names a scope's `ModelScope` starts from; whether one value is a module is
        `SemanticModel.is_module`'s question, which reads the same class answers."""
        if self.instances is None:
            return frozenset()
        found: set[str] = set()
        for name, class_name in self.instances.typed_names(where).items():
            if class_name in self.module_classes:
                found.add(name)
                found.update(f"{name}.{attribute.removeprefix('self.')}" for attribute in self.module_attributes(class_name))
        return frozenset(found)

    def method_of(self, class_name: str | None, method: str) -> list[FunctionFacts]:
        """`method` as an instance of `class_name` finds it: in the class, else in its
        same-file bases, depth first in base order (a cycle or a base from another file ends
        the search)."""
        seen: set[str] = set()
        pending = [class_name] if class_name is not None else []
        while pending:
            current = pending.pop(0)
            if current in seen:
                continue
            seen.add(current)
            found = self.by_key.get((current, method))
            if found:
                return found
            node = self.classes.get(current)
            if node is not None:
                pending[:0] = [b for b in (dotted_name(base.value) for base in node.bases) if b in self.classes]
        return []

    def may_train_unseen(self, function: FunctionFacts, may_train: Callable[[cst.Call], bool]) -> bool:
        """Could a method call of `function`, or of a same-file function it calls, take
        gradients in code this file cannot follow? Such a call resolves to no same-file
        function and is no imported API; it may train when its method has the name of a
        same-file function that takes gradients (`agent.train_net()` on an untyped
        receiver), or, in `function` itself, when `may_train` (the asking rule's knowledge of
        its models) says so (`model.learn()` of a model built in another file)."""
        trainers = {f.node.name.value for f in self.functions.values() if f.uses_grad}
        seen: set[int] = set()
        pending = [function]
        while pending:
            current = pending.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            for call in self._find(current.node.body, cst.Call):
                assert type(call) is cst.Call
                name = dotted_name(call.func)
                resolved = self.resolve(name, current.class_name, call) if name is not None else []
                pending.extend(resolved)
                if resolved or type(call.func) is not cst.Attribute or self.imports.qualified_name(call.func):
                    continue
                if call.func.attr.value in trainers or (current is function and may_train(call)):
                    return True
        return False

    def _mark_thread_targets(self, targets: list[tuple["FunctionFacts | None", bool, str, cst.Call]]) -> bool:
        """Mark functions started as a thread's or process's target; one started under
        no_grad (there or in its caller) counts as called under no_grad: a forked process
        inherits the starting thread's grad mode. True when that changed a function."""
        changed = False
        for caller, under_no_grad, name, where in targets:
            for function in self.resolve(name, caller.class_name if caller else None, where):
                function.thread_target = True
                no_grad = under_no_grad or (caller is not None and (caller.decorated_no_grad or caller.called_under_no_grad))
                if no_grad and not function.called_under_no_grad:
                    function.called_under_no_grad = changed = True
        return changed

    def _propagate(self) -> None:
        functions = list(self.functions.values())
        for function in functions:
            function.uses_grad = function.direct_grad
        changed = True
        while changed:
            changed = False
            for function in functions:
                if not function.uses_grad and any(
                    callee.uses_grad for name in function.calls for callee in self.resolve(name, function.class_name, function.node)
                ):
                    function.uses_grad = changed = True
        flows: dict[int, str] = {}
        changed = True
        while changed:
            changed = False
            for function in functions:
                for caller, under_no_grad, call in function.call_sites:
                    no_grad = under_no_grad or (caller is not None and (caller.decorated_no_grad or caller.called_under_no_grad))
                    if no_grad and not function.called_under_no_grad:
                        function.called_under_no_grad = changed = True
                    if caller is None or function.called_from_grad_scope:
                        continue
                    if not (caller.uses_grad or caller.called_from_grad_scope):
                        continue
                    flow = flows[id(call)] if id(call) in flows else flows.setdefault(id(call), self._result_flow(caller, call))
                    if flow == DROPPED and stores_on_self(function.node):
                        flow = REACHES_SINK  # `self.forward_step(batch)` may leave its graph on self
                    if (flow == REACHES_SINK and caller.uses_grad) or (flow == RETURNED and caller.called_from_grad_scope):
                        function.called_from_grad_scope = changed = True

    def _result_flow(self, caller: FunctionFacts, call: cst.Call) -> str:
        """Where the callee's result goes in `caller`: into a gradient computation, back
        to `caller`'s own callers, or nowhere gradients are taken (a metric, a log)."""
        return result_flow(caller.node, call, lambda statement: self.uses_grad(statement, caller.class_name), self.syntax)

    # -- queries ------------------------------------------------------------------------
    def holding(self, holds: Callable[[FunctionFacts], bool]) -> list[FunctionFacts]:
        """Functions for which `holds` is true, directly or through a same-file function
        they call (transitively).

        A call the graph cannot resolve (`self.trainer.reset()`, `obj.clear()`) counts
        when some same-file function of that name holds: its receiver is unknown, so the
        answer may be yes, and a rule that stays silent on "maybe" must hear it.
        """
        functions = list(self.functions.values())
        held = {id(function) for function in functions if holds(function)}
        resolved: dict[tuple[int, str], list[FunctionFacts]] = {}  # each call resolved once, not once per round
        changed = True
        while changed:
            changed = False
            names = {function.node.name.value for function in functions if id(function) in held}
            for function in functions:
                if id(function) not in held and any(self._may_reach(name, function, held, names, resolved) for name in function.calls):
                    held.add(id(function))
                    changed = True
        return [function for function in functions if id(function) in held]

    def _may_reach(self, name: str, caller: FunctionFacts, held: set[int], names: set[str],
                   resolved: dict[tuple[int, str], list[FunctionFacts]]) -> bool:
        key = (id(caller), name)
        callees = resolved.get(key)
        if callees is None:
            callees = resolved[key] = self.resolve(name, caller.class_name, caller.node)
        if callees:
            return any(id(callee) in held for callee in callees)
        return name.rsplit(".", 1)[-1] in names

    def callee(self, name: str, caller_class: str | None = None) -> FunctionFacts | None:
        """The one same-file function a call of `name` runs: resolved as `resolve` does, or,
        for a method called on another object (`module.training_step(batch)`), the file's
        only method of that name. None when there is not exactly one."""
        found = self.resolve(name, caller_class)
        parts = name.split(".")
        if not found and parts[0] == "self" and len(parts) in (2, 3) and caller_class is not None:
            # `self.loss_fn(...)` with `self.loss_fn = YOLOLoss()` set up in `__init__`
            instance = self.attribute_class(caller_class, parts[1])
            found = self.by_key.get((instance, parts[2] if len(parts) == 3 else "__call__"), []) if instance else []
        elif not found and "." in name and parts[0] not in ("self", "cls"):
            found = self._methods_named().get(parts[-1], [])
        return found[0] if len(found) == 1 else None

    def _methods_named(self) -> dict[str, list[FunctionFacts]]:
        """Every method of the file's classes, by its name (built on first use)."""
        if self._methods is None:
            self._methods = {}
            for (owner, key), facts in self.by_key.items():
                if owner is not None:
                    self._methods.setdefault(key, []).extend(facts)
        return self._methods

    def call_count(self, function: FunctionFacts) -> int:
        """How many calls of the file may run `function`: resolved ones, and unresolved ones
        whose `callee` it is (`tracker.update(loss)` for the only method `update`)."""
        return len(function.call_sites) + sum(
            1 for caller_class, name in self.unresolved if self.callee(name, caller_class) is function
        )

    def parameter_arguments(self, function: FunctionFacts) -> list[tuple[FunctionFacts | None, cst.Call, dict[str, cst.BaseExpression]]] | None:
        """Every same-file call of a module-level function, with the argument each of its
        parameters receives there (GAP's `normalize_and_scale(delta_im, 'train')`), so an
        analysis can give a parameter what all its callers pass.

        None where a caller may be unknown or passes nothing new: no call site, a function
        passed as a callback, a call the graph could not resolve that may run it, a starred
        or unknown keyword argument, or a call under no_grad (there or in its caller).
        """
        if function.class_name is not None or not function.call_sites or function.passed_as_callback:
            return None
        name = function.node.name.value
        if function.decorated_no_grad or any(called.rsplit(".", 1)[-1] == name for _, called in self.unresolved):
            return None  # `utils.normalize(x)`, `obj.normalize(x)`: may be this function, with anything
        found = []
        for caller, under_no_grad, call in function.call_sites:
            if under_no_grad or (caller is not None and (caller.decorated_no_grad or caller.called_under_no_grad)):
                return None
            bound = bound_arguments(function, call)
            if bound is None:
                return None
            found.append((caller, call, bound))
        return found

    def attribute_class(self, class_name: str, attribute: str) -> str | None:
        """The same-file class of `self.<attribute>` when the class's `__init__` is the only
        method that sets it, to an instance of that class (`self.loss_fn = YOLOLoss()`)."""
        key = (class_name, attribute)
        if key not in self._attribute_classes:
            self._attribute_classes[key] = self._attribute_class(class_name, attribute)
        return self._attribute_classes[key]

    def _attribute_class(self, class_name: str, attribute: str) -> str | None:
        node = self.classes.get(class_name)
        if node is None:
            return None
        found: set[str | None] = set()
        for method in (s for s in node.body.body if type(s) is cst.FunctionDef):
            for assign in self._find(method, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                targets = [t.target for t in assign.targets] if type(assign) is cst.Assign else [assign.target]  # type: ignore[union-attr]
                if not any(dotted_name(t) == f"self.{attribute}" for t in targets):
                    continue
                value = assign.value  # type: ignore[union-attr]
                constructed = dotted_name(value.func) if type(value) is cst.Call else None
                ok = method.name.value == "__init__" and type(assign) is cst.Assign and constructed in self.classes
                found.add(constructed if ok else None)
        return found.pop() if len(found) == 1 else None

    def _find(self, root: cst.CSTNode, types: type | tuple[type, ...], skip: type | tuple[type, ...] = ()) -> list[cst.CSTNode]:
        return self.syntax.find(root, types, skip=skip) if self.syntax is not None else find_all(root, types, skip=skip)

    def returned_values(self, name: str, caller_class: str | None = None) -> list[cst.BaseExpression] | None:
        """What a call of `name` returns, read from the one same-file function it runs
        (`callee`): the values of its `return` statements (None when unknown: no single
        callee, a generator, or a path that falls off the end)."""
        callee = self.callee(name, caller_class)
        if callee is None or callee.yields or not callee.returned:
            return None
        body = callee.node.body
        last = body.body[-1] if type(body) is cst.IndentedBlock and body.body else None
        ends_in_return = type(body) is cst.SimpleStatementSuite or (
            type(last) is cst.SimpleStatementLine and type(last.body[-1]) is cst.Return
        )
        return list(callee.returned) if ends_in_return else None

    def bound_to_trained_returns(
        self, value: cst.BaseExpression, scope: cst.Module | cst.FunctionDef,
        backpropagated: Callable[[cst.BaseExpression, cst.CSTNode], bool],
    ) -> bool:
        """Is the name `value` bound in `scope` (nested functions aside) only to what a
        same-file helper returns, where every value the helper returns is a name it
        `backpropagated` itself (`loss = compute_td_loss(bs)` of a helper that ends in
        `loss.backward(); optimizer.step(); return loss`)? Such a value is a tracked,
        one-element loss. Any other binding of the name answers no."""
        if type(value) is not cst.Name:
            return False
        facts = self.facts(scope) if type(scope) is cst.FunctionDef else None
        body = scope.body if type(scope) is cst.FunctionDef else scope
        found = False
        for node in self._find(body, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.AsName, cst.NamedExpr),
                               skip=(cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            targets = [t.target for t in node.targets] if type(node) is cst.Assign else (
                [node.name] if type(node) is cst.AsName else [node.target]  # type: ignore[union-attr]
            )
            if not any(type(t) is cst.Name and t.value == value.value for t in targets):
                if any(type(t) in (cst.Tuple, cst.List) and value.value in {e.value.value for e in t.elements if type(e.value) is cst.Name} for t in targets):
                    return False  # `loss, acc = step(...)`: which element is what is not known here
                continue
            call = node.value if type(node) is cst.Assign and len(targets) == 1 else None
            name = dotted_name(call.func) if type(call) is cst.Call else None
            callee = self.callee(name, facts.class_name if facts else None) if name is not None else None
            if callee is None or callee.yields or not callee.returned or not all(backpropagated(r, callee.node) for r in callee.returned):
                return False
            found = True
        return found

    def assigned_attribute(self, module: cst.Module, attribute: str) -> list[cst.BaseExpression]:
        """The values assigned anywhere in the file to an attribute of that name
        (`optimizer.step = types.MethodType(dp_step, optimizer)` for "step")."""
        values: list[cst.BaseExpression] = []
        for statement in self._find(module, cst.Assign):
            assert type(statement) is cst.Assign
            if any(type(t.target) is cst.Attribute and t.target.attr.value == attribute for t in statement.targets):
                values.append(statement.value)
        return values

    def referenced_functions(self, value: cst.CSTNode) -> list[FunctionFacts]:
        """Same-file functions a value names (`types.MethodType(dp_step, opt)`, `partial(f, x)`),
        by bare name; lambdas are not functions of the graph."""
        found: list[FunctionFacts] = []
        for name in self._find(value, cst.Name):
            assert type(name) is cst.Name
            found.extend(self.by_key.get((None, name.value), []))
        return found

    def uses_grad(self, node: cst.CSTNode, class_name: str | None) -> bool:
        use = find_grad_use(node, self.imports, self.syntax)
        if use.direct:
            return True
        return any(callee.uses_grad for name in use.calls for callee in self.resolve(name, class_name, node))


def calls_under_no_grad(function: cst.FunctionDef, imports: ImportIndex, syntax: SyntaxIndex | None = None) -> frozenset[int]:
    """Ids of the calls inside `function` that run in a `with` block disabling grad (read
    off the file's index when given)."""
    find = syntax.find if syntax is not None else find_all
    quiet: set[int] = set()
    for node in find(function.body, cst.With):
        if with_disables_grad(node, imports):  # type: ignore[arg-type]
            quiet.update(id(n) for n in find(node.body, cst.Call))  # type: ignore[attr-defined]
    return frozenset(quiet)


class GraphReturns:
    """Which same-file functions return (or yield) a graph-carrying value.

    `def _forward(self, batch): return {"energy": self.model(batch)}` does; so does a
    function returning what such a function returned. A caller supplies what a forward
    pass is in a function (`forward_calls`), since that needs the role vocabulary.
    Decorated `no_grad` functions return no graph. Recursion answers "no" while a
    function is being decided, which keeps a rule that relies on "yes" silent.
    """

    def __init__(self, graph: CallGraph, forward_calls: Callable[[FunctionFacts], Callable[[cst.Call], bool]]) -> None:
        self.graph = graph
        self.forward_calls = forward_calls
        self._known: dict[int, bool] = {}

    def of_call(self, call: cst.Call, class_name: str | None) -> bool:
        """Does this call reach a same-file function that returns a graph?"""
        name = dotted_name(call.func)
        return name is not None and any(self.returns_graph(f) for f in self.graph.resolve(name, class_name, call))

    def returns_graph(self, function: FunctionFacts) -> bool:
        key = id(function.node)
        if key not in self._known:
            self._known[key] = False
            if function.returns_value and not function.decorated_no_grad:
                is_forward = self.forward_calls(function)
                # `with torch.no_grad(): loss, outputs = self.compute_loss(...)` builds no graph
                # (transformers' Trainer.prediction_step)
                quiet = calls_under_no_grad(function.node, self.graph.imports, self.graph.syntax)
                flow = graph_flow(
                    function.node,
                    self.graph.imports,
                    lambda call: id(call) not in quiet and (is_forward(call) or self.of_call(call, function.class_name)),
                    self.graph.syntax,
                )
                self._known[key] = flow.returned
        return self._known[key]


class _Collector(cst.CSTVisitor):
    """Records every function (with its grad use) and every same-file call site."""

    def __init__(self, analysis: CallGraph) -> None:
        super().__init__()
        self.analysis = analysis
        self.classes: list[tuple[str, bool]] = []
        self.functions: list[FunctionFacts] = []
        self.no_grad_depth = 0
        #: gradient evidence of the functions being visited, innermost last
        self.grad_finders: list[GradUseFinder] = []
        #: (calling function or None at module level, under no_grad there, callee name)
        self.call_sites: list[tuple[FunctionFacts | None, bool, str, cst.Call]] = []
        #: names passed as call arguments (`fn`, `model.validation_step`): maybe callbacks
        self.callbacks: set[str] = set()
        #: functions started as a thread's or process's target: (caller, under no_grad,
        #: name, the launching call); their arguments are not callbacks of unseen grad mode
        self.thread_targets: list[tuple[FunctionFacts | None, bool, str, cst.Call]] = []
        self._target_arguments: set[int] = set()

    def visit_Arg(self, node: cst.Arg) -> None:
        if id(node) in self._target_arguments:
            return
        if type(node.value) is cst.Name:
            self.callbacks.add(node.value.value)
        elif type(node.value) is cst.Attribute:
            self.callbacks.add(node.value.attr.value)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        module_like = self.analysis.class_answers.get(node.name.value) is Answer.YES
        self.classes.append((node.name.value, module_like))
        self.analysis.classes[node.name.value] = node
        lightning = self.analysis.lightning_classes
        if is_lightning_class(node, self.analysis.imports) or any(dotted_name(b.value) in lightning for b in node.bases):
            lightning.add(node.name.value)  # `class SWAResnet(LitResnet)` of `LitResnet(pl.LightningModule)`
        if module_like:
            self.analysis.module_classes.add(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.classes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        imports = self.analysis.imports
        in_class = bool(self.classes) and (not self.functions or self.functions[-1].class_name != self.classes[-1][0])
        class_name, module_like = self.classes[-1] if self.classes and in_class else (None, False)
        decorated = function_disables_grad(node, imports)
        function = FunctionFacts(
            node=node,
            class_name=class_name,
            module_like_class=module_like,
            direct_grad=False,
            calls=set(),
            decorated_no_grad=decorated,
            enclosed_no_grad=self.no_grad_depth > 0,
        )
        # Lightning's loops run its evaluation hooks under no_grad: the framework is their caller
        function.called_under_no_grad = class_name in self.analysis.lightning_classes and is_lightning_hook(node.name.value)
        # gradient evidence is gathered in this same pass (see visit_Call/visit_Attribute)
        self.grad_finders.append(GradUseFinder(imports))
        self.analysis.functions[id(node)] = function
        self.analysis.by_key.setdefault((class_name, node.name.value), []).append(function)
        self.functions.append(function)
        if decorated:
            self.no_grad_depth += 1

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        function = self.functions.pop()
        use = self.grad_finders.pop().result
        function.direct_grad = bool(use.direct)
        function.calls = use.calls
        if self.grad_finders:  # a nested function's evidence counts for its parent too
            parent = self.grad_finders[-1].result
            parent.direct.extend(use.direct)
            parent.calls |= use.calls
        if function.decorated_no_grad:
            self.no_grad_depth -= 1

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.grad_finders:
            self.grad_finders[-1].visit_Attribute(node)
            if node.attr.value in METADATA_ATTRIBUTES or node.attr.value in CUTTING_ATTRIBUTES:
                self.functions[-1].cuts = True

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if self.functions:
            self.functions[-1].cuts = True

    def visit_For(self, node: cst.For) -> None:
        if self.functions:
            self.functions[-1].loops.append(node)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        if self.functions:
            self.functions[-1].loops.append(node)

    def visit_Return(self, node: cst.Return) -> None:
        if self.functions and node.value is not None:
            self.functions[-1].returns_value = True
            self.functions[-1].returned.append(node.value)

    def visit_Yield(self, node: cst.Yield) -> None:
        if self.functions:
            self.functions[-1].returns_value = True
            self.functions[-1].yields = True

    def visit_Assign(self, node: cst.Assign) -> None:
        if self.grad_finders:
            self.grad_finders[-1].visit_Assign(node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self.grad_finders:
            self.grad_finders[-1].visit_AugAssign(node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self.grad_finders:
            self.grad_finders[-1].visit_AnnAssign(node)

    def visit_With(self, node: cst.With) -> None:
        if with_disables_grad(node, self.analysis.imports):
            self.no_grad_depth += 1

    def leave_With(self, original_node: cst.With) -> None:
        if with_disables_grad(original_node, self.analysis.imports):
            self.no_grad_depth -= 1

    def visit_Call(self, node: cst.Call) -> None:
        if self.grad_finders:
            self.grad_finders[-1].visit_Call(node)
            segment = last_segment(node.func)
            if segment in CUTTING_METHODS or segment in CUTTING_FUNCTIONS or segment in VALUE_INDEX_PAIRS:
                self.functions[-1].cuts = True
        name = dotted_name(node.func)
        if self.no_grad_depth > 0:
            self.analysis.note_no_grad_call(name, node)
        caller = self.functions[-1] if self.functions else None
        self._note_thread_target(node, caller)
        if name is None:
            return
        self.call_sites.append((caller, self.no_grad_depth > 0, name, node))

    def _note_thread_target(self, call: cst.Call, caller: FunctionFacts | None) -> None:
        """`threading.Thread(target=worker)`, `mp.spawn(run, ...)`: `worker` runs in a new
        thread or process, not as a callback of unseen grad mode."""
        where = THREAD_TARGET_LAUNCHERS.get(self.analysis.imports.qualified_name(call.func) or "")
        if where is None:
            return
        position, keyword = where
        positional = [argument for argument in call.args if argument.keyword is None and not argument.star]
        chosen = [argument for argument in call.args if argument.keyword is not None and argument.keyword.value == keyword]
        if not chosen and len(positional) > position and not any(argument.star for argument in call.args):
            chosen = [positional[position]]
        for argument in chosen:
            target = dotted_name(argument.value)
            if target is not None and target.count(".") <= 1:
                self._target_arguments.add(id(argument))
                self.thread_targets.append((caller, self.no_grad_depth > 0, target, call))


def collected_by_pytest(function: FunctionFacts, path: str) -> bool:
    """What pytest collects and runs on its own: `test*` functions of a test file (`test_*.py`,
    `*_test.py`, under `tests/`), `test*` methods of a `Test*` class; `DA_rnn.test()`, a
    module's own method, is never collected. Its caller is pytest, which trains nothing."""
    name = function.node.name.value
    if not name.startswith("test"):
        return False
    if function.class_name is not None:
        return function.class_name.startswith("Test")
    path = path.replace("\\", "/")
    file_name = path.rsplit("/", 1)[-1]
    return file_name.startswith("test_") or file_name.endswith("_test.py") or "/tests/" in f"/{path}"


def bound_arguments(function: FunctionFacts, call: cst.Call) -> dict[str, cst.BaseExpression] | None:
    """The argument each parameter of `function` receives from `call` (parameters left to
    their defaults are absent), or None when that cannot be told: a starred argument, an
    unknown keyword, more positional arguments than parameters, or a method called on
    another object than `self`/`cls` (which object is bound to `self` is not known)."""
    params = function.node.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)]
    static = any(last_segment(d.decorator) == "staticmethod" for d in function.node.decorators)
    if function.class_name is not None and positional and not static:
        receiver = call.func.value if type(call.func) is cst.Attribute else None
        if not (type(receiver) is cst.Name and receiver.value in ("self", "cls")):
            return None
        positional = positional[1:]
    keywords = {p.name.value for p in (*params.params, *params.kwonly_params)}
    bound: dict[str, cst.BaseExpression] = {}
    for index, argument in enumerate(call.args):
        name = argument.keyword.value if argument.keyword is not None else (
            positional[index] if index < len(positional) else None
        )
        if argument.star or name is None or (argument.keyword is not None and name not in keywords):
            return None
        bound[name] = argument.value
    return bound
