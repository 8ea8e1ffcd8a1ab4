"""AGF013-AGF016 (TorchFix's gradient rules) beyond their inline examples: the
`target-torch` floor, look-alikes the issue names, and what the rewrites compute."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.registry import rule_by_code
from autograd_fix.codemods.torch_version import TorchVersion


def _check(code: str, source: str, floor: str | None = None):
    options = FixOptions(unsafe_fixes=True, target_torch=TorchVersion.parse(floor) if floor else None)
    return check_source(textwrap.dedent(source).lstrip("\n"), [rule_by_code(code)], options=options)


ZERO_GRAD = """
import torch
opt = torch.optim.SGD(model.parameters(), lr=0.1)
opt.zero_grad(set_to_none=False)
"""


@pytest.mark.parametrize(
    ("floor", "expected"),
    [
        (None, "opt.zero_grad()"),
        ("2.0", "opt.zero_grad()"),
        ("1.13", "opt.zero_grad(set_to_none=True)"),
        ("1.7", "opt.zero_grad(set_to_none=True)"),
    ],
)
def test_set_to_none_fix_follows_the_torch_floor(floor, expected):
    result = _check("AGF015", ZERO_GRAD, floor)
    assert result.fixed is not None and result.fixed.splitlines()[-1] == expected


def test_set_to_none_is_silent_where_the_argument_does_not_exist():
    assert _check("AGF015", ZERO_GRAD, "1.6").findings == []


def test_checkpoint_is_silent_below_use_reentrant():
    source = """
    from torch.utils.checkpoint import checkpoint
    y = checkpoint(block, x)
    """
    assert _check("AGF014", source, "1.10").findings == []
    assert len(_check("AGF014", source, "1.11").findings) == 1


def test_a_user_checkpoint_shadowing_nothing_imported_is_not_torch():
    source = """
    import torch
    from mylib.utils import checkpoint
    y = checkpoint(block, x)
    """
    assert _check("AGF014", source).findings == []


def test_require_grad_on_a_user_object_with_that_attribute_is_silent():
    source = """
    import torch

    class Gate:
        require_grad = False

    gate = Gate()
    gate.require_grad = True
    for param in model.parameters():
        param.require_grad = False
    """
    result = _check("AGF013", source)
    assert [f.span.line for f in result.findings] == [9]


def test_require_grad_fix_makes_the_flag_take_effect():
    """The typo'd loop freezes nothing; the fixed one freezes the layer."""
    source = """
    import torch.nn as nn
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    for name, param in model.named_parameters():
        param.require_grad = name.startswith("1.")
    """
    result = _check("AGF013", source)
    assert result.fixed is not None
    for text, frozen in ((textwrap.dedent(source), 0), (result.fixed, 2)):
        scope: dict = {}
        exec(compile(text, "<example>", "exec"), scope)
        assert sum(not p.requires_grad for p in scope["model"].parameters()) == frozen


def test_log_on_python_floats_and_numpy_is_never_torch():
    source = """
    import math
    import numpy as np
    import torch
    a = math.log(1 + eps)
    b = np.log(1 + arr)
    c = np.exp(arr) - 1
    """
    assert _check("AGF016", source).findings == []


def test_rewrites_agree_with_the_naive_forms_where_those_are_finite_and_not_where_they_overflow():
    x = torch.linspace(-3, 3, 7, dtype=torch.float64, requires_grad=True)
    pairs = [
        (torch.log(1 + x.abs()), torch.log1p(x.abs())),
        (torch.exp(x) - 1, torch.expm1(x)),
        (torch.log(torch.sum(torch.exp(x[None]), 1)), torch.logsumexp(x[None], 1)),
    ]
    for naive, stable in pairs:
        torch.testing.assert_close(naive, stable)
        (g_naive,) = torch.autograd.grad(naive.sum(), x)
        (g_stable,) = torch.autograd.grad(stable.sum(), x)
        torch.testing.assert_close(g_naive, g_stable)
    big = torch.tensor([[100.0, 100.0]], requires_grad=True)
    assert torch.isinf(torch.log(torch.sum(torch.exp(big), 1))).all()
    assert torch.isfinite(torch.logsumexp(big, 1)).all()
    tiny = torch.tensor([1e-8])
    assert torch.log(1 + tiny).item() == 0.0 and torch.log1p(tiny).item() > 0.0


def test_each_torchfix_code_has_one_rule_here():
    """The peer benchmark's mapping points at rules that exist (it needs no TorchFix checkout)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "peer_torchfix.py"
    spec = importlib.util.spec_from_file_location("peer_torchfix_for_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    assert all(rule_by_code(code) is not None for code in module.CODE_MAP.values())


def test_backward_branch_fix_passes_gradcheck_where_the_original_raised():
    source = """
    import torch

    class UnsafeRelu(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clamp(min=0)

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output if ctx.saved_tensors[0] > 0 else 0
    """
    result = _check("AGF018", source)
    assert result.fixed is not None
    x = torch.tensor([-1.5, -0.3, 0.4, 2.0], dtype=torch.float64, requires_grad=True)
    for text, works in ((textwrap.dedent(source), False), (result.fixed, True)):
        scope: dict = {}
        exec(compile(text, "<example>", "exec"), scope)
        if works:
            assert torch.autograd.gradcheck(scope["UnsafeRelu"].apply, (x,))
        else:
            with pytest.raises(RuntimeError, match="ambiguous"):
                scope["UnsafeRelu"].apply(x).sum().backward()


def test_anomaly_mode_in_a_function_that_only_evaluates_is_left_alone():
    source = """
    import torch

    def evaluate(model, loader):
        torch.autograd.set_detect_anomaly(True)
        with torch.no_grad():
            return [model(x) for x in loader]
    """
    assert _check("AGF017", source).findings == []


def test_anomaly_fix_keeps_the_training_results():
    source = """
    import torch
    torch.manual_seed(0)
    torch.autograd.set_detect_anomaly(True)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        opt.zero_grad()
        model(torch.randn(4, 3)).pow(2).mean().backward()
        opt.step()
    """
    result = _check("AGF017", source)
    assert result.fixed is not None and "set_detect_anomaly" not in result.fixed
    weights = []
    for text in (textwrap.dedent(source), result.fixed):
        scope: dict = {}
        exec(compile(text, "<example>", "exec"), scope)
        torch.autograd.set_detect_anomaly(False)
        weights.append(scope["model"].weight.detach().clone())
    torch.testing.assert_close(weights[0], weights[1], rtol=0, atol=0)
