"""Shadow copies of a script's project: where each side of a patch runs.

A run must see the project as ``python path/to/script.py`` would (sibling modules,
``open('configurator.py')`` relative to the script folder, packages under the project
root) yet never write into the user's tree. So the project folder is copied once per
verification run into a *base* copy (small files copied, large data files symlinked,
version-control folders, virtual environments and caches skipped), and each run child
copies that base into its own folder before writing its side's text over the script.

A large file is a symlink to the user's file. What keeps a run from writing through it
is its mount namespace (`namespaces`: everything but the run's folder is read-only);
the audit hook installed here (`guard_user_tree`) is a second, Python-level line that
also holds where namespaces are unavailable, for ``open(..., "w")``, ``os.remove`` and
friends (not for a C extension that opens the path itself).
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass

#: files up to this size are copied; larger ones (datasets, checkpoints) are linked
COPY_LIMIT_BYTES = 1024 * 1024
#: a project with more entries than this, or more bytes to copy, is not verified
MAX_ENTRIES = 5000
MAX_COPY_BYTES = 64 * 1024 * 1024
#: folders never copied: version control, caches, virtual environments, build litter
SKIPPED_FOLDERS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".nox",
     "node_modules", ".venv", "venv", ".eggs", ".ipynb_checkpoints", ".idea", ".vscode"}
)
PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
#: the folder inside a run child's work folder that holds its copy of the project
COPY_NAME = "project"


class ShadowError(ValueError):
    """The project cannot be copied (too big, unreadable): the patch stays unverified."""


def project_root(script: str) -> str:
    """The nearest folder at or above the script's (or at or above `script` itself, a
    folder) holding a project marker, else the script's own folder."""
    folder = os.path.abspath(script)
    if not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    current = folder
    while True:
        if any(os.path.exists(os.path.join(current, marker)) for marker in PROJECT_MARKERS):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return folder
        current = parent


def _is_venv(folder: str, name: str) -> bool:
    return name in SKIPPED_FOLDERS or name.endswith(".egg-info") or os.path.isfile(os.path.join(folder, name, "pyvenv.cfg"))


@dataclass(frozen=True)
class Shadow:
    """One project's base copy: `base` mirrors `root`; `linked` counts large files linked."""

    root: str
    base: str
    files: int
    copied_bytes: int
    linked: int


def make_base(root: str, destination: str) -> Shadow:
    """Copy `root` into `destination` (created); ShadowError when it is too big."""
    entries = 0
    copied = 0
    linked = 0
    os.makedirs(destination, exist_ok=True)
    for folder, dirs, files in _walk(root):
        dirs[:] = sorted(d for d in dirs if not _is_venv(folder, d) and not os.path.islink(os.path.join(folder, d)))
        relative = os.path.relpath(folder, root)
        target_folder = os.path.join(destination, relative) if relative != "." else destination
        os.makedirs(target_folder, exist_ok=True)
        for name in files + [d for d in os.listdir(folder) if os.path.islink(os.path.join(folder, d)) and os.path.isdir(os.path.join(folder, d))]:
            entries += 1
            if entries > MAX_ENTRIES:
                raise ShadowError(
                    f"the project folder {root} has more than {MAX_ENTRIES} files to copy for the run "
                    "(the project folder is the nearest one above the file holding pyproject.toml, setup.py, "
                    "setup.cfg or .git, else the file's own folder); give the script a smaller project folder"
                )
            source = os.path.join(folder, name)
            target = os.path.join(target_folder, name)
            try:
                if os.path.islink(source):
                    link = os.readlink(source)
                    real = os.path.realpath(source)
                    # a link within the project stays relative; one leaving it points at its target
                    os.symlink(link if not os.path.isabs(link) and real.startswith(root + os.sep) else real, target)
                    continue
                info = os.lstat(source)
                if not stat.S_ISREG(info.st_mode):
                    continue  # a device, FIFO or socket: never read (a device reads zeros forever)
                size = info.st_size
                if name.endswith(".py") or size <= COPY_LIMIT_BYTES:
                    copied += size
                    if copied > MAX_COPY_BYTES:
                        raise ShadowError(
                            f"the project folder {root} holds more than {MAX_COPY_BYTES // (1024 * 1024)} MB of small files "
                            "to copy for the run (files over 1 MiB are linked, not copied); give the script a smaller project folder"
                        )
                    _copy_regular(source, target, info)
                else:
                    os.symlink(source, target)
                    linked += 1
            except OSError as exc:
                if isinstance(exc, ShadowError):  # pragma: no cover - ShadowError is a ValueError
                    raise
                continue  # unreadable file (socket, permissions): the run goes without it
    return Shadow(root=root, base=destination, files=entries, copied_bytes=copied, linked=linked)


#: a project nested deeper than this is not copied (os.walk recurses: a hostile tree of
#: a thousand levels would crash the tool instead of giving a verdict)
MAX_DEPTH = 100


def _walk(root: str):
    """`os.walk(root)` without following links, refusing trees deeper than `MAX_DEPTH`."""
    base = root.rstrip(os.sep).count(os.sep)
    for folder, dirs, files in os.walk(root, followlinks=False):
        if folder.count(os.sep) - base >= MAX_DEPTH and dirs:
            raise ShadowError(f"the project folder {root} nests folders more than {MAX_DEPTH} deep; not copied for the run")
        yield folder, dirs, files


def _copy_regular(source: str, target: str, info: os.stat_result) -> None:
    """Copy one regular file: opened without following a link and without blocking, and
    only if it is still the file that was listed (a FIFO or device swapped in is skipped,
    never read); the copy keeps its mode and times, as `shutil.copy2` does."""
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino) or not stat.S_ISREG(now.st_mode):
            return
        os.set_blocking(fd, True)
        with open(target, "wb") as out:
            shutil.copyfileobj(handle, out, 1 << 20)
    shutil.copystat(source, target, follow_symlinks=False)


class ShadowCopies:
    """What one verification run keeps per project: base copies made once (`close`
    removes them), and the drivers found unable to run here, per file
    (``driver_failures[(path, driver)] = {"why", "fall_back"}``), so the file's next
    patches skip them."""

    def __init__(self, parent: str | None = None) -> None:
        #: where the copies' folder is made (the verifier's scratch folder: removed with
        #: it on every way out; None: the system's temporary folder)
        self._parent = parent
        self._folder: str | None = None
        self._made: dict[str, Shadow | ShadowError] = {}
        self.driver_failures: dict[tuple[str, str], dict] = {}

    def for_root(self, root: str) -> Shadow:
        known = self._made.get(root)
        if known is None:
            if self._folder is None:
                self._folder = tempfile.mkdtemp(prefix="agf-shadow-", dir=self._parent)
            destination = os.path.join(self._folder, str(len(self._made)))
            try:
                known = make_base(root, destination)
            except ShadowError as exc:
                shutil.rmtree(destination, ignore_errors=True)
                known = exc
            self._made[root] = known
        if isinstance(known, ShadowError):
            raise known
        return known

    def close(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
            self._made.clear()

    def __enter__(self) -> "ShadowCopies":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- in the run child ---------------------------------------------------------------------
_WRITE_EVENTS = {"os.remove", "os.rename", "os.replace", "os.rmdir", "os.mkdir", "os.truncate", "os.chmod",
                 "os.symlink", "os.link", "shutil.rmtree", "shutil.move", "os.utime"}
_NETWORK_EVENTS = {"socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "urllib.Request"}
NETWORK_REFUSED = "network access is disabled while autograd-fix verifies a patch"


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _opens_for_writing(args: tuple) -> bool:
    mode, flags = (args[1], args[2]) if len(args) >= 3 else (None, 0)
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND))


def guard_user_tree(user_root: str, workdir: str) -> None:
    """Install (for good: audit hooks cannot be removed, the child is disposable) a hook
    that refuses writes into the user's project and any network connection."""
    user_real = os.path.realpath(user_root) if user_root else None
    work_real = os.path.realpath(workdir)

    def refused(path: object) -> bool:
        if user_real is None or not isinstance(path, (str, bytes, os.PathLike)):
            return False
        try:
            real = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError, OSError):
            return False
        return not _inside(real, work_real) and _inside(real, user_real)

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            if args and _opens_for_writing(args) and refused(args[0]):
                raise PermissionError(f"autograd-fix verification: refusing to write {os.fsdecode(args[0])} in the user's project")
        elif event in _WRITE_EVENTS:
            for path in args[:2]:
                if refused(path):
                    raise PermissionError(f"autograd-fix verification: refusing to change {os.fsdecode(path)} in the user's project")
        elif event in _NETWORK_EVENTS:
            if event == "socket.connect" and len(args) > 1 and isinstance(args[1], (str, bytes)):
                return  # a Unix socket (local)
            raise OSError(NETWORK_REFUSED)

    sys.addaudithook(hook)
