"""Speed of the static pass against libcst's own parse and against TorchFix, on one tree.

Issue 8 ("Speed") asks, on the same files, one job each, in one run:
- (a) libcst's parse of every file (in this process, no start-up);
- (b) `autograd-fix --no-verify --jobs 1` over those files (its CLI, start-up included);
- (c) TorchFix (`python -m torchfix --jobs 1 --select ALL`) over those files.
Both CLIs are also timed on one empty file, so that their start-up can be told apart
from their per-file cost. Runs are sequential and share one machine, so the ratios
within one run are what count, not the seconds.

TorchFix must be importable by this interpreter (`pip install --no-deps torchfix` plus
PyYAML; flake8 is only needed for its flake8 plugin, not here).

    python benchmarks/bench_speed.py ROOT [ROOT...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

import libcst as cst
from recall_search import SKIP_DIRS  # the same folders left out as in the recall search


def parsable_files(root: Path) -> tuple[list[Path], int]:
    """`.py` files under root that libcst parses (both tools skip the others), and how
    many were dropped."""
    kept, dropped = [], 0
    for path in sorted(root.rglob("*.py")):
        if SKIP_DIRS.intersection(path.relative_to(root).parts) or not path.is_file():
            continue
        try:
            cst.parse_module(path.read_text(encoding="utf-8"))
        except (cst.ParserSyntaxError, UnicodeDecodeError, RecursionError):
            dropped += 1
            continue
        kept.append(path)
    return kept, dropped


def time_parse(files: list[Path]) -> float:
    """(a): libcst parse of every file, texts read beforehand."""
    texts = [path.read_text(encoding="utf-8") for path in files]
    start = time.perf_counter()
    for text in texts:
        cst.parse_module(text)
    return time.perf_counter() - start


def time_command(command: tuple[str, ...], files: list[Path]) -> float:
    """Wall time of one CLI run over `files` (findings are expected: any exit status
    that is not a crash is accepted)."""
    start = time.perf_counter()
    completed = subprocess.run([*command, *map(str, files)], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if completed.returncode not in (0, 1, 2):
        raise SystemExit(f"{command[:3]} failed ({completed.returncode}): {completed.stderr[-2000:]}")
    return elapsed


AUTOGRAD_FIX = (sys.executable, "-m", "autograd_fix", "--no-verify", "--jobs", "1", "--format", "json")
TORCHFIX = (sys.executable, "-m", "torchfix", "--jobs", "1", "--select", "ALL")


def measure(root: Path) -> dict[str, float]:
    files, dropped = parsable_files(root)
    lines = sum(path.read_text(encoding="utf-8").count("\n") for path in files)
    with tempfile.TemporaryDirectory() as scratch:
        empty = Path(scratch) / "empty.py"
        empty.write_text("import torch\n")
        startup_agf = time_command(AUTOGRAD_FIX, [empty])
        startup_tf = time_command(TORCHFIX, [empty])
    results = {
        "files": len(files), "dropped": dropped, "lines": lines,
        "parse": time_parse(files),
        "autograd-fix": time_command(AUTOGRAD_FIX, files),
        "TorchFix": time_command(TORCHFIX, files),
        "autograd-fix start-up": startup_agf,
        "TorchFix start-up": startup_tf,
    }
    return results


def report(root: Path, r: dict[str, float]) -> str:
    agf_work = r["autograd-fix"] - r["autograd-fix start-up"]
    tf_work = r["TorchFix"] - r["TorchFix start-up"]
    return "\n".join([
        f"{root}: {r['files']} files ({r['dropped']} unparsable left out), {r['lines']} lines",
        f"  (a) libcst parse            {r['parse']:8.2f} s",
        f"  (b) autograd-fix --no-verify {r['autograd-fix']:7.2f} s  (start-up {r['autograd-fix start-up']:.2f} s)",
        f"  (c) TorchFix                {r['TorchFix']:8.2f} s  (start-up {r['TorchFix start-up']:.2f} s)",
        f"  static / parse: {r['autograd-fix'] / r['parse']:.2f}x  (less start-up: {agf_work / r['parse']:.2f}x)",
        f"  autograd-fix throughput / TorchFix's: {r['TorchFix'] / r['autograd-fix']:.2f}x"
        f"  (less start-up: {tf_work / agf_work:.2f}x)",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="+", type=Path)
    args = parser.parse_args(argv)
    sys.stdout.write(f"python {sys.version.split()[0]}, libcst {metadata.version('libcst')}, torchfix {metadata.version('torchfix')}\n")
    for root in args.roots:
        sys.stdout.write(report(root, measure(root)) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
