"""AGF012 deprecated-autograd-api: aliases, positional autocast arguments, a real run of the example script."""

from __future__ import annotations

import textwrap

import pytest

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.registry import rule_by_code
from autograd_fix.codemods.torch_version import TorchVersion

AGF012 = rule_by_code("AGF012")


def test_amp_alias_and_two_findings_in_one_file() -> None:
    source = textwrap.dedent(
        """
        from torch.cuda.amp import autocast as ac, GradScaler as GS
        import torch.cuda.amp

        s = GS()
        with ac(False):
            pass
        with torch.cuda.amp.autocast(True, torch.float16, False):
            pass
        """
    ).lstrip()
    result = check_source(source, [AGF012])
    assert len(result.findings) == 3
    assert 's = torch.amp.GradScaler("cuda")' in result.fixed
    assert 'with torch.amp.autocast("cuda", enabled=False):' in result.fixed
    assert 'torch.amp.autocast("cuda", enabled=True, dtype=torch.float16, cache_enabled=False)' in result.fixed


AMP_TRAINING = textwrap.dedent(
    """
    import torch
    from torch.autograd import Variable


    class ScaledMatmul(torch.autograd.Function):
        @staticmethod
        @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a @ b

        @staticmethod
        @torch.cuda.amp.custom_bwd
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            return grad @ b.t(), a.t() @ grad


    def train(model, train_loader, optimizer, criterion):
        scaler = torch.cuda.amp.GradScaler()
        for images, labels in train_loader:
            images = Variable(images.cuda())
            optimizer.zero_grad()
            with torch.cuda.amp.autocast():
                loss = criterion(model(images), labels)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    """
).lstrip()


def _reported_apis(floor: TorchVersion | None) -> tuple[set[str], str]:
    """The old APIs reported (by the line each finding points at) and the fixed text."""
    result = check_source(AMP_TRAINING, [AGF012], options=FixOptions(target_torch=floor))
    lines = AMP_TRAINING.splitlines()
    apis = ("custom_fwd", "custom_bwd", "GradScaler", "autocast", "Variable")
    reported = {api for f in result.findings for api in apis if api in lines[f.span.line - 1]}
    assert len(result.findings) == len(reported)
    return reported, result.fixed or AMP_TRAINING


@pytest.mark.parametrize(
    ("floor", "expected"),
    [
        pytest.param(None, {"custom_fwd", "custom_bwd", "GradScaler", "autocast", "Variable"}, id="newest"),
        pytest.param(TorchVersion(2, 4), {"custom_fwd", "custom_bwd", "GradScaler", "autocast", "Variable"}, id="2.4"),
        pytest.param(TorchVersion(2, 3), {"GradScaler", "autocast", "Variable"}, id="2.3"),
        pytest.param(TorchVersion(2, 1), {"autocast", "Variable"}, id="2.1"),
        pytest.param(TorchVersion(1, 11), {"Variable"}, id="1.11"),
    ],
)
def test_amp_rewrites_respect_the_target_torch_floor(floor: TorchVersion | None, expected: set[str]) -> None:
    reported, fixed = _reported_apis(floor)
    assert reported == expected
    # what is not reported is left exactly as it was; what is reported is rewritten
    assert ("torch.amp.GradScaler(\"cuda\")" in fixed) == ("GradScaler" in expected)
    assert ("torch.cuda.amp.GradScaler()" in fixed) == ("GradScaler" not in expected)
    assert ('@torch.amp.custom_bwd(device_type="cuda")' in fixed) == ("custom_bwd" in expected)
    assert ('with torch.amp.autocast("cuda"):' in fixed) == ("autocast" in expected)
    assert "images = images.cuda()" in fixed
    # a second run at the same floor finds nothing left to fix
    again = check_source(fixed, [AGF012], options=FixOptions(target_torch=floor))
    assert again.fixed is None and all(f.fix is None for f in again.findings)


def test_report_only_amp_findings_also_respect_the_floor() -> None:
    source = "import torch\n\ndef run(model, x, amp_args):\n    with torch.cuda.amp.autocast(*amp_args):\n        return model(x)\n"
    assert len(check_source(source, [AGF012]).findings) == 1
    assert check_source(source, [AGF012], options=FixOptions(target_torch=TorchVersion(1, 10))).findings == []


def test_volatile_through_a_project_lambda_alias_of_variable_is_reported() -> None:
    # RL-Adventure's notebooks: every later `Variable(..., volatile=True)` is a call of the
    # lambda, whose `autograd.Variable` call takes the keyword through **kwargs
    source = textwrap.dedent(
        """
        import torch
        import torch.autograd as autograd

        USE_CUDA = torch.cuda.is_available()
        Variable = lambda *args, **kwargs: autograd.Variable(*args, **kwargs).cuda() if USE_CUDA else autograd.Variable(*args, **kwargs)


        def act(model, state):
            state = Variable(torch.FloatTensor(state).unsqueeze(0), volatile=True)
            return model(state).max(1)[1].data[0]


        def batch(state, action):
            return Variable(torch.FloatTensor(state)), Variable(torch.LongTensor(action), volatile=False)
        """
    ).lstrip()
    result = check_source(source, [AGF012])
    volatile = [f for f in result.findings if "volatile" in f.message]
    assert [f.span.line for f in volatile] == [9]
    assert all(f.fix is None for f in volatile)
    # the lambda's own autograd.Variable calls are reported as before
    assert {f.span.line for f in result.findings} == {5, 9}
