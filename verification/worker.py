"""The warm worker: imports torch once, then forks one job process per request.

Protocol: one JSON object per line on stdin (requests) and on the original stdout
(responses, matched by ``id``); the worker points its own fd 1 at stderr so that nothing
else can write into the protocol stream. Requests are the records of `protocol`
(`VerifyRequest`, `GradcheckRequest`; ``doctor``: `doctor.job`'s own fields; ``ping``),
each with its ``id`` and the protocol version, checked before anything runs: a request
of another version, with an unknown or a missing field, is answered with an error that
says so. EOF on stdin (the tool exited, however it died) kills every job's process
group and ends the worker.

Each run child is confined (`namespaces`, `isolation`): first thing, before importing
torch (one thread), the worker enters its user and PID namespaces and tries one confined
run (the answer goes out in its ``ready`` message); it makes the one *view* folder where
every run sees its own folder; each request carries its project's ``isolation`` mode and
``pass_env`` values, and each job forks its runs into PID namespaces of their own.

Why fork per job, and fork again per run: a fork of a process that already imported torch
costs milliseconds instead of the seconds of ``import torch``, and a job process can
compare the two runs' records (torch tensors) without the tool importing torch. The
worker never computes with torch itself (forking after OpenMP threads started is unsafe),
and jobs pin torch to one thread before comparing, for the same reason.
"""

from __future__ import annotations

import gc
import json
import os
import selectors
import signal
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any, BinaryIO, Callable

from .protocol import (
    ENVELOPE_KEYS, PROTOCOL_VERSION, VERSION_KEY, GradcheckRequest, Op, ProtocolError, RunStatus, SideSpec, VerifyRequest,
    WorkerContext, check_version, read_record,
)

if TYPE_CHECKING:
    from .isolation import RunIsolation

JOB_SLACK_S = 15.0


def _saver() -> Callable[[Any, BinaryIO], None]:
    """How run children save their records: with ``torch.save`` as the job holds it now,
    before any run's code has run, so code that patches ``torch.save`` (to blank the
    record of a wrong fix) does not change what the harness writes. What it saves is
    plain data already (`harness.saved`), which the job reads back without running code."""
    import torch

    real_save = torch.save

    def save(record: Any, handle: BinaryIO) -> None:
        real_save(record, handle)

    return save


def _load(fd: int) -> Any:
    """A run's record, from the nameless file the job made for it, unpickled without
    running code: the run could write into that file while it lived, and this process is
    outside its namespaces. A record holding anything but tensors and plain values is
    unreadable, which the run's outcome reports as a harness error."""
    import torch

    with os.fdopen(os.dup(fd), "rb") as handle:
        return torch.load(handle, weights_only=True)


def _limits(request: "VerifyRequest | GradcheckRequest | dict[str, Any]"):
    """The limits of each run of a request (the doctor's is still a plain mapping)."""
    import torch

    from .sandbox import Limits

    if isinstance(request, dict):
        device, timeout, memory_mb = str(request.get("device", "auto")), request.get("timeout", 20.0), request.get("memory_mb", 4096)
    else:
        device, timeout, memory_mb = getattr(request, "device", "auto"), request.timeout, request.memory_mb
    # RLIMIT_AS breaks CUDA (it reserves huge virtual ranges): resident-memory watch only.
    # The client sets PYTORCH_NVML_BASED_CUDA_CHECK=1, so this check does not initialize
    # CUDA in a process that forks afterwards.
    cuda_possible = device != "cpu" and torch.cuda.is_available()
    return Limits(
        timeout=float(timeout),
        memory_mb=int(memory_mb),
        limit_address_space=not cuda_possible,
    )


def _isolation(request: "VerifyRequest | GradcheckRequest | dict[str, Any]", context: WorkerContext | None = None) -> "RunIsolation":
    """The confinement of this request's runs (see `isolation.RunIsolation`), made once
    per job: its `RunForker` holds the job's own PID namespace. The doctor's request is
    a plain mapping with the worker's context merged in."""
    from .isolation import RunIsolation
    from .layout import SYSTEM, environment_paths
    from .namespaces import RunForker

    if isinstance(request, dict):
        context = WorkerContext(**{k: request.get(k) for k in WorkerContext.__dataclass_fields__ if k in request})
        mode, pass_env = str(request.get("isolation") or "auto"), dict(request.get("pass_env") or {})
        folders = (request.get("shadow_base"), request.get("user_root"), request.get("factory_root"))
    else:
        mode, pass_env = getattr(request, "isolation", "auto"), dict(getattr(request, "pass_env", {}))
        folders = (getattr(request, "shadow_base", None), getattr(request, "user_root", None), getattr(request, "factory_root", None))
    context = context or WorkerContext()
    usable = context.isolation_unavailable is None and mode != "off"
    # the project: its shadow copy, the user's folder, and the configuration's folder,
    # where input factories are imported from (a function checked without a file on
    # disk has no shadow copy, but its factories still live there)
    project = tuple(p for p in folders if p)
    return RunIsolation(
        mode=mode,
        forker=RunForker() if usable else None,
        view=context.view,
        pass_env=pass_env,
        read_only=(*SYSTEM, *(context.interpreter_paths or ()), *project, *environment_paths(os.environ)),
        run_uid=context.run_uid,
        memory_cgroup=tuple(context.memory_cgroup) if context.memory_cgroup else None,
        worker_pid=int(context.worker_pid or 0),
    )


def _side_spec(request: VerifyRequest, unit: dict[str, Any], side: str, changed: list[list[int]] | None = None,
               observe: list[str] | None = None, reach: tuple[list[list[int]], list[int]] = ([], [])) -> SideSpec:
    return SideSpec(
        kind=unit["kind"],
        side=side,
        source=unit[side],
        qualname=unit.get("qualname"),
        free_names=tuple(unit.get("free_names") or ()),
        targets=tuple(unit.get("targets") or ()),
        command=unit.get("command"),
        path=request.path or "<string>",
        user_path=request.path,
        user_text=request.user_text,
        relative=request.relative,
        user_root=request.user_root,
        shadow_base=request.shadow_base,
        argv=tuple(request.argv),
        bounds=request.bounds,
        checks=tuple(request.checks or ()),
        timeout=float(request.timeout),
        device=request.device,
        factories=dict(request.factories),
        factory_root=request.factory_root,
        roles=request.roles,
        threads=request.threads,
        changed_lines=changed,
        reach_lines=reach[0],
        anchored_hunks=tuple(reach[1]),
        observe=tuple(observe or ()),
        input_plan=unit.get("input_plan"),
        graph_inputs=tuple(unit.get("graph_inputs") or ()),
        call_site=unit.get("call_site"),
        # the rewritten side calls the original's Function.backward
        counterpart=unit["original"] if side == "rewritten" else None,
        zero_dim_index_as_item=request.legacy_zero_dim_index,
        ipython_lines=dict(request.ipython_lines),
    )


def _checked(outcome: Any) -> Any:
    """A finished run's outcome with its record read back once into a `RunRecord` (its
    version and fields checked); a record of another version or shape makes the outcome
    a harness error that says so."""
    if outcome.status != RunStatus.OK or outcome.record is None:
        return outcome
    try:
        outcome.record = read_record(outcome.record)
    except ProtocolError as exc:
        outcome.status, outcome.detail, outcome.record = RunStatus.HARNESS_ERROR, f"its record does not fit: {exc}", None
    return outcome


def _run_sides(
    request: VerifyRequest, unit: dict[str, Any], sides: tuple[str, ...], isolation: "RunIsolation",
):
    """Run the given `sides` ("original", "rewritten" or both) of `unit`, in parallel."""
    from .bounded import applies, observed_names
    from .coverage import changed_lines, reach_points
    from .harness import run_side, saved
    from .sandbox import spawn, wait_all

    limits = _limits(request)
    pair = changed_lines(unit["original"], unit["rewritten"], path=request.path or "<string>")
    hunks = dict(zip(("original", "rewritten"), pair))
    # a bounded run compares the last values of names both versions assign on changed lines
    observe = observed_names(unit["original"], unit["rewritten"], pair) if applies(unit, request.bounds.settings()) else []
    points = reach_points(unit["original"], unit["rewritten"], path=request.path or "<string>")
    reach = {"original": (points.original, points.anchored_original), "rewritten": (points.rewritten, points.anchored_rewritten)}
    specs = [_side_spec(request, unit, side, hunks[side], observe, reach[side]) for side in sides]
    save = _saver()
    # each child closes every descriptor it inherited: never the other side's pipes
    children = [spawn(lambda spec=spec: saved(run_side(spec)), save, limits, isolation=isolation) for spec in specs]
    return [_checked(outcome) for outcome in wait_all(children, _load)]


def run_verify_job(request: VerifyRequest, context: WorkerContext | None = None) -> dict[str, Any]:
    """Every unit of one patch: each through its best driver (two runs), then the contract."""
    from dataclasses import replace

    import torch

    from .bounded import (DEFAULT_FORWARD_CAP, applies, capping_evaluations_could_help, escaped_stop, evaluation_cut_broke,
                          note_timeouts, shortest_evaluation_could_help)
    from .checks import decided_at_return
    from .input_search import run_searching_inputs
    from .judging import judge_unit
    from .legacy import stopped_at_zero_dim_index

    torch.set_num_threads(1)
    isolation = _isolation(request, context)
    checks = tuple(request.checks or ()) or None
    results = []
    failures: dict[str, dict[str, Any]] = {}

    def run_pair(unit: dict[str, Any]):
        def runs(req: VerifyRequest):
            return run_searching_inputs(req, unit, ("original", "rewritten"), lambda r, u, sides: _run_sides(r, u, sides, isolation))

        used = request
        if applies(unit, request.bounds.settings()) and request.bounds.stop_after and decided_at_return(checks):
            # a contract decided once the changed function has returned: the run ends there
            used = replace(request, bounds=replace(request.bounds, stop_at_return=True))
        outcomes = runs(used)
        if outcomes and stopped_at_zero_dim_index(outcomes[0].record):
            # a pre-0.4 script (`loss.data[0]`) stopped before anything could be compared:
            # again, with 0-dim indexing read as it was written (`legacy`)
            used = replace(used, legacy_zero_dim_index=True)
            outcomes = runs(used)
        if used.bounds.stop_at_return and escaped_stop(outcomes):
            # a graph the changed call recorded outlived it: a later backward could use it, so
            # the stop at its return proves too little; again, with the ordinary stop
            used = replace(used, bounds=replace(used.bounds, stop_at_return=False))
            outcomes = runs(used)
        bounds = used.bounds
        if applies(unit, bounds.settings()) and evaluation_cut_broke(outcomes):
            # both sides stopped at the same error after an evaluation loop was cut: again, evaluations in full
            used = replace(used, bounds=replace(bounds, forward_cap=0))
            outcomes = runs(used)
        elif (applies(unit, bounds.settings()) and bounds.forward_cap is None and outcomes[0].status == RunStatus.TIMEOUT
              and _changed_loop(unit, request.path) and capping_evaluations_could_help(outcomes[0].output)):
            # the evaluation loops the patch changed ran in full and the run did not fit: again, all capped
            # (not when no loop holds a changed line: every evaluation was capped already; nor when the run
            # had not got past as many forwards as a capped evaluation keeps: a second try would be as slow)
            used = replace(used, bounds=replace(bounds, forward_cap=DEFAULT_FORWARD_CAP))
            outcomes = runs(used)
        elif applies(unit, bounds.settings()) and bounds.forward_cap != 1 and shortest_evaluation_could_help(outcomes):
            # even capped, the run did not fit its time or memory limit, though a model forward
            # finished: again, every evaluation loop (and a loop over them) kept at 1 iteration
            used = replace(used, bounds=replace(bounds, forward_cap=1))
            outcomes = runs(used)
        return note_timeouts(outcomes, applies(unit, used.bounds.settings()))

    for unit in request.units:
        for result in judge_unit(unit, run_pair, checks, failures=failures):
            results.append(result.to_json())
    return {"units": results, "driver_failures": failures}


def _changed_loop(unit: dict[str, Any], path: str | None) -> bool:
    """A loop of either version of the changed file holds a changed line."""
    from .bounded import holds_changed_loop
    from .coverage import changed_lines

    hunks = changed_lines(unit["original"], unit["rewritten"], path=path or "<string>")
    return any(holds_changed_loop(unit[side], [line for hunk in side_hunks for line in hunk])
               for side, side_hunks in zip(("original", "rewritten"), hunks))


def run_gradcheck_job(request: GradcheckRequest, context: WorkerContext | None = None) -> dict[str, Any]:
    from .harness import run_gradcheck_file, saved
    from .sandbox import spawn, wait_all

    spec = SideSpec(kind="module", source=request.source, path=request.path or "<string>", threads=request.threads)
    child = spawn(lambda: saved(run_gradcheck_file(spec)), _saver(), _limits(request), isolation=_isolation(request, context))
    (outcome,) = (_checked(o) for o in wait_all([child], _load))
    if outcome.status != "ok" or outcome.record is None:
        return {"error": f"gradcheck run {outcome.detail}", "functions": []}
    record = outcome.record
    if record.exception:
        exc = record.exception
        return {"error": f"the module raised {exc.type}: {exc.message[:300]} while loading", "functions": []}
    return {"error": None, "functions": list(record.functions or [])}


def _runs(units: list[dict[str, Any]]) -> int:
    """Pairs of runs a job may make: each unit and, at worst, each of its fallbacks."""
    return sum(1 + _runs(unit.get("fallbacks") or []) for unit in units)


def _job_deadline(request: "VerifyRequest | GradcheckRequest | dict[str, Any]") -> float:
    if isinstance(request, dict):
        units, timeout = request.get("units") or [], request.get("timeout", 20.0)
    else:
        units, timeout = list(getattr(request, "units", ())), request.timeout
    runs = max(1, _runs(units))
    # two runs in parallel, a short input search (at most half a timeout), one re-run
    return time.monotonic() + runs * 3 * float(timeout) + JOB_SLACK_S


def _prewarm() -> None:
    """Import (without computing) everything a job and a run child need, once."""
    import torch.optim.lr_scheduler  # noqa: F401
    import torch.testing  # noqa: F401
    import torch.autograd.gradcheck  # noqa: F401

    from . import binding, bounded, contracts, evidence, gradcheck, harness, input_search, probes, sandbox, shapes, targets  # noqa: F401

    try:
        import numpy  # noqa: F401
    except ImportError:  # pragma: no cover
        pass
    _warm_up()


_WARM_UP_SOURCE = """
import torch
from torch import nn

class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x).relu()

def _train(model, loader, optimizer, criterion):
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.detach()
"""


def _warm_up() -> None:
    """Run one tiny unit in-process so every fork inherits torch's first-call set-up
    (dispatcher, kernels, serialization) instead of paying it per run. One thread, so
    no OpenMP pool exists at fork time."""
    import tempfile

    import torch

    from .contracts import evaluate
    from .harness import run_side, saved
    from .sandbox import Outcome

    torch.set_num_threads(1)
    spec = SideSpec(kind="function", source=_WARM_UP_SOURCE, qualname="_train", path="<warm-up>", device="cpu", isolate=False)
    try:
        record = run_side(spec)
        with tempfile.TemporaryFile() as handle:
            _saver()(saved(record), handle)
            handle.flush()
            handle.seek(0)
            record = read_record(_load(handle.fileno()))
        outcome = Outcome("ok", "finished", 0.0, "", 0, record=record)
        evaluate("warm-up", "function", "function", outcome, outcome, None)
    except Exception:  # noqa: BLE001 - warming is an optimization only
        pass
    sys.modules.pop("__autograd_fix_unit__", None)


def _decode(message: Any) -> "tuple[Any, VerifyRequest | GradcheckRequest | dict[str, Any] | None]":
    """(id, request) of one message: a typed request, the doctor's mapping, or None for
    a ping; `ProtocolError` for one of another version or shape."""
    if not isinstance(message, dict):
        raise ProtocolError(f"a request must be an object, got {type(message).__name__}")
    ident = message.get("id")
    check_version(message, "request")
    body = {key: value for key, value in message.items() if key not in ENVELOPE_KEYS}
    op = body.get("op")
    if op == Op.PING:
        return ident, None
    if op == Op.VERIFY:
        return ident, VerifyRequest.from_json(body)
    if op == Op.GRADCHECK:
        return ident, GradcheckRequest.from_json(body)
    if op == Op.DOCTOR:
        return ident, body  # `doctor.job`'s own fields
    raise ProtocolError(f"unknown op {op!r} (one of {', '.join(o.value for o in Op)})")


def main() -> None:
    """Serve requests until stdin closes."""
    from .isolation import make_view
    from .namespaces import set_up_worker

    # before torch exists (one thread): namespaces, and whether runs can be confined
    namespaces = set_up_worker()
    keep_fd, unavailable = namespaces.keep_fd, namespaces.unavailable
    try:
        import torch  # noqa: F401 - the point of a warm worker: pay for this once
    except Exception as exc:  # noqa: BLE001 - a broken torch: say so instead of dying unheard
        os.write(1, (json.dumps({"ready": False, "torch_error": f"{type(exc).__name__}: {exc}"}) + "\n").encode())
        return

    _prewarm()
    # Children would otherwise walk (and copy-on-write) every object torch created
    # whenever they collect garbage: freeze them into the permanent generation.
    gc.collect()
    gc.freeze()

    from .sandbox import die_with_parent

    proto_out = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    stdin_fd = sys.stdin.fileno()
    os.set_blocking(stdin_fd, False)
    selector = selectors.DefaultSelector()
    selector.register(stdin_fd, selectors.EVENT_READ, "stdin")
    jobs: dict[int, dict[str, Any]] = {}  # fd -> job
    buffer = b""

    def send(message: dict[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            written = os.write(proto_out, data)
            data = data[written:]

    def start(request: "VerifyRequest | GradcheckRequest | dict[str, Any]", ident: Any) -> None:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.setpgid(0, 0)
                die_with_parent()
                for fd in (read_fd, stdin_fd, proto_out, *jobs, *([keep_fd] if keep_fd is not None else [])):
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                if isinstance(request, VerifyRequest):
                    payload = run_verify_job(request, context)
                elif isinstance(request, GradcheckRequest):
                    payload = run_gradcheck_job(request, context)
                else:
                    from .doctor.job import run_doctor_job

                    payload = run_doctor_job({**request, **context.fields()})
                response = {"id": ident, "ok": True, "result": payload}
            except BaseException as exc:  # noqa: BLE001
                response = {"id": ident, "ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]}
                code = 1
            try:
                data = (json.dumps(response, default=str) + "\n").encode()
                while data:
                    data = data[os.write(write_fd, data):]
            finally:
                os._exit(code)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        jobs[read_fd] = {"pid": pid, "id": ident, "data": b"", "deadline": _job_deadline(request)}
        selector.register(read_fd, selectors.EVENT_READ, "job")

    def finish(fd: int, job: dict[str, Any], timed_out: bool = False) -> None:
        selector.unregister(fd)
        os.close(fd)
        del jobs[fd]
        try:
            os.killpg(job["pid"], signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.waitpid(job["pid"], 0)
        except ChildProcessError:
            pass
        if timed_out:
            send({"id": job["id"], "ok": False, "error": "verification job exceeded its deadline and was killed"})
            return
        try:
            send(json.loads(job["data"].decode()))
        except ValueError:
            send({"id": job["id"], "ok": False, "error": "verification job died without answering"})

    pid = namespaces.outer_pid or os.getpid()  # the process the tool started (inside, this one is pid 2)
    view = make_view(pid)  # empty: each run binds its own folder here
    from . import cgroup
    from .layout import interpreter_paths

    memory = cgroup.base()
    if isinstance(memory, tuple):
        cgroup.remove_stale(memory[0])
    # what runs read of the interpreter, once torch (and its libraries) are loaded
    context = WorkerContext(view=view, isolation_unavailable=unavailable, run_uid=namespaces.run_uid,
                            interpreter_paths=tuple(interpreter_paths()), worker_pid=pid,
                            memory_cgroup=memory if isinstance(memory, tuple) else None)
    send({"ready": True, "pid": pid, "torch": torch.__version__, "isolation_unavailable": unavailable,
          VERSION_KEY: PROTOCOL_VERSION})
    try:
        while True:
            for key, _ in selector.select(0.1):
                if key.data == "stdin":
                    try:
                        chunk = os.read(stdin_fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        return
                    buffer += chunk
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        if not line.strip():
                            continue
                        message = None
                        try:
                            message = json.loads(line)
                            ident, request = _decode(message)
                        except (ValueError, ProtocolError) as exc:
                            ident = message.get("id") if isinstance(message, dict) else None
                            send({"id": ident, "ok": False, "error": f"the request was refused: {exc}"})
                            continue
                        if request is None:
                            send({"id": ident, "ok": True, "result": "pong"})
                        else:
                            start(request, ident)
                else:
                    fd = key.fd
                    job = next(j for f, j in jobs.items() if f == fd)
                    try:
                        chunk = os.read(fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    if chunk:
                        job["data"] += chunk
                    else:
                        finish(fd, job)
            now = time.monotonic()
            for fd, job in list(jobs.items()):
                if now > job["deadline"]:
                    finish(fd, job, timed_out=True)
    finally:
        for job in jobs.values():
            try:
                os.killpg(job["pid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.rmdir(view)
        except OSError:
            pass


if __name__ == "__main__":
    main()
