"""Differential execution: run the original and the rewritten code, compare, decide.

Entry points: `verify_pair`, `verify_many`, `gradcheck_file`; results are `Verdict`s of
`UnitResult`s. Check names a rule's contract may use are listed once, in
`checks.SPECS` (`CHECK_NAMES`), torch-free; `contracts.CHECKS` maps them to their
implementations (importing that module needs torch, this package's top level does not).

Verification depends on nothing in `codemods` but libcst-free modules: the plain
types of `codemods/model.py`, the role vocabulary of `codemods/semantic/roles.py`, so that
the binder reads a name (`val_loader`, `netG`) as the rules do, and the class answer of
`codemods/semantic/module_bases.py` (with `answer.py` and the torch names of
`torch_api.py`), so that `units.graph_inputs` reads "is this class an nn.Module?" as the
rules do.
"""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .api import default_jobs, gradcheck_file, verify_many, verify_pair
    from .checks import CHECK_NAMES, CheckStatus
    from .client import Verifier, WorkerError
    from .config import ConfigError, VerifyConfig, load_config
    from .units import Unit, UnitError, find_units
    from .verdict import ACCEPTED, EXIT_CODES, REJECTED, UNVERIFIED, UnitResult, Verdict

#: where each public name lives: imported on first use, so that a static run (which
#: needs only `verdict`'s plain types) does not pay for the runner, client and sandbox
_HOMES = {
    "CHECK_NAMES": "checks", "CheckStatus": "checks",
    "default_jobs": "api", "gradcheck_file": "api", "verify_many": "api", "verify_pair": "api",
    "Verifier": "client", "WorkerError": "client",
    "ConfigError": "config", "VerifyConfig": "config", "load_config": "config",
    "Unit": "units", "UnitError": "units", "find_units": "units",
    "ACCEPTED": "verdict", "EXIT_CODES": "verdict", "REJECTED": "verdict", "UNVERIFIED": "verdict",
    "UnitResult": "verdict", "Verdict": "verdict",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{home}", __name__), name)


__all__ = [
    "ACCEPTED",
    "CHECK_NAMES",
    "CheckStatus",
    "ConfigError",
    "EXIT_CODES",
    "REJECTED",
    "UNVERIFIED",
    "Unit",
    "UnitError",
    "UnitResult",
    "Verdict",
    "Verifier",
    "VerifyConfig",
    "WorkerError",
    "default_jobs",
    "find_units",
    "gradcheck_file",
    "load_config",
    "verify_many",
    "verify_pair",
]
