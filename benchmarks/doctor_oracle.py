"""The doctor as an oracle for the static rules: on real repositories' scripts that run
here, the sites a run shows a bug at and the static rules miss (issue 19, "An oracle
for static recall").

Each ``.py`` file of the recall benchmark's repositories (benchmarks/recall_real/repos.toml,
extracted by ``benchmarks/recall_real/measure.py`` to ``--snapshots``, default
/tmp/agf-recall) is run once by `diagnose`, as ``autograd-fix doctor FILE`` does, in a
copy of its repository (nothing configured). A file whose run stops at a missing module,
a missing data file or the network does not run here and is listed as such; a run that
finishes or stops at another error is diagnosed (up to the error). For the long-run
scripts, `doctor_recall.py --corpus long --oracle` gives the same list.

    python benchmarks/doctor_oracle.py [--repo OWNER+NAME ...] [--snapshots DIR] [--limit N] [--timeout S]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from autograd_fix.compat import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent

from autograd_fix.cli.doctor import _static_findings, static_agreement  # noqa: E402
from autograd_fix.verification import Verifier  # noqa: E402
from autograd_fix.verification.doctor.diagnose import diagnose  # noqa: E402

#: what a run that cannot run here stops at
NOT_HERE = ("ModuleNotFoundError", "FileNotFoundError", "No such file", "URLError", "ConnectionError", "gaierror",
            "CUDA", "cuda", "HTTPError", "download")


def scripts(repo: Path, paths: list[str], limit: int) -> list[Path]:
    found: list[Path] = []
    for path in paths or [""]:
        base = repo / path
        candidates = [base] if base.is_file() else sorted(base.rglob("*.py")) if base.is_dir() else []
        found += [p for p in candidates if p.suffix == ".py" and "test" not in p.name and p.name != "setup.py"]
    return found[:limit]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", action="append", help="OWNER+NAME (default: every repository of repos.toml)")
    parser.add_argument("--snapshots", type=Path, default=Path("/tmp/agf-recall"))
    parser.add_argument("--limit", type=int, default=30, help="files per repository, at most")
    parser.add_argument("--timeout", type=float, default=30.0)
    options = parser.parse_args(argv)
    repos = tomllib.loads((HERE / "recall_real" / "repos.toml").read_text())["repo"]
    wanted = [r for r in repos if options.repo is None or r["name"].replace("/", "+") in options.repo]
    started = time.perf_counter()
    ran = oracle = 0
    with Verifier() as verifier:
        for repo in wanted:
            folder = options.snapshots / repo["name"].replace("/", "+")
            if not folder.is_dir():
                print(f"{repo['name']}: no snapshot under {options.snapshots} (run recall_real/measure.py)")
                continue
            for script in scripts(folder, repo["paths"], options.limit):
                relative = script.relative_to(folder)
                with tempfile.TemporaryDirectory(prefix="doctor-oracle-") as scratch:
                    project = Path(scratch) / folder.name
                    shutil.copytree(folder, project, ignore=shutil.ignore_patterns(".git"))
                    (project / "pyproject.toml").write_text("[project]\nname = 'oracle'\n")
                    text = (project / relative).read_text(encoding="utf-8", errors="replace")
                    diagnosis = diagnose(str(project / relative), text, [], timeout=options.timeout, verifier=verifier)
                where = f"{repo['name']}/{relative}"
                if diagnosis.status not in ("finished", "crashed") or any(m in diagnosis.detail for m in NOT_HERE):
                    print(f"does not run here  {where}: {diagnosis.status}: {diagnosis.detail[-120:]}")
                    continue
                ran += 1
                static = _static_findings(text, str(relative))
                print(f"ran                {where}: {diagnosis.detail[:120]}; {len(diagnosis.findings)} finding(s)")
                for finding in diagnosis.findings:
                    agrees = static_agreement(finding, text, static) if finding.path == str(relative) else None
                    mark = {True: "static also", False: "STATIC MISSED", None: "no static rule"}[agrees]
                    oracle += agrees is False
                    print(f"    {mark:<14} {finding.path}:{finding.line} {finding.code} {finding.message[:140]}")
    print(f"\n{ran} scripts ran here; {oracle} dynamic findings the static rules miss at their site "
          f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
