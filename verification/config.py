"""The ``[tool.autograd-fix.verify]`` table: a driver, the script's argv, input factories.

``driver`` names how the project is exercised when a changed file has no driver of its
own: a command line (``"python train.py --epochs 1"``, or ``"python -m pkg.train"``) whose
script is a project file, or a pytest node id (``"tests/test_train.py::test_step"``). Paths
in it are relative to the folder holding the ``pyproject.toml``. ``argv`` is the list of
arguments a script driver gets after its name (default none, so argparse defaults apply).

``loop-cap`` (default 3) and ``outer-loop-cap`` (default 2) bound script and driver runs
(see `bounded`): a loop whose iterations run a backward or an optimizer step stops
after that many such iterations, the second for a loop around such loops (an epoch
loop); ``loop-cap = 0`` runs the program in full. ``forward-loop-cap`` caps loops that
only run a model's forward (an evaluation, sampling): unset, those the patch did not
change keep 3 iterations and those it changed run in full; a number applies to all of
them (0: all in full). ``stop-after-change`` (default 2) ends a bounded run, on both
sides at the same point, once the changed code has run and that many backwards
followed it (0: never; see `bounded.Bounds.stop`).

``isolation`` (``"auto"``, the default, ``"required"`` or ``"off"``) says how runs are
confined (see `isolation`): ``auto`` isolates where the OS allows and says so on every
verdict when it cannot, ``required`` refuses to run where it cannot, ``off`` runs as the
tool's own process would (no namespaces, the tool's environment). ``pass-env`` lists
environment variables a run keeps besides the allowlist (``pass-env = ["WANDB_MODE"]``).
``python`` names the Python that runs verification (see `interpreter`), a path relative
to this file's folder. A repository's ``isolation``, ``pass-env`` and ``python`` count
only in a project the user trusts (see `trust`); the values here are the weighed ones,
and `notes` say what was ignored.
A ``pyproject.toml`` owned by another user is skipped, as if it were not there.

Input factories serve function-mode verification.

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
from dataclasses import dataclass, field
from pathlib import Path

from autograd_fix.config_files import ConfigChoice, ConfigFileError, candidate_files, load_settings

from .trust import MODES, UserConfigError, UserSettings, load_user_settings, readable_config, weigh

#: keys of the table that are settings, not input factories
SETTINGS = frozenset(
    {"driver", "argv", "isolation", "pass-env", "python", "loop-cap", "outer-loop-cap", "forward-loop-cap",
     "stop-after-change"}
)
#: defaults of the caps of bounded runs (see `bounded`)
DEFAULT_LOOP_CAP = 3
DEFAULT_OUTER_LOOP_CAP = 2
#: backwards a bounded run keeps once the changed code has run (`bounded.DEFAULT_STOP_AFTER`)
DEFAULT_STOP_AFTER_CHANGE = 2


@dataclass(frozen=True)
class VerifyConfig:
    """Factories (name -> ``module:callable``), the folder their modules live under (the
    pyproject's), a user-named driver and the script's argv."""

    factories: dict[str, str] = field(default_factory=dict)
    root: str | None = None
    driver: str | None = None
    argv: tuple[str, ...] = ()
    isolation: str = "auto"
    pass_env: tuple[str, ...] = ()
    #: bounded runs: working iterations a loop that trains keeps per entry (0: no cap),
    #: and a loop around such loops (an epoch loop)
    loop_cap: int = DEFAULT_LOOP_CAP
    outer_loop_cap: int = DEFAULT_OUTER_LOOP_CAP
    #: iterations a loop that only runs forwards (an evaluation) keeps (0: runs in full;
    #: None: 3 for loops the patch did not change, the others in full)
    forward_loop_cap: int | None = None
    #: backwards a bounded run keeps once the changed code has run (0: it is not stopped)
    stop_after_change: int = DEFAULT_STOP_AFTER_CHANGE
    #: what was not taken from the repository, and why (each names the file)
    notes: tuple[str, ...] = ()
    #: the project's own choice of interpreter (only a trusted project's counts)
    python: str | None = None

    def to_json(self) -> dict:
        return {"factories": dict(self.factories), "root": self.root, "driver": self.driver, "argv": list(self.argv),
                "isolation": self.isolation, "pass_env": list(self.pass_env),
                "loop_cap": self.loop_cap, "outer_loop_cap": self.outer_loop_cap,
                "forward_loop_cap": self.forward_loop_cap, "stop_after_change": self.stop_after_change}


class ConfigError(ValueError):
    """The ``[tool.autograd-fix.verify]`` table is malformed."""


def _plain_pyproject(start: str, user: UserSettings) -> str | None:
    """The nearest readable ``pyproject.toml`` without settings: its folder is still the
    project's root (where factories would be imported from)."""
    for candidate in candidate_files(Path(start)):
        if candidate.name == "pyproject.toml" and readable_config(str(candidate), user):
            return str(candidate)
    return None


def load_config(
    path: str | None = None, *, config_dir: str | None = None, user: UserSettings | None = None,
    choice: ConfigChoice | None = None,
) -> VerifyConfig:
    """Read the verify table for the file at `path` (or the folder `config_dir`) through
    the one loader (`config_files.load_settings`, with the command line's `choice` of
    file, overrides or isolation), with the safety settings weighed against the `user`'s
    own (their configuration file when None is given)."""
    if user is None:
        try:
            user = load_user_settings()
        except UserConfigError as exc:
            raise ConfigError(str(exc)) from exc
    start = config_dir or (path if path and not path.startswith("<") else os.getcwd())
    try:
        settings = load_settings(Path(start), user, choice)
    except ConfigFileError as exc:
        raise ConfigError(str(exc)) from exc
    if settings.found is None and "verify" not in settings.table:
        safety = weigh(user, None, None, ())
        root = None if choice is not None and choice.isolated else _plain_pyproject(start, user)
        return VerifyConfig(root=os.path.dirname(root) if root else None, isolation=safety.isolation,
                            pass_env=safety.pass_env, notes=settings.notes)
    source = str(settings.source) if settings.source else "--config"
    root = str(settings.found.root) if settings.found else None
    return verify_config_from(settings.table.get("verify", {}), source, root, user, settings.notes)


def verify_config_from(table: object, source: str, root: str | None, user: UserSettings,
                       skipped: tuple[str, ...] = ()) -> VerifyConfig:
    """The `VerifyConfig` of a ``verify`` table read from `source` (a configuration file,
    whose folder `root` holds its driver and factories); the command line validates the
    same table with this, so a malformed one stops the run before any patch is made."""
    pyproject = source
    if not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: [tool.autograd-fix.verify] must be a table")
    driver = table.get("driver")
    if driver is not None and (not isinstance(driver, str) or not driver.strip()):
        raise ConfigError(f"{pyproject}: [tool.autograd-fix.verify] driver must be a command line or a pytest node id, got {driver!r}")
    argv = table.get("argv", [])
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise ConfigError(f"{pyproject}: [tool.autograd-fix.verify] argv must be a list of strings, got {argv!r}")
    isolation = table.get("isolation", "auto")
    if isolation not in MODES:
        raise ConfigError(f"{pyproject}: [tool.autograd-fix.verify] isolation must be one of {', '.join(map(repr, MODES))}, got {isolation!r}")
    pass_env = table.get("pass-env", [])
    if not isinstance(pass_env, list) or not all(isinstance(a, str) and a and "=" not in a for a in pass_env):
        raise ConfigError(f"{pyproject}: [tool.autograd-fix.verify] pass-env must be a list of variable names, got {pass_env!r}")
    python = table.get("python")
    if python is not None and (not isinstance(python, str) or not python.strip()):
        raise ConfigError(f"{pyproject}: [tool.autograd-fix.verify] python must be the path of a Python interpreter, got {python!r}")
    caps = {}
    for key, default in (("loop-cap", DEFAULT_LOOP_CAP), ("outer-loop-cap", DEFAULT_OUTER_LOOP_CAP), ("forward-loop-cap", None),
                         ("stop-after-change", DEFAULT_STOP_AFTER_CHANGE)):
        value = table.get(key, default)
        if value is None:
            caps[key] = value
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{pyproject}: [tool.autograd-fix.verify] {key} must be a whole number of iterations (0: no cap), got {value!r}")
        caps[key] = value
    factories = {}
    for name, value in table.items():
        if name in SETTINGS:
            continue
        if not isinstance(value, str) or value.count(":") != 1:
            raise ConfigError(f"{pyproject}: [tool.autograd-fix.verify] {name} must be \"module:callable\", got {value!r}")
        factories[name] = value
    safety = weigh(user, pyproject, table.get("isolation"), tuple(pass_env), python)
    return VerifyConfig(factories=factories, root=root, driver=driver, argv=tuple(argv),
                        isolation=safety.isolation, pass_env=safety.pass_env, notes=(*skipped, *safety.notes),
                        python=safety.python,
                        loop_cap=caps["loop-cap"], outer_loop_cap=caps["outer-loop-cap"],
                        forward_loop_cap=caps["forward-loop-cap"], stop_after_change=caps["stop-after-change"])
