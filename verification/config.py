"""User-supplied input factories for function-mode verification.

When the name heuristics cannot build an input (a model whose constructor needs a
config object, a loader of dict batches, ...), a project names a factory per parameter
or free name in the nearest ``pyproject.toml`` above the verified file::

    [tool.autograd-fix.verify]
    model = "myproject.testing:make_model"
    loader = "myproject.testing:make_loader"

Each value is ``"module:callable"``. The module is imported with the pyproject's folder
first on ``sys.path``. The callable is called with keyword arguments for those of its own
parameters that name other bound inputs (so ``def make_loader(model): ...`` receives the
model the unit receives), and its return value is passed to the unit. Factories win over
the heuristics; both sides of a patch call them after identical seeding.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class VerifyConfig:
    """Factories (name -> ``module:callable``) and the folder their modules live under."""

    factories: dict[str, str] = field(default_factory=dict)
    root: str | None = None

    def to_json(self) -> dict:
        return {"factories": dict(self.factories), "root": self.root}


class ConfigError(ValueError):
    """The ``[tool.autograd-fix.verify]`` table is malformed."""


def find_pyproject(start: str) -> str | None:
    """The nearest ``pyproject.toml`` at or above `start` (a file or a folder)."""
    current = os.path.abspath(start)
    if not os.path.isdir(current):
        current = os.path.dirname(current)
    while True:
        candidate = os.path.join(current, "pyproject.toml")
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def load_config(path: str | None = None, *, config_dir: str | None = None) -> VerifyConfig:
    """Read the verify table for the file at `path` (or the folder `config_dir`)."""
    start = config_dir or (path if path and not path.startswith("<") else os.getcwd())
    pyproject = find_pyproject(start)
    if pyproject is None:
        return VerifyConfig()
    try:
        with open(pyproject, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{pyproject}: {exc}") from exc
    table = data.get("tool", {}).get("autograd-fix", {}).get("verify", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: [tool.autograd-fix.verify] must be a table")
    factories = {}
    for name, value in table.items():
        if not isinstance(value, str) or value.count(":") != 1:
            raise ConfigError(f"{pyproject}: [tool.autograd-fix.verify] {name} must be \"module:callable\", got {value!r}")
        factories[name] = value
    return VerifyConfig(factories=factories, root=os.path.dirname(pyproject))
