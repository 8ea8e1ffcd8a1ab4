"""The typed protocol between the tool and its verification worker, and inside the worker.

Three records cross a process boundary during verification:

* `VerifyRequest` (and `GradcheckRequest`): the tool -> the worker, one JSON line each,
  built by `api` and read back by `worker.main`;
* `SideSpec`: the job -> one forked run child, what `harness.run_side` runs (one side
  of one unit);
* `RunRecord`: the run child -> the job, a ``torch.save`` file of plain data read back
  with ``weights_only`` (`sandbox`) and then once into the dataclass (`read_record`).

Each is versioned by `PROTOCOL_VERSION`. A worker and a tool of different versions
cannot happen in a normal installation (the worker is this installation's code, even
under the project's interpreter, see `client.worker_library`), but a stale library
folder or a hand-made client could: then the answer is a clear error naming both
versions, which the tool turns into an ``unverified`` verdict, never a traceback or a
silently misread field. `from_json` rejects a message without a version, of another
version, with an unknown field (a typo, or a field a newer tool added) or without one
of its fields, each with a message naming the record and the field.

Statuses and kinds are enums (`Op`, `RunStatus`, `RunKind`, string enums), so JSON and
comparisons with plain strings keep working.

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
    #: the run ends when the changed function's call returns (`bounded.Bounds.stop_at_return`):
    #: set by the job for contracts decided by then (`checks.DECIDED_AT_RETURN`)
    stop_at_return: bool = False

    def settings(self) -> dict[str, Any]:
        """The mapping `bounded` reads (``cap``, ``outer_cap``, ``forward_cap``, ``stop_after``,
        ``stop_at_return``)."""
        return {"cap": self.cap, "outer_cap": self.outer_cap, "forward_cap": self.forward_cap, "stop_after": self.stop_after,
                "stop_at_return": self.stop_at_return}


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
    #: a notebook's masked IPython lines: placeholder line -> the IPython input it stands
    #: for (`verification.ipython_lines` runs them through IPython's transformer)
    ipython_lines: dict[str, str] = field(default_factory=dict)
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
    #: a notebook's masked IPython lines (`VerifyRequest.ipython_lines`)
    ipython_lines: dict[str, str] = field(default_factory=dict)


class RunKind(_TextEnum):
    """What one run child ran: a unit's kind (`units.Unit.kind`), or a whole module for
    ``verify --gradcheck``."""

    SCRIPT = "script"
    DRIVER = "driver"
    FUNCTION = "function"
    METHOD = "method"
    AUTOGRAD_FUNCTION = "autograd_function"
    MODULE = "module"


@dataclass(frozen=True)
class ExceptionRecord(_Record):
    """How a run stopped at an exception (`harness.describe_exception`, then
    `place.Place.user_view`): the user's paths and line numbers, never the copy's."""

    WHAT: ClassVar[str] = "run record exception"

    type: str = ""
    message: str = ""
    #: "compile", "import", "run", "backward (from the unit's outputs)"
    phase: str = "run"
    #: autograd's own error (a fix may be expected to remove it)
    autograd: bool = False
    #: out of memory
    memory: bool = False
    #: "line N: text" of the innermost frame in the user's files
    where: str | None = None
    #: what the machine lacks (`environment.cause`), or None
    environment: str | None = None
    #: the user's line of the innermost frame in the changed file (None: a line the patch wrote)
    user_line: int | None = None
    #: the module-level statement of the changed file that was running
    top_line: int | None = None


@dataclass(frozen=True)
class Unbound(_Record):
    """Why a unit's inputs could not be bound: the parameter and the reason."""

    WHAT: ClassVar[str] = "run record unbound"

    name: str = ""
    why: str = ""


@dataclass(frozen=True)
class GraphStateRecord(_Record):
    """What of the source reads graph state (`graph_state`): names and line numbers."""

    WHAT: ClassVar[str] = "run record graph_state"

    names: tuple[str, ...] = ()
    lines: tuple[int, ...] = ()
    #: the strings a conditional on graph state chooses between (they may differ by design)
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class CoverageRecord(_Record):
    """The line watch's report (`coverage.LineWatch.report`): the changed hunks, the
    lines of them that ran, the hunks that never ran."""

    WHAT: ClassVar[str] = "run record changed_lines"

    hunks: list[Any] = field(default_factory=list)
    ran: list[int] = field(default_factory=list)
    missed: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class BoundedRecord(_Record):
    """What a bounded run cut (`bounded.Bounds`): its caps and the loops it capped
    (``where``, ``label``, ``cap``, ``capped``, ``entries``, ``forward`` each)."""

    WHAT: ClassVar[str] = "run record bounded"

    cap: int = 0
    outer_cap: int = 0
    forward_cap: int | None = None
    #: optimizer steps (backwards) after the changed code ran at which loops end (0: never)
    stop_after: int | None = 0
    #: the run was to end when the changed function returned (`bounded.Bounds.stop_at_return`)
    stop_at_return: bool = False
    loops: tuple[dict[str, Any], ...] = ()
    #: where the run stopped after the changed code (`bounded.Bounds.stop`): which loop,
    #: after how many steps, the items each loop under way had left; None when it did not
    stopped: dict[str, Any] | None = None


@dataclass(frozen=True)
class RunRecord(_Record):
    """What one run child wrote and the job judges (`harness.run_side`, `contracts`).

    Saved as plain data (`to_json`, then `record.plain`) with ``torch.save`` and read
    back with ``weights_only`` and `from_json`: this version, every field present, none
    unknown. Values the user's code produced (outputs, gradients, parameters, probe
    figures) stay plain mappings and lists of tensors and Python values (`record`); the
    record's own parts are typed. Fields a run kind does not produce keep their
    defaults: None for an optional part whose absence means something (no printed
    output, no second point), empty for collections and zero for counts."""

    WHAT: ClassVar[str] = "run record"

    kind: RunKind = RunKind.FUNCTION
    exception: ExceptionRecord | None = None
    unbound: Unbound | None = None
    #: how each bound input was made (`binding.Binder.described`)
    bound: dict[str, Any] = field(default_factory=dict)
    #: name -> `record.serialize`d value (``return``, a script's globals, observed names)
    outputs: dict[str, Any] = field(default_factory=dict)
    #: why the run could not start (a CUDA device that is not there, an unreadable driver)
    setup_error: str | None = None
    device: str | None = None
    graph_state: GraphStateRecord | None = None
    changed_lines: CoverageRecord | None = None
    bounded: BoundedRecord | None = None
    #: `directional.second_point`'s result
    second_point: dict[str, Any] | None = None
    #: `directional.directional_check`'s result
    finite_differences: dict[str, Any] | None = None
    #: driver targets the run reached (`reach.ReachTracer`)
    reached: tuple[str, ...] = ()
    #: `printed.PrintedText.record` of a script or driver run
    printed: dict[str, Any] | None = None
    #: `probes.Probes.finish`
    measures: dict[str, Any] = field(default_factory=dict)
    leaf_grads: dict[str, Any] = field(default_factory=dict)
    params_final: dict[str, Any] = field(default_factory=dict)
    params_initial: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    step_violations: list[dict[str, Any]] = field(default_factory=list)
    step_violation_count: int = 0
    stale_steps: int = 0
    ever_grad: list[str] = field(default_factory=list)
    fresh_inputs: list[str] = field(default_factory=list)
    #: the first forward passes' losses and module outputs (`probes.Probes.forward_records`)
    forward: list[dict[str, Any]] = field(default_factory=list)
    forward_count: int = 0
    #: custom Functions seen (`probes.Probes.functions`); for a ``verify --gradcheck``
    #: module run, `gradcheck.gradcheck_namespace`'s list
    functions: dict[str, Any] | list[Any] = field(default_factory=dict)
    gradcheck: dict[str, Any] | None = None
    #: argument position -> why it is a graph input (autograd Function units)
    graph_inputs: dict[int, Any] = field(default_factory=dict)
    input_plan: dict[str, Any] | None = None
    output_grads: dict[str, Any] | None = None
    #: 0-dim `x[0]` read as `x.item()` this many times (`legacy`)
    zero_dim_readings: int = 0
    #: how a notebook's IPython lines ran (`ipython_lines`), or None
    ipython: str | None = None
    #: outputs not compared because they were read from a clock (`clock`)
    volatile: list[str] = field(default_factory=list)
    #: the original script's float64 reference run (`reference.float64_reference`), or None
    float64_reference: dict[str, Any] | None = None

    def to_json(self, *, versioned: bool = True) -> dict[str, Any]:
        """Plain data: the record's own parts as mappings, the enum as its value, and
        the run's values as they are (`record.plain` makes those loadable)."""
        data = {}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if isinstance(value, _Record):
                value = value.to_json(versioned=False)
            elif isinstance(value, enum.Enum):
                value = value.value
            data[item.name] = value
        return {VERSION_KEY: PROTOCOL_VERSION, **data} if versioned else data


class RunRecordDraft:
    """A `RunRecord` while its run lasts: the harness sets its fields as the run goes
    (a name that is no field is an error), then `freeze`s it. The exception stays a
    mapping until then (`place.Place.user_view` rewrites it in place, as the doctor's
    own record does)."""

    __slots__ = tuple(f.name for f in dataclasses.fields(RunRecord))

    def __init__(self, kind: str) -> None:
        for item in dataclasses.fields(RunRecord):
            default = item.default_factory() if item.default_factory is not dataclasses.MISSING else item.default
            object.__setattr__(self, item.name, default)
        self.kind = kind

    def freeze(self) -> RunRecord:
        """The finished record (typed parts built from what the run set)."""
        values = {name: getattr(self, name) for name in self.__slots__}
        exception = values["exception"]
        if isinstance(exception, Mapping):
            values["exception"] = ExceptionRecord(**{k: v for k, v in exception.items() if k != "frames"})
        values["kind"] = RunKind(values["kind"])
        values["reached"] = tuple(values["reached"])
        return RunRecord(**values)


def read_record(data: Any) -> RunRecord:
    """The run record a child saved (`RunRecord.to_json`), read back once; `ProtocolError`
    for one of another version, with an unknown or a missing field."""
    return RunRecord.from_json(data)


def part_json(part: "_Record | None") -> dict[str, Any] | None:
    """A typed part of a record as plain JSON (no version stamp), for evidence the tool
    receives; None stays None."""
    return None if part is None else part.to_json(versioned=False)
