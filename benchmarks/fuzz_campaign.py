"""Fuzz campaign: the static pipeline (`--no-verify`) on generated programs, four
properties checked on each.

    python benchmarks/fuzz_campaign.py --budget 10000 --seed 1 \
        [--seconds S] [--seed-dir FOLDER ...] [--git-sample 0.05] [--failures DIR] [--progress]
    python benchmarks/fuzz_campaign.py --replay DIR     # re-check saved failing inputs

Programs come from `fuzz_programs.py` (mutated real PyTorch files, hypothesmith programs
spliced into them). Properties, for every program:

- crash: any exception out of the tool (the per-file reader and engine report a bad
  file as an error; anything else escaping is a bug). A fix the engine had to drop
  because it would not apply counts as a crash too, since the rule built an invalid tree;
- unparsable: for an input that compiles, the bytes `--apply` would write do not
  `compile()` (checked on the bytes, so a declared encoding and BOM must still hold), or
  the engine dropped a fix because it produced code that does not parse;
- idempotence: checking the written bytes again finds another change to make (or an
  error the first run did not have), or the engine's fix rounds did not converge;
- diff/apply (a sample, `--git-sample`): the real CLI, in-process, run with `--diff` in
  one folder and with `--apply` in another; the diff is applied with real `git apply`
  and must give the same bytes `--apply` wrote, which must equal the in-process result
  and what `--apply -` prints for the same bytes on standard input.

The in-process API (`cli.runner.check_file`, what each worker runs) keeps the campaign
fast; the sampled CLI runs cover the printing and writing paths. Every failing input is
written to `--failures` with a note of how it was made and what went wrong, so
`autograd-fix --apply FILE` with the options the note names reproduces it.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_programs import Program, folder_seeds, hypothesmith_sources, programs, project_seeds  # noqa: E402

from autograd_fix.cli.runner import FileOutcome, Job, check_file  # noqa: E402
from autograd_fix.codemods.source import SourceError, SourceText  # noqa: E402
from autograd_fix.codemods.torch_version import TorchVersion  # noqa: E402

PROPERTIES = ("crash", "unparsable", "idempotence", "diff-apply")

#: engine messages for a fix it computed and then had to drop: each is a rule bug that
#: the engine's guard hid from the user, so the campaign counts it against its property
GUARD_MESSAGES = {
    "a fix could not be applied": "crash",
    "a fix produced code that does not parse": "unparsable",
    "a fix produced code that does not compile": "unparsable",
    "fixes did not converge": "idempotence",
}

FILE_NAME = "train.py"


@dataclass
class Failure:
    prop: str
    program: Program
    detail: str


@dataclass
class Tally:
    tried: int = 0
    fixed: int = 0
    errors: int = 0
    git_checked: int = 0
    #: files CPython compiles that the tool reports as a syntax error (libcst's parser
    #: is stricter in places): not one of the four properties, counted so it is seen
    rejected_valid: int = 0
    #: how the programs were made: origin kind and each mutation applied
    made: Counter = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)

    def count(self) -> Counter:
        return Counter(failure.prop for failure in self.failures)


#: PyTorch floors to run under (`--target-torch`): AGF012 rewrites differently below 2.4
#: and 2.3, and each floor must hold in every fix round
TARGETS = (None, None, "1.10", "2.2", "2.3")


@dataclass(frozen=True)
class Options:
    """The command-line choices a program is checked under."""

    unsafe: bool = True
    target: str | None = None

    def flags(self) -> list[str]:
        target = ["--target-torch", self.target] if self.target else []
        return ["--no-verify", "--unsafe-fixes" if self.unsafe else "--no-unsafe-fixes", *target, "--color", "never"]


def job_for(data: bytes, options: Options) -> Job:
    return Job(
        path=FILE_NAME,
        select=None,
        ignore=(),
        unsafe_fixes=options.unsafe,
        compute_fix=True,
        fix_diffs=True,
        data=data,
        target_torch=TorchVersion.parse(options.target) if options.target else None,
    )


def written_bytes(outcome: FileOutcome) -> bytes:
    """What `--apply` writes for `outcome` (its own encoding and BOM)."""
    text = outcome.fixed or ""
    return SourceText(text=text, encoding=outcome.encoding, bom=outcome.bom).encode(text)


def check_program(program: Program, options: Options) -> tuple[list[Failure], FileOutcome | None]:
    """The in-process properties: crash, unparsable, idempotence."""
    failures: list[Failure] = []
    try:
        outcome = check_file(job_for(program.data, options))
    except Exception:
        return [Failure("crash", program, traceback.format_exc())], None
    if outcome.error:
        for prefix, prop in GUARD_MESSAGES.items():
            if outcome.error.startswith(prefix) and (prop != "unparsable" or compiles(program.data)):
                failures.append(Failure(prop, program, f"engine dropped the fix: {outcome.error}"))
        return failures, outcome
    if outcome.fixed is None:
        return failures, outcome
    try:
        data = written_bytes(outcome)
    except (SourceError, UnicodeError) as error:
        return [Failure("crash", program, f"fixed text cannot be encoded as {outcome.encoding}: {error}")], outcome
    if not compiles(data) and compiles(program.data):
        return [Failure("unparsable", program, f"written bytes do not compile: {compile_error(data)}")], outcome
    try:
        again = check_file(job_for(data, options))
    except Exception:
        return [Failure("crash", program, "second run:\n" + traceback.format_exc())], outcome
    if again.error:
        failures.append(Failure("idempotence", program, f"second run reports an error: {again.error}"))
    elif again.fixed is not None:
        failures.append(Failure("idempotence", program, "second --apply changes the file again:\n" + _diff(data, written_bytes(again))))
    return failures, outcome


def compile_error(data: bytes) -> str | None:
    """Why CPython rejects `data` (None: it compiles). The written bytes only have to
    compile where the input did: libcst parses some code CPython rejects (`return *x`),
    and the tool leaves such a file alone."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(data, FILE_NAME, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as error:
            return repr(error)
    return None


def compiles(data: bytes) -> bool:
    return compile_error(data) is None


def _diff(before: bytes, after: bytes) -> str:
    import difflib

    lines = difflib.unified_diff(
        before.decode("utf-8", "replace").splitlines(True), after.decode("utf-8", "replace").splitlines(True), "before", "after"
    )
    return "".join(repr(line) + "\n" for line in lines)


def run_cli(args: list[str], folder: Path, stdin: bytes | None = None) -> tuple[int, bytes, BaseException | None]:
    """The real command line, in-process, in `folder`: (exit code, stdout, exception)."""
    from typer.testing import CliRunner

    from autograd_fix.cli.app import app

    previous = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(app, args, input=stdin, catch_exceptions=True)
    finally:
        os.chdir(previous)
    exception = result.exception if not isinstance(result.exception, SystemExit) else None
    return result.exit_code, result.stdout_bytes, exception


def _as_the_command_sees_it(program: Program, options: Options, folder: Path, expected: bytes | None) -> bytes | None:
    """The in-process result with the project index the command builds for `folder` (a
    project's own grad-disabling helpers change what a file's rules find); `expected`
    when that check fails."""
    from dataclasses import replace

    from autograd_fix.codemods.project_index import ProjectIndex

    job = replace(job_for(program.data, options), path=str(folder / FILE_NAME), project=ProjectIndex.build(folder))
    outcome = check_file(job)
    if outcome.error:
        return expected
    return written_bytes(outcome) if outcome.fixed is not None else None


def check_diff_apply(program: Program, options: Options, expected: bytes | None, scratch: Path) -> list[Failure]:
    """`--diff` piped to `git apply` gives the bytes `--apply` writes (and those equal the
    in-process result `expected`; None when nothing changes)."""
    flags = options.flags()
    diff_dir, apply_dir = scratch / "diff", scratch / "apply"
    for folder in (diff_dir, apply_dir):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        (folder / FILE_NAME).write_bytes(program.data)
    expected = _as_the_command_sees_it(program, options, apply_dir, expected)
    _, diff, error = run_cli(["--diff", *flags, FILE_NAME], diff_dir)
    if error is not None:
        return [Failure("crash", program, "--diff: " + "".join(traceback.format_exception(error)))]
    _, _, error = run_cli(["--apply", *flags, FILE_NAME], apply_dir)
    if error is not None:
        return [Failure("crash", program, "--apply: " + "".join(traceback.format_exception(error)))]
    applied = (apply_dir / FILE_NAME).read_bytes()
    failures = []
    if applied != (program.data if expected is None else expected):
        failures.append(Failure("diff-apply", program, "--apply wrote other bytes than the in-process engine result"))
    _, piped, error = run_cli(["--apply", *flags, "--stdin-filename", FILE_NAME, "-"], apply_dir, stdin=program.data)
    if error is not None:
        return failures + [Failure("crash", program, "--apply -: " + "".join(traceback.format_exception(error)))]
    if piped and piped != applied:
        failures.append(Failure("diff-apply", program, f"--apply - (stdin) printed other bytes than --apply wrote:\n{piped!r}"))
    if diff.strip():
        (scratch / "change.diff").write_bytes(diff)
        git = subprocess.run(
            ["git", "apply", "--whitespace=nowarn", str(scratch / "change.diff")],
            cwd=diff_dir, capture_output=True, text=True,
        )
        if git.returncode != 0:
            return failures + [Failure("diff-apply", program, f"git apply failed: {git.stderr.strip()}\n--- diff ---\n{diff!r}")]
        patched = (diff_dir / FILE_NAME).read_bytes()
        if patched != applied:
            failures.append(Failure("diff-apply", program, f"git apply gives other bytes than --apply\n--- diff ---\n{diff!r}"))
    elif applied != program.data:
        failures.append(Failure("diff-apply", program, "--diff shows nothing but --apply changed the file"))
    return failures


def save_failure(folder: Path, index: int, failure: Failure) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{failure.prop}-{index:04d}"
    (folder / f"{stem}.py").write_bytes(failure.program.data)
    (folder / f"{stem}.txt").write_text(f"made by: {failure.program.describe()}\n\n{failure.detail}\n", encoding="utf-8")


def campaign(
    *,
    budget: int,
    seconds: float | None,
    seed: int,
    seed_dirs: list[Path],
    git_sample: float,
    hypothesmith_count: int,
    failures_dir: Path | None,
    progress: bool = False,
) -> Tally:
    rng = random.Random(seed)
    seeds = project_seeds() + folder_seeds(seed_dirs)
    pool = hypothesmith_sources(hypothesmith_count, seed) if hypothesmith_count else []
    tally = Tally()
    deadline = None if seconds is None else time.monotonic() + seconds
    with tempfile.TemporaryDirectory(prefix="agf-fuzz-") as scratch:
        subprocess.run(["git", "init", "-q", scratch], check=True)
        for program in programs(seeds, rng, pool):
            if tally.tried >= budget or (deadline is not None and time.monotonic() > deadline):
                break
            tally.tried += 1
            tally.made["hypothesmith splice" if program.origin.startswith("hypothesmith") else "mutated seed"] += 1
            tally.made.update(step.split("(")[0] for step in program.steps if not step.startswith("splice"))
            if progress and tally.tried % 1000 == 0:
                print(f"{tally.tried} programs, {len(tally.failures)} failures", file=sys.stderr, flush=True)
            options = Options(unsafe=rng.random() < 0.8, target=rng.choice(TARGETS))
            found, outcome = check_program(program, options)
            if outcome is not None:
                tally.fixed += outcome.fixed is not None
                tally.errors += outcome.error is not None
                if (outcome.error or "").startswith("syntax error") and compiles(program.data):
                    tally.rejected_valid += 1
                    if failures_dir is not None:
                        save_failure(failures_dir, tally.rejected_valid, Failure("rejected-valid", program, outcome.error or ""))
            if not found and rng.random() < git_sample:
                tally.git_checked += 1
                expected = written_bytes(outcome) if outcome is not None and outcome.fixed is not None and not outcome.error else None
                found = check_diff_apply(program, options, expected, Path(scratch) / "work")
            for failure in found:
                failure.detail = f"options: {' '.join(options.flags())}\n{failure.detail}"
                if failures_dir is not None:
                    save_failure(failures_dir, len(tally.failures), failure)
                tally.failures.append(failure)
    return tally


def replay(folder: Path, options: Options = Options()) -> Tally:
    """Every saved input in `folder` again, through every property (the CLI included)."""
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="agf-fuzz-") as scratch:
        subprocess.run(["git", "init", "-q", scratch], check=True)
        for path in sorted(folder.glob("*.py")):
            program = Program(data=path.read_bytes(), origin=f"replay {path.name}")
            tally.tried += 1
            tally.git_checked += 1
            found, outcome = check_program(program, options)
            if not found:
                expected = written_bytes(outcome) if outcome is not None and outcome.fixed is not None and not outcome.error else None
                found = check_diff_apply(program, options, expected, Path(scratch) / "work")
            tally.failures.extend(found)
    return tally


def report(tally: Tally, elapsed: float) -> str:
    counts = tally.count()
    lines = [
        f"programs tried: {tally.tried} in {elapsed:.0f} s "
        f"({tally.fixed} fixed, {tally.errors} reported as per-file errors; "
        f"{tally.git_checked} also run through the CLI with --diff | git apply and --apply)",
    ]
    lines += [f"  {prop:<12} failures: {counts.get(prop, 0)}" for prop in PROPERTIES]
    lines.append(f"  (not a property: {tally.rejected_valid} files CPython compiles were reported as syntax errors)")
    if tally.made:
        lines.append("made: " + ", ".join(f"{kind} {count}" for kind, count in tally.made.most_common()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=1000, help="number of programs (default 1000)")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seed-dir", type=Path, action="append", default=[], help="extra folder of .py seeds")
    parser.add_argument("--git-sample", type=float, default=0.05, help="share of programs also run through the CLI and git apply")
    parser.add_argument("--hypothesmith", type=int, default=200, help="hypothesmith programs to generate for splicing")
    parser.add_argument("--failures", type=Path, default=None, help="folder for failing inputs")
    parser.add_argument("--progress", action="store_true", help="a line on stderr every 1000 programs")
    parser.add_argument("--replay", type=Path, default=None, help="re-check the inputs saved in this folder instead")
    args = parser.parse_args(argv)
    start = time.monotonic()
    tally = replay(args.replay) if args.replay else campaign(
        budget=args.budget,
        seconds=args.seconds,
        seed=args.seed,
        seed_dirs=args.seed_dir,
        git_sample=args.git_sample,
        hypothesmith_count=args.hypothesmith,
        failures_dir=args.failures,
        progress=args.progress,
    )
    print(report(tally, time.monotonic() - start))
    for failure in tally.failures[:20]:
        print(f"- {failure.prop}: {failure.program.describe()}: {failure.detail.splitlines()[0] if failure.detail else ''}")
    return 1 if tally.failures else 0


if __name__ == "__main__":
    sys.exit(main())
