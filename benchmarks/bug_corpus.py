"""Score the static pipeline on the real-world bug corpus in tests/corpus/.

Each case folder holds a public bug report rebuilt as a runnable script (see
tests/corpus/README.md). This prints, overall and per rule:

- detection: bug cases whose expected code is found at every expected line;
- fix behaviour: the tool's fix (`--apply --unsafe-fixes --no-verify`, computed in-process
  with the same engine) run next to the hand fix, both under a fixed seed, with equal
  stdout counting as "behaves like the hand fix";
- false positives: any finding on a near-miss (correct code that looks like a bug).

Every miss is listed with its reason, so BUG_CORPUS.md can explain it.

    python benchmarks/bug_corpus.py [--cases DIR] [--no-run] [--only NAME] [--jobs N]
                                    [--update-floors]

`--update-floors` (whole corpus only) raises the detection floor and lowers the
false-positive ceiling in floors.toml when this run does better; the test suite holds
every later change to them (tests/test_corpus_floors.py).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from autograd_fix.compat import tomllib

CORPUS_DIR = Path(__file__).resolve().parents[1] / "tests" / "corpus"
#: case folders: `<rule>_<nn>_<slug>` (rule in lower case, as in the rule file names)
FOLDER_PATTERN = re.compile(r"^agf(0\d\d)_(\d\d)_[a-z0-9_]+$")
EXPECTED_LINE = re.compile(r"^(AGF\d{3}) (\d+)$")
REQUIRED_KEYS = frozenset({"link", "rule", "description", "kind"})
OPTIONAL_KEYS = frozenset({"xfail"})
KINDS = frozenset({"bug", "near-miss"})
#: seeds every RNG the scripts may use, then runs the script as __main__
SEEDED_RUN = (
    "import random, runpy, sys; import numpy, torch; random.seed(0); numpy.random.seed(0); "
    "torch.manual_seed(0); sys.argv = [sys.argv[1]]; runpy.run_path(sys.argv[0], run_name='__main__')"
)
RUN_TIMEOUT_S = 60


@dataclass(frozen=True)
class Case:
    """One corpus folder, as read from disk (validated by `load_case`)."""

    folder: Path
    link: str
    rule: str
    description: str
    kind: str
    expected: tuple[tuple[str, int], ...]
    xfail: str | None = None

    @property
    def name(self) -> str:
        return self.folder.name


class CaseError(ValueError):
    """A case folder is malformed; the message says which file and why."""


def parse_expected(text: str) -> tuple[tuple[str, int], ...]:
    """`AGFnnn line` per non-blank line, in order."""
    found = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        match = EXPECTED_LINE.match(raw.strip())
        if not match:
            raise CaseError(f"expected.txt line {raw!r} is not 'AGFnnn line'")
        found.append((match.group(1), int(match.group(2))))
    return tuple(found)


def load_case(folder: Path) -> Case:
    """Read and check one case folder; raises CaseError when it is malformed."""
    meta = tomllib.loads((folder / "case.toml").read_text(encoding="utf-8"))
    missing = REQUIRED_KEYS - meta.keys()
    unknown = meta.keys() - REQUIRED_KEYS - OPTIONAL_KEYS
    if missing or unknown:
        raise CaseError(f"{folder.name}: missing keys {sorted(missing)}, unknown keys {sorted(unknown)}")
    if meta["kind"] not in KINDS:
        raise CaseError(f"{folder.name}: kind {meta['kind']!r} is not one of {sorted(KINDS)}")
    expected = parse_expected((folder / "expected.txt").read_text(encoding="utf-8"))
    return Case(
        folder=folder,
        link=meta["link"],
        rule=meta["rule"],
        description=meta["description"],
        kind=meta["kind"],
        expected=expected,
        xfail=meta.get("xfail"),
    )


def load_cases(root: Path = CORPUS_DIR) -> list[Case]:
    """Every case folder under `root`, sorted by name."""
    return [load_case(folder) for folder in sorted(root.iterdir()) if folder.is_dir() and FOLDER_PATTERN.match(folder.name)]


def static_result(path: Path):
    """Findings and the unsafe-fixes text for one file, as `--no-verify --unsafe-fixes` computes them."""
    from autograd_fix.codemods.engine import FixOptions, check_source
    from autograd_fix.codemods.registry import all_rules

    return check_source(path.read_text(encoding="utf-8"), all_rules(), path=str(path), options=FixOptions(unsafe_fixes=True))


def findings_of(case: Case) -> list[tuple[str, int]]:
    """(code, line) of every finding on the case's buggy.py."""
    return [(f.code, f.span.line) for f in static_result(case.folder / "buggy.py").findings]


def run_seeded(path: Path) -> tuple[int, str]:
    """Exit status and stdout of `path` run as a script under fixed seeds, from its own folder."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "CUDA_VISIBLE_DEVICES": ""}
    try:
        done = subprocess.run(
            [sys.executable, "-c", SEEDED_RUN, str(path)],
            cwd=path.parent, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env,
        )
    except subprocess.TimeoutExpired:
        return -1, "<timeout>"
    return done.returncode, done.stdout


@dataclass
class Score:
    """One case's outcome; `miss` says why when it is not a full success."""

    case: Case
    found: list[tuple[str, int]]
    detected: bool | None = None  # bug cases only
    fix_same: bool | None = None  # bug cases with a hand fix, when run
    miss: str | None = None
    false_positive: bool = False


def score_case(case: Case, run: bool) -> Score:
    """Detection (or false positive) and, with `run`, whether the tool's fix behaves like the hand fix."""
    result = static_result(case.folder / "buggy.py")
    found = [(f.code, f.span.line) for f in result.findings]
    score = Score(case=case, found=found)
    if case.kind == "near-miss":
        score.false_positive = bool(found)
        if found:
            score.miss = f"false positive: {found}"
        return score
    missing = [e for e in case.expected if e not in found]
    score.detected = not missing
    if missing:
        score.miss = f"not detected: expected {missing}, found {found or 'nothing'}"
    if not run:
        return score
    if result.fixed is None:
        score.fix_same = False
        reason = result.fix_error or ("no fix offered" if found else "nothing found, so nothing fixed")
        score.miss = (score.miss + "; " if score.miss else "") + f"fix: {reason}"
        return score
    with tempfile.TemporaryDirectory() as tmp:
        fixed_path = Path(tmp) / "buggy.py"
        fixed_path.write_text(result.fixed, encoding="utf-8")
        tool = run_seeded(fixed_path)
    hand = run_seeded(case.folder / "hand_fix.py")
    score.fix_same = tool == hand
    if not score.fix_same:
        detail = "tool fix exited %d, hand fix %d" % (tool[0], hand[0]) if tool[0] != hand[0] else "stdout differs"
        score.miss = (score.miss + "; " if score.miss else "") + f"fix: {detail}"
    return score


def percent(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "0/0"


def report(scores: list[Score], run: bool) -> str:
    """The figures, per rule, then every miss with its reason."""
    lines = []
    bugs = [s for s in scores if s.case.kind == "bug"]
    near = [s for s in scores if s.case.kind == "near-miss"]
    lines.append(f"cases: {len(scores)} ({len(bugs)} bugs, {len(near)} near-misses)")
    lines.append(f"detection: {percent(sum(bool(s.detected) for s in bugs), len(bugs))}")
    if run:
        lines.append(f"fixes behaving like the hand fix: {percent(sum(bool(s.fix_same) for s in bugs), len(bugs))}")
    lines.append(f"false positives on near-misses: {sum(s.false_positive for s in near)}/{len(near)}")
    lines.append("")
    lines.append("| rule | bugs | detected | fix like hand fix | near-misses | false positives |")
    lines.append("| --- | --- | --- | --- | --- | --- |")
    per_rule: dict[str, list[Score]] = defaultdict(list)
    for s in scores:
        per_rule[s.case.rule].append(s)
    for rule in sorted(per_rule):
        rb = [s for s in per_rule[rule] if s.case.kind == "bug"]
        rn = [s for s in per_rule[rule] if s.case.kind == "near-miss"]
        fix = percent(sum(bool(s.fix_same) for s in rb), len(rb)) if run else "-"
        lines.append(
            f"| {rule} | {len(rb)} | {percent(sum(bool(s.detected) for s in rb), len(rb))} | {fix} "
            f"| {len(rn)} | {sum(s.false_positive for s in rn)} |"
        )
    lines.append("")
    lines.append("misses:")
    for s in scores:
        if s.miss:
            lines.append(f"- {s.case.name} ({s.case.link}): {s.miss}")
    return "\n".join(lines)


def floor_figures(scores: list[Score]) -> dict[str, int]:
    """The figures floors.toml records for this corpus."""
    return {
        "min_detected": sum(bool(s.detected) for s in scores if s.case.kind == "bug"),
        "max_near_miss_false_positives": sum(s.false_positive for s in scores if s.case.kind == "near-miss"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=Path, default=CORPUS_DIR)
    parser.add_argument("--no-run", action="store_true", help="static detection only; run no scripts")
    parser.add_argument("--only", help="only case folders whose name contains this")
    parser.add_argument("--jobs", type=int, default=1, help="cases scored in parallel (each runs two scripts)")
    parser.add_argument("--update-floors", action="store_true", help="record better figures in floors.toml")
    args = parser.parse_args(argv)
    if args.update_floors and (args.only or args.cases != CORPUS_DIR):
        parser.error("--update-floors scores the whole corpus: drop --only and --cases")
    cases = [c for c in load_cases(args.cases) if not args.only or args.only in c.name]
    if cases:
        static_result(cases[0].folder / "buggy.py")  # import the rules once, before threads share them
    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        scores = list(pool.map(lambda case: score_case(case, run=not args.no_run), cases))
    print(report(scores, run=not args.no_run))
    if args.update_floors:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from floors import improve

        moved = improve("bug_corpus", floor_figures(scores))
        print("floors: " + ("; ".join(moved) if moved else "unchanged (no figure beat its floor)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
