"""Which Python runs verification: the project's own, named by the user or found.

autograd-fix is often installed the way linters are (pipx, a tools virtualenv, a
pre-commit hook environment), where neither torch nor the project's packages are. Its
verification worker therefore runs under the project's interpreter, without being
installed there (`client.worker_library`). The first of these that applies is used:

1. ``--python PATH`` (the main command, ``verify`` and ``server``; the language server
   also reads ``python`` from its initialization options);
2. ``python`` under ``[verify]`` in the user's configuration file;
3. ``python`` under ``[tool.autograd-fix.verify]``, in a trusted project only;
4. ``VIRTUAL_ENV``: the activated virtual environment;
5. ``CONDA_PREFIX``: the activated conda environment;
6. ``.venv``, then ``venv``, in the project root, in a trusted project only;
7. autograd-fix's own Python.

A named interpreter (1-3) is final: when it cannot run verification, every verdict says
why. A found one (4-6) that cannot is passed over, with a note, for the next. An
environment that is autograd-fix's own (pre-commit sets ``VIRTUAL_ENV`` to the hook's
environment) says nothing about the project and is skipped. Why 3 and 6 need trust:
see `trust` (the interpreter starts outside the sandbox).

An interpreter is asked about itself (`probe`) before it is used: its Python version,
its torch (found by the import system and the installed metadata, never imported: that
takes seconds) and its user site folder. The worker needs Python `OLDEST_PYTHON` or
newer and torch `OLDEST_TORCH` or newer.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Mapping

from .client import WorkerError
from .trust import UserSettings, user_config_path

#: the oldest Python the verification worker runs on (autograd-fix's own requires-python)
OLDEST_PYTHON = (3, 10)
#: the oldest torch verification supports (autograd-fix's ``verify`` extra asks for it)
OLDEST_TORCH = (2, 1)
#: seconds an interpreter may take to describe itself
PROBE_TIMEOUT_S = 60.0
#: where the install hint points when no usable Python has torch
INSTALL_HINT = "pip install 'autograd-fix[verify]'"

#: what an interpreter runs to describe itself: valid on any Python (even 2.7), imports
#: nothing of the project's and no torch; run with ``-E`` in an empty folder
_PROBE = r"""
import sys
info = {"python": "%d.%d.%d" % tuple(sys.version_info[:3])}
if sys.version_info >= (3, 8):
    import importlib.util, site
    info["torch"] = None
    if importlib.util.find_spec("torch") is not None:
        try:
            from importlib.metadata import version
            info["torch"] = version("torch")
        except Exception:
            info["torch"] = "unknown"
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    info["user_site"] = user if user and user in sys.path else None
import json
sys.stdout.write(json.dumps(info))
"""


class InterpreterError(WorkerError):
    """No interpreter that can run verification: the message is the verdicts' reason;
    `notes` what the project's configuration said that was not taken (each once)."""

    def __init__(self, message: str, notes: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.notes = notes


def _release(text: str | None) -> tuple[int, ...]:
    """``"2.13.0+cpu"`` -> (2, 13, 0); the leading numbers only (``"2.14.0a0"`` -> (2, 14, 0))."""
    numbers: list[int] = []
    for part in (text or "").split("+")[0].split("."):
        digits = ""
        for char in part:
            if not char.isdigit():
                break
            digits += char
        if not digits:
            break
        numbers.append(int(digits))
        if digits != part:
            break
    return tuple(numbers)


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def problem(python: str, torch: str | None) -> str | None:
    """Why an interpreter with these versions cannot run verification (None: it can)."""
    if _release(python) < OLDEST_PYTHON:
        return f"is Python {python}; the verification worker runs on Python {_dotted(OLDEST_PYTHON)} or newer"
    if torch is None:
        return "has no torch"
    if torch != "unknown" and _release(torch) < OLDEST_TORCH:
        return f"has torch {torch}; verification supports torch {_dotted(OLDEST_TORCH)} or newer"
    return None


@dataclass(frozen=True)
class Interpreter:
    """A Python that can run the worker: its path, how it was chosen, what it holds."""

    path: str
    origin: str
    python: str
    torch: str | None
    #: its user site folder, when it uses one (the worker, started with ``-I``, adds it back)
    user_site: str | None = None
    #: autograd-fix's own interpreter (the worker imports autograd-fix as installed)
    own: bool = False
    #: what the choice passed over, and why (said once, on stderr)
    notes: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        return f"{self.path} (Python {self.python}, torch {self.torch}; {self.origin})"


@dataclass(frozen=True)
class Candidate:
    """An interpreter to try: `named` ones (by the user, or a trusted project) are final."""

    path: str
    origin: str
    named: bool


def in_environment(prefix: str) -> str:
    """The interpreter of an environment folder (a virtualenv or conda prefix)."""
    for relative in ("bin/python", "bin/python3", "Scripts/python.exe", "python.exe"):
        candidate = os.path.join(prefix, relative)
        if os.path.isfile(candidate):
            return candidate
    return os.path.join(prefix, "bin", "python")


def _executable(value: str) -> str:
    """A configured value as an executable path: a folder is an environment; a bare
    name is looked up on ``PATH``."""
    if os.path.isdir(value):
        return in_environment(value)
    if os.sep not in value:
        return shutil.which(value) or value
    return value


def _same_prefix(prefix: str) -> bool:
    """Whether `prefix` is the environment autograd-fix itself runs in."""
    return os.path.realpath(prefix) in {os.path.realpath(sys.prefix), os.path.realpath(sys.exec_prefix)}


OWN = "autograd-fix's own Python"


def _own_torch() -> str | None:
    """This process's torch version, found without importing it."""
    if importlib.util.find_spec("torch") is None:
        return None
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:  # noqa: BLE001 - a torch without metadata (a source tree on the path)
        return "unknown"


def own_interpreter(notes: tuple[str, ...] = (), failures: tuple[tuple[str, str, str], ...] = (),
                    untrusted: tuple[str, ...] = ()) -> Interpreter:
    """autograd-fix's own Python, described in-process (nothing started). When it cannot
    run verification: InterpreterError, naming it after the `failures` of the
    interpreters tried before it (and the `untrusted` environments passed over)."""
    python, torch = _dotted(tuple(sys.version_info[:3])), _own_torch()
    why = problem(python, torch)
    if why is not None:
        raise InterpreterError(_none_usable([*failures, (OWN, sys.executable, why)], untrusted))
    return Interpreter(sys.executable, OWN, python, torch, own=True, notes=notes)


def candidates(
    user: UserSettings, project_python: str | None, project_root: str | None, environ: Mapping[str, str]
) -> tuple[list[Candidate], list[str]]:
    """The interpreters to try, in order, and the project environments found but not
    used because the project is not trusted (for the reason, when nothing works).

    `project_python` is the project configuration's ``python``, already weighed (None
    unless the project is trusted)."""
    if user.python:
        origin = "--python" if user.python_flag else f"python in {user.source}"
        return [Candidate(_executable(user.python), origin, True)], []
    if project_python:
        return [Candidate(_executable(project_python), "python in the project's pyproject.toml", True)], []
    found: list[Candidate] = []
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = environ.get(variable)
        if prefix and os.path.isdir(prefix) and not _same_prefix(prefix):
            if not any(os.path.realpath(c.path) == os.path.realpath(in_environment(prefix)) for c in found):
                found.append(Candidate(in_environment(prefix), variable, False))
    untrusted: list[str] = []
    if project_root:
        for name in (".venv", "venv"):
            folder = os.path.join(project_root, name)
            if not os.path.isfile(os.path.join(folder, "pyvenv.cfg")) and not os.path.isdir(os.path.join(folder, "conda-meta")):
                continue
            if _same_prefix(folder):
                continue
            if user.trusts(project_root):
                found.append(Candidate(in_environment(folder), f"the project's {name}", False))
            else:
                untrusted.append(folder)
    return found, untrusted


def probe(path: str, environ: Mapping[str, str] | None = None) -> tuple[str | None, dict]:
    """Ask the interpreter at `path` about itself: (why it cannot be asked, its answer).

    It runs with ``-E`` (no ``PYTHON*`` variables) in an empty folder of its own, so
    nothing but the interpreter and its site-packages is read."""
    if not os.path.exists(path):
        return ("does not exist" if os.sep in path else "is not on PATH"), {}
    if not os.access(path, os.X_OK) or os.path.isdir(path):
        return "is not an executable file", {}
    from .isolation import worker_environment

    env = worker_environment(dict(os.environ if environ is None else environ))
    folder = tempfile.mkdtemp(prefix="agf-probe-")
    try:
        done = subprocess.run(
            [path, "-E", "-c", _PROBE], cwd=folder, env=env, stdin=subprocess.DEVNULL,
            capture_output=True, timeout=PROBE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return f"did not answer within {PROBE_TIMEOUT_S:.0f} s", {}
    except OSError as exc:
        return f"cannot be started ({exc.strerror or exc})", {}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    try:
        answer = json.loads(done.stdout.decode("utf-8", "replace"))
        if not isinstance(answer, dict) or not isinstance(answer.get("python"), str):
            raise ValueError(answer)
    except ValueError:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        return f"does not run as a Python interpreter ({tail[0][:200]})", {}
    return None, answer


def choose(
    user: UserSettings, project_python: str | None, project_root: str | None, environ: Mapping[str, str] | None = None
) -> Interpreter:
    """The interpreter verification runs under (see the module's order); raises
    InterpreterError, whose message is the reason every verdict gives, when none can."""
    environ = os.environ if environ is None else environ
    found, untrusted = candidates(user, project_python, project_root, environ)
    failures: list[tuple[str, str, str]] = []
    for candidate in found:
        cannot, answer = probe(candidate.path, environ)
        why = cannot or problem(answer["python"], answer.get("torch"))
        if why is None:
            return Interpreter(
                candidate.path, candidate.origin, answer["python"], answer.get("torch"), answer.get("user_site"),
                notes=_passed_over(failures),
            )
        if candidate.named:
            raise InterpreterError(_named_unusable(candidate, why))
        failures.append((candidate.origin, candidate.path, why))
    return own_interpreter(_passed_over(failures), tuple(failures), tuple(untrusted))


def _passed_over(failures: list[tuple[str, str, str]]) -> tuple[str, ...]:
    return tuple(f"{origin}'s Python {path} {reason}; not used for verification" for origin, path, reason in failures)


def unavailable_reason(error: Exception) -> str:
    """A verdict's reason when no worker could start: an interpreter that cannot run it
    says so itself; anything else is the worker's own failure."""
    return str(error) if isinstance(error, InterpreterError) else f"verification worker unavailable: {error}"


def _named_unusable(candidate: Candidate, why: str) -> str:
    if why == "has no torch" or why.startswith("has torch"):
        advice = (f"install torch {_dotted(OLDEST_TORCH)} or newer there, or name another interpreter "
                  "(--python, or python under [verify] in " + user_config_path() + ")")
    else:
        advice = (f"name a Python {_dotted(OLDEST_PYTHON)} or newer with torch {_dotted(OLDEST_TORCH)} or newer "
                  "(--python PATH)")
    return f"not run: the Python chosen for verification, {candidate.path} ({candidate.origin}), {why}; {advice}"


def _none_usable(failures: list[tuple[str, str, str]], untrusted: tuple[str, ...] | list[str]) -> str:
    tried = "; ".join(f"{origin} ({path}) {reason}" for origin, path, reason in failures)
    text = (
        f"not run: no Python with torch to verify with: {tried}. Pass --python PATH (the project's interpreter, "
        f"with torch {_dotted(OLDEST_TORCH)} or newer), activate the project's environment, or install torch where "
        f"autograd-fix runs ({INSTALL_HINT})"
    )
    for folder in untrusted:
        text += (
            f"; {folder} was found but not used: a repository's own environment would start outside the sandbox "
            f"(pass --python {in_environment(folder)}, or add {os.path.dirname(folder)} to trusted-projects in "
            f"{user_config_path()})"
        )
    return text
