"""Do autograd-fix's fixes pass the linters users already run? Counts with the real Ruff.

For every file the project knows a fix for (the bug corpus's `buggy.py`, the example
scripts, every rule's INVALID examples with a fix), the fix is computed as
`--unsafe-fixes --no-verify` computes it, and Ruff (`--isolated`: its defaults, no
project configuration) reads the input and the output:

- `ruff check --select F401`: of the inputs with no unused import, how many outputs
  have none; and how many imports the fixes left unused over all files;
- `ruff format --check`: of the inputs already formatted, how many outputs are; and
  the same with every input formatted first (`ruff format`), so that every fixed file
  counts, not only the few that were formatted to begin with.

    python benchmarks/linter_stability.py [--ruff PATH] [--list]

Needs Ruff (`pip install ruff`); exit 1 when an output is worse than its input.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Source:
    """One file to fix: its name in the report, its text and the rules that run on it."""

    name: str
    text: str
    rules: tuple


def sources() -> list[Source]:
    from autograd_fix.codemods.registry import all_rules

    rules = all_rules()
    paths = [*sorted((REPO / "tests" / "corpus").glob("*/buggy.py")), *sorted((REPO / "examples").glob("*.py"))]
    found = [Source(str(path.relative_to(REPO)), path.read_text(encoding="utf-8"), rules) for path in paths]
    for rule in rules:
        for number, example in enumerate(rule.examples().invalid, start=1):
            if example.expected is not None:
                found.append(Source(f"{rule.code}-invalid-{number}", textwrap.dedent(example.source).lstrip("\n"), (rule,)))
    return found


def fixed_text(text: str, rules: tuple) -> str | None:
    from autograd_fix.codemods.engine import FixOptions, check_source

    result = check_source(text, rules, options=FixOptions(unsafe_fixes=True))
    return result.fixed if result.fixed not in (None, text) else None


def unused_imports(ruff: str, folder: Path) -> dict[str, set[str]]:
    """F401 per file of `folder`: the unused names Ruff reports."""
    done = subprocess.run(
        [ruff, "check", "--isolated", "--select", "F401", "--output-format", "json", "--exit-zero", str(folder)],
        capture_output=True, text=True, check=True,
    )
    found: dict[str, set[str]] = {}
    for item in json.loads(done.stdout):
        name = item["message"].split("`")[1] if "`" in item["message"] else item["message"]
        found.setdefault(Path(item["filename"]).name, set()).add(name)
    return found


def unformatted(ruff: str, folder: Path) -> set[str]:
    """Files of `folder` that `ruff format --check` would reformat (JSON output since
    Ruff 0.9 or so; the older "Would reformat: PATH" lines otherwise)."""
    done = subprocess.run([ruff, "format", "--isolated", "--check", "--output-format", "json", str(folder)], capture_output=True, text=True)
    try:
        return {Path(item["filename"]).name for item in json.loads(done.stdout or "[]")}
    except json.JSONDecodeError:
        done = subprocess.run([ruff, "format", "--isolated", "--check", str(folder)], capture_output=True, text=True)
        marker = "Would reformat: "
        return {Path(line.split(marker, 1)[1].strip()).name for line in done.stdout.splitlines() if line.startswith(marker)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ruff", default=shutil.which("ruff"), help="the ruff executable (default: on PATH)")
    parser.add_argument("--list", action="store_true", help="name every file whose output is worse")
    args = parser.parse_args(argv)
    if not args.ruff:
        print("ruff not found: pip install ruff, or pass --ruff PATH", file=sys.stderr)
        return 2
    version = subprocess.run([args.ruff, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="agf-lint-") as scratch:
        before, after, formatted_before, formatted_after = (Path(scratch) / part for part in ("in", "out", "fmt-in", "fmt-out"))
        for folder in (before, after, formatted_before, formatted_after):
            folder.mkdir()
        pairs: dict[str, str] = {}
        for number, source in enumerate(sources()):
            output = fixed_text(source.text, source.rules)
            if output is None:
                continue
            file_name = f"f{number:04d}.py"
            pairs[file_name] = source.name
            (before / file_name).write_text(source.text, encoding="utf-8")
            (after / file_name).write_text(output, encoding="utf-8")
            (formatted_before / file_name).write_text(source.text, encoding="utf-8")
        subprocess.run([args.ruff, "format", "--isolated", "--quiet", str(formatted_before)], check=False)
        formatted_fixed = 0
        for file_name in pairs:
            output = fixed_text((formatted_before / file_name).read_text(encoding="utf-8"), _rules_of(pairs[file_name]))
            if output is not None:
                (formatted_after / file_name).write_text(output, encoding="utf-8")
                formatted_fixed += 1
        f401_in, f401_out = unused_imports(args.ruff, before), unused_imports(args.ruff, after)
        fmt_in, fmt_out = unformatted(args.ruff, before), unformatted(args.ruff, after)
        fmt_fixed_out = unformatted(args.ruff, formatted_after)
        formatted_inputs_dirty = unformatted(args.ruff, formatted_before)

    clean_in = [name for name in pairs if name not in f401_in]
    worse_f401 = sorted(pairs[name] for name in pairs if f401_out.get(name, set()) - f401_in.get(name, set()))
    left_unused = sum(len(f401_out.get(name, set()) - f401_in.get(name, set())) for name in pairs)
    formatted_in = [name for name in pairs if name not in fmt_in]
    worse_format = sorted(pairs[name] for name in formatted_in if name in fmt_out)
    worse_formatted = sorted(pairs[name] for name in formatted_after_names(pairs, fmt_fixed_out, formatted_inputs_dirty))
    print(f"{version}; {len(pairs)} files with a fix (unsafe fixes included)")
    print(f"F401:   inputs clean {len(clean_in)}, their outputs clean {len(clean_in) - len([n for n in clean_in if n in f401_out])}; "
          f"imports a fix left unused, all files: {left_unused}")
    print(f"format: inputs formatted {len(formatted_in)}, their outputs formatted {len(formatted_in) - len(worse_format)}")
    print(f"format, every input formatted first: {formatted_fixed} fixed, {formatted_fixed - len(worse_formatted)} outputs formatted")
    worse = sorted(set(worse_f401) | set(worse_format) | set(worse_formatted))
    if args.list:
        for name in worse:
            print(f"  worse: {name}")
    return 1 if worse else 0


def _rules_of(name: str) -> tuple:
    from autograd_fix.codemods.registry import all_rules, rule_by_code

    code = name.split("-", 1)[0]
    return (rule_by_code(code),) if code.startswith("AGF") and "-invalid-" in name else all_rules()


def formatted_after_names(pairs: dict[str, str], dirty_after: set[str], dirty_before: set[str]) -> list[str]:
    """Files whose formatted input `ruff format` accepts but whose fixed output it would change."""
    return [name for name in pairs if name in dirty_after and name not in dirty_before]


if __name__ == "__main__":
    raise SystemExit(main())
