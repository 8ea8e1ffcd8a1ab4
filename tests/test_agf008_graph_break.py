"""AGF008 graph-break: interplay with AGF012 on one call, a real run of the example script."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import libcst as cst

from autograd_fix.codemods.engine import FixOptions, check_source, run_rules
from autograd_fix.codemods.registry import rule_by_code

AGF008 = rule_by_code("AGF008")
AGF012 = rule_by_code("AGF012")
RULE = AGF008
SCRIPT, BEFORE, AFTER = "graph_break.py", "did not learn", "\nlearned"


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


def _run(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-W", "error::FutureWarning", path], capture_output=True, text=True, timeout=120)


def test_example_script_is_repaired_by_the_fix(repo_root, tmp_path) -> None:
    path = repo_root / "examples" / SCRIPT
    original = _run(str(path))
    assert BEFORE in original.stdout + original.stderr
    result = check_source(path.read_text(), [RULE], path=str(path), options=FixOptions(unsafe_fixes=True))
    assert any(f.code == RULE.code for f in result.findings) and result.fixed is not None
    fixed_path = tmp_path / SCRIPT
    fixed_path.write_text(result.fixed)
    fixed = _run(str(fixed_path))
    assert fixed.returncode == 0, fixed.stderr[-1000:]
    assert AFTER in fixed.stdout
