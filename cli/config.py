"""`[tool.autograd-fix]` from the nearest `pyproject.toml`; command-line flags win.

Keys: `select`, `ignore`, `exclude` (gitignore-style globs, relative to the
pyproject's folder), `extend-include` (globs of more files to check as Python, beyond
`*.py` and `*.ipynb`), `force-exclude` (bool: `exclude` also applies to paths named on
the command line, as Ruff's; what pre-commit needs), `unsafe-fixes` (bool), `per-file-ignores` (glob -> codes),
`max-file-size` (bytes: a larger source file is one per-file error, default 2,000,000),
`target-torch` (the oldest PyTorch the project supports, "2.1"), and per role
(`model`, `optimizer`, `scheduler`, `loader`, `criterion`, `loss`, `state`, `device`,
`target`; see `codemods.semantic.roles`) `<role>-objects` (qualified names of factories
whose results have that role, like Ruff's `logger-objects`) and `<role>-names` (more
name tokens that read as that role where no evidence decides).
Unknown keys are an error, so a typo does not silently do nothing.

A `pyproject.toml` owned by another user is not read (as git's `safe.directory`; see
`verification.trust`): the search goes on above it, and `Config.notes` says so.

A long-lived process (the language server) reads settings through `ConfigCache`: the
same `load_config`, once per project, again when a pyproject.toml above the document
changes.

Without `target-torch`, the floor comes from the `torch` requirement in the nearest
pyproject's `[project] dependencies` or `optional-dependencies` (see `torch_floor`); the table and the
dependencies may live in different pyproject files (a workspace root holding the
tool settings, a package folder declaring its requirements).
"""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from autograd_fix.cli.discovery import ExcludePatternError, exclude_spec
from autograd_fix.cli.torch_floor import dependencies_floor
from autograd_fix.codemods.semantic.roles import CONFIGURABLE_ROLES, DEFAULT_VOCABULARY, Role, Vocabulary
from autograd_fix.codemods.source import DEFAULT_MAX_FILE_BYTES
from autograd_fix.codemods.torch_version import TorchVersion
from autograd_fix.verification.trust import UserConfigError, UserSettings, foreign_note, load_user_settings, readable_config

#: `[tool.autograd-fix]` keys that extend the role vocabulary, per role
ROLE_NAME_KEYS = {f"{role.value}-names": role for role in CONFIGURABLE_ROLES}
ROLE_OBJECT_KEYS = {f"{role.value}-objects": role for role in CONFIGURABLE_ROLES}
KNOWN_KEYS = frozenset(
    {"select", "ignore", "exclude", "extend-include", "unsafe-fixes", "per-file-ignores", "target-torch", "verify",
     "max-file-size", "force-exclude"}
) | ROLE_NAME_KEYS.keys() | ROLE_OBJECT_KEYS.keys()


class ConfigError(Exception):
    """The configuration cannot be used (bad TOML, unknown key, wrong type)."""


@dataclass
class Config:
    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    extend_include: list[str] = field(default_factory=list)
    unsafe_fixes: bool = False
    #: apply `exclude` to paths named on the command line too (Ruff's `force-exclude`)
    force_exclude: bool = False
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    #: the oldest PyTorch the project supports (None: unknown, assume the newest)
    target_torch: TorchVersion | None = None
    #: role name tokens and factories, the defaults extended by `<role>-names` / `<role>-objects`
    roles: Vocabulary = DEFAULT_VOCABULARY
    #: folder of the pyproject.toml the settings came from (None: defaults)
    root: Path | None = None
    source: Path | None = None
    #: configuration files that were not read, and why
    notes: list[str] = field(default_factory=list)
    #: the largest source file analysed, in bytes (`max-file-size`)
    max_file_size: int = DEFAULT_MAX_FILE_BYTES

    def ignored_codes_for(self, path: Path) -> list[str]:
        """Codes (prefixes) that per-file-ignores turn off for `path`."""
        if not self.per_file_ignores:
            return []
        base = self.root or Path.cwd()
        try:
            relative = path.resolve().relative_to(base.resolve()).as_posix()
        except ValueError:
            relative = path.as_posix()
        codes: list[str] = []
        for pattern, ignored in self.per_file_ignores.items():
            if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(path.name, pattern):
                codes.extend(ignored)
        return codes


def _candidates(start: Path) -> Iterator[Path]:
    """Every `pyproject.toml` that exists from `start` (a folder, or a file's folder) upwards."""
    folder = start.resolve()
    if folder.is_file():
        folder = folder.parent
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        if path.is_file():
            yield path


def _pyprojects(
    start: Path, user: UserSettings | None = None, notes: list[str] | None = None
) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every `pyproject.toml` from `start` upwards that may be read, parsed; broken TOML
    is an error. One owned by another user is skipped (noted in `notes`) unless `user`
    trusts its project."""
    user = user if user is not None else UserSettings()
    for path in _candidates(start):
        if not readable_config(str(path), user):
            if notes is not None and foreign_note(str(path)) not in notes:
                notes.append(foreign_note(str(path)))
            continue
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
            raise ConfigError(f"{path}: {error}") from None
        yield path, data


def find_pyproject(start: Path, user: UserSettings | None = None, notes: list[str] | None = None) -> Path | None:
    """Nearest `pyproject.toml` with a `[tool.autograd-fix]` table, from `start` upwards
    (files owned by another user skipped, see `_pyprojects`)."""
    for path, data in _pyprojects(start, user, notes):
        if isinstance(data.get("tool"), dict) and "autograd-fix" in data["tool"]:
            return path
    return None


def _declared_floor(start: Path, user: UserSettings | None = None) -> TorchVersion | None:
    """The torch floor in the nearest pyproject that has a `[project]` table."""
    for _, data in _pyprojects(start, user):
        project = data.get("project")
        if isinstance(project, dict):
            # torch in an extra counts: a library that makes it optional still runs on it
            extras = project.get("optional-dependencies")
            groups = [project.get("dependencies"), *(extras.values() if isinstance(extras, dict) else ())]
            return dependencies_floor(entry for group in groups if isinstance(group, list) for entry in group)
    return None


def _string_list(table: dict[str, Any], key: str, source: Path) -> list[str] | None:
    if key not in table:
        return None
    value = table[key]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{source}: [tool.autograd-fix] {key} must be a list of strings")
    return value


def load_config(start: Path, user: UserSettings | None = None) -> Config:
    """The settings for files under `start`; `user` (their configuration file when None)
    says which projects are trusted, whose files are read whoever owns them."""
    if user is None:
        try:
            user = load_user_settings()
        except UserConfigError as error:
            raise ConfigError(str(error)) from None
    notes: list[str] = []
    source = find_pyproject(start, user, notes)
    if source is None:
        return Config(target_torch=_declared_floor(start, user), notes=notes)
    table = tomllib.loads(source.read_text(encoding="utf-8"))["tool"]["autograd-fix"]
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [tool.autograd-fix] must be a table")
    unknown = set(table) - KNOWN_KEYS
    if unknown:
        raise ConfigError(f"{source}: unknown [tool.autograd-fix] keys: {', '.join(sorted(unknown))}")
    config = Config(root=source.parent, source=source, notes=notes)
    config.select = _string_list(table, "select", source)
    config.ignore = _string_list(table, "ignore", source) or []
    config.exclude = _string_list(table, "exclude", source) or []
    config.extend_include = _string_list(table, "extend-include", source) or []
    try:
        exclude_spec(config.exclude)
    except ExcludePatternError as error:
        raise ConfigError(f"{source}: [tool.autograd-fix] exclude: {error}") from None
    config.unsafe_fixes = _flag(table, "unsafe-fixes", source)
    config.force_exclude = _flag(table, "force-exclude", source)
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict) or not all(
        isinstance(codes, list) and all(isinstance(c, str) for c in codes) for codes in per_file.values()
    ):
        raise ConfigError(f"{source}: [tool.autograd-fix] per-file-ignores must map globs to lists of codes")
    config.per_file_ignores = per_file
    size = table.get("max-file-size", DEFAULT_MAX_FILE_BYTES)
    if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
        raise ConfigError(f"{source}: [tool.autograd-fix] max-file-size must be a positive number of bytes")
    config.max_file_size = size
    config.target_torch = _target_torch(table, source) or _declared_floor(start, user)
    config.roles = _roles(table, source)
    if "verify" in table:
        _check_verify_table(source, user)
    return config


def _flag(table: dict[str, Any], key: str, source: Path) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"{source}: [tool.autograd-fix] {key} must be true or false")
    return value


def _check_verify_table(source: Path, user: UserSettings) -> None:
    """`[tool.autograd-fix.verify]` (driver, argv, isolation, pass-env, factories) is read
    per verified file by the verification stage; a malformed one stops the run here
    instead of leaving every patch unverified."""
    from autograd_fix.verification.config import ConfigError as VerifyConfigError
    from autograd_fix.verification.config import load_config as load_verify_config

    try:
        load_verify_config(config_dir=str(source.parent), user=user)
    except VerifyConfigError as error:
        raise ConfigError(str(error)) from None


def _roles(table: dict[str, Any], source: Path) -> Vocabulary:
    """The role vocabulary extended by the table's `<role>-names` and `<role>-objects`."""
    names: dict[Role, list[str]] = {}
    objects: dict[Role, list[str]] = {}
    for keys, into in ((ROLE_NAME_KEYS, names), (ROLE_OBJECT_KEYS, objects)):
        for key, role in keys.items():
            listed = _string_list(table, key, source)
            if listed:
                into[role] = listed
    return DEFAULT_VOCABULARY.extended(names, objects) if names or objects else DEFAULT_VOCABULARY


def _target_torch(table: dict[str, Any], source: Path) -> TorchVersion | None:
    if "target-torch" not in table:
        return None
    value = table["target-torch"]
    if not isinstance(value, str):
        raise ConfigError(f'{source}: [tool.autograd-fix] target-torch must be a version string such as "2.1"')
    try:
        return TorchVersion.parse(value)
    except ValueError as error:
        raise ConfigError(f"{source}: [tool.autograd-fix] target-torch: {error}") from None


#: one pyproject.toml as last seen: its path, modification time (ns) and size
_Stamp = tuple[str, int, int]


def _stamps(start: Path) -> tuple[_Stamp, ...]:
    """What `load_config(start)` depends on: the pyproject.toml files from `start`
    upwards, each with its modification time and size (a few `stat` calls)."""
    stamps = []
    for path in _candidates(start):
        try:
            stat = path.stat()
        except OSError:  # removed meanwhile: load_config will not see it either
            continue
        stamps.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(stamps)


class ConfigCache:
    """`load_config` for a long-lived process (the language server), once per project.

    A configuration depends only on the pyproject.toml files above the document, so it
    is kept per project root (the nearest pyproject.toml) with their modification times
    and sizes, and read again when one of them changes, appears or goes: editing the
    settings takes effect on the next analysis, without restarting the server. A
    configuration that cannot be used is kept too, and raised again until it changes.
    """

    def __init__(self) -> None:
        self._entries: dict[str | None, tuple[tuple[_Stamp, ...], Config | ConfigError]] = {}

    def load(self, start: Path) -> Config:
        """`load_config(start)`, read again only when a pyproject.toml it reads changed."""
        stamps = _stamps(start)
        root = stamps[0][0] if stamps else None
        entry = self._entries.get(root)
        if entry is None or entry[0] != stamps:
            try:
                result: Config | ConfigError = load_config(start)
            except ConfigError as error:
                result = error
            entry = self._entries[root] = (stamps, result)
        if isinstance(entry[1], ConfigError):
            raise ConfigError(str(entry[1]))  # a fresh one: no traceback piling up
        return entry[1]
