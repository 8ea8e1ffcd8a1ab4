"""One fix pipeline: `--no-verify --apply` and a verified `--apply` that accepts every
patch must write the same bytes (issue 18, "One fix pipeline").

For every Python file of the bug corpus (tests/corpus), the verification corpus
(benchmarks/verification_corpus) and any folders given with `--repos` (the audit
corpora, checked out or extracted: see audit_real_code.py), it computes

- the static text: `check_file` with `--unsafe-fixes` (a verified run applies an accepted
  unsafe fix too), the engine's own rounds (`codemods.fix_rounds`);
- the verified text: the same file checked as a verified run checks it (no fixes
  computed), then `cli.verify_patches.verify_and_compose` with a verifier that accepts
  every patch (no sandbox run: the composition, deferrals and rounds are what is
  compared),

and prints how many files had fixes, how many agree, how many follow-on findings each
path announced, and every file that differs. It also counts libcst parses
(`parse_module` calls) per path.

    python benchmarks/one_fix_pipeline.py [--repos DIR ...] [--limit N]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
CORPORA = (ROOT / "tests" / "corpus", ROOT / "benchmarks" / "verification_corpus")


def corpus_files(folders: list[Path]) -> list[Path]:
    """Every `.py` file under `folders`, sorted (skipping virtual environments and caches)."""
    skip = {".venv", "venv", "__pycache__", ".git", "node_modules"}
    return sorted(p for folder in folders for p in folder.rglob("*.py") if not skip & set(p.parts) and p.is_file())


@contextlib.contextmanager
def accepting_everything() -> Iterator[None]:
    """`verification.api.verify_stream` replaced by one that accepts every patch at once."""
    from autograd_fix.verification import api
    from autograd_fix.verification.verdict import Status, Verdict

    def verify_stream(next_pair, on_verdict, **_: object) -> None:  # type: ignore[no-untyped-def]
        while (item := next_pair()) is not None:
            key, pair = item
            on_verdict(key, Verdict(Status.ACCEPTED, "accepted by the benchmark", pair["rule"], ()))

    real = api.verify_stream
    api.verify_stream = verify_stream  # type: ignore[assignment]
    try:
        yield
    finally:
        api.verify_stream = real  # type: ignore[assignment]


@contextlib.contextmanager
def counting_parses() -> Iterator[list[int]]:
    """Counts libcst `parse_module` calls (the engine's and libcst's own entry point)."""
    import libcst

    counter = [0]
    real = libcst.parse_module

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        counter[0] += 1
        return real(*args, **kwargs)

    libcst.parse_module = counted  # type: ignore[assignment]
    try:
        yield counter
    finally:
        libcst.parse_module = real  # type: ignore[assignment]


@dataclass
class Comparison:
    """One file's two texts and what each path announced."""

    path: Path
    static: str | None
    verified: str | None
    static_follow_ons: int = 0
    verified_follow_ons: int = 0
    static_parses: int = 0
    verified_parses: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        return self.static == self.verified


def compare(path: Path) -> Comparison:
    """Both paths on one file (see the module docstring)."""
    from autograd_fix.cli.runner import Job, check_file
    from autograd_fix.cli.verify_patches import VerifySettings, verify_and_compose

    def job(compute_fix: bool) -> Job:
        return Job(path=str(path), select=None, ignore=(), unsafe_fixes=True, compute_fix=compute_fix, fix_diffs=False)

    with counting_parses() as static_parses:
        static = check_file(job(True))
    verified_job = job(False)
    with counting_parses() as verified_parses, accepting_everything():
        checked = check_file(verified_job)
        (verified,) = verify_and_compose([checked], [verified_job], VerifySettings(), True, None, verifier=object())
    result = Comparison(
        path,
        static.fixed if not static.error else None,
        verified.fixed if not verified.error else None,
        static_follow_ons=sum(1 for r in static.findings if r.round > 1),
        verified_follow_ons=sum(1 for r in verified.findings if r.round > 1),
        static_parses=static_parses[0],
        verified_parses=verified_parses[0],
    )
    result.errors = [e for e in (static.error, verified.error) if e]
    return result


def run(files: list[Path], on_file: Callable[[Comparison], None] | None = None) -> list[Comparison]:
    results = []
    for path in files:
        comparison = compare(path)
        results.append(comparison)
        if on_file is not None:
            on_file(comparison)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repos", nargs="*", type=Path, default=[], help="more folders (audit corpora)")
    parser.add_argument("--limit", type=int, default=None, help="at most this many files")
    args = parser.parse_args(argv)
    files = corpus_files([*CORPORA, *args.repos])[: args.limit]
    results = run(files)
    fixed = [r for r in results if r.static is not None or r.verified is not None]
    differ = [r for r in results if not r.agrees]
    print(f"files: {len(results)}; with fixes (either path): {len(fixed)}; identical bytes: {len(results) - len(differ)}")
    print(f"follow-on findings announced: static {sum(r.static_follow_ons for r in results)}, "
          f"verified {sum(r.verified_follow_ons for r in results)}")
    print(f"libcst parses: static path {sum(r.static_parses for r in results)}, "
          f"verified path {sum(r.verified_parses for r in results)} "
          f"(files with fixes: {sum(r.verified_parses for r in fixed)} for {len(fixed)} files)")
    for r in differ:
        print(f"DIFFERS: {r.path.relative_to(ROOT) if r.path.is_relative_to(ROOT) else r.path} {r.errors}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
