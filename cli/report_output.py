"""Where the report goes: standard output, or the file named by `--output-file`.

With a file, the whole report (findings, diffs in `--diff` mode, the summary line that
text output ends with) is collected in memory and written in one atomic step at the
end, without colour; nothing of it reaches standard output. Errors naming unreadable
files and the `--diff` summary still go to standard error, and `--apply` on stdin still
writes the fixed source to standard output (that is the command's product, not its
report).
"""

from __future__ import annotations

import io
import os
import stat
import sys
from typing import TYPE_CHECKING, Callable

import typer

from autograd_fix.cli.writes import WriteRefused, write_user_file

if TYPE_CHECKING:
    from rich.console import Console


class ReportOutputError(Exception):
    """The report file cannot be written (a usage error: exit code 2)."""


def check_output_path(path: str) -> None:
    """Fail before any work when `path` clearly cannot receive the report."""
    target = os.path.realpath(path)
    if os.path.isdir(target):
        raise ReportOutputError(f"cannot write --output-file {path}: it is a folder")
    folder = os.path.dirname(target) or "."
    if not os.path.isdir(folder):
        raise ReportOutputError(f"cannot write --output-file {path}: folder {os.path.dirname(path) or '.'} does not exist")
    if _is_special(target):
        return
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ReportOutputError(f"cannot write --output-file {path}: permission denied")


def check_not_an_input(path: str, inputs: list[str]) -> None:
    """Refuse to write the report over a file being checked (or fixed)."""
    target = os.path.realpath(path)
    for name in inputs:
        if os.path.realpath(name) == target:
            raise ReportOutputError(f"--output-file {path} is one of the files being checked")


class ReportSink:
    """Collects the report for one run; `console` styles text, `write` takes it verbatim.

    `console` makes the console of standard output; it is called (and rich imported)
    only once text is styled: a machine-readable report is written with `write` alone."""

    def __init__(self, path: str | None, console: Callable[[], Console]) -> None:
        self.path = path
        self._buffer = io.StringIO() if path is not None else None
        self._make_console = console
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            if self._buffer is not None:
                from rich.console import Console

                self._console = Console(
                    file=self._buffer, force_terminal=False, no_color=True, highlight=False, soft_wrap=True, width=10_000,
                    emoji=False,
                )
            else:
                self._console = self._make_console()
        return self._console

    def write(self, text: str) -> None:
        """Plain text (a JSON or SARIF document, workflow commands), exactly as given."""
        if self._buffer is not None:
            self._buffer.write(text)
        else:
            typer.echo(text, nl=False)

    def write_diff(self, diff: str, data: bytes) -> None:
        """A diff: coloured on a colour console (`render.print_diff`); otherwise `data`,
        the diff's bytes in the file's own encoding (`render.diff_bytes`), exactly:
        `git apply` needs every byte of every line, and writing text to stdout would
        re-encode a latin-1 file's lines as UTF-8."""
        if self.console.color_system is not None and not self.console.no_color:
            from autograd_fix.cli.render import print_diff

            print_diff(self.console, diff)
        elif self._buffer is not None:
            self._buffer.write(data.decode("utf-8", "surrogateescape"))  # `close` encodes it back
        else:
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()

    def close(self) -> None:
        """Write the collected report to its file (once, atomically); stdout needs nothing."""
        if self._buffer is None or self.path is None:
            return
        data = self._buffer.getvalue().encode("utf-8", "surrogateescape")
        target = os.path.realpath(self.path)
        try:
            if _is_special(target):
                with open(target, "wb") as handle:  # a pipe or a device: nothing to replace
                    handle.write(data)
            else:
                write_user_file(target, data)
        except WriteRefused as error:
            raise ReportOutputError(f"cannot write --output-file {self.path}: it {error}") from None
        except OSError as error:
            raise ReportOutputError(f"cannot write --output-file {self.path}: {error.strerror or error}") from None


def _is_special(path: str) -> bool:
    """An existing file that is not a regular file (/dev/stderr, a named pipe)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)
