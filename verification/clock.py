"""Clock readings, marked where they come from, so no run compares them as outputs.

Why: a script that times itself (``per_step = (time.perf_counter() - start) / n``,
tokens per second, an iteration's ``dt``) holds a different value in every run, and a
fix that makes a step faster (AGF017 removes anomaly mode) changes it on purpose.
Guessing such values from their names (``per_step`` has no ``time`` in it) both misses
them and hides real results that happen to be named ``start`` or ``end``. Instead, during
a verification run, the clocks of the `time` module (and ``timeit.default_timer``) return
`ClockFloat` / `ClockInt`: a ``float`` / ``int`` whose arithmetic keeps the mark, so a
value computed from a reading (a difference, a rate, a rounded figure) is still a clock
reading when the run ends, and the harness sets it aside by what it is, not by its name.

What loses the mark: ``int(...)``/``float(...)`` of a reading, numpy or torch scalars
made from one, strings formatted from one (printed text is masked by `printed` instead),
and clocks this module does not wrap (``datetime.now()``, CUDA events). In a run that
read no marked clock, floats named like timings are set aside by their name instead
(`bounded.VOLATILE_NAME`); in one that did, only marked values are.
"""

from __future__ import annotations

import contextlib
import sys
import time
import timeit
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch

#: the clocks of the `time` module that a script reads to time itself
CLOCKS = ("time", "perf_counter", "monotonic", "process_time", "thread_time",
          "time_ns", "perf_counter_ns", "monotonic_ns", "process_time_ns", "thread_time_ns")

_BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
           "radd", "rsub", "rmul", "rtruediv", "rfloordiv", "rmod", "rpow")
_UNARY = ("neg", "pos", "abs")
_OWN_PACKAGE = __name__.rpartition(".")[0].rpartition(".")[0] or __name__


def _marked(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        return ClockFloat(value)
    if isinstance(value, int):
        return ClockInt(value)
    return value


def _keeping(base: type, op: str) -> Callable[..., Any]:
    plain = getattr(base, f"__{op}__")

    def method(self: Any, *args: Any) -> Any:
        result = plain(self, *args)
        if result is NotImplemented and base is int and args and isinstance(args[0], float):
            # `ns / 1e9`: int declines a float operand; the float's own answer, still marked
            result = getattr(float(self), f"__{op}__")(*args)
        return result if result is NotImplemented else _marked(result)

    method.__name__ = f"__{op}__"
    return method


def _round(self: Any, ndigits: int | None = None) -> Any:
    return _marked(round(float(self), ndigits) if ndigits is not None else round(float(self)))


class ClockFloat(float):
    """A float read from a clock, or computed from such a reading."""

    __slots__ = ()


class ClockInt(int):
    """An integer clock reading (``time.perf_counter_ns()``), or computed from one."""

    __slots__ = ()


for _cls, _base in ((ClockFloat, float), (ClockInt, int)):
    for _op in _BINARY + _UNARY:
        if hasattr(_base, f"__{_op}__"):
            setattr(_cls, f"__{_op}__", _keeping(_base, _op))
    _cls.__round__ = _round  # type: ignore[method-assign]


def is_clock_reading(value: Any) -> bool:
    """Whether `value` was read from a clock during the run, or computed from a reading."""
    return isinstance(value, (ClockFloat, ClockInt))


@dataclass
class ClockUse:
    """How many marked readings a run took: a run that read none may still have timed
    itself with a clock that is not marked (the name fallback applies only then)."""

    reads: int = 0


@contextlib.contextmanager
def marked_clocks() -> Iterator[ClockUse]:
    """The `time` module's clocks (and ``timeit.default_timer``) return marked values
    while the block runs; the plain ones are put back after it."""
    saved = {name: getattr(time, name) for name in CLOCKS if hasattr(time, name)}
    saved_timer = timeit.default_timer
    use = ClockUse()

    def wrap(clock: Callable[[], Any]) -> Callable[[], Any]:
        def read() -> Any:
            if sys._getframe(1).f_globals.get("__name__", "").startswith(_OWN_PACKAGE):
                return clock()  # the harness's own timing (`probes`), not the program's
            use.reads += 1
            return _marked(clock())

        read.__name__ = getattr(clock, "__name__", "clock")
        read.__doc__ = clock.__doc__
        return read

    try:
        for name, clock in saved.items():
            setattr(time, name, wrap(clock))
        timeit.default_timer = time.perf_counter
        # a checkpoint that holds a reading (`{"train_time": elapsed}`) pickles the mark's
        # class: `torch.load`'s weights_only unpickler must accept it in this run
        with torch.serialization.safe_globals([ClockFloat, ClockInt]):
            yield use
    finally:
        for name, clock in saved.items():
            setattr(time, name, clock)
        timeit.default_timer = saved_timer
