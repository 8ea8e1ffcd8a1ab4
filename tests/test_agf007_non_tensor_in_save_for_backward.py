"""AGF007 beyond the inline examples: the example script runs after the fix and the
fixed Function's gradients are right."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
import torch

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.rules.agf007_non_tensor_in_save_for_backward import NonTensorInSaveForBackward

REPO = Path(__file__).resolve().parent.parent


def test_example_script_raises_before_and_trains_after_the_fix(tmp_path: Path) -> None:
    path = REPO / "examples" / "non_tensor_in_save_for_backward.py"
    original = path.read_text()
    target = tmp_path / path.name
    target.write_text(original)
    with pytest.raises(TypeError, match="save_for_backward can only save variables"):
        runpy.run_path(str(target))["train"](steps=1)
    fixed = check_source(original, [NonTensorInSaveForBackward], options=FixOptions()).fixed
    assert fixed is not None
    target.write_text(fixed)
    namespace = runpy.run_path(str(target))
    namespace["train"](steps=2)
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: namespace["ScaledTanh"].apply(t, 1.7), (x,))


def test_report_only_when_saved_tensors_is_kept_in_a_variable() -> None:
    source = (
        "import torch\n\nclass F(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x, k: int):\n"
        "        ctx.save_for_backward(x, k)\n        return x * k\n\n    @staticmethod\n    def backward(ctx, g):\n"
        "        saved = ctx.saved_tensors\n        return g * saved[1], None\n"
    )
    result = check_source(source, [NonTensorInSaveForBackward], options=FixOptions(unsafe_fixes=True))
    assert len(result.findings) == 1 and result.findings[0].fix is None
