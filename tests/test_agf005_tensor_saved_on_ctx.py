"""AGF005 beyond the inline examples: interplay with AGF007, and the example script's
ctx objects being freed without the garbage collector after the fix."""

from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import torch

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.rules.agf005_tensor_saved_on_ctx import TensorSavedOnCtx
from autograd_fix.codemods.rules.agf007_non_tensor_in_save_for_backward import NonTensorInSaveForBackward

REPO = Path(__file__).resolve().parent.parent


def test_with_agf007_both_fixes_converge() -> None:
    source = textwrap.dedent(
        """
        import torch

        class ScaledExp(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, scale: float):
                ctx.save_for_backward(x, scale)
                out = torch.exp(x) * scale
                ctx.out = out
                return out

            @staticmethod
            def backward(ctx, g):
                x, scale = ctx.saved_tensors
                return g * ctx.out, None
        """
    ).lstrip("\n")
    rules = [TensorSavedOnCtx, NonTensorInSaveForBackward]
    result = check_source(source, rules, options=FixOptions())
    assert {f.code for f in result.findings} == {"AGF005", "AGF007"}
    assert result.fixed is not None and result.fix_error is None
    assert check_source(result.fixed, rules).findings == []
    namespace: dict = {}
    exec(compile(result.fixed, "<fixed>", "exec"), namespace)
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: namespace["ScaledExp"].apply(t, 1.5), (x,))


def test_example_script_frees_ctx_without_gc_after_the_fix(tmp_path: Path) -> None:
    path = REPO / "examples" / "tensor_saved_on_ctx.py"
    original = path.read_text()
    target = tmp_path / path.name
    target.write_text(original)
    assert runpy.run_path(str(target))["train"](steps=3) == 3
    fixed = check_source(original, [TensorSavedOnCtx], options=FixOptions()).fixed
    assert fixed is not None
    target.write_text(fixed)
    namespace = runpy.run_path(str(target))
    assert namespace["train"](steps=3) == 0
    x = torch.randn(6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(namespace["Swish"].apply, (x,))
