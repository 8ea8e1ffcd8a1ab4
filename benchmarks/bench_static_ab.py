"""CPU time of the per-file pass, the code under test against an earlier copy, side by side.

For speed work on a shared machine (issue 18, "Speed"): wall time swings with the other
jobs, CPU time (`time.process_time`) much less. Each round runs one fresh process per
variant, alternating, over the same `.py` files of a tree (texts read beforehand):

- libcst's own parse of every file;
- `check_source` with the default rule selection over every file, fixes computed (as
  `--no-verify` does), the project index built first (as a run does).

The earlier code is a folder holding an `autograd_fix` package (`namespace/`'s files with
`codemods/`, `cli/` and `verification/` beside them, e.g. from `git archive`), put first on
`PYTHONPATH`. Compare the findings too (`compare_findings.py`): speed that changes a
finding does not count.

    python benchmarks/bench_static_ab.py --base /tmp/base ROOT [--step 2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench_speed import parsable_files


def measure(root: Path, step: int) -> dict[str, float]:
    """One variant, in this process: CPU seconds of the parse and of the static pass."""
    import libcst as cst

    from autograd_fix.codemods.engine import FixOptions, check_source
    from autograd_fix.codemods.project_index import ProjectIndex, project_root
    from autograd_fix.codemods.registry import select_rules

    files = parsable_files(root)[0][::step]
    texts = [(str(path), path.read_text(encoding="utf-8")) for path in files]
    rules = select_rules(None, [])
    start = time.process_time()
    for _, text in texts:
        cst.parse_module(text)
    parse = time.process_time() - start
    start = time.process_time()
    folder = project_root([root])
    indexed = folder is not None and "project" in {field.name for field in dataclasses.fields(FixOptions)}  # (older code: none)
    options = FixOptions(project=ProjectIndex.build(folder)) if indexed else FixOptions()
    for path, text in texts:
        check_source(text, rules, path=path, options=options, compute_fix=True)
    static = time.process_time() - start
    return {"files": len(texts), "parse": parse, "static": static}


def run_variant(root: Path, step: int, base: Path | None) -> dict[str, float]:
    env = dict(os.environ)
    if base is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(base), env.get("PYTHONPATH")]))
    command = [sys.executable, __file__, "--child", "--step", str(step), str(root)]
    completed = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return json.loads(completed.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=Path)
    parser.add_argument("--base", type=Path, help="folder holding the earlier code's autograd_fix package")
    parser.add_argument("--step", type=int, default=1, help="every N-th file only")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        sys.stdout.write(json.dumps(measure(args.root, args.step)))
        return 0
    if args.base is None:
        parser.error("--base is required")
    for round_number in range(1, args.rounds + 1):
        order = [("base", args.base), ("current", None)]
        if round_number % 2 == 0:
            order.reverse()
        results = {name: run_variant(args.root, args.step, base) for name, base in order}
        base, current = results["base"], results["current"]
        sys.stdout.write(
            f"round {round_number} ({order[0][0]} first), {current['files']} files, CPU s: "
            f"base parse {base['parse']:.2f} static {base['static']:.2f} ({base['static'] / base['parse']:.2f}x) | "
            f"current parse {current['parse']:.2f} static {current['static']:.2f} ({current['static'] / current['parse']:.2f}x) | "
            f"current/base static {current['static'] / base['static']:.2f}\n"
        )
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
