"""What `doctor` observes inside the run child: hooks registered once, never per tensor op.

Everything here runs in the sandboxed run child, next to the user's code; what leaves it
(`Watch.record`) is plain numbers and strings, read back with ``weights_only``.

How each observation is made, and why this way:

* **Forward passes** (AGF001). An outermost call of an ``nn.Module`` that has parameters,
  with grad mode on, opens a *pass*, named by its call site (the innermost frame of a
  project file: the ``model(x)`` line). Every tensor autograd saves while the pass runs
  goes through ``saved_tensors_hooks``; the pack hook returns a small `_Saved` object
  owned by the pass. A backward through the pass unpacks some of them; when the last of
  them is freed (the graph died) and none was ever unpacked, no backward ever went
  through the pass: its graph was built for nothing (not for a forward that raised: its
  graph died with the error). The bytes counted are the unique
  storages the pass saved, parameters (leaves that require grad, and views of them)
  aside: they are saved by reference and live anyway.
* **Stale gradients** (AGF002). Each parameter gets one tensor hook (at its module's
  first forward, or at its optimizer's first step), which fires before autograd adds a
  gradient into ``.grad``: if ``.grad`` is then None or all zeros, what it will hold
  starts at this step. At an optimizer step (a global step pre-hook), a parameter whose
  ``.grad`` still holds gradients from before its previous step was never zeroed.
  Hand-written updates (no optimizer) are seen by their effect on the leaves (`manual`).
  A step is named in the innermost project function that also ran the last backward
  (`_step_site`: a container's ``step()`` loop is named where the training code calls it).
* **Unscaled accumulation** (AGF019): the same tensor hook says when a ``.grad`` starts
  afresh; each step's window of backward passes is judged by `accumulation`.
* **Graphs that outlive their iteration** (AGF006, AGF010). Before each backward, the
  nodes of its graph are tagged (``Node.metadata``) with the iteration (optimizer steps
  so far, and backward passes); the walk stops at nodes already tagged, so each node is
  visited once. Then a graph reaching nodes tagged by two earlier iterations is one that
  grows: held by a variable (the project frames' locals and the script's globals,
  scanned at each backward and at the end, with the attributes of modules and of the
  project's own objects) it is AGF006; fed into a forward as an input (a hidden state)
  it is AGF010, seen at that forward's call. Each backward's root is marked (`ROOT`): one
  tensor joining an earlier root to a newer forward has grown after one iteration. The
  scan also runs when a capped loop with working iterations ends (`loop_ended`: what a
  function holds after its last backward). Each outermost forward's outputs are marked
  with the pass that made them (`PRODUCER`): a held graph no backward went through counts
  the iterations of its passes; an old graph fed into a forward whose making pass has not
  run since is an output reused in its own iteration (`reused`), not a carried state.
* **Parameters without gradient flow** (AGF008): the tensor hook above also says which
  parameters ever received a non-zero gradient; a parameter of a module that ran under
  grad mode and that no backward reached is one whose graph was cut.
* **Unused retained graphs** (AGF011): a backward with ``retain_graph=True`` marks the
  saved tensors it unpacked; a later backward that unpacks one of them used the
  retained graph; a retaining backward none of whose tensors was unpacked again kept
  its graph for nothing.
* **Custom Functions** (AGF004): at the first graph-building ``apply`` of each
  ``autograd.Function`` defined in the project, its ``backward`` is checked against
  finite differences at that call's own inputs, in float64
  (`gradcheck.backward_vs_finite_differences`), with the run's RNG untouched and these
  probe calls invisible to every other observation.
* **Graph cuts** (AGF008's site): ``torch.tensor`` and ``Variable`` calls that copy
  graph-carrying data or re-make a leaf at one line (`cuts`).
* **Debug leftovers** (AGF017): backward passes run with anomaly detection on, per line
  that turned it on (``set_detect_anomaly``/``detect_anomaly`` are wrapped once), and
  calls of ``torch.cuda.empty_cache``, per call site.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
import torch.optim.optimizer as _optimizer_module
from torch import nn

from ..gradcheck import backward_vs_finite_differences
from ..probes import Probes, iter_tensors
from .accumulation import AccumulationWatch
from .cuts import GraphCuts
from .manual import HandUpdates

#: the key of the iteration tag in an autograd node's ``metadata``
TAG = "autograd_fix_doctor"
#: the key that marks the root node of a backward pass (a loss that was backpropagated)
ROOT = "autograd_fix_doctor_root"
#: the key of the pass that made a node (an outermost forward's output): (site, the
#: site's pass number, optimizer steps, backward passes), read when an old graph comes back
PRODUCER = "autograd_fix_doctor_producer"
#: nodes walked per holder or per forward input, at most (a huge graph is not walked whole)
WALK_LIMIT = 20000
#: items of one container looked at when scanning for holders (the newest: a list grows at its end)
SCAN_ITEMS = 64
#: a site keeps at most this many per-pass byte counts as evidence
KEPT_PASSES = 16
#: points of the per-iteration series kept (one per backward pass), at most
MAX_POINTS = 400

#: the node that accumulates into a leaf: shared by the graphs of every iteration
_LEAF_NODE = "AccumulateGrad"

Site = tuple[str, int]  # (file as the child sees it, line)


class _Pass:
    """One outermost forward pass under grad mode: its saved tensors and their fate."""

    __slots__ = ("site", "caller", "alive", "unpacked", "nbytes", "storages", "ended", "settled", "index")

    def __init__(self, site: Site, caller: Site | None = None, index: int = 0) -> None:
        self.site = site
        #: the site's pass number (its `_SiteStats.passes` when this pass opened)
        self.index = index
        #: the next project frame up (a helper that returns the model's output is
        #: judged by its callers: `findings._unused_graphs`)
        self.caller = caller
        self.alive = 0
        self.unpacked = False
        self.nbytes = 0
        self.storages: set[tuple[str, int]] = set()
        self.ended = False
        self.settled = False


class _Saved:
    """What the pack hook returns: the saved tensor (detached: no reference cycle), its
    version, and who saved it; its death is the graph's (or a backward's) freeing it."""

    __slots__ = ("tensor", "version", "owner", "retained_by", "watch", "key")

    def __init__(self, tensor: torch.Tensor, version: int, owner: _Pass | None, watch: "Watch") -> None:
        self.tensor, self.version, self.owner, self.watch = tensor, version, owner, watch
        self.retained_by = -1
        self.key: tuple[str, int] | None = None

    def __del__(self) -> None:
        try:
            if self.owner is not None:
                self.watch._pass_lost_one(self.owner)
            if self.key is not None:
                self.watch._saved_lost(self.key)
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


@dataclass
class _SiteStats:
    passes: int = 0
    unused: int = 0
    held: int = 0
    unused_bytes: list[int] = field(default_factory=list)
    #: caller site -> [passes, passes whose graph no backward used]
    callers: dict[Site, list[int]] = field(default_factory=dict)
    #: the site is in a method of a module (the model's own `infer`)
    module_method: bool = False


@dataclass
class _Retain:
    site: Site
    unpacked: int = 0
    reused: bool = False


class Watch:
    """The doctor's hooks in one run; `install` before the user's code, `record` after.

    `owns(filename)` says whether a file is the project's (its frames name call sites)."""

    def __init__(self, owns: Callable[[str], bool], *, check_functions: bool = True, focus: bool = False) -> None:
        self.owns = owns
        #: a focused re-run: every saved storage is counted, so that in-place writes to
        #: one can be seen (`holds_saved`)
        self.focus = focus
        #: storages of saved tensors still held (how many saved tensors share each)
        self._live_saved: dict[tuple[str, int], int] = {}
        #: bytes of those storages, parameters aside (they live anyway)
        self._live_bytes: dict[tuple[str, int], int] = {}
        self.saved_bytes = 0
        self._peak_bytes = 0
        #: one point per backward pass (and one at the end): the picture's data
        self.series: list[dict[str, int]] = []
        self._held_nodes = 0
        self.check_functions = check_functions
        self.started = 0.0
        self._quiet = False
        self._depth = 0
        self._current: _Pass | None = None
        self._open: list[_Pass] = []  # passes whose saved tensors may still be alive
        self.sites: dict[Site, _SiteStats] = {}
        # gradients per parameter (keys: id of the parameter, kept alive by _params)
        self._params: dict[int, nn.Parameter] = {}
        self._earliest: dict[int, int] = {}
        self._steps_of: dict[int, int] = {}
        #: the optimizer step (`steps_total` before it) that last updated each parameter
        self._stepped_at: dict[int, int] = {}
        self._nonzero: set[int] = set()
        self._param_names: dict[int, str] = {}
        self._in_modules: set[int] = set()  # parameters named from a model's own hierarchy
        self._param_module: dict[int, int] = {}
        self._module_sites: dict[int, Site | None] = {}
        self._module_grad: set[int] = set()
        self._module_names: dict[int, str] = {}
        self._class_count: dict[str, int] = {}
        self._optimizers: dict[int, int] = {}
        self._optimizer_params: dict[int, list[int]] = {}
        self._optimizer_steps: dict[int, int] = {}
        self._step_sites: dict[int, Site | None] = {}
        self._optimizer_names: dict[int, str] = {}
        #: parameters whose .grad holds gradients from before their last step and newer
        #: ones (judged at their next step, or at the end when the run stops before it)
        self._spanning: set[int] = set()
        #: parameters seen spanning a step and then zeroed before the next one (a GAN's
        #: discriminator, given gradients by the generator's loss after its own step)
        self._zeroed_spanning: set[int] = set()
        self.stale: list[dict[str, Any]] = []
        self.first_step_site: Site | None = None
        self.steps_total = 0
        self.backward_count = 0
        self.completed_backwards = 0  # those that did not raise
        self._backward_now = -1
        self._retaining_now = False
        self._retains: list[_Retain] = []
        self.holders: dict[tuple[str, str, int, str], dict[str, Any]] = {}
        self.recurrent: dict[Site, dict[str, Any]] = {}
        #: forwards fed an output of their own iteration whose graph a backward went through
        self.reused: dict[Site, dict[str, Any]] = {}
        self._flagged: tuple[int, int] | None = None  # the iteration whose old graph was reported
        self.functions: dict[str, dict[str, Any]] = {}
        #: (backward site, where anomaly mode was turned on) -> backward passes under it
        self.anomaly: dict[tuple[Site, Site | None], int] = {}
        self._anomaly_on: Site | None = None
        #: empty_cache() call site -> calls made at most one backward after the previous
        self.empty_cache: dict[Site, int] = {}
        self._cache_last: dict[Site, int] = {}
        #: backward sites whose root was a leaf made to require grad (no parameter reached)
        self.leaf_roots: dict[Site, int] = {}
        #: (frame id, code id) of the project frames that ran the last backward
        self._backward_frames: set[tuple[int, int]] = set()
        #: accumulation windows (AGF019) and the backward count at each optimizer's last step
        self.accumulation = AccumulationWatch()
        self._last_step_backward: dict[int, int] = {}
        self._undo: list[Callable[[], None]] = []
        self.cuts = GraphCuts(self._site, lambda: self._quiet)
        self.hand = HandUpdates()
        self.namespace: dict[str, Any] | None = None

    # -- where ---------------------------------------------------------------------
    def _site(self, skip: int = 2) -> Site | None:
        """The innermost frame of a project file on the stack (a call site)."""
        frame = sys._getframe(skip)
        while frame is not None:
            name = frame.f_code.co_filename
            if self.owns(name):
                return name, frame.f_lineno
            frame = frame.f_back
        return None

    def _project_frames(self, skip: int) -> list[Any]:
        frames = []
        frame = sys._getframe(skip)
        while frame is not None:
            if self.owns(frame.f_code.co_filename):
                frames.append(frame)
            frame = frame.f_back
        return frames

    def _step_site(self) -> Site | None:
        """Where a step is reported: its line in the innermost project function that also
        ran the last backward (itself or through its callees), so a step made by a helper
        (``self.optimizers.step()`` over a container of optimizers) is named where the
        training code calls it, beside its backward; the innermost frame otherwise."""
        frames = self._project_frames(3)
        for frame in frames:
            if (id(frame), id(frame.f_code)) in self._backward_frames:
                return frame.f_code.co_filename, frame.f_lineno
        return (frames[0].f_code.co_filename, frames[0].f_lineno) if frames else None

    def _site_and_caller(self, skip: int = 2) -> tuple[Site | None, Site | None, bool]:
        """The innermost project frame on the stack, the next project frame above it, and
        whether the innermost is a method of a module (the model's own ``infer``)."""
        found: list[Site] = []
        in_module = False
        frame = sys._getframe(skip)
        while frame is not None and len(found) < 2:
            name = frame.f_code.co_filename
            if self.owns(name):
                if not found:
                    in_module = "self" in frame.f_code.co_varnames[:1] and isinstance(frame.f_locals.get("self"), nn.Module)
                found.append((name, frame.f_lineno))
            frame = frame.f_back
        return (found[0] if found else None), (found[1] if len(found) > 1 else None), in_module

    # -- install -------------------------------------------------------------------
    def install(self) -> "Watch":
        self.started = time.perf_counter()
        hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        hooks.__enter__()
        self._undo.append(lambda: hooks.__exit__(None, None, None))
        for handle in (
            nn.modules.module.register_module_forward_pre_hook(self._on_forward),
            nn.modules.module.register_module_forward_hook(self._on_forward_done, always_call=True),
            _optimizer_module.register_optimizer_step_pre_hook(self._on_step),
        ):
            self._undo.append(handle.remove)
        original_backward, original_grad = torch.autograd.backward, torch.autograd.grad

        def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
            retain = kwargs.get("retain_graph")
            if retain is None and len(args) >= 2:
                retain = args[1]
            return self._around_backward(original_backward, tensors, bool(retain), args, kwargs)

        def grad(outputs: Any, *args: Any, **kwargs: Any) -> Any:
            retain = kwargs.get("retain_graph")
            if retain is None and len(args) >= 3:
                retain = args[2]
            if retain is None:
                retain = kwargs.get("create_graph", False)
            return self._around_backward(original_grad, outputs, bool(retain), args, kwargs)

        torch.autograd.backward, torch.autograd.grad = backward, grad
        self._undo.append(lambda: setattr(torch.autograd, "backward", original_backward))
        self._undo.append(lambda: setattr(torch.autograd, "grad", original_grad))
        raw_apply = torch.autograd.Function.__dict__["apply"]
        watch = self

        def apply(cls: type, *args: Any, **kwargs: Any) -> Any:
            out = raw_apply.__func__(cls, *args, **kwargs)
            if watch.check_functions and not watch._quiet:
                watch._on_apply(cls, args, out)
            return out

        torch.autograd.Function.apply = classmethod(apply)
        self._undo.append(lambda: setattr(torch.autograd.Function, "apply", raw_apply))
        original_empty = torch.cuda.empty_cache

        def empty_cache() -> None:
            site = self._site()
            if site is not None:
                # a call counts when at most one backward ran since this line's previous
                # call (every step); a call per epoch, after many steps, does not
                last = self._cache_last.get(site)
                self._cache_last[site] = self.backward_count
                if last is None or self.backward_count - last <= 1:
                    self.empty_cache[site] = self.empty_cache.get(site, 0) + 1
            original_empty()

        torch.cuda.empty_cache = empty_cache
        self._undo.append(lambda: setattr(torch.cuda, "empty_cache", original_empty))
        self._undo.extend(self._watch_anomaly_switches())
        self._undo.extend(self.cuts.install())
        return self

    def _watch_anomaly_switches(self) -> list[Callable[[], None]]:
        """Remember where anomaly mode was last turned on (``set_detect_anomaly(True)``,
        ``with detect_anomaly()``): a backward run under it is that line's finding."""
        from torch.autograd import anomaly_mode

        setter, context = anomaly_mode.set_detect_anomaly, anomaly_mode.detect_anomaly
        set_init, enter = setter.__init__, context.__enter__
        watch = self

        def switched(this: Any, mode: bool, *args: Any, **kwargs: Any) -> None:
            if mode and not watch._quiet:
                watch._anomaly_on = watch._site()
            set_init(this, mode, *args, **kwargs)

        def entered(this: Any) -> Any:
            if not watch._quiet:
                watch._anomaly_on = watch._site()
            return enter(this)

        setter.__init__, context.__enter__ = switched, entered
        return [lambda: setattr(setter, "__init__", set_init), lambda: setattr(context, "__enter__", enter)]

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    # -- saved tensors ---------------------------------------------------------------
    def _pack(self, tensor: torch.Tensor) -> Any:
        detached = tensor.detach()
        if self._quiet:
            return detached, tensor._version
        owner = self._current if self._depth > 0 else None
        if owner is not None:
            base = tensor._base if tensor._is_view() else tensor
            if not (base.is_leaf and base.requires_grad):
                try:
                    storage = detached.untyped_storage()
                    key = (str(detached.device), storage.data_ptr())
                    if key not in owner.storages:
                        owner.storages.add(key)
                        owner.nbytes += storage.nbytes()
                except (RuntimeError, NotImplementedError):
                    pass
            owner.alive += 1
        saved = _Saved(detached, tensor._version, owner, self)
        key = _storage_key(detached)
        if key is not None:
            saved.key = key
            count = self._live_saved.get(key, 0)
            self._live_saved[key] = count + 1
            if count == 0:
                base = tensor._base if tensor._is_view() else tensor
                if not (base.is_leaf and base.requires_grad):  # parameters live anyway
                    nbytes = detached.untyped_storage().nbytes()
                    self._live_bytes[key] = nbytes
                    self.saved_bytes += nbytes
                    self._peak_bytes = max(self._peak_bytes, self.saved_bytes)
        return saved

    def _saved_lost(self, key: tuple[str, int]) -> None:
        count = self._live_saved.get(key, 0) - 1
        if count <= 0:
            self._live_saved.pop(key, None)
            self.saved_bytes -= self._live_bytes.pop(key, 0)
        else:
            self._live_saved[key] = count

    def holds_saved(self, tensor: torch.Tensor) -> bool:
        """Whether `tensor` shares storage with a saved tensor still held."""
        key = _storage_key(tensor)
        return key is not None and key in self._live_saved

    def site_here(self) -> Site | None:
        """The innermost project frame of the caller's stack."""
        return self._site(2)

    def _unpack(self, packed: Any) -> torch.Tensor:
        if isinstance(packed, tuple):  # saved while quiet (a probe's own forward)
            return Probes._unpack(packed)
        if packed.owner is not None:
            packed.owner.unpacked = True
        now = self._backward_now
        if packed.retained_by >= 0 and packed.retained_by != now and now >= 0:
            self._retains[packed.retained_by].reused = True
        if self._retaining_now and now >= 0 and packed.retained_by != now:
            packed.retained_by = now
            self._retains[now].unpacked += 1
        return Probes._unpack((packed.tensor, packed.version))

    def _pass_lost_one(self, owner: _Pass) -> None:
        owner.alive -= 1
        if owner.alive <= 0 and owner.ended and not owner.settled:
            owner.settled = True
            stats = self.sites.setdefault(owner.site, _SiteStats())
            if not owner.unpacked:
                stats.unused += 1
                if owner.caller is not None:
                    stats.callers.setdefault(owner.caller, [0, 0])[1] += 1
                if len(stats.unused_bytes) < KEPT_PASSES:
                    stats.unused_bytes.append(owner.nbytes)

    # -- forwards --------------------------------------------------------------------
    def _name_module(self, module: nn.Module) -> None:
        """Names for the parameters of a module seen for the first time (``Net.fc.weight``)."""
        cls = type(module).__name__
        index = self._class_count.get(cls, 0)
        self._class_count[cls] = index + 1
        prefix = cls if index == 0 else f"{cls}#{index}"
        for name, sub in module.named_modules():
            self._module_names.setdefault(id(sub), f"{prefix}.{name}" if name else prefix)
        for name, param in module.named_parameters():
            self._in_modules.add(id(param))
            self._hook_param(param, f"{prefix}.{name}")

    def _hook_param(self, param: torch.Tensor, name: str) -> None:
        key = id(param)
        if key in self._params or not param.requires_grad:
            return
        self._params[key] = param
        self._param_names[key] = name
        param.register_hook(lambda grad, key=key: self._on_grad(key, grad))

    def _on_grad(self, key: int, grad: torch.Tensor) -> None:
        if self._quiet:
            return
        param = self._params[key]
        current = param.grad
        if current is None or key not in self._earliest or not bool(current.any()):
            if key in self._spanning:  # gradients added after a step, then zeroed before the next
                self._spanning.discard(key)
                self._zeroed_spanning.add(key)
            self._earliest[key] = self._steps_of.get(key, 0)
            self.accumulation.grad_started(key, self.backward_count)
        elif self._earliest[key] < self._steps_of.get(key, 0):
            self._spanning.add(key)  # added on top of gradients an earlier step already used
        if key not in self._nonzero and grad is not None and bool(grad.any()):
            self._nonzero.add(key)

    def _on_forward(self, module: nn.Module, args: Any) -> None:
        if self._quiet:
            return
        key = id(module)
        if key not in self._module_sites:
            self._module_sites[key] = self._site()
            for name, param in module.named_parameters(recurse=False):
                self._param_module.setdefault(id(param), key)
        if torch.is_grad_enabled():
            self._module_grad.add(key)
        if self._depth == 0:
            if key not in self._module_names:
                self._name_module(module)
            if torch.is_grad_enabled() and self._module_names.get(key) and any(True for _ in module.parameters()):
                site, caller, in_module = self._site_and_caller(3)
                if site is not None:
                    stats = self.sites.setdefault(site, _SiteStats())
                    stats.passes += 1
                    self._current = _Pass(site, caller, stats.passes)
                    self._open.append(self._current)
                    if len(self._open) % 256 == 0:
                        self._open = [p for p in self._open if not p.settled]
                    stats.module_method = stats.module_method or in_module
                    if caller is not None:
                        stats.callers.setdefault(caller, [0, 0])[0] += 1
                    self._check_inputs(site, args)
        self._depth += 1

    def _on_forward_done(self, module: nn.Module, args: Any, output: Any) -> None:
        if self._quiet:
            return
        self._depth = max(0, self._depth - 1)
        if self._depth == 0 and self._current is not None:
            current = self._current
            current.ended = True
            if output is None and sys.exc_info()[1] is not None:
                # the forward raised (this hook is always called): its graph died with the
                # error (the run's memory limit, a shape error), not for want of a backward;
                # it is no pass at all (an evaluation's passes are still all wasted)
                current.settled = True
                stats = self.sites[current.site]
                stats.passes -= 1
                if current.caller is not None:
                    stats.callers[current.caller][0] -= 1
                self._current = None
                return
            made = (current.site, current.index, self.steps_total, self.backward_count)
            for tensor in iter_tensors(output):
                if isinstance(tensor, torch.Tensor) and tensor.grad_fn is not None:
                    tensor.grad_fn.metadata.setdefault(PRODUCER, made)
            if current.alive <= 0 and not current.settled:
                # saved nothing, or its graph died inside the forward (cut there: the
                # parameters' own finding, not a graph built for nothing)
                current.settled = True
            self._current = None

    def _check_inputs(self, site: Site, args: Any) -> None:
        """A forward input whose graph reaches nodes of earlier iterations (AGF010)."""
        roots = [t for t in iter_tensors(args) if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        if not roots:
            return
        now = (self.steps_total, self.backward_count)
        if self._flagged == now:
            return  # an earlier forward of this iteration let the old graph in: reported there
        reached = [(node, tuple(found)) for node, found in _untagged_walk(roots) if found is not None]
        tags = {tag for _, tag in reached}
        if tags:  # every tagged node is one an earlier backward went through
            self._flagged = now
            made = [node.metadata.get(PRODUCER) for node, _ in reached]
            if made and all(m is not None and self.sites[m[0]].passes == m[1] for m in made):
                # the pass that made it has not run again: not a state carried across
                # iterations but an output reused in its own iteration after a backward
                self._reused(site, roots, made, min(tag[0] for tag in tags))
                return
            entry = self.recurrent.setdefault(site, {"forwards": 0, "steps_behind": 0, "backwards_behind": 0})
            entry["forwards"] += 1
            entry["steps_behind"] = max(entry["steps_behind"], max(self.steps_total - tag[0] for tag in tags))
            entry["backwards_behind"] = max(entry["backwards_behind"], max(self.backward_count - tag[1] for tag in tags))

    def _reused(self, site: Site, roots: list[torch.Tensor], made: list[Any], backward_step: int) -> None:
        """An output fed again into a forward, in the iteration that made it, after a
        backward went through its graph: whether an optimizer step has since updated,
        in place, a parameter that graph reaches (`_stepped_at`)."""
        updated = sum(1 for leaf in _leaves(roots) if self._stepped_at.get(id(leaf), -1) >= backward_step)
        entry = self.reused.setdefault(site, {"forwards": 0, "updated": 0, "made_at": sorted({tuple(m[0]) for m in made})[0]})
        entry["forwards"] += 1
        entry["updated"] = max(entry["updated"], updated)

    # -- backward --------------------------------------------------------------------
    def _around_backward(self, original: Callable[..., Any], roots: Any, retain: bool, args: tuple, kwargs: dict) -> Any:
        if self._quiet:
            return original(roots, *args, **kwargs)
        tensors = [roots] if isinstance(roots, torch.Tensor) else [t for t in (roots or ()) if isinstance(t, torch.Tensor)]
        self._scan_holders()
        self._sample()
        site = self._site()
        self._backward_frames = {(id(f), id(f.f_code)) for f in self._project_frames(2)}
        if not self.steps_total:
            self.hand.check(site, self._leaf_names)
        if site is not None and any(t.grad_fn is None and t.requires_grad and id(t) not in self._params for t in tensors):
            self.leaf_roots[site] = self.leaf_roots.get(site, 0) + 1  # `loss.requires_grad = True` on a cut loss
        self._tag(tensors)
        if torch.is_anomaly_enabled() and site is not None:
            key = (site, self._anomaly_on)
            self.anomaly[key] = self.anomaly.get(key, 0) + 1
        self.accumulation.before_backward(self.backward_count, site, tensors)
        index = len(self._retains)
        self._retains.append(_Retain(site) if site is not None else _Retain(("", 0)))
        saved = self._backward_now, self._retaining_now
        self._backward_now, self._retaining_now = index, retain
        try:
            result = original(roots, *args, **kwargs)
            self.completed_backwards += 1
            self.accumulation.after_backward(self._params)
            return result
        finally:
            self._backward_now, self._retaining_now = saved
            self.backward_count += 1
            if not retain:
                self._retains[index].site = ("", 0)  # only retaining passes are judged

    def _tag(self, roots: list[torch.Tensor]) -> None:
        """Tag the nodes of this backward's graph with the iteration (new nodes only)."""
        tag = (self.steps_total, self.backward_count)
        leaves: list[torch.Tensor] | None = [] if not self.steps_total else None
        for node, found in _untagged_walk(roots, leaves):
            if found is None:
                node.metadata[TAG] = tag
        for root in roots:
            if root.grad_fn is not None:
                root.grad_fn.metadata[ROOT] = True
        for leaf in leaves or ():
            self.hand.see(leaf)

    def _leaf_names(self) -> dict[int, str]:
        """Names of leaves: the script's globals and the project frames' locals that hold
        them, else the parameter names known."""
        names = dict(self._param_names)
        scopes = [variables for *_, variables in self._frames()]
        if self.namespace is not None:
            scopes.append(self.namespace)
        for variables in scopes:
            for name, value in list(variables.items()):
                if isinstance(value, torch.Tensor) and value.is_leaf and value.requires_grad:
                    names[id(value)] = name
        return names

    # -- holders ---------------------------------------------------------------------
    def _frames(self) -> Iterator[tuple[str, str, int, dict[str, Any]]]:
        frame = sys._getframe(2)
        while frame is not None:
            code = frame.f_code
            if self.owns(code.co_filename):
                yield code.co_filename, code.co_name, code.co_firstlineno, frame.f_locals
            frame = frame.f_back

    def loop_ended(self) -> None:
        """A training loop ended (`bounded.Bounds.loop_done`): what its function's locals
        hold now, after its last backward (an epoch's sum returned, a list appended to
        after the last epoch's backward), is seen before the frame goes."""
        if not self._quiet:
            self._scan_holders()

    def _scan_holders(self, at_end: bool = False) -> None:
        """Variables whose graphs reach nodes of two or more earlier iterations."""
        scopes = list(self._frames()) if not at_end else []
        if self.namespace is not None:
            scopes.append((str(self.namespace.get("__file__")), "<module>", 1, self.namespace))
        reachable: list[torch.Tensor] = []
        for filename, function, first_line, variables in scopes:
            for name, value in list(variables.items()):
                if name.startswith("__") or isinstance(value, (type, type(sys), Callable)) and not isinstance(value, nn.Module):
                    continue
                for label, tensors, kind in _held(name, value, self.owns):
                    if not tensors:
                        continue
                    reachable.extend(tensors)
                    tags, extended = _holder_tags(tensors)
                    if extended:  # a backpropagated loss added to since: the current iteration's graph is held too
                        tags.add((self.steps_total, self.backward_count))
                    # two iterations in this one scan, counted as `held.holders` counts them
                    # (optimizer steps once there are any): the tags of scans in different
                    # calls are merged below, and a list of one step's losses, backpropagated
                    # one by one (pcgrad), seen at the end of that loop, holds one iteration
                    if len({tag[0] if self.steps_total else tag[1] for tag in tags}) < 2:
                        continue
                    key = (filename, function, first_line, label)
                    entry = self.holders.setdefault(key, {"tags": [], "nodes": 0, "kind": kind})
                    entry["tags"] = sorted({*map(tuple, entry["tags"]), *tags})[-16:]
                    entry["nodes"] = max(entry["nodes"], _count_nodes(tensors))
        self._held_nodes = _count_nodes(reachable)

    def _sample(self, end: bool = False) -> None:
        """One point of the picture: saved-tensor bytes held now and at most since the
        last point, and the autograd nodes the project's variables reach (as scanned)."""
        if len(self.series) < MAX_POINTS or end:
            self.series.append({"backward": self.backward_count, "step": self.steps_total, "saved_bytes": self.saved_bytes,
                                "peak_bytes": self._peak_bytes, "nodes": self._held_nodes, "end": int(end)})
        self._peak_bytes = self.saved_bytes

    # -- optimizer steps -------------------------------------------------------------
    def _on_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if self._quiet:
            return
        self.hand.stop()
        index = self._optimizers.setdefault(id(optimizer), len(self._optimizers))
        self._optimizer_names[index] = type(optimizer).__name__
        step = self._optimizer_steps[index] = self._optimizer_steps.get(index, 0) + 1
        stale = []
        total = 0
        for group in optimizer.param_groups:
            for param in group["params"]:
                key = id(param)
                if key not in self._params:
                    self._hook_param(param, f"{type(optimizer).__name__}#{index}.p{len(self._param_names)}")
                self._optimizer_params.setdefault(index, [])
                if key not in self._optimizer_params[index]:
                    self._optimizer_params[index].append(key)
                taken = self._steps_of.get(key, 0)
                grad = param.grad
                if grad is not None:
                    total += 1
                    earliest = self._earliest.get(key, taken)
                    if earliest < taken and bool(grad.any()):
                        stale.append((key, taken - earliest + 1))
                self._steps_of[key] = taken + 1
                self._stepped_at[key] = self.steps_total
                self._spanning.discard(key)
        here = self._step_site()
        self._step_sites[index] = here
        self.accumulation.step(f"{type(optimizer).__name__}#{index}",
                               ((key, self._params[key]) for key in self._optimizer_params.get(index, ()) if key in self._params),
                               self.backward_count, self._last_step_backward.get(index, 0))
        self._last_step_backward[index] = self.backward_count
        self.steps_total += 1
        if self.first_step_site is None:
            self.first_step_site = self._site()
        if stale:
            self.stale.append({
                "optimizer": f"{type(optimizer).__name__}#{index}",
                "step": step,
                "site": here,
                "params": len(stale),
                "of": total,
                "steps_mixed": max(n for _, n in stale),
                "names": [self._param_names.get(key, "?") for key, _ in stale[:4]],
            })

    def _misspelled(self) -> list[int]:
        """Parameters whose ``require_grad`` attribute (a typo: it does nothing) says the
        opposite of their ``requires_grad``: the freeze or unfreeze it meant never
        happened. The parameters seen in the run and those of the script's modules."""
        params = dict(self._params)
        for value in list((self.namespace or {}).values()):
            if isinstance(value, nn.Module):
                for name, param in value.named_parameters():
                    if id(param) not in params:
                        params[id(param)] = param
                        self._param_names.setdefault(id(param), f"{type(value).__name__}.{name}")
        found = []
        for key, param in params.items():
            meant = getattr(param, "__dict__", {}).get("require_grad")
            if meant is not None and bool(meant) != param.requires_grad:
                found.append(key)
        return found

    def _stale_at_end(self) -> None:
        """The run stopped (a bounded loop cut, say, between two steps of gradient
        accumulation) while parameters' ``.grad`` held gradients a step had already used
        plus newer ones: the next step would have used them stale, unless the run showed
        those parameters zeroed after such gradients in an earlier iteration. Reported at
        each such optimizer's last step."""
        for index, keys in self._optimizer_params.items():
            # a parameter the run already saw zeroed after such gradients is zeroed at its
            # next iteration's start, which the stop cut off
            spanning = [key for key in keys if key in self._spanning and key not in self._zeroed_spanning
                        and self._params[key].grad is not None]
            if not spanning:
                continue
            mixed = max(self._steps_of.get(key, 0) - self._earliest.get(key, 0) + 1 for key in spanning)
            self.stale.append({
                "optimizer": f"{self._optimizer_names.get(index, 'optimizer')}#{index}",
                "step": self._optimizer_steps.get(index, 0) + 1, "site": self._step_sites.get(index), "params": len(spanning),
                "of": len(keys), "steps_mixed": mixed, "names": [self._param_names.get(key, "?") for key in spanning[:4]],
                "at_end": True,
            })

    # -- custom Functions --------------------------------------------------------------
    def _on_apply(self, cls: type, args: tuple[Any, ...], out: Any) -> None:
        backward = getattr(cls, "backward", None)
        code = getattr(backward, "__code__", None)
        name = f"{cls.__module__}.{cls.__qualname__}"
        if code is None or name in self.functions or not self.owns(code.co_filename):
            return
        if not any(t.grad_fn is not None for t in iter_tensors(out)):
            return
        self._quiet = True
        try:
            report = backward_vs_finite_differences(cls, args, seed=len(self.functions))
        finally:
            self._quiet = False
        self.functions[name] = {
            "class": cls.__qualname__,
            "file": code.co_filename,
            "backward_line": code.co_firstlineno,
            "site": self._site(3),
            "positions": {int(k): dict(v) for k, v in (report.get("positions") or {}).items()},
            "error": report.get("error"),
            "inputs": len(args),  # forward's inputs: backward returns one gradient each
        }

    # -- the end -----------------------------------------------------------------------
    def record(self, finished: bool) -> dict[str, Any]:
        """What the run showed, as plain data. `finished`: the code ran to its end (a
        graph still held then, never backwarded, counts as unused; after a crash it is
        the traceback's)."""
        duration = time.perf_counter() - self.started
        if finished:
            self._scan_holders(at_end=True)
        if not self.steps_total:
            self.hand.check(None, self._leaf_names)
        self._stale_at_end()
        self._sample(end=True)
        self.uninstall()
        for held in self._open:
            if finished and held.ended and not held.settled and not held.unpacked and held.alive > 0:
                self.sites[held.site].held += 1
                if len(self.sites[held.site].unused_bytes) < KEPT_PASSES:
                    self.sites[held.site].unused_bytes.append(held.nbytes)
                if held.caller is not None:
                    self.sites[held.site].callers.setdefault(held.caller, [0, 0])[1] += 1
        sites = []
        for (filename, line), stats in self.sites.items():
            sites.append({"file": filename, "line": line, "passes": stats.passes, "unused": stats.unused,
                          "held": stats.held, "unused_bytes": list(stats.unused_bytes),
                          "module_method": stats.module_method,
                          "callers": [{"file": k[0], "line": k[1], "passes": v[0], "unused": v[1]} for k, v in stats.callers.items()]})
        retains: dict[Site, dict[str, int]] = {}
        for retain in self._retains:
            if retain.site == ("", 0):
                continue
            entry = retains.setdefault(retain.site, {"passes": 0, "reused": 0, "saved": 0})
            entry["passes"] += 1
            entry["reused"] += int(retain.reused)
            entry["saved"] += retain.unpacked
        silent = []
        trained = {index for index, keys in self._optimizer_params.items() if any(key in self._nonzero for key in keys)}
        in_trained = {key for index in trained for key in self._optimizer_params[index]}
        for key, param in self._params.items():
            module = self._param_module.get(key)
            if key in self._nonzero:
                continue
            ran = module is not None and module in self._module_grad
            if not ran and not (module is None and key not in self._in_modules and key in in_trained):
                continue
            silent.append({"name": self._param_names.get(key, "?"), "module": self._module_names.get(module, "?"),
                           "site": self._module_sites.get(module), "numel": int(param.numel()),
                           "grad": "zeros" if param.grad is not None else "none"})
        misspelled = self._misspelled()
        return {
            "misspelled": {"params": len(misspelled), "trained": sum(key in self._nonzero for key in misspelled),
                           "names": [self._param_names.get(key, "?") for key in misspelled[:4]]} if misspelled else None,
            "duration_s": round(duration, 4),
            "backward_passes": self.backward_count,
            "optimizer_steps": self.steps_total,
            "sites": sites,
            "stale": self.stale + self.hand.stale,
            "first_step_site": self.first_step_site,
            "holders": [{"file": k[0], "function": k[1], "first_line": k[2], "name": k[3], **v} for k, v in self.holders.items()],
            "recurrent": [{"file": k[0], "line": k[1], **v} for k, v in self.recurrent.items()],
            "reused": [{"file": k[0], "line": k[1], **v} for k, v in self.reused.items()],
            "silent_params": silent if self.completed_backwards else [],
            "retains": [{"file": k[0], "line": k[1], **v} for k, v in retains.items()],
            "functions": list(self.functions.values()),
            "anomaly": [{"file": k[0][0], "line": k[0][1], "passes": v, "on": list(k[1]) if k[1] else None}
                        for k, v in self.anomaly.items()],
            "empty_cache": [{"file": k[0], "line": k[1], "calls": v} for k, v in self.empty_cache.items()],
            "cuts": self.cuts.record(),
            "series": self.series,
            "leaf_roots": [{"file": k[0], "line": k[1], "calls": v} for k, v in self.leaf_roots.items()],
            "accumulation": self.accumulation.record(),
        }


def _storage_key(tensor: torch.Tensor) -> tuple[str, int] | None:
    try:
        return str(tensor.device), tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None


def _held(name: str, value: Any, owns: Callable[[str], bool]) -> list[tuple[str, list[torch.Tensor], str]]:
    """(label, tensors with a graph, kind) of one variable: itself (``variable``), or the
    tensors kept as plain attributes by a module (``module``: ``self.hidden``) or by an
    object of a class the project defines (``object``: a tracker's ``self.train_losses``
    dict)."""
    if isinstance(value, nn.Module):
        kind = "module"
    elif _project_object(value, owns):
        kind = "object"
    else:
        return [(name, _graph_tensors(value), "variable")]
    found = []
    for attr, item in list(vars(value).items())[:SCAN_ITEMS]:
        if attr.startswith("_"):
            continue
        tensors = _graph_tensors(item)
        if tensors:
            found.append((f"{name}.{attr}", tensors, kind))
    return found


def _project_object(value: Any, owns: Callable[[str], bool]) -> bool:
    """An instance (not a class, function or tensor) whose class has a method defined
    in a project file."""
    if isinstance(value, (type, torch.Tensor)) or callable(value) or not hasattr(value, "__dict__"):
        return False
    for item in vars(type(value)).values():
        code = getattr(item, "__code__", None)
        if code is not None:
            return owns(code.co_filename)
    return False


def _graph_tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value] if value.grad_fn is not None else []
    if isinstance(value, (list, tuple)):
        value = list(value)[-SCAN_ITEMS:]
    elif isinstance(value, dict):
        value = list(value.values())[-SCAN_ITEMS:]
    else:
        return []
    return [t for t in iter_tensors(value) if t.grad_fn is not None]


def _holder_tags(roots: list[torch.Tensor]) -> tuple[set[tuple[int, int]], bool]:
    """The iteration tags a held graph reaches (for a graph no backward went through,
    those of the passes that made it), and whether it joins an earlier
    backward's root to a forward made since (``total += loss`` with last iteration's
    loss in ``total``: new nodes that reach parameters; a variable that keeps the last
    loss, or arithmetic on it, reaches no parameter through new nodes: it does not grow)."""
    tags: set[tuple[int, int]] = set()
    made: set[tuple[int, int]] = set()
    leaves: list[torch.Tensor] = []
    root = False
    for node, found in _untagged_walk(roots, leaves):
        if found is not None:
            tags.add(tuple(found))
            root = root or bool(node.metadata.get(ROOT))
        elif PRODUCER in node.metadata:
            made.add(tuple(node.metadata[PRODUCER][2:]))
    if not tags:
        # graphs no backward went through (evaluation losses kept in a list): the
        # iterations are those of the forward passes that made them
        tags = made
    # one tensor only: a list of the losses of one iteration (``objectives``) holds the
    # root of the first's backward beside the second's forward without growing
    return tags, root and bool(leaves) and len(roots) == 1


def _all_nodes(roots: list[torch.Tensor]) -> list[Any]:
    """Every node of the graph below `roots`, tagged or not (at most `WALK_LIMIT`)."""
    seen: set[int] = set()
    held = []  # keeps the node wrappers (and so their ids) alive during the walk
    stack = [t.grad_fn for t in roots if t.grad_fn is not None]
    while stack and len(seen) < WALK_LIMIT:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        held.append(node)
        stack.extend(nxt for nxt, _ in node.next_functions if nxt is not None)
    return held


def _leaves(roots: list[torch.Tensor]) -> list[torch.Tensor]:
    """The leaves (parameters) a graph ends at."""
    return [node.variable for node in _all_nodes(roots) if type(node).__name__ == _LEAF_NODE]


def _count_nodes(roots: list[torch.Tensor]) -> int:
    return len(_all_nodes(roots))


def _untagged_walk(roots: list[torch.Tensor], leaves: list[torch.Tensor] | None = None):
    """Each node of the graph below `roots` once, with its iteration tag (None: not
    tagged yet), going on below untagged nodes only; parameters' leaf nodes, which every
    iteration's graph ends at, are left out. At most `WALK_LIMIT` nodes: it runs at every
    backward. A caller may tag a node it is given before the walk goes below it."""
    stack = [t.grad_fn for t in roots if t.grad_fn is not None]
    held = []  # keeps the node wrappers (and so their ids) alive during the walk
    seen: set[int] = set()
    while stack and len(seen) < WALK_LIMIT:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        held.append(node)
        if type(node).__name__ == _LEAF_NODE:
            if leaves is not None:
                leaves.append(node.variable)
            continue
        found = node.metadata.get(TAG)
        yield node, found
        if found is None:
            stack.extend(nxt for nxt, _ in node.next_functions if nxt is not None)
