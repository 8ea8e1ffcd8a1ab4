"""Ctrl-C, SIGTERM, SIGHUP and SIGQUIT as one exception, raised where the run can stop
cleanly.

Python turns SIGINT into KeyboardInterrupt but lets SIGTERM kill the process on the
spot, skipping every `finally` (so temporary folders and the verification worker
would outlive the run); so would SIGHUP (the terminal closed) and SIGQUIT (Ctrl-\\).
While `StopSignals` is installed each raises `Interrupted`, which carries the signal so
the tool can exit with 128 + its number, as a shell does. A signal the tool was started
with ignored (`nohup` ignores SIGHUP) stays ignored.

A write of a user's file must not be cut in half: inside `held()` a signal is only
noted, and raised as soon as the block ends.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


class Interrupted(BaseException):
    """The run was asked to stop by `signum`. Not a KeyboardInterrupt: click turns
    those into "Aborted!" and exit 1, which would hide what was written."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def label(self) -> str:
        return "Ctrl-C" if self.signum == signal.SIGINT else signal.Signals(self.signum).name


class StopSignals:
    """Installed as a context manager; restores the previous handlers on exit. Outside
    the main thread (where handlers cannot be set) it does nothing."""

    def __init__(self) -> None:
        self._previous: dict[int, object] = {}
        self._held = 0
        self._pending: int | None = None

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                if signal.getsignal(signum) is signal.SIG_IGN and signum != signal.SIGINT:
                    continue  # ignored on purpose by whoever started the tool (nohup)
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._held:
            self._pending = signum
            return
        raise Interrupted(signum)

    @contextmanager
    def held(self) -> Iterator[None]:
        """Postpone a stop until the block (a file write) has finished."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
            pending, self._pending = self._pending, None
            if pending is not None and not self._held:
                raise Interrupted(pending)
            self._pending = pending
