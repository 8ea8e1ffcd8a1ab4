"""AGF001 eval-forward-without-no-grad: evaluation forward passes that build a graph."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Callable, Sequence

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.nograd_wrap import decorate, no_grad_wrap_edits, wrap_in_with, wrap_statements
from autograd_fix.codemods.names import iterable_tokens, last_segment, name_tokens
from autograd_fix.codemods.rule import Contract, Rule, RuleContext, SiteFix
from autograd_fix.codemods.site_fixes import no_grad_site_fix
from autograd_fix.codemods.semantic.answer import Answer
from autograd_fix.codemods.semantic.callgraph import CallGraph, FunctionFacts, GraphReturns, collected_by_pytest
from autograd_fix.codemods.semantic.dataflow import DROPPED, feeds_later_gradient, result_flow
from autograd_fix.codemods.rules.agf001_eval_forward_without_no_grad.eval_mode_lines import (
    Region, child_blocks, dead_forward_line, forward_region, graphs_die_in_lines, local_bindings, may_return_tensor,
)
from autograd_fix.codemods.semantic.gradmode import changes_grad_mode, with_disables_grad
from autograd_fix.codemods.rules.agf001_eval_forward_without_no_grad.gradreach import graph_reaches_gradient
from autograd_fix.codemods.semantic.graphflow import graph_flow
from autograd_fix.codemods.semantic.module_calls import (
    ModelCalls, ModelScope, annotated_non_models, calls_method, hands_model_away, method_receivers, module_argument,
    module_parameters, update_eval_state, used_as_strings,
)
from autograd_fix.codemods.semantic.loops import declared_global
from autograd_fix.codemods.semantic.module_values import module_loop_names
from autograd_fix.codemods.semantic.role_evidence import model_names
from autograd_fix.codemods.semantic.roles import Role, Vocabulary, looks_like_model
from autograd_fix.codemods.semantic.roles import NOT_EVAL_SCOPE_TOKENS as NOT_EVAL_NAME_TOKENS
from autograd_fix.codemods.walk import SyntaxIndex, iter_descendants

class EvalForwardWithoutNoGrad(Rule):
    """
    ## What it does
    Finds evaluation or inference forward passes (a validation loop, an `evaluate` /
    `predict` / `test` function, a loop after `model.eval()`) that run while autograd is
    recording, and wraps them in `torch.no_grad()`.

    Whatever a function is called, it is an evaluation pass when it runs a model and every graph dies inside it: only values
    cut from the graph (`.item()`, `argmax`, `.detach()`, `.data`, the indices of `max(dim)`)
    are returned, and nothing graph-carrying is stored on `self`, in an argument or in
    module state (a greedy decoder, a per-label `predict`). In a function that trains in
    one branch and evaluates in the other (`if is_train: ... else: out = model(x)`), the
    evaluation branch is one when its graph, followed in control-flow order, never reaches
    a backward. A forward is a call of a module value (built from `nn` modules, passed in
    by every same-file caller, put in eval mode or used as a module, whatever its spelling: `G_AB`,
    `Enc1`; a name without such evidence is a model when named like one), one of its methods
    (`model.infer(x)`), or a same-file helper that returns one (`self._forward(batch)`).
    A caller whose only graphs come from same-file helpers that are fixed themselves is not
    reported again: one fix, one finding.

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
    Inside a training loop, forward lines right after `G.eval()` (`samples.append(G(fixed_z))`)
    get the same wrap when nothing they make reaches a gradient, in this iteration or a later one.
    So does, in any mode, a forward of training code (a function or script that takes
    gradients) whose graph dies: an RL rollout's `prob = model.pi(s)` whose action leaves
    through `.item()` or is a distribution's `sample()` (drawn under no_grad; `rsample()`
    keeps the graph), a target network's `next_q = target(s2)` read only through `.data` or
    `.detach()` before the loss (followed in control-flow order, later iterations included).

    ## Fix safety
    The loop wrap is safe: the rule fires only when nothing in the scope (or in the
    same-file functions it calls) uses gradients (`.backward(`, `torch.autograd`,
    `torch.func`, `.grad`, writing `requires_grad`, optimizer steps; reading
    `x.requires_grad` in a print or an assert is not one, nor is
    `Variable(x)` without `requires_grad=True`) and no value made in the loop
    flows into a later gradient computation in the same function. Inside a function, a
    loop (or branch) that does more than the forward gets only its forward statements
    wrapped; what is computed from their outputs then carries no graph either. Decorating
    a function that returns values is unsafe: a caller in another file could backpropagate
    through what it returns; one that just returns a model's output is decorated only when
    its same-file callers show the result never reaches a gradient. The rule stays silent under `no_grad`, `inference_mode` or
    `set_grad_enabled(False)` (decorator, `with`, or a same-file caller), in Lightning's
    `validation_step`/`test_step`/`predict_step` and the helpers they call (Lightning
    already disables grad there), in
    functions passed as callbacks (their caller's grad mode is unseen; a function started
    as a thread's or process's target, `mp.Process(target=test)`, is no callback: it runs
    with torch's default grad mode and its result is dropped), in pytest tests
    (`test*` functions of test files, `test*` methods of `Test*` classes), and in functions whose result a same-file caller feeds into a gradient
    computation (a caller that trains elsewhere but only logs this function's result,
    such as a `fit` calling `validate`, does not count). A function is not decorated on
    data flow alone when it hands a model to code this file cannot see
    (`trainer.fit(model)`).
    The wrap of a forward in training code is unsafe: verification runs it. So is a
    decoration of a function that calls code this file cannot follow which may train
    (`model.train_net()` of a class from another file).
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
    contract = Contract(
        description="outputs equal; parameters' .grad untouched; retained graph memory lower or equal "
        "(strictly lower when the original retained any)",
        checks=("outputs_equal", "grads_untouched", "retained_graph_not_higher", "retained_graph_lower_if_any", "graph_state_may_change"),
    )

    no_site_fix = "the forward is not a statement of its own (a compound statement's header or a one-line suite)"

    @classmethod
    def fix_at(cls, context: RuleContext, line: int) -> SiteFix | None:
        """A run saw the forward at `line` build graphs no backward went through."""
        return no_grad_site_fix(context, line, "forward pass builds a graph no backward uses; wrap it in `with torch.no_grad():`")

    def visit_Module(self, node: cst.Module) -> bool:
        found: list[tuple[cst.CSTNode, Region | _Lines | None]] = []
        semantic = self.context.semantic
        finder = _Finder(semantic.call_graph, self.context.path, found, semantic.syntax, self.context.roles)
        finder.module = node
        finder.evident_models = lambda scope: model_names(semantic.roles_in(scope))
        finder.global_models = finder.evident_models(node)
        finder.is_module = lambda value: semantic.is_module(value, value)
        finder.script_handles_grad_mode = changes_grad_mode(node, finder.imports, finder.syntax)
        finder.block(node.body, _Scope(None, None, finder.models_of(None, None), set(), finder.imports))
        for target, region in finder.one_per_fix():
            self._report(target, region, finder.may_train_unseen(target))
        return False

    def _report(self, target: cst.CSTNode, region: "Region | _Lines | None", may_train_unseen: bool = False) -> None:
        no_grad, needs = self.context.imports.expression_for("torch.no_grad")
        call = cst.Call(func=no_grad)
        if isinstance(region, _Lines):
            edits, needs = no_grad_wrap_edits(region.statements, self.context.imports)
            fix = Fix(Applicability.UNSAFE, edits, "wrap the forward in `with torch.no_grad():` (verified by a run)", needs)
            self.report(target, "forward pass in training code builds a graph nothing backpropagates through; "
                        "wrap it in `with torch.no_grad():`", fix)
        elif type(target) is cst.FunctionDef:
            facts = self.context.semantic.call_graph.facts(target)
            unsure = facts is None or facts.returns_value or may_train_unseen
            fix = Fix(
                applicability=Applicability.UNSAFE if unsure else Applicability.SAFE,
                edits=(Edit(target, lambda updated: decorate(updated, call)),),
                description="decorate with @torch.no_grad()",
                required_imports=needs,
            )
            message = (f"`{target.name.value}` runs the model for evaluation with autograd recording; "
                       "decorate it with `@torch.no_grad()`")
            self.report(target, message, fix)
        elif region is not None:
            block, first, last = region
            fix = Fix(
                applicability=Applicability.SAFE,
                edits=(Edit(block, lambda updated: wrap_statements(updated, first, last, call)),),
                description="wrap the evaluation forward in `with torch.no_grad():`",
                required_imports=needs,
            )
            self.report(target, "evaluation forward pass runs with autograd recording; wrap it in "
                        "`with torch.no_grad():`", fix)
        else:
            fix = Fix(
                applicability=Applicability.SAFE,
                edits=(Edit(target, lambda updated: wrap_in_with(updated, call)),),
                description="wrap the loop in `with torch.no_grad():`",
                required_imports=needs,
            )
            self.report(target, "evaluation loop runs the model with autograd recording; wrap it in "
                        "`with torch.no_grad():`", fix)




@dataclass(frozen=True)
class _Lines:
    """Consecutive statements of training code whose forwards' graphs die (`dead_forward_line`)."""

    statements: tuple[cst.SimpleStatementLine, ...]


@dataclass
class _Scope:
    function: FunctionFacts | None
    class_name: str | None
    #: the scope's `ModelScope`, computed on first use (`_Finder.models_of`): most
    #: functions (a model's `forward`, `__init__`) are decided without it
    make_models: Callable[[], ModelScope]
    eval_receivers: set[str]
    imports: ImportIndex
    #: inside a loop of the function: an eval-mode forward here runs once per iteration
    in_loop: bool = False

    @property
    def models(self) -> ModelScope:
        return self.make_models()

    def child(self, in_loop: bool = False) -> "_Scope":
        return _Scope(self.function, self.class_name, self.make_models, set(self.eval_receivers), self.imports,
                      self.in_loop or in_loop)

    def calls(self, receivers: set[str] | None = None, **options: bool) -> ModelCalls:
        models = self.models.with_receivers(self.eval_receivers if receivers is None else receivers)
        return ModelCalls(models, self.imports, **options)


#: methods that are (part of) a forward pass; their callers decide the grad mode
FORWARD_NAMES = frozenset({"forward", "_forward", "__call__"})


def _called_from_a_forward(function: FunctionFacts) -> bool:
    return any(caller is not None and caller.node.name.value in FORWARD_NAMES for caller, _, _ in function.call_sites)


class _Finder:
    """Walks statements in order, tracking `.eval()`/`.train()` state, and decides."""

    def __init__(
        self,
        graph: CallGraph,
        path: str,
        found: list[tuple[cst.CSTNode, Region | _Lines | None]],
        syntax: SyntaxIndex,
        roles: Vocabulary,
    ) -> None:
        self.path = path.replace("\\", "/")
        self.graph = graph
        self.syntax = syntax
        #: the file's own classes: a call of one constructs it (`ModelScope.classes`)
        self.classes = frozenset(graph.classes)
        #: names break ties with the project's vocabulary (`model-names` and the like)
        self.looks_like_model = partial(looks_like_model, model_tokens=roles.tokens(Role.MODEL))
        self.eval_scope_tokens = roles.tokens(Role.EVAL_SCOPE)
        self.eval_data_tokens = roles.tokens(Role.EVAL_DATA)
        self.imports = graph.imports
        self.found = found
        #: the file's module (a script's or notebook's top-level code is a container too)
        self.module = cst.Module(body=[])
        #: the file disables grad somewhere: a model's own method beside it is set-up
        #: (`hidden = model.init_hidden(1)` before a `with torch.no_grad():` loop)
        self.script_handles_grad_mode = False
        self.graph_returns = GraphReturns(graph, self._forward_calls)
        #: the names a scope's evidence says hold a model (`G_AB = nn.Linear(4, 4)`)
        self.evident_models: Callable[[cst.CSTNode], frozenset[str]] = lambda scope: frozenset()
        #: the semantic model's answer for a value where it stands (`SemanticModel.is_module`)
        self.is_module: Callable[[cst.BaseExpression], Answer] = lambda value: Answer.UNKNOWN
        #: module-level names that evidence says hold a model, seen by every function
        self.global_models: frozenset[str] = frozenset()
        #: functions holding a finding (their own decoration, or a loop or branch in them)
        self.reported: set[int] = set()
        #: decorated functions: the calls that count as forwards in them
        self.decorated: dict[int, tuple[FunctionFacts, ModelCalls]] = {}
        #: `model_scope`'s answers, by (function node id, class name)
        self._model_scopes: dict[tuple[int | None, str | None], ModelScope] = {}

    def one_per_fix(self) -> list[tuple[cst.CSTNode, "Region | _Lines | None"]]:
        """The findings, less the decoration of a function whose only graphs come from
        same-file helpers that are themselves fixed: one fix, one finding."""
        return [(target, region) for target, region in self.found
                if region is not None or id(target) not in self.decorated or not self._covered(*self.decorated[id(target)])]

    def may_train_unseen(self, target: cst.CSTNode) -> bool:
        """A decorated function calls code this file cannot follow that may take gradients
        (`model.train_net()` of a class from another file): the decoration is a proposal."""
        if id(target) not in self.decorated:
            return False
        function, calls = self.decorated[id(target)]
        return self.graph.may_train_unseen(function, calls.may_train)

    def _covered(self, function: FunctionFacts, calls: ModelCalls) -> bool:
        helpers = []
        for call in iter_descendants(function.node.body, prune=lambda n: type(n) in (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            if type(call) is not cst.Call or not calls.is_model_call(call):
                continue
            name = dotted_name(call.func)
            resolved = self.graph.resolve(name, function.class_name, call) if name is not None else []
            if not resolved or not calls.scope.returns_graph(call):
                return False  # a model runs here: its graph is this function's own
            helpers.extend(resolved)
        return bool(helpers) and all(id(helper.node) in self.reported for helper in helpers)

    # -- scopes -------------------------------------------------------------------------
    def models_of(self, function: FunctionFacts | None, class_name: str | None) -> Callable[[], ModelScope]:
        """`model_scope(function, class_name)`, computed once, when first asked for."""
        return lambda: self.model_scope(function, class_name)

    def model_scope(self, function: FunctionFacts | None, class_name: str | None) -> ModelScope:
        """What `function` (None: module level) knows of its models, from evidence first
        (memoised: a function's scope is asked for again by `GraphReturns` and its callers)."""
        key = (id(function.node) if function is not None else None, class_name)
        if key not in self._model_scopes:
            self._model_scopes[key] = self._model_scope(function, class_name)
        return self._model_scopes[key]

    def _model_scope(self, function: FunctionFacts | None, class_name: str | None) -> ModelScope:
        values = self.graph.module_attributes(class_name) | self.global_models
        if function is None:
            return ModelScope(self.looks_like_model, values, False, frozenset(), self._returns_graph(class_name),
                              classes=self.classes)
        # a global the function rebinds is its own; what its own evidence says is a model is one
        if values:  # (the bindings are only looked up when there is something to remove)
            values = values - (local_bindings(function.node, self.syntax) - declared_global(function.node, self.syntax))
        values |= self.evident_models(function.node)
        values |= module_loop_names(function.loops, values)
        sites = [call for _, _, call in function.call_sites]
        static = any(last_segment(d.decorator) == "staticmethod" for d in function.node.decorators)
        values |= module_parameters(
            function.node, sites, class_name is not None and not static,
            lambda argument: module_argument(argument, self.is_module(argument), self.looks_like_model),
        )
        return ModelScope(self.looks_like_model, values, function.module_like_class, frozenset(),
                          self._returns_graph(class_name),
                          annotated_non_models(function.node, self.imports) | used_as_strings(function.node, self.syntax),
                          self.classes)

    def _returns_graph(self, class_name: str | None) -> Callable[[cst.Call], bool]:
        return lambda call: self.graph_returns.of_call(call, class_name)

    def _forward_calls(self, function: FunctionFacts) -> Callable[[cst.Call], bool]:
        scope = self.model_scope(function, function.class_name)
        receivers = method_receivers(function.node.body, "eval", self.syntax)
        return ModelCalls(scope.with_receivers(receivers), self.imports, methods=True).is_model_call

    # -- walking ------------------------------------------------------------------------
    def block(self, statements: Sequence[cst.CSTNode], scope: _Scope, suite: cst.BaseSuite | None = None) -> None:
        run: list[int] = []
        dead: list[cst.SimpleStatementLine] = []
        for index, statement in enumerate(statements):
            if type(suite) is cst.IndentedBlock and self._eval_mode_line(statement, scope):
                run.append(index)
            else:
                self._eval_mode_run(suite, run, scope)
                run = []
            if not run and self._dead_forward(statement, scope):
                dead.append(statement)  # type: ignore[arg-type]
            if dead and (dead[-1] is not statement or scope.function is None):  # a module's lines: one cell each
                self.found.append((dead[0], _Lines(tuple(dead))))
                dead = []
            self.statement(statement, scope)
        self._eval_mode_run(suite, run, scope)
        if dead:
            self.found.append((dead[0], _Lines(tuple(dead))))

    def _dead_forward(self, statement: cst.CSTNode, scope: _Scope) -> bool:
        """A statement of training code (a function or script that takes gradients) whose
        forwards make graphs nothing backpropagates through (RL rollouts, cut targets)."""
        function = scope.function
        if function is None:
            if scope.class_name is not None or not self.graph.module_level_uses_grad:
                return False
        elif not function.uses_grad or function.node.name.value in FORWARD_NAMES or _called_from_a_forward(function):
            return False
        if type(statement) is not cst.SimpleStatementLine or not self.syntax.find(statement, cst.Call):
            return False  # no call, no forward (`dead_forward_line` would say so, after the scope's evidence)
        sink = lambda line: self.graph.uses_grad(line, scope.class_name)  # noqa: E731
        container = function.node if function is not None else self.module
        # every line of training code is examined, so a forward needs evidence here, not a
        # name (`_is_peft_model(self.model)` is no model): a model's own methods count only
        # where they resolve to a same-file function returning a graph (`model.pi(s)`)
        values = scope.models.module_values | self.graph.module_instances(statement)
        evident = replace(scope.models, looks_like_model=lambda name: False, module_values=values).with_receivers(scope.eval_receivers)
        return dead_forward_line(container, statement, self.imports, self._forward_test(scope, ModelCalls(evident, self.imports)), sink,
                                 self.syntax)

    def _forward_test(self, scope: _Scope, calls: ModelCalls) -> Callable[[cst.Call], bool]:
        """A model's forward; a same-file function only where it returns a graph (`self.v(s)`)."""
        def is_forward(call: cst.Call) -> bool:
            name = dotted_name(call.func)
            if name is not None and self.graph.resolve(name, scope.class_name, call):
                return scope.models.returns_graph(call)  # `self.has_ema()`: only if it returns a graph
            return calls.is_model_call(call)
        return is_forward

    def _eval_mode_line(self, statement: cst.CSTNode, scope: _Scope) -> bool:
        """A simple statement in a function's loop that runs a model put in eval mode before it."""
        return (type(statement) is cst.SimpleStatementLine and scope.in_loop and scope.function is not None
                and bool(scope.eval_receivers) and scope.calls(only_receivers=True).runs_model(statement, self.syntax))

    def _eval_mode_run(self, suite: cst.BaseSuite | None, run: list[int], scope: _Scope) -> None:
        """`G.eval(); samples.append(G(fixed_z)); G.train()` inside a training loop: the
        forward lines keep a graph per iteration. Wrapped when they take no gradient and
        nothing they make reaches one later (in the loop's next iterations too)."""
        function = scope.function
        if not run or type(suite) is not cst.IndentedBlock or function is None:
            return
        lines = suite.body[run[0] : run[-1] + 1]
        if any(self.graph.uses_grad(line, scope.class_name) for line in lines):
            return
        calls = scope.calls(only_receivers=True)
        sink = lambda statement: self.graph.uses_grad(statement, scope.class_name)  # noqa: E731
        if graphs_die_in_lines(function.node, lines, calls.is_model_call, sink, self.syntax, function.called_from_grad_scope):
            self.found.append((suite.body[run[0]], (suite, run[0], run[-1])))

    def statement(self, statement: cst.CSTNode, scope: _Scope) -> None:
        if type(statement) is cst.SimpleStatementLine:
            update_eval_state(statement, scope.eval_receivers)
        elif type(statement) is cst.FunctionDef:
            self.function(statement, scope)
        elif type(statement) is cst.ClassDef:
            inner = _Scope(None, statement.name.value, self.models_of(None, statement.name.value), set(), self.imports)
            self.block(statement.body.body, inner)
        elif type(statement) is cst.With:
            if not with_disables_grad(statement, self.imports):
                self.block(statement.body.body, scope.child(), suite=statement.body)
        elif type(statement) in (cst.For, cst.While):
            self.loop(statement, scope)
        elif type(statement) is cst.If and self._evaluation_branch(statement, scope):
            return
        elif type(statement) in (cst.If, cst.Try, cst.TryStar):
            for body in child_blocks(statement):
                elif_chain = type(statement) is cst.If and body.body[0] is statement.orelse
                if elif_chain or not self._script_inference(body, scope):
                    self.block(body.body, scope.child(), suite=None if elif_chain else body)

    def function(self, node: cst.FunctionDef, enclosing: _Scope) -> None:
        function = self.graph.functions[id(node)]
        if function.decorated_no_grad or function.enclosed_no_grad or function.called_under_no_grad:
            return
        name = node.name.value
        if collected_by_pytest(function, self.path):
            return
        same_class = function.class_name is not None and function.class_name == enclosing.class_name
        models = self.models_of(function, function.class_name if same_class else None)
        scope = _Scope(function, function.class_name, models, set(), self.imports)
        before = len(self.found)
        self._function(node, function, scope)
        if len(self.found) > before:
            self.reported.add(id(node))

    def _function(self, node: cst.FunctionDef, function: FunctionFacts, scope: _Scope) -> None:
        name = node.name.value
        tokens = set(name_tokens(name))
        eval_named = bool(tokens & self.eval_scope_tokens) and not tokens & NOT_EVAL_NAME_TOKENS and name != "eval"
        if eval_named and not function.uses_grad:
            if function.called_from_grad_scope or function.passed_as_callback or _called_from_a_forward(function):
                return  # a helper training code also calls, a callback, or part of a forward pass
            receivers = method_receivers(node.body, "eval", self.syntax)
            has_loop = any(type(n) in (cst.For, cst.While, cst.CompFor) for n in iter_descendants(node.body))
            if not receivers and not has_loop and self._may_return_graph(node, scope) and not self._callers_never_train(function):
                return  # `def predict(self, x): return self(x)`: callers elsewhere may train on it
            if self._runs_eval_forward(node, scope, receivers):
                self.found.append((node, None))
                self.decorated[id(node)] = (function, scope.calls(receivers, methods=True))
            return
        if eval_named:
            return  # evaluation-named but uses gradients (saliency, TTT): leave it alone
        before = len(self.found)
        self.block(node.body.body, scope)
        if len(self.found) == before and self._graph_dies_inside(function, scope):
            self.found.append((node, None))  # no evaluation loop to wrap: the whole function
            self.decorated[id(node)] = (function, scope.calls(method_receivers(node.body, "eval", self.syntax), methods=True))

    def _may_return_graph(self, node: cst.FunctionDef, scope: _Scope) -> bool:
        """May a caller get a graph back: a returned tensor, unless the function's forwards
        are seen and every graph they make dies inside (`return cls, prob` of `.item()`s)."""
        flow = graph_flow(node, self.imports, self._forward_test(scope, scope.calls(methods=True)), self.syntax)
        return may_return_tensor(node, self.imports) and (not flow.built or flow.returned or bool(flow.escapes))

    def _runs_eval_forward(self, node: cst.FunctionDef, scope: _Scope, receivers: set[str]) -> bool:
        """A model call outside `no_grad`; a model's own method (`model.infer(x)`) counts
        only where the function handles grad mode nowhere (a `model.init_hidden(n)` beside a
        `with torch.no_grad():` forward is set-up) and hands no model to unseen code."""
        if scope.calls(receivers).runs_model(node.body, self.syntax):
            return True
        if changes_grad_mode(node.body, self.imports, self.syntax):
            return False
        calls = scope.calls(receivers, methods=True)
        same_file = lambda callee: bool(self.graph.resolve(callee, scope.class_name, node))  # noqa: E731
        return calls.runs_model(node.body, self.syntax) and not hands_model_away(node, calls, same_file)

    def _callers_never_train(self, function: FunctionFacts) -> bool:
        """Same-file callers use the result, and none of them can backpropagate through it:
        module-level callers in a file that takes no gradient, function callers that drop
        it or only cut it (`.item()`, a metric)."""
        if not function.call_sites:
            return False
        for caller, _, call in function.call_sites:
            if caller is None:
                if self.graph.module_level_uses_grad or any(f.uses_grad for f in self.graph.functions.values()):
                    return False
            elif result_flow(caller.node, call, lambda s: self.graph.uses_grad(s, caller.class_name), self.syntax) != DROPPED:
                return False
        return True

    def _graph_dies_inside(self, function: FunctionFacts, scope: _Scope) -> bool:
        """Whatever its name: does the function run a model with grad on and let every
        graph die inside it (nothing graph-carrying returned or stored), and nothing it
        calls, here or in a caller that uses its result, take gradients?

        A model handed to a call this file cannot see (`trainer.fit(model)`,
        `torch.onnx.export(model, ...)`) may be trained there: fail closed.
        """
        node = function.node
        name = node.name.value
        if function.uses_grad or function.passed_as_callback:
            return False
        if function.called_from_grad_scope and may_return_tensor(node, self.imports):
            return False  # what reaches the caller's gradients may be this function's graph
        if _called_from_a_forward(function) or name in FORWARD_NAMES or name.startswith("__") or (function.class_name is not None and name == "train"):
            return False
        if function.returns_value and not function.cuts:
            return False  # whatever it returns is as it was made: a graph, if a model ran
        if changes_grad_mode(node.body, self.imports, self.syntax):
            return False  # (asked first: it needs no `ModelScope`, which costs more)
        calls = scope.calls(method_receivers(node.body, "eval", self.syntax), methods=True)
        if not calls.runs_model(node.body, self.syntax):
            return False

        flow = graph_flow(node, self.imports, self._forward_test(scope, calls), self.syntax)
        if not flow.built or flow.returned or flow.escapes:
            return False
        return not hands_model_away(node, calls, lambda callee: bool(self.graph.resolve(callee, scope.class_name, node)))

    # -- loops and branches -------------------------------------------------------------
    def loop(self, node: cst.For | cst.While, scope: _Scope) -> None:
        calls = self._qualifying_calls(node, scope)
        if calls is not None:
            # inside a function, a loop that does more than the forward (data preparation,
            # metrics, logging) gets only its forward wrapped, as hand fixes do; a pure
            # evaluation loop, or one at module level (a script), is wrapped whole
            region = forward_region(node.body, calls) if scope.function is not None else None
            if region is None or (region[1] == 0 and region[2] == len(region[0].body) - 1):
                self.found.append((node, None))
            else:
                self.found.append((region[0].body[region[1]], region))
            return
        self.block(node.body.body, scope.child(in_loop=True), suite=node.body)
        if node.orelse is not None:
            self.block(node.orelse.body.body, scope.child())

    def _qualifying_calls(self, node: cst.For | cst.While, scope: _Scope) -> ModelCalls | None:
        """The model calls that make `node` an evaluation loop, or None when it is not one."""
        function = scope.function
        if function is not None and function.called_from_grad_scope and function.returns_value:
            return None
        if changes_grad_mode(node, self.imports, self.syntax) or calls_method(node.body, "train", self.syntax):
            return None
        if _iterates_eval_data(node, self.eval_data_tokens):
            calls = scope.calls()
        elif scope.eval_receivers:
            calls = scope.calls(only_receivers=True)
        else:
            return None
        if not calls.runs_model(node.body, self.syntax) or self.graph.uses_grad(node, scope.class_name):
            return None
        uses_grad = lambda statement: self.graph.uses_grad(statement, scope.class_name)  # noqa: E731
        return None if feeds_later_gradient(node, function.node if function else None, uses_grad) else calls

    def _script_inference(self, block: cst.BaseSuite, scope: _Scope) -> bool:
        """A script's branch (`if task == ...:` under `if __name__ == "__main__":`) that runs
        a model the script put in eval mode, in a file that takes no gradient anywhere:
        nothing can backpropagate through its outputs, so its forward is wrapped."""
        if scope.function is not None or scope.class_name is not None or not scope.eval_receivers:
            return False
        if self.graph.module_level_uses_grad or any(f.uses_grad for f in self.graph.functions.values()):
            return False
        if changes_grad_mode(block, self.imports, self.syntax) or calls_method(block, "train", self.syntax):
            return False
        region = forward_region(block, scope.calls(only_receivers=True, methods=not self.script_handles_grad_mode))
        if region is None:
            return False
        self.found.append((region[0].body[region[1]], region))
        return True

    def _evaluation_branch(self, node: cst.If, scope: _Scope) -> bool:
        """`if is_train: ...backward()... else: out = model(x)`: the branch that runs the
        model without taking gradients is an evaluation pass when its graph, followed in
        control-flow order, never reaches a gradient (particleflow's `train_and_valid`)."""
        function = scope.function
        if function is None or type(node.orelse) is not cst.Else:
            return False
        branches = [node.body, node.orelse.body]
        training = [self.graph.uses_grad(branch, scope.class_name) for branch in branches]
        if training.count(True) != 1:
            return False
        branch = branches[training.index(False)]
        calls = scope.calls()
        if type(branch) is not cst.IndentedBlock or changes_grad_mode(branch, self.imports, self.syntax):
            return False
        region = forward_region(branch, calls)
        if region is None:
            return False
        block, first, last = region
        sink = lambda statement: self.graph.uses_grad(statement, scope.class_name)  # noqa: E731
        for statement in block.body[first : last + 1]:
            if graph_reaches_gradient(function.node, statement, self.imports, sink, calls.is_model_call):
                return False
        self.found.append((block.body[first], region))
        return True


def _iterates_eval_data(node: cst.For | cst.While, eval_data_tokens: frozenset[str]) -> bool:
    if type(node) is cst.For:
        return bool(iterable_tokens(node.iter) & eval_data_tokens)
    return any(
        iterable_tokens(call.args[0].value) & eval_data_tokens
        for call in iter_descendants(node.body)
        if type(call) is cst.Call and type(call.func) is cst.Name and call.func.value == "next" and call.args
    )
