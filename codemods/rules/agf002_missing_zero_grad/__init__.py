"""AGF002 missing-zero-grad: a training loop that steps but never zeroes gradients."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from autograd_fix.codemods.rules.agf002_missing_zero_grad.call_loops import loops_around_calls
from autograd_fix.codemods.semantic.callgraph import CallGraph, FunctionFacts
from autograd_fix.codemods.semantic.gradmode import with_disables_grad
from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.semantic.loops import (
    all_nodes,
    ancestors,
    bindings,
    block_statements,
    expression_statement_call,
    is_backward_call,
    local_nodes,
    RootTracker,
    parent_map,
    statement_line,
)
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.names import name_tokens
from autograd_fix.codemods.semantic.role_evidence import Basis, scope_roles
from autograd_fix.codemods.semantic.roles import CLEAR_TOKENS, GRAD_TOKENS, Role
from autograd_fix.codemods.rule import Contract, Rule, RuleContext, SiteFix
from autograd_fix.codemods.site_fixes import statement_at
from autograd_fix.codemods.walk import SyntaxIndex, iter_descendants

_GRAD_ATTRIBUTES = frozenset({"grad", "_grad", "main_grad"})
_LOOPS = (cst.For, cst.While)


@dataclass
class _Step:
    """One `optimizer.step()` (or `scaler.step(optimizer)`) statement in the loop."""

    call: cst.Call
    optimizer: str
    scaler: str | None = None


@dataclass
class _Update:
    """One hand-written update of a tensor from its own `.grad` (`w -= lr * w.grad`)."""

    line: cst.SimpleStatementLine
    tensor: str


@dataclass
class _LoopFacts:
    backwards: list[cst.Call] = field(default_factory=list)
    steps: list[_Step] = field(default_factory=list)
    updates: list[_Update] = field(default_factory=list)
    #: something we do not understand (closure step, unknown optimizer receiver): stay silent
    unclear: bool = False


class MissingZeroGrad(RootTracker, Rule):
    """
    ## What it does
    Finds training loops that call `backward()` and update the weights (an optimizer's
    `step()`, or `w -= lr * w.grad` by hand) but never zero the gradients between steps,
    and proposes `optimizer.zero_grad()` at the start of the iteration, then (if
    verification rejects that) right after the `step()`; only the latter where the step
    is not taken every iteration (inside the `if` of a gradient-accumulation loop), or
    `w.grad = None` after a hand-written update.

    ## Why is this bad?
    `backward()` adds into `.grad`; it never overwrites. Without zeroing, the step after
    `n` batches uses the sum of all `n` batches' gradients, so the effective learning rate
    grows every iteration and training diverges or crawls. Zeroing once per epoch, before
    the batch loop, is the same bug.

    ## Example
    ```python
    optimizer.zero_grad()
    for x, y in train_loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    optimizer.zero_grad()
    for x, y in train_loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    ```
    With gradient accumulation (`if (i + 1) % k == 0: optimizer.step()`) the zeroing goes
    inside that `if`, after the step: zeroing every micro-batch would defeat the
    accumulation, and zeroing between `backward()` and `step()` would step on zeros.

    ## Fix safety
    The fix is unsafe: it changes the training trajectory, by design. It is placed where
    every `step()` sees exactly the gradients of the backward passes since the previous
    step. The rule stays silent when any zeroing already exists in the loop, in any form
    (`optimizer.zero_grad()`, `model.zero_grad()`, `set_to_none`, `p.grad = None`,
    `p.grad.zero_()`, a same-file helper the loop calls), when `.grad` is written by hand,
    when `step` receives a closure (LBFGS: the closure zeroes), when the optimizer is
    created inside the loop, and when the stepped object is not named as an optimizer
    (DeepSpeed engines zero inside `step()`). Several optimizers with several backward
    passes (a GAN) are reported without a fix: which gradients each step should see is a
    modelling decision.

    ## Verification
    At every optimizer step, each parameter's `.grad` equals the sum of the gradient
    contributions of the backward passes since the previous step.
    """

    code = "AGF002"
    name = "missing-zero-grad"
    safety = Applicability.UNSAFE
    message = "training loop never zeroes gradients: every backward adds to the previous ones"
    contract = Contract(
        description="at every optimizer step, each parameter's .grad equals the sum of the gradient "
        "contributions of the backward passes since the previous step",
        checks=("step_grads_match_contributions",),
    )

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        self._init_tracker()

    def visit_Call(self, node: cst.Call) -> None:
        if is_backward_call(node, self.context.imports):
            self.note_interesting()

    def leave_Module(self, original_node: cst.Module) -> None:
        roots = self.interesting_roots()
        candidates = [found for root in roots for found in self._candidates(root)]
        if not roots:
            return  # no backward at all: the call graph is not needed
        graph, syntax = self.context.semantic.call_graph, self.context.semantic.syntax
        zeroing = graph.holding(lambda function: _zeroes(function.node, set(), syntax))
        helpers = {function.node.name.value for function in zeroing}
        if _step_patched(original_node, graph, zeroing):
            return  # `optimizer.step` replaced by a function that zeroes (or by one we cannot read)
        for loop, fact, parents in candidates:
            if not _zeroes(loop, helpers, syntax):
                self._report(loop, fact, parents)
        if not candidates:
            for function, fact in self._step_methods(graph, helpers):
                self._report(function.node, fact, parent_map(function.node, self.context.semantic.syntax))

    def _step_methods(self, graph: CallGraph, helpers: set[str]) -> list[tuple[FunctionFacts, _LoopFacts]]:
        """`train_step` stepping the optimizer outside any loop of its own, after a
        same-file call that backpropagates, where every call of it is repeated by a
        caller's loop that zeroes nowhere (`train`: zero_grad once, then the loop)."""
        imports, syntax = self.context.imports, self.context.semantic.syntax
        backprops = {id(f) for f in graph.holding(lambda f: any(is_backward_call(c, imports) for c in local_nodes(f.node.body, cst.Call, syntax)))}  # type: ignore[arg-type]
        found = []
        for function in graph.functions.values():
            if id(function) not in backprops or function.loops or _zeroes(function.node, helpers, syntax):
                continue
            parents = parent_map(function.node, syntax)
            fact = _loop_facts(function.node, imports, parents, _StepRoles(self.context, function.node))
            if not fact.steps or fact.updates or fact.unclear:
                continue
            if not fact.backwards and len({step.optimizer for step in fact.steps}) > 1:
                continue  # several optimizers fed by backward passes it cannot see
            loops = loops_around_calls(function)
            if loops is not None and not any(_zeroes(loop, helpers, syntax) for loop in loops):
                found.append((function, fact))
        return found

    def _candidates(self, root: cst.CSTNode) -> list[tuple[cst.For | cst.While, _LoopFacts, dict[int, cst.CSTNode]]]:
        """The innermost training loops under `root` with no zeroing of their own."""
        parents = parent_map(root, self.context.semantic.syntax)
        imports, syntax = self.context.imports, self.context.semantic.syntax
        loops = [loop for loop in all_nodes(root, _LOOPS, syntax)]
        roles = _StepRoles(self.context, root)
        facts = {id(loop): _loop_facts(loop, imports, parents, roles) for loop in loops}
        found = []
        for loop in loops:
            fact = facts[id(loop)]
            if not _trains(fact) or fact.unclear:
                continue
            if any(_trains(facts[id(inner)]) for inner in local_nodes(loop.body, _LOOPS, syntax)):
                continue  # the innermost training loop is the one to fix
            if not _zeroes(loop, set(), syntax):
                found.append((loop, fact, parents))  # type: ignore[arg-type]
        return found

    def _report(self, loop: cst.For | cst.While | cst.FunctionDef, fact: _LoopFacts, parents: dict[int, cst.CSTNode]) -> None:
        if fact.steps and fact.updates:
            return  # optimizer and hand-written updates mixed: not understood
        if fact.steps:
            if any(_is_bound_in(step.optimizer, loop) for step in fact.steps):
                return  # a fresh optimizer (and usually model) per iteration
            self._report_steps(loop, fact, parents)
        else:
            self._report_updates(fact, parents)

    no_site_fix = "the step at that line is not a call `<optimizer>.step()` in a statement of its own"

    @classmethod
    def fix_at(cls, context: RuleContext, line: int) -> SiteFix | None:
        """A run saw the step at `line` use gradients of earlier steps: the optimizer's
        `zero_grad()` goes right after it (unsafe; verification compares)."""
        statement = statement_at(context, line)
        steps = [node for node in iter_descendants(statement) if type(node) is cst.Call
                 and type(node.func) is cst.Attribute and node.func.attr.value == "step"
                 and type(node.func.value) in (cst.Name, cst.Attribute)] if statement is not None else []
        if statement is None or len(steps) != 1:
            return None
        optimizer = context.module.code_for_node(steps[0].func.value)  # type: ignore[union-attr]
        fix = Fix(Applicability.UNSAFE, (Edit(statement, _inserter([f"{optimizer}.zero_grad()"])),),
                  f"insert `{optimizer}.zero_grad()` after the step")
        return SiteFix(steps[0], f"`{optimizer}` steps on gradients never zeroed since its previous step; zero them after each step", fix)

    def _report_steps(self, loop: cst.For | cst.While | cst.FunctionDef, fact: _LoopFacts, parents: dict[int, cst.CSTNode]) -> None:
        optimizers = list(dict.fromkeys(step.optimizer for step in fact.steps))
        names = ", ".join(f"`{name}`" for name in optimizers)
        message = (
            f"{names} step{'s' if len(optimizers) == 1 else ''} in a loop that never zeroes gradients: "
            "every backward adds to the previous ones; zero them after each step"
        )
        anchor = fact.steps[0].call
        insertions = _step_insertions(fact, parents)
        if insertions is None:
            self.report(anchor, message + " (several optimizers and backward passes: not fixed automatically)")
            return
        edits = tuple(Edit(line, _inserter(statements)) for line, statements in insertions)
        after_step = Fix(Applicability.UNSAFE, edits, f"insert `{optimizers[0]}.zero_grad()` after the step")
        # candidates in order: zero at the start of the iteration, before the forward pass
        # (the usual hand fix: `.grad` read after the loop, a gradient-norm log, keeps the
        # last step's gradients), then right after the step
        # only where every iteration steps (the step a statement of the loop's own body,
        # not under an accumulation `if`): else zeroing each iteration drops contributions
        first = _first_statement(loop)
        every_iteration = all(parents.get(id(line)) is getattr(loop, "body", None) for line, _ in insertions)
        if len(optimizers) == 1 and first is not None and every_iteration:
            at_start = Fix(Applicability.UNSAFE, (Edit(first, _prepender([f"{optimizers[0]}.zero_grad()"])),),
                           f"insert `{optimizers[0]}.zero_grad()` at the start of the iteration")
            self.report(anchor, message, at_start, (after_step,))
        else:
            self.report(anchor, message, after_step)

    def _report_updates(self, fact: _LoopFacts, parents: dict[int, cst.CSTNode]) -> None:
        by_block: dict[int, list[_Update]] = {}
        for update in fact.updates:
            by_block.setdefault(id(parents[id(update.line)]), []).append(update)
        edits = []
        for updates in by_block.values():
            tensors = list(dict.fromkeys(update.tensor for update in updates))
            statements = [f"{tensor}.grad = None" for tensor in tensors]
            edits.append(Edit(updates[-1].line, _inserter(statements)))
        tensors = ", ".join(f"`{t}`" for t in dict.fromkeys(u.tensor for u in fact.updates))
        fix = Fix(Applicability.UNSAFE, tuple(edits), "reset `.grad` to None after the hand-written update")
        self.report(
            fact.updates[0].line,
            f"{tensors} updated from `.grad` in a loop that never zeroes it: every backward adds to the "
            "previous gradients; set `.grad = None` after the update",
            fix,
        )


def _trains(fact: _LoopFacts) -> bool:
    return bool(fact.backwards) and bool(fact.steps or fact.updates)


@dataclass
class _StepRoles:
    """Whether a `.step()` receiver is an optimizer or a grad scaler: evidence from the
    scope (`g = torch.optim.Adam(...)` is an optimizer, `opt_sched = StepLR(...)` is not),
    the name only where no evidence decides. The scope's roles are read on the first
    question (most scopes have no `.step()` in a loop)."""

    context: RuleContext
    root: cst.CSTNode

    def is_(self, name: str | None, role: Role) -> bool:
        decision = scope_roles(self.context, self.root).get(name) if name is not None else None
        if decision is not None and decision.basis is not Basis.NAME:
            return decision.role is role
        return self.context.roles.has(name, role)


def _loop_facts(
    loop: cst.For | cst.While | cst.FunctionDef, imports: ImportIndex, parents: dict[int, cst.CSTNode], roles: _StepRoles
) -> _LoopFacts:
    """Backward calls, optimizer steps and hand-written updates in the loop (not in nested defs)."""
    fact = _LoopFacts()
    for call in local_nodes(loop.body, cst.Call):
        assert type(call) is cst.Call
        if is_backward_call(call, imports):
            fact.backwards.append(call)
        elif type(call.func) is cst.Attribute and call.func.attr.value == "step":
            _classify_step(call, fact, roles)
    for line in local_nodes(loop.body, cst.SimpleStatementLine):
        assert type(line) is cst.SimpleStatementLine
        tensor = _updated_from_grad(line)
        if tensor is not None and _update_is_intended(line, imports, parents):
            fact.updates.append(_Update(line, tensor))
    return fact


def _classify_step(call: cst.Call, fact: _LoopFacts, roles: _StepRoles) -> None:
    receiver = dotted_name(call.func.value) if type(call.func) is cst.Attribute else None
    if receiver is None:
        fact.unclear = True  # `self.optimizers()[0].step()`: cannot name what to zero
        return
    if roles.is_(receiver, Role.OPTIMIZER):
        if call.args:
            fact.unclear = True  # step(closure): LBFGS-style, the closure zeroes
        else:
            fact.steps.append(_Step(call, receiver))
        return
    if roles.is_(receiver, Role.SCALER) and len(call.args) == 1 and call.args[0].keyword is None:
        optimizer = dotted_name(call.args[0].value)
        if roles.is_(optimizer, Role.OPTIMIZER):
            fact.steps.append(_Step(call, optimizer, scaler=receiver))  # type: ignore[arg-type]
        else:
            fact.unclear = True


def _updated_from_grad(line: cst.SimpleStatementLine) -> str | None:
    """`w -= lr * w.grad`, `p.data.add_(p.grad, alpha=-lr)`, `p.sub_(lr * p.grad)` -> the tensor."""
    if len(line.body) != 1:
        return None
    small = line.body[0]
    if type(small) is cst.AugAssign and type(small.operator) in (cst.SubtractAssign, cst.AddAssign):
        tensor = _strip_data(small.target)
        return tensor if tensor is not None and _reads_grad_of(small.value, tensor) else None
    if type(small) is cst.Expr and type(small.value) is cst.Call:
        call = small.value
        if type(call.func) is cst.Attribute and call.func.attr.value in {"sub_", "add_"}:
            tensor = _strip_data(call.func.value)
            if tensor is not None and any(_reads_grad_of(argument.value, tensor) for argument in call.args):
                return tensor
    return None


def _strip_data(node: cst.BaseExpression) -> str | None:
    if type(node) is cst.Attribute and node.attr.value == "data":
        node = node.value
    return dotted_name(node)


def _reads_grad_of(node: cst.CSTNode, tensor: str) -> bool:
    for attribute in all_nodes(node, cst.Attribute):
        assert type(attribute) is cst.Attribute
        if attribute.attr.value == "grad" and dotted_name(attribute.value) == tensor:
            return True
    return False


def _update_is_intended(line: cst.SimpleStatementLine, imports: ImportIndex, parents: dict[int, cst.CSTNode]) -> bool:
    """A hand-written update runs under no_grad or through `.data` (otherwise it raises anyway)."""
    if "data" in {a.attr.value for a in all_nodes(line, cst.Attribute)}:  # type: ignore[union-attr]
        return True
    return any(type(parent) is cst.With and with_disables_grad(parent, imports) for parent in ancestors(line, parents))


def _step_patched(module: cst.Module, graph: CallGraph, zeroing: list[FunctionFacts]) -> bool:
    """Is some `x.step` assigned in this file a function that zeroes gradients
    (`types.MethodType(dp_step, opt)`, a lambda), or a wrapper of another `step` the
    graph cannot read (`opt.step = wrap(opt.step)`)? A counter (`self.step = 0`) is not."""
    helpers = {function.node.name.value for function in zeroing}
    zeroing_ids = {id(function) for function in zeroing}
    for value in graph.assigned_attribute(module, "step"):
        if type(value) is cst.Lambda:
            if _zeroes(value, helpers):
                return True
        elif any(id(function) in zeroing_ids for function in graph.referenced_functions(value)):
            return True
        elif type(value) is cst.Call and any(
            type(node) is cst.Attribute and node.attr.value == "step" for node in all_nodes(value, cst.Attribute)
        ):
            return True
    return False


def _zeroes(node: cst.CSTNode, helpers: set[str], syntax: SyntaxIndex | None = None) -> bool:
    """Any zeroing or hand-written `.grad` write under `node`, nested defs included."""
    nodes = all_nodes(node, (cst.Attribute, cst.Call, cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Del), syntax)
    if any(type(n) is cst.Attribute and n.attr.value == "zero_grad" for n in nodes):
        return True
    if any(_touches_grad(target) for target in _written_targets(nodes)):
        return True
    return any(type(n) is cst.Call and _call_zeroes(n, helpers) for n in nodes)


def _call_zeroes(call: cst.Call, helpers: set[str]) -> bool:
    """`zero_grad(...)`, `clear_grads(...)`, a zeroing helper, `p.grad.zero_()`, `_foreach_zero_([p.grad])`."""
    name = dotted_name(call.func)
    if name is not None:
        last = name.rsplit(".", 1)[-1]
        tokens = set(name_tokens(last))
        if last in helpers or last == "zero_grad" or (tokens & CLEAR_TOKENS and tokens & GRAD_TOKENS):
            return True
    if type(call.func) is cst.Attribute and call.func.attr.value.endswith("_"):
        if _touches_grad(call.func.value):
            return not _keeps_values(call)  # p.grad.zero_(), p.grad.data.mul_(0), p.grad.detach_()
        return any(_touches_grad(argument.value) for argument in call.args) and not _is_parameter_update(call)
    if name is not None and name.rsplit(".", 1)[-1].endswith("_"):
        return any(_touches_grad(argument.value) for argument in call.args)
    return False


#: torch's in-place methods that clip, rescale or shift a tensor: on `.grad` they keep
#: what earlier backward passes accumulated (`param.grad.data.clamp_(-c, c)`)
_VALUE_KEEPING_METHODS = frozenset({"clamp_", "clamp_min_", "clamp_max_", "clip_", "div_", "mul_", "add_", "sub_", "nan_to_num_"})


def _keeps_values(call: cst.Call) -> bool:
    """An in-place call on `.grad` that leaves the accumulated values in place (not `mul_(0)`)."""
    method = call.func.attr.value if type(call.func) is cst.Attribute else ""
    if method not in _VALUE_KEEPING_METHODS:
        return False
    return not (method == "mul_" and any(_is_zero(argument.value) for argument in call.args))


def _is_zero(node: cst.BaseExpression) -> bool:
    return type(node) in (cst.Integer, cst.Float) and float(node.value) == 0.0


def _is_parameter_update(call: cst.Call) -> bool:
    """`p.add_(p.grad, alpha=-lr)` reads .grad; it does not write it."""
    return type(call.func) is cst.Attribute and call.func.attr.value in {"add_", "sub_", "addcdiv_", "addcmul_"} and not _touches_grad(call.func.value)


def _written_targets(nodes: list[cst.CSTNode]) -> list[cst.BaseExpression]:
    targets: list[cst.BaseExpression] = []
    for statement in nodes:
        if type(statement) is cst.Assign:
            targets.extend(t.target for t in statement.targets)
        elif type(statement) in (cst.AugAssign, cst.AnnAssign, cst.Del):
            targets.append(statement.target)
    flat: list[cst.BaseExpression] = []
    while targets:
        target = targets.pop()
        if type(target) in (cst.Tuple, cst.List):
            targets.extend(e.value for e in target.elements)
        else:
            flat.append(target)
    return flat


def _touches_grad(node: cst.CSTNode) -> bool:
    """Is there a `.grad` (or `.main_grad`) attribute in this Attribute/Subscript chain?"""
    current = node
    while type(current) in (cst.Attribute, cst.Subscript):
        if type(current) is cst.Attribute and current.attr.value in _GRAD_ATTRIBUTES:
            return True
        current = current.value
    return False


def _is_bound_in(optimizer: str, loop: cst.For | cst.While | cst.FunctionDef) -> bool:
    head = optimizer.split(".", 1)[0]
    if "." in optimizer:
        return False
    return any(binding.name == head for binding in bindings(loop.body))


def _step_insertions(
    fact: _LoopFacts, parents: dict[int, cst.CSTNode]
) -> list[tuple[cst.SimpleStatementLine, list[str]]] | None:
    """(line after which to insert, statements) for each step; None when no fix is clear."""
    sites: list[tuple[cst.SimpleStatementLine, _Step]] = []
    for step in fact.steps:
        line = statement_line(step.call, parents)
        if line is None or expression_statement_call(line) is not step.call:
            return None
        sites.append((_after_scaler_update(line, step, parents), step))
    optimizers = list(dict.fromkeys(step.optimizer for step in fact.steps))
    if len(optimizers) == 1:
        unique: dict[int, tuple[cst.SimpleStatementLine, list[str]]] = {}
        for line, step in sites:
            unique.setdefault(id(line), (line, [f"{step.optimizer}.zero_grad()"]))
        return list(unique.values())
    # several optimizers: only one backward feeding them all, steps side by side
    holders = {id(parents[id(line)]) for line, _ in sites}
    if len(fact.backwards) != 1 or len(holders) != 1:
        return None
    block = block_statements(sites[0][0], parents)
    last = max((line for line, _ in sites), key=lambda line: next(i for i, s in enumerate(block) if s is line))
    return [(last, [f"{name}.zero_grad()" for name in optimizers])]


def _after_scaler_update(
    line: cst.SimpleStatementLine, step: _Step, parents: dict[int, cst.CSTNode]
) -> cst.SimpleStatementLine:
    """With AMP, `scaler.step(opt)` is followed by `scaler.update()`: insert after that."""
    if step.scaler is None:
        return line
    block = block_statements(line, parents)
    for index, statement in enumerate(block):
        if statement is line and index + 1 < len(block):
            following = block[index + 1]
            if type(following) is cst.SimpleStatementLine:
                call = expression_statement_call(following)
                if (
                    call is not None
                    and type(call.func) is cst.Attribute
                    and call.func.attr.value == "update"
                    and dotted_name(call.func.value) == step.scaler
                ):
                    return following
    return line


def _first_statement(loop: cst.CSTNode) -> cst.BaseStatement | None:
    """The first statement of a loop's indented body (None: a function, or a one-line
    body, where a statement cannot go before it)."""
    if type(loop) in (cst.For, cst.While) and type(loop.body) is cst.IndentedBlock and loop.body.body:
        return loop.body.body[0]
    return None


def _prepender(statements: list[str]):
    """An edit that keeps the statement and puts `statements` before it in its block
    (the statement's leading comments stay with it)."""
    parsed = [cst.parse_statement(f"{statement}\n") for statement in statements]

    def replace(updated: cst.CSTNode) -> cst.FlattenSentinel:
        return cst.FlattenSentinel([*parsed, updated])

    return replace


def _inserter(statements: list[str]):
    """An edit that keeps the line and appends `statements` after it in the same block."""
    parsed = [cst.parse_statement(f"{statement}\n") for statement in statements]

    def replace(updated: cst.CSTNode) -> cst.FlattenSentinel:
        return cst.FlattenSentinel([updated, *parsed])

    return replace
