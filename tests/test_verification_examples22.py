"""Issue 22: the README's first command (`autograd-fix --diff examples/`) shows every
example's fix accepted. Each test is the class of program an example stood for, judged
under its rule's own contract; each came back rejected or unverified before its fix
(see the docstrings).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autograd_fix.codemods.registry import rule_by_code
from autograd_fix.verification import verify_pair


def judge(verifier, original: str, rewritten: str, rule: str, **kw):
    checks = tuple(rule_by_code(rule).contract.checks)
    return verify_pair(original, rewritten, checks=checks, rule=rule, verifier=verifier, timeout=60, **kw)


# -- AGF011: two backward passes over one graph merged into one -------------------------------
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TWO_HEADS = (EXAMPLES / "unneeded_retain_graph.py").read_text()
SEPARATE = "        main_loss.backward(retain_graph=True)\n        aux_loss.backward()\n"


def test_merged_backward_passes_are_compared_on_the_losses_before_the_first_step(verifier):
    """`l1.backward(retain_graph=True); l2.backward()` -> `(l1 + l2).backward()`: the
    second point compared the first backward's loss (l1 against l1 + l2) and rejected
    the right fix. It compares the sum of the losses backpropagated before the first
    step; a merge that weighs a term differently still differs there."""
    right = judge(verifier, TWO_HEADS, TWO_HEADS.replace(SEPARATE, "        (main_loss + aux_loss).backward()\n"), "AGF011")
    assert right.verdict == "accepted", right.reason
    assert "at a second point too" in right.reason
    wrong = judge(verifier, TWO_HEADS, TWO_HEADS.replace(SEPARATE, "        (main_loss + 2 * aux_loss).backward()\n"), "AGF011")
    assert wrong.verdict == "rejected", wrong.reason


# -- clock readings are set aside by where they come from, not by their names ------------------
TIMED = '''import time

import torch

torch.manual_seed(0)
net = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
start = time.perf_counter()
for _ in range(3):
    optimizer.zero_grad()
    loss = net(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    optimizer.step()
per_step = (time.perf_counter() - start) / 3 * 1e3
end = loss.item()
print(f"{per_step:.2f} ms per step")
'''


@pytest.mark.torch  # the clock marks keep torch's weights-only unpickler able to load them
def test_clock_marks_survive_arithmetic_and_only_inside_the_block():
    import time

    from autograd_fix.verification.clock import is_clock_reading, marked_clocks

    with marked_clocks() as use:
        start = time.perf_counter()
        per_step = round((time.perf_counter() - start) / 3 * 1e3, 2)
        seconds = (time.perf_counter_ns() - time.perf_counter_ns()) / 1e9
        plain = 2.5 * 3
    assert is_clock_reading(per_step) and is_clock_reading(seconds) and not is_clock_reading(plain)
    assert use.reads == 4
    assert not is_clock_reading(time.perf_counter())


def test_a_timing_without_a_clock_name_is_set_aside_and_named_in_the_verdict(verifier):
    """`per_step` (no `time` in its name) held the original's step time and the right
    AGF017 fix was rejected on it ("per_step: 0.769 != 1.298")."""
    slower = TIMED.replace("for _ in range(3):", "for _ in range(3):\n    time.sleep(0.01)")
    verdict = judge(verifier, TIMED, slower, "AGF012")
    assert verdict.verdict == "accepted", verdict.reason
    assert "read from a clock: start, per_step" in verdict.reason


def test_a_result_named_like_a_clock_is_still_compared_when_the_run_reads_clocks(verifier):
    """`end = loss.item()` is a result: a name that sounds like a timing hides nothing."""
    wrong = TIMED.replace("lr=0.1", "lr=0.2")
    verdict = judge(verifier, TIMED, wrong, "AGF012")
    assert verdict.verdict == "rejected", verdict.reason
    assert "end:" in verdict.reason


# -- AGF017: anomaly mode's flag is state the fix changes on purpose ---------------------------
ANOMALY = (EXAMPLES / "anomaly_mode_or_empty_cache_in_training.py").read_text()
ANOMALY_ON = "torch.autograd.set_detect_anomaly(True)\n"


def test_a_printed_anomaly_flag_may_change_and_the_verdict_lists_it(verifier):
    """The example prints `"on" if torch.is_anomaly_enabled() else "off"`: the fix turns
    it off by design, and the verdict was "outputs differ: state: 'on' != 'off'"."""
    verdict = judge(verifier, ANOMALY, ANOMALY.replace(ANOMALY_ON, ""), "AGF017")
    assert verdict.verdict == "accepted", verdict.reason
    assert "state: on -> off" in verdict.reason and "read from a clock: start, per_step" in verdict.reason
    # the time saved, as a ratio of both runs' time per step (a report: no figure is asserted)
    assert re.search(r"time per step [\d.]+ ms -> [\d.]+ ms \([\d.]+x as fast", verdict.reason), verdict.reason


def test_a_removal_that_changes_training_is_still_rejected(verifier):
    """Setting the flag aside hides nothing else: the final loss printed on the same line
    is still compared."""
    wrong = ANOMALY.replace(ANOMALY_ON, "").replace("lr=0.05", "lr=0.5")
    verdict = judge(verifier, ANOMALY, wrong, "AGF017")
    assert verdict.verdict == "rejected", verdict.reason


def test_the_choices_of_a_conditional_on_anomaly_mode_are_graph_state():
    from autograd_fix.verification.graph_state import graph_state

    found = graph_state('state = "on" if torch.is_anomaly_enabled() else "off"\nprint(f"mode {state}")\n'
                        'label = "big" if x > 3 else "small"\n')
    assert found.choices == {"on", "off"}
    assert found.names == {"state"} and found.lines == {1, 2}


# -- AGF013: the corrected flag changes training on purpose ------------------------------------
FREEZE = (EXAMPLES / "require_grad_typo.py").read_text()
TYPO = "param.require_grad = name.startswith(\"2.\")"
LEARNED_SCALE = '''import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
for param in net[2].parameters():
    param.requires_grad = False
net[2].weight.require_grad = True
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    optimizer.zero_grad()
    loss = (net(x) - y).pow(2).mean()
    loss.backward()
    optimizer.step()
print(f"head {net[2].weight.sum().item():.4f}")
'''
FREE_SCALE = '''import torch

torch.manual_seed(0)
weight = torch.randn(4, 1, requires_grad=True)
scale = torch.ones(4)
scale.require_grad = True
optimizer = torch.optim.SGD([weight, scale], lr=0.1)
for _ in range(3):
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    optimizer.zero_grad()
    loss = ((x * scale) @ weight - y).pow(2).mean()
    loss.backward()
    optimizer.step()
'''


def test_a_corrected_freeze_is_accepted_though_parameters_end_differently(verifier):
    """The example freezes the backbone through the typo's fix: the backbone keeps its
    value and the head trains on a still backbone, so the parameters end differently by
    design; the verdict was "parameters end differently"."""
    verdict = judge(verifier, FREEZE, FREEZE.replace(TYPO, TYPO.replace("require_grad", "requires_grad")), "AGF013")
    assert verdict.verdict == "accepted", verdict.reason
    assert "2 tensor(s) frozen by the fix" in verdict.reason


def test_a_tensor_that_newly_trains_is_judged_by_finite_differences(verifier):
    """Unfreezing the head through the typo's fix: the head now trains, and its gradient
    is checked against finite differences. A free tensor, which those do not move, is
    not claimed checked."""
    fixed = LEARNED_SCALE.replace("weight.require_grad", "weight.requires_grad")
    verdict = judge(verifier, LEARNED_SCALE, fixed, "AGF013")
    assert verdict.verdict == "accepted", verdict.reason
    assert "newly get a gradient" in verdict.reason and "matches finite differences" in verdict.reason
    free = judge(verifier, FREE_SCALE, FREE_SCALE.replace("scale.require_grad", "scale.requires_grad"), "AGF013")
    assert free.verdict == "unverified", free.reason
    assert "scale newly gets a gradient" in str(free)  # the check says why it is n/a


def test_a_fix_that_changes_more_than_the_flag_is_rejected_before_the_first_step(verifier):
    """Training may differ after the first step, not before it: a rewrite that also
    moves a weight changes the first step's loss."""
    wrong = LEARNED_SCALE.replace("net[2].weight.require_grad = True", "net[2].weight.requires_grad = True\nnet[0].bias.data += 1")
    verdict = judge(verifier, LEARNED_SCALE, wrong, "AGF013")
    assert verdict.verdict == "rejected", verdict.reason
    assert "before the first step" in verdict.reason


# -- a custom backward whose original raises: judged by finite differences alone ---------------
UNSAFE_RELU = (EXAMPLES / "backward_branches_on_tensor.py").read_text()
BRANCH = "return grad_output if ctx.saved_tensors[0] > 0 else 0"


def test_a_backward_whose_original_raised_is_judged_by_finite_differences_alone(verifier):
    """The original backward raises "Boolean value of Tensor ... is ambiguous", so there is
    no original gradient to agree with: the verdict was unverified. The rewritten's
    backward is judged by finite differences alone, and the verdict says so."""
    right = UNSAFE_RELU.replace(BRANCH, "return torch.where(ctx.saved_tensors[0] > 0, grad_output, 0)")
    verdict = judge(verifier, UNSAFE_RELU, right, "AGF004")
    assert verdict.verdict == "accepted", verdict.reason
    assert "finite differences alone" in verdict.reason
    doubled = UNSAFE_RELU.replace(BRANCH, "return torch.where(ctx.saved_tensors[0] > 0, 2 * grad_output, 0)")
    assert judge(verifier, UNSAFE_RELU, doubled, "AGF004").verdict == "rejected"
    still = UNSAFE_RELU.replace(BRANCH, BRANCH.replace("else 0", "else None"))
    kept = judge(verifier, UNSAFE_RELU, still, "AGF004")
    assert kept.verdict == "rejected" and "raises too" in kept.reason, kept.reason


def test_agf004_leaves_a_branch_on_a_tensor_to_agf018():
    """`0 -> None` cannot mend `g if ctx.saved_tensors[0] > 0 else 0` (the test raises
    first); AGF018 reports it with `torch.where`."""
    from autograd_fix.codemods.engine import parse_module, run_rules

    rules = [rule_by_code("AGF004"), rule_by_code("AGF018")]
    codes = [f.code for f in run_rules(parse_module(UNSAFE_RELU), rules, "unsafe_relu.py", UNSAFE_RELU)]
    assert codes == ["AGF018"], codes


# -- AGF016: judged against a float64 reference run of the original ----------------------------
OVERFLOW = (EXAMPLES / "imprecise_log_exp.py").read_text()
NAIVE = "torch.log(torch.sum(torch.exp(logits), dim=1))"
SMALL = '''import torch

torch.manual_seed(0)
x = (torch.rand(6) * 1e-6).requires_grad_()
y = torch.log(1 + x)
y.sum().backward()
print(f"sum {y.sum().item():.6e}")
'''


def test_an_overflow_fix_is_accepted_against_the_float64_reference(verifier):
    """The naive log-sum-exp gives an `inf` loss and `nan` gradients; the fix, finite
    ones. Compared for equality it was rejected ("finite: False != True")."""
    verdict = judge(verifier, OVERFLOW, OVERFLOW.replace(NAIVE, "torch.logsumexp(logits, dim=1)"), "AGF016")
    assert verdict.verdict == "accepted", verdict.reason
    assert "float64 reference" in verdict.reason and "the rewritten at 0" in verdict.reason


def test_a_finite_but_wrong_rewrite_where_the_original_overflowed_is_rejected(verifier):
    """"Equal where the original is finite" would accept it: the original is `inf` there."""
    for wrong in ("torch.logsumexp(logits, dim=1) + 1.0", "torch.logsumexp(logits, dim=0)"):
        verdict = judge(verifier, OVERFLOW, OVERFLOW.replace(NAIVE, wrong), "AGF016")
        assert verdict.verdict == "rejected", (wrong, verdict.reason)


def test_a_precision_fix_is_accepted_and_a_wrong_one_rejected_where_the_original_was_right(verifier):
    """`log(1 + x)` for tiny x loses every digit the reference keeps; `log1p` keeps them.
    A rewrite further from the reference than the original is rejected."""
    right = judge(verifier, SMALL, SMALL.replace("torch.log(1 + x)", "torch.log1p(x)"), "AGF016")
    assert right.verdict == "accepted", right.reason
    wrong = judge(verifier, SMALL, SMALL.replace("torch.log(1 + x)", "torch.log1p(x) * 1.5"), "AGF016")
    assert wrong.verdict == "rejected", wrong.reason


@pytest.mark.torch
def test_a_clock_reading_saved_in_a_checkpoint_loads_with_weights_only():
    import io
    import time

    import torch

    from autograd_fix.verification.clock import marked_clocks

    with marked_clocks():
        elapsed = time.perf_counter() - 1.0
        buffer = io.BytesIO()
        torch.save({"train_time": elapsed}, buffer)
        buffer.seek(0)
        assert torch.load(buffer, weights_only=True)["train_time"] == float(elapsed)
