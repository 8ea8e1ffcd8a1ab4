"""Real-code audit: run every rule over the sources of well-maintained PyTorch packages.

Downloads the wheels (no dependencies, nothing installed or imported), unpacks them
into a work folder, runs `autograd-fix --format json` over them (static pass only, no
verification) and prints the count per package and rule, then every finding with its
source line, for a human to audit: each must be a true bug, or the rule gets fixed.
The audited verdicts of the latest run are kept in `benchmarks/AUDIT.md`.

    python benchmarks/audit_real_code.py [--workdir /tmp/agf-audit] [--packages timm ...]
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


def audit(roots: list[Path]) -> dict:
    completed = subprocess.run(
        [sys.executable, "-m", "autograd_fix", "--format", "json", *map(str, roots)],
        capture_output=True,
        text=True,
    )
    if completed.returncode not in (0, 2):
        raise SystemExit(completed.stderr)
    return json.loads(completed.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/agf-audit"))
    parser.add_argument("--packages", nargs="*", default=list(DEFAULT_PACKAGES))
    args = parser.parse_args()
    roots = fetch(args.packages, args.workdir)
    document = audit(roots)
    per_package: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for finding in document["findings"]:
        package = Path(finding["path"]).relative_to(args.workdir / "src").parts[0]
        per_package[package][finding["code"]] += 1
    print(f"files checked: {document['summary']['files']}, findings: {document['summary']['findings']}, "
          f"unreadable: {len(document['summary']['errors'])}")
    for package in sorted(path.name for path in roots):
        counts = per_package.get(package, collections.Counter())
        listed = ", ".join(f"{code}: {n}" for code, n in sorted(counts.items())) or "none"
        print(f"  {package}: {listed}")
    for finding in document["findings"]:
        path = Path(finding["path"])
        line = path.read_text(encoding="utf-8", errors="replace").splitlines()[finding["line"] - 1].strip()
        print(f"\n{finding['path']}:{finding['line']}:{finding['column']}: {finding['code']} {finding['message']}\n    {line}")


if __name__ == "__main__":
    main()
