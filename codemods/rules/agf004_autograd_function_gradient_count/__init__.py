"""AGF004 autograd-function-gradient-count: `backward` returns the wrong number (or kind) of gradients."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autograd_fix.codemods.semantic.autograd_function import (
    ApplyCalls,
    CustomFunction,
    TensorFacts,
    apply_calls,
    ctx_attribute,
    custom_function,
    dropped_tensors,
    expected_gradients,
    is_saved_tensors,
    is_zero_literal,
    own_nodes,
    return_statements,
    returned_elements,
)
from autograd_fix.codemods.rules.agf004_autograd_function_gradient_count.function_inputs import input_evidence
from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.semantic.tensor_truth import backward_tensors
from autograd_fix.codemods.rule import Contract, Rule, RuleContext


class AutogradFunctionGradientCount(Rule):
    """
    ## What it does
    Checks that the `backward` of a custom `torch.autograd.Function` returns one gradient
    per input of `forward` (excluding `ctx`), and that it never returns a Python `0` where
    autograd wants a tensor or `None`. Missing gradients of inputs that are certainly not
    tensors (an `int`/`float`/`bool`/`str` annotation, a literal default, literal
    arguments at every `apply` call, a use as `dim=` or in `range()`) are padded with
    `None`; so are those of inputs that may be tensors, but only once a run shows they
    never require grad; a returned `0` becomes `None`; a conditional expression on a
    tensor (`g if x > 0 else 0`) becomes `torch.where`. Surplus trailing `None`s beyond
    the declared inputs are reported at lower severity and dropped.

    ## Why is this bad?
    Autograd checks the tuple `backward` returns against the inputs `apply` received and
    raises `function XBackward returned an incorrect number of gradients (expected 2,
    got 1)` on the first backward pass. A Python `0` fails with `expected Variable or
    None (got int)`, or with `returned a gradient different than None at position 2, but
    the corresponding forward input was not a Variable`. A Python `if` on a tensor with
    more than one element raises `Boolean value of Tensor with more than one value is
    ambiguous`.

    ## Example
    ```python
    class GradReverse(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, alpha: float):
            ctx.alpha = alpha
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output.neg() * ctx.alpha
    ```

    ## Use instead
    ```python
        @staticmethod
        def backward(ctx, grad_output):
            return grad_output.neg() * ctx.alpha, None
    ```

    ## Fix safety
    Safe where it is certain, unsafe where only a run can tell. `None` is the right
    gradient only for an input that needs none, so padding is safe only at positions the
    rule can show hold non-tensors. When a missing position could be a tensor that needs
    a gradient (a weight passed to `apply`), the padding is unsafe: applied only when
    verification runs the file and sees that input never require grad (a buffer, a
    constant), rejected when it did (the gradient would be silently dropped). When
    `backward` computes exactly as many tensors as are missing and never uses them (a
    gradient written and then forgotten in the `return`), the fix returns those instead
    of `None`, unsafe too: the run checks the returned gradients. With the
    combined `forward(ctx, ...)` style, autograd counts the arguments actually passed to
    `apply`; when `forward` has defaults and the file's call sites disagree (or there are
    none), `backward` is padded to the declared count, unsafe (autograd accepts trailing
    `None`s beyond the inputs given). Padding justified only by an input being kept as a
    ctx attribute and used as a plain factor in `backward` is unsafe too. `0 -> None` is
    safe (both mean "zero gradient"); `torch.where` is used only when the condition
    compares a tensor and the other branch is a tensor; a `0` behind a condition that may
    be a tensor becomes `None`, unsafe (right for a Python bool or a one-element tensor;
    an element-wise test still raises, and the run rejects it). Report only, because no
    run can supply the missing math: a `backward` with no `return` at all. More values than
    `forward` declares inputs: surplus trailing `None`s (current PyTorch ignores them, some
    releases raise) are dropped, safe; a surplus tensor is reported only.

    ## Verification
    The original error is gone; called on the same saved context, the fixed `backward`
    returns the original's gradients wherever the original returned one, and `None` only
    for inputs that never required grad during the run (function mode, whose synthesized
    inputs all require grad, cannot show that: unverified). Where the original's
    gradients match finite differences, the fixed Function passes
    `torch.autograd.gradcheck` in float64.
    """

    code = "AGF004"
    name = "autograd-function-gradient-count"
    safety = Applicability.SAFE
    safety_note = "unsafe where only a run can tell"
    message = "custom autograd Function's backward returns the wrong number of gradients"
    contract = Contract(
        description="the 'incorrect number of gradients' / 'expected Variable or None' error is gone; called on the "
        "same saved context, backward returns the original's gradients wherever the original returned one, and None "
        "only for inputs that never required grad during the run; gradcheck in float64 where the original's "
        "gradients match finite differences (a straight-through estimator is not rejected for being one)",
        checks=("original_error_gone", "gradcheck_if_original_matches", "backward_agrees_with_original"),
    )

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self._functions: list[CustomFunction] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        function = custom_function(node, self.context.imports)
        if function is not None:
            self._functions.append(function)

    def leave_Module(self, original_node: cst.Module) -> None:
        if not self._functions:
            return
        calls = apply_calls(original_node, self._functions)
        for function in self._functions:
            _Checker(self, function, calls.get(function.name), self.context.imports).run()


@dataclass
class _Checker:
    rule: AutogradFunctionGradientCount
    function: CustomFunction
    calls: ApplyCalls | None
    imports: ImportIndex

    def run(self) -> None:
        backward = self.function.backward
        assert backward is not None
        self.facts = _backward_facts(self.function, self.imports)
        self._check_count(backward)
        self._check_surplus(backward)
        self._check_zeros(backward)

    # -- count ---------------------------------------------------------------------------

    def _check_count(self, backward: cst.FunctionDef) -> None:
        expected, certain = expected_gradients(self.function, self.calls)
        if expected is None:
            return
        returns = [r for r in return_statements(backward) if r.value is not None]
        if not returns:
            self._check_no_return(backward, expected, certain)
            return
        for node in returns:
            got = self._count(node)
            if got is None or got >= expected:
                continue
            if not certain and not self._certainly_short(got):
                continue
            self._report_short(node, got, expected, certain)

    def _check_surplus(self, backward: cst.FunctionDef) -> None:
        """More gradients than `forward` declares inputs: surplus trailing Nones run on
        current PyTorch (eager and torch.compile, checked on 2.13) but some releases
        raise on the count (deepseek-ai/TileKernels#10), so they are reported at lower
        severity and dropped (safe: no input can receive them); a surplus tensor fails on
        every version (report only: which value is surplus is the author's call)."""
        inputs = self.function.forward_inputs()
        if inputs is None:
            return
        declared = len(inputs)
        for node in return_statements(backward):
            elements = returned_elements(node)
            if elements is None or type(node.value) is not cst.Tuple or len(elements) <= declared:
                continue
            head = (
                f"`{self.function.name}.backward` returns {len(elements)} gradients but `forward` declares "
                f"{declared} input{'s' if declared != 1 else ''}"
            )
            if not all(_is_none(e) for e in elements[declared:]):
                self.rule.report(node, f"{head}: autograd raises 'returned an incorrect number of gradients'")
                continue
            surplus = len(elements) - declared
            fix = Fix(
                applicability=Applicability.SAFE,
                edits=(Edit(node, lambda updated: _drop_trailing(updated, surplus)),),
                description=f"drop the surplus trailing None{'s' if surplus > 1 else ''}",
            )
            self.rule.report(
                node,
                f"{head} (lower severity: current PyTorch ignores surplus trailing Nones, some releases raise "
                "'returned an incorrect number of gradients'); drop the surplus None"
                + ("s" if surplus > 1 else ""),
                fix,
            )

    def _check_no_return(self, backward: cst.FunctionDef, expected: int, certain: bool) -> None:
        if own_nodes(backward, cst.Raise):
            return
        minimum = expected if certain else self._required()
        if minimum < 2:
            return
        self.rule.report(
            backward.name,
            f"`{self.function.name}.backward` returns nothing but `forward` takes {expected} inputs: autograd "
            "raises 'returned an incorrect number of gradients'; return one gradient (or None) per input",
        )

    def _required(self) -> int:
        inputs = self.function.forward_inputs() or ()
        return sum(1 for p in inputs if p.default is None)

    def _certainly_short(self, got: int) -> bool:
        """Uncertain count: short for sure if below the required inputs or a call site's count."""
        if got < self._required():
            return True
        return self.calls is not None and any(count > got for count in self.calls.counts)

    def _count(self, node: cst.Return) -> int | None:
        elements = returned_elements(node)
        if elements is None:
            return None
        if type(node.value) is cst.Tuple:
            return len(elements)
        value = elements[0]
        if _is_none(value) or is_zero_literal(value) or self.facts.is_tensor(value):
            return 1
        if type(value) is cst.IfExp and all(
            _is_none(b) or is_zero_literal(b) or self.facts.is_tensor(b) for b in (value.body, value.orelse)
        ):
            return 1
        return None

    def _report_short(self, node: cst.Return, got: int, expected: int, certain: bool) -> None:
        inputs = self.function.forward_inputs() or ()
        missing = list(range(got, expected))
        names = [inputs[i].name.value for i in missing]
        head = (
            f"`{self.function.name}.backward` returns {got} gradient{'s' if got != 1 else ''} but `forward` takes "
            f"{expected} input{'s' if expected != 1 else ''}"
        )
        pad = f"return None for input{'s' if len(names) > 1 else ''} " + ", ".join(f"`{n}`" for n in names)
        if not certain:
            self.rule.report(
                node,
                f"{head} at some call sites: `apply` is called with different argument counts; return one "
                "gradient (or None) per input `forward` declares (unsafe fix: None, kept only if a run shows "
                "the input never requires grad)",
                self._padding(node, len(missing), Applicability.UNSAFE, pad + " (verified by a run)"),
            )
            return
        verdicts = [input_evidence(self.function, i, self.calls, self.imports) for i in missing]
        unproven = [name for name, verdict in zip(names, verdicts) if verdict is None]
        assert self.function.backward is not None
        dropped = dropped_tensors(self.function.backward, self.facts)
        if unproven and len(dropped) == len(missing):
            # the backward computes exactly that many gradients and never uses them: the
            # hand fix returns them, and a run judges it like any unsafe fix
            computed = ", ".join(f"`{n}`" for n in dropped)
            self.rule.report(
                node,
                f"{head}; it computes {computed} but never returns {'them' if len(dropped) > 1 else 'it'}: return "
                f"{'them' if len(dropped) > 1 else 'it'} for {', '.join(f'`{n}`' for n in names)} (unsafe fix, kept only if "
                "a run accepts it)",
                self._padding(
                    node, len(missing), Applicability.UNSAFE, f"return the computed {computed} (verified by a run)", dropped
                ),
            )
            return
        if unproven:
            listed = ", ".join(f"`{n}`" for n in unproven)
            self.rule.report(
                node,
                f"{head}; {listed} may need a gradient, so padding with None could silently drop it: "
                "return its gradient (or None if it needs none; the unsafe fix pads None, kept only if a run "
                "shows the input never requires grad)",
                self._padding(node, len(missing), Applicability.UNSAFE, pad + " (verified by a run)"),
            )
            return
        applicability = Applicability.UNSAFE if "unsafe" in verdicts else Applicability.SAFE
        listed = ", ".join(f"`{n}`" for n in names)
        self.rule.report(
            node,
            f"{head}; return None for the non-tensor {listed}",
            self._padding(node, len(missing), applicability, f"return None for the non-tensor input{'s' if len(names) > 1 else ''} {listed}"),
        )

    def _padding(
        self, node: cst.Return, count: int, applicability: Applicability, description: str, values: list[str] | None = None
    ) -> Fix:
        """Pad `return` with `count` Nones (or the names in `values`): safe for proven
        non-tensors, unsafe (run-judged) otherwise."""
        return Fix(
            applicability=applicability,
            edits=(Edit(node, lambda updated: _pad_return(updated, count, values)),),
            description=description,
        )

    # -- zeros ---------------------------------------------------------------------------

    def _check_zeros(self, backward: cst.FunctionDef) -> None:
        for node in return_statements(backward):
            for element in returned_elements(node) or ():
                if is_zero_literal(element):
                    self._report_zero(element)
                elif type(element) is cst.IfExp and not self._tensor_ifexp(element):
                    self._python_ifexp(element)
        for node in own_nodes(backward, cst.IfExp):
            if self._tensor_ifexp(node):
                self._report_where(node)

    def _report_zero(self, node: cst.BaseExpression) -> None:
        fix = Fix(
            applicability=Applicability.SAFE,
            edits=(Edit(node, lambda updated: cst.Name("None")),),
            description="return None instead of a Python 0",
        )
        self.rule.report(
            node,
            f"`{self.function.name}.backward` returns a Python `0`: autograd wants a tensor or None "
            "(None means a zero gradient)",
            fix,
        )

    def _python_ifexp(self, node: cst.IfExp) -> None:
        branches = [b for b in (node.body, node.orelse) if is_zero_literal(b)]
        if not branches:
            return
        tensors = backward_tensors(self.function, self.imports)
        if tensors is not None and tensors.tested(node.test):
            # a tensor's truth value: the test raises "ambiguous" before any `0` is
            # returned; AGF018 reports it (its fix is `torch.where`), `0 -> None` would not help
            return
        if not _is_python_condition(node.test, self.facts, self.function.backward_ctx() or "ctx"):
            # right for a Python bool or a one-element tensor; an element-wise test still
            # raises 'ambiguous' after the fix, so the run rejects it
            fix = Fix(
                applicability=Applicability.UNSAFE,
                edits=tuple(Edit(branch, lambda updated: cst.Name("None")) for branch in branches),
                description="return None instead of a Python 0 (the condition may be a tensor: verified by a run)",
            )
            self.rule.report(
                node,
                f"`{self.function.name}.backward` may return a Python `0`: autograd wants a tensor or None",
                fix,
            )
            return
        for branch in branches:
            self._report_zero(branch)

    def _tensor_ifexp(self, node: cst.IfExp) -> bool:
        """`g if x > 0 else 0` with `x` a tensor and `g` a tensor."""
        test = node.test
        if not (type(test) is cst.Comparison and self.facts.is_tensor(test)):
            return False
        if is_zero_literal(node.orelse):
            return self.facts.is_tensor(node.body)
        if is_zero_literal(node.body):
            return self.facts.is_tensor(node.orelse)
        return False

    def _report_where(self, node: cst.IfExp) -> None:
        where, needs = self.imports.expression_for("torch.where")

        def replace(updated: cst.CSTNode) -> cst.CSTNode:
            assert type(updated) is cst.IfExp
            test = updated.test.with_changes(lpar=(), rpar=())
            return cst.Call(
                func=where,
                args=[cst.Arg(test), cst.Arg(updated.body), cst.Arg(updated.orelse)],
                lpar=updated.lpar,
                rpar=updated.rpar,
            )

        fix = Fix(
            applicability=Applicability.SAFE,
            edits=(Edit(node, replace),),
            description="use torch.where for the element-wise condition",
            required_imports=needs,
        )
        self.rule.report(
            node,
            f"`{self.function.name}.backward` branches on a tensor with a Python conditional expression "
            "(ambiguous for more than one element, and the other branch is a Python 0); use torch.where",
            fix,
        )


def _is_none(node: cst.BaseExpression) -> bool:
    return type(node) is cst.Name and node.value == "None"


def _is_python_condition(test: cst.BaseExpression, facts: TensorFacts, ctx: str) -> bool:
    """Conditions that are plain Python bools: `is None` tests, `ctx.needs_input_grad[i]`, flags."""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return _is_python_condition(test.expression, facts, ctx)
    if type(test) is cst.BooleanOperation:
        return _is_python_condition(test.left, facts, ctx) and _is_python_condition(test.right, facts, ctx)
    if type(test) is cst.Comparison:
        return all(type(c.operator) in (cst.Is, cst.IsNot) for c in test.comparisons)
    if type(test) is cst.Subscript:
        return ctx_attribute(test.value, ctx) == "needs_input_grad"
    return facts.is_non_tensor(test)


def _backward_facts(function: CustomFunction, imports: ImportIndex) -> TensorFacts:
    """Tensor facts in backward: grad outputs and unpacked saved tensors are tensors."""
    backward = function.backward
    assert backward is not None
    ctx = function.backward_ctx() or "ctx"
    tensors = set(function.backward_grad_names())
    for assign in own_nodes(backward, cst.Assign):
        if is_saved_tensors(assign.value, ctx):
            for target in assign.targets:
                if type(target.target) in (cst.Tuple, cst.List):
                    tensors |= {e.value.value for e in target.target.elements if type(e.value) is cst.Name}
        elif type(assign.value) is cst.Subscript and is_saved_tensors(assign.value.value, ctx):
            tensors |= {t.target.value for t in assign.targets if type(t.target) is cst.Name}
    return TensorFacts(backward, imports, tensors=tensors, skip_params=1)


def _drop_trailing(updated: cst.CSTNode, count: int) -> cst.CSTNode:
    """`return g, None` -> `return g`; `return (a, b, None)` -> `return (a, b)`; keeps the
    tuple's own layout and its trailing comma style."""
    assert type(updated) is cst.Return and type(updated.value) is cst.Tuple
    value = updated.value
    kept = list(value.elements[: len(value.elements) - count])
    final = value.elements[-1].comma
    if len(kept) == 1 and not value.lpar:
        return updated.with_changes(value=kept[0].value)
    if len(kept) == 1 and type(final) is not cst.Comma:
        final = cst.Comma()
    kept[-1] = kept[-1].with_changes(comma=final)
    return updated.with_changes(value=value.with_changes(elements=kept))


def _pad_return(updated: cst.CSTNode, count: int, values: list[str] | None = None) -> cst.CSTNode:
    """`return g` -> `return g, None`; `return (g,)` -> `return (g, None)`; keeps multi-line
    layout. With `values`, those names instead of the Nones."""
    assert type(updated) is cst.Return and updated.value is not None
    fill = list(values) if values is not None else ["None"] * count
    value = updated.value
    if type(value) is cst.Tuple and value.elements:
        elements = list(value.elements)
        last = elements[-1]
        trailing = last.comma
        multiline = bool(value.lpar) and type(value.lpar[0].whitespace_after) is cst.ParenthesizedWhitespace
        if len(elements) >= 2 and type(elements[-2].comma) is cst.Comma:
            separator = elements[-2].comma
        elif multiline:
            separator = cst.Comma(whitespace_after=value.lpar[0].whitespace_after)
        else:
            separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        final = trailing if multiline or len(elements) >= 2 else cst.MaybeSentinel.DEFAULT
        elements[-1] = last.with_changes(comma=separator)
        for index in range(count):
            comma = final if index == count - 1 else separator
            elements.append(cst.Element(cst.Name(fill[index]), comma=comma))
        return updated.with_changes(value=value.with_changes(elements=elements))
    separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    elements = [cst.Element(value, comma=separator)]
    for index in range(count):
        elements.append(cst.Element(cst.Name(fill[index]), comma=separator if index < count - 1 else cst.MaybeSentinel.DEFAULT))
    return updated.with_changes(value=cst.Tuple(elements=elements, lpar=(), rpar=()))
