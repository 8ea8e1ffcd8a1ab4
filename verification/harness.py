"""What a run child does: load one side of a unit, bind inputs, run it under probes, and
write a record (``torch.save``) the job process compares.

Script and driver runs are bounded (`bounded`): loops that do model work stop after a
few working iterations, in the script and in the project modules it imports, the same
on both sides; the record says which loops were cut (``bounded``).

Everything here happens in a forked child of the warm worker: it may monkeypatch torch,
disable the GC, change directory, and die in any way; the parent only trusts the record
file, and only if the child exited normally.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import inspect
import math
import os
import random
import runpy
import re
import sys
import time
import traceback
import types
from contextlib import nullcontext
from dataclasses import replace
from typing import Any, Mapping

import torch
from torch import nn

from autograd_fix.codemods.semantic.roles import Vocabulary

from .binding import Binder, Unbindable
from .bounded import VOLATILE_NAME, Bounds, StopRun, returned_key
from .clock import ClockUse, is_clock_reading, marked_clocks
from .environment import cause as environmental_cause
from .coverage import LineWatch
from .checks import Probe, probes_for
from .directional import Perturbation, directional_check, later_backward_checks, second_point
from .gradcheck import gradcheck_namespace, run_gradcheck, synthesize
from .graph_state import graph_state
from .ipython_lines import install_shell, runnable_source
from .legacy import zero_dim_index_as_item
from .place import Place, chain_argv, prepare
from .printed import PrintedText
from .probes import Probes, iter_tensors, named_leaves
from .protocol import BoundedRecord, CoverageRecord, GraphStateRecord, RunRecord, RunRecordDraft, SideSpec, Unbound
from .reach import ReachTracer
from .reference import float64_reference
from .record import plain, serialize

_AUTOGRAD_ERROR = re.compile(
    r"leaf Variable that requires grad|modified by an inplace operation|does not require grad and does not have a grad_fn|"
    r"backward through the graph a second time|incorrect number of gradients|returned an invalid gradient|"
    r"expected Variable or None|save_for_backward can only save|is a view and is being modified inplace|"
    r"A view was created in no_grad mode|Inference tensors cannot be saved|Inplace update to inference tensor|"
    r"gradient different than None|grad can be implicitly created only for scalar"
)
_MEMORY_ERROR = re.compile(r"can't allocate memory|DefaultCPUAllocator|out of memory|OutOfMemoryError|Cannot allocate memory")


def seed_all(seed: int) -> None:
    """Identical RNG state for both sides: torch (CPU and CUDA), random, numpy."""
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("CUDA was requested (--device cuda) but torch.cuda.is_available() is False")
    return device


def describe_exception(exc: BaseException, phase: str, path: str) -> dict[str, Any]:
    message = str(exc)
    stack = traceback.extract_tb(exc.__traceback__)
    frames = [f for f in stack if f.filename == path]
    where = f"line {frames[-1].lineno}: {frames[-1].line}" if frames else None
    return {
        "type": type(exc).__name__,
        "message": message[:2000],
        "phase": phase,
        "autograd": bool(_AUTOGRAD_ERROR.search(message)),
        "memory": isinstance(exc, MemoryError) or bool(_MEMORY_ERROR.search(message)),
        "where": where,
        "environment": environmental_cause(type(exc).__name__, message, (stack[-1].line or "") if stack else ""),
        # (file, line, text) of the innermost frames, for `Place.user_view`
        "frames": [(f.filename, f.lineno, f.line) for f in stack[-20:]],
    }


def _clock_reading(name: str, value: Any, clocks: ClockUse) -> bool:
    """A value read from a clock (`clock`: marked where it was read), or, in a run that
    read no marked clock (``datetime.now()``, a CUDA event), a float named like one."""
    if is_clock_reading(value):
        return True
    return not clocks.reads and isinstance(value, float) and bool(VOLATILE_NAME.search(name.split(" ")[0]))


def _script_outputs(namespace: dict[str, Any], volatile: list[str], clocks: ClockUse) -> dict[str, Any]:
    """The script's globals that are results; the clock readings among them are named in
    `volatile` instead (they differ between any two runs)."""
    outputs = {}
    for name, value in namespace.items():
        if name.startswith("_") or isinstance(value, (types.ModuleType, types.FunctionType, type, types.BuiltinFunctionType)):
            continue
        if isinstance(value, (torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler)):
            continue
        if _clock_reading(name, value, clocks):
            volatile.append(name)
            continue
        outputs[name] = value
    return outputs


def _register_values(probes: Probes, values: dict[str, Any], kind: str) -> None:
    for name, value in values.items():
        if isinstance(value, nn.Module):
            probes.register_module(value, name, kind)
        elif isinstance(value, torch.Tensor) and value.is_leaf and value.requires_grad:
            probes.register(value, name, kind)


def run_side(spec: SideSpec) -> RunRecord:
    """Run one side of one unit in its shadow copy; returns the record (tensors inside;
    the child saves `saved(record)`, its plain form).

    With ``isolate`` false (the worker's own warm-up) it runs in place instead."""
    torch.set_num_threads(int(spec.threads))
    ipython_note: str | None = None
    if spec.ipython_lines:  # a notebook: its IPython lines as Jupyter runs them (`ipython_lines`)
        source, ipython_note = runnable_source(spec.source, spec.ipython_lines)
        counterpart = runnable_source(spec.counterpart, spec.ipython_lines)[0] if spec.counterpart else spec.counterpart
        spec = replace(spec, source=source, counterpart=counterpart)
        install_shell()
    place: Place | None = None
    if spec.isolate:
        place = prepare(spec, os.getcwd())
        spec = replace(spec, factory_root=_in_copy(place, spec.factory_root))
        path = place.script
    else:
        path = spec.path or "<string>"
    tracer = ReachTracer(path, spec.targets or ())
    exempt = spec.changed_lines if spec.side == "rewritten" else None
    with tracer, (zero_dim_index_as_item(path, exempt) if spec.zero_dim_index_as_item else nullcontext([0])) as readings:
        record = _run_kind(spec, path, place)
    record.reached = tuple(sorted(tracer.reached))
    if ipython_note:
        record.ipython = ipython_note
    if readings[0]:
        record.zero_dim_readings = readings[0]
    if place is not None:
        place.user_view(record.exception)
        if record.printed:
            record.printed["text"] = place.to_user_path(record.printed["text"])
    return record.freeze()  # the frames go: the user's lines and paths are all a verdict names


def saved(record: RunRecord) -> dict[str, Any]:
    """What a run child saves for `record`: its plain data (`RunRecord.to_json`) with
    every value the run produced made loadable by the weights-only unpickler
    (`record.plain`); the job reads it back with `protocol.read_record`."""
    return plain(record.to_json())


def _in_copy(place: Place, folder: str | None) -> str | None:
    """A folder of the user's project, as seen inside this side's copy."""
    if not folder or not place.user_root:
        return folder
    relative = os.path.relpath(folder, place.user_root)
    return folder if relative.startswith("..") else os.path.normpath(os.path.join(place.copy_root, relative))


def _run_kind(spec: SideSpec, path: str, place: Place | None) -> RunRecordDraft:
    kind = spec.kind
    checks = set(spec.checks or ())
    needs = probes_for(checks)  # what the contract's checks need recorded (checks.SPECS)
    record = RunRecordDraft(kind)
    try:
        device = resolve_device(spec.device)
    except RuntimeError as exc:
        record.setup_error = str(exc)
        return record
    record.device = device
    state = graph_state(spec.source or "")
    record.graph_state = GraphStateRecord(names=tuple(sorted(state.names)), lines=tuple(sorted(state.lines)),
                                          choices=tuple(sorted(state.choices)))
    seed_all(0)
    bounds = _bounds(spec, place, Probe.WHOLE_WINDOWS in needs)
    watch = LineWatch(path, spec.changed_lines)
    probes = Probes(
        track_ctx=kind == "autograd_function" or Probe.SAVED_CONTEXTS in needs,
        track_manual_updates=Probe.MANUAL_UPDATES in needs,
        snapshot_initial=Probe.INITIAL_PARAMETERS in needs or not checks,
        device=device,
        path=path,
        counterpart=spec.counterpart,
        watch=watch,
    )
    bounds.graph_live = probes.live_graph_bytes
    started = time.perf_counter()
    with bounds, marked_clocks() as clocks:
        with watch:
            if kind == "script":
                _run_script(spec, record, probes, path, bounds, clocks)
            elif kind == "driver":
                _run_driver(spec, record, probes, place, bounds, clocks)
            if kind in ("script", "driver"):
                # what the changed lines assigned last: what the script's later lines read
                observed = bounds.observed()
                record.volatile += [name.split(" ")[0] for name, value in observed.items() if _clock_reading(name, value, clocks)]
                record.outputs.update({name: serialize(value) for name, value in observed.items()
                                       if not _clock_reading(name, value, clocks)})
                _returned_graph_state(record, bounds)
            elif kind == "autograd_function":
                _run_function_class(spec, record, probes, path, device)
            else:
                _run_callable(spec, record, probes, path, device, needs)
        if bounds.stopped is not None and len(spec.reach_lines or ()) == len(watch.hunks):
            # the run ended where both sides end; an insertion into the other side is anchored
            # here on later code, and its place (the reach point) was passed (`coverage.Reach`)
            watch.credit(index for index in spec.anchored_hunks if index in bounds.reached)
        coverage = watch.report()
        record.changed_lines = CoverageRecord(**coverage) if coverage is not None else None
        if bounds.enabled:
            record.bounded = BoundedRecord(**bounds.settings(), loops=tuple(bounds.report()), stopped=bounds.stopped)
        took = time.perf_counter() - started
        if kind not in ("autograd_function", "driver") and Probe.SECOND_POINT in needs and not record.unbound:
            record.second_point = _second_point(spec, path, device, bounds, took)
        if kind not in ("autograd_function", "driver") and Probe.FINITE_DIFFERENCES in needs and not record.unbound:
            record.finite_differences = _finite_differences(spec, path, device, bounds)
        if kind == "script" and spec.side == "original" and Probe.FLOAT64_REFERENCE in needs:
            record.float64_reference = _float64_reference(spec, path, bounds, clocks)
    return record


def _returned_graph_state(record: RunRecordDraft, bounds: Bounds) -> None:
    """A run stopped at the changed function's return: when that function returns graph
    state (`graph_state` names it: ``return {"graph": tracked}`` with ``tracked`` holding
    ``requires_grad`` flags), the output holding its returned value is such a place too."""
    stopped = bounds.stopped or {}
    state = record.graph_state
    if not stopped.get("at_return") or state is None:
        return
    name = str(stopped.get("label", ""))[:-2]
    if name.rpartition(".")[2] in state.names:
        record.graph_state = replace(state, names=tuple(sorted({*state.names, returned_key(name)})))


def _bounds(spec: "SideSpec | Mapping[str, Any]", place: Place | None, whole_windows: bool = False) -> Bounds:
    """The caps of this run (`bounded`): on for a script or a user-named driver run in
    its copy (not a pytest node), as configured; off otherwise. The doctor's spec is its
    own mapping (`doctor.job`). `whole_windows`: loops run on while gradients wait for an
    optimizer step (`Probe.WHOLE_WINDOWS`)."""
    if isinstance(spec, Mapping):
        settings, command, kind = spec.get("bounds") or {}, spec.get("command") or {}, spec["kind"]
        changed, observe, reach = spec.get("changed_lines"), tuple(spec.get("observe") or ()), spec.get("reach_lines")
    else:
        settings, command, kind = spec.bounds.settings() if spec.bounds else {}, spec.command or {}, spec.kind
        changed, observe, reach = spec.changed_lines, spec.observe, spec.reach_lines
    runs_program = kind == "script" or (kind == "driver" and command.get("kind") != "pytest")
    if place is None or not runs_program:
        return Bounds(cap=0)
    forward_cap = settings.get("forward_cap")
    return Bounds(cap=int(settings.get("cap") or 0), outer_cap=int(settings.get("outer_cap") or 0), root=place.copy_root,
                  announce_fd=2, forward_cap=None if forward_cap is None else int(forward_cap), changed_file=place.script,
                  changed_lines=[line for hunk in changed or () for line in hunk],
                  observe=observe, whole_windows=whole_windows,
                  stop_after=int(settings.get("stop_after") or 0), hunks=reach or (),
                  stop_at_return=bool(settings.get("stop_at_return")))


def _fresh_main(path: str) -> dict[str, Any]:
    """A new ``__main__`` module for the script (so pickling its classes works), as
    ``python script.py`` would have."""
    module = types.ModuleType("__main__")
    module.__dict__.update({"__file__": path, "__builtins__": builtins})
    sys.modules["__main__"] = module
    return module.__dict__


def _run_script(spec: SideSpec, record: RunRecordDraft, probes: Probes, path: str, bounds: Bounds, clocks: ClockUse) -> None:
    namespace = _fresh_main(path)
    chain_argv(path, spec.argv or ())
    try:
        code = bounds.compile(spec.source, path)
    except SyntaxError as exc:
        record.exception = describe_exception(exc, "compile", path)
        return
    _run_main(record, probes, path, lambda: exec(code, namespace), namespace, clocks)  # noqa: S102 - running the user's code is the point


def _run_driver(spec: SideSpec, record: RunRecordDraft, probes: Probes, place: Place | None, bounds: Bounds,
                clocks: ClockUse) -> None:
    """A user-named driver: a project script or module run as ``__main__``, or a pytest
    node id run by ``pytest.main``, in this side's copy (the changed file in place)."""
    command = spec.command
    path = place.script if place else spec.path or "<string>"
    argv = list(command.get("argv") or ())
    if command["kind"] == "pytest":
        _run_pytest(command, record, probes, path)
        return
    if command["kind"] == "module":
        chain_argv(command["target"], argv)
        found: dict[str, Any] = {}
        _run_main(record, probes, path, lambda: found.update(runpy.run_module(command["target"], run_name="__main__", alter_sys=True)), found, clocks)
        return
    if command["kind"] == "entry":
        chain_argv(command["text"], argv)
        namespace: dict[str, Any] = {}
        _run_main(record, probes, path, lambda: _run_entry_point(command["target"], namespace), namespace, clocks)
        return
    script = os.path.join(place.copy_root, command["script"]) if place else command["target"]
    try:
        with open(script, encoding="utf-8") as handle:
            code = bounds.compile(handle.read(), script)
    except (OSError, UnicodeDecodeError) as exc:
        record.setup_error = f"the configured driver's script {command['script']} cannot be read ({exc}); fix `driver` in [tool.autograd-fix.verify]"
        return
    except SyntaxError as exc:
        record.exception = describe_exception(exc, "compile", script)
        return
    namespace = _fresh_main(script)
    chain_argv(script, argv)
    _run_main(record, probes, path, lambda: exec(code, namespace), namespace, clocks)  # noqa: S102


def _run_entry_point(target: str, namespace: dict[str, Any]) -> None:
    """What a console script does: import ``module``, call ``function()``, exit with what
    it returns; the module's globals are the run's outputs (`namespace`)."""
    module_name, _, function = target.partition(":")
    module = importlib.import_module(module_name)
    namespace.update(vars(module))
    entry: Any = module
    for part in function.split("."):
        entry = getattr(entry, part)
    status = entry()
    namespace.update(vars(module))
    if status not in (None, 0):
        raise SystemExit(status)


class _PytestFailures:
    """A pytest plugin keeping the first failure's report (the child has no terminal)."""

    def __init__(self) -> None:
        self.failures: list[tuple[str, str]] = []

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.failed:
            self.failures.append((report.nodeid, report.longreprtext))

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.failures.append((report.nodeid or "collection", report.longreprtext))


_PYTEST_EXIT = {2: "was interrupted (errors during collection?)", 3: "failed internally", 4: "could not find or run the node id",
                5: "collected no test for the node id"}


def _run_pytest(command: dict[str, Any], record: RunRecordDraft, probes: Probes, path: str) -> None:
    try:
        import pytest
    except ImportError:
        record.setup_error = "the configured driver is a pytest node id, but pytest is not installed where autograd-fix runs"
        return
    collector = _PytestFailures()
    sys.argv = ["pytest"]
    probes.install()
    try:
        status = int(pytest.main([command["target"], "-x", "-q", "-p", "no:cacheprovider"], plugins=[collector]))
    except BaseException as exc:  # noqa: BLE001
        record.exception = describe_exception(exc, "run", path)
        status = 0
    if status != 0:
        node, text = collector.failures[0] if collector.failures else (command["target"], "")
        errors = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
        message = errors[0] if errors else f"pytest {_PYTEST_EXIT.get(status, f'exited with status {status}')}"
        if message.startswith("assert "):  # pytest's rewritten assertion
            message = f"AssertionError: {message}"
        exc_type, _, rest = message.partition(": ")
        typed = rest and exc_type.replace(".", "").isidentifier()
        record.exception = {
            "type": exc_type.rsplit(".", 1)[-1] if typed else "PytestFailed",
            "message": (rest if typed else message)[:2000],
            "phase": "run",
            "autograd": bool(_AUTOGRAD_ERROR.search(message)),
            "memory": bool(_MEMORY_ERROR.search(message)),
            "where": f"{node} (pytest status {status})",
            "environment": environmental_cause(exc_type if typed else "PytestFailed", message),
        }
    record.measures = probes.finish([])
    _leaf_records(record, probes)


def _run_main(record: RunRecordDraft, probes: Probes, path: str, run: Any, namespace: dict[str, Any],
              clocks: ClockUse) -> None:
    """Run a ``__main__`` (script or driver) under probes; `namespace`, its globals once
    `run()` returns or raises, holds the outputs."""
    probes.install()
    printed = PrintedText(forward=sys.stdout, graph_state=_graph_state_caller(path, record.graph_state.lines if record.graph_state else None))
    try:
        with contextlib.redirect_stdout(printed):
            run()
    except StopRun:
        pass  # the changed function returned where both sides stop (`bounded.Bounds.stop_at_return`)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            record.exception = describe_exception(exc, "run", path)
            record.exception["message"] = f"sys.exit({exc.code!r})"
    except BaseException as exc:  # noqa: BLE001
        record.exception = describe_exception(exc, "run", path)
    outputs = _script_outputs(namespace, record.volatile, clocks)
    _register_values(probes, outputs, "global")
    roots = list(iter_tensors(list(outputs.values())))
    record.measures = probes.finish(roots)
    del roots
    record.outputs = {name: serialize(value) for name, value in outputs.items()}
    record.printed = printed.record()
    _leaf_records(record, probes)


def _graph_state_caller(path: str, lines: Any) -> Any:
    """Whether the print under way comes from a statement of `path` that reads graph
    state (`graph_state`): any frame of that file on the stack, at one of `lines`."""
    wanted = frozenset(lines or ())
    if not wanted:
        return None

    def from_graph_state_line() -> bool:
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_lineno in wanted and frame.f_code.co_filename == path:
                return True
            frame = frame.f_back
        return False

    return from_graph_state_line


def _leaf_records(record: RunRecordDraft, probes: Probes) -> None:
    grads, values, initial = probes.leaf_state()
    record.leaf_grads = grads
    record.params_final = values
    record.params_initial = initial
    record.steps = probes.step_records()
    record.ever_grad = probes.ever_grad()
    record.fresh_inputs = probes.fresh_inputs()
    record.step_violations = probes.violation_records()
    record.step_violation_count = probes.violation_count
    record.stale_steps = probes.stale_steps
    record.forward = probes.forward_records
    record.forward_count = probes.forward_count
    record.functions = probes.functions


UNIT_MODULE = "__autograd_fix_unit__"


def _module_name(path: str) -> tuple[str, str]:
    """The dotted name the file imports as (``pkg.sub.mod`` inside packages, so relative
    imports work) and its package; the top package's parent goes on ``sys.path``."""
    stem = os.path.splitext(os.path.basename(path))[0]
    if not os.path.isabs(path) or not stem.isidentifier():
        return UNIT_MODULE, ""
    parts = [stem]
    folder = os.path.dirname(path)
    while os.path.isfile(os.path.join(folder, "__init__.py")) and os.path.basename(folder).isidentifier():
        parts.insert(0, os.path.basename(folder))
        folder = os.path.dirname(folder)
    if len(parts) > 1 and folder not in sys.path:
        sys.path.insert(1, folder)
    name = ".".join(parts)
    if name in sys.builtin_module_names or (len(parts) == 1 and name in sys.modules):
        return UNIT_MODULE, ""  # never shadow a module the worker itself uses
    return name, ".".join(parts[:-1])


def _load_module(
    spec: SideSpec, record: RunRecordDraft, path: str, *, real_name: bool = True, watch: LineWatch | None = None
) -> dict[str, Any] | None:
    """Import the real module (every statement) under its own, non-``__main__``, name;
    it is also ``sys.modules["__autograd_fix_unit__"]`` for factories. `real_name` false
    (``verify --gradcheck``, which runs outside a shadow copy) keeps only the latter."""
    name, package = _module_name(path) if real_name else (UNIT_MODULE, "")
    if package:
        try:
            importlib.import_module(package)  # its __init__ files run first, as on import
        except BaseException as exc:  # noqa: BLE001
            record.exception = describe_exception(exc, "import", path)
            return None
    module = types.ModuleType(name)
    module.__dict__.update({"__file__": path, "__builtins__": builtins, "__package__": package})
    chain_argv(path, spec.argv or ())  # its top-level code may parse arguments, as the script run does
    sys.modules[UNIT_MODULE] = module
    sys.modules[name] = module
    try:
        code = compile(spec.source, path, "exec")
        if watch is not None:
            watch.claim(code)  # the side's own code, not a copy its package imported first
        exec(code, module.__dict__)  # noqa: S102
    except BaseException as exc:  # noqa: BLE001
        record.exception = describe_exception(exc, "import", path)
        return None
    return module.__dict__


def _resolve(namespace: dict[str, Any], qualname: str) -> Any:
    obj: Any = namespace[qualname.split(".")[0]]
    for part in qualname.split(".")[1:]:
        obj = inspect.getattr_static(obj, part)
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
    return obj


def _run_callable(
    spec: SideSpec, record: RunRecordDraft, probes: Probes, path: str, device: str, needs: frozenset[Probe]
) -> None:
    namespace = _load_module(spec, record, path, watch=probes.watch)
    if namespace is None:
        return
    qualname = spec.qualname
    binder = Binder(
        namespace=namespace,
        source=spec.source,
        device=torch.device(device),
        factories=dict(spec.factories or {}),
        factory_root=spec.factory_root,
        tensors_require_grad=Probe.GRAD_INPUTS in needs,
        qualname=qualname,
        plan=spec.input_plan,
        roles=Vocabulary.from_additions(spec.roles),
        call_site=spec.call_site,
    )
    try:
        target, args, kwargs = _bind(binder, namespace, qualname, spec.free_names or ())
    except Unbindable as exc:
        record.unbound = Unbound(name=exc.name, why=exc.why)
        return
    except Exception as exc:  # noqa: BLE001 - e.g. a constructor that raises
        record.unbound = Unbound(name=qualname, why=f"building its inputs raised {type(exc).__name__}: {exc}")
        return
    record.bound = dict(binder.described)
    record.input_plan = binder.plan_record()
    named = {k: v for k, v in binder.values.items() if not k.startswith("<")}
    if binder._model is not None and not any(v is binder._model for v in named.values()):
        named["model"] = binder._model
    _register_values(probes, named, "bound")
    seed_all(1)
    probes.install()
    result: Any = None
    try:
        result = target(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, SystemExit) and exc.code in (None, 0):
            pass
        else:
            record.exception = describe_exception(exc, "run", path)
    roots = list(iter_tensors(result))
    record.measures = probes.finish(roots)
    record.outputs = {"return": serialize(result)}
    if qualname.endswith(".__init__") and hasattr(target, "__self__"):
        record.outputs["self"] = serialize(target.__self__)  # what a constructor makes is the object
    if record.exception is None and probes.backward_count == 0:
        _harness_backward(record, probes, roots, named, path)
    del roots
    _leaf_records(record, probes)


def _bind(binder: Binder, namespace: dict[str, Any], qualname: str, free_names: Any) -> tuple[Any, list[Any], dict[str, Any]]:
    parts = qualname.split(".")
    if len(parts) == 1:
        fn = namespace[parts[0]]
        args, kwargs = binder.bind_call(fn, list(free_names))
        return fn, args, kwargs
    cls = namespace[parts[0]]
    raw = inspect.getattr_static(cls, parts[1])
    if isinstance(raw, staticmethod):
        fn = raw.__func__
        args, kwargs = binder.bind_call(fn, list(free_names))
        return fn, args, kwargs
    if not isinstance(raw, classmethod) and binder.site_gives("self"):
        return _bind_on_site_instance(binder, cls, raw, parts[1], free_names)
    if isinstance(cls, type) and issubclass(cls, nn.Module):
        instance = binder._bind_model("self", preferred=cls.__name__)
        if type(instance) is not cls:
            raise Unbindable("self", f"{cls.__name__}() could not be constructed without arguments")
    else:
        init_args, init_kwargs = binder.bind_call(cls.__init__, [], skip_first=True) if cls.__init__ is not object.__init__ else ([], {})
        instance = cls(*init_args, **init_kwargs)
    binder.values["self"] = instance
    if isinstance(raw, classmethod):
        fn = getattr(cls, parts[1])
        args, kwargs = binder.bind_call(raw.__func__, list(free_names), skip_first=True)
        return fn, args, kwargs
    method = getattr(instance, parts[1])
    args, kwargs = binder.bind_call(raw, list(free_names), skip_first=True)
    return method, args, kwargs


def _bind_on_site_instance(binder: Binder, cls: Any, raw: Any, name: str, free_names: Any) -> tuple[Any, list[Any], dict[str, Any]]:
    """The changed method called on the instance the project's own call site builds
    (``trainer = Trainer(config, model, dataset)``), with the call's other arguments.

    The side's own function is bound to that instance with `types.MethodType` rather
    than looked up on it: the recipe imports the class the way the caller does
    (``from pkg import Trainer``), and through a package that re-exports it that is the
    project's module as imported before this side's source ran, whose method is the
    unchanged one on both sides. Binding `raw` (this side's version) makes each side run
    its own method on an identical instance."""
    instance = binder.value("self")
    if not any(klass.__name__ == cls.__name__ for klass in type(instance).__mro__):
        raise Unbindable("self", f"the call site's instance is a {type(instance).__name__}, not a {cls.__name__}")
    args, kwargs = binder.bind_call(raw, list(free_names), skip_first=True)
    return types.MethodType(raw, instance), args, kwargs


def _harness_backward(record: RunRecordDraft, probes: Probes, roots: list[torch.Tensor], named: dict[str, Any], path: str) -> None:
    """Backpropagate from the unit's outputs (when it did not itself) to reach autograd
    errors hidden until backward, and compare gradients of its inputs."""
    differentiable = [t for t in roots if t.requires_grad and t.grad_fn is not None and t.is_floating_point()]
    if not differentiable:
        return
    leaves = {name: leaf for name, leaf in named_leaves(named).items() if leaf.requires_grad}
    try:
        total = sum(t.float().sum() for t in differentiable)
        if leaves:
            grads = torch.autograd.grad(total, list(leaves.values()), allow_unused=True)
            record.output_grads = {name: (None if g is None else g.detach().cpu()) for name, g in zip(leaves, grads)}
        else:
            torch.autograd.grad(total, [differentiable[0]], allow_unused=True)
    except BaseException as exc:  # noqa: BLE001
        record.exception = describe_exception(exc, "backward (from the unit's outputs)", path)


def _finite_differences(spec: SideSpec, path: str, device: str, bounds: Bounds) -> dict[str, Any]:
    """Autograd's derivative of the first loss along a random direction against finite
    differences, in float64 (`directional.directional_check`), re-running the unit (a
    script with the same caps as its run)."""
    run_once, problem = _rerun(spec, path, device, bounds)
    if run_once is None:
        return {"applicable": False, "detail": f"finite differences not applicable: {problem}"}
    result = directional_check(run_once, iter_tensors)
    if result.get("applicable"):
        # a run with more than one backward per step (a GAN): its later losses too
        result["later"] = later_backward_checks(run_once, iter_tensors)
    return result


def _second_point(spec: SideSpec, path: str, device: str, bounds: Bounds, took: float) -> dict[str, Any]:
    """The unit's first loss with parameters, inputs and seeds moved (`directional.second_point`),
    unless the run itself used up more than a third of its time limit (the re-run shares it)."""
    limit = float(spec.timeout or 20.0)
    if took > limit / 3:
        return {"applicable": False, "detail": f"no second point: the run took {took:.1f} s of its {limit:g} s"}
    run_once, problem = _rerun(spec, path, device, bounds)
    if run_once is None:
        return {"applicable": False, "detail": f"no second point: {problem}"}
    return second_point(run_once, iter_tensors)


def _float64_reference(spec: SideSpec, path: str, bounds: Bounds, clocks: ClockUse) -> dict[str, Any]:
    """The original script once more in float64 (`reference`), its outputs picked as the
    run's own are."""
    try:
        code = bounds.compile(spec.source, path)
    except (SyntaxError, ValueError) as exc:
        return {"error": f"the script does not compile ({exc})"}

    def outputs(namespace: dict[str, Any]) -> dict[str, Any]:
        found = _script_outputs(namespace, [], clocks)
        found.update({name: value for name, value in bounds.observed().items() if not _clock_reading(name, value, clocks)})
        return found

    return float64_reference(code, path, list(spec.argv or ()), lambda: bounds.reset(keep_stop=True), lambda: seed_all(0),
                             outputs)


def _rerun(spec: SideSpec, path: str, device: str, bounds: Bounds) -> tuple[Any, str]:
    """(run_once(perturbation), "") re-running a script or function unit up to its first
    backward under a `Perturbation`, or (None, why not)."""
    if spec.kind == "script":
        try:
            code = bounds.compile(spec.source, path)
        except (SyntaxError, ValueError) as exc:
            return None, f"the script does not compile ({exc})"

        def run_once(perturbation: Perturbation) -> Any:
            namespace: dict[str, Any] = {"__name__": "__main__", "__file__": path, "__builtins__": builtins}
            saved_argv = sys.argv
            sys.argv = [path, *(spec.argv or [])]
            bounds.reset()
            seed_all(0 + perturbation.run_seed)
            try:
                exec(code, namespace)  # noqa: S102
            finally:
                sys.argv = saved_argv
            return None

        return run_once, ""

    def run_callable(perturbation: Perturbation) -> Any:
        scratch = RunRecordDraft(spec.kind)
        namespace = _load_module(spec, scratch, path)
        if namespace is None:
            raise RuntimeError("the module failed to load")
        seed_all(0 + perturbation.run_seed)
        binder = Binder(namespace=namespace, source=spec.source, device=torch.device(device),
                        dtype=torch.float64 if perturbation.float64 else torch.float32,
                        factories=dict(spec.factories or {}), factory_root=spec.factory_root,
                        qualname=spec.qualname, plan=spec.input_plan,
                        roles=Vocabulary.from_additions(spec.roles), call_site=spec.call_site)
        target, args, kwargs = _bind(binder, namespace, spec.qualname, spec.free_names or ())
        args = list(args)
        for index, value in enumerate(args):
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                moved = value.detach().double() if perturbation.float64 else value.detach().clone()
                args[index] = moved.requires_grad_(True)
                perturbation.perturb(f"arg{index}", args[index])
        seed_all(1 + perturbation.run_seed)
        return target(*args, **kwargs)

    return run_callable, ""


def _run_function_class(spec: SideSpec, record: RunRecordDraft, probes: Probes, path: str, device: str) -> None:
    namespace = _load_module(spec, record, path, watch=probes.watch)
    if namespace is None:
        return
    cls = namespace.get(spec.qualname)
    if not (isinstance(cls, type) and issubclass(cls, torch.autograd.Function)):
        record.unbound = Unbound(name=spec.qualname, why="not a torch.autograd.Function subclass")
        return
    try:
        args, names, description = synthesize(cls, device=device)
    except ValueError as exc:
        record.unbound = Unbound(name=spec.qualname, why=str(exc))
        return
    record.bound = {"inputs": description}
    record.graph_inputs = {int(position): why for position, why in spec.graph_inputs or ()}
    tensors = {name: a for name, a in zip(names, [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad])}
    for name, tensor in tensors.items():
        probes.register(tensor, name, "bound")
    seed_all(1)
    probes.install()
    out: Any = None
    try:
        for _ in range(3):  # a few calls, as a training loop would make
            for tensor in tensors.values():
                tensor.grad = None
            out = cls.apply(*args)
            total = sum(t.sum() for t in iter_tensors(out) if t.requires_grad)
            if isinstance(total, torch.Tensor):
                total.backward()
            del total
    except BaseException as exc:  # noqa: BLE001
        record.exception = describe_exception(exc, "run", path)
    record.outputs = {"forward": serialize(out)}
    out = None
    record.measures = probes.finish([])
    _leaf_records(record, probes)
    seed_all(2)
    record.gradcheck = run_gradcheck(cls, args)


def run_gradcheck_file(spec: SideSpec) -> RunRecord:
    """For ``verify FILE --gradcheck``: report every custom Function in the module."""
    torch.set_num_threads(int(spec.threads))
    record = RunRecordDraft("module")
    namespace = _load_module(spec, record, spec.path or "<string>", real_name=False)
    if namespace is not None:
        record.functions = gradcheck_namespace(namespace)
    return record.freeze()


def is_close_number(a: float, b: float, rtol: float, atol: float) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return abs(a - b) <= atol + rtol * abs(b)
