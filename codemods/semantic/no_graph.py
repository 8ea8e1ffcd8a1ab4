"""Values that certainly carry no autograd graph, wherever they come from in the file.

`grad_free` answers for one expression as written (a factory call, `.data`, a loader
batch); `graphflow` follows graph-carrying values forward from forward passes. This
module answers the converse question for a *name*: can any value it ever holds carry a
graph? That is what a retaining backward needs to know of a value carried from the
previous iteration (`prev = topk(out, 1)[1]`, then `prev = _mask(prev)` returning
`.data`): if it holds no graph, the next pass cannot backpropagate into the last one.

Evidence only, flow-insensitively: every binding of the name in its scope must make a
value without a graph; a parameter must receive one at every same-file call (none
hidden behind `*args`, callbacks or calls the call graph cannot resolve); a module
global must be bound only at the top level. Integer indices (`argmax`, topk's `[1]`),
cuts (`.data`, `.detach()`, `.item()`, `float()`), fresh factories, literals, and
operations of such values qualify; so does a call of a same-file function whose every
`return` qualifies. Anything else is "may carry one".
"""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.semantic.callgraph import CallGraph, FunctionFacts, bound_arguments
from autograd_fix.codemods.semantic.grad_free import CONVERSIONS, fresh_factory
from autograd_fix.codemods.semantic.graphflow import CUTTING_FUNCTIONS, CUTTING_METHODS, METADATA_ATTRIBUTES
from autograd_fix.codemods.semantic.inplace import is_inplace_call
from autograd_fix.codemods.semantic.loops import Binding, all_nodes, bindings, declared_global

#: calls returning `(values, indices)` whatever their arguments
_ALWAYS_PAIRS = frozenset({"topk", "sort", "kthvalue", "mode"})
#: calls returning `(values, indices)` only when given a dimension (`x.max(1)`, not `torch.max(a, b)`)
_PAIRS_WITH_DIM = frozenset({"max", "min", "median", "nanmedian"})
#: torch namespaces whose calls make parameters, modules or gradients, not plain results
_NOT_PLAIN = ("torch.nn.", "torch.autograd.", "torch.func.", "torch.distributions.")
#: tensor methods whose first argument is a boolean mask, which carries no gradient
_MASKED = frozenset({"masked_fill", "masked_fill_"})


class NoGraph:
    """Which names and expressions of one file certainly carry no graph (see the module doc).

    Built lazily by `SemanticModel.no_graph`; answers are cached per (scope, name).
    """

    def __init__(self, module: cst.Module, imports: ImportIndex, graph: CallGraph) -> None:
        self.module = module
        self.imports = imports
        self.graph = graph
        self._bindings: dict[int, dict[str, list[Binding]]] = {}
        self._answers: dict[tuple[int, str, frozenset[str]], bool] = {}
        self._pending: set[tuple[int, str]] = set()
        self._assumed = False
        self._top_level: set[int] | None = None
        self._declared_global: set[str] | None = None
        self._mutated: dict[int, set[str]] = {}

    # -- names ---------------------------------------------------------------------
    def name(self, name: str, scope: cst.FunctionDef | cst.Module, trusted: frozenset[str] = frozenset()) -> bool:
        """Can no value `name` holds in `scope` carry a graph? `trusted` names of `scope`
        count as graph-free (the caller's own evidence, e.g. loop targets over a loader)."""
        if name in trusted or name in {"True", "False", "None"}:
            return True
        key = (id(scope), name, trusted)
        if key in self._answers:
            return self._answers[key]
        if (id(scope), name) in self._pending:
            self._assumed = True  # a cycle (`x = x.view(-1)`): assume, confirmed by the others
            return True
        outer = self._assumed
        self._assumed = False
        self._pending.add((id(scope), name))
        try:
            answer = self._name(name, scope, trusted)
        finally:
            self._pending.discard((id(scope), name))
        if not answer or not self._assumed or not self._pending:
            self._answers[key] = answer  # "no" never rests on an assumption; "yes" may
        self._assumed = outer or self._assumed
        return answer

    def _name(self, name: str, scope: cst.FunctionDef | cst.Module, trusted: frozenset[str]) -> bool:
        if type(scope) is cst.FunctionDef and name in declared_global(scope):
            return self.name(name, self.module)
        if name in self._mutated_in(scope):
            return False  # `prev.add_(out)`, `prev[0] = out`: a graph can enter in place
        found = self._scope_bindings(scope).get(name, [])
        if type(scope) is cst.Module:
            return bool(found) and name not in self._globals_declared() and self._bindings_free(found, scope, trusted)
        if name in _param_names(scope):
            return self._param(name, scope) and self._bindings_free(found, scope, trusted)
        if found:
            return self._bindings_free(found, scope, trusted)
        return id(scope) in self._top_level_functions() and self.name(name, self.module)

    def _bindings_free(self, found: list[Binding], scope: cst.FunctionDef | cst.Module, trusted: frozenset[str]) -> bool:
        for binding in found:
            if binding.value is None or binding.kind not in {"assign", "annassign", "augassign"}:
                return False
            if type(binding.value) in (cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp):
                return False  # a container that later code may fill with anything
            value = _bound_part(binding)
            if value is None:
                if not _index_of_pair(binding, self.imports) and not self._unpacked_free(binding, scope):
                    return False
            elif not self.expression(value, scope, trusted):
                return False
        return True

    def _unpacked_free(self, binding: Binding, scope: cst.FunctionDef | cst.Module) -> bool:
        """`s, a, h = self.make_batch()`: the name is one element unpacked from a call of a
        same-file function whose every `return` is a tuple display of that length, and the
        element it receives holds no graph where that `return` stands (`return s, a, h_lst[0]`
        after `s, a = torch.tensor(s_lst), torch.tensor(a_lst)`)."""
        statement, call = binding.statement, binding.value
        if type(statement) is not cst.Assign or len(statement.targets) != 1 or type(call) is not cst.Call:
            return False
        target = statement.targets[0].target
        if type(target) not in (cst.Tuple, cst.List) or any(type(e) is cst.StarredElement for e in target.elements):
            return False
        names = [e.value.value if type(e.value) is cst.Name else None for e in target.elements]
        name = dotted_name(call.func)
        if binding.name not in names or name is None or any(arg.star for arg in call.args):
            return False
        if "." in name and not name.startswith(("self.", "cls.")):
            return False  # `obj.method()`: which class's method runs is not known
        caller = self.graph.facts(scope) if type(scope) is cst.FunctionDef else None
        callee = self.graph.callee(name, caller.class_name if caller else None)
        returned = self.graph.returned_values(name, caller.class_name if caller else None)
        if callee is None or returned is None:
            return False
        index = names.index(binding.name)
        for value in returned:
            if type(value) not in (cst.Tuple, cst.List) or len(value.elements) != len(names):
                return False
            element = value.elements[index]
            if type(element) is cst.StarredElement or not self._free_at_return(element.value, value, callee.node):
                return False
        return True

    def _free_at_return(self, element: cst.BaseExpression, returned: cst.BaseExpression, function: cst.FunctionDef) -> bool:
        """Does `element`, read by the `return` of `returned` (a statement of the function's
        body, not nested), hold no graph? A name there holds what the nearest statement
        before the `return` that binds it made, when that is a plain assignment; elsewhere
        every binding in the function counts (`name`)."""
        if type(element) is not cst.Name or element.value in self._mutated_in(function):
            return self.expression(element, function)
        body = function.body.body if type(function.body) is cst.IndentedBlock else []
        at = next((i for i, statement in enumerate(body) if type(statement) is cst.SimpleStatementLine
                   and any(type(small) is cst.Return and small.value is returned for small in statement.body)), None)
        if at is None:
            return self.expression(element, function)
        for statement in reversed(body[:at]):
            found = [b for b in bindings(statement) if b.name == element.value]
            if not found:
                continue
            if type(statement) is not cst.SimpleStatementLine or len(found) != 1 or found[0].kind != "assign":
                break
            part = _bound_part(found[0])
            return part is not None and self.expression(part, function)
        return self.expression(element, function)

    def _param(self, name: str, function: cst.FunctionDef) -> bool:
        """Every same-file call passes a graph-free value (or leaves a graph-free default)."""
        facts = self.graph.facts(function)
        if facts is None or not facts.call_sites or facts.passed_as_callback or self.graph.call_count(facts) != len(facts.call_sites):
            return False
        if any(dotted_name(d.decorator) != "staticmethod" for d in function.decorators):
            return False
        if any(callee.rsplit(".", 1)[-1] == function.name.value for _, callee in self.graph.unresolved):
            return False  # `other.step(...)`: a call of this name the graph could not tie to a function
        for caller, _, call in facts.call_sites:
            passed = _argument_for(name, function, facts, call)
            if passed is None:
                return False
            scope: cst.FunctionDef | cst.Module = caller.node if caller is not None else self.module
            if passed is _DEFAULT:
                default = _default_of(name, function)
                if default is None or not self.expression(default, self.module):
                    return False
            elif not self.expression(passed, scope):
                return False
        return True

    # -- expressions -----------------------------------------------------------------
    def expression(self, node: cst.BaseExpression, scope: cst.FunctionDef | cst.Module, trusted: frozenset[str] = frozenset()) -> bool:
        """Does `node`, evaluated in `scope`, certainly carry no graph?"""
        def free(child: cst.BaseExpression) -> bool:
            return self.expression(child, scope, trusted)

        if type(node) in (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
                             cst.FormattedString, cst.Comparison):
            return True
        if type(node) is cst.Name:
            return self.name(node.value, scope, trusted)
        if type(node) is cst.Attribute:
            if node.attr.value == "data" or node.attr.value in METADATA_ATTRIBUTES:
                return True
            if (self.imports.qualified_name(node) or "").startswith("torch."):
                return True  # `torch.float`, `torch.FloatTensor`: dtypes and classes of torch
            if node.attr.value == "indices" and _pair_call(node.value, self.imports):
                return True
            return not _is_self(node.value) and free(node.value)
        if type(node) is cst.Subscript:
            if _pair_call(node.value, self.imports) and _second_item(node):
                return True
            return free(node.value)
        if type(node) is cst.Call:
            return self._call(node, scope, free)
        if type(node) is cst.UnaryOperation:
            return type(node.operator) is cst.Not or free(node.expression)
        if type(node) in (cst.BinaryOperation, cst.BooleanOperation):
            return free(node.left) and free(node.right)
        if type(node) is cst.IfExp:
            return free(node.body) and free(node.orelse)
        if type(node) in (cst.Tuple, cst.List):
            return all(type(e) is not cst.StarredElement and free(e.value) for e in node.elements)
        return False

    def _call(self, call: cst.Call, scope: cst.FunctionDef | cst.Module, free) -> bool:  # type: ignore[no-untyped-def]
        if any(arg.star for arg in call.args):
            return False
        if fresh_factory(call, self.imports):
            return True
        qualified = self.imports.qualified_name(call.func)
        if (qualified or dotted_name(call.func)) in CUTTING_FUNCTIONS:
            return True
        if any(arg.keyword is not None and arg.keyword.value == "requires_grad" for arg in call.args):
            return False
        if qualified is not None:
            plain = qualified.startswith("torch.") and not qualified.startswith(_NOT_PLAIN)
            kept = call.args[:1] if qualified.rsplit(".", 1)[-1] in CONVERSIONS else call.args
            return plain and bool(call.args) and all(free(arg.value) for arg in kept)
        if type(call.func) is cst.Attribute:
            method = call.func.attr.value
            if method in CUTTING_METHODS:
                return True
            if method.startswith("requires_grad") or _is_self(call.func.value) or not free(call.func.value):
                return self._same_file(call, scope)
            if method in CONVERSIONS:
                return True  # shapes, dtypes and devices are not values that flow
            values = call.args[1:] if method in _MASKED else call.args
            return all(free(arg.value) for arg in values)
        return self._same_file(call, scope)

    def _same_file(self, call: cst.Call, scope: cst.FunctionDef | cst.Module) -> bool:
        """A call of a same-file function whose every `return` holds no graph."""
        name = dotted_name(call.func)
        if name is None or ("." in name and not name.startswith(("self.", "cls."))):
            return False  # `obj.method()`: which class's method runs is not known
        if "." not in name and (name in self._scope_bindings(scope) or (type(scope) is cst.FunctionDef and name in _param_names(scope))):
            return False  # a local or a parameter of that name, not the file's function
        caller = self.graph.facts(scope) if type(scope) is cst.FunctionDef else None
        callee = self.graph.callee(name, caller.class_name if caller else None)
        returned = self.graph.returned_values(name, caller.class_name if caller else None)
        if callee is None or returned is None:
            return False
        return all(self.expression(value, callee.node) for value in returned)

    # -- lazily built file facts -----------------------------------------------------
    def _scope_bindings(self, scope: cst.CSTNode) -> dict[str, list[Binding]]:
        if id(scope) not in self._bindings:
            table: dict[str, list[Binding]] = {}
            for binding in bindings(scope):
                table.setdefault(binding.name, []).append(binding)
            # comprehension targets and lambda parameters shadow a name where a call reads it
            for node in all_nodes(scope, (cst.CompFor, cst.Lambda)):
                targets = [node.target] if type(node) is cst.CompFor else [p.name for p in node.params.params]  # type: ignore[union-attr]
                for target in targets:
                    for name in all_nodes(target, cst.Name):
                        table.setdefault(name.value, []).append(Binding(name.value, "comprehension", node))  # type: ignore[union-attr]
            self._bindings[id(scope)] = table
        return self._bindings[id(scope)]

    def _mutated_in(self, scope: cst.CSTNode) -> set[str]:
        """Names of `scope` whose value may be changed in place by something that is not a
        constant (an in-place method, an item or attribute store, `out=`, `requires_grad`),
        directly or through an alias or view bound in the scope (`v = prev.view(-1)`)."""
        if id(scope) not in self._mutated:
            roots = _mutated_roots(scope, self.imports)
            links = [(b.name, _alias_root(b.value)) for found in self._scope_bindings(scope).values() for b in found
                     if b.kind == "assign" and b.value is not None]
            changed = True
            while changed:
                changed = False
                for name, root in links:
                    if root is not None and (name in roots) != (root in roots):
                        roots |= {name, root}
                        changed = True
            self._mutated[id(scope)] = roots
        return self._mutated[id(scope)]

    def _top_level_functions(self) -> set[int]:
        """Functions whose free names are the module's globals: top-level ones and methods
        of top-level classes (a nested function may read its enclosing function's names)."""
        if self._top_level is None:
            self._top_level = {id(node) for node in _top_level_defs(self.module)}
        return self._top_level

    def _globals_declared(self) -> set[str]:
        """Names some function of the file declares `global` (rebound from inside it)."""
        if self._declared_global is None:
            self._declared_global = set()
            for node in all_nodes(self.module, cst.Global):
                assert type(node) is cst.Global
                self._declared_global.update(item.name.value for item in node.names)
        return self._declared_global


_DEFAULT = cst.Name("__default__")


def _top_level_defs(module: cst.Module) -> Iterator[cst.FunctionDef]:
    for statement in module.body:
        if type(statement) is cst.FunctionDef:
            yield statement
        elif type(statement) is cst.ClassDef and type(statement.body) is cst.IndentedBlock:
            yield from (s for s in statement.body.body if type(s) is cst.FunctionDef)


def _param_names(function: cst.FunctionDef) -> set[str]:
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    every += [p for p in (params.star_arg, params.star_kwarg) if type(p) is cst.Param]
    return {p.name.value for p in every}


def _argument_for(name: str, function: cst.FunctionDef, facts: FunctionFacts, call: cst.Call) -> cst.BaseExpression | None:
    """The expression `call` passes for parameter `name` (`_DEFAULT` when left to its
    default), None when it cannot tell (`*args`, a `**kwargs` parameter, a starred
    argument: see `bound_arguments`)."""
    params = function.params
    if any(type(p) is cst.Param and p.name.value == name for p in (params.star_arg, params.star_kwarg)):
        return None
    bound = bound_arguments(facts, call)
    if bound is None:
        return None
    return bound.get(name, _DEFAULT)


def _default_of(name: str, function: cst.FunctionDef) -> cst.BaseExpression | None:
    params = function.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value == name:
            return param.default
    return None


def _mutated_roots(scope: cst.CSTNode, imports: ImportIndex) -> set[str]:
    """Root names of in-place changes in `scope` whose new contents are not constants."""
    roots: set[str] = set()
    for call in all_nodes(scope, cst.Call):
        assert type(call) is cst.Call
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "out":
                roots |= _root_names(arg.value)
        func = call.func
        if type(func) is not cst.Attribute or imports.qualified_name(func) is not None or _through_cut(func.value):
            continue
        method = func.attr.value
        if method == "requires_grad_":  # no value changes, but the tensor now takes a graph
            roots |= _root_names(func.value)
            continue
        if not is_inplace_call(call, imports).possible:
            continue
        values = call.args[1:] if method in _MASKED else call.args
        if not all(_constant(arg.value) for arg in values):
            roots |= _root_names(func.value)
    for node in all_nodes(scope, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
        targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]  # type: ignore[union-attr]
        for target in targets:
            if type(target) in (cst.Subscript, cst.Attribute) and not _through_cut(target):
                constant = node.value is not None and _constant(node.value)  # type: ignore[union-attr]
                if not constant or (type(target) is cst.Attribute and target.attr.value == "requires_grad"):
                    roots |= _root_names(target) - {"self", "cls"}
    return roots


def _root_names(node: cst.BaseExpression) -> set[str]:
    while type(node) in (cst.Attribute, cst.Subscript) or (type(node) is cst.Call and type(node.func) is cst.Attribute):
        node = node.func.value if type(node) is cst.Call else node.value  # type: ignore[union-attr]
    return {node.value} if type(node) is cst.Name else set()


def _alias_root(value: cst.BaseExpression) -> str | None:
    """`b` for `b`, `b[0]`, `b.x`, `b.view(-1)`: a value that may share `b`'s storage."""
    if _through_cut(value):
        return None
    roots = _root_names(value)
    return roots.pop() if roots else None


def _through_cut(node: cst.BaseExpression) -> bool:
    """`x.data.add_()`, `x.detach()[0] = y`: a change of a detached alias, not of `x`'s graph."""
    while True:
        if type(node) is cst.Attribute:
            if node.attr.value == "data":
                return True
            node = node.value
        elif type(node) is cst.Subscript:
            node = node.value
        elif type(node) is cst.Call and type(node.func) is cst.Attribute:
            if node.func.attr.value == "detach":
                return True
            node = node.func.value
        else:
            return False


def _constant(node: cst.BaseExpression) -> bool:
    if type(node) is cst.UnaryOperation:
        return _constant(node.expression)
    return type(node) in (cst.Integer, cst.Float, cst.Imaginary) or (
        type(node) is cst.Name and node.value in {"True", "False", "None"}
    )


def _is_self(node: cst.BaseExpression) -> bool:
    return type(node) is cst.Name and node.value in {"self", "cls"}


def _second_item(node: cst.Subscript) -> bool:
    """`pair[1]`: the indices of a `(values, indices)` pair."""
    if len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index:
        return False
    index = node.slice[0].slice.value
    return type(index) is cst.Integer and index.value == "1"


def _bound_part(binding: Binding) -> cst.BaseExpression | None:
    """The part of the assigned value that `binding.name` receives: the whole value for a
    plain target, the matching element when a tuple is unpacked from a tuple display; None
    when the name is one element unpacked from a call (`_, idx = x.topk(1)`)."""
    statement, value = binding.statement, binding.value
    assert value is not None
    if type(binding.statement) is cst.AugAssign:
        return cst.BinaryOperation(left=cst.Name(binding.name), operator=cst.Add(), right=value)
    targets = [t.target for t in statement.targets] if type(statement) is cst.Assign else [statement.target]  # type: ignore[attr-defined]
    for target in targets:
        if type(target) is cst.Name and target.value == binding.name:
            return value
        if type(target) in (cst.Tuple, cst.List):
            names = [e.value.value if type(e.value) is cst.Name else None for e in target.elements]
            if binding.name not in names or any(type(e) is cst.StarredElement for e in target.elements):
                continue
            if type(value) in (cst.Tuple, cst.List) and len(value.elements) == len(names):
                return value.elements[names.index(binding.name)].value
            return None
    return value


def _index_of_pair(binding: Binding, imports: ImportIndex) -> bool:
    """`values, indices = x.topk(k)`: `binding` binds the second of the pair."""
    statement = binding.statement
    if type(statement) is not cst.Assign or len(statement.targets) != 1:
        return False
    target = statement.targets[0].target
    if type(target) not in (cst.Tuple, cst.List) or len(target.elements) != 2:
        return False
    second = target.elements[1].value
    return type(second) is cst.Name and second.value == binding.name and _pair_call(statement.value, imports)


def _pair_call(node: cst.BaseExpression, imports: ImportIndex) -> bool:
    """`torch.topk(x, k)`, `x.max(dim=1)`, `x.max(1)`: a call returning `(values, indices)`
    (`torch.max(a, b)` is an elementwise maximum, not a pair)."""
    if type(node) is not cst.Call or any(arg.star for arg in node.args):
        return False
    qualified = imports.qualified_name(node.func)
    if qualified is not None:
        if not qualified.startswith("torch."):
            return False
        method, given = qualified.rsplit(".", 1)[-1], node.args[1:]
    elif type(node.func) is cst.Attribute:
        method, given = node.func.attr.value, node.args
    else:
        return False
    if method in _ALWAYS_PAIRS:
        return True
    if method not in _PAIRS_WITH_DIM:
        return False
    if any(arg.keyword is not None and arg.keyword.value == "dim" for arg in given):
        return True
    return bool(given) and given[0].keyword is None and type(given[0].value) in (cst.Integer, cst.UnaryOperation)
