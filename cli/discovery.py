"""Which files to look at: `.py` and `.ipynb` files (and those matching the configured
`extend-include` globs) under the given paths, minus what is excluded.

Folders are walked recursively, honouring every `.gitignore` from the repository root
down (each file's patterns relative to its own folder, a deeper file overriding a
shallower one, as git does), the default excludes (VCS folders, virtual environments,
build outputs, caches) and the configured `exclude` globs. Matching is pathspec's
`GitIgnoreSpec`, which follows git's own rules (negation, `**`, directory-only
patterns, anchoring). An excluded folder is never entered, so a negation cannot bring
back a file below it, exactly as in git. A file named explicitly on the command line is
always checked (as Ruff does without `--force-exclude`).

Each entry is matched only against the specs of its own ancestors, with a path relative
to each spec's folder, and the first spec (deepest first) with a matching pattern
decides; nothing is re-matched from the repository root.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

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


def accepts_file(name: str, shown: str = "", include: tuple[str, ...] = ()) -> bool:
    """Is a file with this name one to check? (The one place that decides.) Python files
    and notebooks always; `include` globs (`extend-include`) match the name or the path
    as shown."""
    if name.endswith((".py", ".ipynb")):
        return True
    return any(fnmatch.fnmatch(name, glob) or fnmatch.fnmatch(shown, glob) for glob in include)


def compile_patterns(lines: Iterable[str]) -> GitIgnoreSpec:
    """A spec of the valid patterns among `lines`; invalid ones never match (as in git)."""
    lines = list(lines)
    try:
        return GitIgnoreSpec.from_lines(lines)
    except (ValueError, re.error):
        return GitIgnoreSpec.from_lines([line for line in lines if _valid_pattern(line)])


def exclude_spec(patterns: Iterable[str]) -> GitIgnoreSpec:
    """The configured `exclude` globs; an invalid one is an error, not silently dropped."""
    patterns = list(patterns)
    for pattern in patterns:
        if not _valid_pattern(pattern):
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


def _valid_pattern(line: str) -> bool:
    try:
        GitIgnoreSpec.from_lines([line])
    except (ValueError, re.error):
        return False
    return True


@dataclass(frozen=True)
class _Anchored:
    """A spec and the walked folder's path relative to the spec's folder ("" or "a/b/")."""

    spec: GitIgnoreSpec
    prefix: str

    def below(self, name: str) -> _Anchored:
        return _Anchored(self.spec, f"{self.prefix}{name}/")

    def decides(self, key: str) -> bool | None:
        """True: excluded, False: re-included by a negation, None: no pattern matches."""
        return self.spec.check_file(self.prefix + key).include


@dataclass(frozen=True)
class _Excludes:
    """Everything that can exclude an entry of the folder being walked."""

    defaults: GitIgnoreSpec
    #: the configured globs anchored at the config's folder (None: walk is outside it)
    configured: _Anchored | None
    #: `.gitignore` specs of this folder and its ancestors, shallowest first
    gitignores: tuple[_Anchored, ...]

    def below(self, name: str, folder: Path) -> _Excludes:
        gitignores = tuple(ignore.below(name) for ignore in self.gitignores)
        own = _load_gitignore(folder)
        return _Excludes(
            self.defaults,
            self.configured.below(name) if self.configured else None,
            (*gitignores, _Anchored(own, "")) if own else gitignores,
        )

    def excluded(self, name: str, is_dir: bool) -> bool:
        key = f"{name}/" if is_dir else name
        configured = self.configured.decides(key) if self.configured else None
        if configured is None:
            configured = bool(self.defaults.check_file(key).include)  # names, at any depth
        if configured:
            return True
        for ignore in reversed(self.gitignores):  # the deepest matching .gitignore decides
            decision = ignore.decides(key)
            if decision is not None:
                return decision
        return False


def _load_gitignore(folder: Path) -> GitIgnoreSpec | None:
    try:
        text = (folder / ".gitignore").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    spec = compile_patterns(text.splitlines())
    return spec if len(spec) else None


def _repository_root(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def _relative_prefix(folder: Path, base: Path) -> str | None:
    """`folder` relative to `base` as a pattern prefix ("" or "a/b/"), None if outside."""
    try:
        relative = folder.relative_to(base).as_posix()
    except ValueError:
        return None
    return "" if relative == "." else f"{relative}/"


def _root_excludes(folder: Path, configured: GitIgnoreSpec | None, config_root: Path) -> _Excludes:
    """The excludes for walking `folder`: `.gitignore`s from the repository root down."""
    gitignores: list[_Anchored] = []
    root = _repository_root(folder)
    ancestors = [folder, *folder.parents]
    chain = ancestors[: ancestors.index(root) + 1] if root is not None else [folder]
    for directory in reversed(chain):
        spec = _load_gitignore(directory)
        prefix = _relative_prefix(folder, directory)
        if spec is not None and prefix is not None:
            gitignores.append(_Anchored(spec, prefix))
    anchored = None
    if configured is not None:
        prefix = _relative_prefix(folder, config_root)
        anchored = _Anchored(configured, prefix) if prefix is not None else None
    return _Excludes(compile_patterns(DEFAULT_EXCLUDES), anchored, tuple(gitignores))


def discover(
    paths: list[str],
    exclude: list[str] | tuple[str, ...] = (),
    config_root: Path | None = None,
    include: list[str] | tuple[str, ...] = (),
) -> Discovery:
    """Files to check under `paths`; `exclude` globs are relative to `config_root`;
    `include` adds globs (`extend-include`) to the default `*.py` and `*.ipynb`."""
    result = Discovery()
    wanted = tuple(include)
    configured = exclude_spec(exclude) if exclude else None
    base = (config_root or Path.cwd()).resolve()
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            result.missing.append(raw)
            continue
        if path.is_file():
            _add(result, seen, path)
            continue
        absolute = path.resolve()
        _walk(path, absolute, _root_excludes(absolute, configured, base), result, seen, wanted)
    return result


def _add(result: Discovery, seen: set[Path], path: Path) -> None:
    key = path.resolve()
    if key not in seen:
        seen.add(key)
        result.files.append(path)


def _walk(
    shown: Path, absolute: Path, excludes: _Excludes, result: Discovery, seen: set[Path], wanted: tuple[str, ...]
) -> None:
    try:
        entries = sorted(os.scandir(absolute), key=lambda entry: entry.name)
    except OSError as error:
        result.missing.append(f"{shown}: {error.strerror}")
        return
    for entry in entries:
        is_dir = entry.is_dir(follow_symlinks=False)
        if excludes.excluded(entry.name, is_dir):
            continue
        if is_dir:
            child = absolute / entry.name
            if (child / "pyvenv.cfg").exists():
                continue  # a virtual environment under any name
            _walk(shown / entry.name, child, excludes.below(entry.name, child), result, seen, wanted)
        elif accepts_file(entry.name, (shown / entry.name).as_posix(), wanted) and entry.is_file():
            _add(result, seen, shown / entry.name)
