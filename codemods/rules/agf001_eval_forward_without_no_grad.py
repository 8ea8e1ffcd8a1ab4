"""AGF001 eval-forward-without-no-grad: evaluation forward passes that build a graph."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from autograd_fix.codemods.semantic.dataflow import (
    DROPPED,
    REACHES_SINK,
    RETURNED,
    assigned_names,
    bound_names,
    read_names,
    result_flow,
    simple_statements_after,
    stores_on_self,
)
from autograd_fix.codemods.semantic.gradmode import GradUseFinder, disables_grad, find_grad_use, function_disables_grad, with_disables_grad
from autograd_fix.codemods.semantic.graphflow import CUTTING_FUNCTIONS, CUTTING_METHODS, METADATA_ATTRIBUTES, VALUE_INDEX_PAIRS, graph_flow
from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.semantic.module_values import module_attributes, module_loop_names
from autograd_fix.codemods.names import iterable_tokens, last_segment, name_tokens
from autograd_fix.codemods.rule import Contract, Rule
from autograd_fix.codemods.semantic.roles import EVAL_DATA_TOKENS, MODEL_TOKENS, NOT_A_FORWARD_TOKENS
from autograd_fix.codemods.semantic.roles import EVAL_SCOPE_TOKENS as EVAL_NAME_TOKENS
from autograd_fix.codemods.semantic.roles import NOT_EVAL_SCOPE_TOKENS as NOT_EVAL_NAME_TOKENS
from autograd_fix.codemods.walk import iter_descendants, walk

#: `self.forward`, `model.forward`: explicit forward calls
FORWARD_METHODS = frozenset({"forward"})
#: nn.Module's (and Hugging Face's) own API: calling these on a model is not a forward
#: pass (`generate` runs under no_grad itself)
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
#: Lightning runs these hooks (and every `on_validation*` / `on_test*` / `on_predict*`
#: callback hook) under no_grad/inference_mode itself
LIGHTNING_HOOKS = frozenset(
    {"validation_step", "test_step", "predict_step", "validation_epoch_end", "test_epoch_end"}
)
@dataclass
class _Function:
    node: cst.FunctionDef
    class_name: str | None
    module_like_class: bool
    direct_grad: bool
    calls: set[str]
    decorated_no_grad: bool
    enclosed_no_grad: bool
    #: (calling function or None, under no_grad there, the call expression)
    call_sites: list[tuple["_Function | None", bool, cst.Call]] = field(default_factory=list)
    #: `for` loops and comprehensions directly in this function (not in nested ones)
    loops: list[cst.CSTNode] = field(default_factory=list)
    #: returns or yields a value
    returns_value: bool = False
    #: something in it cuts a graph (`.item()`, `argmax`, `.shape`, a comparison)
    cuts: bool = False
    uses_grad: bool = False
    called_under_no_grad: bool = False
    called_from_grad_scope: bool = False


class EvalForwardWithoutNoGrad(Rule):
    """
    ## What it does
    Finds evaluation or inference forward passes (a validation loop, an `evaluate` /
    `predict` / `test` function, a loop after `model.eval()`) that run while autograd is
    recording, and wraps them in `torch.no_grad()`. Whatever a function is called, it is
    an evaluation pass when it runs a model and every graph dies inside it: only values
    cut from the graph (`.item()`, `argmax`, `.detach()`, the indices of `max(dim)`)
    are returned, and nothing graph-carrying is stored on `self`, in an argument or in
    module state (a greedy decoder, a per-label `predict`).

    ## Why is this bad?
    `model.eval()` switches Dropout and BatchNorm to inference behaviour; it does not turn
    autograd off. Every output keeps its graph (nodes plus saved activations) alive for as
    long as the output lives: appending outputs or losses to a list over a validation set
    keeps hundreds of MiB of activations that nobody will backpropagate through, and the
    forward itself runs slower.

    ## Example
    ```python
    def evaluate(model, val_loader):
        model.eval()
        preds = []
        for images, _ in val_loader:
            preds.append(model(images))
        return torch.cat(preds)
    ```

    ## Use instead
    ```python
    @torch.no_grad()
    def evaluate(model, val_loader):
        ...
    ```
    or `with torch.no_grad():` around the evaluation loop when the function also trains.

    ## Fix safety
    The loop wrap is safe: the rule fires only when nothing in the scope (or in the
    same-file functions it calls) uses gradients (`.backward(`, `torch.autograd`,
    `torch.func`, `.grad`, writing `requires_grad`, optimizer steps; reading
    `x.requires_grad` in a print or an assert is not one) and no value made in the loop
    flows into a later gradient computation in the same function. Decorating a function
    that returns values is unsafe: a caller in another file could backpropagate through
    what it returns. The rule stays silent under `no_grad`, `inference_mode` or
    `set_grad_enabled(False)` (decorator, `with`, or a same-file caller), in Lightning's
    `validation_step`/`test_step`/`predict_step` (Lightning already disables grad), in
    pytest tests, and in functions whose result a same-file caller feeds into a gradient
    computation (a caller that trains elsewhere but only logs this function's result,
    such as a `fit` calling `validate`, does not count). A function is not decorated on
    data flow alone when it hands a model to code this file cannot see
    (`trainer.fit(model)`).
    `no_grad` is used rather than `inference_mode`, whose tensors cannot later be saved
    for backward.

    ## Verification
    Outputs equal; every parameter's `.grad` untouched; retained graph memory lower or
    equal, strictly lower when the original retained any.
    """

    code = "AGF001"
    name = "eval-forward-without-no-grad"
    safety = Applicability.SAFE
    message = "evaluation forward pass runs with autograd recording"
    #: every kind of evidence (names, `.eval()`, `.train(False)`, loaders) contains one;
    #: a graph that dies inside a function is cut by one of the calls after them
    triggers = ("eval", "val", "test", "predict", "infer", "holdout", "train(False)", ".item(", ".argmax(",
                ".argmin(", ".tolist(", ".numpy(", ".detach(", ".max(", ".min(", ".topk(", ".sort(")
    #: ... as a word of an identifier (`val_loader`, `validate`, `.eval()`), not in `value`
    trigger_pattern = re.compile(
        r"(?:^|[^a-zA-Z])(?:val|valid|validate|validation|test|testing|eval|evaluate|evaluation|holdout|"
        r"predict|infer|inference)(?:$|[^a-z])|\.train\(False\)|\.(?:item|argmax|argmin|tolist|numpy|detach|max|"
        r"min|topk|sort)\(",
        re.M,
    )
    contract = Contract(
        description="outputs equal; parameters' .grad untouched; retained graph memory lower or equal "
        "(strictly lower when the original retained any)",
        checks=("outputs_equal", "grads_untouched", "retained_graph_not_higher", "retained_graph_lower_if_any"),
    )

    def visit_Module(self, node: cst.Module) -> bool:
        analysis = _Analysis(self.context.imports, self.context.path)
        analysis.collect(node)
        for target, kind in analysis.find(node):
            self._report(target, kind)
        return False

    def _report(self, target: cst.CSTNode, kind: str) -> None:
        imports = self.context.imports
        no_grad, needs = imports.expression_for("torch.no_grad")
        call = cst.Call(func=no_grad)
        if kind == "function":
            assert isinstance(target, cst.FunctionDef)
            returns_value = _returns_value(target)
            fix = Fix(
                applicability=Applicability.UNSAFE if returns_value else Applicability.SAFE,
                edits=(Edit(target, lambda updated: _decorate(updated, call)),),
                description="decorate with @torch.no_grad()",
                required_imports=needs,
            )
            self.report(
                target,
                f"`{target.name.value}` runs the model for evaluation with autograd recording; "
                "decorate it with `@torch.no_grad()`",
                fix,
            )
        else:
            fix = Fix(
                applicability=Applicability.SAFE,
                edits=(Edit(target, lambda updated: _wrap_in_with(updated, call)),),
                description="wrap the loop in `with torch.no_grad():`",
                required_imports=needs,
            )
            self.report(
                target,
                "evaluation loop runs the model with autograd recording; wrap it in `with torch.no_grad():`",
                fix,
            )


def _returns_value(function: cst.FunctionDef) -> bool:
    finder = _ReturnFinder()
    walk(function.body, finder)
    return finder.found


class _ReturnFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found = False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # returns of nested functions are theirs

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self.found = True

    def visit_Yield(self, node: cst.Yield) -> None:
        self.found = True


#: calls whose result is a Python value, not a tensor that could carry a graph
_TO_PYTHON = frozenset({"item", "tolist", "numpy", "float", "int", "bool", "len", "str", "round"})


def _has_loop(body: cst.CSTNode) -> bool:
    return any(isinstance(node, (cst.For, cst.While, cst.CompFor)) for node in iter_descendants(body))


def _may_return_tensor(function: cst.FunctionDef) -> bool:
    """Does some `return` hand back something that may be a tensor with a graph?

    Literals, None, and values ending in `.item()` / `float(...)` and the like do not.
    """
    for node in iter_descendants(function.body, prune=lambda n: isinstance(n, (cst.FunctionDef, cst.Lambda))):
        if isinstance(node, cst.Return) and node.value is not None:
            value = node.value
            if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString, cst.Name)) and not (
                isinstance(value, cst.Name) and value.value not in {"None", "True", "False"}
            ):
                continue
            if isinstance(value, cst.Call) and last_segment(value.func) in _TO_PYTHON:
                continue
            return True
        if isinstance(node, (cst.Yield,)):
            return True
    return False


def _decorate(function: cst.CSTNode, call: cst.Call) -> cst.CSTNode:
    assert isinstance(function, cst.FunctionDef)
    return function.with_changes(decorators=[*function.decorators, cst.Decorator(decorator=call)])


def _wrap_in_with(loop: cst.CSTNode, call: cst.Call) -> cst.CSTNode:
    assert isinstance(loop, (cst.For, cst.While))
    inner = loop.with_changes(leading_lines=())
    return cst.With(
        items=[cst.WithItem(item=call)],
        body=cst.IndentedBlock(body=[inner]),
        leading_lines=loop.leading_lines,
    )


class _Analysis:
    """Whole-module analysis: functions, their callers, gradient use, then findings."""

    def __init__(self, imports: ImportIndex, path: str) -> None:
        self.imports = imports
        self.path = path.replace("\\", "/")
        self.functions: dict[int, _Function] = {}
        self.by_key: dict[tuple[str | None, str], list[_Function]] = {}
        #: classes of this file that are modules (an nn.Module base, or a `forward`)
        self.module_classes: set[str] = set()

    # -- collection -------------------------------------------------------------------
    def collect(self, module: cst.Module) -> None:
        collector = _Collector(self)
        walk(module, collector)
        for caller, under_no_grad, name, call in collector.call_sites:
            for callee in self.resolve(name, caller.class_name if caller else None):
                callee.call_sites.append((caller, under_no_grad, call))
        self._propagate()

    def resolve(self, name: str, caller_class: str | None) -> list[_Function]:
        if name.startswith(("self.", "cls.")) and name.count(".") == 1:
            return self.by_key.get((caller_class, name.split(".", 1)[1]), [])
        if "." not in name:
            return self.by_key.get((None, name), [])
        return []

    def _propagate(self) -> None:
        functions = list(self.functions.values())
        for function in functions:
            function.uses_grad = function.direct_grad
        changed = True
        while changed:
            changed = False
            for function in functions:
                if not function.uses_grad and any(
                    callee.uses_grad for name in function.calls for callee in self.resolve(name, function.class_name)
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

    def _result_flow(self, caller: _Function, call: cst.Call) -> str:
        """Where the callee's result goes in `caller`: into a gradient computation, back
        to `caller`'s own callers, or nowhere gradients are taken (a metric, a log)."""
        return result_flow(caller.node, call, lambda statement: self.uses_grad(statement, caller.class_name))

    # -- queries ------------------------------------------------------------------------
    def uses_grad(self, node: cst.CSTNode, class_name: str | None) -> bool:
        use = find_grad_use(node, self.imports)
        if use.direct:
            return True
        return any(callee.uses_grad for name in use.calls for callee in self.resolve(name, class_name))

    # -- findings -----------------------------------------------------------------------
    def find(self, module: cst.Module) -> list[tuple[cst.CSTNode, str]]:
        found: list[tuple[cst.CSTNode, str]] = []
        _Finder(self, found).block(module.body, _Scope(None, None, False, set()))
        return found


@dataclass
class _Scope:
    function: _Function | None
    class_name: str | None
    module_like_class: bool
    eval_receivers: set[str]
    #: `self.layers` built from modules in the class, `layer` in `for layer in self.layers`
    module_values: frozenset[str] = frozenset()

    def child(self) -> "_Scope":
        return _Scope(
            self.function, self.class_name, self.module_like_class, set(self.eval_receivers), self.module_values
        )


class _Collector(cst.CSTVisitor):
    """Records every function (with its grad use) and every same-file call site."""

    def __init__(self, analysis: _Analysis) -> None:
        super().__init__()
        self.analysis = analysis
        self.classes: list[tuple[str, bool]] = []
        self.functions: list[_Function] = []
        self.no_grad_depth = 0
        #: gradient evidence of the functions being visited, innermost last
        self.grad_finders: list[GradUseFinder] = []
        #: (calling function or None at module level, under no_grad there, callee name)
        self.call_sites: list[tuple[_Function | None, bool, str, cst.Call]] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        module_like = _is_module_like(node, self.analysis.imports)
        self.classes.append((node.name.value, module_like))
        if module_like:
            self.analysis.module_classes.add(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.classes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        imports = self.analysis.imports
        in_class = bool(self.classes) and (not self.functions or self.functions[-1].class_name != self.classes[-1][0])
        class_name, module_like = self.classes[-1] if self.classes and in_class else (None, False)
        decorated = function_disables_grad(node, imports)
        function = _Function(
            node=node,
            class_name=class_name,
            module_like_class=module_like,
            direct_grad=False,
            calls=set(),
            decorated_no_grad=decorated,
            enclosed_no_grad=self.no_grad_depth > 0,
        )
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
            if node.attr.value in METADATA_ATTRIBUTES:
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

    def visit_Yield(self, node: cst.Yield) -> None:
        if self.functions:
            self.functions[-1].returns_value = True

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
        if name is None:
            return
        caller = self.functions[-1] if self.functions else None
        self.call_sites.append((caller, self.no_grad_depth > 0, name, node))


def _is_module_like(node: cst.ClassDef, imports: ImportIndex) -> bool:
    for base in node.bases:
        qualified = imports.qualified_name(base.value) or dotted_name(base.value) or ""
        if qualified.endswith("Module"):
            return True
    return any(
        isinstance(statement, cst.FunctionDef) and statement.name.value == "forward" for statement in node.body.body
    )


_LIGHTNING_PACKAGES = ("pytorch_lightning.", "lightning.", "lightning_fabric.")


def _is_lightning_class(node: cst.ClassDef, imports: ImportIndex) -> bool:
    """A LightningModule, a Lightning Callback, or Lightning's own base classes.

    Lightning's evaluation loops already run these classes' hooks with grad disabled.
    """
    if node.name.value.endswith("LightningModule"):
        return True
    for base in node.bases:
        qualified = imports.qualified_name(base.value) or ""
        if qualified.endswith("LightningModule") or qualified.startswith(_LIGHTNING_PACKAGES):
            return True
    return False


#: methods that are (part of) a forward pass; their callers decide the grad mode
FORWARD_NAMES = frozenset({"forward", "_forward", "__call__"})


def _called_from_a_forward(function: _Function) -> bool:
    return any(caller is not None and caller.node.name.value in FORWARD_NAMES for caller, _, _ in function.call_sites)


def _is_lightning_hook(name: str) -> bool:
    return name in LIGHTNING_HOOKS or name.startswith(("on_validation", "on_test", "on_predict"))


class _Finder:
    """Walks statements in order, tracking `.eval()`/`.train()` state, and decides."""

    def __init__(self, analysis: _Analysis, found: list[tuple[cst.CSTNode, str]]) -> None:
        self.analysis = analysis
        self.imports = analysis.imports
        self.found = found

    def block(self, statements, scope: _Scope, lightning: bool = False) -> None:
        for statement in statements:
            self.statement(statement, scope, lightning)

    def statement(self, statement: cst.CSTNode, scope: _Scope, lightning: bool = False) -> None:
        if isinstance(statement, cst.SimpleStatementLine):
            _update_eval_state(statement, scope.eval_receivers)
        elif isinstance(statement, cst.FunctionDef):
            self.function(statement, lightning, scope)
        elif isinstance(statement, cst.ClassDef):
            attributes = module_attributes(statement, self.analysis.module_classes, self.imports)
            inner = _Scope(None, statement.name.value, _is_module_like(statement, self.imports), set(), attributes)
            self.block(statement.body.body, inner, _is_lightning_class(statement, self.imports))
        elif isinstance(statement, cst.With):
            if not with_disables_grad(statement, self.imports):
                self.block(statement.body.body, scope.child())
        elif isinstance(statement, (cst.For, cst.While)):
            self.loop(statement, scope)
        elif isinstance(statement, (cst.If, cst.Try, cst.TryStar)):
            for body in _child_blocks(statement):
                self.block(body, scope.child())

    def function(self, node: cst.FunctionDef, lightning: bool, enclosing: _Scope) -> None:
        function = self.analysis.functions[id(node)]
        if function.decorated_no_grad or function.enclosed_no_grad or function.called_under_no_grad:
            return
        name = node.name.value
        if lightning and _is_lightning_hook(name):
            return
        if self._is_pytest_test(name, function):
            return
        outer = enclosing.module_values if function.class_name and function.class_name == enclosing.class_name else frozenset()
        scope = _Scope(
            function, function.class_name, function.module_like_class, set(), outer | module_loop_names(function.loops, outer)
        )
        tokens = set(name_tokens(name))
        eval_named = bool(tokens & EVAL_NAME_TOKENS) and not tokens & NOT_EVAL_NAME_TOKENS and name != "eval"
        if eval_named and not function.uses_grad:
            if function.called_from_grad_scope:
                return  # a helper training code also calls: leave it alone
            if _called_from_a_forward(function):
                return  # part of a forward pass: whoever calls the forward decides grad mode
            receivers = _eval_receivers_anywhere(node.body)
            if not receivers and not _has_loop(node.body) and _may_return_tensor(node):
                return  # `def predict(self, x): return self(x)`: callers elsewhere may train on it
            if _has_unguarded_model_call(node.body, scope, receivers, self.imports):
                self.found.append((node, "function"))
            return
        if eval_named:
            return  # evaluation-named but uses gradients (saliency, TTT): leave it alone
        before = len(self.found)
        self.block(node.body.body, scope)
        if len(self.found) == before and self._graph_dies_inside(function, scope):
            self.found.append((node, "function"))  # no evaluation loop to wrap: the whole function

    def _graph_dies_inside(self, function: _Function, scope: _Scope) -> bool:
        """Whatever its name: does the function run a model with grad on and let every
        graph die inside it (nothing graph-carrying returned or stored), and nothing it
        calls, here or in a caller that uses its result, take gradients?

        A model handed to a call this file cannot see (`trainer.fit(model)`,
        `torch.onnx.export(model, ...)`) may be trained there: fail closed.
        """
        node = function.node
        name = node.name.value
        if function.uses_grad or function.called_from_grad_scope or _called_from_a_forward(function):
            return False
        if name in FORWARD_NAMES or name.startswith("__") or (function.class_name is not None and name == "train"):
            return False
        if function.returns_value and not function.cuts:
            return False  # whatever it returns is as it was made: a graph, if a model ran
        receivers = _eval_receivers_anywhere(node.body)
        if not _has_unguarded_model_call(node.body, scope, receivers, self.imports, methods=True):
            return False
        if _contains_grad_mode_change(node.body, self.imports):
            return False
        finder = _ModelCallFinder(scope, receivers, self.imports, False, methods=True)

        def is_forward(call: cst.Call) -> bool:
            name = dotted_name(call.func)
            if name is not None and self.analysis.resolve(name, scope.class_name):
                return False  # `self.has_ema()`: this file's own function, not a module
            return finder.is_model_call(call)

        flow = graph_flow(node, self.imports, is_forward)
        if not flow.built or flow.returned or flow.escapes:
            return False
        return not _hands_model_away(node, finder, self.analysis, scope.class_name)

    def _is_pytest_test(self, name: str, function: _Function) -> bool:
        file_name = self.analysis.path.rsplit("/", 1)[-1]
        test_file = file_name.startswith("test_") or file_name.endswith("_test.py") or "/tests/" in f"/{self.analysis.path}"
        in_test_class = function.class_name is not None and function.class_name.startswith("Test")
        return (test_file or in_test_class) and name.startswith("test")

    def loop(self, node: cst.For | cst.While, scope: _Scope) -> None:
        if self._qualifies(node, scope):
            self.found.append((node, "loop"))
            return
        inner = scope.child()
        self.block(node.body.body, inner)
        if node.orelse is not None:
            self.block(node.orelse.body.body, scope.child())

    def _qualifies(self, node: cst.For | cst.While, scope: _Scope) -> bool:
        function = scope.function
        if function is not None and function.called_from_grad_scope and _returns_value(function.node):
            return False
        if _contains_grad_mode_change(node, self.imports) or _calls_method(node.body, "train"):
            return False
        evidence_iterable = _iterates_eval_data(node)
        receivers = scope.eval_receivers
        if evidence_iterable:
            calls_model = _has_unguarded_model_call(node.body, scope, receivers, self.imports)
        elif receivers:
            calls_model = _has_unguarded_model_call(node.body, scope, receivers, self.imports, only_receivers=True)
        else:
            return False
        if not calls_model:
            return False
        if self.analysis.uses_grad(node, scope.class_name):
            return False
        container = function.node if function is not None else None
        return not _feeds_later_gradient(node, container, self.analysis, scope.class_name)


def _child_blocks(statement: cst.CSTNode):
    if isinstance(statement, cst.If):
        yield statement.body.body
        orelse = statement.orelse
        if isinstance(orelse, cst.If):
            yield [orelse]
        elif orelse is not None:
            yield orelse.body.body
    else:
        yield statement.body.body
        for handler in statement.handlers:
            yield handler.body.body
        if statement.orelse is not None:
            yield statement.orelse.body.body
        if statement.finalbody is not None:
            yield statement.finalbody.body.body


def _update_eval_state(statement: cst.SimpleStatementLine, receivers: set[str]) -> None:
    for small in statement.body:
        if not isinstance(small, cst.Expr) or not isinstance(small.value, cst.Call):
            continue
        call = small.value
        if not isinstance(call.func, cst.Attribute):
            continue
        receiver = dotted_name(call.func.value)
        if receiver is None:
            continue
        method = call.func.attr.value
        if method == "eval" and not call.args:
            receivers.add(receiver)
        elif method == "train":
            if call.args and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == "False":
                receivers.add(receiver)
            else:
                receivers.discard(receiver)


def _eval_receivers_anywhere(node: cst.CSTNode) -> set[str]:
    finder = _MethodCallFinder({"eval"})
    walk(node, finder)
    return {receiver for receiver in finder.receivers}


class _MethodCallFinder(cst.CSTVisitor):
    def __init__(self, methods: set[str]) -> None:
        super().__init__()
        self.methods = methods
        self.receivers: list[str] = []
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in self.methods:
            self.found = True
            receiver = dotted_name(node.func.value)
            if receiver is not None:
                self.receivers.append(receiver)


def _calls_method(node: cst.CSTNode | list, method: str) -> bool:
    finder = _MethodCallFinder({method})
    for item in node if isinstance(node, (list, tuple)) else [node]:
        walk(item, finder)
    return finder.found


def _contains_grad_mode_change(node: cst.CSTNode, imports: ImportIndex) -> bool:
    """A `with` that disables grad inside the loop: the author handled it; fail closed."""
    finder = _GradModeWithFinder(imports)
    walk(node, finder)
    return finder.found


class _GradModeWithFinder(cst.CSTVisitor):
    def __init__(self, imports: ImportIndex) -> None:
        super().__init__()
        self.imports = imports
        self.found = False

    def visit_With(self, node: cst.With) -> None:
        if with_disables_grad(node, self.imports):
            self.found = True

    def visit_Call(self, node: cst.Call) -> None:
        if disables_grad(node, self.imports) and self.imports.qualified_name(node.func) != "torch.no_grad":
            self.found = True  # set_grad_enabled(False) as a statement


def _iterates_eval_data(node: cst.For | cst.While) -> bool:
    if isinstance(node, cst.For):
        return bool(iterable_tokens(node.iter) & EVAL_DATA_TOKENS)
    finder = _NextFinder()
    walk(node.body, finder)
    return any(iterable_tokens(argument) & EVAL_DATA_TOKENS for argument in finder.arguments)


class _NextFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.arguments: list[cst.BaseExpression] = []

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "next" and node.args:
            self.arguments.append(node.args[0].value)


def _has_unguarded_model_call(
    body: cst.CSTNode,
    scope: _Scope,
    receivers: set[str],
    imports: ImportIndex,
    only_receivers: bool = False,
    methods: bool = False,
) -> bool:
    finder = _ModelCallFinder(scope, receivers, imports, only_receivers, methods)
    walk(body, finder)
    return finder.found


class _ModelCallFinder(cst.CSTVisitor):
    """Is a model called outside any nested no_grad block?"""

    def __init__(
        self, scope: _Scope, receivers: set[str], imports: ImportIndex, only_receivers: bool, methods: bool = False
    ) -> None:
        super().__init__()
        #: count a model's own methods (`model.encode(src)`) as forward passes: only where
        #: the data flow then follows their results (`model.init_hidden(n)` is one too)
        self.methods = methods
        self.scope = scope
        self.receivers = receivers
        self.imports = imports
        self.only_receivers = only_receivers
        self.found = False

    def visit_With(self, node: cst.With) -> bool:
        return not with_disables_grad(node, self.imports)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> None:
        if not self.found and self.is_model_call(node):
            self.found = True

    def is_model_call(self, node: cst.Call) -> bool:
        """Does this call run a model's forward (or a model's own method)?"""
        if isinstance(node.func, cst.Subscript):  # `self.blocks[i](h)`
            return dotted_name(node.func.value) in self.scope.module_values
        callee = dotted_name(node.func)
        if callee is None or self.imports.qualified_name(node.func) is not None:
            return False  # an imported API (torch.*, F.*), not a model instance
        owner, _, method = callee.rpartition(".")
        if method in FORWARD_METHODS and owner:
            callee = owner
        elif owner and owner.rsplit(".", 1)[-1][:1].isupper():
            return False  # `Request.model_validate(...)`: a class's method, not a forward pass
        elif not owner and callee[:1].isupper():
            return False  # `Net(...)`: a constructor
        if self.is_model_value(callee):
            return True
        if not self.methods or self.only_receivers or not owner or method in MODULE_API_METHODS or method.startswith("_"):
            return False
        # `model.encode(src)`, `self.model.decode(ys, memory)`: a model's own computation
        return owner != "self" and self.is_model_value(owner)

    def is_model_value(self, name: str) -> bool:
        if name in self.receivers or name in self.scope.module_values:
            return True
        if self.only_receivers:
            return False
        if name == "self":
            return self.scope.module_like_class
        return _looks_like_model(name.rsplit(".", 1)[-1])


def _looks_like_model(identifier: str) -> bool:
    """`model`, `seg_model`, `model_ema`, `netG`, `teacher`; not `model_validate` or
    `build_model`: the name must end in a model word, or be one followed only by
    short qualifiers (`netG`, `model_a`, `model2`)."""
    tokens = name_tokens(identifier)
    if not tokens or set(tokens) & NOT_A_FORWARD_TOKENS:
        return False
    if tokens[-1] in MODEL_TOKENS:
        return True
    return tokens[0] in MODEL_TOKENS and all(len(token) <= 2 for token in tokens[1:])


def _feeds_later_gradient(
    loop: cst.For | cst.While, container: cst.FunctionDef | None, analysis: _Analysis, class_name: str | None
) -> bool:
    """Do names the loop binds flow into a gradient computation later in the same scope?

    A forward taint over the statements after the loop, in source order: assignments from
    tainted names taint their targets, rebinding without them clears the taint.
    """
    if container is None:
        return False  # module level: a script; later training would be its own loop
    statements = simple_statements_after(container.body, loop)
    if not statements:
        return False
    tainted = bound_names(loop)
    for statement in statements:
        reads = read_names(statement)
        if reads & tainted:
            if analysis.uses_grad(statement, class_name):
                return True
            tainted |= assigned_names(statement)
        else:
            tainted -= assigned_names(statement)
    return False


def _hands_model_away(
    function: cst.FunctionDef, finder: "_ModelCallFinder", analysis: _Analysis, class_name: str | None
) -> bool:
    """Is a model (or `self` in a module) passed to a call outside this file's functions?"""
    for call in iter_descendants(function.body, prune=lambda n: isinstance(n, (cst.FunctionDef, cst.ClassDef))):
        if not isinstance(call, cst.Call):
            continue
        name = dotted_name(call.func)
        if name is not None and analysis.resolve(name, class_name):
            continue  # a same-file function: its own gradient use was already counted
        for argument in call.args:
            value = dotted_name(argument.value)
            if value is not None and finder.is_model_value(value):
                return True
    return False
