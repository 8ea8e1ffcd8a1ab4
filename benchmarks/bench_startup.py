"""Start-up of the command line, against the interpreter's own, in one run.

Issue 20 asks for `--version` within 0.2 s and a one-line file within 0.3 s, as ratios
against `python -c pass` measured in the same run (the machines are noisy: seconds
from different runs do not compare). Rounds alternate the commands so that a burst of
load hits them alike; the medians and their ratios to `python -c pass` are printed.

The one-line file is timed cold (`--no-cache`: libcst and the rules load) and warm
(answered by the result cache). With `--corpus DIR` (a real tree, such as timm's 315
files), a cold run (empty cache) and a warm re-run over it are timed too, alternating,
and the warm run's share of the cold one is printed (issue 20: at most 10%).

    python benchmarks/bench_startup.py [--rounds N] [--corpus DIR [--corpus-rounds N]]
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
    parser.add_argument("--corpus", type=Path, help="a tree of Python files for the cold / warm comparison")
    parser.add_argument("--corpus-rounds", type=int, default=3)
    args = parser.parse_args()
    tool = shutil.which("autograd-fix") or sys.exit("autograd-fix is not on PATH")
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        (cwd / "one.py").write_text("import torch\n")
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "autograd-fix --version": [tool, "--version"],
            # `--version` through the typer application (what it cost before the entry
            # point answered it; since the lazy imports, typer and the settings only)
            "cli.app --version (typer)": [sys.executable, "-c", "from autograd_fix.cli.app import main; main(['--version'])"],
            "autograd-fix --help": [tool, "--help"],
            "autograd-fix one.py (one line, --no-cache)": [tool, "--no-verify", "--no-cache", "one.py"],
            "autograd-fix one.py (one line, cached)": [tool, "--no-verify", "one.py"],
        }
        subprocess.run([tool, "--no-verify", "one.py"], cwd=cwd, capture_output=True, check=False)  # fill the cache
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, command in commands.items():
                times[name].append(timed(command, cwd))
    base = statistics.median(times["python -c pass"])
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"{name:42s} median {median:6.3f} s  {median / base:5.1f}x python -c pass")
    if args.corpus is not None:
        corpus_runs(tool, args.corpus.resolve(), args.corpus_rounds)
    return 0


def corpus_runs(tool: str, corpus: Path, rounds: int) -> None:
    """Cold (an empty cache folder) and warm (the same folder again) runs over `corpus`,
    alternating, one job each so that the pool's start-up does not blur the comparison."""
    files = sum(1 for _ in corpus.rglob("*.py"))
    cold: list[float] = []
    warm: list[float] = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as cache:
            command = [tool, "--no-verify", "--jobs", "1", "--exit-zero", "--cache-dir", cache, "."]
            cold.append(timed(command, corpus))
            warm.append(timed(command, corpus))
    cold_median, warm_median = statistics.median(cold), statistics.median(warm)
    print(f"{corpus.name}: {files} files, {rounds} rounds")
    print(f"  cold (empty cache)  median {cold_median:7.2f} s")
    print(f"  warm (re-run)       median {warm_median:7.2f} s  {warm_median / cold_median:6.1%} of cold")


if __name__ == "__main__":
    sys.exit(main())
