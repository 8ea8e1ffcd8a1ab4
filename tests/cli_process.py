"""Running `autograd-fix` as a real process: for what CliRunner cannot show (signals,
temporary folders left behind, processes that outlive the tool).

Each process gets its own empty TMPDIR, so "nothing left behind" is simply "TMPDIR is
empty", and "no process left" is "no process has that TMPDIR in its environment" (the
worker and every run it forks inherit it, or a folder below it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable


@dataclass
class CliProcess:
    proc: subprocess.Popen
    tmpdir: Path
    stderr_lines: list[str] = field(default_factory=list)
    stdout_lines: list[str] = field(default_factory=list)
    _readers: list[threading.Thread] = field(default_factory=list)

    def wait_for_stderr(self, wanted: Callable[[str], bool], timeout: float) -> str:
        """The first stderr line for which `wanted` holds; fails after `timeout` s."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.stderr_lines):
                if wanted(line):
                    return line
            if self.proc.poll() is not None and not any(t.is_alive() for t in self._readers):
                break
            time.sleep(0.05)
        raise AssertionError(f"no such line on stderr within {timeout}s; got:\n" + "".join(self.stderr_lines))

    def signal(self, signum: int, *, group: bool = False) -> None:
        """To the tool alone (as `kill` does), or to its whole process group (as a
        terminal's Ctrl-C does: the verification worker gets it too)."""
        if group:
            os.killpg(self.proc.pid, signum)
        else:
            self.proc.send_signal(signum)

    def finish(self, timeout: float = 60.0) -> int:
        code = self.proc.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=5)
        return code

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)

    @property
    def stdout(self) -> str:
        return "".join(self.stdout_lines)


def start_cli(args: list[str], cwd: Path, tmpdir: Path) -> CliProcess:
    """`python -m autograd_fix ARGS` in `cwd`, its TMPDIR `tmpdir`, both pipes read as
    lines in the background (so a full pipe never blocks it)."""
    tmpdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmpdir), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("AUTOGRAD_FIX_VERIFY_DEBUG", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "autograd_fix", *args], cwd=cwd, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        start_new_session=True,  # its own process group, as a shell gives a command
    )
    cli = CliProcess(proc, tmpdir)
    for stream, lines in ((proc.stdout, cli.stdout_lines), (proc.stderr, cli.stderr_lines)):
        reader = threading.Thread(target=lambda s=stream, out=lines: out.extend(iter(s.readline, "")), daemon=True)
        reader.start()
        cli._readers.append(reader)
    return cli


def processes_using(tmpdir: Path) -> list[int]:
    """Pids of live processes whose TMPDIR is `tmpdir` or a folder below it."""
    marker = f"TMPDIR={tmpdir}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                variables = handle.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state != b"Z" and any(v == marker or v.startswith(marker + b"/") for v in variables):
            found.append(int(entry))
    return found


def wait_until_gone(tmpdir: Path, timeout: float = 10.0) -> list[int]:
    """Processes still using `tmpdir` after up to `timeout` s (dying ones get a moment)."""
    deadline = time.monotonic() + timeout
    left = processes_using(tmpdir)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = processes_using(tmpdir)
    return left


def children_of(pid: int) -> list[int]:
    """Direct children of `pid` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def kill_quietly(cli: CliProcess) -> None:
    """Tear-down: make sure a failed test leaves nothing running."""
    if cli.proc.poll() is None:
        cli.proc.send_signal(signal.SIGKILL)
        cli.proc.wait(timeout=10)
    for pid in processes_using(cli.tmpdir):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
