"""The doctor's job, in the warm worker: one sandboxed run, and a focused re-run when
the first stopped at an in-place error (anomaly mode on, in-place writes watched).

Same sandbox, limits and record channel as a verification run (`sandbox.spawn` with the
request's isolation; the record read back with ``weights_only``).
"""

from __future__ import annotations

from typing import Any

from ..bounded import note_timeouts
from ..worker import _isolation, _limits, _load, _saver

#: what an in-place error says (the focused re-run looks for where it came from)
INPLACE_ERROR = "modified by an inplace operation"


def _spec(request: dict[str, Any], focus: bool) -> dict[str, Any]:
    return {
        "kind": "script",
        "source": request["source"],
        "path": request["path"],
        "user_path": request["path"],
        "user_text": request.get("source"),
        "relative": request.get("relative"),
        "user_root": request.get("user_root"),
        "shadow_base": request.get("shadow_base"),
        "argv": request.get("argv") or [],
        "bounds": request.get("bounds"),
        "threads": request.get("threads", 1),
        "focus": focus,
    }


def _run(request: dict[str, Any], focus: bool) -> Any:
    from ..sandbox import spawn, wait_all
    from .child import run_doctor_side

    spec = _spec(request, focus)
    child = spawn(lambda: run_doctor_side(spec), _saver(), _limits(request), isolation=_isolation(request))
    (outcome,) = note_timeouts(wait_all([child], _load), request.get("bounds"))
    return outcome


def run_doctor_job(request: dict[str, Any]) -> dict[str, Any]:
    """The run's outcome and record, and the focused re-run's record when there is one."""
    import torch

    torch.set_num_threads(1)
    outcome = _run(request, focus=False)
    answer: dict[str, Any] = {"status": outcome.status, "detail": outcome.detail, "duration_s": outcome.duration_s,
                              "output": outcome.output[-4000:], "record": outcome.record, "focus": None}
    exc = (outcome.record or {}).get("exception") or {}
    if outcome.status == "ok" and INPLACE_ERROR in str(exc.get("message") or ""):
        focused = _run(request, focus=True)
        answer["focus"] = focused.record if focused.status == "ok" else None
    return answer
