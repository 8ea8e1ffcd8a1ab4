"""AGF018 and tensors that hold one element: a flag `forward` saves as `torch.ones(1)` or
`torch.tensor([flag])` has a legal truth value (nn-toolbox's ShakeShake, a binarizer's
"needs grad" flag), and `tensor == None` is Python's False; both were reported before.
What still holds more than one element in some run stays reported, and AGF004 gets the
same answer as AGF018 (one question, one answer)."""

from __future__ import annotations

import textwrap

import pytest
import torch

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.registry import rule_by_code


def _lines(code: str, source: str) -> list[int]:
    result = check_source(textwrap.dedent(source).lstrip("\n"), [rule_by_code(code)], options=FixOptions(unsafe_fixes=True))
    return sorted(f.span.line for f in result.findings)


def _function(save: str, test: str, prelude: str = "") -> str:
    return f"""
import torch as T

class Gate(T.autograd.Function):
    @staticmethod
    def forward(ctx, x):
{textwrap.indent(textwrap.dedent(prelude), " " * 8)}        ctx.save_for_backward({save})
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        flag, x = ctx.saved_tensors
        if {test}:
            return grad_output
        return grad_output * 0
"""


@pytest.mark.parametrize(
    ("save", "prelude"),
    [
        ("T.ones(1), x", ""),
        ("-T.ones(1), x", ""),
        ("T.zeros((1,)).int(), x", ""),
        ("T.full([1, 1], 2.0), x", ""),
        ("T.tensor(0.5), x", ""),
        ("T.tensor([x.requires_grad]), x", ""),
        ("flag, x", "flag = T.tensor([x.requires_grad])\n"),
    ],
)
def test_a_flag_saved_with_one_element_is_left_alone(save, prelude):
    assert _lines("AGF018", _function(save, "flag", prelude)) == []
    assert _lines("AGF018", _function(save, "flag == 1", prelude)) == []


@pytest.mark.parametrize(
    ("save", "prelude"),
    [
        ("T.ones(2), x", ""),  # two elements
        ("T.tensor([[1.0, 2.0]]), x", ""),  # one row of two
        ("T.tensor(values), x", "values = [1.0, 2.0]\n"),  # data of unknown length
        ("flag, x", "flag = T.ones(1)\nflag = x.sum(0)\n"),  # rebound to a reduction along a dim
        ("x, x", ""),  # the input itself
        ("*[T.ones(1), x]", ""),  # unpacked: positions unknown
    ],
)
def test_what_may_hold_more_elements_is_still_reported(save, prelude):
    assert _lines("AGF018", _function(save, "flag > 0", prelude)) == [12 + prelude.count("\n")]


def test_the_other_slot_is_still_reported():
    source = _function("T.ones(1), x", "x > 0")
    assert _lines("AGF018", source) == [12]


def test_a_comparison_with_none_is_a_python_bool():
    x = torch.randn(3)
    assert (x == None) is False and (x != None) is True  # noqa: E711 (what the rule relies on)
    source = """
    import torch

    class HTanh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.nn.functional.hardtanh(x)

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            if x == None or grad_output != None and x > 1:
                return grad_output
            return grad_output * 0
    """
    assert _lines("AGF018", source) == [12]  # only `x > 1` asks for a truth value
    assert _lines("AGF018", source.replace(" and x > 1", "")) == []


def test_agf004_agrees_on_a_one_element_flag():
    """A `0` branch under a one-element flag: not AGF018's (legal test); AGF004 may
    turn the `0` into None, as for any Python condition."""
    source = _function("T.ones(1), x", "flag", "").replace(
        "        if flag:\n            return grad_output\n        return grad_output * 0",
        "        return grad_output if flag else 0",
    )
    assert _lines("AGF018", source) == []
    assert _lines("AGF004", source) == [12]


def test_the_saved_flag_really_is_legal():
    class Gate(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(torch.tensor([x.requires_grad]), x)
            return x.clamp(min=0)

        @staticmethod
        def backward(ctx, grad_output):
            flag, x = ctx.saved_tensors
            return grad_output if flag else grad_output * 0

    x = torch.randn(5, requires_grad=True)
    Gate.apply(x).sum().backward()
    assert torch.equal(x.grad, torch.ones(5))
