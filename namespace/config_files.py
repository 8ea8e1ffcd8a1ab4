"""Which configuration file applies to a path, and its settings table: the one finder
that the command line, the language server and verification share.

A folder's configuration is the first of these that exists and holds settings, in this
order (as Ruff's ``.ruff.toml``, ``ruff.toml``, ``pyproject.toml``):

- ``.autograd-fix.toml`` and ``autograd-fix.toml``: the settings at the top level;
- ``pyproject.toml``: the ``[tool.autograd-fix]`` table (a pyproject without one is
  passed over, so a package's own ``[project]``-only pyproject does not hide the
  repository's settings above it).

The nearest folder with one wins, and its file is the whole configuration: files
further up are not merged in unless it says ``extend = "../pyproject.toml"`` (a path
relative to its own folder, to any of the three kinds). An extending file's keys replace
the extended file's, table by table one level down (its ``[verify]`` keys replace
those of the base's ``[verify]``). Globs and paths in an extended file are read
relative to the folder of the configuration that is used, not the base's.

A file owned by another user is not read (see `trust.readable_config`); the search
goes on above it and the caller is told why.

`load_settings` is the one loader: the command line (`cli.config.load_config`), the
language server (`cli.config.ConfigCache`) and verification (`verification.config.load_config`)
all call it, with the same `ConfigChoice` (``--config PATH``, ``--config KEY=VALUE``,
``--isolated``), so that a file's checks and its patches' verification read the same
settings: a sub-package's ``pyproject.toml`` with only ``[project]`` hides neither the
root's ``[tool.autograd-fix]`` nor its ``[tool.autograd-fix.verify]`` ``argv``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from autograd_fix.compat import tomllib
from autograd_fix.verification.trust import UserSettings, foreign_note, readable_config

#: the configuration files of one folder, in the order they are looked for
CONFIG_NAMES = (".autograd-fix.toml", "autograd-fix.toml", "pyproject.toml")
#: how many files one `extend` chain may read
MAX_EXTEND_DEPTH = 16


class ConfigFileError(ValueError):
    """A configuration file that cannot be used (broken TOML, a bad or cyclic `extend`)."""


@dataclass(frozen=True)
class ConfigFile:
    """One configuration in use: the file found (`path`), its settings with every
    `extend` resolved (`table`), and the files read for it, the found one first."""

    path: Path
    table: dict[str, Any]
    chain: tuple[Path, ...] = field(default=())

    @property
    def root(self) -> Path:
        """The folder its globs and paths are relative to."""
        return self.path.parent


@dataclass(frozen=True)
class ConfigChoice:
    """What the user chose on the command line about configuration files: one named
    file (``--config PATH``) instead of the lookup, none (``--isolated``), and
    ``--config KEY=VALUE`` overrides on top. The default is the lookup alone."""

    config_file: Path | None = None
    isolated: bool = False
    overrides: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, config_file: Path | None = None, isolated: bool = False, overrides: dict[str, Any] | None = None) -> "ConfigChoice":
        return cls(config_file, isolated, tuple((overrides or {}).items()))

    @property
    def override_table(self) -> dict[str, Any]:
        return dict(self.overrides)


@dataclass(frozen=True)
class Settings:
    """The settings that apply to a path: the configuration file in use (None: none, or
    ``--isolated``), its table with `extend` and overrides merged, and the files that
    were skipped, and why."""

    found: ConfigFile | None
    table: dict[str, Any]
    notes: tuple[str, ...] = ()

    @property
    def source(self) -> Path | None:
        return self.found.path if self.found else None


def load_settings(start: Path, user: UserSettings | None = None, choice: ConfigChoice | None = None) -> Settings:
    """The settings for files under `start` (a file or folder) by the one lookup rule:
    `choice`'s file, or none when isolated, or the nearest configuration with settings
    (`find_config_file`), with `choice`'s overrides on top. Raises `ConfigFileError`."""
    user = user if user is not None else UserSettings()
    choice = choice or ConfigChoice()
    notes: list[str] = []
    if choice.isolated:
        found = None
    elif choice.config_file is not None:
        found = read_config_file(choice.config_file, user)
    else:
        found = find_config_file(start, user, notes)
    return Settings(found, merged_tables(found.table if found else {}, choice.override_table), tuple(notes))


def candidate_files(start: Path) -> Iterator[Path]:
    """Every configuration file that exists from `start` (a folder, or a file's folder)
    upwards, nearest first, in `CONFIG_NAMES` order within a folder."""
    folder = Path(os.path.abspath(start))
    if folder.is_file() or not folder.exists():
        folder = folder.parent
    for candidate in (folder, *folder.parents):
        for name in CONFIG_NAMES:
            path = candidate / name
            if path.is_file():
                yield path


def _parse(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigFileError(f"{path}: {error}") from None


def settings_table(path: Path, data: dict[str, Any]) -> dict[str, Any] | None:
    """The autograd-fix settings in a parsed file: a dedicated file's whole document, a
    pyproject's ``[tool.autograd-fix]`` (None: it has none)."""
    if path.name != "pyproject.toml":
        return data
    tool = data.get("tool")
    if not isinstance(tool, dict) or "autograd-fix" not in tool:
        return None
    table = tool["autograd-fix"]
    if not isinstance(table, dict):
        raise ConfigFileError(f"{path}: [tool.autograd-fix] must be a table")
    return table


def merged_tables(base: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    """`own` over `base`, tables merged one level down (an extending file over the file
    it extends, `--config KEY=VALUE` over the file in use)."""
    merged = dict(base)
    for key, value in own.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def _resolved(path: Path, table: dict[str, Any], user: UserSettings, seen: tuple[Path, ...]) -> ConfigFile:
    """`table` (read from `path`) with its `extend` chain merged in."""
    chain = (*seen, path)
    if "extend" not in table:
        return ConfigFile(path, table, chain)
    target = table["extend"]
    if not isinstance(target, str) or not target.strip():
        raise ConfigFileError(f"{path}: extend must be the path of another configuration file, got {target!r}")
    base_path = Path(os.path.normpath(path.parent / os.path.expanduser(target)))
    if any(os.path.realpath(base_path) == os.path.realpath(earlier) for earlier in chain):
        names = " -> ".join(str(p) for p in (*chain, base_path))
        raise ConfigFileError(f"{path}: extend makes a cycle: {names}")
    if len(chain) >= MAX_EXTEND_DEPTH:
        raise ConfigFileError(f"{path}: extend chain longer than {MAX_EXTEND_DEPTH} files")
    if not base_path.is_file():
        raise ConfigFileError(f"{path}: extend: {base_path} does not exist")
    if not readable_config(str(base_path), user):
        raise ConfigFileError(f"{path}: extend: {foreign_note(str(base_path))}")
    base_table = settings_table(base_path, _parse(base_path))
    if base_table is None:
        raise ConfigFileError(f"{path}: extend: {base_path} has no [tool.autograd-fix] table")
    base = _resolved(base_path, base_table, user, chain)
    own = {key: value for key, value in table.items() if key != "extend"}
    return ConfigFile(path, merged_tables(base.table, own), base.chain)


def read_config_file(path: Path, user: UserSettings | None = None) -> ConfigFile:
    """A configuration file named by the user (``--config PATH``): read whatever its
    name, as a dedicated file unless it is a pyproject."""
    user = user if user is not None else UserSettings()
    if not path.is_file():
        raise ConfigFileError(f"{path}: no such configuration file")
    data = _parse(path)
    table = settings_table(path, data)
    if table is None:
        raise ConfigFileError(f"{path}: has no [tool.autograd-fix] table")
    return _resolved(path, table, user, ())


def find_config_file(start: Path, user: UserSettings | None = None, notes: list[str] | None = None) -> ConfigFile | None:
    """The configuration for files under `start`: the nearest file with settings, with
    files owned by another user skipped (each noted in `notes`)."""
    user = user if user is not None else UserSettings()
    for path in candidate_files(start):
        if not readable_config(str(path), user):
            note = foreign_note(str(path))
            if notes is not None and note not in notes:
                notes.append(note)
            continue
        table = settings_table(path, _parse(path))
        if table is not None:
            return _resolved(path, table, user, ())
    return None
