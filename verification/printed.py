"""What a script prints is one of its outputs: capture it (bounded) and compare it.

A script or driver reports its results by printing them ("epoch 1: val loss 0.4213"),
not by leaving them in module globals, so a rewrite that changes a printed number
changed the program's result. The harness captures ``sys.stdout`` while the user's
``__main__`` runs (`PrintedText`); `printed_differences` compares the two sides line by
line, token by token.

Comparison (documented, stable):

* lines are split into tokens: numbers (``-1.5e-3``, ``nan``, ``inf``) and runs of other
  non-blank text; blank space is not compared.
* integers (no decimal point, no exponent: counts, epochs, sizes): exactly.
* other numbers: equal within the float tolerance of `contracts` (rtol=1.3e-6, atol=1e-5,
  the float32 tolerances ``.item()`` values get), widened by what printing rounded
  away: half a unit in the last printed digit of each side (``f"{x:.4f}"`` of two values
  within tolerance can round apart by one such unit, never by two; ``tensor(2.3026)``
  against ``2.302585`` by half of one). A shortest-repr float (``0.3``) cannot be told
  from a rounded one, so it too stands for +-0.05.
* ``tensor(0.5000, grad_fn=<AddBackward0>)``: the ``grad_fn=<...>`` and
  ``requires_grad=True`` parts are dropped (a fix that stops recording a graph keeps the
  values' meaning), and a one-number ``tensor(x)`` compares as the number ``x`` (AGF006:
  ``loss`` became ``loss.item()``), as `contracts.compare` does for values.

Masked, because two runs of the same program print them differently (each replaced by
a placeholder on both sides, so the rest of the line is still compared):

* a number immediately followed by a time unit (``0.12s``, ``35 ms``, ``1.2 sec``,
  ``3 min``), and ``it/s`` / ``s/it`` rates (tqdm-style progress);
* clock times and dates (``07:22:47``, ``2026-12-01``);
* hex addresses (``0x7f3a5c2b1e40``: object reprs);
* paths under the temporary folder (``/tmp/tmpab12cd/...``); the shadow copy's path
  is not masked but written back as the user's by the harness, as in error messages;
* text before a carriage return on a line (a progress bar redrawing itself).

Lines printed by a statement that reads graph state (``print(out.requires_grad)``,
tagged as they are written, `graph_state`), where the contract expects graph state to
change: ``True``/``False``/``None``/graph node tokens, and the strings a conditional on
graph state chooses between (``"on" if torch.is_anomaly_enabled() else "off"``), may differ, and each line that did
is listed, not reported; everything else on them is compared.

Not compared at all: lines about autograd's own state (they name a ``graph``,
``grad_fn``, ``requires_grad`` or ``is_leaf``: "graph nodes kept alive: 354", "logits
hold a graph: True"). The fixes judged on outputs (AGF001, AGF006, ...) change that
state by design; what such a line prints is a measure of the graph, which the
retained-graph checks judge, not a result of the program.

Captured text is bounded (`MAX_PRINTED_CHARS`); when a side printed more, only the
prefix both sides kept is compared and the detail says so.
"""

from __future__ import annotations

import io
import math
import re
import tempfile
from typing import Callable

MAX_PRINTED_CHARS = 64 * 1024
MAX_PRINTED_DIFFS = 3

_TIME_UNIT = r"(?:ns|us|µs|ms|s|sec|secs|second|seconds|min|mins|minutes|h|hr|hrs|hours)\b"
_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\d+(?:\.\d+)?\s*(?:it/s|s/it)\b"), "<rate>"),
    (re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\s?" + _TIME_UNIT), "<duration>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), "<date>"),
    (re.compile(r"\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\b"), "<clock>"),
    (re.compile(r"\b0x[0-9a-fA-F]{6,}\b"), "<address>"),
)
_AUTOGRAD_STATE = re.compile(r"\bgraphs?\b|grad_fn|requires_grad|is_leaf", re.IGNORECASE)
_TENSOR_NOISE = re.compile(r",\s*(?:grad_fn=<\w+>|requires_grad=True)")
_SCALAR_TENSOR = re.compile(r"tensor\(\s*([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))\s*\)")
_TOKEN = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)\b|[^\s\d]+|\d+", re.IGNORECASE)
_INTEGER = re.compile(r"[-+]?\d+")
#: what a graph-state read prints: a flag, a missing graph node, a node's name
_GRAPH_TOKEN = re.compile(r"[(\[{,:=<]*(?:True|False|None|\w*Backward\w*)[)\]},:>]*")
_PUNCTUATION = "()[]{},:;=<>.!?'\""
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)", re.IGNORECASE)


class PrintedText(io.TextIOBase):
    """A ``sys.stdout`` stand-in that keeps the first `limit` characters and counts all;
    what is written still goes on to `forward` (the run's log) when given."""

    encoding = "utf-8"

    def __init__(self, limit: int = MAX_PRINTED_CHARS, forward: io.TextIOBase | None = None,
                 graph_state: Callable[[], bool] | None = None) -> None:
        super().__init__()
        self._forward = forward
        self._parts: list[str] = []
        self._kept = 0
        self.limit = limit
        self.total = 0
        #: says whether the write under way comes from a statement that reads graph
        #: state (`graph_state`); the lines it writes are tagged
        self._graph_state = graph_state
        self._line = 0
        self.graph_lines: set[int] = set()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        text = str(text)
        if self._forward is not None:
            self._forward.write(text)
        self.total += len(text)
        room = self.limit - self._kept
        if room > 0:
            piece = text[:room]
            self._parts.append(piece)
            self._kept += len(piece)
            newlines = piece.count("\n")
            if self._graph_state is not None and piece.strip() and self._graph_state():
                self.graph_lines.update(range(self._line, self._line + newlines + 1))
            self._line += newlines
        return len(text)

    def fileno(self) -> int:
        """The log's descriptor (code that writes to it directly is not captured)."""
        if self._forward is None:
            raise io.UnsupportedOperation("fileno")
        return self._forward.fileno()

    def flush(self) -> None:
        if self._forward is not None:
            self._forward.flush()

    def text(self) -> str:
        return "".join(self._parts)

    def record(self) -> dict[str, object]:
        """What goes into the run's record: the kept text and how much was printed."""
        record: dict[str, object] = {"text": self.text(), "chars": self.total, "truncated": self.total > self._kept}
        if self.graph_lines:  # lines that statements reading graph state printed
            record["graph_lines"] = sorted(self.graph_lines)
        return record


def mask_volatile(text: str) -> str:
    """`text` with everything two runs of one program print differently replaced."""
    temp = re.escape(tempfile.gettempdir())
    text = re.sub(temp + r"[/\\][^\s'\"]*", "<tmp>", text)
    lines = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]
    text = "\n".join(lines)
    for pattern, placeholder in _MASKS:
        text = pattern.sub(placeholder, text)
    return text


def _normalize(text: str, graph_lines: frozenset[int] = frozenset()) -> list[tuple[str, list[str], bool]]:
    """The compared lines: (the line as masked, its tokens, whether a statement reading
    graph state printed it), blank lines left out."""
    text = _SCALAR_TENSOR.sub(r"\1", _TENSOR_NOISE.sub("", mask_volatile(text)))
    lines = [(line.strip(), index in graph_lines) for index, line in enumerate(text.split("\n"))
             if not _AUTOGRAD_STATE.search(line)]
    return [(line, tokens, tagged) for line, tagged in lines if (tokens := _TOKEN.findall(line))]


def _decimals(token: str) -> int:
    mantissa, _, exponent = token.lower().partition("e")
    digits = len(mantissa.partition(".")[2])
    return digits - int(exponent or 0)


def _numbers_close(a: str, b: str, rtol: float, atol: float) -> bool:
    x, y = float(a), float(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    # each printed number stands for the values that round to it: +- half its last digit
    rounding = 0.5 * (10.0 ** -_decimals(a) + 10.0 ** -_decimals(b))
    return abs(x - y) <= atol + rtol * abs(x) + rounding * (1 + 1e-9)


def _graph_token(token: str, choices: frozenset[str]) -> bool:
    """A printed token shaped like graph state: a flag, ``None``, a node's name, or one of
    the strings a conditional on graph state chooses between (``on;`` for ``"on"``)."""
    return bool(_GRAPH_TOKEN.fullmatch(token)) or token.strip(_PUNCTUATION) in choices


def _line_differences(a: tuple[str, list[str]], b: tuple[str, list[str]], rtol: float, atol: float,
                      graph_state: bool = False, choices: frozenset[str] = frozenset()) -> str | None:
    """The first difference between two printed lines; with `graph_state` (both printed
    by statements that read graph state) tokens shaped like graph state may differ."""
    (a_line, a), (b_line, b) = a, b
    if len(a) != len(b):
        return f"{a_line[:120]!r} vs {b_line[:120]!r}"
    for x, y in zip(a, b):
        if graph_state and _graph_token(x, choices) and _graph_token(y, choices):
            continue
        both_numbers = _NUMBER.fullmatch(x) and _NUMBER.fullmatch(y)
        if both_numbers and _INTEGER.fullmatch(x) and _INTEGER.fullmatch(y):
            if int(x) == int(y):
                continue
        elif both_numbers and _numbers_close(x, y, rtol, atol):
            continue
        if not both_numbers and x == y:
            continue
        return f"{x} vs {y} in {b_line[:120]!r}"
    return None


def printed_differences(original: dict, rewritten: dict, *, rtol: float, atol: float,
                        graph_state: list[str] | None = None, choices: frozenset[str] = frozenset()) -> list[str]:
    """Differences between two sides' printed output (records from `PrintedText.record`).

    With `graph_state` (a list, the contract expects graph state to change), lines that
    statements reading graph state printed on both sides may differ in graph-state
    tokens (``True``/``False``/``None``/``<AddBackward0>``); each such line that did is
    appended to `graph_state` instead of reported."""
    a_text, b_text = str(original.get("text") or ""), str(rewritten.get("text") or "")
    cut = ""
    if original.get("truncated") or rewritten.get("truncated"):
        keep = min(len(a_text), len(b_text))
        a_text, b_text = a_text[:keep].rsplit("\n", 1)[0], b_text[:keep].rsplit("\n", 1)[0]
        cut = f" (compared the first {keep} printed characters of {original.get('chars')} / {rewritten.get('chars')})"
    expect = graph_state is not None
    a_lines = _normalize(a_text, frozenset(original.get("graph_lines") or ()) if expect else frozenset())
    b_lines = _normalize(b_text, frozenset(rewritten.get("graph_lines") or ()) if expect else frozenset())
    diffs: list[str] = []
    for index, ((xl, xt, xg), (yl, yt, yg)) in enumerate(zip(a_lines, b_lines)):
        x, y = (xl, xt), (yl, yt)
        difference = _line_differences(x, y, rtol, atol)
        if difference and xg and yg and graph_state is not None and _line_differences(x, y, rtol, atol, True, choices) is None:
            graph_state.append(f"printed line {index + 1}: {xl[:80]!r} -> {yl[:80]!r}")
            continue
        if difference:
            diffs.append(f"printed line {index + 1}: {difference}{cut}")
            if len(diffs) >= MAX_PRINTED_DIFFS:
                return diffs
    if len(a_lines) != len(b_lines):
        diffs.append(f"printed {len(a_lines)} line(s) in the original, {len(b_lines)} in the rewritten{cut}")
    return diffs


def printed_lines(record: dict) -> int:
    """How many non-blank lines a side printed (for the acceptance detail)."""
    return sum(1 for line in str(record.get("text") or "").splitlines() if line.strip())
