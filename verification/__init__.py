"""Differential execution: run the original and the rewritten code, compare, decide.

Entry points: `verify_pair`, `verify_many`, `gradcheck_file`; results are `Verdict`s of
`UnitResult`s. Check names a rule's contract may use are the keys of
`autograd_fix.verification.contracts.CHECKS` (listed in `CHECK_NAMES`; importing that
module needs torch, this package's top level does not).
"""

from .api import default_jobs, gradcheck_file, verify_many, verify_pair
from .client import Verifier, WorkerError
from .config import ConfigError, VerifyConfig, load_config
from .units import Unit, UnitError, find_units
from .verdict import ACCEPTED, EXIT_CODES, REJECTED, UNVERIFIED, UnitResult, Verdict

CHECK_NAMES = (
    "outputs_equal",
    "grads_untouched",
    "retained_graph_not_higher",
    "retained_graph_lower_if_any",
    "grads_equal",
    "step_grads_match_contributions",
    "original_error_gone",
    "forward_values_equal",
    "gradients_match_finite_differences",
    "parameters_change_as_intended",
    "gradcheck_passes",
    "ctx_freed_without_gc",
    "peak_memory_not_higher",
    "accumulated_values_equal",
    "equal_or_gradients_corrected",
    "backward_agrees_with_original",
    "gradcheck_if_original_matches",
)

__all__ = [
    "ACCEPTED",
    "CHECK_NAMES",
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
