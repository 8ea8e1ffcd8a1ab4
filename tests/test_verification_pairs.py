"""Patch pairs modelled on real training / evaluation code: correct fixes are accepted,
plausible wrong ones rejected, each under the contract its rule declares.

All pairs run on one warm worker (module fixture); each verdict is checked for its
verdict and for the evidence that justifies it.
"""

from __future__ import annotations

import textwrap

import pytest

from autograd_fix.verification import Verifier, verify_pair
from autograd_fix.verification.verdict import format_bytes

AGF001 = ("outputs_equal", "grads_untouched", "retained_graph_not_higher", "retained_graph_lower_if_any")
AGF002 = ("step_grads_match_contributions",)
AGF003 = ("original_error_gone", "forward_values_equal", "gradients_match_finite_differences", "parameters_change_as_intended")
AGF004 = ("original_error_gone", "gradcheck_if_original_matches", "backward_agrees_with_original")
AGF005 = ("original_error_gone", "gradcheck_passes", "ctx_freed_without_gc")
AGF006 = ("accumulated_values_equal", "outputs_equal", "retained_graph_not_higher", "retained_graph_lower_if_any")




def run(verifier, original: str, rewritten: str, checks=None, **kw):
    return verify_pair(textwrap.dedent(original), textwrap.dedent(rewritten), checks=checks, verifier=verifier, timeout=30, **kw)


MODEL = """
import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 32)
        self.fc2 = nn.Linear(32, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))
"""

# -- AGF001: eval forward without no_grad ------------------------------------------------
EVAL_ORIG = MODEL + """

def evaluate(model, loader):
    model.eval()
    outputs = []
    for x, y in loader:
        outputs.append(model(x))
    return torch.cat(outputs)
"""
EVAL_FIXED = MODEL + """

def evaluate(model, loader):
    model.eval()
    outputs = []
    with torch.no_grad():
        for x, y in loader:
            outputs.append(model(x))
    return torch.cat(outputs)
"""


def test_eval_loop_wrapped_in_no_grad_is_accepted_with_lower_retained_graph(verifier):
    verdict = run(verifier, EVAL_ORIG, EVAL_FIXED, AGF001, rule="AGF001")
    assert verdict.verdict == "accepted", verdict.reason
    (unit,) = verdict.units
    assert unit.name == "evaluate" and unit.mode == "function"
    orig = unit.evidence["original"]["measured"]["retained_graph_bytes"]
    assert orig > 0 and unit.evidence["rewritten"]["measured"]["retained_graph_bytes"] == 0
    summary = verdict.summary()
    assert "graph held at peak" in summary and "retained at end" in summary and "-> 0 B" in summary
    assert summary.count("graph held at peak") == 1, summary  # two checks, one clause
    assert unit.evidence["original"]["bound"]["model"] == "Net()"


# The outputs (with their graphs) live in a list local to the function, freed before it
# returns: nothing is retained at the end, only the peak during the run tells them apart.
EVAL_LOCAL_ORIG = MODEL + """

def accuracy(model, loader):
    model.eval()
    logits = []
    for x, y in loader:
        logits.append(model(x))
    predicted = torch.cat(logits).argmax(dim=1)
    return (predicted == torch.cat([y for _, y in loader])).float().mean().item()
"""
EVAL_LOCAL_FIXED = EVAL_LOCAL_ORIG.replace(
    "    for x, y in loader:\n        logits.append(model(x))",
    "    with torch.no_grad():\n        for x, y in loader:\n            logits.append(model(x))",
)


def test_eval_loop_with_function_local_outputs_is_accepted_on_peak_graph(verifier):
    assert EVAL_LOCAL_FIXED != EVAL_LOCAL_ORIG
    verdict = run(verifier, EVAL_LOCAL_ORIG, EVAL_LOCAL_FIXED, AGF001, rule="AGF001")
    assert verdict.verdict == "accepted", verdict.reason
    (unit,) = verdict.units
    orig, fixed = unit.evidence["original"]["measured"], unit.evidence["rewritten"]["measured"]
    assert orig["retained_graph_bytes"] == 0 and fixed["retained_graph_bytes"] == 0  # freed before the end
    assert orig["peak_graph_bytes"] > 0 and fixed["peak_graph_bytes"] == 0
    peak = format_bytes(orig["peak_graph_bytes"])
    assert f"graph held at peak {peak} -> 0 B, retained at end 0 B -> 0 B" in verdict.summary()


def test_identical_eval_loops_are_not_lower_on_peak_graph(verifier):
    same = EVAL_LOCAL_ORIG.replace("logits = []", "logits = list()")
    verdict = run(verifier, EVAL_LOCAL_ORIG, same, AGF001)
    assert verdict.verdict == "rejected"
    assert "not lower" in verdict.reason and "graph held at peak" in verdict.reason


EPOCH_LOSS = MODEL + """

def mean_loss(model, loader, criterion):
    total = 0.0
    for x, y in loader:
        total = total + criterion(model(x), y).detach()
    return total.item() / len(loader)
"""


def test_rewrite_holding_more_graph_at_peak_is_rejected(verifier):
    # dropping the .detach() chains every batch's graph onto `total` while the loop runs;
    # the function returns a float, so nothing is retained at the end of either run
    wrong = EPOCH_LOSS.replace("criterion(model(x), y).detach()", "criterion(model(x), y)")
    verdict = run(verifier, EPOCH_LOSS, wrong, AGF006)
    assert verdict.verdict == "rejected", verdict.reason
    failed = [c for c in verdict.units[0].evidence["checks"] if c["status"] == "fail"]
    assert failed[0]["check"] == "retained_graph_not_higher"
    assert "higher at peak" in verdict.reason
    orig, wrong_m = verdict.units[0].evidence["original"]["measured"], verdict.units[0].evidence["rewritten"]["measured"]
    assert orig["retained_graph_bytes"] == wrong_m["retained_graph_bytes"] == 0
    assert wrong_m["peak_graph_bytes"] > orig["peak_graph_bytes"] > 0


def test_decorated_eval_function_is_accepted(verifier):
    fixed = EVAL_ORIG.replace("def evaluate", "@torch.no_grad()\ndef evaluate")
    verdict = run(verifier, EVAL_ORIG, fixed, AGF001)
    assert verdict.verdict == "accepted", verdict.reason


EVAL_SCRIPT = MODEL + """

model = Net()
model.eval()
data = [torch.randn(16, 10) for _ in range(5)]
predictions = []
for batch in data:
    predictions.append(model(batch).argmax(dim=1))
    logits = model(batch)
print("done", len(predictions))
"""


def test_eval_script_wrapped_in_no_grad_is_accepted(verifier):
    fixed = EVAL_SCRIPT.replace(
        "for batch in data:\n    predictions.append(model(batch).argmax(dim=1))\n    logits = model(batch)",
        "with torch.no_grad():\n    for batch in data:\n        predictions.append(model(batch).argmax(dim=1))\n        logits = model(batch)",
    )
    verdict = run(verifier, EVAL_SCRIPT, fixed, AGF001)
    assert verdict.verdict == "accepted", verdict.reason
    assert verdict.units[0].mode == "script"
    assert "done 5" in verdict.units[0].evidence["rewritten"]["stdout_tail"]


SALIENCY = MODEL + """

def saliency(model, image, target_class=1):
    model.eval()
    image = image.clone().requires_grad_(True)
    score = model(image)[:, target_class].sum()
    score.backward()
    return image.grad.abs()
"""


def test_no_grad_around_saliency_is_rejected(verifier):
    wrong = SALIENCY.replace(
        "    score = model(image)[:, target_class].sum()\n    score.backward()",
        "    with torch.no_grad():\n        score = model(image)[:, target_class].sum()\n    score.backward()",
    )
    verdict = run(verifier, SALIENCY, wrong, AGF001)
    assert verdict.verdict == "rejected"
    assert "does not require grad" in verdict.reason


# -- AGF002: zero_grad placement ---------------------------------------------------------
TRAIN_SCRIPT = MODEL + """

torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
batches = [(torch.randn(8, 10), torch.randint(0, 3, (8,))) for _ in range(4)]
for epoch in range(2):
    for x, y in batches:
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
"""


def test_zero_grad_inserted_before_backward_is_accepted(verifier):
    fixed = TRAIN_SCRIPT.replace("        loss = F.cross", "        optimizer.zero_grad()\n        loss = F.cross")
    verdict = run(verifier, TRAIN_SCRIPT, fixed, AGF002, rule="AGF002")
    assert verdict.verdict == "accepted", verdict.reason
    evidence = verdict.units[0].evidence
    assert evidence["original"]["stale_steps"] > 0 and evidence["rewritten"]["step_violations"] == 0
    # a bounded run: the changed line runs in the first iteration, and the run stops 2 steps later
    assert evidence["rewritten"]["measured"]["optimizer_steps"] == 2
    assert "stopped 2 optimizer steps after the changed code ran (at loop `for x, y`" in verdict.reason, verdict.reason


def test_zero_grad_after_step_is_accepted(verifier):
    fixed = TRAIN_SCRIPT.replace("        optimizer.step()\n", "        optimizer.step()\n        optimizer.zero_grad()\n")
    assert run(verifier, TRAIN_SCRIPT, fixed, AGF002).verdict == "accepted"


def test_zero_grad_between_backward_and_step_is_rejected(verifier):
    wrong = TRAIN_SCRIPT.replace("        optimizer.step()\n", "        optimizer.zero_grad()\n        optimizer.step()\n")
    verdict = run(verifier, TRAIN_SCRIPT, wrong, AGF002)
    assert verdict.verdict == "rejected"
    assert "no gradient at step" in verdict.reason


ACCUM = MODEL + """

def train(model, loader, optimizer, criterion, accum_steps):
    model.train()
    for i, (x, y) in enumerate(loader * 2):
        loss = criterion(model(x), y) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
    return model
"""


def test_gradient_accumulation_zeroed_after_step_is_accepted(verifier):
    fixed = ACCUM.replace(
        "            optimizer.step()\n",
        "            optimizer.step()\n            optimizer.zero_grad()\n",
    ).replace("    model.train()\n", "    model.train()\n    optimizer.zero_grad()\n")
    verdict = run(verifier, ACCUM, fixed, AGF002)
    assert verdict.verdict == "accepted", verdict.reason
    bound = verdict.units[0].evidence["rewritten"]["bound"]
    assert bound["accum_steps"] == "2" and bound["criterion"] == "CrossEntropyLoss()"


def test_zero_grad_every_micro_step_of_accumulation_is_rejected(verifier):
    wrong = ACCUM.replace("        loss = criterion", "        optimizer.zero_grad()\n        loss = criterion")
    verdict = run(verifier, ACCUM, wrong, AGF002)
    assert verdict.verdict == "rejected"
    assert "differs from the sum of contributions" in verdict.reason


# -- AGF003: in-place on tensors autograd tracks -------------------------------------------
MANUAL_SGD = MODEL + """

def train(model, loader, lr):
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        for p in model.parameters():
            p -= lr * p.grad
            p.grad = None
    return model
"""


def test_inplace_leaf_update_wrapped_in_no_grad_is_accepted(verifier):
    fixed = MANUAL_SGD.replace(
        "        for p in model.parameters():\n            p -= lr * p.grad\n            p.grad = None",
        "        with torch.no_grad():\n            for p in model.parameters():\n                p -= lr * p.grad\n                p.grad = None",
    )
    verdict = run(verifier, MANUAL_SGD, fixed, AGF003)
    assert verdict.verdict == "accepted", verdict.reason
    assert "leaf Variable" in verdict.units[0].evidence["original"]["exception"]["message"]
    assert "were updated" in verdict.reason


def test_out_of_place_parameter_update_in_loop_is_rejected(verifier):
    wrong = MANUAL_SGD.replace("            p -= lr * p.grad\n            p.grad = None", "            p = p - lr * p.grad")
    verdict = run(verifier, MANUAL_SGD, wrong, AGF003)
    assert verdict.verdict == "rejected"
    assert "never changed" in verdict.reason


ACTIVATION = """
import torch


def scaled_gate(x):
    y = torch.sigmoid(x)
    y.mul_(2)
    return y * x
"""


def test_inplace_on_saved_output_made_out_of_place_is_accepted(verifier):
    fixed = ACTIVATION.replace("    y.mul_(2)", "    y = y * 2")
    verdict = run(verifier, ACTIVATION, fixed, AGF003)
    assert verdict.verdict == "accepted", verdict.reason
    assert "modified by an inplace operation" in verdict.units[0].evidence["original"]["exception"]["message"]
    assert "gradients match finite differences" in verdict.reason


def test_out_of_place_fix_with_wrong_formula_is_rejected(verifier):
    wrong = ACTIVATION.replace("    y.mul_(2)", "    y = y * 2\n    y = y.detach()")
    verdict = run(verifier, ACTIVATION, wrong, AGF003)
    assert verdict.verdict == "rejected"
    assert "finite differences" in verdict.reason or "gradcheck" in verdict.reason.lower() or "Jacobian" in verdict.reason


# -- AGF004 / AGF005: custom autograd.Function ---------------------------------------------
SCALE_FN = """
import torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x * factor

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.factor
"""


def test_backward_padded_with_none_for_non_tensor_input_is_accepted(verifier):
    fixed = SCALE_FN.replace("return grad_output * ctx.factor", "return grad_output * ctx.factor, None")
    verdict = run(verifier, SCALE_FN, fixed, AGF004, rule="AGF004")
    assert verdict.verdict == "accepted", verdict.reason
    (unit,) = verdict.units
    assert unit.name == "Scale"
    assert "incorrect number of gradients" in unit.evidence["original"]["exception"]["message"]
    assert unit.evidence["rewritten"]["gradcheck"]["passed"] is True


MUL_FN = """
import torch


class Mul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return x * weight

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        return grad_output * weight
"""


def test_backward_padded_with_none_for_input_needing_grad_is_rejected(verifier):
    wrong = MUL_FN.replace("return grad_output * weight", "return grad_output * weight, None")
    verdict = run(verifier, MUL_FN, wrong, AGF004)
    assert verdict.verdict == "rejected"
    assert "gradcheck fails" in verdict.reason


def test_backward_completed_correctly_is_accepted(verifier):
    fixed = MUL_FN.replace("return grad_output * weight", "return grad_output * weight, grad_output * x")
    assert run(verifier, MUL_FN, fixed, AGF004).verdict == "accepted"


EXP_FN = """
import torch


class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        result = x.exp()
        ctx.result = result
        return result

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.result
"""


def test_ctx_attribute_moved_to_save_for_backward_is_accepted(verifier):
    fixed = EXP_FN.replace("ctx.result = result", "ctx.save_for_backward(result)").replace(
        "return grad_output * ctx.result", "(result,) = ctx.saved_tensors\n        return grad_output * result"
    )
    verdict = run(verifier, EXP_FN, fixed, AGF005)
    assert verdict.verdict == "accepted", verdict.reason
    assert verdict.units[0].evidence["original"]["measured"]["ctx_freed_only_by_gc"] > 0
    assert verdict.units[0].evidence["rewritten"]["measured"]["ctx_freed_only_by_gc"] == 0


def test_gradcheck_catches_wrong_backward_formula_with_right_arity(verifier):
    wrong = EXP_FN.replace("ctx.result = result", "ctx.save_for_backward(x)").replace(
        "return grad_output * ctx.result", "(x,) = ctx.saved_tensors\n        return grad_output * x"
    )
    verdict = run(verifier, EXP_FN, wrong, AGF005)
    assert verdict.verdict == "rejected"
    assert "gradcheck fails" in verdict.reason


# -- AGF006: history accumulated across iterations ------------------------------------------
EPOCH = MODEL + """

def train_epoch(model, loader, optimizer, criterion):
    total_loss = 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss
    return total_loss / len(loader)
"""


def test_accumulated_loss_detached_is_accepted(verifier):
    fixed = EPOCH.replace("total_loss += loss", "total_loss += loss.detach()")
    verdict = run(verifier, EPOCH, fixed, AGF006, rule="AGF006")
    assert verdict.verdict == "accepted", verdict.reason
    evidence = verdict.units[0].evidence
    assert evidence["original"]["measured"]["graph_nodes"] > evidence["rewritten"]["measured"]["graph_nodes"]


def test_item_where_accumulator_is_backpropagated_is_rejected(verifier):
    original = MODEL + """

def multi_loss_step(model, loader, optimizer, criterion):
    optimizer.zero_grad()
    total = 0
    for x, y in loader:
        total += criterion(model(x), y)
    total.backward()
    optimizer.step()
    return total.detach()
"""
    wrong = original.replace("total += criterion(model(x), y)", "total += criterion(model(x), y).item()")
    verdict = run(verifier, original, wrong, AGF006)
    assert verdict.verdict == "rejected"
    assert "AttributeError" in verdict.reason


def test_rewrite_that_changes_a_value_is_rejected(verifier):
    changed = EPOCH.replace("return total_loss / len(loader)", "return total_loss.detach() / (len(loader) + 1)")
    verdict = run(verifier, EPOCH, changed)
    assert verdict.verdict == "rejected"
    assert "differ" in verdict.reason


# -- generic contract ------------------------------------------------------------------------
def test_equivalent_refactor_is_accepted_under_the_generic_contract(verifier):
    refactored = EPOCH.replace("        loss = criterion(model(x), y)\n", "        logits = model(x)\n        loss = criterion(logits, y)\n")
    verdict = run(verifier, EPOCH, refactored)
    assert verdict.verdict == "accepted", verdict.reason
    assert verdict.units[0].evidence["contract"] == "generic equivalence"


def test_generic_contract_rejects_more_retained_graph(verifier):
    verdict = run(verifier, EVAL_FIXED, EVAL_ORIG)
    assert verdict.verdict == "rejected"
    assert "higher" in verdict.reason


def test_generic_contract_accepts_fix_of_autograd_error(verifier):
    verdict = run(verifier, ACTIVATION, ACTIVATION.replace("    y.mul_(2)", "    y = y * 2"), None)
    # no tensor needs grad without a rule saying so: both run clean, outputs equal
    assert verdict.verdict == "accepted", verdict.reason


def test_method_unit_forward_change(verifier):
    changed = MODEL.replace("return self.fc2(torch.relu(self.fc1(x)))", "h = self.fc1(x)\n        return self.fc2(h.relu())")
    verdict = run(verifier, MODEL, changed)
    assert verdict.verdict == "accepted", verdict.reason
    assert verdict.units[0].name == "Net.forward"


def test_unknown_check_is_unverified(verifier):
    verdict = run(verifier, EVAL_ORIG, EVAL_FIXED, ("outputs_equal", "gradients_are_nice"))
    assert verdict.verdict == "unverified"
    assert "gradients_are_nice" in verdict.reason


def test_identical_versions_need_no_run(verifier):
    verdict = run(verifier, EVAL_ORIG, EVAL_ORIG + "\n# a comment\n")
    assert verdict.verdict == "accepted" and verdict.units == ()


# -- a script driver calls the Function: its backward is checked at the run's own inputs --
SWISH_SCRIPT = """
import torch


class Swish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        x = ctx.x
        s = torch.sigmoid(x)
        return grad_output * (s + x * s * (1 - s))


if __name__ == "__main__":
    torch.manual_seed(0)
    w = torch.randn(8, 8, requires_grad=True)
    for _ in range(3):
        loss = Swish.apply(torch.randn(4, 8) @ w).pow(2).mean()
        loss.backward()
    print(w.grad.norm().item())
"""

SWISH_SAVED = SWISH_SCRIPT.replace("        ctx.x = x\n", "        ctx.save_for_backward(x)\n").replace(
    "        x = ctx.x\n", "        (x,) = ctx.saved_tensors\n"
)


def test_script_driver_checks_the_functions_it_ran_against_finite_differences(verifier):
    verdict = run(verifier, SWISH_SCRIPT, SWISH_SAVED, AGF005)
    assert verdict.verdict == "accepted", verdict.reason
    assert verdict.driver == "script driver (__main__)"
    assert "Swish: backward matches finite differences at the run's inputs" in verdict.reason


def test_script_driver_rejects_a_backward_that_is_no_longer_the_derivative(verifier):
    wrong = SWISH_SAVED.replace("(s + x * s * (1 - s))", "(s + x * s)")
    verdict = run(verifier, SWISH_SCRIPT, wrong, AGF005)
    assert verdict.verdict == "rejected", verdict.reason


# -- a constructor's output is the object it builds (modelled on torch_geometric's LLM) --
LLM_WRAPPER = """
import torch
from torch import nn


class LLM(nn.Module):
    def __init__(self, hidden=8, dtype=torch.bfloat16):
        super().__init__()
        self.proj = nn.Linear(hidden, hidden)
        self.autocast_context = torch.cuda.amp.autocast(dtype=dtype)

    def forward(self, x):
        with self.autocast_context:
            return self.proj(x)
"""


def test_constructor_rewrite_that_keeps_the_autocast_settings_is_accepted(verifier):
    fixed = LLM_WRAPPER.replace("torch.cuda.amp.autocast(dtype=dtype)", 'torch.amp.autocast("cuda", dtype=dtype)')
    verdict = run(verifier, LLM_WRAPPER, fixed, entry="LLM.__init__")
    assert verdict.verdict == "accepted", verdict.reason


def test_constructor_rewrite_that_moves_autocast_to_another_device_is_rejected(verifier):
    wrong = LLM_WRAPPER.replace("torch.cuda.amp.autocast(dtype=dtype)", 'torch.autocast("cpu", dtype=dtype)')
    verdict = run(verifier, LLM_WRAPPER, wrong, entry="LLM.__init__")
    assert verdict.verdict == "rejected", verdict.reason
    assert "self.autocast_context.device: 'cuda' != 'cpu'" in verdict.reason


# -- a library file's same-file callers run too ----------------------------------------
TRAINER = """
import torch
from torch import nn


class Trainer:
    def __init__(self, module, lr=0.01):
        self.module = module
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.module.parameters(), lr=lr)

    def infer(self, x):
        return self.module(x)

    def train_step(self, x, y):
        self.module.train()
        self.optimizer.zero_grad()
        loss = self.criterion(self.infer(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def validation_step(self, x, y):
        self.module.eval()
        return self.criterion(self.infer(x), y).item()
"""


def test_no_grad_on_a_helper_the_training_step_backprops_through_is_rejected(verifier):
    """Modelled on skorch#218: the helper's own outputs are equal under no_grad, but the
    same-file train_step that calls it can no longer backpropagate."""
    wrong = TRAINER.replace("    def infer(self, x):", "    @torch.no_grad()\n    def infer(self, x):")
    verdict = run(verifier, TRAINER, wrong, AGF001)
    assert verdict.verdict == "rejected", verdict.reason
    assert "Trainer.train_step" in verdict.reason and "does not require grad" in verdict.reason


def test_no_grad_on_the_validation_step_is_accepted_though_callers_are_looked_for(verifier):
    right = TRAINER.replace("    def validation_step(self, x, y):", "    @torch.no_grad()\n    def validation_step(self, x, y):")
    verdict = run(verifier, TRAINER, right, AGF001)
    assert verdict.verdict == "accepted", verdict.reason


# -- AGF002 on a hand-written SGD loop (no optimizer) ------------------------------------
HAND_SGD = """
import torch

torch.manual_seed(0)
x, y = torch.randn(16, 10), torch.randn(16, 3)
w1 = torch.randn(10, 12, requires_grad=True)
w2 = torch.randn(12, 3, requires_grad=True)
learning_rate = 1e-3

for t in range(10):
    loss = (x.mm(w1).clamp(min=0).mm(w2) - y).pow(2).sum()
    loss.backward()
    with torch.no_grad():
        w1 -= learning_rate * w1.grad
        w2 -= learning_rate * w2.grad
print("final loss", loss.item())
"""


def test_manual_sgd_reset_after_the_update_is_accepted(verifier):
    """jcjohnson/pytorch-examples#4: the maintainer's fix clears .grad after the update."""
    fixed = HAND_SGD.replace("        w2 -= learning_rate * w2.grad\n", "        w2 -= learning_rate * w2.grad\n        w1.grad = None\n        w2.grad = None\n")
    verdict = run(verifier, HAND_SGD, fixed, AGF002)
    assert verdict.verdict == "accepted", verdict.reason
    assert "hand-written updates" in verdict.reason


def test_manual_sgd_zeroed_before_the_update_is_rejected(verifier):
    wrong = HAND_SGD.replace("    with torch.no_grad():\n", "    with torch.no_grad():\n        w1.grad.zero_()\n        w2.grad.zero_()\n")
    verdict = run(verifier, HAND_SGD, wrong, AGF002)
    assert verdict.verdict == "rejected", verdict.reason
    assert "gradient zero at step" in verdict.reason


def test_manual_update_through_data_with_a_clamp_is_one_update(verifier):
    """`w.data.sub_` reaches the parameter through its storage; the clamp that follows is
    part of the same update, not a second step with a stale gradient."""
    original = HAND_SGD.replace(
        "        w1 -= learning_rate * w1.grad\n",
        "        w1.data.sub_(learning_rate * w1.grad.data)\n        w1.clamp_(-1, 1)\n",
    )
    fixed = original.replace("        w2 -= learning_rate * w2.grad\n", "        w2 -= learning_rate * w2.grad\n        w1.grad.zero_()\n        w2.grad.zero_()\n")
    verdict = run(verifier, original, fixed, AGF002)
    assert verdict.verdict == "accepted", verdict.reason
    # both weights, 3 of the 10 iterations: a bounded run stops 2 backwards after the changed
    # code first ran (in the first iteration, after its backward)
    assert "(6 hand-written updates)" in verdict.reason, verdict.reason
    assert "stopped 2 backwards after the changed code ran (at loop `for t`" in verdict.reason, verdict.reason
