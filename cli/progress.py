"""Progress bars for long runs, on stderr, only where a person is watching.

A bar appears only when its console is a terminal and the run is long enough to be
worth one; in a pipe, a log file or CI nothing at all is written (no bar, no
escape codes), whatever `--color` or `FORCE_COLOR` say: the decision is the stream's
own `isatty()`. The bar is transient: it disappears when the run ends, leaving the
output as it would be without it.

A verified run is long (seconds per patch), so without a terminal it is not silent
either: `file_lines` writes one plain line per file as its fixes are decided
(`autograd-fix: [3/12] src/train.py: written (2 fixes)`), which a CI log or a pipe
shows as it happens.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator

from typing import TYPE_CHECKING

from autograd_fix.codemods.safe_text import printable

if TYPE_CHECKING:
    from rich.console import Console

#: a static run over more files than this shows a bar (a few hundred files take seconds)
STATIC_PROGRESS_MIN_FILES = 200


def stderr_is_terminal() -> bool:
    """Is stderr a real terminal? (Closed or replaced streams are not.)"""
    stream = sys.stderr
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def run_progress_console(files: int, verifying: bool) -> Console | None:
    """`progress_console()` where the run can show something on it: a verified run (its
    bar, or its per-file lines off a terminal), or a static run over more than
    `STATIC_PROGRESS_MIN_FILES` files on a terminal (`progress_bar`'s own condition).
    None otherwise, so that a run that shows no progress does not import rich."""
    if verifying or (files > STATIC_PROGRESS_MIN_FILES and stderr_is_terminal()):
        return progress_console()
    return None


def progress_console() -> Console:
    """A console on stderr that is a terminal exactly when stderr is one."""
    from rich.console import Console

    terminal = stderr_is_terminal()
    return Console(stderr=True, force_terminal=terminal, force_interactive=terminal, highlight=False)


@contextmanager
def progress_bar(console: Console | None, total: int, label: str, *, more_than: int = 0) -> Iterator[Callable[[int], None]]:
    """Yields `advance(n)`: a bar of `total` steps on `console` when it is a terminal and
    `total > more_than`; otherwise `advance` does nothing and nothing is written."""
    if console is None or not console.is_terminal or total <= more_than:
        yield lambda steps: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=True,
    )
    task = progress.add_task(label, total=total)
    with progress:
        yield lambda steps: progress.advance(task, steps)


def file_lines(console: Console | None, total: int) -> Callable[[str, str], None] | None:
    """`note(path, what)` writing `autograd-fix: [n/total] path: what` on `console` when
    it is not a terminal (a terminal has the bar instead); None when there is nothing
    to say (no console, or no file to decide)."""
    if console is None or console.is_terminal or total <= 0:
        return None
    done = [0]

    def note(path: str, what: str) -> None:
        done[0] += 1
        # a file name may hold a newline or an escape sequence (a hostile repository's)
        line = printable(f"autograd-fix: [{done[0]}/{total}] {path}: {what}")
        console.print(line, markup=False, highlight=False, soft_wrap=True)
        console.file.flush()

    return note
