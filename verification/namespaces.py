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
  sockets of the host are out of reach), an **IPC** namespace, and a **mount** namespace
  whose whole file system is the allowlist of `layout` bound on an empty ``tmpfs``
  (`_build_root`, then ``pivot_root`` and the old root detached): read-only but the
  run's own folder (its copy of the project, ``HOME`` and ``TMPDIR``) and a private
  ``/tmp`` and ``/dev/shm``; a ``/dev`` of a few nodes; a fresh ``/proc`` that shows
  only the run's processes, its kernel knobs read-only;
- finally it drops every privilege (`_drop_privileges`): as root it becomes `RUN_UID`
  (mapped in the worker's namespace by a helper outside it), then it enters a nested
  user namespace that owns none of its mounts (it cannot remount them writable or
  unmount them), empties its capability sets, locks securebits, sets ``no_new_privs``
  and joins a fresh session keyring.

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
import errno
import os
import re
import shutil
import signal
import tempfile
from dataclasses import dataclass

from .layout import (DEVICE_LINKS, DEVICES, PROC_HIDDEN, PROC_READ_ONLY, SHM_SIZE_MB, SYSTEM_SECRETS, TMP_SIZE_MB,
                     Layout, gpu_devices, minimal)

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
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
#: the empty folder beside a run's folder where its new root is mounted (in its own
#: mount namespace only; the job removes the folder with the run's)
ROOT_SUFFIX = ".root"
MNT_DETACH = 2
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217}.get(os.uname().machine, 155)
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "ppc64le": 271, "s390x": 280}.get(os.uname().machine, 250)
KEYCTL_JOIN_SESSION_KEYRING = 1
#: the uid and gid a run gets when the tool runs as root: an unprivileged one ("nobody"),
#: so that the files of root it can see are not its own, and the kernel's settings,
#: /dev/kmsg and root's keys are out of reach
RUN_UID = 65534
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
#: securebits: root gets no capabilities from exec or setuid, locked
_SECURE_NOROOT = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x80


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


def _root_user_namespace(libc: ctypes.CDLL, flags: int) -> int | None:
    """As root: unshare `flags` with CLONE_NEWUSER, mapping uid and gid 0 and also
    `RUN_UID`, for runs to become (only a process outside the new namespace may map
    more than its own uid: a helper forked before the unshare writes the maps). Returns
    `RUN_UID`, or None where that mapping was refused (a container whose root cannot map
    it): then only 0 is mapped, as `_new_user_namespace` does."""
    me = os.getpid()
    go_read, go_write = os.pipe()
    done_read, done_write = os.pipe()
    helper = os.fork()
    if helper == 0:
        code = 1
        try:
            os.close(go_write)
            os.close(done_read)
            if os.read(go_read, 1) == b"1":
                lines = f"0 0 1\n{RUN_UID} {RUN_UID} 1\n"
                _write(f"/proc/{me}/uid_map", lines)
                _write(f"/proc/{me}/gid_map", lines)
                os.write(done_write, b"ok")
            code = 0
        except BaseException:  # noqa: BLE001 - the worker falls back to mapping 0 alone
            pass
        finally:
            os._exit(code)
    os.close(go_read)
    os.close(done_write)
    try:
        failed = libc.unshare(CLONE_NEWUSER | flags)
        errno_ = ctypes.get_errno()
        os.write(go_write, b"0" if failed else b"1")
        answer = os.read(done_read, 2)
    finally:
        os.close(go_write)
        os.close(done_read)
        os.waitpid(helper, 0)
    if failed:
        raise IsolationError(errno_, f"unshare: {os.strerror(errno_)}")
    if answer == b"ok":
        return RUN_UID
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", "0 0 1")
    _write("/proc/self/gid_map", "0 0 1")
    return None


def _drop_privileges(libc: ctypes.CDLL, run_uid: int | None) -> None:
    """The run's last step in: `run_uid` (as root: an unprivileged uid), a nested user
    namespace that owns none of its mounts, no capability even there (bounding and
    ambient sets empty, securebits so that exec as uid 0 gives none back), no new
    privileges through set-uid programs, and a session keyring of its own."""
    if run_uid is not None:
        os.setgroups([])
        os.setresgid(run_uid, run_uid, run_uid)
        os.setresuid(run_uid, run_uid, run_uid)
        # a change of uid makes the process undumpable, its /proc/self files root's:
        # the uid map below could not be written
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    _new_user_namespace(libc, 0)
    libc.prctl(PR_SET_SECUREBITS, _SECURE_NOROOT, 0, 0, 0)
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            last = int(handle.read())
    except (OSError, ValueError):  # pragma: no cover
        last = 63
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: none, both words
    _check(libc.capset(header, data), "capset")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    # a fresh, empty session keyring: the user's keys (and keys planted for later) are
    # not the run's (where keyctl is refused, seccomp in a container, there are none)
    libc.syscall(_SYS_KEYCTL, KEYCTL_JOIN_SESSION_KEYRING, None)


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


def _read_only_everywhere(libc: ctypes.CDLL, writable: tuple[str, ...]) -> None:
    """Bind-remount every mount read-only but the mount points in `writable` and
    ``/proc`` (whose own knobs `_mount_proc` made read-only)."""
    for point in _mount_points():
        if point in writable or _inside(point, "/proc"):
            continue
        try:
            flags = os.statvfs(point).f_flag
        except OSError:
            continue  # a mount point we cannot reach (overmounted, gone): nothing to write through
        if flags & os.ST_RDONLY:
            continue
        try:
            _mount(libc, None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | (flags & _LOCKED))
        except IsolationError as exc:
            raise IsolationError(exc.errno, f"cannot make {point} read-only: {exc.strerror}") from exc


def _make(root: str, path: str, folder: bool) -> bool:
    """`path` (no link in it) under `root`: folders made as needed, the last one a file
    unless `folder`. False where that cannot be (inside a read-only bind)."""
    target = root + path
    if os.path.lexists(target):
        return True
    try:
        os.makedirs(target if folder else os.path.dirname(target), mode=0o755, exist_ok=True)
        if not folder:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))
    except OSError:
        return False
    return True


def _mirror_links(root: str, path: str, depth: int = 0) -> None:
    """The links on the way to `path` (``/lib -> usr/lib``, ``/home -> /data/home``),
    made under `root` as they are, so the path means there what it means here."""
    parts = [p for p in path.split("/") if p]
    for index in range(1, len(parts) + 1):
        here = "/" + "/".join(parts[:index])
        if os.path.islink(here):
            if not os.path.lexists(root + here) and _make(root, os.path.dirname(here), True):
                try:
                    os.symlink(os.readlink(here), root + here)
                except OSError:
                    return
            if depth < 40:
                rest = "/".join(parts[index:])
                _mirror_links(root, os.path.join(os.path.realpath(here), rest), depth + 1)
            return


def _bind(libc: ctypes.CDLL, root: str, path: str, bound: list[str]) -> None:
    """Bind `path` (its real path) at the same place under `root`, unless it is already
    there inside an earlier bind; read-only comes with `_read_only_everywhere`."""
    if not os.path.lexists(path):
        return
    _mirror_links(root, path)
    real = os.path.realpath(path)
    if any(_inside(real, b) for b in bound) or not os.path.exists(real):
        return
    if not _make(root, real, os.path.isdir(real)):
        return
    _mount(libc, real, root + real, None, MS_BIND | MS_REC)
    bound.append(real)


def _make_dev(libc: ctypes.CDLL, root: str) -> None:
    """A ``/dev`` of a few nodes (no ``/dev/kmsg``, no disks, no terminals) and a private,
    sized ``/dev/shm``."""
    _make(root, "/dev", True)
    _mount(libc, "tmpfs", root + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=64k")
    for name in (*DEVICES, *gpu_devices()):
        source = "/dev/" + name
        if os.path.exists(source) and _make(root, source, os.path.isdir(source)):
            _mount(libc, source, root + source, None, MS_BIND | MS_REC)
    for name, target in DEVICE_LINKS.items():
        os.symlink(target, f"{root}/dev/{name}")
    _make(root, "/dev/shm", True)
    # sized: an unsized tmpfs let a run hold 1 GB of memory past its limit
    _mount(libc, "tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={SHM_SIZE_MB}m")


def _mount_proc(libc: ctypes.CDLL, root: str) -> None:
    """A ``/proc`` of the run's PID namespace; the kernel's settings read-only (run as
    root, uid 0 was the real uid 0, and a writable ``kernel.core_pattern`` runs a program
    as root outside), what tells of other users' keys or kernel memory covered."""
    _make(root, "/proc", True)
    try:
        _mount(libc, "proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except IsolationError as exc:  # a container that masks parts of /proc refuses this
        raise IsolationError(exc.errno, f"cannot mount a /proc of the run's own: {exc.strerror}") from exc
    for name in PROC_READ_ONLY:
        target = f"{root}/proc/{name}"
        if os.path.exists(target):
            _mount(libc, target, target, None, MS_BIND | MS_REC)
            _mount(libc, None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name in PROC_HIDDEN:
        if os.path.exists(f"{root}/proc/{name}"):
            _mount(libc, f"{root}/dev/null", f"{root}/proc/{name}", None, MS_BIND)


def _hide(libc: ctypes.CDLL, root: str, path: str) -> None:
    """Cover `path` under `root` (an empty read-only folder, or an empty file)."""
    target = root + path
    if os.path.isdir(target) and not os.path.islink(target):
        _mount(libc, "tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=755")
    elif os.path.isfile(target) and not os.path.islink(target):
        _mount(libc, f"{root}/dev/null", target, None, MS_BIND)


def _build_root(libc: ctypes.CDLL, layout: Layout) -> None:
    """Make `layout` the run's whole file system (see `layout`): an empty tmpfs, the
    allowlist bound into it, then ``pivot_root`` onto it and the old root detached, so
    nothing else is left in the mount namespace to find."""
    root = layout.run_folder.rstrip("/") + ROOT_SUFFIX
    os.makedirs(root, exist_ok=True)
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
    _mount(libc, "tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m")
    _make(root, "/tmp", True)
    _mount(libc, "tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={TMP_SIZE_MB}m")
    _make_dev(libc, root)
    bound: list[str] = []
    for path in minimal(layout.read_only):
        _bind(libc, root, path, bound)
    for path in SYSTEM_SECRETS:
        if any(_inside(path, b) for b in bound):
            _hide(libc, root, path)
    if os.path.isdir("/sys") and _make(root, "/sys", True):
        _mount(libc, "/sys", root + "/sys", None, MS_BIND | MS_REC)
    if not _make(root, layout.seen_at, True):
        raise IsolationError(errno.EROFS, f"cannot make a place for the run's folder at {layout.seen_at}")
    _mount(libc, layout.run_folder, root + layout.seen_at, None, MS_BIND)
    _mount_proc(libc, root)
    os.chdir(root)
    _check(libc.syscall(_SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    _check(libc.umount2(b".", MNT_DETACH), "umount the old root")
    os.chdir("/")
    _read_only_everywhere(libc, (layout.seen_at, "/tmp", "/dev/shm"))


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
    #: the uid runs take (as root: `RUN_UID`); None: the tool's own
    run_uid: int | None = None


def enter_worker() -> tuple[int, int, int | None]:
    """In the worker, first thing (one thread, no torch yet): a user namespace where it
    holds every capability, and a PID namespace, entered by forking: the process the tool
    started stays outside, waits and leaves with the worker's status, and what returns
    here is the worker inside, pid 2 under a ``cat`` as pid 1. (A process whose children
    are born in another PID namespace than its own cannot start threads, so the worker
    must live inside.) Its jobs can then give each run a PID namespace of its own
    (`RunForker`), and nothing the worker started outlives it: when it dies, the returned
    pipe end closes, the ``cat`` ends, and the kernel kills what is left.

    As root, the namespace maps `RUN_UID` too, the uid runs take (`_root_user_namespace`).

    Returns (that pipe end, the outer pid, the runs' uid or None: the caller's own);
    raises IsolationError when the kernel refuses."""
    libc = _libc()
    outer_pid = os.getpid()
    run_uid = None
    if os.geteuid() == 0:
        run_uid = _root_user_namespace(libc, CLONE_NEWPID)
    else:
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
    return keep_fd, outer_pid, run_uid


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


def confine(workdir: str, view: str | None, read_only: tuple[str, ...] = (), run_uid: int | None = None) -> str:
    """In a run child forked by `RunForker.fork`: its own mount, network and IPC
    namespaces, a file system of `read_only` plus its folder (`layout`), then no
    privilege left (`_drop_privileges`). Returns where the run now sees `workdir`."""
    libc = _libc()
    # System V shared memory, semaphores and message queues of its own: none outlives it
    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC), "unshare")
    seen_at = view if view and os.path.isdir(view) else workdir
    _build_root(libc, Layout(run_folder=workdir, seen_at=seen_at, read_only=read_only))
    if run_uid is not None:
        os.chown(seen_at, run_uid, run_uid)
    _drop_privileges(libc, run_uid)
    return seen_at


def probe(read_only: tuple[str, ...] = (), run_uid: int | None = None) -> str | None:
    """None when runs can be confined here, else why not. Call after `enter_worker`: a
    throwaway job forks one run, which writes beside its folder; the file must not
    appear outside."""
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
                confine(folder, None, read_only, run_uid)
                try:
                    open(f"{folder}-escape", "w").close()
                except OSError:
                    pass
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
    try:
        os.rmdir(folder + ROOT_SUFFIX)
    except OSError:
        pass
    if os.path.exists(f"{folder}-escape"):
        os.unlink(f"{folder}-escape")
        return answer or "a write outside the run's folder succeeded"
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
        keep_fd, outer_pid, run_uid = enter_worker()
    except OSError as exc:
        return WorkerSetUp(unavailable=str(exc))
    from .layout import SYSTEM, interpreter_paths

    return WorkerSetUp(keep_fd, outer_pid, probe(SYSTEM + interpreter_paths(), run_uid), run_uid)


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
