"""Linux namespaces that confine a verification run (see `isolation` for the policy).

Verification runs the user's code (a ``__main__`` block, a pytest node, a training
step) twice per patch. That code may write checkpoints to absolute paths, post to a
webhook, read cloud keys from the environment or daemonise. So, on Linux:

- the worker enters a **user** namespace first thing (`enter_worker`; the caller's uid
  and gid mapped to themselves), where it holds the capabilities the rest needs without
  privileges, and a **PID** namespace of its own (nothing it started outlives it);
- each run child is forked by its job (`RunForker`) into a **PID** namespace of its own,
  as pid 2 under a ``cat`` as pid 1 (a pid 1 would ignore signals it has no handler for):
  when the run ends the job kills that pid 1 and the kernel kills everything left, so a
  ``setsid`` plus double fork cannot outlive the run, and nothing outside (the job, the
  worker, the tool, the user's shell) is visible or signalable from inside;
- the run child then enters (`confine`) a **network** namespace with nothing in it
  (loopback down: every ``connect`` fails with "Network is unreachable", abstract Unix
  sockets of the host are out of reach), and a **mount** namespace where every mount is
  bind-remounted read-only, except the run's own folder (its copy of the project,
  ``HOME`` and ``TMPDIR``), a private ``/dev/shm`` and a fresh ``/proc`` that shows only
  the run's processes; ``/run`` and ``/var/run`` (daemon sockets: docker, dbus) are
  hidden under an empty read-only tmpfs;
- finally it enters a second, nested user namespace: it keeps no capability over the
  mounts it was given, so it cannot remount them writable or unmount the masks.

Why ``unshare(2)`` through ``ctypes`` and not bubblewrap: bubblewrap is a separate
binary (not installed on the CI machines or most laptops) that would have to *exec* the
run, while the warm worker's point is that a run is a ``fork`` of a process that already
imported torch (milliseconds instead of seconds); ``bwrap`` cannot confine an already
running Python process. Namespaces need nothing but the kernel, and per run they cost a
``posix_spawn`` of the pid 1 and a few dozen ``mount`` calls: a few milliseconds, no
extra fork.

Where the kernel refuses (no user namespaces: macOS, a hardened kernel, a container
without ``CLONE_NEWUSER``), `set_up_worker` says why; runs then go unisolated with a
notice (``isolation = "auto"``), or not at all (``isolation = "required"``).
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import tempfile
from dataclasses import dataclass

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
#: the size of a run's private /dev/shm (DataLoader workers pass batches through it)
SHM_SIZE_MB = 512
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
#: mount flags a less privileged namespace may not drop: kept on every remount
_LOCKED = MS_NOSUID | MS_NODEV | MS_NOEXEC

#: set (to anything) in the tool's environment, runs go without namespaces as where the
#: kernel refuses them (to try a project's runs unisolated, and to test that path)
DISABLE_VARIABLE = "AUTOGRAD_FIX_NO_NAMESPACES"
#: folders where daemons keep their Unix sockets (a read-only mount does not stop a connect)
_SOCKET_FOLDERS = ("/run", "/var/run", "/tmp/.X11-unix")



class IsolationError(OSError):
    """The namespaces could not be set up."""


# -- set-up, in a forked run child ---------------------------------------------------
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise IsolationError(err, f"{what}: {os.strerror(err)}")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _new_user_namespace(libc: ctypes.CDLL, flags: int) -> None:
    """unshare `flags` (with CLONE_NEWUSER) and map our uid and gid onto themselves."""
    uid, gid = os.geteuid(), os.getegid()
    _check(libc.unshare(CLONE_NEWUSER | flags), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


def _mount(libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags), encode(data)), f"mount {target}")


def _mount_points() -> list[str]:
    """Every mount point of this mount namespace, parents first."""
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
        for line in handle:
            fields = line.split()
            if len(fields) > 4:
                points.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return sorted(set(points), key=lambda p: (p.count("/"), p))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _read_only_everywhere(libc: ctypes.CDLL, keep: tuple[str, ...]) -> None:
    """Bind-remount every mount read-only but those at or under `keep`."""
    for point in _mount_points():
        if any(_inside(point, k) for k in keep):
            continue
        try:
            flags = os.statvfs(point).f_flag
        except OSError:
            continue  # a mount point we cannot reach (overmounted, gone): nothing to write through
        if flags & os.ST_RDONLY:
            continue
        locked = flags & _LOCKED
        try:
            _mount(libc, None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | locked)
        except IsolationError as exc:
            if _inside(point, "/proc"):
                continue  # replaced by a fresh proc below
            raise IsolationError(exc.errno, f"cannot make {point} read-only: {exc.strerror}") from exc


def _confine_files(libc: ctypes.CDLL, workdir: str, seen_at: str, needed: tuple[str, ...]) -> None:
    """The mount namespace's layout (see the module docstring); `needed` are folders the
    run reads (the shadow copy's base, the user's tree for large linked files)."""
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
    _mount(libc, workdir, seen_at, None, MS_BIND | MS_REC)
    _read_only_everywhere(libc, (seen_at,))
    for folder in _SOCKET_FOLDERS:
        if os.path.isdir(folder) and not os.path.islink(folder) and not any(_inside(p, folder) for p in (seen_at, *needed)):
            try:
                _mount(libc, "tmpfs", folder, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=755")
            except IsolationError:
                pass  # best effort: a socket there stays reachable (documented)
    if os.path.isdir("/dev/shm"):
        # sized: an unsized tmpfs let a run hold 1 GB of memory past its limit
        _mount(libc, "tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={SHM_SIZE_MB}m")
    try:
        _mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except IsolationError as exc:  # a container that masks parts of /proc refuses this
        raise IsolationError(exc.errno, f"cannot mount a /proc of the run's own: {exc.strerror}") from exc
    # the kernel's settings read-only: run as root, uid 0 in here is the real uid 0, and
    # a writable kernel.core_pattern ("|program") runs a program as root outside
    _mount(libc, "/proc/sys", "/proc/sys", None, MS_BIND | MS_REC)
    _mount(libc, None, "/proc/sys", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _spawn_init(read_fd: int) -> int:
    """The new PID namespace's pid 1: ``cat`` reading a pipe only the job holds open, so
    it (and with it everything in the namespace) ends when the job does, if the job does
    not end it first. Spawned, not forked: a fork of a process that imported torch costs
    tens of milliseconds, a spawn well under one."""
    cat = next((p for p in ("/usr/bin/cat", "/bin/cat") if os.access(p, os.X_OK)), None)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        if cat is not None:
            actions = [(os.POSIX_SPAWN_DUP2, read_fd, 0), (os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
            try:
                return os.posix_spawn(cat, [cat], {}, file_actions=actions, setpgroup=0,
                                      setsigdef=(signal.SIGINT, signal.SIGTERM))
            except OSError:
                pass
        pid = os.fork()
        if pid == 0:  # pragma: no cover - only without cat
            try:
                os.setpgid(0, 0)
                while os.read(read_fd, 1):
                    pass
            finally:
                os._exit(0)
        return pid
    finally:
        os.close(devnull)


@dataclass(frozen=True)
class Namespace:
    """One run's PID namespace, seen from the job: its pid 1 and the pipe end that keeps
    that pid 1 alive."""

    init_pid: int
    keep_fd: int

    def end(self) -> None:
        """Kill its pid 1; the kernel then kills everything left in the namespace, and the
        wait returns once all of it is gone."""
        try:
            os.close(self.keep_fd)
        except OSError:  # pragma: no cover
            pass
        try:
            os.kill(self.init_pid, signal.SIGKILL)
            os.waitpid(self.init_pid, 0)
        except (ProcessLookupError, ChildProcessError):  # pragma: no cover
            pass


@dataclass(frozen=True)
class WorkerSetUp:
    """What `set_up_worker` did: the pipe end that keeps the worker's PID namespace alive
    (None: none made), the pid the tool knows the worker by (None: this process's), and
    why runs cannot be confined here (None: they can)."""

    keep_fd: int | None = None
    outer_pid: int | None = None
    unavailable: str | None = None


def enter_worker() -> tuple[int, int]:
    """In the worker, first thing (one thread, no torch yet): a user namespace where it
    holds every capability, and a PID namespace, entered by forking: the process the tool
    started stays outside, waits and leaves with the worker's status, and what returns
    here is the worker inside, pid 2 under a ``cat`` as pid 1. (A process whose children
    are born in another PID namespace than its own cannot start threads, so the worker
    must live inside.) Its jobs can then give each run a PID namespace of its own
    (`RunForker`), and nothing the worker started outlives it: when it dies, the returned
    pipe end closes, the ``cat`` ends, and the kernel kills what is left.

    Returns (that pipe end, the outer pid); raises IsolationError when the kernel refuses."""
    libc = _libc()
    outer_pid = os.getpid()
    _new_user_namespace(libc, CLONE_NEWPID)
    read_fd, keep_fd = os.pipe()
    try:
        _spawn_init(read_fd)
        pid = os.fork()
    finally:
        os.close(read_fd)
    if pid:
        _stay_outside(pid)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != 0:  # pragma: no cover - the outer process died before the prctl
        os._exit(1)
    return keep_fd, outer_pid


def _stay_outside(pid: int) -> None:
    """The process the tool started: wait for the worker and leave as it did. Ctrl-C is
    the worker's to handle; never returns."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:  # pragma: no cover
            continue
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


class RunForker:
    """In a job (born in the worker's PID namespace, see `enter_worker`): forks each run
    child into a fresh PID namespace, as pid 2 under a ``cat`` as pid 1, so signals keep
    their meaning for the run (a pid 1 ignores those it has no handler for) and a run
    costs one fork, as without isolation."""

    def __init__(self) -> None:
        self._libc = _libc()
        self._own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)

    def fork(self) -> tuple[int, Namespace | None]:
        """``os.fork`` into a new PID namespace: (0, None) in the child; (its pid, its
        namespace) in the job, whose own later children are born outside it again."""
        _check(self._libc.unshare(CLONE_NEWPID), "unshare")
        read_fd, keep_fd = os.pipe()
        init_pid = None
        try:
            init_pid = _spawn_init(read_fd)
            pid = os.fork()
        except BaseException:
            if init_pid is not None:
                Namespace(init_pid, keep_fd).end()
            else:
                os.close(keep_fd)
            self._born_outside()
            raise
        finally:
            os.close(read_fd)
        if pid == 0:
            os.close(keep_fd)
            os.close(self._own_pid_ns)
            return 0, None
        self._born_outside()
        return pid, Namespace(init_pid, keep_fd)

    def _born_outside(self) -> None:
        """The job's next children are born in its own PID namespace again."""
        _check(self._libc.setns(self._own_pid_ns, CLONE_NEWPID), "setns")


def confine(workdir: str, view: str | None, needed: tuple[str, ...] = ()) -> str:
    """In a run child forked by `JobNamespaces.fork`: its own mount and network
    namespaces (laid out as the module docstring says), then a nested user namespace
    that keeps no capability over them. Returns where the run now sees `workdir`."""
    libc = _libc()
    # System V shared memory, semaphores and message queues of its own: none outlives it
    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC), "unshare")
    seen_at = view if view and os.path.isdir(view) else workdir
    _confine_files(libc, workdir, seen_at, needed)
    _new_user_namespace(libc, 0)
    return seen_at


def probe() -> str | None:
    """None when runs can be confined here, else why not. Call after `enter_worker`: a
    throwaway job forks one run, which checks that it cannot write outside its folder."""
    folder = tempfile.mkdtemp(prefix="agf-probe-")
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read_fd)
            run, namespace = RunForker().fork()
            if run:
                os.waitpid(run, 0)
                namespace.end()
                code = 0
            else:
                confine(folder, None)
                try:
                    open(f"{folder}-escape", "w").close()
                    message = "a write outside the run's folder succeeded"
                except OSError:
                    message = "ok"
                os.write(write_fd, message.encode())
                code = 0
        except BaseException as exc:  # noqa: BLE001 - report, whatever it was
            try:
                os.write(write_fd, str(exc).encode()[:500] or b"the namespace set-up failed")
            except OSError:
                pass
        finally:
            os._exit(code)
    answer = _answer(pid, read_fd, write_fd, "the namespace set-up failed")
    shutil.rmtree(folder, ignore_errors=True)
    if os.path.exists(f"{folder}-escape"):
        os.unlink(f"{folder}-escape")
    return answer


def _answer(pid: int, read_fd: int, write_fd: int, silent: str) -> str | None:
    """What a throwaway child wrote before it (and its own children) ended: None for
    "ok", `silent` when it wrote nothing, else the text."""
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 4096):
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    answer = b"".join(chunks).decode(errors="replace")
    return None if answer == "ok" else (answer or silent)


def set_up_worker() -> WorkerSetUp:
    """The worker's namespaces (`enter_worker`) and whether runs can be confined."""
    if os.environ.get(DISABLE_VARIABLE):
        return WorkerSetUp(unavailable=f"turned off by {DISABLE_VARIABLE}")
    if not hasattr(os, "fork") or not os.path.exists("/proc/self/uid_map"):
        return WorkerSetUp(unavailable="this system has no Linux user namespaces")
    try:
        keep_fd, outer_pid = enter_worker()
    except OSError as exc:
        return WorkerSetUp(unavailable=str(exc))
    return WorkerSetUp(keep_fd, outer_pid, probe())


def check() -> str | None:
    """What `set_up_worker` would answer, asked in a throwaway child, so that the calling
    process keeps its own namespaces (for tests and diagnostics)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            why = set_up_worker().unavailable
            os.write(write_fd, b"ok" if why is None else why.encode()[:500] or b"failed")
        finally:
            os._exit(0)
    return _answer(pid, read_fd, write_fd, "the check failed")
