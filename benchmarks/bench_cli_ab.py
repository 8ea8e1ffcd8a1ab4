"""CPU time of the whole CLI, the code under test against an earlier copy, side by side.

For speed work on a shared machine (issue 18, "Speed"): `bench_speed.py`'s autograd-fix
command (`--no-verify --jobs 1 --format json`, a bytecode cache, an empty result cache
per run) over every `.py` file of a tree, once per variant per round, alternating which
goes first; each variant's start-up (one `import torch` file) is timed beside it, and
libcst's stock parse of the same files in this process, so that every round prints the
ratio `bench_speed.py` reports (CLI / parse) for both variants, by CPU time (user +
system of the child), which a loaded machine disturbs far less than wall time.

Each variant is a folder holding an `autograd_fix` package (`namespace/`'s files with
`codemods/`, `cli/` and `verification/` beside them, e.g. from `git archive`), put first
on `PYTHONPATH`, so that both start the same way; without `--current`, the installed
code is the current variant. Compare the findings too (`compare_findings.py`).

    python benchmarks/bench_cli_ab.py --base /tmp/base [--current /tmp/current] ROOT [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import libcst as cst
from bench_speed import AUTOGRAD_FIX, environment, parsable_files


def parse_cpu(texts: list[str]) -> float:
    """CPU seconds of libcst's stock parse of every text."""
    start = time.process_time()
    for text in texts:
        cst.parse_module(text)
    return time.process_time() - start


def cli_cpu(files: list[str], env: dict[str, str]) -> float:
    """CPU seconds (user + system) of one CLI run over `files`, empty result cache."""
    with tempfile.TemporaryDirectory() as cache:
        before = os.times()
        completed = subprocess.run([*AUTOGRAD_FIX, *files], env={**env, "AUTOGRAD_FIX_CACHE_DIR": cache}, capture_output=True, text=True)
        after = os.times()
    if completed.returncode not in (0, 1):
        raise SystemExit(f"the CLI failed ({completed.returncode}): {completed.stderr[-2000:]}")
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=Path)
    parser.add_argument("--base", type=Path, required=True, help="folder holding the earlier code's autograd_fix package")
    parser.add_argument("--current", type=Path, help="folder holding the code under test (default: the installed code)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    files = [str(path) for path in parsable_files(args.root)[0]]
    texts = [Path(path).read_text(encoding="utf-8") for path in files]
    with tempfile.TemporaryDirectory() as scratch:
        empty = Path(scratch) / "empty.py"
        empty.write_text("import torch\n")
        envs: dict[str, dict[str, str]] = {}
        for name, folder in (("base", args.base), ("current", args.current)):
            env = environment(str(Path(scratch) / f"bytecode-{name}"))
            if folder is not None:
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))
            envs[name] = env
            cli_cpu([str(empty)], env)  # fills this variant's bytecode cache (not counted)
        for round_number in range(1, args.rounds + 1):
            order = ["base", "current"] if round_number % 2 else ["current", "base"]
            parse = parse_cpu(texts)
            cpu = {name: (cli_cpu(files, envs[name]), cli_cpu([str(empty)], envs[name])) for name in order}
            shown = " | ".join(f"{name} {cpu[name][0]:.2f} (start-up {cpu[name][1]:.2f}) {cpu[name][0] / parse:.2f}x" for name in ("base", "current"))
            sys.stdout.write(
                f"round {round_number} ({order[0]} first), {len(files)} files, CPU s: parse {parse:.2f} | {shown}"
                f" | current/base {cpu['current'][0] / cpu['base'][0]:.3f}\n"
            )
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
