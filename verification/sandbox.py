"""Forked run children with limits: a crash, hang, exit or flood becomes data.

Each child: its own process group (so a kill reaches anything it spawned), dies with its
parent (``PR_SET_PDEATHSIG``), its own temporary working directory, stdin from
/dev/null, stdout and stderr into a pipe the parent drains (keeping the first
`output_cap` bytes: a flood cannot block the child or fill memory), an address-space
limit (``RLIMIT_AS``, CPU runs only: CUDA reserves huge virtual ranges) plus a resident
memory watch by the parent, a CPU-time limit as a backstop, and a wall-clock deadline
enforced by the parent with ``SIGKILL`` to the whole group.

With a `RunIsolation`, the child is forked into its own PID namespace (as pid 2, so
its exit status and signals read as without one), enters its own mount and network
namespaces and gets a scrubbed environment (see `isolation`); once it is reaped, its
namespace's pid 1 is killed, which kills whatever it left, ``setsid`` daemons included.

The child reports through a file (``torch.save``) and the parent trusts it only when the
child exited 0 after writing it: ``os._exit``, ``sys.exit`` from a thread, a segfault or
a kill all leave no record and are described from the wait status instead.
"""

from __future__ import annotations

import ctypes
import os
import resource
import selectors
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from .isolation import RunIsolation, as_seen_from, scrub_environment
from .namespaces import Namespace, confine

PR_SET_PDEATHSIG = 1
HARNESS_FAILED = 86  # exit status of a child whose harness itself failed
_PAGE = os.sysconf("SC_PAGE_SIZE")


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux only)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - non-Linux
        pass


def _vm_size() -> int:
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[0]) * _PAGE
    except OSError:  # pragma: no cover
        return 0


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as handle:
            return int(handle.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


@dataclass
class Limits:
    timeout: float = 20.0
    memory_mb: int = 4096
    output_cap: int = 64 * 1024
    limit_address_space: bool = True
    #: the largest file a run may write (RLIMIT_FSIZE): its folder is on the user's disk
    file_size_mb: int = 1024


@dataclass
class Outcome:
    """How a child ended, with what it printed and (if any) the record it wrote."""

    status: str  # ok | timeout | memory | crashed | exited | harness_error
    detail: str
    duration_s: float
    output: str
    output_bytes: int
    record: dict[str, Any] | None = None
    returncode: int | None = None


@dataclass
class Child:
    pid: int
    fd: int
    workdir: str
    record_path: str
    deadline: float
    started: float
    limits: Limits
    chunks: list[bytes] = field(default_factory=list)
    kept: int = 0
    total: int = 0
    status: int | None = None
    killed_for: str | None = None
    ended: float | None = None
    #: the run's own PID namespace, ended once the run is reaped (None: not isolated)
    namespace: Namespace | None = None

    def take(self, data: bytes) -> None:
        self.total += len(data)
        room = self.limits.output_cap - self.kept
        if room > 0:
            self.chunks.append(data[:room])
            self.kept += min(room, len(data))


RECORD_NAME = ".autograd_fix_record.pt"


def spawn(
    target: Callable[[], Any], save: Callable[[Any, str], None], limits: Limits, *, close_fds: tuple[int, ...] = (),
    isolation: RunIsolation | None = None,
) -> Child:
    """Fork a child that runs `target()` in a fresh temp dir (confined as `isolation`
    says) and saves its result."""
    workdir = tempfile.mkdtemp(prefix="agf-run-")
    record_path = os.path.join(workdir, RECORD_NAME)
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    confined = isolation is not None and isolation.namespaces
    pid, namespace = isolation.forker.fork() if confined else (os.fork(), None)
    if pid == 0:  # child
        code = HARNESS_FAILED
        try:
            # a session of its own: no controlling terminal, so no TIOCSTI into the
            # user's shell and no /dev/tty past the output capture; still its own group
            try:
                os.setsid()
            except OSError:
                os.setpgid(0, 0)
            die_with_parent()
            os.close(read_fd)
            for fd in close_fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(write_fd, 1)
            os.dup2(write_fd, 2)
            os.close(write_fd)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            if limits.limit_address_space and limits.memory_mb > 0:
                budget = _vm_size() + limits.memory_mb * 1024 * 1024
                resource.setrlimit(resource.RLIMIT_AS, (budget, budget))
            cpu = int(limits.timeout * 2) + 5
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            # no file a run writes may fill the disk (it wrote 1 GB to the host's)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_mb * 1024 * 1024,) * 2)
            here = workdir
            if confined:
                here = confine(workdir, isolation.view, isolation.needed)
            if isolation is not None and isolation.scrub:
                scrub_environment(here, isolation.pass_env)
            elif isolation is not None:
                os.environ.update(isolation.pass_env)
            os.chdir(here)
            result = target()
            if isolation is not None and isolation.scrub and isolation.view and here != isolation.view:
                result = as_seen_from(result, here, isolation.view)
            save(result, os.path.join(here, RECORD_NAME))
            code = 0
        except BaseException:  # noqa: BLE001 - report and leave with a known status
            try:
                os.write(2, traceback.format_exc().encode()[-4000:])
            except OSError:
                pass
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except Exception:  # noqa: BLE001
                pass
            os._exit(code)
    os.close(write_fd)
    os.set_blocking(read_fd, False)
    now = time.monotonic()
    return Child(pid, read_fd, workdir, record_path, now + limits.timeout, now, limits, namespace=namespace)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def wait_all(children: list[Child], load: Callable[[str], Any]) -> list[Outcome]:
    """Drain output, enforce deadlines and memory, reap; one Outcome per child."""
    selector = selectors.DefaultSelector()
    for child in children:
        selector.register(child.fd, selectors.EVENT_READ, child)
    running = {child.pid: child for child in children}
    open_fds = {child.fd for child in children}
    last_rss = 0.0
    while running or open_fds:
        now = time.monotonic()
        timeout = 0.02
        if running:
            timeout = max(0.0, min([timeout, *(c.deadline - now for c in running.values())]))
        elif open_fds:
            # exited child whose grandchildren still hold the pipe: give them a moment
            timeout = 0.05
        for key, _ in selector.select(timeout):
            child: Child = key.data
            try:
                data = os.read(child.fd, 65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if data:
                child.take(data)
            else:
                selector.unregister(child.fd)
                os.close(child.fd)
                open_fds.discard(child.fd)
        now = time.monotonic()
        check_rss = now - last_rss > 0.05
        if check_rss:
            last_rss = now
        for pid, child in list(running.items()):
            try:
                # peek first (WNOWAIT): the group is killed while its leader's pid is
                # still ours, so a reused pid can never be hit
                exited = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                exited = None
                del running[pid]
                child.ended = now
                if child.namespace is not None:
                    child.namespace.end()
                continue
            if exited is not None:
                _kill_group(pid)  # anything it left behind
                _, status = os.waitpid(pid, 0)
                if child.namespace is not None:
                    child.namespace.end()  # and anything that left its group
                child.status = status
                child.ended = now
                del running[pid]
                continue
            if now >= child.deadline:
                child.killed_for = "timeout"
                _kill_group(pid)
            elif check_rss and not child.limits.limit_address_space and child.limits.memory_mb > 0:
                if _rss(pid) > child.limits.memory_mb * 1024 * 1024:
                    child.killed_for = "memory"
                    _kill_group(pid)
        if not running:
            for child in children:
                if child.fd in open_fds and child.ended is not None and now - child.ended > 0.5:
                    selector.unregister(child.fd)
                    os.close(child.fd)
                    open_fds.discard(child.fd)
    selector.close()
    return [_outcome(child, load) for child in children]


def _outcome(child: Child, load: Callable[[str], Any]) -> Outcome:
    output = b"".join(child.chunks).decode("utf-8", "replace")
    duration = (child.ended or time.monotonic()) - child.started
    common = {"duration_s": round(duration, 3), "output": output, "output_bytes": child.total}
    status = child.status or 0
    record = None
    try:
        if child.killed_for == "timeout":
            return Outcome("timeout", f"did not finish within {child.limits.timeout:g} s (killed)", **common)
        if child.killed_for == "memory":
            return Outcome("memory", f"exceeded the memory limit ({child.limits.memory_mb} MB resident, killed)", **common)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            if sig == signal.SIGXCPU:
                return Outcome("timeout", "exceeded its CPU-time limit (SIGXCPU)", **common)
            return Outcome("crashed", f"crashed with {name}", **common)
        code = os.WEXITSTATUS(status)
        if code == HARNESS_FAILED:
            tail = output.strip().splitlines()[-1:] or ["unknown error"]
            if "MemoryError" in output or "can't allocate memory" in output:
                return Outcome("memory", f"ran out of memory under the {child.limits.memory_mb} MB limit", **common, returncode=code)
            return Outcome("harness_error", f"the verification harness failed: {tail[0][:300]}", **common, returncode=code)
        if code != 0 or not os.path.exists(child.record_path):
            return Outcome("exited", f"exited early with status {code} (os._exit or a hard exit in the code)", **common, returncode=code)
        try:
            record = load(child.record_path)
        except Exception as exc:  # noqa: BLE001
            return Outcome("harness_error", f"its record could not be read: {exc}", **common, returncode=code)
        return Outcome("ok", "finished", **common, record=record, returncode=code)
    finally:
        _remove_tree(child.workdir)


def _remove_tree(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
