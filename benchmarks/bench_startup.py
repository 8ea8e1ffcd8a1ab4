"""Start-up of the command line, against the interpreter's own, in one run.

Issue 20 asks for `--version` within 0.2 s and a one-line file within 0.3 s, as ratios
against `python -c pass` measured in the same run (the machines are noisy: seconds
from different runs do not compare). Rounds alternate the commands so that a burst of
load hits them alike; the medians and their ratios to `python -c pass` are printed.

The one-line file (`import torch`) is timed cold (`--no-cache`: libcst and the rules
load) and warm (answered by the result cache); a one-line file without torch
(`import os`), where no rule can fire, is timed cold too.

Each command's CPU time (user + system, from the children's resource usage) is taken
next to its wall time: on a shared machine the wall time mostly measures the others'
load, the CPU time much less. The commands run with a bytecode cache of their own
(`PYTHONPYCACHEPREFIX`, a temporary folder, filled by a first round that is not
counted) and without `PYTHONDONTWRITEBYTECODE`, as an installed tool runs (a wheel's
modules are compiled at install): where that variable is set (some sandboxes, CI
images), an editable install recompiles its ~100 modules from source on every run,
which costs about a third of a one-line run. One extra row shows that case. With `--corpus DIR` (a real tree, such as timm's 315
files), a cold run (empty cache) and a warm re-run over it are timed too, alternating,
and the warm run's share of the cold one is printed (issue 20: at most 10%). With
`--base DIR` (a folder holding an earlier code's `autograd_fix` package, as for
`compare_findings.py`), the one-line commands are timed with that code first on
`PYTHONPATH` too, in the same rounds and in a folder of their own (their cache entries
are the earlier code's), so before and after compare side by side.

    python benchmarks/bench_startup.py [--rounds N] [--base DIR] [--corpus DIR [--corpus-rounds N]]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    return measured(command, cwd, env)[0]


def measured(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one run of `command`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, capture_output=True, check=False, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _environments(bytecode: str) -> tuple[dict[str, str], dict[str, str]]:
    """(as installed: a bytecode cache of its own; no bytecode written or read)."""
    installed = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    installed["PYTHONPYCACHEPREFIX"] = bytecode
    uncompiled = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    uncompiled["PYTHONDONTWRITEBYTECODE"] = "1"
    return installed, uncompiled


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--corpus", type=Path, help="a tree of Python files for the cold / warm comparison")
    parser.add_argument("--corpus-rounds", type=int, default=3)
    parser.add_argument("--base", type=Path, help="folder holding an earlier code's autograd_fix package")
    args = parser.parse_args()
    tool = shutil.which("autograd-fix") or sys.exit("autograd-fix is not on PATH")
    with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryDirectory() as bytecode:
        cwd, base_cwd = Path(folder) / "branch", Path(folder) / "base"
        for where in (cwd, base_cwd):
            where.mkdir()
            (where / "one.py").write_text("import torch\n")
            (where / "plain.py").write_text("import os\n")  # no torch: no rule can fire
        installed, uncompiled = _environments(bytecode)
        commands: dict[str, tuple[list[str], dict[str, str], Path]] = {
            name: (command, env, cwd) for name, (command, env) in _commands(tool, installed, uncompiled).items()
        }
        if args.base is not None:
            earlier = dict(installed, PYTHONPATH=os.pathsep.join(filter(None, [str(args.base.resolve()), installed.get("PYTHONPATH")])))
            for name in ("autograd-fix one.py (one line, --no-cache)", "autograd-fix one.py (one line, cached)",
                         "autograd-fix plain.py (one line, no torch, --no-cache)"):
                commands[f"base: {name.removeprefix('autograd-fix ')}"] = (commands[name][0], earlier, base_cwd)
        for command, env, where in commands.values():  # fills the cache and the bytecode
            subprocess.run(command, cwd=where, capture_output=True, check=False, env=env)
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, (command, env, where) in commands.items():
                wall, cpu = measured(command, where, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
    base_wall = statistics.median(walls["python -c pass"])
    base_cpu = statistics.median(cpus["python -c pass"])
    print(f"{'command':54s} {'wall':>8s} {'ratio':>7s} {'CPU':>8s} {'ratio':>7s}")
    for name in commands:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(f"{name:54s} {wall:7.3f}s {wall / base_wall:6.1f}x {cpu:7.3f}s {cpu / base_cpu:6.1f}x")
    if args.corpus is not None:
        corpus_runs(tool, args.corpus.resolve(), args.corpus_rounds)
    return 0


def _commands(tool: str, installed: dict[str, str], uncompiled: dict[str, str]) -> dict[str, tuple[list[str], dict[str, str]]]:
    """The timed commands (name -> command, environment), run in the folder of one.py."""
    one_cold = [tool, "--no-verify", "--no-cache", "one.py"]
    return {
        "python -c pass": ([sys.executable, "-c", "pass"], installed),
        "autograd-fix --version": ([tool, "--version"], installed),
        # `--version` through the typer application (what it cost before the entry
        # point answered it; since the lazy imports, typer and the settings only)
        "cli.app --version (typer)": ([sys.executable, "-c", "from autograd_fix.cli.app import main; main(['--version'])"], installed),
        "autograd-fix --help": ([tool, "--help"], installed),
        "autograd-fix one.py (one line, --no-cache)": (one_cold, installed),
        "autograd-fix one.py (one line, cached)": ([tool, "--no-verify", "one.py"], installed),
        # a file without torch: answered before libcst and the rules load
        "autograd-fix plain.py (one line, no torch, --no-cache)": ([tool, "--no-verify", "--no-cache", "plain.py"], installed),
        "one.py --no-cache, PYTHONDONTWRITEBYTECODE=1": (one_cold, uncompiled),
    }


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
