"""Which same-file class a bare name holds where it is used: the receiver types of calls.

`model = ActorCritic()` in `main`, then `model.train_net()`: the call runs
`ActorCritic.train_net`, and whether it takes gradients is a fact of this file. The
evidence is the bindings of the name in the scope that uses it (Python's rule: a name
bound anywhere in a function is local to all of it; one bound nowhere there is the
module's). The name is typed only when every binding there builds one same-file class
(through `.to(device)`-style calls that return the module itself); a parameter, a loop
target, an import, `with ... as`, or any other value leaves it untyped. Nested functions
look at their own bindings and then the module's (closures are not followed: untyped).
"""

from __future__ import annotations

import bisect

import libcst as cst

from autograd_fix.codemods.imports import dotted_name
from autograd_fix.codemods.torch_api import MODULE_SELF_RETURNING_METHODS
from autograd_fix.codemods.walk import SyntaxIndex

_BINDINGS = (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.AsName, cst.ImportAlias,
             cst.NamedExpr, cst.FunctionDef, cst.ClassDef, cst.Global, cst.Nonlocal)
_NEW_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


class InstanceTypes:
    """Receiver types of one file, scope by scope, computed on first use and cached."""

    def __init__(self, module: cst.Module, classes: set[str], functions: list[cst.FunctionDef], syntax: SyntaxIndex) -> None:
        self.module = module
        self.classes = classes
        self.syntax = syntax
        spans = [(span, function) for function in functions if (span := syntax.span(function)) is not None]
        spans.sort(key=lambda pair: pair[0])
        self._starts = [span[0] for span, _ in spans]
        self._spans = spans
        self._by_scope: dict[int, dict[str, str | None]] = {}

    def class_of(self, name: str, where: cst.CSTNode | None) -> str | None:
        """The same-file class `name` holds at `where` (a node of this file in the scope
        using it), or None when the bindings do not say or `where` is unknown."""
        if where is None or self.syntax.span(where) is None:
            return None
        scope = self.scope_of(where)
        if scope is not None:
            local = self._types(scope)
            if name in local:
                return local[name]
        return self._types(self.module).get(name)

    def typed_names(self, where: cst.CSTNode) -> dict[str, str]:
        """Every bare name typed at `where` (a node of this file), with its class."""
        scope = self.scope_of(where) if self.syntax.span(where) is not None else None
        names = {name: kind for name, kind in self._types(self.module).items() if kind is not None}
        if scope is not None:
            local = self._types(scope)
            names = {name: kind for name, kind in names.items() if name not in local}
            names.update({name: kind for name, kind in local.items() if kind is not None})
        return names

    def scope_of(self, node: cst.CSTNode | None) -> cst.FunctionDef | None:
        """The innermost function of the file holding `node` (a function holds itself)."""
        span = self.syntax.span(node) if node is not None else None
        if span is None:
            return None
        index = bisect.bisect_right(self._starts, span[0]) - 1
        while index >= 0:
            (start, stop), function = self._spans[index]
            if start <= span[0] < stop:
                return function
            index -= 1
        return None

    def _types(self, scope: cst.CSTNode) -> dict[str, str | None]:
        key = id(scope)
        if key not in self._by_scope:
            self._by_scope[key] = self._collect(scope)
        return self._by_scope[key]

    def _collect(self, scope: cst.CSTNode) -> dict[str, str | None]:
        found: dict[str, set[str | None]] = {}
        declared: set[str] = set()

        def bind(target: cst.CSTNode, value: cst.BaseExpression | None) -> None:
            if type(target) is cst.Name:
                found.setdefault(target.value, set()).add(self._built(value))
            elif type(target) in (cst.Tuple, cst.List):
                values = value.elements if type(value) in (cst.Tuple, cst.List) else None
                pairs = len(values) == len(target.elements) if values is not None else False
                for index, element in enumerate(target.elements):
                    # `q1, q2 = QNet(lr), QNet(lr)` pairs up; anything else is untyped
                    bind(element.value, values[index].value if pairs and values is not None else None)
            elif type(target) is cst.StarredElement:
                bind(target.value, None)

        body = scope.body if type(scope) is cst.FunctionDef else scope
        if type(scope) is cst.FunctionDef:
            params = scope.params
            for param in (*params.posonly_params, *params.params, *params.kwonly_params, params.star_arg, params.star_kwarg):
                if type(param) is cst.Param:
                    bind(param.name, None)
        for node in self.syntax.find(body, _BINDINGS + _NEW_SCOPES, skip=_NEW_SCOPES):
            if type(node) is cst.Assign:
                for target in node.targets:
                    bind(target.target, node.value)
            elif type(node) in (cst.AnnAssign, cst.NamedExpr):
                bind(node.target, node.value)
            elif type(node) in (cst.AugAssign, cst.For, cst.CompFor):
                bind(node.target, None)
            elif type(node) is cst.AsName:
                bind(node.name, None)  # `with open(p) as f`, `except E as e`, `import a as b`
            elif type(node) is cst.ImportAlias and node.asname is None:
                bind(cst.Name((dotted_name(node.name) or "_").split(".")[0]), None)
            elif type(node) in (cst.FunctionDef, cst.ClassDef):
                bind(node.name, None)
            elif type(node) in (cst.Global, cst.Nonlocal):
                declared.update(item.name.value for item in node.names)
        return {name: (next(iter(classes)) if len(classes) == 1 else None)
                for name, classes in found.items() if name not in declared}

    def _built(self, value: cst.BaseExpression | None) -> str | None:
        """The same-file class `value` constructs (`ActorCritic()`, `QNet(lr).to(device)`)."""
        while type(value) is cst.Call and type(value.func) is cst.Attribute and (
            value.func.attr.value in MODULE_SELF_RETURNING_METHODS
        ):
            value = value.func.value
        name = dotted_name(value.func) if type(value) is cst.Call else None
        return name if name in self.classes else None
