"""`[tool.autograd-fix]` from the nearest `pyproject.toml`; command-line flags win.

Keys: `select`, `ignore`, `exclude` (gitignore-style globs, relative to the
pyproject's folder), `unsafe-fixes` (bool), `per-file-ignores` (glob -> codes).
Unknown keys are an error, so a typo does not silently do nothing.
"""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograd_fix.cli.discovery import ExcludePatternError, exclude_spec

KNOWN_KEYS = frozenset({"select", "ignore", "exclude", "unsafe-fixes", "per-file-ignores", "verify"})


class ConfigError(Exception):
    """The configuration cannot be used (bad TOML, unknown key, wrong type)."""


@dataclass
class Config:
    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    unsafe_fixes: bool = False
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    #: folder of the pyproject.toml the settings came from (None: defaults)
    root: Path | None = None
    source: Path | None = None

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


def find_pyproject(start: Path) -> Path | None:
    """Nearest `pyproject.toml` with a `[tool.autograd-fix]` table, from `start` upwards."""
    folder = start.resolve()
    if folder.is_file():
        folder = folder.parent
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        if path.is_file():
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
                raise ConfigError(f"{path}: {error}") from None
            if "autograd-fix" in data.get("tool", {}):
                return path
    return None


def _string_list(table: dict[str, Any], key: str, source: Path) -> list[str] | None:
    if key not in table:
        return None
    value = table[key]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{source}: [tool.autograd-fix] {key} must be a list of strings")
    return value


def load_config(start: Path) -> Config:
    source = find_pyproject(start)
    if source is None:
        return Config()
    table = tomllib.loads(source.read_text(encoding="utf-8"))["tool"]["autograd-fix"]
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [tool.autograd-fix] must be a table")
    unknown = set(table) - KNOWN_KEYS
    if unknown:
        raise ConfigError(f"{source}: unknown [tool.autograd-fix] keys: {', '.join(sorted(unknown))}")
    config = Config(root=source.parent, source=source)
    config.select = _string_list(table, "select", source)
    config.ignore = _string_list(table, "ignore", source) or []
    config.exclude = _string_list(table, "exclude", source) or []
    try:
        exclude_spec(config.exclude)
    except ExcludePatternError as error:
        raise ConfigError(f"{source}: [tool.autograd-fix] exclude: {error}") from None
    unsafe = table.get("unsafe-fixes", False)
    if not isinstance(unsafe, bool):
        raise ConfigError(f"{source}: [tool.autograd-fix] unsafe-fixes must be true or false")
    config.unsafe_fixes = unsafe
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict) or not all(
        isinstance(codes, list) and all(isinstance(c, str) for c in codes) for codes in per_file.values()
    ):
        raise ConfigError(f"{source}: [tool.autograd-fix] per-file-ignores must map globs to lists of codes")
    config.per_file_ignores = per_file
    return config
