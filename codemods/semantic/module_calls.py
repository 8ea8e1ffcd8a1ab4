"""Which calls run a model, which values a scope put in eval mode, and where models go.

A forward pass is a call of a module value: one the class built from modules
(`self.fc = nn.Linear(...)`, see `module_values`), a loop variable over such a container,
`self` inside an `nn.Module`, a parameter every same-file caller passes a model to, a value
put in eval mode (`model.eval()`), or, as a tie-break only, a value whose name says model
(the caller supplies that name test, so that the role vocabulary stays in one place).
A model's own methods (`model.infer(x)`, `model.encode(src)`) run its forward too, but
only where the caller asks for them (`methods=True`): `model.init_hidden(n)` is one as well,
so they count only where the result is then used.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.names import name_tokens
from autograd_fix.codemods.semantic.answer import Answer
from autograd_fix.codemods.semantic.gradmode import with_disables_grad
from autograd_fix.codemods.semantic.roles import NOT_A_FORWARD_TOKENS
from autograd_fix.codemods.torch_api import STR_ONLY_METHODS
from autograd_fix.codemods.walk import SyntaxIndex, find_all, iter_descendants, walk

#: `self.forward`, `model.forward`: explicit forward calls
FORWARD_METHODS = frozenset({"forward"})
#: nn.Module's (and Hugging Face's) own API: calling these on a model is not a forward
#: pass (`generate` runs under no_grad itself; a container's methods: `CONTAINER_METHODS`)
MODULE_API_METHODS = frozenset(
    {"eval", "train", "parameters", "named_parameters", "buffers", "named_buffers", "children",
     "named_children", "modules", "named_modules", "state_dict", "load_state_dict", "to", "cuda", "cpu",
     "float", "half", "double", "bfloat16", "type", "zero_grad", "apply", "register_forward_hook",
     "register_forward_pre_hook", "register_full_backward_hook", "register_backward_hook", "register_buffer",
     "register_parameter", "register_module", "requires_grad_", "get_submodule", "get_parameter", "add_module",
     "extra_repr", "share_memory", "save_pretrained", "from_pretrained", "generate", "get_input_embeddings",
     "get_output_embeddings", "resize_token_embeddings", "num_parameters", "tie_weights", "compile",
     "fuse_model", "reset_parameters", "init_weights", "set_default_tensor_type"}
)


#: container and lookup methods: `self.best_k_models.items()`, `models.values()`,
#: `model.get_parameter_or_buffer(name)` read what a value holds, they run no forward
CONTAINER_METHODS = frozenset({"items", "values", "keys", "get", "pop", "popitem", "update", "setdefault", "copy",
                               "clear", "append", "extend", "insert", "remove", "index", "count"})


def _never(call: cst.Call) -> bool:
    return False


#: other frameworks' model types (`openvino.Model`, `onnx.ModelProto`, `keras.Model`)
_OTHER_FRAMEWORKS = frozenset({"openvino", "onnx", "onnxruntime", "tensorflow", "tf", "keras", "jax", "flax", "sklearn"})
#: builtin types no torch model is an instance of
_PLAIN_TYPES = frozenset({"int", "float", "str", "bool", "bytes", "dict", "list", "tuple", "set", "Path", "pathlib.Path"})


def _not_a_torch_model_type(qualified: str) -> bool:
    """`openvino.Model`, `str`, `dict`: certainly not a torch model. A class this file cannot
    see (`GPT`, `Config`) is left undecided: it may subclass nn.Module."""
    return qualified.split(".", 1)[0] in _OTHER_FRAMEWORKS or qualified in _PLAIN_TYPES


def annotated_non_models(function: cst.FunctionDef, imports: ImportIndex) -> frozenset[str]:
    """Parameters whose annotation names a type that is certainly not a torch model
    (`ov_model: openvino.Model`, `models: dict`): evidence, whatever they are called."""
    params = function.params
    found = set()
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.annotation is None:
            continue
        annotation = param.annotation.annotation
        qualified = imports.qualified_name(annotation) or dotted_name(annotation)
        if qualified is None:
            continue  # `Optional[nn.Module]`, a string: not decided here
        if _not_a_torch_model_type(qualified):
            found.add(param.name.value)
    return frozenset(found)


def used_as_strings(function: cst.FunctionDef, syntax: SyntaxIndex | None = None) -> frozenset[str]:
    """Parameters the function calls a method of `str` on that neither nn.Module nor a
    tensor has (`mx_name.lower()`, `name.startswith("se_")`): strings by evidence,
    whatever their callers' arguments are called (`map_mx_to_torch_model(mx_model)`).
    `syntax`: the file's index, to read the calls off (a plain search without it)."""
    params = function.params
    names = {param.name.value for param in (*params.posonly_params, *params.params, *params.kwonly_params)}
    found = set()
    for node in syntax.find(function.body, cst.Call) if syntax is not None else find_all(function.body, cst.Call):
        if (type(node.func) is cst.Attribute and type(node.func.value) is cst.Name
                and node.func.value.value in names and node.func.attr.value in STR_ONLY_METHODS):
            found.add(node.func.value.value)
    return frozenset(found)


@dataclass(frozen=True)
class ModelScope:
    """What one scope knows of its model values."""

    #: decides a name the evidence leaves open (`netG`, `teacher`): the role vocabulary
    looks_like_model: Callable[[str], bool]
    #: values built from modules: `self.fc`, `layer` in `for layer in self.layers`, and
    #: parameters every same-file caller passes a model to
    module_values: frozenset[str] = frozenset()
    #: `self` is an nn.Module here
    module_like_class: bool = False
    #: values put in eval mode (`model.eval()`, `model.train(False)`)
    receivers: frozenset[str] = frozenset()
    #: `self._forward(batch)`: a call of a same-file function that returns a graph
    returns_graph: Callable[[cst.Call], bool] = field(default=_never)
    #: names the evidence says are not torch models (see `annotated_non_models`)
    not_models: frozenset[str] = frozenset()
    #: the file's own classes: calling one constructs it, whatever its spelling
    classes: frozenset[str] = frozenset()

    def with_receivers(self, receivers: set[str] | frozenset[str]) -> "ModelScope":
        return replace(self, receivers=frozenset(receivers))


class ModelCalls:
    """Answers "does this call run a model?" within one `ModelScope`.

    `only_receivers`: only values put in eval mode count (a loop that runs after
    `model.eval()` without any other evidence). `methods`: a model's own methods count.
    """

    def __init__(self, scope: ModelScope, imports: ImportIndex, only_receivers: bool = False,
                 methods: bool = False) -> None:
        self.scope = scope
        self.imports = imports
        self.only_receivers = only_receivers
        self.methods = methods

    def is_model_call(self, node: cst.Call) -> bool:
        """Does this call run a model's forward (or, with `methods`, a model's own method)?"""
        if type(node.func) is cst.Subscript:  # `self.blocks[i](h)`
            return dotted_name(node.func.value) in self.scope.module_values
        if not self.only_receivers and self.scope.returns_graph(node):
            return True
        callee = dotted_name(node.func)
        if callee is None or self.imports.qualified_name(node.func) is not None:
            return False  # an imported API (torch.*, F.*), not a model instance
        owner, _, method = callee.rpartition(".")
        if method in FORWARD_METHODS and owner:
            callee = owner
        elif self.names_a_class(owner or callee):
            return False  # `Net(...)`: a constructor; `Request.model_validate(...)`: a class's method
        if self.is_model_value(callee):
            return True
        if not self.methods or not owner or method in MODULE_API_METHODS or method.startswith("_"):
            return False
        if method in CONTAINER_METHODS or set(name_tokens(method)) & NOT_A_FORWARD_TOKENS:
            return False  # `model.get_parameter_or_buffer(n)`, `self.best_k_models.items()`
        # `model.infer(x)`, `self.model.decode(ys, memory)`: a model's own computation
        return owner != "self" and self.is_model_value(owner)

    def may_train(self, call: cst.Call) -> bool:
        """`model.train_net()`, `agent.policy.learn(batch)`: a method of a model value whose
        code the caller could not follow may take gradients. nn.Module's own API, container
        methods and `forward` do not."""
        if type(call.func) is not cst.Attribute:
            return False
        receiver, method = dotted_name(call.func.value), call.func.attr.value
        if method in MODULE_API_METHODS or method in CONTAINER_METHODS or method in FORWARD_METHODS:
            return False
        return receiver is not None and receiver != "self" and self.is_model_value(receiver)

    def has_evidence(self, name: str) -> bool:
        """Is `name` a module value by evidence (built from modules, put in eval mode),
        whatever its spelling?"""
        return name.split(".", 1)[0] not in self.scope.not_models and (
            name in self.scope.receivers or name in self.scope.module_values
        )

    def names_a_class(self, name: str) -> bool:
        """Is `name` a class rather than a value, so that calling it (or a method of it)
        runs no forward? Evidence first: a module value (`G_AB = nn.Linear(4, 4)`, a
        value put in eval mode) is no class, a class this file defines is one, whatever
        either is called. Only where the evidence says nothing does the spelling break the
        tie: a capitalised name from elsewhere (`Request.model_validate`) is taken for a
        class, as Python's naming convention has it."""
        if self.has_evidence(name):
            return False
        if name in self.scope.classes:
            return True
        return name.rsplit(".", 1)[-1][:1].isupper()

    def is_model_value(self, name: str) -> bool:
        if name.split(".", 1)[0] in self.scope.not_models:
            return False  # its own annotation outweighs what callers' argument names suggest
        if name in self.scope.receivers or name in self.scope.module_values:
            return True
        if self.only_receivers:
            return False
        if name == "self":
            return self.scope.module_like_class
        return self.scope.looks_like_model(name.rsplit(".", 1)[-1])

    def runs_model(self, body: cst.CSTNode, syntax: SyntaxIndex | None = None) -> bool:
        """Is a model called in `body` outside any nested `no_grad` block or function?

        With `methods`, a method whose result is dropped (`model.reset_states()`) is
        not counted: nothing it returns could carry a graph. `syntax`: the file's index,
        walked instead of the tree when given.
        """
        finder = _ModelCallFinder(self)
        if syntax is not None:
            syntax.walk(body, finder)
        else:
            walk(body, finder)
        return finder.found


class _ModelCallFinder(cst.CSTVisitor):
    def __init__(self, calls: ModelCalls) -> None:
        super().__init__()
        self.calls = calls
        self.dropped: set[int] = set()
        self.found = False

    def visit_With(self, node: cst.With) -> bool:
        return not with_disables_grad(node, self.calls.imports)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Expr(self, node: cst.Expr) -> None:
        self.dropped.add(id(node.value))

    def visit_Call(self, node: cst.Call) -> None:
        if self.found or not self.calls.is_model_call(node):
            return
        dropped_method = id(node) in self.dropped and type(node.func) is cst.Attribute
        if dropped_method and node.func.attr.value not in FORWARD_METHODS:
            plain = ModelCalls(self.calls.scope, self.calls.imports, self.calls.only_receivers, methods=False)
            if not plain.is_model_call(node):
                return
        self.found = True


# -- eval state ---------------------------------------------------------------------------
def update_eval_state(statement: cst.SimpleStatementLine, receivers: set[str]) -> None:
    """`model.eval()` / `model.train(False)` put `model` in eval mode; `model.train()` ends it."""
    for small in statement.body:
        if type(small) is not cst.Expr or type(small.value) is not cst.Call:
            continue
        call = small.value
        if type(call.func) is not cst.Attribute:
            continue
        receiver = dotted_name(call.func.value)
        if receiver is None:
            continue
        method = call.func.attr.value
        if method == "eval" and not call.args:
            receivers.add(receiver)
        elif method == "train":
            if call.args and type(call.args[0].value) is cst.Name and call.args[0].value.value == "False":
                receivers.add(receiver)
            else:
                receivers.discard(receiver)


def method_receivers(node: cst.CSTNode, method: str, syntax: SyntaxIndex | None = None) -> set[str]:
    """Receivers of `<receiver>.<method>(...)` calls anywhere in `node` (`model` of `model.eval()`);
    the calls are read off the file's index `syntax` when given."""
    return {
        receiver
        for call in (syntax.find if syntax is not None else find_all)(node, cst.Call)
        if type(call.func) is cst.Attribute and call.func.attr.value == method  # type: ignore[attr-defined]
        and (receiver := dotted_name(call.func.value)) is not None  # type: ignore[attr-defined]
    }


def calls_method(node: cst.CSTNode, method: str, syntax: SyntaxIndex | None = None) -> bool:
    """Is `.<method>(...)` called anywhere in `node`? (read off `syntax` when given)"""
    return any(
        type(call.func) is cst.Attribute and call.func.attr.value == method  # type: ignore[attr-defined]
        for call in (syntax.find if syntax is not None else find_all)(node, cst.Call)
    )


def hands_model_away(function: cst.FunctionDef, calls: ModelCalls, same_file: Callable[[str], bool]) -> bool:
    """Is a model (or `self` in a module) passed to a call outside this file's functions
    (`trainer.fit(model)`, `torch.onnx.export(model, ...)`), which may train it?"""
    for call in iter_descendants(function.body, prune=lambda n: type(n) in (cst.FunctionDef, cst.ClassDef)):
        if type(call) is not cst.Call:
            continue
        name = dotted_name(call.func)
        if name is not None and same_file(name):
            continue  # a same-file function: its own gradient use is counted by the call graph
        for argument in call.args:
            value = dotted_name(argument.value)
            if value is not None and calls.is_model_value(value):
                return True
    return False


def module_argument(argument: cst.BaseExpression, answer: Answer, looks_like_model: Callable[[str], bool]) -> bool:
    """Is a call's argument a module? `answer` is the semantic model's
    (`SemanticModel.is_module`: a constructor of one, an instance of a module class, a
    value put in eval mode); only where it is UNKNOWN does a name that says model
    (`model`, `self.net`) break the tie."""
    if answer is not Answer.UNKNOWN:
        return answer is Answer.YES
    name = dotted_name(argument)
    return name is not None and name != "self" and looks_like_model(name.rsplit(".", 1)[-1])


def module_parameters(function: cst.FunctionDef, sites: list[cst.Call], method: bool,
                      is_module: Callable[[cst.BaseExpression], bool]) -> frozenset[str]:
    """Parameters that every same-file call of `function` binds to a module
    (`evaluate(model, inp)` makes `mod` of `def evaluate(mod, inp)` a model).

    `method`: the first parameter (`self`) is bound by the receiver. No call sites, a
    `*args`/`**kwargs` call, or any site that passes something else: no evidence.
    """
    params = [*function.params.posonly_params, *function.params.params][1 if method else 0 :]
    found: set[str] | None = None
    for call in sites:
        if any(argument.star for argument in call.args):
            return frozenset()
        bound: set[str] = set()
        for index, argument in enumerate(call.args):
            name = argument.keyword.value if argument.keyword is not None else (
                params[index].name.value if index < len(params) else None
            )
            if name is not None and is_module(argument.value):
                bound.add(name)
        found = bound if found is None else found & bound
    return frozenset(found or ())
