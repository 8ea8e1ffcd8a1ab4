"""Public entry points: verify one patch, many patches in parallel, or gradcheck a file.

The cli calls these; without an explicit `verifier` each call starts (and closes) its
own warm worker, so a caller verifying many patches should either pass them all to
`verify_many` or hold one `Verifier` open and pass it in (and, for one shadow copy of
each project per run instead of one per call, one `ShadowCopies`).

Paths are made absolute here, whatever the user typed: the worker and its run children
never depend on the tool's working directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Callable, Hashable

from .client import Verifier, WorkerError
from autograd_fix.config_files import ConfigChoice

from .config import ConfigError, VerifyConfig, load_config
from .place import user_file_text
from .protocol import Bounds, GradcheckRequest, VerifyRequest
from .drivers import DriverError, parse_command
from .interpreter import unavailable_reason
from .isolation import pass_env_values, refusal
from .shadow import ShadowCopies, ShadowError, project_root
from .redact import Redactor
from .source_memo import SourceMemo
from .trust import UserSettings
from .call_sites import with_call_sites
from .found_drivers import find_drivers
from .units import Unit, UnitError, _Module, drive_units, find_units
from .verdict import ACCEPTED, UNVERIFIED, UnitResult, Verdict, combine

DEFAULT_MEMORY_MB = 4096


def default_jobs() -> int:
    """Two runs per patch go in parallel already: half the CPUs, at least one."""
    return max(1, (os.cpu_count() or 2) // 2)


def _is_within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _place(path: str, config: VerifyConfig, shadows: ShadowCopies) -> dict[str, Any]:
    """Where the file's runs happen: its project root, its path there, the base copy.

    A path that names no file on disk (a string being verified) runs alone in an
    empty folder."""
    if path.startswith("<") or not os.path.isfile(path):
        return {"relative": os.path.basename(path) if not path.startswith("<") else None, "user_root": None, "shadow_base": None}
    root = project_root(path)
    if config.driver and config.root and _is_within(root, config.root):
        root = config.root  # the configured driver lives under the pyproject's folder
    shadow = shadows.for_file(root, path)
    return {"relative": os.path.relpath(path, root), "user_root": root, "shadow_base": shadow.base}


def _unit_json(unit: Unit, root: str | None, config: VerifyConfig) -> dict[str, Any]:
    data = unit.to_json()
    if unit.command is not None:
        data["command"] = unit.command.to_json(root or config.root or os.getcwd(), config.root or root or os.getcwd())
    data["fallbacks"] = [_unit_json(f, root, config) for f in unit.fallbacks]
    return data


def _known_failures(unit: dict[str, Any], path: str, shadows: ShadowCopies) -> dict[str, Any]:
    """Mark drivers an earlier patch of this file found unable to run here."""
    known = shadows.driver_failures.get((path, unit.get("driver") or ""))
    if known is not None:
        unit["known_failure"] = known
    unit["fallbacks"] = [_known_failures(f, path, shadows) for f in unit.get("fallbacks") or ()]
    return unit


@dataclass(frozen=True)
class _Pending:
    """A request on its way to the worker, and what the tool keeps for its verdict."""

    request: VerifyRequest
    #: what was not taken from the project's configuration: said with the verdict
    notes: tuple[str, ...] = ()


def _request(
    pair: dict[str, Any], defaults: dict[str, Any], shadows: ShadowCopies, memo: SourceMemo | None = None
) -> tuple[_Pending | None, Verdict | None]:
    """A worker request for one pair, or the verdict when nothing needs to run."""
    merged = {**defaults, **{k: v for k, v in pair.items() if v is not None}}
    path = merged.get("path") or "<string>"
    if not path.startswith("<"):
        path = os.path.abspath(path)
    rule = merged.get("rule")
    try:
        config = load_config(path if path != "<string>" else None, config_dir=merged.get("config_dir"), user=merged.get("user"),
                             choice=merged.get("config"))
        command = parse_command(config.driver) if config.driver else None
    except (ConfigError, DriverError) as exc:
        return None, Verdict(UNVERIFIED, f"{exc} (see `driver` in [tool.autograd-fix.verify])" if isinstance(exc, DriverError) else str(exc), rule, ())
    notes = config.notes
    try:
        units = find_units(
            merged["original"], merged["rewritten"], path=path, entry=merged.get("entry"), driver=command, memo=memo
        )
    except UnitError as exc:
        return None, Verdict(UNVERIFIED, str(exc), rule, (), notes=notes)
    if not units:
        return None, Verdict(ACCEPTED, "no code change (the two versions' syntax trees are equal)", rule, (), notes=notes)
    try:
        place = _place(path, config, shadows)
    except ShadowError as exc:
        return None, Verdict(UNVERIFIED, str(exc), rule, (), notes=notes)
    if command is None and merged.get("entry") is None and place["user_root"]:
        # a library file: the project's own scripts, entry points and tests that reach it
        changed = [u.qualname for u in units if u.kind in ("function", "method") and u.caller_of is None and u.qualname]
        if changed:
            units = drive_units(units, find_drivers(place["user_root"], path, changed, argv=config.argv))
            # the functions alone (or as the last fallback): inputs from the project's own calls
            units = with_call_sites(units, place["user_root"], path)
    checks = merged.get("checks")
    request = VerifyRequest(
        path=path,
        relative=place["relative"],
        user_root=place["user_root"],
        shadow_base=place["shadow_base"],
        argv=tuple(config.argv),
        bounds=Bounds(cap=config.loop_cap, outer_cap=config.outer_loop_cap, forward_cap=config.forward_loop_cap,
                      stop_after=config.stop_after_change),
        rule=rule,
        checks=tuple(checks) if checks else None,
        units=tuple(_known_failures(_unit_json(unit, place["user_root"], config), path, shadows) for unit in units),
        device=merged.get("device", "auto"),
        timeout=float(merged.get("timeout", 20.0)),
        memory_mb=int(merged.get("memory_mb", DEFAULT_MEMORY_MB)),
        factories=dict(config.factories),
        factory_root=config.root,
        roles=merged.get("roles"),
        threads=int(merged.get("threads", 1)),
        user_text=merged.get("user_text") if merged.get("user_text") is not None else user_file_text(path),
        ipython_lines=dict(merged.get("ipython_lines") or {}),
        isolation=config.isolation,
        pass_env=pass_env_values(config.pass_env, dict(os.environ)),
    )
    return _Pending(request, tuple(notes)), None


def _isolation_gap(worker: Verifier, pending: _Pending) -> str | None:
    """Why this request's runs will not be isolated (None: they will be)."""
    mode = pending.request.isolation
    if mode == "off":
        return 'isolation = "off"'
    if mode == "auto" and worker.isolation_unavailable is not None:
        return worker.isolation_unavailable
    return None


def _unisolated(worker: Verifier, requests: list[_Pending]) -> list[str | None]:
    """Per request: the refusal when it requires isolation this machine lacks, else None
    (and the worker notes an ``auto`` request that will run unisolated)."""
    reason = worker.isolation_unavailable
    if reason is None:
        return [None for _ in requests]
    refusals: list[str | None] = []
    for pending in requests:
        mode = pending.request.isolation
        if mode == "auto":
            worker.ran_unisolated()
        refusals.append(refusal(reason) if mode == "required" else None)
    return refusals


def _verdict(answer: dict[str, Any], rule: str | None, worker: Verifier, pending: _Pending) -> Verdict:
    """The verdict of a request that went to the worker, marked with what its runs
    were not confined by and the notes of its configuration. An answer that is no
    answer (a refused request: another protocol version) is unverified, with why."""
    extra = {"isolation_gap": _isolation_gap(worker, pending), "notes": pending.notes}
    hide = Redactor.from_environment()  # what the runs printed may hold the user's secrets
    if not answer.get("ok"):
        return Verdict(UNVERIFIED, hide.text(f"verification failed: {answer.get('error')}"), rule, (), **extra)
    units = [UnitResult(**hide.values(unit)) for unit in answer["result"]["units"]]  # type: ignore[arg-type]
    return replace(combine(units, rule), **extra)


def verify_many(
    pairs: list[dict[str, Any]],
    *,
    jobs: int | None = None,
    device: str = "auto",
    timeout: float = 20.0,
    memory_mb: int = DEFAULT_MEMORY_MB,
    config_dir: str | None = None,
    verifier: Verifier | None = None,
    shadows: ShadowCopies | None = None,
    memo: SourceMemo | None = None,
    user: UserSettings | None = None,
    config: ConfigChoice | None = None,
) -> list[Verdict]:
    """Verify independent patches, up to `jobs` at a time, on one warm worker.

    Each pair is a dict with ``original`` and ``rewritten`` sources and optionally
    ``path``, ``rule``, ``entry``, ``checks``, ``roles`` (the project's
    `Vocabulary.additions()`), ``device``, ``timeout``, ``config_dir``
    (per-pair values win over the keyword defaults), and ``user_text``: the text the
    user sees as `path` (an editor buffer, stdin), when it is not the file on disk;
    reasons give line numbers in it. Verdicts come back in order.
    Each file's project is copied once per `shadows` (once per call without one).
    A run that calls this repeatedly passes one `memo`, so each patch is analysed for what
    it changed rather than for the size of its file. `user` holds the user's own safety
    settings (flags on top of their configuration file; None: the file alone). `config`
    is the command line's choice of configuration (``--config``, ``--isolated``), read by
    the same loader as the checks (`config_files.load_settings`).
    """
    if shadows is None:
        with ShadowCopies() as own_shadows:
            return verify_many(pairs, jobs=jobs, device=device, timeout=timeout, memory_mb=memory_mb,
                               config_dir=config_dir, verifier=verifier, shadows=own_shadows, memo=memo, user=user,
                               config=config)
    defaults = {"device": device, "timeout": timeout, "memory_mb": memory_mb, "config_dir": config_dir, "user": user,
                "config": config}
    verdicts: list[Verdict | None] = []
    requests: list[_Pending] = []
    slots: list[int] = []
    for pair in pairs:
        request, verdict = _request(pair, defaults, shadows, memo)
        verdicts.append(verdict)
        if request is not None:
            slots.append(len(verdicts) - 1)
            requests.append(request)
    if requests:
        own = verifier is None
        try:
            worker = verifier or Verifier()
        except WorkerError as exc:
            for slot in slots:
                verdicts[slot] = Verdict(UNVERIFIED, unavailable_reason(exc), pairs[slot].get("rule"), ())
            return [v for v in verdicts if v is not None]
        refusals = _unisolated(worker, requests)
        runnable = [pending.request.to_json() for pending, refused in zip(requests, refusals) if refused is None]
        try:
            answers = iter(worker.run_many(runnable, jobs=jobs or default_jobs()) if runnable else [])
        except WorkerError as exc:
            answers = iter([{"ok": False, "error": str(exc)} for _ in runnable])
        finally:
            if own:
                worker.close()
        for slot, request, refused in zip(slots, requests, refusals):
            if refused is not None:
                verdicts[slot] = Verdict(UNVERIFIED, refused, pairs[slot].get("rule"), (), notes=request.notes)
                continue
            answer = next(answers)
            verdicts[slot] = _verdict(answer, pairs[slot].get("rule"), worker, request)
            _remember_failures(shadows, request, answer)
    return [v for v in verdicts if v is not None]


def verify_stream(
    next_pair: Callable[[], tuple[Hashable, dict[str, Any]] | None],
    on_verdict: Callable[[Hashable, Verdict], None],
    *,
    verifier: Verifier,
    shadows: ShadowCopies,
    jobs: int | None = None,
    device: str = "auto",
    timeout: float = 20.0,
    memory_mb: int = DEFAULT_MEMORY_MB,
    config_dir: str | None = None,
    memo: SourceMemo | None = None,
    user: UserSettings | None = None,
    config: ConfigChoice | None = None,
) -> None:
    """Verify patches as they come: `next_pair()` gives `(key, pair)` (None: nothing
    more for now), `on_verdict(key, verdict)` is called as soon as that patch is judged,
    and may make `next_pair` give more (a file's next patch, composed on the ones that
    went in). Up to `jobs` run at once; no patch waits for a batch of others, so a caller
    can act on each file as soon as its last verdict is in. A worker that dies leaves
    every patch still in flight, and every later one, unverified."""
    defaults = {"device": device, "timeout": timeout, "memory_mb": memory_mb, "config_dir": config_dir, "user": user,
                "config": config}
    waiting: dict[int, tuple[Hashable, dict[str, Any], _Pending]] = {}
    tags = iter(range(1 << 62))
    broken: list[str] = []

    def feed() -> dict[str, Any] | None:
        while not broken:
            item = next_pair()
            if item is None:
                return None
            key, pair = item
            pending, verdict = _request(pair, defaults, shadows, memo)
            refused = _unisolated(verifier, [pending])[0] if pending is not None else None
            if refused is not None and pending is not None:
                verdict, pending = Verdict(UNVERIFIED, refused, pair.get("rule"), (), notes=pending.notes), None
            if pending is None:
                on_verdict(key, verdict or Verdict(UNVERIFIED, "nothing to run", pair.get("rule"), ()))
                continue
            tag = next(tags)
            waiting[tag] = (key, pair, pending)
            return {**pending.request.to_json(), "tag": tag}
        return None

    def answer(request: dict[str, Any], message: dict[str, Any]) -> None:
        key, pair, pending = waiting.pop(request["tag"])
        _remember_failures(shadows, pending, message)
        on_verdict(key, _verdict(message, pair.get("rule"), verifier, pending))

    try:
        verifier.stream(feed, answer, jobs=jobs or default_jobs())
    except WorkerError as exc:
        broken.append(str(exc))
    if not broken:
        return
    while waiting:
        key, pair, _ = waiting.pop(next(iter(waiting)))  # its runs never finished: nothing to mark
        on_verdict(key, Verdict(UNVERIFIED, f"verification failed: {broken[0]}", pair.get("rule"), ()))
    while (item := next_pair()) is not None:
        key, pair = item
        on_verdict(key, Verdict(UNVERIFIED, f"verification failed: {broken[0]}", pair.get("rule"), ()))


def _remember_failures(shadows: ShadowCopies, pending: _Pending, answer: dict[str, Any]) -> None:
    """Drivers found unable to run for this file: its next patches skip them."""
    for driver, failure in ((answer.get("result") or {}).get("driver_failures") or {}).items():
        shadows.driver_failures[(pending.request.path, driver)] = failure


def verify_pair(
    original: str,
    rewritten: str,
    *,
    path: str = "<string>",
    rule: str | None = None,
    entry: str | None = None,
    device: str = "auto",
    timeout: float = 20.0,
    checks: tuple[str, ...] | None = None,
    config_dir: str | None = None,
    memory_mb: int = DEFAULT_MEMORY_MB,
    verifier: Verifier | None = None,
    shadows: ShadowCopies | None = None,
    roles: dict[str, Any] | None = None,
    user: UserSettings | None = None,
    ipython_lines: dict[str, str] | None = None,
) -> Verdict:
    """Run both versions of one file and judge the patch under `checks` (or generic);
    `roles` is the project's `Vocabulary.additions()` (its `<role>-names`), by which the
    inputs of a function unit are bound; `ipython_lines`: a notebook's masked IPython
    lines (`VerifyRequest.ipython_lines`)."""
    pair = {
        "original": original, "rewritten": rewritten, "path": path, "rule": rule, "entry": entry, "checks": checks,
        "roles": roles, "ipython_lines": ipython_lines,
    }
    return verify_many(
        [pair], jobs=1, device=device, timeout=timeout, memory_mb=memory_mb, config_dir=config_dir, verifier=verifier,
        shadows=shadows, user=user,
    )[0]


def gradcheck_file(source: str, *, path: str, timeout: float = 20.0, verifier: Verifier | None = None) -> list[dict]:
    """gradcheck every custom ``torch.autograd.Function`` in `source`, float64 inputs.

    One dict per Function: ``{"name", "passed": bool | None, "error", "inputs"}``
    (``passed`` is None when no inputs could be synthesized). A module that cannot be
    loaded yields a single entry named ``<module>`` with the error.
    """
    try:
        # imports and definitions only: a script's top-level code must not run here
        source = _Module(source, path).reduced(set())
    except UnitError as exc:
        return [{"name": "<module>", "passed": None, "error": str(exc), "inputs": None}]
    request = GradcheckRequest(source=source, path=path, timeout=timeout, memory_mb=DEFAULT_MEMORY_MB).to_json()
    own = verifier is None
    try:
        worker = verifier or Verifier()
    except WorkerError as exc:
        return [{"name": "<module>", "passed": None, "error": unavailable_reason(exc), "inputs": None}]
    if worker.isolation_unavailable is not None:
        worker.ran_unisolated()
    try:
        (answer,) = worker.run_many([request])
    finally:
        if own:
            worker.close()
    if not answer.get("ok"):
        return [{"name": "<module>", "passed": None, "error": answer.get("error"), "inputs": None}]
    result = answer["result"]
    if result.get("error"):
        return [{"name": "<module>", "passed": None, "error": result["error"], "inputs": None}]
    return list(result["functions"])
