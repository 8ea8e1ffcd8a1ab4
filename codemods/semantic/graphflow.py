"""Graph-carrying values inside one function, and whether any of them leaves it.

A forward pass under enabled grad makes values that carry an autograd graph. They stop
carrying it through `.item()`, `.detach()`, `.data`, `.argmax()`, comparisons and integer casts,
and the indices of `max(dim)` / `topk` / `sort` never carried one. When no graph-carrying
value is returned, yielded or stored where the caller can see it, the graph dies with the
call: nobody can backpropagate through it, so the forward is an evaluation pass whatever
the function is called.

The answer is flow-insensitive (a name is graph-carrying if any assignment to it makes it
so) and over-approximates what escapes: it errs towards "carries a graph" and "escapes",
which keeps a rule that relies on it silent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Container

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.torch_api import DISTRIBUTION_SAMPLING_METHODS, DISTRIBUTIONS_PACKAGE
from autograd_fix.codemods.walk import SyntaxIndex, iter_children, iter_descendants, node_types_of

#: methods whose result holds no graph, whatever the receiver
CUTTING_METHODS = frozenset(
    {"item", "tolist", "numpy", "detach", "detach_", "argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt",
     "ge", "size", "dim", "numel", "long", "int", "bool", "byte", "nonzero", "isnan", "isinf", "isfinite",
     "data_ptr", "stride", "equal", "allclose"}
)
#: functions (builtins and torch's) whose result holds no graph
CUTTING_FUNCTIONS = frozenset(
    {"float", "int", "bool", "len", "str", "repr", "round", "isinstance", "print", "torch.argmax", "torch.argmin",
     "torch.argsort", "torch.eq", "torch.ne", "torch.isnan", "torch.isinf", "torch.isfinite", "torch.equal",
     "torch.allclose", "torch.zeros_like", "torch.ones_like", "torch.empty_like", "torch.randn_like",
     "torch.rand_like", "torch.full_like"}
)
#: `values, indices = x.max(dim)`: only the first of the pair can carry a graph
VALUE_INDEX_PAIRS = frozenset({"max", "min", "topk", "sort", "kthvalue", "mode", "median"})
#: attributes that read a tensor cut from its graph (`gen_imgs.data`, like `.detach()`)
CUTTING_ATTRIBUTES = frozenset({"data"})
#: attributes that are metadata, not tensors
METADATA_ATTRIBUTES = frozenset(
    {"shape", "dtype", "device", "requires_grad", "is_leaf", "ndim", "is_cuda", "layout", "names", "grad_fn"}
)
#: calls that make a new, empty or copied, container
_NEW_CONTAINERS = frozenset({"list", "dict", "set", "tuple", "defaultdict", "OrderedDict", "deque", "Counter"})
#: calls that put a value into their receiver
STORING_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "put", "put_nowait",
                              "push", "appendleft", "copy_", "__setitem__"})


@dataclass
class GraphFlow:
    """What became of the graph-carrying values a function made."""

    #: some value in the function carries a graph (a source call ran)
    built: bool = False
    #: a graph-carrying value is returned or yielded
    returned: bool = False
    #: statements that store a graph-carrying value where the caller can see it
    escapes: list[cst.CSTNode] = field(default_factory=list)


def graph_flow(
    function: cst.FunctionDef, imports: ImportIndex, is_source: Callable[[cst.Call], bool], syntax: SyntaxIndex | None = None
) -> GraphFlow:
    """Follow the values made by `is_source` calls (forward passes) through `function`.

    A source call that is a statement of its own (its result dropped) makes nothing.
    `syntax`: the file's index, to read the function's nodes off (a walk without it).
    """
    return _GraphFlowAnalysis(function, imports, is_source, syntax).run()


_NESTED_SCOPES = node_types_of((cst.FunctionDef, cst.ClassDef, cst.Lambda))
#: the only nodes `_bind`, `_targets_of` and `_check_exit` act on (the fixed point loop
#: and the exit checks visit these alone, not every node of the function, each time)
_BINDING_NODES = node_types_of((cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.WithItem,
                                cst.NamedExpr, cst.Call))
_EXIT_NODES = node_types_of((cst.Return, cst.Yield, cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Call))


def _prune(node: cst.CSTNode) -> bool:
    return type(node) in _NESTED_SCOPES


class _GraphFlowAnalysis:
    def __init__(self, function: cst.FunctionDef, imports: ImportIndex, is_source: Callable[[cst.Call], bool],
                 syntax: SyntaxIndex | None = None) -> None:
        self.function = function
        self.imports = imports
        descendants = syntax.descendants if syntax is not None else iter_descendants
        self.nodes = [node for node in descendants(function.body, _prune) if node is not function.body]
        self.binding = [node for node in self.nodes if type(node) in _BINDING_NODES]
        # a call whose result is dropped (`self.head.reset(n)`, `self.ema.update(model)`,
        # a forward run for its hooks) makes no value this function could cut
        # (exact type tests below: these node classes have no subclasses)
        dropped = {id(node.value) for node in self.nodes if type(node) is cst.Expr}
        self.is_source = lambda call: id(call) not in dropped and is_source(call)
        self.locals = self._local_names()
        self.tainted: set[str] = set()
        self.result = GraphFlow()

    def _local_names(self) -> set[str]:
        names: set[str] = set()
        for node in self.binding:
            for target in _targets_of(node):
                names |= _bound_names(target)
        params = {param.name.value for param in _all_params(self.function.params)}
        return names - params

    def run(self) -> GraphFlow:
        if any(type(node) is cst.Global or type(node) is cst.Nonlocal for node in self.nodes):
            self.result.escapes.append(self.function)  # module state: fail closed
        if any(type(node) is cst.FunctionDef or _registers_hook(node) for node in self.nodes):
            # a nested function or a hook can capture activations this analysis does not see
            self.result.escapes.append(self.function)
        changed = True
        while changed:
            before = len(self.tainted)
            for node in self.binding:
                self._bind(node)
            changed = len(self.tainted) != before
        self.result.built = any(type(node) is cst.Call and self.is_source(node) for node in self.nodes)
        self.fresh = self._fresh_locals()
        for node in self.nodes:
            if type(node) in _EXIT_NODES:
                self._check_exit(node)
        return self.result

    def _fresh_locals(self) -> set[str]:
        """Locals that only ever hold objects made here: `[]`, `dict()`, a new tensor.

        `self = rref.local_value()` or `for buffer in self.buffers` alias objects the
        caller sees: storing into them is an escape.
        """
        stale: set[str] = set()
        for node in self.binding:
            for target in _targets_of(node):
                value = getattr(node, "value", None)
                single = type(target) is cst.Name and type(node) in (cst.Assign, cst.AnnAssign, cst.AugAssign)
                if not (single and value is not None and self._makes_new(value)):
                    stale |= _bound_names(target)
        return self.locals - stale

    def _makes_new(self, value: cst.BaseExpression) -> bool:
        if type(value) in (cst.List, cst.Dict, cst.Set, cst.Tuple, cst.ListComp, cst.DictComp, cst.SetComp,
                              cst.GeneratorExp, cst.BinaryOperation, cst.Integer, cst.Float, cst.SimpleString,
                              cst.FormattedString, cst.ConcatenatedString):
            return True
        if type(value) is cst.Call:
            callee = value.func.value if type(value.func) is cst.Name else (
                value.func.attr.value if type(value.func) is cst.Attribute else ""
            )
            return callee in _NEW_CONTAINERS or self.carries(value)
        return False

    # -- binding ----------------------------------------------------------------------
    def _bind(self, node: cst.CSTNode) -> None:
        if type(node) is cst.Assign:
            for target in node.targets:
                self._assign(target.target, node.value)
        elif type(node) in (cst.AugAssign, cst.AnnAssign) and node.value is not None:
            if type(node) is cst.AugAssign and self.carries(node.target):
                return
            self._assign(node.target, node.value)
        elif type(node) in (cst.For, cst.CompFor):
            self._assign(node.target, node.iter)
        elif type(node) is cst.WithItem and node.asname is not None:
            self._assign(node.asname.name, node.item)
        elif type(node) is cst.NamedExpr:
            self._assign(node.target, node.value)
        elif type(node) is cst.Call and type(node.func) is cst.Attribute:
            # `outputs.append(logits)`: the local container now holds a graph
            if node.func.attr.value in STORING_METHODS and any(self.carries(arg.value) for arg in node.args):
                root = _root_name(node.func.value)
                if root is not None and root in self.locals:
                    self.tainted.add(root)

    def _assign(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if type(target) in (cst.Tuple, cst.List) and self._value_index_pair(value):
            elements = [element.value for element in target.elements]
            if len(elements) == 2:
                self._assign_taint(elements[0], self.carries(value))
                return
        self._assign_taint(target, self.carries(value))

    def _assign_taint(self, target: cst.BaseExpression, carries: bool) -> None:
        if not carries:
            return
        if type(target) is cst.Name:
            self.tainted.add(target.value)
        elif type(target) in (cst.Tuple, cst.List):
            for element in target.elements:
                self._assign_taint(element.value, carries)
        elif type(target) is cst.StarredElement:
            self._assign_taint(target.value, carries)
        elif type(target) in (cst.Attribute, cst.Subscript):
            root = _root_name(target)
            if root is not None and root in self.locals:
                self.tainted.add(root)

    def _value_index_pair(self, value: cst.BaseExpression) -> bool:
        if type(value) is not cst.Call:
            return False
        qualified = self.imports.qualified_name(value.func) or ""
        if qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in VALUE_INDEX_PAIRS:
            return True
        return type(value.func) is cst.Attribute and value.func.attr.value in VALUE_INDEX_PAIRS and bool(value.args)

    def carries(self, node: cst.CSTNode) -> bool:
        return expression_carries(node, self.tainted, self.imports, self.is_source)

    # -- does a graph leave the function? ----------------------------------------------
    def _check_exit(self, node: cst.CSTNode) -> None:
        if type(node) in (cst.Return, cst.Yield) and node.value is not None:
            value = node.value
            if type(value) is cst.From:
                value = value.item
            if self.carries(value):
                self.result.returned = True
        elif type(node) in (cst.Assign, cst.AugAssign, cst.AnnAssign) and node.value is not None:
            targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
            if self.carries(node.value) and any(self._stores_outside(target) for target in targets):
                self.result.escapes.append(node)
        elif type(node) is cst.Call and type(node.func) is cst.Attribute and not self.is_source(node):
            receiver = node.func.value
            storing = node.func.attr.value in STORING_METHODS
            if self.imports.qualified_name(node.func) is not None or (self.carries(receiver) and not storing):
                return  # `torch.cat(...)`, `F.relu(...)`, `h.mul(...)`: a new value, not a store
            root = _root_name(receiver)
            if (root is None or root not in self.fresh) and any(self.carries(arg.value) for arg in node.args):
                self.result.escapes.append(node)  # `self.cache.append(out)`, `writer.add(out)`

    def _stores_outside(self, target: cst.BaseExpression) -> bool:
        if type(target) in (cst.Tuple, cst.List):
            return any(self._stores_outside(element.value) for element in target.elements)
        if type(target) is cst.StarredElement:
            return self._stores_outside(target.value)
        if type(target) in (cst.Attribute, cst.Subscript):
            root = _root_name(target)
            return root is None or root not in self.fresh
        return False


def _no_source(call: cst.Call) -> bool:
    return False


def expression_carries(
    node: cst.CSTNode, tainted: set[str], imports: ImportIndex, is_source: Callable[[cst.Call], bool] = _no_source,
    distributions: Container[str] = frozenset(),
) -> bool:
    """Does the expression carry a graph, given the graph-carrying names `tainted` and the
    calls that make a new graph (`is_source`)? Cuts (`.item()`, `.detach()`, `argmax`,
    comparisons, metadata such as `.shape`, a `torch.distributions` object's `sample()`,
    of a constructor call or of one of the names `distributions`) stop it; any other
    operation passes it on."""
    def carries(child: cst.CSTNode) -> bool:
        return expression_carries(child, tainted, imports, is_source, distributions)

    if type(node) is cst.Name:
        return node.value in tainted
    if type(node) is cst.Call:
        if is_source(node):
            return True
        if draws_sample(node, imports, distributions):
            return False
        qualified = imports.qualified_name(node.func)
        name = qualified or (node.func.value if type(node.func) is cst.Name else None)
        if name in CUTTING_FUNCTIONS:
            return False
        if type(node.func) is cst.Attribute:
            if node.func.attr.value in CUTTING_METHODS:
                return False
            if carries(node.func.value):
                return True
        return any(carries(argument.value) for argument in node.args)
    if type(node) is cst.Attribute:
        return node.attr.value not in METADATA_ATTRIBUTES | CUTTING_ATTRIBUTES and carries(node.value)
    if type(node) in (cst.Comparison, cst.FormattedString, cst.Lambda, cst.SimpleString, cst.Integer,
                         cst.Float, cst.Imaginary, cst.ConcatenatedString):
        return False
    if type(node) is cst.Subscript:
        return carries(node.value)
    return any(carries(child) for child in iter_children(node))


def draws_sample(call: cst.Call, imports: ImportIndex, distributions: Container[str] = frozenset()) -> bool:
    """`Normal(mu, std).sample()`, `dist.sample()` of a name in `distributions`: a draw made
    under no_grad, which holds no graph."""
    func = call.func
    if type(func) is not cst.Attribute or func.attr.value not in DISTRIBUTION_SAMPLING_METHODS:
        return False
    receiver = func.value
    if type(receiver) is cst.Name:
        return receiver.value in distributions
    return type(receiver) is cst.Call and makes_distribution(receiver, imports)


def makes_distribution(value: cst.BaseExpression, imports: ImportIndex) -> bool:
    """A call of a `torch.distributions` class (`Normal(mu, std)`, `D.Categorical(p)`)."""
    return type(value) is cst.Call and (imports.qualified_name(value.func) or "").startswith(DISTRIBUTIONS_PACKAGE)


def _registers_hook(node: cst.CSTNode) -> bool:
    """`model.register_forward_hook(save)`, `t.register_hook(fn)`."""
    if not (type(node) is cst.Call and type(node.func) is cst.Attribute):
        return False
    method = node.func.attr.value
    return method.startswith("register_") and "hook" in method


def _targets_of(node: cst.CSTNode) -> list[cst.BaseExpression]:
    if type(node) is cst.Assign:
        return [target.target for target in node.targets]
    if type(node) in (cst.AugAssign, cst.AnnAssign, cst.NamedExpr):
        return [node.target]
    if type(node) in (cst.For, cst.CompFor):
        return [node.target]
    if type(node) is cst.WithItem and node.asname is not None:
        return [node.asname.name]
    return []


def _bound_names(target: cst.BaseExpression) -> set[str]:
    """Names a target binds: `x`, `a, (b, *c)`; `self.x` and `d[k]` bind none."""
    if type(target) is cst.Name:
        return {target.value}
    if type(target) in (cst.Tuple, cst.List):
        return set().union(*(_bound_names(element.value) for element in target.elements))
    if type(target) is cst.StarredElement:
        return _bound_names(target.value)
    return set()


def _all_params(params: cst.Parameters) -> list[cst.Param]:
    found = [*params.posonly_params, *params.params, *params.kwonly_params]
    for star in (params.star_arg, params.star_kwarg):
        if type(star) is cst.Param:
            found.append(star)
    return found


def _root_name(node: cst.BaseExpression) -> str | None:
    """`outputs` for `outputs`, `outputs["x"]`, `outputs.items`; None for a call's result."""
    while type(node) in (cst.Attribute, cst.Subscript):
        node = node.value
    return node.value if type(node) is cst.Name else None
