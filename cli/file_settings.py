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

from autograd_fix.cli.config import Config, ConfigLookup
from autograd_fix.cli.discovery import Discovery, discover, is_excluded


def discover_per_path(paths: list[str], lookup: ConfigLookup, force_exclude: bool | None) -> Discovery:
    """`discover` for each named path with its own configuration, merged (a file reached
    from two named paths is listed once)."""
    merged = Discovery()
    seen: set[Path] = set()
    for raw in paths:
        config = lookup.for_path(Path(raw))
        forced = config.force_exclude if force_exclude is None else force_exclude
        found = discover([raw], config.exclude, config.root, include=config.extend_include, force_exclude=forced)
        named_file = not Path(raw).is_dir()
        for path in found.files:
            key = path.resolve()
            if key in seen or (not named_file and _excluded_by_its_own(path, config, lookup)):
                continue
            seen.add(key)
            merged.files.append(path)
        merged.missing.extend(found.missing)
        merged.problems.extend(problem for problem in found.problems if problem not in merged.problems)
        merged.empty.extend(found.empty)
        merged.force_excluded.extend(found.force_excluded)
    return merged


def _excluded_by_its_own(path: Path, walked_with: Config, lookup: ConfigLookup) -> bool:
    own = lookup.for_path(path)
    if own is walked_with or own.root is None or own.root == walked_with.root or not own.exclude:
        return False
    return is_excluded(path, own.exclude, own.root)


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
