"""The typed protocol between the tool and its verification worker, and inside the worker.

Three records cross a process boundary during verification:

* `VerifyRequest` (and `GradcheckRequest`): the tool -> the worker, one JSON line each,
  built by `api` and read back by `worker.main`;
* `SideSpec`: the job -> one forked run child, what `harness.run_side` runs (one side
  of one unit);
* the run record: the run child -> the job, a ``torch.save`` file read back with
  ``weights_only`` (`sandbox`), whose top level `check_record` validates.

Each is versioned by `PROTOCOL_VERSION`. A worker and a tool of different versions
cannot happen in a normal installation (the worker is this installation's code, even
under the project's interpreter, see `client.worker_library`), but a stale library
folder or a hand-made client could: then the answer is a clear error naming both
versions, which the tool turns into an ``unverified`` verdict, never a traceback or a
silently misread field. `from_json` rejects a message without a version, of another
version, with an unknown field (a typo, or a field a newer tool added) or without one
of its fields, each with a message naming the record and the field.

Statuses are enums (`Op`, `RunStatus`, both string enums), so JSON and comparisons
with plain strings keep working.

Torch-free and small: the worker imports this before torch, and the tool's static
paths may import it without loading anything heavy.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

#: the version of every record below; bump it whenever a field is added, removed or
#: changes meaning
PROTOCOL_VERSION = 2
#: the key that carries it in every message and record
VERSION_KEY = "protocol"
#: message keys that belong to the channel, not to the request (`client.Verifier`)
ENVELOPE_KEYS = frozenset({"id", "tag"})


class ProtocolError(ValueError):
    """A message or record that does not fit this version of the protocol."""


class _TextEnum(str, enum.Enum):
    """A string whose `str()` and `format()` are its value, as 3.11's `enum.StrEnum`
    (spelt out: the worker also runs on 3.10 under a project's own Python)."""

    __str__ = str.__str__
    __format__ = str.__format__


class Op(_TextEnum):
    """What a request asks the worker to do."""

    VERIFY = "verify"
    GRADCHECK = "gradcheck"
    DOCTOR = "doctor"
    PING = "ping"


class RunStatus(_TextEnum):
    """How one run child ended (`sandbox.Outcome.status`)."""

    OK = "ok"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    CRASHED = "crashed"
    EXITED = "exited"
    HARNESS_ERROR = "harness_error"


def check_version(data: Mapping[str, Any], what: str) -> None:
    """Raise `ProtocolError` unless `data` carries this `PROTOCOL_VERSION`."""
    version = data.get(VERSION_KEY)
    if version is None:
        raise ProtocolError(f"{what}: no protocol version (this worker speaks version {PROTOCOL_VERSION}); "
                            "the tool and the worker come from different autograd-fix installations")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f"{what}: protocol version {version!r}, this side speaks {PROTOCOL_VERSION}; "
                            "the tool and the worker come from different autograd-fix versions (reinstall autograd-fix)")


def _plain(value: Any) -> Any:
    """A field's value as plain JSON: enums as their values, records as their JSON,
    tuples as lists."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, _Record):
        return value.to_json(versioned=False)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _typed(hint: Any, value: Any, where: str) -> Any:
    """`value` (plain JSON) as the field's declared type: a record, an enum, a tuple."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [h for h in typing.get_args(hint) if h is not type(None)]
        return _typed(options[0], value, where) if len(options) == 1 else value
    if isinstance(hint, type) and issubclass(hint, _Record):
        if not isinstance(value, dict):
            raise ProtocolError(f"{where}: expected a {hint.__name__} object, got {type(value).__name__}")
        return hint.from_json(value, versioned=False, where=where)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            raise ProtocolError(f"{where}: {value!r} is not one of {', '.join(repr(m.value) for m in hint)}") from None
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ProtocolError(f"{where}: expected a list, got {type(value).__name__}")
        return tuple(value)
    return value


class _Record:
    """Explicit conversion to and from plain JSON for the frozen dataclasses below."""

    #: the record's name in error messages
    WHAT: ClassVar[str] = "record"

    def to_json(self, *, versioned: bool = True) -> dict[str, Any]:
        data = {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return {VERSION_KEY: PROTOCOL_VERSION, **data} if versioned else data

    @classmethod
    def from_json(cls, data: Any, *, versioned: bool = True, where: str | None = None) -> Any:
        """The record `data` holds: every field present, none unknown, the version
        this side speaks (`ProtocolError` otherwise, naming what is wrong)."""
        what = where or cls.WHAT
        if not isinstance(data, Mapping):
            raise ProtocolError(f"{what}: expected an object, got {type(data).__name__}")
        if versioned:
            check_version(data, what)
        hints = typing.get_type_hints(cls)
        names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        given = set(data) - {VERSION_KEY} if versioned else set(data)
        unknown = sorted(given - set(names))
        if unknown:
            raise ProtocolError(f"{what}: unknown field(s) {', '.join(unknown)} (protocol version {PROTOCOL_VERSION})")
        missing = [name for name in names if name not in data]
        if missing:
            raise ProtocolError(f"{what}: missing field(s) {', '.join(missing)} (protocol version {PROTOCOL_VERSION})")
        return cls(**{name: _typed(hints[name], data[name], f"{what}.{name}") for name in names})


@dataclass(frozen=True)
class Bounds(_Record):
    """The caps of bounded runs (`bounded`, `[tool.autograd-fix.verify]`): iterations a
    training loop keeps (0: no cap), an outer loop around such loops, evaluation
    loops (None: 3 for loops the patch did not change, the others in full), and the
    backwards kept once the changed code has run (0: no stop)."""

    WHAT: ClassVar[str] = "bounds"

    cap: int = 0
    outer_cap: int = 0
    forward_cap: int | None = None
    #: backwards a run keeps once the changed code has run (0: no stop; `bounded.Bounds.stop`)
    stop_after: int = 0

    def settings(self) -> dict[str, Any]:
        """The mapping `bounded` reads (``cap``, ``outer_cap``, ``forward_cap``, ``stop_after``)."""
        return {"cap": self.cap, "outer_cap": self.outer_cap, "forward_cap": self.forward_cap, "stop_after": self.stop_after}


@dataclass(frozen=True)
class VerifyRequest(_Record):
    """One patch to verify: where its file lives, what to run (the `units.Unit` JSON of
    each changed unit, with its fallbacks), under which contract and limits."""

    WHAT: ClassVar[str] = "verify request"

    path: str = "<string>"
    relative: str | None = None
    user_root: str | None = None
    shadow_base: str | None = None
    argv: tuple[str, ...] = ()
    bounds: Bounds = field(default_factory=Bounds)
    rule: str | None = None
    checks: tuple[str, ...] | None = None
    units: tuple[dict[str, Any], ...] = ()
    device: str = "auto"
    timeout: float = 20.0
    memory_mb: int = 4096
    factories: dict[str, str] = field(default_factory=dict)
    factory_root: str | None = None
    roles: dict[str, Any] | None = None
    threads: int = 1
    user_text: str | None = None
    isolation: str = "auto"
    pass_env: dict[str, str] = field(default_factory=dict)
    #: read 0-dim `x[0]` as `x.item()` (`legacy`): set by the worker for the re-run of a
    #: pair whose original stopped at PyTorch's 0-dim indexing error
    legacy_zero_dim_index: bool = False
    op: Op = Op.VERIFY


@dataclass(frozen=True)
class GradcheckRequest(_Record):
    """A file's custom autograd Functions to gradcheck."""

    WHAT: ClassVar[str] = "gradcheck request"

    source: str = ""
    path: str | None = None
    timeout: float = 20.0
    memory_mb: int = 4096
    threads: int = 1
    op: Op = Op.GRADCHECK


@dataclass(frozen=True)
class WorkerContext:
    """What the worker adds to every job it starts: found once at its start, never sent
    by the tool (the view folder runs bind their copy on, whether runs can be confined,
    the uid they run as, the interpreter's folders they read, the cgroup for memory)."""

    view: str | None = None
    isolation_unavailable: str | None = None
    run_uid: int | None = None
    interpreter_paths: tuple[str, ...] = ()
    worker_pid: int = 0
    memory_cgroup: tuple[Any, ...] | None = None

    def fields(self) -> dict[str, Any]:
        """As the plain mapping the doctor's job (its own request format) merges in."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class SideSpec(_Record):
    """One side of one unit, as one run child runs it (`harness.run_side`)."""

    WHAT: ClassVar[str] = "side spec"

    kind: str = "function"
    side: str = "original"
    source: str = ""
    qualname: str | None = None
    free_names: tuple[str, ...] = ()
    targets: tuple[Any, ...] = ()
    command: dict[str, Any] | None = None
    path: str = "<string>"
    user_path: str | None = None
    user_text: str | None = None
    relative: str | None = None
    user_root: str | None = None
    shadow_base: str | None = None
    argv: tuple[str, ...] = ()
    bounds: Bounds | None = None
    checks: tuple[str, ...] = ()
    timeout: float = 20.0
    device: str = "auto"
    factories: dict[str, str] = field(default_factory=dict)
    factory_root: str | None = None
    roles: dict[str, Any] | None = None
    threads: int = 1
    #: per line range the patch changed in this side's source (`coverage`)
    changed_lines: list[list[int]] | None = None
    #: per hunk, the lines whose running says it ran, chosen alike on both sides
    #: (`coverage.reach_points`): a bounded run stops 2 steps after all of them ran
    reach_lines: list[list[int]] | None = None
    #: indices of this side's hunks that only anchor an insertion into the other side
    #: (`coverage.Reach`): credited as run when a stopped run passed their reach point
    anchored_hunks: tuple[int, ...] = ()
    #: names whose last values a bounded run compares (`bounded.observed_names`)
    observe: tuple[str, ...] = ()
    input_plan: Any = None
    graph_inputs: tuple[Any, ...] = ()
    call_site: Any = None
    #: the rewritten side calls the original's Function.backward: the original's source
    counterpart: str | None = None
    #: false only for the worker's own warm-up, which runs in place
    isolate: bool = True
    #: 0-dim `x[0]` gives `x.item()` (`legacy`; on the rewritten side not on changed lines)
    zero_dim_index_as_item: bool = False


#: the top-level keys a run record may hold (`harness`); anything else is an error
RECORD_FIELDS = frozenset({
    "kind", "exception", "unbound", "bound", "outputs", "setup_error", "device", "graph_state", "changed_lines",
    "bounded", "second_point", "finite_differences", "reached", "printed", "measures", "leaf_grads", "params_final",
    "params_initial", "steps", "step_violations", "step_violation_count", "stale_steps", "ever_grad", "fresh_inputs",
    "forward", "forward_count", "functions", "gradcheck", "graph_inputs", "graph_lines", "input_plan", "output_grads",
    "zero_dim_readings",
})
#: keys every record holds, whatever the run did
RECORD_REQUIRED = frozenset({"kind", "exception", "unbound", "bound", "outputs"})


def versioned_record(record: dict[str, Any]) -> dict[str, Any]:
    """A run record stamped with this version (the harness, before it is saved)."""
    return {VERSION_KEY: PROTOCOL_VERSION, **record}


def check_record(record: Any) -> dict[str, Any]:
    """The record without its version stamp, after checking it: this version, no
    unknown key, the required keys present (`ProtocolError` otherwise)."""
    if not isinstance(record, dict):
        raise ProtocolError(f"run record: expected an object, got {type(record).__name__}")
    check_version(record, "run record")
    body = {key: value for key, value in record.items() if key != VERSION_KEY}
    unknown = sorted(str(key) for key in set(body) - RECORD_FIELDS)
    if unknown:
        raise ProtocolError(f"run record: unknown field(s) {', '.join(unknown)} (protocol version {PROTOCOL_VERSION})")
    missing = sorted(RECORD_REQUIRED - set(body))
    if missing:
        raise ProtocolError(f"run record: missing field(s) {', '.join(missing)} (protocol version {PROTOCOL_VERSION})")
    return body
