"""Real-code audit: run every rule over the sources of well-maintained PyTorch code.

Two kinds of source, audited in one run:
- PyPI packages: the wheels are downloaded (no dependencies, nothing installed or
  imported) and unpacked into `<workdir>/src/<package>`;
- repositories: folders given with `--repos` (checked-out or extracted snapshots,
  e.g. /tmp/agf-repos/examples). `--extract GITDIR=FOLDER` first writes the tree of
  a bare git directory's HEAD into FOLDER, blob by blob (blobs a partial snapshot lacks
  are skipped: `git archive` would fail on them), with an empty `.git` folder at its
  root so that discovery treats it as a repository root (its `.gitignore`s apply).

It runs `autograd-fix --no-verify --format json` over all of them (static pass only)
and prints the count per source and rule, then every finding with its source line,
for a human to audit: each must be a true bug, or the rule gets fixed. The audited
verdicts of the latest run are kept in `benchmarks/AUDIT.md`.

    python benchmarks/audit_real_code.py [--workdir /tmp/agf-audit] [--packages timm ...]
        [--repos /tmp/agf-repos/examples ...] [--extract /work/.mirror/x/repo=/tmp/agf-repos/x]
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import zipfile
from pathlib import Path

DEFAULT_PACKAGES = ("timm", "torchvision", "pytorch-lightning", "transformers", "accelerate")


def fetch(packages: list[str], workdir: Path) -> list[Path]:
    """Download and unpack the wheels; one root folder per package."""
    if not packages:
        return []
    wheels = workdir / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(wheels), *packages],
        check=True,
    )
    roots = []
    for wheel in sorted(wheels.glob("*.whl")):
        target = workdir / "src" / wheel.name.split("-")[0]
        if not target.exists():
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(target)
        roots.append(target)
    return roots


def extract_head(git_dir: Path, target: Path) -> tuple[str, int, int]:
    """Write HEAD's tree of a bare git directory into `target`, one blob at a time.

    Snapshots may lack some blobs (large files), which makes `git archive` fail, so each
    blob is read on its own and a missing one is skipped. Returns (commit, written,
    skipped). An empty `.git` folder marks the root as a repository root.
    """
    git = ["git", f"--git-dir={git_dir}"]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    listing = subprocess.run([*git, "ls-tree", "-r", "-z", "HEAD"], capture_output=True, check=True).stdout
    written = skipped = 0
    for entry in filter(None, listing.split(b"\0")):
        meta, _, name = entry.partition(b"\t")
        mode, kind, blob = meta.decode().split()
        if kind != "blob" or mode == "120000":  # submodules and symlinks are not files to audit
            continue
        content = subprocess.run([*git, "cat-file", "-p", blob], capture_output=True)
        if content.returncode != 0:
            skipped += 1
            continue
        path = target / name.decode("utf-8", errors="surrogateescape")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.stdout)
        written += 1
    (target / ".git").mkdir(parents=True, exist_ok=True)
    return commit, written, skipped


def run_tool(paths: list[Path]) -> subprocess.CompletedProcess:
    """One static run (no verification, one worker: the audit shares its machine)."""
    return subprocess.run(
        [sys.executable, "-m", "autograd_fix", "--no-verify", "--jobs", "1", "--format", "json", *map(str, paths)],
        capture_output=True,
        text=True,
    )


def audit(roots: list[Path]) -> tuple[dict, list[tuple[Path, str]]]:
    """The tool's findings over all roots (static pass), and the files it crashed on.

    One run per root; a root whose run crashes is re-run file by file, so that one bad
    file (a tool bug to report) neither hides the rest of the root nor stops the audit.
    """
    findings: list[dict] = []
    crashes: list[tuple[Path, str]] = []
    files = 0
    for root in roots:
        completed = run_tool([root])
        if completed.returncode in (0, 1, 2):
            document = json.loads(completed.stdout)
            findings += document["findings"]
            files += document["summary"]["files"]
            continue
        for path in sorted(root.rglob("*.py")) + sorted(root.rglob("*.ipynb")):
            single = run_tool([path])
            if single.returncode in (0, 1, 2):
                document = json.loads(single.stdout)
                findings += document["findings"]
                files += document["summary"]["files"]
            else:
                crashes.append((path, (single.stderr.strip().splitlines() or ["?"])[-1]))
    return {"findings": findings, "summary": {"files": files, "findings": len(findings)}}, crashes


def owning_root(path: Path, roots: list[Path]) -> Path:
    """The audited root a finding's file lies under (the deepest, if roots nest)."""
    resolved = path.resolve()
    owners = [root for root in roots if resolved.is_relative_to(root.resolve())]
    return max(owners, key=lambda root: len(root.resolve().parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/agf-audit"))
    parser.add_argument("--packages", nargs="*", default=list(DEFAULT_PACKAGES))
    parser.add_argument("--repos", nargs="*", type=Path, default=[], help="local repository folders to audit too")
    parser.add_argument(
        "--extract", nargs="*", default=[], metavar="GITDIR=FOLDER",
        help="first extract a bare git directory's HEAD into FOLDER (audited as a repo)",
    )
    args = parser.parse_args()
    repos = list(args.repos)
    for pair in args.extract:
        git_dir, _, folder = pair.partition("=")
        commit, written, skipped = extract_head(Path(git_dir), Path(folder))
        print(f"extracted {folder} at {commit}: {written} files, {skipped} missing blobs skipped")
        repos.append(Path(folder))
    roots = fetch(args.packages, args.workdir) + repos
    document, crashes = audit(roots)
    per_root: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for finding in document["findings"]:
        per_root[owning_root(Path(finding["path"]), roots).name][finding["code"]] += 1
    print(f"files checked: {document['summary']['files']}, findings: {document['summary']['findings']}, "
          f"tool crashes: {len(crashes)}")
    for path, why in crashes:
        print(f"  crash: {path}: {why}")
    for name in sorted(root.name for root in roots):
        counts = per_root.get(name, collections.Counter())
        listed = ", ".join(f"{code}: {n}" for code, n in sorted(counts.items())) or "none"
        print(f"  {name}: {listed}")
    for finding in document["findings"]:
        path = Path(finding["path"])
        line = path.read_text(encoding="utf-8", errors="replace").splitlines()[finding["line"] - 1].strip()
        print(f"\n{finding['path']}:{finding['line']}:{finding['column']}: {finding['code']} {finding['message']}\n    {line}")


if __name__ == "__main__":
    main()
