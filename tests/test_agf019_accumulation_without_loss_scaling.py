"""AGF019 beyond its inline examples: the fix on a real-looking script, look-alikes that
must stay silent, and the contract (the first step's gradient is the mean of the
micro-batches' gradients) accepting the right fix and rejecting wrong ones."""

from __future__ import annotations

import textwrap

import pytest

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.registry import rule_by_code
from autograd_fix.verification import verify_pair

RULE = rule_by_code("AGF019")
CHECKS = RULE.contract.checks  # type: ignore[union-attr]


def _check(source: str):
    return check_source(textwrap.dedent(source).lstrip("\n"), [RULE], path="train.py", options=FixOptions(unsafe_fixes=True))


# A script in the shape of the PyTorch forum's accumulation recipe, minus the division.
SCRIPT = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 3))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
accumulation_steps = 4
training_set = [(torch.randn(4, 10), torch.randint(0, 3, (4,))) for _ in range(8)]
model.zero_grad()
for i, (inputs, labels) in enumerate(training_set):
    loss = criterion(model(inputs), labels)
    loss.backward()
    if (i + 1) % accumulation_steps == 0:
        optimizer.step()
        model.zero_grad()
print(model[0].weight.sum().item())
"""


def test_the_fix_divides_the_named_loss_before_backward() -> None:
    result = _check(SCRIPT)
    (finding,) = result.findings
    assert finding.code == "AGF019" and finding.span.line == 13
    assert "divide the loss by `accumulation_steps`" in finding.message
    assert "    loss = loss / accumulation_steps\n    loss.backward()\n" in result.fixed


@pytest.mark.parametrize(
    "scaled",
    [
        "    loss = loss / accumulation_steps\n",
        "    loss /= accumulation_steps\n",
        "    loss = loss * (1 / accumulation_steps)\n",
        "    loss = loss.div(accumulation_steps)\n",
        "    loss = torch.div(loss, accumulation_steps)\n",
    ],
    ids=["divide", "in-place", "reciprocal", "div-method", "torch-div"],
)
def test_loops_that_already_scale_stay_silent(scaled: str) -> None:
    source = SCRIPT.replace("    loss.backward()\n", scaled + "    loss.backward()\n")
    assert _check(source).findings == []


def test_scaling_the_gradients_before_the_step_stays_silent() -> None:
    source = SCRIPT.replace(
        "        optimizer.step()\n",
        "        for p in model.parameters():\n            p.grad.div_(accumulation_steps)\n        optimizer.step()\n",
    )
    assert _check(source).findings == []


def test_a_user_class_with_a_step_method_is_not_an_optimizer() -> None:
    source = SCRIPT.replace("optimizer = torch.optim.SGD(model.parameters(), lr=0.1)", "progress = Progress()")
    source = source.replace("optimizer.step()", "progress.step()")
    source = source.replace("import torch\n", "import torch\nfrom tqdm_like import Progress\n")
    assert _check(source).findings == []


def test_zeroing_on_every_micro_batch_is_no_accumulation() -> None:
    source = SCRIPT.replace("    loss.backward()\n", "    model.zero_grad()\n    loss.backward()\n")
    assert _check(source).findings == []


def run(verifier, original: str, rewritten: str):
    return verify_pair(textwrap.dedent(original), textwrap.dedent(rewritten), checks=CHECKS, verifier=verifier, timeout=60)


def check(verdict, name: str) -> dict:
    (unit,) = verdict.units
    return next(c for c in unit.evidence["checks"] if c["check"] == name)


def test_the_rules_own_fix_is_accepted_as_the_mean_of_the_micro_batches(verifier) -> None:
    fixed = _check(SCRIPT).fixed
    verdict = run(verifier, SCRIPT, fixed)
    assert verdict.verdict == "accepted", verdict.reason
    detail = check(verdict, "accumulated_grads_are_window_mean")["detail"]
    assert "mean of the original's 4 micro-batch gradients" in detail
    # the training loop is capped at 3 working iterations in other runs; this contract's
    # runs go on to the first step, so the 4-batch window closes
    assert "capped at 4 iterations" in verdict.reason


def test_dividing_by_the_wrong_count_is_rejected(verifier) -> None:
    wrong = SCRIPT.replace("    loss.backward()\n", "    loss = loss / 2\n    loss.backward()\n")
    verdict = run(verifier, SCRIPT, wrong)
    assert verdict.verdict == "rejected", verdict.reason
    assert "0.5 x the original's, expected 1/4" in check(verdict, "accumulated_grads_are_window_mean")["detail"]


def test_a_fix_that_also_zeroes_every_micro_batch_is_rejected(verifier) -> None:
    wrong = SCRIPT.replace("    loss.backward()\n", "    loss = loss / accumulation_steps\n    model.zero_grad()\n    loss.backward()\n")
    verdict = run(verifier, SCRIPT, wrong)
    assert verdict.verdict == "rejected", verdict.reason


def test_a_reference_backward_through_a_copy_is_not_a_micro_batch(verifier, repo_root) -> None:
    # the example script computes the big-batch gradient on a deep copy before its loop:
    # that backward reaches the copy's parameters, not the stepped ones
    source = (repo_root / "examples" / "accumulation_without_loss_scaling.py").read_text()
    fixed = _check(source).fixed
    verdict = run(verifier, source, fixed)
    assert verdict.verdict == "accepted", verdict.reason
    assert "the mean of the original's 4 micro-batch gradients" in verdict.reason
