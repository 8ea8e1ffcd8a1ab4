"""Which files to look at: `.py` and `.ipynb` files (and those matching the configured
`extend-include` globs) under the given paths, minus what is excluded.

Folders are walked recursively, honouring the repository's `.git/info/exclude` and every
`.gitignore` and `.ignore` from the repository root down (`autograd_fix.gitignore`: git's
own rules), the default excludes (VCS folders,
virtual environments, build outputs, caches) and the configured `exclude` globs, which
are matched the same way. An excluded folder is never entered, so a negation cannot
bring back a file below it, exactly as in git. A file named explicitly on the command
line is checked unless `force_exclude` is set (Ruff's `--force-exclude`, which
pre-commit needs: it names every staged file explicitly, so without it an excluded file
would be checked, and rewritten by the apply hook). A force-excluded path is skipped
silently and listed in `force_excluded`; it does not make its named path "empty".

Odd trees do not stop the walk. Symlinked folders are not entered (so a link loop
cannot recurse); a `*.py` entry that is a broken or looping symlink, a FIFO, a socket or
a device, and a folder that cannot be listed, each become one entry of `problems`
(path, why), and the walk goes on. A FIFO is never opened (that would block). A named
path that yields no file at all is listed in `empty`.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from autograd_fix.gitignore import LINT_IGNORE_FILES, Anchored, GitIgnores, compile_patterns, relative_prefix, valid_pattern

if TYPE_CHECKING:  # pathspec loads where a pattern is compiled (`exclude_spec`, `compile_patterns`)
    from pathspec import GitIgnoreSpec

DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "build", "dist", "site-packages",
    "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs", "*.egg-info", "node_modules",
    ".hypothesis", ".ipynb_checkpoints",
)


class ExcludePatternError(ValueError):
    """A configured `exclude` glob that is not a valid gitignore pattern."""


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)
    #: paths given on the command line that do not exist
    missing: list[str] = field(default_factory=list)
    #: entries that could not be looked at: (path as shown, why)
    problems: list[tuple[str, str]] = field(default_factory=list)
    #: paths given on the command line under which no file to check was found
    empty: list[str] = field(default_factory=list)
    #: paths given on the command line that `force_exclude` skipped
    force_excluded: list[str] = field(default_factory=list)


def accepts_file(name: str, shown: str = "", include: tuple[str, ...] = ()) -> bool:
    """Is a file with this name one to check? (The one place that decides.) Python files
    and notebooks always; `include` globs (`extend-include`) match the name or the path
    as shown."""
    if name.endswith((".py", ".ipynb")):
        return True
    return any(fnmatch.fnmatch(name, glob) or fnmatch.fnmatch(shown, glob) for glob in include)


def exclude_spec(patterns: Iterable[str]) -> GitIgnoreSpec:
    """The configured `exclude` globs; an invalid one is an error, not silently dropped."""
    from pathspec import GitIgnoreSpec

    patterns = list(patterns)
    for pattern in patterns:
        if not valid_pattern(pattern):
            raise ExcludePatternError(f"invalid exclude pattern {pattern!r}")
    return GitIgnoreSpec.from_lines(patterns)


def is_excluded(path: Path, exclude: Iterable[str], config_root: Path) -> bool:
    """Whether the configured `exclude` globs (relative to `config_root`) cover `path`
    or a folder above it (for one file checked alone, such as an editor buffer)."""
    try:
        relative = path.resolve().relative_to(config_root.resolve())
    except ValueError:
        return False
    spec = exclude_spec(exclude)
    parts = relative.parts
    folders = ("/".join(parts[:depth]) + "/" for depth in range(1, len(parts)))
    return any(spec.match_file(folder) for folder in folders) or spec.match_file(relative.as_posix())


@dataclass(frozen=True)
class _Excludes:
    """Everything that can exclude an entry of the folder being walked."""

    defaults: GitIgnoreSpec
    #: the configured globs anchored at the config's folder (None: walk is outside it)
    configured: Anchored | None
    #: the `.gitignore` specs of this folder and its ancestors
    gitignores: GitIgnores

    def below(self, name: str, folder: Path) -> _Excludes:
        return _Excludes(
            self.defaults,
            self.configured.below(name) if self.configured else None,
            self.gitignores.below(name, folder),
        )

    def excluded(self, name: str, is_dir: bool) -> bool:
        key = f"{name}/" if is_dir else name
        configured = self.configured.decides(key) if self.configured else None
        if configured is None:
            configured = bool(self.defaults.check_file(key).include)  # names, at any depth
        if configured:
            return True
        return bool(self.gitignores.decides(name, is_dir))


def _root_excludes(folder: Path, configured: GitIgnoreSpec | None, config_root: Path) -> _Excludes:
    """The excludes for walking `folder`: `.gitignore`s from the repository root down."""
    anchored = None
    if configured is not None:
        prefix = relative_prefix(folder, config_root)
        anchored = Anchored(configured, prefix) if prefix is not None else None
    return _Excludes(compile_patterns(DEFAULT_EXCLUDES), anchored, GitIgnores.for_folder(folder, LINT_IGNORE_FILES))


def discover(
    paths: list[str],
    exclude: list[str] | tuple[str, ...] = (),
    config_root: Path | None = None,
    include: list[str] | tuple[str, ...] = (),
    force_exclude: bool = False,
) -> Discovery:
    """Files to check under `paths`; `exclude` globs are relative to `config_root`;
    `include` adds globs (`extend-include`) to the default `*.py` and `*.ipynb`;
    `force_exclude` applies `exclude` and the default excludes to the named paths too."""
    result = Discovery()
    wanted = tuple(include)
    configured = exclude_spec(exclude) if exclude else None
    base = (config_root or Path.cwd()).resolve()
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        before = (len(result.files), len(result.problems))
        if not os.path.lexists(path):
            result.missing.append(raw)
            continue
        if force_exclude and _named_path_excluded(path, configured, base):
            result.force_excluded.append(raw)
            continue
        if not path.is_dir():
            why = _not_a_file(path)
            if why is None:
                _add(result, seen, path)
            else:
                result.problems.append((raw, why))
            continue
        absolute = path.resolve()
        _walk(path, absolute, _root_excludes(absolute, configured, base), result, seen, wanted)
        if (len(result.files), len(result.problems)) == before:
            result.empty.append(raw)
    result.problems = list(dict.fromkeys(result.problems))  # a path named and walked: once
    return result


def _named_path_excluded(path: Path, configured: GitIgnoreSpec | None, config_root: Path) -> bool:
    """Whether a path named on the command line is excluded, judged by its path relative
    to `config_root` (the configuration's folder, else the current one; a path outside
    it is never excluded): the configured globs or a default exclude (such as `.venv/`)
    match it or a folder above it. The named entry itself is not resolved, so a symlink
    is judged by the name it was given."""
    absolute = Path(os.path.realpath(path.parent)) / path.name
    try:
        parts = absolute.relative_to(config_root).parts
    except ValueError:
        return False
    specs = [compile_patterns(DEFAULT_EXCLUDES), *([configured] if configured is not None else [])]
    for depth in range(1, len(parts) + 1):
        key = "/".join(parts[:depth])
        if depth < len(parts) or path.is_dir():
            key += "/"
        if any(spec.check_file(key).include for spec in specs):
            return True
    return False


def _not_a_file(path: Path) -> str | None:
    """Why `path` (not a folder) cannot be read as a source file, or None if it can."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "symlink loop (Too many levels of symbolic links); skipped"
        if error.errno == errno.ENOENT and os.path.islink(path):
            return f"broken symlink (to {os.readlink(path)}, which does not exist); skipped"
        return f"cannot read: {error.strerror or error}; skipped"
    if stat.S_ISREG(mode):
        return None
    kinds = {stat.S_ISFIFO: "a named pipe (FIFO)", stat.S_ISSOCK: "a socket", stat.S_ISCHR: "a device", stat.S_ISBLK: "a device"}
    kind = next((name for test, name in kinds.items() if test(mode)), "something else")
    return f"{kind}, not a regular file; skipped"


def _add(result: Discovery, seen: set[Path], path: Path) -> None:
    key = path.resolve()
    if key not in seen:
        seen.add(key)
        result.files.append(path)


#: folders nested deeper than this below a named path are one error, not a crash: real
#: trees are a few dozen levels deep, a hostile one can be thousands
MAX_DEPTH = 100


def _walk(
    shown: Path, absolute: Path, excludes: _Excludes, result: Discovery, seen: set[Path], wanted: tuple[str, ...]
) -> None:
    """Every source file under `absolute`, depth first in name order, with an explicit
    stack instead of recursion (a tree deeper than Python's recursion limit is data)."""
    listing = _listing(shown, absolute, result)
    if listing is None:
        return
    stack = [(shown, absolute, excludes, iter(listing))]
    while stack:
        shown, absolute, excludes, entries = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        if excludes.excluded(entry.name, is_dir):
            continue
        if is_dir:
            child = absolute / entry.name
            if _is_virtualenv(child):
                continue  # a virtual environment under any name
            if len(stack) >= MAX_DEPTH:
                result.problems.append(((shown / entry.name).as_posix(), f"nested more than {MAX_DEPTH} folders deep; skipped"))
                continue
            inner = _listing(shown / entry.name, child, result)
            if inner is not None:
                stack.append((shown / entry.name, child, excludes.below(entry.name, child), iter(inner)))
        elif accepts_file(entry.name, (shown / entry.name).as_posix(), wanted):
            _walk_file(entry, shown / entry.name, result, seen)


def _listing(shown: Path, absolute: Path, result: Discovery) -> list[os.DirEntry] | None:
    """The folder's entries in name order, or None after noting why it cannot be read."""
    try:
        with os.scandir(absolute) as listing:
            return sorted(listing, key=lambda entry: entry.name)
    except OSError as error:
        result.problems.append((shown.as_posix(), f"cannot read folder: {error.strerror or error}; skipped"))
        return None


def _walk_file(entry: os.DirEntry, shown: Path, result: Discovery, seen: set[Path]) -> None:
    """A walked entry with a source file's name: added, skipped (a symlink to a folder),
    or one problem."""
    try:
        if entry.is_symlink() and entry.is_dir():
            return  # a linked folder named like a file: folder links are not followed
    except OSError:
        pass
    why = _not_a_file(Path(entry.path))
    if why is None:
        _add(result, seen, shown)
    else:
        result.problems.append((shown.as_posix(), why))


def _is_virtualenv(folder: Path) -> bool:
    try:
        return (folder / "pyvenv.cfg").exists()
    except OSError:
        return False
