"""AGF012 deprecated-autograd-api: `torch.cuda.amp.*`, `torch.cpu.amp.*`, `Variable`."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autograd_fix.codemods.rules.agf012_deprecated_autograd_api.callable_aliases import calls_of_alias, forwards_to
from autograd_fix.codemods.semantic.roles import DATA_ITERABLE_TOKENS, Role
from autograd_fix.codemods.semantic.grad_free import fresh_factory, grad_free
from autograd_fix.codemods.semantic.graph_breaks import VARIABLE_NAMES
from autograd_fix.codemods.expressions import method_call, parenthesized
from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.rule import Contract, Rule
from autograd_fix.codemods.torch_version import TorchVersion, supports
from autograd_fix.codemods.walk import SyntaxIndex

#: first release of each API the rule rewrites *to* (evidence in the rule's docstring)
AUTOCAST_SINCE = TorchVersion(1, 12)
GRAD_SCALER_SINCE = TorchVersion(2, 3)
CUSTOM_FWD_BWD_SINCE = TorchVersion(2, 4)
#: the old `torch.cuda.amp` / `torch.cpu.amp` spellings warn (FutureWarning) from here on
AMP_DEPRECATED_SINCE = TorchVersion(2, 4)


VOLATILE_MESSAGE = ("`volatile=True` has had no effect since PyTorch 0.4: this code builds a graph; "
                    "run it under `with torch.no_grad():` and drop `Variable`")


@dataclass(frozen=True)
class _AmpTarget:
    """Where a deprecated `torch.<device>.amp` API moved, and how its arguments map."""

    new: str
    device: str
    kind: str  # "autocast" | "scaler" | "custom"
    #: the first PyTorch release that has `new` with this signature
    since: TorchVersion


_AMP: dict[str, _AmpTarget] = {}
for _device in ("cuda", "cpu"):
    for _path in (f"torch.{_device}.amp.autocast", f"torch.{_device}.amp.autocast_mode.autocast"):
        _AMP[_path] = _AmpTarget("torch.amp.autocast", _device, "autocast", AUTOCAST_SINCE)
    for _path in (f"torch.{_device}.amp.GradScaler", f"torch.{_device}.amp.grad_scaler.GradScaler"):
        _AMP[_path] = _AmpTarget("torch.amp.GradScaler", _device, "scaler", GRAD_SCALER_SINCE)
for _name in ("custom_fwd", "custom_bwd"):
    for _path in (f"torch.cuda.amp.{_name}", f"torch.cuda.amp.autocast_mode.{_name}"):
        _AMP[_path] = _AmpTarget(f"torch.amp.{_name}", "cuda", "custom", CUSTOM_FWD_BWD_SINCE)

#: positional parameters of the old `torch.<device>.amp.autocast(enabled, dtype, cache_enabled)`
_AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")


class DeprecatedAutogradApi(Rule):
    """
    ## What it does
    Finds deprecated autograd-adjacent APIs and rewrites them to their current spelling:
    `torch.cuda.amp.autocast(...)` / `torch.cpu.amp.autocast(...)` become
    `torch.amp.autocast("cuda" | "cpu", ...)`, `torch.cuda.amp.GradScaler(...)` becomes
    `torch.amp.GradScaler("cuda", ...)`, `torch.cuda.amp.custom_fwd/custom_bwd` become
    `torch.amp.custom_fwd/custom_bwd(device_type="cuda", ...)`, and
    `torch.autograd.Variable(x)` becomes what it really computes.

    ## Why is this bad?
    The `torch.cuda.amp` / `torch.cpu.amp` entry points emit a `FutureWarning` on every
    call since PyTorch 2.4 and are slated for removal. `Variable` has been a no-op wrapper
    since 0.4, and it hides a graph break: `Variable(x)` returns `x.detach()` (a new leaf
    sharing `x`'s storage, with `requires_grad=False`), so gradients silently stop there.
    `volatile=True` has had no effect since 0.4: code relying on it builds a full graph.

    ## Example
    ```python
    from torch.autograd import Variable

    scaler = torch.cuda.amp.GradScaler()
    for images, labels in train_loader:
        images = Variable(images.cuda())
        with torch.cuda.amp.autocast(True):
            loss = criterion(model(images), labels)
    ```

    ## Use instead
    ```python
    scaler = torch.amp.GradScaler("cuda")
    for images, labels in train_loader:
        images = images.cuda()
        with torch.amp.autocast("cuda", enabled=True):
            loss = criterion(model(images), labels)
    ```

    ## Fix safety
    Safe. The old AMP constructors forward to the new ones with the device filled in;
    positional arguments of the old `autocast(enabled, dtype, cache_enabled)` are passed
    by keyword, because the new signature orders them differently. (The old `autocast()`
    passes `dtype=torch.float16` / `bfloat16` explicitly where the new one reads
    `torch.get_autocast_dtype(device)`: they differ only after a global
    `torch.set_autocast_dtype`.) `Variable(x)` becomes `x.detach()`, which is exactly what
    it computes, or plain `x` when `x` visibly cannot require grad (a freshly made tensor,
    a `.data` read, a batch from a data loader, or conversions of those);
    `Variable(x, requires_grad=True)` becomes `x.detach().requires_grad_()`.
    Report-only: `volatile=True` (it does nothing today; the intent was `torch.no_grad()`,
    which changes behaviour, so a person decides), a non-literal `requires_grad=`, extra
    positional arguments, and `*args` passed to `autocast`. An import the fixes leave
    unused (`from torch.autograd import Variable`) goes too, as for every rule. A deprecated AMP callable that is referenced rather than called (`autocast =
    torch.cuda.amp.autocast if amp else torch.autocast`) becomes
    `functools.partial(torch.amp.autocast, "cuda")` when every call of the alias is in
    view and maps (keywords only for autocast): safe for a function's local alias, unsafe
    at module level (another file may call it); a class attribute is reported only.

    ## Target PyTorch version
    A rewrite must still run on the oldest PyTorch the project supports (`target-torch`,
    or the floor of `torch` in the pyproject's dependencies; see the README). Where the
    new API is missing at that floor, the old spelling is not deprecated there either
    (every old AMP spelling warns only from 2.4), so there is nothing to fix and the rule
    stays silent, as Ruff's pyupgrade rules do below their target version. A report the
    project cannot act on without raising its floor would only be noise in `--check`.
    First releases of the APIs rewritten *to*:

    - `torch.amp.autocast(device_type, ...)`: 1.12 (the `torch.amp` package; ignite
      requires "torch>=1.12.0" for `from torch.amp import autocast`, pytorch/ignite#3460;
      1.10-1.11 had only `torch.autocast`).
    - `torch.amp.GradScaler(device, ...)`: 2.3 (GradScaler moved to `torch/amp`,
      pytorch/pytorch#99301; `torch.cuda.amp.grad_scaler` internals moved in 2.3.0,
      learning-at-home/hivemind#610; ignite requires "torch>=2.3.1" for it).
    - `torch.amp.custom_fwd/custom_bwd(device_type=...)`: 2.4
      (pytorch/pytorch#126531, merged May 2024).
    - `Variable(x)` becomes `x.detach()` / `x.requires_grad_()` / `x`: all exist since 0.4.

    The old spellings warn from 2.4: `torch.cuda.amp.autocast` / `torch.cpu.amp.autocast`
    (pytorch/pytorch#126062), `torch.cuda.amp.GradScaler` / `torch.cpu.amp.GradScaler`
    and `torch.cuda.amp.custom_fwd/custom_bwd` (pytorch/pytorch#126527, #126531), all
    merged in May 2024 for the 2.4 release; in 2.3 `torch.cuda.amp.GradScaler` was a
    plain subclass of `torch.amp.GradScaler` without a warning.

    ## Verification
    Outputs equal and every parameter's `.grad` equal between the original and the
    rewritten run.
    """

    code = "AGF012"
    name = "deprecated-autograd-api"
    safety = Applicability.SAFE
    message = "deprecated autograd API"
    contract = Contract(
        description="outputs equal; every parameter's .grad equal",
        checks=("outputs_equal", "grads_equal"),
    )

    def __init__(self, context) -> None:  # type: ignore[no-untyped-def]
        super().__init__(context)
        #: enclosing `for` loops: (target names, the loop) innermost last
        self._loops: list[cst.For] = []
        #: names of iterables that yield data batches (the loader role, and the project's)
        self._data_words = DATA_ITERABLE_TOKENS | context.roles.added(Role.LOADER)
        #: enclosing statement lists (module body, indented blocks), innermost last
        self._blocks: list[cst.Module | cst.IndentedBlock] = []
        #: `Variable(...)` calls already handled as a whole statement
        self._handled: set[int] = set()
        #: calls in the fallback branch of a version check that already uses torch.amp
        self._fallbacks: set[int] = set()
        #: enclosing scopes (module, classes, functions), innermost last: where an alias is called
        self._scopes: list[cst.Module | cst.ClassDef | cst.FunctionDef] = []

    # --- traversal -------------------------------------------------------------------

    def visit_For(self, node: cst.For) -> None:
        self._loops.append(node)

    def leave_For(self, original_node: cst.For) -> None:
        self._loops.pop()

    def visit_Module(self, node: cst.Module) -> None:
        self._blocks.append(node)
        self._scopes.append(node)
        self._fallbacks = _compat_fallback_nodes(node, self.context.imports, self.context.semantic.syntax)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._scopes.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._scopes.append(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._scopes.pop()

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._blocks.append(node)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        self._blocks.pop()

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        """`x = Variable(x)` with `x` visibly grad-free: the whole line goes."""
        if len(node.body) != 1 or type(node.body[0]) is not cst.Assign or not self._blocks:
            return
        assign = node.body[0]
        call = assign.value
        if len(assign.targets) != 1 or type(assign.targets[0].target) is not cst.Name:
            return
        if not (type(call) is cst.Call and self.context.imports.qualified_name(call.func) in VARIABLE_NAMES):
            return
        if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
            return
        data = call.args[0].value
        if not (type(data) is cst.Name and data.value == assign.targets[0].target.value and grad_free(data, self.context.imports, self._loops, self._data_words)):
            return
        body = list(self._blocks[-1].body)
        index = next((i for i, s in enumerate(body) if s is node), None)
        if index is None or index + 1 >= len(body):
            return
        following = body[index + 1]
        moved = list(node.leading_lines)
        if node.trailing_whitespace.comment is not None:
            moved.append(cst.EmptyLine(comment=node.trailing_whitespace.comment))
        edits = [Edit(node, lambda updated: cst.RemovalSentinel.REMOVE)]
        if moved:
            edits.append(Edit(following, lambda updated, m=tuple(moved): _with_leading(updated, m)))
        self._handled.add(id(call))
        fix = Fix(applicability=Applicability.SAFE, edits=tuple(edits), description=f"remove the no-op `{data.value} = Variable({data.value})`")
        self.report(call, f"`Variable` is deprecated since PyTorch 0.4; `{data.value} = Variable({data.value})` does nothing here", fix)

    def visit_Decorator(self, node: cst.Decorator) -> None:
        decorator = node.decorator
        if type(decorator) is cst.Call:
            return  # handled by visit_Call
        target = _AMP.get(self.context.imports.qualified_name(decorator) or "")
        if target is None or target.kind != "custom" or not self._available(target):
            return
        self._report_amp(decorator, target, lambda updated: _bare_custom(updated, target, self.context.imports))

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.imports.qualified_name(node.func)
        if qualified is None:
            return
        target = _AMP.get(qualified)
        if target is not None:
            self._amp_call(node, target)
        elif qualified in VARIABLE_NAMES and id(node) not in self._handled:
            self._variable_call(node)

    # --- AMP -----------------------------------------------------------------------

    def _amp_call(self, node: cst.Call, target: _AmpTarget) -> None:
        imports = self.context.imports
        if id(node) in self._fallbacks:
            return  # the old spelling kept on purpose for old torch versions
        if not self._available(target):
            return  # the new API is missing at the project's floor: nothing to fix
        if target.kind == "autocast" and not _autocast_args_mappable(node):
            old = f"torch.{target.device}.amp.autocast"
            self.report(
                node,
                f"`{old}` is deprecated; use `torch.amp.autocast({target.device!r}, ...)` "
                "(positional arguments here cannot be mapped safely: pass them by keyword)",
            )
            return
        if target.kind == "custom" and any(a.star for a in node.args):
            self.report(node, f"`torch.cuda.amp.{target.new.rsplit('.', 1)[1]}` is deprecated; use `{target.new}(..., device_type=\"cuda\")`")
            return
        self._report_amp(node, target, lambda updated: _rewrite_amp_call(updated, target, imports))

    def visit_Assign(self, node: cst.Assign) -> None:
        """`autocast = torch.cuda.amp.autocast if amp else torch.autocast`: the deprecated
        callable is referenced, and called later through the alias."""
        if forwards_to(node.value, self.context.imports, VARIABLE_NAMES):
            self._variable_alias(node)
        for reference in _branches(node.value):
            target = _AMP.get(self.context.imports.qualified_name(reference) or "")
            if target is None or target.kind == "custom" or id(reference) in self._fallbacks or not self._available(target):
                continue
            self._amp_reference(node, reference, target)

    def _amp_reference(self, assign: cst.Assign, reference: cst.BaseExpression, target: _AmpTarget) -> None:
        """Fixed with `functools.partial(<new>, "<device>")` when every call of the alias is
        seen and maps: GradScaler's new signature is the old one after the device; autocast's
        reorders its positionals, so its calls must pass keywords only. A function's local
        alias is seen whole (safe); a module-level one may be imported elsewhere (unsafe, a
        run decides); a class attribute is called through `self` (report only)."""
        old = f"torch.{target.device}.amp.{target.new.rsplit('.', 1)[1]}"
        names = [t.target.value for t in assign.targets if type(t.target) is cst.Name]
        scope = self._scopes[-1] if self._scopes else None
        local = names and type(scope) in (cst.Module, cst.FunctionDef)
        calls = [calls_of_alias(scope, n) for n in names] if local and scope is not None else [None]
        mappable = all(c is not None for c in calls) and (
            target.kind == "scaler" or all(a.keyword is not None or a.star == "**" for c in calls for call in c or () for a in call.args)
        )
        message = f"`{old}` is deprecated (FutureWarning since PyTorch {AMP_DEPRECATED_SINCE}) and referenced here"
        if not mappable:
            self.report(reference, f"{message}; call `{target.new}({target.device!r}, ...)` where it is called instead")
            return
        partial, partial_needs = self.context.imports.expression_for("functools.partial")
        new, new_needs = self.context.imports.expression_for(target.new)
        replacement = cst.Call(func=partial, args=_with_commas([cst.Arg(new), cst.Arg(_device_string(target.device))]))
        fix = Fix(
            applicability=Applicability.SAFE if type(scope) is cst.FunctionDef else Applicability.UNSAFE,
            edits=(Edit(reference, lambda updated: replacement),),
            description=f"use `functools.partial({target.new}, {target.device!r})`",
            required_imports=partial_needs + new_needs,
        )
        self.report(reference, f"{message}; use `functools.partial({target.new}, {target.device!r})`", fix)

    def _available(self, target: _AmpTarget) -> bool:
        """Does the project's oldest supported PyTorch have `target`'s new API?"""
        return supports(self.context.target_torch, target.since)

    def _report_amp(self, node: cst.BaseExpression, target: _AmpTarget, replace) -> None:  # type: ignore[no-untyped-def]
        _, needs = self.context.imports.expression_for(target.new)
        old = f"torch.{target.device}.amp.{target.new.rsplit('.', 1)[1]}"
        if target.kind == "custom":
            new = f'{target.new}(device_type="{target.device}", ...)'
        else:
            new = f'{target.new}("{target.device}", ...)'
        fix = Fix(
            applicability=Applicability.SAFE,
            edits=(Edit(node, replace),),
            description=f"use `{new}`",
            required_imports=needs,
        )
        self.report(node, f"`{old}` is deprecated (FutureWarning since PyTorch {AMP_DEPRECATED_SINCE}); use `{new}`", fix)

    # --- Variable --------------------------------------------------------------------

    def _variable_alias(self, assign: cst.Assign) -> None:
        """`Variable = lambda *a, **k: autograd.Variable(*a, **k)`: each call of the alias
        with `volatile=True` is the volatile case (the lambda's own calls are reported there)."""
        scope = self._scopes[-1] if self._scopes else None
        if type(scope) not in (cst.Module, cst.FunctionDef):
            return
        for target in assign.targets:
            calls = calls_of_alias(scope, target.target.value) if type(target.target) is cst.Name else None
            for call in calls or ():
                volatile = next((a for a in call.args if a.keyword is not None and a.keyword.value == "volatile"), None)
                if volatile is not None and not _is_literal(volatile.value, "False"):
                    self.report(call, VOLATILE_MESSAGE)

    def _variable_call(self, node: cst.Call) -> None:
        positional = [a for a in node.args if a.keyword is None]
        keywords = {a.keyword.value: a for a in node.args if a.keyword is not None}
        if len(positional) != 1 or positional[0].star or set(keywords) - {"requires_grad", "volatile"}:
            self.report(node, "`Variable` is deprecated: it returns `x.detach()`; use the tensor itself (or `x.detach()`)")
            return
        volatile = keywords.get("volatile")
        if volatile is not None and not _is_literal(volatile.value, "False"):
            self.report(node, VOLATILE_MESSAGE)
            return
        requires_grad = keywords.get("requires_grad")
        if requires_grad is not None and not (
            _is_literal(requires_grad.value, "True") or _is_literal(requires_grad.value, "False")
        ):
            self.report(node, "`Variable` is deprecated; `Variable(x, requires_grad=r)` is `x.detach().requires_grad_(r)`")
            return
        wants_grad = requires_grad is not None and _is_literal(requires_grad.value, "True")
        data = positional[0].value
        visibly_grad_free = grad_free(data, self.context.imports, self._loops, self._data_words)
        if wants_grad:
            fresh = fresh_factory(data, self.context.imports)
            replacement = "x.requires_grad_()" if fresh else "x.detach().requires_grad_()"
            build = _requires_grad_builder(fresh, self.context.imports)
        elif visibly_grad_free:
            replacement = "x"
            build = _identity_builder(self.context.imports)
        else:
            replacement = "x.detach()"
            build = _detach_builder(self.context.imports)
        fix = Fix(
            applicability=Applicability.SAFE,
            edits=(Edit(node, build),),
            description=f"replace `Variable(x{', requires_grad=True' if wants_grad else ''})` with `{replacement}`",
        )
        self.report(node, f"`Variable` is deprecated since PyTorch 0.4; this call is `{replacement}`", fix)

# --- helpers ---------------------------------------------------------------------------


def _compat_fallback_nodes(module: cst.Module, imports: ImportIndex, syntax: SyntaxIndex) -> set[int]:
    """Ids of calls (and callable references) in the other branch of code that already
    uses `torch.amp`.

    `torch.amp.GradScaler(...) if new_torch else torch.cuda.amp.GradScaler()`, an
    `if is_torch_version(">=", "2.3"): ... else: ...`, or a `try: torch.amp... except:`
    keep the old API for old PyTorch releases on purpose: rewriting the fallback would
    break exactly the versions it exists for.
    """
    def uses_new_api(node: cst.CSTNode) -> bool:
        return any((imports.qualified_name(n) or "").startswith("torch.amp.") for n in syntax.find(node, (cst.Attribute, cst.Name)))

    fallbacks: set[int] = set()
    for node in syntax.find(module, (cst.If, cst.IfExp, cst.Try)):
        if type(node) is cst.If and node.orelse is not None and uses_new_api(node.body):
            alternatives = [node.orelse]
        elif type(node) is cst.IfExp and uses_new_api(node.body):
            alternatives = [node.orelse]
        elif type(node) is cst.Try and uses_new_api(node.body):
            alternatives = list(node.handlers)
        else:
            continue
        for alternative in alternatives:
            fallbacks.update(id(n) for n in syntax.find(alternative, (cst.Call, cst.Attribute, cst.Name)))
    return fallbacks


def _branches(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values an assignment may bind: both arms of conditional expressions."""
    if type(value) is cst.IfExp:
        return _branches(value.body) + _branches(value.orelse)
    return [value]


def _is_literal(node: cst.BaseExpression, value: str) -> bool:
    return type(node) is cst.Name and node.value == value


def _device_string(device: str) -> cst.SimpleString:
    return cst.SimpleString(f'"{device}"')


def _autocast_args_mappable(node: cst.Call) -> bool:
    """Can every positional argument of the old autocast be passed by keyword?"""
    if any(a.star == "*" for a in node.args):
        return False
    positional = [a for a in node.args if a.keyword is None and not a.star]
    return len(positional) <= len(_AUTOCAST_POSITIONAL)


def _rewrite_amp_call(updated: cst.CSTNode, target: _AmpTarget, imports: ImportIndex) -> cst.CSTNode:
    if type(updated) is not cst.Call or imports.qualified_name(updated.func) not in _AMP:
        return updated
    func, _ = imports.expression_for(target.new)
    device = _device_string(target.device)
    args = list(updated.args)
    if target.kind == "custom":
        keyword = cst.Arg(
            value=device,
            keyword=cst.Name("device_type"),
            equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
        )
        position = next((i for i, a in enumerate(args) if a.keyword is not None or a.star), len(args))
        args.insert(position, keyword)
    else:
        if target.kind == "autocast":
            args = _keyword_positionals(args)
        args.insert(0, cst.Arg(value=device))
    return updated.with_changes(func=func, args=_with_commas(args))


def _keyword_positionals(args: list[cst.Arg]) -> list[cst.Arg]:
    """Old `autocast(enabled, dtype, cache_enabled)` positions become keywords."""
    result = []
    position = 0
    for arg in args:
        if arg.keyword is None and not arg.star:
            arg = arg.with_changes(
                keyword=cst.Name(_AUTOCAST_POSITIONAL[position]),
                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
            )
            position += 1
        result.append(arg)
    return result


def _with_commas(args: list[cst.Arg]) -> list[cst.Arg]:
    """Every argument but the last gets a comma (keeping an existing one and its spacing)."""
    fixed = []
    for index, arg in enumerate(args):
        last = index == len(args) - 1
        if not last and arg.comma is cst.MaybeSentinel.DEFAULT:
            arg = arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        fixed.append(arg)
    return fixed


def _bare_custom(updated: cst.CSTNode, target: _AmpTarget, imports: ImportIndex) -> cst.CSTNode:
    if type(updated) is cst.Call:
        return updated
    func, _ = imports.expression_for(target.new)
    keyword = cst.Arg(
        value=_device_string(target.device),
        keyword=cst.Name("device_type"),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )
    return cst.Call(func=func, args=[keyword])


def _with_leading(updated: cst.CSTNode, moved: tuple[cst.EmptyLine, ...]) -> cst.CSTNode:
    if not hasattr(updated, "leading_lines"):
        return updated
    return updated.with_changes(leading_lines=[*moved, *updated.leading_lines])  # type: ignore[attr-defined]


def _still_variable(updated: cst.CSTNode, imports: ImportIndex) -> bool:
    """The node is still the `Variable(...)` call (another rule may have rewritten it first)."""
    return type(updated) is cst.Call and bool(updated.args) and imports.qualified_name(updated.func) in VARIABLE_NAMES


def _identity_builder(imports: ImportIndex):  # type: ignore[no-untyped-def]
    def build(updated: cst.CSTNode) -> cst.CSTNode:
        if not _still_variable(updated, imports):
            return updated
        return parenthesized(updated.args[0].value.with_changes())

    return build


def _detach_builder(imports: ImportIndex):  # type: ignore[no-untyped-def]
    def build(updated: cst.CSTNode) -> cst.CSTNode:
        if not _still_variable(updated, imports):
            return updated
        return method_call(updated.args[0].value, "detach")

    return build


def _requires_grad_builder(fresh: bool, imports: ImportIndex):  # type: ignore[no-untyped-def]
    def build(updated: cst.CSTNode) -> cst.CSTNode:
        if not _still_variable(updated, imports):
            return updated
        receiver = updated.args[0].value
        if not fresh:
            receiver = method_call(receiver, "detach")
        return method_call(receiver, "requires_grad_")

    return build
