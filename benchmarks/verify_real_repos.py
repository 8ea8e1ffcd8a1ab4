"""Verification on real repositories: run every fix through `--diff` and tally the verdicts.

Given checked-out folders of public PyTorch repositories (nothing is downloaded here),
finds their Python files, sets aside those that always start several processes (a
`torch.multiprocessing`/`multiprocessing` spawner, or joining a `torch.distributed`
group, called outside any `if`; each is listed with the call), finds the files with
findings in one static pass, then runs `autograd-fix --diff --format json` on each of
those, one file at a time, with a time limit per file. A file without findings gets no
verdict from `--diff`, so the static pass only saves starting the tool once per such file.

Every verdict is tallied as accepted / rejected / unverified, and every unverified one
is classified by its reason: environmental (a missing package, a GPU, a download or
network access, a data file not in the checkout, several processes; each named) or
tool-caused (anything else, including a file the tool failed on or that ran past the
time limit). The issue's target is no tool-caused `unverified`.

    python benchmarks/verify_real_repos.py /tmp/agf-repos/examples /tmp/agf-repos/nanoGPT \\
        [--verify-timeout 30] [--file-timeout 300] [--json results.json]

The latest dated tally, with the snapshots' commits, is in `benchmarks/REAL_REPOS.md`.
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

SKIPPED_FOLDERS = {".git", ".venv", "venv", "__pycache__", "node_modules", ".tox"}

# Calls that start processes or join a process group, and how a skipped file is described.
MULTI_PROCESS_CALLS = {
    "spawn": "spawns processes (torch.multiprocessing.spawn)",
    "start_processes": "spawns processes (torch.multiprocessing.start_processes)",
    "Process": "spawns processes (multiprocessing.Process)",
    "Pool": "spawns processes (multiprocessing.Pool)",
    "init_process_group": "joins a torch.distributed process group (init_process_group)",
    "init_rpc": "joins a torch.distributed RPC group (init_rpc)",
    "init_device_mesh": "builds a torch.distributed device mesh (init_device_mesh)",
}

# The environmental causes the tool names in an unverified reason (verification/environment.py).
ENVIRONMENTAL = (
    (re.compile(r"needs the package '([^']+)'"), lambda m: f"missing package '{m.group(1)}'"),
    (re.compile(r"needs a package, which is not installed"), lambda m: "missing package"),
    (re.compile(r"needs a GPU \(CUDA\)"), lambda m: "GPU (CUDA)"),
    (re.compile(r"needs a download or network access"), lambda m: "dataset download / network"),
    (re.compile(r"needs torch\.distributed with several processes"), lambda m: "several processes (torch.distributed)"),
    (re.compile(r"needs a file that is not in the project"), lambda m: "missing data file"),
)


@dataclass
class Verdict:
    """One finding's outcome under `--diff`."""

    path: str
    line: int
    code: str
    verdict: str  # accepted | rejected | unverified | no fix | tool failure
    reason: str
    cause: str = ""  # for unverified: the environmental cause, or "" when tool-caused


@dataclass
class Tally:
    """Everything one run of this benchmark found, as written by --json."""

    roots: list[str]
    python_files: int = 0
    skipped: dict[str, str] = field(default_factory=dict)
    files_with_findings: list[str] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return dict(collections.Counter(v.verdict for v in self.verdicts))

    def environmental(self) -> dict[str, int]:
        return dict(collections.Counter(v.cause for v in self.verdicts if v.verdict == "unverified" and v.cause))

    def tool_caused(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.verdict == "tool failure" or (v.verdict == "unverified" and not v.cause)]


def python_files(root: Path) -> list[Path]:
    """Every .py file under root, outside version-control folders, environments and caches."""
    return sorted(
        path for path in root.rglob("*.py") if path.is_file() and not SKIPPED_FOLDERS.intersection(path.relative_to(root).parts)
    )


def is_main_guard(node: ast.If) -> bool:
    """Whether an `if` is the script's `if __name__ == "__main__":`."""
    test = node.test
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def multi_process_reason(path: Path) -> str | None:
    """Why a file is not a single-process script, or None when it is one.

    A file starts several processes when it calls a spawner or joins a process group
    unconditionally. A call under an `if` (nanoGPT's `if ddp:`, ImageNet's
    `if args.multiprocessing_distributed:`) is an option, so the file runs as one process
    by default and is verified; `if __name__ == "__main__":` is no option, it is how the
    script runs. A file that does not parse is left to the tool to report.
    """
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return None
    conditional: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and not is_main_guard(node):
            conditional.update(id(inner) for branch in (node.body, node.orelse) for statement in branch for inner in ast.walk(statement))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and id(node) not in conditional:
            function = node.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
            if name in MULTI_PROCESS_CALLS:
                return MULTI_PROCESS_CALLS[name]
    return None


def environmental_cause(reason: str) -> str:
    """The environmental cause an unverified reason names, or "" (then it is the tool's fault)."""
    for pattern, name in ENVIRONMENTAL:
        match = pattern.search(reason)
        if match:
            return name(match)
    return ""


def run_tool(arguments: list[str], timeout: float) -> tuple[dict | None, str]:
    """Run autograd-fix with --format json; the parsed document, or None and why not."""
    command = [sys.executable, "-m", "autograd_fix", "--format", "json", "-j", "1", *arguments]
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"autograd-fix ran past the {timeout:g} s limit per file"
    try:
        return json.loads(completed.stdout), ""
    except json.JSONDecodeError:
        tail = (completed.stderr or completed.stdout).strip().splitlines()[-3:]
        return None, f"autograd-fix exited {completed.returncode} without JSON: {' | '.join(tail)}"


def files_with_findings(files: list[Path], timeout: float) -> list[str]:
    """The files the static pass reports findings in (one tool process for all of them)."""
    if not files:
        return []
    document, failure = run_tool(["--no-verify", *map(str, files)], timeout)
    if document is None:
        raise SystemExit(f"static pass failed: {failure}")
    return sorted({finding["path"] for finding in document["findings"]})


def verify_file(path: str, verify_timeout: float, file_timeout: float) -> list[Verdict]:
    """Every finding's verdict for one file under `--diff`."""
    document, failure = run_tool(["--diff", "--verify-timeout", f"{verify_timeout:g}", path], file_timeout)
    if document is None:
        return [Verdict(path, 0, "-", "tool failure", failure)]
    verdicts = [Verdict(path, 0, "-", "tool failure", f"per-file error: {error}") for error in document["summary"].get("errors", [])]
    for finding in document["findings"]:
        verification = finding.get("verification")
        if verification is None:
            verdicts.append(Verdict(path, finding["line"], finding["code"], "no fix", "the finding has no fix to verify"))
            continue
        verdict, reason = verification["verdict"], verification["reason"]
        cause = environmental_cause(reason) if verdict == "unverified" else ""
        verdicts.append(Verdict(path, finding["line"], finding["code"], verdict, reason, cause))
    return verdicts


def collect(roots: list[Path], verify_timeout: float, file_timeout: float) -> Tally:
    tally = Tally(roots=[str(root) for root in roots])
    candidates = []
    for root in roots:
        for path in python_files(root):
            tally.python_files += 1
            reason = multi_process_reason(path)
            if reason:
                tally.skipped[str(path)] = reason
            else:
                candidates.append(path)
    tally.files_with_findings = files_with_findings(candidates, file_timeout)
    for number, path in enumerate(tally.files_with_findings, 1):
        print(f"[{number}/{len(tally.files_with_findings)}] {path}", file=sys.stderr, flush=True)
        tally.verdicts.extend(verify_file(path, verify_timeout, file_timeout))
    return tally


def report(tally: Tally) -> str:
    counts = tally.counts()
    lines = [
        f"{tally.python_files} Python files; {len(tally.skipped)} skipped (several processes); "
        f"{len(tally.files_with_findings)} single-process files with findings; {len(tally.verdicts)} verdicts",
        "",
        "Skipped:",
        *(f"  {path}: {reason}" for path, reason in sorted(tally.skipped.items())),
        "",
        "Verdicts:",
        *(f"  {v.verdict:<12} {v.code} {v.path}:{v.line}: {v.reason}" for v in tally.verdicts),
        "",
        "Tally: " + ", ".join(f"{name} {counts.get(name, 0)}" for name in ("accepted", "rejected", "unverified")),
    ]
    for name in ("no fix", "tool failure"):
        if counts.get(name):
            lines[-1] += f", {name} {counts[name]}"
    lines.append("Unverified, environmental: " + (", ".join(f"{c} {n}" for c, n in sorted(tally.environmental().items())) or "none"))
    tool = tally.tool_caused()
    lines.append(f"Unverified or failed, tool-caused: {len(tool)}")
    lines.extend(f"  {v.path}:{v.line} {v.code}: {v.reason}" for v in tool)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="+", type=Path, help="checked-out repository folders")
    parser.add_argument("--verify-timeout", type=float, default=30.0, help="seconds per verification run (default 30)")
    parser.add_argument("--file-timeout", type=float, default=300.0, help="seconds per file for the whole tool (default 300)")
    parser.add_argument("--json", type=Path, help="also write the full tally here")
    args = parser.parse_args()
    missing = [str(root) for root in args.roots if not root.is_dir()]
    if missing:
        parser.error(f"not a folder: {', '.join(missing)}")
    tally = collect([root.resolve() for root in args.roots], args.verify_timeout, args.file_timeout)
    print(report(tally))
    if args.json:
        document = {**asdict(tally), "counts": tally.counts(), "environmental": tally.environmental(), "tool_caused": len(tally.tool_caused())}
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    sys.exit(1 if tally.tool_caused() else 0)


if __name__ == "__main__":
    main()
