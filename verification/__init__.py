"""Differential execution: run the original and the rewritten code, compare, decide.

Entry points: `verify_pair`, `verify_many`, `gradcheck_file`; results are `Verdict`s of
`UnitResult`s. Check names a rule's contract may use are listed once, in
`checks.SPECS` (`CHECK_NAMES`), torch-free; `contracts.CHECKS` maps them to their
implementations (importing that module needs torch, this package's top level does not).

Verification depends on nothing in `codemods` but two libcst-free modules: the plain
types of `codemods/model.py`, and the role vocabulary of `codemods/semantic/roles.py`,
so that the binder reads a name (`val_loader`, `netG`) as the rules do.
"""

from .checks import CHECK_NAMES, CheckStatus
from .api import default_jobs, gradcheck_file, verify_many, verify_pair
from .client import Verifier, WorkerError
from .config import ConfigError, VerifyConfig, load_config
from .units import Unit, UnitError, find_units
from .verdict import ACCEPTED, EXIT_CODES, REJECTED, UNVERIFIED, UnitResult, Verdict


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
