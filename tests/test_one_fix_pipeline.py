"""One fix pipeline (issue 18): `--no-verify --apply` and a verified `--apply` in which
every patch is accepted write the same bytes, and fixes that only the fixed text allows
(follow-ons) are announced, counted and verified in both. The whole corpus is a
benchmark (benchmarks/one_fix_pipeline.py); here a budget of it."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.rule import Contract, Rule

ROOT = Path(__file__).resolve().parent.parent


def _benchmark():
    spec = importlib.util.spec_from_file_location("one_fix_pipeline", ROOT / "benchmarks" / "one_fix_pipeline.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["one_fix_pipeline"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


BENCHMARK = _benchmark()
#: every fifth corpus file with a fix, and the cases that once disagreed
FILES = [
    path
    for index, path in enumerate(BENCHMARK.corpus_files(list(BENCHMARK.CORPORA)))
    if index % 5 == 0 or path.parent.name in {"agf009_01_pymor_neural_network_data", "agf018_01_famus_grad_operator"}
]


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_static_and_verified_paths_write_the_same_bytes(path: Path) -> None:
    comparison = BENCHMARK.compare(path)
    assert comparison.static == comparison.verified, comparison.errors
    if comparison.static is not None:  # the verified path parses the original and the result, once each
        # (and the final text once more when several fixes together left an import unused)
        dropped = _import_lines(path.read_text()) > _import_lines(comparison.verified or "")
        assert comparison.verified_parses <= 2 + comparison.verified_follow_ons + dropped


def _import_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.lstrip().startswith(("import ", "from ")))


CONTRACT = Contract(description="test", checks=("outputs_equal",))


class RenameModelCall(Rule):
    """Renames `net(` to `model(`."""

    code, name, safety, message, contract = "AGF905", "rename-net", Applicability.SAFE, "rename", CONTRACT
    triggers = ("net",)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "net":
            self.report(node, fix=Fix(Applicability.SAFE, (Edit(node, lambda n: n.with_changes(value="model")),), "rename"))


class CallForward(Rule):
    """Fires only on `model(...)` calls, which exist once the rename went in."""

    code, name, safety, message, contract = "AGF906", "call-forward", Applicability.SAFE, "forward", CONTRACT
    triggers = ("model",)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "model":
            forward = lambda n: cst.Attribute(n, cst.Name("forward"))  # noqa: E731
            self.report(node, fix=Fix(Applicability.SAFE, (Edit(node.func, forward),), "forward"))


SOURCE = textwrap.dedent(
    """\
    import torch

    out = net(torch.ones(2))
    print(out)
    """
)


def test_a_follow_on_fix_is_announced_with_its_round_and_applied() -> None:
    result = check_source(SOURCE, [RenameModelCall, CallForward], options=FixOptions())
    assert [f.code for f in result.findings] == ["AGF905"]
    (follow_on,) = result.follow_ons
    assert (follow_on.round, follow_on.finding.code, follow_on.applied) == (2, "AGF906", True)
    assert follow_on.finding.span.line == 3  # mapped back to the original text
    assert result.fixed == SOURCE.replace("net(torch.ones(2))", "model.forward(torch.ones(2))")
    again = check_source(result.fixed, [RenameModelCall, CallForward])
    assert [f for f in again.findings if f.fix is not None] == []


def test_the_verified_path_verifies_a_follow_on_and_counts_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autograd_fix.cli import runner, verify_patches
    from autograd_fix.cli.runner import Job, check_file
    from autograd_fix.codemods import registry

    rules = [RenameModelCall, CallForward]
    monkeypatch.setattr(registry, "lazy_rules", lambda select, ignore: rules)  # check_file imports it when it runs
    # the command line's prefilter, before it imports any rule: these rules' own
    monkeypatch.setattr(runner, "triggered_codes", lambda codes, text: tuple(r.code for r in rules if r.may_fire_on(text)))
    monkeypatch.setattr(verify_patches, "select_rules", lambda select, ignore: rules)
    path = tmp_path / "infer.py"
    path.write_text(SOURCE)
    static = check_file(Job(str(path), None, (), True, True, False))
    job = Job(str(path), None, (), True, False, False)
    seen: list[str] = []

    def judge(next_pair, on_verdict, **_):
        from autograd_fix.verification.verdict import Status, Verdict

        while (item := next_pair()) is not None:
            key, pair = item
            seen.append(pair["rule"])
            on_verdict(key, Verdict(Status.ACCEPTED, "stub", pair["rule"], ()))

    from autograd_fix.verification import api

    monkeypatch.setattr(api, "verify_stream", judge)
    (outcome,) = verify_patches.verify_and_compose([check_file(job)], [job], verify_patches.VerifySettings(), True, None, verifier=object())
    assert seen == ["AGF905", "AGF906"]  # the follow-on went through verification too
    assert [(r.code, r.round, r.fix_applies) for r in outcome.findings] == [("AGF905", 1, True), ("AGF906", 2, True)]
    assert [(r.code, r.round, r.fix_applies) for r in static.findings] == [("AGF905", 1, True), ("AGF906", 2, True)]
    assert outcome.fixed == static.fixed == SOURCE.replace("net(torch.ones(2))", "model.forward(torch.ones(2))")
