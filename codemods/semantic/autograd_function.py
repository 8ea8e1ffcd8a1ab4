"""Shared facts about custom `torch.autograd.Function` subclasses.

AGF004 (gradient count), AGF005 (tensors kept on ctx) and AGF007 (non-tensors passed to
`save_for_backward`) all need the same groundwork: find the classes deriving from
`torch.autograd.Function` (by qualified name, so `from torch.autograd import Function` and
`import torch.autograd as ag; ag.Function` both count), their `forward` /
`setup_context` / `backward`, how many inputs `apply` is given, and whether a value is a
tensor or certainly not one. Everything here answers "I can't tell" (None / False) when
the evidence is incomplete: the rules fail closed on that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.walk import SyntaxIndex, walk

#: qualified names of the base class
FUNCTION_BASES = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})

#: tensor methods that return one tensor (receiver is a tensor, result is a tensor)
TENSOR_METHODS = frozenset(
    {
        "abs", "add", "addmm", "bmm", "ceil", "clamp", "clamp_max", "clamp_min", "clip", "clone", "contiguous",
        "cos", "cumsum", "detach", "div", "double", "eq", "exp", "expand", "expand_as", "flatten", "float",
        "floor", "gather", "ge", "gt", "half", "index_select", "le", "log", "log_softmax", "lt", "masked_fill",
        "matmul", "mean", "mm", "mul", "mv", "ne", "neg", "new_empty", "new_full", "new_ones", "new_zeros",
        "norm", "permute", "pow", "reciprocal", "relu", "reshape", "reshape_as", "rsqrt", "sigmoid", "sign",
        "sin", "softmax", "sqrt", "square", "squeeze", "sub", "sum", "t", "tanh", "to", "transpose",
        "type_as", "unsqueeze", "view", "view_as", "where", "bool", "long", "int",
    }
)
#: methods numpy arrays (and most other objects) lack: a receiver of one is a tensor
TORCH_ONLY_METHODS = frozenset(
    {
        "addmm", "bmm", "clamp", "clamp_max", "clamp_min", "clone", "contiguous", "detach", "div", "exp",
        "expand", "expand_as", "gt", "ge", "lt", "le", "log", "log_softmax", "masked_fill", "mm", "mul", "mv",
        "neg", "new_empty", "new_full", "new_ones", "new_zeros", "numel", "permute", "pow", "relu", "rsqrt",
        "sigmoid", "sin", "cos", "softmax", "sqrt", "sub", "t", "tanh", "type_as", "unsqueeze", "view_as",
        "reshape_as", "size", "dim", "abs", "add", "sign", "float", "double", "half", "numpy", "mean",
    }
)
#: methods whose result is a Python value or a torch.Size, never a tensor
NON_TENSOR_METHODS = frozenset(
    {"item", "tolist", "size", "dim", "numel", "nelement", "stride", "element_size", "data_ptr", "is_contiguous",
     "get_device", "is_floating_point"}
)
#: attributes whose value is never a tensor
NON_TENSOR_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "layout", "is_leaf"})
#: attributes of a tensor that are tensors
TENSOR_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "data", "real", "imag"})
#: namespaces whose functions take and return tensors
TENSOR_NAMESPACES = ("torch.", "torch.nn.functional.", "torch.special.", "torch.fft.")
#: torch functions that do not return one tensor (tuples, sizes, predicates, factories of other things)
NOT_ONE_TENSOR = frozenset(
    {
        "aminmax", "autograd", "broadcast_shapes", "broadcast_tensors", "chunk", "device", "dsplit", "dtype",
        "finfo", "frexp", "get_default_dtype", "histogram", "hsplit", "iinfo", "is_complex",
        "is_floating_point", "is_grad_enabled", "is_nonzero", "is_tensor", "kthvalue", "lu", "max",
        "median", "meshgrid", "min", "mode", "numel", "result_type", "Size", "sort", "split", "std_mean",
        "svd", "tensor_split", "topk", "unbind", "unique", "unique_consecutive", "var_mean", "vsplit",
        "where", "nonzero", "no_grad", "enable_grad", "set_grad_enabled", "save", "load", "manual_seed",
        "cuda", "backends", "distributed", "jit", "compile", "nn", "optim", "utils", "testing", "func",
        "Generator", "Tensor", "slogdet", "qr", "eig", "eigh", "triangular_solve", "cummax", "cummin",
        "gradient", "can_cast", "promote_types", "typename", "is_storage", "equal", "allclose",
    }
)
#: torch functions whose positional arguments need not be tensors (factories, predicates)
ACCEPTS_NON_TENSORS = frozenset(
    {
        "tensor", "as_tensor", "asarray", "from_numpy", "full", "zeros", "ones", "empty", "rand", "randn",
        "randint", "arange", "linspace", "logspace", "eye", "where", "is_tensor", "numel", "Size", "device",
        "dtype", "finfo", "iinfo", "manual_seed", "set_grad_enabled", "result_type", "scalar_tensor",
        "broadcast_shapes", "randperm", "normal", "is_floating_point", "is_complex",
    }
)
_SCALAR_ANNOTATIONS = frozenset({"int", "float", "bool", "str", "complex"})
_SEQUENCE_ANNOTATIONS = frozenset({"tuple", "list", "Tuple", "List", "Sequence"})
#: keyword arguments that only take Python ints/bools (or integer tensors, which need no gradient)
SCALAR_KEYWORDS = frozenset({"dim", "dims", "axis", "keepdim", "groups", "stride", "padding", "dilation", "kernel_size", "num_classes"})
#: python builtins whose result is never a tensor
_NON_TENSOR_BUILTINS = frozenset({"int", "float", "bool", "str", "len", "tuple", "list", "range", "round", "dict", "set"})
#: ctx attributes that belong to autograd itself
RESERVED_CTX_ATTRIBUTES = frozenset(
    {
        "save_for_backward", "saved_tensors", "saved_variables", "needs_input_grad", "mark_dirty",
        "mark_non_differentiable", "set_materialize_grads", "materialize_grads", "to_save", "dirty_tensors",
        "non_differentiable", "save_for_forward", "saved_for_forward", "next_functions", "metadata",
        "apply", "name", "register_hook", "register_prehook",
    }
)


# ---------------------------------------------------------------------------------------
# finding the classes


@dataclass(frozen=True)
class CustomFunction:
    """One `torch.autograd.Function` subclass and its static methods."""

    node: cst.ClassDef
    forward: cst.FunctionDef | None
    backward: cst.FunctionDef | None
    setup_context: cst.FunctionDef | None

    @property
    def name(self) -> str:
        return self.node.name.value

    @property
    def combined(self) -> bool:
        """`forward(ctx, ...)` style: no `setup_context` on the class."""
        return self.setup_context is None

    def forward_inputs(self) -> tuple[cst.Param, ...] | None:
        """`forward`'s parameters that `apply` fills, without ctx; None if not countable.

        `*args`, `**kwargs` or keyword-only parameters make the count unknowable here.
        """
        forward = self.forward
        if forward is None:
            return None
        params = forward.params
        if not isinstance(params.star_arg, cst.MaybeSentinel) or params.star_kwarg is not None or params.kwonly_params:
            return None
        positional = tuple(params.posonly_params) + tuple(params.params)
        if self.combined:
            if not positional:
                return None
            positional = positional[1:]
        return positional

    def forward_ctx(self) -> str | None:
        """Name of the ctx parameter where tensors are stored (forward or setup_context)."""
        function = self.forward if self.combined else self.setup_context
        if function is None:
            return None
        params = tuple(function.params.posonly_params) + tuple(function.params.params)
        return params[0].name.value if params else None

    def ctx_function(self) -> cst.FunctionDef | None:
        """The method that receives ctx during the forward pass."""
        return self.forward if self.combined else self.setup_context

    def backward_ctx(self) -> str | None:
        if self.backward is None:
            return None
        params = tuple(self.backward.params.posonly_params) + tuple(self.backward.params.params)
        return params[0].name.value if params else None

    def backward_grad_names(self) -> tuple[str, ...]:
        """Names of backward's gradient parameters (each holds a tensor or None)."""
        if self.backward is None:
            return ()
        params = tuple(self.backward.params.posonly_params) + tuple(self.backward.params.params)
        names = [p.name.value for p in params[1:]]
        star = self.backward.params.star_arg
        if type(star) is cst.Param:
            names.append(star.name.value)
        return tuple(names)


def is_function_subclass(node: cst.ClassDef, imports: ImportIndex) -> bool:
    return any(imports.qualified_name(base.value) in FUNCTION_BASES for base in node.bases if base.keyword is None)


def _is_staticmethod(function: cst.FunctionDef) -> bool:
    return any(type(d.decorator) is cst.Name and d.decorator.value == "staticmethod" for d in function.decorators)


def _static_method(node: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    found = [s for s in node.body.body if type(s) is cst.FunctionDef and s.name.value == name]
    if len(found) != 1 or not _is_staticmethod(found[0]):
        return None
    return found[0]


def _defines(node: cst.ClassDef, name: str) -> bool:
    return any(type(s) is cst.FunctionDef and s.name.value == name for s in node.body.body)


def custom_functions(module: cst.Module, imports: ImportIndex, syntax: SyntaxIndex | None = None) -> list[CustomFunction]:
    """Every class in `module` that derives directly from `torch.autograd.Function`.

    A class is skipped when `forward` / `backward` are not single static methods, or when
    it defines `setup_context` that is not one (the style would be unclear). With the
    file's `syntax` index the classes are read off it (the same classes in the same
    order as a walk finds them, without visiting every node again).
    """
    if syntax is not None:
        classes = [node for node in syntax.find(module, cst.ClassDef) if is_function_subclass(node, imports)]
    else:
        finder = _ClassFinder(imports)
        walk(module, finder)
        classes = finder.classes
    return [function for node in classes if (function := custom_function(node, imports)) is not None]


def custom_function(node: cst.ClassDef, imports: ImportIndex) -> CustomFunction | None:
    """`node` as a custom Function, or None (not one, or its methods are not plain static methods).

    Rules call this from `visit_ClassDef`, so finding the classes costs no extra traversal.
    """
    if not is_function_subclass(node, imports):
        return None
    forward = _static_method(node, "forward")
    backward = _static_method(node, "backward")
    setup = _static_method(node, "setup_context")
    if forward is None or backward is None:
        return None
    if setup is None and _defines(node, "setup_context"):
        return None
    return CustomFunction(node, forward, backward, setup)


class _ClassFinder(cst.CSTVisitor):
    def __init__(self, imports: ImportIndex) -> None:
        super().__init__()
        self.imports = imports
        self.classes: list[cst.ClassDef] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if is_function_subclass(node, self.imports):
            self.classes.append(node)


# ---------------------------------------------------------------------------------------
# apply call sites


@dataclass
class ApplyCalls:
    """How `Cls.apply` is called in the file: positional argument counts seen."""

    counts: set[int] = field(default_factory=set)
    #: positional argument expressions of each call site
    arguments: list[list[cst.BaseExpression]] = field(default_factory=list)
    #: a call site with `*args` / keywords, or `apply` passed around: counts are incomplete
    unknown: bool = False


def apply_calls(module: cst.Module, functions: list[CustomFunction]) -> dict[str, ApplyCalls]:
    """Call sites of each function's `apply` (through `fn = Cls.apply` aliases too)."""
    names = {f.name for f in functions}
    collector = _ApplyCollector(names)
    walk(module, collector)
    aliases = collector.aliases
    if aliases:
        collector = _ApplyCollector(names, aliases)
        walk(module, collector)
    return collector.calls


class _ApplyCollector(cst.CSTVisitor):
    def __init__(self, names: set[str], aliases: dict[str, str] | None = None) -> None:
        super().__init__()
        self.names = names
        self.aliases: dict[str, str] = dict(aliases or {})
        self.calls: dict[str, ApplyCalls] = {name: ApplyCalls() for name in names}
        self._handled: set[int] = set()

    def _apply_owner(self, node: cst.BaseExpression) -> str | None:
        if type(node) is cst.Attribute and node.attr.value == "apply" and type(node.value) is cst.Name:
            if node.value.value in self.names:
                return node.value.value
        name = dotted_name(node)
        if name is not None and name in self.aliases:
            return self.aliases[name]
        return None

    def visit_Assign(self, node: cst.Assign) -> None:
        owner = self._apply_owner(node.value)
        if owner is not None and type(node.value) is cst.Attribute and len(node.targets) == 1:
            target = dotted_name(node.targets[0].target)
            if target is not None:
                self.aliases[target] = owner
                self._handled.add(id(node.value))

    def visit_Call(self, node: cst.Call) -> None:
        owner = self._apply_owner(node.func)
        if owner is None:
            return
        self._handled.add(id(node.func))
        calls = self.calls[owner]
        if any(a.star or a.keyword is not None for a in node.args):
            calls.unknown = True
            return
        calls.counts.add(len(node.args))
        calls.arguments.append([a.value for a in node.args])

    def visit_Attribute(self, node: cst.Attribute) -> None:
        # `Cls.apply` used other than as a call or a simple alias: passed around
        if id(node) in self._handled:
            return
        owner = self._apply_owner(node)
        if owner is not None and node.attr.value == "apply":
            self.calls[owner].unknown = True


def expected_gradients(function: CustomFunction, calls: ApplyCalls | None) -> tuple[int | None, bool]:
    """How many gradients `backward` must return, and whether the count is certain.

    setup_context style: one per declared parameter (defaults are bound). Combined style:
    as many as `apply` is given; with defaults that is what every call site in the file
    agrees on, otherwise the declared count, marked uncertain.
    """
    inputs = function.forward_inputs()
    if inputs is None:
        return None, False
    declared = len(inputs)
    if not function.combined:
        return declared, True
    if all(p.default is None for p in inputs):
        return declared, True
    if calls is not None and not calls.unknown and len(calls.counts) == 1:
        return next(iter(calls.counts)), True
    return declared, False


# ---------------------------------------------------------------------------------------
# statements of a function


def own_nodes(function: cst.FunctionDef, kind: type) -> list:
    """Nodes of `kind` in `function`'s body, not inside nested functions, lambdas or classes."""
    finder = _OwnFinder(kind)
    walk(function.body, finder)
    return finder.found


class _OwnFinder(cst.CSTVisitor):
    def __init__(self, kind: type) -> None:
        super().__init__()
        self.kind = kind
        self.found: list = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, self.kind):
            self.found.append(node)
        return type(node) not in (cst.FunctionDef, cst.Lambda, cst.ClassDef)


def return_statements(function: cst.FunctionDef) -> list[cst.Return]:
    return own_nodes(function, cst.Return)


def returned_elements(node: cst.Return) -> list[cst.BaseExpression] | None:
    """The values a `return` hands back: tuple elements, or one value; None if starred."""
    value = node.value
    if value is None:
        return None
    if type(value) is cst.Tuple:
        if any(type(e) is cst.StarredElement for e in value.elements):
            return None
        return [e.value for e in value.elements]
    return [value]


def top_level_body(function: cst.FunctionDef) -> list[cst.BaseStatement]:
    body = function.body
    if type(body) is cst.SimpleStatementSuite:
        return []
    return list(body.body)


def is_docstring(statement: cst.CSTNode) -> bool:
    return (
        type(statement) is cst.SimpleStatementLine
        and len(statement.body) == 1
        and type(statement.body[0]) is cst.Expr
        and type(statement.body[0].value) in (cst.SimpleString, cst.ConcatenatedString)
    )


def ctx_attribute(node: cst.CSTNode, ctx: str) -> str | None:
    """`ctx.name` -> 'name'."""
    if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == ctx:
        return node.attr.value
    return None


def is_saved_tensors(node: cst.CSTNode, ctx: str) -> bool:
    return ctx_attribute(node, ctx) == "saved_tensors"


def save_for_backward_calls(function: cst.FunctionDef, ctx: str) -> list[cst.Call]:
    return [
        c for c in own_nodes(function, cst.Call)
        if type(c.func) is cst.Attribute and ctx_attribute(c.func, ctx) == "save_for_backward"
    ]


def iter_names(node: cst.CSTNode) -> Iterator[str]:
    finder = _NameCollector()
    walk(node, finder)
    yield from finder.names


class _NameCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        walk(node.value, self)
        return False


# ---------------------------------------------------------------------------------------
# tensor or not


def is_zero_literal(node: cst.CSTNode) -> bool:
    """`0`, `0.0`, `0.`: a Python zero where autograd wants a tensor or None."""
    if type(node) is cst.Integer:
        return node.evaluated_value == 0
    if type(node) is cst.Float:
        return node.evaluated_value == 0.0
    return False


def is_scalar_literal(node: cst.CSTNode) -> bool:
    """Numbers, strings, True/False, and tuples of those (None excluded: tensors default to it)."""
    if type(node) in (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString):
        return True
    if type(node) is cst.Name:
        return node.value in ("True", "False")
    if type(node) is cst.UnaryOperation and type(node.operator) in (cst.Minus, cst.Plus):
        return is_scalar_literal(node.expression)
    if type(node) is cst.Tuple:
        return all(type(e) is not cst.StarredElement and is_scalar_literal(e.value) for e in node.elements)
    return False


def _annotation_kind(param: cst.Param, imports: ImportIndex) -> str | None:
    """'tensor', 'scalar' or None from a parameter's annotation."""
    if param.annotation is None:
        return None
    return _type_kind(_without_none(param.annotation.annotation, imports), imports)


def _without_none(annotation: cst.BaseExpression, imports: ImportIndex) -> cst.BaseExpression:
    """`Optional[X]`, `Union[X, None]`, `X | None` -> `X`: a None default or argument is
    no tensor either, so the optional's other member decides (torch.lobpcg's
    `largest: Optional[bool] = None` is a bool whenever it is not None)."""
    if type(annotation) is cst.BinaryOperation and type(annotation.operator) is cst.BitOr:
        members = [annotation.left, annotation.right]
    elif type(annotation) is cst.Subscript and imports.qualified_name(annotation.value) in (
        "typing.Optional",
        "typing.Union",
    ):
        members = [e.slice.value for e in annotation.slice if type(e.slice) is cst.Index]
    else:
        return annotation
    rest = [m for m in members if not (type(m) is cst.Name and m.value == "None")]
    return rest[0] if len(rest) == 1 else annotation


def _type_kind(annotation: cst.BaseExpression, imports: ImportIndex) -> str | None:
    if imports.qualified_name(annotation) == "torch.Tensor":
        return "tensor"
    name = dotted_name(annotation)
    if name in _SCALAR_ANNOTATIONS:
        return "scalar"
    if type(annotation) is cst.Subscript and dotted_name(annotation.value) in _SEQUENCE_ANNOTATIONS:
        inner = [e.slice.value for e in annotation.slice if type(e.slice) is cst.Index]
        if inner and all(dotted_name(i) in _SCALAR_ANNOTATIONS or (type(i) is cst.Ellipsis) for i in inner):
            return "scalar"
    return None


class TensorFacts:
    """Which names in one function certainly hold tensors, and which certainly don't.

    Seeds: annotations, literal defaults, torch-only method receivers, arguments of torch
    ops; then assignments propagate (a name is classified only when every assignment to
    it agrees). Names not classified are unknown, and the rules leave them alone.
    """

    def __init__(
        self,
        function: cst.FunctionDef,
        imports: ImportIndex,
        tensors: set[str] | None = None,
        non_tensors: set[str] | None = None,
        skip_params: int = 0,
        tensor_calls: frozenset[int] = frozenset(),
        tensor_params: frozenset[str] = frozenset(),
    ) -> None:
        self.function = function
        self.imports = imports
        self.tensors: set[str] = set(tensors or ())
        self.non_tensors: set[str] = set(non_tensors or ())
        #: ids of calls known (elsewhere) to return one tensor: a same-file module's forward
        self._tensor_calls = tensor_calls
        self._locals = _local_names(function)
        params = tuple(function.params.posonly_params) + tuple(function.params.params)
        self.params = params[skip_params:]
        for param in self.params:
            name = param.name.value
            kind = _annotation_kind(param, imports)
            if kind == "tensor":
                self.tensors.add(name)
            elif kind == "scalar" or (param.default is not None and is_scalar_literal(param.default)):
                self.non_tensors.add(name)
        self.tensors |= _used_as_tensor(function, imports)
        self.tensors -= self.non_tensors
        self._propagate()
        self._rebound_params(tensor_params)

    def _rebound_params(self, names: frozenset[str]) -> None:
        """Parameters passed where only a tensor works (`tensor_params`, from what a
        module's `forward` does with its input) are tensors when every value the function
        rebinds them to is one too (`x = block(x)` in a loop over tensor-returning blocks)."""
        assignments = _assignments(self.function)
        for name in names - self.non_tensors - self.tensors:
            values = assignments.get(name, [])
            if not any(v is None for v in values) and (not values or self._all_tensors(name, values)):
                self.tensors.add(name)

    def _propagate(self) -> None:
        assignments = _assignments(self.function)
        params = {p.name.value for p in self.params}
        for _ in range(4):
            changed = False
            for name, values in assignments.items():
                if name in params or any(v is None for v in values):
                    continue
                if name not in self.tensors and self._all_tensors(name, values):
                    self.tensors.add(name)
                    changed = True
                elif name not in self.non_tensors and all(self.is_non_tensor(v) for v in values):
                    self.non_tensors.add(name)
                    changed = True
            if not changed:
                break
        both = self.tensors & self.non_tensors
        self.tensors -= both
        self.non_tensors -= both

    def _all_tensors(self, name: str, values: list[cst.BaseExpression]) -> bool:
        """Every value assigned to `name` is a tensor, by induction over the assignments:
        one that needs no assumption is, and the others are when `name` itself is
        (``g = g / g.norm() * scale`` after ``g = (x * grad_output).sum(2)``)."""
        if not any(self.is_tensor(v) for v in values):
            return False
        self.tensors.add(name)
        try:
            return all(self.is_tensor(v) for v in values)
        finally:
            self.tensors.discard(name)

    def _torch_function(self, node: cst.Call) -> str | None:
        qualified = self.imports.qualified_name(node.func)
        if qualified is None:
            return None
        for namespace in TENSOR_NAMESPACES:
            if qualified.startswith(namespace):
                rest = qualified[len(namespace):]
                if "." not in rest:
                    return rest
        return None

    def is_tensor(self, node: cst.BaseExpression) -> bool:
        """Certainly one tensor (never a tuple, a number or None)."""
        if type(node) is cst.Name:
            return node.value in self.tensors
        if type(node) is cst.Call:
            if id(node) in self._tensor_calls:
                return True
            function = self._torch_function(node)
            if function is not None:
                if function == "where":  # where(cond) is a tuple; where(cond, a, b) one tensor
                    return len(node.args) == 3
                return function not in NOT_ONE_TENSOR and not function[:1].isupper()
            if type(node.func) is cst.Attribute:
                method = node.func.attr.value
                return (method in TENSOR_METHODS or _is_inplace_method(method)) and self.is_tensor(node.func.value)
            return False
        if type(node) is cst.BinaryOperation:
            if type(node.left) in (cst.Tuple, cst.List) or type(node.right) in (cst.Tuple, cst.List):
                return False
            return self.is_tensor(node.left) or self.is_tensor(node.right)
        if type(node) is cst.UnaryOperation:
            return type(node.operator) is not cst.Not and self.is_tensor(node.expression)
        if type(node) is cst.Comparison:
            return (
                len(node.comparisons) == 1
                and type(node.comparisons[0].operator) in (cst.LessThan, cst.GreaterThan, cst.LessThanEqual, cst.GreaterThanEqual)
                and (self.is_tensor(node.left) or self.is_tensor(node.comparisons[0].comparator))
            )
        if type(node) is cst.Subscript:
            return self.is_tensor(node.value)
        if type(node) is cst.Attribute:
            return node.attr.value in TENSOR_ATTRIBUTES and self.is_tensor(node.value)
        if type(node) is cst.IfExp:
            return self.is_tensor(node.body) and self.is_tensor(node.orelse)
        return False

    def is_non_tensor(self, node: cst.BaseExpression) -> bool:
        """Certainly not a tensor (and not None): numbers, strings, sizes, `.item()`."""
        if is_scalar_literal(node):
            return True
        if type(node) is cst.Name:
            return node.value in self.non_tensors
        if type(node) in (cst.List, cst.Set, cst.Dict, cst.ListComp, cst.SetComp, cst.DictComp):
            return True
        if type(node) is cst.Tuple:
            return all(type(e) is not cst.StarredElement and self.is_non_tensor(e.value) for e in node.elements)
        if type(node) is cst.Attribute:
            return node.attr.value in NON_TENSOR_ATTRIBUTES
        if type(node) is cst.Call:
            if type(node.func) is cst.Attribute and node.func.attr.value in NON_TENSOR_METHODS:
                return True
            if type(node.func) is cst.Name and node.func.value in _NON_TENSOR_BUILTINS:
                return node.func.value not in self._locals and self.imports.qualified_name(node.func) is None
            qualified = self.imports.qualified_name(node.func)
            return qualified is not None and qualified.startswith("math.")
        if type(node) is cst.Subscript:
            return type(node.value) is cst.Attribute and node.value.attr.value == "shape" or (
                type(node.value) is cst.Call
                and type(node.value.func) is cst.Attribute
                and node.value.func.attr.value == "size"
            )
        if type(node) is cst.BinaryOperation:
            return self.is_non_tensor(node.left) and self.is_non_tensor(node.right)
        if type(node) is cst.UnaryOperation:
            return self.is_non_tensor(node.expression)
        if type(node) is cst.IfExp:
            return self.is_non_tensor(node.body) and self.is_non_tensor(node.orelse)
        return False


def _is_inplace_method(method: str) -> bool:
    """`normal_`, `add_`, `requires_grad_`: a tensor's in-place methods return the tensor
    itself (pyro's `loc.new_empty(shape).normal_()` is a tensor)."""
    return method.endswith("_") and not method.startswith("_")


def _local_names(function: cst.FunctionDef) -> set[str]:
    names = {p.name.value for p in tuple(function.params.posonly_params) + tuple(function.params.params)}
    names |= set(_assignments(function))
    return names


def assigned_values(function: cst.FunctionDef) -> dict[str, list[cst.BaseExpression | None]]:
    """name -> every value assigned to it in the function (None: bound some other way)."""
    return _assignments(function)


def _assignments(function: cst.FunctionDef) -> dict[str, list[cst.BaseExpression | None]]:
    """name -> every value assigned to it in the function (None: bound some other way)."""
    collector = _AssignmentCollector()
    walk(function.body, collector)
    return collector.values


class _AssignmentCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, list[cst.BaseExpression | None]] = {}

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if type(target) is cst.Name:
            self.values.setdefault(target.value, []).append(value)
        elif type(target) in (cst.Tuple, cst.List):
            values = None
            if type(value) in (cst.Tuple, cst.List) and len(value.elements) == len(target.elements):
                values = [e.value for e in value.elements]
            for index, element in enumerate(target.elements):
                inner = values[index] if values is not None and type(element) is not cst.StarredElement else None
                self._bind(element.value, inner)
        elif type(target) is cst.StarredElement:
            self._bind(target.value, None)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind(node.target, None)

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target, None)

    def visit_AsName(self, node: cst.AsName) -> None:
        if type(node.name) in (cst.Name, cst.Tuple, cst.List):
            self._bind(node.name, None)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(node.target, node.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.values.setdefault(node.name.value, []).append(None)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind(node.target, None)


def _used_as_tensor(function: cst.FunctionDef, imports: ImportIndex) -> set[str]:
    """Names used where only a tensor works: torch-only method receivers, torch op inputs."""
    finder = _TensorUseFinder(imports)
    walk(function.body, finder)
    return finder.names


class _TensorUseFinder(cst.CSTVisitor):
    def __init__(self, imports: ImportIndex) -> None:
        super().__init__()
        self.imports = imports
        self.names: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is cst.Attribute and type(func.value) is cst.Name:
            if func.attr.value in TORCH_ONLY_METHODS and self.imports.qualified_name(func.value) is None:
                self.names.add(func.value.value)
        qualified = self.imports.qualified_name(func)
        if qualified is None:
            return
        for namespace in ("torch.", "torch.nn.functional."):
            if qualified.startswith(namespace) and "." not in qualified[len(namespace):]:
                rest = qualified[len(namespace):]
                if rest in ACCEPTS_NON_TENSORS or rest[:1].isupper() or not node.args:
                    return
                first = node.args[0]
                if first.keyword is None and not first.star and type(first.value) is cst.Name:
                    self.names.add(first.value.value)
                return


# ---------------------------------------------------------------------------------------
# setup_context, ctx.saved_tensors, and editing helpers


def setup_context_aliases(function: CustomFunction, index: int) -> set[str]:
    """Names `setup_context` gives input `index` (`x, k = inputs` -> {'k'} for index 1)."""
    setup = function.setup_context
    if setup is None:
        return set()
    params = tuple(setup.params.posonly_params) + tuple(setup.params.params)
    if len(params) < 2:
        return set()
    inputs_name = params[1].name.value
    names: set[str] = set()
    for assign in own_nodes(setup, cst.Assign):
        value = assign.value
        for target in assign.targets:
            node = target.target
            if type(value) is cst.Name and value.value == inputs_name and type(node) in (cst.Tuple, cst.List):
                elements = node.elements
                if index < len(elements) and type(elements[index].value) is cst.Name:
                    names.add(elements[index].value.value)
            elif type(node) is cst.Name and _integer_index(value, inputs_name) == index:
                names.add(node.value)
    return names


def _integer_index(node: cst.BaseExpression, base: str) -> int | None:
    """`base[3]` -> 3; anything else -> None."""
    if not (type(node) is cst.Subscript and type(node.value) is cst.Name and node.value.value == base):
        return None
    return subscript_index(node)


def subscript_index(node: cst.Subscript) -> int | None:
    if len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index:
        return None
    value = node.slice[0].slice.value
    if type(value) is cst.Integer:
        return int(value.evaluated_value)
    return None


def ctx_holder_facts(
    function: CustomFunction,
    imports: ImportIndex,
    tensor_calls: frozenset[int] = frozenset(),
    tensor_params: frozenset[str] = frozenset(),
) -> TensorFacts | None:
    """Tensor facts in the method that receives ctx during forward (forward or setup_context).

    In the setup_context style, the names unpacked from `inputs` inherit what `forward`'s
    parameters are known to be. `tensor_calls` / `tensor_params`: what forward's calls of
    same-file modules show (see `module_io`).
    """
    forward = function.forward
    if forward is None:
        return None
    forward_facts = TensorFacts(
        forward, imports, skip_params=1 if function.combined else 0, tensor_calls=tensor_calls,
        tensor_params=tensor_params,
    )
    if function.combined:
        return forward_facts
    setup = function.setup_context
    inputs = function.forward_inputs()
    if setup is None or inputs is None:
        return None
    tensors: set[str] = set()
    non_tensors: set[str] = set()
    for index, param in enumerate(inputs):
        aliases = setup_context_aliases(function, index)
        if param.name.value in forward_facts.tensors:
            tensors |= aliases
        elif param.name.value in forward_facts.non_tensors:
            non_tensors |= aliases
    params = tuple(setup.params.posonly_params) + tuple(setup.params.params)
    returns = return_statements(forward)
    if len(params) >= 3 and returns and all(
        r.value is not None and type(r.value) is not cst.Tuple and forward_facts.is_tensor(r.value) for r in returns
    ):
        tensors.add(params[2].name.value)  # `output`: forward returns one tensor
    return TensorFacts(setup, imports, tensors=tensors, non_tensors=non_tensors, skip_params=3)


def rebound_names(statements: list[cst.CSTNode], syntax: SyntaxIndex | None = None) -> set[str]:
    """Names (re)bound by assignment, loop, `with ... as`, walrus or `del` in `statements`
    (read off the file's index when given)."""
    collector = _AssignmentCollector()
    for statement in statements:
        if syntax is not None:
            syntax.walk(statement, collector)
        else:
            walk(statement, collector)
    names = set(collector.values)
    for statement in statements:
        for node in (syntax.find(statement, cst.Del) if syntax is not None else all_nodes(statement, cst.Del)):
            names |= set(iter_names(node.target))
    return names


class _AllFinder(cst.CSTVisitor):
    def __init__(self, kind: type, found: list) -> None:
        super().__init__()
        self.kind = kind
        self.found = found

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, self.kind):
            self.found.append(node)
        return True


def all_nodes(node: cst.CSTNode, kind: type) -> list:
    """Every node of `kind` under `node`, nested functions and lambdas included."""
    found: list = []
    walk(node, _AllFinder(kind, found))
    return found


@dataclass
class SavedTensorsReads:
    """How `backward` reads `ctx.saved_tensors`: one tuple unpacking and/or `[i]` subscripts."""

    #: the top-level statement `a, b = ctx.saved_tensors`, if any
    line: cst.SimpleStatementLine | None = None
    target: cst.Tuple | cst.List | None = None
    subscripts: list[tuple[cst.Subscript, int]] = field(default_factory=list)
    #: False when some read has another shape (`saved = ctx.saved_tensors`, `*rest`, a loop)
    understood: bool = True
    #: position of `line` in backward's top-level body
    position: int = -1


def saved_tensors_reads(backward: cst.FunctionDef, ctx: str) -> SavedTensorsReads:
    reads = SavedTensorsReads()
    accounted: set[int] = set()
    for position, statement in enumerate(top_level_body(backward)):
        if not (type(statement) is cst.SimpleStatementLine and len(statement.body) == 1):
            continue
        assign = statement.body[0]
        if not (type(assign) is cst.Assign and is_saved_tensors(assign.value, ctx) and len(assign.targets) == 1):
            continue
        target = assign.targets[0].target
        if (
            reads.line is not None
            or type(target) not in (cst.Tuple, cst.List)
            or not all(type(e) is cst.Element and type(e.value) is cst.Name for e in target.elements)
        ):
            reads.understood = False
            continue
        reads.line, reads.target, reads.position = statement, target, position
        accounted.add(id(assign.value))
    finder = _SavedTensorsFinder(ctx)
    walk(backward.body, finder)
    for subscript in finder.subscripts:
        index = subscript_index(subscript)
        if index is None or index < 0:
            reads.understood = False
        else:
            reads.subscripts.append((subscript, index))
            accounted.add(id(subscript.value))
    if finder.other or any(id(node) not in accounted for node in finder.attributes):
        reads.understood = False
    return reads


class _SavedTensorsFinder(cst.CSTVisitor):
    def __init__(self, ctx: str) -> None:
        super().__init__()
        self.ctx = ctx
        self.attributes: list[cst.Attribute] = []
        self.subscripts: list[cst.Subscript] = []
        self.other = False

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if is_saved_tensors(node.value, self.ctx):
            self.subscripts.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        attribute = ctx_attribute(node, self.ctx)
        if attribute == "saved_tensors":
            self.attributes.append(node)
        elif attribute in ("saved_variables", "to_save"):
            self.other = True


def statement_of_call(function: cst.FunctionDef, call: cst.Call) -> tuple[int, cst.SimpleStatementLine] | None:
    """The top-level line of `function` that is exactly `call` as a statement, and its index."""
    for position, statement in enumerate(top_level_body(function)):
        if (
            type(statement) is cst.SimpleStatementLine
            and len(statement.body) == 1
            and type(statement.body[0]) is cst.Expr
            and statement.body[0].value is call
        ):
            return position, statement
    return None


def without_args(call: cst.Call, indices: set[int]) -> cst.Call:
    """`call` minus the positional arguments at `indices`, commas tidied."""
    kept = [arg for index, arg in enumerate(call.args) if index not in indices]
    if kept and call.args:
        kept[-1] = kept[-1].with_changes(comma=call.args[-1].comma)
    return call.with_changes(args=kept)


def with_args(call: cst.Call, extra: list[cst.BaseExpression]) -> cst.Call:
    """`call` with `extra` positional arguments appended."""
    args = list(call.args)
    separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if args:
        trailing = args[-1].comma
        args[-1] = args[-1].with_changes(comma=separator)
    else:
        trailing = cst.MaybeSentinel.DEFAULT
    for number, value in enumerate(extra):
        last = number == len(extra) - 1
        args.append(cst.Arg(value, comma=trailing if last else separator))
    return call.with_changes(args=args)


def tuple_without(target: cst.Tuple | cst.List, indices: set[int]) -> cst.Tuple | cst.List | None:
    """Unpacking target minus `indices`; a single survivor is a one-element tuple in the
    parentheses `ruff format` gives it (`(x,) = ...`, not `x, = ...`); None if empty."""
    kept = [e for index, e in enumerate(target.elements) if index not in indices]
    if not kept:
        return None
    if len(kept) == 1 and type(target) is cst.Tuple:
        return one_element_target(target.with_changes(elements=[kept[0].with_changes(comma=cst.Comma())]))
    kept[-1] = kept[-1].with_changes(comma=target.elements[-1].comma)
    return target.with_changes(elements=kept)


def one_element_target(target: cst.Tuple) -> cst.Tuple:
    """`x, = ...` spelt `(x,) = ...`, as `ruff format` and Black write it: a fix's
    output stays stable under the formatter the project runs (a tuple that has its
    parentheses keeps them as they are)."""
    if target.lpar:
        return target
    return target.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def tuple_with(target: cst.Tuple | cst.List, names: list[str]) -> cst.Tuple | cst.List:
    """Unpacking target with `names` appended (`x, = ...` -> `x, out = ...`)."""
    elements = list(target.elements)
    separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    trailing = elements[-1].comma if elements else cst.MaybeSentinel.DEFAULT
    if len(elements) == 1 and type(target) is cst.Tuple:
        trailing = cst.MaybeSentinel.DEFAULT  # `x, = ...` needed its comma; `x, out = ...` does not
    if elements:
        elements[-1] = elements[-1].with_changes(comma=separator)
    for number, name in enumerate(names):
        last = number == len(names) - 1
        elements.append(cst.Element(cst.Name(name), comma=trailing if last else separator))
    return target.with_changes(elements=elements)


def dropped_tensors(function: cst.FunctionDef, facts: "TensorFacts") -> list[str]:
    """Tensor locals `function` assigns and never reads, in the order first assigned: in
    a backward, the gradients it computes and then forgets to return (AdderNet's
    ``grad_X_col``)."""
    assigned = _assignments(function)
    reads: dict[str, int] = {}
    stores: dict[str, int] = {}

    class _Counter(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            reads[node.value] = reads.get(node.value, 0) + 1

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            if type(node.target) is cst.Name:
                stores[node.target.value] = stores.get(node.target.value, 0) + 1

    walk(function.body, _Counter())
    return [
        name
        for name in assigned
        if reads.get(name, 0) == stores.get(name, 0) and name in facts.tensors and all(v is not None for v in assigned[name])
    ]
