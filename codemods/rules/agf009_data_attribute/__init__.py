"""AGF009 data-attribute: `.data` reads and mutations on tensors autograd tracks."""

from __future__ import annotations

from functools import partial

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.semantic.dataflow import may_run_before
from autograd_fix.codemods.data_rewrites import copy_into, out_of_place, out_of_place_name, shares_storage
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.nograd_wrap import consecutive_runs, no_grad_wrap_edits
from autograd_fix.codemods.rule import Contract, Rule
from autograd_fix.codemods.semantic.role_evidence import is_functional_loss
from autograd_fix.codemods.semantic.roles import OPTIMIZER_OR_SCALER_TOKENS, Role
from autograd_fix.codemods.rules.agf009_data_attribute.data_access import (
    AutogradFinder,
    bound_whole,
    constructs,
    data_mutation,
    data_reads,
    init_call_argument,
    is_data,
    last_name,
    same,
    storage_change,
    stored_whole,
    write_source,
    write_targets,
)
from autograd_fix.codemods.rules.agf009_data_attribute.function_units import FunctionUnits, chain_root, uses_name
from autograd_fix.codemods.rules.agf009_data_attribute.module_getters import is_getter, reaches_return, reads_module_state
from autograd_fix.codemods.torch_api import INTEGER_ARGUMENTS
from autograd_fix.codemods.semantic.tracking import Kind, Site, Tracked, TrackingAnalysis
from autograd_fix.codemods.walk import SyntaxIndex, iter_descendants, node_types_of, walk

#: nn containers are built from modules that already exist: their parameters are not fresh
_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"})


class DataAttribute(Rule):
    """
    ## What it does
    Finds `.data` on tensors autograd tracks (parameters, `requires_grad` tensors, model
    outputs, losses) where autograd is in play (training, evaluation, `forward`). Reads
    become `.detach()`; in-place updates of a parameter through `.data` become the same
    update on the parameter itself under `torch.no_grad()`; `nn.init.*(w.data)` becomes
    `nn.init.*(w)`. Where only a run can tell, `w.data = <computed>` becomes `w.copy_(...)`
    under `torch.no_grad()`, and a change through `.data` of an activation autograd saved
    goes out of place (`h = h.mul(2)`).

    In play means: a tensor computed in the same scope (a forward's output, a loss, an
    intermediate) or saved by an op there, a module's `forward`, and any scope that runs
    backward (`.backward()`, `torch.autograd.grad`), steps an optimizer or reads `.grad`;
    and a module method that hands back (returns, or fills a returned container with)
    tensors read from the module's parameters or submodules through `.data` (a getter
    whose callers may want the graph). One-line bodies (`if flag: out.append(p.data)`)
    count for reads. `x.data.detach()` drops the redundant `.data`. `loss.data[0]`, the
    pre-0.4 way to read a loss, becomes `loss.item()` where the value holds one element (a
    reduced `torch.nn.functional` loss, or a name backpropagated without a `gradient`):
    indexing a 0-dim tensor raises IndexError since PyTorch 0.5. A name backpropagated
    in the scope is tracked however it was built (`loss = 0; loss += criterion(...)`).

    ## Why is this bad?
    `.data` is a tensor sharing storage with the original but invisible to autograd,
    including its version counter. Changing a tensor through `.data` after an op saved
    it for backward gives silently wrong gradients, where `with torch.no_grad():` (or
    `.detach()`) makes the same mistake raise `one of the variables needed for gradient
    computation has been modified by an inplace operation`. Reading `.data` is a graph
    break in disguise: `.detach()` says what it means.

    ## Example
    ```python
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
    pred = output.data.max(1)[1]
    ```

    ## Use instead
    ```python
    for p in model.parameters():
        with torch.no_grad():
            p.add_(p.grad, alpha=-lr)
    pred = output.detach().max(1)[1]
    ```

    ## Fix safety
    A read becomes `.detach()`: same values, same storage, no gradient; the fix is safe
    unless the result is bound, returned or stored (code elsewhere could mutate it, and
    through `.detach()` that is now checked by autograd), then unsafe. `.data[0]` ->
    `.item()` is unsafe: it gives a Python float where a one-element tensor of shape `[1]`
    gave a tensor (a 0-dim one raised). A mutation of a
    leaf (parameter, `requires_grad` tensor) through `.data` becomes the mutation of the
    leaf under `torch.no_grad()`: same parameter values afterwards; unsafe because a
    mutation that used to corrupt a saved tensor silently now raises. Left to a run
    (unsafe fixes, kept only when verification accepts them): `leaf.data = <computed
    value>` becomes `leaf.copy_(<value>)` under `torch.no_grad()` (the same values when
    the shapes match; `copy_` raises where they do not, and the run rejects it); an
    in-place change through `.data` of a non-leaf tensor autograd saved (`h.data.mul_(2)`
    after `h = torch.sigmoid(...)`) becomes `h = h.mul(2)` (accepted when the forward
    values before the first backward are equal and the rewritten's gradients match
    finite differences where the original's did not; rejected when another name or view
    still held the old `h`). Not fixed, only reported, because no run can settle them:
    `leaf.data = other` where `other` is a tensor someone else holds (`enc.weight.data`,
    a name, a view: weight tying, which `copy_` would silently undo); mutations through
    `.data` of non-leaf tensors autograd did not save, or with methods whose derivative
    is zero (`round_`, `sign_`) or that overwrite (`zero_`, `fill_`, `copy_`): deliberate
    straight-through tricks, which a finite-difference check would call a correction;
    and storage changes (`resize_`, `set_`). Not reported: `.data` of things not shown to
    be tracked tensors (`dataset.data`, a `PackedSequence`'s `.data`, numpy arrays),
    `.grad.data`, reads and in-place updates of a leaf under `no_grad` (`with
    torch.no_grad(): p.data -= lr * p.grad`: autograd records nothing there), code inside optimizers (`Optimizer`
    subclasses) and initializers (functions ending in `_`), `__init__`, and parameters in
    code that only builds, converts, fuses or initialises modules (no backward, no
    optimizer step, no `.grad`: timm's `fuse()` / `reparameterize()`, `_init_weights`,
    module converters), where no graph exists for `.data` to corrupt; writes into the
    parameters of a module constructed earlier in the same function (`new = nn.Embedding(...)`,
    an in-file module class) and not used since (UDOP's bias expansion), with the `.data`
    reads they copy from. A method call on
    an object merely named like a model (`decoder.get_frames_at(i)`) is not a forward
    pass; only `decoder(z)`, `decoder.forward(z)` or a submodule call are.

    ## Verification
    For reads and leaf updates: outputs and gradients equal. Where the original's
    gradients were wrong (a `.data` change of a tensor autograd saved): the forward
    values before the first backward equal, the rewritten's gradients match finite
    differences in float64 and the original's do not.
    """

    code = "AGF009"
    name = "data-attribute"
    safety = Applicability.UNSAFE
    message = "`.data` on a tensor autograd tracks"
    contract = Contract(
        description="outputs and gradients equal; or, where a .data mutation made the original's gradients wrong, "
        "forward values before the first backward equal and the rewritten's gradients match finite differences in "
        "float64 while the original's do not",
        checks=("equal_or_gradients_corrected", "graph_state_may_change"),
    )

    def visit_Module(self, node: cst.Module) -> bool:
        analysis = TrackingAnalysis.for_context(self.context)
        imports = self.context.imports
        self._scopes: dict[int, bool] = {}
        self._units: dict[int, FunctionUnits] = {}
        self._module = node
        updates: list[tuple[int, int, tuple[Site, cst.Attribute]]] = []
        for site in analysis.sites():
            if site.position.exempt:
                continue
            handled: set[int] = set()
            for small in site.statement.body:
                mutation = data_mutation(small, imports)
                if mutation is not None:
                    handled.add(id(mutation))
                    if self._fresh_write(site, small, mutation, analysis):
                        handled.update(id(read) for read in data_reads(small, handled, self.context.semantic.syntax) if write_source(small, read))
                        continue
                    self._mutation(site, small, mutation, analysis, updates)
                elif type(small) is cst.Assign and any(is_data(t.target) for t in small.targets):
                    target = next(t.target for t in small.targets if is_data(t.target))
                    assert type(target) is cst.Attribute
                    if self._fresh_write(site, small, target, analysis):
                        handled.add(id(target))
                        handled.update(id(read) for read in data_reads(small, handled, self.context.semantic.syntax) if write_source(small, read))
                        continue
                    handled.update(id(read) for read in data_reads(small, set(), self.context.semantic.syntax))  # the whole statement is this finding
                    swap = any(same(read.value, target.value) for read in data_reads(small.value, set(), self.context.semantic.syntax))
                    fact = analysis.tracked(target.value, site.statement)
                    if not swap and fact is not None and self._in_play(site, fact):
                        self._storage_swap(site, small, target, fact)
            for data in data_reads(site.statement, handled, self.context.semantic.syntax):
                self._read(site, data, analysis)
        for site in analysis.suite_sites():  # reads only: their fixes edit the read itself
            if not site.position.exempt and not any(data_mutation(s, imports) for s in site.statement.body):
                for data in data_reads(site.statement, set(), self.context.semantic.syntax):
                    self._read(site, data, analysis)
        for run in consecutive_runs(updates):
            self._report_update_run(run)  # type: ignore[arg-type]
        return False

    # -- is autograd in play here? ------------------------------------------------------
    def _in_play(self, site: Site, fact: Tracked, write: bool = False) -> bool:
        """Can a `.data` access of this tensor here corrupt or break a graph?

        `.data` is dangerous only where autograd records: for a tensor computed in this
        scope from tracked values (a forward's output, a loss, an intermediate), for a
        tensor an op in this scope saved, in a module's `forward`, and in a scope that
        runs backward (`.backward()`, `torch.autograd.grad`), an optimizer step or reads
        `.grad` (a hand-written update). Never in `__init__`; never for a parameter in
        code that only builds, converts, fuses or initialises modules; not for an in-place
        `write` in a script's set-up before its first backward (a storage swap `.data = x`
        or a read still counts: what training sees changes, or the fix is free).
        """
        function = site.position.function
        if function is not None and function.name.value == "__init__":
            return False
        if not fact.leaf or fact.saved:
            return True
        if function is not None and function.name.value == "forward" and site.position.class_name is not None:
            return True
        if function is None and write:
            # a script's module level runs once, top to bottom: set-up before its first
            # backward (`model.embed.weight.data.copy_(vectors)`) has no graph to corrupt
            return self._autograd_in(may_run_before(self._module.body, site.statement), id(site.statement))
        if function is None:
            return self._autograd_in([self._module], 0)
        return self._autograd_in([function.body], id(function))

    def _autograd_in(self, scopes: list[cst.CSTNode], key: int) -> bool:
        """Do these statements (not nested functions or classes) run backward, step or read grads?"""
        if key not in self._scopes:
            finder = AutogradFinder(self.context.imports, OPTIMIZER_OR_SCALER_TOKENS | self.context.roles.added(Role.OPTIMIZER))
            for scope in scopes:
                walk(scope, finder)
            self._scopes[key] = finder.found
        return self._scopes[key]

    def _returned_state(self, site: Site, data: cst.Attribute, analysis: TrackingAnalysis) -> bool:
        """A module getter handing back its parameters (or functions of them) through
        `.data` (slicetca#3): the caller gets tensors cut from the graph."""
        info = analysis.classes.get(site.position.class_name or "")
        function = site.position.function
        return (
            info is not None
            and function is not None
            and is_getter(function, info)
            and reads_module_state(data.value, info)
            and reaches_return(function, site.statement, data)
        )

    # -- writes into a module built just now ------------------------------------------------
    def _fresh_write(self, site: Site, small: cst.BaseSmallStatement, data: cst.Attribute,
                     analysis: TrackingAnalysis) -> bool:
        """Does this `.data` write go into a module constructed earlier in this function, unused since?

        `new = nn.Embedding(...)` followed by `new.weight.data[:k] = old.weight.data`: no graph
        can have saved a parameter that did not exist before, so nothing can be corrupted.
        Fail closed: the name must be bound by a single-target `name = <constructor>(...)` in
        an enclosing block of the write, with no argument that is a tracked tensor, a module,
        a starred or a private (`_weight=`) argument; every use of the name between the two
        (and anywhere in a loop around the write that the constructor is outside of) must be
        the target of another `.data` write; no nested function, lambda or class may see it.
        """
        function = site.position.function
        name = chain_root(data.value)
        if function is None or name is None:
            return False
        key = id(function)
        units = self._units.get(key)
        if units is None:
            units = self._units[key] = FunctionUnits(function)
        index = units.index.get(id(small))
        if index is None or units.captured(name):
            return False
        imports = self.context.imports
        write = units.items[index]
        if uses_name(write.node, name, write_targets(write.node, imports)):
            return False
        start = index - 1
        while start >= 0:
            unit = units.items[start]
            if constructs(unit.node, name):
                break
            if uses_name(unit.node, name, write_targets(unit.node, imports)):
                return False
            start -= 1
        if start < 0:
            return False
        built = units.items[start]
        if built.line is None or write.blocks[: len(built.blocks)] != built.blocks:
            return False  # the constructor must run whenever the write does
        assert type(built.node) in (cst.Assign, cst.AnnAssign) and type(built.node.value) is cst.Call
        call = built.node.value
        constructor = analysis.module_constructor(call)
        if constructor is None or last_name(constructor) in _CONTAINERS:
            return False
        for argument in call.args:
            if argument.star or (argument.keyword is not None and argument.keyword.value.startswith("_")):
                return False
            if analysis.tracked(argument.value, built.line) is not None or self.context.semantic.likely_module(
                argument.value, built.line
            ):
                return False
        loops = {block for block in write.blocks[len(built.blocks):] if block[1]}
        for unit in units.items:
            if loops.intersection(unit.blocks) and uses_name(unit.node, name, write_targets(unit.node, imports)):
                return False  # a later iteration writes after this iteration's uses
        return True

    # -- mutations ---------------------------------------------------------------------
    def _mutation(self, site: Site, small: cst.BaseSmallStatement, data: cst.Attribute,
                  analysis: TrackingAnalysis, updates: list) -> None:
        fact = analysis.tracked(data.value, site.statement)
        if fact is None or not self._in_play(site, fact, write=True):
            return
        label = _label(data.value)
        if not fact.leaf:
            self._non_leaf_mutation(site, small, data, fact)
            return
        if storage_change(small) or len(site.statement.body) != 1:
            self.report(data, f"in-place change of `{label}` through `.data`; do it on `{label}` under `torch.no_grad()`")
            return
        if site.position.grad_disabled:
            # an in-place update under grad-off (a manual SGD step after backward): the
            # facts say never to touch in-place ops under no_grad, and nothing records it
            return
        updates.append((site.block, site.index, (site, data)))

    def _non_leaf_mutation(self, site: Site, small: cst.BaseSmallStatement, data: cst.Attribute, fact: Tracked) -> None:
        """Out of place when autograd saved the tensor (its gradients are silently wrong
        now, and a run can show the rewritten's are right); otherwise it is a
        straight-through trick no run can tell from a mistake: report only."""
        label = _label(data.value)
        name = out_of_place_name(small) if fact.saved and len(site.statement.body) == 1 else None
        if name is None:
            self.report(
                data,
                f"in-place change of `{label}` through `.data`: if autograd saved `{label}`, gradients are silently "
                "wrong; compute it out of place, or detach on purpose",
            )
            return
        fix = Fix(Applicability.UNSAFE, (Edit(small, out_of_place),), f"compute `{name}` out of place (verified by a run)")
        self.report(
            data,
            f"in-place change of `{label}` through `.data` after autograd saved it: backward silently uses the "
            f"changed values; compute `{name}` out of place",
            fix,
        )

    def _storage_swap(self, site: Site, small: cst.Assign, target: cst.Attribute, fact: Tracked) -> None:
        """`leaf.data = value`: `copy_` under no_grad is the same when shapes and dtypes
        match, which a run shows (`copy_` raises on a shape mismatch)."""
        label = _label(target)
        message = (
            f"`{label} = ...` replaces the storage of a tracked tensor behind autograd's back; use "
            "`with torch.no_grad(): ....copy_(...)` when the shapes match"
        )
        if not fact.leaf or len(site.statement.body) != 1 or len(small.targets) != 1 or shares_storage(small.value):
            self.report(target, message)
            return
        edits: tuple[Edit, ...] = (Edit(small, copy_into),)
        needs: tuple[str, ...] = ()
        if not site.position.grad_disabled:
            wrap, needs = no_grad_wrap_edits([site.statement], self.context.imports)
            edits += tuple(wrap)
        fix = Fix(Applicability.UNSAFE, edits, "copy the values in under `torch.no_grad()` (verified by a run)", needs)
        self.report(target, message, fix)

    def _report_update_run(self, run: list[tuple[Site, cst.Attribute]]) -> None:
        statements = [site.statement for site, _ in run]
        wrap, needs = no_grad_wrap_edits(statements, self.context.imports)
        strips = tuple(_strip(data) for _, data in run)
        fix = Fix(Applicability.UNSAFE, strips + wrap, "update the tensor itself under `with torch.no_grad():`", needs)
        data = run[0][1]
        self.report(
            data,
            f"in-place change of `{_label(data.value)}` through `.data` hides it from autograd; update "
            f"`{_label(data.value)}` itself under `with torch.no_grad():`",
            fix,
        )

    # -- reads -------------------------------------------------------------------------
    def _read(self, site: Site, data: cst.Attribute, analysis: TrackingAnalysis) -> None:
        fact: Tracked | None = analysis.tracked(data.value, site.statement)
        if fact is None and self._backpropagated_loss(data.value, site):
            fact = Tracked(Kind.DERIVED)  # `loss = 0; loss += criterion(head(x), y); loss.backward()`
        if (fact is None or not self._in_play(site, fact)) and not self._returned_state(site, data, analysis):
            return
        imports = self.context.imports
        if fact is not None and fact.kind is Kind.FORWARD_INPUT and _integer_argument(site.statement, data, imports):
            return  # `pack_padded_sequence(x, seq_lengths.data.cpu().numpy())`: lengths are integers
        init_call = init_call_argument(site.statement, data, imports)
        label = _label(data.value)
        if init_call:
            fix = Fix(Applicability.UNSAFE, (_strip(data),), "pass the tensor itself")
            self.report(data, f"`nn.init` already works under no_grad: pass `{label}`, not `{label}.data`", fix)
            return
        if site.position.grad_disabled or stored_whole(site.statement, data):
            return  # `obj.attr = p.data`: a deliberate storage alias (FSDP/DDP-style); leave it
        first = _first_element(site.statement, data)
        if first is not None and self._one_element(data.value, site):
            fix = Fix(Applicability.UNSAFE, (Edit(first, _to_item),), "use `.item()`")
            self.report(data, f"`{label}.data[0]` indexes a one-element loss: on a 0-dim tensor it raises "
                        f"IndexError (PyTorch 0.5 and later); use `{label}.item()`", fix)
            return
        if _detached_next(site.statement, data):
            fix = Fix(Applicability.SAFE, (_strip(data),), "drop `.data` (`.detach()` follows)")
            self.report(data, f"`{label}.data.detach()`: `.data` is redundant before `.detach()`; drop it", fix)
            return
        safe = not bound_whole(site.statement, data)
        fix = Fix(
            Applicability.SAFE if safe else Applicability.UNSAFE,
            (Edit(data, _to_detach),),
            "use `.detach()`",
        )
        self.report(data, f"`{label}.data` reads a tracked tensor behind autograd's back; use `{label}.detach()`", fix)


    def _one_element(self, value: cst.BaseExpression, site: Site) -> bool:
        """Does `value` hold one element: a reduced `torch.nn.functional` loss (0-dim), or a
        name backpropagated without a `gradient` argument (backward needs one element)?"""
        if type(value) is cst.Call:
            return _reduced_functional_loss(value, self.context.imports)
        return self._backpropagated_loss(value, site)

    def _backpropagated_loss(self, value: cst.BaseExpression, site: Site) -> bool:
        """A name backpropagated in the site's scope, or bound there only to what same-file
        training helpers return after backpropagating it (`loss = compute_td_loss(bs)`)."""
        scope = site.position.function or self._module
        graph = self.context.semantic.call_graph
        backpropagated = partial(_backpropagated, syntax=self.context.semantic.syntax)
        return backpropagated(value, scope) or graph.bound_to_trained_returns(value, scope, backpropagated)


# -- helpers ---------------------------------------------------------------------------
def _integer_argument(statement: cst.CSTNode, data: cst.Attribute, imports: ImportIndex) -> bool:
    """Is `data` read inside an argument torch takes only as integers (`torch_api.INTEGER_ARGUMENTS`)?"""
    for node in iter_descendants(statement):
        if type(node) is not cst.Call:
            continue
        where = INTEGER_ARGUMENTS.get(imports.qualified_name(node.func) or "")
        if where is None:
            continue
        position, keyword = where
        positional = [a for a in node.args if a.keyword is None and not a.star]
        chosen = [a.value for a in node.args if a.keyword is not None and a.keyword.value == keyword]
        if len(positional) > position:
            chosen.append(positional[position].value)
        if any(value is data or any(d is data for d in iter_descendants(value)) for value in chosen):
            return True
    return False


def _backpropagated(value: cst.BaseExpression, scope: cst.CSTNode, syntax: SyntaxIndex | None = None) -> bool:
    """Is `value` (a name) the receiver of `.backward()` without a `gradient` argument in
    `scope` (not nested functions)? Backward then needs it tracked and of one element.
    (The scope's nodes are read off the file's index `syntax` when given.)"""
    if type(value) is not cst.Name:
        return False
    nested = lambda n: type(n) in _NESTED_SCOPES  # noqa: E731 (the scope itself is never pruned)
    for node in (syntax.descendants if syntax is not None else iter_descendants)(scope, nested):
        if (
            type(node) is cst.Call
            and type(node.func) is cst.Attribute
            and node.func.attr.value == "backward"
            and type(node.func.value) is cst.Name
            and node.func.value.value == value.value
            and not any(argument.keyword is None or argument.keyword.value in {"gradient", "grad_tensors"} for argument in node.args)
        ):
            return True
    return False


_NESTED_SCOPES = node_types_of((cst.FunctionDef, cst.ClassDef, cst.Lambda))


def _reduced_functional_loss(call: cst.Call, imports: ImportIndex) -> bool:
    """`F.nll_loss(out, y)`, `F.mse_loss(out, y, size_average=False)`: 0-dim; not with
    `reduction="none"` (or any reduction not spelt out), `reduce=False`, or `*args`."""
    if not is_functional_loss(imports.qualified_name(call.func) or ""):
        return False
    for argument in call.args:
        if argument.star:
            return False
        keyword = argument.keyword.value if argument.keyword is not None else None
        if keyword == "reduction" and not (
            type(argument.value) is cst.SimpleString and argument.value.evaluated_value in {"mean", "sum"}
        ):
            return False
        if keyword == "reduce" and not (type(argument.value) is cst.Name and argument.value.value == "True"):
            return False
    return True


def _first_element(statement: cst.CSTNode, data: cst.Attribute) -> cst.Subscript | None:
    """The `x.data[0]` that indexes `data` with the literal 0, if any."""
    for node in iter_descendants(statement):
        if type(node) is cst.Subscript and node.value is data and len(node.slice) == 1:
            element = node.slice[0].slice
            if type(element) is cst.Index and type(element.value) is cst.Integer and element.value.value == "0":
                return node
    return None


def _to_item(updated: cst.CSTNode) -> cst.CSTNode:
    """`x.data[0]` -> `x.item()`."""
    assert type(updated) is cst.Subscript and type(updated.value) is cst.Attribute
    return cst.Call(func=cst.Attribute(value=updated.value.value, attr=cst.Name("item")), lpar=updated.lpar, rpar=updated.rpar)


def _label(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _strip(data: cst.Attribute) -> Edit:
    """`x.data` -> `x` (the edit receives the updated attribute)."""

    def replace(updated: cst.CSTNode) -> cst.CSTNode:
        assert type(updated) is cst.Attribute
        if updated.lpar:
            return updated.value.with_changes(lpar=updated.lpar, rpar=updated.rpar)
        return updated.value

    return Edit(data, replace)


def _detached_next(statement: cst.CSTNode, data: cst.Attribute) -> bool:
    """Is `x.data` the receiver of a `.detach()` call (`x.data.detach()`)? Then dropping
    `.data` gives the same values, storage and graph cut."""
    return any(
        type(node) is cst.Call
        and type(node.func) is cst.Attribute
        and node.func.value is data
        and node.func.attr.value == "detach"
        and not node.args
        for node in iter_descendants(statement)
    )


def _to_detach(updated: cst.CSTNode) -> cst.CSTNode:
    """`x.data` -> `x.detach()`."""
    assert type(updated) is cst.Attribute
    return cst.Call(func=cst.Attribute(value=updated.value, attr=cst.Name("detach")), lpar=updated.lpar, rpar=updated.rpar)
