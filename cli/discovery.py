"""Which files to look at: `.py` and `.ipynb` files (and those matching the configured
`extend-include` globs) under the given paths, minus what is excluded.

Folders are walked recursively, honouring every `.gitignore` from the repository root
down, the default excludes (VCS folders, virtual environments, build outputs, caches)
and the configured `exclude` globs. A file named explicitly on the command line is
always checked (as Ruff does without `--force-exclude`).
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path

from autograd_fix.cli.gitignore import IgnorePattern, is_ignored, load_gitignore, parse_patterns

DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "build", "dist", "site-packages",
    "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs", "*.egg-info", "node_modules",
    ".hypothesis", ".ipynb_checkpoints",
)


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)
    #: paths given on the command line that do not exist
    missing: list[str] = field(default_factory=list)


def _repository_root(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def _inherited_gitignores(folder: Path) -> list[IgnorePattern]:
    """`.gitignore` patterns from the repository root down to (excluding) `folder`."""
    root = _repository_root(folder)
    if root is None:
        return []
    chain = [root]
    for part in folder.relative_to(root).parts[:-1] if folder != root else ():
        chain.append(chain[-1] / part)
    patterns: list[IgnorePattern] = []
    for directory in chain:
        if directory != folder:
            patterns.extend(load_gitignore(directory))
    return patterns


#: what a folder walk picks up besides `extend-include` matches
DEFAULT_INCLUDE = ("*.py", "*.ipynb")


def discover(
    paths: list[str],
    exclude: list[str] | tuple[str, ...] = (),
    config_root: Path | None = None,
    include: list[str] | tuple[str, ...] = (),
) -> Discovery:
    result = Discovery()
    wanted = (*DEFAULT_INCLUDE, *include)
    extra = parse_patterns(list(DEFAULT_EXCLUDES), Path("/"))
    configured = parse_patterns(list(exclude), (config_root or Path.cwd()).resolve()) if exclude else []
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
        inherited = _inherited_gitignores(absolute)
        _walk(path, absolute, inherited, extra + configured, result, seen, wanted)
    return result


def _add(result: Discovery, seen: set[Path], path: Path) -> None:
    key = path.resolve()
    if key not in seen:
        seen.add(key)
        result.files.append(path)


def _walk(
    shown: Path,
    absolute: Path,
    patterns: list[IgnorePattern],
    always: list[IgnorePattern],
    result: Discovery,
    seen: set[Path],
    wanted: tuple[str, ...],
) -> None:
    patterns = patterns + load_gitignore(absolute)
    try:
        entries = sorted(os.scandir(absolute), key=lambda entry: entry.name)
    except OSError as error:
        result.missing.append(f"{shown}: {error.strerror}")
        return
    for entry in entries:
        child_abs = absolute / entry.name
        child_shown = shown / entry.name
        is_dir = entry.is_dir(follow_symlinks=False)
        if is_ignored(child_abs, is_dir, always) or is_ignored(child_abs, is_dir, patterns):
            continue
        if is_dir:
            if (child_abs / "pyvenv.cfg").exists():
                continue  # a virtual environment under any name
            _walk(child_shown, child_abs, patterns, always, result, seen, wanted)
        elif entry.is_file() and any(fnmatch.fnmatch(entry.name, glob) or fnmatch.fnmatch(child_shown.as_posix(), glob) for glob in wanted):
            _add(result, seen, child_shown)
