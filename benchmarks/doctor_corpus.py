"""Score `autograd-fix doctor` on the real-world bug corpus (tests/corpus/), and measure
what its instrumentation costs over the plain bounded run.

Recall: every case whose `buggy.py` runs here (the run finishes, or stops at an autograd
error) is diagnosed in the sandbox, as `autograd-fix doctor` does. A bug case is found
when every expected `AGFnnn line` has a dynamic finding of that code at the same site
(the same line, give or take 2, or a line of the same innermost function: the corpus
puts AGF001 on the evaluation function's `def`); "exact" counts the same line only.
Cases of rules with no runtime symptom (AGF005, AGF007, AGF009, AGF012: what they flag
runs correctly) are listed apart. A near-miss with any finding is a false positive.
Each finding is also compared with the static rules at its site (the oracle column).

Cost (`--overhead`): per runnable case, the bounded run alone and the bounded run under
the doctor's instrumentation, each in a fresh process, alternating, best of `--repeat`;
the ratio is of the summed times.

    python benchmarks/doctor_corpus.py [--only NAME] [--overhead] [--repeat N] [--sample N]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bug_corpus import CORPUS_DIR, Case, load_cases  # noqa: E402

from autograd_fix.cli.doctor import _static_findings, static_agreement  # noqa: E402
from autograd_fix.codemods.engine import check_source  # noqa: E402
from autograd_fix.codemods.registry import all_rules  # noqa: E402
from autograd_fix.verification import Verifier  # noqa: E402
from autograd_fix.verification.doctor.diagnose import diagnose  # noqa: E402
from autograd_fix.verification.doctor.outcome import Finding  # noqa: E402

NO_RUNTIME_SYMPTOM = frozenset({"AGF005", "AGF007", "AGF009", "AGF012"})
NEAR = 2


@dataclass
class Scored:
    case: Case
    status: str
    detail: str
    findings: list[Finding] = field(default_factory=list)
    found: bool = False
    exact: bool = False
    static_missed: int = 0
    site_fixes: int = 0

    @property
    def runnable(self) -> bool:
        return self.status in ("finished", "crashed") and "ModuleNotFoundError" not in self.detail


def _same_site(text: str, finding: Finding, code: str, line: int) -> bool:
    return finding.code == code and static_agreement(finding, text, [(code, line)]) is True


def score(case: Case, verifier: Verifier) -> Scored:
    """Diagnose the case as its own project (a copy with a pyproject.toml of its own, as
    a user's checkout would be), not as a file deep inside this repository."""
    with tempfile.TemporaryDirectory(prefix="doctor-case-") as scratch:
        project = Path(scratch) / case.name
        shutil.copytree(case.folder, project)
        (project / "pyproject.toml").write_text(f"[project]\nname = '{case.name}'\n")
        path = project / "buggy.py"
        text = path.read_text(encoding="utf-8")
        diagnosis = diagnose(str(path), text, [], timeout=60, verifier=verifier)
    result = Scored(case, diagnosis.status, diagnosis.detail, [f for f in diagnosis.findings if f.path == "buggy.py"])
    if case.kind == "bug":
        wanted = [(code, line) for code, line in case.expected if code == case.rule]
        result.found = bool(wanted) and all(any(_same_site(text, f, c, ln) for f in result.findings) for c, ln in wanted)
        result.exact = bool(wanted) and all(any(f.code == c and f.line == ln for f in result.findings) for c, ln in wanted)
    static = _static_findings(text, str(path))
    missed = [f for f in result.findings if static_agreement(f, text, static) is False]
    result.static_missed = len(missed)
    result.site_fixes = _site_fixes(text, str(path), [(f.code, f.line) for f in missed if f.code.startswith("AGF")])
    return result


def _site_fixes(text: str, path: str, sites: list[tuple[str, int]]) -> int:
    """How many of the static rules' misses get their rule's fix built at the run's site
    (what `doctor --diff` would verify; not verified here)."""
    if not sites:
        return 0
    try:
        plain = check_source(text, all_rules(), path=path, compute_fix=False)
        both = check_source(text, all_rules(), path=path, compute_fix=False, sites=sites)
    except Exception:  # noqa: BLE001 - a file the engine cannot parse: no fix either way
        return 0
    return len(both.findings) - len(plain.findings)


def report(scored: list[Scored]) -> str:
    runnable = [s for s in scored if s.runnable]
    bugs = [s for s in runnable if s.case.kind == "bug" and s.case.rule not in NO_RUNTIME_SYMPTOM]
    silent_rules = [s for s in runnable if s.case.kind == "bug" and s.case.rule in NO_RUNTIME_SYMPTOM]
    near = [s for s in runnable if s.case.kind == "near-miss"]
    lines = [f"cases: {len(scored)}, runnable here: {len(runnable)}"]
    found = sum(s.found for s in bugs)
    exact = sum(s.exact for s in bugs)
    lines.append(f"bugs with a runtime symptom: found {found}/{len(bugs)} (same line: {exact}/{len(bugs)})")
    lines.append(f"bugs of rules without a runtime symptom ({', '.join(sorted(NO_RUNTIME_SYMPTOM))}): "
                 f"found {sum(s.found for s in silent_rules)}/{len(silent_rules)}")
    fp = [s for s in near if s.findings]
    lines.append(f"near-misses with a finding: {len(fp)}/{len(near)}")
    per_rule: dict[str, list[Scored]] = {}
    for s in bugs:
        per_rule.setdefault(s.case.rule, []).append(s)
    lines.append("per rule: " + ", ".join(f"{rule} {sum(s.found for s in items)}/{len(items)}" for rule, items in sorted(per_rule.items())))
    lines.append(f"dynamic findings the static rules miss at their site: {sum(s.static_missed for s in runnable)} "
                 f"(a rule's fix built at the site for {sum(s.site_fixes for s in runnable)}: `doctor --diff` verifies those)")
    lines.append("")
    for s in scored:
        if not s.runnable:
            lines.append(f"not runnable  {s.case.name}: {s.status}: {s.detail[:160]}")
    for s in bugs:
        if not s.found:
            got = ", ".join(f"{f.code} {f.line}" for f in s.findings) or "nothing"
            want = ", ".join(f"{c} {ln}" for c, ln in s.case.expected if c == s.case.rule)
            lines.append(f"missed        {s.case.name}: expected {want}; got {got}")
    for s in fp:
        lines.append(f"false positive {s.case.name}: " + "; ".join(f"{f.code} {f.line} {f.message[:100]}" for f in s.findings))
    return "\n".join(lines)


# -- overhead ------------------------------------------------------------------------------

_TIMED = """
import os, sys, time
import torch
torch.set_num_threads(1)
from autograd_fix.verification.bounded import Bounds
from autograd_fix.verification.harness import seed_all
from autograd_fix.verification.doctor.watch import Watch
path, mode = sys.argv[1], sys.argv[2]
folder = os.path.dirname(path)
os.chdir(folder)
sys.path.insert(0, folder)
sys.argv = [path]
bounds = Bounds(root=folder)
code = bounds.compile(open(path).read(), path)
namespace = {"__name__": "__main__", "__file__": path}
seed_all(0)
watch = Watch(lambda f: f.startswith(folder + os.sep)) if mode == "doctor" else None
out = open(os.devnull, "w")
started = time.perf_counter()
with bounds:
    if watch is not None:
        watch.install()
        watch.namespace = namespace
    saved, sys.stdout = sys.stdout, out
    try:
        exec(code, namespace)
    except BaseException:
        pass
    finally:
        sys.stdout = saved
    if watch is not None:
        watch.record(finished=True)
print(time.perf_counter() - started)
"""


def _timed(path: Path, mode: str) -> float | None:
    try:
        done = subprocess.run([sys.executable, "-c", _TIMED, str(path), mode], capture_output=True, text=True, timeout=120)
        return float(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        return None


def overhead(scored: list[Scored], repeat: int, sample: int) -> str:
    bare_total = doctor_total = 0.0
    rows = []
    for s in [s for s in scored if s.runnable][::sample]:
        path = s.case.folder / "buggy.py"
        bare, doctored = [], []
        for _ in range(repeat):
            bare.append(_timed(path, "bare"))
            doctored.append(_timed(path, "doctor"))
        if None in bare or None in doctored:
            continue
        b, d = min(bare), min(doctored)
        bare_total += b
        doctor_total += d
        rows.append((s.case.name, b, d))
    worst = max(rows, key=lambda r: r[2] / max(r[1], 1e-9)) if rows else None
    text = (f"overhead over the bounded run (sum over {len(rows)} scripts, best of {repeat}, user code only): "
            f"{bare_total:.2f} s -> {doctor_total:.2f} s, ratio {doctor_total / max(bare_total, 1e-9):.2f}")
    if worst:
        text += f"; worst script {worst[0]}: {worst[1]:.3f} s -> {worst[2]:.3f} s ({worst[2] / max(worst[1], 1e-9):.2f}x)"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="one case folder name")
    parser.add_argument("--overhead", action="store_true", help="also time the bounded run with and without the doctor")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sample", type=int, default=4, help="time every N-th runnable case (each costs 2 x repeat processes)")
    options = parser.parse_args(argv)
    cases = [c for c in load_cases(CORPUS_DIR) if options.only in (None, c.name)]
    started = time.perf_counter()
    with Verifier() as verifier:
        scored = [score(case, verifier) for case in cases]
    print(report(scored))
    print(f"\n(diagnosed {len(cases)} cases in {time.perf_counter() - started:.0f} s)")
    if options.overhead:
        print(overhead(scored, options.repeat, options.sample))
    return 0


if __name__ == "__main__":
    sys.exit(main())
