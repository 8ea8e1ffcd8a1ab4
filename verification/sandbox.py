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

The record is evidence only if the harness wrote it, not the code under test: the file
is made by the parent before the fork and has no name (``O_TMPFILE``, or unlinked at
once), so a record the code writes to some path, one captured from another run's
correct fix say, is never read; and what the harness writes, after the run's code has
returned, carries a nonce drawn for this run alone, which a replayed record lacks. The
harness saves with the ``torch.save`` the job held before the run started (`save`), so
a run that patches ``torch.save`` changes nothing. Code that digs the nonce out of its
own process's memory could still forge a record: this raises the bar, it does not make
forging impossible for code that runs in the same process as its harness.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import resource
import selectors
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable

from .cgroup import RunCgroup
from .isolation import RunIsolation, as_seen_from, scrub_environment
from .layout import SHM_SIZE_MB, TMP_SIZE_MB
from .namespaces import ROOT_SUFFIX, Namespace, confine
from .protocol import RunStatus

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
    #: processes and threads a run may have at once (RLIMIT_NPROC, counted per run: each
    #: confined run is alone in a user namespace of its own); DataLoader workers and
    #: torch's threads fit many times over, a fork bomb does not
    processes: int = 1024


@dataclass
class Outcome:
    """How a child ended, with what it printed and (if any) the record it wrote."""

    status: RunStatus  # given as the enum or its value ("ok", "timeout", ...)
    detail: str
    duration_s: float
    output: str
    output_bytes: int
    #: what the run saved: plain data from `wait_all`, a `protocol.RunRecord` once the job
    #: read it back (`worker._checked`); the doctor's run keeps its own plain record
    record: Any = None
    returncode: int | None = None

    def __post_init__(self) -> None:
        self.status = RunStatus(self.status)


@dataclass
class Child:
    pid: int
    fd: int
    workdir: str
    #: the record's nameless file (see the module docstring) and this run's nonce in it
    record_fd: int
    nonce: str
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
    #: the run's memory cgroup, removed once it is reaped (None: none made)
    cgroup: RunCgroup | None = None

    def take(self, data: bytes) -> None:
        self.total += len(data)
        room = self.limits.output_cap - self.kept
        if room > 0:
            self.chunks.append(data[:room])
            self.kept += min(room, len(data))


#: where a run child holds its record file (one number for both sides of a patch)
RECORD_FD = 200
#: the key of a record's nonce (the record itself is under "record")
NONCE_KEY = "autograd_fix_nonce"


def _nameless_file(folder: str) -> int:
    """A read-write file in `folder` that no path leads to, on a descriptor above 2 (a job
    runs with its standard streams closed, and the child points 0-2 elsewhere)."""
    try:
        fd = os.open(folder, os.O_TMPFILE | os.O_RDWR, 0o600)
    except (AttributeError, OSError):  # pragma: no cover - a file system without O_TMPFILE
        fd, path = tempfile.mkstemp(dir=folder)
        os.unlink(path)
    if fd > 2:
        return fd
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD, 3)
    finally:
        os.close(fd)


def spawn(
    target: Callable[[], Any], save: Callable[[Any, BinaryIO], None], limits: Limits, *, isolation: RunIsolation | None = None,
) -> Child:
    """Fork a child that runs `target()` in a fresh temp dir (confined as `isolation`
    says) and saves its result."""
    workdir = tempfile.mkdtemp(prefix="agf-run-")
    record_fd, nonce = _nameless_file(workdir), os.urandom(16).hex()
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    confined = isolation is not None and isolation.namespaces
    cgroup = None
    if confined and isolation.memory_cgroup and limits.memory_mb > 0:
        # memfd and the private tmpfs folders count too: the limit leaves room for those
        cgroup = RunCgroup.make(*isolation.memory_cgroup, isolation.worker_pid, limits.memory_mb + SHM_SIZE_MB + TMP_SIZE_MB)
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
            if cgroup is not None:
                cgroup.join()  # before anything is allocated
            os.close(read_fd)
            # the same number on both sides: a run that lists its descriptors sees equal lists
            if record_fd != RECORD_FD:
                os.dup2(record_fd, RECORD_FD)
                os.close(record_fd)
                record_fd = RECORD_FD
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(write_fd, 1)
            os.dup2(write_fd, 2)
            os.close(write_fd)
            # nothing inherited but the standard streams and the record: not the other
            # side's pipes, the job's or the worker's descriptors
            os.closerange(3, RECORD_FD)
            os.closerange(RECORD_FD + 1, _fd_ceiling())
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
                here = confine(workdir, isolation.view, isolation.read_only, isolation.run_uid)
                # per run (its own user namespace counts only its processes)
                resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes,) * 2)
            if isolation is not None and isolation.scrub:
                scrub_environment(here, isolation.pass_env)
            elif isolation is not None:
                os.environ.update(isolation.pass_env)
            os.chdir(here)
            result = target()
            if isolation is not None and isolation.scrub and isolation.view and here != isolation.view:
                result = as_seen_from(result, here, isolation.view)
            os.ftruncate(record_fd, 0)  # whatever the code wrote into it is gone
            os.lseek(record_fd, 0, os.SEEK_SET)
            with os.fdopen(os.dup(record_fd), "wb") as handle:
                save({NONCE_KEY: nonce, "record": result}, handle)
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
    return Child(pid, read_fd, workdir, record_fd, nonce, now + limits.timeout, now, limits, namespace=namespace, cgroup=cgroup)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def wait_all(children: list[Child], load: Callable[[int], Any]) -> list[Outcome]:
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


def _outcome(child: Child, load: Callable[[int], Any]) -> Outcome:
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
            if sig == signal.SIGKILL and child.cgroup is not None and child.cgroup.oom_killed():
                return Outcome("memory", f"exceeded the memory limit ({child.limits.memory_mb} MB, memfd and shared memory "
                               "counted; killed)", **common)
            return Outcome("crashed", f"crashed with {name}", **common)
        code = os.WEXITSTATUS(status)
        if code == HARNESS_FAILED:
            tail = output.strip().splitlines()[-1:] or ["unknown error"]
            if "MemoryError" in output or "can't allocate memory" in output:
                return Outcome("memory", f"ran out of memory under the {child.limits.memory_mb} MB limit", **common, returncode=code)
            return Outcome("harness_error", f"the verification harness failed: {tail[0][:300]}", **common, returncode=code)
        if code != 0 or os.fstat(child.record_fd).st_size == 0:
            return Outcome("exited", f"exited early with status {code} (os._exit or a hard exit in the code)", **common, returncode=code)
        try:
            os.lseek(child.record_fd, 0, os.SEEK_SET)
            saved = load(child.record_fd)
        except Exception as exc:  # noqa: BLE001
            return Outcome("harness_error", f"its record could not be read: {exc}", **common, returncode=code)
        if not isinstance(saved, dict) or saved.get(NONCE_KEY) != child.nonce:
            return Outcome("harness_error", "its record was not written by the verification harness (the code wrote or "
                           "replaced it); nothing to compare", **common, returncode=code)
        return Outcome("ok", "finished", **common, record=saved.get("record"), returncode=code)
    finally:
        os.close(child.record_fd)
        _remove_tree(child.workdir)
        if child.cgroup is not None:
            child.cgroup.remove()


def _remove_tree(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
    try:
        os.rmdir(path + ROOT_SUFFIX)  # where a confined run's root was mounted (empty here)
    except OSError:
        pass


def _fd_ceiling() -> int:
    """One past the highest descriptor this process may hold."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if 0 < soft < 1 << 20 else 1 << 20
