"""Files and their settings for one command-line run: discovery under each named path
with that path's own configuration, and the nested configurations met on the way.

`autograd-fix projA projB` walks projA with projA's excludes and projB with projB's,
whatever the order. A file found by walking whose nearest configuration is another
than the walk's (a sub-project's `pyproject.toml` inside the folder named) is dropped
when that configuration excludes it, as Ruff's hierarchical configuration does; the
rest of its settings (select, ignore, roles...) come with its job (`ConfigLookup`).
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Sequence

from autograd_fix.cli.config import Config, ConfigLookup
from autograd_fix.cli.discovery import Discovery, discover, exclude_spec, is_excluded


def discover_per_path(
    paths: list[str],
    lookup: ConfigLookup,
    force_exclude: bool | None,
    exclude: list[str] | None = None,
    extend_exclude: Sequence[str] = (),
) -> Discovery:
    """`discover` for each named path with its own configuration, merged (a file reached
    from two named paths is listed once). `exclude` (`--exclude`) replaces each
    configuration's exclude, `extend_exclude` (`--extend-exclude`) adds to it; both are
    matched as the configuration's are. A bad glob raises `ExcludePatternError`."""
    if exclude is not None or extend_exclude:
        exclude_spec([*(exclude or []), *extend_exclude])  # a bad glob: one error, before any walk
    merged = Discovery()
    seen: set[Path] = set()
    for raw in paths:
        config = lookup.for_path(Path(raw))
        forced = config.force_exclude if force_exclude is None else force_exclude
        found = discover([raw], _excludes(config, exclude, extend_exclude), config.root, include=config.extend_include, force_exclude=forced)
        named_file = not Path(raw).is_dir()
        for path in found.files:
            key = path.resolve()
            if key in seen or (not named_file and _excluded_by_its_own(path, config, lookup, exclude, extend_exclude)):
                continue
            seen.add(key)
            merged.files.append(path)
        merged.missing.extend(found.missing)
        merged.problems.extend(problem for problem in found.problems if problem not in merged.problems)
        merged.empty.extend(found.empty)
        merged.force_excluded.extend(found.force_excluded)
    return merged


def _excludes(config: Config, exclude: list[str] | None, extend_exclude: Sequence[str]) -> list[str]:
    return [*(config.exclude if exclude is None else exclude), *extend_exclude]


def _excluded_by_its_own(
    path: Path, walked_with: Config, lookup: ConfigLookup, exclude: list[str] | None, extend_exclude: Sequence[str]
) -> bool:
    own = lookup.for_path(path)
    patterns = _excludes(own, exclude, extend_exclude)
    if own is walked_with or own.root is None or own.root == walked_with.root or not patterns:
        return False
    return is_excluded(path, patterns, own.root)


def settings_text(path: str, config: Config) -> str:
    """`--show-settings FILE`: where the settings for `path` come from, and each value."""
    if config.source is None:
        origin = "no configuration file (defaults)"
    else:
        origin = str(config.source)
        if len(config.chain) > 1:
            origin += " (extends " + ", ".join(str(base) for base in config.chain[1:]) + ")"
    lines = [f"Settings for {path}", f"  configuration: {origin}"]
    for field in fields(config):
        if field.name in {"source", "chain", "notes"}:
            continue
        value = getattr(config, field.name)
        if field.name == "roles":
            value = value.additions() or "defaults"
        lines.append(f"  {field.name.replace('_', '-')} = {value}")
    lines.extend(f"  note: {note}" for note in config.notes)
    return "\n".join(lines)
