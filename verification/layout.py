"""What a confined run sees of the file system: an allowlist, mounted on an empty root.

Hiding a few socket folders left everything else in view: tmux's socket in
``/tmp/tmux-UID/default`` ran a command outside the sandbox, and ``~/.ssh/id_rsa`` came
back in a verdict. So a run's mount namespace starts from an empty ``tmpfs`` and gets
only what running Python code needs, each bound at its own path:

- read-only: the system's programs and libraries (`SYSTEM`), the interpreter (its
  prefixes, ``sys.path``, the folders of the shared libraries the worker loaded and of
  autograd-fix's own packages: `interpreter_paths`), the project (its shadow copy and the
  user's project folder, whose large files the copy links to), the absolute entries of
  ``PYTHONPATH`` and ``LD_LIBRARY_PATH``, and ``/sys``;
- read-write: the run's own folder (its copy of the project, ``HOME``, ``TMPDIR``), a
  private ``/tmp`` and ``/dev/shm`` (``tmpfs``, sized);
- ``/dev`` with a few device nodes (`DEVICES`, plus the GPU's where there is one), and
  a ``/proc`` of the run's own PID namespace with the kernel's knobs read-only
  (`PROC_READ_ONLY`) and what tells about other users' keys or the kernel hidden
  (`PROC_HIDDEN`).

The read-only list is data (`Layout.read_only`): another interpreter (a project's own
virtual environment) is one more entry. Nothing else exists inside: not the user's home,
not the host's ``/tmp``, ``/run`` or ``/var``, not the other side's folder.
"""

from __future__ import annotations

import glob
import os
import site
import sys
from dataclasses import dataclass

#: the system's programs, libraries and configuration (``/etc``: the dynamic loader's
#: cache, users and groups, time zones; its secrets are root's only, and a run is never
#: root: see `namespaces.RUN_UID`)
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
#: device nodes a run gets (GPU nodes too where they exist: `gpu_devices`)
DEVICES = ("null", "zero", "full", "random", "urandom")
#: links in ``/dev`` that programs expect
DEVICE_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}
#: ``/proc`` entries that set kernel state: read-only (as container runtimes do)
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")
#: ``/proc`` entries covered by an empty file: other users' keys, kernel memory and timers
PROC_HIDDEN = ("keys", "key-users", "kcore", "kmsg", "timer_list", "sched_debug", "latency_stats")
#: files of the system's that only root may read, covered even so (a run that cannot get
#: an unprivileged uid of its own stays uid 0 without capabilities, and owns them)
SYSTEM_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/ssh", "/etc/sudoers",
                  "/etc/sudoers.d", "/etc/ssl/private")
#: sizes of the private memory-backed folders (their pages are memory, not disk)
SHM_SIZE_MB = 512
TMP_SIZE_MB = 256


@dataclass(frozen=True)
class Layout:
    """One run's file system: `run_folder` (read-write) seen at `seen_at`, and the
    folders and files bound read-only at their own paths."""

    run_folder: str
    seen_at: str
    read_only: tuple[str, ...]


def gpu_devices() -> tuple[str, ...]:
    """The GPU's device nodes (NVIDIA's): CUDA opens them by name."""
    return tuple(sorted(os.path.basename(p) for p in glob.glob("/dev/nvidia*")))


def _loaded_library_folders() -> set[str]:
    """Folders of the shared libraries this process mapped (torch's, the C runtime's,
    a conda or nix prefix's): the run loads more of them later."""
    folders: set[str] = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/") and not parts[5].rstrip().endswith("(deleted)"):
                    path = parts[5].rstrip("\n")
                    if not path.startswith(("/dev/", "/proc/", "/sys/", "/memfd:")):
                        folders.add(os.path.dirname(path))
    except OSError:  # pragma: no cover - not Linux
        pass
    return folders


def interpreter_paths() -> tuple[str, ...]:
    """What the worker's interpreter reads from: its prefixes and ``sys.path``, the
    folders of autograd-fix's packages and of the shared libraries it loaded. Call in
    the worker once torch is imported."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.update(p for p in sys.path if p and os.path.isabs(p))
    try:
        paths.update(site.getsitepackages())
    except AttributeError:  # pragma: no cover - a virtualenv's old site module
        pass
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] == "autograd_fix":
            paths.update(getattr(module, "__path__", None) or ())
    paths.update(_loaded_library_folders())
    return minimal(tuple(p for p in paths if os.path.exists(p)))


def environment_paths(environ: dict[str, str] | os._Environ) -> tuple[str, ...]:
    """Absolute folders of ``PYTHONPATH`` and ``LD_LIBRARY_PATH``: the run imports and
    loads from them as the user's own runs do."""
    found = []
    for name in ("PYTHONPATH", "LD_LIBRARY_PATH"):
        found += [p for p in environ.get(name, "").split(os.pathsep) if os.path.isabs(p) and os.path.exists(p)]
    return tuple(found)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def minimal(paths: tuple[str, ...]) -> tuple[str, ...]:
    """`paths` without those inside another one, shortest first."""
    kept: list[str] = []
    for path in sorted({os.path.normpath(p) for p in paths}, key=lambda p: (p.count("/"), p)):
        if not any(_inside(path, k) for k in kept):
            kept.append(path)
    return tuple(kept)
