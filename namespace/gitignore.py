"""git's ignore rules, for the two walks that honour them: which files to check
(`cli.discovery`) and which files a verification run's copy of the project holds
(`verification.shadow`).

Every `.gitignore` from the repository root down applies, each file's patterns relative
to its own folder, a deeper file overriding a shallower one, as git does. Matching is
pathspec's `GitIgnoreSpec`, which follows git's own rules (negation, `**`,
directory-only patterns, anchoring). Each entry is matched only against the specs of
its own ancestors, with a path relative to each spec's folder, and the first spec
(deepest first) with a matching pattern decides; nothing is re-matched from the
repository root. Without a repository (no `.git` above), the walked folder's own
`.gitignore` still applies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from pathspec import GitIgnoreSpec


def compile_patterns(lines: Iterable[str]) -> GitIgnoreSpec:
    """A spec of the valid patterns among `lines`; invalid ones never match (as in git)."""
    lines = list(lines)
    try:
        return GitIgnoreSpec.from_lines(lines)
    except (ValueError, re.error):
        return GitIgnoreSpec.from_lines([line for line in lines if valid_pattern(line)])


def valid_pattern(line: str) -> bool:
    try:
        GitIgnoreSpec.from_lines([line])
    except (ValueError, re.error):
        return False
    return True


@dataclass(frozen=True)
class Anchored:
    """A spec and the walked folder's path relative to the spec's folder ("" or "a/b/")."""

    spec: GitIgnoreSpec
    prefix: str

    def below(self, name: str) -> Anchored:
        return Anchored(self.spec, f"{self.prefix}{name}/")

    def decides(self, key: str) -> bool | None:
        """True: excluded, False: re-included by a negation, None: no pattern matches."""
        return self.spec.check_file(self.prefix + key).include


def load_gitignore(folder: Path) -> GitIgnoreSpec | None:
    try:
        text = (folder / ".gitignore").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    spec = compile_patterns(text.splitlines())
    return spec if len(spec) else None


def repository_root(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def relative_prefix(folder: Path, base: Path) -> str | None:
    """`folder` relative to `base` as a pattern prefix ("" or "a/b/"), None if outside."""
    try:
        relative = folder.relative_to(base).as_posix()
    except ValueError:
        return None
    return "" if relative == "." else f"{relative}/"


@dataclass(frozen=True)
class GitIgnores:
    """The `.gitignore` specs that apply in one folder of a walk, shallowest first."""

    specs: tuple[Anchored, ...] = ()

    @classmethod
    def for_folder(cls, folder: Path) -> GitIgnores:
        """The specs for walking `folder` (absolute): `.gitignore`s from the repository
        root down to it."""
        root = repository_root(folder)
        ancestors = [folder, *folder.parents]
        chain = ancestors[: ancestors.index(root) + 1] if root is not None else [folder]
        specs: list[Anchored] = []
        for directory in reversed(chain):
            spec = load_gitignore(directory)
            prefix = relative_prefix(folder, directory)
            if spec is not None and prefix is not None:
                specs.append(Anchored(spec, prefix))
        return cls(tuple(specs))

    def below(self, name: str, folder: Path) -> GitIgnores:
        """The specs in the subfolder `name` (at `folder`), its own `.gitignore` included."""
        specs = tuple(spec.below(name) for spec in self.specs)
        own = load_gitignore(folder)
        return GitIgnores((*specs, Anchored(own, "")) if own else specs)

    def decides(self, name: str, is_dir: bool) -> bool | None:
        """Whether the entry `name` of the folder is ignored (None: no pattern matches)."""
        key = f"{name}/" if is_dir else name
        for spec in reversed(self.specs):  # the deepest matching .gitignore decides
            decision = spec.decides(key)
            if decision is not None:
                return decision
        return None
