"""Recall and false findings of autograd-fix on code nobody here wrote (issue 18, item 6).

Reads `repos.toml` and each repository's `sites/<owner>+<name>.toml` (the real sites, written
by hand from `candidates.py` and reading, committed before the tool was run), extracts the
snapshots (`snapshots.py`), runs `autograd-fix --no-verify --format json` on each (the static
pass: what is found, not what verification accepts), and matches findings to sites.

Matching: a finding matches a site when the file, the notebook cell (if any) and the rule
are the same and its line lies in the site's `span` (default: the site's own line), or the
site's line lies inside the node the finding reports and fixes whole (a function decorated
with `@torch.no_grad()` is reported at its `def` line, its range covers the site). Per
site status:
- `real`: a bug the rule is meant to report; `latent`: true to the rule's definition but
  harmless on the paths the repository itself runs. Recall is printed for real sites and
  for real + latent ones.
- `optional` entries (file glob, optional cell/span): a finding there is neither a miss
  nor false.
A finding that matches nothing is unlisted: it is false unless `judged` (an entry added
AFTER the run, by reading the finding, with `verdict = "true"` or `"false"`) says it is
true; a finding on a `not_sites` entry (a candidate read and judged no bug before the run)
is false; unlisted findings nobody judged yet are counted as false and printed.

    python benchmarks/recall_real/measure.py [--work /tmp/agf-recall] [--repo owner/name] [--details]
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import json
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from autograd_fix.compat import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent))

from snapshots import extract, load_repos  # noqa: E402


@dataclass(frozen=True)
class Finding:
    file: str
    cell: int | None
    line: int
    rule: str
    message: str
    #: the last line of the node the finding reports (a decorated function, a wrapped loop)
    end_line: int = 0


@dataclass(frozen=True)
class Entry:
    """A site, an optional place, a not-site or a judged finding of a sites file."""

    file: str
    rule: str
    cell: int | None = None
    line: int | None = None
    span: tuple[int, int] | None = None
    status: str = ""
    why: str = ""

    def covers(self, finding: Finding) -> bool:
        if finding.rule != self.rule or not fnmatch.fnmatchcase(finding.file, self.file):
            return False
        if self.cell is not None and finding.cell != self.cell:
            return False
        low, high = self.span or ((self.line, self.line) if self.line is not None else (None, None))
        return low is None or low <= finding.line <= high

    def inside(self, finding: Finding) -> bool:
        """The site lies inside the node the finding reports and fixes as a whole: a
        decorated function (reported at its `def`), a wrapped loop. The fix covers the
        site's line, so the site is found (used for sites only, never for judged entries)."""
        if self.line is None or not self.covers(replace(finding, line=self.line)):
            return False
        return finding.line < self.line <= finding.end_line


def entries(data: dict, key: str) -> list[Entry]:
    out = []
    for raw in data.get(key, []):
        span = tuple(raw["span"]) if "span" in raw else None
        status = raw.get("status", raw.get("verdict", ""))
        out.append(Entry(raw["file"], raw["rule"], raw.get("cell"), raw.get("line"), span, status, raw.get("why", "")))
    return out


@dataclass
class Tally:
    """Counts for one repository or one rule."""

    real: int = 0
    latent: int = 0
    found_real: int = 0
    found_latent: int = 0
    false: int = 0
    extra_true: int = 0
    unjudged: int = 0
    misses: list[str] = field(default_factory=list)
    false_list: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        for name in ("real", "latent", "found_real", "found_latent", "false", "extra_true", "unjudged"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def run_tool(root: Path) -> list[Finding]:
    proc = subprocess.run(
        [sys.executable, "-m", "autograd_fix", "--no-verify", "--format", "json", "--jobs", "1", str(root)],
        capture_output=True, text=True,
    )
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"autograd-fix failed on {root}: {proc.stderr[-2000:]}")
    report = json.loads(proc.stdout)
    for error in report["summary"].get("errors", []):
        sys.stdout.write(f"  tool error: {error}\n")
    return [
        Finding(Path(f["path"]).resolve().relative_to(root.resolve()).as_posix(), f.get("cell"), f["line"], f["code"], f["message"],
                f.get("end_line") or f["line"])
        for f in report["findings"]
    ]


def where(f: Finding | Entry) -> str:
    cell = f" cell {f.cell}" if f.cell is not None else ""
    return f"{f.file}{cell}:{f.line}"


def measure(sites_file: Path, findings: list[Finding]) -> dict[str, Tally]:
    """Per rule tallies for one repository, against its sites file."""
    data = tomllib.loads(sites_file.read_text())
    sites, optional = entries(data, "sites"), entries(data, "optional")
    judged = entries(data, "judged") + [replace(e, status="false") for e in entries(data, "not_sites")]
    tallies: dict[str, Tally] = collections.defaultdict(Tally)
    matched: set[Finding] = set()
    for site in sites:
        tally = tallies[site.rule]
        hits = [f for f in findings if site.covers(f) or site.inside(f)]
        matched.update(hits)
        latent = site.status == "latent"
        tally.latent += latent
        tally.real += not latent
        if hits:
            tally.found_latent += latent
            tally.found_real += not latent
        else:
            tally.misses.append(f"{where(site)} {site.rule} [{site.status}] {site.why}")
    for finding in findings:
        if finding in matched or any(o.covers(finding) for o in optional):
            continue
        tally = tallies[finding.rule]
        verdicts = [j.status for j in judged if j.covers(finding)]
        if "true" in verdicts:
            tally.extra_true += 1
            continue
        tally.false += 1
        tally.unjudged += not verdicts
        tally.false_list.append(f"{where(finding)} {finding.rule} {'(not judged yet) ' if not verdicts else ''}{finding.message[:110]}")
    return tallies


def percent(found: int, total: int) -> str:
    return f"{found}/{total} ({100 * found / total:.0f}%)" if total else "-"


def row(name: str, t: Tally) -> str:
    return (
        f"{name:<48} {percent(t.found_real, t.real):>14} {percent(t.found_real + t.found_latent, t.real + t.latent):>14}"
        f" {t.false:>6} {t.extra_true:>6}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("/tmp/agf-recall"))
    parser.add_argument("--repo", default="")
    parser.add_argument("--details", action="store_true", help="list every miss and every false finding")
    args = parser.parse_args(argv)
    per_repo: dict[str, Tally] = {}
    per_rule: dict[str, Tally] = collections.defaultdict(Tally)
    details: list[str] = []
    for repo in load_repos():
        if args.repo and repo.name != args.repo:
            continue
        root = args.work / repo.slug
        if not root.exists():
            extract(repo, root)
        tallies = measure(repo.sites_file, run_tool(root))
        total = Tally()
        for rule, tally in sorted(tallies.items()):
            total.add(tally)
            per_rule[rule].add(tally)
            details += [f"{repo.name}: MISS {m}" for m in tally.misses]
            details += [f"{repo.name}: FALSE {m}" for m in tally.false_list]
        per_repo[repo.name] = total
    header = f"{'':<48} {'recall (real)':>14} {'(real+latent)':>14} {'false':>6} {'extra':>6}\n"
    sys.stdout.write("Per repository\n" + header)
    everything = Tally()
    for name, tally in per_repo.items():
        everything.add(tally)
        sys.stdout.write(row(name, tally))
    sys.stdout.write(row("ALL", everything))
    sys.stdout.write("\nPer rule\n" + header)
    for rule, tally in sorted(per_rule.items()):
        sys.stdout.write(row(rule, tally))
    sys.stdout.write("\n(extra: unlisted findings judged true after the run; false includes unjudged ones)\n")
    if args.details:
        sys.stdout.write("\n" + "\n".join(details) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
