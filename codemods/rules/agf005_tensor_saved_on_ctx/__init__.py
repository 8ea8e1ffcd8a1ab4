"""AGF005 tensor-saved-on-ctx: tensors kept as ctx attributes instead of `save_for_backward`."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from autograd_fix.codemods.semantic.autograd_function import (
    CustomFunction,
    SavedTensorsReads,
    TensorFacts,
    all_nodes,
    ctx_attribute,
    ctx_holder_facts,
    custom_function,
    is_docstring,
    iter_names,
    one_element_target,
    rebound_names,
    save_for_backward_calls,
    saved_tensors_reads,
    statement_of_call,
    top_level_body,
    tuple_with,
    with_args,
)
from autograd_fix.codemods.rules.agf005_tensor_saved_on_ctx.ctx_attributes import (
    assign_target_value,
    assigned_pairs,
    backward_aliases,
    ctx_method_called,
    ctx_reads,
    ctx_write_counts,
    ctx_writes,
    kept_output,
    own_returns_in,
)
from autograd_fix.codemods.semantic.accumulation import code_of
from autograd_fix.codemods.rules.agf005_tensor_saved_on_ctx.module_io import module_call_tensors
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.rule import Contract, Rule


class TensorSavedOnCtx(Rule):
    """
    ## What it does
    Finds tensors (inputs, outputs, intermediates) that the `forward` (or
    `setup_context`) of a custom `torch.autograd.Function` stores as `ctx` attributes
    and `backward` reads back, and saves them with one `ctx.save_for_backward(...)`
    instead (merged with an existing call), unpacking them from `ctx.saved_tensors` at
    the top of `backward`. Values that are not certainly tensors stay attributes.

    ## Why is this bad?
    Tensors saved with `save_for_backward` carry a version check: an in-place change
    between forward and backward raises instead of producing silently wrong gradients.
    A tensor kept on `ctx` gets no check, and storing the output on its own ctx creates a
    reference cycle (output -> grad_fn -> ctx -> output) that only the cyclic garbage
    collector frees, so activations outlive the step.

    ## Example
    ```python
    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out = x.exp()
            ctx.out = out
            return out

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * ctx.out
    ```

    ## Use instead
    ```python
        @staticmethod
        def forward(ctx, x):
            out = x.exp()
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, grad_output):
            (out,) = ctx.saved_tensors
            return grad_output * out
    ```

    ## Fix safety
    Safe. The rule moves a value only when it is certainly a tensor (a torch op's result,
    a tensor method's result, a parameter used with torch-only methods or annotated
    `Tensor`), is stored once at the top level of `forward`, and `backward` reads but
    never writes it. The call goes where every saved value exists and before the
    `return`; the values saved are the ones the attributes held. The only run-time
    difference in code that worked is the version check: an in-place change of a saved
    tensor before backward now raises instead of silently giving wrong gradients. The
    fix is withheld (report only) when `backward` reads `ctx.saved_tensors` in a shape the
    rule cannot extend exactly, when a name would clash, or when `forward` returns early.

    Tensors kept inside a tuple or list on one attribute (`ctx.cache = out, src, index`,
    unpacked in backward) are reported without a fix: which elements are tensors, and
    how backward takes the container apart, is for a person to restate.

    Forward's own output kept on ctx that `backward` also deletes or rebinds (RevTorch's
    `del ctx.y`, freeing it early) cannot move into `save_for_backward`: the fix stores
    `output.detach()` instead, the same values without the cycle, and backward gets a
    tensor that does not require grad. Unsafe: a double backward that differentiated
    through the kept output no longer does.

    ## Verification
    The fixed Function passes `torch.autograd.gradcheck` in float64, gradients equal
    the original's, and its ctx is freed without the cyclic garbage collector.
    """

    code = "AGF005"
    name = "tensor-saved-on-ctx"
    safety = Applicability.SAFE
    message = "tensor stored as a ctx attribute instead of ctx.save_for_backward"
    contract = Contract(
        description="the Function passes torch.autograd.gradcheck in float64, gradients equal the original's, and "
        "its ctx objects are freed without the cyclic garbage collector",
        checks=("gradcheck_passes", "ctx_freed_without_gc", "grads_equal"),
    )

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        imports = self.context.imports
        function = custom_function(node, imports)
        if function is None or function.forward is None:
            return
        modules = module_call_tensors(function.forward, self.context.module, imports, self.context.semantic.module_classes)
        facts = ctx_holder_facts(function, imports, modules.calls, modules.inputs)
        if facts is not None:
            _Planner(self, function, facts).run()


@dataclass
class _Store:
    """`ctx.<attribute> = <value>` at the top level of the holder."""

    attribute: str
    position: int
    line: cst.SimpleStatementLine
    value: cst.BaseExpression
    #: name the value gets in forward: the stored Name, or a new local (`ctx.probs = ...` -> `probs`)
    forward_name: str = ""
    #: whether the line becomes `<forward_name> = <value>` (the value is not a plain name)
    becomes_local: bool = False
    backward_name: str = ""
    #: part of a tuple assignment `ctx.a, ctx.b = a, b` (the line holds several stores)
    in_tuple: bool = False
    #: backward's top-level `name = ctx.<attribute>` line, removed once the unpack binds `name`
    alias_line: cst.SimpleStatementLine | None = None


@dataclass
class _Planner:
    rule: TensorSavedOnCtx
    function: CustomFunction
    facts: TensorFacts
    problems: list[str] = field(default_factory=list)
    #: forward's output stored on ctx where backward also deletes or rebinds it
    kept_outputs: list[_Store] = field(default_factory=list)
    #: a tuple or list holding tensors stored on ctx (`ctx.cache = out, src, index`)
    packed: list[_Store] = field(default_factory=list)

    def run(self) -> None:
        holder = self.function.ctx_function()
        ctx = self.function.forward_ctx()
        backward = self.function.backward
        backward_ctx = self.function.backward_ctx()
        if holder is None or ctx is None or backward is None or backward_ctx is None:
            return
        stores = self._candidate_stores(holder, ctx, backward, backward_ctx)
        for store in self.kept_outputs:
            self._report_kept_output(store, ctx)
        for store in self.packed:
            self._report_packed(store, ctx)
        if not stores:
            return
        fix = self._plan(holder, ctx, backward, backward_ctx, stores)
        listed = ", ".join(f"`{ctx}.{s.attribute}`" for s in stores)
        message = (
            f"`{self.function.name}` keeps tensor{'s' if len(stores) > 1 else ''} {listed} on ctx for backward: "
            "no in-place version check, and an output kept there is a reference cycle only the garbage "
            "collector frees; use `ctx.save_for_backward`"
        )
        self.rule.report(stores[0].line, message, fix)
        # every other storing line is reported too (one fix, carried by the first finding)
        for line in {id(s.line): s.line for s in stores[1:] if s.line is not stores[0].line}.values():
            kept = [f"`{ctx}.{s.attribute}`" for s in stores if s.line is line]
            self.rule.report(
                line,
                f"`{self.function.name}` keeps tensor{'s' if len(kept) > 1 else ''} {', '.join(kept)} on ctx for "
                "backward too (fixed with the first)",
            )

    # -- what is stored ------------------------------------------------------------------

    def _candidate_stores(
        self, holder: cst.FunctionDef, ctx: str, backward: cst.FunctionDef, backward_ctx: str
    ) -> list[_Store]:
        read_in_backward = ctx_reads(backward, backward_ctx)
        other_methods = self._other_method_attributes(holder, backward)
        written_elsewhere = ctx_writes(backward, backward_ctx) | other_methods
        all_writes = ctx_write_counts(holder, ctx)
        stores = []
        for position, statement in enumerate(top_level_body(holder)):
            if not (type(statement) is cst.SimpleStatementLine and len(statement.body) == 1):
                continue
            assign = statement.body[0]
            if not (type(assign) is cst.Assign and len(assign.targets) == 1):
                continue
            pairs = assigned_pairs(assign.targets[0].target, assign.value)
            packed = self._packed_store(pairs, position, statement, ctx, read_in_backward, written_elsewhere, all_writes)
            if packed is not None:
                self.packed.append(packed)
                continue
            for target, value in pairs:
                attribute = ctx_attribute(target, ctx)
                if (
                    attribute is None
                    or attribute not in read_in_backward
                    or all_writes.get(attribute, 0) != 1
                    or not self.facts.is_tensor(value)
                ):
                    continue
                if attribute in written_elsewhere:
                    if attribute not in other_methods and len(pairs) == 1 and kept_output(holder, position, value):
                        self.kept_outputs.append(_Store(attribute, position, statement, value))
                    continue
                stores.append(_Store(attribute, position, statement, value, in_tuple=len(pairs) > 1))
        return stores

    def _packed_store(
        self,
        pairs: list[tuple[cst.BaseExpression, cst.BaseExpression]],
        position: int,
        line: cst.SimpleStatementLine,
        ctx: str,
        read_in_backward: set[str],
        written_elsewhere: set[str],
        all_writes: dict[str, int],
    ) -> _Store | None:
        """`ctx.cache = out, src, index` (or a list): one attribute holding a container with
        at least one certain tensor, stored once and only read by backward. The tensors in
        it escape `save_for_backward` just as a bare tensor attribute does."""
        if len(pairs) != 1:
            return None
        target, value = pairs[0]
        attribute = ctx_attribute(target, ctx)
        if (
            attribute is None
            or type(value) not in (cst.Tuple, cst.List)
            or attribute not in read_in_backward
            or attribute in written_elsewhere
            or all_writes.get(attribute, 0) != 1
        ):
            return None
        elements = [e.value for e in value.elements if type(e) is not cst.StarredElement]
        if not any(self.facts.is_tensor(e) for e in elements):
            return None
        return _Store(attribute, position, line, value)

    def _report_packed(self, store: _Store, ctx: str) -> None:
        assert type(store.value) in (cst.Tuple, cst.List)
        tensors = [code_of(e.value) for e in store.value.elements if self.facts.is_tensor(e.value)]
        listed = ", ".join(f"`{name}`" for name in tensors)
        self.rule.report(
            store.line,
            f"`{self.function.name}` keeps tensor{'s' if len(tensors) > 1 else ''} {listed} on ctx inside "
            f"`{ctx}.{store.attribute}` for backward: no in-place version check, and an output kept there is a "
            "reference cycle only the garbage collector frees; save them with `ctx.save_for_backward` and unpack "
            "them from `ctx.saved_tensors`",
        )

    def _report_kept_output(self, store: _Store, ctx: str) -> None:
        label = code_of(store.value)
        fix = Fix(
            applicability=Applicability.UNSAFE,
            edits=(Edit(store.value, _detached),),
            description=f"keep `{label}.detach()` on ctx",
        )
        self.rule.report(
            store.line,
            f"`{self.function.name}` keeps its own output `{label}` on `{ctx}.{store.attribute}`, which backward also "
            "deletes or rebinds: a reference cycle (output -> grad_fn -> ctx -> output) only the garbage collector "
            f"frees, and backward gets a tensor that requires grad; keep `{label}.detach()`",
            fix,
        )

    def _other_method_attributes(self, holder: cst.FunctionDef, backward: cst.FunctionDef) -> set[str]:
        """Attributes touched by other methods of the class (jvp, vmap...): leave those alone."""
        names: set[str] = set()
        for statement in self.function.node.body.body:
            if type(statement) is cst.FunctionDef and statement not in (holder, backward, self.function.forward):
                names |= {node.attr.value for node in all_nodes(statement, cst.Attribute)}
        return names

    # -- the fix -------------------------------------------------------------------------

    def _plan(
        self,
        holder: cst.FunctionDef,
        ctx: str,
        backward: cst.FunctionDef,
        backward_ctx: str,
        stores: list[_Store],
    ) -> Fix | None:
        if ctx_method_called(holder, ctx, "mark_dirty"):
            return None
        for store in stores:
            if store.in_tuple and not (
                type(store.value) is cst.Name
                and sum(1 for s in stores if s.line is store.line) == len(assigned_pairs(*assign_target_value(store.line)))
            ):
                return None  # a partly moved tuple assignment would need rewriting, not removal
        body = top_level_body(holder)
        existing_calls = save_for_backward_calls(holder, ctx)
        existing: tuple[int, cst.SimpleStatementLine, cst.Call] | None = None
        if len(existing_calls) > 1:
            return None
        if existing_calls:
            located = statement_of_call(holder, existing_calls[0])
            if located is None or any(
                a.star or a.keyword is not None or self.facts.is_non_tensor(a.value) for a in existing_calls[0].args
            ):
                return None  # a non-tensor in the call is AGF007's to fix first
            existing = (located[0], located[1], existing_calls[0])
        last = max([s.position for s in stores] + ([existing[0]] if existing else []))
        if any(own_returns_in(statement) for statement in body[: last + 1]):
            return None
        if not self._name_stores(holder, ctx, backward, stores, body, last):
            return None
        if existing is not None and rebound_names(body[existing[0] + 1 : last + 1]) & _read_names(existing[2]):
            return None
        reads = saved_tensors_reads(backward, backward_ctx)
        existing_count = len(existing[2].args) if existing else 0
        if not reads.understood or not self._backward_fits(backward, backward_ctx, reads, existing_count, stores):
            return None
        return self._fix(holder, ctx, backward, backward_ctx, stores, existing, last, reads)

    def _name_stores(
        self,
        holder: cst.FunctionDef,
        ctx: str,
        backward: cst.FunctionDef,
        stores: list[_Store],
        body: list[cst.BaseStatement],
        last: int,
    ) -> bool:
        holder_names = set(iter_names(holder))
        backward_names = set(iter_names(backward))
        holder_reads = ctx_reads(holder, ctx)
        aliases = backward_aliases(backward, self.function.backward_ctx() or "ctx", {s.attribute for s in stores})
        for store in stores:
            if type(store.value) is cst.Name:
                store.forward_name = store.value.value
                if store.attribute in holder_reads:
                    return False  # forward reads ctx.<attr> too: keep it simple
                if store.forward_name in rebound_names(body[store.position + 1 : last + 1]):
                    return False
            else:
                store.forward_name = store.attribute
                store.becomes_local = True
                if store.attribute in holder_names:
                    return False
                if rebound_names(body[store.position + 1 : last + 1]) & _read_names(store.value):
                    return False
            if store.attribute in aliases:
                store.backward_name, store.alias_line = aliases[store.attribute]
                continue
            store.backward_name = store.attribute
            if store.backward_name in backward_names:
                return False
        return True

    def _backward_fits(
        self, backward: cst.FunctionDef, ctx: str, reads: SavedTensorsReads, existing_count: int, stores: list[_Store]
    ) -> bool:
        attributes = {s.attribute for s in stores}
        body = top_level_body(backward)
        alias_positions = [i for i, statement in enumerate(body) if any(statement is s.alias_line for s in stores)]
        if alias_positions and min(alias_positions) <= reads.position:
            return False  # the unpack would bind the alias after its old line
        if reads.target is not None:
            if len(reads.target.elements) != existing_count:
                return False
            body = top_level_body(backward)
            return not any(ctx_reads(statement, ctx) & attributes for statement in body[: reads.position + 1])
        return existing_count == 0 and not reads.subscripts

    def _fix(
        self,
        holder: cst.FunctionDef,
        ctx: str,
        backward: cst.FunctionDef,
        backward_ctx: str,
        stores: list[_Store],
        existing: tuple[int, cst.SimpleStatementLine, cst.Call] | None,
        last: int,
        reads: SavedTensorsReads,
    ) -> Fix:
        body = top_level_body(holder)
        new_args = [cst.Name(s.forward_name) for s in stores]
        moved_comments: list[cst.EmptyLine] = []
        edits: list[Edit] = []
        removed: set[int] = set()
        for store in stores:
            if store.position == last or id(store.line) in removed:
                continue
            if store.becomes_local:
                edits.append(Edit(store.line, lambda updated, s=store: _as_local(updated, s.forward_name)))
            else:
                removed.add(id(store.line))
                moved_comments += _comments_of(store.line)
                edits.append(Edit(store.line, lambda updated: cst.RemovalSentinel.REMOVE))
        if existing is not None and existing[0] != last:
            moved_comments += _comments_of(existing[1])
            edits.append(Edit(existing[1], lambda updated: cst.RemovalSentinel.REMOVE))
        existing_args = [a.value for a in existing[2].args] if existing else []
        at_last = body[last]
        last_store = next((s for s in stores if s.position == last), None)
        save_expr = cst.Attribute(cst.Name(ctx), cst.Name("save_for_backward"))

        def replace_last(updated: cst.CSTNode) -> cst.CSTNode:
            assert type(updated) is cst.SimpleStatementLine
            if last_store is None:  # the existing call is last: append the new arguments
                expr = updated.body[0]
                assert type(expr) is cst.Expr and type(expr.value) is cst.Call
                call = with_args(expr.value, new_args)
                return updated.with_changes(
                    leading_lines=[*updated.leading_lines, *moved_comments], body=[expr.with_changes(value=call)]
                )
            call = cst.Call(save_expr, args=[])
            call = with_args(call, [*existing_args, *new_args])
            save_line = cst.SimpleStatementLine([cst.Expr(call)])
            if last_store.becomes_local:
                local = _as_local(updated, last_store.forward_name)
                return cst.FlattenSentinel([local, save_line.with_changes(leading_lines=moved_comments)])
            return save_line.with_changes(
                leading_lines=[*updated.leading_lines, *moved_comments], trailing_whitespace=updated.trailing_whitespace
            )

        edits.append(Edit(at_last, replace_last))
        edits += _forward_read_edits(holder, ctx, [s for s in stores if s.becomes_local])
        edits += self._backward_edits(backward, backward_ctx, stores, reads)
        return Fix(
            applicability=Applicability.SAFE,
            edits=tuple(edits),
            description="save the tensors with ctx.save_for_backward and unpack them from ctx.saved_tensors",
        )

    def _backward_edits(
        self, backward: cst.FunctionDef, ctx: str, stores: list[_Store], reads: SavedTensorsReads
    ) -> list[Edit]:
        names = {s.attribute: s.backward_name for s in stores}
        edits: list[Edit] = []
        for line in {id(s.alias_line): s.alias_line for s in stores if s.alias_line is not None}.values():
            edits.append(Edit(line, lambda updated: cst.RemovalSentinel.REMOVE))
        for node in all_nodes(backward.body, cst.Attribute):
            attribute = ctx_attribute(node, ctx)
            if attribute in names:
                local = cst.Name(names[attribute])
                edits.append(Edit(node, lambda updated, n=local: n.with_changes(lpar=updated.lpar, rpar=updated.rpar)))
        new_names = [s.backward_name for s in stores]
        if reads.line is not None and reads.target is not None:

            def extend(updated: cst.CSTNode) -> cst.CSTNode:
                assert type(updated) is cst.SimpleStatementLine
                assign = updated.body[0]
                assert type(assign) is cst.Assign
                target = assign.targets[0].target
                assert type(target) in (cst.Tuple, cst.List)
                new_target = assign.targets[0].with_changes(target=tuple_with(target, new_names))
                return updated.with_changes(body=[assign.with_changes(targets=[new_target])])

            edits.append(Edit(reads.line, extend))
        else:
            unpack = _unpack_line(new_names, ctx)
            edits.append(Edit(backward.body, lambda updated: _prepend(updated, unpack)))
        return edits


def _forward_read_edits(holder: cst.FunctionDef, ctx: str, stores: list[_Store]) -> list[Edit]:
    """`ctx.probs` read in forward after `ctx.probs = ...` became a local -> `probs`."""
    names = {s.attribute: s.forward_name for s in stores}
    targets = {id(s.line.body[0].targets[0].target) for s in stores}  # type: ignore[attr-defined]
    edits = []
    for node in all_nodes(holder.body, cst.Attribute):
        attribute = ctx_attribute(node, ctx)
        if attribute in names and id(node) not in targets:
            local = cst.Name(names[attribute])
            edits.append(Edit(node, lambda updated, n=local: n.with_changes(lpar=updated.lpar, rpar=updated.rpar)))
    return edits


def _detached(updated: cst.CSTNode) -> cst.CSTNode:
    """`out` -> `out.detach()`."""
    assert isinstance(updated, cst.BaseExpression)
    return cst.Call(func=cst.Attribute(value=updated, attr=cst.Name("detach")))


def _read_names(node: cst.CSTNode) -> set[str]:
    return set(iter_names(node))


def _comments_of(line: cst.SimpleStatementLine) -> list[cst.EmptyLine]:
    """Comment lines of a removed statement (its own leading comments and trailing comment)."""
    comments = [e for e in line.leading_lines if e.comment is not None]
    trailing = line.trailing_whitespace.comment
    if trailing is not None:
        comments.append(cst.EmptyLine(indent=True, whitespace=cst.SimpleWhitespace(""), comment=trailing))
    return comments


def _as_local(updated: cst.CSTNode, name: str) -> cst.CSTNode:
    """`ctx.probs = expr` -> `probs = expr` (comments kept)."""
    assert type(updated) is cst.SimpleStatementLine
    assign = updated.body[0]
    assert type(assign) is cst.Assign
    target = assign.targets[0].with_changes(target=cst.Name(name))
    return updated.with_changes(body=[assign.with_changes(targets=[target])])


def _unpack_line(names: list[str], ctx: str) -> cst.SimpleStatementLine:
    elements = []
    for number, name in enumerate(names):
        last = number == len(names) - 1
        comma = cst.Comma() if len(names) == 1 else (cst.MaybeSentinel.DEFAULT if last else cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        elements.append(cst.Element(cst.Name(name), comma=comma))
    target = cst.Tuple(elements, lpar=(), rpar=())
    if len(names) == 1:
        target = one_element_target(target)
    value = cst.Attribute(cst.Name(ctx), cst.Name("saved_tensors"))
    return cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(target)], value)])


def _prepend(updated: cst.CSTNode, line: cst.SimpleStatementLine) -> cst.CSTNode:
    """Insert `line` first in a function body, after its docstring."""
    assert type(updated) is cst.IndentedBlock
    statements = list(updated.body)
    position = 1 if statements and is_docstring(statements[0]) else 0
    statements.insert(position, line)
    return updated.with_changes(body=statements)
