"""Start-up of the command line, against the interpreter's own, in one run.

Issue 20 asks for `--version` within 0.2 s and a one-line file within 0.3 s, as ratios
against `python -c pass` measured in the same run (the machines are noisy: seconds
from different runs do not compare). Rounds alternate the commands so that a burst of
load hits them alike; the medians and their ratios to `python -c pass` are printed.

    python benchmarks/bench_startup.py [--rounds N]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, capture_output=True, check=False)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    tool = shutil.which("autograd-fix") or sys.exit("autograd-fix is not on PATH")
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        (cwd / "one.py").write_text("import torch\n")
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "autograd-fix --version": [tool, "--version"],
            # what `--version` cost before the entry point answered it itself
            "cli.app --version (full import)": [sys.executable, "-c", "from autograd_fix.cli.app import main; main(['--version'])"],
            "autograd-fix one.py (one line)": [tool, "--no-verify", "one.py"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, command in commands.items():
                times[name].append(timed(command, cwd))
    base = statistics.median(times["python -c pass"])
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"{name:34s} median {median:6.3f} s  {median / base:5.1f}x python -c pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
