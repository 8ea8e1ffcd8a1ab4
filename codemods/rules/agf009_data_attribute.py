"""AGF009 data-attribute: `.data` reads and mutations on tensors autograd tracks."""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.model import Applicability, Edit, Fix, invalid, valid
from autograd_fix.codemods.nograd_wrap import consecutive_runs, no_grad_wrap_edits
from autograd_fix.codemods.rule import Contract, Rule
from autograd_fix.codemods.tracking import Site, Tracked, TrackingAnalysis
from autograd_fix.codemods.walk import walk

#: trailing-underscore methods that do not mutate values
_NOT_INPLACE = frozenset({"requires_grad_", "share_memory_"})
#: mutations whose `.data` cannot simply be dropped (they change shape or storage)
_STORAGE_METHODS = frozenset({"resize_", "resize_as_", "set_", "storage_"})
#: a `.data` read bound to a name, returned or stored may be mutated later: unsafe
_BINDING = (cst.Assign, cst.AnnAssign, cst.Return, cst.AugAssign)


class DataAttribute(Rule):
    """
    ## What it does
    Finds `.data` on tensors autograd tracks (parameters, `requires_grad` tensors, model
    outputs, losses). Reads become `.detach()`; in-place updates of a parameter through
    `.data` become the same update on the parameter itself under `torch.no_grad()`;
    `nn.init.*(w.data)` becomes `nn.init.*(w)`.

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
    through `.detach()` that is now checked by autograd), then unsafe. A mutation of a
    leaf (parameter, `requires_grad` tensor) through `.data` becomes the mutation of the
    leaf under `torch.no_grad()`: same parameter values afterwards; unsafe because a
    mutation that used to corrupt a saved tensor silently now raises. Not fixed, only
    reported: `leaf.data = other` (may change shape; no `detach` equivalent), mutations
    through `.data` of non-leaf tensors (often deliberate straight-through tricks), and
    storage changes (`resize_`, `set_`). Not reported: `.data` of things not shown to
    be tracked tensors (`dataset.data`, a `PackedSequence`'s `.data`, numpy arrays),
    `.grad.data`, reads under `no_grad`, and code inside optimizers (`Optimizer`
    subclasses) and initializers (functions ending in `_`).

    ## Verification
    For reads: outputs and gradients equal. For mutations: parameters change as the
    original intended.
    """

    code = "AGF009"
    name = "data-attribute"
    safety = Applicability.UNSAFE
    message = "`.data` on a tensor autograd tracks"
    triggers = (".data",)
    contract = Contract(
        description="reads: outputs and gradients equal; mutations: parameters change as the original intended",
        checks=("outputs_equal", "grads_equal", "parameters_change_as_intended"),
    )

    def visit_Module(self, node: cst.Module) -> bool:
        analysis = TrackingAnalysis.for_context(self.context)
        imports = self.context.imports
        updates: list[tuple[int, int, tuple[Site, cst.Attribute]]] = []
        for site in analysis.sites():
            if site.position.exempt:
                continue
            handled: set[int] = set()
            for small in site.statement.body:
                mutation = _data_mutation(small, imports)
                if mutation is not None:
                    handled.add(id(mutation))
                    self._mutation(site, small, mutation, analysis, updates)
                elif isinstance(small, cst.Assign) and any(_is_data(t.target) for t in small.targets):
                    target = next(t.target for t in small.targets if _is_data(t.target))
                    assert isinstance(target, cst.Attribute)
                    handled.update(id(read) for read in _data_reads(small, set()))  # the whole statement is this finding
                    swap = any(_same(read.value, target.value) for read in _data_reads(small.value, set()))
                    if not swap and analysis.tracked(target.value, site.statement) is not None:
                        self.report(
                            target,
                            f"`{_label(target)} = ...` replaces the storage of a tracked tensor behind autograd's "
                            "back; use `with torch.no_grad(): ....copy_(...)` when the shapes match",
                        )
            for data in _data_reads(site.statement, handled):
                self._read(site, data, analysis)
        for run in consecutive_runs(updates):
            self._report_update_run(run)  # type: ignore[arg-type]
        return False

    # -- mutations ---------------------------------------------------------------------
    def _mutation(self, site: Site, small: cst.BaseSmallStatement, data: cst.Attribute,
                  analysis: TrackingAnalysis, updates: list) -> None:
        fact = analysis.tracked(data.value, site.statement)
        if fact is None:
            return
        label = _label(data.value)
        if not fact.leaf:
            self.report(
                data,
                f"in-place change of `{label}` through `.data`: if autograd saved `{label}`, gradients are silently "
                "wrong; compute it out of place, or detach on purpose",
            )
            return
        if _storage_change(small) or len(site.statement.body) != 1:
            self.report(data, f"in-place change of `{label}` through `.data`; do it on `{label}` under `torch.no_grad()`")
            return
        if site.position.grad_disabled:
            fix = Fix(Applicability.UNSAFE, (_strip(data),), "drop `.data` (already under no_grad)")
            self.report(data, f"in-place change of `{label}` through `.data` hides it from autograd's version check; "
                        "drop `.data` (already under no_grad)", fix)
            return
        updates.append((site.block, site.index, (site, data)))

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
        if fact is None:
            return
        imports = self.context.imports
        init_call = _init_call_argument(site.statement, data, imports)
        label = _label(data.value)
        if init_call:
            fix = Fix(Applicability.UNSAFE, (_strip(data),), "pass the tensor itself")
            self.report(data, f"`nn.init` already works under no_grad: pass `{label}`, not `{label}.data`", fix)
            return
        if site.position.grad_disabled or _stored_whole(site.statement, data):
            return  # `obj.attr = p.data`: a deliberate storage alias (FSDP/DDP-style); leave it
        safe = not _bound_whole(site.statement, data)
        fix = Fix(
            Applicability.SAFE if safe else Applicability.UNSAFE,
            (Edit(data, _to_detach),),
            "use `.detach()`",
        )
        self.report(data, f"`{label}.data` reads a tracked tensor behind autograd's back; use `{label}.detach()`", fix)


# -- helpers ---------------------------------------------------------------------------
def _label(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _is_data(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Attribute) and node.attr.value == "data"


def _strip(data: cst.Attribute) -> Edit:
    """`x.data` -> `x` (the edit receives the updated attribute)."""

    def replace(updated: cst.CSTNode) -> cst.CSTNode:
        assert isinstance(updated, cst.Attribute)
        if updated.lpar:
            return updated.value.with_changes(lpar=updated.lpar, rpar=updated.rpar)
        return updated.value

    return Edit(data, replace)


def _to_detach(updated: cst.CSTNode) -> cst.CSTNode:
    """`x.data` -> `x.detach()`."""
    assert isinstance(updated, cst.Attribute)
    return cst.Call(func=cst.Attribute(value=updated.value, attr=cst.Name("detach")), lpar=updated.lpar, rpar=updated.rpar)


def _inplace_method(call: cst.Call, imports: ImportIndex) -> bool:
    if not isinstance(call.func, cst.Attribute) or imports.qualified_name(call.func) is not None:
        return False
    method = call.func.attr.value
    return method.endswith("_") and not method.startswith("_") and method not in _NOT_INPLACE


def _data_mutation(small: cst.BaseSmallStatement, imports: ImportIndex) -> cst.Attribute | None:
    """The `.data` attribute a whole-statement in-place mutation goes through, if any."""
    node: cst.BaseExpression | None = None
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        node = small.value
        if not _inplace_method(node, imports):
            return None
        while isinstance(node, cst.Call) and _inplace_method(node, imports):
            node = node.func.value  # type: ignore[attr-defined]
    elif isinstance(small, cst.AugAssign):
        node = small.target
    elif isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Subscript):
        node = small.targets[0].target
    if node is None:
        return None
    while isinstance(node, cst.Subscript):
        node = node.value
    return node if _is_data(node) else None  # type: ignore[return-value]


def _storage_change(small: cst.BaseSmallStatement) -> bool:
    finder = _MethodFinder(_STORAGE_METHODS)
    walk(small, finder)
    return finder.found


class _MethodFinder(cst.CSTVisitor):
    def __init__(self, methods: frozenset[str]) -> None:
        super().__init__()
        self.methods = methods
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in self.methods:
            self.found = True


def _data_reads(statement: cst.CSTNode, handled: set[int]) -> list[cst.Attribute]:
    finder = _DataReadFinder(handled)
    walk(statement, finder)
    return finder.reads


class _DataReadFinder(cst.CSTVisitor):
    """`.data` attributes read in a statement (not the ones already handled as writes)."""

    def __init__(self, handled: set[int]) -> None:
        super().__init__()
        self.handled = handled
        self.reads: list[cst.Attribute] = []

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "data" and id(node) not in self.handled:
            self.reads.append(node)

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def _init_call_argument(statement: cst.CSTNode, data: cst.Attribute, imports: ImportIndex) -> bool:
    """Is `data` the tensor argument of an `nn.init.*` call?"""
    finder = _InitFinder(data, imports)
    walk(statement, finder)
    return finder.found


class _InitFinder(cst.CSTVisitor):
    def __init__(self, data: cst.Attribute, imports: ImportIndex) -> None:
        super().__init__()
        self.data = data
        self.imports = imports
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        name = self.imports.qualified_name(node.func) or ""
        if name.startswith("torch.nn.init.") and node.args and node.args[0].value is self.data:
            self.found = True


def _bound_whole(statement: cst.SimpleStatementLine, data: cst.Attribute) -> bool:
    """Is the `.data` tensor itself (not a value computed from it) bound, returned or stored?"""
    for small in statement.body:
        value = getattr(small, "value", None)
        if isinstance(small, _BINDING) and value is not None and _is_or_views(value, data):
            return True
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            if any(_is_or_views(a.value, data) for a in small.value.args):
                return True  # `history.append(p.data)`
    return False


def _stored_whole(statement: cst.SimpleStatementLine, data: cst.Attribute) -> bool:
    """Is the `.data` tensor itself stored into an attribute or a container slot?"""
    for small in statement.body:
        if isinstance(small, cst.Assign) and _is_or_views(small.value, data):
            if any(isinstance(t.target, (cst.Attribute, cst.Subscript)) for t in small.targets):
                return True
    return False


def _same(a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    return a.deep_equals(b)


def _is_or_views(node: cst.BaseExpression, data: cst.Attribute) -> bool:
    if node is data:
        return True
    if isinstance(node, (cst.Tuple, cst.List)):
        return any(_is_or_views(e.value, data) for e in node.elements)
    if isinstance(node, cst.Subscript):
        return _is_or_views(node.value, data)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in {
        "view", "reshape", "t", "transpose", "permute", "squeeze", "unsqueeze", "flatten", "expand", "cpu", "to",
        "contiguous", "numpy", "view_as",
    }:
        return _is_or_views(node.func.value, data)
    return False


DataAttribute.VALID = [
    # 1. `dataset.data` / `batch.data` are not tensors autograd tracks
    valid(
        """
import torch

def describe(dataset, loader):
    print(dataset.data.shape)
    for batch in loader:
        print(batch.data)
"""
    ),
    # 2. PackedSequence.data from an LSTM over packed input
    valid(
        """
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence

class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16)
        self.out = nn.Linear(16, 5)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths)
        out, _ = self.lstm(packed)
        return self.out(out.data)
"""
    ),
    # 3. `.grad.data` is not tracked (the gradient itself)
    valid(
        """
import torch

def clip(model, max_norm):
    for p in model.parameters():
        p.grad.data.clamp_(-max_norm, max_norm)
"""
    ),
    # 4. a custom optimizer written in the old style: its job is to mutate parameters
    valid(
        """
import torch
from torch.optim import Optimizer

class SignSGD(Optimizer):
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.data.add_(torch.sign(p.grad.data), alpha=-group["lr"])
"""
    ),
    # 5. already idiomatic: no_grad and detach
    valid(
        """
import torch

def step(model, lr, output):
    with torch.no_grad():
        for p in model.parameters():
            p.add_(p.grad, alpha=-lr)
    return output.detach().argmax(1)
"""
    ),
    # 6. reads under no_grad are harmless
    valid(
        """
import torch

@torch.no_grad()
def evaluate(model, loader):
    correct = 0
    for x, y in loader:
        output = model(x)
        correct += output.data.max(1)[1].eq(y).sum().item()
    return correct
"""
    ),
    # 7. numpy arrays have a `.data` buffer
    valid(
        """
import numpy as np
import torch

arr = np.zeros(4)
view = memoryview(arr.data)
t = torch.from_numpy(arr)
"""
    ),
    # 8. an initializer named with a trailing underscore
    valid(
        """
import torch
import torch.nn as nn

def reset_(module):
    for p in module.parameters():
        p.data.zero_()
"""
    ),
    # 9. a Dataset stores its samples in `self.data`
    valid(
        """
import torch
from torch.utils.data import Dataset

class Points(Dataset):
    def __init__(self, n):
        self.data = torch.randn(n, 2)

    def __getitem__(self, i):
        return self.data[i]
"""
    ),
]

DataAttribute.VALID += [
    # 10. Module._apply-style storage swap: casting a parameter in place of itself (torch.nn.cpp)
    valid(
        """
import torch

class Wrapper(torch.nn.Module):
    def _apply(self, fn, recurse=True):
        for param in self.parameters():
            param.data = fn(param.data)
        return self
"""
    ),
    # 11. keeping a storage alias on an object on purpose (DDP/FSDP mixed precision)
    valid(
        """
import torch

def attach_full_precision(module):
    for param in module.parameters():
        param._fp_param = param.data
"""
    ),
]

DataAttribute.INVALID = [
    # 1. manual SGD through .data in a parameters() loop
    invalid(
        """
import torch

def sgd_step(model, lr):
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
""",
        """
import torch

def sgd_step(model, lr):
    for p in model.parameters():
        with torch.no_grad():
            p.add_(p.grad, alpha=-lr)
""",
    ),
    # 2. the old MNIST example: accuracy from output.data
    invalid(
        """
import torch.nn.functional as F

def train(model, loader, optimizer):
    for data, target in loader:
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        pred = output.data.max(1)[1]
        print(pred.eq(target).sum().item())
""",
        """
import torch.nn.functional as F

def train(model, loader, optimizer):
    for data, target in loader:
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        pred = output.detach().max(1)[1]
        print(pred.eq(target).sum().item())
""",
    ),
    # 3. DCGAN weights_init passed to .apply: nn.init on `.data` and a fill through `.data`
    invalid(
        """
import torch.nn as nn

def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        m.bias.data.fill_(0)

netG = nn.Sequential(nn.ConvTranspose2d(100, 64, 4), nn.BatchNorm2d(64))
netG.apply(weights_init)
""",
        """
import torch
import torch.nn as nn

def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight, 1.0, 0.02)
        with torch.no_grad():
            m.bias.fill_(0)

netG = nn.Sequential(nn.ConvTranspose2d(100, 64, 4), nn.BatchNorm2d(64))
netG.apply(weights_init)
""",
    ),
    # 4. WGAN weight clipping: consecutive statements share one `with`
    invalid(
        """
import torch
import torch.nn as nn

class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2, 16)
        self.fc2 = nn.Linear(16, 1)

    def clip_weights(self, c):
        self.fc1.weight.data.clamp_(-c, c)
        self.fc2.weight.data.clamp_(-c, c)
""",
        """
import torch
import torch.nn as nn

class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2, 16)
        self.fc2 = nn.Linear(16, 1)

    def clip_weights(self, c):
        with torch.no_grad():
            self.fc1.weight.clamp_(-c, c)
            self.fc2.weight.clamp_(-c, c)
""",
    ),
    # 5. already under no_grad: only `.data` goes
    invalid(
        """
import torch

def shrink(model):
    with torch.no_grad():
        for p in model.parameters():
            p.data.mul_(0.9)
""",
        """
import torch

def shrink(model):
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.9)
""",
    ),
    # 6. a running loss from `loss.data` (`import torch as T`)
    invalid(
        """
import torch as T
import torch.nn as nn

model = nn.Linear(4, 1)
criterion = nn.MSELoss()
running = 0.0
for _ in range(3):
    loss = criterion(model(T.randn(8, 4)), T.randn(8, 1))
    loss.backward()
    running += loss.data.item()
""",
        """
import torch as T
import torch.nn as nn

model = nn.Linear(4, 1)
criterion = nn.MSELoss()
running = 0.0
for _ in range(3):
    loss = criterion(model(T.randn(8, 4)), T.randn(8, 1))
    loss.backward()
    running += loss.detach().item()
""",
    ),
    # 7. manual SGD on requires_grad tensors with `-=` through `.data`
    invalid(
        """
import torch

w = torch.randn(3, requires_grad=True)
for _ in range(5):
    loss = (w ** 2).sum()
    loss.backward()
    w.data -= 0.1 * w.grad.data
    w.grad.data.zero_()
""",
        """
import torch

w = torch.randn(3, requires_grad=True)
for _ in range(5):
    loss = (w ** 2).sum()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad.data
    w.grad.data.zero_()
""",
    ),
    # 8. a snapshot of the weights bound to a name: unsafe fix, still `.detach()`
    invalid(
        """
import torch
import torch.nn as nn

layer = nn.Linear(3, 3)
before = layer.weight.data.clone()
snapshot = layer.weight.data
""",
        """
import torch
import torch.nn as nn

layer = nn.Linear(3, 3)
before = layer.weight.detach().clone()
snapshot = layer.weight.detach()
""",
    ),
    # 9. `leaf.data = other`: report only
    invalid(
        """
import torch
import torch.nn as nn

emb = nn.Embedding(100, 16)
emb.weight.data = torch.randn(100, 16)
"""
    ),
    # 10. a mutation through `.data` of an intermediate: report only
    invalid(
        """
import torch
import torch.nn as nn

class Quant(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        h.data.round_()
        return h
"""
    ),
]
