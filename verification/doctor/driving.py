"""Which script the doctor runs for a file: the file itself, or, for a library file that
runs nothing of its own (no ``__main__`` block, no top-level loop or call), the project's
own script that drives it, found as verification finds drivers (`found_drivers`: a
script that imports the module and names its functions or classes), or named by
``--driver``. No torch here.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass

from ..found_drivers import _runs_something, find_drivers


@dataclass(frozen=True)
class Driven:
    """The script to run (absolute path, its text, its argv) and why it was chosen
    (empty when it is the file itself)."""

    path: str
    text: str
    argv: tuple[str, ...] | None
    why: str = ""


def runs_nothing(text: str) -> bool:
    """Whether the file only defines things (a library module): nothing to watch run."""
    try:
        main, top = _runs_something(ast.parse(text))
    except (SyntaxError, ValueError):
        return False
    return not (main or top)


def _defined(text: str) -> list[str]:
    """Top-level functions and classes, and the classes' methods (``Trainer.run``)."""
    names = []
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(node.name)
        elif isinstance(node, ast.ClassDef):
            names.append(node.name)
            names += [f"{node.name}.{item.name}" for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return names


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def choose(path: str, text: str, root: str | None, driver: str | None, argv: list[str] | None,
           configured_argv: tuple[str, ...] = ()) -> Driven | str:
    """The script to run for `path`, or why there is none: `driver` (a script path) when
    given; else the file itself unless it runs nothing, then the first project script
    found that drives it."""
    if driver:
        full = os.path.abspath(driver)
        found = _read(full)
        if found is None:
            return f"--driver {driver}: no such readable file"
        return Driven(full, found, argv, f"--driver, for {os.path.relpath(path, root) if root else os.path.basename(path)}")
    if not runs_nothing(text) or not root:
        return Driven(path, text, argv)
    try:
        names = _defined(text)
    except (SyntaxError, ValueError):
        return Driven(path, text, argv)
    for command in find_drivers(root, path, names, argv=tuple(argv) if argv is not None else configured_argv):
        if command.kind != "script":
            continue
        full = os.path.join(root, command.folder or "", command.target)
        found = _read(full)
        if found is not None:
            return Driven(full, found, tuple(command.argv), f"drives {os.path.relpath(path, root)}: {command.found}")
    return (f"{os.path.basename(path)} runs nothing of its own (no __main__ block, no top-level code) and no project "
            "script that imports it was found: name one with --driver")
