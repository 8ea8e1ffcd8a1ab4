"""The settings for a file: its nearest configuration (`.autograd-fix.toml`,
`autograd-fix.toml`, or a `pyproject.toml` with `[tool.autograd-fix]`; see
`autograd_fix.config_files`), then `--config KEY=VALUE` overrides; command-line flags win.
Every file of a run gets the configuration nearest to it (`ConfigLookup`), so two
projects named in one run each keep their own settings.

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
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from autograd_fix.compat import tomllib
from autograd_fix.cli.discovery import ExcludePatternError, exclude_spec
from autograd_fix.config_files import ConfigChoice, ConfigFileError, candidate_files, load_settings, merged_tables
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
    #: folder of the configuration file the settings came from (None: defaults)
    root: Path | None = None
    source: Path | None = None
    #: the files read for these settings: `source`, then the files it extends
    chain: tuple[Path, ...] = ()
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


def _pyprojects(
    start: Path, user: UserSettings | None = None, notes: list[str] | None = None
) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every `pyproject.toml` from `start` upwards that may be read, parsed; broken TOML
    is an error. One owned by another user is skipped (noted in `notes`) unless `user`
    trusts its project."""
    user = user if user is not None else UserSettings()
    for path in (found for found in candidate_files(start) if found.name == "pyproject.toml"):
        if not readable_config(str(path), user):
            if notes is not None and foreign_note(str(path)) not in notes:
                notes.append(foreign_note(str(path)))
            continue
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
            raise ConfigError(f"{path}: {error}") from None
        yield path, data


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


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`--config KEY=VALUE` items as a settings table (each VALUE is TOML:
    `select=["AGF001"]`, `unsafe-fixes=true`, `verify.loop-cap=2`)."""
    table: dict[str, Any] = {}
    for item in items:
        try:
            parsed = tomllib.loads(item)
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"--config {item!r}: not KEY=VALUE in TOML ({error})") from None
        if not parsed:
            raise ConfigError(f"--config {item!r}: not KEY=VALUE in TOML")
        table = merged_tables(table, parsed)
    return table


def load_config(
    start: Path,
    user: UserSettings | None = None,
    *,
    overrides: dict[str, Any] | None = None,
    isolated: bool = False,
    config_file: Path | None = None,
) -> Config:
    """The settings for files under `start`: its nearest configuration file (or
    `config_file`, or none when `isolated`), with `overrides` on top; `user` (their
    configuration file when None) says which projects are trusted, whose files are read
    whoever owns them."""
    if user is None:
        try:
            user = load_user_settings()
        except UserConfigError as error:
            raise ConfigError(str(error)) from None
    try:
        settings = load_settings(start, user, ConfigChoice.of(config_file, isolated, overrides))
    except ConfigFileError as error:
        raise ConfigError(str(error)) from None
    found, table, notes = settings.found, settings.table, list(settings.notes)
    if found is None and not table:
        return Config(target_torch=None if isolated else _declared_floor(start, user), notes=notes)
    source = found.path if found else Path("--config")
    unknown = set(table) - KNOWN_KEYS
    if unknown:
        raise ConfigError(f"{source}: unknown [tool.autograd-fix] keys: {', '.join(sorted(unknown))}")
    config = Config(root=found.root if found else None, source=found.path if found else None, notes=notes)
    config.chain = found.chain if found else ()
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
    config.target_torch = _target_torch(table, source) or (None if isolated else _declared_floor(start, user))
    config.roles = _roles(table, source)
    if "verify" in table:
        _check_verify_table(table["verify"], source, found.root if found else None, user)
    return config


def _flag(table: dict[str, Any], key: str, source: Path) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"{source}: [tool.autograd-fix] {key} must be true or false")
    return value


def _check_verify_table(table: Any, source: Path, root: Path | None, user: UserSettings) -> None:
    """`[tool.autograd-fix.verify]` (driver, argv, isolation, pass-env, factories) is read
    per verified file by the verification stage, through the same loader; a malformed
    one stops the run here instead of leaving every patch unverified."""
    from autograd_fix.verification.config import ConfigError as VerifyConfigError
    from autograd_fix.verification.config import verify_config_from

    try:
        verify_config_from(table, str(source), str(root) if root else None, user)
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
    """What `load_config(start)` depends on: the configuration files from `start`
    upwards, each with its modification time and size (a few `stat` calls)."""
    stamps = []
    for path in candidate_files(start):
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


class ConfigLookup:
    """The settings of every file of one command-line run: each file gets the
    configuration nearest to it, read once per folder, so `autograd-fix projA projB`
    checks each project with its own settings whatever the order of the paths."""

    def __init__(
        self,
        user: UserSettings,
        *,
        overrides: dict[str, Any] | None = None,
        isolated: bool = False,
        config_file: Path | None = None,
    ) -> None:
        self._user = user
        self._overrides = overrides or {}
        self._isolated = isolated
        self._config_file = config_file
        self._by_folder: dict[Path, Config] = {}
        #: the same choice, for verification to read each file's settings as the checks did
        self.choice = ConfigChoice.of(config_file, isolated, self._overrides)

    def for_path(self, path: Path) -> Config:
        """The settings for `path` (a file or folder; one that does not exist: the
        current folder's). Raises `ConfigError` for a configuration that cannot be used."""
        folder = Path(os.path.abspath(path if path.is_dir() else (path.parent if path.exists() else Path.cwd())))
        config = self._by_folder.get(folder)
        if config is None:
            config = self._by_folder[folder] = load_config(
                folder, self._user, overrides=self._overrides, isolated=self._isolated, config_file=self._config_file
            )
        return config

    def notes(self) -> list[str]:
        """Every configuration file that was skipped, and why, once each."""
        return list(dict.fromkeys(note for config in self._by_folder.values() for note in config.notes))
