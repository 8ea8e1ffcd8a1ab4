"""Speed of the static pass against libcst's own parse and against TorchFix, on one tree.

Issue 8 ("Speed") asks, on the same files, one job each, in one run:
- (a) libcst's parse of every file (in this process, no start-up);
- (b) `autograd-fix --no-verify --jobs 1` over those files (its CLI, start-up included);
- (c) TorchFix (`python -m torchfix --jobs 1 --select ALL`) over those files.
Both CLIs are also timed on one empty file, so that their start-up can be told apart
from their per-file cost. Runs are sequential and share one machine, so the ratios
within one run are what count, not the seconds; each CLI's CPU time (user + system, from
the children's resource usage) is printed beside its wall time, since on a shared
machine the wall time mostly measures the others' load.

Both CLIs run as installed tools do: with a bytecode cache (`PYTHONPYCACHEPREFIX`, one
temporary folder for both, filled by an uncounted first run of each) and without
`PYTHONDONTWRITEBYTECODE`. Where that variable is set (some sandboxes), each start would
recompile every module of both tools from source, which an installed wheel never does
(`--uncompiled` measures that case). autograd-fix's result cache gets an empty folder of
its own for every timed run (`AUTOGRAD_FIX_CACHE_DIR`): a first, cold run, its writes
included; a re-run of the same code would otherwise be answered from the cache.

TorchFix must be importable by this interpreter (`pip install --no-deps torchfix` plus
PyYAML; flake8 is only needed for its flake8 plugin, not here).

    python benchmarks/bench_speed.py ROOT [ROOT...] [--rounds N]

With `--rounds N`, (a), (b) and (c) run N times in turn (a, b, c, a, b, c, ...): each
round's ratios compare runs made within the same minute or so, and the report gives
every round's ratios and their median. A shared or throttled machine changes speed from
one minute to the next (the same run of one tool varies by a third here), which a single
round takes for a difference between the tools.
"""

from __future__ import annotations

import argparse
import os
import resource
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


def time_command(command: tuple[str, ...], files: list[Path], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one CLI run over `files`, with an empty result-cache folder
    (findings are expected: any exit status that is not a crash is accepted)."""
    with tempfile.TemporaryDirectory() as cache:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        completed = subprocess.run(
            [*command, *map(str, files)], capture_output=True, text=True, env={**env, "AUTOGRAD_FIX_CACHE_DIR": cache}
        )
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if completed.returncode not in (0, 1, 2):
        raise SystemExit(f"{command[:3]} failed ({completed.returncode}): {completed.stderr[-2000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def environment(bytecode: str | None) -> dict[str, str]:
    """Both CLIs' environment: a bytecode cache in `bytecode`, or (None) no bytecode
    written or read, so that every start compiles the tools' modules from source."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    if bytecode is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = bytecode
    return env


AUTOGRAD_FIX = (sys.executable, "-m", "autograd_fix", "--no-verify", "--jobs", "1", "--format", "json")
TORCHFIX = (sys.executable, "-m", "torchfix", "--jobs", "1", "--select", "ALL")


def measure(root: Path, env: dict[str, str]) -> dict[str, float]:
    """Wall and CPU seconds of (a), (b), (c) and of both start-ups (`<name> CPU`)."""
    files, dropped = parsable_files(root)
    lines = sum(path.read_text(encoding="utf-8").count("\n") for path in files)
    results: dict[str, float] = {"files": len(files), "dropped": dropped, "lines": lines}
    with tempfile.TemporaryDirectory() as scratch:
        empty = Path(scratch) / "empty.py"
        empty.write_text("import torch\n")
        for command in (AUTOGRAD_FIX, TORCHFIX):  # fills the bytecode cache (not counted)
            time_command(command, [empty], env)
        timed = {"autograd-fix start-up": (AUTOGRAD_FIX, [empty]), "TorchFix start-up": (TORCHFIX, [empty])}
        for name, (command, run_files) in timed.items():
            results[name], results[f"{name} CPU"] = time_command(command, run_files, env)
    start = time.process_time()
    results["parse"] = time_parse(files)
    results["parse CPU"] = time.process_time() - start
    for name, command in (("autograd-fix", AUTOGRAD_FIX), ("TorchFix", TORCHFIX)):
        results[name], results[f"{name} CPU"] = time_command(command, files, env)
    return results


def measure_rounds(root: Path, env: dict[str, str], rounds: int) -> list[dict[str, float]]:
    """`measure` `rounds` times in turn (start-ups included each time)."""
    return [measure(root, env) for _ in range(rounds)]


def ratios(r: dict[str, float], suffix: str = "") -> tuple[float, float]:
    """(static / parse, TorchFix's time / autograd-fix's) of one round."""
    return r[f"autograd-fix{suffix}"] / r[f"parse{suffix}"], r[f"TorchFix{suffix}"] / r[f"autograd-fix{suffix}"]


def summary(results: list[dict[str, float]]) -> str:
    """Each round's wall-time ratios, then their medians."""
    lines = []
    for number, r in enumerate(results, 1):
        parse_ratio, torchfix_ratio = ratios(r)
        lines.append(f"  round {number}: parse {r['parse']:.2f} s, autograd-fix {r['autograd-fix']:.2f} s, TorchFix "
                     f"{r['TorchFix']:.2f} s: static / parse {parse_ratio:.2f}x, throughput / TorchFix's {torchfix_ratio:.2f}x")
    parse_ratios = sorted(ratios(r)[0] for r in results)
    torchfix_ratios = sorted(ratios(r)[1] for r in results)
    middle = len(results) // 2
    median = (lambda values: values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2)
    lines.append(f"  median of {len(results)} rounds: static / parse {median(parse_ratios):.2f}x,"
                 f" throughput / TorchFix's {median(torchfix_ratios):.2f}x")
    return "\n".join(lines)


def report(root: Path, r: dict[str, float]) -> str:
    lines = [
        f"{root}: {r['files']} files ({r['dropped']} unparsable left out), {r['lines']} lines",
        f"  (a) libcst parse            {r['parse']:8.2f} s  (CPU {r['parse CPU']:.2f} s)",
        f"  (b) autograd-fix --no-verify {r['autograd-fix']:7.2f} s  (start-up {r['autograd-fix start-up']:.2f} s;"
        f" CPU {r['autograd-fix CPU']:.2f} s, start-up {r['autograd-fix start-up CPU']:.2f} s)",
        f"  (c) TorchFix                {r['TorchFix']:8.2f} s  (start-up {r['TorchFix start-up']:.2f} s;"
        f" CPU {r['TorchFix CPU']:.2f} s, start-up {r['TorchFix start-up CPU']:.2f} s)",
    ]
    for label, suffix in (("wall", ""), ("CPU ", " CPU")):
        agf, tf, parse = r[f"autograd-fix{suffix}"], r[f"TorchFix{suffix}"], r[f"parse{suffix}"]
        agf_work, tf_work = agf - r[f"autograd-fix start-up{suffix}"], tf - r[f"TorchFix start-up{suffix}"]
        lines.append(
            f"  {label}: static / parse {agf / parse:.2f}x (less start-up: {agf_work / parse:.2f}x);"
            f" throughput / TorchFix's {tf / agf:.2f}x (less start-up: {tf_work / agf_work:.2f}x)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="+", type=Path)
    parser.add_argument("--uncompiled", action="store_true", help="no bytecode cache: both CLIs compile their modules on every start")
    parser.add_argument("--rounds", type=int, default=1, help="run (a), (b), (c) this many times in turn; report the median ratios")
    args = parser.parse_args(argv)
    sys.stdout.write(f"python {sys.version.split()[0]}, libcst {metadata.version('libcst')}, torchfix {metadata.version('torchfix')}"
                     f", {'no bytecode cache' if args.uncompiled else 'bytecode cache'}\n")
    with tempfile.TemporaryDirectory() as bytecode:
        env = environment(None if args.uncompiled else bytecode)
        for root in args.roots:
            results = measure_rounds(root, env, max(1, args.rounds))
            sys.stdout.write(report(root, results[0]) + "\n")
            if len(results) > 1:
                sys.stdout.write(summary(results) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
