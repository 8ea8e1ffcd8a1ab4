"""git's ignore rules, for the two walks that honour them: which files to check
(`cli.discovery`) and which files a verification run's copy of the project holds
(`verification.shadow`).

The repository's `.git/info/exclude` applies first (lowest precedence), then every
`.gitignore` from the repository root down, each file's patterns relative
to its own folder, a deeper file overriding a shallower one, as git does. Matching is
pathspec's `GitIgnoreSpec`, which follows git's own rules (negation, `**`,
directory-only patterns, anchoring). Each entry is matched only against the specs of
its own ancestors, with a path relative to each spec's folder, and the first spec
(deepest first) with a matching pattern decides; nothing is re-matched from the
repository root. Without a repository (no `.git` above), the walked folder's own
`.gitignore` still applies. The linter's walk also reads each folder's `.ignore`
(`LINT_IGNORE_FILES`), as ripgrep and Ruff do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # pathspec loads where a pattern is compiled: a run on named files needs none
    from pathspec import GitIgnoreSpec


def compile_patterns(lines: Iterable[str]) -> GitIgnoreSpec:
    """A spec of the valid patterns among `lines`; invalid ones never match (as in git)."""
    from pathspec import GitIgnoreSpec

    lines = list(lines)
    try:
        return GitIgnoreSpec.from_lines(lines)
    except (ValueError, re.error):
        return GitIgnoreSpec.from_lines([line for line in lines if valid_pattern(line)])


def valid_pattern(line: str) -> bool:
    from pathspec import GitIgnoreSpec

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


#: what a linter's walk reads in each folder, in order: a later file's pattern wins over
#: an earlier one's, so `.ignore` (ripgrep's and Ruff's: ignored by the tools, not by
#: git) overrides `.gitignore`. Verification's copy of a project reads `.gitignore`
#: only: a file kept out of linting may still be imported by the code that runs.
LINT_IGNORE_FILES = (".gitignore", ".ignore")
GIT_IGNORE_FILES = (".gitignore",)


def load_gitignore(folder: Path, names: tuple[str, ...] = GIT_IGNORE_FILES) -> GitIgnoreSpec | None:
    """The patterns of the folder's ignore files `names`, as one spec."""
    lines: list[str] = []
    for name in names:
        lines.extend(_pattern_lines(folder / name))
    spec = compile_patterns(lines)
    return spec if len(spec) else None


def _pattern_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def repository_excludes(root: Path) -> GitIgnoreSpec | None:
    """The repository's own `.git/info/exclude` (patterns as a root `.gitignore`'s, and
    below every `.gitignore` in precedence, as git reads them)."""
    spec = compile_patterns(_pattern_lines(root / ".git" / "info" / "exclude"))
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
    #: the ignore files read in each folder (`LINT_IGNORE_FILES` adds `.ignore`)
    names: tuple[str, ...] = GIT_IGNORE_FILES

    @classmethod
    def for_folder(cls, folder: Path, names: tuple[str, ...] = GIT_IGNORE_FILES) -> GitIgnores:
        """The specs for walking `folder` (absolute): the repository's
        `.git/info/exclude`, then the ignore files `names` from the repository root down
        to it."""
        root = repository_root(folder)
        ancestors = [folder, *folder.parents]
        chain = ancestors[: ancestors.index(root) + 1] if root is not None else [folder]
        specs: list[Anchored] = []
        info_exclude = repository_excludes(root) if root is not None else None
        if info_exclude is not None and root is not None:
            prefix = relative_prefix(folder, root)
            if prefix is not None:
                specs.append(Anchored(info_exclude, prefix))
        for directory in reversed(chain):
            spec = load_gitignore(directory, names)
            prefix = relative_prefix(folder, directory)
            if spec is not None and prefix is not None:
                specs.append(Anchored(spec, prefix))
        return cls(tuple(specs), names)

    def below(self, name: str, folder: Path) -> GitIgnores:
        """The specs in the subfolder `name` (at `folder`), its own `.gitignore` included."""
        specs = tuple(spec.below(name) for spec in self.specs)
        own = load_gitignore(folder, self.names)
        return GitIgnores((*specs, Anchored(own, "")) if own else specs, self.names)

    def decides(self, name: str, is_dir: bool) -> bool | None:
        """Whether the entry `name` of the folder is ignored (None: no pattern matches)."""
        key = f"{name}/" if is_dir else name
        for spec in reversed(self.specs):  # the deepest matching .gitignore decides
            decision = spec.decides(key)
            if decision is not None:
                return decision
        return None
