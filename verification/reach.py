"""Did a driver reach the changed code? Calls of the changed file's functions, recorded.

A script or user-named driver only judges a changed function if it calls it; when it
does not, the function runs on its own with synthesized inputs instead. Only *call*
events are traced (the trace function returns None, so no line events), and only code
objects compiled from the changed file count: the cost is one cheap Python call per
Python frame. An earlier trace function (a debugger, a coverage tool) keeps running.
"""

from __future__ import annotations

import sys
import threading
from types import FrameType
from typing import Any


class ReachTracer:
    """Records which of `targets` (qualnames; ``Cls`` covers ``Cls.forward``) ran."""

    def __init__(self, filename: str, targets: list[str] | tuple[str, ...]) -> None:
        self.filename = filename
        self.targets = tuple(targets)
        self.reached: set[str] = set()
        self._previous: Any = None

    def _match(self, qualname: str) -> str | None:
        for target in self.targets:
            if qualname == target or qualname.startswith(target + "."):
                return target
        return None

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        if event == "call" and code.co_filename == self.filename:
            target = self._match(getattr(code, "co_qualname", code.co_name))
            if target is not None:
                self.reached.add(target)
        previous = self._previous
        return previous(frame, event, arg) if previous is not None else None

    def __enter__(self) -> "ReachTracer":
        if self.targets:
            self._previous = sys.gettrace()
            sys.settrace(self._trace)
            threading.settrace(self._trace)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.targets:
            sys.settrace(self._previous)
            threading.settrace(self._previous)  # type: ignore[arg-type]
