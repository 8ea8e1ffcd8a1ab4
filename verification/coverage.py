"""Did a run execute the lines a patch changed?  ("accepted means exercised")

A patch whose changed code never ran proves nothing: both runs do the same thing and a
contract comparing them judges the unchanged code. So each side is told which of its
lines changed, and a line tracer limited to the code objects holding those lines says
which of them ran.

* `changed_lines` diffs the two sources line by line (difflib) and returns, per side,
  one group of line numbers per changed hunk. A hunk that only inserts on the other side
  (or only touches lines that hold no bytecode: blank lines, comments, ``else:``) is
  anchored on the first executable line after the insertion point (the statement the
  inserted code runs before), else the last one before it.
* `LineWatch` records those lines as they run. On Python 3.12+ it uses
  ``sys.monitoring`` LINE events switched on only for the code objects that cover a
  watched line; on 3.11 a ``sys.settrace`` hook whose call handler returns a local
  tracer only for frames whose code comes from the verified file and whose line range
  covers a watched line, so everything else (torch's Python code included) runs with
  no per-line cost. Code objects are judged once each and the verdict cached.
* Only the code of the verified module counts: the first module-level code object with
  the verified file's name that runs, and the code objects nested in it. Code that
  merely shares the name (``namedtuple`` and ``dataclass`` compile their methods as
  ``<string>``, the placeholder name of a unit without a file) is not watched.
* Once every watched line ran, the 3.11 hook removes itself (the rest of a training
  loop runs untraced); on 3.12+ each line's event is disabled after its first hit.
* A hunk counts as exercised when at least one of its lines ran; `unexercised` lists
  the hunks (by first line) that never did.
"""

from __future__ import annotations

import contextlib
import difflib
import sys
import types
from typing import Any, Iterable, Iterator, NamedTuple

#: the tool id used with sys.monitoring (3.12+); 3 is free ("optimizer" ids are 5)
_MONITORING_TOOL = 3


def executable_lines(source: str, path: str = "<string>") -> set[int]:
    """Lines that hold bytecode in any code object of `source` (empty if it does not compile)."""
    try:
        code = compile(source, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return set()
    lines: set[int] = set()
    stack = [code]
    while stack:
        current = stack.pop()
        lines.update(line for _, _, line in current.co_lines() if line)  # 0: the RESUME preamble
        stack.extend(const for const in current.co_consts if isinstance(const, types.CodeType))
    return lines


def _anchor(start: int, executable: set[int]) -> list[int]:
    """The executable line that code inserted before 1-based line `start` runs next to."""
    after = [line for line in executable if line >= start]
    if after:
        return [min(after)]
    before = [line for line in executable if line < start]
    return [max(before)] if before else []


def _opcodes(a: list[str], b: list[str]) -> Iterator[tuple[str, int, int, int, int]]:
    """difflib's opcodes for `a` -> `b`, matched only between the first and last line
    that differ: a patch touches a few lines, and matching every repeated line of a long
    file (blank lines, ``model.eval()`` in each of 100 functions) cost each patch time
    that grew with the square of the file's length."""
    head = 0
    limit = min(len(a), len(b))
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    if head:
        yield "equal", 0, head, 0, head
    middle = difflib.SequenceMatcher(None, a[head : len(a) - tail], b[head : len(b) - tail], autojunk=False)
    for tag, i1, i2, j1, j2 in middle.get_opcodes():
        if i1 != i2 or j1 != j2:
            yield tag, i1 + head, i2 + head, j1 + head, j2 + head
    if tail:
        yield "equal", len(a) - tail, len(a), len(b) - tail, len(b)


def changed_lines(original: str, rewritten: str, path: str = "<string>") -> tuple[list[list[int]], list[list[int]]]:
    """Per side, the executable line numbers (1-based) of each changed hunk."""
    a, b = original.splitlines(), rewritten.splitlines()
    exec_a, exec_b = executable_lines(original, path), executable_lines(rewritten, path)
    hunks_a: list[list[int]] = []
    hunks_b: list[list[int]] = []
    for tag, i1, i2, j1, j2 in _opcodes(a, b):
        if tag == "equal":
            continue
        side_a = [line for line in range(i1 + 1, i2 + 1) if line in exec_a] or _anchor(i1 + 1, exec_a)
        side_b = [line for line in range(j1 + 1, j2 + 1) if line in exec_b] or _anchor(j1 + 1, exec_b)
        if side_a:
            hunks_a.append(side_a)
        if side_b:
            hunks_b.append(side_b)
    return hunks_a, hunks_b


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _starts_function(line: str) -> bool:
    text = line.lstrip()
    return text.startswith(("@", "def ", "async def "))


class Reach(NamedTuple):
    """Per side, the lines the stop waits for (`reach_points`), and the indices of the
    hunks `changed_lines` only anchored on that side (it has no changed line there: an
    insertion into the other side)."""

    original: list[list[int]]
    rewritten: list[list[int]]
    anchored_original: list[int]
    anchored_rewritten: list[int]


def reach_points(original: str, rewritten: str, path: str = "<string>") -> Reach:
    """Per side, the lines whose running says that each hunk of the patch ran, chosen
    alike on both sides (the stop of a bounded run, `bounded.Bounds.stop`, waits for them).

    A hunk with executable lines on both sides is those lines. A pure insertion or
    deletion has none on one side, and anchoring that side on the next executable line
    (as `changed_lines` does for the line watch) can put it in another function (a line
    added after the last statement of a body anchors on the next ``def``), so both sides
    use the same unchanged statement instead: the executable line right before the
    insertion point, or, when the insertion is a decorator or sits right above one or a
    ``def`` (or nothing executable comes before it), the one right after. ([], []) when
    some hunk has no such neighbour: then no stop can be placed alike on both sides.

    A run that stops there never reaches what `changed_lines` anchors a side's pure
    insertion on when that is later code (the line after the loop whose body gained a
    line): that side's anchored hunks are credited as run when their reach point ran
    (`LineWatch.credit`), as the same point is on the other side."""
    a, b = original.splitlines(), rewritten.splitlines()
    exec_a, exec_b = executable_lines(original, path), executable_lines(rewritten, path)
    hunks_a: list[list[int]] = []
    hunks_b: list[list[int]] = []
    anchored_a: list[int] = []
    anchored_b: list[int] = []
    opcodes = list(_opcodes(a, b))
    for index, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag == "equal":
            continue
        side_a = [line for line in range(i1 + 1, i2 + 1) if line in exec_a]
        side_b = [line for line in range(j1 + 1, j2 + 1) if line in exec_b]
        if side_a and side_b:
            hunks_a.append(side_a)
            hunks_b.append(side_b)
            continue
        if not side_a:
            anchored_a.append(len(hunks_a))
        if not side_b:
            anchored_b.append(len(hunks_b))
        before = opcodes[index - 1] if index and opcodes[index - 1][0] == "equal" else None
        after = opcodes[index + 1] if index + 1 < len(opcodes) and opcodes[index + 1][0] == "equal" else None
        changed_text = [line for line in a[i1:i2] + b[j1:j2] if line.strip()]
        following_text = a[i2] if i2 < len(a) else ""
        # a decorator added or removed, or lines added right above a `def` at its own
        # indentation (not the end of the body before it, which is indented deeper)
        decorator = any(line.lstrip().startswith("@") for line in changed_text) or (
            bool(changed_text) and _starts_function(following_text) and _indent(changed_text[0]) == _indent(following_text))
        previous = [(line, line - i1 + j1) for line in range(before[1] + 1, i1 + 1)
                    if line in exec_a and line - i1 + j1 in exec_b] if before else []
        following = [(line, line - i2 + j2) for line in range(i2 + 1, after[2] + 1)
                     if line in exec_a and line - i2 + j2 in exec_b] if after else []
        point = (following[:1] if decorator or not previous else previous[-1:]) or following[:1]
        if not point:
            return Reach([], [], [], [])
        hunks_a.append([point[0][0]])
        hunks_b.append([point[0][1]])
    return Reach(hunks_a, hunks_b, anchored_a, anchored_b)


def unexercised(hunks: Iterable[Iterable[int]], ran: Iterable[int]) -> list[int]:
    """First line of every hunk none of whose lines ran."""
    executed = set(ran)
    return [min(hunk) for hunk in hunks if hunk and not executed.intersection(hunk)]


class LineWatch:
    """Records which of `lines` of file `path` execute between `start` and `stop`."""

    def __init__(self, path: str, hunks: Iterable[Iterable[int]] | None) -> None:
        self.path = path
        self.hunks = [sorted(set(hunk)) for hunk in (hunks or []) if hunk]
        self.lines = frozenset(line for hunk in self.hunks for line in hunk)
        self.ran: set[int] = set()
        self._covers: dict[types.CodeType, bool] = {}
        self._ours: set[types.CodeType] | None = None
        self._previous: Any = None
        self._active = False
        self._monitoring = False
        self._paused = False

    @property
    def enabled(self) -> bool:
        return bool(self.lines)

    def _claim_module(self, code: types.CodeType) -> None:
        """The first module code of the verified file: its nested code objects are ours."""
        if self._ours is not None or code.co_name != "<module>" or code.co_filename != self.path:
            return
        self.claim(code)

    def claim(self, code: types.CodeType) -> None:
        """Watch `code` (a module's code of the verified file) and what it nests, in place of
        any earlier claim. The harness claims the side's own source before running it: a
        package whose ``__init__`` imports the changed module has already run the project's
        copy of the file under the same path, whose code is not the side's."""
        self._covers.clear()
        ours: set[types.CodeType] = set()
        stack = [code]
        while stack:
            current = stack.pop()
            ours.add(current)
            stack.extend(const for const in current.co_consts if isinstance(const, types.CodeType))
        self._ours = ours

    def _covers_watched(self, code: types.CodeType) -> bool:
        self._claim_module(code)
        verdict = self._covers.get(code)
        if verdict is None:
            verdict = False
            if self._ours is not None and code in self._ours:
                own = {line for _, _, line in code.co_lines() if line is not None}
                verdict = bool(own & (self.lines - self.ran))
            self._covers[code] = verdict
        return verdict

    # -- 3.11: settrace, local tracing for the covering frames only -------------------
    def _on_call(self, frame: types.FrameType, event: str, arg: Any):
        # an earlier global tracer (the reach tracer, a debugger) keeps seeing every call
        previous = self._previous
        local = previous(frame, event, arg) if previous is not None else None
        if event != "call" or not self._covers_watched(frame.f_code):
            return local
        if local is None:
            return self._on_line
        return self._chained(local)

    def _chained(self, other: Any):
        """A local tracer running `other` (the earlier tracer's) and ours, each as long as it wants."""
        tracers = [other, self._on_line]

        def trace(frame: types.FrameType, event: str, arg: Any):
            tracers[:] = [t for t in (tracer(frame, event, arg) for tracer in tracers) if t is not None]
            return trace if tracers else None

        return trace

    def _on_line(self, frame: types.FrameType, event: str, arg: Any):
        if event == "line" and not self._paused and frame.f_lineno in self.lines:
            self.ran.add(frame.f_lineno)
            if len(self.ran) == len(self.lines):  # everything seen: stop paying for the hook
                sys.settrace(self._previous)
                return None
        return self._on_line

    # -- 3.12+: sys.monitoring LINE events on chosen code objects ---------------------
    def _on_start(self, code: types.CodeType, offset: int):  # pragma: no cover - 3.12+
        monitoring = sys.monitoring  # type: ignore[attr-defined]
        if self._covers_watched(code):
            monitoring.set_local_events(_MONITORING_TOOL, code, monitoring.events.LINE)
        return monitoring.DISABLE

    def _on_monitored_line(self, code: types.CodeType, line: int):  # pragma: no cover - 3.12+
        if self._paused:
            return None
        if line in self.lines:
            self.ran.add(line)
        return sys.monitoring.DISABLE  # type: ignore[attr-defined]

    def start(self) -> None:
        """Begin watching (a no-op without lines to watch)."""
        if not self.enabled or self._active:
            return
        self._active = True
        self._monitoring = self._start_monitoring()
        if not self._monitoring:
            self._previous = sys.gettrace()
            sys.settrace(self._on_call)  # the module is not running yet: every frame of it is new

    def _start_monitoring(self) -> bool:  # pragma: no cover - 3.12+
        """sys.monitoring where Python has it and the tool id is free; else settrace."""
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is None:
            return False
        try:
            monitoring.use_tool_id(_MONITORING_TOOL, "autograd-fix coverage")
        except ValueError:  # the id is taken (by the code under verification, say)
            return False
        monitoring.restart_events()  # events an earlier watch in this process disabled
        monitoring.register_callback(_MONITORING_TOOL, monitoring.events.PY_START, self._on_start)
        monitoring.register_callback(_MONITORING_TOOL, monitoring.events.LINE, self._on_monitored_line)
        monitoring.set_events(_MONITORING_TOOL, monitoring.events.PY_START)
        return True

    def stop(self) -> None:
        if not self._active:
            return
        self._active = False
        if not self._monitoring:
            sys.settrace(self._previous)
            return
        monitoring = sys.monitoring  # type: ignore[attr-defined]  # pragma: no cover - 3.12+
        monitoring.set_events(_MONITORING_TOOL, 0)
        for code, covers in self._covers.items():
            if covers:
                monitoring.set_local_events(_MONITORING_TOOL, code, 0)
        monitoring.register_callback(_MONITORING_TOOL, monitoring.events.PY_START, None)
        monitoring.register_callback(_MONITORING_TOOL, monitoring.events.LINE, None)
        monitoring.free_tool_id(_MONITORING_TOOL)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Lines the tool itself runs meanwhile (a probe calling the user's backward) do not count."""
        before, self._paused = self._paused, True
        try:
            yield
        finally:
            self._paused = before

    def __enter__(self) -> "LineWatch":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def credit(self, indices: Iterable[int]) -> None:
        """Hunks `indices` count as run: anchors of an insertion into the other side
        whose place (`reach_points`) a stopped bounded run passed (see `Reach`)."""
        for index in indices:
            if 0 <= index < len(self.hunks):
                self.ran.update(self.hunks[index][:1])

    def report(self) -> dict[str, Any] | None:
        """What the record carries: the watched hunks and the lines that ran."""
        if not self.enabled:
            return None
        return {"hunks": self.hunks, "ran": sorted(self.ran), "missed": unexercised(self.hunks, self.ran)}
