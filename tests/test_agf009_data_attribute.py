"""AGF009 on classes `benchmarks/recall_real` measured on code nobody here wrote (issue 18)."""

from __future__ import annotations

import textwrap

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.registry import rule_by_code

AGF009 = rule_by_code("AGF009")

TD_LOSS = """
import torch
import torch.nn as nn

model = nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())


def compute_td_loss(state, target):
    loss = (model(state).max(1)[0] - target).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


losses = []
for frame_idx in range(100):
    loss = compute_td_loss(torch.randn(8, 4), torch.randn(8))
    losses.append(loss.data[0])
"""


def test_loss_data_0_of_a_loss_a_training_helper_returns_becomes_item() -> None:
    # the helper backpropagates the name it returns: a tracked, one-element loss
    result = check_source(textwrap.dedent(TD_LOSS).lstrip(), [AGF009], options=FixOptions(unsafe_fixes=True))
    [finding] = result.findings
    assert "IndexError" in finding.message
    assert "losses.append(loss.item())" in result.fixed


def test_a_helper_that_returns_something_it_does_not_backpropagate_says_nothing() -> None:
    source = TD_LOSS.replace("    return loss\n", "    return loss.detach().clone().unsqueeze(0)\n")
    assert check_source(textwrap.dedent(source).lstrip(), [AGF009]).findings == []
