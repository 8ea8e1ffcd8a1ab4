"""Real training scripts, verified through bounded runs (issue 17, item 1).

Each case under ``cases/`` names an upstream project (repository, commit, paths and each
file's sha256 in ``upstream/SOURCES.toml``; the files themselves are never committed here:
they are read at run time from snapshots of those repositories, ``--snapshots DIR``,
where each repository is a folder ``owner+name`` holding its git directory ``repo`` (or a
bare git directory), byte for byte as published at the cited commit),
the bug injected into it (``[bug]``: one text replacement, modelled on the public report
in ``link``), and plausible wrong rewrites of the buggy file (``[wrong.NAME]``). The
right fix is the upstream text itself. For each case the runner lays the project out in
a temporary folder with no configuration at all (no ``pyproject.toml``: the script runs
at its argparse defaults; a case whose defaults cannot run on this machine, a CUDA
device say, names its ``argv``), synthesizes the data files the script reads (``synth.py``),
and verifies buggy -> upstream (expected: accepted) and buggy -> each wrong rewrite
(expected: rejected) under the rule's contract, one patch at a time on one warm worker,
printing each patch's verdict, driver and seconds.

    python benchmarks/long_runs/run.py --snapshots DIR [CASE ...] [--uncapped] [--timeout S] [--json]

Near-misses (``near_misses.toml``): code in the upstream projects that looks like one
of the injected bugs but is right; the rule, run on the upstream file, must stay silent.
``--uncapped`` writes ``loop-cap = 0`` into a ``pyproject.toml`` of the project, to
show what verification did before runs were bounded.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograd_fix.compat import tomllib

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from synth import SYNTHESIZERS  # noqa: E402

from autograd_fix.codemods.registry import rule_by_code  # noqa: E402
from autograd_fix.verification import Verifier, verify_pair  # noqa: E402


def _replace_once(text: str, old: str, new: str, what: str) -> str:
    if text.count(old) != 1:
        raise SystemExit(f"error: {what}: the text to replace occurs {text.count(old)} times, not once")
    return text.replace(old, new)


def _git_dir(snapshots: Path, repository: str) -> Path:
    """The git directory of `repository` (its https URL) among the snapshots."""
    owner, name = repository.rstrip("/").split("/")[-2:]
    for candidate in (snapshots / f"{owner}+{name}" / "repo", snapshots / f"{owner}+{name}", snapshots / owner / name / ".git"):
        if (candidate / "HEAD").is_file():
            return candidate
    raise FileNotFoundError(f"no snapshot of {repository} under {snapshots} (fetch it: {owner}/{name})")


def upstream_files(source: dict, snapshots: Path) -> dict[str, bytes]:
    """The project's published files at the cited commit, by path relative to their
    common folder, each checked against its sha256 in SOURCES.toml."""
    git_dir = _git_dir(snapshots, source["repository"])
    base = os.path.commonpath([os.path.dirname(path) for path in source["paths"]])
    files = {}
    for path in source["paths"]:
        data = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{source['commit']}:{path}"],
                              check=True, capture_output=True).stdout
        files[os.path.relpath(path, base) if base else path] = data
    digests = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    if digests != source.get("sha256"):
        raise SystemExit(f"error: {source['repository']} at {source['commit'][:10]} differs from the digests in upstream/SOURCES.toml")
    return files


def load_case(path: Path, snapshots: Path) -> dict:
    case = tomllib.loads(path.read_text())
    case["name"] = path.stem
    sources = tomllib.loads((HERE / "upstream" / "SOURCES.toml").read_text())
    case["source"] = sources[case["upstream"]]
    case["files"] = upstream_files(case["source"], snapshots)
    upstream = case["files"][case["script"]].decode("utf-8")
    case["fixed"] = upstream
    case["buggy"] = _replace_once(upstream, case["bug"]["old"], case["bug"]["new"], f"{case['name']} [bug]")
    case["wrongs"] = {
        name: _replace_once(case["buggy"], wrong["old"], wrong["new"], f"{case['name']} [wrong.{name}]")
        for name, wrong in sorted((case.get("wrong") or {}).items())
    }
    return case


def lay_out(case: dict, folder: Path, uncapped: bool) -> tuple[Path, str]:
    """The project as a user has it: upstream files, the buggy script, synthesized data."""
    project = folder / case["upstream"]
    for name, data in case["files"].items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_bytes(data)
    (project / case["script"]).write_text(case["buggy"])
    made = ""
    synthesizer = case["source"].get("data")
    if synthesizer:
        made = SYNTHESIZERS[synthesizer](project)
    table = []
    if case.get("argv"):  # only where the script cannot run here at its defaults (a CUDA default, say)
        table.append("argv = [" + ", ".join(json.dumps(a) for a in case["argv"]) + "]")
    if uncapped:
        table.append("loop-cap = 0")
    if table:
        (project / "pyproject.toml").write_text("[tool.autograd-fix.verify]\n" + "\n".join(table) + "\n")
    return project / case["script"], made


def run_case(case: dict, verifier: Verifier, timeout: float, uncapped: bool) -> list[dict]:
    checks = tuple(rule_by_code(case["rule"]).contract.checks)
    rows = []
    with tempfile.TemporaryDirectory(prefix="agf-long-") as scratch:
        script, made = lay_out(case, Path(scratch), uncapped)
        pairs = [("upstream fix", "accepted", case["fixed"])] + [(f"wrong: {n}", "rejected", t) for n, t in case["wrongs"].items()]
        for label, expected, rewritten in pairs:
            began = time.perf_counter()
            verdict = verify_pair(case["buggy"], rewritten, path=str(script), rule=case["rule"], checks=checks,
                                  verifier=verifier, timeout=timeout)
            rows.append({
                "case": case["name"], "rule": case["rule"], "rewrite": label, "expected": expected,
                "verdict": str(verdict.verdict), "driver": verdict.driver, "seconds": round(time.perf_counter() - began, 1),
                "reason": verdict.reason, "data": made, "library": bool(case.get("library")),
            })
    return rows


def by_project_driver(row: dict) -> bool:
    """Judged by the project's own code (its script, a driver found in it), not by the
    changed function with synthesized inputs."""
    driver = row.get("driver") or ""
    return bool(driver) and "synthesized inputs" not in driver


def near_misses(snapshots: Path, only: list[str]) -> list[dict]:
    """Each look-alike of an injected bug in the upstream code (`near_misses.toml`): the
    rule, run on the upstream file with nothing configured, must find nothing there."""
    from autograd_fix.codemods.engine import check_source

    sources = tomllib.loads((HERE / "upstream" / "SOURCES.toml").read_text())
    rows = []
    for item in tomllib.loads((HERE / "near_misses.toml").read_text())["near_miss"]:
        if only and not any(item["upstream"].startswith(c) or c in item["upstream"] for c in only):
            continue
        try:
            text = upstream_files(sources[item["upstream"]], snapshots)[item["file"]].decode("utf-8")
        except (FileNotFoundError, subprocess.CalledProcessError) as error:
            print(f"skip near-miss {item['upstream']}/{item['file']}: {error}", flush=True)
            continue
        if text.count(item["text"]) != 1:
            raise SystemExit(f"error: near-miss {item['file']}: its text occurs {text.count(item['text'])} times, not once")
        line = text[: text.index(item["text"])].count("\n") + 1
        findings = [f for f in check_source(text, (rule_by_code(item["rule"]),), path=item["file"], compute_fix=False).findings
                    if f.code == item["rule"]]
        rows.append({"upstream": item["upstream"], "file": item["file"], "line": line, "rule": item["rule"], "why": item["why"],
                     "silent": not findings, "findings": [f"{f.code} line {f.span.line}: {f.message[:120]}" for f in findings]})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    parser.add_argument("--snapshots", type=Path, default=os.environ.get("AUTOGRAD_FIX_SNAPSHOTS"),
                        help="folder of repository snapshots (owner+name/repo git dirs); default $AUTOGRAD_FIX_SNAPSHOTS")
    parser.add_argument("--uncapped", action="store_true", help="loop-cap = 0: runs in full, as before bounded runs")
    parser.add_argument("--timeout", type=float, default=20.0, help="per-run time limit, as --timeout (default 20 s)")
    parser.add_argument("--json", action="store_true", help="one JSON object per patch")
    parser.add_argument("--no-near-misses", action="store_true", help="skip the static near-miss checks")
    args = parser.parse_args(argv)
    if args.snapshots is None:
        parser.error("--snapshots DIR is required: the upstream files are read from snapshots of their repositories")
    paths = sorted((HERE / "cases").glob("*.toml"))
    if args.cases:
        paths = [p for p in paths if p.stem in args.cases or any(p.stem.startswith(c) for c in args.cases)]
    cases = []
    for path in paths:
        try:
            cases.append(load_case(path, args.snapshots))
        except (FileNotFoundError, subprocess.CalledProcessError) as error:
            print(f"skip {path.stem}: {getattr(error, 'stderr', b'') or error}", flush=True)
    rows: list[dict] = []
    with Verifier() as verifier:
        for case in cases:
            for row in run_case(case, verifier, args.timeout, args.uncapped):
                rows.append(row)
                if args.json:
                    print(json.dumps(row), flush=True)
                else:
                    mark = "ok  " if row["verdict"] == row["expected"] else "MISS"
                    print(f"{mark} {row['case']} [{row['rule']}] {row['rewrite']}: {row['verdict']} in {row['seconds']} s"
                          f" via {row['driver'] or '-'}\n     {row['reason'][:600]}", flush=True)
    misses = near_misses(args.snapshots, args.cases) if not args.no_near_misses else []
    for miss in misses:
        if args.json:
            print(json.dumps(miss), flush=True)
        else:
            mark = "ok  " if miss["silent"] else "MISS"
            print(f"{mark} near-miss {miss['upstream']} {miss['file']}:{miss['line']} [{miss['rule']}]: "
                  f"{'silent' if miss['silent'] else '; '.join(miss['findings'])}\n     {miss['why']}", flush=True)
    right = [r for r in rows if r["expected"] == "accepted"]
    wrong = [r for r in rows if r["expected"] == "rejected"]
    seconds = sorted(r["seconds"] for r in rows)
    if not args.json:
        accepted = [r for r in right if r["verdict"] == "accepted"]
        print(f"\nright fixes accepted {len(accepted)}/{len(right)} "
              f"({sum(by_project_driver(r) for r in accepted)} by a project driver), "
              f"wrong rewrites rejected {sum(r['verdict'] == 'rejected' for r in wrong)}/{len(wrong)}, "
              f"near-misses silent {sum(m['silent'] for m in misses)}/{len(misses)}, "
              f"seconds per patch: median {seconds[len(seconds) // 2] if seconds else 0}, max {seconds[-1] if seconds else 0}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
