"""The checked-in floors of the benchmark figures (floors.toml), read and raised.

A floor (`min_*`) only rises and a ceiling (`max_*`) only falls when a benchmark run
does better: `improve` rewrites the number in place, keeping the file's comments, and
never writes a worse figure. The test suite reads the same file
(tests/test_corpus_floors.py), so losing a detection fails CI instead of passing it.
"""

from __future__ import annotations

import re
from pathlib import Path

from autograd_fix.compat import tomllib

FLOORS = Path(__file__).resolve().with_name("floors.toml")


def read_floors(path: Path = FLOORS) -> dict[str, dict[str, int]]:
    with open(path, "rb") as handle:
        return tomllib.load(handle)


def better(key: str, measured: int, recorded: int) -> bool:
    """Whether `measured` improves on `recorded` for a `min_*` or `max_*` key."""
    if key.startswith("min_"):
        return measured > recorded
    if key.startswith("max_"):
        return measured < recorded
    raise ValueError(f"{key}: a floor is named min_* or max_*")


def improve(section: str, measured: dict[str, int], path: Path = FLOORS) -> list[str]:
    """Write each figure of `measured` that beats the recorded one into `section` of the
    file; return what moved, as ``key: old -> new`` lines."""
    recorded = read_floors(path).get(section, {})
    text = path.read_text(encoding="utf-8")
    moved = []
    for key, value in measured.items():
        if key not in recorded or not better(key, value, recorded[key]):
            continue
        pattern = re.compile(rf"(^\[{re.escape(section)}\][^\[]*?^{re.escape(key)} = )(\d+)", re.M | re.S)
        text, count = pattern.subn(lambda match: f"{match.group(1)}{value}", text, count=1)
        if count:
            moved.append(f"{section}.{key}: {recorded[key]} -> {value}")
    if moved:
        path.write_text(text, encoding="utf-8")
    return moved
