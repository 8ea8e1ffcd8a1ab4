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
#: folders that hold a project's data or a run's logs and checkpoints, by name (the
#: ones ``.gitignore`` lists count too): mirrored one level deep, never copied
BULKY_FOLDERS = frozenset(
    {"data", "datasets", "checkpoints", "ckpt", "ckpts", "logs", "lightning_logs", "wandb", "mlruns", "runs",
     "outputs", "tb_logs"}
)
#: a folder to mirror with more entries than this is linked whole (read-only)
MIRROR_LIMIT = 1000
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
    """One project's base copy: `base` mirrors `root`; `linked` counts large files and
    folders linked; `mirrored` counts folders mirrored one level deep."""

    root: str
    base: str
    files: int
    copied_bytes: int
    linked: int
    mirrored: int = 0


class _Tally:
    """What a base copy took so far; raises ShadowError past the limits."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.entries = self.copied = self.linked = self.mirrored = 0

    def entry(self) -> None:
        self.entries += 1
        if self.entries > MAX_ENTRIES:
            raise ShadowError(
                f"the project folder {self.root} has more than {MAX_ENTRIES} files to copy for the run "
                "(the project folder is the nearest one above the file holding pyproject.toml, setup.py, "
                "setup.cfg or .git, else the file's own folder; folders that .gitignore lists, and data, "
                "log and checkpoint folders, are linked, not copied); give the script a smaller project folder"
            )

    def copy(self, size: int) -> None:
        self.copied += size
        if self.copied > MAX_COPY_BYTES:
            raise ShadowError(
                f"the project folder {self.root} holds more than {MAX_COPY_BYTES // (1024 * 1024)} MB of small files "
                "to copy for the run (files over 1 MiB are linked, not copied); give the script a smaller project folder"
            )


def make_base(root: str, destination: str) -> Shadow:
    """Copy `root` into `destination` (created); ShadowError when it is too big.

    A folder that ``.gitignore`` lists, or one named like a data, log or checkpoint
    folder (`BULKY_FOLDERS`), is not copied: it is mirrored (`_mirror`), so that a run
    reads what it holds and can still add to it."""
    from pathlib import Path

    from autograd_fix.gitignore import GitIgnores

    tally = _Tally(root)
    os.makedirs(destination, exist_ok=True)
    ignores = {root: GitIgnores.for_folder(Path(root))}
    for folder, dirs, files in _walk(root):
        here = ignores.pop(folder)
        relative = os.path.relpath(folder, root)
        target_folder = os.path.join(destination, relative) if relative != "." else destination
        os.makedirs(target_folder, exist_ok=True)
        kept = []
        for name in sorted(dirs):
            path = os.path.join(folder, name)
            if _is_venv(folder, name) or os.path.islink(path):
                continue
            if name.lower() in BULKY_FOLDERS or here.decides(name, True):
                _mirror(path, os.path.join(target_folder, name), tally)
                continue
            kept.append(name)
            ignores[path] = here.below(name, Path(path))
        dirs[:] = kept
        for name in files + [d for d in os.listdir(folder) if os.path.islink(os.path.join(folder, d)) and os.path.isdir(os.path.join(folder, d))]:
            tally.entry()
            _place_entry(os.path.join(folder, name), os.path.join(target_folder, name), tally)
    return Shadow(root=root, base=destination, files=tally.entries, copied_bytes=tally.copied, linked=tally.linked,
                  mirrored=tally.mirrored)


def _place_entry(source: str, target: str, tally: _Tally, *, link_folders: bool = False) -> None:
    """One entry of a folder into the copy: a symlink recreated (a link within the
    project stays relative; one leaving it points at its target), a small regular file
    or any ``.py`` file copied, a large one linked, a folder linked when `link_folders`;
    anything else (a device, FIFO or socket) skipped, never read."""
    try:
        if os.path.islink(source):
            link = os.readlink(source)
            real = os.path.realpath(source)
            os.symlink(link if not os.path.isabs(link) and real.startswith(tally.root + os.sep) else real, target)
            return
        info = os.lstat(source)
        if link_folders and stat.S_ISDIR(info.st_mode):
            os.symlink(source, target)
            tally.linked += 1
            return
        if not stat.S_ISREG(info.st_mode):
            return  # a device, FIFO or socket: never read (a device reads zeros forever)
        if source.endswith(".py") or info.st_size <= COPY_LIMIT_BYTES:
            tally.copy(info.st_size)
            _copy_regular(source, target, info)
        else:
            os.symlink(source, target)
            tally.linked += 1
    except OSError:
        return  # unreadable file (socket, permissions): the run goes without it


def _mirror(source: str, target: str, tally: _Tally, *, always: bool = False) -> None:
    """A data, log or checkpoint folder, one level deep: a real folder in the copy (the
    run can write new files and folders into it: a new ``lightning_logs/version_3``),
    holding links to its subfolders and large files (read-only: nothing below is walked
    or copied) and copies of its small files (which a run may overwrite). A folder of
    more than `MIRROR_LIMIT` entries (a flat folder of images) is one link instead,
    unless it must be a folder (`always`)."""
    try:
        with os.scandir(source) as listing:
            names = sorted(entry.name for entry in listing)
    except OSError:
        return  # unreadable: the run goes without it
    tally.entry()
    tally.mirrored += 1
    if not always and len(names) > MIRROR_LIMIT:
        os.symlink(source, target)
        tally.linked += 1
        return
    os.makedirs(target, exist_ok=True)
    for name in names:
        tally.entry()
        _place_entry(os.path.join(source, name), os.path.join(target, name), tally, link_folders=True)


def make_room(shadow: Shadow, relative: str) -> None:
    """Make the folders holding `relative` (a file the runs write their side's text
    over) real folders of the base copy: a linked folder on the way is mirrored in its
    place, so that the side's text is never written through a link into the user's
    project."""
    tally = _Tally(shadow.root)
    parts = os.path.normpath(relative).split(os.sep)[:-1]
    for depth in range(1, len(parts) + 1):
        target = os.path.join(shadow.base, *parts[:depth])
        if os.path.islink(target):
            source = os.path.join(shadow.root, *parts[:depth])
            os.unlink(target)
            if os.path.isdir(source):  # a folder linked whole, or a link in the project
                _mirror(os.path.realpath(source), target, tally, always=True)
            else:
                os.makedirs(target)


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

    def for_file(self, root: str, path: str) -> Shadow:
        """`for_root`, with the folders holding `path` (the changed file) made real
        folders of the copy (`make_room`)."""
        shadow = self.for_root(root)
        make_room(shadow, os.path.relpath(path, root))
        return shadow

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


def inside(path: str, folder: str) -> bool:
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
        return not inside(real, work_real) and inside(real, user_real)

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
