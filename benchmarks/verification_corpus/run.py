"""Score the verification stage on real-bug patch pairs: right fixes in, wrong ones out.

    python benchmarks/verification_corpus/run.py [--case NN] [--json results.json]
                                                 [--jobs N] [--timeout S]

Every case folder ``NN_name/`` holds ``buggy.py``, ``fixed.py`` (the hand fix),
one or more ``wrong_*.py`` (plausible rewrites that change what the code computes)
and ``case.toml`` (link to the public bug report, rule code, kind, description, and
the kind of each wrong rewrite). Each ``buggy -> fixed`` pair must come back
``accepted`` and each ``buggy -> wrong_*`` pair ``rejected`` (``unverified`` counts as
a miss both ways), judged by the rule's own contract, exactly as ``--diff`` would judge
it. All pairs run on one warm `Verifier`. Prints one table per case, then the totals
the issue sets targets for, and for every miss the verdict's reason.

It scores whatever verification code is installed: nothing here knows its internals
beyond the public `verify_many` entry point and the rules' contracts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

from corpus import CORPUS_DIR, Case, CorpusError, load_cases  # this script's folder is on sys.path

from autograd_fix.codemods.registry import rule_by_code
from autograd_fix.verification import ACCEPTED, REJECTED, Verifier, WorkerError, verify_many

TARGETS = {"right_accepted": 0.90, "wrong_rejected": 1.00, "library_accepted": 0.50}


@dataclass(frozen=True)
class PairResult:
    """One judged pair: which case, which rewrite, what was expected, what came back."""

    case: str
    kind: str
    rule: str
    rewrite: str  # "fixed.py" or "wrong_<...>.py"
    wrong_kind: str | None  # None for the correct fix
    expected: str  # "accepted" | "rejected"
    verdict: str
    reason: str
    seconds: float

    @property
    def hit(self) -> bool:
        return self.verdict == self.expected


def _pairs_of(case: Case) -> list[tuple[str, str | None, str, str]]:
    """(file name, wrong kind, expected verdict, rewritten source) for one case."""
    pairs = [("fixed.py", None, ACCEPTED, case.fixed_source)]
    for name, (wrong_kind, source) in sorted(case.wrong.items()):
        pairs.append((name, wrong_kind, REJECTED, source))
    return pairs


def _checks_of(rule_code: str) -> tuple[str, ...]:
    rule = rule_by_code(rule_code)
    if rule is None:
        raise CorpusError(f"unknown rule {rule_code}")
    return tuple(rule.contract.checks)


def judge(cases: list[Case], *, jobs: int | None, timeout: float) -> list[PairResult]:
    """Verify every pair of every case on one warm worker; results in case order."""
    requests: list[dict] = []
    meta: list[tuple[Case, str, str | None, str]] = []
    for case in cases:
        checks = _checks_of(case.rule)
        for name, wrong_kind, expected, source in _pairs_of(case):
            requests.append(
                {
                    "original": case.buggy_source,
                    "rewritten": source,
                    "path": str(case.folder / "buggy.py"),
                    "rule": case.rule,
                    "checks": checks,
                }
            )
            meta.append((case, name, wrong_kind, expected))
    results: list[PairResult] = []
    with _warm_verifier() as verifier:
        # one batch per case keeps the per-pair wall time meaningful and lets a
        # crashed worker cost one case, not the whole run
        start = 0
        for case in cases:
            count = sum(1 for m in meta if m[0] is case)
            batch = requests[start : start + count]
            began = time.perf_counter()
            verdicts = verify_many(batch, jobs=jobs, timeout=timeout, verifier=verifier)
            per_pair = (time.perf_counter() - began) / max(1, count)
            for (case_, name, wrong_kind, expected), verdict in zip(meta[start : start + count], verdicts):
                results.append(
                    PairResult(
                        case=case_.name,
                        kind=case_.kind,
                        rule=case_.rule,
                        rewrite=name,
                        wrong_kind=wrong_kind,
                        expected=expected,
                        verdict=verdict.verdict,
                        reason=verdict.reason,
                        seconds=round(per_pair, 2),
                    )
                )
            start += count
    return results


@contextlib.contextmanager
def _warm_verifier() -> Iterator[Verifier]:
    """One `Verifier` for the whole run; a worker that cannot start is a clear exit."""
    try:
        verifier = Verifier()
    except WorkerError as exc:
        raise SystemExit(f"error: verification worker did not start: {exc}") from exc
    try:
        yield verifier
    finally:
        verifier.close()


def _ratio(hits: int, total: int) -> str:
    return f"{hits}/{total} ({100.0 * hits / total:.0f}%)" if total else "0/0 (n/a)"


def totals(results: list[PairResult]) -> dict[str, tuple[int, int]]:
    """The three figures the issue sets targets for, as (hits, total)."""
    right = [r for r in results if r.wrong_kind is None]
    wrong = [r for r in results if r.wrong_kind is not None]
    library = [r for r in right if r.kind == "library"]
    return {
        "right_accepted": (sum(r.hit for r in right), len(right)),
        "wrong_rejected": (sum(r.hit for r in wrong), len(wrong)),
        "library_accepted": (sum(r.hit for r in library), len(library)),
    }


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def render(results: list[PairResult], out=sys.stdout) -> None:
    """Per-case tables, totals, then every miss with its full reason."""
    by_case: dict[str, list[PairResult]] = {}
    for result in results:
        by_case.setdefault(result.case, []).append(result)
    for name, rows in by_case.items():
        first = rows[0]
        print(f"\n{name}  [{first.rule}, {first.kind}]", file=out)
        for row in rows:
            mark = "ok  " if row.hit else "MISS"
            label = row.rewrite if row.wrong_kind is None else f"{row.rewrite} ({row.wrong_kind})"
            print(
                f"  {mark} {label:<44} expected {row.expected:<8} got {row.verdict:<10} "
                f"{row.seconds:5.2f}s  {_short(row.reason, 70)}",
                file=out,
            )
    print("\nTotals", file=out)
    figures = totals(results)
    labels = {
        "right_accepted": "right fixes accepted",
        "wrong_rejected": "wrong rewrites rejected",
        "library_accepted": "library-style fixes accepted",
    }
    for key, (hits, total) in figures.items():
        met = total and hits / total >= TARGETS[key]
        print(
            f"  {labels[key]:<30} {_ratio(hits, total):<16} target >= {TARGETS[key]:.0%}"
            f"  {'met' if met else 'not met'}",
            file=out,
        )
    print("\nBy rule (right accepted, wrong rejected)", file=out)
    for rule in sorted({r.rule for r in results}):
        figures = totals([r for r in results if r.rule == rule])
        print(
            f"  {rule}  {_ratio(*figures['right_accepted']):<16} {_ratio(*figures['wrong_rejected'])}",
            file=out,
        )
    misses = [r for r in results if not r.hit]
    if misses:
        print(f"\nMisses ({len(misses)})", file=out)
        for row in misses:
            label = row.rewrite if row.wrong_kind is None else f"{row.rewrite} ({row.wrong_kind})"
            print(f"  {row.case}/{label}: expected {row.expected}, got {row.verdict}: {row.reason}", file=out)


def _json_document(results: list[PairResult], elapsed: float) -> dict:
    return {
        "elapsed_s": round(elapsed, 1),
        "totals": {key: {"hits": h, "total": t} for key, (h, t) in totals(results).items()},
        "targets": TARGETS,
        "pairs": [{**asdict(r), "hit": r.hit} for r in results],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", default=[], metavar="NN",
                        help="run only the case(s) whose folder starts with NN (repeatable)")
    parser.add_argument("--json", metavar="PATH", help="also write machine-readable results to PATH ('-' for stdout)")
    parser.add_argument("--jobs", type=int, default=None, help="patches verified in parallel (default: half the CPUs)")
    parser.add_argument("--timeout", type=float, default=20.0, help="time limit per side, seconds (default 20)")
    parser.add_argument("--corpus", type=Path, default=CORPUS_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        cases = load_cases(args.corpus, only=args.case)
    except CorpusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not cases:
        print(f"error: no case matches {', '.join(args.case)}", file=sys.stderr)
        return 2
    began = time.perf_counter()
    try:
        results = judge(cases, jobs=args.jobs, timeout=args.timeout)
    except CorpusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    elapsed = time.perf_counter() - began
    render(results)
    print(f"\n{len(cases)} cases, {len(results)} pairs, {elapsed:.0f} s", file=sys.stdout)
    if args.json:
        document = json.dumps(_json_document(results, elapsed), indent=2)
        if args.json == "-":
            print(document)
        else:
            Path(args.json).write_text(document + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
