"""AGF015 zero-grad-set-to-none-false: `zero_grad(set_to_none=False)` writes zeros into every `.grad`."""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.expressions import is_false
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.rule import Contract, Rule
from autograd_fix.codemods.names import last_segment
from autograd_fix.codemods.semantic.callgraph import collected_by_pytest
from autograd_fix.codemods.semantic.gradmode import find_grad_use
from autograd_fix.codemods.semantic.roles import Role
from autograd_fix.codemods.torch_api import DISTRIBUTED_PACKAGES, SET_TO_NONE_DEFAULT_SINCE, SET_TO_NONE_SINCE
from autograd_fix.codemods.torch_version import supports
from autograd_fix.codemods.walk import iter_descendants

#: the roles whose objects have torch's `zero_grad(set_to_none=...)` (optimizers and modules)
_ZEROING_ROLES = frozenset({Role.OPTIMIZER, Role.MODEL})


class ZeroGradSetToNoneFalse(Rule):
    """
    ## What it does
    Finds `optimizer.zero_grad(set_to_none=False)` and `model.zero_grad(set_to_none=False)`
    and drops the argument (the default is `set_to_none=True` since PyTorch 2.0); where
    the project still supports an older PyTorch (`target-torch` below 2.0), it writes
    `set_to_none=True` instead.

    ## Why is this bad?
    `set_to_none=False` runs a fill kernel over every gradient on every step and keeps
    the gradient memory allocated between steps; with `None`, the next backward writes
    its result directly instead of adding into zeros (TorchFix's TOR402, PyTorch's
    performance tuning guide).

    ## Example
    ```python
    for x, y in loader:
        optimizer.zero_grad(set_to_none=False)
        criterion(model(x), y).backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
        optimizer.zero_grad()
    ```

    ## Fix safety
    Unsafe: zeros and `None` differ for a parameter that gets no gradient in a step (a
    frozen branch, an unused embedding row is fine, an unused layer is not): with `None`
    the optimizer skips it, with zeros it still applies weight decay and momentum, and
    code that reads `p.grad` after zeroing sees `None`. Calls on an object the file shows
    to be something else than an optimizer or a module, files that define their own
    `zero_grad(set_to_none=...)`, and files that add into `.grad` by hand (`p.grad += g`,
    `p.grad.add_(g)`: a parameter server accumulating workers' gradients needs the zeros)
    are left alone, and so are files that train across processes (they import
    `torch.distributed`): there DDP's gradient buckets, FSDP's and tensor parallelism's
    sharded gradients and the collectives run on `.grad` make keeping the buffers
    allocated a choice the author may have made on purpose (accelerate's N-D parallel
    example does), which a single-process run cannot judge. A call in a pytest test that
    takes no gradient (`fabric_optimizer.zero_grad(set_to_none=False)` under a mocked
    `zero_grad`, then `assert_called_with(set_to_none=False)`) checks the argument itself,
    not a training step: left alone. Below torch 1.7 (no `set_to_none`) the
    rule stays silent.

    ## Verification
    Outputs (parameters, losses) equal and gradients equal at every optimizer step: a
    parameter that the change makes the optimizer skip moves differently, and the patch
    is rejected.
    """

    code = "AGF015"
    name = "zero-grad-set-to-none-false"
    safety = Applicability.UNSAFE
    message = "`zero_grad(set_to_none=False)` fills every gradient with zeros each step; `None` is cheaper"
    contract = Contract(
        description="outputs equal; gradients equal at every optimizer step",
        checks=("outputs_equal", "grads_equal"),
    )

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self._calls: list[cst.Call] = []
        #: the functions being visited, innermost last, and the one around each call
        self._functions: list[cst.FunctionDef] = []
        self._enclosing: dict[int, cst.FunctionDef] = {}
        self._own_zero_grad = False
        #: the file adds into `.grad` by hand: it relies on zeros being there
        self._writes_grad = False

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._functions.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.append(node)
        if node.name.value == "zero_grad" and any(p.name.value == "set_to_none" for p in node.params.params):
            self._own_zero_grad = True

    def visit_Call(self, node: cst.Call) -> None:
        if type(node.func) is cst.Attribute and node.func.attr.value == "zero_grad" and _set_to_none_false(node):
            self._calls.append(node)
            if self._functions:
                self._enclosing[id(node)] = self._functions[-1]
        elif type(node.func) is cst.Attribute and node.func.attr.value.endswith("_") and _is_grad(node.func.value):
            self._writes_grad = True  # `p.grad.add_(g)`: needs a tensor there, not None

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if _is_grad(node.target):
            self._writes_grad = True  # `p.grad += g` (a parameter server accumulating by hand)

    def leave_Module(self, original_node: cst.Module) -> None:
        floor = self.context.target_torch
        if self._own_zero_grad or self._writes_grad or not self._calls \
                or not supports(floor, SET_TO_NONE_SINCE):
            return
        if _trains_across_processes(self.context):
            return
        drop = supports(floor, SET_TO_NONE_DEFAULT_SINCE)
        others = _other_role_names(self.context, original_node)
        for call in self._calls:
            receiver = call.func.value if type(call.func) is cst.Attribute else None
            if type(receiver) is cst.Name and receiver.value in others:
                continue
            if self._in_a_test_that_trains_nothing(call):
                continue
            if drop:
                fix = Fix(Applicability.UNSAFE, (Edit(call, _drop_set_to_none),), "drop `set_to_none=False` (the default is `None` since 2.0)")
            else:
                fix = Fix(Applicability.UNSAFE, (Edit(call, _set_to_none_true),), "pass `set_to_none=True`")
            self.report(call, fix=fix)


    def _in_a_test_that_trains_nothing(self, call: cst.Call) -> bool:
        """The call stands in a function pytest runs that takes no gradient (nor does
        anything of this file it calls): it tests the call, it is no training step."""
        function = self._enclosing.get(id(call))
        graph = self.context.semantic.call_graph
        facts = graph.facts(function) if function is not None else None
        if facts is None or not collected_by_pytest(facts, self.context.path):
            return False
        use = find_grad_use(facts.node.body, self.context.imports)
        if any(not (type(node) is cst.Call and last_segment(node.func) == "zero_grad") for node in use.direct):
            return False  # a backward, an optimizer step: it trains
        return not any(callee.uses_grad for name in facts.calls for callee in graph.resolve(name, facts.class_name, facts.node))


def _trains_across_processes(context) -> bool:  # type: ignore[no-untyped-def]
    """Whether the file imports `torch.distributed` (or something from it), by qualified name."""
    return any(
        target == package or target.startswith(package + ".")
        for target in context.imports.bindings.values()
        for package in DISTRIBUTED_PACKAGES
    )


def _is_grad(node: cst.BaseExpression) -> bool:
    return type(node) is cst.Attribute and node.attr.value == "grad"


def _set_to_none_false(call: cst.Call) -> bool:
    return any(a.keyword is not None and a.keyword.value == "set_to_none" and is_false(a.value) for a in call.args)


def _other_role_names(context, module: cst.Module) -> frozenset[str]:  # type: ignore[no-untyped-def]
    """Names that the file's role evidence binds to something that is neither an
    optimizer nor a module, in any scope."""
    scopes: list[cst.CSTNode] = [module, *(n for n in iter_descendants(module) if type(n) is cst.FunctionDef)]
    found: set[str] = set()
    for scope in scopes:
        for name, decision in context.semantic.roles_in(scope).items():
            if decision.certain and decision.role not in _ZEROING_ROLES:
                found.add(name)
    return frozenset(found)


def _drop_set_to_none(updated: cst.CSTNode) -> cst.CSTNode:
    assert type(updated) is cst.Call
    kept = [a for a in updated.args if not (a.keyword is not None and a.keyword.value == "set_to_none")]
    if kept:
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return updated.with_changes(args=kept)


def _set_to_none_true(updated: cst.CSTNode) -> cst.CSTNode:
    assert type(updated) is cst.Call
    args = [
        a.with_changes(value=cst.Name("True")) if a.keyword is not None and a.keyword.value == "set_to_none" else a
        for a in updated.args
    ]
    return updated.with_changes(args=args)
