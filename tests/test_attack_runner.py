"""The attack runner (benchmarks/attacks) keeps working: two of its quick attacks, run
through the runner itself, say HELD and leave exit status 0 (the whole list is slow:
it is a benchmark)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autograd_fix.verification.namespaces import check

RUNNER = Path(__file__).resolve().parents[1] / "benchmarks" / "attacks" / "run_attacks.py"


@pytest.mark.skipif(check() is not None, reason="no namespaces here")
@pytest.mark.torch
def test_the_runner_reports_held_for_the_sockets_and_kernel_settings_attacks(tmp_path):
    done = subprocess.run(
        [sys.executable, str(RUNNER), "--only", "unix_socket_in_tmp", "--only", "kernel_settings_and_kmsg"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith(("HELD", "ESCAPED", "LIMIT"))]
    assert len(lines) == 2 and all(line.startswith("HELD") for line in lines), done.stdout
    assert "2 held, 0 escaped" in done.stdout
