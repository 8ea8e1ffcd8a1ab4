"""AGF003 inplace-on-grad-tracked-tensor: in-place ops on tensors autograd tracks."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.nograd_wrap import consecutive_runs, no_grad_wrap_edits
from autograd_fix.codemods.rule import Contract, Rule
from autograd_fix.codemods.expressions import is_true
from autograd_fix.codemods.semantic.inplace import is_inplace_call
from autograd_fix.codemods.semantic.module_values import starred_list
from autograd_fix.codemods.semantic.tracking import (
    OUTPUT_SAVING_MODULES,
    Kind,
    Site,
    Tracked,
    TrackingAnalysis,
    keyword,
    positional,
)
from autograd_fix.codemods.walk import walk

#: in-place tensor methods whose out-of-place twin takes the same arguments
OUT_OF_PLACE = frozenset(
    {"add", "sub", "mul", "div", "pow", "clamp", "clamp_min", "clamp_max", "clip", "relu", "sigmoid", "tanh",
     "exp", "log", "log1p", "sqrt", "rsqrt", "neg", "abs", "masked_fill", "addcmul", "addcdiv", "lerp",
     "index_fill", "index_add", "scatter", "scatter_add", "masked_scatter", "sin", "cos", "reciprocal",
     "square", "true_divide", "nan_to_num", "fmod", "remainder", "floor", "ceil", "round", "trunc",
     "addmm", "baddbmm", "softmax", "sub", "subtract", "multiply", "divide", "exp2", "erf"}
)
#: methods that fill or initialise a tensor: an intended update when applied to a leaf
FILL_METHODS = frozenset(
    {"fill_", "zero_", "normal_", "uniform_", "copy_", "bernoulli_", "exponential_", "random_", "clamp_",
     "clamp_min_", "clamp_max_", "log_normal_", "cauchy_", "geometric_", "fill_diagonal_", "index_fill_",
     "masked_fill_", "clip_"}
)
#: F.* functions taking `inplace=True`
INPLACE_FUNCTIONS = frozenset(
    f"torch.nn.functional.{n}"
    for n in ("relu", "relu6", "elu", "selu", "celu", "leaky_relu", "hardtanh", "hardswish", "hardsigmoid",
              "silu", "mish", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "threshold", "rrelu")
)
#: `nn.Sequential`, whose inline layers `_sequential` reads
_SEQUENTIAL = frozenset({"torch.nn.Sequential", "torch.nn.modules.container.Sequential"})
#: every call `_sequential` or `_inplace_keywords` can report from
_LAYER_CALLS = _SEQUENTIAL | INPLACE_FUNCTIONS
#: nn modules taking `inplace` (and the positional index of that argument)
INPLACE_MODULES = {
    "ReLU": 0, "ReLU6": 0, "SELU": 0, "SiLU": 0, "Mish": 0, "Hardswish": 0, "Hardsigmoid": 0,
    "LeakyReLU": 1, "ELU": 1, "CELU": 1, "Dropout": 1, "Dropout1d": 1, "Dropout2d": 1, "Dropout3d": 1,
    "AlphaDropout": 1, "Hardtanh": 2, "Threshold": 2,
}
_AUG_OPERATORS = {
    cst.AddAssign: cst.Add, cst.SubtractAssign: cst.Subtract, cst.MultiplyAssign: cst.Multiply,
    cst.DivideAssign: cst.Divide, cst.PowerAssign: cst.Power, cst.MatrixMultiplyAssign: cst.MatrixMultiply,
    cst.ModuloAssign: cst.Modulo,
}
_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float, cst.SimpleString)
_LEAF_ERROR = "'a leaf Variable that requires grad is being used in an in-place operation'"
_VERSION_ERROR = "'one of the variables needed for gradient computation has been modified by an inplace operation'"


@dataclass(frozen=True)
class _Mutation:
    """One statement that mutates a tensor in place."""

    kind: str  # "method" | "augassign" | "setitem"
    #: the tensor expression whose storage changes (subscripts stripped)
    base: cst.BaseExpression
    #: the mutation goes through a subscript (a view of `base`)
    through_view: bool
    methods: tuple[cst.Call, ...] = ()


class InplaceOnGradTrackedTensor(Rule):
    """
    ## What it does
    Finds in-place operations (methods ending in `_`, `+=` and friends, index
    assignment, `inplace=True` activations) on tensors autograd tracks: parameters,
    `requires_grad=True` tensors, and intermediate values autograd saved for backward.
    Leaf updates go under `torch.no_grad()`; steps of a differentiable computation go
    out of place.

    ## Why is this bad?
    A leaf that requires grad cannot be changed in place while autograd records:
    `p -= lr * p.grad` raises `a leaf Variable that requires grad is being used in an
    in-place operation`. An intermediate that an op saved for backward (the output of
    `sigmoid`/`tanh`/`softmax`, the input of `Linear`, `x` in `x ** 2`) must not change
    before backward: `one of the variables needed for gradient computation has been
    modified by an inplace operation`. `nn.ReLU(inplace=True)` right after `nn.Sigmoid()`
    is the classic case.

    ## Example
    ```python
    for p in model.parameters():
        p -= lr * p.grad

    h = torch.sigmoid(self.fc1(x))
    h.mul_(2)
    ```

    ## Use instead
    ```python
    for p in model.parameters():
        with torch.no_grad():
            p -= lr * p.grad

    h = torch.sigmoid(self.fc1(x))
    h = h.mul(2)
    ```

    ## Fix safety
    The fix is chosen by intent. An update of a leaf (a loop over `parameters()`, a
    module's weight, a statement reading `.grad`, filling a `requires_grad` tensor) is
    wrapped in `with torch.no_grad():`; going out of place there would silently leave the
    model unchanged. A step of a differentiable computation goes out of place:
    `x = x.mul(2)`, `x = x + y`, `torch.zeros_like` / `torch.full_like` for `zero_` /
    `fill_`, `x = x.clone()` before an index assignment, and `inplace=True` is dropped.
    Out-of-place rewrites are unsafe: they change what other references to the tensor
    see, promote dtypes and may broadcast to a larger shape, so the rule only offers them
    when no other name, container, caller or view can share the tensor, and reports
    without a fix otherwise. In-place ops on intermediates nothing saved are harmless and
    not reported. Nothing is reported under `no_grad` / `inference_mode` (also through a
    same-file caller), inside optimizers (`torch.optim.Optimizer` subclasses),
    initializers (functions ending in `_`), custom `autograd.Function` methods, on
    buffers and running statistics, or in files that freeze parameters.

    ## Verification
    The original error is gone; forward values are equal; gradients match finite
    differences; parameters change as the original intended (an update under `no_grad`
    still updates them).
    """

    code = "AGF003"
    name = "inplace-on-grad-tracked-tensor"
    safety = Applicability.UNSAFE
    message = "in-place operation on a tensor autograd tracks"
    contract = Contract(
        description="original autograd error gone; forward values equal; gradients match finite differences; "
        "parameters change as the original intended",
        checks=(
            "original_error_gone",
            "forward_values_equal",
            "gradients_match_finite_differences",
            "parameters_change_as_intended",
        ),
    )

    def _calls_in(self, small: cst.CSTNode) -> list[cst.Call]:
        """Calls inside one small statement (not in a lambda, which runs later if at all),
        found once and shared by the checks."""
        key = id(small)
        if key not in self._calls_cache:
            self._calls_cache[key] = self.context.semantic.syntax.find(small, cst.Call, skip=cst.Lambda)  # type: ignore[assignment]
        return self._calls_cache[key]

    def visit_Module(self, node: cst.Module) -> bool:
        self._calls_cache: dict[int, list[cst.Call]] = {}
        analysis = TrackingAnalysis.for_context(self.context)
        leaf_updates: list[tuple[int, int, Site]] = []
        # the `nn.Sequential` and `inplace=` checks look for calls of these few names: a file
        # that calls none of them (most) skips both for every statement
        imports = self.context.imports
        layer_calls = any(imports.qualified_name(call.func) in _LAYER_CALLS  # type: ignore[attr-defined]
                          for call in self.context.semantic.syntax.find(node, cst.Call))
        for site in analysis.sites():
            if layer_calls:
                self._sequential(site, analysis)
            if site.position.grad_disabled or site.position.exempt:
                continue
            if layer_calls:
                self._inplace_keywords(site, analysis)
            for small in site.statement.body:
                mutation = _mutation(small, self.context.imports)
                if mutation is None:
                    continue
                fact = analysis.tracked(mutation.base, site.statement, small)
                if fact is None:
                    continue
                if fact.leaf:
                    if len(site.statement.body) == 1 and _intended_update(mutation, fact, small, site):
                        leaf_updates.append((site.block, site.index, site))
                    else:
                        self.report(small, _leaf_message(mutation) + "; decide whether it is an update (then "
                                    "`with torch.no_grad():`) or part of the computation (then out of place)")
                elif fact.saved and fact.kind is not Kind.SAVED_BY_CTX:
                    self._saved_intermediate(site, small, mutation, fact)
        for run in consecutive_runs(leaf_updates):
            self._report_leaf_run(run)  # type: ignore[arg-type]
        return False

    # -- leaf updates ------------------------------------------------------------------
    def _report_leaf_run(self, run: list[Site]) -> None:
        statements = [site.statement for site in run]
        edits, needs = no_grad_wrap_edits(statements, self.context.imports)
        fix = Fix(Applicability.SAFE, edits, "wrap the update in `with torch.no_grad():`", needs)
        first = statements[0].body[0]
        mutation = _mutation(first, self.context.imports)
        assert mutation is not None
        self.report(first, _leaf_message(mutation) + "; wrap the update in `with torch.no_grad():`", fix)

    # -- saved intermediates -----------------------------------------------------------
    def _saved_intermediate(self, site: Site, small: cst.BaseSmallStatement, mutation: _Mutation, fact: Tracked) -> None:
        base = mutation.base
        label = _label(base)
        message = (
            f"in-place operation on `{label}`, which autograd saved for backward: backward raises {_VERSION_ERROR}"
        )
        if fact.aliased or fact.view or type(base) is not cst.Name or len(site.statement.body) != 1:
            self.report(small, message + "; another reference may share it, so go out of place by hand")
            return
        fix = self._out_of_place(site.statement, small, mutation, base)
        if fix is None:
            self.report(small, message + "; no out-of-place equivalent is certain here")
            return
        self.report(small, message + "; compute it out of place", fix)

    def _out_of_place(
        self, statement: cst.SimpleStatementLine, small: cst.BaseSmallStatement, mutation: _Mutation, base: cst.Name
    ) -> Fix | None:
        imports = self.context.imports
        if mutation.through_view:
            clone = cst.parse_statement(f"{base.value} = {base.value}.clone()")

            def insert_clone(updated: cst.CSTNode) -> cst.FlattenSentinel:
                assert type(updated) is cst.SimpleStatementLine
                first = clone.with_changes(leading_lines=updated.leading_lines)
                return cst.FlattenSentinel([first, updated.with_changes(leading_lines=())])

            return Fix(Applicability.UNSAFE, (Edit(statement, insert_clone),), f"clone `{base.value}` before mutating it")
        if mutation.kind == "augassign":
            assert type(small) is cst.AugAssign
            operator = _AUG_OPERATORS.get(type(small.operator))
            if operator is None:
                return None

            def to_binary(updated: cst.CSTNode) -> cst.CSTNode:
                assert type(updated) is cst.AugAssign
                value = updated.value
                if not isinstance(value, _ATOMS) and not value.lpar:
                    value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                return cst.Assign(
                    targets=[cst.AssignTarget(target=updated.target)],
                    value=cst.BinaryOperation(left=updated.target, operator=operator(), right=value),
                )

            return Fix(Applicability.UNSAFE, (Edit(small, to_binary),), "compute out of place")
        if mutation.kind == "method":
            assert type(small) is cst.Expr
            value = _out_of_place_chain(small.value, base, imports)
            if value is None:
                return None
            expression, needs = value

            def to_assign(updated: cst.CSTNode) -> cst.CSTNode:
                return cst.Assign(targets=[cst.AssignTarget(target=base)], value=expression)

            return Fix(Applicability.UNSAFE, (Edit(small, to_assign),), "compute out of place", needs)
        return None

    # -- inplace=True ------------------------------------------------------------------
    def _inplace_keywords(self, site: Site, analysis: TrackingAnalysis) -> None:
        imports = self.context.imports
        for small in site.statement.body:
            for call in self._calls_in(small):
                if imports.qualified_name(call.func) not in INPLACE_FUNCTIONS:
                    continue
                flag = keyword(call, "inplace")
                args = positional(call)
                if flag is None or not is_true(flag.value) or not args:
                    continue
                argument = args[0]
                harm = _inplace_harm(argument, site, analysis)
                if harm is None:
                    continue
                fix = self._drop_inplace_fix(small, call, argument)
                message = f"`inplace=True` overwrites {harm}"
                if fix is None:
                    self.report(call, message + "; other references see the change, so drop `inplace=True` by hand")
                else:
                    self.report(call, message + "; drop `inplace=True`", fix)

    def _drop_inplace_fix(self, small: cst.BaseSmallStatement, call: cst.Call, argument: cst.BaseExpression) -> Fix | None:
        if type(small) is cst.Expr and small.value is call:
            if type(argument) is not cst.Name:
                return None

            def to_assign(updated: cst.CSTNode) -> cst.CSTNode:
                assert type(updated) is cst.Expr and type(updated.value) is cst.Call
                return cst.Assign(targets=[cst.AssignTarget(target=argument)], value=_without_inplace(updated.value))

            return Fix(Applicability.UNSAFE, (Edit(small, to_assign),), "drop `inplace=True` and rebind the result")
        if type(argument) is cst.Name:
            rebinds = (
                type(small) is cst.Assign
                and small.value is call
                and len(small.targets) == 1
                and type(small.targets[0].target) is cst.Name
                and small.targets[0].target.value == argument.value
            )
            if not rebinds:
                return None
        return Fix(
            Applicability.UNSAFE,
            (Edit(call, lambda updated: _without_inplace(updated)),),  # type: ignore[arg-type]
            "drop `inplace=True`",
        )

    def _sequential(self, site: Site, analysis: TrackingAnalysis) -> None:
        """`nn.Sequential(..., nn.Sigmoid(), nn.ReLU(inplace=True), ...)`, the layers written
        inline or in a list handed over as `nn.Sequential(*layers)`."""
        imports = self.context.imports
        for small in site.statement.body:
            for call in self._calls_in(small):
                if imports.qualified_name(call.func) not in _SEQUENTIAL:
                    continue
                layers = positional(call) or starred_list(call, site.position.function or self.context.module)
                for previous, layer in zip(layers or [], (layers or [])[1:]):
                    if type(previous) is not cst.Call or type(layer) is not cst.Call:
                        continue
                    before = analysis.module_constructor(previous)
                    kind = analysis.module_constructor(layer)
                    if before not in OUTPUT_SAVING_MODULES or kind not in INPLACE_MODULES:
                        continue
                    where = _module_inplace_position(layer, INPLACE_MODULES[kind])
                    if where is False:
                        continue
                    fix = Fix(
                        Applicability.UNSAFE,
                        (Edit(layer, lambda updated, w=where: _without_argument(updated, "inplace", w)),),  # type: ignore[misc]
                        f"use `{kind}()` out of place",
                    )
                    self.report(
                        layer,
                        f"`{kind}(inplace=True)` overwrites the output of `{before}`, which autograd saved for "
                        f"backward: backward raises {_VERSION_ERROR}; use it out of place",
                        fix,
                    )


# -- helpers ---------------------------------------------------------------------------
def _label(node: cst.BaseExpression) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _strip_subscripts(node: cst.BaseExpression) -> tuple[cst.BaseExpression, bool]:
    through = False
    while type(node) is cst.Subscript:
        node, through = node.value, True
    return node, through


def _inplace_method(call: cst.Call, imports: ImportIndex) -> str | None:
    """The method of an in-place call (`semantic/inplace.py`'s answer; an unknown
    trailing-underscore method counts: a user's `normalize_` mutates as torch's do)."""
    if not is_inplace_call(call, imports).possible:
        return None
    return call.func.attr.value  # type: ignore[attr-defined]


def _mutation(small: cst.BaseSmallStatement, imports: ImportIndex) -> _Mutation | None:
    """The in-place mutation `small` performs, if it is one (whole statement only)."""
    if type(small) is cst.Expr and type(small.value) is cst.Call:
        calls: list[cst.Call] = []
        node: cst.BaseExpression = small.value
        while type(node) is cst.Call and _inplace_method(node, imports) is not None:
            calls.append(node)
            node = node.func.value  # type: ignore[attr-defined]
        if not calls:
            return None
        base, through = _strip_subscripts(node)
        return _Mutation("method", base, through, tuple(reversed(calls)))
    if type(small) is cst.AugAssign:
        base, through = _strip_subscripts(small.target)
        return _Mutation("augassign", base, through)
    if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Subscript:
        base, _ = _strip_subscripts(small.targets[0].target)
        return _Mutation("setitem", base, True)
    return None


def _reads_grad(node: cst.CSTNode) -> bool:
    finder = _GradReadFinder()
    walk(node, finder)
    return finder.found


class _GradReadFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found = False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "grad":
            self.found = True


def _intended_update(mutation: _Mutation, fact: Tracked, small: cst.BaseSmallStatement, site: Site) -> bool:
    """A leaf is being updated on purpose: a parameter, a `.grad` step, a fill, a setitem."""
    if fact.kind is Kind.PARAMETER or site.position.in_parameter_loop or _reads_grad(small):
        return True
    if mutation.kind == "setitem" or (mutation.kind == "augassign" and mutation.through_view):
        return True  # `w[0] = v`, `weights[0] *= 1.0001`: editing chosen entries of a weight
    names = {c.func.attr.value for c in mutation.methods}  # type: ignore[attr-defined]
    return mutation.kind == "method" and names <= FILL_METHODS


def _leaf_message(mutation: _Mutation) -> str:
    label = _label(mutation.base)
    if mutation.through_view:
        return f"in-place change of a view of `{label}`, a leaf that requires grad: raises 'a view of a leaf Variable that requires grad is being used in an in-place operation'"
    return f"in-place change of `{label}`, a leaf that requires grad: raises {_LEAF_ERROR}"


def _out_of_place_chain(
    call: cst.BaseExpression, base: cst.Name, imports: ImportIndex
) -> tuple[cst.BaseExpression, tuple[str, ...]] | None:
    """`x.mul_(a).add_(b)` -> `x.mul(a).add(b)`; `x.zero_()` -> `torch.zeros_like(x)`."""
    if type(call) is not cst.Call or type(call.func) is not cst.Attribute:
        return None
    method = call.func.attr.value
    if call.func.value is base or (type(call.func.value) is cst.Name and call.func.value.value == base.value):
        receiver: cst.BaseExpression = base
        needs: tuple[str, ...] = ()
    else:
        inner = _out_of_place_chain(call.func.value, base, imports)
        if inner is None:
            return None
        receiver, needs = inner
    if method == "zero_" and not call.args and receiver is base:
        function, more = imports.expression_for("torch.zeros_like")
        return cst.Call(func=function, args=[cst.Arg(base)]), needs + more
    if method == "fill_" and len(call.args) == 1 and receiver is base and _is_number(call.args[0].value):
        function, more = imports.expression_for("torch.full_like")
        return (
            cst.Call(func=function, args=[cst.Arg(base, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Arg(call.args[0].value)]),
            needs + more,
        )
    twin = method[:-1]
    if twin not in OUT_OF_PLACE:
        return None
    return call.with_changes(func=call.func.with_changes(value=receiver, attr=cst.Name(twin))), needs


def _is_number(node: cst.BaseExpression) -> bool:
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
        node = node.expression
    return type(node) in (cst.Integer, cst.Float)


def _inplace_harm(argument: cst.BaseExpression, site: Site, analysis: TrackingAnalysis) -> str | None:
    """Why overwriting `argument` in place breaks autograd (None: it does not, as far as shown)."""
    if analysis.saves_output(argument, site.statement):
        return f"`{_label(argument)}`, whose output autograd saved for backward: backward raises {_VERSION_ERROR}"
    if type(argument) is cst.Name:
        fact = analysis.tracked(argument, site.statement)
        if fact is None:
            return None
        if fact.leaf:
            return f"`{argument.value}`, a leaf that requires grad: raises {_LEAF_ERROR}"
        if fact.saved and fact.kind is not Kind.SAVED_BY_CTX:
            return f"`{argument.value}`, which autograd saved for backward: backward raises {_VERSION_ERROR}"
    return None


def _without_argument(call: cst.Call, name: str, position: int | None = None) -> cst.Call:
    """`call` without its `name=` argument (or, when `position` is given, without the
    positional argument there), commas tidied."""
    index = None
    positional_seen = 0
    for i, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value == name:
            index = i
        elif arg.keyword is None and not arg.star:
            if position is not None and positional_seen == position:
                index = i
            positional_seen += 1
    if index is None:
        return call
    args = list(call.args[:index]) + list(call.args[index + 1:])
    if args:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


def _without_inplace(call: cst.Call) -> cst.Call:
    return _without_argument(call, "inplace")


def _module_inplace_position(call: cst.Call, position: int) -> int | None | bool:
    """How an nn activation/dropout constructor sets `inplace=True`: None for the
    keyword, the positional index otherwise; False when it does not."""
    flag = keyword(call, "inplace")
    if flag is not None:
        return None if is_true(flag.value) else False
    args = [a for a in call.args if a.keyword is None]
    if len(args) > position and is_true(args[position].value):
        return position
    return False
