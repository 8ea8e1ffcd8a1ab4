"""Whose configuration may lower verification's safety: the user's, never a repository's.

A user points autograd-fix at code they did not write (a cloned repository, a pull
request in CI). That repository's ``pyproject.toml`` is part of the code under test, so
it must not be able to turn the sandbox off (``isolation = "off"``), hand it the
user's secrets (``pass-env = ["AWS_SECRET_ACCESS_KEY"]``) or choose the Python that runs
verification (``python = ".venv/bin/python"``). Those three settings are honoured only
from the user's own configuration:

- the command line (``--isolation``, ``--pass-env``), then
- the user's configuration file, ``$XDG_CONFIG_HOME/autograd-fix/config.toml``
  (``~/.config/autograd-fix/config.toml`` by default)::

      [verify]
      isolation = "required"               # for every project
      pass-env = ["WANDB_MODE"]
      python = "~/envs/torch/bin/python"   # the Python that runs verification (see `interpreter`)
      trusted-projects = ["~/src/mymodel"] # these may set isolation, pass-env and python themselves

Why the interpreter is a safety setting although the runs it makes are sandboxed: the
verification *worker* is the process that sets the sandbox up, so it runs outside it,
with the user's rights. Whatever starts with that interpreter runs there too: the
binary itself (a repository can commit a ``.venv/bin/python`` that is a shell script),
its ``site-packages``' ``.pth`` files and ``sitecustomize``. A repository's ``python``
key, and the ``.venv`` or ``venv`` folder in its root, are therefore used only in a
trusted project; ``VIRTUAL_ENV`` and ``CONDA_PREFIX`` are the user's own shell's.

A repository's own ``isolation``, ``pass-env`` or ``python`` counts only when its folder is at or
below a trusted project; otherwise it is ignored with a note naming the file, except
``isolation = "required"``, which only ever makes runs safer. The ``driver`` and the
input factories are honoured from any repository: they choose *which* of the project's
own code runs, and it runs in the same sandbox as the file's own ``__main__`` would.

Why a list instead of asking once per repository (as direnv and VS Code's workspace
trust do): the tool runs in CI and pre-commit hooks, where nothing can answer a prompt,
and a file the user edits is an answer that is visible, reviewable and the same on every
machine the user copies it to.

Configuration files owned by another user are not read at all (as git's
``safe.directory``): a ``pyproject.toml`` that someone else planted in a parent folder,
``/tmp`` say, would otherwise configure the user's own runs. A trusted project's files
are read whoever owns them.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, replace
from typing import Mapping


class Isolation(str, enum.Enum):
    """How verification runs are confined (see `isolation`): the one list of modes, for
    configuration and the command line alike, kept here so that reading configuration
    loads nothing of the sandbox."""

    auto = "auto"
    required = "required"
    off = "off"


MODES = tuple(mode.value for mode in Isolation)
#: the verify settings that can lower safety, honoured only from the user's configuration
SAFETY_KEYS = ("isolation", "pass-env", "python")
#: the keys of the user file's ``[verify]`` table
USER_KEYS = frozenset({"isolation", "pass-env", "python", "trusted-projects"})


class UserConfigError(ValueError):
    """The user's configuration file cannot be used."""


def user_config_path(environ: Mapping[str, str] | None = None) -> str:
    """Where the user's configuration file lives (it need not exist)."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "autograd-fix", "config.toml")


def _is_within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class UserSettings:
    """The user's own verification settings: what they say about isolation and the
    environment (None / empty: nothing said), and the folders they trust.

    `source` is the file they came from (None: no file; flags only or defaults)."""

    isolation: str | None = None
    pass_env: tuple[str, ...] = ()
    trusted: tuple[str, ...] = ()
    source: str | None = None
    #: the Python that runs verification (``--python``, else the file's ``python``)
    python: str | None = None
    #: whether `python` came from the command line (else from the file)
    python_flag: bool = False

    def trusts(self, path: str) -> bool:
        """Whether `path` (a file or folder) is at or below a trusted project."""
        real = os.path.realpath(path)
        return any(_is_within(real, folder) for folder in self.trusted)

    def with_flags(
        self, isolation: str | None = None, pass_env: tuple[str, ...] | list[str] = (), python: str | None = None
    ) -> "UserSettings":
        """These settings with the command line's on top: ``--isolation`` replaces the
        file's mode, ``--pass-env`` adds names, ``--python`` replaces the file's
        interpreter (a path is taken from the current folder)."""
        if isolation is not None and isolation not in MODES:
            raise UserConfigError(f"--isolation must be one of {', '.join(MODES)}, got {isolation!r}")
        for name in pass_env:
            _check_variable_name(name, "--pass-env")
        if python is not None and not python.strip():
            raise UserConfigError("--python: expected the path of a Python interpreter (or of its environment)")
        names = tuple(dict.fromkeys([*self.pass_env, *pass_env]))
        chosen = interpreter_path(python, os.getcwd()) if python else self.python
        return replace(
            self, isolation=isolation or self.isolation, pass_env=names, python=chosen,
            python_flag=bool(python) or self.python_flag,
        )


def interpreter_path(value: str, base: str) -> str:
    """A configured interpreter as a path: ``~`` expanded, a relative path taken from
    `base`; a bare name (``python3.12``) stays a name, looked up on ``PATH`` when used."""
    value = os.path.expanduser(value)
    if os.sep not in value and not os.path.exists(os.path.join(base, value)):
        return value
    return os.path.normpath(os.path.join(base, value))


def _check_variable_name(name: object, where: str) -> None:
    if not isinstance(name, str) or not name or "=" in name or "\0" in name:
        raise UserConfigError(f"{where}: expected an environment variable name, got {name!r}")


def owned_by_someone_else(path: str) -> bool:
    """Whether the file at `path` belongs to another user than the one running the tool
    (root running through sudo counts as the user who called sudo, as git does)."""
    try:
        owner = os.stat(path).st_uid
    except OSError:
        return False
    me = os.geteuid()
    if owner == me:
        return False
    if me == 0:
        sudo_uid = os.environ.get("SUDO_UID", "")
        return not (sudo_uid.isdigit() and int(sudo_uid) == owner)
    return True


def foreign_note(path: str) -> str:
    """The note for a configuration file that is skipped for its owner."""
    return (
        f"{path} is owned by another user and was not read (add its folder to trusted-projects "
        f"in {user_config_path()} to read it)"
    )


def readable_config(path: str, user: "UserSettings") -> bool:
    """Whether a configuration file may be read: the user's own, or in a trusted project."""
    return not owned_by_someone_else(path) or user.trusts(path)


def load_user_settings(environ: Mapping[str, str] | None = None) -> UserSettings:
    """The user's configuration file, read (defaults when it does not exist)."""
    from autograd_fix.compat import tomllib  # here: see worker_library
    path = user_config_path(environ)
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        return UserSettings()
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UserConfigError(f"{path}: {exc}") from exc
    if owned_by_someone_else(path):
        raise UserConfigError(f"{path} is owned by another user; refusing to read it")
    table = data.get("verify", {})
    unknown = set(data) - {"verify"}
    if not isinstance(table, dict):
        raise UserConfigError(f"{path}: [verify] must be a table")
    unknown |= {f"verify.{key}" for key in set(table) - USER_KEYS}
    if unknown:
        raise UserConfigError(f"{path}: unknown keys: {', '.join(sorted(unknown))}")
    isolation = table.get("isolation")
    if isolation is not None and isolation not in MODES:
        raise UserConfigError(f"{path}: [verify] isolation must be one of {', '.join(map(repr, MODES))}, got {isolation!r}")
    pass_env = table.get("pass-env", [])
    trusted = table.get("trusted-projects", [])
    python = table.get("python")
    if python is not None and (not isinstance(python, str) or not python.strip()):
        raise UserConfigError(f"{path}: [verify] python must be the path of a Python interpreter, got {python!r}")
    for key, value in (("pass-env", pass_env), ("trusted-projects", trusted)):
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise UserConfigError(f"{path}: [verify] {key} must be a list of strings, got {value!r}")
    for name in pass_env:
        _check_variable_name(name, f"{path}: [verify] pass-env")
    folders = tuple(os.path.realpath(os.path.expanduser(folder)) for folder in trusted)
    return UserSettings(
        isolation=isolation, pass_env=tuple(pass_env), trusted=folders, source=path,
        python=interpreter_path(python, os.path.dirname(path)) if python else None,
    )


@dataclass(frozen=True)
class SafetySettings:
    """What a run is allowed, once the user's and the repository's settings are
    weighed: the isolation mode, the variables passed in, and notes about the
    repository's settings that were ignored (each naming the file)."""

    isolation: str
    pass_env: tuple[str, ...]
    notes: tuple[str, ...] = ()
    #: the repository's own interpreter, when it may choose one (a trusted project)
    python: str | None = None


def weigh(
    user: UserSettings, pyproject: str | None, isolation: str | None, pass_env: tuple[str, ...],
    python: str | None = None,
) -> SafetySettings:
    """The effective safety settings: the user's where they said something; the
    repository's (`isolation`, `pass_env`, `python`, read from `pyproject`) only where
    the project is trusted, or where it asks for more safety (``required``)."""
    trusted = pyproject is not None and user.trusts(pyproject)
    notes: list[str] = []
    how = (f"set it in {user_config_path()} or on the command line, or add the project to trusted-projects there")
    if user.isolation is not None:
        mode = user.isolation
    elif isolation is None or trusted or isolation == "required":
        mode = isolation or "auto"
    else:
        mode = "auto"
        if isolation != "auto":
            notes.append(f'{pyproject}: ignored isolation = "{isolation}": a repository\'s configuration cannot lower '
                         f"isolation ({how})")
    names = list(user.pass_env)
    if pass_env and trusted:
        names.extend(pass_env)
    elif pass_env:
        notes.append(f"{pyproject}: ignored pass-env = {list(pass_env)!r}: a repository's configuration cannot pass "
                     f"your environment to its runs ({how})")
    chosen = None
    if python and trusted:
        chosen = interpreter_path(python, os.path.dirname(pyproject or ""))
    elif python and user.python is None:
        notes.append(f'{pyproject}: ignored python = "{python}": a repository\'s configuration cannot choose the Python '
                     f"that runs verification (it starts outside the sandbox, which it sets up) ({how})")
    return SafetySettings(isolation=mode, pass_env=tuple(dict.fromkeys(names)), notes=tuple(notes), python=chosen)
