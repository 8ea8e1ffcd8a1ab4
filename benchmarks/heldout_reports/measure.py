"""Score the static rules on the held-out bug reports in cases/ (see README.md).

The cases were committed before the tool ever ran on them; this script only reads them.
For each rule it prints, over the bug cases that expect it:

- at line: a finding of the expected code whose span covers the expected line;
- elsewhere: a finding of the expected code, but none covering the expected line;
- missed: no finding of the expected code at all;

and, over the near-misses (correct code that looks like a bug), every finding as a false
finding. Findings of other codes on bug cases are listed too (they are not scored: a bug
case may hold a second, real problem). The static pipeline is the one `--no-verify
--unsafe-fixes` runs, called in-process the way benchmarks/bug_corpus.py does.

    python benchmarks/heldout_reports/measure.py [--cases DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from autograd_fix.compat import tomllib
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

CASES_DIR = Path(__file__).resolve().parent / "cases"
REQUIRED_FIELDS = ("link", "rule", "kind", "line", "source")
KINDS = ("bug", "near-miss")


@dataclass(frozen=True)
class Case:
    """One held-out case as read from its TOML file."""

    name: str
    link: str
    rule: str
    kind: str
    line: int
    source: str
    title: str = ""


@dataclass(frozen=True)
class Hit:
    """One finding, reduced to what the scoring needs."""

    code: str
    line: int
    end_line: int
    message: str


@dataclass
class Outcome:
    """A case's findings and its verdict: at-line / elsewhere / missed (bugs) or clean / false (near-misses)."""

    case: str
    rule: str
    kind: str
    line: int
    link: str
    verdict: str
    hits: list[Hit] = field(default_factory=list)
    error: str | None = None


def load_case(path: Path) -> Case:
    """Read and check one case file; raises ValueError on a malformed one."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    missing = [key for key in REQUIRED_FIELDS if key not in data]
    if missing:
        raise ValueError(f"{path.name}: missing {', '.join(missing)}")
    if data["kind"] not in KINDS:
        raise ValueError(f"{path.name}: kind {data['kind']!r} not in {KINDS}")
    return Case(
        name=path.stem, link=data["link"], rule=data["rule"], kind=data["kind"],
        line=int(data["line"]), source=data["source"], title=data.get("title", ""),
    )


def load_cases(root: Path = CASES_DIR) -> list[Case]:
    """Every case under `root`, sorted by name."""
    return [load_case(path) for path in sorted(root.glob("*.toml"))]


def findings(case: Case) -> list[Hit]:
    """The static findings on the case's source, as `--no-verify --unsafe-fixes` computes them."""
    from autograd_fix.codemods.engine import FixOptions, check_source
    from autograd_fix.codemods.registry import all_rules

    result = check_source(case.source, all_rules(), path=f"{case.name}.py", options=FixOptions(unsafe_fixes=True))
    return [Hit(f.code, f.span.line, f.span.end_line, f.message) for f in result.findings]


def score(case: Case) -> Outcome:
    """Run the rules on one case and classify the outcome."""
    outcome = Outcome(case.name, case.rule, case.kind, case.line, case.link, verdict="")
    try:
        outcome.hits = findings(case)
    except Exception as error:  # a crash on real-looking code is a result, not a reason to stop
        outcome.error = f"{type(error).__name__}: {error}"
    if case.kind == "near-miss":
        outcome.verdict = "false" if outcome.hits else "clean"
        return outcome
    own = [hit for hit in outcome.hits if hit.code == case.rule]
    if any(hit.line <= case.line <= hit.end_line for hit in own):
        outcome.verdict = "at line"
    elif own:
        outcome.verdict = "elsewhere"
    else:
        outcome.verdict = "missed"
    return outcome


def summarise(outcomes: list[Outcome]) -> dict:
    """Per-rule and total counts, plus the lists of misses and false findings."""
    per_rule: dict[str, dict[str, int]] = defaultdict(lambda: {"bugs": 0, "at line": 0, "elsewhere": 0, "missed": 0,
                                                              "near-misses": 0, "false": 0})
    for outcome in outcomes:
        row = per_rule[outcome.rule]
        if outcome.kind == "bug":
            row["bugs"] += 1
            row[outcome.verdict] += 1
        else:
            row["near-misses"] += 1
            row["false"] += outcome.verdict == "false"
    totals = {key: sum(row[key] for row in per_rule.values()) for key in next(iter(per_rule.values()))}
    return {
        "per_rule": dict(sorted(per_rule.items())),
        "totals": totals,
        "not_at_line": [asdict(o) for o in outcomes if o.kind == "bug" and o.verdict != "at line"],
        "false_findings": [asdict(o) for o in outcomes if o.kind == "near-miss" and o.verdict == "false"],
        "other_codes_on_bugs": [
            {"case": o.case, "expected": o.rule, "found": [(h.code, h.line) for h in o.hits if h.code != o.rule]}
            for o in outcomes if o.kind == "bug" and any(h.code != o.rule for h in o.hits)
        ],
        "errors": [{"case": o.case, "error": o.error} for o in outcomes if o.error],
    }


def render(summary: dict) -> str:
    """The plain-text table and lists."""
    lines = [f"{'rule':8s} {'bugs':>4s} {'at line':>7s} {'elsewhere':>9s} {'missed':>6s}   {'near-misses':>11s} {'false':>5s}"]
    for rule, row in [*summary["per_rule"].items(), ("total", summary["totals"])]:
        lines.append(f"{rule:8s} {row['bugs']:4d} {row['at line']:7d} {row['elsewhere']:9d} {row['missed']:6d}"
                     f"   {row['near-misses']:11d} {row['false']:5d}")
    lines.append("")
    lines.append("bug cases not detected at their line:")
    for o in summary["not_at_line"]:
        found = ", ".join(f"{h['code']}:{h['line']}" for h in o["hits"]) or "nothing"
        lines.append(f"  {o['verdict']:9s} {o['case']} ({o['rule']} line {o['line']}); found: {found}")
    lines.append("false findings on near-misses:")
    for o in summary["false_findings"]:
        for h in o["hits"]:
            lines.append(f"  {o['case']} ({o['rule']} look-alike line {o['line']}): {h['code']}:{h['line']} {h['message'][:90]}")
    lines.append("other codes reported on bug cases (not scored):")
    for row in summary["other_codes_on_bugs"]:
        lines.append(f"  {row['case']} (expects {row['expected']}): {row['found']}")
    for row in summary["errors"]:
        lines.append(f"ERROR {row['case']}: {row['error']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, default=CASES_DIR)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    summary = summarise([score(case) for case in load_cases(args.cases)])
    print(json.dumps(summary, indent=2) if args.json else render(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
