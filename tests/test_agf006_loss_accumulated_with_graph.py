"""AGF006 beyond the inline examples: the example script frees its graphs; several findings."""

from __future__ import annotations

import textwrap

import pytest

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.model import Applicability
from autograd_fix.codemods.rules.agf006_loss_accumulated_with_graph import LossAccumulatedWithGraph

UNSAFE = FixOptions(unsafe_fixes=True)


def _run(source: str, capsys) -> list[str]:
    exec(compile(source, "example.py", "exec"), {"__name__": "__main__"})
    return capsys.readouterr().out.splitlines()


@pytest.mark.torch
def test_example_script_keeps_values_and_frees_the_graph(repo_root, capsys) -> None:
    source = (repo_root / "examples" / "loss_accumulated_with_graph.py").read_text()
    fixed = check_source(source, [LossAccumulatedWithGraph], options=UNSAFE).fixed
    assert fixed is not None
    before, after = _run(source, capsys), _run(fixed, capsys)
    assert before[0] == after[0]  # the printed mean loss is the same number
    assert int(before[1].split()[-1]) > 0
    assert int(after[1].split()[-1]) == 0


def test_two_accumulators_give_two_findings_with_their_own_safety() -> None:
    source = textwrap.dedent(
        """
        total = 0.0
        kept = []
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            total += loss
            kept.append(loss)
        print(total)
        """
    ).lstrip()
    result = check_source(source, [LossAccumulatedWithGraph], options=UNSAFE)
    assert [f.fix.applicability for f in result.findings] == [Applicability.UNSAFE, Applicability.SAFE]
    assert "total += loss.item()" in result.fixed and "kept.append(loss.detach())" in result.fixed


def test_safe_fixes_only_leave_the_item_rewrite_out() -> None:
    source = textwrap.dedent(
        """
        total = 0.0
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            total += loss
        print(total)
        """
    ).lstrip()
    result = check_source(source, [LossAccumulatedWithGraph])
    assert result.findings and result.fixed is None


def test_accumulator_used_as_a_tensor_is_detached_not_itemised() -> None:
    source = textwrap.dedent(
        """
        total = 0.0
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            total += loss
        print(total.item())
        """
    ).lstrip()
    fixed = check_source(source, [LossAccumulatedWithGraph], options=UNSAFE).fixed
    assert fixed is not None and "total += loss.detach()" in fixed
