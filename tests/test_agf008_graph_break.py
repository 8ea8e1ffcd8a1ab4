"""AGF008 graph-break: interplay with AGF012 on one call, a real run of the example script."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_fix.codemods.engine import FixOptions, check_source, run_rules
from autograd_fix.codemods.registry import rule_by_code

AGF008 = rule_by_code("AGF008")
AGF012 = rule_by_code("AGF012")


REWRAP_VIA_VARIABLE = textwrap.dedent(
    """
    import torch
    from torch.autograd import Variable

    def train_step(net, images, labels, optimizer, criterion):
        optimizer.zero_grad()
        loss = Variable(criterion(net(images), labels).data, requires_grad=True)
        loss.backward()
        optimizer.step()
    """
).lstrip()


def test_graph_break_and_variable_fixes_compose() -> None:
    result = check_source(REWRAP_VIA_VARIABLE, [AGF008, AGF012], options=FixOptions(unsafe_fixes=True))
    assert sorted(f.code for f in result.findings) == ["AGF008", "AGF012"]
    assert result.fix_error is None
    assert "loss = criterion(net(images), labels)\n" in result.fixed


def test_safe_only_keeps_the_exact_meaning_and_agf008_still_fixes_afterwards() -> None:
    safe = check_source(REWRAP_VIA_VARIABLE, [AGF008, AGF012], options=FixOptions(unsafe_fixes=False))
    assert "criterion(net(images), labels).data.detach().requires_grad_()" in safe.fixed
    again = run_rules(cst.parse_module(safe.fixed), [AGF008], "example.py")
    assert [f.code for f in again if f.fix is not None] == ["AGF008"]
