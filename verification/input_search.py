"""The short search over candidate inputs when the original unit raises a shape error.

Why here and not in the run child: the binder already picks the first candidate the
*model* accepts, but a unit may still reject it (a ``view(-1, 400)``, a matrix product
with a parameter). Only a fresh run can tell, and the rule is that the first candidate
the ORIGINAL gets past (clean, or failing for its own reason rather than on a shape)
is the one both sides get: so the original is re-run
alone with the next candidates, each under a short time slice, and the rewritten side
then runs with the winner. Bounded: at most `MAX_TRIALS` extra runs, and no more than
half the unit's timeout spent on them.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from typing import Any, Callable, Sequence

from .protocol import Unbound, VerifyRequest
from .sandbox import Outcome
from .shapes import MAX_PLANS

#: the errors a different input shape can cure (anything else is the code's own verdict)
SHAPE_ERROR = re.compile(
    r"mat1 and mat2 shapes cannot be multiplied|size mismatch|[Ee]xpected .*input|must match the size|"
    r"shapes cannot be multiplied|is invalid for input of size|[Kk]ernel size can't be greater|"
    r"[Oo]utput size is too small|input_size|Dimension out of range|doesn't match the broadcast shape|"
    r"expected scalar type|to have one of the following scalar types|number of dimensions|"
    r"not enough values to unpack|[Ee]xpected .*(dimension|dims|channels|sizes?)\b"
)
MAX_TRIALS = MAX_PLANS - 1
TRIAL_SLICE_S = 5.0

#: runs the given sides ("original", "rewritten") of `unit` (one child each) under `request`'s limits
RunSides = Callable[[VerifyRequest, dict[str, Any], Sequence[str]], list[Outcome]]


def _fits(outcome: Outcome) -> bool:
    """The run got past the shapes: clean, or ended on an error of the code's own."""
    record = outcome.record
    return outcome.status == "ok" and record is not None and not record.unbound and not shape_error(outcome)


def _settles(outcome: Outcome) -> bool:
    """A candidate to stop at: a clean run, or one that ends on autograd's error (an
    in-place op it needed: the very bug a fix repairs, the best evidence there is). Any
    other error of the code's own is kept only if no later candidate does better."""
    exception = outcome.record.exception if outcome.record is not None else None
    return _fits(outcome) and (not exception or exception.autograd)


def _plan(outcome: Outcome) -> dict[str, Any] | None:
    plan = outcome.record.input_plan if outcome.record is not None else None
    return plan if isinstance(plan, dict) else None


def shape_error(outcome: Outcome) -> bool:
    """Did this run end on an error a different input shape could cure?"""
    exception = outcome.record.exception if outcome.record is not None else None
    return exception is not None and bool(SHAPE_ERROR.search(exception.message))


def run_searching_inputs(
    request: VerifyRequest, unit: dict[str, Any], sources: tuple[str, str], run_sides: RunSides,
) -> tuple[Outcome, Outcome]:
    """Both sides' outcomes, with the input plan the original gets past (see `_fits`) when the
    first one does not (and the same plan on the rewritten side in every case)."""
    original, rewritten = run_sides(request, unit, sources)
    plan = _plan(original)
    if plan is None:
        return original, rewritten
    first = chosen = int(plan["index"])
    tried = 1
    if shape_error(original) and int(plan["count"]) > chosen + 1:
        timeout = float(request.timeout)
        trial_request = replace(request, timeout=min(TRIAL_SLICE_S, timeout))
        budget = time.monotonic() + timeout / 2
        fallback: tuple[Outcome, int] | None = None  # the first past the shapes
        for index in range(chosen + 1, min(int(plan["count"]), chosen + 1 + MAX_TRIALS)):
            if time.monotonic() > budget:
                break
            (trial,) = run_sides(trial_request, {**unit, "input_plan": index}, (sources[0],))
            tried += 1
            if _settles(trial):
                original, chosen = trial, index
                break
            if fallback is None and _fits(trial):
                fallback = (trial, index)
        if chosen == first and fallback is not None:
            original, chosen = fallback
    rewritten_plan = _plan(rewritten)
    if chosen != first or (rewritten_plan is not None and int(rewritten_plan["index"]) != chosen):
        (rewritten,) = run_sides(request, {**unit, "input_plan": chosen}, (sources[1],))
    if shape_error(original) and shape_error(rewritten):
        _mark_unfit(original, rewritten, plan, tried)
    return original, rewritten


def _mark_unfit(original: Outcome, rewritten: Outcome, plan: dict[str, Any], tried: int) -> None:
    """Both sides fail on the synthesized shapes: that is the inputs' fault, not the
    patch's, so the verdict must be `unverified` (never "the original's error persists")."""
    exception = original.record.exception if original.record is not None else None
    message = ((exception.message if exception else "").strip().splitlines() or [""])[0][:200]
    why = (
        f"no synthesized input fits the code: with each of {tried} candidate(s) tried (first {plan.get('shape')}) "
        f"the original raises {exception.type if exception else None}: {message}; "
        "name a factory under [tool.autograd-fix.verify] in pyproject.toml"
    )
    for outcome in (original, rewritten):
        if outcome.record is not None:
            outcome.record = replace(outcome.record, unbound=Unbound(name="inputs", why=why))
