"""The registry of contract checks: one entry per check, the only place a check is named.

Each `CheckSpec` says what a rule's contract may ask for (its name), what the run must
record for it (its `Probe`s: the harness turns on exactly those), and where its
implementation lives (``contracts.check_<name>``, resolved by `contracts.CHECKS`, which
a test holds to this list). Torch-free, so the cli and the rules can validate contract
names without importing torch.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterable


class CheckStatus(str, enum.Enum):
    """What one check concluded. `NA` (the check does not apply) is never a pass.

    A string whose `str()` and `format()` are its value, as 3.11's `enum.StrEnum`; spelt
    out because the worker also runs on 3.10 under a project's own Python, where it
    imports nothing of autograd-fix but `verification` and `codemods`."""

    __str__ = str.__str__
    __format__ = str.__format__

    PASS = "pass"
    FAIL = "fail"
    NA = "n/a"
    UNKNOWN = "unverified"


class Probe(enum.Enum):
    """What a run records beyond the always-on measures, for the checks that need it."""

    #: parameter values before the run, to see which ones an update moved
    INITIAL_PARAMETERS = "initial parameters"
    #: custom Function contexts and what they keep alive
    SAVED_CONTEXTS = "saved contexts"
    #: hand-written parameter updates (``w -= lr * w.grad``) as steps
    MANUAL_UPDATES = "manual updates"
    #: synthesized tensor inputs that require grad, so input gradients exist
    GRAD_INPUTS = "inputs that require grad"
    #: the float64 re-runs of the directional finite-difference check
    FINITE_DIFFERENCES = "finite differences"
    #: a re-run up to the first backward with parameters, inputs and seeds moved, so a
    #: term that is zero at the run's own point cannot hide (`directional.second_point`)
    SECOND_POINT = "second point"
    #: bounded runs close every accumulation window: a capped loop runs on while gradients
    #: that backward added wait for an optimizer step (`bounded.WINDOW_CAP` at most)
    WHOLE_WINDOWS = "whole accumulation windows"
    #: the original script re-run with every floating tensor float64 (`reference`)
    FLOAT64_REFERENCE = "float64 reference run"


@dataclass(frozen=True)
class CheckSpec:
    name: str
    probes: frozenset[Probe] = frozenset()


def _spec(name: str, *probes: Probe) -> CheckSpec:
    return CheckSpec(name, frozenset(probes))


SPECS: tuple[CheckSpec, ...] = (
    _spec("outputs_equal", Probe.SECOND_POINT),
    _spec("grads_untouched"),
    _spec("graph_state_may_change"),
    _spec("retained_graph_not_higher"),
    _spec("retained_graph_lower_if_any"),
    _spec("grads_equal"),
    _spec("step_grads_match_contributions", Probe.MANUAL_UPDATES),
    _spec("original_error_gone", Probe.GRAD_INPUTS),
    _spec("forward_values_equal", Probe.GRAD_INPUTS, Probe.SECOND_POINT),
    _spec("gradients_match_finite_differences", Probe.GRAD_INPUTS, Probe.FINITE_DIFFERENCES),
    _spec("parameters_change_as_intended", Probe.INITIAL_PARAMETERS),
    _spec("gradcheck_passes"),
    _spec("ctx_freed_without_gc", Probe.SAVED_CONTEXTS),
    _spec("peak_memory_not_higher"),
    _spec("accumulated_values_equal", Probe.SECOND_POINT),
    _spec("equal_or_gradients_corrected", Probe.GRAD_INPUTS, Probe.FINITE_DIFFERENCES, Probe.SECOND_POINT),
    _spec("backward_agrees_with_original"),
    _spec("gradcheck_if_original_matches"),
    _spec("accumulated_grads_are_window_mean", Probe.WHOLE_WINDOWS),
    _spec("time_per_step_reported"),
    _spec("requires_grad_flag_takes_effect", Probe.INITIAL_PARAMETERS, Probe.FINITE_DIFFERENCES),
    _spec("closer_to_float64_reference", Probe.FLOAT64_REFERENCE),
)

CHECK_NAMES: tuple[str, ...] = tuple(spec.name for spec in SPECS)
#: checks a bounded run decides once the changed function has returned, provided the call
#: ran no backward or optimizer step and left no graph alive (`bounded.Bounds.stop_at_return`):
#: its outputs (the value returned, the globals, the random states, training modes), the
#: gradients it left, and the graph memory it recorded. A contract made only of these lets
#: the run end there instead of training on (an evaluation given ``no_grad``, AGF001)
DECIDED_AT_RETURN: frozenset[str] = frozenset({
    "outputs_equal", "grads_untouched", "graph_state_may_change", "retained_graph_not_higher",
    "retained_graph_lower_if_any", "peak_memory_not_higher",
})


def decided_at_return(names: Iterable[str] | None) -> bool:
    """A contract (its check names; none: the generic one, which compares gradients of
    later training) that a run ending at the changed function's return can decide."""
    wanted = set(names or ())
    return bool(wanted) and wanted <= DECIDED_AT_RETURN
#: the contract of a patch whose rule names no checks: equivalence
GENERIC: tuple[str, ...] = ("outputs_equal", "grads_equal", "retained_graph_not_higher")


def probes_for(names: Iterable[str]) -> frozenset[Probe]:
    """The probes a run needs for the checks `names` (unknown names need none; none at
    all: the generic contract's)."""
    wanted = set(names) or set(GENERIC)
    return frozenset(probe for spec in SPECS if spec.name in wanted for probe in spec.probes)
