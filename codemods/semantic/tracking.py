"""Is this tensor tracked by autograd here? Is this position one where autograd is off?

A per-module, source-order data-flow analysis shared by the rules that must know what
autograd records (in-place ops, `.data`, graph breaks, hidden state). Usage:

    analysis = TrackingAnalysis.build(module, imports)
    for site in analysis.sites():             # every simple statement, in source order
        fact = analysis.tracked(expr, site.statement)   # Tracked | None
        site.position.grad_disabled, site.position.exempt

`tracked(expr, statement)` answers for the names as they are just *before* `statement`.
A `Tracked` says why the value is tracked (`Kind`), whether it is a leaf (an intended
update of it belongs under `no_grad`), whether autograd *saved* it for backward (a later
in-place op breaks backward), and whether another name or a view may share its storage
(an out-of-place rewrite would then change what the other name sees).

Sources of tracking: loops over `X.parameters()` / `X.named_parameters()`;
`nn.Parameter(...)`; torch factories with `requires_grad=True`; `.requires_grad_()` and
`.requires_grad = True`; `X.weight` / `X.bias` of known modules (`nn.*` constructors,
in-file `nn.Module` subclasses, `self.<attr>` modules of such classes, loop targets over
`.modules()`, first parameter of functions passed to `.apply(...)`, `isinstance(m, nn.X)`
guards); `self.<attr> = nn.Parameter(...)` / `register_parameter` attributes; inputs of a
module's `forward`; values unpacked from `ctx.saved_tensors`; results of tensor operations
on tracked values and of calls of known modules. Buffers (`register_buffer`) and running
statistics are never tracked.

Positions: `grad_disabled` under `no_grad` / `inference_mode` / `set_grad_enabled(False)`
(`with`, decorator, or a same-file caller doing so), inside `torch.autograd.Function`
methods (autograd runs them with grad off); `exempt` names code whose purpose is to
mutate tensors: `"optimizer"` (methods of `torch.optim.Optimizer` subclasses),
`"initializer"` (functions whose name ends in `_`, like `nn.init.*`).

Everything here is an *under*-approximation on purpose (fail closed): branches meet (a
name is tracked after an `if` only when tracked on every path), unknown callables return
untracked values, files that freeze parameters (`requires_grad = False`,
`requires_grad_(False)`) get no parameter facts at all.

Parameters of a module-level function are tracked when every same-file call passes a
graph-carrying (non-leaf) value (GAP's `normalize_and_scale(delta_im)` after
`delta_im = netG(image)`; see `CallGraph.parameter_arguments`): the function is walked
again with those facts, lazily, the first time a rule asks about one of its statements,
and a call of a function that hands such a parameter back returns a graph too.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Iterator

import libcst as cst

from autograd_fix.codemods.semantic.answer import Answer
from autograd_fix.codemods.semantic.callgraph import CallGraph
from autograd_fix.codemods.semantic.gradmode import enables_grad, function_disables_grad, with_disables_grad
from autograd_fix.codemods.semantic.graphflow import VALUE_INDEX_PAIRS
from autograd_fix.codemods.expressions import is_true
from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.names import name_tokens
from autograd_fix.codemods.semantic.nn_modules import module_class_name
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, MODULE_CALLEE_TOKENS, Role, Vocabulary
from autograd_fix.codemods.walk import SyntaxIndex, children_of, iter_descendants, walk

if TYPE_CHECKING:
    from autograd_fix.codemods.rule import RuleContext


class Kind(str, enum.Enum):
    """Why a value is tracked."""

    PARAMETER = "parameter"  # nn.Parameter, module weights, `.parameters()` loop targets
    REQUIRES_GRAD = "requires_grad"  # factory with requires_grad=True, requires_grad_()
    DERIVED = "derived"  # result of an op on a tracked value or of a module call
    FORWARD_INPUT = "forward_input"  # an input of nn.Module.forward
    SAVED_BY_CTX = "saved_by_ctx"  # unpacked from ctx.saved_tensors


LEAF_KINDS = frozenset({Kind.PARAMETER, Kind.REQUIRES_GRAD})


@dataclass(frozen=True)
class Tracked:
    """What is known about a tracked value at one point of the program."""

    kind: Kind
    #: autograd saved this value for backward: an in-place op on it breaks backward
    saved: bool = False
    #: another name, a container or a caller may hold the same tensor
    aliased: bool = False
    #: it is (or may be) a view of another tensor
    view: bool = False
    #: from a `for p in X.parameters()` loop (an update of it is intended)
    parameter_loop: bool = False

    @property
    def leaf(self) -> bool:
        return self.kind in LEAF_KINDS


@dataclass(frozen=True)
class ModuleRef:
    """A value known to be an `nn.Module`.

    `constructor` names its class when the binding says (`nn.Linear(...)` -> "Linear",
    an in-file subclass -> its name), and is None when only its use or its name says it
    is a module (`self.model` of a trainer, `model.fc`).
    """

    constructor: str | None = None
    #: its output is saved for backward by its last layer (`nn.Sequential(conv, bn, nn.ReLU())`)
    saves_output: bool = False


@dataclass(frozen=True)
class Position:
    """Where a statement sits: its function, class, and the grad mode there."""

    function: cst.FunctionDef | None
    class_name: str | None
    grad_disabled: bool
    #: "optimizer" | "initializer" | None: code whose purpose is to mutate tensors
    exempt: str | None
    #: inside `for p in X.parameters()` (or named_parameters)
    in_parameter_loop: bool = False


@dataclass
class State:
    """Names known at one point: tracked tensors and module objects."""

    tensors: dict[str, Tracked] = field(default_factory=dict)
    modules: dict[str, str | None] = field(default_factory=dict)

    def copy(self) -> "State":
        return State(dict(self.tensors), dict(self.modules))


@dataclass(frozen=True)
class Site:
    """One simple statement with the facts holding just before it."""

    statement: cst.SimpleStatementLine
    state: State
    position: Position
    #: the statement list it belongs to (by identity) and its index there
    block: int
    index: int
    #: on a line of several statements joined by `;`, the facts just before each of them
    #: after the first (by the small statement's identity): `x = leaf(); x += 1`
    within_line: dict[int, State] | None = None

    def state_before(self, small: cst.CSTNode | None) -> State:
        """The facts just before `small`, one of this line's statements (the line's own
        facts for its first statement, or when `small` is not given)."""
        if small is None or self.within_line is None:
            return self.state
        return self.within_line.get(id(small), self.state)


@dataclass
class ClassInfo:
    name: str
    module_like: bool
    optimizer: bool
    autograd_function: bool
    parameters: set[str] = field(default_factory=set)
    modules: dict[str, str | None] = field(default_factory=dict)
    buffers: set[str] = field(default_factory=set)
    #: submodules whose last layer saves its output for backward (`nn.Sequential(..., nn.ReLU())`)
    output_saving: set[str] = field(default_factory=set)
    #: attributes also bound to something else (another module, a parameter): not `output_saving`
    not_saving: set[str] = field(default_factory=set)
    #: `nn.ModuleList` submodules: the last layer of each module put in (None: unknown)
    items: dict[str, list[str | None]] = field(default_factory=dict)
    #: `nn.ModuleList` submodules every one of whose items saves its output
    saving_items: set[str] = field(default_factory=set)


# -- vocabulary ------------------------------------------------------------------------
#: methods whose result carries no gradient (or is not a tensor)
NON_DIFFERENTIABLE_METHODS = frozenset(
    {"detach", "detach_", "item", "tolist", "numpy", "size", "dim", "numel", "argmax", "argmin", "argsort",
     "long", "int", "bool", "byte", "short", "char", "nonzero", "eq", "ne", "lt", "le", "gt", "ge",
     "isnan", "isinf", "isfinite", "sign", "data_ptr", "stride", "storage", "untyped_storage",
     "is_contiguous", "element_size", "all", "any", "equal", "allclose", "zero_grad", "named_parameters",
     "parameters", "state_dict", "keys", "values", "items", "split", "chunk", "unbind", "max", "min",
     "sort", "topk", "kthvalue", "mode", "median", "tensor_split", "sum_to_size", "new_zeros", "new_ones",
     "new_empty", "new_full", "new_tensor", "zeros_like", "cpu_", "type", "get_device", "backward",
     "register_hook", "retain_grad", "requires_grad_", "apply", "modules", "children", "eval", "train"}
)
#: methods returning a view of the receiver
VIEW_METHODS = frozenset(
    {"view", "view_as", "reshape", "reshape_as", "transpose", "t", "permute", "squeeze", "unsqueeze", "expand",
     "expand_as", "narrow", "select", "unfold", "as_strided", "diagonal", "flatten", "unflatten", "movedim",
     "swapaxes", "swapdims", "real", "imag", "T", "mT", "H", "mH", "contiguous", "__getitem__"}
)
#: torch functions whose result carries no gradient
NON_DIFFERENTIABLE_FUNCTIONS = frozenset(
    {"zeros_like", "ones_like", "empty_like", "rand_like", "randn_like", "randint_like", "full_like",
     "argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite",
     "nonzero", "bucketize", "searchsorted", "numel", "is_tensor", "equal", "allclose", "sign",
     "split", "chunk", "unbind", "max", "min", "sort", "topk", "kthvalue", "mode", "median", "where_",
     "no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "tensor_split", "meshgrid",
     "broadcast_tensors", "unique", "histc", "bincount"}
)
#: torch functions returning a view of their first argument
VIEW_FUNCTIONS = frozenset(
    {"transpose", "t", "permute", "squeeze", "unsqueeze", "narrow", "select", "diagonal", "flatten",
     "reshape", "movedim", "swapaxes", "swapdims", "view_as_real", "view_as_complex", "as_strided"}
)
#: ops that save their *output* for backward (sigmoid'(x) = y (1 - y), ...)
OUTPUT_SAVING_OPS = frozenset({"sigmoid", "tanh", "exp", "softmax", "log_softmax", "relu", "sqrt", "rsqrt", "reciprocal"})
#: ops that save their (first) *input* for backward
INPUT_SAVING_OPS = frozenset(
    {"log", "log1p", "log2", "log10", "sin", "cos", "tan", "abs", "erf", "atan", "asin", "acos", "pow",
     "square", "norm", "sinh", "cosh", "layer_norm", "batch_norm", "group_norm", "instance_norm",
     "conv1d", "conv2d", "conv3d", "softplus", "gelu", "silu", "mish", "elu", "leaky_relu", "hardtanh",
     "relu6", "logsigmoid", "prod", "cumprod"}
)
#: ops with two tensor operands that save each operand when the other requires grad
BILINEAR_OPS = frozenset({"mul", "matmul", "mm", "bmm", "mv", "dot", "outer", "einsum", "div", "linear"})
#: nn modules that save their output
OUTPUT_SAVING_MODULES = frozenset({"Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Softmax2d", "ReLU"})
#: nn modules that save their input (with weights that require grad)
INPUT_SAVING_MODULES = frozenset(
    {"Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
     "LayerNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
     "InstanceNorm3d", "LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d", "RMSNorm", "GELU", "SiLU",
     "Softplus", "ELU", "LeakyReLU", "Mish", "Hardtanh", "ReLU6", "PReLU"}
)
#: nn modules whose call returns a tuple or a PackedSequence, not a tensor
NON_TENSOR_MODULES = frozenset(
    {"LSTM", "GRU", "RNN", "LSTMCell", "MultiheadAttention", "AdaptiveLogSoftmaxWithLoss", "ModuleList",
     "ModuleDict", "ParameterList", "ParameterDict", "Identity", "Flatten", "Unflatten", "Dropout"}
)
#: modules returning a tuple of tensors (unpacked, each element carries the graph) ...
_TENSOR_TUPLE_MODULES = frozenset({"LSTMCell", "MultiheadAttention"})
#: ... and recurrent ones, whose first output is a PackedSequence for a packed input
_TUPLE_MODULES = _TENSOR_TUPLE_MODULES | {"LSTM", "GRU", "RNN"}
_PARAMETER_ITERATORS = frozenset({"parameters", "named_parameters"})
_MODULE_ITERATORS = frozenset({"modules", "children", "named_modules", "named_children"})
_PARAMETER_NAMES = ("weight", "bias")
_NUMBER = (cst.Integer, cst.Float, cst.Imaginary)


def _last(name: str | None) -> str:
    return (name or "").rsplit(".", 1)[-1]


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    """The `name=` argument of `call`, if given."""
    for argument in call.args:
        if argument.keyword is not None and argument.keyword.value == name:
            return argument
    return None


def positional(call: cst.Call) -> list[cst.BaseExpression]:
    return [a.value for a in call.args if a.keyword is None and not a.star]


def is_module_function(call: cst.Call, imports: ImportIndex) -> bool:
    """`torch.relu(x)`, `F.relu(x)`, `nn.init.normal_(w)`: a function of an imported module."""
    return imports.qualified_name(call.func) is not None


# -- the analysis ----------------------------------------------------------------------
class TrackingAnalysis:
    """Tracking facts and positions for every simple statement of one module."""

    def __init__(self, module: cst.Module, imports: ImportIndex, roles: Vocabulary = DEFAULT_VOCABULARY) -> None:
        self.module = module
        self.imports = imports
        #: words of a callee taken for an nn.Module (`roles.MODULE_CALLEE_TOKENS`, and the
        #: project's model and criterion names)
        self.module_words = MODULE_CALLEE_TOKENS | roles.added(Role.MODEL, Role.CRITERION)
        self.classes: dict[str, ClassInfo] = {}
        self._sites: list[Site] = []
        #: one-line bodies (`if x: stmt`), on stand-in lines outside the tree
        self._suite_sites: list[Site] = []
        self._by_statement: dict[int, Site] = {}
        self.freezes_parameters = False
        #: last names of callables called or passed under no_grad (from the call graph)
        self.no_grad_callees: set[str] = set()
        self.apply_functions: set[str] = set()
        #: the file's call graph, asked for only when a call of a module-level function
        #: of the file needs what it returns (None: such calls stay unknown)
        self.call_graph: Callable[[], CallGraph] | None = None
        #: the file's node index (set by `build`): the per-statement searches read it
        self.syntax: SyntaxIndex | None = None
        self._top_level = {s.name.value for s in module.body if type(s) is cst.FunctionDef}
        self._returned_leaves: dict[str, Tracked | None] = {}
        #: `factory_module`'s answers by function name, once the prepass has read the classes
        self._factories: dict[str, cst.Call | None] | None = None
        #: function id -> (state, position) its walk started from, to walk it again seeded
        self._entries: dict[int, tuple[State, Position]] = {}
        #: function id -> its sites walked with the parameters' call-site facts (None: none)
        self._seeded: dict[int, dict[int, Site] | None] = {}
        self._walked = False

    @classmethod
    def build(
        cls,
        module: cst.Module,
        imports: ImportIndex,
        roles: Vocabulary = DEFAULT_VOCABULARY,
        call_graph: "Callable[[], CallGraph] | None" = None,
        syntax: SyntaxIndex | None = None,
    ) -> "TrackingAnalysis":
        analysis = cls(module, imports, roles)
        syntax = analysis.syntax = syntax or SyntaxIndex(module)
        if call_graph is None:
            graph = CallGraph.build(module, imports, syntax)
            call_graph = lambda: graph  # noqa: E731
        analysis.call_graph = call_graph
        # the call graph knows which callees run under no_grad (one answer for the file)
        analysis.no_grad_callees = call_graph().no_grad_callees
        prepass = _PrePass(analysis)
        syntax.walk(module, prepass)
        analysis._factories = {}  # the classes are known: a factory's answer no longer changes
        _Walker(analysis).run(module)
        analysis._walked = True
        return analysis

    def walk(self, node: cst.CSTNode, visitor: object) -> None:
        """`walk`, read off the file's index when the analysis has one."""
        if self.syntax is not None:
            self.syntax.walk(node, visitor)
        else:
            walk(node, visitor)

    # -- queries -----------------------------------------------------------------------
    def sites(self) -> Iterator[Site]:
        """Every simple statement, in source order, with its facts."""
        return iter(self._sites)

    def suite_sites(self) -> Iterator[Site]:
        """The one-line bodies of compound statements (`if flag: out.append(x.data)`), each
        on a stand-in line that is not in the tree: edit the nodes inside, never the line."""
        return iter(self._suite_sites)

    def site(self, statement: cst.CSTNode) -> Site | None:
        """The statement's facts; in a function whose parameters get facts from every
        same-file call site, the facts of the walk seeded with them."""
        site = self._by_statement.get(id(statement))
        if site is None or site.position.function is None:
            return site
        seeded = self._seeded_sites(site.position.function)
        return seeded.get(id(statement), site) if seeded else site

    def _seeded_sites(self, function: cst.FunctionDef) -> dict[int, Site] | None:
        """`function` walked again with its parameters' call-site facts (once, on first use)."""
        key = id(function)
        if key in self._seeded:
            return self._seeded[key]
        self._seeded[key] = None  # a recursive question meanwhile gets the plain facts
        seeds = self.parameter_facts(function)
        entry = self._entries.get(key)
        if seeds is None or (seeds and entry is None and not self._walked):
            del self._seeded[key]  # a call site, or the function, not walked yet: ask again later
        elif seeds and entry is not None:
            walker = _Walker(self, recording=False)
            walker.function(function, entry[0], entry[1], seeds)
            self._seeded[key] = walker.by_statement
        return self._seeded.get(key)

    def parameter_facts(self, function: cst.FunctionDef) -> dict[str, Tracked] | None:
        """Parameters every same-file call of `function` passes a graph-carrying (non-leaf)
        value to, each as a derived value a caller still holds (a module, even one whose
        construction looks like a forward pass, is not one). Empty when a caller may be
        unknown (see `CallGraph.parameter_arguments`); None while a call site is not walked."""
        graph = self.call_graph() if self.call_graph is not None else None
        facts = graph.facts(function) if graph is not None else None
        sites = graph.parameter_arguments(facts) if graph is not None and facts is not None else None
        seeds: dict[str, Tracked] | None = None
        for caller, call, bound in sites or ():
            site = self.site(_statement_of(caller.node if caller is not None else self.module, call, self.syntax))
            if site is None:
                return None if not self._walked else {}
            evaluator = _Evaluator(self, site.state, site.position)
            here = {}
            for name, value in bound.items():
                fact = evaluator.value(value)
                if fact is not None and not fact.leaf and evaluator.module_of(value) is None:
                    here[name] = Tracked(Kind.DERIVED, saved=fact.saved, aliased=True)
            met = here if seeds is None else {n: _meet_fact(seeds[n], here[n]) for n in seeds.keys() & here.keys()}
            seeds = {n: fact for n, fact in met.items() if fact is not None}
        return seeds or {}

    def returned_argument(self, call: cst.Call) -> Tracked | None:
        """A call of a module-level function whose every `return` hands back one of its
        parameters (`return delta_im`), graph-carrying there in the seeded walk: the
        caller gets a graph back."""
        name = call.func.value if type(call.func) is cst.Name else None
        if name is None or name not in self._top_level or self.call_graph is None:
            return None
        graph = self.call_graph()
        callee = graph.callee(name)
        values = graph.returned_values(name)
        if callee is None or not values:
            return None
        params = {p.name.value for p in (*callee.node.params.posonly_params, *callee.node.params.params)}
        if not all(type(v) is cst.Name and v.value in params for v in values):
            return None
        seeded = self._seeded_sites(callee.node)
        if not seeded:
            return None
        for value in values:
            site = seeded.get(id(_statement_of(callee.node, value, self.syntax)))
            if site is None or _Evaluator(self, site.state, site.position).value(value) is None:
                return None
        return Tracked(Kind.DERIVED, aliased=True)

    def returned_forward(self, call: cst.Call) -> Tracked | None:
        """A call of a module-level function whose every `return` hands back a value its
        own (already walked) body computed from a forward pass or ops on one (`def
        compare(x): recon_x, _, _ = vae(x); return torch.cat([x, recon_x])`): the caller
        gets a graph back. Leaves and modules are not this answer; a function not walked
        yet, or a recursive one, is unknown."""
        name = call.func.value if type(call.func) is cst.Name else None
        if name is None or name not in self._top_level or self.call_graph is None:
            return None
        graph = self.call_graph()
        callee = graph.callee(name)
        values = graph.returned_values(name)
        if callee is None or not values:
            return None
        for value in values:
            site = self._by_statement.get(id(_statement_of(callee.node, value, self.syntax)))
            if site is None:
                return None
            evaluator = _Evaluator(self, site.state, site.position)
            fact = evaluator.value(value)
            if fact is None or fact.leaf or evaluator.module_of(value) is not None:
                return None
        return Tracked(Kind.DERIVED, aliased=True)

    def tracked(
        self, expression: cst.BaseExpression, statement: cst.CSTNode, small: cst.CSTNode | None = None
    ) -> Tracked | None:
        """Is `expression` tracked by autograd just before `statement`, or just before
        `small`, one of the statements `statement` joins with `;`? (None: not shown)"""
        site = self.site(statement)
        if site is None:
            return None
        return _Evaluator(self, site.state_before(small), site.position).value(expression)

    def is_module(self, expression: cst.BaseExpression, statement: cst.CSTNode) -> bool:
        """Does this analysis read `expression` as an `nn.Module` just before `statement`?
        Its reading counts names of the module vocabulary (`model`, `criterion`) too, so it
        is a tie-break, not an answer: rules ask `SemanticModel.is_module` (or
        `likely_module`, which falls back to this only where the evidence is unknown)."""
        site = self.site(statement)
        if site is None:
            return False
        return _Evaluator(self, site.state, site.position).module_of(expression) is not None

    def built_module(self, expression: cst.BaseExpression, statement: cst.CSTNode) -> bool:
        """Is `expression` a name or `self.X` that a module constructor bound, as the
        statements before `statement` show? Evidence only: unlike `is_module`, no name
        tokens (`model`, `criterion`) decide (see `SemanticModel.is_module`)."""
        site = self.site(statement)
        if site is None:
            return False
        return _Evaluator(self, site.state, site.position).built_module(expression)

    def saves_output(self, expression: cst.BaseExpression, statement: cst.CSTNode) -> bool:
        """Does the op computing `expression` save its own output (sigmoid, tanh, softmax)?"""
        site = self.site(statement)
        if site is None:
            return False
        return _Evaluator(self, site.state, site.position).saves_output(expression)

    @classmethod
    def for_context(cls, context: "RuleContext") -> "TrackingAnalysis":
        """The analysis of a `RuleContext`'s module, built once and shared by its rules."""
        return context.semantic.tracking

    def position(self, statement: cst.CSTNode) -> Position | None:
        site = self.site(statement)
        return site.position if site is not None else None

    def module_constructor(self, call: cst.BaseExpression) -> str | None:
        """`nn.Linear(...)` -> 'Linear'; in-file nn.Module subclasses -> their name."""
        if type(call) is not cst.Call:
            return None
        qualified = self.imports.qualified_name(call.func)
        if qualified is not None:
            last = _last(qualified)
            if qualified.startswith("torch.nn.") and module_class_name(qualified) is Answer.YES and last != "Module":
                return last
            return None
        name = dotted_name(call.func)
        info = self.classes.get(name or "")
        if info is not None and info.module_like:
            return name
        built = self.factory_module(call)
        return self.module_constructor(built) if built is not None else None

    def factory_module(self, call: cst.Call) -> cst.Call | None:
        """The module construction a same-file factory function returns: `ConvModule(...)`
        whose only `return` is `nn.Sequential(conv, bn, relu)` (mmcv-style stand-ins).
        The returned call must construct directly (no factory of a factory), so this
        cannot recurse; a factory with several returns stays unknown."""
        if type(call.func) is not cst.Name or self.call_graph is None or call.func.value not in self._top_level:
            return None
        name = call.func.value
        if self._factories is None:
            return self._factory_module(name)
        if name not in self._factories:
            self._factories[name] = self._factory_module(name)
        return self._factories[name]

    def _factory_module(self, name: str) -> cst.Call | None:
        values = self.call_graph().returned_values(name)  # type: ignore[misc]
        if not values or len(values) != 1 or type(values[0]) is not cst.Call:
            return None
        returned = values[0]
        if self.imports.qualified_name(returned.func) is None and dotted_name(returned.func) not in self.classes:
            return None
        return returned

    def last_layer(self, value: cst.BaseExpression) -> str | None:
        """The constructor of the layer that computes a built module's output: the module
        itself, or the last layer of an inline `nn.Sequential(...)`, through a same-file
        factory. None when unknown (a starred or empty `Sequential`)."""
        if type(value) is not cst.Call:
            return None
        call = self.factory_module(value) or value
        constructor = self.module_constructor(call)
        if constructor != "Sequential":
            return constructor
        layers = call.args
        if not layers or layers[-1].star or layers[-1].keyword is not None:
            return None
        return self.last_layer(layers[-1].value)

    def returned_leaf(self, name: str) -> Tracked | None:
        """A call of same-file function `name` makes a fresh leaf that requires grad when
        every value it returns does (`return (torch.randn(size) * std).requires_grad_()`,
        `torch.zeros(n, requires_grad=True)`, `nn.Parameter(...)`), read with no outer
        facts: a returned argument or global stays unknown."""
        if self.call_graph is None or name not in self._top_level:
            return None
        if name not in self._returned_leaves:
            self._returned_leaves[name] = None  # a recursive call is unknown
            values = self.call_graph().returned_values(name)
            if values:
                evaluator = _Evaluator(self, State(), Position(None, None, False, None))
                facts = [evaluator.value(value) for value in values]
                if all(fact is not None and fact.leaf for fact in facts):
                    kinds = {fact.kind for fact in facts}  # type: ignore[union-attr]
                    self._returned_leaves[name] = Tracked(kinds.pop() if len(kinds) == 1 else Kind.REQUIRES_GRAD)
        return self._returned_leaves[name]

    def is_parameter_constructor(self, call: cst.BaseExpression) -> bool:
        """`nn.Parameter(t)` (not `requires_grad=False`)."""
        if type(call) is not cst.Call:
            return False
        qualified = self.imports.qualified_name(call.func)
        if qualified not in {"torch.nn.Parameter", "torch.nn.parameter.Parameter"}:
            return False
        flag = keyword(call, "requires_grad")
        args = positional(call)
        if flag is not None:
            return is_true(flag.value)
        if len(args) >= 2:
            return is_true(args[1])
        return True


# -- pre-pass: classes, freezes, no_grad callers, .apply(fn) ----------------------------
class _PrePass(cst.CSTVisitor):
    def __init__(self, analysis: TrackingAnalysis) -> None:
        super().__init__()
        self.analysis = analysis
        self.classes: list[ClassInfo] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        imports = self.analysis.imports
        bases = [imports.qualified_name(b.value) or dotted_name(b.value) or "" for b in node.bases]
        module_like = self.analysis.call_graph().class_answers.get(node.name.value) is Answer.YES
        optimizer = any(b.endswith("Optimizer") or b.startswith("torch.optim") for b in bases)
        function = any(b in {"torch.autograd.Function", "torch.autograd.function.Function"} for b in bases)
        info = ClassInfo(node.name.value, module_like and not function, optimizer, function)
        self.analysis.classes[info.name] = info
        self.classes.append(info)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.classes.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        for target in node.targets:
            t = target.target
            if type(t) is cst.Attribute and t.attr.value == "requires_grad" and not is_true(value):
                self.analysis.freezes_parameters = True
            if self.classes and type(t) is cst.Attribute and dotted_name(t.value) == "self":
                info = self.classes[-1]
                self._note_layers(info, t.attr.value, value)
                if self.analysis.is_parameter_constructor(value):
                    info.parameters.add(t.attr.value)
                else:
                    constructor = self.analysis.module_constructor(value)
                    if constructor is not None:
                        info.modules[t.attr.value] = constructor

    def _note_layers(self, info: ClassInfo, attribute: str, value: cst.BaseExpression) -> None:
        """What `self.<attribute> = value` says about the layer computing its output; every
        binding of the attribute must agree for the output to count as saved."""
        saving = info.output_saving if self.analysis.last_layer(value) in OUTPUT_SAVING_MODULES else info.not_saving
        saving.add(attribute)
        if self.analysis.module_constructor(value) == "ModuleList":
            info.items.setdefault(attribute, []).extend(self._list_items(value))
        elif attribute in info.items:
            info.items[attribute].append(None)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        name = dotted_name(node.target)
        if self.classes and name is not None and name.startswith("self.") and name[5:] in self.classes[-1].items:
            self.classes[-1].items[name[5:]].append(None)  # `self.layers += [...]`: not followed

    def _list_items(self, value: cst.BaseExpression) -> list[str | None]:
        """The last layers of the modules `nn.ModuleList(...)` starts with (None: unknown)."""
        args = positional(value) if type(value) is cst.Call else []
        if type(value) is cst.Call and len(value.args) != len(args):
            return [None]
        if not args:
            return []
        if type(args[0]) is cst.List:
            return [self.analysis.last_layer(e.value) if type(e) is cst.Element else None for e in args[0].elements]
        if type(args[0]) in (cst.ListComp, cst.GeneratorExp):
            return [self.analysis.last_layer(args[0].elt)]
        return [None]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        method = func.attr.value if type(func) is cst.Attribute else None
        if method == "requires_grad_":
            args = [a.value for a in node.args]
            if args and not is_true(args[0]):
                self.analysis.freezes_parameters = True
        if method == "apply" and node.args and type(node.args[0].value) is cst.Name:
            self.analysis.apply_functions.add(node.args[0].value.value)
        if method in {"register_parameter", "register_buffer"} and self.classes and dotted_name(func.value) == "self":
            args = positional(node)
            if args and type(args[0]) is cst.SimpleString and isinstance(args[0].evaluated_value, str):
                attribute = args[0].evaluated_value
                if method == "register_buffer":
                    self.classes[-1].buffers.add(attribute)
                elif len(args) > 1 and self.analysis.is_parameter_constructor(args[1]):
                    self.classes[-1].parameters.add(attribute)
        owner = dotted_name(func.value) if type(func) is cst.Attribute else None
        if self.classes and owner is not None and owner.startswith("self.") and owner[5:] in self.classes[-1].items:
            # `self.lateral_convs.append(ConvModule(...))`; any other change makes its items unknown
            args = positional(node)
            layer = self.analysis.last_layer(args[0]) if method == "append" and len(args) == 1 == len(node.args) else None
            self.classes[-1].items[owner[5:]].append(layer)
        if method in {"add_module", "register_module"} and self.classes and dotted_name(func.value) == "self":
            # `self.add_module("embed", nn.Embedding(...))` registers `self.embed` as `self.embed = ...` would
            args = positional(node)
            if len(args) > 1 and type(args[0]) is cst.SimpleString and isinstance(args[0].evaluated_value, str):
                constructor = self.analysis.module_constructor(args[1])
                if constructor is not None:
                    self.classes[-1].modules[args[0].evaluated_value] = constructor

    def leave_Module(self, original_node: cst.Module) -> None:
        for info in self.analysis.classes.values():
            info.parameters -= info.buffers
            for name in info.buffers:
                info.modules.pop(name, None)
            info.output_saving -= info.not_saving
            info.saving_items = {name for name, layers in info.items.items()
                                 if layers and all(layer in OUTPUT_SAVING_MODULES for layer in layers)}


# -- expression evaluation -------------------------------------------------------------
class _Evaluator:
    """Evaluates an expression against a `State`: tracked value, module, or nothing."""

    def __init__(self, analysis: TrackingAnalysis, state: State, position: Position) -> None:
        self.analysis = analysis
        self.imports = analysis.imports
        self.state = state
        self.position = position

    @property
    def class_info(self) -> ClassInfo | None:
        return self.analysis.classes.get(self.position.class_name or "")

    def built_module(self, node: cst.BaseExpression) -> bool:
        """`module_of` without its name-token guesses: a name bound to a module, `self` of
        a module class, or `self.X` its class built from a module."""
        info = self.class_info
        if type(node) is cst.Name:
            return node.value in self.state.modules or (node.value == "self" and info is not None and info.module_like)
        if type(node) is cst.Attribute and dotted_name(node.value) == "self":
            return info is not None and node.attr.value in info.modules
        return False

    def module_of(self, node: cst.BaseExpression) -> ModuleRef | None:
        """The module `node` is known to be (its constructor when known); None if not one."""
        if type(node) is cst.Name:
            if node.value in self.state.modules:
                return ModuleRef(self.state.modules[node.value])
            if node.value not in self.state.tensors and has_name_tokens(node.value, self.analysis.module_words):
                return ModuleRef()  # `model(x)`, `criterion(out, y)`: named as a module, called as one
            if node.value == "self" and self.class_info is not None and self.class_info.module_like:
                return ModuleRef(self.class_info.name)
            return None
        if type(node) is cst.Attribute:
            if dotted_name(node.value) == "self":
                info = self.class_info
                if info is not None and node.attr.value in info.modules:
                    return ModuleRef(info.modules[node.attr.value], node.attr.value in info.output_saving)
                if (info is None or node.attr.value not in info.parameters | info.buffers) and has_name_tokens(
                    node.attr.value, self.analysis.module_words
                ):
                    return ModuleRef()  # `self.model` of a trainer
                return None
            if node.attr.value not in _PARAMETER_NAMES and self.module_of(node.value) is not None:
                return ModuleRef()  # `model.fc`: a submodule of a known module
        if type(node) is cst.Call:  # `nn.ConstantPad2d((0, -1, -1, 0), 0)(x)`: built and called at once
            constructor = self.analysis.module_constructor(node)
            return ModuleRef(constructor) if constructor is not None else None
        if type(node) is cst.Subscript and type(node.value) is cst.Attribute and dotted_name(node.value.value) == "self":
            info, name = self.class_info, node.value.attr.value
            if info is not None and info.modules.get(name) == "ModuleList":
                return ModuleRef(None, name in info.saving_items)  # `self.lateral_convs[i]`
        return None

    def callee_module(self, func: cst.BaseExpression) -> ModuleRef | None:
        """The module a call of `func` runs the forward of (as `module_of`); None if none.

        A call through an attribute of an object only *named* like a model is a method
        call, not a forward pass: `decoder.get_frames_at(i)` returns whatever the method
        returns (a torchcodec FrameBatch), `decoder(z)` and `model.encoder(x)` run forwards.
        """
        owner = self.module_of(func)
        if owner is None or type(func) is not cst.Attribute or dotted_name(func.value) == "self":
            return owner
        if func.attr.value in _PARAMETER_NAMES:
            return None
        if has_name_tokens(func.attr.value, self.analysis.module_words):
            return owner  # `model.encoder(x)`, `self.model.backbone(x)`
        base = self.module_of(func.value)
        info = self.analysis.classes.get(base.constructor) if base is not None and base.constructor else None
        if info is not None and func.attr.value in info.modules:
            return ModuleRef(info.modules[func.attr.value])  # `net.fc(x)` of an in-file Module class
        return None

    def parameter_attribute(self, node: cst.Attribute) -> bool:
        """`self.w` registered as a Parameter, or `X.weight` / `X.bias` of a known module."""
        if self.analysis.freezes_parameters:
            return False
        info = self.class_info
        if dotted_name(node.value) == "self" and info is not None and info.module_like:
            if node.attr.value in info.parameters:
                return True
        if node.attr.value in _PARAMETER_NAMES:
            owner = self.module_of(node.value)
            return owner is not None and owner.constructor not in NON_TENSOR_MODULES - {"LSTM", "GRU", "RNN"}
        return False

    def value(self, node: cst.BaseExpression) -> Tracked | None:
        if type(node) is cst.Name:
            return self.state.tensors.get(node.value)
        if type(node) is cst.Attribute:
            if node.attr.value in {"T", "mT", "H", "mH"}:
                base = self.value(node.value)
                return replace(base, view=True, aliased=True) if base is not None else None
            if self.parameter_attribute(node):
                return Tracked(Kind.PARAMETER)
            return None
        if type(node) is cst.Subscript:
            if self.value_of_pair(node.value) is not None and _index_is(node, 0):
                return Tracked(Kind.DERIVED)  # `next_q.max(1)[0]`: the values carry the graph, not the indices
            base = self.value(node.value)
            return replace(base, view=True, aliased=True, kind=_derived_kind(base)) if base is not None else None
        if type(node) is cst.Call:
            return self.call(node)
        if type(node) is cst.BinaryOperation:
            if type(node.operator) in (cst.FloorDivide, cst.BitAnd, cst.BitOr, cst.BitXor, cst.LeftShift, cst.RightShift):
                return None
            if self.value(node.left) is not None or self.value(node.right) is not None:
                return Tracked(Kind.DERIVED)
            return None
        if type(node) is cst.UnaryOperation:
            if type(node.operator) in (cst.Minus, cst.Plus) and self.value(node.expression) is not None:
                return Tracked(Kind.DERIVED)
            return None
        if type(node) is cst.IfExp:
            return _meet_fact(self.value(node.body), self.value(node.orelse))
        return None

    def call(self, node: cst.Call) -> Tracked | None:
        imports = self.imports
        if self.analysis.is_parameter_constructor(node):
            return Tracked(Kind.PARAMETER)
        qualified = imports.qualified_name(node.func)
        flag = keyword(node, "requires_grad")
        if qualified is not None and qualified.startswith("torch.") and flag is not None and is_true(flag.value):
            return Tracked(Kind.REQUIRES_GRAD)
        if qualified is not None:
            if not qualified.startswith("torch.") or qualified.startswith(("torch.nn.utils", "torch.nn.init", "torch.autograd", "torch.utils", "torch.optim", "torch.cuda", "torch.distributed", "torch.jit")):
                return None
            last = _last(qualified)
            if last in NON_DIFFERENTIABLE_FUNCTIONS or last[:1].isupper() or last.endswith("_"):
                return None
            args = [self.value(a.value) for a in node.args]
            if not any(args) and not any(self.element_value(a.value) for a in node.args):
                return None  # `torch.cat([x, recon_x])`: a display of tracked tensors counts
            if _inplace_keyword(node) and args[0] is not None:
                first = node.args[0].value  # `F.relu(x, inplace=True)` is x
                return replace(args[0], aliased=args[0].aliased or type(first) is cst.Name)
            if last in VIEW_FUNCTIONS and args and args[0] is not None:
                return Tracked(Kind.DERIVED, view=True, aliased=True)
            return Tracked(Kind.DERIVED)
        owner = self.callee_module(node.func)
        if owner is not None:
            return self._module_call(owner)
        if type(node.func) is cst.Attribute:
            method = node.func.attr.value
            receiver = node.func.value
            if method == "requires_grad_":
                if node.args and not is_true(node.args[0].value):
                    return None
                return Tracked(Kind.REQUIRES_GRAD)
            receiver_module = self.module_of(receiver) if method == "forward" else None
            if receiver_module is not None:
                return self._module_call(receiver_module)
            base = self.value(receiver)
            if base is None:
                return None  # an unknown object's method (fail closed)
            if method in NON_DIFFERENTIABLE_METHODS:
                return None
            if method in VIEW_METHODS:
                return Tracked(Kind.DERIVED, view=True, aliased=True)
            if method.endswith("_"):
                return replace(base, aliased=True)  # in-place returns its receiver
            return Tracked(Kind.DERIVED)
        if type(node.func) is cst.Name:  # `weights = init_params(shape)`, `x = normalize(x)`
            return (
                self.analysis.returned_leaf(node.func.value)
                or self.analysis.returned_argument(node)
                or self.analysis.returned_forward(node)
            )
        return None

    def element_value(self, node: cst.BaseExpression) -> Tracked | None:
        """A tracked element of a list or tuple display (`[x, recon_x]`), derived."""
        if type(node) in (cst.List, cst.Tuple) and any(self.value(e.value) is not None for e in node.elements):
            return Tracked(Kind.DERIVED)
        return None

    def value_of_pair(self, node: cst.BaseExpression) -> Tracked | None:
        """`x.max(dim)` / `x.topk(k)` of a tracked `x`: a (values, indices) pair whose
        values carry the graph (None for anything else, `x.max()` included)."""
        if (
            type(node) is cst.Call
            and type(node.func) is cst.Attribute
            and node.func.attr.value in VALUE_INDEX_PAIRS
            and node.args
            and self.value(node.func.value) is not None
        ):
            return Tracked(Kind.DERIVED)
        return None

    def unpacked(self, node: cst.BaseExpression) -> tuple[Tracked | None, slice]:
        """The fact for the names a tuple target unpacks `node` into, and which elements
        get it: every output of a module's forward (`recon_x, mu, logvar = vae(x)`); the
        states of a recurrent module, not its output, which is a PackedSequence for a
        packed input (`out, (h, c) = lstm(packed)`); the values of a (values, indices) pair."""
        if type(node) is cst.Call:
            owner = self.callee_module(node.func)
            if owner is not None and owner.constructor in _TUPLE_MODULES:
                return Tracked(Kind.DERIVED, aliased=True), slice(0 if owner.constructor in _TENSOR_TUPLE_MODULES else 1, None)
            if owner is not None and owner.constructor not in NON_TENSOR_MODULES:
                return Tracked(Kind.DERIVED, aliased=True), slice(None)
            if self.value_of_pair(node) is not None:
                return Tracked(Kind.DERIVED), slice(0, 1)
        return None, slice(0)

    def _module_call(self, owner: ModuleRef) -> Tracked | None:
        if owner.constructor in NON_TENSOR_MODULES:
            return None
        return Tracked(Kind.DERIVED)

    # -- what autograd saves ------------------------------------------------------------
    def saves_output(self, node: cst.BaseExpression) -> bool:
        """Does the op computing `node` save its own output (sigmoid, tanh, exp, softmax)?"""
        if type(node) is not cst.Call:
            return False
        qualified = self.imports.qualified_name(node.func)
        if qualified is not None:
            return qualified.startswith("torch.") and _last(qualified) in OUTPUT_SAVING_OPS and any(
                self.value(a) is not None for a in positional(node)[:1]
            )
        if type(node.func) is cst.Attribute:
            method = node.func.attr.value
            if method in OUTPUT_SAVING_OPS and self.value(node.func.value) is not None:
                return True
        owner = self.module_of(node.func)
        saving = owner is not None and (owner.constructor in OUTPUT_SAVING_MODULES or owner.saves_output)
        return saving and any(
            self.value(a) is not None for a in positional(node)[:1]
        )

    def saved_inputs(self, node: cst.CSTNode) -> set[str]:
        """Names whose current values the ops inside `node` save for backward."""
        finder = _SavedInputFinder(self)
        self.analysis.walk(node, finder)
        return finder.saved


def _derived_kind(base: Tracked) -> Kind:
    return base.kind if base.kind in LEAF_KINDS else Kind.DERIVED


def _meet_fact(a: Tracked | None, b: Tracked | None) -> Tracked | None:
    """A fact holding on both paths (None when either path shows nothing)."""
    if a is None or b is None or a.leaf != b.leaf:
        return None
    return Tracked(
        kind=a.kind if a.kind == b.kind else Kind.DERIVED if not a.leaf else Kind.REQUIRES_GRAD,
        saved=a.saved and b.saved,
        aliased=a.aliased or b.aliased,
        view=a.view or b.view,
        parameter_loop=a.parameter_loop and b.parameter_loop,
    )


def meet(a: State, b: State) -> State:
    """Facts holding on both paths."""
    tensors = {}
    for name in a.tensors.keys() & b.tensors.keys():
        fact = _meet_fact(a.tensors[name], b.tensors[name])
        if fact is not None:
            tensors[name] = fact
    modules = {n: a.modules[n] for n in a.modules.keys() & b.modules.keys()}
    return State(tensors, modules)


class _SavedInputFinder(cst.CSTVisitor):
    def __init__(self, evaluator: _Evaluator) -> None:
        super().__init__()
        self.evaluator = evaluator
        self.saved: set[str] = set()

    def _mark(self, node: cst.BaseExpression) -> None:
        if type(node) is cst.Name and self.evaluator.value(node) is not None:
            self.saved.add(node.value)

    def _pair(self, left: cst.BaseExpression, right: cst.BaseExpression, divide: bool = False) -> None:
        """`a * b` saves each operand when the other requires grad; `a / b` also saves b."""
        value = self.evaluator.value
        if value(right) is not None:
            self._mark(left)
            if divide:
                self._mark(right)
        if value(left) is not None:
            self._mark(right)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if type(node.operator) in (cst.Multiply, cst.MatrixMultiply):
            self._pair(node.left, node.right)
        elif type(node.operator) is cst.Divide:
            self._pair(node.left, node.right, divide=True)
        elif type(node.operator) is cst.Power:
            exponent = node.right
            if not (type(exponent) is cst.Integer and exponent.value in {"0", "1"}):
                self._mark(node.left)

    def visit_Call(self, node: cst.Call) -> None:
        evaluator = self.evaluator
        qualified = evaluator.imports.qualified_name(node.func)
        args = positional(node)
        if qualified is not None:
            if not qualified.startswith("torch."):
                return
            last = _last(qualified)
            if last in INPUT_SAVING_OPS and args:
                self._mark(args[0])
            elif last in BILINEAR_OPS and len(args) >= 2:
                self._pair(args[0], args[1], divide=last == "div")
            return
        if type(node.func) is cst.Attribute:
            method = node.func.attr.value
            receiver = node.func.value
            if evaluator.value(receiver) is not None:
                if method in INPUT_SAVING_OPS:
                    self._mark(receiver)
                elif method in BILINEAR_OPS and args:
                    self._pair(receiver, args[0], divide=method == "div")
                return
        owner = evaluator.module_of(node.func)
        if owner is not None and owner.constructor in INPUT_SAVING_MODULES and args:
            self._mark(args[0])


# -- the walker ------------------------------------------------------------------------
class _Walker:
    """Walks statements in source order, carrying a `State`, recording every site."""

    def __init__(self, analysis: TrackingAnalysis, recording: bool = True) -> None:
        """`recording`: the file's one walk, whose sites the analysis answers from; a
        seeded walk of one function keeps its sites in `by_statement` instead."""
        self.analysis = analysis
        self.imports = analysis.imports
        self.recording = recording
        self.by_statement: dict[int, Site] = analysis._by_statement if recording else {}

    def run(self, module: cst.Module) -> None:
        position = Position(None, None, False, None)
        self.block(module.body, State(), position)

    def block(self, statements, state: State, position: Position) -> State:
        if statements and all(isinstance(s, cst.BaseSmallStatement) for s in statements):
            return self.suite(statements, state, position)
        for index, statement in enumerate(statements):
            state = self.statement(statement, state, position, id(statements), index)
        return state

    def suite(self, smalls, state: State, position: Position) -> State:
        """`if flag: out.append(x.data)`: a one-line body. Its facts are recorded on a
        stand-in line that is not part of the tree, so it is offered only through
        `suite_sites()` (an edit of the stand-in itself would never apply); edits of the
        nodes inside it do."""
        line = cst.SimpleStatementLine(body=smalls)
        site = Site(line, state.copy(), position, id(smalls), 0, {} if len(smalls) > 1 else None)
        if self.recording:
            self.analysis._suite_sites.append(site)
        self.by_statement[id(line)] = site
        return self.line(site, smalls, state, position)

    def line(self, site: Site, smalls, state: State, position: Position) -> State:
        """The statements of one line in order; on a line of several, the facts before
        each one after the first are kept on the site."""
        for number, small in enumerate(smalls):
            if number and site.within_line is not None:
                site.within_line[id(small)] = state.copy()
            state = self.small(small, state, position)
        return state

    def statement(self, node: cst.CSTNode, state: State, position: Position, block: int, index: int) -> State:
        if type(node) is cst.SimpleStatementLine:
            site = Site(node, state.copy(), position, block, index, {} if len(node.body) > 1 else None)
            if self.recording:
                self.analysis._sites.append(site)
            self.by_statement[id(node)] = site
            return self.line(site, node.body, state, position)
        if type(node) is cst.FunctionDef:
            self.function(node, state, position)
            state = state.copy()
            state.tensors.pop(node.name.value, None)
            return state
        if type(node) is cst.ClassDef:
            inner = Position(None, node.name.value, position.grad_disabled, position.exempt)
            self.block(node.body.body, State(), inner)
            return state
        if type(node) is cst.If:
            after_body = self.block(node.body.body, state.copy(), position)
            orelse = node.orelse
            if orelse is None:
                return meet(state, after_body)
            if type(orelse) is cst.If:
                after_else = self.statement(orelse, state.copy(), position, block, index)
            else:
                after_else = self.block(orelse.body.body, state.copy(), position)
            return meet(after_body, after_else)
        if type(node) is cst.For:
            return self.for_loop(node, state, position)
        if type(node) is cst.While:
            after = self.block(node.body.body, state.copy(), position)
            result = meet(state, after)
            if node.orelse is not None:
                result = self.block(node.orelse.body.body, result, position)
            return result
        if type(node) is cst.With:
            inner = position
            if with_disables_grad(node, self.imports):
                inner = replace(position, grad_disabled=True)
            elif any(enables_grad(item.item, self.imports) for item in node.items):
                inner = replace(position, grad_disabled=False)
            state = state.copy()
            for item in node.items:
                if item.asname is not None:
                    for name in _target_names(item.asname.name):
                        state.tensors.pop(name, None)
                        state.modules.pop(name, None)
            return self.block(node.body.body, state, inner)
        if type(node) in (cst.Try, cst.TryStar):
            after = self.block(node.body.body, state.copy(), position)
            result = meet(state, after)
            for handler in node.handlers:
                result = meet(result, self.block(handler.body.body, result.copy(), position))
            if node.orelse is not None:
                result = meet(result, self.block(node.orelse.body.body, after.copy(), position))
            if node.finalbody is not None:
                result = self.block(node.finalbody.body.body, result, position)
            return result
        # match statements and anything newer: walk each body, keep only common facts
        result = state
        for child in children_of(node):
            if type(child) is cst.IndentedBlock:
                result = meet(result, self.block(child.body, state.copy(), position))
        return result

    def function(self, node: cst.FunctionDef, outer: State, position: Position,
                 seeds: dict[str, Tracked] | None = None) -> None:
        analysis = self.analysis
        if self.recording:
            analysis._entries[id(node)] = (outer, position)
        class_name = position.class_name
        info = analysis.classes.get(class_name or "") if position.function is None else None
        name = node.name.value
        grad_disabled = position.grad_disabled or function_disables_grad(node, self.imports) or name in analysis.no_grad_callees
        exempt = position.exempt
        if info is not None and info.optimizer:
            exempt = "optimizer"
        elif name.endswith("_") and not name.startswith("__"):
            exempt = "initializer"
        if info is not None and info.autograd_function:
            grad_disabled = True
        inner = Position(node, class_name, grad_disabled, exempt)
        state = outer.copy() if position.function is not None else State(modules=dict(outer.modules))
        parameters = [p for p in node.params.params]
        for parameter in parameters + list(node.params.kwonly_params) + list(node.params.posonly_params):
            state.tensors.pop(parameter.name.value, None)
            state.modules.pop(parameter.name.value, None)
        if info is not None and info.module_like and name == "forward":
            for parameter in parameters[1:]:
                if parameter.default is None and _may_be_tensor(parameter):
                    state.tensors[parameter.name.value] = Tracked(Kind.FORWARD_INPUT, aliased=True)
        if name in analysis.apply_functions and parameters:
            state.modules[parameters[0].name.value] = None
        state.tensors.update(seeds or {})
        self.block(node.body.body, state, inner)

    def for_loop(self, node: cst.For, state: State, position: Position) -> State:
        body_state = state.copy()
        names = _target_names(node.target)
        for name in names:
            body_state.tensors.pop(name, None)
            body_state.modules.pop(name, None)
        iterator = node.iter
        if type(iterator) is cst.Call and dotted_name(iterator.func) == "enumerate" and iterator.args:
            iterator = iterator.args[0].value
            target = node.target
            target = target.elements[1].value if type(target) is cst.Tuple and len(target.elements) == 2 else None
        else:
            target = node.target
        inner = position
        if type(iterator) is cst.Call and type(iterator.func) is cst.Attribute and target is not None:
            method = iterator.func.attr.value
            if method in _PARAMETER_ITERATORS and not iterator.args and not self.analysis.freezes_parameters:
                bound = target
                if method == "named_parameters":
                    bound = target.elements[1].value if type(target) is cst.Tuple and len(target.elements) == 2 else None
                if type(bound) is cst.Name:
                    body_state.tensors[bound.value] = Tracked(Kind.PARAMETER, parameter_loop=True)
                    inner = replace(position, in_parameter_loop=True)
            elif method in _MODULE_ITERATORS:
                bound = target
                if method.startswith("named_"):
                    bound = target.elements[1].value if type(target) is cst.Tuple and len(target.elements) == 2 else None
                if type(bound) is cst.Name:
                    body_state.modules[bound.value] = None
        after = self.block(node.body.body, body_state, inner)
        result = meet(state, after)
        for name in names:
            result.tensors.pop(name, None)
        if node.orelse is not None:
            result = self.block(node.orelse.body.body, result, position)
        return result

    # -- simple statements ---------------------------------------------------------------
    def small(self, node: cst.BaseSmallStatement, state: State, position: Position) -> State:
        evaluator = _Evaluator(self.analysis, state, position)
        state = state.copy()
        saved = evaluator.saved_inputs(node) if state.tensors else set()
        for name in saved:
            state.tensors[name] = replace(state.tensors[name], saved=True)
        if type(node) is cst.Assign:
            value_fact = evaluator.value(node.value)
            output_saved = evaluator.saves_output(node.value)
            module = self.analysis.module_constructor(node.value)
            self._mark_aliases(node.value, state, evaluator)
            for target in node.targets:
                self.bind(target.target, node.value, value_fact, output_saved, module, state)
                if type(target.target) in (cst.Tuple, cst.List):
                    self._bind_unpacked(target.target, evaluator.unpacked(node.value), state)
        elif type(node) is cst.AnnAssign and node.value is not None:
            self._mark_aliases(node.value, state, evaluator)
            self.bind(node.target, node.value, evaluator.value(node.value), evaluator.saves_output(node.value),
                      self.analysis.module_constructor(node.value), state)
        elif type(node) is cst.AugAssign:
            if type(node.target) is cst.Name and node.target.value not in state.tensors:
                if evaluator.value(node.value) is not None:
                    state.tensors[node.target.value] = Tracked(Kind.DERIVED)
        elif type(node) is cst.Expr:
            self._expression_statement(node.value, state, evaluator)

        elif type(node) is cst.Return and node.value is not None:
            self._mark_aliases(node.value, state, evaluator)
        elif type(node) is cst.Del:
            for name in _target_names(node.target):
                state.tensors.pop(name, None)
                state.modules.pop(name, None)
        return state

    def _expression_statement(self, value: cst.BaseExpression, state: State, evaluator: _Evaluator) -> None:
        if type(value) is cst.Call and type(value.func) is cst.Attribute:
            method = value.func.attr.value
            receiver = value.func.value
            if method == "requires_grad_" and type(receiver) is cst.Name:
                if value.args and not is_true(value.args[0].value):
                    state.tensors.pop(receiver.value, None)
                else:
                    state.tensors[receiver.value] = Tracked(Kind.REQUIRES_GRAD)
                return
            if method == "save_for_backward":
                for argument in positional(value):
                    if type(argument) is cst.Name and argument.value in state.tensors:
                        state.tensors[argument.value] = replace(state.tensors[argument.value], saved=True)
                return
        self._mark_aliases(value, state, evaluator, bound=False)

    def _mark_aliases(self, value: cst.BaseExpression, state: State, evaluator: _Evaluator, bound: bool = True) -> None:
        """Names that now share storage with something else: bound whole, passed away, viewed.

        `bound` is False for expression statements, whose value is dropped.
        """
        if not state.tensors:
            return  # nothing tracked: nothing can become aliased
        finder = _AliasFinder(evaluator)
        if bound:
            finder.escapes(value)
        self.analysis.walk(value, finder)
        receiver = value if bound else None
        while type(receiver) is cst.Call and type(receiver.func) is cst.Attribute and receiver.func.attr.value.endswith("_"):
            receiver = receiver.func.value  # `y = x.add_(1)`: y is x
        if receiver is not value:
            finder.escapes(receiver)
        for name in finder.aliased:
            if name in state.tensors:
                state.tensors[name] = replace(state.tensors[name], aliased=True)

    @staticmethod
    def _bind_unpacked(target: cst.Tuple | cst.List, unpacked: tuple[Tracked | None, slice], state: State) -> None:
        fact, elements = unpacked
        if fact is None or any(type(e) is cst.StarredElement for e in target.elements):
            return
        for element in target.elements[elements]:
            if type(element.value) is cst.Name and element.value.value != "_":
                state.tensors[element.value.value] = fact
            elif type(element.value) in (cst.Tuple, cst.List):
                _Walker._bind_unpacked(element.value, (fact, slice(None)), state)

    def bind(self, target: cst.BaseExpression, value: cst.BaseExpression, fact: Tracked | None, output_saved: bool,
             module: str | None, state: State) -> None:
        if type(target) is cst.Name:
            name = target.value
            state.tensors.pop(name, None)
            state.modules.pop(name, None)
            if module is not None:
                state.modules[name] = module
            if fact is not None:
                if type(value) is cst.Name:
                    fact = replace(fact, aliased=True)
                state.tensors[name] = replace(fact, saved=output_saved or (fact.saved and type(value) is cst.Name))
            return
        if type(target) in (cst.Tuple, cst.List):
            names = _target_names(target)
            for name in names:
                state.tensors.pop(name, None)
                state.modules.pop(name, None)
            if type(value) is cst.Attribute and value.attr.value == "saved_tensors":
                for name in names:
                    state.tensors[name] = Tracked(Kind.SAVED_BY_CTX, saved=True, aliased=True)
            return
        if type(target) is cst.Attribute and target.attr.value == "requires_grad" and type(target.value) is cst.Name:
            if is_true(value):
                state.tensors[target.value.value] = Tracked(Kind.REQUIRES_GRAD)
            else:
                state.tensors.pop(target.value.value, None)


#: builtins that read a value without keeping a reference to it
_NON_ESCAPING_CALLS = frozenset({"print", "len", "isinstance", "float", "int", "bool", "str", "repr", "type", "id", "hasattr", "format"})


class _AliasFinder(cst.CSTVisitor):
    """Tracked names in an expression that escape: passed to unknown code or viewed."""

    def __init__(self, evaluator: _Evaluator) -> None:
        super().__init__()
        self.evaluator = evaluator
        self.aliased: set[str] = set()

    def escapes(self, node: cst.BaseExpression) -> None:
        """`node` itself (a bare name, or one inside a tuple/list/dict display) is kept."""
        if type(node) is cst.Name:
            self.aliased.add(node.value)
        elif type(node) in (cst.Tuple, cst.List, cst.Set):
            for element in node.elements:
                self.escapes(element.value)
        elif type(node) is cst.Dict:
            for element in node.elements:
                if type(element) is cst.DictElement:
                    self.escapes(element.value)
        elif type(node) is cst.StarredElement:
            self.escapes(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        evaluator = self.evaluator
        qualified = evaluator.imports.qualified_name(node.func)
        if qualified is not None and qualified.startswith("torch."):
            if _last(qualified) in VIEW_FUNCTIONS or _inplace_keyword(node):
                for argument in positional(node)[:1]:
                    self.escapes(argument)
            return
        if type(node.func) is cst.Attribute and evaluator.value(node.func.value) is not None:
            if node.func.attr.value in VIEW_METHODS:
                self.escapes(node.func.value)
            return  # a tensor method: its arguments are read, not kept
        if evaluator.module_of(node.func) is not None:
            return
        if type(node.func) is cst.Name and node.func.value in _NON_ESCAPING_CALLS:
            return
        for argument in node.args:  # an unknown callable may keep what it is given
            self.escapes(argument.value)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self.escapes(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in {"T", "mT", "H", "mH"}:
            self.escapes(node.value)


def _statement_of(scope: cst.CSTNode, node: cst.CSTNode, syntax: SyntaxIndex | None = None) -> cst.SimpleStatementLine | None:
    """The simple statement of `scope` (not of a nested function or class) holding `node`
    (read off the file's index when given: a containment test per statement, not a walk)."""
    stop = (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.SimpleStatementLine)
    body = scope.body if type(scope) is cst.FunctionDef else scope
    descendants = syntax.descendants if syntax is not None else iter_descendants
    for line in descendants(body, lambda n: type(n) in stop):
        if type(line) is cst.SimpleStatementLine and (
            syntax.contains(line, node) if syntax is not None else any(n is node for n in iter_descendants(line))
        ):
            return line
    return None


def _inplace_keyword(call: cst.Call) -> bool:
    flag = keyword(call, "inplace")
    return flag is not None and is_true(flag.value)


def _target_names(node: cst.BaseExpression) -> list[str]:
    if type(node) is cst.Name:
        return [node.value]
    if type(node) in (cst.Tuple, cst.List):
        return [n for e in node.elements for n in _target_names(e.value)]
    if type(node) is cst.StarredElement:
        return _target_names(node.value)
    return []


def _may_be_tensor(parameter: cst.Param) -> bool:
    """A forward parameter that could hold a tensor (no default, no non-tensor annotation)."""
    if parameter.star:
        return False
    annotation = parameter.annotation
    if annotation is None:
        return True
    text = dotted_name(annotation.annotation) or ""
    return _last(text) == "Tensor"


def has_name_tokens(name: str, tokens: frozenset[str]) -> bool:
    """Does identifier `name` contain one of `tokens` (`running_mean` has 'running')?"""
    return bool(set(name_tokens(name)) & tokens)


def _index_is(node: cst.Subscript, index: int) -> bool:
    """`x[0]`: one subscript, an integer literal."""
    if len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index:
        return False
    value = node.slice[0].slice.value
    return type(value) is cst.Integer and value.evaluated_value == index
