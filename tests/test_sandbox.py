"""User code that hangs, crashes, exits, floods or allocates without bound becomes a
verdict; nothing it starts outlives the tool."""

from __future__ import annotations

import os
import signal
import textwrap
import time

import pytest

from autograd_fix.verification.trust import UserSettings
from autograd_fix.verification import Verifier, verify_many, verify_pair

BASE = """
import torch
x = torch.ones(3)
total = float(x.sum())
"""


@pytest.fixture(scope="module")
def verifier():
    v = Verifier()
    pid = v.worker_pid
    assert v.ping()
    yield v
    v.close()
    # the worker (and with it every job and run) ends with its Verifier
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def pair(verifier, original: str, rewritten: str, **kw):
    kw.setdefault("timeout", 5)
    return verify_pair(textwrap.dedent(original), textwrap.dedent(rewritten), verifier=verifier, **kw)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return False


def test_hang_in_the_original_is_unverified(verifier):
    # how soon after the timeout the verdict comes is measured by benchmarks/bench_sandbox.py
    verdict = pair(verifier, BASE + "while True:\n    pass\n", BASE + "total += 0\nwhile True:\n    pass\n", timeout=1.5)
    assert verdict.verdict == "unverified"
    assert "did not finish within 1.5 s" in verdict.reason


def test_hang_only_in_the_rewritten_is_rejected(verifier):
    verdict = pair(verifier, BASE, BASE + "while True:\n    pass\n", timeout=2)
    assert verdict.verdict == "rejected"
    assert "did not finish" in verdict.reason


def test_segfault_becomes_a_verdict(verifier):
    crash = BASE + "import ctypes\nctypes.string_at(0)\n"
    verdict = pair(verifier, BASE, crash)
    assert verdict.verdict == "rejected"
    assert "SIGSEGV" in verdict.reason
    assert pair(verifier, crash, crash + "total = 1\n").verdict == "unverified"


def test_os_exit_becomes_a_verdict(verifier):
    verdict = pair(verifier, BASE, BASE + "import os\nos._exit(3)\n")
    assert verdict.verdict == "rejected"
    assert "exited early with status 3" in verdict.reason


def test_sys_exit_zero_is_a_normal_end_and_nonzero_an_error(verifier):
    assert pair(verifier, BASE + "import sys\nsys.exit(0)\n", BASE + "total = total * 1\nimport sys\nsys.exit(0)\n").verdict == "accepted"
    verdict = pair(verifier, BASE, BASE + "import sys\nsys.exit(2)\n")
    assert verdict.verdict == "rejected"
    assert "SystemExit" in verdict.reason and "sys.exit(2)" in verdict.reason


def test_memory_blow_up_is_stopped(verifier):
    hog = BASE + "chunks = []\nwhile True:\n    chunks.append(torch.ones(16 * 1024 * 1024))\n"
    verdict = pair(verifier, hog, hog + "total = 2\n", memory_mb=300, timeout=20)
    assert verdict.verdict == "unverified"
    assert "memory" in verdict.reason and "did not finish" not in verdict.reason  # the watch, not the clock


def test_output_flood_is_capped_and_does_not_block(verifier):
    flood = BASE + "for _ in range(20000):\n    print('x' * 1000)\n"
    verdict = pair(verifier, flood, flood.replace("total = float(x.sum())", "total = float(x.sum()) * 1.0"))
    assert verdict.verdict == "accepted", verdict.reason
    evidence = verdict.units[0].evidence["original"]
    assert evidence["stdout_bytes"] >= 20000 * 1000
    assert len(evidence["stdout_tail"]) <= 400


def test_endless_flood_is_a_timeout_not_a_hang(verifier):
    verdict = pair(verifier, BASE + "while True:\n    print('y' * 4096)\n", BASE + "while True:\n    print('z')\n", timeout=1.5)
    assert verdict.verdict == "unverified"
    assert "did not finish" in verdict.reason


def test_no_grandchild_outlives_a_killed_run(verifier, tmp_path):
    # without a PID namespace of its own (isolation = "off"): the process group kill alone
    # must take the sleeper down (tests/test_isolation.py covers isolated runs). Found by
    # its unique command line: its pid, as the run sees it, may be a namespace's.
    seconds = f"300.{os.getpid()}{time.monotonic_ns() % 100000}"
    spawner = BASE + textwrap.dedent(
        f"""
        import subprocess
        proc = subprocess.Popen(["sleep", {seconds!r}])
        while True:
            pass
        """
    )
    verdict = pair(verifier, spawner, spawner + "total = 3\n", timeout=2, path=str(tmp_path / "spawner.py"),
                   user=UserSettings(isolation="off"))
    assert verdict.verdict == "unverified"
    deadline = time.monotonic() + 5
    while _sleepers(seconds) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _sleepers(seconds) == []


def _sleepers(seconds: str) -> list[int]:
    """Live processes running ``sleep <seconds>``."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if handle.read().split(b"\0")[:2] == [b"sleep", seconds.encode()] and _alive(int(entry)):
                    found.append(int(entry))
        except (OSError, ValueError):
            pass
    return found


def test_independent_patches_keep_their_order(verifier):
    # that they run in parallel is a timing claim: benchmarks/bench_sandbox.py measures it
    slow = BASE + "import time\ntime.sleep(0.2)\n"
    pairs = [
        {"original": slow, "rewritten": slow + f"marker = {i}\n" if i % 2 else slow.replace("time.sleep(0.2)", "time.sleep(0.2)\ntotal = 0.0")}
        for i in range(4)
    ]
    verdicts = verify_many(pairs, jobs=4, verifier=verifier, timeout=10)
    # odd pairs add a global (an output only in the rewritten), even pairs change a value
    assert all(v.verdict == "rejected" for v in verdicts)
    assert all("marker" in v.reason for v in verdicts[1::2]) and all("total" in v.reason for v in verdicts[::2])


def test_keyboard_interrupt_in_user_code_is_just_an_exception(verifier):
    verdict = pair(verifier, BASE, BASE + "raise KeyboardInterrupt\n")
    assert verdict.verdict == "rejected" and "KeyboardInterrupt" in verdict.reason


def test_signal_to_self_is_a_crash(verifier):
    verdict = pair(verifier, BASE, BASE + f"import os\nos.kill(os.getpid(), {int(signal.SIGABRT)})\n")
    assert verdict.verdict == "rejected" and "SIGABRT" in verdict.reason


@pytest.mark.skipif(os.geteuid() != 0, reason="runs become an unprivileged user only when the tool runs as root")
def test_a_file_only_its_owner_may_read_is_left_out_of_the_runs_copy() -> None:
    """As root, runs are uid 65534: an owner-only file of the project (hypothesis's
    database, a .env) is left out of the run's copy instead of failing the patch."""
    import shutil
    import tempfile
    from pathlib import Path

    from autograd_fix.verification.place import _copy_readable

    tmp_path = Path(tempfile.mkdtemp())  # pytest's own folders are closed to other users
    try:
        _copy_as_nobody(tmp_path, _copy_readable)
    finally:
        shutil.rmtree(tmp_path)


def _copy_as_nobody(tmp_path, copy) -> None:
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "model.py").write_text("x = 1\n")
    (project / ".env").write_text("TOKEN=secret\n")
    (project / ".env").chmod(0o600)
    for folder in (tmp_path, project, project / "pkg"):
        folder.chmod(0o755)
    target = tmp_path / "side"
    target.mkdir(mode=0o777)
    target.chmod(0o777)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setuid(65534)
            copy(str(project), str(target / "copy"))
            code = 0 if sorted(os.listdir(target / "copy")) == ["pkg"] else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
