"""The doctor's run child: the user's unmodified script, bounded, under `Watch`.

It runs inside the same sandbox as a verification run (`sandbox.spawn`, confined by the
job): the project copy is laid out as for a verification side (`place.prepare`), loops
that train are capped as in a bounded run (`bounded.Bounds`, the run's own settings), and
the RNGs are seeded as there. What comes back is plain data: the observations, the
exception (paths and lines the user's), the loops that were cut.

A *focused* re-run (after an in-place error) turns on anomaly detection and watches
in-place ops on tensors autograd saved (a `TorchFunctionMode`, the only per-op Python
here, and only in that re-run): it names the line of the op that modified a saved tensor
and, from anomaly mode's forward traceback, the line of the op that saved it.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from ..harness import _bounds, _fresh_main, describe_exception, seed_all
from ..place import Place, chain_argv, prepare
from .watch import Watch

_TRACE_LINE = re.compile(r'File "([^"]+)", line (\d+)')
#: in-place modifications recorded in a focused re-run, at most
MAX_MODIFICATIONS = 64


class _InplaceWatch(TorchFunctionMode):
    """Records in-place ops (``add_``, ``x[i] = v``, ``relu(inplace=True)``, ``out=``)
    whose target shares storage with a tensor autograd saved and still holds, with the
    module running it when that module was made with ``inplace=True`` (an
    ``nn.Dropout(p, inplace=True)`` inside an ``nn.Sequential``: its line is the fix's)."""

    def __init__(self, watch: Watch, site: Callable[[], Any]) -> None:
        super().__init__()
        self.watch = watch
        self.site = site
        self.modifications: list[dict[str, Any]] = []
        self._modules: list[Any] = []
        self._handles: list[Any] = []

    def __enter__(self) -> "_InplaceWatch":
        from torch.nn.modules import module as module_hooks

        def entered(module: Any, args: Any) -> None:
            self._modules.append(module)

        def left(module: Any, args: Any, output: Any) -> None:  # returns None: the output stays as it is
            if self._modules:
                self._modules.pop()

        self._handles = [module_hooks.register_module_forward_pre_hook(entered),
                         module_hooks.register_module_forward_hook(left, always_call=True)]
        return super().__enter__()

    def __exit__(self, *exc: Any) -> Any:
        for handle in self._handles:
            handle.remove()
        return super().__exit__(*exc)

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        inplace = (name.endswith("_") and not name.endswith("__")) or name in ("__setitem__", "__iadd__", "__imul__", "__isub__", "__itruediv__") \
            or kwargs.get("inplace") is True or kwargs.get("out") is not None
        if inplace and len(self.modifications) < MAX_MODIFICATIONS:
            target = kwargs.get("out") if kwargs.get("out") is not None else (args[0] if args else None)
            if isinstance(target, torch.Tensor) and self.watch.holds_saved(target):
                site = self.site()
                if site is not None:
                    entry = {"file": site[0], "line": site[1], "op": name, "shape": list(target.shape)}
                    if target.is_leaf and target.requires_grad and _in_optimizer_step():
                        entry["leaf"] = True  # a parameter an optimizer's step updated, as steps do
                    running = self._modules[-1] if self._modules else None
                    if running is not None and getattr(running, "inplace", False) is True:
                        entry["inplace_module"] = type(running).__name__
                    self.modifications.append(entry)
        return func(*args, **kwargs)


def _in_optimizer_step() -> bool:
    """Whether a ``torch.optim`` function is on the stack (the op is a step's update)."""
    frame = sys._getframe(2)
    marker = os.sep + os.path.join("torch", "optim") + os.sep
    while frame is not None:
        if marker in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def _owner(place: Place) -> Callable[[str], bool]:
    root = place.copy_root + os.sep

    def owns(filename: str) -> bool:
        return filename == place.script or filename.startswith(root)

    return owns


def run_doctor_side(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the script of `spec` once under the doctor's instrumentation (see module doc)."""
    torch.set_num_threads(int(spec.get("threads", 1)))
    place = prepare({**spec, "side": "original"}, os.getcwd())
    owns = _owner(place)
    # a loop capped while backward's gradients wait for a step runs on to the step: the
    # step that uses an accumulation window is what AGF002 and AGF019 are judged at
    bounds = _bounds({**spec, "kind": "script"}, place, whole_windows=True)
    watch = Watch(owns, focus=bool(spec.get("focus")))
    record: dict[str, Any] = {"exception": None, "crash_site": None}
    namespace = _fresh_main(place.script)
    chain_argv(place.script, spec.get("argv") or ())
    seed_all(0)
    try:
        code = bounds.compile(spec["source"], place.script)
    except SyntaxError as exc:
        record["exception"] = describe_exception(exc, "compile", place.script)
        place.user_view(record["exception"])
        return record
    watch.namespace = namespace
    inplace = _InplaceWatch(watch, lambda: watch.site_here()) if spec.get("focus") else None
    caught: list[str] = []
    with bounds, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if spec.get("focus"):
            torch.autograd.set_detect_anomaly(True)
        watch.install()
        bounds.loop_done = watch.loop_ended
        windows = _StepsAwaited(bounds).install()
        try:
            if inplace is not None:
                with inplace:
                    exec(code, namespace)  # noqa: S102 - running the user's code is the point
            else:
                exec(code, namespace)  # noqa: S102
        except SystemExit as exc:
            if exc.code not in (None, 0):
                record["exception"] = describe_exception(exc, "run", place.script)
                record["exception"]["message"] = f"sys.exit({exc.code!r})"
        except BaseException as exc:  # noqa: BLE001 - a crash is diagnosed up to where it happened
            record["exception"] = describe_exception(exc, "run", place.script)
        windows.uninstall()
        record["observations"] = watch.record(finished=record["exception"] is None)
        caught = [str(w.message) for w in seen if "Traceback of forward call" in str(w.message)]
    if spec.get("focus"):
        torch.autograd.set_detect_anomaly(False)
        record["modifications"] = inplace.modifications if inplace is not None else []
        record["anomaly_forward"] = _forward_frame(caught, owns)
    exc = record["exception"]
    if exc is not None:
        frames = [f for f in exc.get("frames") or () if owns(f[0])]
        record["crash_site"] = (frames[-1][0], frames[-1][1]) if frames else None
        place.user_view(exc)
    if bounds.enabled:
        record["bounded"] = {**bounds.settings(), "loops": bounds.report()}
    return _relative(record, place)


class _StepsAwaited:
    """Accumulation windows wait for an optimizer step only where an optimizer exists: a
    script that updates by hand (``p.data.add_(-lr, p.grad)``) or takes gradients with no
    step at all would otherwise keep every capped loop running to `bounded.WINDOW_CAP`.
    Counts optimizers made, and after each backward (outermost wrapper) clears the bounds'
    open window while none was made."""

    def __init__(self, bounds: Any) -> None:
        self.bounds = bounds
        self.made = 0
        self._undo: list[Callable[[], None]] = []

    def install(self) -> "_StepsAwaited":
        init, backward = torch.optim.Optimizer.__init__, torch.autograd.backward

        def counting(this: Any, *args: Any, **kwargs: Any) -> None:
            self.made += 1
            init(this, *args, **kwargs)

        def awaited(*args: Any, **kwargs: Any) -> Any:
            try:
                return backward(*args, **kwargs)
            finally:
                if not self.made:
                    self.bounds.pending = False

        torch.optim.Optimizer.__init__, torch.autograd.backward = counting, awaited
        self._undo = [lambda: setattr(torch.optim.Optimizer, "__init__", init),
                      lambda: setattr(torch.autograd, "backward", backward)]
        return self

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()


def _forward_frame(messages: list[str], owns: Callable[[str], bool]) -> tuple[str, int] | None:
    """The innermost project frame of anomaly mode's 'Traceback of forward call'."""
    for message in reversed(messages):
        frames = [(name, int(line)) for name, line in _TRACE_LINE.findall(message) if owns(name)]
        if frames:
            return frames[-1]
    return None


def _relative(value: Any, place: Place) -> Any:
    """Every path of the copy as a path relative to the project root."""
    root = place.copy_root + os.sep
    if isinstance(value, str):
        return os.path.relpath(value, place.copy_root) if value.startswith(root) or value == place.script else value
    if isinstance(value, dict):
        return {k: _relative(v, place) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_relative(v, place) for v in value)
    return value

