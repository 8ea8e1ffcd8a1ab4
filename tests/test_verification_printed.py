"""What a script prints is one of its outputs.

Evaluation scripts report their results by printing them, not by leaving them in module
globals: a rewrite that changes a printed validation loss changed the program's result,
and a rewrite that only changes a printed timing or object address did not. Modelled on
the semseg `validate()` (a size-weighted loss meter whose weight a wrong rewrite drops),
an evaluation loop whose wrong rewrite keeps only the last batch, and an AGF006
running loss whose wrong rewrite rescales it.
"""

from __future__ import annotations

import textwrap

import pytest

from autograd_fix.verification import verify_pair
from autograd_fix.verification.printed import PrintedText, mask_volatile, printed_differences

AGF001 = ("outputs_equal", "grads_untouched", "retained_graph_not_higher", "retained_graph_lower_if_any")
AGF006 = ("accumulated_values_equal", "outputs_equal", "retained_graph_not_higher")
TOL = {"rtol": 1.3e-6, "atol": 1e-5}


def printed(text: str, **kw) -> dict:
    sink = PrintedText(**kw)
    sink.write(text)
    return sink.record()


def differences(a: str, b: str, **kw) -> list[str]:
    return printed_differences(printed(a), printed(b), **TOL, **kw)


# -- comparison rules, on the text alone ------------------------------------------------------------
def test_a_changed_printed_loss_is_a_difference():
    diffs = differences("epoch 0: val loss 1.4446 acc 0.2500\n", "epoch 0: val loss 1.4391 acc 0.2500\n")
    assert len(diffs) == 1
    assert "1.4446 vs 1.4391" in diffs[0]


def test_rounding_apart_by_one_printed_digit_is_not_a_difference():
    # 0.123449999 and 0.12345001 are equal within float32 tolerance, yet print apart
    assert differences(f"loss {0.123449999:.4f}\n", f"loss {0.12345001:.4f}\n") == []


def test_two_printed_digits_apart_is_a_difference():
    assert differences("loss 0.1234\n", "loss 0.1236\n")


def test_integers_are_compared_exactly():
    assert differences("correct 5 of 9\n", "correct 6 of 9\n")


def test_full_precision_floats_use_the_float_tolerance():
    assert differences("mean 0.30000000000000004\n", "mean 0.3\n") == []
    assert differences("mean 0.300001\n", "mean 0.300002\n") == []  # within atol=1e-5
    assert differences("mean 0.30001\n", "mean 0.30004\n")


def test_a_missing_line_is_a_difference():
    diffs = differences("epoch 0 loss 1.0\nepoch 1 loss 0.5\n", "epoch 0 loss 1.0\n")
    assert diffs == ["printed 2 line(s) in the original, 1 in the rewritten"]


@pytest.mark.parametrize(
    ("original", "rewritten"),
    [
        ("validated in 0.8123s, loss 0.5\n", "validated in 1.9s, loss 0.5\n"),
        ("batch time 35.2 ms loss 0.5\n", "batch time 12 ms loss 0.5\n"),
        ("<Meter object at 0x7f3a5c2b1e40>\n", "<Meter object at 0x7f11aa0c9d10>\n"),
        ("2026-12-01 07:22:47 loss 0.5\n", "2026-12-01 07:23:02 loss 0.5\n"),
        ("  3/10 [00:01<00:02, 4.95it/s]\rdone 0.5\n", "done 0.5\n"),
        ("loss tensor(0.5000, grad_fn=<MeanBackward0>)\n", "loss tensor(0.5000)\n"),
    ],
)
def test_what_two_runs_of_one_program_print_differently_is_masked(original, rewritten):
    assert differences(original, rewritten) == []


@pytest.mark.parametrize(
    ("original", "rewritten"),
    [
        ("val accuracy 0.225 ; logits hold a graph: True\n", "val accuracy 0.225 ; logits hold a graph: False\n"),
        ("mean loss 0.5\ngraph nodes kept alive by the loss list: 354\n", "mean loss 0.5\ngraph nodes kept alive by the loss list: 0\n"),
        ("out.requires_grad = True\n", "out.requires_grad = False\n"),
    ],
)
def test_lines_about_autograd_state_are_not_compared(original, rewritten):
    # the fixes judged on outputs change autograd's state by design
    assert differences(original, rewritten) == []


def test_a_result_line_next_to_an_autograd_line_is_still_compared():
    assert differences("loss 0.5\ngraph held: True\n", "loss 0.7\ngraph held: False\n")


def test_masking_leaves_the_rest_of_the_line_compared():
    assert differences("validated in 0.8s, loss 0.5\n", "validated in 0.9s, loss 0.7\n")


def test_temporary_paths_are_masked():
    import tempfile

    temp = tempfile.gettempdir()
    assert mask_volatile(f"saved {temp}/tmpab12cd/x.pt (best)\n") == "saved <tmp> (best)\n"


def test_a_one_number_tensor_compares_as_the_number():
    # AGF006: `running += loss` printed a tensor, `running += loss.item()` a float
    assert differences("loss tensor(2.3026, grad_fn=<AddBackward0>)\n", "loss 2.302585\n") == []
    assert differences("{'train_loss': [tensor(1.0423), tensor(0.9527)]}\n", "{'train_loss': [1.0423438847064972, 0.9526653587818146]}\n") == []
    assert differences("loss tensor(2.3026)\n", "loss 2.3126\n")
    assert differences("loss tensor([2.3026, 1.0])\n", "loss [2.3026, 1.0]\n")


def test_capture_is_bounded_and_only_the_common_prefix_is_compared():
    line = "step loss 0.5000\n"
    a, b = printed(line * 50, limit=len(line) * 10), printed(line * 40 + "step loss 0.9\n", limit=len(line) * 10)
    assert a["truncated"] and a["chars"] == len(line) * 50 and len(a["text"]) == len(line) * 10
    assert printed_differences(a, b, **TOL) == []
    assert printed_differences(a, printed("step loss 0.7\n" * 50, limit=len(line) * 10), **TOL)


def test_what_is_printed_still_reaches_the_runs_log():
    import io

    log = io.StringIO()
    sink = PrintedText(limit=4, forward=log)
    print("loss 0.5", file=sink)
    assert log.getvalue() == "loss 0.5\n"
    assert sink.record() == {"text": "loss", "chars": 9, "truncated": True}


# -- end to end: scripts judged on what they print ---------------------------------------------------
VALIDATE = """
import time

import torch
from torch import nn


class AverageMeter:
    def __init__(self):
        self.sum, self.count = 0.0, 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n


def validate(val_loader, model, criterion):
    meter = AverageMeter()
    model.eval()
    start = time.time()
    for input, target in val_loader:
        output = model(input)
        loss = criterion(output, target)
        meter.update(loss.item(), input.size(0))
    print(f"validated {len(val_loader)} batches in {time.time() - start:.4f}s")
    return meter


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    criterion = nn.CrossEntropyLoss()
    val_loader = [(torch.randn(n, 6), torch.randint(0, 3, (n,))) for n in (4, 4, 1)]
    meter = validate(val_loader, model, criterion)
    print(f"val loss {meter.sum / meter.count:.4f} ({meter})")


if __name__ == "__main__":
    main()
"""
FIXED = VALIDATE.replace(
    "        output = model(input)\n        loss = criterion(output, target)\n",
    "        with torch.no_grad():\n            output = model(input)\n            loss = criterion(output, target)\n",
)




def run(verifier, original: str, rewritten: str, checks):
    assert original != rewritten
    return verify_pair(textwrap.dedent(original), textwrap.dedent(rewritten), checks=checks, verifier=verifier, timeout=60, entry="__main__")


def test_no_grad_fix_is_accepted_with_its_printed_results_equal_and_timings_masked(verifier):
    verdict = run(verifier, VALIDATE, FIXED, AGF001)
    assert verdict.verdict == "accepted", verdict.reason
    assert "outputs equal" in verdict.reason
    # the run ends when `validate` returns (AGF001's contract is decided by then): its own line
    assert verdict.units[0].evidence["rewritten"]["printed"] == {"lines": 1, "chars": pytest.approx(31, abs=10), "truncated": False}


def test_no_grad_fix_that_drops_the_batch_size_weight_is_rejected_on_the_printed_loss(verifier):
    wrong = FIXED.replace("meter.update(loss.item(), input.size(0))", "meter.update(loss.item())")
    verdict = run(verifier, VALIDATE, wrong, AGF001)
    assert verdict.verdict == "rejected", verdict.reason
    # the run ends when `validate` returns, before `main` prints the loss: the meter it
    # returned is compared by what it holds (its class name alone let this rewrite through)
    assert "validate() returned (the changed function, where the run stopped).sum" in verdict.reason, verdict.reason


RUNNING = """
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Linear(5, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(4, 5), torch.randint(0, 3, (4,))) for _ in range(4)]
for epoch in range(2):
    running_loss = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        running_loss += loss
    print(f"epoch {epoch}: loss {running_loss / len(loader)}")
    del running_loss
"""


def test_item_accumulation_fix_prints_a_number_where_the_original_printed_a_tensor(verifier):
    verdict = run(verifier, RUNNING, RUNNING.replace("running_loss += loss\n", "running_loss += loss.item()\n"), AGF006)
    assert verdict.verdict == "accepted", verdict.reason


@pytest.mark.parametrize(
    "wrong",
    ["running_loss += loss.item() / x.size(0)\n", "running_loss = loss.item()\n"],
    ids=["changed-scale", "overwritten"],
)
def test_item_accumulation_with_a_changed_printed_value_is_rejected(verifier, wrong):
    verdict = run(verifier, RUNNING, RUNNING.replace("running_loss += loss\n", wrong), AGF006)
    assert verdict.verdict == "rejected", verdict.reason
    assert "printed line 1" in verdict.reason


CHECKPOINT = """
import os

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 2)
score = model(torch.randn(3, 4)).sum().item()
path = os.path.abspath("best.pt")
torch.save(model.state_dict(), path)
print(f"score {score:.4f}, saved to {path}")
del path
"""


def test_the_shadow_copy_path_is_printed_as_the_users(verifier):
    # each side runs in its own copy of the project: where it saved must print the same
    fixed = CHECKPOINT.replace("score = model(", "with torch.no_grad():\n    score = model(")
    verdict = run(verifier, CHECKPOINT, fixed, AGF001)
    assert verdict.verdict == "accepted", verdict.reason
    assert verdict.units[0].evidence["original"]["printed"]["lines"] == 1
