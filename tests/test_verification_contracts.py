"""Contracts for fixes meant to change something, on pairs modelled on real bugs.

Each pair is a buggy training script (or function) and a fix a user would write, or a
plausible wrong one: the original crashes in backward after a complete forward pass; a
`.data` mutation silently corrupts gradients; a straight-through estimator or gradient
reversal layer misses a `None`; `.item()` replaces a tensor accumulator; `zero_grad`
lands in the wrong place; the changed code sits behind an early exit. Scripts run whole
(``entry="__main__"``), as their own driver would.
"""

from __future__ import annotations

import textwrap

import pytest

from autograd_fix.verification import verify_pair

AGF002 = ("step_grads_match_contributions",)
AGF003 = ("original_error_gone", "forward_values_equal", "gradients_match_finite_differences", "parameters_change_as_intended")
AGF004 = ("original_error_gone", "gradcheck_if_original_matches", "backward_agrees_with_original")
AGF006 = ("accumulated_values_equal", "outputs_equal", "retained_graph_not_higher")
AGF008 = ("gradients_match_finite_differences",)
AGF009 = ("equal_or_gradients_corrected",)




def run(verifier, original: str, rewritten: str, checks, **kw):
    assert original != rewritten
    return verify_pair(textwrap.dedent(original), textwrap.dedent(rewritten), checks=checks, verifier=verifier, timeout=60, **kw)


def as_library(script: str) -> str:
    """`script` with its top-level driver under a `__main__` guard: the shape function
    mode needs, since it imports the real module (every unguarded statement runs)."""
    head, marker, tail = script.partition("\ntorch.manual_seed(0)\n")
    body = marker.lstrip("\n") + tail
    return head + "\n\nif __name__ == \"__main__\":\n" + textwrap.indent(body, "    ")


def check(verdict, name: str) -> dict:
    (unit,) = verdict.units
    return next(c for c in unit.evidence["checks"] if c["check"] == name)


# -- the original crashes in backward: its forward pass is still compared ----------------------
# A residual bias added in place to a sigmoid output, which sigmoid saved for its backward:
# "one of the variables needed for gradient computation has been modified by an inplace
# operation" at the first loss.backward(), after the forward pass completed.
INPLACE_SCRIPT = """
import torch
from torch import nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 16)
        self.shift = nn.Parameter(torch.full((16,), 0.1))
        self.out = nn.Linear(16, 3)

    def forward(self, x):
        h = torch.sigmoid(self.fc(x))
        h += self.shift
        return self.out(h)


torch.manual_seed(0)
model = Block()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [(torch.randn(8, 10), torch.randint(0, 3, (8,))) for _ in range(3)]
for x, y in batches:
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
print(f"final loss {loss.item():.4f}")
"""


def test_out_of_place_fix_of_backward_crash_is_accepted_on_the_forward_values_before_it(verifier):
    fixed = INPLACE_SCRIPT.replace("h += self.shift", "h = h + self.shift")
    verdict = run(verifier, INPLACE_SCRIPT, fixed, AGF003, entry="__main__")
    assert verdict.verdict == "accepted", verdict.reason
    (unit,) = verdict.units
    original = unit.evidence["original"]
    assert "modified by an inplace operation" in original["exception"]["message"]
    assert original["backward_passes_recorded"] == 1 and len(original["first_losses"]) == 1
    assert unit.evidence["rewritten"]["first_losses"][0] == original["first_losses"][0]
    assert "forward values before the original's error equal (1 backward pass(es))" in verdict.reason
    assert check(verdict, "gradients_match_finite_differences")["status"] == "pass"


def test_fix_that_drops_the_term_is_rejected_on_the_forward_values(verifier):
    dropped = INPLACE_SCRIPT.replace("h += self.shift", "h = h + 0 * self.shift")
    verdict = run(verifier, INPLACE_SCRIPT, dropped, AGF003, entry="__main__")
    assert verdict.verdict == "rejected", verdict.reason
    assert check(verdict, "original_error_gone")["status"] == "pass"  # the error is gone, yet...
    # (the fixed run stops 2 steps after the changed line ran; the original stops at its error)
    assert verdict.reason.startswith(f"{verdict.driver} shortened (the rewritten run: stopped 2 optimizer steps"), verdict.reason
    assert "): forward values differ: backward #1 loss" in verdict.reason, verdict.reason


def test_fix_that_removes_the_term_is_rejected_in_function_mode_too(verifier):
    library = as_library(INPLACE_SCRIPT)
    removed = library.replace("        h += self.shift\n", "")
    verdict = run(verifier, library, removed, AGF003, entry="Block.forward")
    assert verdict.verdict == "rejected", verdict.reason
    assert "forward values differ" in verdict.reason


def test_checks_that_cannot_compare_are_no_evidence(verifier):
    # the original raises before any backward: no forward value exists, and "error gone"
    # alone does not show that the fix is right
    original = textwrap.dedent(
        """
        import torch

        w = torch.ones(3, requires_grad=True)
        w += 1
        loss = (w * 2).sum()
        loss.backward()
        """
    )
    fixed = original.replace("w += 1", "with torch.no_grad():\n    w += 1")
    verdict = run(verifier, original, fixed, ("original_error_gone", "forward_values_equal"), entry="__main__")
    assert verdict.verdict == "unverified", verdict.reason
    assert "no check of the contract could compare the two runs" in verdict.reason
    assert check(verdict, "forward_values_equal")["status"] == "n/a"


# -- fixes that correct gradients: finite differences are the reference ------------------------
# `.data` rescales a sigmoid output that sigmoid saved: the forward pass is as intended but
# sigmoid's backward reads the rescaled value, so every gradient below it is silently wrong.
DATA_SCRIPT = """
import torch
from torch import nn
import torch.nn.functional as F


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 12)
        self.fc2 = nn.Linear(12, 2)

    def forward(self, x):
        h = torch.sigmoid(self.fc1(x))
        h.data.mul_(2)
        return self.fc2(h)


torch.manual_seed(0)
model = Gate()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(3):
    x, y = torch.randn(16, 6), torch.randint(0, 2, (16,))
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
"""


def test_data_mutation_fix_is_accepted_on_finite_differences_with_the_original_mismatch_shown(verifier):
    fixed = DATA_SCRIPT.replace("h.data.mul_(2)", "h = h * 2")
    verdict = run(verifier, DATA_SCRIPT, fixed, AGF009, entry="__main__")
    assert verdict.verdict == "accepted", verdict.reason
    (unit,) = verdict.units
    o_fd, r_fd = unit.evidence["original"]["finite_differences"], unit.evidence["rewritten"]["finite_differences"]
    assert o_fd["applicable"] and not o_fd["passed"]
    assert r_fd["passed"] and r_fd["numeric"] == pytest.approx(o_fd["numeric"])  # same forward math
    assert "Gate#0.fc1.weight" in r_fd["targets"]
    assert "gradients corrected" in verdict.reason and "the original's did not" in verdict.reason


def test_data_mutation_fix_is_accepted_in_function_mode(verifier):
    library = as_library(DATA_SCRIPT)
    fixed = library.replace("h.data.mul_(2)", "h = h * 2")
    verdict = run(verifier, library, fixed, AGF009, entry="Gate.forward")
    assert verdict.verdict == "accepted", verdict.reason
    assert verdict.units[0].mode == "function"


def test_data_mutation_rewrite_with_a_changed_scale_is_rejected(verifier):
    wrong = DATA_SCRIPT.replace("h.data.mul_(2)", "h = h * 3")
    verdict = run(verifier, DATA_SCRIPT, wrong, AGF009, entry="__main__")
    assert verdict.verdict == "rejected", verdict.reason
    assert "forward values before the first backward differ" in verdict.reason


def test_gradients_that_were_right_must_stay_equal(verifier):
    # `.detach()` of a read that fed nothing differentiable: gradients equal, nothing to correct;
    # a rewrite that changes them although they matched finite differences is rejected
    original = DATA_SCRIPT.replace("        h.data.mul_(2)\n", "")
    wrong = original.replace("return self.fc2(h)", "return self.fc2(h.detach() + 0 * h)")
    verdict = run(verifier, original, wrong, AGF009, entry="__main__")
    assert verdict.verdict == "rejected", verdict.reason
    assert "gradients differ" in verdict.reason or "the rewritten's" in verdict.reason


GRAPH_BREAK = """
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.randn(32, 1)
for epoch in range(3):
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss = torch.tensor(loss.item(), requires_grad=True)
    loss.backward()
    optimizer.step()
"""


def test_graph_break_fix_is_accepted_on_finite_differences(verifier):
    fixed = GRAPH_BREAK.replace("    loss = torch.tensor(loss.item(), requires_grad=True)\n", "")
    verdict = run(verifier, GRAPH_BREAK, fixed, AGF008, rule="AGF008")
    assert verdict.verdict == "accepted", verdict.reason
    (unit,) = verdict.units
    assert unit.mode == "script"
    assert unit.evidence["original"]["finite_differences"]["analytic"] == 0.0  # no gradient reached a parameter
    assert "the original's did not (0 vs" in verdict.reason


def test_graph_break_rewrite_that_still_breaks_is_rejected(verifier):
    wrong = GRAPH_BREAK.replace("loss = torch.tensor(loss.item(), requires_grad=True)", "loss = loss.detach().requires_grad_()")
    verdict = run(verifier, GRAPH_BREAK, wrong, AGF008)
    assert verdict.verdict == "rejected", verdict.reason
    assert "does not match finite differences" in verdict.reason


# -- AGF004: the original backward, called on the same ctx, is the reference ---------------------
STE_SCRIPT = """
import torch
from torch import nn
import torch.nn.functional as F


class RoundSTE(torch.autograd.Function):
    \"\"\"Quantize in forward; pass the gradient straight through in backward.\"\"\"

    @staticmethod
    def forward(ctx, x, levels):
        return torch.round(x * levels) / levels

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class QuantNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(RoundSTE.apply(torch.relu(self.fc1(x)), 4))


torch.manual_seed(0)
model = QuantNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(3):
    x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
"""
STE_FIXED = STE_SCRIPT.replace("        return grad_output\n", "        return grad_output, None\n")


def test_straight_through_estimator_arity_fix_is_accepted(verifier):
    verdict = run(verifier, STE_SCRIPT, STE_FIXED, AGF004, entry="__main__", rule="AGF004")
    assert verdict.verdict == "accepted", verdict.reason
    assert "incorrect number of gradients" in verdict.units[0].evidence["original"]["exception"]["message"]
    # the estimator is not the true derivative by design: gradcheck is not applied, not failed
    gate = check(verdict, "gradcheck_if_original_matches")
    assert gate["status"] == "n/a" and "not the true derivative" in gate["detail"]
    assert "RoundSTE.backward returns the original's gradients at position(s) [0], None for input(s) [1]" in verdict.reason


def test_straight_through_estimator_with_a_changed_scale_is_rejected(verifier):
    wrong = STE_SCRIPT.replace("        return grad_output\n", "        return grad_output * 4, None\n")
    verdict = run(verifier, STE_SCRIPT, wrong, AGF004, entry="__main__")
    assert verdict.verdict == "rejected", verdict.reason
    assert "differs from the original's on the same ctx at position 0" in verdict.reason


def test_padded_none_from_synthesized_inputs_alone_is_unverified(verifier):
    # function mode: every synthesized tensor requires grad, which says nothing about the program
    verdict = run(verifier, STE_SCRIPT, STE_FIXED, AGF004, entry="RoundSTE")
    assert verdict.verdict == "unverified", verdict.reason
    assert "synthesized inputs made require grad" in verdict.reason


GRL_SCRIPT = """
import torch
from torch import nn
import torch.nn.functional as F


class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lambd):
        ctx.save_for_backward(lambd)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        (lambd,) = ctx.saved_tensors
        return -lambd * grad_output


torch.manual_seed(0)
features = nn.Linear(8, 8)
domain_head = nn.Linear(8, 2)
lambd = torch.tensor(0.3)
optimizer = torch.optim.SGD([*features.parameters(), *domain_head.parameters()], lr=0.05)
for step in range(3):
    x, domain = torch.randn(16, 8), torch.randint(0, 2, (16,))
    optimizer.zero_grad()
    logits = domain_head(GradReverse.apply(features(x), lambd))
    F.cross_entropy(logits, domain).backward()
    optimizer.step()
"""


def _pad(source: str) -> str:
    return source.replace("        return -lambd * grad_output\n", "        return -lambd * grad_output, None\n")


def test_gradient_reversal_padded_none_is_accepted_where_the_input_never_required_grad(verifier):
    verdict = run(verifier, GRL_SCRIPT, _pad(GRL_SCRIPT), AGF004, entry="__main__")
    assert verdict.verdict == "accepted", verdict.reason
    functions = verdict.units[0].evidence["rewritten"]["functions"]
    assert functions["GradReverse"]["roles"] == ["grad", "tensor"]
    assert "None for input(s) [1] (never required grad)" in verdict.reason


def test_gradient_reversal_padded_none_is_rejected_where_the_input_required_grad(verifier):
    learned = GRL_SCRIPT.replace("lambd = torch.tensor(0.3)", "lambd = torch.tensor(0.3, requires_grad=True)")
    verdict = run(verifier, learned, _pad(learned), AGF004, entry="__main__")
    assert verdict.verdict == "rejected", verdict.reason
    assert "returns None for input 1, which required grad during the run" in verdict.reason


# -- numbers against tensors -----------------------------------------------------------------------
ITEM = """
import torch
from torch import nn
import torch.nn.functional as F


def train_epoch(model, loader, optimizer):
    running = 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss
    return running / len(loader)


torch.manual_seed(0)
model = nn.Linear(5, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(4, 5), torch.randint(0, 3, (4,))) for _ in range(4)]
epoch_loss = train_epoch(model, loader, optimizer)
"""


@pytest.mark.parametrize("entry", ["train_epoch", "__main__"])
def test_item_accumulation_fix_is_compared_as_numbers(verifier, entry):
    verdict = run(verifier, ITEM, ITEM.replace("running += loss", "running += loss.item()"), AGF006, entry=entry)
    assert verdict.verdict == "accepted", verdict.reason
    assert "outputs equal" in verdict.reason


def test_item_accumulation_with_a_changed_value_is_rejected(verifier):
    wrong = ITEM.replace("running += loss", "running += loss.item() / 2")
    verdict = run(verifier, ITEM, wrong, AGF006, entry="__main__")
    assert verdict.verdict == "rejected", verdict.reason
    # the run stops 2 steps after the changed line first ran, inside train_epoch: what the
    # changed line accumulated differs (epoch_loss, assigned after the loop, is never reached)
    assert "running (last value assigned by the changed code in train_epoch)" in verdict.reason, verdict.reason


# -- AGF002: misplaced zeroing is rejected --------------------------------------------------------
TRAIN = """
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
batches = [(torch.randn(8, 10), torch.randint(0, 3, (8,))) for _ in range(4)]
for epoch in range(2):
    for x, y in batches:
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
"""

TRAIN_FN = """
import torch
from torch import nn


def train(model, loader, optimizer, criterion):
    model.train()
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    return model
"""


@pytest.mark.parametrize(
    ("source", "where"),
    [
        (TRAIN, "        loss.backward()\n"),
        (TRAIN_FN, "        loss.backward()\n"),
    ],
)
def test_zero_grad_right_after_backward_is_rejected(verifier, source, where):
    wrong = source.replace(where, where + "        optimizer.zero_grad()\n")
    verdict = run(verifier, source, wrong, AGF002, rule="AGF002")
    assert verdict.verdict == "rejected", verdict.reason
    assert "no gradient at step although backward contributed" in verdict.reason


def test_zero_grad_set_to_zeros_between_backward_and_step_is_rejected(verifier):
    wrong = TRAIN.replace("        optimizer.step()\n", "        optimizer.zero_grad(set_to_none=False)\n        optimizer.step()\n")
    verdict = run(verifier, TRAIN, wrong, AGF002)
    assert verdict.verdict == "rejected", verdict.reason
    assert "gradient zero at step" in verdict.reason


def test_losses_are_recorded_per_step(verifier):
    fixed = TRAIN.replace("        loss = F", "        optimizer.zero_grad()\n        loss = F")
    verdict = run(verifier, TRAIN, fixed, AGF002)
    assert verdict.verdict == "accepted", verdict.reason
    rewritten = verdict.units[0].evidence["rewritten"]
    # a bounded run: the changed line runs in the first iteration, and the run stops 2 steps later
    assert rewritten["backward_passes_recorded"] == 2
    assert "stopped 2 optimizer steps after the changed code ran (at loop `for x, y` at" in verdict.reason, verdict.reason
    original = verdict.units[0].evidence["original"]
    # the second step's gradients are stale in the original (what the contract judges);
    # both losses were computed before that step, so they are equal
    assert rewritten["first_losses"][:2] == original["first_losses"][:2]


# -- AGF002: two optimizers, and what is backpropagated before the first step --------------------
# An encoder trained against a discriminator (idinvert): the encoder's adversarial loss
# flows through D, so D's .grad holds it after the encoder's step; the right fix zeroes D
# after that step, dropping a contribution the encoder's step already used.
GAN = """
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
E = nn.Sequential(nn.Linear(12, 8), nn.Tanh(), nn.Linear(8, 4))
G = nn.Linear(4, 12).requires_grad_(False)
D = nn.Sequential(nn.Linear(12, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
optimizer_E = torch.optim.Adam(E.parameters(), lr=1e-3)
optimizer_D = torch.optim.Adam(D.parameters(), lr=1e-3)
for it in range(3):
    x_real = torch.randn(6, 12)
    x_rec = G(E(x_real))
    loss_E = F.mse_loss(x_rec, x_real) + 0.1 * F.softplus(-D(x_rec)).mean()
    optimizer_E.zero_grad()
    loss_E.backward()
    optimizer_E.step()
    x_fake = G(E(x_real)).detach()
    loss_D = F.softplus(D(x_fake)).mean() + F.softplus(-D(x_real)).mean()
    loss_D.backward()
    optimizer_D.step()
"""
GAN_FIXED = GAN.replace("    loss_D = F", "    optimizer_D.zero_grad()\n    loss_D = F")


def test_discriminator_zeroed_after_the_generator_step_is_accepted(verifier):
    verdict = run(verifier, GAN, GAN_FIXED, AGF002)
    assert verdict.verdict == "accepted", verdict.reason


def test_discriminator_zeroed_between_its_backward_and_step_is_rejected(verifier):
    wrong = GAN.replace("    optimizer_D.step()", "    optimizer_D.zero_grad()\n    optimizer_D.step()")
    verdict = run(verifier, GAN, wrong, AGF002)
    assert verdict.verdict == "rejected", verdict.reason
    assert "D.0.weight: no gradient at step" in verdict.reason


ACCUMULATE = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
loss_function = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
accumulation_steps = 2
training_set = [(torch.randn(4, 10), torch.randint(0, 3, (4,))) for _ in range(6)]
for i, (inputs, labels) in enumerate(training_set):
    loss = loss_function(model(inputs), labels)
    loss = loss / accumulation_steps
    loss.backward()
    if (i + 1) % accumulation_steps == 0:
        optimizer.step()
"""
ACCUMULATE_FIXED = ACCUMULATE.replace("        optimizer.step()\n", "        optimizer.step()\n        model.zero_grad()\n")


def test_gradient_accumulation_fix_is_accepted_with_the_first_step_compared(verifier):
    verdict = run(verifier, ACCUMULATE, ACCUMULATE_FIXED, AGF002)
    assert verdict.verdict == "accepted", verdict.reason
    assert "first step's losses and contributions equal the original's" in verdict.reason


def test_gradient_accumulation_fix_that_drops_the_loss_scale_is_rejected(verifier):
    wrong = ACCUMULATE_FIXED.replace("    loss = loss / accumulation_steps\n", "")
    verdict = run(verifier, ACCUMULATE, wrong, AGF002)
    assert verdict.verdict == "rejected", verdict.reason
    assert "losses backpropagated" in verdict.reason


# -- AGF001: a validation graph smaller than the training step's ---------------------------------
# OpenNMT's validate(): the training step's graph sets the run's peak in both versions, so
# the fix lowers neither the peak nor the (empty) end state, only what autograd records.
NMT = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(20, 16), nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 20))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss(reduction="sum")
data = [(torch.randint(0, 20, (8, 7)), torch.randint(0, 20, (8, 7))) for _ in range(3)]


def validate(batch):
    src, tgt = batch
    scores = model(src)
    loss = criterion(scores.flatten(0, 1), tgt.flatten())
    return loss.item()


for epoch in range(2):
    for src, tgt in data[:2]:
        loss = criterion(model(src).flatten(0, 1), tgt.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    del loss
    valid_loss = validate((data[2][0][:2], data[2][1][:2]))
"""
AGF001 = ("outputs_equal", "grads_untouched", "retained_graph_not_higher", "retained_graph_lower_if_any")


def test_no_grad_validation_below_the_training_peak_is_accepted_on_the_graph_recorded(verifier):
    fixed = NMT.replace("    scores = model(src)\n", "    with torch.no_grad():\n        scores = model(src)\n")
    verdict = run(verifier, NMT, fixed, AGF001)
    assert verdict.verdict == "accepted", verdict.reason
    assert "graph recorded over the run" in verdict.reason


def test_no_grad_around_code_that_records_nothing_is_not_lower(verifier):
    rewritten = NMT.replace("    return loss.item()\n", "    with torch.no_grad():\n        value = loss.item()\n    return value\n")
    verdict = run(verifier, NMT, rewritten, AGF001)
    assert verdict.verdict == "rejected", verdict.reason
    assert verdict.reason.endswith("not lower")


# -- accepted means exercised ---------------------------------------------------------------------
def test_change_behind_sys_exit_is_unverified(verifier):
    early = TRAIN.replace("for epoch in range(2):", "import sys\nif __name__ == '__main__':\n    sys.exit(0)\nfor epoch in range(2):")
    fixed = early.replace("        loss = F", "        optimizer.zero_grad()\n        loss = F")
    verdict = run(verifier, early, fixed, AGF002)
    assert verdict.verdict == "unverified"
    assert verdict.reason.startswith(f"{verdict.driver}: the changed code never ran (the original run never reached line ")


EVAL = """
import torch
from torch import nn


def evaluate(model, loader, fast=True):
    model.eval()
    if fast:
        return 0.0
    outputs = []
    for x, y in loader:
        outputs.append(model(x))
    return torch.cat(outputs).mean().item()
"""
EVAL_FIX = ("    for x, y in loader:\n        outputs.append(model(x))", "    with torch.no_grad():\n        for x, y in loader:\n            outputs.append(model(x))")
AGF001 = ("outputs_equal", "grads_untouched", "retained_graph_not_higher", "retained_graph_lower_if_any")


def test_change_behind_early_return_is_unverified(verifier):
    verdict = run(verifier, EVAL, EVAL.replace(*EVAL_FIX), AGF001)
    assert verdict.verdict == "unverified", verdict.reason
    assert "the changed code never ran" in verdict.reason
    assert verdict.units[0].evidence["rewritten"]["changed_lines"]["ran"] == []


def test_same_change_is_judged_once_it_runs(verifier):
    slow = EVAL.replace("fast=True", "fast=False")
    verdict = run(verifier, slow, slow.replace(*EVAL_FIX), AGF001)
    assert verdict.verdict == "accepted", verdict.reason
    assert verdict.units[0].evidence["rewritten"]["changed_lines"]["missed"] == []


# -- AGF010: a detach is judged on the forward values the original computed before its error -----
TBPTT = """
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
embedding, lstm, decoder = nn.Embedding(16, 8), nn.LSTM(8, 16, batch_first=True), nn.Linear(16, 16)
parameters = [*embedding.parameters(), *lstm.parameters(), *decoder.parameters()]
optimizer = torch.optim.SGD(parameters, lr=0.1)
tokens = torch.randint(0, 16, (4, 3 * 6 + 1))
h, c = torch.zeros(1, 4, 16), torch.zeros(1, 4, 16)
for i in range(3):
    inputs, targets = tokens[:, i * 6:(i + 1) * 6], tokens[:, i * 6 + 1:(i + 1) * 6 + 1]
    optimizer.zero_grad()
    out, (h, c) = lstm(embedding(inputs), (h, c))
    loss = F.cross_entropy(decoder(out).flatten(0, 1), targets.flatten())
    loss.backward()
    optimizer.step()
"""
AGF010 = ("original_error_gone", "forward_values_equal", "peak_memory_not_higher")


def test_hidden_state_detached_is_accepted_on_the_losses_before_the_error(verifier):
    fixed = TBPTT.replace("    out, (h, c) = lstm(", "    h, c = h.detach(), c.detach()\n    out, (h, c) = lstm(")
    verdict = run(verifier, TBPTT, fixed, AGF010, rule="AGF010")
    assert verdict.verdict == "accepted", verdict.reason
    assert "backward through the graph a second time" in verdict.units[0].evidence["original"]["exception"]["message"]
    assert "forward values before the original's error equal (2 backward pass(es))" in verdict.reason


def test_hidden_state_reset_instead_of_detached_is_rejected(verifier):
    # the error goes away too, but every chunk now starts from zeros: different losses
    wrong = TBPTT.replace("    out, (h, c) = lstm(", "    h, c = torch.zeros_like(h), torch.zeros_like(c)\n    out, (h, c) = lstm(")
    verdict = run(verifier, TBPTT, wrong, AGF010)
    assert verdict.verdict == "rejected", verdict.reason
    assert "): forward values differ: backward #2 loss" in verdict.reason, verdict.reason


def test_an_original_that_raises_needs_to_reach_only_the_first_changed_code(verifier):
    # the fix changes forward (where the original raises) and backward (which it never reaches)
    original = """
    import torch


    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_backward(x, scale)
            return x * scale

        @staticmethod
        def backward(ctx, grad_output):
            x, scale = ctx.saved_tensors
            return grad_output * scale, None


    x = torch.randn(5, requires_grad=True)
    Scale.apply(x, 2.0).sum().backward()
    """
    original = textwrap.dedent(original)
    fixed = original.replace("ctx.save_for_backward(x, scale)", "ctx.save_for_backward(x)\n        ctx.scale = scale").replace(
        "x, scale = ctx.saved_tensors", "(x,) = ctx.saved_tensors\n        scale = ctx.scale"
    )
    verdict = run(verifier, original, fixed, ("original_error_gone", "gradcheck_passes"), entry="Scale")
    assert verdict.verdict == "accepted", verdict.reason
    coverage = verdict.units[0].evidence["original"]["changed_lines"]
    assert len(coverage["hunks"]) == 2 and len(coverage["missed"]) == 1


ADDER_LIBRARY = """
import math

import torch
from torch import nn
from torch.autograd import Function


class adder(Function):
    @staticmethod
    def forward(ctx, W_col, X_col):
        ctx.save_for_backward(W_col, X_col)
        return -(W_col.unsqueeze(2) - X_col.unsqueeze(0)).abs().sum(1)

    @staticmethod
    def backward(ctx, grad_output):
        W_col, X_col = ctx.saved_tensors
        grad_W_col = ((X_col.unsqueeze(0) - W_col.unsqueeze(2)) * grad_output.unsqueeze(1)).sum(2)
        grad_W_col = grad_W_col / grad_W_col.norm(p=2).clamp(min=1e-12) * math.sqrt(W_col.size(1) * W_col.size(0)) / 5
        grad_X_col = (-(X_col.unsqueeze(0) - W_col.unsqueeze(2)).clamp(-1, 1) * grad_output.unsqueeze(1)).sum(0)
        return grad_W_col
"""


def test_surrogate_backward_that_returns_its_own_dropped_gradient_is_accepted(verifier):
    # huawei-noah/AdderNet#21: the backward is deliberately not the derivative (a
    # normalised full-precision gradient), so the gradient the fix adds cannot be judged
    # by finite differences; the original's own gradient must be kept exactly
    fixed = ADDER_LIBRARY.replace("        return grad_W_col\n", "        return grad_W_col, grad_X_col\n")
    verdict = run(verifier, ADDER_LIBRARY, fixed, AGF004, rule="AGF004")
    assert verdict.verdict == "accepted", verdict.reason
    assert "adds its own values at position(s) [1], not checked against finite differences" in verdict.reason
    assert "returns the original's gradients at position(s) [0]" in verdict.reason


def test_surrogate_backward_whose_kept_gradient_changes_is_rejected(verifier):
    wrong = ADDER_LIBRARY.replace("        return grad_W_col\n", "        return grad_W_col * 0.5, grad_X_col\n")
    verdict = run(verifier, ADDER_LIBRARY, wrong, AGF004, rule="AGF004")
    assert verdict.verdict == "rejected", verdict.reason
    assert "differs from the original's on the same ctx at position 0" in verdict.reason


MUL_LIBRARY = """
import torch


class ScaledMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, grad_output):
        x, w = ctx.saved_tensors
        grad_x = grad_output * w
        grad_w = grad_output * x
        return grad_x
"""


def test_added_gradient_off_the_derivative_of_a_true_backward_is_rejected(verifier):
    # the original's gradient at position 0 is the true derivative, so the added one is held to it too
    wrong = MUL_LIBRARY.replace("        return grad_x\n", "        return grad_x, grad_w * 2\n")
    verdict = run(verifier, MUL_LIBRARY, wrong, AGF004, rule="AGF004")
    assert verdict.verdict == "rejected", verdict.reason
    fixed = MUL_LIBRARY.replace("        return grad_x\n", "        return grad_x, grad_w\n")
    verdict = run(verifier, MUL_LIBRARY, fixed, AGF004, rule="AGF004")
    assert verdict.verdict == "accepted", verdict.reason


ADDER_LAYER = ADDER_LIBRARY + """

class AdderLinear(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) * 0.1)

    def forward(self, x):
        return adder.apply(self.weight, x.t()).t()
"""


def test_none_for_an_input_the_files_own_layer_feeds_a_graph_is_rejected(verifier):
    # the layer passes its input there: stacked after another layer it carries a graph,
    # so padding with None would silently stop gradients reaching everything before it
    wrong = ADDER_LAYER.replace("        return grad_W_col\n", "        return grad_W_col, None\n")
    verdict = run(verifier, ADDER_LAYER, wrong, AGF004, rule="AGF004")
    assert verdict.verdict == "rejected", verdict.reason
    assert "returns None for input 1, which the file fills with `x.t()` in AdderLinear.forward" in verdict.reason


@pytest.mark.torch
def test_every_registered_check_has_one_implementation_and_its_probes():
    import inspect

    from autograd_fix.verification import CHECK_NAMES, contracts
    from autograd_fix.verification.checks import Probe, probes_for

    assert tuple(contracts.CHECKS) == CHECK_NAMES
    assert len(set(CHECK_NAMES)) == len(CHECK_NAMES)
    written = {name[len("check_"):] for name, fn in inspect.getmembers(contracts, inspect.isfunction) if name.startswith("check_")}
    assert written == set(CHECK_NAMES)  # no implementation outside the registry
    # the harness turns on exactly what a contract's checks name
    assert probes_for(["gradients_match_finite_differences"]) == {Probe.GRAD_INPUTS, Probe.FINITE_DIFFERENCES}
    assert probes_for(["grads_equal", "retained_graph_not_higher"]) == frozenset()
    # value comparisons re-run at a second point; no checks at all: the generic contract's
    assert probes_for(["outputs_equal", "grads_equal"]) == {Probe.SECOND_POINT}
    assert probes_for([]) == {Probe.SECOND_POINT}


# -- AGF003: a GAN whose noise is a fresh leaf that requires grad each step ---------------------
# The discriminator's step reuses the generator's graph after the generator's optimizer
# changed G in place (pytorch/pytorch#38480): D_loss.backward() raises. The right fix
# detaches G's painting. The noise `ideas` is made afresh each step with
# requires_grad=True, so it receives gradients that no optimizer uses: it is an input,
# not a parameter that "never changed".
FRESH_NOISE_GAN = """
import torch
from torch import nn

torch.manual_seed(1)
G = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 10))
D = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 1), nn.Sigmoid())
opt_D = torch.optim.Adam(D.parameters(), lr=1e-3)
opt_G = torch.optim.Adam(G.parameters(), lr=1e-3)
for step in range(3):
    real = torch.randn(8, 10)
    ideas = torch.randn(8, 5, requires_grad=True)
    fake = G(ideas)
    prob_fake = D(fake)
    G_loss = torch.mean(torch.log(1.0 - prob_fake))
    opt_G.zero_grad()
    G_loss.backward()
    opt_G.step()
    prob_real = D(real)
    prob_fake = D(fake)
    D_loss = -torch.mean(torch.log(prob_real) + torch.log(1.0 - prob_fake))
    opt_D.zero_grad()
    D_loss.backward(retain_graph=True)
    opt_D.step()
print(f"D loss {D_loss.item():.4f}")
"""
FRESH_NOISE_FIXED = FRESH_NOISE_GAN.replace("    prob_fake = D(fake)\n    D_loss", "    prob_fake = D(fake.detach())\n    D_loss")


def test_input_leaf_made_afresh_each_step_is_not_a_parameter(verifier):
    verdict = run(verifier, FRESH_NOISE_GAN, FRESH_NOISE_FIXED, AGF003)
    assert verdict.verdict == "accepted", verdict.reason
    result = check(verdict, "parameters_change_as_intended")
    assert result["status"] == "pass", result
    assert "input leaves made afresh each iteration not counted" in result["detail"]


def test_a_parameter_no_optimizer_owns_still_never_changes(verifier):
    # the same fix, but G's last layer is left out of its optimizer: one tensor that keeps
    # receiving gradients across steps is a parameter the update forgot, still reported
    forgot = FRESH_NOISE_FIXED.replace("opt_G = torch.optim.Adam(G.parameters(), lr=1e-3)", "opt_G = torch.optim.Adam(G[0].parameters(), lr=1e-3)")
    original = FRESH_NOISE_GAN.replace("opt_G = torch.optim.Adam(G.parameters(), lr=1e-3)", "opt_G = torch.optim.Adam(G[0].parameters(), lr=1e-3)")
    verdict = run(verifier, original, forgot, AGF003)
    assert verdict.verdict == "rejected", verdict.reason
    assert "never changed" in verdict.reason
