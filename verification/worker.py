"""The warm worker: imports torch once, then forks one job process per request.

Protocol: one JSON object per line on stdin (requests) and on the original stdout
(responses, matched by ``id``); the worker points its own fd 1 at stderr so that nothing
else can write into the protocol stream. Requests: ``{"id", "op": "verify" | "gradcheck"
| "doctor" | "ping", ...}`` (``doctor``: `doctor.job`). EOF on stdin (the tool exited,
however it died) kills every job's process group and ends the worker.

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

if TYPE_CHECKING:
    from .isolation import RunIsolation

JOB_SLACK_S = 15.0


def _saver() -> Callable[[Any, BinaryIO], None]:
    """How run children save their records: with ``torch.save`` as the job holds it now,
    before any run's code has run, so code that patches ``torch.save`` (to blank the
    record of a wrong fix) does not change what the harness writes."""
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


def _limits(request: dict[str, Any]):
    import torch

    from .sandbox import Limits

    device = str(request.get("device", "auto"))
    # RLIMIT_AS breaks CUDA (it reserves huge virtual ranges): resident-memory watch only.
    # The client sets PYTORCH_NVML_BASED_CUDA_CHECK=1, so this check does not initialize
    # CUDA in a process that forks afterwards.
    cuda_possible = device != "cpu" and torch.cuda.is_available()
    return Limits(
        timeout=float(request.get("timeout", 20.0)),
        memory_mb=int(request.get("memory_mb", 4096)),
        output_cap=int(request.get("output_cap", 64 * 1024)),
        limit_address_space=not cuda_possible,
    )


def _isolation(request: dict[str, Any]):
    """The confinement of this request's runs (see `isolation.RunIsolation`), made once
    per job: its `RunForker` holds the job's own PID namespace."""
    from .isolation import RunIsolation
    from .layout import SYSTEM, environment_paths
    from .namespaces import RunForker

    mode = str(request.get("isolation") or "auto")
    usable = request.get("isolation_unavailable") is None and mode != "off"
    # the project: its shadow copy, the user's folder, and the configuration's folder,
    # where input factories are imported from (a function checked without a file on
    # disk has no shadow copy, but its factories still live there)
    project = tuple(p for p in (request.get("shadow_base"), request.get("user_root"), request.get("factory_root")) if p)
    return RunIsolation(
        mode=mode,
        forker=RunForker() if usable else None,
        view=request.get("view"),
        pass_env=dict(request.get("pass_env") or {}),
        read_only=(*SYSTEM, *request.get("interpreter_paths", ()), *project, *environment_paths(os.environ)),
        run_uid=request.get("run_uid"),
        memory_cgroup=tuple(request["memory_cgroup"]) if request.get("memory_cgroup") else None,
        worker_pid=int(request.get("worker_pid") or 0),
    )


def _side_spec(request: dict[str, Any], unit: dict[str, Any], side: str, changed: list[list[int]] | None = None,
               observe: list[str] | None = None) -> dict[str, Any]:
    return {
        "kind": unit["kind"],
        "side": side,
        "source": unit[side],
        "qualname": unit.get("qualname"),
        "free_names": unit.get("free_names") or [],
        "targets": unit.get("targets") or [],
        "command": unit.get("command"),
        "path": request.get("path") or "<string>",
        "user_path": request.get("path"),
        "user_text": request.get("user_text"),
        "relative": request.get("relative"),
        "user_root": request.get("user_root"),
        "shadow_base": request.get("shadow_base"),
        "argv": request.get("argv") or [],
        "bounds": request.get("bounds"),
        "checks": request.get("checks") or [],
        "timeout": float(request.get("timeout", 20.0)),
        "device": request.get("device", "auto"),
        "factories": request.get("factories") or {},
        "factory_root": request.get("factory_root"),
        "roles": request.get("roles"),
        "threads": request.get("threads", 1),
        "changed_lines": changed,
        "observe": observe or [],
        "input_plan": unit.get("input_plan"),
        "graph_inputs": unit.get("graph_inputs") or [],
        "call_site": unit.get("call_site"),
    }


def _run_sides(
    request: dict[str, Any], unit: dict[str, Any], sides: tuple[str, ...], isolation: "RunIsolation",
):
    """Run the given `sides` ("original", "rewritten" or both) of `unit`, in parallel."""
    from .bounded import applies, observed_names
    from .coverage import changed_lines
    from .harness import run_side
    from .sandbox import spawn, wait_all

    limits = _limits(request)
    pair = changed_lines(unit["original"], unit["rewritten"], path=request.get("path") or "<string>")
    hunks = dict(zip(("original", "rewritten"), pair))
    # a bounded run compares the last values of names both versions assign on changed lines
    observe = observed_names(unit["original"], unit["rewritten"], pair) if applies(unit, request.get("bounds")) else []
    specs = [_side_spec(request, unit, side, hunks[side], observe) for side in sides]
    for spec in specs:
        if spec["side"] == "rewritten":
            spec["counterpart"] = unit["original"]  # the rewritten side calls the original's Function.backward
    save = _saver()
    # each child closes every descriptor it inherited: never the other side's pipes
    children = [spawn(lambda spec=spec: run_side(spec), save, limits, isolation=isolation) for spec in specs]
    return wait_all(children, _load)


def run_verify_job(request: dict[str, Any]) -> dict[str, Any]:
    """Every unit of one patch: each through its best driver (two runs), then the contract."""
    import torch

    from .bounded import DEFAULT_FORWARD_CAP, applies, evaluation_cut_broke, note_timeouts
    from .input_search import run_searching_inputs
    from .judging import judge_unit

    torch.set_num_threads(1)
    isolation = _isolation(request)
    checks = tuple(request.get("checks") or ()) or None
    results = []
    failures: dict[str, dict[str, Any]] = {}

    def run_pair(unit: dict[str, Any]):
        def runs(req: dict[str, Any]):
            return run_searching_inputs(req, unit, ("original", "rewritten"), lambda r, u, sides: _run_sides(r, u, sides, isolation))

        outcomes, used = runs(request), request
        bounds = request.get("bounds") or {}
        if applies(unit, bounds) and evaluation_cut_broke(outcomes):
            # both sides stopped at the same error after an evaluation loop was cut: again, evaluations in full
            used = {**request, "bounds": {**bounds, "forward_cap": 0}}
            outcomes = runs(used)
        elif applies(unit, bounds) and bounds.get("forward_cap") is None and outcomes[0].status == "timeout":
            # the evaluation loops the patch changed ran in full and the run did not fit: again, all capped
            used = {**request, "bounds": {**bounds, "forward_cap": DEFAULT_FORWARD_CAP}}
            outcomes = runs(used)
        return note_timeouts(outcomes, applies(unit, used.get("bounds")))

    for unit in request["units"]:
        for result in judge_unit(unit, run_pair, checks, failures=failures):
            results.append(result.to_json())
    return {"units": results, "driver_failures": failures}


def run_gradcheck_job(request: dict[str, Any]) -> dict[str, Any]:
    from .harness import run_gradcheck_file
    from .sandbox import spawn, wait_all

    spec = {"source": request["source"], "path": request.get("path"), "threads": request.get("threads", 1)}
    child = spawn(lambda: run_gradcheck_file(spec), _saver(), _limits(request), isolation=_isolation(request))
    (outcome,) = wait_all([child], _load)
    if outcome.status != "ok" or outcome.record is None:
        return {"error": f"gradcheck run {outcome.detail}", "functions": []}
    record = outcome.record
    if record.get("exception"):
        exc = record["exception"]
        return {"error": f"the module raised {exc['type']}: {exc['message'][:300]} while loading", "functions": []}
    return {"error": None, "functions": record.get("functions", [])}


def _runs(units: list[dict[str, Any]]) -> int:
    """Pairs of runs a job may make: each unit and, at worst, each of its fallbacks."""
    return sum(1 + _runs(unit.get("fallbacks") or []) for unit in units)


def _job_deadline(request: dict[str, Any]) -> float:
    runs = max(1, _runs(request.get("units") or []))
    # two runs in parallel, a short input search (at most half a timeout), one re-run
    return time.monotonic() + runs * 3 * float(request.get("timeout", 20.0)) + JOB_SLACK_S


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
    from .harness import run_side
    from .sandbox import Outcome

    torch.set_num_threads(1)
    spec = {"kind": "function", "source": _WARM_UP_SOURCE, "qualname": "_train", "free_names": [], "path": "<warm-up>",
            "checks": [], "device": "cpu", "isolate": False}
    try:
        record = run_side(spec)
        with tempfile.TemporaryFile() as handle:
            _saver()(record, handle)
            handle.flush()
            handle.seek(0)
            record = _load(handle.fileno())
        outcome = Outcome("ok", "finished", 0.0, "", 0, record=record)
        evaluate("warm-up", "function", "function", outcome, outcome, None)
    except Exception:  # noqa: BLE001 - warming is an optimization only
        pass
    sys.modules.pop("__autograd_fix_unit__", None)


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

    def start(request: dict[str, Any]) -> None:
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
                if request["op"] == "verify":
                    payload = run_verify_job(request)
                elif request["op"] == "doctor":
                    from .doctor.job import run_doctor_job

                    payload = run_doctor_job(request)
                else:
                    payload = run_gradcheck_job(request)
                response = {"id": request["id"], "ok": True, "result": payload}
            except BaseException as exc:  # noqa: BLE001
                response = {"id": request["id"], "ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]}
                code = 1
            try:
                data = (json.dumps(response, default=str) + "\n").encode()
                while data:
                    data = data[os.write(write_fd, data):]
            finally:
                os._exit(code)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        jobs[read_fd] = {"pid": pid, "id": request["id"], "data": b"", "deadline": _job_deadline(request)}
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
    seen = {"view": view, "isolation_unavailable": unavailable, "run_uid": namespaces.run_uid,
            "interpreter_paths": interpreter_paths(), "worker_pid": pid,
            "memory_cgroup": memory if isinstance(memory, tuple) else None}
    send({"ready": True, "pid": pid, "torch": torch.__version__, "isolation_unavailable": unavailable})
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
                        request = json.loads(line)
                        if request.get("op") == "ping":
                            send({"id": request.get("id"), "ok": True, "result": "pong"})
                        else:
                            start({**request, **seen})
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
