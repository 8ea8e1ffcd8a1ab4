"""Instrumentation installed inside a run child (never in the tool's own process).

What is observed, and why this way:

* Gradients at each ``optimizer.step()``: a global step pre-hook
  (``torch.optim.optimizer.register_optimizer_step_pre_hook``) sees every optimizer,
  including ones the user built in ways we cannot predict.
* Contribution of each backward pass: ``torch.autograd.backward`` (which
  ``Tensor.backward`` calls) is wrapped; the leaves the pass reaches are found from the
  graph's ``AccumulateGrad`` nodes and their ``.grad`` is diffed before/after. The sum of
  contributions since a parameter's previous step is checked against its ``.grad`` at the
  step online, so long loops cost no memory.
* Retained graph memory: ``saved_tensors_hooks`` see every tensor autograd saves. The hook
  stores ``t.detach()`` (no reference cycle) and a weak reference to it; what is still
  alive at the end is what live objects keep reachable. Unique storages are counted,
  leaves that require grad (parameters, inputs) and views of them (``addmm`` saves
  ``weight.t()``) excluded: they are saved by reference and live anyway. Because a hook
  bypasses autograd's own version check on unpack, the hook re-implements it, with
  autograd's wording, so in-place bugs still raise.
* Graph memory held during the run: the same hook counts, per unique storage (device +
  data pointer, refcounted over the saved tensors that share it), the bytes of saved
  tensors alive, and keeps the maximum (``peak_graph_bytes``). The count drops when the
  stored ``detach()`` is freed (a weakref callback: no cycle, a dict update), so graphs
  kept in a function's locals and freed before the end of the run are still seen.
  Deterministic (no sampling); leaves that require grad are excluded as above.
* Peak memory: CUDA ``max_memory_allocated`` when the run uses CUDA (guarded by
  ``is_available``: a CPU build returns 0). On CPU, glibc ``mallinfo2`` (heap in use plus
  mmapped blocks: it sees torch's allocations, ``tracemalloc`` does not) sampled by a
  thread every millisecond and at every forward/backward/step. The profiler's memory
  view costs seconds per run and was rejected for that.
* Custom Function contexts: ``Function.apply`` is wrapped to keep a weak reference to each
  output's ``grad_fn`` (the ctx); counting the live ones before and after ``gc.collect()``
  tells which were only freed by the cyclic collector.
* Forward values, recorded *before* each backward runs (``torch.autograd.backward``, which
  ``Tensor.backward`` calls, and ``torch.autograd.grad``): the tensors backward starts from
  (the loss) and the outputs of the outermost module calls since the previous backward.
  A run whose backward then raises (an in-place change of a saved tensor) still leaves
  its forward pass to compare. The losses are also kept per optimizer step.
* Custom Functions of the verified file: every ``apply`` records, per position, whether
  the input was a tensor that required grad (``gradcheck.input_roles``). At the first
  call that builds a graph, the Function's ``backward`` is checked against finite
  differences, and on the rewritten side it and the original's ``backward`` are called
  directly on the same saved context (``gradcheck.compare_backwards``). These probe
  calls are invisible to the other measures (saved-tensor accounting, ctx tracking,
  RNG state, changed-line coverage).
"""

from __future__ import annotations

import ctypes
import gc
import threading
import time
import weakref
from typing import Any

import torch
import torch.optim.optimizer as _optimizer_module
from torch import nn

from .manual_updates import ManualUpdateWatch
from .gradcheck import backward_vs_finite_differences, compare_backwards, counterpart_class, input_roles, merge_roles, rng_fork

#: float32 gradients are compared to sums of per-backward differences; each difference
#: loses a little precision, hence looser than assert_close's float32 defaults.
CONTRIBUTION_RTOL = 1e-4
CONTRIBUTION_ATOL = 1e-6
MAX_STORED_STEPS = 50
MAX_VIOLATIONS = 20
#: forward records kept (each: the loss and the outermost module outputs of one backward)
MAX_FORWARD_RECORDS = 64
MAX_OUTPUTS_PER_RECORD = 8
#: forward values are kept in full up to this many bytes per run, then as a fingerprint
#: (shape, sums, first elements): a long run must not hold every batch's outputs
FORWARD_BYTES_BUDGET = 32 << 20


def _scaled_down(grad: torch.Tensor, contribution: torch.Tensor) -> bool:
    """`grad` is `contribution` times one factor in (0, 1): what ``clip_grad_norm_`` (and
    a GradScaler's ``unscale_``) do to the gradients between backward and the step. A
    stale gradient (earlier steps' sums added) is not parallel to the contributions."""
    norm = float((contribution * contribution).sum())
    if norm <= 0:
        return False
    factor = float((grad * contribution).sum()) / norm
    return 0 < factor < 1 and torch.allclose(grad, contribution * factor, rtol=CONTRIBUTION_RTOL, atol=CONTRIBUTION_ATOL)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")
    ]


def _heap_reader():
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
    except (OSError, AttributeError):
        return None

    def used() -> int:
        info = libc.mallinfo2()
        return int(info.uordblks + info.hblkhd)

    return used


def named_leaves(named: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The leaves a namespace holds, by the names a verdict uses: each module's parameters
    (``model.fc.weight``) and each leaf tensor (``w``); the first name of a tensor wins."""
    leaves: dict[str, torch.Tensor] = {}
    for name, value in named.items():
        if isinstance(value, nn.Module):
            for pname, param in value.named_parameters():
                leaves.setdefault(f"{name}.{pname}", param)
        elif isinstance(value, torch.Tensor) and value.is_leaf:
            leaves.setdefault(name, value)
    return leaves


def iter_tensors(value: Any, depth: int = 0):
    """Tensors inside nested lists/tuples/dicts (and one level of object attributes)."""
    if depth > 6:
        return
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in list(value)[:10000]:
            yield from iter_tensors(item, depth + 1)
    elif isinstance(value, dict):
        for item in list(value.values())[:10000]:
            yield from iter_tensors(item, depth + 1)
    elif hasattr(value, "__dict__") and not isinstance(value, (type, nn.Module, torch.optim.Optimizer)) and depth < 2:
        try:
            attrs = vars(value)
        except TypeError:
            return
        for item in list(attrs.values())[:1000]:
            yield from iter_tensors(item, depth + 1)


def graph_nodes_from(roots: list[torch.Tensor]) -> int:
    """Autograd nodes reachable from the given tensors' grad_fn."""
    seen: set[int] = set()
    stack = [t.grad_fn for t in roots if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for nxt, _ in getattr(node, "next_functions", ()):
            if nxt is not None:
                stack.append(nxt)
    return len(seen)


def leaves_of(tensors: Any, inputs: Any) -> list[torch.Tensor]:
    if inputs is not None:
        items = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs)
        return [t for t in items if isinstance(t, torch.Tensor)]
    roots = [tensors] if isinstance(tensors, torch.Tensor) else [t for t in tensors if isinstance(t, torch.Tensor)]
    leaves: dict[int, torch.Tensor] = {}
    seen: set[int] = set()
    stack = []
    for root in roots:
        if root.grad_fn is None:
            if root.requires_grad:
                leaves[id(root)] = root
        else:
            stack.append(root.grad_fn)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            leaves[id(variable)] = variable
        for nxt, _ in getattr(node, "next_functions", ()):
            if nxt is not None:
                stack.append(nxt)
    return list(leaves.values())


class ModuleNames:
    """Names of outermost modules in the order of their first forward (``Net#0``): the
    same program gives the same names in every run, whoever holds the module.

    Seen modules are held weakly, not by ``id``: a probe model the binder built and
    dropped frees its id for the next module, which then passed for one already seen,
    so its parameters were never named (nor moved by the finite-difference re-runs,
    which disagreed with each other depending on the allocator)."""

    __slots__ = ("_seen", "_count")

    def __init__(self) -> None:
        self._seen: weakref.WeakSet[nn.Module] = weakref.WeakSet()
        self._count: dict[str, int] = {}

    def first_call(self, module: nn.Module) -> str | None:
        """The module's name at its (or an enclosing module's) first forward, else None."""
        if module in self._seen:
            return None
        cls = type(module).__name__
        index = self._count.get(cls, 0)
        self._count[cls] = index + 1
        for sub in module.modules():
            self._seen.add(sub)
        return f"{cls}#{index}"


class _SavedRef(weakref.ref):
    """Weak reference to one stored saved tensor, carrying its storage key."""

    __slots__ = ("key",)


class _LiveGraphBytes:
    """Bytes of unique storages held by saved tensors that are alive, and their peak.

    Holds no reference to the tensors nor to the refs (the refs' callback is a bound
    method of this object), so nothing here keeps a saved tensor alive or forms a cycle.
    """

    __slots__ = ("counts", "live", "peak")

    def __init__(self) -> None:
        self.counts: dict[tuple[torch.device, int], list[int]] = {}  # key -> [refcount, nbytes]
        self.live = 0
        self.peak = 0

    def acquire(self, key: tuple[torch.device, int], nbytes: int) -> None:
        """A storage not held yet (`Probes._pack` bumps the count of one already held)."""
        self.counts[key] = [1, nbytes]
        self.live += nbytes
        if self.live > self.peak:
            self.peak = self.live

    def release(self, ref: _SavedRef) -> None:
        entry = self.counts.get(ref.key)
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] <= 0:
            del self.counts[ref.key]
            self.live -= entry[1]


def _snapshot(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.detach().to("cpu", copy=True)


def _fingerprint(t: torch.Tensor) -> Any:
    """What is kept of a forward value once the budget is spent: enough to tell a
    changed value from an equal one, in a few kilobytes."""
    flat = (t.detach().abs() if t.is_complex() else t.detach()).double().flatten()
    fingerprint = torch.stack([flat.sum(), flat.abs().sum(), (flat * flat).sum()]).cpu()
    return {"__dict__": {"shape": str(list(t.shape)), "sums": fingerprint, "head": flat[:256].cpu()}}


class Probes:
    """Every observation of one run; `install` before user code, `finish` after."""

    NAME_PRIORITY = {"bound": 0, "global": 1, "module": 2, "optimizer": 3, "leaf": 4}

    def __init__(
        self,
        *,
        track_ctx: bool = False,
        snapshot_initial: bool = False,
        device: str = "cpu",
        path: str | None = None,
        counterpart: str | None = None,
        watch: Any = None,
        track_manual_updates: bool = False,
    ) -> None:
        self.track_ctx = track_ctx
        self.track_manual_updates = track_manual_updates
        #: hand-written updates seen (each of one parameter), and the leaves updated
        #: since the last backward: a clamp right after `w -= ...` is the same update
        self.manual_updates = 0
        self.optimizer_steps = 0
        #: when each optimizer step began (the time per step: from the first to the last)
        self._step_clock: list[float] = []
        self._updated_since_backward: set[int] = set()
        self._stepping = False
        self.path = path
        self.counterpart = counterpart
        self.watch = watch
        self.forward_records: list[dict[str, Any]] = []
        self.forward_count = 0
        self._module_outputs: list[Any] = []
        self._depth = 0
        self._losses_since_step: list[float] = []
        #: per leaf, the backward passes that reached it since its previous update: the
        #: micro-batches of an accumulation window (a pass through another model's copy
        #: does not count for these parameters)
        self._passes: dict[int, int] = {}
        self.functions: dict[str, dict[str, Any]] = {}
        self._quiet = False
        self._forward_bytes = 0
        self.snapshot_initial = snapshot_initial
        self.device = device
        self._names: dict[int, tuple[int, str]] = {}
        self._keep: dict[int, torch.Tensor] = {}
        self._initial: dict[int, torch.Tensor] = {}
        self._module_names = ModuleNames()
        self._optimizers: dict[int, int] = {}
        self._pending: dict[int, torch.Tensor] = {}
        # contributions since the last step of *any* optimizer: a GAN's discriminator
        # may rightly drop what the generator's backward (already stepped) left on it
        self._since_any_step: dict[int, torch.Tensor] = {}
        # every byte autograd saved over the run (each storage counted when it became live)
        self._recorded_bytes = 0
        self._ever_grad: set[int] = set()
        #: per leaf with a non-zero gradient, the first and last update epoch
        #: (`step_count`) at which a backward gave it one; and every leaf an update touched
        self._grad_epochs: dict[int, tuple[int, int]] = {}
        self._updated: set[int] = set()
        self._saved: list[tuple[weakref.ref, bool]] = []
        self._graph_bytes = _LiveGraphBytes()
        self._ctx_refs: list[weakref.ref] = []
        self.steps: list[dict[str, Any]] = []
        self.step_count = 0
        self.violations: list[dict[str, Any]] = []
        self.violation_count = 0
        self.stale_steps = 0
        self.backward_count = 0
        self._handles: list[Any] = []
        self._undo: list[Any] = []
        self._heap = _heap_reader()
        self._heap_base = 0
        self._heap_peak = 0
        self._sampling = False
        self._sampler: threading.Thread | None = None
        self._hooks_ctx: Any = None
        self.started = 0.0

    # -- naming ---------------------------------------------------------------------
    def register(self, tensor: torch.Tensor, name: str, kind: str) -> None:
        if not isinstance(tensor, torch.Tensor):
            return
        key = id(tensor)
        priority = self.NAME_PRIORITY[kind]
        current = self._names.get(key)
        if current is None or priority < current[0]:
            self._names[key] = (priority, name)
        if key not in self._keep:
            self._keep[key] = tensor
            if self.snapshot_initial:
                self._initial[key] = _snapshot(tensor)

    def register_module(self, module: nn.Module, prefix: str, kind: str) -> None:
        for pname, param in module.named_parameters(remove_duplicate=True):
            self.register(param, f"{prefix}.{pname}", kind)

    def name_of(self, tensor_id: int) -> str:
        return self._names[tensor_id][1]

    def live_graph_bytes(self) -> int:
        """Bytes of the tensors autograd saved that are alive now (unique storages)."""
        return int(self._graph_bytes.live)

    # -- install / uninstall --------------------------------------------------------
    def install(self) -> None:
        self.started = time.perf_counter()
        hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        hooks.__enter__()
        self._hooks_ctx = hooks
        self._handles.append(nn.modules.module.register_module_forward_pre_hook(self._on_forward))
        self._handles.append(nn.modules.module.register_module_forward_hook(self._on_forward_done, always_call=True))
        self._handles.append(_optimizer_module.register_optimizer_step_pre_hook(self._on_step))
        self._handles.append(_optimizer_module.register_optimizer_step_post_hook(self._after_step))
        if self.track_manual_updates:
            watch = ManualUpdateWatch(self._on_manual_update)
            watch.__enter__()
            self._undo.append(lambda: watch.__exit__(None, None, None))
        original_backward, original_grad = torch.autograd.backward, torch.autograd.grad

        def backward(tensors, *args, **kwargs):
            return self._on_backward(original_backward, tensors, *args, **kwargs)

        def grad(outputs, *args, **kwargs):
            if not self._quiet:
                self._record_forward("grad", outputs)
            return original_grad(outputs, *args, **kwargs)

        torch.autograd.backward = backward
        torch.autograd.grad = grad
        self._undo.append(lambda: setattr(torch.autograd, "backward", original_backward))
        self._undo.append(lambda: setattr(torch.autograd, "grad", original_grad))
        raw = torch.autograd.Function.__dict__["apply"]
        probes = self

        def apply(cls, *args, **kwargs):
            if probes._quiet:
                return raw.__func__(cls, *args, **kwargs)
            roles = input_roles(args)
            out = raw.__func__(cls, *args, **kwargs)
            grad_fn = next((t.grad_fn for t in iter_tensors(out) if t.grad_fn is not None), None)
            probes._on_apply(cls, args, roles, out, grad_fn)
            if probes.track_ctx and grad_fn is not None:
                try:
                    probes._ctx_refs.append(weakref.ref(grad_fn))
                except TypeError:
                    pass
            return out

        torch.autograd.Function.apply = classmethod(apply)
        self._undo.append(lambda: setattr(torch.autograd.Function, "apply", raw))
        if self.track_ctx:
            gc.disable()
            self._undo.append(gc.enable)
        if self.device.startswith("cuda") and torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        if self._heap is not None:
            self._heap_base = self._heap_peak = self._heap()
            self._sampling = True
            self._sampler = threading.Thread(target=self._sample_loop, daemon=True)
            self._sampler.start()

    def uninstall(self) -> None:
        self._sampling = False
        if self._sampler is not None:
            self._sampler.join(timeout=1)
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if self._hooks_ctx is not None:
            self._hooks_ctx.__exit__(None, None, None)
            self._hooks_ctx = None
        while self._undo:
            self._undo.pop()()

    # -- hooks ----------------------------------------------------------------------
    def _sample(self) -> None:
        if self._heap is not None:
            used = self._heap()
            if used > self._heap_peak:
                self._heap_peak = used

    def _sample_loop(self) -> None:
        while self._sampling:
            self._sample()
            time.sleep(0.001)

    def _pack(self, tensor: torch.Tensor):
        detached = tensor.detach()
        if self._quiet:  # a probe's own forward pass: not the user's graph
            return detached, tensor._version
        base = tensor._base if tensor._is_view() else tensor
        excluded = base.is_leaf and base.requires_grad  # a parameter or a view of one (W.t())
        ref = None
        if not excluded:
            try:
                storage = detached.untyped_storage()
                key = (detached.device, storage.data_ptr())
                nbytes = storage.nbytes()
            except (RuntimeError, NotImplementedError):
                pass
            else:
                live = self._graph_bytes
                ref = _SavedRef(detached, live.release)
                ref.key = key
                entry = live.counts.get(key)
                if entry is None:
                    live.acquire(key, nbytes)
                    self._recorded_bytes += nbytes
                else:
                    entry[0] += 1
        self._saved.append((ref if ref is not None else weakref.ref(detached), excluded))
        if len(self._saved) % 20000 == 0:
            self._saved = [(ref, ex) for ref, ex in self._saved if ref() is not None]
        return detached, tensor._version

    @staticmethod
    def _unpack(packed):
        detached, version = packed
        if detached._version != version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an inplace "
                f"operation: [{detached.type()} {list(detached.shape)}] is at version {detached._version}; "
                f"expected version {version} instead."
            )
        return detached

    def _on_forward(self, module: nn.Module, args: Any) -> None:
        if self._quiet:
            return
        self._sample()
        self._depth += 1
        prefix = self._module_names.first_call(module)
        if prefix is not None:
            self.register_module(module, prefix, "module")

    def _on_forward_done(self, module: nn.Module, args: Any, output: Any) -> None:
        if self._quiet:
            return
        self._depth = max(0, self._depth - 1)
        if self._depth == 0 and len(self._module_outputs) < MAX_OUTPUTS_PER_RECORD and self.forward_count < MAX_FORWARD_RECORDS:
            self._module_outputs.append([self._forward_value(t) for t in list(iter_tensors(output))[:MAX_OUTPUTS_PER_RECORD]])

    def _forward_value(self, t: torch.Tensor) -> Any:
        """A forward value as recorded: in full while the run's budget lasts."""
        nbytes = t.numel() * t.element_size()
        if self._forward_bytes + nbytes > FORWARD_BYTES_BUDGET:
            return _fingerprint(t)
        self._forward_bytes += nbytes
        return _snapshot(t)

    def _record_forward(self, call: str, tensors: Any) -> None:
        """The values a backward starts from, kept before it runs (it may raise)."""
        roots = [tensors] if isinstance(tensors, torch.Tensor) else [t for t in (tensors or ()) if isinstance(t, torch.Tensor)]
        for root in roots:
            if root.numel() == 1 and root.is_floating_point():
                self._losses_since_step.append(float(root.detach()))
        if self.forward_count < MAX_FORWARD_RECORDS:
            self.forward_records.append(
                {"step": self.step_count, "call": call, "loss": [self._forward_value(t) for t in roots], "outputs": self._module_outputs}
            )
        self._module_outputs = []
        self._depth = 0
        self.forward_count += 1

    def _on_apply(self, cls: type, args: tuple[Any, ...], roles: list[str], out: Any, grad_fn: Any) -> None:
        """Roles of a custom Function's inputs; at its first graph-building call, its
        backward against finite differences and against the original's backward."""
        forward = getattr(cls, "forward", None)
        code = getattr(forward, "__code__", None)
        if self.path is None or code is None or code.co_filename != self.path:
            return
        entry = self.functions.setdefault(cls.__name__, {"calls": 0, "roles": [], "fd": None, "direct": None})
        entry["calls"] += 1
        entry["roles"] = merge_roles(entry["roles"], roles)
        if grad_fn is None or entry["fd"] is not None:
            return
        self._quiet = True
        paused = self.watch.paused() if self.watch is not None else None
        if paused is not None:
            paused.__enter__()
        try:
            entry["fd"] = backward_vs_finite_differences(cls, args, seed=len(self.functions))
            if self.counterpart is not None:
                original = counterpart_class(self.counterpart, cls.__name__, getattr(forward, "__globals__", {}), self.path)
                if original is None:
                    entry["direct"] = {"error": f"the original defines no class {cls.__name__}"}
                else:
                    outputs = [t for t in iter_tensors(out)][:16]
                    with rng_fork():
                        entry["direct"] = compare_backwards(cls, original, grad_fn, outputs, seed=len(self.functions))
        finally:
            if paused is not None:
                paused.__exit__(None, None, None)
            self._quiet = False

    def _on_backward(self, original, tensors, *args, **kwargs):
        self._sample()
        self._record_forward("backward", tensors)
        inputs = kwargs.get("inputs")
        leaves = leaves_of(tensors, inputs)
        before = {id(leaf): _snapshot(leaf.grad) for leaf in leaves}
        result = original(tensors, *args, **kwargs)
        self.backward_count += 1
        self._updated_since_backward.clear()
        for index, leaf in enumerate(leaves):
            self._passes[id(leaf)] = self._passes.get(id(leaf), 0) + 1
            self.register(leaf, f"leaf#{len(self._names)}", "leaf")
            after = leaf.grad
            if after is None:
                continue
            after = _snapshot(after)
            prior = before[id(leaf)]
            contribution = after if prior is None or prior.shape != after.shape else after - prior
            if bool(contribution.abs().sum() > 0):
                self._ever_grad.add(id(leaf))
                first, _ = self._grad_epochs.get(id(leaf), (self.step_count, self.step_count))
                self._grad_epochs[id(leaf)] = (first, self.step_count)
            for sums in (self._pending, self._since_any_step):
                pending = sums.get(id(leaf))
                sums[id(leaf)] = contribution if pending is None else pending + contribution
        self._sample()
        return result

    def _on_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self._sample()
        self._stepping = True
        opt_index = self._optimizers.setdefault(id(optimizer), len(self._optimizers))
        prefix = f"{type(optimizer).__name__}#{opt_index}"
        params = [param for group in optimizer.param_groups for param in group["params"]]
        for position, param in enumerate(params):
            self.register(param, f"{prefix}.p{position}", "optimizer")
        self.optimizer_steps += 1
        self._step_clock.append(time.perf_counter())
        self._record_step(params, opt_index)
        self._since_any_step.clear()

    def _after_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self._stepping = False

    def _on_manual_update(self, target: torch.Tensor) -> None:
        """An in-place write with grad mode off: a hand-written update of the parameter it
        targets, when that parameter has a gradient to use and no optimizer is in play
        (an optimizer's own writes, and weight clipping or EMA around it, are not steps)."""
        if self._quiet or self._stepping or self._optimizers:
            return
        leaf = target if target.is_leaf and target.requires_grad else self._leaf_sharing(target)
        if leaf is None or id(leaf) in self._updated_since_backward:
            return
        if leaf.grad is None and id(leaf) not in self._pending:
            return  # initialisation, before any backward reached it
        self._updated_since_backward.add(id(leaf))
        self.manual_updates += 1
        self._record_step([leaf], -1)
        self._since_any_step.pop(id(leaf), None)

    def _leaf_sharing(self, tensor: torch.Tensor) -> torch.Tensor | None:
        """The tracked leaf whose storage `tensor` is (``w.data`` of a parameter `w`)."""
        try:
            pointer = tensor.untyped_storage().data_ptr()
        except (RuntimeError, NotImplementedError):
            return None
        for key in self._pending.keys() | self._since_any_step.keys() | self._ever_grad:
            leaf = self._keep.get(key)
            if leaf is not None and leaf.shape == tensor.shape and leaf.untyped_storage().data_ptr() == pointer:
                return leaf
        return None

    def _record_step(self, params: list[torch.Tensor], optimizer_index: int) -> None:
        """Check AGF002's invariant for `params` at an update and keep the step's record."""
        grads: dict[int, torch.Tensor | None] = {}
        contributions: dict[int, torch.Tensor | None] = {}
        stale = False
        passes = max((self._passes.pop(id(param), 0) for param in params), default=0)
        for param in params:
            self._updated.add(id(param))
            grad = _snapshot(param.grad)
            contribution = self._pending.pop(id(param), None)
            grads[id(param)] = grad
            contributions[id(param)] = contribution
            problem = self._check_step(grad, contribution)
            if problem is not None and id(param) in self._since_any_step:
                # the grad holds exactly what backward added since another optimizer
                # stepped: what came before served that step and was zeroed, nothing stale
                if self._check_step(grad, self._since_any_step[id(param)]) is None:
                    problem = None
            if problem is not None:
                kind, detail = problem
                stale = stale or kind == "stale"
                self.violation_count += 1
                if len(self.violations) < MAX_VIOLATIONS:
                    self.violations.append({"step": self.step_count, "param": id(param), "kind": kind, "detail": detail})
        self.stale_steps += int(stale)
        if len(self.steps) < MAX_STORED_STEPS:
            self.steps.append(
                {"step": self.step_count, "optimizer": optimizer_index, "grads": grads, "contributions": contributions,
                 "losses": self._losses_since_step, "backward_passes": passes}
            )
        self._losses_since_step = []
        self.step_count += 1

    @staticmethod
    def _check_step(grad: torch.Tensor | None, contribution: torch.Tensor | None) -> tuple[str, str] | None:
        """The AGF002 invariant for one parameter at one step (None when it holds)."""
        nonzero = lambda t: t is not None and bool(t.abs().sum() > 0)  # noqa: E731
        if grad is None and contribution is None:
            return None
        if grad is None:
            return ("zeroed", "no gradient at step although backward contributed") if nonzero(contribution) else None
        if contribution is None:
            return ("stale", "gradient present at step but no backward since the previous step") if nonzero(grad) else None
        if grad.shape != contribution.shape:
            return "mismatch", f"shape {list(grad.shape)} vs contributions {list(contribution.shape)}"
        if torch.allclose(grad.double(), contribution.double(), rtol=CONTRIBUTION_RTOL, atol=CONTRIBUTION_ATOL):
            return None
        if _scaled_down(grad.double(), contribution.double()):
            return None  # clipped (clip_grad_norm_) or unscaled between backward and step: one factor < 1
        diff = float((grad.double() - contribution.double()).abs().max())
        if not nonzero(grad):
            return "zeroed", f"gradient zero at step, contributions since previous step differ by {diff:.3g}"
        kind = "stale" if float(grad.double().abs().sum()) > float(contribution.double().abs().sum()) else "mismatch"
        return kind, f"gradient differs from the sum of contributions since the previous step by {diff:.3g}"

    # -- end of run -----------------------------------------------------------------
    def finish(self, live_roots: list[torch.Tensor]) -> dict[str, Any]:
        """Measure what the finished run retains; call while its outputs are alive."""
        self._sample()
        duration = time.perf_counter() - self.started
        ctx_alive_no_gc = sum(1 for ref in self._ctx_refs if ref() is not None)
        self.uninstall()
        gc.collect()
        ctx_alive_after_gc = sum(1 for ref in self._ctx_refs if ref() is not None)
        storages: dict[tuple[str, int], int] = {}
        for ref, excluded in self._saved:
            tensor = ref()
            if tensor is None or excluded:
                continue
            try:
                storage = tensor.untyped_storage()
                storages[(str(tensor.device), storage.data_ptr())] = storage.nbytes()
            except (RuntimeError, NotImplementedError):
                continue
        measures: dict[str, Any] = {
            "retained_graph_bytes": int(sum(storages.values())),
            "retained_storages": len(storages),
            "peak_graph_bytes": int(self._graph_bytes.peak),
            "recorded_graph_bytes": int(self._recorded_bytes),
            "graph_nodes": graph_nodes_from(live_roots),
            "backward_passes": self.backward_count,
            "optimizer_steps": self.optimizer_steps,
            "manual_updates": self.manual_updates,
            "duration_s": round(duration, 4),
            # the shortest time between two optimizer steps (the run's set-up left out; the
            # minimum, as `timeit` reports, since other load only ever adds time)
            "time_per_step_s": (min(b - a for a, b in zip(self._step_clock, self._step_clock[1:]))
                                if len(self._step_clock) >= 2 else None),
            "ctx_created": len(self._ctx_refs),
            "ctx_alive_without_gc": ctx_alive_no_gc,
            "ctx_freed_only_by_gc": ctx_alive_no_gc - ctx_alive_after_gc,
        }
        if self.device.startswith("cuda") and torch.cuda.is_available():
            torch.cuda.synchronize()
            measures["peak_bytes"] = int(torch.cuda.max_memory_allocated())
            measures["peak_measure"] = "cuda max_memory_allocated"
        elif self._heap is not None:
            measures["peak_bytes"] = int(self._heap_peak - self._heap_base)
            measures["peak_measure"] = "cpu heap (mallinfo2) peak"
        else:
            measures["peak_bytes"] = None
            measures["peak_measure"] = "unavailable"
        return measures

    def named(self, mapping: dict[int, Any]) -> dict[str, Any]:
        return {self.name_of(key): value for key, value in mapping.items() if key in self._names}

    def leaf_state(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """(final .grad, final values, initial values) of every named leaf."""
        grads, values, initial = {}, {}, {}
        for key, tensor in self._keep.items():
            name = self.name_of(key)
            grads[name] = _snapshot(tensor.grad)
            values[name] = _snapshot(tensor)
            if key in self._initial:
                initial[name] = self._initial[key]
        return grads, values, initial

    def ever_grad(self) -> list[str]:
        """Leaves some backward pass gave a non-zero gradient (even if later cleared)."""
        return sorted(self.name_of(key) for key in self._ever_grad if key in self._names)

    def fresh_inputs(self) -> list[str]:
        """Leaves with a gradient that are inputs made afresh each iteration, not parameters
        (`G_ideas = torch.randn(..., requires_grad=True)` in a GAN's loop).

        Evidence, not names: no optimizer step or hand-written update ever touched the
        leaf, and it is one of a succession of such leaves (same shape and dtype) that
        replace each other, each receiving gradients only until the next appears. A
        parameter the optimizer forgot is one tensor that keeps receiving gradients
        across updates, so it never forms such a succession and stays checked."""
        groups: dict[tuple[Any, ...], list[int]] = {}
        for key, (first, _last) in self._grad_epochs.items():
            tensor = self._keep.get(key)
            if key in self._updated or tensor is None or key not in self._names:
                continue
            groups.setdefault((tuple(tensor.shape), tensor.dtype), []).append(key)
        fresh: list[str] = []
        for keys in groups.values():
            keys.sort(key=lambda k: self._grad_epochs[k])
            spans = [self._grad_epochs[k] for k in keys]
            successive = all(spans[i][1] < spans[i + 1][0] for i in range(len(spans) - 1))
            if len(keys) >= 2 and successive:
                fresh += [self.name_of(k) for k in keys]
        return sorted(fresh)

    def step_records(self) -> list[dict[str, Any]]:
        return [
            {
                "step": s["step"],
                "optimizer": s["optimizer"],
                "grads": self.named(s["grads"]),
                "contributions": self.named(s["contributions"]),
                "losses": s["losses"],
                "backward_passes": s["backward_passes"],
            }
            for s in self.steps
        ]

    def violation_records(self) -> list[dict[str, Any]]:
        return [{**v, "param": self.name_of(v["param"]) if v["param"] in self._names else "?"} for v in self.violations]
