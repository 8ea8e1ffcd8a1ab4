"""Where one side of a patch runs, inside its run child: the project's shadow copy.

`prepare` lays out the copy in the child's own work folder, writes the side's text over
the changed file, and sets what ``python path/to/script.py`` would set: the working
directory (the script's folder, or the configured driver's), ``sys.path[0]`` (the
script's folder) plus the project root, ``sys.argv``. It also installs the guard that
keeps the run out of the user's tree and off the network.

Reasons must quote the user's file, not the copy: `Place.user_view` turns an exception
record's paths back into the user's and maps line numbers of the side's text onto the
user's file (a line the patch added or moved reads "line N of the patched file"). The
user's file is the text that was checked (``user_text``: an editor buffer, stdin) when
the caller gives it, not the file on disk, which may be older.
"""

from __future__ import annotations

import difflib
import os
import shutil
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from .shadow import COPY_NAME, guard_user_tree, inside

if TYPE_CHECKING:
    from .protocol import SideSpec


@dataclass
class Place:
    """Paths of one side's run: the copy's root and changed file, and the user's."""

    copy_root: str
    script: str  # the changed file, inside the copy
    user_root: str | None
    user_path: str | None
    line_map: dict[int, int] = field(default_factory=dict)
    matches_user: bool = True

    def to_user_path(self, text: str) -> str:
        if self.user_root:
            return text.replace(self.copy_root, self.user_root)
        return text

    def mapped_line(self, lineno: int) -> int | None:
        """The user's line number for this side's line, None for a line the patch wrote."""
        return lineno if self.matches_user else self.line_map.get(lineno)

    def user_line(self, lineno: int) -> str:
        """``line N`` of the user's file, or ``line N of the patched file``."""
        mapped = self.mapped_line(lineno)
        return f"line {mapped}" if mapped is not None else f"line {lineno} of the patched file"

    def user_view(self, exc: dict[str, Any] | None) -> None:
        """Rewrite an exception record in place: the user's paths and line numbers."""
        if not exc:
            return
        exc["message"] = self.to_user_path(exc.get("message") or "")
        frames = exc.pop("frames", None) or []
        ours = [f for f in frames if f[0] == self.script]
        in_project = [f for f in frames if f[0].startswith(self.copy_root + os.sep)]
        where = None
        if ours:
            _, lineno, line = ours[-1]
            where = f"{self.user_line(lineno)}: {line}" if line else self.user_line(lineno)
            exc["user_line"] = self.mapped_line(lineno)  # None: a line the patch wrote
            exc["top_line"] = ours[0][1]  # the module-level statement that was running
        if in_project and in_project[-1][0] != self.script:
            # raised in another project file (a data module, a helper): name it first
            filename, lineno, line = in_project[-1]
            relative = os.path.relpath(filename, self.copy_root)
            inner = f"{relative} line {lineno}: {line}" if line else f"{relative} line {lineno}"
            where = f"{inner} (from {where})" if where else inner
        if where:
            exc["where"] = where


def _line_map(side: str, user: str) -> dict[int, int]:
    """Side line number -> user line number, for lines the patch left alone."""
    matcher = difflib.SequenceMatcher(None, side.splitlines(), user.splitlines(), autojunk=False)
    mapping: dict[int, int] = {}
    for a, b, size in matcher.get_matching_blocks():
        for offset in range(size):
            mapping[a + offset + 1] = b + offset + 1
    return mapping


def user_file_text(path: str | None) -> str | None:
    """The user's file as it is on disk (None: not a readable file). Read by the tool,
    with the user's rights, before the run: a run started by root is an unprivileged
    user and may not read a folder only root can (see `_copy_readable`)."""
    if not path or not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8-sig", "replace")
    except OSError:
        return None


def python_path(value: str, cwd: str) -> list[str]:
    """The folders of a ``PYTHONPATH`` value, as the interpreter would put them on
    ``sys.path`` (relative ones from `cwd`, empty ones dropped)."""
    return [os.path.join(cwd, entry) for entry in value.split(os.pathsep) if entry]


def _copy_readable(base: str, copy_root: str) -> None:
    """The shadow copy into this side's folder, minus what the run may not read.

    A run started by root runs as an unprivileged user (see `namespaces`), so a file
    only its owner may read (hypothesis's example database, a `.env`, a key) cannot be
    copied; the run goes on without it, as the user's own unprivileged run would, rather
    than failing the whole patch. Any other copy error still stops the run."""
    try:
        shutil.copytree(base, copy_root, symlinks=True)
    except shutil.Error as error:
        failures = error.args[0] if error.args and isinstance(error.args[0], list) else []
        if not failures or not all("Permission denied" in str(why) for _, _, why in failures):
            raise


def _field(spec: "SideSpec | Mapping[str, Any]", name: str) -> Any:
    """One field of a side's spec: a `protocol.SideSpec`, or the doctor's own mapping."""
    return spec.get(name) if isinstance(spec, Mapping) else getattr(spec, name)


def prepare(spec: "SideSpec | Mapping[str, Any]", workdir: str) -> Place:
    """Lay out this side's copy under `workdir` and point cwd, sys.path, argv at it."""
    copy_root = os.path.join(workdir, COPY_NAME)
    base = _field(spec, "shadow_base")
    if base and os.path.isdir(base):
        _copy_readable(base, copy_root)
    else:
        os.makedirs(copy_root, exist_ok=True)
    relative = _field(spec, "relative") or os.path.basename(_field(spec, "path") or "script.py")
    if relative.startswith("<"):
        relative = "script.py"
    script = os.path.join(copy_root, relative)
    os.makedirs(os.path.dirname(script), exist_ok=True)
    if not inside(os.path.realpath(os.path.dirname(script)), os.path.realpath(copy_root)):
        # the copy links this folder to the user's (`shadow.make_room` should have made it real)
        raise RuntimeError(f"autograd-fix verification: {relative} lies in a linked folder; not written")
    if os.path.islink(script):
        os.unlink(script)
    with open(script, "w", encoding="utf-8") as handle:
        handle.write(_field(spec, "source"))
    user_root = _field(spec, "user_root")
    guard_user_tree(user_root or "", workdir)
    sys.dont_write_bytecode = True
    place = Place(copy_root=copy_root, script=script, user_root=user_root, user_path=_field(spec, "user_path"))
    # the text the user sees: the buffer or stdin that was checked, else the file on disk
    user = _field(spec, "user_text") if _field(spec, "user_text") is not None else user_file_text(place.user_path)
    if user is not None and user != _field(spec, "source"):
        place.matches_user = False
        place.line_map = _line_map(_field(spec, "source"), user)
    elif user is None and _field(spec, "side") == "rewritten":
        place.matches_user = False
    folder = os.path.dirname(script)
    command = _field(spec, "command")
    if command:
        cwd = os.path.join(copy_root, command.get("cwd") or "")
        entry = os.path.join(copy_root, command["script"]) if command.get("script") else None
        first = os.path.dirname(entry) if entry else cwd
    else:
        cwd = first = folder
    # what Python sets for `python script.py`: the script's folder first, then
    # PYTHONPATH (which the worker, started with -I, ignored: inside the sandbox the
    # run may import from it), then the project root for packages under it
    sys.path[:0] = [first, *python_path(os.environ.get("PYTHONPATH", ""), cwd)]
    if copy_root not in sys.path:
        sys.path.insert(1, copy_root)
    os.chdir(cwd)
    return place


def chain_argv(program: str, argv: list[str] | tuple[str, ...]) -> None:
    """``sys.argv`` as the script sees it: its name, then the configured arguments."""
    sys.argv = [program, *argv]
