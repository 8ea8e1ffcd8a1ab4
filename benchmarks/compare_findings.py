"""Before/after check for speed work: the findings must not change (issue 18, "Speed").

Runs `autograd-fix --no-verify --no-cache --isolated --jobs 1 --format json` over the
same `.py` files twice, once with the code under test and once with a copy of the
earlier code put first on `PYTHONPATH` (a folder holding an `autograd_fix` package:
`namespace/`'s files with `codemods/`, `cli/` and `verification/` beside them, e.g. from
`git archive`), and compares the two JSON outputs byte for byte (every field: positions,
messages, fix diffs, edits, rounds). With `--unsafe-fixes` the fix rounds run too, so
follow-on findings and `fix_applies` are compared as well.

    python benchmarks/compare_findings.py --base /tmp/base ROOT [ROOT...] [--unsafe-fixes]

Exit status 0 when every root's output is identical, 1 otherwise (the first differing
finding of each root is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from bench_speed import parsable_files

COMMAND = (sys.executable, "-m", "autograd_fix", "--no-verify", "--no-cache", "--isolated", "--jobs", "1", "--format", "json")


def run(files: list[Path], base: Path | None, unsafe: bool) -> str:
    """The CLI's JSON over `files`, with `base` first on PYTHONPATH when given."""
    env = dict(os.environ)
    if base is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(base), env.get("PYTHONPATH")]))
    command = [*COMMAND, *(["--unsafe-fixes"] if unsafe else []), *map(str, files)]
    completed = subprocess.run(command, capture_output=True, text=True, env=env)
    if completed.returncode not in (0, 1):
        raise SystemExit(f"{'base' if base else 'current'} failed ({completed.returncode}): {completed.stderr[-2000:]}")
    return completed.stdout


def first_difference(before: str, after: str) -> str:
    """The first finding (or summary) that differs, both versions."""
    old, new = json.loads(before), json.loads(after)
    for index, (a, b) in enumerate(zip(old["findings"], new["findings"])):
        if a != b:
            return f"finding {index}:\n  before {json.dumps(a)[:1500]}\n  after  {json.dumps(b)[:1500]}"
    if len(old["findings"]) != len(new["findings"]):
        return f"{len(old['findings'])} findings before, {len(new['findings'])} after"
    return f"summary: before {old['summary']} after {new['summary']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="+", type=Path)
    parser.add_argument("--base", type=Path, required=True, help="folder holding the earlier code's autograd_fix package")
    parser.add_argument("--unsafe-fixes", action="store_true")
    args = parser.parse_args(argv)
    same = True
    for root in args.roots:
        files, _ = parsable_files(root)
        before = run(files, args.base, args.unsafe_fixes)
        after = run(files, None, args.unsafe_fixes)
        count = len(json.loads(after)["findings"])
        if before == after:
            sys.stdout.write(f"{root}: {len(files)} files, {count} findings, identical ({len(after):,} bytes)\n")
        else:
            same = False
            sys.stdout.write(f"{root}: {len(files)} files: DIFFERENT\n{first_difference(before, after)}\n")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
