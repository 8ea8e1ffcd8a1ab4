"""OS isolation of verification runs: namespaces, a read-only file system, a scrubbed
environment.

Verification runs the user's code (a ``__main__`` block, a pytest node, a training
step) twice per patch. That code may write checkpoints to absolute paths, post to a
webhook, read cloud keys from the environment or daemonise. So, on Linux:

- the worker enters a **user** namespace first thing (`enter_worker`; the caller's uid
  and gid mapped to themselves), where it holds the capabilities the rest needs without
  privileges, and a **PID** namespace its jobs are born into (nothing it started
  outlives it);
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

The environment of a run is an allowlist in every mode but ``off``: ``PATH``, locale,
the variables that fix torch's numerics (`RUN_ENV`), ``HOME`` and ``TMPDIR`` in the
run's folder, plus what ``pass-env`` names. Both sides of a patch see the same paths:
the worker gives every run the same *view* path and each run binds its own folder there
in its private mount namespace, so ``HOME``, ``__file__`` and temporary paths print the
same on both sides.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import tempfile
from dataclasses import dataclass, field

MODES = ("auto", "required", "off")

CLONE_NEWNS = 0x00020000
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
#: mount flags a less privileged namespace may not drop: kept on every remount
_LOCKED = MS_NOSUID | MS_NODEV | MS_NOEXEC

#: variables a run keeps from the tool's environment (besides ``LC_*`` and ``pass-env``)
RUN_ENV = (
    "PATH", "LANG", "LANGUAGE", "TZ",
    # numerics and devices: both sides must compute exactly as the user's runs do
    "PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES", "PYTORCH_NVML_BASED_CUDA_CHECK",
)
#: what the worker itself keeps (it imports torch and forks the runs): `RUN_ENV`, the
#: interpreter's search paths and the prefixes that configure torch and its libraries
_WORKER_ENV = ("HOME", "TMPDIR", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "TERM", "NO_COLOR")
_WORKER_PREFIXES = ("LC_", "PYTHON", "CUDA_", "NVIDIA_", "TORCH", "PYTORCH_", "TRITON_", "OMP_", "MKL_", "KMP_",
                    "OPENBLAS_", "CUBLAS_", "CUDNN_", "AUTOGRAD_FIX_")
#: set (to anything) in the tool's environment, runs go without namespaces as where the
#: kernel refuses them (to try a project's runs unisolated, and to test that path)
DISABLE_VARIABLE = "AUTOGRAD_FIX_NO_NAMESPACES"
#: the run folder's sub-folders that become HOME and TMPDIR
HOME_NAME = "home"
TMP_NAME = "tmp"
#: folders where daemons keep their Unix sockets (a read-only mount does not stop a connect)
_SOCKET_FOLDERS = ("/run", "/var/run", "/tmp/.X11-unix")


class IsolationError(OSError):
    """The namespaces could not be set up."""


@dataclass(frozen=True)
class RunIsolation:
    """How one run child is confined: `mode` from the config, the job's `forker` (None
    where namespaces do not work here), the view path every run of the worker shares,
    and the extra variables (name -> value) the project passes through."""

    mode: str = "auto"
    forker: "RunForker | None" = None
    view: str | None = None
    pass_env: dict[str, str] = field(default_factory=dict)
    #: folders the run reads besides its own (the shadow copy's base, the user's tree)
    needed: tuple[str, ...] = ()

    @property
    def namespaces(self) -> bool:
        return self.mode != "off" and self.forker is not None

    @property
    def scrub(self) -> bool:
        return self.mode != "off"


def worker_environment(environ: dict[str, str]) -> dict[str, str]:
    """The worker's environment: `environ` without anything a run must not see (cloud
    keys, tokens), keeping what importing torch and finding packages depend on."""
    keep = set(RUN_ENV) | set(_WORKER_ENV)
    return {k: v for k, v in environ.items() if k in keep or k.startswith(_WORKER_PREFIXES)}


def pass_env_values(names: tuple[str, ...] | list[str], environ: dict[str, str]) -> dict[str, str]:
    """The values of the `pass-env` variables set in `environ` (unset ones stay unset)."""
    return {name: environ[name] for name in names if name in environ}


def notice(reason: str) -> str:
    """The one-line warning of a run that goes unisolated."""
    return (
        f"verification runs are NOT isolated on this machine ({reason}): the code being verified can write "
        "files, use the network and read the environment; pass --no-verify to run nothing, or set "
        'isolation = "required" under [tool.autograd-fix.verify] to refuse unisolated runs'
    )


def refusal(reason: str) -> str:
    """The verdict reason when ``isolation = "required"`` meets a machine without it."""
    return (
        f'not run: isolation = "required" in [tool.autograd-fix.verify], but verification runs cannot be '
        f"isolated on this machine ({reason})"
    )


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
            locked = os.statvfs(point).f_flag & _LOCKED
        except OSError:
            continue  # a mount point we cannot reach (overmounted, gone): nothing to write through
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
        _mount(libc, "tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    try:
        _mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except IsolationError:
        pass  # a container that masks parts of /proc: the old one stays, read-only


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


def enter_worker() -> int:
    """In the worker, first thing (one thread, no torch yet): a user namespace where it
    holds every capability, and a PID namespace its children are born into, under a
    ``cat`` as pid 1 that lives while the returned pipe end stays open. Jobs, born there,
    can then give each run a PID namespace of its own (`RunForker`), and nothing the worker
    started outlives it: when it dies, the pipe closes, the ``cat`` ends, and the kernel
    kills what is left. Raises IsolationError when the kernel refuses."""
    libc = _libc()
    _new_user_namespace(libc, CLONE_NEWPID)
    read_fd, keep_fd = os.pipe()
    try:
        _spawn_init(read_fd)
    finally:
        os.close(read_fd)
    return keep_fd


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
    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWNET), "unshare")
    seen_at = view if view and os.path.isdir(view) else workdir
    _confine_files(libc, workdir, seen_at, needed)
    _new_user_namespace(libc, 0)
    return seen_at


def scrub_environment(folder: str, pass_env: dict[str, str]) -> None:
    """Replace this process's environment with the allowlist, ``HOME`` and ``TMPDIR``
    under `folder`, and wipe the copy the kernel shows as ``/proc/self/environ``."""
    kept = {k: v for k, v in os.environ.items() if k in RUN_ENV or k.startswith("LC_")}
    home, tmp = os.path.join(folder, HOME_NAME), os.path.join(folder, TMP_NAME)
    os.makedirs(home, exist_ok=True)
    os.makedirs(tmp, exist_ok=True)
    os.environ.clear()
    os.environ.update({**kept, **pass_env, "HOME": home, "TMPDIR": tmp, "PYTHONDONTWRITEBYTECODE": "1"})
    tempfile.tempdir = None  # cached by the worker: read TMPDIR again
    _wipe_initial_environment()


def _wipe_initial_environment() -> None:
    """Zero the environment block the process was started with (the worker's), which
    ``/proc/self/environ`` reads and nothing references once ``os.environ`` was reset
    (``setenv`` copies its strings)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end (fields 50, 51)
    except (OSError, IndexError, ValueError):  # pragma: no cover - not Linux
        return
    if 0 < start < end:
        ctypes.memset(start, 0, end - start)


def as_seen_from(value: object, real: str, view: str) -> object:
    """`value` (a run's record) with the run folder `real` written as `view`: without a
    mount namespace the two sides' folders differ, and a path the code stored (``HOME``,
    a temporary file, ``__file__``) must still compare equal."""
    if isinstance(value, str):
        return value.replace(real, view)
    if isinstance(value, dict):
        return {key: as_seen_from(item, real, view) for key, item in value.items()}
    if isinstance(value, list):
        return [as_seen_from(item, real, view) for item in value]
    if isinstance(value, tuple):
        return tuple(as_seen_from(item, real, view) for item in value)
    return value


VIEW_PREFIX = "agf-view-"


def make_view() -> str:
    """The worker's empty view folder (named after its pid), after removing those of
    workers that died without removing theirs (killed): empty folders only."""
    base = tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(base) if n.startswith(VIEW_PREFIX)]
    except OSError:
        names = []
    for name in names:
        pid = name[len(VIEW_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            try:
                os.rmdir(os.path.join(base, name))
            except OSError:
                pass
    return tempfile.mkdtemp(prefix=f"{VIEW_PREFIX}{os.getpid()}-")


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
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 4096):
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    shutil.rmtree(folder, ignore_errors=True)
    answer = b"".join(chunks).decode(errors="replace")
    return None if answer == "ok" else (answer or "the namespace set-up failed")


def set_up_worker() -> tuple[int | None, str | None]:
    """The worker's namespaces and whether runs can be confined: (the pipe end to hold,
    None) when they can, (None or that pipe end, why not) when they cannot."""
    if os.environ.get(DISABLE_VARIABLE):
        return None, f"turned off by {DISABLE_VARIABLE}"
    if not hasattr(os, "fork") or not os.path.exists("/proc/self/uid_map"):
        return None, "this system has no Linux user namespaces"
    try:
        keep_fd = enter_worker()
    except OSError as exc:
        return None, str(exc)
    return keep_fd, probe()


def check() -> str | None:
    """What `set_up_worker` would answer, asked in a throwaway child, so that the calling
    process keeps its own namespaces (for tests and diagnostics)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            why = set_up_worker()[1]
            os.write(write_fd, b"ok" if why is None else why.encode()[:500] or b"failed")
        finally:
            os._exit(0)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 4096):
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    answer = b"".join(chunks).decode(errors="replace")
    return None if answer == "ok" else (answer or "the check failed")
