"""The figures the project is judged by, held in CI: bug-corpus detection never falls
below its checked-in floor, and a sample of the verification corpus, one case per
rule's contract, is judged right through the real verifier.

The floors live in benchmarks/floors.toml, which the benchmarks raise when they do
better (`benchmarks/bug_corpus.py --no-run --update-floors`). Static detection only, so
this stays within seconds; running the scripts is the benchmark's job.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from autograd_fix.codemods.registry import all_rules, rule_by_code
from autograd_fix.verification import ACCEPTED, REJECTED, Verifier, verify_many

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


bug_corpus = _load("bug_corpus_for_floors", BENCHMARKS / "bug_corpus.py")
floors = _load("benchmark_floors", BENCHMARKS / "floors.py")
verification_corpus = _load("verification_corpus_for_floors", BENCHMARKS / "verification_corpus" / "corpus.py")


def test_bug_corpus_detection_holds_its_floor():
    recorded = floors.read_floors()["bug_corpus"]
    scores = [bug_corpus.score_case(case, run=False) for case in bug_corpus.load_cases()]
    measured = bug_corpus.floor_figures(scores)
    misses = "\n".join(f"  {s.case.name}: {s.miss}" for s in scores if s.miss)
    assert measured["min_detected"] >= recorded["min_detected"], (
        f"bug corpus: {measured['min_detected']} detected, floor {recorded['min_detected']}\n{misses}"
    )
    assert measured["max_near_miss_false_positives"] <= recorded["max_near_miss_false_positives"], misses


def test_floors_only_ever_improve(tmp_path):
    copy = tmp_path / "floors.toml"
    shutil.copy(floors.FLOORS, copy)
    recorded = floors.read_floors(copy)["bug_corpus"]
    worse = {"min_detected": recorded["min_detected"] - 1, "max_near_miss_false_positives": 3}
    assert floors.improve("bug_corpus", worse, copy) == []
    assert copy.read_text() == floors.FLOORS.read_text()
    better = {"min_detected": recorded["min_detected"] + 1, "max_near_miss_false_positives": 0}
    moved = floors.improve("bug_corpus", better, copy)
    assert moved == [f"bug_corpus.min_detected: {recorded['min_detected']} -> {recorded['min_detected'] + 1}"]
    assert floors.read_floors(copy)["bug_corpus"]["min_detected"] == recorded["min_detected"] + 1
    assert "# findings on near-misses" in copy.read_text()  # comments kept


# -- the verification-corpus sample ------------------------------------------------------

#: one case per rule, so that every rule's contract judges a right and a wrong rewrite
#: (the first case of each rule in the corpus, a script or a library module)
SAMPLE = {}
for _case in verification_corpus.load_cases(verification_corpus.CORPUS_DIR):
    SAMPLE.setdefault(_case.rule, _case)
SAMPLE_CASES = [SAMPLE[rule] for rule in sorted(SAMPLE)]


def test_the_sample_covers_every_rule_and_enough_pairs():
    assert sorted(SAMPLE) == sorted(rule.code for rule in all_rules())
    pairs = sum(1 + len(case.wrong) for case in SAMPLE_CASES)
    assert pairs >= 10
    assert Counter(case.kind for case in SAMPLE_CASES)["library"] >= 2


@pytest.fixture(scope="module")
def verifier():
    """This module's own worker: no other module's requests can change what it sees."""
    with Verifier() as own:
        yield own


@pytest.mark.parametrize("case", SAMPLE_CASES, ids=lambda case: case.name)
def test_right_fixes_are_accepted_and_wrong_rewrites_rejected(case, verifier):
    checks = tuple(rule_by_code(case.rule).contract.checks)
    rewrites = [("fixed.py", case.fixed_source, ACCEPTED)]
    rewrites += [(name, source, REJECTED) for name, (_, source) in sorted(case.wrong.items())]
    pairs = [
        {"original": case.buggy_source, "rewritten": source, "path": str(case.folder / "buggy.py"), "rule": case.rule,
         "checks": checks}
        for _, source, _ in rewrites
    ]
    verdicts = verify_many(pairs, verifier=verifier, timeout=30)
    wrong = [f"{name}: expected {expected}, got {verdict.summary()}"
             for (name, _, expected), verdict in zip(rewrites, verdicts) if verdict.verdict != expected]
    assert not wrong, "\n".join(wrong)
