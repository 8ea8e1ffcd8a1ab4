"""The PyTorch release a project must still run on (its floor), as rules see it.

Like Ruff's `target-version`: a fix never rewrites to an API that the oldest PyTorch
the project supports lacks. APIs appear and are deprecated per minor release, so a
version is `(major, minor)`; patch releases and local tags (`+cu121`) are dropped.
`None` where a rule asks for the target means "no floor known: assume the newest".
"""

from __future__ import annotations

from typing import NamedTuple

from packaging.version import InvalidVersion, Version


class TorchVersion(NamedTuple):
    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> TorchVersion:
        """`"2.1"`, `"2.3.1"`, `"2.4.0+cu121"` -> TorchVersion; ValueError otherwise."""
        try:
            release = Version(text.strip()).release
        except InvalidVersion:
            raise ValueError(f"not a PyTorch version: {text!r} (expected e.g. \"2.1\")") from None
        return cls(release[0], release[1] if len(release) > 1 else 0)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


def supports(floor: TorchVersion | None, introduced: TorchVersion) -> bool:
    """Does every PyTorch from `floor` up have an API `introduced` in that release?"""
    return floor is None or floor >= introduced
