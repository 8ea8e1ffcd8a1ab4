"""AGF008 graph-break: losses re-wrapped into fresh leaves, copies and numpy round trips."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from autograd_fix.codemods.semantic.dataflow import assigned_names, read_names
from autograd_fix.codemods.expressions import method_chain, parenthesized
from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.names import name_tokens
from autograd_fix.codemods.walk import children_of
from autograd_fix.codemods.rule import Contract, Rule
from autograd_fix.codemods.semantic.roles import GRAPH_CALLEE_TOKENS
from autograd_fix.codemods.semantic.model import SemanticModel
from autograd_fix.codemods.semantic.graph_breaks import (
    BREAKING_LINKS,
    COPY_CALLS,
    CallFinder,
    Rewrap,
    has_break,
    numpy_roots,
    parse_rewrap,
    sequence_rewrap,
    sink_of_expression,
    statement_sink,
)

#: chains whose value is exactly the tensor's (a fix may use the tensor itself)
_FIXABLE_CHAINS = frozenset(
    {("item",), ("data",), ("detach",), ("clone", "detach"), ("detach", "clone"), ("data", "clone"), ("data", "detach"), ()}
)


@dataclass
class _Line:
    """A simple statement of one scope, where it sits, and what is known there."""

    node: cst.SimpleStatementLine
    block: list[cst.BaseStatement]
    index: int
    tracking: SemanticModel

    @property
    def grad_disabled(self) -> bool:
        position = self.tracking.tracking.position(self.node)
        return position.grad_disabled if position is not None else True


@dataclass
class _Scope:
    node: cst.Module | cst.FunctionDef
    lines: list[_Line] = field(default_factory=list)


class GraphBreak(Rule):
    """
    ## What it does
    Finds losses whose gradient path is cut before `backward()`: a loss re-wrapped into a
    fresh leaf (`torch.tensor(loss.item(), requires_grad=True)`,
    `Variable(loss.data, requires_grad=True)`, `loss.detach().requires_grad_()`) and then
    backpropagated, a list (or comprehension) of graph-carrying losses copied into one
    (`torch.tensor([criterion(o, y) for o in outs], requires_grad=True)`), a tracked tensor
    copied with `torch.tensor(t)`, and numpy round trips
    (`torch.from_numpy(out.detach().cpu().numpy())`) inside a loss computation. Where the
    re-wrapped value is the loss tensor itself, the fix uses that tensor.

    ## Why is this bad?
    `.item()`, `.data`, `.detach()`, `.numpy()` and `torch.tensor(t)` return values with
    no history. Re-wrapping one with `requires_grad=True` makes a brand-new leaf: its
    `backward()` runs without any error and stops right there, so every parameter's
    `.grad` stays `None` and the optimizer never changes the model. The usual story: the
    loss "does not require grad" after a break upstream, and `requires_grad=True` silences
    the error instead of fixing it.

    ## Example
    ```python
    loss = criterion(model(x), y)
    loss = torch.tensor(loss.item(), requires_grad=True)
    loss.backward()
    ```

    ## Use instead
    ```python
    loss = criterion(model(x), y)
    loss.backward()
    ```

    ## Fix safety
    Unsafe: the fix makes gradients reach the parameters, so training changes (that is
    its purpose). It applies only when the re-wrapped value is backpropagated directly
    (`loss.backward()`, `scaler.scale(loss).backward()`, `manual_backward(loss)`, the
    `training_step` return) and never used for its own `.grad`, when the wrapped value is
    exactly the loss tensor (`loss.item()`, `loss.data`, `loss.detach()`, with or without
    `.clone()`), when no `dtype=` conversion is asked for, and when nothing in view cuts
    the loss's own history: its definition in the same scope contains no
    `.item()`/`.detach()`/`.data`/`.numpy()`/`torch.tensor(...)`, and neither it nor the
    re-wrap runs under `no_grad`. `x = x.detach().requires_grad_()` on an input (PGD
    attacks, saliency) is not a loss and is never reported. Report-only:
    `torch.tensor(t)` of a tracked tensor in a loss (`t.detach().clone()` keeps the copy
    semantics but is still a break: a person decides whether gradient should flow),
    numpy round trips (the numpy code must be ported to torch), sums of `.item()`s, and
    re-wraps whose loss definition is not in view. A list of losses becomes
    `torch.stack([...])` (unsafe too: elements of different shapes, which `torch.tensor`
    flattened from one-element tensors, make `stack` raise, and the run rejects it); with
    `dtype=` or `device=` it is reported only.

    ## Verification
    The rewritten run's parameter gradients (None in the original) must match finite
    differences of the loss. An original that raised because its loss was cut off the
    graph (`element 0 of tensors does not require grad`) must run clean once rewritten; a
    rewrite that still cuts the graph raises the same error, or its gradients miss the
    finite differences, and is rejected. Outputs are not compared: once gradients flow the
    optimizer changes the model, so every value after the first step differs by design.
    """

    code = "AGF008"
    name = "graph-break"
    safety = Applicability.UNSAFE
    message = "the loss's gradient path is cut before backward()"
    contract = Contract(
        description="the original's autograd error (a loss cut off its graph: `element 0 of tensors does not "
        "require grad`), if it raised one, is gone; the rewritten run's parameter gradients (None in the original) "
        "match finite differences of the first loss in float64, along a random direction (the original's mismatch "
        "is shown); outputs are not compared, since training now changes the model by design",
        checks=("original_error_gone", "gradients_match_finite_differences", "graph_state_may_change"),
    )

    def visit_Module(self, node: cst.Module) -> bool:
        analysis = self.context.semantic  # its tracking is built on first use (most files never need it)
        for scope in _collect_scopes(node, analysis):
            _ScopeCheck(self, scope, analysis).run()
        return False


# --- scopes and lines ------------------------------------------------------------------


def _collect_scopes(module: cst.Module, analysis: SemanticModel) -> list[_Scope]:
    scopes: list[_Scope] = []
    _walk_scope(_Scope(module), module.body, scopes, analysis)
    return scopes


def _walk_scope(scope: _Scope, body, scopes: list[_Scope], analysis: SemanticModel) -> None:  # type: ignore[no-untyped-def]
    scopes.append(scope)
    _walk_block(scope, body, scopes, analysis)


def _walk_block(scope: _Scope, statements, scopes: list[_Scope], analysis: SemanticModel) -> None:  # type: ignore[no-untyped-def]
    for index, statement in enumerate(statements):
        if type(statement) is cst.SimpleStatementLine:
            scope.lines.append(_Line(statement, statements, index, analysis))
        elif type(statement) is cst.FunctionDef:
            if type(statement.body) is cst.IndentedBlock:
                _walk_scope(_Scope(statement), statement.body.body, scopes, analysis)
        elif type(statement) is cst.ClassDef:
            if type(statement.body) is cst.IndentedBlock:
                for item in statement.body.body:
                    if type(item) is cst.FunctionDef and type(item.body) is cst.IndentedBlock:
                        _walk_scope(_Scope(item), item.body.body, scopes, analysis)
        else:
            for block in _child_blocks(statement):
                _walk_block(scope, block, scopes, analysis)


def _child_blocks(statement: cst.CSTNode) -> list:  # type: ignore[type-arg]
    blocks = []
    for child in children_of(statement):  # not libcst's `.children`: that rebuilds the subtree
        if type(child) is cst.IndentedBlock:
            blocks.append(child.body)
        elif type(child) in (cst.Else, cst.Finally, cst.ExceptHandler, cst.ExceptStarHandler):
            blocks.extend(_child_blocks(child))
        elif type(child) is cst.If:
            blocks.extend(_child_blocks(child))
    return blocks


# --- the per-scope check ---------------------------------------------------------------


class _ScopeCheck:
    def __init__(self, rule: GraphBreak, scope: _Scope, analysis: SemanticModel) -> None:
        self.rule = rule
        self.scope = scope
        self.analysis = analysis
        self.imports = rule.context.imports
        self.walk = rule.context.semantic.syntax.walk  # the file's index: no re-traversal per line
        self.training_step = type(scope.node) is cst.FunctionDef and scope.node.name.value == "training_step"

    def run(self) -> None:
        sinks = self._sink_names()
        if not sinks and not self._any_direct_sink():
            return
        grad_read = self._grad_read_names()
        slice_names = self._backward_slice(sinks)
        for position, line in enumerate(self.scope.lines):
            finder = CallFinder()
            self.walk(line.node, finder)
            reported: set[int] = set()
            in_loss = self._in_loss(line, slice_names)
            for call in finder.calls:
                elements = sequence_rewrap(call, self.imports)
                if elements is not None:
                    reported.add(id(call))
                    if in_loss:
                        self._check_sequence_rewrap(call, elements, line)
                    continue
                rewrap = parse_rewrap(call, self.imports)
                if rewrap is not None:
                    reported.add(id(call))
                    self._check_rewrap(call, rewrap, line, position, grad_read)
            if not in_loss:
                continue
            for call in finder.calls:
                if id(call) in reported or not self._is_copy_call(call):
                    continue
                self._check_copy(call, line, position)

    # -- re-wrapped losses ---------------------------------------------------------------

    def _check_rewrap(self, call: cst.Call, rewrap: "Rewrap", line: _Line, position: int, grad_read: set[str]) -> None:
        use = self._loss_use(call, line, position)
        if use is None:
            return
        target_name, direct = use
        if target_name is not None and target_name in grad_read:
            return
        message = (
            f"`{_code(call)}` makes a new leaf from the loss's value: backward() stops there and every "
            "parameter's .grad stays None"
        )
        tensor = rewrap.tensor
        fixable = (
            rewrap.links in _FIXABLE_CHAINS
            and not rewrap.converts
            and not line.grad_disabled
            and not has_break(tensor, self.imports)
            and self._history_in_view(tensor, position)
        )
        if not fixable:
            self.rule.report(call, message + "; backpropagate the loss tensor itself")
            return
        assert tensor is not None
        removal = self._removal_edits(line, target_name, tensor) if not direct else None
        if removal is not None:
            edits = removal
        else:
            edits = (Edit(call, lambda updated, t=tensor, d=direct: _replace_call(updated, t, d)),)
        fix = Fix(
            applicability=Applicability.UNSAFE,
            edits=edits,
            description=f"backpropagate `{_code(tensor)}` itself",
        )
        self.rule.report(call, message + f"; use `{_code(tensor)}` itself", fix)

    def _check_sequence_rewrap(self, call: cst.Call, elements: list[cst.BaseExpression], line: _Line) -> None:
        """`torch.tensor([criterion(out, y) for out in outputs], requires_grad=True)` on a line
        that feeds a backward: every element carries a graph (tracking's evidence), and
        `torch.tensor` copies their values into a fresh leaf, so the terms' gradients never
        reach the model. `torch.stack` keeps them (as the hand fix's `sum([...])` does)."""
        if line.grad_disabled or not all(self.analysis.tracking.tracked(e, line.node) is not None for e in elements):
            return
        message = (
            f"`{_code(call)}` copies graph-carrying losses into a fresh leaf: backward() stops there and "
            "every parameter's .grad stays None"
        )
        if any(a.keyword is not None and a.keyword.value != "requires_grad" for a in call.args[1:]):
            self.rule.report(call, message + "; stack the tensors themselves (`torch.stack`)")
            return
        stack, needs = self.imports.expression_for("torch.stack")

        def replace(updated: cst.CSTNode) -> cst.CSTNode:
            assert type(updated) is cst.Call
            return updated.with_changes(func=stack, args=[updated.args[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)])

        fix = Fix(
            applicability=Applicability.UNSAFE,
            edits=(Edit(call, replace),),
            description="stack the loss tensors with torch.stack (their gradients flow)",
            required_imports=needs,
        )
        self.rule.report(call, message + "; use `torch.stack(...)`", fix)

    def _loss_use(self, call: cst.Call, line: _Line, position: int) -> tuple[str | None, bool] | None:
        """(name the rewrap is bound to, used directly) when the rewrap is backpropagated."""
        for small in line.node.body:
            if type(small) is cst.Expr and sink_of_expression(small.value, self.imports) is call:
                return None, True
            if type(small) is cst.Return and small.value is call and self.training_step:
                return None, True
            if type(small) is cst.Assign and small.value is call and len(small.targets) == 1:
                target = small.targets[0].target
                if type(target) is cst.Name and self._backpropagated_later(target.value, position):
                    return target.value, False
        return None

    def _backpropagated_later(self, name: str, position: int) -> bool:
        for line in self.scope.lines[position + 1:]:
            for small in line.node.body:
                sink = statement_sink(small, self.imports, self.training_step)
                if type(sink) is cst.Name and sink.value == name:
                    return True
            if name in assigned_names(line.node):
                return False
        return False

    def _history_in_view(self, tensor: cst.BaseExpression | None, position: int) -> bool:
        """The loss's own definition is in this scope, unbroken and with grad on."""
        if tensor is None:
            return False
        if type(tensor) is not cst.Name:
            return True  # an expression in place (checked by `has_break`)
        for line in reversed(self.scope.lines[:position]):
            for small in line.node.body:
                value = _assigned_value(small, tensor.value)
                if value is not None:
                    return not line.grad_disabled and not has_break(value, self.imports)
            if tensor.value in assigned_names(line.node):
                return False  # bound some other way (unpacking, a for target): not in view
        return False

    def _removal_edits(self, line: _Line, target: str | None, tensor: cst.BaseExpression) -> tuple[Edit, ...] | None:
        """`loss = torch.tensor(loss.item(), ...)` -> drop the line (comments move down)."""
        if target is None or not (type(tensor) is cst.Name and tensor.value == target):
            return None
        if len(line.node.body) != 1 or line.index + 1 >= len(line.block):
            return None
        following = line.block[line.index + 1]
        comments = list(line.node.leading_lines)
        trailing = line.node.trailing_whitespace.comment
        if trailing is not None:
            comments.append(cst.EmptyLine(comment=trailing))
        edits = [Edit(line.node, lambda updated: cst.RemovalSentinel.REMOVE)]
        if comments:
            edits.append(Edit(following, lambda updated, moved=tuple(comments): _with_leading(updated, moved)))
        return tuple(edits)

    # -- copies and numpy round trips in a loss ------------------------------------------

    def _is_copy_call(self, call: cst.Call) -> bool:
        return self.imports.qualified_name(call.func) in COPY_CALLS and bool(call.args)

    def _check_copy(self, call: cst.Call, line: _Line, position: int) -> None:
        if line.grad_disabled:
            return
        argument = call.args[0].value
        roots = numpy_roots(argument)
        numpy = bool(roots)
        root, links = roots[0] if numpy else method_chain(argument)
        names = [name for name, _ in links]
        if self.imports.qualified_name(call.func) == "torch.from_numpy" and not numpy:
            return
        if any(a.keyword is not None and a.keyword.value == "requires_grad" for a in call.args):
            return
        if not self._graph_value(root, line, position):
            return
        if numpy:
            message = (
                f"`{_code(call)}` goes through numpy inside a loss: no gradient flows back into "
                f"`{_code(root)}`; compute this part with torch ops (or `.detach()` it if the stop-gradient is "
                "intended)"
            )
        elif not names or names[-1] not in BREAKING_LINKS:
            message = (
                f"`{_code(call)}` copies a tracked tensor without its history inside a loss: no gradient flows "
                f"back into `{_code(root)}`; use the tensor itself (or `.detach().clone()` if a stop-gradient "
                "copy is intended)"
            )
        else:
            return  # an explicit detach/item before the copy: the author chose the stop-gradient
        self.rule.report(call, message)

    def _graph_value(self, root: cst.BaseExpression, line: _Line, position: int) -> bool:
        """Is `root` a tracked tensor (tracking analysis) or a model/criterion output in view?"""
        if self.analysis.tracking.tracked(root, line.node) is not None:
            return True
        if type(root) is not cst.Name:
            return False
        for earlier in reversed(self.scope.lines[:position]):
            for small in earlier.node.body:
                value = _assigned_value(small, root.value)
                if value is not None:
                    return not earlier.grad_disabled and _is_graph_call(value, self.imports)
            if root.value in assigned_names(earlier.node):
                return False
        return False

    def _in_loss(self, line: _Line, slice_names: set[str]) -> bool:
        for small in line.node.body:
            if statement_sink(small, self.imports, self.training_step) is not None:
                return True
            if type(small) in (cst.Assign, cst.AugAssign, cst.AnnAssign) and assigned_names(small) & slice_names:
                return True
        return False

    # -- scope facts ---------------------------------------------------------------------

    def _sink_names(self) -> set[str]:
        names: set[str] = set()
        for line in self.scope.lines:
            for small in line.node.body:
                sink = statement_sink(small, self.imports, self.training_step)
                if sink is not None:
                    names |= read_names(sink) if type(sink) is not cst.Name else {sink.value}
        return names

    def _any_direct_sink(self) -> bool:
        return any(
            statement_sink(small, self.imports, self.training_step) is not None
            for line in self.scope.lines
            for small in line.node.body
        )

    def _backward_slice(self, sinks: set[str]) -> set[str]:
        """Names whose values flow into a backpropagated value (order-insensitive closure)."""
        result = set(sinks)
        flows = [  # (names an assignment binds, names its value reads), read once
            (assigned_names(small), read_names(small.value) if small.value is not None else set())
            for line in self.scope.lines
            for small in line.node.body
            if type(small) in (cst.Assign, cst.AugAssign, cst.AnnAssign)
        ]
        changed = True
        while changed:
            changed = False
            for bound, reads in flows:
                if bound & result and reads - result:
                    result |= reads
                    changed = True
        return result

    def _grad_read_names(self) -> set[str]:
        finder = _GradReadFinder()
        for line in self.scope.lines:
            self.walk(line.node, finder)
        return finder.names


# --- small helpers ---------------------------------------------------------------------


def _code(node: cst.CSTNode) -> str:
    text = cst.Module(body=[]).code_for_node(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _assigned_value(small: cst.BaseSmallStatement, name: str) -> cst.BaseExpression | None:
    if type(small) is cst.Assign and any(
        type(t.target) is cst.Name and t.target.value == name for t in small.targets
    ):
        return small.value
    if type(small) is cst.AnnAssign and type(small.target) is cst.Name and small.target.value == name:
        return small.value
    if type(small) is cst.AugAssign and type(small.target) is cst.Name and small.target.value == name:
        return small.value
    return None


def _is_graph_call(value: cst.BaseExpression, imports: ImportIndex) -> bool:
    """`model(x)`, `self.net(x)`, `criterion(out, y)`: an in-file callable, not an API."""
    if type(value) is not cst.Call:
        return False
    if imports.qualified_name(value.func) is not None:
        return False
    callee = dotted_name(value.func)
    if callee is None:
        return False
    tokens = set(name_tokens(callee.rsplit(".", 1)[-1]))
    return bool(tokens & GRAPH_CALLEE_TOKENS)


class _GradReadFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "grad" and type(node.value) is cst.Name:
            self.names.add(node.value.value)


def _replace_call(updated: cst.CSTNode, tensor: cst.BaseExpression, direct: bool) -> cst.CSTNode:
    """The re-wrap call becomes the tensor (left alone if another fix already rewrote it)."""
    if type(updated) is not cst.Call:
        return updated
    func = updated.func
    name = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""
    if name not in {"tensor", "Variable", "requires_grad_"}:
        return updated
    return parenthesized(tensor) if direct else tensor


def _with_leading(updated: cst.CSTNode, moved: tuple[cst.EmptyLine, ...]) -> cst.CSTNode:
    if not hasattr(updated, "leading_lines"):
        return updated
    return updated.with_changes(leading_lines=[*moved, *updated.leading_lines])  # type: ignore[attr-defined]
