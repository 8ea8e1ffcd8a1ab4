"""TorchFix's own fixtures for its gradient rules, run through autograd-fix.

TorchFix (pytorch-labs/torchfix) is the nearest peer. Its test fixtures for the rules
that concern gradients (TOR002 `require_grad` typo, TOR003 checkpoint without
`use_reentrant`, TOR101 deprecated AMP spellings, TOR402 `zero_grad(set_to_none=False)`,
TOR106-108 `log1p` / `expm1` / `logsumexp`) are read from a fetched checkout, never
copied into this repository. Each fixture is one position:

- a checker fixture (`X.py` + `X.txt`) holds when autograd-fix flags exactly the lines
  TorchFix lists (no more, no fewer) with the mapped rule;
- a codemod fixture (`X.in.py` + `X.out.py`) holds when autograd-fix's fixed program
  (unsafe fixes applied) equals TorchFix's expected output, compared as syntax trees.

    python benchmarks/peer_torchfix.py [--torchfix PATH] [--write benchmarks/PEER_TORCHFIX.md]

PATH is a TorchFix work tree or a bare git directory (the `fetch` tool's mirror,
`/work/.mirror/pytorch-labs+torchfix/repo`, is the default); the tally is printed.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.registry import rule_by_code

DEFAULT_CHECKOUT = Path("/work/.mirror/pytorch-labs+torchfix/repo")

#: TorchFix code -> the autograd-fix rule that covers it
CODE_MAP = {
    "TOR002": "AGF013",
    "TOR003": "AGF014",
    "TOR101": "AGF012",
    "TOR402": "AGF015",
    "TOR106": "AGF016",
    "TOR107": "AGF016",
    "TOR108": "AGF016",
}


@dataclass(frozen=True)
class Fixture:
    """One position: a checker fixture (`expected_lines` from X.txt) or a codemod one."""

    name: str
    kind: str  # "checker" | "codemod"
    source: str
    rules: tuple[str, ...]
    expected_lines: frozenset[int] = frozenset()
    expected_program: str = ""


#: the fixtures, relative to `tests/fixtures/`, with the TorchFix codes they concern
CHECKERS = {
    "misc/checker/require_grad": ("TOR002",),
    "misc/checker/reentrant_checkpoint": ("TOR003",),
    "deprecated_symbols/checker/amp": ("TOR101",),
    "performance/checker/zerograd": ("TOR402",),
    "misc/checker/log1p": ("TOR106",),
    "misc/checker/expm1": ("TOR107",),
    "misc/checker/logsumexp": ("TOR108",),
}
CODEMODS = {
    "misc/codemod/require_grad": ("TOR002",),
    "misc/codemod/reentrant_checkpoint": ("TOR003",),
    "deprecated_symbols/codemod/amp": ("TOR101",),
}


class Checkout:
    """Reads files of a TorchFix work tree or bare git directory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bare = not (path / "tests").is_dir()

    def read(self, relative: str) -> str:
        if not self.bare:
            return (self.path / relative).read_text()
        return subprocess.run(
            ["git", "--git-dir", str(self.path), "show", f"HEAD:{relative}"], capture_output=True, text=True, check=True
        ).stdout


def load_fixtures(checkout: Checkout) -> list[Fixture]:
    fixtures = []
    for stem, codes in CHECKERS.items():
        base = f"tests/fixtures/{stem}"
        listed = checkout.read(f"{base}.txt")
        lines = frozenset(int(m.group(1)) for m in re.finditer(r"^(\d+):\d+ TOR\d+", listed, re.M))
        rules = tuple(sorted({CODE_MAP[c] for c in codes}))
        fixtures.append(Fixture(stem, "checker", checkout.read(f"{base}.py"), rules, expected_lines=lines))
    for stem, codes in CODEMODS.items():
        base = f"tests/fixtures/{stem}"
        rules = tuple(sorted({CODE_MAP[c] for c in codes}))
        fixtures.append(
            Fixture(stem, "codemod", checkout.read(f"{base}.in.py"), rules, expected_program=checkout.read(f"{base}.out.py"))
        )
    return fixtures


@dataclass(frozen=True)
class Outcome:
    fixture: Fixture
    held: bool
    detail: str


def run_fixture(fixture: Fixture) -> Outcome:
    rules = [rule_by_code(code) for code in fixture.rules]
    assert all(rules), fixture.rules
    result = check_source(fixture.source, rules, path=f"{fixture.name}.py", options=FixOptions(unsafe_fixes=True))  # type: ignore[arg-type]
    if fixture.kind == "checker":
        flagged = frozenset(f.span.line for f in result.findings)
        extra, missed = sorted(flagged - fixture.expected_lines), sorted(fixture.expected_lines - flagged)
        held = not extra and not missed
        return Outcome(fixture, held, "same lines" if held else f"extra lines {extra}, missed lines {missed}")
    fixed = result.fixed if result.fixed is not None else fixture.source
    held = ast.dump(ast.parse(fixed)) == ast.dump(ast.parse(fixture.expected_program))
    return Outcome(fixture, held, "same program" if held else f"fixed program differs:\n{fixed}")


def report(outcomes: list[Outcome]) -> str:
    held = sum(o.held for o in outcomes)
    lines = [
        "# TorchFix's gradient fixtures through autograd-fix",
        "",
        "Generated by `python benchmarks/peer_torchfix.py --write benchmarks/PEER_TORCHFIX.md` from a fetched",
        "checkout of pytorch-labs/torchfix (its fixtures are not copied here).",
        "",
        f"**{held} of {len(outcomes)} positions hold.**",
        "",
        "| fixture | kind | rules | result |",
        "| --- | --- | --- | --- |",
    ]
    for o in outcomes:
        verdict = "holds" if o.held else "FAILS: " + o.detail.splitlines()[0]
        lines.append(f"| `{o.fixture.name}` | {o.fixture.kind} | {', '.join(o.fixture.rules)} | {verdict} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torchfix", type=Path, default=DEFAULT_CHECKOUT, help="TorchFix work tree or bare git dir")
    parser.add_argument("--write", type=Path, help="write the tally as markdown here")
    args = parser.parse_args(argv)
    if not args.torchfix.exists():
        sys.stderr.write(f"no TorchFix checkout at {args.torchfix}: fetch pytorch-labs/torchfix first\n")
        return 2
    outcomes = [run_fixture(f) for f in load_fixtures(Checkout(args.torchfix))]
    for o in outcomes:
        sys.stdout.write(f"{'ok  ' if o.held else 'FAIL'} {o.fixture.name}: {o.detail}\n")
    text = report(outcomes)
    sys.stdout.write(text.splitlines()[5] + "\n")
    if args.write:
        args.write.write_text(text)
    return 0 if all(o.held for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
