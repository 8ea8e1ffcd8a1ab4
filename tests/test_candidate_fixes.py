"""Candidate fixes (issue 17, item 5): a rule proposes several rewrites in order, and
verification tries them in turn; the first one accepted is written, and its verdict says
which candidate it was and why the earlier ones were rejected.

AGF002 proposes zeroing at the start of the iteration (the usual hand fix: a gradient
norm read after the loop keeps the last step's gradients), then right after the step.
A loop that steps *before* its backward (the first backward runs before the loop) is
what the first candidate gets wrong: it zeroes what the step is about to use.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli.app import app
from autograd_fix.cli.runner import Job, check_file
from autograd_fix.codemods.engine import check_source
from autograd_fix.codemods.plans import FilePlans
from autograd_fix.codemods.registry import rule_by_code
from autograd_fix.verification.verdict import Verdict
from test_cli_verification import stub_stream  # tests/ is on sys.path (rootdir conftest)

STEP_FIRST = textwrap.dedent(
    """\
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(5)]
    x, y = data[0]
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    for x, y in data[1:]:
        optimizer.step()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
    print(f"last loss {loss.item():.4f}")
    """
)
AT_START = "for x, y in data[1:]:\n    optimizer.zero_grad()\n    optimizer.step()\n"
AFTER_STEP = "    optimizer.step()\n    optimizer.zero_grad()\n"

RUNNING_LOSS = textwrap.dedent(
    """\
    def train(model, loader, optimizer, criterion):
        running_loss = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            running_loss += loss
        print(running_loss / len(loader))
    """
)


def test_a_finding_carries_its_candidate_fixes_in_order_and_each_composes():
    rules = [rule_by_code("AGF002")]
    (finding,) = check_source(STEP_FIRST, rules).findings
    assert [fix.description for fix in (finding.fix, *finding.alternatives)] == [
        "insert `optimizer.zero_grad()` at the start of the iteration",
        "insert `optimizer.zero_grad()` after the step",
    ]
    plans = FilePlans.from_source(STEP_FIRST, rules, "train.py")
    (plan_id,) = plans.candidates
    first, second = plans.candidates[plan_id]
    assert AT_START in plans.compose([first]) and AFTER_STEP in plans.compose([second])


def test_agf006_proposes_item_then_detach():
    (finding,) = check_source(RUNNING_LOSS, [rule_by_code("AGF006")]).findings
    assert [fix.description for fix in (finding.fix, *finding.alternatives)] == [
        "accumulate `.item()` so the graph of each iteration can be freed",
        "accumulate `.detach()` so the graph of each iteration can be freed",
    ]


def _verify_with(judge, monkeypatch: pytest.MonkeyPatch, source: str = STEP_FIRST):
    from autograd_fix.cli import verify_patches
    from autograd_fix.verification import api

    job = Job(path="train.py", select=None, ignore=(), unsafe_fixes=True, compute_fix=False, fix_diffs=False, data=source.encode())
    outcome = check_file(job)
    monkeypatch.setattr(api, "verify_stream", stub_stream(judge))
    (result,) = verify_patches.verify_and_compose([outcome], [job], verify_patches.VerifySettings(), True, None)
    (record,) = result.findings
    return result, record


@pytest.mark.torch
def test_the_first_accepted_candidate_is_written_and_the_verdict_says_why(monkeypatch: pytest.MonkeyPatch):
    tried = []

    def judge(pair):
        tried.append(pair["rewritten"])
        if AT_START in pair["rewritten"]:
            return Verdict("rejected", "at step 0 model.weight: no gradient at step", pair["rule"])
        return Verdict("accepted", "every step's .grad = contributions since the previous step", pair["rule"])

    result, record = _verify_with(judge, monkeypatch)
    assert len(tried) == 2 and AT_START in tried[0] and AFTER_STEP in tried[1]
    assert record.fix_applies and AFTER_STEP in result.fixed and AT_START not in result.fixed
    assert record.verification.reason == (
        "candidate fix 2 of 2 (insert `optimizer.zero_grad()` after the step): every step's .grad = contributions "
        "since the previous step [candidate 1 (insert `optimizer.zero_grad()` at the start of the iteration) "
        "rejected: at step 0 model.weight: no gradient at step]"
    )


@pytest.mark.torch
def test_the_first_candidate_accepted_stops_the_search(monkeypatch: pytest.MonkeyPatch):
    tried = []
    result, record = _verify_with(lambda pair: tried.append(pair) or Verdict("accepted", "ok", pair["rule"]), monkeypatch)
    assert len(tried) == 1 and AT_START in result.fixed
    assert record.verification.reason.startswith("candidate fix 1 of 2 (insert `optimizer.zero_grad()` at the start")


@pytest.mark.torch
def test_when_every_candidate_is_rejected_nothing_is_written(monkeypatch: pytest.MonkeyPatch):
    result, record = _verify_with(lambda pair: Verdict("rejected", "no", pair["rule"]), monkeypatch)
    assert not record.fix_applies and result.fixed is None
    assert record.verification.verdict == "rejected"
    assert "candidate 1 (insert `optimizer.zero_grad()` at the start of the iteration) rejected: no" in record.verification.reason


@pytest.mark.slow
@pytest.mark.torch
def test_a_real_run_rejects_the_first_candidate_and_accepts_the_second(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(STEP_FIRST)
    result = CliRunner().invoke(app, ["--diff", "--color", "never", "train.py"], catch_exceptions=False)
    verdict = result.stdout.splitlines()[0]
    assert verdict.startswith("# AGF002 train.py:12:5 accepted: candidate fix 2 of 2 (insert `optimizer.zero_grad()` after the step)"), verdict
    assert "rejected: script driver (top-level code)" in verdict and "no gradient at step" in verdict
    assert "+    optimizer.zero_grad()\n     loss = nn.functional" in result.stdout


@pytest.mark.torch
def test_a_candidate_that_cannot_be_composed_gives_way_to_the_next(monkeypatch: pytest.MonkeyPatch):
    from autograd_fix.cli import verify_patches

    real_pair = verify_patches._FileQueue.pair
    monkeypatch.setattr(
        verify_patches._FileQueue, "pair",
        lambda self, r: None if not self.current(r).endswith("~2") else real_pair(self, r),
    )
    result, record = _verify_with(lambda pair: Verdict("accepted", "ok", pair["rule"]), monkeypatch)
    assert record.fix_applies and AFTER_STEP in result.fixed
    assert "rejected: the fix cannot be applied on top of the others" in record.verification.reason


@pytest.mark.torch
def test_agf006_falls_back_to_detach_when_item_is_rejected(monkeypatch: pytest.MonkeyPatch):
    def judge(pair):
        if "loss.item()" in pair["rewritten"]:
            return Verdict("rejected", "outputs differ: a tensor was needed", pair["rule"])
        return Verdict("accepted", "accumulated values equal", pair["rule"])

    result, record = _verify_with(judge, monkeypatch, RUNNING_LOSS)
    assert record.fix_applies and "running_loss += loss.detach()" in result.fixed
    assert record.verification.reason.startswith("candidate fix 2 of 2 (accumulate `.detach()`")
