"""Recall of `autograd-fix doctor` on the three corpora issue 19's done-criterion names,
each scored the same way: a bug is found when a dynamic finding has the bug's rule code
at the bug's site ("site") or on one of the bug's own lines ("line"); a near-miss is
clean when the run gives no finding of the rule there.

- ``bug``: tests/corpus/ (scored by `doctor_corpus.score`: the case's ``AGFnnn line``).
- ``verification``: benchmarks/verification_corpus/, the cases with a driver (``kind =
  "script"``; library cases have nothing to run without ``--driver``). The bug's lines
  (`anchor_lines`) are the lines of ``buggy.py`` its hand fix (``fixed.py``) changes (for
  a pure insertion, the lines on either side of it), plus where the rule's convention puts
  the bug; the near-miss is ``fixed.py`` itself: no
  finding of the case's rule may remain there.
- ``long``: benchmarks/long_runs/ (needs ``--snapshots``): the injected bug's lines; the
  near-miss is the upstream script: no finding on `near_misses.toml`'s lines in it, and
  none of the rule where the injected bug was (other findings in upstream code are
  listed with the oracle: they may be real). Cases whose bug is in a library module
  (``library = true``) run through the project script that drives it (found, as
  ``autograd-fix doctor LIBRARY.py`` finds it).

Rules whose bugs run correctly (no runtime symptom: `NO_RUNTIME_SYMPTOM`) are listed
apart, not counted. Every dynamic finding is also compared with the static rules at its
site (``static: missed`` lines are the static oracle: `--oracle` lists them).

    python benchmarks/doctor_recall.py [--corpus bug|verification|long ...] [--only NAME]
                                       [--snapshots DIR] [--oracle] [--json FILE]
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import shutil
import sys
import tempfile
import time
from autograd_fix.compat import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "long_runs"))

from autograd_fix.cli.doctor import _static_findings, static_agreement  # noqa: E402
from autograd_fix.verification import Verifier  # noqa: E402
from autograd_fix.verification.doctor.diagnose import diagnose  # noqa: E402
from autograd_fix.verification.doctor.outcome import Finding  # noqa: E402

#: rules whose bugs run correctly: what they flag has no symptom a run can show (AGF100:
#: a ``noqa`` comment that suppresses nothing is text, never executed)
NO_RUNTIME_SYMPTOM = frozenset({"AGF005", "AGF007", "AGF009", "AGF012", "AGF015", "AGF016", "AGF100"})
RUN_TIMEOUT_S = 60.0


@dataclass
class Result:
    """One bug (or near-miss) of one corpus, as the run showed it."""

    corpus: str
    name: str
    rule: str
    kind: str  # bug | near-miss
    status: str
    lines: list[int] = field(default_factory=list)  # the bug's own lines (1-based, in the scored file)
    findings: list[Finding] = field(default_factory=list)
    found: bool = False
    exact: bool = False
    oracle: list[str] = field(default_factory=list)  # dynamic findings the static rules miss

    @property
    def runnable(self) -> bool:
        return self.status in ("finished", "crashed")


def changed_lines(buggy: str, fixed: str) -> list[int]:
    """Lines of `buggy` the fix replaces or deletes; for a pure insertion, the lines on
    either side of it (the fix goes between them)."""
    old, new = buggy.splitlines(), fixed.splitlines()
    lines: set[int] = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            lines.update(range(i1 + 1, i2 + 1))
        elif tag == "insert":
            lines.update(n for n in (i1, i1 + 1) if 1 <= n <= len(old))
    return sorted(lines)


def anchor_lines(rule: str, buggy: str, fixed: str, path: str) -> list[int]:
    """The bug's own lines: those its fix changes, and where the rule's convention puts
    the bug: the lines the static rule reports it on that the fix clears (AGF003's
    in-place op when the fix clones before it), and for AGF002 the optimizer steps of
    the function the fix changes (the bug corpus's convention: the step that uses the
    stale gradients; the fix inserts ``zero_grad`` before the backward)."""
    lines = set(changed_lines(buggy, fixed))
    before = [line for code, line in _static_findings(buggy, path) if code == rule]
    after = len([1 for code, _ in _static_findings(fixed, path) if code == rule])
    if len(before) > after:
        lines.update(before)
    if rule == "AGF002":
        try:
            tree = ast.parse(buggy)
        except SyntaxError:
            return sorted(lines)
        changed = set(changed_lines(buggy, fixed))
        scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module))
                  and any(getattr(n, "lineno", 1) <= c <= getattr(n, "end_lineno", 10**9) for c in changed)]
        scope = max(scopes, key=lambda n: getattr(n, "lineno", 0)) if scopes else tree
        lines.update(n.lineno for n in ast.walk(scope) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                     and n.func.attr == "step")
    return sorted(lines)


def _score_bug(result: Result, text: str) -> None:
    wanted = [(result.rule, line) for line in result.lines]
    result.exact = any(f.code == result.rule and f.line in result.lines for f in result.findings)
    result.found = result.exact or any(f.code == result.rule and static_agreement(f, text, wanted) is True
                                       for f in result.findings)


def _oracle(result: Result, texts: dict[str, str]) -> None:
    statics = {path: _static_findings(text, path) for path, text in texts.items()}
    for f in result.findings:
        if f.path in texts and static_agreement(f, texts[f.path], statics[f.path]) is False:
            result.oracle.append(f"{result.corpus}/{result.name}: {f.path}:{f.line} {f.code} {f.message[:110]}")


def _status(diagnosis) -> str:
    """The run's status; a run that stopped at a missing module did not run here."""
    if diagnosis.status == "crashed" and "ModuleNotFoundError" in diagnosis.detail:
        return "missing module: " + diagnosis.detail[-80:]
    return diagnosis.status


def _diagnose(project: Path, script: str, verifier: Verifier, argv: list[str] | None = None):
    path = project / script
    text = path.read_text(encoding="utf-8")
    return diagnose(str(path), text, argv, timeout=RUN_TIMEOUT_S, verifier=verifier), text


# -- the bug corpus ------------------------------------------------------------------------


def bug_corpus(verifier: Verifier, only: str | None) -> list[Result]:
    from bug_corpus import CORPUS_DIR, load_cases
    from doctor_corpus import score

    results = []
    for case in load_cases(CORPUS_DIR):
        if only not in (None, case.name):
            continue
        scored = score(case, verifier)
        status = scored.status if scored.runnable else "not runnable"
        lines = [line for code, line in case.expected if code == case.rule]
        result = Result("bug", case.name, case.rule, case.kind, status, lines, scored.findings, scored.found, scored.exact)
        if case.kind == "near-miss":
            result.found = False
        _oracle(result, {"buggy.py": (case.folder / "buggy.py").read_text(encoding="utf-8")})
        results.append(result)
    return results


# -- the verification corpus ------------------------------------------------------------------


def verification_corpus(verifier: Verifier, only: str | None) -> list[Result]:
    root = HERE / "verification_corpus"
    results = []
    for folder in sorted(p for p in root.iterdir() if (p / "case.toml").is_file()):
        if only and not folder.name.startswith(only):
            continue
        case = tomllib.loads((folder / "case.toml").read_text())
        buggy, fixed = (folder / "buggy.py").read_text(encoding="utf-8"), (folder / "fixed.py").read_text(encoding="utf-8")
        if case["kind"] != "script":
            results.append(Result("verification", folder.name, case["rule"], "bug", "library (no driver)"))
            continue
        with tempfile.TemporaryDirectory(prefix="doctor-vc-") as scratch:
            project = Path(scratch) / folder.name
            shutil.copytree(folder, project)
            (project / "pyproject.toml").write_text(f"[project]\nname = 'case{folder.name[:2]}'\n")
            bug, text = _diagnose(project, "buggy.py", verifier)
            near, fixed_text = _diagnose(project, "fixed.py", verifier)
        result = Result("verification", folder.name, case["rule"], "bug", _status(bug), anchor_lines(case["rule"], buggy, fixed, "buggy.py"),
                        [f for f in bug.findings if f.path == "buggy.py"])
        _score_bug(result, text)
        _oracle(result, {"buggy.py": text})
        results.append(result)
        clean = Result("verification", folder.name + " (fixed.py)", case["rule"], "near-miss", _status(near),
                       [], [f for f in near.findings if f.path == "fixed.py" and f.code == case["rule"]])
        results.append(clean)
    return results


# -- the long-run benchmark -------------------------------------------------------------------


def long_runs(verifier: Verifier, only: str | None, snapshots: Path | None) -> list[Result]:
    if snapshots is None:
        return []
    from run import lay_out, load_case  # benchmarks/long_runs/run.py

    near_items = tomllib.loads((HERE / "long_runs" / "near_misses.toml").read_text())["near_miss"]
    results = []
    for path in sorted((HERE / "long_runs" / "cases").glob("*.toml")):
        if only and not path.stem.startswith(only):
            continue
        try:
            case = load_case(path, snapshots)
        except (FileNotFoundError, OSError, SystemExit, Exception) as error:  # noqa: BLE001 - a snapshot this machine lacks
            results.append(Result("long", path.stem, "?", "bug", f"no snapshot ({str(error)[:80]})"))
            continue
        script = case["script"]
        with tempfile.TemporaryDirectory(prefix="doctor-long-") as scratch:
            lay_out(case, Path(scratch), uncapped=False)
            project = Path(scratch) / case["upstream"]
            bug, text = _diagnose(project, script, verifier)
            texts = {script: text}
            for name in {f.path for f in bug.findings} - {script}:
                if (project / name).is_file():
                    texts[name] = (project / name).read_text(encoding="utf-8")
            (project / script).write_text(case["fixed"])
            near, _ = _diagnose(project, script, verifier)
        result = Result("long", path.stem, case["rule"], "bug", _status(bug),
                        anchor_lines(case["rule"], case["buggy"], case["fixed"], script),
                        [f for f in bug.findings if f.path == script])
        _score_bug(result, text)
        _oracle(result, texts)
        results.append(result)
        watched = [i for i in near_items if i["upstream"] == case["upstream"] and i["file"] == script]
        near_lines = [case["fixed"][: case["fixed"].index(i["text"])].count("\n") + 1 for i in watched if i["text"] in case["fixed"]]
        fixed_lines = changed_lines(case["fixed"], case["buggy"])  # the fix's lines, in the upstream file
        wrong = [f for f in near.findings if f.path == script and (f.line in near_lines or (
            f.code == case["rule"] and any(abs(f.line - line) <= 2 for line in fixed_lines)))]
        clean = Result("long", path.stem + " (upstream)", case["rule"], "near-miss", _status(near), near_lines, wrong)
        clean.oracle = [f"long/{path.stem} upstream (not the injected bug): {f.path}:{f.line} {f.code} {f.message[:110]}"
                        for f in near.findings if f not in wrong]
        results.append(clean)
    return results


# -- report --------------------------------------------------------------------------------


def report(results: list[Result], corpus: str) -> list[str]:
    mine = [r for r in results if r.corpus == corpus]
    bugs = [r for r in mine if r.kind == "bug" and r.runnable and r.rule not in NO_RUNTIME_SYMPTOM]
    silent = [r for r in mine if r.kind == "bug" and r.runnable and r.rule in NO_RUNTIME_SYMPTOM]
    near = [r for r in mine if r.kind == "near-miss" and r.runnable]
    skipped = [r for r in mine if not r.runnable]
    found, exact = sum(r.found for r in bugs), sum(r.exact for r in bugs)
    noisy = [r for r in near if r.findings]
    lines = [f"## {corpus}: {len(mine)} entries, {len(skipped)} not run here",
             f"bugs with a runtime symptom found at their site: {found}/{len(bugs)}, on one of the bug's lines: {exact}/{len(bugs)}",
             f"bugs of rules without a runtime symptom: {sum(r.found for r in silent)}/{len(silent)} (not counted)",
             f"near-misses with a finding: {len(noisy)}/{len(near)}"]
    per_rule: dict[str, list[Result]] = {}
    for r in bugs:
        per_rule.setdefault(r.rule, []).append(r)
    lines.append("per rule (site/line/of): " + ", ".join(
        f"{rule} {sum(r.found for r in rs)}/{sum(r.exact for r in rs)}/{len(rs)}" for rule, rs in sorted(per_rule.items())))
    for r in bugs:
        if not r.exact:
            got = ", ".join(f"{f.code} {f.line}" for f in r.findings) or "nothing"
            lines.append(f"{'site only' if r.found else 'MISSED   '} {r.name} [{r.rule}]: lines {r.lines[:6]}; got {got}")
    for r in noisy:
        lines.append(f"NOISY     {r.name}: " + "; ".join(f"{f.code} {f.line} {f.message[:90]}" for f in r.findings))
    for r in skipped:
        lines.append(f"not run   {r.name}: {r.status}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="append", choices=("bug", "verification", "long"))
    parser.add_argument("--only", help="one case (folder name, or its prefix)")
    parser.add_argument("--snapshots", type=Path, help="repository snapshots for the long-run cases")
    parser.add_argument("--oracle", action="store_true", help="list every dynamic finding the static rules miss")
    parser.add_argument("--json", type=Path, help="also write every result as JSON")
    options = parser.parse_args(argv)
    corpora = options.corpus or ["bug", "verification", "long"]
    started = time.perf_counter()
    results: list[Result] = []
    with Verifier() as verifier:
        if "bug" in corpora:
            results += bug_corpus(verifier, options.only)
        if "verification" in corpora:
            results += verification_corpus(verifier, options.only)
        if "long" in corpora:
            results += long_runs(verifier, options.only, options.snapshots)
    for corpus in corpora:
        print("\n".join(report(results, corpus)) + "\n")
    if options.oracle:
        print("## static oracle: dynamic findings the static rules miss at their site")
        for line in (line for r in results for line in r.oracle):
            print(line)
    print(f"({len(results)} entries in {time.perf_counter() - started:.0f} s)")
    if options.json:
        options.json.write_text(json.dumps([{**r.__dict__, "findings": [f.to_json() for f in r.findings]} for r in results], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
