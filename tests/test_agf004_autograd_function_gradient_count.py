"""AGF004 beyond the inline examples: apply aliases, import spellings, CRLF, several
returns, fix applicability, and the example script actually running after the fix."""

from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import pytest
import torch

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.model import Applicability
from autograd_fix.codemods.rules.agf004_autograd_function_gradient_count import AutogradFunctionGradientCount as Rule

REPO = Path(__file__).resolve().parent.parent


def _check(source: str, unsafe: bool = True):
    return check_source(textwrap.dedent(source).lstrip("\n"), [Rule], options=FixOptions(unsafe_fixes=unsafe))


GRL = """
from torch.autograd.function import Function

class GradReverse(Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.neg() * ctx.alpha
"""


def test_alias_of_apply_with_literal_arguments_is_fixed_safely() -> None:
    result = _check(GRL + "\ngrad_reverse = GradReverse.apply\n\ndef head(h):\n    return grad_reverse(h, 0.3)\n")
    assert [f.fix.applicability for f in result.findings] == [Applicability.SAFE]
    assert "return grad_output.neg() * ctx.alpha, None" in result.fixed


def test_attribute_used_only_as_a_factor_is_an_unsafe_fix() -> None:
    result = _check(GRL)
    assert [f.fix.applicability for f in result.findings] == [Applicability.UNSAFE]
    assert _check(GRL, unsafe=False).fixed is None


def test_an_input_that_may_need_a_gradient_is_padded_only_as_an_unsafe_fix() -> None:
    """A weight passed to `apply`: only a run can show it never requires grad."""
    source = """
    import torch

    class Bilinear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight):
            ctx.save_for_backward(x, weight)
            return x.mm(weight)

        @staticmethod
        def backward(ctx, grad_output):
            x, weight = ctx.saved_tensors
            return grad_output.mm(weight.t())
    """
    result = _check(source)
    assert [f.fix.applicability for f in result.findings] == [Applicability.UNSAFE]
    assert "`weight` may need a gradient" in result.findings[0].message
    assert "return grad_output.mm(weight.t()), None" in result.fixed
    assert _check(source, unsafe=False).fixed is None


def test_apply_passed_around_with_defaults_is_left_alone() -> None:
    source = """
    import torch

    class Smooth(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, beta=1.0):
            ctx.beta = beta
            return x * beta

        @staticmethod
        def backward(ctx, g):
            return g * ctx.beta

    smooth = torch.compiler.disable(Smooth.apply)
    """
    # `apply` escapes: the argument count is unknown and one gradient may be right
    assert _check(textwrap.dedent(source)).findings == []


def test_each_short_return_is_reported_and_fixed() -> None:
    source = """
    import torch

    class Clip(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, limit: float):
            ctx.save_for_backward(x)
            ctx.limit = limit
            return x.clamp(-limit, limit)

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            if ctx.needs_input_grad[0]:
                return g * (x.abs() <= ctx.limit)
            return None
    """
    result = _check(textwrap.dedent(source))
    assert len(result.findings) == 2
    assert "return g * (x.abs() <= ctx.limit), None" in result.fixed
    assert "return None, None" in result.fixed


def test_crlf_source_keeps_its_line_endings() -> None:
    source = textwrap.dedent(GRL).lstrip("\n").replace("alpha):", "alpha: float):").replace("\n", "\r\n")
    result = check_source(source, [Rule], options=FixOptions())
    assert result.fixed is not None
    assert "ctx.alpha, None\r\n" in result.fixed
    assert "\n" not in result.fixed.replace("\r\n", "")


def _load(path: Path, text: str, tmp_path: Path) -> dict:
    target = tmp_path / path.name
    target.write_text(text)
    return runpy.run_path(str(target))


def test_example_script_raises_before_and_trains_after_the_fix(tmp_path: Path) -> None:
    path = REPO / "examples" / "autograd_function_gradient_count.py"
    original = path.read_text()
    namespace = _load(path, original, tmp_path)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        namespace["train"](steps=1)
    fixed = check_source(original, [Rule], options=FixOptions()).fixed
    assert fixed is not None
    namespace = _load(path, fixed, tmp_path)
    namespace["train"](steps=2)
    x = torch.randn(4, 3, dtype=torch.float64).add(0.05).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: namespace["LeakyReLU"].apply(t, 0.1), (x,))


ADDER = """
import math

import torch
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
RESCALE = "        grad_W_col = grad_W_col / grad_W_col.norm"
DROPPED = "        grad_X_col = (-(X_col"


def _without(source: str, prefix: str) -> str:
    return "".join(line for line in source.splitlines(keepends=True) if not line.startswith(prefix))


def test_a_gradient_rescaled_in_place_of_its_name_is_still_one_tensor() -> None:
    """huawei-noah/AdderNet#21: `grad_W_col` is computed, then reassigned from itself
    (normalised); the backward returns it alone for two inputs."""
    source = _without(ADDER, DROPPED)
    result = _check(source)
    assert [f.code for f in result.findings] == ["AGF004"]
    assert "returns 1 gradient but `forward` takes 2 inputs" in result.findings[0].message
    # nothing computes X_col's gradient: only None can pad, and only a run can keep it
    assert "return grad_W_col, None" in result.fixed


def test_a_gradient_computed_and_never_returned_is_what_the_fix_returns() -> None:
    """AdderNet#21's hand fix: `return grad_W_col, grad_X_col`. The backward computed the
    input's gradient and dropped it; returning it (unsafe, judged by a run) beats None."""
    source = _without(ADDER, RESCALE)
    result = _check(source)
    assert "it computes `grad_X_col` but never returns it" in result.findings[0].message
    assert [f.fix.applicability for f in result.findings] == [Applicability.UNSAFE]
    assert "return grad_W_col, grad_X_col" in result.fixed
    assert _check(source, unsafe=False).fixed is None
    # two computed, one missing: which one is meant is not settled, so None it is
    two = source.replace("        return grad_W_col\n", "        spare = grad_W_col.abs() * 2\n        return grad_W_col\n")
    assert "return grad_W_col, None" in _check(two).fixed
    # one assignment from something unknown (a helper may return a tuple) leaves it unknown
    unknown = source.replace(
        "        return grad_W_col\n",
        "        if W_col.dim() > 5:\n            grad_W_col = helper(grad_W_col)\n        return grad_W_col\n",
    )
    assert "helper(grad_W_col)" in unknown
    assert _check(unknown).findings == []
