"""The tool side of `doctor`: one request to the warm worker, findings from its answer.

No torch here. The request is laid out as a verification request for the script's own
driver (`api._place`: the project's shadow copy; the project's `[tool.autograd-fix.verify]`
settings: loop caps, ``argv``; the user's isolation settings, which a repository cannot
lower), so the run is the bounded run verification would make of the original.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from ..api import DEFAULT_MEMORY_MB, _place, _unisolated
from ..client import Verifier, WorkerError
from ..config import ConfigError, load_config
from ..isolation import pass_env_values
from ..redact import Redactor
from ..shadow import ShadowCopies, ShadowError
from ..trust import UserSettings
from .driving import choose
from .findings import analyse
from .outcome import Diagnosis


def _reader(root: str | None, script: str, text: str):
    """Source text of a project file named relative to `root` (the script's own text for it)."""
    def read(relative: str) -> str | None:
        if relative == script:
            return text
        if not root or os.path.isabs(relative) or relative.startswith(".."):
            return None
        try:
            with open(os.path.join(root, relative), encoding="utf-8") as handle:
                return handle.read()
        except (OSError, UnicodeDecodeError):
            return None
    return read


def diagnose(
    path: str,
    text: str,
    argv: list[str] | None = None,
    *,
    timeout: float = 60.0,
    memory_mb: int = DEFAULT_MEMORY_MB,
    device: str = "auto",
    verifier: Verifier | None = None,
    user: UserSettings | None = None,
    driver: str | None = None,
) -> Diagnosis:
    """Run the script at `path` (its text `text`, as checked) once, bounded and
    instrumented, in the sandbox; `argv` replaces the configured ``argv`` when given. A
    library file that runs nothing itself is run through its project's script that
    drives it (`driving.choose`), or through `driver` when given."""
    path = os.path.abspath(path)
    try:
        config = load_config(path, user=user)
    except ConfigError as exc:
        return Diagnosis(path, "unavailable", str(exc))
    via = ""
    with ShadowCopies() as shadows:
        try:
            place = _place(path, config, shadows)
            chosen = choose(path, text, place["user_root"], driver, argv, tuple(config.argv))
            if isinstance(chosen, str):
                return Diagnosis(place["relative"] or os.path.basename(path), "unavailable", chosen, root=place["user_root"])
            if chosen.path != path:  # the driver runs in the library file's project, as verification runs it
                root = place["user_root"] or os.path.dirname(chosen.path)
                path, text, argv, via = chosen.path, chosen.text, chosen.argv, chosen.why
                place = {"relative": os.path.relpath(path, root), "user_root": root,
                         "shadow_base": shadows.for_file(root, path).base}
        except ShadowError as exc:
            return Diagnosis(path, "unavailable", str(exc))
        script = place["relative"] or os.path.basename(path)
        request: dict[str, Any] = {
            "op": "doctor",
            "path": path,
            **place,
            "source": text,
            "argv": list(argv) if argv is not None else list(config.argv),
            "bounds": {"cap": config.loop_cap, "outer_cap": config.outer_loop_cap, "forward_cap": config.forward_loop_cap},
            "device": device,
            "timeout": float(timeout),
            "memory_mb": int(memory_mb),
            "threads": 1,
            "isolation": config.isolation,
            "pass_env": pass_env_values(config.pass_env, dict(os.environ)),
        }
        own = verifier is None
        try:
            worker = verifier or Verifier()
        except WorkerError as exc:
            return Diagnosis(script, "unavailable", f"verification worker unavailable: {exc}")
        try:
            refused = _unisolated(worker, [request])[0]
            if refused is not None:
                return Diagnosis(script, "unavailable", refused, isolated=False)
            isolated = worker.isolation_unavailable is None and config.isolation != "off"
            try:
                (answer,) = worker.run_many([request], deadline_s=3 * timeout + 60)
            except WorkerError as exc:
                return Diagnosis(script, "unavailable", str(exc), isolated=isolated)
        finally:
            if own:
                worker.close()
    return replace(_diagnosis(answer, script, text, place["user_root"], isolated), via=via, root=place["user_root"])


def _diagnosis(answer: dict[str, Any], script: str, text: str, root: str | None, isolated: bool) -> Diagnosis:
    hide = Redactor.from_environment()  # what the run printed or raised may hold the user's secrets
    if not answer.get("ok"):
        return Diagnosis(script, "harness_error", hide.text(f"the doctor run failed: {answer.get('error')}"), isolated=isolated)
    result = answer["result"]
    record = result.get("record")
    if result["status"] != "ok" or record is None:
        return Diagnosis(script, result["status"], hide.text(f"the run {result['detail']}"), isolated=isolated)
    record = hide.values(record)
    findings = analyse(record, script, _reader(root, script, text), focus=result.get("focus"))
    exc = record.get("exception")
    status, detail = "finished", "the run finished"
    if exc:
        status = "crashed"
        where = f" at {exc['where']}" if exc.get("where") else ""
        detail = f"the run stopped{where}: {exc.get('type')}: {str(exc.get('message'))[:300]}"
    seen = record.get("observations") or {}
    measures = {"duration_s": result.get("duration_s"), "instrumented_s": seen.get("duration_s"),
                "backward_passes": seen.get("backward_passes"), "optimizer_steps": seen.get("optimizer_steps"),
                "series": list(seen.get("series") or ())}
    shortened = tuple((record.get("bounded") or {}).get("loops") or ())
    return Diagnosis(script, status, detail, tuple(findings), shortened, measures, isolated)
