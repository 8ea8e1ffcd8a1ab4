"""Drivers: what runs a patch's changed code, and how a verdict names it.

In order of preference: the file's own driver (a ``__main__`` block or top-level code,
run whole), a user-named driver from ``[tool.autograd-fix.verify] driver = ...`` (a
command line whose script is a project file, or a pytest node id), drivers found in the
project (`found_drivers`: its scripts, console entry points and tests that import the
changed module and name the changed function), and the changed function with
synthesized inputs. Pure parsing here; running is the harness's job.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

_PYTHONS = ("python", "python3", "py")


class DriverError(ValueError):
    """A configured driver that cannot be understood."""


@dataclass(frozen=True)
class Command:
    """A driver. `kind` is ``script``, ``module``, ``pytest`` or ``entry`` (a console entry
    point, ``module:function``); `target` is a script path (relative to the folder it runs
    in: the config's, or `folder`), a module name, a node id, or the entry point.
    `found` says why a driver found in the project (not named by the user) was chosen;
    `folder` is where it runs, relative to the project root."""

    text: str
    kind: str
    target: str
    argv: tuple[str, ...] = ()
    found: str = ""
    folder: str | None = None

    @property
    def label(self) -> str:
        if not self.found:
            return f"driver `{self.text}`"
        noun = {"pytest": "test", "entry": "entry point"}.get(self.kind, "script")
        return f"project {noun} `{self.text}`"

    def to_json(self, project_root: str, config_root: str) -> dict:
        """Paths relative to the project root, as the run child's copy lays them out."""
        cwd = self.folder if self.folder is not None else os.path.relpath(config_root, project_root)
        cwd = "" if cwd == "." else cwd
        script = None
        if self.kind == "script":
            script = os.path.normpath(os.path.join(cwd, self.target))
        elif self.kind == "pytest":
            script = os.path.normpath(os.path.join(cwd, self.target.split("::")[0]))
        return {"text": self.text, "kind": self.kind, "target": self.target, "argv": list(self.argv), "cwd": cwd, "script": script}


def parse_command(text: str) -> Command:
    """``python train.py --epochs 1``, ``python -m pkg.train``, ``train.py``, or a node id."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise DriverError(f"driver {text!r}: {exc}") from exc
    if not words:
        raise DriverError("driver is empty")
    if len(words) == 1 and "::" in words[0]:
        return Command(text, "pytest", words[0])
    if os.path.basename(words[0]).rstrip("0123456789.") in _PYTHONS or words[0].endswith("/python"):
        words = words[1:]
    if words[:1] == ["-m"]:
        if len(words) < 2:
            raise DriverError(f"driver {text!r}: -m needs a module name")
        if words[1] == "pytest":
            nodes = [w for w in words[2:] if not w.startswith("-")]
            if len(nodes) == 1:
                return Command(text, "pytest", nodes[0])
            raise DriverError(f"driver {text!r}: name one pytest node id (tests/test_x.py::test_name)")
        return Command(text, "module", words[1], tuple(words[2:]))
    if words and words[0] == "pytest":
        return parse_command("python -m " + shlex.join(words))
    if not words or not words[0].endswith(".py"):
        raise DriverError(
            f"driver {text!r}: expected `python script.py [args]`, `python -m module [args]` "
            "or a pytest node id (tests/test_x.py::test_name)"
        )
    return Command(text, "script", words[0], tuple(words[1:]))


def script_label(has_main_block: bool) -> str:
    return "script driver (__main__)" if has_main_block else "script driver (top-level code)"


def function_label(kind: str, qualname: str) -> str:
    noun = {"method": "method", "autograd_function": "autograd.Function"}.get(kind, "function")
    return f"{noun} {qualname} with synthesized inputs"
